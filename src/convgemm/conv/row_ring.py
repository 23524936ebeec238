"""An R x 1 convolution with few output channels, each input row read once: a ring of row buffers
(experimental, session 38: written without a GPU, compiled for sm_90 and emulated on the CPU
only, ``tests/gluon_emu.run_row_ring``; ``narrow_fold`` times it for its R x 1 step only with
``CONVGEMM_ROW_RING=1``).

``narrow_fold``'s first step (``fprop.NarrowFold``) is an R x 1 convolution into ``S * K`` fp32
channels on ``narrow_tma``, whose tiles load one TMA box per filter row: CRAFT's conv1_1 dgrad
(64 -> 9 channels, 3 x 1 at 768 x 768) reads its 75 MB input three times from L2, and that GEMM
was 47.7 of the layer's 60 us of kernels on the H200 (session 38). Here a program walks a strip of
``TW`` columns down a chunk of ``ROWS`` output rows; each step TMA-loads one new input row
(``TW`` pixels x C channels, padding rows zero-filled by TMA) into a ring of 4 buffers and issues
R ``wgmma`` on whole buffers (Gluon refuses overlapping shared-memory subslices, so the R row taps
are R slots, not R slices of one tile) against the R weight taps, which stay in shared memory;
the ring keeps 4 - R row loads ahead of the step that reads them. An input row is loaded once
per chunk plus R - 1 halo rows a chunk.

``u[n, p, w, j] = sum_{r, c} x[n, p - pad + r, w, c] * wt[j, c, r]`` (stride 1, dilation 1 along H;
no padding along W: ``narrow_fold`` reduces its filter to R x 1 over the input's own width).
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

from .._runtime import cdiv, sm_count

#: ring slots (a power of two: shared-memory allocations are); R + 1 of them in use, so R <= 3
SLOTS = 4


def enabled() -> bool:
    """``CONVGEMM_ROW_RING=1``: ``narrow_fold``'s tuner also times the ring for its R x 1 step
    (off by default until the H200 has checked and timed it)."""
    return os.environ.get("CONVGEMM_ROW_RING", "0") == "1"


def fits(rp) -> str | None:
    """Why the ring cannot run the R x 1 problem ``rp`` (``NarrowFold.reduced``), or None."""
    if rp.r > 3:
        return f"{rp.r} filter rows: the ring of {SLOTS} row slots takes at most 3"
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


def configs(rp) -> list:
    """``narrow_fold``'s ring candidates: strips of 128 or 64 columns, chunks of 16 or 32 rows."""
    from .fprop import Config

    bn = max(16, 1 << (rp.k - 1).bit_length())
    return [Config(tw, bn, rp.c, 4, SLOTS, ring=rows) for tw, rows in ((128, 16), (64, 16), (128, 32))]


