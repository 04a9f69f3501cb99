#!/usr/bin/env bash
# Session 19, one device call: the data-path check (scripts/gpu-datapath-check.sh) with the new
# trace lines (each of the last ring pieces' copies, each pipe's drain, the pipes' and the ring's
# close), traces of the 2^28 encode with other ring piece sizes, and on an H200 the feature-map
# benchmarks (issue 16). Everything lands in $OUT/s19.tar.gz (the device tool returns 8 files).
set -uo pipefail
cd "$(dirname "$0")/.."
R=${OUT:?}/r; mkdir -p $R
OUT=$R bash scripts/gpu-datapath-check.sh > $R/check.txt 2>&1
tail -60 $R/check.txt
L=/tmp/devroot/usr/lib/x86_64-linux-gnu
export PKG_CONFIG_PATH=$L/pkgconfig LD_LIBRARY_PATH=$L CPATH=/tmp/devroot/usr/include CMAKE_PREFIX_PATH=/tmp/devroot/usr
Q=build-gpu/qmesh; D=/tmp/s19; mkdir -p $D
python3 -c "
import numpy as np
r=np.random.default_rng(7)
np.save('$D/x28.npy', r.standard_normal(2**28))
np.save('$D/b.npy', r.standard_normal((65536,1021)))"
$Q topo dump --storage-bytes 64MiB --out $D/machine.yaml 2> /dev/null
for v in default 2097152 33554432; do
  for k in 1 2; do
    echo "== x28 slot $v run $k"
    if [ $v = default ]; then QM_TRACE=1 $Q encode --input $D/x28.npy --scenario $D/machine.yaml --backend cuda 2>&1 | grep -E "trace|measured"
    else QM_INGEST_SLOT_BYTES=$v QM_TRACE=1 $Q encode --input $D/x28.npy --scenario $D/machine.yaml --backend cuda 2>&1 | grep -E "trace|measured"; fi
  done
done > $R/trace-slots.txt 2>&1
for k in 1 2; do echo "== batch run $k"; QM_TRACE=1 $Q encode --input $D/b.npy --scenario $D/machine.yaml --backend cuda 2>&1 | grep -E "trace|measured"; done > $R/trace-batch2.txt 2>&1
grep -E "ingest: (chunk 63|piece (25[0-9]) copied|pipe|drained|pipes closed|closed)|== " $R/trace-slots.txt | head -80
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  cmake -S . -B build-gpu -DQM_BUILD_BENCH=ON > $R/bench-configure.log 2>&1
  cmake --build build-gpu -j16 --target bench_cuda test_backend_ops > $R/bench-build.log 2>&1 || tail -20 $R/bench-build.log
  build-gpu/bench/bench_cuda --benchmark_filter='BM_WriteFill|BM_Product/[0-9]+/[0-9]+/[01]/(0|4)/|BM_Iqp/[0-9]+/[0-9]+/[01]/(0|4)/' --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true > $R/bench-h200.txt 2>&1
  grep -E "median" $R/bench-h200.txt | head -40
fi
tar czf ${OUT}/s19.tar.gz -C $R .
rm -rf $D
