"""An R x 1 convolution with few output channels, each input row read once: a ring of row buffers
(session 38, emulated on the CPU by ``tests/gluon_emu.run_row_ring``; checked and timed on the H200
in session 40; among ``narrow_fold``'s candidates unless ``CONVGEMM_ROW_RING=0``).

``narrow_fold``'s first step (``fprop.NarrowFold``) is an R x 1 convolution into ``S * K`` fp32
channels on ``narrow_tma``, whose tiles load one TMA box per filter row: CRAFT's conv1_1 dgrad
(64 -> 9 channels, 3 x 1 at 768 x 768) reads its 75 MB input three times from L2, and that GEMM
was 47.7 of the layer's 60 us of kernels on the H200 (session 38). Here a program walks a strip of
``TW`` columns down a chunk of ``ROWS`` output rows; each step TMA-loads one new input row
(``TW`` pixels x C channels, padding rows zero-filled by TMA) into a ring of ``NS`` (4 or 8)
buffers and issues R ``wgmma`` on whole buffers (Gluon refuses overlapping shared-memory
subslices, so the R row taps are R slots, not R slices of one tile) against the R weight taps,
which stay in shared memory; the ring keeps ``NS - R`` row loads ahead of the step that reads
them. An input row is loaded once per chunk plus R - 1 halo rows a chunk.

``u[n, p, w, j] = sum_{r, c} x[n, p - pad + r, w, c] * wt[j, c, r]`` (stride 1, dilation 1 along H;
no padding along W: ``narrow_fold`` reduces its filter to R x 1 over the input's own width):
``row_ring_conv``, then ``narrow_fold``'s column fold. ``row_ring_fold`` also folds the columns
in the epilogue (strips overlapping by S - 1 columns, the tile gathered along its pixels) and
writes y: no ``u`` round trip (21 MB each way for conv1_1's dgrad) and one launch instead of two.
"""

from __future__ import annotations

import os

import torch
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

from .._runtime import cdiv, dense_bias, sm_count


def enabled() -> bool:
    """``narrow_fold``'s tuner also times the ring for its R x 1 step unless ``CONVGEMM_ROW_RING=0``
    (on by default since session 40: checked on the H200, CRAFT's conv1_1 dgrad 70.9 -> 43.8 us)."""
    return os.environ.get("CONVGEMM_ROW_RING", "1") != "0"


def fits(rp) -> str | None:
    """Why the ring cannot run the R x 1 problem ``rp`` (``NarrowFold.reduced``), or None."""
    if rp.r > 3:
        return f"{rp.r} filter rows: the ring takes at most 3 (a ring of 4 row slots)"
    if rp.s != 1 or rp.pad_w != (0, 0) or rp.stride != (1, 1) or rp.dilation != (1, 1):
        return "stride and dilation 1, one filter column, no padding along W"
    if rp.pad_h[0] != rp.pad_h[1]:
        return f"padding {rp.pad_h} rows: the same above and below"
    if rp.groups != 1 or rp.c not in (16, 32, 64, 128):
        return f"C = {rp.c} (groups {rp.groups}): 16, 32, 64 or 128 channels, one box each, groups 1"
    if rp.k > 64:
        return f"{rp.k} output channels: at most 64"
    if rp.dtype not in (torch.float16, torch.bfloat16):
        return f"{rp.dtype}: fp16 or bf16"
    if not (rp.input_tma_ok and rp.input_dense) or rp.input_nchw:
        return "the NHWC input must be TMA-aligned with evenly strided rows"
    return None


#: (strip columns, rows per chunk, ring slots) of the candidates: the two fastest on the H200 of
#: five timed on conv1_1's dgrad (session 40, ``tools/row_ring_probe.py``: 128/16/4 and 64/16/4
#: took 42-44 us fused, 128/32/8 55, 64/32/8 50, 128/64/8 53)
SHAPES = ((128, 16, 4), (64, 16, 4))


