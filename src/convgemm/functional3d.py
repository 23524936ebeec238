"""3-D convolutions with ``torch.nn.functional`` semantics: ``conv3d``, its gradients
``conv3d_input`` / ``conv3d_weight``, and ``conv_transpose3d``; custom ops
``torch.ops.convgemm.conv3d`` / ``conv3d_input`` / ``conv3d_weight`` with autograd, so the
functions are differentiable and ``torch.compile`` traces them.

Kernels: ``conv/conv3d.py`` (implicit GEMMs on the matmul blocks; the forward's algorithm and
config tuned per shape, and a per-signature plan so repeat calls skip Triton's dispatch). NCDHW inputs with
more than one channel are copied to channels_last_3d first (the loaders then read channel runs
contiguously); channels_last_3d tensors and views are read in place.
"""

# no ``from __future__ import annotations``: torch.library reads these annotations as types
from dataclasses import replace
from typing import Optional

import torch
from torch import Tensor

from ._inductor import ensure_lowerings
from ._runtime import check_device, dense_bias, empty, transforming
from .conv import conv3d as k3
from .functional import (
    _autocast,
    _derived_weight,
    _device_of,
    _needs_op,
    _signature,
    _swap_channels,
    conv2d_input,
    conv2d_weight,
    transpose_input_padded,
)
from .matmul.launch import Launch
from .ops import (
    _first_order_only,
    conv_vmap_rule,
    func_function,
    grad_input_vmap_rule,
    grad_weight_vmap_rule,
    gradient_op_autograd,
)
from .problem3d import ConvProblem3d

__all__ = ["conv3d", "conv3d_input", "conv3d_weight", "conv_transpose3d"]

_CL3 = torch.channels_last_3d


class Pads6(tuple):
    """Explicit (front, top, left, back, bottom, right) padding, as the operators pass it."""


def _is_cl3(t: Tensor) -> bool:
    return t.dim() == 5 and t.shape[1] > 1 and t.is_contiguous(memory_format=_CL3) and not t.is_contiguous()


def _out_format(a: Tensor, b: Tensor) -> torch.memory_format:
    """channels_last_3d when either tensor is (PyTorch's rule for convolutions), else contiguous."""
    return _CL3 if _is_cl3(a) or _is_cl3(b) else torch.contiguous_format


def _ndhwc(x: Tensor) -> Tensor:
    return x if x.shape[1] == 1 or x.stride(1) == 1 else x.contiguous(memory_format=_CL3)


def _problem(input, weight, bias, stride, padding, dilation, groups, op="conv3d") -> ConvProblem3d:
    if isinstance(padding, Pads6):
        # both ends at once: the output's size (and its check) follows the padding after each axis
        return ConvProblem3d.from_tensors(input, weight, bias, stride, tuple(padding[:3]), dilation, groups, op,
                                          pad_end=tuple(padding[3:]))  # fmt: skip
    return ConvProblem3d.from_tensors(input, weight, bias, stride, padding, dilation, groups, op)


def _three(v) -> list[int]:
    return [v, v, v] if isinstance(v, int) else ([v[0]] * 3 if len(v) == 1 else [v[0], v[1], v[2]])


