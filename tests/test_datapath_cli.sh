#!/usr/bin/env bash
# test_datapath_cli.sh QMESH SOURCE_DIR HDF5(ON|OFF) -- the data path in the cost model from the
# command line (issue 17 item 7; docs/planner.md "Data path"). Label cli. Every estimate is
# checked against the formula (to 1e-12 relative: the same operations, in C and Python) on a
# scenario whose figures make it exact (storage 1 MB/s read, 2 MB/s write, 4 MB/s cached_read,
# host copy 4 MB/s, launch 5 us, page_lock 1 ms + 2 GB/s per buffer (P(b) = 1 ms + b rounded up to 2
# MiB / 2 GB/s: the ingest's ring and fused sums, local_norm's piece roots, the write's staging
# block of 8 chunks), staging_setup 0.25 ms, staging_open 0.5 ms, piece_roots 40 us, a 1 GB/s host
# link of zero latency, HBM 1 TB/s); the input's
# page-cache residency is fixed by the test hook QM_INPUT_RESIDENT (0 unless a case sets it); no
# case depends on timing: encode's measured values are checked for presence and sign only.
#  - plan --input on .npy, CSV and HDF5: read = resident bytes / cached_read + the rest / read;
#    on devices ingest = the device's setup outside the reads (its state and block sums
#    allocated, its staging pipe closed: staging_setup 0.25 ms; built in: 0.7 ms; with several
#    ranks also each rank's ring and sums page-locked, which one process does on its CUDA start-up
#    thread) + the read overlapped with the copies, which start once the pipe is open
#    (staging_open 0.5 ms; built in: 1 ms) and the first piece is read (one piece here: the read
#    + the copies when the read is the longer; a .npy's background reads are waited for after the
#    open, so its read is at least the open; a CSV or HDF5 file is read on the ingest's thread
#    after it), the copies = the link time + the chunk's 3 launches (fused: H2D, amp_batch, D2H of
#    the sums) + the fused pass's HBM time, staging = ingest - read;
#    (--backend sim) staging = bytes / host_copy, ingest = read + staging; a fused state or batch
#    has local_norm 0 and encode 0 (no stream, no pass over its states), a batch's local_norm and
#    norm_allreduce the host's per-state work (64 x 1.5 ns, 64 x 6 ns built in; a scenario's
#    defaults.host_batch instead when it states one); a 2^15 state (not fused,
#    whole 2^14-slot blocks: its block sums taken from the staging inside the ingest, a sumsq per
#    chunk reading the chunk's bytes at HBM rate, and behind the last chunk the tree_combine of
#    its block sums into the state's root and the D2H of that root: 2 more launches in the
#    ingest) has local_norm 0 (it only adds the root), encode = 2 x bytes / HBM + 2 launches; a
#    2^15 state of 20000
#    values (padded: its block sums made in local_norm) has local_norm = its pass at HBM rate +
#    the sumsq's launch + the round trip; write (--out:
#    the .npy file's bytes; --out-dir: the shard's) = the read-back (link time + 2 launches per
#    2 MiB chunk) overlapped with the file write (bytes / the write rate): their sum for one chunk
#    (with several ranks after the output's 8 page-locked staging buffers, which one process makes
#    on its CUDA start-up thread);
#    on the simulator the file write alone; nothing written; a host's own storage over the
#    defaults; the built-in defaults (6 GB/s read, 20 GB/s cached_read, 2 GB/s write, 10 us
#    launch, staging_setup 0.7 ms, staging_open 1 ms, piece_roots 60 us) when the scenario states
#    none; QM_INPUT_RESIDENT malformed: E-ARG;
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
  storage: {read: 1 MB/s, write: 2 MB/s, cached_read: 4 MB/s}
  host_copy: 4 MB/s
  launch: 5 us
  page_lock: {buffer: 1 ms, rate: 2 GB/s}
  staging_setup: 0.25 ms
  staging_open: 0.5 ms
  piece_roots: 40 us
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
grep -v 'storage:\|host_copy:\|launch:\|page_lock:\|staging_setup:\|staging_open:\|piece_roots:' ds.yaml > plain.yaml
python3 - <<'PY'
from npy_write import npy
npy('a.npy', '<f8', '(1000,)', [1.0 + i for i in range(1000)], 'd')   # 8000 B: 10 qubits
npy('b.npy', '<f4', '(64, 5)', [1.0 + i % 7 for i in range(320)], 'f') # 64 x 5 float32
npy('ang.npy', '<f8', '(3, 4)', [0.1 * i for i in range(12)], 'd')
npy('bas.npy', '<f8', '(3,)', [3.0, 0.0, 5.0], 'd')
npy('s15.npy', '<f8', '(32768,)', [1.0] * 32768, 'd')                    # 2^15: not fused
npy('p15.npy', '<f8', '(20000,)', [1.0] * 20000, 'd')                    # 2^15, padded
npy('big.npy', '<f8', '(5242880,)', [], 'd')                              # 40 MiB: the header only,
with open('big.npy', 'r+b') as f:                                         # the values a hole
    f.truncate(128 + 5242880 * 8)
