"""Every error path: the class, .code and the one line the CLI prints (qm_status_format)."""
import numpy as np
import pytest

import qmesh


def raises(code, line, fn, *a, cls=qmesh.Error, **kw):
    with pytest.raises(cls) as e:
        fn(*a, **kw)
    assert e.value.code == code
    assert str(e.value) == line and e.value.message == line
    return e.value


def test_classes():
    assert issubclass(qmesh.Error, ValueError)
    assert issubclass(qmesh.RunError, qmesh.Error) and issubclass(qmesh.RunError, RuntimeError)


def test_input_errors():
    raises("E-INPUT", "error[E-INPUT]: encode: zero or non-finite norm: all 4 input values are "
           "zero", qmesh.encode, np.zeros(4))
    with pytest.raises(qmesh.Error) as e:
        qmesh.encode([1.0, float("nan"), 2.0])
    assert e.value.code == "E-INPUT" and "non-finite" in str(e.value) and "1" in str(e.value)
    raises("E-INPUT", "error[E-INPUT]: request: 5 features exceed the state vector size 2 (1 "
           "qubits); use at least 3 qubits", qmesh.encode, [1, 2, 3, 4, 5], qubits=1)
    raises("E-INPUT", "error[E-INPUT]: encode: the input has 3 dimensions; use 1 (one state) or "
           "2 (rows are a batch)", qmesh.encode, np.ones((2, 2, 2)))
    # a 0-D scalar is refused as the CLI refuses a 0-D .npy file, not taken as one feature
    # (np.ascontiguousarray makes a 0-D array 1-D), by encode, stream and with basis too
    zero_d = "error[E-INPUT]: encode: the input has 0 dimensions; use 1 (one state) or 2 (rows " \
        "are a batch)"
    raises("E-INPUT", zero_d, qmesh.encode, np.array(5.0))
    raises("E-INPUT", zero_d, qmesh.encode, 5.0)
    raises("E-INPUT", zero_d, qmesh.encode, np.int64(3), encoding="basis", qubits=2)
    raises("E-INPUT", zero_d, qmesh.stream, np.array(5.0), batch_size=1)
    # what is not an array of numbers at all is a dtype error first, whatever its shape
    raises("E-DTYPE", "error[E-DTYPE]: encode: input dtype must be real numeric (float32 and "
           "float64 are used as they are, other integer and float types become float64; got "
           "object)", qmesh.encode, None)
    raises("E-DTYPE", "error[E-DTYPE]: encode: input dtype must be real numeric (float32 and "
           "float64 are used as they are, other integer and float types become float64; got "
           "complex128)", qmesh.encode, np.ones(4, np.complex128))
    raises("E-INPUT", "error[E-INPUT]: encode: empty input (shape (0,)): nothing to encode",
           qmesh.encode, [])
    raises("E-INPUT", "error[E-INPUT]: encode: empty input (shape (3, 0)): nothing to encode",
           qmesh.encode, np.zeros((3, 0)))
    raises("E-INPUT", "error[E-INPUT]: encode: the input is not a rectangular array of numbers "
           "(rows of different lengths)", qmesh.encode, [[1, 2], [3]])


def test_torch_meta_tensor():
    """A 'meta' tensor has a shape and no values: refused by encode and stream alike, not a
    TypeError from the conversion to NumPy."""
    torch = pytest.importorskip("torch")
    line = "error[E-INPUT]: encode: the tensor (shape (2, 4)) is on the 'meta' device: it has a " \
        "shape but no values; create it on 'cpu' or 'cuda'"
    raises("E-INPUT", line, qmesh.encode, torch.empty(2, 4, device="meta"))
    raises("E-INPUT", line, qmesh.stream, torch.empty(2, 4, device="meta"), batch_size=1)


