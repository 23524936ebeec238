"""Few output channels, filter columns folded: an R x 1 convolution into ``S * K`` channels, then
a fold of its columns into the output (``fprop.NarrowFold``).

``y[n, k, p, q] = sum_s U[n, s*K + k, p, q*sw - pw + s*dw]`` where
``U[n, s*K + k, p, j] = sum_{c, r} x[n, c, p*sh - ph + r*dh, j] * w[k, c, r, s]`` is a convolution
with an R x 1 filter over the input's own width (no column padding or stride). It is
``width_unfold`` turned around: there the *input's* S taps are gathered into wide pixels; here the
*output's* S taps are spread over ``S * K`` channels and summed afterwards.

Why: a layer with few output channels (an RGB dgrad, a 3-channel head) is a GEMM whose N is 3-16,
so the implicit GEMM kernels are bound by reading the input, R * S times per output pixel
through the TMA boxes of the taps (CRAFT's conv1_1 dgrad, 64 -> 3 channels 3x3 at 768x768: about
9 x 75 MB from L2, 116 us on the H200). With the columns folded, the input is read R times and
the intermediate (fp32, ``S * K`` channels) once each way.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..matmul.blocks import activation_epilogue


def fold_weight(w: torch.Tensor) -> torch.Tensor:
    """``w [K, C, R, S]`` -> ``[S * K, C, R, 1]`` with ``out[s*K + k, c, r, 0] = w[k, c, r, s]``,
    laid out channels_last ([S*K][R][1][C] in memory): the KRSC order ``narrow_tma`` reads, so its
    ``krsc_weight`` is a view of this one copy when C needs no padding."""
    k, c, r, s = w.shape
    return w.permute(3, 0, 2, 1).reshape(s * k, r, 1, c).permute(0, 3, 1, 2)


@triton.jit
def width_fold_kernel(
    u_ptr,  # [N, P, W, S*K] fp32, dense
    bias_ptr,
    y_ptr,
    M,  # N * P * Q output pixels
    P,
    Q,
    W,
    K,
    s_yn,
    s_yk,
    s_yp,
    s_yq,
    stride_w,
    pad_w,
    dil_w,
    S: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    ACT: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """``y[n, k, p, q] = act(sum_s U[n, p, q*sw - pw + s*dw, s*K + k] + bias[k])``, summed in s
    order in fp32 and rounded once into y's dtype (any strides: NHWC or NCHW)."""
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    k = tl.arange(0, BLOCK_K)
    m_ok = m < M
    k_ok = k < K
    q = m % Q
    row = m // Q  # n * P + p
    n = row // P
    p = row - n * P
    acc = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
    for s in tl.static_range(S):
        j = q * stride_w - pad_w + s * dil_w
        ok = (m_ok & (j >= 0) & (j < W))[:, None] & k_ok[None, :]
        src = (row.to(tl.int64) * W + j) * (S * K) + s * K
        acc += tl.load(u_ptr + src[:, None] + k[None, :], mask=ok, other=0.0)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + k, mask=k_ok, other=0.0).to(tl.float32)[None, :]
    acc = activation_epilogue(acc, ACT)
    dst = n.to(tl.int64) * s_yn + p.to(tl.int64) * s_yp + q.to(tl.int64) * s_yq
    out = y_ptr + dst[:, None] + (k.to(tl.int64) * s_yk)[None, :]
    tl.store(out, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & k_ok[None, :])
