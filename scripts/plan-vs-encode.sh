#!/bin/sh
# plan-vs-encode.sh — the cost model's estimates beside an encode's measurements, phase by phase
# (docs/planner.md "Data path"): `qmesh plan --input FILE --json` and `qmesh encode --input FILE
# --json` on the same scenario, then one row per phase: estimate, measured, measured/estimate.
#
# Usage: scripts/plan-vs-encode.sh QMESH INPUT [--scenario FILE] [FLAGS...]
#   FLAGS go to both commands: --backend sim|cuda, --out FILE.npy | --out-dir DIR, --qubits,
#   --dtype, --policy, --encoding, --dataset (without --backend both run as encode's default,
#   the simulator). Without --scenario this machine is dumped first
#   (`qmesh topo dump --storage-bytes $STORAGE_BYTES --out`, default 2GiB: it measures storage
#   write, storage read and page-cache read on a file of that size, and on a CUDA machine each
#   GPU's pinned copy rates and launch round trip; with no GPU it is the built-in mesh). A 256 MiB
#   write probe measured 1.25-1.40 GB/s on the H200 host where a 4 GiB output sustained
#   1.05-1.09 GB/s, hence the larger default. The dump also times removing the probe file
#   (storage.remove): an output written over an earlier one pays that at its commit, so each
#   phase's estimate is the one each encode planned for itself (the first encode's --out path may
#   be new, the next ones replace it), their median.
#   REPEAT=N (default 3) encodes N times and reports each phase's median; the input is read once
#   before, so the runs read it from the page cache (the plan's data path line, printed first,
#   says how much of it the plan found there). The last column says whether the ratio is within
#   the +-15% of issue 17 item 7.
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
    "$QMESH" topo dump --storage-bytes "${STORAGE_BYTES:-2GiB}" --out "$tmp/machine.yaml"
    set -- --scenario "$tmp/machine.yaml" "$@"
fi
cat "$INPUT" >/dev/null # into the page cache
"$QMESH" plan --input "$INPUT" "$@" --json >"$tmp/plan.json" || { cat "$tmp/plan.json" >&2; exit 1; }
"$QMESH" plan --input "$INPUT" "$@" | grep '^data path' || true
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
# each encode's own plan: the same scenario and request, but an output path that holds the last
# encode's output is replaced (its removal is in that encode's write estimate)
est = {k: statistics.median(r["plan"]["estimates_s"][k] for r in runs)
          if all(r["plan"]["estimates_s"][k] is not None for r in runs) else None
       for k in plan["estimates_s"]}
print("scenario: %s; request: %s" % (plan["scenario"], json.dumps(plan["request"])))
print("%-15s %14s %14s %9s %8s" % ("phase", "estimate_s", "measured_s", "ratio", "+-15%"))
for k in est:
    got = [r["measured_s"].get(k) for r in runs if r.get("measured_s")]
    got = [g for g in got if g is not None]
    m = statistics.median(got) if got else None
    e = est[k]
    cell = lambda v: "%14.6g" % v if v is not None else "%14s" % "-"
    ratio = "%9.3f" % (m / e) if m is not None and e else "%9s" % "-"
    within = ("%8s" % ("yes" if abs(m / e - 1) <= 0.15 else "no")) if m is not None and e else "%8s" % "-"
    print("%-15s %s %s %s %s" % (k, cell(e), cell(m), ratio, within))
print("(median of %d encodes and of their own plans' estimates; ratio = measured / estimate; the "
      "estimates are the scenario's hardware, the measurements this machine's)" % n)
PY
