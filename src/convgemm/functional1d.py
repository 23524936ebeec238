"""1-D convolutions: ``conv1d`` and ``conv_transpose1d`` with ``torch.nn.functional`` semantics.

A 1-D convolution is the 2-D one with a unit height: ``[N, C, L]`` is viewed as ``[N, C, 1, L]``
and the weight ``[K, C/g, R]`` as ``[K, C/g, 1, R]`` (views, no copies), and everything else --
problem, algorithms, tuning, plans, gradients through ``torch.ops.convgemm.*`` -- is the 2-D
machinery. A "channels-last" 1-D tensor (channel stride 1, e.g. ``t.transpose(1, 2)`` of an
``[N, L, C]`` tensor) is read in place, as NHWC; a contiguous ``[N, C, L]`` one is copied to that
layout once, as a 2-D NCHW input is. The depthwise kernel (``groups == C``) covers the short
causal convolutions of sequence models.
"""

from __future__ import annotations

import torch

from .functional import conv2d, conv_transpose2d

__all__ = ["conv1d", "conv_transpose1d"]


def _one(value, name: str, op: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{op}: {name} must be an int or a 1-tuple of ints, got a bool ({value!r})")
    if isinstance(value, int):
        return value
    if isinstance(value, (tuple, list, torch.Size)) and len(value) == 1 and isinstance(value[0], int):
        return int(value[0])
    raise TypeError(f"{op}: {name} must be an int or a 1-tuple of ints, got {value!r}; pass e.g. {name}=1")


def _check(op: str, input, weight, bias, weight_name: str) -> bool:
    """Rank and type checks with 1-D wording; returns whether the input is unbatched."""
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if bias is not None and not isinstance(bias, torch.Tensor):
        raise TypeError(f"{op}: bias must be a torch.Tensor or None, got {type(bias).__name__}")
    if input.dim() not in (2, 3):
        raise ValueError(f"{op}: input must be 3-D [N, C, L] (or 2-D unbatched [C, L]), got shape {tuple(input.shape)}")
    if weight.dim() != 3:
        raise ValueError(f"{op}: weight must be 3-D {weight_name}, got shape {tuple(weight.shape)}")
    return input.dim() == 2


def conv1d(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: int | tuple[int] = 1,
    padding: int | tuple[int] | str = 0,
    dilation: int | tuple[int] = 1,
    groups: int = 1,
    *,
    algorithm: str = "auto",
) -> torch.Tensor:
    """1-D convolution with the semantics of ``torch.nn.functional.conv1d``.

    Args:
        input: ``[N, C, L]`` (or unbatched ``[C, L]``), float16, bfloat16, float32 or float64, on
            a CUDA device; any strides (a channel stride of 1 is read in place).
        weight: ``[K, C/groups, R]``, same dtype and device; bias ``[K]`` or None.
        stride, dilation: int or 1-tuple, >= 1. padding: int, 1-tuple, ``'valid'`` or ``'same'``.
        groups: divides C and K (``groups == C`` runs the depthwise kernel).
        algorithm: as for ``conv2d``.

    Returns ``[N, K, L_out]`` (``[K, L_out]`` unbatched) in the input's dtype, with
    ``L_out = (L + 2 * padding - dilation * (R - 1) - 1) // stride + 1``. Differentiable and
    traceable by ``torch.compile`` (through ``torch.ops.convgemm.conv2d``).
    """
    op = "conv1d"
    unbatched = _check(op, input, weight, bias, "[K, C/groups, R]")
    st, dil = _one(stride, "stride", op), _one(dilation, "dilation", op)
    pad = padding if isinstance(padding, str) else _one(padding, "padding", op)
    x = input.unsqueeze(0) if unbatched else input
    y = conv2d(
        x.unsqueeze(2),
        weight.unsqueeze(2),
        bias,
        (1, st),
        pad if isinstance(pad, str) else (0, pad),
        (1, dil),
        groups,
        algorithm=algorithm,
    ).squeeze(2)
    return y.squeeze(0) if unbatched else y


def conv_transpose1d(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: int | tuple[int] = 1,
    padding: int | tuple[int] = 0,
    output_padding: int | tuple[int] = 0,
    groups: int = 1,
    dilation: int | tuple[int] = 1,
) -> torch.Tensor:
    """Transposed 1-D convolution with the semantics of ``torch.nn.functional.conv_transpose1d``.

    Args:
        input: ``[N, C_in, L]`` (or unbatched ``[C_in, L]``); weight ``[C_in, C_out/groups, R]``;
            bias ``[C_out]`` or None; same dtype and device.
        output_padding: extra positions at the end, smaller than stride or dilation.

    Returns ``[N, C_out, L_out]`` with ``L_out = (L - 1) * stride - 2 * padding + dilation * (R - 1)
    + output_padding + 1``: conv1d's data gradient, computed per stride phase. Differentiable.
    """
    op = "conv_transpose1d"
    unbatched = _check(op, input, weight, bias, "[C_in, C_out/groups, R]")
    if isinstance(padding, str):
        raise ValueError(f"{op}: padding must be an int or a 1-tuple (PyTorch has no string padding here)")
    st, pad, dil = _one(stride, "stride", op), _one(padding, "padding", op), _one(dilation, "dilation", op)
    op_pad = _one(output_padding, "output_padding", op)
    x = input.unsqueeze(0) if unbatched else input
    y = conv_transpose2d(
        x.unsqueeze(2), weight.unsqueeze(2), bias, (1, st), (0, pad), (0, op_pad), groups, (1, dil)
    ).squeeze(2)
    return y.squeeze(0) if unbatched else y
