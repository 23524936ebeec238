"""Forward convolution algorithms, each a `gemm_kernel` with its own loaders and store.

An algorithm states what it supports (``supports(problem) -> None | reason``), which configs are
worth trying (``configs(problem)``), a heuristic default, and how to launch (``run``). All of
them launch the one generic kernel ``convgemm.matmul.blocks.gemm_kernel``:

==================  ==========================  =============================  =======================
algorithm           A loader                    B loader                       store
==================  ==========================  =============================  =======================
implicit_gemm       gather_im2col (pointers)    gather_weight (pointers)       gather_output (any layout)
small_k             gather_im2col flat          gather_weight flat             gather_output (any layout)
grouped             gather_im2col (GT groups)   blockdiag_weight               blockdiag_output + fix-up
implicit_gemm_tma   matmul desc2d (weight)      tma_im2col (5-D NHWC box)      tma_output (5-D box)
gemm_1x1            matmul desc2d (weight)      matmul desc (input rows)       matmul desc_store_t
narrow_tma          tma_im2col_a (NHWC box)     matmul desc (weight)           tile_ptr (any layout)
..._tma_nchw        matmul desc2d (weight)      tma_nchw (4-D NCHW box)        tma_nchw (4-D box)
==================  ==========================  =============================  =======================

The TMA algorithms compute the transposed product ``y^T = w . im2col(x)^T`` (M = output channels,
N = output pixels) so that both wgmma operands are read from shared memory; ``narrow_tma`` (few
output channels) computes the natural one, pixels on M.
"""

from __future__ import annotations

import contextvars
import os
from dataclasses import dataclass, replace

import torch

from .._runtime import cdiv, empty, interpreting, sm_count
from ..matmul import loaders as mm
from ..matmul.blocks import gemm_kernel, parts_gemm_kernel, persistent_gemm_kernel, stream_k_gemm_kernel
from ..matmul.launch import Launch, aux_of, descriptor
from ..problem import ConvProblem
from . import loaders as cl
from .grouped_tma import blockdiag_weight, grouped_tma_fixup_kernel, tma_output_store_listed
from .layout import channel_pad, krsc_in_place, krsc_weight, tma_aligned
from .unfold import MAX_UNFOLDED, unfold_pays, unfold_w, unfold_weight, unfolded_channels
from .ws_replay import counters, fast_ready, ws_conv3d_replay


@dataclass(frozen=True)
class Config:
    """Launch parameters of one kernel instance.

    ``block_m/n/k`` are the GEMM tile (in the algorithm's own view: for the TMA algorithms M is
    output channels and N output pixels; for ``depthwise`` output columns x output channels); ``tile_n x tile_h x tile_w = block_n`` is the block of
    output pixels (images x rows x columns) of the spatial TMA kernel (0 elsewhere).
    """

    block_m: int
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 3
    group_m: int = 8
    tile_n: int = 0
    tile_h: int = 0
    tile_w: int = 0
    split_k: int = 1
    persistent: int = 0  # > 0: persistent_gemm_kernel with this many programs per SM
    # > 0: stream_k_gemm_kernel with this many programs per SM (stream_k_programs); implicit_gemm_ws /
    # conv3d_ws (persistent programs): 1 splits every tile's K steps over the programs, 2 runs the whole
    # waves' tiles unsplit and splits only the rest (the data-parallel + stream-K hybrid)
    stream_k: int = 0
    taps: int = 0  # > 1: wgrad_tma with this many filter columns per program (conv/wgrad_taps.py)
    cols: int = 0  # > 1: depthwise_rows with this many neighbouring output columns per thread
    vec: int = 0  # > 0: depthwise_rows loads this many channels per thread (0: 16-byte vectors)
    gt: int = 0  # > 0: grouped_tma / grouped_ws take this many groups as one
    # 1: split-K partials are summed by a second kernel (matmul.blocks.split_k_finish_kernel,
    # many programs per tile) instead of by each tile's last split alone
    reduce: int = 0
    # > 1: implicit_gemm_tma on matmul.blocks.parts_gemm_kernel, each program's tile this many
    # pixel tiles of block_n under one block of output channels (e.g. 3 x 64 = 192 pixels);
    # implicit_gemm_ws / conv3d_ws (2 or 3): this many consumer partitions, each with its own
    # block of block_m pixels side by side along the columns (ws3d's CONS)
    parts: int = 0
    # 1 (with parts): implicit_gemm_ws / conv3d_ws's consumer blocks are consecutive pixel blocks
    # instead of neighbours along the columns (ws3d's STACK), for rows too short for side by side
    stack: int = 0
    # 1: implicit_gemm_ws / conv3d_ws store tiles from registers, without a shared-memory staging
    # tile (ws3d's EPI), which leaves room for more ring stages
    direct: int = 0
    # > 0: narrow_fold's R x 1 step on conv/row_ring.py (a tuner candidate unless CONVGEMM_ROW_RING=0):
    # this many output rows per chunk, strips of block_m columns, num_stages ring slots
    ring: int = 0
    # 1 (with ring): the column fold in the ring kernel's epilogue, y written directly
    fused: int = 0
    # > 0: depthwise wgrad's window kernel (conv/depthwise_wgrad_window.py) with this many images
    # a program; block_m x block_n = column groups x channels, cols columns a thread
    window: int = 0

    def describe(self) -> str:
        s = f"{self.block_m}x{self.block_n}x{self.block_k} w{self.num_warps} s{self.num_stages}"
        if self.tile_h:
            s += f" t{self.tile_n}x{self.tile_h}x{self.tile_w}"
        if self.split_k > 1:
            s += f" k{self.split_k}"
        if self.persistent:
            s += f" p{self.persistent}"
        if self.stream_k:
            s += f" sk{self.stream_k}"
        if self.taps:
            s += f" taps{self.taps}"
        if self.cols:
            s += f" c{self.cols}"
        if self.vec:
            s += f" v{self.vec}"
        if self.gt:
            s += f" gt{self.gt}"
        if self.reduce and self.split_k > 1:
            s += " red"
        if self.parts > 1:
            s += f" x{self.parts}" + ("st" if self.stack else "")
        if self.direct:
            s += " ds"
        if self.ring:
            s += f" ring{self.ring}" + (" fused" if self.fused else "")
        if self.window:
            s += f" win{self.window}"
        return s


def split_k_buffers(device: torch.device, tiles: int, split_k: int, tile_elems: int, dtype=torch.float32):
    """(workspace, counters) for a split-K launch of ``tiles`` output tiles.

    The workspace (partials in the accumulator's ``dtype``) is allocated per call: it is fully written before it is read.
    The counters must be zero when a launch starts, and every launch leaves them at zero, so one
    buffer per device and stream serves every split-K launch on that stream (launches on one
    stream never overlap).
    """
    return torch.empty(tiles * split_k * tile_elems, dtype=dtype, device=device), counters(device, tiles)


def stream_k_programs(cfg: Config, tiles: int, k_tiles: int) -> int:
    """The program count of a stream-K launch: ``cfg.stream_k`` per SM, at most one per K
    iteration (so that every program has work: ``stream_k_reduce`` counts on it)."""
    return max(1, min(cfg.stream_k * sm_count(), tiles * k_tiles))


def stream_k_split(cfg: Config, tiles: int, k_tiles: int) -> tuple[int, int, int]:
    """``split_k_buffers``' arguments for a stream-K launch: a counter per output tile and two
    partial tiles per program (the workspace holds ``tiles * split * tile_elems`` entries)."""
    programs = stream_k_programs(cfg, tiles, k_tiles)
    return tiles, cdiv(2 * programs, tiles), cfg.block_m * cfg.block_n


def stream_k_fits(tiles: int, k_tiles: int, sms: int) -> bool:
    """Whether a stream-K launch's iteration arithmetic (``iteration * programs``) stays in int32."""
    return tiles * k_tiles * 2 * sms < 2**31


def _precision(prob: ConvProblem) -> str:
    return "tf32" if prob.dtype != torch.float32 else prob.precision


#: set by the tuner: ``run`` compiles its kernel (``JITFunction.warmup``) and launches nothing,
#: so that many candidates can be compiled at once under Triton's ``AsyncCompileMode``
COMPILE_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("convgemm_compile_only", default=False)


def _run_kernel(launch, fn, grid, args: tuple, constexprs, options: dict) -> None:
    """The one place every convolution kernel is launched from.

    ``constexprs`` is a callable returning the constexpr dict: a warm ``launch`` handle needs
    only the runtime arguments, so the dict is not even built then.
    """
    if launch is not None and launch.warm:
        launch.relaunch(grid, args)
        return
    if COMPILE_ONLY.get():
        fn.warmup(*args, grid=grid, **constexprs(), **options)
        return
    (launch or Launch())(fn, grid, args, constexprs(), options)


def pdl_enabled() -> bool:
    """Whether a second launch that reads the first's results (``grouped_tma``'s non-finite
    fix-up) is a programmatic dependent launch (Hopper; ``CONVGEMM_PDL=0`` turns it off); never
    under the interpreter. H100, session 44 (two rounds of alternating processes, one tuning
    cache): ResNeXt's four ``grouped_tma`` layers 2.2-4.2% faster (512 @14 33.0 -> 31.6 us,
    256 @28 57.4 -> 55.4)."""
    return os.environ.get("CONVGEMM_PDL", "1") != "0" and not interpreting()


def _launch(launch, grid, a, b, c, bias, y, bias_len, num_m, num_n, k_tiles, cfg, fns, bias_along_m, prob, ws=None,
            act: str = "", pdl: bool = False):  # fmt: skip
    """Launch ``gemm_kernel``; ``a, b, c`` are (TMA descriptor or None, tuple of pointers and ints);
    ``ws`` the (workspace, counters) pair of a split-K config; ``act`` the fused activation;
    ``pdl``: a programmatic dependent launch follows (``gemm_kernel``'s ``PDL_TRIGGER``)."""
    ws, locks = ws if ws is not None else (y, y)
    if cfg.parts > 1:
        # N counts tiles of cfg.parts B tiles (the last may reach past the end: TMA zero-fills
        # those loads and clips their stores)
        assert len(fns) <= 5 and grid[1] == 1 and cfg.split_k == 1, "parts: groups == 1, no split-K"
        if fns[2] not in (cl.tma_im2col_init, cl.tma_im2col_phase_init):
            raise ValueError(f"config {cfg.describe()}: pixel-tile parts need the TMA im2col loader (implicit_gemm_tma), "
                             "whose loads past the last tile read zeros; use a config without parts")  # fmt: skip
        num_n = cdiv(num_n, cfg.parts)
    args = (*a, *b, *c, bias if bias is not None else y, bias_len, num_m, num_n, k_tiles, ws, locks)
    batches = grid[1] if cfg.persistent and cfg.parts <= 1 else 1

    def constexprs():
        return dict(
            BLOCK_M=cfg.block_m,
            BLOCK_N=cfg.block_n,
            BLOCK_K=cfg.block_k,
            GROUP_M=cfg.group_m,
            A_INIT=fns[0],
            A_LOAD=fns[1],
            B_INIT=fns[2],
            B_LOAD=fns[3],
            C_STORE=fns[4],
            HAS_BIAS=bias is not None,
            BIAS_ALONG_M=bias_along_m,
            PRECISION=_precision(prob),
            UPCAST=interpreting() and prob.dtype == torch.bfloat16,
            F64=prob.dtype == torch.float64,
            # a switch (the count is the grid's third axis): 2 the last split sums, 3 partials only
            SPLIT_K=(3 if cfg.reduce else 2) if cfg.split_k > 1 else 1,
            ACT=act,
            K_RANGE=fns[5] if len(fns) > 5 else None,
            **({"N_PARTS": cfg.parts} if cfg.parts > 1 else {}),
            **({"PDL_TRIGGER": True} if pdl else {}),
            **({"BATCHES": batches} if batches > 1 else {}),
        )

    fn = gemm_kernel
    if pdl and (cfg.parts > 1 or cfg.stream_k):
        raise ValueError(f"config {cfg.describe()}: the dependent-launch trigger is in gemm_kernel and "
                         "persistent_gemm_kernel only; set CONVGEMM_PDL=0 or use such a config")  # fmt: skip
    if cfg.parts > 1:
        fn, grid = parts_gemm_kernel, (min(num_m * num_n, max(1, cfg.persistent) * sm_count()), 1, 1)
    elif cfg.persistent:
        assert len(fns) <= 5, "persistent: one K tile count for every tile"
        # no split: a fixed number of programs walks every tile of every batch entry (group)
        assert cfg.split_k == 1, "persistent: no split-K"
        fn, grid = persistent_gemm_kernel, (min(num_m * num_n * batches, cfg.persistent * sm_count()), 1, 1)
    elif cfg.stream_k:
        assert len(fns) <= 5 and prob.dtype != torch.float64, "stream-K: one K tile count, no float64"
        assert grid[1] == 1 and cfg.split_k == 1, "stream-K: groups == 1, no split-K"
        assert ws is not None, "stream-K: needs the workspace of stream_k_split"
        fn, grid = stream_k_gemm_kernel, (stream_k_programs(cfg, num_m * num_n, k_tiles), 1, 1)
    _run_kernel(launch, fn, grid, args, constexprs, {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages})


def _nhwc_out(y: torch.Tensor, cg: int = 0) -> torch.Tensor:
    """A buffer for algorithms that store through TMA: y itself if it is dense channels_last or,
    given ``cg`` (channels per group; for descriptors built from y's own N, H, W strides), any
    view that a TMA descriptor can address (``tma_aligned``: one stride phase of a larger NHWC
    tensor, as strided dgrad writes); else a dense channels_last temporary that the caller copies
    back."""
    if y.is_contiguous(memory_format=torch.channels_last) or (cg and tma_aligned(y, cg)):
        return y
    return empty(y.shape, y.dtype, y.device, torch.channels_last)


def _fast_tma(launch, x, w, bias, y, fix=None, fixup=None) -> None:
    """A repeat call of a TMA algorithm: bases (weight, input, output, bias) of its descriptors.

    ``launch.extra`` holds what the first call found: the padded channel count, whether the
    weight was read in place (a channels_last weight with no channel padding) or packed, and the
    split-K buffer sizes (None without split-K). ``fix`` and ``fixup``: see ``ImplicitGemmTma.run``.
    """
    cp, in_place, split, out_cg = launch.extra
    wp = w if in_place else krsc_weight(w, cp)
    yo = _nhwc_out(y, out_cg)
    ws, locks = split_k_buffers(x.device, *split) if split else (yo, yo)
    if fix is None:
        launch.fast((wp, x, yo, yo if bias is None else bias, ws, locks))
    else:
        launch.fast((wp, x, yo, fix, yo if bias is None else bias, ws, locks))
        fixup(yo)
    if yo is not y:
        y.copy_(yo)


