#!/usr/bin/env python3
"""wgrad configs beyond the tuner's list, on a few layers: a grid of ``wgrad_tma`` tiles x
pipeline stages x split counts (multiples of the two-wave split) x ``reduce``, each timed with
the L2 cache flushed (as ``convgemm bench`` times), checked and compared with cuDNN's weight
gradient on the same tensors (GPU only; ``--dry-run`` lists the grid on any machine).

    PYTHONPATH=src python3 tools/wgrad_sweep.py [--shape SHAPE ...] [--top 8] [--dry-run]

SHAPE is a ``convgemm bench --shape`` string (``N,C,H,W,K,R,S,stride,pad,dil,groups``). The
default shapes are the slowest wgrad layers of session 14 (ResNet-50's 1x1 layers at 7x7 and
14x14, its first 3x3 at 14x14, CRAFT's 16 -> 16 head). The question it answers: is a split or
a stage count outside the tuner's list what those layers need (benchmarks/NOTES.md, session 14,
"Next, for the device").
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import replace

import torch

SHAPES = [
    "64,2048,7,7,512,1,1,1,0,1,1",
    "64,512,7,7,2048,1,1,1,0,1,1",
    "64,1024,14,14,512,1,1,1,0,1,1",
    "64,256,14,14,1024,1,1,1,0,1,1",
    "64,512,14,14,512,3,3,2,1,1,1",
    "1,16,384,384,16,1,1,1,0,1,1",
]

# (block_m, block_n, block_k, warps): the tuner's tile shapes
TILES = [(64, 64, 128, 4), (64, 128, 64, 4), (128, 128, 64, 8), (128, 256, 64, 8)]
SPLIT_FACTORS = (0.5, 1, 2, 4)


def grid(prob) -> list:
    """Every (tile, stages, split, reduce) config of the sweep that ``wgrad_tma`` can run."""
    from convgemm.conv.backward import WGRAD_TMA

    out = []
    for bm, bn, bk, warps in TILES:
        if not WGRAD_TMA.tile_ok(prob, bm, bn):
            continue
        for stages in (2, 3, 4):
            if stages * (bm + bn) * bk * prob.dtype.itemsize > 200 << 10:  # shared memory
                continue
            base = WGRAD_TMA._shaped(prob, bm, bn, bk, warps, stages)
            for f in SPLIT_FACTORS:
                split = max(1, min(256, round(base.split_k * f)))
                for red in (0, 1) if split > 1 else (0,):
                    out.append(replace(base, split_k=split, reduce=red))
    return list(dict.fromkeys(out))


def _problem(text: str, device: str):
    from convgemm.bench.suites import parse_shape
    from convgemm.problem import ConvProblem

    shp = parse_shape(text)
    kw = dict(stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
    x = torch.randn(shp.n, shp.c, shp.h, shp.w, dtype=torch.bfloat16, device=device)
    x = x.contiguous(memory_format=torch.channels_last)
    w = torch.empty(shp.k, shp.c // shp.groups, shp.r, shp.s, dtype=torch.bfloat16, device=device)
    prob = ConvProblem.from_tensors(x, w, None, **kw)
    dy = torch.randn(prob.output_shape, dtype=torch.bfloat16, device=device)
    return prob, x, w, dy.contiguous(memory_format=torch.channels_last), kw


def _one(text: str, top: int) -> float:
    from convgemm._runtime import l2_flush
    from convgemm.conv.backward import WGRAD_TMA, _AsForward
    from convgemm.tune import autotune as at

    prob, x, w, dy, kw = _problem(text, "cuda")
    if WGRAD_TMA.supports(prob, x, dy) is not None:
        print(f"== {text}: wgrad_tma does not take it ({WGRAD_TMA.supports(prob, x, dy)})")
        return float("nan")
    cfgs = grid(prob)
    dw = torch.empty_like(w)
    at._compile_all(prob, [(_AsForward(WGRAD_TMA), c) for c in cfgs], x, dy, None, dw)
    flush = l2_flush(x.device)

    def pair(v):  # aten's schema takes lists, the suite's shapes ints or pairs
        return [v, v] if isinstance(v, int) else list(v)

    def cudnn():
        return torch.ops.aten.convolution_backward(dy, x, w, None, pair(kw["stride"]), pair(kw["padding"]),
                                                   pair(kw["dilation"]), False, [0, 0], kw["groups"],
                                                   [False, True, False])[1]  # fmt: skip

    ref = cudnn().double()
    cud = at._time_ms(cudnn, 20.0, flush) * 1e3
    rows = []
    for c in cfgs:
        try:
            WGRAD_TMA.run(prob, x, dy, dw, c)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - report and go on
            print(f"  {c.describe()}: {type(e).__name__}: {e}")
            continue
        err = ((dw.double() - ref).norm() / ref.norm()).item()
        us = at._time_ms(lambda c=c: WGRAD_TMA.run(prob, x, dy, dw, c), 5.0, flush) * 1e3
        rows.append((us, c.describe(), err))
    rows.sort()
    tuned = {c.describe() for c in WGRAD_TMA.configs(prob)}
    print(f"== {text}  cuDNN {cud:.1f} us, {len(rows)} configs (* in the tuner's list)")
    for us, d, err in rows[:top]:
        print(f"   {us:7.1f} us {cud / us:5.2f}x  {'*' if d in tuned else ' '} {d:36s} err {err:.1e}")
    best_tuned = min((r for r in rows if r[1] in tuned), default=None)
    if best_tuned:
        print(f"   tuner's best {best_tuned[0]:.1f} us ({cud / best_tuned[0]:.2f}x), sweep's best {rows[0][0]:.1f} us")
    sys.stdout.flush()
    return cud / rows[0][0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", nargs="*", default=SHAPES)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--dry-run", action="store_true", help="list each shape's grid (any machine)")
    a = ap.parse_args()
    if a.dry_run:
        os.environ.pop("TRITON_INTERPRET", None)  # the GPU's configs, not the interpreter's one
        for text in a.shape:
            prob = _problem(text, "cpu")[0]
            cfgs = grid(prob)
            print(f"{text}: {len(cfgs)} configs")
            for c in cfgs:
                print(f"   {c.describe()}")
        return 0
    if not torch.cuda.is_available():
        print("wgrad_sweep: needs a CUDA GPU (or --dry-run)")
        return 0
    g = [_one(text, a.top) for text in a.shape]
    g = [v for v in g if v == v]
    if g:
        print(f"geomean of each shape's best against cuDNN: {math.exp(sum(map(math.log, g)) / len(g)):.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
