#!/usr/bin/env bash
# test_mpi_inputs.sh MPIEXEC QMESH SRCDIR -- issue 13's input items under mpiexec (label mpi):
#  - a Fortran-order float32 (300, 37) .npy with --drop-column 5 on 2 and 4 ranks (each rank reads
#    only its own rows, transposing column segments and skipping the column) writes the same bytes
#    as one process encoding the C-order file without that column;
#  - one rank given a FIFO as input (MPMD): the job ends with the coded error, no hang.
# Every mpiexec runs under `timeout`; 124 means it hung.
set -u
MPIEXEC=$1; QMESH=$2; SRC=$3
S=$SRC/scenarios/a100-4node-hdr.yaml
. "$(dirname "$0")/testlib.sh"
python3 - "$T" <<'PY'
import array, struct, sys
t = sys.argv[1]
B, F, DROP = 300, 37, 5
def save(path, rows, cols, fortran, values):
    h = "{'descr': '<f4', 'fortran_order': %s, 'shape': (%d, %d), }" % (fortran, rows, cols)
    h += ' ' * (64 - (10 + len(h) + 1) % 64) + '\n'
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode())
        array.array('f', values).tofile(f)
v = [[float((r * 37 + c) % 997 + 1) for c in range(F)] for r in range(B)]
save(t + '/f.npy', B, F, True, [v[r][c] for c in range(F) for r in range(B)])
save(t + '/ref.npy', B, F - 1, False, [v[r][c] for r in range(B) for c in range(F) if c != DROP])
PY
run() { timeout 60 "$@"; }

run "$QMESH" encode --input "$T/ref.npy" --scenario "$S" --out "$T/r1.npy" > /dev/null 2>&1 || bad "reference"
for np in 2 4; do
  run $MPI -np $np "$QMESH" encode --input "$T/f.npy" --drop-column 5 --scenario "$S" --out "$T/r$np.npy" > "$T/log" 2>&1
  if cmp -s "$T/r1.npy" "$T/r$np.npy"; then ok "Fortran order + --drop-column 5, $np ranks: same bytes"
  else bad "Fortran order + --drop-column 5, $np ranks"; cat "$T/log"; fi
done

mkfifo "$T/fifo"
run $MPI -np 1 "$QMESH" encode --input "$T/f.npy" --scenario "$S" --ranks 2 : \
    -np 1 "$QMESH" encode --input "$T/fifo" --scenario "$S" --ranks 2 > "$T/log" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "not a regular file (it is a FIFO)" "$T/log"; then
  ok "one rank given a FIFO: the job ends with the coded error (exit $rc)"
else bad "one rank given a FIFO (rc $rc; 124 = hung)"; cat "$T/log"; fi

echo "test_mpi_inputs: $pass passed, $fail failed"
[ $fail -eq 0 ]
