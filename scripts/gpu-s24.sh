#!/usr/bin/env bash
# Session 24's device call: round 5's product kernels and IQP's complex64 order 3f checked and
# measured, local_norm's new combine timed. Files under $OUT:
#   1. unpack the carried Debian packages (.devdeps), configure for sm_90 with the benchmarks (no
#      MPI), build bench_cuda, test_backend_ops and the CLI;
#   2. test_backend_ops --cuda on the default generations (products on round 5), on round 4 and
#      on round 3 (IQP's complex64 order 3f in both fused passes);
#   3. bench_cuda: BM_Product and BM_ProductPhase, rounds 5 and 4, and BM_Iqp round 4 (the
#      default), one 2^30 state and 65536 x 2^10, both dtypes, each against the fill (and copies)
#      of the same run, medians of 3;
#   4. Nsight Compute (--clock-control none) on round 4's 10-qubit IQP batch kernel, both dtypes:
#      pipe utilisation, issue and stall figures;
#   5. plan against encode for a 2^28 float64 state (REPEAT=3) and two traced encodes: the
#      local_norm phase with the 1024-thread tree_combine.
# Usage (device tool, carry [".devdeps"]): bash scripts/gpu-s24.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R=/tmp/s24r; rm -rf $R; mkdir -p $R
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DQM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DQM_BUILD_BENCH=ON -DQM_WERROR=ON -DQM_WITH_MPI=OFF > $R/configure.log 2>&1 || { tail -20 $R/configure.log; exit 1; }
cmake --build build-gpu -j16 --target bench_cuda test_backend_ops qmesh_cli > $R/build.log 2>&1 || { grep -E "error" -A3 $R/build.log | head -30; exit 1; }
echo "built at $SECONDS s"
timeout 150 build-gpu/tests/test_backend_ops --cuda > $R/backend-ops.txt 2>&1; echo "default rc=$?"; tail -2 $R/backend-ops.txt
QM_CUDA_KERNELS=round4 timeout 150 build-gpu/tests/test_backend_ops --cuda > $R/backend-ops-r4.txt 2>&1; echo "round4 rc=$?"; tail -2 $R/backend-ops-r4.txt
QM_CUDA_KERNELS=round3 timeout 150 build-gpu/tests/test_backend_ops --cuda > $R/backend-ops-r3.txt 2>&1; echo "round3 rc=$?"; tail -2 $R/backend-ops-r3.txt
echo "tests done at $SECONDS s"
timeout 240 build-gpu/bench/bench_cuda --benchmark_filter='BM_WriteFill|BM_Product/[0-9]+/[0-9]+/[01]/[45]/|BM_ProductPhase/[0-9]+/[0-9]+/[01]/[45]/|BM_Iqp/[0-9]+/[0-9]+/[01]/4/' \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true > $R/bench.txt 2>&1
grep -E "median" $R/bench.txt | sed -E 's/ +/ /g' | cut -c1-200
echo "bench done at $SECONDS s"
for c in 0 1; do
  timeout 90 ncu --clock-control none --kernel-name regex:iqp_fused4 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
    --section InstructionStats --section Occupancy --section LaunchStats \
    build-gpu/bench/bench_cuda --benchmark_filter="BM_Iqp/10/65536/$c/4/" > $R/ncu-iqp-c$c.txt 2>&1
  grep -E "Duration|Throughput|Pipe|Issue|Executed Ipc|Warp Cycles|Achieved Occupancy|Registers|Block Limit|No Eligible|One or More|Stall|FP64|fp64" $R/ncu-iqp-c$c.txt | head -40
done
echo "ncu done at $SECONDS s"
Q=build-gpu/qmesh D=/tmp/s24d; mkdir -p $D
if [ $SECONDS -lt 420 ]; then
  $Q topo dump --storage-bytes 1GiB --out $D/machine.yaml 2> $R/dump.txt; cp $D/machine.yaml $R/
  python3 -c "
import numpy as np
np.save('$D/x28.npy', np.random.default_rng(7).standard_normal(2**28))"
  REPEAT=3 timeout 90 sh scripts/plan-vs-encode.sh $Q $D/x28.npy --scenario $D/machine.yaml --backend cuda > $R/planvs-x28.txt 2>&1; cat $R/planvs-x28.txt
  for k in 1 2; do QM_TRACE=1 timeout 30 $Q encode --input $D/x28.npy --scenario $D/machine.yaml --backend cuda 2>&1 | grep -E "local_norm|ingest done|measured" ; done > $R/trace-x28.txt; cat $R/trace-x28.txt
fi
rm -rf $D
echo "s24 done at $SECONDS s"
tar czf ${OUT:?}/s24.tar.gz -C $R .