class Algorithm:
    """Base class: one way of computing a forward convolution."""

    name = "?"
    #: whether ``run`` applies ``prob.activation`` in its epilogue; when not, ``conv2d`` applies it
    #: to the output afterwards
    fuses_activation = False
    #: whether ``run`` writes an NCHW ``y`` as fast as a channels_last one (pointer stores with any
    #: strides): then an NCHW result is written in place, not written NHWC and transposed after
    writes_nchw = False
    #: whether ``run`` takes the caller's NCHW input as it is (``ConvProblem.input_nchw``); the
    #: others take it with channel stride 1 (``layout.as_nhwc``)
    reads_nchw = False

    def supports(self, prob: ConvProblem) -> str | None:
        """None if this algorithm can compute ``prob``, else the reason it cannot."""
        raise NotImplementedError

    def configs(self, prob: ConvProblem) -> list[Config]:
        """Candidate configs for the tuner, already pruned for the shape."""
        raise NotImplementedError

    def default_config(self, prob: ConvProblem) -> Config:
        """The heuristic choice when no tuning is done."""
        raise NotImplementedError

    def accepts(self, cfg: Config) -> bool:
        """False for a config this version's kernel cannot run (a tuning-cache entry written by
        an older version whose fields meant something else)."""
        return True

    def heuristic_ok(self, prob: ConvProblem) -> bool:
        """Whether the untuned heuristic may pick this algorithm for ``prob`` (it supports it)."""
        return True

    def keeps_nchw(self, prob: ConvProblem) -> bool:
        """For an algorithm that reads NCHW (``reads_nchw``) and supports ``prob``: whether
        ``algorithm='auto'`` should keep the NCHW input as it is for it. Once kept, only such
        algorithms are tuned, so one that loses to the NHWC kernels through the transposes on some
        layers must decline those here."""
        return True

    def run(
        self, prob: ConvProblem, x: torch.Tensor, w: torch.Tensor, bias, y: torch.Tensor, cfg: Config, launch=None
    ) -> None:
        """Compute ``y = conv(x, w) + bias``. ``x`` has channel stride 1 (see ``layout.as_nhwc``).

        ``launch`` (a ``matmul.launch.Launch``) lets repeated calls with identically specialised
        arguments skip Triton's dispatch; None launches through Triton every time.
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<convgemm algorithm {self.name}>"


def _small(v: int, lo: int = 16) -> int:
    """Smallest power of two >= v, at least ``lo``."""
    p = lo
    while p < v:
        p *= 2
    return p


class ImplicitGemm(Algorithm):
    """The general implicit GEMM: pointer gathers, any stride/padding/dilation/groups/layout/dtype."""

    name = "implicit_gemm"
    fuses_activation = True
    # gather_output_store takes y's strides. Session 4 wrote NCHW this way: wav2vec2's conv0
    # (1 -> 512 channels, an NCHW result of 131 MB) took 78 us on small_k; written NHWC and
    # transposed (sessions 7-8) it took 180 us.
    writes_nchw = True

    def supports(self, prob: ConvProblem) -> str | None:
        return None

    def _bk_options(self, prob: ConvProblem) -> list[int]:
        top = _small(prob.cg)
        return [bk for bk in (16, 32, 64) if bk <= max(16, top)]

    def configs(self, prob: ConvProblem) -> list[Config]:
        if interpreting():
            return [self.default_config(prob)]
        out = []
        bn_max = _small(prob.kg, 32)
        for bm, bn, warps in ((128, 128, 8), (128, 64, 4), (64, 128, 4), (64, 64, 4), (128, 32, 4)):
            if bn > max(32, bn_max):
                continue
            for bk in self._bk_options(prob)[-2:]:
                for stages in (3, 4):
                    if (bm + bn) * bk * prob.dtype.itemsize * stages > 160 * 1024:
                        continue
                    out.append(Config(bm, bn, bk, warps, stages))
        return out

    def default_config(self, prob: ConvProblem) -> Config:
        bk = self._bk_options(prob)[-1]
        if interpreting():
            return Config(32, min(32, _small(prob.kg)), min(bk, 32), 4, 1)
        if prob.dtype == torch.float64:
            return Config(64, 32, 16, 4, 2)
        bn = min(128, _small(prob.kg, 32))
        return Config(128, bn, bk if prob.dtype.itemsize == 2 else min(bk, 32), 8 if bn >= 128 else 4, 3)

    #: (A load, B init, B load): the per-tap reduction order, the weight read in place
    LOADS = (cl.gather_im2col_load, cl.gather_weight_init, cl.gather_weight_load)

    def groups_per_gemm(self, prob: ConvProblem) -> int:
        """How many consecutive groups one GEMM covers (the ``grouped`` algorithm takes several)."""
        return 1

    def weight_args(self, prob: ConvProblem, w: torch.Tensor, gt: int) -> tuple:
        return (w, prob.kg, prob.cg, w.stride(0), w.stride(1), w.stride(2), w.stride(3), prob.r, prob.s)

    def k_tiles(self, prob: ConvProblem, cfg: Config, gt: int) -> int:
        return prob.r * prob.s * cdiv(gt * prob.cg, cfg.block_k)

    def run(self, prob, x, w, bias, y, cfg, launch=None):
        if launch is not None and launch.fast_ready:  # a repeat call: only the tensors change
            launch.fast((x, w, y, y if bias is None else bias, y, y))
            return
        # GEMM view: gt groups at a time, so cs input and ks output channels per GEMM
        gt = self.groups_per_gemm(prob)
        cs, ks = gt * prob.cg, gt * prob.kg
        M = prob.n * prob.p * prob.q
        a = (None, (x, x.stride(0), x.stride(2), x.stride(3), x.stride(1), prob.h, prob.w, prob.p, prob.q, M,
             prob.stride[0], prob.stride[1], prob.pad_h[0], prob.pad_w[0], prob.dilation[0], prob.dilation[1],
             prob.r, prob.s, cs))  # fmt: skip
        b = (None, self.weight_args(prob, w, gt))
        c = (None, (y, y.stride(0), y.stride(1), y.stride(2), y.stride(3), prob.p, prob.q, M, ks))
        num_m, num_n = cdiv(M, cfg.block_m), cdiv(ks, cfg.block_n)
        fns = (cl.gather_im2col_init, *self.LOADS, cl.gather_output_store)
        _launch(launch, (num_m * num_n, prob.groups // gt), a, b, c, bias, y, ks, num_m, num_n,
                self.k_tiles(prob, cfg, gt), cfg, fns, False, prob, act=prob.activation)  # fmt: skip


def small_k_candidates(k: int, kg: int) -> list[Config]:
    """The flat small-reduction GEMM's tuning candidates for a reduction of ``k`` and ``kg`` output
    channels per group (2-D ``small_k`` and 3-D ``conv3d_small_k``). Each thread holds its share of
    a [BLOCK_M, BLOCK_K] pointer/mask tile: 128x32 on 4 warps or 256-row tiles spill registers
    (tools/sm90_check.py), so only these shapes."""
    bn = min(128, _small(kg, 16))
    return [Config(bm, bn, bk, warps, 3) for bm, warps in ((128, 8), (64, 4)) for bk in (16, 32)
            if bk <= max(16, _small(k))]  # fmt: skip


class SmallK(ImplicitGemm):
    """Small reductions (first layers, few channels per group): the reduction R*S*C/g is flattened
    into a handful of dense K tiles instead of one mostly-empty tile per filter tap; wide M tiles."""

    name = "small_k"
    LOADS = (cl.gather_im2col_flat_load, cl.gather_weight_init, cl.gather_weight_flat_load)
    MAX_K = 2048

    def supports(self, prob: ConvProblem) -> str | None:
        k = prob.r * prob.s * prob.cg
        if k > self.MAX_K:
            return f"the reduction R*S*C/groups = {k} is over {self.MAX_K}: use the per-tap kernels"
        if prob.cg >= 64:
            return f"C/groups = {prob.cg} fills per-tap K tiles already"
        return None

    def k_tiles(self, prob: ConvProblem, cfg: Config, gt: int) -> int:
        return cdiv(prob.r * prob.s * prob.cg, cfg.block_k)

    def heuristic_ok(self, prob: ConvProblem) -> bool:
        # from 16 channels per group on, per-tap tiles are dense and need less index arithmetic
        return prob.cg < 16

    def configs(self, prob: ConvProblem) -> list[Config]:
        if interpreting():
            return [self.default_config(prob)]
        return small_k_candidates(prob.r * prob.s * prob.cg, prob.kg)

    def default_config(self, prob: ConvProblem) -> Config:
        if interpreting():
            return Config(32, min(32, _small(prob.kg)), 16, 4, 1)
        if prob.dtype == torch.float64:
            return Config(64, 32, 16, 4, 2)
        return Config(128, min(128, _small(prob.kg, 16)), 32, 8, 3)


def _tma_common(prob: ConvProblem) -> str | None:
    if prob.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return f"TMA kernels take fp16, bf16 or fp32, not {prob.dtype}"
    if not prob.tma_ok:
        return "the device has no TMA (needs compute capability >= 9.0)"
    e = prob.dtype.itemsize
    if not prob.input_tma_ok:
        return "the NHWC input is not 16-byte aligned (base, strides, or C/groups * itemsize)"
    if (prob.kg * e) % 16 or (prob.k * e) % 16:
        return "K/groups * itemsize must be a multiple of 16 bytes for the TMA output store"
    return None


def _tma_bk(prob: ConvProblem) -> int:
    """The K tile: the largest that divides C/groups (so channels need no zero padding and a
    channels_last weight is used in place), else the smallest power of two covering C/groups."""
    cap = 64 if prob.dtype.itemsize == 2 else 32  # 128-byte rows: the widest swizzle
    for bk in (cap, cap // 2, cap // 4):
        if bk >= 16 and prob.cg % bk == 0:
            return bk
    return min(cap, _small(prob.cg))


def _padded_bk(prob: ConvProblem) -> int:
    """A second K tile for the TMA forward of a dense stride-phase-free layer whose C is an odd
    multiple of a small power of two (144 = 9 x 16, 288 = 9 x 32): 128-byte rows with C zero-
    padded to the tile, where that pads by at most a third (the 3-D kernel's ``_tma_bks`` rule;
    R(2+1)D's temporal 144 -> 64 layer ran 90 us with 64-channel tiles padded to 192 channels
    against 125 us with 16-channel ones on the H200). 0 when there is none."""
    cap = 64 if prob.dtype.itemsize == 2 else 32
    bk = _tma_bk(prob)
    if bk >= cap or prob.groups != 1 or strided_taps(prob) or cdiv(prob.cg, cap) * cap * 3 > prob.cg * 4:
        return 0
    return cap


def _pow2_upto(v: int) -> list[int]:
    out, p = [], 1
    while p <= v:
        out.append(p)
        p *= 2
    return out


def spatial_tiles(
    prob: ConvProblem, block_n: int, dims: tuple[int, int, int] | None = None
) -> list[tuple[float, int, int, int]]:
    """Every (images x rows x columns) = ``block_n`` pixel block, best first, with its coverage.

    Coverage is the fraction of the tiled output that is real output: 7x7 outputs in 8x8 tiles
    waste 23% of the tensor-core work, while 16x1x8 or 32x2x2 blocks cover 7x7 and 14x14 with
    little or no waste. Never empty: a block larger than the whole output is still a tile.
    ``dims``: another pixel grid (images, rows, columns) than the output's.
    """
    n, p, q = dims if dims is not None else (prob.n, prob.p, prob.q)
    out = []
    for tn in _pow2_upto(block_n):
        for th in _pow2_upto(block_n // tn):
            tw = block_n // (tn * th)
            if max(tn, th, tw) > 256:  # the copy engine's largest box side
                continue
            used = n * p * q
            tiled = cdiv(n, tn) * tn * cdiv(p, th) * th * cdiv(q, tw) * tw
            out.append((used / tiled, tn, th, tw))
    # best coverage first; among equals, longer contiguous rows of pixels (the copy engine moves
    # runs of neighbouring pixels faster than isolated ones), then fewer images per tile
    out.sort(key=lambda t: (-round(t[0], 6), -t[3], t[1]))
    return out


def strided_taps(prob: ConvProblem) -> bool:
    """Whether the TMA forward reads ``prob``'s taps through the stride-phase view (a strided
    R x S kernel; ``input_descriptor``)."""
    return prob.stride != (1, 1) and not prob.is_1x1


def strided_tma_enabled() -> bool:
    """Whether strided R x S kernels may run on the TMA forward and strided dgrad on ``DgradTma``
    (default; ``CONVGEMM_STRIDED_TMA=0`` turns both off). On since session 8, when the H200
    passed their tests and timed them faster than the gather kernels (benchmarks/NOTES.md)."""
    return os.environ.get("CONVGEMM_STRIDED_TMA", "1") != "0"


def input_descriptor(prob: ConvProblem, x: torch.Tensor, box: list[int]):
    """NHWC ``x`` as a TMA descriptor with block ``box`` (``[TILE_N, TILE_H, TILE_W, 1, BLOCK_K]``).

    Stride 1: ``[N, H, W, groups, C/groups]``. A strided 1x1 kernel reads every stride-th pixel:
    it is a stride-1 problem on that subsampled view, whose size is the output's (same base
    address, strides multiplied).

    A strided R x S kernel: the stride-phase view ``[N, H/sh, sh, W/sw, sw*C]``, a reshape of x
    (``ConvProblem.input_phases_ok``). Tap r's input row for output row p is ``p*sh + o`` with
    ``o = r*dil - pad = a*sh + phase``, i.e. view row ``p + a`` of phase ``phase``: every tap is one
    box, and rows before the image (a < 0) or past it are out of bounds, which the copy engine
    fills with zeros (the padding), as for stride 1. Along W the phase is folded into the last
    axis (a pixel's channels are followed by the next pixel's), so the box's channel coordinate
    is ``phase*C + group*C/g + channel``; the box (the same 5 axes) is ``[TILE_N, TILE_H, 1, TILE_W,
    BLOCK_K]``.
    """
    sh, sw = prob.stride
    if strided_taps(prob):
        return phase_descriptor(prob, x, box)
    return descriptor(
        x,
        [prob.n, prob.p if sh > 1 else prob.h, prob.q if sw > 1 else prob.w, prob.groups, prob.cg],
        [x.stride(0), x.stride(2) * sh, x.stride(3) * sw, prob.cg, 1],
        box,
    )


def phase_descriptor(prob: ConvProblem, x: torch.Tensor, box: list[int]):
    """NHWC ``x [N, C, H, W]`` (H, W multiples of the stride, dense channels_last rows) as its
    stride-phase view ``[N, H/sh, sh, W/sw, sw*C]`` with block ``[TILE_N, TILE_H, 1, TILE_W,
    BLOCK]`` (``box`` as ``input_descriptor`` takes it). Strided dgrad stores through it too."""
    sh, sw = prob.stride
    c = prob.c
    return descriptor(
        x,
        [prob.n, prob.h // sh, sh, prob.w // sw, sw * c],
        [x.stride(0), x.stride(2) * sh, x.stride(2), c * sw, 1],
        [box[0], box[1], 1, box[2], box[4]],
    )


def phase_tails(prob: ConvProblem) -> tuple[int, int]:
    """``(p0, q0)``: the first output row and column that the stride-phase view cannot compute,
    because a tap reaches an input row (column) past ``H - H % sh`` (``W - W % sw``), which the
    view ``[N, H/sh, sh, W/sw, sw*C]`` leaves out (its axes are whole phases; the copy engine
    would read those rows as zeros). ``(P, Q)`` when H and W are multiples of the stride."""

    def first(size: int, stride: int, pad: int, k: int, dil: int, out: int) -> int:
        if size % stride == 0:
            return out
        kept = size - size % stride
        # output o's last tap reads row o*stride - pad + (k - 1)*dil: the first to reach `kept`
        return min(out, max(0, -(-(kept + pad - (k - 1) * dil) // stride)))

    sh, sw = prob.stride
    return (first(prob.h, sh, prob.pad_h[0], prob.r, prob.dilation[0], prob.p),
            first(prob.w, sw, prob.pad_w[0], prob.s, prob.dilation[1], prob.q))  # fmt: skip


def has_phase_tails(prob: ConvProblem) -> bool:
    """Whether ``_phase_tail_fix`` has rows or columns to recompute (two remainders on the
    common path, where H and W are multiples of the stride: every replay of a strided layer asks)."""
    sh, sw = prob.stride
    return bool(prob.h % sh or prob.w % sw) and strided_taps(prob) and phase_tails(prob) != (prob.p, prob.q)


def _phase_tail_fix(prob: ConvProblem, x: torch.Tensor, w: torch.Tensor, bias, y: torch.Tensor) -> None:
    """Recompute the output rows and columns past ``phase_tails`` (a strided layer whose H or W
    is not a multiple of the stride: wav2vec2's odd-length conv1d) with the gather kernel, over
    the input rows (columns) they read, written into y's strips in place: a thin strip of a
    convolution that the stride-phase TMA view computed everywhere else."""
    from ..functional import Pads4, conv2d_forward

    if COMPILE_ONLY.get():
        return
    p0, q0 = phase_tails(prob)
    sh, sw = prob.stride
    (pt, pb), (pl, pr) = prob.pad_h, prob.pad_w
    args = (prob.stride, prob.dilation, prob.groups)
    if p0 < prob.p:
        r0 = p0 * sh - pt
        conv2d_forward(x[:, :, max(r0, 0):], w, bias, args[0], Pads4((max(0, -r0), pb, pl, pr)), *args[1:],
                       algorithm="implicit_gemm", activation=prob.activation, out=y[:, :, p0:])  # fmt: skip
    if q0 < prob.q:
        c0 = q0 * sw - pl
        conv2d_forward(x[:, :, :, max(c0, 0):], w, bias, args[0], Pads4((pt, pb, max(0, -c0), pr)), *args[1:],
                       algorithm="implicit_gemm", activation=prob.activation, out=y[:, :, :, q0:])  # fmt: skip


class ImplicitGemmTma(Algorithm):
    """Hopper implicit GEMM: TMA boxes of the NHWC input over blocks of output pixels (stride 1;
    a strided 1x1 kernel runs as stride 1 on the subsampled input view; a strided R x S kernel,
    through the stride-phase view of ``input_descriptor`` unless ``CONVGEMM_STRIDED_TMA=0``)."""

    name = "implicit_gemm_tma"
    fuses_activation = True

    def supports(self, prob: ConvProblem) -> str | None:
        reason = _tma_common(prob)
        if reason:
            return reason
        if strided_taps(prob):
            if not strided_tma_enabled():
                return (f"stride {prob.stride} with a {prob.r}x{prob.s} kernel: CONVGEMM_STRIDED_TMA=0 turned the "
                        "stride-phase TMA loader off; unset it, or use algorithm='auto'")  # fmt: skip
            if not prob.input_phases_ok:
                return (f"stride {prob.stride}: the stride-phase TMA view needs the input's pixels' channels packed "
                        "and its rows evenly strided (a dense NHWC tensor, not a slice of rows or columns)")  # fmt: skip
            if prob.cg % _tma_bk(prob):
                return (
                    f"stride {prob.stride}: C/groups = {prob.cg} must be a multiple of 16 for the stride-phase TMA view"
                )
            p0, q0 = phase_tails(prob)
            if (p0, q0) != (prob.p, prob.q) and (prob.groups != 1 or p0 == 0 or q0 == 0):
                return (f"stride {prob.stride} on a {prob.h}x{prob.w} input (not multiples of the stride): the "
                        "stride-phase view leaves the last rows or columns to a gather pass, which takes dense "
                        "layers with most of the output on the view; use implicit_gemm")  # fmt: skip
        return None

    def heuristic_ok(self, prob: ConvProblem) -> bool:
        # strided R x S kernels only when tuning has timed them against the gather kernel
        return not strided_taps(prob)

    def configs(self, prob: ConvProblem) -> list[Config]:
        if interpreting():
            return [self.default_config(prob)]
        out = self._configs(prob, _tma_bk(prob), True)
        wide = _padded_bk(prob)
        return out + (self._configs(prob, wide, False) if wide else [])

    def _configs(self, prob: ConvProblem, bk: int, main: bool) -> list[Config]:
        """``configs`` for K tiles of ``bk`` channels; not ``main`` (a channel-padding K tile):
        without split-K."""
        out = []
        sms = sm_count()
        k_tiles = prob.r * prob.s * cdiv(prob.cg, bk)
        # (block_m, block_n, warps, stages): 64-row tiles use one warpgroup, 128-row tiles two
        # (64, 256, 4, 2) leaves shared memory for two programs per SM: one's epilogue overlaps
        # the other's K loop
        shapes = [
            (64, 128, 4, 4),
            (64, 256, 4, 2),
            (64, 256, 4, 3),
            (64, 256, 4, 4),
            (64, 256, 8, 3),
            (128, 128, 8, 4),
            (128, 256, 8, 3),
        ]
        # Dense layers: only the forms that won somewhere. The H200's tuner log over ResNet-50
        # and CRAFT (40 layers with 64-channel K tiles, session 12) had every layer within 2.2%
        # of its best (0.1% in geometric mean) with persistent 64x256 (3 and 4 stages) and
        # 128x256, one-tile-per-program 64x256 at 2-3 stages, split-K 64x128 and gemm_1x1's
        # 64x128; the rest (64x256 on 8 warps, 128x128, the other plain tiles) never came
        # within 3% more than twice, and each is a compile on the first call (issue 4: 3 s).
        # Grouped problems (grouped_tma's super-groups) keep every plain tile.
        dense = prob.groups == 1
        plain = ((64, 256, 4, 2), (64, 256, 4, 3))
        # fp32 (tf32) tiles take twice the shared memory. The persistent 128x256 at 3 stages
        # needs 272 KB (sm_90 compile, tools/compile_call.py), over the SM's 227 KB: it keeps
        # its pipeline buffers live for the next tile while the epilogue stages the output.
        # fp32 gets the persistent 128x128 at 4 stages instead (192 KB, 107 registers), and the
        # one-tile-per-program 128x256, whose epilogue reuses the dead pipeline buffers (147 KB,
        # 158 registers, no spills). On the H200 (session 28, tf32 ResNet-50 and CRAFT) the
        # latter took only l3 3x3 (first): 96.0 -> 84.5 us.
        if prob.dtype.itemsize == 2:
            two_groups = (128, 256, 8, 3)
        else:
            two_groups = (128, 128, 8, 4)
            if prob.precision != "tf32x3":  # (3xTF32: below)
                plain += ((128, 256, 8, 3),)
        persistent = ((64, 256, 4, 3), (64, 256, 4, 4), two_groups)
        if prob.precision == "tf32x3":
            # 3xTF32 splits each operand into high and low parts: the A operand goes through
            # registers (wgmma from registers) and the persistent 64x256 needs 246 KB (3 stages)
            # and 287 KB (4) of shared memory on sm_90 (tools/compile_call.py --dtype ieee), over
            # the SM's 227 KB: they cannot launch. The 128x256 (and every 64x256) spills 300+
            # registers there; on the H200's strict fp32 all suite (session 34's tuner log) the
            # 128x256 never won (1.06x the best at least, 1.53x in the median over 71 layers), so
            # it is not among the plain tiles above
            persistent = (two_groups,)
            if not dense:
                # grouped_tma's super-groups: its 64x256 tiles spill 370-500 registers here and were
                # 33-43% slower than its 64x128 on all seven ResNeXt layers of that log
                shapes = [t for t in shapes if t[1] <= 128]
        for bm, bn, warps, stages in shapes:
            if bm == 128 and prob.kg <= 64:
                continue
            tiles = spatial_tiles(prob, bn)
            best = tiles[0][0] if tiles else 0
            if not dense or (bm, bn, warps, stages) in plain:
                for cover, tn, th, tw in tiles[:2]:
                    if cover >= 0.85 * best:
                        out.append(Config(bm, bn, bk, warps, stages, tile_n=tn, tile_h=th, tile_w=tw))
            # persistent: the next tile's loads overlap this tile's epilogue (short K loops);
            # two programs per SM where two fit in shared memory (the same compiled kernel)
            if dense and (bm, bn, warps, stages) in persistent:
                _, tn, th, tw = tiles[0]
                smem = stages * (bm + bn) * bk * prob.dtype.itemsize + bm * bn * prob.dtype.itemsize
                for per_sm in (1, 2) if smem <= 110_000 else (1,):
                    out.append(Config(bm, bn, bk, warps, stages, tile_n=tn, tile_h=th, tile_w=tw, persistent=per_sm))
            # few output tiles and a long reduction: split K so that the GPU fills up. Only
            # shapes whose partial-sum epilogue fits in registers (tools/sm90_check.py: 128x256
            # and 64x256 on 4 warps spill there)
            _, tn, th, tw = tiles[0]
            n_tiles = cdiv(prob.kg, bm) * cdiv(prob.n, tn) * cdiv(prob.p, th) * cdiv(prob.q, tw) * prob.groups
            if (dense and (bm, bn) != (64, 128)) or not main:
                continue
            if (bm * bn) // (32 * warps) <= 64 and n_tiles < 1.5 * sms:
                for sk in (2, 3, 4):
                    if k_tiles >= 8 * sk and n_tiles * sk <= 4 * sms:
                        out.append(Config(bm, bn, bk, warps, stages, tile_n=tn, tile_h=th, tile_w=tw, split_k=sk))
        return out

    def parts_configs(self, prob: ConvProblem) -> list[Config]:
        """Tiles of 128 output channels x ``parts`` pixel tiles (``matmul.blocks.parts_gemm_kernel``)
        whose widest SM has at most 90% of the work it has under the best power-of-two
        128-channel tile (128x128 or 128x256), best first: 3 x 64 or 3 x 32 pixels (5 x 32 too),
        widths no power of two reaches. Dense 16-bit layers only (strict fp32 spills there).

        Session 30's ncu: cuBLAS fills the H200's 132 SMs on ResNet-50's l3 1x1 reduce (12,544
        pixels x 256 channels) with 132 tiles of 192 x 128; the 128x256 tile leaves 34 SMs idle.
        The work of an SM is its tile count (``ceil(tiles / SMs)``) times the tile's area; the
        comparison is among two-warpgroup tiles of 128 channels only, because narrower tiles
        do less per byte they load (64x128 has the same per-SM work as 192 x 128 on that layer and
        took 24.5 us against 22.0 for 128x256). Not among ``configs`` until the H200 has timed
        them (``bash tools/gpu_session.sh parts``; ``tools/config_probe.py --parts``)."""
        if prob.groups != 1 or prob.dtype.itemsize != 2 or prob.kg <= 64 or not prob.tma_ok:
            return []
        sms, bk = sm_count(), _tma_bk(prob)

        def pixel_tiles(bn: int) -> tuple[int, tuple[int, int, int]]:
            _, tn, th, tw = spatial_tiles(prob, bn)[0]
            return cdiv(prob.n, tn) * cdiv(prob.p, th) * cdiv(prob.q, tw), (tn, th, tw)

        def work(pixels_per_tile: int, tiles_n: int) -> int:
            return cdiv(cdiv(prob.kg, 128) * tiles_n, sms) * 128 * pixels_per_tile

        base = min(work(bn, pixel_tiles(bn)[0]) for bn in (128, 256))
        out = []
        for bn, parts in ((64, 3), (32, 3), (32, 5)):
            n_tiles, (tn, th, tw) = pixel_tiles(bn)
            w = work(parts * bn, cdiv(n_tiles, parts))
            if w <= 0.9 * base:
                # the A block and the parts' B blocks per stage, and the store's staging tile
                stages = 4 if 4 * (128 + parts * bn) * bk * 2 + 128 * bn * 2 <= 200_000 else 3
                cfg = Config(128, bn, bk, 8, stages, tile_n=tn, tile_h=th, tile_w=tw, persistent=1, parts=parts)
                out.append((w, -parts * bn, cfg))
        return [cfg for _, _, cfg in sorted(out, key=lambda t: t[:2])]

    def default_config(self, prob: ConvProblem) -> Config:
        """The untuned config. Dense 16-bit layers: persistent 64x256 at 4 stages, the form
        closest to each layer's best over the H200's tuner log (session 12: 5.8% slower than the
        best in geometric mean over 43 ResNet-50 and CRAFT layers, where the plain 128x128 /
        64x128 tiles used before were 48% slower). Others: ``plain_default``."""
        if interpreting() or prob.groups != 1 or prob.dtype.itemsize != 2:
            return self.plain_default(prob)
        _, tn, th, tw = spatial_tiles(prob, 256)[0]
        return Config(64, 256, _tma_bk(prob), 4, 4, tile_n=tn, tile_h=th, tile_w=tw, persistent=1)

    def plain_default(self, prob: ConvProblem) -> Config:
        """One output tile per program (no persistence, no split-K): what every caller of the
        kernel can run, e.g. grouped_tma's listing store."""
        bk = _tma_bk(prob)
        if interpreting():
            _, tn, th, tw = spatial_tiles(prob, 32)[0]
            return Config(64, 32, bk, 4, 1, tile_n=tn, tile_h=th, tile_w=tw)
        bm = 128 if prob.kg > 64 else 64
        _, tn, th, tw = spatial_tiles(prob, 128)[0]
        return Config(bm, 128, bk, 8 if bm == 128 else 4, 4, tile_n=tn, tile_h=th, tile_w=tw)

    def run(self, prob, x, w, bias, y, cfg, launch=None, fix=None, fixup=None):
        """``fix`` (an int32 tile list) and ``fixup(yo)``, for ``grouped_tma``: the store lists
        the tiles holding a NaN or Inf (``grouped_tma.tma_output_store_listed``), and
        ``fixup`` is called with the NHWC buffer stored to, before it is copied to ``y``."""
        if launch is not None and launch.fast_ready:
            _fast_tma(launch, x, w, bias, y, fix, fixup)
            if has_phase_tails(prob):
                _phase_tail_fix(prob, x, w, bias, y)
            return
        if cfg.parts > 1 and (fix is not None or prob.groups != 1):
            raise ValueError(f"config {cfg.describe()}: pixel-tile parts take dense layers (groups = 1) with the "
                             "plain store; use a config without parts")  # fmt: skip
        cp = channel_pad(prob.cg, cfg.block_k)
        wp = krsc_weight(w, cp).view(prob.k, -1)
        c_tiles = cp // cfg.block_k
        g, kg = prob.groups, prob.kg
        box = [cfg.tile_n, cfg.tile_h, cfg.tile_w, 1]
        x_desc = input_descriptor(prob, x, box + [cfg.block_k])
        w_desc = descriptor(wp, [prob.k, wp.shape[1]], [wp.stride(0), 1], [cfg.block_m, cfg.block_k])
        yo = _nhwc_out(y, kg)  # the descriptor takes y's own strides: a phase view is stored in place
        y_desc = descriptor(
            yo, [prob.n, prob.p, prob.q, g, kg], [yo.stride(0), yo.stride(2), yo.stride(3), kg, 1], box + [cfg.block_m]
        )
        num_m = cdiv(kg, cfg.block_m)
        num_n = cdiv(prob.n, cfg.tile_n) * cdiv(prob.p, cfg.tile_h) * cdiv(prob.q, cfg.tile_w)
        a = (w_desc, (kg,))
        b_args = (prob.p, prob.q, prob.pad_h[0], prob.pad_w[0], prob.dilation[0], prob.dilation[1], prob.s, c_tiles)
        if strided_taps(prob):
            b = (x_desc, (*b_args, prob.stride[0], prob.stride[1], prob.cg, prob.c))
            b_fns = (cl.tma_im2col_phase_init, cl.tma_im2col_phase_load)
        else:
            b = (x_desc, b_args)
            b_fns = (cl.tma_im2col_init, cl.tma_im2col_load)
        if fix is None:
            c, store = (y_desc, (prob.p, prob.q)), cl.tma_output_store
        else:
            c, store = (y_desc, (prob.p, prob.q, fix, num_m, num_n)), tma_output_store_listed
        fns = (mm.desc2d_init, mm.desc2d_a_load, *b_fns, store)
        k_tiles = prob.r * prob.s * c_tiles
        split = (num_m * num_n * g, cfg.split_k, cfg.block_m * cfg.block_n) if cfg.split_k > 1 else None
        ws = split_k_buffers(x.device, *split) if split else None
        _launch(launch, (num_m * num_n, g, cfg.split_k), a, b, c, bias, yo, kg, num_m, num_n, k_tiles, cfg, fns,
                True, prob, ws, act=prob.activation, pdl=fix is not None and pdl_enabled())  # fmt: skip
        if launch is not None:
            launch.extra = (cp, wp.data_ptr() == w.data_ptr(), split, kg)
        if fixup is not None:
            fixup(yo)
        if yo is not y:
            y.copy_(yo)
        if has_phase_tails(prob):
            _phase_tail_fix(prob, x, w, bias, y)


