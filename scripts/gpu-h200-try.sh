#!/usr/bin/env bash
# One short device call for the figures only an H200 can give (issue 16's kernel figures): on any
# other card it says so and stops at once (a few seconds of device time); on an H200 it unpacks
# the carried packages (.devdeps), builds bench_cuda and test_backend_ops for sm_90 and runs
# bench_cuda's BM_Product, BM_ProductPhase and BM_Iqp of round 4 (the default; argument 4: 0 is round 2) (each against the fill/copy ceiling of the same run,
# medians of 3), leaving one tarball in $OUT. With ANY=1 it runs on any card and says which
# (figures of another card are that card's, not the H200's).
# Usage (device tool, carry [".devdeps"]): [ANY=1] bash scripts/gpu-h200-try.sh
set -uo pipefail
cd "$(dirname "$0")/.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $name"
case $name in *H200*) ;; *) [ "${ANY:-0}" = 1 ] || { echo "not an H200: nothing run"; exit 0; } ;; esac
R=/tmp/h200r; rm -rf $R; mkdir -p $R
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > $R/gpu.txt
git log -1 --format='commit %H %s' >> $R/gpu.txt
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DQM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DQM_BUILD_BENCH=ON -DQM_WITH_MPI=OFF > $R/configure.log 2>&1 || { tail -20 $R/configure.log; exit 1; }
cmake --build build-gpu -j16 --target bench_cuda test_backend_ops > $R/build.log 2>&1 || { grep -E "error" -A3 $R/build.log | head; exit 1; }
echo "built at $SECONDS s"
timeout 120 build-gpu/tests/test_backend_ops --cuda > $R/backend-ops.txt 2>&1; tail -2 $R/backend-ops.txt
timeout $((380 - SECONDS)) build-gpu/bench/bench_cuda --benchmark_filter='BM_WriteFill|BM_Product/[0-9]+/[0-9]+/[01]/4/|BM_ProductPhase/[0-9]+/[0-9]+/[01]/4/|BM_Iqp/[0-9]+/[0-9]+/[01]/4/' \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true > $R/bench.txt 2>&1
grep -E "median" $R/bench.txt | head -60
tar czf ${OUT:?}/h200.tar.gz -C $R .
