"""conv2d against the float64 reference: the shape matrix x dtypes x layouts x algorithms."""

import pytest
import torch
from cases import CASES, case_id
from conftest import DEVICE
from reference import assert_close, conv2d_ref

import convgemm
from convgemm.problem import ConvProblem

MODES = ["fp32", "tf32", "fp16", "bf16"]
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@pytest.fixture(autouse=True)
def _no_tuning(monkeypatch):
    # tests check numbers, not speed: use the heuristic choice (the tuner has its own tests)
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")


@pytest.fixture
def tf32_mode(request):
    """Set cuDNN's TF32 flag for the mode under test and restore it after."""
    old = torch.backends.cudnn.allow_tf32
    yield lambda m: setattr(torch.backends.cudnn, "allow_tf32", m == "tf32")
    torch.backends.cudnn.allow_tf32 = old


def make(case, dtype, channels_last=False, device=DEVICE):
    n, c, h, w, k, r, s, stride, padding, dilation, groups, has_bias = case
    x = torch.randn(n, c, h, w, device=device).to(dtype)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    wt = torch.randn(k, c // groups, r, s, device=device).to(dtype)
    b = torch.randn(k, device=device).to(dtype) if has_bias else None
    return x, wt, b, dict(stride=stride, padding=padding, dilation=dilation, groups=groups)


@pytest.mark.interpreter_share(3, vary=("m", "layout"))
@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
@pytest.mark.parametrize("m", MODES)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_matrix(case, m, layout, tf32_mode):
    tf32_mode(m)
    dtype = DTYPES[m]
    x, w, b, kw = make(case, dtype, layout == "channels_last")
    y = convgemm.conv2d(x, w, b, **kw)
    assert_close(y, conv2d_ref(x, w, b, **kw), dtype, f"{case_id(case)} {m} {layout}")
    want = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    assert y.is_contiguous(memory_format=want)


@pytest.mark.parametrize(
    "algorithm",
    [
        "implicit_gemm",
        "implicit_gemm_tma",
        "gemm_1x1",
        "head_1x1",
        "small_k",
        "width_unfold",
        "depthwise",
        "depthwise_rows",
        "grouped",
        "grouped_tma",
        "narrow_tma",
        "narrow_fold",
        "flat_rows",
    ],
)
@pytest.mark.parametrize("m", ["fp32", "fp16"])
@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.interpreter_share(2, vary=("m",))
def test_every_algorithm(case, m, algorithm, tf32_mode):
    """Each algorithm forced on every case it claims to support; the others must refuse clearly."""
    tf32_mode(m)
    dtype = DTYPES[m]
    x, w, b, kw = make(case, dtype, channels_last=True)
    try:
        y = convgemm.conv2d(x, w, b, **kw, algorithm=algorithm)
    except ValueError as e:
        assert "cannot run" in str(e) and "algorithm='auto'" in str(e)
        pytest.skip(f"{algorithm} does not support this case: {e}")
    assert_close(y, conv2d_ref(x, w, b, **kw), dtype, f"{case_id(case)} {m} {algorithm}")


def test_tma_algorithms_are_exercised():
    """The matrix must contain cases each TMA algorithm accepts, or test_every_algorithm proves little."""
    from convgemm.conv.fprop import ALGORITHMS

    counts = dict.fromkeys(ALGORITHMS, 0)
    for case in CASES:
        x, w, b, kw = make(case, torch.float16, channels_last=True, device="cpu")
        prob = ConvProblem.from_tensors(x, w, b, **kw)
        from dataclasses import replace

        from convgemm.conv.layout import tma_aligned

        prob = replace(prob, tma_ok=True, input_tma_ok=tma_aligned(x, prob.cg), input_dense=True,
                       input_tma_rows_ok=True)  # fmt: skip
        for name, algo in ALGORITHMS.items():
            counts[name] += algo.supports(prob) is None
    assert counts["gemm_1x1"] >= 1 and counts["implicit_gemm_tma"] >= 4, counts
    assert counts["width_unfold"] >= 2, counts
    assert counts["head_1x1"] >= 1 and counts["grouped_tma"] >= 2, counts
    assert counts["narrow_tma"] >= 4, counts
    assert counts["narrow_fold"] >= 1, counts
    assert counts["flat_rows"] >= 4, counts


@pytest.mark.parametrize(
    "case",
    [
        (2, 3, 16, 18, 16, 7, 7, 2, 3, 1, 1, True),  # a ResNet stem: the stride-phase view of the unfolded rows
        (1, 3, 19, 21, 24, 11, 11, 4, 2, 1, 1, True),  # AlexNet's: 19 rows rounded up to 20 (zeros)
        (2, 1, 9, 12, 16, 5, 5, 1, 2, (2, 1), 1, False),  # one channel, dilated rows
        (1, 4, 10, 9, 32, 3, 3, (1, 2), 1, (1, 2), 1, True),  # dilated columns, column stride 2
        (1, 17, 6, 7, 16, 1, 3, 1, (0, 1), 1, 1, False),  # 17 channels: S*C = 51, padded to 64
    ],
    ids=case_id,
)
@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
@pytest.mark.parametrize("m", ["fp16", "fp32", "tf32"])
@pytest.mark.interpreter_share(3, vary=("m",))
def test_width_unfold(case, layout, m, tf32_mode):
    """``width_unfold`` (first layers: each output column's S taps gathered into one wide pixel,
    then an R x 1 convolution on the TMA kernel) against the float64 reference, forced."""
    tf32_mode(m)
    dtype = DTYPES[m]
    x, w, b, kw = make(case, dtype, layout == "channels_last")
    y = convgemm.conv2d(x, w, b, **kw, algorithm="width_unfold")
    assert_close(y, conv2d_ref(x, w, b, **kw), dtype, f"{case_id(case)} {m} {layout}")


# (N, C, H, W, K, stride, padding, input layout, output layout): the flat path (dense NHWC in and
# out) and each reason to leave it
HEAD_CASES = [
    (2, 16, 9, 7, 1, 1, 0, "channels_last", "channels_last"),  # a segmentation head: flat
    (2, 16, 9, 7, 2, 1, 0, "channels_last", "channels_last"),
    (1, 32, 5, 6, 16, 1, 0, "channels_last", "channels_last"),  # the widest it takes
    (2, 1, 5, 6, 3, 1, 0, "channels_last", "channels_last"),  # one input channel
    (2, 12, 6, 5, 5, 1, 0, "nchw", "nchw"),  # NCHW: the input transposed, the output written in place
    (3, 16, 6, 5, 16, (2, 1), (0, 1), "channels_last", "channels_last"),  # strided and padded
    (1, 8, 7, 7, 4, 3, 1, "sliced", "channels_last"),  # a cropped view: rows not evenly strided
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize("case", HEAD_CASES, ids=lambda c: f"c{c[1]}k{c[4]}_s{c[5]}p{c[6]}_{c[7]}")
def test_head_1x1(case, dtype):
    """``head_1x1`` (tiny 1x1 heads: per-pixel dot products on the CUDA cores) against the float64
    reference, with bias and with the fused ReLU."""
    n, c, h, w, k, stride, padding, layout, _ = case
    if layout == "sliced":
        x = torch.randn(n, c + 3, h + 2, w + 4, device=DEVICE).to(dtype)
        x = x.to(memory_format=torch.channels_last)[:, 1 : c + 1, 1 : h + 1, 2 : w + 2]
    else:
        x = torch.randn(n, c, h, w, device=DEVICE).to(dtype)
        if layout == "channels_last":
            x = x.to(memory_format=torch.channels_last)
    wt = torch.randn(k, c, 1, 1, device=DEVICE).to(dtype)
    b = torch.randn(k, device=DEVICE).to(dtype)
    for bias in (b, None):
        ref = conv2d_ref(x, wt, bias, stride=stride, padding=padding)
        y = convgemm.conv2d(x, wt, bias, stride=stride, padding=padding, algorithm="head_1x1")
        assert_close(y, ref, dtype, f"{case} {dtype}")
        y = convgemm.conv2d(x, wt, bias, stride=stride, padding=padding, algorithm="head_1x1", activation="relu")
        assert_close(y, torch.relu(ref), dtype, f"{case} {dtype} relu")
    if layout == "nchw":
        assert y.is_contiguous()


def test_head_1x1_refuses():
    """What the head kernel does not take, each with its reason."""
    algo = convgemm.conv.fprop.ALGORITHMS["head_1x1"]

    def prob(c, k, r=1, s=1, groups=1):
        x, w = torch.empty(1, c, 8, 8), torch.empty(k, c // groups, r, s)
        return ConvProblem.from_tensors(x, w, None, groups=groups)

    assert algo.supports(prob(16, 1)) is None
    assert "1x1 filters" in algo.supports(prob(16, 1, 3, 3))
    assert "groups" in algo.supports(prob(16, 4, groups=2))
    assert "K <= 16" in algo.supports(prob(16, 17))
    assert "C <= 32" in algo.supports(prob(33, 1))
    assert algo.supports(prob(32, 16)) is None  # the widest it takes


@pytest.mark.parametrize(
    "case",
    [
        (2, 32, 9, 7, 32, 3, 3, 1, 1, 1, 8, True),  # ResNeXt-like: 4 channels per group
        (1, 64, 8, 10, 64, 3, 3, 2, 1, 1, 8, True),  # strided: the stride-phase view of 8 groups at once
        (2, 48, 6, 6, 96, 3, 3, 1, 1, 1, 12, False),  # 12 groups (only gt 2 and 4 divide them), 8 outputs each
        (1, 32, 7, 7, 64, 1, 1, 1, 0, 1, 8, True),  # a grouped 1x1
        (1, 32, 9, 9, 32, 3, 3, 1, 2, 2, 4, True),  # dilated, 8 channels per group
    ],
    ids=case_id,
)
@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
def test_grouped_tma(case, layout):
    """``grouped_tma`` (gt groups as one on the TMA kernel, the weight block-diagonal) against the
    float64 reference, forced, and with the fused ReLU."""
    x, w, b, kw = make(case, torch.float16, layout == "channels_last")
    ref = conv2d_ref(x, w, b, **kw)
    assert_close(convgemm.conv2d(x, w, b, **kw, algorithm="grouped_tma"), ref, torch.float16, case_id(case))
    y = convgemm.conv2d(x, w, b, **kw, algorithm="grouped_tma", activation="relu")
    assert_close(y, torch.relu(ref), torch.float16, case_id(case) + " relu")


def test_grouped_tma_refuses():
    """What grouped_tma does not take, each with its reason; and the group counts it merges."""
    from dataclasses import replace

    algo = convgemm.conv.fprop.ALGORITHMS["grouped_tma"]

    def prob(c, k, groups, dtype=torch.float16, **kw):
        x, w = torch.empty(1, c, 12, 12, dtype=dtype), torch.empty(k, c // groups, 3, 3, dtype=dtype)
        p = ConvProblem.from_tensors(x, w, None, groups=groups, **kw)
        return replace(p, tma_ok=True, input_tma_rows_ok=True, input_phases_ok=True)

    assert algo.supports(prob(128, 128, 32)) is None
    assert algo.group_tiles(prob(128, 128, 32)) == [16, 8]  # 64 and 32 channels per super-group
    assert algo.group_tiles(prob(512, 512, 32)) == [4, 2]
    assert "groups = 1" in algo.supports(prob(16, 16, 1))
    assert "depthwise" in algo.supports(prob(16, 16, 16))
    assert "fill implicit_gemm_tma" in algo.supports(prob(128, 128, 2))
    assert "fp16, bf16 or fp32" in algo.supports(prob(32, 32, 8, dtype=torch.float64))
    assert "TMA" in algo.supports(replace(prob(32, 32, 8), tma_ok=False))
    assert "odd" in algo.supports(prob(9, 9, 3))


def test_untuned_rgb_stems_take_the_width_unfold(monkeypatch):
    """With tuning off, a 3-channel stem of 64 filters in a 16-bit dtype takes the unfold; 32
    filters, 4 channels or fp32 stay on small_k."""
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")

    def pick(c, k, dtype=torch.float16):
        x = torch.randn(1, c, 16, 16, device=DEVICE).to(dtype).to(memory_format=torch.channels_last)
        w = torch.randn(k, c, 7, 7, device=DEVICE).to(dtype)
        return convgemm.explain(x, w, None, stride=2, padding=3)["algorithm"]

    assert pick(3, 64) == "width_unfold"
    assert pick(3, 32) == "small_k"
    assert pick(4, 64) == "small_k"
    assert pick(3, 64, torch.float32) == "small_k"


def test_width_unfold_refuses():
    """What the unfold does not take, each with its reason."""
    from dataclasses import replace

    algo = convgemm.conv.fprop.ALGORITHMS["width_unfold"]

    def prob(c, k, r, s, groups=1, dtype=torch.float16, **kw):
        x, w = torch.empty(1, c, 12, 12, dtype=dtype), torch.empty(k, c // groups, r, s, dtype=dtype)
        return replace(ConvProblem.from_tensors(x, w, None, groups=groups, **kw), tma_ok=True)

    assert algo.supports(prob(3, 16, 7, 7, stride=2)) is None
    assert "groups" in algo.supports(prob(4, 16, 3, 3, groups=2))
    assert "one column" in algo.supports(prob(3, 16, 3, 1))
    assert "over 64" in algo.supports(prob(8, 16, 3, 9))
    assert algo.supports(prob(3, 16, 7, 7, dtype=torch.float32)) is None
    assert "fp16, bf16 or fp32" in algo.supports(prob(3, 16, 7, 7, dtype=torch.float64))
    assert "TMA" in algo.supports(replace(prob(3, 16, 7, 7), tma_ok=False))
    assert "16 bytes" in algo.supports(prob(3, 12, 7, 7))  # K = 12: the TMA output store


@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
def test_sliced_views(layout):
    """Non-contiguous inputs: a crop of a larger tensor, in both layouts, and a strided weight."""
    big = torch.randn(3, 20, 14, 15, device=DEVICE)
    if layout == "channels_last":
        big = big.to(memory_format=torch.channels_last)
    x = big[1:, 2:18, 1:12, 3:14]  # [2, 16, 11, 11] view
    wbig = torch.randn(24, 16, 3, 5, device=DEVICE)
    w = wbig[::2, :, :, 1:4]  # [12, 16, 3, 3], non-contiguous
    b = torch.randn(12, device=DEVICE)
    y = convgemm.conv2d(x, w, b, padding=1, algorithm="auto")
    assert_close(y, conv2d_ref(x, w, b, padding=1), torch.float32)


# (C, K, R, S, padding, groups): a dense 3x3, a 1x1, few output channels 3x3 (the heads and the
# fold), a depthwise 3x3, an RGB stem: between them every algorithm that takes fp32 sees one
STRIDED_BIAS_CASES = [(16, 16, 3, 3, 1, 1), (16, 16, 1, 1, 0, 1), (16, 4, 3, 3, 1, 1), (16, 16, 3, 3, 1, 16),
                      (3, 16, 3, 3, 1, 1)]  # fmt: skip


@pytest.mark.parametrize("case", STRIDED_BIAS_CASES, ids=str)
def test_strided_bias_every_algorithm(case):
    """A sliced bias (``b[::2]``, stride 2) reads its own elements: kernels read ``bias[k]`` at
    ``bias_ptr + k``, so convgemm makes it dense first (it read the wrong elements before session
    39), on every algorithm that takes the problem and on a repeat call (the plan path)."""
    c, k, r, s, pad, groups = case
    x = torch.randn(2, c, 7, 9, device=DEVICE).to(memory_format=torch.channels_last)
    w = torch.randn(k, c // groups, r, s, device=DEVICE)
    b = torch.randn(2 * k, device=DEVICE)[::2]
    assert b.stride(0) == 2
    ref = conv2d_ref(x, w, b, padding=pad, groups=groups)
    ran = []
    for name in ["auto", *convgemm.algorithms()]:
        try:
            for _ in range(2):
                y = convgemm.conv2d(x, w, b, padding=pad, groups=groups, algorithm=name)
        except ValueError as e:
            assert "cannot run" in str(e), e
            continue
        assert_close(y, ref, torch.float32, f"{name} {case}")
        ran.append(name)
    assert len(ran) >= 3, ran


def test_strided_bias_conv1d_conv3d():
    b = torch.randn(8, device=DEVICE)[::2]
    x1, w1 = torch.randn(1, 16, 20, device=DEVICE), torch.randn(4, 16, 3, device=DEVICE)
    # the float64 references on the CPU (assert_close compares there; CUDA float64 is also slow)
    assert_close(convgemm.conv1d(x1, w1, b, padding=1), torch.nn.functional.conv1d(x1.double().cpu(),
                 w1.double().cpu(), b.double().cpu(), padding=1), torch.float32, "conv1d")  # fmt: skip
    x3, w3 = torch.randn(1, 16, 4, 6, 6, device=DEVICE), torch.randn(4, 16, 3, 3, 3, device=DEVICE)
    assert_close(convgemm.conv3d(x3, w3, b, padding=1), torch.nn.functional.conv3d(x3.double().cpu(),
                 w3.double().cpu(), b.double().cpu(), padding=1), torch.float32, "conv3d")  # fmt: skip


@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
def test_broadcast_input_takes_no_tma(layout):
    """One image expanded to a batch (stride 0 along N): correct, and never read through a TMA
    descriptor (a zero stride's encoding is not documented)."""
    x1 = torch.randn(1, 16, 7, 9, device=DEVICE)
    if layout == "channels_last":
        x1 = x1.to(memory_format=torch.channels_last)
    x = x1.expand(3, 16, 7, 9)
    w, b = torch.randn(16, 16, 3, 3, device=DEVICE), torch.randn(16, device=DEVICE)
    prob = convgemm.explain(x, w, b, padding=1)["problem"]
    # NCHW: converted to a dense channels_last copy first (TMA may read that), not kept as it is
    assert not prob.input_nchw and (layout == "nchw" or not prob.input_tma_ok)
    assert_close(convgemm.conv2d(x, w, b, padding=1), conv2d_ref(x, w, b, padding=1), torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_dtypes_and_unbatched(dtype):
    x = torch.randn(8, 9, 10, device=DEVICE).to(dtype)
    w = torch.randn(16, 8, 3, 3, device=DEVICE).to(dtype)
    y = convgemm.conv2d(x, w, padding=1)
    ref = conv2d_ref(x.unsqueeze(0), w, padding=1).squeeze(0)
    assert_close(y, ref, dtype)


@pytest.mark.parametrize("algorithm", ["depthwise", "depthwise_rows"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
def test_depthwise_dtypes(dtype, layout, algorithm):
    x = torch.randn(2, 16, 9, 10, device=DEVICE).to(dtype)
    if layout == "channels_last":
        x = x.to(memory_format=torch.channels_last)
    w = torch.randn(32, 1, 5, 5, device=DEVICE).to(dtype)
    b = torch.randn(32, device=DEVICE).to(dtype)
    y = convgemm.conv2d(x, w, b, padding=2, groups=16, algorithm=algorithm)
    assert_close(y, conv2d_ref(x, w, b, padding=2, groups=16), dtype)


def test_weight_memory_format_decides_output_format():
    """cuDNN's rule: a channels_last weight gives a channels_last output even for NCHW input."""
    x = torch.randn(2, 8, 6, 7, device=DEVICE)
    w = torch.randn(8, 8, 3, 3, device=DEVICE).to(memory_format=torch.channels_last)
    y = convgemm.conv2d(x, w, padding=1)
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert_close(y, conv2d_ref(x, w, padding=1), torch.float32)


def test_empty_batch_and_empty_reduction():
    x = torch.randn(0, 4, 5, 5, device=DEVICE)
    w = torch.randn(6, 4, 3, 3, device=DEVICE)
    y = convgemm.conv2d(x, w)
    assert y.shape == (0, 6, 3, 3)
    # C = 0 channels: PyTorch returns the bias broadcast
    x0 = torch.randn(2, 0, 5, 5, device=DEVICE)
    w0 = torch.randn(3, 0, 3, 3, device=DEVICE)
    b0 = torch.randn(3, device=DEVICE)
    y0 = convgemm.conv2d(x0, w0, b0)
    assert torch.equal(y0.cpu(), b0.cpu().view(1, 3, 1, 1).expand(2, 3, 3, 3))


# ---------------------------------------------------------------- the reference PR's regressions
def test_regression_bias_on_single_pixel():
    """Bias with input [1,1,1,1], weight [32,1,3,3], bias [32], padding 1."""
    x = torch.randn(1, 1, 1, 1, device=DEVICE)
    w = torch.randn(32, 1, 3, 3, device=DEVICE)
    b = torch.randn(32, device=DEVICE)
    y = convgemm.conv2d(x, w, b, padding=1)
    assert_close(y, conv2d_ref(x, w, b, padding=1), torch.float32)


@pytest.mark.parametrize("shape", [(1, 18, 17, 1), (4, 72, 53, 56)])
def test_regression_nchw_to_nhwc(shape):
    """The NCHW -> NHWC conversion on [1,18,17,1] and [4,72,53,56] (the latter on the GPU only
    at full size: under the interpreter it is cropped to keep CI fast)."""
    n, c, h, w = shape
    if DEVICE == "cpu" and h * w > 1000:
        h, w = 13, 14
    x = torch.randn(n, c, h, w, device=DEVICE)
    wt = torch.randn(8, c, 1, 1, device=DEVICE)
    y = convgemm.conv2d(x, wt)
    assert_close(y, conv2d_ref(x, wt), torch.float32)
    wt3 = torch.randn(8, c, 3, 3, device=DEVICE)
    y3 = convgemm.conv2d(x, wt3, padding=1)
    assert_close(y3, conv2d_ref(x, wt3, padding=1), torch.float32)


def test_regression_padding_2_on_6x6():
    """Input [4,16,6,6], weight [16,16,3,3], padding 2."""
    x = torch.randn(4, 16, 6, 6, device=DEVICE)
    w = torch.randn(16, 16, 3, 3, device=DEVICE)
    y = convgemm.conv2d(x, w, padding=2)
    assert_close(y, conv2d_ref(x, w, padding=2), torch.float32)


def test_untuned_resnext_layers_take_grouped_tma(monkeypatch):
    """With tuning off, 16-bit grouped layers of 4-16 channels per group take grouped_tma (the
    tuner's pick on the H200); fp32 and 2 channels per group keep their earlier kernels."""
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")

    def pick(c, groups, dtype=torch.float16):
        x = torch.randn(1, c, 8, 8, device=DEVICE).to(dtype).to(memory_format=torch.channels_last)
        w = torch.randn(c, c // groups, 3, 3, device=DEVICE).to(dtype)
        return convgemm.explain(x, w, None, padding=1, groups=groups)["algorithm"]

    assert pick(128, 32) == "grouped_tma"
    assert pick(256, 32) == "grouped_tma"
    assert pick(128, 32, torch.float32) == "implicit_gemm_tma"  # 4 fp32 channels: a TMA box
    assert pick(64, 32) == "grouped"  # 2 channels per group: not timed


@pytest.mark.parametrize(
    "case",
    [
        (2, 48, 6, 7, 24, 3, 3, 1, 1, 1, 1, True),  # 48 channels: 16-channel tiles, or 64 padded
        (1, 144, 5, 9, 16, 3, 1, 1, (1, 0), 1, 1, True),  # R(2+1)D's temporal layer as a 2-D one
    ],
    ids=case_id,
)
def test_tma_forward_padded_k_tile(case):
    """The TMA forward's second K tile (``fprop._padded_bk``): C zero-padded to 64 channels, the
    weight packed to match; every such candidate against float64, with and without the ReLU."""
    from dataclasses import replace

    from convgemm.conv import fprop

    x, w, b, kw = make(case, torch.float16, True)
    prob = replace(ConvProblem.from_tensors(x, w, b, **kw), tma_ok=True, input_tma_ok=True)
    assert fprop._padded_bk(prob) == 64 and fprop._tma_bk(prob) == 16
    algo = fprop.ALGORITHMS["implicit_gemm_tma"]
    ref = conv2d_ref(x, w, b, **kw)
    cfg = replace(algo.default_config(prob), block_k=64)
    for act in ("", "relu"):
        y = torch.full(ref.shape, float("nan"), dtype=torch.float16, device=DEVICE)
        y = y.contiguous(memory_format=torch.channels_last)
        algo.run(replace(prob, activation=act), x.contiguous(memory_format=torch.channels_last), w, b, y, cfg)
        assert_close(y, torch.relu(ref) if act else ref, torch.float16, f"{case_id(case)} bk 64 {act}")


def test_padded_k_tile_rules():
    from convgemm.conv import fprop

    def bk(c, dtype=torch.float16, groups=1, stride=1):
        x, w = torch.empty(1, c, 8, 8, dtype=dtype), torch.empty(32, c // groups, 3, 3, dtype=dtype)
        return fprop._padded_bk(ConvProblem.from_tensors(x, w, None, stride=stride, groups=groups))

    assert [bk(c) for c in (144, 288, 48, 64, 128, 32, 16, 80)] == [64, 64, 64, 0, 0, 0, 0, 0]
    assert bk(288, groups=2) == 0 and bk(144, stride=2) == 0  # grouped; the stride-phase view
    assert bk(48, torch.float32) == 32  # fp32: 128-byte rows are 32 channels