with open('big24.npy', 'wb') as f:                                        # 128 MiB, a hole too
    f.write(open('big.npy', 'rb').read(128).replace(b'(5242880,)', b'(16777216,)'))
    f.truncate(128 + 16777216 * 8)
open('c.csv', 'w').write('1,2,3\n4,5,6\n')                               # 12 B of text
PY

# run CASE CMD...: stdout in out, stderr in err, status in rc
run() { timeout 120 "$@" >out 2>err; rc=$?; }
export QM_INPUT_RESIDENT=0
# jcheck CASE EXPR: a Python expression over e (estimates_s), r (request) of the JSON in out;
# eq(a, b): equal to 1e-12 relative
jcheck() {
    if python3 -c "
import json, math, sys
o = json.load(open('out'))
e, r = o['estimates_s'], o['request']
eq = lambda a, b: a is not None and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-18)
# making a page-locked buffer of b bytes: buffer + b rounded up to 2 MiB / rate (ds.yaml's)
P = lambda b, buf=1e-3, rate=2e9: buf + math.ceil(b / 2097152) * 2097152 / rate
sys.exit(0 if ($2) else 1)" 2>/dev/null; then ok "$1"; else bad "$1: $(head -c 600 out)"; fi
}

L=5e-6 # defaults.launch
# a.npy: 1000 float64 (8000 B) -> one 2^10 complex128 state (16384 B): fused, one chunk
CA="(8000 / 1e9 + (3 * $L + (8000 + 16384) / 1e12))" # the copies: link + launches + HBM pass
S=0.25e-3 # defaults.staging_setup: the device's state and sums allocated, its staging pipe closed
O=0.5e-3  # defaults.staging_open: its staging pipe opened and first used, inside the reads
R=40e-6   # defaults.piece_roots: local_norm's round trip (tree_combine, the root's copy, the sync)
SA="$S" # outside the reads: the state allocated and the pipe closed (one process page-locks its
# ring and sums on its CUDA start-up thread, outside the ingest: not charged; several ranks: below)
run "$QMESH" plan --scenario ds.yaml --input a.npy --json
jcheck "plan --input .npy: read = 8000 B / 1 MB/s, ingest = the state and pipe set up + read + the copies (one piece), staging = ingest - read, write null" \
    "eq(e['read'], 8000 / 1e6) and eq(e['ingest'], $SA + (8000 / 1e6 + $CA)) and eq(e['staging'], $SA + $CA) and e['write'] is None and r['qubits'] == 10 and r['dtype'] == 'complex128'"
jcheck "plan --input .npy (fused): local_norm 0 (the sums come with the ingest), encode 0 (the amplitudes too: no stream to drain)" \
    "e['local_norm'] == 0 and e['encode'] == 0"
QM_INPUT_RESIDENT=0.25 run "$QMESH" plan --scenario ds.yaml --input a.npy --json
jcheck "QM_INPUT_RESIDENT=0.25: a quarter of 8000 B at cached_read 4 MB/s, the rest at read 1 MB/s" \
    "eq(e['read'], 8000 * 0.25 / 4e6 + 8000 * 0.75 / 1e6) and eq(e['staging'], $SA + $CA)"
QM_INPUT_RESIDENT=1 run "$QMESH" plan --scenario ds.yaml --input a.npy --json
jcheck "QM_INPUT_RESIDENT=1: all of it at cached_read" "eq(e['read'], 8000 / 4e6)"
run "$QMESH" plan --scenario ds.yaml --input a.npy --backend sim --json
jcheck "plan --input --backend sim: staging = 8000 B / host_copy 4 MB/s after the read; no launches" \
    "eq(e['staging'], 8000 / 4e6) and eq(e['ingest'], 8000 / 1e6 + 8000 / 4e6) and eq(e['local_norm'], 16384 / 1e12) and eq(e['encode'], 2 * 16384 / 1e12)"
