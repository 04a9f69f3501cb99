# gpu-env.sh — sourced by the device scripts (scripts/gpu-*.sh) from the repository root: the
# Debian packages carried in .devdeps (libyaml, jansson, dlpack; the device image lacks them)
# unpacked into /tmp/devroot, their pkg-config files pointed there, and the compiler, linker and
# CMake told where they are; NVLink multicast kept off in NCCL, PyTorch and NVSHMEM (the device
# README: a program that uses it can take the host's GPUs out of service). Without .devdeps it
# does nothing but the multicast settings. Also defines qm_datapath_inputs DIR (below).
if [ -d .devdeps ]; then
  mkdir -p /tmp/devroot && for f in .devdeps/*.deb; do dpkg -x "$f" /tmp/devroot; done
  L=/tmp/devroot/usr/lib/x86_64-linux-gnu
  sed -i "s|^prefix=.*|prefix=/tmp/devroot/usr|" $L/pkgconfig/*.pc
  export PKG_CONFIG_PATH=$L/pkgconfig LD_LIBRARY_PATH=$L CPATH=/tmp/devroot/usr/include
  export CMAKE_PREFIX_PATH=/tmp/devroot/usr
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# Configure build-gpu (Release, CUDA for sm_90, warnings as errors, no MPI, the benchmarks unless
# BENCH=OFF) and build the targets given after the results folder $1 (all without any), logging
# to $1/configure.log and $1/build.log; on failure prints the first errors and returns 1.
qm_gpu_build() {
  local r=$1; shift
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DQM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DQM_BUILD_BENCH="${BENCH:-ON}" -DQM_WERROR=ON -DQM_WITH_MPI=OFF \
    -DPython3_EXECUTABLE="$(command -v python3)" > "$r/configure.log" 2>&1 || { tail -20 "$r/configure.log"; return 1; }
  local t=(); [ $# -gt 0 ] && t=(--target "$@")
  cmake --build build-gpu -j"$(nproc)" "${t[@]}" > "$r/build.log" 2>&1 || { grep -E "error" -A3 "$r/build.log" | head -30; return 1; }
}
# The data path's two jobs (issue 17), as every device script makes them: a 2^28 float64 state
# and a 65536 x 1021 float64 batch, standard normal from seed 7, written as $1/x28.npy and
# $1/b.npy (4.5 GiB in all).
qm_datapath_inputs() {
  python3 -c "
import numpy as np
r=np.random.default_rng(7)
np.save('$1/x28.npy', r.standard_normal(2**28))
np.save('$1/b.npy', r.standard_normal((65536,1021)))"
}
