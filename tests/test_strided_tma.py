"""Strided R x S kernels on the TMA forward, read through the stride-phase view of the input
(``conv.fprop.input_descriptor``; on unless ``CONVGEMM_STRIDED_TMA=0``)."""

import pytest
import torch
from conftest import DEVICE, conv_tensors
from reference import assert_close, conv2d_ref

import convgemm
from convgemm.conv.fprop import ALGORITHMS, Config, spatial_tiles
from convgemm.functional import _prepare
from convgemm.tune.autotune import clear_memo

# (N, C, H, W, K, R, S, stride, padding, dilation, groups)
CASES = [
    (2, 16, 8, 8, 32, 3, 3, 2, 1, 1, 1),  # ResNet's strided 3x3
    (1, 32, 12, 10, 16, 3, 3, 2, 1, 1, 2),  # groups, a non-square image
    (2, 16, 8, 12, 16, 3, 3, (2, 1), 1, 1, 1),  # stride along H only
    (1, 16, 6, 12, 32, 3, 3, (1, 2), (0, 1), 1, 1),  # along W only, asymmetric padding
    (1, 16, 8, 8, 16, 3, 3, 2, 1, 2, 1),  # dilation 2: both taps of a row in one phase
    (1, 16, 12, 12, 16, 5, 5, 3, 2, 1, 1),  # stride 3, three phases
    (2, 16, 8, 8, 32, 7, 7, 2, 3, 1, 1),  # a 7x7 stem: taps reach 2 rows before the image
    (1, 16, 8, 8, 16, 2, 2, 2, 0, 1, 1),  # filter = stride: one tap per phase, no padding
]


@pytest.fixture(autouse=True)
def _strided_tma(monkeypatch):
    monkeypatch.setenv("CONVGEMM_STRIDED_TMA", "1")
    clear_memo()
    yield
    clear_memo()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else []))
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"c{c[1]}k{c[4]}_{c[5]}x{c[6]}_s{c[7]}p{c[8]}d{c[9]}g{c[10]}")
def test_strided_tma_matches_reference(case, dtype):
    x, wt, b, kw = conv_tensors(case, dtype)
    y = convgemm.conv2d(x, wt, b, algorithm="implicit_gemm_tma", **kw)
    assert_close(y, conv2d_ref(x, wt, b, **kw), dtype, f"strided tma {case}")


def test_strided_tma_nchw_input():
    """An NCHW input is transposed to dense NHWC first, which the phase view then reads."""
    x, wt, b, kw = conv_tensors(CASES[0], torch.float32)
    x = x.contiguous()
    y = convgemm.conv2d(x, wt, b, algorithm="implicit_gemm_tma", **kw)
    assert_close(y, conv2d_ref(x, wt, b, **kw), torch.float32, "strided tma, NCHW input")


@pytest.mark.parametrize("variant", ["split_k", "persistent"])
def test_strided_tma_split_k_and_persistent(variant):
    """The phase loader under the split-K and persistent kernels (configs the tuner offers)."""
    x, wt, b, kw = conv_tensors((2, 32, 8, 8, 48, 3, 3, 2, 1, 1, 1), torch.float16)
    prob, xn, _ = _prepare(x, wt, b, 2, 1, 1, 1)
    algo = ALGORITHMS["implicit_gemm_tma"]
    assert algo.supports(prob) is None
    _, tn, th, tw = spatial_tiles(prob, 16)[0]
    extra = {"split_k": 3} if variant == "split_k" else {"persistent": 1}
    cfg = Config(32, 16, 16, 4, 1, tile_n=tn, tile_h=th, tile_w=tw, **extra)
    ref = conv2d_ref(x, wt, b, **kw)
    for _ in range(2):
        y = torch.full(ref.shape, float("nan"), dtype=x.dtype, device=DEVICE).to(memory_format=torch.channels_last)
        algo.run(prob, xn, wt, b, y, cfg)
        assert_close(y, ref, x.dtype, f"strided tma {variant}")


