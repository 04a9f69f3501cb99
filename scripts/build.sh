#!/usr/bin/env bash
# Configures and builds qmesh into build/ (Release, warnings as errors, CUDA when nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CMAKE_CUDA_COMPILER:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc
fi
# The Python package and its tests are built for Debian's interpreter (the one python3-numpy,
# python3-pytest and python3-torch belong to), not whichever python3 comes first on PATH;
# QM_PYTHON=/path/to/python3 picks another.
PY=${QM_PYTHON:-/usr/bin/python3}
PYARG=()
[ -x "$PY" ] && PYARG=(-DPython3_EXECUTABLE="$PY")
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DQM_WERROR=ON "${PYARG[@]}" "$@" >/dev/null
cmake --build build -j"$(nproc)"