class WidthUnfold(Algorithm):
    """First layers (S*C up to 64, groups = 1): the S taps of each output column gathered into one
    wide pixel (``conv.unfold``), then an R x 1 convolution over that on ``implicit_gemm_tma``
    (the taps along H stay implicit; a strided layer reads them through the stride-phase view).
    ``configs`` are the TMA kernel's for that reduced problem."""

    name = "width_unfold"
    fuses_activation = True

    def reduced(self, prob: ConvProblem) -> ConvProblem:
        """The R x 1 problem over the unfolded input: ``Cu`` channels, width Q, rows rounded up to
        the H stride (zeros; the bottom padding shrinks by as much, so P is unchanged)."""
        sh = prob.stride[0]
        hu = cdiv(prob.h, sh) * sh
        return replace(
            prob, c=unfolded_channels(prob.c, prob.s), h=hu, w=prob.q, s=1, stride=(sh, 1),
            pad_h=(prob.pad_h[0], prob.pad_h[1] - (hu - prob.h)), pad_w=(0, 0), dilation=(prob.dilation[0], 1),
            input_tma_ok=True, input_dense=True, input_phases_ok=sh > 1,
        )  # fmt: skip

    def supports(self, prob: ConvProblem) -> str | None:
        if prob.groups != 1:
            return f"groups = {prob.groups}: the width unfold takes dense layers (groups = 1)"
        if prob.s == 1:
            return "a filter one column wide has nothing to unfold"
        if prob.s * prob.c > MAX_UNFOLDED:
            return f"S*C = {prob.s * prob.c} is over {MAX_UNFOLDED}: the per-tap kernels read so wide an input directly"
        if prob.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            return f"the width unfold runs on the TMA kernel in fp16, bf16 or fp32, not {prob.dtype}"
        if not prob.tma_ok:
            return "the device has no TMA (needs compute capability >= 9.0)"
        rp = self.reduced(prob)
        if rp.p != prob.p or rp.q != prob.q:  # pragma: no cover - the construction keeps them
            return "internal: the reduced problem's output size differs"
        return _TMA.supports(rp)

    def heuristic_ok(self, prob: ConvProblem) -> bool:
        # timed in 16-bit types only: fp32 layers (offered to the tuner since session 27, where
        # tf32's ResNet stem ran small_k at 0.65x cuDNN) keep small_k untuned
        return prob.dtype.itemsize == 2 and unfold_pays(prob.c, prob.k)

    def configs(self, prob: ConvProblem) -> list[Config]:
        return _TMA.configs(self.reduced(prob))

    def default_config(self, prob: ConvProblem) -> Config:
        return _TMA.default_config(self.reduced(prob))

    def run(self, prob, x, w, bias, y, cfg, launch=None):
        rp = self.reduced(prob)
        u = unfold_w(x, prob.s, prob.stride[1], prob.pad_w[0], prob.dilation[1], prob.q, rp.h)
        # packed on every call, like krsc_weight: a weight changed in place is always seen
        _TMA.run(rp, u, unfold_weight(w), bias, y, cfg, launch)


_TMA = ImplicitGemmTma()


class GroupedTma(Algorithm):
    """Narrow groups (2-32 channels per group) on the TMA kernel: ``cfg.gt`` neighbouring groups
    taken as one, the weight expanded block-diagonally (``conv/grouped_tma.py``), then
    ``implicit_gemm_tma`` on the problem with ``groups / gt`` wide groups. The input is read in
    place; tiles holding a NaN or Inf are recomputed exactly by a second launch."""

    name = "grouped_tma"
    fuses_activation = True
    #: most input channels in a super-group: one 64-channel K tile per filter tap
    MAX_CS = 64

    def reduced(self, prob: ConvProblem, gt: int) -> ConvProblem:
        """``prob`` with ``gt`` groups taken as one (same tensors, ``gt`` times wider groups)."""
        e = prob.dtype.itemsize
        return replace(
            prob, groups=prob.groups // gt, input_tma_ok=prob.input_tma_rows_ok and (gt * prob.cg * e) % 16 == 0
        )

    def group_tiles(self, prob: ConvProblem) -> list[int]:
        """The two widest ``gt`` (powers of two dividing the group count, at most ``MAX_CS``
        input channels per super-group) whose reduced problem the TMA kernel takes."""
        out, gt = [], 2
        while gt <= prob.groups and gt * prob.cg <= self.MAX_CS:
            if prob.groups % gt == 0 and _TMA.supports(self.reduced(prob, gt)) is None:
                out.append(gt)
            gt *= 2
        return out[::-1][:2]

    def supports(self, prob: ConvProblem) -> str | None:
        if prob.groups == 1:
            return "not a grouped convolution (groups = 1)"
        if has_phase_tails(prob):
            return f"stride {prob.stride}: the input's {prob.h}x{prob.w} are not multiples of the stride"
        if prob.cg == 1:
            return "one channel per group: that is the depthwise algorithms' problem"
        if prob.cg > self.MAX_CS // 2:
            return f"C/groups = {prob.cg}: groups this wide fill implicit_gemm_tma's tiles alone"
        if not self.group_tiles(prob):
            reason = _TMA.supports(self.reduced(prob, 2)) if prob.groups % 2 == 0 else None
            return f"no group count to merge that the TMA kernel takes ({reason or 'the group count is odd'})"
        return None

    def heuristic_ok(self, prob: ConvProblem) -> bool:
        # H200, session 11 (tuned, bf16): the tuner's pick over `grouped` and `implicit_gemm_tma`
        # on ResNeXt's g32 layers with 4, 8 and 16 channels per group, 1.2-1.8x faster than
        # session 10's picks, each time with the widest merge (the default config's); other
        # dtypes and group widths were not timed
        return prob.dtype in (torch.float16, torch.bfloat16) and 4 <= prob.cg <= 16

    def accepts(self, cfg: Config) -> bool:
        return cfg.gt >= 2

    def configs(self, prob: ConvProblem) -> list[Config]:
        if interpreting():
            return [self.default_config(prob)]
        out = []
        # the widest merge only: it won on every ResNeXt layer the H200 timed, by 2-12% over the
        # next (sessions 11-12, ten layer timings), and each candidate is a compile
        for gt in self.group_tiles(prob)[:1]:
            # the listing store has no split-K form
            cands = [c for c in _TMA.configs(self.reduced(prob, gt)) if c.split_k == 1 and not c.persistent][:6]
            if prob.dtype.itemsize == 2:
                # 64 x 256 at 3 stages never won a 16-bit ResNeXt layer in the tuner logs of
                # sessions 23-60 (H200: at best 1.035x the layer's winner, H100: 1.06x; at 2
                # stages it won 37 H200 timings): two compiles fewer on each first call
                cands = [c for c in cands if (c.block_n, c.num_stages) != (256, 3)]
            out += [replace(c, gt=gt) for c in cands]
            # the first two tiles again on persistent programs walking every (tile, super-group):
            # a tile's K loop is 9 steps on ResNeXt (3x3 over one 64-channel box), short enough
            # that the next tile's loads overlapping this one's epilogue is what persistence won on
            # the dense layers (session 12); cuDNN runs these layers on 120 persistent CTAs (ncu,
            # session 44). H100, session 45 (s45a, ResNeXt from empty caches): best or within 3% of
            # the best on the stride-1 layers (256 @28 53.1 us against one tile a program's 55.4,
            # 512 @14 31.3 against 31.8, 128 @56 95.6 against 98.5), 5-7% behind on the strided
            # ones (256 @56 s2 76.1 against 72.5, 512 @28 s2 46.0 against 43.0): offered at stride
            # 1 only, two compiles fewer for the strided layers' first call
            e = prob.dtype.itemsize
            for c in cands[:2] if prob.stride == (1, 1) else ():
                # the ring and the store's staging tile are live at once in the persistent kernel
                smem = (c.num_stages * (c.block_m + c.block_n) * c.block_k + c.block_m * c.block_n) * e
                if smem <= 220_000:
                    out.append(replace(c, gt=gt, persistent=2 if smem <= 110_000 else 1))
        return out

    def default_config(self, prob: ConvProblem) -> Config:
        gt = self.group_tiles(prob)[0]
        return replace(_TMA.plain_default(self.reduced(prob, gt)), gt=gt)

    def run(self, prob, x, w, bias, y, cfg, launch=None):
        from ..functional import _derived_weight

        gt = cfg.gt
        rp = self.reduced(prob, gt)
        groups = prob.groups
        wx = _derived_weight(w, ("blockdiag", gt, groups), lambda v: blockdiag_weight(v, gt, groups))
        num_m = cdiv(rp.kg, cfg.block_m)
        num_n = cdiv(prob.n, cfg.tile_n) * cdiv(prob.p, cfg.tile_h) * cdiv(prob.q, cfg.tile_w)
        tiles = num_m * num_n * rp.groups
        fix = Grouped.fix_list(x.device, tiles)
        aux = aux_of(launch)

        def fixup(yo):
            grouped_fixup(aux, prob, x, w, bias, yo, fix, (num_m, num_n, tiles), rp.kg,
                          (cfg.block_m, cfg.tile_n, cfg.tile_h, cfg.tile_w))  # fmt: skip

        _TMA.run(rp, x, wx, bias, y, cfg, launch, fix=fix, fixup=fixup)


def grouped_fixup(launch, prob, x, w, bias, yo, fix, grid: tuple, ks: int, tile: tuple) -> None:
    """``grouped_tma_fixup_kernel`` over the fix-up list ``fix`` that a super-group launch filled
    (``grouped_tma``'s TMA store, ``grouped_ws``'s Gluon consumers): ``grid`` = (channel blocks a
    super-group, pixel tiles, tiles), ``ks`` output channels a super-group, ``tile`` = (channels,
    images, rows, columns) of a tile as the list numbers them; ``yo`` the NHWC output."""
    num_m, num_n, tiles = grid
    args = (x, w, yo if bias is None else bias, yo, fix, num_m, num_n, prob.h, prob.w, prob.p, prob.q, prob.n,
            prob.cg, prob.kg, ks, x.stride(0), x.stride(2), x.stride(3),
            w.stride(0), w.stride(1), w.stride(2), w.stride(3), yo.stride(0), yo.stride(2), yo.stride(3),
            prob.stride[0], prob.stride[1], prob.pad_h[0], prob.pad_w[0], prob.dilation[0], prob.dilation[1],
            prob.r, prob.s, *tile)  # fmt: skip

    pdl = pdl_enabled()
    # pixels x channels recomputed a step: 16 x 16 on the GPU (one compiled fix-up for every
    # candidate of a shape); under the interpreter, which runs each op of each step in Python,
    # the largest powers of two up to 64 that divide the tile's pixels and channels (the same code
    # and masks; one CPU test spent 87 of its 89 s in 16 x 16 steps)
    px = tile[1] * tile[2] * tile[3]
    pb, kb = (min(64, px & -px), min(64, tile[0] & -tile[0])) if interpreting() else (16, 16)

    def constexprs():
        return dict(PB=pb, KB=kb, HAS_BIAS=bias is not None, ACT=prob.activation, ACC_F64=False,
                    **({"PDL": True} if pdl else {}))  # fmt: skip

    # one program per SM at most: with an empty list each reads one integer and a ticket
    _run_kernel(launch, grouped_tma_fixup_kernel, (min(tiles, sm_count()),), args, constexprs,
                {"num_warps": 4, "num_stages": 1, **({"launch_pdl": True} if pdl else {})})  # fmt: skip