run "$QMESH" plan --scenario ds.yaml --input s15.npy --json
jcheck "plan --input of a 2^15 state (not fused, block sums from the staging): local_norm 0 (the ingest combines its 2 block sums into the root and copies it back), encode = 2 x bytes / HBM + 2, the chunk's 3 launches (H2D, stash, sumsq), the combine's and the root copy's 2 and the sumsq's read of its 262144 B in the copies after the ring" \
    "e['local_norm'] == 0 and eq(e['encode'], 2 * 524288 / 1e12 + 2 * $L) and eq(e['staging'], $S + (262144 / 1e9 + (5 * $L + 262144 / 1e12)))"
# a 2^16 state over two devices of one process (--policy equal: two stashed shards of 2^15):
# each shard's root is made and copied back by the ingest on its own device: local_norm 0
python3 - <<'PY2'
s = open('ds.yaml').read()
s = s.replace("hbm_bandwidth: 1 TB/s, numa: 0}\n", "hbm_bandwidth: 1 TB/s, numa: 0}\n      - {id: n0.g1, memory: 1 GiB, hbm_bandwidth: 1 TB/s, numa: 0}\n")
s = s.replace("links:\n", "links:\n  - {a: n0.numa0, b: n0.g1, kind: pcie, bandwidth: 1 GB/s}\n")
open('ds1x2.yaml', 'w').write(s)
from npy_write import npy
npy('s16.npy', '<f8', '(65536,)', [1.0] * 65536, 'd')
PY2
run "$QMESH" plan --scenario ds1x2.yaml --input s16.npy --policy equal --json
jcheck "plan --input of a 2^16 state on two devices of one process: local_norm 0 (each shard's root made in the ingest)" \
    "e['local_norm'] == 0 and len(json.load(open('out'))['shards']) == 2"
run "$QMESH" plan --scenario ds.yaml --input p15.npy --json
jcheck "plan --input of a 2^15 state of 20000 values (padded: its block sums made in local_norm): local_norm = its 524288 B at HBM rate + the sumsq's launch + one round trip; the chunk's 2 launches (H2D, stash)" \
    "eq(e['local_norm'], 524288 / 1e12 + $L + $R) and eq(e['encode'], 2 * 524288 / 1e12 + 2 * $L) and eq(e['staging'], $S + (160000 / 1e9 + 2 * $L))"
# 40 MiB of float64 -> one 2^23 state (not fused): chunks of 32 MiB and 8 MiB, copied in ring
# pieces of 8 MiB (4 + 1): 5 H2D copies + 2 stash kernels; the read (41.9 s) is the slower side;
# the ring's 8 slots hold all 5 pieces, read side by side, so every piece's copy follows the read:
# ingest = read + the copies of min(8, 5) of 5 pieces
run "$QMESH" plan --scenario ds.yaml --input big.npy --json
CB="(41943040 / 1e9 + 7 * $L)"
if python3 -c "
import json, math, sys
e = json.load(open('out'))['estimates_s']
ok = math.isclose(e['read'], 41943040 / 1e6, rel_tol=1e-12) and \
     math.isclose(e['ingest'], $S + (41943040 / 1e6 + $CB), rel_tol=1e-12) and \
     math.isclose(e['staging'], $S + $CB, rel_tol=1e-9)
