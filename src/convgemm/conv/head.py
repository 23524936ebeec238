"""Tiny 1x1 heads (a few output channels over a few input channels) as a direct kernel.

A segmentation or detection head such as 16 -> 1 or 16 -> 2 at full resolution reads every input
pixel once and writes one or two values per pixel: 16.8 MB in and 1 MB out for 16 -> 1 over 8 x
256 x 256 pixels, 4 us at copy bandwidth, and 16 multiply-adds per pixel (about 0.1 us of the FMA
rate). As a GEMM it is M = N*P*Q by N = K by K = C with K and C far under a tensor-core tile:
``small_k`` pads N to 16 and spends each program's start-up, K-loop and epilogue machinery on one
short tile (session 11: 0.85x cuDNN on 16 -> 1). Here a program loads ``BLOCK_P`` whole pixels
(all C channels, contiguous in NHWC) once, forms the K dot products on the CUDA cores in fp32 (or
fp64), adds the bias, applies the activation and stores each output channel as soon as it is
summed: one pass over the input, no padding to a tile, and fp32 FMAs (no TF32 rounding) for fp32
inputs.

The pixel index is split into (n, p, q) only when the input or output is not a dense run of
pixels (``FLAT_X`` / ``FLAT_Y`` off): a stride, padding or a sliced view.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ..matmul.blocks import activation_epilogue

#: the most channels a pixel tile holds (the input row lives in registers: at 64 channels a
#: 64-value tile took 255 registers and spilled, sm90-compile)
MAX_C = 32
#: the most output channels (one reduction per output channel, unrolled); with MAX_C, at most 512
#: multiply-adds per pixel: beyond that the FMA pipes, not memory, would bound the kernel
MAX_K = 16


@triton.jit
def head_1x1_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    M,  # N * P * Q output pixels
    PQ,
    Q,
    H,
    W,
    C,
    K,
    s_xn,
    s_xh,
    s_xw,
    s_wk,
    s_wc,
    s_yn,
    s_yk,
    s_yp,
    s_yq,
    stride_h,
    stride_w,
    pad_h,
    pad_w,
    BLOCK_P: tl.constexpr,  # output pixels per program
    CP: tl.constexpr,  # C rounded up to a power of two
    KP: tl.constexpr,  # K rounded up to a power of two (the unrolled loop's bound)
    FLAT_X: tl.constexpr,  # output pixel m reads input pixel m, at m * s_xw
    FLAT_Y: tl.constexpr,  # output pixel m's K values start at m * K (dense NHWC output, s_yk = 1)
    HAS_BIAS: tl.constexpr,
    ACT: tl.constexpr,
    ACC_F64: tl.constexpr,
    INT64: tl.constexpr,  # x or y spans 2**31 elements or more
):
    acc_t = tl.float64 if ACC_F64 else tl.float32
    m = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    if INT64:
        m = m.to(tl.int64)
    m_ok = m < M
    c = tl.arange(0, CP)
    if FLAT_X and FLAT_Y:
        x_off = m * s_xw
        x_ok = m_ok
        y_off = m * K
    else:
        n = m // PQ
        pq = m - n * PQ
        p = pq // Q
        q = pq - p * Q
        if FLAT_X:
            x_off = m * s_xw
            x_ok = m_ok
        else:
            ih = p * stride_h - pad_h
            iw = q * stride_w - pad_w
            x_off = n * s_xn + ih * s_xh + iw * s_xw
            x_ok = m_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        if FLAT_Y:
            y_off = m * K
        else:
            y_off = n * s_yn + p * s_yp + q * s_yq
    x_mask = x_ok[:, None] & (c < C)[None, :]
    # the whole pixel in one load: C contiguous channels, vectorised by Triton. Each input byte is
    # read once, so it is marked to leave L2 first: on the H200 (session 30, tools/head_probe.py)
    # the 16->1 head over 8 x 256 x 256 took 9.8-10.0 us so marked against 10.2 tuned without
    xt = tl.load(x_ptr + x_off[:, None] + c[None, :], mask=x_mask, other=0.0, eviction_policy="evict_first").to(acc_t)
    # One output channel at a time, stored as soon as it is summed: a [BLOCK_P, K] accumulator
    # built by selects took 178 registers at K = 16 (sm90-compile), this 64. The K stores of a
    # pixel land in the same 32-byte sectors back to back, which L2 merges before DRAM.
    for k in tl.static_range(KP):
        if k < K:
            wk = tl.load(w_ptr + k * s_wk + c * s_wc, mask=c < C, other=0.0).to(acc_t)
            col = tl.sum(xt * wk[None, :], axis=1)
            if HAS_BIAS:
                col += tl.load(b_ptr + k).to(acc_t)
            col = activation_epilogue(col, ACT)
            tl.store(y_ptr + y_off + k * s_yk, col.to(y_ptr.dtype.element_ty), mask=m_ok)


@triton.jit
def head_1x1_planes_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    HW,  # pixels per channel plane (input and output: 1x1, stride 1, no padding)
    C,
    K,
    s_xn,
    s_xc,
    s_wk,
    s_wc,
    s_yn,
    s_yk,
    BLOCK_P: tl.constexpr,  # pixels of one image per program
    CP: tl.constexpr,  # C rounded up to a power of two (the unrolled channel loop's bound)
    KP: tl.constexpr,  # K rounded up to a power of two
    HAS_BIAS: tl.constexpr,
    ACT: tl.constexpr,
    ACC_F64: tl.constexpr,
    INT64: tl.constexpr,  # x or y spans 2**31 elements or more
):
    """``head_1x1_kernel`` for NCHW tensors read as they are: a program takes ``BLOCK_P`` pixels of
    one image (grid axis 1) and reads their C channel planes one contiguous run at a time, so
    every load is a coalesced row of pixels. The K outputs of a pixel accumulate as outer
    products (``[KP, BLOCK_P]``, all in each thread's registers: no cross-thread reduction) and
    are stored as K runs of the NCHW output."""
    acc_t = tl.float64 if ACC_F64 else tl.float32
    pix = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    n = tl.program_id(1)
    if INT64:
        n = n.to(tl.int64)
    ok = pix < HW
    kk = tl.arange(0, KP)
    k_ok = kk < K
    acc = tl.zeros([KP, BLOCK_P], dtype=acc_t)
    # the runs are loaded as [1, BLOCK_P] rows, not 1-D vectors: the load then takes the 2-D
    # accumulator's layout (sm90-compile: 1-D loads put a shared-memory layout conversion on every
    # channel's run)
    x_row = (x_ptr + n * s_xn + pix)[None, :]
    for ci in tl.static_range(CP):
        if ci < C:
            # each input byte is read once: let it leave L2 first (as head_1x1_kernel's loads)
            xc = tl.load(x_row + ci * s_xc, mask=ok[None, :], other=0.0, eviction_policy="evict_first").to(acc_t)
            wc = tl.load(w_ptr + kk * s_wk + ci * s_wc, mask=k_ok, other=0.0).to(acc_t)
            acc += wc[:, None] * xc
    if HAS_BIAS:
        acc += tl.load(b_ptr + kk, mask=k_ok, other=0.0).to(acc_t)[:, None]
    acc = activation_epilogue(acc, ACT)
    y_off = n * s_yn + kk[:, None] * s_yk + pix[None, :]
    tl.store(y_ptr + y_off, acc.to(y_ptr.dtype.element_ty), mask=k_ok[:, None] & ok[None, :])
