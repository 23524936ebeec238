#!/usr/bin/env python3
"""The depthwise weight gradient's rows kernel (``depthwise_wgrad_rows_kernel``) over a grid of
configs the tuner does not all offer -- elements per thread, columns per thread, strip height,
programs per SM -- on the grouped suite's depthwise layers, against cuDNN (bf16, channels_last).

    PYTHONPATH=src python3 tools/dw_wgrad_probe.py [--layers 0,3,...] [--quick]

Prints each form's time (median GPU time, L2 flushed before each run, as the tuner and the
benchmark time), its bytes per second (x and dy read once) and its share of the layer's
roofline (the larger of x + dy over 4.3 TB/s and the multiply-adds over the H200's fp32 FMA rate),
the tuned choice, and cuDNN. Question asked (session 21): is the kernel bound by how many bytes
it keeps in flight (few programs per SM, 4-byte loads) rather than by its instructions?
"""

from __future__ import annotations

import argparse
import sys

import torch

# (N, C, H, W, R, S, stride, pad): the grouped suite's depthwise layers (batch 64)
LAYERS = [
    (64, 32, 112, 112, 3, 3, 1, 1),
    (64, 96, 112, 112, 3, 3, 2, 1),
    (64, 144, 56, 56, 3, 3, 1, 1),
    (64, 192, 28, 28, 3, 3, 1, 1),
    (64, 576, 14, 14, 3, 3, 2, 1),
    (64, 960, 7, 7, 3, 3, 1, 1),
    (64, 96, 56, 56, 7, 7, 1, 3),
    (64, 192, 28, 28, 7, 7, 1, 3),
    (64, 768, 7, 7, 7, 7, 1, 3),
]
COPY_BPS = 4.3e12
FMA_PER_S = 132 * 128 * 1.98e9  # H200: 132 SMs x 128 fp32 lanes x boost clock


