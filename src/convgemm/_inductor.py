"""Inductor lowerings of convgemm's forward operators: a compiled graph calls convgemm directly.

By default Inductor runs a custom operator it cannot generate code for as a fallback: its
compiled wrapper calls ``torch.ops.convgemm.conv2d.default(...)``, which goes through the
dispatcher and convgemm's Autograd-key kernel before reaching the implementation. That round trip
cost 8.5 us per call on this project's 2-core development CPU with the implementation stubbed out
(``tools/overhead.py --dispatch``), about as much as the implementation's own plan lookup, and a
compiled CRAFT calls it 29 times per image.

Here ``conv2d`` and ``conv2d_act`` are lowered to an ``ExternKernelAlloc`` whose wrapper line calls
``extern_kernels.convgemm_conv2d(input, weight[, bias], stride=..., ...)``: a plain Python function
that runs ``functional.conv2d_forward`` (the same plans and kernels as the operator). The inputs
keep the strides they had when the graph was traced, and the output's layout is the operator's
fake implementation's, which the wrapper's size and stride assertion checks on every call.

Anything unusual -- symbolic shapes, a CPU tensor, the C++ wrapper (AOTInductor) -- keeps
Inductor's own fallback. The lowerings are registered the first time a fake implementation runs
(tracing is under way by then), not at import: importing Inductor costs about a second.
``CONVGEMM_INDUCTOR_LOWERING=0`` leaves the operators as Inductor's fallbacks.
"""

from __future__ import annotations

import os
import warnings

import torch

from .functional import Pads4, conv2d_forward

ENABLED = os.environ.get("CONVGEMM_INDUCTOR_LOWERING", "1") != "0"
_NAME = "convgemm_conv2d"
#: devices whose calls are lowered (the tests add "cpu", where the kernels run on Triton's interpreter)
DEVICES = ("cuda",)
_registered = [False]


def extern_conv2d(input, weight, bias=None, *, stride, padding, dilation, groups, algorithm, activation=""):
    """What a compiled graph's wrapper calls for ``torch.ops.convgemm.conv2d`` / ``conv2d_act``:
    their implementation (arguments in the operators' forms), without the dispatcher."""
    return conv2d_forward(input, weight, bias, tuple(stride), Pads4(padding), tuple(dilation), groups, algorithm,
                          activation)  # fmt: skip


def ensure_lowerings() -> None:
    """Register the lowerings once (called by the operators' fake implementations)."""
    if _registered[0]:
        return
    _registered[0] = True
    try:
        _register(ENABLED)
    except Exception as e:  # an Inductor whose internals differ: the operators stay fallbacks
        warnings.warn(
            f"convgemm: could not register the Inductor lowerings ({type(e).__name__}: {e}); compiled graphs call "
            "torch.ops.convgemm.* through the dispatcher instead. Set CONVGEMM_INDUCTOR_LOWERING=0 to silence this.",
            stacklevel=2,
        )


def _register(lower_ops: bool) -> None:
    from torch._inductor.select_algorithm import extern_kernels

    # always: a graph from Inductor's on-disk cache, compiled with the lowerings, calls it
    if not hasattr(extern_kernels, _NAME):
        setattr(extern_kernels, _NAME, extern_conv2d)
    if not lower_ops:
        return
    from torch._inductor import ir
    from torch._inductor.lowering import constrain_to_fx_strides, fallback_handler, register_lowering
    from torch._inductor.virtualized import V

    def lowering(op, has_activation: bool):
        fallback = fallback_handler(op, add_to_fallback_set=False)

        def lower(x, weight, bias, stride, padding, dilation, groups, algorithm, *rest):
            node = V.graph.current_node
            val = node.meta.get("val") if node is not None else None
            consts = (*stride, *padding, *dilation, groups)
            static = (
                isinstance(val, torch.Tensor)
                and val.device.type in DEVICES
                and all(type(v) is int for v in (*val.shape, *val.stride(), *consts))
            )
            if not static or V.graph.cpp_wrapper:
                return fallback(x, weight, bias, stride, padding, dilation, groups, algorithm, *rest)
            # the strides each input had when traced: the fake implementation's output layout,
            # which the wrapper asserts, was worked out from them
            (x, weight, bias), _ = constrain_to_fx_strides(node, x, weight, bias)
            layout = ir.FixedLayout(val.device, val.dtype, list(val.shape), list(val.stride()))
            kwargs = dict(stride=list(stride), padding=list(padding), dilation=list(dilation), groups=groups,
                          algorithm=algorithm, activation=rest[0] if has_activation else "")  # fmt: skip
            inputs = [x, weight] if bias is None else [x, weight, bias]
            out = ir.ExternKernelAlloc(layout=layout, inputs=inputs, kwargs=kwargs,
                                       python_kernel_name=f"extern_kernels.{_NAME}")  # fmt: skip
            return ir.TensorBox.create(out)

        return lower

    for op, act in ((torch.ops.convgemm.conv2d.default, False), (torch.ops.convgemm.conv2d_act.default, True)):
        register_lowering(op, type_promotion_kind=None)(lowering(op, act))