sys.exit(0 if ok else 1)"; then ok "plan --input of 40 MiB: 5 ring pieces (a 40 MiB ring), 7 launches; ingest = the state and pipe set up + read + the copies of the 5 pieces read side by side"
else bad "40 MiB ingest: $(head -c 400 out)"; fi
# 128 MiB of float64 -> one 2^24 state, read from the page cache at 100 GB/s, copied at 1 GB/s: 16
# ring pieces, 16 H2D copies + 4 stash kernels + 4 sumsq kernels (whole blocks: the block sums
# from the staging, reading the 128 MiB at HBM rate) + the combine and the root's copy. The copies are the slower side; they start
# once the pipe is open (0.5 ms, longer than the first piece's read), and the reader runs at most
# 7 pieces ahead of them: the read as encode measures it (the span of the background reads) ends
# one piece after the copies of the first 16 - 8 pieces, open + copies x 8 / 16 + read / 16;
# ingest = setup + open + the copies; staging = ingest - read
sed 's/cached_read: 4 MB\/s/cached_read: 100 GB\/s/' ds.yaml > fast.yaml
QM_INPUT_RESIDENT=1 run "$QMESH" plan --scenario fast.yaml --input big24.npy --json
CC="(134217728 / 1e9 + (26 * $L + 134217728 / 1e12))"
RC="(134217728 / 100e9)"
jcheck "plan --input of 128 MiB with copies slower than the read: read = open + copies x 8 / 16 + read / 16 (the reader held 7 pieces ahead of the copies), ingest = setup + open + copies" \
    "eq(e['read'], $O + $CC * 8 / 16 + $RC / 16) and eq(e['ingest'], $S + $O + $CC) and math.isclose(e['staging'], $S + $CC - $CC * 8 / 16 - $RC / 16, rel_tol=1e-9)"
# the same with a pipe that opens faster than the first piece is read (staging_open 10 us): the
# copies start after that piece, as before the open was modelled
sed 's/staging_open: 0.5 ms/staging_open: 10 us/' fast.yaml > fastopen.yaml
QM_INPUT_RESIDENT=1 run "$QMESH" plan --scenario fastopen.yaml --input big24.npy --json
jcheck "plan --input of 128 MiB, the pipe open before the first piece is read: read = copies x 8 / 16 + 2 x read / 16, ingest = setup + read / 16 + copies" \
    "eq(e['read'], $RC / 16 + $CC * 8 / 16 + $RC / 16) and eq(e['ingest'], $S + $RC / 16 + $CC)"
# the same 128 MiB read from storage at 1 MB/s (the read the slower side): the 8 slots are read
# side by side, so the last 8 pieces' reads end together and their copies follow:
# ingest = ring + read + copies x 8 / 16; the read unheld (read = bytes / 1 MB/s)
run "$QMESH" plan --scenario ds.yaml --input big24.npy --json
jcheck "plan --input of 128 MiB with the read slower than the copies: ingest = ring + read + the copies of the last 8 of 16 pieces" \
    "eq(e['read'], 134217728 / 1e6) and eq(e['ingest'], $S + 134217728 / 1e6 + $CC * 8 / 16) and math.isclose(e['staging'], $S + $CC * 8 / 16, rel_tol=1e-6)"
# page-locking the ring: not in one process's ingest (its CUDA start-up thread does it), in each
# rank's with several ranks (one per host here: two hosts, half a state each, one 8 MiB ring slot
# per rank, no fused sums): a page_lock buffer of 2 ms instead of 1 ms adds 1 ms there, 0 here
sed 's/^    devices:$/    devices:/' ds.yaml > ds2.yaml
cat >> ds2.yaml <<'Y'
  - {a: n1.numa0, b: n1.g0, kind: pcie, bandwidth: 1 GB/s}
  - {a: n0.numa0, b: n1.numa0, kind: net, bandwidth: 1 GB/s}
Y
python3 - <<'PY'
s = open('ds2.yaml').read()
host1 = "  - id: n1\n    memory: 1 GiB\n    numa: [{id: 0}]\n    devices:\n      - {id: n1.g0, memory: 1 GiB, hbm_bandwidth: 1 TB/s, numa: 0}\n"
open('ds2.yaml', 'w').write(s.replace("links:\n", host1 + "links:\n"))
for f in ('ds', 'ds2'):
    open(f + 'b.yaml', 'w').write(open(f + '.yaml').read().replace('buffer: 1 ms', 'buffer: 2 ms'))
PY
for f in ds dsb ds2 ds2b; do run "$QMESH" plan --scenario $f.yaml --input a.npy --out o.npy --json; cp out $f.json; done
if python3 -c "
import json, math, sys
e = {f: json.load(open(f + '.json'))['estimates_s'] for f in ('ds', 'dsb', 'ds2', 'ds2b')}
r = json.load(open('ds2.json'))['shards']
ok = e['dsb']['staging'] == e['ds']['staging'] and e['dsb']['ingest'] == e['ds']['ingest'] and \
     math.isclose(e['ds2b']['staging'] - e['ds2']['staging'], 1e-3, rel_tol=1e-9) and \
     math.isclose(e['ds2b']['ingest'] - e['ds2']['ingest'], 1e-3, rel_tol=1e-9) and \
     e['dsb']['write'] == e['ds']['write'] and \
     math.isclose(e['ds2b']['write'] - e['ds2']['write'], 1e-3, rel_tol=1e-9) and \
     [x['rank'] for x in r] == [0, 1]
