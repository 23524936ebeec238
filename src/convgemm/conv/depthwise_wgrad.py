"""Weight gradient of depthwise and narrow grouped layers as a direct, row-walking kernel.

``dw[k, c', r, s] = sum over n, p, q of dy[n, k, p, q] * x[n, (k // KG) * CG + c', p*sh - ph + r*dh, q*sw - pw + s*dw]``

for ``c' < CG`` = C/groups (depthwise: CG = 1, KG = K/groups the channel multiplier). Narrow
groups (ResNeXt's 4..8 channels per group) fit it for the same reason as depthwise: the per-group
GEMM (M = K/g, N = R*S*C/g) is far smaller than a tensor-core tile. ``c'`` is a grid axis (with the
filter row groups), so each program is a depthwise-like one reading the x channel
``(k // KG) * CG + c'`` per lane -- a per-element gather when CG > 1 or KG > 1.

Not a GEMM: each weight is a dot product over every output pixel, and a channel's R*S products
share no operand with another channel's, so tensor cores would multiply mostly zeros. The work is
near balanced between memory (x and dy read once: 77 MB for ConvNeXt's dw7x7 96@56, batch 64) and
fp32 FMAs (0.94 G there), so the kernel is built to read each x / dy element from device memory
about once and to spend few instructions per FMA:

* a program owns ``BLOCK_K`` channels (16-byte vectors along NHWC's contiguous channel axis),
  one input channel ``c'`` of their groups, a group of ``ROWS`` filter rows (all of them for small filters; one per program for 7x7, a grid
  axis, to bound registers) and a chunk of output rows (n, p), which it walks in
  ``BLOCK_Q``-column steps;
* each step loads the dy tile ``[BLOCK_Q, BLOCK_K]`` once and, for all ``ROWS * S`` taps at once,
  the x tile shifted by each tap as ONE 3-D load ``[taps, BLOCK_Q, BLOCK_K]`` (tap axis first, held
  in each thread's registers, so the dy tile is reused from registers for every tap); neighbouring
  taps re-read the same x lines from L1;
* the per-tap accumulators are one ``[taps, BLOCK_Q, BLOCK_K]`` fp32 tensor, reduced over Q once
  at the end. The tap count is split into at most three power-of-two chunks (9 = 8 + 1,
  7 = 4 + 2 + 1, 25 = 16 + 8 + 1) rather than padded to one power of two, which would spend a
  third more FMAs, loads and converts on a 3x3 kernel's padding lanes;
* the row chunks' partial sums go to a workspace; the chunk that finishes a tile last (a ticket
  counter, ``matmul.blocks.split_k_reduce``'s pattern) adds them up in chunk order and writes dw.
  One launch, no float atomics: the result is reproducible run to run.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

from .depthwise import _col_masks, _step_loads, gl, gluon


def tap_chunks(taps: int) -> tuple[int, int, int]:
    """``taps`` as up to three power-of-two chunks, largest first (0: no chunk). Two exact
    chunks and a third rounded up to a power of two (its extra lanes are masked): 15 = 8+4+4."""
    out = []
    left = taps
    for i in range(3):
        if left <= 0:
            out.append(0)
            continue
        c = 1 << (left.bit_length() - 1) if i < 2 else 1 << (left - 1).bit_length()
        out.append(c)
        left -= c
    return out[0], out[1], out[2]


@triton.jit
def _chunk_step(
    acc,
    dyv,
    x_img,
    ih0,
    q0,
    Q,
    H,
    W,
    s_xh,
    s_xw,
    c_off,
    k_ok,
    stride_w,
    pad_w,
    dil_h,
    dil_w,
    r0,
    R,
    T_FIRST: tl.constexpr,  # index of the chunk's first tap among the program's taps
    T: tl.constexpr,  # taps in this chunk (a power of two)
    TAPS: tl.constexpr,  # taps of the program: ROWS * S
    S: tl.constexpr,
):
    """``acc [T, BQ, BK] += x tile shifted by each of the chunk's taps * dy [1, BQ, BK]``."""
    BQ: tl.constexpr = acc.shape[1]
    BK: tl.constexpr = acc.shape[2]
    # The x tile is loaded flat, [T * BQ, BK] with m = t * BQ + q, then viewed as [T, BQ, BK]: a
    # 3-D load gets a layout that spreads the tap axis over threads (Triton's coalescing pass
    # orders the two non-contiguous axes its own way), and every step would then move dy into it
    # through shared memory; the flat tile's layout keeps each thread's taps in its registers,
    # under the same (column, channel) lanes as dy.
    m = tl.arange(0, T * BQ)
    t = T_FIRST + m // BQ
    r = r0 + t // S
    s = t - (t // S) * S
    ih = (ih0 + r * dil_h)[:, None]
    q = q0 + (m - (m // BQ) * BQ)
    iw = (q * stride_w - pad_w + s * dil_w)[:, None]
    ok = ((t < TAPS) & (r < R) & (q < Q))[:, None] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W) & k_ok[None, :]
    xv = tl.load(x_img + ih.to(tl.int64) * s_xh + iw * s_xw + c_off[None, :], mask=ok, other=0.0)
    return acc + tl.reshape(xv, (T, BQ, BK)).to(acc.dtype) * dyv


@triton.jit
def _chunk_partial(acc, ws_tile, k_loc, T_FIRST: tl.constexpr, T: tl.constexpr, BLOCK_K: tl.constexpr):
    """Stores the chunk's Q-reduced sums ``[T, BK]`` at taps ``T_FIRST..`` of a partial tile."""
    part = tl.sum(acc, axis=1)
    t = T_FIRST + tl.arange(0, T)
    tl.store(ws_tile + (t * BLOCK_K)[:, None] + k_loc[None, :], part)


@triton.jit
def _chunk_finish(
    ws_tile0,
    split_stride,
    n_split,
    dw_ptr,
    k,
    k_loc,
    K,
    r0,
    R,
    s_wk,
    s_wr,
    s_ws,
    T_FIRST: tl.constexpr,
    T: tl.constexpr,
    TAPS: tl.constexpr,
    S: tl.constexpr,
    BLOCK_K: tl.constexpr,
    ACC_F64: tl.constexpr,
):
    """Sums the chunk's taps over every split, in split order, and writes ``dw[k, c', r, s]``
    (``dw_ptr`` already offset to input channel ``c'``)."""
    acc_t = tl.float64 if ACC_F64 else tl.float32
    t = T_FIRST + tl.arange(0, T)
    offs = (t * BLOCK_K)[:, None] + k_loc[None, :]
    total = tl.zeros((T, BLOCK_K), dtype=acc_t)
    for i in range(n_split):
        total += tl.load(ws_tile0 + i * split_stride + offs, cache_modifier=".cg")
    r = r0 + t // S
    s = t - (t // S) * S
    ok = ((t < TAPS) & (r < R))[:, None] & (k < K)[None, :]
    out = dw_ptr + (k.to(tl.int64) * s_wk)[None, :] + (r * s_wr + s * s_ws)[:, None]
    tl.store(out, total.to(dw_ptr.dtype.element_ty), mask=ok)


@triton.jit
def depthwise_wgrad_kernel(
    x_ptr,
    dy_ptr,
    dw_ptr,
    ws_ptr,  # [tiles, n_split, T0 + T1 + T2, BLOCK_K] partial sums in the accumulator's dtype
    lock_ptr,  # int32 ticket counter per tile, zero before the launch (and left at zero)
    H,
    W,
    P,
    Q,
    K,
    KG,  # output channels per group (depthwise: the channel multiplier)
    CG,  # input channels per group (depthwise: 1); a grid axis
    NP,  # N * P output rows
    rows_per_split,
    s_xn,
    s_xh,
    s_xw,
    s_xc,
    s_yn,
    s_yk,
    s_yp,
    s_yq,
    s_wk,
    s_wc,
    s_wr,
    s_ws,
    stride_h,
    stride_w,
    pad_h,
    pad_w,
    dil_h,
    dil_w,
    R,
    S: tl.constexpr,
    ROWS: tl.constexpr,  # filter rows per program (a grid axis over the row groups)
    T0: tl.constexpr,  # ROWS * S taps as power-of-two chunks (tap_chunks); 0: no chunk
    T1: tl.constexpr,
    T2: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    ACC_F64: tl.constexpr,
):
    """``dw [K, CG, R, S]`` (any strides, written once) from ``x [N, C, H, W]`` and ``dy [N, K, P, Q]``
    (any strides; NHWC reads of a depthwise layer without multiplier are 16-byte vectors),
    groups = C / CG = K / KG.

    Grid: (CG * row groups (cdiv(R, ROWS)), channel blocks = cdiv(K, BLOCK_K), splits), input
    channel of the group fastest, then row groups, so the programs sharing an x and dy range run
    together; split ``i`` takes output rows ``[i * rows_per_split, (i + 1) * rows_per_split)`` of
    the N * P. Workspace tiles and tickets are per (c', row group, channel block).
    """
    TAPS: tl.constexpr = ROWS * S
    acc_t = tl.float64 if ACC_F64 else tl.float32
    pid0 = tl.program_id(0)
    cc = pid0 % CG
    rg = pid0 // CG
    kb = tl.program_id(1)
    split = tl.program_id(2)
    r0 = rg * ROWS
    k_loc = tl.arange(0, BLOCK_K)
    k = kb * BLOCK_K + k_loc
    k_ok = k < K
    # 64-bit channel offsets: an NCHW tensor's channel stride is H*W, and C*H*W may pass 2**31
    c_off = ((k // KG) * CG + cc).to(tl.int64) * s_xc
    k_off = (k.to(tl.int64) * s_yk)[None, :]
    qq = tl.arange(0, BLOCK_Q)
    acc0 = tl.zeros((T0, BLOCK_Q, BLOCK_K), dtype=acc_t)
    # an absent chunk keeps a 1-tap placeholder, never updated (dead code once compiled)
    acc1 = tl.zeros((T1 + (T1 == 0), BLOCK_Q, BLOCK_K), dtype=acc_t)
    acc2 = tl.zeros((T2 + (T2 == 0), BLOCK_Q, BLOCK_K), dtype=acc_t)
    row_start = split * rows_per_split
    for row in range(row_start, tl.minimum(row_start + rows_per_split, NP)):
        n = row // P
        p = row - n * P
        x_img = x_ptr + n.to(tl.int64) * s_xn
        dy_row = dy_ptr + n.to(tl.int64) * s_yn + p.to(tl.int64) * s_yp
        ih0 = p * stride_h - pad_h
        for q0 in range(0, Q, BLOCK_Q):
            q = q0 + qq
            qk_ok = (q < Q)[:, None] & k_ok[None, :]
            dyv = tl.load(dy_row + (q * s_yq)[:, None] + k_off, mask=qk_ok, other=0.0)
            dyv = dyv.to(acc_t)[None, :, :]
            acc0 = _chunk_step(
                acc0, dyv, x_img, ih0, q0, Q, H, W, s_xh, s_xw, c_off, k_ok, stride_w, pad_w, dil_h, dil_w, r0, R,
                0, T0, TAPS, S,
            )  # fmt: skip
            if T1 > 0:
                acc1 = _chunk_step(
                    acc1, dyv, x_img, ih0, q0, Q, H, W, s_xh, s_xw, c_off, k_ok, stride_w, pad_w, dil_h, dil_w, r0, R,
                    T0, T1, TAPS, S,
                )  # fmt: skip
            if T2 > 0:
                acc2 = _chunk_step(
                    acc2, dyv, x_img, ih0, q0, Q, H, W, s_xh, s_xw, c_off, k_ok, stride_w, pad_w, dil_h, dil_w, r0, R,
                    T0 + T1, T2, TAPS, S,
                )  # fmt: skip
    # this split's partial tile, then a ticket: the last split of the tile sums them all in order
    TP: tl.constexpr = T0 + T1 + T2
    tile = kb * tl.num_programs(0) + pid0
    n_split = tl.num_programs(2)
    ws_tile0 = ws_ptr + tile.to(tl.int64) * n_split * (TP * BLOCK_K)
    ws_tile = ws_tile0 + split * (TP * BLOCK_K)
    _chunk_partial(acc0, ws_tile, k_loc, 0, T0, BLOCK_K)
    if T1 > 0:
        _chunk_partial(acc1, ws_tile, k_loc, T0, T1, BLOCK_K)
    if T2 > 0:
        _chunk_partial(acc2, ws_tile, k_loc, T0 + T1, T2, BLOCK_K)
    tl.debug_barrier()  # every thread's partial is written before the ticket is taken
    ticket = tl.atomic_add(lock_ptr + tile, 1, sem="acq_rel", scope="gpu")
    if ticket == n_split - 1:
        split_stride = TP * BLOCK_K
        dw_c = dw_ptr + cc.to(tl.int64) * s_wc
        _chunk_finish(
            ws_tile0, split_stride, n_split, dw_c, k, k_loc, K, r0, R, s_wk, s_wr, s_ws, 0, T0, TAPS, S, BLOCK_K,
            ACC_F64,
        )  # fmt: skip
        if T1 > 0:
            _chunk_finish(
                ws_tile0, split_stride, n_split, dw_c, k, k_loc, K, r0, R, s_wk, s_wr, s_ws, T0, T1, TAPS, S,
                BLOCK_K, ACC_F64,
            )  # fmt: skip
        if T2 > 0:
            _chunk_finish(
                ws_tile0, split_stride, n_split, dw_c, k, k_loc, K, r0, R, s_wk, s_wr, s_ws, T0 + T1, T2, TAPS, S,
                BLOCK_K, ACC_F64,
            )  # fmt: skip
        tl.store(lock_ptr + tile, 0)


# ---------------------------------------------------------------- rows kernel: x and dy reused from registers
# The kernel above loads the x tile once per tap (R*S loads of every x element, from L1). This one
# is the forward's depthwise_rows_kernel turned around: a program walks a strip of output rows of
# one image down a block of columns; each step loads one x row (COLS + S - 1 vectors per column
# group, once) and one new dy row into a window of the M = ceil(R / STRIDE_H) dy rows it still
# meets, and adds x * dy into the R*S per-tap accumulators, which stay in registers for all of
# the program's strips. The accumulators are reduced over columns once at the end; the partial
# sums of all programs are added by a second, small launch (wgrad_reduce_kernel) in a fixed order.
@triton.jit
def depthwise_wgrad_rows_kernel(
    x_ptr,
    dy_ptr,
    ws_ptr,  # [n_split, k_blocks * CG, R*S, BLOCK_K] partial sums in the accumulator's dtype
    H,
    W,
    P,
    Q,
    K,
    KG,  # output channels per group (depthwise: the channel multiplier)
    CG,  # input channels per group (depthwise: 1); a grid axis
    ROWS,  # dy rows per strip
    strips,  # strips per image: cdiv(P, ROWS)
    pairs,  # N * strips
    pairs_per_split,
    q_blocks,
    s_xn,
    s_xh,
    s_xw,
    s_xc,
    s_yn,
    s_yk,
    s_yp,
    s_yq,
    pad_h,
    pad_w,
    R: tl.constexpr,
    S: tl.constexpr,
    STRIDE_H: tl.constexpr,
    STRIDE_W: tl.constexpr,
    DIL_W: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    COLS: tl.constexpr,
    BLOCK_K: tl.constexpr,
    VEC: tl.constexpr,
    PREFETCH: tl.constexpr,  # steps whose inputs are loaded ahead (0: none)
    TRIM: tl.constexpr,  # ROWS >= M - 1 and the first and last M - 1 steps unrolled
    ACC_F64: tl.constexpr,
    INT64: tl.constexpr,  # 64-bit offsets within an image (the forward's rule: an image spans 2**31)
    LAYOUT: tl.constexpr = None,  # None: Triton's; Gluon's [BLOCK_Q, BLOCK_K] layout from the Gluon entry
    LAYOUT1: tl.constexpr = None,  # with LAYOUT: the partial sums' [BLOCK_K] store layout
):
    """Grid: (channel blocks * CG, splits), the input channel c' of the groups fastest; program
    (kb, c') reads x channel (k // KG) * CG + c' for output channel k. Split ``i`` takes column block ``i % q_blocks`` of the
    (image, strip) pairs ``[(i // q_blocks) * pairs_per_split, ...)``. Step u of a strip starting at
    dy row p0 takes x rows (p0 + u) * STRIDE_H - pad_h + i (i < STRIDE_H) and dy row p0 + u; dy
    slot m holds dy row p0 + u - m, which meets x row i of the step through filter row
    m * STRIDE_H + i (the forward's indexing: there the slot is an output accumulator)."""
    M: tl.constexpr = (R + STRIDE_H - 1) // STRIDE_H
    NJ: tl.constexpr = (COLS - 1) * STRIDE_W + (S - 1) * DIL_W + 1
    acc_t = tl.float64 if ACC_F64 else tl.float32
    pid0 = tl.program_id(0)
    cc = pid0 % CG
    kb = pid0 // CG
    split = tl.program_id(1)
    qb = split % q_blocks
    grp = split // q_blocks
    if LAYOUT is None:
        q_range = tl.arange(0, BLOCK_Q)
        kr = tl.arange(0, BLOCK_K)
    else:
        q_range = gl.arange(0, BLOCK_Q, layout=gl.SliceLayout(1, LAYOUT))
        kr = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, LAYOUT))
    qg = qb * BLOCK_Q * COLS + q_range * COLS
    if VEC > 0:
        kr = (kr // VEC) * VEC + kr % VEC
    k = kb * BLOCK_K + kr
    k_ok = (k < K)[None, :]
    iw0 = qg * STRIDE_W - pad_w
    col_oks = _col_masks(iw0, W, k_ok, NJ)
    if INT64:  # an NCHW tensor's channel stride is H*W, and C*H*W may pass 2**31
        x_cols = x_ptr + (((k // KG) * CG + cc).to(tl.int64) * s_xc)[None, :] + (iw0.to(tl.int64) * s_xw)[:, None]
        y_cols = dy_ptr + (k.to(tl.int64) * s_yk)[None, :] + (qg.to(tl.int64) * s_yq)[:, None]
    else:
        x_cols = x_ptr + (((k // KG) * CG + cc) * s_xc)[None, :] + (iw0 * s_xw)[:, None]
        y_cols = dy_ptr + (k * s_yk)[None, :] + (qg * s_yq)[:, None]
    if LAYOUT is None:
        zero = tl.zeros((BLOCK_Q, BLOCK_K), dtype=acc_t)
    else:
        zero = gl.zeros((BLOCK_Q, BLOCK_K), acc_t, LAYOUT)
    accs = (zero,) * (R * S)
    for pair in range(grp * pairs_per_split, tl.minimum((grp + 1) * pairs_per_split, pairs)):
        n = pair // strips
        p0 = (pair - n * strips) * ROWS
        x_img = x_cols + n.to(tl.int64) * s_xn
        y_img = y_cols + n.to(tl.int64) * s_yn
        ih_base = p0 * STRIDE_H - pad_h
        dys = (zero,) * (M * COLS)
        nxt = ()  # the next PREFETCH steps' inputs, oldest first, loaded ahead of their use
        for d in tl.static_range(PREFETCH):
            nxt = nxt + _wgrad_inputs((), x_img, y_img, ih_base + d * STRIDE_H, p0, d, ROWS, H, P, col_oks, qg, Q, k_ok,
                                      s_xh, s_xw, s_yp, s_yq, STRIDE_H, NJ, COLS, S, STRIDE_W, DIL_W, INT64, 0)[0]  # fmt: skip
        lo = 0
        hi = ROWS + M - 1
        if TRIM:
            # as the forward's TRIM: the first and last M - 1 steps unrolled, the dy slots that
            # hold no row of the strip (zeros) skipped at compile time
            for u in tl.static_range(M - 1):  # slot m holds dy row p0 + u - m: valid for m <= u
                cur, nxt = _wgrad_inputs(nxt, x_img, y_img, ih_base + u * STRIDE_H, p0, u, ROWS, H, P, col_oks, qg, Q,
                                         k_ok, s_xh, s_xw, s_yp, s_yq, STRIDE_H, NJ, COLS, S, STRIDE_W, DIL_W,
                                         INT64, PREFETCH)  # fmt: skip
                dys = _dy_window(dys, cur, STRIDE_H * NJ, M, COLS, acc_t)
                accs = _wgrad_fma(accs, cur, dys, 0, u + 1, R, S, M, STRIDE_H, STRIDE_W, DIL_W, NJ, COLS, acc_t)
            lo = M - 1
            hi = ROWS
        for u in range(lo, hi):  # every slot may hold a dy row of the strip
            cur, nxt = _wgrad_inputs(nxt, x_img, y_img, ih_base + u * STRIDE_H, p0, u, ROWS, H, P, col_oks, qg, Q, k_ok,
                                     s_xh, s_xw, s_yp, s_yq, STRIDE_H, NJ, COLS, S, STRIDE_W, DIL_W, INT64,
                                     PREFETCH)  # fmt: skip
            dys = _dy_window(dys, cur, STRIDE_H * NJ, M, COLS, acc_t)
            accs = _wgrad_fma(accs, cur, dys, 0, M, R, S, M, STRIDE_H, STRIDE_W, DIL_W, NJ, COLS, acc_t)
        if TRIM:
            for v in tl.static_range(M - 1):  # step ROWS + v: slot m valid for m > v
                cur, nxt = _wgrad_inputs(nxt, x_img, y_img, ih_base + (ROWS + v) * STRIDE_H, p0, ROWS + v, ROWS, H, P,
                                         col_oks, qg, Q, k_ok, s_xh, s_xw, s_yp, s_yq, STRIDE_H, NJ, COLS, S, STRIDE_W,
                                         DIL_W, INT64, PREFETCH)  # fmt: skip
                dys = _dy_window(dys, cur, STRIDE_H * NJ, M, COLS, acc_t)
                accs = _wgrad_fma(accs, cur, dys, v + 1, M, R, S, M, STRIDE_H, STRIDE_W, DIL_W, NJ, COLS, acc_t)
    # this program's column sums, one [BLOCK_K] vector per tap, contiguous per program
    ws = ws_ptr + (split * tl.num_programs(0) + pid0).to(tl.int64) * (R * S * BLOCK_K)
    if LAYOUT is None:
        kl = tl.arange(0, BLOCK_K)
        for t in tl.static_range(R * S):
            tl.store(ws + t * BLOCK_K + kl, tl.sum(accs[t], axis=0))
    else:
        kl = gl.arange(0, BLOCK_K, layout=LAYOUT1)
        for t in tl.static_range(R * S):
            tl.store(ws + t * BLOCK_K + kl, gl.convert_layout(tl.sum(accs[t], axis=0), LAYOUT1))


if gluon is not None:

    @gluon.jit
    def depthwise_wgrad_rows_kernel_gl(x_ptr, dy_ptr, ws_ptr, H, W, P, Q, K, KG, CG, ROWS, strips, pairs,
                                       pairs_per_split, q_blocks, s_xn, s_xh, s_xw, s_xc, s_yn, s_yk, s_yp, s_yq,
                                       pad_h, pad_w, R: gl.constexpr, S: gl.constexpr, STRIDE_H: gl.constexpr,
                                       STRIDE_W: gl.constexpr, DIL_W: gl.constexpr, BLOCK_Q: gl.constexpr,
                                       COLS: gl.constexpr, BLOCK_K: gl.constexpr, VEC: gl.constexpr,
                                       PREFETCH: gl.constexpr, TRIM: gl.constexpr, ACC_F64: gl.constexpr,
                                       INT64: gl.constexpr, SPT_K: gl.constexpr, TPW_Q: gl.constexpr,
                                       TPW_K: gl.constexpr, WPC_Q: gl.constexpr, WPC_K: gl.constexpr):  # fmt: skip
        # ``depthwise_wgrad_rows_kernel`` with its tensors laid out explicitly (the layouts
        # Triton's coalescing pass picks: ``backward.DepthwiseWgrad.gluon_layout``), compiled as
        # Gluon, without that pass, as the forward's ``depthwise_rows_kernel_gl``: a stride-2 3x3
        # tile of 7 columns makes 30 x loads a step, and MobileNetV2's strided layers waited
        # 4.7-8.4 s on their first wgrad call (session 37). The same registers and memory and
        # floating-point instructions as the Triton entry where gluon_layout gives it, address
        # code ordered otherwise (tools/depthwise_gluon_check.py --wgrad); the same bits on the H200.
        depthwise_wgrad_rows_kernel(x_ptr, dy_ptr, ws_ptr, H, W, P, Q, K, KG, CG, ROWS, strips, pairs,
                                    pairs_per_split, q_blocks, s_xn, s_xh, s_xw, s_xc, s_yn, s_yk, s_yp, s_yq, pad_h,
                                    pad_w, R, S, STRIDE_H, STRIDE_W, DIL_W, BLOCK_Q, COLS, BLOCK_K, VEC, PREFETCH,
                                    TRIM, ACC_F64, INT64,
                                    gl.BlockedLayout([1, SPT_K], [TPW_Q, TPW_K], [WPC_Q, WPC_K], [1, 0]),
                                    gl.BlockedLayout([1], [32], [WPC_Q * WPC_K], [0]))  # fmt: skip

else:  # pragma: no cover
    depthwise_wgrad_rows_kernel_gl = None


@triton.jit
def _wgrad_inputs(nxt, x_img, y_img, ih0, p0, u, ROWS, H, P, col_oks, qg, Q, k_ok, s_xh, s_xw, s_yp, s_yq,
                  STRIDE_H: tl.constexpr, NJ: tl.constexpr, COLS: tl.constexpr, S: tl.constexpr,
                  STRIDE_W: tl.constexpr, DIL_W: tl.constexpr, INT64: tl.constexpr,
                  PREFETCH: tl.constexpr):  # fmt: skip
    """(step u's inputs, the queue of later steps' inputs): a step's inputs are one flat tuple of
    STRIDE_H * NJ x vectors, then COLS dy vectors. With PREFETCH = D > 0, ``nxt`` holds steps u to
    u + D - 1 (oldest first): step u's leave it and step u + D's are loaded now, D steps before
    their use (more loads in flight for the same registers of accumulators)."""
    if PREFETCH > 0:
        L: tl.constexpr = STRIDE_H * NJ + COLS
        cur = nxt[:L]
        nxt = nxt[L:] + _step_loads(x_img, ih0 + PREFETCH * STRIDE_H, H, col_oks, s_xh, s_xw, STRIDE_H, NJ, COLS,
                                    S, STRIDE_W, DIL_W, INT64) + _dy_loads(y_img, p0, u + PREFETCH, ROWS, P, qg, Q,
                                                                           k_ok, s_yp, s_yq, COLS, INT64)  # fmt: skip
    else:
        cur = _step_loads(x_img, ih0, H, col_oks, s_xh, s_xw, STRIDE_H, NJ, COLS, S, STRIDE_W, DIL_W,
                          INT64) + _dy_loads(y_img, p0, u, ROWS, P, qg, Q, k_ok, s_yp, s_yq, COLS, INT64)  # fmt: skip
    return cur, nxt


@triton.jit
def _dy_window(dys, cur, XN: tl.constexpr, M: tl.constexpr, COLS: tl.constexpr, acc_t: tl.constexpr):
    """The dy window after a step: the step's dy row (``cur``'s COLS entries after its XN x
    vectors) enters slot 0, the oldest row leaves."""
    new = ()
    for c in tl.static_range(COLS):
        new = new + (cur[XN + c].to(acc_t),)
    return new + dys[: (M - 1) * COLS]


@triton.jit
def _wgrad_fma(accs, cur, dys, LO: tl.constexpr, HI: tl.constexpr, R: tl.constexpr, S: tl.constexpr,
               M: tl.constexpr, STRIDE_H: tl.constexpr, STRIDE_W: tl.constexpr, DIL_W: tl.constexpr,
               NJ: tl.constexpr, COLS: tl.constexpr, acc_t: tl.constexpr):  # fmt: skip
    """One step's x * dy into the per-tap accumulators, for the dy slots LO <= m < HI.

    Tap (r, s) takes its columns in ascending order; a filter row's S accumulators are rebuilt
    as one tuple (as ``depthwise._rows_fma``: one 49-entry tuple per multiply-add was most of a
    7x7 kernel's compile time, in the frontend that holds the GIL), and each multiply-add is one
    ``tl.fma`` (as there: fewer ops for Triton's coalescing pass; a 7x7 c4 tile's pass 0.76 ->
    0.40 s on the dev CPU, the same sm_90 instructions)."""
    for i in tl.static_range(STRIDE_H):
        for m in tl.static_range(LO, HI):
            if m * STRIDE_H + i < R:
                row = ()
                for s in tl.static_range(S):
                    v = accs[(m * STRIDE_H + i) * S + s]
                    for c in tl.static_range(COLS):
                        v = tl.fma(cur[i * NJ + c * STRIDE_W + s * DIL_W].to(acc_t), dys[m * COLS + c], v)
                    row = row + (v,)
                accs = accs[: (m * STRIDE_H + i) * S] + row + accs[(m * STRIDE_H + i + 1) * S :]
    return accs


@triton.jit
def _dy_loads(y_img, p0, u, ROWS, P, qg, Q, k_ok, s_yp, s_yq, COLS: tl.constexpr, INT64: tl.constexpr):
    """dy row p0 + u at the COLS columns of each group (zeros past the strip or the image)."""
    p = p0 + u
    row_ok = (u < ROWS) & (p < P)
    if INT64:
        y_row = y_img + p.to(tl.int64) * s_yp
    else:
        y_row = y_img + p * s_yp
    vals = ()
    for c in tl.static_range(COLS):
        ok = (row_ok & (qg + c < Q))[:, None] & k_ok
        vals = vals + (tl.load(y_row + c * s_yq, mask=ok, other=0.0),)
    return vals


@triton.jit
def wgrad_reduce_kernel(
    ws_ptr,  # [n_split, k_blocks * CG * TAPS * BLOCK_K]
    dw_ptr,
    n_split,
    K,
    CG,
    s_wk,
    s_wc,
    s_wr,
    s_ws,
    TAPS: tl.constexpr,
    S: tl.constexpr,
    BLOCK_K: tl.constexpr,  # the main kernel's channel block
    BLOCK: tl.constexpr,  # flat partial-sum entries per program
    SPLITS: tl.constexpr,  # splits summed per iteration (a tree within, in order across)
    PDL: tl.constexpr = False,  # a programmatic dependent launch: wait for the partial sums first
):
    """``dw[k, c', r, s]`` = the sum over splits of the partial sums, in a fixed order."""
    if PDL:
        gdc_wait()
    e = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    row_len = tl.cdiv(K, BLOCK_K) * CG * TAPS * BLOCK_K
    e_ok = e < row_len
    sp = tl.arange(0, SPLITS)
    total = tl.zeros((BLOCK,), dtype=ws_ptr.dtype.element_ty)
    for i0 in range(0, n_split, SPLITS):
        ok = ((i0 + sp) < n_split)[:, None] & e_ok[None, :]
        part = tl.load(ws_ptr + ((i0 + sp).to(tl.int64) * row_len)[:, None] + e[None, :], mask=ok, other=0.0)
        total += tl.sum(part, axis=0)
    kbc = e // (TAPS * BLOCK_K)
    rest = e - kbc * (TAPS * BLOCK_K)
    kb = kbc // CG
    cc = kbc - kb * CG
    t = rest // BLOCK_K
    k = kb * BLOCK_K + (rest - t * BLOCK_K)
    r = t // S
    s = t - r * S
    ok = e_ok & (k < K)
    out = dw_ptr + k.to(tl.int64) * s_wk + cc * s_wc + r * s_wr + s * s_ws
    tl.store(out, total.to(dw_ptr.dtype.element_ty), mask=ok)
