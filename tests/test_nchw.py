"""implicit_gemm_tma_nchw: NCHW input read and NCHW output written by TMA boxes, no transposes
(1x1 and R x 1 filters, stride 1)."""

import pytest
import torch
from conftest import DEVICE, INTERPRET
from reference import assert_close, conv2d_ref

import convgemm
from convgemm.conv.fprop import ALGORITHMS

NAME = "implicit_gemm_tma_nchw"
DTYPES = [torch.float16] if INTERPRET else [torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True)
def _no_tuning(monkeypatch):
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")
    monkeypatch.delenv("CONVGEMM_NCHW_TMA", raising=False)


def _inputs(n, c, h, w, k, r, s, dtype, bias=True):
    x = torch.randn(n, c, h, w, device=DEVICE).to(dtype)
    wt = (torch.randn(k, c, r, s, device=DEVICE) / (c * r * s) ** 0.5).to(dtype)
    b = torch.randn(k, device=DEVICE).to(dtype) if bias else None
    return x, wt, b


# (N, C, H, W, K, R, S, padding, dilation, bias): 1x1 layers and R x 1 filters (rows shift the
# boxes, columns must not: a box's first column is 16-byte aligned), channels that are not a
# multiple of the K tile (20), filters that are not a multiple of the M tile (24), outputs ragged
# against the pixel tiles
CASES = [
    (2, 16, 16, 16, 32, 1, 1, 0, 1, True),
    (1, 20, 12, 16, 24, 1, 1, 0, 1, False),
    (2, 32, 9, 24, 16, 1, 1, 0, 1, True),
    (1, 16, 10, 32, 16, 3, 1, (1, 0), 1, True),
    (1, 24, 9, 16, 16, 5, 1, (4, 0), 2, True),
    (1, 16, 12, 16, 16, 4, 1, (2, 0), 1, False),
    # 1x1 layers read as whole planes (``ImplicitGemmTmaNchw.planes``): rows of 12 and 28 pixels
    # are not 16-byte multiples, their planes (72 and 112 pixels) are; tiles cross rows
    (2, 16, 6, 12, 16, 1, 1, 0, 1, True),
    (1, 24, 4, 28, 40, 1, 1, 0, 1, False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:7])))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_forced_matches_reference(case, dtype):
    n, c, h, w, k, r, s, pad, dil, bias = case
    x, wt, b = _inputs(n, c, h, w, k, r, s, dtype, bias)
    y = convgemm.conv2d(x, wt, b, padding=pad, dilation=dil, algorithm=NAME)
    assert y.is_contiguous(), "an NCHW input gives an NCHW output, written in place"
    assert_close(y, conv2d_ref(x, wt, b, padding=pad, dilation=dil), dtype, f"{NAME} {case}")


def test_auto_takes_nchw_input_as_it_is():
    # (32 output channels: at 16 or fewer, head_1x1_nchw is the untuned choice)
    x, wt, b = _inputs(2, 16, 8, 16, 32, 1, 1, torch.float16)
    plan = convgemm.explain(x, wt, b)
    assert plan["algorithm"] == NAME and plan["problem"].input_nchw
    y = convgemm.conv2d(x, wt, b)
    assert y.is_contiguous()
    assert_close(y, conv2d_ref(x, wt, b), torch.float16, "auto")


def test_fused_relu():
    x, wt, b = _inputs(1, 16, 8, 16, 16, 1, 1, torch.float16)
    y = convgemm.conv2d(x, wt, b, activation="relu", algorithm=NAME)
    assert_close(y, torch.relu(conv2d_ref(x, wt, b)), torch.float16, "relu")


def test_env_switch_turns_it_off(monkeypatch):
    monkeypatch.setenv("CONVGEMM_NCHW_TMA", "0")
    x, wt, b = _inputs(1, 16, 8, 16, 16, 1, 1, torch.float16)
    plan = convgemm.explain(x, wt, b)
    assert plan["algorithm"] != NAME and not plan["problem"].input_nchw
    assert_close(convgemm.conv2d(x, wt, b), conv2d_ref(x, wt, b), torch.float16, "off")


