#!/usr/bin/python3
"""include_graph.py -- qmesh's include graph, from the compiler, checked against the layers.

Usage: scripts/include_graph.py [--build DIR] [--dot FILE] [--summary] [--root DIR] [--doc FILE]

The graph: every project source in DIR/compile_commands.json (not tests/, bench/, examples/ or a
build folder's generated files) is compiled again with its own -I/-iquote/-isystem/-D/-U/-std/-x
flags and `-MM` (gcc for .c, nvcc for .cu: nvcc -MM lists the non-system headers the same way),
which gives every project header the compiler really opened for it. -MM gives the transitive
closure, so the direct edges come from the `#include` lines of the source and of each header in
that closure, resolved as the compiler does (quoted: the includer's folder, then -iquote, then
-I; angled: -I, then -isystem), an edge counting only when its target is in the compiler's closure
(an include under an #if the compiler did not take drops out, unless the same header is reached
another way). Where the compiler cannot be run (nvcc absent), that file's closure is found by the
same scan from its include lines alone (said in a `note:` line). Files under kernels/ that this
build does not compile (the .cu files of a CPU-only build) are scanned too, against their own
folder and include/.

Layers, top to bottom (docs/architecture.md "Layers and include rules"):
  python > cli > pipeline > stages > scenario > io > comm > factory > backends > hal > core > kernels
A file may include its own layer or any lower one; kernels only kernels, and only the HAL and
its backends include kernels/; python/ (a front end) only itself and the public headers of
include/. Moreover engine/ never
includes a backend's header (only hal/backend.c opens backends), hal/cuda includes no engine/
header, and no file under kernels/ calls getenv.

Prints every upward or forbidden edge (`upward: FILE -> HEADER (layer A -> layer B)`, `forbidden:
... : RULE`, or `allowed: ...` when docs/architecture.md's allow-list has it), file cycles
(`cycle: a -> b -> a`), layer cycles, stale allow-list rows, and a last summary line. Exit status:
0 when clean, 1 on any cycle, edge not allowed, stale or reasonless row, getenv in kernels/ or file
outside every layer, 2 on a usage error (no compile_commands.json).
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

LAYERS = ["python", "cli", "pipeline", "stages", "scenario", "io", "comm", "factory", "backends", "hal",
          "core", "kernels"]  # top to bottom
RANK = {name: len(LAYERS) - i for i, name in enumerate(LAYERS)}
SKIP_DIRS = ("tests/", "bench/", "examples/")
BACKEND_HEADERS = ("hal/sim/sim.h", "hal/cuda/cuda_backend.h", "hal/fault/fault.h")
MARKER = "<!-- include-graph: allowed upward includes -->"
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
SOURCE_EXTS = (".c", ".h", ".cu", ".cuh", ".cpp", ".hpp")


def layer_of(rel):
    """The layer of a path relative to the project root, None when it is in none."""
    for prefix, layer in (("python/", "python"), ("engine/cli/", "cli"), ("engine/pipeline/", "pipeline"),
                          ("engine/stages/", "stages"), ("engine/scenario/", "scenario"),
                          ("engine/io/", "io"), ("comm/", "comm"), ("hal/sim/", "backends"),
                          ("hal/cuda/", "backends"), ("hal/fault/", "backends"),
                          ("core/", "core"), ("include/", "core"), ("kernels/", "kernels")):
        if rel.startswith(prefix):
            return layer
    if rel in ("hal/backend.c", "hal/backend.h"):
        return "factory"
    if rel.startswith("hal/") and "/" not in rel[len("hal/"):]:
        return "hal"
    return None


def rule_broken(src, dst):
    """(kind, why) when the edge src -> dst breaks a rule, else None."""
    a, b = layer_of(src), layer_of(dst)
    if a == "kernels" and b != "kernels":
        return "upward", None
    if RANK[b] > RANK[a]:
        return "upward", None
    if a == "python" and b != "python" and not dst.startswith("include/"):
        return "forbidden", "python/ includes only the public headers of include/"
    if b == "kernels" and a not in ("kernels", "hal", "backends"):
        return "forbidden", "only the HAL and its backends include kernels/"
    if src.startswith("engine/") and src != "hal/backend.c" and dst in BACKEND_HEADERS:
        return "forbidden", "engine/ opens backends only through hal/backend.c"
    if src.startswith("hal/cuda/") and dst.startswith("engine/"):
        return "forbidden", "hal/cuda includes no engine/ header"
    return None


class Compile:
    """One compile command: compiler, the flags that decide what is included, the include dirs."""

    def __init__(self, entry):
        self.cwd = entry["directory"]
        argv = list(entry["arguments"]) if "arguments" in entry else shlex.split(entry["command"])
        argv = self._expand(argv)
        self.compiler = argv[0]
        self.file = os.path.realpath(os.path.join(self.cwd, entry["file"]))
        self.quote, self.dirs, self.system, self.keep = [], [], [], []
        i = 1
        while i < len(argv):
            t = argv[i]
            flag, val = None, None
            for f in ("-isystem", "-iquote", "-include", "-I", "-D", "-U", "-x"):
                if t == f and i + 1 < len(argv):
                    flag, val = f, argv[i + 1]
                    i += 1
                    break
                if t.startswith(f) and len(t) > len(f):
                    flag, val = f, t[len(f):].lstrip("=") if f.startswith("-i") else t[len(f):]
                    break
            i += 1
            if flag in ("-I", "-isystem", "-iquote", "-include"):
                val = os.path.normpath(os.path.join(self.cwd, val))
                {"-I": self.dirs, "-isystem": self.system, "-iquote": self.quote}.get(
                    flag, []).append(val)
                self.keep += [flag, val]
            elif flag:
                self.keep += [flag, val]
            elif t.startswith(("-std=", "--std=")) or t == "-fopenmp":
                self.keep.append(t)

    def _expand(self, argv):
        """Response files: @FILE (gcc) and --options-file FILE (nvcc), relative to cwd."""
        out, i = [], 0
        while i < len(argv):
            t, path = argv[i], None
            if t.startswith("@"):
                path = t[1:]
            elif t in ("--options-file", "-optf") and i + 1 < len(argv):
                path = argv[i + 1]
                i += 1
            elif t.startswith("--options-file="):
                path = t.split("=", 1)[1]
            if path is None:
                out.append(t)
            else:
                with open(os.path.join(self.cwd, path), encoding="utf-8") as f:
                    out += self._expand(shlex.split(f.read()))
            i += 1
        return out

    def resolve(self, includer, kind, name):
        """The file that `#include <name>` / "name" in includer opens; None when no dir has it."""
        dirs = ([os.path.dirname(includer)] + self.quote if kind == '"' else []) + self.dirs + \
            self.system
        for d in dirs:
            path = os.path.join(d, name)
            if os.path.isfile(path):
                return os.path.realpath(path)
        return None


class Graph:
    def __init__(self, root, build):
        self.root, self.build = root, build
        self.edges = set()    # (src, dst), paths relative to root
        self.files = set()    # every project file seen (analysed or included)
        self.notes = []
        self._includes = {}

    def rel(self, path):
        """Path relative to the root, None for a file outside the project (system, build folder)."""
        path = os.path.realpath(path)
        if path == self.build or path.startswith(self.build + os.sep):
            return None
        rel = os.path.relpath(path, self.root)
        if rel.startswith(".." + os.sep) or rel == "..":
            return None
        return rel

    def includes(self, path):
        if path not in self._includes:
            found = []
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    for line in f:
                        m = INCLUDE_RE.match(line)
                        if m:
                            found.append((m.group(1), m.group(2)))
            except OSError:
                pass
            self._includes[path] = found
        return self._includes[path]

    def closure_by_compiler(self, cc):
        """The project files cc's compiler opens for its source (-MM), None when it cannot run."""
        cmd = [cc.compiler] + cc.keep + ["-MM", cc.file]
        try:
            p = subprocess.run(cmd, cwd=cc.cwd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, str(e)
        if p.returncode != 0:
            return None, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[0]
        deps = set()
        for rule in p.stdout.replace("\\\n", " ").splitlines():
            if ":" in rule:
                for d in rule.split(":", 1)[1].split():
                    deps.add(os.path.realpath(os.path.join(cc.cwd, d)))
        return deps, None

    def closure_by_scan(self, cc, start):
        seen, frontier = {start}, [start]
        while frontier:
            f = frontier.pop()
            for kind, name in self.includes(f):
                dst = cc.resolve(f, kind, name)
                if dst and self.rel(dst) and dst not in seen:
                    seen.add(dst)
                    frontier.append(dst)
        return seen

    def add_unit(self, cc, deps):
        """Direct edges of the source and every project file in its closure `deps`."""
        deps = {d for d in deps if self.rel(d)} | {cc.file}
        for f in deps:
            self.files.add(self.rel(f))
            for kind, name in self.includes(f):
                dst = cc.resolve(f, kind, name)
                if dst in deps and dst != f:
                    self.edges.add((self.rel(f), self.rel(dst)))


def load_allow_list(doc, rel_doc):
    """{(from, to): reason} from the table after MARKER; errors as printable lines."""
    allowed, errors = {}, []
    try:
        with open(doc, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        return allowed, ["allow-list: cannot read %s: %s" % (rel_doc, e.strerror)]
    if MARKER not in [ln.strip() for ln in lines]:
        return allowed, ["allow-list: %s has no line %s" % (rel_doc, MARKER)]
    i = [ln.strip() for ln in lines].index(MARKER) + 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    rows = []
    while i < len(lines) and lines[i].strip().startswith("|"):
        rows.append((i + 1, lines[i].strip()))
        i += 1
    for lineno, row in rows[2:]:  # header and |---| rows first
        cells = [c.strip().strip("`").strip() for c in row.strip("|").split("|")]
        if len(cells) != 3 or not cells[0] or not cells[1]:
            errors.append("allow-list: %s:%d: not a row | from | to | reason |" % (rel_doc, lineno))
        elif not cells[2]:
            errors.append("allow-list: %s:%d: %s -> %s has no reason" % (rel_doc, lineno, cells[0],
                                                                        cells[1]))
        else:
            allowed[(cells[0], cells[1])] = cells[2]
    return allowed, errors


def cycles(nodes, edges):
    """One simple cycle per strongly connected component with a cycle, each from its least node."""
    succ = {n: sorted(b for a, b in edges if a == n) for n in nodes}
    index, low, stack, on, comps = {}, {}, [], set(), []

    def strong(v):  # Tarjan, iterative
        work = [(v, 0)]
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        while work:
            n, i = work.pop()
            if i < len(succ[n]):
                work.append((n, i + 1))
                w = succ[n][i]
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, 0))
                elif w in on:
                    low[n] = min(low[n], index[w])
                continue
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[n])
            if low[n] == index[n]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == n:
                        break
                comps.append(comp)

    for n in sorted(nodes):
        if n not in index:
            strong(n)
    found = []
    for comp in comps:
        start = min(comp)
        if len(comp) == 1 and start not in succ[start]:
            continue
        parent, queue = {start: None}, [start]  # shortest way back to start inside comp
        while queue:
            n = queue.pop(0)
            if start in succ[n] and (n != start or len(comp) == 1):
                path = []
                while n is not None:
                    path.append(n)
                    n = parent[n]
                found.append(path[::-1] + [start])
                break
            for w in succ[n]:
                if w in comp and w not in parent:
                    parent[w] = n
                    queue.append(w)
    return sorted(found)


