"""Layouts: the NHWC view of activations and the KRSC view (or packed copy) of the weight."""

from __future__ import annotations

import torch

from .._runtime import cdiv


def as_nhwc(x: torch.Tensor) -> torch.Tensor:
    """``x [N, C, H, W]`` with channel stride 1, copying only when it is not already so.

    channels_last tensors and channels_last views (slices) pass through untouched: the kernels
    read them with their own strides. NCHW tensors (with C > 1) are copied to channels_last.
    """
    if x.shape[1] == 1 or x.stride(1) == 1:
        return x
    return x.contiguous(memory_format=torch.channels_last)


def tma_aligned(x: torch.Tensor, cg: int) -> bool:
    """Can the NHWC tensor ``x`` be read through a TMA descriptor ``[N, H, W, groups, C/groups]``?

    The copy engine needs a 16-byte aligned base and 16-byte multiples for every stride but the
    innermost, which must be 1.
    """
    e = x.element_size()
    if x.stride(1) != 1 or x.data_ptr() % 16:
        return False
    return all((s * e) % 16 == 0 for s in (x.stride(0), x.stride(2), x.stride(3), cg))


def pack_weight(w: torch.Tensor, c_pad: int) -> torch.Tensor:
    """``w [K, C/g, R, S]`` -> ``[K, R*S, Cp]`` (KRSC), channels zero-padded to ``Cp = c_pad``.

    Padding the channels to a multiple of the K tile means a reduction tile never straddles two
    filter taps, and every row is 16-byte aligned for TMA.
    """
    k, cg, r, s = w.shape
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
    if cg == c_pad and w.data_ptr() % 16 == 0:
        v = w.permute(0, 2, 3, 1)
        if v.is_contiguous():
            return v.reshape(k, r * s, cg)
    return pack_weight(w, c_pad)


def channel_pad(cg: int, block_k: int) -> int:
    return cdiv(cg, block_k) * block_k