sys.exit(0 if ok else 1)"; then ok "page-locking the ring is charged to each of several ranks' ingest (1 ms more per buffer: +1 ms), the output's staging (one block of 8 chunks) to its write (+1 ms), not to one process's (+0)"
else bad "page_lock with ranks: $(cat ds.json ds2.json ds2b.json | head -c 600)"; fi
WB="(16384 / 1e9 + 2 * $L)" # the read-back: link time + one chunk's D2H and sync (its staging,
# one page-locked block of 8 chunks, is made on one process's CUDA start-up thread: not charged)
run "$QMESH" plan --scenario ds.yaml --input a.npy --out o.npy --json
jcheck "plan --out: write = the read-back (16 KiB over 1 GB/s + 2 launches) + the .npy's 16384 + 128 B / 2 MB/s (one chunk)" \
    "eq(e['write'], (16384 + 128) / 2e6 + $WB)"
[ ! -e o.npy ] && ok "plan --out writes nothing" || bad "plan --out left o.npy"
run "$QMESH" plan --scenario ds.yaml --input a.npy --out-dir d --json
jcheck "plan --out-dir: write = the read-back + the shard's 16384 B / 2 MB/s" \
    "eq(e['write'], 16384 / 2e6 + $WB)"
[ ! -e d ] && ok "plan --out-dir writes nothing" || bad "plan --out-dir left d"
# an output that replaces an earlier one: its commit removes the earlier file (or directory's
# files) at storage.remove (8 MB/s here; the built-in 100 GB/s)
sed 's/cached_read: 4 MB\/s}/cached_read: 4 MB\/s, remove: 8 MB\/s}/' ds.yaml > rm.yaml
head -c 1000 /dev/zero > old.npy
mkdir -p olddir && head -c 3000 /dev/zero > olddir/shard-0.bin && head -c 500 /dev/zero > olddir/manifest.json
run "$QMESH" plan --scenario rm.yaml --input a.npy --out old.npy --json
jcheck "plan --out over an existing 1000 B file: write + 1000 B / storage.remove 8 MB/s" \
    "eq(e['write'], (16384 + 128) / 2e6 + $WB + 1000 / 8e6)"
run "$QMESH" plan --scenario rm.yaml --input a.npy --out-dir olddir --json
jcheck "plan --out-dir over an existing directory of 3500 B of files: write + 3500 B / 8 MB/s" \
    "eq(e['write'], 16384 / 2e6 + $WB + 3500 / 8e6)"
run "$QMESH" plan --scenario ds.yaml --input a.npy --out old.npy --json
jcheck "no storage.remove in the scenario: the built-in 100 GB/s" \
    "eq(e['write'], (16384 + 128) / 2e6 + $WB + 1000 / 100e9)"
run "$QMESH" plan --scenario rm.yaml --input a.npy --out old.npy --backend sim --json
jcheck "plan --out over an existing file on the simulator: the file + the removal" \
    "eq(e['write'], (16384 + 128) / 2e6 + 1000 / 8e6)"
run "$QMESH" plan --scenario ds.yaml --input a.npy --out o.npy --backend sim --json
jcheck "plan --out --backend sim: write = the file alone (the shards are host memory)" \
    "eq(e['write'], (16384 + 128) / 2e6)"
run "$QMESH" plan --scenario ds.yaml --qubits 10 --dtype complex128 --out o.npy --json
jcheck "plan --out without --input: write only; read and staging null" \
    "e['read'] is None and e['staging'] is None and eq(e['write'], (16384 + 128) / 2e6 + $WB)"
run "$QMESH" plan --scenario host.yaml --input a.npy --out o.npy --json
jcheck "a host's storage.read (0.5 MB/s) over the defaults; write from defaults.storage" \
    "eq(e['read'], 8000 / 5e5) and eq(e['write'], (16384 + 128) / 2e6 + $WB)"
