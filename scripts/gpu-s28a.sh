#!/usr/bin/env bash
# Session 28's device call (at most DL seconds, default 420). What it runs depends on the card:
#
# H200: scripts/gpu-s27c.sh (issues 16 and 17's figures, side by side in one call) instead.
#
# Another card (an H100): where the batch's read goes beyond its estimate (issue 17 item 7:
# 65536 x 1021 float64 read at 1.24-1.27x its estimate in session 27, the 2^28 state at 1.06x).
# QM_TRACE=2 timestamps every ring piece (scripts/trace-pieces.py tabulates them)'s submit, the end of its read (the pool's last thread
# leaving it), the wait's return and the copy's end: 3 batch encodes and 2 of the 2^28 state on
# this machine's topo dump (the encodes on it too, since session 30), its plan, and the batch with
# other reader threads and slot sizes.
# Everything under $OUT/s28a, packed as $OUT/s28a.tar.gz (the tool returns few files).
# Usage (device tool, carry [".devdeps"]): bash scripts/gpu-s28a.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R=${OUT:?}/s28a; mkdir -p $R
trap 'tar -czf $OUT/s28a.tar.gz -C $OUT s28a' EXIT
DL=${DL:-420}
left() { [ $SECONDS -lt $(($DL - $1)) ]; } # true when more than $1 seconds are left
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
if grep -q H200 $R/gpu.txt; then
  trap - EXIT
  rm -rf $R
  exec bash scripts/gpu-s27c.sh
fi
. scripts/gpu-env.sh
Q=build-gpu/qmesh D=/tmp/s28; mkdir -p $D
qm_datapath_inputs $D &
BENCH=OFF qm_gpu_build $R qmesh_cli || exit 1
echo "built at $SECONDS s"
timeout 60 bash scripts/gpu-iqp-pieces.sh $Q $R
wait
nproc > $R/nproc.txt; free -g >> $R/nproc.txt; lscpu | grep -E "Model name|Socket|NUMA|L3" >> $R/nproc.txt
$Q topo dump --storage-bytes 2GiB --out $D/machine.yaml 2> $R/dump.txt; cp $D/machine.yaml $R/
cat $D/b.npy $D/x28.npy > /dev/null
$Q plan --scenario $D/machine.yaml --backend cuda --input $D/b.npy --json > $R/plan-b.json 2>&1
$Q plan --scenario $D/machine.yaml --backend cuda --input $D/x28.npy --json > $R/plan-x28.json 2>&1
run() { # TAG INPUT [ENV...]
  local tag=$1 in=$2; shift 2
  left 30 || return 0
  env "$@" QM_TRACE=2 $Q encode --scenario $D/machine.yaml --backend cuda --input $in --json > $R/$tag.json 2> $R/$tag.trace
  echo "$tag rc=$? $(grep -o '"read": [0-9.e-]*' $R/$tag.json | head -1)"
}
for i in 1 2 3; do run b-$i $D/b.npy; done
for i in 1 2; do run x28-$i $D/x28.npy; done
for i in 1 2; do
  run b-t8-$i $D/b.npy QM_READ_THREADS=8
  run b-t32-$i $D/b.npy QM_READ_THREADS=32
  run b-s16m-$i $D/b.npy QM_INGEST_SLOT_BYTES=16777216
  run b-s4m-$i $D/b.npy QM_INGEST_SLOT_BYTES=4194304
done
echo "done at $SECONDS s"
