#!/usr/bin/env bash
# Configures and builds qmesh into build/ (Release, warnings as errors, CUDA when nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CMAKE_CUDA_COMPILER:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DQM_WERROR=ON "$@" >/dev/null
cmake --build build -j"$(nproc)"
