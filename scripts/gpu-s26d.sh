#!/usr/bin/env bash
# Session 26's closing device call (5 to 7 minutes): the session's final tree on a GPU. Build
# (benchmarks, no MPI); a topo dump; plan against encode (REPEAT=5) for issue 17's two jobs, the
# 2^28 float64 state and the 65536 x 1021 batch, without an output and with --out (REPEAT=3,
# file to file); issue 16's figures (bench_cuda: fill, one 2^30 product state, phase, the
# 65536 x 10-qubit batches, IQP; medians of 3). Each step is skipped when the deadline DL
# (default 420 s) is near. Everything under $OUT/s26d, packed as $OUT/s26d.tar.gz.
# Usage (device tool, carry [".devdeps"]): DL=420 bash scripts/gpu-s26d.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R=${OUT:?}/s26d; mkdir -p $R
trap 'tar -czf $OUT/s26d.tar.gz -C $OUT s26d' EXIT
DL=${DL:-420}
left() { [ $SECONDS -lt $(($DL - $1)) ]; } # true when more than $1 seconds are left
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
Q=build-gpu/qmesh D=/tmp/s26d; mkdir -p $D
qm_datapath_inputs $D &
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DQM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DQM_BUILD_BENCH=ON -DQM_WERROR=ON -DQM_WITH_MPI=OFF > $R/configure.log 2>&1 || { tail -20 $R/configure.log; exit 1; }
cmake --build build-gpu -j16 --target qmesh_cli bench_cuda > $R/build.log 2>&1 || { grep -E "error" -A3 $R/build.log | head -30; exit 1; }
wait
echo "built at $SECONDS s"
$Q topo dump --storage-bytes 2GiB --out $D/machine.yaml 2> $R/dump.txt; cp $D/machine.yaml $R/
grep -E "storage read|pinned|device setup|first allocation|local_norm's roots|work per state" $R/dump.txt
for j in x28 b; do
  left 60 || break
  REPEAT=5 timeout 90 sh scripts/plan-vs-encode.sh $Q $D/$j.npy --scenario $D/machine.yaml --backend cuda > $R/planvs-$j.txt 2>&1; cat $R/planvs-$j.txt
done
for j in x28 b; do
  left 100 || break
  REPEAT=3 timeout 120 sh scripts/plan-vs-encode.sh $Q $D/$j.npy --scenario $D/machine.yaml --backend cuda --out $D/o-$j.npy > $R/planvs-$j-out.txt 2>&1; cat $R/planvs-$j-out.txt
  rm -f $D/o-$j.npy
done
rm -rf $D
echo "data path at $SECONDS s"
if left 130 && [ -x build-gpu/bench/bench_cuda ]; then
  timeout $(($DL - SECONDS - 20)) build-gpu/bench/bench_cuda --benchmark_filter="${FILTER:-BM_WriteFill|BM_Product/30/1/[01]/5/|BM_ProductPhase/30/1/[01]/5/|BM_Product/10/65536/[01]/5/|BM_ProductPhase/10/65536/[01]/5/|BM_Iqp/[0-9]+/[0-9]+/[01]/4/}" \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true > $R/bench.txt 2>&1
  grep -E "median" $R/bench.txt | sed -E 's/ +/ /g' | cut -c1-200
fi
echo "s26d done at $SECONDS s"
