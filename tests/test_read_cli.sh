#!/usr/bin/env bash
# test_read_cli.sh QMESH -- `qmesh encode` over the parallel `.npy` reader and integer input
# (docs/io.md "Integer and big-endian .npy", "Reading in parallel", "Fault injection"). Labels cli,
# fault.
#   - basis from integer .npy: every dtype (i1..i8, u1..u8, big-endian too) gives the bytes of the
#     float64 file of the same indices; the edges 0 and 2^n - 1 work, 2^n and -1 are one exact
#     E-INPUT line naming the sample, 2^53 + 1 is named as it is; nothing is left behind;
#   - amplitude from an integer, a float16 (big-endian) or a bool .npy equals the float64 file's bytes;
#   - the output of 1, 3 and 8 reader threads (QM_READ_THREADS, --read-threads) and of
#     QM_READ_DIRECT=1 are byte-identical (C and
#     Fortran order, float32 and float64);
#   - QM_FAULT_READ=K (EIO) and K:SHORT in some piece: exit 1, exactly one coded line, no output,
#     no temporary; QM_READ_THREADS / QM_FAULT_READ / QM_READ_DIRECT with bad values are refused;
#   - QM_TRACE=1 prints the encode's steps in their order (the same output bytes), QM_TRACE=2 the
#     same and every ring piece's submit and read (a pooled read's end once, after its submit), and
#     any other value prints none.
# Every run under a 120 s watchdog that names the case.
set -u
QMESH=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
. "$(dirname "$0")/testlib.sh"
cd "$T" || exit 2
python3 - <<'PY'
import math, struct

def npy(path, descr, shape, data, fortran=False):
    hdr = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    hdr += ' ' * (64 - (10 + len(hdr) + 1) % 64) + '\n'
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(hdr)) + hdr.encode() + data)

fmt = {'i1': 'b', 'i2': 'h', 'i4': 'i', 'i8': 'q', 'u1': 'B', 'u2': 'H', 'u4': 'I', 'u8': 'Q'}
idx = [0, 7, 3, 1, 6]
npy('idx_f8.npy', '<f8', '(5,)', struct.pack('<5d', *idx))
for k, c in fmt.items():
    orders = ['|'] if k[1] == '1' else ['<', '>']
    for o in orders:
        name = 'idx_%s%s.npy' % ('be' if o == '>' else '', k)
        npy(name, o + k, '(5, 1)' if k == 'i4' else '(5,)',
            struct.pack(('>' if o == '>' else '<') + '5' + c, *idx))
npy('neg.npy', '<i8', '(3,)', struct.pack('<3q', 0, -1, 2))
npy('top.npy', '<i2', '(2,)', struct.pack('<2h', 7, 8))
npy('huge.npy', '<u8', '(2,)', struct.pack('<2Q', 3, 2**53 + 1))
npy('amp_i4.npy', '<i4', '(3, 4)', struct.pack('<12i', *[1, 2, 3, 4, 0, 0, 0, 5, -7, 1, 0, 2]))
npy('amp_f8.npy', '<f8', '(3, 4)', struct.pack('<12d', *[1, 2, 3, 4, 0, 0, 0, 5, -7, 1, 0, 2]))
npy('amp_f2.npy', '>f2', '(3, 4)', struct.pack('>12e', *[1, 2, 3, 4, 0, 0, 0, 5, -7, 1, 0, 2]))
npy('amp_b1.npy', '|b1', '(2, 3)', bytes([1, 0, 1, 0, 0, 1]))
npy('amp_b1f8.npy', '<f8', '(2, 3)', struct.pack('<6d', 1, 0, 1, 0, 0, 1))
# 2^18 values (2 MiB): several chunks and pieces; a 512 x 513 matrix in C and Fortran order
v = [math.sin(0.001 * i) + 0.01 * (i % 7) + 0.1 for i in range(1 << 18)]
npy('big_f8.npy', '<f8', '(%d,)' % (1 << 18), struct.pack('<%dd' % (1 << 18), *v))
w = [1.0 + (i % 1000) for i in range(1 << 21)]  # 16 MiB: 1 MiB pieces over 4 threads
npy('fault_f8.npy', '<f8', '(%d,)' % (1 << 21), struct.pack('<%dd' % (1 << 21), *w))
npy('big_f4.npy', '<f4', '(%d,)' % (1 << 18), struct.pack('<%df' % (1 << 18), *v))
m = [math.cos(0.01 * i) + 0.2 for i in range(512 * 513)]
npy('mat_c.npy', '<f8', '(512, 513)', struct.pack('<%dd' % len(m), *m))
mf = [m[r * 513 + c] for c in range(513) for r in range(512)]
npy('mat_f.npy', '<f8', '(512, 513)', struct.pack('<%dd' % len(mf), *mf), fortran=True)
PY