def _normalize(weight, stride, padding, dilation) -> tuple[list[int], list[int], list[int]]:
    """``conv3d``'s argument forms as the operator's (stride, 6-int padding, dilation): plain
    arithmetic that ``torch.compile`` traces (validation happens eagerly, and in the fake op)."""
    st, dil = _three(stride), _three(dilation)
    if isinstance(padding, str):
        if padding == "valid":
            return st, [0] * 6, dil
        total = [dil[i] * (weight.shape[2 + i] - 1) for i in range(3)]
        return st, [v // 2 for v in total] + [v - v // 2 for v in total], dil
    pad = _three(padding)
    return st, pad + pad, dil


# Plans, as 2-D's (``functional.conv2d_forward``): per call signature the validated problem, the
# chosen algorithm and config, and a launch handle that skips Triton's dispatch on repeat calls
# (its tens of microseconds were most of a small 3-D layer's time).
_plans: dict[tuple, tuple] = {}
_MAX_PLANS = 4096


def clear_plans3d() -> None:
    """Forget every 3-D plan and tuning result of this process (re-chosen on the next call)."""
    _plans.clear()
    k3.clear_memo()


def _plan_key(input, weight, bias, stride, padding, dilation, groups) -> tuple | None:
    pads = None
    if type(padding) is Pads6:
        if not all(type(v) is int for v in padding):
            return None
        pads, padding = tuple(padding), 0
    sig = _signature(input, weight, bias, stride, padding, dilation, groups, "conv3d")
    return None if sig is None else (sig, pads)


def _choose(input, weight, bias, stride, padding, dilation, groups):
    """(problem with ``tma_input_ok`` set, NDHWC input, output, (algorithm, config)); the output is
    None when no kernel needs to run (empty, or no input channels)."""
    prob = _problem(input, weight, bias, stride, padding, dilation, groups)
    check_device(input, "conv3d")
    y = empty(prob.output_shape, input.dtype, input.device, _out_format(input, weight))
    if y.numel() == 0 or prob.c == 0:
        return prob, None, y, None
    x = _ndhwc(input)
    prob = replace(prob, **k3.input_flags(x, prob.stride))
    with _device_of(input):
        return prob, x, y, k3.choose(prob, x, weight, bias, y)


def conv3d_forward(input, weight, bias, stride, padding, dilation, groups, out=None) -> Tensor:
    """The forward computation (plans, tuning, kernels); no autograd. ``out`` (internal): a
    tensor of the output's shape and dtype, any strides (one stride phase of a larger tensor, as
    strided dgrad writes), written in place and returned."""
    bias = dense_bias(bias)
    key = _plan_key(input, weight, bias, stride, padding, dilation, groups)
    if key is not None and out is not None:
        # the kernels' descriptors, and whether they store in place, follow out's geometry
        key = (*key, "out", out.shape, out.stride(), out.data_ptr() % 16)
    plan = _plans.get(key) if key is not None else None
    if plan is not None:
        prob, algo, cfg, launch, fmt = plan
        y = empty(prob.output_shape, input.dtype, input.device, fmt) if out is None else out
        with _device_of(input):
            algo.run(prob, _ndhwc(input), weight, bias, y, cfg, launch)
        return y
    prob, x, y, choice = _choose(input, weight, bias, stride, padding, dilation, groups)
    if out is not None:
        assert tuple(out.shape) == tuple(prob.output_shape) and out.dtype == y.dtype, "out: the output's shape, dtype"
        if choice is None:
            out.copy_(conv3d_forward(input, weight, bias, stride, padding, dilation, groups))
            return out
        y = out
    if choice is None:
        if y.numel() and prob.c == 0:
            return y.zero_() if bias is None else y.copy_(bias.view(1, -1, 1, 1, 1).expand_as(y))
        return y
    algo, cfg = choice
    launch = Launch()
    with _device_of(input):
        algo.run(prob, x, weight, bias, y, cfg, launch)
    if key is not None:
        if len(_plans) >= _MAX_PLANS:
            _plans.clear()
        _plans[key] = (prob, algo, cfg, launch, _out_format(input, weight))
    return y


def conv3d_algorithm(input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """The (algorithm name, ``Config``) ``conv3d`` runs these arguments with (tuning if need be);
    (None, None) when no kernel runs."""
    prob, x, _, choice = _choose(input, weight, bias, stride, padding, dilation, groups)
    if choice is None:
        return None, None
    algo, cfg = choice
    if algo is k3.AS2D:  # name the 2-D kernel that runs: 'conv3d_as_2d:implicit_gemm_tma'
        name, cfg = algo.describe_2d(prob, x, weight, bias)
        return f"{algo.name}:{name}", cfg
    return algo.name, cfg


def conv3d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,  # noqa: UP045
    stride=1,
    padding=0,
    dilation=1,
    groups: int = 1,
) -> Tensor:
    """3-D convolution with the semantics of ``torch.nn.functional.conv3d``.

    Args:
        input: ``[N, C, D, H, W]`` (or unbatched ``[C, D, H, W]``), float16, bfloat16, float32 or
            float64, on a CUDA device; any strides.
        weight: ``[K, C/groups, T, R, S]``, same dtype and device; bias ``[K]`` or None.
        stride, dilation: int or triple, >= 1. padding: int, triple, ``'valid'`` or ``'same'``.
        groups: divides C and K.

    Returns ``[N, K, OD, P, Q]`` in the input's dtype (fp32 accumulation), channels_last_3d when
    the input or the weight is. Differentiable (``torch.ops.convgemm.conv3d``).
    """
    unbatched = isinstance(input, Tensor) and input.dim() == 4
    if unbatched:
        input = input.unsqueeze(0)
    input, weight, bias = _autocast(input, weight, bias)
    if _needs_op(input, weight, bias):
        if not torch.compiler.is_compiling():  # eager: validate before the dispatcher
            _problem(input, weight, bias, stride, padding, dilation, groups)
        st, pads, dil = _normalize(weight, stride, padding, dilation)
        if transforming():  # torch.func or forward-mode AD: see ops.func_function
            y = _FuncConv3d.apply(input, weight, bias, st, pads, dil, groups)
        else:
            y = torch.ops.convgemm.conv3d(input, weight, bias, st, pads, dil, groups)
    else:
        y = conv3d_forward(input, weight, bias, stride, padding, dilation, groups)
    return y.squeeze(0) if unbatched else y


def _grad_problem(op, input_size, input_like, weight_like, grad_output, stride, padding, dilation, groups):
    if not isinstance(grad_output, Tensor):
        raise TypeError(f"{op}: grad_output must be a torch.Tensor, got {type(grad_output).__name__}")
    size = tuple(int(v) for v in input_size)
    x = input_like if input_like is not None else weight_like.new_empty(()).expand(size)
    prob = _problem(x, weight_like, None, stride, padding, dilation, groups, op)
    if tuple(grad_output.shape) != prob.output_shape:
        raise ValueError(
            f"{op}: grad_output must have the forward output's shape {list(prob.output_shape)}, "
            f"got {list(grad_output.shape)}"
        )
    if grad_output.dtype != x.dtype or grad_output.device != x.device:
        raise TypeError(f"{op}: grad_output is {grad_output.dtype} on {grad_output.device}; it must match the input")
    return prob


def dgrad_route3d(prob: ConvProblem3d) -> str:
    """How ``conv3d_input`` computes ``prob``'s dgrad: ``conv3d_as_2d (depth|plane)`` (2-D's
    ``conv2d_input`` over views), ``dgrad_as_forward`` (stride 1: a forward convolution with the
    flipped weight), ``dgrad_by_phases`` (strided: one forward per stride phase) or
    ``conv3d_dgrad`` (the gather kernel: stride 1 padded beyond the filter)."""
    mode = k3.as_2d(prob)
    if mode is not None:
        return f"conv3d_as_2d ({mode})"
    if prob.stride != (1, 1, 1):
        return "dgrad_by_phases"
    ext = [prob.dilation[i] * ((prob.t, prob.r, prob.s)[i] - 1) for i in range(3)]
    if all(max(prob.pad[i], prob.pad_end[i]) <= ext[i] for i in range(3)):
        return "dgrad_as_forward"
    return "conv3d_dgrad"


def conv3d_input(input_size, weight: Tensor, grad_output: Tensor, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """The input gradient of ``conv3d`` (dgrad): ``[N, C, D, H, W]`` from ``grad_output`` and
    ``weight``, by ``dgrad_route3d``'s route."""
    prob = _grad_problem("conv3d_input", input_size, None, weight, grad_output, stride, padding, dilation, groups)
    fmt = _out_format(grad_output, weight)
    size = (prob.n, prob.c, prob.d, prob.h, prob.w)
    route = dgrad_route3d(prob)
    mode = k3.as_2d(prob)
    if mode is not None and prob.n * prob.c * prob.k > 0:
        return _dgrad_as_2d(prob, mode, weight, grad_output, fmt)
    if prob.n * prob.c * prob.k > 0 and route == "dgrad_as_forward":
        # stride 1: dx is the forward convolution of dy with the weight flipped in (T, R, S) and its
        # channel axes swapped per group (kept per weight version, as in 2-D), padded by
        # dil * (k - 1) - pad: the forward kernels (the TMA one included) serve dgrad too
        g = prob.groups
        wt = _derived_weight(
            weight, ("flip3", g, fmt), lambda w: _swap_channels(w.flip(2, 3, 4), g).contiguous(memory_format=fmt)
        )
        ext = [prob.dilation[i] * ((prob.t, prob.r, prob.s)[i] - 1) for i in range(3)]
        pads = Pads6([ext[i] - prob.pad[i] for i in range(3)] + [ext[i] - prob.pad_end[i] for i in range(3)])
        y = conv3d_forward(grad_output, wt, None, (1, 1, 1), pads, prob.dilation, g)
        return y if y.is_contiguous(memory_format=fmt) else y.contiguous(memory_format=fmt)
    dx = empty(size, grad_output.dtype, grad_output.device, fmt)
    if dx.numel() == 0:
        return dx
    if prob.k == 0:
        return dx.zero_()
    if route == "dgrad_by_phases":
        _dgrad_by_phases(prob, weight, grad_output, dx)
        return dx
    with _device_of(grad_output):
        k3.dgrad(prob, _ndhwc(grad_output), weight, dx)
    return dx


def _dgrad_by_phases(prob: ConvProblem3d, weight: Tensor, dy: Tensor, dx: Tensor) -> None:
    """Strided dgrad as one stride-1 forward convolution of dy per stride phase of dx (2-D's
    ``functional.phase_convs`` on each axis): phase (fd, fh, fw) receives only the taps whose
    offsets the stride divides, so no multiply-add meets an inserted zero, and each phase runs on
    the tuned forward kernels (the TMA one, or 2-D's through ``conv3d_as_2d`` for a one-tap-deep
    phase). Each phase is written into its strided view of dx; phases no tap reaches are zeros."""
    from .functional import phase_convs

    axes = [phase_convs(k, prob.stride[i], prob.pad[i], prob.dilation[i], size, out)
            for i, (k, size, out) in enumerate(((prob.t, prob.d, prob.od), (prob.r, prob.h, prob.p),
                                                (prob.s, prob.w, prob.q)))]  # fmt: skip
    if any(a is None for axis in axes for a in axis):
        dx.zero_()
    g = prob.groups
    fmt = _CL3 if dx.is_contiguous(memory_format=_CL3) else torch.contiguous_format
    dy = _ndhwc(dy)
    sd, sh, sw = prob.stride
    for fd, a in enumerate(axes[0]):
        for fh, b in enumerate(axes[1]):
            for fw, c in enumerate(axes[2]):
                if a is None or b is None or c is None:
                    continue
                taps = (a[0], b[0], c[0])

                def make(w, taps=taps):
                    # narrow views, cat only for several taps (an index tensor would be a copy
                    # to the device); the one copy is the final contiguous()
                    for dim, picked in zip((2, 3, 4), taps, strict=True):
                        parts = [w.narrow(dim, i, 1) for i in picked]
                        w = parts[0] if len(parts) == 1 else torch.cat(parts, dim)
                    return _swap_channels(w, g).contiguous(memory_format=fmt)

                wt = _derived_weight(weight, ("phase3", g, *map(tuple, taps), fmt), make)
                part = dy[:, :, a[1] : a[2], b[1] : b[2], c[1] : c[2]]
                pads = Pads6([a[3], b[3], c[3], a[4], b[4], c[4]])
                # written into dx's phase in place where the kernel's store takes the strided view
                conv3d_forward(
                    part, wt, None, (1, 1, 1), pads, (a[5], b[5], c[5]), g, out=dx[:, :, fd::sd, fh::sh, fw::sw]
                )


def _dgrad_as_2d(prob: ConvProblem3d, mode: str, weight: Tensor, grad_output: Tensor, fmt) -> Tensor:
    """``conv3d_input`` of a problem that is a 2-D one (``conv3d.as_2d``): ``conv2d_input`` over
    views, whose routes (the flipped-weight forward, per stride phase) are 2-D's. A depth-strided
    problem's skipped input slices get zeros."""
    st, pads, dil = k3.args_2d(prob, mode)
    sd = prob.stride[0] if mode == "depth" else 1
    if mode == "depth":
        size4 = (prob.n * prob.od, prob.c, prob.h, prob.w)
        size5 = (prob.n, prob.c, prob.od, prob.h, prob.w)
    else:
        size4 = (prob.n, prob.c, prob.d, prob.h * prob.w)
        size5 = (prob.n, prob.c, prob.d, prob.h, prob.w)
    dy4 = k3.view_4d(_ndhwc(grad_output), mode)
    dx4 = conv2d_input(size4, k3._weight_4d(weight, mode), dy4, st, pads, dil, prob.groups,
                       memory_format=torch.channels_last)  # fmt: skip
    if not dx4.is_contiguous(memory_format=torch.channels_last):
        dx4 = dx4.contiguous(memory_format=torch.channels_last)
    dx = k3.view_5d(dx4, mode, size5)
    if sd > 1:
        full = empty((prob.n, prob.c, prob.d, prob.h, prob.w), dx.dtype, dx.device, _CL3)
        full.zero_()[:, :, ::sd].copy_(dx)
        dx = full
    return dx if dx.is_contiguous(memory_format=fmt) else dx.contiguous(memory_format=fmt)


def conv3d_weight(input: Tensor, weight_size, grad_output: Tensor, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """The weight gradient of ``conv3d`` (wgrad): ``[K, C/g, T, R, S]``; the reduction is split
    over programs and summed in a fixed order (bitwise reproducible)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"conv3d_weight: input must be a torch.Tensor, got {type(input).__name__}")
    wsize = tuple(int(v) for v in weight_size)
    w_like = input.new_empty(()).expand(wsize)
    prob = _grad_problem("conv3d_weight", input.shape, input, w_like, grad_output, stride, padding, dilation, groups)
    cl3 = _is_cl3(input)
    mode = k3.as_2d(prob)
    if mode is not None and prob.n * prob.od * prob.p * prob.q > 0 and 0 not in wsize:
        st, pads, dil = k3.args_2d(prob, mode)
        x4 = k3.view_4d(_ndhwc(input), mode, prob.stride[0])
        w4 = wsize[:2] + ((wsize[3], wsize[4]) if mode == "depth" else (wsize[2], 1))
        dw = conv2d_weight(x4, w4, k3.view_4d(_ndhwc(grad_output), mode), st, pads, dil, groups,
                           memory_format=torch.channels_last if cl3 else torch.contiguous_format)  # fmt: skip
        return dw.unsqueeze(2 if mode == "depth" else 4)  # channels_last -> channels_last_3d, as 3-D's rule
    dw = empty(wsize, input.dtype, input.device, _CL3 if cl3 else torch.contiguous_format)
    if dw.numel() == 0:
        return dw
    if prob.n * prob.od * prob.p * prob.q == 0:
        return dw.zero_()
    with _device_of(input):
        k3.wgrad_tuned(prob, _ndhwc(input), _ndhwc(grad_output), dw)
    return dw


def conv_transpose3d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,  # noqa: UP045
    stride=1,
    padding=0,
    output_padding=0,
    groups: int = 1,
    dilation=1,
) -> Tensor:
    """Transposed 3-D convolution with ``torch.nn.functional.conv_transpose3d``'s semantics.

    input ``[N, C_in, D, H, W]``, weight ``[C_in, C_out/groups, T, R, S]``; it is conv3d's data
    gradient with the input as the output gradient, plus the bias. Differentiable.
    """
    from .problem3d import _triple

    op = "conv_transpose3d"
    unbatched = isinstance(input, Tensor) and input.dim() == 4
    if unbatched:
        input = input.unsqueeze(0)
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, Tensor) or t.dim() != 5:
            raise ValueError(
                f"{op}: {name} must be a 5-D tensor (input [N, C_in, D, H, W], weight [C_in, C_out/g, T, R, S])"
            )
    if isinstance(padding, str):
        raise ValueError(f"{op}: padding must be an int or a triple (PyTorch has no string padding here)")
    st, pad, dil = _triple(stride, "stride", op), _triple(padding, "padding", op), _triple(dilation, "dilation", op)
    opad = _triple(output_padding, "output_padding", op)
    if min(st) < 1 or min(dil) < 1 or min(pad) < 0 or min(opad) < 0:
        raise ValueError(f"{op}: need stride, dilation >= 1 and padding, output_padding >= 0")
    if any(opad[i] >= st[i] and opad[i] >= dil[i] for i in range(3)):
        raise ValueError(f"{op}: output_padding {opad} must be smaller than the stride {st} or the dilation {dil}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1 or weight.shape[0] != input.shape[1] \
            or input.shape[1] % groups:  # fmt: skip
        raise ValueError(
            f"{op}: weight.shape[0] must equal the input's channels and groups must divide them "
            f"(input {tuple(input.shape)}, weight {tuple(weight.shape)}, groups {groups!r})"
        )
    c_out = weight.shape[1] * groups
    size = [input.shape[0], c_out] + [
        (input.shape[2 + i] - 1) * st[i] - 2 * pad[i] + dil[i] * (weight.shape[2 + i] - 1) + opad[i] + 1
        for i in range(3)
    ]
    if min(size[2:]) < 1:
        raise ValueError(f"{op}: the output would be empty ({size[2:]}); reduce the padding")
    if bias is not None and (not isinstance(bias, Tensor) or tuple(bias.shape) != (c_out,)):
        raise ValueError(f"{op}: bias must be a tensor of shape [{c_out}] (C_out) or None")
    input, weight, bias = _autocast(input, weight, bias)
    input = transpose_input_padded(input, weight.shape[2:], size[2:], st, pad, dil)
    args = (list(st), [*pad, *pad], list(dil), groups)
    if _needs_op(input, weight, None):
        y = torch.ops.convgemm.conv3d_input(size, weight, input, *args)
    else:
        y = conv3d_input(size, weight, input, st, Pads6([*pad, *pad]), dil, groups)
    if bias is not None:
        y = y + bias.view(1, -1, 1, 1, 1)
    return y.squeeze(0) if unbatched else y


# ---------------------------------------------------------------- custom operators
@torch.library.custom_op("convgemm::conv3d", mutates_args=())
def _conv3d_op(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],  # noqa: UP045
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    groups: int,
) -> Tensor:
    return conv3d_forward(input, weight, bias, tuple(stride), Pads6(padding), tuple(dilation), groups)


@_conv3d_op.register_fake
def _(input, weight, bias, stride, padding, dilation, groups):
    ensure_lowerings()  # tracing has begun: Inductor may lower this call next
    prob = _problem(input, weight, bias, tuple(stride), Pads6(padding), tuple(dilation), groups)
    return input.new_empty(prob.output_shape).contiguous(memory_format=_out_format(input, weight))


@torch.library.custom_op("convgemm::conv3d_input", mutates_args=())
def _conv3d_input_op(
    input_size: list[int],
    weight: Tensor,
    grad_output: Tensor,
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    groups: int,
) -> Tensor:
    return conv3d_input(input_size, weight, grad_output, tuple(stride), Pads6(padding), tuple(dilation), groups)


@_conv3d_input_op.register_fake
def _(input_size, weight, grad_output, stride, padding, dilation, groups):
    ensure_lowerings()
    return grad_output.new_empty(input_size).contiguous(memory_format=_out_format(grad_output, weight))


@torch.library.custom_op("convgemm::conv3d_weight", mutates_args=())
def _conv3d_weight_op(
    input: Tensor,
    weight_size: list[int],
    grad_output: Tensor,
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    groups: int,
) -> Tensor:
    return conv3d_weight(input, weight_size, grad_output, tuple(stride), Pads6(padding), tuple(dilation), groups)


@_conv3d_weight_op.register_fake
def _(input, weight_size, grad_output, stride, padding, dilation, groups):
    ensure_lowerings()
    return input.new_empty(weight_size).contiguous(memory_format=_CL3 if _is_cl3(input) else torch.contiguous_format)


def _setup(ctx, inputs, output):
    input, weight, bias, stride, padding, dilation, groups = inputs
    ctx.save_for_backward(input, weight)
    ctx.conv = (stride, padding, dilation, groups)
    ctx.has_bias = bias is not None


def _backward(ctx, grad):
    input, weight = ctx.saved_tensors
    stride, padding, dilation, groups = ctx.conv
    dx = dw = db = None
    if transforming():  # a hessian: refuse here, before PyTorch's vmap of the Functions below fails obscurely
        _first_order_only("conv3d", gradient_op=True)
    if ctx.needs_input_grad[0]:
        # under a torch.func transform the conv3d_input operator's autograd kernel cannot run:
        # its transform-aware Function instead (as ops._backward_transpose does for conv2d)
        dgrad = _FuncConv3dInput.apply if transforming() else torch.ops.convgemm.conv3d_input
        dx = dgrad(list(input.shape), weight, grad, stride, padding, dilation, groups)
    if ctx.needs_input_grad[1]:
        wgrad = _FuncConv3dWeight.apply if transforming() else torch.ops.convgemm.conv3d_weight
        dw = wgrad(input, list(weight.shape), grad, stride, padding, dilation, groups)
    if ctx.has_bias and ctx.needs_input_grad[2]:
        db = grad.sum(dim=(0, 2, 3, 4), dtype=torch.promote_types(grad.dtype, torch.float32)).to(grad.dtype)
    return dx, dw, db, None, None, None, None


_conv3d_op.register_autograd(_backward, setup_context=_setup)
_FuncConv3d = func_function("_FuncConv3d", torch.ops.convgemm.conv3d, _setup, _backward)
_conv3d_op.register_vmap(conv_vmap_rule(torch.ops.convgemm.conv3d, 3))
# one launch per vmap (per-sample gradients: one grouped wgrad), as conv2d's gradient operators
_conv3d_input_op.register_vmap(grad_input_vmap_rule(torch.ops.convgemm.conv3d_input))
_conv3d_weight_op.register_vmap(grad_weight_vmap_rule(torch.ops.convgemm.conv3d_weight))


_setup_input, _backward_input, _, _ = gradient_op_autograd(
    torch.ops.convgemm.conv3d_input, torch.ops.convgemm.conv3d_weight, torch.ops.convgemm.conv3d
)
_conv3d_input_op.register_autograd(_backward_input, setup_context=_setup_input)


def _first_order(name: str, op, setup_context, backward) -> type:
    """``op`` (a conv3d gradient operator) inside conv3d's backward under a torch.func transform:
    functorch runs this Function's forward a level down, where the operator records nothing
    (custom_op's own autograd kernels cannot run inside functorch). First order only: no
    forward mode; the generated batching rule runs the operator's own (one launch per vmap)."""

    def forward(*args):
        _first_order_only(name, gradient_op=True)  # a hessian's outer level, before PyTorch's pytree error
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args)

    def jvp(ctx, *tangents):
        _no_second_derivatives()

    methods = {"forward": forward, "setup_context": setup_context, "backward": backward, "jvp": jvp}
    return type(name, (torch.autograd.Function,), {"generate_vmap_rule": True,
                                                   **{k: staticmethod(v) for k, v in methods.items()}})  # fmt: skip


def _no_gradient(ctx, grad):
    _no_second_derivatives()


_FuncConv3dInput = _first_order("_FuncConv3dInput", torch.ops.convgemm.conv3d_input, _setup_input, _backward_input)
# conv3d_weight has no gradient of its own, so neither has its Function
_FuncConv3dWeight = _first_order("_FuncConv3dWeight", torch.ops.convgemm.conv3d_weight,
                                 lambda ctx, inputs, output: None, _no_gradient)  # fmt: skip


def _no_second_derivatives():
    raise NotImplementedError(
        "convgemm.conv3d under torch.func: second derivatives (hessian, grad of grad, forward over reverse) are not "
        "supported; first-order transforms are. For second derivatives use torch.autograd.grad(..., "
        "create_graph=True)"
    )
