"""conv3d, its gradients, conv_transpose3d, the custom ops and the 3-D modules, against float64
torch on the CPU."""

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from conftest import DEVICE, interpreter_subset
from reference import assert_close
from torch import nn

import convgemm
from convgemm.conv import conv3d as k3
from convgemm.conv.loaders3d import depth_k_range
from convgemm.problem3d import ConvProblem3d

_CL3 = torch.channels_last_3d

pytestmark = pytest.mark.usefixtures("no_tf32")

# N, C, D, H, W, K, T, R, S, stride, padding, dilation, groups
CASES = [
    (2, 3, 5, 6, 7, 4, 3, 3, 3, 1, 1, 1, 1),
    (1, 4, 6, 5, 7, 6, 2, 3, 1, (2, 1, 2), (1, 0, 1), 1, 2),  # mixed strides, grouped
    (1, 4, 3, 4, 5, 4, 3, 3, 3, 1, "same", (1, 2, 1), 4),  # depthwise, dilated, 'same'
    (1, 5, 7, 7, 6, 3, 3, 2, 3, 2, 0, 1, 1),  # odd sizes, stride 2
    (2, 16, 3, 4, 4, 12, 1, 1, 1, 1, 0, 1, 1),  # 1x1x1
    (1, 6, 4, 6, 6, 8, 3, 1, 1, (1, 1, 1), (1, 0, 0), 1, 1),  # temporal only (R(2+1)D)
]
ids = [str(c) for c in CASES]


def _tensors(case, dtype, channels_last=False):
    n, c, d, h, w, k, t, r, s, stride, padding, dilation, groups = case
    fmt = torch.channels_last_3d if channels_last else torch.contiguous_format
    x = torch.randn(n, c, d, h, w, device=DEVICE).to(dtype).contiguous(memory_format=fmt)
    wt = torch.randn(k, c // groups, t, r, s, device=DEVICE).to(dtype).contiguous(memory_format=fmt)
    b = torch.randn(k, device=DEVICE).to(dtype)
    return x, wt, b, dict(stride=stride, padding=padding, dilation=dilation, groups=groups)


def _ref(x, w, b, kw):
    return F.conv3d(x.double().cpu(), w.double().cpu(), None if b is None else b.double().cpu(), **kw)


@pytest.mark.parametrize(
    "dtype,channels_last",
    [
        (torch.float32, False),
        (torch.float32, True),
        (torch.float16, True),
        (torch.float64, False),
        pytest.param(torch.bfloat16, True, marks=pytest.mark.gpu),
    ],
)
@pytest.mark.parametrize("case", CASES, ids=ids)
def test_conv3d_matches_torch(case, dtype, channels_last):
    x, w, b, kw = _tensors(case, dtype, channels_last)
    y = convgemm.conv3d(x, w, b, **kw)
    ref = _ref(x, w, b, kw)
    assert y.shape == ref.shape and y.dtype == dtype
    assert y.is_contiguous(memory_format=torch.channels_last_3d if channels_last and x.shape[1] > 1 else
                           torch.contiguous_format)  # fmt: skip
    assert_close(y, ref, dtype, f"conv3d {case}")


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_conv3d_gradients(case):
    x, w, b, kw = _tensors(case, torch.float32)
    xs, ws, bs = (t.clone().requires_grad_() for t in (x, w, b))
    y = convgemm.conv3d(xs, ws, bs, **kw)
    dy = torch.randn_like(y)
    y.backward(dy)
    xd, wd, bd = (t.detach().double().cpu().requires_grad_() for t in (x, w, b))
    F.conv3d(xd, wd, bd, **kw).backward(dy.double().cpu())
    for name, got, want in (("x", xs.grad, xd.grad), ("w", ws.grad, wd.grad), ("b", bs.grad, bd.grad)):
        assert_close(got, want, torch.float32, f"grad {name} {case}")


def test_conv3d_unbatched_and_empty_batch():
    x, w, b, kw = _tensors(CASES[0], torch.float32)
    assert_close(convgemm.conv3d(x[0], w, b, **kw), _ref(x[0], w, b, kw), torch.float32, "unbatched")
    y = convgemm.conv3d(x[:0], w, b, **kw)
    assert y.shape == (0, *_ref(x, w, b, kw).shape[1:])


@pytest.mark.parametrize("split_k", [1, 3])
def test_conv3d_wgrad_split_k_is_deterministic(split_k):
    x, w, _, kw = _tensors(CASES[0], torch.float32)
    prob = ConvProblem3d.from_tensors(x, w, None, **kw)
    dy = torch.randn(prob.output_shape, device=DEVICE)
    want = torch.nn.grad.conv3d_weight(x.double().cpu(), w.shape, dy.double().cpu(), **kw)
    outs = []
    for _ in range(2):
        dw = torch.full(tuple(w.shape), float("nan"), device=DEVICE)
        k3.wgrad(prob, x, dy, dw, replace(k3.wgrad_config(prob), split_k=split_k))
        assert_close(dw, want, torch.float32, f"split_k={split_k}")
        outs.append(dw)
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize(
    "n,c_in,size,c_out,k,stride,padding,output_padding,groups,dilation",
    [
        (2, 4, (3, 4, 5), 3, (3, 2, 3), 2, 1, 1, 1, 1),
        (1, 6, (2, 3, 3), 4, (2, 3, 2), (1, 2, 3), (0, 1, 1), (0, 1, 2), 2, 1),
        (1, 3, (3, 3, 3), 2, 3, 1, 0, 0, 1, 2),
    ],
)
def test_conv_transpose3d_matches_torch(n, c_in, size, c_out, k, stride, padding, output_padding, groups, dilation):
    ks = (k, k, k) if isinstance(k, int) else k
    x = torch.randn(n, c_in, *size, device=DEVICE, requires_grad=True)
    w = torch.randn(c_in, c_out // groups, *ks, device=DEVICE, requires_grad=True)
    b = torch.randn(c_out, device=DEVICE)
    y = convgemm.conv_transpose3d(x, w, b, stride, padding, output_padding, groups, dilation)
    xd, wd = x.detach().double().cpu().requires_grad_(), w.detach().double().cpu().requires_grad_()
    ref = F.conv_transpose3d(xd, wd, b.double().cpu(), stride, padding, output_padding, groups, dilation)
    assert y.shape == ref.shape
    assert_close(y, ref, torch.float32, "conv_transpose3d")
    dy = torch.randn_like(y)
    y.backward(dy)
    ref.backward(dy.double().cpu())
    assert_close(x.grad, xd.grad, torch.float32, "conv_transpose3d dx")
    assert_close(w.grad, wd.grad, torch.float32, "conv_transpose3d dw")


def test_conv3d_ops_pass_opcheck():
    x, w, b, _ = _tensors(CASES[1], torch.float32)
    args = ([2, 1, 2], [1, 0, 1, 1, 0, 1], [1, 1, 1], 2)
    torch.library.opcheck(torch.ops.convgemm.conv3d, (x, w, b, *args))
    y = torch.ops.convgemm.conv3d(x, w, b, *args)
    dy = torch.randn_like(y)
    torch.library.opcheck(torch.ops.convgemm.conv3d_input, (list(x.shape), w, dy, *args))
    torch.library.opcheck(torch.ops.convgemm.conv3d_weight, (x, list(w.shape), dy, *args))


def test_conv3d_under_torch_compile_fullgraph():
    torch._dynamo.reset()
    x, w, b, kw = _tensors(CASES[0], torch.float32)
    w.requires_grad_()

    def f(x, w, b):
        return convgemm.conv3d(x, w, b, **kw).relu().sum()

    loss = torch.compile(f, fullgraph=True, backend="aot_eager")(x, w, b)
    loss.backward()
    wd = w.detach().double().cpu().requires_grad_()
    ref = F.conv3d(x.double().cpu(), wd, b.double().cpu(), **kw).relu().sum()
    ref.backward()
    assert_close(loss.reshape(1), ref.reshape(1), torch.float32, "compiled loss")
    assert_close(w.grad, wd.grad, torch.float32, "compiled dw")


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (
            lambda: convgemm.conv3d(torch.randn(3, 4, 5), torch.randn(4, 3, 3, 3, 3)),
            ValueError,
            r"input must be 5-D",
        ),  # fmt: skip
        (
            lambda: convgemm.conv3d(torch.randn(1, 2, 3, 4, 5, 6), torch.randn(4, 2, 1, 1, 1)),
            ValueError,
            r"input must be 5-D",
        ),  # fmt: skip
        (
            lambda: convgemm.conv3d(torch.randn(1, 3, 4, 4, 4), torch.randn(4, 3, 3, 3)),
            ValueError,
            r"weight must be 5-D",
        ),  # fmt: skip
        (
            lambda: convgemm.conv3d(torch.randn(1, 4, 4, 4, 4), torch.randn(4, 3, 1, 1, 1)),
            ValueError,
            r"weight.shape\[1\] = 3 must be C/groups",
        ),  # fmt: skip
        (
            lambda: convgemm.conv3d(torch.randn(1, 4, 4, 4, 4), torch.randn(4, 4, 1, 1, 1), stride=0),
            ValueError,
            r"stride must be >= 1",
        ),  # fmt: skip
        (
            lambda: convgemm.conv3d(torch.randn(1, 4, 4, 4, 4), torch.randn(4, 4, 1, 1, 1), padding=(1, 1)),
            TypeError,
            r"padding must be an int or a triple",
        ),  # fmt: skip
        (
            lambda: convgemm.conv3d(torch.randn(1, 4, 4, 4, 4), torch.randn(4, 4, 3, 3, 3), padding="same", stride=2),
            ValueError,
            r"'same' is not supported for strided",
        ),  # fmt: skip
        (
            lambda: convgemm.conv3d(torch.randn(1, 4, 2, 4, 4), torch.randn(4, 4, 3, 3, 3)),
            ValueError,
            r"output would be empty",
        ),  # fmt: skip
        (
            lambda: convgemm.conv3d(torch.randn(1, 4, 4, 4, 4), torch.randn(4, 4, 1, 1, 1).double()),
            TypeError,
            r"input is torch.float32",
        ),  # fmt: skip
        (
            lambda: convgemm.conv3d(torch.randn(1, 4, 4, 4, 4), torch.randn(4, 4, 1, 1, 1), torch.randn(5)),
            ValueError,
            r"bias must have shape \[4\]",
        ),  # fmt: skip
        (
            lambda: convgemm.conv3d(torch.randn(1, 4, 4, 4, 4).int(), torch.randn(4, 4, 1, 1, 1).int()),
            TypeError,
            r"dtype torch.int32",
        ),  # fmt: skip
        (
            lambda: convgemm.conv_transpose3d(
                torch.randn(1, 4, 3, 3, 3), torch.randn(4, 2, 3, 3, 3), stride=2, output_padding=2
            ),
            ValueError,
            r"output_padding",
        ),  # fmt: skip
    ],
)
def test_conv3d_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv3d_module_and_patch(padding_mode):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv3d(3, 6, 3, padding=1, padding_mode=padding_mode),
        nn.ReLU(),
        nn.ConvTranspose3d(6, 2, (2, 3, 2), stride=(2, 1, 2)),
    ).to(DEVICE)
    x = torch.randn(1, 3, 4, 5, 4, device=DEVICE)
    with torch.no_grad():
        want = model.double().cpu()(x.double().cpu())
    model.float().to(DEVICE)
    convgemm.patch(model)
    assert type(model[0]) is convgemm.nn.Conv3d and type(model[2]) is convgemm.nn.ConvTranspose3d
    with torch.no_grad():
        assert_close(model(x), want, torch.float32, f"patched 3-D model, {padding_mode}")
    convgemm.unpatch(model)
    assert type(model[0]) is nn.Conv3d