# what it does not take goes to the NHWC algorithms (through the transposes), with the reason
# when forced
NOT_TAKEN = [
    ("3x3", dict(shape=(1, 16, 8, 16, 16, 3, 3), padding=1), "must not shift columns"),
    ("column padding", dict(shape=(1, 16, 8, 16, 16, 1, 1), padding=(0, 1)), "must not shift columns"),
    ("groups", dict(shape=(1, 16, 8, 16, 16, 1, 1), groups=2), "groups"),
    ("stride", dict(shape=(1, 16, 8, 16, 16, 1, 1), stride=2), "stride"),
    ("row bytes", dict(shape=(1, 16, 8, 12, 16, 3, 1), padding=(1, 0)), "NCHW input whose"),
    ("plane bytes", dict(shape=(1, 16, 7, 7, 16, 1, 1)), "NCHW input whose"),
    ("narrow C", dict(shape=(1, 8, 8, 16, 32, 1, 1)), "C = 8"),
    ("fp32", dict(shape=(1, 16, 8, 16, 32, 1, 1), dtype=torch.float32), "16-bit"),
    ("channels_last", dict(shape=(1, 16, 8, 16, 16, 1, 1), cl=True), "NCHW input whose"),
]


@pytest.mark.parametrize("what,spec,reason", NOT_TAKEN, ids=[t[0] for t in NOT_TAKEN])
def test_not_taken(what, spec, reason):
    n, c, h, w, k, r, s = spec["shape"]
    g = spec.get("groups", 1)
    dtype = spec.get("dtype", torch.float16)
    x, wt, b = _inputs(n, c, h, w, k, r, s, dtype)
    wt = wt[:, : c // g].contiguous()
    if spec.get("cl"):
        x = x.contiguous(memory_format=torch.channels_last)
    args = dict(stride=spec.get("stride", 1), padding=spec.get("padding", 0), groups=g)
    plan = convgemm.explain(x, wt, b, **args)
    assert plan["algorithm"] != NAME and not plan["problem"].input_nchw
    with pytest.raises(ValueError, match=reason):
        convgemm.conv2d(x, wt, b, algorithm=NAME, **args)
    assert_close(convgemm.conv2d(x, wt, b, **args), conv2d_ref(x, wt, b, **args), dtype, what)


def test_channel_slice_is_read_in_place():
    # a channel slice of an NCHW batch: the descriptor takes its strides, no copy
    big, _, b = _inputs(2, 32, 8, 16, 16, 1, 1, torch.float16)
    _, wt, b = _inputs(2, 16, 8, 16, 32, 1, 1, torch.float16)
    x = big[:, 8:24]
    assert not x.is_contiguous()
    assert convgemm.explain(x, wt, b)["algorithm"] == NAME
    assert_close(convgemm.conv2d(x, wt, b), conv2d_ref(x, wt, b), torch.float16, "slice")


def test_planes_view_only_for_whole_planes():
    # a 1x1 layer over rows of 12 pixels (24 bytes) is read as planes of 96; a column slice of a
    # wider tensor has rows that are not back to back, so it goes through the copy
    x, wt, b = _inputs(2, 16, 8, 12, 32, 1, 1, torch.float16)
    plan = convgemm.explain(x, wt, b)
    assert plan["algorithm"] == NAME
    prob = plan["problem"]
    flat = ALGORITHMS[NAME].planes(prob)
    assert (flat.h, flat.w, flat.p, flat.q) == (1, 96, 1, 96) and (prob.p, prob.q) == (8, 12)
    y = convgemm.conv2d(x, wt, b)
    assert y.shape == (2, 32, 8, 12) and y.is_contiguous()
    assert_close(y, conv2d_ref(x, wt, b), torch.float16, "planes")
    big, _, _ = _inputs(2, 16, 8, 24, 16, 1, 1, torch.float16)
    view = big[..., :16]
    assert convgemm.explain(view, wt, b)["algorithm"] != NAME
    assert_close(convgemm.conv2d(view, wt, b), conv2d_ref(view, wt, b), torch.float16, "column slice")


def test_misaligned_view_goes_through_the_copy():
    big, wt, b = _inputs(2, 16, 8, 17, 16, 1, 1, torch.float16)
    x = big[..., 1:]  # rows of 17 elements: not 16-byte strides
    assert convgemm.explain(x, wt, b)["algorithm"] != NAME
    assert_close(convgemm.conv2d(x, wt, b), conv2d_ref(x, wt, b), torch.float16, "view")


@pytest.mark.gpu
@pytest.mark.parametrize("hw", [56, 28], ids=lambda v: f"{v}x{v}")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_gpu_every_config_and_warm_calls(dtype, hw, monkeypatch):
    # every tuning candidate (persistent and one-tile forms), then the plan's warm launch path on
    # fresh tensors of the same shape: its descriptors are re-based on the new addresses (28 x 28:
    # read as whole planes)
    algo = ALGORITHMS[NAME]
    # 128 filters: the 128-row tiles too
    x, wt, b = _inputs(8, 256, hw, hw, 128, 1, 1, dtype)
    ref = conv2d_ref(x, wt, b)
    prob = convgemm.explain(x, wt, b, algorithm=NAME)["problem"]
    for cfg in algo.configs(prob):
        # (the reference is on the CPU)
        y = torch.full(ref.shape, float("nan"), dtype=dtype, device=DEVICE).contiguous(
            memory_format=torch.contiguous_format
        )
        algo.run(prob, x, wt, b, y, cfg)
        assert_close(y, ref, dtype, cfg.describe())
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "1")
    for _ in range(3):
        x, wt, b = _inputs(8, 256, hw, hw, 128, 1, 1, dtype)
        y = convgemm.conv2d(x, wt, b)
        assert_close(y, conv2d_ref(x, wt, b), dtype, "warm")
    assert convgemm.explain(x, wt, b)["algorithm"] == NAME


