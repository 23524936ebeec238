"""convgemm's PyTorch operators: ``torch.ops.convgemm.conv2d`` (and ``conv2d_act``, the same
followed by an activation in the epilogue), its two gradients and ``conv_transpose2d``.

Registered with ``torch.library`` (schemas, CPU and CUDA kernels, fake implementations, autograd)
so that ``torch.compile(fullgraph=True)`` traces models that call convgemm without a graph break
and ``torch.library.opcheck`` passes. ``convgemm.conv2d`` goes through the operator when
``torch.compile``, ``make_fx`` or a tensor subclass is tracing; plain eager autograd runs the same
forward and backward as a plain ``autograd.Function`` (``_Conv2dFunction``), and inference calls
run the kernels directly: the dispatcher's round trips cost more host time than the kernels of
a small layer.

Padding crosses the operator boundary as four explicit ints (top, bottom, left, right): 'same'
may pad one more row at the bottom than at the top, which a pair cannot say.
"""

import torch
from torch import Tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode

from ._inductor import ensure_lowerings
from ._runtime import transforming
from .conv.weight_prep import CastFlip
from .functional import (
    ByForward,
    Pads4,
    _check_activation,
    _grad_problem,
    conv2d_forward,
    conv2d_input,
    conv2d_weight,
    dgrad_runner,
    forward_runner,
    make_problem,
    wgrad_runner,
)
from .problem import _suggest_channels_last, output_memory_format


def _fmt(t: Tensor, w: Tensor) -> torch.memory_format:
    return output_memory_format(t, w)


# The operators are defined with torch.library's lower-level API: their CPU and CUDA
# kernels are registered directly with the dispatcher (behind torch._disable_dynamo, as
# custom_op does), without custom_op's per-call Python wrapper and its aliasing check, which
# cProfile charged 56 us per call on the H200 (an over-estimate under the profiler; the op call
# cost 46 us against 20 us for the direct call, tools/overhead.py). Schemas, tags, fake
# implementations and autograd are what custom_op made.
_LIB = torch.library.Library("convgemm", "FRAGMENT")


def _define(schema: str, impl, fake) -> None:
    name = schema.split("(", 1)[0]
    _LIB.define(schema, tags=(torch.Tag.pt2_compliant_tag,))
    kernel = torch._disable_dynamo(impl)
    for key in ("CPU", "CUDA"):
        _LIB.impl(name, kernel, key)
    torch.library.register_fake(f"convgemm::{name}", fake, lib=_LIB)


def _conv2d(input, weight, bias, stride, padding, dilation, groups, algorithm):
    return conv2d_forward(input, weight, bias, tuple(stride), Pads4(padding), tuple(dilation), groups, algorithm)


def _conv2d_fake(input, weight, bias, stride, padding, dilation, groups, algorithm):
    ensure_lowerings()  # tracing has begun: Inductor may lower this call next
    prob = make_problem(input, weight, bias, tuple(stride), Pads4(padding), tuple(dilation), groups)
    return input.new_empty(prob.output_shape).contiguous(memory_format=_fmt(input, weight))


def _conv2d_input(input_size, weight, grad_output, stride, padding, dilation, groups):
    return conv2d_input(input_size, weight, grad_output, tuple(stride), Pads4(padding), tuple(dilation), groups)


def _conv2d_input_fake(input_size, weight, grad_output, stride, padding, dilation, groups):
    _grad_problem("conv2d_input", input_size, None, weight, grad_output, tuple(stride), Pads4(padding),
                  tuple(dilation), groups)  # fmt: skip
    return grad_output.new_empty(input_size).contiguous(memory_format=_fmt(grad_output, weight))


def _conv2d_weight(input, weight_size, grad_output, stride, padding, dilation, groups):
    return conv2d_weight(input, weight_size, grad_output, tuple(stride), Pads4(padding), tuple(dilation), groups)


def _conv2d_weight_fake(input, weight_size, grad_output, stride, padding, dilation, groups):
    fmt = torch.channels_last if _suggest_channels_last(input) else torch.contiguous_format
    return input.new_empty(weight_size).contiguous(memory_format=fmt)


_define(
    "conv2d(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, "
    "SymInt groups, str algorithm) -> Tensor",
    _conv2d,
    _conv2d_fake,
)
_define(
    "conv2d_input(SymInt[] input_size, Tensor weight, Tensor grad_output, SymInt[] stride, SymInt[] padding, "
    "SymInt[] dilation, SymInt groups) -> Tensor",
    _conv2d_input,
    _conv2d_input_fake,
)
_define(
    "conv2d_weight(Tensor input, SymInt[] weight_size, Tensor grad_output, SymInt[] stride, SymInt[] padding, "
    "SymInt[] dilation, SymInt groups) -> Tensor",
    _conv2d_weight,
    _conv2d_weight_fake,
)