@pytest.mark.parametrize(
    "case",
    [
        (2, 16, 4, 5, 6, 24, 3, 3, 3, 1, 1, 1, 1),
        (1, 8, 5, 4, 7, 16, 3, 1, 1, 1, (1, 0, 0), 1, 1),  # temporal 3x1x1
        (1, 24, 3, 6, 5, 8, 1, 3, 3, 1, (0, 2, 2), 2, 1),  # dilated, channels not a tile multiple
        (2, 16, 3, 4, 4, 40, 1, 1, 1, 1, 0, 1, 1),  # 1x1x1
    ],
    ids=str,
)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_conv3d_tma_forward(case, dtype):
    """Dense stride-1 layers take the 5-D TMA kernel (where the device has TMA: the interpreter does)."""
    x, w, b, kw = _tensors(case, dtype, channels_last=True)
    prob = ConvProblem3d.from_tensors(x, w, b, **kw)
    if k3.tma_supports(prob, x) is not None:
        pytest.skip(k3.tma_supports(prob, x))
    y = torch.full(prob.output_shape, float("nan"), device=DEVICE, dtype=dtype)
    k3.forward_tma(prob, x, w, b, y)
    assert_close(y, _ref(x, w, b, kw), dtype, f"forward_tma {case}")
    assert_close(convgemm.conv3d(x, w, b, **kw), _ref(x, w, b, kw), dtype, "conv3d")


def test_conv3d_tma_refuses_what_it_cannot_take():
    x, w, b, kw = _tensors(CASES[1], torch.float16, channels_last=True)  # grouped, strided
    assert k3.tma_supports(ConvProblem3d.from_tensors(x, w, b, **kw), x) is not None
    x, w, b, kw = _tensors((1, 6, 3, 4, 4, 8, 1, 1, 1, 1, 0, 1, 1), torch.float16, channels_last=True)
    assert "aligned" in k3.tma_supports(ConvProblem3d.from_tensors(x, w, b, **kw), x)  # 12-byte pixels
    x, w, b, kw = _tensors(CASES[0], torch.float32, channels_last=True)
    assert "fp16 or bf16" in k3.tma_supports(ConvProblem3d.from_tensors(x, w, b, **kw), x)  # fp32: gather
    # strided: the stride-phase view needs H and W multiples of the stride, a dense NDHWC input
    # and C a multiple of 16
    for case, dense, why in (
        ((1, 16, 3, 5, 6, 8, 3, 3, 3, 2, 1, 1, 1), True, "multiples of the stride"),
        ((1, 16, 3, 6, 6, 8, 3, 3, 3, 2, 1, 1, 1), False, "dense channels_last_3d"),
        ((1, 24, 3, 6, 6, 8, 3, 3, 3, 2, 1, 1, 1), True, "multiple of 16"),
    ):
        x, w, b, kw = _tensors(case, torch.float16, channels_last=True)
        if not dense:  # a channel slice: channels_last_3d strides, but pixels 32 channels apart
            x = _tensors((1, 32, *case[2:]), torch.float16, channels_last=True)[0][:, :16]
        reason = k3.tma_supports(ConvProblem3d.from_tensors(x, w, b, **kw), x)
        assert reason is not None and why in reason, reason


# ---------------------------------------------------------------- forward algorithms and the tuner
def _forced(algo, case, dtype, cfgs):
    """Run ``algo`` with every config of ``cfgs`` on ``case`` against the float64 reference."""
    x, w, b, kw = _tensors(case, dtype, channels_last=True)
    prob = ConvProblem3d.from_tensors(x, w, b, **kw)
    prob = replace(prob, **k3.input_flags(x, prob.stride))
    assert algo.supports(prob) is None, algo.supports(prob)
    assert cfgs, "no candidate configs"
    want = _ref(x, w, b, kw)
    for cfg in cfgs:
        y = torch.full(prob.output_shape, float("nan"), device=DEVICE, dtype=dtype)
        algo.run(prob, x, w, b, y, cfg)
        assert_close(y, want, dtype, f"{algo.name} [{cfg.describe()}] {case}")
    return prob


TMA_CASES = [
    # C = 48: a 16-channel K tile, and the 64-channel one with the channels zero-padded; K = 80:
    # partial 64- and 128-row tiles
    ((1, 48, 3, 5, 6, 80, 3, 3, 3, 1, 1, 1, 1), torch.float16),
    ((1, 64, 4, 3, 5, 64, 3, 1, 1, 1, (1, 0, 0), 1, 1), torch.float16),  # temporal 3x1x1
    ((1, 40, 2, 5, 3, 24, 1, 3, 3, 1, (0, 1, 1), 1, 1), torch.float16),  # spatial 1x3x3
    # strided, through the stride-phase view (one output depth per tile): stride 2 everywhere with
    # an odd depth (depth needs no phase: its padding is a box moved out of bounds); a temporal
    # stride only; a dilated 1x3x3 with stride 2 in H and W and a 16-channel K tile
    ((2, 32, 5, 6, 8, 24, 3, 3, 3, 2, 1, 1, 1), torch.float16),
    ((1, 64, 5, 3, 4, 16, 3, 1, 1, (2, 1, 1), (1, 0, 0), 1, 1), torch.float16),
    ((1, 16, 3, 8, 6, 32, 1, 3, 3, (1, 2, 2), (0, 2, 1), (1, 2, 1), 1), torch.float16),
    # strided with the depth a multiple of the depth stride: the phase-grid view (tiles many
    # depths deep; padded depths and rows out of bounds on their own axes); mixed strides; a
    # dilated depth
    ((2, 32, 6, 6, 8, 24, 3, 3, 3, 2, 1, 1, 1), torch.float16),
    ((1, 32, 4, 8, 8, 16, 3, 3, 3, (2, 1, 2), (1, 1, 0), 1, 1), torch.float16),
    ((1, 32, 8, 6, 6, 32, 3, 3, 3, 2, (2, 1, 1), (2, 1, 1), 1), torch.float16),
]


@pytest.mark.parametrize("case,dtype", TMA_CASES, ids=str)
def test_conv3d_tma_every_candidate_config(case, dtype):
    """Every config ``conv3d_tma`` offers the tuner on an H200 (132 SMs: split-K for these few
    tiles) and on a 1-SM device (persistent configs), forced, under the interpreter."""
    x, w, b, kw = _tensors(case, dtype, channels_last=True)
    prob = ConvProblem3d.from_tensors(x, w, b, **kw)
    prob = replace(prob, **{**k3.input_flags(x, prob.stride), "tma_input_ok": True})
    if prob.stride != (1, 1, 1):
        assert prob.input_phases_ok
    cfgs = list(dict.fromkeys(k3.TMA3D.candidates(prob, 132) + k3.TMA3D.candidates(prob, 1)))
    if k3.TMA3D.grid(prob):  # the phase-grid view: some tiles several depths deep
        assert any(c.tile_n > 1 for c in cfgs), cfgs
    if case == TMA_CASES[0][0]:
        kinds = {(c.split_k > 1, c.persistent > 0) for c in cfgs}
        assert {(False, False), (True, False), (False, True)} <= kinds, kinds
        assert {c.block_k for c in cfgs} == {16, 64}  # the divisor and the padded 128-byte tile
    _forced(k3.TMA3D, case, dtype, interpreter_subset(cfgs, 3))


