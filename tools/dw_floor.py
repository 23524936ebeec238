#!/usr/bin/env python3
"""Where the floor of MobileNetV2's depthwise 3x3 layers lies under the bench's timer (GPU, bf16,
channels_last, batch 64).

For each layer, in one process and with the bench's timer (L2 flushed before each run, the host
off the clock): a device copy of the same bytes (x read, a y-sized tensor written), cuDNN,
convgemm's tuned choice, and a plain direct kernel written here (each program a tile of TPxTQ
output pixels by BC channels, nine masked 16-byte-vector loads per pixel and channel block, the
taps' overlap left to L1) over a few tiles. Issue 4 asks 2x cuDNN; session 12's arithmetic says the
large layers cannot reach it at copy bandwidth. This measures the practical floor (the copy) and
whether a kernel with no register reuse but full-width loads gets nearer to it than
``depthwise_rows``' 4-byte ones.

    PYTHONPATH=src python3 tools/dw_floor.py [--layers 0,2] [--heads]

``--heads`` does the same for the tiny 1x1 heads of the suite (the segmentation head 16->1 over 8 x
256 x 256, CRAFT's 16->2 over 384 x 384; issue 4 asks 2x cuDNN): cuDNN, the tuned choice, and a
copy that moves as many bytes as the head reads and writes.

``--wgrad`` measures issue 5's "depthwise wgrad >= 3x cuDNN" against the same floors on the
grouped suite's 14 depthwise layers (MobileNetV2's 3x3, ConvNeXt's 7x7): a read of x and dy
(one fp32-accumulated ``sum`` over a tensor of their combined size: a wgrad must read both once and
writes almost nothing), a copy moving the same bytes, the fp32 FMA floor (taps x N*P*Q*C FMAs at
132 SMs x 128 lanes x 1.98 GHz), cuDNN's ``convolution_backward`` (weight only) and convgemm's
tuned ``conv2d_weight``; then 3x cuDNN against the hard floor (the bytes at the nominal 4.22 TB/s,
or the FMAs) and the measured one (the faster of the read and the copy, or the FMAs).
"""

from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl

LAYERS = [(32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1), (384, 14, 1), (960, 7, 1)]