def _conv2d_act(input, weight, bias, stride, padding, dilation, groups, algorithm, activation):
    return conv2d_forward(input, weight, bias, tuple(stride), Pads4(padding), tuple(dilation), groups, algorithm,
                          _check_activation(activation))  # fmt: skip


def _conv2d_act_fake(input, weight, bias, stride, padding, dilation, groups, algorithm, activation):
    _check_activation(activation)
    return _conv2d_fake(input, weight, bias, stride, padding, dilation, groups, algorithm)


# conv2d followed by an activation, as one operator: what ``conv2d(..., activation='relu')``
# traces to under torch.compile, so that the activation stays in the kernel's epilogue there
# too (a separate relu is one more pass over the output, which Inductor cannot fold into an
# operator it does not know)
_define(
    "conv2d_act(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, "
    "SymInt groups, str algorithm, str activation) -> Tensor",
    _conv2d_act,
    _conv2d_act_fake,
)


def _setup_context(ctx, inputs, output):
    input, weight, bias, stride, padding, dilation, groups, _ = inputs
    ctx.save_for_backward(input, weight)
    ctx.conv = (stride, padding, dilation, groups)
    ctx.has_bias = bias is not None


def _plain(*tensors) -> bool:
    """Plain tensors (no fake, functional or other subclass; None allowed), no dispatch mode
    (make_fx, opcheck), no torch.func transform (its wrapped tensors look like plain ones), not
    compiling: the kernels may be called directly, outside the ops."""
    return (
        all(t is None or type(t) in (Tensor, torch.nn.Parameter) for t in tensors)
        and not torch.compiler.is_compiling()
        and _get_current_dispatch_mode() is None
        and not transforming()
    )


def _backward(ctx, grad):
    input, weight = ctx.saved_tensors
    return _conv_grads(ctx, input, weight, grad)


def _setup_act(ctx, inputs, output):
    input, weight, bias, stride, padding, dilation, groups, _, activation = inputs
    ctx.save_for_backward(input, weight, output)
    ctx.conv = (stride, padding, dilation, groups)
    ctx.has_bias = bias is not None


def _backward_act(ctx, grad):
    input, weight, y = ctx.saved_tensors
    # relu's gradient from its result, as torch.relu's own backward: zero where y <= 0 (and NaN)
    grad = torch.ops.aten.threshold_backward(grad, y, 0)
    return (*_conv_grads(ctx, input, weight, grad), None)


def _conv_grads(ctx, input, weight, grad):
    stride, padding, dilation, groups = ctx.conv
    dx = dw = db = None
    # Traced (torch.compile, make_fx), the gradients must be the ops; in plain eager backward they
    # are the same functions called directly, without the dispatcher's round trips
    # (tools/profile_model.py: 87 -> 65 ms per ResNet-50 step). With create_graph (grad mode on
    # in backward) the ops stay: they record their own gradients (double backward)
    through_ops = not _plain(input, weight, grad) or torch.is_grad_enabled()
    if ctx.needs_input_grad[0]:
        if through_ops:
            dx = torch.ops.convgemm.conv2d_input(list(input.shape), weight, grad, stride, padding, dilation, groups)
        else:
            dx = conv2d_input(input.shape, weight, grad, tuple(stride), Pads4(padding), tuple(dilation), groups)
    if ctx.needs_input_grad[1]:
        if through_ops:
            dw = torch.ops.convgemm.conv2d_weight(input, list(weight.shape), grad, stride, padding, dilation, groups)
        else:
            dw = conv2d_weight(input, weight.shape, grad, tuple(stride), Pads4(padding), tuple(dilation), groups)
    if ctx.has_bias and ctx.needs_input_grad[2]:
        db = grad.sum(dim=(0, 2, 3), dtype=torch.promote_types(grad.dtype, torch.float32)).to(grad.dtype)
    return dx, dw, db, None, None, None, None, None


