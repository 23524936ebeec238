"""Loaders and stores for 3-D convolutions (pointer gathers, any strides), for ``gemm_kernel``.

The 2-D gather loaders with a depth axis: an output pixel is (n, od, oh, ow), a filter tap
(t, r, s), and a K tile of the forward covers one tap and a block of channels. Out-of-bounds taps
(padding) are masked to zero. Offsets are 64-bit. See ``convgemm.matmul.blocks`` for the contract.

=========  ===============================  ================================  ==================
direction  M / N / K (per group)            A / B                             store
=========  ===============================  ================================  ==================
forward    N*OD*P*Q / K/g / (t,r,s) x C/g   im2col(x) gathered / w in place   y, any strides
dgrad      N*D*H*W / C/g / (t,r,s) x K/g    dy gathered where the tap lands   dx, any strides
                                            on a strided position / w
wgrad      K/g / (t,r,s,c) flat / N*OD*P*Q  dy^T gathered / im2col(x)^T       dw, any strides
=========  ===============================  ================================  ==================
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _tap3(kt, c_tiles, R, S):
    """K-tile index -> (t, r, s, channel tile)."""
    tap = kt // c_tiles
    cb = kt - tap * c_tiles
    t = tap // (R * S)
    rem = tap - t * (R * S)
    r = rem // S
    return t, r, rem - r * S, cb


@triton.jit
def _pixel3(m, A, B, C):
    """Flat pixel index over [N, A, B, C] -> (n, a, b, c)."""
    abc = A * B * C
    n = m // abc
    rem = m - n * abc
    a = rem // (B * C)
    rem = rem - a * (B * C)
    b = rem // C
    return n, a, b, rem - b * C


@triton.jit
def _flat_trsc(j, R, S, Cg):
    """Flat wgrad column index -> (t, r, s, c)."""
    t = j // (R * S * Cg)
    rem = j - t * (R * S * Cg)
    r = rem // (S * Cg)
    rem = rem - r * (S * Cg)
    s = rem // Cg
    return t, r, s, rem - s * Cg


# ================================================================ forward
@triton.jit
def im2col3d_init(desc, args, pid_m, g, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """A = im2col(x): rows are output pixels (n, od, oh, ow); shared by the per-tap and flat loads."""
    (x_ptr, s_n, s_d, s_h, s_w, s_c, D, H, W, OD, P, Q, M, st_d, st_h, st_w, pd, ph, pw, dd, dh, dw, T, R, S,
     Cg) = args  # fmt: skip
    m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    n, od, oh, ow = _pixel3(m, OD, P, Q)
    id0 = od * st_d - pd
    ih0 = oh * st_h - ph
    iw0 = ow * st_w - pw
    row_off = (n.to(tl.int64) * s_n + (g * Cg).to(tl.int64) * s_c + id0.to(tl.int64) * s_d
               + ih0.to(tl.int64) * s_h + iw0.to(tl.int64) * s_w)  # fmt: skip
    return (x_ptr, row_off, id0, ih0, iw0, m < M, s_d, s_h, s_w, s_c, D, H, W, dd, dh, dw, T, R, S, Cg)


@triton.jit
def im2col3d_load(state, kt, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    (x_ptr, row_off, id0, ih0, iw0, mask_m, s_d, s_h, s_w, s_c, D, H, W, dd, dh, dw, T, R, S, Cg) = state
    t, r, s, cb = _tap3(kt, tl.cdiv(Cg, BLOCK_K), R, S)
    idd = id0 + t * dd
    ih = ih0 + r * dh
    iw = iw0 + s * dw
    ok = mask_m & (idd >= 0) & (idd < D) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
    tap_off = (t * dd).to(tl.int64) * s_d + (r * dh).to(tl.int64) * s_h + (s * dw).to(tl.int64) * s_w
    c = cb * BLOCK_K + tl.arange(0, BLOCK_K)
    ptrs = x_ptr + (row_off + tap_off)[:, None] + (c * s_c)[None, :]
    return tl.load(ptrs, mask=ok[:, None] & (c < Cg)[None, :], other=0.0)


@triton.jit
def weight3d_init(desc, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """B = w ``[K, C/g, T, R, S]`` read in place: output channels of group g along N."""
    (w_ptr, Kg, Cg, s_k, s_c, s_t, s_r, s_s, T, R, S) = args
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    return (w_ptr, (g * Kg + offs_n).to(tl.int64) * s_k, offs_n < Kg, s_c, s_t, s_r, s_s, T, R, S, Cg)


@triton.jit
def weight3d_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    (w_ptr, rows, mask_n, s_c, s_t, s_r, s_s, T, R, S, Cg) = state
    t, r, s, cb = _tap3(kt, tl.cdiv(Cg, BLOCK_K), R, S)
    c = cb * BLOCK_K + tl.arange(0, BLOCK_K)
    ptrs = w_ptr + rows[None, :] + (t * s_t + r * s_r + s * s_s + c * s_c)[:, None]
    return tl.load(ptrs, mask=mask_n[None, :] & (c < Cg)[:, None], other=0.0)


# The flat reduction (few channels per group: RGB stems): K tile kt covers the flat indices
# k = ((t * R + r) * S + s) * Cg + c across taps, so every column is a real (t, r, s, c); both
# operands mask k >= T*R*S*Cg (a zero times a finite value only: an Inf in x stays out).
@triton.jit
def _flat_k(kt, T, R, S, Cg, BLOCK_K: tl.constexpr):
    k = kt * BLOCK_K + tl.arange(0, BLOCK_K)
    t, r, s, c = _flat_trsc(k, R, S, Cg)
    return t, r, s, c, k < T * R * S * Cg


@triton.jit
def im2col3d_flat_load(state, kt, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    (x_ptr, row_off, id0, ih0, iw0, mask_m, s_d, s_h, s_w, s_c, D, H, W, dd, dh, dw, T, R, S, Cg) = state
    t, r, s, c, ok_k = _flat_k(kt, T, R, S, Cg, BLOCK_K)
    td = t * dd
    rh = r * dh
    sw = s * dw
    idd = id0[:, None] + td[None, :]
    ih = ih0[:, None] + rh[None, :]
    iw = iw0[:, None] + sw[None, :]
    ok = mask_m[:, None] & ok_k[None, :] & (idd >= 0) & (idd < D) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
    col_off = td.to(tl.int64) * s_d + rh.to(tl.int64) * s_h + sw.to(tl.int64) * s_w + c * s_c
    return tl.load(x_ptr + row_off[:, None] + col_off[None, :], mask=ok, other=0.0)


@triton.jit
def weight3d_flat_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    (w_ptr, rows, mask_n, s_c, s_t, s_r, s_s, T, R, S, Cg) = state
    t, r, s, c, ok_k = _flat_k(kt, T, R, S, Cg, BLOCK_K)
    ptrs = w_ptr + rows[None, :] + (t * s_t + r * s_r + s * s_s + c * s_c)[:, None]
    return tl.load(ptrs, mask=mask_n[None, :] & ok_k[:, None], other=0.0)


@triton.jit
def out3d_store(desc, args, acc, pid_m, pid_n, g, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Write a [pixels, channels] tile to ``[N, channels, A, B, C]`` with any strides (y or dx)."""
    (y_ptr, s_n, s_k, s_a, s_b, s_c, A, B, C, M, Kg) = args
    m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n, a, b, c = _pixel3(m, A, B, C)
    rows = n.to(tl.int64) * s_n + a.to(tl.int64) * s_a + b.to(tl.int64) * s_b + c.to(tl.int64) * s_c
    cols = (g * Kg + offs_n).to(tl.int64) * s_k
    mask = (m < M)[:, None] & (offs_n < Kg)[None, :]
    tl.store(y_ptr + rows[:, None] + cols[None, :], acc.to(y_ptr.dtype.element_ty), mask=mask)


