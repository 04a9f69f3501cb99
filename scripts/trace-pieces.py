#!/usr/bin/env python3
"""trace-pieces.py — an encode's ring pieces from its QM_TRACE=2 output, one row each.

Reads the stderr of `QM_TRACE=2 qmesh encode ...` (docs/cli.md "Trace switch") and prints, per
ring piece k, in milliseconds from the first submit: when it was submitted, when its read ended
(the reader pool's last thread leaving it; pooled reads only), when the ingest's wait for it
returned, and when its copy was seen finished; then the read's span (first submit to last wait,
what `encode` reports as `read`), when the pipes were open, and the rates of the first
QM_INGEST_SLOTS - 1 pieces (read before any copy can start) and of the rest.

Usage: scripts/trace-pieces.py TRACE [TRACE...]   (e.g. QM_TRACE=2 qmesh encode ... 2> TRACE)
"""
import re
import sys

LINE = re.compile(r'qmesh trace:\s+([\d.]+) ms (.*)')
SUB = re.compile(r'ingest: piece (\d+) submitted \(elements \[(\d+), \+(\d+)\)\)')
DONE = re.compile(r'read: elements \[(\d+), \+(\d+)\) done')
WAIT = re.compile(r'ingest: piece (\d+) read$')
COPY = re.compile(r'ingest: piece (\d+) copied$')
AHEAD = 7  # QM_INGEST_SLOTS - 1: the pieces read before the first copy can free a slot


def parse(path, item_bytes):
    sub, elems, done, wait, copy, marks = {}, {}, {}, {}, {}, {}
    for line in open(path, errors='replace'):
        m = LINE.match(line)
        if not m:
            continue
        t, what = float(m.group(1)), m.group(2)
        if (g := SUB.match(what)):
            k = int(g.group(1))
            sub[k] = t
            elems[(int(g.group(2)), int(g.group(3)))] = k
        elif (g := DONE.match(what)):
            k = elems.get((int(g.group(1)), int(g.group(2))))
            if k is not None:
                done[k] = t
        elif (g := WAIT.match(what)):
            wait[int(g.group(1))] = t
        elif (g := COPY.match(what)):
            copy[int(g.group(1))] = t
        elif what.startswith('ingest: ') and what.endswith('pipes open'):
            marks.setdefault('pipes open', t)
    size = {k: n * item_bytes for (first, n), k in elems.items()}
    return sub, done, wait, copy, marks, size


def report(path, item_bytes):
    sub, done, wait, copy, marks, size = parse(path, item_bytes)
    if not sub:
        print(f'{path}: no ring piece submits (not QM_TRACE=2, or no background reads)')
        return
    t0 = min(sub.values())
    rel = lambda d, k: f'{d[k] - t0:9.3f}' if k in d else '        -'
    print(f'{path}: {len(sub)} pieces, {sum(size.values()) / 1e6:.1f} MB')
    print('    k   submit  read end     wait    copied')
    for k in sorted(sub):
        print(f'{k:5d}{rel(sub, k)}{rel(done, k)}{rel(wait, k)}{rel(copy, k)}')
    span = max(wait.values()) - t0 if wait else float('nan')
    print(f'read span {span:.3f} ms; pipes open at {marks.get("pipes open", t0) - t0:.3f} ms')
    ks = sorted(k for k in done)
    if len(ks) > AHEAD + 1:
        head = ks[:AHEAD]
        b = sum(size[k] for k in head)
        print(f'first {AHEAD} pieces: {b / 1e6:.1f} MB read by {done[head[-1]] - t0:.3f} ms '
              f'({b / 1e6 / (done[head[-1]] - t0):.2f} GB/s)')
        a, rest = head[-1], ks[AHEAD:]
        b = sum(size[k] for k in rest)
        dt = done[rest[-1]] - done[a]
        print(f'pieces {rest[0]}..{rest[-1]}: {b / 1e6:.1f} MB in {dt:.3f} ms ({b / 1e6 / dt:.2f} GB/s)')


if __name__ == '__main__':
    args = sys.argv[1:]
    if not args or args[0] in ('-h', '--help'):
        print(__doc__.strip())
        sys.exit(0 if args else 2)
    for p in args:
        report(p, 8)  # float64 inputs: the data path's jobs
