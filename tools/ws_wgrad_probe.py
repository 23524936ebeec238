#!/usr/bin/env python3
"""The Gluon wgrad (``conv/ws_wgrad.py``) on the layers where it is weakest, every form the tuner
offers and a few it does not (two programs per SM, other split counts), against cuDNN's weight
gradient and convgemm's tuned choice (bf16, channels_last(_3d)).

    PYTHONPATH=src python3 tools/ws_wgrad_probe.py [--layers NAME,...]

Times are medians of GPU times with the L2 flushed before each run (the tuner's timer); the error
is against cuDNN's gradient. cuDNN chooses its algorithm by timing (``cudnn.benchmark``).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

import torch

# name -> (N, C, D, H, W, K, T, R, S, stride, pad, dilation); 2-D layers have D = 0
LAYERS = {
    "r50-1x1-512-2048@7": (64, 512, 0, 7, 7, 2048, 1, 1, 1, 1, 0, 1),
    "r50-1x1-2048-512@7": (64, 2048, 0, 7, 7, 512, 1, 1, 1, 1, 0, 1),
    "r50-3x3-512@7": (64, 512, 0, 7, 7, 512, 1, 3, 3, 1, 1, 1),
    "r50-3x3-512s2@14": (64, 512, 0, 14, 14, 512, 1, 3, 3, 2, 1, 1),
    "r50-1x1-1024-2048s2@14": (64, 1024, 0, 14, 14, 2048, 1, 1, 1, 2, 0, 1),
    "craft-1x1-1024@48": (1, 1024, 0, 48, 48, 1024, 1, 1, 1, 1, 0, 1),
    "craft-fc6-d6": (1, 512, 0, 48, 48, 1024, 1, 3, 3, 1, 6, 6),
    "r3d18-l4": (8, 512, 2, 7, 7, 512, 3, 3, 3, 1, 1, 1),
    "r3d18-l3": (8, 256, 4, 14, 14, 256, 3, 3, 3, 1, 1, 1),
}


def _first_tile(p3, pixels: int) -> tuple[int, int, int]:
    """The best-covering block of ``pixels`` output pixels the wgrad takes (one depth deep on a
    strided layer read through the phase view), as ``Wgrad3dWs.candidates`` picks it."""
    from convgemm.conv.conv3d import depth_free, spatial_tiles3, strided3

    tiles3 = spatial_tiles3(p3, pixels)
    if strided3(p3) and not depth_free((p3.t, p3.r, p3.s), p3.pad, p3.stride):
        tiles3 = [t for t in tiles3 if t[1] == 1]
    return tiles3[0][1:]


def _extra_forms(p3, cands, sms: int):
    """Forms the tuner does not offer: each shape at two programs per SM (stages cut to fit half
    the shared memory), at half and twice its split count, and a 64 x 128 tile on 64-pixel blocks
    at two programs per SM."""
    from convgemm._runtime import cdiv
    from convgemm.conv.conv3d import Wgrad3dWs
    from convgemm.conv.fprop import Config

    def blocks(c) -> int:
        return p3.n * cdiv(p3.od, c.tile_n) * cdiv(p3.p, c.tile_h) * cdiv(p3.q, c.tile_w)

    out = []
    if cands and p3.c >= 128:
        td, th, tw = _first_tile(p3, 64)
        base = Config(64, 128, 64, 4, 4, tile_n=td, tile_h=th, tile_w=tw, persistent=2)
        tiles = cdiv(p3.k, 64) * p3.t * p3.r * p3.s * cdiv(p3.c, 128)
        out += [replace(base, split_k=sk) for sk in Wgrad3dWs.splits(tiles, blocks(base), 2 * sms, 64)]
    for c in cands:
        stages = c.num_stages
        while stages > 2 and stages * c.block_k * (c.block_m + c.block_n) * 2 > 110_000:
            stages -= 1
        # (two 128x256 programs per SM leave 80 registers a thread: ptxas refuses, session 20)
        if stages * c.block_k * (c.block_m + c.block_n) * 2 <= 110_000 and c.block_m * c.block_n < 128 * 256:
            out.append(replace(c, persistent=2, num_stages=stages))
        for sk in sorted({max(1, c.split_k // 2), c.split_k * 2}):
            per = cdiv(blocks(c), sk)
            if sk == 1 or (per >= 4 and (sk - 1) * per < blocks(c)):
                out.append(replace(c, split_k=sk))
    return [c for c in dict.fromkeys(out) if c not in cands]


def _deep_forms(p3, cands):
    """Each candidate tile on pixel steps half as long with twice the ring stages that fit (the
    wgrad candidates' 200 KB ring budget): since session 58 the producer walks the pixel blocks
    without a division a step, and the forward's 64 x 128 tile gained 1.06-1.37x from a deeper
    ring (session 59); on 7x7 outputs the 64-pixel steps also cover the output exactly."""
    out = []
    for c in cands:
        bp = c.block_k // 2
        if bp < 32:
            continue
        td, th, tw = _first_tile(p3, bp)
        stages = 8
        while stages > c.num_stages and stages * bp * (c.block_m + c.block_n) * 2 > 200_000:
            stages -= 1
        out.append(replace(c, block_k=bp, num_stages=stages, tile_n=td, tile_h=th, tile_w=tw))
    return [c for c in dict.fromkeys(out) if c not in cands]


def _time(fn, flush) -> float:
    from convgemm._runtime import gpu_times

    fn()
    t = sorted(gpu_times(fn, 20.0, 10, 200, before=flush))
    return t[len(t) // 2] * 1e3


def _layer(name: str, spec, flush, deep: bool = False) -> None:
    import convgemm
    from convgemm._runtime import sm_count
    from convgemm.conv import backward as bw
    from convgemm.conv import conv3d as k3
    from convgemm.problem import ConvProblem
    from convgemm.problem3d import ConvProblem3d

    n, c, d, h, w, k, t, r, s, stride, pad, dil = spec
    dev = torch.device("cuda")
    three = d > 0
    fmt = torch.channels_last_3d if three else torch.channels_last
    xs = (n, c, d, h, w) if three else (n, c, h, w)
    ws = (k, c, t, r, s) if three else (k, c, r, s)
    x = torch.randn(xs, device=dev).to(torch.bfloat16).contiguous(memory_format=fmt)
    wt = torch.randn(ws, device=dev).to(torch.bfloat16).contiguous(memory_format=fmt)
    kw = dict(stride=stride, padding=pad, dilation=dil)
    if three:
        prob = ConvProblem3d.from_tensors(x, wt, None, **kw)
        ys = (n, k, prob.od, prob.p, prob.q)
    else:
        prob = ConvProblem.from_tensors(x, wt, None, **kw)
        ys = (n, k, prob.p, prob.q)
    dy = torch.randn(ys, device=dev).to(torch.bfloat16).contiguous(memory_format=fmt)
    nd = len(xs) - 2

    def cudnn():
        return torch.ops.aten.convolution_backward(dy, x, wt, None, [stride] * nd, [pad] * nd, [dil] * nd, False,
                                                  [0] * nd, 1, [False, True, False])[1]  # fmt: skip

    ref = cudnn().float()
    flop = 2 * dy.numel() * c * t * r * s if three else 2 * dy.numel() * c * r * s

    def line(form: str, us: float, got) -> None:
        err = ((got.float() - ref).norm() / ref.norm()).item()
        print(f"{name:<24} {form:<44} {us:8.1f} {flop / us / 1e6:8.0f} {err:9.2e}", flush=True)

    line("cudnn", _time(cudnn, flush), ref)
    tuned = (convgemm.conv3d_weight if three else convgemm.conv2d_weight)(x, wt.shape, dy, **kw)  # tunes
    if three:
        algo, cfg = k3.wgrad_choice(prob, x, dy, torch.empty_like(wt))
    else:
        algo, cfg, _, _ = bw.choose_wgrad(prob, x, dy, torch.empty_like(wt))
    fn = convgemm.conv3d_weight if three else convgemm.conv2d_weight
    line(f"tuned {algo.name} {cfg.describe()}"[:44], _time(lambda: fn(x, wt.shape, dy, **kw), flush), tuned)
    if three:
        p3 = prob

        def run(cfg, dw):
            k3.WGRAD3D_WS.run(p3, x, dy, dw, cfg)
    else:
        p3 = bw.WGRAD_WS._problem3d(prob)

        def run(cfg, dw):
            bw.WGRAD_WS.run(prob, x, dy, dw, cfg)

    cands = k3.WGRAD3D_WS.candidates(p3, sm_count())
    extra = _deep_forms(p3, cands) if deep else _extra_forms(p3, cands, sm_count())
    for tag, forms in (("", cands), ("+", extra)):
        for cfg in forms:
            dw = torch.empty_like(wt)
            try:
                us = _time(lambda cfg=cfg, dw=dw: run(cfg, dw), flush)
            except Exception as e:  # noqa: BLE001 - report and go on to the next form
                print(f"{name:<24} {tag}{cfg.describe()[:43]:<43} failed: {type(e).__name__}: {str(e)[:200]}")
                continue
            line(f"{tag}{cfg.describe()}"[:44], us, dw)


def main() -> int:
    from convgemm._runtime import l2_flush

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", default=",".join(LAYERS), help="comma-separated names: " + ", ".join(LAYERS))
    ap.add_argument("--deep", action="store_true",
                    help="the not-offered forms are each candidate at half the pixel step and a deeper ring "
                         "(_deep_forms) instead of _extra_forms")  # fmt: skip
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    flush = l2_flush(torch.device("cuda"))
    print(f"{'layer':<24} {'form (+: not offered)':<44} {'us':>8} {'TFLOP/s':>8} {'rel err':>9}", flush=True)
    for name in a.layers.split(","):
        _layer(name, LAYERS[name], flush, a.deep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
