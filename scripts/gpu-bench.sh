#!/usr/bin/env bash
# The data-path and kernel benchmarks on a one-GPU CUDA machine, in one call, after
# scripts/gpu-routine.sh has configured and built build-gpu (with -DQM_BUILD_BENCH=ON and the
# Python package). Each part leaves its output under $OUT (or out/gpu-bench) and a summary line;
# a part that fails is reported and the others still run.
# Usage: scripts/gpu-bench.sh [PART ...]   (default: every part, in this order)
#   kernels   bench_cuda BM_Product|BM_Iqp (every kernel generation, fill/copy ceilings, pct)
#   read      bench_read on CUDA: page-cache read and H2D ceilings, file -> normalized state
#   output    bench_output: qmesh's read-back + parallel pwrite against a plain parallel writer
#   e2e       bench/bench_e2e.py: whole qmesh encode vs the PyTorch script (2^28 and a batch)
#   planvs    scripts/plan-vs-encode.sh: plan --input estimates beside encode's measured phases
#   stream    bench/bench_stream.py --backend cuda: samples/s against a PyTorch loop
#   python    bench/bench_python.py: per-call cost (context cache) and CUDA tensor -> state
# Environment: B (build dir, default build-gpu), DATA (scratch folder, default /tmp/qmesh-bench).
set -uo pipefail
cd "$(dirname "$0")/.."
B=${B:-build-gpu}
OUT=${OUT:-out/gpu-bench}
DATA=${DATA:-/tmp/qmesh-bench}
mkdir -p "$OUT" "$DATA"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ -d /tmp/devroot/usr/lib/x86_64-linux-gnu ]; then # the carried packages gpu-routine unpacked
  export LD_LIBRARY_PATH=/tmp/devroot/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
PY=$(command -v python3)
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
part() { # NAME CMD...: run, keep its output, report its exit status and wall time
  local name=$1 t0=$SECONDS rc
  shift
  log "$name: $*"
  "$@" > "$OUT/$name.txt" 2>&1
  rc=$?
  log "$name: rc=$rc in $((SECONDS - t0)) s"
}
parts=${*:-kernels read output e2e planvs stream python}
git log -1 --format='commit %h %s' 2>/dev/null | cut -c1-120 | tee -a "$OUT/summary.txt"
for p in $parts; do
  case $p in
    kernels)
      part kernels "$B/bench/bench_cuda" --benchmark_filter='BM_Product|BM_Iqp|BM_Wht' \
          --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
          --benchmark_counters_tabular=true
      grep -E "median|Benchmark" "$OUT/kernels.txt" | tee -a "$OUT/summary.txt" ;;
    read)
      part read env QM_BENCH_BACKEND=cuda QM_BENCH_READ_DIR="$DATA" "$B/bench/bench_read" \
          --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
      grep -E "median|ratio|ceiling" "$OUT/read.txt" | tail -30 | tee -a "$OUT/summary.txt" ;;
    output)
      if [ -x "$B/bench/bench_output" ]; then
        part output env QM_BENCH_BACKEND=cuda QM_BENCH_DIR="$DATA" QM_BENCH_OUTPUT_BYTES=${QM_BENCH_OUTPUT_BYTES:-2147483648} "$B/bench/bench_output" \
            --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
        grep -E "median|ratio" "$OUT/output.txt" | tail -20 | tee -a "$OUT/summary.txt"
      else
        log "output: $B/bench/bench_output not built"
      fi ;;
    e2e)
      part e2e "$PY" bench/bench_e2e.py --build "$B" --backend cuda --dir "$DATA/e2e" --repeat 3
      cat "$OUT/e2e.txt" | tee -a "$OUT/summary.txt" ;;
    planvs)
      "$PY" -c "import numpy as np; np.save('$DATA/x28.npy', np.random.default_rng(3).standard_normal(2**28)); np.save('$DATA/b.npy', np.random.default_rng(4).standard_normal((65536, 1021)))"
      part planvs-single scripts/plan-vs-encode.sh "$B/qmesh" "$DATA/x28.npy" --backend cuda
      part planvs-single-out scripts/plan-vs-encode.sh "$B/qmesh" "$DATA/x28.npy" --backend cuda \
          --out "$DATA/x28-out.npy"
      part planvs-batch scripts/plan-vs-encode.sh "$B/qmesh" "$DATA/b.npy" --backend cuda
      for f in planvs-single planvs-single-out planvs-batch; do
        tail -14 "$OUT/$f.txt" | tee -a "$OUT/summary.txt"
      done
      rm -f "$DATA/x28-out.npy" ;;
    stream)
      part stream env PYTHONPATH="$B/python" "$PY" bench/bench_stream.py --build "$B" \
          --backend cuda --dir "$DATA/stream"
      tail -12 "$OUT/stream.txt" | tee -a "$OUT/summary.txt" ;;
    python)
      part python env PYTHONPATH="$B/python" "$PY" bench/bench_python.py --build "$B"
      tail -16 "$OUT/python.txt" | tee -a "$OUT/summary.txt" ;;
    *) log "unknown part $p" ;;
  esac
done
exit 0