def _first_order_only(name: str, gradient_op: bool) -> None:
    """Refuse a torch.func transform of a convgemm gradient (hessian, grad of grad, forward over
    reverse): inside functorch an operator's autograd kernel cannot record its own gradient. A
    gradient operator under a jvp level is always such a case (conv2d's own jvp uses conv2d)."""
    from torch._C._functorch import TransformType
    from torch._functorch.pyfunctorch import retrieve_all_functorch_interpreters

    keys = [i.key() for i in retrieve_all_functorch_interpreters()]
    levels = [k for k in keys if k in (TransformType.Grad, TransformType.Jvp)]
    if len(levels) > 1 or (gradient_op and TransformType.Jvp in keys):
        raise NotImplementedError(
            f"convgemm::{name}: higher-order torch.func transforms (hessian, grad of grad, jacfwd of jacrev) are not "
            "supported; first-order ones are. For second derivatives use torch.autograd.grad(..., create_graph=True)"
        )


def _autograd_kernel(op, impl, backward, setup_context, tensors: tuple[int, ...], gradient_op: bool = False):
    """Register the Autograd-key kernel of operator ``op`` (``torch.ops.convgemm.<name>``),
    ``impl`` its implementation, ``backward`` / ``setup_context`` its gradient, ``tensors`` the
    positions of its tensor arguments.

    With a gradient to record, an ``autograd.Function`` runs ``impl`` below autograd and
    ``backward`` (what ``torch.library.register_autograd`` builds, minus its per-call wrappers).
    Without one (a compiled graph's calls: AOTAutograd runs its graphs with grad disabled), on
    plain tensors with no dispatch mode, ``impl`` is called here directly: every key between
    autograd and the backend is a fallthrough for a functional op on plain tensors, so this skips
    only the redispatch and the wrappers (this machine's CPU, kernels stubbed out: 13.2-14.1 ->
    7.6-8.6 us per conv2d call, where an operator with a stub kernel costs about 6; the gradient
    operators, which had no autograd kernel before, went from 7.0-7.2 to 9.2-9.3 us;
    ``tools/overhead.py --dispatch``). Fake, functional and other subclass tensors, or a mode
    such as FakeTensorMode, redispatch as usual. Under a torch.func transform an
    ``autograd.Function`` cannot run inside an operator's kernel: the operator runs without
    recording (first-order transforms need no more; higher-order ones are refused)."""
    overload = op.default
    name = overload._opname

    def fwd(*args):
        keyset, args = args[-1], args[:-1]
        with torch._C._AutoDispatchBelowAutograd():
            return overload.redispatch(keyset & torch._C._after_autograd_keyset, *args)

    def setup(ctx, inputs, output):
        setup_context(ctx, inputs[:-1], output)

    def bwd(ctx, *grads):
        return (*backward(ctx, *grads), None)

    grad_fn = type(f"_Op_{name}_Grad", (torch.autograd.Function,),
                   {"forward": staticmethod(fwd), "setup_context": staticmethod(setup), "backward": staticmethod(bwd)})  # fmt: skip

    def kernel(keyset, *args):
        ts = [args[i] for i in tensors]
        if torch._C._are_functorch_transforms_active():
            _first_order_only(name, gradient_op)  # then run without recording, below
        elif torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in ts):
            return grad_fn.apply(*args, keyset)
        elif _plain(*ts):
            return impl(*args)
        with torch._C._AutoDispatchBelowAutograd():
            return overload.redispatch(keyset & torch._C._after_autograd_keyset, *args)

    # behind _disable_dynamo, as the CPU and CUDA kernels: a graph break inside a compiled region
    # must not make dynamo trace convgemm's planning code
    _LIB.impl(name, torch._disable_dynamo(kernel), "Autograd", with_keyset=True)


def gradient_op_autograd(dgrad_op, wgrad_op, forward_op, *extra):
    """The gradients of one dimensionality's two gradient operators (double backward):
    ``(setup_input, backward_input, setup_weight, backward_weight)``.

    dx = dgrad(dy; w) is linear in both: its gradient for dy is the forward conv of the incoming
    gradient, for w the weight gradient with that gradient as the input and dy as the output
    gradient. dw = wgrad(x, dy) is linear in both: its gradient for x is the dgrad of dy through
    the incoming gradient (as a weight), for dy the forward conv of x with it. ``extra``: the
    forward operator's trailing arguments (conv2d's algorithm)."""

    def setup_input(ctx, inputs, output):
        _, weight, grad_output, stride, padding, dilation, groups = inputs
        ctx.save_for_backward(weight, grad_output)
        ctx.conv = (stride, padding, dilation, groups)

    def backward_input(ctx, grad):
        weight, dy = ctx.saved_tensors
        d_w = d_dy = None
        if ctx.needs_input_grad[1]:
            d_w = wgrad_op(grad, list(weight.shape), dy, *ctx.conv)
        if ctx.needs_input_grad[2]:
            d_dy = forward_op(grad, weight, None, *ctx.conv, *extra)
        return None, d_w, d_dy, None, None, None, None

    def setup_weight(ctx, inputs, output):
        input, _, grad_output, stride, padding, dilation, groups = inputs
        ctx.save_for_backward(input, grad_output)
        ctx.conv = (stride, padding, dilation, groups)

    def backward_weight(ctx, grad):
        x, dy = ctx.saved_tensors
        d_x = d_dy = None
        if ctx.needs_input_grad[0]:
            d_x = dgrad_op(list(x.shape), grad, dy, *ctx.conv)
        if ctx.needs_input_grad[2]:
            d_dy = forward_op(x, grad, None, *ctx.conv, *extra)
        return d_x, None, d_dy, None, None, None, None

    return setup_input, backward_input, setup_weight, backward_weight


