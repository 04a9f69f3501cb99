"""qmesh -- classical data into quantum state vectors sharded across a mesh of devices.

A thin layer over the C extension ``qmesh._qmesh``, which calls the public C API (include/qmesh.h)
only. docs/python.md describes the package; in short::

    import numpy as np, qmesh, torch
    state = qmesh.encode(np.random.rand(4, 8))       # 4 three-qubit states (complex128)
    amps = state.to_numpy()                         # (4, 8) on the host
    t = torch.from_dlpack(state.shards[0])          # zero-copy, keeps the memory alive

Functions: plan, encode, stream, devices. Classes: Plan, State, Shard, Scenario, Stream,
QuantumDataLoader, Error, RunError.
"""
import json as _json
import math as _math
import os as _os

from . import _qmesh
from ._qmesh import Error, RunError, Scenario, Shard, State, Stream

__all__ = ["plan", "encode", "stream", "devices", "clear_cache", "cache_info", "Plan", "State",
           "Shard", "Scenario", "Stream", "QuantumDataLoader", "Error", "RunError", "__version__"]

__version__ = "%d.%d.%d" % (_qmesh.VERSION_MAJOR, _qmesh.VERSION_MINOR, _qmesh.VERSION_PATCH)

_DTYPES = ("complex64", "complex128")
_builtin = None  # the built-in scenario, loaded once (scenarios are read-only: safe to share)
_loaded = {}     # scenario files loaded before: (realpath, inode, size, mtime) -> Scenario
_LOADED_MAX = 8


def _fail(code, message):
    """Raise qmesh.Error (or RunError) with the library's code and one-line message."""
    _qmesh._raise(code, message)


def _scenario(scenario):
    """A Scenario from None (the built-in mesh), a Scenario, a path or YAML text."""
    global _builtin
    if scenario is None:
        if _builtin is None:
            _builtin = Scenario()
        return _builtin
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, _os.PathLike):
        return _load(_os.fspath(scenario))
    if isinstance(scenario, str):
        # YAML text has a newline or a "key:" mapping; a path has neither (or exists)
        if "\n" in scenario and not _os.path.exists(scenario):
            return Scenario.from_yaml(scenario)
        return _load(scenario)
    raise TypeError("scenario must be None, a qmesh.Scenario, a path or YAML text (got %s)"
                    % type(scenario).__name__)


def _load(path):
    """Scenario.load(path), reused while the file is unchanged (same inode, size and mtime), so
    that a loop passing the same path loads it once and its encodes find their kept context."""
    try:
        st = _os.stat(path)
    except OSError:
        return Scenario.load(path)  # the library's own E-IO message
    key = (_os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns)
    sc = _loaded.get(key)
    if sc is None:
        sc = Scenario.load(path)
        if len(_loaded) >= _LOADED_MAX:
            _loaded.pop(next(iter(_loaded)))
        _loaded[key] = sc
    return sc


def clear_cache():
    """Forget the kept contexts (planned requests with an open backend) and loaded scenario files.

    qmesh.encode keeps the context of each (scenario, request, backend) it ran, up to 4, so that
    the next encode of the same shape skips planning and opening the backend; this releases what
    they hold (on CUDA: streams and page-locked staging). States already made stay valid. Set
    QMESH_CONTEXT_CACHE=0 before importing qmesh to keep nothing.
    """
    _loaded.clear()
    _qmesh.clear_cache()


def cache_info():
    """The context cache as a dict: enabled, entries, slots, hits, misses."""
    return _qmesh.cache_info()


def _uint(name, value, code="E-ARG"):
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise TypeError("%s must be an integer (got %r)" % (name, value)) from None
    if v != value or v < 0:
        _fail(code, "plan: %s must be a non-negative integer (got %r)" % (name, value))
    return v


_ENCODINGS = ("amplitude", "angle", "basis", "phase", "iqp", "iqp-z")


