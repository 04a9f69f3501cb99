#!/usr/bin/env bash
# Session 24's second device call (about 4 minutes): the IQP batch kernel at higher launch bounds
# (bench/results/2026-12-07-s24-iqp-minb.cu), one 2^30 complex64 product state on rounds 4, 5 and
# round 5 with streaming stores (bench/results/2026-12-07-s24-product-c64.cu), the product and IQP figures of rounds 4 and 5 on the
# card lent (bench_cuda, against the fill of the same run, medians of 3), test_backend_ops --cuda,
# and the data path's plan against encode (scripts/plan-vs-encode.sh, REPEAT=3) for the 2^28
# float64 state (without and with --out) and the 65536 x 1021 batch on a topo dump of this
# machine. Files under $OUT. Usage (device tool, carry [".devdeps"]): bash scripts/gpu-s24b.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R=/tmp/s24b; rm -rf $R; mkdir -p $R
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
nvcc -O3 -arch=sm_90 --fmad=false -std=c++17 -Ikernels -Iinclude -Icore -o /tmp/iqpminb \
  bench/results/2026-12-07-s24-iqp-minb.cu > $R/iqpminb-build.txt 2>&1 &
nvcc -O3 -arch=sm_90 --fmad=false -std=c++17 -Ikernels -Iinclude -Icore -o /tmp/pc64 \
  bench/results/2026-12-07-s24-product-c64.cu > $R/pc64-build.txt 2>&1 &
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DQM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DQM_BUILD_BENCH=ON -DQM_WERROR=ON -DQM_WITH_MPI=OFF > $R/configure.log 2>&1 || { tail -20 $R/configure.log; exit 1; }
cmake --build build-gpu -j16 --target bench_cuda test_backend_ops qmesh_cli > $R/build.log 2>&1 || { grep -E "error" -A3 $R/build.log | head -30; exit 1; }
wait
echo "built at $SECONDS s"
[ -x /tmp/iqpminb ] && timeout 60 /tmp/iqpminb > $R/iqpminb.txt 2>&1; cat $R/iqpminb.txt
[ -x /tmp/pc64 ] && timeout 60 /tmp/pc64 > $R/pc64.txt 2>&1; cat $R/pc64.txt
timeout 150 build-gpu/tests/test_backend_ops --cuda > $R/backend-ops.txt 2>&1; echo "test_backend_ops rc=$?"; tail -2 $R/backend-ops.txt
echo "tests done at $SECONDS s"
timeout 150 build-gpu/bench/bench_cuda --benchmark_filter="${FILTER:-BM_WriteFill|BM_Product/30/1/[01]/[45]/|BM_ProductPhase/30/1/0/[45]/|BM_Product/10/65536/[01]/5/|BM_Iqp/[0-9]+/[0-9]+/[01]/4/}" \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true > $R/bench.txt 2>&1
grep -E "median" $R/bench.txt | sed -E 's/ +/ /g' | cut -c1-200
echo "bench done at $SECONDS s"
Q=build-gpu/qmesh D=/tmp/s24d; mkdir -p $D
$Q topo dump --storage-bytes 2GiB --out $D/machine.yaml 2> $R/dump.txt; cp $D/machine.yaml $R/; cat $R/dump.txt
qm_datapath_inputs $D
echo "inputs at $SECONDS s"
REPEAT=3 timeout 60 sh scripts/plan-vs-encode.sh $Q $D/x28.npy --scenario $D/machine.yaml --backend cuda > $R/planvs-x28.txt 2>&1; cat $R/planvs-x28.txt
REPEAT=3 timeout 60 sh scripts/plan-vs-encode.sh $Q $D/b.npy --scenario $D/machine.yaml --backend cuda > $R/planvs-b.txt 2>&1; cat $R/planvs-b.txt
[ $SECONDS -lt 440 ] && REPEAT=3 timeout $((540 - SECONDS)) sh scripts/plan-vs-encode.sh $Q $D/x28.npy --scenario $D/machine.yaml --backend cuda --out $D/o.npy > $R/planvs-x28-out.txt 2>&1; cat $R/planvs-x28-out.txt
rm -rf $D
echo "s24b done at $SECONDS s"
tar czf ${OUT:?}/s24b.tar.gz -C $R .
