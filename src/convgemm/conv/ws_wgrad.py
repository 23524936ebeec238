"""A warp-specialized weight gradient for Hopper, written in Gluon (experimental).

The same producer / consumer split as ``ws3d.ws_conv3d_kernel``, on wgrad's GEMM view:

    dw[K, (t, r, s, C)] = sum over output pixels of dy[pixel, K]^T @ x[pixel shifted by (t, r, s), C]

- M = output channels (``BM`` per tile), N = one filter tap's block of ``BN`` input channels,
  the reduction runs over blocks of ``TD x TH x TW`` output pixels (``BP`` of them);
- the *producer* warp issues, for every pixel block, the TMA box of dy ``[1, TD, TH, TW, BM]``
  and the box of x shifted by the tile's tap ``[1, TD, TH, TW, BN]`` (out-of-bounds rows are the
  zero padding; pixels past the output read zeros from dy, so they add nothing);
- the *consumer* warpgroups run ``wgmma`` with dy^T as the A operand, read transposed from
  shared memory (pixels are its K dimension), and write each unit's fp32 partial tile.

Every tile's pixel blocks are split into ``SPLIT`` ranges (a layer has few output tiles and a long
reduction); a work unit is one range of one tile, units ordered split-major so that the units
running at the same time read the same pixels (L2). Programs are persistent. A second, plain
Triton kernel (``ws_wgrad_finish_kernel``) sums each tile's partials in split order (the same
result on every run) and stores dw with any strides.

Strided layers read x through the stride-phase view (``ws3d``'s coordinates), pixel blocks one
output depth deep unless the filter is one tap deep, unpadded and unstrided along depth
(``depth_free``: a 2-D layer, whose depth is the batch). Groups 1, or (``GROUPED``,
``backward.WgradGroupedWs``) wide groups that no tile crosses, each tile storing only its output
channels' own narrow group; 16-bit dtypes. Gluon does not run under ``TRITON_INTERPRET``: the
kernel runs on compute capability 9.x GPUs only; CI runs the finish kernel under the interpreter.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from .._runtime import cdiv, sm_count
from ..matmul.launch import aux_of
from .conv3d import depth_free
from .fprop import pdl_enabled
from .ws3d import _next_block, _phase_rows, _tile_origin, _x_coord, gluon_launch, input_desc, ndhwc_desc
from .ws_replay import fast_ready, ws_wgrad3d_replay


@gluon.jit
def _wg_unit(u, tiles, k_blocks, SPLIT: gl.constexpr):
    """Work unit -> (tile, first pixel block, end pixel block); split-major order."""
    sp = u // tiles
    per = gl.cdiv(k_blocks, SPLIT)
    j0 = sp * per
    return u - sp * tiles, j0, gl.minimum(j0 + per, k_blocks)


@gluon.jit
def _wg_tile(tile, m_tiles, c_tiles, R, S):
    """Tile -> (output-channel block, input-channel block, t, r, s); output-channel blocks fastest
    (they read the same x box)."""
    mb = tile % m_tiles
    rest = tile // m_tiles
    cb = rest % c_tiles
    tap = rest // c_tiles
    t = tap // (R * S)
    rs = tap - t * (R * S)
    r = rs // S
    return mb, cb, t, r, rs - r * S


@gluon.jit
def _wg_producer(dy_desc, x_desc, ready, empty, dy_bufs, x_bufs, geo, grp,
                 TD: gl.constexpr, TH: gl.constexpr, TW: gl.constexpr, STAGES: gl.constexpr, SPLIT: gl.constexpr,
                 STRIDED: gl.constexpr, GROUPED: gl.constexpr):  # fmt: skip
    """``GROUPED``: the tile's output-channel block lies in super-group ``mb * BM // KS``, whose
    ``GC`` input channels its input-channel blocks ``cb`` count from (``grp`` = (GC, KS, CG, KG))."""
    (num_units, tiles, m_tiles, c_tiles, k_blocks, OD, P, Q, pd, ph, pw, dd, dh, dw, R, S, D, HS, SD, SH, SW, C) = geo
    BM: gl.constexpr = dy_desc.block_type.shape[4]
    BN: gl.constexpr = x_desc.block_type.shape[4]
    nbytes: gl.constexpr = dy_desc.block_type.nbytes + x_desc.block_type.nbytes
    it = 0
    for u in range(gl.program_id(0), num_units, gl.num_programs(0)):
        tile, j0, j1 = _wg_unit(u, tiles, k_blocks, SPLIT)
        mb, cb, t, r, s = _wg_tile(tile, m_tiles, c_tiles, R, S)
        c0 = cb * BN
        if GROUPED:
            GC, KS, CG, KG = grp
            c0 += (mb * BM // KS) * GC
        # The pixel block and the tap's stride-phase rows are carried from step to step rather
        # than divided out of ``j`` every step: the producer is one warp, and its K steps set
        # the pace (session 58: a fixed ~500 cycles a step in the forward kernel's producer)
        view = (pd, ph, pw, dd, dh, dw, D, HS, SD, SH, SW, C)
        ah, aw = _phase_rows(r, s, view, STRIDED)
        _, n, d0, h0, w0 = _tile_origin(j0, 1, OD, P, Q, TD, TH, TW)
        for _j in range(j0, j1):
            slot = it % STAGES
            # a slot's first fill waits on the barrier's initial (completed) phase
            mbarrier.wait(empty.index(slot), ((it // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(slot), nbytes)
            tma.async_copy_global_to_shared(dy_desc, [n, d0, h0, w0, mb * BM], ready.index(slot), dy_bufs.index(slot))
            coord = _x_coord(n, d0, h0, w0, t, r, s, ah, aw, c0, view, STRIDED)
            tma.async_copy_global_to_shared(x_desc, coord, ready.index(slot), x_bufs.index(slot))
            it += 1
            n, d0, h0, w0 = _next_block(n, d0, h0, w0, OD, P, Q, TD, TH, TW)


@gluon.jit
def _dw_tile(dw_ptr, k, c, t, r, s, dws, K, C, grp, GROUPED: gl.constexpr):
    """(pointers into dw, mask) of a tile's ``k`` output channels (rows) by ``c`` input channels
    (columns) at tap (t, r, s); dw's element strides ``dws`` = (k, c, t, r, s). ``GROUPED``:
    ``c`` counts the super-group's ``GC`` input channels, and only each output channel's own
    group's are gradients (the rest of the block-diagonal product is discarded): column ``c`` is
    channel ``c % CG`` of group slot ``c // CG``, output channel ``k``'s own slot is
    ``(k // KG) % (GC // CG)``, and dw is ``[K, CG, T, R, S]``. (``tests/gluon_emu.py`` runs it
    with a pointer stand-in.)"""
    (sdk, sdc, sdt, sdr, sds) = dws
    if GROUPED:
        GC, KS, CG, KG = grp
        ptrs = (dw_ptr + (t * sdt + r * sdr + s * sds) + gl.expand_dims(k.to(gl.int64) * sdk, 1)
                + gl.expand_dims((c % CG) * sdc, 0))  # fmt: skip
        own = gl.expand_dims(c // CG, 0) == gl.expand_dims((k // KG) % (GC // CG), 1)
        mask = gl.expand_dims(k < K, 1) & own
    else:
        ptrs = (dw_ptr + (t * sdt + r * sdr + s * sds) + gl.expand_dims(k.to(gl.int64) * sdk, 1)
                + gl.expand_dims(c * sdc, 0))  # fmt: skip
        mask = gl.expand_dims(k < K, 1) & gl.expand_dims(c < C, 0)
    return ptrs, mask


@gluon.jit
def _wg_consumer(ws_ptr, dw_ptr, dws, K, ready, empty, dy_bufs, x_bufs, geo, grp,
                 TD: gl.constexpr, TH: gl.constexpr, TW: gl.constexpr, STAGES: gl.constexpr, SPLIT: gl.constexpr,
                 GROUPED: gl.constexpr, PDL_TRIGGER: gl.constexpr):  # fmt: skip
    (num_units, tiles, m_tiles, c_tiles, k_blocks, OD, P, Q, pd, ph, pw, dd, dh, dw, R, S, D, HS, SD, SH, SW, C) = geo
    BM: gl.constexpr = dy_bufs.type.shape[5]
    BN: gl.constexpr = x_bufs.type.shape[5]
    BP: gl.constexpr = TD * TH * TW
    WARPS: gl.constexpr = gl.num_warps()
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, BN, 16]
    )
    rows = gl.arange(0, BM, layout=gl.SliceLayout(1, acc_layout))
    cols = gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
    offs = gl.expand_dims(rows, 1) * BN + gl.expand_dims(cols, 0)
    it = 0
    for u in range(gl.program_id(0), num_units, gl.num_programs(0)):
        tile, j0, j1 = _wg_unit(u, tiles, k_blocks, SPLIT)
        acc = gl.zeros([BM, BN], gl.float32, acc_layout)
        for j in range(j0, j1):
            slot = it % STAGES
            mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
            # dy^T: the pixel-major box read transposed (wgmma takes an MN-major 16-bit A)
            a = dy_bufs.index(slot).reshape([BP, BM]).permute((1, 0))
            b = x_bufs.index(slot).reshape([BP, BN])
            acc = warpgroup_mma(a, b, acc, is_async=True)
            # one wgmma in flight: the previous block's slot is read, hand it back
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), pred=j > j0)
            it += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES))
        if PDL_TRIGGER:
            # the program's last unit: the finish kernel may launch now (it waits for this grid's
            # stores). Not at the kernel's start: on an H100 that cost 1.3-1.4 us on two 3x3 layers
            # (session 48), the finish kernel's programs waiting beside this one's from the start
            if u + gl.num_programs(0) >= num_units:
                gdc_launch_dependents()
        if SPLIT > 1:
            # the unit's fp32 partial (split-major, as units are numbered), for ws_wgrad_finish_kernel
            gl.store(ws_ptr + u.to(gl.int64) * (BM * BN) + offs, acc)
        else:
            # the whole reduction: dw's tile at its tap, in dw's dtype (no workspace round trip)
            mb, cb, t, r, s = _wg_tile(tile, m_tiles, c_tiles, R, S)
            ptrs, mask = _dw_tile(dw_ptr, mb * BM + rows, cb * BN + cols, t, r, s, dws, K, C, grp, GROUPED)
            gl.store(ptrs, acc.to(dw_ptr.dtype.element_ty), mask=mask)


@gluon.jit
def ws_wgrad3d_kernel(dy_desc, x_desc, ws_ptr, dw_ptr, K, sdk, sdc, sdt, sdr, sds, num_units, tiles, m_tiles, c_tiles, k_blocks, OD, P, Q, pd, ph, pw,
                      dd, dh, dw, R, S, D, HS, SD, SH, SW, C, GC, KS, CG, KG, TD: gl.constexpr, TH: gl.constexpr,
                      TW: gl.constexpr, STAGES: gl.constexpr, SPLIT: gl.constexpr, STRIDED: gl.constexpr,
                      GROUPED: gl.constexpr, PDL_TRIGGER: gl.constexpr = False):  # fmt: skip
    """Persistent warp-specialized 3-D wgrad (module docstring); grid = (programs,). ``SPLIT`` >
    1: writes one fp32 ``BM x BN`` partial per work unit to ``ws_ptr``; else each tile straight
    into ``dw [K, C, T, R, S]`` (element strides ``sdk, sdc, sdt, sdr, sds``). ``GROUPED``: wide
    groups (super-groups of ``GC`` input and ``KS`` output channels, ``CG`` and ``KG`` a narrow
    group's) that no tile crosses, dw ``[K, CG, T, R, S]`` (``_dw_tile``). ``PDL_TRIGGER``: the
    finish kernel, a programmatic dependent launch, may start once every program's consumer has
    finished its last unit's main loop (the trigger); it waits for this kernel's completion and
    memory (``gdc_wait``) before reading a partial."""
    dy_bufs = gl.allocate_shared_memory(dy_desc.dtype, [STAGES] + dy_desc.block_type.shape, dy_desc.layout)
    x_bufs = gl.allocate_shared_memory(x_desc.dtype, [STAGES] + x_desc.block_type.shape, x_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    geo = (num_units, tiles, m_tiles, c_tiles, k_blocks, OD, P, Q, pd, ph, pw, dd, dh, dw, R, S, D, HS, SD, SH, SW, C)
    grp = (GC, KS, CG, KG)
    gl.warp_specialize(
        [
            (
                _wg_consumer,
                (
                    ws_ptr,
                    dw_ptr,
                    (sdk, sdc, sdt, sdr, sds),
                    K,
                    ready,
                    empty,
                    dy_bufs,
                    x_bufs,
                    geo,
                    grp,
                    TD,
                    TH,
                    TW,
                    STAGES,
                    SPLIT,
                    GROUPED,
                    PDL_TRIGGER,
                ),
            ),
            (
                _wg_producer,
                (dy_desc, x_desc, ready, empty, dy_bufs, x_bufs, geo, grp, TD, TH, TW, STAGES, SPLIT, STRIDED, GROUPED),
            ),
        ],
        [1],
        [48],
    )


@triton.jit
def ws_wgrad_finish_kernel(ws_ptr, dw_ptr, tiles, m_tiles, c_tiles, split, K, C, R, S, sdk, sdc, sdt, sdr, sds,
                           GC, CG, KG, BM: tl.constexpr, BN: tl.constexpr, SUB: tl.constexpr,
                           GROUPED: tl.constexpr, PDL: tl.constexpr = False):  # fmt: skip
    """The second half of ``ws_wgrad3d_kernel``: grid = (tiles, BM / SUB). Sums ``SUB`` rows of
    one tile over its ``split`` partials in split order (unit ``sp * tiles + tile``) and stores
    them into ``dw [K, C, T, R, S]`` (element strides ``sdk, sdc, sdt, sdr, sds``); ``GROUPED``:
    each output channel's own group's columns only, into ``dw [K, CG, T, R, S]``, as the unsplit
    kernel's ``_dw_tile``. ``PDL``: launched as a programmatic dependent of ``ws_wgrad3d_kernel``,
    so it may start before the partials are written; it waits for them first."""
    if PDL:
        gdc_wait()
    tile = tl.program_id(0)
    rows = tl.program_id(1) * SUB + tl.arange(0, SUB)
    cols = tl.arange(0, BN)
    offs = rows[:, None] * BN + cols[None, :]
    acc = tl.zeros((SUB, BN), dtype=tl.float32)
    for sp in range(split):
        acc += tl.load(ws_ptr + (sp * tiles + tile).to(tl.int64) * (BM * BN) + offs)
    # the tile decode of _wg_tile
    mb = tile % m_tiles
    rest = tile // m_tiles
    cb = rest % c_tiles
    tap = rest // c_tiles
    t = tap // (R * S)
    rs = tap % (R * S)
    k = mb * BM + rows
    c = cb * BN + cols
    tap = t * sdt + (rs // S) * sdr + (rs % S) * sds
    if GROUPED:
        ptrs = dw_ptr + tap + k[:, None].to(tl.int64) * sdk + (c % CG)[None, :] * sdc
        own = (c // CG)[None, :] == ((k // KG) % (GC // CG))[:, None]
        tl.store(ptrs, acc.to(dw_ptr.dtype.element_ty), mask=(k < K)[:, None] & own)
    else:
        ptrs = dw_ptr + tap + k[:, None].to(tl.int64) * sdk + c[None, :] * sdc
        tl.store(ptrs, acc.to(dw_ptr.dtype.element_ty), mask=(k < K)[:, None] & (c < C)[None, :])


def wgrad_geometry(x_shape, dy_shape, taps, tile, block_m: int, block_n: int, split: int, channels: int = 0):
    """``(tiles, m_tiles, c_tiles, k_blocks, units)`` of a launch (host side of ``_wg_unit``);
    ``channels``: the input channels a tile's channel blocks count (a super-group's; else C)."""
    n, c = x_shape[0], channels or x_shape[1]
    k, od, p, q = dy_shape[1], dy_shape[2], dy_shape[3], dy_shape[4]
    td, th, tw = tile
    m_tiles, c_tiles = cdiv(k, block_m), cdiv(c, block_n)
    tiles = m_tiles * taps[0] * taps[1] * taps[2] * c_tiles
    k_blocks = n * cdiv(od, td) * cdiv(p, th) * cdiv(q, tw)
    return tiles, m_tiles, c_tiles, k_blocks, tiles * split


def ws_wgrad3d(x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor, taps: tuple[int, int, int],
               pad: tuple[int, int, int], dilation: tuple[int, int, int], stride: tuple[int, int, int],
               tile: tuple[int, int, int], block_m: int, block_n: int, stages: int = 4, warps: int = 8,
               split: int = 1, per_sm: int = 1, compile_only: bool = False, launch=None,
               super_groups: tuple[int, int, int, int] | None = None):  # fmt: skip
    """``dw = wgrad(x, dy)`` of ``conv3d(x, w, stride, padding=pad, dilation=dilation)`` (groups 1,
    or grouped: ``super_groups``) with ``ws_wgrad3d_kernel`` and ``ws_wgrad_finish_kernel``.

    ``x`` [N, C, D, H, W] and ``dy`` [N, K, OD, P, Q] are 16-bit with channel stride 1 and
    16-byte-aligned pixel strides (channels_last_3d; a strided layer needs a dense ``x`` whose H
    and W are multiples of the stride, C a multiple of ``block_n`` and ``tile`` one depth deep);
    ``dw`` [K, C, T, R, S] of x's dtype, any strides. ``tile`` is the (depth, rows, columns) block
    of output pixels of one reduction step (a multiple of 16 pixels); ``block_m`` output channels
    per tile (64 per consumer warpgroup: ``warps`` = block_m / 16), ``block_n`` input channels
    (at most 256); ``split`` pixel ranges per tile (none of them empty). ``compile_only`` returns
    (kernel, grid, args, options) without launching. ``launch`` (a ``matmul.launch.Launch`` kept
    per call plan) is bound by this call; ``ws_wgrad_run`` replays it on later calls.
    ``super_groups`` = (GC, KS, CG, KG): a grouped layer whose narrow groups (``CG`` input and
    ``KG`` output channels) are taken ``GC / CG`` at a time as super-groups, each tile in one
    super-group (``block_m`` divides KS, ``block_n`` divides GC): the block-diagonal product, of
    which ``dw [K, CG, T, R, S]`` receives each output channel's own group."""
    n, c, d, h, wd = x.shape
    k, od, p, q = dy.shape[1], dy.shape[2], dy.shape[3], dy.shape[4]
    sd, sh, sw = stride
    td, th, tw = tile
    strided = stride != (1, 1, 1)
    if strided:
        assert c % block_n == 0, "ws_wgrad3d: a strided layer needs C a multiple of block_n"
        assert td == 1 or depth_free(taps, pad, stride), "ws_wgrad3d: strided tiles are one depth deep"
    x_desc = input_desc(x, stride, tile, block_n)
    dy_desc = ndhwc_desc(dy, tile, block_m)
    gc, ks, cg, kg = super_groups or (c, k, c, k)
    if super_groups is not None and (gc % block_n or ks % block_m or gc % cg or ks % kg or gc // cg != ks // kg):
        raise ValueError(f"ws_wgrad3d: super-groups of {gc} input and {ks} output channels (groups of {cg} -> {kg}) "
                         f"need block_n ({block_n}) dividing the first and block_m ({block_m}) the second")  # fmt: skip
    tiles, m_tiles, c_tiles, k_blocks, units = wgrad_geometry(x.shape, dy.shape, taps, tile, block_m, block_n, split,
                                                              gc)  # fmt: skip
    assert split == 1 or (split - 1) * cdiv(k_blocks, split) < k_blocks, "ws_wgrad3d: a pixel range would be empty"
    # split 1: the kernel stores dw itself
    ws = torch.empty(units * block_m * block_n if split > 1 else 1, dtype=torch.float32, device=x.device)
    grid = (min(units, per_sm * sm_count()),)
    args = (dy_desc, x_desc, ws, dw, k, *dw.stride(), units, tiles, m_tiles, c_tiles, k_blocks, od, p, q, *pad, *dilation, taps[1],
            taps[2], d, h // sh, sd, sh, sw, c, gc, ks, cg, kg)  # fmt: skip
    # registers are allocated for warps + 4 (the producer's warpgroup) warps at launch, then moved
    # from the producer (48 each) to the consumers
    kw = dict(TD=td, TH=th, TW=tw, STAGES=stages, SPLIT=split, STRIDED=strided, GROUPED=int(super_groups is not None),
              num_warps=warps, maxnreg=min(256, (65536 // (per_sm * (warps + 4) * 32)) // 8 * 8))  # fmt: skip
    # every constexpr given (tests/gluon_emu.py binds the kernel's parameters from these)
    kw["PDL_TRIGGER"] = split > 1 and pdl_enabled()
    if compile_only:
        return ws_wgrad3d_kernel, grid, args, kw
    gluon_launch(launch, ws_wgrad3d_kernel, grid, args, kw)
    if split > 1:
        wgrad_finish(ws, dw, tiles, m_tiles, c_tiles, split, taps, block_m, block_n, launch=aux_of(launch),
                     super_groups=super_groups)  # fmt: skip
    if launch is not None:
        launch.extra = ws.numel()
    return None


def wgrad_finish(ws: torch.Tensor, dw: torch.Tensor, tiles: int, m_tiles: int, c_tiles: int, split: int,
                 taps: tuple[int, int, int], block_m: int, block_n: int, compile_only: bool = False,
                 launch=None, super_groups: tuple[int, int, int, int] | None = None) -> None:  # fmt: skip
    """``ws_wgrad_finish_kernel`` over a workspace of ``tiles * split`` fp32 partials into ``dw``
    [K, C, T, R, S] (grouped, ``ws_wgrad3d``'s ``super_groups``: [K, CG, T, R, S]): rows of each
    tile split over programs until there are two per SM (``compile_only``: compiled, not
    launched)."""
    sub = min(32, block_m)
    while sub > 4 and tiles * (block_m // sub) < 2 * sm_count():
        sub //= 2
    k, c = dw.shape[0], dw.shape[1]
    gc, _, cg, kg = super_groups or (c, k, c, k)
    args = (ws, dw, tiles, m_tiles, c_tiles, split, k, c, taps[1], taps[2], *dw.stride(), gc, cg, kg)
    kw = dict(BM=block_m, BN=block_n, SUB=sub, GROUPED=int(super_groups is not None), num_warps=4)
    if pdl_enabled():  # started while ws_wgrad3d_kernel's last units run (which triggers it)
        kw.update(PDL=True, launch_pdl=True)
    if compile_only:
        ws_wgrad_finish_kernel.warmup(*args, grid=(tiles, block_m // sub), **kw)
        return
    gluon_launch(launch, ws_wgrad_finish_kernel, (tiles, block_m // sub), args, kw)


def ws_wgrad_run(x, dy, dw, taps, pad, dilation, stride, cfg, launch=None,
                 super_groups: tuple[int, int, int, int] | None = None) -> None:  # fmt: skip
    """``ws_wgrad3d`` with an algorithm ``Config`` (``conv3d.Wgrad3dWs``'s fields). Under the
    tuner's compile-only pass (``fprop.COMPILE_ONLY``) the kernels are compiled, not launched, so
    that the candidates compile in parallel. ``launch``: the call plan's handle; once bound (a
    warm plan), the call is its replay, with nothing built. ``super_groups``: ``ws_wgrad3d``'s."""
    if fast_ready(launch, cfg.split_k):
        ws_wgrad3d_replay(launch, x, dy, dw, cfg.split_k)
        return
    from .fprop import COMPILE_ONLY

    tile = (cfg.tile_n, cfg.tile_h, cfg.tile_w)
    call = dict(stages=cfg.num_stages, warps=cfg.num_warps, split=cfg.split_k, per_sm=cfg.persistent or 1,
                super_groups=super_groups)  # fmt: skip
    if COMPILE_ONLY.get():
        fn, grid, args, kw = ws_wgrad3d(x, dy, dw, taps, pad, dilation, stride, tile, cfg.block_m, cfg.block_n,
                                        compile_only=True, **call)  # fmt: skip
        fn.warmup(*args, grid=grid, **kw)
        if cfg.split_k > 1:
            tiles, m_tiles, c_tiles, _, _ = wgrad_geometry(x.shape, dy.shape, taps, tile, cfg.block_m, cfg.block_n, 1,
                                                           super_groups[0] if super_groups else 0)  # fmt: skip
            wgrad_finish(args[2], dw, tiles, m_tiles, c_tiles, cfg.split_k, taps, cfg.block_m, cfg.block_n, True,
                         super_groups=super_groups)  # fmt: skip
        return
    ws_wgrad3d(x, dy, dw, taps, pad, dilation, stride, tile, cfg.block_m, cfg.block_n, launch=launch, **call)