def _qubits_for(features, encoding="amplitude"):
    """The qubit count the CLI chooses for `features` values per row: amplitude the smallest n
    with 2**n >= features (at least 1); angle, phase and iqp-z n = features; iqp the n with
    n + n(n-1)/2 = features (None when there is none); basis has none (its value is an index)."""
    f = int(features)
    if encoding in ("angle", "phase", "iqp-z"):
        return f
    if encoding == "iqp":
        for n in range(1, 64):
            if n + n * (n - 1) // 2 == f:
                return n
        n = 1
        while n < 63 and (n + 1) + (n + 1) * n // 2 < f:
            n += 1
        lo, hi = n + n * (n - 1) // 2, (n + 1) + (n + 1) * n // 2
        if n < 63 and f > lo:
            _fail("E-INPUT", "plan: %d values per sample make no iqp state (n qubits take "
                  "n + n(n-1)/2 values: %d for %d, %d for %d)" % (f, lo, n, hi, n + 1))
        _fail("E-INPUT", "plan: %d values per sample make no iqp state (n qubits take "
              "n + n(n-1)/2 values: at most %d, for 63)" % (f, lo))
    return max(1, (f - 1).bit_length())


def _request(scenario, qubits, dtype, policy, batch, features, ranks, encoding, gather="auto"):
    """The request tuple of the C extension, with the CLI's defaults applied."""
    if features is not None:
        features = _uint("features", features, "E-INPUT")
    if qubits is None:
        if features is None:
            _fail("E-QUBITS", "plan: qubits is required (or features, to choose the smallest "
                  "qubit count that holds them)")
        qubits = _qubits_for(features, str(encoding))
    qubits = _uint("qubits", qubits, "E-QUBITS")
    if dtype is None:
        dtype = "complex64"
    dtype = getattr(dtype, "name", None) or str(dtype)  # numpy / torch dtypes
    dtype = dtype.replace("torch.", "")
    return (_scenario(scenario), qubits, dtype, str(policy),
            1 if batch is None else _uint("batch", batch), 0 if features is None else features,
            0 if ranks is None else _uint("ranks", ranks, "E-RANK"), str(encoding), str(gather))


class Plan:
    """A request planned on a scenario's devices: what ``qmesh plan --json`` prints.

    Attributes (the JSON object's keys): ``feasible`` (bool), ``error`` (None, or a dict with
    ``code`` and ``message``), ``shards`` (list of dicts: shard, rank, device, start, end, bytes),
    ``devices`` (per-device usable, planned, shard, staging and headroom bytes), ``gather`` (dict:
    feasible, target, reason), ``max_qubits`` ({"complex64": n, "complex128": n}),
    ``estimates_s`` (seconds per phase), ``plan_hash`` (str), ``policy`` (the policy used),
    ``request``, ``scenario``, ``global_amplitudes``, ``state_bytes``, ``pages``.
    ``to_dict()`` returns the whole object; ``repr()`` a summary like the CLI's table.
    """

    def __init__(self, data):
        self._d = data
        for k, v in data.items():
            setattr(self, k, v)

    @classmethod
    def from_json(cls, text):
        """A Plan from the JSON text of qm_context_plan_json / ``qmesh plan --json``."""
        return cls(_json.loads(text))

    def to_dict(self):
        """The plan as a dict, equal to ``json.loads`` of ``qmesh plan --json``'s output."""
        return _json.loads(_json.dumps(self._d))

    def __eq__(self, other):
        return isinstance(other, Plan) and self._d == other._d

    def __repr__(self):
        d, r = self._d, self._d["request"]
        lines = ["scenario: %s" % d["scenario"],
                 "request:  %d qubits, %s, policy %s (used: %s), batch %d, features %d, %d ranks"
                 % (r["qubits"], r["dtype"], r["policy"], d["policy"], r["batch"], r["features"],
                    r["ranks"]),
                 "state:    %d amplitudes, %s, %d pages" % (d["global_amplitudes"],
                                                           _bytes(d["state_bytes"]), d["pages"]),
                 "feasible: %s" % ("yes" if d["feasible"] else
                                   "no: error[%s]: %s" % (d["error"]["code"],
                                                          d["error"]["message"])),
                 "",
                 "%-6s %-5s %-20s %22s %22s %12s" % ("shard", "rank", "device", "start", "end",
                                                     "bytes")]
        shards = d["shards"]
        for s in shards[:16]:
            lines.append("%-6d %-5d %-20s %22d %22d %12s" % (s["shard"], s["rank"], s["device"],
                                                             s["start"], s["end"],
                                                             _bytes(s["bytes"])))
        if len(shards) > 16:
            lines.append("... %d more shards" % (len(shards) - 16))
        g = d["gather"]
        lines += ["",
                  "gather:   %s%s (%s)" % ("feasible to " if g["feasible"] else "not feasible",
                                          g["target"] or "", g["reason"]),
                  "frontier: complex64 up to %d qubits, complex128 up to %d qubits"
                  % (d["max_qubits"]["complex64"], d["max_qubits"]["complex128"]),
                  "estimates: " + ", ".join("%s %.3g s" % (k, v) if v is not None else k + " n/a"
                                            for k, v in d["estimates_s"].items()),
                  "plan_hash: %s" % d["plan_hash"]]
        return "\n".join(lines)


