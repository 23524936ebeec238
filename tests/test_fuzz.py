"""Property-based tests: random valid problems x every algorithm that takes them x every direction,
against the float64 reference.

A bounded run here (CI, interpreter: 40 examples, one shard). A long run on a GPU, sharded over
pytest-xdist workers::

    CONVGEMM_AUTOTUNE=0 CONVGEMM_FUZZ_EXAMPLES=2000 CONVGEMM_FUZZ_SHARDS=28 pytest -n 14 tests/test_fuzz.py

``CONVGEMM_AUTOTUNE=0`` keeps ``auto`` on the heuristic choice: with tuning on, every new random
shape compiles and times a dozen candidates, and on the H200 no 143-example shard finished within
220 s. More shards than workers make progress visible as shards finish.

``CONVGEMM_FUZZ_EXAMPLES`` is the total: each of the ``CONVGEMM_FUZZ_SHARDS`` shards (one test
each) draws ``ceil(EXAMPLES / SHARDS)`` problems with its own Hypothesis seed,
``CONVGEMM_FUZZ_SEED * SHARDS + shard``, so shards draw different problems and a run is
reproducible; set ``CONVGEMM_FUZZ_SEED`` to draw a fresh set.

``test_random_problems`` draws 1-6 channels a group, which the TMA paths (16-byte rows) almost
never take; ``test_random_aligned_problems`` draws multiples of 8 (``CONVGEMM_FUZZ_EXAMPLES_ALIGNED``,
sharded the same way) so that the kernels real layers reach are fuzzed too.
"""

import os

import pytest
import torch
import torch.nn.functional as F
from conftest import DEVICE, INTERPRET
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from reference import assert_close

import convgemm
from convgemm.problem import ConvProblem

# the interpreter's int32 overflow checks (off in most other tests: tests/conftest.py)
pytestmark = pytest.mark.overflow_checks

