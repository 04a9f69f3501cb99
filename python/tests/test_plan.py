"""qmesh.plan against `qmesh plan --json` on every scenario of the library; Scenario; devices."""
import glob
import json
import os

import pytest

import qmesh


def cli_plan(text):
    """The plan object of `qmesh plan --json`: its output less the command line's own members
    (ok, command, max: the answer of `plan --max`, and phantom: `plan --phantom`'s accounting; both
    null for a plain plan), which the API's plan does not have."""
    d = json.loads(text)
    assert d.pop("command") == "plan" and d.pop("ok") == (d["error"] is None)
    assert d.pop("max") is None
    assert d.pop("phantom") is None
    return d


def scenario_files(source_dir):
    files = sorted(glob.glob(os.path.join(source_dir, "scenarios", "*.yaml")))
    assert len(files) >= 10
    return files


@pytest.mark.parametrize("qubits,dtype,batch", [(30, "complex64", None),
                                                (34, "complex128", None), (8, "complex64", 64)])
def test_every_scenario_equals_cli(cli, source_dir, qubits, dtype, batch):
    for path in scenario_files(source_dir):
        args = ["plan", "--json", "--scenario", path, "--qubits", qubits, "--dtype", dtype]
        if batch:
            args += ["--batch", batch]
        p = cli(*args, check=False)
        want = cli_plan(p.stdout)
        got = qmesh.plan(qubits=qubits, dtype=dtype, scenario=path, batch=batch)
        assert got.to_dict() == want, path
        assert got.feasible == want["feasible"] == (p.returncode == 0)
        assert got.shards == want["shards"] and got.devices == want["devices"]
        assert got.gather == want["gather"] and got.max_qubits == want["max_qubits"]
        assert got.estimates_s == want["estimates_s"] and got.plan_hash == want["plan_hash"]
        # the same scenario as a Scenario object and as YAML text plans the same layout
        sc = qmesh.Scenario.load(path)
        assert sc.name == path and sc.validate() is sc
        assert qmesh.plan(qubits=qubits, dtype=dtype, scenario=sc, batch=batch) == got
        with open(path) as f:
            text = qmesh.plan(qubits=qubits, dtype=dtype, scenario=f.read(), batch=batch)
        assert text.plan_hash == got.plan_hash and text.shards == got.shards


def test_builtin_and_options(cli):
    want = cli_plan(cli("plan", "--json", "--qubits", 3, "--batch", 2, "--features", 5,
                        "--policy", "single", "--gather", "host").stdout)
    got = qmesh.plan(qubits=3, batch=2, features=5, policy="single", gather="host")
    assert got.to_dict() == want and got.policy == "single"
    assert qmesh.plan(features=5, batch=2).to_dict()["request"]["qubits"] == 3  # qubits from features
    r = repr(got)
    assert r.startswith("scenario: <built-in>\nrequest:  3 qubits, complex64, policy single")
    assert "feasible: yes" in r and "plan_hash: " + got.plan_hash in r


def test_infeasible_plan_is_returned(cli):
    p = qmesh.plan(qubits=40)
    assert p.feasible is False and p.error["code"] == "E-CAPACITY"
    assert "feasible: no: error[E-CAPACITY]" in repr(p)


def test_scenario_objects(source_dir):
    b = qmesh.Scenario()
    assert b.name == "<built-in>" and repr(b) == "qmesh.Scenario('<built-in>')"
    assert qmesh.Scenario.builtin().name == "<built-in>"
    path = os.path.join(source_dir, "scenarios", "hgx-h200.yaml")
    with open(path) as f:
        s = qmesh.Scenario.from_yaml(f.read(), name="h200")
    assert s.name == "h200"
    assert qmesh.plan(qubits=36, scenario=s).feasible


def test_devices(cli):
    d = qmesh.devices()
    out = cli("devices").stdout.splitlines()
    rows = [l for l in out[1:] if l and l[0].isdigit()]
    assert [x["id"] for x in d] == [r.split()[1] for r in rows]
    # a name may hold spaces ("NVIDIA H200"): it follows the id on the device's line
    for x, r in zip(d, rows):
        assert r.split(None, 2)[2].startswith(x["name"] + " ")
    for x in d:
        assert x["usable_bytes"] <= x["memory_bytes"]
        assert (x["backend"] == "cuda") == (x["cuda_device"] >= 0)
    assert [x["id"] for x in qmesh.devices("sim")] == ["n0.g0", "n0.g1", "n0.g2", "n0.g3"]


def test_version():
    import re
    assert re.fullmatch(r"\d+\.\d+\.\d+", qmesh.__version__)
    assert qmesh.__version__ == "0.1.0"


def test_plan_input_equals_cli(cli, tmp_path):
    """plan(input=..., out=...) is `qmesh plan --input --out --json`: the request made from the
    file as encode makes it, and estimates_s with read, staging, write (docs/planner.md "Data
    path"); nothing written; the same errors."""
    import numpy as np
    x, c = tmp_path / "x.npy", tmp_path / "c.csv"
    np.save(x, np.arange(1.0, 301.0, dtype=np.float32).reshape(60, 5))
    c.write_text("1,2,3\n4,5,6\n")
    out = tmp_path / "o.npy"
    for f, kw, args in [(x, {}, []), (x, {"out": out}, ["--out", out]),
                        (x, {"out_dir": tmp_path / "d", "backend": "sim"},
                         ["--out-dir", tmp_path / "d", "--backend", "sim"]),
                        (c, {"dtype": "complex128", "qubits": 3},
                         ["--dtype", "complex128", "--qubits", 3])]:
        want = cli_plan(cli("plan", "--json", "--input", f, *args).stdout)
        got = qmesh.plan(input=f, **kw)
        if "backend" in kw:  # the CLI's --backend sim also checks host memory ("hosts")
            want.pop("hosts")
            assert got.to_dict().pop("hosts") is None
            assert {k: v for k, v in got.to_dict().items() if k != "hosts"} == want, (f, kw)
        else:
            assert got.to_dict() == want, (f, kw)
        assert set(got.estimates_s) == {"ingest", "local_norm", "norm_allreduce", "encode",
                                        "gather", "read", "staging", "write"}
    os.environ["QM_INPUT_RESIDENT"] = "0"  # read from storage (the residency test hook)
    try:
        # the simulator: the file's bytes at the read rate (on devices the .npy's reads are waited
        # for after the staging pipes open, so its read is at least their open)
        got = qmesh.plan(input=x, backend="sim")
    finally:
        del os.environ["QM_INPUT_RESIDENT"]
    assert got.request["batch"] == 60 and got.request["features"] == 5
    assert got.request["qubits"] == 3 and got.request["dtype"] == "complex64"
    assert got.estimates_s["read"] == 60 * 5 * 4 / 6e9 and got.estimates_s["write"] is None
    assert qmesh.plan(qubits=3).estimates_s["read"] is None
    assert not out.exists() and not (tmp_path / "d").exists()
    with pytest.raises(qmesh.Error) as e:
        qmesh.plan(input=tmp_path / "missing.npy")
    assert e.value.code == "E-IO" and "missing.npy: cannot open for reading" in str(e.value)
    with pytest.raises(qmesh.Error) as e:
        qmesh.plan(input=x, batch=3)
    assert e.value.code == "E-ARG"
