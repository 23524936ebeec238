"""Host overhead per call: wall-clock time of many back-to-back calls on a tiny shape (GPU).

A tiny convolution's kernel runs in a few microseconds, so the time per call is what the host
spends: validation, planning, descriptor encoding and the launch itself.
"""

import time

import torch
import torch.nn.functional as F

import convgemm


def per_call_us(fn, n=500):
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


if __name__ == "__main__":
    x = torch.randn(1, 64, 8, 8, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    w1 = torch.randn(64, 64, 1, 1, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    b = torch.randn(64, device="cuda", dtype=torch.bfloat16)
    for algo in convgemm.algorithms():
        wt, pad = (w1, 0) if algo == "gemm_1x1" else (w, 1)
        us = per_call_us(lambda a=algo, wt=wt, pad=pad: convgemm.conv2d(x, wt, b, padding=pad, algorithm=a))
        print(f"convgemm {algo:18s} {us:7.1f} us/call")
    print(f"torch F.conv2d (cuDNN) 3x3   {per_call_us(lambda: F.conv2d(x, w, b, padding=1)):7.1f} us/call")
    print(f"torch.empty                  {per_call_us(lambda: torch.empty_like(x)):7.1f} us/call")

    import cProfile
    import pstats
    import sys

    if "--profile" in sys.argv:
        for algo in ("implicit_gemm_tma", "implicit_gemm"):
            pr = cProfile.Profile()
            fn = lambda a=algo: convgemm.conv2d(x, w, b, padding=1, algorithm=a)  # noqa: E731
            fn()
            pr.enable()
            for _ in range(2000):
                fn()
            pr.disable()
            torch.cuda.synchronize()
            print(f"--- profile of 2000 calls, {algo} (tottime, top 18)")
            pstats.Stats(pr).sort_stats("tottime").print_stats(18)
