#!/usr/bin/env bash
# test_hostmem_cli.sh QMESH -- host memory in feasibility from the command line (issue 17 item 8;
# docs/planner.md "Host memory"). Label cli. No case depends on this machine's free memory: every
# run that checks it sets QM_MEMAVAILABLE, and the scenario hosts are small (20 MiB).
#  - encode on the simulator: a state whose devices, host staging and read-back chunk exceed the
#    scenario host's memory is E-CAPACITY before any allocation, exit 1, the exact line with the
#    largest state that fits, no output file;
#  - the same against the injected MemAvailable (built-in mesh, 2 TB host);
#  - the hint works (17 qubits encode); a machine with room encodes;
#  - plan --backend sim: the exact per-host JSON bytes, the table's "not checked" line for a host
#    without memory:, --max counting host memory; plan (default) and --backend cuda, --phantom,
#    encode --phantom and encode --backend cuda never fail on host memory;
#  - usage errors: --backend bogus, --backend with --phantom; a bad QM_MEMAVAILABLE is E-ARG.
set -u
QMESH=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
. "$(dirname "$0")/testlib.sh"
cd "$T" || exit 2
cat > small.yaml <<'Y'
schema: qmesh/1
name: small-host
sources: [test]
hosts:
  - id: n0
    memory: 20 MiB
    numa: [{id: 0}]
    devices:
      - {id: n0.g0, memory: 1 GiB, hbm_bandwidth: 1 TB/s, numa: 0}
links:
  - {a: n0.numa0, b: n0.g0, kind: pcie, bandwidth: 50 GB/s}
Y
grep -v '    memory: 20 MiB' small.yaml > nomem.yaml
python3 - <<'PY'
import math
from npy_write import npy
npy('q18.npy', '<f8', '(%d,)' % (1 << 18), [math.sin(i) + 1.5 for i in range(1 << 18)], 'd')
npy('q17.npy', '<f8', '(%d,)' % (1 << 17), [math.sin(i) + 1.5 for i in range(1 << 17)], 'd')
PY

# run CASE CMD...: under a watchdog; status in $rc, stdout in $T/out, stderr in $T/err
run() {
  local case=$1; shift
  timeout 120 "$@" > "$T/out" 2> "$T/err"
  rc=$?
  if [ $rc -eq 124 ]; then echo "HUNG: $case: still running after 120 s: $*"; fi
}
err_line() { grep '^error\[' "$T/err"; }
expect() { # CASE RC LINE
  if [ "$rc" -eq "$2" ] && [ "$(err_line)" = "$3" ]; then ok "$1"; else
    bad "$1: want exit $2 and '$3', got $rc and '$(cat "$T/err")'"; fi
}

# 2^18 complex128 on one device: 4 MiB shard + 2 MiB device staging, 2 MiB host staging, 16 MiB
# read-back chunk = 24 MiB > 20 MiB; 2^17: 2 + 1 + 1 + 16 = 20 MiB fits
HOSTLINE="error[E-CAPACITY]: feasibility: the simulated devices of host n0 need 6.00 MiB of host memory (+ 2.00 MiB staging + 16.00 MiB output assembly) but n0 has 20.00 MiB; largest state that fits is 17 qubits (complex128)"
QM_MEMAVAILABLE="1 GiB" run host "$QMESH" encode --input q18.npy --scenario small.yaml --out o.npy
expect "encode over the scenario host's memory" 1 "$HOSTLINE"
if [ ! -e o.npy ] && [ -z "$(ls -A | grep -v -e '^small.yaml$' -e '^nomem.yaml$' -e '^q1[78].npy$' -e '^out$' -e '^err$')" ]; then
  ok "nothing left behind"; else bad "files left behind: $(ls -A)"; fi
QM_MEMAVAILABLE="1 GiB" run hint "$QMESH" encode --input q17.npy --scenario small.yaml --out o.npy
if [ $rc -eq 0 ] && [ -s o.npy ]; then ok "the hint works: 17 qubits encode"; else bad "hint: $rc $(cat "$T/err")"; fi
rm -f o.npy

LOCALLINE="error[E-CAPACITY]: feasibility: the simulated devices of this process need 6.00 MiB of host memory (+ 2.00 MiB staging + 16.00 MiB output assembly) but this machine has 20.00 MiB available (MemAvailable); largest state that fits is 17 qubits (complex128)"
QM_MEMAVAILABLE="20 MiB" run local "$QMESH" encode --input q18.npy --out o.npy
expect "encode over the injected MemAvailable (built-in mesh)" 1 "$LOCALLINE"
[ ! -e o.npy ] && ok "no output over MemAvailable" || bad "o.npy written over MemAvailable"
QM_MEMAVAILABLE="1 GiB" run roomy "$QMESH" encode --input q18.npy --out o.npy
[ $rc -eq 0 ] && [ -s o.npy ] && ok "encode with room" || bad "encode with room: $rc $(cat "$T/err")"
QM_MEMAVAILABLE="20 MiB" run plansim "$QMESH" plan --qubits 18 --dtype complex128 --backend sim
expect "plan --backend sim over MemAvailable" 1 "$LOCALLINE"

