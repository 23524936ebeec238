"""Every depthwise tile config on a few layers (GPU): time, bandwidth and instructions' worth.

    PYTHONPATH=src python3 tools/depthwise_sweep.py            # the grouped suite's depthwise shapes
    PYTHONPATH=src python3 tools/depthwise_sweep.py --quick    # three shapes, for ncu runs too

Forces each config of ``Depthwise.configs`` (and a few more) through ``default_config`` with
tuning off, times it with CUDA-event medians against cuDNN on the same tensors, and prints the
bytes moved per second (input read once, output written once), so a config family that is
latency-bound (few bytes per second at every size) can be told from one that is bandwidth-bound.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("CONVGEMM_AUTOTUNE", "0")

import torch
import torch.nn.functional as F
import triton.testing

import convgemm
from convgemm.conv.fprop import ALGORITHMS, Config
from convgemm.problem import ConvProblem
from convgemm.tune.autotune import clear_memo

# (N, C, H, W, R, S, stride, pad_h, pad_w)
SHAPES = [
    (64, 144, 56, 56, 3, 3, 1, 1, 1),
    (64, 32, 112, 112, 3, 3, 1, 1, 1),
    (64, 576, 14, 14, 3, 3, 1, 1, 1),
    (64, 96, 56, 56, 7, 7, 1, 3, 3),
    (64, 384, 14, 14, 7, 7, 1, 3, 3),
    (64, 768, 7, 7, 7, 7, 1, 3, 3),
    (8, 4096, 1, 4096, 1, 4, 1, 0, 3),  # the causal depthwise conv1d (padded both sides here)
]
EXTRA = [Config(8, 64, 4, 4, 1), Config(16, 128, 1, 8, 1), Config(16, 64, 1, 4, 1), Config(32, 64, 1, 8, 1)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", type=int, nargs="*", help="indices into SHAPES")
    a = ap.parse_args()
    algo = ALGORITHMS["depthwise"]
    cls = type(algo)
    default = cls.default_config
    shapes = [SHAPES[i] for i in a.only] if a.only else SHAPES[:3] if a.quick else SHAPES
    for n, c, h, w, r, s, st, ph, pw in shapes:
        x = torch.randn(n, c, h, w, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
        wt = torch.randn(c, 1, r, s, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
        kw = dict(stride=st, padding=(ph, pw), groups=c)
        prob = ConvProblem.from_tensors(x, wt, **kw)
        ref = F.conv2d(x, wt, **kw)
        nbytes = (x.numel() + ref.numel()) * x.element_size()
        cudnn = triton.testing.do_bench(lambda x=x, wt=wt, kw=kw: F.conv2d(x, wt, **kw), return_mode="median") * 1e3
        print(f"== {n}x{c}x{h}x{w} {r}x{s} s{st}: cuDNN {cudnn:.1f} us ({nbytes / cudnn / 1e6:.2f} TB/s)")
        seen = set()
        for cfg in algo.configs(prob) + [default(algo, prob)] + EXTRA:
            key = (cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_warps)
            if key in seen:
                continue
            seen.add(key)
            cls.default_config = lambda self, prob, cfg=cfg: cfg
            clear_memo()
            try:
                fn = lambda x=x, wt=wt, kw=kw: convgemm.conv2d(x, wt, algorithm="depthwise", **kw)  # noqa: E731
                y = fn()
                err = (y.float() - ref.float()).abs().max().item()
                us = triton.testing.do_bench(fn, return_mode="median") * 1e3
                print(f"  q{cfg.block_m:<3d} k{cfg.block_n:<4d} rows{cfg.block_k:<2d} w{cfg.num_warps}: {us:8.1f} us "
                      f"{nbytes / us / 1e6:5.2f} TB/s  {cudnn / us:5.2f}x cuDNN  max err {err:.3g}")  # fmt: skip
            finally:
                cls.default_config = default
                clear_memo()


if __name__ == "__main__":
    main()
