#!/usr/bin/env bash
# test_whatif_cli.sh QMESH SRCDIR — `qmesh whatif` and `qmesh plan --dot` end to end (label cli):
# the exact table, JSON values (parsed by python3), CSV bytes, every error line and exit code, and
# the DOT text of the built-in mesh's plan, line for line. Every run is under `timeout`.
#
# The scenario, tests/whatif/small-2host.yaml: 2 hosts x 2 devices of 16 GiB, reserve 1 GiB, so
# 15 GiB usable per device; a shard also needs 64 MiB of staging (two 32 MiB chunks) once its
# input is that large. Largest states by hand (policy auto: single, equal or weighted):
#   scenario, 4 devices: complex64 shard = 2^n x 8 B / 4: n = 32 -> 8 GiB fits, 33 -> 16 GiB does
#     not: 32; complex128 (16 B): 31.
#   --hosts 1 (2 devices): 2^n x 8 / 2: 31 (8 GiB); complex128 30.
#   --hosts 4 (8 devices): 2^n x 8 / 8: 33; complex128 32.
#   Weighted deals P pages to the ranks by their usable capacity (largest remainder, ties to the
#   lower rank), then to a rank's devices, and takes the smallest power-of-two P that fits:
#   --hosts 3 --without n1.g1 (5 devices; ranks of 30, 15, 30 GiB): n = 33 (64 GiB): P = 8 deals
#     3,2,3 (rank 0: 2 pages of 8 GiB on n0.g0, too much), P = 16 deals 7,3,6 (n0.g0: 4 x 4 GiB,
#     too much), P = 32 deals 13,6,13: n0.g0 7 x 2 GiB = 14 GiB + 64 MiB staging fits: 33
#     (34 = 128 GiB > 75 GiB usable); largest shard 14 GiB: local_norm 15.032 ms at 1 TB/s.
#   --hosts 4 --without n1.g1 (7 devices; ranks 30, 15, 30, 30 GiB): n = 33: P = 8 deals 3,1,2,2
#     (n0.g0: 2 x 8 GiB, too much), P = 16 deals 5,2,5,4: n0.g0 3 x 4 GiB = 12 GiB, n1.g0 2 x 4
#     GiB: 33; largest shard 12 GiB: local_norm 12.885 ms.
#   --without n1.g0 (3 devices; ranks 30, 15 GiB), complex128: n = 31 (32 GiB): P = 4 deals 3,1
#     (n0.g0: 2 x 8 GiB, too much), P = 8 deals 5,3: 3 x 4 GiB on n0.g0, 3 x 4 GiB on n1.g1: 31.
# Outputs in the table-driven CLI's style: the table starts 'scenario: NAME (FILE)' as plan's
# does; usage errors point at 'qmesh whatif --help' (plan --help); --json prints its one object
# also on a usage error; an infeasible row's policy is the one whose layout it shows.
#   --device-memory 40GiB (39 GiB usable) on 4 hosts x 1 device: 2^n x 8 / 4: 34 (32 GiB);
#     complex128 33. On 4 hosts x 4 devices (16): 2^n x 8 / 16: 36; complex128 35.
set -u
QMESH=$1; SRC=$2
. "$(dirname "$0")/testlib.sh"
cd "$SRC" || exit 1
S=tests/whatif/small-2host.yaml

# run EXPECTED_RC ARGS...: stdout in $T/out, stderr in $T/err; checks the exit code
run() {
  local want=$1; shift
  timeout 120 "$QMESH" "$@" > "$T/out" 2> "$T/err"
  local rc=$?
  if [ "$rc" -eq "$want" ]; then ok "exit $rc: $*"; else bad "exit $rc (want $want): $* : $(head -c 300 "$T/err")"; fi
}
# same FILE EXPECTED_TEXT NAME
same() {
  if [ "$(cat "$1")" = "$2" ]; then ok "$3"; else bad "$3"; diff <(printf '%s\n' "$2") "$1" | head -20; fi
}

