"""Width unfold: a first layer's few input channels made wide enough for the TMA kernels.

A 3-channel stem (ResNet's 7x7, a 3-D ResNet's 3x7x7) has a reduction of R*S*C = 147 or T*R*S*C
= 441 multiply-adds per output, but only 3 channels per tap: 6 bytes per pixel, under the copy
engine's 16-byte minimum, so it runs on ``small_k``'s pointer gathers at 25-35 TFLOP/s (cuDNN:
about the same). Gathering the S taps of each output column once, ``x_u[n, (d,) h, q, s*C + c] =
x[n, c, (d,) h, q*stride_w + s*dil_w - pad_w]`` (zero outside the image, the channels padded to
``Cu``, a multiple of 16), turns the layer into an R x 1 (or T x R x 1) convolution over ``x_u``
with ``Cu`` channels, stride 1 along the unfolded width: the TMA kernels take it, taps along H
(and D) still implicit. ``x_u`` is S/stride_w times the input (7x7 stride 2: 3.5x; written once,
read from L2 by the R taps); the padded channels cost ``Cu / (S*C)`` more multiply-adds on
tensor cores that were otherwise idle.

This module holds the unfold kernel and the weight rearrangement; the algorithms that use them
are ``fprop.WidthUnfold`` (2-D) and ``conv3d.WidthUnfold3d``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._runtime import cdiv

#: the widest unfolded pixel (channels): S*C up to this; beyond it the copy is more than 32x the
#: input's channels and ``small_k`` / the per-tap kernels are the better tools
MAX_UNFOLDED = 64


def unfold_pays(c: int, k: int) -> bool:
    """Whether the untuned heuristic takes the unfold (over ``small_k``) for a layer it supports.

    Timed (H200, bf16, session 11 of benchmarks/NOTES.md) on RGB stems of 64 or more filters
    (ResNet 7x7 s2, AlexNet 11x11 s4, CRAFT 3x3, 3-D ResNet 3x7x7): the tuner picked it over
    ``small_k`` on each, 1.5-6.9x faster than small_k's earlier benchmark rows. Narrower or
    wider-channel layers were not timed and are left to the tuner.
    """
    return c <= 3 and k >= 64


def unfolded_channels(c: int, s: int) -> int:
    """``Cu``: S*C rounded up to 16 (32 bytes in 16-bit types: a TMA box row)."""
    return cdiv(s * c, 16) * 16


@triton.jit
def unfold_w_kernel(
    x_ptr,
    u_ptr,
    ROWS,  # N * A * HU * Q unfolded pixels
    A,  # depth (1 for 2-D)
    H,
    HU,  # H rounded up to the H stride (the rows past H are zeros)
    Q,
    W,
    s_xn,
    s_xa,
    s_xh,
    s_xw,
    s_xc,
    stride_w,
    pad_w,
    dil_w,
    C: tl.constexpr,
    S: tl.constexpr,
    CU: tl.constexpr,  # a power of two >= the unfolded channels (the buffer's row length is CU_ROW)
    CU_ROW: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # One program writes BLOCK whole unfolded pixels (rows of CU_ROW contiguous values): the
    # stores are dense; the loads gather each pixel's S*C values, neighbours in x (and in L2).
    row = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    j = tl.arange(0, CU)
    q = row % Q
    t = row // Q
    h = t % HU
    t = t // HU
    a = t % A
    n = t // A
    s = j // C
    c = j - s * C
    iw = q[:, None] * stride_w + (s * dil_w)[None, :] - pad_w
    live = row < ROWS
    ok = (live & (h < H))[:, None] & (s < S)[None, :] & (iw >= 0) & (iw < W)
    pix = n.to(tl.int64) * s_xn + a.to(tl.int64) * s_xa + h.to(tl.int64) * s_xh
    v = tl.load(x_ptr + pix[:, None] + iw.to(tl.int64) * s_xw + (c * s_xc)[None, :], mask=ok, other=0.0)
    dst = u_ptr + row.to(tl.int64)[:, None] * CU_ROW + j[None, :]
    tl.store(dst, v, mask=live[:, None] & (j < CU_ROW)[None, :])


def unfold_w(
    x: torch.Tensor, s: int, stride_w: int, pad_w: int, dil_w: int, q: int, hu: int, launch=None
) -> torch.Tensor:
    """``x [N, C, H, W]`` or ``[N, C, D, H, W]`` (any strides) -> the unfolded input, logical shape
    ``[N, Cu, HU, Q]`` / ``[N, Cu, D, HU, Q]`` in channels_last(_3d) memory (dense ``[N, (D,) HU, Q,
    Cu]``): pixel (h, q) holds the S taps' C channels of output column q, tap-major, then zeros.
    ``launch``: a ``Launch`` kept by a caller whose calls all have x's shape and strides."""
    c, h, w = x.shape[1], x.shape[-2], x.shape[-1]
    a = x.shape[2] if x.dim() == 5 else 1
    cu = unfolded_channels(c, s)
    n = x.shape[0]
    u = torch.empty((n, a, hu, q, cu), dtype=x.dtype, device=x.device)
    rows = n * a * hu * q
    s_xa = x.stride(2) if x.dim() == 5 else 0
    block = 64
    if rows:
        # through the one launch site of every convolution kernel (tests guard it; the tuner's
        # compile-only pass compiles this kernel there instead of launching it)
        from .fprop import _run_kernel

        args = (x, u, rows, a, h, hu, q, w, x.stride(0), s_xa, x.stride(-2), x.stride(-1), x.stride(1),
                stride_w, pad_w, dil_w)  # fmt: skip

        def constexprs():
            return dict(C=c, S=s, CU=triton.next_power_of_2(cu), CU_ROW=cu, BLOCK=block)

        _run_kernel(launch, unfold_w_kernel, (cdiv(rows, block),), args, constexprs, {"num_warps": 4})
    if x.dim() == 5:
        return u.permute(0, 4, 1, 2, 3)
    return u.view(n, hu, q, cu).permute(0, 3, 1, 2)


def unfold_weight(w: torch.Tensor) -> torch.Tensor:
    """``w [K, C, (T,) R, S]`` -> ``[K, Cu, (T,) R, 1]`` in channels_last(_3d) memory, channel
    ``s*C + c`` of tap (t, r) holding ``w[k, c, t, r, s]`` (the unfolded input's order), the padded
    channels zero."""
    k, c, *taps = w.shape
    s = taps[-1]
    cu = unfolded_channels(c, s)
    lead = taps[:-1]  # (T, R) or (R,)
    v = w.permute(0, *range(2, w.dim()), 1).reshape(k, *lead, s * c)
    out = w.new_zeros((k, *lead, 1, cu))
    out[..., 0, : s * c] = v
    return out.permute(0, out.dim() - 1, *range(1, out.dim() - 1))
