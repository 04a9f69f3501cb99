#!/usr/bin/python3
"""test_cli_contract.py QMESH SOURCE_DIR — the command line's contract with its users (label cli).

- --help: every command's help exits 0 and names every flag of the command's table (read from
  engine/cli/*.c, the table the parser uses); `qmesh help` names every command and every flag;
  `qmesh help CMD` equals `qmesh CMD --help`.
- "did you mean" for a flag, a command and a subcommand: the exact error line, exit 2.
- one error line: a failed request prints exactly one line on stderr (exit 1); a usage error too
  (exit 2); an argument that starts with '-' is never opened as a file.
- the table has no broken lines (plans that stopped at their error, negative headroom).
- --json: for every command, the outputs of success and of failure are one JSON object whose
  members are exactly those documented in docs/cli.md ("JSON output"), with the documented types,
  and exact values for known cases.
Standard library only. Prints "ok: ..." / "FAIL: ..." per check; exit 1 when one failed.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

QMESH, SRC = sys.argv[1], sys.argv[2]
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
        print("ok: " + what)
    else:
        failed += 1
        print("FAIL: " + what)


def run(*args):
    p = subprocess.run([QMESH] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=300)
    return p.returncode, p.stdout, p.stderr


def sc(name):
    return os.path.join(SRC, "scenarios", name)


# ---- the flag tables, from the sources -------------------------------------------------------
def flag_tables():
    """{command name: [flags]} from the qm_cli_command definitions of engine/cli/*.c."""
    tables, commands = {}, {}
    cli = os.path.join(SRC, "engine", "cli")
    for f in sorted(os.listdir(cli)):
        if not f.endswith(".c"):
            continue
        text = open(os.path.join(cli, f)).read()
        for m in re.finditer(r"qm_cli_flag (\w+)\[\] = \{(.*?)\{NULL, NULL, NULL\}\};", text, re.S):
            tables[m.group(1)] = re.findall(r'\{"(--[a-z-]+)",', m.group(2))
        for m in re.finditer(r"qm_cli_command \w+ = \{(.*?)\};", text, re.S):
            name = re.search(r'\.name = "([a-z ]+)"', m.group(1)).group(1)
            flags = re.search(r"\.flags = (\w+)", m.group(1)).group(1)
            commands[name] = flags
    return {name: tables[t] for name, t in commands.items()}


TABLES = flag_tables()
check(set(TABLES) == {"encode", "plan", "scenario run", "scenario check", "topo validate",
                      "topo show", "topo dump", "whatif", "devices", "version", "help"},
      "flag tables found for every command: %s" % sorted(TABLES))

rc, full_help, _ = run("help")
check(rc == 0, "qmesh help exits 0")
for name, flags in TABLES.items():
    rc, out, err = run(*name.split(), "--help")
    check(rc == 0 and err == "" and out.startswith("usage: qmesh %s" % name),
          "%s --help: exit 0, usage on stdout" % name)
    missing = [f for f in flags if "\n  %s" % f not in out]
    check(not missing, "%s --help names every flag of its table (missing %s)" % (name, missing))
    check("-h, --help" in out, "%s --help names -h, --help" % name)
    rc2, out2, _ = run("help", *name.split())
    check(rc2 == 0 and out2 == out, "qmesh help %s equals qmesh %s --help" % (name, name))
    rc3, out3, _ = run(*name.split(), "-h")
    check(rc3 == 0 and out3 == out, "%s -h equals --help" % name)
    check(("usage: qmesh %s" % name) in full_help and all("\n  %s" % f in full_help for f in flags),
          "qmesh help has %s and each of its flags" % name)
for group in ("topo", "scenario"):
    rc, out, _ = run(group, "--help")
    check(rc == 0 and "subcommands:" in out, "%s --help lists the subcommands" % group)
rc, out, _ = run("--version")
rc2, out2, _ = run("version")
check(rc == rc2 == 0 and out == out2 and re.fullmatch(r"qmesh \d+\.\d+\.\d+\n", out),
      "--version and version: %r" % out)

# ---- did you mean, usage errors: exact lines -------------------------------------------------
USAGE = [
    (("plan", "--qubit", "3"),
     "error[E-ARG]: plan: unknown option '--qubit'; did you mean '--qubits'? run 'qmesh plan "
     "--help'\n"),
    (("encode", "--inptu", "x.npy"),
     "error[E-ARG]: encode: unknown option '--inptu'; did you mean '--input'? run 'qmesh encode "
     "--help'\n"),
    (("plna",), "error[E-ARG]: qmesh: unknown command 'plna'; did you mean 'plan'? run 'qmesh "
                "help'\n"),
    (("topo", "shw"), "error[E-ARG]: topo: unknown subcommand 'shw'; did you mean 'show'? run "
                      "'qmesh topo --help'\n"),
    (("plan", "--qubits", "3", "--bogus"),
     "error[E-ARG]: plan: unknown option '--bogus'; run 'qmesh plan --help'\n"),
    (("plan", "--scenario", "--qubits", "3"),
     "error[E-ARG]: plan: option --scenario needs a value (FILE), not the option '--qubits'; run "
     "'qmesh plan --help'\n"),
    (("scenario", "run", "--jsno", sc("gh200.yaml")),
     "error[E-ARG]: scenario run: unknown option '--jsno'; did you mean '--json'? run 'qmesh "
     "scenario run --help'\n"),
    (("topo", "validate", "-x.yaml"),
     "error[E-ARG]: topo validate: unknown option '-x.yaml'; run 'qmesh topo validate --help'\n"),
    (("topo", "show", "a.yaml", "b.yaml"),
     "error[E-ARG]: topo show: one file at a time (extra 'b.yaml'); run 'qmesh topo show "
     "--help'\n"),
    (("topo", "dump", "--json"),
     "error[E-ARG]: topo dump: --json is not offered: this command writes YAML; run 'qmesh topo "
     "dump --help'\n"),
    (("devices", "--backend", "tpu"),
     "error[E-ARG]: devices: unknown backend 'tpu'; use sim or cuda; run 'qmesh devices "
     "--help'\n"),
    (("whatif", "--host", "2"),
     "error[E-ARG]: whatif: unknown option '--host'; did you mean '--hosts'? run 'qmesh whatif "
     "--help'\n"),
    (("whatif", "--hosts", "1", "--hosts", "2"),
     "error[E-ARG]: whatif: --hosts is given twice; give it once; run 'qmesh whatif --help'\n"),
    (("encode", "--input", "x.npy", "--read-threads", "0"),
     "error[E-ARG]: encode: --read-threads takes a thread count in [1, 64] (got '0'); run 'qmesh "
     "encode --help'\n"),
    (("plan", "--qubits", "3", "--qubits=4"),
     "error[E-ARG]: plan: --qubits is given twice; give it once; run 'qmesh plan --help'\n"),
    (("plan",), "error[E-ARG]: plan: --qubits N is required (or --input FILE to take it from the "
                "data, or --max for the largest that fits); run 'qmesh plan --help'\n"),
    (("plan", "--max", "--qubits", "3"),
     "error[E-ARG]: plan: --max and --qubits cannot be combined: --max finds the largest qubit "
     "count (or, with --features, batch) that fits; run 'qmesh plan --help'\n"),
    (("plan", "--max", "--dtype", "complex128"),
     "error[E-ARG]: plan: --max reports every dtype and policy and takes only --scenario, --ranks, "
     "--features, --backend and --json (got --dtype); run 'qmesh plan --help'\n"),
    (("scenario", "run"),
     "error[E-ARG]: scenario run: FILE... is required; run 'qmesh scenario run --help'\n"),
]
for args, line in USAGE:
    rc, out, err = run(*args)
    check(rc == 2 and out == "" and err == line, "qmesh %s: exit 2, the one line %r (got %d, %r)"
          % (" ".join(args), line, rc, err))

# an argument starting with '-' is never a file: no E-IO about it
with tempfile.TemporaryDirectory() as d:
    for args in (("scenario", "run", "--help"), ("topo", "validate", "--json", "--help")):
        rc, out, err = run(*args)
        check(rc == 0 and "usage:" in out and "E-IO" not in err, "%s shows help" % " ".join(args))

# ---- one error line for a failed request -----------------------------------------------------
ONE = [
    (("plan", "--scenario", sc("gh200.yaml"), "--qubits", "40"), "E-CAPACITY"),
    (("plan", "--scenario", sc("a100-4node-hdr.yaml"), "--qubits", "3", "--policy", "equal"),
     "E-SHARDS"),
    (("plan", "--scenario", sc("gh200.yaml"), "--qubits", "70"), "E-QUBITS"),
    (("plan", "--scenario", "/nonexistent.yaml", "--qubits", "3"), "E-IO"),
    (("topo", "show", "/nonexistent.yaml"), "E-IO"),
]
for args, code in ONE:
    rc, out, err = run(*args)
    check(rc == 1 and len(err.splitlines()) == 1 and err.startswith("error[%s]: " % code)
          and "error[" not in out,
          "qmesh %s: exit 1, one error line %s on stderr, none on stdout (got %d, %r)"
          % (" ".join(args), code, rc, err))

# ---- no broken lines --------------------------------------------------------------------------
rc, out, err = run("plan", "--scenario", sc("a100-4node-hdr.yaml"), "--qubits", "3", "--policy",
                  "equal")
check("\ngather:   not planned (the plan stopped at its error)\n" in out, "gather not planned")
check("feasible: no (E-SHARDS; the error line says why)\n" in out, "feasible: no names the code")
check(not re.search(r"\(\)|  \(|up to 0 qubits|-  +\d", out), "no hole in the table")
rc, out, err = run("plan", "--scenario", sc("a100-4node-hdr.yaml"), "--qubits", "30", "--ranks", "3",
                  "--policy", "single")
check(rc == 1 and "\nfrontier: not computed (the plan stopped at its error)\n" in out,
      "frontier not computed")
check("policy single (no layout)" in out, "request line without a layout")
check(not re.search(r"\(\)|  \(|up to 0 qubits|-  +\d", out), "no hole in the table")
rc, out, err = run("plan", "--scenario", sc("gh200.yaml"), "--qubits", "36")
check(rc == 1 and re.search(r"\n\s*n0\.g0\s+88\.41 GiB\s+512\.00 GiB\s+64\.00 MiB\s+-423\.66 GiB\n",
                            out) is not None, "negative headroom next to its sign")
check("scenario: gh200 (%s)\n" % sc("gh200.yaml") in out, "scenario title")
check("estimates for gh200's hardware (modelled from the scenario, not measured): ingest " in out,
      "estimates labelled as the scenario's hardware")
check(re.search(r"cut into \d+ pages \(equal blocks of \d+ amplitudes; each device holds a run "
                r"of whole pages\)", out) is not None, "pages explained")
rc, out, err = run("plan", "--qubits", "20", "--policy", "single")
check(rc == 0 and "cut into 1 pages" not in out and
      "state:    1048576 amplitudes, 8.00 MiB, one page (the whole state in one block)\n" in out,
      "one page said in words")
# the built-in mesh is titled the same by plan, topo show and devices
title = "scenario: builtin-4xh100-sxm (built-in simulated mesh)"
for args in (("plan", "--qubits", "20"), ("topo", "show"), ("devices", "--backend", "sim"),
             ("whatif", "--dtype", "complex64")):
    rc, out, _ = run(*args)
    check(rc == 0 and out.startswith(title), "%s starts with %r" % (" ".join(args), title))


# ---- --json: documented members and types ----------------------------------------------------
def documented():
    """{command: [(member, {types})]} from docs/cli.md's tables after <!-- json: CMD -->."""
    text = open(os.path.join(SRC, "docs", "cli.md")).read()
    common = re.search(r"starts with the same three members.*?\n\n(\|.*?)\n\n", text, re.S).group(1)

    def rows(table):
        out = []
        for line in table.splitlines()[2:]:
            cells = [c.strip() for c in line.strip("|").split("|")]
            types = {t.strip() for t in cells[1].split(" or ")}
            out.append((cells[0].strip("`"), types))
        return out
    docs = {}
    for m in re.finditer(r"<!-- json: ([a-z ]+) -->\n(\|.*?)(?:\n\n|\Z)", text, re.S):
        docs[m.group(1)] = rows(common) + rows(m.group(2))
    docs["scenario check"] = docs["scenario run"]
    return docs


DOCS = documented()
TYPES = {"boolean": bool, "string": str, "integer": int, "number": (int, float), "object": dict,
         "array": list}


def typed(v, types):
    if v is None:
        return "null" in types
    if isinstance(v, bool):
        return "boolean" in types
    return any(t in TYPES and isinstance(v, TYPES[t]) and not (t == "integer" and isinstance(v, bool))
               for t in types)


def json_run(name, args, want_rc):
    rc, out, err = run(*name.split(), *args, "--json")
    what = "%s %s --json" % (name, " ".join(map(str, args)))
    try:
        d = json.loads(out)
    except ValueError:
        check(False, "%s: stdout is one JSON object (got %r)" % (what, out[:200]))
        return None
    members = DOCS[name]
    check(list(d) == [m for m, _ in members],
          "%s: exactly the documented members, in order (got %s)" % (what, list(d)))
    # a failed run leaves null what it did not reach (docs/cli.md)
    bad = [m for m, t in members if m in d and not typed(d[m], t | ({"null"} if rc else set()))]
    check(not bad, "%s: documented types (wrong: %s)" % (what, bad))
    check(rc == want_rc and d.get("ok") == (rc == 0) and d.get("command") == name,
          "%s: exit %d, ok %s, command %r" % (what, want_rc, want_rc == 0, name))
    errs = [l for l in err.splitlines() if "error[" in l]
    if rc == 0:
        check(d["error"] is None and not errs, "%s: error null, no error line" % what)
    else:
        e = d["error"] or {}
        check(sorted(e) == ["code", "message"] and len(errs) >= 1 and
              errs[0].replace("error[%s]: " % e.get("code"), "", 1) == e.get("message"),
              "%s: error %s equals the first stderr line %r" % (what, e, errs[:1]))
    return d


with tempfile.TemporaryDirectory() as tmp:
    sys.path.insert(0, os.path.join(SRC, "tests"))
    from npy_write import npy
    good, nan = os.path.join(tmp, "a.npy"), os.path.join(tmp, "nan.npy")
    npy(good, "<f8", "(4,)", [3.0, 4.0, 0.0, 0.0], "d")
    npy(nan, "<f8", "(4,)", [3.0, float("nan"), 0.0, 0.0], "d")
    outf = os.path.join(tmp, "o.npy")
    # the input counts as read from storage, not the page cache (the residency test hook)
    os.environ["QM_INPUT_RESIDENT"] = "0"

    d = json_run("encode", ["--input", good, "--out", outf], 0)
    if d:
        check(d["input"] == {"dtype": "float64", "samples": 1, "features": 4} and
              d["output"] == outf and d["files"] == 1 and d["plan"]["request"]["qubits"] == 2 and
              d["plan"]["feasible"] is True and d["norm_check"]["worst_state"] == 0 and
              sorted(d["measured_s"]) == ["encode", "ingest", "local_norm", "norm_allreduce",
                                          "read", "staging", "write"] and
              all(isinstance(v, float) and v >= 0 for v in d["measured_s"].values()) and
              sorted(d["seconds"]) == ["backend_start", "backend_wait", "check", "check_and_output",
                                       "materialize", "read_and_plan"] and
              d["seconds"]["backend_start"] == 0 and d["seconds"]["backend_wait"] == 0 and
              0 <= d["seconds"]["check"] <= d["seconds"]["check_and_output"],
              "encode --json: exact values (measured_s: every phase and the data path, >= 0; "
              "seconds: the check on the devices, no CUDA start-up on the simulator)")
        # the plan encode used knows its data path: read and staging from the file, write from --out
        e = d["plan"]["estimates_s"]
        check(list(e) == ["ingest", "local_norm", "norm_allreduce", "encode", "gather", "read",
                          "staging", "write"] and
              e["read"] == 32 / 6e9 and e["staging"] == 32 / 10e9 and
              e["ingest"] == e["read"] + e["staging"] and
              e["write"] == (128 + 64) / 2e9,
              "encode --json: the plan's estimates_s with read (32 B at the default 6 GB/s), "
              "staging (the simulator's host copy at 10 GB/s) and write (the simulator's shards "
              "are host memory: the file's 192 B at the default 2 GB/s)")
    d = json_run("encode", ["--input", good], 0)
    if d:
        check(d["measured_s"]["write"] is None and d["measured_s"]["read"] >= 0 and
              d["plan"]["estimates_s"]["write"] is None,
              "encode --json without an output: write null, measured and estimated")
    # plan --input: the request encode makes from the file, the data path in estimates_s
    d = json_run("plan", ["--input", good, "--out", outf], 0)
    if d:
        check(d["request"]["qubits"] == 2 and d["request"]["dtype"] == "complex128" and
              d["request"]["batch"] == 1 and d["request"]["features"] == 4 and
              d["estimates_s"]["read"] == 1e-3 and d["estimates_s"]["write"] is not None and
              not os.path.exists(outf + ".plan"),
              "plan --input --out --json: qubits, dtype, batch from the file; read (on a device "
              "the .npy's reads are waited for after its staging opens: the built-in 1 ms, more "
              "than 32 B at 6 GB/s), write")
    d = json_run("plan", ["--input", os.path.join(tmp, "missing.npy")], 1)
    if d:
        check(d["error"] == {"code": "E-IO", "message": os.path.join(tmp, "missing.npy") +
                             ": cannot open for reading: No such file or directory"} and
              d["request"] is None, "plan --input of a missing file: E-IO, the path named")
    d = json_run("encode", ["--input", nan], 1)
    if d:
        check(d["error"] == {"code": "E-INPUT",
                             "message": "encode: zero or non-finite norm: input[1] is NaN"} and
              d["plan"]["feasible"] is True and d["seconds"] is None and d["input"] is None,
              "encode --json on bad data: the error, the plan, nulls")
    d = json_run("encode", ["--input", good, "--qubits", "40"], 1)
    if d:
        check(d["error"]["code"] == "E-CAPACITY" and d["plan"]["feasible"] is False and
              d["plan"]["error"] == d["error"] and d["output"] is None,
              "encode --json on an infeasible plan: the plan with its error")
    d = json_run("encode", ["--inptu", good], 2)
    if d:
        check(d["error"]["code"] == "E-ARG" and all(d[m] is None for m, _ in DOCS["encode"][3:]),
              "encode --json with a bad flag: E-ARG, every member null")

d = json_run("plan", ["--scenario", sc("gh200.yaml"), "--qubits", "30"], 0)
if d:
    check([d["estimates_s"][k] for k in ("read", "staging", "write")] == [None] * 3,
          "plan --json without --input or an output: read, staging, write null")
    check(d["scenario"] == sc("gh200.yaml") and d["policy"] == "single" and d["pages"] == 1 and
          d["global_amplitudes"] == 2 ** 30 and d["state_bytes"] == 2 ** 33 and
          d["request"]["policy"] == "auto" and len(d["shards"]) == 1 and
          d["shards"][0]["device"] == "n0.g0" and d["max_qubits"] == {"complex64": 33,
                                                                     "complex128": 32},
          "plan --json: exact values (gh200, 30 qubits)")
d = json_run("plan", ["--qubits", "40"], 1)
if d:
    check(d["feasible"] is False and d["policy"] == "weighted" and
          d["request"]["policy"] == "auto" and d["error"]["code"] == "E-CAPACITY" and
          d["pages"] == 16777216, "plan --json infeasible: policy is the layout shown (weighted)")
d = json_run("plan", ["--scenario", sc("a100-4node-hdr.yaml"), "--qubits", "30", "--ranks", "3",
                      "--policy", "single"], 1)
if d:
    check(d["policy"] is None and d["shards"] == [] and d["error"]["code"] == "E-POLICY" and
          d["max"] is None, "plan --json stopped before a layout: policy null")
# auto serves 3 ranks (weighted) and falls back to replicated for a state smaller than the mesh
d = json_run("plan", ["--scenario", sc("a100-4node-hdr.yaml"), "--qubits", "30", "--ranks", "3"], 0)
if d:
    check(d["policy"] == "weighted" and d["pages"] == 16 and len(d["shards"]) == 12 and
          d["max"] is None, "plan --json: auto on 3 ranks is weighted, 16 pages")
d = json_run("plan", ["--scenario", sc("a100-4node-hdr.yaml"), "--qubits", "1"], 0)
if d:
    check(d["policy"] == "replicated" and len(d["shards"]) == 16, "plan --json: auto replicates "
          "a 2-amplitude state over 16 devices")
# --max: the plan object with the answer in max, every plan member null
d = json_run("plan", ["--scenario", sc("a100-4node-hdr.yaml"), "--ranks", "3", "--max"], 0)
if d:
    c64 = {"auto": 35, "single": None, "equal": None, "weighted": 35, "balanced": 35,
           "replicated": 32, "auto_policy": "weighted"}
    c128 = {"auto": 34, "single": None, "equal": None, "weighted": 34, "balanced": 34,
            "replicated": 31, "auto_policy": "weighted"}
    check(d["scenario"] == sc("a100-4node-hdr.yaml") and
          d["max"] == {"ranks": 3, "devices": 12, "unit": "qubits", "features": None,
                       "qubits": None, "complex64": c64, "complex128": c128} and
          d["phantom"] is None and
          all(d[m] is None for m, _ in DOCS["plan"][4:-2]), "plan --max --json: exact values")
d = json_run("plan", ["--scenario", sc("a100-4node-hdr.yaml"), "--ranks", "5", "--max"], 1)
if d:
    check(d["error"]["code"] == "E-RANK" and d["max"] is None, "plan --max --json: E-RANK")
d = json_run("plan", ["--max", "--qubits", "3"], 2)
d = json_run("plan", ["--qubits", "3", "--dot"], 2)
if d:
    check(d["error"]["message"] == "plan: --json and --dot exclude each other; run 'qmesh plan "
          "--help'", "plan --json --dot: the usage error in the object")
d = json_run("plan", ["--qubits", "3", "--policy", "fast"], 1)
if d:
    check(d["error"]["code"] == "E-POLICY" and d["request"] is None, "plan --json bad policy")
d = json_run("plan", ["--qubtis", "3"], 2)

d = json_run("scenario run", [sc("gh200.yaml")], 0)
if d:
    check(d["cases"] == 3 and d["passed"] == 3 and d["missed"] == 0 and
          d["files"][0]["file"] == sc("gh200.yaml") and len(d["files"][0]["report"]) == 3 and
          d["files"][0]["report"][0].endswith(": ok"), "scenario run --json: exact values")
d = json_run("scenario check", [sc("gh200.yaml"), sc("invalid/dup-id.yaml")], 1)
if d:
    check(d["error"]["code"] == "E-DUP-ID" and d["files"][1]["ok"] is False and
          d["files"][0]["report"] == [] and d["cases"] == 3,
          "scenario check --json with an invalid file")
d = json_run("topo validate", [sc("gh200.yaml"), sc("invalid/dup-id.yaml")], 1)
if d:
    f0, f1 = d["files"]
    check(f0 == {"file": sc("gh200.yaml"), "ok": True, "errors": [], "hosts": 1, "devices": 1,
                 "links": 2, "cases": 3} and f1["ok"] is False and f1["hosts"] is None and
          f1["errors"][0]["code"] == "E-DUP-ID" and f1["errors"][0]["line"] == 10 and
          f1["errors"][0]["column"] == 14 and
          d["error"]["message"].startswith(sc("invalid/dup-id.yaml") + ":10:14: "),
          "topo validate --json: exact values")
d = json_run("topo validate", [sc("gh200.yaml")], 0)
d = json_run("topo show", [sc("gh200.yaml")], 0)
if d:
    check(d["name"] == "gh200" and d["best_connected"] == "n0.g0" and
          d["devices"][0]["usable_bytes"] == 94926258176 and d["ranks"] == [
              {"rank": 0, "devices": ["n0.g0"]}], "topo show --json: exact values")
d = json_run("topo show", ["/nonexistent.yaml"], 1)
if d:
    check(d["error"]["code"] == "E-IO" and d["devices"] is None, "topo show --json: missing file")
d = json_run("whatif", ["--scenario", sc("gh200.yaml"), "--device-memory", "192GiB",
                        "--dtype", "complex64"], 0)
if d:
    # gh200: 96 GiB HBM3, 1 GiB reserve: 95 GiB usable: 2^33 x 8 B = 64 GiB fits, 34 does not;
    # 192 GiB: 191 GiB usable: 34 (128 GiB)
    check(d["scenario"] == sc("gh200.yaml") and d["request"]["max"] is True and
          d["request"]["qubits"] is None and d["request"]["dtypes"] == ["complex64"] and
          [(r["variant"]["label"], r["devices"], r["max_qubits"], r["feasible"]) for r in d["rows"]]
          == [("scenario", 1, 33, True), ("memory=192GiB", 1, 34, True)] and
          d["rows"][1]["variant"]["device_memory_bytes"] == 192 << 30,
          "whatif --json: exact values")
d = json_run("whatif", ["--scenario", sc("gh200.yaml"), "--without", "n0.g9"], 2)
if d:
    check(d["error"]["code"] == "E-ARG" and d["rows"] == [] and
          d["scenario"] == sc("gh200.yaml") and d["request"]["policy"] == "auto",
          "whatif --json: a variation no variant can make, after loading: rows empty")
d = json_run("whatif", ["--hosts", "0"], 2)
if d:
    check(all(d[m] is None for m, _ in DOCS["whatif"][3:]), "whatif --json usage error: nulls")
d = json_run("whatif", ["--scenario", "/nonexistent.yaml"], 1)
if d:
    check(d["error"]["code"] == "E-IO" and d["rows"] == [], "whatif --json: missing scenario")
d = json_run("devices", ["--backend", "sim"], 0)
if d:
    check(d["backend"] == "sim" and d["scenario"] == "<built-in>" and
          [x["id"] for x in d["devices"]] == ["n0.g0", "n0.g1", "n0.g2", "n0.g3"] and
          d["devices"][0]["memory_bytes"] == 85045477376 and
          d["devices"][0]["usable_bytes"] == 84508606464, "devices --json: exact values")
d = json_run("devices", ["--backend", "tpu"], 2)
d = json_run("version", [], 0)
if d:
    check(re.fullmatch(r"\d+\.\d+\.\d+", d["version"]) is not None, "version --json")
rc, out, err = run("plna", "--json")
d = json.loads(out) if out else {}
check(rc == 2 and d == {"ok": False, "command": None, "error": {
    "code": "E-ARG", "message": "qmesh: unknown command 'plna'; did you mean 'plan'? run 'qmesh "
                                "help'"}} and len(err.splitlines()) == 1,
      "unknown command with --json: one object, command null, one error line")

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
