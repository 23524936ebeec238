#!/usr/bin/env python3
"""The experimental row-ring R x 1 convolution (``conv/row_ring.py``) on CRAFT's conv1_1 dgrad as
``narrow_fold`` reduces it (dy 64 channels -> 9 fp32 channels, 3 x 1, 768 x 768, bf16), against
``narrow_fold``'s whole run (R x 1 GEMM + the column fold) with each of its configs, the ring's
(``CONVGEMM_ROW_RING=1``) among them (GPU).

    PYTHONPATH=src python3 tools/row_ring_probe.py

Session 38: the GEMM step took 47.7 us of the layer's ~60 us of kernels (warm), reading dy three
times from L2; the ring reads each row once. Prints each form's time (median, L2 flushed, the
bench's timer; the ring's includes packing its weight, two small kernels a call) and its error
against float64.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F


def main() -> int:
    import convgemm
    from convgemm.bench.runner import _gpu_bench
    from convgemm.conv.fold import fold_weight
    from convgemm.conv.fprop import ALGORITHMS
    from convgemm.conv.row_ring import row_ring_conv

    g = torch.Generator(device="cuda").manual_seed(0)
    dy = torch.randn(1, 64, 768, 768, device="cuda", dtype=torch.bfloat16, generator=g)
    dy = dy.contiguous(memory_format=torch.channels_last)
    wf = (torch.randn(3, 64, 3, 3, device="cuda", generator=g) / 24).to(torch.bfloat16)  # the dgrad's forward weight
    w_rx1 = fold_weight(wf).contiguous()  # [9, 64, 3, 1]
    ref = F.conv2d(dy.double(), w_rx1.double(), padding=(1, 0)).permute(0, 2, 3, 1)
    u = torch.empty(1, 768, 768, 9, device="cuda")
    for tw in (128, 64):
        for rows in (16, 8, 32):
            for warps in (4,):
                u.fill_(float("nan"))
                row_ring_conv(dy, w_rx1, 1, u, tw=tw, rows=rows, num_warps=warps)
                err = ((u.double() - ref).abs().max() / ref.abs().max()).item()
                us = _gpu_bench(lambda tw=tw, rows=rows, warps=warps: row_ring_conv(dy, w_rx1, 1, u, tw=tw, rows=rows,
                                                                                    num_warps=warps))  # fmt: skip
                print(f"row_ring tw {tw:3d} rows {rows:2d} w{warps}: {us:7.1f} us  (rel err {err:.1e})", flush=True)
    os.environ["CONVGEMM_ROW_RING"] = "1"  # narrow_fold's configs then include the ring's (GEMM + fold)
    algo = ALGORITHMS["narrow_fold"]
    prob = convgemm.explain(dy, wf, None, padding=1, algorithm="narrow_fold")["problem"]
    y = torch.empty(1, 3, 768, 768, device="cuda", dtype=dy.dtype).contiguous(memory_format=torch.channels_last)
    for cfg in algo.configs(prob):
        us = _gpu_bench(lambda cfg=cfg: algo.run(prob, dy, wf, None, y, cfg))
        print(f"narrow_fold (GEMM + fold) {cfg.describe():28s} {us:7.1f} us", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