# ================================================================ dgrad
# dx[n, c, i] = sum over taps and k of dy[n, k, o] * w[k, c, tap], where o * stride = i + pad -
# tap * dil: a tap reaches input position i only when that division is exact, so the loader
# masks the others (with stride > 1 those multiply zeros: correct, not yet phase-split as in 2-D).
@triton.jit
def dgrad3d_dy_init(desc, args, pid_m, g, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    (dy_ptr, s_n, s_d, s_h, s_w, s_k, D, H, W, OD, P, Q, M, st_d, st_h, st_w, pd, ph, pw, dd, dh, dw, R, S, Kg) = args
    m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    n, i_d, i_h, i_w = _pixel3(m, D, H, W)
    base = n.to(tl.int64) * s_n + (g * Kg).to(tl.int64) * s_k
    return (dy_ptr, base, i_d + pd, i_h + ph, i_w + pw, m < M, s_d, s_h, s_w, s_k, OD, P, Q, st_d, st_h, st_w,
            dd, dh, dw, R, S, Kg)  # fmt: skip


@triton.jit
def dgrad3d_dy_load(state, kt, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    (dy_ptr, base, ip_d, ip_h, ip_w, mask_m, s_d, s_h, s_w, s_k, OD, P, Q, st_d, st_h, st_w, dd, dh, dw, R, S,
     Kg) = state  # fmt: skip
    t, r, s, kb = _tap3(kt, tl.cdiv(Kg, BLOCK_K), R, S)
    nd = ip_d - t * dd
    nh = ip_h - r * dh
    nw = ip_w - s * dw
    od = nd // st_d
    oh = nh // st_h
    ow = nw // st_w
    ok = mask_m & (nd >= 0) & (nh >= 0) & (nw >= 0)
    ok = ok & (od * st_d == nd) & (oh * st_h == nh) & (ow * st_w == nw) & (od < OD) & (oh < P) & (ow < Q)
    k = kb * BLOCK_K + tl.arange(0, BLOCK_K)
    rows = base + od.to(tl.int64) * s_d + oh.to(tl.int64) * s_h + ow.to(tl.int64) * s_w
    ptrs = dy_ptr + rows[:, None] + (k * s_k)[None, :]
    return tl.load(ptrs, mask=ok[:, None] & (k < Kg)[None, :], other=0.0)


@triton.jit
def dgrad3d_w_init(desc, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """B = w ``[K, C/g, T, R, S]`` with (tap, k) along K and the group's input channels along N."""
    (w_ptr, Kg, Cg, s_k, s_c, s_t, s_r, s_s, R, S) = args
    c = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    return (w_ptr + (g * Kg).to(tl.int64) * s_k, c.to(tl.int64) * s_c, c < Cg, Kg, s_k, s_t, s_r, s_s, R, S)


@triton.jit
def dgrad3d_w_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    (w_ptr, cols, mask_n, Kg, s_k, s_t, s_r, s_s, R, S) = state
    t, r, s, kb = _tap3(kt, tl.cdiv(Kg, BLOCK_K), R, S)
    k = kb * BLOCK_K + tl.arange(0, BLOCK_K)
    ptrs = w_ptr + (k.to(tl.int64) * s_k + t * s_t + r * s_r + s * s_s)[:, None] + cols[None, :]
    return tl.load(ptrs, mask=(k < Kg)[:, None] & mask_n[None, :], other=0.0)


# ================================================================ wgrad
@triton.jit
def wgrad3d_dy_init(desc, args, pid_m, g, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """A = dy^T: the group's output channels along M, output pixels (the reduction) along K."""
    (dy_ptr, s_n, s_d, s_h, s_w, s_k, OD, P, Q, NPQ, Kg) = args
    k = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    return (dy_ptr, (g * Kg + k).to(tl.int64) * s_k, k < Kg, s_n, s_d, s_h, s_w, OD, P, Q, NPQ)


@triton.jit
def wgrad3d_dy_load(state, kt, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    (dy_ptr, rows, mask_k, s_n, s_d, s_h, s_w, OD, P, Q, NPQ) = state
    m = kt * BLOCK_K + tl.arange(0, BLOCK_K)
    n, od, oh, ow = _pixel3(m, OD, P, Q)
    cols = n.to(tl.int64) * s_n + od.to(tl.int64) * s_d + oh.to(tl.int64) * s_h + ow.to(tl.int64) * s_w
    return tl.load(dy_ptr + rows[:, None] + cols[None, :], mask=mask_k[:, None] & (m < NPQ)[None, :], other=0.0)


@triton.jit
def wgrad3d_x_init(desc, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """B = im2col(x)^T: output pixels along K, flat (t, r, s, c) of group g along N."""
    (x_ptr, s_n, s_d, s_h, s_w, s_c, D, H, W, OD, P, Q, NPQ, st_d, st_h, st_w, pd, ph, pw, dd, dh, dw, R, S, Cg,
     TRSC) = args  # fmt: skip
    j = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    t, r, s, c = _flat_trsc(j, R, S, Cg)
    return (x_ptr, t * dd - pd, r * dh - ph, s * dw - pw, (g * Cg + c).to(tl.int64) * s_c, j < TRSC, s_n, s_d, s_h,
            s_w, D, H, W, OD, P, Q, NPQ, st_d, st_h, st_w)  # fmt: skip


@triton.jit
def wgrad3d_x_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    (x_ptr, off_d, off_h, off_w, c_off, mask_j, s_n, s_d, s_h, s_w, D, H, W, OD, P, Q, NPQ, st_d, st_h,
     st_w) = state  # fmt: skip
    m = kt * BLOCK_K + tl.arange(0, BLOCK_K)
    n, od, oh, ow = _pixel3(m, OD, P, Q)
    idd = (od * st_d)[:, None] + off_d[None, :]
    ih = (oh * st_h)[:, None] + off_h[None, :]
    iw = (ow * st_w)[:, None] + off_w[None, :]
    ok = (m < NPQ)[:, None] & mask_j[None, :] & (idd >= 0) & (idd < D) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
    ptrs = (x_ptr + (n.to(tl.int64) * s_n)[:, None] + idd.to(tl.int64) * s_d + ih.to(tl.int64) * s_h
            + iw.to(tl.int64) * s_w + c_off[None, :])  # fmt: skip
    return tl.load(ptrs, mask=ok, other=0.0)


@triton.jit
def wgrad3d_dw_store(desc, args, acc, pid_m, pid_n, g, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Write the [output channels, (t, r, s, c)] tile to dw ``[K, C/g, T, R, S]``, any strides."""
    (dw_ptr, s_k, s_c, s_t, s_r, s_s, Kg, R, S, Cg, TRSC) = args
    k = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    j = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    t, r, s, c = _flat_trsc(j, R, S, Cg)
    rows = (g * Kg + k).to(tl.int64) * s_k
    cols = t.to(tl.int64) * s_t + r.to(tl.int64) * s_r + s.to(tl.int64) * s_s + c.to(tl.int64) * s_c
    mask = (k < Kg)[:, None] & (j < TRSC)[None, :]
    tl.store(dw_ptr + rows[:, None] + cols[None, :], acc.to(dw_ptr.dtype.element_ty), mask=mask)


# ================================================================ forward through TMA (transposed view)
# As the 2-D TMA kernel: A = the packed weight [K, (t, r, s, Cp)] through a 2-D descriptor, B =
# im2col(x)^T as 5-D boxes [1, TD, TH, TW, BLOCK_K] of NDHWC x (groups = 1, stride 1): a tap is a
# coordinate offset and out-of-bounds boxes are zero-filled, which is the padding.
@triton.jit
def _tile3(pid, OD, P, Q, TD: tl.constexpr, TH: tl.constexpr, TW: tl.constexpr):
    """Pixel-tile index -> (image, first output depth, row, column) of a TD x TH x TW block."""
    tiles_w = tl.cdiv(Q, TW)
    tiles_hw = tl.cdiv(P, TH) * tiles_w
    per_image = tl.cdiv(OD, TD) * tiles_hw
    n = pid // per_image
    rem = pid - n * per_image
    td = rem // tiles_hw
    rem = rem - td * tiles_hw
    th = rem // tiles_w
    return n, td * TD, th * TH, (rem - th * tiles_w) * TW


@triton.jit
def tma_im2col3d_init(x_desc, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    (OD, P, Q, pd, ph, pw, dd, dh, dw, R, S, c_tiles, D) = args
    TD: tl.constexpr = x_desc.block_shape[1]
    TH: tl.constexpr = x_desc.block_shape[2]
    TW: tl.constexpr = x_desc.block_shape[3]
    n, d0, h0, w0 = _tile3(pid_n, OD, P, Q, TD, TH, TW)
    return (x_desc, n, d0 - pd, h0 - ph, w0 - pw, dd, dh, dw, R, S, c_tiles, D)


@triton.jit
def depth_k_range(a, e, D, dd, per_t, k_tiles):
    """The K tiles ``[lo, hi)`` (``per_t`` per filter depth tap, ``k_tiles`` in all, depth taps
    outermost) of the depth taps, dilation ``dd``, through which a tile whose output depths read
    input depths ``a .. e`` at tap 0 reads some depth ``0 .. D-1``: the others' boxes are zero
    padding alone, skipped (r3d-18's last layer, 2 frames and 3 depth taps, tiles one frame
    deep: a third of its multiply-adds). Exact under floor and truncating integer division alike
    (the interpreter floors, compiled code truncates): every quotient of a negative is clamped.
    The Triton loaders' ``*_k_range`` and the Gluon kernel (``ws3d._unit``) call it."""
    T = k_tiles // per_t
    t_lo = tl.minimum(tl.maximum((dd - 1 - e) // dd, 0), T)
    t_hi = tl.maximum(tl.minimum(tl.maximum((D - 1 - a + dd) // dd, 0), T), t_lo)
    return t_lo * per_t, t_hi * per_t


@triton.jit
def tma_im2col3d_k_range(a_state, b_state, k_tiles):
    """``gemm_kernel``'s K_RANGE: only the depth taps whose boxes reach into the volume."""
    x_desc, n, id0, ih0, iw0, dd, dh, dw, R, S, c_tiles, D = b_state
    TD: tl.constexpr = x_desc.block_shape[1]
    return depth_k_range(id0, id0 + TD - 1, D, dd, R * S * c_tiles, k_tiles)


@triton.jit
def tma_im2col3d_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    x_desc, n, id0, ih0, iw0, dd, dh, dw, R, S, c_tiles, D = state
    t, r, s, cb = _tap3(kt, c_tiles, R, S)
    box = x_desc.load([n, id0 + t * dd, ih0 + r * dh, iw0 + s * dw, cb * BLOCK_K])
    return box.reshape(BLOCK_N, BLOCK_K).T


@triton.jit
def tma_im2col3d_phase_init(x_desc, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """B = im2col(x)^T for a strided 3-D kernel, one output depth per tile, read through the
    stride-phase view ``[N*D, H/sh, sh, W/sw, sw*C]`` of a dense NDHWC input
    (``conv3d.input_descriptor3d``); the box is ``[1, TH, 1, TW, BLOCK_K]``.

    Height and width are the 2-D stride-phase loader's (``conv.loaders.tma_im2col_phase_load``):
    tap offset ``o = a*stride + phase`` is view row ``oh0 + a`` of phase ``phase``. Depth needs
    no phase: with one output depth per tile, a tap's input depth is one number, a row of the
    merged N*D axis. A depth in the padding would be another image's slice there, so its box is
    moved past the view's last row instead: wholly out of bounds, zero-filled by the copy engine.
    """
    (D, OD, P, Q, HS, pd, ph, pw, dd, dh, dw, R, S, c_tiles, SD, SH, SW, C) = args
    TH: tl.constexpr = x_desc.block_shape[1]
    TW: tl.constexpr = x_desc.block_shape[3]
    n, d0, h0, w0 = _tile3(pid_n, OD, P, Q, 1, TH, TW)
    return (x_desc, n * D, d0 * SD - pd, D, h0, w0, HS, ph, pw, dd, dh, dw, R, S, c_tiles, SH, SW, C)


@triton.jit
def tma_im2col3d_phase_k_range(a_state, b_state, k_tiles):
    """``tma_im2col3d_k_range`` for the stride-phase loader (tiles one output depth deep)."""
    x_desc, row0, id0, D, oh0, ow0, HS, ph, pw, dd, dh, dw, R, S, c_tiles, SH, SW, C = b_state
    return depth_k_range(id0, id0, D, dd, R * S * c_tiles, k_tiles)


@triton.jit
def tma_im2col3d_phase_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    x_desc, row0, id0, D, oh0, ow0, HS, ph, pw, dd, dh, dw, R, S, c_tiles, SH, SW, C = state
    t, r, s, cb = _tap3(kt, c_tiles, R, S)
    idp = id0 + t * dd
    # floor division of tap offsets that may be negative (o + stride*pad >= 0)
    oh = r * dh - ph
    ah = (oh + SH * ph) // SH - ph
    ow = s * dw - pw
    aw = (ow + SW * pw) // SW - pw
    row = tl.where((idp >= 0) & (idp < D), oh0 + ah, HS)
    box = x_desc.load([row0 + idp, row, oh - ah * SH, ow0 + aw, (ow - aw * SW) * C + cb * BLOCK_K])
    return box.reshape(BLOCK_N, BLOCK_K).T


@triton.jit
def tma_im2col3d_grid_init(x_desc, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """B = im2col(x)^T for a strided 3-D kernel through the phase-grid view ``[D/sd, H/sh, N*D*H,
    W/sw, sw*C]`` of a dense NDHWC input (``conv3d.grid_descriptor3d``; the depth a multiple of
    its stride), boxes ``[TD, TH, 1, TW, BLOCK_K]``: tiles of any depth. A tap's depth and row
    offsets ``o = a*stride + phase`` step the first two axes by ``a`` (a padded depth or row falls
    out of bounds there and is zero-filled) and its phases pick the third axis's row
    ``(n*D + phase_d)*H + phase_h``; columns as in the phase view (``ws3d._x_coord`` is the same
    walk in Gluon)."""
    (OD, P, Q, pd, ph, pw, dd, dh, dw, R, S, c_tiles, D, H, SD, SH, SW, C) = args
    TD: tl.constexpr = x_desc.block_shape[0]
    TH: tl.constexpr = x_desc.block_shape[1]
    TW: tl.constexpr = x_desc.block_shape[3]
    n, d0, h0, w0 = _tile3(pid_n, OD, P, Q, TD, TH, TW)
    return (x_desc, n, d0, h0, w0, pd, ph, pw, dd, dh, dw, R, S, c_tiles, D, H, SD, SH, SW, C)


@triton.jit
def phase_grid_coord(n, d0, h0, w0, t, r, s, c0, pd, ph, pw, dd, dh, dw, D, H, SD, SH, SW, C):
    """The phase-grid view's box coordinate for the pixel block at (n, d0, h0, w0) shifted by
    filter tap (t, r, s), channels from ``c0``: tap offset ``o = a*stride + phase`` steps depth
    and rows by ``a`` and picks the third axis's row by the phases; columns as the phase view's.
    Shared by ``tma_im2col3d_grid_load`` and the Gluon kernel (``ws3d._x_coord``)."""
    # floor division of tap offsets that may be negative (o + stride*pad >= 0)
    od = t * dd - pd
    ad = (od + SD * pd) // SD - pd
    oh = r * dh - ph
    ah = (oh + SH * ph) // SH - ph
    ow = s * dw - pw
    aw = (ow + SW * pw) // SW - pw
    return d0 + ad, h0 + ah, (n * D + od - ad * SD) * H + oh - ah * SH, w0 + aw, (ow - aw * SW) * C + c0


@triton.jit
def tma_im2col3d_grid_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    x_desc, n, d0, h0, w0, pd, ph, pw, dd, dh, dw, R, S, c_tiles, D, H, SD, SH, SW, C = state
    t, r, s, cb = _tap3(kt, c_tiles, R, S)
    cd, ch, crow, cw, cc = phase_grid_coord(n, d0, h0, w0, t, r, s, cb * BLOCK_K, pd, ph, pw, dd, dh, dw, D, H, SD,
                                            SH, SW, C)  # fmt: skip
    return x_desc.load([cd, ch, crow, cw, cc]).reshape(BLOCK_N, BLOCK_K).T


@triton.jit
def tma_im2col3d_grid_k_range(a_state, b_state, k_tiles):
    """``tma_im2col3d_k_range`` for the phase-grid loader (tiles of any depth, stride SD)."""
    x_desc, n, d0, h0, w0, pd, ph, pw, dd, dh, dw, R, S, c_tiles, D, H, SD, SH, SW, C = b_state
    TD: tl.constexpr = x_desc.block_shape[0]
    return depth_k_range(d0 * SD - pd, (d0 + TD - 1) * SD - pd, D, dd, R * S * c_tiles, k_tiles)


@triton.jit
def tma_output3d_store(y_desc, args, acc, pid_m, pid_n, g, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Write the [channels, pixels] tile to NDHWC y; the copy engine clips the edges."""
    (OD, P, Q) = args
    TD: tl.constexpr = y_desc.block_shape[1]
    TH: tl.constexpr = y_desc.block_shape[2]
    TW: tl.constexpr = y_desc.block_shape[3]
    n, d0, h0, w0 = _tile3(pid_n, OD, P, Q, TD, TH, TW)
    y_desc.store([n, d0, h0, w0, pid_m * BLOCK_M], acc.to(y_desc.dtype).T.reshape(1, TD, TH, TW, BLOCK_M))


# ================================================================ wgrad through TMA (stride 1)
# The 2-D TMA wgrad's (``conv.loaders.tma_wgrad_*``) with a depth axis: K tile kt is the kt-th
# TD x TH x TW block of output pixels (``_tile3``), read as a 5-D box of dy [N, OD, P, Q, K] and,
# shifted by the N tile's tap (t, r, s), as a box of x [N, D, H, W, C]: the copy engine's zero
# fill is the padding. Each N tile lies inside one tap; ``conv.loaders.wgrad_dw_tap_store``
# writes it to dw seen as [K, C, T*R, S].
@triton.jit
def tma_wgrad3d_dy_init(dy_desc, args, pid_m, g, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """A = dy^T over NDHWC dy, box ``[1, TD, TH, TW, BLOCK_M]`` with TD*TH*TW = BLOCK_K pixels."""
    (OD, P, Q) = args
    return (dy_desc, pid_m * BLOCK_M, OD, P, Q)


@triton.jit
def tma_wgrad3d_dy_load(state, kt, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    # transposed in shared memory: wgmma reads it there when the box is one row of pixels
    # (TD = TH = 1), else Triton reshapes it in registers (as in 2-D: tma_wgrad_dy_load)
    dy_desc, k0, OD, P, Q = state
    TD: tl.constexpr = dy_desc.block_shape[1]
    TH: tl.constexpr = dy_desc.block_shape[2]
    TW: tl.constexpr = dy_desc.block_shape[3]
    n, d0, h0, w0 = _tile3(kt, OD, P, Q, TD, TH, TW)
    return dy_desc.load([n, d0, h0, w0, k0]).reshape(BLOCK_K, BLOCK_M).T


@triton.jit
def tma_wgrad3d_x_init(x_desc, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """B = im2col(x) for the tap and channel block of N tile ``pid_n``, x NDHWC as 5-D boxes."""
    (OD, P, Q, pd, ph, pw, dd, dh, dw, R, S, c_tiles, D) = args
    t, r, s, cb = _tap3(pid_n, c_tiles, R, S)
    return (x_desc, t * dd - pd, r * dh - ph, s * dw - pw, cb * BLOCK_N, OD, P, Q)


@triton.jit
def tma_wgrad3d_x_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    x_desc, od, oh, ow, c0, OD, P, Q = state
    TD: tl.constexpr = x_desc.block_shape[1]
    TH: tl.constexpr = x_desc.block_shape[2]
    TW: tl.constexpr = x_desc.block_shape[3]
    n, d0, h0, w0 = _tile3(kt, OD, P, Q, TD, TH, TW)
    return x_desc.load([n, d0 + od, h0 + oh, w0 + ow, c0]).reshape(BLOCK_K, BLOCK_N)


@triton.jit
def tma_wgrad3d_xs_init(x_desc, args, pid_n, g, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """B = im2col(x) for a strided layer, through the forward's stride-phase view ``[N*D, H/sh,
    sh, W/sw, sw*C]`` (``conv3d.input_descriptor3d``), box ``[1, TH, 1, TW, BLOCK_N]``: pixel
    blocks are one output depth deep, and the tap's height and width offsets split into a view
    row and a phase as in ``tma_im2col3d_phase_load``."""
    (D, OD, P, Q, HS, pd, ph, pw, dd, dh, dw, R, S, c_tiles, SD, SH, SW, C) = args
    t, r, s, cb = _tap3(pid_n, c_tiles, R, S)
    oh = r * dh - ph
    ah = (oh + SH * ph) // SH - ph  # floor division of an offset that may be negative
    ow = s * dw - pw
    aw = (ow + SW * pw) // SW - pw
    return (x_desc, t * dd - pd, D, ah, oh - ah * SH, aw, (ow - aw * SW) * C + cb * BLOCK_N, OD, P, Q, HS, SD)


@triton.jit
def tma_wgrad3d_xs_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    x_desc, d_off, D, ah, ph, aw, c0, OD, P, Q, HS, SD = state
    TH: tl.constexpr = x_desc.block_shape[1]
    TW: tl.constexpr = x_desc.block_shape[3]
    n, d0, h0, w0 = _tile3(kt, OD, P, Q, 1, TH, TW)
    idp = d0 * SD + d_off
    # a depth in the padding would be another image's slice in the merged axis: the box moves
    # past the view's last row instead (wholly out of bounds: zeros)
    row = tl.where((idp >= 0) & (idp < D), h0 + ah, HS)
    return x_desc.load([n * D + idp, row, ph, w0 + aw, c0]).reshape(BLOCK_K, BLOCK_N)
