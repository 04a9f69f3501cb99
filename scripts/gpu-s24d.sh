#!/usr/bin/env bash
# Session 24's last device call (about 2 minutes): round 5's streaming complex64 stores for states
# above 10 qubits checked (test_backend_ops --cuda) and timed (bench_cuda BM_Product, one 2^30
# state, rounds 5 and 4, against the fill of the same run, medians of 3). Files under $OUT.
# Usage (device tool, carry [".devdeps"]): bash scripts/gpu-s24d.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R=/tmp/s24e; rm -rf $R; mkdir -p $R
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DQM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DQM_BUILD_BENCH=ON -DQM_WITH_MPI=OFF > $R/configure.log 2>&1 && \
  cmake --build build-gpu -j16 --target bench_cuda test_backend_ops > $R/build.log 2>&1 || { grep error -A3 $R/build.log | head; exit 1; }
echo "built at $SECONDS s"
timeout 60 build-gpu/tests/test_backend_ops --cuda > $R/backend-ops.txt 2>&1; echo "test_backend_ops rc=$?"; tail -2 $R/backend-ops.txt
timeout 60 build-gpu/bench/bench_cuda --benchmark_filter='BM_WriteFill/8589934592|BM_Product/30/1/[01]/[45]/' \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true > $R/bench.txt 2>&1
grep -E "median" $R/bench.txt | sed -E 's/ +/ /g' | cut -c1-200
echo "s24d done at $SECONDS s"
tar czf ${OUT:?}/s24d.tar.gz -C $R .
