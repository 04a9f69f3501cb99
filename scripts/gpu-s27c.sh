#!/usr/bin/env bash
# Issues 16 and 17's figures on the lent H200, side by side in one device call (at most DL
# seconds, default 570; each step skipped when the deadline is near, most important first). On
# any other card it stops at once (the tool hands out H100s mostly; their figures are in
# bench/results already), so a draw that is not an H200 costs only the machine's start.
#   1. build qmesh, bench_cuda, bench_read, bench_output and test_backend_ops; test_backend_ops
#      --cuda (the gate: CPU and GPU agree on every op);
#   2. issue 16: bench_cuda, each kernel against a fill of the same bytes (medians of 3);
#   3. issue 17 item 7: topo dump + plan against encode (REPEAT=3) for the 2^28 float64 state and
#      the 65536 x 1021 batch, without and with --out;
#   4. items 2 and 3: bench/bench_e2e.py, the whole qmesh encode against the PyTorch script
#      (file -> device, file -> file; medians of 3; qmesh's check phase in its --json);
#   5. item 1: bench_read (page-cache read and pinned H2D ceilings, file -> normalized state);
#   6. item 3: bench_output (qmesh's read-back + pwrite against a plain parallel writer, 2 GiB);
#   7. item 4: bench/bench_stream.py (samples/s against a PyTorch loop), with the Python package.
# Everything under $OUT/s27c, packed as $OUT/s27c.tar.gz.
# Usage (device tool, carry [".devdeps"]): bash scripts/gpu-s27c.sh (ANY=1: on any card, not only an H200)
set -uo pipefail
cd "$(dirname "$0")/.."
R=${OUT:?}/s27c; mkdir -p $R
trap 'tar -czf $OUT/s27c.tar.gz -C $OUT s27c' EXIT
DL=${DL:-570}
left() { [ $SECONDS -lt $(($DL - $1)) ]; } # true when more than $1 seconds are left
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
[ -n "${ANY:-}" ] || grep -q H200 $R/gpu.txt || { echo "not an H200: nothing to do"; exit 0; }
. scripts/gpu-env.sh
Q=build-gpu/qmesh D=/tmp/s27c PY=$(command -v python3); mkdir -p $D
qm_datapath_inputs $D &
qm_gpu_build $R qmesh_cli bench_cuda bench_read bench_output test_backend_ops qmesh_python || exit 1
echo "built at $SECONDS s"
timeout 60 build-gpu/tests/test_backend_ops --cuda > $R/backend-ops.txt 2>&1; echo "test_backend_ops --cuda rc=$?"; tail -1 $R/backend-ops.txt
timeout 60 bash scripts/gpu-iqp-pieces.sh $Q $R
KF="BM_WriteFill/1073741824|BM_Product/30/1/[01]/5/|BM_Product/10/65536/[01]/5/|BM_ProductPhase/30/1/[01]/5/|BM_ProductPhase/10/65536/[01]/5/|BM_Iqp/[0-9]+/[0-9]+/[01]/4/"
timeout 120 build-gpu/bench/bench_cuda --benchmark_filter="$KF" --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true > $R/bench.txt 2>&1
grep -E "median" $R/bench.txt | sed -E 's/ +/ /g' | cut -c1-150
echo "kernels at $SECONDS s"
wait
$Q topo dump --storage-bytes 2GiB --out $D/machine.yaml 2> $R/dump.txt; cp $D/machine.yaml $R/
for j in "x28" "b" "x28-out --out $D/o.npy" "b-out --out $D/o.npy"; do
  set -- $j; tag=$1; shift; in=$D/${tag%-out}.npy
  left 330 || break
  REPEAT=3 timeout 60 sh scripts/plan-vs-encode.sh $Q $in --scenario $D/machine.yaml --backend cuda "$@" > $R/planvs-$tag.txt 2>&1
  echo "-- $tag"; sed -n 3,14p $R/planvs-$tag.txt | grep -v "^gather\|^(median"
done
rm -f $D/o.npy $D/x28.npy $D/b.npy
echo "planvs at $SECONDS s"
if left 200; then
  timeout $(($DL - SECONDS - 90)) $PY bench/bench_e2e.py --build build-gpu --backend cuda --dir $D/e2e --repeat 3 > $R/e2e.txt 2>&1
  echo "e2e rc=$? at $SECONDS s"; tail -14 $R/e2e.txt; rm -rf $D/e2e
fi
if left 80; then
  QM_BENCH_BACKEND=cuda QM_BENCH_READ_DIR=$D timeout $(($DL - SECONDS - 40)) build-gpu/bench/bench_read \
    --benchmark_filter='BM_ReadCeiling/(4|8|16)/|BM_H2DCeiling|BM_FileToState/|BM_FileToStateBatch/|BM_FileToStatePrepared/|BM_MemToState/' \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true > $R/read.txt 2>&1
  echo "read at $SECONDS s"; grep -E "median|ratio|ceiling" $R/read.txt | tail -16 | cut -c1-170
fi
if left 40; then
  QM_BENCH_BACKEND=cuda QM_BENCH_DIR=$D QM_BENCH_OUTPUT_BYTES=2147483648 timeout $(($DL - SECONDS - 20)) \
    build-gpu/bench/bench_output > $R/output.txt 2>&1
  echo "output at $SECONDS s"; grep -E "BM_|ratio" $R/output.txt | tail -8 | cut -c1-170
fi
if left 25; then
  PYTHONPATH=build-gpu/python timeout $(($DL - SECONDS - 5)) $PY bench/bench_stream.py --build build-gpu --backend cuda --repeats 3 --dir $D/stream > $R/stream.txt 2>&1
  echo "stream rc=$? at $SECONDS s"; tail -10 $R/stream.txt
fi
rm -rf $D
echo "s27c done at $SECONDS s"
