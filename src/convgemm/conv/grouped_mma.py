"""Grouped convolution as one small matrix product per group, many groups a program (batched dot).

ResNeXt's 3x3 layers have 4-32 channels per group. ``grouped_tma`` merges GT groups into one
tensor-core tile with block-diagonal weights, so GT - 1 of every GT products are zeros (at 16
channels a group it merges 4: 7.4 GFLOP of tensor work for a 1.85 GFLOP layer), and a NaN input
of one group leaks into its neighbours' outputs unless a second launch recomputes those tiles.
Here each group keeps its own product: a program holds GB groups' accumulators ``[GB, BLOCK_M,
KGP]`` (BLOCK_M output pixels, KGP = K/g rounded up to 16) and one 3-D ``tl.dot`` a step
multiplies ``[GB, BLOCK_M, KC]`` input values by ``[GB, KC, KGP]`` weights. Only the output
columns are padded (the padded ones are dropped at the store), never the reduction across
groups, so nothing mixes between groups and no fix-up pass is needed.

The reduction runs over (filter tap, channel of the group) in chunks of KC = max(16, C/g rounded
up to a power of two) values: one tap a chunk from 16 channels a group, and 16 / (C/g) taps a
chunk below that (ResNeXt's 4- and 8-channel groups take 4 and 2 taps a step). Input values are
gathered with pointer loads (padding, stride and dilation are masks and offsets), so any stride
works without a phase view; a group's channels are consecutive in NHWC memory.

Weights are packed once per weight tensor as ``[chunks, groups, KC, KGP]`` (zeros for the padded
taps, channels and output columns). fp16 and bf16 accumulate in fp32; fp32 follows the problem's
``precision`` as the other tensor-core algorithms do.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..matmul.blocks import activation_epilogue


def geometry(cg: int, kg: int, taps: int) -> tuple[int, int, int, int]:
    """``(CGP, KGP, KC, CHUNKS)`` for C/g = ``cg``, K/g = ``kg`` and R*S = ``taps``: C/g and K/g
    rounded up to powers of two (K/g at least 16, ``tl.dot``'s smallest N), the reduction chunk
    (at least 16, ``tl.dot``'s smallest K) and the chunks a filter takes."""
    cgp = triton.next_power_of_2(cg)
    kgp = max(16, triton.next_power_of_2(kg))
    kc = max(16, cgp)
    tpc = kc // cgp
    return cgp, kgp, kc, -(-taps // tpc)


def packed_weight(w: torch.Tensor, groups: int) -> torch.Tensor:
    """``w [K, C/g, R, S]`` -> ``[chunks, groups, KC, KGP]`` contiguous in ``w``'s dtype:
    ``[ch, g, t * CGP + c, k]`` is group g's weight of output channel k for channel c at filter
    tap ``ch * (KC // CGP) + t`` (row-major over R, S); zero where the tap, channel or output
    column is padding."""
    k, cg, r, s = w.shape
    kg = k // groups
    cgp, kgp, kc, chunks = geometry(cg, kg, r * s)
    tpc = kc // cgp
    wg = w.reshape(groups, kg, cg, r * s).permute(3, 0, 2, 1)  # [RS, G, C/g, K/g]
    out = w.new_zeros((chunks * tpc, groups, cgp, kgp))
    out[: r * s, :, :cg, :kg] = wg
    return (
        out.reshape(chunks, tpc, groups, cgp, kgp).permute(0, 2, 1, 3, 4).reshape(chunks, groups, kc, kgp).contiguous()
    )


@triton.jit
def grouped_mma_kernel(
    x_ptr,  # [N, H, W, C] indexed by strides (channel stride 1 in the fast case)
    w_ptr,  # packed_weight: [CHUNKS, G, KC, KGP] contiguous
    b_ptr,  # [K] (or y when HAS_BIAS is off)
    y_ptr,  # [N, P, Q, K] indexed by strides
    M,  # N * P * Q
    H,
    W,
    P,
    Q,
    s_xn,
    s_xh,
    s_xw,
    s_xc,
    s_yn,
    s_yp,
    s_yq,
    s_yk,
    G: tl.constexpr,
    CG: tl.constexpr,
    KG: tl.constexpr,
    R: tl.constexpr,
    S: tl.constexpr,
    SH: tl.constexpr,
    SW: tl.constexpr,
    PH: tl.constexpr,
    PW: tl.constexpr,
    DH: tl.constexpr,
    DW: tl.constexpr,
    CGP: tl.constexpr,
    KGP: tl.constexpr,
    KC: tl.constexpr,
    CHUNKS: tl.constexpr,
    BLOCK_M: tl.constexpr,  # output pixels a program (flat over N, P, Q)
    GB: tl.constexpr,  # groups a program
    HAS_BIAS: tl.constexpr,
    ACT: tl.constexpr,
    PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,  # dot in fp32: the interpreter multiplies raw bf16 bits otherwise
    INT64: tl.constexpr,  # x or y spans 2**31 elements or more
):
    TPC: tl.constexpr = KC // CGP  # filter taps a chunk
    pid_m = tl.program_id(0)
    pid_g = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_ok = offs_m < M
    q = offs_m % Q
    t = offs_m // Q
    p = t % P
    n = t // P
    if INT64:
        n = n.to(tl.int64)
    ih0 = p * SH - PH
    iw0 = q * SW - PW
    pix = n * s_xn + ih0 * s_xh + iw0 * s_xw  # [BLOCK_M]: the tap (0, 0) pixel of each output
    g = pid_g * GB + tl.arange(0, GB)
    g_ok = g < G
    kk = tl.arange(0, KC)
    c = kk % CGP
    gmask = g_ok[:, None, None]
    # the group's first channel; a group's C/g channels are consecutive (channel stride s_xc)
    gch = (g * CG * s_xc)[:, None, None]
    if INT64:
        gch = gch.to(tl.int64)
    kn = tl.arange(0, KGP)
    w_off = (g[:, None, None] * KC + kk[None, :, None]) * KGP + kn[None, None, :]  # [GB, KC, KGP]
    acc = tl.zeros((GB, BLOCK_M, KGP), dtype=tl.float32)
    for ch in range(CHUNKS):
        if TPC == 1:
            # one tap for the whole chunk: its offset and bounds are per pixel only
            r = ch // S
            s = ch % S
            ih = ih0 + r * DH
            iw = iw0 + s * DW
            ok = m_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            off = pix + (r * DH * s_xh + s * DW * s_xw)
            amask = ok[None, :, None] & gmask
            if CG < CGP:
                amask = amask & (c < CG)[None, None, :]
            a = tl.load(x_ptr + (off[None, :, None] + gch + (c * s_xc)[None, None, :]), mask=amask, other=0.0)
        else:
            # TPC taps side by side in the chunk: tap and channel vary along the reduction
            tap = ch * TPC + kk // CGP
            r = tap // S
            s = tap % S
            ih = ih0[:, None] + (r * DH)[None, :]
            iw = iw0[:, None] + (s * DW)[None, :]
            ok = m_ok[:, None] & (tap < R * S)[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            if CG < CGP:
                ok = ok & (c < CG)[None, :]
            off = pix[:, None] + (r * DH * s_xh + s * DW * s_xw + c * s_xc)[None, :]
            a = tl.load(x_ptr + (off[None, :, :] + gch), mask=ok[None, :, :] & gmask, other=0.0)
        wv = tl.load(w_ptr + ch * (G * KC * KGP) + w_off, mask=gmask, other=0.0)
        if UPCAST:
            acc = tl.dot(a.to(tl.float32), wv.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(a, wv, acc, input_precision=PRECISION)
    col = g[:, None, None] * KG + kn[None, None, :]  # [GB, 1, KGP] output channel
    cmask = gmask & (kn < KG)[None, None, :]
    if HAS_BIAS:
        acc += tl.load(b_ptr + col, mask=cmask, other=0.0).to(tl.float32)
    acc = activation_epilogue(acc, ACT)
    y_pix = n * s_yn + p * s_yp + q * s_yq
    y_off = y_pix[None, :, None] + col * s_yk
    tl.store(y_ptr + y_off, acc.to(y_ptr.dtype.element_ty), mask=cmask & m_ok[None, :, None])
