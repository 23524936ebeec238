"""3-D convolution kernels: forward, dgrad and wgrad, each one ``gemm_kernel`` launch with the
loaders of ``conv/loaders3d.py``.

The forward has four algorithms (``ALGORITHMS3D``), chosen per problem by ``choose`` (the 2-D
tuner's timing loop and disk cache): ``conv3d_gather`` (pointer gathers: any stride, padding,
dilation, groups and strides), ``conv3d_small_k`` (the same with the T*R*S*C/g reduction
flattened, for RGB stems), and on Hopper ``conv3d_tma`` for dense (groups = 1) layers: 5-D TMA
boxes of the NDHWC input, with split-K and persistent configs as in 2-D; a strided layer reads
its taps through a stride-phase view with depth merged into the batch axis
(``input_descriptor3d``). ``conv3d_width_unfold`` runs an RGB stem on ``conv3d_tma`` after
gathering each output column's S taps into one wide pixel (``conv.unfold``).
"""

from __future__ import annotations

import functools
from dataclasses import replace

import torch

from .._runtime import cdiv, has_tma, interpreting, sm_count
from ..matmul import loaders as mm
from ..matmul.launch import descriptor
from ..problem3d import ConvProblem3d
from . import loaders3d as l3
from .fprop import (
    COMPILE_ONLY,
    Algorithm,
    Config,
    SmallK,
    _launch,
    _pow2_upto,
    _small,
    small_k_candidates,
    split_k_buffers,
    stream_k_fits,
    stream_k_split,
)
from .layout import broadcasts
from .unfold import MAX_UNFOLDED, unfold_pays, unfold_w, unfold_weight, unfolded_channels


def _cfg(m_dim: int, n_dim: int, k_dim: int, dtype: torch.dtype) -> Config:
    """A heuristic tile for a gather GEMM whose N side is ``n_dim`` and K tiles run over ``k_dim``."""
    if interpreting():
        return Config(32, min(32, _small(n_dim)), min(32, _small(k_dim)), 4, 1)
    if dtype == torch.float64:
        return Config(64, 32, 16, 4, 2)
    bn = min(128, _small(n_dim, 32))
    bk = min(64 if dtype.itemsize == 2 else 32, _small(k_dim))
    return Config(128, bn, bk, 8 if bn >= 128 else 4, 3)


def forward(prob: ConvProblem3d, x: torch.Tensor, w: torch.Tensor, bias, y: torch.Tensor, cfg=None) -> None:
    """``y [N, K, OD, P, Q] = conv3d(x [N, C, D, H, W], w [K, C/g, T, R, S]) (+ bias)`` through the
    gather kernel (any stride, padding, dilation, groups); ``cfg`` None: the heuristic tile."""
    GATHER.run(prob, x, w, bias, y, cfg or GATHER.default_config(prob))


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


class Wgrad3dGather:
    """``wgrad``'s gather kernel as a tuning candidate (any stride, groups, dtype)."""

    name = "conv3d_wgrad"

    def configs(self, prob: ConvProblem3d) -> list[Config]:
        return [wgrad_config(prob)]

    def default_config(self, prob: ConvProblem3d) -> Config:
        return wgrad_config(prob)

    def run(self, prob: ConvProblem3d, x, dy, dw, cfg: Config, launch=None) -> None:
        wgrad(prob, x, dy, dw, cfg)


