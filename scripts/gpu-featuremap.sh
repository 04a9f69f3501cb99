#!/usr/bin/env bash
# The feature-map kernels (issue 16) on a CUDA machine, in one call: every op case of
# test_backend_ops on the CUDA backend with the current kernels (round 2) and with the earlier
# ones (QM_CUDA_KERNELS=round1, QM_CUDA_KERNELS=legacy), the cuda/diff tests, then bench_cuda's
# BM_Product, BM_Iqp (the three generations side by side) and BM_IqpPass (one IQP pass at a
# time), each line with its fill/copy ceiling of the same run and pct (docs/cuda.md). Logs under
# $OUT (or out/gpu-featuremap when OUT is unset); exits 1 when a check fails.
# Usage: scripts/gpu-featuremap.sh [build dir, default build-gpu]
# The build dir must have been configured with CUDA and -DQM_BUILD_BENCH=ON and built in full
# (cmake --build build-gpu -j): see docs/cuda.md.
# Environment: QM_BENCH_REPS (default 3) repetitions per benchmark.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-gpu}
OUT=${OUT:-out/gpu-featuremap}
mkdir -p "$OUT"
fail=0
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader |
  tee "$OUT/gpu.txt"
git log -1 --format='commit %H %s' | tee -a "$OUT/summary.txt"
log "test_backend_ops --cuda (current kernels)"
"$B/tests/test_backend_ops" --cuda > "$OUT/backend-ops.txt" 2>&1 || fail=1
tail -3 "$OUT/backend-ops.txt" | tee -a "$OUT/summary.txt"
for gen in round1 legacy; do
  log "test_backend_ops --cuda (QM_CUDA_KERNELS=$gen)"
  QM_CUDA_KERNELS=$gen "$B/tests/test_backend_ops" --cuda > "$OUT/backend-ops-$gen.txt" 2>&1 || fail=1
  tail -3 "$OUT/backend-ops-$gen.txt" | tee -a "$OUT/summary.txt"
done
log "ctest -L 'cuda|diff'"
(cd "$B" && ctest -L "cuda|diff" --output-on-failure) > "$OUT/ctest-cuda.txt" 2>&1 || fail=1
tail -8 "$OUT/ctest-cuda.txt" | tee -a "$OUT/summary.txt"
log "bench_cuda BM_Product|BM_Iqp|BM_IqpPass (kernel time vs fill/copy of the same bytes, same run)"
"$B/bench/bench_cuda" --benchmark_filter='BM_Product|BM_Iqp' \
  --benchmark_repetitions="${QM_BENCH_REPS:-3}" --benchmark_report_aggregates_only=true \
  --benchmark_counters_tabular=true > "$OUT/bench.txt" 2>&1 || fail=1
grep -E "median|Benchmark" "$OUT/bench.txt" | tee -a "$OUT/summary.txt"
log "done (fail=$fail); logs in $OUT"
exit $fail
