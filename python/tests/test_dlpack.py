"""DLPack: zero-copy shards, lifetime beyond the State, the capsule protocol, and no leak."""
import gc
import resource

import numpy as np
import pytest

import qmesh

torch = pytest.importorskip("torch")

ROWS = np.array([[1, 2, 3, 4, 5], [0.5, -1.5, 2.5, -3.5, 4.5]])


def test_zero_copy():
    s = qmesh.encode(ROWS)
    sh = s.shards[1]
    a, b = torch.from_dlpack(sh), torch.from_dlpack(sh)
    assert a.data_ptr() == b.data_ptr() == sh.data_ptr
    assert a.dtype == torch.complex128 and a.shape == (8,) and a.device.type == "cpu"
    assert sh.__dlpack_device__() == (1, 0) and sh.cuda_device == -1
    assert np.asarray(a).tobytes() == s.to_numpy()[1].tobytes()
    # a write through one consumer shows through the other and in the state: the same memory
    a[7] = 5 + 6j
    assert b[7] == 5 + 6j and s.to_numpy()[1, 7] == 5 + 6j


def test_lifetime_beyond_state():
    s = qmesh.encode(ROWS)
    want = s.to_numpy()
    t0, t1 = torch.from_dlpack(s.shards[0]), torch.from_dlpack(s.shards[1])
    ptr = t0.data_ptr()
    del s
    gc.collect()
    others = [qmesh.encode(np.full((2, 5), k + 1.0)) for k in range(50)]  # allocate/encode more
    junk = [np.full(4096, 7.0) for _ in range(50)]
    assert t0.data_ptr() == ptr
    assert t0.numpy().tobytes() == want[0].tobytes()
    assert t1.numpy().tobytes() == want[1].tobytes()
    del others, junk


def test_single_shard_state_protocol():
    s = qmesh.encode(ROWS)
    with pytest.raises(qmesh.Error) as e:
        s.__dlpack__()
    assert e.value.code == "E-ARG"
    assert str(e.value) == ("error[E-ARG]: dlpack: the state has 2 shards; export "
                            "state.shards[i], or state.gather() first")
    g = s.gather(0)
    assert g.__dlpack_device__() == (1, 0)
    t = torch.from_dlpack(g)
    assert t.shape == (16,) and t.data_ptr() == g.shards[0].data_ptr
    assert t.numpy().tobytes() == s.to_numpy().reshape(-1).tobytes()


def test_keyword_protocol_and_capsules():
    s = qmesh.encode(ROWS).gather()
    cap = s.__dlpack__(stream=None, max_version=(1, 0))
    assert type(cap).__name__ == "PyCapsule" and "dltensor" in repr(cap)
    del cap  # never consumed: the destructor runs the deleter (no leak: see test_no_leak)
    cap = s.shards[0].__dlpack__(stream=-1, max_version=None, dl_device=(1, 0), copy=False)
    t = torch.utils.dlpack.from_dlpack(cap)  # the consumer renames it used_dltensor
    assert "used_dltensor" in repr(cap)
    del cap
    assert t.numpy().tobytes() == s.to_numpy().tobytes()
    with pytest.raises(BufferError):
        s.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        s.__dlpack__(dl_device=(2, 0))


def _rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() // 1024


def test_no_leak():
    """10,000 encode / export / drop cycles of a tiny batch: resident memory grows by less than
    4 MiB after the first 1,000 (a leak of one state per cycle would be > 10 MiB)."""
    x = np.arange(1, 33, dtype=np.float64).reshape(4, 8)

    def cycle():
        s = qmesh.encode(x)
        t = torch.from_dlpack(s.shards[0])
        cap = s.shards[1].__dlpack__()  # unconsumed
        a = s.to_numpy()
        del s, t, cap, a

    for _ in range(1000):
        cycle()
    gc.collect()
    base = _rss_kib()
    for _ in range(9000):
        cycle()
    gc.collect()
    assert _rss_kib() - base < 4096