def _bytes(n):
    """Bytes as the CLI prints them: "512 B", "8.00 GiB"."""
    if n < 1024:
        return "%d B" % n
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        n /= 1024.0
        if n < 1024 or unit == "EiB":
            return "%.2f %s" % (n, unit)


_qmesh._set_plan_factory(Plan.from_json)


def _file_request(path, scenario, qubits, dtype, policy, encoding):
    """The request of an input file as encode(path) makes it, and the output's ndim."""
    rows, features, ndim, in_dtype = _qmesh.file_shape(path)
    if encoding == "basis":  # one index per sample: B rows of 1
        if ndim == 2 and features != 1:
            _fail("E-INPUT", "encode: the basis encoding takes one index per sample (shape "
                  "(B,) or (B, 1)), got %d columns" % features)
        if qubits is None:
            _fail("E-QUBITS", "encode: a basis file needs qubits= (or pass the indices as "
                  "an array: the largest one then sets the qubit count)")
        rows, features, ndim = rows * features, 1, 2
    if dtype is None:
        dtype = "complex128" if in_dtype == "float64" else "complex64"
    return _request(scenario, qubits, dtype, policy, rows, features, None, encoding), ndim


def plan(qubits=None, dtype=None, policy="auto", scenario=None, batch=None, features=None,
         ranks=None, encoding="amplitude", gather="auto", input=None, out=None, out_dir=None,
         backend="cuda"):
    """Plan a request on a scenario's devices without encoding anything.

    qubits:   2**qubits amplitudes per state; None: the smallest count that holds `features`.
    dtype:    "complex64" (default) or "complex128".
    policy:   "auto", "single", "equal", "weighted", "balanced" or "replicated".
    scenario: None (the built-in simulated mesh), a qmesh.Scenario, a YAML file path or YAML text.
    batch:    states (input rows), default 1; features: values per row, default 2**qubits.
    ranks:    use the scenario's first k ranks (default all); encoding: "amplitude", "angle",
              "basis", "phase", "iqp" or "iqp-z" (docs/encodings.md); gather: "auto", "host",
              "none" or a device id.
    input:    a .npy, HDF5 or CSV file: the request is made from it as encode(path) makes it
              (batch and features then come from the file), and estimates_s gains the data path:
              read and staging (docs/planner.md "Data path"); out (a .npy path) or out_dir (a
              directory) adds write; nothing is written. backend: "cuda" (staging over the host
              links, the default) or "sim" (the simulator's host copy).

    Returns a Plan (feasible or not: an infeasible plan says why in .error and is not raised).
    Raises qmesh.Error for an invalid request (E-QUBITS, E-DTYPE, E-POLICY, E-INPUT, E-RANK,
    E-ARG) or scenario (the loader's codes). The GIL is released while planning.
    """
    if out is not None and out_dir is not None:
        _fail("E-ARG", "plan: out and out_dir exclude each other")
    if backend not in ("sim", "cuda"):
        _fail("E-ARG", "plan: unknown backend '%s'; use sim or cuda" % backend)
    output = out if out is not None else out_dir
    output = None if output is None else _os.fsdecode(_os.fspath(output))
    if input is not None:
        if batch is not None or features is not None:
            _fail("E-ARG", "plan: input gives the batch and features; drop %s"
                  % ("batch" if batch is not None else "features"))
        path = _os.fsdecode(_os.fspath(input))
        req, _ = _file_request(path, scenario, qubits, dtype, policy, str(encoding))
        req = req[:6] + (0 if ranks is None else _uint("ranks", ranks, "E-RANK"), str(encoding),
                         str(gather))
        return Plan.from_json(_qmesh.plan_json(req, path, output, out_dir is not None,
                                               backend == "cuda"))
    req = _request(scenario, qubits, dtype, policy, batch, features, ranks, encoding, gather)
    return Plan.from_json(_qmesh.plan_json(req, None, output, out_dir is not None,
                                           backend == "cuda"))