EXAMPLES = int(os.environ.get("CONVGEMM_FUZZ_EXAMPLES", "40"))
SHARDS = max(1, int(os.environ.get("CONVGEMM_FUZZ_SHARDS", "1")))
SEED = int(os.environ.get("CONVGEMM_FUZZ_SEED", "0"))
PER_SHARD = -(-EXAMPLES // SHARDS)


@st.composite
def problems(draw):
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cg = draw(st.integers(1, 6))
    kg = draw(st.integers(1, 6))
    r, s = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pad = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    h = draw(st.integers(max(1, dil[0] * (r - 1) + 1 - 2 * pad[0]), 9))
    w = draw(st.integers(max(1, dil[1] * (s - 1) + 1 - 2 * pad[1]), 9))
    n = draw(st.integers(1, 2))
    bias = draw(st.booleans())
    cl = draw(st.booleans())
    return n, cg * groups, h, w, kg * groups, r, s, stride, pad, dil, groups, bias, cl


def _check_shard(strategy, examples: int, seed_value: int) -> None:
    """``examples`` problems drawn from ``strategy`` with the Hypothesis seed ``seed_value``, each
    through ``check_problem``."""

    @seed(seed_value)
    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(strategy, st.data())
    def check(p, data):
        check_problem(p, data)

    check()


@pytest.mark.parametrize("shard", range(SHARDS), ids=[f"shard{i}" for i in range(SHARDS)])
def test_random_problems(shard):
    _check_shard(problems(), PER_SHARD, SEED * SHARDS + shard)


EXAMPLES_ALIGNED = int(os.environ.get("CONVGEMM_FUZZ_EXAMPLES_ALIGNED", "8"))


@st.composite
def aligned_problems(draw):
    """Problems whose channel counts the fast paths take (multiples of 8: TMA rows of 16 bytes and
    more, wgmma's K steps), which ``problems()`` (1-6 channels a group) almost never draws:
    dense, grouped with 8-32 channels a group, depthwise (with a channel multiplier), 1x1 heads,
    and filters up to 7 wide."""
    kind = draw(st.sampled_from(["dense", "dense", "grouped", "depthwise", "pointwise"]))
    if kind == "depthwise":
        groups = draw(st.sampled_from([8, 16, 24, 32]))
        cg, kg = 1, draw(st.sampled_from([1, 1, 2]))
    else:
        groups = draw(st.sampled_from([2, 4])) if kind == "grouped" else 1
        cg = draw(st.sampled_from([8, 16, 24, 32, 64] if groups == 1 else [8, 16, 32]))
        kg = draw(st.sampled_from([8, 16, 24, 32, 48, 64] if groups == 1 else [8, 16, 32]))
    if kind == "pointwise":
        r = s = 1
    else:
        r, s = draw(st.sampled_from([1, 2, 3, 3, 5, 7])), draw(st.sampled_from([1, 2, 3, 3, 5, 7]))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pad = (draw(st.integers(0, 3)), draw(st.integers(0, 3)))
    h = draw(st.integers(max(1, dil[0] * (r - 1) + 1 - 2 * pad[0]), 20))
    w = draw(st.integers(max(1, dil[1] * (s - 1) + 1 - 2 * pad[1]), 20))
    n = draw(st.integers(1, 3))
    return n, cg * groups, h, w, kg * groups, r, s, stride, pad, dil, groups, draw(st.booleans()), draw(st.booleans())


@pytest.mark.parametrize("shard", range(SHARDS), ids=[f"shard{i}" for i in range(SHARDS)])
def test_random_aligned_problems(shard):
    """As ``test_random_problems`` on ``aligned_problems()`` (``CONVGEMM_FUZZ_EXAMPLES_ALIGNED`` in
    all, 8 by default, split over the shards): the TMA, warp-specialised, grouped and depthwise
    kernels that real layers reach."""
    _check_shard(aligned_problems(), -(-EXAMPLES_ALIGNED // SHARDS), SEED * SHARDS + shard + 7919)


def _view(t: torch.Tensor, kind: str, off: int = 1) -> torch.Tensor:
    """``t`` as a drawn kind of tensor with the same shape: itself (``dense``), a strided slice of a
    larger tensor holding its values (``sliced``: every other index of dim 0 or 1, ``off``
    elements along the last dim), or its first entry broadcast along dim 0 (``broadcast``:
    stride 0, other values). Offsets 0-3 give the views every alignment a word or vector load
    cares about (session 46: a 6-byte word was wrong only where the address was 6-byte aligned)."""
    if kind == "dense":
        return t
    if kind == "broadcast":
        return t[:1].expand(t.shape)
    dim = 1 if t.dim() > 1 and t.shape[1] > 1 else 0
    shape = list(t.shape)
    shape[dim] *= 2
    shape[-1] += 4 if t.dim() > 1 else 0
    big = torch.randn(shape, device=t.device, dtype=t.dtype)
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last):
        big = big.contiguous(memory_format=torch.channels_last)
    idx = [slice(None)] * t.dim()
    idx[dim] = slice(None, None, 2)
    if t.dim() > 1:
        idx[-1] = slice(off, off + t.shape[-1])
    view = big[tuple(idx)]
    view.copy_(t)
    return view


def check_problem(p, data):
    """One drawn problem: forward with a drawn algorithm (or its refusal), dgrad and wgrad, each
    tensor drawn dense, a strided slice, or (along the batch) broadcast."""
    n, c, h, w, k, r, s, stride, pad, dil, groups, has_bias, cl = p
    kw = dict(stride=stride, padding=pad, dilation=dil, groups=groups)
    fmt = torch.channels_last if cl else torch.contiguous_format
    # fp32 (TF32 off) mostly; fp16, float64 (its own K loop and kernels), and bf16 where tl.dot
    # computes it right (the GPU)
    dtype = data.draw(st.sampled_from([torch.float32, torch.float32, torch.float16, torch.float64]
                                      + ([] if INTERPRET else [torch.bfloat16])), label="dtype")  # fmt: skip
    batch_kinds = ["dense", "dense", "sliced"] + (["broadcast"] if n > 1 else [])
    x = _view(torch.randn(n, c, h, w, device=DEVICE).to(dtype).to(memory_format=fmt),
              data.draw(st.sampled_from(batch_kinds), label="x view"),
              data.draw(st.integers(0, 3), label="x offset"))  # fmt: skip
    wt = _view(torch.randn(k, c // groups, r, s, device=DEVICE).to(dtype),
               data.draw(st.sampled_from(["dense", "sliced"]), label="weight view"))  # fmt: skip
    b = _view(torch.randn(k, device=DEVICE).to(dtype), data.draw(st.sampled_from(["dense", "sliced"]),
                                                                 label="bias view")) if has_bias else None  # fmt: skip
    act = data.draw(st.sampled_from([None, None, "relu"]), label="activation")
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        prob = ConvProblem.from_tensors(x, wt, b, **kw)
        ref = F.conv2d(x.double().cpu(), wt.double().cpu(), None if b is None else b.double().cpu(), **kw)
        if act:
            ref = ref.clamp(min=0)
        algorithm = data.draw(st.sampled_from(["auto", *convgemm.algorithms()]), label="algorithm")
        try:
            y = convgemm.conv2d(x, wt, b, **kw, algorithm=algorithm, activation=act)
        except ValueError as e:  # this algorithm does not take the problem: it must say so
            assert "cannot run" in str(e), e
        else:
            assert_close(y, ref, dtype, f"fwd {algorithm} {act} {dtype} {p}")
        dy = _view(torch.randn(prob.output_shape, device=DEVICE).to(dtype),
                   data.draw(st.sampled_from(batch_kinds), label="dy view"))  # fmt: skip
        gx = torch.nn.grad.conv2d_input(x.shape, wt.double().cpu(), dy.double().cpu(), **kw)
        gw = torch.nn.grad.conv2d_weight(x.double().cpu(), wt.shape, dy.double().cpu(), **kw)
        assert_close(convgemm.conv2d_input(x.shape, wt, dy, **kw), gx, dtype, f"dgrad {dtype} {p}")
        assert_close(convgemm.conv2d_weight(x, wt.shape, dy, **kw), gw, dtype, f"wgrad {dtype} {p}")
    finally:
        torch.backends.cudnn.allow_tf32 = old


@pytest.fixture(autouse=True)
def _no_tuning(monkeypatch):
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")


EXAMPLES_3D = int(os.environ.get("CONVGEMM_FUZZ_EXAMPLES_3D", "30"))


@st.composite
def problems_3d(draw):
    groups = draw(st.sampled_from([1, 1, 2]))
    # a third of the problems with channel counts the TMA paths take (multiples of 8)
    widths = st.sampled_from([8, 16]) if draw(st.integers(0, 2)) == 0 else st.integers(1, 4)
    cg, kg = draw(widths), draw(widths)
    ks = [draw(st.integers(1, 3)) for _ in range(3)]
    stride = tuple(draw(st.integers(1, 2)) for _ in range(3))
    dil = tuple(draw(st.integers(1, 2)) for _ in range(3))
    pad = tuple(draw(st.integers(0, 1)) for _ in range(3))
    size = [draw(st.integers(max(1, dil[i] * (ks[i] - 1) + 1 - 2 * pad[i]), 6)) for i in range(3)]
    n = draw(st.integers(1, 2))
    cl = draw(st.booleans())
    return n, cg * groups, size, kg * groups, ks, stride, pad, dil, groups, draw(st.booleans()), cl


@settings(max_examples=EXAMPLES_3D, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@seed(SEED)
@given(problems_3d(), st.data())
def test_random_3d_problems(p, data):
    """conv3d forward, dgrad and wgrad on random valid problems against float64
    (``CONVGEMM_FUZZ_EXAMPLES_3D`` examples, 30 by default: two bugs needed 100-200 to show)."""
    n, c, size, k, ks, stride, pad, dil, groups, has_bias, cl = p
    kw = dict(stride=stride, padding=pad, dilation=dil, groups=groups)
    fmt = torch.channels_last_3d if cl else torch.contiguous_format
    batch_kinds = ["dense", "dense", "sliced"] + (["broadcast"] if n > 1 else [])
    x = _view(torch.randn(n, c, *size, device=DEVICE).contiguous(memory_format=fmt),
              data.draw(st.sampled_from(batch_kinds), label="x view"))  # fmt: skip
    wt = torch.randn(k, c // groups, *ks, device=DEVICE)
    b = _view(torch.randn(k, device=DEVICE), data.draw(st.sampled_from(["dense", "sliced"]), label="bias view")) \
        if has_bias else None  # fmt: skip
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        xd, wd = x.double().cpu(), wt.double().cpu()
        ref = F.conv3d(xd, wd, None if b is None else b.double().cpu(), **kw)
        assert_close(convgemm.conv3d(x, wt, b, **kw), ref, torch.float32, f"conv3d {p}")
        dy = _view(torch.randn(ref.shape, device=DEVICE), data.draw(st.sampled_from(batch_kinds), label="dy view"))
        gx = torch.nn.grad.conv3d_input(x.shape, wd, dy.double().cpu(), **kw)
        gw = torch.nn.grad.conv3d_weight(xd, wt.shape, dy.double().cpu(), **kw)
        assert_close(convgemm.conv3d_input(x.shape, wt, dy, **kw), gx, torch.float32, f"conv3d dgrad {p}")
        assert_close(convgemm.conv3d_weight(x, wt.shape, dy, **kw), gw, torch.float32, f"conv3d wgrad {p}")
    finally:
        torch.backends.cudnn.allow_tf32 = old


EXAMPLES_T = int(os.environ.get("CONVGEMM_FUZZ_EXAMPLES_T", "12"))


@st.composite
def transpose_problems(draw):
    groups = draw(st.sampled_from([1, 1, 2]))
    widths = st.sampled_from([8, 16]) if draw(st.integers(0, 2)) == 0 else st.integers(1, 5)
    cg, kg = draw(widths), draw(widths)
    r, s = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pad = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    # output_padding < max(stride, dilation) per axis; the output must not be empty
    opad = tuple(draw(st.integers(0, max(stride[i], dil[i]) - 1)) for i in range(2))
    h, w = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    n = draw(st.integers(1, 2))
    return n, cg * groups, h, w, kg * groups, r, s, stride, pad, opad, dil, groups, draw(st.booleans())


@settings(max_examples=EXAMPLES_T, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@seed(SEED)
@given(transpose_problems(), st.data())
def test_random_transpose_problems(p, data):
    """conv_transpose2d on random valid problems (output_padding, dilation, groups), its input and
    bias drawn dense, sliced or broadcast, against float64 (``CONVGEMM_FUZZ_EXAMPLES_T``, 12)."""
    n, c, h, w, k, r, s, stride, pad, opad, dil, groups, has_bias = p
    ho = (h - 1) * stride[0] - 2 * pad[0] + dil[0] * (r - 1) + opad[0] + 1
    wo = (w - 1) * stride[1] - 2 * pad[1] + dil[1] * (s - 1) + opad[1] + 1
    if ho < 1 or wo < 1:
        return
    kw = dict(stride=stride, padding=pad, output_padding=opad, groups=groups, dilation=dil)
    batch_kinds = ["dense", "sliced"] + (["broadcast"] if n > 1 else [])
    fmt = torch.channels_last if data.draw(st.booleans(), label="channels_last") else torch.contiguous_format
    x = _view(torch.randn(n, c, h, w, device=DEVICE).to(memory_format=fmt),
              data.draw(st.sampled_from(batch_kinds), label="x view"))  # fmt: skip
    wt = torch.randn(c, k // groups, r, s, device=DEVICE)
    b = _view(torch.randn(k, device=DEVICE), data.draw(st.sampled_from(["dense", "sliced"]), label="bias view")) \
        if has_bias else None  # fmt: skip
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        ref = F.conv_transpose2d(x.double().cpu(), wt.double().cpu(), None if b is None else b.double().cpu(), **kw)
        assert_close(convgemm.conv_transpose2d(x, wt, b, **kw), ref, torch.float32, f"conv_transpose2d {p}")
    finally:
        torch.backends.cudnn.allow_tf32 = old


@st.composite
def same_problems(draw):
    groups = draw(st.sampled_from([1, 1, 2, 4]))
    cg, kg = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    r, s = draw(st.integers(1, 5)), draw(st.integers(1, 5))  # even sizes pad asymmetrically
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h, w = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    return draw(st.integers(1, 2)), cg * groups, h, w, kg * groups, r, s, dil, groups, draw(st.booleans())


@settings(max_examples=EXAMPLES_T, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@seed(SEED)
@given(same_problems(), st.data())
def test_random_same_padding_with_autograd(p, data):
    """``padding='same'`` / ``'valid'`` (asymmetric for even effective kernels) through
    ``convgemm.conv2d`` and autograd: the output and the gradients of x, weight and bias against
    float64 autograd (``CONVGEMM_FUZZ_EXAMPLES_T``, 12)."""
    n, c, h, w, k, r, s, dil, groups, has_bias = p
    padding = data.draw(st.sampled_from(["same", "same", "valid"]), label="padding")
    if padding == "valid" and (h < dil[0] * (r - 1) + 1 or w < dil[1] * (s - 1) + 1):
        return
    batch_kinds = ["dense", "sliced"] + (["broadcast"] if n > 1 else [])
    x = _view(torch.randn(n, c, h, w, device=DEVICE).to(memory_format=torch.channels_last),
              data.draw(st.sampled_from(batch_kinds), label="x view")).requires_grad_()  # fmt: skip
    wt = torch.randn(k, c // groups, r, s, device=DEVICE, requires_grad=True)
    b = torch.randn(k, device=DEVICE, requires_grad=True) if has_bias else None
    kw = dict(padding=padding, dilation=dil, groups=groups)
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        y = convgemm.conv2d(x, wt, b, **kw)
        leaves = [t.detach().double().cpu().requires_grad_() for t in (x, wt) + ((b,) if has_bias else ())]
        ref = F.conv2d(leaves[0], leaves[1], leaves[2] if has_bias else None, **kw)
        assert_close(y, ref, torch.float32, f"same fwd {p} {padding}")
        dy = torch.randn(ref.shape, dtype=torch.float64)
        got = torch.autograd.grad(y, [x, wt] + ([b] if has_bias else []), dy.float().to(DEVICE))
        want = torch.autograd.grad(ref, leaves, dy)
        for name, a, e in zip(("dx", "dw", "db"), got, want, strict=False):
            assert_close(a, e, torch.float32, f"same {name} {p} {padding}")
    finally:
        torch.backends.cudnn.allow_tf32 = old


@st.composite
def module_problems(draw):
    nd = draw(st.integers(1, 3))
    transposed = draw(st.booleans())
    groups = draw(st.sampled_from([1, 1, 2]))
    cin, cout = groups * draw(st.integers(1, 3)), groups * draw(st.integers(1, 3))
    k, s, d, p = draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(0, 2))
    size = [draw(st.integers(3, 6)) for _ in range(nd)]
    kw = dict(stride=s, padding=p, dilation=d, groups=groups, bias=draw(st.booleans()))
    if transposed:
        kw["output_padding"] = draw(st.integers(0, max(s, d) - 1))
    else:
        mode = draw(st.sampled_from(["zeros", "zeros", "reflect", "replicate", "circular"]))
        kw["padding_mode"] = "zeros" if mode == "reflect" and p >= min(size) else mode
    return nd, transposed, cin, cout, k, size, kw


@settings(max_examples=EXAMPLES_T, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@seed(SEED)
@given(module_problems())
def test_random_patched_modules(p):
    """A random ``nn.Conv{1,2,3}d`` or ``nn.ConvTranspose{1,2,3}d`` (every padding mode), patched:
    two calls (the second through the module's replay), then the output and the input and weight
    gradients against the unpatched module in float64 (``CONVGEMM_FUZZ_EXAMPLES_T``, 12)."""
    import copy

    nd, transposed, cin, cout, k, size, kw = p
    cls = getattr(torch.nn, f"{'ConvTranspose' if transposed else 'Conv'}{nd}d")
    torch.manual_seed(len(str(p)))
    ref = cls(cin, cout, k, **kw).double()
    x = torch.randn(2, cin, *size, dtype=torch.float64)
    try:
        want = ref(x)
    except RuntimeError:  # a size the module itself refuses (an empty output)
        return
    mod = convgemm.patch(copy.deepcopy(ref).float().to(DEVICE))
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        xg = x.float().to(DEVICE).requires_grad_()
        for _ in range(2):
            y = mod(xg)
        assert_close(y, want, torch.float32, f"module {p}")
        dy = torch.randn(want.shape, dtype=torch.float64)
        got = torch.autograd.grad(y, (xg, mod.weight), dy.float().to(DEVICE))
        xd = x.clone().requires_grad_()
        want_g = torch.autograd.grad(ref(xd), (xd, ref.weight), dy)
        for name, a, e in zip(("dx", "dw"), got, want_g, strict=True):
            assert_close(a, e, torch.float32, f"module {name} {p}")
    finally:
        torch.backends.cudnn.allow_tf32 = old
