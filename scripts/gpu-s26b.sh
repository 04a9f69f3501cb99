#!/usr/bin/env bash
# Session 26's second device call (5 to 8 minutes): the local_norm roots made inside the ingest,
# checked and measured on a GPU. Build everything (benchmarks, no MPI); ctest on the GPU (every
# label but mpi and fault: the CUDA cases run here); a topo dump; a 2^28 state encoded on the GPU
# and on the simulator to .npy files, compared byte for byte; plan against encode (REPEAT=5) for
# the 2^28 float64 state and the 65536 x 1021 batch, and one QM_TRACE=2 encode of each; issue 16's
# IQP figures (bench_cuda, medians of 3). Each step is skipped when the deadline DL (default 420 s)
# is near. Everything under $OUT/s26b, packed as $OUT/s26b.tar.gz.
# Usage (device tool, carry [".devdeps"]): DL=420 bash scripts/gpu-s26b.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R=${OUT:?}/s26b; mkdir -p $R
trap 'tar -czf $OUT/s26b.tar.gz -C $OUT s26b' EXIT
DL=${DL:-420}
left() { [ $SECONDS -lt $(($DL - $1)) ]; } # true when more than $1 seconds are left
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
Q=build-gpu/qmesh D=/tmp/s26d; mkdir -p $D
qm_datapath_inputs $D &
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DQM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DQM_BUILD_BENCH=ON -DQM_WERROR=ON -DQM_WITH_MPI=OFF -DPython3_EXECUTABLE="$(command -v python3)" \
  > $R/configure.log 2>&1 || { tail -20 $R/configure.log; exit 1; }
cmake --build build-gpu -j16 > $R/build.log 2>&1 || { grep -E "error" -A3 $R/build.log | head -30; exit 1; }
wait
echo "built at $SECONDS s"
(cd build-gpu && env -u QM_CUDA_BIG timeout $(($DL / 2)) ctest -j6 -LE "mpi|fault" --output-on-failure) > $R/ctest.log 2>&1
grep -E "tests passed|FAILED|Failed|\(Failed\)|Not Run|Timeout" $R/ctest.log | head -20
echo "ctest at $SECONDS s"
if left 120; then
  $Q topo dump --storage-bytes 2GiB --out $D/machine.yaml 2> $R/dump.txt; cp $D/machine.yaml $R/
  grep -E "local_norm's roots|work per state|device setup" $R/dump.txt
  $Q encode --input $D/x28.npy --scenario $D/machine.yaml --backend cuda --out $D/c.npy > $R/enc-cuda.txt 2>&1
  $Q encode --input $D/x28.npy --backend sim --out $D/s.npy > $R/enc-sim.txt 2>&1
  cmp $D/c.npy $D/s.npy && echo "2^28: cuda and sim outputs byte-identical" | tee $R/cmp.txt || echo "2^28: outputs DIFFER" | tee $R/cmp.txt
  rm -f $D/c.npy $D/s.npy
fi
for j in x28 b; do
  left 60 || break
  REPEAT=5 timeout 90 sh scripts/plan-vs-encode.sh $Q $D/$j.npy --scenario $D/machine.yaml --backend cuda > $R/planvs-$j.txt 2>&1; cat $R/planvs-$j.txt
  QM_TRACE=2 timeout 30 $Q encode --input $D/$j.npy --scenario $D/machine.yaml --backend cuda --json > $R/trace-$j.json 2> $R/trace-$j.txt
done
rm -rf $D
echo "data path at $SECONDS s"
if left 100 && [ -x build-gpu/bench/bench_cuda ]; then
  timeout $(($DL - SECONDS - 20)) build-gpu/bench/bench_cuda --benchmark_filter="${FILTER:-BM_Iqp/10/65536/[01]/4/|BM_Product/10/65536/[01]/5/}" \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true > $R/bench.txt 2>&1
  grep -E "median" $R/bench.txt | sed -E 's/ +/ /g' | cut -c1-200
fi
echo "s26b done at $SECONDS s"
