"""Inductor lowerings of convgemm's operators: a compiled graph calls convgemm directly.

By default Inductor runs a custom operator it cannot generate code for as a fallback: its
compiled wrapper calls ``torch.ops.convgemm.conv2d.default(...)``, which goes through the
dispatcher and convgemm's Autograd-key kernel before reaching the implementation. That round trip
cost 8.5 us per call on this project's 2-core development CPU with the implementation stubbed out
(``tools/overhead.py --dispatch``), about as much as the implementation's own plan lookup, and a
compiled CRAFT calls it 29 times per image. On the H200's host (session 17, ``tools/overhead.py``)
the operator call took 57.5 us, the direct call below 30.4 us and cuDNN's ``F.conv2d`` 30.7 us;
CRAFT fused and compiled went from 3713 to 1727 us per iteration (``tools/compile_ab.py``).

Here ``conv2d``, ``conv2d_act``, ``conv2d_input``, ``conv2d_weight``, ``conv_transpose2d`` and
conv3d's three operators are lowered to an ``ExternKernelAlloc`` whose wrapper line calls, e.g.,
``extern_kernels.convgemm_conv2d(input, weight[, bias], stride=..., ...)``: a plain Python
function that runs the operator's implementation (``functional.conv2d_forward``, ``conv2d_input``, ``conv2d_weight``: the same
plans and kernels). The inputs keep the strides they had when the graph was traced, and the
output's layout is the operator's fake implementation's, which the wrapper's size and stride
assertion checks on every call.

Anything unusual -- symbolic shapes, a CPU tensor, the C++ wrapper (AOTInductor) -- keeps
Inductor's own fallback. The lowerings are registered the first time a fake implementation runs
(tracing is under way by then), not at import: importing Inductor costs about a second.
``CONVGEMM_INDUCTOR_LOWERING=0`` leaves the operators as Inductor's fallbacks.
"""

from __future__ import annotations

import os
import secrets
import warnings

import torch

from ._runtime import REPLAY
from .functional import (
    PLANS_GENERATION,
    Pads4,
    _allow_tf32,
    conv2d_forward,
    conv2d_input,
    conv2d_weight,
    conv_transpose2d_forward,
    dgrad_runner,
    forward_runner,
    wgrad_runner,
)

ENABLED = os.environ.get("CONVGEMM_INDUCTOR_LOWERING", "1") != "0"
#: devices whose calls are lowered (the tests add "cpu", where the kernels run on Triton's interpreter)
DEVICES = ("cuda",)
_registered = [False]


#: call site -> (the conditions its runner was made under, the runner or False); see extern_conv2d.
#: The runners take the tensors, not the arguments, so a site's key is its number alone
_sites: dict[int, tuple] = {}
_MAX_SITES = 4096


def _site_state(input, weight, bias) -> tuple | None:
    """What a site's runner depends on beyond what the compiled code fixes (shapes, strides and
    dtypes), or None when no runner may be used: the device, the tensors' 16-byte alignment, the
    TF32 flag and the plan generation; a tensor off the current device or a side stream (CUDA
    graph capture) takes the full path, as the modules' replays do."""
    dev = input.get_device()
    if dev >= 0 and (dev != torch._C._cuda_getDevice() or torch._C._cuda_getCurrentRawStream(dev)):
        return None
    # the shapes and the first tensor's strides too, though the code fixes them: cheap insurance
    # against two sites ever sharing a number
    return (dev, input.data_ptr() & 15, weight.data_ptr() & 15, None if bias is None else bias.data_ptr() & 15,
            _allow_tf32(), PLANS_GENERATION[0], input.shape, input.stride(), weight.shape)  # fmt: skip


def _at_site(site: int, state: tuple | None, run_args: tuple, full, make):
    """A site's call: its kept runner on ``run_args`` while ``state`` is the one it was made under,
    else ``full()``, after which the runner is made (``make()``) once for the new state. ``state``
    None (no site, replays off, a side stream, another device): always ``full()``."""
    hit = _sites.get(site) if state is not None else None
    if hit is not None and hit[0] == state and hit[1]:
        return hit[1](*run_args)
    out = full()
    if state is not None and (hit is None or hit[0] != state):
        if len(_sites) >= _MAX_SITES:
            _sites.clear()
        _sites[site] = (state, make() or False)
    return out


def extern_conv2d(input, weight, bias=None, *, stride, padding, dilation, groups, algorithm, activation="", site=0):
    """What a compiled graph's wrapper calls for ``torch.ops.convgemm.conv2d`` / ``conv2d_act``:
    their implementation (arguments in the operators' forms), without the dispatcher.

    ``site`` (from the lowering: a random 62-bit number per lowered call) names the call in the
    compiled code, whose tensors' shapes, strides and dtypes are fixed there. From its second call
    on, a site replays the plan its first call used (``functional.forward_runner``: allocate and
    launch) while ``_site_state`` is unchanged, without the plan key and lookup."""
    state = _site_state(input, weight, bias) if site and REPLAY and algorithm == "auto" else None
    args = lambda: (tuple(stride), Pads4(padding), tuple(dilation), groups)  # noqa: E731
    return _at_site(site, state, (input, weight, bias),
                    lambda: conv2d_forward(input, weight, bias, *args(), algorithm, activation),
                    lambda: forward_runner(input, weight, bias, *args(), activation))  # fmt: skip


