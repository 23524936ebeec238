"""Depthwise convolution (one input channel per group) as direct kernels on the CUDA cores.

There is no reduction over channels, so a GEMM would multiply 1-wide K tiles: tensor cores do
nothing useful here. Two kernels: ``depthwise_kernel`` (the tap kernel, below) takes every
depthwise problem; ``depthwise_rows_kernel`` (further down) keeps inputs, weights and
accumulators in registers and is the one chosen wherever it applies (session 10: 1.3-3.7x
faster than the tap kernel on every layer measured; see its comment block).

The tap kernel: each program computes a ``BLOCK_Q`` x ``BLOCK_K`` block (output columns x
output channels) of ``ROWS`` consecutive output rows, walking the R x S taps unrolled at compile
time; the loads are 16-byte vectors along NHWC's contiguous channel axis, and neighbouring taps
and rows re-read the same input lines from L1/L2, so device memory sees each input row about
once. Channel multipliers (K = m * C) map output channel k to input channel k // m.

On the H200 the kernel is bound by L1 traffic (ncu on a 3x3 layer: L1 91% busy, DRAM 24%),
since each tap re-reads its inputs from L1 rather than from registers. So a tap costs one scalar
offset added to a pointer tile, programs whose input window lies inside the image (most of a
large image) run a loop without masks, and the configs favour whole 128-byte lines per pixel
(``tools/depthwise_sweep.py`` times every config; ``tools/sass_mix.py`` counts instructions).
"""

from __future__ import annotations

import triton
import triton.language as tl

try:  # Gluon (Triton 3.6): the rows kernel's Gluon entry; without it the Triton entry runs everywhere
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
except ImportError:  # pragma: no cover - an older Triton
    gluon = gl = None

from ..matmul.blocks import activation_epilogue


@triton.jit
def _tap_offset(r, s, dil_h, dil_w, s_xh, s_xw, INT64: tl.constexpr):
    """Tap (r, s)'s element offset from the first tap's (64-bit for images of 2**31 elements)."""
    if INT64:
        # tl.cast, not .to: with a constexpr dilation the products are Python ints
        off = tl.cast(r * dil_h, tl.int64) * s_xh + tl.cast(s * dil_w, tl.int64) * s_xw
    else:
        off = r * dil_h * s_xh + s * dil_w * s_xw
    return off


