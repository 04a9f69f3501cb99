#!/bin/sh
# expect_job_failure.sh LIMIT_S MARKER COMMAND [ARGS...]
#
# Runs COMMAND (an mpiexec line) under `timeout LIMIT_S` and passes when the job FAILS on its own:
# it exited nonzero, before the limit (not 124: a hang), and its output contains MARKER (so it
# failed for the intended reason, e.g. "rank 1: dying now (kill)", not because mpiexec could not
# start). Used by the `mpi` tests that kill a rank before a collective: Open MPI's mpiexec must end
# the job instead of leaving the other ranks waiting in the collective forever.
limit=$1
marker=$2
shift 2
out=$(mktemp) || exit 2
start=$(date +%s)
timeout -k 5 "$limit" "$@" >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
found=0
grep -qF "$marker" "$out" && found=1
rm -f "$out"
if [ "$rc" -eq 0 ]; then
  echo "expect_job_failure: FAIL: the job exited 0 but a rank was meant to die"
  exit 1
fi
if [ "$rc" -eq 124 ] || [ "$elapsed" -ge "$limit" ]; then
  echo "expect_job_failure: FAIL: the job was still running after ${limit} s (status $rc): a hang"
  exit 1
fi
if [ "$found" -ne 1 ]; then
  echo "expect_job_failure: FAIL: status $rc, but the output lacks '$marker'"
  exit 1
fi
echo "expect_job_failure: ok: the job ended with status $rc after ${elapsed} s"
exit 0