def configs(prob, rp) -> list:
    """``narrow_fold``'s ring candidates for its problem ``prob`` (reduced: ``rp``): ``SHAPES``,
    with the column fold in the ring's epilogue where ``fold_fits`` (on the H200 the fused form
    took 43.7 us on conv1_1's dgrad where the ring then ``width_fold_kernel`` took 62.6), else --
    or where no fused tile fits in shared memory -- as the R x 1 step followed by
    ``width_fold_kernel``; candidates over the shared-memory limit are dropped."""
    from .fprop import Config

    es = rp.dtype.itemsize

    def fitting(bn: int, fused: int) -> list:
        out = [Config(tw, bn, rp.c, 4, slots, ring=rows, fused=fused) for tw, rows, slots in SHAPES]
        return [c for c in out if fits_smem(smem_bytes(c.block_m, rp.c, es, c.block_n, c.num_stages, fused))]

    # a fused tile of 128 channels with a wide fold needs more than a block may have (compiled for
    # sm_90: up to 360 KB)
    fused = fitting(_fold_bn(prob.k, prob.s), 1) if fold_fits(prob) is None else []
    return fused or fitting(max(16, 1 << (rp.k - 1).bit_length()), 0)


#: shared memory a block may use on sm_90 (227 KB), less the 1 KB of static shared memory the
#: compiled kernel also declares and a margin for the estimate (at most 64 bytes under the
#: compiled size over 96 configurations, session 39's review)
SMEM_LIMIT = 227 * 1024 - 2048


def smem_bytes(tw: int, c: int, es: int, bn: int, slots: int, fold: int) -> int:
    """The kernel's shared memory, estimated: the ring, the weight taps (4 allocated), and the
    epilogue's scratch (the layout conversion; fused: the gather's too)."""
    return slots * tw * c * es + 4 * bn * c * es + (2 if fold else 1) * tw * bn * 4 + slots * 8


def fits_smem(nbytes: int) -> bool:
    return nbytes <= SMEM_LIMIT


