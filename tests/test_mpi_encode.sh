#!/usr/bin/env bash
# test_mpi_encode.sh MPIEXEC QMESH SRCDIR -- `qmesh encode` under mpiexec (label mpi):
#  - 1, 2, 3 and 4 ranks write the same bytes as the one-process run (single state; batch; one
#    iqp state whose transform exchanges shards between ranks, an iqp-z state);
#  - --out-dir: every rank writes its shards, rank 0 the manifest;
#  - a NaN on one rank's range: every rank fails, one message naming the index, no output file;
#  - ranks given different arguments: every rank fails naming the ranks that differ;
#  - a rank killed at a named phase (QM_FAULT_RANK, deterministic): the job ends (no hang), no output;
#  - --out-dir with a rank killed / exiting / failing / signalled before the commit vote: the previous
#    directory is intact; a killed job's temporary directory is removed by the next run.
# Every mpiexec runs under `timeout`. Inputs are written with python3 (struct, no numpy).
set -u
MPIEXEC=$1; QMESH=$2; SRC=$3
S=$SRC/scenarios/a100-4node-hdr.yaml
. "$(dirname "$0")/testlib.sh"
python3 - "$T" <<'PY'
import math, sys
from npy_write import npy
t = sys.argv[1]
n = 200000
x = [math.sin(i * 0.001) * (1 + i % 7) for i in range(n)]
npy(t + '/single.npy', '<f8', '(%d,)' % n, x, 'd')
x[150000] = float('nan')
npy(t + '/nan.npy', '<f8', '(%d,)' % n, x, 'd')
B, F = 30, 100
npy(t + '/batch.npy', '<f4', '(%d, %d)' % (B, F), [math.cos(i * 0.01) + 0.001 * (i % 13) for i in range(B * F)], 'f')
PY
run() { timeout 60 "$@"; }

# one-process references (the scenario's 4 ranks simulated in one process)
run "$QMESH" encode --input "$T/single.npy" --scenario "$S" --out "$T/ref.npy" > /dev/null 2>&1 || bad "reference single"
run "$QMESH" encode --input "$T/batch.npy" --scenario "$S" --out "$T/refb.npy" > /dev/null 2>&1 || bad "reference batch"
for np in 1 2 4; do
  run $MPI -np $np "$QMESH" encode --input "$T/single.npy" --scenario "$S" --out "$T/s$np.npy" > "$T/log" 2>&1
  if cmp -s "$T/ref.npy" "$T/s$np.npy"; then ok "single state, $np ranks: same bytes"; else bad "single state, $np ranks"; cat "$T/log"; fi
done
for np in 3 4; do
  run $MPI -np $np "$QMESH" encode --input "$T/batch.npy" --scenario "$S" --out "$T/b$np.npy" > "$T/log" 2>&1
  if cmp -s "$T/refb.npy" "$T/b$np.npy"; then ok "batch, $np ranks: same bytes"; else bad "batch, $np ranks"; cat "$T/log"; fi
done
# iqp: one state of 18 qubits (18 + 153 values) cut over every device (equal), its transform
# exchanging shards between ranks (host copies and the communicator): the same bytes as one
# process; iqp-z (a product state, no exchange) likewise
python3 -c "print(','.join('%.17g' % (0.37 * (k % 23) - 2.9) for k in range(171)))" > "$T/iqp.csv"
python3 -c "print(','.join('%.17g' % (0.37 * k - 2.9) for k in range(18)))" > "$T/iqpz.csv"
for e in iqp iqp-z; do
  f=$T/${e/-/}.csv
  run "$QMESH" encode --input "$f" --encoding $e --policy equal --scenario "$S" \
      --out "$T/ref-$e.npy" > /dev/null 2>&1 || bad "reference $e"
  for np in 2 4; do
    run $MPI -np $np "$QMESH" encode --input "$f" --encoding $e --policy equal \
        --scenario "$S" --out "$T/q-$e-$np.npy" > "$T/log" 2>&1
    if [ -s "$T/ref-$e.npy" ] && cmp -s "$T/ref-$e.npy" "$T/q-$e-$np.npy"; then ok "$e state, $np ranks: same bytes"
    else bad "$e state, $np ranks"; cat "$T/log"; fi
  done
