#!/usr/bin/env bash
# Session 26's traces of the staging phase (about 1.5 minutes): build qmesh; a topo dump; QM_TRACE=1
# encodes of the 2^28 float64 state and of the 65536 x 1021 batch, each without an output and
# twice with --out (the second replaces the first's file). Everything under $OUT/s26e, packed as
# $OUT/s26e.tar.gz. Usage (device tool, carry [".devdeps"]): bash scripts/gpu-s26e.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R=${OUT:?}/s26e; mkdir -p $R
trap 'tar -czf $OUT/s26e.tar.gz -C $OUT s26e' EXIT
. scripts/gpu-env.sh
Q=build-gpu/qmesh D=/tmp/s26d; mkdir -p $D
qm_datapath_inputs $D &
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DQM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DQM_WERROR=ON -DQM_WITH_MPI=OFF > $R/configure.log 2>&1 || { tail -20 $R/configure.log; exit 1; }
cmake --build build-gpu -j16 --target qmesh_cli > $R/build.log 2>&1 || { grep -E "error" -A3 $R/build.log | head -30; exit 1; }
wait
$Q topo dump --storage-bytes 2GiB --out $D/machine.yaml 2> $R/dump.txt
for j in x28 b; do
  cat $D/$j.npy > /dev/null
  for k in 0 1 2 3; do
    o=(); [ $k -ge 2 ] && o=(--out $D/o.npy)
    QM_TRACE=1 timeout 60 $Q encode --input $D/$j.npy --scenario $D/machine.yaml --backend cuda "${o[@]}" --json > $R/t-$j-$k.json 2> $R/t-$j-$k.txt
  done
  rm -f $D/o.npy
done
rm -rf $D
echo "s26e done at $SECONDS s"
