"""npy_write.py — write a small .npy file with the standard library only (struct, no numpy), for
the shell tests: npy(path, descr, shape, values, fmt), e.g. npy('x.npy', '<f8', '(3,)', v, 'd')."""
import struct


def npy(path, descr, shape, values, fmt):
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    hdr += ' ' * (64 - (10 + len(hdr) + 1) % 64) + '\n'
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(hdr)) + hdr.encode())
        f.write(struct.pack('<%d%s' % (len(values), fmt), *values))
