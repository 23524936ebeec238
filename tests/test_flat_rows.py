"""flat_rows: each filter row of an output pixel read as one contiguous NHWC run, one dot per row."""

import pytest
import torch
from conftest import DEVICE, INTERPRET
from reference import assert_close, conv2d_ref, conv_inputs

import convgemm
from convgemm.conv.flat_rows import MAX_ROW, row_chunks
from convgemm.conv.fprop import ALGORITHMS
from convgemm.problem import ConvProblem

NAME = "flat_rows"
# the interpreter computes tl.dot on bf16 operands wrongly (raw bits): bf16 runs on the GPU
DTYPES = [torch.float32, torch.float16] if INTERPRET else [torch.float32, torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True)
def _no_tuning(monkeypatch):
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")


# (N, C, H, W, K, R, S, stride, padding, dilation, bias). Each exercises one piece of the run
# arithmetic: narrow 8 -> 8 (24-value runs, one 32 chunk, W padding on both edges); an RGB stem
# at stride 2 (9-value runs of 6-byte pixels); 16 channels unpadded (48 = 32 + 16: two chunks);
# a 1x1 head into one channel; a 7x7 stride-2 stem (21 -> 32, rows above and below the image);
# dilation on both axes (runs with gaps, the strided column form); one input channel at 5x5;
# 32 channels (96 -> 128) into 20 (a partial N tile); AlexNet's 11x11 stride 4 (33 = 32 + 16);
# asymmetric stride and padding; K = 40 over more than one N tile under the interpreter
CASES = [
    (2, 8, 9, 10, 8, 3, 3, 1, 1, 1, True),
    (2, 3, 15, 13, 32, 3, 3, 2, 1, 1, False),
    (1, 16, 11, 12, 16, 3, 3, 1, 0, 1, True),
    (2, 16, 8, 9, 1, 1, 1, 1, 0, 1, True),
    (1, 3, 19, 21, 24, 7, 7, 2, 3, 1, False),
    (1, 4, 9, 9, 40, 3, 3, 1, 2, 2, True),
    (2, 1, 12, 12, 16, 5, 5, 1, 2, 1, True),
    (1, 32, 7, 8, 20, 3, 3, 1, 1, 1, True),
    (1, 3, 27, 27, 8, 11, 11, 4, 0, 1, True),
    (1, 6, 10, 11, 12, 3, 5, (2, 1), (1, 2), (1, 2), False),
]


def _id(c):
    return "x".join(map(str, c[:7])) + f"-s{c[7]}-p{c[8]}-d{c[9]}".replace(" ", "")


