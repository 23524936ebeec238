"""Weight gradient of 3x3, 5x5 and 7x7 depthwise layers (stride 1, dilation 1, no channel multiplier)
from a register window of dy rows: one channel and COLS consecutive output columns a thread.

``dw[c, 0, r, s] = sum over n, p, q of dy[n, c, p, q] * x[n, c, p - PAD_H + r, q - PAD_W + s]``

The tuner's third family for these layers (``backward.DepthwiseWgrad``, configs with
``window > 0``), written for ConvNeXt-T's 7x7 layers (C, H = W) = (96, 56), (192, 28), (384, 14),
(768, 7), from session 40's prototype (``tools/dw7_wgrad_proto.py``, commit b9f47c7). Compared with
``depthwise_wgrad.depthwise_wgrad_rows_kernel`` (2 channels and 2 columns a thread: 196 FFMA in
a 344-instruction loop, 213 registers, 2 programs of 4 warps per SM on sm_90):

* a program owns BLOCK_K channels, all Q output columns (QG column groups of COLS columns; the
  four ConvNeXt widths are 7 times a power of two, so COLS = 7 wastes no lane) and IMGS whole
  images; a thread owns ONE channel and the COLS consecutive columns of one group: tensors are
  [QG, BLOCK_K], one element a thread, and the per-thread column run is a tuple axis;
* step ih loads x row ih once, at the COLS + S - 1 column offsets the thread's columns meet (each
  value then serves every (r, s) tap that meets it from registers), and dy row ih + PAD_H once
  (COLS values), which enters a window of the R dy rows that x row ih meets (slot m = filter row
  m: dy row ih + PAD_H - m); per step and thread R*S*COLS = 343 FFMA for 2*COLS + S - 1 = 20
  loads and converts (7x7, COLS = 7);
* the walk covers x rows, not dy rows: no x load needs a row mask (rows outside the image are
  never visited; dy rows outside [0, P) are zero slots; only a row count that is not a multiple
  of UNROLL masks the rows of the last iteration), the x column masks are loop-invariant, lanes
  past the last channel read channel C - 1 instead of taking channel masks (which cost
  registers: a 7x7 tile of 40 channels in 32-channel blocks took 255 registers with them, 168
  without), and the channel and column strides are constexprs, so each load is base + immediate;
* the step loop is unrolled UNROLL times (R: the window then rotates by renaming, no register
  moves), and PREFETCH steps' raw inputs are loaded ahead;
* the R*S fp32 accumulators [QG, BLOCK_K] are summed over the column groups once at the end and
  stored per (image group, channel block) to a workspace laid out as
  ``depthwise_wgrad.wgrad_reduce_kernel`` reads it (CG = 1), which adds the image groups in a fixed
  order and writes dw in its dtype and strides: reproducible, no atomics;
* two entries: ``depthwise_wgrad_window_kernel`` (Triton's layouts; ~25 s to compile a 7x7 tile
  on the dev CPU, nearly all in the TTGIR passes) and ``depthwise_wgrad_window_kernel_gl`` (Gluon,
  the layout Triton's coalescing pass picks given explicitly: ~1.6 s, the same sm_90 loop), taken
  on the GPU for channel-contiguous tensors.

sm_90 (``tools/dw7_wgrad_sass.py --window C,H [--gluon]``, bf16, batch 64): 96 @56's form (8
column groups x 16 channels x 7 columns, 4 warps) takes 168 registers (3 programs per SM), no
spills, in both entries; its 7-step main loop is 2922 instructions of which 2401 FFMA and 140
LDG: 1.22 instructions per FFMA (the prototype's: 2936; the rows kernel: 1.76). 192 @28 and
384 @14 take 168 registers, 768 @7 142 (128-129 with 2 or 4 images a program), none spills.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents

from .._runtime import cdiv
from .depthwise import gl, gluon

#: filter sizes the window kernel is offered for (R == S): the R*S accumulators, the R*COLS dy
#: window and the COLS + S - 1 x values of a step must fit in registers (7x7: 168-178 on sm_90;
#: 3x3, MobileNetV2's stride-1 layers: 80-96 one step ahead, 123 two, tools/dw7_wgrad_sass.py --filter 3)
WINDOW_FILTERS = (3, 5, 7)


@triton.jit
def _raw_step(x_cols, dy_cols, ih, P, s_xh, s_yh, col_oks, dy_ok, XW: tl.constexpr, YW: tl.constexpr,
              PAD_H: tl.constexpr, NJ: tl.constexpr, COLS: tl.constexpr, X_MASK: tl.constexpr,
              DY_MASK: tl.constexpr, ROW_MASK: tl.constexpr, INT64: tl.constexpr, ih_hi):  # fmt: skip
    """Step ih's raw inputs (input dtype): NJ x values of row ih, then COLS dy values of row
    ih + PAD_H (zeros past P). ``col_oks`` / ``dy_ok``: loop-invariant [QG, 1] column masks;
    only the column offsets of X_MASK (the image's left / right edge) are masked. ROW_MASK: rows
    from ih_hi on read as zeros (else the caller keeps ih inside the image)."""
    pe = ih + PAD_H
    if INT64:
        x_row = x_cols + ih.to(tl.int64) * s_xh
        y_row = dy_cols + pe.to(tl.int64) * s_yh
    else:
        x_row = x_cols + ih * s_xh
        y_row = dy_cols + pe * s_yh
    vals = ()
    row_ok = ih < ih_hi
    for j in tl.static_range(NJ):
        if (X_MASK >> j) & 1:
            if ROW_MASK:
                vals = vals + (tl.load(x_row + j * XW, mask=col_oks[j] & row_ok, other=0.0),)
            else:
                vals = vals + (tl.load(x_row + j * XW, mask=col_oks[j], other=0.0),)
        else:
            if ROW_MASK:
                vals = vals + (tl.load(x_row + j * XW, mask=row_ok, other=0.0),)
            else:
                vals = vals + (tl.load(x_row + j * XW),)
    pe_ok = pe < P
    if ROW_MASK:
        pe_ok = pe_ok & row_ok
    for c in tl.static_range(COLS):
        if DY_MASK:
            vals = vals + (tl.load(y_row + c * YW, mask=dy_ok[c] & pe_ok, other=0.0),)
        else:
            vals = vals + (tl.load(y_row + c * YW, mask=pe_ok, other=0.0),)
    return vals


@triton.jit
def _step_fma(accs, win, xs, R: tl.constexpr, S: tl.constexpr, COLS: tl.constexpr):
    """accs[r * S + s] += sum over c of x[c + s] * (dy slot r, column c), columns in order."""
    out = ()
    for r in tl.static_range(R):
        for s in tl.static_range(S):
            v = accs[r * S + s]
            for c in tl.static_range(COLS):
                v = tl.fma(xs[c + s], win[r * COLS + c], v)
            out = out + (v,)
    return out


@triton.jit
def depthwise_wgrad_window_kernel(
    x_ptr,  # [N, C, H, W], any strides (channel stride 1, NHWC, is the fast layout)
    dy_ptr,  # [N, C, P, Q], any strides
    ws_ptr,  # [parts, k_blocks, R*S, BLOCK_K] fp32 partial sums, part = image group (program axis 1)
    N,
    H,
    W,
    P,
    Q,
    s_xn,  # x's image and row strides (elements)
    s_xh,
    s_yn,  # dy's image and row strides
    s_yh,
    C: tl.constexpr,  # channels (= groups: depthwise without multiplier)
    XC: tl.constexpr,  # x's channel and column strides: constexprs, so that each load is base + immediate
    XW: tl.constexpr,
    YC: tl.constexpr,  # dy's channel and column strides
    YW: tl.constexpr,
    R: tl.constexpr,
    S: tl.constexpr,
    PAD_H: tl.constexpr,  # top and left padding (0 <= PAD_H < R, 0 <= PAD_W < S); the bottom / right ones are in P, Q
    PAD_W: tl.constexpr,
    BLOCK_K: tl.constexpr,  # channels a program (one a thread)
    QG: tl.constexpr,  # column groups a program (QG * BLOCK_K = threads), QG * COLS >= Q
    COLS: tl.constexpr,  # consecutive output columns a thread
    IMGS: tl.constexpr,  # images a program
    UNROLL: tl.constexpr,  # steps per loop iteration (R: the dy window rotates without moves)
    PREFETCH: tl.constexpr,  # steps whose raw inputs are loaded ahead (0, 1, 2, ...)
    X_MASK: tl.constexpr,  # bit j set: column offset j falls outside the image for some group (a masked load)
    DY_MASK: tl.constexpr,  # the dy columns need masks (QG * COLS != Q)
    ROW_MASK: tl.constexpr,  # the x row count is not a multiple of UNROLL
    INT64: tl.constexpr,  # 64-bit offsets within an image (an image of x or dy spans 2**31 elements)
    LAYOUT: tl.constexpr = None,  # None: Triton's layouts; a Gluon [QG, BLOCK_K] layout from the Gluon entry
    PDL_TRIGGER: tl.constexpr = False,  # wgrad_reduce_kernel follows as a programmatic dependent launch
):
    """Grid: (cdiv(C, BLOCK_K) channel blocks, cdiv(N, IMGS) image groups). Program (kb, g) adds
    the products of images [g * IMGS, (g + 1) * IMGS) for channels [kb * BLOCK_K, ...) and stores
    its R*S sums [BLOCK_K] at ``ws[g, kb]`` (lanes past C: channel C - 1's again, never read)."""
    NJ: tl.constexpr = COLS + S - 1
    L: tl.constexpr = NJ + COLS  # raw inputs a step
    kb = tl.program_id(0)
    grp = tl.program_id(1)
    if LAYOUT is None:
        qg = tl.arange(0, QG)
        kk = tl.arange(0, BLOCK_K)
    else:
        qg = gl.arange(0, QG, layout=gl.SliceLayout(1, LAYOUT))
        kk = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, LAYOUT))
    k = kb * BLOCK_K + kk
    if C % BLOCK_K != 0:
        # lanes past the last channel read channel C - 1 (their sums are never read back): no
        # load needs a channel mask
        k = tl.minimum(k, C - 1)
    q0 = qg * COLS  # first output column of each group
    iw0 = q0 - PAD_W
    col_oks = ()  # [QG, 1]: the loads broadcast them over the channels
    for j in tl.static_range(NJ):
        iw = iw0 + j
        col_oks = col_oks + (((iw >= 0) & (iw < W))[:, None],)
    dy_ok = ()
    for c in tl.static_range(COLS):
        dy_ok = dy_ok + (((q0 + c) < Q)[:, None],)
    if INT64:
        x_cols0 = x_ptr + (iw0.to(tl.int64) * XW)[:, None] + (k.to(tl.int64) * XC)[None, :]
        dy_cols0 = dy_ptr + (q0.to(tl.int64) * YW)[:, None] + (k.to(tl.int64) * YC)[None, :]
    else:
        x_cols0 = x_ptr + (iw0 * XW)[:, None] + (k * XC)[None, :]
        dy_cols0 = dy_ptr + (q0 * YW)[:, None] + (k * YC)[None, :]
    if LAYOUT is None:
        zero = tl.zeros((QG, BLOCK_K), dtype=tl.float32)
    else:
        zero = gl.zeros((QG, BLOCK_K), gl.float32, LAYOUT)
    accs = (zero,) * (R * S)
    # x rows that meet a dy row: ih = p - PAD_H + r in [0, H) for p in [0, P), r in [0, R); at
    # least one, as PAD_H < R
    ih_lo = 0
    ih_hi = tl.minimum(H, P - 1 - PAD_H + R)
    for i in range(IMGS):
        n = grp * IMGS + i
        if n < N:
            x_cols = x_cols0 + n.to(tl.int64) * s_xn
            dy_cols = dy_cols0 + n.to(tl.int64) * s_yn
            # the dy window of the step before ih_lo: slot m holds dy row ih_lo - 1 + PAD_H - m
            # (slot R - 1, dropped by the first step, is a zero placeholder)
            win = ()
            for m in tl.static_range(R - 1):
                pm = ih_lo - 1 + PAD_H - m
                ok = (pm >= 0) & (pm < P)
                if INT64:
                    y_row = dy_cols + pm.to(tl.int64) * s_yh
                else:
                    y_row = dy_cols + pm * s_yh
                row = ()
                for c in tl.static_range(COLS):
                    if DY_MASK:
                        v = tl.load(y_row + c * YW, mask=dy_ok[c] & ok, other=0.0)
                    else:
                        v = tl.load(y_row + c * YW, mask=ok, other=0.0)
                    row = row + (v.to(tl.float32),)
                win = win + row
            win = win + (zero,) * COLS
            nxt = ()
            for d in tl.static_range(PREFETCH):
                if ROW_MASK:
                    ih_d = ih_lo + d
                else:
                    ih_d = tl.minimum(ih_lo + d, ih_hi - 1)
                nxt = nxt + _raw_step(x_cols, dy_cols, ih_d, P, s_xh, s_yh, col_oks, dy_ok, XW, YW, PAD_H, NJ, COLS,
                                      X_MASK, DY_MASK, ROW_MASK, INT64, ih_hi)  # fmt: skip
            for ih0 in range(ih_lo, ih_hi, UNROLL):
                for u in tl.static_range(UNROLL):
                    ih = ih0 + u
                    if PREFETCH > 0:
                        cur = nxt[:L]
                        if ROW_MASK:  # steps past the last row run, on zeros
                            ih_pf = ih + PREFETCH
                        else:  # a prefetch past the last row (never used) reloads row ih_hi - 1: no row mask
                            ih_pf = tl.minimum(ih + PREFETCH, ih_hi - 1)
                        nxt = nxt[L:] + _raw_step(x_cols, dy_cols, ih_pf, P, s_xh, s_yh, col_oks, dy_ok, XW, YW,
                                                  PAD_H, NJ, COLS, X_MASK, DY_MASK, ROW_MASK, INT64, ih_hi)  # fmt: skip
                    else:
                        cur = _raw_step(x_cols, dy_cols, ih, P, s_xh, s_yh, col_oks, dy_ok, XW, YW, PAD_H, NJ, COLS,
                                        X_MASK, DY_MASK, ROW_MASK, INT64, ih_hi)  # fmt: skip
                    xs = ()
                    for j in tl.static_range(NJ):
                        xs = xs + (cur[j].to(tl.float32),)
                    new = ()
                    for c in tl.static_range(COLS):
                        new = new + (cur[NJ + c].to(tl.float32),)
                    win = new + win[: (R - 1) * COLS]  # slot m <- slot m - 1; slot 0: dy row ih + PAD_H
                    accs = _step_fma(accs, win, xs, R, S, COLS)
    if PDL_TRIGGER:
        # the reduce may launch now and wait (gdc_wait) for this grid's stores; triggered here, not
        # first (an H100 lost 5-6 us a layer with the trigger first, session 48)
        gdc_launch_dependents()
    # wgrad_reduce_kernel's layout (CG = 1): split grp's row, channel block kb, tap t, lane
    ws = ws_ptr + (grp * tl.num_programs(0) + kb).to(tl.int64) * (R * S * BLOCK_K)
    for t in tl.static_range(R * S):
        tl.store(ws + t * BLOCK_K + kk, tl.sum(accs[t], axis=0))


