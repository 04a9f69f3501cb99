#!/bin/sh
# render-plan-dot.sh — regenerate the plan pictures of docs/cli.md ("qmesh plan --dot"):
# docs/img/plan-builtin-q33.svg and docs/img/plan-a100-4node-q36.svg, from `qmesh plan --dot`
# rendered by Graphviz's dot (Debian package graphviz; not needed by the tests).
# Usage: scripts/render-plan-dot.sh [QMESH]   (default: build/qmesh)
set -eu
QMESH=${1:-build/qmesh}
root=$(cd "$(dirname "$0")/.." && pwd)
command -v dot >/dev/null || { echo "render-plan-dot: Graphviz 'dot' not found (apt-get install graphviz)" >&2; exit 1; }
render() { # OUT ARGS...
    out=$1; shift
    "$QMESH" plan "$@" --dot 2>/dev/null | dot -Tsvg -o "$root/docs/img/$out"
    echo "wrote docs/img/$out"
}
cd "$root"
render plan-builtin-q33.svg --qubits 33
render plan-a100-4node-q36.svg --scenario scenarios/a100-4node-hdr.yaml --qubits 36
