#!/usr/bin/env bash
# Session 27's H200 figures, part 2 of 2 (after gpu-s27a.sh on the same warm machine, whose
# build-gpu it uses; at most DL seconds, default 560): issue 17's whole-command comparison with
# the PyTorch script (bench/bench_e2e.py, item 3: file -> device and file -> file, medians of 3),
# streaming against a PyTorch loop (bench/bench_stream.py, item 4), the Python per-call costs
# (bench/bench_python.py) and the simulator against memcpy on this host's CPU (bench_encode,
# item 5). Everything under $OUT/s27b, packed as $OUT/s27b.tar.gz.
# Usage (device tool, carry [".devdeps"]): bash scripts/gpu-s27b.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R=${OUT:?}/s27b; mkdir -p $R
trap 'tar -czf $OUT/s27b.tar.gz -C $OUT s27b' EXIT
DL=${DL:-560}
left() { [ $SECONDS -lt $(($DL - $1)) ]; }
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $R/gpu.txt
[ -x build-gpu/qmesh ] || { echo "no build-gpu: run gpu-s27a.sh first on this machine"; exit 1; }
PY=$(command -v python3) D=/tmp/s27b; mkdir -p $D
timeout $(($DL - SECONDS - 200)) $PY bench/bench_e2e.py --build build-gpu --backend cuda --dir $D/e2e --repeat 3 > $R/e2e.txt 2>&1
echo "e2e rc=$? at $SECONDS s"; tail -14 $R/e2e.txt
if left 150; then
  PYTHONPATH=build-gpu/python timeout $(($DL - SECONDS - 100)) $PY bench/bench_stream.py --build build-gpu --backend cuda --dir $D/stream > $R/stream.txt 2>&1
  echo "stream rc=$? at $SECONDS s"; tail -12 $R/stream.txt
fi
if left 90; then
  PYTHONPATH=build-gpu/python timeout $(($DL - SECONDS - 60)) $PY bench/bench_python.py --build build-gpu > $R/python.txt 2>&1
  echo "python rc=$? at $SECONDS s"; tail -16 $R/python.txt
fi
if left 40; then
  timeout $(($DL - SECONDS - 5)) build-gpu/bench/bench_encode --benchmark_repetitions=3 --benchmark_report_aggregates_only=true > $R/encode-sim.txt 2>&1
  echo "bench_encode rc=$? at $SECONDS s"; grep -E "median" $R/encode-sim.txt | cut -c1-170
fi
rm -rf $D
echo "s27b done at $SECONDS s"
