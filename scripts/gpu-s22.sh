#!/usr/bin/env bash
# Session 22's device call: the 10-qubit IQP batch microbenchmark
# (bench/results/2026-12-06-s22-iqp-batch.cu: round 4 against variants with fewer float64
# operations per slot), then issue 16's kernel figures on whichever card is lent
# (ANY=1 scripts/gpu-h200-try.sh). Everything lands in $OUT (iqp22.txt, h200.tar.gz).
# Usage (device tool, carry [".devdeps"]): bash scripts/gpu-s22.sh
set -uo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee ${OUT:?}/gpu.txt
nvcc -O3 -arch=sm_90 --fmad=false -std=c++17 -Xcompiler -fopenmp -Ikernels -Iinclude -Icore -lgomp \
  -o /tmp/iqp22 bench/results/2026-12-06-s22-iqp-batch.cu > $OUT/iqp22-build.txt 2>&1 ||
  { tail -20 $OUT/iqp22-build.txt; }
[ -x /tmp/iqp22 ] && timeout 120 /tmp/iqp22 2>&1 | tee $OUT/iqp22.txt
echo "microbenchmark done at $SECONDS s"
[ "${MICRO_ONLY:-0}" = 1 ] || ANY=1 bash scripts/gpu-h200-try.sh
