#!/usr/bin/env python3
"""make_corpus.py — (re)write the seed corpora of tests/fuzz/corpus/ (docs/fuzzing.md).

Standard library only. Seeds: the scenario library and scenarios/invalid/ (fuzz_scenario); small
.npy files, valid and broken (fuzz_npy); CSV texts with the harness's option byte first (fuzz_csv);
argument lines of docs/cli.md's commands over the CLI harness's fixture names (fuzz_cli). Only
the top-level files of corpus/<harness>/ are rewritten: regressions/ (findings) and found/ (inputs
the long runs added, merged with -merge=1) are never touched here. Run from anywhere:
    python3 tests/fuzz/make_corpus.py
"""
import gzip
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, 'corpus')


def fresh(name):
    d = os.path.join(CORPUS, name)
    os.makedirs(os.path.join(d, 'regressions'), exist_ok=True)
    for f in os.listdir(d):
        p = os.path.join(d, f)
        if os.path.isfile(p):
            os.remove(p)
    return d


def put(d, name, data):
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def scenarios():
    d = fresh('fuzz_scenario')
    for sub, prefix in (('scenarios', 'lib-'), ('scenarios/invalid', 'invalid-'),
                        ('scenarios/measured', 'measured-')):
        src = os.path.join(ROOT, sub)
        for f in sorted(os.listdir(src)):
            p = os.path.join(src, f)
            if os.path.isfile(p) and f.endswith('.yaml') and os.path.getsize(p) <= 16384:
                shutil.copy(p, os.path.join(d, prefix + f))
    shutil.copy(os.path.join(ROOT, 'engine/scenario/default_scenario.yaml'), os.path.join(d, 'default.yaml'))


def npy_bytes(descr, shape, values, fmt, version=1, fortran=False, pad_to=64, extra=b''):
    hdr = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    pre = 10 if version == 1 else 12
    hdr += ' ' * ((pad_to - (pre + len(hdr) + 1) % pad_to) % pad_to) + '\n'
    h = hdr.encode('latin1' if version < 3 else 'utf-8')
    out = b'\x93NUMPY' + bytes([version, 0])
    out += struct.pack('<H', len(h)) if version == 1 else struct.pack('<I', len(h))
    return out + h + struct.pack('<%d%s' % (len(values), fmt), *values) + extra


def npys():
    d = fresh('fuzz_npy')
    v8 = [0.5 * i - 1 for i in range(8)]
    put(d, 'v1-f8-1d', npy_bytes('<f8', '(8,)', v8, 'd'))
    put(d, 'v1-f4-2d', npy_bytes('<f4', '(2, 4)', v8, 'f'))
    put(d, 'v2-f8-2d', npy_bytes('<f8', '(4, 2)', v8, 'd', version=2))
    put(d, 'v3-f4-1d', npy_bytes('<f4', '(8,)', v8, 'f', version=3))
    put(d, 'v1-f8-2d-1x1', npy_bytes('<f8', '(1, 1)', [1.0], 'd'))
    put(d, 'v1-f8-1d-nopad', npy_bytes('<f8', '(3,)', [1.0, 2.0, 3.0], 'd', pad_to=1))
    put(d, 'bad-fortran', npy_bytes('<f8', '(2, 4)', v8, 'd', fortran=True))
    put(d, 'bad-bigendian', npy_bytes('>f8', '(8,)', v8, '>d'[1]))
    put(d, 'bad-int', npy_bytes('<i4', '(8,)', list(range(8)), 'i'))
    put(d, 'bad-0d', npy_bytes('<f8', '()', [1.0], 'd'))
    put(d, 'bad-3d', npy_bytes('<f8', '(2, 2, 2)', v8, 'd'))
    put(d, 'bad-empty', npy_bytes('<f8', '(0,)', [], 'd'))
    put(d, 'bad-truncated', npy_bytes('<f8', '(8,)', v8[:5], 'd'))
    put(d, 'bad-trailing', npy_bytes('<f8', '(8,)', v8, 'd', extra=b'\0' * 8))
    put(d, 'bad-overflow', npy_bytes('<f8', '(4294967296, 4294967296)', [], 'd'))
    put(d, 'bad-magic', b'\x93NUMPX\x01\x00' + npy_bytes('<f8', '(1,)', [1.0], 'd')[8:])
    put(d, 'bad-version', b'\x93NUMPY\x04\x00' + npy_bytes('<f8', '(1,)', [1.0], 'd')[8:])
    put(d, 'bad-hdrlen', b'\x93NUMPY\x01\x00\xff\xff{}')
    put(d, 'bad-extra-key', npy_bytes('<f8', "(1,), 'x': 1", [1.0], 'd'))


