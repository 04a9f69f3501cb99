#!/usr/bin/env bash
# test_scale_cli.sh QMESH — planning at 10^4 devices through the CLI (results, never times):
#  - 32768 devices (4096 hosts x 8 H100, scenarios/gen/gen_big.py) load and plan: 48 qubits
#    complex64 equal over 32768 shards of 64 GiB, the frontier 48 / 47, 49 qubits E-CAPACITY;
#  - one host with 8192 devices on one NVSwitch plans (affinity order = given order);
#  - topo show on 8192 devices prints the summary, not the 67-million-pair matrix (text and JSON),
#    and --matrix with --summary is a usage error;
#  - plan --phantom / encode --phantom: a 45-qubit complex64 what-if on 256 hosts x 8 H200
#    accounts 2048 shards of exactly 128 GiB (2^37 bytes), 2^48 bytes in all; encode --phantom
#    refuses --out with E-ARG and writes nothing.
set -uo pipefail
Q=$1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$(dirname "$0")/testlib.sh"
GEN="/usr/bin/env python3 $ROOT/scenarios/gen/gen_big.py"

expect() { # NAME EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: expected [$2] got [$3]"; fi
}

# ---- 32768 devices ------------------------------------------------------------------------------
$GEN "$T/c32k.yaml" --hosts 4096 --gpus-per-host 8
"$Q" plan --scenario "$T/c32k.yaml" --qubits 48 --json > "$T/p.json" 2> "$T/p.err"
expect "32768: plan exit" 0 $?
got=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
s = d["shards"]
print(d["feasible"], d["policy"], d["pages"], len(s), s[0]["device"], s[0]["bytes"],
      s[-1]["device"], s[-1]["end"], d["max_qubits"]["complex64"], d["max_qubits"]["complex128"],
      d["gather"]["target"])' "$T/p.json")
expect "32768: 48 qubits on 32768 shards of 64 GiB" \
  "True equal 32768 32768 n0.g0 68719476736 n4095.g7 281474976710656 48 47 n0.g0" "$got"
"$Q" plan --scenario "$T/c32k.yaml" --qubits 49 > /dev/null 2> "$T/e.err"
expect "32768: 49 qubits exit" 1 $?
expect "32768: 49 qubits E-CAPACITY" \
  "error[E-CAPACITY]: feasibility: shard 0 needs 128.00 GiB (+ 64.00 MiB staging) on n0.g0 but 78.65 GiB is usable; largest state that fits is 48 qubits (complex64)" \
  "$(tail -1 "$T/e.err")"

# ---- one host, 8192 devices, and topo show's summary --------------------------------------------
$GEN "$T/h8k.yaml" --hosts 1 --gpus-per-host 8192
"$Q" plan --scenario "$T/h8k.yaml" --qubits 46 --policy equal --json > "$T/h.json" 2> /dev/null
expect "one host: plan exit" 0 $?
got=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
s = d["shards"]
print(len(s), s[0]["device"], s[1]["device"], s[8191]["device"], s[0]["bytes"], d["max_qubits"]["complex64"])' "$T/h.json")
expect "one host: 8192 shards in given order" "8192 n0.g0 n0.g1 n0.g8191 68719476736 46" "$got"
"$Q" topo show "$T/h8k.yaml" > "$T/t.txt" 2>&1
expect "topo show summary exit" 0 $?
expect "topo show summary lines" "scenario: big-1x8192 ($T/h8k.yaml), 8192 devices
devices: 8192 on 1 hosts in 1 ranks; usable 78.65 GiB to 78.65 GiB per device
links: nvlink 8192 c2c 0 pcie 24576 sys 1 net 8192
best peer in its rank (devices):
  nvlink      370.8 GB/s  8192
(summary of 8192 devices; the full path matrix with --matrix)

best-connected device of rank 0 (the gather device): n0.g0
rank 0: n0.g0 n0.g1 n0.g2 n0.g3 n0.g4 n0.g5 n0.g6 n0.g7 n0.g8 n0.g9 n0.g10 n0.g11 n0.g12 n0.g13 n0.g14 n0.g15 ... (8192 devices)" \
  "$(cat "$T/t.txt")"
"$Q" topo show "$T/h8k.yaml" --json > "$T/t.json"
got=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
s = d["summary"]
b = s["best_peer_in_rank"]
print(d["paths"], d["best_connected"], d["best_connected_rank0"], s["devices"], s["hosts"], s["ranks"],
      s["links_per_class"]["nvlink"], len(b), b[0]["class"], b[0]["bw_bytes_per_s"], b[0]["devices"],
      len(d["devices"]))' "$T/t.json")