if gluon is not None:

    @gluon.jit
    def depthwise_wgrad_window_kernel_gl(x_ptr, dy_ptr, ws_ptr, N, H, W, P, Q, s_xn, s_xh, s_yn, s_yh,
                                         C: gl.constexpr, XC: gl.constexpr, XW: gl.constexpr, YC: gl.constexpr,
                                         YW: gl.constexpr, R: gl.constexpr, S: gl.constexpr, PAD_H: gl.constexpr,
                                         PAD_W: gl.constexpr, BLOCK_K: gl.constexpr, QG: gl.constexpr,
                                         COLS: gl.constexpr, IMGS: gl.constexpr, UNROLL: gl.constexpr,
                                         PREFETCH: gl.constexpr, X_MASK: gl.constexpr, DY_MASK: gl.constexpr,
                                         ROW_MASK: gl.constexpr, INT64: gl.constexpr, TPW_Q: gl.constexpr,
                                         TPW_K: gl.constexpr, WPC_Q: gl.constexpr, WPC_K: gl.constexpr,
                                         PDL_TRIGGER: gl.constexpr = False):  # fmt: skip
        # depthwise_wgrad_window_kernel with its [QG, BLOCK_K] tensors laid out explicitly (one
        # element a thread, channels fastest: the layout Triton's coalescing pass picks for
        # channel-contiguous tensors), compiled as Gluon, which skips that pass: most of the Triton
        # entry's ~25 s compile of a 7x7 tile
        depthwise_wgrad_window_kernel(x_ptr, dy_ptr, ws_ptr, N, H, W, P, Q, s_xn, s_xh, s_yn, s_yh, C, XC, XW, YC, YW,
                                      R, S, PAD_H, PAD_W, BLOCK_K, QG, COLS, IMGS, UNROLL, PREFETCH, X_MASK, DY_MASK,
                                      ROW_MASK, INT64,
                                      gl.BlockedLayout([1, 1], [TPW_Q, TPW_K], [WPC_Q, WPC_K], [1, 0]), PDL_TRIGGER)  # fmt: skip

