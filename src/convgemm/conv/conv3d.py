"""3-D convolution kernels: forward, dgrad and wgrad, each one ``gemm_kernel`` launch with the
gather loaders of ``conv/loaders3d.py`` (any stride, padding, dilation, groups and strides).

This is the general path; the 2-D algorithms' Hopper specialisations (TMA boxes, persistent
tiles, tuning) are not yet carried over to 3-D.
"""

from __future__ import annotations

import torch

from .._runtime import cdiv, interpreting, sm_count
from ..problem3d import ConvProblem3d
from . import loaders3d as l3
from .fprop import Config, _launch, _small, split_k_buffers


def _cfg(m_dim: int, n_dim: int, k_dim: int, dtype: torch.dtype) -> Config:
    """A heuristic tile for a gather GEMM whose N side is ``n_dim`` and K tiles run over ``k_dim``."""
    if interpreting():
        return Config(32, min(32, _small(n_dim)), min(32, _small(k_dim)), 4, 1)
    if dtype == torch.float64:
        return Config(64, 32, 16, 4, 2)
    bn = min(128, _small(n_dim, 32))
    bk = min(64 if dtype.itemsize == 2 else 32, _small(k_dim))
    return Config(128, bn, bk, 8 if bn >= 128 else 4, 3)


def forward(prob: ConvProblem3d, x: torch.Tensor, w: torch.Tensor, bias, y: torch.Tensor) -> None:
    """``y [N, K, OD, P, Q] = conv3d(x [N, C, D, H, W], w [K, C/g, T, R, S]) (+ bias)``."""
    cfg = _cfg(prob.n * prob.od * prob.p * prob.q, prob.kg, prob.cg, prob.dtype)
    M = prob.n * prob.od * prob.p * prob.q
    sd, sh, sw = prob.stride
    pd, ph, pw = prob.pad
    dd, dh, dw = prob.dilation
    a = (None, (x, x.stride(0), x.stride(2), x.stride(3), x.stride(4), x.stride(1), prob.d, prob.h, prob.w, prob.od,
                prob.p, prob.q, M, sd, sh, sw, pd, ph, pw, dd, dh, dw, prob.r, prob.s, prob.cg))  # fmt: skip
    b = (None, (w, prob.kg, prob.cg, *w.stride(), prob.r, prob.s))
    c = (None, (y, y.stride(0), y.stride(1), y.stride(2), y.stride(3), y.stride(4), prob.od, prob.p, prob.q, M,
                prob.kg))  # fmt: skip
    num_m, num_n = cdiv(M, cfg.block_m), cdiv(prob.kg, cfg.block_n)
    k_tiles = prob.t * prob.r * prob.s * cdiv(prob.cg, cfg.block_k)
    fns = (l3.im2col3d_init, l3.im2col3d_load, l3.weight3d_init, l3.weight3d_load, l3.out3d_store)
    _launch(None, (num_m * num_n, prob.groups, 1), a, b, c, bias, y, prob.kg, num_m, num_n, k_tiles, cfg, fns,
            False, prob)  # fmt: skip