expect "topo show --json summary" "None None n0.g0 8192 1 1 8192 1 nvlink 370800000000.0 8192 8192" "$got"
"$Q" topo show "$T/h8k.yaml" --matrix --summary > /dev/null 2> "$T/u.err"
expect "--matrix --summary exit" 2 $?
expect "--matrix --summary message" \
  "error[E-ARG]: topo show: --matrix and --summary exclude each other; run 'qmesh topo show --help'" "$(cat "$T/u.err")"

# ---- phantom what-if: 45 qubits complex64 on 256 hosts x 8 H200 -----------------------------------
python3 - "$T/whatif.yaml" <<'PY'
import sys
hosts = 256
b = ["schema: qmesh/1\nname: whatif\nsources: [test_scale_cli.sh]\ndefaults: {reserve: 1 GiB}\n"
     "device_types:\n  - {name: h200, memory: 143771 MiB, hbm_bandwidth: 4.8 TB/s}\nhosts:\n"]
for h in range(hosts):
    b.append(f"  - id: n{h}\n    memory: 2 TiB\n    numa: [{{id: 0}}]\n    devices:\n")
    b += [f"      - {{id: n{h}.g{g}, type: h200, numa: 0}}\n" for g in range(8)]
    b.append(f"    switches: [{{id: n{h}.nvs, kind: nvswitch}}]\n"
             f"    nics: [{{id: n{h}.ib, speed: 400 Gb/s, numa: 0}}]\n")
b.append("links:\n")
b += [f"  - {{a: n{h}.numa0, b: n{h}.g{g}, kind: pcie, bandwidth: 55 GB/s}}\n"
      for h in range(hosts) for g in range(8)]
b.append("fabrics:\n")
for h in range(hosts):
    m = ", ".join(f"n{h}.g{g}" for g in range(8))
    b.append(f"  - {{id: n{h}.nvl, kind: nvlink, switch: n{h}.nvs, members: [{m}], port_bandwidth: 450 GB/s}}\n")
b.append("  - {id: ib, kind: net, port_bandwidth: 50 GB/s, members: ["
         + ", ".join(f"n{h}.ib" for h in range(hosts)) + "]}\n")
open(sys.argv[1], "w").write("".join(b))
PY
"$Q" plan --phantom --scenario "$T/whatif.yaml" --qubits 45 --dtype complex64 > "$T/w.txt" 2>&1
expect "plan --phantom exit" 0 $?
expect "plan --phantom accounting" "phantom: 2048 shards, 281474976710656 bytes (256.00 TiB) reserved on 2048 of 2048 devices; no memory allocated
  137438953472 bytes (128.00 GiB) on 2048 devices" "$(tail -2 "$T/w.txt")"
"$Q" plan --phantom --scenario "$T/whatif.yaml" --qubits 45 --json > "$T/w.json"
got=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
p = d["phantom"]
print(p["shards"], p["reserved_bytes"], len(p["devices"]), p["devices"][0]["id"],
      p["devices"][0]["reserved_bytes"], p["devices"][2047]["reserved_bytes"], d["policy"])' "$T/w.json")
expect "plan --phantom --json" "2048 281474976710656 2048 n0.g0 137438953472 137438953472 equal" "$got"
python3 -c 'import sys; from npy_write import npy; npy(sys.argv[1], "<f4", "(4,)", [1, 2, 3, 4], "f")' "$T/x.npy"
"$Q" encode --phantom --input "$T/x.npy" --qubits 45 --scenario "$T/whatif.yaml" > "$T/x.txt" 2>&1
expect "encode --phantom exit" 0 $?
expect "encode --phantom accounting" "$(tail -2 "$T/w.txt")" "$(tail -2 "$T/x.txt")"
"$Q" encode --phantom --input "$T/x.npy" --qubits 45 --scenario "$T/whatif.yaml" --out "$T/o.npy" > /dev/null 2> "$T/o.err"
expect "encode --phantom --out exit" 1 $?
expect "encode --phantom --out message" \
  "error[E-ARG]: encode --phantom: --out $T/o.npy would need the amplitudes, which a phantom mesh does not hold; drop it (the plan and per-device bytes are printed)" \
  "$(cat "$T/o.err")"
expect "encode --phantom --out wrote nothing" "" "$(ls "$T" | grep '^o\.npy' || true)"
# over capacity: 46 qubits on the same cluster names the overflow, exit 1
"$Q" plan --phantom --scenario "$T/whatif.yaml" --qubits 46 --policy equal > /dev/null 2> "$T/c.err"
expect "plan --phantom infeasible exit" 1 $?
expect "plan --phantom infeasible message" \
  "error[E-CAPACITY]: plan --phantom: feasibility: shard 0 needs 256.00 GiB (+ 64.00 MiB staging) on n0.g0 but 139.40 GiB is usable; largest state that fits is 45 qubits (complex64)" \
  "$(cat "$T/c.err")"

echo "test_scale_cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