def csvs():
    d = fresh('fuzz_csv')
    # option byte: bit 0 gzip the rest; bits 1-2 header auto/yes/no; bits 3-4 drop none/"0"/"2"/label
    texts = {
        'header': 'a,b,c\n1,2,3\n4,5,6\n',
        'noheader': '1,2,3\n4,5,6\n',
        'crlf': '1,2\r\n3,4\r\n',
        'bom': '\ufeffx,y\n1,2\n',
        'ragged': '1,2,3\n4,5\n',
        'empty-field': '1,,3\n',
        'blank-line': '1,2\n\n3,4\n',
        'nan-inf': 'nan,inf,-inf,1e308\n',
        'label': 'label,x,y\ncat,1,2\ndog,3,4\n',
        'spaces': ' 1 , 2 \n 3 ,4\n',
        'range': '1e999,2\n',
        'empty': '',
    }
    for name, t in texts.items():
        b = t.encode('utf-8')
        put(d, name, bytes([0]) + b)
    put(d, 'header-yes-gz', bytes([1 | 2]) + texts['header'].encode())
    put(d, 'noheader-no-gz', bytes([1 | 4]) + texts['noheader'].encode())
    put(d, 'label-drop-name', bytes([3 << 3]) + texts['label'].encode())
    put(d, 'label-drop-0', bytes([1 << 3]) + texts['label'].encode())
    put(d, 'drop-2', bytes([2 << 3]) + texts['header'].encode())
    put(d, 'raw-gzip', bytes([0]) + gzip.compress(texts['header'].encode(), mtime=0))
    put(d, 'raw-gzip-corrupt', bytes([0]) + gzip.compress(texts['header'].encode(), mtime=0)[:-6])


def clis():
    d = fresh('fuzz_cli')
    lines = [
        ['help'], ['version'], ['--help'], ['devices'], ['devices', '--backend', 'sim'],
        ['encode', '--input', 'a.npy'],
        ['encode', '--input', 'a.npy', '--qubits', '3', '--dtype', 'complex64', '--json'],
        ['encode', '--input', 'a.npy', '--out', 'o.npy', '--policy', 'equal'],
        ['encode', '--input', 'a.csv', '--drop-column', 'label', '--out-dir', 'd'],
        ['encode', '--input', 'a.csv.gz', '--drop-column', '3', '--header', 'yes', '--json'],
        ['encode', '--input', 'a.npy', '--scenario', 's.yaml', '--backend', 'sim', '--ranks', '2'],
        ['plan', '--qubits', '30'],
        ['plan', '--scenario', 's.yaml', '--qubits', '34', '--dtype', 'complex128', '--json'],
        ['plan', '--qubits', '20', '--batch', '8', '--features', '1000', '--gather', 'host'],
        ['plan', '--qubits', '36', '--policy', 'balanced', '--ranks', '2', '--encoding', 'angle'],
        ['plan', '--scenario', 'bad.yaml', '--qubits', '10'],
        ['scenario', 'run', 's.yaml'], ['scenario', 'check', 's.yaml', 'bad.yaml'],
        ['topo', 'validate', 's.yaml', 'bad.yaml', '--', 'missing.yaml'],
        ['topo', 'show', 's.yaml', '--json'], ['topo', 'show', '--dot'], ['topo', 'show'],
        ['topo', 'dump'], ['topo', 'dump', 's.yaml', '--out', 'x.yaml'],
    ]
    for i, l in enumerate(lines):
        put(d, 'cmd-%02d-%s' % (i, l[0].lstrip('-')), '\n'.join(l))


if __name__ == '__main__':
    scenarios()
    npys()
    csvs()
    clis()
