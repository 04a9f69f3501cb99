"""CUDA: a CUDA tensor in (read on the GPU, never through the host), shards as cuda:<GPU>
tensors, byte-identical to the simulator. Skipped without a GPU."""
import numpy as np
import pytest

import qmesh

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device (torch.cuda.is_available() is False)", allow_module_level=True)


@pytest.fixture(autouse=True)
def fresh_backend():
    """Each test's first encode opens its own backend, so traffic() counts only that test's
    copies (the context cache would otherwise hand it a backend used before)."""
    qmesh.clear_cache()
    yield


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_tensor_in_equals_simulator(dtype):
    x = torch.randn(64, 20, dtype=dtype, generator=torch.Generator().manual_seed(3))
    sim = qmesh.encode(x, backend="sim").to_numpy()
    s = qmesh.encode(x.cuda())  # backend auto: CUDA
    assert all(sh.cuda_device >= 0 for sh in s.shards)
    # read on its GPU: no input byte crossed the host link (the backend's copy counters); what
    # comes back is the norms' block sums only (8 bytes each), far less than the data
    t = s.traffic()
    assert t["h2d_bytes"] == 0 and t["d2h_bytes"] < x.numel() * x.element_size() // 4, t
    got = s.to_numpy()
    assert s.traffic()["d2h_bytes"] >= got.nbytes  # the read-back is what crosses it
    assert got.dtype == sim.dtype and got.tobytes() == sim.tobytes()


def test_shards_are_cuda_tensors():
    x = torch.randn(16, 32, dtype=torch.float64).cuda()
    s = qmesh.encode(x)
    host = s.to_numpy().reshape(-1)
    for sh in s.shards:
        assert sh.__dlpack_device__() == (2, sh.cuda_device)
        t = torch.from_dlpack(sh)
        assert t.device == torch.device("cuda", sh.cuda_device)
        assert t.data_ptr() == sh.data_ptr == torch.from_dlpack(sh).data_ptr()
        assert t.cpu().numpy().tobytes() == host[sh.start:sh.end].tobytes()


def test_cuda_lifetime():
    s = qmesh.encode(torch.ones(4, 8, dtype=torch.float64).cuda())
    t = torch.from_dlpack(s.shards[0])
    want = t.cpu().clone()
    del s
    others = [qmesh.encode(torch.full((4, 8), 3.0, device="cuda")) for _ in range(20)]
    assert torch.equal(t.cpu(), want)
    del others


def test_host_input_on_cuda_backend():
    x = np.random.default_rng(5).standard_normal((8, 12))
    s = qmesh.encode(x, backend="cuda")
    assert s.traffic()["h2d_bytes"] >= x.nbytes  # host rows do cross it
    assert s.to_numpy().tobytes() == qmesh.encode(x, backend="sim").to_numpy().tobytes()


@pytest.mark.parametrize("encoding,features", [("angle", 12), ("phase", 12), ("iqp-z", 12),
                                               ("iqp", 78), ("basis", 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_feature_maps_on_cuda_equal_simulator(encoding, features, dtype):
    """Every feature map on the CUDA backend writes the simulator's bytes; iqp's phases are within
    2 ulp per component of the simulator's (CUDA's cos/sin, docs/encodings.md): after the 12
    stages of sums that is at most 2 eps from the phases plus an ulp of a partial sum per stage,
    bounded here by (4 + 2 n) eps absolute."""
    rng = np.random.default_rng(11)
    if encoding == "basis":
        x = rng.integers(0, 4096, size=(32, 1)).astype(dtype)
    else:
        x = (rng.standard_normal((32, features)) * 2).astype(dtype)
    kw = {"qubits": 12} if encoding == "basis" else {}
    sim = qmesh.encode(x, encoding=encoding, backend="sim", **kw).to_numpy()
    got = qmesh.encode(x, encoding=encoding, backend="cuda", **kw).to_numpy()
    assert got.shape == sim.shape == (32, 4096) and got.dtype == sim.dtype
    if encoding == "iqp":
        eps = np.finfo(np.float32 if got.dtype == np.complex64 else np.float64).eps
        assert np.abs(got - sim).max() <= (4 + 2 * 12) * eps
    else:
        assert got.tobytes() == sim.tobytes()
