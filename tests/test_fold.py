"""narrow_fold: few output channels as an R x 1 convolution into S*K channels, then a column fold."""

import pytest
import torch
import torch.nn.functional as F
from conftest import DEVICE, INTERPRET
from reference import assert_close, conv2d_ref, conv_inputs

import convgemm
from convgemm.conv.fold import fold_weight
from convgemm.conv.fprop import ALGORITHMS

NAME = "narrow_fold"
# the interpreter computes tl.dot on bf16 operands wrongly (raw bits): bf16 runs on the GPU
DTYPES = [torch.float16] if INTERPRET else [torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True)
def _no_tuning(monkeypatch):
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")


def _inputs(n, c, h, w, k, r, s, dtype, bias=True, channels_last=True):
    return conv_inputs(n, c, h, w, k, r, s, dtype, DEVICE, bias, channels_last)


# (N, C, H, W, K, R, S, stride, padding, dilation, bias): an RGB output (the dgrad of a first
# layer), a 5-wide filter (S*K = 40), column stride 2 and dilation (the fold's column arithmetic),
# asymmetric filter sizes, a 1 x 3 filter (R = 1: the R x 1 convolution is a 1x1), S*K = 64
CASES = [
    (2, 16, 9, 10, 3, 3, 3, 1, 1, 1, True),
    (1, 32, 7, 11, 8, 5, 5, 1, 2, 1, False),
    (1, 16, 8, 12, 4, 3, 3, (1, 2), 1, 1, True),
    (2, 16, 7, 13, 2, 3, 5, 1, (1, 4), (1, 2), True),
    (1, 16, 6, 7, 3, 1, 3, 1, (0, 1), 1, False),
    (1, 24, 6, 9, 16, 3, 4, 1, (1, 0), 1, True),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:7])))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("out", ["channels_last", "nchw"])
def test_forced_matches_reference(case, dtype, out):
    n, c, h, w, k, r, s, stride, pad, dil, bias = case
    x, wt, b = _inputs(n, c, h, w, k, r, s, dtype, bias, channels_last=out == "channels_last")
    y = convgemm.conv2d(x, wt, b, stride=stride, padding=pad, dilation=dil, algorithm=NAME)
    want = torch.channels_last if out == "channels_last" else torch.contiguous_format
    assert y.is_contiguous(memory_format=want), "the output keeps the input's layout, written in place"
    assert_close(y, conv2d_ref(x, wt, b, stride=stride, padding=pad, dilation=dil), dtype, f"{NAME} {case}")


def test_repeat_calls_on_one_launch_handle():
    # a call plan's handle: the R x 1 convolution replays narrow_tma's launch, the fold its aux
    from convgemm.matmul.launch import Launch

    algo, h = ALGORITHMS[NAME], Launch()
    for i in range(3):
        x, wt, b = _inputs(2, 16, 9, 10, 3, 3, 3, DTYPES[-1])
        prob = convgemm.explain(x, wt, b, padding=1, algorithm=NAME)["problem"]
        y = torch.full((2, 3, 9, 10), float("nan"), device=DEVICE, dtype=x.dtype).contiguous(
            memory_format=torch.channels_last
        )
        algo.run(prob, x, wt, b, y, algo.default_config(prob), h)
        assert_close(y, conv2d_ref(x, wt, b, padding=1), x.dtype, f"call {i}")
        assert h.aux is not None, "the fold has its own handle"


def test_fold_weight_is_the_column_taps_as_channels():
    w = torch.randn(3, 5, 2, 4)
    f = fold_weight(w)
    assert f.shape == (12, 5, 2, 1)
    for s in range(4):
        assert torch.equal(f[s * 3 : (s + 1) * 3, :, :, 0], w[:, :, :, s])
    # laid out in narrow_tma's KRSC order: its packing is a view of this copy, not a second one
    from convgemm.conv.layout import krsc_weight

    assert krsc_weight(f, 5).data_ptr() == f.data_ptr()


def test_the_fold_is_the_convolution():
    # the decomposition itself, in float64 on torch: an R x 1 convolution into S*K channels,
    # each output column then summing its S taps' channel blocks at their column offsets
    x = torch.randn(2, 6, 7, 11, dtype=torch.float64)
    w = torch.randn(3, 6, 3, 4, dtype=torch.float64)
    pad, stride, dil = (1, 2), 2, 2
    u = F.conv2d(x, fold_weight(w), padding=(pad[0], 0))
    want = F.conv2d(x, w, padding=pad, stride=(1, stride), dilation=(1, dil))
    q_out = want.shape[3]
    got = torch.zeros_like(want)
    for s in range(4):
        for q in range(q_out):
            j = q * stride - pad[1] + s * dil
            if 0 <= j < x.shape[3]:
                got[:, :, :, q] += u[:, s * 3 : (s + 1) * 3, :, j]
    torch.testing.assert_close(got, want)


