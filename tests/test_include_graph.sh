#!/usr/bin/env bash
# test_include_graph.sh SRCDIR -- scripts/include_graph.py on small fake trees (label unit): a file
# cycle, layer cycles, an upward edge, a forbidden backend include, an allowed edge, stale and
# reasonless allow-list rows, kernels/ including qmesh.h and calling getenv, a file outside every
# layer, python/ including an internal header, a skipped tests/ file, a response file and the `arguments` form; then the same tree cleaned,
# plus a compiler that cannot run (exit 0, --summary, --dot); then no compile_commands.json (exit 2).
# Each run's whole output is compared line for line.
set -u
SRC=$(cd "$1" && pwd)
. "$(dirname "$0")/testlib.sh"
G="/usr/bin/python3 $SRC/scripts/include_graph.py"
R=$T/src
mkdir -p "$R"/{include,core,engine/stages,engine/io,engine/cli,hal/sim,kernels,misc,tests,python} \
         "$R/docs" "$R/build"
# h FILE [INCLUDE...]: a guarded header (quoted includes)
h() {
  local f=$1 g; shift
  g=$(echo "$f" | tr -c 'A-Za-z0-9\n' '_')
  { echo "#ifndef $g"; echo "#define $g"; for i in "$@"; do echo "#include \"$i\""; done
    echo "#endif"; } >"$R/$f"
}
# c FILE [INCLUDE...]: a source
c() { local f=$1; shift; { for i in "$@"; do echo "#include \"$i\""; done
      echo "int x_$(echo "$f" | tr -c 'A-Za-z0-9\n' '_');"; } >"$R/$f"; }
h include/qmesh.h
h core/a.h b.h
h core/b.h a.h
c core/core.c a.h s.h
h engine/stages/s.h qmesh.h
c engine/stages/st.c s.h sim.h
h hal/sim/sim.h qmesh.h
h engine/io/io.h qmesh.h
c engine/io/io.c io.h cli.h
h engine/cli/cli.h io.h
c kernels/k.c qmesh.h
echo 'char *getenv(const char *); char *k_env(void) { return getenv("X"); }' >>"$R/kernels/k.c"
c misc/x.c qmesh.h
c python/m.c qmesh.h s.h
c tests/t.c s.h cli.h
I="-I$R/include -I$R/core -I$R/engine/stages -I$R/engine/io -I$R/engine/cli -I$R/hal/sim"
echo "$I" >"$R/build/includes.rsp"
python3 - "$R" "$I" <<'PY'
import json, sys
root, inc = sys.argv[1], sys.argv[2]
files = ["core/core.c", "engine/stages/st.c", "engine/io/io.c", "kernels/k.c", "misc/x.c",
         "tests/t.c", "python/m.c"]
cmds = [{"directory": root + "/build", "file": root + "/" + f,
         "command": "cc %s -O2 -std=c17 -DX=1 -o %s.o -c %s/%s" % (inc, f.replace("/", "_"), root, f)}
        for f in files]
cmds[0]["command"] = "cc @includes.rsp -o core.o -c %s/core/core.c" % root  # response file
cmds[1] = {"directory": root + "/build", "file": "../engine/stages/st.c",          # arguments form
           "arguments": ["cc"] + inc.split() + ["-c", "../engine/stages/st.c", "-o", "st.o"]}
json.dump(cmds, open(root + "/build/compile_commands.json", "w"), indent=1)
PY
doc() {  # doc ROW...: docs/architecture.md with the marker and these rows
  { echo "# Architecture"; echo; echo "<!-- include-graph: allowed upward includes -->"
    echo "| from | to | reason |"; echo "|---|---|---|"; printf '%s\n' "$@"; echo
    echo "text after the table"; } >"$R/docs/architecture.md"
}
# check NAME EXPECTED-STATUS EXPECTED-OUTPUT-FILE ARGS...
check() {
  local name=$1 want=$2 exp=$3; shift 3
  $G --root "$R" "$@" >"$T/out" 2>&1; local rc=$?
  if [ "$rc" -eq "$want" ] && diff -u "$exp" "$T/out" >"$T/diff"; then
    ok "$name: exit $rc, output as expected"
  else
    bad "$name: exit $rc (want $want)"; cat "$T/diff"
  fi
}

