#!/usr/bin/env bash
# test_encode_io_faults.sh QMESH SRCDIR [MPIEXEC] -- every I/O step of every output form fails once
# (issue 13 item 17; docs/io.md "Fault injection"). Label fault (and mpi with MPIEXEC).
# For each form the previous output is made first; QM_FAULT_IO=count gives the number N of I/O
# steps of a run (open/create, each write, fsync, close, rename, mkdir, the directory exchange);
# then for every K in 1..N, QM_FAULT_IO=K:EIO (odd K) or K:ENOSPC (even K) must end the run with
# exit 1 and exactly one coded line (E-IO or E-OUTPUT), the previous output byte-identical and no
# temporary left; K = N+1 must succeed and replace the output. Without MPIEXEC: --out and --out-dir
# in one process, one-shot and streamed (--batch-size 3: the I/O steps of every batch). With MPIEXEC: --out and --out-dir over 2 ranks, K on every rank and K on rank 1
# only (QM_FAULT_IO_RANK=1). Every command runs under a 120 s watchdog that names the case.
set -u
QMESH=$(cd "$(dirname "$1")" && pwd)/$(basename "$1"); SRC=$(cd "$2" && pwd); MPIEXEC=${3:-}
. "$(dirname "$0")/testlib.sh"
cd "$T" || exit 2
python3 - <<'PY'
import math
from npy_write import npy
npy('batch.npy', '<f8', '(4, 100)', [math.sin(0.1 * i) + 0.01 * (i % 5) for i in range(400)], 'd')
npy('batch2.npy', '<f8', '(4, 100)', [math.cos(0.1 * i) + 0.01 * (i % 3) for i in range(400)], 'd')
PY

run() {
  local case=$1; shift
  timeout 120 "$@" > "$T/log" 2>&1
  rc=$?
  if [ $rc -eq 124 ]; then echo "HUNG: $case: still running after 120 s: $*"; fi
}
snapshot() { (cd "$T" && find . -path ./log -prune -o -path ./batch.npy -prune -o -path ./batch2.npy -prune -o -print | sort |
  while read -r f; do if [ -f "$f" ]; then echo "$f $(cksum < "$f")"; else echo "$f"; fi; done); }
no_tmp() { [ -z "$(find "$T" -name '*qmesh-tmp*' -o -name '*qmesh-old*' -o -name '*.tmp.*')" ]; }

# sweep NAME ENV OUTOPT TARGET LAUNCH...: LAUNCH is the command before `encode` (qmesh, or mpiexec)
sweep() {
  local name=$1 extra_env=$2 outopt=$3 target=$4; shift 4
  rm -rf "${T:?}/$target"
  run "$name: previous output" "$@" encode --input batch2.npy --scenario "$S" $ARGS "$outopt" "$target"
  [ $rc -eq 0 ] || { bad "$name: previous output (rc $rc)"; cat "$T/log"; return; }
  local before; before=$(snapshot)
  # shellcheck disable=SC2086
  run "$name: count" env QM_FAULT_IO=count $extra_env "$@" encode --input batch.npy --scenario "$S" $ARGS "$outopt" "$target"
  local n; n=$(sed -n 's/^fault: \([0-9]*\) I\/O steps (rank [0-9]*)$/\1/p' "$T/log" | sort -n | tail -1)
  if [ $rc -ne 0 ] || [ -z "$n" ] || [ "$n" -lt 5 ]; then bad "$name: counting I/O steps (rc $rc, '$n')"; cat "$T/log"; return; fi
  # the counting run replaced the output: put the previous one back
  run "$name: previous output again" "$@" encode --input batch2.npy --scenario "$S" $ARGS "$outopt" "$target"
  [ "$(snapshot)" = "$before" ] || { bad "$name: the previous output is not reproducible"; return; }
  local k bad_k="" err
  for k in $(seq 1 "$n"); do
    if [ $((k % 2)) -eq 1 ]; then err=EIO; else err=ENOSPC; fi
    # shellcheck disable=SC2086
    run "$name: K=$k" env QM_FAULT_IO=$k:$err $extra_env "$@" encode --input batch.npy --scenario "$S" $ARGS "$outopt" "$target"
    if [ $rc -ne 1 ] || [ "$(grep -c '^error\[' "$T/log")" -ne 1 ] || \
       ! grep -q '^error\[E-\(IO\|OUTPUT\)\]: ' "$T/log" || [ "$(snapshot)" != "$before" ] || ! no_tmp; then
      bad_k="$bad_k $k"
      echo "--- $name: K=$k ($err): rc $rc"; grep -v '^fault' "$T/log" | head -5; ls -A "$T" "$T/$target" 2>/dev/null | head -20
    fi
  done
  # shellcheck disable=SC2086
  run "$name: K=$((n + 1))" env QM_FAULT_IO=$((n + 1)) $extra_env "$@" encode --input batch.npy --scenario "$S" $ARGS "$outopt" "$target"
  local after_ok=0
  [ $rc -eq 0 ] && [ "$(snapshot)" != "$before" ] && no_tmp && after_ok=1
  if [ -z "$bad_k" ] && [ $after_ok -eq 1 ]; then
    ok "$name: each of the $n I/O steps failed once: exit 1, one coded line, previous output intact, no temporary; step $((n + 1)) does not exist (the run succeeds)"
  else bad "$name: failing K:$bad_k; K=$((n + 1)) succeeded: $after_ok"; fi
}

if [ -z "$MPIEXEC" ]; then
  S=$SRC/scenarios/dgx-h100.yaml; ARGS=""
  sweep "--out" "" --out out.npy "$QMESH"
  sweep "--out-dir (4 shards)" "" --out-dir outdir "$QMESH"
  ARGS="--batch-size 3 --prefetch 1" # streamed: 2 batches (3 + 1 samples), written batch by batch
  sweep "--out --batch-size 3" "" --out out.npy "$QMESH"
  sweep "--out-dir --batch-size 3" "" --out-dir outdir "$QMESH"
else
  S=$SRC/scenarios/a100-4node-hdr.yaml; ARGS="--ranks 2"
  sweep "mpi 2 ranks --out" "" --out out.npy $MPI -np 2 "$QMESH"
  sweep "mpi 2 ranks --out-dir" "" --out-dir outdir $MPI -np 2 "$QMESH"
  sweep "mpi 2 ranks --out-dir, rank 1 only" "QM_FAULT_IO_RANK=1" --out-dir outdir $MPI -np 2 "$QMESH"
fi
echo "test_encode_io_faults: $pass passed, $fail failed"
[ $fail -eq 0 ]
