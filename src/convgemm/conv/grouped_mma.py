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
from .loaders import _spatial_tile


def geometry(cg: int, kg: int, taps: int) -> tuple[int, int, int, int]:
    """``(CGP, KGP, KC, CHUNKS)`` for C/g = ``cg``, K/g = ``kg`` and R*S = ``taps``: C/g and K/g
    rounded up to powers of two (K/g at least 16, ``tl.dot``'s smallest N), the reduction chunk
    (at least 16, ``tl.dot``'s smallest K) and the chunks a filter takes."""
    cgp = triton.next_power_of_2(cg)
    kgp = max(16, triton.next_power_of_2(kg))
    kc = max(16, cgp)
    tpc = kc // cgp
    return cgp, kgp, kc, -(-taps // tpc)


def packed_weight(w: torch.Tensor, groups: int, tap_minor: bool = False) -> torch.Tensor:
    """``w [K, C/g, R, S]`` -> ``[chunks, groups, KC, KGP]`` contiguous in ``w``'s dtype:
    ``[ch, g, t * CGP + c, k]`` is group g's weight of output channel k for channel c at filter
    tap ``ch * (KC // CGP) + t`` (row-major over R, S); zero where the tap, channel or output
    column is padding. ``tap_minor``: the chunk's rows ordered ``c * (KC // CGP) + t`` instead
    (the TMA form's order, where a chunk's taps arrive as separate boxes joined along a new
    last axis; the same when a chunk holds one tap)."""
    k, cg, r, s = w.shape
    kg = k // groups
    cgp, kgp, kc, chunks = geometry(cg, kg, r * s)
    tpc = kc // cgp
    wg = w.reshape(groups, kg, cg, r * s).permute(3, 0, 2, 1)  # [RS, G, C/g, K/g]
    out = w.new_zeros((chunks * tpc, groups, cgp, kgp))
    out[: r * s, :, :cg, :kg] = wg
    order = (0, 2, 3, 1, 4) if tap_minor else (0, 2, 1, 3, 4)
    return out.reshape(chunks, tpc, groups, cgp, kgp).permute(order).reshape(chunks, groups, kc, kgp).contiguous()


@triton.jit
def _chunk_product(acc, a, w_ptr, ch, w_off, gmask, G: tl.constexpr, KC: tl.constexpr, KGP: tl.constexpr,
                   PRECISION: tl.constexpr, UPCAST: tl.constexpr):  # fmt: skip
    """``acc [GB, M, KGP] += a [GB, M, KC] @ chunk ch of the packed weight`` (``w_off``: the
    program's groups' ``[GB, KC, KGP]`` offsets within a chunk)."""
    wv = tl.load(w_ptr + ch * (G * KC * KGP) + w_off, mask=gmask, other=0.0)
    if UPCAST:  # the interpreter multiplies raw bf16 bits otherwise
        return tl.dot(a.to(tl.float32), wv.to(tl.float32), acc, input_precision="ieee")
    return tl.dot(a, wv, acc, input_precision=PRECISION)


@triton.jit
def _store_groups(acc, b_ptr, y_ptr, g, gmask, kn, y_pix, m_ok, s_yk, KG: tl.constexpr, HAS_BIAS: tl.constexpr,
                  ACT: tl.constexpr):  # fmt: skip
    """Bias, activation and the store of ``acc [GB, M, KGP]``: output channel ``g * KG + k`` of
    pixel offset ``y_pix [M]``; padded columns, groups past G and masked pixels are dropped."""
    col = g[:, None, None] * KG + kn[None, None, :]  # [GB, 1, KGP] output channel
    cmask = gmask & (kn < KG)[None, None, :]
    if HAS_BIAS:
        acc += tl.load(b_ptr + col, mask=cmask, other=0.0).to(tl.float32)
    acc = activation_epilogue(acc, ACT)
    y_off = y_pix[None, :, None] + col * s_yk
    tl.store(y_ptr + y_off, acc.to(y_ptr.dtype.element_ty), mask=cmask & m_ok[None, :, None])


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
        acc = _chunk_product(acc, a, w_ptr, ch, w_off, gmask, G, KC, KGP, PRECISION, UPCAST)
    _store_groups(acc, b_ptr, y_ptr, g, gmask, kn, n * s_yn + p * s_yp + q * s_yq, m_ok, s_yk, KG, HAS_BIAS, ACT)


# ================================================================ the input through TMA boxes
# Session 54's Nsight Compute profile of 512 @14 (H100, 16 channels a group, 128 pixels x 4
# groups): the gathered pointer loads kept the kernel on its memory pipes, 74% of L2 throughput
# at 3 stages (16-byte `cp.async`, two requests a 32-byte sector) and 84% of L1 at 1 stage,
# 36-37 us where grouped_tma's GEMM, reading the same 9 boxes a tile through the copy engine,
# took 26.7 us at 44% of L2. Here each tap of a tile of TN x TH x TW output pixels is one TMA box
# of GB groups' channels (padding and image edges zero-filled by the copy engine), reshaped to
# ``[GB, pixels, C/g]`` for the same batched product.
@triton.jit
def _tap_operand(x_desc, n, oh0, ow0, c0, tap, ROWS, C, RS: tl.constexpr, S: tl.constexpr, PH: tl.constexpr,
                 PW: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
                 PHASED: tl.constexpr, GB: tl.constexpr, CG: tl.constexpr, BLOCK_M: tl.constexpr):  # fmt: skip
    """Filter tap ``tap``'s input values for the tile as ``[GB, BLOCK_M, CG]``; zeros for a tap
    past the filter (a chunk's padding: its box starts at row ROWS, wholly out of bounds)."""
    r = tap // S
    s = tap - r * S
    if PHASED:
        # tap offset o = r*dil - pad = a*SH + phase with 0 <= phase < SH (loaders.tma_im2col_phase_load)
        oh = r * DH - PH
        ah = (oh + SH * PH) // SH - PH
        ow = s * DW - PW
        aw = (ow + SW * PW) // SW - PW
        row = tl.where(tap < RS, oh0 + ah, ROWS)
        box = x_desc.load([n, row, oh - ah * SH, ow0 + aw, (ow - aw * SW) * C + c0])
    else:
        row = tl.where(tap < RS, oh0 + r * DH - PH, ROWS)
        box = x_desc.load([n, row, ow0 + s * DW - PW, c0])
    return box.reshape(BLOCK_M, GB, CG).permute(1, 0, 2)


@triton.jit
def grouped_mma_tma_kernel(
    x_desc,  # stride 1: [N, H, W, C], box [TN, TH, TW, GB*CG]; strided: the phase view
    # [N, H/sh, sh, W/sw, sw*C] (fprop.phase_descriptor), box [TN, TH, 1, TW, GB*CG]
    w_ptr,  # packed_weight: [CHUNKS, G, KC, KGP] contiguous
    b_ptr,  # [K] (or y when HAS_BIAS is off)
    y_ptr,  # [N, P, Q, K] indexed by strides
    N,
    P,
    Q,
    ROWS,  # the view's rows: a box from there on is all padding
    C,
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
    KGP: tl.constexpr,
    KC: tl.constexpr,
    CHUNKS: tl.constexpr,
    TN: tl.constexpr,
    TH: tl.constexpr,
    TW: tl.constexpr,
    GB: tl.constexpr,
    PHASED: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    ACT: tl.constexpr,
    PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
    INT64: tl.constexpr,
):
    BLOCK_M: tl.constexpr = TN * TH * TW
    TPC: tl.constexpr = KC // CG  # filter taps a chunk (C/g is a power of two here)
    RS: tl.constexpr = R * S
    n, oh0, ow0 = _spatial_tile(tl.program_id(0), P, Q, TN, TH, TW)
    g = tl.program_id(1) * GB + tl.arange(0, GB)
    c0 = tl.program_id(1) * GB * CG
    gmask = (g < G)[:, None, None]
    kk = tl.arange(0, KC)
    kn = tl.arange(0, KGP)
    w_off = (g[:, None, None] * KC + kk[None, :, None]) * KGP + kn[None, None, :]  # [GB, KC, KGP]
    acc = tl.zeros((GB, BLOCK_M, KGP), dtype=tl.float32)
    for ch in range(CHUNKS):
        t0 = ch * TPC
        a = _tap_operand(x_desc, n, oh0, ow0, c0, t0, ROWS, C, RS, S, PH, PW, DH, DW, SH, SW, PHASED, GB, CG, BLOCK_M)
        # the chunk's taps joined along a new last axis, then merged with the channels: row
        # c * TPC + t of the chunk (packed_weight's tap_minor order), a reshape that moves no data
        if TPC == 2:
            a1 = _tap_operand(x_desc, n, oh0, ow0, c0, t0 + 1, ROWS, C, RS, S, PH, PW, DH, DW, SH, SW, PHASED, GB,
                              CG, BLOCK_M)  # fmt: skip
            a = tl.join(a, a1).reshape(GB, BLOCK_M, KC)
        elif TPC == 4:
            a1 = _tap_operand(x_desc, n, oh0, ow0, c0, t0 + 1, ROWS, C, RS, S, PH, PW, DH, DW, SH, SW, PHASED, GB,
                              CG, BLOCK_M)  # fmt: skip
            a2 = _tap_operand(x_desc, n, oh0, ow0, c0, t0 + 2, ROWS, C, RS, S, PH, PW, DH, DW, SH, SW, PHASED, GB,
                              CG, BLOCK_M)  # fmt: skip
            a3 = _tap_operand(x_desc, n, oh0, ow0, c0, t0 + 3, ROWS, C, RS, S, PH, PW, DH, DW, SH, SW, PHASED, GB,
                              CG, BLOCK_M)  # fmt: skip
            # [GB, M, CG, j, k] holds tap 2j + k
            a = tl.join(tl.join(a, a2), tl.join(a1, a3)).reshape(GB, BLOCK_M, KC)
        acc = _chunk_product(acc, a, w_ptr, ch, w_off, gmask, G, KC, KGP, PRECISION, UPCAST)
    m = tl.arange(0, BLOCK_M)
    nn = n + m // (TH * TW)
    p = oh0 + (m // TW) % TH
    q = ow0 + m % TW
    m_ok = (nn < N) & (p < P) & (q < Q)
    if INT64:
        nn = nn.to(tl.int64)
    _store_groups(acc, b_ptr, y_ptr, g, gmask, kn, nn * s_yn + p * s_yp + q * s_yq, m_ok, s_yk, KG, HAS_BIAS, ACT)