doc "| engine/io/io.c | engine/cli/cli.h | the fake tree's allowed edge |" \
    "| engine/io/io.c | engine/cli/gone.h | stale: no such include |" \
    "| core/core.c | core/a.h | stale: not against any rule |" \
    "| engine/stages/st.c | include/qmesh.h |  |"
cat >"$T/exp1" <<'OUT'
no layer: misc/x.c (docs/architecture.md "Layers and include rules")
cycle: core/a.h -> core/b.h -> core/a.h
layer cycle: backends -> core -> stages -> backends
layer cycle: cli -> io -> cli
allow-list: docs/architecture.md:9: engine/stages/st.c -> include/qmesh.h has no reason
upward: core/core.c -> engine/stages/s.h (layer core -> layer stages)
allowed: engine/io/io.c -> engine/cli/cli.h (layer io -> layer cli)
forbidden: engine/stages/st.c -> hal/sim/sim.h (layer stages -> layer backends): engine/ opens backends only through hal/backend.c
upward: kernels/k.c -> include/qmesh.h (layer kernels -> layer core)
forbidden: python/m.c -> engine/stages/s.h (layer python -> layer stages): python/ includes only the public headers of include/
stale: core/core.c -> core/a.h: allowed in docs/architecture.md, but it breaks no rule
stale: engine/io/io.c -> engine/cli/gone.h: allowed in docs/architecture.md, but there is no such include
getenv: kernels/k.c:3: kernels read no environment
include graph: 13 files, 15 edges, 5 breaking a rule (1 allowed), 2 stale: FAIL
OUT
check "every kind of finding" 1 "$T/exp1" --build "$R/build"

# the same tree, cleaned: only the allowed edge is left
c core/core.c a.h
h core/b.h
c engine/stages/st.c s.h
h engine/cli/cli.h qmesh.h
c kernels/k.c
c python/m.c qmesh.h
rm "$R/misc/x.c"
python3 - "$R" <<'PY'
import json, sys
p = sys.argv[1] + "/build/compile_commands.json"
cmds = [e for e in json.load(open(p)) if not e["file"].endswith("misc/x.c")]
root = sys.argv[1]  # a compiler that cannot run: the file's includes are scanned instead
cmds.append({"directory": root, "file": "engine/io/io2.c",
             "command": "/nonexistent/cc -Iengine/io -c engine/io/io2.c -o io2.o"})
json.dump(cmds, open(p, "w"))
PY
c engine/io/io2.c io.h
doc "| \`engine/io/io.c\` | \`engine/cli/cli.h\` | the fake tree's allowed edge |"
cat >"$T/exp2" <<'OUT'
note: engine/io/io2.c: `cc -MM` failed ([Errno 2] No such file or directory: '/nonexistent/cc'); its #include lines were scanned
allowed: engine/io/io.c -> engine/cli/cli.h (layer io -> layer cli)
edges: python -> core: 1
edges: cli -> core: 1
edges: stages -> stages: 1
edges: stages -> core: 1
edges: io -> cli: 1
edges: io -> io: 2
edges: io -> core: 1
edges: core -> core: 2
include graph: 12 files, 10 edges, 1 breaking a rule (1 allowed), 0 stale: OK
OUT
check "clean tree, --summary" 0 "$T/exp2" --build "$R/build" --summary --dot "$T/layers.dot"
if grep -qx '  "io" -> "cli" \[label="1", color=red\];' "$T/layers.dot" &&
   grep -qx '  "stages" -> "core" \[label="1"\];' "$T/layers.dot" &&
   ! grep -q '"core" -> "core"' "$T/layers.dot"; then
  ok "--dot: layer edges with counts, the upward one red, no self edges"
else
  bad "--dot"; cat "$T/layers.dot"
fi

echo "include_graph: $T/none/compile_commands.json: [Errno 2] No such file or directory: '$T/none/compile_commands.json' (configure with CMake first)" >"$T/exp3"
check "no compile_commands.json" 2 "$T/exp3" --build "$T/none"

echo "pass=$pass fail=$fail"
[ "$fail" -eq 0 ]
