#!/usr/bin/env bash
# test_encode_output.sh QMESH SRCDIR -- the output and run lifecycle of `qmesh encode` in one
# process (issue 13; docs/io.md "Run lifecycle"). Label unit. Every case is deterministic: failures,
# signals and crashes are injected at named phases with QM_FAULT_RANK / QM_FAULT_IO (no sleeps, no
# timing), and every command runs under a watchdog of 120 s that names the case that hung.
#  - item 5: a 2-D input of one row keeps its rank: (1, 2^n) in --out and in the manifest;
#  - item 4: a norm check that is NaN or off by more than the bound: E-NUMERIC, exit 1, the previous
#    output untouched, no temporary;
#  - item 6: SIGINT / SIGTERM (raised at the write phase): exit 130 / 143, one E-INTERRUPTED line,
#    previous output untouched, no temporary;
#  - item 7: --out naming a directory, a missing parent, --out-dir naming a file, too little free
#    space (statvfs), a file-size limit: E-OUTPUT before any work;
#  - item 8: re-using --out-dir replaces its whole content (no stale shards); a directory that is
#    not a qmesh output is refused unless --force;
#  - item 12: a killed run's temporaries are removed by the next run (dead pid of this host only);
#  - item 13: `ulimit -f` is E-OUTPUT up front, and EFBIG from a write is E-OUTPUT, not SIGXFSZ.
set -u
QMESH=$(cd "$(dirname "$1")" && pwd)/$(basename "$1"); SRC=$(cd "$2" && pwd)
S=$SRC/scenarios/dgx-h100.yaml
. "$(dirname "$0")/testlib.sh"
cd "$T" || exit 2
python3 - <<'PY'
import math
from npy_write import npy
npy('row.npy', '<f8', '(1, 3)', [1.0, 2.0, 3.0], 'd')
npy('vec.npy', '<f8', '(3,)', [1.0, 2.0, 3.0], 'd')
npy('batch.npy', '<f8', '(4, 100)', [math.sin(0.1 * i) + 0.01 * (i % 5) for i in range(400)], 'd')
npy('batch2.npy', '<f4', '(4, 100)', [math.cos(0.1 * i) + 0.01 * (i % 3) for i in range(400)], 'f')
PY
HOST=$(uname -n | cut -c1-64 | tr -c 'A-Za-z0-9_\n-' '_')

# run CASE CMD...: the command under a watchdog; its status in $rc, stdout+stderr in $T/log
run() {
  local case=$1; shift
  timeout 120 "$@" > "$T/log" 2>&1
  rc=$?
  if [ $rc -eq 124 ]; then echo "HUNG: $case: still running after 120 s: $*"; fi
}
# the one error line of the last run (exactly one line starts with "error[")
err_line() { grep '^error\[' "$T/log"; }
one_error() { [ "$(grep -c '^error\[' "$T/log")" -eq 1 ] && [ "$(err_line)" = "$1" ]; }
# every file under the scratch dir (names, sizes, checksums), temporaries included
snapshot() { (cd "$T" && find . -path ./log -prune -o -print | sort | while read -r f; do
  if [ -f "$f" ]; then echo "$f $(cksum < "$f")"; else echo "$f"; fi; done); }
no_tmp() { [ -z "$(find "$T" -name '*qmesh-tmp*' -o -name '*qmesh-old*' -o -name '*.tmp.*')" ]; }
npy_shape() { head -c 128 "$1" | tr -d '\000' | grep -o "'shape': ([0-9, ]*)"; }

