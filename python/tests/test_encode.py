"""qmesh.encode: amplitudes equal to the CLI's output bytes, every input kind, shapes, dtypes."""
import gzip

import numpy as np
import pytest

import qmesh

ROWS = np.array([[1, 2, 3, 4, 5], [0.5, -1.5, 2.5, -3.5, 4.5]])


def cli_encode(cli, tmp_path, x, *flags):
    """The CLI's amplitudes for array x (through a .npy file) and the same flags."""
    src, out = tmp_path / "in.npy", tmp_path / "cli_out.npy"
    np.save(src, x)
    cli("encode", "--input", src, "--out", out, *flags)
    return np.load(out)


def same_bytes(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("shape,dtype", [((5,), np.float64), ((2, 5), np.float64),
                                         ((7, 12), np.float32), ((1, 3), np.float32),
                                         ((33,), np.float32), ((16, 64), np.float64)])
def test_equals_cli_bytes(cli, tmp_path, shape, dtype):
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(dtype)
    s = qmesh.encode(x)
    want = cli_encode(cli, tmp_path, x)
    got = s.to_numpy()
    same_bytes(got, want)
    assert s.shape == got.shape and s.batch == (shape[0] if len(shape) == 2 else 1)
    assert s.dtype == ("complex128" if dtype == np.float64 else "complex64")
    assert s.qubits == max(1, (shape[-1] - 1).bit_length())


def test_explicit_qubits_dtype_policy_scenario(cli, tmp_path, source_dir):
    scen = source_dir + "/scenarios/dgx-h100.yaml"
    x = np.arange(1, 41, dtype=np.float32).reshape(4, 10)
    s = qmesh.encode(x, qubits=6, dtype="complex128", policy="equal", scenario=scen)
    want = cli_encode(cli, tmp_path, x, "--qubits", 6, "--dtype", "complex128", "--policy",
                      "equal", "--scenario", scen)
    same_bytes(s.to_numpy(), want)
    assert s.shape == (4, 64) and len(s.shards) >= 2


def test_known_values():
    s = qmesh.encode(ROWS)
    want = np.zeros((2, 8), np.complex128)
    for r in range(2):
        want[r, :5] = ROWS[r] * (1.0 / np.sqrt((ROWS[r] ** 2).sum()))
    same_bytes(s.to_numpy(), want)
    assert [(sh.start, sh.end) for sh in s.shards] == [(0, 8), (8, 16)]
    assert [sh.device_id for sh in s.shards] == ["n0.g0", "n0.g1"]
    assert repr(s) == "qmesh.State(qubits=3, dtype='complex128', shape=(2, 8), 2 shards)"


def test_list_and_buffer_inputs():
    want = qmesh.encode(ROWS).to_numpy()
    same_bytes(qmesh.encode(ROWS.tolist()).to_numpy(), want)  # lists: float64
    same_bytes(qmesh.encode(memoryview(np.ascontiguousarray(ROWS))).to_numpy(), want)

    class ArrayInterface:  # __array_interface__ only
        def __init__(self, a):
            self.__array_interface__ = a.__array_interface__
            self._keep = a
    same_bytes(qmesh.encode(ArrayInterface(ROWS)).to_numpy(), want)
    one = qmesh.encode([3, 4])
    same_bytes(one.to_numpy(), np.array([3 * (1 / 5.0), 4 * (1 / 5.0)], np.complex128))
    assert one.shape == (2,) and one.batch == 1


def test_dtype_conversion_rule():
    ints = np.array([[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]], dtype=np.int32)
    s = qmesh.encode(ints)  # integers become float64 -> complex128
    same_bytes(s.to_numpy(), qmesh.encode(ints.astype(np.float64)).to_numpy())
    assert s.dtype == "complex128"
    f16 = np.array([1, 2, 3], dtype=np.float16)
    same_bytes(qmesh.encode(f16).to_numpy(), qmesh.encode(f16.astype(np.float64)).to_numpy())
    same_bytes(qmesh.encode(np.array([True, True])).to_numpy(),
               qmesh.encode([1.0, 1.0]).to_numpy())
    assert qmesh.encode(np.ones(3, np.float32), dtype="complex128").dtype == "complex128"


def test_non_contiguous_and_byte_order():
    big = np.arange(1, 61, dtype=np.float64).reshape(6, 10)
    view = big[::2, 1:6]  # strided
    assert not view.flags.c_contiguous
    same_bytes(qmesh.encode(view).to_numpy(), qmesh.encode(view.copy()).to_numpy())
    fortran = np.asfortranarray(big)
    same_bytes(qmesh.encode(fortran).to_numpy(), qmesh.encode(big).to_numpy())
    swapped = big.astype(">f8")
    same_bytes(qmesh.encode(swapped).to_numpy(), qmesh.encode(big).to_numpy())


def test_torch_cpu_tensor():
    torch = pytest.importorskip("torch")
    t = torch.tensor(ROWS)
    same_bytes(qmesh.encode(t).to_numpy(), qmesh.encode(ROWS).to_numpy())
    t32 = torch.tensor(ROWS, dtype=torch.float32)
    s32 = qmesh.encode(t32)
    assert s32.dtype == "complex64"
    same_bytes(s32.to_numpy(), qmesh.encode(ROWS.astype(np.float32)).to_numpy())
    ti = torch.arange(1, 9)  # int64 -> float64
    same_bytes(qmesh.encode(ti).to_numpy(), qmesh.encode(np.arange(1, 9.0)).to_numpy())
    tt = torch.tensor(ROWS).t()  # non-contiguous
    same_bytes(qmesh.encode(tt).to_numpy(), qmesh.encode(ROWS.T.copy()).to_numpy())


def test_files(cli, tmp_path):
    npy = tmp_path / "x.npy"
    np.save(npy, ROWS)
    want = qmesh.encode(ROWS).to_numpy()
    same_bytes(qmesh.encode(str(npy)).to_numpy(), want)
    same_bytes(qmesh.encode(npy).to_numpy(), want)  # os.PathLike
    csv = tmp_path / "x.csv"
    csv.write_text("a,b,c,d,e\n1,2,3,4,5\n0.5,-1.5,2.5,-3.5,4.5\n")
    same_bytes(qmesh.encode(csv).to_numpy(), want)
    gz = tmp_path / "x.csv.gz"
    with gzip.open(gz, "wt") as f:
        f.write("1,2,3,4,5\n0.5,-1.5,2.5,-3.5,4.5\n")
    same_bytes(qmesh.encode(gz).to_numpy(), want)
    out = tmp_path / "o.npy"
    cli("encode", "--input", gz, "--out", out)
    same_bytes(qmesh.encode(gz).to_numpy(), np.load(out))
    one = tmp_path / "one.npy"
    np.save(one, np.array([3.0, 4.0], np.float32))
    s = qmesh.encode(one)
    assert s.shape == (2,) and s.dtype == "complex64"


def test_gather_and_shards():
    x = np.random.default_rng(1).standard_normal((8, 16))
    s = qmesh.encode(x)
    assert len(s.shards) > 1
    g = s.gather(2)
    assert len(g.shards) == 1 and g.shards[0].device == 2 and g.shards[0].device_id == "n0.g2"
    same_bytes(g.to_numpy(), s.to_numpy())
    assert g.shape == s.shape
    assert s.amplitudes() == 8 * 16
    pos = 0
    for i, sh in enumerate(s.shards):
        assert sh.index == i and sh.start == pos and sh.rank == 0 and sh.dtype == "complex128"
        pos = sh.end
    assert pos == 8 * 16


def test_help_is_useful():
    doc = qmesh.encode.__doc__
    for word in ("qubits", "dtype", "__dlpack__", "E-CAPACITY", "GIL", "Ctrl-C"):
        assert word in doc
    for obj in (qmesh.plan, qmesh.devices, qmesh.State, qmesh.State.to_numpy, qmesh.State.gather,
                qmesh.Shard, qmesh.Scenario, qmesh.Scenario.load, qmesh.Scenario.from_yaml,
                qmesh.Plan, qmesh.Error, qmesh.RunError):
        assert obj.__doc__ and len(obj.__doc__) > 20, obj


def _angle_ref(x):
    s = np.array([1.0 + 0j])
    for k in range(len(x)):
        s = np.concatenate([s * np.cos(x[k]), s * np.sin(x[k])])
    return s


def _iqp_ref(d, n):
    """2^-n sum_x exp(i phi(x)) (-1)^popcount(x & i): the Hadamard matrix times the phases."""
    N = 1 << n
    phi = np.zeros(N)
    for x in range(N):
        bits = [(x >> k) & 1 for k in range(n)]
        p, t = 0.0, n
        p += sum(d[k] for k in range(n) if bits[k])
        for k in range(n):
            for l in range(k + 1, n):
                if len(d) > n and bits[k] and bits[l]:
                    p += d[t]
                t += 1
        phi[x] = p
    H = np.array([[(-1) ** bin(x & i).count("1") for x in range(N)] for i in range(N)])
    return H @ np.exp(1j * phi) / N


@pytest.mark.parametrize("encoding", ["angle", "phase", "basis", "iqp", "iqp-z"])
def test_feature_maps_equal_cli_bytes(cli, tmp_path, encoding):
    rng = np.random.default_rng(7)
    x = (np.array([[0.0, 5.0, 3.0, 6.0]]).T if encoding == "basis"
         else rng.uniform(-3, 3, (5, 6)) if encoding == "iqp"
         else rng.uniform(-3, 3, (5, 4)))
    s = qmesh.encode(x, encoding=encoding)
    want = cli_encode(cli, tmp_path, x, "--encoding", encoding)
    same_bytes(s.to_numpy(), want)
    got = s.to_numpy()
    if encoding == "angle":
        assert s.shape == (5, 16)
        assert max(abs(got[r] - _angle_ref(x[r])).max() for r in range(5)) < 1e-15
    elif encoding == "phase":
        n = 4
        for r in range(5):
            ref = [np.exp(1j * sum(x[r][k] for k in range(n) if (i >> k) & 1)) / 4
                   for i in range(16)]
            assert abs(got[r] - np.array(ref)).max() < 1e-15
    elif encoding in ("iqp", "iqp-z"):
        n = 3 if encoding == "iqp" else 4
        assert s.shape == (5, 1 << n) and s.qubits == n
        assert max(abs(got[r] - _iqp_ref(x[r], n)).max() for r in range(5)) < 1e-14
    else:
        assert s.shape == (4, 8) and s.qubits == 3
        assert [int(np.argmax(abs(row))) for row in got] == [0, 5, 3, 6]
        assert (abs(got).sum(axis=1) == 1.0).all()


def test_basis_one_dimensional_is_a_batch():
    s = qmesh.encode(np.array([1, 2]), encoding="basis")
    assert s.shape == (2, 4) and s.qubits == 2
    assert s.to_numpy().tobytes() == np.array([[0, 1, 0, 0], [0, 0, 1, 0]],
                                              np.complex128).tobytes()


INT_DTYPES = ["<i1", "<i2", "<i4", "<i8", "<u1", "<u2", "<u4", "<u8", ">i4", ">u8"]


@pytest.mark.parametrize("dt", INT_DTYPES)
def test_basis_integer_array_and_file_equal_float64_bytes(cli, tmp_path, dt):
    idx = [0, 7, 3, 1]  # 0 and 2^n - 1 for n = 3
    want = qmesh.encode(np.array(idx, np.float64), encoding="basis").to_numpy()
    s = qmesh.encode(np.array(idx, dtype=dt), encoding="basis")
    assert s.qubits == 3 and s.shape == (4, 8)
    same_bytes(s.to_numpy(), want)
    f = tmp_path / "idx.npy"
    np.save(f, np.array(idx, dtype=dt))
    same_bytes(qmesh.encode(str(f), encoding="basis", qubits=3).to_numpy(), want)
    same_bytes(cli_encode(cli, tmp_path, np.array(idx, dtype=dt), "--encoding", "basis"), want)


def test_basis_integer_edges_are_named_exactly(tmp_path):
    with pytest.raises(qmesh.Error, match=r"^error\[E-INPUT\]: encode: sample 2: basis index -1 "
                       r"is not a non-negative integer$"):
        qmesh.encode(np.array([0, 1, -1], np.int64), encoding="basis")
    with pytest.raises(qmesh.Error, match=r"^error\[E-INPUT\]: encode: sample 1: basis index 8 "
                       r"is not an integer in \[0, 8\) \(3 qubits\)$"):
        qmesh.encode(np.array([7, 8], np.uint16), encoding="basis", qubits=3)
    big = 2 ** 53 + 1  # not a float64: must be named as it is
    with pytest.raises(qmesh.Error, match=r"^error\[E-INPUT\]: encode: sample 0: basis index "
                       r"9007199254740993 is not an integer in \[0, 16\) \(4 qubits\)$"):
        qmesh.encode(np.array([big], np.uint64), encoding="basis", qubits=4)
    f = tmp_path / "big.npy"
    np.save(f, np.array([3, big], np.int64))
    with pytest.raises(qmesh.Error, match=r"sample 1: basis index 9007199254740993 is not an "
                       r"integer in \[0, 16\) \(4 qubits\)$"):
        qmesh.encode(str(f), encoding="basis", qubits=4)


def test_integer_file_is_float64_for_amplitude(tmp_path):
    x = np.array([[1, 2, 3, 4], [0, 0, 0, 5]], np.int32)
    f = tmp_path / "ints.npy"
    np.save(f, x)
    s = qmesh.encode(str(f))
    assert s.dtype == "complex128"
    same_bytes(s.to_numpy(), qmesh.encode(x.astype(np.float64)).to_numpy())
