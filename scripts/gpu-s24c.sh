#!/usr/bin/env bash
# Session 24's short device call (about 2.5 minutes, for what was left of the device time): the two
# microbenchmarks (the IQP batch kernel's launch bounds, the 2^30 complex64 product on rounds 4
# and 5), then bench_cuda's product batch on round 5 and IQP round 4 against the fill of the same
# run (medians of 3), then, while the time lasts, the data path's plan against encode (topo dump,
# scripts/plan-vs-encode.sh for the 2^28 state and the batch). Files under $OUT. Usage (device tool, carry [".devdeps"]): bash scripts/gpu-s24c.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R=/tmp/s24c; rm -rf $R; mkdir -p $R
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
for m in iqp-minb product-c64; do
  nvcc -O3 -arch=sm_90 --fmad=false -std=c++17 -Ikernels -Iinclude -Icore -o /tmp/$m \
    bench/results/2026-12-07-s24-$m.cu > $R/$m-build.txt 2>&1 &
done
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DQM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DQM_BUILD_BENCH=ON -DQM_WITH_MPI=OFF > $R/configure.log 2>&1 && \
  cmake --build build-gpu -j14 --target bench_cuda > $R/build.log 2>&1 &
wait
echo "built at $SECONDS s"
for m in iqp-minb product-c64; do [ -x /tmp/$m ] && timeout 40 /tmp/$m > $R/$m.txt 2>&1; cat $R/$m.txt; done
[ -x build-gpu/bench/bench_cuda ] && timeout 100 build-gpu/bench/bench_cuda --benchmark_filter='BM_WriteFill/1073741824|BM_Product/10/65536/[01]/[45]/|BM_ProductPhase/10/65536/[01]/5/|BM_Iqp/10/65536/[01]/4/' \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true > $R/bench.txt 2>&1
grep -E "median" $R/bench.txt | sed -E 's/ +/ /g' | cut -c1-200
echo "bench done at $SECONDS s"
# the data path's model (issue 17 item 7) against encode: topo dump, then plan-vs-encode for the
# 2^28 state and the batch, while the time lasts
if [ $SECONDS -lt 200 ] && cmake --build build-gpu -j16 --target qmesh_cli > $R/build-cli.log 2>&1; then
  Q=build-gpu/qmesh D=/tmp/s24d; mkdir -p $D
  $Q topo dump --storage-bytes 2GiB --out $D/machine.yaml 2> $R/dump.txt; cp $D/machine.yaml $R/; cat $R/dump.txt
  qm_datapath_inputs $D
  REPEAT=3 timeout 40 sh scripts/plan-vs-encode.sh $Q $D/x28.npy --scenario $D/machine.yaml --backend cuda > $R/planvs-x28.txt 2>&1; cat $R/planvs-x28.txt
  REPEAT=3 timeout 40 sh scripts/plan-vs-encode.sh $Q $D/b.npy --scenario $D/machine.yaml --backend cuda > $R/planvs-b.txt 2>&1; cat $R/planvs-b.txt
  rm -rf $D
fi
echo "s24c done at $SECONDS s"
tar czf ${OUT:?}/s24c.tar.gz -C $R .
