#!/usr/bin/env python3
"""How the L2 state before a timed run moves convgemm's and cuDNN's times (GPU, bf16, channels_last).

    PYTHONPATH=src python3 tools/flush_probe.py [--shape N,C,H,W,K,R,S[,stride,pad,dil,groups][,nobias] ...]
    PYTHONPATH=src python3 tools/flush_probe.py --shape ... --try "implicit_gemm_ws:num_stages=8,..." [--try ...]

``convgemm bench`` (like ``triton.testing.do_bench``) zeroes a 256 MB buffer before each run: the
L2 then holds dirty lines that the timed kernel's reads must write back to device memory first.
Session 55's Nsight Compute run (which cleans the caches instead) had convgemm's ResNeXt 512 @28
s2 at 28.6 us against cuDNN's 37.4, where the bench had 37.9 against 33.8. This times each layer,
tuned convgemm and cuDNN (``cudnn.benchmark``), after three states: ``zero`` (the bench's memset:
L2 dirty), ``read`` (a 256 MB buffer summed: L2 full of clean lines) and ``none`` (no flush: the
layer's own tensors partly in L2). Medians of GPU time with the host off the clock
(``_runtime.gpu_times``), the fastest of three alternating rounds.

``--try`` (as ``tools/config_probe.py`` takes it) adds a row per forced form under each layer, so
that whether a form's dirty-L2 cost follows its shape (the ring's depth, the tile) shows.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import torch
import torch.nn.functional as F

#: ResNeXt-50's seven g32 3x3 layers and two dense ResNet-50 3x3 layers of the same outputs
SHAPES = [
    "64,128,56,56,128,3,3,1,1,1,32,nobias",
    "64,256,56,56,256,3,3,2,1,1,32,nobias",
    "64,256,28,28,256,3,3,1,1,1,32,nobias",
    "64,512,28,28,512,3,3,2,1,1,32,nobias",
    "64,512,14,14,512,3,3,1,1,1,32,nobias",
    "64,1024,14,14,1024,3,3,2,1,1,32,nobias",
    "64,1024,7,7,1024,3,3,1,1,1,32,nobias",
    "64,128,56,56,128,3,3,2,1,1,1,nobias",
    "64,256,14,14,256,3,3,1,1,1,1,nobias",
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", default=[], help="a layer as bench takes it (repeatable)")
    ap.add_argument("--try", dest="tries", action="append", default=[], metavar="ALGORITHM:FIELD=VALUE,...",
                    help="a forced form timed under each layer in the three states, as config_probe takes it")  # fmt: skip
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(__file__))
    from config_probe import parse_try

    import convgemm
    from convgemm._runtime import gpu_times
    from convgemm.bench.suites import parse_shape
    from convgemm.conv.fprop import ALGORITHMS
    from convgemm.functional import _prepare

    torch.backends.cudnn.benchmark = True
    buf = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    states = {"zero": buf.zero_, "read": buf.sum, "none": None}

    def time_us(fn, before) -> float:
        fn()
        t = sorted(gpu_times(fn, 30.0, 10, 300, before=before))
        return t[len(t) // 2] * 1e3

    head = "".join(f"{s + ' ' + side:>14}" for s in states for side in ("convgemm", "cuDNN"))
    print(f"{'layer':<40}{head}")
    for text in args.shape or SHAPES:
        shp = parse_shape(text)
        cl = torch.channels_last
        x = torch.randn(shp.n, shp.c, shp.h, shp.w, device="cuda").to(torch.bfloat16).contiguous(memory_format=cl)
        w = torch.randn(shp.k, shp.c // shp.groups, shp.r, shp.s, device="cuda") / (shp.c * shp.r * shp.s) ** 0.5
        w = w.to(torch.bfloat16).contiguous(memory_format=cl)
        kw = dict(stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
        fns = {
            "convgemm": lambda x=x, w=w, kw=kw: convgemm.conv2d(x, w, None, **kw),
            "cuDNN": lambda x=x, w=w, kw=kw: F.conv2d(x, w, None, **kw),
        }
        best = {}
        for _ in range(3):
            for state, before in states.items():
                for side, fn in fns.items():
                    key = (state, side)
                    best[key] = min(best.get(key, float("inf")), time_us(fn, before))
        pick = convgemm.explain(x, w, None, **kw)
        row = "".join(f"{best[(s, side)]:>14.1f}" for s in states for side in fns)
        ratios = "  ".join(f"{s} {best[(s, 'cuDNN')] / best[(s, 'convgemm')]:.2f}x" for s in states)
        print(f"{text:<40}{row}  {ratios}  ({pick['algorithm']} {pick['config']})", flush=True)
        two = lambda v: v if isinstance(v, tuple) else (v, v)  # noqa: E731
        prob, xn, y = _prepare(x, w, None, two(shp.stride), two(shp.pad), two(shp.dil), shp.groups)
        for form in args.tries:
            name, fields = parse_try(form)
            algo = ALGORITHMS[name]
            reason = algo.supports(prob)
            if reason:
                print(f"  {form[:60]}: not supported: {reason}")
                continue
            cfg = dataclasses.replace(algo.default_config(prob), **fields)
            out = torch.empty_like(y)
            fn = lambda a=algo, c=cfg, o=out, p=prob, xi=xn, wi=w: a.run(p, xi, wi, None, o, c)  # noqa: E731
            got = {}
            for _ in range(3):  # alternating, as the rows above
                for state, before in states.items():
                    got[state] = min(got.get(state, float("inf")), time_us(fn, before))
            row = "".join(f"{got[s]:>14.1f}{'':>14}" for s in states)
            print(f"  {name} {cfg.describe():<36}{row}  zero-read {got['zero'] - got['read']:.1f} us", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
