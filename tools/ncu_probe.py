#!/usr/bin/env python3
"""Launch each workload once between ``cudaProfilerStart`` and ``cudaProfilerStop``, after tuning
and warming them outside that window, for Nsight Compute (GPU, bf16, channels_last):

    ncu --clock-control none --profile-from-start off --section SpeedOfLight \\
        --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats \\
        --section Occupancy --section LaunchStats python3 tools/ncu_probe.py [--only l3-1x1,dw144]
        ... python3 tools/ncu_probe.py --shape 64,1024,14,14,256,1,1,1,0,1,1,nobias --try "implicit_gemm_tma:parts=3"

ncu flushes the caches before each profiled kernel (its default ``--cache-control all``), as the
bench flushes L2 before each timed run. The workloads are the gaps the H200 measurements left
unexplained (session 30): ResNet-50's l3 1x1 reduce 1024->256 @14 against cuBLAS's GEMM of the
same shape (cuDNN takes cuBLAS's time there, convgemm 1.3x more), MobileNetV2's depthwise 3x3
144 @56 (``depthwise_rows`` 58 us where a copy of its bytes takes 32), and narrow 8->8 @128
(``flat_rows`` at 18% of copy bandwidth). The profiled kernels follow the order printed first.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

#: where the tensors live (a CPU run under Triton's interpreter checks the script's plumbing)
DEV = "cuda"


def workloads() -> dict:
    import convgemm

    dev, bf = DEV, torch.bfloat16
    cl = torch.channels_last
    out = {}

    x = torch.randn(64, 1024, 14, 14, device=dev, dtype=bf).contiguous(memory_format=cl)
    w = torch.randn(256, 1024, 1, 1, device=dev, dtype=bf)
    a, bt = x.permute(0, 2, 3, 1).reshape(-1, 1024), w.reshape(256, 1024).t()
    out["l3-1x1"] = [
        ("cuBLAS mm 12544x256x1024", lambda: torch.mm(a, bt)),
        ("cuDNN", lambda: F.conv2d(x, w)),
        ("convgemm", lambda: convgemm.conv2d(x, w), lambda: convgemm.explain(x, w)),
    ]

    xd = torch.randn(64, 144, 56, 56, device=dev, dtype=bf).contiguous(memory_format=cl)
    wd = torch.randn(144, 1, 3, 3, device=dev, dtype=bf)
    yd = torch.empty_like(xd)
    out["dw144"] = [
        ("copy of x", lambda: yd.copy_(xd)),
        ("cuDNN", lambda: F.conv2d(xd, wd, padding=1, groups=144)),
        (
            "convgemm",
            lambda: convgemm.conv2d(xd, wd, padding=1, groups=144),
            lambda: convgemm.explain(xd, wd, padding=1, groups=144),
        ),
    ]

    xn = torch.randn(32, 8, 128, 128, device=dev, dtype=bf).contiguous(memory_format=cl)
    wn = torch.randn(8, 8, 3, 3, device=dev, dtype=bf)
    bn = torch.randn(8, device=dev, dtype=bf)
    out["narrow8"] = [
        ("cuDNN", lambda: F.conv2d(xn, wn, bn, padding=1)),
        ("convgemm", lambda: convgemm.conv2d(xn, wn, bn, padding=1), lambda: convgemm.explain(xn, wn, bn, padding=1)),
    ]
    return out


def shape_workloads(shapes: list[str], tries: list[str]) -> dict:
    """For each ``--shape`` (as ``convgemm bench`` writes it): cuDNN, convgemm's tuned choice and
    each ``--try`` form (``tools/config_probe.py``'s syntax) on the same tensors, bf16 NHWC."""
    import dataclasses

    from config_probe import parse_try

    import convgemm
    from convgemm.bench.suites import parse_shape
    from convgemm.conv.fprop import ALGORITHMS
    from convgemm.functional import _prepare

    def pair(v):
        return v if isinstance(v, tuple) else (v, v)

    out = {}
    for text in shapes:
        shp = parse_shape(text)
        x = torch.randn(shp.n, shp.c, shp.h, shp.w, device=DEV, dtype=torch.bfloat16)
        x = x.contiguous(memory_format=torch.channels_last)
        w = (torch.randn(shp.k, shp.c // shp.groups, shp.r, shp.s, device=DEV) / (shp.c * shp.r * shp.s) ** 0.5).to(
            torch.bfloat16
        )
        # channels_last like the bench's weights: an NCHW weight is repacked on every call
        # (``krsc_weight``), a transpose launch that session 54's profile caught in the window
        w = w.contiguous(memory_format=torch.channels_last)
        b = torch.randn(shp.k, device=DEV, dtype=torch.bfloat16) if shp.bias else None
        kw = dict(stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
        entries = [
            ("cuDNN", lambda x=x, w=w, b=b, kw=kw: F.conv2d(x, w, b, **kw)),
            ("convgemm", lambda x=x, w=w, b=b, kw=kw: convgemm.conv2d(x, w, b, **kw),
             lambda x=x, w=w, b=b, kw=kw: convgemm.explain(x, w, b, **kw)),
        ]  # fmt: skip
        prob, xn, y = _prepare(x, w, b, pair(shp.stride), pair(shp.pad), pair(shp.dil), shp.groups)
        for t in tries:
            name, fields = parse_try(t)
            algo = ALGORITHMS[name]
            cfg = dataclasses.replace(algo.default_config(prob), **fields)
            out_t = torch.empty_like(y)
            entries.append((f"{name} {cfg.describe()}",
                            lambda algo=algo, cfg=cfg, xn=xn, w=w, b=b, out_t=out_t, prob=prob:
                            algo.run(prob, xn, w, b, out_t, cfg)))  # fmt: skip
        out[text] = entries
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated workload names (default: all)")
    ap.add_argument("--shape", action="append", default=[],
                    help="N,C,H,W,K,R,S[,stride,pad,dil,groups][,nobias]: profile this layer instead of the "
                         "built-in workloads (repeatable)")  # fmt: skip
    ap.add_argument("--try", dest="tries", action="append", default=[], metavar="ALGORITHM:FIELD=VALUE,...",
                    help="with --shape: also this forced form (tools/config_probe.py's syntax; unnamed fields take "
                         "the layer's GPU default config)")  # fmt: skip
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True  # cuDNN's best algorithm, as the bench times it
    all_work = shape_workloads(args.shape, args.tries) if args.shape else workloads()
    names = [n for n in all_work if not args.only or n in args.only.split(",")]
    for name in names:
        for fn in (e[1] for e in all_work[name]):
            for _ in range(3):  # tune, compile and warm outside the profiled window
                fn()
    print("profiled launches, in order:")
    for name in names:
        for entry in all_work[name]:
            pick = entry[2]() if len(entry) > 2 else None
            print(f"  {name}: {entry[0]}" + (f" ({pick['algorithm']} {pick['config']})" if pick else ""))
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for name in names:
        for entry in all_work[name]:
            entry[1]()
            torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
