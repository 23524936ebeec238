#!/usr/bin/env python3
"""``wgrad_grouped_ws`` (grouped weight gradients on the Gluon kernel; a tuner candidate since session 37)
on ResNeXt-50's grouped 3x3 layers: every candidate against cuDNN's weight gradient and
convgemm's tuned choice without it (bf16, channels_last; GPU only).

    PYTHONPATH=src python3 tools/grouped_wgrad_probe.py [--shape N,C,H,W,K,R,S,stride,pad,dil,groups ...]

Times are medians of GPU times with the L2 flushed before each run (the tuner's timer); the
error is against cuDNN's gradient. Session 21's grouped wgrad suite: ``wgrad_grouped_tma`` ran
0.42-0.65x cuDNN on the six narrower layers.
"""

from __future__ import annotations

import argparse
import sys

import torch

SHAPES = [
    f"64,{w},{s},{s},{w},3,3,{st},1,1,32"
    for w, s, st in ((128, 56, 1), (256, 56, 2), (256, 28, 1), (512, 28, 2), (512, 14, 1), (1024, 14, 2), (1024, 7, 1))
]


def _probe(text: str, dev, flush) -> None:
    import convgemm
    from convgemm._runtime import gpu_times, sm_count
    from convgemm.bench.suites import parse_shape
    from convgemm.conv import backward as bw
    from convgemm.conv.layout import as_nhwc
    from convgemm.problem import ConvProblem

    def time_us(fn) -> float:
        fn()
        t = sorted(gpu_times(fn, 20.0, 10, 200, before=flush))
        return t[len(t) // 2] * 1e3

    shp = parse_shape(text)
    cl = torch.channels_last
    x = torch.randn(shp.n, shp.c, shp.h, shp.w, device=dev).to(torch.bfloat16).contiguous(memory_format=cl)
    wt = torch.randn(shp.k, shp.c // shp.groups, shp.r, shp.s, device=dev).to(torch.bfloat16)
    kw = dict(stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
    prob = ConvProblem.from_tensors(x, wt, None, **kw)
    dy = torch.randn(shp.n, shp.k, prob.p, prob.q, device=dev).to(torch.bfloat16).contiguous(memory_format=cl)
    st, pd, dl = ([v] * 2 for v in (shp.stride, shp.pad, shp.dil))

    def cudnn():
        return torch.ops.aten.convolution_backward(dy, x, wt, None, st, pd, dl, False, [0, 0], shp.groups,
                                                  [False, True, False])[1]  # fmt: skip

    ref = cudnn().float()

    def line(form: str, us: float, got) -> None:
        err = ((got.float() - ref).norm() / ref.norm()).item()
        print(f"{text:<32} {form:<48} {us:8.1f} {err:9.2e}", flush=True)

    line("cudnn", time_us(cudnn), ref)
    got = convgemm.conv2d_weight(x, wt.shape, dy, **kw)  # tunes (without wgrad_grouped_ws)
    algo, cfg, _, _ = bw.choose_wgrad(prob, x, dy, torch.empty_like(wt))
    line(f"tuned {algo.name} {cfg.describe()}"[:48], time_us(lambda: convgemm.conv2d_weight(x, wt.shape, dy, **kw)),
         got)  # fmt: skip
    xn, dyn = as_nhwc(x), as_nhwc(dy)
    reason = bw.WGRAD_GS.supports(prob, xn, dyn)
    if reason:
        print(f"{text:<32} wgrad_grouped_ws not supported: {reason}")
        return
    for cfg in bw.WGRAD_GS.candidates(prob, sm_count()):
        dw = torch.empty_like(wt)
        try:
            us = time_us(lambda cfg=cfg, dw=dw: bw.WGRAD_GS.run(prob, xn, dyn, dw, cfg))
        except Exception as e:  # noqa: BLE001 - report and go on to the next form
            print(f"{text:<32} {cfg.describe()[:48]:<48} failed: {type(e).__name__}: {str(e)[:200]}")
            continue
        line(f"wgrad_grouped_ws {cfg.describe()}"[:48], us, dw)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", nargs="*", default=SHAPES)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("grouped_wgrad_probe: needs a CUDA GPU", file=sys.stderr)
        return 2
    from convgemm._runtime import l2_flush

    dev = torch.device("cuda")
    flush = l2_flush(dev)
    for text in a.shape:
        _probe(text, dev, flush)
    return 0


if __name__ == "__main__":
    sys.exit(main())