class Wgrad3dTma:
    """wgrad through the copy engine (16-bit, groups = 1): ``backward.WgradTma`` with 5-D boxes
    (``loaders3d.tma_wgrad3d_*``); a strided layer reads x through the forward's stride-phase
    view, its pixel blocks one output depth deep. M = output channels, N = one tap's block of input
    channels, K = blocks of output pixels, split over programs and summed in a fixed order."""

    name = "conv3d_wgrad_tma"

    def supports(self, prob: ConvProblem3d, x: torch.Tensor, dy: torch.Tensor) -> str | None:
        """None if the kernel takes ``prob`` with NDHWC ``x`` and ``dy``, else why not."""
        if prob.dtype not in (torch.float16, torch.bfloat16):
            return f"the 3-D TMA wgrad takes fp16 or bf16 (its dy^T operand is M-major), not {prob.dtype}"
        if prob.groups != 1:
            return f"the 3-D TMA wgrad takes groups = 1, not {prob.groups}"
        if not tma_input_ok(x) or not tma_input_ok(dy):
            return "no TMA, or the NDHWC input or grad_output is not 16-byte aligned"
        if strided3(prob):
            if not input_flags(x, prob.stride)["input_phases_ok"]:
                return (f"stride {prob.stride}: the stride-phase view needs a dense channels_last_3d input whose "
                        "height and width are multiples of the stride")  # fmt: skip
            if prob.c % 64:
                # a channel block of the phase view must not run into the next column phase's
                return f"stride {prob.stride}: the strided 3-D TMA wgrad takes C a multiple of 64, not {prob.c}"
        return None

    @staticmethod
    def _tiles(prob: ConvProblem3d, bk: int) -> list[tuple[float, int, int, int]]:
        """``spatial_tiles3``; one output depth deep for a strided layer (the phase view)."""
        tiles = spatial_tiles3(prob, bk)
        return [t for t in tiles if t[1] == 1] if strided3(prob) else tiles

    @staticmethod
    def _shaped(prob: ConvProblem3d, bm: int, bn: int, bk: int, warps: int, stages: int, red: int) -> Config:
        """A config of this tile: the best-covering block of ``bk`` output pixels and the split
        count that gives two waves of programs, each reducing at least 4 pixel blocks."""
        _, td, th, tw = Wgrad3dTma._tiles(prob, bk)[0]
        tiles = cdiv(prob.k, bm) * prob.t * prob.r * prob.s * cdiv(prob.c, bn)
        k_tiles = prob.n * cdiv(prob.od, td) * cdiv(prob.p, th) * cdiv(prob.q, tw)
        split = max(1, min(64, (2 * sm_count()) // max(tiles, 1), k_tiles // 4))
        return Config(bm, bn, bk, warps, stages, split_k=split, tile_n=td, tile_h=th, tile_w=tw,
                      reduce=red if split > 1 else 0)  # fmt: skip

    def default_config(self, prob: ConvProblem3d) -> Config:
        if interpreting():
            return self._shaped(prob, min(32, _small(prob.k)), min(32, _small(prob.c)), 16, 4, 1, 0)
        return self._shaped(prob, 64, 64, 128, 4, 3, 0)

    def configs(self, prob: ConvProblem3d) -> list[Config]:
        """The 2-D TMA wgrad's tile shapes (``WgradTma.configs``), each at the two-wave split and
        half of it; the large tiles' partials summed by the second kernel (``reduce``)."""
        if interpreting():
            return [self.default_config(prob)]
        out = [self.default_config(prob)]
        for bm, bn, bk, warps, stages, red in ((64, 64, 128, 4, 3, 0), (64, 128, 64, 4, 3, 0),
                                                (128, 128, 64, 8, 3, 1), (128, 256, 64, 8, 4, 1)):  # fmt: skip
            if (bm == 128 and prob.k <= 64) or (bn >= 128 and prob.c < bn) or (strided3(prob) and prob.c % bn):
                continue
            if bn == 256 and strided3(prob):  # as backward.WgradTma.tile_ok: wrong on a strided 2-D layer
                continue
            cfg = self._shaped(prob, bm, bn, bk, warps, stages, red)
            half = max(1, cfg.split_k // 2)
            out += [cfg, replace(cfg, split_k=half, reduce=cfg.reduce if half > 1 else 0)]
        # few output tiles (27 taps of a 64 -> 64 layer: 27 tiles for 132 SMs) and long
        # reductions: twice and four times the two-wave split, summed by the second kernel (the
        # H200's first tuning of r3d-18's layer1 took the largest split offered, 9 against 4)
        cfg = self._shaped(prob, 64, 64, 128, 4, 3, 1)
        k_tiles = prob.n * cdiv(prob.od, cfg.tile_n) * cdiv(prob.p, cfg.tile_h) * cdiv(prob.q, cfg.tile_w)
        for f in (2, 4):
            if cfg.split_k > 1 and cfg.split_k * f * 4 <= k_tiles:
                out.append(replace(cfg, split_k=min(256, cfg.split_k * f), reduce=1))
        return list(dict.fromkeys(out))

    def run(self, prob: ConvProblem3d, x, dy, dw, cfg: Config, launch=None) -> None:
        from . import loaders as cl
        from .backward import finish_split_k, reduce_pdl

        # dw [K, C, T, R, S] as [K, C, T*R, S]: the 2-D tap store, its row index t*R + r
        dw4 = (
            dw if dw.stride(2) == prob.r * dw.stride(3) else torch.empty_like(dw, memory_format=torch.contiguous_format)
        )
        box = [1, cfg.tile_n, cfg.tile_h, cfg.tile_w]
        x_desc = input_descriptor3d(prob, x, box + [cfg.block_n])
        dy_desc = descriptor(dy, [prob.n, prob.od, prob.p, prob.q, prob.k],
                             [dy.stride(0), dy.stride(2), dy.stride(3), dy.stride(4), 1], box + [cfg.block_m])  # fmt: skip
        c_tiles = cdiv(prob.c, cfg.block_n)
        a = (dy_desc, (prob.od, prob.p, prob.q))
        b = (x_desc, tma_x_args(prob, c_tiles))
        if strided3(prob):
            x_fns = (l3.tma_wgrad3d_xs_init, l3.tma_wgrad3d_xs_load)
        else:
            x_fns = (l3.tma_wgrad3d_x_init, l3.tma_wgrad3d_x_load)
        c = (None, (dw4, dw4.stride(0), dw4.stride(1), dw4.stride(3), dw4.stride(4), prob.k, prob.s, prob.c, c_tiles))
        num_m, num_n = cdiv(prob.k, cfg.block_m), prob.t * prob.r * prob.s * c_tiles
        k_tiles = prob.n * cdiv(prob.od, cfg.tile_n) * cdiv(prob.p, cfg.tile_h) * cdiv(prob.q, cfg.tile_w)
        ws = None
        if cfg.split_k > 1:
            ws = split_k_buffers(dy.device, num_m * num_n, cfg.split_k, cfg.block_m * cfg.block_n, torch.float32)
        fns = (l3.tma_wgrad3d_dy_init, l3.tma_wgrad3d_dy_load, *x_fns, cl.wgrad_dw_tap_store)
        _launch(launch, (num_m * num_n, 1, cfg.split_k), a, b, c, None, dw4, 0, num_m, num_n, k_tiles, cfg, fns,
                False, prob, ws, pdl=reduce_pdl(cfg))  # fmt: skip
        if cfg.reduce and cfg.split_k > 1:
            finish_split_k(launch, ws[0], c, num_m, num_n, 1, cfg, cl.wgrad_dw_tap_store)
        if dw4 is not dw:
            dw.copy_(dw4)


def depth_free(taps: tuple[int, int, int], pad: tuple[int, int, int], stride: tuple[int, int, int]) -> bool:
    """Whether a strided layer's stride-phase view may take boxes several depths deep: one
    filter tap deep, unpadded, stride 1 along depth (a 2-D layer with the batch as depth), so
    output depth d reads input depth d. Past an image's last depth the box reads the next
    image's first, where dy's box is zero."""
    return taps[0] == 1 and pad[0] == 0 and stride[0] == 1


def phase_grid(stride: tuple[int, int, int], taps: tuple[int, int, int], pad: tuple[int, int, int], depth: int) -> bool:
    """Whether ``conv3d_tma`` and ``conv3d_ws`` read a strided input through the phase-grid view
    (``grid_descriptor3d``, ``ws3d.input_desc``): a 3-D layer whose depth stride or padding keeps
    the phase view's tiles one depth deep (not ``depth_free``: 2-D layers keep their view), and
    ``depth`` a multiple of the depth stride."""
    return stride != (1, 1, 1) and not depth_free(taps, pad, stride) and depth % stride[0] == 0


class Wgrad3dWs:
    """Hopper's warp-specialized wgrad in Gluon (``conv/ws_wgrad.py``): a producer warp issues the
    TMA boxes of dy and of x shifted by the tile's tap, consumer warpgroups run ``wgmma`` with dy^T
    read transposed from shared memory; persistent programs over split-major work units, whose
    fp32 partials a second kernel sums in a fixed order. 16-bit, groups 1; a strided layer reads x
    through the stride-phase view (C a multiple of ``block_n``).

    Configs: ``block_m`` output channels (64 per consumer warpgroup), ``block_n`` input channels
    of one tap, ``block_k`` = ``tile_n x tile_h x tile_w`` output pixels per reduction step,
    ``split_k`` pixel ranges per tile. Gluon does not run under the interpreter; the tuner alone
    picks it (no default outside the tuner)."""

    name = "conv3d_wgrad_ws"

    def supports(
        self, prob: ConvProblem3d, x: torch.Tensor | None = None, dy: torch.Tensor | None = None
    ) -> str | None:
        """None if the kernel takes ``prob`` (with NDHWC ``x`` and ``dy`` when given), else why not."""
        reason = _gluon_problem_reason(self.name, prob)
        if reason:
            return reason
        if x is not None and (not tma_input_ok(x) or not tma_input_ok(dy)):
            return "no TMA, or the NDHWC input or grad_output is not 16-byte aligned"
        if strided3(prob):
            if x is not None and not input_flags(x, prob.stride)["input_phases_ok"]:
                return (f"stride {prob.stride}: the stride-phase view needs a dense channels_last_3d input whose "
                        "height and width are multiples of the stride")  # fmt: skip
            if prob.c % 64:
                return f"stride {prob.stride}: the strided wgrad takes C a multiple of 64, not {prob.c}"
        reason = _gluon_device_reason(self.name)
        if reason:
            return reason
        if (prob.c * prob.dtype.itemsize) % 16 or (prob.k * prob.dtype.itemsize) % 16:
            return f"conv3d_wgrad_ws needs C and K multiples of 8 (got C = {prob.c}, K = {prob.k}): TMA rows"
        return None

    @staticmethod
    def splits(tiles: int, k_blocks: int, sms: int, block_k: int) -> list[int]:
        """The two best pixel-range counts per tile by a cost model: waves of units x (pixel blocks
        per unit + the unit's fixed cost), that cost in pixel blocks being one fp32 partial tile
        written at an SM's share of the copy bandwidth (``384 / block_k`` blocks: an H200 SM does
        about 184 flop per byte it writes) plus one block of pipeline fill; unsplit tiles store
        dw itself (2 bytes an element: ``192 / block_k``); a split layer also pays 4 blocks once
        for the finish kernel (its launch and the partials' read: 2-4 us in session 20's probe,
        where unsplit forms beat split ones the model had ranked first). Each range at least 4
        blocks, none empty, at most four waves."""
        costs = []
        for sk in range(1, 257):
            per = cdiv(k_blocks, sk)
            units = tiles * sk
            if sk > 1 and (per < 4 or (sk - 1) * per >= k_blocks or units > 4 * sms):
                break
            fixed = (384 if sk > 1 else 192) / block_k + 1
            costs.append((cdiv(units, sms) * (k_blocks / sk + fixed) + (4 if sk > 1 else 0), sk))
        return sorted(sk for _, sk in sorted(costs)[:2])

    def candidates(self, prob: ConvProblem3d, sms: int) -> list[Config]:
        """Up to three tile shapes (128 x 256 channels on 64-pixel steps, 128 x 128 and 64 x 128 on
        128-pixel steps; narrower where the layer is), each at ``splits``."""
        e = prob.dtype.itemsize
        cp = min(256, _small(prob.c))
        out = []
        for bm, bn, bp in ((128, 256, 64), (128, 128, 128), (64, 128, 128)):
            bn = min(bn, cp)
            if (bm == 128 and prob.k <= 64) or (strided3(prob) and prob.c % bn):
                continue
            stages = 6
            while stages > 2 and stages * bp * (bm + bn) * e > 200_000:
                stages -= 1
            tiles = spatial_tiles3(prob, bp)
            if strided3(prob) and not depth_free((prob.t, prob.r, prob.s), prob.pad, prob.stride):
                tiles = [t for t in tiles if t[1] == 1]  # the phase view: one output depth per block
            _, td, th, tw = tiles[0]
            n_tiles = cdiv(prob.k, bm) * prob.t * prob.r * prob.s * cdiv(prob.c, bn)
            k_blocks = prob.n * cdiv(prob.od, td) * cdiv(prob.p, th) * cdiv(prob.q, tw)
            base = Config(bm, bn, bp, bm // 16, stages, tile_n=td, tile_h=th, tile_w=tw, persistent=1)
            out += [replace(base, split_k=sk) for sk in self.splits(n_tiles, k_blocks, sms, bp)]
        return list(dict.fromkeys(out))

    def configs(self, prob: ConvProblem3d) -> list[Config]:
        return self.candidates(prob, sm_count())

    def default_config(self, prob: ConvProblem3d) -> Config:
        return self.candidates(prob, max(sm_count(), 2))[0]

    def run(self, prob: ConvProblem3d, x, dy, dw, cfg: Config, launch=None) -> None:
        from .ws_wgrad import ws_wgrad_run

        ws_wgrad_run(x, dy, dw, (prob.t, prob.r, prob.s), prob.pad, prob.dilation, prob.stride, cfg, launch)


WGRAD3D, WGRAD3D_TMA, WGRAD3D_WS = Wgrad3dGather(), Wgrad3dTma(), Wgrad3dWs()


def wgrad_tuned(prob: ConvProblem3d, x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor) -> None:
    """``dw = wgrad(x, dy)`` for NDHWC ``x`` and ``dy`` by the TMA kernel where it applies (its
    config tuned, ``backward.tuned_wgrad``: memo, disk cache, then timing, against the gather
    kernel), else the gather kernel."""
    algo, cfg = wgrad_choice(prob, x, dy, dw)
    algo.run(prob, x, dy, dw, cfg)


def wgrad_choice(prob: ConvProblem3d, x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor):
    """``(kernel, config)`` that ``wgrad_tuned`` runs (tuning on the first call of a shape)."""
    from .backward import tuned_wgrad

    if WGRAD3D_TMA.supports(prob, x, dy) is None:
        ws = [WGRAD3D_WS] if WGRAD3D_WS.supports(prob, x, dy) is None else []
        return tuned_wgrad([WGRAD3D_TMA, *ws, WGRAD3D], prob, x, dy, dw)
    return WGRAD3D, wgrad_config(prob)


# ---------------------------------------------------------------- forward algorithms
# Like the 2-D ones (``fprop.Algorithm``): supports / configs / default_config / run, chosen per
# problem by ``choose`` with the 2-D tuner's timing loop and disk cache (keys tagged "conv3d").
def _gather_args(prob: ConvProblem3d, x, w, y, M: int) -> tuple:
    sd, sh, sw = prob.stride
    pd, ph, pw = prob.pad
    dd, dh, dw = prob.dilation
    a = (None, (x, x.stride(0), x.stride(2), x.stride(3), x.stride(4), x.stride(1), prob.d, prob.h, prob.w, prob.od,
                prob.p, prob.q, M, sd, sh, sw, pd, ph, pw, dd, dh, dw, prob.t, prob.r, prob.s, prob.cg))  # fmt: skip
    b = (None, (w, prob.kg, prob.cg, *w.stride(), prob.t, prob.r, prob.s))
    c = (None, (y, y.stride(0), y.stride(1), y.stride(2), y.stride(3), y.stride(4), prob.od, prob.p, prob.q, M,
                prob.kg))  # fmt: skip
    return a, b, c


class Gather3d(Algorithm):
    """The general 3-D implicit GEMM: pointer gathers, one (t, r, s) tap per K tile; anything."""

    name = "conv3d_gather"
    LOADS = (l3.im2col3d_load, l3.weight3d_init, l3.weight3d_load)

    def supports(self, prob: ConvProblem3d) -> str | None:
        return None

    def k_tiles(self, prob: ConvProblem3d, cfg: Config) -> int:
        return prob.t * prob.r * prob.s * cdiv(prob.cg, cfg.block_k)

    def configs(self, prob: ConvProblem3d) -> list[Config]:
        if interpreting() or TMA3D.supports(prob) is None:
            # where the TMA kernel applies, the gather kernel is only a fallback (as in 2-D)
            return [self.default_config(prob)]
        return self.candidates(prob)

    def candidates(self, prob: ConvProblem3d) -> list[Config]:
        """The tuning candidates on a GPU (``configs`` there)."""
        out = []
        bn_max = max(32, _small(prob.kg, 32))
        bks = [bk for bk in (32, 64) if bk <= max(32, _small(prob.cg))]
        for bm, bn, warps in ((128, 128, 8), (128, 64, 4), (64, 128, 4), (64, 64, 4), (128, 32, 4)):
            if bn > bn_max:
                continue
            for bk in bks:
                if (bm, bn, bk, warps) == (64, 128, 64, 4):
                    continue  # spills registers (tools/sm90_check.py); the others do not
                for stages in (3, 4):
                    if (bm + bn) * bk * prob.dtype.itemsize * stages <= 160 * 1024:
                        out.append(Config(bm, bn, bk, warps, stages))
        return out

    def default_config(self, prob: ConvProblem3d) -> Config:
        return _cfg(prob.n * prob.od * prob.p * prob.q, prob.kg, prob.cg, prob.dtype)

    def run(self, prob, x, w, bias, y, cfg, launch=None) -> None:
        if launch is not None and launch.fast_ready:  # a repeat call: only the tensors change
            launch.fast((x, w, y, y if bias is None else bias, y, y))
            return
        M = prob.n * prob.od * prob.p * prob.q
        a, b, c = _gather_args(prob, x, w, y, M)
        num_m, num_n = cdiv(M, cfg.block_m), cdiv(prob.kg, cfg.block_n)
        fns = (l3.im2col3d_init, *self.LOADS, l3.out3d_store)
        _launch(launch, (num_m * num_n, prob.groups, 1), a, b, c, bias, y, prob.kg, num_m, num_n,
                self.k_tiles(prob, cfg), cfg, fns, False, prob)  # fmt: skip


class SmallK3d(Gather3d):
    """Few channels per group (first layers: RGB clips): the reduction T*R*S*C/g is flattened into
    dense K tiles instead of one mostly-empty tile per tap (a 3x7x7 stem: 28 tiles, not 147)."""

    name = "conv3d_small_k"
    LOADS = (l3.im2col3d_flat_load, l3.weight3d_init, l3.weight3d_flat_load)
    MAX_K = 2048

    def supports(self, prob: ConvProblem3d) -> str | None:
        k = prob.t * prob.r * prob.s * prob.cg
        if k > self.MAX_K:
            return f"the reduction T*R*S*C/groups = {k} is over {self.MAX_K}: use the per-tap kernels"
        if prob.cg >= 64:
            return f"C/groups = {prob.cg} fills per-tap K tiles already"
        return None

    def heuristic_ok(self, prob: ConvProblem3d) -> bool:
        return prob.cg < 16

    def k_tiles(self, prob: ConvProblem3d, cfg: Config) -> int:
        return cdiv(prob.t * prob.r * prob.s * prob.cg, cfg.block_k)

    def configs(self, prob: ConvProblem3d) -> list[Config]:
        return [self.default_config(prob)] if interpreting() else self.candidates(prob)

    def candidates(self, prob: ConvProblem3d) -> list[Config]:
        return small_k_candidates(prob.t * prob.r * prob.s * prob.cg, prob.kg)

    # the 2-D small_k's heuristic: it reads only K/g and the dtype
    default_config = SmallK.default_config


# ---------------------------------------------------------------- forward through TMA
def tma_input_ok(x: torch.Tensor) -> bool:
    """Whether the device has TMA and the NDHWC tensor ``x`` can be a 5-D descriptor: channel
    stride 1, 16-byte aligned base and outer strides, no broadcast dimension (``layout.broadcasts``)."""
    e = x.element_size()
    if not has_tma(x) or x.stride(1) != 1 or x.data_ptr() % 16:
        return False
    if broadcasts(x, (0, 2, 3, 4)):
        return False
    return all((x.stride(i) * e) % 16 == 0 for i in (0, 2, 3, 4))


def input_flags(x: torch.Tensor, stride: tuple[int, int, int]) -> dict[str, bool]:
    """The problem fields that depend on the NDHWC input ``x`` itself: ``tma_input_ok`` and, for
    a strided layer, ``input_phases_ok`` (``x`` reshapes to the stride-phase view
    ``[N*D, H/sh, sh, W/sw, sw*C]``: dense channels_last_3d, H and W multiples of the stride)."""
    _, _, _, h, w = x.shape
    phases = (
        stride != (1, 1, 1)
        and h % stride[1] == 0
        and w % stride[2] == 0
        and x.is_contiguous(memory_format=torch.channels_last_3d)
    )
    return {"tma_input_ok": tma_input_ok(x), "input_phases_ok": phases, "tma_ok": has_tma(x)}


def tma_supports(prob: ConvProblem3d, x: torch.Tensor) -> str | None:
    """None if the TMA forward takes the problem with input ``x`` (NDHWC), else why not."""
    return TMA3D.supports(replace(prob, **input_flags(x, prob.stride)), x)


def strided3(prob: ConvProblem3d) -> bool:
    """Whether the TMA forward reads ``prob`` through the stride-phase view (any stride above 1)."""
    return prob.stride != (1, 1, 1)


def input_descriptor3d(prob: ConvProblem3d, x: torch.Tensor, box: list[int]):
    """NDHWC ``x`` as the TMA forward's descriptor, box ``[1, TD, TH, TW, BLOCK_K]``: the plain 5-D
    view at stride 1; else the stride-phase view ``[N*D, H/sh, sh, W/sw, sw*C]`` (the 2-D
    ``fprop.input_descriptor``'s, with depth merged into the batch axis: tiles are one depth
    deep, so depth needs no phase axis), box ``[1, TH, 1, TW, BLOCK_K]``."""
    if strided3(prob):
        _, sh, sw = prob.stride
        return descriptor(x, [prob.n * prob.d, prob.h // sh, sh, prob.w // sw, sw * prob.c],
                          [x.stride(2), x.stride(3) * sh, x.stride(3), prob.c * sw, 1],
                          [1, box[2], 1, box[3], box[4]])  # fmt: skip
    return descriptor(x, [prob.n, prob.d, prob.h, prob.w, prob.c],
                      [x.stride(0), x.stride(2), x.stride(3), x.stride(4), 1], box)  # fmt: skip


def grid_descriptor3d(prob: ConvProblem3d, x: torch.Tensor, box: list[int]):
    """Dense NDHWC ``x`` through the phase-grid view ``[D/sd, H/sh, N*D*H, W/sw, sw*C]`` (strides
    ``sd*H*W*C, sh*W*C, W*C, sw*C, 1``; ``phase_grid`` layers), boxes ``[TD, TH, 1, TW, BLOCK_K]``
    from ``box`` = ``[1, TD, TH, TW, BLOCK_K]``: the conv3d_tma form of ``ws3d.input_desc``'s
    ``grid`` view, read by ``loaders3d.tma_im2col3d_grid_*``."""
    sd, sh, sw = prob.stride
    return descriptor(x, [prob.d // sd, prob.h // sh, prob.n * prob.d * prob.h, prob.w // sw, sw * prob.c],
                      [x.stride(2) * sd, x.stride(3) * sh, x.stride(3), prob.c * sw, 1],
                      [box[1], box[2], 1, box[3], box[4]])  # fmt: skip


def grid_x_args(prob: ConvProblem3d, c_tiles: int) -> tuple:
    """``loaders3d.tma_im2col3d_grid_init``'s arguments."""
    return (prob.od, prob.p, prob.q, *prob.pad, *prob.dilation, prob.r, prob.s, c_tiles, prob.d, prob.h,
            *prob.stride, prob.c)  # fmt: skip


def tma_x_args(prob: ConvProblem3d, c_tiles: int) -> tuple:
    """The x loader's arguments for ``input_descriptor3d``'s view, shared by the TMA forward
    (``tma_im2col3d_*``) and wgrad (``tma_wgrad3d_*``): the stride-phase loaders' when strided."""
    pd, ph, pw = prob.pad
    dd, dh, dw = prob.dilation
    if strided3(prob):
        sd, sh, sw = prob.stride
        return (prob.d, prob.od, prob.p, prob.q, prob.h // sh, pd, ph, pw, dd, dh, dw, prob.r, prob.s, c_tiles,
                sd, sh, sw, prob.c)  # fmt: skip
    return (prob.od, prob.p, prob.q, pd, ph, pw, dd, dh, dw, prob.r, prob.s, c_tiles, prob.d)


def spatial_tiles3(prob: ConvProblem3d, block_n: int) -> list[tuple[float, int, int, int]]:
    """Every (depth x rows x columns) = ``block_n`` block of output pixels, best first, with its
    coverage (real output / tiled output); ties go to longer rows (faster copies). Never empty."""
    out = []
    used = prob.od * prob.p * prob.q
    for td in _pow2_upto(block_n):
        for th in _pow2_upto(block_n // td):
            tw = block_n // (td * th)
            if max(td, th, tw) > 256:  # the copy engine's largest box side
                continue
            tiled = cdiv(prob.od, td) * td * cdiv(prob.p, th) * th * cdiv(prob.q, tw) * tw
            out.append((used / tiled, td, th, tw))
    out.sort(key=lambda t: (-round(t[0], 6), -t[3], t[1]))
    return out


def _tma_bks(prob: ConvProblem3d) -> list[int]:
    """K tiles: the largest dividing C (no channel padding, a channels_last_3d weight read in
    place), then the 128-byte one if it pads C by at most a third (144 channels: 16 -> 64)."""
    cap = 64 if prob.dtype.itemsize == 2 else 32
    if strided3(prob):  # the phase view has no channel padding: the next pixel follows channel C - 1
        return [b for b in (cap, cap // 2, cap // 4) if b >= 16 and prob.c % b == 0][:1]
    bk = next((b for b in (cap, cap // 2, cap // 4) if b >= 16 and prob.c % b == 0), min(cap, _small(prob.c)))
    out = [bk]
    if bk < cap and cdiv(prob.c, cap) * cap * 3 <= prob.c * 4:
        out.append(cap)
    return out


def _smem(bm: int, bn: int, bk: int, stages: int, itemsize: int) -> int:
    return stages * (bm + bn) * bk * itemsize + bm * bn * itemsize


#: the tile shapes (block_m, block_n, warps, stages) of ``Tma3d.stream_k_candidates``
_STREAM_K = ((256, 128, 8, 3), (128, 64, 4, 4), (64, 128, 4, 4), (128, 128, 4, 3))


class Tma3d(Algorithm):
    """Hopper 3-D implicit GEMM: ``y^T = w . im2col(x)^T`` with 5-D TMA boxes [1, TD, TH, TW, BK]
    of the NDHWC input per tap (groups = 1, stride 1); optional split-K or a persistent tile loop,
    as ``fprop.ImplicitGemmTma``."""

    name = "conv3d_tma"

    def supports(self, prob: ConvProblem3d, x: torch.Tensor | None = None) -> str | None:
        if prob.dtype not in (torch.float16, torch.bfloat16):
            # fp32 went wrong on the H200 (relative error 0.82 for a 64x128x32 tile without
            # split-K, C = 40, K = 24; the interpreter passes): refused until that is understood
            return f"the 3-D TMA kernel takes fp16 or bf16, not {prob.dtype} (fp32: see benchmarks/NOTES.md)"
        if prob.groups != 1:
            return f"the 3-D TMA kernel takes groups = 1, not {prob.groups}: use conv3d_gather"
        if not prob.tma_input_ok:
            if x is not None and not has_tma(x):
                return "the device has no TMA (needs compute capability >= 9.0)"
            return "no TMA, or the NDHWC input is not 16-byte aligned"
        if (prob.k * prob.dtype.itemsize) % 16:
            return "K * itemsize must be a multiple of 16 bytes for the TMA output store"
        if strided3(prob):
            if not prob.input_phases_ok:
                return (f"stride {prob.stride}: the stride-phase TMA view needs a dense channels_last_3d input whose "
                        "height and width are multiples of the stride; pass one, or use conv3d_gather")  # fmt: skip
            if not _tma_bks(prob):
                return f"stride {prob.stride}: C = {prob.c} must be a multiple of 16 for the stride-phase TMA view"
        return None

    @staticmethod
    def grid(prob: ConvProblem3d) -> bool:
        """Whether a strided layer is read through the phase-grid view (``grid_descriptor3d``)."""
        return phase_grid(prob.stride, (prob.t, prob.r, prob.s), prob.pad, prob.d)

    def _spatial(self, prob: ConvProblem3d, block_n: int) -> list[tuple[float, int, int, int]]:
        """``spatial_tiles3``; a strided layer's tiles are one output depth deep through the phase
        view, of any depth through the phase-grid view."""
        tiles = spatial_tiles3(prob, block_n)
        return [t for t in tiles if t[1] == 1] if strided3(prob) and not self.grid(prob) else tiles

    def _tiles(self, prob: ConvProblem3d, bm: int, td: int, th: int, tw: int) -> int:
        return cdiv(prob.k, bm) * prob.n * cdiv(prob.od, td) * cdiv(prob.p, th) * cdiv(prob.q, tw)

    def configs(self, prob: ConvProblem3d) -> list[Config]:
        if interpreting():
            return [self.default_config(prob)]
        return self.candidates(prob, sm_count())

    def candidates(self, prob: ConvProblem3d, sms: int) -> list[Config]:
        """The tuning candidates for a GPU of ``sms`` SMs (``configs`` on the current device)."""
        e = prob.dtype.itemsize
        bks = _tma_bks(prob)
        k_taps = prob.t * prob.r * prob.s
        out = []
        # (block_m, block_n, warps, stages): 64-row tiles one warpgroup, 128-row tiles two; the
        # 2-D kernel's shapes (fprop.ImplicitGemmTma.configs), and 128x128 on one warpgroup: two
        # programs per SM (96 KB of buffers, 154-172 registers, no spills with split-K) that
        # read half the bytes per multiply-add of 128x64 tiles, which on small volumes are bound
        # by the L2's bandwidth (benchmarks/NOTES.md, session 19)
        shapes = [(64, 128, 4, 4), (64, 256, 4, 2), (64, 256, 4, 3), (64, 256, 8, 3), (128, 128, 8, 4),
                  (128, 256, 8, 3), (64, 64, 4, 4), (128, 64, 4, 4), (128, 128, 4, 3)]  # fmt: skip
        for bk in bks:
            main = bk == bks[0]
            for bm, bn, warps, stages in shapes:
                if bm == 128 and prob.k <= 64:
                    continue
                if bn == 64 and self._tiles(prob, bm, *self._spatial(prob, 128)[0][1:]) >= sms:
                    continue  # 64-pixel tiles only where 128-pixel ones leave SMs idle
                while stages > 2 and _smem(bm, bn, bk, stages, e) > 220_000:
                    stages -= 1
                tiles = self._spatial(prob, bn)
                best = tiles[0][0]
                for cover, td, th, tw in tiles[: 2 if main else 1]:
                    if cover >= 0.85 * best:
                        out.append(Config(bm, bn, bk, warps, stages, tile_n=td, tile_h=th, tile_w=tw))
                if not main:
                    continue
                _, td, th, tw = tiles[0]
                n_tiles = self._tiles(prob, bm, td, th, tw)
                # persistent: the next tile's loads overlap this tile's epilogue; two programs per
                # SM where two fit in shared memory
                if n_tiles > sms:
                    for per_sm in (1, 2) if _smem(bm, bn, bk, stages, e) <= 110_000 else (1,):
                        out.append(Config(bm, bn, bk, warps, stages, tile_n=td, tile_h=th, tile_w=tw,
                                          persistent=per_sm))  # fmt: skip
                # few output tiles and a long reduction (3-D: 27 taps): split K to fill the GPU;
                # only shapes whose partial-sum epilogue fits in registers (as in 2-D)
                k_tiles = k_taps * cdiv(prob.c, bk)
                if ((bm * bn) // (32 * warps) <= 64 or (bm, bn, warps) == (128, 128, 4)) and n_tiles < 1.5 * sms:
                    for sk in (2, 4, 8):
                        if k_tiles >= 8 * sk and n_tiles * sk <= 4 * sms:
                            out.append(Config(bm, bn, bk, warps, stages, tile_n=td, tile_h=th, tile_w=tw,
                                              split_k=sk))  # fmt: skip
        return out

    def stream_k_candidates(self, prob: ConvProblem3d, sms: int) -> list[Config]:
        """Stream-K forms (``matmul.blocks.stream_k_gemm_kernel``) of three tile shapes, where their
        output tiles fill the GPU's waves badly (r3d-18's 256-channel layer on 4x14x14: 224 tiles
        of 128x64 for 132 SMs, 56 of 256x128); one-warpgroup tiles also with two programs per SM.

        Not among ``candidates``: on the H200 (session 19) they ran 13-45% slower than each layer's
        best plain or split-K config on all four r3d-18 layers they were offered for, and slower
        than the plain kernel on the same tile with the same work per SM (benchmarks/NOTES.md).
        Kept for forced runs and A/B timing until that is understood."""
        out = []
        bk = _tma_bks(prob)[0]
        k_tiles = prob.t * prob.r * prob.s * cdiv(prob.c, bk)
        for bm, bn, warps, stages in _STREAM_K:
            if bm > 64 and prob.k < bm:
                continue
            _, td, th, tw = self._spatial(prob, bn)[0]
            n_tiles = self._tiles(prob, bm, td, th, tw)
            # two programs per SM where two fit: one warpgroup each, and the K loop's buffers in
            # half the shared memory (the epilogue reuses them)
            two = warps == 4 and stages * (bm + bn) * bk * prob.dtype.itemsize <= 110_000
            for per_sm in (1, 2) if two else (1,):
                slots = per_sm * sms
                if n_tiles % slots == 0 or n_tiles / slots / cdiv(n_tiles, slots) >= 0.9:
                    continue  # whole waves already
                if k_tiles >= 8 and stream_k_fits(n_tiles, k_tiles, slots):
                    out.append(Config(bm, bn, bk, warps, stages, tile_n=td, tile_h=th, tile_w=tw, stream_k=per_sm))
        return out

    def default_config(self, prob: ConvProblem3d) -> Config:
        bk = _tma_bks(prob)[0]
        if interpreting():
            _, td, th, tw = self._spatial(prob, 32)[0]
            return Config(min(32, _small(prob.k)), 32, min(bk, 32), 4, 1, tile_n=td, tile_h=th, tile_w=tw)
        bm = 128 if prob.k >= 128 else 64
        bn, warps = 128, (8 if bm == 128 else 4)
        stages = 4 if _smem(bm, bn, bk, 4, prob.dtype.itemsize) <= 200_000 else 3
        _, td, th, tw = self._spatial(prob, bn)[0]
        # a deep layer on a small volume has a few dozen tiles for 132 SMs: split its long reduction
        sms = sm_count()
        n_tiles = self._tiles(prob, bm, td, th, tw)
        k_tiles = prob.t * prob.r * prob.s * cdiv(prob.c, bk)
        sk = 1
        while sk < 8 and n_tiles * sk * 2 <= sms and k_tiles >= 16 * sk:
            sk *= 2
        return Config(bm, bn, bk, warps, stages, tile_n=td, tile_h=th, tile_w=tw, split_k=sk)

    def run(self, prob, x, w, bias, y, cfg, launch=None) -> None:
        if launch is not None and launch.fast_ready:
            cp, split = launch.extra
            yo = _ndhwc_out(y)
            ws, locks = split_k_buffers(x.device, *split) if split else (yo, yo)
            launch.fast((_packed_weight(w, cp), x, yo, yo if bias is None else bias, ws, locks))
            if yo is not y:
                y.copy_(yo)
            return
        cp = cdiv(prob.c, cfg.block_k) * cfg.block_k
        wp = _packed_weight(w, cp)
        box = [1, cfg.tile_n, cfg.tile_h, cfg.tile_w]
        grid_view = self.grid(prob)
        if grid_view:
            x_desc = grid_descriptor3d(prob, x, box + [cfg.block_k])
        else:
            x_desc = input_descriptor3d(prob, x, box + [cfg.block_k])
        w_desc = descriptor(wp, [prob.k, wp.shape[1]], [wp.stride(0), 1], [cfg.block_m, cfg.block_k])
        yo = _ndhwc_out(y)
        y_desc = descriptor(yo, [prob.n, prob.od, prob.p, prob.q, prob.k],
                            [yo.stride(0), yo.stride(2), yo.stride(3), yo.stride(4), 1], box + [cfg.block_m])  # fmt: skip
        num_m = cdiv(prob.k, cfg.block_m)
        num_n = prob.n * cdiv(prob.od, cfg.tile_n) * cdiv(prob.p, cfg.tile_h) * cdiv(prob.q, cfg.tile_w)
        c_tiles = cp // cfg.block_k
        a = (w_desc, (prob.k,))
        b = (x_desc, grid_x_args(prob, c_tiles) if grid_view else tma_x_args(prob, c_tiles))
        if grid_view:
            b_fns = (l3.tma_im2col3d_grid_init, l3.tma_im2col3d_grid_load)
            k_range = l3.tma_im2col3d_grid_k_range
        elif strided3(prob):
            b_fns = (l3.tma_im2col3d_phase_init, l3.tma_im2col3d_phase_load)
            k_range = l3.tma_im2col3d_phase_k_range
        else:
            b_fns = (l3.tma_im2col3d_init, l3.tma_im2col3d_load)
            k_range = l3.tma_im2col3d_k_range
        c = (y_desc, (prob.od, prob.p, prob.q))
        fns = (mm.desc2d_init, mm.desc2d_a_load, *b_fns, l3.tma_output3d_store)
        if not (cfg.persistent or cfg.stream_k):
            # tiles skip the depth taps that read only padding (the persistent and Stream-K
            # kernels give every tile the same K tiles)
            fns = (*fns, k_range)
        k_tiles = prob.t * prob.r * prob.s * c_tiles
        split = None
        if cfg.split_k > 1:
            split = (num_m * num_n, cfg.split_k, cfg.block_m * cfg.block_n)
        elif cfg.stream_k:
            split = stream_k_split(cfg, num_m * num_n, k_tiles)
        ws = split_k_buffers(x.device, *split) if split else None
        _launch(launch, (num_m * num_n, 1, cfg.split_k), a, b, c, bias, yo, prob.k, num_m, num_n, k_tiles, cfg, fns,
                True, prob, ws)  # fmt: skip
        if launch is not None:
            launch.extra = (cp, split)
        if yo is not y:
            y.copy_(yo)


def _wgmma_device() -> bool:
    """The current CUDA device has wgmma (compute capability 9.x: Hopper; Blackwell has not)."""
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


@functools.cache
def _gluon_hopper() -> bool:
    """This Triton has Gluon's Hopper API (``triton.experimental.gluon``, Triton 3.6)."""
    try:
        from triton.experimental.gluon.language.nvidia import hopper  # noqa: F401
    except ImportError:
        return False
    return True


def _gluon_problem_reason(name: str, prob: ConvProblem3d, tf32: bool = False) -> str | None:
    """Why the Gluon kernel ``name`` (``conv3d_ws``, ``conv3d_wgrad_ws``) cannot take ``prob`` on
    any device, or None: the interpreter, a dtype other than fp16/bf16 (``tf32``: or fp32 with
    TF32 allowed, whose wgmma reads both operands K-major, as the forward's are), groups."""
    if interpreting():
        return f"{name} is a Gluon kernel, which TRITON_INTERPRET cannot run: it needs a Hopper GPU"
    if tf32 and prob.dtype == torch.float32 and prob.precision != "tf32":
        return (f"{name} runs fp32 as TF32 products only: TF32 is off (torch.backends.cudnn.allow_tf32), and "
                "strict fp32 is 3xTF32, which this kernel does not do")  # fmt: skip
    if prob.dtype not in ((torch.float16, torch.bfloat16, torch.float32) if tf32 else (torch.float16, torch.bfloat16)):
        return f"{name} takes fp16 or bf16{', or fp32 with TF32 on' if tf32 else ''}, not {prob.dtype}"
    if prob.groups != 1:
        return f"{name} takes groups = 1, not {prob.groups}"
    return None


def _gluon_device_reason(name: str) -> str | None:
    """Why the Gluon kernel ``name`` cannot run here, or None: wgmma needs compute capability 9.x,
    and the Triton must have Gluon's Hopper API."""
    if not _wgmma_device():
        return f"{name} uses wgmma: it needs a compute capability 9.x (Hopper) GPU"
    if not _gluon_hopper():
        return f"{name} is a Gluon kernel: it needs a Triton with triton.experimental.gluon (3.6)"
    return None


class Ws3d(Algorithm):
    """Hopper's warp-specialized 3-D implicit GEMM in Gluon (``conv/ws3d.py``): a producer warp
    issues the TMA loads into a ring of shared-memory slots, consumer warpgroups run ``wgmma`` and
    the epilogue, programs are persistent. Groups 1, 16-bit or fp32 with TF32 on (TF32 wgmma, 32
    channels a K step), C a multiple of 16; a strided layer
    reads its input through the stride-phase view, as ``conv3d_tma`` does.

    Its configs put output *pixels* on ``block_m`` (``tile_n x tile_h x tile_w`` = depth x rows x
    columns; 64 per consumer warpgroup) and output channels on ``block_n``; ``persistent`` is the
    number of programs per SM, ``split_k`` the K splits per tile (summed by a second kernel) for
    layers with few tiles. Gluon does not run under the interpreter, so only the GPU tests run the
    kernel; the tuner alone picks it (``heuristic_ok`` is False)."""

    name = "conv3d_ws"

    def supports(self, prob: ConvProblem3d, x: torch.Tensor | None = None) -> str | None:
        reason = _gluon_problem_reason(self.name, prob, tf32=True)
        if reason:
            return reason
        if not prob.tma_input_ok:
            return "no TMA, or the NDHWC input is not 16-byte aligned"
        if strided3(prob) and not prob.input_phases_ok:
            return (f"stride {prob.stride}: the stride-phase view needs a dense channels_last_3d input whose height "
                    "and width are multiples of the stride")  # fmt: skip
        reason = _gluon_device_reason(self.name)
        if reason:
            return reason
        if prob.c % 16 or (prob.k * prob.dtype.itemsize) % 16:
            return f"conv3d_ws needs C a multiple of 16 (got {prob.c}) and K * itemsize a multiple of 16 (K = {prob.k})"
        return None

    def heuristic_ok(self, prob: ConvProblem3d) -> bool:
        return False

    def configs(self, prob: ConvProblem3d) -> list[Config]:
        return self.candidates(prob, sm_count())

    @staticmethod
    def _deep(prob: ConvProblem3d) -> bool:
        """Whether tiles may be several output depths deep: unstrided, a 2-D layer's phase view
        (``depth_free``: the batch as depth), or the phase-grid view; else one depth deep."""
        taps = (prob.t, prob.r, prob.s)
        return not strided3(prob) or depth_free(taps, prob.pad, prob.stride) or phase_grid(prob.stride, taps,
                                                                                             prob.pad, prob.d)  # fmt: skip

    @staticmethod
    def _splits(n_tiles: int, k_steps: int, sms: int) -> list[int]:
        """K splits for a layer whose tiles leave SMs idle: every split with 8 or more K steps and
        no empty split, the one that fills the GPU's waves best (ties: fewer splits)."""
        fits = []
        for sk in (2, 3, 4, 6, 8):
            per = cdiv(k_steps, sk)
            if per < 8 or (sk - 1) * per >= k_steps or n_tiles * sk > 4 * sms:
                continue
            units = n_tiles * sk
            fits.append((-(units / sms) / cdiv(units, sms), sk))
        return [sk for _, sk in sorted(fits)[:1]]

    def candidates(self, prob: ConvProblem3d, sms: int) -> list[Config]:
        """128 pixels on two consumer warpgroups or 64 on one (two programs per SM where they
        fit), by the widest channel tile and 128; split K where the tiles leave SMs idle (and
        stream-K there once ``STREAM_CANDIDATES`` is on)."""
        e = prob.dtype.itemsize
        # 128-byte box rows (the widest swizzle): 64 channels of 16 bits, 32 of fp32
        bk = next(b for b in (64, 32, 16) if prob.c % b == 0 and b * e <= 128)
        kp = _small(prob.k)
        k_steps = prob.t * prob.r * prob.s * (prob.c // bk)
        out = []
        deep = self._deep(prob)
        for bm, warps in ((128, 8), (64, 4)):
            tiles = spatial_tiles3(prob, bm)
            if not deep:
                tiles = [t for t in tiles if t[1] == 1]  # the phase view: one output depth per tile
            _, td, th, tw = tiles[0]
            for bn in sorted({min(256, kp), min(128, kp)}, reverse=True):
                n_tiles = cdiv(prob.k, bn) * prob.n * cdiv(prob.od, td) * cdiv(prob.p, th) * cdiv(prob.q, tw)
                stages = 4
                while stages > 2 and stages * (bm + bn) * bk * e + bm * bn * e > 225_000:
                    stages -= 1
                cfg = Config(bm, bn, bk, warps, stages, tile_n=td, tile_h=th, tile_w=tw, persistent=1)
                if 2 * n_tiles >= sms:
                    out.append(self.direct_form(self.deep_ring(cfg, e), e, k_steps))
                    if warps == 4 and stages * (bm + bn) * bk * e + bm * bn * e <= 110_000:
                        out.append(replace(cfg, persistent=2))
                if n_tiles < 1.5 * sms:
                    out += [replace(cfg, split_k=sk) for sk in self._splits(n_tiles, k_steps, sms)]
                if self.STREAM_CANDIDATES:
                    out += self.stream_configs(prob, cfg, n_tiles, k_steps, sms)
        return out + self.side_by_side(prob, sms, bk, deep)

    #: the ring depth of the unsplit 16-bit tiles ``deep_ring`` deepens
    DEEP_RING = 8

    @classmethod
    def deep_ring(cls, cfg: Config, itemsize: int) -> Config:
        """``cfg`` with up to ``DEEP_RING`` stages where it is an unsplit 16-bit tile whose time
        follows the ring's depth and they fit; else ``cfg``. Since the producer carries its K-step
        indices (session 58) the ring's depth shows in some tiles' times (H100):

        - 64 x 128 (one consumer warpgroup, 24 KB a stage at block_k 64: 8 stages and the staging
          tile take 208 KB; session 59): 8 stages against 4 took 51.5 -> 37.5 us on ResNet-50's
          l4 3x3 (first), 46.6 -> 44.0 on l4 3x3 @7, and 26.7 -> 19.6, 26.7 -> 21.0, 39.5 -> 29.9
          on its three 1x1 layers of 1024-2048 input channels on 14x14 and 7x7 images;
        - 128 x 128 at block_k 32 (channel counts no multiple of 64; 16 KB a stage, 160 KB at 8;
          session 60): 27.2 -> 23.2 us on the seed's 96-channel 5x5 layer (6 stages 23.9).

        At block_k 64 the 128 x 128 tile did not gain from a fifth stage (session 60, two layers),
        nor the 64 x 256 tile (session 58). Split forms keep their depth (not timed deeper)."""
        if itemsize != 2 or cfg.split_k > 1:
            return cfg
        if (cfg.block_m, cfg.block_n) != (64, 128) and (cfg.block_m, cfg.block_n, cfg.block_k) != (128, 128, 32):
            return cfg
        stages = cls.DEEP_RING
        while (
            stages > cfg.num_stages
            and stages * (cfg.block_m + cfg.block_n) * cfg.block_k * itemsize + (cfg.block_m * cfg.block_n * itemsize)
            > 225_000
        ):
            stages -= 1
        return replace(cfg, num_stages=stages)

    #: whether the tuner's unsplit tiles store from registers where ``direct_form`` says so
    #: (``tools/config_probe.py --direct`` times both forms)
    DIRECT_CANDIDATES = True

    #: the direct form's deepest ring by (block_m, block_n) of one- and two-consumer tiles (others: 4)
    DIRECT_RING = {(64, 256): 6, (128, 128): 6}

    @classmethod
    def direct_form(cls, cfg: Config, itemsize: int, k_steps: int) -> Config:
        """``cfg`` storing from registers (``direct``: no staging tile of ``block_m x block_n``
        outputs in shared memory) where that frees room for more ring stages, in place of the
        staged form; else ``cfg``. fp32 (TF32) only: a 128 x 256 tile goes from 2 stages to 4,
        the three-consumer 192 x 128 tile from 3 to 4, 64 x 256 from 3 to 5 and 128 x 128 from 4
        to 6 (``DIRECT_RING``). In session 35's TF32 `all` suite the direct form beat its staged
        twin in 57 of 62 pairs (1.22x in geometric mean); the five exceptions had 2-8 K steps
        (1x1 layers of 64-256 channels), where the loop is too short for the stages to matter and
        the asynchronous TMA store wins.

        The ring was capped at 4 until session 61 (H100, ``s61t``): since the producer carries its
        K-step indices (session 58), 64 x 256 at 5 stages against 4 took 65.1 -> 57.2 us on
        ResNet-50's l4 3x3 (first) and 56.4 -> 52.0 on l4 3x3 @7, and 128 x 128 at 6 against 4
        took 81.2 -> 71.2 on l2 3x3 (first). 64 x 128 at 8 stages won on one layer and lost on the
        other (96.0 -> 84.8, 88.2 -> 100.7): it keeps 4, as the three-consumer tile (not timed).
        At block_k 16 (channel counts no multiple of 32) both deep tiles take 6 stages (not timed:
        fewer bytes in flight than the 5-6 stages of block_k 32 that won)."""
        if not cls.DIRECT_CANDIDATES or itemsize < 4 or k_steps < 9:
            # 16-bit outputs: slower on both layers timed (session 35: 128 x 256 at 4 stages
            # direct against 3 staged, 41.7 against 38.3 us on ResNet-50's l3 3x3), a thread's
            # stores from registers costing more than the extra stage gains
            return cfg
        # a ring slot holds every consumer's pixel box and the weight tile they share
        ring = (cfg.block_m * max(1, cfg.parts) + cfg.block_n) * cfg.block_k * itemsize
        most = cls.DIRECT_RING.get((cfg.block_m, cfg.block_n), 4) if cfg.parts <= 1 else 4
        stages = min(most, 225_000 // ring)
        return replace(cfg, direct=1, num_stages=stages) if stages > cfg.num_stages else cfg

    #: whether the tuner times ``stream_configs`` (off: on the H200 it lost on all five layers it
    #: was made for, session 35; the data-parallel + stream-K hybrid, ``stream_k=2``, is forced
    #: only: it lost on the H100 on the three layers it was made for, session 57)
    STREAM_CANDIDATES = False

    @staticmethod
    def stream_ok(prob: ConvProblem3d) -> bool:
        """Whether every tile runs all its K steps (stream-K's even split of (tile, K step) pairs
        needs it): a filter one tap deep with no depth padding, read without the phase-grid view
        (a 2-D layer through ``implicit_gemm_ws`` always)."""
        return (
            prob.t == 1
            and prob.pad[0] == 0
            and prob.pad_end[0] == 0
            and not (strided3(prob) and phase_grid(prob.stride, (prob.t, prob.r, prob.s), prob.pad, prob.d))
        )

    @classmethod
    def stream_configs(cls, prob: ConvProblem3d, cfg: Config, n_tiles: int, k_steps: int, sms: int) -> list[Config]:
        """``cfg`` as stream-K (one program per SM, the (tile, K step) pairs split evenly) where its
        tiles fill the SMs' last wave less than 90%: ResNet-50's 14x14 and 7x7 stages make 98 tiles
        of 128 x 256 or 64 x 256 on 132 SMs (74%), and K splits there cost a partial per split
        and a second kernel (session 33's tuner log: 52.9 us split 4 against 39.6 unsplit on l4
        3x3 (first)). One consumer, unsplit, one program per SM."""
        fill = n_tiles / (cdiv(n_tiles, sms) * sms)
        if not cls.stream_ok(prob) or cfg.persistent != 1 or fill >= 0.9 or k_steps < 8:
            return []
        if n_tiles * k_steps * sms >= 2**31:
            return []
        return [replace(cfg, stream_k=1)]

    #: consumer partitions of ``side_by_side``'s tiles, each a warpgroup with 64 output pixels
    CONSUMERS = 3

    @classmethod
    def side_by_side(cls, prob: ConvProblem3d, sms: int, bk: int, deep: bool) -> list[Config]:
        """A tile of 3 x 64 output pixels (``ws3d``'s consumers: three blocks side by side along
        the columns, one warpgroup each) by 128 output channels, where it fills the SMs better
        than the power-of-two tiles: the score is the tiles' pixel coverage times the last
        wave's fill. ResNet-50's 1x1 layers on 14x14 images (12,544 pixels as one row, 256 or
        512 output channels) make 98 or 196 tiles of 128 pixels on 132 SMs (0.74 of the SMs'
        time) and 132 or 264 of 192 (1.0), the tiles cuBLAS picks there (session 30's ncu)."""
        e = prob.dtype.itemsize
        kp = _small(prob.k)
        used = prob.od * prob.p * prob.q

        def score(td, th, tw, bn, parts=1):
            tiles = (cdiv(prob.od, td) * td, cdiv(prob.p, th) * th, cdiv(prob.q, tw * parts) * tw * parts)
            units = cdiv(prob.k, bn) * prob.n * tiles[0] * tiles[1] * tiles[2] // (td * th * tw * parts)
            return used / (tiles[0] * tiles[1] * tiles[2]) * units / (cdiv(units, sms) * sms)

        def stacked_score(td, th, tw, bn, parts):
            # consecutive blocks: a unit is `parts` blocks wherever they lie, the last unit's
            # blocks past the end are work for nothing
            blocks = prob.n * cdiv(prob.od, td) * cdiv(prob.p, th) * cdiv(prob.q, tw)
            units = cdiv(prob.k, bn) * cdiv(blocks, parts)
            covered = prob.n * used / (cdiv(blocks, parts) * parts * td * th * tw)
            return covered * units / (cdiv(units, sms) * sms)

        # the phase view's tiles are one output depth deep
        def tiles(block):
            return [t[1:] for t in spatial_tiles3(prob, block) if deep or t[1] == 1]

        if prob.k < 128:  # three warpgroups under one weight tile of 128 channels, as cuBLAS's
            return []
        pow2 = max(score(td, th, tw, bn) for td, th, tw in tiles(128) for bn in {min(256, kp), 128})
        bn = 128
        parts = cls.CONSUMERS
        # rows of 16 pixels or more; ties: longer rows first (spatial_tiles3's order, max keeps
        # the first of equals)
        best = max((t for t in tiles(64) if t[2] >= 16), key=lambda t: score(*t, bn, parts), default=None)
        # offered unless it covers clearly less: on session 33's probe it ran 5-22% faster than
        # every power-of-two tile where it filled about as well (CRAFT's 192-wide rows, the
        # 14x14 1x1 layers with 512 channels) and tied at 28x28
        stack = 0
        if best is None or score(*best, bn, parts) < 0.95 * pow2:
            best = None
            if cls.STACKED_CANDIDATES and prob.t == 1 and prob.pad[0] == 0:
                # rows too short for blocks side by side: consecutive blocks (ws3d's STACK),
                # where they fill the SMs at least as well as the power-of-two tiles
                st = max(tiles(64), key=lambda t: stacked_score(*t, bn, parts), default=None)
                if st is not None and stacked_score(*st, bn, parts) >= cls.STACKED_FILL * pow2:
                    best, stack = st, 1
        if best is None:
            return []
        td, th, tw = best
        stages = 4
        while stages > 2 and stages * (parts * 64 + bn) * bk * e + parts * 64 * bn * e > 225_000:
            stages -= 1
        cfg = Config(64, bn, bk, 4, stages, tile_n=td, tile_h=th, tile_w=tw, persistent=1, parts=parts, stack=stack)
        return [cls.direct_form(cfg, e, prob.t * prob.r * prob.s * (prob.c // bk))]

    #: whether ``side_by_side`` offers the stacked form (``Config.stack``: consecutive pixel blocks,
    #: ws3d's STACK) where output rows are too short for blocks side by side and it fills the SMs
    #: at least as well as the power-of-two tiles (ResNet-50's 14x14 3x3 layers: 66 x 2 tiles of
    #: 192 x 128 on 132 SMs where 128 x 256 makes 98). H100, session 51 (``gpu_session.sh s51b``,
    #: one run, cuDNN / tuned 128 x 256 / stacked): l3 3x3 @14 37.0 / 39.0 / 36.4 us, l3 3x3
    #: (first) 38.9 / 41.5 / 39.6; the tuner times it beside the others
    STACKED_CANDIDATES = True

    #: the stacked form is offered where its fill is at least this fraction of the power-of-two
    #: tiles' best: 1.0 left out layers where the two tie but for the last unit's past-the-end
    #: blocks (ResNet-50's 28x28 layers: 262 units of 192 pixels, 0.98989, against 392 of 128,
    #: 0.98990). H100, session 52's all suite, the tuner's own timings: the stacked tile ran
    #: 1.06x faster than the best other candidate on the seed's 64x112x112 layer, where both fill
    #: 0.955 (54.0 against 57.3 us), and 1.22-1.25x on ResNet-50's l3 3x3 layers (fill 0.99
    #: against 0.74)
    STACKED_FILL = 0.97

    def default_config(self, prob: ConvProblem3d) -> Config:
        cands = self.candidates(prob, max(sm_count(), 2))
        if cands:
            return cands[0]
        tiles = [t for t in spatial_tiles3(prob, 128) if t[1] == 1 or self._deep(prob)]
        _, td, th, tw = tiles[0]
        bk = next(b for b in (64, 32, 16) if prob.c % b == 0 and b * prob.dtype.itemsize <= 128)
        return Config(128, min(128, _small(prob.k)), bk, 8, 3, tile_n=td, tile_h=th, tile_w=tw, persistent=1)

    def run(self, prob, x, w, bias, y, cfg, launch=None) -> None:
        from .ws3d import ws_run

        yo = _ndhwc_out(y)
        ws_run(x, _packed_weight(w, prob.c), bias, yo, (prob.t, prob.r, prob.s), prob.pad, prob.dilation, cfg,
               prob.stride, launch=launch)  # fmt: skip
        if yo is not y and not COMPILE_ONLY.get():
            y.copy_(yo)


class WidthUnfold3d(Algorithm):
    """RGB stems (S*C up to 64, groups = 1): each output column's S taps gathered into one wide
    pixel (``conv.unfold``), then a T x R x 1 convolution over that on ``conv3d_tma`` (a strided
    stem through its stride-phase view); ``configs`` are the TMA kernel's for that problem."""

    name = "conv3d_width_unfold"

    def reduced(self, prob: ConvProblem3d) -> ConvProblem3d:
        """The T x R x 1 problem over the unfolded input: ``Cu`` channels, width Q, rows rounded
        up to the H stride (zeros; the end padding shrinks by as much, so P is unchanged)."""
        sd, sh, _ = prob.stride
        hu = cdiv(prob.h, sh) * sh
        pd, ph, _ = prob.pad
        ped, peh, _ = prob.pad_end
        return replace(
            prob, c=unfolded_channels(prob.c, prob.s), h=hu, w=prob.q, s=1, stride=(sd, sh, 1), pad=(pd, ph, 0),
            pad_end=(ped, peh - (hu - prob.h), 0), dilation=(*prob.dilation[:2], 1), tma_input_ok=True,
            input_phases_ok=True,
        )  # fmt: skip

    def supports(self, prob: ConvProblem3d) -> str | None:
        if prob.groups != 1:
            return f"groups = {prob.groups}: the width unfold takes dense layers (groups = 1)"
        if prob.s == 1:
            return "a filter one column wide has nothing to unfold"
        if prob.s * prob.c > MAX_UNFOLDED:
            return f"S*C = {prob.s * prob.c} is over {MAX_UNFOLDED}: the per-tap kernels read so wide an input directly"
        if not prob.tma_ok:
            return "the device has no TMA (needs compute capability >= 9.0)"
        return TMA3D.supports(self.reduced(prob))

    def heuristic_ok(self, prob: ConvProblem3d) -> bool:
        return unfold_pays(prob.c, prob.k)

    def configs(self, prob: ConvProblem3d) -> list[Config]:
        return TMA3D.configs(self.reduced(prob))

    def default_config(self, prob: ConvProblem3d) -> Config:
        return TMA3D.default_config(self.reduced(prob))

    def run(self, prob, x, w, bias, y, cfg, launch=None) -> None:
        rp = self.reduced(prob)
        u = unfold_w(x, prob.s, prob.stride[2], prob.pad[2], prob.dilation[2], prob.q, rp.h)
        TMA3D.run(rp, u, _unfolded_weight(w), bias, y, cfg, launch)


def _unfolded_weight(w: torch.Tensor) -> torch.Tensor:
    """``unfold.unfold_weight(w)``, kept per weight tensor and version (as ``_packed_weight``)."""
    from ..functional import _derived_weight

    return _derived_weight(w, ("unfold",), unfold_weight)


def _ndhwc_out(y: torch.Tensor) -> torch.Tensor:
    """A buffer for the TMA store: y itself if it is dense channels_last_3d or any view a 5-D
    descriptor can address (channel stride 1, 16-byte aligned: one stride phase of a larger
    NDHWC tensor, as strided dgrad writes); else a dense channels_last_3d temporary that the
    caller copies back."""
    if y.is_contiguous(memory_format=torch.channels_last_3d) or tma_input_ok(y):
        return y
    return torch.empty_like(y, memory_format=torch.channels_last_3d)


def tma_config(prob: ConvProblem3d) -> Config:
    """The TMA kernel's heuristic config (``CONVGEMM_AUTOTUNE=0``)."""
    return TMA3D.default_config(prob)


def _packed_weight(w: torch.Tensor, cp: int) -> torch.Tensor:
    """``_ktrsc(w, cp)``, kept per weight tensor and version (a copy is made once, not per call)."""
    from ..functional import _derived_weight

    return _derived_weight(w, ("ktrsc", cp), lambda v: _ktrsc(v, cp))


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
    TMA3D.run(prob, x, w, bias, y, cfg or TMA3D.default_config(prob))


# ---------------------------------------------------------------- 3-D problems that are 2-D ones
def as_2d(prob: ConvProblem3d) -> str | None:
    """How ``prob`` is a 2-D convolution over views of its tensors, or None.

    ``"depth"``: a filter one tap deep with no depth padding; the output's depth slices are
    images of their own (the 2-D batch is N x OD, every ``stride[0]``-th input slice).
    ``"plane"``: a filter one pixel high and wide, stride 1 and no padding in H and W; each depth
    slice's H x W plane is one image row of H*W pixels (images D x H*W, filter T x 1): R(2+1)D's
    temporal convolutions.
    """
    if prob.t == 1 and prob.pad[0] == 0 and prob.pad_end[0] == 0:
        return "depth"
    if (prob.r, prob.s) == (1, 1) and prob.stride[1:] == (1, 1) and prob.pad[1:] == (0, 0) \
            and prob.pad_end[1:] == (0, 0):  # fmt: skip
        return "plane"
    return None


def args_2d(prob: ConvProblem3d, mode: str) -> tuple:
    """(stride, padding, dilation) of the 2-D problem of ``as_2d(prob) == mode``."""
    from ..functional import Pads4

    if mode == "depth":
        return (prob.stride[1], prob.stride[2]), Pads4((prob.pad[1], prob.pad_end[1], prob.pad[2], prob.pad_end[2])), \
            prob.dilation[1:]  # fmt: skip
    return (prob.stride[0], 1), Pads4((prob.pad[0], prob.pad_end[0], 0, 0)), (prob.dilation[0], 1)


def view_4d(t: torch.Tensor, mode: str, stride_d: int = 1) -> torch.Tensor:
    """The 5-D ``[N, C, D, H, W]`` tensor ``t`` as the 4-D tensor of its 2-D problem: ``[N*D', C,
    H, W]`` of every ``stride_d``-th depth slice (``"depth"``), or ``[N, C, D, H*W]``
    (``"plane"``). A view when the strides allow one, else a channels_last_3d copy's view."""
    if mode == "depth" and stride_d > 1:
        t = t[:, :, ::stride_d]
    v = exact_view_4d(t, mode)
    return v if v is not None else exact_view_4d(t.contiguous(memory_format=torch.channels_last_3d), mode)


def exact_view_4d(t: torch.Tensor, mode: str) -> torch.Tensor | None:
    """``view_4d`` of ``t`` (no depth stride) as a view of its memory, or None when its strides
    do not merge (N with D, or H with W): a tensor written through it must be written here."""
    n, c, d, h, w = t.shape
    sn, sc, sd, sh, sw = t.stride()
    # a size-1 axis merges with any stride (PyTorch gives it any): the other axis's stride steps
    if mode == "depth":
        if n == 1 or d == 1 or sn == d * sd:
            return t.as_strided((n * d, c, h, w), (sd if d > 1 else sn, sc, sh, sw), t.storage_offset())
    elif h == 1 or w == 1 or sh == w * sw:
        return t.as_strided((n, c, d, h * w), (sn, sc, sd, sw if w > 1 else sh), t.storage_offset())
    return None


def view_5d(t: torch.Tensor, mode: str, shape: tuple[int, int, int, int, int]) -> torch.Tensor:
    """The 4-D result ``t`` of a 2-D problem as the 5-D tensor ``shape`` (``view_4d`` undone, for
    ``t`` whose merged axis is evenly strided: dense in N and D, or in H and W)."""
    n, c, d, h, w = shape
    s0, s1, s2, s3 = t.stride()
    if mode == "depth":
        return t.as_strided(shape, (d * s0, s1, s0, s2, s3), t.storage_offset())
    return t.as_strided(shape, (s0, s1, s2, w * s3, s3), t.storage_offset())


class As2d(Algorithm):
    """A 3-D problem that is a 2-D one (``as_2d``) run by ``conv2d``'s machinery over views: its
    tuner and its algorithms (the persistent and split-K TMA kernels, ``narrow_tma``, the
    depthwise kernels, ...), chosen and cached under the 2-D problem's key. One config: the 2-D
    tuner chooses the kernel on the first call."""

    name = "conv3d_as_2d"

    def supports(self, prob: ConvProblem3d) -> str | None:
        if as_2d(prob) is None:
            return ("needs a filter one tap deep without depth padding, or one pixel high and wide with stride 1 "
                    "and no padding in height and width")  # fmt: skip
        return None

    def configs(self, prob: ConvProblem3d) -> list[Config]:
        return [self.default_config(prob)]

    def default_config(self, prob: ConvProblem3d) -> Config:
        return Config(0, 0, 0)

    def describe_2d(self, prob: ConvProblem3d, x: torch.Tensor, w: torch.Tensor, bias) -> tuple[str, Config]:
        """(the 2-D algorithm's name, its config) that ``run`` launches (tuning if need be)."""
        from ..functional import _prepare
        from ..tune import choose

        mode = as_2d(prob)
        st, pads, dil = args_2d(prob, mode)
        w4 = _weight_4d(w, mode)
        p2, x4, y4 = _prepare(view_4d(x, mode, prob.stride[0]), w4, bias, st, pads, dil, prob.groups, nchw=False)
        algo, cfg = choose(p2, x4, w4, bias, y4)
        return algo.name, cfg

    def run(self, prob, x, w, bias, y, cfg, launch=None) -> None:
        from ..functional import conv2d_forward

        if COMPILE_ONLY.get():  # the 2-D tuner compiles its own candidates on the first real call
            return
        mode = as_2d(prob)
        st, pads, dil = args_2d(prob, mode)
        yo = _ndhwc_out(y)
        y4 = exact_view_4d(yo, mode)
        if y4 is None:  # a strided view whose axes do not merge: a dense buffer, copied back
            yo = torch.empty_like(y, memory_format=torch.channels_last_3d)
            y4 = exact_view_4d(yo, mode)
        conv2d_forward(view_4d(x, mode, prob.stride[0]), _weight_4d(w, mode), bias, st, pads, dil, prob.groups,
                       out=y4)  # fmt: skip
        if yo is not y:
            y.copy_(yo)


def _weight_4d(w: torch.Tensor, mode: str) -> torch.Tensor:
    """``[K, C/g, 1, R, S]`` as ``[K, C/g, R, S]`` (``"depth"``), ``[K, C/g, T, 1, 1]`` as
    ``[K, C/g, T, 1]`` (``"plane"``): views."""
    return w.squeeze(2) if mode == "depth" else w.squeeze(4)


GATHER, SMALL_K, TMA3D, UNFOLD3D, AS2D = Gather3d(), SmallK3d(), Tma3d(), WidthUnfold3d(), As2d()
#: the 3-D forward algorithms, in the heuristic's order of preference (a 2-D problem first: the
#: 2-D heuristic knows more kernels)
WS3D = Ws3d()
ALGORITHMS3D: dict[str, Algorithm] = {a.name: a for a in (AS2D, TMA3D, WS3D, UNFOLD3D, SMALL_K, GATHER)}

_memo: dict[tuple, tuple[Algorithm, Config]] = {}


def clear_memo() -> None:
    """Forget this process's 3-D tuning results (the disk cache stays)."""
    _memo.clear()


def choose(prob: ConvProblem3d, x, w, bias, y) -> tuple[Algorithm, Config]:
    """The algorithm and config for ``prob`` (``prob.tma_input_ok`` set for ``x``): this process's
    memo, then the tuning cache on disk, then every supported algorithm's configs timed on the
    call's tensors (``tune.autotune._tune``); the heuristic without tuning (``CONVGEMM_AUTOTUNE=0``,
    the interpreter)."""
    from ..tune import autotune as at

    key = prob.key()
    hit = _memo.get(key)
    if hit is not None:
        return hit
    candidates = [a for a in ALGORITHMS3D.values() if a.supports(prob) is None]
    if AS2D in candidates:
        # a 2-D problem: conv2d's tuner chooses among its kernels. Timed against the 3-D ones on
        # the H200 (session 18: R(2+1)D's four layers and eight dgrad phases), the 3-D kernels
        # never won by more than 2%, and their candidates doubled the first call's tuning time
        candidates = [AS2D]
    choice = None
    if at.autotune_enabled():
        dkey = at.cache_key(prob, x.device)
        entry = at.disk_cache().get(dkey)
        algo = ALGORITHMS3D.get(entry["algorithm"]) if entry else None
        if algo is not None and algo.supports(prob) is None:
            try:
                choice = (algo, Config(**entry["config"]))
            except TypeError:  # a config field this version does not know
                choice = None
        if choice is None:
            algo, cfg, us = at._tune(prob, candidates, x, w, bias, y)
            choice = (algo, cfg)
            if us is not None:
                at.disk_cache().put(dkey, algo.name, cfg, us)
    else:
        pick = next(a for a in candidates if a.heuristic_ok(prob))
        choice = (pick, pick.default_config(prob))
    _memo[key] = choice
    return choice
