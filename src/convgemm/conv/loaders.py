"""Convolution loaders and stores: GEMM coordinates -> NHWC / KRSC addresses.

These are the only place where convolution geometry meets the matmul blocks
(``convgemm.matmul.blocks``): each function follows the loader/store contract documented there.
The reduction index of the GEMM is ordered (r, s, c): for each filter tap ``(r, s)`` the loaders
walk the channels of one group in tiles of ``BLOCK_K``, so a K tile never straddles two taps and
``kt -> (tap, channel tile)`` is two scalar divisions per iteration.

Two families:

* ``gather_*`` (pointers): the "natural" GEMM view, M = output pixels, N = output channels. Any
  stride, padding, dilation, groups and strides of the input tensor; out-of-bounds taps are masked
  to zero. Triton pipelines these loads with ``cp.async`` when the channel stride is 1.
* ``tma_*`` (Hopper tensor descriptors): the *transposed* view, M = output channels, N = output
  pixels, so that the weight tile (a plain 2-D box, loaded by ``matmul.loaders.desc2d_*`` from the
  packed ``[K, R*S*Cp]`` weight) is wgmma's A operand and the activation tile
  (a 5-D box ``[TILE_N, TILE_H, TILE_W, 1, BLOCK_K]`` of the NHWC input viewed as
  ``[N, H, W, groups, C/groups]``) is its transposed B operand: both stay in shared memory. The copy
  engine zero-fills boxes that start at negative coordinates or run past an edge, which is exactly
  zero padding; output tiles are ``TILE_H x TILE_W`` rectangles of ``TILE_N`` images. Stride 1.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ..matmul.blocks import bias_epilogue, dot_acc


@triton.jit
def _tap_split(kt, c_tiles, S):
    """K-tile index -> (filter row r, filter column s, channel tile)."""
    tap = kt // c_tiles
    cb = kt - tap * c_tiles
    r = tap // S
    return r, tap - r * S, cb


# ================================================================ gather (natural view)
@triton.jit
def gather_im2col_init(desc, args, pid_m, g, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """A = im2col(x): rows are output pixels m = (n, oh, ow), columns (r, s, c) of group g.

    Shared by the per-tap load (``gather_im2col_load``) and the flat one (``gather_im2col_flat_load``).
    Addresses split into a per-row part (pixel origin, computed here once) and a per-column part
    (tap and channel), so the 2-D work per K tile is one add and the bounds masks.
    """
    (x_ptr, s_n, s_h, s_w, s_c, H, W, P, Q, M, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, R, S, Cg) = args
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    n = offs_m // (P * Q)
    pq = offs_m - n * (P * Q)
    oh = pq // Q
    ow = pq - oh * Q
    ih0 = oh * stride_h - pad_h
    iw0 = ow * stride_w - pad_w
    # int64: batch and group offsets pass 2**31 elements on large inputs
    row_off = n.to(tl.int64) * s_n + (g * Cg).to(tl.int64) * s_c + ih0.to(tl.int64) * s_h + iw0.to(tl.int64) * s_w
    return (x_ptr, row_off, ih0, iw0, offs_m < M, s_h, s_w, s_c, H, W, dil_h, dil_w, R, S, Cg)


@triton.jit
def gather_im2col_load(state, kt, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    (x_ptr, row_off, ih0, iw0, mask_m, s_h, s_w, s_c, H, W, dil_h, dil_w, R, S, Cg) = state
    r, s, cb = _tap_split(kt, tl.cdiv(Cg, BLOCK_K), S)
    ih = ih0 + r * dil_h
    iw = iw0 + s * dil_w
    c = cb * BLOCK_K + tl.arange(0, BLOCK_K)
    row_ok = mask_m & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
    tap_off = (r * dil_h).to(tl.int64) * s_h + (s * dil_w).to(tl.int64) * s_w
    ptrs = x_ptr + (row_off + tap_off)[:, None] + (c * s_c)[None, :]
    return tl.load(ptrs, mask=row_ok[:, None] & (c < Cg)[None, :], other=0.0)


@triton.jit
def gather_im2col_flat_load(state, kt, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """The flat reduction: K tile ``kt`` covers indices ``k = (r * S + s) * Cg + c`` across taps.

    For small C/groups (first layers: 1-4 channels) a per-tap tile would be mostly zeros; here every
    column of the tile is a real (r, s, c) triple, and for dilation 1 the (s, c) run of each filter
    row is contiguous in NHWC memory.
    """
    (x_ptr, row_off, ih0, iw0, mask_m, s_h, s_w, s_c, H, W, dil_h, dil_w, R, S, Cg) = state
    k = kt * BLOCK_K + tl.arange(0, BLOCK_K)
    r = k // (S * Cg)
    rem = k - r * (S * Cg)
    s = rem // Cg
    c = rem - s * Cg
    dr = r * dil_h
    ds = s * dil_w
    col_off = dr.to(tl.int64) * s_h + ds.to(tl.int64) * s_w + c * s_c
    ih = ih0[:, None] + dr[None, :]
    iw = iw0[:, None] + ds[None, :]
    ok = mask_m[:, None] & (k < R * S * Cg)[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
    return tl.load(x_ptr + row_off[:, None] + col_off[None, :], mask=ok, other=0.0)


@triton.jit
def gather_weight_init(desc, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """B = the weight ``w[K, C/g, R, S]`` read in place through its strides: rows of group g.

    Reading in place means no packing and nothing cached; a channels_last weight (channel stride
    1) gives vectorised loads.
    """
    (w_ptr, Kg, Cg, s_k, s_c, s_r, s_s, R, S) = args
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = (g * Kg + offs_n).to(tl.int64) * s_k
    return (w_ptr, rows, offs_n < Kg, s_c, s_r, s_s, R, S, Cg)


@triton.jit
def gather_weight_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    (w_ptr, rows, mask_n, s_c, s_r, s_s, R, S, Cg) = state
    r, s, cb = _tap_split(kt, tl.cdiv(Cg, BLOCK_K), S)
    c = cb * BLOCK_K + tl.arange(0, BLOCK_K)
    ptrs = w_ptr + rows[None, :] + (r * s_r + s * s_s + c * s_c)[:, None]
    return tl.load(ptrs, mask=mask_n[None, :] & (c < Cg)[:, None], other=0.0)


@triton.jit
def gather_weight_flat_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The weight tile for the flat reduction (see ``gather_im2col_flat_load``)."""
    (w_ptr, rows, mask_n, s_c, s_r, s_s, R, S, Cg) = state
    k = kt * BLOCK_K + tl.arange(0, BLOCK_K)
    r = k // (S * Cg)
    rem = k - r * (S * Cg)
    s = rem // Cg
    c = rem - s * Cg
    ptrs = w_ptr + rows[None, :] + (r * s_r + s * s_s + c * s_c)[:, None]
    return tl.load(ptrs, mask=mask_n[None, :] & (k < R * S * Cg)[:, None], other=0.0)