# ---- the table --------------------------------------------------------------------------------
run 0 whatif --scenario $S --hosts 1,3,4 --without n1.g1 --dtype complex64
same "$T/out" "scenario: whatif-small (tests/whatif/small-2host.yaml)
whatif:   the largest state per dtype, batch 1, policy auto
variant               hosts devices       memory dtype      max qubits fits policy   shards         ingest     local_norm norm_allreduce         encode         gather
scenario                  2       4    64.00 GiB complex64   32     32 yes  equal         4     134.219 ms       8.590 ms       13.20 us      17.180 ms     687.204 ms
hosts=1 without=n1.g1     -       -            - complex64    -      - no   error[E-ARG]: whatif: --without 'n1.g1': no such device (2 devices in 1 host); did you mean 'n0.g1'?
hosts=3 without=n1.g1     3       5    80.00 GiB complex64   33     33 yes  weighted      5     234.882 ms      15.032 ms       18.60 us      30.065 ms        1.632 s
hosts=4 without=n1.g1     4       7   112.00 GiB complex64   33     33 yes  weighted      7     201.328 ms      12.885 ms       18.60 us      25.770 ms        1.890 s
memory: summed over the devices; estimates: seconds per phase from the cost model for the scenario's hardware figures (estimates, not measurements)" "table: hosts x without, one dtype"
[ ! -s "$T/err" ] && ok "table: nothing on stderr" || bad "table: stderr: $(cat "$T/err")"

# ---- JSON: max qubits per variant and dtype ------------------------------------------------------
run 0 whatif --scenario $S --hosts 4 --device-memory 40GiB --devices-per-host 1,4 --json
python3 - "$T/out" <<'EOF' && ok "json: rows, variants, max qubits" || bad "json: rows, variants, max qubits"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["scenario"] == "tests/whatif/small-2host.yaml", o["scenario"]
assert o["error"] is None
assert o["request"] == {"qubits": None, "max": True, "dtypes": ["complex64", "complex128"],
                        "policy": "auto", "batch": 1, "features": None, "ranks": None}, o["request"]
got = [(r["variant"]["label"], r["dtype"], r["hosts"], r["devices"], r["memory_bytes"],
        r["usable_bytes"], r["max_qubits"], r["qubits"], r["feasible"], r["shards"], r["error"])
       for r in o["rows"]]
G = 1 << 30
want = [("scenario", "complex64", 2, 4, 64 * G, 60 * G, 32, 32, True, 4, None),
        ("scenario", "complex128", 2, 4, 64 * G, 60 * G, 31, 31, True, 4, None),
        ("hosts=4 devices/host=1 memory=40GiB", "complex64", 4, 4, 160 * G, 156 * G, 34, 34, True, 4, None),
        ("hosts=4 devices/host=1 memory=40GiB", "complex128", 4, 4, 160 * G, 156 * G, 33, 33, True, 4, None),
        ("hosts=4 devices/host=4 memory=40GiB", "complex64", 4, 16, 640 * G, 624 * G, 36, 36, True, 16, None),
        ("hosts=4 devices/host=4 memory=40GiB", "complex128", 4, 16, 640 * G, 624 * G, 35, 35, True, 16, None)]
assert got == want, got
v = o["rows"][2]["variant"]
assert v == {"label": "hosts=4 devices/host=1 memory=40GiB", "hosts": 4, "devices_per_host": 1,
             "device_memory_bytes": 40 * G, "without": []}, v
assert o["rows"][0]["variant"]["hosts"] is None
assert sorted(o["rows"][0]["estimates_s"]) == ["encode", "gather", "ingest", "local_norm", "norm_allreduce"]
EOF