# ---------------------------------------------------------------- head_1x1_nchw
HEAD = "head_1x1_nchw"
# (N, C, H, W, K, bias, dtype): heads over NCHW planes, planes not a multiple of the pixel block,
# K and C not powers of two, fp32 (which implicit_gemm_tma_nchw does not take) and fewer than 16
# input channels
HEAD_CASES = [
    (2, 16, 8, 16, 1, True, torch.float16),
    (1, 12, 5, 8, 3, False, torch.float32),
    (2, 32, 4, 12, 16, True, torch.float32),
    (3, 5, 6, 8, 2, True, torch.bfloat16),
]


@pytest.mark.parametrize("case", HEAD_CASES, ids=lambda c: "x".join(map(str, c[:5])) + f"-{str(c[6])[6:]}")
def test_head_planes_matches_reference(case):
    n, c, h, w, k, bias, dtype = case
    x, wt, b = _inputs(n, c, h, w, k, 1, 1, dtype, bias)
    y = convgemm.conv2d(x, wt, b, algorithm=HEAD)
    assert y.is_contiguous(), "an NCHW input gives an NCHW output, written in place"
    assert_close(y, conv2d_ref(x, wt, b), dtype, f"{HEAD} {case}")
    r = convgemm.conv2d(x, wt, b, algorithm=HEAD, activation="relu")
    assert_close(r, torch.relu(conv2d_ref(x, wt, b)), dtype, f"{HEAD} relu {case}")


def test_head_planes_is_an_nchw_candidate():
    # fp32 with 8 channels: no TMA kernel reads it as it is; the head does, with no transposes
    x, wt, b = _inputs(2, 8, 6, 8, 2, 1, 1, torch.float32)
    plan = convgemm.explain(x, wt, b)
    assert plan["algorithm"] == HEAD and plan["problem"].input_nchw
    assert_close(convgemm.conv2d(x, wt, b), conv2d_ref(x, wt, b), torch.float32, "auto")


