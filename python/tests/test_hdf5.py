"""qmesh.encode(path) of an HDF5 file (docs/python.md, docs/io.md "HDF5 input"): the bytes of the
same array given as a NumPy array and of the CLI; the file's only dataset is read; errors as the
CLI prints them. Files are written with h5py (Debian: python3-h5py)."""
import h5py
import numpy as np
import pytest

import qmesh


def same_bytes(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("shape,dtype,chunks", [((5,), np.float64, None),
                                                ((7, 12), np.float32, None),
                                                ((16, 64), np.float64, (3, 5)),
                                                ((33,), np.float32, (4,))])
def test_equals_array_and_cli(cli, tmp_path, shape, dtype, chunks):
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(dtype)
    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("group/x", data=x, chunks=chunks,
                         compression="gzip" if chunks else None)
    got = qmesh.encode(str(path)).to_numpy()
    same_bytes(got, qmesh.encode(x).to_numpy())
    out = tmp_path / "cli.npy"
    cli("encode", "--input", path, "--out", out)
    same_bytes(got, np.load(out))


def test_errors(tmp_path):
    path = tmp_path / "two.h5"
    with h5py.File(path, "w") as f:
        f["a"] = np.ones(4)
        f["b"] = np.ones((2, 2, 2))
    with pytest.raises(qmesh.Error) as e:
        qmesh.encode(str(path))
    assert e.value.code == "E-INPUT"
    assert str(e.value) == ("error[E-INPUT]: %s: the file holds 2 datasets ('/a', '/b'); choose "
                            "one with --dataset NAME" % path)
    path = tmp_path / "str.h5"  # strings: refused
    with h5py.File(path, "w") as f:
        f["n"] = np.array([b"ab", b"cd"])
    with pytest.raises(qmesh.Error) as e:
        qmesh.encode(str(path))
    assert e.value.code == "E-DTYPE" and "holds string values" in str(e.value)
    # int64 (h5py's default for integers), float16 and bool (an enum) are read as float64, as
    # from a .npy file
    for dt in (np.int64, np.float16, np.bool_):
        a = (np.arange(12).reshape(3, 4) % 5 + (dt != np.bool_)).astype(dt)
        path = tmp_path / ("w%s.h5" % np.dtype(dt).name)
        with h5py.File(path, "w") as f:
            f["x"] = a
        got = qmesh.encode(str(path)).to_numpy()
        want = qmesh.encode(a.astype(np.float64)).to_numpy()
        assert got.dtype == np.complex128 and got.tobytes() == want.tobytes()
