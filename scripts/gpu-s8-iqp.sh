#!/usr/bin/env bash
# Issue 16, round 3 of the IQP kernels, on a one-GPU CUDA machine, in one call, everything on
# stdout: the correctness checks first (every op case of test_backend_ops on the CUDA backend with
# QM_CUDA_KERNELS=round3 and with the default kernels, test_cuda_diff, test_cuda_batch, test_iqp),
# then bench_cuda: round 3's wht passes against round 2's (BM_WhtSplit: 2 passes of 10 stages on
# 64-byte rows vs 3 passes of 7, 7, 6 on 256- and 512-byte rows, each variant first checked bit
# for bit against round 2 on a 2^22 state), round 3's passes one at a time (BM_Wht3Pass), the
# fused phase pass of rounds 2 and 3 (BM_IqpPass pass 0: round 3 forms the phases as products of
# unit numbers) and the whole iqp op, round 2 and round 3 side by side (BM_Iqp), for one 2^30 state
# and a batch of 65536 10-qubit states; ceilings of the same run in each line.
# Usage (repo root): scripts/gpu-s8-iqp.sh [build dir, default build-gpu], after
#   cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
#         -DQM_BUILD_BENCH=ON && cmake --build build-gpu -j16
# Environment: QM_BENCH_REPS (default 1: each line's kernel_ms is already the median of its
# iterations) repetitions per benchmark. Exit status 1 when a check or a benchmark fails (the
# benchmarks run either way). Estimated 3 minutes on an H200 (26 cases on a 2^30 state, about
# 3 s each with their 16-32 GiB of buffers, 8 batch cases, two test_backend_ops runs).
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-gpu}
fail=0
log() { echo "== $* ($(date -u +%H:%M:%S))"; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
git log -1 --format='commit %H %s' | cut -c1-160
for gen in round3 round2; do # round2: the default (an unknown name selects it too)
  log "test_backend_ops --cuda (QM_CUDA_KERNELS=$gen)"
  QM_CUDA_KERNELS=$gen "$B/tests/test_backend_ops" --cuda 2>&1 | tail -25
  [ "${PIPESTATUS[0]}" = 0 ] || fail=1
done
log "ctest test_cuda_diff, test_cuda_batch, test_iqp"
(cd "$B" && ctest -R '^(test_cuda_diff|test_cuda_batch|test_iqp)$' --output-on-failure 2>&1 | tail -20
 exit "${PIPESTATUS[0]}") || fail=1
log "checks done: fail=$fail"
log "bench_cuda: round 3 wht passes vs round 2, one pass at a time, the whole iqp op"
reps=${QM_BENCH_REPS:-1}
blog=$(mktemp)
agg=()
[ "$reps" -gt 1 ] && agg=(--benchmark_report_aggregates_only=true)
"$B/bench/bench_cuda" \
  --benchmark_filter='BM_WhtSplit|BM_Wht3Pass|BM_Iqp/(30/1|10/65536)/[01]/[03]/|BM_IqpPass/(30/1|10/65536)/[01]/0/[03]/' \
  --benchmark_repetitions="$reps" "${agg[@]}" --benchmark_counters_tabular=true > "$blog" 2>&1 ||
  fail=1
grep -vE '_(mean|stddev|cv) ' "$blog"
# a case that skipped itself (a failed allocation or launch, BM_WhtSplit's bit check) is a failure
grep -q 'ERROR OCCURRED' "$blog" && fail=1
rm -f "$blog"
log "done: fail=$fail"
exit $fail
