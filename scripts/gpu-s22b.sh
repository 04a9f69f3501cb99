#!/usr/bin/env bash
# Session 22's second device call: IQP's order 3 and round 4's 10-qubit batch path checked and
# measured on the card lent. Builds the tree for sm_90 with the benchmarks (no MPI), runs the
# CUDA and diff tests (every kernel generation of test_backend_ops against the CPU, the CUDA
# diff tests, python_cuda), issue 16's kernel figures (bench_cuda round 4: BM_Product,
# BM_ProductPhase, BM_Iqp, each against a fill of the same run, medians of 3) and the IQP batch
# microbenchmark with o3 checked against the library's round 4 bit for bit. One tarball in $OUT.
# FILTER=REGEX narrows bench_cuda's benchmarks; MICRO=0 skips the microbenchmark; PBLK=1 also runs
# bench/results/2026-12-06-s22-product-blk.cu (the batch product with its tables read in bursts).
# Usage (device tool, carry [".devdeps"]): [FILTER=...] bash scripts/gpu-s22b.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R=/tmp/s22r; rm -rf $R; mkdir -p $R
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
git log -1 --format='commit %H %s' >> $R/gpu.txt
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DQM_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DQM_BUILD_BENCH=ON -DQM_WERROR=ON -DQM_WITH_MPI=OFF -DPython3_EXECUTABLE="$(command -v python3)" > $R/configure.log 2>&1 || { tail -20 $R/configure.log; exit 1; }
cmake --build build-gpu -j16 > $R/build.log 2>&1 || { grep -E "error" -A3 $R/build.log | head -30; exit 1; }
echo "built at $SECONDS s"
(cd build-gpu && ctest -j4 --output-on-failure -L "cuda|diff" -E "test_cuda_big|nccl|mpi") > $R/ctest-cuda.txt 2>&1
(cd build-gpu && ctest --output-on-failure -R "^python_cuda$") >> $R/ctest-cuda.txt 2>&1
grep -E "tests passed|Failed|\*\*\*|Passed" $R/ctest-cuda.txt | tail -30
echo "tests done at $SECONDS s"
F=${FILTER:-'BM_WriteFill|BM_Product/[0-9]+/[0-9]+/[01]/4/|BM_ProductPhase/[0-9]+/[0-9]+/[01]/4/|BM_Iqp/[0-9]+/[0-9]+/[01]/4/'}
timeout $((420 - SECONDS)) build-gpu/bench/bench_cuda --benchmark_filter="$F" \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true > $R/bench.txt 2>&1
grep -E "median" $R/bench.txt | sed -E 's/ +/ /g' | cut -c1-200
echo "bench done at $SECONDS s"
[ "${MICRO:-1}" = 1 ] && nvcc -O3 -arch=sm_90 --fmad=false -std=c++17 -DQM_S22_ORDER3 -Xcompiler -fopenmp -lgomp -Ikernels -Iinclude -Icore \
  -o /tmp/iqp22 bench/results/2026-12-06-s22-iqp-batch.cu > $R/iqp22-build.txt 2>&1 || tail -5 $R/iqp22-build.txt
[ "${MICRO:-1}" = 1 ] && [ -x /tmp/iqp22 ] && [ $SECONDS -lt 520 ] && timeout $((580 - SECONDS)) /tmp/iqp22 > $R/iqp22.txt 2>&1; cat $R/iqp22.txt
if [ "${PBLK:-0}" = 1 ]; then # the batch product with its tables read in bursts (not yet run)
  nvcc -O3 -arch=sm_90 --fmad=false -std=c++17 -Ikernels -Iinclude -Icore -o /tmp/pblk \
    bench/results/2026-12-06-s22-product-blk.cu > $R/pblk-build.txt 2>&1 || tail -5 $R/pblk-build.txt
  [ -x /tmp/pblk ] && timeout 60 /tmp/pblk > $R/pblk.txt 2>&1; cat $R/pblk.txt
fi
echo "s22b done at $SECONDS s"
tar czf ${OUT:?}/s22b.tar.gz -C $R .
