#!/usr/bin/python3
"""bench_stream.py -- samples per second of streaming amplitude encoding from a .npy file:
qmesh.stream (a reader thread reading ahead, one state per batch) against the same loop in plain
PyTorch, in the same run, for 10-qubit and 16-qubit states.

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/bench_stream.py [--backend auto|sim|cuda]
       [--build build] [--repeats 3] [--dir DIR] [--case QUBITS:SAMPLES:BATCH ...]

For each case a float32 .npy file of SAMPLES x 2**QUBITS values is written (into --dir, default a
temporary directory; removed at the end) and read once to put it in the page cache. Then, median
(and best) of --repeats runs of each loop over the whole file:

  qmesh          for state in qmesh.stream(path, BATCH, prefetch=2, backend=B): pass
                 (each state: complex64, 2**QUBITS amplitudes per sample, on the backend's devices)
  qmesh CLI      qmesh encode --input path --batch-size BATCH [--backend cuda] --json: its own
                 samples_per_s (no output file: encode and norm check only)
  torch          a = np.load(path, mmap_mode="r"); per batch: torch.from_numpy(a[i:i+BATCH]) ->
                 .to(device) -> x / x.norm(dim=1, keepdim=True) -> .to(torch.complex64)
                 (synchronized on CUDA); the device is cuda with --backend cuda, else cpu

Both produce the same thing per batch: normalized complex64 states of the batch's rows in the
backend's memory (the first batch is compared, to 1e-6). backend auto: cuda when torch sees a GPU
and qmesh was built with CUDA, else sim (the simulator: states in host memory, and torch on the
CPU). Prints one table; numbers are for this machine and this run.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time

import numpy as np

import qmesh

try:
    import torch
except ImportError:  # the torch rows are then skipped
    torch = None


def timed(fn, repeats):
    t = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return statistics.median(t), min(t)


def qmesh_loop(path, batch, backend):
    n = 0
    for st in qmesh.stream(path, batch, prefetch=2, backend=backend):
        n += st.batch
    return n


def torch_loop(path, batch, device):
    a = np.load(path, mmap_mode="r")
    n = 0
    for i in range(0, a.shape[0], batch):
        x = torch.from_numpy(np.array(a[i:i + batch])).to(device)  # read the chunk
        x = x / x.norm(dim=1, keepdim=True)
        out = x.to(torch.complex64)
        n += out.shape[0]
    if device == "cuda":
        torch.cuda.synchronize()
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="auto", choices=("auto", "sim", "cuda"))
    ap.add_argument("--build", default="build")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--case", action="append", default=None,
                    help="QUBITS:SAMPLES:BATCH (default 10:8192:1024 and 16:256:32)")
    args = ap.parse_args()
    cases = [tuple(int(v) for v in c.split(":")) for c in (args.case or
                                                          ["10:8192:1024", "16:256:32"])]
    backend = args.backend
    if backend == "auto":
        cuda = torch is not None and torch.cuda.is_available()
        try:
            cuda = cuda and any(d["backend"] == "cuda" for d in qmesh.devices("cuda"))
        except qmesh.Error:
            cuda = False
        backend = "cuda" if cuda else "sim"
    device = "cuda" if backend == "cuda" else "cpu"
    cli = os.path.join(args.build, "qmesh")
    work = args.dir or tempfile.mkdtemp(prefix="qm_bench_stream_")
    os.makedirs(work, exist_ok=True)
    print("machine: %s, %d CPUs, load average %.2f; python %s; numpy %s; torch %s; qmesh backend "
          "%s, torch device %s; OMP_NUM_THREADS=%s"
          % (platform.processor() or platform.machine(), os.cpu_count(), os.getloadavg()[0],
             platform.python_version(), np.__version__,
             torch.__version__ if torch else "absent", backend, device,
             os.environ.get("OMP_NUM_THREADS", "unset")))
    print("%-7s %8s %6s %9s | %-26s %-26s %-26s" % ("qubits", "samples", "batch", "file",
                                                  "qmesh.stream samples/s", "qmesh CLI samples/s",
                                                  "torch loop samples/s"))
    print("%-7s %8s %6s %9s | %-26s %-26s %-26s" % ("", "", "", "", "median (best)",
                                                  "median (best)", "median (best)"))
    try:
        for q, samples, batch in cases:
            F = 1 << q
            path = os.path.join(work, "x%d.npy" % q)
            rng = np.random.default_rng(q)
            x = np.empty((samples, F), dtype=np.float32)
            for i in range(0, samples, 64):
                x[i:i + 64] = rng.standard_normal((min(64, samples - i), F), dtype=np.float32)
            np.save(path, x)
            del x
            with open(path, "rb") as f:  # into the page cache
                while f.read(1 << 24):
                    pass
            # the same numbers, first batch
            first = next(iter(qmesh.stream(path, batch, backend=backend))).to_numpy()
            if torch is not None:
                a = np.load(path, mmap_mode="r")
                xt = torch.from_numpy(np.array(a[:batch]))
                ref = (xt / xt.norm(dim=1, keepdim=True)).to(torch.complex64).numpy()
                assert np.allclose(first, ref, atol=1e-6), "qmesh and torch disagree"
            assert qmesh_loop(path, batch, backend) == samples  # warm
            qm = timed(lambda: qmesh_loop(path, batch, backend), args.repeats)
            rates = []
            for _ in range(args.repeats):
                cmd = [cli, "encode", "--input", path, "--batch-size", str(batch), "--json"]
                if backend == "cuda":
                    cmd += ["--backend", "cuda"]
                p = subprocess.run(cmd, capture_output=True, text=True)
                if p.returncode != 0:
                    raise SystemExit("qmesh CLI failed: %s" % p.stderr.strip())
                rates.append(json.loads(p.stdout)["stream"]["samples_per_s"])
            cli_rate = (statistics.median(rates), max(rates))
            if torch is not None:
                torch_loop(path, batch, device)  # warm
                tt = timed(lambda: torch_loop(path, batch, device), args.repeats)
                trate = "%12.0f (%.0f)" % (samples / tt[0], samples / tt[1])
            else:
                trate = "-"
            print("%-7d %8d %6d %8.1fM | %-26s %-26s %-26s" % (
                q, samples, batch, os.path.getsize(path) / 2**20,
                "%12.0f (%.0f)" % (samples / qm[0], samples / qm[1]),
                "%12.0f (%.0f)" % cli_rate, trate))
            os.remove(path)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
