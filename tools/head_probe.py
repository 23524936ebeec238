#!/usr/bin/env python3
"""Variants of the tiny-head kernel's memory access, timed on the segmentation head 16->1 (GPU, bf16,
channels_last, batch 8, 256 x 256) beside ``head_1x1`` and cuDNN (session 30: ``head_1x1`` 10.0 us,
a copy of the same bytes 8.4 us, 2x cuDNN needs 9.7 us).

The variants, each over pixel tiles of BLOCK_P and 4 or 8 warps: the input loads marked
``evict_first`` (streamed: each byte is read once, so it need not displace other lines), and a
grid-stride form (a fixed grid of programs, each walking tiles, so the next tile's loads are
issued while this one's sums are stored). Flat NHWC input and output only (what the suite's heads
are); a variant that wins goes into ``conv/head.py``.

    PYTHONPATH=src python3 tools/head_probe.py
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def head_variant_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, C: tl.constexpr, K: tl.constexpr, BLOCK_P: tl.constexpr,
                        EVICT: tl.constexpr, PROGRAMS: tl.constexpr):  # fmt: skip
    c = tl.arange(0, C)
    tiles = tl.cdiv(M, BLOCK_P)
    step = PROGRAMS if PROGRAMS > 0 else tiles
    for t in range(tl.program_id(0), tiles, step):
        m = t * BLOCK_P + tl.arange(0, BLOCK_P)
        m_ok = m < M
        if EVICT:
            xt = tl.load(x_ptr + m[:, None] * C + c[None, :], mask=m_ok[:, None], other=0.0,
                         eviction_policy="evict_first")  # fmt: skip
        else:
            xt = tl.load(x_ptr + m[:, None] * C + c[None, :], mask=m_ok[:, None], other=0.0)
        xt = xt.to(tl.float32)
        for k in tl.static_range(K):
            wk = tl.load(w_ptr + k * C + c).to(tl.float32)
            col = tl.sum(xt * wk[None, :], axis=1) + tl.load(b_ptr + k).to(tl.float32)
            tl.store(y_ptr + m * K + k, col.to(y_ptr.dtype.element_ty), mask=m_ok)


def main() -> int:
    import torch.nn.functional as F

    import convgemm
    from convgemm._runtime import sm_count
    from convgemm.bench.runner import _gpu_bench

    for n, c, size, k in ((8, 16, 256, 1), (1, 16, 384, 2)):
        x = torch.randn(n, c, size, size, device="cuda", dtype=torch.bfloat16)
        x = x.contiguous(memory_format=torch.channels_last)
        wt = torch.randn(k, c, 1, 1, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, device="cuda", dtype=torch.bfloat16)
        ref = F.conv2d(x, wt, b)
        m = n * size * size
        y = torch.empty_like(ref)
        cudnn_us = _gpu_bench(lambda x=x, wt=wt, b=b: F.conv2d(x, wt, b))
        convgemm.conv2d(x, wt, b)
        ours_us = _gpu_bench(lambda x=x, wt=wt, b=b: convgemm.conv2d(x, wt, b))
        print(f"head {c}->{k} @{size} N{n}: cuDNN {cudnn_us:.1f}  head_1x1 tuned {ours_us:.1f}", flush=True)
        rows = []
        for bp in (256, 512, 1024):
            for warps in (4, 8):
                for evict in (False, True):
                    for per_sm in (0, 4, 8):
                        programs = per_sm * sm_count()
                        grid = (programs or triton.cdiv(m, bp),)

                        def run(
                            bp=bp,
                            warps=warps,
                            evict=evict,
                            programs=programs,
                            grid=grid,
                            x=x,
                            wt=wt,
                            b=b,
                            y=y,
                            m=m,
                            c=c,
                            k=k,
                        ):
                            head_variant_kernel[grid](x, wt, b, y, m, C=c, K=k, BLOCK_P=bp, EVICT=evict,
                                                      PROGRAMS=programs, num_warps=warps)  # fmt: skip

                        y.fill_(float("nan"))
                        run()
                        if not torch.allclose(y.float(), ref.float(), rtol=2e-2, atol=2e-2):
                            print(f"  {bp} w{warps} evict={evict} programs={programs}: wrong")
                            continue
                        rows.append((_gpu_bench(run), f"{bp} w{warps} evict={int(evict)} per_sm={per_sm}"))
        for us, name in sorted(rows)[:6]:
            print(f"  {us:6.1f}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
