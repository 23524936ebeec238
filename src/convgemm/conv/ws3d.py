"""A warp-specialized implicit GEMM for Hopper, written in Gluon (experimental).

The Triton kernels of ``conv3d_tma`` issue their TMA loads and their ``wgmma`` from the same warps,
software-pipelined; a tile's epilogue stalls the tensor cores, and one 8-warp program per SM
reaches about 65-88% of the SM's peak (benchmarks/NOTES.md, session 19). Here the work is split
the way CUTLASS's Hopper kernels split it:

- a *producer* warp issues, for every K step, the TMA box of the NDHWC input shifted by that
  step's filter tap (``[1, TD, TH, TW, BK]``; out-of-bounds rows are the zero padding) and the
  weight tile, into a ring of ``STAGES`` shared-memory slots guarded by mbarriers;
- the *consumer* warpgroups (the default partition) run ``wgmma`` on each slot as it fills, free
  it once the next one is issued, and finish each tile (bias, activation, TMA store) while the
  producer already fills the ring with the next tile's operands. With ``EPI`` = 1 the tile is
  stored from the accumulator's registers instead (``_epilogue_direct``), and the shared memory
  of the staging tile goes to more ring stages (fp32 / TF32 tiles: ``conv3d.Ws3d.direct_form``).

Programs are persistent: program ``p`` takes work units ``p, p + programs, ...`` (an output
tile, or with ``SPLIT`` > 1 one of its K ranges, whose fp32 partials ``ws_split_finish_kernel``
sums in a second launch). The GEMM is ``y[pixels, K] = im2col(x)[pixels, T*R*S*C] @ w[K,
T*R*S*C]^T``: output pixels on M (the input box is the A operand, K-major), output channels on N
(the weight tile, read transposed). A strided layer reads the stride-phase view of
``conv3d.input_descriptor3d``, tiles one output depth deep unless the filter is one tap deep,
unpadded and unstrided along depth (``conv3d.depth_free``: a 2-D layer, the batch as depth); a
3-D layer whose depth is a multiple of its depth stride reads the phase-grid view instead
(``input_desc``, ``phase_grid``), with tiles of any depth.

Groups 1, or (``GROUPED``, ``fprop.GroupedWs``) wide groups that never share a tile: each
tile's channel block lies in one group, whose input channels are the K steps' channels; 16-bit
dtypes or fp32 as TF32 products (wgmma reads fp32 operands as TF32; both are K-major here, which
TF32 requires), C (a group's, when grouped) a multiple of BLOCK_K. Gluon does not run under ``TRITON_INTERPRET``:
the kernel runs on compute capability 9.x GPUs only (wgmma), and only the GPU tests run it.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from .._runtime import cdiv, sm_count
from ..matmul.blocks import stream_k_reduce
from ..matmul.launch import aux_of
from .conv3d import depth_free, phase_grid
from .fprop import pdl_enabled
from .loaders import fix_list_append_if_nonfinite
from .loaders3d import _tile3, depth_k_range, phase_grid_coord
from .ws_replay import counters, fast_ready, ws_conv3d_replay


@gluon.jit
def _pix_origin(pix, OD, P, Q, TD: gl.constexpr, TH: gl.constexpr, TW: gl.constexpr):
    """Pixel block index -> (image, first output depth, row, column): ``loaders3d._tile3``'s
    order (``ws_split_finish_kernel`` calls that one), written again here in Gluon."""
    tiles_w = gl.cdiv(Q, TW)
    tiles_hw = gl.cdiv(P, TH) * tiles_w
    per_image = gl.cdiv(OD, TD) * tiles_hw
    n = pix // per_image
    rem = pix - n * per_image
    td = rem // tiles_hw
    rem = rem - td * tiles_hw
    th = rem // tiles_w
    return n, td * TD, th * TH, (rem - th * tiles_w) * TW


@gluon.jit
def _next_block(n, d0, h0, w0, OD, P, Q, TD: gl.constexpr, TH: gl.constexpr, TW: gl.constexpr):
    """The pixel block after the one at (n, d0, h0, w0) in ``_pix_origin``'s order (columns, then
    rows, depths, images), by comparisons instead of ``_pix_origin``'s divisions: a block's next
    column block starts past the output's width exactly when it was the row's last
    (``cdiv(Q, TW)`` blocks a row), and likewise for rows and depths."""
    wrap_w = w0 + TW >= Q
    w0 = gl.where(wrap_w, 0, w0 + TW)
    h1 = h0 + gl.where(wrap_w, TH, 0)
    wrap_h = h1 >= P
    h0 = gl.where(wrap_h, 0, h1)
    d1 = d0 + gl.where(wrap_h, TD, 0)
    wrap_d = d1 >= OD
    d0 = gl.where(wrap_d, 0, d1)
    return n + gl.where(wrap_d, 1, 0), d0, h0, w0


@gluon.jit
def _tile_origin(tile, tiles_n, OD, P, Q, TD: gl.constexpr, TH: gl.constexpr, TW: gl.constexpr):
    """Output tile index -> (channel block, image, first output depth, row, column); the channel
    blocks of one pixel block are consecutive tiles (they share the input box in L2)."""
    n, d0, h0, w0 = _pix_origin(tile // tiles_n, OD, P, Q, TD, TH, TW)
    return tile % tiles_n, n, d0, h0, w0


@gluon.jit
def _stacked_block(u, ci, tiles_n, OD, P, Q, NPIX, TD: gl.constexpr, TH: gl.constexpr, TW: gl.constexpr,
                   CONS: gl.constexpr):  # fmt: skip
    """``STACK``: consumer ``ci``'s pixel block of unit ``u`` -> (whether it is a block of the
    output, image, first output depth, row, column). A unit is ``CONS`` consecutive pixel blocks
    (``_pix_origin``'s order) under one channel block, so the blocks need not lie side by side:
    a 14x14 layer's 64-image x 1-pixel blocks make 192-pixel tiles as well as a wide row's. The
    last unit's blocks past the end (``NPIX`` blocks in all) read the last block again and are
    not stored."""
    pix = (u // tiles_n) * CONS + ci
    n, d0, h0, w0 = _pix_origin(gl.minimum(pix, NPIX - 1), OD, P, Q, TD, TH, TW)
    return pix < NPIX, n, d0, h0, w0


@gluon.jit
def _unit(u, geo, TD: gl.constexpr, TH: gl.constexpr, TW: gl.constexpr, SPLIT: gl.constexpr):
    """Work unit -> (channel block, image, first output depth, row, column, first K step, end K
    step): SPLIT units per tile, in K order, over the K steps of the depth taps that reach into
    the volume (``loaders3d.depth_k_range``). A unit's range may be empty (its partial is then zero)."""
    (num_units, tiles_n, OD, P, Q, pd, ph, pw, dd, dh, dw, R, S, c_tiles, k_steps, D, HS, SD, SH, SW, C) = geo
    tile = u
    if SPLIT > 1:
        tile = u // SPLIT
    pid_n, n, d0, h0, w0 = _tile_origin(tile, tiles_n, OD, P, Q, TD, TH, TW)
    lo, hi = depth_k_range(d0 * SD - pd, (d0 + TD - 1) * SD - pd, D, dd, R * S * c_tiles, k_steps)
    if SPLIT > 1:
        per = gl.cdiv(hi - lo, SPLIT)
        k0 = lo + (u - tile * SPLIT) * per
        return pid_n, n, d0, h0, w0, k0, gl.minimum(k0 + per, hi)
    else:
        return pid_n, n, d0, h0, w0, lo, hi


@gluon.jit
def _phase_rows(r, s, view, STRIDED: gl.constexpr):
    """``STRIDED == 1``: the stride-phase view's row and column steps (ah, aw) of tap row ``r``
    and column ``s``: tap offset o = a*stride + phase is view row a of phase ``phase``, with
    floor division (o may be negative). Else zeros. Two divisions by run-time strides: the
    producer computes them once a tap, not once a K step."""
    (pd, ph, pw, dd, dh, dw, D, HS, SD, SH, SW, C) = view
    if STRIDED == 1:
        ah = (r * dh - ph + SH * ph) // SH - ph
        aw = (s * dw - pw + SW * pw) // SW - pw
    else:
        ah = r * 0
        aw = s * 0
    return ah, aw


@gluon.jit
def _tap_of(tap, R, S, view, STRIDED: gl.constexpr):
    """Filter tap number -> (t, r, s, ah, aw): its depth, row and column, and ``_phase_rows``.
    Five divisions by run-time values; ``_load_steps`` calls it when a K step starts a new tap."""
    t = tap // (R * S)
    rs = tap - t * (R * S)
    r = rs // S
    s = rs - r * S
    ah, aw = _phase_rows(r, s, view, STRIDED)
    return t, r, s, ah, aw


@gluon.jit
def _x_coord(n, d0, h0, w0, t, r, s, ah, aw, c0, view, STRIDED: gl.constexpr):
    """The input box's coordinate for the pixel block at (n, d0, h0, w0) shifted by filter tap
    (t, r, s), channels from ``c0``, given the tap's phase rows ``ah``, ``aw`` (``_phase_rows``:
    the producers compute them once a tap). Stride 1: the NDHWC tensor. ``STRIDED``: the
    stride-phase view [N*D, H/SH, SH, W/SW, SW*C] (``conv3d.input_descriptor3d``); a depth in the
    padding moves the box wholly out of bounds (rows HS and on), as the Triton loader does.
    ``STRIDED == 2``: the phase-grid view (``input_desc``, ``grid=True``)."""
    (pd, ph, pw, dd, dh, dw, D, HS, SD, SH, SW, C) = view
    if STRIDED == 2:
        # the phase-grid view [D/SD, H/SH, N*D*H, W/SW, SW*C] (``input_desc``, grid=True): depth
        # and height phases pick the third axis's row, and a tap's depth and row offsets step the
        # first two axes, so a box may be several depths deep and a padded depth or row is out of
        # bounds there (zero-filled)
        cd, ch, crow, cw, cc = phase_grid_coord(n, d0, h0, w0, t, r, s, c0, pd, ph, pw, dd, dh, dw, D, HS * SH, SD,
                                                SH, SW, C)  # fmt: skip
        return [cd, ch, crow, cw, cc]
    elif STRIDED:
        idp = d0 * SD - pd + t * dd
        oh = r * dh - ph
        ow = s * dw - pw
        row = gl.where((idp >= 0) & (idp < D), h0 + ah, HS)
        return [n * D + idp, row, oh - ah * SH, w0 + aw, (ow - aw * SW) * C + c0]
    else:
        return [n, d0 + t * dd - pd, h0 + r * dh - ph, w0 + s * dw - pw, c0]


@gluon.jit
def _segment(pos, end, k_steps):
    """Stream-K: the segment of a program's share ``[pos, end)`` of the (tile, K step) pairs that
    starts at ``pos``: (tile, first K step, end K step), up to the tile's end or the share's."""
    tile = pos // k_steps
    kt0 = pos - tile * k_steps
    return tile, kt0, gl.minimum(k_steps, kt0 + (end - pos))


@gluon.jit
def _dp_units(num_units, k_steps, STREAM: gl.constexpr):
    """Stream-K: how many tiles the programs run whole before splitting K (``STREAM`` = 2, the
    data-parallel + stream-K hybrid: the whole waves, tile ``p`` on program ``p % programs``;
    the K steps of the remaining tiles are then split evenly over every program), or 0 (``STREAM``
    = 1: every tile's K steps split). The split needs a K step per program
    (``matmul.blocks.stream_k_reduce`` counts a ticket from every program that owns a pair of a
    tile), so a remainder of fewer pairs than programs takes the last whole wave with it."""
    dp = 0
    if STREAM == 2:
        programs = gl.num_programs(0)
        dp = num_units // programs * programs
        rest = num_units - dp
        dp = gl.where((rest > 0) & (rest * k_steps < programs), dp - programs, dp)
    return dp


@gluon.jit
def _share(num_units, k_steps):
    """Stream-K: this program's share ``[first, end)`` of the ``num_units * k_steps`` (tile, K
    step) pairs (``matmul.blocks.stream_k_owner``'s split: program p owns ``[p * T // programs,
    (p + 1) * T // programs)``)."""
    total = num_units * k_steps
    pid = gl.program_id(0)
    programs = gl.num_programs(0)
    return pid * total // programs, (pid + 1) * total // programs


@gluon.jit
def _load_steps(x_desc, w_desc, ready, empty, x_bufs, w_bufs, it, k0, k1, pid_n, n, d0, h0, w0, geo, grp, u,
                TD: gl.constexpr, TH: gl.constexpr, TW: gl.constexpr, STAGES: gl.constexpr,
                STRIDED: gl.constexpr, CONS: gl.constexpr, GROUPED: gl.constexpr,
                STACK: gl.constexpr):  # fmt: skip
    """The producer's K steps ``[k0, k1)`` of one tile into the ring (slot counter ``it``, returned
    advanced): per step, each consumer's input box shifted by the step's tap and the weight tile.
    ``GROUPED``: the tile's channel block ``pid_n`` lies in super-group ``pid_n // KB``, whose
    ``GC`` input channels are the K steps' channels (``grp`` = (GC, KB, NPIX)). ``STACK``: the
    consumers' blocks are unit ``u``'s consecutive pixel blocks (``_stacked_block``), not the
    columns ``w0 + ci * TW``."""
    (num_units, tiles_n, OD, P, Q, pd, ph, pw, dd, dh, dw, R, S, c_tiles, k_steps, D, HS, SD, SH, SW, C) = geo
    BK: gl.constexpr = w_desc.block_type.shape[1]
    BN: gl.constexpr = w_desc.block_type.shape[0]
    c_base = 0
    if GROUPED:
        GC, KB, NPIX = grp
        c_base = (pid_n // KB) * GC
    # a slot holds one input box per consumer (their pixel blocks side by side along the columns,
    # or consecutive blocks: STACK) and the weight tile they share
    nbytes: gl.constexpr = CONS * x_desc.block_type.nbytes + w_desc.block_type.nbytes
    if STACK:
        # each consumer's block, once per unit: the divisions stay out of the K loop (the third
        # entry is the second again when there are two consumers)
        npix = grp[2]
        blocks = (_stacked_block(u, 0, tiles_n, OD, P, Q, npix, TD, TH, TW, CONS),
                  _stacked_block(u, 1, tiles_n, OD, P, Q, npix, TD, TH, TW, CONS),
                  _stacked_block(u, CONS - 1, tiles_n, OD, P, Q, npix, TD, TH, TW, CONS))  # fmt: skip
    view = (pd, ph, pw, dd, dh, dw, D, HS, SD, SH, SW, C)
    # The K step's tap and channel block, and the tap's phase rows, carried from step to step:
    # divided out once a tap rather than once a step. The producer is one warp, and each
    # division by a run-time value is a dependent chain of about ten instructions; session 58's
    # sm_90 SASS had 119 instructions a K step in this loop (189 on the stride-phase view),
    # and the kernel's K steps took a fixed ~500 cycles whatever their MMA work.
    tap = k0 // c_tiles
    cb = k0 - tap * c_tiles
    t, r, s, ah, aw = _tap_of(tap, R, S, view, STRIDED)
    for kt in range(k0, k1):
        slot = it % STAGES
        # a slot's first fill waits on the barrier's initial (completed) phase
        mbarrier.wait(empty.index(slot), ((it // STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(slot), nbytes)
        for ci in gl.static_range(CONS):
            if STACK:
                _, bn_, bd, bh, bw = blocks[ci]
            else:
                bn_, bd, bh, bw = n, d0, h0, w0 + ci * TW
            coord = _x_coord(bn_, bd, bh, bw, t, r, s, ah, aw, c_base + cb * BK, view, STRIDED)
            tma.async_copy_global_to_shared(x_desc, coord, ready.index(slot), x_bufs.index(slot * CONS + ci))
        tma.async_copy_global_to_shared(w_desc, [pid_n * BN, kt * BK], ready.index(slot), w_bufs.index(slot))
        it += 1
        cb += 1
        if cb == c_tiles:
            cb = cb * 0
            tap += 1
            t, r, s, ah, aw = _tap_of(tap, R, S, view, STRIDED)
    return it


@gluon.jit
def _producer(x_desc, w_desc, ready, empty, x_bufs, w_bufs, geo, grp,
              TD: gl.constexpr, TH: gl.constexpr, TW: gl.constexpr, STAGES: gl.constexpr, SPLIT: gl.constexpr,
              STRIDED: gl.constexpr, CONS: gl.constexpr, STREAM: gl.constexpr, GROUPED: gl.constexpr,
              STACK: gl.constexpr):  # fmt: skip
    (num_units, tiles_n, OD, P, Q, pd, ph, pw, dd, dh, dw, R, S, c_tiles, k_steps, D, HS, SD, SH, SW, C) = geo
    it = 0
    if STREAM:
        # the consumer walks the same tiles and segments (``_consumer``)
        dp = _dp_units(num_units, k_steps, STREAM)
        if STREAM == 2:
            for u in range(gl.program_id(0), dp, gl.num_programs(0)):
                pid_n, n, d0, h0, w0 = _tile_origin(u, tiles_n, OD, P, Q, TD, TH, TW)
                it = _load_steps(x_desc, w_desc, ready, empty, x_bufs, w_bufs, it, 0, k_steps, pid_n, n, d0, h0, w0,
                                 geo, grp, u, TD, TH, TW, STAGES, STRIDED, CONS, GROUPED, 0)  # fmt: skip
        pos, end = _share(num_units - dp, k_steps)
        while pos < end:
            tile, k0, k1 = _segment(pos, end, k_steps)
            pid_n, n, d0, h0, w0 = _tile_origin(dp + tile, tiles_n, OD, P, Q, TD, TH, TW)
            it = _load_steps(x_desc, w_desc, ready, empty, x_bufs, w_bufs, it, k0, k1, pid_n, n, d0, h0, w0, geo,
                             grp, tile, TD, TH, TW, STAGES, STRIDED, CONS, GROUPED, 0)  # fmt: skip
            pos += k1 - k0
    else:
        for u in range(gl.program_id(0), num_units, gl.num_programs(0)):
            if STACK:
                # a 2-D layer (one depth tap, no depth padding): every unit runs all its K steps
                pid_n, n, d0, h0, w0, k0, k1 = u % tiles_n, 0, 0, 0, 0, 0, k_steps
            else:
                pid_n, n, d0, h0, w0, k0, k1 = _unit(u, geo, TD, TH, TW * CONS, SPLIT)
            it = _load_steps(x_desc, w_desc, ready, empty, x_bufs, w_bufs, it, k0, k1, pid_n, n, d0, h0, w0, geo,
                             grp, u, TD, TH, TW, STAGES, STRIDED, CONS, GROUPED, STACK)  # fmt: skip


@gluon.jit
def _mma_steps(acc, ready, empty, x_bufs, w_bufs, it, k0, k1, BP: gl.constexpr, STAGES: gl.constexpr,
               CONS: gl.constexpr, CI: gl.constexpr):  # fmt: skip
    """Consumer ``CI``'s wgmma over the ring slots of K steps ``[k0, k1)`` (slot counter ``it``);
    returns the finished accumulator and the advanced counter. Each slot goes back to the
    producer once the next one's wgmma is issued, the last one when all are done."""
    BK: gl.constexpr = w_bufs.type.shape[2]
    for kt in range(k0, k1):
        slot = it % STAGES
        mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
        a = x_bufs.index(slot * CONS + CI).reshape([BP, BK])
        b = w_bufs.index(slot).permute((1, 0))
        acc = warpgroup_mma(a, b, acc, is_async=True)
        # one wgmma in flight: the previous step's slot is read, hand it back
        acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), pred=kt > k0)
        it += 1
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    # the last slot read goes back; a unit with no K steps (all its taps padding) read none
    mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), pred=k1 > k0)
    return acc, it


@gluon.jit
def _epilogue(acc, y_desc, bias_ptr, c_smem, CI: gl.constexpr, K, pid_n, n, d0, h0, w0, acc_layout: gl.constexpr,
              HAS_BIAS: gl.constexpr, ACT: gl.constexpr):  # fmt: skip
    """Bias, activation and the TMA store of one finished tile through consumer ``CI``'s staging
    buffer in ``c_smem`` (after the previous store has read it)."""
    BN: gl.constexpr = y_desc.block_type.shape[4]
    c_mine = c_smem.index(CI)
    c_2d = c_mine.reshape([acc.type.shape[0], BN])
    if HAS_BIAS:
        offs = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
        bias = gl.load(bias_ptr + offs, mask=offs < K, other=0.0).to(gl.float32)
        acc = acc + gl.expand_dims(bias, 0)
    if ACT == "relu":
        acc = gl.where(acc < 0, 0.0, acc)
    tma.store_wait(0)  # the previous tile's store has read c_smem
    c_2d.store(acc.to(y_desc.dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(y_desc, [n, d0, h0, w0, pid_n * BN], c_mine)


@gluon.jit
def _epilogue_direct(acc, y_ptr, bias_ptr, ys, K, OD, P, Q, pid_n, n, d0, h0, w0, acc_layout: gl.constexpr,
                     TH: gl.constexpr, TW: gl.constexpr, HAS_BIAS: gl.constexpr, ACT: gl.constexpr):  # fmt: skip
    """``_epilogue`` without the shared-memory staging tile: bias, activation and plain stores from
    the accumulator's registers (``EPI`` = 1). A consumer's 64 x 256 fp32 staging tile is 64 KB,
    which left a 128 x 256 TF32 tile two ring stages; without it, four fit. In wgmma's
    accumulator layout four threads hold 8 neighbouring channels of a pixel, so every 32-byte
    sector a store touches (fp32) is written whole. ``ys``: y's (image, depth, row, column)
    strides in elements, its channel stride 1."""
    BP: gl.constexpr = acc.type.shape[0]
    BN: gl.constexpr = acc.type.shape[1]
    syn, syd, syh, syw = ys
    rows = gl.arange(0, BP, layout=gl.SliceLayout(1, acc_layout))
    cols = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
    od = d0 + rows // (TH * TW)
    oh = h0 + (rows // TW) % TH
    ow = w0 + rows % TW
    # int64 throughout: a flat 1x1 layer's view is one row of N*H*W pixels, whose column offset
    # alone passes 2**31 elements on large outputs
    row_off = n.to(gl.int64) * syn + od.to(gl.int64) * syd + oh.to(gl.int64) * syh + ow.to(gl.int64) * syw
    if HAS_BIAS:
        bias = gl.load(bias_ptr + cols, mask=cols < K, other=0.0).to(gl.float32)
        acc = acc + gl.expand_dims(bias, 0)
    if ACT == "relu":
        acc = gl.where(acc < 0, 0.0, acc)
    mask = gl.expand_dims((od < OD) & (oh < P) & (ow < Q), 1) & gl.expand_dims(cols < K, 0)
    ptrs = y_ptr + (gl.expand_dims(row_off, 1) + gl.expand_dims(cols, 0))
    gl.store(ptrs, acc.to(y_ptr.dtype.element_ty), mask=mask)


@gluon.jit
def _list_nonfinite(acc, fix_ptr, pid_n, n, d0, h0, w0, OD, P, Q, grp, TD: gl.constexpr, TH: gl.constexpr,
                    TW: gl.constexpr):  # fmt: skip
    """``GROUPED``: a block-diagonal zero times an Inf input is a NaN in another group's output, so a
    pixel block whose sum is not finite goes on the fix-up list (``grouped_tma``'s exact-NaN scheme:
    ``loaders.fix_list_append_if_nonfinite``, recomputed by ``grouped_tma_fixup_kernel``). Its id
    is ``pid_n * NPIX + pixel block``, the pixel blocks of ``TD x TH x TW`` in ``_tile_origin``'s
    order, which the fix-up kernel reads as (channel block, pixel tile) of a 2-D layer whose
    batch is this view's depth. A consumer's block wholly past the last column (``w0 >= Q``, the
    tile's right part) is never listed: its number would name another block, or none, and its
    outputs are not stored anyway."""
    GC, KB, NPIX = grp
    if w0 < Q:
        pix = ((n * gl.cdiv(OD, TD) + d0 // TD) * gl.cdiv(P, TH) + h0 // TH) * gl.cdiv(Q, TW) + w0 // TW
        fix_list_append_if_nonfinite(acc, fix_ptr, pid_n * NPIX + pix)


@gluon.jit
def _consumer(y_desc, bias_ptr, ws_ptr, lock_ptr, ready, empty, x_bufs, w_bufs, c_smem, geo, K, ys, grp,
              TD: gl.constexpr, TH: gl.constexpr, TW: gl.constexpr, HAS_BIAS: gl.constexpr, ACT: gl.constexpr,
              STAGES: gl.constexpr, SPLIT: gl.constexpr, CONS: gl.constexpr, CI: gl.constexpr,
              STREAM: gl.constexpr, EPI: gl.constexpr, GROUPED: gl.constexpr, PDL_TRIGGER: gl.constexpr,
              STACK: gl.constexpr):  # fmt: skip
    """Consumer ``CI`` of ``CONS``: the pixel block ``CI`` of each tile (columns ``CI * TW`` on;
    ``STACK``: the tile's ``CI``-th consecutive pixel block, ``_stacked_block``).
    ``GROUPED`` (unsplit, no stream-K): ``lock_ptr`` is the fix-up list (``_list_nonfinite``).
    ``PDL_TRIGGER`` (no stream-K): the dependent launch after this kernel may start once every
    program's consumers have finished the main loop of its last unit."""
    (num_units, tiles_n, OD, P, Q, pd, ph, pw, dd, dh, dw, R, S, c_tiles, k_steps, D, HS, SD, SH, SW, C) = geo
    BN: gl.constexpr = y_desc.block_type.shape[4]
    BP: gl.constexpr = TD * TH * TW
    WARPS: gl.constexpr = gl.num_warps()
    # wgmma's K is 32 bytes of operand: 16 for 16-bit types, 8 for fp32 (TF32 products)
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, BN, 256 // x_bufs.dtype.primitive_bitwidth]
    )
    # a tile's fp32 partial as written to / read from the workspace (split-K, stream-K)
    rows = gl.arange(0, BP, layout=gl.SliceLayout(1, acc_layout))
    cols = gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
    offs = gl.expand_dims(rows, 1) * BN + gl.expand_dims(cols, 0)
    it = 0
    if STREAM:
        # the (tile, K step) pairs split evenly over the programs: where the tiles are fewer than
        # the SMs (ResNet-50's 14x14 and 7x7 stages: 98 tiles on 132 SMs) every SM still gets the
        # same number of K steps; a tile several programs share is summed by matmul.blocks.stream_k_reduce
        # STREAM = 2: the whole waves' tiles first, unsplit (``_dp_units``); tile indices of the
        # split part below are counted from the first tile after them
        dp = _dp_units(num_units, k_steps, STREAM)
        if STREAM == 2:
            for u in range(gl.program_id(0), dp, gl.num_programs(0)):
                pid_n, n, d0, h0, w0 = _tile_origin(u, tiles_n, OD, P, Q, TD, TH, TW)
                acc, it = _mma_steps(gl.zeros([BP, BN], gl.float32, acc_layout), ready, empty, x_bufs, w_bufs, it,
                                     0, k_steps, BP, STAGES, CONS, CI)  # fmt: skip
                _epilogue(acc, y_desc, bias_ptr, c_smem, CI, K, pid_n, n, d0, h0, w0, acc_layout, HAS_BIAS, ACT)
        first, end = _share(num_units - dp, k_steps)
        pos = first
        while pos < end:
            tile, k0, k1 = _segment(pos, end, k_steps)
            pid_n, n, d0, h0, w0 = _tile_origin(dp + tile, tiles_n, OD, P, Q, TD, TH, TW)
            acc, it = _mma_steps(gl.zeros([BP, BN], gl.float32, acc_layout), ready, empty, x_bufs, w_bufs, it, k0,
                                 k1, BP, STAGES, CONS, CI)  # fmt: skip
            last = True
            if k1 - k0 < k_steps:
                # matmul.blocks' stream-K reduction, on the wgmma layout's offsets
                acc, last = stream_k_reduce(acc, gl.zeros_like(acc), ws_ptr, lock_ptr, offs, tile, k_steps,
                                            gl.program_id(0), pos == first, gl.num_programs(0),
                                            (num_units - dp) * k_steps, BP, BN)  # fmt: skip
            if last:
                _epilogue(acc, y_desc, bias_ptr, c_smem, CI, K, pid_n, n, d0, h0, w0, acc_layout, HAS_BIAS, ACT)
            pos += k1 - k0
    else:
        for u in range(gl.program_id(0), num_units, gl.num_programs(0)):
            keep = True
            if STACK:
                # a 2-D layer: all K steps (the producer's units)
                pid_n, k0, k1 = u % tiles_n, 0, k_steps
                keep, n, d0, h0, wc = _stacked_block(u, CI, tiles_n, OD, P, Q, grp[2], TD, TH, TW, CONS)
            else:
                pid_n, n, d0, h0, w0, k0, k1 = _unit(u, geo, TD, TH, TW * CONS, SPLIT)
                wc = w0 + CI * TW  # this consumer's block: columns CI * TW on
            acc, it = _mma_steps(gl.zeros([BP, BN], gl.float32, acc_layout), ready, empty, x_bufs, w_bufs, it, k0,
                                 k1, BP, STAGES, CONS, CI)  # fmt: skip
            if PDL_TRIGGER:
                # the program's last unit: the finish kernel or fix-up may launch now and wait (gdc_wait)
                # for this grid's stores, as ws_wgrad's consumer does (a trigger at the start cost
                # ws_wgrad 1.3-1.4 us on two 3x3 layers on an H100, session 48)
                if u + gl.num_programs(0) >= num_units:
                    gdc_launch_dependents()
            if GROUPED:
                _list_nonfinite(acc, lock_ptr, pid_n, n, d0, h0, wc, OD, P, Q, grp, TD, TH, TW)
            if SPLIT > 1:
                # this unit's fp32 partial, for ws_split_finish_kernel (tile-major, then split)
                gl.store(ws_ptr + u.to(gl.int64) * (BP * BN) + offs, acc)
            elif not keep:
                pass  # STACK: a block past the last one (read again, not stored)
            elif EPI == 1:
                # unsplit, no stream-K: the workspace pointer is y itself (ws_conv3d)
                _epilogue_direct(acc, ws_ptr, bias_ptr, ys, K, OD, P, Q, pid_n, n, d0, h0, wc, acc_layout,
                                 TH, TW, HAS_BIAS, ACT)  # fmt: skip
            else:
                _epilogue(acc, y_desc, bias_ptr, c_smem, CI, K, pid_n, n, d0, h0, wc, acc_layout,
                          HAS_BIAS, ACT)  # fmt: skip
    tma.store_wait(0)


@gluon.jit
def ws_conv3d_kernel(x_desc, w_desc, y_desc, bias_ptr, ws_ptr, lock_ptr, K, num_units, tiles_n, OD, P, Q, pd, ph, pw, dd, dh,
                     dw, R, S, c_tiles, k_steps, D, HS, SD, SH, SW, C, syn, syd, syh, syw, GC, KB, NPIX,
                     TD: gl.constexpr,
                     TH: gl.constexpr,
                     TW: gl.constexpr, HAS_BIAS: gl.constexpr, ACT: gl.constexpr, STAGES: gl.constexpr,
                     SPLIT: gl.constexpr, STRIDED: gl.constexpr, CONS: gl.constexpr, CWARPS: gl.constexpr,
                     CREGS: gl.constexpr, STREAM: gl.constexpr, EPI: gl.constexpr, GROUPED: gl.constexpr,
                     PDL_TRIGGER: gl.constexpr = False, STACK: gl.constexpr = 0):  # fmt: skip
    """Persistent warp-specialized 3-D implicit GEMM (module docstring); grid = (programs,).

    ``EPI`` = 1 (unsplit, no stream-K): tiles are stored from registers (``_epilogue_direct``)
    into y, passed as ``ws_ptr`` with its strides ``syn, syd, syh, syw``, and no staging tile
    takes shared memory; 0: through a staging tile and a TMA store.

    ``SPLIT`` > 1: every output tile's K steps are split in that many units, each of which
    writes its fp32 partial to ``ws_ptr`` for ``ws_split_finish_kernel``. ``STRIDED``: ``x_desc``
    is the stride-phase view and tiles are one output depth deep.

    ``CONS`` > 1 (unsplit only): a tile is ``CONS`` pixel blocks of ``TD x TH x TW`` side by side
    along the output columns, each the work of its own consumer partition (``CWARPS`` warps, the
    first one the default partition, the others workers given ``CREGS`` registers a thread) under
    one shared weight tile: a tile of 3 x 64 pixels, which no power-of-two block is, as
    cuBLAS's 192-pixel tiles that fill the H200's 132 SMs where 128- and 256-pixel ones leave a
    partial wave (benchmarks/NOTES.md, sessions 30 and 33). ``STACK`` (``CONS`` > 1, a 2-D
    layer: one depth tap, no depth padding; not grouped): the ``CONS`` blocks are consecutive
    pixel blocks instead (``_stacked_block``), so that layers whose rows are too short for blocks
    side by side (ResNet-50's 14x14 stage) get the 192-pixel tile too; ``NPIX`` (``grp``'s
    third) is then the number of pixel blocks."""
    gl.static_assert(STREAM == 0 or (CONS == 1 and SPLIT == 1), "ws_conv3d_kernel: stream-K on one consumer, unsplit")
    gl.static_assert(STACK == 0 or (CONS > 1 and GROUPED == 0), "ws_conv3d_kernel: stacked blocks: several consumers, "
                     "not grouped")  # fmt: skip
    # the finish kernel or the grouped fix-up, a programmatic dependent launch, is triggered by the
    # consumers (_consumer) as each program reaches its last unit
    gl.static_assert(STREAM == 0 or not PDL_TRIGGER, "ws_conv3d_kernel: no dependent launch after stream-K")
    gl.static_assert(GROUPED == 0 or (SPLIT == 1 and STREAM == 0), "ws_conv3d_kernel: groups unsplit, no stream-K")
    x_bufs = gl.allocate_shared_memory(x_desc.dtype, [STAGES * CONS] + x_desc.block_type.shape, x_desc.layout)
    w_bufs = gl.allocate_shared_memory(w_desc.dtype, [STAGES] + w_desc.block_type.shape, w_desc.layout)
    gl.static_assert(EPI == 0 or (SPLIT == 1 and STREAM == 0), "ws_conv3d_kernel: EPI = 1 unsplit, no stream-K")
    if EPI == 0:
        c_smem = gl.allocate_shared_memory(y_desc.dtype, [CONS] + y_desc.block_type.shape, y_desc.layout)
    else:
        c_smem = x_bufs  # never read: _epilogue_direct stores from registers
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        # every consumer hands a slot back
        mbarrier.init(empty.index(i), count=CONS)
    geo = (num_units, tiles_n, OD, P, Q, pd, ph, pw, dd, dh, dw, R, S, c_tiles, k_steps, D, HS, SD, SH, SW, C)
    ys = (syn, syd, syh, syw)
    grp = (GC, KB, NPIX)
    if CONS == 1:
        gl.warp_specialize(
            [
                (_consumer, (y_desc, bias_ptr, ws_ptr, lock_ptr, ready, empty, x_bufs, w_bufs, c_smem, geo, K, ys,
                             grp, TD, TH, TW, HAS_BIAS, ACT, STAGES, SPLIT, CONS, 0, STREAM, EPI, GROUPED, PDL_TRIGGER, STACK)),
                (_producer, (x_desc, w_desc, ready, empty, x_bufs, w_bufs, geo, grp, TD, TH, TW, STAGES, SPLIT,
                             STRIDED, CONS, STREAM, GROUPED, STACK)),
            ],
            [1],
            [48],
        )  # fmt: skip
    elif CONS == 2:
        gl.warp_specialize(
            [
                (_consumer, (y_desc, bias_ptr, ws_ptr, lock_ptr, ready, empty, x_bufs, w_bufs, c_smem, geo, K, ys,
                             grp, TD, TH, TW, HAS_BIAS, ACT, STAGES, SPLIT, CONS, 0, STREAM, EPI, GROUPED, PDL_TRIGGER, STACK)),
                (_consumer, (y_desc, bias_ptr, ws_ptr, lock_ptr, ready, empty, x_bufs, w_bufs, c_smem, geo, K, ys,
                             grp, TD, TH, TW, HAS_BIAS, ACT, STAGES, SPLIT, CONS, 1, STREAM, EPI, GROUPED, PDL_TRIGGER, STACK)),
                (_producer, (x_desc, w_desc, ready, empty, x_bufs, w_bufs, geo, grp, TD, TH, TW, STAGES, SPLIT,
                             STRIDED, CONS, STREAM, GROUPED, STACK)),
            ],
            [CWARPS, 1],
            [CREGS, 48],
        )  # fmt: skip
    else:
        gl.static_assert(CONS == 3, "ws_conv3d_kernel: 1, 2 or 3 consumer partitions")
        gl.warp_specialize(
            [
                (_consumer, (y_desc, bias_ptr, ws_ptr, lock_ptr, ready, empty, x_bufs, w_bufs, c_smem, geo, K, ys,
                             grp, TD, TH, TW, HAS_BIAS, ACT, STAGES, SPLIT, CONS, 0, STREAM, EPI, GROUPED, PDL_TRIGGER, STACK)),
                (_consumer, (y_desc, bias_ptr, ws_ptr, lock_ptr, ready, empty, x_bufs, w_bufs, c_smem, geo, K, ys,
                             grp, TD, TH, TW, HAS_BIAS, ACT, STAGES, SPLIT, CONS, 1, STREAM, EPI, GROUPED, PDL_TRIGGER, STACK)),
                (_consumer, (y_desc, bias_ptr, ws_ptr, lock_ptr, ready, empty, x_bufs, w_bufs, c_smem, geo, K, ys,
                             grp, TD, TH, TW, HAS_BIAS, ACT, STAGES, SPLIT, CONS, 2, STREAM, EPI, GROUPED, PDL_TRIGGER, STACK)),
                (_producer, (x_desc, w_desc, ready, empty, x_bufs, w_bufs, geo, grp, TD, TH, TW, STAGES, SPLIT,
                             STRIDED, CONS, STREAM, GROUPED, STACK)),
            ],
            [CWARPS, CWARPS, 1],
            [CREGS, CREGS, 48],
        )  # fmt: skip


@triton.jit
def ws_split_finish_kernel(ws_ptr, y_ptr, bias_ptr, K, tiles_n, OD, P, Q, syn, syd, syh, syw, SPLIT: tl.constexpr,
                           TD: tl.constexpr, TH: tl.constexpr, TW: tl.constexpr, BN: tl.constexpr,
                           SUB: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr,
                           PDL: tl.constexpr = False):  # fmt: skip
    """The second half of ``ws_conv3d_kernel``'s split-K: grid = (tiles, TD*TH*TW / SUB). Sums
    ``SUB`` pixel rows of one tile over its ``SPLIT`` partials in split order (the same result on
    every run), adds the bias, and stores the pixels inside the output (y is NDHWC: channel stride
    1, pixel strides ``syn, syd, syh, syw``). ``PDL``: launched as a programmatic dependent of
    ``ws_conv3d_kernel`` (``PDL_TRIGGER``), so it waits for the partials first."""
    if PDL:
        gdc_wait()
    BP: tl.constexpr = TD * TH * TW
    tile = tl.program_id(0)
    rows = tl.program_id(1) * SUB + tl.arange(0, SUB)
    cols = tl.arange(0, BN)
    offs = rows[:, None] * BN + cols[None, :]
    base = ws_ptr + tile.to(tl.int64) * SPLIT * (BP * BN)
    acc = tl.zeros((SUB, BN), dtype=tl.float32)
    for sp in tl.static_range(SPLIT):
        acc += tl.load(base + sp * (BP * BN) + offs)
    # the tile's origin, as _tile_origin computes it: channel blocks fastest, then conv3d_tma's
    # pixel-tile order
    pid_n = tile % tiles_n
    n, d0, h0, w0 = _tile3(tile // tiles_n, OD, P, Q, TD, TH, TW)
    d = d0 + rows // (TH * TW)
    h = h0 + (rows // TW) % TH
    w = w0 + rows % TW
    ch = pid_n * BN + cols
    if HAS_BIAS:
        acc += tl.load(bias_ptr + ch, mask=ch < K, other=0.0).to(tl.float32)[None, :]
    if ACT == "relu":
        acc = tl.where(acc < 0, 0.0, acc)
    inside = (d < OD) & (h < P) & (w < Q)
    ptrs = y_ptr + (n.to(tl.int64) * syn + d * syd + h * syh + w * syw)[:, None] + ch[None, :]
    tl.store(ptrs, acc.to(y_ptr.dtype.element_ty), mask=inside[:, None] & (ch < K)[None, :])


def input_desc(x: torch.Tensor, stride: tuple[int, int, int], tile: tuple[int, int, int], channels: int,
               grid: bool = False):  # fmt: skip
    """The TMA descriptor both Gluon kernels read the NDHWC input ``x`` [N, C, D, H, W] through,
    with boxes of ``tile`` output pixels x ``channels``: the tensor itself at stride 1, else its
    stride-phase view [N*D, H/SH, SH, W/SW, SW*C] (dense pixels, H and W multiples of the
    stride; ``_x_coord`` gives the boxes' coordinates).

    ``grid`` (strided; D a multiple of SD too): the phase-grid view [D/SD, H/SH, N*D*H, W/SW,
    SW*C] instead, strides (SD*H*W*C, SH*W*C, W*C, SW*C, 1). Its third axis walks the input's
    rows of every depth of every image, so (image, depth phase, row phase) is one coordinate
    there, while depth and row steps of the stride are the first two axes: boxes
    [TD, TH, 1, TW, BK] many output depths deep, with padding out of bounds along those axes.
    The phase view's boxes are one depth deep (its first axis merges the batch into depth), so
    28 x 28 outputs (r3d-18's strided layer) took 1 x 4 x 32 tiles, 87.5% covered; here
    8 x 4 x 4 covers them whole."""
    n, c, d, h, wd = x.shape
    td, th, tw = tile
    if grid:
        sd, sh, sw = stride
        xb = [td, th, 1, tw, channels]
        return TensorDescriptor(x, [d // sd, h // sh, n * d * h, wd // sw, sw * c],
                                [x.stride(2) * sd, x.stride(3) * sh, x.stride(3), c * sw, 1], xb,
                                _layout(xb, x.dtype))  # fmt: skip
    if stride != (1, 1, 1):
        _, sh, sw = stride
        xb = [td, th, 1, tw, channels]
        return TensorDescriptor(x, [n * d, h // sh, sh, wd // sw, sw * c],
                                [x.stride(2), x.stride(3) * sh, x.stride(3), c * sw, 1], xb,
                                _layout(xb, x.dtype))  # fmt: skip
    xb = [1, td, th, tw, channels]
    return TensorDescriptor(x, [n, d, h, wd, c], [x.stride(0), x.stride(2), x.stride(3), x.stride(4), 1], xb,
                            _layout(xb, x.dtype))  # fmt: skip


def ndhwc_desc(t: torch.Tensor, tile: tuple[int, int, int], channels: int):
    """A channels_last_3d tensor [N, C, D, H, W] as a TMA descriptor with boxes of ``tile``
    pixels x ``channels`` (the forward's output, the wgrad's dy)."""
    n, c, d, h, w = t.shape
    box = [1, *tile, channels]
    return TensorDescriptor(t, [n, d, h, w, c], [t.stride(0), t.stride(2), t.stride(3), t.stride(4), 1], box,
                            _layout(box, t.dtype))  # fmt: skip


def _layout(block: list[int], dtype: torch.dtype):
    """The swizzled shared-memory layout of a TMA box (``_default_layout``, memoised: computing it
    took two thirds of the host time of a launch's Python side, about 30 of 50 us)."""
    return _default_layout(tuple(block), dtype)


@functools.cache
def _default_layout(block: tuple[int, ...], dtype: torch.dtype):
    return gl.NVMMASharedLayout.get_default_for(
        list(block), {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16, torch.float32: gl.float32}[dtype]
    )


#: the launch options among a Gluon call's keyword arguments (the rest are its constexprs)
_OPTIONS = ("num_warps", "maxnreg", "launch_pdl")


def gluon_launch(launch, fn, grid: tuple, args: tuple, kw: dict) -> None:
    """``fn[grid](*args, **kw)``, through ``launch`` (a ``matmul.launch.Launch``) when given: its
    first call compiles and binds the launcher, later ones skip Triton's dispatch (the Gluon
    kernels' host path was 150-170 us a call on the H200's host without it: CRAFT's eager
    inference went from 1.06x to 0.74x cuDNN once ten of its layers ran on ``implicit_gemm_ws``,
    session 21)."""
    if launch is None:
        fn[grid](*args, **kw)
        return
    options = {k: kw[k] for k in _OPTIONS if k in kw}
    launch(fn, grid, args, {k: v for k, v in kw.items() if k not in options}, options)


def ws_conv3d(x: torch.Tensor, wp: torch.Tensor, bias: torch.Tensor | None, y: torch.Tensor, taps: tuple[int, int, int],
              pad: tuple[int, int, int], dilation: tuple[int, int, int], tile: tuple[int, int, int], block_n: int,
              block_k: int = 64, stages: int = 4, warps: int = 8, per_sm: int = 1, act: str = "", split: int = 1,
              stride: tuple[int, int, int] = (1, 1, 1), compile_only: bool = False, launch=None,
              consumers: int = 1, stream: int = 0, direct: int = 0, super_groups: tuple[int, int] | None = None,
              fix: torch.Tensor | None = None, stack: int = 0):  # fmt: skip
    """``y = conv3d(x, w, bias, stride, padding=pad, dilation=dilation)`` (groups 1, or wide groups:
    ``super_groups``) with ``ws_conv3d_kernel``.

    ``x`` [N, C, D, H, W] and ``y`` [N, K, OD, P, Q] are 16-bit, or fp32 (TF32 products, then
    ``block_k`` at most 32), with channel stride 1 and
    16-byte-aligned pixel strides (channels_last_3d; a strided layer needs a dense ``x`` whose H
    and W are multiples of the stride, and ``tile`` one depth deep); ``wp`` is the weight as a
    dense [K, T*R*S*C] matrix (``conv3d._packed_weight``), ``taps`` its (T, R, S); C a multiple
    of ``block_k``. ``tile`` is the (depth, rows, columns) block of output pixels of one tile, of
    16 x ``warps`` pixels; ``block_n`` output channels per tile (at most 256); ``per_sm`` programs
    per SM (the register budget is split for that many: shared memory must allow it too);
    ``split`` K splits per tile (partials summed by ``ws_split_finish_kernel``; every split must
    have K steps). ``compile_only`` returns the launches, each (kernel, grid, args, options), and
    makes none.
    ``launch`` (a ``matmul.launch.Launch`` kept per call plan: same shapes, strides, config) is
    bound by this call; ``ws_run`` replays it on later calls (``ws_replay``).
    ``consumers`` (1-3, unsplit): consumer partitions of ``warps`` warps each, every one with its
    own ``tile`` of pixels, side by side along the output columns (a tile of ``consumers * tile``).
    ``stream`` > 0 (one consumer, unsplit, a filter one tap deep and unpadded in depth, so that
    every tile has all K steps): stream-K, the (tile, K step) pairs split evenly over ``per_sm``
    programs a SM, a tile that several programs share summed in the kernel (``matmul.blocks.stream_k_reduce``).
    ``stream`` = 2 is the data-parallel + stream-K hybrid: the tiles of the whole waves run unsplit,
    one per program, and only the remaining tiles' K steps are split evenly (``_dp_units``), so
    partial sums are written for the last wave's tiles only.
    ``direct`` = 1 (unsplit, no stream-K): tiles stored from registers, no staging tile in shared
    memory (``_epilogue_direct``), which leaves room for more ``stages``.
    ``super_groups`` = (GC, KS) (unsplit, no stream-K): a grouped layer whose groups are ``GC``
    input and ``KS`` output channels wide (``grouped_tma``'s super-groups: ``GT`` narrow groups
    and a block-diagonal weight); ``wp`` is then [K, T*R*S*GC], ``block_k`` divides GC and
    ``block_n`` divides KS, so that every tile lies in one super-group. ``fix`` is the int32
    fix-up list (``fprop.Grouped.fix_list``) the kernel appends the pixel blocks whose sums are
    not finite to (``_list_nonfinite``); the caller launches the fix-up.
    ``stack`` = 1 (``consumers`` > 1, a filter one tap deep with no depth padding, not grouped):
    a tile's consumer blocks are consecutive pixel blocks of ``tile`` (``_stacked_block``) rather
    than neighbours along the columns, for outputs whose rows are shorter than ``consumers *
    tile[2]``.
    """
    b = y if bias is None else bias
    n, c, d, h, wd = x.shape
    _, k, od, p, q = y.shape
    t, r, s = taps
    td, th, tw = tile
    sd, sh, sw = stride
    strided = stride != (1, 1, 1)
    grid_view = phase_grid(stride, taps, pad, d)
    assert td == 1 or not strided or grid_view or depth_free(taps, pad, stride), (
        "ws_conv3d: tiles through the phase view are one depth deep"
    )
    x_desc = input_desc(x, stride, tile, block_k, grid=grid_view)
    wb = [block_n, block_k]
    w_desc = TensorDescriptor(wp, [k, wp.shape[1]], [wp.stride(0), 1], wb, _layout(wb, x.dtype))
    y_desc = ndhwc_desc(y, tile, block_n)
    tiles_n = cdiv(k, block_n)
    npix = n * cdiv(od, td) * cdiv(p, th) * cdiv(q, tw)
    if stack:
        if consumers < 2 or t > 1 or pad[0] or super_groups is not None or split > 1 or stream:
            raise ValueError("ws_conv3d: stacked consumer blocks (stack=1) take 2 or 3 consumers, a filter one tap "
                             "deep with no depth padding, no groups, no K split and no stream-K; use stack=0")  # fmt: skip
        num_tiles = tiles_n * cdiv(npix, consumers)
    else:
        num_tiles = tiles_n * n * cdiv(od, td) * cdiv(p, th) * cdiv(q, tw * consumers)
    gc, ks = super_groups or (c, k)
    if super_groups is not None:
        if gc % block_k or ks % block_n or split > 1 or stream or fix is None:
            raise ValueError(f"ws_conv3d: super-groups of {gc} input and {ks} output channels need block_k ({block_k}) "
                             f"dividing the first and block_n ({block_n}) the second, no K split or stream-K, and a "
                             "fix-up list (fix)")  # fmt: skip
        grp = (gc, ks // block_n, npix)
    else:
        grp = (0, 1, npix if stack else 0)
    k_steps = t * r * s * (gc // block_k)
    assert split == 1 or (split - 1) * cdiv(k_steps, split) < k_steps, "ws_conv3d: a K split would be empty"
    assert consumers in (1, 2, 3) and (split == 1 or consumers == 1), "ws_conv3d: 1-3 consumers, unsplit if several"
    if td * th * tw != 16 * warps:
        # wgmma's M is 64 rows a warpgroup: a forced config with another block fails deep in the
        # compiler ("WGMMA result M dimension must be divisible by 64")
        raise ValueError(f"ws_conv3d: a pixel block of {td}x{th}x{tw} = {td * th * tw} pixels on {warps} warps; "
                         f"it must be 16 per warp ({16 * warps}): change tile_n/tile_h/tile_w or num_warps")  # fmt: skip
    units = num_tiles * split
    if direct and (split > 1 or stream):
        raise ValueError("ws_conv3d: the direct epilogue (direct=1) is for unsplit tiles without stream-K, whose "
                         "epilogue stores the output; use direct=0 with split or stream")  # fmt: skip
    if stream not in (0, 1, 2):
        raise ValueError(f"ws_conv3d: stream={stream}; it is 0 (no stream-K), 1 (every tile's K steps split over the "
                         "programs) or 2 (the whole waves' tiles unsplit, the rest's K steps split)")  # fmt: skip
    if stream:
        if split > 1 or consumers > 1 or t > 1 or pad[0] or grid_view:
            raise ValueError("ws_conv3d: stream-K takes one consumer, no K split, and a filter one tap deep with no "
                             "depth padding (every tile then runs all its K steps)")  # fmt: skip
        programs = min(units * k_steps, per_sm * sm_count())
        if units * k_steps * programs >= 2**31:
            raise ValueError("ws_conv3d: stream-K's pair arithmetic would overflow int32; use a K split instead")
        ws = torch.empty(2 * programs * td * th * tw * block_n, dtype=torch.float32, device=x.device)
        locks = counters(x.device, units)
        grid = (programs,)
    else:
        # unsplit, the workspace pointer is unused, or with direct=1 the output itself (as
        # ws_replay's warm calls pass it)
        ws = y if direct else torch.empty(units * td * th * tw * block_n if split > 1 else 1, dtype=torch.float32,
                                          device=x.device)  # fmt: skip
        # unused (STREAM is a constexpr), or a grouped layer's fix-up list
        locks = fix if super_groups is not None else ws
        grid = (min(units, per_sm * sm_count()),)
    args = (x_desc, w_desc, y_desc, y if bias is None else bias, ws, locks, k, units, tiles_n, od, p, q, *pad,
            *dilation, r, s, gc // block_k, k_steps, d, h // sh, sd, sh, sw, c, y.stride(0), y.stride(2), y.stride(3),
            y.stride(4), *grp)  # fmt: skip
    # registers are allocated for the consumers' warps + 4 (the producer's warpgroup) at launch,
    # then moved from the producer (48 a thread for its warp, 24 for the three idle ones) to the
    # consumers; the worker consumers get an equal share of what is left (CREGS)
    kw = dict(TD=td, TH=th, TW=tw, HAS_BIAS=bias is not None, ACT=act, STAGES=stages, SPLIT=split,
              STRIDED=2 if grid_view else int(strided),
              num_warps=warps, maxnreg=min(256, (65536 // (per_sm * (warps * consumers + 4) * 32)) // 8 * 8))  # fmt: skip
    # (every constexpr given, defaults too: a plan's Launch binds the launcher from these)
    kw.update(CONS=consumers, CWARPS=warps, STREAM=stream, EPI=int(direct > 0), GROUPED=int(bool(super_groups)),
              STACK=int(bool(stack)),
              CREGS=min(256, ((65536 // per_sm - 32 * (48 + 3 * 24)) // (consumers * warps * 32)) // 8 * 8))  # fmt: skip
    # the split's finish kernel (below) or a grouped layer's fix-up (fprop.grouped_fixup) follows
    # as a programmatic dependent launch
    pdl = (split > 1 or fix is not None) and pdl_enabled()
    kw.update(PDL_TRIGGER=pdl)
    launches = [(ws_conv3d_kernel, grid, args, kw)]
    if split > 1:
        bp = td * th * tw
        sub = min(bp, 32)
        launches.append((ws_split_finish_kernel, (num_tiles, bp // sub),
                         (ws, y, b, k, tiles_n, od, p, q, y.stride(0), y.stride(2), y.stride(3), y.stride(4)),
                         dict(SPLIT=split, TD=td, TH=th, TW=tw, BN=block_n, SUB=sub, HAS_BIAS=bias is not None,
                              ACT=act, num_warps=4, **(dict(PDL=True, launch_pdl=True) if pdl else {}))))  # fmt: skip
    if compile_only:
        return launches
    gluon_launch(launch, *launches[0])
    if split > 1:
        gluon_launch(aux_of(launch), *launches[1])
    if launch is not None:
        launch.extra = (ws.numel(), units) if stream else ws.numel()
    return None


def ws_run(x, wp, bias, y, taps, pad, dilation, cfg, stride, act: str = "", launch=None,
           super_groups: tuple[int, int] | None = None, fix: torch.Tensor | None = None) -> None:  # fmt: skip
    """``ws_conv3d`` with an algorithm ``Config`` (``conv3d.Ws3d``'s fields). Under the tuner's
    compile-only pass (``fprop.COMPILE_ONLY``) the kernel is compiled, not launched, so that the
    candidates compile in parallel. ``launch``: the call plan's handle; once bound (a warm plan),
    the call is its replay, with nothing built. ``super_groups``, ``fix``: ``ws_conv3d``'s."""
    if fast_ready(launch, cfg.split_k):
        ws_conv3d_replay(launch, x, wp, y, bias, cfg.split_k, cfg.stream_k, locks=fix)
        return
    from .fprop import COMPILE_ONLY

    call = dict(block_k=cfg.block_k, stages=cfg.num_stages, warps=cfg.num_warps, per_sm=cfg.persistent or 1, act=act,
                split=cfg.split_k, stride=stride, consumers=max(1, cfg.parts), stream=cfg.stream_k,
                direct=cfg.direct, super_groups=super_groups, fix=fix, stack=cfg.stack)  # fmt: skip
    tile = (cfg.tile_n, cfg.tile_h, cfg.tile_w)
    if COMPILE_ONLY.get():
        # the split-K finish kernel too: left to the first launch, its compile (0.15-0.6 s on the
        # H200's host) fell in the tuner's load phase, one split candidate after another
        for fn, grid, args, kw in ws_conv3d(x, wp, bias, y, taps, pad, dilation, tile, cfg.block_n,
                                            compile_only=True, **call):  # fmt: skip
            fn.warmup(*args, grid=grid, **kw)
        return
    ws_conv3d(x, wp, bias, y, taps, pad, dilation, tile, cfg.block_n, launch=launch, **call)
