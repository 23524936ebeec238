"""Bitwise reproducibility: the same inputs give the same bits, call after call.

Every forward algorithm forced on small shapes it takes, and the weight gradient, whose long
N*P*Q reduction is split over programs (split-K) and must still be summed in a fixed order
(``matmul.blocks.split_k_reduce``). On a GPU the second and third forward calls also take the
plan's launch shortcut (``Launch.fast``), so they are compared against the first, full launch.
"""

from dataclasses import replace

import pytest
import torch
from conftest import DEVICE, INTERPRET, conv_tensors
from reference import assert_close, conv2d_ref

import convgemm
from convgemm.conv.backward import WGRAD
from convgemm.problem import ConvProblem

CALLS = 3

# (N, C, H, W, K, R, S, stride, padding, dilation, groups): each algorithm takes at least one
SHAPES = {
    "3x3": (2, 16, 7, 6, 16, 3, 3, 1, 1, 1, 1),  # implicit_gemm, implicit_gemm_tma, small_k
    "1x1": (2, 16, 5, 4, 24, 1, 1, 1, 0, 1, 1),  # gemm_1x1
    "grouped_s2": (2, 16, 7, 5, 16, 3, 3, 2, 1, 1, 4),  # grouped (4 channels per group)
    "depthwise_d2": (1, 16, 7, 6, 16, 3, 3, 1, 2, 2, 16),  # depthwise
}

DTYPES = [torch.float32, torch.bfloat16]


@pytest.fixture(autouse=True)
def _no_tuning(monkeypatch):
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "bf16"])
@pytest.mark.parametrize("algorithm", convgemm.algorithms())
def test_forward_is_bitwise_reproducible(algorithm, dtype, no_tf32):
    ran = []
    for name, shape in SHAPES.items():
        x, w, b, kw = conv_tensors(shape, dtype)
        try:
            first = convgemm.conv2d(x, w, b, **kw, algorithm=algorithm)
        except ValueError as e:
            assert "cannot run" in str(e), e
            continue
        assert_close(first, conv2d_ref(x, w, b, **kw), dtype, f"{algorithm} {name}")
        for i in range(1, CALLS):
            y = convgemm.conv2d(x, w, b, **kw, algorithm=algorithm)
            assert torch.equal(y, first), f"{algorithm} {name}: call {i + 1} differs from call 1"
        ran.append(name)
        if INTERPRET:  # one shape per algorithm keeps the interpreter run short
            break
    if not ran:
        pytest.skip(f"{algorithm} takes none of the shapes {list(SHAPES)} here")


# a long reduction over few output tiles: on a GPU the default config splits it (asserted below);
# the interpreter's default never splits, so the forced-split test below covers it there
WGRAD_SHAPE = (2, 8, 12, 12, 8, 3, 3, 1, 1, 1, 1) if INTERPRET else (4, 16, 64, 64, 16, 3, 3, 1, 1, 1, 1)


def _wgrad_inputs(dtype):
    x, w, _, kw = conv_tensors(WGRAD_SHAPE, dtype)
    prob = ConvProblem.from_tensors(x, w, None, **kw)
    dy = torch.randn(prob.output_shape, device=DEVICE).to(dtype).to(memory_format=torch.channels_last)
    ref = torch.nn.grad.conv2d_weight(x.double().cpu(), w.shape, dy.double().cpu(), **kw)
    return x, w, dy, kw, prob, ref


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "bf16"])
def test_wgrad_is_bitwise_reproducible(dtype, no_tf32):
    x, w, dy, kw, prob, ref = _wgrad_inputs(dtype)
    if not INTERPRET and dtype == torch.float32:  # fp32 always takes the gather kernel
        assert WGRAD.default_config(prob).split_k > 1, "the shape no longer exercises split-K"
    first = convgemm.conv2d_weight(x, w.shape, dy, **kw)
    assert_close(first, ref, dtype, "wgrad")
    for i in range(1, CALLS):
        dw = convgemm.conv2d_weight(x, w.shape, dy, **kw)
        assert torch.equal(dw, first), f"wgrad call {i + 1} differs from call 1"


@pytest.mark.parametrize("split_k", [3, 8])
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "bf16"])
def test_wgrad_split_k_is_bitwise_reproducible(dtype, split_k, no_tf32):
    """The gather wgrad kernel with a forced split count (8 leaves some splits without K tiles
    under the interpreter's tiles), run directly."""
    x, w, dy, kw, prob, ref = _wgrad_inputs(dtype)
    cfg = replace(WGRAD.default_config(prob), split_k=split_k)
    outs = []
    for _ in range(CALLS):
        dw = torch.full(tuple(w.shape), float("nan"), dtype=dtype, device=DEVICE)
        WGRAD.run(prob, x, dy, dw, cfg)
        outs.append(dw)
    assert_close(outs[0], ref, dtype, f"wgrad split_k={split_k}")
    for i, dw in enumerate(outs[1:], start=2):
        assert torch.equal(dw, outs[0]), f"wgrad split_k={split_k}: call {i} differs from call 1"
