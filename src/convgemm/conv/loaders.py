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
    (y_ptr, s_n, s_k, s_p, s_q, P, Q, M, Kg) = args
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n = offs_m // (P * Q)
    pq = offs_m - n * (P * Q)
    oh = pq // Q
    ow = pq - oh * Q
    rows = n.to(tl.int64) * s_n + oh.to(tl.int64) * s_p + ow.to(tl.int64) * s_q
    cols = (g * Kg + offs_n).to(tl.int64) * s_k
    mask = (offs_m < M)[:, None] & (offs_n < Kg)[None, :]
    tl.store(y_ptr + rows[:, None] + cols[None, :], acc.to(y_ptr.dtype.element_ty), mask=mask)


# ================================================================ TMA (transposed view)
@triton.jit
def _spatial_tile(pid, P, Q, TILE_N: tl.constexpr, TILE_H: tl.constexpr, TILE_W: tl.constexpr):
    """Tile index -> (first image, first output row, first output column) of a
    TILE_N x TILE_H x TILE_W block of output pixels. Small outputs (7x7, 14x14) use several
    images per tile so that tiles fit the output exactly instead of being mostly padding."""
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
