#!/usr/bin/env bash
# The GPU check of a context's kept encode memory (engine/stages/reuse.c, docs/api.md "Objects and
# ownership") on a one-GPU CUDA machine, after
#   cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
#         -DQM_BUILD_BENCH=ON && cmake --build build-gpu -j16
# Prints everything to stdout; about 2-3 minutes of GPU time. Parts, in order:
#   1. correctness on CUDA: test_api --cuda (one context, many encodes, DLPack), the simulator vs
#      CUDA byte comparisons (test_cuda_diff, test_cuda_batch), test_reuse (the counters; runs on
#      the simulator), python_cuda (torch tensors in and out through the context cache), the
#      streamed CLI tests;
#   2. the figures the change is for (bench/results/2026-12-03-session7-h200.md measured them
#      before it): bench_stream.py (qmesh.stream, qmesh encode --batch-size, PyTorch; 10 and 16
#      qubits) and bench_python.py (per-call cost, torch CUDA tensor -> state);
#   3. qmesh encode --batch-size 1024 over 8192 x 1024 float32 without an output, 3 runs: the
#      samples_per_s of the JSON report (the run that read every batch back to check it before).
# Environment: B (build dir, default build-gpu), DATA (scratch folder, default /tmp/qmesh-s8).
set -uo pipefail
cd "$(dirname "$0")/.."
B=${B:-build-gpu}
DATA=${DATA:-/tmp/qmesh-s8}
mkdir -p "$DATA"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ -d /tmp/devroot/usr/lib/x86_64-linux-gnu ]; then # the carried packages gpu-routine unpacked
  export LD_LIBRARY_PATH=/tmp/devroot/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
PY=$(command -v python3)
git log -1 --format='commit %h %s' 2>/dev/null | cut -c1-120
echo "== 1. correctness"
(cd "$B" && ctest --output-on-failure -R \
  'test_api_cuda|test_cuda_diff|test_cuda_batch$|test_reuse|python_cuda|python_cache|python_stream|test_stream_cli|test_stream_api')
echo "== 2. bench_stream.py (cuda)"
env PYTHONPATH="$B/python" "$PY" bench/bench_stream.py --build "$B" --backend cuda --dir "$DATA/stream"
echo "== 2. bench_python.py"
env PYTHONPATH="$B/python" "$PY" bench/bench_python.py --build "$B"
echo "== 3. qmesh encode --batch-size 1024, no output (8192 x 1024 float32)"
"$PY" -c "import numpy as np; np.save('$DATA/x.npy', np.random.default_rng(5).random((8192, 1024), dtype=np.float32) + 0.1)"
for i in 1 2 3; do
  "$B/qmesh" encode --input "$DATA/x.npy" --batch-size 1024 --backend cuda --json 2>/dev/null |
    "$PY" -c "import json, sys; s = json.load(sys.stdin)['stream']; print('samples_per_s %.0f materialize %.4f s output %.4f s device_bytes_peak %d' % (s['samples_per_s'], s['seconds']['materialize'], s['seconds']['output'], s['device_bytes_peak']))"
done
rm -rf "$DATA"
exit 0
