#!/usr/bin/env bash
# The whole GPU routine for a one-GPU CUDA machine, in one call:
#   unpack the carried Debian packages (.devdeps), configure with CUDA for sm_90, build, run the
#   cuda/diff tests and the whole suite, run the CUDA encode of the digits set and a 30-qubit
#   state, and leave logs under $OUT (or out/gpu when OUT is unset).
# Usage: scripts/gpu-routine.sh [extra ctest args]
# Environment: QM_CUDA_BIG=1 also runs test_cuda_big (33 qubits, 128 GiB) on its own;
# QM_BENCH_FILTER=regex picks benchmarks (QM_BENCH=0: none; QM_BENCH_PYTHON=1 adds bench/bench_python.py); QM_NCU=1 profiles the bandwidth
# kernels with Nsight Compute (clock control off) into $OUT/ncu.txt; QM_QUICK=1 skips the CLI runs
# (topo dump, digits, the 30-qubit encode) between the tests and the benchmarks.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
log "configure"
# with the machine's Open MPI (the NCCL-over-MPI tests run as root under mpiexec); without it if
# that configuration fails
# the machine's python3 (the one with torch, CUDA build, numpy and pytest) builds the Python package
GPU_CMAKE=(-S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DQM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
           -DQM_BUILD_BENCH=ON -DQM_WERROR=ON -DPython3_EXECUTABLE="$(command -v python3)")
cmake "${GPU_CMAKE[@]}" -DQM_WITH_MPI=ON > "$OUT/configure.log" 2>&1 ||
  { log "configure with MPI failed; without MPI"; rm -rf build-gpu;
    cmake "${GPU_CMAKE[@]}" -DQM_WITH_MPI=OFF >> "$OUT/configure.log" 2>&1; } ||
  { tail -30 "$OUT/configure.log"; exit 1; }
log "build"
cmake --build build-gpu -j"$(nproc)" > "$OUT/build.log" 2>&1 || { grep -E "error" -A3 "$OUT/build.log" | head -40; exit 1; }
log "ctest (all labels, GPU present)"
(cd build-gpu && env -u QM_CUDA_BIG ctest -j4 --output-on-failure "$@") > "$OUT/ctest.log" 2>&1
tail -25 "$OUT/ctest.log" | tee -a "$OUT/summary.txt"
if [ "${QM_QUICK:-0}" != 1 ]; then
log "qmesh devices --backend cuda"
build-gpu/qmesh devices --backend cuda 2>&1 | tee -a "$OUT/summary.txt"
log "qmesh topo dump (this machine)"
build-gpu/qmesh topo dump --out "$OUT/discovered.yaml" 2>&1 | tee -a "$OUT/summary.txt"
build-gpu/qmesh topo validate "$OUT/discovered.yaml" 2>&1 | tee -a "$OUT/summary.txt"
build-gpu/qmesh topo show "$OUT/discovered.yaml" 2>&1 | tail -8 | tee -a "$OUT/summary.txt"
if [ -s data/digits.csv.gz ]; then
  log "qmesh encode --backend cuda (digits)"
  build-gpu/qmesh encode --backend cuda --scenario scenarios/gh200.yaml --input data/digits.csv.gz \
      --drop-column 64 --out "$OUT/digits-cuda.npy" 2>&1 | tail -6 | tee -a "$OUT/summary.txt"
  build-gpu/qmesh encode --backend sim --scenario scenarios/gh200.yaml --input data/digits.csv.gz \
      --drop-column 64 --out /tmp/digits-sim.npy > /dev/null 2>&1
  cmp "$OUT/digits-cuda.npy" /tmp/digits-sim.npy && log "digits: cuda and sim outputs are byte-identical"
fi
log "qmesh encode --backend cuda: a 30-qubit state (2^30 float64 from a .npy file)"
H200=scenarios/measured/h200-single-2026-12-02.yaml
python3 -c "import numpy as np; np.save('/tmp/x30.npy', np.random.default_rng(7).standard_normal(2**30))" &&
  build-gpu/qmesh encode --backend cuda --scenario $H200 --input /tmp/x30.npy 2>&1 | tail -8 | tee -a "$OUT/summary.txt"
log "qmesh encode --backend cuda: 34 qubits complex128 (256 GiB) must be refused by the plan"
build-gpu/qmesh encode --backend cuda --scenario $H200 --input /tmp/x30.npy --qubits 34 2>&1 | tail -2 | tee -a "$OUT/summary.txt"
rm -f /tmp/x30.npy
fi # QM_QUICK
if [ "${QM_CUDA_BIG:-0}" = 1 ]; then
  log "33-qubit complex128 from host (test_cuda_big)"
  build-gpu/tests/test_cuda_big 2>&1 | tail -4 | tee -a "$OUT/summary.txt"
fi
if [ "${QM_BENCH:-1}" != 0 ] && [ -x build-gpu/bench/bench_cuda ]; then
  log "bench_cuda"
  build-gpu/bench/bench_cuda --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
      --benchmark_filter="${QM_BENCH_FILTER:-.}" \
      2>&1 | tee "$OUT/bench_cuda.txt" | grep -E "median|Benchmark" | tee -a "$OUT/summary.txt"
fi
if [ "${QM_BENCH_PYTHON:-0}" = 1 ] && [ -d build-gpu/python/qmesh ]; then
  log "bench_python (qmesh.encode against the C API; a CUDA tensor against plain PyTorch)"
  PYTHONPATH=build-gpu/python python3 bench/bench_python.py --build build-gpu \
      2>&1 | tee "$OUT/bench_python.txt" | tee -a "$OUT/summary.txt"
fi
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ "${QM_NCU:-0}" = 1 ] && [ -n "$NCU" ] && [ -x build-gpu/bench/bench_cuda ]; then
  log "ncu ($NCU)"
  for f in "BM_Pass/30/1/1:sumsq_input_kernel" "BM_Pass/30/0/1:amp_one_state_kernel" \
           "BM_Pass/31/1/0:sumsq_input_kernel" "BM_Pass/31/0/0:amp_pairs_f32_kernel" \
           "BM_Batch/1/:amp_batch" "BM_Batch/0/:amp_batch" "BM_HostInput/30/1/1:stash_kernel"; do
    "$NCU" --clock-control none -k "regex:${f#*:}" -s 2 -c 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
        --section LaunchStats build-gpu/bench/bench_cuda --benchmark_filter="${f%%:*}" \
        >> "$OUT/ncu.txt" 2>&1
  done
  grep -E "^  [a-z_]|Memory Throughput|DRAM Throughput|Duration|Achieved Occupancy|Registers Per|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth" \
      "$OUT/ncu.txt" | tee -a "$OUT/summary.txt"
fi
exit 0
