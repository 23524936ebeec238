"""Layouts: the NHWC view of activations and the packed KRSC weight, with its cache."""

from __future__ import annotations

import threading
import weakref

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


class _PackCache:
    """Packed weights keyed by the source tensor's identity, invalidated by in-place changes.

    Each entry holds a weak reference to the weight, so a freed tensor whose memory is reused by
    a new one can never hit a stale entry; ``torch.Tensor._version`` catches in-place updates
    (optimizer steps, ``copy_``).
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[int, int], tuple[weakref.ref, int, torch.Tensor]] = {}
        self._lock = threading.RLock()

    def get(self, w: torch.Tensor, c_pad: int) -> torch.Tensor:
        key = (id(w), c_pad)
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit[0]() is w and hit[1] == w._version:
                return hit[2]
        packed = pack_weight(w.detach(), c_pad)
        with self._lock:
            ref = weakref.ref(w, lambda _r, key=key: self._entries.pop(key, None))
            self._entries[key] = (ref, w._version, packed)
        return packed

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


weight_cache = _PackCache()


def channel_pad(cg: int, block_k: int) -> int:
    return cdiv(cg, block_k) * block_k
