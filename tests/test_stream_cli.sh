#!/usr/bin/env bash
# test_stream_cli.sh QMESH SRCDIR -- `qmesh encode --batch-size B [--prefetch K]` (issue 17 item 4;
# docs/cli.md "Streaming", docs/io.md). Labels cli;concurrency (the reader thread: CI repeats it).
# Every case is deterministic: no timing, faults injected at named phases and batches.
#  - byte-identical to the one-shot encode: --out for batch sizes 1, a divisor, a non-divisor and
#    more than the data; float32 and float64; amplitude, angle and basis; .npy and CSV input; the
#    built-in mesh and an 8-device scenario; prefetch 0, 1 and 4; a 1-D input;
#  - --out-dir: one batch-NNNNNN.npy per batch whose data, in order, is the one-shot --out's data,
#    and a qmesh-batches/1 manifest naming each batch's samples;
#  - no output: exit 0, the report's batches;
#  - --json: the stream member's values (batches, batch_size, prefetch, input_buffers,
#    batch_input_bytes) and the bound input_bytes_peak <= (prefetch + 1) x batch_input_bytes on a
#    file 64 times the size of a batch, device_bytes_peak below two batches' states;
#  - a NaN in batch 3: exit 1, one line naming the sample by its index in the whole input, nothing
#    at the output path, no temporary; the previous output kept;
#  - faults at a batch boundary (QM_FAULT_RANK=0:PHASE:MODE:BATCH): sigint before batch 2 (exit
#    130), an injected failure after batch 1 is written, a NaN in batch 2's norm check (the global
#    state named): nothing left, previous output intact; with no output the check runs on the
#    devices: a NaN in batch 2 names state 10, a skew in batch 0 gives the one-shot run's line;
#  - CSV through the chunked reader: byte-identical to the one-shot encode for several batch sizes
#    at QM_CSV_CHUNK_BYTES 1, 7 and the default (CRLF, no final newline, a dropped column, gzip
#    of two members, basis, angle); a bad value or a short row in a late batch: one line with the
#    batch's element range, the file line and column, no output file or directory, the previous
#    output kept (prefetch 0 and 2); a NaN: the one-shot run's line; a bad QM_CSV_CHUNK_BYTES;
#    the peak RSS of a 28 MB CSV streamed in small batches within 16 MiB of a 2-batch file's
#    (skipped when QM_TEST_SANITIZE names sanitizers);
#  - the one-shot encode of a CSV file (the same reader, by ranges): the same bytes as the .npy
#    encode of its values at QM_CSV_CHUNK_BYTES 1, 7 and the default (built-in mesh, 8 devices,
#    --chunk-bytes 1KiB; gzip, a dropped column, angle, basis); a bad value or a short row late in
#    the file: the whole-file load's line, no output, the previous output kept; its peak RSS on
#    the 28 MB CSV within 8 MiB of the .npy encode's;
#  - usage errors (exit 2, the exact line): --batch-size 0 / x, --prefetch without --batch-size,
#    --prefetch 65, --batch-size with --phantom.
set -u
QMESH=$(cd "$(dirname "$1")" && pwd)/$(basename "$1"); SRC=$(cd "$2" && pwd)
. "$(dirname "$0")/testlib.sh"
cd "$T" || exit 2
python3 - <<'PY'
import math
from npy_write import npy
v = [math.sin(0.37 * i) + 0.1 * (i % 7) for i in range(37 * 16)]
npy('a64.npy', '<f8', '(37, 16)', v, 'd')
npy('a32.npy', '<f4', '(37, 16)', v, 'f')
npy('ang.npy', '<f8', '(23, 6)', [math.cos(0.3 * i) for i in range(23 * 6)], 'd')
npy('bas.npy', '<f8', '(11,)', [float(i * 5 % 8) for i in range(11)], 'd')
npy('vec.npy', '<f8', '(12,)', [1.0 + i for i in range(12)], 'd')
w = list(v[:30 * 16]); w[13 * 16 + 2] = float('nan')
npy('nan.npy', '<f8', '(30, 16)', w, 'd')
npy('big.npy', '<f8', '(4096, 64)', [math.sin(0.01 * i) + 0.5 for i in range(4096 * 64)], 'd')
with open('a.csv', 'w') as f:
    f.write('c0,c1,c2,c3,c4,c5,c6,c7\n')
    for r in range(19):
        f.write(','.join('%.17g' % math.cos(0.7 * (r * 8 + c)) for c in range(8)) + '\n')
