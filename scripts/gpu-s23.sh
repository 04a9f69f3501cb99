#!/usr/bin/env bash
# Session 23's device call, for whichever card comes. First the data-path check
# (scripts/gpu-datapath-check.sh: build, the context/reader/Python CUDA tests, topo dump,
# plan --input beside encode's measured phases for a 2^28 state and a 65536 x 1021 batch, traced
# encodes), which shows local_norm with the piece roots now made on the device. Then on an H200
# issue 16's kernel figures (scripts/gpu-h200-try.sh: bench_cuda round 4 against the fill of the
# same run, test_backend_ops --cuda); on any other card the CUDA tests (every kernel generation of
# test_backend_ops, with the tree_combine cases) and the complex64 batch product's burst-load
# microbenchmark (scripts/gpu-s22b.sh with PBLK=1; it times the fill and round 4 in its own run).
# Usage (device tool, carry [".devdeps"]): bash scripts/gpu-s23.sh
set -uo pipefail
cd "$(dirname "$0")/.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $name"
R=/tmp/s23r; rm -rf $R; mkdir -p $R/check
OUT=$R/check bash scripts/gpu-datapath-check.sh > $R/check/check.txt 2>&1
grep -E "built at|tests passed|Failed|^(phase|ingest|local_norm|norm_allreduce|encode|read|staging) |local_norm:" $R/check/check.txt | head -60
tar czf ${OUT:?}/s23-check.tar.gz -C $R/check .
echo "check done at $SECONDS s"
case $name in
  *H200*) bash scripts/gpu-h200-try.sh ;;
  *) MICRO=0 PBLK=1 FILTER='BM_None' bash scripts/gpu-s22b.sh ;; # pblk times the fill and round 4 itself
esac
echo "s23 done at $SECONDS s"