# ---- item 5: the output keeps the input's rank ----
run "row --out" "$QMESH" encode --input row.npy --scenario "$S" --out row-out.npy
if [ $rc -eq 0 ] && [ "$(npy_shape row-out.npy)" = "'shape': (1, 4)" ]; then ok "(1, 3) input: --out shape (1, 4)"
else bad "(1, 3) input: --out shape is '$(npy_shape row-out.npy)' (rc $rc)"; cat "$T/log"; fi
run "vec --out" "$QMESH" encode --input vec.npy --scenario "$S" --out vec-out.npy
if [ $rc -eq 0 ] && [ "$(npy_shape vec-out.npy)" = "'shape': (4,)" ]; then ok "(3,) input: --out shape (4,)"
else bad "(3,) input: --out shape is '$(npy_shape vec-out.npy)' (rc $rc)"; fi
run "row --out-dir" "$QMESH" encode --input row.npy --scenario "$S" --out-dir rowdir
shape=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["shape"])' rowdir/manifest.json 2>&1)
if [ $rc -eq 0 ] && [ "$shape" = "[1, 4]" ]; then ok "(1, 3) input: manifest shape [1, 4]"
else bad "(1, 3) input: manifest shape '$shape' (rc $rc)"; fi
rm -rf rowdir row-out.npy vec-out.npy

# ---- the previous outputs every failure below must leave intact ----
run "previous --out" "$QMESH" encode --input batch2.npy --scenario "$S" --out prev.npy
[ $rc -eq 0 ] || { bad "previous --out (rc $rc)"; cat "$T/log"; }
run "previous --out-dir" "$QMESH" encode --input batch2.npy --scenario "$S" --out-dir prevdir
[ $rc -eq 0 ] || { bad "previous --out-dir (rc $rc)"; cat "$T/log"; }
mkdir -p adir
before=$(snapshot)
intact() { [ "$(snapshot)" = "$before" ]; }

# ---- item 4: the norm check decides before the commit ----
for out in "--out prev.npy" "--out-dir prevdir"; do
  # shellcheck disable=SC2086
  run "nan $out" env QM_FAULT_RANK=0:check:nan "$QMESH" encode --input batch.npy --scenario "$S" $out
  if [ $rc -eq 1 ] && one_error "error[E-NUMERIC]: encode: norm check failed for state 0: sum |psi|^2 is NaN (bound 3.419e-14); nothing was written" && intact && no_tmp; then
    ok "NaN amplitude, $out: E-NUMERIC, previous output intact, no temporary"
  else bad "NaN amplitude, $out (rc $rc)"; cat "$T/log"; snapshot; fi
  # shellcheck disable=SC2086
  run "skew $out" env QM_FAULT_RANK=0:check:skew "$QMESH" encode --input batch.npy --scenario "$S" $out
  if [ $rc -eq 1 ] && err_line | grep -q '^error\[E-NUMERIC\]: encode: norm check failed for state 0: |sum |psi|^2 - 1| = [0-9.e+-]* exceeds the bound 3.419e-14 (complex128, 2^7 amplitudes); nothing was written$' && one_error "$(err_line)" && intact && no_tmp; then
    ok "amplitude off by 0.001, $out: E-NUMERIC, previous output intact"
  else bad "skewed amplitude, $out (rc $rc)"; cat "$T/log"; fi
done

# without an output the check still runs, on the devices (nothing is read back): the NaN is
# written into the first amplitude where it lives
for m in nan:"sum |psi|^2 is NaN (bound 3.419e-14)" fail:""; do
  run "$m, no output" env QM_FAULT_RANK=0:check:${m%%:*} "$QMESH" encode --input batch.npy --scenario "$S"
  if [ "${m%%:*}" = nan ]; then want="error[E-NUMERIC]: encode: norm check failed for state 0: ${m#*:}; nothing was written"
  else want="error[E-BACKEND]: fault: injected failure on rank 0 at phase check (QM_FAULT_RANK)"; fi
  if [ $rc -eq 1 ] && one_error "$want" && intact && no_tmp; then
    ok "check:${m%%:*} without an output: one coded line, exit 1"
  else bad "check:${m%%:*} without an output (rc $rc)"; cat "$T/log"; fi
done