# the --hosts 4 variant plans exactly as the same cluster written out by hand (small-4host.yaml)
run 0 whatif --scenario $S --hosts 4 --qubits 33 --dtype complex64 --json
cp "$T/out" "$T/whatif.json"
run 0 plan --scenario tests/whatif/small-4host.yaml --qubits 33 --json
python3 - "$T/whatif.json" "$T/out" <<'EOF' && ok "json: --hosts 4 = small-4host.yaml's plan" || bad "json: --hosts 4 = small-4host.yaml's plan"
import json, sys
w = json.load(open(sys.argv[1]))["rows"][1]
p = json.load(open(sys.argv[2]))
assert w["variant"]["label"] == "hosts=4" and w["feasible"] and p["feasible"]
# whatif rows carry the plan's own phases; the data path (read, staging, write) is a plan's with
# an input file or output, null here
assert [p["estimates_s"].pop(k) for k in ("read", "staging", "write")] == [None] * 3
assert w["estimates_s"] == p["estimates_s"], (w["estimates_s"], p["estimates_s"])
assert (w["shards"], w["policy"], w["max_qubits"]) == (len(p["shards"]), p["policy"], p["max_qubits"]["complex64"])
assert w["usable_bytes"] == sum(d["usable_bytes"] for d in p["devices"])
EOF
python3 - "$T/whatif.json" <<'EOF' && ok "json: an infeasible row keeps its error" || bad "json: an infeasible row keeps its error"
import json, sys
r = json.load(open(sys.argv[1]))["rows"][0]
assert r["feasible"] is False and r["shards"] is None and r["max_qubits"] == 32 and r["qubits"] == 33
assert r["error"]["code"] == "E-CAPACITY", r["error"]
assert r["error"]["message"].startswith("feasibility: shard 0 needs 16.00 GiB (+ 64.00 MiB staging) on n0.g0 but 15.00 GiB is usable"), r["error"]
assert all(v is None for v in r["estimates_s"].values())
EOF

# ---- CSV: exact bytes ------------------------------------------------------------------------------
run 0 whatif --scenario $S --hosts 4 --qubits 33 --dtype complex64 --csv
same "$T/out" "variant,hosts,devices,memory_bytes,usable_bytes,dtype,max_qubits,qubits,feasible,policy,shards,ingest_s,local_norm_s,norm_allreduce_s,encode_s,gather_s,error_code,error_message
scenario,2,4,68719476736,64424509440,complex64,32,33,no,weighted,,,,,,,E-CAPACITY,feasibility: shard 0 needs 16.00 GiB (+ 64.00 MiB staging) on n0.g0 but 15.00 GiB is usable; largest state that fits is 32 qubits (complex64)
hosts=4,4,8,137438953472,128849018880,complex64,33,33,yes,equal,8,0.134218728,0.00858993459,1.860064e-05,0.0171798692,2.0615937,," "csv: header and rows"
run 0 whatif --scenario $S --without n0.g0+n0.g1,n1.g0 --dtype complex128 --csv
same "$T/out" "variant,hosts,devices,memory_bytes,usable_bytes,dtype,max_qubits,qubits,feasible,policy,shards,ingest_s,local_norm_s,norm_allreduce_s,encode_s,gather_s,error_code,error_message
scenario,2,4,68719476736,64424509440,complex128,31,31,yes,equal,4,0.134218728,0.00858993459,1.320064e-05,0.0171798692,0.687204167,,
without=n0.g0+n0.g1,1,2,34359738368,32212254720,complex128,30,30,yes,equal,2,0.134218728,0.00858993459,7.80008e-06,0.0171798692,0.0858999459,,
without=n1.g0,2,3,51539607552,48318382080,complex128,31,31,yes,weighted,3,0.201327592,0.0128849019,1.32004267e-05,0.0257698038,0.515405476,," "csv: failed devices (a whole host, one device)"

# ---- the built-in mesh: said on stderr; it has no network, so a second host is an error row ----
run 0 whatif --hosts 2 --dtype complex64
same "$T/err" "qmesh: no --scenario given: using the built-in simulated mesh" "built-in: said on stderr"
same <(sed -n 5p "$T/out") "hosts=2      -       -            - complex64    -      - no   error[E-DISCONNECTED]: whatif: device 'n1.g0' of this variant has no path to device 'n0.g0' (2 hosts; no chain of links, fabrics or NIC attachments joins them); the scenario has no network between these hosts" "built-in: --hosts 2 is an E-DISCONNECTED row"

