"""narrow_tma: few output channels on the TMA kernel with output pixels on M."""

import pytest
import torch
from conftest import DEVICE, INTERPRET
from reference import assert_close, conv2d_ref, conv_inputs

import convgemm
from convgemm.conv.fprop import ALGORITHMS

NAME = "narrow_tma"
DTYPES = [torch.float16, torch.float32] if INTERPRET else [torch.float16, torch.bfloat16, torch.float32]


@pytest.fixture(autouse=True)
def _no_tuning(monkeypatch):
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")


def _inputs(n, c, h, w, k, r, s, dtype, bias=True, channels_last=True):
    return conv_inputs(n, c, h, w, k, r, s, dtype, DEVICE, bias, channels_last)


# (N, C, H, W, K, R, S, stride, padding, dilation, bias): an RGB output (K = 3, no 16-byte rows),
# 8, 12 and 40 channels (partial N tiles), 64 (the widest), a strided 1x1 (the subsampled view),
# dilation, pixel blocks ragged against the output
CASES = [
    (1, 24, 9, 16, 3, 3, 3, 1, 1, 1, False),
    (2, 16, 10, 12, 8, 3, 3, 1, 1, 1, True),
    (1, 32, 7, 9, 12, 5, 5, 1, 2, 1, True),
    (2, 32, 8, 8, 40, 1, 1, 2, 0, 1, True),
    (1, 64, 6, 10, 64, 3, 3, 1, 2, 2, True),
    (3, 16, 5, 5, 16, 1, 1, 1, 0, 1, False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:7])))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("out", ["channels_last", "nchw"])
def test_forced_matches_reference(case, dtype, out, no_tf32):
    n, c, h, w, k, r, s, stride, pad, dil, bias = case
    x, wt, b = _inputs(n, c, h, w, k, r, s, dtype, bias, channels_last=out == "channels_last")
    y = convgemm.conv2d(x, wt, b, stride=stride, padding=pad, dilation=dil, algorithm=NAME)
    want = torch.channels_last if out == "channels_last" else torch.contiguous_format
    assert y.is_contiguous(memory_format=want), "the output keeps the input's layout, written in place"
    assert_close(y, conv2d_ref(x, wt, b, stride=stride, padding=pad, dilation=dil), dtype, f"{NAME} {case}")


def test_fused_relu():
    x, wt, b = _inputs(1, 16, 8, 16, 3, 3, 3, torch.float16)
    y = convgemm.conv2d(x, wt, b, padding=1, activation="relu", algorithm=NAME)
    assert_close(y, torch.relu(conv2d_ref(x, wt, b, padding=1)), torch.float16, "relu")


@pytest.mark.parametrize(
    "what,shape,args,reason",
    [
        ("wide", (1, 16, 8, 8, 72, 3, 3), dict(padding=1), "over 64"),
        ("groups", (1, 16, 8, 8, 16, 3, 3), dict(padding=1, groups=2), "groups"),
        ("strided 3x3", (1, 16, 8, 8, 16, 3, 3), dict(padding=1, stride=2), "stride"),
        ("float64", (1, 16, 8, 8, 16, 3, 3), dict(padding=1, dtype=torch.float64), "fp16, bf16 or fp32"),
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


def test_is_a_tuning_candidate_for_narrow_layers_only():
    from dataclasses import replace

    from convgemm.problem import ConvProblem

    def cands(k):
        x, wt, _ = _inputs(1, 32, 16, 16, k, 3, 3, torch.bfloat16, bias=False)
        prob = replace(ConvProblem.from_tensors(x, wt, None, padding=1), tma_ok=True, input_tma_ok=True)
        return ALGORITHMS[NAME].supports(prob) is None

    assert cands(3) and cands(16) and cands(64) and not cands(128)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("k", [3, 16, 48])
def test_gpu_every_config_and_warm_calls(dtype, k, monkeypatch):
    # every tuning candidate (the persistent ones too), then the plan's warm launch on new tensors
    algo = ALGORITHMS[NAME]
    x, wt, b = _inputs(4, 64, 48, 40, k, 3, 3, dtype)
    ref = conv2d_ref(x, wt, b, padding=1)
    prob = convgemm.explain(x, wt, b, padding=1, algorithm=NAME)["problem"]
    for cfg in algo.configs(prob):
        # (the reference is on the CPU)
        y = torch.full(ref.shape, float("nan"), dtype=dtype, device=DEVICE).contiguous(
            memory_format=torch.channels_last
        )
        algo.run(prob, x, wt, b, y, cfg)
        assert_close(y, ref, dtype, cfg.describe())
    for _ in range(3):
        x, wt, b = _inputs(4, 64, 48, 40, k, 3, 3, dtype)
        y = convgemm.conv2d(x, wt, b, padding=1, algorithm=NAME)
        assert_close(y, conv2d_ref(x, wt, b, padding=1), dtype, "warm")
