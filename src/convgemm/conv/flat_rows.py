"""Few input channels as flat filter rows (``flat_rows``): one dot per filter row.

In NHWC memory the S taps of one filter row that an output pixel reads are S neighbouring pixels
of one input row: with dilation 1 along W, one contiguous run of ``S*C`` values starting at
``x[n, ih, iw0, 0]`` (dilated filters read the same taps with gaps). For first and narrow layers (C = 1-32) the per-tap GEMM's K tile of C
channels is mostly padding, and the TMA forms read 16-32-byte box rows, R*S boxes per tile
(session 28: 10-25% of copy bandwidth). Here a program takes ``BLOCK_M`` output pixels and, for
each filter row r, loads every pixel's run as one row of a ``[BLOCK_M, S*C]`` tile (16-byte
vectors when ``C * itemsize`` is a multiple of 16; the W padding comes from the mask), multiplies
it with the weight's ``[S*C, K]`` slice for that row (gathered in place from ``w[K, C, R, S]``:
nothing is packed, so a weight changed in place is always seen) on the tensor cores, and after
the R rows adds the bias and the activation (``matmul.blocks``' epilogue blocks) and stores the
``[BLOCK_M, K]`` tile with y's strides (NHWC or NCHW).

The run is padded to a power of two in at most two chunks (``row_chunks``: 48 = 32 + 16,
24 -> 32, 9 -> 16, 96 -> 128), each its own dot. The GEMM view is the natural one (pixels on
M, output channels on N, K = R * (chunks)); the R rows are unrolled, so there is no K loop to
pipeline: the loads of all rows are independent and in flight together.

A persistent form (a fixed grid walking (tile, filter row) steps, which Triton pipelines with
``cp.async``) was timed on the H200 in session 30 and removed: 1.2-2.4x slower than this one on
narrow 8->8, the seed's 16->16 and CRAFT's 16->16 head.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ..matmul.blocks import activation_epilogue, bias_epilogue, dot_acc

#: the widest filter row (S * C values) a program reads as one run: wider rows are dense per-tap
#: K tiles already, which the GEMM kernels take
MAX_ROW = 128


def row_chunks(run: int, itemsize: int = 2) -> tuple[int, int]:
    """``(ka, kb)``: a row of ``run`` values of ``itemsize`` bytes read as a power-of-two chunk of
    ``ka`` and, when it saves columns, a second of ``kb`` (else 0); both at least 16 (``tl.dot``'s
    smallest K).

    Only a 32 + 16 split of 16-bit values is made (48 = 16 channels x 3 taps, 33 = AlexNet's 11
    taps x 3). On the H200 (Triton 3.6) a first chunk of 128-byte rows followed by a second of
    64-byte rows gave wrong sums: bf16 64 + 32 (96) at 128 pixels on 4 warps, then illegal
    addresses; fp32 32 + 16 on AlexNet's 11x11 (session 29). Such rows are one chunk."""
    full = 16
    while full < run:
        full *= 2
    if full == 64 and run <= 48 and itemsize == 2:
        return 32, 16
    return full, 0


@triton.jit
def _row_dot(acc, x_row, row_ok, iw0, w_ptr, offs_k, k_ok, s_wk, s_wc, s_ws, W,
             J0: tl.constexpr, KC: tl.constexpr, C: tl.constexpr, S: tl.constexpr, DIL_W: tl.constexpr,
             PRECISION: tl.constexpr, UPCAST: tl.constexpr):  # fmt: skip
    """``acc += x[pixels, run[J0 : J0 + KC]] @ w[run[J0 : J0 + KC], k]`` for one filter row:
    ``x_row`` points at each pixel's run, ``row_ok`` says the pixel is real and its input row
    inside the image, ``w_ptr`` is at the row's first tap. With dilation along W the run has gaps
    (tap s at ``s * DIL_W * C``) and is gathered value by value."""
    j = J0 + tl.arange(0, KC)
    s = j // C
    c = j - s * C
    if DIL_W == 1:
        col = j  # written as j so that Triton sees the run's contiguity (vector loads)
    else:
        col = s * (DIL_W * C) + c
    iw = iw0[:, None] + (s * DIL_W)[None, :]
    j_ok = j < S * C
    ok = row_ok[:, None] & j_ok[None, :] & (iw >= 0) & (iw < W)
    a = tl.load(x_row[:, None] + col[None, :], mask=ok, other=0.0)
    # w[k, c, r, s]: a few KB, read from L1/L2 by every program
    b = tl.load(
        w_ptr + (offs_k * s_wk)[None, :] + (c * s_wc + s * s_ws)[:, None],
        mask=j_ok[:, None] & k_ok[None, :],
        other=0.0,
    )
    if UPCAST:  # the interpreter multiplies raw bf16 bits
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    return dot_acc(a, b, acc, PRECISION)


