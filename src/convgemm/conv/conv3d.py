"""3-D convolution kernels: forward, dgrad and wgrad, each one ``gemm_kernel`` launch with the
gather loaders of ``conv/loaders3d.py`` (any stride, padding, dilation, groups and strides).

The general path takes everything. On Hopper, a dense (groups = 1) stride-1 forward instead
reads 5-D TMA boxes of the NDHWC input (``forward_tma``), as the 2-D TMA kernel does; persistent
tiles and tuning are not yet carried over to 3-D.
"""

from __future__ import annotations

import torch

from .._runtime import cdiv, has_tma, interpreting, sm_count
from ..matmul import loaders as mm
from ..matmul.launch import descriptor
from ..problem3d import ConvProblem3d
from . import loaders3d as l3
from .fprop import Config, _launch, _pow2_upto, _small, split_k_buffers


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


# ---------------------------------------------------------------- forward through TMA
def tma_supports(prob: ConvProblem3d, x: torch.Tensor) -> str | None:
    """None if ``forward_tma`` takes the problem with input ``x`` (NDHWC), else why not."""
    if prob.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return f"the TMA kernel takes fp16, bf16 or fp32, not {prob.dtype}"
    if not has_tma(x):
        return "the device has no TMA (needs compute capability >= 9.0)"
    if prob.groups != 1 or prob.stride != (1, 1, 1):
        return "the 3-D TMA kernel takes groups = 1 and stride 1"
    e = x.element_size()
    if x.stride(1) != 1 or x.data_ptr() % 16 or any((x.stride(i) * e) % 16 for i in (0, 2, 3, 4)):
        return "the NDHWC input is not 16-byte aligned"
    if (prob.k * e) % 16:
        return "K * itemsize must be a multiple of 16 bytes for the TMA output store"
    return None


def spatial_tiles3(prob: ConvProblem3d, block_n: int) -> tuple[int, int, int]:
    """The (depth, rows, columns) = ``block_n`` block of output pixels that wastes the least."""
    best = None
    for td in _pow2_upto(block_n):
        for th in _pow2_upto(block_n // td):
            tw = block_n // (td * th)
            if max(td, th, tw) > 256:
                continue
            tiled = cdiv(prob.od, td) * td * cdiv(prob.p, th) * th * cdiv(prob.q, tw) * tw
            key = (tiled, -tw)  # least padding, then the longest rows
            if best is None or key < best[0]:
                best = (key, (td, th, tw))
    return best[1]


def tma_config(prob: ConvProblem3d) -> Config:
    cap = 64 if prob.dtype.itemsize == 2 else 32
    bk = next((b for b in (cap, cap // 2, cap // 4) if b >= 16 and prob.c % b == 0), min(cap, _small(prob.c)))
    if interpreting():
        bm, bn, warps, stages = min(32, _small(prob.k)), 32, 4, 1
        bk = min(bk, 32)
    else:
        bm = 128 if prob.k >= 128 else 64
        bn, warps = 128, (8 if bm == 128 else 4)
        stages = 4 if 4 * (bm + bn) * bk * prob.dtype.itemsize + bm * bn * prob.dtype.itemsize <= 200_000 else 3
    td, th, tw = spatial_tiles3(prob, bn)
    return Config(bm, bn, bk, warps, stages, tile_n=td, tile_h=th, tile_w=tw)


def _ktrsc(w: torch.Tensor, cp: int) -> torch.Tensor:
    """``w [K, C, T, R, S]`` as a dense ``[K, T*R*S*Cp]`` matrix: a view of a channels_last_3d
    weight whose C is Cp, else a zero-padded copy."""
    k, c, t, r, s = w.shape
    v = w.permute(0, 2, 3, 4, 1)
    if c == cp and v.is_contiguous() and w.data_ptr() % 16 == 0:
        return v.reshape(k, t * r * s * c)
    out = w.new_zeros((k, t * r * s, cp))
    out[:, :, :c] = v.reshape(k, t * r * s, c)
    return out.view(k, -1)


def forward_tma(prob: ConvProblem3d, x: torch.Tensor, w: torch.Tensor, bias, y: torch.Tensor, cfg=None) -> None:
    """``forward`` through the copy engine, for problems ``tma_supports`` accepts."""
    cfg = cfg or tma_config(prob)
    cp = cdiv(prob.c, cfg.block_k) * cfg.block_k
    wp = _ktrsc(w, cp)
    box = [1, cfg.tile_n, cfg.tile_h, cfg.tile_w]
    x_desc = descriptor(x, [prob.n, prob.d, prob.h, prob.w, prob.c],
                        [x.stride(0), x.stride(2), x.stride(3), x.stride(4), 1], box + [cfg.block_k])  # fmt: skip
    w_desc = descriptor(wp, [prob.k, wp.shape[1]], [wp.stride(0), 1], [cfg.block_m, cfg.block_k])
    yo = y if y.is_contiguous(memory_format=torch.channels_last_3d) else torch.empty_like(
        y, memory_format=torch.channels_last_3d)  # fmt: skip
    y_desc = descriptor(yo, [prob.n, prob.od, prob.p, prob.q, prob.k],
                        [yo.stride(0), yo.stride(2), yo.stride(3), yo.stride(4), 1], box + [cfg.block_m])  # fmt: skip
    num_m = cdiv(prob.k, cfg.block_m)
    num_n = prob.n * cdiv(prob.od, cfg.tile_n) * cdiv(prob.p, cfg.tile_h) * cdiv(prob.q, cfg.tile_w)
    pd, ph, pw = prob.pad
    dd, dh, dw = prob.dilation
    c_tiles = cp // cfg.block_k
    a = (w_desc, (prob.k,))
    b = (x_desc, (prob.od, prob.p, prob.q, pd, ph, pw, dd, dh, dw, prob.r, prob.s, c_tiles))
    c = (y_desc, (prob.od, prob.p, prob.q))
    fns = (mm.desc2d_init, mm.desc2d_a_load, l3.tma_im2col3d_init, l3.tma_im2col3d_load, l3.tma_output3d_store)
    _launch(None, (num_m * num_n, 1, 1), a, b, c, bias, yo, prob.k, num_m, num_n, prob.t * prob.r * prob.s * c_tiles,
            cfg, fns, True, prob)  # fmt: skip
    if yo is not y:
        y.copy_(yo)