_setup_input, _backward_input, _setup_weight, _backward_weight = gradient_op_autograd(
    torch.ops.convgemm.conv2d_input, torch.ops.convgemm.conv2d_weight, torch.ops.convgemm.conv2d, "auto"
)
_autograd_kernel(torch.ops.convgemm.conv2d, _conv2d, _backward, _setup_context, (0, 1, 2))
_autograd_kernel(torch.ops.convgemm.conv2d_act, _conv2d_act, _backward_act, _setup_act, (0, 1, 2))
# the gradients' own gradients: double backward (create_graph=True, gradient penalties)
_autograd_kernel(torch.ops.convgemm.conv2d_input, _conv2d_input, _backward_input, _setup_input, (1, 2), True)
_autograd_kernel(torch.ops.convgemm.conv2d_weight, _conv2d_weight, _backward_weight, _setup_weight, (0, 2), True)


def _pair(v) -> list[int]:
    return [v, v] if isinstance(v, int) else [v[0], v[1]]


def normalize(weight, stride, padding, dilation) -> tuple[list[int], list[int], list[int]]:
    """``conv2d``'s argument forms as the operator's (stride, 4-int padding, dilation).

    Plain arithmetic that ``torch.compile`` traces; validation is ``make_problem``'s (eagerly
    before the call, and in the fake implementation while tracing).
    """
    st, dil = _pair(stride), _pair(dilation)
    if isinstance(padding, str):
        if padding == "valid":
            return st, [0, 0, 0, 0], dil
        # 'same' (anything else is refused by make_problem): as PyTorch, the odd pixel at the end
        th, tw = dil[0] * (weight.shape[2] - 1), dil[1] * (weight.shape[3] - 1)
        return st, [th // 2, th - th // 2, tw // 2, tw - tw // 2], dil
    ph, pw = _pair(padding)
    return st, [ph, ph, pw, pw], dil


class _Conv2dFunction(torch.autograd.Function):
    """Eager autograd for ``conv2d``: the op's forward and ``_backward``, without the op.

    The same functions and kernels as ``torch.ops.convgemm.conv2d`` with its registered autograd,
    minus the dispatcher round trips and torch.library's Python wrappers around them (argument
    defaults, aliasing checks, a redispatch below autograd): on the H200 those cost more host
    time per call than planning and launching the kernel (tools/overhead.py, issue 6's ResNet-50
    training step). ``torch.compile``, ``make_fx`` and fake tensors still go through the op.

    The forward takes ``conv2d``'s own argument forms, so it shares inference calls' plans and
    validates (in ``conv2d_forward``) only on a plan miss; the backward gets the op's forms."""

    @staticmethod
    def forward(ctx, input, weight, bias, stride, padding, dilation, groups, algorithm):
        y = conv2d_forward(input, weight, bias, stride, padding, dilation, groups, algorithm)
        st, pads, dil = normalize(weight, stride, padding, dilation)
        _setup_context(ctx, (input, weight, bias, st, pads, dil, groups, algorithm), y)
        return y

    @staticmethod
    def backward(ctx, grad):
        return _backward(ctx, grad)


#: ``autograd.Function.apply`` without its Python wrapper (``TrainReplay._apply``)
_C_APPLY = torch._C._FunctionBase.__dict__["apply"]


class TrainReplay:
    """A training call's plans, replayed (``convgemm.nn.Conv2d`` keeps one per module).

    ``_Conv2dFunction`` pays, per layer and step, the forward's plan key and lookup, then in the
    backward a plan key and lookup for dgrad and for wgrad, each with validation on a miss: on the
    H200's host that was 170 us per forward and 350 us per backward of a ResNet-50 layer
    (``tools/host_split.py --model resnet50 --train``), while its kernels take tens. A module whose
    training calls repeat one key (``nn._train_key``: the tensors' shapes, strides, dtypes and
    alignment, the arguments, the autocast dtype) holds this object instead: the forward is an
    allocation and a launch, and each gradient the same once its first backward has made the plan
    (``functional.dgrad_runner``, ``wgrad_runner``). Anything unusual in a backward -- a
    grad_output of other strides, create_graph, a route with more than one launch -- takes
    ``_backward``, the general path, for that gradient.
    """

    __slots__ = ("forward", "conv", "args", "dgrad", "wgrad", "dy_key", "cast", "cast_input", "prep", "packed",
                 "_apply")  # fmt: skip

    def __init__(self, forward, conv: tuple) -> None:
        self.forward = forward
        #: the dtype the weight and bias are cast to inside the forward (autocast's dtype, for
        #: fp32 parameters), or None; set by the module (``nn._training_forward``)
        self.cast = None
        #: the dtype the input is cast to before the call (autocast, a 32-bit input), or None
        self.cast_input = None
        #: with ``cast`` and a stride-1 dgrad by the forward (``functional.ByForward``): the
        #: ``conv.weight_prep.CastFlip`` that writes the cast weight and its flipped copy in one
        #: launch (made after the first backward that made the dgrad runner); None until then,
        #: False where there is none
        self.prep = None
        #: frozen parameters (no gradient): the module passes its packed copy (``nn._packed``:
        #: cast, channels innermost), which the full path's kernels read
        self.packed = False
        # autograd.Function.apply's C part: its Python wrapper (default-argument binding, the
        # functorch checks, dead-wrapper unwrapping) costs about 5 us a call on the host, and
        # the module only calls this on plain tensors outside any torch.func transform
        # (``nn._train_key``), where the wrapper does nothing
        self._apply = _C_APPLY.__get__(None, _ReplayConv2d)
        #: the operator's argument forms: (stride list, 4-int padding, dilation list, groups)
        self.conv = conv
        st, pads, dil, g = conv
        #: the same as ``conv2d_input`` / ``conv2d_weight`` take them (as ``_backward`` passes them)
        self.args = (tuple(st), Pads4(pads), tuple(dil), g)
        #: gradient runners: None until the first backward, False where that route has none
        self.dgrad = self.wgrad = None
        #: (strides, dtype, alignment) of the grad_output the runners were made for
        self.dy_key = None

    @classmethod
    def build(cls, input, weight, bias, stride, padding, dilation, groups) -> "TrainReplay | None":
        """After a training call ``conv2d(input, weight, bias, ...)`` made its forward plan (the
        tensors as the kernels saw them: autocast applied), or None when it cannot be replayed."""
        fwd = forward_runner(input, weight, bias, stride, padding, dilation, groups)
        if fwd is None:
            return None
        st, pads, dil = normalize(weight, stride, padding, dilation)
        return cls(fwd, (st, pads, dil, groups))

    def __call__(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        """The training call: ``input`` as the kernels read it (autocast applied, see
        ``cast_input``), ``weight`` and ``bias`` the parameters themselves (cast inside when
        ``cast`` is set, so autograd records no cast of its own and the engine casts the
        gradients back to the parameters' dtype)."""
        return self._apply(input, weight, bias, self)

    def backward(self, ctx, dy: Tensor) -> tuple:
        if torch.is_grad_enabled() or type(dy) is not Tensor:  # create_graph, a subclass: the operators
            return self._general(ctx, dy)
        key = (dy.stride(), dy.dtype, dy.data_ptr() & 15)
        if self.dy_key is None:
            self.dy_key = key
        elif key != self.dy_key:
            return self._general(ctx, dy)
        saved = ctx.saved_tensors  # (x, w), or (x, w cast, the parameter[, w flipped]) under autocast
        x, w = saved[0], saved[1]
        args = self.args
        dx = dw = db = None
        needs = ctx.needs_input_grad
        if needs[0]:
            run = self.dgrad
            if run:
                dx = run.fwd(dy, saved[3], None) if len(saved) == 4 else run(w, dy)
            else:
                dx = conv2d_input(x.shape, w, dy, *args)
                if run is None:  # the call above made the plan
                    self.dgrad = run = dgrad_runner(x.shape, w, dy, *args) or False
                    if self.cast is not None and type(run) is ByForward:
                        self.prep = CastFlip.build(saved[2], self.cast, run.flip, run.groups) or False
        if needs[1]:
            run = self.wgrad
            if run:
                dw = run(x, dy)
            else:
                dw = conv2d_weight(x, w.shape, dy, *args)
                if run is None:
                    self.wgrad = wgrad_runner(x, w.shape, dy, *args) or False
        if ctx.has_bias and needs[2]:
            db = dy.sum(dim=(0, 2, 3), dtype=torch.promote_types(dy.dtype, torch.float32)).to(dy.dtype)
        return dx, dw, db

    def _general(self, ctx, dy: Tensor) -> tuple:
        """The gradients by the general path (``_backward``), for a backward the runners do not
        take (create_graph, another grad_output layout)."""
        if self.cast is None:
            return _backward(ctx, dy)[:3]
        x, w, weight = ctx.saved_tensors[:3]
        if torch.is_grad_enabled():
            # create_graph: the forward cast the weight out of the graph; cast it again in the
            # graph, so that the gradients' own gradients reach the parameter
            w = weight.to(self.cast)
        return _conv_grads(ctx, x, w, dy)[:3]


class _ReplayConv2d(torch.autograd.Function):
    """``_Conv2dFunction`` through a ``TrainReplay``: the same kernels, tensors and gradients.

    Under autocast (``plan.cast``) the fp32 weight and bias come in as they are and are cast
    here, where autograd records nothing: one autograd node a layer fewer than autocast's own
    cast (its ``ToCopyBackward`` node in the backward). The gradients come back in the cast
    dtype, and autograd's engine casts them to the parameters' dtype, as ``ToCopyBackward``
    would have: the same values bit for bit."""

    @staticmethod
    def forward(ctx, input, weight, bias, plan):
        cast = plan.cast
        if cast is None:
            y = plan.forward(input, weight, bias)
            ctx.save_for_backward(input, weight)
        else:
            if plan.prep and input.requires_grad:  # the flipped copy for the dgrad, in the same launch
                w, *flipped = plan.prep(weight)
            else:
                w, flipped = weight.to(cast), ()
            y = plan.forward(input, w, None if bias is None else bias.to(cast))
            ctx.save_for_backward(input, w, weight, *flipped)  # the parameter: for create_graph's cast
        ctx.conv = plan.conv
        ctx.has_bias = bias is not None
        ctx.plan = plan
        return y

    @staticmethod
    def backward(ctx, grad):
        return (*ctx.plan.backward(ctx, grad), None)


def func_function(name: str, op, setup_context, backward) -> type:
    """An ``autograd.Function`` that applies the operator ``op`` under torch.func transforms
    (``grad``, ``vmap``, ``jacrev``, ``jvp``, ``functional_call`` ensembles).

    An operator's autograd kernel cannot take part in functorch's grad transform, but an
    ``autograd.Function`` with a separate ``setup_context``, applied at the user's level, can:
    functorch runs ``forward`` (the operator below autograd) a level down and ``backward`` (the
    gradients' operators) as the transform needs. ``vmap`` (``generate_vmap_rule``) batches
    through the operators' batching rules (``conv_vmap_rule`` for conv2d, conv_transpose2d
    and conv3d, and the conv2d and conv3d gradient operators: one launch each). ``jvp`` (forward mode) uses that a
    convolution is linear in its input and in its weight: ``op(dx, w) + op(x, dw) + db``.

    ``op``'s arguments are ``(input, weight, bias, *rest)``; ``setup_context`` and ``backward``
    are the ones its ``register_autograd`` uses. The backward's own operators must not have an
    autograd kernel, or must be applied through such a Function when a transform is active
    (``_backward_transpose``): functorch cannot run an operator's autograd kernel."""

    def forward(input, weight, bias, *rest):
        with torch._C._AutoDispatchBelowAutograd():
            return op(input, weight, bias, *rest)

    def setup(ctx, inputs, output):
        setup_context(ctx, inputs, output)
        ctx.save_for_forward(inputs[0], inputs[1])
        ctx.rest, ctx.out_shape = inputs[3:], output.shape

    def jvp(ctx, d_input, d_weight, d_bias, *_):
        input, weight = ctx.saved_tensors
        out = None
        with torch._C._AutoDispatchBelowAutograd():
            for x, w in ((d_input, weight), (input, d_weight)):
                if x is not None and w is not None:
                    t = op(x, w, None, *ctx.rest)
                    out = t if out is None else out + t
        if d_bias is not None:
            db = d_bias.view(1, -1, *[1] * (len(ctx.out_shape) - 2))
            out = db.expand(ctx.out_shape) if out is None else out + db
        return out

    methods = {"forward": forward, "setup_context": setup, "backward": backward, "jvp": jvp}
    return type(name, (torch.autograd.Function,), {"generate_vmap_rule": True,
                                                   **{k: staticmethod(v) for k, v in methods.items()}})  # fmt: skip


_FuncConv2d = func_function("_FuncConv2d", torch.ops.convgemm.conv2d, _setup_context, _backward)


def conv_vmap_rule(op, groups_at: int, out_size_at: int | None = None):
    """A batching rule (vmap) for a convolution operator ``op(input, weight, bias, *rest)``:
    one launch instead of PyTorch's one per batch entry. ``rest[groups_at]`` is the group count,
    ``rest[out_size_at]`` the output size where the operator takes one (conv_transpose2d).

    A batched input alone folds into the images: ``[B, N, C, ...]`` is ``[B*N, C, ...]``. A
    batched weight or bias (an ensemble, ``functional_call`` with stacked parameters) makes the
    B filter banks one grouped convolution: the images' channels ``[N, B*C, ...]``, the weights
    stacked along their first axis, ``groups * B``, and the output ``[N, B*K, ...]`` read as
    ``[N, B, K, ...]`` (batch dimension 1)."""

    def rule(info, in_dims, input, weight, bias, *rest):
        xd, wd, bd = in_dims[:3]
        nb, rest = info.batch_size, list(rest)
        if wd is None and bd is None:
            x = input.movedim(xd, 0)
            n = x.shape[1]
            if out_size_at is not None:
                rest[out_size_at] = [nb * n, *rest[out_size_at][1:]]
            return op(x.flatten(0, 1), weight, bias, *rest).unflatten(0, (nb, n)), 0
        x = _batch_first(input, xd, nb).transpose(0, 1).flatten(1, 2)
        w = _batch_first(weight, wd, nb)
        b = None if bias is None else _batch_first(bias, bd, nb).flatten()
        rest[groups_at] = rest[groups_at] * nb
        k = w.shape[1]
        if out_size_at is not None:
            size = rest[out_size_at]
            k, rest[out_size_at] = size[1], [size[0], nb * size[1], *size[2:]]
        return op(x, w.flatten(0, 1), b, *rest).unflatten(1, (nb, k)), 1

    return rule


def _batch_first(t, dim, nb):
    """``t`` with its vmap dimension first (expanded to ``nb`` entries when it has none)."""
    return t.movedim(dim, 0) if dim is not None else t.expand(nb, *t.shape)


torch.library.register_vmap("convgemm::conv2d", conv_vmap_rule(torch.ops.convgemm.conv2d, 3), lib=_LIB)
torch.library.register_vmap("convgemm::conv2d_act", conv_vmap_rule(torch.ops.convgemm.conv2d_act, 3), lib=_LIB)


def grad_input_vmap_rule(op):
    """The batching rule of a dgrad operator ``op(input_size, weight, grad_output, stride,
    padding, dilation, groups)`` (conv2d_input, conv3d_input): a batched grad_output alone folds
    into the images; a batched weight makes the B problems one grouped dgrad (``groups * B``,
    channels ``B*C``)."""

    def rule(info, in_dims, input_size, weight, grad_output, stride, padding, dilation, groups):
        _, wd, dd = in_dims[:3]
        nb = info.batch_size
        if wd is None:
            dy = grad_output.movedim(dd, 0)
            n = dy.shape[1]
            dx = op([nb * n, *input_size[1:]], weight, dy.flatten(0, 1), stride, padding, dilation, groups)
            return dx.unflatten(0, (nb, n)), 0
        dy = _batch_first(grad_output, dd, nb).transpose(0, 1).flatten(1, 2)
        n, c = input_size[0], input_size[1]
        w = _batch_first(weight, wd, nb).flatten(0, 1)
        dx = op([n, nb * c, *input_size[2:]], w, dy, stride, padding, dilation, groups * nb)
        return dx.unflatten(1, (nb, c)), 1

    return rule


def grad_weight_vmap_rule(op):
    """The batching rule of a wgrad operator ``op(input, weight_size, grad_output, stride,
    padding, dilation, groups)`` (conv2d_weight, conv3d_weight; per-sample gradients): the B
    problems as one grouped wgrad, the images' channels ``[N, B*C, ...]`` and dy's
    ``[N, B*K, ...]`` with ``groups * B``, giving ``[B*K, C/g, ...]``."""

    def rule(info, in_dims, input, weight_size, grad_output, stride, padding, dilation, groups):
        xd, _, dd = in_dims[:3]
        nb = info.batch_size
        x = _batch_first(input, xd, nb).transpose(0, 1).flatten(1, 2)
        dy = _batch_first(grad_output, dd, nb).transpose(0, 1).flatten(1, 2)
        k = weight_size[0]
        dw = op(x, [nb * k, *weight_size[1:]], dy, stride, padding, dilation, groups * nb)
        return dw.unflatten(0, (nb, k)), 0

    return rule


torch.library.register_vmap("convgemm::conv2d_input", grad_input_vmap_rule(torch.ops.convgemm.conv2d_input), lib=_LIB)
torch.library.register_vmap(
    "convgemm::conv2d_weight", grad_weight_vmap_rule(torch.ops.convgemm.conv2d_weight), lib=_LIB
)


def conv2d_op(input, weight, bias, stride, padding, dilation, groups, algorithm) -> Tensor:
    """``torch.ops.convgemm.conv2d`` with ``conv2d``'s argument forms (validated first); in plain
    eager autograd the same computation through ``_Conv2dFunction``."""
    if _plain(input, weight, bias) and isinstance(input, Tensor) and isinstance(weight, Tensor):
        return _Conv2dFunction.apply(input, weight, bias, stride, padding, dilation, groups, algorithm)
    if not torch.compiler.is_compiling():
        make_problem(input, weight, bias, stride, padding, dilation, groups)
    st, pads, dil = normalize(weight, stride, padding, dilation)
    if transforming():
        return _FuncConv2d.apply(input, weight, bias, st, pads, dil, groups, algorithm)
    return torch.ops.convgemm.conv2d(input, weight, bias, st, pads, dil, groups, algorithm)


def conv2d_act_op(input, weight, bias, stride, padding, dilation, groups, algorithm, activation: str) -> Tensor:
    """``torch.ops.convgemm.conv2d_act`` with ``conv2d``'s argument forms: what a compiled
    ``conv2d(..., activation=...)`` calls, so that the activation stays in the epilogue. Only
    traced calls come here; the fake implementation validates the arguments."""
    st, pads, dil = normalize(weight, stride, padding, dilation)
    return torch.ops.convgemm.conv2d_act(input, weight, bias, st, pads, dil, groups, algorithm, activation)


def _conv_transpose2d(input, weight, bias, output_size, stride, padding, dilation, groups):
    from .functional import conv_transpose2d_forward

    return conv_transpose2d_forward(input, weight, bias, output_size, stride, padding, dilation, groups)


def _conv_transpose2d_fake(input, weight, bias, output_size, stride, padding, dilation, groups):
    ensure_lowerings()
    return input.new_empty(output_size).contiguous(memory_format=_fmt(input, weight))


_define(
    "conv_transpose2d(Tensor input, Tensor weight, Tensor? bias, SymInt[] output_size, SymInt[] stride, "
    "SymInt[] padding, SymInt[] dilation, SymInt groups) -> Tensor",
    _conv_transpose2d,
    _conv_transpose2d_fake,
)


def _setup_transpose(ctx, inputs, output):
    input, weight, bias, _, stride, padding, dilation, groups = inputs
    ctx.save_for_backward(input, weight)
    ctx.conv = (stride, [padding[0], padding[0], padding[1], padding[1]], dilation, groups)
    ctx.has_bias = bias is not None


def _backward_transpose(ctx, grad):
    # y = dgrad(x; w), so dL/dx = conv2d(dL/dy, w) and dL/dw = wgrad(input = dL/dy, grad_output = x)
    input, weight = ctx.saved_tensors
    stride, pads, dilation, groups = ctx.conv
    dx = dw = db = None
    if ctx.needs_input_grad[0]:
        # under a torch.func transform the conv2d operator's autograd kernel cannot run: its
        # transform-aware Function instead (func_function)
        fn = _FuncConv2d.apply if transforming() else torch.ops.convgemm.conv2d
        dx = fn(grad, weight, None, stride, pads, dilation, groups, "auto")
    if ctx.needs_input_grad[1]:
        dw = torch.ops.convgemm.conv2d_weight(grad, list(weight.shape), input, stride, pads, dilation, groups)
    if ctx.has_bias and ctx.needs_input_grad[2]:
        db = grad.sum(dim=(0, 2, 3), dtype=torch.promote_types(grad.dtype, torch.float32)).to(grad.dtype)
    return dx, dw, db, None, None, None, None, None


torch.library.register_autograd(
    "convgemm::conv_transpose2d", _backward_transpose, setup_context=_setup_transpose, lib=_LIB
)
torch.library.register_vmap(
    "convgemm::conv_transpose2d", conv_vmap_rule(torch.ops.convgemm.conv_transpose2d, 4, out_size_at=0), lib=_LIB
)
_FuncConvTranspose2d = func_function(
    "_FuncConvTranspose2d", torch.ops.convgemm.conv_transpose2d, _setup_transpose, _backward_transpose
)
