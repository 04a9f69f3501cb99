# testlib.sh — sourced by the shell tests (after MPIEXEC is set, for the MPI ones): pass/fail
# counters and the ok/bad reporters; a scratch directory $T removed on exit; MPI, mpiexec with
# the flags every test uses (as root, more ranks than cores); the .npy writer is
# tests/npy_write.py (PYTHONPATH is set to this directory).
pass=0; fail=0
ok()  { pass=$((pass+1)); echo "ok: $*"; }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }
export PYTHONPATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI="${MPIEXEC:-mpiexec} --oversubscribe --allow-run-as-root"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
