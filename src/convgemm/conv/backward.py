"""Backward convolution on the matmul blocks: the data gradient (dgrad) and the weight gradient
(wgrad), each one ``gemm_kernel`` launch with its own loaders (``conv/loaders.py``).

==========  ==========================  ==========================  ==========================
direction   GEMM (per group)            A / B                       store
==========  ==========================  ==========================  ==========================
dgrad       M = input pixels of one      dy gathered per phase tap /  dx, any strides
            stride phase, N = C/g,       w read in place
            K = (phase taps, K/g)
wgrad       M = K/g, N = (r, s, C/g),    dy^T gathered / im2col(x)    dw, any strides
            K = N*P*Q (split-K)          gathered, flat (r, s, c)
wgrad_tma   M = K/g, N = (r, s, Cp),     dy^T and im2col(x) as TMA    dw, any strides
            K = pixel blocks (split-K)   boxes of one pixel block
==========  ==========================  ==========================  ==========================

``wgrad_tma`` (Hopper, 16-bit, stride 1 or a strided 1x1 kernel, 16-byte aligned NHWC) is the
fast path; ``wgrad`` takes everything else.

All are deterministic: the only reduction that crosses programs is wgrad's split-K, whose
partials are summed in split order by one program (``matmul.blocks.split_k_reduce``).
"""

from __future__ import annotations

import threading

import torch

from .._runtime import cdiv, has_tma, interpreting, sm_count
from ..matmul.launch import descriptor
from ..problem import ConvProblem
from . import loaders as cl
from .fprop import Config, _launch, _small, input_descriptor, spatial_tiles, split_k_buffers
from .layout import as_nhwc, tma_aligned

_tables: dict = {}
_tables_lock = threading.Lock()


