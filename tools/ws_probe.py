#!/usr/bin/env python3
"""The warp-specialized Gluon kernel (``conv/ws3d.py``) against convgemm's tuned ``conv3d`` and
cuDNN on r3d-18's 3x3x3 layers (bf16, channels_last_3d, batch 8, with a bias).

    PYTHONPATH=src python3 tools/ws_probe.py

Times are medians of GPU times with the L2 flushed before each run (the tuner's timer); the error
is against cuDNN's output. cuDNN chooses its algorithm by timing (``cudnn.benchmark``), as in
``convgemm bench`` (session 19's call F ran without it: its cuDNN column is slower than the
benchmark's).
"""

from __future__ import annotations

import sys

import torch


def main() -> int:
    from convgemm._runtime import l2_flush

    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    flush = l2_flush(dev)
    # (name, N, C, D, H, W, K, [(tile, block_n, stages, warps, per_sm), ...])
    layers = [
        (
            "l1 64@16x56",
            8,
            64,
            16,
            56,
            56,
            64,
            [((2, 8, 8), 64, 4, 8, 1), ((8, 4, 4), 64, 4, 8, 1), ((1, 4, 16), 64, 4, 4, 2)],
        ),
        (
            "l2 128@8x28",
            8,
            128,
            8,
            28,
            28,
            128,
            [((8, 4, 4), 128, 4, 8, 1), ((2, 4, 16), 128, 4, 8, 1), ((4, 4, 4), 128, 3, 4, 2)],
        ),
        (
            "l3 256@4x14",
            8,
            256,
            4,
            14,
            14,
            256,
            [
                ((4, 2, 16), 256, 3, 8, 1),
                ((4, 2, 16), 128, 4, 8, 1),
                ((2, 2, 16), 128, 3, 4, 2),
                ((2, 2, 16), 256, 4, 4, 1),
            ],
        ),
        ("l4 512@2x7", 8, 512, 2, 7, 7, 512, [((1, 8, 8), 128, 3, 4, 2), ((2, 8, 8), 128, 4, 8, 1)]),
    ]
    print(f"{'layer':<12} {'form':<34} {'us':>8} {'TFLOP/s':>8} {'rel err':>9}", flush=True)
    for layer in layers:
        _layer(*layer, dev=dev, flush=flush)
    return 0


def _report(name: str, form: str, fn, y, ref, flop: int, flush) -> None:
    from convgemm._runtime import gpu_times

    fn()
    t = sorted(gpu_times(fn, 20.0, 10, 200, before=flush))
    us = t[len(t) // 2] * 1e3
    err = ((y.float() - ref.float()).norm() / ref.float().norm()).item()
    print(f"{name:<12} {form:<34} {us:8.1f} {flop / us / 1e6:8.0f} {err:9.2e}", flush=True)


def _layer(name, n, c, d, h, w, k, cfgs, dev, flush) -> None:
    import torch.nn.functional as F

    import convgemm
    from convgemm.conv.conv3d import _packed_weight
    from convgemm.conv.ws3d import ws_conv3d
    from convgemm.functional3d import conv3d_algorithm

    x = torch.randn(n, c, d, h, w, device=dev).to(torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)
    wt = (torch.randn(k, c, 3, 3, 3, device=dev) / (27 * c) ** 0.5).to(torch.bfloat16)
    wt = wt.contiguous(memory_format=torch.channels_last_3d)
    b = torch.randn(k, device=dev).to(torch.bfloat16)
    flop = 2 * n * k * d * h * w * c * 27
    ref = F.conv3d(x, wt, b, padding=1)
    _report(name, "cudnn", lambda: F.conv3d(x, wt, b, padding=1), ref, ref, flop, flush)
    yc = convgemm.conv3d(x, wt, b, padding=1)  # tunes on the first call
    algo = conv3d_algorithm(x, wt, b, padding=1)
    _report(name, f"convgemm {algo[0]} {algo[1].describe()}"[:34], lambda: convgemm.conv3d(x, wt, b, padding=1),
            yc, ref, flop, flush)  # fmt: skip
    wp = _packed_weight(wt, c)
    for tile, bn, stages, warps, per_sm in cfgs:
        y = torch.empty_like(ref)
        form = f"ws t{'x'.join(map(str, tile))} n{bn} s{stages} w{warps} x{per_sm}"

        def run(tile=tile, bn=bn, stages=stages, warps=warps, per_sm=per_sm, y=y):
            ws_conv3d(x, wp, b, y, (3, 3, 3), (1, 1, 1), (1, 1, 1), tile, bn, stages=stages, warps=warps,
                      per_sm=per_sm)  # fmt: skip

        try:
            _report(name, form, run, y, ref, flop, flush)
        except Exception as e:  # noqa: BLE001 - report and go on to the next config
            print(f"{name:<12} {form:<34} failed: {type(e).__name__}: {str(e)[:300]}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
