"""wgrad with several filter taps per program, sharing one dy tile (a ``wgrad_tma`` variant).

``wgrad_tma`` gives each program one tap (r, s) of one channel block, so for a 3x3 layer every
block of dy is read, and its transposed (M-major) copy staged through registers, nine times.
Here a program owns ``TAPS`` neighbouring taps of one filter row: per block of output pixels it
loads the dy box once and one x box per tap (each shifted by one dilation step along W), and
keeps one fp32 accumulator per tap. For a 3x3 layer with ``TAPS = 3`` that is 3 dy reads where
``wgrad_tma`` makes 9, and two thirds of the L2 traffic.

Same GEMM view as ``wgrad_tma`` (M = K/g output channels, N = taps x C/g, K = pixel blocks split
over grid axis 2), same TMA boxes (``loaders.tma_wgrad_dy_init`` / ``tma_wgrad_x_init``
descriptors), same deterministic split-K reduction (``matmul.blocks.split_k_reduce``, one counter
per (tile, tap)). Taps past the filter's last column (S not a multiple of TAPS) are computed on
zero-filled or real x and not stored.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ..matmul.blocks import split_k_reduce, split_range, tile_grid
from .loaders import tma_wgrad_dy_init, tma_wgrad_dy_load, tma_wgrad_x_load


@triton.jit
def _store_tap(acc, ws_ptr, lock_ptr, tile, dw_ptr, s_k, s_c, s_r, s_s, Kg, Cg, S, g, pid_m, r, s, c0,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_K: tl.constexpr):  # fmt: skip
    is_last = True
    if SPLIT_K > 1:
        acc, is_last = split_k_reduce(acc, ws_ptr, lock_ptr, tile, tl.program_id(2), tl.num_programs(2), BLOCK_M,
                                      BLOCK_N)  # fmt: skip
    if is_last:
        k = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        c = c0 + tl.arange(0, BLOCK_N)
        rows = (g * Kg + k).to(tl.int64) * s_k
        cols = r.to(tl.int64) * s_r + s.to(tl.int64) * s_s + c.to(tl.int64) * s_c
        mask = (k < Kg)[:, None] & (c < Cg)[None, :] & (s < S)
        tl.store(dw_ptr + rows[:, None] + cols[None, :], acc.to(dw_ptr.dtype.element_ty), mask=mask)


@triton.jit
def wgrad_taps_kernel(
    dy_desc,  # NHWC dy as [N, P, Q, K], box [TILE_N, TILE_H, TILE_W, BLOCK_M]
    x_desc,  # NHWC x as [N, H, W, groups, C/groups], box [TILE_N, TILE_H, TILE_W, 1, BLOCK_N]
    dw_ptr,
    ws_ptr,  # SPLIT_K > 1: partials, TAPS * SPLIT_K * BLOCK_M * BLOCK_N per output tile
    lock_ptr,  # SPLIT_K > 1: TAPS counters per output tile, zero before and after the launch
    P,
    Q,
    pad_h,
    pad_w,
    dil_h,
    dil_w,
    S,
    Kg,
    Cg,
    c_tiles,
    s_k,
    s_c,
    s_r,
    s_s,
    num_pid_m,
    num_pid_n,  # R * cdiv(S, TAPS) * c_tiles
    k_tiles,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    TAPS: tl.constexpr,  # 2..4 filter columns per program
    UPCAST: tl.constexpr,  # dot in fp32 (Triton's interpreter multiplies raw bf16 bits otherwise)
    SPLIT_K: tl.constexpr,
):
    """grid = (num_pid_m * num_pid_n, groups, split count): one (output-channel block, filter row,
    group of TAPS filter columns, channel block) per program, reducing its share of pixel blocks."""
    pid_m, pid_n = tile_grid(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
    g = tl.program_id(1)
    s_groups = tl.cdiv(S, TAPS)
    rj = pid_n // c_tiles
    cb = pid_n - rj * c_tiles
    r = rj // s_groups
    s0 = (rj - r * s_groups) * TAPS
    c0 = cb * BLOCK_N
    # wgrad_tma's loader states: dy's once, x's per filter column (one dilation step apart)
    a_state = tma_wgrad_dy_init(dy_desc, (P, Q, Kg), pid_m, g, BLOCK_M, BLOCK_K)
    dh = r * dil_h - pad_h
    dw0 = s0 * dil_w - pad_w
    x0 = (x_desc, dh, dw0, g, c0, P, Q)
    x1 = (x_desc, dh, dw0 + dil_w, g, c0, P, Q)
    x2 = (x_desc, dh, dw0 + 2 * dil_w, g, c0, P, Q)
    x3 = (x_desc, dh, dw0 + 3 * dil_w, g, c0, P, Q)
    kt_start, kt_end = split_range(0, k_tiles, SPLIT_K)
    acc0 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc1 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc3 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(kt_start, kt_end):
        a = tma_wgrad_dy_load(a_state, kt, BLOCK_M, BLOCK_K)
        b0 = tma_wgrad_x_load(x0, kt, BLOCK_N, BLOCK_K)
        b1 = tma_wgrad_x_load(x1, kt, BLOCK_N, BLOCK_K)
        if UPCAST:
            a, b0, b1 = a.to(tl.float32), b0.to(tl.float32), b1.to(tl.float32)
        acc0 = tl.dot(a, b0, acc0)
        acc1 = tl.dot(a, b1, acc1)
        if TAPS > 2:
            b2 = tma_wgrad_x_load(x2, kt, BLOCK_N, BLOCK_K)
            if UPCAST:
                b2 = b2.to(tl.float32)
            acc2 = tl.dot(a, b2, acc2)
        if TAPS > 3:
            b3 = tma_wgrad_x_load(x3, kt, BLOCK_N, BLOCK_K)
            if UPCAST:
                b3 = b3.to(tl.float32)
            acc3 = tl.dot(a, b3, acc3)
    tile = ((g * num_pid_m + pid_m) * num_pid_n + pid_n) * TAPS
    _store_tap(acc0, ws_ptr, lock_ptr, tile, dw_ptr, s_k, s_c, s_r, s_s, Kg, Cg, S, g, pid_m, r, s0, c0,
               BLOCK_M, BLOCK_N, SPLIT_K)  # fmt: skip
    _store_tap(acc1, ws_ptr, lock_ptr, tile + 1, dw_ptr, s_k, s_c, s_r, s_s, Kg, Cg, S, g, pid_m, r, s0 + 1, c0,
               BLOCK_M, BLOCK_N, SPLIT_K)  # fmt: skip
    if TAPS > 2:
        _store_tap(acc2, ws_ptr, lock_ptr, tile + 2, dw_ptr, s_k, s_c, s_r, s_s, Kg, Cg, S, g, pid_m, r, s0 + 2, c0,
                   BLOCK_M, BLOCK_N, SPLIT_K)  # fmt: skip
    if TAPS > 3:
        _store_tap(acc3, ws_ptr, lock_ptr, tile + 3, dw_ptr, s_k, s_c, s_r, s_s, Kg, Cg, S, g, pid_m, r, s0 + 3, c0,
                   BLOCK_M, BLOCK_N, SPLIT_K)  # fmt: skip


def taps_per_program(s: int) -> int:
    """Filter columns per program for a filter of width ``s`` (2..4; the fewest groups, then
    the least waste): 3 -> 3, 5 -> 3 (3 + 2), 7 -> 4 (4 + 3)."""
    return min(range(2, 5), key=lambda t: (-(-s // t), -(-s // t) * t - s))
