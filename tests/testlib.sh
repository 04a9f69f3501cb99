# testlib.sh — sourced by the shell tests: pass/fail counters and the ok/bad reporters; the
# .npy writer is tests/npy_write.py (PYTHONPATH is set to this directory).
pass=0; fail=0
ok()  { pass=$((pass+1)); echo "ok: $*"; }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }
export PYTHONPATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