# thin volumes, tiles one output depth deep: depth taps that read only padding are skipped
# (loaders3d.depth_k_range); N, C, D, H, W, K, T, R, S, stride, padding, dilation, groups
THIN_CASES = [
    (2, 32, 2, 5, 6, 48, 3, 3, 3, 1, 1, 1, 1),  # r3d-18's last layer in small: 2 of 3 taps per frame
    (1, 32, 1, 4, 5, 32, 3, 3, 3, 1, 1, 1, 1),  # one frame: only the middle tap
    (1, 32, 1, 4, 4, 32, 3, 1, 1, 1, (2, 0, 0), 1, 1),  # pad 2: each output depth has one tap
    (1, 32, 3, 4, 4, 32, 3, 3, 1, 1, (2, 1, 0), (2, 1, 1), 1),  # dilation 2 in depth
    (1, 32, 1, 4, 4, 32, 1, 3, 3, 1, (1, 1, 1), 1, 1),  # output depths 0 and 2: no tap at all (bias)
    (1, 32, 3, 4, 6, 32, 3, 3, 3, 2, (2, 1, 1), 1, 1),  # strided (the phase loader): depths 0, 2 skip
    (1, 32, 2, 4, 6, 32, 3, 3, 3, 2, (2, 1, 1), 1, 1),  # strided, even depth (the phase-grid loader)
]


@pytest.mark.parametrize("case", THIN_CASES, ids=str)
def test_conv3d_tma_skips_depth_taps_of_padding(case):
    """``conv3d_tma``'s tiles one output depth deep, with and without split-K (splits of the
    shortened K range, some of them empty), against float64: what the skipped taps would have
    added is zero, and nothing else is skipped."""
    x, w, b, kw = _tensors(case, torch.float16, channels_last=True)
    prob = ConvProblem3d.from_tensors(x, w, b, **kw)
    prob = replace(prob, **{**k3.input_flags(x, prob.stride), "tma_input_ok": True})
    base = k3.TMA3D.default_config(prob)
    tiles = [t for t in k3.spatial_tiles3(prob, base.block_n) if t[1] == 1]
    _, td, th, tw = tiles[0]
    cfgs = [replace(base, tile_n=td, tile_h=th, tile_w=tw, split_k=sk, persistent=0, stream_k=0) for sk in (1, 2, 5)]
    _forced(k3.TMA3D, case, torch.float16, cfgs)