def extern_conv2d_input(weight, grad_output, *, input_size, stride, padding, dilation, groups, site=0):
    """``torch.ops.convgemm.conv2d_input`` (dgrad) for a compiled backward graph; ``site`` as in
    ``extern_conv2d``, with ``functional.dgrad_runner`` (``run(w, dy)``)."""
    state = _site_state(grad_output, weight, None) if site and REPLAY else None
    args = lambda: (tuple(stride), Pads4(padding), tuple(dilation), groups)  # noqa: E731
    return _at_site(site, state, (weight, grad_output),
                    lambda: conv2d_input(input_size, weight, grad_output, *args()),
                    lambda: dgrad_runner(input_size, weight, grad_output, *args()))  # fmt: skip


def extern_conv2d_weight(input, grad_output, *, weight_size, stride, padding, dilation, groups, site=0):
    """``torch.ops.convgemm.conv2d_weight`` (wgrad) for a compiled backward graph; ``site`` as in
    ``extern_conv2d``, with ``functional.wgrad_runner`` (``run(x, dy)``)."""
    state = _site_state(input, grad_output, None) if site and REPLAY else None
    args = lambda: (tuple(stride), Pads4(padding), tuple(dilation), groups)  # noqa: E731
    return _at_site(site, state, (input, grad_output),
                    lambda: conv2d_weight(input, weight_size, grad_output, *args()),
                    lambda: wgrad_runner(input, weight_size, grad_output, *args()))  # fmt: skip


def extern_conv_transpose2d(input, weight, bias=None, *, output_size, stride, padding, dilation, groups):
    """``torch.ops.convgemm.conv_transpose2d`` for a compiled graph."""
    return conv_transpose2d_forward(input, weight, bias, output_size, stride, padding, dilation, groups)


#: operator name -> the function its lowering calls (under ``extern_kernels.convgemm_<name>``)
EXTERNS = {
    "conv_transpose2d": extern_conv_transpose2d,
    "conv2d": extern_conv2d,
    "conv2d_act": extern_conv2d,
    "conv2d_input": extern_conv2d_input,
    "conv2d_weight": extern_conv2d_weight,
}


def _externs_3d() -> dict:
    """The 3-D operators' functions (``functional3d`` imports ``ops``, which imports this module,
    so they are made when the lowerings are registered)."""
    from .functional3d import Pads6, conv3d_forward, conv3d_input, conv3d_weight

    def extern_conv3d(input, weight, bias=None, *, stride, padding, dilation, groups):
        return conv3d_forward(input, weight, bias, tuple(stride), Pads6(padding), tuple(dilation), groups)

    def extern_conv3d_input(weight, grad_output, *, input_size, stride, padding, dilation, groups):
        return conv3d_input(input_size, weight, grad_output, tuple(stride), Pads6(padding), tuple(dilation), groups)

    def extern_conv3d_weight(input, grad_output, *, weight_size, stride, padding, dilation, groups):
        return conv3d_weight(input, weight_size, grad_output, tuple(stride), Pads6(padding), tuple(dilation), groups)

    return {"conv3d": extern_conv3d, "conv3d_input": extern_conv3d_input, "conv3d_weight": extern_conv3d_weight}


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

    externs = {**EXTERNS, **_externs_3d()}
    # always: a graph from Inductor's on-disk cache, compiled with the lowerings, calls them
    for name, fn in externs.items():
        if not hasattr(extern_kernels, f"convgemm_{name}"):
            setattr(extern_kernels, f"convgemm_{name}", fn)
    if not lower_ops:
        return
    from torch._inductor import ir
    from torch._inductor.lowering import constrain_to_fx_strides, fallback_handler, register_lowering
    from torch._inductor.virtualized import V

    def lowering(op, name: str):
        fallback = fallback_handler(op, add_to_fallback_set=False)
        schema = op._schema.arguments
        is_tensor = [a.type.isSubtypeOf(torch._C.OptionalType(torch._C.TensorType.get())) for a in schema]

        def lower(*args):
            node = V.graph.current_node
            val = node.meta.get("val") if node is not None else None
            consts = {a.name: v for a, v, t in zip(schema, args, is_tensor, strict=True) if not t}
            ints = [e for v in consts.values() if not isinstance(v, str) for e in (v if isinstance(v, list) else [v])]
            static = (
                isinstance(val, torch.Tensor)
                and val.device.type in DEVICES
                and all(type(v) is int for v in (*val.shape, *val.stride(), *ints))
            )
            if not static or V.graph.cpp_wrapper:
                return fallback(*args)
            # the strides each input had when traced: the fake implementation's output layout,
            # which the wrapper asserts, was worked out from them
            args, _ = constrain_to_fx_strides(node, *args)
            # the functions take the tensors positionally; an absent optional one (conv2d's bias)
            # is the last, passed as None by default
            inputs = [v for v, t in zip(args, is_tensor, strict=True) if t and v is not None]
            kwargs = {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in consts.items()}
            if name in ("conv2d", "conv2d_act", "conv2d_input", "conv2d_weight"):
                # one number per lowered call, random so that graphs compiled in other processes
                # (Inductor's on-disk cache) do not share it with this one's. From the OS, not the
                # `random` module, whose state torch.compile saves and restores around tracing:
                # the forward and backward graphs drew the same numbers from it
                kwargs["site"] = secrets.randbits(62) | 1
            layout = ir.FixedLayout(val.device, val.dtype, list(val.shape), list(val.stride()))
            out = ir.ExternKernelAlloc(layout=layout, inputs=inputs, kwargs=kwargs,
                                       python_kernel_name=f"extern_kernels.convgemm_{name}")  # fmt: skip
            return ir.TensorBox.create(out)

        return lower

    for name in externs:
        op = getattr(torch.ops.convgemm, name).default
        register_lowering(op, type_promotion_kind=None)(lowering(op, name))
