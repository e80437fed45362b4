#!/usr/bin/env python3
"""Peers of `bench_matmul_device --large` on a CUDA GPU: the same rows through PyTorch
(cuBLAS underneath; TF32 off, so f32 is true FP32 arithmetic like kiln's kernel) and CuPy
(cuBLAS): f32 and f16 C = A B at n = 1024, 2048, 4096 in TFLOP/s, and gelu(x w + b) at
M = N = 4096 as eager PyTorch (addmm, then the gelu pass) with the bare product beside it.
Device times from CUDA events, medians of 10 after warm-ups, random inputs. A peer that is
not installed is reported as such. Usage: python3 bench/matmul_peers.py"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_peers import timed as timed_with  # noqa: E402  (the same CUDA-event medians)


def timed(torch, fn):
    event = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    return timed_with(fn, event, event, torch.cuda.synchronize)


def main():
    try:
        import torch
    except ImportError:
        print("(PyTorch not installed: peers not run)")
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    try:
        import cupy
    except ImportError:
        cupy = None
    print(f"peers on {torch.cuda.get_device_name()}: torch {torch.__version__}"
          + (f", cupy {cupy.__version__}" if cupy else ", cupy not installed"))
    print("\n| dtype | n | torch.matmul (cuBLAS) TFLOP/s | cupy.matmul TFLOP/s |\n|---|---|---|---|")
    for dt, name in ((torch.float32, "f32"), (torch.float16, "f16")):
        for n in (1024, 2048, 4096):
            g = torch.Generator(device="cuda").manual_seed(n)
            a = torch.randn(n, n, device="cuda", dtype=dt, generator=g)
            b = torch.randn(n, n, device="cuda", dtype=dt, generator=g)
            c = torch.empty(n, n, device="cuda", dtype=dt)
            flops = 2.0 * n ** 3
            t = timed(torch, lambda: torch.matmul(a, b, out=c))
            cp = ""
            if cupy is not None:
                ca, cb = cupy.asarray(a), cupy.asarray(b)
                cc = cupy.empty((n, n), dtype=ca.dtype)
                cp = f"{flops / timed(torch, lambda: cupy.matmul(ca, cb, out=cc)) * 1e-9:.2f}"
            print(f"| {name} | {n} | {flops / t * 1e-9:.2f} | {cp} |")
    print("\n| f32 M = N = 4096, K | torch gelu(addmm) (ms) | torch bare product (ms) |\n|---|---|---|")
    m = 4096
    for k in (64, 256, 1024, 4096):
        x = torch.randn(m, k, device="cuda")
        w = torch.randn(k, m, device="cuda")
        bias = torch.randn(m, device="cuda")
        y = torch.empty(m, m, device="cuda")
        t0 = timed(torch, lambda: torch.nn.functional.gelu(torch.addmm(bias, x, w)))
        t1 = timed(torch, lambda: torch.matmul(x, w, out=y))
        print(f"| {k} | {t0:.3f} | {t1:.3f} |")


if __name__ == "__main__":
    main()