def test_strided_tma_refusals(monkeypatch):
    x, wt, b, kw = conv_tensors(CASES[0], torch.float32)
    # a slice of rows: pixel rows no longer evenly strided, the view is not a reshape
    with pytest.raises(ValueError, match="rows evenly strided"):
        convgemm.conv2d(x[:, :, 1:], wt, b, algorithm="implicit_gemm_tma", **kw)
    # a size that is not a multiple of the stride with groups: the gather pass takes dense layers
    xg, wg, bg, kwg = conv_tensors((1, 32, 9, 10, 16, 3, 3, 2, 1, 1, 2), torch.float32)
    with pytest.raises(ValueError, match="not multiples of the stride"):
        convgemm.conv2d(xg, wg, bg, algorithm="implicit_gemm_tma", **kwg)
    # C/groups not a multiple of 16: a box would cross into the next group or pixel
    x8, w8 = (
        x[:, :8].contiguous(memory_format=torch.channels_last),
        wt[:, :8].contiguous(memory_format=torch.channels_last),
    )
    with pytest.raises(ValueError, match="cannot run"):
        convgemm.conv2d(x8, w8, b, algorithm="implicit_gemm_tma", **kw)
    monkeypatch.setenv("CONVGEMM_STRIDED_TMA", "0")
    clear_memo()
    with pytest.raises(ValueError, match="CONVGEMM_STRIDED_TMA=0"):
        convgemm.conv2d(x, wt, b, algorithm="implicit_gemm_tma", **kw)


def test_phase_view_is_part_of_the_tuning_key():
    """A dense input and a slice of its rows can share a size bucket; only the first has the
    phase view, so they must not share a tuning result (one would pick an algorithm the other
    cannot run). H = 9 (not a multiple of the stride) has the view: its last rows go to the
    gather pass (``phase_tails``)."""
    x, wt, b, kw = conv_tensors(CASES[0], torch.float32)
    p8, _, _ = _prepare(x, wt, b, 2, 1, 1, 1)
    x9 = torch.cat([x, x[:, :, :1]], 2).contiguous(memory_format=torch.channels_last)
    p9, _, _ = _prepare(x9, wt, b, 2, 1, 1, 1)
    ps, _, _ = _prepare(x9[:, :, :8], wt, b, 2, 1, 1, 1)
    assert p8.input_phases_ok and p9.input_phases_ok and not ps.input_phases_ok
    assert p8.key() != ps.key()


def test_heuristic_leaves_strided_kernels_to_the_gather_kernel(monkeypatch):
    """Untuned, a strided 3x3 layer keeps the gather kernel until timings say otherwise."""
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")
    x, wt, b, kw = conv_tensors(CASES[0], torch.float32)
    assert convgemm.explain(x, wt, b, **kw)["algorithm"] == "implicit_gemm"


# dgrad: (N, C, H, W, K, R, S, stride, padding)
DGRAD_CASES = [
    (2, 32, 8, 8, 16, 3, 3, 2, 1),  # ResNet's strided 3x3: phases with 1, 2, 2 and 4 taps
    (1, 16, 12, 12, 16, 3, 3, 2, 0),
    (1, 16, 8, 8, 16, 5, 5, 2, 2),
    (1, 16, 12, 12, 32, 3, 3, 3, 1),  # stride 3: nine phases
    (2, 16, 8, 6, 16, 3, 3, (2, 1), 1),
    (1, 16, 8, 8, 16, 2, 2, 2, 0),
    (1, 16, 8, 8, 16, 7, 7, 2, 3),
    (1, 16, 12, 12, 16, 4, 4, 3, 1),  # phases of 1 to 4 tap-steps (once refused: padding them all wasted 2.25x)
    (1, 16, 12, 12, 16, 2, 2, 3, 0),  # the third phase of each axis has no tap at all: dx is 0 there
    (1, 16, 8, 8, 32, 1, 1, 2, 1),  # a padded 1x1: only the odd rows and columns receive its tap
]