done
# the exchanges in pieces of 40000 bytes instead of one shard (16 shards of 128 KiB: 4 pieces a
# stage, the last one 11072 bytes), between ranks and inside each: the same bytes
run env QM_IQP_SCRATCH_BYTES=40000 $MPI -np 4 "$QMESH" encode --input "$T/iqp.csv" --encoding iqp \
    --policy equal --scenario "$S" --out "$T/q-pieces.npy" > "$T/log" 2>&1
if [ -s "$T/ref-iqp.npy" ] && cmp -s "$T/ref-iqp.npy" "$T/q-pieces.npy"; then ok "iqp state, 4 ranks, exchanges in pieces: same bytes"
else bad "iqp state, 4 ranks, exchanges in pieces"; cat "$T/log"; fi
# weighted over first-cluster's 3 ranks: unequal rank ranges (6, 5 and 5 pages of 16384
# amplitudes), devices holding 2 pages or 1; with whole pages of scratch and in pieces of 5000
# bytes: the one-process reference's bytes
W=$SRC/scenarios/first-cluster.yaml
run "$QMESH" encode --input "$T/iqp.csv" --encoding iqp --policy weighted --scenario "$W" \
    --out "$T/ref-w.npy" > /dev/null 2>&1 || bad "reference weighted iqp"
for piece in "" 5000; do
  run env QM_IQP_SCRATCH_BYTES=$piece $MPI -np 3 "$QMESH" encode --input "$T/iqp.csv" --encoding iqp \
      --policy weighted --scenario "$W" --out "$T/q-w.npy" > "$T/log" 2>&1
  if [ -s "$T/ref-w.npy" ] && cmp -s "$T/ref-w.npy" "$T/q-w.npy"; then ok "weighted iqp state, 3 ranks of unequal ranges${piece:+, pieces of $piece}: same bytes"
  else bad "weighted iqp state, 3 ranks${piece:+, pieces of $piece}"; cat "$T/log"; fi
done
run $MPI -np 4 "$QMESH" encode --input "$T/single.npy" --scenario "$S" --out-dir "$T/dir" > "$T/log" 2>&1
if [ -f "$T/dir/manifest.json" ] && [ "$(ls "$T/dir"/shard-*.npy | wc -l)" -eq 16 ] && \
   grep -q '"ranks": 4' "$T/dir/manifest.json" && grep -q '"rank": 3' "$T/dir/manifest.json"; then
  ok "out-dir with 4 ranks: 16 shard files and the manifest"
else bad "out-dir with 4 ranks"; cat "$T/log"; ls "$T/dir"; fi

run $MPI -np 4 "$QMESH" encode --input "$T/nan.npy" --scenario "$S" --out "$T/nan-out.npy" > "$T/log" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && \
   grep -q "error\[E-INPUT\]: encode: zero or non-finite norm: input\[150000\] is NaN" "$T/log" && \
   [ "$(grep -c 'error\[' "$T/log")" -eq 1 ] && ! ls "$T"/nan-out.npy* > /dev/null 2>&1; then
  ok "NaN on rank 3's range: one error for all ranks, no output"
else bad "NaN on one rank (rc $rc)"; cat "$T/log"; fi

run $MPI -np 1 "$QMESH" encode --input "$T/single.npy" --scenario "$S" --qubits 18 : \
    -np 1 "$QMESH" encode --input "$T/single.npy" --scenario "$S" --qubits 19 > "$T/log" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "error\[E-RANK\]: comm: ranks disagree on the plan hash: rank 0 has [0-9a-f]*, rank 1 has" "$T/log"; then
  ok "mismatched arguments: every rank fails naming the differing rank"
else bad "mismatched arguments (rc $rc)"; cat "$T/log"; fi

# rank 1 is killed at a named phase (QM_FAULT_RANK, no timing): mpiexec must end the job, not hang,
# and nothing may appear under the output name
QM_FAULT_RANK=1:materialize:kill run $MPI -np 2 "$QMESH" encode --input "$T/single.npy" \
    --scenario "$S" --ranks 2 --out "$T/killed.npy" > "$T/log" 2>&1