run() {
  local case=$1; shift
  timeout 120 "$@" > "$T/out" 2> "$T/err"
  rc=$?
  if [ $rc -eq 124 ]; then echo "HUNG: $case: still running after 120 s: $*"; fi
}
no_tmp() { [ -z "$(find "$T" -name '*qmesh-tmp*')" ]; }
# expect_line CASE RC LINE: exit RC, exactly one line on stderr (besides the scenario note) = LINE
expect_line() {
  local case=$1 want_rc=$2 line=$3
  local got; got=$(grep -v '^qmesh: no --scenario given' "$T/err")
  if [ "$rc" -eq "$want_rc" ] && [ "$got" = "$line" ] && [ ! -e "$T/x.npy" ] && no_tmp; then
    ok "$case"
  else
    bad "$case: rc $rc (want $want_rc), stderr '$got', want '$line'"; ls -a "$T" | grep -v '^\.\.\?$' | tr '\n' ' '; echo
  fi
  rm -f "$T/x.npy"
}

# ---- basis from integers -------------------------------------------------------------------------
run "basis f8" "$QMESH" encode --input idx_f8.npy --encoding basis --out ref.npy
[ $rc -eq 0 ] && ok "basis from float64 (the reference)" || { bad "basis f8 rc $rc"; cat "$T/err"; }
for f in idx_*.npy; do
  [ "$f" = idx_f8.npy ] && continue
  run "basis $f" "$QMESH" encode --input "$f" --encoding basis --out "o_$f"
  if [ $rc -eq 0 ] && cmp -s ref.npy "o_$f"; then ok "basis $f: the float64 file's bytes"
  else bad "basis $f: rc $rc, $(cat "$T/err")"; fi
done
run "basis 2^n-1" "$QMESH" encode --input idx_u2.npy --encoding basis --qubits 3 --out o3.npy
[ $rc -eq 0 ] && cmp -s ref.npy o3.npy && ok "basis index 7 = 2^3 - 1 with --qubits 3" || bad "2^n-1: rc $rc"
run "basis 2^n" "$QMESH" encode --input top.npy --encoding basis --qubits 3 --out x.npy
expect_line "basis index 2^n" 1 "error[E-INPUT]: encode: sample 1: basis index 8 is not an integer in [0, 8) (3 qubits)"
run "basis -1" "$QMESH" encode --input neg.npy --encoding basis --qubits 3 --out x.npy
expect_line "basis index -1 with --qubits" 1 "error[E-INPUT]: encode: sample 1: basis index -1 is not an integer in [0, 8) (3 qubits)"
run "basis -1 auto" "$QMESH" encode --input neg.npy --encoding basis --out x.npy
expect_line "basis index -1 without --qubits" 1 "error[E-INPUT]: encode: sample 1: basis index -1 is not a non-negative integer"
run "basis 2^53+1" "$QMESH" encode --input huge.npy --encoding basis --qubits 4 --out x.npy
expect_line "basis index 2^53 + 1, not rounded" 1 "error[E-INPUT]: encode: sample 1: basis index 9007199254740993 is not an integer in [0, 16) (4 qubits)"

# ---- integers as numbers -------------------------------------------------------------------------
run "amp f8" "$QMESH" encode --input amp_f8.npy --out a_f8.npy
run "amp i4" "$QMESH" encode --input amp_i4.npy --out a_i4.npy
[ $rc -eq 0 ] && cmp -s a_f8.npy a_i4.npy && ok "amplitude from <i4: the float64 file's bytes" || bad "amplitude i4: rc $rc $(cat "$T/err")"
run "amp f2" "$QMESH" encode --input amp_f2.npy --out a_f2.npy
[ $rc -eq 0 ] && cmp -s a_f8.npy a_f2.npy && ok "amplitude from >f2: the float64 file's bytes" || bad "amplitude f2: rc $rc $(cat "$T/err")"
run "amp b1" "$QMESH" encode --input amp_b1.npy --out a_b1.npy
run "amp b1 as f8" "$QMESH" encode --input amp_b1f8.npy --out a_b1f8.npy
[ $rc -eq 0 ] && cmp -s a_b1.npy a_b1f8.npy && ok "amplitude from |b1: the float64 file's bytes" || bad "amplitude b1: rc $rc $(cat "$T/err")"

