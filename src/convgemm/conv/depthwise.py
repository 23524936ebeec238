"""Depthwise convolution (one input channel per group) as a direct, memory-bound kernel.

There is no reduction over channels, so a GEMM would multiply 1-wide K tiles: tensor cores do
nothing useful here. Each program computes a ``BLOCK_Q`` x ``BLOCK_K`` block of one output row
(output columns x output channels) by walking the R x S taps, unrolled at compile time; the loads
are vectors along NHWC's contiguous channel axis, and neighbouring taps re-read the same input
lines from L1/L2, so device memory sees each input row about once. Channel multipliers
(K = m * C) map output channel k to input channel k // m.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def depthwise_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    H,
    W,
    P,
    Q,
    K,
    MULT,  # output channels per input channel
    s_xn,
    s_xh,
    s_xw,
    s_xc,
    s_wt,  # tap stride of the packed [R*S, K] weight (channels contiguous)
    s_yn,
    s_yk,
    s_yp,
    s_yq,
    stride_h,
    stride_w,
    pad_h,
    pad_w,
    dil_h,
    dil_w,
    R: tl.constexpr,  # constexpr so the tap loops unroll
    S: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    ACC_F64: tl.constexpr,
):
    row = tl.program_id(0)  # n * P + p
    n = row // P
    p = row - n * P
    q = tl.program_id(1) * BLOCK_Q + tl.arange(0, BLOCK_Q)
    k = tl.program_id(2) * BLOCK_K + tl.arange(0, BLOCK_K)
    k_ok = k < K
    c = k // MULT
    acc_t = tl.float64 if ACC_F64 else tl.float32
    acc = tl.zeros((BLOCK_Q, BLOCK_K), dtype=acc_t)
    x_row = x_ptr + n.to(tl.int64) * s_xn + (c * s_xc)[None, :]
    # The weights are read as a [BLOCK_Q, BLOCK_K] tile (the same address down each column), not
    # as a [BLOCK_K] vector: a tile shaped and strided like the input tile gets the input's
    # register layout, where a vector would be moved into it through shared memory, with a
    # barrier, at every tap.
    zero_q = tl.zeros((BLOCK_Q, 1), dtype=tl.int32)
    w_tile = w_ptr + k[None, :] + zero_q
    w_ok = k_ok[None, :] & (zero_q == 0)
    iw0 = q * stride_w - pad_w
    for r in tl.static_range(R):
        ih = p * stride_h - pad_h + r * dil_h
        h_ok = (ih >= 0) & (ih < H)
        for s in tl.static_range(S):
            iw = iw0 + s * dil_w
            ok = h_ok & (iw >= 0) & (iw < W) & (q < Q)
            xv = tl.load(
                x_row + ih.to(tl.int64) * s_xh + (iw * s_xw)[:, None], mask=ok[:, None] & k_ok[None, :], other=0.0
            )
            wv = tl.load(w_tile + (r * S + s) * s_wt, mask=w_ok, other=0.0)
            acc += xv.to(acc_t) * wv.to(acc_t)
    if HAS_BIAS:
        acc += tl.load(b_ptr + k[None, :] + zero_q, mask=w_ok, other=0.0).to(acc_t)
    # 64-bit: an NCHW output's channel stride is P*Q, and K*P*Q may pass 2**31
    y = y_ptr + n.to(tl.int64) * s_yn + p.to(tl.int64) * s_yp + (q.to(tl.int64) * s_yq)[:, None]
    y += (k.to(tl.int64) * s_yk)[None, :]
    tl.store(y, acc.to(y_ptr.dtype.element_ty), mask=(q < Q)[:, None] & k_ok[None, :])


@triton.jit
def depthwise_wgrad_kernel(
    x_ptr,
    dy_ptr,
    ws_ptr,  # [splits, R*S, K] partial sums in the accumulator's dtype
    H,
    W,
    P,
    Q,
    K,
    MULT,
    NPQ,
    per_split,  # output pixels per split (a multiple of BLOCK_P)
    s_xn,
    s_xh,
    s_xw,
    s_xc,
    s_yn,
    s_yk,
    s_yp,
    s_yq,
    stride_h,
    stride_w,
    pad_h,
    pad_w,
    dil_h,
    dil_w,
    S,
    BLOCK_P: tl.constexpr,
    BLOCK_K: tl.constexpr,
    ACC_F64: tl.constexpr,
):
    """Depthwise weight gradient, one filter tap per program: ``dw[k, r, s] = sum over output
    pixels of dy[n, k, p, q] * x[n, k // MULT, p*stride + r*dil - pad, ...]``.

    Grid: (taps, channel blocks, pixel splits), taps fastest, so the programs of one pixel range
    run together and share its dy and x lines in L2. Each program sums its range into a
    [BLOCK_P, BLOCK_K] tile, reduces it once, and writes one partial row; the host sums the
    splits in a fixed order (no atomics: the result is reproducible).
    """
    tap = tl.program_id(0)
    r = tap // S
    s = tap - r * S
    k = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    k_ok = k < K
    c = k // MULT
    split = tl.program_id(2)
    acc_t = tl.float64 if ACC_F64 else tl.float32
    acc = tl.zeros((BLOCK_P, BLOCK_K), dtype=acc_t)
    start = split * per_split
    for m0 in range(start, tl.minimum(start + per_split, NPQ), BLOCK_P):
        m = m0 + tl.arange(0, BLOCK_P)
        n = m // (P * Q)
        pq = m - n * (P * Q)
        p = pq // Q
        q = pq - p * Q
        ih = p * stride_h - pad_h + r * dil_h
        iw = q * stride_w - pad_w + s * dil_w
        ok = (m < NPQ) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        n64 = n.to(tl.int64)
        dy = tl.load(
            dy_ptr + (n64 * s_yn + p.to(tl.int64) * s_yp + q.to(tl.int64) * s_yq)[:, None] + (k * s_yk)[None, :],
            mask=(m < NPQ)[:, None] & k_ok[None, :],
            other=0.0,
        )
        xv = tl.load(
            x_ptr + (n64 * s_xn + ih.to(tl.int64) * s_xh + iw.to(tl.int64) * s_xw)[:, None] + (c * s_xc)[None, :],
            mask=ok[:, None] & k_ok[None, :],
            other=0.0,
        )
        acc += dy.to(acc_t) * xv.to(acc_t)
    part = tl.sum(acc, axis=0)
    out = ws_ptr + (split * tl.num_programs(0) + tap).to(tl.int64) * K + k
    tl.store(out, part, mask=k_ok)