def _spy_dgrad_tma(monkeypatch) -> list[int]:
    from convgemm.conv import backward

    # the counts are the route's own calls: no tuner timing runs, and no plan or memo left by an
    # earlier test in this worker (on the GPU both made the counts depend on the test order)
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")
    clear_memo()
    calls, run = [0], backward.DgradTma.run

    def spy(self, *args, **kwargs):
        calls[0] += 1
        return run(self, *args, **kwargs)

    monkeypatch.setattr(backward.DgradTma, "run", spy)
    return calls


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else []))
@pytest.mark.parametrize("case", DGRAD_CASES, ids=lambda c: f"c{c[1]}k{c[4]}_{c[5]}x{c[6]}_s{c[7]}p{c[8]}")
def test_strided_dgrad_tma_matches_reference(case, dtype, monkeypatch):
    n, c, h, w, k, r, s, stride, pad = case
    calls = _spy_dgrad_tma(monkeypatch)
    wt = torch.randn(k, c, r, s, device=DEVICE).to(dtype).to(memory_format=torch.channels_last)
    p = (h + 2 * pad - r) // stride + 1 if isinstance(stride, int) else None
    shape = torch.nn.functional.conv2d(torch.empty(n, c, h, w, device="meta"), torch.empty(k, c, r, s, device="meta"),
                                       stride=stride, padding=pad).shape  # fmt: skip
    assert p is None or shape[2] == p
    for _ in range(2):  # the second call runs from the plan
        dy = torch.randn(shape, device=DEVICE).to(dtype).to(memory_format=torch.channels_last)
        dx = convgemm.conv2d_input((n, c, h, w), wt, dy, stride=stride, padding=pad)
        ref = torch.nn.grad.conv2d_input((n, c, h, w), wt.double().cpu(), dy.double().cpu(), stride=stride, padding=pad)
        assert_close(dx, ref, dtype, f"strided dgrad tma {case}")
    assert calls[0] == 2


def test_strided_dgrad_tma_non_finite(monkeypatch):
    """NaN and Inf in grad_output reach exactly the dx elements torch's do: each phase multiplies
    only its own taps' boxes (``tma_dgrad_k_range``), and the zero fill past dy's edges is never
    multiplied by a non-finite value of its own."""
    calls = _spy_dgrad_tma(monkeypatch)
    n, c, h, w, k = 1, 16, 8, 8, 16
    wt = torch.randn(k, c, 3, 3, device=DEVICE).to(memory_format=torch.channels_last)
    dy = torch.randn(n, k, 4, 4, device=DEVICE).to(memory_format=torch.channels_last)
    dy[0, 7, 1, 2] = float("nan")
    dy[0, 3, 3, 0] = float("inf")
    dx = convgemm.conv2d_input((n, c, h, w), wt, dy, stride=2, padding=1)
    ref = torch.nn.grad.conv2d_input((n, c, h, w), wt.double().cpu(), dy.double().cpu(), stride=2, padding=1)
    assert calls[0] == 1
    got = dx.double().cpu()
    assert torch.equal(got.isnan(), ref.isnan()) and torch.equal(got.isinf(), ref.isinf())
    fin = ref.isfinite()
    assert_close(got[fin].float(), ref[fin], torch.float32, "finite part")


def test_strided_dgrad_tma_off_and_refused(monkeypatch):
    """Not taken with CONVGEMM_STRIDED_TMA=0, for dilation, sizes off the stride, 16 phases, or an
    unpadded 1x1 kernel (the per-phase forward convolution was faster on the H200)."""
    calls = _spy_dgrad_tma(monkeypatch)
    wt = torch.randn(16, 16, 3, 3, device=DEVICE)
    for size, kw in [((1, 16, 9, 8), {}), ((1, 16, 8, 8), {"dilation": 2, "padding": 2})]:
        dy_shape = torch.nn.functional.conv2d(
            torch.empty(size, device="meta"), wt.to("meta"), stride=2, **{"padding": 1, **kw}
        ).shape
        convgemm.conv2d_input(size, wt, torch.randn(dy_shape, device=DEVICE), stride=2, **{"padding": 1, **kw})
    w1 = torch.randn(32, 16, 1, 1, device=DEVICE)
    convgemm.conv2d_input((1, 16, 8, 12), w1, torch.randn(1, 32, 4, 6, device=DEVICE), stride=2)
    convgemm.conv2d_input((1, 16, 8, 12), w1, torch.randn(1, 32, 4, 12, device=DEVICE), stride=(2, 1))
    # 16 stride phases: more than the packed phase order holds
    dx = convgemm.conv2d_input((1, 16, 8, 8), wt, torch.randn(1, 16, 2, 2, device=DEVICE), stride=4, padding=1)
    assert dx.shape == (1, 16, 8, 8)
    assert calls[0] == 0
    monkeypatch.setenv("CONVGEMM_STRIDED_TMA", "0")
    clear_memo()
    convgemm.conv2d_input((1, 16, 8, 8), wt, torch.randn(1, 16, 4, 4, device=DEVICE), stride=2, padding=1)
    assert calls[0] == 0