# ---- threads, O_DIRECT: the same bytes --------------------------------------------------------------
for f in big_f8.npy big_f4.npy mat_c.npy mat_f.npy; do
  run "$f 1 thread" env QM_READ_THREADS=1 "$QMESH" encode --input "$f" --out "t1_$f"
  [ $rc -eq 0 ] || bad "$f 1 thread: rc $rc $(cat "$T/err")"
  for th in 3 8; do
    run "$f $th threads" env QM_READ_THREADS=$th "$QMESH" encode --input "$f" --out "t_$f"
    [ $rc -eq 0 ] && cmp -s "t1_$f" "t_$f" && ok "$f: $th threads = 1 thread" || bad "$f $th threads: rc $rc"
  done
  run "$f direct" env QM_READ_DIRECT=1 QM_READ_THREADS=4 "$QMESH" encode --input "$f" --out "t_$f"
  [ $rc -eq 0 ] && cmp -s "t1_$f" "t_$f" && ok "$f: O_DIRECT = page cache" || bad "$f direct: rc $rc"
done
cmp -s t1_mat_c.npy t1_mat_f.npy && ok "C and Fortran order: the same bytes" || bad "C vs Fortran order"
run "--read-threads 5" env QM_READ_THREADS=1 "$QMESH" encode --input mat_f.npy --read-threads 5 --out t_flag.npy
[ $rc -eq 0 ] && cmp -s t1_mat_f.npy t_flag.npy && ok "--read-threads 5 over QM_READ_THREADS=1: the same bytes" || bad "--read-threads: rc $rc $(cat "$T/err")"
run "--read-threads 65" "$QMESH" encode --input mat_f.npy --read-threads 65 --out x.npy
expect_line "--read-threads 65" 2 "error[E-ARG]: encode: --read-threads takes a thread count in [1, 64] (got '65'); run 'qmesh encode --help'"

# ---- read faults: one line, nothing left ---------------------------------------------------------
for k in 1 3 7 16; do
  for mode in EIO SHORT; do
    run "fault $k:$mode" env QM_READ_THREADS=4 QM_FAULT_READ=$k:$mode "$QMESH" encode --input fault_f8.npy --out x.npy
    got=$(grep -v '^qmesh: no --scenario given' "$T/err")
    n=$(printf '%s\n' "$got" | wc -l)
    if [ $mode = SHORT ]; then tail="\\(got 0 of [0-9]+ bytes\\); the file shrank after it was opened"
    else tail=": Input/output error"; fi
    re="^error\[E-IO\]: encode: reading input \[([0-9]+), ([0-9]+)\): fault_f8.npy: (cannot read|unexpected end of file reading) elements \[\1, \2\)"
    if [ $rc -eq 1 ] && [ "$n" -eq 1 ] && [ ! -e x.npy ] && no_tmp &&
       printf '%s' "$got" | grep -Eq "$re" && printf '%s' "$got" | grep -Eq "$tail\$"; then
      ok "QM_FAULT_READ=$k:$mode: one line, exit 1, nothing left"
    else
      bad "QM_FAULT_READ=$k:$mode: rc $rc, $n lines: $got"
    fi
  done
done
run "after faults" "$QMESH" encode --input fault_f8.npy --out x.npy
run "reference" env QM_READ_THREADS=1 "$QMESH" encode --input fault_f8.npy --out y.npy
[ $rc -eq 0 ] && cmp -s x.npy y.npy && ok "no fault: the same bytes as one thread" || bad "after faults: rc $rc"
rm -f x.npy
# the staging ring wrapped many times: 64 KiB slots, 256 KiB chunks (256 pieces through 8 slots),
# background reads with 1, 3 and 8 threads, and a fault in a late piece
for th in 1 3 8; do
  run "small ring $th" env QM_READ_THREADS=$th QM_INGEST_SLOT_BYTES=65536 "$QMESH" encode --input fault_f8.npy --chunk-bytes 256KiB --out x.npy
  [ $rc -eq 0 ] && cmp -s x.npy y.npy && ok "64 KiB ring slots, $th threads: the same bytes" || bad "small ring $th: rc $rc $(cat "$T/err")"
  rm -f x.npy