else:  # pragma: no cover
    depthwise_wgrad_window_kernel_gl = None


def pick(q: int, warps: int = 4) -> tuple[int, int, int]:
    """``(COLS, QG, BLOCK_K)`` for ``q`` output columns and ``warps`` warps: COLS in 4..7 (at most
    ``q``) wasting the fewest columns of ``QG * COLS`` (ties: more columns, more reuse of each x
    value; 7 for ConvNeXt's 56, 28, 14 and 7), QG column groups (a power of two covering ``q``, at
    most the thread count) and BLOCK_K = threads / QG channels, one a thread."""
    threads = 32 * warps

    def groups(c: int) -> int:
        return min(triton.next_power_of_2(cdiv(q, c)), threads)

    cols = min(range(min(4, q), min(7, q) + 1), key=lambda c: (groups(c) * c - q if groups(c) * c >= q else q, -c))
    qg = groups(cols)
    return cols, qg, max(1, threads // qg)


def gluon_layout(qg: int, bk: int, warps: int) -> dict[str, int]:
    """The Gluon entry's layout constexprs over a [QG, BLOCK_K] tile of exactly ``32 * warps``
    elements: one a thread, channels on lanes first, then warps."""
    tpw_k = min(bk, 32)
    wpc_k = max(1, min(bk // tpw_k, warps))
    return {"TPW_Q": 32 // tpw_k, "TPW_K": tpw_k, "WPC_Q": warps // wpc_k, "WPC_K": wpc_k}


def window_constexprs(shape: tuple[int, int, int, int, int], strides: tuple[int, int, int, int],
                      filt: tuple[int, int, int, int], qg: int, bk: int, cols: int, imgs: int, unroll: int,
                      prefetch: int, int64: bool) -> dict:  # fmt: skip
    """The kernel's constexprs (its layout ones aside) for ``shape`` = (C, H, W, P, Q),
    ``strides`` = x's channel and column strides then dy's, ``filt`` = (R, S, top padding, left
    padding), a [qg, bk] tile of ``cols`` columns a thread, ``imgs`` images a program, the step
    loop unrolled ``unroll`` times and ``prefetch`` steps loaded ahead."""
    c, h, w, p, q = shape
    r, s, pad_h, pad_w = filt
    if not (0 <= pad_h < r and 0 <= pad_w < s):
        raise ValueError(f"window kernel: padding ({pad_h}, {pad_w}) must be in [0, R) x [0, S) for a {r}x{s} filter")
    if cols < 1 or qg * cols < q:
        raise ValueError(f"window kernel: {qg} column groups of {cols} columns do not cover Q = {q}")
    nj = cols + s - 1
    # column offset j of group g reads x column g * cols - pad_w + j: outside [0, W) for some group?
    x_mask = sum(1 << j for j in range(nj) if any(not (0 <= g * cols - pad_w + j < w) for g in range(qg)))
    ih_hi = min(h, p - 1 - pad_h + r)
    return dict(C=c, XC=strides[0], XW=strides[1], YC=strides[2], YW=strides[3], R=r, S=s, PAD_H=pad_h,
                PAD_W=pad_w, BLOCK_K=bk, QG=qg, COLS=cols, IMGS=imgs, UNROLL=unroll, PREFETCH=prefetch,
                X_MASK=x_mask, DY_MASK=qg * cols != q, ROW_MASK=ih_hi % unroll != 0,
                INT64=int64)  # fmt: skip
