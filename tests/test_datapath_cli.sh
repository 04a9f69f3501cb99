#!/usr/bin/env bash
# test_datapath_cli.sh QMESH SOURCE_DIR HDF5(ON|OFF) -- the data path in the cost model from the
# command line (issue 17 item 7; docs/planner.md "Data path"). Label cli. Every estimate is
# checked to the bit against the formula on a scenario whose figures make it exact (storage 1 MB/s
# read, 2 MB/s write, host copy 4 MB/s, a 1 GB/s host link of zero latency); no case depends on
# timing: encode's measured values are checked for presence and sign only.
#  - plan --input on .npy, CSV and HDF5: read = bytes / the read rate; staging (devices) = the
#    link time (nothing to hide behind a read that is slower), (--backend sim) = bytes / host_copy;
#    ingest = read + staging; write (--out: the .npy file's bytes; --out-dir: the shard's) =
#    read-back + the host's pass (state bytes / host_copy) + bytes / the write rate; nothing written; a host's own storage over the defaults;
#    the built-in defaults (6 GB/s, 2 GB/s) when the scenario states none;
#  - qubits, dtype, batch, features as encode infers them (amplitude, a batch, angle, basis);
#  - errors: a missing input, a directory, a bad .npy (one line, code, exit 1), usage errors
#    (exit 2); scenario errors located (E-RANGE, E-UNKNOWN-KEY, E-UNIT);
#  - the table's data path line; encode --json measured_s read/staging/write; topo dump's storage
#    flags (usage errors with a FILE) and the dump of storage figures, loaded back.
set -u
QMESH=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
SRC=$2
HDF5=${3:-ON}
. "$(dirname "$0")/testlib.sh"
cd "$T" || exit 2
cat > ds.yaml <<'Y'
schema: qmesh/1
name: datapath
sources: [test]
defaults:
  latency: {pcie: 0 us}
  storage: {read: 1 MB/s, write: 2 MB/s}
  host_copy: 4 MB/s
hosts:
  - id: n0
    memory: 1 GiB
    numa: [{id: 0}]
    devices:
      - {id: n0.g0, memory: 1 GiB, hbm_bandwidth: 1 TB/s, numa: 0}
links:
  - {a: n0.numa0, b: n0.g0, kind: pcie, bandwidth: 1 GB/s}
Y
# the same host with its own read rate (write from defaults)
sed 's/^    memory: 1 GiB$/    memory: 1 GiB\n    storage: {read: 0.5 MB\/s}/' ds.yaml > host.yaml
# no storage anywhere: the built-in defaults
grep -v 'storage:\|host_copy:' ds.yaml > plain.yaml
python3 - <<'PY'
from npy_write import npy
npy('a.npy', '<f8', '(1000,)', [1.0 + i for i in range(1000)], 'd')   # 8000 B: 10 qubits
npy('b.npy', '<f4', '(64, 5)', [1.0 + i % 7 for i in range(320)], 'f') # 64 x 5 float32
npy('ang.npy', '<f8', '(3, 4)', [0.1 * i for i in range(12)], 'd')
npy('bas.npy', '<f8', '(3,)', [3.0, 0.0, 5.0], 'd')
open('c.csv', 'w').write('1,2,3\n4,5,6\n')                               # 12 B of text
PY

# run CASE CMD...: stdout in out, stderr in err, status in rc
run() { timeout 120 "$@" >out 2>err; rc=$?; }
# jcheck CASE EXPR: a Python expression over e (estimates_s), r (request) of the JSON in out
jcheck() {
    if python3 -c "
import json, sys
o = json.load(open('out'))
e, r = o['estimates_s'], o['request']
sys.exit(0 if ($2) else 1)" 2>/dev/null; then ok "$1"; else bad "$1: $(head -c 600 out)"; fi
}

run "$QMESH" plan --scenario ds.yaml --input a.npy --json
jcheck "plan --input .npy: read = 8000 B / 1 MB/s, staging = the link time, ingest = their sum, write null" \
    "e['read'] == 8000 / 1e6 and e['staging'] == 8000 / 1e9 and e['ingest'] == 8000 / 1e6 + 8000 / 1e9 and e['write'] is None and r['qubits'] == 10 and r['dtype'] == 'complex128' "
run "$QMESH" plan --scenario ds.yaml --input a.npy --backend sim --json
jcheck "plan --input --backend sim: staging = 8000 B / host_copy 4 MB/s" \
    "e['staging'] == 8000 / 4e6 and e['ingest'] == 8000 / 1e6 + 8000 / 4e6"
run "$QMESH" plan --scenario ds.yaml --input a.npy --out o.npy --json
jcheck "plan --out: write = 16 KiB back over 1 GB/s + its host pass at 4 MB/s + the .npy's 16384 + 128 B / 2 MB/s" \
    "e['write'] == 16384 / 1e9 + 16384 / 4e6 + (16384 + 128) / 2e6"
