#!/usr/bin/env bash
# Installs the Debian packages qmesh builds and tests with, when any is missing. Needs root (or
# sudo). The CUDA toolkit (nvcc, NCCL) is not a Debian package here: when it is absent, qmesh
# builds without its CUDA backend. Open MPI (libopenmpi-dev, openmpi-bin) turns on the MPI
# communicator and its `mpi` tests (QM_WITH_MPI defaults to ON when CMake finds MPI).
set -euo pipefail
pkgs=(cmake make gcc g++ pkg-config libyaml-dev libjansson-dev zlib1g-dev libdlpack-dev
      libhdf5-dev python3-h5py # HDF5 input (engine/io/io_hdf5.c) and the files of its Python test
      libbenchmark-dev python3 libopenmpi-dev openmpi-bin
      python3-dev python3-numpy python3-pytest python3-torch python3-setuptools python3-pip
      python3-venv # the Python package (python/, docs/python.md) and its tests
      clang libclang-rt-14-dev) # clang + libFuzzer: the fuzz harnesses (scripts/fuzz.sh)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
