"""Depthwise convolution (one input channel per group) as a direct, memory-bound kernel.

There is no reduction over channels, so a GEMM would multiply 1-wide K tiles: tensor cores do
nothing useful here. Each program computes a ``BLOCK_Q`` x ``BLOCK_K`` block (output columns x output channels) of
``ROWS`` consecutive output rows, walking the R x S taps unrolled at compile time; the loads are
vectors along NHWC's contiguous channel axis, and neighbouring taps and rows re-read the same
input lines from L1/L2, so device memory sees each input row about once. Channel multipliers
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
    ROWS: tl.constexpr,  # output rows per program (a power of two)
    HAS_BIAS: tl.constexpr,
    ACC_F64: tl.constexpr,
    INT64: tl.constexpr,  # an image of x or y holds 2**31 elements or more
):
    # One program computes ROWS consecutive output rows of one image as a 3-D [ROWS, BLOCK_Q,
    # BLOCK_K] tile: a one-row program (a few hundred outputs) is too little work to hide its
    # start-up and index arithmetic, each tap's weights are then read once for all the rows, and
    # the rows' loads of one tap are independent, so they are in flight together.
    # A 1-D grid with the channel blocks fastest: the programs that read the same pixels' other
    # channels run side by side, so the DRAM sectors and pages a pixel's channels share are
    # fetched once (with channel blocks slowest they were fetched again a whole pass later).
    pid = tl.program_id(0)
    k_blocks = tl.cdiv(K, BLOCK_K)
    q_blocks = tl.cdiv(Q, BLOCK_Q)
    row_blocks = tl.cdiv(P, ROWS)
    kb = pid % k_blocks
    rest = pid // k_blocks
    qb = rest % q_blocks
    rest = rest // q_blocks
    n = rest // row_blocks
    p = (rest - n * row_blocks) * ROWS + tl.arange(0, ROWS)
    q = qb * BLOCK_Q + tl.arange(0, BLOCK_Q)
    k = kb * BLOCK_K + tl.arange(0, BLOCK_K)
    k_ok = (k < K)[None, None, :]
    acc_t = tl.float64 if ACC_F64 else tl.float32
    acc = tl.zeros((ROWS, BLOCK_Q, BLOCK_K), dtype=acc_t)
    # Offsets within one image in 32 bits (the host sends images of 2**31 elements or more to
    # another route) from a 64-bit image base: per-element 64-bit addresses for every unrolled
    # tap would double the registers the taps need.
    if INT64:
        x_img = x_ptr + n.to(tl.int64) * s_xn + ((k // MULT).to(tl.int64) * s_xc)[None, None, :]
    else:
        x_img = x_ptr + n.to(tl.int64) * s_xn + ((k // MULT) * s_xc)[None, None, :]
    # The weights are read as a tile shaped like the input tile (the same address along rows and
    # columns), not as a [BLOCK_K] vector: a tile shaped and strided like the input tile gets the
    # input's register layout, where a vector would be moved into it through shared memory, with
    # a barrier, at every tap.
    zero = tl.zeros((ROWS, BLOCK_Q, 1), dtype=tl.int32)
    w_tile = w_ptr + k[None, None, :] + zero
    w_ok = k_ok & (zero == 0)
    ih0 = p * stride_h - pad_h
    iw0 = q * stride_w - pad_w
    p_ok = p < P
    q_ok = q < Q
    for r in tl.static_range(R):
        ih = ih0 + r * dil_h
        h_ok = ((ih >= 0) & (ih < H) & p_ok)[:, None, None]
        if INT64:
            row_off = (ih.to(tl.int64) * s_xh)[:, None, None]
        else:
            row_off = (ih * s_xh)[:, None, None]
        for s in tl.static_range(S):
            iw = iw0 + s * dil_w
            ok = h_ok & ((iw >= 0) & (iw < W) & q_ok)[None, :, None] & k_ok
            xv = tl.load(x_img + row_off + (iw * s_xw)[None, :, None], mask=ok, other=0.0)
            wv = tl.load(w_tile + (r * S + s) * s_wt, mask=w_ok, other=0.0)
            acc += xv.to(acc_t) * wv.to(acc_t)
    if HAS_BIAS:
        acc += tl.load(b_ptr + k[None, None, :] + zero, mask=w_ok, other=0.0).to(acc_t)
    y_img = y_ptr + n.to(tl.int64) * s_yn
    if INT64:  # an NCHW output's channel stride is P*Q, and K*P*Q may pass 2**31
        y_off = (p.to(tl.int64) * s_yp)[:, None, None] + (q.to(tl.int64) * s_yq)[None, :, None]
        y_off += (k.to(tl.int64) * s_yk)[None, None, :]
    else:
        y_off = (p * s_yp)[:, None, None] + (q * s_yq)[None, :, None] + (k * s_yk)[None, None, :]
    out_ok = p_ok[:, None, None] & q_ok[None, :, None] & k_ok
    tl.store(y_img + y_off, acc.to(y_ptr.dtype.element_ty), mask=out_ok)