PY
DGX=$SRC/scenarios/dgx-h100.yaml

run() {
  local case=$1; shift
  timeout 120 "$@" > "$T/out" 2> "$T/err"
  rc=$?
  if [ $rc -eq 124 ]; then echo "HUNG: $case: still running after 120 s: $*"; fi
}
no_tmp() { [ -z "$(find "$T" -name '*qmesh-tmp*' -o -name '*qmesh-old*')" ]; }
# the data bytes of a .npy file (after its header)
npy_data() { python3 -c "
import struct, sys
b = open(sys.argv[1], 'rb').read(); n = struct.unpack('<H', b[8:10])[0]
sys.stdout.buffer.write(b[10 + n:])" "$1"; }

# identical NAME ARGS...: one-shot --out vs --batch-size for each B in $SIZES (and prefetch $PF)
identical() {
  local name=$1; shift
  run "$name: one-shot" "$QMESH" encode "$@" --out one.npy
  [ $rc -eq 0 ] || { bad "$name: one-shot (rc $rc): $(cat "$T/err")"; return; }
  local b failed=""
  for b in $SIZES; do
    rm -f s.npy
    run "$name: B=$b" "$QMESH" encode "$@" --batch-size "$b" --prefetch "$PF" --out s.npy
    if [ $rc -ne 0 ] || ! cmp -s one.npy s.npy; then failed="$failed $b(rc $rc)"; head -2 "$T/err"; fi
  done
  if [ -z "$failed" ] && no_tmp; then ok "$name: --batch-size $SIZES (prefetch $PF) byte-identical to the one-shot --out"
  else bad "$name: differs or failed for B =$failed"; fi
  rm -f one.npy s.npy
}

SIZES="1 4 5 37 100"; PF=2
identical "float64 amplitude" --input a64.npy
identical "float64 amplitude, 8 devices" --input a64.npy --scenario "$DGX"
SIZES="1 5 37 100"; PF=0
identical "float32 amplitude, prefetch 0" --input a32.npy
PF=1
identical "float32 -> complex128" --input a32.npy --dtype complex128
SIZES="1 5 23 24"; PF=4
identical "angle" --input ang.npy --encoding angle
identical "angle, 8 devices" --input ang.npy --encoding angle --scenario "$DGX"
SIZES="1 3 11 12"; PF=2
identical "basis (a 1-D input of indices)" --input bas.npy --encoding basis
SIZES="1 2 100"
identical "a 1-D amplitude input (one sample)" --input vec.npy
SIZES="1 4 19 20"
identical "CSV with a header" --input a.csv

# CSV read batch by batch through the chunked reader (QM_CSV_CHUNK_BYTES): rows cut by every
# chunk boundary, CRLF, no final newline, a dropped label column, gzip (two members), basis
# (its scan reads the file, then the stream starts it over)
python3 - <<'PY'
import gzip, math
rows = [[math.sin(0.3 * (r * 6 + c)) * 10 ** (c % 5 - 2) for c in range(6)] for r in range(53)]
with open('b.csv', 'w', newline='') as f:
    f.write('x0,x1,label,x3,x4,x5,x6\r\n')
    f.write('\r\n'.join(','.join(['%.17g' % v for v in r[:2]] + ['cat' if i % 2 else 'dog'] +
                                 ['  %.17g ' % v for v in r[2:]]) for i, r in enumerate(rows)))
t = open('b.csv', 'rb').read()
open('b.csv.gz', 'wb').write(gzip.compress(t[:len(t) // 2]) + gzip.compress(t[len(t) // 2:]))
open('bas.csv', 'w').write('idx\n' + ''.join('%d\n' % (i * 5 % 8) for i in range(11)) + '\n\n')
lines = open('a.csv').read().split('\n')
for name, row, col, val in (('bad.csv', 17, 2, 'x7'), ('ragged.csv', 18, None, None),
                            ('nan.csv', 17, 2, 'nan')):
    l = list(lines)
    f = l[row].split(',')
    if col is None:
        f = f[:-1]
    else:
        f[col] = val
    l[row] = ','.join(f)
    open(name, 'w').write('\n'.join(l))
PY
for chunk in 1 7 ""; do
  export QM_CSV_CHUNK_BYTES=$chunk
  SIZES="1 4 19 20"; PF=0
  identical "CSV, chunk '${chunk:-default}', prefetch 0" --input a.csv
  SIZES="1 5 10 53 60"; PF=2
  identical "CSV CRLF, no final newline, --drop-column label, chunk '${chunk:-default}'" --input b.csv --drop-column label
  identical "CSV gzip (two members), chunk '${chunk:-default}'" --input b.csv.gz --drop-column 2
  SIZES="1 3 11"
  identical "CSV basis, chunk '${chunk:-default}'" --input bas.csv --encoding basis
done
SIZES="2 7"; PF=1
identical "CSV angle" --input b.csv --drop-column label --encoding angle
unset QM_CSV_CHUNK_BYTES

# the one-shot encode reads a CSV file through the same reader, by ranges (issue 17 item 6): the
# same bytes as the .npy encode of the same values at QM_CSV_CHUNK_BYTES 1, 7 and the default, on
# the built-in mesh (4 devices), an 8-device scenario, and with --chunk-bytes 1KiB (every shard
# read in several pieces, ranges cut inside rows); gzip, a dropped column, angle and basis
python3 - <<'PY'
import math
from npy_write import npy
npy('a_ref.npy', '<f8', '(19, 8)', [math.cos(0.7 * i) for i in range(19 * 8)], 'd')
rows = [[math.sin(0.3 * (r * 6 + c)) * 10 ** (c % 5 - 2) for c in range(6)] for r in range(53)]
npy('b_ref.npy', '<f8', '(53, 6)', [float('%.17g' % v) for r in rows for v in r], 'd')
npy('bas_ref.npy', '<f8', '(11,)', [float(i * 5 % 8) for i in range(11)], 'd')
PY
for chunk in 1 7 ""; do
  export QM_CSV_CHUNK_BYTES=$chunk
  failed=""
  for mesh in "" "--scenario $DGX" "--chunk-bytes 1KiB"; do
    for c in "a.csv a_ref.npy" "b.csv b_ref.npy --drop-column label" "b.csv.gz b_ref.npy --drop-column 2" \
             "b.csv b_ref.npy --drop-column label --encoding angle" "bas.csv bas_ref.npy --encoding basis"; do
      set -- $c; csv=$1; ref=$2; shift 2
      drop=(); [ "${1:-}" = --drop-column ] && { drop=("$1" "$2"); shift 2; }
      rm -f c.npy n.npy
      run "one-shot $csv" "$QMESH" encode --input "$csv" "${drop[@]}" "$@" $mesh --out c.npy; rc1=$rc
      run "one-shot $ref" "$QMESH" encode --input "$ref" "$@" $mesh --out n.npy
      if [ $rc1 -ne 0 ] || [ $rc -ne 0 ] || ! cmp -s c.npy n.npy; then failed="$failed [$csv $* $mesh: rc $rc1/$rc]"; head -2 err; fi
    done
  done
  [ -z "$failed" ] && no_tmp && ok "one-shot CSV, chunk '${chunk:-default}': the same bytes as the .npy of its values (5 files x 3 meshes)" \
    || bad "one-shot CSV, chunk '${chunk:-default}':$failed"
done
unset QM_CSV_CHUNK_BYTES
rm -f c.npy n.npy

# a bad CSV row in a late batch: found when that batch is read (elements [a, b) of the batch),
# one line, nothing at the output path, no temporary, the previous output kept
"$QMESH" encode --input a.csv --out prev.npy 2>/dev/null >/dev/null
cp prev.npy prev.ref
csv_bad() { # NAME FILE LINE ARGS...
  local name=$1 file=$2 want=$3; shift 3
  local pf got n
  for pf in 0 2; do
    rm -rf bad.npy odb
    run "$name pf $pf" env QM_CSV_CHUNK_BYTES=5 "$QMESH" encode --input "$file" --batch-size 3 --prefetch $pf --out bad.npy "$@"
    local rc1=$rc; got=$(grep '^error' err); n=$(grep -c '^error' err)
    run "$name over prev pf $pf" "$QMESH" encode --input "$file" --batch-size 3 --prefetch $pf --out prev.npy "$@"
    local rc2=$rc
    run "$name out-dir pf $pf" "$QMESH" encode --input "$file" --batch-size 3 --prefetch $pf --out-dir odb "$@"
    if [ $rc1 -eq 1 ] && [ $rc2 -eq 1 ] && [ $rc -eq 1 ] && [ "$n" -eq 1 ] && [ "$got" = "$want" ] && \
       [ ! -e bad.npy ] && [ ! -e odb ] && cmp -s prev.npy prev.ref && no_tmp; then
      ok "$name (prefetch $pf): exit 1, '$got', no output, previous output kept, no temporary"
    else bad "$name (prefetch $pf): rc $rc1/$rc2/$rc, '$got' (want '$want')"; fi
  done
}
csv_bad "CSV: a non-number in batch 5 of 7 (samples 15..17)" bad.csv \
  "error[E-INPUT]: encode: reading input [120, 144): bad.csv: row 18, column 3 ('c2'): 'x7' is not a number"
csv_bad "CSV: a short row in batch 5 of 7" ragged.csv \
  "error[E-INPUT]: encode: reading input [120, 144): ragged.csv: row 19 has 7 fields, expected 8 (as in row 1)"
# the one-shot encode meets the bad row while it reads (no longer before the plan): the line the
# whole-file load gave (no element range), exit 1, nothing at the output path or left behind, the
# previous output kept; at chunk 5 and the default, on the built-in mesh and 8 devices
oneshot_bad() { # NAME FILE LINE ARGS...
  local name=$1 file=$2 want=$3; shift 3
  local chunk mesh got n failed=""
  for chunk in 5 ""; do
    for mesh in "" "--scenario $DGX"; do
      rm -rf bad.npy odb
      run "$name" env QM_CSV_CHUNK_BYTES=$chunk "$QMESH" encode --input "$file" $mesh --out bad.npy "$@"
      local rc1=$rc; got=$(grep '^error' err); n=$(grep -c '^error' err)
      run "$name over prev" env QM_CSV_CHUNK_BYTES=$chunk "$QMESH" encode --input "$file" $mesh --out prev.npy "$@"
      local rc2=$rc got2; got2=$(grep '^error' err)
      run "$name out-dir" env QM_CSV_CHUNK_BYTES=$chunk "$QMESH" encode --input "$file" $mesh --out-dir odb "$@"
      if ! { [ $rc1 -eq 1 ] && [ $rc2 -eq 1 ] && [ $rc -eq 1 ] && [ "$n" -eq 1 ] && [ "$got" = "$want" ] && \
             [ "$got2" = "$want" ] && [ ! -e bad.npy ] && [ ! -e odb ] && cmp -s prev.npy prev.ref && no_tmp; }; then
        failed="$failed [chunk '${chunk:-default}' $mesh: rc $rc1/$rc2/$rc, '$got']"
      fi
    done
  done
  [ -z "$failed" ] && ok "$name, one-shot: exit 1, '$want', no output, previous output kept, no temporary" \
    || bad "$name, one-shot (want '$want'):$failed"
}
oneshot_bad "CSV: a non-number in row 18 of 20" bad.csv \
  "error[E-INPUT]: bad.csv: row 18, column 3 ('c2'): 'x7' is not a number"
oneshot_bad "CSV: a short row in row 19 of 20" ragged.csv \
  "error[E-INPUT]: ragged.csv: row 19 has 7 fields, expected 8 (as in row 1)"
oneshot_bad "CSV: a non-number in row 18 (angle)" bad.csv \
  "error[E-INPUT]: bad.csv: row 18, column 3 ('c2'): 'x7' is not a number" --encoding angle
# NaN passes the parser (as in the one-shot run) and is named by the encoder by its sample
run "CSV NaN one-shot" "$QMESH" encode --input nan.csv --out bad.npy
one_line=$(grep '^error' err)
csv_bad "CSV: a NaN in batch 5 of 7 (the one-shot run's line)" nan.csv "$one_line"
[ "$one_line" = "error[E-INPUT]: encode: zero or non-finite norm: sample 16, feature 2 is NaN" ] \
  && ok "CSV NaN: the one-shot line names sample 16" || bad "CSV NaN one-shot: '$one_line'"
run "CSV bad chunk" env QM_CSV_CHUNK_BYTES=0x10 "$QMESH" encode --input a.csv --batch-size 4 --out bad.npy
[ $rc -ne 0 ] && [ "$(grep '^error' err)" = "error[E-ARG]: a.csv: QM_CSV_CHUNK_BYTES is '0x10'; give a chunk size in bytes in [1, 1073741824] (default 4194304)" ] \
  && [ ! -e bad.npy ] && no_tmp && ok "QM_CSV_CHUNK_BYTES=0x10: E-ARG naming the variable and the value" \
  || { bad "bad QM_CSV_CHUNK_BYTES: rc $rc"; cat err; }

# memory: a CSV of 28 MB streamed in batches of 2048 holds about what a file of 2 batches holds
# (the reader's window of about two 4 MiB chunks, not the file; loading it whole took its text and
# 24 MB of values): peak RSS by /usr/bin/time, not under sanitizers (shadow memory, quarantine)
if [ -n "${QM_TEST_SANITIZE:-}" ]; then
  echo "skip: CSV stream peak RSS (sanitizers: $QM_TEST_SANITIZE)"
elif [ ! -x /usr/bin/time ]; then
  echo "skip: CSV stream peak RSS (no /usr/bin/time)"
else
  python3 - <<'PY'
import random
random.seed(5)
row = lambda: ','.join('%.6f' % random.uniform(0.1, 1) for _ in range(32)) + '\n'
with open('big.csv', 'w') as f:
    f.write(''.join(row() for _ in range(100000)))
with open('small.csv', 'w') as f:
    f.write(''.join(row() for _ in range(4096)))
PY
  # the peak RSS in KiB of a streamed encode of $1 into $2
  peak() { /usr/bin/time -f %M -o "$T/rss" "$QMESH" encode --input "$1" --batch-size 2048 --prefetch 2 > "$T/out" 2> "$T/err" && cp "$T/rss" "$2"; }
  # the one-shot encode of the same file holds the reader's window, not the file's values: its
  # peak RSS within 8 MiB of the one-shot encode of the same values from .npy (read by ranges).
  # Chunks of 1 MiB, staging of 1 MiB and ring slots of 64 KiB keep the fixed buffers small;
  # the whole-file load held 24 MiB more (measured 19 MB over the .npy run before issue 17 item 6)
  python3 - <<'PY'
import array, struct
v = array.array('d', (float(x) for line in open('big.csv') for x in line.split(',')))
h = "{'descr': '<f8', 'fortran_order': False, 'shape': (100000, 32), }"
h += ' ' * (64 - (10 + len(h) + 1) % 64) + '\n'
with open('big_ref.npy', 'wb') as f:
    f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode())
    v.tofile(f)
PY
  once() { QM_CSV_CHUNK_BYTES=1048576 QM_INGEST_SLOT_BYTES=65536 /usr/bin/time -f %M -o "$T/rss" \
           "$QMESH" encode --input "$1" --chunk-bytes 1MiB > "$T/out" 2> "$T/err" && cp "$T/rss" "$2"; }
  once big.csv rss.csv; rc_c=$?; csv=$(cat rss.csv 2>/dev/null || echo 0)
  once big_ref.npy rss.npy; rc_n=$?; npyk=$(cat rss.npy 2>/dev/null || echo 0)
  if [ $rc_c -eq 0 ] && [ $rc_n -eq 0 ] && [ "$npyk" -gt 0 ] && [ $((csv - npyk)) -lt 8192 ]; then
    ok "one-shot CSV memory: peak RSS $((csv >> 10)) MiB, $(( (csv - npyk) >> 10 )) MiB over the .npy encode of its values"
  else bad "one-shot CSV memory: rc $rc_c/$rc_n, peak RSS $csv KiB against $npyk KiB from .npy"; cat "$T/err"; fi
  rm -f big_ref.npy rss.csv rss.npy
  peak small.csv rss.small; rc_s=$?; small=$(cat rss.small 2>/dev/null || echo 0)
  peak big.csv rss.big; rc_b=$?; big=$(cat rss.big 2>/dev/null || echo 0)
  size=$(stat -c %s big.csv)
  if [ $rc_s -eq 0 ] && [ $rc_b -eq 0 ] && grep -q '100000 samples' "$T/out" && [ "$small" -gt 0 ] && [ $((big - small)) -lt 16384 ]; then
    ok "CSV stream memory: $((size >> 20)) MiB file in batches of 2048: peak RSS $((big >> 10)) MiB, $(( (big - small) >> 10 )) MiB over a 2-batch file's"
  else bad "CSV stream memory: rc $rc_s/$rc_b, peak RSS $big KiB against $small KiB for 2 batches (file $size bytes)"; cat "$T/err"; fi
  rm -f big.csv small.csv rss.big rss.small
fi

# --out-dir: batch files whose data in order is the one-shot data
"$QMESH" encode --input a64.npy --out one.npy 2>/dev/null >/dev/null
run "out-dir" "$QMESH" encode --input a64.npy --batch-size 10 --out-dir od
files=$(cd od 2>/dev/null && ls | tr '\n' ' ')
: > cat.bin
for f in od/batch-*.npy; do npy_data "$f" >> cat.bin; done
npy_data one.npy > one.bin
man=$(python3 -c "
import json; m = json.load(open('od/manifest.json'))
print(m['format'], m['samples'], m['batch_size'], m['shape'], [(b['start'], b['end'], b['file']) for b in m['batches']])")
want="qmesh-batches/1 37 10 [37, 16] [(0, 10, 'batch-000000.npy'), (10, 20, 'batch-000001.npy'), (20, 30, 'batch-000002.npy'), (30, 37, 'batch-000003.npy')]"
if [ $rc -eq 0 ] && [ "$files" = "batch-000000.npy batch-000001.npy batch-000002.npy batch-000003.npy manifest.json " ] && \
   cmp -s cat.bin one.bin && [ "$man" = "$want" ] && grep -q '^output:   od/ (5 files)$' out && no_tmp; then
  ok "--out-dir: 4 batch files whose data in order is the one-shot --out's, the qmesh-batches/1 manifest"
else bad "--out-dir: rc $rc, files '$files', manifest '$man'"; fi
# re-using it replaces the whole content
run "out-dir again" "$QMESH" encode --input a64.npy --batch-size 20 --out-dir od
files=$(cd od && ls | tr '\n' ' ')
[ $rc -eq 0 ] && [ "$files" = "batch-000000.npy batch-000001.npy manifest.json " ] && no_tmp \
  && ok "--out-dir again with --batch-size 20: 2 batch files, none of the 4 earlier ones left" \
  || bad "--out-dir again: rc $rc, files '$files'"

# no output: encode and check only
run "no output" "$QMESH" encode --input a64.npy --batch-size 8
[ $rc -eq 0 ] && grep -q '^stream:   5 batches of up to 8 samples (prefetch 2), 4 qubits, complex128, sim backend$' out \
  && grep -q '^rate:     [0-9.]* samples/s (37 samples in ' out \
  && grep -q '^norm:     max |sum |psi|^2 - 1| = .* over 37 states' out \
  && ok "no output: exit 0, the stream, rate and norm lines" || { bad "no output: rc $rc"; cat out err; }

# --json and the memory bound on a file 64 times a batch
run "json" "$QMESH" encode --input big.npy --batch-size 64 --prefetch 2 --json
check=$(python3 -c "
import json, sys
o = json.load(open('out')); s = o['stream']
B = 64 * 64 * 8; state = 64 * 64 * 16
print(o['ok'], s['batches'], s['batch_size'], s['prefetch'], s['input_buffers'], s['batch_input_bytes'],
      0 < s['input_bytes_peak'] <= 3 * B, state <= s['device_bytes_peak'] < 2 * state,
      o['input']['samples'], o['plan']['request']['batch'] if 'request' in o['plan'] else o['plan'].get('batch'),
      s['samples_per_s'] > 0, sorted(s['seconds']))")
want="True 64 64 2 3 32768 True True 4096 64 True ['materialize', 'output', 'read', 'total', 'wait']"
[ $rc -eq 0 ] && [ "$check" = "$want" ] \
  && ok "--json: 64 batches of 64 from a 2 MiB file, input held <= 3 x 32 KiB, device peak < 2 batches' states" \
  || bad "--json: rc $rc: got '$check', want '$want'"
run "json prefetch 0" "$QMESH" encode --input big.npy --batch-size 64 --prefetch 0 --json
check=$(python3 -c "
import json; s = json.load(open('out'))['stream']; print(s['input_buffers'], s['input_bytes_peak'])")
[ $rc -eq 0 ] && [ "$check" = "1 32768" ] && ok "--prefetch 0: one input buffer, 32768 B held at most" \
  || bad "--prefetch 0: rc $rc, got '$check'"

# a NaN in batch 3 (samples 12..15): one line naming sample 13, nothing left
"$QMESH" encode --input a64.npy --out prev.npy 2>/dev/null >/dev/null
cp prev.npy prev.ref
for pf in 0 2; do
  rm -f bad.npy
  run "nan pf $pf" "$QMESH" encode --input nan.npy --batch-size 4 --prefetch $pf --out bad.npy
  run2=$rc; err2=$(grep -c '^error\[' err); line=$(grep '^error\[' err)
  run "nan over prev pf $pf" "$QMESH" encode --input nan.npy --batch-size 4 --prefetch $pf --out prev.npy
  if [ $run2 -eq 1 ] && [ $rc -eq 1 ] && [ "$err2" -eq 1 ] && \
     [ "$line" = "error[E-INPUT]: encode: zero or non-finite norm: sample 13, feature 2 is NaN" ] && \
     [ ! -e bad.npy ] && cmp -s prev.npy prev.ref && no_tmp; then
    ok "a NaN in batch 3 (prefetch $pf): exit 1, '$line', nothing at the output path, previous output kept"
  else bad "NaN in batch 3 (prefetch $pf): rc $run2/$rc, '$line'"; fi
done
rm -rf odn; run "nan out-dir" "$QMESH" encode --input nan.npy --batch-size 4 --out-dir odn
[ $rc -eq 1 ] && [ ! -e odn ] && no_tmp && ok "a NaN in batch 3 with --out-dir: exit 1, no directory, no temporary" \
  || bad "NaN with --out-dir: rc $rc"

# faults at batch boundaries
fault() { # NAME SPEC RC LINE OUTOPT TARGET
  local name=$1 spec=$2 want_rc=$3 want=$4 outopt=$5 target=$6
  local before; before=$(cd "$T" && find "$target" -type f -exec cksum {} + 2>/dev/null | sort)
  run "$name" env QM_FAULT_RANK="$spec" "$QMESH" encode --input a64.npy --batch-size 5 "$outopt" "$target"
  local after line; after=$(cd "$T" && find "$target" -type f -exec cksum {} + 2>/dev/null | sort)
  line=$(grep '^error\[' err)
  if [ $rc -eq "$want_rc" ] && [ "$line" = "$want" ] && [ "$before" = "$after" ] && no_tmp; then
    ok "$name: exit $rc, '$line', previous output intact, no temporary"
  else bad "$name: rc $rc (want $want_rc), '$line' (want '$want'), output changed: $([ "$before" = "$after" ] && echo no || echo yes)"; fi
}
fault "SIGINT before batch 2 (--out)" 0:materialize:sigint:2 130 \
  "error[E-INTERRUPTED]: encode: interrupted by SIGINT; nothing was written" --out prev.npy
fault "an injected failure after batch 1 is written (--out-dir)" 0:write:fail:1 1 \
  "error[E-BACKEND]: fault: injected failure on rank 0 at phase write (QM_FAULT_RANK)" --out-dir od
fault "NaN in batch 2's norm check (--out)" 0:check:nan:2 1 \
  "error[E-NUMERIC]: encode: norm check failed for state 10: sum |psi|^2 is NaN (bound 7.994e-15); nothing was written" --out prev.npy
fault "SIGTERM before the commit (--out-dir)" 0:commit:sigterm 143 \
  "error[E-INTERRUPTED]: encode: interrupted by SIGTERM; nothing was written" --out-dir od
# no output: the batch is checked on the devices (nothing read back), so the NaN or the skew is
# written into the batch's first amplitude where it lives; the skew's error is the one-shot run's
# (its device check of the same state 0, the same sums) to the last printed digit
run "NaN in batch 2's device check (no output)" env QM_FAULT_RANK=0:check:nan:2 "$QMESH" encode --input a64.npy --batch-size 5
[ $rc -eq 1 ] && [ "$(grep '^error' err)" = "error[E-NUMERIC]: encode: norm check failed for state 10: sum |psi|^2 is NaN (bound 7.994e-15); nothing was written" ] \
  && ok "NaN in batch 2's device check, no output: exit 1, state 10 named" || { bad "device check nan: rc $rc"; cat err; }
run "skew one-shot (no output)" env QM_FAULT_RANK=0:check:skew "$QMESH" encode --input a64.npy
one_line=$(grep '^error' err)
run "skew in batch 0's device check (no output)" env QM_FAULT_RANK=0:check:skew:0 "$QMESH" encode --input a64.npy --batch-size 5
[ $rc -eq 1 ] && [ "$(grep '^error' err)" = "$one_line" ] && echo "$one_line" | grep -q '^error\[E-NUMERIC\]: encode: norm check failed for state 0: |sum |psi|^2 - 1| = [0-9.e+-]* exceeds the bound 7.994e-15 (complex128, 2^4 amplitudes); nothing was written$' \
  && ok "skew in batch 0, no output: the one-shot run's line '$one_line'" || { bad "device check skew: rc $rc, '$(grep '^error' err)' vs one-shot '$one_line'"; }
run "bad batch field" env QM_FAULT_RANK=0:write:fail:x "$QMESH" encode --input a64.npy --batch-size 5
[ $rc -eq 2 ] && [ "$(cat err | grep '^error')" = "error[E-ARG]: QM_FAULT_RANK: BATCH must be a batch number 0, 1, ... (got 'x')" ] \
  && ok "QM_FAULT_RANK with a bad BATCH: exit 2, one line" || { bad "bad BATCH field: rc $rc"; cat err; }

# usage errors
usage() { # ARGS... ; the last line expected in $WANT
  run "usage $*" "$QMESH" encode --input a64.npy "$@"
  local line; line=$(grep '^error' err)
  [ $rc -eq 2 ] && [ "$line" = "$WANT" ] && [ ! -s out ] && ok "usage: $* -> exit 2, '$line'" \
    || bad "usage $*: rc $rc, '$line' (want '$WANT')"
}
WANT="error[E-ARG]: encode: --batch-size takes a whole number of samples >= 1 (got '0'); run 'qmesh encode --help'"
usage --batch-size 0
WANT="error[E-ARG]: encode: --batch-size takes a whole number of samples >= 1 (got '-3'); run 'qmesh encode --help'"
usage --batch-size -3
WANT="error[E-ARG]: encode: --prefetch 3 needs --batch-size B (it sets how many batches are read ahead); run 'qmesh encode --help'"
usage --prefetch 3
WANT="error[E-ARG]: encode: --prefetch takes a number of batches 0..64 (got '65'); run 'qmesh encode --help'"
usage --batch-size 4 --prefetch 65
WANT="error[E-ARG]: encode: --batch-size and --phantom exclude each other (a phantom run plans the whole input once); run 'qmesh encode --help'"
usage --batch-size 4 --phantom

echo "test_stream_cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
