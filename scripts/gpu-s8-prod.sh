#!/usr/bin/env bash
# The round-3 product and sums-of-squares kernels (QM_CUDA_KERNELS=round3, opt-in) on a CUDA
# machine, in one call, everything on stdout: test_backend_ops --cuda on the current kernels, on
# round 3 and on rounds 1 and 0 (every op case, bit for bit against the CPU kernels, incl. the
# product, sumsq and state_sumsq cases of the new paths), test_api --cuda (current and round 3:
# encodes end to end, their input sums and norm checks), test_cuda_diff and test_cuda_batch
# (every batch shape), then bench_cuda's BM_Product and
# BM_ProductPhase (rounds 2 and 3 side by side, fill of the same bytes in the same run) and
# BM_NormCheck (state_sumsq, sumsq over the stash and over device input, current vs round 3, against a plain read of
# the same bytes in the same run). Exits 1 when a check fails. About 3 minutes on an H200.
# Usage (from the repository root):
#   cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
#         -DQM_BUILD_BENCH=ON && cmake --build build-gpu -j16
#   scripts/gpu-s8-prod.sh [build dir, default build-gpu]
# Environment: QM_BENCH_REPS (default 3) repetitions per benchmark.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-gpu}
fail=0
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
git log -1 --format='commit %H %s'
echo "== ctest: test_backend_ops --cuda with the current, round3, round1 and legacy kernels; test_api --cuda (current, round3); cuda_diff; cuda_batch"
(cd "$B" && ctest -j4 -R "test_backend_ops_cuda|test_api_cuda|test_cuda_diff|test_cuda_batch" --output-on-failure 2>&1 | tail -40) || fail=1
echo "== bench_cuda: product rounds 2 (kernels 0) and 3 (kernels 3), sums of squares current vs round 3"
"$B/bench/bench_cuda" \
  --benchmark_filter='BM_Product(Phase)?/[0-9]+/[0-9]+/[01]/[03]/|BM_NormCheck' \
  --benchmark_repetitions="${QM_BENCH_REPS:-3}" --benchmark_report_aggregates_only=true \
  --benchmark_counters_tabular=true 2>&1 | grep -E "median|Benchmark|error|ERROR" || fail=1
echo "== done (fail=$fail)"
exit $fail