[ ! -e o.npy ] && ok "plan --out writes nothing" || bad "plan --out left o.npy"
run "$QMESH" plan --scenario ds.yaml --input a.npy --out-dir d --json
jcheck "plan --out-dir: write = 16 KiB back + its host pass + the shard's 16384 B / 2 MB/s" \
    "e['write'] == 16384 / 1e9 + 16384 / 4e6 + 16384 / 2e6"
[ ! -e d ] && ok "plan --out-dir writes nothing" || bad "plan --out-dir left d"
run "$QMESH" plan --scenario ds.yaml --qubits 10 --dtype complex128 --out o.npy --json
jcheck "plan --out without --input: write only; read and staging null" \
    "e['read'] is None and e['staging'] is None and e['write'] == 16384 / 1e9 + 16384 / 4e6 + (16384 + 128) / 2e6"
run "$QMESH" plan --scenario host.yaml --input a.npy --out o.npy --json
jcheck "a host's storage.read (0.5 MB/s) over the defaults; write from defaults.storage" \
    "e['read'] == 8000 / 5e5 and e['write'] == 16384 / 1e9 + 16384 / 4e6 + (16384 + 128) / 2e6"
run "$QMESH" plan --scenario plain.yaml --input a.npy --out o.npy --backend sim --json
jcheck "no storage in the scenario: the defaults 6 GB/s read, 2 GB/s write, 10 GB/s host copy" \
    "e['read'] == 8000 / 6e9 and e['staging'] == 8000 / 10e9 and e['write'] == 16384 / 1e9 + 16384 / 10e9 + (16384 + 128) / 2e9"
run "$QMESH" plan --scenario ds.yaml --input c.csv --json
jcheck "plan --input CSV: read = the file's 12 B / 1 MB/s; staging = 6 values x 8 B over the link" \
    "e['read'] == 12 / 1e6 and e['staging'] == 48 / 1e9 and r['batch'] == 2 and r['features'] == 3"
if [ "$HDF5" = ON ]; then
    run "$QMESH" plan --scenario ds.yaml --input "$SRC/tests/bad-inputs/hdf5-two-datasets.h5" --dataset /a --json
    jcheck "plan --input HDF5 --dataset /a: read = 4 float64 / 1 MB/s" \
        "e['read'] == 32 / 1e6 and r['features'] == 4 and r['qubits'] == 2"
fi

# the request as encode makes it
for c in "a.npy" "b.npy" "ang.npy --encoding angle" "bas.npy --encoding basis" "b.npy --dtype complex128 --qubits 4"; do
    set -- $c
    f=$1; shift
    "$QMESH" plan --scenario ds.yaml --backend sim --input "$f" "$@" --json > p.json 2>/dev/null
    "$QMESH" encode --scenario ds.yaml --input "$f" "$@" --json > e.json 2>/dev/null
    if python3 -c "
import json, sys
p, e = json.load(open('p.json')), json.load(open('e.json'))
sys.exit(0 if p['request'] == e['plan']['request'] and e['ok'] and p['ok'] and p['estimates_s'] == e['plan']['estimates_s'] else 1)"; then
        ok "plan --input $c: the request and estimates encode planned"
    else
        bad "plan --input $c: $(head -c 300 p.json) vs $(head -c 300 e.json)"
    fi
done
run "$QMESH" plan --scenario ds.yaml --input b.npy --json
jcheck "b.npy: 64 x 5 float32 -> 3 qubits, complex64, batch 64; read 1280 B" \
    "r['qubits'] == 3 and r['dtype'] == 'complex64' and r['batch'] == 64 and r['features'] == 5 and e['read'] == 1280 / 1e6"

# errors: one line, the code, exit 1; usage errors exit 2
expect() { # CASE WANT_RC WANT_STDERR CMD...
    local what=$1 want_rc=$2 want=$3; shift 3
    run "$@"
    if [ "$rc" = "$want_rc" ] && [ "$(cat err)" = "$want" ]; then ok "$what"; else bad "$what: rc $rc, stderr '$(cat err)'"; fi
}
expect "plan --input of a missing file: E-IO" 1 \
    "error[E-IO]: $T/nope.npy: cannot open for reading: No such file or directory" \
    "$QMESH" plan --scenario ds.yaml --input "$T/nope.npy"
expect "plan --input of a directory: E-IO" 1 \
    "error[E-IO]: $T: not a regular file (it is a directory); write the data to a file first" \
    "$QMESH" plan --scenario ds.yaml --input "$T"
run "$QMESH" plan --scenario ds.yaml --input "$SRC/tests/bad-inputs/bad-magic.npy"
[ "$rc" = 1 ] && [ "$(wc -l < err)" = 1 ] && grep -q '^error\[E-INPUT\]: .*bad-magic.npy' err && [ ! -s out ] \
    && ok "plan --input of a bad .npy: one E-INPUT line, no table" || bad "bad .npy: rc $rc $(cat err)"
