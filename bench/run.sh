#!/usr/bin/env bash
# Runs the CPU benchmarks (bench_plan, bench_encode) with repetitions and prints medians; the
# caller records them in bench/results/. Usage: bench/run.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-bench}
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DQM_BUILD_BENCH=ON -DQM_BUILD_TESTS=OFF -DQM_WITH_CUDA=OFF >/dev/null
cmake --build "$B" -j"$(nproc)" >/dev/null
"$B"/bench/bench_plan --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
"$B"/bench/bench_encode --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