@pytest.mark.interpreter_share(2, vary=("dtype", "out"))
@pytest.mark.parametrize("case", CASES, ids=_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("out", ["channels_last", "nchw"])
def test_forced_matches_reference(case, dtype, out):
    n, c, h, w, k, r, s, stride, pad, dil, bias = case
    x, wt, b = conv_inputs(n, c, h, w, k, r, s, dtype, DEVICE, bias, out == "channels_last")
    y = convgemm.conv2d(x, wt, b, stride=stride, padding=pad, dilation=dil, algorithm=NAME)
    want = torch.channels_last if out == "channels_last" else torch.contiguous_format
    # (one input channel: NCHW and channels_last are the same memory, and PyTorch's rule says NCHW)
    assert c == 1 or y.is_contiguous(memory_format=want), "the output keeps the input's layout, written in place"
    assert_close(y, conv2d_ref(x, wt, b, stride=stride, padding=pad, dilation=dil), dtype, f"{NAME} {case}")


def test_relu_fused():
    x, wt, b = conv_inputs(2, 8, 9, 10, 8, 3, 3, torch.float16, DEVICE, True, True)
    y = convgemm.conv2d(x, wt, b, padding=1, activation="relu", algorithm=NAME)
    assert_close(y, torch.relu(conv2d_ref(x, wt, b, padding=1)), torch.float16, "relu")


def test_channel_slice_input():
    # a channels_last slice: pixels 16 channels apart, 8 of them read; the runs need the C
    # channels back to back, so the algorithm reads a dense copy
    big = torch.randn(2, 16, 9, 10, device=DEVICE).to(torch.float16).contiguous(memory_format=torch.channels_last)
    x = big[:, 4:12]
    assert x.stride(1) == 1 and x.stride(3) == 16
    wt = torch.randn(8, 8, 3, 3, device=DEVICE).to(torch.float16)
    y = convgemm.conv2d(x, wt, padding=1, algorithm=NAME)
    assert_close(y, conv2d_ref(x, wt, None, padding=1), torch.float16, "slice")


def test_weight_changed_in_place_is_seen():
    # the weight is read in place on every call (nothing packed, nothing cached)
    x, wt, _ = conv_inputs(1, 8, 9, 10, 8, 3, 3, torch.float16, DEVICE, False, True)
    y1 = convgemm.conv2d(x, wt, padding=1, algorithm=NAME)
    wt.mul_(-2)
    y2 = convgemm.conv2d(x, wt, padding=1, algorithm=NAME)
    assert_close(y2, conv2d_ref(x, wt, None, padding=1), torch.float16, "after the in-place change")
    assert not torch.allclose(y1, y2)


@pytest.mark.parametrize(
    "run, want",
    [(1, (16, 0)), (9, (16, 0)), (16, (16, 0)), (21, (32, 0)), (24, (32, 0)), (33, (32, 16)), (48, (32, 16)),
     (64, (64, 0)), (80, (128, 0)), (96, (128, 0)), (112, (128, 0)), (128, (128, 0))],
)  # fmt: skip
def test_row_chunks(run, want):
    ka, kb = row_chunks(run)
    assert (ka, kb) == want
    whole = (max(16, 1 << (run - 1).bit_length()), 0)
    assert row_chunks(run, 4) == whole, "fp32 rows are one chunk"
    assert ka + kb >= run, "the chunks cover the run"
    assert ka >= 16 and kb in (0,) + tuple(1 << i for i in range(4, 8))


def _prob(c, k, r, s, **kw):
    return ConvProblem(n=1, c=c, h=16, w=16, k=k, r=r, s=s, dtype=kw.pop("dtype", torch.float16), **kw)


def test_supports_and_reasons():
    algo = ALGORITHMS[NAME]
    assert algo.supports(_prob(3, 64, 7, 7)) is None
    assert algo.supports(_prob(16, 16, 3, 3)) is None
    assert algo.supports(_prob(8, 8, 3, 3, dtype=torch.bfloat16)) is None
    assert "groups = 2" in algo.supports(_prob(8, 8, 3, 3, groups=2))
    assert f"over {MAX_ROW}" in algo.supports(_prob(64, 16, 3, 3))
    assert "float64" in algo.supports(_prob(8, 8, 3, 3, dtype=torch.float64))
    assert "NHWC" in algo.supports(_prob(8, 8, 3, 3, input_nchw=True))


def test_forcing_an_unsupported_problem_names_the_reason():
    x = torch.randn(1, 64, 8, 8, device=DEVICE).to(torch.float16)
    wt = torch.randn(16, 64, 3, 3, device=DEVICE).to(torch.float16)
    with pytest.raises(ValueError, match="values per filter row"):
        convgemm.conv2d(x, wt, padding=1, algorithm=NAME)


@pytest.mark.skipif(INTERPRET, reason="the interpreter offers the default config only")
def test_configs_leave_out_the_tiles_that_spill():
    # sm90-compile (bf16): the 7x7 RGB stem spilled at 128 pixels on 4 warps and 256 on 8, and
    # AlexNet's 11x11 in every tile but 64 pixels on 8 warps; 16 channels at 3x3 spilled in none
    algo = ALGORITHMS[NAME]

    def tiles(prob):
        return {(c.block_m, c.num_warps) for c in algo.configs(prob)}

    assert tiles(_prob(3, 64, 7, 7)) == {(64, 4), (128, 8)}
    assert tiles(_prob(3, 96, 11, 11)) == {(64, 8)}
    assert tiles(_prob(16, 16, 3, 3)) == {(128, 4), (256, 8), (64, 4), (128, 8)}
    for prob in (_prob(3, 64, 7, 7), _prob(32, 32, 3, 3)):
        assert all(c.block_k == row_chunks(prob.s * prob.c, 2)[0] for c in algo.configs(prob))


# (C, K, R, S, stride, padding) of the suites' layers that flat_rows takes, at a small size: the
# tuner's candidates depend on these alone, and each is compiled and run here, so a tile that
# computes wrong sums (session 29: the 64 + 32 row split at 128 pixels on 4 warps) fails
EVERY_CONFIG = [
    (8, 8, 3, 3, 1, 1),
    (3, 32, 3, 3, 2, 1),
    (16, 16, 3, 3, 1, 0),
    (32, 16, 3, 3, 1, 1),
    (32, 32, 3, 3, 1, 1),
    (16, 1, 1, 1, 1, 0),
    (96, 64, 1, 1, 1, 0),
    (3, 64, 7, 7, 2, 3),
    (3, 96, 11, 11, 4, 0),
    (4, 64, 3, 3, 1, 1),
    (1, 16, 5, 5, 1, 2),
]


@pytest.mark.gpu
@pytest.mark.parametrize("layer", EVERY_CONFIG, ids=lambda v: "C{}K{}-{}x{}-s{}p{}".format(*v))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_every_config(layer, dtype):
    from convgemm.functional import _prepare

    c, k, r, s, stride, pad = layer
    x, wt, b = conv_inputs(2, c, 45, 37, k, r, s, dtype, DEVICE, True, True)
    prob, xn, y = _prepare(x, wt, b, (stride, stride), (pad, pad), (1, 1), 1)
    algo = ALGORITHMS[NAME]
    ref = conv2d_ref(x, wt, b, stride=stride, padding=pad)
    for cfg in algo.configs(prob):
        out = torch.full_like(y, float("nan"))
        algo.run(prob, xn, wt, b, out, cfg)
        assert_close(out, ref, dtype, f"{NAME} {layer} {cfg.describe()}")


@pytest.mark.parametrize(
    "c, k, r, dtype, want",
    [(8, 8, 3, torch.float16, True), (16, 16, 3, torch.bfloat16, True), (4, 64, 3, torch.float16, True),
     (3, 32, 3, torch.float16, False), (8, 8, 3, torch.float32, False), (16, 16, 1, torch.float16, False),
     (32, 16, 3, torch.float16, False), (4, 64, 7, torch.float16, False)],
)  # fmt: skip
def test_untuned_choice(c, k, r, dtype, want):
    # with tuning off, the heuristic takes flat_rows where the H200 measured it 2x ahead (4-16
    # channels under a 3x3 filter, 16-bit) and leaves the other layers (a 7x7: untimed) to the others
    x, wt, _ = conv_inputs(2, c, 12, 12, k, r, r, dtype, DEVICE, False, True)
    pick = convgemm.explain(x, wt, padding=r // 2)["algorithm"]
    assert (pick == NAME) == want, pick