def phase_taps(r: int, stride: int, pad: int, dil: int) -> list[list[tuple[int, int]]]:
    """For each input phase ``f`` (input row h = f mod stride): the filter rows reaching it and, for
    each, the offset ``o`` with dy row ``p = (h - f) / stride + o``.

    Row h receives tap r from dy row p exactly when ``p * stride = h + pad - r * dil``; for
    ``h = f + stride * i`` that is ``p = i + (f + pad - r * dil) / stride`` when the division is
    exact, so the tap list depends on the phase only.
    """
    out = []
    for f in range(stride):
        taps = []
        for rr in range(r):
            num = f + pad - rr * dil
            if num % stride == 0:
                taps.append((rr, num // stride))
        out.append(taps)
    return out


def tap_table(r: int, stride: int, pad: int, dil: int, device: torch.device) -> tuple[torch.Tensor, int]:
    """``phase_taps`` as an int32 device tensor ``[stride, T, 2]`` of (r, offset) pairs, padded
    with (-1, 0) to the longest list ``T`` (at least 1); cached, since it is a pure function."""
    key = (r, stride, pad, dil, device)
    hit = _tables.get(key)
    if hit is None:
        taps = phase_taps(r, stride, pad, dil)
        t = max(1, max(len(x) for x in taps))
        rows = [x + [(-1, 0)] * (t - len(x)) for x in taps]
        hit = (torch.tensor(rows, dtype=torch.int32).to(device), t)
        with _tables_lock:
            _tables[key] = hit
    return hit


class Dgrad:
    """dx = conv2d's input gradient, per stride phase: no multiply-adds on inserted zeros."""

    name = "dgrad"

    def default_config(self, prob: ConvProblem) -> Config:
        bk = min(64, _small(prob.kg))
        if interpreting():
            return Config(32, min(32, _small(prob.cg)), min(32, bk), 4, 1)
        if prob.dtype == torch.float64:
            return Config(64, 32, 16, 4, 2)
        bn = min(128, _small(prob.cg, 32))
        return Config(128, bn, bk if prob.dtype.itemsize == 2 else min(bk, 32), 8 if bn >= 128 else 4, 3)

    def run(self, prob: ConvProblem, dy: torch.Tensor, w: torch.Tensor, dx: torch.Tensor, cfg: Config, launch=None):
        """``dx [N, C, H, W] = dgrad(dy [N, K, P, Q], w [K, C/g, R, S])``; any strides for all three."""
        sh, sw = prob.stride
        th, t_h = tap_table(prob.r, sh, prob.pad_h[0], prob.dilation[0], dy.device)
        tw, t_w = tap_table(prob.s, sw, prob.pad_w[0], prob.dilation[1], dy.device)
        hq, wq = cdiv(prob.h, sh), cdiv(prob.w, sw)
        M = prob.n * hq * wq
        n_phases = sh * sw
        a = (None, (dy, dy.stride(0), dy.stride(2), dy.stride(3), dy.stride(1), prob.p, prob.q, hq, wq, M, prob.kg,
                    n_phases, sw, th, tw, t_h, t_w))  # fmt: skip
        b = (None, (w, prob.kg, prob.cg, w.stride(0), w.stride(1), w.stride(2), w.stride(3), n_phases, sw, th, tw,
                    t_h, t_w))  # fmt: skip
        c = (None, (dx, dx.stride(0), dx.stride(1), dx.stride(2), dx.stride(3), prob.h, prob.w, hq, wq, M, prob.cg,
                    n_phases, sw, sh, sw))  # fmt: skip
        num_m, num_n = cdiv(M, cfg.block_m), cdiv(prob.cg, cfg.block_n)
        k_tiles = t_h * t_w * cdiv(prob.kg, cfg.block_k)
        fns = (cl.dgrad_dy_init, cl.dgrad_dy_load, cl.dgrad_w_init, cl.dgrad_w_load, cl.dgrad_dx_store)
        _launch(launch, (num_m * num_n, prob.groups * n_phases, 1), a, b, c, None, dx, 0, num_m, num_n, k_tiles,
                cfg, fns, False, prob)  # fmt: skip


class Wgrad:
    """dw = conv2d's weight gradient: a reduction over every output pixel, split over programs."""

    name = "wgrad"

    def default_config(self, prob: ConvProblem) -> Config:
        rsc = prob.r * prob.s * prob.cg
        npq = prob.n * prob.p * prob.q
        if interpreting():
            return Config(min(32, _small(prob.kg)), min(32, _small(rsc)), 16, 4, 1)
        if prob.dtype == torch.float64:
            bm, bn, bk, warps, stages = min(64, _small(prob.kg)), 32, 16, 4, 2
        else:
            # the gathers' 2-D masks and int64 offsets cost registers: 64x64 tiles on 4 warps
            # compile without spills (tools/sm90_check.py: 168 registers), 64x128x64 spills
            bm, bn, bk, warps, stages = 64, 64, (64 if prob.dtype.itemsize == 2 else 32), 4, 3
        tiles = cdiv(prob.kg, bm) * cdiv(rsc, bn) * prob.groups
        k_tiles = cdiv(npq, bk)
        # enough programs for two waves, each reducing at least 8 K tiles
        split = max(1, min(64, (2 * sm_count()) // max(tiles, 1), k_tiles // 8))
        return Config(bm, bn, bk, warps, stages, split_k=split)

    def run(self, prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor, cfg: Config, launch=None):
        """``dw [K, C/g, R, S] = wgrad(x [N, C, H, W], dy [N, K, P, Q])``; any strides for all three."""
        rsc = prob.r * prob.s * prob.cg
        npq = prob.n * prob.p * prob.q
        a = (None, (dy, dy.stride(0), dy.stride(2), dy.stride(3), dy.stride(1), prob.p, prob.q, npq, prob.kg))
        b = (None, (x, x.stride(0), x.stride(2), x.stride(3), x.stride(1), prob.h, prob.w, prob.p, prob.q, npq,
                    prob.stride[0], prob.stride[1], prob.pad_h[0], prob.pad_w[0], prob.dilation[0], prob.dilation[1],
                    prob.s, prob.cg, rsc))  # fmt: skip
        c = (None, (dw, dw.stride(0), dw.stride(1), dw.stride(2), dw.stride(3), prob.kg, prob.s, prob.cg, rsc))
        num_m, num_n = cdiv(prob.kg, cfg.block_m), cdiv(rsc, cfg.block_n)
        k_tiles = cdiv(npq, cfg.block_k)
        ws = None
        if cfg.split_k > 1:
            acc_t = torch.float64 if prob.dtype == torch.float64 else torch.float32
            ws = split_k_buffers(dy.device, num_m * num_n * prob.groups, cfg.split_k, cfg.block_m * cfg.block_n, acc_t)
        fns = (cl.wgrad_dy_init, cl.wgrad_dy_load, cl.wgrad_x_init, cl.wgrad_x_load, cl.wgrad_dw_store)
        _launch(launch, (num_m * num_n, prob.groups, cfg.split_k), a, b, c, None, dw, 0, num_m, num_n, k_tiles,
                cfg, fns, False, prob, ws)  # fmt: skip


class WgradTma:
    """wgrad through the copy engine: each K tile is one block of output pixels, read as a TMA
    box of dy and, shifted by the N tile's filter tap, a box of x (zero-filled at the edges)."""

    name = "wgrad_tma"

    def problem_ok(self, prob: ConvProblem, x: torch.Tensor) -> bool:
        """Whether the problem and device (not yet the tensors' alignment) suit this kernel."""
        return prob.dtype in (torch.float16, torch.bfloat16) and has_tma(x) and (prob.stride == (1, 1) or prob.is_1x1)

    def supports(self, prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor) -> str | None:
        """None if this kernel takes ``prob`` with NHWC ``x`` and ``dy``, else why not."""
        if prob.dtype not in (torch.float16, torch.bfloat16):
            return f"the TMA wgrad takes fp16 or bf16 (its dy^T operand is M-major), not {prob.dtype}"
        if not has_tma(x):
            return "the device has no TMA (needs compute capability >= 9.0)"
        if prob.stride != (1, 1) and not prob.is_1x1:
            return f"stride {prob.stride}: the TMA wgrad takes stride 1 (and unpadded strided 1x1 kernels)"
        if not tma_aligned(x, prob.cg) or not tma_aligned(dy, prob.kg):
            return "the NHWC input or grad_output is not 16-byte aligned (base, strides, or channels per group)"
        return None

    def default_config(self, prob: ConvProblem) -> Config:
        if interpreting():
            bm, bn, bk, warps, stages = min(32, _small(prob.kg)), min(32, _small(prob.cg)), 16, 4, 1
        else:
            bm = 128 if prob.kg >= 128 else 64
            bn = 128 if prob.cg >= 128 else min(64, _small(prob.cg))
            bk, warps, stages = 64, (8 if bm * bn >= 128 * 128 else 4), 4
        _, tn, th, tw = spatial_tiles(prob, bk)[0]
        tiles = cdiv(prob.kg, bm) * prob.r * prob.s * cdiv(prob.cg, bn) * prob.groups
        k_tiles = cdiv(prob.n, tn) * cdiv(prob.p, th) * cdiv(prob.q, tw)
        # enough programs for two waves, each reducing at least 4 pixel blocks
        split = max(1, min(64, (2 * sm_count()) // max(tiles, 1), k_tiles // 4))
        return Config(bm, bn, bk, warps, stages, split_k=split, tile_n=tn, tile_h=th, tile_w=tw)

    def run(self, prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor, cfg: Config, launch=None):
        """``dw [K, C/g, R, S] = wgrad(x, dy)`` for NHWC ``x [N, C, H, W]`` and ``dy [N, K, P, Q]``
        that ``supports`` accepted; dw may have any strides."""
        g, cg, kg = prob.groups, prob.cg, prob.kg
        box = [cfg.tile_n, cfg.tile_h, cfg.tile_w, 1]
        x_desc = input_descriptor(prob, x, box + [cfg.block_n])
        dy_desc = descriptor(
            dy, [prob.n, prob.p, prob.q, g, kg], [dy.stride(0), dy.stride(2), dy.stride(3), kg, 1], box + [cfg.block_m]
        )
        c_tiles = cdiv(cg, cfg.block_n)
        num_m, num_n = cdiv(kg, cfg.block_m), prob.r * prob.s * c_tiles
        k_tiles = cdiv(prob.n, cfg.tile_n) * cdiv(prob.p, cfg.tile_h) * cdiv(prob.q, cfg.tile_w)
        a = (dy_desc, (prob.p, prob.q))
        b = (x_desc, (prob.p, prob.q, prob.pad_h[0], prob.pad_w[0], prob.dilation[0], prob.dilation[1], prob.s,
                      c_tiles))  # fmt: skip
        c = (None, (dw, dw.stride(0), dw.stride(1), dw.stride(2), dw.stride(3), kg, prob.s, cg, c_tiles))
        ws = None
        if cfg.split_k > 1:
            ws = split_k_buffers(dy.device, num_m * num_n * g, cfg.split_k, cfg.block_m * cfg.block_n, torch.float32)
        fns = (cl.tma_wgrad_dy_init, cl.tma_wgrad_dy_load, cl.tma_wgrad_x_init, cl.tma_wgrad_x_load,
               cl.wgrad_dw_tap_store)  # fmt: skip
        _launch(launch, (num_m * num_n, g, cfg.split_k), a, b, c, None, dw, 0, num_m, num_n, k_tiles,
                cfg, fns, False, prob, ws)  # fmt: skip


class DepthwiseWgrad:
    """wgrad of a depthwise layer (one input channel per group): not a GEMM -- each weight is a
    dot product over every output pixel -- so a direct kernel (``conv/depthwise.py``), one tap per
    program, NHWC vectors along channels, fixed-order split sums."""

    name = "depthwise_wgrad"

    def config(self, prob: ConvProblem) -> tuple[int, int, int, int]:
        """(BLOCK_P, BLOCK_K, warps, splits)."""
        npq = prob.n * prob.p * prob.q
        if interpreting():
            return 16, min(32, _small(prob.k)), 4, min(3, cdiv(npq, 16))
        bk = min(64, _small(prob.k, 8))
        bp = 2048 // bk  # 2048-element tiles: 16 per thread on 4 warps
        programs = prob.r * prob.s * cdiv(prob.k, bk)
        split = max(1, min(cdiv(npq, 8 * bp), (4 * sm_count()) // max(programs, 1)))
        return bp, bk, 4, split

    def run(self, prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor, cfg=None) -> None:
        """``dw [K, 1, R, S]`` from ``x [N, C, H, W]`` and ``dy [N, K, P, Q]`` of any strides
        (``cfg`` is unused: the tiles come from ``config``)."""
        from .depthwise import depthwise_wgrad_kernel
        from .fprop import _run_kernel

        bp, bk, warps, split = self.config(prob)
        npq = prob.n * prob.p * prob.q
        per_split = cdiv(cdiv(npq, split), bp) * bp
        split = cdiv(npq, per_split)
        acc_t = torch.float64 if prob.dtype == torch.float64 else torch.float32
        taps = prob.r * prob.s
        ws = torch.empty((split, taps, prob.k), dtype=acc_t, device=x.device)
        grid = (taps, cdiv(prob.k, bk), split)
        args = (x, dy, ws, prob.h, prob.w, prob.p, prob.q, prob.k, prob.kg, npq, per_split,
                x.stride(0), x.stride(2), x.stride(3), x.stride(1), dy.stride(0), dy.stride(1), dy.stride(2),
                dy.stride(3), prob.stride[0], prob.stride[1], prob.pad_h[0], prob.pad_w[0], prob.dilation[0],
                prob.dilation[1], prob.s)  # fmt: skip
        constexprs = lambda: dict(BLOCK_P=bp, BLOCK_K=bk, ACC_F64=acc_t == torch.float64)  # noqa: E731
        _run_kernel(None, depthwise_wgrad_kernel, grid, args, constexprs, {"num_warps": warps, "num_stages": 2})
        # the splits summed in a fixed order; [taps, K] -> dw[k, 0, r, s]
        dw.copy_(ws.sum(0).t().reshape(dw.shape))


def choose_wgrad(prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor):
    """The wgrad kernel for ``prob``: ``(kernel, config, x, dy)`` with the tensors it reads.

    ``wgrad_tma`` on NHWC views (an NCHW tensor is copied: one pass over it costs less than the
    gather kernel's strided reads) when it applies, else the gather kernel on the tensors as given.
    """
    if prob.cg == 1 and prob.groups > 1:
        return DWGRAD, None, as_nhwc(x), as_nhwc(dy)
    if WGRAD_TMA.problem_ok(prob, x):
        xn, dyn = as_nhwc(x), as_nhwc(dy)
        if WGRAD_TMA.supports(prob, xn, dyn) is None:
            return WGRAD_TMA, WGRAD_TMA.default_config(prob), xn, dyn
    return WGRAD, WGRAD.default_config(prob), x, dy


def wgrad(prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor) -> None:
    """``dw [K, C/g, R, S] = wgrad(x [N, C, H, W], dy [N, K, P, Q])`` by ``choose_wgrad``'s kernel."""
    algo, cfg, x, dy = choose_wgrad(prob, x, dy)
    algo.run(prob, x, dy, dw, cfg)


DGRAD = Dgrad()
WGRAD = Wgrad()
WGRAD_TMA = WgradTma()
DWGRAD = DepthwiseWgrad()
