"""Layouts: the NHWC view of activations and the KRSC view (or packed copy) of the weight."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._runtime import cdiv, interpreting
from ..matmul.launch import Launch


@triton.jit
def _transpose_kernel(src, dst, C, HW, TO_NHWC: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_HW: tl.constexpr,
                      INT64: tl.constexpr):  # fmt: skip
    # One [BLOCK_C, BLOCK_HW] tile of one image. Both offset grids are built from aranges, so
    # Triton sees the NCHW side contiguous along HW and the NHWC side contiguous along C, and
    # gives the load and the store each a coalesced layout (the swap goes through shared memory).
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    hw = tl.program_id(0) * BLOCK_HW + tl.arange(0, BLOCK_HW)
    if INT64:
        c = c.to(tl.int64)
        hw = hw.to(tl.int64)
    base = tl.program_id(2).to(tl.int64) * C * HW
    mask = (c[:, None] < C) & (hw[None, :] < HW)
    nchw = c[:, None] * HW + hw[None, :]
    nhwc = hw[None, :] * C + c[:, None]
    if TO_NHWC:
        tl.store(dst + base + nhwc, tl.load(src + base + nchw, mask=mask), mask=mask)
    else:
        tl.store(dst + base + nchw, tl.load(src + base + nhwc, mask=mask), mask=mask)


def _transpose(src: torch.Tensor, to_nhwc: bool) -> torch.Tensor:
    """A dense NCHW <-> channels_last copy of ``src [N, C, H, W]`` (dense in the other format).

    PyTorch's ``.contiguous(memory_format=...)`` runs these as strided element-wise copies, with
    one side uncoalesced: on the H200 that cost ~150 us per call on a 64x64x56x56 bf16 layer
    whose convolution takes ~40 us (session 5). A tiled transpose reads and writes full lines.
    """
    n, c, h, w = src.shape
    dst = torch.empty_like(src, memory_format=torch.channels_last if to_nhwc else torch.contiguous_format)
    # one Launch per geometry: from the second call on only the two tensors go to the compiled
    # kernel. Triton's own dispatch costs ~20-40 us of host time per launch, more than the
    # transpose of a ResNet activation takes on the GPU.
    key = (n, c, h * w, src.dtype, src.device, to_nhwc, src.data_ptr() % 16, dst.data_ptr() % 16)
    launch = _transpose_launches.get(key)
    if launch is not None and launch.fast_ready:
        launch.fast((src, dst))
        return dst
    hw = h * w
    grid, consts, warps = _transpose_spec(n, c, hw, to_nhwc)
    launch = Launch()
    launch(_transpose_kernel, grid, (src, dst, c, hw), consts, {"num_warps": warps})
    if launch.fast_ready:
        if len(_transpose_launches) >= 256:
            _transpose_launches.clear()
        _transpose_launches[key] = launch
    return dst


_transpose_launches: dict = {}


def _transpose_spec(n: int, c: int, hw: int, to_nhwc: bool) -> tuple[tuple[int, int, int], dict, int]:
    """(grid, constexprs, num_warps) of ``_transpose_kernel`` for ``n`` images of ``c`` planes of
    ``hw`` pixels: 64 x 64 tiles on 4 warps, except NHWC -> NCHW of 14x14-sized planes (129-256
    pixels) with 256 channels or more, on one 64 x 256 tile of a plane's pixels on 8 warps. H100,
    session 52 (``tools/transpose_probe.py --max-hw 784``, GPU time, against a copy of the same
    bytes): on the six such activations timed, 64 x 64 took 1.13-1.51x the copy's time (33.6 us
    against 22.3 on 64 x 1024 x 14 x 14) and 64 x 256 on 8 warps 1.06-1.13x (25.3); the other
    direction, 7x7 planes and 28x28 planes were as fast or faster on 64 x 64.

    Planes of at most 32 pixels (NCHW weights of 3x3 and 5x5 filters, packed to KRSC on every
    call by ``pack_weight``) take a tile of the plane's size rounded up, at least 16, and 4096
    elements: on 9-tap planes a 64-pixel tile left 55 of its 64 lanes idle. H100, session 55
    (``tools/transpose_probe.py --weights``, the all suite's 27 filters): [512, 512, 3, 3] bf16
    11.2 -> 8.8 us (a copy of its bytes 7.8), [1024, 512, 3, 3] 17.2 -> 12.7 (copy 11.4), 1.05x
    the copy's time in geomean. The NHWC -> NCHW direction of such small planes (activations of
    at most 32 pixels an image) takes the same tile, untimed."""
    block_c = min(64, triton.next_power_of_2(c))
    block_hw, warps = max(64, 4096 // block_c), 4
    if not to_nhwc and 128 < hw <= 256 and c >= 256:
        block_hw, warps = 256, 8
    elif hw <= 32:
        block_hw = max(16, triton.next_power_of_2(hw))
        block_c = min(4096 // block_hw, max(16, triton.next_power_of_2(c)))
    grid = (cdiv(hw, block_hw), cdiv(c, block_c), n)
    consts = dict(TO_NHWC=to_nhwc, BLOCK_C=block_c, BLOCK_HW=block_hw, INT64=c * hw + block_c * block_hw >= 2**31)
    return grid, consts, warps


def warm_transpose(src: torch.Tensor, to_nhwc: bool) -> None:
    """Compile, without launching, the tiled transpose that ``to_format`` would run on ``src``
    (dense NHWC -> NCHW when ``to_nhwc`` is False): the tuner's compile pass, whose candidates
    writing NHWC are timed with the transpose of an NCHW call's result. Left to its first
    launch, its compile fell in the tuner's load phase (session 27, gray 1->16 5x5)."""
    if not _transposable(src):
        return
    n, c, h, w = src.shape
    grid, consts, warps = _transpose_spec(n, c, h * w, to_nhwc)
    # src stands in for the destination: a fresh tensor from PyTorch's allocator is 16-byte
    # aligned as src is, which is all the specialization sees of a pointer
    _transpose_kernel.warmup(src, src, c, h * w, grid=grid, **consts, num_warps=warps)