def test_request_errors(cli):
    raises("E-DTYPE", "error[E-DTYPE]: plan: dtype must be complex64 or complex128 (got "
           "'float16')", qmesh.encode, [1, 2], dtype="float16")
    p = cli("plan", "--qubits", 3, "--policy", "diagonal", check=False)
    line = p.stderr.strip().splitlines()[-1]
    raises("E-POLICY", line, qmesh.plan, qubits=3, policy="diagonal")
    raises("E-QUBITS", "error[E-QUBITS]: plan: qubits is required (or features, to choose the "
           "smallest qubit count that holds them)", qmesh.plan)
    p = cli("plan", "--qubits", 0, check=False)
    raises("E-QUBITS", p.stderr.strip().splitlines()[-1], qmesh.plan, qubits=0)
    p = cli("plan", "--qubits", 3, "--ranks", 5, check=False)
    raises("E-RANK", p.stderr.strip().splitlines()[-1], qmesh.plan, qubits=3, ranks=5)
    raises("E-ARG", "error[E-ARG]: backend: unknown backend 'tpu'; use auto, sim or cuda",
           qmesh.encode, [1, 2], backend="tpu")
    raises("E-INPUT", "error[E-INPUT]: plan: 4 values per sample make no iqp state (n qubits "
           "take n + n(n-1)/2 values: 3 for 2, 6 for 3)", qmesh.encode, [[1, 2, 3, 4]],
           encoding="iqp")
    raises("E-ARG", "error[E-ARG]: plan: unknown encoding 'fourier'; use one of amplitude, angle, "
           "basis, phase, iqp, iqp-z", qmesh.encode, [1, 2], encoding="fourier")
    raises("E-INPUT", "error[E-INPUT]: encode: sample 1: basis index 2.5 is not a non-negative "
           "integer", qmesh.encode, [1, 2.5], encoding="basis")
    raises("E-QUBITS", "error[E-QUBITS]: plan: qubits must be a non-negative integer (got -3)",
           qmesh.plan, qubits=-3)


def test_infeasible_encode_has_plan(cli):
    with pytest.raises(qmesh.Error) as e:
        qmesh.encode(np.ones(4), qubits=40, dtype="complex128")
    err = e.value
    assert err.code == "E-CAPACITY" and not isinstance(err, RuntimeError)
    assert isinstance(err.plan, qmesh.Plan) and err.plan.feasible is False
    assert err.plan.error["code"] == "E-CAPACITY"
    assert str(err) == "error[E-CAPACITY]: " + err.plan.error["message"]
    p = cli("plan", "--qubits", 40, "--dtype", "complex128", "--features", 4, check=False)
    assert p.returncode == 1 and p.stderr.strip().splitlines()[-1] == str(err)


def test_scenario_errors(tmp_path, cli):
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema: qmesh/1\nhosts: [\n")
    p = cli("plan", "--qubits", 3, "--scenario", bad, check=False)
    line = p.stderr.strip().splitlines()[0]
    e = raises(line.split("]")[0].split("[")[1], line, qmesh.Scenario.load, str(bad))
    assert e.code == "E-YAML-SYNTAX"
    raises(e.code, line, qmesh.plan, qubits=3, scenario=str(bad))
    with pytest.raises(qmesh.Error) as e2:
        qmesh.Scenario.from_yaml("schema: qmesh/1\nhosts: [\n", name="inline.yaml")
    assert e2.value.code == "E-YAML-SYNTAX" and str(e2.value).startswith("inline.yaml:")
    with pytest.raises(qmesh.RunError) as e3:
        qmesh.Scenario.load(str(tmp_path / "missing.yaml"))
    assert e3.value.code == "E-IO"


def test_file_errors(tmp_path, cli):
    missing = tmp_path / "missing.npy"
    p = cli("encode", "--input", missing, "--out", tmp_path / "o.npy", check=False)
    line = p.stderr.strip().splitlines()[-1]
    e = raises("E-IO", line, qmesh.encode, missing, cls=qmesh.RunError)
    assert isinstance(e, RuntimeError)
    text = tmp_path / "t.csv"
    text.write_text("1,2\n3,x\n")
    p = cli("encode", "--input", text, "--out", tmp_path / "o.npy", check=False)
    raises("E-INPUT", p.stderr.strip().splitlines()[-1], qmesh.encode, text)


def test_state_errors():
    s = qmesh.encode(np.ones((2, 4)))
    raises("E-ARG", "error[E-ARG]: gather: device 9 is out of range (the mesh has 4 devices)",
           s.gather, 9)
    if not _have_gpu():
        with pytest.raises(qmesh.RunError) as e:
            qmesh.devices("cuda")
        assert e.value.code == "E-UNSUPPORTED"
    raises("E-ARG", "error[E-ARG]: backend: unknown backend 'x'; use auto, sim or cuda",
           qmesh.devices, "x")


def _have_gpu():
    return any(d["backend"] == "cuda" for d in qmesh.devices())
