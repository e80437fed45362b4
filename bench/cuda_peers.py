#!/usr/bin/env python3
"""Peers of bench_cuda_jit on the same expressions: fused elementwise chains of 2, 4, 8, 16
ops on 2^26 f32, y = ((x * 0.999 + 0.5) * 0.999 + 0.5) ... (odd steps multiply, even ones
add), with CuPy (cupy.fuse and an ElementwiseKernel), PyTorch eager and torch.compile.
Device times from CUDA events, medians of 10 after warm-ups, printed as a markdown table
with each one's bandwidth (read + write, 8 bytes per element). A peer that is not installed
is reported as such. Usage: python3 bench/cuda_peers.py [log2_n = 26]"""
import statistics
import sys

LOG2 = int(sys.argv[1]) if len(sys.argv) > 1 else 26
N = 1 << LOG2
OPS = (2, 4, 8, 16)


def chain(x, ops):
    for k in range(1, ops + 1):
        x = x * 0.999 if k % 2 == 1 else x + 0.5
    return x


def chain_source(ops):
    e = "x"
    for k in range(1, ops + 1):
        e = f"({e} * 0.999f)" if k % 2 == 1 else f"({e} + 0.5f)"
    return f"y = {e}"


def timed(fn, start, stop, sync):
    for _ in range(3):
        fn()
    sync()
    ms = []
    for _ in range(10):
        a, b = start(), stop()
        a.record()
        fn()
        b.record()
        b.synchronize()
        ms.append(a.elapsed_time(b))
    return statistics.median(ms)


def row(name, ops, ms):
    gbs = 2.0 * 4 * N / ms / 1e6
    print(f"| {name} | {ops} | {ms:.3f} | {gbs:.1f} GB/s |")


def cupy_peers():
    try:
        import cupy as cp
    except ImportError as e:
        print(f"| CuPy | - | not installed ({e}) | |")
        return
    x = cp.random.uniform(-1, 1, N, dtype=cp.float32)
    ev = lambda: cp.cuda.Event()
    elapsed = lambda a, b: cp.cuda.get_elapsed_time(a, b)
    for ops in OPS:
        # cupy.fuse names the kernel after the function: a lambda's "<lambda>" does not compile.
        f = cp.fuse(kernel_name=f"kiln_fused{ops}")(lambda v, ops=ops: chain(v, ops))
        k = cp.ElementwiseKernel("float32 x", "float32 y", chain_source(ops), f"kiln_chain{ops}")
        y = cp.empty_like(x)
        for name, fn in (("CuPy fuse", lambda: f(x)), ("CuPy ElementwiseKernel", lambda: k(x, y))):
            for _ in range(3):
                fn()
            cp.cuda.Device().synchronize()
            ms = []
            for _ in range(10):
                a, b = ev(), ev()
                a.record()
                fn()
                b.record()
                b.synchronize()
                ms.append(elapsed(a, b))
            row(name, ops, statistics.median(ms))


def torch_peers():
    try:
        import torch
    except ImportError as e:
        print(f"| PyTorch | - | not installed ({e}) | |")
        return
    x = torch.empty(N, device="cuda", dtype=torch.float32).uniform_(-1, 1)
    ev = lambda: torch.cuda.Event(enable_timing=True)
    for ops in OPS:
        fns = [("PyTorch eager", lambda ops=ops: chain(x, ops))]
        try:
            fns.append(("torch.compile", torch.compile(lambda v, ops=ops: chain(v, ops))))
        except Exception as e:  # no triton, or an unsupported setup
            print(f"| torch.compile | {ops} | unavailable ({type(e).__name__}: {e}) | |")
        for name, fn in fns:
            call = (lambda fn=fn: fn(x)) if name == "torch.compile" else fn
            try:
                ms = timed(call, ev, ev, torch.cuda.synchronize)
            except Exception as e:
                print(f"| {name} | {ops} | failed ({type(e).__name__}: {e}) | |")
                continue
            row(name, ops, ms)


if __name__ == "__main__":
    print(f"#### Peers on the same chains, 2^{LOG2} f32, device time, medians of 10\n")
    print("| peer | ops | ms | bandwidth |\n|---|---|---|---|")
    cupy_peers()
    torch_peers()