# the plan JSON's hosts member, exact bytes
QM_MEMAVAILABLE="1 GiB" run json "$QMESH" plan --scenario small.yaml --qubits 18 --dtype complex128 --backend sim --json
H=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["hosts"], sort_keys=True))' "$T/out")
WANT='[{"device_bytes": 6291456, "host": "n0", "memory_bytes": 20971520, "output_bytes": 16777216, "planned_bytes": 25165824, "staging_bytes": 2097152}]'
[ $rc -eq 1 ] && [ "$H" = "$WANT" ] && ok "plan --json hosts bytes" || bad "hosts: $rc $H"
run json_cuda "$QMESH" plan --scenario small.yaml --qubits 18 --dtype complex128 --backend cuda --json
H=$(python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); print(o["hosts"], o["feasible"])' "$T/out")
[ $rc -eq 0 ] && [ "$H" = "None True" ] && ok "plan --backend cuda: host memory not counted" || bad "cuda: $rc $H"
QM_MEMAVAILABLE="1 MiB" run default "$QMESH" plan --scenario small.yaml --qubits 18 --dtype complex128
[ $rc -eq 0 ] && ok "plan without --backend: host memory not counted" || bad "plan default: $rc $(cat "$T/err")"
QM_MEMAVAILABLE="1 MiB" run phantom "$QMESH" plan --scenario small.yaml --qubits 18 --dtype complex128 --phantom
[ $rc -eq 0 ] && ok "plan --phantom: host memory not counted" || bad "plan --phantom: $rc $(cat "$T/err")"
QM_MEMAVAILABLE="1 MiB" run ephantom "$QMESH" encode --input q18.npy --scenario small.yaml --phantom
[ $rc -eq 0 ] && ok "encode --phantom: host memory not counted" || bad "encode --phantom: $rc $(cat "$T/err")"
QM_MEMAVAILABLE="1 MiB" run ecuda "$QMESH" encode --input q18.npy --scenario small.yaml --backend cuda
if ! grep -q 'E-CAPACITY' "$T/err"; then ok "encode --backend cuda: no host-memory E-CAPACITY ($(err_line))"; else bad "encode --backend cuda: $(cat "$T/err")"; fi

# a host without memory: is not checked (said in the table)
QM_MEMAVAILABLE="1 GiB" run nomem "$QMESH" plan --scenario nomem.yaml --qubits 18 --dtype complex128 --backend sim
if [ $rc -eq 0 ] && grep -qx '  n0           24.00 MiB planned; not checked (the scenario gives the host no memory)' "$T/out" &&
   grep -qx '  this machine 24.00 MiB planned of 1.00 GiB available (MemAvailable)' "$T/out"; then
  ok "plan table: host without memory not checked"; else bad "nomem table: $rc $(cat "$T/out" "$T/err")"; fi

# --max counts host memory with --backend sim (complex64 2^19: 4 + 2 + 2 + 8 MiB = 16 <= 20)
QM_MEMAVAILABLE="1 GiB" run max "$QMESH" plan --scenario small.yaml --max --backend sim --json
M=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["max"]; print(m["complex64"]["auto"], m["complex128"]["auto"], m["complex128"]["replicated"])' "$T/out")
[ $rc -eq 0 ] && [ "$M" = "19 17 17" ] && ok "plan --max --backend sim" || bad "max: $rc $M"
run maxcuda "$QMESH" plan --scenario small.yaml --max --json
M=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["max"]; print(m["complex64"]["auto"], m["complex128"]["auto"])' "$T/out")
[ $rc -eq 0 ] && [ "$M" = "26 25" ] && ok "plan --max (device memory only)" || bad "max cuda: $rc $M"

# nothing fits in host memory (the 16 MiB read-back chunk alone exceeds 10 MiB): the ways round it
QM_MEMAVAILABLE="10 MiB" run none "$QMESH" plan --scenario small.yaml --qubits 3 --dtype complex128 --backend sim
expect "nothing fits in host memory" 1 "error[E-CAPACITY]: feasibility: the simulated devices of this process need 192 B of host memory (+ 64 B staging + 16.00 MiB output assembly) but this machine has 10.00 MiB available (MemAvailable); no complex128 state fits under any policy in host memory; use --phantom (no memory), or --backend cuda on GPUs"

# usage errors and a bad hook
run bogus "$QMESH" plan --qubits 3 --backend gpu
expect "plan --backend gpu" 2 "error[E-ARG]: plan: unknown backend 'gpu'; use sim or cuda; run 'qmesh plan --help'"
run both "$QMESH" plan --qubits 3 --backend sim --phantom
expect "plan --backend with --phantom" 2 "error[E-ARG]: plan: --phantom accounts shards without memory and takes no --backend; run 'qmesh plan --help'"
QM_MEMAVAILABLE="lots" run hook "$QMESH" encode --input q17.npy --scenario small.yaml
expect "bad QM_MEMAVAILABLE" 1 "error[E-ARG]: host memory: QM_MEMAVAILABLE must be a size above 0 such as '8 GiB' (got 'lots')"

echo "test_hostmem_cli: $pass passed, $fail failed"
[ $fail -eq 0 ] && [ $pass -gt 0 ]
