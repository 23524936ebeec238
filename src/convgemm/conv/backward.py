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

``wgrad_tma`` (Hopper, 16-bit, 16-byte aligned NHWC; stride 1, a strided 1x1 kernel, or a
strided kernel with groups = 1, C a multiple of 64 and H, W multiples of the stride, read
through a phase view of x) is the fast path; ``wgrad`` takes everything else.

All are deterministic: the only reduction that crosses programs is wgrad's split-K, whose
partials are summed in split order by one program (``matmul.blocks.split_k_reduce``).
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace

import torch

from .._runtime import cdiv, has_tma, interpreting, may_cache, sm_count
from ..matmul.launch import Launch, aux_of, descriptor
from ..problem import ConvProblem
from . import loaders as cl
from .fprop import (
    Algorithm,
    Config,
    DepthwiseRows,
    _launch,
    _small,
    input_descriptor,
    pdl_enabled,
    phase_descriptor,
    spatial_tiles,
    split_k_buffers,
    strided_taps,
    strided_tma_enabled,
)
from .layout import as_nhwc, tma_aligned
from .wgrad_taps import taps_per_program
from .ws_replay import fast_ready, ws_wgrad3d_replay

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
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            # a host-to-device copy cannot be captured: write the values with device kernels
            table = torch.zeros(stride * t * 2, dtype=torch.int32, device=device)
            for i, v in enumerate(v for row in rows for pair in row for v in pair):
                if v:
                    table[i].fill_(v)
            hit = (table.view(stride, t, 2), t)
        else:
            hit = (torch.tensor(rows, dtype=torch.int32).to(device), t)
        if may_cache(device):
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


