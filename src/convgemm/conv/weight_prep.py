"""The training replay's weight under autocast: its cast and its flipped copy in one kernel.

A stride-1 layer's dgrad runs as a forward convolution of dy with the flipped, channel-swapped
weight (``functional._flip_swap``: ``w [K, C/g, R, S] -> w' [C, K/g, R, S]``, taps reversed).
Under autocast the replay's forward already casts the fp32 weight to the 16-bit dtype
(``ops._ReplayConv2d``), and its backward flipped the cast weight with an ``index_select``:
two launches and four torch calls a layer and step. ``cast_flip_kernel`` reads the fp32 weight
once and writes both, the cast weight for the forward and the flipped copy for the backward,
in one launch. The values are the same bit for bit: the cast rounds to nearest even as
``Tensor.to`` does, and the flip only moves values.

Each program takes one filter tap and a ``BLOCK_K x BLOCK_C`` block of (output, input)
channels. With channels_last weights the read and the cast copy run along C and the flipped copy
along K/g, so the tile is transposed on chip (Triton converts the layout between the load and
the second store), and both stores move whole rows.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..matmul.launch import Launch


@triton.jit
def cast_flip_kernel(w_ptr, wc_ptr, wt_ptr, K, CG, KG, R, S,
                     swk, swc, swr, sws, cwk, cwc, cwr, cws, twc, twk, twr, tws,
                     BLOCK_K: tl.constexpr, BLOCK_C: tl.constexpr):  # fmt: skip
    """``wc[k, c, r, s] = w[k, c, r, s]`` cast to ``wc``'s dtype and
    ``wt[g*CG + c, k % KG, R-1-r, S-1-s]`` the same value (``g = k // KG``), for ``w`` of shape
    ``[K, CG, R, S]`` with element strides ``swk..sws`` (``cw*``, ``tw*``: the outputs', ``wt``'s
    in its own axis order ``[C, K/g, R, S]``). grid = (R*S, cdiv(K, BLOCK_K), cdiv(CG, BLOCK_C))."""
    tap = tl.program_id(0)
    r = tap // S
    s = tap % S
    k = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    c = tl.program_id(2) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (k < K)[:, None] & (c < CG)[None, :]
    k64 = k.to(tl.int64)
    c64 = c.to(tl.int64)
    v = tl.load(w_ptr + (k64 * swk)[:, None] + (c64 * swc)[None, :] + (r * swr + s * sws), mask=mask)
    v = v.to(wc_ptr.dtype.element_ty)
    tl.store(wc_ptr + (k64 * cwk)[:, None] + (c64 * cwc)[None, :] + (r * cwr + s * cws), v, mask=mask)
    g = k64 // KG
    row = (g * CG)[:, None] + c64[None, :]
    flipped = (R - 1 - r) * twr + (S - 1 - s) * tws
    tl.store(wt_ptr + row * twc + ((k64 % KG) * twk)[:, None] + flipped, v, mask=mask)


class CastFlip:
    """``prep(weight) -> (wc, wt)`` for weights of one shape, strides and dtype: ``wc`` as
    ``weight.to(dtype)`` gives it (its strides), ``wt`` as ``flip(wc)`` gives it, ``flip`` being
    the dgrad runner's ``functional._flipper`` for ``groups`` and ``channels_last``; one launch.

    ``build`` checks the kernel once against ``Tensor.to`` and ``flip`` on the weight it is given
    (bit for bit, NaNs compared as NaNs) and returns None if they differ or the weight does not
    suit (not 4-D, not floating point), so that a caller keeps the two-step path."""

    BLOCK_K = 64
    BLOCK_C = 64

    def __init__(self, weight: torch.Tensor, wc: torch.Tensor, wt: torch.Tensor, groups: int) -> None:
        k, cg, r, s = weight.shape
        self.shape = tuple(weight.shape)
        self.dtype = wc.dtype
        self.device = weight.device
        self.wc_strides = wc.stride()
        self.wt_shape, self.wt_strides = tuple(wt.shape), wt.stride()
        self.grid = (r * s, triton.cdiv(k, self.BLOCK_K), triton.cdiv(cg, self.BLOCK_C))
        self.scalars = (k, cg, k // groups, r, s, *weight.stride(), *wc.stride(), *wt.stride())
        self.launch = Launch()

    @classmethod
    def build(cls, weight: torch.Tensor, dtype: torch.dtype, flip, groups: int) -> CastFlip | None:
        if weight.dim() != 4 or not weight.is_floating_point() or weight.numel() == 0:
            return None
        with torch.no_grad():
            w = weight.detach()
            want_c = w.to(dtype)
            want_t = flip(want_c)
            prep = cls(w, want_c, want_t, groups)
            wc, wt = prep(w)
        same = all(
            a.shape == b.shape and a.stride() == b.stride() and torch.equal(a.isnan(), b.isnan())
            and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))
            for a, b in ((wc, want_c), (wt, want_t))
        )  # fmt: skip
        return prep if same else None

    def __call__(self, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        wc = torch.empty_strided(self.shape, self.wc_strides, dtype=self.dtype, device=self.device)
        wt = torch.empty_strided(self.wt_shape, self.wt_strides, dtype=self.dtype, device=self.device)
        launch = self.launch
        if launch.fast_ready:
            launch.fast((weight, wc, wt))
        else:
            launch(cast_flip_kernel, self.grid, (weight, wc, wt, *self.scalars),
                   {"BLOCK_K": self.BLOCK_K, "BLOCK_C": self.BLOCK_C}, {"num_warps": 4})  # fmt: skip
        return wc, wt
