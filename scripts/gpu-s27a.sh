#!/usr/bin/env bash
# Session 27's first device call (at most DL seconds, default 560; each step skipped when the
# deadline is near). What it runs depends on the card that came:
#
# H200: scripts/gpu-s27c.sh (the issues' figures, side by side in one call) instead.
#
# Another card (an H100): this session's two changes measured against the tree before them.
#   1. the output's staging as one page-locked block (encode.c staging_open): test_backend_warmup,
#      then plan against encode with --out (batch REPEAT=5, 2^28 REPEAT=3) and without (batch,
#      REPEAT=5) on a topo dump, and a QM_TRACE=1 batch encode with --out;
#   2. the IQP table sums without a branch per term (bench/results/2026-12-07-s26-iqp-branchfree
#      .patch, applied here with patch -p1): IQP encodes' output sha256 before and after (must be
#      equal), bench_cuda's IQP figures for both, test_backend_ops --cuda on the patched tree, and
#      an Nsight Compute summary of the complex64 batch kernel for both.
# Everything under $OUT/s27a, packed as $OUT/s27a.tar.gz (the tool returns few files).
# Usage (device tool, carry [".devdeps"]): bash scripts/gpu-s27a.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R=${OUT:?}/s27a; mkdir -p $R
trap 'tar -czf $OUT/s27a.tar.gz -C $OUT s27a' EXIT
DL=${DL:-560}
left() { [ $SECONDS -lt $(($DL - $1)) ]; } # true when more than $1 seconds are left
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
if grep -q H200 $R/gpu.txt; then # the figures: gpu-s27c.sh's routine, not a second copy of it
  trap - EXIT
  rm -rf $R
  exec bash scripts/gpu-s27c.sh
fi
. scripts/gpu-env.sh
Q=build-gpu/qmesh D=/tmp/s27; mkdir -p $D
qm_datapath_inputs $D &
IQPF='BM_Iqp/[0-9]+/[0-9]+/[01]/4/'
bench() { # FILTER FILE: bench_cuda, medians of 3, the median rows printed
  timeout $(($DL - SECONDS - 20)) build-gpu/bench/bench_cuda --benchmark_filter="$1" --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true > $2 2>&1
  grep -E "median" $2 | sed -E 's/ +/ /g' | cut -c1-170
}
planvs() { # TAG REPEAT INPUT [FLAGS]: plan against encode on this machine's dump
  local tag=$1 rep=$2 in=$3; shift 3
  left 25 || return 0
  REPEAT=$rep timeout $(($DL - SECONDS - 10)) sh scripts/plan-vs-encode.sh $Q $in --scenario $D/machine.yaml \
    --backend cuda "$@" > $R/planvs-$tag.txt 2>&1
  echo "-- $tag"; sed -n 3,14p $R/planvs-$tag.txt
}
echo "not an H200: this session's changes against the tree before them"
qm_gpu_build $R qmesh_cli bench_cuda test_backend_ops test_backend_warmup || exit 1
echo "built at $SECONDS s"
build-gpu/tests/test_backend_warmup > $R/warmup.txt 2>&1; echo "test_backend_warmup rc=$?"; tail -1 $R/warmup.txt
wait
$Q topo dump --storage-bytes 2GiB --out $D/machine.yaml 2> $R/dump.txt; cp $D/machine.yaml $R/
planvs b-out 5 $D/b.npy --out $D/o.npy
planvs b 5 $D/b.npy
planvs x28-out 3 $D/x28.npy --out $D/o.npy
QM_TRACE=1 $Q encode --backend cuda --input $D/b.npy --out $D/o.npy --json > $R/trace-b-out.json 2> $R/trace-b-out.txt
rm -f $D/o.npy $D/x28.npy
echo "staging block at $SECONDS s"
# 2. the IQP table sums
python3 -c "
import numpy as np
r=np.random.default_rng(11)
np.save('$D/b55.npy', r.uniform(-3,3,(65536,55)))
np.save('$D/b10.npy', r.uniform(-3,3,(65536,10)))
np.save('$D/s210.npy', r.uniform(-3,3,210))"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
iqp_side() { # old | new
  for c in "b55 iqp complex128" "b55 iqp complex64" "b10 iqp-z complex64" "s210 iqp complex128" "s210 iqp complex64"; do
    set -- $c
    $Q encode --backend cuda --input $D/$1.npy --encoding $2 --dtype $3 --out $D/o.npy > /dev/null 2> $D/err || cat $D/err
    echo "$1 $2 $3 $(sha256sum < $D/o.npy | cut -c1-16)"
  done | tee $R/sha-$SIDE.txt
  left 60 && bench "$IQPF" $R/bench-$SIDE.txt
  if [ -n "$NCU" ] && left 60; then
    timeout 60 $NCU --clock-control none --kernel-name regex:iqp_fused4 --launch-count 1 --section SpeedOfLight \
      --section WarpStateStats --section InstructionStats --section Occupancy \
      build-gpu/bench/bench_cuda --benchmark_filter="BM_Iqp/10/65536/0/4/" > $R/ncu-$SIDE.txt 2>&1
    grep -E "Duration|Executed Ipc|Issue Slots|Executed Instructions |Warp Cycles Per Issued|Achieved Occupancy|Registers Per" $R/ncu-$SIDE.txt | head -8
  fi
}
SIDE=old iqp_side
echo "old IQP at $SECONDS s"
left 150 || exit 0
patch -p1 < bench/results/2026-12-07-s26-iqp-branchfree.patch > $R/patch.txt 2>&1 || { cat $R/patch.txt; exit 1; }
mkdir -p $R/new && qm_gpu_build $R/new qmesh_cli bench_cuda test_backend_ops || exit 1
echo "patched build at $SECONDS s"
SIDE=new iqp_side
cmp $R/sha-new.txt $R/sha-old.txt && echo "IQP outputs: old and new byte-identical" || echo "IQP outputs DIFFER"
left 30 && { timeout $(($DL - SECONDS - 5)) build-gpu/tests/test_backend_ops --cuda > $R/backend-ops-new.txt 2>&1; echo "test_backend_ops --cuda (patched) rc=$?"; tail -1 $R/backend-ops-new.txt; }
rm -rf $D
echo "s27a done at $SECONDS s"