@pytest.mark.parametrize(
    "what,kw,shape,reason",
    [
        ("3x3", dict(padding=1), (1, 16, 8, 16, 2, 3, 3), "whole planes"),
        ("stride", dict(stride=2), (1, 16, 8, 16, 2, 1, 1), "whole planes"),
        ("wide K", {}, (1, 16, 8, 16, 32, 1, 1), "K = 32"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_head_planes_refuses(what, kw, shape, reason):
    x, wt, b = _inputs(*shape, torch.float16)
    with pytest.raises(ValueError, match=reason):
        convgemm.conv2d(x, wt, b, algorithm=HEAD, **kw)
    xc = x.contiguous(memory_format=torch.channels_last)
    with pytest.raises(ValueError, match="needs an NCHW input"):
        convgemm.conv2d(xc, wt[:, :, :1, :1].contiguous(), b, algorithm=HEAD)


# ---------------------------------------------------------------- depthwise_nchw
DW = "depthwise_nchw"
# (N, C, H, W, multiplier, R, S, stride, padding, dilation, bias, dtype): 3x3 and 7x7, strided with
# odd sizes, dilation, a channel multiplier, planes whose rows are not 16-byte multiples, and fp64
DW_CASES = [
    (2, 8, 9, 10, 1, 3, 3, 1, 1, 1, True, torch.float32),
    (1, 6, 14, 14, 1, 3, 3, 2, 1, 1, False, torch.float16),
    (2, 4, 11, 7, 2, 3, 3, 2, 1, 1, True, torch.bfloat16),
    (1, 5, 12, 13, 1, 7, 7, 1, 3, 1, True, torch.float32),
    (1, 3, 10, 9, 1, 3, 3, 1, 2, 2, False, torch.float64),
    (1, 20, 7, 7, 1, 5, 3, 1, (2, 1), 1, True, torch.float32),
]


@pytest.mark.parametrize("case", DW_CASES, ids=lambda c: "x".join(map(str, c[:9])))
def test_depthwise_planes_matches_reference(case):
    n, c, h, w, mult, r, s, stride, pad, dil, bias, dtype = case
    x, _, _ = _inputs(n, c, h, w, 1, 1, 1, dtype)
    wt = torch.randn(c * mult, 1, r, s, device=DEVICE).to(dtype)
    b = torch.randn(c * mult, device=DEVICE).to(dtype) if bias else None
    kw = dict(stride=stride, padding=pad, dilation=dil, groups=c)
    y = convgemm.conv2d(x, wt, b, algorithm=DW, **kw)
    assert y.is_contiguous(), "an NCHW input gives an NCHW output, written in place"
    ref = conv2d_ref(x, wt, b, **kw)
    assert_close(y, ref, dtype, f"{DW} {case}")
    assert_close(convgemm.conv2d(x, wt, b, algorithm=DW, activation="relu", **kw), torch.relu(ref), dtype, "relu")


def test_depthwise_planes_is_the_nchw_choice_for_any_strides():
    # a channel slice of 14x14 planes (392-byte planes: no TMA view) is still read as it is
    big, _, _ = _inputs(2, 32, 14, 14, 1, 1, 1, torch.float16)
    x = big[:, 8:24]
    wt = torch.randn(16, 1, 3, 3, device=DEVICE).to(torch.float16)
    plan = convgemm.explain(x, wt, None, stride=2, padding=1, groups=16)
    assert plan["algorithm"] == DW and plan["problem"].input_nchw
    y = convgemm.conv2d(x, wt, None, stride=2, padding=1, groups=16)
    assert_close(y, conv2d_ref(x, wt, None, stride=2, padding=1, groups=16), torch.float16, "slice")
    # at stride 1 auto keeps the transposes to the NHWC rows kernel (session 32: faster there);
    # forced, the planes kernel still runs it
    dense = big[:, :16].contiguous()
    plan = convgemm.explain(dense, wt, None, padding=1, groups=16)
    assert plan["algorithm"] != DW and not plan["problem"].input_nchw
    y = convgemm.conv2d(dense, wt, None, padding=1, groups=16, algorithm=DW)
    assert_close(y, conv2d_ref(dense, wt, None, padding=1, groups=16), torch.float16, "forced at stride 1")
    # and explain, forced, describes that run (it used to plan as auto did: NHWC, then refuse)
    plan = convgemm.explain(dense, wt, None, padding=1, groups=16, algorithm=DW)
    assert plan["algorithm"] == DW and plan["problem"].input_nchw
    # channels_last input stays on the NHWC kernels, and forcing this one says why
    xc = x.contiguous(memory_format=torch.channels_last)
    assert convgemm.explain(xc, wt, None, padding=1, groups=16)["algorithm"] != DW
    with pytest.raises(ValueError, match="needs an NCHW input"):
        convgemm.conv2d(xc, wt, None, padding=1, groups=16, algorithm=DW)
    # a dense or grouped (not depthwise) NCHW layer is refused with the reason
    with pytest.raises(ValueError, match="depthwise layers only"):
        convgemm.conv2d(x, torch.randn(16, 4, 3, 3, device=DEVICE).to(torch.float16), padding=1, groups=4,
                        algorithm=DW)  # fmt: skip


def test_channels_last_weight_gives_a_channels_last_result():
    """PyTorch's rule: a channels_last weight makes the result channels_last even from an NCHW
    input. Auto then leaves the NCHW readers (their NCHW result would need a transpose after) and
    a forced one's NCHW result is transposed (Inductor's fake kernels promise these strides: a
    mismatch failed ``test_inductor_lowering_on_a_fused_network``). That the plan's replay hands
    the kernel the first call's strides: ``test_plan_layouts.py``."""
    x, _, _ = _inputs(2, 16, 14, 14, 1, 1, 1, torch.float16)
    wt = torch.randn(16, 1, 3, 3, device=DEVICE).to(torch.float16).to(memory_format=torch.channels_last)
    kw = dict(stride=2, padding=1, groups=16)
    ref = conv2d_ref(x, wt, None, **kw)
    assert torch.nn.functional.conv2d(x.float().cpu(), wt.float().cpu(), **kw).is_contiguous(
        memory_format=torch.channels_last
    )
    assert convgemm.explain(x, wt, None, **kw)["algorithm"] != DW
    for algorithm in ("auto", DW):
        y = convgemm.conv2d(x, wt, None, algorithm=algorithm, **kw)
        assert y.is_contiguous(memory_format=torch.channels_last) and not y.is_contiguous(), algorithm
        assert_close(y, ref, torch.float16, algorithm)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_gpu_depthwise_planes_every_config(dtype, monkeypatch):
    algo = ALGORITHMS[DW]
    for c, hw, r, stride in ((144, 56, 3, 1), (576, 14, 3, 2), (192, 28, 7, 1)):
        x, _, _ = _inputs(4, c, hw, hw, 1, 1, 1, dtype)
        wt = torch.randn(c, 1, r, r, device=DEVICE).to(dtype)
        b = torch.randn(c, device=DEVICE).to(dtype)
        kw = dict(stride=stride, padding=r // 2, groups=c)
        ref = conv2d_ref(x, wt, b, **kw)
        prob = convgemm.explain(x, wt, b, algorithm=DW, **kw)["problem"]
        for cfg in algo.configs(prob):
            y = torch.full(ref.shape, float("nan"), dtype=dtype, device=DEVICE)
            algo.run(prob, x, wt, b, y, cfg)
            assert_close(y, ref, dtype, f"{c}@{hw} {cfg.describe()}")
        monkeypatch.setenv("CONVGEMM_AUTOTUNE", "1")
        for _ in range(2):  # the tuned plan's warm launch on fresh tensors
            x, _, _ = _inputs(4, c, hw, hw, 1, 1, 1, dtype)
            assert_close(convgemm.conv2d(x, wt, b, **kw), conv2d_ref(x, wt, b, **kw), dtype, "warm")
        monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")


# ---------------------------------------------------------------- gemm_1x1_nchw
G1 = "gemm_1x1_nchw"
# (N, C, H, W, K, bias, dtype): planes the TMA boxes cannot take (7x7, 14x14: rows and planes
# not 16-byte multiples), planes whose pixel tiles cross images, C not a multiple of the K tile,
# K not of the M tile, fp32, fp64 and bf16 (upcast under the interpreter)
G1_CASES = [
    (2, 16, 7, 7, 24, True, torch.float16),
    (1, 40, 14, 14, 20, False, torch.float16),
    (3, 20, 5, 5, 8, True, torch.float32),
    (2, 32, 4, 6, 36, True, torch.bfloat16),
    (2, 24, 3, 8, 16, False, torch.float32),
    (2, 12, 5, 5, 7, True, torch.float64),
]


@pytest.mark.parametrize("case", G1_CASES, ids=lambda c: "x".join(map(str, c[:5])) + f"-{str(c[6])[6:]}")
def test_gemm_1x1_nchw_matches_reference(case):
    n, c, h, w, k, bias, dtype = case
    x, wt, b = _inputs(n, c, h, w, k, 1, 1, dtype, bias)
    plan = convgemm.explain(x, wt, b, algorithm=G1)
    assert plan["algorithm"] == G1 and plan["problem"].input_nchw
    y = convgemm.conv2d(x, wt, b, algorithm=G1)
    assert y.is_contiguous(), "an NCHW input gives an NCHW output, written in place"
    assert_close(y, conv2d_ref(x, wt, b), dtype, f"{G1} {case}")
    y = convgemm.conv2d(x, wt, b, algorithm=G1, activation="relu")
    assert_close(y, torch.relu(conv2d_ref(x, wt, b)), dtype, f"{G1} {case} relu")


def test_gemm_1x1_nchw_persistent_form():
    """The persistent kernel (a program walks several tiles) over the same loaders and store."""
    import dataclasses

    from convgemm.functional import _prepare

    algo = ALGORITHMS[G1]
    x, wt, b = _inputs(3, 16, 7, 7, 24, 1, 1, torch.float32)
    prob, xn, y = _prepare(x, wt, b, (1, 1), (0, 0), (1, 1), 1, algorithm=G1)
    algo.run(prob, xn, wt, b, y, dataclasses.replace(algo.default_config(prob), persistent=1))
    assert_close(y, conv2d_ref(x, wt, b), torch.float32, "persistent")


def test_gemm_1x1_nchw_reads_slices_in_place():
    """A channel slice and a batch slice keep dense planes: read as they are, with their own
    strides (a slice starting one 14x14 fp16 plane in is 8-byte aligned: runs of 4 pixels)."""
    x, wt, b = _inputs(3, 33, 14, 14, 24, 1, 1, torch.float16)
    xs = x[1:, 1:]
    wt = wt[:, :32].contiguous()
    assert G1 in convgemm.explain(xs, wt, b, algorithm=G1)["algorithm"]
    y = convgemm.conv2d(xs, wt, b, algorithm=G1)
    assert_close(y, conv2d_ref(xs, wt, b), torch.float16, "slice")
    algo = ALGORITHMS[G1]
    assert algo.vec(xs, y) == 4 and algo.vec(x, torch.empty(3, 24, 14, 14, dtype=torch.float16)) == 4
    assert algo.vec(x[:, :, :, :].float(), torch.empty(3, 24, 14, 14)) == 4  # 16 bytes at most
    x7 = torch.randn(2, 8, 7, 7, dtype=torch.float16)
    assert algo.vec(x7, torch.empty(2, 8, 7, 7, dtype=torch.float16)) == 1  # 49-pixel planes
    x28 = torch.randn(2, 8, 28, 28, dtype=torch.float16)
    assert algo.vec(x28, torch.empty(2, 8, 28, 28, dtype=torch.float16)) == 8


G1_REFUSED = [
    ("3x3 filter", dict(), (1, 16, 8, 8, 16, 3), "1x1 filters"),
    ("stride 2", dict(stride=2), (1, 16, 8, 8, 16, 1), "1x1 filters at stride 1"),
    ("groups", dict(groups=2), (1, 16, 8, 8, 16, 1), "groups = 2"),
    ("channels_last input", dict(cl=True), (1, 16, 8, 8, 16, 1), "NCHW input kept as it is"),
    ("rows not back to back", dict(crop=True), (1, 16, 8, 8, 16, 1), "dense planes"),
]


@pytest.mark.parametrize("what,kw,shape,reason", G1_REFUSED, ids=[t[0] for t in G1_REFUSED])
def test_gemm_1x1_nchw_refuses(what, kw, shape, reason):
    n, c, h, w, k, r = shape
    groups = kw.get("groups", 1)
    x = torch.randn(n, c, h, w, device=DEVICE).to(torch.float16)
    if kw.get("cl"):
        x = x.contiguous(memory_format=torch.channels_last)
    if kw.get("crop"):
        x = x[:, :, :, : w - 2]
    wt = torch.randn(k, c // groups, r, r, device=DEVICE).to(torch.float16)
    with pytest.raises(ValueError, match=reason):
        convgemm.conv2d(x, wt, None, stride=kw.get("stride", 1), groups=groups, algorithm=G1)


def test_gemm_1x1_nchw_is_offered_where_it_won():
    """The tuner gets gemm_1x1_nchw (and auto keeps an NCHW input for it) only on the planes where
    it won on the GPU (``Gemm1x1Nchw.wanted``): 14x14 (no TMA view, 4 pixels a load), not 7x7
    (one pixel a load), not 16x16 (the TMA reader's). Untuned, a 14x14 layer still goes through
    the transposes: the heuristic never picks it."""
    algo = ALGORITHMS[G1]
    assert algo.CANDIDATES

    def prob(hw):
        return convgemm.explain(*_inputs(2, 32, hw, hw, 32, 1, 1, torch.float16), algorithm=G1)["problem"]

    p14, p7, p16 = prob(14), prob(7), prob(16)
    assert algo.keeps_nchw(p14) and algo.configs(p14)
    assert not algo.keeps_nchw(p7) and algo.configs(p7) == []
    assert p16.input_tma_ok and not algo.keeps_nchw(p16) and algo.configs(p16) == []
    x, wt, b = _inputs(2, 32, 14, 14, 32, 1, 1, torch.float16)
    plan = convgemm.explain(x, wt, b)
    assert plan["algorithm"] != G1 and not plan["problem"].input_nchw


def test_auto_keeps_nchw_for_the_reader_that_can_read_it(monkeypatch):
    """Each NCHW reader says from the problem's facts whether it can read the input: a 14x14
    fp16 plane is 392 bytes, so the TMA view is refused (input_tma_ok False) while the planes are
    dense (input_dense). With gemm_1x1_nchw offered, a tuned auto call keeps such an input for
    it alone; untuned, it does not keep it (gemm_1x1_nchw is not a heuristic pick), and nothing
    is kept for planes that are not dense."""
    x, wt, b = _inputs(2, 32, 14, 14, 32, 1, 1, torch.float16)
    plan = convgemm.explain(x, wt, b, algorithm=G1)
    assert plan["problem"].input_dense and not plan["problem"].input_tma_ok
    assert "16-byte multiples" in ALGORITHMS[NAME].supports(plan["problem"])
    assert "16-byte aligned planes" in ALGORITHMS[HEAD].supports(plan["problem"])
    plan = convgemm.explain(x, wt, b)
    assert plan["algorithm"] != G1 and not plan["problem"].input_nchw, "untuned: nothing may pick it"
    # tuned (which the interpreter never does): kept for it, and the tuner's candidates are the
    # NCHW readers that support it, gemm_1x1_nchw alone
    monkeypatch.setattr(convgemm.functional, "autotune_enabled", lambda: True)
    args = ((1, 1), (0, 0), (1, 1), 1)
    prob, xn, _ = convgemm.functional._prepare(x, wt, b, *args)
    assert prob.input_nchw and xn is x
    assert [a.name for a in ALGORITHMS.values() if a.reads_nchw and a.supports(prob) is None] == [G1]
    prob, xn, _ = convgemm.functional._prepare(x[:, :, :, :12], wt, b, *args)
    assert not prob.input_nchw and xn is not x, "rows not back to back: no reader takes it"
    x16, wt16, b16 = _inputs(2, 32, 16, 16, 32, 1, 1, torch.float16)
    p16 = convgemm.explain(x16, wt16, b16)["problem"]
    assert p16.input_nchw and p16.input_tma_ok and p16.input_dense, "both readers can read 16x16 planes"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_gpu_gemm_1x1_nchw_every_config(dtype, monkeypatch):
    """ResNet-50's 14x14 and 7x7 1x1 layers (batch 4): every config it would offer the tuner,
    then warm calls of the forced plan on fresh tensors."""
    algo = ALGORITHMS[G1]
    monkeypatch.setattr(type(algo), "CANDIDATES", True)
    for c, hw, k in ((1024, 14, 256), (256, 14, 1024), (2048, 7, 512), (96, 28, 40)):
        x, wt, b = _inputs(4, c, hw, hw, k, 1, 1, dtype)
        ref = conv2d_ref(x, wt, b)
        prob = convgemm.explain(x, wt, b, algorithm=G1)["problem"]
        for cfg in algo.configs(prob):
            y = torch.full(ref.shape, float("nan"), dtype=dtype, device=DEVICE)
            algo.run(prob, x, wt, b, y, cfg)
            assert_close(y, ref, dtype, f"{c}@{hw} {cfg.describe()}")
        for _ in range(2):
            x, _, _ = _inputs(4, c, hw, hw, k, 1, 1, dtype)
            assert_close(convgemm.conv2d(x, wt, b, algorithm=G1), conv2d_ref(x, wt, b), dtype, "warm")
