#!/usr/bin/env python3
"""Launch each workload once between ``cudaProfilerStart`` and ``cudaProfilerStop``, after tuning
and warming them outside that window, for Nsight Compute (GPU, bf16, channels_last):

    ncu --clock-control none --profile-from-start off --section SpeedOfLight \\
        --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats \\
        --section Occupancy --section LaunchStats python3 tools/ncu_probe.py [--only l3-1x1,dw144]

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


def workloads() -> dict:
    import convgemm

    dev, bf = "cuda", torch.bfloat16
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated workload names (default: all)")
    args = ap.parse_args()
    all_work = workloads()
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