@triton.jit
def _tile_pixels(pid_m, M, P, Q, s_xn, C: tl.constexpr, STRIDE_H: tl.constexpr, STRIDE_W: tl.constexpr,
                 PAD_H: tl.constexpr, PAD_W: tl.constexpr, BLOCK_M: tl.constexpr):  # fmt: skip
    """Output pixels ``m`` of pixel tile ``pid_m``, their (n, oh, ow), the top-left input pixel
    (ih0, iw0) of each one's window, and the offset of its image and first column in x."""
    m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_ok = m < M
    n = m // (P * Q)
    pq = m - n * (P * Q)
    oh = pq // Q
    ow = pq - oh * Q
    ih0 = oh * STRIDE_H - PAD_H
    iw0 = ow * STRIDE_W - PAD_W
    # int64: an image or a batch passes 2**31 elements on large inputs; iw0 * C keeps the
    # run's start a multiple of C (16-byte aligned runs for 8 bf16 channels)
    base = n.to(tl.int64) * s_xn + iw0.to(tl.int64) * C
    return m, m_ok, n, oh, ow, ih0, iw0, base


@triton.jit
def _store_tile(acc, bias_ptr, y_ptr, m, m_ok, n, oh, ow, offs_k, k_ok, s_yn, s_yk, s_yp, s_yq, K: tl.constexpr,
                FLAT_Y: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr):  # fmt: skip
    """Bias, activation (``matmul.blocks``' epilogue blocks) and the store with y's strides."""
    acc = bias_epilogue(acc, bias_ptr, offs_k, k_ok, HAS_BIAS, False)
    acc = activation_epilogue(acc, ACT)
    if FLAT_Y:
        rows = m.to(tl.int64) * K
    else:
        rows = n.to(tl.int64) * s_yn + oh.to(tl.int64) * s_yp + ow.to(tl.int64) * s_yq
    ptrs = y_ptr + rows[:, None] + (offs_k * s_yk)[None, :]
    tl.store(ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & k_ok[None, :])


@triton.jit
def flat_rows_kernel(
    x_ptr,  # NHWC input, channel stride 1 and pixel stride C
    w_ptr,  # w[K, C, R, S], any strides
    bias_ptr,
    y_ptr,
    M,  # N * P * Q output pixels
    H,
    W,
    P,
    Q,
    s_xn,
    s_xh,
    s_wk,
    s_wc,
    s_wr,
    s_ws,
    s_yn,
    s_yk,
    s_yp,
    s_yq,
    C: tl.constexpr,
    K: tl.constexpr,
    R: tl.constexpr,
    S: tl.constexpr,
    STRIDE_H: tl.constexpr,
    STRIDE_W: tl.constexpr,
    PAD_H: tl.constexpr,
    PAD_W: tl.constexpr,
    DIL_H: tl.constexpr,
    DIL_W: tl.constexpr,
    KA: tl.constexpr,  # the row's first chunk (row_chunks)
    KB: tl.constexpr,  # its second chunk, or 0
    BLOCK_M: tl.constexpr,  # output pixels per program
    BLOCK_N: tl.constexpr,  # output channels per program (grid axis 1)
    FLAT_Y: tl.constexpr,  # y is dense NHWC: pixel m's K values start at m * K
    HAS_BIAS: tl.constexpr,
    ACT: tl.constexpr,
    PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
):
    """grid = (cdiv(M, BLOCK_M), cdiv(K, BLOCK_N)); see the module docstring."""
    m, m_ok, n, oh, ow, ih0, iw0, base = _tile_pixels(tl.program_id(0), M, P, Q, s_xn, C, STRIDE_H, STRIDE_W,
                                                      PAD_H, PAD_W, BLOCK_M)  # fmt: skip
    offs_k = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    k_ok = offs_k < K
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for r in tl.static_range(R):
        ih = ih0 + r * DIL_H
        row_ok = m_ok & (ih >= 0) & (ih < H)
        x_row = x_ptr + (base + ih.to(tl.int64) * s_xh)
        w_row = w_ptr + r * s_wr
        acc = _row_dot(acc, x_row, row_ok, iw0, w_row, offs_k, k_ok, s_wk, s_wc, s_ws, W,
                       0, KA, C, S, DIL_W, PRECISION, UPCAST)  # fmt: skip
        if KB > 0:
            acc = _row_dot(acc, x_row, row_ok, iw0, w_row, offs_k, k_ok, s_wk, s_wc, s_ws, W,
                           KA, KB, C, S, DIL_W, PRECISION, UPCAST)  # fmt: skip
    _store_tile(acc, bias_ptr, y_ptr, m, m_ok, n, oh, ow, offs_k, k_ok, s_yn, s_yk, s_yp, s_yq, K, FLAT_Y,
                HAS_BIAS, ACT)  # fmt: skip
