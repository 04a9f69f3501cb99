#!/usr/bin/env bash
# Session 26's last device call (about 2 minutes; each step skipped once the deadline DL, default
# 200 s, is near): build qmesh, bench_cuda and test_backend_ops; test_backend_ops --cuda (the
# round-4 IQP kernels' table sums branch-free since this session: the gate); issue 16's figures
# (bench_cuda: fill, one 2^30 product state, phase, the 65536 x 10-qubit batches, IQP, medians of
# 3); issue 17's plan against encode (REPEAT=3) for the 2^28 float64 state and the 65536 x 1021
# batch on a topo dump of this machine. Everything under $OUT/s26h, packed as $OUT/s26h.tar.gz.
# Usage (device tool, carry [".devdeps"]): DL=200 bash scripts/gpu-s26h.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R=${OUT:?}/s26h; mkdir -p $R
trap 'tar -czf $OUT/s26h.tar.gz -C $OUT s26h' EXIT
DL=${DL:-200}
left() { [ $SECONDS -lt $(($DL - $1)) ]; } # true when more than $1 seconds are left
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
Q=build-gpu/qmesh D=/tmp/s26d; mkdir -p $D
qm_datapath_inputs $D &
qm_gpu_build $R qmesh_cli bench_cuda test_backend_ops || exit 1
echo "built at $SECONDS s"
build-gpu/tests/test_backend_ops --cuda > $R/backend-ops.txt 2>&1; echo "test_backend_ops --cuda rc=$?"; tail -2 $R/backend-ops.txt
if left 90; then
  timeout $(($DL - SECONDS - 45)) build-gpu/bench/bench_cuda --benchmark_filter="${FILTER:-BM_WriteFill/1073741824|BM_Product/30/1/[01]/5/|BM_Product/10/65536/[01]/5/|BM_ProductPhase/10/65536/[01]/5/|BM_Iqp/[0-9]+/[0-9]+/[01]/4/}" \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true > $R/bench.txt 2>&1
  grep -E "median" $R/bench.txt | sed -E 's/ +/ /g' | cut -c1-170
fi
echo "bench at $SECONDS s"
wait
if left 40; then
  $Q topo dump --storage-bytes 2GiB --out $D/machine.yaml 2> $R/dump.txt
  for j in x28 b; do
    left 15 || break
    REPEAT=3 timeout $(($DL - SECONDS - 5)) sh scripts/plan-vs-encode.sh $Q $D/$j.npy --scenario $D/machine.yaml --backend cuda > $R/planvs-$j.txt 2>&1; sed -n 4,12p $R/planvs-$j.txt
  done
fi
rm -rf $D
echo "s26h done at $SECONDS s"
