"""Host overhead per call: wall-clock time of many back-to-back calls on a tiny shape (GPU)."""

import time

import torch
import torch.nn.functional as F

import convgemm


def per_call_us(fn, n=300):
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
    b = torch.randn(64, device="cuda", dtype=torch.bfloat16)
    for algo in convgemm.algorithms():
        try:
            us = per_call_us(lambda a=algo: convgemm.conv2d(x, w, b, padding=1, algorithm=a))
            print(f"convgemm {algo:18s} {us:7.1f} us/call")
        except ValueError as e:
            print(f"convgemm {algo:18s} n/a ({e})")
    print(f"torch F.conv2d (cuDNN)     {per_call_us(lambda: F.conv2d(x, w, b, padding=1)):7.1f} us/call")
