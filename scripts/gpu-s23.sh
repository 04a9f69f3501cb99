#!/usr/bin/env bash
# Session 23's first device call, for whichever card comes: on an H200, issue 16's kernel
# figures (scripts/gpu-h200-try.sh: bench_cuda round 4 against the fill of the same run); on any
# other card, the CUDA tests and the complex64 batch product's burst-load microbenchmark
# (scripts/gpu-s22b.sh with PBLK=1, bench_cuda's batch product only, no IQP microbenchmark).
# Usage (device tool, carry [".devdeps"]): bash scripts/gpu-s23.sh
set -uo pipefail
cd "$(dirname "$0")/.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $name"
case $name in
  *H200*) bash scripts/gpu-h200-try.sh ;;
  *) MICRO=0 PBLK=1 FILTER='BM_WriteFill|BM_Product/10/65536/[01]/4/' bash scripts/gpu-s22b.sh ;;
esac
