"""conv2d(..., activation='relu'): the fused epilogue, its fallbacks, autograd, and nn.fuse."""

import copy
from dataclasses import replace

import pytest
import torch
from conftest import DEVICE, INTERPRET
from reference import assert_close, conv2d_ref
from torch import nn

import convgemm
from convgemm.conv.fprop import ALGORITHMS
from convgemm.functional import _prepare


@pytest.fixture(autouse=True)
def _no_tuning(monkeypatch):
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")


# (N, C, H, W, K, R, S, stride, padding, groups): a shape each algorithm takes
CASES = {
    "implicit_gemm": (2, 16, 7, 9, 24, 3, 3, 1, 1, 1),
    "small_k": (2, 3, 9, 8, 16, 3, 3, 2, 1, 1),
    "implicit_gemm_tma": (2, 16, 6, 7, 32, 3, 3, 1, 1, 1),
    "gemm_1x1": (2, 32, 5, 6, 48, 1, 1, 1, 0, 1),
    "depthwise": (2, 16, 7, 6, 16, 3, 3, 1, 1, 16),
    "grouped": (2, 32, 6, 6, 32, 3, 3, 1, 1, 8),
    "width_unfold": (2, 3, 9, 8, 16, 3, 3, 2, 1, 1),
    "head_1x1": (2, 16, 6, 5, 3, 1, 1, 1, 0, 1),
    "grouped_tma": (2, 32, 6, 6, 32, 3, 3, 1, 1, 8),
    "narrow_fold": (2, 16, 6, 7, 3, 3, 3, 1, 1, 1),
    "flat_rows": (2, 8, 7, 9, 8, 3, 3, 1, 1, 1),
    "grouped_direct": (2, 16, 6, 6, 16, 3, 3, 1, 1, 4),
    "grouped_mma": (2, 32, 6, 6, 32, 3, 3, 1, 1, 2),
}
#: the dtype each algorithm is tested in here: float32, but the width unfold runs on the TMA
#: kernel in fp16 and bf16 only
DTYPE = {
    "width_unfold": torch.float16,
    "grouped_tma": torch.float16,
    "implicit_gemm_ws": torch.bfloat16,
    "narrow_fold": torch.float16,
}
if not INTERPRET:  # a Gluon kernel: GPU only
    CASES["implicit_gemm_ws"] = (2, 16, 6, 7, 32, 3, 3, 1, 1, 1)


