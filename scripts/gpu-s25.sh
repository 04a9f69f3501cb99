#!/usr/bin/env bash
# Session 25's device call (4 to 9 minutes; each step skipped once the deadline DL seconds,
# default 500, is near, so that a short budget still brings back what came first): build; issue
# 17's data path on a topo dump of this machine (plan against encode, REPEAT=3, for the 2^28
# float64 state and the 65536 x 1021 batch; QM_TRACE=2 encodes of each; local_norm's experiments:
# QM_ROOTS_PAGE_LOCKED=1 and eager module loading); issue 16's figures (bench_cuda: fill, one
# 2^30 product state on rounds 5 and 4, phase, the 65536 x 10-qubit batches on round 5, IQP on
# round 4, medians of 3); test_backend_ops --cuda on the default kernels.
# Files under $OUT/s25, written as they come. Usage (device tool, carry [".devdeps"]):
#   DL=500 bash scripts/gpu-s25.sh   (TARGETS=qmesh_cli: the data path only)
set -uo pipefail
cd "$(dirname "$0")/.."
R=${OUT:?}/s25; mkdir -p $R
DL=${DL:-500}
left() { [ $SECONDS -lt $(($DL - $1)) ]; } # true when more than $1 seconds are left
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
Q=build-gpu/qmesh D=/tmp/s25d; mkdir -p $D
qm_datapath_inputs $D &
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DQM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DQM_BUILD_BENCH=ON -DQM_WERROR=ON -DQM_WITH_MPI=OFF > $R/configure.log 2>&1 || { tail -20 $R/configure.log; exit 1; }
cmake --build build-gpu -j16 --target ${TARGETS:-bench_cuda test_backend_ops qmesh_cli} > $R/build.log 2>&1 || { grep -E "error" -A3 $R/build.log | head -30; exit 1; }
wait
echo "built at $SECONDS s"
$Q topo dump --storage-bytes 2GiB --out $D/machine.yaml 2> $R/dump.txt; cp $D/machine.yaml $R/; cat $R/dump.txt
echo "dumped at $SECONDS s"
for j in x28 b; do
  left 60 || break
  REPEAT=3 timeout 60 sh scripts/plan-vs-encode.sh $Q $D/$j.npy --scenario $D/machine.yaml --backend cuda > $R/planvs-$j.txt 2>&1; cat $R/planvs-$j.txt
  QM_TRACE=2 timeout 30 $Q encode --input $D/$j.npy --scenario $D/machine.yaml --backend cuda --json > $R/trace-$j.json 2> $R/trace-$j.txt
done
echo "data path at $SECONDS s"
# local_norm's experiments: the roots to page-locked memory; every kernel loaded at the start
if left 60; then
  QM_ROOTS_PAGE_LOCKED=1 REPEAT=3 timeout 60 sh scripts/plan-vs-encode.sh $Q $D/x28.npy --scenario $D/machine.yaml --backend cuda > $R/planvs-x28-rootspl.txt 2>&1; cat $R/planvs-x28-rootspl.txt
  QM_ROOTS_PAGE_LOCKED=1 QM_TRACE=2 timeout 30 $Q encode --input $D/x28.npy --scenario $D/machine.yaml --backend cuda --json > $R/trace-x28-rootspl.json 2> $R/trace-x28-rootspl.txt
  CUDA_MODULE_LOADING=EAGER QM_TRACE=2 timeout 30 $Q encode --input $D/x28.npy --scenario $D/machine.yaml --backend cuda --json > $R/trace-x28-eager.json 2> $R/trace-x28-eager.txt
  grep -h "local_norm\|tree:" $R/trace-x28*.txt | head -40
fi
rm -rf $D
echo "experiments at $SECONDS s"
if left 130 && [ -x build-gpu/bench/bench_cuda ]; then
  timeout $(($DL - SECONDS - 20)) build-gpu/bench/bench_cuda --benchmark_filter="${FILTER:-BM_WriteFill|BM_Product/30/1/[01]/[45]/|BM_ProductPhase/30/1/[01]/5/|BM_Product/10/65536/[01]/5/|BM_ProductPhase/10/65536/[01]/5/|BM_Iqp/[0-9]+/[0-9]+/[01]/4/}" \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true > $R/bench.txt 2>&1
  grep -E "median" $R/bench.txt | sed -E 's/ +/ /g' | cut -c1-200
fi
echo "bench at $SECONDS s"
if left 40 && [ -x build-gpu/tests/test_backend_ops ]; then
  timeout $(($DL - SECONDS - 5)) build-gpu/tests/test_backend_ops --cuda > $R/backend-ops.txt 2>&1; echo "test_backend_ops rc=$?"; tail -2 $R/backend-ops.txt
fi
echo "s25 done at $SECONDS s"