@gluon.jit
def _row_load(x_desc, ring, ready, it, n, row, w0, NS: gl.constexpr):
    """Input row ``row`` (may be outside the image: zeros) of image ``n``, columns ``w0..`` (may
    start left of the image: zeros), into ring slot ``it % NS``."""
    slot = it % NS
    mbarrier.expect(ready.index(slot), x_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(x_desc, [n, row, w0, 0], ready.index(slot), ring.index(slot))


@gluon.jit
def row_ring_kernel(x_desc, w_ptr, out_ptr, bias_ptr, W, P, J, Q, pad, pad_w, num_units, strips, chunks,
                    s_on, s_op, s_ow, s_oj,
                    R: gl.constexpr, TW: gl.constexpr, BC: gl.constexpr, BN: gl.constexpr, ROWS: gl.constexpr,
                    NS: gl.constexpr, FOLD: gl.constexpr, S: gl.constexpr, K: gl.constexpr, KB: gl.constexpr,
                    HAS_BIAS: gl.constexpr, RELU: gl.constexpr):  # fmt: skip
    """Grid: (programs,), persistent over units (image, column strip, chunk of ROWS output rows).
    ``w_ptr``: [R, BN, BC] (tap, output channel, input channel), zero-padded to BN >= J channels.

    ``FOLD`` 0: the output is ``u`` [N, P, W, J] fp32 (strides ``s_on, s_op, s_ow, s_oj``), strips
    of TW columns. ``FOLD`` 1: channel ``j = s*KB + k`` is filter column s of output channel k
    (KB >= K a power of two), and the output is ``y [N, K, P, Q]`` itself (any strides, y's
    dtype): ``y[n, k, p, q] = act(sum_s u[n, p, q - pad_w + s, s*KB + k] + bias[k])``. A strip then
    reads TW input columns from ``strip * (TW - S + 1) - pad_w`` and writes its first
    ``TW - S + 1`` output columns: each row's tile gathered along the pixels (channel group s from
    row q + s; Gluon refuses shared-memory windows at offsets that are not multiples of their
    size) and its S channel groups summed."""
    gl.static_assert(R + 1 <= NS, "row_ring_kernel: R + 1 <= NS ring slots")
    gl.static_assert(R <= 4, "row_ring_kernel: at most 4 filter rows (weight taps)")
    x_sl: gl.constexpr = x_desc.layout
    ring = gl.allocate_shared_memory(x_desc.dtype, [NS, 1, 1, TW, BC], x_sl)
    w_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BN, BC], x_desc.dtype)
    wts = gl.allocate_shared_memory(x_desc.dtype, [4, BN, BC], w_sl)
    ready = gl.allocate_shared_memory(gl.int64, [NS, 1], mbarrier.MBarrierLayout())
    for b in gl.static_range(NS):
        mbarrier.init(ready.index(b), count=1)
    fence_async_shared()  # the barriers' init before the first TMA (as a precaution)
    # the weight taps, once per program
    wl: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [gl.num_warps(), 1], [1, 0])
    wn = gl.arange(0, BN, layout=gl.SliceLayout(1, wl))
    wc = gl.arange(0, BC, layout=gl.SliceLayout(0, wl))
    for r in gl.static_range(R):
        wts.index(r).store(gl.load(w_ptr + (r * BN + wn[:, None]) * BC + wc[None, :]))
    fence_async_shared()
    gl.thread_barrier()  # every warp's weight stores before any wgmma reads them
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[gl.num_warps(), 1],
                                                  instr_shape=[16, BN, 16])  # fmt: skip
    if FOLD:
        # one pixel's BN channels a thread for the gather; KB output channels a thread for the store
        rl: gl.constexpr = gl.BlockedLayout([1, BN], [32, 1], [gl.num_warps(), 1], [1, 0])
        fl: gl.constexpr = gl.BlockedLayout([1, KB], [32, 1], [gl.num_warps(), 1], [1, 0])
        gq = gl.arange(0, TW, layout=gl.SliceLayout(1, rl))
        gj = gl.arange(0, BN, layout=gl.SliceLayout(0, rl))
        # channel j = s*KB + k (filter column s of output channel k) of output column q sits in
        # tile row q + s; rows past the tile only feed masked columns
        src_row = gl.minimum(gq[:, None] + (gj // KB)[None, :], TW - 1)
        fq = gl.arange(0, TW, layout=gl.SliceLayout(1, fl))
        fk = gl.arange(0, KB, layout=gl.SliceLayout(0, fl))
        fk_ok = fk < K
        bias = gl.zeros([KB], gl.float32, gl.SliceLayout(0, fl))
        if HAS_BIAS:
            bias = gl.load(bias_ptr + fk, mask=fk_ok, other=0.0).to(gl.float32)
        step = TW - S + 1
    else:
        ol: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
        om = gl.arange(0, TW, layout=gl.SliceLayout(1, ol))
        oj = gl.arange(0, BN, layout=gl.SliceLayout(0, ol))
        step = TW
    it = 0  # row loads issued by this program (slot = it % NS, its phase (it // NS) & 1)
    for unit in range(gl.program_id(0), num_units, gl.num_programs(0)):
        chunk = unit % chunks
        rest = unit // chunks
        strip = rest % strips
        n = rest // strips
        p0 = chunk * ROWS
        c0 = strip * step  # the strip's first output column
        w0 = c0 - pad_w  # its first input column (pad_w 0 without FOLD)
        rows = gl.minimum(ROWS, P - p0)
        # output row p0 + i needs the chunk's input rows i .. i + R - 1 (input row p0 - pad + q for
        # chunk row q < rows + R - 1, load number base + q): the first NS now, one ring's worth
        base = it
        loads = rows + R - 1
        for q in gl.static_range(NS):
            if q < loads:
                _row_load(x_desc, ring, ready, it, n, p0 - pad + q, w0, NS)
                it += 1
        for i in range(rows):
            # the chunk's rows i .. i + R - 1 (load numbers base + i + r): a slot's next load is
            # issued only after its row's last step, so each wait is on its latest phase
            for r in gl.static_range(R):
                mbarrier.wait(ready.index((base + i + r) % NS), ((base + i + r) // NS) & 1)
            acc = gl.zeros([TW, BN], gl.float32, mma)
            for r in gl.static_range(R):
                a = ring.index((base + i + r) % NS).reshape([TW, BC])
                acc = warpgroup_mma(a, wts.index(r).permute((1, 0)), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            # every wgmma of this step is done, so chunk row i's slot is free: chunk row i + NS goes
            # there, NS - R steps before it is read
            if i + NS < loads:
                _row_load(x_desc, ring, ready, it, n, p0 - pad + i + NS, w0, NS)
                it += 1
            row_off = n.to(gl.int64) * s_on + (p0 + i).to(gl.int64) * s_op
            if FOLD:
                shifted = gl.gather(gl.convert_layout(acc, rl), src_row, 0)
                tot = gl.convert_layout(gl.sum(gl.reshape(shifted, [TW, BN // KB, KB]), axis=1), fl)
                tot = tot + bias[None, :]
                if RELU:
                    tot = gl.maximum(tot, 0.0)
                col = c0 + fq
                dst = out_ptr + row_off + col.to(gl.int64)[:, None] * s_ow + (fk.to(gl.int64) * s_oj)[None, :]
                ok = ((fq < step) & (col < Q))[:, None] & fk_ok[None, :]
                gl.store(dst, tot.to(out_ptr.dtype.element_ty), mask=ok)
            else:
                out = gl.convert_layout(acc, ol)
                col = w0 + om
                dst = out_ptr + row_off + col.to(gl.int64)[:, None] * s_ow + (oj.to(gl.int64) * s_oj)[None, :]
                gl.store(dst, out, mask=(col < W)[:, None] & (oj < J)[None, :])
    for b in gl.static_range(NS):
        mbarrier.invalidate(ready.index(b))


def _descriptor(x: torch.Tensor, tw: int):
    n, c, h, w = x.shape
    box = [1, 1, tw, c]
    layout = gl.NVMMASharedLayout.get_default_for(
        box, {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}[x.dtype]
    )
    return TensorDescriptor(x, [n, h, w, c], [x.stride(0), x.stride(2), x.stride(3), 1], box, layout)


def _check(x: torch.Tensor, r: int, j: int, tw: int, slots: int, num_warps: int) -> None:
    c = x.shape[1]
    if r > 3 or r + 1 > slots or j > 64 or c not in (16, 32, 64, 128) or x.stride(1) != 1:
        raise ValueError(f"row_ring: x {tuple(x.shape)} (channels_last, C 16-128 a power of two), {r} filter rows "
                         f"(at most 3, fewer than {slots} slots) and {j} channels (at most 64) do not fit; use "
                         "narrow_tma")  # fmt: skip
    if x.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"row_ring: x is {x.dtype}: fp16 or bf16; use narrow_tma")
    es = x.element_size()
    if x.data_ptr() % 16 or any(x.stride(d) * es % 16 for d in (0, 2, 3)):
        raise ValueError(f"row_ring: x's address or pixel strides {x.stride()} are not 16-byte multiples, as TMA "
                         "needs; use narrow_tma")  # fmt: skip
    if num_warps != 4 or tw not in (64, 128) or slots not in (4, 8):
        raise ValueError(f"row_ring: tw {tw}, {slots} slots, {num_warps} warps: tw 64 or 128, 4 or 8 slots, 4 warps "
                         "(one warpgroup)")  # fmt: skip


def _go(launch, grid: tuple, args: tuple, kw: dict) -> None:
    """Launch through ``fprop._run_kernel``: the call plan's handle (a warm one relaunches), and
    under the tuner's compile pass (``fprop.COMPILE_ONLY``) a compile only."""
    from .fprop import _run_kernel

    options = {"num_warps": kw.pop("num_warps")}
    _run_kernel(launch, row_ring_kernel, grid, args, lambda: kw, options)


def _grid(units: int, smem: int) -> tuple[int]:
    if not fits_smem(smem):
        raise ValueError(f"row_ring: this tile needs about {smem // 1024} KB of shared memory, over the "
                         f"{SMEM_LIMIT // 1024} KB a block may use; use fewer slots or columns, or narrow_tma")  # fmt: skip
    per_sm = max(1, min(3, 220_000 // smem))  # programs an SM holds
    return (max(1, min(units, per_sm * sm_count())),)  # the grid's size only: any device's count will do


def _packed(source: torch.Tensor, tag: tuple, make) -> torch.Tensor:
    """The kernel's weight taps ``[R, BN, C]``, made from ``source`` by ``make`` and kept per
    weight tensor and version (``functional._derived_weight``): a call costs no packing kernels
    unless the weight changed."""
    from ..functional import _derived_weight

    return _derived_weight(source, ("row_ring", *tag), make)


def row_ring_conv(x: torch.Tensor, wt: torch.Tensor, pad: int, u: torch.Tensor, tw: int = 128, rows: int = 16,
                  slots: int = 4, num_warps: int = 4, launch=None, source: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
    """``u [N, P, W, J]`` (fp32, channel stride 1) = the R x 1 convolution of the channels_last
    ``x [N, C, H, W]`` (fp16 or bf16, C of 16, 32, 64 or 128) by ``wt [J, C, R, 1]`` (x's dtype,
    J <= 64, R <= 3), padding ``pad`` rows above and below, stride 1. Returns ``u``.
    ``launch``: the call plan's handle (``matmul.launch.Launch``); ``source``: the tensor ``wt``
    is a view of (``fold.fold_weight(w)``: ``w``), whose identity and version key the packed
    weight's cache (default ``wt``)."""
    n, c, h, w = x.shape
    j, c2, r, one = wt.shape
    _check(x, r, j, tw, slots, num_warps)
    if c2 != c or one != 1 or wt.dtype != x.dtype:
        raise ValueError(f"row_ring_conv: wt {tuple(wt.shape)} {wt.dtype} must be [J, {c}, R, 1] in {x.dtype}")
    p = h + 2 * pad - r + 1
    if tuple(u.shape) != (n, p, w, j) or u.dtype != torch.float32 or u.stride(3) != 1 or u.device != x.device:
        raise ValueError(f"row_ring_conv: u must be fp32 [N, P, W, J] = {(n, p, w, j)} with channel stride 1 on "
                         f"{x.device}, got {u.dtype} {tuple(u.shape)} strides {u.stride()}")  # fmt: skip
    bn = max(16, 1 << (j - 1).bit_length())

    def pack(_):
        wp = torch.zeros(r, bn, c, dtype=x.dtype, device=x.device)
        wp[:, :j] = wt[:, :, :, 0].permute(2, 0, 1)
        return wp

    wp = _packed(wt if source is None else source, ("u", tuple(wt.shape), bn), pack)
    strips, chunks = cdiv(w, tw), cdiv(p, rows)
    units = n * strips * chunks
    es = x.element_size()
    grid = _grid(units, smem_bytes(tw, c, es, bn, slots, 0))
    args = (_descriptor(x, tw), wp, u, u, w, p, j, w, pad, 0, units, strips, chunks, u.stride(0), u.stride(1),
            u.stride(2), u.stride(3))  # fmt: skip
    kw = dict(R=r, TW=tw, BC=c, BN=bn, ROWS=rows, NS=slots, FOLD=False, S=1, K=1, KB=2, HAS_BIAS=False, RELU=False,
              num_warps=num_warps)  # fmt: skip
    _go(launch, grid, args, kw)
    return u


def fold_fits(prob) -> str | None:
    """Why the ring cannot also fold the columns of ``narrow_fold``'s problem ``prob`` (the
    original R x S one), or None."""
    if prob.stride[1] != 1 or prob.dilation[1] != 1:
        return f"stride {prob.stride[1]} and dilation {prob.dilation[1]} along W: the folded ring takes 1 and 1"
    if prob.activation not in ("", "relu"):
        return f"activation {prob.activation!r}: the folded ring applies none or relu"
    if _fold_bn(prob.k, prob.s) > 128:
        return f"K = {prob.k} with S = {prob.s}: over 128 channels in the ring's tile"
    return None


def _fold_kb(k: int) -> int:
    return max(2, 1 << (k - 1).bit_length())


def _fold_bn(k: int, s: int) -> int:
    # channel groups of KB, one per filter column
    return max(16, 1 << (s * _fold_kb(k) - 1).bit_length())


def row_ring_fold(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, y: torch.Tensor, pad_h: int,
                  pad_w: int, act: str = "", tw: int = 128, rows: int = 16, slots: int = 4, num_warps: int = 4,
                  launch=None) -> torch.Tensor:  # fmt: skip
    """``y = act(conv2d(x, w, bias, padding=(pad_h, pad_w)))`` for few output channels in one
    kernel: the ring's R x 1 convolution into ``S * K`` channels (``fold.fold_weight``'s order) and
    the column fold in its epilogue, y written directly (no ``u``). ``x [N, C, H, W]`` channels_last
    fp16 or bf16 (C of 16-128, a power of two), ``w [K, C, R, S]`` (R <= 3, S * K <= 64),
    ``bias [K]`` or None, ``y [N, K, P, Q]`` in x's dtype with any strides; stride and dilation 1,
    ``Q`` may end before the padded width (any right padding). Returns ``y``."""
    n, c, h, wd = x.shape
    k, c2, r, s = w.shape
    _check(x, r, s * k, tw, slots, num_warps)
    if c2 != c or w.dtype != x.dtype or y.dtype != x.dtype or (bias is not None and bias.shape != (k,)):
        raise ValueError(f"row_ring_fold: w {tuple(w.shape)} {w.dtype}, y {y.dtype}, bias "
                         f"{None if bias is None else tuple(bias.shape)}: w [K, {c}, R, S] and y in {x.dtype}, bias [K]")  # fmt: skip
    p, q = h + 2 * pad_h - r + 1, y.shape[3]
    # Q sets the right padding (any: columns past the image read TMA's zeros)
    if tuple(y.shape[:3]) != (n, k, p) or s > tw or act not in ("", "relu"):
        raise ValueError(f"row_ring_fold: y {tuple(y.shape)} must be [{n}, {k}, {p}, Q], "
                         f"activation '' or 'relu' (got {act!r}), S <= {tw}")  # fmt: skip
    kb, bn = _fold_kb(k), _fold_bn(k, s)
    bias = dense_bias(bias)  # read at bias_ptr + k

    def pack(v):
        wp = torch.zeros(r, bn, c, dtype=x.dtype, device=x.device)
        # channel s*KB + k: column s of output channel k
        wp[:, : s * kb].view(r, s, kb, c)[:, :, :k] = v.permute(2, 3, 0, 1)
        return wp

    wp = _packed(w, ("fold", bn, kb), pack)
    step = tw - s + 1
    strips, chunks = cdiv(q, step), cdiv(p, rows)
    units = n * strips * chunks
    es = x.element_size()
    grid = _grid(units, smem_bytes(tw, c, es, bn, slots, 1))
    args = (_descriptor(x, tw), wp, y, y if bias is None else bias, wd, p, s * k, q, pad_h, pad_w, units, strips,
            chunks, y.stride(0), y.stride(2), y.stride(3), y.stride(1))  # fmt: skip
    kw = dict(R=r, TW=tw, BC=c, BN=bn, ROWS=rows, NS=slots, FOLD=True, S=s, K=k, KB=kb, HAS_BIAS=bias is not None,
              RELU=act == "relu", num_warps=num_warps)  # fmt: skip
    _go(launch, grid, args, kw)
    return y
