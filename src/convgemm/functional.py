"""The functional API: ``torch.nn.functional`` semantics on convgemm's kernels."""

from __future__ import annotations

import threading
import weakref
from dataclasses import replace

import torch

from ._runtime import POISON, check_device, dense_bias, empty, has_tma, interpreting, may_cache, transforming
from .conv.fprop import ALGORITHMS, nchw_tma_disabled
from .conv.layout import as_nhwc, broadcasts, tma_aligned, to_format
from .matmul.blocks import ACTIVATIONS
from .matmul.launch import Launch
from .problem import ConvProblem, IntOrPair, Padding, _suggest_channels_last, output_memory_format
from .tune import choose
from .tune.autotune import autotune_enabled

NCHW_TMA = ALGORITHMS["implicit_gemm_tma_nchw"]
#: the algorithms that take an NCHW input as it is (``Algorithm.reads_nchw``)
_NCHW_ALGOS = tuple(a for a in ALGORITHMS.values() if a.reads_nchw)
_NCHW_NAMES = ("auto", *(a.name for a in _NCHW_ALGOS))

# Plans: everything decided about a call that depends only on its signature (shapes, strides,
# dtypes, devices, pointer alignment -- Triton specialises kernels on it --, arguments, TF32
# flag): the validated problem, the chosen
# algorithm and config, and a launch handle that skips Triton's dispatch on repeat calls. A
# repeat call then costs a dictionary lookup, an output allocation and one kernel launch.
_plans: dict[tuple, tuple] = {}
_plans_lock = threading.Lock()
_MAX_PLANS = 4096


#: bumped by ``clear_plans``: a module's replay closure (``convgemm.nn``) made before is not used
PLANS_GENERATION = [0]


def clear_plans() -> None:
    """Forget every plan (they are rebuilt, and re-tuned if need be, on the next call)."""
    with _plans_lock:
        _plans.clear()
        _derived.clear()
        PLANS_GENERATION[0] += 1


def forward_replay(input, weight, bias, stride, padding, dilation, groups, activation: str = ""):
    """After an inference call ``conv2d_forward(input, weight, bias, ...)`` (algorithm ``auto``)
    made or used a plan: a function ``replay(x) -> y`` that repeats exactly the plan-hit path on
    a new input ``x`` of the same shape, strides, dtype, alignment and device (the caller
    guarantees that, and that the weight and bias are unchanged), or None when that path does
    more than allocate the output and launch (an NCHW input or output, no plan).

    ``convgemm.nn.Conv2d`` keeps one per module: its repeat calls then skip argument checks,
    the plan key and the plan lookup, which on a slow host were most of a small layer's time."""
    run = forward_runner(input, weight, bias, stride, padding, dilation, groups, activation)
    if run is None:
        return None

    def replay(x: torch.Tensor) -> torch.Tensor:
        return run(x, weight, bias)

    return replay


def forward_runner(input, weight, bias, stride, padding, dilation, groups, activation: str = ""):
    """``forward_replay`` with the weight and bias as arguments: ``run(x, w, b) -> y`` repeats the
    plan a ``conv2d_forward`` call with exactly these arguments made, for tensors of the same
    shapes, strides, dtypes, alignment and device (the caller guarantees it), or None. Training
    calls (``ops.TrainReplay``) use it: their weight is a new tensor every step."""
    sig = _forward_sig(input, weight, bias, stride, padding, dilation, groups, "auto", activation)
    plan = _plans.get(sig) if sig is not None else None
    return None if plan is None else _plan_runner(input, plan, activation)


