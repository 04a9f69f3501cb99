"""qmesh.stream / qmesh.QuantumDataLoader: batches equal to the one-shot encode (and to the CLI's
streamed file), States that outlive the iterator, an early break that releases the reader thread,
the file and the buffers, the GIL released while a batch is read, errors named by global sample,
a CSV file read batch by batch (plain and gzip, any QM_CSV_CHUNK_BYTES).
"""
import gc
import os
import time
import threading

import numpy as np
import pytest

import qmesh

rng = np.random.default_rng(7)
DATA = rng.standard_normal((37, 16))


def _tasks():
    return len(os.listdir("/proc/self/task"))


def _settled_tasks(expect):
    """The thread count once it is `expect`, or what it is after 10 s. A joined thread can stay
    listed in /proc/self/task for a moment after pthread_join returns (the kernel reaps it after
    waking the joiner), so a count taken right after a join may still include it; waiting for the
    count to reach the expected value keeps the check exact without depending on speed (a leaked
    thread never leaves, and the assertion then fails after the bound)."""
    for _ in range(2000):
        n = _tasks()
        if n == expect:
            return n
        time.sleep(0.005)
    return _tasks()


def _fds():
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("batch_size", [1, 4, 5, 37, 100])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_file_batches_equal_one_shot(tmp_path, batch_size, dtype):
    a = DATA.astype(dtype)
    path = tmp_path / "x.npy"
    np.save(path, a)
    one = qmesh.encode(a).to_numpy()
    s = qmesh.stream(str(path), batch_size)
    b = min(batch_size, 37)
    assert len(s) == -(-37 // b)
    parts = [st.to_numpy() for st in s]
    assert [p.shape for p in parts] == [(min(b, 37 - i), 16) for i in range(0, 37, b)]
    got = np.concatenate(parts)
    assert got.dtype == one.dtype and got.tobytes() == one.tobytes()
    info = s.info()
    assert info["batches_done"] == len(parts) and info["samples"] == 37
    assert info["input_buffers"] == 3 and info["input_bytes_peak"] <= 3 * info["batch_input_bytes"]


@pytest.mark.parametrize("prefetch", [0, 1, 4])
def test_host_rows_and_angle(prefetch):
    x = np.cos(np.arange(23 * 6) * 0.3).reshape(23, 6)
    one = qmesh.encode(x, encoding="angle").to_numpy()
    got = np.concatenate([st.to_numpy() for st in
                          qmesh.stream(x, 5, encoding="angle", prefetch=prefetch)])
    assert got.tobytes() == one.tobytes()


def test_basis_indices():
    idx = np.array([3.0, 1, 0, 7, 2, 5, 6])
    one = qmesh.encode(idx, encoding="basis").to_numpy()
    parts = [st.to_numpy() for st in qmesh.stream(idx, 3, encoding="basis")]
    assert [p.shape for p in parts] == [(3, 8), (3, 8), (1, 8)]
    assert np.concatenate(parts).tobytes() == one.tobytes()


def test_same_bytes_as_cli_stream(tmp_path, cli):
    path = tmp_path / "x.npy"
    np.save(path, DATA)
    cli("encode", "--input", path, "--batch-size", 6, "--out", tmp_path / "cli.npy")
    got = np.concatenate([st.to_numpy() for st in qmesh.stream(path, 6)])
    assert got.tobytes() == np.load(tmp_path / "cli.npy").tobytes()


def test_states_outlive_the_iterator(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, DATA)
    one = qmesh.encode(DATA).to_numpy()
    s = qmesh.stream(path, 10)
    states = list(s)
    s.close()
    del s
    gc.collect()
    assert [st.shape for st in states] == [(10, 16), (10, 16), (10, 16), (7, 16)]
    assert np.concatenate([st.to_numpy() for st in states]).tobytes() == one.tobytes()
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(states[1].shards[0])
    first = states[1].shards[0]
    want = one.reshape(-1)[160 + first.start:160 + first.end]
    assert np.asarray(t).tobytes() == want.tobytes()


def test_early_break_releases_everything(tmp_path):
    path = tmp_path / "big.npy"
    np.save(path, rng.standard_normal((4096, 64)))
    gc.collect()
    tasks, fds = _tasks(), _fds()
    for _ in range(5):
        s = qmesh.stream(path, 64, prefetch=4)
        assert _settled_tasks(tasks + 1) == tasks + 1  # the reader thread
        first = next(iter(s))
        del s  # the reader may be waiting for a free buffer
        gc.collect()
        assert _settled_tasks(tasks) == tasks and _fds() == fds
        assert first.shape == (64, 64)  # still valid
    with qmesh.stream(path, 64) as s:
        next(s)
    assert _settled_tasks(tasks) == tasks and _fds() == fds
    with pytest.raises(qmesh.Error, match="stream: the stream is closed"):
        s.info()
    assert list(s) == []  # a closed stream is exhausted


def test_gil_released_while_waiting(tmp_path):
    path = tmp_path / "big.npy"
    np.save(path, rng.standard_normal((2048, 256)))
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(1)
            stop.wait(0.0005)

    t = threading.Thread(target=tick)
    t.start()
    n = sum(st.batch for st in qmesh.stream(path, 128, prefetch=1))
    stop.set()
    t.join()
    assert n == 2048
    assert ticks  # the other thread ran (not a timing bound: it only has to run once)


def test_loader_is_reiterable(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, DATA)
    loader = qmesh.QuantumDataLoader(path, batch_size=8, qubits=5)
    assert len(loader) == 5
    e1 = np.concatenate([st.to_numpy() for st in loader])
    e2 = np.concatenate([st.to_numpy() for st in loader])
    assert e1.shape == (37, 32) and e1.tobytes() == e2.tobytes()
    assert e1.tobytes() == qmesh.encode(DATA, qubits=5).to_numpy().tobytes()


def test_nan_named_by_global_sample_and_sticky(tmp_path):
    x = DATA[:30].copy()
    x[13, 2] = np.nan
    path = tmp_path / "nan.npy"
    np.save(path, x)
    for src in (path, x):
        s = qmesh.stream(src, 4)
        got = [next(s), next(s), next(s)]
        assert [g.batch for g in got] == [4, 4, 4]
        for _ in range(2):
            with pytest.raises(qmesh.Error) as e:
                next(s)
            assert e.value.code == "E-INPUT"
            assert str(e.value) == ("error[E-INPUT]: encode: zero or non-finite norm: sample 13, "
                                    "feature 2 is NaN")


@pytest.mark.parametrize("chunk", ["1", "5", None])
def test_csv_read_batch_by_batch(tmp_path, monkeypatch, chunk):
    """A CSV file (plain and gzip) streams through the chunked reader: the one-shot bytes at any
    QM_CSV_CHUNK_BYTES; a bad row is the error of its batch, sticky, after the batches before."""
    import gzip
    if chunk:
        monkeypatch.setenv("QM_CSV_CHUNK_BYTES", chunk)
    text = "".join(",".join("%.17g" % v for v in row) + "\r\n" for row in DATA)
    path, gz = tmp_path / "x.csv", tmp_path / "x.csv.gz"
    path.write_bytes(text.encode())
    gz.write_bytes(gzip.compress(text.encode()))
    one = qmesh.encode(DATA).to_numpy()
    for src in (path, gz):
        s = qmesh.stream(str(src), 5, prefetch=2)
        assert len(s) == 8
        got = np.concatenate([st.to_numpy() for st in s])
        assert got.tobytes() == one.tobytes()
    lines = text.split("\r\n")
    lines[22] = lines[22].replace(",", ",x", 1)
    path.write_text("\n".join(lines))
    s = qmesh.stream(str(path), 5, prefetch=1)
    got = [next(s) for _ in range(4)]
    assert [g.batch for g in got] == [5, 5, 5, 5]
    for _ in range(2):
        with pytest.raises(qmesh.Error) as e:
            next(s)
        assert e.value.code == "E-INPUT"
        assert str(e.value).startswith("error[E-INPUT]: encode: reading input [320, 400): ")
        assert str(e.value).endswith("x.csv: row 23, column 2: 'x%.17g' is not a number"
                                     % DATA[22, 1])


def test_bad_arguments(tmp_path):
    with pytest.raises(qmesh.Error) as e:
        qmesh.stream(DATA, 0)
    assert str(e.value) == "error[E-ARG]: stream: batch_size must be at least 1 (got 0)"
    with pytest.raises(qmesh.Error) as e:
        qmesh.stream(DATA, 4, prefetch=65)
    assert str(e.value) == "error[E-ARG]: stream: prefetch must be 0..64 (got 65)"
    with pytest.raises(qmesh.RunError) as e:
        qmesh.stream(tmp_path / "missing.npy", 4)
    assert e.value.code == "E-IO"
    with pytest.raises(qmesh.Error, match="unknown backend 'tpu'"):
        qmesh.stream(DATA, 4, backend="tpu")