def dgrad(prob: ConvProblem3d, dy: torch.Tensor, w: torch.Tensor, dx: torch.Tensor) -> None:
    """``dx [N, C, D, H, W]`` from ``dy [N, K, OD, P, Q]`` and ``w``."""
    cfg = _cfg(prob.n * prob.d * prob.h * prob.w, prob.cg, prob.kg, prob.dtype)
    M = prob.n * prob.d * prob.h * prob.w
    sd, sh, sw = prob.stride
    pd, ph, pw = prob.pad
    dd, dh, dw = prob.dilation
    a = (None, (dy, dy.stride(0), dy.stride(2), dy.stride(3), dy.stride(4), dy.stride(1), prob.d, prob.h, prob.w,
                prob.od, prob.p, prob.q, M, sd, sh, sw, pd, ph, pw, dd, dh, dw, prob.r, prob.s, prob.kg))  # fmt: skip
    b = (None, (w, prob.kg, prob.cg, *w.stride(), prob.r, prob.s))
    c = (None, (dx, dx.stride(0), dx.stride(1), dx.stride(2), dx.stride(3), dx.stride(4), prob.d, prob.h, prob.w, M,
                prob.cg))  # fmt: skip
    num_m, num_n = cdiv(M, cfg.block_m), cdiv(prob.cg, cfg.block_n)
    k_tiles = prob.t * prob.r * prob.s * cdiv(prob.kg, cfg.block_k)
    fns = (l3.dgrad3d_dy_init, l3.dgrad3d_dy_load, l3.dgrad3d_w_init, l3.dgrad3d_w_load, l3.out3d_store)
    _launch(None, (num_m * num_n, prob.groups, 1), a, b, c, None, dx, 0, num_m, num_n, k_tiles, cfg, fns,
            False, prob)  # fmt: skip


def wgrad_config(prob: ConvProblem3d) -> Config:
    trsc = prob.t * prob.r * prob.s * prob.cg
    npq = prob.n * prob.od * prob.p * prob.q
    if interpreting():
        return Config(min(32, _small(prob.kg)), min(32, _small(trsc)), 16, 4, 1)
    if prob.dtype == torch.float64:
        bm, bn, bk, warps, stages = min(64, _small(prob.kg)), 32, 16, 4, 2
    else:
        bm, bn, bk, warps, stages = 64, 64, (64 if prob.dtype.itemsize == 2 else 32), 4, 3
    tiles = cdiv(prob.kg, bm) * cdiv(trsc, bn) * prob.groups
    split = max(1, min(64, (2 * sm_count()) // max(tiles, 1), cdiv(npq, bk) // 8))
    return Config(bm, bn, bk, warps, stages, split_k=split)


def wgrad(prob: ConvProblem3d, x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor, cfg: Config | None = None):
    """``dw [K, C/g, T, R, S]`` from ``x`` and ``dy``; the pixel reduction split over programs and
    summed in a fixed order (deterministic)."""
    cfg = cfg or wgrad_config(prob)
    trsc = prob.t * prob.r * prob.s * prob.cg
    npq = prob.n * prob.od * prob.p * prob.q
    sd, sh, sw = prob.stride
    pd, ph, pw = prob.pad
    dd, dh, dwl = prob.dilation
    a = (None, (dy, dy.stride(0), dy.stride(2), dy.stride(3), dy.stride(4), dy.stride(1), prob.od, prob.p, prob.q,
                npq, prob.kg))  # fmt: skip
    b = (None, (x, x.stride(0), x.stride(2), x.stride(3), x.stride(4), x.stride(1), prob.d, prob.h, prob.w, prob.od,
                prob.p, prob.q, npq, sd, sh, sw, pd, ph, pw, dd, dh, dwl, prob.r, prob.s, prob.cg, trsc))  # fmt: skip
    c = (None, (dw, *dw.stride(), prob.kg, prob.r, prob.s, prob.cg, trsc))
    num_m, num_n = cdiv(prob.kg, cfg.block_m), cdiv(trsc, cfg.block_n)
    k_tiles = cdiv(npq, cfg.block_k)
    ws = None
    if cfg.split_k > 1:
        acc_t = torch.float64 if prob.dtype == torch.float64 else torch.float32
        ws = split_k_buffers(dy.device, num_m * num_n * prob.groups, cfg.split_k, cfg.block_m * cfg.block_n, acc_t)
    fns = (l3.wgrad3d_dy_init, l3.wgrad3d_dy_load, l3.wgrad3d_x_init, l3.wgrad3d_x_load, l3.wgrad3d_dw_store)
    _launch(None, (num_m * num_n, prob.groups, cfg.split_k), a, b, c, None, dw, 0, num_m, num_n, k_tiles, cfg, fns,
            False, prob, ws)  # fmt: skip
