"""Where a process's first convgemm call goes (GPU): wall-clock stages, then cProfile of the call.

    CONVGEMM_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) \\
        PYTHONPATH=src python3 tools/first_call.py --shape 16,16,512,512,16,3,3,1,0,1,1

The benchmark's first shape of a process tunes in 6-8 s from empty caches where the tuner's own
log accounts for about 4 s (session 27: seed 16x512x512->16, 7.85 s against 3.89 s of compiles,
0.04 s of loads, 0.41 s of timing). This prints the stages around the call (the import, CUDA's
context, the tensors), then the call itself under cProfile (main thread only: the compile
threads' work shows as waits), then a second, new shape in the same process for comparison.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))


def _stamp(label: str, t0: float) -> float:
    t = time.perf_counter()
    print(f"  {label:<44s} {t - t0:7.3f} s", flush=True)
    return t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="16,16,512,512,16,3,3,1,0,1,1", help="the first call's layer")
    ap.add_argument("--second", default="16,96,24,24,256,5,5,1,0,1,1", help="a later, new layer")
    ap.add_argument("--top", type=int, default=35)
    a = ap.parse_args()
    print("stages (wall clock):")
    t = time.perf_counter()
    import torch

    t = _stamp("import torch", t)
    import convgemm
    from convgemm.bench.suites import parse_shape

    t = _stamp("import convgemm", t)
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    t = _stamp("CUDA context", t)

    def tensors(spec):
        shp = parse_shape(spec)
        x = torch.randn(shp.n, shp.c, shp.h, shp.w, device="cuda", dtype=torch.bfloat16)
        x = x.contiguous(memory_format=torch.channels_last)
        w = torch.randn(shp.k, shp.c // shp.groups, shp.r, shp.s, device="cuda", dtype=torch.bfloat16)
        w = w.contiguous(memory_format=torch.channels_last)
        args = dict(stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
        return x, w, args

    x, w, args = tensors(a.shape)
    torch.cuda.synchronize()
    t = _stamp("tensors", t)
    prof = cProfile.Profile()
    prof.enable()
    convgemm.conv2d(x, w, None, **args)
    torch.cuda.synchronize()
    prof.disable()
    t = _stamp(f"first call {a.shape}", t)
    x2, w2, args2 = tensors(a.second)
    torch.cuda.synchronize()
    prof2 = cProfile.Profile()
    t = time.perf_counter()
    prof2.enable()
    convgemm.conv2d(x2, w2, None, **args2)
    torch.cuda.synchronize()
    prof2.disable()
    _stamp(f"second shape's first call {a.second}", t)
    from host_profile import print_top

    print_top(prof, a.top, "the first call")
    print_top(prof2, a.top, "the second shape's first call")


if __name__ == "__main__":
    main()