def main():
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=None, help="build folder with compile_commands.json")
    ap.add_argument("--root", default=here, help="project root (default: this script's repo)")
    ap.add_argument("--doc", default=None, help="the allow-list file (ROOT/docs/architecture.md)")
    ap.add_argument("--dot", help="write the layer graph (Graphviz dot, edge counts) to FILE")
    ap.add_argument("--summary", action="store_true", help="print edge counts per layer pair")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    root = os.path.realpath(args.root)
    build = os.path.realpath(args.build or os.path.join(root, "build"))
    doc = args.doc or os.path.join(root, "docs", "architecture.md")
    rel_doc = os.path.relpath(os.path.realpath(doc), root)
    try:
        with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
            entries = json.load(f)
    except (OSError, ValueError) as e:
        print("include_graph: %s/compile_commands.json: %s (configure with CMake first)" %
              (build, e), file=sys.stderr)
        return 2

    g = Graph(root, build)
    units = []
    for e in entries:
        cc = Compile(e)
        rel = g.rel(cc.file)
        if rel and not rel.startswith(SKIP_DIRS) and cc.file not in [u.file for u in units]:
            units.append(cc)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(g.closure_by_compiler, units))
    for cc, (deps, err) in sorted(zip(units, results), key=lambda x: x[0].file):
        if deps is None:
            g.notes.append("note: %s: `%s -MM` failed (%s); its #include lines were scanned" %
                           (g.rel(cc.file), os.path.basename(cc.compiler), err))
            deps = g.closure_by_scan(cc, cc.file)
        g.add_unit(cc, deps)
    # kernels/ files this build does not compile (the .cu files of a CPU-only build)
    kdir = os.path.join(root, "kernels")
    for dirpath, _, names in os.walk(kdir):
        for name in sorted(names):
            path = os.path.join(dirpath, name)
            if name.endswith(SOURCE_EXTS) and g.rel(path) not in g.files:
                inc = ["-I" + kdir, "-I" + os.path.join(root, "include")]
                cc = Compile({"directory": root, "file": path, "arguments": ["cc"] + inc})
                g.add_unit(cc, g.closure_by_scan(cc, os.path.realpath(path)))

    failed = False
    out = list(g.notes)
    unmapped = sorted(f for f in g.files if layer_of(f) is None)
    for f in unmapped:
        out.append("no layer: %s (docs/architecture.md \"Layers and include rules\")" % f)
    failed |= bool(unmapped)
    edges = {(a, b) for a, b in g.edges if layer_of(a) and layer_of(b)}
    for cyc in cycles(g.files, edges):
        out.append("cycle: " + " -> ".join(cyc))
        failed = True
    layer_edges = {}
    for a, b in edges:
        key = (layer_of(a), layer_of(b))
        layer_edges[key] = layer_edges.get(key, 0) + 1
    for cyc in cycles(set(LAYERS), {k for k in layer_edges if k[0] != k[1]}):
        out.append("layer cycle: " + " -> ".join(cyc))
        failed = True

    allowed, errors = load_allow_list(doc, rel_doc)
    out += errors
    failed |= bool(errors)
    bad_edges, n_allowed = set(), 0
    for a, b in sorted(edges):
        broken = rule_broken(a, b)
        if not broken:
            continue
        bad_edges.add((a, b))
        what = "%s -> %s (layer %s -> layer %s)" % (a, b, layer_of(a), layer_of(b))
        if (a, b) in allowed:
            out.append("allowed: " + what)
            n_allowed += 1
        elif broken[0] == "upward":
            out.append("upward: " + what)
            failed = True
        else:
            out.append("forbidden: %s: %s" % (what, broken[1]))
            failed = True
    stale = 0
    for a, b in sorted(allowed):
        if (a, b) in bad_edges:
            continue
        if (a, b) in edges:
            out.append("stale: %s -> %s: allowed in %s, but it breaks no rule" % (a, b, rel_doc))
        elif a not in g.files:
            out.append("note: %s -> %s: %s is not compiled in this build; not checked" % (a, b, a))
            continue
        else:
            out.append("stale: %s -> %s: allowed in %s, but there is no such include" %
                       (a, b, rel_doc))
        stale += 1
        failed = True
    for dirpath, _, names in os.walk(kdir):
        for name in sorted(names):
            path = os.path.join(dirpath, name)
            if not name.endswith(SOURCE_EXTS):
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    if re.search(r"\bgetenv\b", line):
                        out.append("getenv: %s:%d: kernels read no environment" %
                                   (g.rel(path), lineno))
                        failed = True

    by_rank = sorted(layer_edges.items(), key=lambda x: (-RANK[x[0][0]], -RANK[x[0][1]]))
    if args.summary:
        for (a, b), n in by_rank:
            out.append("edges: %s -> %s: %d" % (a, b, n))
    if args.dot:
        with open(args.dot, "w", encoding="utf-8") as f:
            f.write("digraph qmesh_layers {\n  rankdir=TB;\n  node [shape=box];\n")
            for name in LAYERS:
                f.write('  "%s";\n' % name)
            for (a, b), n in by_rank:
                if a == b:
                    continue
                up = a == "kernels" or RANK[b] > RANK[a]
                f.write('  "%s" -> "%s" [label="%d"%s];\n' % (a, b, n, ", color=red" if up else ""))
            f.write("}\n")
    n_bad = len(bad_edges)
    out.append("include graph: %d files, %d edges, %d breaking a rule (%d allowed), %d stale: %s" %
               (len(g.files), len(edges), n_bad, n_allowed, stale, "FAIL" if failed else "OK"))
    print("\n".join(out))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
