#!/usr/bin/env bash
# Session 26's third device call (about 3 minutes): defaults.state_alloc and the fused sums
# copied straight into the per-state sums, on a GPU. Build qmesh and the CUDA tests (no
# benchmarks, no MPI); the CUDA-labelled tests; three topo dumps (state_alloc, host_batch); plan
# against encode (REPEAT=5) for the 2^28 float64 state and the 65536 x 1021 batch on the first
# dump, and one QM_TRACE=2 encode of each. Everything under $OUT/s26c, packed as $OUT/s26c.tar.gz.
# Usage (device tool, carry [".devdeps"]): bash scripts/gpu-s26c.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R=${OUT:?}/s26c; mkdir -p $R
trap 'tar -czf $OUT/s26c.tar.gz -C $OUT s26c' EXIT
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
Q=build-gpu/qmesh D=/tmp/s26d; mkdir -p $D
qm_datapath_inputs $D &
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DQM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DQM_WERROR=ON -DQM_WITH_MPI=OFF -DPython3_EXECUTABLE="$(command -v python3)" > $R/configure.log 2>&1 || { tail -20 $R/configure.log; exit 1; }
cmake --build build-gpu -j16 > $R/build.log 2>&1 || { grep -E "error" -A3 $R/build.log | head -30; exit 1; }
wait
echo "built at $SECONDS s"
(cd build-gpu && env -u QM_CUDA_BIG timeout 150 ctest -j4 -L cuda --output-on-failure) > $R/ctest.log 2>&1
grep -E "tests passed|Failed|Not Run|Timeout" $R/ctest.log | head; grep -h "4 GiB state's first" -r build-gpu/Testing/Temporary/LastTest.log | head -2
echo "ctest at $SECONDS s"
for i in 1 2 3; do
  $Q topo dump --storage-bytes 2GiB --out $D/machine$i.yaml 2> $R/dump$i.txt; cp $D/machine$i.yaml $R/
  grep -E "device setup|first allocation|local_norm's roots|work per state" $R/dump$i.txt
done
echo "dumped at $SECONDS s"
for j in x28 b; do
  REPEAT=5 timeout 90 sh scripts/plan-vs-encode.sh $Q $D/$j.npy --scenario $D/machine1.yaml --backend cuda > $R/planvs-$j.txt 2>&1; cat $R/planvs-$j.txt
  QM_TRACE=2 timeout 30 $Q encode --input $D/$j.npy --scenario $D/machine1.yaml --backend cuda --json > $R/trace-$j.json 2> $R/trace-$j.txt
done
rm -rf $D
echo "s26c done at $SECONDS s"
