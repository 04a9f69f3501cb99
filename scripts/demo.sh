#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run qmesh's main job on its
# built-in default mesh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
echo "== qmesh devices (built-in default mesh)"
build/qmesh devices