@triton.jit
def _depth_k_range_kernel(a_ptr, e_ptr, d_ptr, dd_ptr, t_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    # one K tile per depth tap: the K range is the tap range
    lo, hi = depth_k_range(tl.load(a_ptr + i), tl.load(e_ptr + i), tl.load(d_ptr + i), tl.load(dd_ptr + i), 1,
                           tl.load(t_ptr + i))  # fmt: skip
    tl.store(out_ptr + 2 * i, lo)
    tl.store(out_ptr + 2 * i + 1, hi)


def test_depth_k_range_matches_brute_force():
    """``loaders3d.depth_k_range`` against enumeration, over negative and positive depths (floor
    division in the interpreter, truncation on the GPU: both must give the same ranges)."""
    rows = [(a, a + span, depth, dd, taps) for a in range(-7, 6) for span in (0, 1, 3) for depth in (1, 2, 5)
            for dd in (1, 2, 3) for taps in (1, 3, 4)]  # fmt: skip
    n = triton.next_power_of_2(len(rows))
    rows += [rows[0]] * (n - len(rows))
    cols = [torch.tensor(c, dtype=torch.int32, device=DEVICE) for c in zip(*rows, strict=True)]
    out = torch.empty(2 * n, dtype=torch.int32, device=DEVICE)
    _depth_k_range_kernel[(1,)](*cols, out, N=n)
    got = out.view(-1, 2).cpu().tolist()
    for (a, e, depth, dd, taps), (lo, hi) in zip(rows, got, strict=True):
        valid = [t for t in range(taps) if any(0 <= z + t * dd < depth for z in range(a, e + 1))]
        want = (valid[0], valid[-1] + 1) if valid else None
        assert (lo, hi) == want or (want is None and lo == hi), ((a, e, depth, dd, taps), (lo, hi), want)


@pytest.mark.parametrize(
    "case,programs",
    [
        # 2 x 4 output tiles of 27 K tiles: 3 programs split some tiles in two; 5 and 7 split
        # tiles in three and start and end programs mid-tile; 216 programs take one K tile each
        ((1, 32, 3, 5, 6, 48, 3, 3, 3, 1, 1, 1, 1), 3),
        ((1, 32, 3, 5, 6, 48, 3, 3, 3, 1, 1, 1, 1), 5),
        ((1, 32, 3, 5, 6, 48, 3, 3, 3, 1, 1, 1, 1), 7),
        ((1, 32, 3, 5, 6, 48, 3, 3, 3, 1, 1, 1, 1), 216),
        ((2, 32, 5, 6, 8, 24, 3, 3, 3, 2, 1, 1, 1), 4),  # strided: the stride-phase loader
    ],
    ids=str,
)
def test_conv3d_tma_stream_k(case, programs):
    """``conv3d_tma`` in stream-K form (``matmul.blocks.stream_k_gemm_kernel``): the K iterations
    of all output tiles split evenly over ``programs`` programs (under the interpreter the SM count
    is 1, so ``stream_k`` is the program count), partial tiles summed by the last to finish. Run
    twice: the tile counters must be left at zero for the next launch."""
    x, w, b, kw = _tensors(case, torch.float16, channels_last=True)
    prob = ConvProblem3d.from_tensors(x, w, b, **kw)
    prob = replace(prob, **k3.input_flags(x, prob.stride))
    cfg = replace(k3.TMA3D.default_config(prob), split_k=1, persistent=0, stream_k=programs)
    want = _ref(x, w, b, kw)
    for attempt in range(2):
        y = torch.full(prob.output_shape, float("nan"), device=DEVICE, dtype=torch.float16)
        k3.TMA3D.run(prob, x, w, b, y, cfg)
        assert_close(y, want, torch.float16, f"stream-K x{programs} run {attempt} {case}")


def test_conv3d_tma_stream_k_candidates_where_waves_are_ragged():
    """On 132 SMs, r3d-18's 256-channel layer on 4x14x14 (224 tiles of 128x64, 56 of 256x128) and
    512-channel layer on 2x7x7 get stream-K forms, one-warpgroup tiles also with two programs per
    SM; a layer whose tiles fill whole waves gets none. None is a tuning candidate (slower on the
    H200, session 19)."""

    def prob(n, c, d, h, w, k):
        return ConvProblem3d(n, c, d, h, w, k, 3, 3, 3, (1, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1), 1,
                             torch.bfloat16, tma_input_ok=True)  # fmt: skip

    for p in (prob(8, 256, 4, 14, 14, 256), prob(8, 512, 2, 7, 7, 512)):
        sk = {(c.block_m, c.block_n, c.stream_k) for c in k3.TMA3D.stream_k_candidates(p, 132)}
        assert {(256, 128, 1), (128, 64, 1), (128, 64, 2), (64, 128, 2)} <= sk, sk
        assert not [c for c in k3.TMA3D.candidates(p, 132) if c.stream_k]
    # 8 x 16 x 32 x 32 pixels in 256-pixel tiles x 64 channels: 1024 tiles, 7.8 waves
    assert not k3.TMA3D.stream_k_candidates(prob(8, 64, 16, 32, 32, 64), 132)


WS_CASES = [
    # C = 48: 16-channel K steps; K = 80: a partial channel tile (the store clips it, the bias is
    # masked); odd sizes: tiles past every edge
    ((1, 48, 3, 5, 7, 80, 3, 3, 3, 1, 1, 1, 1), torch.bfloat16),
    ((2, 64, 4, 6, 9, 64, 3, 3, 3, 1, 1, 1, 1), torch.float16),
    ((1, 32, 5, 8, 8, 96, 3, 1, 1, 1, (1, 0, 0), 1, 1), torch.bfloat16),  # temporal 3x1x1
    ((1, 64, 4, 7, 10, 32, 3, 3, 3, 1, "same", (1, 2, 3), 1), torch.bfloat16),  # dilated, 'same'
    ((2, 128, 2, 7, 7, 256, 3, 3, 3, 1, 1, 1, 1), torch.bfloat16),  # 256-channel tiles, tiny volume
    # thin volumes: one-depth tiles skip the depth taps that read only padding (some splits empty)
    ((2, 64, 2, 7, 7, 128, 3, 3, 3, 1, 1, 1, 1), torch.bfloat16),
    ((1, 64, 1, 6, 6, 64, 3, 3, 3, 1, (2, 1, 1), 1, 1), torch.bfloat16),  # pad 2: one tap per depth
    ((1, 64, 1, 6, 6, 64, 1, 3, 3, 1, (1, 1, 1), 1, 1), torch.float16),  # depths 0 and 2: bias alone
    # strided, through the stride-phase view: stride 2 everywhere (an odd depth), H and W only
    ((2, 32, 5, 6, 8, 48, 3, 3, 3, 2, 1, 1, 1), torch.bfloat16),
    ((1, 64, 3, 8, 6, 32, 1, 3, 3, (1, 2, 2), (0, 1, 1), 1, 1), torch.float16),
    # strided with the depth a multiple of the depth stride: the phase-grid view, tiles many depths
    # deep (padded depths and rows out of bounds on their own axes); mixed strides; a dilated depth
    ((2, 32, 6, 6, 8, 48, 3, 3, 3, 2, 1, 1, 1), torch.bfloat16),
    ((1, 64, 4, 8, 8, 32, 3, 3, 3, (2, 1, 2), (1, 1, 0), 1, 1), torch.float16),
    ((1, 32, 8, 6, 6, 64, 3, 3, 3, 2, (2, 1, 1), (2, 1, 1), 1), torch.bfloat16),
]


@pytest.mark.gpu
@pytest.mark.parametrize("case,dtype", WS_CASES, ids=str)
def test_conv3d_ws_every_candidate_config(case, dtype):
    """``conv3d_ws`` (the warp-specialized Gluon kernel) with every config it offers on a
    132-SM GPU and on a 2-SM one (which keeps shapes with few tiles), against float64, with and
    without a bias; twice, as a persistent program reuses its ring and store buffer across tiles."""
    x, w, b, kw = _tensors(case, dtype, channels_last=True)
    prob = ConvProblem3d.from_tensors(x, w, b, **kw)
    prob = replace(prob, **k3.input_flags(x, prob.stride))
    cfgs = list(dict.fromkeys(k3.WS3D.candidates(prob, 132) + k3.WS3D.candidates(prob, 2)))
    _forced(k3.WS3D, case, dtype, cfgs)
    want = _ref(x, w, None, kw)
    for cfg in cfgs:
        y = torch.full(prob.output_shape, float("nan"), device=DEVICE, dtype=dtype)
        k3.WS3D.run(prob, x, w, None, y, cfg)
        k3.WS3D.run(prob, x, w, None, y, cfg)
        assert_close(y, want, dtype, f"conv3d_ws [{cfg.describe()}] no bias {case}")


@pytest.mark.gpu
@pytest.mark.parametrize(
    "case",
    # the last: K = 256 and 27 K steps, so the direct forms at their deepest rings (64 x 256 at 5
    # stages, 128 x 128 at 6, 128 x 256 at 4: Ws3d.DIRECT_RING) and split forms are all offered
    [*[WS_CASES[i][0] for i in (0, 2, 6, 9, 11)], (1, 32, 2, 6, 6, 256, 3, 3, 3, 1, 1, 1, 1)],
    ids=str,
)
def test_conv3d_ws_tf32_every_candidate_config(case, tf32_on):
    """fp32 with TF32 on: ``conv3d_ws`` reads fp32 operands as TF32 (32-channel K steps) on dense,
    temporal, thin, stride-phase and phase-grid layers, every config it offers, with a bias,
    against float64 at the TF32 threshold."""
    x, w, b, kw = _tensors(case, torch.float32, channels_last=True)
    prob = ConvProblem3d.from_tensors(x, w, b, **kw)
    prob = replace(prob, **k3.input_flags(x, prob.stride))
    assert prob.precision == "tf32"
    cfgs = list(dict.fromkeys(k3.WS3D.candidates(prob, 132) + k3.WS3D.candidates(prob, 2)))
    assert cfgs and all(c.block_k <= 32 for c in cfgs)
    _forced(k3.WS3D, case, torch.float32, cfgs)


def test_conv3d_ws_phase_grid_tiles():
    """Which strided layers ``conv3d_ws`` reads through the phase-grid view, and that their tiles
    may then be many depths deep: r3d-18's strided layer (28 x 28 outputs per depth) gets whole
    8 x 4 x 4 tiles instead of the phase view's 1 x 4 x 32 (87.5% covered)."""
    assert k3.phase_grid((2, 2, 2), (3, 3, 3), (1, 1, 1), 16)
    assert not k3.phase_grid((2, 2, 2), (3, 3, 3), (1, 1, 1), 5)  # odd depth: the phase view
    assert not k3.phase_grid((1, 2, 2), (1, 3, 3), (0, 1, 1), 8)  # depth_free (2-D layers): the phase view
    assert not k3.phase_grid((1, 1, 1), (3, 3, 3), (1, 1, 1), 8)  # unstrided
    prob = ConvProblem3d(8, 64, 16, 56, 56, 128, 3, 3, 3, (2, 2, 2), (1, 1, 1), (1, 1, 1), (1, 1, 1), 1,
                         torch.bfloat16, tma_input_ok=True, input_phases_ok=True)  # fmt: skip
    tiles = {(c.tile_n, c.tile_h, c.tile_w) for c in k3.WS3D.candidates(prob, 132)}
    assert (8, 4, 4) in tiles, tiles
    odd = replace(prob, d=15)
    assert all(c.tile_n == 1 for c in k3.WS3D.candidates(odd, 132))
    # conv3d_tma reads the same view (loaders3d.tma_im2col3d_grid_*: its CPU tests run the geometry)
    assert k3.TMA3D.grid(prob) and not k3.TMA3D.grid(odd)
    assert (8, 4, 4) in {(c.tile_n, c.tile_h, c.tile_w) for c in k3.TMA3D.candidates(prob, 132)}
    assert all(c.tile_n == 1 for c in k3.TMA3D.candidates(odd, 132))


def test_conv3d_ws_supports_and_candidates():
    """What ``conv3d_ws`` refuses and offers (the kernel itself only runs on a GPU)."""
    from convgemm._runtime import interpreting

    def prob(n, c, d, h, w, k, **kw):
        base = dict(stride=(1, 1, 1), dtype=torch.bfloat16, groups=1)
        base.update(kw)
        return ConvProblem3d(n, c, d, h, w, k, 3, 3, 3, base["stride"], (1, 1, 1), (1, 1, 1), (1, 1, 1),
                             base["groups"], base["dtype"], tma_input_ok=True)  # fmt: skip

    l3 = prob(8, 256, 4, 14, 14, 256)
    if interpreting():
        assert "TRITON_INTERPRET" in k3.WS3D.supports(l3)
    for p, why in ((prob(8, 64, 8, 8, 8, 64, stride=(2, 2, 2)), "stride"), (prob(8, 64, 8, 8, 8, 64, groups=2), "groups"),
                   (prob(8, 64, 8, 8, 8, 64, dtype=torch.float32), "TF32 is off"),
                   (prob(8, 64, 8, 8, 8, 64, dtype=torch.float64), "fp16 or bf16")):  # fmt: skip
        reason = k3.WS3D.supports(p)
        assert reason is not None and (why in reason or "TRITON_INTERPRET" in reason), reason
    # fp32 with TF32 on: TF32 products (refused only where Gluon cannot run)
    tf32 = replace(prob(8, 64, 8, 8, 8, 64, dtype=torch.float32), precision="tf32")
    assert k3.WS3D.supports(tf32) is None or "TRITON_INTERPRET" in k3.WS3D.supports(tf32)
    assert all(c.block_k == 32 for c in k3.WS3D.candidates(replace(l3, dtype=torch.float32, precision="tf32"), 132))
    assert not k3.WS3D.heuristic_ok(l3)
    cands = k3.WS3D.candidates(l3, 132)
    # 64 pixels x 256 channels on one warpgroup; 128 x 256 has 56 tiles, under half of 132 SMs:
    # only split
    assert (64, 256, 4, 1) in {(c.block_m, c.block_n, c.num_warps, c.split_k) for c in cands}
    assert all(c.split_k > 1 for c in cands if (c.block_m, c.block_n) == (128, 256))
    for c in cands:
        assert c.tile_n * c.tile_h * c.tile_w == c.block_m and c.persistent in (1, 2)
        assert c.num_stages * (c.block_m + c.block_n) * c.block_k * 2 + c.block_m * c.block_n * 2 <= 225_000
    # the unsplit 64 x 128 tile takes the deep ring (8 stages, 208 KB with its staging tile); the
    # other tiles at block_k 64 stay at 4 or fewer; in TF32 only the direct 64 x 256 and 128 x 128
    # tiles go deeper (Ws3d.DIRECT_RING: 5 and 6)
    deep = [c for c in cands if c.num_stages > 4]
    assert deep and all((c.block_m, c.block_n, c.split_k, c.num_stages) == (64, 128, 1, 8) for c in deep)
    assert not [c for c in cands if (c.block_m, c.block_n, c.split_k, c.parts) == (64, 128, 1, 0)
                and c.num_stages == 4]  # fmt: skip
    t32 = k3.WS3D.candidates(replace(l3, dtype=torch.float32, precision="tf32"), 132)
    assert all(c.num_stages <= 4 or (c.direct and c.split_k == 1 and c.block_m in (64, 128)) for c in t32)
    assert {(c.block_m, c.block_n, c.num_stages) for c in t32 if c.num_stages > 4} == {(64, 256, 5), (128, 128, 6)}
    # 96 channels (block_k 32): the unsplit 128 x 128 tile takes the deep ring too (160 KB at 8
    # stages); its split forms keep 4
    c96 = k3.WS3D.candidates(prob(8, 96, 4, 24, 24, 256), 132)
    assert {c.block_k for c in c96} == {32}
    sq = [c for c in c96 if (c.block_m, c.block_n) == (128, 128)]
    assert sq and all(c.num_stages == (8 if c.split_k == 1 else 4) for c in sq)
    assert any(c.split_k == 1 for c in sq)
    # r3d-18's 2x7x7 layer: too few tiles for one per SM, so only split-K forms, each split with
    # K steps (27 taps x 8 channel steps = 216)
    l4 = k3.WS3D.candidates(prob(8, 512, 2, 7, 7, 512), 132)
    assert l4 and all(c.split_k > 1 and (c.split_k - 1) * -(-216 // c.split_k) < 216 for c in l4)
    # strided, an odd depth: tiles one output depth deep (the stride-phase view; an even depth
    # takes the phase-grid view, test_conv3d_ws_phase_grid_tiles)
    s2 = prob(8, 64, 15, 56, 56, 128, stride=(2, 2, 2))
    assert all(c.tile_n == 1 for c in k3.WS3D.candidates(replace(s2, input_phases_ok=True), 132))


@pytest.mark.gpu
@pytest.mark.parametrize(
    "shape,dtype",
    [
        ((2, 64, 9, 11, 96, 3, 3, 1, 1), torch.bfloat16),  # odd sizes, K = 96: a partial channel tile
        ((1, 128, 14, 14, 256, 3, 3, 1, 2), torch.float16),  # dilated
        ((3, 32, 8, 8, 64, 1, 1, 0, 1), torch.bfloat16),  # 1x1
        ((1, 48, 7, 20, 32, 5, 5, 2, 1), torch.bfloat16),  # 5x5, C = 48 (16-channel K steps)
    ],
    ids=str,
)
@pytest.mark.parametrize("activation", [None, "relu"])
def test_implicit_gemm_ws_2d(shape, dtype, activation):
    """``implicit_gemm_ws`` (the Gluon kernel on a 2-D layer, the batch as depth): forced through
    ``conv2d``, and every config it offers on 132 SMs and on 2, against float64, with the fused
    ReLU."""
    from convgemm.conv.fprop import ALGORITHMS
    from convgemm.conv.layout import tma_aligned
    from convgemm.problem import ConvProblem

    n, c, h, w, k, r, s, pad, dil = shape
    x = torch.randn(n, c, h, w, device=DEVICE).to(dtype).contiguous(memory_format=torch.channels_last)
    wt = (torch.randn(k, c, r, s, device=DEVICE) / (c * r * s) ** 0.5).to(dtype)
    b = torch.randn(k, device=DEVICE).to(dtype)
    want = F.conv2d(x.double().cpu(), wt.double().cpu(), b.double().cpu(), padding=pad, dilation=dil)
    if activation:
        want = want.clamp_min(0)
    y = convgemm.conv2d(x, wt, b, padding=pad, dilation=dil, activation=activation, algorithm="implicit_gemm_ws")
    assert_close(y, want, dtype, f"implicit_gemm_ws via conv2d {shape}")
    algo = ALGORITHMS["implicit_gemm_ws"]
    prob = ConvProblem.from_tensors(x, wt, b, padding=pad, dilation=dil)
    prob = replace(prob, tma_ok=True, input_tma_ok=tma_aligned(x, prob.cg), activation=activation or "")
    assert algo.supports(prob) is None, algo.supports(prob)
    p3 = algo.as_3d(prob)
    cfgs = list(dict.fromkeys(k3.WS3D.candidates(p3, 132) + k3.WS3D.candidates(p3, 2)))
    assert cfgs
    for cfg in cfgs:
        y = torch.full(want.shape, float("nan"), device=DEVICE, dtype=dtype).contiguous(
            memory_format=torch.channels_last
        )
        algo.run(prob, x, wt, b, y, cfg)
        assert_close(y, want, dtype, f"implicit_gemm_ws [{cfg.describe()}] {shape}")


@pytest.mark.gpu
@pytest.mark.parametrize(
    "shape,dtype",
    [
        ((4, 64, 14, 14, 128, 3, 3, 2, 1), torch.bfloat16),  # 7x7 outputs: boxes of several images
        ((3, 128, 16, 16, 64, 1, 1, 2, 0), torch.float16),  # a strided 1x1 shortcut
        ((2, 64, 12, 20, 96, 3, 3, (2, 1), 1), torch.bfloat16),  # stride 2 along H only, K = 96
        ((2, 32, 10, 10, 64, 5, 5, 2, 2), torch.bfloat16),  # 5x5, stride 2
    ],
    ids=str,
)
def test_implicit_gemm_ws_strided_2d(shape, dtype):
    """``implicit_gemm_ws`` on strided 2-D layers (the stride-phase view, boxes of ``tile_n``
    images): forced through ``conv2d`` with a ReLU, and every config it offers, against float64."""
    from convgemm.conv.fprop import ALGORITHMS
    from convgemm.conv.layout import tma_aligned
    from convgemm.problem import ConvProblem

    n, c, h, w, k, r, s, stride, pad = shape
    x = torch.randn(n, c, h, w, device=DEVICE).to(dtype).contiguous(memory_format=torch.channels_last)
    wt = (torch.randn(k, c, r, s, device=DEVICE) / (c * r * s) ** 0.5).to(dtype)
    b = torch.randn(k, device=DEVICE).to(dtype)
    want = F.conv2d(x.double().cpu(), wt.double().cpu(), b.double().cpu(), stride=stride, padding=pad)
    y = convgemm.conv2d(x, wt, b, stride=stride, padding=pad, activation="relu", algorithm="implicit_gemm_ws")
    assert_close(y, want.clamp_min(0), dtype, f"implicit_gemm_ws strided via conv2d {shape}")
    algo = ALGORITHMS["implicit_gemm_ws"]
    prob = ConvProblem.from_tensors(x, wt, b, stride=stride, padding=pad)
    prob = replace(prob, tma_ok=True, input_tma_ok=tma_aligned(x, prob.cg), input_phases_ok=True)
    assert algo.supports(prob) is None, algo.supports(prob)
    p3 = algo.as_3d(prob)
    cfgs = list(dict.fromkeys(k3.WS3D.candidates(p3, 132) + k3.WS3D.candidates(p3, 2)))
    assert cfgs
    if prob.p == 7:
        assert any(c.tile_n > 1 for c in cfgs), "7x7 outputs: boxes of several images"
    for cfg in cfgs:
        y = torch.full(want.shape, float("nan"), device=DEVICE, dtype=dtype).contiguous(
            memory_format=torch.channels_last
        )
        algo.run(prob, x, wt, b, y, cfg)
        assert_close(y, want, dtype, f"implicit_gemm_ws [{cfg.describe()}] {shape}")


@pytest.mark.parametrize(
    "shape",
    [(2, 16, 5, 7, 24, 3, 3, 1, 1), (3, 32, 6, 4, 16, 3, 1, (1, 0), (2, 1)), (1, 16, 4, 9, 32, 1, 5, (0, 2), 1)],
    ids=str,
)
def test_implicit_gemm_ws_3d_view(shape):
    """``implicit_gemm_ws`` runs a 2-D layer as the 3-D problem ``as_3d`` on the views
    ``view_3d`` (the batch as depth, a 1 x R x S filter): that mapping, checked under the
    interpreter by running the same 3-D problem and views through ``conv3d_tma`` (the Gluon kernel
    itself is GPU-only), against float64."""
    from convgemm.conv.fprop import ALGORITHMS
    from convgemm.conv.layout import tma_aligned
    from convgemm.problem import ConvProblem

    n, c, h, w, k, r, s, pad, dil = shape
    x = torch.randn(n, c, h, w, device=DEVICE).to(torch.float16).contiguous(memory_format=torch.channels_last)
    wt = torch.randn(k, c, r, s, device=DEVICE).to(torch.float16)
    b = torch.randn(k, device=DEVICE).to(torch.float16)
    want = F.conv2d(x.double().cpu(), wt.double().cpu(), b.double().cpu(), padding=pad, dilation=dil)
    algo = ALGORITHMS["implicit_gemm_ws"]
    prob = replace(ConvProblem.from_tensors(x, wt, b, padding=pad, dilation=dil), tma_ok=True,
                   input_tma_ok=tma_aligned(x, c))  # fmt: skip
    p3 = algo.as_3d(prob)
    assert (p3.n, p3.d, p3.t, p3.od, p3.p, p3.q) == (1, n, 1, n, prob.p, prob.q)
    y = torch.full(want.shape, float("nan"), device=DEVICE, dtype=torch.float16)
    y = y.contiguous(memory_format=torch.channels_last)
    k3.TMA3D.run(p3, algo.view_3d(x), wt.unsqueeze(2), b, algo.view_3d(y), k3.TMA3D.default_config(p3))
    assert_close(y, want, torch.float16, f"conv3d_tma on implicit_gemm_ws's view {shape}")


@pytest.mark.parametrize("act", ["", "relu"])
def test_conv3d_ws_split_finish_kernel(act):
    """The second kernel of conv3d_ws's split-K (plain Triton, so it runs under the interpreter):
    each tile's partials summed in split order, the bias added, pixels past the output's edges
    (tiles of 2x4x4 over a 3x5x6 output) and channels past K (a 32-channel tile for K = 24) left
    alone, into a strided channels_last_3d output."""
    from convgemm.conv.ws3d import ws_split_finish_kernel

    n, k, od, p, q, split, td, th, tw, bn = 2, 24, 3, 5, 6, 3, 2, 4, 4, 32
    tiles_n = 1
    tiles = tiles_n * n * (-(-od // td)) * (-(-p // th)) * (-(-q // tw))
    bp = td * th * tw
    ws = torch.randn(tiles, split, bp, bn, device=DEVICE)
    bias = torch.randn(k, device=DEVICE).to(torch.bfloat16)
    y = torch.full((n, k, od, p, q), 7.0, device=DEVICE).to(torch.bfloat16).contiguous(memory_format=_CL3)
    ws_split_finish_kernel[(tiles, bp // 16)](
        ws, y, bias, k, tiles_n, od, p, q, y.stride(0), y.stride(2), y.stride(3), y.stride(4), SPLIT=split, TD=td,
        TH=th, TW=tw, BN=bn, SUB=16, HAS_BIAS=True, ACT=act,
    )  # fmt: skip
    want = torch.empty(n, k, od, p, q)
    total = ws.sum(1).cpu()  # [tiles, bp, bn]
    tile = 0
    for img in range(n):
        for d0 in range(0, od, td):
            for h0 in range(0, p, th):
                for w0 in range(0, q, tw):
                    for i in range(bp):
                        d, h, w = d0 + i // (th * tw), h0 + (i // tw) % th, w0 + i % tw
                        if d < od and h < p and w < q:
                            want[img, :, d, h, w] = total[tile, i, :k] + bias.float().cpu()
                    tile += 1
    if act == "relu":
        want = want.clamp_min(0)
    assert_close(y, want.double(), torch.bfloat16, f"split finish act={act!r}")


@pytest.mark.parametrize(
    "algo,case",
    [
        ("conv3d_gather", (1, 40, 3, 4, 5, 72, 3, 3, 3, (1, 2, 1), 1, 1, 1)),
        ("conv3d_small_k", (1, 3, 4, 9, 8, 24, 3, 7, 7, (1, 2, 2), (1, 3, 3), 1, 1)),  # an RGB stem
    ],
    ids=str,
)
def test_conv3d_gather_every_candidate_config(algo, case):
    a = k3.ALGORITHMS3D[algo]
    x, w, b, kw = _tensors(case, torch.float16, channels_last=True)
    prob = ConvProblem3d.from_tensors(x, w, b, **kw)
    _forced(a, case, torch.float16, interpreter_subset(a.candidates(prob), 2) + [a.default_config(prob)])


@pytest.mark.parametrize(
    "case",
    [
        (1, 3, 4, 9, 8, 24, 3, 7, 7, (1, 2, 2), (1, 3, 3), 1, 1),  # an RGB stem; 9 rows rounded up to 10
        (2, 2, 3, 6, 7, 16, 1, 3, 5, 1, (0, 1, 2), (1, 1, 2), 1),  # stride 1, dilated columns
        (1, 3, 5, 6, 6, 16, 3, 3, 3, (2, 1, 1), 1, 1, 1),  # a temporal stride only
    ],
    ids=str,
)
@pytest.mark.parametrize("channels_last", [True, False])
def test_conv3d_width_unfold(case, channels_last):
    """``conv3d_width_unfold`` (each output column's S taps gathered into one wide pixel, then a
    T x R x 1 convolution on ``conv3d_tma``) against the float64 reference, with its default and
    the TMA kernel's H200 candidates for the reduced problem."""
    x, w, b, kw = _tensors(case, torch.float16, channels_last=channels_last)
    prob = ConvProblem3d.from_tensors(x, w, b, **kw)
    prob = replace(prob, **k3.input_flags(x, prob.stride))
    algo = k3.ALGORITHMS3D["conv3d_width_unfold"]
    assert algo.supports(prob) is None, algo.supports(prob)
    cfgs = [algo.default_config(prob)]
    if channels_last:
        cfgs += k3.TMA3D.candidates(algo.reduced(prob), 132)[:3]
    want = _ref(x, w, b, kw)
    for cfg in cfgs:
        y = torch.full(prob.output_shape, float("nan"), device=DEVICE, dtype=torch.float16)
        algo.run(prob, x, w, b, y, cfg)
        assert_close(y, want, torch.float16, f"conv3d_width_unfold [{cfg.describe()}] {case}")


def test_conv3d_width_unfold_refuses():
    algo = k3.ALGORITHMS3D["conv3d_width_unfold"]
    for case, why in (
        ((1, 4, 3, 6, 6, 16, 3, 3, 3, 1, 1, 1, 2), "groups"),
        ((1, 3, 3, 6, 6, 16, 3, 3, 1, 1, 1, 1, 1), "one column"),
        ((1, 8, 3, 6, 12, 16, 3, 3, 9, 1, 1, 1, 1), "over 64"),
        ((1, 3, 3, 6, 6, 12, 3, 3, 3, 1, 1, 1, 1), "16 bytes"),  # K = 12: the TMA output store
    ):
        x, w, b, kw = _tensors(case, torch.float16, channels_last=True)
        prob = ConvProblem3d.from_tensors(x, w, b, **kw)
        reason = algo.supports(replace(prob, **k3.input_flags(x, prob.stride)))
        assert reason is not None and why in reason, reason
    x, w, b, kw = _tensors((1, 3, 3, 6, 6, 16, 3, 3, 3, 1, 1, 1, 1), torch.float32, channels_last=True)
    prob = ConvProblem3d.from_tensors(x, w, b, **kw)
    assert "fp16 or bf16" in algo.supports(replace(prob, **k3.input_flags(x, prob.stride)))


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # numpy's Inf - Inf, the point of the test
def test_conv3d_small_k_masks_padding_taps_on_both_sides():
    """The flat reduction's last tile runs past T*R*S*C: an Inf in x must not meet a zero weight."""
    x, w, b, kw = _tensors((1, 3, 3, 5, 5, 8, 3, 3, 3, 1, 1, 1, 1), torch.float32)
    x[0, :, 1, 2, 2] = float("inf")
    prob = ConvProblem3d.from_tensors(x, w, b, **kw)
    y = torch.empty(prob.output_shape, device=DEVICE)
    k3.SMALL_K.run(prob, x.contiguous(memory_format=torch.channels_last_3d), w, b, y, k3.SMALL_K.default_config(prob))
    want = _ref(x, w, b, kw)
    assert torch.equal(torch.isnan(y.cpu()), torch.isnan(want)) and torch.equal(torch.isinf(y.cpu()), torch.isinf(want))


@pytest.fixture
def fresh_tuner(monkeypatch, tmp_path):
    from convgemm import functional3d
    from convgemm.tune import cache as tc

    monkeypatch.setenv("CONVGEMM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tc, "_warned", set())
    functional3d.clear_plans3d()
    yield
    functional3d.clear_plans3d()


def test_conv3d_tuner_choice_is_cached_and_used(fresh_tuner, monkeypatch):
    """With tuning on, ``choose`` times the candidates once (here a fake timer picks a split-K TMA
    config), stores the winner on disk under a 3-D key, and ``conv3d`` runs that choice."""
    from convgemm.functional3d import conv3d_algorithm
    from convgemm.tune import autotune as at
    from convgemm.tune import cache as tc

    case = (1, 16, 4, 5, 6, 24, 3, 3, 3, 1, 1, 1, 1)
    x, w, b, kw = _tensors(case, torch.float16, channels_last=True)
    calls = []

    def fake_tune(prob, candidates, x, w, bias, y):
        calls.append([a.name for a in candidates])
        cfg = replace(k3.TMA3D.default_config(prob), split_k=3)
        return k3.TMA3D, cfg, 7.0

    monkeypatch.setattr(at, "autotune_enabled", lambda: True)
    monkeypatch.setattr(at, "_tune", fake_tune)
    name, cfg = conv3d_algorithm(x, w, b, **kw)
    prob0 = replace(ConvProblem3d.from_tensors(x, w, b, **kw), **k3.input_flags(x, (1, 1, 1)))
    ws = ["conv3d_ws"] if k3.WS3D.supports(prob0) is None else []  # on a Hopper GPU
    assert (name, cfg.split_k) == ("conv3d_tma", 3) and calls == [
        ["conv3d_tma", *ws, "conv3d_width_unfold", "conv3d_small_k", "conv3d_gather"]
    ]
    entries = tc.TuneCache()
    assert len(entries) == 1
    prob = replace(ConvProblem3d.from_tensors(x, w, b, **kw), tma_input_ok=True)
    assert '"conv3d"' in at.cache_key(prob, x.device)
    k3.clear_memo()  # a new process: the disk cache answers, nothing is timed
    assert conv3d_algorithm(x, w, b, **kw) == (name, cfg) and len(calls) == 1
    assert_close(convgemm.conv3d(x, w, b, **kw), _ref(x, w, b, kw), torch.float16, "tuned conv3d")
    # a 2-D problem of the same channels never reads the 3-D entry (and vice versa)
    assert prob.key() != replace(prob, d=prob.d + 1).key()


def test_conv3d_untuned_choice_is_the_heuristic(fresh_tuner, monkeypatch):
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")
    for case, want in (
        ((1, 16, 4, 5, 6, 24, 3, 3, 3, 1, 1, 1, 1), "conv3d_tma"),
        ((1, 3, 4, 9, 8, 24, 3, 7, 7, (1, 2, 2), (1, 3, 3), 1, 1), "conv3d_small_k"),
        ((1, 3, 4, 9, 8, 64, 3, 7, 7, (1, 2, 2), (1, 3, 3), 1, 1), "conv3d_width_unfold"),  # an RGB stem
        ((1, 32, 4, 5, 6, 16, 3, 3, 3, 2, 1, 1, 2), "conv3d_gather"),  # strided, grouped
        ((1, 32, 4, 6, 6, 16, 3, 3, 3, 2, 1, 1, 1), "conv3d_tma"),  # strided, dense: the phase view
        ((1, 32, 4, 5, 6, 16, 3, 3, 3, 2, 1, 1, 1), "conv3d_gather"),  # odd height: no phase view
    ):
        x, w, b, kw = _tensors(case, torch.float16, channels_last=True)
        name, cfg = convgemm.functional3d.conv3d_algorithm(x, w, b, **kw)
        assert name == want
        prob = ConvProblem3d.from_tensors(x, w, b, **kw)
        prob = replace(prob, **k3.input_flags(x, prob.stride))
        assert cfg == k3.ALGORITHMS3D[name].default_config(prob)


def test_conv3d_compiled_calls_convgemm_directly(monkeypatch):
    """Inductor lowers conv3d and its gradients to direct calls (``convgemm/_inductor.py``); the
    compiled step's output and gradients equal eager's."""
    import torch._inductor.config
    from torch._inductor.utils import run_and_get_code

    import convgemm._inductor as ci

    monkeypatch.setattr(ci, "DEVICES", ("cuda", "cpu"))
    torch.manual_seed(0)
    x = torch.randn(1, 4, 5, 6, 5, device=DEVICE).requires_grad_()
    w = torch.randn(6, 2, 3, 1, 3, device=DEVICE).requires_grad_()
    b = torch.randn(6, device=DEVICE).requires_grad_()

    def f(x, w, b):
        return convgemm.conv3d(x, w, b, stride=(1, 2, 1), padding=(1, 0, 1), groups=2)

    def step(x, w, b):
        y = torch.compile(f, fullgraph=True)(x, w, b)
        y.square().sum().backward()
        return y

    torch._dynamo.reset()
    with torch._inductor.config.patch(fx_graph_cache=False):
        y, code = run_and_get_code(step, x, w, b)
    grads = [t.grad for t in (x, w, b)]
    for t in (x, w, b):
        t.grad = None
    ref = f(x, w, b)
    ref.square().sum().backward()
    text = "\n".join(code)
    for name in ("conv3d", "conv3d_input", "conv3d_weight"):
        assert f"extern_kernels.convgemm_{name}(" in text, name
    torch.testing.assert_close(y, ref, rtol=0, atol=0)
    for g, t in zip(grads, (x, w, b), strict=True):
        torch.testing.assert_close(g, t.grad, rtol=1e-5, atol=1e-5)


# 3-D problems that are 2-D ones (``conv3d.as_2d``): N, C, D, H, W, K, T, R, S, stride, padding,
# dilation, groups, and the reduction expected
AS_2D_CASES = [
    ((2, 6, 4, 5, 6, 8, 1, 3, 3, 1, (0, 1, 1), 1, 1), "depth"),  # R(2+1)D spatial
    ((2, 6, 4, 7, 6, 8, 1, 3, 3, (2, 2, 1), (0, 1, 1), (1, 2, 1), 2), "depth"),  # D even: a view
    ((2, 6, 5, 6, 5, 8, 1, 3, 2, (2, 1, 2), (0, 1, 0), 1, 1), "depth"),  # D odd: slices copied
    ((2, 6, 5, 4, 3, 8, 3, 1, 1, 1, (1, 0, 0), 1, 1), "plane"),  # R(2+1)D temporal
    ((2, 8, 7, 3, 4, 8, 3, 1, 1, (2, 1, 1), (2, 0, 0), (2, 1, 1), 8), "plane"),  # depthwise, strided, dilated
    ((1, 6, 5, 3, 3, 4, 2, 1, 1, 1, "same", 1, 1), "plane"),  # 'same' with an even kernel: pads the end
    ((2, 16, 3, 4, 4, 12, 1, 1, 1, (1, 2, 2), 0, 1, 1), "depth"),  # strided 1x1x1 (a shortcut)
]


@pytest.mark.interpreter_share(2, vary=("channels_last",))
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("case,mode", AS_2D_CASES, ids=[str(c) for c, _ in AS_2D_CASES])
def test_conv3d_as_2d(case, mode, channels_last, fresh_tuner, monkeypatch):
    """A filter one tap deep, or one pixel high and wide, runs on conv2d's machinery over views;
    forward and both gradients (through the 2-D dgrad and wgrad) match float64 torch."""
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")
    x, w, b, kw = _tensors(case, torch.float32, channels_last)
    prob = ConvProblem3d.from_tensors(x, w, b, **kw)
    assert k3.as_2d(prob) == mode and k3.AS2D.supports(prob) is None
    name, _ = convgemm.functional3d.conv3d_algorithm(x, w, b, **kw)
    assert name.startswith("conv3d_as_2d:"), name
    xs, ws, bs = (t.clone().requires_grad_() for t in (x, w, b))
    y = convgemm.conv3d(xs, ws, bs, **kw)
    ref_args = [t.detach().double().cpu().requires_grad_() for t in (x, w, b)]
    ref = F.conv3d(*ref_args, **kw)
    assert y.shape == ref.shape
    assert y.is_contiguous(memory_format=torch.channels_last_3d if channels_last else torch.contiguous_format)
    assert_close(y, ref, torch.float32, f"conv3d as 2-D {case}")
    dy = torch.randn_like(y)
    y.backward(dy)
    ref.backward(dy.double().cpu())
    for label, got, want in zip("xwb", (xs.grad, ws.grad, bs.grad), (t.grad for t in ref_args), strict=True):
        assert got.shape == want.shape
        assert_close(got, want, torch.float32, f"grad {label} as 2-D {case}")
    assert ws.grad.is_contiguous(memory_format=torch.channels_last_3d if channels_last else torch.contiguous_format)


def test_conv3d_as_2d_views_and_refusals():
    """The 2-D views share the 3-D tensors' memory (no copies for dense channels_last_3d tensors);
    a depth-padded or deep filter is no 2-D problem, and forcing the algorithm says why."""
    x = torch.randn(2, 6, 4, 5, 7).contiguous(memory_format=torch.channels_last_3d)
    for mode, shape in (("depth", (8, 6, 5, 7)), ("plane", (2, 6, 4, 35))):
        v = k3.view_4d(x, mode)
        assert v.shape == shape and v.data_ptr() == x.data_ptr()
        assert torch.equal(k3.view_5d(v.contiguous(memory_format=torch.channels_last), mode, x.shape), x)
    assert torch.equal(k3.view_4d(x, "depth", 2)[1], x[0, :, 2])  # every other slice, still a view
    assert k3.view_4d(x, "depth", 2).data_ptr() == x.data_ptr()
    sliced = x[:, :, 1:]  # N and D no longer merge: a copy, with the same values
    assert torch.equal(k3.view_4d(sliced, "depth")[3], sliced[1, :, 0])
    for case in ((1, 4, 3, 4, 4, 4, 1, 3, 3, 1, 1, 1, 1), (1, 4, 3, 4, 4, 4, 3, 1, 1, 1, 1, 1, 1),
                 (1, 4, 3, 4, 4, 4, 3, 3, 3, 1, 0, 1, 1)):  # fmt: skip
        x, w, b, kw = _tensors(case, torch.float32)
        prob = ConvProblem3d.from_tensors(x, w, b, **kw)
        assert k3.as_2d(prob) is None and "one tap deep" in k3.AS2D.supports(prob)


@pytest.mark.parametrize(
    "case",
    [
        (2, 16, 3, 5, 6, 24, 3, 3, 3, 1, 1, 1, 1),
        (1, 24, 4, 4, 9, 16, 2, 3, 1, 1, (1, 0, 1), (2, 1, 1), 1),  # dilated, uneven padding
        (1, 40, 3, 4, 5, 8, 3, 3, 3, 1, 0, 1, 1),  # channels not a multiple of the tile
        (2, 64, 5, 6, 8, 16, 3, 3, 3, 2, 1, 1, 1),  # strided: the stride-phase view, odd depth
        (1, 64, 4, 4, 6, 24, 1, 3, 2, (1, 2, 2), (0, 1, 0), (1, 1, 2), 1),  # strided in H and W only, dilated
    ],
    ids=str,
)
@pytest.mark.interpreter_share(2, vary=("channels_last",))
@pytest.mark.parametrize("channels_last", [True, False])
def test_conv3d_wgrad_tma(case, channels_last):
    """The 3-D TMA wgrad (16-bit, groups 1; strided through the phase view), every candidate
    config, against float64;
    ``conv3d_weight`` takes it (the interpreter has TMA; tuning off: its default config)."""
    from convgemm.functional3d import _ndhwc

    x, w, _, kw = _tensors(case, torch.float16, channels_last)
    prob = ConvProblem3d.from_tensors(x, w, None, **kw)
    xd = x.double().cpu().requires_grad_()
    y = F.conv3d(xd, w.double().cpu(), None, **kw)
    dy = torch.randn(y.shape, device=DEVICE).to(torch.float16)
    want = torch.nn.grad.conv3d_weight(xd.detach(), w.shape, dy.double().cpu(), **kw)
    xn, dyn = _ndhwc(x), _ndhwc(dy)
    assert k3.WGRAD3D_TMA.supports(prob, xn, dyn) is None
    for cfg in k3.WGRAD3D_TMA.configs(prob):
        dw = torch.full(w.shape, float("nan"), device=DEVICE, dtype=torch.float16)
        k3.WGRAD3D_TMA.run(prob, xn, dyn, dw, cfg)
        assert_close(dw, want, torch.float16, f"wgrad_tma {cfg.describe()} {case}")
    got = convgemm.functional3d.conv3d_weight(x, w.shape, dy, **kw)
    assert_close(got, want, torch.float16, f"conv3d_weight {case}")


def test_conv3d_wgrad_tma_refuses():
    x, w, _, kw = _tensors((1, 16, 4, 6, 6, 16, 3, 3, 3, 2, 1, 1, 1), torch.float16, True)
    prob = ConvProblem3d.from_tensors(x, w, None, **kw)
    assert "multiple of 64" in k3.WGRAD3D_TMA.supports(prob, x, x)
    x, w, _, kw = _tensors((1, 64, 4, 5, 6, 16, 3, 3, 3, 2, 1, 1, 1), torch.float16, True)  # odd height
    assert "multiples of the stride" in k3.WGRAD3D_TMA.supports(ConvProblem3d.from_tensors(x, w, None, **kw), x, x)
    x, w, _, kw = _tensors((1, 16, 4, 6, 6, 16, 3, 3, 3, 1, 1, 1, 2), torch.float16, True)
    assert "groups = 1" in k3.WGRAD3D_TMA.supports(ConvProblem3d.from_tensors(x, w, None, **kw), x, x)
    x, w, _, kw = _tensors((1, 16, 4, 6, 6, 16, 3, 3, 3, 1, 1, 1, 1), torch.float32, True)
    assert "fp16 or bf16" in k3.WGRAD3D_TMA.supports(ConvProblem3d.from_tensors(x, w, None, **kw), x, x)


def test_conv3d_as_2d_is_the_only_candidate_when_it_applies(fresh_tuner, monkeypatch):
    """With tuning on, a 2-D problem is tuned by conv2d's tuner alone: the 3-D tuner is handed
    only ``conv3d_as_2d`` (the 3-D kernels never won on the H200), and its result is cached."""
    from convgemm.functional3d import conv3d_algorithm
    from convgemm.tune import autotune as at

    calls = []

    def fake_tune(prob, candidates, x, w, bias, y):
        calls.append([a.name for a in candidates])
        return candidates[0], candidates[0].default_config(prob), 5.0

    monkeypatch.setattr(at, "autotune_enabled", lambda: True)
    monkeypatch.setattr(at, "_tune", fake_tune)
    x, w, b, kw = _tensors((1, 16, 4, 5, 6, 24, 3, 1, 1, 1, (1, 0, 0), 1, 1), torch.float16, channels_last=True)
    k3.choose(replace(ConvProblem3d.from_tensors(x, w, b, **kw), tma_input_ok=True), x, w, b, None)
    assert calls == [["conv3d_as_2d"]]
    x, w, b, kw = _tensors((1, 16, 4, 5, 6, 24, 3, 3, 3, 1, 1, 1, 1), torch.float16, channels_last=True)
    assert conv3d_algorithm(x, w, b, **kw)[0] == "conv3d_tma" and "conv3d_as_2d" not in calls[-1]


@pytest.mark.parametrize(
    "case",
    [
        (2, 16, 7, 6, 8, 16, 3, 3, 3, 2, 1, 1, 1),  # r3d-18's downsampling 3x3x3, odd depth
        (1, 8, 5, 7, 6, 16, 3, 1, 3, (2, 1, 3), (1, 0, 2), (1, 1, 2), 1),  # mixed strides, dilated
        (1, 16, 6, 6, 6, 8, 1, 1, 1, 2, 0, 1, 1),  # a strided 1x1x1: phases no tap reaches are zeros
        (2, 16, 5, 6, 6, 16, 2, 3, 3, 2, (0, 1, 1), 1, 2),  # grouped
    ],
    ids=str,
)
@pytest.mark.interpreter_share(2, vary=("channels_last",))
@pytest.mark.parametrize("channels_last", [True, False])
def test_conv3d_strided_dgrad_by_phases(case, channels_last):
    """Strided dgrad, one stride-1 forward per stride phase written into dx's strided view (TMA
    stores where they apply, fp16), against float64."""
    x, w, _, kw = _tensors(case, torch.float16, channels_last)
    y = F.conv3d(x.double().cpu(), w.double().cpu(), None, **kw)
    dy = torch.randn(y.shape, device=DEVICE).to(torch.float16)
    if channels_last:
        dy = dy.contiguous(memory_format=_CL3)
    want = torch.nn.grad.conv3d_input(x.shape, w.double().cpu(), dy.double().cpu(), **kw)
    got = convgemm.functional3d.conv3d_input(x.shape, w, dy, **kw)
    assert got.is_contiguous(memory_format=_CL3 if channels_last else torch.contiguous_format)
    assert_close(got, want, torch.float16, f"strided dgrad {case}")


def test_tma_input_refuses_a_broadcast_batch():
    """One volume expanded to a batch (stride 0 along N) is never a TMA descriptor (the zero
    stride's encoding is not documented); a single image keeps it."""
    x = torch.randn(1, 16, 2, 4, 4, device=DEVICE).to(memory_format=torch.channels_last_3d)
    assert k3.tma_input_ok(x) == k3.tma_input_ok(x.expand(1, 16, 2, 4, 4))
    assert not k3.tma_input_ok(x.expand(3, 16, 2, 4, 4))


def test_strided_dgrad_phase_with_padding_only_after():
    """A strided dgrad phase whose stride-1 convolution needs padding after the rows but none
    before (kernel 3, stride 2, padding 1, two input rows): its problem was validated with the
    padding before on both sides, found empty, and refused (found by the 3-D fuzz, session 39)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 1, 2, 2, 1, generator=g).to(DEVICE)
    w = torch.randn(1, 1, 2, 3, 1, generator=g).to(DEVICE)
    kw = dict(stride=(1, 2, 1), padding=(0, 1, 0))
    dy = torch.randn(F.conv3d(x, w, **kw).shape, generator=g).to(DEVICE)
    ref = torch.nn.grad.conv3d_input(x.shape, w.double().cpu(), dy.double().cpu(), **kw)
    assert_close(convgemm.conv3d_input(x.shape, w, dy, **kw), ref, torch.float32, "phase dgrad")


def test_as_2d_views_with_size_one_axes():
    """conv3d problems that are 2-D ones merge N with D (or H with W) in a view; PyTorch gives a
    size-1 axis any stride, so a batch of one-deep volumes whose N stride was not D times the D
    stride had no view, and the forward and dgrad passed None on (found by the 3-D fuzz, session
    39). Forward, dgrad and wgrad of two such problems against float64."""
    g = torch.Generator().manual_seed(1)
    for xs, ws, dil in (((2, 1, 1, 1, 3), (2, 1, 1, 1, 2), (1, 1, 2)), ((2, 3, 1, 4, 1), (2, 3, 1, 2, 1), (1, 1, 1))):
        x = torch.randn(*xs, generator=g).to(DEVICE)
        w = torch.randn(*ws, generator=g).to(DEVICE)
        ref = F.conv3d(x.double().cpu(), w.double().cpu(), dilation=dil)
        assert_close(convgemm.conv3d(x, w, dilation=dil), ref, torch.float32, f"fwd {xs}")
        dy = torch.randn(ref.shape, generator=g).to(DEVICE)
        gx = torch.nn.grad.conv3d_input(x.shape, w.double().cpu(), dy.double().cpu(), dilation=dil)
        gw = torch.nn.grad.conv3d_weight(x.double().cpu(), w.shape, dy.double().cpu(), dilation=dil)
        assert_close(convgemm.conv3d_input(x.shape, w, dy, dilation=dil), gx, torch.float32, f"dgrad {xs}")
        assert_close(convgemm.conv3d_weight(x, w.shape, dy, dilation=dil), gw, torch.float32, f"wgrad {xs}")
