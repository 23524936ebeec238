#!/usr/bin/env python3
"""Where a first call's tuning time goes: compile each tuning candidate of a few layers one at a
time on an empty Triton cache, timing the whole compile and its Python front end (the part that
holds the GIL, so the tuner's thread pool runs it one candidate at a time), then the whole
tuner on another empty cache.

    PYTHONPATH=src python3 tools/compile_profile.py [--shape N,C,H,W,K,R,S[,stride,pad,dil,groups] ...]

Prints one line per candidate and a summary per layer: serial compile total, front-end total,
and the tuner's first call (parallel compiles, first launches, timing runs).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

DEFAULT = [
    "64,256,14,14,256,3,3,1,1,1,1",  # ResNet-50 l3 3x3
    "64,1024,14,14,256,1,1,0,0,1,1",  # ResNet-50 l3 1x1 reduce
    "64,128,56,56,128,3,3,1,1,1,32",  # ResNeXt 128 @56 g32
]


_FIRST_CALL = """
import sys, time, torch, convgemm
from convgemm.bench.suites import parse_shape
shp = parse_shape(sys.argv[1])
x = torch.randn(shp.n, shp.c, shp.h, shp.w, device="cuda", dtype=torch.bfloat16)
x = x.to(memory_format=torch.channels_last)
w = torch.randn(shp.k, shp.c // shp.groups, shp.r, shp.s, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
t = time.perf_counter()
convgemm.conv2d(x, w, stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
torch.cuda.synchronize()
print(time.perf_counter() - t)
"""


def _first_call(text: str) -> float:
    """The first ``conv2d`` call of a fresh process on empty Triton and tuning caches, in s."""
    import subprocess

    env = dict(os.environ, TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="triton-tuner-"))
    env["CONVGEMM_CACHE_DIR"] = tempfile.mkdtemp(prefix="convgemm-cache-")
    out = subprocess.run([sys.executable, "-c", _FIRST_CALL, text], env=env, capture_output=True, text=True)
    if out.returncode:
        print(out.stderr[-2000:])
        return float("nan")
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", action="append", help="N,C,H,W,K,R,S[,stride,pad,dil,groups]")
    args = ap.parse_args()
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-serial-")
    import torch
    import triton.compiler.compiler as tcc

    from convgemm.bench.suites import parse_shape
    from convgemm.conv.fprop import ALGORITHMS, COMPILE_ONLY
    from convgemm.functional import _prepare
    from convgemm.tune import autotune as at

    front = [0.0]
    orig = tcc.ASTSource.make_ir

    def timed_make_ir(self, *a, **k):
        t = time.perf_counter()
        try:
            return orig(self, *a, **k)
        finally:
            front[0] += time.perf_counter() - t

    tcc.ASTSource.make_ir = timed_make_ir
    for text in args.shape or DEFAULT:
        shp = parse_shape(text)
        x = torch.randn(shp.n, shp.c, shp.h, shp.w, device="cuda", dtype=torch.bfloat16)
        x = x.to(memory_format=torch.channels_last)
        w = torch.randn(shp.k, shp.c // shp.groups, shp.r, shp.s, device="cuda", dtype=torch.bfloat16)
        prob, xp, y = _prepare(x, w, None, shp.stride, shp.pad, shp.dil, shp.groups)
        cands = [ALGORITHMS[n] for n in at._HEURISTIC_ORDER if ALGORITHMS[n].supports(prob) is None]
        pairs = at.tuning_pairs(prob, cands)
        total = front_total = 0.0
        for algo, cfg in pairs:
            front[0] = 0.0
            t = time.perf_counter()
            token = COMPILE_ONLY.set(True)
            try:
                algo.run(prob, xp, w, None, y, cfg, None)
            except Exception as e:  # noqa: BLE001
                print(f"  {algo.name} [{cfg.describe()}]: {type(e).__name__}")
            finally:
                COMPILE_ONLY.reset(token)
            dt = time.perf_counter() - t
            total += dt
            front_total += front[0]
            print(f"  {algo.name:18s} {cfg.describe():28s} compile {dt:6.2f} s  front end {front[0]:5.2f} s")
        first = _first_call(text)
        print(
            f"{shp.spec()}: {len(pairs)} candidates, serial compiles {total:.2f} s (front end {front_total:.2f} s), "
            f"tuner's first call on an empty cache {first:.2f} s"
        )
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