def devices(backend="auto"):
    """The devices qmesh would use, as ``qmesh devices`` lists them: a list of dicts (index, id,
    name, memory_bytes, usable_bytes, hbm_bw_bytes_per_s, cuda_device, backend). backend "auto":
    the visible CUDA GPUs when there is one, else the built-in simulated mesh; "sim" the built-in
    mesh; "cuda" the GPUs (qmesh.RunError E-UNSUPPORTED without one)."""
    return _qmesh.devices(backend)


def _check_ndim(ndim):
    """1-D (one state) and 2-D (a batch) only, as the CLI reads files: a 0-D scalar is refused,
    not taken as one feature (E-INPUT)."""
    if ndim not in (1, 2):
        _fail("E-INPUT", "encode: the input has %d dimensions; use 1 (one state) or 2 (rows are "
              "a batch)" % ndim)


def _float_array(np, a):
    """float32/float64 stay; other real numeric dtypes (ints, bools, float16) become float64;
    complex and non-numeric data are refused (E-DTYPE), then any shape but 1-D and 2-D (E-INPUT:
    checked here, as np.ascontiguousarray would make a 0-D array 1-D)."""
    if a.dtype.kind not in "biuf":
        _fail("E-DTYPE", "encode: input dtype must be real numeric (float32 and float64 are used "
              "as they are, other integer and float types become float64; got %s)" % a.dtype)
    _check_ndim(a.ndim)
    if a.dtype.kind == "f" and a.dtype.itemsize in (4, 8):
        return np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("="))
    return np.ascontiguousarray(a, dtype=np.float64)


def _basis_int_qubits(np, a, qubits):
    """Integer basis indices checked as integers (never rounded through float64), as the C
    library checks an integer .npy file: a negative index, or one >= 2**qubits when qubits is
    given, is E-INPUT naming the sample; without qubits, the fewest that hold the largest index."""
    flat = a.ravel()
    if a.dtype.kind == "i" and int(flat.min()) < 0:
        i = int(np.argmax(flat < 0))
        _fail("E-INPUT", "encode: sample %d: basis index %d is not a non-negative integer"
              % (i, int(flat[i])))
    top = int(flat.max())
    if qubits is None:
        return max(1, top.bit_length())
    if isinstance(qubits, int) and 0 < qubits < 64 and top >= 1 << qubits:
        i = next(k for k, x in enumerate(flat.tolist()) if x >= 1 << qubits)
        _fail("E-INPUT", "encode: sample %d: basis index %d is not an integer in [0, %d) "
              "(%d qubits)" % (i, int(flat[i]), 1 << qubits, qubits))
    return qubits


def _torch_tensor(data):
    """The object when it is a torch.Tensor (without importing torch when it is not loaded)."""
    import sys
    torch = sys.modules.get("torch")
    return torch if torch is not None and isinstance(data, torch.Tensor) else None


