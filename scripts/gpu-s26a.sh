#!/usr/bin/env bash
# Session 26's data-path call (about 2 minutes): build qmesh; three `topo dump`s of this machine
# (how much its probes vary from one dump to the next: staging, piece roots, the host's batch
# work); plan against encode (REPEAT=5) for the 2^28 float64 state and the 65536 x 1021 batch on
# the first dump; two QM_TRACE=2 encodes of each (every ring piece's read and copy). Everything
# under $OUT/s26a and packed as $OUT/s26a.tar.gz (the device tool brings back a few files only).
# Usage (device tool, carry [".devdeps"]): bash scripts/gpu-s26a.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R=${OUT:?}/s26a; mkdir -p $R
trap 'tar -czf $OUT/s26a.tar.gz -C $OUT s26a' EXIT
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
Q=build-gpu/qmesh D=/tmp/s26d; mkdir -p $D
qm_datapath_inputs $D &
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DQM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DQM_WERROR=ON -DQM_WITH_MPI=OFF > $R/configure.log 2>&1 || { tail -20 $R/configure.log; exit 1; }
cmake --build build-gpu -j16 --target qmesh_cli > $R/build.log 2>&1 || { grep -E "error" -A3 $R/build.log | head -30; exit 1; }
wait
echo "built at $SECONDS s"
for i in 1 2 3; do
  $Q topo dump --storage-bytes 2GiB --out $D/machine$i.yaml 2> $R/dump$i.txt; cp $D/machine$i.yaml $R/
  grep -E "page-locking|device setup|local_norm's roots|work per state" $R/dump$i.txt
done
echo "dumped at $SECONDS s"
for j in x28 b; do
  REPEAT=5 timeout 90 sh scripts/plan-vs-encode.sh $Q $D/$j.npy --scenario $D/machine1.yaml --backend cuda > $R/planvs-$j.txt 2>&1; cat $R/planvs-$j.txt
  for k in 1 2; do
    QM_TRACE=2 timeout 30 $Q encode --input $D/$j.npy --scenario $D/machine1.yaml --backend cuda --json > $R/trace-$j-$k.json 2> $R/trace-$j-$k.txt
  done
done
rm -rf $D
echo "s26a done at $SECONDS s"
