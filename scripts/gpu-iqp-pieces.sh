#!/usr/bin/env bash
# The IQP exchange in pieces on the CUDA backend (session 29): one iqp state of 22 qubits (22 + 231
# values) encoded on one GPU as 1 device (--policy single), as pcie-4x-l40s's 4 devices (logical
# devices on the one GPU; --policy equal: 2 exchange stages of 16 MiB complex128 shards) with the whole shard as
# scratch, and with pieces of 1000000 bytes (QM_IQP_SCRATCH_BYTES: 17 pieces a stage, the last
# one shorter), and as six-gpu's 6 devices under weighted (runs of 2, 2, 1, 1, 1, 1 pages, in
# pieces); complex128 and complex64. The four outputs must be the same bytes.
# Usage: bash scripts/gpu-iqp-pieces.sh QMESH RESULTS_DIR (after the build; prints one line a case)
Q=$1 R=$2 D=/tmp/iqp-pieces S=scenarios/pcie-4x-l40s.yaml; mkdir -p $D
python3 -c "print(','.join('%.17g' % (0.37 * (k % 23) - 2.9) for k in range(253)))" > $D/iqp.csv
fail=0
for dt in complex128 complex64; do
  $Q encode --backend cuda --scenario $S --input $D/iqp.csv --encoding iqp --dtype $dt --policy single --out $D/one.npy > $R/iqp-$dt-one.txt 2>&1
  $Q encode --backend cuda --scenario $S --input $D/iqp.csv --encoding iqp --dtype $dt --policy equal --out $D/four.npy > $R/iqp-$dt-four.txt 2>&1
  QM_IQP_SCRATCH_BYTES=1000000 $Q encode --backend cuda --scenario $S --input $D/iqp.csv --encoding iqp --dtype $dt \
    --policy equal --out $D/pieces.npy > $R/iqp-$dt-pieces.txt 2>&1
  QM_IQP_SCRATCH_BYTES=1000000 $Q encode --backend cuda --scenario scenarios/six-gpu.yaml --input $D/iqp.csv \
    --encoding iqp --dtype $dt --policy weighted --out $D/six.npy > $R/iqp-$dt-six.txt 2>&1
  if [ -s $D/one.npy ] && cmp -s $D/one.npy $D/four.npy && cmp -s $D/one.npy $D/pieces.npy && cmp -s $D/one.npy $D/six.npy; then
    echo "iqp pieces $dt: 1 device, 4 devices, 4 devices in pieces, 6 devices weighted in pieces: same bytes"
  else
    echo "iqp pieces $dt: FAILED"; tail -2 $R/iqp-$dt-*.txt; fail=1
  fi
  rm -f $D/*.npy
done
rm -rf $D
exit $fail