# ---- errors: one line each, exact ----------------------------------------------------------------
err() { # EXPECTED_RC EXPECTED_LINE ARGS...
  local want=$1 line=$2; shift 2
  run "$want" "$@"
  same "$T/err" "$line" "error line: $*"
  [ -s "$T/out" ] && bad "stdout not empty: $*: $(head -c 200 "$T/out")" || ok "nothing on stdout: $*"
}
err 2 "error[E-ARG]: whatif: --hosts 0 is out of range (1..4096); run 'qmesh whatif --help'" whatif --scenario $S --hosts 0
err 2 "error[E-ARG]: whatif: --hosts 'two' is not a whole number; run 'qmesh whatif --help'" whatif --scenario $S --hosts two
err 2 "error[E-ARG]: whatif: --hosts '2,,4': an empty item; run 'qmesh whatif --help'" whatif --scenario $S --hosts 2,,4
err 2 "error[E-ARG]: whatif: --devices-per-host 0 is out of range (1..1024); run 'qmesh whatif --help'" whatif --scenario $S --devices-per-host 0
err 2 "error[E-ARG]: whatif: --device-memory '40 GX' has an unknown unit 'GX'; sizes use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB; run 'qmesh whatif --help'" whatif --scenario $S --device-memory "40 GX"
err 2 "error[E-ARG]: whatif: --without 'n1.g9': no such device (4 devices in 2 hosts); did you mean 'n1.g0'?" whatif --scenario $S --without n1.g9
err 2 "error[E-ARG]: whatif: --without 'n0.ib0': not a device but a switch or NIC; name GPU devices" whatif --scenario $S --without n0.ib0
err 2 "error[E-ARG]: whatif: --without '+n0.g1': an empty device id; run 'qmesh whatif --help'" whatif --scenario $S --without +n0.g1
err 2 "error[E-ARG]: whatif: --qubits N and --max exclude each other; run 'qmesh whatif --help'" whatif --scenario $S --qubits 30 --max
err 2 "error[E-ARG]: whatif: --hosts is given twice; give it once; run 'qmesh whatif --help'" whatif --scenario $S --hosts 1 --hosts 2
err 2 "error[E-ARG]: whatif: unknown option '--host'; did you mean '--hosts'? run 'qmesh whatif --help'" whatif --scenario $S --host 2
err 1 "error[E-DTYPE]: whatif: --dtype must be complex64 or complex128 (got 'complex32')" whatif --scenario $S --dtype complex32
err 1 "error[E-QUBITS]: whatif: request: qubits must be at least 1 (got 0)" whatif --scenario $S --qubits 0
err 1 "error[E-INPUT]: whatif: request: 9 features exceed the state vector size 8 (3 qubits); use at least 4 qubits" whatif --scenario $S --qubits 3 --features 9
err 1 "error[E-IO]: scenario: cannot open '$T/none.yaml': No such file or directory" whatif --scenario "$T/none.yaml"
# with --json the error is also the object's error, rows empty
run 2 whatif --scenario $S --without n1.g9 --json
python3 - "$T/out" <<'EOF' && ok "json: a usage error in the object" || bad "json: a usage error in the object"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["rows"] == [] and o["error"]["code"] == "E-ARG", o
assert o["error"]["message"] == "whatif: --without 'n1.g9': no such device (4 devices in 2 hosts); did you mean 'n1.g0'?"
EOF

