"""Grouped convolution with few channels per group (ResNeXt's 4) on the CUDA cores.

A ResNeXt 3x3 layer with 32 groups of 4 channels is 1.85 GFLOP, the same as every ResNeXt-50 3x3
layer, but as GEMMs each group is M = N*P*Q by N = 4 by K = 9*4 = 36: far under a tensor-core
tile. ``grouped_tma`` puts GT groups in one tile with block-diagonal weights, so 15 of every 16
products of its gt16 tile are zeros (session 37: 90 us on ResNeXt 128 @56, cuDNN 95). On the
H200's CUDA cores the useful FMAs alone take about 28 us (0.93 GFMA at 33 TFMA/s), near the time
the layer's 103 MB take at copy bandwidth (24 us).

Here a thread owns one group and a strip of COLS consecutive output columns of one output row:
KG x COLS fp32 accumulators. For each filter row it loads the strip's input row once, NJ =
(COLS - 1) * stride + (S - 1) * dilation + 1 columns of CG channels, into registers, and forms
every product of that row from them, each weight (a [GB] vector of consecutive groups from a
[R, S, C/g, K/g, groups] fp32 copy of w, loaded once per (r, s, c, k) and used COLS times).
A program is BLOCK_S strips x GB consecutive groups, one (strip, group) a thread; groups are the
fast axis, so a warp's loads of one column cover GB groups' CG-channel runs of the same pixels,
each group's run as one 32- or 64-bit word where strides and alignment allow (``word_channels``).
Strips run down the rows, so a program's strips share most of their input rows through L1.
A thread holds at most ``MAX_CKG`` weights a tap: wider groups (ResNeXt's 8 x 8) split their
output channels over PARTS neighbouring threads, each reading the group's inputs.

Measured (H100, session 42, ResNeXt 128 @56, bf16, batch 64): the first form (one channel a
load, all filter rows unrolled: 2296 instructions a thread) 112-152 us; with word loads and a
run-time row loop (952) 94.8 us, cuDNN 96.0, ``grouped_tma`` 99.7; Nsight Compute then showed
the L2 at 86% of its throughput with strips along the rows, the order since changed. Session 43
changed that order, added the 8 x 8 split and cut sm_90's instructions a filter row on 4 x 4
from 578 to 541 (no group mask where all groups exist, one-instruction bf16 unpacking); timed in
session 44 (H100): 128 @56 93.2 us (cuDNN 95.7, ``grouped_tma`` 100.3), no gain over session
42's form; the split 1.5-1.8x slower than ``grouped_tma`` on both 8 x 8 layers (not tuned since).

Any stride, padding, dilation and input / output strides (NHWC is the fast layout); fp16, bf16
and fp32 accumulate in fp32 (plain FMAs, no TF32 rounding), fp64 in fp64. Bias and the fused
activation are applied before the store.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ..matmul.blocks import activation_epilogue
from .depthwise import gl, gluon

#: the most input / output channels per group: the KG x COLS accumulators and the NJ x CG input
#: values of a filter row live in registers
MAX_CG = 8
MAX_KG = 8
#: the most C/g x K/g weights a (filter row, column) tap a thread: ptxas hoists a row's S*C/g*K/g
#: weight loads, and at 8 x 8 (192 a 3x3 row) a thread spilled (255 registers, 118 spill
#: loads/stores, sm90-compile); 4 x 4 takes 168 registers. Wider groups split their output
#: channels over PARTS threads (``split_parts``)
MAX_CKG = 16
#: the budget for those registers (fp32 values a thread); ``pick_cols`` keeps under it
REG_VALUES = 112


def split_parts(cg: int, kg: int) -> int:
    """Threads a group's K/g output channels are split over (PARTS) so that a thread holds at most
    ``MAX_CKG`` weights a tap: the fewest power of two dividing K/g (0: none does)."""
    parts = 1
    while parts <= kg:
        if kg % parts == 0 and cg * (kg // parts) <= MAX_CKG:
            return parts
        parts *= 2
    return 0


def row_values(cols: int, cg: int, kg: int, s: int, stride_w: int, dil_w: int) -> int:
    """fp32 values a thread holds for a filter row: the KG x COLS accumulators and the NJ x CG
    input values of its strip."""
    nj = (cols - 1) * stride_w + (s - 1) * dil_w + 1
    return kg * cols + nj * cg


def pick_cols(cg: int, kg: int, s: int, stride_w: int, dil_w: int, q: int) -> int:
    """Columns a thread (COLS, any count: the loops over them are unrolled): from the most under
    ``REG_VALUES`` (at most 8 and Q; 0: not even one fits) down to half that, the one whose
    strips cover Q with the fewest masked columns, the widest of those. Q = 28 takes 7 (four full
    strips where 8 would mask 4 of 32 columns), Q = 56 takes 8."""
    most = next((c for c in range(min(8, q), 0, -1) if row_values(c, cg, kg, s, stride_w, dil_w) <= REG_VALUES), 0)
    if most == 0:
        return 0
    return min(range(most, (most + 1) // 2 - 1, -1), key=lambda c: (-(-q // c) * c - q, -c))


@triton.jit
def _unpack(word, i: tl.constexpr, X_DT: tl.constexpr):
    """Value i (fp32) of a 32- or 64-bit word holding 16-bit (bf16 / fp16) or fp32 values."""
    if X_DT.primitive_bitwidth == 32:
        return (word >> (32 * i)).to(tl.int32).to(tl.float32, bitcast=True)
    if X_DT == tl.bfloat16:
        # bf16 is fp32's upper half: value i sits in the 32-bit half i // 2, low (shift it up) or
        # high (mask the low bits off): one instruction a value
        half = (word >> (32 * (i // 2))).to(tl.int32)
        if i % 2 == 0:
            return (half << 16).to(tl.float32, bitcast=True)
        return (half & -65536).to(tl.float32, bitcast=True)
    h = (word >> (16 * i)).to(tl.int32) & 0xFFFF
    return h.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def grouped_direct_kernel(
    x_ptr,  # [N, C, H, W], any strides
    wt_ptr,  # [R, S, C/g, K/g, G] contiguous, fp32 (fp64 for fp64)
    b_ptr,  # [K] (or y when HAS_BIAS is off)
    y_ptr,  # [N, K, P, Q], any strides
    H,
    W,
    P,
    Q,
    QS,  # strips per output row: cdiv(Q, COLS)
    STRIPS,  # N * P * QS
    s_xn,
    s_xc,
    s_xh,
    s_xw,
    s_yn,
    s_yk,
    s_yp,
    s_yq,
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
    COLS: tl.constexpr,  # output columns a thread
    GB: tl.constexpr,  # groups a program (power of two)
    BLOCK_S: tl.constexpr,  # strips a program (power of two)
    HAS_BIAS: tl.constexpr,
    ACT: tl.constexpr,
    ACC_F64: tl.constexpr,
    INT64: tl.constexpr,  # x or y spans 2**31 elements or more
    XV: tl.constexpr = 1,  # channels a load: 1, or 2 / 4 packed in a 32- or 64-bit word (x's strides then count words)
    PARTS: tl.constexpr = 1,  # threads a group: G and KG then count parts (G * PARTS, K/g / PARTS), see below
    LAYOUT: tl.constexpr = None,  # None: Triton's layouts; a Gluon [BLOCK_S, GB] layout from the Gluon entry
):
    """Grid: (cdiv(STRIPS, BLOCK_S), cdiv(G, GB)).

    With PARTS > 1 a group's output channels are split over PARTS neighbouring threads, each
    reading the group's inputs: "group" gg below is a part (gg // PARTS the real group), and the
    weight is packed as for G = groups * PARTS groups of KG channels; output channel gg * KG + k
    is then the same channel either way."""
    acc_t = tl.float64 if ACC_F64 else tl.float32
    NJ: tl.constexpr = (COLS - 1) * SW + (S - 1) * DW + 1
    X_DT: tl.constexpr = x_ptr.dtype.element_ty
    ESIZE: tl.constexpr = X_DT.primitive_bitwidth // 8
    if LAYOUT is None:
        st = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
        gg = tl.program_id(1) * GB + tl.arange(0, GB)
    else:
        st = tl.program_id(0) * BLOCK_S + gl.arange(0, BLOCK_S, layout=gl.SliceLayout(1, LAYOUT))
        gg = tl.program_id(1) * GB + gl.arange(0, GB, layout=gl.SliceLayout(0, LAYOUT))
    if INT64:
        st = st.to(tl.int64)
    st_ok = st < STRIPS
    g_ok = gg < G
    # every program's groups exist (G a multiple of GB: ResNeXt's 32 groups): no group mask, so
    # the weight loads go unpredicated (sm_90: fewer instructions a filter row)
    ALL_G: tl.constexpr = G % GB == 0
    # strips in (image, column block, row) order, rows fastest: a program's strips are a column
    # of consecutive output rows, whose filter rows overlap, so most of its input row loads hit
    # L1 (rows in (row, column block) order, Nsight Compute on an H100, session 42: the L2 at 86%
    # of its throughput, L1 hits 67%, 92 us on ResNeXt 128 @56)
    n = st // (P * QS)
    rem = st - n * (P * QS)
    qb = rem // P
    p = rem - qb * P
    q0 = qb * COLS
    if XV == 1:
        x_base = x_ptr
        x_gs = CG * s_xc
    else:  # word loads: the strides count words of XV channels (channel stride 1)
        tl.static_assert(XV * ESIZE == 4 or XV * ESIZE == 8, "XV channels must make a 32- or 64-bit word")
        x_base = x_ptr.to(tl.pointer_type(tl.int64 if XV * ESIZE == 8 else tl.int32))
        x_gs = CG // XV
    # the parts of a group sit on neighbouring lanes and read the same input words (one L1
    # request serves them)
    xg = gg // PARTS
    if INT64:
        x_grp = (xg.to(tl.int64) * x_gs)[None, :]
    else:
        x_grp = (xg * x_gs)[None, :]
    x_img = x_base + (n * s_xn)[:, None] + x_grp  # [BLOCK_S, GB]
    ih0 = p * SH - PH
    iw0 = q0 * SW - PW
    if LAYOUT is None:
        zero = tl.zeros((BLOCK_S, GB), dtype=acc_t)
    else:
        zero = gl.zeros((BLOCK_S, GB), acc_t, LAYOUT)
    accs = (zero,) * (KG * COLS)  # accs[k * COLS + col]
    # a run-time loop over filter rows: only one row's NJ x CG input values are live (unrolled,
    # all R rows' loads were hoisted: 167 registers on sm_90)
    for r in range(R):
        ih = ih0 + r * DH
        row_ok = st_ok & (ih >= 0) & (ih < H)
        x_row = x_img + (ih * s_xh)[:, None]
        # the strip's input row: NJ columns x CG channels, each value then serves every (s, col)
        # tap that meets it from registers
        xs = ()
        for j in tl.static_range(NJ):
            iw = iw0 + j
            ok = (row_ok & (iw >= 0) & (iw < W))[:, None]
            if not ALL_G:
                ok = ok & g_ok[None, :]
            x_col = x_row + (iw * s_xw)[:, None]
            if XV == 1:
                for c in tl.static_range(CG):
                    xs = xs + (tl.load(x_col + c * s_xc, mask=ok, other=0.0).to(acc_t),)
            else:
                # XV channels a load, as one 32- or 64-bit word (x_img is then a word pointer and
                # the strides count words), split into values here
                for ch in tl.static_range(CG // XV):
                    word = tl.load(x_col + ch, mask=ok, other=0)
                    for i in tl.static_range(XV):
                        xs = xs + (_unpack(word, i, X_DT),)
        for s in tl.static_range(S):
            for c in tl.static_range(CG):
                for k in tl.static_range(KG):
                    w_at = wt_ptr + (((r * S + s) * CG + c) * KG + k) * G + gg
                    if ALL_G:
                        wv = tl.load(w_at)
                    else:
                        wv = tl.load(w_at, mask=g_ok, other=0.0)
                    wv = wv.to(acc_t)[None, :]
                    new = ()
                    for col in tl.static_range(COLS):
                        new = new + (tl.fma(xs[(col * SW + s * DW) * CG + c], wv, accs[k * COLS + col]),)
                    accs = accs[: k * COLS] + new + accs[(k + 1) * COLS :]
    if INT64:
        y_base = y_ptr + (n * s_yn + p.to(tl.int64) * s_yp)[:, None] + (gg.to(tl.int64) * KG * s_yk)[None, :]
    else:
        y_base = y_ptr + (n * s_yn + p * s_yp)[:, None] + (gg * KG * s_yk)[None, :]
    for k in tl.static_range(KG):
        if HAS_BIAS:
            bk = tl.load(b_ptr + gg * KG + k, mask=g_ok, other=0.0).to(acc_t)[None, :]
        for col in tl.static_range(COLS):
            q = q0 + col
            v = accs[k * COLS + col]
            if HAS_BIAS:
                v = v + bk
            v = activation_epilogue(v, ACT)
            ok = (st_ok & (q < Q))[:, None] & g_ok[None, :]
            tl.store(y_base + k * s_yk + (q * s_yq)[:, None], v.to(y_ptr.dtype.element_ty), mask=ok)


if gluon is not None:

    @gluon.jit
    def grouped_direct_kernel_gl(x_ptr, wt_ptr, b_ptr, y_ptr, H, W, P, Q, QS, STRIPS, s_xn, s_xc, s_xh, s_xw, s_yn,
                                 s_yk, s_yp, s_yq, G: gl.constexpr, CG: gl.constexpr, KG: gl.constexpr,
                                 R: gl.constexpr, S: gl.constexpr, SH: gl.constexpr, SW: gl.constexpr,
                                 PH: gl.constexpr, PW: gl.constexpr, DH: gl.constexpr, DW: gl.constexpr,
                                 COLS: gl.constexpr, GB: gl.constexpr, BLOCK_S: gl.constexpr, HAS_BIAS: gl.constexpr,
                                 ACT: gl.constexpr, ACC_F64: gl.constexpr, INT64: gl.constexpr, XV: gl.constexpr,
                                 PARTS: gl.constexpr, TPW_S: gl.constexpr, TPW_G: gl.constexpr, WPC_S: gl.constexpr,
                                 WPC_G: gl.constexpr):  # fmt: skip
        # grouped_direct_kernel with its [BLOCK_S, GB] tensors laid out explicitly (one element
        # a thread, groups fastest), compiled as Gluon, which skips Triton's layout passes: on
        # the dev CPU the Triton entry took 30 s to compile for 4 channels a group and 230-255 s
        # for 8 (sm90-compile)
        grouped_direct_kernel(x_ptr, wt_ptr, b_ptr, y_ptr, H, W, P, Q, QS, STRIPS, s_xn, s_xc, s_xh, s_xw, s_yn, s_yk,
                              s_yp, s_yq, G, CG, KG, R, S, SH, SW, PH, PW, DH, DW, COLS, GB, BLOCK_S, HAS_BIAS, ACT,
                              ACC_F64, INT64, XV, PARTS, gl.BlockedLayout([1, 1], [TPW_S, TPW_G], [WPC_S, WPC_G], [1, 0]))  # fmt: skip

else:  # pragma: no cover
    grouped_direct_kernel_gl = None


def gluon_layout(bs: int, gb: int, warps: int) -> dict[str, int]:
    """The Gluon entry's layout constexprs over a [BLOCK_S, GB] tile of exactly ``32 * warps``
    elements: one a thread, groups on lanes first, then warps (the window kernel's layout, its
    channels here groups)."""
    from .depthwise_wgrad_window import gluon_layout as lanes_first

    lay = lanes_first(bs, gb, warps)
    return {"TPW_S": lay["TPW_Q"], "TPW_G": lay["TPW_K"], "WPC_S": lay["WPC_Q"], "WPC_G": lay["WPC_K"]}


def word_channels(x, cg: int) -> int:
    """Channels ``grouped_direct_kernel`` loads as one word from ``x`` (XV): the most, a power of
    two, that fit in 8 bytes and divide C/groups, where the channel stride is 1, every other
    stride is a multiple and the data is word-aligned; else 1. fp64 loads one value at a time.
    (Three 16-bit channels are no word: the kernel reads a 32-bit word for anything but 8 bytes,
    so an XV of 3 read garbage wherever the address happened to be 6-byte aligned.)"""
    esize = x.element_size()
    if esize > 4 or x.stride(1) != 1:
        return 1
    xv = 1 << (min(cg, 8 // esize).bit_length() - 1)  # the largest power of two not over that
    while xv > 1:
        if (cg % xv == 0 and all(x.stride(d) % xv == 0 for d in (0, 2, 3))
                and x.data_ptr() % (xv * esize) == 0):  # fmt: skip
            return xv
        xv //= 2
    return 1
