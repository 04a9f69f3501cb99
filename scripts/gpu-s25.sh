#!/usr/bin/env bash
# Session 25's first device call (about 6 minutes): test_backend_ops --cuda on the default
# kernels; issue 16's figures on the card lent (bench_cuda: fill, one 2^30 product and phase state
# on rounds 5 and 4, the 65536 x 10-qubit batch on rounds 5 and 4, IQP on round 4, medians of 3);
# issue 17's plan against encode (scripts/plan-vs-encode.sh, REPEAT=3) for the 2^28 float64 state
# and the 65536 x 1021 batch on a topo dump of this machine, with one traced encode of each.
# Files under $OUT. Usage (device tool, carry [".devdeps"]): bash scripts/gpu-s25.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R=${OUT:?}/s25; mkdir -p $R # written in place: a call cut short still brings back what it has
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DQM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DQM_BUILD_BENCH=ON -DQM_WERROR=ON -DQM_WITH_MPI=OFF > $R/configure.log 2>&1 || { tail -20 $R/configure.log; exit 1; }
cmake --build build-gpu -j16 --target bench_cuda test_backend_ops qmesh_cli > $R/build.log 2>&1 || { grep -E "error" -A3 $R/build.log | head -30; exit 1; }
echo "built at $SECONDS s"
Q=build-gpu/qmesh D=/tmp/s25d; mkdir -p $D
python3 -c "
import numpy as np
r=np.random.default_rng(7)
np.save('$D/x28.npy', r.standard_normal(2**28))
np.save('$D/b.npy', r.standard_normal((65536,1021)))" &
timeout 100 build-gpu/tests/test_backend_ops --cuda > $R/backend-ops.txt 2>&1; echo "test_backend_ops rc=$?"; tail -2 $R/backend-ops.txt
echo "tests done at $SECONDS s"
wait
timeout 200 build-gpu/bench/bench_cuda --benchmark_filter="${FILTER:-BM_WriteFill|BM_Product/30/1/[01]/[45]/|BM_ProductPhase/30/1/[01]/5/|BM_Product/10/65536/[01]/5/|BM_ProductPhase/10/65536/[01]/5/|BM_Iqp/[0-9]+/[0-9]+/[01]/4/}" \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true > $R/bench.txt 2>&1
grep -E "median" $R/bench.txt | sed -E 's/ +/ /g' | cut -c1-200
echo "bench done at $SECONDS s"
$Q topo dump --storage-bytes 2GiB --out $D/machine.yaml 2> $R/dump.txt; cp $D/machine.yaml $R/; cat $R/dump.txt
REPEAT=3 timeout 60 sh scripts/plan-vs-encode.sh $Q $D/x28.npy --scenario $D/machine.yaml --backend cuda > $R/planvs-x28.txt 2>&1; cat $R/planvs-x28.txt
REPEAT=3 timeout 60 sh scripts/plan-vs-encode.sh $Q $D/b.npy --scenario $D/machine.yaml --backend cuda > $R/planvs-b.txt 2>&1; cat $R/planvs-b.txt
QM_TRACE=2 timeout 30 $Q encode --input $D/x28.npy --scenario $D/machine.yaml --backend cuda --json > $R/trace-x28.json 2> $R/trace-x28.txt
QM_TRACE=2 timeout 30 $Q encode --input $D/b.npy --scenario $D/machine.yaml --backend cuda --json > $R/trace-b.json 2> $R/trace-b.txt
[ $SECONDS -gt 500 ] && { echo "s25 stopped before the experiments at $SECONDS s"; rm -rf $D; exit 0; }
# local_norm's experiments: the roots to page-locked memory; every kernel loaded at the start
QM_ROOTS_PAGE_LOCKED=1 REPEAT=3 timeout 60 sh scripts/plan-vs-encode.sh $Q $D/x28.npy --scenario $D/machine.yaml --backend cuda > $R/planvs-x28-rootspl.txt 2>&1; cat $R/planvs-x28-rootspl.txt
QM_ROOTS_PAGE_LOCKED=1 QM_TRACE=2 timeout 30 $Q encode --input $D/x28.npy --scenario $D/machine.yaml --backend cuda --json > $R/trace-x28-rootspl.json 2> $R/trace-x28-rootspl.txt
CUDA_MODULE_LOADING=EAGER QM_TRACE=2 timeout 30 $Q encode --input $D/x28.npy --scenario $D/machine.yaml --backend cuda --json > $R/trace-x28-eager.json 2> $R/trace-x28-eager.txt
grep -h "local_norm\|tree:" $R/trace-x28*.txt
rm -rf $D
echo "s25 done at $SECONDS s"