@triton.jit
def blockdiag_weight_init(desc, args, pid_n, sg, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """B for grouped convolutions with few channels per group, several groups per GEMM.

    ``GT`` consecutive groups form one super-group ``sg``: the A loader reads their ``GT * C/g``
    channels as one contiguous NHWC run, and this loader expands their weights into the
    block-diagonal ``[GT * C/g, GT * K/g]`` matrix (zeros where input and output channel belong to
    different groups), so tensor-core tiles are filled instead of padded 4- or 8-wide groups.
    """
    (w_ptr, Kg, Cg, GT, s_k, s_c, s_r, s_s, R, S) = args
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # output channel within the super-group
    k = sg * (GT * Kg) + offs_n
    return (w_ptr, k.to(tl.int64) * s_k, offs_n < GT * Kg, offs_n // Kg, s_c, s_r, s_s, S, Cg, GT)


@triton.jit
def blockdiag_weight_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    (w_ptr, rows, mask_n, group_n, s_c, s_r, s_s, S, Cg, GT) = state
    r, s, cb = _tap_split(kt, tl.cdiv(GT * Cg, BLOCK_K), S)
    cs = cb * BLOCK_K + tl.arange(0, BLOCK_K)  # input channel within the super-group
    group_c = cs // Cg
    c = cs - group_c * Cg  # channel within its group: the weight's second index
    ok = mask_n[None, :] & (cs < GT * Cg)[:, None] & (group_c[:, None] == group_n[None, :])
    ptrs = w_ptr + rows[None, :] + (r * s_r + s * s_s + c * s_c)[:, None]
    return tl.load(ptrs, mask=ok, other=0.0)


@triton.jit
def gather_output_store(desc, args, acc, pid_m, pid_n, g, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Write the [pixels, channels] tile to y with any strides (NCHW or NHWC)."""
    # an all-true column mask folds away at compile time
    gather_output_store_cols(args, acc, pid_m, pid_n, g, tl.full((BLOCK_N,), 1, tl.int1), BLOCK_M, BLOCK_N)


# ---------------------------------------------------------------- grouped: exact NaN / Inf
# A non-finite input times another group's zero weight is NaN, which the one-GEMM-per-super-group
# product adds to every group's outputs of the tile. Any non-finite input makes the tile's whole
# sum non-finite (0 * Inf and NaN both give NaN), so a finite tile is already exact: the main
# kernel's store only lists the tiles that are not (``blockdiag_output_store``), and a second,
# small launch (``blockdiag_fixup_kernel``) recomputes those one group at a time. The main kernel
# keeps the registers of a plain GEMM; the fix-up costs one launch that reads one integer.
@triton.jit
def fix_list_append_if_nonfinite(acc, fix_ptr, tile):
    """Append ``tile`` to the int32 fix-up list ``[count, tickets, tile ids ...]`` when ``acc``
    holds a NaN or Inf. v - v is 0 for a finite v and NaN for NaN or +-Inf, so the sum is NaN
    exactly then (never by overflow): one subtraction per element and a reduction."""
    z = tl.sum(acc - acc)
    # masked, not branched: a data-dependent ``if`` in a persistent kernel's flattened tile loop
    # fails Triton 3.6's loop fusion (TritonGPUFuseNestedLoops: "region control flow edge")
    bad = z != z
    slot = tl.atomic_add(fix_ptr, 1, mask=bad)
    tl.store(fix_ptr + 2 + slot, tile, mask=bad)


@triton.jit
def fix_list_release(fix_ptr):
    """End of a fix-up launch: each program takes a ticket, and the one with the last ticket
    zeroes the count and the tickets (every program has read the count by then), so the list is
    ready for the next launch on the stream."""
    ticket = tl.atomic_add(fix_ptr + 1, 1, sem="acq_rel", scope="gpu")
    if ticket == tl.num_programs(0) - 1:
        tl.store(fix_ptr, 0)
        tl.store(fix_ptr + 1, 0)


@triton.jit
def blockdiag_output_store(desc, args, acc, pid_m, pid_n, sg, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """``gather_output_store``, and a tile holding a NaN or Inf is appended to the fix-up list.

    ``args`` is ``gather_output_store``'s tuple followed by ``(fix_ptr, num_pid_m, num_pid_n)``;
    ``fix_ptr`` is int32 ``[count, tickets, tile ids ...]`` with count and tickets zero when the
    launch starts (``blockdiag_fixup_kernel`` leaves them so). The tile id is
    ``(sg * num_pid_m + pid_m) * num_pid_n + pid_n``.
    """
    (y_ptr, s_n, s_k, s_p, s_q, P, Q, M, Kg, fix_ptr, num_pid_m, num_pid_n) = args
    gather_output_store(desc, (y_ptr, s_n, s_k, s_p, s_q, P, Q, M, Kg), acc, pid_m, pid_n, sg, BLOCK_M, BLOCK_N)
    fix_list_append_if_nonfinite(acc, fix_ptr, (sg * num_pid_m + pid_m) * num_pid_n + pid_n)


@triton.jit
def blockdiag_group_product(
    a_state,
    b_state,
    gi,
    k_tiles,
    A_LOAD: tl.constexpr,
    B_LOAD: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
    F64: tl.constexpr,
):
    """The tile's product with every input channel outside group ``gi`` (of the super-group)
    masked to zero: exact for the columns of group ``gi`` whatever the other groups' inputs hold.
    Returns the [BLOCK_M, BLOCK_N] tile (fp32, or fp64 with ``F64``)."""
    (w_ptr, rows, mask_n, group_n, s_c, s_r, s_s, S, Cg, GT) = b_state
    c_tiles = tl.cdiv(GT * Cg, BLOCK_K)
    if F64:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(0, k_tiles):
        cb = kt % c_tiles
        in_group = (cb * BLOCK_K + tl.arange(0, BLOCK_K)) // Cg == gi
        a = A_LOAD(a_state, kt, BLOCK_M, BLOCK_K)
        a = tl.where(in_group[None, :], a, tl.zeros_like(a))
        b = B_LOAD(b_state, kt, BLOCK_N, BLOCK_K)
        if F64:
            acc = tl.dot(a, b, acc, input_precision="ieee", out_dtype=tl.float64)
        else:
            if UPCAST:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = dot_acc(a, b, acc, PRECISION)
    return acc


@triton.jit
def gather_output_store_cols(args, acc, pid_m, pid_n, g, cols_ok, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """``gather_output_store`` of only the tile's columns where ``cols_ok`` ([BLOCK_N]) holds."""
    (y_ptr, s_n, s_k, s_p, s_q, P, Q, M, Kg) = args
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n = offs_m // (P * Q)
    pq = offs_m - n * (P * Q)
    oh = pq // Q
    ow = pq - oh * Q
    rows = n.to(tl.int64) * s_n + oh.to(tl.int64) * s_p + ow.to(tl.int64) * s_q
    cols = (g * Kg + offs_n).to(tl.int64) * s_k
    mask = (offs_m < M)[:, None] & ((offs_n < Kg) & cols_ok)[None, :]
    tl.store(y_ptr + rows[:, None] + cols[None, :], acc.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def blockdiag_fixup_kernel(
    a_args,
    b_args,
    c_args,  # gather_output_store's
    bias_ptr,
    bias_len,  # bias entries per super-group (its output channels)
    fix_ptr,  # int32 [count, tickets, tile ids ...] as ``blockdiag_output_store`` left it
    num_pid_m,
    num_pid_n,
    k_tiles,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    A_INIT: tl.constexpr,
    A_LOAD: tl.constexpr,
    B_INIT: tl.constexpr,
    B_LOAD: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
    F64: tl.constexpr,
):
    """Recompute and overwrite the listed tiles of a block-diagonal grouped GEMM (the main
    launch's loaders and tiles; B's state is ``blockdiag_weight_init``'s): for each group of a
    tile's output channels, the product with the other groups' inputs masked out
    (``blockdiag_group_product``), plus bias, stored to that group's columns only. Grid:
    (programs,), any count; the programs share the list.

    With an empty list -- the common case -- each program reads one integer and takes a ticket;
    the program with the last ticket zeroes the count and the tickets (every program has read the
    count by then), so the buffer is ready for the next launch on the stream.
    """
    count = tl.load(fix_ptr)
    for i in range(tl.program_id(0), count, tl.num_programs(0)):
        tile = tl.load(fix_ptr + 2 + i)
        pid_n = tile % num_pid_n
        rest = tile // num_pid_n
        pid_m = rest % num_pid_m
        sg = rest // num_pid_m
        a_state = A_INIT(None, a_args, pid_m, sg, BLOCK_M, BLOCK_K)
        b_state = B_INIT(None, b_args, pid_n, sg, BLOCK_N, BLOCK_K)
        group_n = b_state[3]  # each column's group within the super-group
        mask_n = b_state[2]
        offs = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        # only the groups of the tile's columns; one group's product at a time (no second tile
        # held), each stored to its own columns
        g_lo = tl.min(group_n)
        g_hi = tl.max(tl.where(mask_n, group_n, g_lo)) + 1
        for gi in range(g_lo, g_hi):
            acc = blockdiag_group_product(
                a_state, b_state, gi, k_tiles, A_LOAD, B_LOAD, BLOCK_M, BLOCK_N, BLOCK_K, PRECISION, UPCAST, F64
            )
            acc = bias_epilogue(acc, bias_ptr, sg * bias_len + offs, offs < bias_len, HAS_BIAS, False)
            gather_output_store_cols(c_args, acc, pid_m, pid_n, sg, group_n == gi, BLOCK_M, BLOCK_N)
    fix_list_release(fix_ptr)


# ================================================================ TMA (transposed view)
@triton.jit
def _spatial_tile(pid, P, Q, TILE_N, TILE_H, TILE_W):
    """Tile index -> (first image, first output row, first output column) of a
    TILE_N x TILE_H x TILE_W block of output pixels. Small outputs (7x7, 14x14) use several
    images per tile so that tiles fit the output exactly instead of being mostly padding.

    The sides may be constexprs (the loaders' boxes: Triton specialises the call on them, the
    same SASS as with annotated parameters) or run-time values (the stores and the fix-up)."""
    tiles_w = tl.cdiv(Q, TILE_W)
    tiles_hw = tl.cdiv(P, TILE_H) * tiles_w
    nt = pid // tiles_hw
    rem = pid - nt * tiles_hw
    th = rem // tiles_w
    return nt * TILE_N, th * TILE_H, (rem - th * tiles_w) * TILE_W


@triton.jit
def tma_im2col_init(x_desc, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """B = im2col(x)^T for a TILE_N x TILE_H x TILE_W block of output pixels (stride 1); the
    tile shape is the descriptor's box ``[TILE_N, TILE_H, TILE_W, 1, BLOCK_K]``."""
    (P, Q, pad_h, pad_w, dil_h, dil_w, S, c_tiles) = args
    TILE_N: tl.constexpr = x_desc.block_shape[0]
    TILE_H: tl.constexpr = x_desc.block_shape[1]
    TILE_W: tl.constexpr = x_desc.block_shape[2]
    n, oh0, ow0 = _spatial_tile(pid_n, P, Q, TILE_N, TILE_H, TILE_W)
    return (x_desc, n, oh0 - pad_h, ow0 - pad_w, g, dil_h, dil_w, S, c_tiles)


@triton.jit
def tma_im2col_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    x_desc, n, ih0, iw0, g, dil_h, dil_w, S, c_tiles = state
    r, s, cb = _tap_split(kt, c_tiles, S)
    box = x_desc.load([n, ih0 + r * dil_h, iw0 + s * dil_w, g, cb * BLOCK_K])
    return box.reshape(BLOCK_N, BLOCK_K).T


@triton.jit
def tma_im2col_phase_init(x_desc, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """B = im2col(x)^T for a strided R x S kernel, read through the stride-phase view
    ``[N, H/sh, sh, W/sw, sw*C]`` (``conv.fprop.input_descriptor``); the box is
    ``[TILE_N, TILE_H, 1, TILE_W, BLOCK_K]``."""
    (P, Q, pad_h, pad_w, dil_h, dil_w, S, c_tiles, SH, SW, CG, C) = args
    TILE_N: tl.constexpr = x_desc.block_shape[0]
    TILE_H: tl.constexpr = x_desc.block_shape[1]
    TILE_W: tl.constexpr = x_desc.block_shape[3]
    n, oh0, ow0 = _spatial_tile(pid_n, P, Q, TILE_N, TILE_H, TILE_W)
    return (x_desc, n, oh0, ow0, g * CG, pad_h, pad_w, dil_h, dil_w, S, c_tiles, SH, SW, C)


@triton.jit
def tma_im2col_phase_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    x_desc, n, oh0, ow0, c0, pad_h, pad_w, dil_h, dil_w, S, c_tiles, SH, SW, C = state
    r, s, cb = _tap_split(kt, c_tiles, S)
    # tap offset o = r*dil - pad = a*SH + phase with 0 <= phase < SH (a floor division: o may be
    # negative; o + SH*pad >= 0)
    oh = r * dil_h - pad_h
    ah = (oh + SH * pad_h) // SH - pad_h
    ow = s * dil_w - pad_w
    aw = (ow + SW * pad_w) // SW - pad_w
    box = x_desc.load([n, oh0 + ah, oh - ah * SH, ow0 + aw, (ow - aw * SW) * C + c0 + cb * BLOCK_K])
    return box.reshape(BLOCK_N, BLOCK_K).T


@triton.jit
def tma_output_store(y_desc, args, acc, pid_m, pid_n, g, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Write the [channels, pixels] tile to NHWC y viewed as [N, P, Q, groups, K/groups].

    The descriptor clips what lies past P, Q or K/groups, so edge tiles need no masks.
    """
    (P, Q) = args
    TILE_N: tl.constexpr = y_desc.block_shape[0]
    TILE_H: tl.constexpr = y_desc.block_shape[1]
    TILE_W: tl.constexpr = y_desc.block_shape[2]
    n, oh0, ow0 = _spatial_tile(pid_n, P, Q, TILE_N, TILE_H, TILE_W)
    tile = acc.to(y_desc.dtype).T.reshape(TILE_N, TILE_H, TILE_W, 1, BLOCK_M)
    y_desc.store([n, oh0, ow0, g, pid_m * BLOCK_M], tile)


# ================================================================ natural view on TMA: pixels on M
# For layers with few output channels (K <= 64: heads, RGB outputs, the phase-stacked dgrad of a
# stem) the transposed view wastes most of a 64-row wgmma tile on M = K. Here M = output pixels
# (A = the NHWC box as [BLOCK_M pixels, BLOCK_K channels], K-major, as wgmma reads it from shared
# memory) and N = output channels (B = the KRSC weight, 16-64 wide).
@triton.jit
def tma_im2col_a_load(state, kt, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """``tma_im2col_load``'s box as the A operand (its state from ``tma_im2col_init``)."""
    x_desc, n, ih0, iw0, g, dil_h, dil_w, S, c_tiles = state
    r, s, cb = _tap_split(kt, c_tiles, S)
    box = x_desc.load([n, ih0 + r * dil_h, iw0 + s * dil_w, g, cb * BLOCK_K])
    return box.reshape(BLOCK_M, BLOCK_K)


@triton.jit
def tile_ptr_store(desc, args, acc, pid_m, pid_n, g, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Write the [pixels, channels] tile of a TILE_N x TILE_H x TILE_W pixel block to y with any
    strides (NHWC or NCHW, any channel count: no 16-byte rule as for a TMA store)."""
    (y_ptr, s_n, s_k, s_p, s_q, N, P, Q, K, TILE_N, TILE_H, TILE_W) = args
    n0, oh0, ow0 = _spatial_tile(pid_m, P, Q, TILE_N, TILE_H, TILE_W)
    i = tl.arange(0, BLOCK_M)
    n = n0 + i // (TILE_H * TILE_W)
    oh = oh0 + (i // TILE_W) % TILE_H
    ow = ow0 + i % TILE_W
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = n.to(tl.int64) * s_n + oh.to(tl.int64) * s_p + ow.to(tl.int64) * s_q
    mask = ((n < N) & (oh < P) & (ow < Q))[:, None] & (cols < K)[None, :]
    tl.store(y_ptr + rows[:, None] + (cols.to(tl.int64) * s_k)[None, :], acc.to(y_ptr.dtype.element_ty), mask=mask)


# ================================================================ NCHW input and output, on TMA
# The transposed view suits NCHW as it is: B = im2col(x)^T is [BLOCK_K channels, BLOCK_N
# pixels], and a box [1, BLOCK_K, TILE_H, TILE_W] of the NCHW input is that tile with the pixels
# contiguous (an N-major operand, which wgmma reads from shared memory for 16-bit types). The
# [BLOCK_M channels, BLOCK_N pixels] result is a box [1, BLOCK_M, TILE_H, TILE_W] of NCHW y. No
# transpose of x before the kernel or of y after it (``conv.fprop.ImplicitGemmTmaNchw``). A box's
# first column (the innermost coordinate) must be 16-byte aligned, so filter taps may shift the
# boxes by rows only: 1x1 and R x 1 filters without column padding.
@triton.jit
def tma_nchw_init(x_desc, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """B for a TILE_H x TILE_W block of one image's output pixels (stride 1, groups 1), read
    from the NCHW descriptor ``[N, C, H, W]`` with box ``[1, BLOCK_K, TILE_H, TILE_W]``."""
    (P, Q, pad_h, pad_w, dil_h, dil_w, S, c_tiles) = args
    TILE_H: tl.constexpr = x_desc.block_shape[2]
    TILE_W: tl.constexpr = x_desc.block_shape[3]
    n, oh0, ow0 = _spatial_tile(pid_n, P, Q, 1, TILE_H, TILE_W)
    return (x_desc, n, oh0 - pad_h, ow0 - pad_w, dil_h, dil_w, S, c_tiles)


@triton.jit
def tma_nchw_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    x_desc, n, ih0, iw0, dil_h, dil_w, S, c_tiles = state
    r, s, cb = _tap_split(kt, c_tiles, S)
    # channels past C and pixels outside the image are out of bounds: zeros, as padding is
    box = x_desc.load([n, cb * BLOCK_K, ih0 + r * dil_h, iw0 + s * dil_w])
    return box.reshape(BLOCK_K, BLOCK_N)


@triton.jit
def tma_nchw_store(y_desc, args, acc, pid_m, pid_n, g, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Write the [channels, pixels] tile to NCHW y ``[N, K, P, Q]`` (box ``[1, BLOCK_M, TILE_H,
    TILE_W]``); the descriptor clips what lies past K, P or Q."""
    (P, Q) = args
    TILE_H: tl.constexpr = y_desc.block_shape[2]
    TILE_W: tl.constexpr = y_desc.block_shape[3]
    n, oh0, ow0 = _spatial_tile(pid_n, P, Q, 1, TILE_H, TILE_W)
    y_desc.store([n, pid_m * BLOCK_M, oh0, ow0], acc.to(y_desc.dtype).reshape(1, BLOCK_M, TILE_H, TILE_W))


# ================================================================ NCHW planes by pointers
# The transposed view over an NCHW tensor whose planes cannot be TMA boxes (a 14 x 14 bf16 plane
# is 392 bytes, not a 16-byte multiple): a 1x1, stride-1 layer's output pixel p (of N*H*W, image
# by image) reads input pixel p, at (p // HW) * s_n + p % HW (planes dense), and channel c adds
# c * s_c. M = output channels (the weight, ``matmul.loaders.ptr_*``), N = pixels. ``VEC`` (a
# literal in each entry point below) promises that HW, the batch and channel strides and the
# base address are multiples of VEC elements: runs of VEC pixels then never cross an image and
# are aligned, and Triton may move each run as one vector (cp.async takes 4 bytes or more, so
# 16-bit planes need VEC >= 2 to be pipelined).
@triton.jit
def _plane_offsets(pid_n, HW, NHW, s_n, BLOCK_N: tl.constexpr, VEC: tl.constexpr):
    """This tile's pixel offsets into an NCHW tensor and their mask."""
    pix = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    img = pix // HW
    off = img.to(tl.int64) * s_n + (pix - img * HW)
    if VEC > 1:
        off = tl.max_contiguous(tl.multiple_of(off, VEC), VEC)
    return off, pix < NHW


@triton.jit
def _plane_init(x, args, pid_n, BLOCK_N: tl.constexpr, VEC: tl.constexpr):
    HW, NHW, s_n, s_c, C = args
    off, ok = _plane_offsets(pid_n, HW, NHW, s_n, BLOCK_N, VEC)
    return x, off, ok, s_c, C


@triton.jit
def _plane_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, VEC: tl.constexpr):
    x, off, ok, s_c, C = state
    c = kt * BLOCK_K + tl.arange(0, BLOCK_K)
    offs = (c.to(tl.int64) * s_c)[:, None] + off[None, :]
    if VEC > 1:
        offs = tl.max_contiguous(tl.multiple_of(offs, [1, VEC]), [1, VEC])
    return tl.load(x + offs, mask=(c < C)[:, None] & ok[None, :], other=0.0)


@triton.jit
def _plane_store(y, args, acc, pid_m, pid_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, VEC: tl.constexpr):
    HW, NHW, s_n, s_k, K = args
    off, ok = _plane_offsets(pid_n, HW, NHW, s_n, BLOCK_N, VEC)
    k = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs = (k.to(tl.int64) * s_k)[:, None] + off[None, :]
    if VEC > 1:
        offs = tl.max_contiguous(tl.multiple_of(offs, [1, VEC]), [1, VEC])
    tl.store(y + offs, acc.to(y.dtype.element_ty), mask=(k < K)[:, None] & ok[None, :])


# B for BLOCK_N consecutive pixels of N*H*W from the NCHW input (a pointer in the descriptor's
# slot), ``args = (HW, N*HW, s_n, s_c, C)``; the store writes the [channels, pixels] tile to NCHW
# y, ``args = (HW, N*HW, s_n, s_k, K)``. One entry point per vector width.
@triton.jit
def nchw_plane_init_v1(x, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    return _plane_init(x, args, pid_n, BLOCK_N, 1)


@triton.jit
def nchw_plane_load_v1(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    return _plane_load(state, kt, BLOCK_N, BLOCK_K, 1)


@triton.jit
def nchw_plane_store_v1(y, args, acc, pid_m, pid_n, g, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    _plane_store(y, args, acc, pid_m, pid_n, BLOCK_M, BLOCK_N, 1)


@triton.jit
def nchw_plane_init_v2(x, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    return _plane_init(x, args, pid_n, BLOCK_N, 2)


@triton.jit
def nchw_plane_load_v2(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    return _plane_load(state, kt, BLOCK_N, BLOCK_K, 2)


@triton.jit
def nchw_plane_store_v2(y, args, acc, pid_m, pid_n, g, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    _plane_store(y, args, acc, pid_m, pid_n, BLOCK_M, BLOCK_N, 2)


@triton.jit
def nchw_plane_init_v4(x, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    return _plane_init(x, args, pid_n, BLOCK_N, 4)


@triton.jit
def nchw_plane_load_v4(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    return _plane_load(state, kt, BLOCK_N, BLOCK_K, 4)


@triton.jit
def nchw_plane_store_v4(y, args, acc, pid_m, pid_n, g, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    _plane_store(y, args, acc, pid_m, pid_n, BLOCK_M, BLOCK_N, 4)


@triton.jit
def nchw_plane_init_v8(x, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    return _plane_init(x, args, pid_n, BLOCK_N, 8)


@triton.jit
def nchw_plane_load_v8(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    return _plane_load(state, kt, BLOCK_N, BLOCK_K, 8)


@triton.jit
def nchw_plane_store_v8(y, args, acc, pid_m, pid_n, g, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    _plane_store(y, args, acc, pid_m, pid_n, BLOCK_M, BLOCK_N, 8)


#: (init, load, store) by vector width
NCHW_PLANE_FNS = {
    1: (nchw_plane_init_v1, nchw_plane_load_v1, nchw_plane_store_v1),
    2: (nchw_plane_init_v2, nchw_plane_load_v2, nchw_plane_store_v2),
    4: (nchw_plane_init_v4, nchw_plane_load_v4, nchw_plane_store_v4),
    8: (nchw_plane_init_v8, nchw_plane_load_v8, nchw_plane_store_v8),
}


# ================================================================ dgrad on TMA, by stride phase
# The transposed view of the TMA forward: M = dx channels (A = the flipped weight ``[C, R*S*K]``,
# a 2-D box), N = the pixels of one stride phase of dx (B = boxes of NHWC dy shifted by the
# phase's taps), and the grid's batch axis is the phase. Along an axis (dilation 1), phase f
# gets taps r = r0 + j*stride with r0 = (f + pad) % stride, and tap j reads dy at offset o0 - j
# with o0 = (f + pad - r0) // stride. Every phase takes ceil(R / stride) K steps per axis, as the
# gather dgrad pads its tap tables; a phase with fewer taps loads boxes that lie wholly out of
# bounds for the rest (zeros: no memory traffic, no NaN from 0 * Inf). dx is stored through its
# own stride-phase view ``[N, H/sh, sh, W/sw, sw*C]`` (``conv.fprop.input_descriptor``).
@triton.jit
def _phase_first_tap(f, pad, R, SH):
    """Phase f's first tap, its number of taps, and the dy offset of the first tap."""
    r0 = (f + pad) % SH
    taps = tl.where(r0 < R, (R - r0 + SH - 1) // SH, 0)
    return r0, taps, (f + pad - r0) // SH


@triton.jit
def _phase_step(kt, k_per_tap, TW):
    """K-tile index -> (tap index along H, tap index along W, channel tile)."""
    t = kt // k_per_tap
    jh = t // TW
    return jh, t - jh * TW, kt - t * k_per_tap


@triton.jit
def _phase_of(batch, order):
    """Grid axis 1 index -> stride phase: ``order`` packs the phases 4 bits each, most tap-steps
    first, so the longest programs start first and the short ones fill the tail."""
    return ((order >> (4 * batch).to(tl.int64)) & 15).to(tl.int32)


@triton.jit
def tma_dgrad_w_init(w_desc, args, pid_m, batch, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    (R, S, SH, SW, pad_h, pad_w, K, k_per_tap, TW, order) = args
    phase = _phase_of(batch, order)
    fh = phase // SW
    r0, nh, _ = _phase_first_tap(fh, pad_h, R, SH)
    s0, nw, _ = _phase_first_tap(phase - fh * SW, pad_w, S, SW)
    return (w_desc, pid_m * BLOCK_M, r0, nh, s0, nw, R, S, SH, SW, K, k_per_tap, TW)


@triton.jit
def tma_dgrad_k_range(a_state, b_state, k_tiles):
    """``gemm_kernel``'s K_RANGE: this phase's own taps (nh x nw) times the channel tiles, so no
    phase multiplies the zero boxes of taps it lacks (3x3 stride 2: 9 tap-steps over the four
    phases instead of 4 x 4)."""
    nh, nw, k_per_tap = a_state[3], a_state[5], a_state[11]
    return 0, nh * nw * k_per_tap


@triton.jit
def tma_dgrad_w_load(state, kt, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    w_desc, m0, r0, nh, s0, nw, R, S, SH, SW, K, k_per_tap, TW = state
    # taps are numbered over this phase's own nh x nw grid (tma_dgrad_k_range bounds the loop)
    jh, jw, cb = _phase_step(kt, k_per_tap, tl.maximum(nw, 1))
    r = r0 + jh * SH
    s = s0 + jw * SW
    # tap (r, s) of w is tap (R-1-r, S-1-s) of the flipped weight; a missing tap reads the box
    # just past the last column
    col = tl.where((jh < nh) & (jw < nw), ((R - 1 - r) * S + (S - 1 - s)) * K + cb * BLOCK_K, R * S * K)
    return w_desc.load([m0, col])


@triton.jit
def tma_dgrad_dy_init(dy_desc, args, pid_n, batch, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    (HS, WS, R, S, SH, SW, pad_h, pad_w, k_per_tap, TW, order) = args
    phase = _phase_of(batch, order)
    TILE_N: tl.constexpr = dy_desc.block_shape[0]
    TILE_H: tl.constexpr = dy_desc.block_shape[1]
    TILE_W: tl.constexpr = dy_desc.block_shape[2]
    n, i0, j0 = _spatial_tile(pid_n, HS, WS, TILE_N, TILE_H, TILE_W)
    fh = phase // SW
    _, nh, oh = _phase_first_tap(fh, pad_h, R, SH)
    _, nw, ow = _phase_first_tap(phase - fh * SW, pad_w, S, SW)
    return (dy_desc, n, i0 + oh, j0 + ow, nh, nw, k_per_tap, TW)


@triton.jit
def tma_dgrad_dy_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    dy_desc, n, i0, j0, nh, nw, k_per_tap, TW = state
    jh, jw, cb = _phase_step(kt, k_per_tap, tl.maximum(nw, 1))
    row = tl.where((jh < nh) & (jw < nw), i0 - jh, -(1 << 24))  # a missing tap: far above dy
    box = dy_desc.load([n, row, j0 - jw, 0, cb * BLOCK_K])
    return box.reshape(BLOCK_N, BLOCK_K).T


@triton.jit
def tma_dgrad_dx_store(dx_desc, args, acc, pid_m, pid_n, batch, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Write the [channels, pixels] tile into dx's stride-phase view; the descriptor clips what
    lies past the phase's rows and columns."""
    (HS, WS, SW, C, order) = args
    phase = _phase_of(batch, order)
    TILE_N: tl.constexpr = dx_desc.block_shape[0]
    TILE_H: tl.constexpr = dx_desc.block_shape[1]
    TILE_W: tl.constexpr = dx_desc.block_shape[3]
    n, i0, j0 = _spatial_tile(pid_n, HS, WS, TILE_N, TILE_H, TILE_W)
    fh = phase // SW
    tile = acc.to(dx_desc.dtype).T.reshape(TILE_N, TILE_H, 1, TILE_W, BLOCK_M)
    dx_desc.store([n, i0, fh, j0, (phase - fh * SW) * C + pid_m * BLOCK_M], tile)


# ================================================================ dgrad (natural view)
# dx[n, c, h, w] = sum over (r, s, k) of dy[n, k, p, q] * w[k, c, r, s], where p * stride_h =
# h + pad_h - r * dil_h. GEMM: M = input pixels, N = C/g, K = (tap, K/g). With stride > 1 only
# some taps reach a given input pixel, and which ones depends only on the pixel's *phase*
# (h mod stride_h, w mod stride_w): one program handles pixels of one phase, and its K loop walks
# only that phase's taps, read from a host-built table of (r, dy-row offset) pairs (r = -1 pads a
# shorter list). No inserted zeros are materialised and no multiply-adds are spent on them.
@triton.jit
def _dgrad_phase(b, n_phases, phases_w, taps_h, taps_w, Th, Tw):
    """Grid axis 1 index -> (group, phase row, phase column, that phase's tap tables)."""
    g = b // n_phases
    ph = b - g * n_phases
    phh = ph // phases_w
    phw = ph - phh * phases_w
    return g, phh, phw, taps_h + phh * (2 * Th), taps_w + phw * (2 * Tw)


@triton.jit
def _dgrad_tap(kt, k_tiles_per_tap, th_ptr, tw_ptr, Tw):
    """K-tile index -> (filter row r, dy row offset, filter column s, dy column offset, channel tile);
    r or s is -1 for a padding entry of the tap table."""
    t = kt // k_tiles_per_tap
    kb = kt - t * k_tiles_per_tap
    t_h = t // Tw
    t_w = t - t_h * Tw
    r = tl.load(th_ptr + 2 * t_h)
    off_h = tl.load(th_ptr + 2 * t_h + 1)
    s = tl.load(tw_ptr + 2 * t_w)
    off_w = tl.load(tw_ptr + 2 * t_w + 1)
    return r, off_h, s, off_w, kb


@triton.jit
def dgrad_dy_init(desc, args, pid_m, b, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """A = the gathered output gradient: rows are the input pixels (n, i, j) of one phase,
    h = phase_h + stride_h * i; columns (tap, k) of group g."""
    (dy_ptr, s_n, s_p, s_q, s_k, P, Q, Hq, Wq, M, Kg, n_phases, phases_w, taps_h, taps_w, Th, Tw) = args
    g, phh, phw, th_ptr, tw_ptr = _dgrad_phase(b, n_phases, phases_w, taps_h, taps_w, Th, Tw)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    n = offs_m // (Hq * Wq)
    rem = offs_m - n * (Hq * Wq)
    i = rem // Wq
    j = rem - i * Wq
    row_off = n.to(tl.int64) * s_n + (g * Kg).to(tl.int64) * s_k
    return (dy_ptr, row_off, i, j, offs_m < M, s_p, s_q, s_k, P, Q, Kg, th_ptr, tw_ptr, Tw)


@triton.jit
def dgrad_dy_load(state, kt, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    (dy_ptr, row_off, i, j, mask_m, s_p, s_q, s_k, P, Q, Kg, th_ptr, tw_ptr, Tw) = state
    r, off_h, s, off_w, kb = _dgrad_tap(kt, tl.cdiv(Kg, BLOCK_K), th_ptr, tw_ptr, Tw)
    p = i + off_h
    q = j + off_w
    k = kb * BLOCK_K + tl.arange(0, BLOCK_K)
    ok = mask_m & (p >= 0) & (p < P) & (q >= 0) & (q < Q) & (r >= 0) & (s >= 0)
    ptrs = dy_ptr + (row_off + p.to(tl.int64) * s_p + q.to(tl.int64) * s_q)[:, None] + (k * s_k)[None, :]
    return tl.load(ptrs, mask=ok[:, None] & (k < Kg)[None, :], other=0.0)


@triton.jit
def dgrad_w_init(desc, args, pid_n, b, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """B = the weight ``w[K, C/g, R, S]`` of group g read in place: rows (tap, k), columns c."""
    (w_ptr, Kg, Cg, s_k, s_c, s_r, s_s, n_phases, phases_w, taps_h, taps_w, Th, Tw) = args
    g, phh, phw, th_ptr, tw_ptr = _dgrad_phase(b, n_phases, phases_w, taps_h, taps_w, Th, Tw)
    c = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    return (w_ptr + (g * Kg).to(tl.int64) * s_k, c * s_c, c < Cg, Kg, s_k, s_r, s_s, th_ptr, tw_ptr, Tw)


@triton.jit
def dgrad_w_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    (w_ptr, cols, mask_n, Kg, s_k, s_r, s_s, th_ptr, tw_ptr, Tw) = state
    r, off_h, s, off_w, kb = _dgrad_tap(kt, tl.cdiv(Kg, BLOCK_K), th_ptr, tw_ptr, Tw)
    k = kb * BLOCK_K + tl.arange(0, BLOCK_K)
    ok = (k < Kg)[:, None] & mask_n[None, :] & (r >= 0) & (s >= 0)
    ptrs = w_ptr + (k.to(tl.int64) * s_k + r * s_r + s * s_s)[:, None] + cols[None, :]
    return tl.load(ptrs, mask=ok, other=0.0)


@triton.jit
def dgrad_dx_store(desc, args, acc, pid_m, pid_n, b, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Write the [input pixels of one phase, channels] tile to dx with any strides."""
    (dx_ptr, s_n, s_c, s_h, s_w, H, W, Hq, Wq, M, Cg, n_phases, phases_w, stride_h, stride_w) = args
    g = b // n_phases
    ph = b - g * n_phases
    phh = ph // phases_w
    phw = ph - phh * phases_w
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    c = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n = offs_m // (Hq * Wq)
    rem = offs_m - n * (Hq * Wq)
    i = rem // Wq
    j = rem - i * Wq
    h = phh + stride_h * i
    w = phw + stride_w * j
    rows = n.to(tl.int64) * s_n + h.to(tl.int64) * s_h + w.to(tl.int64) * s_w
    cols = (g * Cg + c).to(tl.int64) * s_c
    mask = ((offs_m < M) & (h < H) & (w < W))[:, None] & (c < Cg)[None, :]
    tl.store(dx_ptr + rows[:, None] + cols[None, :], acc.to(dx_ptr.dtype.element_ty), mask=mask)


# ================================================================ wgrad (natural view)
# dw[k, c, r, s] = sum over output pixels (n, p, q) of dy[n, k, p, q] * x[n, c, p*st - pad + r*dil, ...]
# GEMM: M = K/g, N = (r, s, c) of group g (flat), K = N*P*Q output pixels: a long reduction over
# few output tiles, so the launch splits K (``gemm_kernel``'s SPLIT_K, summed in a fixed order).
@triton.jit
def _pixels(kt, P, Q, NPQ, BLOCK_K: tl.constexpr):
    m = kt * BLOCK_K + tl.arange(0, BLOCK_K)
    n = m // (P * Q)
    pq = m - n * (P * Q)
    p = pq // Q
    return m < NPQ, n, p, pq - p * Q


@triton.jit
def wgrad_dy_init(desc, args, pid_m, g, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """A = dy^T of group g: rows are output channels k, columns output pixels."""
    (dy_ptr, s_n, s_p, s_q, s_k, P, Q, NPQ, Kg) = args
    k = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    return (dy_ptr, (g * Kg + k).to(tl.int64) * s_k, k < Kg, s_n, s_p, s_q, P, Q, NPQ)


@triton.jit
def wgrad_dy_load(state, kt, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    (dy_ptr, rows, mask_m, s_n, s_p, s_q, P, Q, NPQ) = state
    ok, n, p, q = _pixels(kt, P, Q, NPQ, BLOCK_K)
    cols = n.to(tl.int64) * s_n + p.to(tl.int64) * s_p + q.to(tl.int64) * s_q
    return tl.load(dy_ptr + rows[:, None] + cols[None, :], mask=mask_m[:, None] & ok[None, :], other=0.0)


@triton.jit
def wgrad_x_init(desc, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """B = im2col(x) of group g: rows output pixels, columns (r, s, c) flat; the column part of
    every address is fixed for the tile and computed here once."""
    (x_ptr, s_n, s_h, s_w, s_c, H, W, P, Q, NPQ, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, S, Cg, RSC) = args
    j = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    r = j // (S * Cg)
    rem = j - r * (S * Cg)
    s = rem // Cg
    c = rem - s * Cg
    dr = r * dil_h
    ds = s * dil_w
    col_off = dr.to(tl.int64) * s_h + ds.to(tl.int64) * s_w + (g * Cg + c).to(tl.int64) * s_c
    return (x_ptr, col_off, dr, ds, j < RSC, s_n, s_h, s_w, H, W, P, Q, NPQ, stride_h, stride_w, pad_h, pad_w)


@triton.jit
def wgrad_x_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    (x_ptr, col_off, dr, ds, mask_n, s_n, s_h, s_w, H, W, P, Q, NPQ, stride_h, stride_w, pad_h, pad_w) = state
    ok, n, p, q = _pixels(kt, P, Q, NPQ, BLOCK_K)
    ih0 = p * stride_h - pad_h
    iw0 = q * stride_w - pad_w
    row_off = n.to(tl.int64) * s_n + ih0.to(tl.int64) * s_h + iw0.to(tl.int64) * s_w
    ih = ih0[:, None] + dr[None, :]
    iw = iw0[:, None] + ds[None, :]
    ok2 = ok[:, None] & mask_n[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
    return tl.load(x_ptr + row_off[:, None] + col_off[None, :], mask=ok2, other=0.0)


@triton.jit
def wgrad_dw_store(desc, args, acc, pid_m, pid_n, g, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Write the [output channels, (r, s, c)] tile to dw ``[K, C/g, R, S]`` with any strides."""
    (dw_ptr, s_k, s_c, s_r, s_s, Kg, S, Cg, RSC) = args
    k = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    j = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    r = j // (S * Cg)
    rem = j - r * (S * Cg)
    s = rem // Cg
    c = rem - s * Cg
    rows = (g * Kg + k).to(tl.int64) * s_k
    cols = r.to(tl.int64) * s_r + s.to(tl.int64) * s_s + c.to(tl.int64) * s_c
    mask = (k < Kg)[:, None] & (j < RSC)[None, :]
    tl.store(dw_ptr + rows[:, None] + cols[None, :], acc.to(dw_ptr.dtype.element_ty), mask=mask)


# ================================================================ wgrad (TMA, stride 1)
# The same GEMM as above, read through the copy engine. Each N tile lies inside one filter tap
# (r, s): its columns are a block of channels of that tap (channels padded to the tile), so the
# im2col operand of a K tile is one TMA box of x -- the pixel block's box shifted by the tap, out
# of bounds zero-filled (padding for free) -- and the dy^T operand is the same pixel block's box
# of dy. K tile kt is the kt-th TILE_N x TILE_H x TILE_W block of output pixels.
@triton.jit
def tma_wgrad_dy_init(dy_desc, args, pid_m, g, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """A = dy^T over NHWC dy viewed as ``[N, P, Q, K]``, box ``[TILE_N, TILE_H, TILE_W, BLOCK_M]``
    with ``TILE_N * TILE_H * TILE_W = BLOCK_K`` pixels; group ``g``'s channels start ``g * Kg``
    in (a block running past the group reads the next group's channels, which the store drops)."""
    (P, Q, Kg) = args
    return (dy_desc, g * Kg + pid_m * BLOCK_M, P, Q)


@triton.jit
def tma_wgrad_dy_load(state, kt, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    # the [pixels, channels] box transposed: an M-major A operand. Triton 3.6 feeds it to wgmma
    # straight from shared memory only when the box is one row of pixels ([1, 1, TILE_W, BLOCK_M]);
    # any other box (two rows, or a unit group axis before the channels) is reshaped in
    # registers, and wgmma then takes A from registers (tools/compile_call.py counts both forms)
    dy_desc, k0, P, Q = state
    TILE_N: tl.constexpr = dy_desc.block_shape[0]
    TILE_H: tl.constexpr = dy_desc.block_shape[1]
    TILE_W: tl.constexpr = dy_desc.block_shape[2]
    n, p0, q0 = _spatial_tile(kt, P, Q, TILE_N, TILE_H, TILE_W)
    return dy_desc.load([n, p0, q0, k0]).reshape(BLOCK_K, BLOCK_M).T


@triton.jit
def tma_wgrad_x_init(x_desc, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """B = im2col(x) for the tap and channel block of N tile ``pid_n``; x is NHWC viewed as
    ``[N, H, W, groups, C/groups]`` (a strided 1x1 kernel: the subsampled view)."""
    (P, Q, pad_h, pad_w, dil_h, dil_w, S, c_tiles) = args
    r, s, cb = _tap_split(pid_n, c_tiles, S)
    return (x_desc, r * dil_h - pad_h, s * dil_w - pad_w, g, cb * BLOCK_N, P, Q)


@triton.jit
def tma_wgrad_x_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    x_desc, dh, dw, g, c0, P, Q = state
    TILE_N: tl.constexpr = x_desc.block_shape[0]
    TILE_H: tl.constexpr = x_desc.block_shape[1]
    TILE_W: tl.constexpr = x_desc.block_shape[2]
    n, p0, q0 = _spatial_tile(kt, P, Q, TILE_N, TILE_H, TILE_W)
    return x_desc.load([n, p0 + dh, q0 + dw, g, c0]).reshape(BLOCK_K, BLOCK_N)


@triton.jit
def tma_wgrad_xs_init(x_desc, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """B = im2col(x) for a strided convolution, from one descriptor over NHWC x seen as
    ``[N, H/SH, SH, W/SW, SW*C]``: input row ``SH*i + ph`` is (i, ph), and the column phase is
    folded into the channel coordinate (pixel columns are C apart; group ``g``'s channels start
    ``g * Cg`` into a pixel). For output pixel (p, q) and tap (r, s) the input row ``SH*p + r*dil
    - pad`` is (p + dh, ph) with dh = floor((r*dil - pad) / SH): every tap reads a stride-1 box of
    one phase, and rows or columns outside the image are the copy engine's zero fill."""
    (P, Q, pad_h, pad_w, dil_h, dil_w, S, c_tiles, SH, SW, C, shift_h, shift_w, Cg) = args
    r, s, cb = _tap_split(pid_n, c_tiles, S)
    # shift_* = SH * ceil(pad / SH) keeps the dividend >= 0, so // and % are floor division
    oh = r * dil_h - pad_h + shift_h
    ow = s * dil_w - pad_w + shift_w
    dh = oh // SH - shift_h // SH
    dw = ow // SW - shift_w // SW
    return (x_desc, dh, oh % SH, dw, (ow % SW) * C + g * Cg + cb * BLOCK_N, P, Q)


@triton.jit
def tma_wgrad_xs_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    x_desc, dh, ph, dw, c0, P, Q = state
    TILE_N: tl.constexpr = x_desc.block_shape[0]
    TILE_H: tl.constexpr = x_desc.block_shape[1]
    TILE_W: tl.constexpr = x_desc.block_shape[3]
    n, p0, q0 = _spatial_tile(kt, P, Q, TILE_N, TILE_H, TILE_W)
    return x_desc.load([n, p0 + dh, ph, q0 + dw, c0]).reshape(BLOCK_K, BLOCK_N)


@triton.jit
def wgrad_dw_tap_store(desc, args, acc, pid_m, pid_n, g, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Write the [output channels, channels of one tap] tile to dw ``[K, C/g, R, S]``, any strides."""
    (dw_ptr, s_k, s_c, s_r, s_s, Kg, S, Cg, c_tiles) = args
    r, s, cb = _tap_split(pid_n, c_tiles, S)
    k = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    c = cb * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = (g * Kg + k).to(tl.int64) * s_k
    cols = r.to(tl.int64) * s_r + s.to(tl.int64) * s_s + c.to(tl.int64) * s_c
    mask = (k < Kg)[:, None] & (c < Cg)[None, :]
    tl.store(dw_ptr + rows[:, None] + cols[None, :], acc.to(dw_ptr.dtype.element_ty), mask=mask)
