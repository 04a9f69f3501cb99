#!/usr/bin/python3
"""bench_e2e.py -- the whole `qmesh encode` run against the PyTorch script that does the same job,
in the same run (issue 17's end-to-end comparison).

Usage: python3 bench/bench_e2e.py [--build build] [--backend cuda|sim] [--log2 28]
       [--rows 65536 --features 1021] [--repeat 3] [--dir /tmp/qmesh-e2e]

Jobs (float64 .npy input, read from the page cache: each file is read once before timing):
  single: one state of 2^LOG2 values;  batch: ROWS x FEATURES.
Each job two ways: file -> device (no output file) and file -> file (--out OUT.npy, complex128).
qmesh: the whole process `qmesh encode --backend B --input F [--out O] --json`, wall clock, and its
own phase times from --json. PyTorch: the six-line script below as a whole process (python3 -c),
wall clock, and its in-process time after `import torch` and CUDA initialization (the part a
long-lived training process pays per job). Medians of --repeat runs. Outputs are compared.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

TORCH_SCRIPT = r"""
import sys, time, numpy as np, torch
dev = sys.argv[1]; src = sys.argv[2]; out = sys.argv[3] if len(sys.argv) > 3 else ""
torch.zeros(1, device=dev); torch.cuda.synchronize() if dev == "cuda" else None
t0 = time.perf_counter()
x = torch.from_numpy(np.load(src)).to(dev)
x2 = x.reshape(1, -1) if x.dim() == 1 else x
n = 1 << max(0, (x2.shape[1] - 1).bit_length())
y = torch.nn.functional.pad(x2 / torch.linalg.vector_norm(x2, dim=1, keepdim=True), (0, n - x2.shape[1]))
y = y.to(torch.complex128).reshape(-1) if x.dim() == 1 else y.to(torch.complex128)
if out: np.save(out, y.cpu().numpy())
if dev == "cuda": torch.cuda.synchronize()
print("inproc_s %.6f" % (time.perf_counter() - t0))
"""


def run(cmd, env=None):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr[-2000:]))
    return wall, p.stdout


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--log2", type=int, default=28)
    ap.add_argument("--rows", type=int, default=65536)
    ap.add_argument("--features", type=int, default=1021)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/qmesh-e2e")
    ap.add_argument("--python", default=sys.executable, help="the interpreter that has torch")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    qmesh = os.path.join(args.build, "qmesh")
    rng = np.random.default_rng(11)
    jobs = []
    single = os.path.join(args.dir, "single.npy")
    if not os.path.exists(single):
        np.save(single, rng.standard_normal(1 << args.log2))
    jobs.append(("single 2^%d" % args.log2, single))
    batch = os.path.join(args.dir, "batch.npy")
    if not os.path.exists(batch):
        np.save(batch, rng.standard_normal((args.rows, args.features)))
    jobs.append(("batch %dx%d" % (args.rows, args.features), batch))
    dev = "cuda" if args.backend == "cuda" else "cpu"
    print("machine: %d cpus; qmesh %s --backend %s; torch on %s; medians of %d"
          % (os.cpu_count(), qmesh, args.backend, dev, args.repeat))
    print("%-20s %-13s %10s %10s %10s %12s %8s %8s  %s" % (
        "job", "path", "qmesh s", "torch s", "torch in", "qmesh/torch", "x wall", "x inproc",
        "qmesh phases (s, median)"))
    for name, src in jobs:
        with open(src, "rb") as f:  # into the page cache
            while f.read(1 << 26):
                pass
        for path in ("file->device", "file->file"):
            qo = os.path.join(args.dir, "q.npy")
            to = os.path.join(args.dir, "t.npy")
            qcmd = [qmesh, "encode", "--backend", args.backend, "--input", src, "--json"]
            tcmd = [args.python, "-c", TORCH_SCRIPT, dev, src]
            if path == "file->file":
                qcmd += ["--out", qo]
                tcmd += [to]
            qw, tw, ti, phases = [], [], [], {}
            for _ in range(args.repeat):
                w, out = run(qcmd)
                qw.append(w)
                o = json.loads(out)
                for k, v in list(o.get("seconds", {}).items()) + list(o.get("measured_s", {}).items()):
                    if isinstance(v, (int, float)):
                        phases.setdefault(k, []).append(v)
                w, out = run(tcmd)
                tw.append(w)
                ti.append(float(out.split()[-1]))
            same = ""
            if path == "file->file":
                a, b = np.load(qo, mmap_mode="r"), np.load(to, mmap_mode="r")
                same = "max|diff| %.1e" % float(np.max(np.abs(a - b))) if a.shape == b.shape \
                    else "shapes %s vs %s" % (a.shape, b.shape)
                os.remove(qo)
                os.remove(to)
            ph = " ".join("%s %.3f" % (k, med(v)) for k, v in phases.items())
            print("%-20s %-13s %10.3f %10.3f %10.3f %12.2f %8.2f %8.2f  %s %s" % (
                name, path, med(qw), med(tw), med(ti), med(qw) / med(tw), med(tw) / med(qw),
                med(ti) / med(qw), ph, same))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