@pytest.mark.parametrize("cin,cout,h,k,s,p,op", [(16, 16, 4, 3, 2, 1, 1), (16, 32, 5, 4, 2, 1, 0), (32, 16, 4, 3, 2, 0, 1),
                                                 (16, 16, 3, 3, 3, 1, 2)])  # fmt: skip
def test_conv_transpose2d_through_the_tma_dgrad(cin, cout, h, k, s, p, op, monkeypatch):
    """conv_transpose2d is dgrad: every output_padding, with rows no tap of the input reaches."""
    calls = _spy_dgrad_tma(monkeypatch)
    x = torch.randn(1, cin, h, h, device=DEVICE).to(memory_format=torch.channels_last)
    w = torch.randn(cin, cout, k, k, device=DEVICE)
    y = convgemm.conv_transpose2d(x, w, stride=s, padding=p, output_padding=op)
    ref = torch.nn.functional.conv_transpose2d(
        x.double().cpu(), w.double().cpu(), stride=s, padding=p, output_padding=op
    )
    assert calls[0] == 1
    assert_close(y, ref, torch.float32, "conv_transpose2d via the TMA dgrad")


# sizes that are not multiples of the stride: the phase view keeps whole phases, and the output
# rows and columns that read the rest are recomputed by the gather kernel (``phase_tails``)
TAIL_CASES = [
    (2, 16, 9, 11, 32, 3, 3, 2, 1, 1, 1),  # odd H and W, padded
    (1, 16, 1, 31, 16, 1, 3, (1, 2), 0, 1, 1),  # wav2vec2's k3 s2 conv1d on an odd length
    (2, 16, 1, 19, 16, 1, 2, (1, 2), 0, 1, 1),  # its k2 s2 layers: the last column is read by no output
    (1, 16, 13, 14, 16, 5, 5, 3, 2, 1, 1),  # stride 3, H % 3 = 1
    (1, 16, 11, 10, 16, 3, 3, 2, (0, 2), 2, 1),  # dilated, asymmetric padding
]


@pytest.mark.interpreter_share(2, vary=("dtype",))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else []))
@pytest.mark.parametrize("case", TAIL_CASES, ids=lambda c: f"c{c[1]}_{c[2]}x{c[3]}_{c[5]}x{c[6]}_s{c[7]}p{c[8]}d{c[9]}")
def test_strided_tma_with_tails(case, dtype):
    """The TMA forward on inputs whose sizes are not multiples of the stride, with the ReLU (the
    gather pass applies it too), and a repeat call (the plan's replay runs the pass again)."""
    from convgemm.conv.fprop import phase_tails

    x, wt, b, kw = conv_tensors(case, dtype)
    prob, _, _ = _prepare(x, wt, b, kw["stride"], kw["padding"], kw["dilation"], 1)
    assert prob.input_phases_ok and min(phase_tails(prob)) > 0
    ref = conv2d_ref(x, wt, b, **kw)
    for act in ("", "relu", "relu"):
        y = convgemm.conv2d(x, wt, b, algorithm="implicit_gemm_tma", activation=act or None, **kw)
        assert_close(y, torch.relu(ref) if act else ref, dtype, f"strided tma with tails {case} {act}")


def test_phase_tails():
    from convgemm.conv.fprop import phase_tails
    from convgemm.problem import ConvProblem

    def tails(h, w, r, s, stride, pad, dil=1):
        x, wt = torch.empty(1, 16, h, w), torch.empty(16, 16, r, s)
        return phase_tails(ConvProblem.from_tensors(x, wt, None, stride=stride, padding=pad, dilation=dil))

    assert tails(8, 8, 3, 3, 2, 1) == (4, 4)  # multiples: no tails
    # W = 15999, k3 s2: the view keeps 15998 columns; only the last output (7998) reads column 15998
    assert tails(1, 15999, 1, 3, (1, 2), 0) == (1, 7998)
    assert tails(9, 8, 3, 3, 2, 1) == (4, 4)  # H = 9: output row 4 reads rows 7-9, row 8 is past the view
    assert tails(3, 8, 3, 3, 2, 0) == (0, 3)  # the one output row reads row 2: all of it a tail
    assert tails(1, 999, 1, 2, (1, 2), 0) == (1, 499)  # k2 s2 on an odd length never reads the last column