expect "plan --input with --batch: usage" 2 \
    "error[E-ARG]: plan: --input FILE gives the batch and features; drop --batch; run 'qmesh plan --help'" \
    "$QMESH" plan --scenario ds.yaml --input a.npy --batch 3
expect "plan --out with --out-dir: usage" 2 \
    "error[E-ARG]: plan: --out and --out-dir exclude each other; run 'qmesh plan --help'" \
    "$QMESH" plan --scenario ds.yaml --input a.npy --out o.npy --out-dir d
expect "plan --dataset without --input: usage" 2 \
    "error[E-ARG]: plan: --dataset names a dataset of --input FILE; give the file; run 'qmesh plan --help'" \
    "$QMESH" plan --scenario ds.yaml --qubits 3 --dataset /a
expect "plan --phantom --input: usage" 2 \
    "error[E-ARG]: plan: --phantom accounts device memory only and takes no --input, --out or --out-dir; run 'qmesh plan --help'" \
    "$QMESH" plan --scenario ds.yaml --input a.npy --phantom
sed 's/storage: {read: 1 MB\/s, write: 2 MB\/s}/storage: {read: 0 MB\/s, wirte: 2 MB\/s}/; s/host_copy: 4 MB\/s/host_copy: 4/' ds.yaml > bad.yaml
expect "scenario storage errors, located" 1 \
    "bad.yaml:6:19: error[E-RANGE]: defaults.storage.read: '0 MB/s' is zero; a bandwidth must be positive
bad.yaml:6:27: error[E-UNKNOWN-KEY]: defaults.storage: unknown key 'wirte' in defaults.storage; did you mean 'write'?
bad.yaml:7:14: error[E-UNIT]: defaults.host_copy: '4' has no unit; a bandwidth needs one of MB/s, GB/s, TB/s, GiB/s, Mb/s, Gb/s, B/s (e.g. '450 GB/s')" \
    "$QMESH" topo validate bad.yaml
sed 's/storage: {read: 0.5 MB\/s}/storage: {read: 1 GB\/s, write: 1 KB}/' host.yaml > badhost.yaml
run "$QMESH" topo validate badhost.yaml
grep -q "^badhost.yaml:11:36: error\[E-UNIT\]: hosts\[0\].storage.write: " err && [ "$rc" = 1 ] \
    && ok "a host's storage error, located" || bad "host storage error: $(cat err)"

# the table
run "$QMESH" plan --scenario ds.yaml --input a.npy --out o.npy
grep -qx "data path (the input file read, then staged): read 8.000 ms, staging 8.00 us, write 12.368 ms (write: --out)" out \
    && ok "plan table: the data path line" || bad "plan table: $(grep 'data path' out)"

# encode measures the same keys
run "$QMESH" encode --scenario ds.yaml --input a.npy --out o.npy --json
if python3 -c "
import json, sys
m = json.load(open('out'))['measured_s']
sys.exit(0 if all(isinstance(m[k], float) and m[k] >= 0 for k in ('read', 'staging', 'write', 'ingest')) else 1)"; then
    ok "encode --json --out: measured read, staging, write >= 0"; else bad "encode measured: $(cat out | head -c 400)"; fi
run "$QMESH" encode --scenario ds.yaml --input a.npy
grep -q "^data path measured: read .*, staging .*, write n/a (no output)$" out \
    && ok "encode table: the measured data path, write n/a" || bad "encode table: $(grep 'data path' out)"

# topo dump: storage figures written and loaded back; the measurement flags
run "$QMESH" topo dump host.yaml --out dumped.yaml
grep -qx "  storage: {read: 1 MB/s, write: 2 MB/s}" dumped.yaml && grep -qx "  host_copy: 4 MB/s" dumped.yaml \
    && grep -qx "    storage: {read: 4 Mb/s}" dumped.yaml && ok "topo dump writes defaults.storage, host_copy, the host's storage" \
    || bad "topo dump storage: $(grep -n 'storage\|host_copy' dumped.yaml)"
"$QMESH" plan --scenario dumped.yaml --input a.npy --out o.npy --json > out 2>/dev/null
jcheck "the dump loads back with the same figures" \
    "e['read'] == 8000 / 5e5 and e['write'] == 16384 / 1e9 + 16384 / 4e6 + (16384 + 128) / 2e6"
expect "topo dump FILE --no-measure-storage: usage" 2 \
    "error[E-ARG]: topo dump: --no-measure-storage measures this machine's storage; a FILE is dumped as written; run 'qmesh topo dump --help'" \
    "$QMESH" topo dump ds.yaml --no-measure-storage
expect "topo dump --storage-bytes with --no-measure-storage: usage" 2 \
    "error[E-ARG]: topo dump: --storage-bytes and --no-measure-storage exclude each other; run 'qmesh topo dump --help'" \
    "$QMESH" topo dump --storage-bytes 8MiB --no-measure-storage

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
