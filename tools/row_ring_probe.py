#!/usr/bin/env python3
"""The row-ring R x 1 convolution (``conv/row_ring.py``) on CRAFT's conv1_1 dgrad as
``narrow_fold`` reduces it (dy 64 channels -> 9 fp32 channels, 3 x 1, 768 x 768, bf16), against
``narrow_fold``'s whole run (R x 1 GEMM + the column fold) with each of its configs, the ring's
(on by default since session 40) among them (GPU).

    PYTHONPATH=src python3 tools/row_ring_probe.py

Session 38: the GEMM step took 47.7 us of the layer's ~60 us of kernels (warm), reading dy three
times from L2; the ring reads each row once. Prints each form's time (median, L2 flushed, the
bench's timer; the ring's includes packing its weight, two small kernels a call) and its error
against float64: the ring's R x 1 step alone (``row_ring_conv``), the whole layer with the fold
in the ring's epilogue (``row_ring_fold``: no u, one kernel), and each ``narrow_fold`` config.
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
    from convgemm.conv.row_ring import row_ring_conv, row_ring_fold

    g = torch.Generator(device="cuda").manual_seed(0)
    dy = torch.randn(1, 64, 768, 768, device="cuda", dtype=torch.bfloat16, generator=g)
    dy = dy.contiguous(memory_format=torch.channels_last)
    wf = (torch.randn(3, 64, 3, 3, device="cuda", generator=g) / 24).to(torch.bfloat16)  # the dgrad's forward weight
    w_rx1 = fold_weight(wf).contiguous()  # [9, 64, 3, 1]
    ref = F.conv2d(dy.double(), w_rx1.double(), padding=(1, 0)).permute(0, 2, 3, 1)
    u = torch.empty(1, 768, 768, 9, device="cuda")
    for tw, rows, slots in ((128, 16, 4), (128, 32, 8), (64, 32, 8), (64, 16, 4), (128, 64, 8)):
        u.fill_(float("nan"))
        row_ring_conv(dy, w_rx1, 1, u, tw=tw, rows=rows, slots=slots)
        err = ((u.double() - ref).abs().max() / ref.abs().max()).item()
        us = _gpu_bench(lambda tw=tw, rows=rows, slots=slots: row_ring_conv(dy, w_rx1, 1, u, tw=tw, rows=rows,
                                                                            slots=slots))  # fmt: skip
        print(f"row_ring (GEMM only) tw {tw:3d} rows {rows:2d} slots {slots}: {us:7.1f} us  (rel err {err:.1e})",
              flush=True)  # fmt: skip
    dx_ref = F.conv2d(dy.double(), wf.double(), padding=1)
    dx = torch.empty(1, 3, 768, 768, device="cuda", dtype=dy.dtype)
    for tw, rows, slots in ((128, 16, 4), (128, 32, 8), (64, 32, 8), (64, 16, 4), (128, 64, 8)):
        dx.fill_(float("nan"))
        row_ring_fold(dy, wf, None, dx, 1, 1, tw=tw, rows=rows, slots=slots)
        err = ((dx.double() - dx_ref).abs().max() / dx_ref.abs().max()).item()
        us = _gpu_bench(lambda tw=tw, rows=rows, slots=slots: row_ring_fold(dy, wf, None, dx, 1, 1, tw=tw, rows=rows,
                                                                            slots=slots))  # fmt: skip
        print(f"row_ring_fold (whole layer) tw {tw:3d} rows {rows:2d} slots {slots}: {us:7.1f} us  (rel err {err:.1e})",
              flush=True)  # fmt: skip
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
