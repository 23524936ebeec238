"""Autograd, the custom operators, opcheck and torch.compile."""

import pytest
import torch
import torch.nn.functional as F
from cases import CASES, case_id
from conftest import DEVICE, INTERPRET
from reference import assert_close

import convgemm
import convgemm.ops  # noqa: F401 - registers torch.ops.convgemm.*

# fp32 means strict IEEE fp32 here (the reference thresholds assume it)
pytestmark = pytest.mark.usefixtures("no_tf32")


def _leaf(t):
    return t.detach().clone().requires_grad_()


@pytest.mark.parametrize("case", CASES[::3], ids=case_id)
def test_autograd_matches_float64(case):
    n, c, h, w, k, r, s, stride, padding, dilation, groups, has_bias = case
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    x = torch.randn(n, c, h, w, device=DEVICE).to(memory_format=torch.channels_last)
    wt = torch.randn(k, c // groups, r, s, device=DEVICE)
    b = torch.randn(k, device=DEVICE) if has_bias else None
    xs, ws = _leaf(x), _leaf(wt)
    bs = _leaf(b) if has_bias else None
    y = convgemm.conv2d(xs, ws, bs, **kw)
    dy = torch.randn_like(y)
    y.backward(dy)

    xr, wr = _leaf(x.double().cpu()), _leaf(wt.double().cpu())
    br = _leaf(b.double().cpu()) if has_bias else None
    F.conv2d(xr, wr, br, **kw).backward(dy.double().cpu())
    assert_close(xs.grad, xr.grad, torch.float32, "input grad")
    assert_close(ws.grad, wr.grad, torch.float32, "weight grad")
    if has_bias:
        assert_close(bs.grad, br.grad, torch.float32, "bias grad")


def test_gradcheck_float64():
    """float64 runs the same GEMM kernels with float64 operands and accumulation (k_loop_f64)."""
    x = torch.randn(1, 4, 5, 4, device=DEVICE, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 2, 3, 3, device=DEVICE, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, device=DEVICE, dtype=torch.float64, requires_grad=True)
    fn = lambda x, w, b: convgemm.conv2d(x, w, b, stride=2, padding=1, groups=2)  # noqa: E731
    # fast mode (random projections: a few evaluations, not one per element) under the interpreter
    assert torch.autograd.gradcheck(fn, (x, w, b), eps=1e-6, atol=1e-7, fast_mode=INTERPRET)


def _op_args():
    x = torch.randn(2, 4, 7, 6, device=DEVICE, requires_grad=True)
    w = torch.randn(6, 4, 3, 3, device=DEVICE, requires_grad=True)
    b = torch.randn(6, device=DEVICE, requires_grad=True)
    return x, w, b


def test_opcheck_conv2d():
    x, w, b = _op_args()
    torch.library.opcheck(torch.ops.convgemm.conv2d.default, (x, w, b, [2, 1], [1, 1, 0, 1], [1, 1], 1, "auto"))
    torch.library.opcheck(torch.ops.convgemm.conv2d.default, (x, w, None, [1, 1], [0, 0, 0, 0], [1, 1], 1, "auto"))


def test_opcheck_gradients():
    x, w, _ = _op_args()
    dy = torch.randn(2, 6, 4, 5, device=DEVICE)
    args = ([2, 4, 7, 6], w.detach(), dy, [2, 1], [1, 1, 0, 1], [1, 1], 1)
    torch.library.opcheck(torch.ops.convgemm.conv2d_input.default, args)
    args = (x.detach(), [6, 4, 3, 3], dy, [2, 1], [1, 1, 0, 1], [1, 1], 1)
    torch.library.opcheck(torch.ops.convgemm.conv2d_weight.default, args)


def test_same_padding_with_even_kernel_through_the_op():
    """'same' with a 4x4 kernel pads one more row at the bottom: the op carries four pads."""
    x = torch.randn(1, 3, 7, 6, device=DEVICE, requires_grad=True)
    w = torch.randn(5, 3, 4, 4, device=DEVICE, requires_grad=True)
    y = convgemm.conv2d(x, w, padding="same")
    y.sum().backward()
    xr, wr = _leaf(x.double().cpu()), _leaf(w.double().cpu())
    F.conv2d(xr, wr, padding="same").sum().backward()
    assert_close(y, F.conv2d(x.double().cpu(), w.double().cpu(), padding="same"), torch.float32, "y")
    assert_close(x.grad, xr.grad, torch.float32, "input grad")
    assert_close(w.grad, wr.grad, torch.float32, "weight grad")


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(8, 3, 3, 3) * 0.3)
        self.b1 = torch.nn.Parameter(torch.randn(8) * 0.1)
        self.w2 = torch.nn.Parameter(torch.randn(8, 2, 3, 3) * 0.3)
        self.w3 = torch.nn.Parameter(torch.randn(4, 8, 1, 1) * 0.3)

    def forward(self, x):
        x = torch.relu(convgemm.conv2d(x, self.w1, self.b1, padding=1))
        x = torch.relu(convgemm.conv2d(x, self.w2, stride=2, padding=1, groups=4))
        return convgemm.conv2d(x, self.w3).mean(dim=(2, 3))


