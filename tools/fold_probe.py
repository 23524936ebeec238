#!/usr/bin/env python3
"""``narrow_fold`` with and without padded taps (``fold.PAD_TAPS``) on CRAFT's conv1_1 dgrad as
the forward convolution it runs (dy 64 channels -> 3, 3x3, 768 x 768, bf16, channels_last), every
candidate config, in alternating rounds of one process (GPU).

    PYTHONPATH=src python3 tools/fold_probe.py [--rounds 3]

Session 38's question: the intermediate U holds 9 fp32 channels a pixel (36-byte rows), so the R x 1
GEMM stores it and the fold reads it 4 bytes at a time (sm_90 SASS: 16 STG.E a thread in the GEMM,
48 LDG.E in the fold); padded to 4 channels a tap (12 a pixel, 33% more bytes) the fold's loads
become 12 LDG.E.128. Does that pay? Issue 5 asks 2x cuDNN on first-layer dgrad (conv1_1: 1.67x).
Prints each (config, padded) time (median, L2 flushed, the bench's timer), cuDNN's dgrad and the
tuned ``conv2d_input`` for reference.
"""

from __future__ import annotations

import argparse

import torch


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()

    import torch.nn.functional as F

    import convgemm
    from convgemm.bench.runner import _gpu_bench
    from convgemm.conv import fold
    from convgemm.conv.fprop import ALGORITHMS

    g = torch.Generator(device="cuda").manual_seed(0)
    dy = torch.randn(1, 64, 768, 768, device="cuda", dtype=torch.bfloat16, generator=g)
    dy = dy.contiguous(memory_format=torch.channels_last)
    w = torch.randn(64, 3, 3, 3, device="cuda", dtype=torch.bfloat16, generator=g) / 24
    wf = w.flip(2, 3).transpose(0, 1).contiguous()  # the forward weight of the dgrad: [3, 64, 3, 3]
    x_shape = (1, 3, 768, 768)
    ref = F.conv2d(dy.double(), wf.double(), padding=1)

    def cudnn():
        return torch.ops.aten.convolution_backward(dy, torch.empty(x_shape, device="cuda", dtype=dy.dtype), w, None,
                                                   [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, False, False])[0]  # fmt: skip

    print(f"cuDNN dgrad {_gpu_bench(cudnn):7.1f} us")
    convgemm.conv2d_input(x_shape, w, dy, padding=1)
    print(
        f"convgemm conv2d_input (tuned) {_gpu_bench(lambda: convgemm.conv2d_input(x_shape, w, dy, padding=1)):7.1f} us"
    )
    algo = ALGORITHMS["narrow_fold"]
    prob = convgemm.explain(dy, wf, None, padding=1, algorithm="narrow_fold")["problem"]
    y = torch.empty(1, 3, 768, 768, device="cuda", dtype=dy.dtype).contiguous(memory_format=torch.channels_last)
    times: dict[tuple[str, bool], list[float]] = {}
    for _ in range(a.rounds):
        for pad in (False, True):
            fold.PAD_TAPS = pad
            for cfg in algo.configs(prob):
                algo.run(prob, dy, wf, None, y, cfg)
                err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
                assert err < 2e-2, f"{cfg.describe()} padded={pad}: rel err {err:.2e}"
                us = _gpu_bench(lambda cfg=cfg: algo.run(prob, dy, wf, None, y, cfg))
                times.setdefault((cfg.describe(), pad), []).append(us)
    fold.PAD_TAPS = False
    for (cfg, pad), ts in sorted(times.items()):
        ts = sorted(ts)
        print(
            f"narrow_fold {cfg:28s} {'padded' if pad else 'plain ':6s} {ts[len(ts) // 2]:7.1f} us  ({', '.join(f'{t:.1f}' for t in ts)})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