rc=$?
if [ $rc -eq 124 ]; then bad "killed rank: the job hung (still running after 60 s)"; cat "$T/log"
elif [ $rc -ne 0 ] && grep -qF "fault: rank 1 killed at phase materialize (QM_FAULT_RANK)" "$T/log" && \
     [ -z "$(ls -A "$T" | grep killed)" ]; then ok "killed rank: the job ended (exit $rc), no output"
else bad "killed rank (rc $rc)"; cat "$T/log"; ls -A "$T"; fi

# --out-dir is replaced as one step across ranks (issue 13 item 11): a rank that dies or fails before
# the commit vote leaves the previous directory byte-identical; what a killed job leaves is a
# temporary directory the next run removes
HOST=$(uname -n | cut -c1-64 | tr -c 'A-Za-z0-9_\n-' '_')
dirsum() { (cd "$T/dir" && for f in *; do echo "$f $(cksum < "$f")"; done); }
prev=$(dirsum)
tmps() { ls -A "$T" | grep -c "^\.dir\.qmesh-tmp\.$HOST\.[0-9]*$"; }
for f in "-np 4:2:commit:kill" "-np 2 --ranks 2:1:commit:exit"; do
  np=${f%%:*}; spec=${f#*:}
  # shellcheck disable=SC2086
  QM_FAULT_RANK=$spec run $MPI ${np%% --*} "$QMESH" encode --input "$T/batch.npy" --scenario "$S" \
      $(echo "$np" | grep -o -- '--ranks [0-9]*') --out-dir "$T/dir" > "$T/log" 2>&1
  rc=$?
  left=$(tmps)
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(dirsum)" = "$prev" ] && [ "$left" -le 1 ]; then
    ok "out-dir, rank ${spec%%:*} dies at the commit ($spec, $np): previous directory intact, $left temporary dir left"
  else bad "out-dir, $spec (rc $rc, $left temporaries)"; cat "$T/log"; ls -A "$T" "$T/dir"; fi
  # stderr apart from stdout: four ranks write to them at once, and a line of one stream can land
  # inside an unfinished line of the other in a shared file (seen under load: the 'removed'
  # line glued to the end of rank 0's 'ranks:' line)
  run $MPI -np 4 "$QMESH" encode --input "$T/single.npy" --scenario "$S" --out-dir "$T/dir" \
      > "$T/log" 2> "$T/err"
  rc=$?
  if [ $rc -eq 0 ] && [ "$(tmps)" -eq 0 ] && [ "$(dirsum)" = "$prev" ] && \
     { [ "$left" -eq 0 ] || grep -qF "qmesh: removed 1 temporary left by runs that no longer exist" "$T/err"; }; then
    ok "the next run removes the dead job's temporary directory ($left) and writes the same directory"
  else bad "the next run after $spec (rc $rc)"; cat "$T/log" "$T/err"; ls -A "$T"; fi
done
QM_FAULT_RANK=1:write:fail run $MPI -np 2 "$QMESH" encode --input "$T/batch.npy" --scenario "$S" --ranks 2 \
    --out-dir "$T/dir" > "$T/log" 2>&1
rc=$?
if [ $rc -eq 1 ] && [ "$(grep -c '^error\[' "$T/log")" -eq 1 ] && \
   grep -qF "error[E-BACKEND]: rank 1: fault: injected failure on rank 1 at phase write (QM_FAULT_RANK)" "$T/log" && \
   [ "$(dirsum)" = "$prev" ] && [ "$(tmps)" -eq 0 ]; then
  ok "out-dir, rank 1 fails while writing: one coded line, previous directory intact, no temporary"
else bad "out-dir, rank 1 fails while writing (rc $rc)"; cat "$T/log"; ls -A "$T"; fi
QM_FAULT_RANK=1:write:sigterm run $MPI -np 2 "$QMESH" encode --input "$T/batch.npy" --scenario "$S" --ranks 2 \
    --out-dir "$T/dir" > "$T/log" 2>&1
rc=$?
if [ $rc -eq 143 ] && [ "$(grep -c '^error\[' "$T/log")" -eq 1 ] && \
   grep -qF "error[E-INTERRUPTED]: rank 1: encode: interrupted by SIGTERM; nothing was written" "$T/log" && \
   [ "$(dirsum)" = "$prev" ] && [ "$(tmps)" -eq 0 ]; then
  ok "out-dir, SIGTERM on rank 1: exit 143, one line, previous directory intact, no temporary"
else bad "out-dir, SIGTERM on rank 1 (rc $rc)"; cat "$T/log"; ls -A "$T"; fi

# gathered --out: rank 1 fails before its first chunk is read back (and, a second case, while rank
# 0 writes its own): rank 0 must not be left waiting for rank 1's chunks; no output, no temporary
for spec in 1:readback:fail 0:readback:fail; do
  rm -f "$T/g.npy"
  QM_FAULT_RANK=$spec run $MPI -np 2 "$QMESH" encode --input "$T/batch.npy" --scenario "$S" --ranks 2 \
      --out "$T/g.npy" > "$T/log" 2>&1
  rc=$?
  r=${spec%%:*}
  if [ $rc -eq 1 ] && [ "$(grep -c '^error\[' "$T/log")" -eq 1 ] && \
     grep -qF "error[E-BACKEND]: rank $r: fault: injected failure on rank $r at phase readback (QM_FAULT_RANK)" "$T/log" && \
     [ ! -e "$T/g.npy" ] && [ -z "$(ls -A "$T" | grep qmesh-tmp)" ]; then
    ok "gathered --out, rank $r fails at read-back: one coded line, no hang, nothing written"
  else bad "gathered --out, $spec (rc $rc)"; cat "$T/log"; ls -A "$T"; fi
done

# the norm check runs on the devices where the shards live and is merged across the ranks: a NaN
# (or an amplitude off by 0.001) written into rank 1's first amplitude on its device is caught on
# every rank, with or without an output, and nothing is written; rank 1's first state is 15 of 30
for out in "" "--out $T/c.npy" "--out-dir $T/cdir"; do
  for m in nan skew; do
    rm -rf "$T/c.npy" "$T/cdir"
    # shellcheck disable=SC2086
    QM_FAULT_RANK=1:check:$m run $MPI -np 2 "$QMESH" encode --input "$T/batch.npy" --scenario "$S" \
        --ranks 2 $out > "$T/log" 2>&1
    rc=$?
    if [ $m = nan ]; then want="error[E-NUMERIC]: rank 0: encode: norm check failed for state 15: sum |psi|^2 is NaN (bound 4.768e-07); nothing was written"
    else want="error[E-NUMERIC]: rank 0: encode: norm check failed for state 15: |sum |psi|^2 - 1| = 1.607e-04 exceeds the bound 4.768e-07 (complex64, 2^7 amplitudes); nothing was written"; fi
    if [ $rc -eq 1 ] && [ "$(grep -c '^error\[' "$T/log")" -eq 1 ] && grep -qxF "$want" "$T/log" && \
       [ ! -e "$T/c.npy" ] && [ ! -e "$T/cdir" ] && [ -z "$(ls -A "$T" | grep qmesh-tmp)" ]; then
      ok "device norm check, rank 1 $m${out:+ ($out)}: E-NUMERIC for state 15 on every rank, nothing written"
    else bad "device norm check, rank 1 $m $out (rc $rc)"; cat "$T/log"; ls -A "$T"; fi
  done
done
QM_FAULT_RANK=1:check:fail run $MPI -np 2 "$QMESH" encode --input "$T/batch.npy" --scenario "$S" --ranks 2 \
    --out "$T/c.npy" > "$T/log" 2>&1
rc=$?
if [ $rc -eq 1 ] && [ "$(grep -c '^error\[' "$T/log")" -eq 1 ] && \
   grep -qF "error[E-BACKEND]: rank 1: fault: injected failure on rank 1 at phase check (QM_FAULT_RANK)" "$T/log" && \
   [ ! -e "$T/c.npy" ] && [ -z "$(ls -A "$T" | grep qmesh-tmp)" ]; then
  ok "rank 1 fails at the check: one coded line, nothing written"
else bad "rank 1 fails at the check (rc $rc)"; cat "$T/log"; ls -A "$T"; fi

echo "test_mpi_encode: $pass passed, $fail failed"
[ $fail -eq 0 ]
