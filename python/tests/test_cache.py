"""The context cache of qmesh.encode (docs/python.md "Repeated encodes"): a second encode of the
same (scenario, request, backend) reuses the planned context with its open backend, gives the same
bytes, never invalidates a state, and can be turned off or emptied."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import qmesh


def expected(x):
    """Amplitude encoding of the rows of x (float64), padded to a power of two, complex128."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    n = 1
    while (1 << n) < x.shape[1]:
        n += 1
    out = np.zeros((x.shape[0], 1 << n), dtype=np.complex128)
    for i, row in enumerate(x):
        out[i, :x.shape[1]] = row * (1.0 / np.sqrt(np.sum(row * row)))
    return out


def counts(base):
    """(hits, misses) since base (a cache_info())."""
    now = qmesh.cache_info()
    return now["hits"] - base["hits"], now["misses"] - base["misses"]


@pytest.fixture(autouse=True)
def fresh_cache():
    qmesh.clear_cache()
    yield
    qmesh.clear_cache()


def test_second_encode_of_a_shape_hits_and_gives_the_same_bytes():
    x = np.arange(1.0, 33.0).reshape(4, 8)
    before = qmesh.cache_info()
    a = qmesh.encode(x, dtype="complex128").to_numpy()
    mid = qmesh.cache_info()
    b = qmesh.encode(x, dtype="complex128").to_numpy()
    after = qmesh.cache_info()
    assert mid["misses"] == before["misses"] + 1 and mid["hits"] == before["hits"]
    assert after["hits"] == mid["hits"] + 1 and after["misses"] == mid["misses"]
    assert after["entries"] == 1 and after["slots"] == 4 and after["enabled"] is True
    assert a.tobytes() == b.tobytes()
    np.testing.assert_array_equal(a, expected(x))


def test_new_values_through_a_kept_context_are_encoded_afresh():
    x = np.arange(1.0, 33.0).reshape(4, 8)
    y = x[::-1].copy() * 3.0
    qmesh.encode(x, dtype="complex128")
    got = qmesh.encode(y, dtype="complex128").to_numpy()
    assert qmesh.cache_info()["hits"] >= 1
    assert got.tobytes() == expected(y).tobytes()


def test_states_stay_valid_after_clear_and_eviction():
    x = np.arange(1.0, 9.0)
    keep = qmesh.encode(x, dtype="complex128")
    qmesh.clear_cache()
    assert qmesh.cache_info()["entries"] == 0
    # six more shapes: the table (4 slots) evicts the oldest contexts
    for f in range(9, 15):
        qmesh.encode(np.arange(1.0, f + 1.0), dtype="complex128")
    assert qmesh.cache_info()["entries"] == 4
    assert keep.to_numpy().tobytes() == expected(x)[0].tobytes()


def test_a_failed_encode_drops_its_context_and_the_next_one_works():
    x = np.arange(1.0, 9.0)
    qmesh.encode(x, dtype="complex128")
    assert qmesh.cache_info()["entries"] == 1
    bad = x.copy()
    bad[3] = np.nan
    with pytest.raises(qmesh.Error) as e:
        qmesh.encode(bad, dtype="complex128")
    assert e.value.code == "E-INPUT"
    assert qmesh.cache_info()["entries"] == 0
    assert qmesh.encode(x, dtype="complex128").to_numpy().tobytes() == expected(x)[0].tobytes()


def test_the_key_holds_every_request_field():
    x = np.arange(1.0, 9.0)
    base = qmesh.cache_info()
    qmesh.encode(x, dtype="complex128")
    qmesh.encode(x, dtype="complex64")
    qmesh.encode(x, dtype="complex128", qubits=4)
    qmesh.encode(np.full(3, 0.5), encoding="angle", dtype="complex128")
    assert counts(base) == (0, 4) and qmesh.cache_info()["entries"] == 4
    c64 = qmesh.encode(x, dtype="complex64").to_numpy()
    assert counts(base) == (1, 4)
    assert c64.dtype == np.complex64 and c64.shape == (8,)
    wide = qmesh.encode(x, dtype="complex128", qubits=4).to_numpy()
    assert wide.shape == (16,) and not wide[8:].any()


def test_a_scenario_file_is_loaded_once_while_unchanged(tmp_path, source_dir):
    src = os.path.join(source_dir, "scenarios", "first-cluster.yaml")
    path = tmp_path / "s.yaml"
    path.write_text(open(src).read())
    x = np.arange(1.0, 9.0)
    base = qmesh.cache_info()
    qmesh.encode(x, scenario=str(path), dtype="complex128")
    qmesh.encode(x, scenario=str(path), dtype="complex128")
    assert counts(base) == (1, 1)
    # a changed file is loaded again (a new scenario: a new key)
    path.write_text(open(src).read() + "\n# changed\n")
    os.utime(path, ns=(1, 1))
    qmesh.encode(x, scenario=str(path), dtype="complex128")
    assert counts(base) == (1, 2)


def test_threads_encoding_one_shape_get_their_own_rows():
    rows = [np.arange(1.0, 17.0).reshape(2, 8) * (k + 1) + k for k in range(4)]
    errors = []
    base = qmesh.cache_info()

    def work(k):
        try:
            for _ in range(100):
                got = qmesh.encode(rows[k], dtype="complex128").to_numpy()
                if got.tobytes() != expected(rows[k]).tobytes():
                    errors.append("thread %d: wrong amplitudes" % k)
                    return
        except Exception as exc:  # noqa: BLE001 -- reported below
            errors.append("thread %d: %r" % (k, exc))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    hits, misses = counts(base)
    # a thread that finds the shape's context taken plans its own: at most one miss per thread
    assert hits + misses == 400 and 1 <= misses <= 4 and qmesh.cache_info()["entries"] >= 1


def test_the_cache_can_be_turned_off():
    code = ("import numpy as np, qmesh\n"
            "s = qmesh.encode(np.arange(1.0, 9.0))\n"
            "s = qmesh.encode(np.arange(1.0, 9.0))\n"
            "i = qmesh.cache_info()\n"
            "print(i['enabled'], i['entries'], i['hits'])\n")
    env = dict(os.environ, QMESH_CONTEXT_CACHE="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["False", "0", "0"]


def test_kept_context_reuses_a_dropped_states_memory_but_never_an_exported_one():
    """A cached context keeps the device buffers of a state that is gone and hands them to the next
    encode of the shape (docs/python.md); a state still held by an exported tensor is not gone."""
    torch = pytest.importorskip("torch")
    x = np.arange(1.0, 11.0).reshape(2, 5)
    s = qmesh.encode(x)
    ptrs = [sh.data_ptr for sh in s.shards]
    del s
    s2 = qmesh.encode(x[::-1].copy())
    assert [sh.data_ptr for sh in s2.shards] == ptrs  # the simulator's memory, taken again
    assert s2.to_numpy().tobytes() == expected(x[::-1]).tobytes()
    t = torch.from_dlpack(s2.shards[0])  # holds the state: its memory stays the tensor's
    want = t.numpy().tobytes()
    del s2
    s3 = qmesh.encode(x)
    assert t.data_ptr() not in [sh.data_ptr for sh in s3.shards]
    assert t.numpy().tobytes() == want
    assert s3.to_numpy().tobytes() == expected(x).tobytes()