# ---- plan --dot: the built-in mesh's plan, line for line -----------------------------------------
run 0 plan --qubits 33 --dot
same "$T/out" 'graph "builtin-4xh100-sxm" {
  label="plan: 33 qubits complex64, policy equal, 4 shards, feasible; gather to n0.g0 (fits)";
  subgraph "cluster_n0" {
    label="n0";
    "n0.numa0" [shape=ellipse, label="n0.numa0\nnuma"];
    "n0.numa1" [shape=ellipse, label="n0.numa1\nnuma"];
    "n0.g0" [shape=box, label="n0.g0\ngpu\nshard 0: 16.00 GiB", style=filled, fillcolor="#fff2cc", color="#d62728", penwidth=3];
    "n0.g1" [shape=box, label="n0.g1\ngpu\nshard 1: 16.00 GiB", style=filled, fillcolor="#fff2cc"];
    "n0.g2" [shape=box, label="n0.g2\ngpu\nshard 2: 16.00 GiB", style=filled, fillcolor="#fff2cc"];
    "n0.g3" [shape=box, label="n0.g3\ngpu\nshard 3: 16.00 GiB", style=filled, fillcolor="#fff2cc"];
    "n0.pcie0" [shape=diamond, label="n0.pcie0\npcie_switch"];
    "n0.pcie1" [shape=diamond, label="n0.pcie1\npcie_switch"];
    "n0.nvs" [shape=hexagon, label="n0.nvs\nnvswitch"];
  }
  "n0.numa0" -- "n0.pcie0" [label="pcie 63.0 GB/s", color="#bbbbbb"];
  "n0.numa1" -- "n0.pcie1" [label="pcie 63.0 GB/s", color="#bbbbbb"];
  "n0.pcie0" -- "n0.g0" [label="pcie 63.0 GB/s", color="#bbbbbb"];
  "n0.pcie0" -- "n0.g1" [label="pcie 63.0 GB/s", color="#bbbbbb"];
  "n0.pcie1" -- "n0.g2" [label="pcie 63.0 GB/s", color="#bbbbbb"];
  "n0.pcie1" -- "n0.g3" [label="pcie 63.0 GB/s", color="#bbbbbb"];
  "n0.numa0" -- "n0.numa1" [label="sys 22.0 GB/s", color="#bbbbbb"];
  "n0.g0" -- "n0.nvs" [label="nvlink 450.0 GB/s", color="#d62728", penwidth=3];
  "n0.g1" -- "n0.nvs" [label="nvlink 450.0 GB/s", color="#d62728", penwidth=3];
  "n0.g2" -- "n0.nvs" [label="nvlink 450.0 GB/s", color="#d62728", penwidth=3];
  "n0.g3" -- "n0.nvs" [label="nvlink 450.0 GB/s", color="#d62728", penwidth=3];
}' "plan --dot: built-in mesh, 33 qubits"
# gather to the host: the devices' PCIe paths back to their NUMA nodes are the gather links
run 0 plan --qubits 20 --policy equal --gather host --dot
same <(grep -c 'color="#d62728", penwidth=3' "$T/out") "6" "plan --dot --gather host: 4 device links + 2 switch uplinks"
same <(grep -c 'nvlink.*penwidth' "$T/out") "0" "plan --dot --gather host: no NVLink on the way"
# --json with --csv / --dot: the usage error's line and the one object, every member null
jerr() { # EXPECTED_LINE ARGS...
  local line=$1; shift
  run 2 "$@"
  same "$T/err" "$line" "error line: $*"
  python3 - "$T/out" "$line" <<'EOF' && ok "json: the usage error's object: $*" || bad "json: the usage error's object: $*"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["ok"] is False and o["error"] == {"code": "E-ARG", "message": sys.argv[2][len("error[E-ARG]: "):]}, o
assert all(v is None for k, v in o.items() if k not in ("ok", "command", "error")), o
EOF
}
jerr "error[E-ARG]: whatif: --json and --csv exclude each other; run 'qmesh whatif --help'" whatif --scenario $S --json --csv
jerr "error[E-ARG]: plan: --json and --dot exclude each other; run 'qmesh plan --help'" plan --qubits 30 --json --dot

echo "test_whatif_cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