def _phase_order(prob: ConvProblem) -> int:
    """DgradTma's stride phases, most taps first, packed 4 bits each (``loaders._phase_of``): the
    block scheduler starts programs in grid order, and each phase runs only its own taps (a 3x3
    stride-2 layer: 4, 2, 2 and 1), so the longest go first and the shortest fill the tail."""
    sh, sw = prob.stride
    th = [len(t) for t in phase_taps(prob.r, sh, prob.pad_h[0], 1)]
    tw = [len(t) for t in phase_taps(prob.s, sw, prob.pad_w[0], 1)]
    phases = sorted(range(sh * sw), key=lambda f: (-th[f // sw] * tw[f % sw], f))
    return sum(f << (4 * i) for i, f in enumerate(phases))


class DgradTma:
    """Strided dgrad on the TMA implicit GEMM, one launch: the grid's batch axis walks the stride
    phases of dx, each program multiplies the flipped weight by dy boxes shifted by its phase's
    taps (``loaders.tma_dgrad_*``) and stores into dx's stride-phase view. Dilation 1, groups 1,
    H and W multiples of the stride, channel counts that tile exactly. On unless
    ``CONVGEMM_STRIDED_TMA=0``: on the H200 (session 8, ``tools/dgrad_sweep.py``) it took 88-96 us
    on ResNet-50's three strided 3x3 layers where the gather kernel took 140-165 us."""

    name = "dgrad_tma"

    @staticmethod
    def _bm(prob: ConvProblem) -> int:
        return next((b for b in (128, 64, 32, 16) if prob.c % b == 0 and (b <= 32 or not interpreting())), 0)

    @staticmethod
    def _bk(prob: ConvProblem) -> int:
        cap = 64 if prob.dtype.itemsize == 2 else 32
        return next((b for b in (cap, cap // 2, 16) if b >= 16 and prob.k % b == 0), 0)

    def supports(self, prob: ConvProblem, dy: torch.Tensor) -> str | None:
        """None if this kernel takes ``prob`` with NHWC ``dy``, else why not."""
        if not strided_tma_enabled():
            return "CONVGEMM_STRIDED_TMA=0 turned it off"
        if prob.stride == (1, 1) or prob.groups != 1 or prob.dilation != (1, 1):
            return "strided layers with groups 1 and dilation 1 only"
        if prob.is_1x1:
            # its programs of tapless phases store zeros and no memset is needed, yet on the H200
            # (session 15, tools/dgrad_sweep.py, ResNet-50's three downsample layers) its best
            # tiles took 96, 83 and 89 us where the per-phase forward took 106, 65 and 51 us
            return "a strided unpadded 1x1 kernel: the per-phase forward convolution is faster"
        if prob.dtype not in (torch.float16, torch.bfloat16, torch.float32) or not has_tma(dy):
            return f"TMA with fp16, bf16 or fp32 (not {prob.dtype}, or no TMA on this device)"
        if prob.h % prob.stride[0] or prob.w % prob.stride[1]:
            return f"input {prob.h}x{prob.w} is not a multiple of the stride {prob.stride} (the phase view)"
        if prob.stride[0] * prob.stride[1] > 15:
            return f"stride {prob.stride}: at most 15 stride phases (the phase order packs 4 bits per phase)"
        if not self._bm(prob) or not self._bk(prob):
            return f"C={prob.c} and K={prob.k} must be multiples of 16"
        if not tma_aligned(dy, prob.kg):
            return "grad_output is not 16-byte aligned for TMA"
        return None

    def default_config(self, prob: ConvProblem) -> Config:
        sh, sw = prob.stride
        dims = (prob.n, prob.h // sh, prob.w // sw)
        bm, bk = self._bm(prob), self._bk(prob)
        if interpreting():
            _, tn, th, tw = spatial_tiles(prob, 32, dims)[0]
            return Config(bm, 32, bk, 4, 1, tile_n=tn, tile_h=th, tile_w=tw)
        # tools/dgrad_sweep.py on the H200 (session 8, bf16, ResNet-50's strided 3x3 layers at
        # batch 64): 128x256 tiles on 8 warps, 4 stages took 88-96 us where the old 128x128 default
        # took 118-257 us; 64x128 on 4 warps, 3 stages was the best 64-channel tile (94-101 us).
        # Among pixel blocks the fast ones held 32-64 images and at most 4 columns (t32x2x4 at
        # 28x28, t64x2x2 at 14x14, t64x1x4 at 7x7), twice as fast as t32x1x8 at 7x7.
        bn, warps, stages = (256, 8, 4) if bm == 128 else (128, 4, 3)
        if prob.dtype == torch.float32 and prob.precision == "tf32x3":
            # strict fp32's three products a K step need their operands split in registers:
            # 128x256 at 4 stages asks 245 KB of shared memory (over the SM's 227) and spills
            # (sm_90, tools/compile_call.py --direction dgrad --dtype ieee); 128x128 takes 147 KB,
            # 214 registers, no spills
            bn, stages = 128, 4 if bm == 128 else 3
        tiles = spatial_tiles(prob, bn, dims)
        shaped = [t for t in tiles if 32 <= t[1] <= 64 and t[3] <= 4]
        good = next((g for f in (0.99, 0.85) if (g := [t for t in shaped if t[0] >= f * tiles[0][0]])), tiles[:1])
        _, tn, th, tw = min(good, key=lambda t: (-t[3], t[1]))
        return Config(bm, bn, bk, warps, stages, tile_n=tn, tile_h=th, tile_w=tw)

    def configs(self, prob: ConvProblem) -> list[Config]:
        """What the tuner times (``tuned_dgrad_tma``): the default, and the tiles session 8's sweep
        ranked next (128 x 256 at 3 stages, 128 x 128, 64 x 128 on 4 warps, 64 x 256), each with
        the best-covering pixel block of its width. Session 8 timed them with ``do_bench``, which
        on that host counted launch time as GPU time, so the default was chosen on noisy numbers
        (``tools/dgrad_sweep.py``); the tuner's timer is the benchmark's. Strict fp32 (3xTF32)
        keeps to 128-wide tiles (wider ones spill or overflow shared memory)."""
        default = self.default_config(prob)
        if interpreting():
            return [default]
        sh, sw = prob.stride
        dims = (prob.n, prob.h // sh, prob.w // sw)
        bm, bk = self._bm(prob), self._bk(prob)
        strict = prob.dtype == torch.float32 and prob.precision == "tf32x3"
        out = [default]
        for m, n, warps, stages in ((128, 256, 8, 3), (128, 128, 8, 4), (64, 128, 4, 3), (64, 256, 4, 3)):
            if (m == 128 and bm != 128) or (strict and n > 128) or prob.c % m:
                continue
            _, tn, th, tw = spatial_tiles(prob, n, dims)[0]
            cfg = Config(m, n, bk, warps, stages, tile_n=tn, tile_h=th, tile_w=tw)
            if cfg not in out:
                out.append(cfg)
        return out

    def run(self, prob: ConvProblem, dy: torch.Tensor, w: torch.Tensor, dx: torch.Tensor, cfg: Config, launch=None):
        """``dx [N, C, H, W]`` (dense channels_last) from NHWC ``dy`` and ``w [K, C, R, S]``."""
        from ..functional import _flipped_weight

        c, k, r, s = prob.c, prob.k, prob.r, prob.s
        # [C, K, R, S] channels_last is [C][R][S][K] in memory: this reshape is a view
        w2 = _flipped_weight(prob, w, True).permute(0, 2, 3, 1).reshape(c, r * s * k)
        if launch is not None and launch.fast_ready:
            launch.fast((w2, dy, dx, dx, dx, dx))
            return
        sh, sw = prob.stride
        hs, ws = prob.h // sh, prob.w // sw
        w_desc = descriptor(w2, [c, r * s * k], [r * s * k, 1], [cfg.block_m, cfg.block_k])
        dy_desc = _dy_descriptor(prob, dy, cfg, cfg.block_k)
        # dx through the forward input's stride-phase view (the same geometry; boxes of block_m channels)
        dx_desc = phase_descriptor(prob, dx, [cfg.tile_n, cfg.tile_h, cfg.tile_w, 1, cfg.block_m])
        k_per_tap, th_max, tw_max = k // cfg.block_k, cdiv(r, sh), cdiv(s, sw)
        pads = (prob.pad_h[0], prob.pad_w[0])
        order = _phase_order(prob)
        a = (w_desc, (r, s, sh, sw, *pads, k, k_per_tap, tw_max, order))
        b = (dy_desc, (hs, ws, r, s, sh, sw, *pads, k_per_tap, tw_max, order))
        c_ = (dx_desc, (hs, ws, sw, c, order))
        num_m = c // cfg.block_m
        num_n = cdiv(prob.n, cfg.tile_n) * cdiv(hs, cfg.tile_h) * cdiv(ws, cfg.tile_w)
        fns = (cl.tma_dgrad_w_init, cl.tma_dgrad_w_load, cl.tma_dgrad_dy_init, cl.tma_dgrad_dy_load,
               cl.tma_dgrad_dx_store, cl.tma_dgrad_k_range)  # fmt: skip
        _launch(launch, (num_m * num_n, sh * sw, 1), a, b, c_, None, dx, 0, num_m, num_n,
                th_max * tw_max * k_per_tap, cfg, fns, True, prob)  # fmt: skip


class Wgrad:
    """dw = conv2d's weight gradient: a reduction over every output pixel, split over programs."""

    name = "wgrad"

    def configs(self, prob: ConvProblem) -> list[Config]:
        """The default (the fallback the TMA kernels are timed against) and, for 16-bit layers
        with at most 16 outputs per group (``narrow``), tiles that fit them: 16 rows (mma.sync),
        long pixel blocks and many splits. Such layers (CRAFT's 16 -> 2 head) move a few MB and
        do almost no arithmetic, so the time is the latency of each program's pixel loop."""
        out = [self.default_config(prob)]
        if interpreting() or not self.narrow(prob):
            return out
        rsc = prob.r * prob.s * prob.cg
        npq = prob.n * prob.p * prob.q
        bm = 16
        # (on sm_90 a 16x64 tile of 128 pixels spills, tools/compile_call.py)
        for bn, bk, stages in ((min(32, _small(rsc)), 128, 3), (min(32, _small(rsc)), 256, 2)):
            tiles = cdiv(prob.kg, bm) * cdiv(rsc, bn) * prob.groups
            split = max(1, min(256, (4 * sm_count()) // max(tiles, 1), cdiv(npq, bk) // 2))
            cfg = Config(bm, bn, bk, 4, stages, split_k=split)
            out += [cfg, replace(cfg, reduce=1)] if split > 1 else [cfg]
        return list(dict.fromkeys(out))

    @staticmethod
    def narrow(prob: ConvProblem) -> bool:
        """Whether ``configs`` offers the narrow tiles: 16-bit, at most 16 outputs per group (the
        16-row tiles the H200 has run; 32-row ones have not been)."""
        return prob.dtype.itemsize == 2 and prob.kg <= 16

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
                cfg, fns, False, prob, ws, pdl=reduce_pdl(cfg))  # fmt: skip
        if cfg.reduce and cfg.split_k > 1:
            finish_split_k(launch, ws[0], c, num_m, num_n, prob.groups, cfg, cl.wgrad_dw_store)


def _dy_descriptor(prob: ConvProblem, dy: torch.Tensor, cfg: Config, channels: int = 0):
    """NHWC dy as ``[N, P, Q, groups, K/groups]``, box: the config's pixel block x ``channels``
    (default ``block_m``: wgrad's M is K; dgrad's reduction is, in ``block_k`` tiles)."""
    kg = prob.kg
    return descriptor(
        dy,
        [prob.n, prob.p, prob.q, prob.groups, kg],
        [dy.stride(0), dy.stride(2), dy.stride(3), kg, 1],
        [cfg.tile_n, cfg.tile_h, cfg.tile_w, 1, channels or cfg.block_m],
    )


def _wgrad_dy_descriptor(prob: ConvProblem, dy: torch.Tensor, cfg: Config):
    """NHWC dy as ``[N, P, Q, K]`` (groups folded into the channel coordinate), box: the config's
    pixel block x ``block_m`` channels. Four dimensions, not ``_dy_descriptor``'s five: with a
    row-segment pixel block the box is ``[1, 1, TILE_W, BLOCK_M]``, which wgmma reads transposed
    from shared memory (``loaders.tma_wgrad_dy_load``)."""
    return descriptor(
        dy,
        [prob.n, prob.p, prob.q, prob.k],
        [dy.stride(0), dy.stride(2), dy.stride(3), 1],
        [cfg.tile_n, cfg.tile_h, cfg.tile_w, cfg.block_m],
    )


def flat_1x1(prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor):
    """A stride-1 unpadded 1x1 layer over evenly strided NHWC pixels as one image of one row of
    ``N*H*W`` pixels: ``(problem, x view, dy view)``, or None when ``prob`` or the strides do not
    allow it. Its weight gradient is the same sum over the same pixels, and any block of
    ``BLOCK_K`` consecutive pixels is a one-row TMA box (no zero-filled columns, and the
    transposed dy box that wgmma reads from shared memory)."""
    flat = _flat_prob(prob)
    if flat is prob:
        return None
    px = flat.w
    views = []
    for t in (x, dy):
        n, _, h, w = t.shape
        s3 = t.stride(3)
        if (h > 1 and t.stride(2) != w * s3) or (n > 1 and t.stride(0) != h * w * s3):
            return None
        views.append(t.as_strided((1, t.shape[1], 1, px), (px * s3, t.stride(1), px * s3, s3)))
    return flat, views[0], views[1]


def _flat_prob(prob: ConvProblem) -> ConvProblem:
    """The problem ``flat_1x1`` would run (for choosing tiles before the tensors are seen)."""
    if prob.is_1x1 and prob.stride == (1, 1) and prob.n * prob.h > 1:
        return replace(prob, n=1, h=1, w=prob.n * prob.h * prob.w)
    return prob


class WgradTma:
    """wgrad through the copy engine: each K tile is one block of output pixels, read as a TMA
    box of dy and, shifted by the N tile's filter tap, a box of x (zero-filled at the edges).

    Strided layers (H and W multiples of the stride, channels per group a multiple of 64) read x
    through one descriptor over ``[N, H/sh, sh, W/sw, sw*C]`` (``loaders.tma_wgrad_xs_init``):
    each tap is a stride-1 box of one row phase and one column phase."""

    name = "wgrad_tma"

    def problem_ok(self, prob: ConvProblem, x: torch.Tensor) -> bool:
        """Whether the problem and device (not yet the tensors' alignment) suit this kernel."""
        if prob.dtype not in (torch.float16, torch.bfloat16) or not has_tma(x):
            return False
        return not strided_taps(prob) or self._strided_reason(prob) is None

    @staticmethod
    def _strided_reason(prob: ConvProblem) -> str | None:
        sh, sw = prob.stride
        if prob.h % sh or prob.w % sw:
            return f"input {prob.h}x{prob.w} is not a multiple of the stride {prob.stride} (the phase view)"
        if prob.cg % 64:
            # a channel block of the phase view must not run into the next group's or phase's
            return f"C/groups={prob.cg}: the strided TMA wgrad takes channel counts per group that are multiples of 64"
        return None

    def supports(self, prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor) -> str | None:
        """None if this kernel takes ``prob`` with NHWC ``x`` and ``dy``, else why not."""
        if prob.dtype not in (torch.float16, torch.bfloat16):
            return f"the TMA wgrad takes fp16 or bf16 (its dy^T operand is M-major), not {prob.dtype}"
        if not has_tma(x):
            return "the device has no TMA (needs compute capability >= 9.0)"
        if strided_taps(prob):
            reason = self._strided_reason(prob)
            if reason:
                return reason
            if x.stride(3) != prob.c:
                return "the strided TMA wgrad needs densely packed NHWC pixels (x.stride(3) == C)"
        if not tma_aligned(x, prob.cg) or not tma_aligned(dy, prob.kg):
            return "the NHWC input or grad_output is not 16-byte aligned (base, strides, or channels per group)"
        return None

    @classmethod
    def tile_ok(cls, prob: ConvProblem, bm: int, bn: int) -> bool:
        """Whether a ``bm x bn`` tile suits ``prob``: 128 rows only past 64 output channels, a
        128- or 256-wide tile only where there are that many input channels, 256 wide only at
        stride 1, and ``_bn_ok``."""
        # 128x256 on ResNet-50's strided 1x1 shortcut (a 16x2x2 pixel block of the subsampled
        # view) gave a 0.18 relative error on the H200 (session 20; the interpreter's result was
        # right, so the fault is in the compiled kernel, not found); stride 1 passes the GPU tests
        if bn == 256 and prob.stride != (1, 1):
            return False
        return not (bm == 128 and prob.kg <= 64) and not (bn >= 128 and prob.cg < bn) and cls._bn_ok(prob, bn)

    @staticmethod
    def _bn_ok(prob: ConvProblem, bn: int) -> bool:
        # the phase view folds the column phase into the channel coordinate: a channel block
        # must not run into the next phase's channels
        return not strided_taps(prob) or prob.cg % bn == 0

    def default_config(self, prob: ConvProblem) -> Config:
        if interpreting():
            bm, bn, bk, warps, stages = min(32, _small(prob.kg)), min(32, _small(prob.cg)), 16, 4, 1
        elif prob.cg >= 64 and self._bn_ok(prob, 64):
            # the most frequent winner of session 14's tuning (18 of 46 ResNet-50 and CRAFT layers)
            bm, bn, bk, warps, stages = 64, 64, 128, 4, 3
        else:
            bm, bn, bk, warps, stages = 64, min(64, _small(prob.cg)), 64, 4, 4
        return self._shaped(prob, bm, bn, bk, warps, stages)

    @staticmethod
    def _shaped(prob: ConvProblem, bm: int, bn: int, bk: int, warps: int, stages: int, taps: int = 0,
                tile: tuple[int, int, int] | None = None) -> Config:  # fmt: skip
        """A config of this tile shape: the best-covering block of ``bk`` output pixels (or
        ``tile``), and the split count that gives two waves of programs, each reducing at least 4
        pixel blocks. Tiles are chosen on the problem ``flat_1x1`` runs (one row of pixels for an
        unpadded stride-1 1x1 layer)."""
        prob = _flat_prob(prob)
        tn, th, tw = tile or spatial_tiles(prob, bk)[0][1:]
        taps_n = prob.s if taps <= 1 else cdiv(prob.s, taps)  # N tiles per filter row
        tiles = cdiv(prob.kg, bm) * prob.r * taps_n * cdiv(prob.cg, bn) * prob.groups
        k_tiles = cdiv(prob.n, tn) * cdiv(prob.p, th) * cdiv(prob.q, tw)
        split = max(1, min(64, (2 * sm_count()) // max(tiles, 1), k_tiles // 4))
        return Config(bm, bn, bk, warps, stages, split_k=split, tile_n=tn, tile_h=th, tile_w=tw, taps=taps)

    def configs(self, prob: ConvProblem) -> list[Config]:
        """The default and a few tile shapes around it, each with the split count that fills two
        waves and half of it (fewer, longer reductions); the large tiles also with their partials
        summed by a second kernel (``reduce``); several taps per program (``_taps_configs``)."""
        if interpreting():
            return [self.default_config(prob)]
        out = [self.default_config(prob)]
        # (block_m = output channels, block_n = input channels of one tap, block_k = pixels,
        # warps, stages, reduce, both split counts); 128-row tiles take two warpgroups. Pruned
        # by session 14's tuner logs (46 layers): 64x64x64, 128x64 and the 128-wide tiles
        # without `reduce` never came within 5% of a layer's best
        # 128x256 on 4 stages (196 KB of shared memory, one program per SM as on 3): in session
        # 15's sweep (tools/wgrad_sweep.py) it beat 3 stages on ResNet's 1x1 layers at 14x14,
        # 33.7 against 36.7 us and 27.7 against 28.8 us, both at half the two-wave split
        for bm, bn, bk, warps, stages, red, halves in ((64, 64, 128, 4, 3, 0, True), (64, 128, 64, 4, 3, 0, True),
                                                       (128, 128, 64, 8, 3, 1, True), (128, 128, 128, 8, 2, 1, False),
                                                       (128, 256, 64, 8, 4, 1, True)):  # fmt: skip
            if not self.tile_ok(prob, bm, bn):
                continue
            cfg = self._shaped(prob, bm, bn, bk, warps, stages)
            # `reduce`: a 64-128 KB fp32 tile split many ways; one program's serial sum of the
            # partials would be the launch's tail (128x128 with 29 splits lost to 64x64 with 7)
            cfg = replace(cfg, reduce=red if cfg.split_k > 1 else 0)
            out += [cfg, replace(cfg, split_k=max(1, cfg.split_k // 2))] if halves else [cfg]
        if self.few_tiles(prob):
            # one or a few output tiles and a long reduction (CRAFT's 16 -> 16 head at 384x384):
            # twice the two-wave split, summed by the second kernel; session 15's sweep timed
            # 64x64x128 on 4 stages with 128 splits at 17.5 us where the tuner's best took 29.4
            cfg = self._shaped(prob, 64, 64, 128, 4, 4)
            out.append(replace(cfg, split_k=min(256, 2 * cfg.split_k), reduce=1))
        out += self._taps_configs(prob)
        return list(dict.fromkeys(out))

    @staticmethod
    def few_tiles(prob: ConvProblem) -> bool:
        """At most four 64x64 output tiles in all (``configs``' many-split candidate)."""
        return cdiv(prob.kg, 64) * cdiv(prob.cg, 64) * prob.r * prob.s * prob.groups <= 4

    def _taps_configs(self, prob: ConvProblem) -> list[Config]:
        """Several filter columns per program (``conv/wgrad_taps.py``), for stride-1 filters at
        least two columns wide: one accumulator per column, so a 64x64 tile on 4 warps (32
        registers per accumulator and thread)."""
        if strided_taps(prob) or prob.s < 2:
            return []
        # (64x64x128 on 2 stages and 64x128 on 8 warps never came within 5% of the best in
        # session 14's logs; this one won 4 of 19 layers with taps)
        return [self._shaped(prob, 64, 64, 64, 4, 3, taps_per_program(prob.s))]

    def run(self, prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor, cfg: Config, launch=None):
        """``dw [K, C/g, R, S] = wgrad(x, dy)`` for NHWC ``x [N, C, H, W]`` and ``dy [N, K, P, Q]``
        that ``supports`` accepted; dw may have any strides.

        With a ``launch`` handle of a plan (same shapes, strides and config on every call), repeat
        calls hand only the tensors to the compiled kernel (``Launch.fast``)."""
        if launch is not None and launch.fast_ready:
            split = launch.extra
            ws, locks = split_k_buffers(dy.device, *split) if split else (dw, dw)
            # the kernel's tensors in argument order: dy (descriptor), x (descriptor), dw (store
            # tuple), dw (gemm_kernel's unused bias slot), the split-K workspace and counters
            launch.fast((dy, x, dw, ws, locks) if cfg.taps > 1 else (dy, x, dw, dw, ws, locks))
            if launch.aux is not None:  # split_k_finish_kernel: the workspace, dw (store tuple)
                launch.aux.fast((ws, dw))
            return
        flat = flat_1x1(prob, x, dy)
        if flat is not None:
            prob, x, dy = flat
        if cfg.taps > 1:
            self._run_taps(prob, x, dy, dw, cfg, launch)
            return
        g, cg, kg = prob.groups, prob.cg, prob.kg
        box = [cfg.tile_n, cfg.tile_h, cfg.tile_w, 1]
        c_tiles = cdiv(cg, cfg.block_n)
        # [N, H, W, groups, C/groups], or for a strided R x S layer the stride-phase view
        x_desc = input_descriptor(prob, x, box + [cfg.block_n])
        if strided_taps(prob):
            sh, sw = prob.stride
            pads = (prob.pad_h[0], prob.pad_w[0])
            b = (x_desc, (prob.p, prob.q, *pads, prob.dilation[0], prob.dilation[1], prob.s, c_tiles, sh, sw, prob.c,
                          sh * cdiv(pads[0], sh), sw * cdiv(pads[1], sw), cg))  # fmt: skip
            x_fns = (cl.tma_wgrad_xs_init, cl.tma_wgrad_xs_load)
        else:
            b = (x_desc, (prob.p, prob.q, prob.pad_h[0], prob.pad_w[0], prob.dilation[0], prob.dilation[1], prob.s,
                          c_tiles))  # fmt: skip
            x_fns = (cl.tma_wgrad_x_init, cl.tma_wgrad_x_load)
        dy_desc = _wgrad_dy_descriptor(prob, dy, cfg)
        num_m, num_n = cdiv(kg, cfg.block_m), prob.r * prob.s * c_tiles
        k_tiles = cdiv(prob.n, cfg.tile_n) * cdiv(prob.p, cfg.tile_h) * cdiv(prob.q, cfg.tile_w)
        a = (dy_desc, (prob.p, prob.q, kg))
        c = (None, (dw, dw.stride(0), dw.stride(1), dw.stride(2), dw.stride(3), kg, prob.s, cg, c_tiles))
        ws, split = None, None
        if cfg.split_k > 1:
            split = (num_m * num_n * g, cfg.split_k, cfg.block_m * cfg.block_n, torch.float32)
            ws = split_k_buffers(dy.device, *split)
        fns = (cl.tma_wgrad_dy_init, cl.tma_wgrad_dy_load, *x_fns, cl.wgrad_dw_tap_store)
        _launch(launch, (num_m * num_n, g, cfg.split_k), a, b, c, None, dw, 0, num_m, num_n, k_tiles,
                cfg, fns, False, prob, ws, pdl=reduce_pdl(cfg))  # fmt: skip
        if cfg.reduce and cfg.split_k > 1:
            finish_split_k(launch, ws[0], c, num_m, num_n, g, cfg, cl.wgrad_dw_tap_store)
        if launch is not None:
            launch.extra = split

    def _run_taps(self, prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor, cfg: Config, launch):
        from .fprop import _run_kernel
        from .wgrad_taps import wgrad_taps_kernel

        assert not strided_taps(prob) and cfg.taps > 1, "the taps kernel takes stride-1 (or 1x1-free) problems"
        g, cg, kg = prob.groups, prob.cg, prob.kg
        box = [cfg.tile_n, cfg.tile_h, cfg.tile_w, 1]
        x_desc = input_descriptor(prob, x, box + [cfg.block_n])
        dy_desc = _wgrad_dy_descriptor(prob, dy, cfg)
        c_tiles = cdiv(cg, cfg.block_n)
        num_m, num_n = cdiv(kg, cfg.block_m), prob.r * cdiv(prob.s, cfg.taps) * c_tiles
        k_tiles = cdiv(prob.n, cfg.tile_n) * cdiv(prob.p, cfg.tile_h) * cdiv(prob.q, cfg.tile_w)
        split = None
        ws = locks = dw
        if cfg.split_k > 1:
            split = (num_m * num_n * g * cfg.taps, cfg.split_k, cfg.block_m * cfg.block_n, torch.float32)
            ws, locks = split_k_buffers(dy.device, *split)
        args = (dy_desc, x_desc, dw, ws, locks, prob.p, prob.q, prob.pad_h[0], prob.pad_w[0], prob.dilation[0],
                prob.dilation[1], prob.s, kg, cg, c_tiles, dw.stride(0), dw.stride(1), dw.stride(2), dw.stride(3),
                num_m, num_n, k_tiles)  # fmt: skip

        def constexprs():
            return dict(BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
                        TAPS=cfg.taps, UPCAST=interpreting(), SPLIT_K=cfg.split_k)  # fmt: skip

        grid = (num_m * num_n, g, cfg.split_k)
        _run_kernel(launch, wgrad_taps_kernel, grid, args, constexprs,
                    {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages})  # fmt: skip
        if launch is not None:
            launch.extra = split


class DepthwiseWgrad:
    """Direct wgrad for depthwise and narrow groups (``narrow``: C/g = 1, or C/g and K/g both at
    most 8, as ResNeXt's 4..8): not a GEMM -- each weight is a dot product over every output pixel,
    and a group's GEMM (M = K/g, N = R*S*C/g) would fill a tensor-core tile mostly with padding --
    so a direct kernel (``conv/depthwise_wgrad.py``): a program walks a chunk of output rows for one
    channel block, one input channel of their groups and one group of filter rows, loading each dy
    tile once and the x tile for all its taps as one 3-D load; the chunks' partial sums are added
    in a fixed order (reproducible).

    Its ``Config``: ``block_m`` = BLOCK_Q (output columns per step), ``block_n`` = BLOCK_K
    (channels, 8 x 16-bit per thread), ``block_k`` = filter rows per program (R: all taps, for
    filters of at most 9 taps; 1 or 2 above, bounding the per-tap accumulators' registers),
    ``split_k`` = chunks of the N*P output rows. Configs with ``cols > 0`` run the rows kernel
    (``depthwise_wgrad_rows_kernel``, x and dy reused from registers down column strips): there
    ``block_m`` = column groups, ``block_k`` = strip height, ``split_k`` = groups of (image,
    strip) pairs, ``cols`` = columns per group, ``vec`` = channels per load, ``num_stages`` s >= 2
    = the next s - 1 steps' inputs loaded ahead (the candidates take 2; deeper is for probes).
    Configs with ``window > 0`` run the window kernel (``conv/depthwise_wgrad_window.py``: 3x3, 5x5
    and 7x7 depthwise, stride 1, one channel and ``cols`` consecutive columns a thread, a register
    window of dy rows; ``window_ok``): ``block_m`` = column groups covering Q, ``block_n`` =
    channels a program, ``block_k`` = steps a loop iteration (R), ``window`` = images a program,
    ``num_stages`` s = the next s - 1 steps' inputs loaded ahead.
    """

    name = "depthwise_wgrad"

    @staticmethod
    def reduce_dependent(prob: ConvProblem, window: bool) -> bool:
        """Whether ``wgrad_reduce_kernel`` after the window (``window``) or rows kernel is a
        programmatic dependent launch (``fprop.pdl_enabled``): after the window kernel on filters
        of up to 9 taps only. H100, session 48, trigger after the main loop: 1.6-2.2 us faster
        on all six of MobileNetV2's stride-1 3x3 layers; on ConvNeXt's 7x7, 0.7-1.4 us faster at
        96 @56 and 768 @7 but 5.7-6.0 us slower at 192 @28 and 384 @14 (49.8 -> 55.7, 31.5 ->
        37.1). After the rows kernel 2-6 us slower on three of MobileNetV2's four strided layers
        (144 @56 53.2 -> 58.6 us, 192 @28 28.5 -> 34.1, 576 @14 24.8 -> 26.9; 96 @112 98.6 ->
        96.5). Session 49's per-call time line (``tools/profile_call.py --dw-reduce-pdl on|off``)
        on 192 @28 7x7: launched 6.5 us before the window kernel ended, the reduce then took 6.9
        us after it against 3.0 us as a plain launch, as if its early programs had been placed on
        the few SMs with room beside the window kernel's (not measured per SM)."""
        return window and prob.r * prob.s <= 9 and pdl_enabled()

    @staticmethod
    def narrow(prob: ConvProblem) -> bool:
        """Whether ``choose_wgrad`` gives ``prob`` to this kernel: depthwise (any multiplier), or
        grouped with at most 8 input and 8 output channels per group (ResNeXt's 4..8). dy is
        read once per input channel of a group (a grid axis) and x by per-element gathers, so
        the cost grows with C/g; wider groups fill the GEMM kernels' tiles and go to them."""
        return prob.groups > 1 and (prob.cg == 1 or (prob.cg <= 8 and prob.kg <= 8))

    @staticmethod
    def _splits(prob: ConvProblem, bk: int, rows: int, per_sm: int) -> int:
        """Row chunks giving about ``per_sm`` programs per SM, each at least 4 output rows
        (a chunk re-reads R - 1 halo rows of x, and its partial costs a workspace round trip)."""
        tiles = cdiv(prob.r, rows) * cdiv(prob.k, bk) * prob.cg
        return max(1, min(cdiv(prob.n * prob.p, 4), cdiv(per_sm * sm_count(), tiles)))

    def _config(self, prob: ConvProblem, warps: int, rows: int, per_sm: int) -> Config:
        """BLOCK_Q x BLOCK_K with 8 elements per thread (8 x 16-bit channels: one 16-byte vector
        per tap and column, no replication; 4 in fp64, and 2 with a channel multiplier or several
        input channels per group, whose x reads are per-element gathers: tools/sm90_check.py, no
        spills, <= 215 registers), shaped to waste the fewest lanes on the Q and K tails (ties:
        64 channels, then wider columns)."""
        gather = prob.kg > 1 or prob.cg > 1
        per_thread = 2 if gather else (4 if prob.dtype == torch.float64 else 8)
        if gather and prob.dtype == torch.float64:
            per_thread = 1
        tile = per_thread * 32 * warps

        def waste(bk: int) -> tuple[int, bool, int]:
            bq = max(1, tile // bk)
            return cdiv(prob.q, bq) * bq * cdiv(prob.k, bk) * bk, bk != 64, bk

        bk = min((32, 64, 128), key=waste)
        return Config(max(1, tile // bk), bk, rows, warps, 1, split_k=self._splits(prob, bk, rows, per_sm))

    def _rows(self, prob: ConvProblem) -> int:
        return prob.r if prob.r * prob.s <= 9 else 1

    def default_config(self, prob: ConvProblem) -> Config:
        if interpreting():
            bq = min(8, _small(prob.q, 1))
            return Config(bq, min(16, _small(prob.k, 4)), self._rows(prob), 4, 1, split_k=min(3, prob.n * prob.p))
        if self._window_first(prob):
            return self.window_configs(prob)[0]
        return self._config(prob, 4, self._rows(prob), 8)

    def _window_first(self, prob: ConvProblem) -> bool:
        """3x3 and 7x7 layers the window kernel takes: it is the untuned choice there, and the rows
        kernel keeps one candidate. H200, session 41 (bf16, batch 64, ConvNeXt-T's four 7x7 layers,
        ``s41-s41a-dw7-wgrad.json``): the window kernel 21-77 us against the rows kernel's best
        44-139 and this class's default 90-371. H100, session 42 (MobileNetV2's six stride-1 3x3
        layers, ``s42-s42a-tune-dw3-wgrad.jsonl``): 16.7-74.0 us against the rows kernel's best
        22.4-76.4 (its first candidate on all six) and this class's default 60.8-257. 5x5 has not
        been timed and keeps every candidate."""
        return prob.r in (3, 7) and self.window_ok(prob) is None

    def configs(self, prob: ConvProblem) -> list[Config]:
        """A few candidates around the default: 8 warps (twice the columns per step), and fewer,
        longer row chunks."""
        if interpreting():
            d = self.default_config(prob)
            small = [d, Config(4, 8, 1, 4, 1, split_k=2), Config(8, 4, prob.r, 4, 1, split_k=1)]
            return small + self.rows_configs(prob) + self.window_configs(prob)
        rows = self._rows(prob)
        # (two filter rows per program for 7x7 spilled: 255 registers, 156 spill loads/stores in
        # tools/sm90_check.py; the kernel still takes it, the tuner no longer offers it)
        out = [self._config(prob, 4, rows, 8), self._config(prob, 8, rows, 4), self._config(prob, 4, rows, 3)]
        by_rows = self.rows_configs(prob)
        if self._window_first(prob):
            # the rows kernel's best form as a fallback (7x7: k22, two programs per SM, on all four
            # ConvNeXt layers; 3x3: its first candidate on all six MobileNetV2 layers); the other
            # forms only cost first-call compile time
            return self.window_configs(prob) + (by_rows[-1:] if prob.r == 7 else by_rows[:1])
        if by_rows:
            # H200, session 10 (tuner log, bf16, batch 64): the rows kernel's best config beat
            # this kernel's on all 11 depthwise and 3 narrow-group layers of the grouped suite
            # that were timed, by 1.4-7.1x; its default stays a fallback, the rest only cost
            # tuning time
            out = out[:1]
        return list(dict.fromkeys(out)) + by_rows + self.window_configs(prob)

    #: estimated registers of the rows kernel's per-tap accumulators and dy window (2 channels
    #: per thread); the compiler adds about 60-100 (tools/sass_mix.py)
    ROWS_REG_BUDGET = 160

    def rows_ok(self, prob: ConvProblem) -> str | None:
        """None if the rows kernel (``depthwise_wgrad_rows_kernel``) takes ``prob``, else why not."""
        if prob.dilation[0] != 1 or prob.stride[0] > 2:
            return "the rows kernel needs vertical dilation 1 and vertical stride 1 or 2"
        scale = 2 if prob.dtype == torch.float64 else 1
        if (prob.r * prob.s + cdiv(prob.r, prob.stride[0])) * 2 * scale > self.ROWS_REG_BUDGET:
            return f"{prob.r}x{prob.s} taps: the rows kernel's accumulators would not fit in registers"
        return None

    def rows_configs(self, prob: ConvProblem) -> list[Config]:
        """The rows kernel's candidates: 4 warps, 2 channels per thread, the next step prefetched,
        whole images per strip (or strips of at least 8 rows where the images are too few), the
        (image, strip) pairs split for about ``per_sm`` programs per SM; 2 columns per group for
        filters above 3x3 (as the forward's measurements), else the most that fit and the fewest
        masked columns."""
        if self.rows_ok(prob) is not None:
            return []
        if interpreting():
            return [Config(4, 8, max(1, prob.p // 2), 2, 2, split_k=2, cols=2, vec=2)]
        scale = 2 if prob.dtype == torch.float64 else 1
        slots = cdiv(prob.r, prob.stride[0])
        bk = min(DepthwiseRows._fits(prob.k, (64, 32), 0.35), key=lambda b: cdiv(prob.k, b) * b)
        bq = 256 // bk
        fit = [c for c in range(1, 9) if (prob.r * prob.s + slots * c) * 2 * scale <= self.ROWS_REG_BUDGET]
        best = min(fit, key=lambda c: (cdiv(prob.q, bq * c) * bq * c, -c))
        cols = [min(2, fit[-1])] if prob.r * prob.s > 9 else sorted({best, fit[-1]})
        out = []
        for c in cols:
            tiles = cdiv(prob.k, bk) * prob.cg * cdiv(prob.q, bq * c)
            for per_sm in (4, 2):
                want = cdiv(per_sm * sm_count(), tiles)
                # fewer images than groups wanted: strips of the image make the rest (each strip
                # re-reads R - 1 halo rows, so not below 8 rows). tools/dw_wgrad_probe.py on the
                # H200 (session 21): MobileNetV2's 32 @112 with 64 images in 2 column blocks ran
                # 128 programs, 97.4 us; in 264 groups of 16-row strips 67.9 us (cuDNN 77.5)
                strips = min(cdiv(want, prob.n), max(1, prob.p // 8)) if prob.n < want else 1
                rows = cdiv(prob.p, strips)
                groups = max(1, min(prob.n * cdiv(prob.p, rows), want))
                out.append(Config(bq, bk, rows, 4, 2, split_k=groups, cols=c, vec=2))
        return list(dict.fromkeys(out))

    def window_ok(self, prob: ConvProblem) -> str | None:
        """None if the window kernel (``depthwise_wgrad_window_kernel``) takes ``prob``, else why
        not. It reads x and dy at any strides (channel stride 1, NHWC, is its fast layout, and
        ``choose_wgrad`` hands it NHWC tensors)."""
        from .depthwise_wgrad_window import WINDOW_FILTERS, pick

        if prob.cg != 1 or prob.kg != 1:
            return "the window kernel takes depthwise layers without a channel multiplier (C/g = K/g = 1)"
        if prob.stride != (1, 1) or prob.dilation != (1, 1):
            return "the window kernel needs stride 1 and dilation 1"
        if prob.r != prob.s or prob.r not in WINDOW_FILTERS:
            return (f"{prob.r}x{prob.s} filter: the window kernel is offered for square 3x3, 5x5 and 7x7 filters "
                    "(larger ones' R*S accumulators and R*COLS dy window would not fit in registers)")  # fmt: skip
        if prob.pad_h[0] >= prob.r or prob.pad_w[0] >= prob.s:
            return "the window kernel needs top and left padding below the filter size (its walk starts at x row 0)"
        if prob.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            return f"{prob.dtype}: the window kernel accumulates in fp32 (fp64 takes the other kernels)"
        if pick(prob.q)[2] < 8:
            return (f"Q = {prob.q} columns: a program of 128 threads would hold fewer than 8 channels of a row "
                    "(loads under 16 bytes); the window kernel takes Q up to 112")  # fmt: skip
        return None

    def window_configs(self, prob: ConvProblem) -> list[Config]:
        """The window kernel's candidate: 4 warps, ``pick``'s tile (7 columns a thread for
        ConvNeXt's widths), the step loop unrolled R times, one step's inputs loaded ahead, one
        image a program (``Config.window`` > 1 still runs: more images a program, fewer partial
        sums)."""
        from .depthwise_wgrad_window import pick

        if self.window_ok(prob) is not None:
            return []
        if interpreting():  # small tiles; the second with 3 columns, no unrolling, two steps ahead
            cols, qg, _ = pick(prob.q)
            bk = min(16, _small(prob.k, 8))
            return [Config(qg, bk, prob.r, 4, 2, cols=cols, window=1),
                    Config(_small(cdiv(prob.q, 3), 1), 8, 1, 4, 3, cols=3, window=2)]  # fmt: skip
        cols, qg, bk = pick(prob.q)
        # one image a program: on the H200 (session 41, the four ConvNeXt 7x7 layers, bf16) two
        # images a program took 14-29% longer and four (7 @7) 69% longer
        # 3x3 (9 FFMA a pixel-channel, memory-bound): two steps loaded ahead (sm_90: 123 registers;
        # one step ahead: 96). On an H100 (session 42, MobileNetV2's six stride-1 layers, bf16) the
        # two were within 3% of each other, two ahead faster on four
        return [Config(qg, bk, prob.r, 4, 3 if prob.r == 3 else 2, cols=cols, window=1)]

    @staticmethod
    def window_layout(prob: ConvProblem, cfg: Config, x: torch.Tensor, dy: torch.Tensor) -> dict[str, int] | None:
        """The layout constexprs of ``depthwise_wgrad_window_kernel_gl`` (the window kernel as
        Gluon: ~1.6 s to compile a 7x7 tile on the dev CPU, where the Triton entry's coalescing
        pass takes ~25 s), or None where the Triton entry runs: under the interpreter, without
        Gluon, with ``CONVGEMM_DEPTHWISE_GLUON=0``, for a tile that is not one element a thread,
        and for tensors whose channels are not contiguous (the layout puts channels on lanes,
        what the coalescing pass picks only for them)."""
        from .depthwise_wgrad_window import gl, gluon_layout

        if interpreting() or gl is None or os.environ.get("CONVGEMM_DEPTHWISE_GLUON", "1") == "0":
            return None
        if cfg.block_m * cfg.block_n != 32 * cfg.num_warps or x.stride(1) != 1 or dy.stride(1) != 1:
            return None
        return gluon_layout(cfg.block_m, cfg.block_n, cfg.num_warps)

    def run(self, prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor, cfg=None, launch=None):
        """``dw [K, C/g, R, S]`` (any strides) from ``x [N, C, H, W]`` and ``dy [N, K, P, Q]`` of any
        strides (NHWC is the fast layout); ``cfg`` None takes ``default_config``."""
        from .depthwise_wgrad import depthwise_wgrad_kernel, tap_chunks
        from .fprop import _run_kernel

        cfg = cfg or self.default_config(prob)
        if cfg.window:
            self._run_window(prob, x, dy, dw, cfg, launch)
            return
        if cfg.cols:
            self._run_rows(prob, x, dy, dw, cfg, launch)
            return
        bq, bk, rows, split = cfg.block_m, cfg.block_n, min(cfg.block_k, prob.r), cfg.split_k
        np_ = prob.n * prob.p
        rows_per_split = cdiv(np_, split)
        split = cdiv(np_, rows_per_split)
        t0, t1, t2 = tap_chunks(rows * prob.s)
        acc_t = torch.float64 if prob.dtype == torch.float64 else torch.float32
        grid = (cdiv(prob.r, rows) * prob.cg, cdiv(prob.k, bk), split)
        ws, locks = split_k_buffers(x.device, grid[0] * grid[1], split, (t0 + t1 + t2) * bk, acc_t)
        args = (x, dy, dw, ws, locks, prob.h, prob.w, prob.p, prob.q, prob.k, prob.kg, prob.cg, np_, rows_per_split,
                x.stride(0), x.stride(2), x.stride(3), x.stride(1), dy.stride(0), dy.stride(1), dy.stride(2),
                dy.stride(3), dw.stride(0), dw.stride(1), dw.stride(2), dw.stride(3), prob.stride[0], prob.stride[1],
                prob.pad_h[0], prob.pad_w[0], prob.dilation[0], prob.dilation[1], prob.r)  # fmt: skip

        def constexprs():
            return dict(S=prob.s, ROWS=rows, T0=t0, T1=t1, T2=t2, BLOCK_Q=bq, BLOCK_K=bk,
                        ACC_F64=acc_t == torch.float64)  # fmt: skip

        _run_kernel(launch, depthwise_wgrad_kernel, grid, args, constexprs, {"num_warps": cfg.num_warps,
                                                                              "num_stages": cfg.num_stages})  # fmt: skip

    @staticmethod
    def gluon_layout(prob: ConvProblem, cfg: Config, x: torch.Tensor, dy: torch.Tensor) -> dict[str, int] | None:
        """The layout constexprs of ``depthwise_wgrad_rows_kernel_gl`` (the rows kernel compiled
        as Gluon, without Triton's coalescing pass), or None where the Triton entry runs.

        The rule of the forward's ``DepthwiseRows.gluon_layout``: depthwise without multiplier,
        ``vec`` 1, 2 or 4 elements a thread, 16-byte-aligned x and dy with channel stride 1 and
        their other strides multiples of 16, 32-bit offsets; and, for the partial sums' [BLOCK_K]
        store, at most one channel a thread (the pass's choice there: ``BLOCK_K / threads``
        rounded down, at least 1). ``tools/depthwise_gluon_check.py --wgrad`` compiles both
        entries for sm_90 and compares their instruction mix (the same registers, memory and
        floating-point instructions; the address code is ordered differently), and the H200 gave
        the same bits and speeds (session 38). ``CONVGEMM_DEPTHWISE_GLUON=0`` keeps the Triton
        entry everywhere."""
        if cfg.block_n > 32 * cfg.num_warps:
            return None
        return DepthwiseRows.gluon_blocked(prob, cfg, x, dy)

    def _run_rows(self, prob, x, dy, dw, cfg, launch) -> None:
        """The rows kernel into a workspace of per-program partial sums, then
        ``wgrad_reduce_kernel`` (``launch.extra``: its own launch handle) sums them in order."""
        from .depthwise_wgrad import depthwise_wgrad_rows_kernel, depthwise_wgrad_rows_kernel_gl
        from .fprop import _run_kernel

        reason = self.rows_ok(prob)
        if reason is not None:
            raise ValueError(f"depthwise wgrad config {cfg.describe()}: {reason}; use a config without cols")
        bq, bk, cols = cfg.block_m, cfg.block_n, cfg.cols
        rows = max(1, min(cfg.block_k, prob.p))
        strips = cdiv(prob.p, rows)
        pairs = prob.n * strips
        per_split = cdiv(pairs, max(1, cfg.split_k))
        q_blocks = cdiv(prob.q, bq * cols)
        n_split = q_blocks * cdiv(pairs, per_split)
        k_blocks = cdiv(prob.k, bk)
        acc_t = torch.float64 if prob.dtype == torch.float64 else torch.float32
        row_len = k_blocks * prob.cg * prob.r * prob.s * bk
        ws = torch.empty(n_split * row_len, dtype=acc_t, device=x.device)
        args = (x, dy, ws, prob.h, prob.w, prob.p, prob.q, prob.k, prob.kg, prob.cg, rows, strips, pairs, per_split,
                q_blocks,
                x.stride(0), x.stride(2), x.stride(3), x.stride(1), dy.stride(0), dy.stride(1), dy.stride(2),
                dy.stride(3), prob.pad_h[0], prob.pad_w[0])  # fmt: skip

        def constexprs():
            return dict(R=prob.r, S=prob.s, STRIDE_H=prob.stride[0], STRIDE_W=prob.stride[1], DIL_W=prob.dilation[1],
                        BLOCK_Q=bq, COLS=cols, BLOCK_K=bk, VEC=cfg.vec, PREFETCH=max(0, cfg.num_stages - 1),
                        TRIM=DepthwiseRows.trim(prob, rows), ACC_F64=acc_t == torch.float64,
                        INT64=max(DepthwiseRows.image_span(x), DepthwiseRows.image_span(dy)) >= 2**31,
                        **(layout or {}))  # fmt: skip

        # a warm launch relaunches what it compiled: the choice of entry is not needed then
        layout = None if launch is not None and launch.warm else self.gluon_layout(prob, cfg, x, dy)
        kernel = depthwise_wgrad_rows_kernel if layout is None else depthwise_wgrad_rows_kernel_gl
        _run_kernel(launch, kernel, (k_blocks * prob.cg, n_split), args, constexprs,
                    {"num_warps": cfg.num_warps, "num_stages": 1})  # fmt: skip
        red_args = (ws, dw, n_split, prob.k, prob.cg, dw.stride(0), dw.stride(1), dw.stride(2), dw.stride(3))
        # a plain launch (reduce_dependent). The rows kernel has no trigger: a dependent launch
        # forced by a probe starts as its programs exit, which isolates the launch mode's own cost
        _reduce_partials(launch, red_args, prob.r * prob.s, prob.s, bk, row_len, self.reduce_dependent(prob, False))

    def _run_window(self, prob, x, dy, dw, cfg, launch) -> None:
        """The window kernel into a workspace of per-(image group, channel block) partial sums,
        then ``wgrad_reduce_kernel`` (``launch.extra``: its own launch handle) sums the image
        groups in order and writes dw in its dtype and strides."""
        from .depthwise_wgrad_window import (
            depthwise_wgrad_window_kernel,
            depthwise_wgrad_window_kernel_gl,
            window_constexprs,
        )
        from .fprop import _run_kernel

        reason = self.window_ok(prob)
        if reason is not None:
            raise ValueError(f"depthwise wgrad config {cfg.describe()}: {reason}; use a config without window")
        qg, bk, imgs = cfg.block_m, cfg.block_n, cfg.window
        if qg & (qg - 1) or bk & (bk - 1) or cfg.cols < 1 or qg * cfg.cols < prob.q:
            raise ValueError(f"depthwise wgrad config {cfg.describe()}: the window kernel needs power-of-two column "
                             f"groups (block_m) and channels (block_n), and block_m * cols >= Q = {prob.q}")  # fmt: skip
        parts = cdiv(prob.n, imgs)
        k_blocks = cdiv(prob.k, bk)
        taps = prob.r * prob.s
        ws = torch.empty(parts * k_blocks * taps * bk, dtype=torch.float32, device=x.device)
        args = (x, dy, ws, prob.n, prob.h, prob.w, prob.p, prob.q, x.stride(0), x.stride(2), dy.stride(0),
                dy.stride(2))  # fmt: skip

        pdl = self.reduce_dependent(prob, True)  # wgrad_reduce_kernel a dependent launch

        def constexprs():
            int64 = max(DepthwiseRows.image_span(x), DepthwiseRows.image_span(dy)) >= 2**31
            return dict(**window_constexprs((prob.k, prob.h, prob.w, prob.p, prob.q),
                                            (x.stride(1), x.stride(3), dy.stride(1), dy.stride(3)),
                                            (prob.r, prob.s, prob.pad_h[0], prob.pad_w[0]), qg, bk, cfg.cols, imgs,
                                            max(1, cfg.block_k), max(0, cfg.num_stages - 1), int64),
                        **(layout or {}), **({"PDL_TRIGGER": True} if pdl else {}))  # fmt: skip

        # a warm launch relaunches what it compiled: the choice of entry is not needed then
        layout = None if launch is not None and launch.warm else self.window_layout(prob, cfg, x, dy)
        kernel = depthwise_wgrad_window_kernel if layout is None else depthwise_wgrad_window_kernel_gl
        _run_kernel(launch, kernel, (k_blocks, parts), args, constexprs,
                    {"num_warps": cfg.num_warps, "num_stages": 1})  # fmt: skip
        red_args = (ws, dw, parts, prob.k, 1, dw.stride(0), dw.stride(1), dw.stride(2), dw.stride(3))
        _reduce_partials(launch, red_args, taps, prob.s, bk, k_blocks * taps * bk, pdl)


def _reduce_partials(launch, args: tuple, taps: int, s: int, bk: int, row_len: int, pdl: bool) -> None:
    """``wgrad_reduce_kernel`` over the depthwise wgrad kernels' partial sums (rows of
    ``row_len``), through ``launch.extra`` (created on first use). ``pdl``: a programmatic
    dependent launch of the kernel that wrote them, which was launched with ``PDL_TRIGGER``."""
    from .depthwise_wgrad import wgrad_reduce_kernel
    from .fprop import _run_kernel

    if launch is not None and launch.extra is None:
        launch.extra = Launch()
    block = 128

    def constexprs():
        return dict(TAPS=taps, S=s, BLOCK_K=bk, BLOCK=block, SPLITS=32, **({"PDL": True} if pdl else {}))

    _run_kernel(None if launch is None else launch.extra, wgrad_reduce_kernel, (cdiv(row_len, block),), args,
                constexprs, {"num_warps": 4, "num_stages": 1, **({"launch_pdl": True} if pdl else {})})  # fmt: skip


class WgradGroupedTma:
    """Grouped wgrad on ``wgrad_tma`` with ``cfg.gt`` groups taken as one: the super-group's
    weight gradient ``[K, gt*C/g, R, S]`` (every output channel against every input channel of
    its super-group, one wide GEMM instead of ``gt`` narrow ones) into a scratch tensor, then its
    block diagonal, each output channel's own group, gathered into dw. The off-diagonal products
    are wasted tensor-core work (``gt`` times the useful); x and dy are read once through TMA.

    Exact NaN / Inf: every entry of the wide product is its own dot product, so a non-finite
    input reaches only the columns of its own channel; the gathered diagonal is what a per-group
    GEMM would give. Deterministic like ``wgrad_tma`` (its split-K reduction order is fixed)."""

    name = "wgrad_grouped_tma"
    #: most input channels in a super-group: one 64-channel N tile per filter tap
    MAX_CS = 64

    def reduced(self, prob: ConvProblem, gt: int) -> ConvProblem:
        return replace(prob, groups=prob.groups // gt)

    def group_tiles(self, prob: ConvProblem) -> list[int]:
        """The two widest ``gt`` (powers of two dividing the group count) whose super-groups
        hold at most ``MAX_CS`` input channels, in 16-byte multiples of input and output
        channels (the TMA boxes of x and dy); for a strided layer, exactly ``MAX_CS`` (the
        strided kernel's channel blocks of 64 must not cross a super-group)."""
        e = prob.dtype.itemsize
        out, gt = [], 2
        while gt <= prob.groups and gt * prob.cg <= self.MAX_CS:
            if prob.groups % gt == 0 and (gt * prob.cg * e) % 16 == 0 and (gt * prob.kg * e) % 16 == 0:
                if not strided_taps(prob) or (gt * prob.cg) % 64 == 0:
                    out.append(gt)
            gt *= 2
        return out[::-1][:2]

    def supports(self, prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor) -> str | None:
        """None if every ``gt`` of ``configs`` runs on ``wgrad_tma`` with these NHWC tensors."""
        if prob.groups == 1:
            return "not a grouped convolution (groups = 1)"
        if prob.cg == 1:
            return "one channel per group: the depthwise wgrad kernel's problem"
        gts = self.group_tiles(prob)
        if not gts:
            if strided_taps(prob):
                return (
                    f"stride {prob.stride}: no group count to merge into super-groups of exactly 64 input "
                    "channels (what the strided TMA wgrad's channel blocks need)"
                )
            return "no group count to merge into 16-byte aligned super-groups of at most 64 channels"
        for gt in gts:
            reason = WGRAD_TMA.supports(self.reduced(prob, gt), x, dy)
            if reason:
                return reason
        return None

    def configs(self, prob: ConvProblem) -> list[Config]:
        if interpreting():
            return [self.default_config(prob)]
        # the widest merge only, as the forward's: it won on each ResNeXt layer timed (1.6x over
        # the next on 128 @56, session 12)
        gt = self.group_tiles(prob)[0]
        return [replace(c, gt=gt) for c in WGRAD_TMA.configs(self.reduced(prob, gt))[:6]]

    def default_config(self, prob: ConvProblem) -> Config:
        gt = self.group_tiles(prob)[0]
        return replace(WGRAD_TMA.default_config(self.reduced(prob, gt)), gt=gt)

    _index: dict = {}

    def _diagonal(self, prob: ConvProblem, gt: int, device: torch.device) -> torch.Tensor:
        """int64 ``[K, C/g, R, S]``: where output channel k's own-group entries sit in the wide
        ``[K, gt*C/g, R, S]`` gradient (channel ``(k // (K/g)) % gt * C/g + c``)."""
        key = (prob.k, prob.cg, prob.kg, prob.r, prob.s, gt, device)
        idx = self._index.get(key)
        if idx is None:
            slot = (torch.arange(prob.k, device=device) // prob.kg) % gt
            idx = (slot * prob.cg)[:, None] + torch.arange(prob.cg, device=device)[None, :]
            idx = idx[:, :, None, None].expand(prob.k, prob.cg, prob.r, prob.s).contiguous()
            self._index[key] = idx
        return idx

    def run(self, prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor, cfg: Config, launch=None):
        """``dw [K, C/g, R, S] = wgrad(x, dy)`` for NHWC ``x`` and ``dy`` that ``supports``
        accepted; dw may have any strides."""
        gt = cfg.gt
        wide = torch.empty((prob.k, gt * prob.cg, prob.r, prob.s), dtype=dw.dtype, device=dw.device)
        WGRAD_TMA.run(self.reduced(prob, gt), x, dy, wide, cfg, launch)
        dw.copy_(torch.gather(wide, 1, self._diagonal(prob, gt, dw.device)))


class WgradWs:
    """``conv3d_wgrad_ws`` (Hopper's warp-specialized Gluon wgrad, ``conv/ws_wgrad.py``) on a 2-D
    layer: the NHWC batch is the 3-D kernel's depth axis (``fprop.ImplicitGemmWs.as_3d``; a
    1 x R x S filter never crosses images), and a stride-1 unpadded 1x1 layer is one row of
    ``N*H*W`` pixels (``flat_1x1``: no pixel block is padding). Groups 1, 16-bit, any stride (a
    strided layer through the stride-phase view). Configs as ``conv3d_wgrad_ws``'s; offered to the
    tuner on Hopper only."""

    name = "wgrad_ws"

    @staticmethod
    def _views(prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor):
        """``(3-D problem, x, dy)`` the kernel runs: [1, C, N, H, W] views, flat for a 1x1 layer."""
        from .fprop import ImplicitGemmWs

        flat = flat_1x1(prob, x, dy)
        if flat is not None:
            prob, x, dy = flat
        view = ImplicitGemmWs.view_3d
        return ImplicitGemmWs.as_3d(prob), view(x), view(dy)

    def supports(self, prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor) -> str | None:
        """None if the kernel takes ``prob`` with NHWC ``x`` and ``dy``, else why not."""
        from .conv3d import WGRAD3D_WS

        if prob.groups != 1:
            return f"wgrad_ws takes groups = 1, not {prob.groups}"
        return WGRAD3D_WS.supports(*self._views(prob, x, dy))

    def configs(self, prob: ConvProblem) -> list[Config]:
        from .conv3d import WGRAD3D_WS

        return WGRAD3D_WS.configs(self._problem3d(prob))

    def default_config(self, prob: ConvProblem) -> Config:
        from .conv3d import WGRAD3D_WS

        return WGRAD3D_WS.default_config(self._problem3d(prob))

    @staticmethod
    def _problem3d(prob: ConvProblem):
        from .fprop import ImplicitGemmWs

        return ImplicitGemmWs.as_3d(_flat_prob(prob))

    def run(self, prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor, cfg: Config, launch=None):
        """``dw [K, C, R, S] = wgrad(x, dy)`` for NHWC ``x`` and ``dy`` that ``supports`` accepted."""
        if fast_ready(launch, cfg.split_k):
            # a warm plan: the views and the 3-D problem only describe the same addresses again
            # (28-53 us of Python a call on the CPU machine, more on the GPU's host)
            ws_wgrad3d_replay(launch, x, dy, dw, cfg.split_k)
            return
        from .ws_wgrad import ws_wgrad_run

        p3, x5, dy5 = self._views(prob, x, dy)
        ws_wgrad_run(x5, dy5, dw.unsqueeze(2), (1, p3.r, p3.s), p3.pad, p3.dilation, p3.stride, cfg, launch)


class WgradGroupedWs:
    """Grouped wgrad on the Gluon kernel (``ws_wgrad`` with ``GROUPED``): ``cfg.gt`` narrow groups
    as one super-group of ``GC = gt*C/g`` input and ``KS = gt*K/g`` output channels, each tile
    (``block_m`` output channels by ``block_n`` input channels of one tap) inside one super-group,
    so its x box is that super-group's channels. The tile is the block-diagonal product (``gt``
    times the useful multiply-adds, as ``wgrad_grouped_tma``'s); its store keeps each output
    channel's own group and writes it straight into dw (``ws_wgrad._dw_tile``), with no wide
    scratch gradient and no gather. Exact NaN / Inf as ``wgrad_grouped_tma`` (every entry is its
    own dot product). Hopper, 16-bit; offered to the tuner once ``CANDIDATES`` is on (written
    without a GPU, session 36; checked by ``tests/gluon_emu.py``'s emulation)."""

    name = "wgrad_grouped_ws"
    #: whether ``choose_wgrad`` times it: on since session 37, when the H200 passed its tests and
    #: ``tools/grouped_wgrad_probe.py`` timed its best candidate 1.28-1.85x faster than the tuned
    #: choice on all 7 of ResNeXt's grouped 3x3 layers (bf16)
    CANDIDATES = True

    @staticmethod
    def widths(prob: ConvProblem) -> list[int]:
        """The ``gt`` (powers of two dividing the group count), narrowest first (the fewest wasted
        products), whose super-group is 64 or 128 output channels (a tile's M: 64 rows a
        consumer warpgroup) and 64, 128 or 256 bytes of input channels (one tap's x box)."""
        e = prob.dtype.itemsize
        out, gt = [], 1
        while gt <= prob.groups:
            gc, ks = gt * prob.cg, gt * prob.kg
            if prob.groups % gt == 0 and ks in (64, 128) and gc * e in (64, 128, 256) and gc & (gc - 1) == 0:
                out.append(gt)
            gt *= 2
        return out

    def supports(self, prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor) -> str | None:
        """None if the Gluon wgrad takes ``prob`` with NHWC ``x`` and ``dy`` as super-groups."""
        from .conv3d import WGRAD3D_WS

        if prob.groups == 1:
            return "not a grouped convolution (groups = 1)"
        if prob.cg == 1:
            return "one channel per group: the depthwise wgrad kernel's problem"
        if not self.widths(prob):
            return (f"{prob.groups} groups of {prob.cg} -> {prob.kg} channels: no power-of-two number of them makes a "
                    "super-group of 64 or 128 output channels and 64-256 bytes of input channels")  # fmt: skip
        reason = WGRAD3D_WS.supports(*WGRAD_WS._views(replace(prob, groups=1), x, dy))
        return reason.replace("conv3d_wgrad_ws", self.name) if reason else None

    def configs(self, prob: ConvProblem) -> list[Config]:
        return self.candidates(prob, sm_count()) if self.CANDIDATES else []

    def candidates(self, prob: ConvProblem, sms: int) -> list[Config]:
        """For the two narrowest merges: ``block_m`` the super-group's output channels (or 64 of
        128), ``block_n`` its input channels, 128- or 64-pixel reduction steps, each at
        ``Wgrad3dWs.splits``'s pixel-range counts."""
        from .conv3d import Wgrad3dWs, spatial_tiles3
        from .fprop import ImplicitGemmWs

        e = prob.dtype.itemsize
        p3 = ImplicitGemmWs.as_3d(_flat_prob(prob))
        out = []
        for gt in self.widths(prob)[:2]:
            gc, ks = gt * prob.cg, gt * prob.kg
            for bm, bp in ((ks, 128), (64, 128), (ks, 64)):
                bn = gc
                stages = 6
                while stages > 2 and stages * bp * (bm + bn) * e > 200_000:
                    stages -= 1
                _, td, th, tw = spatial_tiles3(p3, bp)[0]
                n_tiles = cdiv(prob.k, bm) * prob.r * prob.s
                k_blocks = p3.n * cdiv(p3.od, td) * cdiv(p3.p, th) * cdiv(p3.q, tw)
                base = Config(bm, bn, bp, bm // 16, stages, tile_n=td, tile_h=th, tile_w=tw, persistent=1, gt=gt)
                out += [replace(base, split_k=sk) for sk in Wgrad3dWs.splits(n_tiles, k_blocks, sms, bp)]
        return list(dict.fromkeys(out))

    def default_config(self, prob: ConvProblem) -> Config:
        return self.candidates(prob, max(sm_count(), 2))[0]

    def run(self, prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor, cfg: Config, launch=None):
        """``dw [K, C/g, R, S] = wgrad(x, dy)`` for NHWC ``x`` and ``dy`` that ``supports`` accepted;
        dw may have any strides."""
        if fast_ready(launch, cfg.split_k):
            ws_wgrad3d_replay(launch, x, dy, dw, cfg.split_k)
            return
        gt = cfg.gt
        gc, ks = gt * prob.cg, gt * prob.kg
        if gt not in self.widths(prob) or ks % cfg.block_m or gc % cfg.block_n:
            raise ValueError(f"wgrad_grouped_ws: gt={gt} with block_m={cfg.block_m}, block_n={cfg.block_n} does not "
                             f"fit {prob.groups} groups of {prob.cg} -> {prob.kg} channels; use gt in "
                             f"{self.widths(prob)}, block_m dividing gt * K/groups and block_n dividing gt * C/groups")  # fmt: skip
        from .ws_wgrad import ws_wgrad_run

        p3, x5, dy5 = WGRAD_WS._views(prob, x, dy)
        ws_wgrad_run(x5, dy5, dw.unsqueeze(2), (1, p3.r, p3.s), p3.pad, p3.dilation, p3.stride, cfg, launch,
                     super_groups=(gc, ks, prob.cg, prob.kg))  # fmt: skip


class _AsForward(Algorithm):
    """A wgrad kernel seen through the forward tuner's interface (``autotune._tune``): x and dy
    in the input and weight slots, dw in the output's. A subclass of the forward ``Algorithm`` so
    that every flag the tuner reads exists (before session 21 it was not, and tuning an NCHW
    layer's wgrad failed every candidate on ``writes_nchw``, falling back to the heuristic)."""

    #: dw is written in place with its own strides by every wgrad kernel: no transpose follows
    writes_nchw = True

    def __init__(self, algo) -> None:
        self.algo, self.name = algo, algo.name

    def configs(self, prob: ConvProblem) -> list[Config]:
        return self.algo.configs(prob)

    def default_config(self, prob: ConvProblem) -> Config:
        return self.algo.default_config(prob)

    def heuristic_ok(self, prob: ConvProblem) -> bool:
        return True

    def run(self, prob, x, dy, bias, dw, cfg, launch=None) -> None:
        self.algo.run(prob, x, dy, dw, cfg, launch)


_wgrad_memo: dict = {}


def finish_split_k(launch, ws: torch.Tensor, c: tuple, num_m: int, num_n: int, batch: int, cfg: Config, store) -> None:
    """``matmul.blocks.split_k_finish_kernel`` over the partials a ``reduce`` config's GEMM wrote
    to ``ws``: rows of each tile split over programs until there are two per SM (down to 2 rows),
    then stored by ``store`` with the GEMM's own ``c`` arguments. Its launch handle is
    ``launch.aux``. With ``fprop.pdl_enabled`` it is a programmatic dependent launch: the GEMM
    must have been launched with ``pdl=True`` (``reduce_pdl``), which lets it start early."""
    from ..matmul.blocks import split_k_finish_kernel
    from .fprop import _run_kernel

    sub = min(32, cfg.block_m)
    while sub > 2 and num_m * num_n * batch * (cfg.block_m // sub) < 2 * sm_count():
        sub //= 2
    args = (ws, *c, num_m, num_n, cfg.split_k)
    pdl = pdl_enabled()

    def constexprs():
        return dict(
            BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, SUB_M=sub, C_STORE=store, **({"PDL": True} if pdl else {})
        )

    _run_kernel(aux_of(launch), split_k_finish_kernel, (num_m * num_n * (cfg.block_m // sub), batch), args, constexprs,
                {"num_warps": 4, "num_stages": 1, **({"launch_pdl": True} if pdl else {})})  # fmt: skip


def reduce_pdl(cfg: Config) -> bool:
    """Whether a GEMM launch is followed by ``finish_split_k`` as a programmatic dependent (a
    ``reduce`` config split more than once, ``fprop.pdl_enabled``): its ``_launch(pdl=...)``."""
    return bool(cfg.reduce) and cfg.split_k > 1 and pdl_enabled()


def _can_time(x: torch.Tensor) -> bool:
    """Whether candidates can be timed: a compiled kernel on a CUDA device (not the interpreter)."""
    return x.device.type == "cuda" and not interpreting()


def tuned_wgrad(algos: list, prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor,
                tag: str = "wgrad"):  # fmt: skip
    """``(algorithm, config)`` for ``prob`` among ``algos``: this process's memo, then the tuning
    cache on disk (keyed like the forward's, tagged ``tag`` and, for several candidates, their
    names), then timing every candidate's configs on the call's own tensors (into a scratch dw).
    The first algorithm's default config when tuning is off or there is no GPU. Also serves the
    strided TMA dgrad (``tuned_dgrad_tma``: dy, the weight and dx in the three tensor slots)."""
    from ..tune import autotune as at

    names = tuple(a.name for a in algos)
    key = (prob.key(), names, tag)
    hit = _wgrad_memo.get(key)
    if hit is not None:
        return hit
    choice = None
    if _can_time(x) and at.autotune_enabled():
        dkey = at.cache_key(prob, x.device) + "|" + tag + ("|" + "+".join(names) if len(algos) > 1 else "")
        entry = at.disk_cache().get(dkey)
        match = {a.name: a for a in algos}.get(entry["algorithm"]) if entry is not None else None
        if match is not None:
            try:
                choice = (match, Config(**entry["config"]))
            except TypeError:  # a field this version does not know
                choice = None
        if choice is None:
            best, cfg, us = at._tune(prob, [_AsForward(a) for a in algos], x, dy, None, dw)
            choice = (best.algo, cfg)
            if us is not None:
                at.disk_cache().put(dkey, best.algo.name, cfg, us)
    choice = choice or (algos[0], algos[0].default_config(prob))
    _wgrad_memo[key] = choice
    return choice


def tuned_dgrad_tma(prob: ConvProblem, dy: torch.Tensor, w: torch.Tensor, dx: torch.Tensor) -> Config:
    """``DgradTma``'s config for ``prob``, tuned among ``DgradTma.configs`` on the call's own dy
    and weight into a scratch dx (memo and disk cache as ``tuned_wgrad``'s, tagged ``dgrad_tma``);
    the default config when tuning is off or there is no GPU."""
    return tuned_wgrad([DGRAD_TMA], prob, dy, w, dx, tag="dgrad_tma")[1]


def dgrad_tma_memo(prob: ConvProblem) -> Config | None:
    """The config ``tuned_dgrad_tma`` chose for ``prob`` in this process, or None: no tuning."""
    hit = _wgrad_memo.get((prob.key(), (DGRAD_TMA.name,), "dgrad_tma"))
    return None if hit is None else hit[1]


def tuned_wgrad_config(algo, prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor) -> Config:
    """``tuned_wgrad`` with one candidate: its config."""
    return tuned_wgrad([algo], prob, x, dy, dw)[1]


def choose_wgrad(prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor | None = None):
    """The wgrad kernel for ``prob``: ``(kernel, config, x, dy)`` with the tensors it reads.

    Depthwise and narrow grouped layers (``DepthwiseWgrad.narrow``): the direct kernel, its
    config tuned when ``dw`` (the output, for a scratch copy) is given. Else ``wgrad_tma`` on NHWC views (an NCHW tensor is copied: one pass over it
    costs less than the gather kernel's strided reads) when it applies, else the gather kernel on
    the tensors as given.
    """
    # grouped layers whose groups merge into TMA-sized super-groups: also wgrad_grouped_tma,
    # timed against the kernel the rules give (never the default until a GPU has timed it)
    merge = prob.groups > 1 and prob.cg > 1 and prob.dtype in (torch.float16, torch.bfloat16) and has_tma(x)

    def merged(xn, dyn) -> list:
        # the super-group kernels that take these tensors (wgrad_grouped_ws once timed)
        out = [WGRAD_GT] if merge and WGRAD_GT.supports(prob, xn, dyn) is None else []
        if merge and WGRAD_GS.CANDIDATES and WGRAD_GS.supports(prob, xn, dyn) is None:
            out.append(WGRAD_GS)
        return out

    if DWGRAD.narrow(prob):
        xn, dyn = as_nhwc(x), as_nhwc(dy)
        algos = [DWGRAD] + merged(xn, dyn)
        if dw is None:
            return DWGRAD, DWGRAD.default_config(prob), xn, dyn
        return (*tuned_wgrad(algos, prob, xn, dyn, dw), xn, dyn)
    if WGRAD_TMA.problem_ok(prob, x):
        xn, dyn = as_nhwc(x), as_nhwc(dy)
        if WGRAD_TMA.supports(prob, xn, dyn) is None:
            if dw is None:
                return WGRAD_TMA, WGRAD_TMA.default_config(prob), xn, dyn
            algos = [WGRAD_TMA] + merged(xn, dyn)
            if prob.groups == 1 and WGRAD_WS.supports(prob, xn, dyn) is None:
                algos.append(WGRAD_WS)
            if WGRAD.narrow(prob) and prob.groups == 1:
                # few outputs (CRAFT's 16 -> 16 head: wgrad_tma's 64-row tile is 75% padding):
                # the gather kernel's narrow tiles, timed against it
                algos.append(WGRAD)
            return (*tuned_wgrad(algos, prob, xn, dyn, dw), xn, dyn)
    if merge and dw is not None:
        # strided grouped layers (ResNeXt's s2 3x3, 16 channels per group): the gather kernel,
        # timed against super-groups on the strided TMA wgrad, both on NHWC tensors
        xn, dyn = as_nhwc(x), as_nhwc(dy)
        wide = merged(xn, dyn)
        if wide:
            return (*tuned_wgrad([WGRAD, *wide], prob, xn, dyn, dw), xn, dyn)
    if dw is not None and WGRAD.narrow(prob):
        # few outputs per group (a 1x1 head): the gather kernel's narrow tiles, timed
        return (*tuned_wgrad([WGRAD], prob, x, dy, dw), x, dy)
    return WGRAD, WGRAD.default_config(prob), x, dy


def wgrad(prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor, launch=None):
    """``dw [K, C/g, R, S] = wgrad(x [N, C, H, W], dy [N, K, P, Q])`` by ``choose_wgrad``'s kernel.

    Returns ``(algorithm, config, nhwc)``: what ran, and whether it read NHWC copies of x and dy;
    a caller's plan runs the same again with ``algorithm.run`` and the same ``launch``, on
    ``as_nhwc`` copies when ``nhwc``. The flag is what was read, not which kernel: the tuner may
    time the gather kernel on the NHWC copies (``choose_wgrad``) and pick it, and a plan that then
    handed it the NCHW tensors would relaunch a kernel specialised for the copies' strides (an H100
    in session 44: ``misaligned address`` on the second call of an NCHW 16 -> 16 1x1 wgrad)."""
    algo, cfg, xk, dyk = choose_wgrad(prob, x, dy, dw)
    algo.run(prob, xk, dyk, dw, cfg, launch)
    return algo, cfg, xk is not x or dyk is not dy


DGRAD = Dgrad()
DGRAD_TMA = DgradTma()
WGRAD = Wgrad()
WGRAD_TMA = WgradTma()
WGRAD_GT = WgradGroupedTma()
WGRAD_WS = WgradWs()
WGRAD_GS = WgradGroupedWs()
DWGRAD = DepthwiseWgrad()