done
for k in 37 200; do
  run "small ring fault $k" env QM_READ_THREADS=3 QM_INGEST_SLOT_BYTES=65536 QM_FAULT_READ=$k "$QMESH" encode --input fault_f8.npy --chunk-bytes 256KiB --out x.npy
  got=$(grep -v '^qmesh: no --scenario given' "$T/err")
  if [ $rc -eq 1 ] && [ "$(printf '%s\n' "$got" | wc -l)" -eq 1 ] && [ ! -e x.npy ] && no_tmp &&
     printf '%s' "$got" | grep -Eq "^error\[E-IO\]: encode: reading input \[[0-9]+, [0-9]+\): fault_f8.npy: cannot read elements .*: Input/output error\$"; then
    ok "fault in read $k of the small ring: one line, exit 1, nothing left"
  else bad "small ring fault $k: rc $rc: $got"; fi
done
run "bad slot bytes" env QM_INGEST_SLOT_BYTES=100 "$QMESH" encode --input big_f8.npy --out x.npy
expect_line "QM_INGEST_SLOT_BYTES=100" 1 "error[E-ARG]: encode: QM_INGEST_SLOT_BYTES is '100'; give a byte count in [4096, 1073741824]"
rm -f y.npy
run "bad threads" env QM_READ_THREADS=0 "$QMESH" encode --input big_f8.npy --out x.npy
expect_line "QM_READ_THREADS=0" 1 "error[E-ARG]: big_f8.npy: QM_READ_THREADS is '0'; give a thread count in [1, 64]"
run "bad direct" env QM_READ_DIRECT=yes "$QMESH" encode --input big_f8.npy --out x.npy
expect_line "QM_READ_DIRECT=yes" 1 "error[E-ARG]: big_f8.npy: QM_READ_DIRECT is 'yes'; use 1 (O_DIRECT) or 0"
run "bad fault" env QM_FAULT_READ=2:EBADF "$QMESH" encode --input big_f8.npy --out x.npy
expect_line "QM_FAULT_READ=2:EBADF" 2 "error[E-ARG]: encode: QM_FAULT_READ takes K[:EIO|SHORT] with K >= 1 (got '2:EBADF'); run 'qmesh encode --help'"

# ---- QM_TRACE=1: the encode's steps on stderr, in order; nothing without it ---------------------
run "trace" env QM_TRACE=1 "$QMESH" encode --input amp_i4.npy --out t1.npy
got=$(sed -n 's/^qmesh trace: *[0-9.]* ms //p' "$T/err" | tr '\n' '|')
want="encode: planned and laid out; waiting for the backend's start|encode: backend started (0.000 ms, 0.000 ms of it waited for)|encode: backend open|encode: ingest starts (3 shards, 3 states)|encode: shards allocated|encode: sums allocated|ingest: ring of 25165824 bytes ready (3 chunks, 3 ring pieces)|ingest: 3 pipes open|ingest: piece 0 read|ingest: piece 0 copy enqueued|ingest: chunk 0 copies enqueued|ingest: chunk 0 enqueued|ingest: chunk 1 enqueued|ingest: chunk 2 enqueued|ingest: piece 0 copied|ingest: piece 1 copied|ingest: piece 2 copied|ingest: pipe 0 drained|ingest: pipe 1 drained|ingest: pipe 2 drained|ingest: drained|ingest: pipes closed|ingest: closed|encode: ingest done|local_norm: 0 piece roots in plain memory, sums enqueued|local_norm: copies enqueued|local_norm: drained|local_norm: pieces added|encode: local_norm done|encode: norm_allreduce done (0 slow states)|encode: amplitudes done|tree: combines into 1 piece roots enqueued, their copy next|tree: combines into 1 piece roots enqueued, their copy next|tree: combines into 1 piece roots enqueued, their copy next|"
[ $rc -eq 0 ] && [ "$got" = "$want" ] && cmp -s t1.npy a_i4.npy && ok "QM_TRACE=1: the steps in order, the same bytes" ||
  bad "QM_TRACE=1: rc $rc, got '$got'"
