#!/usr/bin/env python3
"""Prototype: depthwise weight gradient (stride 1, dilation 1, NHWC) that walks x rows with a
register window of dy rows, one channel and COLS consecutive output columns per thread.

    dw[c, r, s] = sum over n, p, q of dy[n, p, q, c] * x[n, p - PAD_H + r, q - PAD_W + s, c]

Written for ConvNeXt-T's 7x7 depthwise layers (C, H = W) = (96, 56), (192, 28), (384, 14),
(768, 7) at batch 64, bf16, channels_last. Standalone (not wired into convgemm): the kernel
``dw7_wgrad_kernel``, the ordered reduce ``dw7_reduce_kernel`` and the launcher ``dw7_wgrad``.

Design (compare ``convgemm.conv.depthwise_wgrad.depthwise_wgrad_rows_kernel``, the tuner's pick
on these layers: 2 channels and 2 columns a thread, 196 FFMA in a 344-instruction loop, 213
registers, 2 programs of 4 warps per SM):

* a program owns BLOCK_K channels, all Q output columns (QG column groups of COLS columns; the
  four ConvNeXt widths are multiples of 7, so COLS = 7 wastes no lane) and IMGS whole images;
  a thread owns ONE channel (k) and COLS consecutive columns of one group: tensors are
  [QG, BLOCK_K], one element a thread, and the per-thread column run is a tuple axis;
* step ih loads x row ih once, at the COLS + S - 1 column offsets the thread's columns meet
  (each loaded x value is then used from registers by every (r, s) tap that meets it: up to
  R*S = 49 FMAs a value), and dy row ih + PAD_H once (COLS values), which enters a window of the
  R dy rows that x row ih meets (slot m = filter row r: dy row ih + PAD_H - m);
  so per step and thread: R*S*COLS = 343 FFMA for COLS + S - 1 + COLS = 20 loads and converts;
* the walk covers x rows, not dy rows, so no x load has a row mask (rows outside the image are
  never visited; dy rows outside [0, P) are zero slots), x column masks are loop-invariant, and
  the channel stride is a constexpr: each load is base + immediate offset;
* the step loop is unrolled UNROLL times (UNROLL = R: the window then rotates by renaming, no
  register moves; H = 56/28/14/7 are multiples of 7), and PREFETCH steps' raw inputs are loaded
  ahead (registers: about 49 acc + R*COLS window + COLS + S - 1 x + PREFETCH * 20 raw);
* accumulators: R*S fp32 tensors [QG, BLOCK_K], summed over QG once at the end and stored per
  (image group) to a workspace, which ``dw7_reduce_kernel`` adds in a fixed order (reproducible,
  no atomics);
* two entries: ``dw7_wgrad_kernel`` (Triton's layouts; ~25 s to compile a 7x7 tile, nearly all
  in the TTGIR passes) and ``dw7_wgrad_kernel_gl`` (Gluon, the same layout given: 1.6 s, the same
  sm_90 loop), the launcher's default on a GPU.

sm_90 (``python tools/dw7_wgrad_sass.py --proto 96,56 --gluon``), 96 @56's form (8 x 16 x 7
columns, 4 warps): 168 registers (3 programs per SM), no spills, main loop (7 steps) 2936
instructions of which 2401 FFMA and 140 LDG: per output pixel-channel 49 FFMA, 2.86 loads,
59.9 instructions (1.22 per FFMA; the rows kernel: 1.76 at 213 registers, 2 programs per SM).
(192 @28's form takes 178 registers: ``maxnreg=168`` keeps 3 programs per SM for 4 spill
instructions in the loop.)

Self-check (CPU, Triton interpreter): ``TRITON_INTERPRET=1 python tools/dw7_wgrad_proto.py``
compares with torch.nn.grad.conv2d_weight in float64 on small shapes, fp32 / fp16 (and bf16)
inputs; on a GPU (``python tools/dw7_wgrad_proto.py``) the same for both entries, plus two
ConvNeXt layers at batch 2. Timing: ``tools/dw7_wgrad_probe.py``.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

try:  # Gluon (Triton 3.6): the same kernel with its layout given, compiled without the coalescing pass
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
except ImportError:  # pragma: no cover
    gluon = gl = None


@triton.jit
def _raw_step(x_cols, dy_cols, ih, P, s_xh, s_yh, col_oks, dy_ok,
              C: tl.constexpr, PAD_H: tl.constexpr, NJ: tl.constexpr, COLS: tl.constexpr,
              X_MASK: tl.constexpr, DY_MASK: tl.constexpr, ROW_MASK: tl.constexpr, ih_hi):  # fmt: skip
    """Step ih's raw inputs (input dtype): NJ x values of row ih, then COLS dy values of row
    ih + PAD_H (zeros past P). ``col_oks`` / ``dy_ok``: loop-invariant column x channel masks;
    only the column offsets of X_MASK (the image's left / right edge) are masked. ROW_MASK: rows
    past ih_hi read as zeros (else the caller keeps ih inside the image)."""
    x_row = x_cols + ih * s_xh
    pe = ih + PAD_H
    vals = ()
    row_ok = ih < ih_hi
    for j in tl.static_range(NJ):
        if (X_MASK >> j) & 1:
            if ROW_MASK:
                vals = vals + (tl.load(x_row + j * C, mask=col_oks[j] & row_ok, other=0.0),)
            else:
                vals = vals + (tl.load(x_row + j * C, mask=col_oks[j], other=0.0),)
        else:
            if ROW_MASK:
                vals = vals + (tl.load(x_row + j * C, mask=row_ok, other=0.0),)
            else:
                vals = vals + (tl.load(x_row + j * C),)
    y_row = dy_cols + pe * s_yh
    pe_ok = pe < P
    if ROW_MASK:
        pe_ok = pe_ok & row_ok
    for c in tl.static_range(COLS):
        if DY_MASK:
            vals = vals + (tl.load(y_row + c * C, mask=dy_ok[c] & pe_ok, other=0.0),)
        else:
            vals = vals + (tl.load(y_row + c * C, mask=pe_ok, other=0.0),)
    return vals


@triton.jit
def _l2_prefetch(x_cols, dy_cols, ih, H, P, s_xh, s_yh, pf_is_x, pf_xoff, pf_yoff, PAD_H: tl.constexpr):
    """One prefetch.global.L2 a thread: the 128-byte lines of x row ih and dy row ih + PAD_H that
    the program reads (clamped into the image), so that the step's loads meet L2, not DRAM."""
    ihc = tl.minimum(ih, H - 1)
    pec = tl.minimum(ih + PAD_H, P - 1)
    addr = tl.where(pf_is_x, x_cols + ihc * s_xh + pf_xoff, dy_cols + pec * s_yh + pf_yoff)
    tl.inline_asm_elementwise(
        "prefetch.global.L2 [$1];\n\tmov.u32 $0, 0;", "=r,l", [addr], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def _step_fma(accs, win, xs, R: tl.constexpr, S: tl.constexpr, COLS: tl.constexpr):
    """accs[r * S + s] += sum over c of x[c + s] * dy slot r column c."""
    out = ()
    for r in tl.static_range(R):
        for s in tl.static_range(S):
            v = accs[r * S + s]
            for c in tl.static_range(COLS):
                v = tl.fma(xs[c + s], win[r * COLS + c], v)
            out = out + (v,)
    return out


@triton.jit
def dw7_wgrad_kernel(
    x_ptr,  # [N, H, W, C] contiguous (an NCHW-shaped channels_last tensor)
    dy_ptr,  # [N, P, Q, C] contiguous
    ws_ptr,  # [parts, R * S, C] fp32 partial sums, part = image group (program axis 1)
    N,
    H,
    W,
    P,
    Q,
    C: tl.constexpr,  # channels: also the column stride of x and dy (immediate load offsets)
    R: tl.constexpr,
    S: tl.constexpr,
    PAD_H: tl.constexpr,
    PAD_W: tl.constexpr,
    BLOCK_K: tl.constexpr,  # channels a program (one a thread)
    QG: tl.constexpr,  # column groups a program (QG * BLOCK_K = threads)
    COLS: tl.constexpr,  # consecutive output columns a thread
    IMGS: tl.constexpr,  # images a program
    UNROLL: tl.constexpr,  # steps per loop iteration (R: the dy window rotates without moves)
    PREFETCH: tl.constexpr,  # steps whose raw inputs are loaded ahead (0, 1, 2)
    X_MASK: tl.constexpr,  # bit j set: column offset j may fall outside the image for some group
    DY_MASK: tl.constexpr,  # the dy columns / channels need masks (Q % (QG*COLS) or C % BLOCK_K)
    ROW_MASK: tl.constexpr,  # the x row count is not a multiple of UNROLL
    PF_L2: tl.constexpr = 0,  # > 0: each step prefetches to L2 the x / dy rows PF_L2 steps ahead (GPU only)
    LPC: tl.constexpr = 1,  # 128-byte lines per column of BLOCK_K channels (for PF_L2)
    LAYOUT: tl.constexpr = None,  # None: Triton's layouts; a Gluon [QG, BLOCK_K] layout from dw7_wgrad_kernel_gl
):
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
    k_ok = (k < C)[None, :]
    q0 = qg * COLS  # first output column of each group
    iw0 = q0 - PAD_W
    col_oks = ()
    for j in tl.static_range(NJ):
        iw = iw0 + j
        col_oks = col_oks + (((iw >= 0) & (iw < W))[:, None] & k_ok,)
    dy_ok = ()
    for c in tl.static_range(COLS):
        dy_ok = dy_ok + (((q0 + c) < Q)[:, None] & k_ok,)
    s_xh = W * C
    s_yh = Q * C
    x_cols0 = x_ptr + (iw0 * C)[:, None] + k[None, :]
    dy_cols0 = dy_ptr + (q0 * C)[:, None] + k[None, :]
    if LAYOUT is None:
        zero = tl.zeros((QG, BLOCK_K), dtype=tl.float32)
    else:
        zero = gl.zeros((QG, BLOCK_K), gl.float32, LAYOUT)
    accs = (zero,) * (R * S)
    if PF_L2 > 0:
        # thread t prefetches line t % LPC of column t // LPC of the program's x row segment
        # (QG * COLS + S - 1 columns from iw = -PAD_W), then of its dy row (columns after those)
        EPL: tl.constexpr = 128 * 8 // x_ptr.dtype.element_ty.primitive_bitwidth  # elements a line
        NJX: tl.constexpr = QG * COLS + S - 1
        tid = qg[:, None] * BLOCK_K + kk[None, :]
        col = tid // LPC
        line = (tid % LPC) * EPL
        pf_is_x = col < NJX
        xc = tl.minimum(tl.maximum(col - PAD_W, 0), W - 1)
        yc = tl.minimum(tl.maximum(col - NJX, 0), Q - 1)
        # offsets from x_cols / dy_cols (which point at column iw0 / q0 of each group, channel k)
        pf_xoff = (xc - iw0[:, None]) * C + line - kk[None, :]
        pf_yoff = (yc - q0[:, None]) * C + line - kk[None, :]
    # x rows that meet a dy row: ih = p - PAD_H + r in [0, H) for p in [0, P), r in [0, R)
    ih_lo = 0  # PAD_H >= 0
    ih_hi = tl.minimum(H, P - 1 - PAD_H + R)
    for i in range(IMGS):
        n = grp * IMGS + i
        if n < N:
            x_cols = x_cols0 + n.to(tl.int64) * H * s_xh
            dy_cols = dy_cols0 + n.to(tl.int64) * P * s_yh
            # the dy window of the step before ih_lo: slot m holds dy row ih_lo - 1 + PAD_H - m
            # (slot R - 1, dropped by the first step, is a zero placeholder)
            win = ()
            for m in tl.static_range(R - 1):
                pm = ih_lo - 1 + PAD_H - m
                ok = (pm >= 0) & (pm < P)
                row = ()
                for c in tl.static_range(COLS):
                    if DY_MASK:
                        v = tl.load(dy_cols + pm * s_yh + c * C, mask=dy_ok[c] & ok, other=0.0)
                    else:
                        v = tl.load(dy_cols + pm * s_yh + c * C, mask=ok, other=0.0)
                    row = row + (v.to(tl.float32),)
                win = win + row
            win = win + (zero,) * COLS
            nxt = ()
            for d in tl.static_range(PREFETCH):
                if ROW_MASK:
                    ih_d = ih_lo + d
                else:
                    ih_d = tl.minimum(ih_lo + d, ih_hi - 1)
                nxt = nxt + _raw_step(x_cols, dy_cols, ih_d, P, s_xh, s_yh, col_oks, dy_ok, C, PAD_H, NJ, COLS,
                                      X_MASK, DY_MASK, ROW_MASK, ih_hi)  # fmt: skip
            for ih0 in range(ih_lo, ih_hi, UNROLL):
                for u in tl.static_range(UNROLL):
                    ih = ih0 + u
                    if PF_L2 > 0:
                        _l2_prefetch(x_cols, dy_cols, ih + PF_L2, H, P, s_xh, s_yh, pf_is_x, pf_xoff, pf_yoff, PAD_H)
                    if PREFETCH > 0:
                        cur = nxt[:L]
                        if ROW_MASK:  # steps past the last row run, on zeros
                            ih_pf = ih + PREFETCH
                        else:  # a prefetch past the last row (never used) reloads row ih_hi - 1: no row mask
                            ih_pf = tl.minimum(ih + PREFETCH, ih_hi - 1)
                        nxt = nxt[L:] + _raw_step(x_cols, dy_cols, ih_pf, P, s_xh, s_yh, col_oks, dy_ok, C,
                                                  PAD_H, NJ, COLS, X_MASK, DY_MASK, ROW_MASK, ih_hi)  # fmt: skip
                    else:
                        cur = _raw_step(x_cols, dy_cols, ih, P, s_xh, s_yh, col_oks, dy_ok, C, PAD_H, NJ, COLS,
                                        X_MASK, DY_MASK, ROW_MASK, ih_hi)  # fmt: skip
                    xs = ()
                    for j in tl.static_range(NJ):
                        xs = xs + (cur[j].to(tl.float32),)
                    new = ()
                    for c in tl.static_range(COLS):
                        new = new + (cur[NJ + c].to(tl.float32),)
                    win = new + win[: (R - 1) * COLS]  # slot m <- slot m - 1; slot 0: dy row ih + PAD_H
                    accs = _step_fma(accs, win, xs, R, S, COLS)
    ws = ws_ptr + grp.to(tl.int64) * (R * S * C)
    for t in tl.static_range(R * S):
        tl.store(ws + t * C + k, tl.sum(accs[t], axis=0), mask=k < C)


if gluon is not None:

    @gluon.jit
    def dw7_wgrad_kernel_gl(x_ptr, dy_ptr, ws_ptr, N, H, W, P, Q, C: gl.constexpr, R: gl.constexpr, S: gl.constexpr,
                            PAD_H: gl.constexpr, PAD_W: gl.constexpr, BLOCK_K: gl.constexpr, QG: gl.constexpr,
                            COLS: gl.constexpr, IMGS: gl.constexpr, UNROLL: gl.constexpr, PREFETCH: gl.constexpr,
                            X_MASK: gl.constexpr, DY_MASK: gl.constexpr, ROW_MASK: gl.constexpr, PF_L2: gl.constexpr,
                            LPC: gl.constexpr, TPW_Q: gl.constexpr, TPW_K: gl.constexpr, WPC_Q: gl.constexpr,
                            WPC_K: gl.constexpr):  # fmt: skip
        # dw7_wgrad_kernel with its [QG, BLOCK_K] tensors laid out explicitly (one element a
        # thread, channels fastest: the layout Triton's coalescing pass picks), compiled as Gluon,
        # which skips that pass: most of the Triton entry's ~25 s compile of a 7x7 tile
        dw7_wgrad_kernel(x_ptr, dy_ptr, ws_ptr, N, H, W, P, Q, C, R, S, PAD_H, PAD_W, BLOCK_K, QG, COLS, IMGS, UNROLL,
                         PREFETCH, X_MASK, DY_MASK, ROW_MASK, PF_L2, LPC,
                         gl.BlockedLayout([1, 1], [TPW_Q, TPW_K], [WPC_Q, WPC_K], [1, 0]))  # fmt: skip

else:  # pragma: no cover
    dw7_wgrad_kernel_gl = None


def gluon_layout(qg: int, bk: int, num_warps: int) -> dict:
    """The Gluon entry's layout constexprs: one element a thread, channels on lanes first."""
    tpw_k = min(bk, 32)
    tpw_q = 32 // tpw_k
    wpc_k = max(1, min(bk // tpw_k, num_warps))
    return dict(TPW_Q=tpw_q, TPW_K=tpw_k, WPC_Q=num_warps // wpc_k, WPC_K=wpc_k)


@triton.jit
def dw7_reduce_kernel(
    ws_ptr, dw_ptr, parts, TOTAL, RS: tl.constexpr, C: tl.constexpr, BLOCK: tl.constexpr, SPLITS: tl.constexpr
):
    """dw[k, t] (contiguous [C, R*S]) = sum over parts of ws[part, t, k], in a fixed order: SPLITS
    parts a load (a [SPLITS, BLOCK] tile: all its loads in flight at once, not one part at a
    time), summed as a tree within a tile and in order across tiles."""
    e = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = e < TOTAL
    sp = tl.arange(0, SPLITS)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i0 in range(0, parts, SPLITS):
        m = ((i0 + sp) < parts)[:, None] & ok[None, :]
        part = tl.load(ws_ptr + ((i0 + sp) * TOTAL)[:, None] + e[None, :], mask=m, other=0.0)  # < 2**31
        acc += tl.sum(part, axis=0)
    t = e // C
    k = e - t * C
    tl.store(dw_ptr + k * RS + t, acc, mask=ok)


def pick(Q: int, C: int, cols: int | None = None, num_warps: int = 4) -> tuple[int, int, int]:
    """(COLS, QG, BLOCK_K): COLS columns a thread (7 where Q is a multiple of 7), QG column groups
    (a power of two covering Q), BLOCK_K = threads / QG channels."""
    if cols is None:
        cols = 7 if Q % 7 == 0 else min(7, Q)
    qg = triton.next_power_of_2(triton.cdiv(Q, cols))
    threads = 32 * num_warps
    qg = min(qg, threads)
    bk = max(1, threads // qg)
    return cols, qg, bk


def launch_params(x, dy, r=7, s=7, pad=3, cols=None, imgs=1, unroll=None, prefetch=1, num_warps=4, pf_l2=0):
    """The grid, the kernel's constexprs and run-time arguments (shared with the probe's compile)."""
    n, c, h, w = x.shape
    p, q = dy.shape[2], dy.shape[3]
    assert p == h + 2 * pad - r + 1 and q == w + 2 * pad - s + 1, "stride 1, dilation 1 only"
    cols, qg, bk = pick(q, c, cols, num_warps)
    assert qg * cols >= q, f"Q={q} needs more than {qg} groups of {cols} columns"
    nj = cols + s - 1
    # column offset j of group g reads x column g * cols - pad + j: outside [0, W) for some group?
    x_mask = sum(1 << j for j in range(nj) if any(not (0 <= g * cols - pad + j < w) for g in range(qg)))
    dy_mask = (qg * cols != q) or (c % bk != 0)
    if c % bk:  # lanes past the last channel: every x load masked (col_oks carry the channel test)
        x_mask = (1 << nj) - 1
    ih_lo = max(0, -pad)
    ih_hi = min(h, p - 1 - pad + r)
    if unroll is None:
        unroll = r
    row_mask = (ih_hi - ih_lo) % unroll != 0
    parts = triton.cdiv(n, imgs)
    grid = (triton.cdiv(c, bk), parts)
    const = dict(C=c, R=r, S=s, PAD_H=pad, PAD_W=pad, BLOCK_K=bk, QG=qg, COLS=cols, IMGS=imgs, UNROLL=unroll,
                 PREFETCH=prefetch, X_MASK=x_mask, DY_MASK=dy_mask, ROW_MASK=row_mask, PF_L2=pf_l2,
                 LPC=triton.cdiv(bk * x.element_size(), 128))  # fmt: skip
    return grid, const, parts


def dw7_wgrad(x, dy, r=7, s=7, pad=3, cols=None, imgs=1, unroll=None, prefetch=1, num_warps=4, pf_l2=0, ws=None,
              use_gluon=None, maxnreg=None, verbose=False, info=None, reduce=True):  # fmt: skip
    """dw [C, 1, R, S] fp32 of a depthwise, stride-1, dilation-1 convolution with padding ``pad``
    from x [N, C, H, W] and dy [N, C, P, Q], both channels_last (NHWC in memory).

    ``use_gluon`` (default: on a GPU): the Gluon entry. ``maxnreg``: ptxas's register cap.
    ``info``: a dict given the compiled kernel's registers and spills. ``reduce=False``: the main
    kernel only (returns the workspace of partial sums; for timing)."""
    assert x.is_contiguous(memory_format=torch.channels_last) and dy.is_contiguous(memory_format=torch.channels_last)
    n, c, h, w = x.shape
    if os.environ.get("TRITON_INTERPRET") == "1":
        pf_l2 = 0  # inline PTX does not run under the interpreter
    grid, const, parts = launch_params(x, dy, r, s, pad, cols, imgs, unroll, prefetch, num_warps, pf_l2)
    if verbose:
        print("dw7_wgrad grid", grid, const)
    if ws is None or ws.numel() < parts * r * s * c:
        ws = torch.empty(parts * r * s * c, dtype=torch.float32, device=x.device)
    dw = torch.empty(c, 1, r, s, dtype=torch.float32, device=x.device)
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    if use_gluon is None:
        use_gluon = dw7_wgrad_kernel_gl is not None and not interp
    opts = dict(num_warps=num_warps, num_stages=1)
    if maxnreg:
        opts["maxnreg"] = maxnreg
    args = (x, dy, ws, n, h, w, dy.shape[2], dy.shape[3])
    if use_gluon:
        # a layout must cover the [QG, BLOCK_K] tile exactly (one element a thread)
        assert const["QG"] * const["BLOCK_K"] == 32 * num_warps, "Gluon entry: QG * BLOCK_K must be the thread count"
        k = dw7_wgrad_kernel_gl[grid](*args, **const, **gluon_layout(const["QG"], const["BLOCK_K"], num_warps), **opts)
    else:
        k = dw7_wgrad_kernel[grid](*args, **const, **opts)
    if info is not None and k is not None and not interp:
        info.update(regs=getattr(k, "n_regs", None), spills=getattr(k, "n_spills", None))
    if not reduce:
        return ws
    total = r * s * c
    block = 64
    splits = min(64, triton.next_power_of_2(parts))
    dw7_reduce_kernel[(triton.cdiv(total, block),)](
        ws, dw, parts, total, RS=r * s, C=c, BLOCK=block, SPLITS=splits, num_warps=4
    )
    return dw


def _check(device: str = "cpu", use_gluon=None, big: bool = False) -> float:
    """Compares dw7_wgrad with torch.nn.grad.conv2d_weight in float64 on small shapes; returns the
    worst fp32/fp16 max relative error (max |got - ref| / max |ref|). ``big``: also two ConvNeXt
    layers at batch 2 (GPU)."""
    torch.manual_seed(0)
    cases = [
        # (N, C, H, W, R, S, pad, dtype, kwargs)
        (2, 16, 9, 9, 7, 7, 3, torch.float32, {}),
        (2, 16, 9, 9, 7, 7, 3, torch.float16, {}),
        (2, 32, 14, 14, 7, 7, 3, torch.float32, {}),
        (2, 32, 14, 14, 7, 7, 3, torch.float16, {}),
        (3, 32, 14, 14, 7, 7, 3, torch.float32, dict(imgs=2, prefetch=2)),
        (2, 32, 14, 14, 7, 7, 3, torch.float32, dict(prefetch=0, unroll=1)),
        (2, 16, 7, 7, 7, 7, 3, torch.float32, dict(cols=4)),
        (2, 24, 10, 11, 7, 7, 3, torch.float32, dict(cols=3, num_warps=2)),
        (2, 16, 9, 9, 3, 3, 1, torch.float32, {}),
        (2, 32, 14, 14, 7, 7, 3, torch.bfloat16, {}),
        (2, 16, 12, 12, 7, 7, 2, torch.float32, dict(prefetch=2)),  # P = H - 2, ROW_MASK (10 rows)
        (2, 128, 7, 7, 7, 7, 3, torch.float32, {}),  # the 768 @7 form: one column group, 128 channels
        (2, 32, 13, 13, 5, 5, 2, torch.float32, dict(prefetch=2, imgs=2)),
        (70, 16, 4, 4, 3, 3, 1, torch.float32, {}),  # 70 partial sums: two tiles of the reduce
    ]
    if big:
        cases += [(2, 96, 56, 56, 7, 7, 3, dt, {}) for dt in (torch.float32, torch.bfloat16)]
        cases += [(2, 768, 7, 7, 7, 7, 3, torch.float32, {}), (3, 192, 28, 28, 7, 7, 3, torch.float16, dict(pf_l2=3))]
    worst = 0.0
    for n, c, h, w, r, s, pad, dt, kw in cases:
        x = torch.randn(n, c, h, w, dtype=torch.float64).to(dt).to(memory_format=torch.channels_last)
        p, q = h + 2 * pad - r + 1, w + 2 * pad - s + 1
        dy = torch.randn(n, c, p, q, dtype=torch.float64).to(dt).to(memory_format=torch.channels_last)
        ref = torch.nn.grad.conv2d_weight(x.double(), (c, 1, r, s), dy.double(), padding=pad, groups=c)
        got = dw7_wgrad(x.to(device), dy.to(device), r, s, pad, use_gluon=use_gluon, **kw).cpu()
        err = ((got.double() - ref).abs().max() / ref.abs().max()).item()
        if dt != torch.bfloat16:
            worst = max(worst, err)
        print(f"N={n} C={c} H={h} W={w} {r}x{s} pad={pad} {str(dt)[6:]:8s} {kw}: max rel err {err:.2e}")
    print(f"worst fp32/fp16 max relative error: {worst:.2e}")
    assert worst < 1e-5, worst
    return worst


if __name__ == "__main__":
    if os.environ.get("TRITON_INTERPRET") == "1":
        _check("cpu")
    elif torch.cuda.is_available():
        for g in (True, False):
            print(f"GPU, {'Gluon' if g else 'Triton'} entry:")
            _check("cuda", use_gluon=g, big=True)
    else:
        print("no GPU: run with TRITON_INTERPRET=1 for the CPU self-check")