QM_INPUT_RESIDENT=1 run "$QMESH" plan --scenario host.yaml --input a.npy --json
jcheck "a host without cached_read takes the defaults' (4 MB/s)" "eq(e['read'], 8000 / 4e6)"
run "$QMESH" plan --scenario plain.yaml --input a.npy --out o.npy --backend sim --json
jcheck "no storage in the scenario: the defaults 6 GB/s read, 2 GB/s write, 10 GB/s host copy" \
    "eq(e['read'], 8000 / 6e9) and eq(e['staging'], 8000 / 10e9) and eq(e['write'], (16384 + 128) / 2e9)"
QM_INPUT_RESIDENT=1 run "$QMESH" plan --scenario plain.yaml --input a.npy --backend sim --json
jcheck "no storage in the scenario: cached_read 20 GB/s" "eq(e['read'], 8000 / 20e9)"
QM_INPUT_RESIDENT=1 run "$QMESH" plan --scenario plain.yaml --input a.npy --json
jcheck "no launch, staging_setup or staging_open in the scenario: launch 10 us, staging_setup 0.7 ms, staging_open 1 ms (longer than the 0.4 us read: the read's wait comes after it)" \
    "eq(e['read'], 1e-3) and e['encode'] == 0 and eq(e['staging'], 0.7e-3 + (8000 / 1e9 + 3 * 10e-6 + 24384 / 1e12)) and eq(e['ingest'], 0.7e-3 + 1e-3 + (8000 / 1e9 + 3 * 10e-6 + 24384 / 1e12))"
run "$QMESH" plan --scenario plain.yaml --input p15.npy --json
jcheck "no piece_roots in the scenario: 60 us a round trip (the padded 2^15 state's local_norm: its pass, the sumsq's launch of 10 us, the round trip)" "eq(e['local_norm'], 524288 / 1e12 + 10e-6 + 60e-6)"
# a state beyond its first GiB: a 2^27 complex128 state (2 GiB, from a sparse 1 GiB .npy) on an
# 8 GiB device: the allocation's second GiB at defaults.state_alloc (built in 6 TB/s), in the
# ingest's setup outside the reads (so in staging too); the read unchanged
python3 - <<'PY3'
import os
h = "{'descr': '<f8', 'fortran_order': False, 'shape': (134217728,), }"
h += ' ' * (-(10 + len(h) + 1) % 64) + '\n'
with open('s27.npy', 'wb') as f:
    f.write(b'\x93NUMPY\x01\x00' + len(h).to_bytes(2, 'little') + h.encode())
os.truncate('s27.npy', 10 + len(h) + 8 * 134217728)
PY3
sed 's/memory: 1 GiB/memory: 8 GiB/' ds.yaml > big6.yaml
sed 's/^  piece_roots: 40 us$/  piece_roots: 40 us\n  state_alloc: 2 TB\/s/' big6.yaml > big2.yaml
QM_INPUT_RESIDENT=0 run "$QMESH" plan --scenario big6.yaml --input s27.npy --json
cp out big6.json
QM_INPUT_RESIDENT=0 run "$QMESH" plan --scenario big2.yaml --input s27.npy --json
jcheck "a 2 GiB state: its second GiB's allocation at state_alloc (2 TB/s stated against 6 TB/s built in) in ingest and staging, not in read" \
    "(lambda a: r['qubits'] == 27 and r['dtype'] == 'complex128' and eq(e['read'], a['read']) and math.isclose(e['ingest'] - a['ingest'], 2**30 / 2e12 - 2**30 / 6e12, rel_tol=1e-6) and math.isclose(e['staging'] - a['staging'], 2**30 / 2e12 - 2**30 / 6e12, rel_tol=1e-6))(json.load(open('big6.json'))['estimates_s'])"
run "$QMESH" plan --scenario ds.yaml --input c.csv --json
jcheck "plan --input CSV: read = the file's 12 B / 1 MB/s, on the ingest's thread once the pipe is open; staging = the open + 6 values x 8 B over the link + 3 launches + the fused pass" \
    "eq(e['read'], 12 / 1e6) and eq(e['staging'], $S + $O + (48 / 1e9 + 3 * $L + (48 + 128) / 1e12)) and r['batch'] == 2 and r['features'] == 3"