def _make(case, dtype, nan=False):
    n, c, h, w, k, r, s, stride, padding, groups = case
    x = torch.randn(n, c, h, w, device=DEVICE).to(dtype).contiguous(memory_format=torch.channels_last)
    if nan:
        x[0, 1, 2, 3] = float("nan")
    wt = torch.randn(k, c // groups, r, s, device=DEVICE).to(dtype).contiguous(memory_format=torch.channels_last)
    b = torch.randn(k, device=DEVICE).to(dtype)
    return x, wt, b, dict(stride=stride, padding=padding, groups=groups)


@pytest.mark.parametrize("nan", [False, True], ids=["finite", "nan"])
@pytest.mark.parametrize("algorithm", list(CASES))
def test_relu_matches_relu_of_the_reference(algorithm, nan):
    dtype = DTYPE.get(algorithm, torch.float32)
    x, w, b, kw = _make(CASES[algorithm], dtype, nan)
    y = convgemm.conv2d(x, w, b, **kw, algorithm=algorithm, activation="relu")
    ref = torch.relu(conv2d_ref(x, w, b, **kw))
    assert torch.equal(torch.isnan(y.cpu()), torch.isnan(ref)), "NaN where torch.relu has it"
    assert (y[~torch.isnan(y)] >= 0).all()
    fin = ~torch.isnan(ref)
    assert_close(y.cpu().double()[fin].to(dtype), ref[fin].to(dtype), dtype, algorithm)


@pytest.mark.parametrize("algorithm", [a for a in CASES if ALGORITHMS[a].fuses_activation])
def test_epilogue_applies_it(algorithm):
    """The algorithms that claim the fused epilogue apply the ReLU inside their kernel (their
    ``run`` alone, without conv2d's fallback), and not without the flag."""
    x, w, b, kw = _make(CASES[algorithm], DTYPE.get(algorithm, torch.float32))
    prob, xn, y = _prepare(x, w, b, kw["stride"], kw["padding"], 1, kw["groups"])
    algo = ALGORITHMS[algorithm]
    assert algo.supports(prob) is None
    cfg = algo.default_config(prob)
    algo.run(prob, xn, w, b, y, cfg)
    assert (y < 0).any(), "the plain convolution has negative outputs"
    fused = torch.full_like(y, float("nan"))
    algo.run(replace(prob, activation="relu"), xn, w, b, fused, cfg)
    assert torch.equal(fused, torch.relu(y))


def test_fusing_flags():
    assert {a for a, v in ALGORITHMS.items() if v.fuses_activation} == {
        "implicit_gemm", "small_k", "implicit_gemm_tma", "gemm_1x1", "width_unfold", "head_1x1", "grouped_tma",
        "implicit_gemm_tma_nchw", "narrow_tma", "implicit_gemm_ws", "narrow_fold", "flat_rows", "head_1x1_nchw",
        "depthwise_nchw", "grouped_ws", "grouped_direct", "grouped_mma", "gemm_1x1_nchw",
    }  # fmt: skip


def test_nchw_and_unbatched():
    x, w, b, kw = _make(CASES["implicit_gemm"], torch.float32)
    x, w = x.contiguous(), w.contiguous()
    y = convgemm.conv2d(x, w, b, **kw, activation="relu")
    assert y.is_contiguous()
    assert_close(y, torch.relu(conv2d_ref(x, w, b, **kw)), torch.float32)
    y1 = convgemm.conv2d(x[0], w, b, **kw, activation="relu")
    assert_close(y1, torch.relu(conv2d_ref(x[:1], w, b, **kw))[0], torch.float32)


def test_autograd_through_the_relu():
    x, w, b, kw = _make(CASES["implicit_gemm"], torch.float32)
    xs, ws, bs = (t.detach().clone().requires_grad_() for t in (x, w, b))
    y = convgemm.conv2d(xs, ws, bs, **kw, activation="relu")
    g = torch.randn_like(y)
    (y * g).sum().backward()
    xd, wd, bd = (t.detach().double().cpu().requires_grad_() for t in (x, w, b))
    yd = torch.relu(torch.nn.functional.conv2d(xd, wd, bd, **kw))
    (yd * g.double().cpu()).sum().backward()
    assert_close(y, yd.detach(), torch.float32, "forward")
    for got, want, what in ((xs.grad, xd.grad, "dx"), (ws.grad, wd.grad, "dw"), (bs.grad, bd.grad, "db")):
        assert_close(got, want, torch.float32, what)


@pytest.mark.parametrize("bad", ["gelu", "ReLU", 1, "relu6"])
def test_unknown_activation_is_refused(bad):
    x, w, b, kw = _make(CASES["implicit_gemm"], torch.float32)
    with pytest.raises(ValueError, match=r"activation must be None or one of \('relu',\)"):
        convgemm.conv2d(x, w, b, **kw, activation=bad)


# ---------------------------------------------------------------- nn.fuse
def _block():
    torch.manual_seed(0)
    m = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
        nn.Conv2d(8, 8, 1), nn.ReLU(),
        nn.Conv2d(8, 4, 3, bias=False), nn.BatchNorm2d(4),
        nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4, affine=False), nn.ReLU()),
    )  # fmt: skip
    for bn in (m[1], m[6], m[7][1]):  # running statistics that are not the identity
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        if bn.affine:
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.uniform_(-0.5, 0.5)
    return m.eval()


def test_fuse_folds_bn_and_relu_and_matches_the_model():
    m = _block()
    x = torch.randn(2, 3, 9, 10)
    with torch.no_grad():
        ref = m.double()(x.double())
    fused = convgemm.nn.fuse(copy.deepcopy(m).float()).to(DEVICE)
    kinds = [type(mod).__name__ for mod in fused]
    assert kinds == ["Conv2d", "Identity", "Identity", "Conv2d", "Identity", "Conv2d", "Identity", "Sequential"]
    assert [type(mod).__name__ for mod in fused[7]] == ["Conv2d", "Identity", "Identity"]
    convs = [fused[0], fused[3], fused[5], fused[7][0]]
    assert all(type(c) is convgemm.nn.Conv2d for c in convs)
    acts = [c.__dict__.get("_convgemm_activation") for c in convs]
    assert acts == ["relu", "relu", None, "relu"]
    assert fused[5].bias is not None and fused[7][0].bias is not None  # the folded shifts
    with torch.no_grad():
        y = fused(x.to(DEVICE))
    assert_close(y, ref, torch.float32, "fused block")


def test_fuse_refuses_training_mode_and_non_modules():
    m = _block().train()
    with pytest.raises(ValueError, match="call model.eval\\(\\) before fuse"):
        convgemm.nn.fuse(m)
    with pytest.raises(TypeError, match="fuse: model must be a torch.nn.Module"):
        convgemm.nn.fuse("model")


