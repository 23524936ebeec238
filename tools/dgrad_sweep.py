"""Strided dgrad on the H200: every TMA dgrad tile config against the gather kernel, the per-phase
forward convolutions and cuDNN, on ResNet-50's strided 3x3 and 1x1 layers (GPU only).

    PYTHONPATH=src python3 tools/dgrad_sweep.py [--only 0 2]

``DgradTma`` (conv/backward.py) runs one default config, untimed before session 8; this prints
each candidate's time and max error against cuDNN's ``conv2d_input`` on the same tensors
(bf16, channels_last, CUDA-event medians), so the default (or a tuned set) can be chosen by
measurement.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("CONVGEMM_AUTOTUNE", "0")
os.environ["CONVGEMM_STRIDED_TMA"] = "1"

import torch
import triton
import triton.testing

from convgemm.conv.backward import DGRAD, DGRAD_TMA, tuned_dgrad_tma
from convgemm.conv.fprop import Config, spatial_tiles
from convgemm.functional import _dgrad_by_phases
from convgemm.problem import ConvProblem

# (N, C, H, K, R, stride, pad): dx is N x C x H x H
SHAPES = [
    (64, 128, 56, 128, 3, 2, 1),
    (64, 256, 28, 256, 3, 2, 1),
    (64, 512, 14, 512, 3, 2, 1),
    (64, 64, 112, 64, 3, 2, 1),
    # ResNet-50's strided 1x1 downsample layers (4-6): the per-phase forward clears dx first
    (64, 256, 56, 512, 1, 2, 0),
    (64, 512, 28, 1024, 1, 2, 0),
    (64, 1024, 14, 2048, 1, 2, 0),
]


def _tensors(n, c, h, k, r, st, pad):
    """bf16 channels_last x [n, c, h, h], w [k, c, r, r], the problem and a dy for it."""
    dt, cl = torch.bfloat16, torch.channels_last
    x = torch.randn(n, c, h, h, device="cuda", dtype=dt).contiguous(memory_format=cl)
    w = (torch.randn(k, c, r, r, device="cuda", dtype=dt) * 0.1).contiguous(memory_format=cl)
    prob = ConvProblem.from_tensors(x, w, None, stride=st, padding=pad)
    dy = torch.randn(prob.output_shape, device="cuda", dtype=dt).contiguous(memory_format=cl)
    return x, w, prob, dy


def _us(fn) -> float:
    # the benchmark's timer (GPU time only, L2 flushed): do_bench counts a slow host's launch
    # time as GPU time on small layers (bench/runner.py)
    from convgemm.bench.runner import _bench

    return _bench(fn, 60)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", type=int, nargs="*", help="indices into SHAPES")
    ap.add_argument("--repeat", type=int, default=0,
                    help="time only the default config, on N fresh sets of tensors (new addresses) each")  # fmt: skip
    ap.add_argument("--routes", action="store_true",
                    help="only cuDNN, the gather kernel, the per-phase forwards (tuned unless CONVGEMM_AUTOTUNE=0) "
                         "and DgradTma's default config, each timed twice: no config sweep")  # fmt: skip
    ap.add_argument("--lean", action="store_true",
                    help="only cuDNN, the tuned pick and short rings of wide tiles (2-3 stages: phases of 2-8 K "
                         "steps need no deep ring, and two or three such programs an SM overlap each other)")  # fmt: skip
    ap.add_argument("--ab", action="store_true",
                    help="the default config with and without per-phase K loops and the phase order")  # fmt: skip
    a = ap.parse_args()
    if a.ab:
        return ab(a)
    if a.repeat:
        return repeat(a)
    for n, c, h, k, r, st, pad in [SHAPES[i] for i in a.only] if a.only else SHAPES:
        x, w, prob, dy = _tensors(n, c, h, k, r, st, pad)
        ref = torch.nn.grad.conv2d_input(x.shape, w, dy, stride=st, padding=pad)
        flop = 2 * prob.n * prob.p * prob.q * prob.k * prob.c * r * r
        cudnn = _us(lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, stride=st, padding=pad))  # noqa: B023
        print(f"== dgrad {r}x{r} s{st} {c}->{k} @{h} ({flop / 1e9:.1f} GFLOP): cuDNN {cudnn:.1f} us "
              f"({flop / cudnn / 1e6:.0f} TFLOP/s)")  # fmt: skip

        def show(label, fn, out, ref=ref, flop=flop, cudnn=cudnn):
            fn()
            err = (out.float() - ref.float()).abs().max().item()
            us = _us(fn)
            print(f"  {label:34s} {us:8.1f} us {flop / us / 1e6:5.0f} TFLOP/s {cudnn / us:5.2f}x  err {err:.3g}")

        dx = torch.empty_like(x)
        show("gather", lambda: DGRAD.run(prob, dy, w, dx, DGRAD.default_config(prob)), dx)  # noqa: B023
        show("phases (forward per phase)", lambda: _dgrad_by_phases(prob, w, dy, dx), dx)  # noqa: B023
        why = DGRAD_TMA.supports(prob, dy)
        if why is not None:
            print(f"  tma: not supported: {why}")
            continue
        if a.lean:
            # session 60's tuner log: 128 x 256 (half the L2 traffic a MFLOP of the 64 x 128 pick)
            # took about the pick's time, 128 x 128 at 4 stages (one program an SM) 1.3-1.4x
            # longer; short rings let two or three wide-tile programs share an SM
            if os.environ["CONVGEMM_AUTOTUNE"] != "0":
                cfg = tuned_dgrad_tma(prob, dy, w, dx)
                show(f"tma tuned {cfg.describe()}", lambda cfg=cfg: DGRAD_TMA.run(prob, dy, w, dx, cfg), dx)  # noqa: B023
            dims = (prob.n, prob.h // st, prob.w // st)
            for bm, bn, warps, stages in ((64, 128, 4, 3), (128, 128, 8, 2), (128, 128, 4, 2), (128, 128, 8, 3),
                                          (128, 256, 8, 2), (64, 256, 4, 2)):  # fmt: skip
                if c % bm:
                    continue
                _, tn, th, tw = spatial_tiles(prob, bn, dims)[0]
                cfg = Config(bm, bn, 64, warps, stages, tile_n=tn, tile_h=th, tile_w=tw)
                show(cfg.describe(), lambda cfg=cfg: DGRAD_TMA.run(prob, dy, w, dx, cfg), dx)  # noqa: B023
            continue
        if a.routes:
            # a second timing of each, since runs on this machine drift by several percent
            show("phases (again)", lambda: _dgrad_by_phases(prob, w, dy, dx), dx)  # noqa: B023
            cfg = DGRAD_TMA.default_config(prob)
            for label in (f"tma default {cfg.describe()}", "tma default (again)"):
                show(label, lambda cfg=cfg: DGRAD_TMA.run(prob, dy, w, dx, cfg), dx)  # noqa: B023
            if os.environ["CONVGEMM_AUTOTUNE"] != "0":
                # the route's own pick (what conv2d_input runs): the phases above are tuned too
                cfg = tuned_dgrad_tma(prob, dy, w, dx)
                for label in (f"tma tuned {cfg.describe()}", "tma tuned (again)"):
                    show(label, lambda cfg=cfg: DGRAD_TMA.run(prob, dy, w, dx, cfg), dx)  # noqa: B023
            continue
        dims = (prob.n, prob.h // st, prob.w // st)
        for bm in (64, 128):
            if c % bm:
                continue
            for bn in (64, 128, 256):
                if bm * bn > 128 * 256:
                    continue
                tiles = spatial_tiles(prob, bn, dims)[:2]
                for warps, stages in ((4, 3), (4, 4), (8, 3), (8, 4)):
                    if bm * bn >= 128 * 128 and warps == 4:
                        continue
                    for _, tn, th, tw in tiles:
                        cfg = Config(bm, bn, 64, warps, stages, tile_n=tn, tile_h=th, tile_w=tw)
                        try:
                            show(cfg.describe(), lambda cfg=cfg: DGRAD_TMA.run(prob, dy, w, dx, cfg), dx)  # noqa: B023
                        except Exception as e:  # a config over the shared-memory budget
                            print(f"  {cfg.describe():34s} failed: {type(e).__name__}: {str(e)[:80]}")
        print(f"  (default: {DGRAD_TMA.default_config(prob).describe()})")


@triton.jit
def _full_k(state, k_tiles):
    return k_tiles


def ab(a: argparse.Namespace) -> None:
    """DgradTma's default config four ways: per-phase K loops (``tma_dgrad_k_tiles``) on or off,
    phases in tap order (``_phase_order``) or in index order, each timed twice."""
    from convgemm.conv import backward
    from convgemm.conv import loaders as cl

    k_tiles, order = cl.tma_dgrad_k_tiles, backward._phase_order
    ident = lambda prob: sum(f << (4 * f) for f in range(prob.stride[0] * prob.stride[1]))  # noqa: E731
    for n, c, h, k, r, st, pad in [SHAPES[i] for i in a.only] if a.only else SHAPES:
        x, w, prob, dy = _tensors(n, c, h, k, r, st, pad)
        dx = torch.empty_like(x)
        cfg = DGRAD_TMA.default_config(prob)
        for per_phase in (True, False):
            for ordered in (True, False):
                cl.tma_dgrad_k_tiles = k_tiles if per_phase else _full_k
                backward._phase_order = order if ordered else ident
                try:
                    fn = lambda: DGRAD_TMA.run(prob, dy, w, dx, cfg)  # noqa: B023, E731
                    fn()
                    t = [_us(fn) for _ in range(2)]
                finally:
                    cl.tma_dgrad_k_tiles, backward._phase_order = k_tiles, order
                print(f"dgrad {r}x{r} s{st} {c}->{k} @{h} per-phase K {per_phase!s:5} tap order {ordered!s:5}: "
                      f"{t[0]:7.1f} {t[1]:7.1f} us")  # fmt: skip


def repeat(a: argparse.Namespace) -> None:
    """The default config's time on fresh tensors, N times: is a spread between runs a property
    of the allocation (addresses) rather than of the config?"""
    for n, c, h, k, r, st, pad in [SHAPES[i] for i in a.only] if a.only else SHAPES:
        keep = []  # hold earlier sets so that each set gets new addresses
        for _ in range(a.repeat):
            x, w, prob, dy = _tensors(n, c, h, k, r, st, pad)
            dx = torch.empty_like(x)
            cfg = DGRAD_TMA.default_config(prob)
            us = _us(lambda: DGRAD_TMA.run(prob, dy, w, dx, cfg))  # noqa: B023
            print(f"dgrad {r}x{r} s{st} {c}->{k} @{h} {cfg.describe()}: {us:7.1f} us  "
                  f"dx%64K {dx.data_ptr() % 65536:6d} dy%64K {dy.data_ptr() % 65536:6d}")  # fmt: skip
            keep.append((x, w, dy, dx))


if __name__ == "__main__":
    main()