# QM_TRACE=2: the same steps, and every ring piece's read (pieces 1 and 2 beside piece 0)
run "trace 2" env QM_TRACE=2 "$QMESH" encode --input amp_i4.npy --out t1.npy
got=$(sed -n 's/^qmesh trace: *[0-9.]* ms //p' "$T/err" | tr '\n' '|')
sub="ingest: piece 0 submitted (elements [0, +4))|ingest: piece 1 submitted (elements [4, +4))|ingest: piece 2 submitted (elements [8, +4))|"
want2=$(printf '%s' "$want" | sed "s/ingest: 3 pipes open|/${sub}ingest: 3 pipes open|/; s/ingest: chunk 1 enqueued|/ingest: piece 1 read|ingest: chunk 1 enqueued|/; s/ingest: chunk 2 enqueued|/ingest: piece 2 read|ingest: chunk 2 enqueued|/")
[ $rc -eq 0 ] && [ "$got" = "$want2" ] && cmp -s t1.npy a_i4.npy && ok "QM_TRACE=2: every piece, the same bytes" ||
  bad "QM_TRACE=2: rc $rc, got '$got'"
# QM_TRACE=2 with the reader's pool (16 MiB over the built-in mesh's 4 devices: 4 ring pieces of
# 4 MiB, each read by 4 threads): every piece's read ends once, after its submit, with its range
run "trace reads" env QM_TRACE=2 QM_READ_THREADS=4 "$QMESH" encode --input fault_f8.npy --out t5.npy
got=$(sed -n 's/^qmesh trace: *[0-9.]* ms //p' "$T/err" | awk '
  /^ingest: piece [0-9]+ submitted/ { r = $0; sub(/.*elements /, "", r); sub(/\)$/, "", r); s[r] = NR; ns++ }
  /^read: elements / { r = $0; sub(/^read: elements /, "", r); sub(/ done$/, "", r); nd++; if (!(r in s) || s[r] > NR || (r in d)) bad++; d[r] = 1 }
  END { printf "%d submitted, %d done, %d out of place", ns, nd, bad }')
[ $rc -eq 0 ] && [ "$got" = "4 submitted, 4 done, 0 out of place" ] &&
  ok "QM_TRACE=2: each background read's end, after its submit" || bad "QM_TRACE=2 reads: rc $rc, $got"
rm -f t5.npy
# one 2^18 state on the built-in mesh's 4 devices: each shard's block sums come from the staging,
# so the ingest makes and copies their piece roots behind its last chunk, before it drains, and
# local_norm only adds them; the norm check's 4 combines follow the amplitudes
run "trace roots" env QM_TRACE=1 "$QMESH" encode --input big_f8.npy --out t4.npy
got=$(sed -n 's/^qmesh trace: *[0-9.]* ms //p' "$T/err" | grep -E "tree:|drained|local_norm:|amplitudes done" | tr '\n' '|')
tree="tree: combines into 1 piece roots enqueued, their copy next|"
want3="$tree$tree$tree${tree}ingest: pipe 0 drained|ingest: pipe 1 drained|ingest: pipe 2 drained|ingest: pipe 3 drained|ingest: drained|local_norm: 4 piece roots in plain memory, sums enqueued|local_norm: copies enqueued|local_norm: drained|local_norm: pieces added|encode: amplitudes done|$tree$tree$tree$tree"
[ $rc -eq 0 ] && [ "$got" = "$want3" ] && cmp -s t4.npy t1_big_f8.npy && ok "QM_TRACE=1: one state's piece roots made in the ingest, the same bytes" ||
  bad "trace roots: rc $rc, got '$got'"
# QM_ROOTS_PAGE_LOCKED=1: the norm's sums in page-locked memory, the same bytes
run "roots page-locked" env QM_ROOTS_PAGE_LOCKED=1 "$QMESH" encode --input amp_i4.npy --out t3.npy
[ $rc -eq 0 ] && cmp -s t3.npy a_i4.npy && ok "QM_ROOTS_PAGE_LOCKED=1: the same bytes" || bad "QM_ROOTS_PAGE_LOCKED=1: rc $rc"
for v in "" 0 yes 3; do
  run "no trace '$v'" env QM_TRACE="$v" "$QMESH" encode --input amp_i4.npy --out t2.npy
  [ $rc -eq 0 ] && ! grep -q "qmesh trace" "$T/err" && ok "QM_TRACE='$v': no trace" || bad "QM_TRACE='$v': rc $rc"
done

echo "test_read_cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
