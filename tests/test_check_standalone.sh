#!/usr/bin/env bash
# test_check_standalone.sh SRCDIR -- scripts/check_standalone.py (label scenario): on a fake tree
# with a reference in every scanned place (README.md, docs/, a scenario comment and a `sources:`
# string, include/, examples/, python/, the built-in scenario) and in places it must not scan
# (tests/, bench/, python/tests/), the exact report and exit 1; the same tree cleaned, exit 0;
# no such tree, exit 2; then the real tree, which must name nothing outside the repository.
set -u
SRC=$(cd "$1" && pwd)
. "$(dirname "$0")/testlib.sh"
C="/usr/bin/python3 $SRC/scripts/check_standalone.py"
R=$T/src
mkdir -p "$R"/{docs/sub,scenarios/gen,include,examples,python/qmesh,python/tests,engine/scenario} \
         "$R"/{tests,bench}
printf 'qmesh\n\nSee ../shared/docs/DESIGN.md for the design.\n' >"$R/README.md"
printf '# Planner\n\nThe policies of SCENARIOS.md.\n' >"$R/docs/planner.md"
printf 'fine\nCONFORMANCE.md item 4\n' >"$R/docs/sub/notes.md"
printf '# H100 (HARDWARE.md).\nschema: qmesh/1\nsources:\n  - "HARDWARE.md (qmesh shared docs): 81559 MiB"\n' \
  >"$R/scenarios/a.yaml"
printf 'schema: qmesh/1\nsources: ["NVIDIA H100 datasheet"]\n' >"$R/scenarios/clean.yaml"
printf '# dgx-h100.yaml (HARDWARE.md)\n' >"$R/scenarios/gen/gen.py"
printf '/* codes of SCENARIOS.md */\n' >"$R/include/qmesh.h"
printf '/* see shared/docs */\n' >"$R/examples/encode.c"
printf '# DESIGN.md section 7\n' >"$R/python/qmesh/__init__.py"
printf 'sources:\n  - "docs HARDWARE.md: H100"\n' >"$R/engine/scenario/default_scenario.yaml"
printf 'sources: [HARDWARE.md]\n' >"$R/tests/t.c"
printf 'HARDWARE.md\n' >"$R/bench/r.md"
printf 'HARDWARE.md\n' >"$R/python/tests/test_x.py"
expect="README.md:3: names ../shared, shared/docs, DESIGN.md, outside the repository; state what it says instead
docs/planner.md:3: names SCENARIOS.md, outside the repository; state what it says instead
docs/sub/notes.md:2: names CONFORMANCE.md, outside the repository; state what it says instead
engine/scenario/default_scenario.yaml:2: names HARDWARE.md, outside the repository; state what it says instead
examples/encode.c:1: names shared/docs, outside the repository; state what it says instead
include/qmesh.h:1: names SCENARIOS.md, outside the repository; state what it says instead
python/qmesh/__init__.py:1: names DESIGN.md, outside the repository; state what it says instead
scenarios/a.yaml:1: names HARDWARE.md, outside the repository; state what it says instead
scenarios/a.yaml:4: names HARDWARE.md, outside the repository; state what it says instead
scenarios/gen/gen.py:1: names HARDWARE.md, outside the repository; state what it says instead
standalone: 10 files checked, 10 references"
out=$($C "$R" 2>&1); rc=$?
if [ "$rc" -eq 1 ] && [ "$out" = "$expect" ]; then ok "every reference reported, exit 1"
else bad "fake tree: rc $rc, output:"; echo "$out" | diff <(echo "$expect") - ; fi

# the same tree with every reference rewritten
for f in README.md docs/planner.md docs/sub/notes.md scenarios/a.yaml scenarios/gen/gen.py \
         include/qmesh.h examples/encode.c python/qmesh/__init__.py \
         engine/scenario/default_scenario.yaml; do
  sed -i -e 's#\.\./shared/docs/##g; s#shared/docs#docs/planner.md#g' \
         -e 's#\(HARDWARE\|DESIGN\|SCENARIOS\|CONFORMANCE\)\.md#the datasheet#g' "$R/$f"
done
out=$($C "$R" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && [ "$out" = "standalone: 10 files checked, 0 references" ]; then
  ok "cleaned tree, exit 0"
else bad "cleaned tree: rc $rc: $out"; fi

out=$($C "$T/none" 2>&1); rc=$?
if [ "$rc" -eq 2 ] && [ "$out" = "usage: check_standalone.py ROOT (a source tree)" ]; then
  ok "no tree, exit 2"
else bad "no tree: rc $rc: $out"; fi

out=$($C "$SRC" 2>&1); rc=$?
if [ "$rc" -eq 0 ]; then ok "the repository: ${out##*$'\n'}"
else bad "the repository names documents outside it (rc $rc):"; echo "$out"; fi

echo "pass=$pass fail=$fail"
[ "$fail" -eq 0 ]
