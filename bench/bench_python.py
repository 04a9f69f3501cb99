#!/usr/bin/python3
"""bench_python.py -- the Python package's per-call overhead against the C API, and (on a GPU)
torch CUDA tensor -> encoded state against the same in plain PyTorch.

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/bench_python.py [--build build]
       [--calls N] [--rows R] [--features F]

1. qmesh.encode(x).to_numpy() for an R x F float64 array (default 4 x 8), median of 7 repeats of
   N calls, in microseconds per call; the same for qmesh.encode(x) alone; and build/python/
   bench_api_call (bench/bench_api_call.c), which makes the same C API calls per call. The
   difference is the Python layer's overhead.
2. With torch.cuda available: torch.randn(B, F, device="cuda") encoded by qmesh.encode (backend
   auto: CUDA, read in place; with its context cache, and with the cache cleared before every call)
   and viewed as torch.from_dlpack(state.gather()) on the GPU, against
   plain PyTorch doing the same maths (x / ||x|| per row, zero pad to 2**n, cast to complex), both
   synchronized, milliseconds per call, for a few sizes.
"""
import argparse
import os
import platform
import statistics
import subprocess
import time

import numpy as np

import qmesh


def per_call_us(fn, calls, repeats=7):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(times), min(times)


def cpu_part(args):
    x = (np.arange(args.rows * args.features) % 7 + 1.0).reshape(args.rows, args.features)
    qmesh.encode(x)  # warm: the built-in scenario is loaded once
    enc_np = per_call_us(lambda: qmesh.encode(x).to_numpy(), args.calls)
    enc = per_call_us(lambda: qmesh.encode(x), args.calls)
    exe = os.path.join(args.build, "python", "bench_api_call")
    out = subprocess.run([exe, str(args.calls), str(args.rows), str(args.features)],
                         capture_output=True, text=True, check=True).stdout.split()
    c_med, c_min = float(out[1]), float(out[3].rstrip(")"))
    k_med, k_min = float(out[5]), float(out[7].rstrip(")"))
    print("input: %d x %d float64 -> complex128, built-in simulated mesh, %d calls x 7 repeats"
          % (args.rows, args.features, args.calls))
    print("%-44s %10s %10s" % ("", "median us", "min us"))
    print("%-44s %10.2f %10.2f" % ("C API, fresh context (create/open/encode/read)", c_med,
                                   c_min))
    print("%-44s %10.2f %10.2f" % ("C API, kept context (encode/read)", k_med, k_min))
    print("%-44s %10.2f %10.2f" % ("qmesh.encode(x).to_numpy() (context cache)", *enc_np))
    print("%-44s %10.2f %10.2f" % ("qmesh.encode(x)", *enc))
    print("python overhead (median, encode+to_numpy vs the C API with a kept context): "
          "%.2f us per call" % (enc_np[0] - k_med))


def gpu_part(args):
    try:
        import torch
    except ImportError:
        print("gpu: torch not importable: skipped")
        return
    if not torch.cuda.is_available():
        print("gpu: torch.cuda.is_available() is False: skipped")
        return
    print("gpu: %s, torch %s" % (torch.cuda.get_device_name(0), torch.__version__))
    print("%-14s %-10s %16s %16s %16s %10s" % ("rows x feat", "dtype", "qmesh ms",
                                              "qmesh fresh ms", "torch ms", "identical"))
    for rows, feat in ((4, 8), (1024, 1000), (16384, 1024), (65536, 784)):
        for dt in (torch.float32, torch.float64):
            x = torch.randn(rows, feat, dtype=dt, device="cuda")
            n = max(1, (feat - 1).bit_length())
            cdt = torch.complex64 if dt == torch.float32 else torch.complex128

            def q():
                s = qmesh.encode(x)
                t = torch.from_dlpack(s.gather() if len(s.shards) > 1 else s)
                torch.cuda.synchronize()
                return t

            def q_fresh():  # without the context cache: plan and open the backend per call
                qmesh.clear_cache()
                return q()

            def p():
                y = x / torch.linalg.vector_norm(x, dim=1, keepdim=True)
                y = torch.nn.functional.pad(y, (0, (1 << n) - feat)).to(cdt)
                torch.cuda.synchronize()
                return y

            a, b = q(), p()
            same = bool((a.view(rows, -1).real - b.real).abs().max().item() < 1e-5)
            calls = 200 if rows * feat < 1 << 22 else 20
            tq = per_call_us(q, calls, 5)[0] / 1e3
            tf = per_call_us(q_fresh, max(5, calls // 10), 5)[0] / 1e3
            tp = per_call_us(p, calls, 5)[0] / 1e3
            print("%-14s %-10s %16.3f %16.3f %16.3f %10s"
                  % ("%dx%d" % (rows, feat), str(dt).replace("torch.", ""), tq, tf, tp, same))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--features", type=int, default=8)
    ap.add_argument("--no-gpu", action="store_true")
    args = ap.parse_args()
    print("machine: %s, %d cpus, Python %s, numpy %s, qmesh %s"
          % (platform.processor() or platform.machine(), os.cpu_count(),
             platform.python_version(), np.__version__, qmesh.__version__))
    cpu_part(args)
    if not args.no_gpu:
        gpu_part(args)


if __name__ == "__main__":
    main()