@triton.jit
def dw_direct_kernel(x_ptr, w_ptr, y_ptr, H, W, P, Q, C, s_xn, s_xh, s_xw, s_yn, s_yh, s_yw,
                     R: tl.constexpr, S: tl.constexpr, STRIDE: tl.constexpr, PAD: tl.constexpr,
                     TP: tl.constexpr, TQ: tl.constexpr, BC: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    tiles_q = tl.cdiv(Q, TQ)
    tiles_p = tl.cdiv(P, TP)
    n = pid // (tiles_p * tiles_q)
    rem = pid - n * tiles_p * tiles_q
    tp = rem // tiles_q
    tq = rem - tp * tiles_q
    pix = tl.arange(0, TP * TQ)
    p = tp * TP + pix // TQ
    q = tq * TQ + pix % TQ
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    c_ok = c < C
    acc = tl.zeros((TP * TQ, BC), dtype=tl.float32)
    x_n = x_ptr + n.to(tl.int64) * s_xn
    for r in tl.static_range(R):
        ih = p * STRIDE - PAD + r
        for s in tl.static_range(S):
            iw = q * STRIDE - PAD + s
            ok = (p < P) & (q < Q) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            xv = tl.load(x_n + (ih * s_xh + iw * s_xw)[:, None] + c[None, :], mask=ok[:, None] & c_ok[None, :],
                         other=0.0)  # fmt: skip
            wv = tl.load(w_ptr + (r * S + s) * C + c, mask=c_ok, other=0.0)
            acc += xv.to(tl.float32) * wv.to(tl.float32)[None, :]
    y_ok = ((p < P) & (q < Q))[:, None] & c_ok[None, :]
    tl.store(y_ptr + n.to(tl.int64) * s_yn + (p * s_yh + q * s_yw)[:, None] + c[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=y_ok)  # fmt: skip


def direct(x, wp, y, stride, tp, tq, bc, warps):
    n, c, h, w = x.shape
    _, _, p, q = y.shape
    grid = (n * triton.cdiv(p, tp) * triton.cdiv(q, tq), triton.cdiv(c, bc))
    dw_direct_kernel[grid](x, wp, y, h, w, p, q, c, x.stride(0), x.stride(2), x.stride(3), y.stride(0), y.stride(2),
                           y.stride(3), R=3, S=3, STRIDE=stride, PAD=1, TP=tp, TQ=tq, BC=bc, num_warps=warps)  # fmt: skip


TILES = [(4, 16, 32, 4), (8, 8, 32, 4), (2, 32, 32, 4), (4, 16, 64, 4), (8, 16, 32, 8), (4, 8, 16, 4),
         (8, 8, 16, 4), (4, 32, 16, 8), (16, 8, 32, 8)]  # fmt: skip


def probe(c: int, size: int, st: int, batch: int) -> str:
    import torch.nn.functional as F

    import convgemm
    from convgemm.bench.runner import _gpu_bench

    x = torch.randn(batch, c, size, size, device="cuda", dtype=torch.bfloat16)
    x = x.contiguous(memory_format=torch.channels_last)
    wt = torch.randn(c, 1, 3, 3, device="cuda", dtype=torch.bfloat16)
    ref = F.conv2d(x, wt, stride=st, padding=1, groups=c)
    y = torch.empty_like(ref)
    ybig = torch.empty_like(x)
    copy_us = _gpu_bench(lambda: ybig.copy_(x)) if st == 1 else float("nan")
    cudnn_us = _gpu_bench(lambda: F.conv2d(x, wt, stride=st, padding=1, groups=c))
    out = convgemm.conv2d(x, wt, stride=st, padding=1, groups=c)
    err = ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
    ours_us = _gpu_bench(lambda: convgemm.conv2d(x, wt, stride=st, padding=1, groups=c))
    wp = wt.reshape(c, 9).t().contiguous()  # [taps, C]
    best = (float("inf"), None)
    for tp, tq, bc, warps in TILES:
        y.fill_(float("nan"))
        direct(x, wp, y, st, tp, tq, bc, warps)
        e = ((y.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
        if not e < 2e-2:
            print(f"  direct {tp}x{tq}x{bc} w{warps}: wrong (rel err {e:.2e})")
            continue
        us = _gpu_bench(lambda tp=tp, tq=tq, bc=bc, warps=warps: direct(x, wp, y, st, tp, tq, bc, warps))
        best = min(best, (us, f"{tp}x{tq}x{bc} w{warps}"), key=lambda t: t[0])
    name = f"{c} @{size} s{st}"
    return (
        f"{name:22s} {copy_us:7.1f} {cudnn_us:7.1f} {ours_us:9.1f} {best[0]:7.1f}  {best[1]}  (convgemm err {err:.1e})"
    )


HEADS = [(8, 16, 256, 1), (1, 16, 384, 2)]


def head_probe(n: int, c: int, size: int, k: int) -> str:
    import torch.nn.functional as F

    import convgemm
    from convgemm.bench.runner import _gpu_bench

    x = torch.randn(n, c, size, size, device="cuda", dtype=torch.bfloat16)
    x = x.contiguous(memory_format=torch.channels_last)
    wt = torch.randn(k, c, 1, 1, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, device="cuda", dtype=torch.bfloat16)
    half = (x.numel() + n * k * size * size) // 2  # a copy of this many values reads + writes the head's bytes
    src = torch.randn(half, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    copy_us = _gpu_bench(lambda: dst.copy_(src))
    cudnn_us = _gpu_bench(lambda: F.conv2d(x, wt, b))
    convgemm.conv2d(x, wt, b)
    ours_us = _gpu_bench(lambda: convgemm.conv2d(x, wt, b))
    pick = convgemm.explain(x, wt, b)
    name = f"head {c}->{k} @{size} N{n}"
    return (f"{name:22s} {copy_us:7.1f} {cudnn_us:7.1f} {ours_us:9.1f}  {pick['algorithm']}  "
            f"(2x cuDNN needs {cudnn_us / 2:.1f})")  # fmt: skip


DW_WGRAD = [(32, 112, 1, 3), (96, 112, 2, 3), (144, 56, 1, 3), (144, 56, 2, 3), (192, 28, 1, 3), (192, 28, 2, 3),
            (384, 14, 1, 3), (576, 14, 1, 3), (576, 14, 2, 3), (960, 7, 1, 3), (96, 56, 1, 7), (192, 28, 1, 7),
            (384, 14, 1, 7), (768, 7, 1, 7)]  # fmt: skip
FMA_PER_S = 132 * 128 * 1.98e9  # H200 fp32 FMA lanes x boost clock
NOMINAL_BPS = 4.22e12  # the bench's copy ceiling on the H200


def wgrad_probe(c: int, size: int, st: int, k: int, batch: int) -> str:
    import torch.nn.functional as F

    import convgemm
    from convgemm.bench.runner import _gpu_bench

    pad = k // 2
    x = torch.randn(batch, c, size, size, device="cuda", dtype=torch.bfloat16)
    x = x.contiguous(memory_format=torch.channels_last)
    wt = torch.randn(c, 1, k, k, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn_like(F.conv2d(x, wt, stride=st, padding=pad, groups=c))
    both = torch.randn(x.numel() + dy.numel(), device="cuda", dtype=torch.bfloat16)
    half = torch.empty(both.numel() // 2, device="cuda", dtype=torch.bfloat16)
    read_us = _gpu_bench(lambda: torch.sum(both, dtype=torch.float32))
    copy_us = _gpu_bench(lambda: half.copy_(both[: half.numel()]))
    fma_us = k * k * dy.numel() / FMA_PER_S * 1e6

    def cudnn():
        return torch.ops.aten.convolution_backward(dy, x, wt, None, [st, st], [pad, pad], [1, 1], False, [0, 0], c,
                                                   [False, True, False])[1]  # fmt: skip

    def ours():
        return convgemm.conv2d_weight(x, wt.shape, dy, stride=st, padding=pad, groups=c)

    ref = cudnn().float()
    got = ours().float()
    err = ((got - ref).abs().max() / ref.abs().max()).item()
    cudnn_us = _gpu_bench(cudnn)
    ours_us = _gpu_bench(ours)
    # the hard floor: the bytes at the nominal copy ceiling (no kernel moves them faster) or the
    # FMAs; the practical one: the fastest measured way to move them (H200, session 38: the copy,
    # 3.5 TB/s; torch.sum only 2.6) or the FMAs
    nominal_us = (x.numel() + dy.numel()) * x.element_size() / NOMINAL_BPS * 1e6
    hard = max(nominal_us, fma_us)
    floor = max(min(read_us, copy_us), fma_us)
    name = f"{k}x{k} {c} @{size} s{st}"
    if cudnn_us / 3 < hard:
        verdict = "unreachable (under the nominal floor)"
    elif cudnn_us / 3 < floor:
        verdict = f"under the measured floor (needs {100 * hard / (cudnn_us / 3):.0f}% of the nominal rate)"
    else:
        verdict = f"needs {100 * floor / (cudnn_us / 3):.0f}% of the measured floor's speed"
    return (f"{name:18s} {read_us:6.1f} {copy_us:6.1f} {nominal_us:6.1f} {fma_us:6.1f} {cudnn_us:7.1f} {ours_us:9.1f}"
            f" {cudnn_us / 3:7.1f}"
            f"  {cudnn_us / hard:5.2f}x {cudnn_us / floor:5.2f}x  {verdict}  (err {err:.1e})")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", default=",".join(str(i) for i in range(len(LAYERS))))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--heads", action="store_true", help="the tiny 1x1 heads instead of the depthwise layers")
    ap.add_argument("--wgrad", action="store_true", help="depthwise wgrad against its read and FMA floors")
    args = ap.parse_args()
    if args.wgrad:
        print(f"{'layer':18s} {'read':>6s} {'copy':>6s} {'nomin':>6s} {'fma':>6s} {'cuDNN':>7s} {'convgemm':>9s}"
              f" {'cuDNN/3':>7s}  cuDNN over the nominal and the measured floor (the best speedups possible)")  # fmt: skip
        for layer in DW_WGRAD:
            print(wgrad_probe(*layer, args.batch), flush=True)
        return 0
    if args.heads:
        print(f"{'layer':22s} {'copy':>7s} {'cuDNN':>7s} {'convgemm':>9s}  tuned choice")
        for head in HEADS:
            print(head_probe(*head), flush=True)
        return 0
    print(f"{'layer':22s} {'copy':>7s} {'cuDNN':>7s} {'convgemm':>9s} {'direct':>7s}  best direct tile (TPxTQxBC wW)")
    for i in map(int, args.layers.split(",")):
        print(probe(*LAYERS[i], args.batch), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