def _torch_readable(data):
    """A tensor on the CPU or a CUDA device as it is; one on another device (mps, xpu, ...)
    copied to the CPU; a 'meta' tensor, which has a shape but no values, refused (E-INPUT)."""
    kind = data.device.type
    if kind == "meta":
        _fail("E-INPUT", "encode: the tensor (shape %s) is on the 'meta' device: it has a shape "
              "but no values; create it on 'cpu' or 'cuda'" % (tuple(data.shape),))
    return data if kind in ("cpu", "cuda") else data.cpu()


def encode(data, qubits=None, dtype=None, encoding="amplitude", policy="auto", scenario=None,
           backend="auto"):
    """Encode data: with the default amplitude encoding each row x becomes the state x / ||x||,
    zero padded to 2**qubits; angle, basis and phase as docs/encodings.md defines them.

    data: a NumPy array (1-D = one state, 2-D = rows are a batch), anything with the buffer
          protocol or __array_interface__, a list, an object with __dlpack__ (torch CPU/CUDA
          tensors, CuPy, JAX), or a path (str / os.PathLike) of a .npy, CSV or .csv.gz file.
          float32 and float64 are used as they are; other integer/float dtypes become float64;
          non-contiguous arrays are made contiguous. CUDA tensors are read in place on the GPU
          (qm_context_encode_device: never copied through the host), CPU DLPack tensors in place.
    qubits: None = the smallest n with 2**n >= features (amplitude), the feature count (angle,
          phase, iqp-z), the n with n + n(n-1)/2 = features (iqp), the fewest qubits that hold the
          largest index (basis).
    dtype: None = complex128 for float64 input, complex64 for float32 (the CLI's rule).
    encoding: "amplitude", "angle", "basis" (one index per row: a 1-D array of B indices is B
          rows), "phase", "iqp" or "iqp-z" (docs/encodings.md).
    policy, scenario: as plan(). backend: "auto" (CUDA for a CUDA tensor, else the simulator),
          "sim" (a CUDA torch tensor is then copied to the host first) or "cuda".

    Returns a State. Raises qmesh.Error: E-INPUT (NaN/Inf, an all-zero row, more features than
    amplitudes), E-QUBITS, E-DTYPE, E-POLICY, E-CAPACITY and the other planner codes of an
    infeasible plan (with the Plan as .plan); qmesh.RunError for E-IO, E-BACKEND, E-UNSUPPORTED.
    The GIL is released while planning, opening the backend and encoding; Ctrl-C is checked
    between those phases (KeyboardInterrupt, nothing leaked).
    """
    if encoding not in _ENCODINGS:
        _fail("E-ARG", "plan: unknown encoding '%s'; use one of %s"
              % (encoding, ", ".join(_ENCODINGS)))
    if backend not in ("auto", "sim", "cuda"):
        _fail("E-ARG", "backend: unknown backend '%s'; use auto, sim or cuda" % backend)
    # files: the C library reads them (npy: header first; CSV: whole)
    if isinstance(data, (str, bytes, _os.PathLike)):
        path = _os.fsdecode(_os.fspath(data))
        req, ndim = _file_request(path, scenario, qubits, dtype, policy, encoding)
        return _qmesh.encode_file(req, backend, path, ndim)
    torch = _torch_tensor(data)
    if torch is not None:
        data = _torch_readable(data)
        if data.is_complex():
            _fail("E-DTYPE", "encode: input dtype must be real numeric (float32 and float64 are "
                  "used as they are, other integer and float types become float64; got %s)"
                  % str(data.dtype).replace("torch.", ""))
        if data.dtype not in (torch.float32, torch.float64):
            data = data.to(torch.float64)
        if data.is_cuda and backend == "sim":
            data = data.cpu()
        data = data.detach().contiguous()
        _check_ndim(data.dim())
        if data.numel() == 0:
            _fail("E-INPUT", "encode: empty input (shape %s): nothing to encode"
                  % (tuple(data.shape),))
        if data.is_cuda:  # the encode reads it on the library's own streams
            torch.cuda.current_stream(data.device).synchronize()
        if encoding == "basis":  # the indices are needed on the host to size the state
            data = data.cpu()
        if data.is_cuda:
            return _encode_dlpack(data, qubits, dtype, policy, scenario, backend, encoding)
        return encode(data.numpy(), qubits, dtype, encoding, policy, scenario, backend)
    if hasattr(data, "__dlpack__") and not hasattr(data, "__array_interface__") \
            and not hasattr(data, "__array__") and encoding != "basis":
        return _encode_dlpack(data, qubits, dtype, policy, scenario, backend, encoding)
    if hasattr(data, "__dlpack_device__") and hasattr(data, "__dlpack__"):
        try:
            dev = data.__dlpack_device__()[0]
        except Exception:  # noqa: BLE001 - not a usable DLPack producer: fall through to NumPy
            dev = None
        if dev in (2, 13) and encoding != "basis":  # kDLCUDA, kDLCUDAManaged (CuPy, JAX)
            return _encode_dlpack(data, qubits, dtype, policy, scenario, backend, encoding)
    import numpy as np
    try:
        a = np.asarray(data)
    except ValueError:  # ragged nested lists
        _fail("E-INPUT", "encode: the input is not a rectangular array of numbers (rows of "
              "different lengths)")
    if encoding == "basis" and a.dtype.kind in "iu" and a.ndim in (1, 2) and a.size:
        qubits = _basis_int_qubits(np, a, qubits)  # exact: before any float64 conversion
    a = _float_array(np, a)
    if a.size == 0:
        _fail("E-INPUT", "encode: empty input (shape %s): nothing to encode" % (a.shape,))
    rows, features = (1, a.shape[0]) if a.ndim == 1 else a.shape
    ndim = a.ndim
    if encoding == "basis":
        if ndim == 2 and features != 1:
            _fail("E-INPUT", "encode: the basis encoding takes one index per sample (shape (B,) "
                  "or (B, 1)), got %d columns" % features)
        rows, features, ndim = a.size, 1, 2
        if qubits is None and a.size:
            top = a.max()
            bad = ~((a >= 0) & (a == np.floor(a)) & (a < 2.0 ** 62))
            if bad.any():
                i = int(np.argmax(bad.ravel()))
                _fail("E-INPUT", "encode: sample %d: basis index %.17g is not a non-negative "
                      "integer" % (i, a.ravel()[i]))
            qubits = max(1, int(top).bit_length())
    if dtype is None:
        dtype = "complex128" if a.dtype == np.float64 else "complex64"
    req = _request(scenario, qubits, dtype, policy, rows, features, None, encoding)
    return _qmesh.encode_host(req, backend, a, rows, features, a.dtype.name, ndim)