class Gemm1x1(Algorithm):
    """A 1x1, stride-1, unpadded convolution over dense NHWC is a plain GEMM: matmul loaders only."""

    name = "gemm_1x1"
    fuses_activation = True

    def supports(self, prob: ConvProblem) -> str | None:
        if not prob.is_1x1 or prob.stride != (1, 1):
            return "only 1x1 kernels with stride 1 and no padding"
        if not prob.input_dense:
            return "the input's (n, h, w) rows are not evenly strided (a sliced view)"
        return _tma_common(prob)

    def configs(self, prob: ConvProblem) -> list[Config]:
        bk = _tma_bk(prob)
        if interpreting():
            return [self.default_config(prob)]
        # 64-row tiles: the 128-row ones never won on the H200 (session 12's tuner log: 14
        # ResNet-50 and CRAFT 1x1 layers, 25-38% slower than the best in the median)
        return [Config(64, bn, bk, 4, 3 if bn == 256 else 4) for bn in (128, 256)]

    def default_config(self, prob: ConvProblem) -> Config:
        bk = _tma_bk(prob)
        if interpreting():
            return Config(64, 32, bk, 4, 1)
        # 64x128: gemm_1x1's winner in session 12's tuner log (128-row tiles never won)
        return Config(64, 128, bk, 4, 4)

    def run(self, prob, x, w, bias, y, cfg, launch=None, fix=None, fixup=None):
        """``fix`` (an int32 tile list) and ``fixup(yo)``, for ``grouped_tma``: the store lists
        the tiles holding a NaN or Inf (``grouped_tma.tma_output_store_listed``), and
        ``fixup`` is called with the NHWC buffer stored to, before it is copied to ``y``."""
        if launch is not None and launch.fast_ready:
            _fast_tma(launch, x, w, bias, y, fix, fixup)
            return
        cp = channel_pad(prob.cg, cfg.block_k)
        wp = krsc_weight(w, cp).view(prob.k, -1)
        g, cg, kg = prob.groups, prob.cg, prob.kg
        rows = prob.n * prob.h * prob.w
        x_desc = descriptor(x, [rows, g, cg], [x.stride(3), cg, 1], [cfg.block_n, 1, cfg.block_k])
        w_desc = descriptor(wp, [prob.k, wp.shape[1]], [wp.stride(0), 1], [cfg.block_m, cfg.block_k])
        yo = _nhwc_out(y)
        y_desc = descriptor(yo, [rows, g, kg], [prob.k, kg, 1], [cfg.block_n, 1, cfg.block_m])
        num_m, num_n = cdiv(kg, cfg.block_m), cdiv(rows, cfg.block_n)
        fns = (mm.desc2d_init, mm.desc2d_a_load, mm.desc_init, mm.desc_b_load, mm.desc_store_t)
        split = (num_m * num_n * g, cfg.split_k, cfg.block_m * cfg.block_n) if cfg.split_k > 1 else None
        ws = split_k_buffers(x.device, *split) if split else None
        _launch(launch, (num_m * num_n, g, cfg.split_k), (w_desc, (kg,)), (x_desc, ()), (y_desc, ()), bias, yo, kg,
                num_m, num_n, cp // cfg.block_k, cfg, fns, True, prob, ws, act=prob.activation)  # fmt: skip
        if launch is not None:
            launch.extra = (cp, wp.data_ptr() == w.data_ptr(), split, 0)  # 0: y must be dense (flat rows)
        if yo is not y:
            y.copy_(yo)


class Grouped(ImplicitGemm):
    """Grouped convolutions with few channels per group (ResNeXt: 4-8): ``GT`` groups per GEMM,
    the weights expanded block-diagonally by the loader, so tensor-core tiles are not mostly
    padding. The other loaders are the general kernel's, on the super-group view."""

    # its fix-up launch recomputes tiles without an activation: conv2d applies it afterwards
    fuses_activation = False

    name = "grouped"

    def supports(self, prob: ConvProblem) -> str | None:
        if prob.groups == 1:
            return "not a grouped convolution (groups = 1)"
        if prob.cg == 1:
            return "one channel per group: that is the depthwise algorithm's problem"
        if prob.cg > 16 or prob.kg > 64:
            return f"C/groups = {prob.cg}, K/groups = {prob.kg}: groups are wide enough for the per-group kernels"
        return None

    def groups_per_gemm(self, prob: ConvProblem) -> int:
        """Groups per GEMM: enough for a 32-wide reduction tile, dividing the group count."""
        gt = 1
        while gt * prob.cg < 32 and prob.groups % (gt * 2) == 0:
            gt *= 2
        return gt

    def configs(self, prob: ConvProblem) -> list[Config]:
        if interpreting():
            return [self.default_config(prob)]
        gt = self.groups_per_gemm(prob)
        bn = min(128, _small(gt * prob.kg, 16))
        bk = min(64, _small(gt * prob.cg, 16))
        # a 128x128 tile on 4 warps spills (255 registers, 396 spill loads/stores in
        # tools/sm90_check.py; 8 warps: 240, none)
        shapes = ((128, 8), (64, 4)) if bn >= 128 else ((128, 4), (128, 8), (64, 4))
        return [Config(bm, bn, bk, warps, stages) for bm, warps in shapes for stages in (3, 4)]

    def default_config(self, prob: ConvProblem) -> Config:
        gt = self.groups_per_gemm(prob)
        bn = min(128, _small(gt * prob.kg, 16))
        bk = min(64, _small(gt * prob.cg, 16))
        if interpreting():
            return Config(32, min(32, bn), min(32, bk), 4, 1)
        if prob.dtype == torch.float64:
            return Config(64, min(32, bn), 16, 4, 2)
        return Config(128, bn, bk, 8 if bn >= 128 else 4, 3)

    LOADS = (cl.gather_im2col_load, cl.blockdiag_weight_init, cl.blockdiag_weight_load)
    #: False: no NaN/Inf fix-up (a NaN or Inf input then reaches every group of its tile); only
    #: for A/B timings (tools/ab_kernels.py)
    EXACT_NONFINITE = True
    _fix_lists: dict = {}

    def weight_args(self, prob: ConvProblem, w: torch.Tensor, gt: int) -> tuple:
        return (w, prob.kg, prob.cg, gt, w.stride(0), w.stride(1), w.stride(2), w.stride(3), prob.r, prob.s)

    @classmethod
    def fix_list(cls, device: torch.device, tiles: int) -> torch.Tensor:
        """The int32 ``[count, tickets, tile ids ...]`` list of tiles to recompute (see
        ``loaders.blockdiag_output_store``), one per device and stream like the split-K counters:
        count and tickets are zero between launches, and every fix-up launch leaves them so."""
        key = (device, torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0)
        buf = cls._fix_lists.get(key)
        if buf is None or buf.numel() < tiles + 2:
            buf = torch.zeros(max(tiles, 1024) + 2, dtype=torch.int32, device=device)
            cls._fix_lists[key] = buf
        return buf

    def run(self, prob, x, w, bias, y, cfg, launch=None):
        # A NaN or Inf input times another group's zero weight is NaN, which the block-diagonal
        # product adds to every group of its tile. The main kernel lists the tiles holding a
        # non-finite value; a second launch recomputes those one group at a time
        # (loaders.blockdiag_fixup_kernel). launch.extra: (the fix-up's handle or None, tiles).
        bt = y if bias is None else bias
        if launch is not None and launch.fast_ready:  # a repeat call: only the tensors change
            fix_launch, tiles = launch.extra
            if fix_launch is None:
                launch.fast((x, w, y, bt, y, y))
                return
            if fix_launch.fast_ready:
                fix = self.fix_list(x.device, tiles)
                launch.fast((x, w, y, fix, bt, y, y))
                fix_launch.fast((x, w, y, bt, fix))
                return
        gt = self.groups_per_gemm(prob)
        cs, ks = gt * prob.cg, gt * prob.kg
        M = prob.n * prob.p * prob.q
        a = (x, x.stride(0), x.stride(2), x.stride(3), x.stride(1), prob.h, prob.w, prob.p, prob.q, M,
             prob.stride[0], prob.stride[1], prob.pad_h[0], prob.pad_w[0], prob.dilation[0], prob.dilation[1],
             prob.r, prob.s, cs)  # fmt: skip
        b = self.weight_args(prob, w, gt)
        c = (y, y.stride(0), y.stride(1), y.stride(2), y.stride(3), prob.p, prob.q, M, ks)
        num_m, num_n, batch = cdiv(M, cfg.block_m), cdiv(ks, cfg.block_n), prob.groups // gt
        tiles, k_tiles = num_m * num_n * batch, self.k_tiles(prob, cfg, gt)
        if launch is None:
            fix_launch, exact = None, self.EXACT_NONFINITE
        else:  # the handle keeps the mode of its first call
            if launch.extra is None:
                launch.extra = (Launch() if self.EXACT_NONFINITE else None, tiles)
            fix_launch = launch.extra[0]
            exact = fix_launch is not None
        grid = (num_m * num_n, batch)
        if not exact:
            fns = (cl.gather_im2col_init, *self.LOADS, cl.gather_output_store)
            _launch(launch, grid, (None, a), (None, b), (None, c), bias, y, ks, num_m, num_n, k_tiles, cfg, fns,
                    False, prob)  # fmt: skip
            return
        fix = self.fix_list(x.device, tiles)
        fns = (cl.gather_im2col_init, *self.LOADS, cl.blockdiag_output_store)
        _launch(launch, grid, (None, a), (None, b), (None, (*c, fix, num_m, num_n)), bias, y, ks, num_m, num_n,
                k_tiles, cfg, fns, False, prob)  # fmt: skip

        def constexprs():
            return dict(BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, A_INIT=cl.gather_im2col_init,
                        A_LOAD=self.LOADS[0], B_INIT=self.LOADS[1], B_LOAD=self.LOADS[2],
                        HAS_BIAS=bias is not None, PRECISION=_precision(prob),
                        UPCAST=interpreting() and prob.dtype == torch.bfloat16, F64=prob.dtype == torch.float64)  # fmt: skip

        # one program per SM: with an empty list each reads one integer and takes a ticket. Eight
        # warps for 128-row tiles: on four the fix-up needs 238-254 registers (tools/sm90_check.py)
        _run_kernel(fix_launch, cl.blockdiag_fixup_kernel, (min(tiles, sm_count()),),
                    (a, b, c, bt, ks, fix, num_m, num_n, k_tiles), constexprs,
                    {"num_warps": max(cfg.num_warps, cfg.block_m // 16), "num_stages": cfg.num_stages})  # fmt: skip


class GroupedDirect(Algorithm):
    """Grouped convolutions with 2-8 input and at most 8 output channels per group on the CUDA
    cores (``conv/grouped_direct.py``): no tensor-core tile, so no block-diagonal padding; every
    product is a useful FMA in fp32 (fp64 for fp64). A thread holds at most 16 weights a tap
    (ResNeXt's 4 x 4); wider groups (8 x 8, which spilled as one thread) split their output
    channels over 2-4 threads. Any stride, padding, dilation and strides; NHWC input is the fast
    layout. H100, session 42: ResNeXt 128 @56 94.8 us against ``grouped_tma``'s 99.7 and cuDNN's
    96.0; session 44: 93.2 against 100.3 and 95.7. The split lost to ``grouped_tma`` on both
    8 x 8 layers (H100, session 44: 132.3 against 74.7 us on 256 @56 s2, 86.2 against 57.0 on
    256 @28), so the tuner is not offered it (``SPLIT_CANDIDATES``); forcing it still runs.

    Config fields in this algorithm's view: block_m = strips a program (BLOCK_S), block_n =
    group parts a program (GB), block_k = output columns a thread (COLS), parts = threads a
    group (``split_parts``; 0 or 1: one); BLOCK_S * GB = 32 * num_warps (one strip and group
    part a thread)."""

    name = "grouped_direct"
    fuses_activation = True
    writes_nchw = True
    #: whether the tuner times the split forms (groups wider than one thread takes)
    SPLIT_CANDIDATES = False

    def supports(self, prob: ConvProblem) -> str | None:
        from .grouped_direct import MAX_CG, MAX_CKG, MAX_KG, split_parts

        if prob.groups == 1:
            return "not a grouped convolution (groups = 1)"
        if prob.cg == 1:
            return "one channel per group: that is the depthwise algorithms' problem"
        if prob.cg > MAX_CG or prob.kg > MAX_KG:
            return (f"C/groups = {prob.cg}, K/groups = {prob.kg}: grouped_direct takes at most {MAX_CG} input and "
                    f"{MAX_KG} output channels a group (wider groups fill tensor-core tiles: grouped_tma)")  # fmt: skip
        if split_parts(prob.cg, prob.kg) == 0:
            return (f"C/groups = {prob.cg}, K/groups = {prob.kg}: no power-of-two split of the {prob.kg} output "
                    f"channels leaves a thread at most {MAX_CKG} weights a tap (C/g x K/g / parts); grouped_tma "
                    "takes this layer")  # fmt: skip
        if self._cols(prob) == 0:
            return (f"a {prob.s}-column filter at stride {prob.stride[1]}, dilation {prob.dilation[1]}: one output "
                    "column's input row would not fit in registers")  # fmt: skip
        return None

    def heuristic_ok(self, prob: ConvProblem) -> bool:
        return False  # tuned only: timed on one layer so far (session 42), where it won by 5%

    @staticmethod
    def _parts(prob: ConvProblem) -> int:
        """Threads a group (``split_parts``), 0 for one (the configs' field then as before)."""
        from .grouped_direct import split_parts

        parts = split_parts(prob.cg, prob.kg)
        return parts if parts > 1 else 0

    @classmethod
    def _cols(cls, prob: ConvProblem) -> int:
        from .grouped_direct import pick_cols

        kgp = prob.kg // max(1, cls._parts(prob))
        return pick_cols(prob.cg, kgp, prob.s, prob.stride[1], prob.dilation[1], prob.q)

    def configs(self, prob: ConvProblem) -> list[Config]:
        parts = self._parts(prob)
        if interpreting():
            d = self.default_config(prob)
            return [d, Config(16, 2, max(1, d.block_k // 2), 1, 1, parts=parts)]
        if parts and not self.SPLIT_CANDIDATES:
            return []
        # the widest of 32, 16 or 8 group parts a program (as many strips) that the groups fill:
        # on ResNeXt 128 @56 (H100) 32 beat 16 in 14 of the 15 tuner logs of sessions 42-60 that
        # timed both on an NHWC input (by 1.9-7.6% in bf16, fp16 and TF32; 16 won once, by 1.3%,
        # session 42), and 8 was never the best (101.8-152.3 us against 93.2-111.9); each is a
        # compile of about 1.2 s on the dev CPU, the longest of that layer's first call (session
        # 61), so only the widest is offered. Half the columns a thread is not offered (103 us
        # against 95-102, s42)
        cols = self._cols(prob)
        fits = [gb for gb in (32, 16, 8) if gb <= _small(prob.groups * max(1, parts), 8)]
        return [Config(128 // gb, gb, cols, 4, 1, parts=parts) for gb in fits[:1]]

    def default_config(self, prob: ConvProblem) -> Config:
        cols, parts = self._cols(prob), self._parts(prob)
        if interpreting():
            # the interpreter runs the unrolled FMAs op by op, each on the whole tile at about the
            # same cost: a few large programs (64 strips) rather than many small ones
            return Config(64, min(8, _small(prob.groups * max(1, parts), 2)), cols, 1, 1, parts=parts)
        gb = min(32, _small(prob.groups * max(1, parts), 8))
        return Config(128 // gb, gb, cols, 4, 1, parts=parts)

    @staticmethod
    def packed_weight(w: torch.Tensor, groups: int) -> torch.Tensor:
        """w [K, C/g, R, S] -> [R, S, C/g, K/g, groups] in fp32 (fp64 for fp64), contiguous: a
        warp's weight loads then read consecutive groups' values."""
        k, cg, r, s = w.shape
        acc = torch.float64 if w.dtype == torch.float64 else torch.float32
        return w.reshape(groups, k // groups, cg, r, s).permute(3, 4, 2, 1, 0).to(acc).contiguous()

    def run(self, prob, x, w, bias, y, cfg, launch=None):
        from ..functional import _derived_weight
        from . import grouped_direct as gd

        parts = max(1, cfg.parts)
        if prob.kg % parts or prob.cg * (prob.kg // parts) > gd.MAX_CKG:
            raise ValueError(f"grouped_direct config {cfg.describe()}: parts (threads a group) must divide "
                             f"K/groups = {prob.kg} and leave at most {gd.MAX_CKG} weights a tap a thread "
                             f"({prob.cg} x {prob.kg // parts}); use parts = {gd.split_parts(prob.cg, prob.kg)}")  # fmt: skip
        # the weight of a group split over PARTS threads is packed as groups * PARTS groups
        vg = prob.groups * parts
        wt = _derived_weight(w, ("grouped_direct", vg), lambda t: self.packed_weight(t, vg))
        bt = bias if bias is not None else y
        xv = gd.word_channels(x, prob.cg)
        if launch is not None and launch.extra is not None and launch.extra != xv:
            launch = None  # the handle's kernel loads words of another width: Triton's own dispatch
        if launch is not None and launch.fast_ready:
            launch.fast((x, wt, bt, y))
            return
        gb, bs, cols = cfg.block_n, cfg.block_m, cfg.block_k
        if gb & (gb - 1) or bs & (bs - 1) or cols < 1:
            raise ValueError(f"grouped_direct config {cfg.describe()}: block_m and block_n must be powers of two and "
                             "block_k (columns a thread) at least 1")  # fmt: skip
        qs = cdiv(prob.q, cols)
        strips = prob.n * prob.p * qs
        if launch is not None:
            launch.extra = xv  # the word width its kernel was specialized for
        xs = tuple(x.stride(d) // xv for d in range(4))
        span = Depthwise.batch_span(x, y)
        args = (x, wt, bt, y, prob.h, prob.w, prob.p, prob.q, qs, strips, *xs, y.stride(0), y.stride(1), y.stride(2),
                y.stride(3))  # fmt: skip
        # the Gluon entry (explicit layout, groups on lanes) where the tile is one element a thread:
        # it compiles in 4-8 s on the dev CPU where the Triton entry's layout passes take 30-255 s
        # (sm90-compile); CONVGEMM_DEPTHWISE_GLUON=0 keeps the Triton entry
        layout = None
        if (not interpreting() and gd.gl is not None and os.environ.get("CONVGEMM_DEPTHWISE_GLUON", "1") != "0"
                and bs * gb == 32 * cfg.num_warps):  # fmt: skip
            layout = gd.gluon_layout(bs, gb, cfg.num_warps)
        kernel = gd.grouped_direct_kernel if layout is None else gd.grouped_direct_kernel_gl
        constexprs = lambda: dict(G=vg, CG=prob.cg, KG=prob.kg // parts, R=prob.r, S=prob.s, SH=prob.stride[0],  # noqa: E731
                                  SW=prob.stride[1], PH=prob.pad_h[0], PW=prob.pad_w[0], DH=prob.dilation[0],
                                  DW=prob.dilation[1], COLS=cols, GB=gb, BLOCK_S=bs, HAS_BIAS=bias is not None,
                                  ACT=prob.activation, ACC_F64=prob.dtype == torch.float64,
                                  INT64=span >= 2**31, XV=xv, PARTS=parts, **(layout or {}))  # fmt: skip
        _run_kernel(launch, kernel, (cdiv(strips, bs), cdiv(vg, gb)), args, constexprs,
                    {"num_warps": cfg.num_warps, "num_stages": 1})  # fmt: skip


class GroupedMma(Algorithm):
    """Grouped convolutions with 2-64 channels per group as a batched matrix product on the tensor
    cores (``conv/grouped_mma.py``): a program holds GB groups' ``BLOCK_M x K/g`` tiles and one 3-D
    ``tl.dot`` a step, the reduction over (filter tap, the group's own channels), so no product
    crosses groups (no block-diagonal zeros, no NaN fix-up) and only output columns under 16 are
    padded. Pointer loads: any stride, padding, dilation and strides. fp16 / bf16 / fp32 (the
    problem's dot precision).

    Config fields in this algorithm's view: block_m = output pixels a program (BLOCK_M), block_n =
    groups a program (GB), block_k = the reduction chunk (KC, fixed by C/g: informational)."""

    name = "grouped_mma"
    fuses_activation = True
    writes_nchw = True
    #: the widest groups: a program's accumulators are GB x BLOCK_M x K/g
    MAX_CG = 64
    MAX_KG = 64
    #: fp32 accumulators a thread at most, and 32-bit registers of reduction values (``_fits``):
    #: at 64 + 32 (64 16-bit values) the sm_90 compiles keep them in registers; strict fp32's
    #: 3xTF32 dot splits each value in two (128 pixels x 4 groups spilled 42 there, 0 in TF32)
    ACC_PER_THREAD = 64
    A_REGS_PER_THREAD = 32
    #: whether the tuner is offered it on a GPU at all (forcing ``algorithm="grouped_mma"`` runs
    #: it either way), and from how many channels a group on: session 54's H100 probe (bf16,
    #: ResNeXt-50's seven g32 3x3 layers, its GPU tests passed) had it win only the two
    #: 32-channel-group layers (1024 @14 s2: 24.6 us against the tuned grouped_tma's 27.7 and
    #: cuDNN's 27.5; 1024 @7: 17.4 against 22.4 and 23.8) and lose the rest (16 channels a group
    #: 0.80-0.82x cuDNN where grouped_tma ran 0.90-1.0x; 8 and 4 channels 0.39-0.71x)
    CANDIDATES = True
    MIN_TUNED_CG = 32
    #: the TMA-box form (``cfg.tile_h > 0``: ``grouped_mma.grouped_mma_tma_kernel``, session 54),
    #: offered from 8 channels a group on: its GPU tests passed (every config of eight layers,
    #: bf16 / fp16 / fp32) and session 54's H100 probe had it win both 16-channel-group ResNeXt
    #: layers (512 @14: 25.8 us against the tuned grouped_tma's 31.6 and cuDNN's 30.8; 512 @28
    #: s2: 37.2 against 43.2 and 38.9); with the taps joined in tap-minor order session 55's
    #: probe had it win both 8-channel layers too (256 @28: 49.2 us against 52.6 and 66.3; 256
    #: @56 s2: 64.7 against 72.0 and 72.7) and lose 4 channels a group (128 @56: 151 us against
    #: grouped_direct's 92.9)
    TMA_CANDIDATES = True
    MIN_TMA_CG = 8

    def supports(self, prob: ConvProblem) -> str | None:
        if prob.groups == 1:
            return "not a grouped convolution (groups = 1)"
        if prob.cg == 1:
            return "one channel per group: that is the depthwise algorithms' problem"
        if prob.cg > self.MAX_CG or prob.kg > self.MAX_KG:
            return (f"C/groups = {prob.cg}, K/groups = {prob.kg}: grouped_mma takes at most {self.MAX_CG} input and "
                    f"{self.MAX_KG} output channels a group (wider groups fill implicit_gemm_tma's tiles alone)")  # fmt: skip
        if prob.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            return f"dtype {prob.dtype}: grouped_mma runs on the tensor cores (fp16, bf16, fp32); use grouped_direct"
        return None

    def heuristic_ok(self, prob: ConvProblem) -> bool:
        # tuned only: timed on an H100 (session 54) but not yet on the H200 the heuristic rules
        # of the other grouped algorithms came from
        return False

    def tma_reason(self, prob: ConvProblem, gb: int) -> str | None:
        """Why the TMA-box form cannot run ``prob`` with ``gb`` groups a program, or None."""
        cg, e = prob.cg, prob.dtype.itemsize
        if cg < 4 or cg & (cg - 1):
            return (
                f"C/groups = {cg}: the TMA form takes 4, 8, 16, 32 or 64 channels a group; use a config without tile_*"
            )
        if not (prob.tma_ok and prob.input_tma_rows_ok):
            return ("the input cannot be read through a TMA descriptor (no TMA on this device, or its base or strides "
                    "are not 16-byte multiples); use a config without tile_*")  # fmt: skip
        if gb * cg * e % 16:
            return (f"{gb} groups of {cg} channels are {gb * cg * e} bytes, and a TMA box row must be a multiple of "
                    "16 bytes: take more groups a program (block_n)")  # fmt: skip
        sh, sw = prob.stride
        if prob.stride != (1, 1) and not (
            strided_taps(prob) and prob.input_phases_ok and prob.h % sh == prob.w % sw == 0
        ):
            return (f"stride {prob.stride} on a {prob.h}x{prob.w} input with a {prob.r}x{prob.s} filter: the TMA form "
                    "reads strided layers through the stride-phase view (an R x S filter, H and W multiples of the "
                    "stride, dense rows); use a config without tile_*")  # fmt: skip
        return None

    def _tma_configs(self, prob: ConvProblem, kc: int, tiles: list[tuple[int, int, int]]) -> list[Config]:
        """The TMA form's configs: each pointer tile shape whose box rows are 16-byte multiples,
        on its best-covering spatial block (the second best lost on every tile shape of session
        54's three layers, by 1-4%), at three and four stages: the form waits on its TMA barriers
        (64% of its stall samples on 512 @28 s2, session 55's ncu) and session 55's H100 probe
        (2-6 stages, five ResNeXt layers) had four stages from 6% faster to 4% slower than three,
        two stages 7-14% slower on every layer, five or six up to 26% slower on three of them."""
        out = []
        for bm, gb, warps in tiles:
            if self.tma_reason(prob, gb) is None:
                for _, tn, th, tw in spatial_tiles(prob, bm)[:1]:
                    out += [Config(bm, gb, kc, warps, st, tile_n=tn, tile_h=th, tile_w=tw) for st in (3, 4)]
        return out

    def _fits(self, prob: ConvProblem, bm: int, gb: int, warps: int) -> bool:
        from .grouped_mma import geometry

        _, kgp, kc, _ = geometry(prob.cg, prob.kg, prob.r * prob.s)
        threads = 32 * warps
        a_regs = gb * bm * kc * prob.dtype.itemsize // 4 * (2 if _precision(prob) == "tf32x3" else 1)
        return gb * bm * kgp <= self.ACC_PER_THREAD * threads and a_regs <= self.A_REGS_PER_THREAD * threads

    def _tiles(self, prob: ConvProblem) -> list[tuple[int, int, int]]:
        """``(BLOCK_M, GB, warps)``: for 128 pixels on 4 warps, 64 on 4 and 128 on 8, the most
        groups a program whose tiles fit the register budget (none where one group does not);
        where none of them fits (64-channel groups in fp32), the widest narrower tile that does."""
        return self._fitting(prob, ((128, 4), (64, 4), (128, 8))) or self._fitting(prob, ((32, 4), (16, 4)))[:1]

    def _fitting(self, prob: ConvProblem, shapes) -> list[tuple[int, int, int]]:
        out = []
        for bm, warps in shapes:
            gb = _small(prob.groups, 1)
            while gb > 1 and not self._fits(prob, bm, gb, warps):
                gb //= 2
            if self._fits(prob, bm, gb, warps):
                out.append((bm, gb, warps))
        return out

    def configs(self, prob: ConvProblem) -> list[Config]:
        from .grouped_mma import geometry

        if interpreting():
            return [self.default_config(prob)]
        if not self.CANDIDATES:
            return []
        kc = geometry(prob.cg, prob.kg, prob.r * prob.s)[2]
        out, tiles = [], self._tiles(prob)
        if prob.cg >= self.MIN_TUNED_CG:
            # three stages won every tile on the 32-channel-group layers (session 54); one stage
            # won some at 16 channels, where the pointer form is not offered by default
            stages = (3,) if prob.cg >= 32 else (3, 1)
            # (each tile shape differs in pixels or warps, so no two configs are the same)
            out = [Config(bm, gb, kc, warps, st) for bm, gb, warps in tiles for st in stages]
        if self.TMA_CANDIDATES and prob.cg >= self.MIN_TMA_CG:
            out += self._tma_configs(prob, kc, tiles)
        return out

    def default_config(self, prob: ConvProblem) -> Config:
        from .grouped_mma import geometry

        kc = geometry(prob.cg, prob.kg, prob.r * prob.s)[2]
        if interpreting():
            return Config(16, min(4, _small(prob.groups, 1)), kc, 1, 1)
        bm, gb, warps = self._tiles(prob)[0]  # the first GPU candidate
        return Config(bm, gb, kc, warps, 3)

    def run(self, prob, x, w, bias, y, cfg, launch=None):
        from ..functional import _derived_weight
        from . import grouped_mma as gm

        cgp, kgp, kc, chunks = gm.geometry(prob.cg, prob.kg, prob.r * prob.s)
        tma = bool(cfg.tile_h or cfg.tile_w or cfg.tile_n)
        # several taps a chunk: the TMA form's chunk rows are tap-minor (packed_weight)
        minor = tma and kc > cgp
        wp = _derived_weight(w, ("grouped_mma", prob.groups, minor),
                             lambda t: gm.packed_weight(t.to(x.dtype), prob.groups, tap_minor=minor))  # fmt: skip
        bt = bias if bias is not None else y
        if launch is not None and launch.fast_ready:
            launch.fast((x, wp, bt, y))
            return
        bm, gb = cfg.block_m, cfg.block_n
        if bm < 16 or bm & (bm - 1) or gb < 1 or gb & (gb - 1):
            raise ValueError(f"grouped_mma config {cfg.describe()}: block_m (output pixels a program) must be a power "
                             "of two of at least 16 and block_n (groups a program) a power of two")  # fmt: skip
        if tma:
            self._run_tma(prob, x, wp, bias, bt, y, cfg, launch, (kgp, kc, chunks))
            return
        m = prob.n * prob.p * prob.q
        span = Depthwise.batch_span(x, y)
        args = (x, wp, bt, y, m, prob.h, prob.w, prob.p, prob.q, x.stride(0), x.stride(2), x.stride(3), x.stride(1),
                y.stride(0), y.stride(2), y.stride(3), y.stride(1))  # fmt: skip
        constexprs = lambda: dict(G=prob.groups, CG=prob.cg, KG=prob.kg, R=prob.r, S=prob.s, SH=prob.stride[0],  # noqa: E731
                                  SW=prob.stride[1], PH=prob.pad_h[0], PW=prob.pad_w[0], DH=prob.dilation[0],
                                  DW=prob.dilation[1], CGP=cgp, KGP=kgp, KC=kc, CHUNKS=chunks, BLOCK_M=bm, GB=gb,
                                  HAS_BIAS=bias is not None, ACT=prob.activation, PRECISION=_precision(prob),
                                  UPCAST=interpreting() and prob.dtype == torch.bfloat16, INT64=span >= 2**31)  # fmt: skip
        _run_kernel(launch, gm.grouped_mma_kernel, (cdiv(m, bm), cdiv(prob.groups, gb)), args, constexprs,
                    {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages})  # fmt: skip

    def _run_tma(self, prob, x, wp, bias, bt, y, cfg, launch, geom) -> None:
        """The TMA-box form: ``grouped_mma_tma_kernel`` over ``tile_n x tile_h x tile_w`` pixel blocks."""
        from . import grouped_mma as gm

        kgp, kc, chunks = geom
        bm, gb, tn, th, tw = cfg.block_m, cfg.block_n, cfg.tile_n, cfg.tile_h, cfg.tile_w
        reason = self.tma_reason(prob, gb)
        if reason is None and (min(tn, th, tw) < 1 or tn * th * tw != bm or max(tn, th, tw) > 256):
            reason = (f"tile_n x tile_h x tile_w = {tn}x{th}x{tw} must multiply to block_m = {bm} (powers of two, "
                      "each at most 256)")  # fmt: skip
        if reason is not None:
            raise ValueError(f"grouped_mma config {cfg.describe()}: {reason}")
        phased = prob.stride != (1, 1)
        box_c = gb * prob.cg
        if phased:
            x_desc = phase_descriptor(prob, x, [tn, th, tw, 1, box_c])
            rows = prob.h // prob.stride[0]
        else:
            x_desc = descriptor(x, [prob.n, prob.h, prob.w, prob.c], [x.stride(0), x.stride(2), x.stride(3), 1],
                                [tn, th, tw, box_c])  # fmt: skip
            rows = prob.h
        args = (x_desc, wp, bt, y, prob.n, prob.p, prob.q, rows, prob.c, y.stride(0), y.stride(2), y.stride(3),
                y.stride(1))  # fmt: skip
        constexprs = lambda: dict(G=prob.groups, CG=prob.cg, KG=prob.kg, R=prob.r, S=prob.s, SH=prob.stride[0],  # noqa: E731
                                  SW=prob.stride[1], PH=prob.pad_h[0], PW=prob.pad_w[0], DH=prob.dilation[0],
                                  DW=prob.dilation[1], KGP=kgp, KC=kc, CHUNKS=chunks, TN=tn, TH=th, TW=tw, GB=gb,
                                  PHASED=phased, HAS_BIAS=bias is not None, ACT=prob.activation,
                                  PRECISION=_precision(prob), UPCAST=interpreting() and prob.dtype == torch.bfloat16,
                                  INT64=Depthwise.batch_span(y) >= 2**31)  # fmt: skip
        grid = (cdiv(prob.n, tn) * cdiv(prob.p, th) * cdiv(prob.q, tw), cdiv(prob.groups, gb))
        _run_kernel(launch, gm.grouped_mma_tma_kernel, grid, args, constexprs,
                    {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages})  # fmt: skip


class Depthwise(Algorithm):
    """One input channel per group (depthwise, any channel multiplier): the direct kernel of
    ``conv/depthwise.py``, not a GEMM."""

    name = "depthwise"

    def supports(self, prob: ConvProblem) -> str | None:
        if prob.cg != 1:
            return f"{prob.cg} input channels per group: depthwise needs exactly 1"
        return None

    def heuristic_ok(self, prob: ConvProblem) -> bool:
        # 1-row images (conv1d) go to depthwise_rows, which timed faster there
        rows = ALGORITHMS["depthwise_rows"]
        return not rows.heuristic_ok(prob) or rows.supports(prob) is not None

    # Config fields in this algorithm's view: block_m = output columns (BLOCK_Q), block_n =
    # output channels (BLOCK_K), block_k = output rows per program (ROWS).
    @staticmethod
    def image_span(t: torch.Tensor) -> int:
        """Elements one image of a 4-D tensor spans in memory (the largest in-image offset + 1)."""
        return 1 + sum((t.shape[d] - 1) * abs(t.stride(d)) for d in range(1, t.dim()))

    @staticmethod
    def batch_span(*ts: torch.Tensor) -> int:
        """The most elements any of the 4-D tensors ``ts`` spans over all its images (an offset
        from its base past 2**31 needs 64-bit arithmetic)."""
        return max(Depthwise.image_span(t) + t.stride(0) * (t.shape[0] - 1) for t in ts)

    @staticmethod
    def _fits(v: int, cands: tuple[int, ...], waste: float) -> list[int]:
        """The candidate block sizes that cover ``v`` with at most ``waste`` masked lanes."""
        return [b for b in cands if cdiv(v, b) * b <= (1 + waste) * v] or [min(cands, key=lambda b: cdiv(v, b) * b)]

    def accepts(self, cfg: Config) -> bool:
        return cfg.block_k >= 1  # rows per program; older versions stored 0 here

    def configs(self, prob: ConvProblem) -> list[Config]:
        if interpreting():
            return [self.default_config(prob), Config(4, 16, 4, 2, 1)]
        # Measured on the H200 (ncu, 3x3 144 @56): the kernel is bound by L1 throughput, not
        # DRAM (L1 91% busy, DRAM 24%), since every tap re-reads its inputs from L1. So the
        # channel block comes first: 64 or 128 channels make each pixel's vector a whole
        # 128-byte line, where 32 leave half-lines (tools/depthwise_sweep.py: 87 against 93-107
        # us), even at the cost of a partly masked last block. Each thread holds one or two
        # 16-byte channel vectors; the weight tile shares the input's register layout only while
        # it has fewer elements than the program has threads (BLOCK_K < 32 * warps), else
        # Triton moves it through shared memory at every tap (tools/sass_mix.py).
        rows_max = _small(prob.p, 1)
        out = []
        for bk in self._fits(prob.k, (128, 64, 32, 16), 0.35)[:2]:
            for bq in self._fits(prob.q, (8, 16, 4, 32), 0.15)[:3]:
                for rows in (1, 2, 4, 8):
                    if rows > rows_max:
                        break
                    for per in (16, 8):
                        warps = rows * bq * bk // (32 * per)
                        programs = prob.n * cdiv(prob.p, rows) * cdiv(prob.q, bq) * cdiv(prob.k, bk)
                        # 1-8 warps, and enough programs for 4 per SM
                        if 1 <= warps <= 8 and bk < 32 * warps and (programs >= 4 * sm_count() or rows == 1):
                            out.append(Config(bq, bk, rows, warps, 1))
        # the largest tiles first: they amortise the most; the tuner times the few that remain
        out.sort(key=lambda c: (-c.block_m * c.block_n * c.block_k, c.num_warps))
        return out[:8] or [self.default_config(prob)]

    def default_config(self, prob: ConvProblem) -> Config:
        if interpreting():
            return Config(8, min(32, _small(prob.k, 16)), 2, 4, 1)
        bk = self._fits(prob.k, (64, 32, 16), 0.35)[0]
        bq = self._fits(prob.q, (8, 16, 4), 0.15)[0]
        rows = min(4, _small(prob.p, 1))
        # 8 elements per thread, and more threads than weight elements (see configs)
        warps = max(1, min(8, rows * bq * bk // 256))
        while bk >= 32 * warps and warps < 8:
            warps *= 2
        return Config(bq, bk, rows, warps, 1)

    def run(self, prob, x, w, bias, y, cfg, launch=None):
        from ..functional import _derived_weight

        # [K, 1, R, S] -> [R*S, K]: each tap's weights contiguous over channels, as the input is.
        # Kept in the input's dtype: fp32 weights (converted once here instead of at every tap)
        # were timed slower on the H200, 207-217 against 189 us on the causal conv1d and 83-87
        # against 76-84 us on a 3x3 layer (tools/depthwise_sweep.py): the kernel is bound by L1
        # traffic more than by the conversions.
        wt = _derived_weight(
            w, ("taps_by_channel",), lambda v: v.reshape(prob.k, prob.cg * prob.r * prob.s).t().contiguous()
        )
        if launch is not None and launch.fast_ready:
            launch.fast((x, wt, y if bias is None else bias, y))
            return
        kernel, grid, args, consts = self._launch_spec(prob, x, wt, bias, y, cfg)
        constexprs = lambda: dict(R=prob.r, S=prob.s, BLOCK_Q=cfg.block_m, BLOCK_K=cfg.block_n,  # noqa: E731
                                  HAS_BIAS=bias is not None, ACC_F64=prob.dtype == torch.float64,
                                  INT64=max(self.image_span(x), self.image_span(y)) >= 2**31, **consts)  # fmt: skip
        _run_kernel(launch, kernel, grid, args, constexprs, {"num_warps": cfg.num_warps, "num_stages": 1})

    def _launch_spec(self, prob, x, wt, bias, y, cfg):
        """(kernel, grid, runtime arguments, constexprs beyond ``run``'s common ones)."""
        from .depthwise import depthwise_kernel

        grid = (prob.n * cdiv(prob.p, cfg.block_k) * cdiv(prob.q, cfg.block_m) * cdiv(prob.k, cfg.block_n),)
        args = (x, wt, bias if bias is not None else y, y, prob.h, prob.w, prob.p, prob.q, prob.k, prob.kg,
                x.stride(0), x.stride(2), x.stride(3), x.stride(1), wt.stride(0),
                y.stride(0), y.stride(1), y.stride(2), y.stride(3), prob.stride[0], prob.stride[1],
                prob.pad_h[0], prob.pad_w[0], prob.dilation[0], prob.dilation[1])  # fmt: skip
        return depthwise_kernel, grid, args, {"ROWS": cfg.block_k}


class DepthwiseRows(Depthwise):
    """Depthwise (and narrow groups) with the inputs reused from registers
    (``depthwise.depthwise_rows_kernel``): a program walks a strip of column groups down the
    image, loads each input row once per column offset and adds it into every output (row in
    flight, column of the group) it touches. The tap kernel (``depthwise``) reads each input R*S
    times from L1, which bounds it on the H200 (ncu: L1 91% busy, DRAM 24%).

    Config fields: ``block_m`` = column groups (BLOCK_Q), ``block_n`` = channels (BLOCK_K),
    ``block_k`` = strip height (output rows), ``cols`` = output columns per group, ``vec`` =
    channels per thread's load (0: 16-byte vectors), ``num_stages`` s >= 2 = the input rows of
    the next s - 1 steps loaded ahead (the candidates take 2; deeper is for probes)."""

    name = "depthwise_rows"

    def supports(self, prob: ConvProblem) -> str | None:
        if prob.cg > 1 and (prob.groups == 1 or prob.cg > 8):
            return f"{prob.cg} input channels per group: the rows kernel takes depthwise and groups of at most 8"
        if prob.dilation[0] != 1:
            return f"vertical dilation {prob.dilation[0]}: the rows kernel needs 1"
        if prob.stride[0] > 2:
            return f"vertical stride {prob.stride[0]}: the rows kernel takes 1 or 2"
        if cdiv(prob.r, prob.stride[0]) > 16:
            return f"{prob.r} filter rows: the rows kernel keeps at most 16 output rows in registers"
        if not self.candidates(prob):
            return f"a {prob.r}x{prob.s} filter with {prob.cg} channels per group: its tiles would not fit in registers"
        return None

    def heuristic_ok(self, prob: ConvProblem) -> bool:
        # H200, session 10 (tools/depthwise_sweep.py, bf16, batch 64): with column groups and the
        # prefetch, faster than the tap kernel's best config on all eight layers of the sweep
        # (3x3: 1.3-1.4x; 7x7: 2.3-3.7x; causal conv1d: 1.4x). A depthwise problem it supports
        # takes it; wav2vec2's conv0 (one input channel, no groups) stays a GEMM, and narrow
        # groups (several input channels per group) are left to the tuner. float64 (the checking
        # dtype) stays on the tap kernel: a 7x7 rows tile of doubles spills (tools/sass_mix.py:
        # 255 registers and 600 bytes of stack).
        return prob.groups > 1 and prob.cg == 1 and prob.dtype != torch.float64

    def _rows(self, prob: ConvProblem, bq: int, bk: int) -> int:
        """Strip height: the tallest (whole columns first) that still gives 2 programs per SM."""
        base = prob.n * cdiv(prob.q, bq) * cdiv(prob.k, bk)
        rows = prob.p
        while rows > 8 and base * cdiv(prob.p, rows) < 2 * sm_count():
            rows = cdiv(rows, 2)
        return rows

    def configs(self, prob: ConvProblem) -> list[Config]:
        if interpreting():
            return [self.default_config(prob), Config(4, 16, 3, 2, 1)]
        # four: every candidate costs first-call tuning time
        cands = self.candidates(prob)[:4]
        return (cands + self.shorter_strip(prob, cands) + self.one_channel(prob)) or [self.default_config(prob)]

    #: programs of 4 warps an SM holds at the 3x3 tiles' ~128 registers (ncu, session 30)
    RESIDENT = 4

    def shorter_strip(self, prob: ConvProblem, cands: list[Config]) -> list[Config]:
        """For 3x3 (and smaller) filters, each candidate again with its strip halved, where its
        programs do not fill the SMs' resident slots.

        ncu on the H200 (session 30, MobileNetV2's 144 @56, batch 64): the tuned tile ran 384
        programs of 56-row strips, 2.9 per SM where 4 fit (25% theoretical occupancy, 17.8%
        achieved), at 40% of DRAM bandwidth. Halving the strip doubles the programs for 2 more
        input rows per strip (a 3x3 filter's halo). The strip height is a run-time argument, so
        this is another timing of the same compiled kernel, not another compile. Untimed: the
        tuner decides."""
        if prob.r * prob.s > 9:
            return []
        out = []
        for cfg in cands:
            rows = cfg.block_k
            programs = (
                prob.n * cdiv(prob.p, rows) * cdiv(prob.q, cfg.block_m * max(1, cfg.cols)) * cdiv(prob.k, cfg.block_n)
            )
            if rows >= 16 and programs < self.RESIDENT * sm_count():
                out.append(replace(cfg, block_k=cdiv(rows, 2)))
        return out

    def one_channel(self, prob: ConvProblem) -> list[Config]:
        """For depthwise filters larger than 3x3, one or two more candidates: one channel per
        thread (``vec`` 1, each thread's 49 weights held).

        The first: at the fewest masked columns, with the channel block that masks the fewest
        channels. The H200 (session 22, ``tools/depthwise_sweep.py``, bf16, batch 64, warm L2)
        timed it against the 2-channel tiles the tuner offered: ConvNeXt's 96 @56 7x7 79 us
        (4x32x56, 7 columns) against 92 us for the best of those, 384 @14 29 us (2x64x14, 7
        columns); twice as many threads hide the loads' latency that a 2-channel tile's 7x7
        strip waits on. Session 23's grouped suite (tuned): 2.42 / 2.36 / 2.07x cuDNN on 96 @56,
        192 @28, 384 @14, but 768 @7 only 1.59x at 2x64x7 with 4 columns, 8 for the image's 7.

        The second, where it differs: the tile of 128 lanes that masks the fewest (column,
        channel) lanes over the block sizes 128, 64 and 32, columns and channels together. On
        768 @7 that is one column group of all 7 columns and 128 channels: 384 programs of 4
        warps, one wave at 3 programs per SM (167 registers), no masked column, where 2x64x7
        runs 768 programs in 2.3 waves with one column in 8 masked. Untimed: the tuner decides.
        Empty elsewhere, where 2-channel tiles won (session 10)."""
        if prob.r * prob.s <= 9 or prob.cg != 1:
            return []
        held = prob.r * prob.s  # one channel: every tap's weight stays in a register
        fit = [c for c in range(1, 9) if self._regs(prob, c, 1, held, True) <= self.REG_BUDGET]
        if not fit:
            return []

        def tile(bk: int) -> Config:
            bq = 128 // bk
            best = min(fit, key=lambda c: (cdiv(prob.q, bq * c) * bq * c, -c))
            return Config(bq, bk, self._rows(prob, bq * best, bk), 4, 2, cols=best, vec=1)

        def lanes(cfg: Config) -> int:
            cols = cfg.block_m * cfg.cols
            return cdiv(prob.q, cols) * cols * cdiv(prob.k, cfg.block_n) * cfg.block_n

        first = tile(min(self._fits(prob.k, (64, 32), 0.35)[:2], key=lambda b: cdiv(prob.k, b) * b))
        fewest = min((tile(bk) for bk in (128, 64, 32)), key=lanes)
        return [first] if lanes(fewest) >= lanes(first) else [first, fewest]

    #: estimated registers (accumulators + weights held) a candidate may use: the compiler adds
    #: 50-100 for addresses and loads (tools/sass_mix.py, 7x7: 154 estimated -> 254 used, and
    #: 210 -> the 255 limit)
    REG_BUDGET = 160

    def candidates(self, prob: ConvProblem, wide: bool = False) -> list[Config]:
        """Tiles of 4 warps, the likeliest first: each thread holds 2 channels (``vec``) of
        ``cols`` neighbouring output columns for every output row in flight, and loads the next
        step's input rows while it computes (2 stages).

        Measured on the H200 (session 10, ``tools/depthwise_sweep.py``, bf16, batch 64): 2-channel
        loads with the prefetch were the fastest family on every layer of the sweep (the 7x7 tap
        weights then fit in registers; 1-, 4- and 8-channel loads were 5-60% slower); 7x7 layers
        ran fastest at 2 columns (3-4 columns: 15-40% slower), 3x3 layers at 4-8 columns with the
        fewest masked columns, and a channel block that divides the channels mattered (96 channels:
        91.5 us at 32 against 122 us at 64). ``wide`` lists every family, column count and
        stage count that fits, for the sweep.
        """
        out = []
        # narrow groups gather x per element (a lane's channel is (k // K/g) * C/g + c'): 16-byte
        # tiles (weights loaded per step) spilled there (tools/sass_mix.py), 1-channel ones fit
        fallback = (1, 1) if prob.cg > 1 else (0, 8)
        for vec, per in ((2, 2), (0, 8), (1, 1), (4, 4)) if wide else ((2, 2), fallback):
            if out and not wide:  # 16-byte loads (weights loaded per step) only where 2-channel tiles do not fit
                break
            bks = self._fits(prob.k, (64, 32) if vec else (64, 32, 16), 0.35)[:2]
            for bk in sorted(bks, key=lambda b: cdiv(prob.k, b) * b):  # fewest masked channels first
                bq = 128 * per // bk
                held = prob.cg * prob.r * prob.s * per if self.preload(prob, Config(bq, bk, 1, vec=vec)) else 0

                fit = [c for c in range(1, 9) if self._regs(prob, c, per, held, vec > 0) <= self.REG_BUDGET]
                if not fit:
                    continue
                best = self._widest_within(prob.q, bq, fit)
                if wide:
                    cols = sorted(fit, reverse=True)
                elif prob.r * prob.s > 9:
                    cols = sorted({min(2, fit[-1]), best}, key=lambda c: c != min(2, fit[-1]))
                else:
                    # 3x3: the fewest masked columns only. The widest fitting strip (8 columns)
                    # lost on every 3x3 layer of the H200's session-12 tuner logs (12 layers,
                    # stride 1 and 2: 1.05-4.6x slower than the fewest-masked count), and each
                    # candidate is a 2-9 s compile on a shape's first call (issue 4: 3 s)
                    cols = [best]
                for c in cols:
                    for stages in (2, 1) if wide and vec else (2,) if vec else (1,):
                        out.append(Config(bq, bk, self._rows(prob, bq * c, bk), 4, stages, cols=c, vec=vec))
        return out

    def default_config(self, prob: ConvProblem) -> Config:
        if interpreting():
            return Config(8, min(32, _small(prob.k, 16)), 4, 4, 1)
        return self.candidates(prob)[0]

    @staticmethod
    def _widest_within(q: int, bq: int, fit: list[int], slack: float = 0.02) -> int:
        """The widest column count of ``fit`` whose tiled width (``bq * c`` columns per program)
        is within ``slack`` of the fewest masked columns. An image row of 7-112 columns is
        tiled coarsely, so this is the fewest-masked count there; a long sequence (causal conv1d,
        8195 outputs) masks a fraction of a percent at any width, and there 8 columns ran
        138.9 us against 172.6 us for the 5 that mask least (H200, sessions 10 and 25)."""
        tiled = {c: cdiv(q, bq * c) * bq * c for c in fit}
        least = min(tiled.values())
        return max(c for c in fit if tiled[c] <= least * (1 + slack))

    @staticmethod
    def _regs(prob: ConvProblem, cols: int, per: int, held: int, prefetch: bool) -> int:
        """Estimated registers of ``cols`` columns per group at ``per`` channels per thread with
        ``held`` weight registers: accumulators, weights, and for narrow groups the prefetched
        loads of each input channel of the group."""
        slots = cdiv(prob.r, prob.stride[0])
        ahead = prob.cg * prob.stride[0] * ((cols - 1) * prob.stride[1] + (prob.s - 1) * prob.dilation[1] + 1)
        # (the prefetched loads of a narrow group are 16-bit gathers, a register each, and took
        # more than their count: cg 4, 3x3, 2-5 columns: 168-255 registers in tools/sass_mix.py)
        regs = slots * cols * per + held + (ahead * per * 3 // 2 if prob.cg > 1 and prefetch else 0)
        return regs * (2 if prob.dtype == torch.float64 else 1)

    def _launch_spec(self, prob, x, wt, bias, y, cfg):
        from .depthwise import depthwise_rows_kernel, depthwise_rows_kernel_gl

        rows = max(1, cfg.block_k)
        cols = max(1, cfg.cols)
        grid = (prob.n * cdiv(prob.p, rows) * cdiv(prob.q, cfg.block_m * cols) * cdiv(prob.k, cfg.block_n),)
        args = (x, wt, bias if bias is not None else y, y, prob.h, prob.w, prob.p, prob.q, prob.k, prob.kg, rows,
                x.stride(0), x.stride(2), x.stride(3), x.stride(1), wt.stride(0),
                y.stride(0), y.stride(1), y.stride(2), y.stride(3), prob.pad_h[0], prob.pad_w[0])  # fmt: skip
        consts = {"CG": prob.cg, "STRIDE_H": prob.stride[0], "STRIDE_W": prob.stride[1], "DIL_W": prob.dilation[1],
                  "COLS": cols, "VEC": cfg.vec, "PRELOAD": self.preload(prob, cfg),
                  "PREFETCH": max(0, cfg.num_stages - 1), "TRIM": self.trim(prob, rows)}  # fmt: skip
        layout = self.gluon_layout(prob, cfg, x, y, wt, bias)
        if layout is None:
            return depthwise_rows_kernel, grid, args, consts
        return depthwise_rows_kernel_gl, grid, args, {**consts, **layout}

    @staticmethod
    def gluon_layout(prob: ConvProblem, cfg: Config, x: torch.Tensor, y: torch.Tensor, wt: torch.Tensor,
                     bias: torch.Tensor | None) -> dict[str, int] | None:  # fmt: skip
        """The layout constexprs of ``depthwise_rows_kernel_gl`` (the rows kernel with its layout
        given, compiled without Triton's coalescing pass), or None where the Triton entry runs.

        The layout is the one that pass picks for the kernel's [BLOCK_Q, BLOCK_K] tensors: ``vec``
        channels per thread (``VEC`` makes them the contiguous runs the pass sees), lanes and then
        warps across the channels first (``BlockedEncodingAttr::get``'s order). It is given only
        where that choice is known not to depend on the pass's analysis: depthwise with multiplier 1
        (with a multiplier, ``k // MULT`` hides the channels' contiguity and the pass lays the
        loads out column-major: other SASS), ``vec`` of 1, 2 or 4 with ``vec`` elements a thread
        in the tile, 16-byte-aligned tensors, channel stride 1 and every other stride of x and y
        (and the weight's tap stride) a multiple of 16 elements (the arguments Triton specialises
        as such), 32-bit offsets. ``tests/test_depthwise_gluon.py`` compiles both entries for
        sm_90 and requires the same SASS. ``CONVGEMM_DEPTHWISE_GLUON=0`` keeps the Triton entry
        everywhere. Off under the interpreter, which cannot run Gluon, and without Gluon."""
        bias = [bias] if bias is not None else []
        return DepthwiseRows.gluon_blocked(prob, cfg, x, y, [wt, *bias], (wt.stride(0),))

    @staticmethod
    def gluon_blocked(prob: ConvProblem, cfg: Config, x: torch.Tensor, y: torch.Tensor, others=(),
                      strides=()) -> dict[str, int] | None:  # fmt: skip
        """The rule both rows kernels' Gluon entries share (``gluon_layout`` here and
        ``backward.DepthwiseWgrad.gluon_layout``): the ``blocked`` layout constexprs for a tile
        over the NHWC images ``x`` and ``y``, or None where the Triton entry runs. ``others``:
        more tensors that must be 16-byte aligned; ``strides``: more strides that must be
        multiples of 16 elements."""
        from .depthwise import gluon

        if interpreting() or gluon is None or os.environ.get("CONVGEMM_DEPTHWISE_GLUON", "1") == "0":
            return None
        if prob.cg != 1 or prob.kg != 1 or cfg.vec not in (1, 2, 4) or cfg.vec * prob.dtype.itemsize > 16:
            return None
        warps, bk = cfg.num_warps, cfg.block_n
        if cfg.block_m * bk != 32 * warps * cfg.vec:
            # the pass gives a thread as many channels as the tile has elements a thread (up to 16
            # bytes, and up to the contiguity it sees: vec, or the whole block at vec 1): vec only
            # when that count is vec, as in every tile configs() makes
            return None
        if max(DepthwiseRows.image_span(x), DepthwiseRows.image_span(y)) >= 2**31:
            return None  # 64-bit offsets: Triton's TTIR passes, which Gluon skips, shape that address code
        if any(t.data_ptr() % 16 for t in (x, y, *others)) or x.stride(1) != 1 or y.stride(1) != 1:
            return None
        if any(v % 16 for v in (*(t.stride(d) for t in (x, y) for d in (0, 2, 3)), *strides)):
            return None
        return DepthwiseRows.blocked(bk, cfg.vec, warps)

    @staticmethod
    def blocked(bk: int, vec: int, warps: int) -> dict[str, int]:
        """The Gluon entries' [BLOCK_Q, BLOCK_K] layout constexprs: ``BlockedEncodingAttr::get``
        over the tile, order [1, 0], ``vec`` channels a thread: the channels take lanes (then
        warps) up to BLOCK_K / vec threads, the columns the rest."""
        threads = min(warps * 32, max(1, bk // vec))
        tpw_k = min(threads, 32)
        wpc_k = max(1, min(threads // tpw_k, warps))
        return {"SPT_K": vec, "TPW_Q": 32 // tpw_k, "TPW_K": tpw_k, "WPC_Q": warps // wpc_k, "WPC_K": wpc_k}

    @staticmethod
    def trim(prob: ConvProblem, rows: int) -> bool:
        """Whether the strip's first and last M - 1 steps are unrolled with their dead slots
        skipped (forward and wgrad rows kernels): only with ``CONVGEMM_DEPTHWISE_TRIM=1``, and
        then for 4 or more rows in flight (7x7 at 14 rows: 30% fewer multiply-adds; 3x3 would
        lose a program per SM, 168 against 128 registers, to save 4-12%).

        Off by default since session 12: the unrolled steps made a 7x7 config's sm_90 compile
        60 s instead of 7 (255 registers instead of 223), and the H200 timed 51.8 s of first-call
        tuning on ConvNeXt's 96 @56 layer; its speed was never timed on a GPU."""
        if os.environ.get("CONVGEMM_DEPTHWISE_TRIM", "0") != "1":
            return False
        slots = cdiv(prob.r, prob.stride[0])
        return slots >= 4 and rows >= slots - 1

    @staticmethod
    def preload(prob: ConvProblem, cfg: Config) -> bool:
        """Whether every tap's weights stay in registers for the whole strip: up to 3x3 always
        (9 vectors per thread), larger filters when a thread holds few channels (``vec``)."""
        return prob.cg * prob.r * prob.s <= 9 or 0 < cfg.vec <= 2


class Head1x1(Algorithm):
    """Tiny 1x1 heads (K <= 16 output channels over C <= 32 input channels, groups = 1): not a
    GEMM, a direct kernel (``conv/head.py``) that reads each pixel's channels once and forms the
    K dot products on the CUDA cores. Any stride, padding, dtype and output layout.

    Config fields in this algorithm's view: block_m = output pixels per program, block_n = K
    rounded up to a power of two, block_k = C rounded up likewise."""

    name = "head_1x1"
    fuses_activation = True
    writes_nchw = True

    def supports(self, prob: ConvProblem) -> str | None:
        from .head import MAX_C, MAX_K

        if prob.r != 1 or prob.s != 1:
            return f"a {prob.r}x{prob.s} filter: head_1x1 takes 1x1 filters only"
        if prob.groups != 1:
            return f"groups = {prob.groups}: head_1x1 takes dense layers (groups = 1)"
        if prob.k > MAX_K or prob.c > MAX_C:
            return (f"K = {prob.k}, C = {prob.c}: head_1x1 takes K <= {MAX_K} and C <= {MAX_C} "
                    "(wider layers keep the tensor cores busy as GEMMs)")  # fmt: skip
        return None

    def heuristic_ok(self, prob: ConvProblem) -> bool:
        return False  # untimed until a GPU has run it (benchmarks/NOTES.md, session 11)

    @staticmethod
    def _p2(v: int) -> int:
        return 1 << (v - 1).bit_length()

    @staticmethod
    def _flat(prob: ConvProblem) -> bool:
        """Whether output pixel m reads input pixel m and writes NHWC row m (``run`` checks the
        tensors' strides; this is what ``configs`` can know)."""
        return prob.stride == (1, 1) and prob.is_1x1 and prob.input_dense and prob.channels_last_out

    def _fits(self, prob: ConvProblem, bp: int, warps: int) -> bool:
        """The register estimate: input values per thread (the pixel tile lives in registers as
        fp32). sm90-compile, bf16: 64 values take 64-168 registers when pixels are flat, 237
        when each pixel's (n, p, q) is computed; 32 then take 128."""
        return bp * self._p2(prob.c) // (32 * warps) <= (64 if self._flat(prob) else 32)

    #: pixel blocks the tuner tries (largest first), and where the untuned choice starts
    _BLOCKS = (1024, 512, 256, 128, 64)
    _DEFAULT_BLOCK = 512

    def _programs(self, prob: ConvProblem, bp: int) -> int:
        return cdiv(prob.n * prob.p * prob.q, bp)

    def configs(self, prob: ConvProblem) -> list[Config]:
        if interpreting():
            return [self.default_config(prob), replace(self.default_config(prob), block_m=16)]
        out = []
        for bp in self._BLOCKS:
            for warps in (4, 8):
                # no spills, and programs for every SM twice
                if self._fits(prob, bp, warps) and self._programs(prob, bp) >= 2 * sm_count():
                    out.append(Config(bp, self._p2(prob.k), self._p2(prob.c), warps, 1))
        return out[:6] or [self.default_config(prob)]

    def default_config(self, prob: ConvProblem) -> Config:
        if interpreting():
            return Config(32, self._p2(prob.k), self._p2(prob.c), 4, 1)
        bp = self._DEFAULT_BLOCK
        while bp > 32 and not self._fits(prob, bp, 4):
            bp //= 2
        return Config(bp, self._p2(prob.k), self._p2(prob.c), 4, 1)

    def run(self, prob, x, w, bias, y, cfg, launch=None):
        from .head import head_1x1_kernel

        w2 = w[:, :, 0, 0]  # [K, C], a view: a weight changed in place is always seen
        if launch is not None and launch.fast_ready:
            launch.fast((x, w2, y if bias is None else bias, y))
            return
        m = prob.n * prob.p * prob.q
        flat_x = (prob.stride == (1, 1) and prob.is_1x1 and prob.input_dense and x.stride(2) == prob.w * x.stride(3)
                  and x.stride(0) == prob.h * x.stride(2))  # fmt: skip
        flat_y = (
            y.stride(1) == 1
            and y.stride(3) == prob.k
            and y.stride(2) == prob.q * prob.k
            and (y.stride(0) == prob.p * prob.q * prob.k or prob.n == 1)
        )
        span = Depthwise.batch_span(x, y)
        args = (x, w2, bias if bias is not None else y, y, m, prob.p * prob.q, prob.q, prob.h, prob.w, prob.c, prob.k,
                x.stride(0), x.stride(2), x.stride(3), w2.stride(0), w2.stride(1),
                y.stride(0), y.stride(1), y.stride(2), y.stride(3), prob.stride[0], prob.stride[1],
                prob.pad_h[0], prob.pad_w[0])  # fmt: skip
        constexprs = lambda: dict(BLOCK_P=cfg.block_m, CP=cfg.block_k, KP=cfg.block_n, FLAT_X=flat_x,  # noqa: E731
                                  FLAT_Y=flat_y, HAS_BIAS=bias is not None, ACT=prob.activation,
                                  ACC_F64=prob.dtype == torch.float64, INT64=span >= 2**31)  # fmt: skip
        _run_kernel(launch, head_1x1_kernel, (cdiv(m, cfg.block_m),), args, constexprs,
                    {"num_warps": cfg.num_warps, "num_stages": 1})  # fmt: skip


class HeadPlanes(Head1x1):
    """``head_1x1`` on an NCHW input read as it is (``head.head_1x1_planes_kernel``): a program
    reads ``block_m`` pixels of one image from each of the C channel planes (coalesced rows) and
    writes K runs of the NCHW output, with no transposes of x before or y after. 1x1 filters,
    stride 1, no padding (output pixel i of a plane reads input pixel i); K <= 16, C <= 32; any
    dtype. The same config fields as ``head_1x1``."""

    name = "head_1x1_nchw"
    reads_nchw = True

    def supports(self, prob: ConvProblem) -> str | None:
        if not (prob.input_nchw and prob.input_tma_ok):
            return ("needs an NCHW input kept as it is (pixels of a plane back to back, 16-byte aligned planes); "
                    "channels_last input runs on head_1x1")  # fmt: skip
        if not (prob.is_1x1 and prob.stride == (1, 1)):
            return (f"a {prob.r}x{prob.s} filter, stride {prob.stride}, padding {prob.pad_h}x{prob.pad_w}: it reads "
                    "whole planes (1x1, stride 1, no padding); use head_1x1 on channels_last input")  # fmt: skip
        return super().supports(prob)

    def heuristic_ok(self, prob: ConvProblem) -> bool:
        return True  # one pass over the planes, nothing padded; implicit_gemm_tma_nchw pads K to 64 rows

    # a program's pixels come from one image (grid axis 1): its plane, not the batch, is split
    _BLOCKS = (2048, 1024, 512, 256, 128)
    _DEFAULT_BLOCK = 1024

    def _programs(self, prob: ConvProblem, bp: int) -> int:
        return prob.n * cdiv(prob.h * prob.w, bp)

    def _fits(self, prob: ConvProblem, bp: int, warps: int) -> bool:
        # the [KP, block_m] fp32 accumulator and one input run per thread (no spills at 64)
        return bp * (self._p2(prob.k) + 1) // (32 * warps) <= 64

    def run(self, prob, x, w, bias, y, cfg, launch=None):
        """``x``: the NCHW input (planes of H*W pixels back to back); ``y``: an NCHW output likewise."""
        from .head import head_1x1_planes_kernel

        w2 = w[:, :, 0, 0]  # [K, C], a view: a weight changed in place is always seen
        if launch is not None and launch.fast_ready:
            launch.fast((x, w2, y if bias is None else bias, y))
            return
        hw = prob.h * prob.w
        for name, t in (("x", x), ("y", y)):
            if t.stride(3) != 1 or (t.shape[2] > 1 and t.stride(2) != t.shape[3]):
                raise ValueError(f"head_1x1_nchw: {name} of strides {tuple(t.stride())} is not NCHW with whole "
                                 "planes; make it contiguous or use algorithm='auto'")  # fmt: skip
        span = max(x.stride(0) * (prob.n - 1) + x.stride(1) * (prob.c - 1) + hw,
                   y.stride(0) * (prob.n - 1) + y.stride(1) * (prob.k - 1) + hw)  # fmt: skip
        args = (x, w2, bias if bias is not None else y, y, hw, prob.c, prob.k, x.stride(0), x.stride(1),
                w2.stride(0), w2.stride(1), y.stride(0), y.stride(1))  # fmt: skip
        constexprs = lambda: dict(BLOCK_P=cfg.block_m, CP=cfg.block_k, KP=cfg.block_n,  # noqa: E731
                                  HAS_BIAS=bias is not None, ACT=prob.activation,
                                  ACC_F64=prob.dtype == torch.float64, INT64=span >= 2**31)  # fmt: skip
        _run_kernel(launch, head_1x1_planes_kernel, (cdiv(hw, cfg.block_m), prob.n), args, constexprs,
                    {"num_warps": cfg.num_warps, "num_stages": 1})  # fmt: skip


class DepthwiseNchw(Algorithm):
    """Depthwise layers (one input channel per group, any channel multiplier) on an NCHW input read
    as it is (``depthwise.depthwise_planes_kernel``): a stencil per channel plane, each tap's
    tile of a plane loaded as coalesced runs of pixels, the output written NCHW; no transposes.
    Any stride, padding, dilation and dtype.

    Config fields in this algorithm's view: block_m = output columns per tile (BLOCK_W),
    block_k = output rows per tile (BLOCK_H), block_n = output planes per program (BLOCK_C)."""

    name = "depthwise_nchw"
    reads_nchw = True
    writes_nchw = True
    fuses_activation = True

    def supports(self, prob: ConvProblem) -> str | None:
        if prob.groups == 1 or prob.cg != 1:
            return (f"groups = {prob.groups} with {prob.cg} input channels per group: depthwise layers only "
                    "(one input channel per group)")  # fmt: skip
        if not prob.input_nchw:
            return ("needs an NCHW input (columns contiguous) kept as it is; channels_last input runs on "
                    "depthwise_rows or depthwise")  # fmt: skip
        return None

    def keeps_nchw(self, prob: ConvProblem) -> bool:
        # H200, session 32 (all suite on NCHW input): every strided layer gained over the NHWC rows
        # kernel through the transposes (MobileNetV2 576 @14 s2 26.9 -> 19.2 us, 96 @112 s2
        # 157.8 -> 131.2), but stride-1 layers lost up to 4.6x (ConvNeXt's 7x7: R*S loads per
        # output from L1, as the NHWC tap kernel lost), so those keep the transposes
        return max(prob.stride) > 1

    def _tile(self, prob: ConvProblem, target: int) -> tuple[int, int, int]:
        """(columns, rows, planes) of about ``target`` outputs: whole output rows up to 64
        columns, as many rows as the plane has, the rest in planes (small late-stage planes)."""
        bw = min(64, max(8, _small(prob.q, 1)))
        bh = min(_small(prob.p, 1), max(1, target // bw))
        bc = min(16, _small(prob.k, 1), max(1, target // (bw * bh)))
        return bw, bh, bc

    def configs(self, prob: ConvProblem) -> list[Config]:
        if interpreting():
            return [self.default_config(prob)]
        out = []
        for target, warps in ((256, 4), (512, 4), (1024, 4), (1024, 8)):
            bw, bh, bc = self._tile(prob, target)
            cfg = Config(bw, bc, bh, warps, 1)
            if cfg not in out:
                out.append(cfg)
        return out

    def default_config(self, prob: ConvProblem) -> Config:
        bw, bh, bc = self._tile(prob, 64 if interpreting() else 512)
        return Config(bw, bc, bh, 4, 1)

    def run(self, prob, x, w, bias, y, cfg, launch=None):
        """``x``: the NCHW input; ``y``: the output, any strides (NCHW when the input is)."""
        from .depthwise import depthwise_planes_kernel

        if launch is not None and launch.fast_ready:
            launch.fast((x, w, y if bias is None else bias, y))
            return
        bw, bh, bc = cfg.block_m, cfg.block_k, cfg.block_n
        tiles_q = cdiv(prob.q, bw)
        tiles = cdiv(prob.p, bh) * tiles_q
        k_blocks = cdiv(prob.k, bc)
        span = Depthwise.batch_span(x, y)
        args = (x, w, bias if bias is not None else y, y, prob.h, prob.w, prob.k, prob.p, prob.q, prob.kg,
                x.stride(0), x.stride(1), x.stride(2), x.stride(3), w.stride(0), w.stride(2), w.stride(3),
                y.stride(0), y.stride(1), y.stride(2), y.stride(3), prob.stride[0], prob.stride[1],
                prob.pad_h[0], prob.pad_w[0], prob.dilation[0], prob.dilation[1], tiles_q, tiles, k_blocks)  # fmt: skip
        constexprs = lambda: dict(R=prob.r, S=prob.s, BLOCK_C=bc, BLOCK_H=bh, BLOCK_W=bw,  # noqa: E731
                                  HAS_BIAS=bias is not None, ACT=prob.activation,
                                  ACC_F64=prob.dtype == torch.float64, INT64=span >= 2**31)  # fmt: skip
        _run_kernel(launch, depthwise_planes_kernel, (prob.n * k_blocks * tiles,), args, constexprs,
                    {"num_warps": cfg.num_warps, "num_stages": 1})  # fmt: skip


class NarrowTma(Algorithm):
    """Few output channels (K <= 64, groups 1) on the TMA kernel with output *pixels* on M.

    ``implicit_gemm_tma`` puts the output channels on M, where a wgmma tile has 64 rows: a
    3- or 16-channel layer uses 5-25% of it. Here A is the NHWC input box as [pixels, channels]
    (``conv.loaders.tma_im2col_a_load``), B the KRSC weight (16-64 columns, the channels past K
    zero-filled by the copy engine), and the tile is stored by pointers with y's strides
    (``tile_ptr_store``: any channel count, NHWC or NCHW). Heads, RGB outputs, and dgrad into few
    channels (``functional._dgrad_by_subpixel``, stride-1 dgrad of a first layer) run as such
    convolutions. Stride 1, or a strided 1x1 kernel (the subsampled view)."""

    name = "narrow_tma"
    fuses_activation = True
    writes_nchw = True

    def supports(self, prob: ConvProblem) -> str | None:
        if prob.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            return f"TMA kernels take fp16, bf16 or fp32, not {prob.dtype}"
        if not prob.tma_ok:
            return "the device has no TMA (needs compute capability >= 9.0)"
        if not prob.input_tma_ok:
            return "the NHWC input is not 16-byte aligned (base, strides, or C/groups * itemsize)"
        if prob.groups != 1:
            return f"groups = {prob.groups}: dense layers only (groups = 1)"
        if prob.k > 64:
            return f"K = {prob.k} output channels: over 64, implicit_gemm_tma's channel tiles are full"
        if strided_taps(prob):
            return f"stride {prob.stride} with a {prob.r}x{prob.s} kernel: stride 1, or a strided 1x1 kernel"
        return None

    def heuristic_ok(self, prob: ConvProblem) -> bool:
        return False  # tuned only

    @staticmethod
    def _bn(prob: ConvProblem) -> int:
        return max(16, 1 << (prob.k - 1).bit_length())

    def configs(self, prob: ConvProblem) -> list[Config]:
        if interpreting():
            return [self.default_config(prob)]
        bn, bk = self._bn(prob), _tma_bk(prob)
        out = []
        # (pixels, warps, stages, persistent): one warpgroup per 64 pixel rows, or a 128-row
        # tile on one warpgroup (two m64 instructions per step)
        for bm, warps, stages, per in ((64, 4, 4, 0), (128, 4, 3, 0), (128, 8, 3, 0), (128, 4, 4, 1), (256, 8, 3, 1)):
            _, tn, th, tw = spatial_tiles(prob, bm)[0]
            out.append(Config(bm, bn, bk, warps, stages, tile_n=tn, tile_h=th, tile_w=tw, persistent=per))
        return out

    def default_config(self, prob: ConvProblem) -> Config:
        bn, bk = self._bn(prob), _tma_bk(prob)
        bm, warps, stages = (32, 4, 1) if interpreting() else (128, 4, 3)
        _, tn, th, tw = spatial_tiles(prob, bm)[0]
        return Config(bm, bn, bk, warps, stages, tile_n=tn, tile_h=th, tile_w=tw)

    def run(self, prob, x, w, bias, y, cfg, launch=None):
        if launch is not None and launch.fast_ready:
            cp, in_place = launch.extra
            wp = w if in_place else krsc_weight(w, cp)
            launch.fast((x, wp, y, y if bias is None else bias, y, y))
            return
        cp = channel_pad(prob.cg, cfg.block_k)
        wp = krsc_weight(w, cp).view(prob.k, -1)
        x_desc = input_descriptor(prob, x, [cfg.tile_n, cfg.tile_h, cfg.tile_w, 1, cfg.block_k])
        w_desc = descriptor(wp, [prob.k, 1, wp.shape[1]], [wp.stride(0), wp.shape[1], 1], [cfg.block_n, 1, cfg.block_k])
        c_tiles = cp // cfg.block_k
        a_args = (prob.p, prob.q, prob.pad_h[0], prob.pad_w[0], prob.dilation[0], prob.dilation[1], prob.s, c_tiles)
        c_args = (y, y.stride(0), y.stride(1), y.stride(2), y.stride(3), prob.n, prob.p, prob.q, prob.k,
                  cfg.tile_n, cfg.tile_h, cfg.tile_w)  # fmt: skip
        num_m = cdiv(prob.n, cfg.tile_n) * cdiv(prob.p, cfg.tile_h) * cdiv(prob.q, cfg.tile_w)
        num_n = cdiv(prob.k, cfg.block_n)
        fns = (cl.tma_im2col_init, cl.tma_im2col_a_load, mm.desc_init, mm.desc_b_load, cl.tile_ptr_store)
        _launch(launch, (num_m * num_n, 1, 1), (x_desc, a_args), (w_desc, (0,)), (None, c_args), bias, y, prob.k,
                num_m, num_n, prob.r * prob.s * c_tiles, cfg, fns, False, prob, act=prob.activation)  # fmt: skip
        if launch is not None:
            launch.extra = (cp, wp.data_ptr() == w.data_ptr())


class NarrowFold(Algorithm):
    """Few output channels with a filter wider than one column (``conv/fold.py``): an R x 1
    convolution of the input into ``S * K`` fp32 channels on ``narrow_tma`` (the input read R
    times, not R * S), then ``width_fold_kernel`` sums each output column's S taps, adds the bias
    and the activation and writes y with any strides. For RGB dgrads (a forward convolution of dy
    into 3 channels) and narrow heads, where ``narrow_tma`` is bound by its R * S input boxes.
    Stride 1 along H (any stride and dilation along W); ``S * K`` at most 64."""

    name = "narrow_fold"
    fuses_activation = True
    writes_nchw = True
    #: most folded channels: ``narrow_tma`` takes up to 64 output channels
    MAX_FOLDED = 64

    def reduced(self, prob: ConvProblem) -> ConvProblem:
        """The R x 1 problem: ``S * K`` output channels over the input's own width, no bias or
        activation (the fold applies them)."""
        return replace(
            prob, k=prob.s * prob.k, s=1, stride=(prob.stride[0], 1), pad_w=(0, 0),
            dilation=(prob.dilation[0], 1), has_bias=False, activation="",
        )  # fmt: skip

    def supports(self, prob: ConvProblem) -> str | None:
        if prob.groups != 1:
            return f"groups = {prob.groups}: the column fold takes dense layers (groups = 1)"
        if prob.s == 1:
            return "a filter one column wide has nothing to fold"
        if prob.s * prob.k > self.MAX_FOLDED:
            return f"S*K = {prob.s * prob.k} folded channels: over {self.MAX_FOLDED}, narrow_tma's limit"
        if prob.dtype not in (torch.float16, torch.bfloat16):
            return f"the column fold runs on the TMA kernel in fp16 or bf16, not {prob.dtype}"
        if prob.stride[0] != 1 and prob.r != 1:
            return f"vertical stride {prob.stride[0]} with {prob.r} filter rows: the R x 1 convolution takes stride 1"
        return _NARROW.supports(self.reduced(prob))

    def heuristic_ok(self, prob: ConvProblem) -> bool:
        return False  # tuned only

    def configs(self, prob: ConvProblem) -> list[Config]:
        out = _NARROW.configs(self.reduced(prob))
        if not interpreting():
            from . import row_ring

            if row_ring.enabled() and row_ring.fits(self.reduced(prob)) is None:
                out += row_ring.configs(prob, self.reduced(prob))
        return out

    def default_config(self, prob: ConvProblem) -> Config:
        return _NARROW.default_config(self.reduced(prob))

    def run(self, prob, x, w, bias, y, cfg, launch=None):
        from .fold import fold_weight, width_fold_kernel

        rp = self.reduced(prob)
        sk = rp.k
        if cfg.ring and cfg.fused:  # one kernel, no intermediate
            from .row_ring import row_ring_fold

            row_ring_fold(x, w, bias, y, prob.pad_h[0], prob.pad_w[0], prob.activation, tw=cfg.block_m, rows=cfg.ring,
                          slots=cfg.num_stages, num_warps=cfg.num_warps, launch=launch)  # fmt: skip
            return
        # [N, P, W, S*K] dense: the fold reads each pixel's S*K partial sums as one run
        u = torch.empty((prob.n, rp.p, prob.w, sk), dtype=torch.float32, device=x.device)
        # narrow_tma packs the weight on every call (krsc_weight), the ring keeps its packed taps
        # per weight version: a weight changed in place is always seen. The call plan's handle
        # replays the R x 1 convolution and, as its ``aux``, the fold
        if cfg.ring:
            from .row_ring import row_ring_conv

            ring = dict(tw=cfg.block_m, rows=cfg.ring, slots=cfg.num_stages, num_warps=cfg.num_warps, launch=launch)
            row_ring_conv(x, fold_weight(w), rp.pad_h[0], u, source=w, **ring)
        else:
            _NARROW.run(rp, x, fold_weight(w), None, u.permute(0, 3, 1, 2), cfg, launch)
        m = prob.n * prob.p * prob.q
        bk = _small(prob.k, 1)
        bm = max(16, 2048 // bk)
        args = (u, bias if bias is not None else y, y, m, prob.p, prob.q, prob.w, prob.k, y.stride(0), y.stride(1),
                y.stride(2), y.stride(3), prob.stride[1], prob.pad_w[0], prob.dilation[1])  # fmt: skip

        def constexprs():
            return dict(S=prob.s, HAS_BIAS=bias is not None, ACT=prob.activation, BLOCK_M=bm, BLOCK_K=bk)

        _run_kernel(aux_of(launch), width_fold_kernel, (cdiv(m, bm),), args, constexprs,
                    {"num_warps": 4, "num_stages": 1})  # fmt: skip


def flat_rows_narrow(prob: ConvProblem) -> bool:
    """The layers where ``flat_rows`` won by 2x on the H200 (session 29): 16-bit, 4-16 input
    channels, groups 1, a filter 2-3 columns wide and at most 3 rows high. The heuristic takes
    it there, and the tuner times it against one ``implicit_gemm`` config only."""
    return prob.dtype.itemsize == 2 and 4 <= prob.c <= 16 and prob.groups == 1 and 1 < prob.s <= 3 and prob.r <= 3


class FlatRows(Algorithm):
    """Few input channels (S*C up to 128 per filter row, groups = 1; ``conv/flat_rows.py``): each
    output pixel's filter row read as one contiguous NHWC run of S*C values and multiplied by the
    weight's row on the tensor cores, R dots per tile and no K loop; any stride, padding,
    dilation and output layout. First layers, narrow layers and heads, where the per-tap kernels'
    K tiles are mostly padding and the TMA forms read 16-32-byte box rows.

    Config fields in this algorithm's view: block_m = output pixels per program, block_n =
    output channels per program, block_k = the row's first chunk (``row_chunks``)."""

    name = "flat_rows"
    fuses_activation = True
    writes_nchw = True

    def supports(self, prob: ConvProblem) -> str | None:
        from .flat_rows import MAX_ROW

        if prob.groups != 1:
            return f"groups = {prob.groups}: flat_rows takes dense layers (groups = 1)"
        if prob.s * prob.c > MAX_ROW:
            return f"S*C = {prob.s * prob.c} values per filter row: over {MAX_ROW}, per-tap K tiles are dense already"
        if prob.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            return f"flat_rows runs on the tensor cores in fp16, bf16 or fp32, not {prob.dtype}"
        if prob.input_nchw:
            return "flat_rows reads an NHWC input"
        return None

    def heuristic_ok(self, prob: ConvProblem) -> bool:
        # 4-16 channels under a 3x3 (or 1 x 2-3) filter, 16-bit: it won all three such layers of
        # session 29's all suite by 2.15-2.49x (narrow 8->8, latent 4->64, the seed's 16->16);
        # elsewhere (larger filters: untimed) it is tuned only
        return flat_rows_narrow(prob)

    @staticmethod
    def _bn(prob: ConvProblem) -> int:
        return min(128, _small(prob.k))

    def _fits(self, prob: ConvProblem, bm: int, bn: int, warps: int) -> bool:
        """The register estimate: the fp32 accumulator plus every filter row's input tile at once
        (Triton issues the unrolled rows' loads together), at most 128 32-bit registers per
        thread. sm90-compile, bf16: the 7x7 RGB stem's 128 pixels on 4 warps (176 by this count)
        took 255 registers and spilled, on 8 warps (88) 162 without spills; AlexNet's 11 rows
        spilled in every 4-warp tile and at 128 pixels on 8 warps (196)."""
        from .flat_rows import row_chunks

        ka, kb = row_chunks(prob.s * prob.c, prob.dtype.itemsize)
        threads = 32 * warps
        return bm * bn // threads + prob.r * bm * (ka + kb) * prob.dtype.itemsize // (4 * threads) <= 128

    def configs(self, prob: ConvProblem) -> list[Config]:
        if interpreting():
            return [self.default_config(prob)]
        from .flat_rows import row_chunks

        ka = row_chunks(prob.s * prob.c, prob.dtype.itemsize)[0]
        bn = self._bn(prob)
        out = [Config(bm, bn, ka, warps, 1) for bm, warps in ((128, 4), (256, 8), (64, 4), (128, 8))
               if self._fits(prob, bm, bn, warps)]  # fmt: skip
        return out or [Config(64, bn, ka, 8, 1)]

    def default_config(self, prob: ConvProblem) -> Config:
        from .flat_rows import row_chunks

        ka = row_chunks(prob.s * prob.c, prob.dtype.itemsize)[0]
        if interpreting():
            return Config(32, min(32, self._bn(prob)), ka, 4, 1)
        return self.configs(prob)[0]

    def run(self, prob, x, w, bias, y, cfg, launch=None):
        from .flat_rows import flat_rows_kernel, row_chunks

        if x.stride(3) != prob.c:  # a channel slice: the runs need C channels back to back
            x = x.contiguous(memory_format=torch.channels_last)
        if launch is not None and launch.fast_ready:
            launch.fast((x, w, y if bias is None else bias, y))
            return
        m = prob.n * prob.p * prob.q
        flat_y = (y.stride(1) == 1 and y.stride(3) == prob.k and y.stride(2) == prob.q * prob.k
                  and (y.stride(0) == prob.p * prob.q * prob.k or prob.n == 1))  # fmt: skip
        ka, kb = row_chunks(prob.s * prob.c, prob.dtype.itemsize)
        args = (x, w, bias if bias is not None else y, y, m, prob.h, prob.w, prob.p, prob.q, x.stride(0), x.stride(2),
                w.stride(0), w.stride(1), w.stride(2), w.stride(3), y.stride(0), y.stride(1), y.stride(2),
                y.stride(3))  # fmt: skip

        def constexprs():
            return dict(C=prob.c, K=prob.k, R=prob.r, S=prob.s, STRIDE_H=prob.stride[0], STRIDE_W=prob.stride[1],
                        PAD_H=prob.pad_h[0], PAD_W=prob.pad_w[0], DIL_H=prob.dilation[0], DIL_W=prob.dilation[1],
                        KA=ka, KB=kb, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, FLAT_Y=flat_y,
                        HAS_BIAS=bias is not None, ACT=prob.activation, PRECISION=_precision(prob),
                        UPCAST=interpreting() and prob.dtype == torch.bfloat16)  # fmt: skip

        grid = (cdiv(m, cfg.block_m), cdiv(prob.k, cfg.block_n))
        _run_kernel(launch, flat_rows_kernel, grid, args, constexprs, {"num_warps": cfg.num_warps, "num_stages": 1})


_NARROW = NarrowTma()


def nchw_tma_disabled() -> bool:
    """``CONVGEMM_NCHW_TMA=0``: NCHW input goes through transposes to the NHWC kernels, as before
    the algorithms that read NCHW (``implicit_gemm_tma_nchw``, ``head_1x1_nchw``) existed (for A/B
    timings)."""
    return os.environ.get("CONVGEMM_NCHW_TMA", "1") == "0"


def nchw_tiles(prob: ConvProblem, block_n: int) -> list[tuple[float, int, int]]:
    """(coverage, rows, columns) blocks of ``block_n`` pixels of one image, best first.

    Rows of at least 32 columns where the output is that wide: a box row is one run of
    ``TILE_W`` pixels, and the copy engine moves 64-128 byte runs much faster than 16-byte ones.
    """
    out = []
    min_w = min(32, 1 << max(3, (prob.q - 1).bit_length()))
    for tw in _pow2_upto(min(block_n, 256)):
        th = block_n // tw
        if tw < max(8, min_w) or th > 256:
            continue
        out.append((prob.p * prob.q / (cdiv(prob.p, th) * th * cdiv(prob.q, tw) * tw), th, tw))
    out.sort(key=lambda t: (-round(t[0], 6), -t[2]))
    return out


class ImplicitGemmTmaNchw(Algorithm):
    """``implicit_gemm_tma`` on NCHW tensors as they are: the input read through a 4-D
    descriptor ``[N, C, H, W]`` (boxes of ``BLOCK_K`` channels x a block of pixels, pixels
    contiguous) and the output stored NCHW, so an NCHW call pays no transpose of x before the
    kernel or of y after it (``conv.loaders.tma_nchw_*``).

    Takes 1x1 and R x 1 filters without column padding (the copy engine needs each box's first
    column 16-byte aligned, so filter taps may shift rows, not columns: an H200 run of 1x3 and
    3x3 filters stopped on an illegal instruction), stride 1, groups 1, 16-bit types, C >= 16, an
    NCHW input (dense or a channel slice) whose N, C and H strides are 16-byte multiples
    (W * itemsize % 16 == 0 when dense), and output rows of at least 16 pixels and a 16-byte
    multiple; ``conv2d`` picks it for such an input unless ``CONVGEMM_NCHW_TMA=0``."""

    name = "implicit_gemm_tma_nchw"
    fuses_activation = True
    writes_nchw = True
    reads_nchw = True

    @staticmethod
    def planes(prob: ConvProblem) -> ConvProblem:
        """The problem the kernel runs. A 1x1 stride-1 layer without padding maps input pixel i
        of a channel plane to output pixel i, so each H x W plane reads as one row of H*W pixels
        (``run`` views x and y so): the boxes then run along whole planes, with no columns past a
        row's end (a 64-column box on a 56-wide row wastes 1/8) and no 16-byte rule on the row
        width (ResNet-50's 28-wide rows are 56 bytes; a 28 x 28 plane is 1568). H200, session 32:
        the 28 x 28 1x1 layers went through two transposes at 0.41-0.55x cuDNN given NCHW."""
        if prob.is_1x1 and prob.stride == (1, 1) and prob.h > 1:
            return replace(prob, h=1, w=prob.h * prob.w)
        return prob

    def supports(self, prob: ConvProblem) -> str | None:
        prob = self.planes(prob)
        if not (prob.input_nchw and prob.input_tma_ok):
            return ("needs an NCHW input whose N, C and H strides are 16-byte multiples (W * itemsize % 16 == 0 "
                    "for a dense one) with a 16-byte aligned base; channels_last input runs on implicit_gemm_tma")  # fmt: skip
        if prob.dtype.itemsize != 2:
            return f"16-bit types only (the N-major wgmma operand), not {prob.dtype}"
        if not prob.tma_ok:
            return "the device has no TMA (needs compute capability >= 9.0)"
        if prob.s != 1 or prob.pad_w != (0, 0):
            return (f"a {prob.r}x{prob.s} filter with column padding {prob.pad_w}: a box's first column must be "
                    "16-byte aligned, so the filter must not shift columns (S = 1, no column padding)")  # fmt: skip
        if prob.groups != 1:
            return f"groups = {prob.groups}: one box must not cross a group; use implicit_gemm_tma on channels_last"
        if prob.stride != (1, 1):
            return f"stride {prob.stride}: the NCHW box reads contiguous pixels (stride 1 only)"
        if (prob.q * prob.dtype.itemsize) % 16:
            return f"output width {prob.q}: its rows must be 16-byte multiples for the NCHW output store"
        if prob.c < 16 or prob.q < 16:
            return f"C = {prob.c}, output width {prob.q}: narrow channels or rows waste the NCHW boxes (C, Q >= 16)"
        return None

    def configs(self, prob: ConvProblem) -> list[Config]:
        if interpreting():
            return [self.default_config(prob)]
        prob = self.planes(prob)
        bk = _tma_bk(prob)
        out = []
        # the NHWC kernel's winning forms (session 12 tuner log): one-tile 64x256 at 3 stages,
        # persistent 64x256 at 4 stages and 128x256 on two warpgroups, and 64x128; and 128x256 one
        # tile per program (session 32's probe of whole planes: the best form on CRAFT's fc7 and
        # up2 1x1, 17.1-17.6 us against 17.8-18.9 for the tuner's pick then)
        # Not offered: a persistent 128x128 for planes whose last 256-pixel tile is mostly empty
        # (28 x 28). Session 47, H100: 44.7 against 42.9 us and 37.6 against 31.8 us on the two
        # 28 x 28 1x1 layers, so the smaller tile loses more than the empty pixels it saves.
        for bm, bn, warps, stages, per in ((64, 256, 4, 3, 0), (64, 256, 4, 4, 1), (128, 256, 8, 3, 1),
                                           (64, 128, 4, 4, 0), (128, 256, 8, 3, 0)):  # fmt: skip
            if bm == 128 and prob.k <= 64:
                continue
            _, th, tw = nchw_tiles(prob, bn)[0]
            out.append(Config(bm, bn, bk, warps, stages, tile_n=1, tile_h=th, tile_w=tw, persistent=per))
        return out

    def default_config(self, prob: ConvProblem) -> Config:
        prob = self.planes(prob)
        bk = _tma_bk(prob)
        if interpreting():
            _, th, tw = nchw_tiles(prob, 32)[0]
            return Config(64, th * tw, bk, 4, 1, tile_n=1, tile_h=th, tile_w=tw)
        _, th, tw = nchw_tiles(prob, 256)[0]
        return Config(64, 256, bk, 4, 4, tile_n=1, tile_h=th, tile_w=tw, persistent=1)

    def run(self, prob, x, w, bias, y, cfg, launch=None):
        """``x``: the NCHW input; ``y``: a dense NCHW output."""
        if launch is not None and launch.fast_ready:
            cp, in_place = launch.extra
            wp = w if in_place else krsc_weight(w, cp)
            launch.fast((wp, x, y, y if bias is None else bias, y, y))
            return
        flat = self.planes(prob)
        if flat is not prob:  # whole planes as rows (``planes``): same memory, no copy
            prob, x, y = flat, x.view(prob.n, prob.c, 1, flat.w), y.view(prob.n, prob.k, 1, flat.w)
        cp = channel_pad(prob.c, cfg.block_k)
        wp = krsc_weight(w, cp).view(prob.k, -1)
        box = [1, cfg.block_k, cfg.tile_h, cfg.tile_w]
        x_desc = descriptor(x, [prob.n, prob.c, prob.h, prob.w], [x.stride(0), x.stride(1), x.stride(2), 1], box)
        w_desc = descriptor(wp, [prob.k, wp.shape[1]], [wp.stride(0), 1], [cfg.block_m, cfg.block_k])
        y_desc = descriptor(y, [prob.n, prob.k, prob.p, prob.q], [y.stride(0), y.stride(1), y.stride(2), 1],
                            [1, cfg.block_m, cfg.tile_h, cfg.tile_w])  # fmt: skip
        num_m = cdiv(prob.k, cfg.block_m)
        num_n = prob.n * cdiv(prob.p, cfg.tile_h) * cdiv(prob.q, cfg.tile_w)
        c_tiles = cp // cfg.block_k
        b_args = (prob.p, prob.q, prob.pad_h[0], prob.pad_w[0], prob.dilation[0], prob.dilation[1], prob.s, c_tiles)
        fns = (mm.desc2d_init, mm.desc2d_a_load, cl.tma_nchw_init, cl.tma_nchw_load, cl.tma_nchw_store)
        _launch(launch, (num_m * num_n, 1, 1), (w_desc, (prob.k,)), (x_desc, b_args), (y_desc, (prob.p, prob.q)),
                bias, y, prob.k, num_m, num_n, prob.r * prob.s * c_tiles, cfg, fns, True, prob,
                act=prob.activation)  # fmt: skip
        if launch is not None:
            launch.extra = (cp, wp.data_ptr() == w.data_ptr())


class Gemm1x1Nchw(Algorithm):
    """A 1x1, stride-1, unpadded convolution on an NCHW input as it is, as a GEMM over its dense
    planes by pointers (``conv.loaders.nchw_plane_*``): M = output channels (the weight ``[K, C]``
    with its own strides), N = the N*H*W pixels image by image, the output stored NCHW. For the
    planes ``implicit_gemm_tma_nchw`` cannot box: a row of a 14 x 14 bf16 plane is 392 bytes, not a
    16-byte multiple, so ResNet-50's 14x14 and 7x7 1x1 layers on NCHW input went through two
    transposes (H100, session 52: l3 1x1 reduce 1024->256 @14 47.2 us against cuDNN's 40.2, of which
    the input's transpose 24.8 and the output's 10.5).

    Groups 1; any dtype; any channel and batch strides with dense planes (each plane's pixels back
    to back). Loads and stores move ``vec`` pixels at a time where the plane size, strides and
    addresses allow it. ``conv2d(algorithm='auto')`` keeps an NCHW input for it and tunes it where
    it won (``wanted``: planes TMA cannot box, of a multiple of 4 pixels); ``algorithm=
    'gemm_1x1_nchw'`` runs it on any NCHW input with dense planes."""

    name = "gemm_1x1_nchw"
    fuses_activation = True
    writes_nchw = True
    reads_nchw = True
    #: whether the tuner times it (and ``auto`` keeps NCHW inputs for it) where ``wanted`` says so
    CANDIDATES = True

    @staticmethod
    def wanted(prob: ConvProblem) -> bool:
        """Where it beat the alternatives (H100, session 57, ResNet-50's 1x1 layers on NCHW input):
        planes that TMA cannot box (``implicit_gemm_tma_nchw`` won on 28 x 28: 43.5 us against
        49.9) and whose size is a multiple of 4 pixels, so that loads move 4 or more pixels (l3 1x1
        reduce @14: 40.1 us against 47.0 through two transposes, cuDNN 40.5). On 7 x 7 planes (one
        pixel a load) it took 92-138 us against 33.9 through the transposes. On the H200 (session
        58, ResNet-50 NCHW from empty caches) it won all three 14 x 14 layers, 1.08-1.33x cuDNN."""
        return not prob.input_tma_ok and (prob.h * prob.w) % 4 == 0

    @staticmethod
    def vec(x: torch.Tensor, y: torch.Tensor) -> int:
        """The most pixels (8, 4, 2 or 1, at most 16 bytes: the widest vector access, and the
        plan key holds addresses modulo 16) that every run of x's and y's planes holds aligned:
        they must divide H*W, the batch and channel strides, and both base addresses."""
        hw = x.shape[2] * x.shape[3]
        for v in (8, 4, 2):
            if v * x.element_size() > 16:
                continue
            if all(n % v == 0 for n in (hw, x.stride(0), x.stride(1), y.stride(0), y.stride(1))) and all(
                t.data_ptr() % (v * t.element_size()) == 0 for t in (x, y)
            ):
                return v
        return 1

    def supports(self, prob: ConvProblem) -> str | None:
        if not (prob.input_nchw and prob.input_dense):
            return ("needs an NCHW input kept as it is with dense planes (each plane's pixels back to back): pass "
                    "the NCHW tensor itself; channels_last input runs on gemm_1x1")  # fmt: skip
        if not prob.is_1x1 or prob.stride != (1, 1):
            return (f"a {prob.r}x{prob.s} filter, stride {prob.stride}, padding {prob.pad_h}x{prob.pad_w}: output "
                    "pixel i reads input pixel i only for 1x1 filters at stride 1 without padding")  # fmt: skip
        if prob.groups != 1:
            return f"groups = {prob.groups}: one dense weight [K, C] only; grouped layers run on grouped algorithms"
        return None

    def heuristic_ok(self, prob: ConvProblem) -> bool:
        return False

    def keeps_nchw(self, prob: ConvProblem) -> bool:
        return self.CANDIDATES and self.wanted(prob)

    def configs(self, prob: ConvProblem) -> list[Config]:
        if not (self.CANDIDATES and self.wanted(prob)):
            return []
        if interpreting():
            return [self.default_config(prob)]
        bk = 32 if prob.dtype == torch.float32 else 64
        # output channels on M (64 a warpgroup), pixels on N: the two fastest of session 57's
        # probe on l3 1x1 reduce @14 (40.1 and 41.6 us; 64 x 64 48.4, persistent 128 x 64 52.2)
        return [Config(128, 128, bk, 8, 4), Config(128, 64, bk, 4, 4)]

    def default_config(self, prob: ConvProblem) -> Config:
        if interpreting():
            return Config(16, 32, 16, 4, 1)
        bk = 32 if prob.dtype == torch.float32 else 64
        return Config(64, 64, bk, 4, 3) if (prob.h * prob.w) % 2 else Config(128, 64, bk, 4, 3)

    def run(self, prob, x, w, bias, y, cfg, launch=None):
        """``x``: the NCHW input (dense planes); ``y``: an NCHW output (dense planes)."""
        if launch is not None and launch.fast_ready:
            # a warm plan: the same strides, sizes and alignment (its key), so the same loaders
            # and integer arguments; only the tensors change (in _launch's argument order)
            launch.fast((w, x, y, y if bias is None else bias, y, y))
            return
        hw, m = prob.h * prob.w, prob.n * prob.h * prob.w
        v = self.vec(x, y)
        init, load, store = cl.NCHW_PLANE_FNS[v]
        a = (None, (w, w.stride(0), 0, w.stride(1), prob.k, prob.c))
        b = (x, (hw, m, x.stride(0), x.stride(1), prob.c))
        c = (y, (hw, m, y.stride(0), y.stride(1), prob.k))
        num_m, num_n = cdiv(prob.k, cfg.block_m), cdiv(m, cfg.block_n)
        fns = (mm.ptr_init, mm.ptr_a_load, init, load, store)
        _launch(launch, (num_m * num_n, 1, 1), a, b, c, bias, y, prob.k, num_m, num_n, cdiv(prob.c, cfg.block_k),
                cfg, fns, True, prob, act=prob.activation)  # fmt: skip


class ImplicitGemmWs(Algorithm):
    """``conv3d_ws`` (Hopper's warp-specialized Gluon kernel, ``conv/ws3d.py``) on a 2-D layer:
    the NHWC batch is the 3-D kernel's depth axis (a 1 x R x S filter never crosses images), so a
    tile of ``tile_n`` images x ``tile_h`` rows x ``tile_w`` columns is one 5-D box. Groups 1,
    16-bit or fp32 with TF32 on; a strided layer reads the stride-phase view (H and W multiples of the stride), its
    boxes still several images deep; the fused activation in its epilogue. Configs as ``conv3d_ws``'s (pixels on
    ``block_m``); the tuner alone picks it."""

    name = "implicit_gemm_ws"
    fuses_activation = True

    @staticmethod
    def flat(prob: ConvProblem) -> bool:
        """A 1x1, stride-1, unpadded layer over an input whose pixels are evenly strided: every
        output pixel reads its own input pixel, so the kernel sees one row of N*H*W pixels and
        its tiles are runs of that row (none crosses an image edge into padding: 100% coverage
        where a 14x14 image's spatial tiles covered 77-88%). Not for an output written into a
        strided view (``output_strided``): its pixels are no one row, and the spatial view
        stores into it in place."""
        return (prob.is_1x1 and prob.stride == (1, 1) and prob.pad_h == (0, 0) and prob.pad_w == (0, 0)
                and prob.input_dense and not prob.output_strided)  # fmt: skip

    @staticmethod
    def as_3d(prob: ConvProblem, spatial: bool = False):
        """The 3-D problem the kernel runs: [1, C, N, H, W] with a 1 x R x S filter, or a ``flat``
        layer (unless ``spatial``) as [1, C, 1, 1, N*H*W] with a 1x1x1 filter."""
        from ..problem3d import ConvProblem3d

        if ImplicitGemmWs.flat(prob) and not spatial:
            return ConvProblem3d(1, prob.c, 1, 1, prob.n * prob.h * prob.w, prob.k, 1, 1, 1, (1, 1, 1), (0, 0, 0),
                                 (0, 0, 0), (1, 1, 1), prob.groups, prob.dtype, prob.precision,
                                 tma_input_ok=prob.input_tma_ok and prob.tma_ok, input_phases_ok=True)  # fmt: skip
        ph, pw = prob.pad_h[0], prob.pad_w[0]
        return ConvProblem3d(1, prob.c, prob.n, prob.h, prob.w, prob.k, 1, prob.r, prob.s, (1, *prob.stride),
                             (0, ph, pw), (0, prob.pad_h[1], prob.pad_w[1]), (1, *prob.dilation), prob.groups,
                             prob.dtype, prob.precision, tma_input_ok=prob.input_tma_ok and prob.tma_ok,
                             input_phases_ok=prob.input_phases_ok)  # fmt: skip

    def supports(self, prob: ConvProblem) -> str | None:
        from .conv3d import WS3D

        if prob.stride != (1, 1) and not (prob.input_phases_ok and prob.h % prob.stride[0] == 0
                                          and prob.w % prob.stride[1] == 0):  # fmt: skip
            return (f"stride {prob.stride}: implicit_gemm_ws reads a strided layer through the stride-phase view, "
                    f"which needs a dense NHWC input whose height and width ({prob.h}x{prob.w}) are multiples of "
                    "the stride")  # fmt: skip
        if prob.input_nchw:
            return "implicit_gemm_ws reads an NHWC input"
        return WS3D.supports(self.as_3d(prob))

    def heuristic_ok(self, prob: ConvProblem) -> bool:
        return False

    def configs(self, prob: ConvProblem) -> list[Config]:
        from .conv3d import WS3D

        return WS3D.configs(self.as_3d(prob))

    def default_config(self, prob: ConvProblem) -> Config:
        from .conv3d import WS3D

        return WS3D.default_config(self.as_3d(prob))

    @staticmethod
    def view_3d(t: torch.Tensor, flat: bool = False) -> torch.Tensor:
        """An NHWC [N, C, H, W] tensor as [1, C, N, H, W] (``as_3d``'s input or output), no copy;
        ``flat`` (its pixels evenly strided): as [1, C, 1, 1, N*H*W]."""
        if flat:
            n, c, h, w = t.shape
            m, ps = n * h * w, t.stride(3)
            return t.as_strided((1, c, 1, 1, m), (m * ps, t.stride(1), m * ps, m * ps, ps))
        return t.permute(1, 0, 2, 3).unsqueeze(0)

    def run(self, prob, x, w, bias, y, cfg, launch=None) -> None:
        flat = self.flat(prob)
        # a strided output view (one stride phase of dgrad's dx) is stored in place through the
        # [1, K, N, P, Q] view where TMA can address it; the flat view needs dense pixels
        yo = _nhwc_out(y, 0 if flat else prob.k)
        if fast_ready(launch, cfg.split_k):
            # a warm plan: the [1, C, N, H, W] views only describe the same addresses again, and
            # a channels_last weight is its own KRSC matrix (C is a multiple of the K tile here)
            wp = w if krsc_in_place(w) else krsc_weight(w, prob.c)
            ws_conv3d_replay(launch, x, wp, yo, bias, cfg.split_k, cfg.stream_k)
        else:
            from .ws3d import ws_run

            wp = krsc_weight(w, prob.c).view(prob.k, -1)
            ws_run(self.view_3d(x, flat), wp, bias, self.view_3d(yo, flat), (1, prob.r, prob.s),
                   (0, prob.pad_h[0], prob.pad_w[0]), (1, *prob.dilation), cfg, (1, *prob.stride), prob.activation,
                   launch)  # fmt: skip
        if yo is not y and not COMPILE_ONLY.get():
            y.copy_(yo)


class GroupedWs(Algorithm):
    """Narrow groups on the Gluon kernel (``conv/ws3d.py``): ``cfg.gt`` neighbouring groups taken
    as one super-group of ``GC = gt*C/g`` input and ``KS = gt*K/g`` output channels, the weight
    expanded block-diagonally (``grouped_tma.blockdiag_weight``), with output *pixels* on M and a
    super-group's channels on N and K, so that a tile's channel block lies in one super-group and
    its K steps read that super-group's channels only. ``grouped_tma`` has the output channels on
    M, where wgmma's 64-row minimum makes a narrower merge waste in M what it saves in K; here a
    32-channel super-group (fp32: one 128-byte TMA box row) multiplies 4x the useful products on
    ResNeXt's 8-channel groups where ``grouped_tma``'s 64-channel ones multiply 8x, which bounds
    that layer in TF32 (benchmarks/NOTES.md, session 35). 2-D layers through ``implicit_gemm_ws``'s
    [1, C, N, H, W] view (never its flat one: the fix-up reads 2-D tiles); tiles whose sums are not
    finite are recomputed exactly (``grouped_tma_fixup_kernel``), as in ``grouped_tma``."""

    name = "grouped_ws"
    fuses_activation = True
    #: whether the tuner offers it: on since session 37, when the H200 passed its tests and
    #: ``tools/config_probe.py`` timed its best candidate faster than ``grouped_tma``'s on 6 of
    #: ResNeXt's 7 layers in TF32 (1.02-1.14x); ``configs`` offers it in fp32 only (``SIXTEEN_BIT``)
    CANDIDATES = True
    #: 16-bit layers too: off. In bf16 the probe's margins were 1.00-1.10x and the tuner picked it
    #: on none of ResNeXt's 7 layers (session 37, grouped suite from empty caches), while its
    #: candidates took the first of them from 1.8 to 3.4 s of first-call tuning
    SIXTEEN_BIT = False

    @staticmethod
    def widths(prob: ConvProblem) -> list[int]:
        """The ``gt`` (groups per super-group, powers of two dividing the group count) whose
        super-group's input channels are 128, 64 or 256 bytes (in that order: one full-swizzle box
        row, half of one, two of them; box rows of 32 bytes ran 1.4-2.3x slower in session 26),
        and at most 256 output channels (one channel block: wgmma's widest N). Narrower merges
        multiply fewer zeros; wider ones read fewer, longer box rows."""
        e = prob.dtype.itemsize
        found = {}
        gt = 1
        while gt <= prob.groups:
            gc, ks = gt * prob.cg, gt * prob.kg
            # KS is the tile's channel block (a power of two: the kernel's aranges), 8-256 wide
            if prob.groups % gt == 0 and gc * e in (64, 128, 256) and 8 <= ks <= 256 and ks & (ks - 1) == 0:
                found[gc * e] = gt
            gt *= 2
        return [found[b] for b in (128, 64, 256) if b in found]

    @staticmethod
    def block_k(prob: ConvProblem, gt: int) -> int:
        return min(gt * prob.cg, 128 // prob.dtype.itemsize)

    def dense(self, prob: ConvProblem) -> ConvProblem:
        """The problem with one group, for the checks the kernel shares with ``implicit_gemm_ws``
        (dtype, device, TMA, strides, channel counts). Its input boxes are whole super-groups'
        channels (64 bytes or more), so only the pixel rows' alignment matters, not a narrow
        group's (``input_tma_ok`` asks C/g * itemsize to be a multiple of 16), as in
        ``GroupedTma.reduced``."""
        return replace(prob, groups=1, input_tma_ok=prob.input_tma_rows_ok)

    def supports(self, prob: ConvProblem) -> str | None:
        if prob.groups == 1:
            return "not a grouped convolution (groups = 1)"
        if prob.cg == 1:
            return "one channel per group: that is the depthwise algorithms' problem"
        if not self.widths(prob):
            return (f"{prob.groups} groups of {prob.cg} -> {prob.kg} channels: no power-of-two number of them makes "
                    "a super-group of 64, 128 or 256 bytes of input channels and a power of two of 8-256 output "
                    "channels")  # fmt: skip
        reason = _WS.supports(self.dense(prob))
        if reason:
            # the kernel's own reasons, in this algorithm's name
            return reason.replace("implicit_gemm_ws", self.name).replace("conv3d_ws", self.name)
        return None

    def heuristic_ok(self, prob: ConvProblem) -> bool:
        return False

    def accepts(self, cfg: Config) -> bool:
        return cfg.gt >= 1

    def configs(self, prob: ConvProblem) -> list[Config]:
        if not self.CANDIDATES or (prob.dtype.itemsize == 2 and not self.SIXTEEN_BIT):
            return []
        return self.candidates(prob)

    def candidates(self, prob: ConvProblem) -> list[Config]:
        """For the first two merges of ``widths``: 128 pixels on two consumer warpgroups or 64 on
        one (two programs per SM where shared memory allows), the whole super-group's output
        channels a tile; fp32 tiles store from registers where that frees ring stages
        (``Ws3d.direct_form``)."""
        from .conv3d import Ws3d, spatial_tiles3

        e = prob.dtype.itemsize
        p3 = ImplicitGemmWs.as_3d(prob, spatial=True)
        deep = Ws3d._deep(p3)
        out = []
        for gt in self.widths(prob)[:2]:
            bk, bn = self.block_k(prob, gt), gt * prob.kg
            k_steps = prob.r * prob.s * (gt * prob.cg // bk)
            for bm, warps in ((128, 8), (64, 4)):
                tiles = [t for t in spatial_tiles3(p3, bm) if deep or t[1] == 1]
                _, td, th, tw = tiles[0]
                stages = 4
                while stages > 2 and stages * (bm + bn) * bk * e + bm * bn * e > 225_000:
                    stages -= 1
                if stages * (bm + bn) * bk * e + bm * bn * e > 225_000:
                    continue  # over the SM's shared memory even at two stages
                cfg = Config(bm, bn, bk, warps, stages, tile_n=td, tile_h=th, tile_w=tw, persistent=1, gt=gt)
                out.append(Ws3d.direct_form(cfg, e, k_steps))
                if warps == 4 and stages * (bm + bn) * bk * e + bm * bn * e <= 110_000:
                    out.append(replace(cfg, persistent=2))
        return out

    def default_config(self, prob: ConvProblem) -> Config:
        return self.candidates(prob)[0]

    def run(self, prob, x, w, bias, y, cfg, launch=None) -> None:
        from ..functional import _derived_weight

        gt, groups = cfg.gt, prob.groups
        warm = fast_ready(launch, 1)
        if not warm and (gt not in self.widths(prob) or (gt * prob.kg) % cfg.block_n):
            # a forced config: the fix-up list is sized from the merge, and a tile must lie in one
            # super-group
            raise ValueError(f"grouped_ws: gt={gt} (groups per super-group) with block_n={cfg.block_n} does not fit "
                             f"{groups} groups of {prob.cg} -> {prob.kg} channels; use gt in {self.widths(prob)} "
                             "and a block_n dividing gt * K/groups")  # fmt: skip
        gc, ks = gt * prob.cg, gt * prob.kg
        wx = w if gt == 1 else _derived_weight(w, ("blockdiag", gt, groups), lambda v: blockdiag_weight(v, gt, groups))
        wp = wx if warm and krsc_in_place(wx) else krsc_weight(wx, gc).view(prob.k, -1)
        yo = _nhwc_out(y, prob.k)
        num_m = ks // cfg.block_n  # channel blocks per super-group
        num_n = cdiv(prob.n, cfg.tile_n) * cdiv(prob.p, cfg.tile_h) * cdiv(prob.q, cfg.tile_w)  # pixel blocks
        tiles = num_m * num_n * (groups // gt)
        fix = Grouped.fix_list(x.device, tiles)
        if warm:
            ws_conv3d_replay(launch, x, wp, yo, bias, 1, locks=fix)
        else:
            from .ws3d import ws_run

            ws_run(ImplicitGemmWs.view_3d(x), wp, bias, ImplicitGemmWs.view_3d(yo), (1, prob.r, prob.s),
                   (0, prob.pad_h[0], prob.pad_w[0]), (1, *prob.dilation), cfg, (1, *prob.stride), prob.activation,
                   launch, super_groups=(gc, ks), fix=fix)  # fmt: skip
        # the list numbers (channel block, pixel block) pairs of TD x TH x TW pixel blocks
        grouped_fixup(aux_of(launch), prob, x, w, bias, yo, fix, (num_m, num_n, tiles), ks,
                      (cfg.block_n, cfg.tile_n, cfg.tile_h, cfg.tile_w))  # fmt: skip
        if yo is not y and not COMPILE_ONLY.get():
            y.copy_(yo)


_WS = ImplicitGemmWs()
_GROUPED_WS = GroupedWs()


ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        Gemm1x1(),
        _TMA,
        _WS,
        Head1x1(),
        Depthwise(),
        DepthwiseRows(),
        Grouped(),
        GroupedTma(),
        _GROUPED_WS,
        GroupedDirect(),
        GroupedMma(),
        SmallK(),
        WidthUnfold(),
        ImplicitGemm(),
        ImplicitGemmTmaNchw(),
        Gemm1x1Nchw(),
        HeadPlanes(),
        DepthwiseNchw(),
        _NARROW,
        NarrowFold(),
        FlatRows(),
    )
}
