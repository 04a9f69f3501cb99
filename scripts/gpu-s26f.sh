#!/usr/bin/env bash
# Session 26's check of the ring's give-back beside an output's prepared staging (about 2
# minutes): build qmesh and test_backend_warmup; that test on the GPU; a topo dump; plan against
# encode for the 2^28 float64 state and the 65536 x 1021 batch, without an output (REPEAT=5) and
# with --out (REPEAT=3); a QM_TRACE=1 encode of the 2^28 state with --out. Everything under
# $OUT/s26f, packed as $OUT/s26f.tar.gz. Usage (device tool, carry [".devdeps"]): bash scripts/gpu-s26f.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R=${OUT:?}/s26f; mkdir -p $R
trap 'tar -czf $OUT/s26f.tar.gz -C $OUT s26f' EXIT
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
Q=build-gpu/qmesh D=/tmp/s26d; mkdir -p $D
qm_datapath_inputs $D &
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DQM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DQM_WERROR=ON -DQM_WITH_MPI=OFF > $R/configure.log 2>&1 || { tail -20 $R/configure.log; exit 1; }
cmake --build build-gpu -j16 --target qmesh_cli test_backend_warmup > $R/build.log 2>&1 || { grep -E "error" -A3 $R/build.log | head -30; exit 1; }
wait
build-gpu/tests/test_backend_warmup > $R/warmup.txt 2>&1; echo "test_backend_warmup rc=$?"; tail -2 $R/warmup.txt
$Q topo dump --storage-bytes 2GiB --out $D/machine.yaml 2> $R/dump.txt
for j in x28 b; do
  REPEAT=5 timeout 90 sh scripts/plan-vs-encode.sh $Q $D/$j.npy --scenario $D/machine.yaml --backend cuda > $R/planvs-$j.txt 2>&1; sed -n 4,12p $R/planvs-$j.txt
  REPEAT=3 timeout 120 sh scripts/plan-vs-encode.sh $Q $D/$j.npy --scenario $D/machine.yaml --backend cuda --out $D/o.npy > $R/planvs-$j-out.txt 2>&1; sed -n 4,12p $R/planvs-$j-out.txt
done
QM_TRACE=1 $Q encode --input $D/x28.npy --scenario $D/machine.yaml --backend cuda --out $D/o.npy --json > $R/t-x28-out.json 2> $R/t-x28-out.txt
grep -E "drained|pipes closed|ingest: closed" $R/t-x28-out.txt
rm -rf $D
echo "s26f done at $SECONDS s"