def _plan_runner(input, plan: tuple, activation: str):
    """A forward plan's hit path as ``run(x, w, b) -> y`` (channels_last output), or None when it
    does more than allocate the output and launch (an NCHW input or output, no launch handle)."""
    prob, algo, cfg, launch = plan
    if launch is None or not prob.channels_last_out or _writes_nchw(prob, algo):
        return None
    if not algo.reads_nchw and as_nhwc(input) is not input:
        return None
    alloc = _allocator(prob.output_shape, input.dtype, input.device, torch.channels_last)
    relu = bool(activation) and not algo.fuses_activation
    algo_run = algo.run

    def run(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        y = alloc()
        algo_run(prob, x, w, b, y, cfg, launch)
        if relu:
            y.relu_()
        return y

    return run


def _allocator(shape, dtype: torch.dtype, device, memory_format):
    """``lambda: empty(shape, dtype, device, memory_format)`` with the strides worked out once:
    ``torch.empty`` with a memory format costs host microseconds more than ``empty_strided``."""
    strides = torch.empty(shape, device="meta", memory_format=memory_format).stride()
    shape = tuple(shape)

    def alloc() -> torch.Tensor:
        t = torch.empty_strided(shape, strides, dtype=dtype, device=device)
        if POISON:
            t.fill_(float("nan"))
        return t

    return alloc


def dgrad_runner(input_size, weight, grad_output, stride, padding, dilation, groups):
    """After a ``conv2d_input`` call with exactly these arguments (no ``memory_format``) made its
    plan: ``run(w, dy) -> dx`` repeating it for a weight and dy of the same shapes, strides, dtypes,
    alignment and device, or None where the route does more than a weight flip, an allocation
    and one launch (sub-pixel and per-phase dgrad, NCHW results)."""
    from .conv.backward import DGRAD, DGRAD_TMA, dgrad_tma_memo

    sig = _dgrad_sig(input_size, weight, grad_output, stride, padding, dilation, groups, None)
    hit = _plans.get(sig) if sig is not None else None
    if hit is None:
        return None
    prob, memory_format, launch, route = hit
    if memory_format != torch.channels_last or min(prob.n, prob.c, prob.h, prob.w, prob.k, prob.p, prob.q) == 0:
        return None
    if route == "dgrad_as_forward":
        cl = output_memory_format(grad_output, weight) == torch.channels_last
        g = prob.groups
        flip = _flipper(weight, g, cl)
        wt = flip(weight.detach())
        er, es = prob.dilation[0] * (prob.r - 1), prob.dilation[1] * (prob.s - 1)
        pads = Pads4((er - prob.pad_h[0], er - prob.pad_h[1], es - prob.pad_w[0], es - prob.pad_w[1]))
        fwd = forward_runner(grad_output, wt, None, (1, 1), pads, prob.dilation, g)
        if fwd is None:
            return None
        return ByForward(fwd, flip, g)
    if route == "dgrad_by_phases":
        return _phases_runner(prob, weight, grad_output)
    if route not in ("dgrad_tma", "dgrad") or launch is None:
        return None
    shape, dtype, device = (prob.n, prob.c, prob.h, prob.w), grad_output.dtype, grad_output.device
    if route == "dgrad_tma":
        if as_nhwc(grad_output) is not grad_output:
            return None
        # the plan's first call tuned it (its launch holds that kernel): read back from the memo
        algo, cfg = DGRAD_TMA, dgrad_tma_memo(prob)
        if cfg is None:
            return None
    else:
        algo, cfg = DGRAD, DGRAD.default_config(prob)
    algo_run, alloc = algo.run, _allocator(shape, dtype, device, torch.channels_last)

    def direct(w: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
        dx = alloc()
        algo_run(prob, dy, w, dx, cfg, launch)
        return dx

    return direct


def _phases_runner(prob: ConvProblem, weight, grad_output):
    """``dgrad_runner`` for the per-phase route: dx allocated (and cleared where a phase gets no
    tap), each phase's weight made and its forward plan launched into dx's phase view, as
    ``_dgrad_by_phases`` does after its plans exist; None when a phase's plan is missing or does
    more than one launch."""
    sh, sw = prob.stride
    shape, dtype, device = (prob.n, prob.c, prob.h, prob.w), grad_output.dtype, grad_output.device
    dy = as_nhwc(grad_output)
    if dy is not grad_output:
        return None
    zero, parts = _dgrad_phases(prob, True)
    dx = torch.empty(shape, dtype=dtype, device=device, memory_format=torch.channels_last)  # its geometry only
    runs = []
    for fh, fw, rows, cols, pads, dil, _, make in parts:
        x, wt, out = dy[:, :, rows, cols], make(weight.detach()), dx[:, :, fh::sh, fw::sw]
        sig = _forward_sig(x, wt, None, (1, 1), pads, dil, prob.groups, "auto", "", out)
        plan = _plans.get(sig) if sig is not None else None
        if plan is None or plan[3] is None or not (plan[1].reads_nchw or as_nhwc(x) is x):
            return None
        runs.append((fh, fw, rows, cols, make, plan))

    alloc = _allocator(shape, dtype, device, torch.channels_last)

    def by_phases(w: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
        dx = alloc()
        if zero:
            dx.zero_()
        for fh, fw, rows, cols, make, (p, algo, cfg, launch) in runs:
            algo.run(p, dy[:, :, rows, cols], make(w), None, dx[:, :, fh::sh, fw::sw], cfg, launch)
        return dx

    return by_phases


class ByForward:
    """``dgrad_runner``'s stride-1 route: ``run(w, dy) -> dx`` is the forward plan ``fwd`` on
    ``dy`` and the flipped weight ``flip(w)``. A caller that already holds the flipped weight
    (the training replay under autocast: ``conv.weight_prep.CastFlip``) calls
    ``fwd(dy, wt, None)`` itself."""

    __slots__ = ("fwd", "flip", "groups")

    def __init__(self, fwd, flip, groups: int) -> None:
        self.fwd, self.flip, self.groups = fwd, flip, groups

    def __call__(self, w: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
        return self.fwd(dy, self.flip(w), None)


def wgrad_runner(input, weight_size, grad_output, stride, padding, dilation, groups):
    """After a ``conv2d_weight`` call with exactly these arguments (no ``memory_format``) made its
    plan: ``run(x, dy) -> dw`` repeating it for tensors of the same shapes, strides, dtypes,
    alignment and device, or None (no plan: empty problems)."""
    sig = _wgrad_signature(input, weight_size, grad_output, stride, padding, dilation, groups, None)
    plan = _plans.get(sig) if sig is not None else None
    if plan is None:
        return None
    prob, algo, cfg, launch, nhwc, memory_format, wsize = plan
    if nhwc and (as_nhwc(input) is not input or as_nhwc(grad_output) is not grad_output):
        return None
    alloc = _allocator(wsize, input.dtype, input.device, memory_format)
    if algo is None:  # the first-layer unfold: its steps without the plan key and lookup

        def by_unfold(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
            dw = alloc()
            dw.copy_(_wgrad_by_unfold(prob, x, dy, launch))
            return dw

        return by_unfold
    algo_run = algo.run

    def run(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
        dw = alloc()
        algo_run(prob, x, dy, dw, cfg, launch)
        return dw

    return run


_allow_tf32 = torch._C._get_cudnn_allow_tf32


def _plain(v):
    """``v`` as a plan-key component if it is a plain int, str, or sequence of plain ints; else raise.

    Plain types only: ``2.0 == 2`` and ``True == 1`` hash alike, and a plan made for a valid call
    must never let a float or bool argument skip the validation that would refuse it.
    """
    t = type(v)
    if t is int or t is str:
        return v
    # pairs first, without a generator: every call of a plan builds five of these keys
    if t is tuple or t is list or t is torch.Size:
        if len(v) == 2 and type(v[0]) is int and type(v[1]) is int:
            return (t is list, v[0], v[1])
        if all(type(e) is int for e in v):
            return (t is list, *v)
    elif t is Pads4:
        a, b, c, d = v  # Pads4 always holds four
        if type(a) is int and type(b) is int and type(c) is int and type(d) is int:
            return ("pads4", a, b, c, d)
    raise TypeError


def _signature(input, weight, bias, stride, padding, dilation, groups, algorithm) -> tuple | None:
    """The plan key of a call, or None when a plan must not be used (interpreter, unusual arguments)."""
    if not isinstance(input, torch.Tensor) or input.device.type != "cuda":
        return None
    return _plan_key(input, weight, bias, stride, padding, dilation, groups, algorithm)


def _plan_key(input, weight, bias, stride, padding, dilation, groups, algorithm) -> tuple | None:
    """``_signature`` on any device (the tests give CPU tensors plans with it)."""
    if not isinstance(input, torch.Tensor) or not isinstance(weight, torch.Tensor):
        return None
    if bias is not None and not isinstance(bias, torch.Tensor):
        return None
    if bias is not None and dense_bias(bias) is not bias:
        return None  # a strided bias: no plan, so no replay reads it in place (conv2d_forward copies it)
    b = None if bias is None else (bias.shape, bias.stride(), bias.dtype, bias.device, bias.data_ptr() % 16)
    try:
        return (
            input.shape, input.stride(), input.dtype, input.device, input.data_ptr() % 16,
            weight.shape, weight.stride(), weight.dtype, weight.device, weight.data_ptr() % 16,
            b, _plain(stride), _plain(padding), _plain(dilation), _plain(groups), _plain(algorithm),
            _allow_tf32(),  # torch.backends.cudnn.allow_tf32 without its Python property (0.25 us)
        )  # fmt: skip
    except TypeError:
        return None


def _forward_sig(
    input, weight, bias, stride, padding, dilation, groups, algorithm, activation: str, out=None
) -> tuple | None:
    """The plan key of a ``conv2d_forward`` call: the replays (``forward_runner``,
    ``_phases_runner``) look up the plan a call made with exactly this key."""
    sig = _signature(input, weight, bias, stride, padding, dilation, groups, algorithm)
    if sig is not None and activation:
        sig = (*sig, activation)
    if sig is not None and out is not None:
        # the TMA algorithms' descriptors, and whether they store in place, follow out's geometry
        sig = (*sig, "out", out.shape, out.stride(), out.data_ptr() % 16)
    return sig


def _dgrad_sig(input_size, weight, grad_output, stride, padding, dilation, groups, memory_format) -> tuple | None:
    """The plan key of a ``conv2d_input`` call, shared with ``dgrad_runner``'s lookup."""
    sig = _signature(grad_output, weight, None, stride, padding, dilation, groups, "dgrad")
    if sig is None:
        return None
    try:
        return (*sig, tuple(int(v) for v in input_size), memory_format)
    except (TypeError, ValueError):
        return None


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
    activation: str | None = None,
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
        activation: None, or ``'relu'``: ``relu(conv2d(...))``, applied in the kernel's epilogue
            after the bias (one pass over the output saved) by the GEMM algorithms when no
            gradient is needed, and under ``torch.compile`` (``torch.ops.convgemm.conv2d_act``,
            differentiable); otherwise (eager autograd, torch.func transforms, algorithms
            without the epilogue) as ``torch.relu`` on the result. NaN stays NaN, as in
            ``torch.relu``.

    Returns:
        ``[N, K, P, Q]`` (``[K, P, Q]`` for unbatched input) in the input's dtype, channels_last
        when the input or the weight is channels_last (cuDNN's rule), NCHW otherwise.

    Accumulation is fp32 for fp16/bf16/fp32 (fp64 for fp64). fp32 inputs use TF32 tensor cores
    exactly when ``torch.backends.cudnn.allow_tf32`` is True; otherwise 3xTF32 on tensor cores
    by default (fp32-accurate: on the H200 as close to float64 as cuDNN's fp32 or closer), or
    fp32 FMAs (``CONVGEMM_FP32_PRECISION=ieee``, docs/environment.md).
    Raises ``TypeError``/``ValueError`` for invalid arguments before any kernel runs.
    """
    act = _check_activation(activation)
    unbatched = isinstance(input, torch.Tensor) and input.dim() == 3
    if unbatched:
        input = input.unsqueeze(0)
    input, weight, bias = _autocast(input, weight, bias)
    if _needs_op(input, weight, bias):
        from .ops import conv2d_act_op, conv2d_op

        if act and torch.compiler.is_compiling() and not transforming():
            # compiled: one operator, so the activation stays in the epilogue (its gradient too)
            y = conv2d_act_op(input, weight, bias, stride, padding, dilation, groups, algorithm, act)
        else:
            y = conv2d_op(input, weight, bias, stride, padding, dilation, groups, algorithm)
            if act == "relu":
                y = torch.relu(y)  # eager autograd and torch.func see an ordinary relu
    else:
        y = conv2d_forward(input, weight, bias, stride, padding, dilation, groups, algorithm, act)
    return y.squeeze(0) if unbatched else y


def _check_activation(activation) -> str:
    if activation is None:
        return ""
    if not isinstance(activation, str) or activation not in ACTIVATIONS:
        raise ValueError(
            f"conv2d: activation must be None or one of {ACTIVATIONS}, got {activation!r}; "
            "apply any other activation to the result"
        )
    return activation


def _autocast(input, weight, bias):
    """Under ``torch.autocast``, convolutions run in the autocast dtype, as ``F.conv2d`` does."""
    if not isinstance(input, torch.Tensor):
        return input, weight, bias
    dev = input.device.type
    if not torch.is_autocast_enabled(dev):
        return input, weight, bias
    dt = torch.get_autocast_dtype(dev)

    def cast(t):
        return t.to(dt) if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64 else t

    return cast(input), cast(weight), cast(bias)


def _needs_op(input, weight, bias) -> bool:
    """Whether a call needs autograd or tracing: a gradient is needed, or ``torch.compile`` is
    tracing. Such calls go through the operator (``ops.conv2d_op``; in plain eager autograd, the
    same functions as an ``autograd.Function``). Inference calls skip the dispatcher (its cost is
    a good part of a small layer's time) and run the same kernels directly."""
    if torch.compiler.is_compiling() or transforming():
        return True  # a torch.func transform or forward-mode AD: through the operators only
    if not torch.is_grad_enabled():
        return False
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in (input, weight, bias))


def conv2d_forward(
    input, weight, bias, stride, padding, dilation, groups, algorithm="auto", activation: str = "", out=None
) -> torch.Tensor:
    """The forward computation for a 4-D input (plans, tuning, kernels); no autograd.
    ``activation``: ``""`` or a checked name (``_check_activation``). ``out`` (internal): a
    tensor of the output's shape and dtype, any strides (e.g. one stride phase of a larger
    tensor), written in place and returned."""
    bias = dense_bias(bias)
    sig = _forward_sig(input, weight, bias, stride, padding, dilation, groups, algorithm, activation, out)
    plan = _plans.get(sig) if sig is not None else None
    if plan is not None:
        prob, algo, cfg, launch = plan
        nchw_y = _writes_nchw(prob, algo)
        if out is not None:
            y = out
        else:
            y = empty(prob.output_shape, input.dtype, input.device,
                      torch.contiguous_format if nchw_y else torch.channels_last)  # fmt: skip
        with _device_of(input):
            algo.run(prob, input if algo.reads_nchw else as_nhwc(input), weight, bias, y, cfg, launch)
            if activation and not algo.fuses_activation:
                y.relu_()
            # the hot path: no layout test where y is already in the result's format
            if out is not None or prob.channels_last_out != nchw_y:
                return y
            return to_format(y, _result_format(prob))

    prob, x, y = _prepare(input, weight, bias, stride, padding, dilation, groups, algorithm, nchw=out is None)
    if out is not None:
        assert tuple(out.shape) == tuple(prob.output_shape) and out.dtype == y.dtype, "out: the output's shape, dtype"
        if not out.is_contiguous(memory_format=torch.channels_last):
            prob = replace(prob, output_strided=True)
        if x is None:
            out.copy_(y)  # no kernel: the bias, zeros, or nothing
        y = out
    if activation:
        prob = replace(prob, activation=activation)
    if x is None and activation:  # no kernel ran: y is zeros or the bias
        y.relu_()
    if x is not None:
        with _device_of(input):
            algo, cfg = choose(prob, x, weight, bias, y, algorithm)
            if out is None and _writes_nchw(prob, algo):
                # the plan's launch is specialised on y's strides: repeat calls allocate the same
                y = empty(prob.output_shape, input.dtype, input.device, torch.contiguous_format)
            launch = Launch()
            algo.run(prob, x, weight, bias, y, cfg, launch)
            if activation and not algo.fuses_activation:
                y.relu_()
        if sig is not None:
            with _plans_lock:
                if len(_plans) >= _MAX_PLANS:
                    _plans.clear()
                _plans[sig] = (prob, algo, cfg, launch)
    if out is not None:
        return y
    with _device_of(input):
        return to_format(y, _result_format(prob))


def _result_format(prob: ConvProblem) -> torch.memory_format:
    # PyTorch's rule (``output_memory_format``), whatever the kernel wrote: a forced NCHW reader
    # writes NCHW even where the weight asks for a channels_last result, and the fake kernels of
    # ``convgemm/ops.py`` promise Inductor the rule's strides
    return torch.channels_last if prob.channels_last_out else torch.contiguous_format


def _writes_nchw(prob: ConvProblem, algo) -> bool:
    """Whether ``algo`` writes an NCHW ``y``: where the result is NCHW, the algorithms with pointer
    stores write it in place (the others write NHWC, then transposed: the TMA algorithms store
    channels_last tiles); an NCHW input kept as it is (``prob.input_nchw``, only NCHW readers
    take it) is always written NCHW, and transposed after when a channels_last weight asks for a
    channels_last result (``implicit_gemm_tma_nchw`` and ``head_1x1_nchw`` store NCHW only). The
    first call and the plan's replays allocate ``y`` by this, so a launch handle specialised on
    its strides meets the same strides again."""
    return algo.writes_nchw and (prob.input_nchw or not prob.channels_last_out)


class _NoGuard:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_NO_GUARD = _NoGuard()


def _device_of(t: torch.Tensor):
    """Make the tensor's GPU current (Triton launches on the current device), if it is not already."""
    dev = t.get_device()  # -1 off the GPU; cheaper than t.device and torch.cuda.current_device()
    if dev >= 0 and dev != torch._C._cuda_getDevice():
        return torch.cuda.device(dev)
    return _NO_GUARD


class Pads4(tuple):
    """Explicit (top, bottom, left, right) padding: how the custom ops (``convgemm/ops.py``) pass
    padding, 'same' included, resolved once. Not accepted from users: ``F.conv2d`` has no such form."""


def make_problem(input, weight, bias, stride, padding, dilation, groups) -> ConvProblem:
    """``ConvProblem.from_tensors``, also taking a ``Pads4``."""
    if isinstance(padding, Pads4):
        pt, pb, pl, pr = padding
        if min(padding) < 0:
            raise ValueError(f"conv2d: padding must be >= 0, got {tuple(padding)}")
        prob = ConvProblem.from_tensors(input, weight, bias, stride, (max(pt, pb), max(pl, pr)), dilation, groups)
        return replace(prob, pad_h=(pt, pb), pad_w=(pl, pr))
    return ConvProblem.from_tensors(input, weight, bias, stride, padding, dilation, groups)


def _prepare(input, weight, bias, stride, padding, dilation, groups, algorithm="auto", nchw: bool = True):
    """Validate, allocate the output, and present the input as NHWC, or as it is when it is NCHW
    and an algorithm that reads NCHW (``Algorithm.reads_nchw``) takes it (``algorithm`` auto or
    one of those, ``nchw`` true: the caller has no ``out`` of its own); then y is NCHW too, and
    the problem's ``input_tma_ok`` / ``input_dense`` say whether a TMA descriptor can view the
    NCHW input / whether its planes are dense.

    Returns ``(problem, x, y)``; ``x`` is None when no kernel is needed (empty output, or an empty
    reduction whose result, the bias, is already in ``y``).
    """
    prob = make_problem(input, weight, bias, stride, padding, dilation, groups)
    check_device(input, "conv2d")
    # kernels always write NHWC (coalesced rows of channels); an NCHW result is one tiled
    # transpose of it, made by the caller (conv2d_forward)
    y = empty(prob.output_shape, input.dtype, input.device, torch.channels_last)
    if y.numel() == 0:
        return prob, None, y
    if prob.cg == 0:  # an empty reduction: the output is the bias
        y.copy_(bias.view(1, -1, 1, 1).expand_as(y) if bias is not None else torch.zeros_like(y))
        return prob, None, y
    # an NCHW input may be kept as it is for the algorithms that read NCHW; each says from the
    # problem's facts whether it can read this one (input_tma_ok: the TMA view; input_dense: dense
    # planes; depthwise_nchw reads any strides)
    if nchw and algorithm in _NCHW_NAMES and _is_nchw(input):
        p2 = replace(prob, tma_ok=has_tma(input), input_nchw=True,
                     input_tma_ok=_nchw_view_ok(input, NCHW_TMA.planes(prob) is not prob),
                     input_dense=_nchw_planes_dense(input))  # fmt: skip
        # forced, it is taken whenever the input is NCHW, so that choose() gives its reason;
        # auto keeps it only where the result is NCHW too (a channels_last weight asks for a
        # channels_last result, which the NHWC kernels write without a transpose after) and some
        # reader wants it; untuned, only a reader the heuristic may pick
        if algorithm != "auto" or (
            not prob.channels_last_out
            and not nchw_tma_disabled()
            and any(
                a.supports(p2) is None and a.keeps_nchw(p2) and (autotune_enabled() or a.heuristic_ok(p2))
                for a in _NCHW_ALGOS
            )
        ):
            return p2, input, empty(prob.output_shape, input.dtype, input.device, torch.contiguous_format)
    x = as_nhwc(input)
    prob = replace(prob, tma_ok=has_tma(x), input_tma_ok=tma_aligned(x, prob.cg), input_dense=_dense_rows(x),
                   input_phases_ok=_phases_view_ok(x, prob.stride),
                   input_tma_rows_ok=tma_aligned(x, 16 // x.element_size()))  # fmt: skip
    return prob, x, y


def _is_nchw(x: torch.Tensor) -> bool:
    """Whether ``x`` is NCHW in the sense the NCHW readers take: more than one channel, channels
    not contiguous, the pixels of a row contiguous."""
    return x.shape[1] > 1 and x.stride(1) != 1 and x.stride(3) == 1


def _nchw_planes_dense(x: torch.Tensor) -> bool:
    """Whether ``x`` is NCHW (C > 1, channels not contiguous) with dense planes: each plane's
    H*W pixels back to back (``gemm_1x1_nchw`` reads pixel i of a plane at offset i), any batch
    and channel strides but broadcast ones."""
    return _is_nchw(x) and (x.stride(2) == x.shape[3] or x.shape[2] == 1) and not broadcasts(x, (0, 1))


def _nchw_view_ok(x: torch.Tensor, planes: bool = False) -> bool:
    """Whether ``x`` is NCHW (C > 1, pixels of a row contiguous, channels not) and a TMA
    descriptor ``[N, C, H, W]`` can read it with its own strides: a 16-byte aligned base and
    16-byte multiples for the N, C and H strides. Dense tensors and channel slices of them.
    With ``planes`` (a 1x1 stride-1 layer, read as ``[N, C, 1, H*W]``: ``ImplicitGemmTmaNchw.planes``)
    the rows must instead be back to back and the H stride is not used."""
    e = x.element_size()
    return (
        _is_nchw(x)
        and x.data_ptr() % 16 == 0
        and (x.stride(2) == x.shape[3] or x.shape[2] == 1 if planes else (x.stride(2) * e) % 16 == 0)
        and all((x.stride(i) * e) % 16 == 0 for i in (0, 1))
        and not broadcasts(x, (0, 1, 2))
    )


def _phases_view_ok(x: torch.Tensor, stride: tuple[int, int]) -> bool:
    """Whether NHWC ``x`` reads as ``[N, H/sh, sh, W/sw, sw*C]`` (``conv.fprop.input_descriptor``
    reads a strided convolution's taps through it): a stride above 1, pixels of C channels back
    to back and rows evenly strided. When H or W is not a multiple of the stride, the view keeps
    ``H - H % sh`` rows (``W - W % sw`` columns) and the outputs that read the rest are
    recomputed by a gather pass (``conv.fprop.phase_tails``)."""
    sh, sw = stride
    n, c, h, w = x.shape
    return (sh > 1 or sw > 1) and x.stride(3) == c and _dense_rows(x)


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
    # the algorithm goes in: a forced NCHW reader keeps an NCHW input that auto would transpose
    prob, x, y = _prepare(input, weight, bias, stride, padding, dilation, groups, algorithm)
    if x is None:
        return {"algorithm": None, "config": None, "problem": prob}
    algo, cfg = choose(prob, x, weight, bias, y, algorithm)
    return {"algorithm": algo.name, "config": cfg.describe(), "problem": prob}


def _grad_problem(op, input_size, input_like, weight_like, grad_output, stride, padding, dilation, groups):
    """Validate a backward call: the forward problem it differentiates, and grad_output's shape."""
    if not isinstance(grad_output, torch.Tensor):
        raise TypeError(f"{op}: grad_output must be a torch.Tensor, got {type(grad_output).__name__}")
    try:
        size = tuple(int(v) for v in input_size)
    except TypeError:
        raise TypeError(f"{op}: the input/weight size must be a sequence of ints, got {input_size!r}") from None
    if input_like is None and not isinstance(weight_like, torch.Tensor):
        raise TypeError(f"{op}: weight must be a torch.Tensor, got {type(weight_like).__name__}")
    # a stand-in with the input's shape, the weight's dtype and device, and no memory
    x = input_like if input_like is not None else weight_like.new_empty(()).expand(size)
    prob = make_problem(x, weight_like, None, stride, padding, dilation, groups)
    want = (prob.n, prob.k, prob.p, prob.q)
    if tuple(grad_output.shape) != want:
        raise ValueError(
            f"{op}: grad_output must have the forward output's shape {list(want)} for input {list(x.shape)} and "
            f"weight {list(weight_like.shape)}, got {list(grad_output.shape)}"
        )
    if grad_output.dtype != x.dtype or grad_output.device != x.device:
        raise TypeError(
            f"{op}: grad_output is {grad_output.dtype} on {grad_output.device} but the convolution is "
            f"{x.dtype} on {x.device}; convert it with grad_output.to(...)"
        )
    check_device(grad_output, op)
    return prob


def conv2d_input(
    input_size: tuple[int, int, int, int] | torch.Size,
    weight: torch.Tensor,
    grad_output: torch.Tensor,
    stride: IntOrPair = 1,
    padding: Padding = 0,
    dilation: IntOrPair = 1,
    groups: int = 1,
    *,
    memory_format: torch.memory_format | None = None,
) -> torch.Tensor:
    """The input gradient of ``conv2d`` (dgrad), with ``torch.nn.grad.conv2d_input``'s semantics.

    Args:
        input_size: the forward input's shape ``[N, C, H, W]``.
        weight: ``[K, C/groups, R, S]``; grad_output: ``[N, K, P, Q]``, same dtype and device.
        stride, padding, dilation, groups: the forward call's.
        memory_format: of the result; default channels_last when grad_output or the weight is
            channels_last, else contiguous.

    Returns ``[N, C, H, W]`` in grad_output's dtype (fp32 accumulation; fp64 for fp64). Strided
    convolutions are computed per stride phase, so no work is spent on the zeros a transposed
    convolution would insert.
    """
    from .conv.backward import DGRAD, DGRAD_TMA, tuned_dgrad_tma

    # a repeat call (same shapes, strides, dtypes and arguments) skips validation, as conv2d does
    sig = _dgrad_sig(input_size, weight, grad_output, stride, padding, dilation, groups, memory_format)
    hit = _plans.get(sig) if sig is not None else None
    if hit is not None:
        prob, memory_format, launch, route = hit
    else:
        prob = _grad_problem("conv2d_input", input_size, None, weight, grad_output, stride, padding, dilation, groups)
        if memory_format is None:
            memory_format = output_memory_format(grad_output, weight)
        launch = None
        route = dgrad_route(prob, grad_output)  # decided once per plan

    def keep(launch=None):
        if sig is not None and hit is None:
            with _plans_lock:
                if len(_plans) >= _MAX_PLANS:
                    _plans.clear()
                _plans[sig] = (prob, memory_format, launch, route)

    if route == "dgrad_as_forward" and prob.k > 0 and prob.c > 0 and prob.n > 0:
        keep()
        dx = _dgrad_by_forward(prob, weight, grad_output)
        return to_format(dx, memory_format)
    if route == "dgrad_by_subpixel" and min(prob.k, prob.c, prob.n, prob.p, prob.q) > 0:
        keep()
        return _dgrad_by_subpixel(prob, weight, grad_output, memory_format)
    dx = empty((prob.n, prob.c, prob.h, prob.w), grad_output.dtype, grad_output.device, memory_format)
    if dx.numel() == 0:
        return dx
    if prob.k == 0 or prob.p * prob.q == 0:
        return dx.zero_()
    if route == "dgrad_tma":
        if hit is None and sig is not None:
            launch = Launch()
            keep(launch)
        out = dx if dx.is_contiguous(memory_format=torch.channels_last) else empty(dx.shape, dx.dtype, dx.device,
                                                                                   torch.channels_last)  # fmt: skip
        with _device_of(grad_output):
            dyn = as_nhwc(grad_output)
            DGRAD_TMA.run(prob, dyn, weight, out, tuned_dgrad_tma(prob, dyn, weight, out), launch)
        if out is not dx:
            dx.copy_(out)
        return dx
    if route == "dgrad_by_phases":
        keep()
        _dgrad_by_phases(prob, weight, grad_output, dx)
        return dx
    if hit is None and sig is not None:
        launch = Launch()  # the gather kernel's launch site: repeat calls skip Triton's dispatch
        keep(launch)
    with _device_of(grad_output):
        DGRAD.run(prob, grad_output, weight, dx, DGRAD.default_config(prob), launch)
    return dx


def dgrad_route(prob: ConvProblem, dy: torch.Tensor) -> str:
    """How ``conv2d_input`` computes ``prob``'s dgrad: ``"dgrad_as_forward"`` (stride 1: a forward
    convolution of dy), ``"dgrad_by_subpixel"`` (strided first layers), ``"dgrad_tma"`` (strided,
    one TMA launch over every stride phase, ``DgradTma``), ``"dgrad_by_phases"`` (a forward
    convolution per stride phase) or ``"dgrad"`` (the per-phase gather kernel)."""
    from .conv.backward import DGRAD_TMA
    from .conv.fprop import strided_tma_enabled

    if dgrad_as_forward(prob):
        return "dgrad_as_forward"
    if _subpixel_pays(prob):
        return "dgrad_by_subpixel"
    if strided_tma_enabled() and DGRAD_TMA.supports(prob, as_nhwc(dy)) is None:
        return "dgrad_tma"
    if _phases_pay(prob, dy):
        return "dgrad_by_phases"
    return "dgrad"


#: the most phase-stacked channels (stride_h * stride_w * C) for which ``_dgrad_by_subpixel`` is
#: taken, and the most input channels (first layers: the only ones timed, session 13)
SUBPIXEL_MAX_CHANNELS = 64
SUBPIXEL_MAX_C = 4


def _subpixel_pays(prob: ConvProblem) -> bool:
    """Whether strided dgrad runs as one sub-pixel forward convolution (``_dgrad_by_subpixel``):
    first layers (C <= 4: the per-phase kernels' GEMM has C columns, 3 of a tile's 16-32 for
    RGB), dilation 1, groups 1, a filter wider than the stride along some axis (else each phase
    has one tap and ``_phases_pay`` applies). On the H200 (session 13, bf16): ResNet's 7x7
    stride-2 stem 262.8 us against cuDNN's 813, MobileNet's 3x3 stride-2 stem 2.22x, AlexNet's
    11x11 stride-4 stem 6.58x. Wider layers (up to the 64 phase-stacked channels the rule would
    allow) were not timed against the per-phase TMA kernel, so they keep it."""
    sh, sw = prob.stride
    return (
        (sh > 1 or sw > 1)
        and prob.groups == 1
        and prob.dilation == (1, 1)
        and prob.c <= SUBPIXEL_MAX_C
        and sh * sw * prob.c <= SUBPIXEL_MAX_CHANNELS
        and (prob.r > sh or prob.s > sw)
    )


def subpixel_axis(k: int, stride: int, pad: int, size: int, out: int) -> tuple:
    """One axis of the sub-pixel dgrad: every phase's taps placed in one window of dy offsets.

    Input position ``h = f + stride * i`` receives tap ``r`` from dy row ``i + o`` when
    ``o = (f + pad - r) / stride`` is an integer (dilation 1). Over all phases the offsets span
    ``[o_min, o_max]``: window position ``u`` is offset ``o_min + u``, and ``taps[f][u]`` is the
    filter tap there (or None). The convolution computes ``length = ceil(size / stride)`` outputs
    per phase (phase 0's count; shorter phases are cropped) from dy rows ``[start, stop)``
    padded by ``lo`` and ``hi``. Returns ``(taps, start, stop, lo, hi, length)``, or None when no
    output reads any dy row (dx is zero).
    """
    offs = {f: {(f + pad - r) // stride: r for r in range(k) if (f + pad - r) % stride == 0} for f in range(stride)}
    every = [o for d in offs.values() for o in d]
    if not every:
        return None
    o_min, o_max = min(every), max(every)
    taps = [[offs[f].get(o_min + u) for u in range(o_max - o_min + 1)] for f in range(stride)]
    length = -(-size // stride)
    win = _window(o_min, o_max - o_min, length, out)
    return None if win is None else (taps, *win, length)


def _subpixel_taps(w: torch.Tensor, dim: int, stride: int, pad: int, o_min: int, window: int) -> torch.Tensor:
    """Filter axis ``dim`` of w rearranged as ``[..., window, stride, ...]``: position (u, g) holds
    the tap of phase ``f = stride - 1 - g`` at window position u, ``r = f + pad - stride * (o_min
    + u)``, or zero. Flipped, that tap index is ``base - f + stride * u`` (``base = R - 1 - pad +
    stride * o_min``), i.e. ``b0 + g + stride * u`` after padding: one slice of the zero-padded
    flipped axis, reshaped. Views, a pad and a flip: no index tensor (a host-to-device copy,
    which a CUDA graph cannot capture)."""
    r = w.shape[dim]
    base = r - 1 - pad + stride * o_min
    left = max(0, stride - 1 - base)
    b0 = base - stride + 1 + left
    right = max(0, b0 + stride * window - left - r)
    pads = [0, 0] * (w.dim() - 1 - dim) + [left, right]
    a = torch.nn.functional.pad(w.flip(dim), pads).narrow(dim, b0, stride * window)
    return a.unflatten(dim, (window, stride))


def _subpixel_weight(w: torch.Tensor, ax_h: tuple, ax_w: tuple, kk: int, channels_last: bool) -> torch.Tensor:
    """w [K, C, R, S] -> [kk, K, U, V]: output channel ``(fh * sw + fw) * C + c`` holds phase
    (fh, fw)'s taps of input channel c at their window positions (zeros elsewhere, and in the
    channels past sh * sw * C that pad kk to a 16-byte multiple). ``ax_*``: (stride, pad, o_min,
    window) per axis."""
    k, c = w.shape[:2]
    (sh, _, _, u), (sw, _, _, v) = ax_h, ax_w
    t = _subpixel_taps(_subpixel_taps(w, 3, *ax_w), 2, *ax_h)  # [K, C, U, gh, V, gw]
    out = t.permute(3, 5, 1, 0, 2, 4).flip(0, 1).reshape(sh * sw * c, k, u, v)
    if kk > sh * sw * c:
        out = torch.cat([out, out.new_zeros(kk - sh * sw * c, k, u, v)])
    return out.contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)


def _dgrad_by_subpixel(prob: ConvProblem, weight: torch.Tensor, dy: torch.Tensor, memory_format) -> torch.Tensor:
    """Strided dgrad with few input channels as one stride-1 forward convolution of dy whose
    ``sh * sw * C`` output channels are dx's stride phases (a sub-pixel convolution), then a
    depth-to-space copy into dx.

    The per-phase dgrad kernels compute a GEMM with C columns: for an RGB stem (C = 3) a
    tensor-core tile of 16-32 columns is mostly padding, and cuDNN is slow there too (the H200:
    824 us for ResNet-50's 7x7 stride-2 stem at batch 64). Stacking the phases gives 12 columns
    (stride 2), padded to 16, and K * ceil(R / sh) * ceil(S / sw) reductions over dy, which every
    forward algorithm (tuned) computes."""
    sh, sw = prob.stride
    ra = subpixel_axis(prob.r, sh, prob.pad_h[0], prob.h, prob.p)
    ca = subpixel_axis(prob.s, sw, prob.pad_w[0], prob.w, prob.q)
    dx = empty((prob.n, prob.c, prob.h, prob.w), dy.dtype, dy.device, memory_format)
    if ra is None or ca is None:
        return dx.zero_()
    rows, start_h, stop_h, lo_h, hi_h, len_h = ra
    cols, start_w, stop_w, lo_w, hi_w, len_w = ca
    phased = sh * sw * prob.c
    align = 16 // dy.element_size()
    kk = -(-phased // align) * align
    cl = output_memory_format(dy, weight) == torch.channels_last
    ax_h = (sh, prob.pad_h[0], start_h - lo_h, len(rows[0]))
    ax_w = (sw, prob.pad_w[0], start_w - lo_w, len(cols[0]))
    wt = _derived_weight(weight, ("subpixel", ax_h, ax_w, kk, cl), lambda w: _subpixel_weight(w, ax_h, ax_w, kk, cl))
    y = conv2d_forward(dy[:, :, start_h:stop_h, start_w:stop_w], wt, None, (1, 1), Pads4((lo_h, hi_h, lo_w, hi_w)),
                       (1, 1), 1)  # fmt: skip
    # y [N, (fh, fw, c), i, j] -> dx [N, c, fh + sh * i, fw + sw * j]: one strided copy (no
    # temporary) when the phases tile dx exactly, else one per phase, each cropped to its length
    with _device_of(dy):
        if prob.h == len_h * sh and prob.w == len_w * sw:
            dst = dx.unflatten(3, (len_w, sw)).unflatten(2, (len_h, sh))
            dst.copy_(y[:, :phased].unflatten(1, (sh, sw, prob.c)).permute(0, 3, 4, 1, 5, 2))
        else:
            for fh in range(sh):
                for fw in range(sw):
                    part = dx[:, :, fh::sh, fw::sw]
                    c0 = (fh * sw + fw) * prob.c
                    part.copy_(y[:, c0 : c0 + prob.c, : part.shape[2], : part.shape[3]])
    return dx


def _phases_pay(prob: ConvProblem, dy: torch.Tensor) -> bool:
    """Whether strided dgrad runs as per-phase forward convolutions (``_dgrad_by_phases``) rather
    than the one-launch per-phase gather kernel: where the forward kernels have TMA (Hopper, the
    interpreter), the layer is big enough for a few launches to pay, and not float64. Symmetric
    padding only (the phases are computed from the leading padding).

    Only filters no larger than the stride (each phase then has at most one tap per axis): timed
    on the H200 (tools/ab_kernels.py, bf16, batch 64), a 1x1 stride-2 256->512 layer at 56x56 took
    100 us by phases against 458 us on the gather kernel, but a 3x3 stride-2 128->128 layer took
    411 us by phases (four small convolutions and their copies) against 152 us. Since session 6
    the phases are written in place (no temporaries, no copies): not yet re-timed, so the rule
    stands until ``tools/ab_kernels.py`` says otherwise."""
    return (
        prob.stride != (1, 1)
        and prob.r <= prob.stride[0]
        and prob.s <= prob.stride[1]
        and has_tma(dy)
        and prob.dtype != torch.float64
        and prob.pad_h[0] == prob.pad_h[1]
        and prob.pad_w[0] == prob.pad_w[1]
        and (interpreting() or prob.n * prob.h * prob.w * prob.c >= 1 << 20)
    )


def dgrad_as_forward(prob: ConvProblem) -> bool:
    """Whether dgrad runs as a forward convolution (stride 1, padding within the dilated kernel).

    With stride 1, dx is the forward convolution of dy with the weight flipped in R and S and its
    two channel axes swapped (per group), padded by ``dil * (R - 1) - pad`` on each side: then
    every forward algorithm, TMA and tuning included, serves dgrad too. Strided layers use the
    per-phase dgrad kernel (``conv/backward.py``).
    """
    er, es = prob.dilation[0] * (prob.r - 1), prob.dilation[1] * (prob.s - 1)
    return prob.stride == (1, 1) and max(prob.pad_h) <= er and max(prob.pad_w) <= es


_derived: dict[tuple, tuple] = {}
_MAX_DERIVED = 64


def _derived_weight(weight: torch.Tensor, tag: tuple, make) -> torch.Tensor:
    """``make(weight.detach())``, kept per weight tensor, version counter and ``tag``: a backward
    pass reuses the forward's weight object, and any in-place update (an optimizer step) bumps the
    version. Like autograd's own saved-tensor check, a write through ``.data`` is not seen; float64
    is never cached, because it is the checking dtype and ``gradcheck`` perturbs its inputs through
    ``.data`` (a cached flip made ``gradgradcheck``'s finite differences of dgrad zero on the GPU)."""
    cacheable = (
        weight.device.type == "cuda"
        and weight.dtype != torch.float64
        and not torch.compiler.is_compiling()
        and may_cache(weight.device)
    )
    if cacheable:
        key = (id(weight), weight.data_ptr(), weight._version, weight.shape, weight.stride(), weight.dtype,
               weight.device, tag)  # fmt: skip
        hit = _derived.get(key)
        if hit is not None and hit[0]() is weight:
            return hit[1]
    out = make(weight.detach())
    if cacheable:
        with _plans_lock:
            if len(_derived) >= _MAX_DERIVED:
                _derived.clear()
            _derived[key] = (weakref.ref(weight), out)
    return out


def _swap_channels(w: torch.Tensor, groups: int) -> torch.Tensor:
    """[K, C/g, *taps] -> [C, K/g, *taps]: per group, the two channel axes swapped (any rank)."""
    k, cg, *taps = w.shape
    kg = k // groups
    return w.reshape(groups, kg, cg, *taps).transpose(1, 2).reshape(groups * cg, kg, *taps)


_reversed: dict[tuple, torch.Tensor] = {}


def _flip_swap(w: torch.Tensor, groups: int, channels_last: bool) -> torch.Tensor:
    """w [K, C/g, R, S] -> [C, K/g, R, S]: taps flipped and the channel axes swapped per group,
    channels_last or contiguous, in one gather kernel.

    Flipping R and S together reverses the flattened tap index (``R*S - 1 - (r*S + s)`` is tap
    ``(R-1-r, S-1-s)``), so one ``index_select`` over a view with the taps flattened writes the
    result in its final layout: ``flip`` (always a copy in PyTorch) and then ``contiguous`` were two
    kernels per dgrad call, and in training the weight changes every step, so nothing is cached."""
    k, cg, r, s = w.shape
    kg = k // groups
    key = (r * s, w.device)
    idx = _reversed.get(key)
    if idx is None:
        idx = torch.arange(r * s - 1, -1, -1, device=w.device)
        if may_cache(w.device):
            _reversed[key] = idx
    v = w.reshape(groups, kg, cg, r, s)
    if channels_last:  # [g, cg, RS, kg] contiguous is [C, R, S, K/g], i.e. [C, K/g, R, S] channels_last
        out = v.permute(0, 2, 3, 4, 1).reshape(groups, cg, r * s, kg).index_select(2, idx)
        return out.view(groups * cg, r, s, kg).permute(0, 3, 1, 2)
    out = v.permute(0, 2, 1, 3, 4).reshape(groups, cg, kg, r * s).index_select(3, idx)
    return out.view(groups * cg, kg, r, s)


def _flipper(w: torch.Tensor, groups: int, channels_last: bool):
    """``_flip_swap`` for weights with ``w``'s shape and strides, as three calls (a strided view,
    the gather, the result's view) instead of six: the training replay flips the weight on every
    backward, and each torch call costs host microseconds. Falls back to ``_flip_swap`` where
    the R and S axes do not merge into one strided axis."""
    k, cg, r, s = w.shape
    sk, sc, sr, ss = w.stride()
    kg, rs = k // groups, r * s
    if sr != s * ss and r > 1:
        return lambda v: _flip_swap(v, groups, channels_last)
    idx = torch.arange(rs - 1, -1, -1, device=w.device)
    c = groups * cg
    if channels_last:  # [g, cg, RS, kg] gathered on RS: [C][R][S][K/g] in memory
        src = ((groups, cg, rs, kg), (kg * sk, sc, ss, sk))
        dim, dst = 2, ((c, kg, r, s), (rs * kg, 1, s * kg, kg))
    else:  # [g, cg, kg, RS] gathered on RS: [C][K/g][R][S]
        src = ((groups, cg, kg, rs), (kg * sk, sc, sk, ss))
        dim, dst = 3, ((c, kg, r, s), (kg * rs, rs, s, 1))

    def flip(v: torch.Tensor) -> torch.Tensor:
        return v.as_strided(*src, v.storage_offset()).index_select(dim, idx).as_strided(*dst)

    return flip


def _flipped_weight(prob: ConvProblem, weight: torch.Tensor, channels_last: bool) -> torch.Tensor:
    """w [K, C/g, R, S] -> w' [C, K/g, R, S]: channel axes swapped per group, taps flipped (cached)."""
    return _derived_weight(weight, ("flip", prob.groups, channels_last),
                           lambda w: _flip_swap(w, prob.groups, channels_last))  # fmt: skip


def _dgrad_by_forward(prob: ConvProblem, weight: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    cl = output_memory_format(dy, weight) == torch.channels_last
    wt = _flipped_weight(prob, weight, cl)
    er, es = prob.dilation[0] * (prob.r - 1), prob.dilation[1] * (prob.s - 1)
    pads = Pads4((er - prob.pad_h[0], er - prob.pad_h[1], es - prob.pad_w[0], es - prob.pad_w[1]))
    return conv2d_forward(dy, wt, None, (1, 1), pads, prob.dilation, prob.groups)


def _window(o0: int, span: int, length: int, avail: int) -> tuple[int, int, int, int] | None:
    """The rows a stride-1 convolution along one axis reads, for exactly ``length`` outputs
    when its first tap is at row offset ``o0`` and its taps span ``span`` rows past that:
    ``(start, stop, lo, hi)``, rows ``[start, stop)`` of the ``avail`` there are, padded by ``lo``
    before and ``hi`` after; None when every output reads padding only."""
    start, lo = max(0, o0), max(0, -o0)
    # output i reads rows start - lo + i + j (j <= span): the last output's last row is need - 1
    need = start - lo + length + span
    stop = min(avail, need)
    if stop <= start:
        return None
    return start, stop, lo, need - stop


def phase_convs(k: int, stride: int, pad: int, dil: int, size: int, out: int) -> list:
    """One spatial axis of a strided dgrad, split by phase into stride-1 convolutions of dy.

    Input position ``h = f + stride * i`` (phase ``f``) receives filter tap ``r`` from dy position
    ``i + o`` exactly when ``o = (f + pad - r * dil) / stride`` is an integer. A phase's taps have
    offsets in steps of ``d = dil / gcd(dil, stride)``, so it is the stride-1 convolution
    ``dx_f[i] = sum_j dy[i + o_0 + j * d] * w[r_j]`` (taps ordered by ascending offset): dilation
    ``d``, ``max(0, -o_0)`` leading padding, dy rows ``[start, stop)`` and enough trailing padding
    for exactly ``ceil((size - f) / stride)`` outputs, so that the result has the phase's shape
    and can be written in place. Returns per phase ``None`` (no tap reaches it: zeros) or
    ``(taps, start, stop, pad_lo, pad_hi, d, length)``.
    """
    res = []
    for f in range(stride):
        length = (size - f + stride - 1) // stride
        taps = sorted(((f + pad - r * dil) // stride, r) for r in range(k) if (f + pad - r * dil) % stride == 0)
        if length <= 0 or not taps:
            res.append(None)
            continue
        o0 = taps[0][0]
        d = taps[1][0] - o0 if len(taps) > 1 else 1
        win = _window(o0, d * (len(taps) - 1), length, out)
        # None: every tap of every output falls outside dy (zeros)
        res.append(None if win is None else ([r for _, r in taps], *win, d, length))
    return res


def _dgrad_phases(prob: ConvProblem, channels_last: bool) -> tuple[bool, list]:
    """Strided dgrad's stride-1 parts (``phase_convs`` on both axes): ``(zero, parts)``, ``zero``
    when some phase receives no tap (dx must be cleared), and per phase with taps
    ``(fh, fw, rows, cols, pads, dilation, tag, make)``: dy's slice ``dy[:, :, rows, cols]``
    convolved (stride 1, ``Pads4`` ``pads``) with ``make(w)``, the phase's taps with the channel
    axes swapped (``tag`` names it for ``_derived_weight``), is dx's phase ``dx[:, :, fh::sh,
    fw::sw]``. Shared by ``_dgrad_by_phases`` and ``dgrad_runner``."""
    sh, sw = prob.stride
    rows = phase_convs(prob.r, sh, prob.pad_h[0], prob.dilation[0], prob.h, prob.p)
    cols = phase_convs(prob.s, sw, prob.pad_w[0], prob.dilation[1], prob.w, prob.q)
    zero = any(a is None for a in rows) or any(b is None for b in cols)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    parts = []
    for fh, a in enumerate(rows):
        for fw, b in enumerate(cols):
            if a is None or b is None:
                continue
            taps_r, start_h, stop_h, lo_h, hi_h, d_h, _ = a
            taps_s, start_w, stop_w, lo_w, hi_w, d_w, _ = b

            def make(w, taps_r=taps_r, taps_s=taps_s):
                # views (narrow, and cat only for several taps), not index_select: an index tensor
                # would be a host-to-device copy; the one copy is the final contiguous()
                def take(t, dim, taps):
                    parts = [t.narrow(dim, i, 1) for i in taps]
                    return parts[0] if len(parts) == 1 else torch.cat(parts, dim)

                sub = take(take(w, 2, taps_r), 3, taps_s)
                return _swap_channels(sub, prob.groups).contiguous(memory_format=fmt)

            tag = ("phase", prob.groups, tuple(taps_r), tuple(taps_s), channels_last)
            parts.append((fh, fw, slice(start_h, stop_h), slice(start_w, stop_w), Pads4((lo_h, hi_h, lo_w, hi_w)),
                          (d_h, d_w), tag, make))  # fmt: skip
    return zero, parts


def _dgrad_by_phases(prob: ConvProblem, weight: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor) -> None:
    """Strided dgrad as ``stride_h * stride_w`` stride-1 forward convolutions of dy (TMA kernels
    and tuning included), each written into its phase of dx (``_dgrad_phases``)."""
    sh, sw = prob.stride
    zero, parts = _dgrad_phases(prob, dx.is_contiguous(memory_format=torch.channels_last))
    if zero:
        # phases no tap reaches are zero. One memset of all of dx, though the taps' phases are
        # then written twice: clearing only the untouched phases through strided views was
        # slower on the H200 (session 14: ResNet's 1x1 downsample dgrad 67.7 -> 90.6 us)
        dx.zero_()
    dy = as_nhwc(dy)  # once, not once per phase
    for fh, fw, rows, cols, pads, dil, tag, make in parts:
        wt = _derived_weight(weight, tag, make)
        # written straight into dx's phase (a strided view; TMA stores take it as it is)
        conv2d_forward(dy[:, :, rows, cols], wt, None, (1, 1), pads, dil, prob.groups, out=dx[:, :, fh::sh, fw::sw])


def conv2d_weight(
    input: torch.Tensor,
    weight_size: tuple[int, int, int, int] | torch.Size,
    grad_output: torch.Tensor,
    stride: IntOrPair = 1,
    padding: Padding = 0,
    dilation: IntOrPair = 1,
    groups: int = 1,
    *,
    memory_format: torch.memory_format | None = None,
) -> torch.Tensor:
    """The weight gradient of ``conv2d`` (wgrad), with ``torch.nn.grad.conv2d_weight``'s semantics.

    Args:
        input: the forward input ``[N, C, H, W]``, any strides.
        weight_size: the weight's shape ``[K, C/groups, R, S]``.
        grad_output: ``[N, K, P, Q]``, same dtype and device.
        memory_format: of the result; default channels_last when the input is channels_last.

    Returns ``[K, C/groups, R, S]`` in the input's dtype. The reduction over N*P*Q is split over
    programs and summed in a fixed order: the result is bitwise reproducible.
    """
    from .conv.backward import wgrad

    # a repeat call (same shapes, strides, dtypes and arguments) skips validation and Triton's
    # dispatch, as conv2d does: on the H200 those cost more than many wgrad kernels take
    sig = _wgrad_signature(input, weight_size, grad_output, stride, padding, dilation, groups, memory_format)
    plan = _plans.get(sig) if sig is not None else None
    if plan is not None:
        prob, algo, cfg, launch, nhwc, memory_format, wsize = plan
        dw = empty(wsize, input.dtype, input.device, memory_format)
        with _device_of(input):
            if algo is None:  # the first-layer unfold; launch: the unfold kernel's
                dw.copy_(_wgrad_by_unfold(prob, input, grad_output, launch))
                return dw
            x, dy = (as_nhwc(input), as_nhwc(grad_output)) if nhwc else (input, grad_output)
            algo.run(prob, x, dy, dw, cfg, launch)
        return dw
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"conv2d_weight: input must be a torch.Tensor, got {type(input).__name__}")
    try:
        wsize = tuple(int(v) for v in weight_size)
    except TypeError:
        raise TypeError(f"conv2d_weight: weight_size must be a sequence of ints, got {weight_size!r}") from None
    w_like = input.new_empty(()).expand(wsize)
    prob = _grad_problem("conv2d_weight", input.shape, input, w_like, grad_output, stride, padding, dilation, groups)
    if memory_format is None:
        memory_format = torch.channels_last if _suggest_channels_last(input) else torch.contiguous_format
    dw = empty(wsize, input.dtype, input.device, memory_format)
    if dw.numel() == 0:
        return dw
    if prob.n * prob.p * prob.q == 0:
        return dw.zero_()
    launch = Launch() if sig is not None else None
    if _unfold_wgrad_pays(prob):
        with _device_of(input):
            dw.copy_(_wgrad_by_unfold(prob, input, grad_output, launch))
        algo = cfg = None  # the plan says "unfold"; its launch is the unfold kernel's
        nhwc = False
    else:
        with _device_of(input):
            algo, cfg, nhwc = wgrad(prob, input, grad_output, dw, launch)
    if sig is not None:
        with _plans_lock:
            if len(_plans) >= _MAX_PLANS:
                _plans.clear()
            _plans[sig] = (prob, algo, cfg, launch, nhwc, memory_format, wsize)
    return dw


#: the widest input channel count for which ``_wgrad_by_unfold`` is taken
UNFOLD_WGRAD_MAX_CHANNELS = 4


def _unfold_wgrad_pays(prob: ConvProblem) -> bool:
    """Whether wgrad runs on the width-unfolded input (``_wgrad_by_unfold``): first layers (C up
    to 4 channels, groups 1, a filter wider than one column, S*C within the unfold's 64), 16-bit;
    a row stride with vertical dilation 1 (the row phases' taps are then consecutive).

    Timed on the H200 (session 13, bf16): CRAFT's 3x3 stride-1 conv1_1 at 768x768 took 96 us
    this way against 254 us on the gather kernel. ResNet's 7x7 stride-2 stem took 488 us
    against 350 when the unfolded problem kept its row stride (32 channels: the strided TMA
    wgrad takes multiples of 64, so the gather kernel ran it); strided layers now run one
    stride-1 wgrad per row phase instead (``wgrad_row_phases``): the stem took 267.5 us (cuDNN
    300), MobileNet's 3x3 stride-2 stem 213.5 us (cuDNN 148, against 438 unfolded with the
    stride)."""
    from .conv.unfold import MAX_UNFOLDED

    return (
        prob.groups == 1
        and prob.c <= UNFOLD_WGRAD_MAX_CHANNELS
        and prob.s > 1
        and prob.s * prob.c <= MAX_UNFOLDED
        and prob.dtype in (torch.float16, torch.bfloat16)
        and (prob.stride[0] == 1 or prob.dilation[0] == 1)
    )


def wgrad_row_phases(r: int, stride: int, pad: int, dil: int, size: int, out: int) -> list:
    """A strided convolution's rows as ``stride`` stride-1 ones, for its weight gradient.

    Output row p's tap t reads input row ``p * stride + t * dil - pad = (p + a) * stride + f``:
    row ``p + a`` of row phase f (``x[f::stride]``). Per phase f: its taps (ascending, offsets
    ``a`` consecutive for dilation 1 when the stride divides nothing else), the phase rows
    ``[start, stop)`` read and the padding ``(lo, hi)`` that makes a stride-1 R_f-tap
    convolution of them give exactly ``out`` rows. Returns per phase None (no tap) or
    ``(taps, start, stop, lo, hi)``.
    """
    res = []
    for f in range(stride):
        taps = [t for t in range(r) if (t * dil - pad) % stride == f]
        rows = len(range(f, size, stride))
        if not taps:
            res.append(None)
            continue
        offs = [(t * dil - pad - f) // stride for t in taps]
        assert offs == list(range(offs[0], offs[0] + len(taps))), "consecutive offsets (dilation 1)"
        win = _window(offs[0], len(taps) - 1, out, rows)
        # None: every tap of every output reads padding (a zero gradient)
        res.append(None if win is None else (taps, *win))
    return res


def _wgrad_by_unfold(prob: ConvProblem, x: torch.Tensor, dy: torch.Tensor, launch=None) -> torch.Tensor:
    """wgrad of a first layer through the width unfold of the forward (``conv.unfold``).

    Each output column's S taps are gathered into one pixel of ``Cu`` = S*C channels (rounded
    up to 16), and the weight gradient of the R x 1 convolution over that (the rows' stride and
    padding) is the layer's, reordered: channel ``s*C + c`` of tap r is ``dw[:, c, r, s]``.
    A row stride is split into row phases (``wgrad_row_phases``), each a stride-1 wgrad over a
    strided view of the unfolded input, which the TMA wgrad takes. The gather wgrad's GEMM
    over an RGB input has 3 channels per tap (6-byte rows, a fraction of each tile); the
    unfolded one has 16-64 per filter row, on the tuned wgrad kernels (TMA included). ``launch``:
    the unfold kernel's, kept by ``conv2d_weight``'s plan."""
    from .conv.unfold import unfold_w

    sh = prob.stride[0]
    xu = unfold_w(x, prob.s, prob.stride[1], prob.pad_w[0], prob.dilation[1], prob.q, prob.h, launch)
    cu = xu.shape[1]
    if sh == 1:
        pads = Pads4((prob.pad_h[0], prob.pad_h[1], 0, 0))
        dwu = conv2d_weight(xu, (prob.k, cu, prob.r, 1), dy, 1, pads, (prob.dilation[0], 1))
    else:
        dwu = torch.zeros(prob.k, cu, prob.r, 1, dtype=dy.dtype, device=dy.device)
        for f, ph in enumerate(wgrad_row_phases(prob.r, sh, prob.pad_h[0], prob.dilation[0], prob.h, prob.p)):
            if ph is None:
                continue
            taps, start, stop, lo, hi = ph
            xf = xu[:, :, f::sh][:, :, start:stop]
            part = conv2d_weight(xf, (prob.k, cu, len(taps), 1), dy, 1, Pads4((lo, hi, 0, 0)))
            dwu[:, :, taps[0] : taps[-1] + 1 : sh] = part
    return dwu[:, : prob.s * prob.c, :, 0].unflatten(1, (prob.s, prob.c)).permute(0, 2, 3, 1)


def _wgrad_signature(input, weight_size, grad_output, stride, padding, dilation, groups, memory_format):
    """``conv2d_weight``'s plan key, or None (interpreter, unusual arguments)."""
    if not isinstance(input, torch.Tensor) or input.device.type != "cuda":
        return None
    return _wgrad_plan_key(input, weight_size, grad_output, stride, padding, dilation, groups, memory_format)


def _wgrad_plan_key(input, weight_size, grad_output, stride, padding, dilation, groups, memory_format):
    """``_wgrad_signature`` on any device (the tests give CPU tensors plans with it)."""
    if not isinstance(input, torch.Tensor) or not isinstance(grad_output, torch.Tensor):
        return None
    if memory_format is not None and not isinstance(memory_format, torch.memory_format):
        return None
    try:
        return (
            "wgrad", input.shape, input.stride(), input.dtype, input.device, input.data_ptr() % 16,
            grad_output.shape, grad_output.stride(), grad_output.dtype, grad_output.device,
            grad_output.data_ptr() % 16, _plain(weight_size), _plain(stride), _plain(padding), _plain(dilation),
            _plain(groups), memory_format, _allow_tf32(),
        )  # fmt: skip
    except TypeError:
        return None


def _transpose_args(input, weight, bias, stride, padding, output_padding, groups, dilation):
    """Validate ``conv_transpose2d`` arguments; return the output size and pair-form arguments."""
    from .problem import _pair

    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"conv_transpose2d: {name} must be a torch.Tensor, got {type(t).__name__}")
    if input.dim() != 4 or weight.dim() != 4:
        raise ValueError(
            f"conv_transpose2d: input must be 4-D [N, C_in, H, W] (or 3-D unbatched) and weight 4-D "
            f"[C_in, C_out/groups, R, S], got {tuple(input.shape)} and {tuple(weight.shape)}"
        )
    if isinstance(padding, str):
        raise ValueError("conv_transpose2d: padding must be an int or a pair (PyTorch has no 'same' here)")
    st, pad, dil = _pair(stride, "stride"), _pair(padding, "padding"), _pair(dilation, "dilation")
    op = _pair(output_padding, "output_padding")
    if min(st) < 1 or min(dil) < 1 or min(pad) < 0 or min(op) < 0:
        raise ValueError(
            f"conv_transpose2d: need stride >= 1, dilation >= 1, padding >= 0 and output_padding >= 0, got "
            f"stride {st}, dilation {dil}, padding {pad}, output_padding {op}"
        )
    for i in range(2):
        if op[i] >= st[i] and op[i] >= dil[i]:
            raise ValueError(
                f"conv_transpose2d: output_padding {op} must be smaller than the stride {st} or the dilation {dil} "
                "(in each dimension), as in PyTorch"
            )
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"conv_transpose2d: groups must be an int >= 1, got {groups!r}")
    n, c_in, h, w = input.shape
    if weight.shape[0] != c_in:
        raise ValueError(
            f"conv_transpose2d: weight.shape[0] = {weight.shape[0]} must equal the input's {c_in} channels "
            "(the weight is [C_in, C_out/groups, R, S])"
        )
    if c_in % groups:
        raise ValueError(f"conv_transpose2d: groups = {groups} must divide the input's {c_in} channels")
    c_out = weight.shape[1] * groups
    r, s = weight.shape[2], weight.shape[3]
    ho = (h - 1) * st[0] - 2 * pad[0] + dil[0] * (r - 1) + op[0] + 1
    wo = (w - 1) * st[1] - 2 * pad[1] + dil[1] * (s - 1) + op[1] + 1
    if ho < 1 or wo < 1:
        raise ValueError(f"conv_transpose2d: the output would be {ho}x{wo}; reduce the padding")
    if bias is not None and (not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (c_out,)):
        raise ValueError(f"conv_transpose2d: bias must be a tensor of shape [{c_out}] (C_out) or None")
    return [n, c_out, ho, wo], st, pad, dil


def conv_transpose2d(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: IntOrPair = 1,
    padding: IntOrPair = 0,
    output_padding: IntOrPair = 0,
    groups: int = 1,
    dilation: IntOrPair = 1,
) -> torch.Tensor:
    """Transposed convolution with ``torch.nn.functional.conv_transpose2d``'s semantics.

    Args:
        input: ``[N, C_in, H, W]`` (or unbatched ``[C_in, H, W]``), any strides.
        weight: ``[C_in, C_out/groups, R, S]``; bias ``[C_out]`` or None; same dtype and device.
        output_padding: extra rows/columns at the bottom/right, smaller than stride or dilation.

    Returns ``[N, C_out, Ho, Wo]`` with ``Ho = (H-1)*stride - 2*padding + dilation*(R-1) +
    output_padding + 1``. It is conv2d's data gradient (dgrad) with the input as the output
    gradient, computed per stride phase (no inserted zeros); the bias is added afterwards.
    Differentiable (``torch.ops.convgemm.conv_transpose2d``).
    """
    unbatched = isinstance(input, torch.Tensor) and input.dim() == 3
    if unbatched:
        input = input.unsqueeze(0)
    input, weight, bias = _autocast(input, weight, bias)
    out_size, st, pad, dil = _transpose_args(input, weight, bias, stride, padding, output_padding, groups, dilation)
    input = transpose_input_padded(input, weight.shape[2:], out_size[2:], st, pad, dil)
    if transforming():
        from .ops import _FuncConvTranspose2d

        y = _FuncConvTranspose2d.apply(input, weight, bias, out_size, list(st), list(pad), list(dil), groups)
    elif _needs_op(input, weight, bias):
        y = torch.ops.convgemm.conv_transpose2d(input, weight, bias, out_size, list(st), list(pad), list(dil), groups)
    else:
        y = conv_transpose2d_forward(input, weight, bias, out_size, st, pad, dil, groups)
    return y.squeeze(0) if unbatched else y


def transpose_input_padded(input, taps, out_size, stride, padding, dilation) -> torch.Tensor:
    """The transposed convolution's input, zero-padded at the end of each spatial axis where
    ``output_padding >= stride`` (allowed when the dilation is larger): there a forward
    convolution over the output size has ``output_padding // stride`` more positions than the
    input, which a dgrad needs as its ``grad_output``; the zeros add nothing. Otherwise ``input``
    itself. Any rank (``taps``, ``out_size``, ``stride``, ``padding``, ``dilation`` per spatial
    axis); differentiable (``F.pad``)."""
    extra = [
        (int(o) + 2 * p - d * (t - 1) - 1) // s + 1 - i
        for o, t, s, p, d, i in zip(out_size, taps, stride, padding, dilation, input.shape[2:], strict=True)
    ]
    if not any(extra):
        return input
    pads = []
    for e in reversed(extra):  # F.pad lists the last axis first
        pads += [0, e]
    return torch.nn.functional.pad(input, pads)


def conv_transpose2d_forward(input, weight, bias, out_size, stride, padding, dilation, groups) -> torch.Tensor:
    y = conv2d_input(out_size, weight, input, tuple(stride), tuple(padding), tuple(dilation), groups)
    if bias is not None:
        y += bias.view(1, -1, 1, 1)
    return y