def _time(fn, flush) -> float:
    from convgemm._runtime import gpu_times

    fn()
    t = sorted(gpu_times(fn, 15.0, 10, 200, before=flush))
    return t[len(t) // 2] * 1e3


def _forms(prob, quick: bool):
    """(elements per thread, columns, strip rows, programs per SM) -> rows-kernel Configs."""
    from convgemm._runtime import cdiv, sm_count
    from convgemm.conv.fprop import Config

    big = prob.r * prob.s > 9
    out = []
    for e in (2,) if big else (2, 4):
        for cols in (1, 2) if big else (2, 4, 8):
            if e * (prob.r * prob.s + cdiv(prob.r, prob.stride[0]) * cols) > 200:
                continue
            bk = 64 if prob.k % 64 == 0 else 32
            bq = e * 128 // bk
            q_blocks = cdiv(prob.q, bq * cols)
            for rows in sorted({prob.p, cdiv(prob.p, 2), min(prob.p, 16), min(prob.p, 8)}, reverse=True):
                if quick and rows not in (prob.p, min(prob.p, 8)):
                    continue
                strips = cdiv(prob.p, rows)
                tiles = cdiv(prob.k, bk) * q_blocks
                for per_sm in (4, 8):
                    groups = max(1, min(prob.n * strips, cdiv(per_sm * sm_count(), tiles)))
                    out.append((e, per_sm, Config(bq, bk, rows, 4, 2, split_k=groups, cols=cols, vec=e)))
    seen = set()
    return [f for f in out if not (f[2] in seen or seen.add(f[2]))]


def _candidate_forms(prob, stages: list[int], vec1: bool = False):
    """The tuner's own rows-kernel candidates, each with ``stages`` (s - 1 steps loaded ahead);
    ``vec1``: each also with one channel per thread (half the column groups per program)."""
    from dataclasses import replace

    from convgemm.conv import backward as bw

    cands = bw.DWGRAD.rows_configs(prob)
    if vec1:
        cands += [replace(c, block_m=max(1, c.block_m // 2), vec=1) for c in cands if c.vec == 2]
    return [(c.vec, 0, replace(c, num_stages=s)) for c in cands for s in stages]


def _layer(spec, flush, quick: bool, stages: list[int] | None = None, tuned: bool = True, vec1: bool = False) -> None:
    import convgemm
    from convgemm.conv import backward as bw
    from convgemm.problem import ConvProblem

    n, c, h, w, r, s, stride, pad = spec
    dev = torch.device("cuda")
    fmt = torch.channels_last
    x = torch.randn(n, c, h, w, device=dev).to(torch.bfloat16).contiguous(memory_format=fmt)
    wt = torch.randn(c, 1, r, s, device=dev).to(torch.bfloat16).contiguous(memory_format=fmt)
    prob = ConvProblem.from_tensors(x, wt, None, stride=stride, padding=pad, groups=c)
    dy = torch.randn(n, c, prob.p, prob.q, device=dev).to(torch.bfloat16).contiguous(memory_format=fmt)
    name = f"{c}@{h} {r}x{s} s{stride}"
    nbytes = (x.numel() + dy.numel()) * 2
    roof = max(nbytes / COPY_BPS, dy.numel() * r * s / FMA_PER_S) * 1e6

    def cudnn():
        return torch.ops.aten.convolution_backward(
            dy, x, wt, None, [stride] * 2, [pad] * 2, [1] * 2, False, [0] * 2, c, [False, True, False]
        )[1]

    ref = cudnn().float()

    def line(form: str, us: float, got) -> None:
        err = ((got.float() - ref).norm() / ref.norm()).item()
        print(
            f"{name:<18} {form:<46} {us:8.1f} {nbytes / us / 1e6:7.2f} {roof / us:6.0%} {cudnn_us / us:6.2f}x {err:9.2e}",
            flush=True,
        )

    cudnn_us = _time(cudnn, flush)
    line("cudnn", cudnn_us, ref)
    kw = dict(stride=stride, padding=pad, groups=c)
    if tuned:
        got = convgemm.conv2d_weight(x, wt.shape, dy, **kw)
        algo, cfg, _, _ = bw.choose_wgrad(prob, x, dy, torch.empty_like(wt))
        line(f"tuned {algo.name} {cfg.describe()}"[:46],
             _time(lambda: convgemm.conv2d_weight(x, wt.shape, dy, **kw), flush), got)  # fmt: skip
    dwk = bw.DepthwiseWgrad()
    for e, per_sm, cfg in _candidate_forms(prob, stages, vec1) if stages else _forms(prob, quick):
        dw = torch.empty_like(wt)
        try:
            us = _time(lambda cfg=cfg, dw=dw: dwk.run(prob, x, dy, dw, cfg), flush)
        except Exception as ex:  # noqa: BLE001 - report and go on to the next form
            print(f"{name:<18} {cfg.describe()[:46]:<46} failed: {type(ex).__name__}: {str(ex)[:200]}")
            continue
        line(f"e{e} sm{per_sm} {cfg.describe()}"[:46], us, dw)


def main() -> int:
    from convgemm._runtime import l2_flush

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", default=",".join(str(i) for i in range(len(LAYERS))), help="indices into LAYERS")
    ap.add_argument("--quick", action="store_true", help="whole-image and 8-row strips only")
    ap.add_argument("--stages", default="", help="e.g. 2,3,4: the tuner's candidates with these stage counts instead")
    ap.add_argument("--no-tuned", action="store_true", help="skip the tuned call (its tuning compiles every candidate)")
    ap.add_argument("--vec1", action="store_true", help="with --stages: each candidate also at one channel per thread")
    a = ap.parse_args()
    stages = [int(v) for v in a.stages.split(",") if v]
    torch.backends.cudnn.benchmark = True
    flush = l2_flush(torch.device("cuda"))
    print(f"{'layer':<18} {'form':<46} {'us':>8} {'TB/s':>7} {'roof':>6} {'vs cuDNN':>7} {'rel err':>9}")
    for i in a.layers.split(","):
        _layer(LAYERS[int(i)], flush, a.quick, stages, not a.no_tuned, a.vec1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
