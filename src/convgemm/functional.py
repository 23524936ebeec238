"""The functional API: ``torch.nn.functional`` semantics on convgemm's kernels."""

from __future__ import annotations

from dataclasses import replace

import torch

from ._runtime import check_device, empty, has_tma
from .conv.layout import as_nhwc, tma_aligned
from .problem import ConvProblem, IntOrPair, Padding
from .tune import choose


def _dense_rows(x: torch.Tensor) -> bool:
    # (n, h, w) flatten to one evenly strided row index
    return x.stride(2) == x.shape[3] * x.stride(3) and x.stride(0) == x.shape[2] * x.stride(2)


def conv2d(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: IntOrPair = 1,
    padding: Padding = 0,
    dilation: IntOrPair = 1,
    groups: int = 1,
    *,
    algorithm: str = "auto",
) -> torch.Tensor:
    """2-D convolution with exactly the semantics of ``torch.nn.functional.conv2d``.

    Args:
        input: ``[N, C, H, W]`` (or unbatched ``[C, H, W]``), float16, bfloat16, float32 or
            float64, on a CUDA device. Any strides: NCHW, channels_last and sliced views are all
            accepted. NCHW input (C > 1) is copied to channels_last once, and that copy is part of
            the call's time.
        weight: ``[K, C/groups, R, S]``, same dtype and device.
        bias: ``[K]`` or None; added in fp32 inside the kernel's epilogue.
        stride, dilation: int or pair, each >= 1.
        padding: int or pair (>= 0), ``'valid'`` or ``'same'`` (stride 1 only; may pad one more
            row/column at the bottom/right, as PyTorch does).
        groups: divides both C and K.
        algorithm: ``'auto'`` (tuned per shape) or a name from ``convgemm.algorithms()``.

    Returns:
        ``[N, K, P, Q]`` (``[K, P, Q]`` for unbatched input) in the input's dtype, channels_last
        when the input or the weight is channels_last (cuDNN's rule), NCHW otherwise.

    Accumulation is fp32 for fp16/bf16/fp32 (fp64 for fp64). fp32 inputs use TF32 tensor cores
    exactly when ``torch.backends.cudnn.allow_tf32`` is True, strict IEEE fp32 otherwise.
    Raises ``TypeError``/``ValueError`` for invalid arguments before any kernel runs.
    """
    unbatched = isinstance(input, torch.Tensor) and input.dim() == 3
    if unbatched:
        input = input.unsqueeze(0)
    prob, x, y = _prepare(input, weight, bias, stride, padding, dilation, groups)
    if x is not None:
        algo, cfg = choose(prob, x, weight, bias, y, algorithm)
        algo.run(prob, x, weight, bias, y, cfg)
    return y.squeeze(0) if unbatched else y


def _prepare(input, weight, bias, stride, padding, dilation, groups):
    """Validate, allocate the output, and present the input as NHWC.

    Returns ``(problem, x, y)``; ``x`` is None when no kernel is needed (empty output, or an empty
    reduction whose result, the bias, is already in ``y``).
    """
    prob = ConvProblem.from_tensors(input, weight, bias, stride, padding, dilation, groups)
    check_device(input, "conv2d")
    fmt = torch.channels_last if prob.channels_last_out else torch.contiguous_format
    y = empty(prob.output_shape, input.dtype, input.device, fmt)
    if y.numel() == 0:
        return prob, None, y
    if prob.cg == 0:  # an empty reduction: the output is the bias
        y.copy_(bias.view(1, -1, 1, 1).expand_as(y) if bias is not None else torch.zeros_like(y))
        return prob, None, y
    x = as_nhwc(input)
    prob = replace(prob, tma_ok=has_tma(x), input_tma_ok=tma_aligned(x, prob.cg), input_dense=_dense_rows(x))
    return prob, x, y


def explain(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: IntOrPair = 1,
    padding: Padding = 0,
    dilation: IntOrPair = 1,
    groups: int = 1,
    *,
    algorithm: str = "auto",
) -> dict:
    """What ``conv2d`` with these arguments runs: ``{'algorithm', 'config', 'problem'}``.

    Tunes first if the shape is new and tuning is on, exactly as ``conv2d`` would.
    """
    if input.dim() == 3:
        input = input.unsqueeze(0)
    prob, x, y = _prepare(input, weight, bias, stride, padding, dilation, groups)
    if x is None:
        return {"algorithm": None, "config": None, "problem": prob}
    algo, cfg = choose(prob, x, weight, bias, y, algorithm)
    return {"algorithm": algo.name, "config": cfg.describe(), "problem": prob}
