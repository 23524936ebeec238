"""Where does a convolution's time go? Kernel alone (CUDA-graph replay) vs launch path vs conv2d.

    PYTHONPATH=src python3 tools/diagnose.py [--suite floor] [--dtype bf16]

For each shape: the tuned plan, then medians of (a) a CUDA graph replaying the kernel (no host
work at all), (b) ``algo.run`` through its launch handle, (c) ``convgemm.conv2d``, (d) cuDNN, and
the host's per-call time when nothing waits on the GPU.
"""

import argparse
import time

import torch
import torch.nn.functional as F
from triton.testing import do_bench

import convgemm
from convgemm.bench.suites import suite
from convgemm.functional import _plans
from convgemm.matmul.launch import Launch

ap = argparse.ArgumentParser()
ap.add_argument("--suite", default="floor")
ap.add_argument("--dtype", default="bf16")
a = ap.parse_args()
dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
torch.backends.cudnn.benchmark = True


def graph_us(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(10):
            fn()
    return do_bench(g.replay, warmup=25, rep=200, return_mode="median") * 1e3 / 10


def host_us(fn, n=200):
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    dt = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return dt


print(f"{'shape':34s} {'plan':40s} {'graph':>7s} {'run':>7s} {'conv2d':>7s} {'host':>6s} {'cuDNN':>7s} {'cuDNNg':>7s}")
for shp in suite(a.suite):
    x = torch.randn(shp.n, shp.c, shp.h, shp.w, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    w = (torch.randn(shp.k, shp.c // shp.groups, shp.r, shp.s, device="cuda", dtype=dtype) * 0.05).to(
        memory_format=torch.channels_last
    )
    b = torch.randn(shp.k, device="cuda", dtype=dtype) if shp.bias else None
    kw = dict(stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
    y = convgemm.conv2d(x, w, b, **kw)
    prob, algo, cfg, _ = list(_plans.values())[-1]
    from convgemm.conv.layout import as_nhwc

    xx = as_nhwc(x)
    h = Launch()
    algo.run(prob, xx, w, b, y, cfg, h)
    g = graph_us(lambda: algo.run(prob, xx, w, b, y, cfg, h))
    r = do_bench(lambda: algo.run(prob, xx, w, b, y, cfg, h), warmup=25, rep=100, return_mode="median") * 1e3
    c = do_bench(lambda: convgemm.conv2d(x, w, b, **kw), warmup=25, rep=100, return_mode="median") * 1e3
    hu = host_us(lambda: convgemm.conv2d(x, w, b, **kw))
    d = do_bench(lambda: F.conv2d(x, w, b, **kw), warmup=25, rep=100, return_mode="median") * 1e3
    dg = graph_us(lambda: F.conv2d(x, w, b, **kw))
    print(
        f"{shp.name[:34]:34s} {algo.name + ' ' + cfg.describe():40s} {g:7.1f} {r:7.1f} {c:7.1f} {hu:6.1f} {d:7.1f} {dg:7.1f}"
    )