def test_fused_relu_keeps_nan():
    x, wt, b = _inputs(1, 16, 8, 16, 3, 3, 3, torch.float16)
    x[0, 2, 3, 4] = float("nan")
    y = convgemm.conv2d(x, wt, b, padding=1, activation="relu", algorithm=NAME)
    ref = torch.relu(conv2d_ref(x, wt, b, padding=1))
    assert torch.equal(torch.isnan(y.cpu()), torch.isnan(ref)), "NaN exactly where the reference has it"
    fin = ~torch.isnan(ref)
    assert_close(y.cpu().double()[fin].half(), ref[fin].half(), torch.float16, "relu")


@pytest.mark.parametrize(
    "what,shape,args,reason",
    [
        ("wide", (1, 16, 8, 8, 24, 3, 3), dict(padding=1), "over 64"),
        ("one column", (1, 16, 8, 8, 3, 3, 1), dict(padding=1), "one column wide"),
        ("groups", (1, 16, 8, 8, 4, 3, 3), dict(padding=1, groups=2), "groups"),
        ("row stride", (1, 16, 8, 8, 3, 3, 3), dict(padding=1, stride=2), "vertical stride"),
        ("float32", (1, 16, 8, 8, 3, 3, 3), dict(padding=1, dtype=torch.float32), "fp16 or bf16"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_refuses_with_reason(what, shape, args, reason):
    args = dict(args)
    dtype = args.pop("dtype", torch.float16)
    n, c, h, w, k, r, s = shape
    x, wt, b = _inputs(n, c, h, w, k, r, s, dtype)
    wt = wt[:, : c // args.get("groups", 1)].contiguous()
    with pytest.raises(ValueError, match=reason):
        convgemm.conv2d(x, wt, b, algorithm=NAME, **args)


def test_is_a_tuning_candidate_only():
    from dataclasses import replace

    from convgemm.problem import ConvProblem

    x, wt, _ = _inputs(1, 64, 16, 16, 3, 3, 3, torch.bfloat16, bias=False)
    prob = replace(ConvProblem.from_tensors(x, wt, None, padding=1), tma_ok=True, input_tma_ok=True)
    algo = ALGORITHMS[NAME]
    assert algo.supports(prob) is None
    assert not algo.heuristic_ok(prob), "tuned only: the untuned heuristic keeps narrow_tma"
    assert algo.configs(prob) == ALGORITHMS["narrow_tma"].configs(algo.reduced(prob))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("k,s", [(3, 3), (16, 3), (12, 5)])
def test_gpu_every_config(dtype, k, s):
    algo = ALGORITHMS[NAME]
    x, wt, b = _inputs(4, 64, 48, 40, k, 3, s, dtype)
    pad = (1, s // 2)
    ref = conv2d_ref(x, wt, b, padding=pad)
    prob = convgemm.explain(x, wt, b, padding=pad, algorithm=NAME)["problem"]
    for cfg in algo.configs(prob):
        y = torch.full(ref.shape, float("nan"), dtype=dtype, device=DEVICE).contiguous(
            memory_format=torch.channels_last
        )
        algo.run(prob, x, wt, b, y, cfg)
        assert_close(y, ref, dtype, cfg.describe())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_gpu_rgb_dgrad_tuned(dtype, monkeypatch, tmp_path):
    # the layer it is for: the input gradient of an RGB first layer (a forward convolution of dy
    # into 3 channels), tuned, with narrow_fold among the candidates
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "1")
    monkeypatch.setenv("CONVGEMM_CACHE_DIR", str(tmp_path))
    x, wt, _ = _inputs(1, 3, 96, 128, 64, 3, 3, dtype, bias=False)
    dy = torch.randn(1, 64, 96, 128, device=DEVICE).to(dtype).contiguous(memory_format=torch.channels_last)
    dx = convgemm.conv2d_input(x.shape, wt, dy, padding=1)
    ref = torch.nn.grad.conv2d_input(x.shape, wt.double().cpu(), dy.double().cpu(), padding=1)
    assert_close(dx, ref, dtype, "rgb dgrad")