@triton.jit
def _program_block(P, Q, K, ROWS, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr):
    """This program's block of a 1-D grid over (image, row block, column block, channel block),
    channel blocks fastest: ``(n, first output row, column block, channel block)``."""
    pid = tl.program_id(0)
    k_blocks = tl.cdiv(K, BLOCK_K)
    q_blocks = tl.cdiv(Q, BLOCK_Q)
    row_blocks = tl.cdiv(P, ROWS)
    kb = pid % k_blocks
    rest = pid // k_blocks
    qb = rest % q_blocks
    rest = rest // q_blocks
    n = rest // row_blocks
    return n, (rest - n * row_blocks) * ROWS, qb, kb


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
    n, p0, qb, kb = _program_block(P, Q, K, ROWS, BLOCK_Q, BLOCK_K)
    q0 = qb * BLOCK_Q
    p = p0 + tl.arange(0, ROWS)
    q = q0 + tl.arange(0, BLOCK_Q)
    k = kb * BLOCK_K + tl.arange(0, BLOCK_K)
    acc_t = tl.float64 if ACC_F64 else tl.float32
    acc = tl.zeros((ROWS, BLOCK_Q, BLOCK_K), dtype=acc_t)
    ih0 = p * stride_h - pad_h
    iw0 = q * stride_w - pad_w
    p_ok = p < P
    q_ok = q < Q
    # One pointer tile for the first tap; every other tap is that tile plus a scalar offset, so a
    # tap costs one add per vector of channels, not per-element index arithmetic. Offsets within
    # one image are 32-bit (the host sends images of 2**31 elements or more with INT64) from a
    # 64-bit image base.
    if INT64:
        x_tile = (x_ptr + n.to(tl.int64) * s_xn + ((k // MULT).to(tl.int64) * s_xc)[None, None, :]
                  + (ih0.to(tl.int64) * s_xh)[:, None, None] + (iw0.to(tl.int64) * s_xw)[None, :, None])  # fmt: skip
    else:
        x_tile = (x_ptr + n.to(tl.int64) * s_xn + ((k // MULT) * s_xc)[None, None, :]
                  + (ih0 * s_xh)[:, None, None] + (iw0 * s_xw)[None, :, None])  # fmt: skip
    # The weights as a [1, 1, BLOCK_K] tile: broadcast over the rows and columns, the tile keeps
    # the input tile's register layout (a 1-D vector would be moved into it through shared
    # memory at every tap).
    w_row = w_ptr + k[None, None, :]
    k_ok = (k < K)[None, None, :]
    # A program whose whole input window is inside the image and whose channel block is full
    # loads without masks (most programs of a large image): masks, and the zero fill of masked
    # lanes, were a third of the instructions per tap.
    p_last = p0 + ROWS - 1
    q_last = q0 + BLOCK_Q - 1
    inside = ((p_last < P) & (q_last < Q) & ((kb + 1) * BLOCK_K <= K)
              & (p0 * stride_h - pad_h >= 0) & (p_last * stride_h - pad_h + (R - 1) * dil_h < H)
              & (q0 * stride_w - pad_w >= 0) & (q_last * stride_w - pad_w + (S - 1) * dil_w < W))  # fmt: skip
    if inside:
        for r in tl.static_range(R):
            for s in tl.static_range(S):
                xv = tl.load(x_tile + _tap_offset(r, s, dil_h, dil_w, s_xh, s_xw, INT64))
                wv = tl.load(w_row + (r * S + s) * s_wt)
                acc += xv.to(acc_t) * wv.to(acc_t)
    else:
        for r in tl.static_range(R):
            ih = ih0 + r * dil_h
            h_ok = ((ih >= 0) & (ih < H) & p_ok)[:, None, None]
            for s in tl.static_range(S):
                iw = iw0 + s * dil_w
                ok = h_ok & ((iw >= 0) & (iw < W) & q_ok)[None, :, None] & k_ok
                xv = tl.load(x_tile + _tap_offset(r, s, dil_h, dil_w, s_xh, s_xw, INT64), mask=ok, other=0.0)
                wv = tl.load(w_row + (r * S + s) * s_wt, mask=k_ok, other=0.0)
                acc += xv.to(acc_t) * wv.to(acc_t)
    if HAS_BIAS:
        acc += tl.load(b_ptr + k[None, None, :], mask=k_ok, other=0.0).to(acc_t)
    y_img = y_ptr + n.to(tl.int64) * s_yn
    if INT64:  # an NCHW output's channel stride is P*Q, and K*P*Q may pass 2**31
        y_off = (p.to(tl.int64) * s_yp)[:, None, None] + (q.to(tl.int64) * s_yq)[None, :, None]
        y_off += (k.to(tl.int64) * s_yk)[None, None, :]
    else:
        y_off = (p * s_yp)[:, None, None] + (q * s_yq)[None, :, None] + (k * s_yk)[None, None, :]
    out_ok = p_ok[:, None, None] & q_ok[None, :, None] & k_ok
    tl.store(y_img + y_off, acc.to(y_ptr.dtype.element_ty), mask=out_ok)


# ---------------------------------------------------------------- rows kernel: inputs reused from registers
# The kernel above re-reads every input from L1 once per tap (R*S times), and L1 is what bounds it.
# This one walks a column strip of the image downwards: each input row is loaded once, and each
# loaded input vector is multiplied into every output it contributes to, whose accumulators stay
# in registers until the last tap has passed: down the strip, the R output rows in flight (an
# output row is stored as soon as it is complete, and its accumulator recycled for the next row
# entering the window); across, COLS neighbouring output columns per thread, which share S - 1 of
# their S input columns, so a row of COLS outputs loads COLS + S - 1 input vectors, not COLS * S.
@triton.jit
def depthwise_rows_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    H,
    W,
    P,
    Q,
    K,
    MULT,  # output channels per group (depthwise: the channel multiplier)
    ROWS,  # output rows per program (the strip's height; a runtime loop bound)
    s_xn,
    s_xh,
    s_xw,
    s_xc,
    s_wt,  # tap stride of the packed [CG*R*S, K] weight (channels contiguous)
    s_yn,
    s_yk,
    s_yp,
    s_yq,
    pad_h,
    pad_w,
    CG: tl.constexpr,  # input channels per group (depthwise: 1; narrow groups: a few)
    R: tl.constexpr,
    S: tl.constexpr,
    STRIDE_H: tl.constexpr,  # the vertical stride (dilation 1 vertically)
    STRIDE_W: tl.constexpr,  # constexpr across: which input column feeds which output is static
    DIL_W: tl.constexpr,
    BLOCK_Q: tl.constexpr,  # column groups per program
    COLS: tl.constexpr,  # neighbouring output columns per group (any count, not only powers of 2)
    BLOCK_K: tl.constexpr,
    VEC: tl.constexpr,  # channels per thread's load (0: as wide as Triton makes it, 16 bytes)
    PRELOAD: tl.constexpr,  # every tap's weights in registers for the whole strip
    PREFETCH: tl.constexpr,  # steps whose input rows are loaded ahead of their multiply-adds (0: none)
    TRIM: tl.constexpr,  # ROWS >= M - 1: the first and last M - 1 steps unrolled, dead slots skipped
    HAS_BIAS: tl.constexpr,
    ACC_F64: tl.constexpr,
    INT64: tl.constexpr,
    LAYOUT: tl.constexpr = None,  # None: Triton's; a Gluon layout when called by depthwise_rows_kernel_gl
):
    # Step u takes the STRIDE_H input rows (p0 + u) * STRIDE_H - pad_h + i. Accumulator slot m
    # holds output row p0 + u - m, to which input row i of the step contributes through filter
    # row r = m * STRIDE_H + i; M = ceil(R / STRIDE_H) slots cover every filter row, so after
    # step u, output row p0 + u - (M - 1) has had all its taps. Column group g holds the output
    # columns q0 + g * COLS + c (c < COLS), whose tap s reads input column offset
    # j = c * STRIDE_W + s * DIL_W from the group's first: NJ distinct offsets, each loaded once.
    # With CG > 1 input channels per group, output channel k sums over the group's input
    # channels (k // MULT) * CG + cc, each a step's loads of its own; tap (cc, r, s) is row
    # (cc * R + r) * S + s of the packed weight.
    M: tl.constexpr = (R + STRIDE_H - 1) // STRIDE_H
    NJ: tl.constexpr = (COLS - 1) * STRIDE_W + (S - 1) * DIL_W + 1
    n, p0, qb, kb = _program_block(P, Q, K, ROWS, BLOCK_Q * COLS, BLOCK_K)
    if LAYOUT is None:
        q_range = tl.arange(0, BLOCK_Q)
    else:
        q_range = gl.arange(0, BLOCK_Q, layout=gl.SliceLayout(1, LAYOUT))
    qg = qb * BLOCK_Q * COLS + q_range * COLS  # each group's first output column
    if LAYOUT is None:
        kr = tl.arange(0, BLOCK_K)
    else:
        kr = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, LAYOUT))
    if VEC > 0:
        # contiguous runs of only VEC channels: Triton then gives each thread VEC channels, so a
        # thread holds fewer channels and more columns, which the weights in registers need
        kr = (kr // VEC) * VEC + kr % VEC
    k = kb * BLOCK_K + kr
    acc_t = tl.float64 if ACC_F64 else tl.float32
    iw0 = qg * STRIDE_W - pad_w
    k_ok = (k < K)[None, :]
    if INT64:
        x_cols = (x_ptr + n.to(tl.int64) * s_xn + ((k // MULT * CG).to(tl.int64) * s_xc)[None, :]
                  + (iw0.to(tl.int64) * s_xw)[:, None])  # fmt: skip
        y_cols = y_ptr + n.to(tl.int64) * s_yn + (k.to(tl.int64) * s_yk)[None, :] + (qg.to(tl.int64) * s_yq)[:, None]
    else:
        x_cols = x_ptr + n.to(tl.int64) * s_xn + ((k // MULT * CG) * s_xc)[None, :] + (iw0 * s_xw)[:, None]
        y_cols = y_ptr + n.to(tl.int64) * s_yn + (k * s_yk)[None, :] + (qg * s_yq)[:, None]
    col_oks = _col_masks(iw0, W, k_ok, NJ)
    w_row = w_ptr + k[None, :]
    if HAS_BIAS:
        bias = tl.load(b_ptr + k[None, :], mask=k_ok, other=0.0).to(acc_t)
    elif LAYOUT is None:
        bias = tl.zeros((1, BLOCK_K), dtype=acc_t)
    else:
        bias = gl.zeros((1, BLOCK_K), acc_t, LAYOUT)
    if LAYOUT is None:
        zero = tl.zeros((BLOCK_Q, BLOCK_K), dtype=acc_t)
    else:
        zero = gl.zeros((BLOCK_Q, BLOCK_K), acc_t, LAYOUT)
    accs = (zero,) * (M * COLS)  # slot m, column c at m * COLS + c
    ws = ()
    if PRELOAD:
        for t in tl.static_range(CG * R * S):
            ws = ws + (tl.load(w_row + t * s_wt, mask=k_ok, other=0.0).to(acc_t),)
    ih_base = p0 * STRIDE_H - pad_h
    nxt = ()  # the input rows of the next PREFETCH steps, oldest first, loaded ahead of their use
    for d in tl.static_range(PREFETCH):
        nxt = nxt + _group_loads(x_cols, s_xc, ih_base + d * STRIDE_H, H, col_oks, s_xh, s_xw, CG, STRIDE_H, NJ,
                                 COLS, S, STRIDE_W, DIL_W, INT64)  # fmt: skip
    lo = 0
    hi = ROWS + M - 1
    if TRIM:
        # Steps 0..M-2 only start rows of the strip and steps ROWS..ROWS+M-2 only finish them:
        # unrolled, the slots holding rows outside the strip are skipped at compile time (7x7
        # strips of 14 rows: 30% of the multiply-adds). The host sets TRIM when ROWS >= M - 1.
        for u in tl.static_range(M - 1):  # slot m holds row p0 + u - m: valid for m <= u
            cur, nxt = _rows_inputs(nxt, x_cols, s_xc, ih_base + u * STRIDE_H, H, col_oks, s_xh, s_xw, CG,
                                    STRIDE_H, NJ, COLS, S, STRIDE_W, DIL_W, INT64, PREFETCH)  # fmt: skip
            accs = _rows_fma(accs, cur, ws, w_row, k_ok, s_wt, 0, u + 1, CG, R, S, M, STRIDE_H, STRIDE_W, DIL_W, NJ,
                             COLS, PRELOAD, acc_t)  # fmt: skip
            accs = (zero,) * COLS + accs[: (M - 1) * COLS]
        lo = M - 1
        hi = ROWS
    for u in range(lo, hi):  # every slot may hold a row of the strip
        cur, nxt = _rows_inputs(nxt, x_cols, s_xc, ih_base + u * STRIDE_H, H, col_oks, s_xh, s_xw, CG, STRIDE_H,
                                NJ, COLS, S, STRIDE_W, DIL_W, INT64, PREFETCH)  # fmt: skip
        accs = _rows_fma(accs, cur, ws, w_row, k_ok, s_wt, 0, M, CG, R, S, M, STRIDE_H, STRIDE_W, DIL_W, NJ, COLS,
                         PRELOAD, acc_t)  # fmt: skip
        _rows_store(accs, bias, y_cols, p0, u - (M - 1), P, qg, Q, k_ok, s_yp, s_yq, M, COLS, INT64)
        accs = (zero,) * COLS + accs[: (M - 1) * COLS]
    if TRIM:
        for v in tl.static_range(M - 1):  # step ROWS + v: slot m holds row p0 + ROWS + v - m, valid for m > v
            cur, nxt = _rows_inputs(nxt, x_cols, s_xc, ih_base + (ROWS + v) * STRIDE_H, H, col_oks, s_xh, s_xw,
                                    CG, STRIDE_H, NJ, COLS, S, STRIDE_W, DIL_W, INT64, PREFETCH)  # fmt: skip
            accs = _rows_fma(accs, cur, ws, w_row, k_ok, s_wt, v + 1, M, CG, R, S, M, STRIDE_H, STRIDE_W, DIL_W, NJ,
                             COLS, PRELOAD, acc_t)  # fmt: skip
            _rows_store(accs, bias, y_cols, p0, ROWS + v - (M - 1), P, qg, Q, k_ok, s_yp, s_yq, M, COLS, INT64)
            accs = (zero,) * COLS + accs[: (M - 1) * COLS]


if gluon is not None:

    @gluon.jit
    def depthwise_rows_kernel_gl(x_ptr, w_ptr, b_ptr, y_ptr, H, W, P, Q, K, MULT, ROWS, s_xn, s_xh, s_xw, s_xc, s_wt,
                                 s_yn, s_yk, s_yp, s_yq, pad_h, pad_w, CG: gl.constexpr, R: gl.constexpr,
                                 S: gl.constexpr, STRIDE_H: gl.constexpr, STRIDE_W: gl.constexpr,
                                 DIL_W: gl.constexpr, BLOCK_Q: gl.constexpr, COLS: gl.constexpr,
                                 BLOCK_K: gl.constexpr, VEC: gl.constexpr, PRELOAD: gl.constexpr,
                                 PREFETCH: gl.constexpr, TRIM: gl.constexpr, HAS_BIAS: gl.constexpr,
                                 ACC_F64: gl.constexpr, INT64: gl.constexpr, SPT_K: gl.constexpr,
                                 TPW_Q: gl.constexpr, TPW_K: gl.constexpr, WPC_Q: gl.constexpr,
                                 WPC_K: gl.constexpr):  # fmt: skip
        # ``depthwise_rows_kernel`` with its [BLOCK_Q, BLOCK_K] tensors laid out explicitly
        # (``fprop.DepthwiseRows.gluon_layout``: the layout Triton's coalescing pass picks for
        # them), compiled as Gluon, whose pipeline has no coalescing pass. That pass visits, for
        # every load and store, every op connected to it and each of those ops' slices again: on
        # ConvNeXt's 7x7 tile of 7 columns (75 loads, 1378 ops) it took 1.1 of the 1.7 s compile
        # on the dev CPU, the longest compile of a first call. Same sm_90 SASS as the Triton entry
        # where gluon_layout gives it (tests/test_depthwise_gluon.py).
        depthwise_rows_kernel(x_ptr, w_ptr, b_ptr, y_ptr, H, W, P, Q, K, MULT, ROWS, s_xn, s_xh, s_xw, s_xc, s_wt,
                              s_yn, s_yk, s_yp, s_yq, pad_h, pad_w, CG, R, S, STRIDE_H, STRIDE_W, DIL_W, BLOCK_Q,
                              COLS, BLOCK_K, VEC, PRELOAD, PREFETCH, TRIM, HAS_BIAS, ACC_F64, INT64,
                              gl.BlockedLayout([1, SPT_K], [TPW_Q, TPW_K], [WPC_Q, WPC_K], [1, 0]))  # fmt: skip

else:  # pragma: no cover
    depthwise_rows_kernel_gl = None


@triton.jit
def _rows_inputs(nxt, x_cols, s_xc, ih0, H, col_oks, s_xh, s_xw, CG: tl.constexpr, STRIDE_H: tl.constexpr,
                 NJ: tl.constexpr, COLS: tl.constexpr, S: tl.constexpr, STRIDE_W: tl.constexpr, DIL_W: tl.constexpr,
                 INT64: tl.constexpr, PREFETCH: tl.constexpr):  # fmt: skip
    """(this step's inputs, the queue of later steps'): with PREFETCH = D > 0, ``nxt`` holds the
    rows of this step (from ``ih0``) and the D - 1 after it; this step's leave the queue and those
    D steps ahead are loaded now; else this step's are loaded now."""
    if PREFETCH > 0:
        L: tl.constexpr = CG * STRIDE_H * NJ
        cur = nxt[:L]
        nxt = nxt[L:] + _group_loads(x_cols, s_xc, ih0 + PREFETCH * STRIDE_H, H, col_oks, s_xh, s_xw, CG,
                                     STRIDE_H, NJ, COLS, S, STRIDE_W, DIL_W, INT64)  # fmt: skip
    else:
        cur = _group_loads(x_cols, s_xc, ih0, H, col_oks, s_xh, s_xw, CG, STRIDE_H, NJ, COLS, S, STRIDE_W, DIL_W,
                           INT64)  # fmt: skip
    return cur, nxt


@triton.jit
def _rows_fma(accs, cur, ws, w_row, k_ok, s_wt, LO: tl.constexpr, HI: tl.constexpr, CG: tl.constexpr,
              R: tl.constexpr, S: tl.constexpr, M: tl.constexpr, STRIDE_H: tl.constexpr, STRIDE_W: tl.constexpr,
              DIL_W: tl.constexpr, NJ: tl.constexpr, COLS: tl.constexpr, PRELOAD: tl.constexpr, acc_t: tl.constexpr):  # fmt: skip
    """One step's multiply-adds into the accumulator slots LO <= m < HI.

    Each accumulator (slot m, column c) takes its taps in the order (cc, i, s); a slot's COLS
    accumulators are rebuilt as one tuple per slot, not one tuple per multiply-add. The
    compiler's frontend runs in Python under the GIL, so it serialises the tuner's parallel
    compiles: a 7x7 tile of 7 columns has 343 multiply-adds per step, and rebuilding the
    49-entry tuple for each of them took most of its frontend time.

    Each multiply-add is one ``tl.fma`` rather than a multiply and an add (which the backend
    contracts to the same FFMA: sm_90 SASS of the same instructions): Triton's coalescing pass
    walks, for every load and store, the whole connected slice of the kernel's IR, at a cost
    that grows faster than the square of its op count, and the fused op takes 343 ops out of
    a 7-column tile's 1710 (that pass: 2.3-2.5 -> 1.4-1.7 s of the tile's compile on the dev CPU)."""
    for cc in tl.static_range(CG):
        for i in tl.static_range(STRIDE_H):
            for m in tl.static_range(LO, HI):
                if m * STRIDE_H + i < R:
                    wrow = ()
                    for s in tl.static_range(S):
                        if PRELOAD:
                            wrow = wrow + (ws[(cc * R + m * STRIDE_H + i) * S + s],)
                        else:
                            wrow = wrow + (tl.load(w_row + ((cc * R + m * STRIDE_H + i) * S + s) * s_wt, mask=k_ok,
                                                   other=0.0).to(acc_t),)  # fmt: skip
                    row = ()
                    for c in tl.static_range(COLS):
                        v = accs[m * COLS + c]
                        for s in tl.static_range(S):
                            v = tl.fma(cur[(cc * STRIDE_H + i) * NJ + c * STRIDE_W + s * DIL_W].to(acc_t), wrow[s], v)
                        row = row + (v,)
                    accs = accs[: m * COLS] + row + accs[(m + 1) * COLS :]
    return accs


@triton.jit
def _rows_store(accs, bias, y_cols, p0, jr, P, qg, Q, k_ok, s_yp, s_yq, M: tl.constexpr, COLS: tl.constexpr,
                INT64: tl.constexpr):  # fmt: skip
    """Stores output row p0 + jr (complete in the last slot) if it is a row of the strip's image."""
    if (jr >= 0) & (p0 + jr < P):
        if INT64:
            dst = y_cols + (p0 + jr).to(tl.int64) * s_yp
        else:
            dst = y_cols + (p0 + jr) * s_yp
        for c in tl.static_range(COLS):
            out = accs[(M - 1) * COLS + c] + bias
            out_ok = (qg + c < Q)[:, None] & k_ok
            tl.store(dst + c * s_yq, out.to(dst.dtype.element_ty), mask=out_ok)


@triton.constexpr_function
def _read(j, cols, s, stride_w, dil_w):
    """Whether some output column c < cols reads input column offset j through some tap t < s."""
    return any(c * stride_w + t * dil_w == j for c in range(cols) for t in range(s))


@triton.jit
def _step_loads(x_cols, ih0, H, col_oks, s_xh, s_xw, STRIDE_H: tl.constexpr, NJ: tl.constexpr,
                COLS: tl.constexpr, S: tl.constexpr, STRIDE_W: tl.constexpr, DIL_W: tl.constexpr,
                INT64: tl.constexpr):  # fmt: skip
    """One step's inputs in the input's dtype: rows ih0 .. ih0 + STRIDE_H - 1, each at the NJ
    column offsets, entry i * NJ + j (zeros outside the image, and at offsets no tap reads).
    ``col_oks``: ``_col_masks``, each offset's in-image and in-range mask."""
    vals = ()
    for i in tl.static_range(STRIDE_H):
        ih = ih0 + i
        row_ok = (ih >= 0) & (ih < H)
        if INT64:
            x_row = x_cols + ih.to(tl.int64) * s_xh
        else:
            x_row = x_cols + ih * s_xh
        for j in tl.static_range(NJ):
            ok = col_oks[j] & row_ok
            if _read(j, COLS, S, STRIDE_W, DIL_W):
                if INT64:
                    v = tl.load(x_row + tl.cast(j, tl.int64) * s_xw, mask=ok, other=0.0)
                else:
                    v = tl.load(x_row + j * s_xw, mask=ok, other=0.0)
            else:
                v = (ok & False).to(x_cols.dtype.element_ty)  # tl.zeros has no layout under Gluon
            vals = vals + (v,)
    return vals


@triton.jit
def _col_masks(iw0, W, k_ok, NJ: tl.constexpr):
    """Per column offset j < NJ, the [BLOCK_Q, BLOCK_K] mask of lanes whose input column
    ``iw0 + j`` is in the image and whose channel exists: the same for every step, so each load
    then only adds its row's test. Built once, it keeps each load's own ops to one: Triton's
    coalescing pass costs (memory ops) x (ops in the body), the bulk of a rows tile's compile."""
    oks = ()
    for j in tl.static_range(NJ):
        iw = iw0 + j
        oks = oks + (((iw >= 0) & (iw < W))[:, None] & k_ok,)
    return oks


@triton.jit
def _group_loads(x_cols, s_xc, ih0, H, col_oks, s_xh, s_xw, CG: tl.constexpr, STRIDE_H: tl.constexpr,
                 NJ: tl.constexpr, COLS: tl.constexpr, S: tl.constexpr, STRIDE_W: tl.constexpr, DIL_W: tl.constexpr,
                 INT64: tl.constexpr):  # fmt: skip
    """``_step_loads`` for each of the group's CG input channels: entry (cc * STRIDE_H + i) * NJ + j."""
    vals = ()
    for cc in tl.static_range(CG):
        if INT64:
            base = x_cols + tl.cast(cc, tl.int64) * s_xc
        else:
            base = x_cols + cc * s_xc
        vals = vals + _step_loads(base, ih0, H, col_oks, s_xh, s_xw, STRIDE_H, NJ, COLS, S, STRIDE_W, DIL_W,
                                  INT64)  # fmt: skip
    return vals


# ================================================================ NCHW planes
# An NCHW input keeps each channel's H x W plane contiguous, so a depthwise layer is a stencil per
# plane: an output tile of rows x columns reads, for each tap, one shifted tile of its own plane,
# whose rows are contiguous runs of pixels (coalesced loads; the overlap between taps is served
# by L1). The NHWC kernels above need the input transposed first and the output transposed back,
# which doubles the memory traffic of a layer that is nothing but memory traffic.
@triton.jit
def depthwise_planes_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    H,
    W,
    K,
    P,
    Q,
    MULT,  # output channels per input channel (K = MULT * C)
    s_xn,
    s_xc,
    s_xh,
    s_xw,
    s_wk,
    s_wr,
    s_ws,
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
    tiles_q,  # column tiles per plane
    tiles_per_plane,
    k_blocks,
    R: tl.constexpr,
    S: tl.constexpr,
    BLOCK_C: tl.constexpr,  # output channels (planes) per program
    BLOCK_H: tl.constexpr,  # output rows per tile
    BLOCK_W: tl.constexpr,  # output columns per tile
    HAS_BIAS: tl.constexpr,
    ACT: tl.constexpr,
    ACC_F64: tl.constexpr,
    INT64: tl.constexpr,  # x or y spans 2**31 elements or more
):
    """``BLOCK_C`` output planes x a ``BLOCK_H`` x ``BLOCK_W`` tile of output pixels per program,
    accumulated over the R x S taps (unrolled) in fp32 (fp64 for fp64); bias and activation in
    the store. Any stride, padding, dilation, channel multiplier and strides of x and y."""
    acc_t = tl.float64 if ACC_F64 else tl.float32
    pid = tl.program_id(0)
    tile = pid % tiles_per_plane
    rest = pid // tiles_per_plane
    kb = rest % k_blocks
    n = rest // k_blocks
    if INT64:
        n = n.to(tl.int64)
    th = tile // tiles_q
    tw = tile - th * tiles_q
    kk = kb * BLOCK_C + tl.arange(0, BLOCK_C)
    k_ok = kk < K
    ci = kk // MULT
    pp = tl.arange(0, BLOCK_H * BLOCK_W)
    oh = th * BLOCK_H + pp // BLOCK_W
    ow = tw * BLOCK_W + pp % BLOCK_W
    o_ok = (oh < P) & (ow < Q)
    x_planes = x_ptr + n * s_xn + ci.to(n.dtype)[:, None] * s_xc
    acc = tl.zeros([BLOCK_C, BLOCK_H * BLOCK_W], dtype=acc_t)
    for r in tl.static_range(R):
        ih = oh * stride_h - pad_h + r * dil_h
        h_ok = o_ok & (ih >= 0) & (ih < H)
        for s in tl.static_range(S):
            iw = ow * stride_w - pad_w + s * dil_w
            ok = h_ok & (iw >= 0) & (iw < W)
            xv = tl.load(x_planes + (ih * s_xh + iw * s_xw)[None, :], mask=k_ok[:, None] & ok[None, :], other=0.0)
            wv = tl.load(w_ptr + kk * s_wk + r * s_wr + s * s_ws, mask=k_ok, other=0.0)
            acc += wv.to(acc_t)[:, None] * xv.to(acc_t)
    if HAS_BIAS:
        acc += tl.load(b_ptr + kk, mask=k_ok, other=0.0).to(acc_t)[:, None]
    acc = activation_epilogue(acc, ACT)
    y_off = n * s_yn + kk.to(n.dtype)[:, None] * s_yk + (oh * s_yp + ow * s_yq)[None, :]
    tl.store(y_ptr + y_off, acc.to(y_ptr.dtype.element_ty), mask=k_ok[:, None] & o_ok[None, :])
