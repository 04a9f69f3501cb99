#!/bin/sh
# plan-vs-encode.sh — the cost model's estimates beside an encode's measurements, phase by phase
# (docs/planner.md "Data path"): `qmesh plan --input FILE --json` and `qmesh encode --input FILE
# --json` on the same scenario, then one row per phase: estimate, measured, measured/estimate.
#
# Usage: scripts/plan-vs-encode.sh QMESH INPUT [--scenario FILE] [FLAGS...]
#   FLAGS go to both commands: --backend sim|cuda, --out FILE.npy | --out-dir DIR, --qubits,
#   --dtype, --policy, --encoding, --dataset (without --backend both run as encode's default,
#   the simulator). Without --scenario this machine is dumped first
#   (`qmesh topo dump --out`, which measures its storage; with no GPU that is the built-in mesh).
#   REPEAT=N (default 3) encodes N times and reports each phase's median; the input is read once
#   before, so the runs read it from the page cache.
# Example (the H200): scripts/plan-vs-encode.sh build/qmesh /data/x28.npy --backend cuda
# Exit 1 when a command fails (its error line is printed).
set -eu
[ $# -ge 2 ] || { echo "usage: $0 QMESH INPUT [--scenario FILE] [FLAGS...]" >&2; exit 2; }
QMESH=$1 INPUT=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
scenario= backend=
for a in "$@"; do
    case $a in
        --scenario) scenario=next ;;
        --backend) backend=given ;;
        *) [ "$scenario" = next ] && scenario=$a ;;
    esac
done
# encode's default backend is the simulator, plan's the devices: plan as encode runs
[ -n "$backend" ] || set -- "$@" --backend sim
if [ -z "$scenario" ]; then
    "$QMESH" topo dump --out "$tmp/machine.yaml"
    set -- --scenario "$tmp/machine.yaml" "$@"
fi
cat "$INPUT" >/dev/null # into the page cache
"$QMESH" plan --input "$INPUT" "$@" --json >"$tmp/plan.json" || { cat "$tmp/plan.json" >&2; exit 1; }
i=0
while [ "$i" -lt "${REPEAT:-3}" ]; do
    "$QMESH" encode --input "$INPUT" "$@" --json >"$tmp/encode.$i.json"
    i=$((i + 1))
done
python3 - "$tmp" "${REPEAT:-3}" <<'PY'
import json, statistics, sys
tmp, n = sys.argv[1], int(sys.argv[2])
plan = json.load(open(tmp + "/plan.json"))
runs = [json.load(open("%s/encode.%d.json" % (tmp, i))) for i in range(n)]
est = plan["estimates_s"]
print("scenario: %s; request: %s" % (plan["scenario"], json.dumps(plan["request"])))
print("%-15s %14s %14s %9s" % ("phase", "estimate_s", "measured_s", "ratio"))
for k in est:
    got = [r["measured_s"].get(k) for r in runs if r.get("measured_s")]
    got = [g for g in got if g is not None]
    m = statistics.median(got) if got else None
    e = est[k]
    cell = lambda v: "%14.6g" % v if v is not None else "%14s" % "-"
    ratio = "%9.3f" % (m / e) if m is not None and e else "%9s" % "-"
    print("%-15s %s %s %s" % (k, cell(e), cell(m), ratio))
print("(median of %d encodes; ratio = measured / estimate; the estimates are the scenario's "
      "hardware, the measurements this machine's)" % n)
PY
