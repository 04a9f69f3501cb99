#!/usr/bin/env bash
# Session 26's IQP experiment (4 to 6 minutes): round 4's table sums without a branch per term
# (iq_term in kernels/cuda_featuremap.cu) against the kernel file before it (.devdeps/fm_orig.cu,
# carried). For each: build qmesh and bench_cuda; IQP encodes on the GPU (a 65536 x 10-qubit batch
# in complex128 and complex64, one 20-qubit state, iqp and iqp-z) whose outputs' sha256 must be
# the same for both; bench_cuda's IQP figures (medians of 3). The new tree also runs
# test_backend_ops --cuda and an Nsight Compute summary of the complex64 batch kernel.
# Everything under $OUT/s26g, packed as $OUT/s26g.tar.gz.
# Not run in session 26 (no machine started). To run it: cp kernels/cuda_featuremap.cu
# .devdeps/fm_orig.cu; git apply bench/results/2026-12-07-s26-iqp-branchfree.patch; then
# Usage (device tool, carry [".devdeps"]): bash scripts/gpu-s26g.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R=${OUT:?}/s26g; mkdir -p $R
trap 'tar -czf $OUT/s26g.tar.gz -C $OUT s26g' EXIT
. scripts/gpu-env.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
D=/tmp/s26g; mkdir -p $D
python3 -c "
import numpy as np
r=np.random.default_rng(11)
np.save('$D/b55.npy', r.uniform(-3,3,(65536,55)))
np.save('$D/b10.npy', r.uniform(-3,3,(65536,10)))
np.save('$D/s210.npy', r.uniform(-3,3,210))" &
run_side() { # $1: new | old; $2: another target to build
  mkdir -p $R/$1
  qm_gpu_build $R/$1 qmesh_cli bench_cuda ${2:-} || exit 1
  wait
  echo "$1 built at $SECONDS s"
  Q=build-gpu/qmesh
  for c in "b55 iqp complex128" "b55 iqp complex64" "b10 iqp-z complex64" "s210 iqp complex128" "s210 iqp complex64"; do
    set -- $c
    $Q encode --backend cuda --input $D/$1.npy --encoding $2 --dtype $3 --out $D/o.npy > /dev/null 2> $D/err || cat $D/err
    echo "$1 $2 $3 $(sha256sum < $D/o.npy | cut -c1-16)"
  done | tee $R/sha-$SIDE.txt
  build-gpu/bench/bench_cuda --benchmark_filter='BM_Iqp/[0-9]+/[0-9]+/[01]/4/' --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true > $R/bench-$SIDE.txt 2>&1
  grep -E "median" $R/bench-$SIDE.txt | sed -E 's/ +/ /g' | cut -c1-170
}
SIDE=new run_side new test_backend_ops
build-gpu/tests/test_backend_ops --cuda > $R/backend-ops.txt 2>&1; echo "test_backend_ops --cuda rc=$?"; tail -2 $R/backend-ops.txt
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  timeout 90 $NCU --clock-control none --kernel-name regex:iqp_fused4 --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section InstructionStats --section Occupancy \
    build-gpu/bench/bench_cuda --benchmark_filter="BM_Iqp/10/65536/0/4/" > $R/ncu-new.txt 2>&1
  grep -E "Duration|Executed Ipc|Issue Slots|Executed Instructions |Warp Cycles Per Issued|Achieved Occupancy|Registers Per" $R/ncu-new.txt | head -12
fi
cp kernels/cuda_featuremap.cu $R/fm_new.cu; cp .devdeps/fm_orig.cu kernels/cuda_featuremap.cu
SIDE=old run_side old
cp $R/fm_new.cu kernels/cuda_featuremap.cu
cmp $R/sha-new.txt $R/sha-old.txt && echo "outputs: old and new byte-identical" || echo "outputs DIFFER"
rm -rf $D
echo "s26g done at $SECONDS s"