if [ "$HDF5" = ON ]; then
    run "$QMESH" plan --scenario ds.yaml --input "$SRC/tests/bad-inputs/hdf5-two-datasets.h5" --dataset /a --json
    jcheck "plan --input HDF5 --dataset /a: read = 4 float64 / 1 MB/s" \
        "eq(e['read'], 32 / 1e6) and r['features'] == 4 and r['qubits'] == 2"
fi
expect() { # CASE WANT_RC WANT_STDERR CMD...
    local what=$1 want_rc=$2 want=$3; shift 3
    run "$@"
    if [ "$rc" = "$want_rc" ] && [ "$(cat err)" = "$want" ]; then ok "$what"; else bad "$what: rc $rc, stderr '$(cat err)'"; fi
}
for v in 1.5 -0.1 x ""; do
    [ -z "$v" ] && continue
    QM_INPUT_RESIDENT=$v expect "QM_INPUT_RESIDENT=$v: E-ARG, exit 1" 1 \
        "error[E-ARG]: QM_INPUT_RESIDENT: expected a fraction from 0 to 1 (got '$v')" \
        "$QMESH" plan --scenario ds.yaml --input a.npy
done

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
jcheck "b.npy: 64 x 5 float32 -> 3 qubits, complex64, batch 64; read 1280 B; the batch fused: one chunk of 3 launches; local_norm and norm_allreduce the host's 1.5 and 6 ns a state" \
    "r['qubits'] == 3 and r['dtype'] == 'complex64' and r['batch'] == 64 and r['features'] == 5 and eq(e['read'], 1280 / 1e6) and eq(e['staging'], $S + (1280 / 1e9 + 3 * $L + (1280 + 4096) / 1e12)) and eq(e['local_norm'], 64 * 1.5e-9) and eq(e['norm_allreduce'], 64 * 6e-9) and e['encode'] == 0"
# the host's per-state work from the scenario (defaults.host_batch, as topo dump measures it)
sed 's/^  staging_setup: 0.25 ms$/  staging_setup: 0.25 ms\n  host_batch: {pieces: 5 ns, coefficients: 7.5 ns}/' ds.yaml > hb.yaml
run "$QMESH" plan --scenario hb.yaml --input b.npy --json
jcheck "b.npy on a scenario with defaults.host_batch {pieces: 5 ns, coefficients: 7.5 ns}: local_norm 64 x 5 ns, norm_allreduce 64 x 7.5 ns" \
    "eq(e['local_norm'], 64 * 5e-9) and eq(e['norm_allreduce'], 64 * 7.5e-9) and e['encode'] == 0"
sed 's/^  staging_setup: 0.25 ms$/  staging_setup: 0.25 ms\n  host_batch: {pieces: 5 ns, coefs: 7.5 ns}/' ds.yaml > hbbad.yaml
run "$QMESH" plan --scenario hbbad.yaml --input b.npy
[ "$rc" = 1 ] && [ "$(wc -l < err)" = 1 ] && grep -qx "hbbad.yaml:11:30: error\[E-UNKNOWN-KEY\]: defaults.host_batch: unknown key 'coefs' in defaults.host_batch; allowed keys: pieces, coefficients" err \
    && ok "defaults.host_batch with an unknown key: one E-UNKNOWN-KEY line naming it" || bad "host_batch bad key: rc $rc $(cat err)"

# errors: one line, the code, exit 1; usage errors exit 2
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
sed 's/storage: {read: 1 MB\/s, write: 2 MB\/s, cached_read: 4 MB\/s}/storage: {read: 0 MB\/s, wirte: 2 MB\/s, cached_read: 4 MB}/; s/host_copy: 4 MB\/s/host_copy: 4/; s/launch: 5 us/launch: 5 MB\/s/; s/buffer: 1 ms, rate: 2 GB\/s/buffer: 1 ms, rat: 2 GB\/s/' ds.yaml > bad.yaml
expect "scenario storage, cached_read, host_copy, launch and page_lock errors, located" 1 \
    "bad.yaml:6:19: error[E-RANGE]: defaults.storage.read: '0 MB/s' is zero; a bandwidth must be positive
