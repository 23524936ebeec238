#!/usr/bin/env python3
"""``grouped_blocks`` over a grid of configs the tuner does not all offer (pixel tile, blocks
per program, warps, stages) on the grouped suite's ResNeXt layers, against cuDNN and
``grouped_tma`` (its session-25 tuned configs), bf16, channels_last, no bias.

    PYTHONPATH=src python3 tools/grouped_blocks_probe.py [--layers 0,2,...] [--quick]

Prints each form's median GPU time (L2 flushed before each run, as the tuner and the benchmark
time), its speedup over cuDNN and its error against cuDNN's output. Question asked (session 26):
does multiplying only the block diagonal of 16-channel blocks (4x the useful products at 4
channels per group, where grouped_tma multiplies 16x) make ResNeXt's grouped 3x3 faster?
"""

from __future__ import annotations

import argparse
import sys

import torch

# (width, size, stride): the grouped suite's ResNeXt-50 32x4d layers (batch 64, 32 groups)
LAYERS = [(128, 56, 1), (256, 56, 2), (256, 28, 1), (512, 28, 2), (512, 14, 1), (1024, 14, 2), (1024, 7, 1)]
# session 25's tuned grouped_tma / implicit_gemm_tma picks (s25-call1-grouped.json)
S25 = {
    0: ("grouped_tma", dict(block_m=64, block_n=256, block_k=64, num_warps=4, num_stages=2, tile_n=8, tile_h=4,
                            tile_w=8, gt=16)),
    1: ("grouped_tma", dict(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=4, tile_n=8, tile_h=4,
                            tile_w=4, gt=8)),
    2: ("grouped_tma", dict(block_m=64, block_n=256, block_k=64, num_warps=4, num_stages=2, tile_n=16, tile_h=4,
                            tile_w=4, gt=8)),
    3: ("grouped_tma", dict(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=4, tile_n=32, tile_h=2,
                            tile_w=2, gt=4)),
    4: ("grouped_tma", dict(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=4, tile_n=32, tile_h=2,
                            tile_w=2, gt=4)),
}  # fmt: skip


def _time(fn, flush) -> float:
    from convgemm._runtime import gpu_times

    fn()
    t = sorted(gpu_times(fn, 15.0, 10, 200, before=flush))
    return t[len(t) // 2] * 1e3


def _forms(algo, prob, quick: bool):
    from convgemm.conv.fprop import spatial_tiles

    out = list(algo.configs(prob))
    shapes = [(64, 64, 4), (64, 128, 4), (64, 256, 4), (128, 128, 4), (128, 128, 8), (128, 256, 8), (256, 128, 8)]
    for bm, cols, warps in shapes[:3] if quick else shapes:
        for stages in (2, 3, 4):
            for which in range(min(2, len(spatial_tiles(prob, bm)))):
                cfg = algo._config(prob, bm, cols, warps, stages, which)
                if cfg not in out:
                    out.append(cfg)
    return out


def _layer(i, flush, quick: bool) -> None:
    from convgemm.conv.fprop import ALGORITHMS, Config
    from convgemm.functional import _prepare

    width, size, stride = LAYERS[i]
    dev = torch.device("cuda")
    fmt = torch.channels_last
    x = torch.randn(64, width, size, size, device=dev).to(torch.bfloat16).contiguous(memory_format=fmt)
    w = (torch.randn(width, width // 32, 3, 3, device=dev) / 6).to(torch.bfloat16).contiguous(memory_format=fmt)
    kw = dict(stride=stride, padding=1, groups=32)
    name = f"{width}@{size} s{stride}"

    def cudnn():
        return torch.nn.functional.conv2d(x, w, None, **kw)

    ref = cudnn().float()

    def line(form: str, us: float, got) -> None:
        err = ((got.float() - ref).norm() / ref.norm()).item()
        print(f"{name:<12} {form:<52} {us:8.1f} {cudnn_us / us:6.2f}x {err:9.2e}", flush=True)

    cudnn_us = _time(cudnn, flush)
    line("cudnn", cudnn_us, ref)
    prob, xn, y = _prepare(x, w, None, (stride, stride), (1, 1), (1, 1), 32)
    if i in S25:
        name0, fields = S25[i]
        algo0, cfg0 = ALGORITHMS[name0], Config(**fields)
        out0 = torch.empty_like(y)
        us = _time(lambda: algo0.run(prob, xn, w, None, out0, cfg0), flush)
        line(f"s25 {name0} {cfg0.describe()}", us, out0)
    algo = ALGORITHMS["grouped_blocks"]
    reason = algo.supports(prob)
    if reason:
        print(f"{name:<12} grouped_blocks: {reason}")
        return
    for cfg in _forms(algo, prob, quick):
        out = torch.empty_like(y)
        try:
            us = _time(lambda cfg=cfg, out=out: algo.run(prob, xn, w, None, out, cfg), flush)
        except Exception as ex:  # noqa: BLE001 - report and go on to the next form
            print(f"{name:<12} {cfg.describe()[:52]:<52} failed: {type(ex).__name__}: {str(ex)[:200]}")
            continue
        tag = "*" if cfg in algo.configs(prob) else " "
        line(f"{tag}{cfg.describe()}", us, out)


def main() -> int:
    from convgemm._runtime import l2_flush

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", default=",".join(str(i) for i in range(len(LAYERS))), help="indices into LAYERS")
    ap.add_argument("--quick", action="store_true", help="64-pixel tiles only")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("grouped_blocks_probe: needs a CUDA GPU", file=sys.stderr)
        return 2
    print(f"{'layer':<12} {'form (* = a tuner candidate)':<52} {'us':>8} {'vs cuDNN':>7} {'rel err':>9}")
    flush = l2_flush(torch.device("cuda"))
    for i in (int(v) for v in a.layers.split(",")):
        _layer(i, flush, a.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
