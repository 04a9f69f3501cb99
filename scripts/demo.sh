#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run qmesh's main job on its
# built-in default mesh: amplitude-encode the handwritten digits data set (1797 samples x 64
# features; the label column 64 dropped) into 1797 six-qubit states sharded over the simulated
# devices, printing the plan, the timings and the norm check, and writing out/digits.npy.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
scripts/fetch-digits.sh
mkdir -p out
echo "== qmesh encode (built-in default mesh)"
build/qmesh encode --input data/digits.csv.gz --drop-column 64 --out out/digits.npy
