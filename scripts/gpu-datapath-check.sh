#!/usr/bin/env bash
# The data path's cost model against the measured phases on a one-GPU CUDA machine (issue 17
# item 7), in one device call of about 3-5 minutes, files under $OUT:
#   1. unpack the carried Debian packages (.devdeps), configure with CUDA for sm_90 without the
#      benchmarks and MPI, build only what the next steps run;
#   2. the CUDA tests of the context, the reader pool, the topo dump probes and Python
#      (test_api --cuda, test_discover_cuda, test_backend_warmup, python_cuda, python_stream, ...);
#   3. qmesh topo dump of this machine (storage, copies, launch, page-locking, staging_setup);
#   4. scripts/plan-vs-encode.sh (REPEAT=3) for a 2^28 float64 state and a 65536 x 1021 batch on
#      that scenario; QM_TRACE=1 encodes of both (where each phase's time goes); the same checks
#      with CUDA_MODULE_LOADING=EAGER (kernels loaded at context creation instead of at their first
#      launch: whether the first chunk's extra time is lazy loading).
# Usage (device tool, carry [".devdeps"]): OUT=... scripts/gpu-datapath-check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu-datapath}
mkdir -p "$OUT"
T0=$SECONDS
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/gpu.txt
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DQM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DQM_BUILD_BENCH=OFF -DQM_WERROR=ON -DQM_WITH_MPI=OFF -DPython3_EXECUTABLE="$(command -v python3)" > $OUT/configure.log 2>&1 || { tail -30 $OUT/configure.log; exit 1; }
cmake --build build-gpu -j16 --target qmesh_cli test_api test_discover_cuda test_backend_warmup test_stream_api test_npy_read qmesh_python > $OUT/build.log 2>&1 || { grep -E "error" -A3 $OUT/build.log | head -40; exit 1; }
echo "built at $((SECONDS-T0)) s"
(cd build-gpu && ctest -j4 --output-on-failure -R "^(test_api|test_api_cuda|test_discover_cuda|test_backend_warmup|test_stream_api|test_npy_read|python_cuda|python_stream)$" ) > $OUT/ctest.log 2>&1
tail -12 $OUT/ctest.log
echo "tests done at $((SECONDS-T0)) s"
Q=build-gpu/qmesh
D=/tmp/s17; mkdir -p $D
$Q topo dump --storage-bytes 2GiB --out $D/machine.yaml 2> $OUT/dump.txt; cat $OUT/dump.txt; cp $D/machine.yaml $OUT/
qm_datapath_inputs $D
echo "inputs at $((SECONDS-T0)) s"
REPEAT=3 sh scripts/plan-vs-encode.sh $Q $D/x28.npy --scenario $D/machine.yaml --backend cuda > $OUT/planvs-x28.txt 2>&1; cat $OUT/planvs-x28.txt
for k in 1 2; do QM_TRACE=1 $Q encode --input $D/x28.npy --scenario $D/machine.yaml --backend cuda 2>&1 | grep -E "trace|measured" ; done > $OUT/trace-x28.txt; grep -E "ms (ingest|local_norm|encode: (ingest|local|backend))" $OUT/trace-x28.txt
echo "== A/B: CUDA_MODULE_LOADING=EAGER (kernels loaded at context creation, not at first launch)"
CUDA_MODULE_LOADING=EAGER REPEAT=3 sh scripts/plan-vs-encode.sh $Q $D/x28.npy --scenario $D/machine.yaml --backend cuda > $OUT/planvs-x28-eager.txt 2>&1; cat $OUT/planvs-x28-eager.txt
REPEAT=3 sh scripts/plan-vs-encode.sh $Q $D/b.npy --scenario $D/machine.yaml --backend cuda > $OUT/planvs-b.txt 2>&1; cat $OUT/planvs-b.txt
CUDA_MODULE_LOADING=EAGER REPEAT=3 sh scripts/plan-vs-encode.sh $Q $D/b.npy --scenario $D/machine.yaml --backend cuda > $OUT/planvs-b-eager.txt 2>&1; cat $OUT/planvs-b-eager.txt
$Q encode --input $D/x28.npy --scenario $D/machine.yaml --backend cuda --json > $OUT/encode-x28.json 2>&1
CUDA_MODULE_LOADING=EAGER $Q encode --input $D/x28.npy --scenario $D/machine.yaml --backend cuda --json > $OUT/encode-x28-eager.json 2>&1
QM_TRACE=1 $Q encode --input $D/b.npy --scenario $D/machine.yaml --backend cuda > $OUT/trace-b.txt 2>&1
CUDA_MODULE_LOADING=EAGER QM_TRACE=1 $Q encode --input $D/x28.npy --scenario $D/machine.yaml --backend cuda > $OUT/trace-x28-eager.txt 2>&1
$Q plan --input $D/x28.npy --scenario $D/machine.yaml --backend cuda --json > $OUT/plan-x28.json
echo "done at $((SECONDS-T0)) s"
rm -rf $D