# ---- item 6: SIGINT / SIGTERM ----
for sig in sigint:130:SIGINT sigterm:143:SIGTERM; do
  mode=${sig%%:*}; rest=${sig#*:}; want=${rest%%:*}; name=${rest#*:}
  for out in "--out prev.npy" "--out-dir prevdir"; do
    # shellcheck disable=SC2086
    run "$mode $out" env QM_FAULT_RANK=0:write:$mode "$QMESH" encode --input batch.npy --scenario "$S" $out
    if [ $rc -eq "$want" ] && one_error "error[E-INTERRUPTED]: encode: interrupted by $name; nothing was written" && \
       [ "$(wc -l < "$T/log")" -eq 1 ] && intact && no_tmp; then
      ok "$name while writing, $out: exit $want, one line, previous output intact, no temporary"
    else bad "$name while writing, $out (rc $rc)"; cat "$T/log"; snapshot; fi
  done
done
run "sigint at plan" env QM_FAULT_RANK=0:plan:sigint "$QMESH" encode --input batch.npy --scenario "$S" --out new.npy
if [ $rc -eq 130 ] && one_error "error[E-INTERRUPTED]: encode: interrupted by SIGINT; nothing was written" && [ ! -e new.npy ] && no_tmp; then
  ok "SIGINT at the plan: exit 130, nothing created"
else bad "SIGINT at the plan (rc $rc)"; cat "$T/log"; fi

# ---- item 7: output paths checked before any work ----
run "--out dir" "$QMESH" encode --input batch.npy --scenario "$S" --out adir
if [ $rc -eq 1 ] && one_error "error[E-OUTPUT]: adir: is a directory; --out names a file (use --out-dir for a directory of shards)"; then
  ok "--out naming a directory: E-OUTPUT"; else bad "--out naming a directory (rc $rc)"; cat "$T/log"; fi
run "missing parent" "$QMESH" encode --input batch.npy --scenario "$S" --out nodir/x.npy
if [ $rc -eq 1 ] && one_error "error[E-OUTPUT]: nodir/x.npy: the directory nodir does not exist; create it first" && [ ! -e nodir ]; then
  ok "--out with a missing parent: E-OUTPUT"; else bad "--out with a missing parent (rc $rc)"; cat "$T/log"; fi
run "--out-dir file" "$QMESH" encode --input batch.npy --scenario "$S" --out-dir batch.npy
if [ $rc -eq 1 ] && one_error "error[E-OUTPUT]: batch.npy: exists and is not a directory; choose another --out-dir or remove the file"; then
  ok "--out-dir naming a file: E-OUTPUT"; else bad "--out-dir naming a file (rc $rc)"; cat "$T/log"; fi
run "--out-dir missing parent" "$QMESH" encode --input batch.npy --scenario "$S" --out-dir nodir/sub
if [ $rc -eq 1 ] && one_error "error[E-OUTPUT]: nodir/sub: the directory nodir does not exist; create it first" && [ ! -e nodir ]; then
  ok "--out-dir with a missing parent: E-OUTPUT, nothing created"; else bad "--out-dir with a missing parent (rc $rc)"; cat "$T/log"; fi
if [ "$(id -u)" -ne 0 ]; then
  mkdir -p ro && chmod 555 ro
  run "read-only parent" "$QMESH" encode --input batch.npy --scenario "$S" --out ro/x.npy
  if [ $rc -eq 1 ] && one_error "error[E-OUTPUT]: ro/x.npy: the directory ro is not writable (Permission denied)"; then
    ok "read-only parent: E-OUTPUT"; else bad "read-only parent (rc $rc)"; cat "$T/log"; fi
  chmod 755 ro
else
  echo "skip: read-only parent: running as root, whom chmod does not stop"
fi
# too little free space: a state larger than the free space of $T, on a scenario it fits (the
# check comes before any allocation, so nothing of that size is ever touched)
avail=$(python3 -c 'import os,sys; s=os.statvfs(sys.argv[1]); print(s.f_bavail*s.f_frsize)' "$T")
n=20; while [ $(( (1 << n) * 8 )) -le $(( avail + avail / 4 )) ] && [ $n -lt 40 ]; do n=$((n+1)); done
run "full disk" "$QMESH" encode --input batch.npy --scenario "$SRC/scenarios/dgx-b200.yaml" --qubits $n --dtype complex64 --out huge.npy
if grep -q 'E-CAPACITY' "$T/log"; then
  echo "skip: free space: $avail bytes free on $T; a larger state does not fit dgx-b200"
elif [ $rc -eq 1 ] && err_line | grep -q "^error\[E-OUTPUT\]: huge.npy: --out needs [0-9.]* [KMGTP]iB but [0-9.]* [KMGTP]*i*B is free on \. ([0-9]* < $(( 4 * (1 << n) * 8 + 128 )) bytes); free space or choose another location$" && \
     [ ! -e huge.npy ] && no_tmp; then
  ok "not enough free space for 2^$n x 4 complex64: E-OUTPUT before any work"
else bad "not enough free space (rc $rc)"; cat "$T/log"; fi

# ---- item 13: file-size limit ----
run "ulimit -f" bash -c "ulimit -f 4; exec \"$QMESH\" encode --input batch.npy --scenario \"$S\" --out prev.npy"
if [ $rc -eq 1 ] && one_error "error[E-OUTPUT]: prev.npy: a file of 8.12 KiB (8320 bytes) exceeds the file-size limit 4.00 KiB (RLIMIT_FSIZE 4096 bytes); raise it (ulimit -f) or use --out-dir (one file per shard)" && intact && no_tmp; then
  ok "ulimit -f 4: E-OUTPUT before any work, no SIGXFSZ"; else bad "ulimit -f (rc $rc)"; cat "$T/log"; fi
# EFBIG from the data write (step 4 of --out: create, header, reserve the size, data)
run "EFBIG" env QM_FAULT_IO=4:EFBIG "$QMESH" encode --input batch.npy --scenario "$S" --out prev.npy
if [ $rc -eq 1 ] && one_error "error[E-OUTPUT]: prev.npy: the file-size limit stopped the write at 128 B of 8.12 KiB (128 of 8320 bytes; RLIMIT_FSIZE unlimited); raise it (ulimit -f) or use --out-dir" && intact && no_tmp; then
  ok "EFBIG from a write: E-OUTPUT naming the bytes, temporary removed"; else bad "EFBIG (rc $rc)"; cat "$T/log"; fi

# ---- item 8: --out-dir is replaced as a whole ----
run "4 shards" "$QMESH" encode --input batch.npy --scenario "$S" --policy equal --out-dir re
n4=$(ls re | grep -c '^shard-')
run "1 shard" "$QMESH" encode --input batch.npy --scenario "$S" --policy single --out-dir re
if [ $rc -eq 0 ] && [ "$n4" -gt 1 ] && [ "$(ls re | tr '\n' ' ')" = "manifest.json shard-0000.npy " ] && no_tmp; then
  ok "re-used --out-dir: $n4 shards replaced by 1, no stale shard"
else bad "re-used --out-dir ($n4 then: $(ls re | tr '\n' ' '), rc $rc)"; cat "$T/log"; fi
mkdir -p notours && echo keep > notours/notes.txt
run "not ours" "$QMESH" encode --input batch.npy --scenario "$S" --out-dir notours
if [ $rc -eq 1 ] && one_error "error[E-OUTPUT]: notours: holds 1 entry but no manifest.json, so it is not a qmesh output and replacing the whole directory would delete them; pass --force or choose another --out-dir" && \
   [ "$(cat notours/notes.txt)" = keep ]; then ok "a directory that is not a qmesh output: refused"
else bad "not a qmesh output (rc $rc)"; cat "$T/log"; fi
run "--force" "$QMESH" encode --input batch.npy --scenario "$S" --out-dir notours --force
if [ $rc -eq 0 ] && [ ! -e notours/notes.txt ] && [ -f notours/manifest.json ]; then ok "--force replaces it"
else bad "--force (rc $rc)"; ls notours; fi
rm -rf re notours

# ---- item 12: temporaries of dead runs ----
intact_but_tmp() { [ "$(snapshot | grep -v qmesh-tmp)" = "$before" ]; }
run "killed while writing" env QM_FAULT_RANK=0:write:kill "$QMESH" encode --input batch.npy --scenario "$S" --out prev.npy
left=$(ls -A | grep -c "^\.prev\.npy\.qmesh-tmp\.$HOST\.[0-9]*$")
if [ $rc -eq 137 ] && [ "$left" -eq 1 ] && intact_but_tmp; then
  ok "a run killed while writing: previous --out intact, its temporary .prev.npy.qmesh-tmp.$HOST.PID left"
else bad "killed while writing: rc $rc, $left temporaries"; ls -A; fi
sh -c 'exit 0' & dead=$!; wait $dead
touch ".prev.npy.qmesh-tmp.$HOST.$dead" ".prev.npy.qmesh-tmp.otherhost.$dead" ".prev.npy.qmesh-tmp.$HOST.$$"
run "sweep --out" "$QMESH" encode --input batch.npy --scenario "$S" --out prev.npy
want=$(printf '%s\n' ".prev.npy.qmesh-tmp.$HOST.$$" ".prev.npy.qmesh-tmp.otherhost.$dead" | LC_ALL=C sort)
if [ $rc -eq 0 ] && grep -q "^qmesh: removed 2 temporaries left by runs that no longer exist$" "$T/log" && \
   [ "$(ls -A | grep '^\.prev\.npy\.' | LC_ALL=C sort)" = "$want" ]; then
  ok "the next run removes the dead runs' temporaries of this host (not a live pid's, not another host's)"
else bad "stale sweep --out (rc $rc)"; cat "$T/log"; ls -A; fi
rm -f ".prev.npy.qmesh-tmp.otherhost.$dead" ".prev.npy.qmesh-tmp.$HOST.$$"
run "killed at commit" env QM_FAULT_RANK=0:commit:kill "$QMESH" encode --input batch.npy --scenario "$S" --out-dir prevdir
leftd=$(ls -A | grep -c "^\.prevdir\.qmesh-tmp\.$HOST\.[0-9]*$")
if [ $rc -eq 137 ] && [ "$leftd" -eq 1 ] && [ "$(snapshot | grep -v -e qmesh-tmp -e '^./prev.npy')" = "$(echo "$before" | grep -v '^./prev.npy')" ]; then
  ok "a run killed at the commit: previous --out-dir intact, its temporary directory left"
else bad "killed at commit: rc $rc, $leftd temporary dirs"; ls -A; fi
run "sweep --out-dir" "$QMESH" encode --input batch2.npy --scenario "$S" --out-dir prevdir
if [ $rc -eq 0 ] && grep -q "^qmesh: removed 1 temporary left by runs that no longer exist$" "$T/log" && no_tmp; then
  ok "the next run removes the killed run's temporary directory"
else bad "stale sweep --out-dir (rc $rc)"; cat "$T/log"; ls -A; fi
# killed after the swap: the new content is in place, the old one in a temporary the next run removes
run "reference" "$QMESH" encode --input batch.npy --scenario "$S" --out-dir refdir
run "killed at swap" env QM_FAULT_RANK=0:swap:kill "$QMESH" encode --input batch.npy --scenario "$S" --out-dir prevdir
leftd=$(ls -A | grep -c "^\.prevdir\.qmesh-tmp\.$HOST\.[0-9]*$")
if [ $rc -eq 137 ] && [ "$leftd" -eq 1 ] && diff -r refdir prevdir > /dev/null; then
  ok "killed after the swap: the new content is in place, the previous one left in a temporary"
else bad "killed at swap: rc $rc, $leftd temporary dirs"; ls -A; fi
run "sweep after swap" "$QMESH" encode --input batch.npy --scenario "$S" --out-dir prevdir
if [ $rc -eq 0 ] && grep -q "^qmesh: removed 1 temporary left by runs that no longer exist$" "$T/log" && no_tmp; then
  ok "the next run removes the previous content left by the killed run"
else bad "sweep after swap (rc $rc)"; cat "$T/log"; ls -A; fi

echo "test_encode_output: $pass passed, $fail failed"
[ $fail -eq 0 ]
