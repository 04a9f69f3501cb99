#!/usr/bin/env bash
# compare-cli.sh OLD_QMESH NEW_QMESH — run the same commands with two qmesh binaries and compare
# what users see: every library scenario planned at 20, 34 and 38 qubits (table and --json, with
# the exit status), 30 encodes (five inputs: float64/float32 .npy, a batch with a rescaled row, a
# wide batch, a CSV; three meshes; two dtypes) each with --out and --out-dir, byte for byte, and
# `devices`, `topo show`, `scenario run`. For refactors that must change no output (issue 14).
# Prints each difference and "compared N, differing M"; exit 1 when M > 0.
set -uo pipefail
OLD=$1 NEW=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d) && trap 'rm -rf "$T"' EXIT && cd "$T" || exit 2
/usr/bin/python3 - "$ROOT/tests" <<'PY' || exit 2
import sys, random
sys.path.insert(0, sys.argv[1])
from npy_write import npy
r = random.Random(3)
g = lambda n: [r.gauss(0, 1) for _ in range(n)]
npy('a.npy', '<f8', '(300, 37)', g(300 * 37), 'd')
npy('b.npy', '<f4', '(1000,)', g(1000), 'f')
x = g(50 * 9); x[7 * 9 + 3] = 1e300
npy('d.npy', '<f8', '(50, 9)', x, 'd')
npy('f.npy', '<f8', '(3, 5000)', g(15000), 'd')
open('e.csv', 'w').write('\n'.join(','.join('%.17g' % v for v in g(12)) for _ in range(40)) + '\n')
PY
n=0 bad=0
differ() { bad=$((bad + 1)); echo "DIFF $*"; }
for sc in "$ROOT"/scenarios/*.yaml; do
  for q in 20 34 38; do for j in "" "--json"; do
    "$OLD" plan --scenario "$sc" --qubits $q $j > o1 2>&1; echo "rc $?" >> o1
    "$NEW" plan --scenario "$sc" --qubits $q $j > o2 2>&1; echo "rc $?" >> o2
    n=$((n + 1)); cmp -s o1 o2 || differ "plan $sc --qubits $q $j"
  done; done
done
for in in a.npy b.npy d.npy e.csv f.npy; do
  for sc in "" "--scenario $ROOT/scenarios/hgx-h200.yaml" "--scenario $ROOT/scenarios/a100-4node-hdr.yaml"; do
    for dt in "" "--dtype complex64"; do
      rm -rf od1 od2 o1.npy o2.npy
      # shellcheck disable=SC2086 # the options are words on purpose
      "$OLD" encode --input $in $sc $dt --out o1.npy > /dev/null 2>&1; r1=$?
      # shellcheck disable=SC2086
      "$NEW" encode --input $in $sc $dt --out o2.npy > /dev/null 2>&1; r2=$?
      # shellcheck disable=SC2086
      "$OLD" encode --input $in $sc $dt --out-dir od1 > /dev/null 2>&1
      # shellcheck disable=SC2086
      "$NEW" encode --input $in $sc $dt --out-dir od2 > /dev/null 2>&1
      n=$((n + 1))
      if [ $r1 != $r2 ] || [ ! -s o1.npy ] || ! cmp -s o1.npy o2.npy || ! diff -r od1 od2 > /dev/null; then
        differ "encode --input $in $sc $dt (exit $r1 vs $r2)"
      fi
    done
  done
done
for c in "devices" "topo show $ROOT/scenarios/dgx-h100.yaml" "scenario run $ROOT/scenarios/dgx-b200.yaml"; do
  # shellcheck disable=SC2086
  "$OLD" $c > o1 2>&1; "$NEW" $c > o2 2>&1
  n=$((n + 1)); cmp -s o1 o2 || differ "$c"
done
echo "compared $n, differing $bad"
[ $bad -eq 0 ]