def test_torch_compile_fullgraph_forward_and_backward():
    torch.manual_seed(0)
    model = SmallCNN().to(DEVICE)
    x = torch.randn(2, 3, 9, 8, device=DEVICE)
    # on the CPU (interpreter) no code generation: aot_eager still traces the whole graph
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager" if INTERPRET else "inductor")
    y_ref = model(x)
    y_ref.sum().backward()
    grads_ref = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    y = compiled(x)
    y.sum().backward()
    torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-5)
    for p, g in zip(model.parameters(), grads_ref, strict=True):
        torch.testing.assert_close(p.grad, g, rtol=1e-5, atol=1e-5)


class StridedCNN(torch.nn.Module):
    """The layer kinds whose backward keeps derived tensors in caches: a stride-1 3x3 (dgrad as a
    forward of the flipped weight), a strided 3x3 (the stride-phase TMA dgrad, or the gather
    kernel with its tap table), a strided 1x1 (per-phase forwards of sub-weights) and wide
    layers whose weight gradient splits K (the split-K counters)."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        mk = lambda *s: torch.nn.Parameter(torch.randn(*s, generator=g) * 0.2)  # noqa: E731
        self.w1, self.w2, self.w3, self.w4 = mk(32, 3, 3, 3), mk(32, 32, 3, 3), mk(64, 32, 3, 3), mk(64, 32, 1, 1)

    def forward(self, x):
        x = torch.relu(convgemm.conv2d(x, self.w1, padding=1))
        x = torch.relu(convgemm.conv2d(x, self.w2, padding=1))
        return (convgemm.conv2d(x, self.w3, stride=2, padding=1) + convgemm.conv2d(x, self.w4, stride=2)).mean()


def _train(model, step_fn, x, steps):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = step_fn(x)
        loss.backward()
        opt.step()
        losses.append(loss.detach().clone())
    return torch.stack(losses), [p.detach().clone() for p in model.parameters()]


@pytest.mark.gpu
def test_torch_compile_cuda_graphs_training_matches_eager():
    """torch.compile(mode="reduce-overhead") (cudagraph trees) warms up and records the step on a
    side stream with every allocation routed to the graph's pool: convgemm's caches must not keep
    pool tensors (cudagraph trees raise "tensor(s) in the cudagraph pool not tracked as
    outputs"), and the weight changes every step, so nothing derived from it may be baked in."""
    x = torch.randn(8, 3, 32, 32, device=DEVICE).contiguous(memory_format=torch.channels_last)
    eager = StridedCNN().to(DEVICE)
    graphed = StridedCNN().to(DEVICE)
    ref_losses, ref_params = _train(eager, eager, x, 6)
    compiled = torch.compile(graphed, mode="reduce-overhead")

    def step(x):
        torch.compiler.cudagraph_mark_step_begin()
        return compiled(x)

    losses, params = _train(graphed, step, x, 6)
    # fp32 inputs: tf32 off by default, so both sides compute in fp32 (different orders)
    torch.testing.assert_close(losses, ref_losses, rtol=1e-4, atol=1e-5)
    for p, q in zip(params, ref_params, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
def test_first_tuning_inside_cuda_graph_warmup_keeps_no_pool_tensor(monkeypatch, tmp_path):
    """A shape first tuned inside cudagraph trees' warm-up: the tuner's L2-flush buffer is made
    on the graph's side stream, in its pool, and must not be kept (session 24: ResNet-50's
    "compile cudagraphs" row failed with "1 tensor(s) in the cudagraph pool not tracked as
    outputs", the flush buffer)."""
    from convgemm import _runtime, functional
    from convgemm.tune import autotune

    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "1")
    monkeypatch.setenv("CONVGEMM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(autotune, "_disk", None)
    monkeypatch.setattr(autotune, "_memo", {})
    monkeypatch.setattr(functional, "_plans", {})
    monkeypatch.setattr(_runtime, "_flushers", {})
    torch._dynamo.reset()
    x = torch.randn(8, 3, 32, 32, device=DEVICE).contiguous(memory_format=torch.channels_last)
    graphed = StridedCNN().to(DEVICE)
    compiled = torch.compile(graphed, mode="reduce-overhead")

    def step(x):
        torch.compiler.cudagraph_mark_step_begin()
        return compiled(x)

    losses, _ = _train(graphed, step, x, 3)
    assert torch.isfinite(losses).all()


def test_side_stream_calls_keep_nothing(monkeypatch):
    """Where ``may_cache`` says no (a CUDA graph's side stream), the strided gather dgrad makes
    its tap table per call and keeps none (split-K counters: tests/test_split_k.py), and the
    gradients are unchanged."""
    from convgemm.conv import backward

    monkeypatch.setattr(backward, "may_cache", lambda device: False)
    monkeypatch.setattr(backward, "_tables", {})
    x = torch.randn(2, 8, 9, 9, device=DEVICE, dtype=torch.float64)
    w = torch.randn(8, 8, 3, 3, device=DEVICE, dtype=torch.float64)
    dy = torch.randn(2, 8, 5, 5, device=DEVICE, dtype=torch.float64)
    dx = convgemm.conv2d_input(x.shape, w, dy, stride=2, padding=1)
    dw = convgemm.conv2d_weight(x, w.shape, dy, stride=2, padding=1)
    torch.testing.assert_close(dx, torch.nn.grad.conv2d_input(x.shape, w, dy, stride=2, padding=1))
    torch.testing.assert_close(dw, torch.nn.grad.conv2d_weight(x, w.shape, dy, stride=2, padding=1))
    assert backward._tables == {}


def test_inference_skips_the_dispatcher(monkeypatch):
    """Without a gradient to compute, conv2d calls the kernels directly (no custom-op overhead)."""
    import convgemm.ops as ops

    def boom(*a, **k):
        raise AssertionError("went through the op")

    monkeypatch.setattr(ops, "conv2d_op", boom)
    x, w, b = (t.detach() for t in _op_args())
    convgemm.conv2d(x, w, b)
    with torch.no_grad():
        convgemm.conv2d(x.requires_grad_(), w, b)


def test_eager_autograd_skips_the_op_and_matches_it(monkeypatch):
    """Eager autograd runs the op's forward and backward as a plain autograd.Function (no
    dispatcher round trips): same gradients, bit for bit, as through torch.ops.convgemm.conv2d,
    and the op is not called."""
    x = torch.randn(2, 8, 7, 7, device=DEVICE).to(memory_format=torch.channels_last)
    wt, b = torch.randn(16, 4, 3, 3, device=DEVICE), torch.randn(16, device=DEVICE)
    dy = torch.randn(2, 16, 4, 4, device=DEVICE)
    kw = dict(stride=2, padding=1, groups=2)
    via_op = [_leaf(x), _leaf(wt), _leaf(b)]
    y_op = torch.ops.convgemm.conv2d(*via_op, [2, 2], [1, 1, 1, 1], [1, 1], 2, "auto")
    y_op.backward(dy)
    calls = []
    real = torch.ops.convgemm.conv2d
    monkeypatch.setattr(torch.ops.convgemm, "conv2d", lambda *a: calls.append(a) or real(*a))
    eager = [_leaf(x), _leaf(wt), _leaf(b)]
    y = convgemm.conv2d(*eager, **kw)
    assert type(y.grad_fn).__name__ == "_Conv2dFunctionBackward" and not calls
    y.backward(dy)
    assert torch.equal(y, y_op)
    for a, o in zip(eager, via_op, strict=True):
        assert torch.equal(a.grad, o.grad)


def test_torch_func_transforms():
    """torch.func's grad, vmap, vmap of grad (per-sample gradients), jacrev and jvp (forward
    mode) match the same transforms of F.conv2d in float64."""
    import warnings

    from torch import func

    x = torch.randn(3, 4, 6, 5, dtype=torch.float64, device=DEVICE)
    w = torch.randn(8, 4, 3, 3, dtype=torch.float64, device=DEVICE)
    b = torch.randn(8, dtype=torch.float64, device=DEVICE)
    kw = dict(stride=2, padding=1)

    def both(transform):
        return transform(convgemm.conv2d), transform(F.conv2d)

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*performance drop.*")
        checks = {
            "grad": both(lambda conv: func.grad(lambda w, x: conv(x, w, b, **kw).square().sum(), argnums=(0, 1))(w, x)),
            "vmap": both(lambda conv: func.vmap(lambda xi: conv(xi, w, b, **kw))(x.unsqueeze(1))),
            "per-sample grad": both(lambda conv: func.vmap(
                func.grad(lambda w, xi: conv(xi.unsqueeze(0), w, b, **kw).square().sum()), in_dims=(None, 0))(w, x)),
            "jacrev": both(lambda conv: func.jacrev(lambda b: conv(x[:1, :, :3, :3], w, b).sum(dim=(2, 3)))(b)),
            "jvp": both(lambda conv: func.jvp(lambda x, w, b: conv(x, w, b, **kw), (x, w, b),
                                              (torch.ones_like(x), torch.linspace(-1, 1, w.numel(), dtype=w.dtype, device=DEVICE).view_as(w),
                                               torch.ones_like(b)))[1]),
        }  # fmt: skip
    for name, (got, ref) in checks.items():
        torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-10, msg=name)


@pytest.mark.parametrize("op", ["conv2d", "conv_transpose2d", "conv3d"])
def test_float64_bias_gradient_is_summed_in_float64(op):
    """The bias gradient (a sum of dy) of a float64 call is accumulated in float64: summed in
    float32 it would be off by about 1e-8 relative, which float64 users can see."""
    torch.manual_seed(0)
    n, c, k = 2, 3, 4
    spatial = (5, 5, 5) if op == "conv3d" else (6, 6)
    x = torch.randn(n, c, *spatial, dtype=torch.float64, device=DEVICE)
    w = torch.randn(*((c, k) if op == "conv_transpose2d" else (k, c)), *[3] * len(spatial), dtype=torch.float64,
                    device=DEVICE)  # fmt: skip
    b = torch.randn(k, dtype=torch.float64, device=DEVICE, requires_grad=True)
    ours = getattr(convgemm, op)(x, w, b, padding=1)
    ref_b = b.detach().clone().requires_grad_()
    ref = getattr(F, op)(x, w, ref_b, padding=1)
    dy = torch.randn_like(ref) * 1e3 + 1e6  # large, nearly equal values: float32 sums lose digits
    (db,) = torch.autograd.grad(ours, b, dy)
    (db_ref,) = torch.autograd.grad(ref, ref_b, dy)
    torch.testing.assert_close(db, db_ref, rtol=1e-13, atol=0)


@pytest.mark.parametrize("kw", [dict(padding=1), dict(stride=2, padding=1), dict(padding=1, dilation=2, groups=2)])
def test_double_backward_gradgradcheck(kw):
    """Second derivatives (create_graph=True: gradient penalties, Hessian-vector products): the
    gradient operators record their own gradients (``_backward_input``, ``_backward_weight``),
    checked by ``gradgradcheck`` in float64 against finite differences. Before, the gradients
    were constants to autograd and a double backward gave zeros with only a warning."""
    torch.manual_seed(0)
    # tiny: finite differences over every element, each a few kernel launches under the interpreter
    x = torch.randn(1, 2, 4, 4, dtype=torch.float64, device=DEVICE, requires_grad=True)
    w = torch.randn(2, 2 // kw.get("groups", 1), 2, 2, dtype=torch.float64, device=DEVICE, requires_grad=True)
    b = torch.randn(2, dtype=torch.float64, device=DEVICE, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda x, w, b: convgemm.conv2d(x, w, b, **kw), (x, w, b), fast_mode=INTERPRET)


def test_float64_weight_written_through_data_is_seen():
    """gradcheck perturbs its inputs through ``.data``, which bumps no version counter: float64
    derived weights (dgrad's flipped weight) must not be cached, or the finite differences of
    dgrad come out zero (seen on the H200 in gradgradcheck, where the cache is active)."""
    torch.manual_seed(0)
    dy = torch.randn(1, 2, 4, 4, dtype=torch.float64, device=DEVICE)
    w = torch.randn(2, 2, 3, 3, dtype=torch.float64, device=DEVICE)
    shape = (1, 2, 4, 4)
    convgemm.conv2d_input(shape, w, dy, padding=1)
    w.data.mul_(2.0)  # what gradcheck does: no version bump
    got = convgemm.conv2d_input(shape, w, dy, padding=1)
    torch.testing.assert_close(got, torch.nn.grad.conv2d_input(shape, w, dy, padding=1))


def test_double_backward_through_conv_transpose2d_and_a_gradient_penalty():
    """conv_transpose2d's backward is made of the same operators, so it has second derivatives
    too; and a gradient penalty (the norm of d(out)/d(input), as in WGAN-GP) trains the weight
    as with F.conv2d."""
    torch.manual_seed(0)
    x = torch.randn(1, 2, 3, 3, dtype=torch.float64, device=DEVICE, requires_grad=True)
    wt = torch.randn(2, 2, 2, 2, dtype=torch.float64, device=DEVICE, requires_grad=True)
    assert torch.autograd.gradgradcheck(
        lambda x, w: convgemm.conv_transpose2d(x, w, stride=2, padding=1), (x, wt), fast_mode=INTERPRET
    )

    w = torch.randn(3, 2, 3, 3, dtype=torch.float64, device=DEVICE, requires_grad=True)

    def penalty(conv):
        (gx,) = torch.autograd.grad(conv(x, w, padding=1).tanh().sum(), x, create_graph=True)
        (gw,) = torch.autograd.grad(gx.square().sum(), w)
        return gw

    torch.testing.assert_close(penalty(convgemm.conv2d), penalty(F.conv2d), rtol=1e-10, atol=1e-10)


def test_torch_func_transpose_and_3d():
    """conv_transpose2d and conv3d under grad, vmap, jvp and per-sample gradients match
    PyTorch's; higher-order transforms are refused with a message that says what works instead."""
    import warnings

    from torch import func

    x = torch.randn(2, 4, 3, 3, dtype=torch.float64, device=DEVICE)
    w = torch.randn(4, 3, 2, 2, dtype=torch.float64, device=DEVICE)
    b = torch.randn(3, dtype=torch.float64, device=DEVICE)
    x3 = torch.randn(2, 2, 3, 3, 3, dtype=torch.float64, device=DEVICE)
    w3 = torch.randn(3, 2, 2, 2, 2, dtype=torch.float64, device=DEVICE)
    b3 = torch.randn(3, dtype=torch.float64, device=DEVICE)
    t = lambda *ts: tuple(torch.ones_like(v) for v in ts)  # noqa: E731
    cases = {
        "conv_transpose2d grad": lambda c: func.grad(lambda w, x, b: c(x, w, b, stride=2).square().sum(),
                                                     argnums=(0, 1, 2))(w, x, b),
        "conv_transpose2d vmap": lambda c: func.vmap(lambda xi: c(xi, w, b, stride=2))(x.unsqueeze(1)),
        "conv_transpose2d jvp": lambda c: func.jvp(lambda x, w, b: c(x, w, b, stride=2), (x, w, b), t(x, w, b))[1],
    }  # fmt: skip
    cases3 = {
        "conv3d grad": lambda c: func.grad(
            lambda w, x, b: c(x, w, b, stride=2, padding=1).square().sum(), argnums=(0, 1, 2)
        )(w3, x3, b3),
        "conv3d per-sample grad": lambda c: func.vmap(
            func.grad(lambda w, xi: c(xi.unsqueeze(0), w, padding=1).sum()), in_dims=(None, 0)
        )(w3, x3),
        "conv3d vmap": lambda c: func.vmap(lambda xi: c(xi, w3, b3, padding=1))(x3.unsqueeze(1)),
        "conv3d jvp": lambda c: func.jvp(lambda x, w, b: c(x, w, b, padding=1), (x3, w3, b3), t(x3, w3, b3))[1],
    }
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*performance drop.*")
        for name, fn in cases.items():
            torch.testing.assert_close(fn(convgemm.conv_transpose2d), fn(F.conv_transpose2d), rtol=1e-10, atol=1e-10,
                                       msg=name)  # fmt: skip
        for name, fn in cases3.items():
            torch.testing.assert_close(fn(convgemm.conv3d), fn(F.conv3d), rtol=1e-10, atol=1e-10, msg=name)
    for f in (func.hessian, lambda g: func.jacrev(func.jacrev(g))):
        with pytest.raises(NotImplementedError, match="higher-order torch.func transforms|second derivatives"):
            f(lambda w: convgemm.conv3d(x3, w, padding=1).square().sum())(w3)
    w2 = torch.randn(2, 4, 2, 2, dtype=torch.float64, device=DEVICE)
    with pytest.raises(NotImplementedError, match="higher-order torch.func transforms"):
        func.hessian(lambda w: convgemm.conv2d(x, w).square().sum())(w2)


def test_forward_mode_ad_with_dual_tensors():
    """torch.autograd.forward_ad outside torch.func: dual tensors carry their tangents through
    conv2d and conv_transpose2d (their Functions' jvp) instead of losing them."""
    import torch.autograd.forward_ad as fwAD

    x = torch.randn(2, 3, 5, 5, dtype=torch.float64, device=DEVICE)
    w = torch.randn(4, 3, 3, 3, dtype=torch.float64, device=DEVICE)
    tx, tw = torch.randn_like(x), torch.randn_like(w)
    for ours, ref, wt in ((convgemm.conv2d, F.conv2d, w), (convgemm.conv_transpose2d, F.conv_transpose2d,
                                                           w.transpose(0, 1).contiguous())):  # fmt: skip
        tangents = []
        for conv in (ours, ref):
            with fwAD.dual_level():
                y = conv(fwAD.make_dual(x, tx), fwAD.make_dual(wt, tw.transpose(0, 1).contiguous() if wt is not w else tw),
                         stride=2, padding=1)  # fmt: skip
                tangents.append(fwAD.unpack_dual(y).tangent)
        assert tangents[0] is not None
        torch.testing.assert_close(tangents[0], tangents[1], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dims", [(0, None, None), (None, 0, None), (0, 0, None), (None, None, 0), (1, 0, 0)],
                         ids=["input", "weight", "input+weight", "bias", "all"])  # fmt: skip
def test_vmap_batching_rule(dims):
    """The batching rule of conv2d, conv_transpose2d and conv3d (``ops.conv_vmap_rule``): a
    batched input folds into the images, batched weights or biases (ensembles) become one
    grouped convolution; PyTorch's per-example fallback (which warns) is not used, and the
    results match vmap over PyTorch's functions."""
    import warnings

    from torch import func

    nb = 3
    x = torch.randn(nb, 2, 4, 5, 5, dtype=torch.float64, device=DEVICE)
    w = torch.randn(nb, 6, 2, 3, 3, dtype=torch.float64, device=DEVICE)
    b = torch.randn(nb, 6, dtype=torch.float64, device=DEVICE)
    args = [x.movedim(0, dims[0]) if dims[0] is not None else x[0], w if dims[1] is not None else w[0],
            b if dims[2] is not None else b[0]]  # fmt: skip
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*performance drop.*")
        got = func.vmap(lambda x, w, b: convgemm.conv2d(x, w, b, stride=2, padding=1, groups=2), in_dims=dims)(*args)
    ref = func.vmap(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=2), in_dims=dims)(*args)
    torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-10)
    # conv_transpose2d (weight [C_in, C_out/g, R, S], an output size to scale) and conv3d
    wt = torch.randn(nb, 4, 3, 3, 3, dtype=torch.float64, device=DEVICE)
    x3 = torch.randn(nb, 2, 2, 4, 4, 4, dtype=torch.float64, device=DEVICE)
    w3 = torch.randn(nb, 6, 2, 3, 3, 3, dtype=torch.float64, device=DEVICE)
    for ours, ref_fn, xs, ws, kw in (
        (convgemm.conv_transpose2d, F.conv_transpose2d, x, wt, dict(stride=2, padding=1, output_padding=1, groups=2)),
        (convgemm.conv3d, F.conv3d, x3, w3, dict(padding=1)),
    ):
        args = [xs.movedim(0, dims[0]) if dims[0] is not None else xs[0], ws if dims[1] is not None else ws[0],
                b if dims[2] is not None else b[0]]  # fmt: skip
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*performance drop.*")
            got = func.vmap(lambda x, w, b, c=ours, kw=kw: c(x, w, b, **kw), in_dims=dims)(*args)
        ref = func.vmap(lambda x, w, b, c=ref_fn, kw=kw: c(x, w, b, **kw), in_dims=dims)(*args)
        torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-10, msg=ours.__name__)


