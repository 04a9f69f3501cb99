#!/usr/bin/env bash
# test_mpi_encode_cuda.sh MPIEXEC QMESH SRCDIR -- `qmesh encode --backend cuda` under mpiexec
# (labels cuda, mpi, diff): the 4-host x 4-GPU scenario encoded by 1, 2 and 4 ranks on the CUDA
# backend writes the same bytes as one process on the simulator and one process on CUDA (single
# state and batch). Each rank maps its devices onto its host's GPUs from its host-local offset
# (qm_layout_host_first_device): on a one-GPU machine every rank shares GPU 0, on a machine with
# one GPU per rank each takes its own. Exit 77 without a GPU.
set -u
MPIEXEC=$1; QMESH=$2; SRC=$3
export NCCL_NVLS_ENABLE=0
if ! "$QMESH" devices --backend cuda > /dev/null 2>&1; then
  echo "test_mpi_encode_cuda: skipped: no CUDA device"; exit 77
fi
S=$SRC/scenarios/a100-4node-hdr.yaml
. "$(dirname "$0")/testlib.sh"
python3 - "$T" <<'PY'
import math, sys
from npy_write import npy
t = sys.argv[1]
n = 1000003
npy(t + '/single.npy', '<f8', '(%d,)' % n, [math.sin(i * 0.001) * (1 + i % 7) for i in range(n)], 'd')
B, F = 64, 1021
npy(t + '/batch.npy', '<f4', '(%d, %d)' % (B, F), [math.cos(i * 0.01) + 0.001 * (i % 13) for i in range(B * F)], 'f')
PY
run() { timeout 120 "$@"; }
for kind in single batch; do
  run "$QMESH" encode --backend sim --input "$T/$kind.npy" --scenario "$S" --out "$T/$kind-sim.npy" > "$T/log" 2>&1 ||
    { bad "$kind: simulator reference"; cat "$T/log"; }
  run "$QMESH" encode --backend cuda --input "$T/$kind.npy" --scenario "$S" --out "$T/$kind-cuda.npy" > "$T/log" 2>&1
  if cmp -s "$T/$kind-sim.npy" "$T/$kind-cuda.npy"; then ok "$kind: one process on CUDA = simulator"
  else bad "$kind: one process on CUDA"; cat "$T/log"; fi
  for np in 1 2 4; do
    run $MPI -np $np "$QMESH" encode --backend cuda --input "$T/$kind.npy" --scenario "$S" \
        --out "$T/$kind-$np.npy" > "$T/log" 2>&1
    if cmp -s "$T/$kind-sim.npy" "$T/$kind-$np.npy"; then ok "$kind: $np ranks on CUDA = simulator"
    else bad "$kind: $np ranks on CUDA"; cat "$T/log"; fi
  done
done
echo "test_mpi_encode_cuda: $pass passed, $fail failed"
[ $fail -eq 0 ]