@gluon.jit
def _row_load(x_desc, ring, ready, it, n, row, w0):
    """Input row ``row`` (may be outside the image: zeros) of image ``n``, columns ``w0..``, into
    ring slot ``it % SLOTS``."""
    slot = it % 4
    mbarrier.expect(ready.index(slot), x_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(x_desc, [n, row, w0, 0], ready.index(slot), ring.index(slot))


@gluon.jit
def row_ring_kernel(x_desc, w_ptr, u_ptr, H, W, P, J, pad, num_units, strips, chunks, s_un, s_up, s_uw,
                    R: gl.constexpr, TW: gl.constexpr, BC: gl.constexpr, BN: gl.constexpr,
                    ROWS: gl.constexpr):  # fmt: skip
    """Grid: (programs,), persistent over units (image, column strip of TW, chunk of ROWS output
    rows). ``w_ptr``: [R, BN, BC] (tap, output channel, input channel), zero-padded to BN >= J
    channels; ``u`` [N, P, W, J] fp32 with strides ``s_un, s_up, s_uw`` (channel stride 1)."""
    gl.static_assert(R + 1 <= 4, "row_ring_kernel: R <= 3 filter rows (a ring of 4 slots)")
    x_sl: gl.constexpr = x_desc.layout
    ring = gl.allocate_shared_memory(x_desc.dtype, [4, 1, 1, TW, BC], x_sl)
    w_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BN, BC], x_desc.dtype)
    wts = gl.allocate_shared_memory(x_desc.dtype, [4, BN, BC], w_sl)
    ready = gl.allocate_shared_memory(gl.int64, [4, 1], mbarrier.MBarrierLayout())
    for b in gl.static_range(4):
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
    ol: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    om = gl.arange(0, TW, layout=gl.SliceLayout(1, ol))
    oj = gl.arange(0, BN, layout=gl.SliceLayout(0, ol))
    it = 0  # row loads issued by this program (slot = it % 4, its phase (it // 4) & 1)
    for unit in range(gl.program_id(0), num_units, gl.num_programs(0)):
        chunk = unit % chunks
        rest = unit // chunks
        strip = rest % strips
        n = rest // strips
        p0 = chunk * ROWS
        w0 = strip * TW
        rows = gl.minimum(ROWS, P - p0)
        # output row p0 + i needs the chunk's input rows i .. i + R - 1 (input row p0 - pad + q for
        # chunk row q < rows + R - 1, load number base + q): the first 4 now, one ring's worth
        base = it
        loads = rows + R - 1
        for q in gl.static_range(4):
            if q < loads:
                _row_load(x_desc, ring, ready, it, n, p0 - pad + q, w0)
                it += 1
        for i in range(rows):
            # the chunk's rows i .. i + R - 1 (load numbers base + i + r): a slot's next load is
            # issued only after its row's last step, so each wait is on its latest phase
            for r in gl.static_range(R):
                mbarrier.wait(ready.index((base + i + r) % 4), ((base + i + r) // 4) & 1)
            acc = gl.zeros([TW, BN], gl.float32, mma)
            for r in gl.static_range(R):
                a = ring.index((base + i + r) % 4).reshape([TW, BC])
                acc = warpgroup_mma(a, wts.index(r).permute((1, 0)), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            # every wgmma of this step is done, so chunk row i's slot is free: chunk row i + 4 goes
            # there, 4 - R steps before it is read (one step ahead at R = 3)
            if i + 4 < loads:
                _row_load(x_desc, ring, ready, it, n, p0 - pad + i + 4, w0)
                it += 1
            out = gl.convert_layout(acc, ol)
            col = w0 + om
            dst = u_ptr + n.to(gl.int64) * s_un + (p0 + i).to(gl.int64) * s_up + col.to(gl.int64)[:, None] * s_uw
            gl.store(dst + oj[None, :], out, mask=(col < W)[:, None] & (oj < J)[None, :])
    for b in gl.static_range(4):
        mbarrier.invalidate(ready.index(b))


def row_ring_conv(x: torch.Tensor, wt: torch.Tensor, pad: int, u: torch.Tensor, tw: int = 128, rows: int = 16,
                  num_warps: int = 4) -> torch.Tensor:  # fmt: skip
    """``u [N, P, W, J]`` (fp32, channel stride 1) = the R x 1 convolution of the channels_last
    ``x [N, C, H, W]`` (fp16 or bf16, C of 16, 32, 64 or 128) by ``wt [J, C, R, 1]`` (J <= 64,
    R <= 3), padding ``pad`` rows above and below, stride 1. Returns ``u``."""
    n, c, h, w = x.shape
    j, c2, r, one = wt.shape
    if c2 != c or one != 1 or r > 3 or j > 64 or c not in (16, 32, 64, 128) or x.stride(1) != 1:
        raise ValueError(f"row_ring_conv: x {tuple(x.shape)} (channels_last, C 16-128 a power of two) and "
                         f"wt {tuple(wt.shape)} (J <= 64, R <= 3, one column) do not fit; use narrow_tma")  # fmt: skip
    if x.dtype not in (torch.float16, torch.bfloat16) or wt.dtype != x.dtype:
        raise ValueError(f"row_ring_conv: x {x.dtype} and wt {wt.dtype}: both fp16 or both bf16; use narrow_tma")
    if num_warps not in (4, 8) or tw % (16 * num_warps) or tw > 256:
        raise ValueError(f"row_ring_conv: tw {tw} with {num_warps} warps: 4 or 8 warps, tw a multiple of 16 per "
                         "warp and at most 256 (one wgmma row block a warpgroup)")  # fmt: skip
    p = h + 2 * pad - r + 1
    if tuple(u.shape) != (n, p, w, j) or u.dtype != torch.float32 or u.stride(3) != 1 or u.device != x.device:
        raise ValueError(f"row_ring_conv: u must be fp32 [N, P, W, J] = {(n, p, w, j)} with channel stride 1 on "
                         f"{x.device}, got {u.dtype} {tuple(u.shape)} strides {u.stride()}")  # fmt: skip
    bn = max(16, 1 << (j - 1).bit_length())
    wp = torch.zeros(r, bn, c, dtype=x.dtype, device=x.device)
    wp[:, :j] = wt[:, :, :, 0].permute(2, 0, 1)
    box = [1, 1, tw, c]
    layout = gl.NVMMASharedLayout.get_default_for(
        box, {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}[x.dtype]
    )
    desc = TensorDescriptor(x, [n, h, w, c], [x.stride(0), x.stride(2), x.stride(3), 1], box, layout)
    strips, chunks = cdiv(w, tw), cdiv(p, rows)
    units = n * strips * chunks
    # programs an SM can hold: the ring, the weight taps (4 slots) and the epilogue's scratch
    smem = 4 * tw * c * x.element_size() + 4 * bn * c * x.element_size() + tw * bn * 4
    per_sm = max(1, min(3, 220_000 // smem))
    grid = (max(1, min(units, per_sm * sm_count())),)  # the grid's size only: any device's count will do
    row_ring_kernel[grid](desc, wp, u, h, w, p, j, pad, units, strips, chunks, u.stride(0), u.stride(1), u.stride(2),
                          R=r, TW=tw, BC=c, BN=bn, ROWS=rows, num_warps=num_warps)  # fmt: skip
    return u