bad.yaml:6:27: error[E-UNKNOWN-KEY]: defaults.storage: unknown key 'wirte' in defaults.storage; did you mean 'write'?
bad.yaml:6:55: error[E-UNIT]: defaults.storage.cached_read: '4 MB' is a size, but a bandwidth is expected here; use MB/s, GB/s, TB/s, GiB/s, Mb/s, Gb/s, B/s
bad.yaml:7:14: error[E-UNIT]: defaults.host_copy: '4' has no unit; a bandwidth needs one of MB/s, GB/s, TB/s, GiB/s, Mb/s, Gb/s, B/s (e.g. '450 GB/s')
bad.yaml:8:11: error[E-UNIT]: defaults.launch: '5 MB/s' is a bandwidth, but a time is expected here; use ns, us, ms, s
bad.yaml:9:29: error[E-UNKNOWN-KEY]: defaults.page_lock: unknown key 'rat' in defaults.page_lock; did you mean 'rate'?" \
    "$QMESH" topo validate bad.yaml
sed 's/launch: 5 us/launch: -1 us/' ds.yaml > neg.yaml
expect "a negative launch: E-RANGE, located" 1 \
    "neg.yaml:8:11: error[E-RANGE]: defaults.launch: '-1 us' is negative; a time must be zero or positive" \
    "$QMESH" topo validate neg.yaml
sed 's/cached_read: 4 MB\/s/cached_read: 0 GB\/s/' ds.yaml > zero.yaml
expect "a zero cached_read: E-RANGE, located" 1 \
    "zero.yaml:6:55: error[E-RANGE]: defaults.storage.cached_read: '0 GB/s' is zero; a bandwidth must be positive" \
    "$QMESH" topo validate zero.yaml
sed 's/storage: {read: 0.5 MB\/s}/storage: {read: 1 GB\/s, write: 1 KB}/' host.yaml > badhost.yaml
run "$QMESH" topo validate badhost.yaml
grep -q "^badhost.yaml:16:36: error\[E-UNIT\]: hosts\[0\].storage.write: " err && [ "$rc" = 1 ] \
    && ok "a host's storage error, located" || bad "host storage error: $(cat err)"

# the table
run "$QMESH" plan --scenario ds.yaml --input a.npy --out o.npy
grep -qx "data path (input file 0% in the page cache; staging overlaps the read): read 8.000 ms, staging 273.02 us, write 8.282 ms (write: --out)" out \
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
rm -f o.npy # the encode's above: no output to replace below
run "$QMESH" topo dump host.yaml --out dumped.yaml
grep -qx "  storage: {read: 1 MB/s, write: 2 MB/s, cached_read: 4 MB/s, remove: 100 GB/s}" dumped.yaml && grep -qx "  host_copy: 4 MB/s" dumped.yaml \
    && grep -qx "  launch: 5 us" dumped.yaml && grep -qx "  page_lock: {buffer: 1 ms, rate: 2 GB/s}" dumped.yaml \
    && grep -qx "    storage: {read: 4 Mb/s}" dumped.yaml && ok "topo dump writes defaults.storage (remove: the built-in 100 GB/s), host_copy, the host's storage" \
    || bad "topo dump storage: $(grep -n 'storage\|host_copy' dumped.yaml)"
"$QMESH" plan --scenario dumped.yaml --input a.npy --out o.npy --json > out 2>/dev/null
jcheck "the dump loads back with the same figures" \
    "eq(e['read'], 8000 / 5e5) and eq(e['write'], (16384 + 128) / 2e6 + $WB) and e['encode'] == 0"
# the built-in simulated mesh (no GPU here) or this machine: the dump states cached_read and launch
QM_STORAGE_RATES="6 GB/s,2 GB/s,25 GB/s" run "$QMESH" topo dump --out machine.yaml
if [ "$rc" = 0 ] && grep -q "^  storage: {read: .*, cached_read: " machine.yaml && grep -q "^  launch: " machine.yaml; then
    ok "topo dump of this machine: defaults.storage.cached_read and defaults.launch"
else bad "topo dump of this machine: rc $rc $(grep -n 'storage\|launch' machine.yaml)"; fi
expect "topo dump FILE --no-measure-storage: usage" 2 \
    "error[E-ARG]: topo dump: --no-measure-storage measures this machine's storage; a FILE is dumped as written; run 'qmesh topo dump --help'" \
    "$QMESH" topo dump ds.yaml --no-measure-storage
expect "topo dump --storage-bytes with --no-measure-storage: usage" 2 \
    "error[E-ARG]: topo dump: --storage-bytes and --no-measure-storage exclude each other; run 'qmesh topo dump --help'" \
    "$QMESH" topo dump --storage-bytes 8MiB --no-measure-storage

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