def _encode_dlpack(data, qubits, dtype, policy, scenario, backend, encoding="amplitude"):
    """A DLPack producer's tensor, read in place (CUDA memory through qm_context_encode_device)."""
    shape = tuple(getattr(data, "shape", ()))
    _check_ndim(len(shape))
    rows, features = (1, shape[0]) if len(shape) == 1 else shape
    if dtype is None:
        name = str(getattr(data, "dtype", ""))
        dtype = "complex64" if name.endswith("float32") else "complex128"
    req = _request(scenario, qubits, dtype, policy, int(rows), int(features), None, encoding)
    return _qmesh.encode_dlpack(req, backend, data.__dlpack__())


def stream(data, batch_size, qubits=None, dtype=None, encoding="amplitude", prefetch=2,
           scenario=None, backend="auto", policy="auto"):
    """Encode data batch by batch: an iterator (a qmesh.Stream) of States, one per batch of up to
    batch_size samples, in order; together they are byte for byte ``encode(data, ...)``.

    data: a path (str / os.PathLike) of a .npy file (read batch by batch: the file may be larger
          than memory), an HDF5 file (its only dataset) or a CSV file (parsed whole when the
          stream opens); or an array (2-D rows, or anything encode() takes on the host: it is
          kept, not copied, while the stream lives).
    batch_size: samples per batch (>= 1; more than the data: one batch).
    prefetch: batches a reader thread reads ahead while one is encoded (0..64; 0: no thread). The
          input held in host memory is at most prefetch + 1 batches.
    qubits, dtype, encoding, scenario, backend, policy: as encode() (qubits None: the library
          chooses them from the input as `qmesh encode` does, basis included).
    Each State is independent: it stays valid after the iterator moves on or is closed, and
    exports by DLPack (torch.from_dlpack(state.shards[0])). The GIL is released while a batch is
    read and encoded. Errors: qmesh.Error at the call for a bad request, option or file (E-ARG
    "stream: batch_size must be at least 1 (got 0)"); during the iteration for a bad value, named
    by its sample's index in the whole input, after which the stream stays failed. len() is the
    number of batches; .info() the counters (input_bytes_peak, seconds_read, ...); close() (or a
    with block, or dropping the iterator) stops the reader and frees its buffers.
    """
    if encoding not in _ENCODINGS:
        _fail("E-ARG", "plan: unknown encoding '%s'; use one of %s"
              % (encoding, ", ".join(_ENCODINGS)))
    if backend not in ("auto", "sim", "cuda"):
        _fail("E-ARG", "backend: unknown backend '%s'; use auto, sim or cuda" % backend)
    bs = _uint("batch_size", batch_size)
    pf = int(prefetch)
    if pf != prefetch:
        raise TypeError("prefetch must be an integer (got %r)" % (prefetch,))
    if isinstance(data, (str, bytes, _os.PathLike)):
        path = _os.fsdecode(_os.fspath(data))
        rows, features, ndim, in_dtype = _qmesh.file_shape(path)
        if encoding == "basis":
            ndim = 2
        if dtype is None:
            dtype = "complex128" if in_dtype == "float64" else "complex64"
        req = _request(scenario, 0 if qubits is None else qubits, dtype, policy, 1, None, None,
                       encoding)
        return _qmesh.stream_open(req, backend, path, rows, features, in_dtype, ndim, bs, pf)
    torch = _torch_tensor(data)
    if torch is not None:
        data = _torch_readable(data).detach().cpu().numpy()
    import numpy as np
    a = _float_array(np, np.asarray(data))
    if a.size == 0:
        _fail("E-INPUT", "encode: empty input (shape %s): nothing to encode" % (a.shape,))
    rows, features = (1, a.shape[0]) if a.ndim == 1 else a.shape
    ndim = a.ndim
    if encoding == "basis":  # one index per sample: a 1-D array of B indices is B samples
        rows, features, ndim = (a.size, 1, 2) if a.ndim == 1 else (rows, features, 2)
    if dtype is None:
        dtype = "complex128" if a.dtype == np.float64 else "complex64"
    req = _request(scenario, 0 if qubits is None else qubits, dtype, policy, 1, None, None,
                   encoding)
    return _qmesh.stream_open(req, backend, a, rows, features, a.dtype.name, ndim, bs, pf)


class QuantumDataLoader:
    """A re-iterable loader of encoded batches, for a training loop::

        loader = qmesh.QuantumDataLoader("train.npy", batch_size=256, qubits=10)
        for epoch in range(3):
            for state in loader:                      # a fresh qmesh.stream() per epoch
                x = torch.from_dlpack(state.shards[0]).view(state.shape)

    Arguments as qmesh.stream(). len(loader) is the number of batches per epoch.
    """

    def __init__(self, data, batch_size, qubits=None, dtype=None, encoding="amplitude",
                 prefetch=2, scenario=None, backend="auto", policy="auto"):
        self._args = (data, batch_size)
        self._kw = dict(qubits=qubits, dtype=dtype, encoding=encoding, prefetch=prefetch,
                        scenario=scenario, backend=backend, policy=policy)
        with stream(data, batch_size, **self._kw) as s:  # checks the arguments now
            self._len = len(s)

    def __iter__(self):
        return stream(*self._args, **self._kw)

    def __len__(self):
        return self._len