@pytest.mark.parametrize("dims", [(0, None), (None, 0), (0, 0)], ids=["first", "second", "both"])
def test_gradient_operators_batching_rules(dims):
    """conv2d_input (weight, grad_output) and conv2d_weight (input, grad_output) under vmap with
    either or both tensors batched, with no per-example fallback, match torch.nn.grad per entry;
    per-sample gradients (vmap of grad) then take no fallback anywhere."""
    import warnings

    from torch import func

    nb, kw = 3, dict(stride=2, padding=1, groups=2)
    x = torch.randn(nb, 2, 4, 6, 6, dtype=torch.float64, device=DEVICE)
    w = torch.randn(nb, 6, 2, 3, 3, dtype=torch.float64, device=DEVICE)
    dy = torch.randn(nb, 2, 6, 3, 3, dtype=torch.float64, device=DEVICE)
    g = ([2, 2], [1, 1, 1, 1], [1, 1], 2)

    def pick(t, d, i):
        return t[i] if d is not None else t[0]

    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*performance drop.*")
        dx = func.vmap(lambda w, d: torch.ops.convgemm.conv2d_input([2, 4, 6, 6], w, d, *g), in_dims=dims)(
            w if dims[0] is not None else w[0], dy if dims[1] is not None else dy[0])  # fmt: skip
        dw = func.vmap(lambda x, d: torch.ops.convgemm.conv2d_weight(x, [6, 2, 3, 3], d, *g), in_dims=dims)(
            x if dims[0] is not None else x[0], dy if dims[1] is not None else dy[0])  # fmt: skip
        per_sample = func.vmap(func.grad(lambda w, xi: convgemm.conv2d(xi, w, **kw).square().sum()),
                               in_dims=(None, 0))(w[0], x)  # fmt: skip
    ref_dx = torch.stack([torch.nn.grad.conv2d_input((2, 4, 6, 6), pick(w, dims[0], i), pick(dy, dims[1], i), **kw)
                          for i in range(nb)])  # fmt: skip
    ref_dw = torch.stack([torch.nn.grad.conv2d_weight(pick(x, dims[0], i), (6, 2, 3, 3), pick(dy, dims[1], i), **kw)
                          for i in range(nb)])  # fmt: skip
    ref_ps = func.vmap(func.grad(lambda w, xi: F.conv2d(xi, w, **kw).square().sum()), in_dims=(None, 0))(w[0], x)
    torch.testing.assert_close(dx, ref_dx, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(dw, ref_dw, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(per_sample, ref_ps, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dims", [(0, None), (None, 0), (0, 0)], ids=["first", "second", "both"])
def test_conv3d_gradient_operators_batching_rules(dims):
    """conv3d_input and conv3d_weight have batching rules too (``ops.grad_input_vmap_rule``,
    ``grad_weight_vmap_rule``): no per-example fallback, results equal to the per-entry ones, and
    per-sample gradients of conv3d run without a fallback anywhere."""
    import warnings

    from torch import func

    nb, kw = 2, dict(stride=(1, 2, 1), padding=1, groups=2)
    x = torch.randn(nb, 1, 4, 3, 5, 4, dtype=torch.float64, device=DEVICE)
    w = torch.randn(nb, 4, 2, 3, 3, 3, dtype=torch.float64, device=DEVICE)
    dy = torch.randn(nb, 1, 4, 3, 3, 4, dtype=torch.float64, device=DEVICE)
    g = ([1, 2, 1], [1, 1, 1, 1, 1, 1], [1, 1, 1], 2)

    def pick(t, d, i):
        return t[i] if d is not None else t[0]

    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*performance drop.*")
        dx = func.vmap(lambda w, d: torch.ops.convgemm.conv3d_input([1, 4, 3, 5, 4], w, d, *g), in_dims=dims)(
            w if dims[0] is not None else w[0], dy if dims[1] is not None else dy[0])  # fmt: skip
        dw = func.vmap(lambda x, d: torch.ops.convgemm.conv3d_weight(x, [4, 2, 3, 3, 3], d, *g), in_dims=dims)(
            x if dims[0] is not None else x[0], dy if dims[1] is not None else dy[0])  # fmt: skip
        per_sample = func.vmap(func.grad(lambda w, xi: convgemm.conv3d(xi, w, **kw).square().sum()),
                               in_dims=(None, 0))(w[0], x)  # fmt: skip
    ref_dx = torch.stack([torch.nn.grad.conv3d_input((1, 4, 3, 5, 4), pick(w, dims[0], i), pick(dy, dims[1], i), **kw)
                          for i in range(nb)])  # fmt: skip
    ref_dw = torch.stack([torch.nn.grad.conv3d_weight(pick(x, dims[0], i), (4, 2, 3, 3, 3), pick(dy, dims[1], i),
                                                      **kw) for i in range(nb)])  # fmt: skip
    ref_ps = func.vmap(func.grad(lambda w, xi: F.conv3d(xi, w, **kw).square().sum()), in_dims=(None, 0))(w[0], x)
    torch.testing.assert_close(dx, ref_dx, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(dw, ref_dw, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(per_sample, ref_ps, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kind", ["conv2d", "conv2d_act", "nchw-no-bias"])
def test_inductor_calls_convgemm_directly(monkeypatch, kind):
    """Inductor lowers the forward operators to a direct call of ``_inductor.extern_conv2d``
    (no dispatcher round trip in the compiled wrapper), with the results of eager calls."""
    import torch._inductor.config
    from torch._inductor.utils import run_and_get_code

    import convgemm._inductor as ci

    monkeypatch.setattr(ci, "DEVICES", ("cuda", "cpu"))  # the CPU: the kernels on the interpreter
    torch.manual_seed(0)
    fmt = torch.contiguous_format if kind == "nchw-no-bias" else torch.channels_last
    x = torch.randn(2, 8, 7, 6, device=DEVICE).contiguous(memory_format=fmt)
    w = torch.randn(12, 4, 3, 3, device=DEVICE)
    b = None if kind == "nchw-no-bias" else torch.randn(12, device=DEVICE)
    act = "relu" if kind == "conv2d_act" else None

    def f(x, w, b):
        return convgemm.conv2d(x, w, b, stride=(2, 1), padding=1, groups=2, activation=act)

    torch._dynamo.reset()
    # compile, not load from Inductor's cache (which may hold a graph made without the lowering)
    with torch.no_grad(), torch._inductor.config.patch(fx_graph_cache=False):
        y, code = run_and_get_code(torch.compile(f, fullgraph=True), x, w, b)
        ref = f(x, w, b)
    calls = [line.strip() for line in "\n".join(code).splitlines() if "convgemm" in line and "(" in line]
    name = "conv2d_act" if act else "conv2d"
    assert any(line.split("=", 1)[-1].strip().startswith(f"extern_kernels.convgemm_{name}(") for line in calls), calls
    assert not any("torch.ops.convgemm" in line and "assert" not in line for line in calls), calls
    assert y.stride() == ref.stride()
    torch.testing.assert_close(y, ref, rtol=0, atol=0)


def test_inductor_calls_the_gradients_directly(monkeypatch):
    """A compiled training step: the backward graph calls dgrad and wgrad through their lowerings
    (``extern_conv2d_input``, ``extern_conv2d_weight``), and the gradients equal eager's."""
    from torch._inductor.utils import run_and_get_code

    import convgemm._inductor as ci

    monkeypatch.setattr(ci, "DEVICES", ("cuda", "cpu"))
    torch.manual_seed(0)
    x = torch.randn(2, 8, 7, 6, device=DEVICE).contiguous(memory_format=torch.channels_last).requires_grad_()
    w = torch.randn(12, 4, 3, 3, device=DEVICE).requires_grad_()

    def f(x, w):
        return convgemm.conv2d(x, w, stride=(2, 1), padding=1, groups=2)

    def step(x, w):
        y = torch.compile(f, fullgraph=True)(x, w)
        y.backward(dy)
        return y

    dy = torch.randn(2, 12, 4, 6, device=DEVICE).contiguous(memory_format=torch.channels_last)
    torch._dynamo.reset()
    with torch._inductor.config.patch(fx_graph_cache=False):
        _, code = run_and_get_code(step, x, w)
    gx, gw = x.grad, w.grad
    x.grad = w.grad = None
    f(x, w).backward(dy)
    text = "\n".join(code)
    for name in ("conv2d", "conv2d_input", "conv2d_weight"):
        assert f"extern_kernels.convgemm_{name}(" in text, name
    calls = [line for line in text.splitlines() if "torch.ops.convgemm" in line and "assert_size_stride" not in line]
    assert not calls, calls
    torch.testing.assert_close(gx, x.grad, rtol=0, atol=0)
    torch.testing.assert_close(gw, w.grad, rtol=0, atol=0)


def test_inductor_lowering_on_a_fused_network(monkeypatch):
    """A whole network compiled with the lowerings: CRAFT (width 1/8, 32x32) after ``nn.fuse``,
    whose U-Net concatenations hand the convolutions views into Inductor's cat buffers; the
    output equals the eager model's. Dynamic shapes keep Inductor's fallback and still work."""
    from torch._inductor.utils import run_and_get_code

    import convgemm._inductor as ci
    from convgemm.models.craft import CRAFT

    monkeypatch.setattr(ci, "DEVICES", ("cuda", "cpu"))
    torch.manual_seed(0)
    m = CRAFT(width_div=8).eval().to(DEVICE).to(memory_format=torch.channels_last)
    m = convgemm.nn.fuse(convgemm.patch(m))
    x = torch.randn(1, 3, 32, 32, device=DEVICE).contiguous(memory_format=torch.channels_last)
    torch._dynamo.reset()
    with torch.no_grad(), torch._inductor.config.patch(fx_graph_cache=False):
        y, code = run_and_get_code(torch.compile(m), x)
        ref = m(x)
        text = "\n".join(code)
        assert text.count("extern_kernels.convgemm_conv2d_act(") >= 20
        assert "reinterpret_tensor" in text  # the concatenations' views reach the convolutions
        torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-5)
        x2 = torch.randn(1, 8, 9, 10, device=DEVICE)
        w2 = torch.randn(4, 8, 3, 3, device=DEVICE)
        f = torch.compile(lambda x, w: convgemm.conv2d(x, w, padding=1), dynamic=True)
        for size in (9, 12):
            xs = x2[:, :, :size]
            torch.testing.assert_close(f(xs, w2), F.conv2d(xs, w2, padding=1), rtol=1e-4, atol=1e-4)


def test_compiled_call_sites_replay_their_plans(monkeypatch):
    """Each lowered conv2d call site keeps a runner of its plan (``_inductor.extern_conv2d``): from
    its second call it allocates and launches, bitwise as the full path; a change of alignment or
    of plan generation takes the full path once and remakes the runner."""
    from torch._inductor.utils import run_and_get_code

    import convgemm._inductor as ci
    import convgemm.functional as fn

    monkeypatch.setattr(ci, "DEVICES", ("cuda", "cpu"))
    monkeypatch.setattr(fn, "_signature", fn._plan_key)  # plans, hence runners, for CPU tensors too
    monkeypatch.setattr(ci, "_sites", {})
    used, made = [0], [0]
    real = ci.forward_runner

    def counting(*args):
        made[0] += 1
        run = real(*args)

        def counted(*a):
            used[0] += 1
            return run(*a)

        return counted if run is not None else None

    monkeypatch.setattr(ci, "forward_runner", counting)
    torch.manual_seed(0)
    x = torch.randn(2, 8, 7, 6, device=DEVICE).contiguous(memory_format=torch.channels_last)
    w1 = torch.randn(8, 8, 3, 3, device=DEVICE).contiguous(memory_format=torch.channels_last)
    b1 = torch.randn(8, device=DEVICE)
    w2 = torch.randn(4, 8, 1, 1, device=DEVICE).contiguous(memory_format=torch.channels_last)

    def f(x, w1, b1, w2):
        return convgemm.conv2d(convgemm.conv2d(x, w1, b1, padding=1, activation="relu"), w2)

    fn.clear_plans()
    torch._dynamo.reset()
    with torch.no_grad(), torch._inductor.config.patch(fx_graph_cache=False):
        g = torch.compile(f, fullgraph=True)
        _, code = run_and_get_code(g, x, w1, b1, w2)
        assert "site=" in "\n".join(code)
        ref = f(x, w1, b1, w2)
        assert made[0] == 2 and used[0] == 0, "the first call makes each site's runner"
        for _ in range(2):
            assert torch.equal(g(x, w1, b1, w2), ref)
        assert used[0] == 4 and made[0] == 2, "calls 2 and 3 replay both sites"
        # a bias 4 bytes off 16-byte alignment: the full path once, a runner for that state
        b_off = torch.empty(9, device=DEVICE)[1:].copy_(b1)
        assert b_off.data_ptr() % 16 != b1.data_ptr() % 16
        assert torch.equal(g(x, w1, b_off, w2), ref)
        if DEVICE == "cuda":
            # Inductor copies a misaligned GPU input to an aligned buffer before the graph runs
            # (compile_fx's copy_misaligned_inputs): both sites see the state they were made in
            assert used[0] == 6 and made[0] == 2, "both sites replay"
        else:
            assert used[0] == 5 and made[0] == 3, "the second site still replays; the first remade its runner"
        fn.clear_plans()  # a new plan generation: both sites take the full path once
        used0, made0 = used[0], made[0]
        assert torch.equal(g(x, w1, b_off, w2), ref)
        assert used[0] == used0 and made[0] == made0 + 2
    fn.clear_plans()


def test_compiled_gradient_sites_replay_their_plans(monkeypatch):
    """A compiled training step's dgrad and wgrad call sites replay their plans from their
    second call (``dgrad_runner``, ``wgrad_runner``), with the full path's gradients bit for bit."""
    import convgemm._inductor as ci
    import convgemm.functional as fn

    monkeypatch.setattr(ci, "DEVICES", ("cuda", "cpu"))
    monkeypatch.setattr(fn, "_signature", fn._plan_key)
    monkeypatch.setattr(fn, "_wgrad_signature", fn._wgrad_plan_key)
    monkeypatch.setattr(ci, "_sites", {})
    used = {"dgrad": 0, "wgrad": 0}

    def counting(name, real):
        def make(*args):
            run = real(*args)

            def counted(*a):
                used[name] += 1
                return run(*a)

            return counted if run is not None else None

        return make

    monkeypatch.setattr(ci, "dgrad_runner", counting("dgrad", ci.dgrad_runner))
    monkeypatch.setattr(ci, "wgrad_runner", counting("wgrad", ci.wgrad_runner))
    torch.manual_seed(0)
    x = torch.randn(2, 8, 7, 6, device=DEVICE).contiguous(memory_format=torch.channels_last).requires_grad_()
    w = torch.randn(8, 8, 3, 3, device=DEVICE).contiguous(memory_format=torch.channels_last).requires_grad_()
    dy = torch.randn(2, 8, 7, 6, device=DEVICE).contiguous(memory_format=torch.channels_last)

    def f(x, w):
        return convgemm.conv2d(x, w, padding=1)

    fn.clear_plans()
    torch._dynamo.reset()
    with torch._inductor.config.patch(fx_graph_cache=False):
        g = torch.compile(f, fullgraph=True)
        grads = []
        for _ in range(3):
            g(x, w).backward(dy)
            grads.append((x.grad, w.grad))
            x.grad = w.grad = None
    f(x, w).backward(dy)
    assert used == {"dgrad": 2, "wgrad": 2}, used
    for gx, gw in grads:
        assert torch.equal(gx, x.grad) and torch.equal(gw, w.grad)
    fn.clear_plans()


def test_compiled_call_sites_are_distinct_across_graphs(monkeypatch):
    """Site numbers come from the OS: torch.compile saves and restores Python's ``random`` state
    around tracing, and numbers drawn from it repeated in every graph (two graphs' sites would
    then have shared runners)."""
    import re

    from torch._inductor.utils import run_and_get_code

    import convgemm._inductor as ci

    monkeypatch.setattr(ci, "DEVICES", ("cuda", "cpu"))
    x = torch.randn(1, 4, 5, 5, device=DEVICE)
    w = torch.randn(4, 4, 3, 3, device=DEVICE)
    sites = []
    for pad in (0, 1):  # two graphs
        torch._dynamo.reset()
        with torch.no_grad(), torch._inductor.config.patch(fx_graph_cache=False):
            f = torch.compile(lambda x, w, pad=pad: convgemm.conv2d(convgemm.conv2d(x, w, padding=pad), w))
            _, code = run_and_get_code(f, x, w)
        sites += re.findall(r"site=(\d+)", "\n".join(code))
    assert len(sites) == 4 and len(set(sites)) == 4, sites