def test_fuse_leaves_other_layers_alone():
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Conv2d(4, 4, 3), nn.BatchNorm2d(5), nn.ReLU6()).eval()
    fused = convgemm.nn.fuse(m)
    assert [type(mod) for mod in fused] == [nn.Conv2d, nn.Conv2d, nn.BatchNorm2d, nn.ReLU6]


# ---------------------------------------------------------------- torch.compile: conv2d_act
def test_opcheck_conv2d_act():
    """The operator a compiled ``conv2d(..., activation='relu')`` calls: schema, fake
    implementation, autograd registration and batching, as opcheck checks them."""
    import convgemm.ops  # noqa: F401 - registers torch.ops.convgemm.*

    x, w, b, _ = _make(CASES["implicit_gemm"], torch.float32)
    x, w, b = (t.detach().requires_grad_() for t in (x, w, b))
    op = torch.ops.convgemm.conv2d_act.default
    torch.library.opcheck(op, (x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 1, "auto", "relu"))
    torch.library.opcheck(op, (x, w, None, [2, 1], [0, 1, 1, 0], [1, 1], 1, "auto", "relu"))
    with pytest.raises(ValueError, match="activation must be None or one of"):
        op(x.detach(), w.detach(), None, [1, 1], [1, 1, 1, 1], [1, 1], 1, "auto", "gelu")


def _compiled_ops(fn, *args):
    """``fn(*args)`` compiled (fullgraph, aot_eager: the CPU has no code generation for these
    ops) and the call targets of every graph AOTAutograd made, forward and backward."""
    from torch._dynamo.backends.common import aot_autograd

    targets = []

    def record(gm, _inputs):
        targets.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm

    backend = aot_autograd(fw_compiler=record, bw_compiler=record)
    torch._dynamo.reset()
    return torch.compile(fn, fullgraph=True, backend=backend)(*args), targets


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "training"])
def test_compiled_relu_stays_in_the_operator(grad):
    """Under torch.compile ``activation='relu'`` is one operator (``conv2d_act``), not a conv2d
    followed by a relu that a compiler would run as its own pass; forward and gradients still
    equal torch's in float64."""
    x, w, b, kw = _make(CASES["implicit_gemm"], torch.float32, nan=not grad)  # NaN stays NaN
    xs, ws, bs = (t.detach().clone().requires_grad_(grad) for t in (x, w, b))

    def f(x, w, b):
        return convgemm.conv2d(x, w, b, **kw, activation="relu")

    y, targets = _compiled_ops(f, xs, ws, bs)
    if grad:
        g = torch.randn_like(y)
        (y * g).sum().backward()  # the backward graph is made here
    assert "convgemm.conv2d_act.default" in targets, targets
    assert not any("relu" in t for t in targets), targets
    xd, wd, bd = (t.detach().double().cpu().requires_grad_(grad) for t in (x, w, b))
    yd = torch.relu(torch.nn.functional.conv2d(xd, wd, bd, **kw))
    y, yd_ = y.detach().cpu(), yd.detach()
    assert torch.equal(torch.isnan(y), torch.isnan(yd_)), "NaN where torch.relu has it"
    fin = ~torch.isnan(yd_)
    assert_close(y[fin], yd_[fin], torch.float32, "forward")
    if grad:
        assert (yd == 0).any(), "some outputs are clamped: the gradient's mask matters"
        (yd * g.double().cpu()).sum().backward()
        assert "aten.threshold_backward.default" in targets, targets
        for got, want, what in ((xs.grad, xd.grad, "dx"), (ws.grad, wd.grad, "dw"), (bs.grad, bd.grad, "db")):
            assert_close(got, want, torch.float32, what)


def test_compiled_fused_model_has_no_relu_or_batch_norm():
    """``nn.fuse`` then torch.compile: each folded convolution and its ReLU are one operator."""
    m = _block()
    x = torch.randn(2, 3, 9, 10)
    with torch.no_grad():
        ref = m.double()(x.double())
        fused = convgemm.nn.fuse(copy.deepcopy(m).float()).to(DEVICE)
        y, targets = _compiled_ops(fused, x.to(DEVICE))
    assert targets.count("convgemm.conv2d_act.default") == 3, targets
    assert targets.count("convgemm.conv2d.default") == 1, targets
    assert not any("relu" in t or "batch_norm" in t for t in targets), targets
    assert_close(y, ref, torch.float32, "fused block, compiled")