def _transposable(t: torch.Tensor) -> bool:
    # grid axes 1 and 2 are limited to 65535 programs; the kernel handles 16- to 64-bit elements
    return t.dim() == 4 and t.numel() > 0 and t.shape[0] <= 65535 and t.shape[1] <= 64 * 65535 and t.shape[1] > 1


def as_nhwc(x: torch.Tensor) -> torch.Tensor:
    """``x [N, C, H, W]`` with channel stride 1, copying only when it is not already so.

    channels_last tensors and channels_last views (slices) pass through untouched: the kernels
    read them with their own strides. NCHW tensors (with C > 1) are copied to channels_last, by a
    tiled transpose when dense, else by PyTorch.
    """
    if x.shape[1] == 1 or x.stride(1) == 1:
        return x
    if x.is_contiguous() and _transposable(x):
        return _transpose(x, to_nhwc=True)
    return x.contiguous(memory_format=torch.channels_last)


def to_format(t: torch.Tensor, memory_format: torch.memory_format) -> torch.Tensor:
    """``t`` in ``memory_format`` (``t`` itself when it already is), dense channels_last <-> NCHW
    through the tiled transpose, anything else through PyTorch."""
    if t.is_contiguous(memory_format=memory_format):
        return t
    if _transposable(t):
        if memory_format == torch.contiguous_format and t.is_contiguous(memory_format=torch.channels_last):
            return _transpose(t, to_nhwc=False)
        if memory_format == torch.channels_last and t.is_contiguous():
            return _transpose(t, to_nhwc=True)
    return t.contiguous(memory_format=memory_format)


def broadcasts(t: torch.Tensor, dims) -> bool:
    """Whether ``t`` repeats along one of ``dims`` (stride 0 on a dimension longer than 1, as
    ``expand`` makes). TMA descriptors never read such a tensor: whether the driver encodes a
    zero stride is not documented, and the pointer kernels take it as it is."""
    return any(t.stride(d) == 0 and t.shape[d] > 1 for d in dims)


def tma_aligned(x: torch.Tensor, cg: int) -> bool:
    """Can the NHWC tensor ``x`` be read through a TMA descriptor ``[N, H, W, groups, C/groups]``?

    The copy engine needs a 16-byte aligned base and 16-byte multiples for every stride but the
    innermost, which must be 1; no broadcast dimension (``broadcasts``).
    """
    e = x.element_size()
    if x.stride(1) != 1 or x.data_ptr() % 16 or broadcasts(x, (0, 2, 3)):
        return False
    return all((s * e) % 16 == 0 for s in (x.stride(0), x.stride(2), x.stride(3), cg))


def pack_weight(w: torch.Tensor, c_pad: int) -> torch.Tensor:
    """``w [K, C/g, R, S]`` -> ``[K, R*S, Cp]`` (KRSC), channels zero-padded to ``Cp = c_pad``.

    Padding the channels to a multiple of the K tile means a reduction tile never straddles two
    filter taps, and every row is 16-byte aligned for TMA.
    """
    k, cg, r, s = w.shape
    if cg == c_pad and w.is_contiguous() and _transposable(w) and (w.is_cuda or interpreting()):
        # an NCHW-contiguous weight without padding: its channels_last copy is the KRSC matrix,
        # made by the tiled transpose in one launch. Zeros and a permuted copy took two, the
        # copy's stores a channel apart (an H100 NCHW call of ResNet-50's l4 3x3 (first) ran 9.9
        # us longer than its input transpose, NHWC call and output transpose together, session 51).
        # Elsewhere (CPU tensors with no interpreter: tools/compile_call.py's stand-ins) no
        # Triton kernel can run, and PyTorch packs as before
        return _transpose(w, to_nhwc=True).permute(0, 2, 3, 1).reshape(k, r * s, cg)
    out = w.new_zeros((k, r * s, c_pad))
    out[:, :, :cg] = w.permute(0, 2, 3, 1).reshape(k, r * s, cg)
    return out


def krsc_weight(w: torch.Tensor, c_pad: int) -> torch.Tensor:
    """``w [K, C/g, R, S]`` as a dense ``[K, R*S, Cp]`` KRSC tensor with 16-byte aligned rows.

    A channels_last weight whose channel count is already ``c_pad`` *is* that tensor: it is
    returned as a view, with no copy and nothing to go stale. Anything else is packed anew on
    every call (a small copy, as PyTorch itself converts weights to the input's memory format on
    each cuDNN call). Nothing is cached here, so a weight changed in place, through ``.data`` or
    any other alias, is always seen.
    """
    k, cg, r, s = w.shape
    if cg == c_pad and krsc_in_place(w):
        return w.permute(0, 2, 3, 1).reshape(k, r * s, cg)
    return pack_weight(w, c_pad)


def krsc_in_place(w: torch.Tensor) -> bool:
    """Whether ``krsc_weight(w, C/g)`` is ``w`` itself seen as KRSC (a 16-byte aligned
    channels_last weight): a warm call can then hand ``w`` to a launch bound to that view, with
    no view built (the launch reads only the address)."""
    return w.is_contiguous(memory_format=torch.channels_last) and w.data_ptr() % 16 == 0


def channel_pad(cg: int, block_k: int) -> int:
    return cdiv(cg, block_k) * block_k
