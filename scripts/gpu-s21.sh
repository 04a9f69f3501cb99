#!/usr/bin/env bash
# Session 21, one device call: the data-path check (scripts/gpu-datapath-check.sh: build, the
# CUDA tests, topo dump, plan --input beside encode's measured phases for the 2^28 state and the
# 65536 x 1021 batch, default and CUDA_MODULE_LOADING=EAGER) with the data path's kernels now
# loaded on the start-up thread; three more traced 2^28 encodes (where the staging's time goes:
# ring ready, chunk 0's copies and kernels, the tail, the close); bench/bench_e2e.py (the whole
# qmesh encode against the PyTorch script, same run; E2E=0: not); OUTCHECK=1: plan against
# encode with --out for both jobs (the write phase); on an H200 also the feature-map
# and data-path benchmarks of scripts/gpu-bench.sh while the call's time lasts. The working files
# stay outside $OUT; $OUT gets one tarball (the device tool returns only a few files).
set -uo pipefail
cd "$(dirname "$0")/.."
R=/tmp/s21r; rm -rf $R; mkdir -p $R
OUT=$R bash scripts/gpu-datapath-check.sh > $R/check.txt 2>&1
tail -45 $R/check.txt
L=/tmp/devroot/usr/lib/x86_64-linux-gnu
export PKG_CONFIG_PATH=$L/pkgconfig LD_LIBRARY_PATH=$L CPATH=/tmp/devroot/usr/include CMAKE_PREFIX_PATH=/tmp/devroot/usr
Q=build-gpu/qmesh; D=/tmp/s21; mkdir -p $D
python3 -c "
import numpy as np
r=np.random.default_rng(7)
np.save('$D/x28.npy', r.standard_normal(2**28))
np.save('$D/b.npy', r.standard_normal((65536,1021)))"
for k in 1 2 3; do
  echo "== x28 run $k"
  QM_TRACE=1 $Q encode --input $D/x28.npy --scenario $R/machine.yaml --backend cuda 2>&1 | grep -E "trace|measured"
done > $R/trace-x28-3.txt 2>&1
for k in 1 2; do
  echo "== batch run $k"
  QM_TRACE=1 $Q encode --input $D/b.npy --scenario $R/machine.yaml --backend cuda 2>&1 | grep -E "trace|measured"
done > $R/trace-b-2.txt 2>&1
grep -hE "== |ingest starts|ring of|chunk 0 (copies )?enqueued|pipes closed|ingest: closed|backend started|measured" $R/trace-x28-3.txt $R/trace-b-2.txt | head -60
# OUTCHECK=1: plan against encode with an output file (the write phase), both jobs
if [ "${OUTCHECK:-0}" = 1 ]; then
  for j in x28 b; do
    REPEAT=3 sh scripts/plan-vs-encode.sh $Q $D/$j.npy --scenario $R/machine.yaml --backend cuda --out $D/out-$j.npy > $R/planvs-out-$j.txt 2>&1
    grep -E "^(phase|ingest|local_norm|norm_allreduce|encode|read|staging|write) " $R/planvs-out-$j.txt; rm -f $D/out-$j.npy
  done
fi
rm -rf $D
# the whole qmesh encode (file -> device, file -> file) against the PyTorch script, same run
if [ "${E2E:-1}" = 1 ] && [ $SECONDS -lt 300 ]; then
  timeout $((560 - SECONDS)) python3 bench/bench_e2e.py --build build-gpu --backend cuda --dir /tmp/s21e2e --repeat 3 > $R/e2e.txt 2>&1
  tail -30 $R/e2e.txt; rm -rf /tmp/s21e2e
fi
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ $SECONDS -lt 330 ]; then
  cmake -S . -B build-gpu -DQM_BUILD_BENCH=ON > $R/bench-configure.log 2>&1
  timeout $((520 - SECONDS)) cmake --build build-gpu -j16 --target bench_cuda bench_read bench_output > $R/bench-build.log 2>&1 || tail -5 $R/bench-build.log
  for part in kernels read output e2e; do
    [ $SECONDS -lt 540 ] || break
    OUT=$R/bench DATA=/tmp/qb timeout $((580 - SECONDS)) bash scripts/gpu-bench.sh $part > $R/bench-$part.txt 2>&1
    tail -8 $R/bench-$part.txt
  done
fi
echo "s21 done at $SECONDS s"
tar czf ${OUT:?}/s21.tar.gz -C $R .
