"""dgrad and wgrad against float64 torch (torch.nn.grad on the CPU)."""

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from cases import CASES, case_id
from conftest import DEVICE, INTERPRET, interpreter_subset
from reference import assert_close

import convgemm
from convgemm.conv.backward import WGRAD, phase_taps
from convgemm.conv.fprop import Config
from convgemm.conv.layout import as_nhwc
from convgemm.problem import ConvProblem

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}


# fp32 means strict IEEE fp32 here (the reference thresholds assume it)
pytestmark = pytest.mark.usefixtures("no_tf32")


def make(case, dtype, channels_last=True):
    n, c, h, w, k, r, s, stride, padding, dilation, groups, _ = case
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(n, c, h, w, device=DEVICE).to(dtype).to(memory_format=fmt)
    wt = torch.randn(k, c // groups, r, s, device=DEVICE).to(dtype).to(memory_format=fmt)
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    y_shape = ConvProblem.from_tensors(x, wt, None, **kw).output_shape
    dy = torch.randn(*y_shape, device=DEVICE).to(dtype).to(memory_format=fmt)
    return x, wt, dy, kw


def ref_grads(x, w, dy, kw):
    """float64 gradients by autograd through torch's own conv2d on the CPU."""
    xd = x.detach().double().cpu().requires_grad_()
    wd = w.detach().double().cpu().requires_grad_()
    y = torch.nn.functional.conv2d(xd, wd, None, **kw)
    y.backward(dy.detach().double().cpu())
    return xd.grad, wd.grad


# every case in both layouts in fp32, and channels_last in the 16-bit dtypes (interpreter time)
M_LAYOUTS = [
    ("fp32", "channels_last"),
    ("fp32", "nchw"),
    ("fp16", "channels_last"),
    # the interpreter computes bf16 through an fp32 upcast, not the GPU's path: test it there
    pytest.param("bf16", "channels_last", marks=pytest.mark.gpu),
]


@pytest.mark.parametrize(
    "m,layout",
    M_LAYOUTS,
)
@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.interpreter_share(3, vary=("m", "layout"))
def test_dgrad_and_wgrad(case, m, layout):
    dtype = DTYPES[m]
    x, w, dy, kw = make(case, dtype, layout == "channels_last")
    gx, gw = ref_grads(x, w, dy, kw)
    dx = convgemm.conv2d_input(x.shape, w, dy, **kw)
    assert_close(dx, gx, dtype, f"dgrad {case_id(case)} {m} {layout}")
    dw = convgemm.conv2d_weight(x, w.shape, dy, **kw)
    assert_close(dw, gw, dtype, f"wgrad {case_id(case)} {m} {layout}")


# stride 2 and 3 on odd sizes: every phase, including phases no tap reaches (1x1 stride 3)
STRIDED = [
    (2, 5, 11, 9, 7, 3, 3, 2, 1, 1, 1, False),
    (1, 4, 13, 10, 6, 3, 3, 3, 1, 1, 1, False),
    (1, 3, 10, 13, 5, 5, 4, 3, 2, 1, 1, False),
    (2, 6, 9, 8, 4, 1, 1, 3, 0, 1, 1, False),
    (1, 8, 12, 11, 8, 3, 3, 2, 2, 2, 2, False),
    (2, 6, 11, 9, 12, 3, 3, 2, 1, 1, 6, False),  # depthwise, multiplier 2, stride 2
    (1, 4, 9, 9, 4, 2, 2, (2, 3), (1, 0), (1, 2), 1, False),
]


@pytest.mark.parametrize("case", STRIDED, ids=case_id)
def test_strided_phases(case):
    dtype = torch.float32
    x, w, dy, kw = make(case, dtype)
    gx, gw = ref_grads(x, w, dy, kw)
    assert_close(convgemm.conv2d_input(x.shape, w, dy, **kw), gx, dtype, "dgrad")
    assert_close(convgemm.conv2d_weight(x, w.shape, dy, **kw), gw, dtype, "wgrad")


def test_strict_fp32_dgrad_tma_tile_fits(monkeypatch):
    """Strict fp32 (3xTF32) on the one-launch strided dgrad: the default tile is 128 x 128 where
    16-bit layers and TF32 take 128 x 256 (which asks 245 KB of shared memory at 3xTF32, over
    the SM's 227). The GPU's tiles, also under the interpreter (whose own are 32 wide)."""
    from convgemm.conv import backward

    monkeypatch.setattr(backward, "interpreting", lambda: False)
    x = torch.zeros(2, 128, 16, 16).to(memory_format=torch.channels_last)
    w = torch.zeros(128, 128, 3, 3)
    prob = replace(ConvProblem.from_tensors(x, w, None, stride=2, padding=1), precision="tf32x3")
    cfg = backward.DGRAD_TMA.default_config(prob)
    assert (cfg.block_m, cfg.block_n, cfg.num_stages) == (128, 128, 4), cfg
    for other in (replace(prob, dtype=torch.bfloat16), replace(prob, precision="tf32")):
        assert backward.DGRAD_TMA.default_config(other).block_n == 256


@pytest.mark.gpu
def test_strict_fp32_strided_dgrad_wide_channels():
    """The same on the GPU: a strided 3x3 dgrad with 128 channels (the 128-row tile) in strict
    fp32, against float64 at the fp32 threshold."""
    case = (2, 128, 16, 16, 128, 3, 3, 2, 1, 1, 1, False)
    x, w, dy, kw = make(case, torch.float32)
    gx, _ = ref_grads(x, w, dy, kw)
    assert_close(convgemm.conv2d_input(x.shape, w, dy, **kw), gx, torch.float32, "dgrad")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("case", [(2, 128, 16, 16, 128, 3, 3, 2, 1, 1, 1, False),
                                  (4, 64, 14, 14, 128, 3, 3, 2, 1, 1, 1, False)], ids=case_id)  # fmt: skip
def test_dgrad_tma_every_candidate(case, dtype):
    """Every tile the strided TMA dgrad's tuner times (``DgradTma.configs``), into a NaN-filled
    dx, against float64: a wrong candidate must not be one the tuner can pick."""
    from convgemm.conv.backward import DGRAD_TMA

    x, w, dy, kw = make(case, dtype)
    gx, _ = ref_grads(x, w, dy, kw)
    prob = ConvProblem.from_tensors(x, w, None, **kw)
    dyn = as_nhwc(dy)
    assert DGRAD_TMA.supports(prob, dyn) is None, DGRAD_TMA.supports(prob, dyn)
    cfgs = DGRAD_TMA.configs(prob)
    assert cfgs and cfgs[0] == DGRAD_TMA.default_config(prob)
    for cfg in cfgs:
        dx = torch.full(x.shape, float("nan"), device=DEVICE, dtype=dtype).contiguous(memory_format=torch.channels_last)
        DGRAD_TMA.run(prob, dyn, w, dx, cfg)
        assert_close(dx, gx, dtype, f"dgrad_tma [{cfg.describe()}] {case}")


def test_float64_backward():
    case = (2, 6, 7, 8, 4, 3, 3, 2, 1, 1, 2, False)
    x, w, dy, kw = make(case, torch.float64)
    gx, gw = ref_grads(x, w, dy, kw)
    assert_close(convgemm.conv2d_input(x.shape, w, dy, **kw), gx, torch.float64, "dgrad")
    assert_close(convgemm.conv2d_weight(x, w.shape, dy, **kw), gw, torch.float64, "wgrad")


@pytest.mark.parametrize("split_k", [2, 3, 7])
def test_wgrad_split_k_is_right_and_deterministic(split_k):
    case = (3, 16, 9, 10, 24, 3, 3, 1, 1, 1, 1, False)
    x, w, dy, kw = make(case, torch.float32)
    _, gw = ref_grads(x, w, dy, kw)
    prob = ConvProblem.from_tensors(x, w, None, **kw)
    cfg = Config(16, 32, 16, 4, 1, split_k=split_k)
    outs = []
    for _ in range(2):
        dw = torch.full(tuple(w.shape), float("nan"), device=DEVICE)
        WGRAD.run(prob, x, dy, dw, cfg)
        assert_close(dw, gw, torch.float32, f"split_k={split_k}")
        outs.append(dw)
    assert torch.equal(outs[0], outs[1])


TMA_WGRAD = [
    # N, C, H, W, K, R, S, stride, padding, dilation, groups
    (2, 16, 9, 10, 24, 3, 3, 1, 1, 1, 1),
    (1, 24, 7, 5, 16, 3, 3, 1, 2, 2, 1),  # dilation, padding past the kernel
    (2, 16, 8, 8, 32, 3, 3, 1, 1, 1, 2),  # groups
    (2, 16, 9, 9, 16, 1, 1, 2, 0, 1, 1),  # strided 1x1: the subsampled view
    (3, 8, 6, 7, 8, 5, 5, 1, 2, 1, 1),
    (2, 40, 5, 6, 24, 1, 3, 1, (0, 1), 1, 1),  # channels not a multiple of the tile
    # strided, through the phase view [N, H/sh, sh, W/sw, sw*C]: taps in every row and column
    # phase, padding that makes negative rows, output pixels whose taps fall past the far edge
    (2, 64, 10, 12, 16, 3, 3, 2, 1, 1, 1),
    (1, 64, 9, 12, 24, 3, 2, (3, 2), (2, 0), 1, 1),  # unequal strides and an even filter width
    (2, 64, 8, 8, 16, 3, 3, 2, 2, 2, 1),  # dilation 2: every tap in phase 0
    (1, 128, 6, 6, 8, 5, 5, 3, 2, 1, 1),  # stride 3, a 5x5 filter: taps in all three phases
    (2, 128, 6, 8, 32, 3, 3, 2, 1, 1, 2),  # strided and grouped: group 1's channels inside each phase
    (3, 16, 5, 7, 24, 1, 1, 1, 0, 1, 1),  # stride-1 1x1: one row of N*H*W pixels (flat_1x1)
    (2, 32, 6, 6, 16, 3, 3, 1, 1, 1, 2),  # 8 outputs per group: a 16-channel dy box reads group 1's too
]


@pytest.mark.parametrize("split_k", [1, 3])
@pytest.mark.parametrize("layout", ["channels_last", "nchw"])
@pytest.mark.parametrize("case", TMA_WGRAD, ids=str)
@pytest.mark.interpreter_share(2, vary=("layout", "split_k"))
def test_wgrad_tma(case, layout, split_k):
    """The TMA wgrad (16-bit, stride 1 or strided 1x1): the kernel conv2d_weight picks there."""
    from dataclasses import replace

    from convgemm.conv.backward import WGRAD_TMA, choose_wgrad

    n, c, h, w, k, r, s, stride, padding, dilation, groups = case
    x, wt, dy, kw = make((n, c, h, w, k, r, s, stride, padding, dilation, groups, False), torch.float16,
                         layout == "channels_last")  # fmt: skip
    _, gw = ref_grads(x, wt, dy, kw)
    prob = ConvProblem.from_tensors(x, wt, None, **kw)
    algo, cfg, xn, dyn = choose_wgrad(prob, x, dy)
    assert algo is WGRAD_TMA, "conv2d_weight must take the TMA kernel here"
    dw = torch.full(tuple(wt.shape), float("nan"), device=DEVICE, dtype=torch.float16)
    algo.run(prob, xn, dyn, dw, replace(cfg, split_k=split_k))
    assert_close(dw, gw, torch.float16, f"wgrad_tma {case} split {split_k}")
    assert_close(convgemm.conv2d_weight(x, wt.shape, dy, **kw), gw, torch.float16, "conv2d_weight")


# one-row pixel blocks ([1, 1, bk]: the transposed dy box straight from shared memory on the
# GPU), rows longer and shorter than the block, tiles wider than the channels, groups, split-K
ROW_WGRAD = [
    (2, 16, 5, 21, 24, 3, 3, 1, 1, 1, 1),
    (1, 24, 7, 13, 40, 3, 3, 1, 1, 1, 1),
    (2, 16, 6, 9, 16, 3, 3, 1, 1, 1, 2),
    (2, 16, 9, 9, 16, 1, 1, 2, 0, 1, 1),  # strided 1x1
    (3, 16, 5, 7, 24, 1, 1, 1, 0, 1, 1),  # flat 1x1
]


@pytest.mark.parametrize("split_k", [1, 2])
@pytest.mark.parametrize("case", ROW_WGRAD, ids=str)
def test_wgrad_tma_row_tiles(case, split_k):
    from convgemm.conv.backward import WGRAD_TMA

    n, c, h, w, k, r, s, stride, padding, dilation, groups = case
    x, wt, dy, kw = make((n, c, h, w, k, r, s, stride, padding, dilation, groups, False), torch.float16)
    _, gw = ref_grads(x, wt, dy, kw)
    prob = ConvProblem.from_tensors(x, wt, None, **kw)
    assert WGRAD_TMA.supports(prob, x, dy) is None
    for bm, bn, red in ((16, 16, 0), (32, 32, 1)):
        # red: the partials summed by split_k_finish_kernel (rows of a tile over programs)
        cfg = replace(WGRAD_TMA._shaped(prob, bm, bn, 16, 4, 1, tile=(1, 1, 16)), split_k=split_k, reduce=red)
        dw = torch.full(tuple(wt.shape), float("nan"), device=DEVICE, dtype=torch.float16)
        WGRAD_TMA.run(prob, x, dy, dw, cfg)
        assert_close(dw, gw, torch.float16, f"row tile {case} {cfg.describe()}")


def test_flat_1x1():
    """A stride-1 unpadded 1x1 wgrad runs as one row of N*H*W pixels when the pixels are evenly
    strided, and as given otherwise."""
    from convgemm.conv.backward import WGRAD_TMA, flat_1x1

    x, wt, dy, kw = make((2, 16, 3, 5, 8, 1, 1, 1, 0, 1, 1, False), torch.float16)
    prob = ConvProblem.from_tensors(x, wt, None, **kw)
    flat = flat_1x1(prob, x, dy)
    assert flat is not None
    fprob, fx, fdy = flat
    assert (fprob.n, fprob.h, fprob.w, fprob.q) == (1, 1, 30, 30)
    assert torch.equal(fx.reshape(16, 30), x.permute(1, 0, 2, 3).reshape(16, 30))
    assert torch.equal(fdy.reshape(8, 30), dy.permute(1, 0, 2, 3).reshape(8, 30))
    # a crop of the pixels is not evenly strided; padding or stride change the pixel map
    assert flat_1x1(prob, x[:, :, :, :4], dy[:, :, :, :4]) is None
    assert flat_1x1(ConvProblem.from_tensors(x, wt, None, padding=1), x, dy) is None
    assert flat_1x1(ConvProblem.from_tensors(x, wt, None, stride=2), x, dy) is None
    # the tiles are chosen on the flat problem: one-row blocks with no zero-filled columns
    assert all(c.tile_n == c.tile_h == 1 for c in [WGRAD_TMA.default_config(prob)])
    cfg = WGRAD_TMA._shaped(replace(prob, n=64, h=7, w=7), 64, 64, 64, 4, 3)
    assert (cfg.tile_n, cfg.tile_h, cfg.tile_w) == (1, 1, 64)  # 3136 pixels in one row, not 7x7 images
    cfg = WGRAD_TMA._shaped(replace(prob, n=64, h=7, w=7, r=3, s=3, pad_h=(1, 1), pad_w=(1, 1)), 64, 64, 64, 4, 3)
    assert cfg.tile_h > 1 or cfg.tile_n > 1


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "case",
    [
        (4, 64, 14, 14, 128, 3, 3, 1, 1, 1, 1),
        (8, 256, 7, 7, 256, 1, 1, 1, 0, 1, 1),
        (4, 128, 14, 14, 256, 1, 1, 2, 0, 1, 1),
        (2, 128, 12, 12, 128, 3, 3, 1, 1, 1, 2),
        (1, 16, 96, 96, 16, 1, 1, 1, 0, 1, 1),  # one output tile: the many-split candidate
        # 128x256 tiles on multi-row pixel blocks: a strided 1x1 layer (ResNet-50's layer3
        # shortcut, whose tuned 128x256 config gave a 0.18 relative error on the H200 in
        # session 20) and a stride-1 3x3 one
        (16, 512, 28, 28, 1024, 1, 1, 2, 0, 1, 1),
        (8, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1),
    ],
    ids=str,
)
def test_gpu_wgrad_tma_every_config(case, dtype):
    """Every tuning candidate of wgrad_tma (one-row blocks, 128x256 tiles, taps, split-K)."""
    from convgemm.conv.backward import WGRAD_TMA

    n, c, h, w, k, r, s, stride, padding, dilation, groups = case
    x, wt, dy, kw = make((n, c, h, w, k, r, s, stride, padding, dilation, groups, False), dtype)
    _, gw = ref_grads(x, wt, dy, kw)
    prob = ConvProblem.from_tensors(x, wt, None, **kw)
    assert WGRAD_TMA.supports(prob, x, dy) is None
    failed = []
    for cfg in WGRAD_TMA.configs(prob):
        dw = torch.full(tuple(wt.shape), float("nan"), device=DEVICE, dtype=dtype)
        WGRAD_TMA.run(prob, x, dy, dw, cfg)
        try:
            assert_close(dw, gw, dtype, f"{case} {cfg.describe()}")
        except AssertionError as e:  # every failing config in the report, not just the first
            failed.append(str(e))
    assert not failed, "\n".join(failed)


def test_wgrad_tma_few_tiles_candidate(monkeypatch):
    """Layers of a few output tiles (CRAFT's 16 -> 16 head) get a 64x64x128 candidate with twice
    the two-wave split and ``reduce``; big layers do not. Forced on a small head-like layer."""
    from convgemm.conv import backward as bw

    x, wt, dy, kw = make((1, 16, 24, 24, 16, 1, 1, 1, 0, 1, 1, False), torch.float16)
    prob = ConvProblem.from_tensors(x, wt, None, **kw)
    big = replace(prob, n=64, c=1024, k=512, h=14, w=14)
    assert bw.WgradTma.few_tiles(prob) and not bw.WgradTma.few_tiles(big)
    monkeypatch.setattr(bw, "interpreting", lambda: False)  # the GPU's candidate list
    monkeypatch.setattr(bw, "sm_count", lambda: 132)
    many = [c for c in bw.WGRAD_TMA.configs(prob) if c.num_stages == 4 and c.block_k == 128 and c.reduce]
    assert len(many) == 1 and many[0].split_k == 2 * bw.WgradTma._shaped(prob, 64, 64, 128, 4, 4).split_k
    assert not any(c.num_stages == 4 and c.block_k == 128 for c in bw.WGRAD_TMA.configs(big))
    monkeypatch.undo()
    _, gw = ref_grads(x, wt, dy, kw)
    dw = torch.full(tuple(wt.shape), float("nan"), device=DEVICE, dtype=torch.float16)
    bw.WGRAD_TMA.run(prob, x, dy, dw, replace(many[0], split_k=2))
    assert_close(dw, gw, torch.float16, "many splits with reduce")


# enough pixels that both narrow tiles split (1920 and 792 output pixels), so every candidate
# has a `reduce` twin on the GPU
@pytest.mark.parametrize("case", [(2, 16, 24, 40, 2, 1, 1, 1, 0, 1, 1), (2, 32, 18, 22, 3, 3, 3, 1, 1, 1, 1)], ids=str)
def test_gather_wgrad_narrow_tiles(case):
    """The gather wgrad's tiles for few outputs (``Wgrad.configs``: 16-32 rows, long pixel blocks,
    many splits), forced here at interpreter size, every candidate on the GPU."""
    n, c, h, w, k, r, s, stride, padding, dilation, groups = case
    x, wt, dy, kw = make((n, c, h, w, k, r, s, stride, padding, dilation, groups, False), torch.float16)
    _, gw = ref_grads(x, wt, dy, kw)
    prob = ConvProblem.from_tensors(x, wt, None, **kw)
    cfgs = WGRAD.configs(prob)
    if INTERPRET:
        cfgs = [Config(16, 32, 64, 4, 1, split_k=5), Config(16, 16, 32, 4, 1, split_k=3, reduce=1)]
    assert INTERPRET or (len(cfgs) == 5 and sum(c.reduce for c in cfgs) == 2), [c.describe() for c in cfgs]
    for cfg in cfgs:
        dw = torch.full(tuple(wt.shape), float("nan"), device=DEVICE, dtype=torch.float16)
        WGRAD.run(prob, x, dy, dw, cfg)
        assert_close(dw, gw, torch.float16, f"{case} {cfg.describe()}")


@pytest.mark.gpu
@pytest.mark.parametrize("case", [(4, 128, 14, 14, 128, 1, 1, 1, 0, 1, 1), (2, 128, 12, 10, 256, 3, 3, 1, 1, 1, 1)],
                         ids=str)  # fmt: skip
def test_gpu_wgrad_tma_reduce_plan_calls(case):
    """A ``reduce`` config (partials summed by split_k_finish_kernel) through one launch handle,
    as a plan replays it: the first call through Triton, then the fast path on new tensors
    (flat 1x1 views included), each against float64."""
    from convgemm.conv.backward import WGRAD_TMA
    from convgemm.matmul.launch import Launch

    n, c, h, w, k, r, s, stride, padding, dilation, groups = case
    launch = Launch()
    for i in range(3):
        x, wt, dy, kw = make((n, c, h, w, k, r, s, stride, padding, dilation, groups, False), torch.bfloat16)
        prob = ConvProblem.from_tensors(x, wt, None, **kw)
        cfg = replace(WGRAD_TMA._shaped(prob, 128, 128, 64, 8, 3), split_k=5, reduce=1)
        dw = torch.full(tuple(wt.shape), float("nan"), device=DEVICE, dtype=torch.bfloat16)
        WGRAD_TMA.run(prob, x, dy, dw, cfg, launch)
        assert_close(dw, ref_grads(x, wt, dy, kw)[1], torch.bfloat16, f"call {i}")
        assert i == 0 or launch.fast_ready


def test_narrow_wgrad_candidates(monkeypatch):
    """Layers with at most 16 outputs time the gather kernel's narrow tiles against wgrad_tma;
    wider ones, and fp32, do not."""
    import convgemm.conv.backward as bw

    seen = []

    def record(algos, prob, x, dy, dw):
        seen.append([a.name for a in algos])
        return algos[0], algos[0].default_config(prob)

    monkeypatch.setattr(bw, "tuned_wgrad", record)
    for k, dtype, want in [(16, torch.float16, ["wgrad_tma", "wgrad"]), (32, torch.float16, ["wgrad_tma"]),
                           (2, torch.float16, ["wgrad"])]:  # fmt: skip
        x, wt, dy, kw = make((1, 16, 6, 8, k, 1, 1, 1, 0, 1, 1, False), dtype)
        prob = ConvProblem.from_tensors(x, wt, None, **kw)
        if "wgrad_tma" in want and bw.WGRAD_WS.supports(prob, as_nhwc(x), as_nhwc(dy)) is None:
            want = [*want[:1], "wgrad_ws", *want[1:]]  # the Gluon wgrad, on Hopper (a GPU run)
        seen.clear()
        bw.choose_wgrad(prob, x, dy, torch.empty_like(wt))
        assert seen == [want], (k, seen)
    assert bw.WGRAD.narrow(prob) and not bw.WGRAD.narrow(replace(prob, dtype=torch.float32))


def test_wgrad_plan_reads_what_the_tuned_kernel_read(monkeypatch):
    """A plan repeats the wgrad on the tensors its first call's kernel read. The tuner times the
    gather kernel (``wgrad``) on NHWC copies of an NCHW layer's tensors beside ``wgrad_tma``; where
    it picks the gather kernel, ``wgrad`` must say it read copies, or the plan (and the training
    replay's runner) relaunches a kernel specialised for the copies' strides on the NCHW tensors
    (an H100, session 44: ``misaligned address`` on the second call of this layer). The interpreter
    relaunches through Triton, which re-specialises, so the flag is what is checked here; the
    repeat calls' values too."""
    import convgemm.conv.backward as bw

    def gather(algos, prob, x, dy, dw):
        assert "wgrad" in [a.name for a in algos]
        return bw.WGRAD, bw.WGRAD.default_config(prob)

    monkeypatch.setattr(bw, "tuned_wgrad", gather)
    x, wt, dy, kw = make((2, 16, 9, 9, 16, 1, 1, 2, 0, 1, 1, False), torch.float16)
    x, dy = x.contiguous(), dy.contiguous()  # NCHW
    prob = ConvProblem.from_tensors(x, wt, None, **kw)
    dw = torch.empty_like(wt)
    algo, _, nhwc = bw.wgrad(prob, x, dy, dw)
    assert algo is bw.WGRAD and nhwc, "the gather kernel read NHWC copies: the plan must make them too"
    gw = ref_grads(x, wt, dy, kw)[1]
    assert_close(dw, gw, torch.float16, "first call")
    # NHWC tensors are read as they are (no copies), whichever kernel
    xc, dyc = x.contiguous(memory_format=torch.channels_last), dy.contiguous(memory_format=torch.channels_last)
    assert bw.wgrad(prob, xc, dyc, torch.empty_like(wt))[2] is False
    for _ in range(2):  # conv2d_weight's plan on a GPU; the same calls under the interpreter
        assert_close(convgemm.conv2d_weight(x, wt.shape, dy, **kw), gw, torch.float16, "repeat call")


def test_wgrad_candidates_have_every_flag_the_tuner_reads():
    """The tuner reads the forward algorithms' flags (``writes_nchw`` for an NCHW result): the
    wgrad adapter must have them all, or every candidate of an NCHW layer fails while tuning."""
    from convgemm.conv.backward import _AsForward
    from convgemm.conv.fprop import Algorithm

    a = _AsForward(WGRAD)
    assert isinstance(a, Algorithm) and a.name == "wgrad"
    assert a.writes_nchw and not a.reads_nchw and not a.fuses_activation


@pytest.mark.gpu
def test_gpu_nchw_wgrad_tunes_without_failures(monkeypatch, tmp_path):
    # session 21: every candidate of an NCHW layer's wgrad failed in the tuner on a missing flag
    # (a RuntimeWarning each, then the untuned default); now none may fail
    import warnings

    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "1")
    monkeypatch.setenv("CONVGEMM_CACHE_DIR", str(tmp_path))
    x, wt, dy, kw = make((2, 64, 12, 10, 64, 3, 3, 1, 1, 1, 1, False), torch.bfloat16)
    x, dy = x.contiguous(), dy.contiguous()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        dw = convgemm.conv2d_weight(x, wt.shape, dy, **kw)
    assert_close(dw, ref_grads(x, wt, dy, kw)[1], torch.bfloat16, "nchw wgrad")


# several filter columns per program (conv/wgrad_taps.py): taps past the filter's last column
# (S = 5 with 3 per program, S = 7 with 4), dilation, groups, a channel block past C, bf16
TAPS_WGRAD = [
    (2, 16, 9, 10, 24, 3, 3, 1, 1, 1, 1),
    (1, 24, 11, 9, 16, 3, 5, 1, 2, 1, 1),
    (1, 16, 12, 13, 16, 3, 7, 1, (1, 3), 1, 1),
    (1, 24, 9, 11, 16, 3, 3, 1, 2, 2, 1),
    (2, 16, 8, 8, 32, 3, 3, 1, 1, 1, 2),
    (2, 40, 6, 7, 24, 2, 2, 1, 0, 1, 1),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("split_k", [1, 3])
@pytest.mark.parametrize("case", TAPS_WGRAD, ids=str)
def test_wgrad_taps(case, split_k, dtype):
    from dataclasses import replace

    from convgemm.conv.backward import WGRAD_TMA
    from convgemm.conv.wgrad_taps import taps_per_program

    n, c, h, w, k, r, s, stride, padding, dilation, groups = case
    x, wt, dy, kw = make((n, c, h, w, k, r, s, stride, padding, dilation, groups, False), dtype)
    _, gw = ref_grads(x, wt, dy, kw)
    prob = ConvProblem.from_tensors(x, wt, None, **kw)
    assert WGRAD_TMA.supports(prob, x, dy) is None
    cfg = replace(WGRAD_TMA.default_config(prob), split_k=split_k, taps=taps_per_program(s))
    assert cfg.taps > 1 and "taps" in cfg.describe()
    dw = torch.full(tuple(wt.shape), float("nan"), device=DEVICE, dtype=dtype)
    WGRAD_TMA.run(prob, x, dy, dw, cfg)
    assert_close(dw, gw, dtype, f"wgrad taps {case} split {split_k}")
    if not INTERPRET:  # the tuner offers the variant on a GPU (the interpreter has one config)
        assert any(c.taps > 1 for c in WGRAD_TMA.configs(prob))


@pytest.mark.parametrize("s, want", [(2, 2), (3, 3), (4, 4), (5, 3), (6, 3), (7, 4)])
def test_taps_per_program(s, want):
    from convgemm.conv.wgrad_taps import taps_per_program

    assert taps_per_program(s) == want


def test_wgrad_tma_refuses():
    from convgemm.conv.backward import WGRAD_TMA

    x, wt, dy, kw = make((2, 64, 9, 10, 16, 3, 3, 2, 1, 1, 1, False), torch.float16)
    x, dy = x.contiguous(memory_format=torch.channels_last), dy.contiguous(memory_format=torch.channels_last)
    prob = ConvProblem.from_tensors(x, wt, None, **kw)
    assert "multiple of the stride" in WGRAD_TMA.supports(prob, x, dy)  # H = 9, stride 2
    x, wt, dy, kw = make((2, 48, 8, 8, 16, 3, 3, 2, 1, 1, 1, False), torch.float16)
    x, dy = x.contiguous(memory_format=torch.channels_last), dy.contiguous(memory_format=torch.channels_last)
    assert "multiples of 64" in WGRAD_TMA.supports(ConvProblem.from_tensors(x, wt, None, **kw), x, dy)
    x, wt, dy, kw = make((2, 64, 8, 8, 64, 3, 3, 2, 1, 1, 2, False), torch.float16)  # 32 channels per group
    x, dy = x.contiguous(memory_format=torch.channels_last), dy.contiguous(memory_format=torch.channels_last)
    assert "per group that are multiples of 64" in WGRAD_TMA.supports(
        ConvProblem.from_tensors(x, wt, None, **kw), x, dy
    )
    big = torch.randn(2, 128, 8, 16, dtype=torch.float16, device=DEVICE).contiguous(memory_format=torch.channels_last)
    xs = big[:, :64, :, ::2]  # channels_last view whose pixels are 256 channels apart
    ws = torch.randn(16, 64, 3, 3, dtype=torch.float16, device=DEVICE)
    prob = ConvProblem.from_tensors(xs, ws, None, stride=2, padding=1)
    dys = torch.randn(2, 16, 4, 4, dtype=torch.float16, device=DEVICE).contiguous(memory_format=torch.channels_last)
    assert "densely packed" in WGRAD_TMA.supports(prob, xs, dys)
    x, wt, dy, kw = make((2, 16, 9, 9, 16, 3, 3, 1, 1, 1, 1, False), torch.float32)
    assert "fp16 or bf16" in WGRAD_TMA.supports(ConvProblem.from_tensors(x, wt, None, **kw), x, dy)
    x, wt, dy, kw = make((2, 12, 9, 9, 16, 3, 3, 1, 1, 1, 1, False), torch.float16)  # 24-byte pixel rows
    assert "aligned" in WGRAD_TMA.supports(ConvProblem.from_tensors(x, wt, None, **kw), x, dy)


def test_phase_taps():
    # 3x3, stride 2, pad 1: even rows take the middle tap, odd rows the outer two
    assert phase_taps(3, 2, 1, 1) == [[(1, 0)], [(0, 1), (2, 0)]]
    # a 1x1 kernel with stride 3 reaches only phase 0
    assert phase_taps(1, 3, 0, 1) == [[(0, 0)], [], []]


def test_bad_grad_output_shape():
    x = torch.randn(1, 4, 8, 8, device=DEVICE)
    w = torch.randn(6, 4, 3, 3, device=DEVICE)
    dy = torch.randn(1, 6, 7, 7, device=DEVICE)
    with pytest.raises(ValueError, match=r"grad_output must have the forward output's shape \[1, 6, 6, 6\]"):
        convgemm.conv2d_input(x.shape, w, dy)
    with pytest.raises(ValueError, match="grad_output must have"):
        convgemm.conv2d_weight(x, w.shape, dy)
    with pytest.raises(TypeError, match="grad_output is torch.float16"):
        convgemm.conv2d_input(x.shape, w, torch.randn(1, 6, 6, 6, device=DEVICE).half())


def test_empty_batch_backward():
    x = torch.randn(0, 4, 8, 8, device=DEVICE)
    w = torch.randn(6, 4, 3, 3, device=DEVICE)
    dy = torch.randn(0, 6, 6, 6, device=DEVICE)
    assert convgemm.conv2d_input(x.shape, w, dy).shape == (0, 4, 8, 8)
    dw = convgemm.conv2d_weight(x, w.shape, dy)
    assert dw.shape == (6, 4, 3, 3) and bool((dw == 0).all())


@pytest.mark.parametrize("case", [CASES[1], CASES[6], CASES[10], *STRIDED[:2], STRIDED[4]], ids=case_id)
def test_phase_kernel_on_stride_one(case):
    """dgrad normally runs as forward convolutions (stride 1: one; strided: one per phase where TMA
    applies, the interpreter included); the one-launch per-phase gather kernel must stay right."""
    from convgemm.conv.backward import DGRAD

    x, w, dy, kw = make(case, torch.float32)
    gx, _ = ref_grads(x, w, dy, kw)
    prob = ConvProblem.from_tensors(x, w, None, **kw)
    dx = torch.full(tuple(x.shape), float("nan"), device=DEVICE)
    DGRAD.run(prob, dy, w, dx, DGRAD.default_config(prob))
    assert_close(dx, gx, torch.float32, "per-phase gather dgrad")


def test_phase_convs_cover_every_input_position_once():
    """Each phase's stride-1 convolution produces exactly its positions, from the taps that reach them."""
    from convgemm.functional import phase_convs

    for k, stride, pad, dil, size in [
        (3, 2, 1, 1, 9),
        (1, 2, 0, 1, 8),
        (3, 3, 1, 2, 11),
        (5, 2, 2, 1, 7),
        (3, 4, 0, 3, 13),
    ]:
        out = (size + 2 * pad - dil * (k - 1) - 1) // stride + 1
        phases = phase_convs(k, stride, pad, dil, size, out)
        assert len(phases) == stride
        for f, ph in enumerate(phases):
            want = sorted(r for r in range(k) if (f + pad - r * dil) % stride == 0)
            if ph is None:
                continue
            taps, start, stop, lo, hi, d, length = ph
            assert sorted(taps) == want and length == len(range(f, size, stride))
            assert 0 <= start < stop <= out and lo >= 0 and hi >= 0
            assert stop - start + lo + hi - d * (len(taps) - 1) == length  # exactly the phase's outputs
            # output i, tap j reads dy row start - lo + i + j * d, which must be i + offset(tap j)
            offsets = sorted((f + pad - r * dil) // stride for r in want)
            assert [start - lo + j * d for j in range(len(taps))] == offsets


def test_dgrad_as_forward_rule():
    from convgemm.functional import dgrad_as_forward

    x, w, dy, kw = make((1, 4, 8, 8, 4, 3, 3, 1, 1, 1, 1, False), torch.float32)
    assert dgrad_as_forward(ConvProblem.from_tensors(x, w, None, **kw))
    assert not dgrad_as_forward(ConvProblem.from_tensors(x, w, None, **dict(kw, stride=2)))
    assert not dgrad_as_forward(ConvProblem.from_tensors(x, w, None, **dict(kw, padding=3)))


def test_repeat_dgrad_sees_in_place_weight_updates_and_new_weights():
    """Repeat stride-1 dgrad calls reuse a plan and the flipped weight (on a GPU): an in-place
    update, or another weight tensor, must still be seen."""
    case = (2, 8, 7, 6, 16, 3, 3, 1, 1, 1, 1, False)
    x, w, dy, kw = make(case, torch.float32)
    for step in range(3):
        gx, _ = ref_grads(x, w, dy, kw)
        assert_close(convgemm.conv2d_input(x.shape, w, dy, **kw), gx, torch.float32, f"step {step}")
        with torch.no_grad():
            w.mul_(-0.5)  # an optimizer-style update: bumps the version counter
    w2 = torch.randn_like(w)
    gx, _ = ref_grads(x, w2, dy, kw)
    assert_close(convgemm.conv2d_input(x.shape, w2, dy, **kw), gx, torch.float32, "another weight")


@pytest.mark.parametrize("layout", ["channels_last", "nchw"])
@pytest.mark.parametrize("case", [(3, 8, 9, 10, 16, 3, 3, 1, 1, 1, 8), (2, 6, 11, 9, 6, 7, 7, 2, 3, 1, 6)], ids=str)
def test_depthwise_wgrad_kernel(case, layout):
    """Depthwise layers take the direct wgrad kernel (split sums in a fixed order: reproducible)."""
    from convgemm.conv.backward import DWGRAD, choose_wgrad

    x, w, dy, kw = make((*case, False), torch.float32, layout == "channels_last")
    _, gw = ref_grads(x, w, dy, kw)
    prob = ConvProblem.from_tensors(x, w, None, **kw)
    assert choose_wgrad(prob, x, dy)[0] is DWGRAD
    outs = [convgemm.conv2d_weight(x, w.shape, dy, **kw) for _ in range(2)]
    assert_close(outs[0], gw, torch.float32, f"depthwise wgrad {case}")
    assert torch.equal(outs[0], outs[1])


# N, C, H, W, K, R, S, stride, padding, dilation, groups: odd sizes throughout
DW_WGRAD = [
    (2, 5, 9, 11, 5, 3, 3, 1, 1, 1, 5),  # 9 taps = 8 + 1 per program
    (2, 6, 11, 9, 6, 3, 3, 2, 1, 1, 6),  # stride 2
    (2, 4, 10, 9, 8, 3, 3, 2, 1, 1, 4),  # multiplier 2, stride 2
    (1, 3, 13, 12, 3, 3, 3, 1, 2, 2, 3),  # dilation 2
    (2, 3, 9, 8, 3, 5, 5, 1, (2, 1), (1, 2), 3),  # 5x5: one filter row per program (4 + 1 taps)
    (1, 5, 9, 10, 5, 7, 7, 1, 3, 1, 5),  # 7x7 (4 + 2 + 1 taps); two rows per program: 8 + 4 + 2
    (1, 3, 6, 7, 9, 7, 7, 2, 4, 1, 3),  # multiplier 3, padding past the kernel, stride 2
    (2, 4, 7, 6, 4, 1, 3, 1, (0, 1), 1, 4),  # 1x3
]


@pytest.mark.parametrize(
    "case,dtype",
    [(c, torch.float32) for c in DW_WGRAD] + [(DW_WGRAD[i], torch.float64) for i in (1, 2, 6)],
    ids=str,
)
def test_depthwise_wgrad_every_config(case, dtype, monkeypatch):
    """Every config ``configs`` offers, each forced (the tuner may take any), and a few beyond it
    (2 filter rows per program, 2 columns per step, one split per output row; the rows kernel's
    strip, column-group and split shapes where it applies, with its unrolled first and last
    steps where ``DepthwiseRows.trim`` takes them), against float64; each the first twice,
    bit-identical, into a NaN-filled dw with non-contiguous strides."""
    from convgemm.conv.backward import DWGRAD

    monkeypatch.setenv("CONVGEMM_DEPTHWISE_TRIM", "1")

    x, w, dy, kw = make((*case, False), dtype)
    _, gw = ref_grads(x, w, dy, kw)
    prob = ConvProblem.from_tensors(x, w, None, **kw)
    npr = prob.n * prob.p
    extra = [Config(4, 4, 2, 4, 1, split_k=npr), Config(2, 8, 2, 4, 1, split_k=2)]
    if DWGRAD.rows_ok(prob) is None:
        # the rows kernel: strips of 2 rows (the last partial), 3 columns per group, no prefetch;
        # one column per group and one split; strips taller than the image, more splits than pairs
        extra += [Config(4, 8, 2, 2, 1, split_k=3, cols=3, vec=0), Config(2, 16, 3, 1, 2, split_k=1, cols=1, vec=2),
                  Config(8, 4, 100, 4, 2, split_k=50, cols=2, vec=2)]  # fmt: skip
        if prob.r * prob.s <= 9:  # (the interpreter is slow on 49 taps)
            # two and three steps loaded ahead (past the strip's and the image's last rows)
            extra += [
                Config(4, 8, 3, 2, 3, split_k=2, cols=2, vec=2),
                Config(4, 8, 100, 2, 4, split_k=1, cols=1, vec=2),
            ]
    cfgs = DWGRAD.configs(prob)
    assert DWGRAD.default_config(prob) in cfgs
    for i, cfg in enumerate(interpreter_subset(cfgs, 3) + extra):
        outs = []
        for _ in range(2 if i == 0 else 1):
            dw = torch.full((w.shape[0], w.shape[2], w.shape[3], 2), float("nan"), dtype=dtype, device=DEVICE)
            dw = dw[..., 0].unsqueeze(1)  # [K, 1, R, S], strides (2RS, 2, 2S, 2)
            DWGRAD.run(prob, x, dy, dw, cfg)
            outs.append(dw)
        assert_close(outs[0], gw, dtype, f"depthwise wgrad {case} {cfg.describe()}")
        assert torch.equal(outs[0], outs[-1]), cfg.describe()


# narrow groups (C/g = CG input, K/g = KG output channels per group), odd sizes throughout
NARROW_WGRAD = [
    (2, 6, 7, 9, 3, 3, 3, 2, 1, 1, 3),  # CG 2, KG 1, stride 2
    (1, 8, 6, 7, 4, 3, 3, 1, 2, 2, 2),  # CG 4, KG 2, dilation 2, padding 2
    (1, 16, 5, 6, 8, 3, 3, 1, (1, 0), 1, 2),  # CG 8, KG 4, uneven padding
    (1, 12, 7, 6, 6, 1, 3, 2, (0, 1), (1, 2), 3),  # CG 4, KG 2, 1x3 strided, dilated
]


@pytest.mark.parametrize(
    "case,dtype", [(c, torch.float32) for c in NARROW_WGRAD] + [(NARROW_WGRAD[0], torch.float64)], ids=str
)
def test_narrow_group_wgrad_every_config(case, dtype):
    """The direct wgrad on grouped layers with several input channels per group: every config
    ``configs`` offers and one split per output row, forced, against float64, into a NaN-filled dw
    whose input-channel stride is neither contiguous nor the smallest; the first twice, bit-identical."""
    from convgemm.conv.backward import DWGRAD, choose_wgrad

    x, w, dy, kw = make((*case, False), dtype)
    _, gw = ref_grads(x, w, dy, kw)
    prob = ConvProblem.from_tensors(x, w, None, **kw)
    assert prob.cg > 1 and choose_wgrad(prob, x, dy)[0] is DWGRAD
    k, cg, r, s = w.shape
    extra = [Config(4, 4, 1, 4, 1, split_k=prob.n * prob.p)]
    if DWGRAD.rows_ok(prob) is None:  # the rows kernel, its input channel of the group a grid axis
        extra.append(Config(4, 8, 3, 2, 1, split_k=2, cols=3, vec=0))
    for i, cfg in enumerate(interpreter_subset(DWGRAD.configs(prob), 3) + extra):
        outs = []
        for _ in range(2 if i == 0 else 1):
            dw = torch.full((k, r, s, cg, 2), float("nan"), dtype=dtype, device=DEVICE)
            dw = dw[..., 0].permute(0, 3, 1, 2)  # [K, CG, R, S], strides (2RSCG, 2, 2SCG, 2CG)
            DWGRAD.run(prob, x, dy, dw, cfg)
            outs.append(dw)
        assert_close(outs[0], gw, dtype, f"narrow-group wgrad {case} {cfg.describe()}")
        assert torch.equal(outs[0], outs[-1]), cfg.describe()


def test_narrow_group_wgrad_route():
    """ResNeXt's grouped 3x3 (C = K = 128, 32 groups of 4) takes the direct wgrad; 4 groups of 32
    channels, and 8 input channels per group feeding 16 outputs, keep the GEMM kernels."""
    from convgemm.conv.backward import DWGRAD, choose_wgrad

    for c, k, groups, direct in [(128, 128, 32, True), (128, 128, 4, False), (16, 32, 2, False), (64, 64, 8, True)]:
        x, w, dy, kw = make((1, c, 4, 4, k, 3, 3, 1, 1, 1, groups, False), torch.float32)
        prob = ConvProblem.from_tensors(x, w, None, **kw)
        assert (choose_wgrad(prob, x, dy)[0] is DWGRAD) is direct, (c, k, groups)


@pytest.mark.parametrize("case", STRIDED, ids=case_id)
def test_strided_dgrad_by_phases_forced(case, monkeypatch):
    """The per-phase forward convolutions serve any filter (the dispatcher takes them only for
    filters no larger than the stride, where they were timed faster): forced on every case."""
    import convgemm.functional as fn

    monkeypatch.setattr(fn, "dgrad_route", lambda prob, dy: "dgrad_by_phases")
    fn.clear_plans()
    try:
        x, w, dy, kw = make(case, torch.float32)
        gx, _ = ref_grads(x, w, dy, kw)
        assert_close(convgemm.conv2d_input(x.shape, w, dy, **kw), gx, torch.float32, "dgrad by phases")
    finally:
        fn.clear_plans()


@pytest.mark.parametrize(
    "case,dtype",
    [
        ((2, 32, 7, 9, 32, 3, 3, 1, 1, 1, 32), torch.float32),
        ((1, 48, 6, 5, 96, 3, 3, 2, 1, 1, 48), torch.float32),  # multiplier 2: the gather tiles
        ((1, 40, 9, 7, 40, 7, 7, 1, 3, 1, 40), torch.float32),
        ((1, 24, 5, 6, 24, 3, 3, 1, 1, 1, 24), torch.float64),
        ((1, 32, 5, 6, 32, 3, 3, 2, 1, 1, 8), torch.float32),  # 4 channels per group, as ResNeXt
        ((1, 16, 34, 6, 16, 3, 3, 1, 1, 1, 16), torch.float32),  # one image: strips of its rows
    ],
    ids=str,
)
def test_depthwise_wgrad_gpu_configs(case, dtype, monkeypatch):
    """The tile shapes ``configs`` gives a GPU (8 warps, 128-channel blocks, one filter row per
    program for 7x7), run here whatever the device, each forced, against float64."""
    import convgemm.conv.backward as bw

    x, w, dy, kw = make((*case, False), dtype)
    _, gw = ref_grads(x, w, dy, kw)
    prob = ConvProblem.from_tensors(x, w, None, **kw)
    monkeypatch.setattr(bw, "interpreting", lambda: False)
    cfgs = bw.DWGRAD.configs(prob)
    monkeypatch.undo()
    assert len(cfgs) >= 2
    for cfg in cfgs:
        dw = torch.full(tuple(w.shape), float("nan"), dtype=dtype, device=DEVICE)
        bw.DWGRAD.run(prob, x, dy, dw, cfg)
        assert_close(dw, gw, dtype, f"depthwise wgrad {case} {cfg.describe()}")


def test_depthwise_wgrad_rows_strips_when_images_are_few(monkeypatch):
    """The rows kernel's candidates cut the images into strips (of at least 8 rows) where there
    are fewer images than the groups wanted for the SMs, and keep whole images otherwise."""
    import convgemm.conv.backward as bw

    monkeypatch.setattr(bw, "interpreting", lambda: False)
    monkeypatch.setattr(bw, "sm_count", lambda *a: 132)

    def cfgs(n, c, hw, r):
        x = torch.empty(n, c, hw, hw, dtype=torch.bfloat16)
        w = torch.empty(c, 1, r, r, dtype=torch.bfloat16)
        return bw.DWGRAD.rows_configs(ConvProblem.from_tensors(x, w, None, padding=r // 2, groups=c))

    few = cfgs(64, 32, 112, 3)  # MobileNetV2's 32 @112: 2 column blocks, 64 images
    assert few and all(8 <= c.block_k < 112 and c.split_k > 64 for c in few), [c.describe() for c in few]
    many = cfgs(64, 96, 56, 7)  # ConvNeXt's 96 @56 7x7: 12 tiles, enough images
    assert many and all(c.block_k == 56 and c.split_k <= 64 for c in many), [c.describe() for c in many]
    short = cfgs(2, 16, 12, 3)  # 12 rows: two strips would be under 8 rows each
    assert short and all(c.block_k == 12 for c in short), [c.describe() for c in short]


def test_depthwise_wgrad_tuning_is_memoised_and_cached(monkeypatch, tmp_path):
    """With tuning on, the depthwise wgrad's candidates are timed once (a fake timer picks the
    last), the winner is stored on disk under a key tagged ``wgrad``, a fresh process reads it back
    without timing, and the chosen config computes the right gradient."""
    from convgemm.conv import backward as bw
    from convgemm.tune import autotune as at
    from convgemm.tune import cache as tc

    monkeypatch.setenv("CONVGEMM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tc, "_warned", set())
    monkeypatch.setattr(bw, "_can_time", lambda x: True)
    monkeypatch.setattr(at, "autotune_enabled", lambda: True)
    calls = []

    def fake_tune(prob, candidates, x, w, bias, y):
        (algo,) = candidates
        cfgs = algo.configs(prob)
        calls.append(len(cfgs))
        algo.run(prob, x, w, bias, y, cfgs[-1])  # the adapter runs the wgrad kernel into y (a dw)
        return algo, cfgs[-1], 3.0

    monkeypatch.setattr(at, "_tune", fake_tune)
    case = (2, 8, 9, 7, 8, 3, 3, 1, 1, 1, 8, False)  # depthwise
    x, w, dy, kw = make(case, torch.float32)
    _, gw = ref_grads(x, w, dy, kw)
    at.clear_memo()
    try:
        prob = ConvProblem.from_tensors(x, w, None, **kw)
        algo, cfg, _, _ = bw.choose_wgrad(prob, x, dy, torch.empty_like(w))
        assert algo is bw.DWGRAD and cfg == bw.DWGRAD.configs(prob)[-1] and calls == [len(bw.DWGRAD.configs(prob))]
        key = at.cache_key(prob, x.device) + "|wgrad"
        assert at.disk_cache().get(key)["algorithm"] == "depthwise_wgrad"
        at.clear_memo()  # a new process: the disk answers, nothing is timed
        assert bw.choose_wgrad(prob, x, dy, torch.empty_like(w))[1] == cfg and len(calls) == 1
        assert_close(convgemm.conv2d_weight(x, w.shape, dy, **kw), gw, torch.float32, "tuned depthwise wgrad")
    finally:
        at.clear_memo()


@pytest.mark.parametrize("algorithm", ["implicit_gemm_tma", "implicit_gemm", "auto"])
def test_forward_writes_a_stride_phase_in_place(algorithm):
    """``conv2d_forward(out=...)`` (how strided dgrad writes each phase): a strided channels_last
    view is written in place -- through the TMA store itself where it can address the view --
    and nothing outside it is touched."""
    from convgemm.conv.fprop import _nhwc_out
    from convgemm.functional import conv2d_forward

    x = torch.randn(2, 16, 6, 5, device=DEVICE).to(memory_format=torch.channels_last)
    w = torch.randn(16, 16, 3, 3, device=DEVICE).to(memory_format=torch.channels_last)
    big = torch.full((2, 16, 12, 10), float("nan"), device=DEVICE).to(memory_format=torch.channels_last)
    view = big[:, :, 1::2, ::2]
    assert _nhwc_out(view, 16) is view and _nhwc_out(view) is not view  # TMA-addressable; not flat rows
    y = conv2d_forward(x, w, None, (1, 1), 1, (1, 1), 1, algorithm, out=view)
    assert y is view
    assert_close(view, F.conv2d(x.double().cpu(), w.double().cpu(), padding=1), torch.float32, algorithm)
    assert big[:, :, ::2].isnan().all() and big[:, :, 1::2, 1::2].isnan().all()


# grouped wgrad with several groups merged: (N, C, H, W, K, R, S, stride, padding, dilation, groups)
GT_WGRAD = [
    (2, 32, 9, 7, 32, 3, 3, 1, 1, 1, 8),  # ResNeXt-like: 4 in, 4 out per group
    (2, 128, 6, 8, 128, 3, 3, 2, 1, 1, 8),  # strided, 16 per group: super-groups of 64 on the phase view
    (1, 64, 6, 8, 64, 3, 3, 1, 1, 1, 8),  # 8 per group
    (2, 48, 7, 6, 96, 3, 3, 1, 2, 2, 12),  # dilated; 12 groups (gt 4 and 2), 8 outputs per group
    (1, 32, 6, 6, 64, 1, 1, 1, 0, 1, 4),  # a grouped 1x1
]


@pytest.mark.parametrize("case", GT_WGRAD, ids=str)
def test_wgrad_grouped_tma(case):
    """``wgrad_grouped_tma`` (gt groups as one wide wgrad on ``wgrad_tma``, then the block
    diagonal) for every merge it offers, into a dw with other strides, against float64; a NaN
    and an Inf in x reach exactly the weights torch's gradient has them in."""
    from convgemm.conv.backward import WGRAD_GT, WGRAD_TMA

    x, w, dy, kw = make((*case, False), torch.float16)
    prob = ConvProblem.from_tensors(x, w, None, **kw)
    assert WGRAD_GT.supports(prob, x, dy) is None
    _, gw = ref_grads(x, w, dy, kw)
    gts = WGRAD_GT.group_tiles(prob)
    assert gts and all(prob.groups % g == 0 and g * prob.cg <= 64 for g in gts)
    for gt in gts:
        cfg = replace(WGRAD_TMA.default_config(WGRAD_GT.reduced(prob, gt)), gt=gt)
        dw = torch.full((w.shape[0], w.shape[2], w.shape[3], w.shape[1]), float("nan"), dtype=w.dtype, device=DEVICE)
        dw = dw.permute(0, 3, 1, 2)  # [K, C/g, R, S] with channels_last strides
        WGRAD_GT.run(prob, x, dy, dw, cfg)
        assert_close(dw, gw, torch.float16, f"wgrad_grouped_tma gt{gt} {case}")
    bad = x.clone()
    bad[0, 1, 2, 2] = float("nan")
    bad[-1, prob.c - 1, 1, 3] = float("inf")
    _, gbad = ref_grads(bad, w, dy, kw)
    dw = torch.empty_like(w)
    WGRAD_GT.run(prob, bad, dy, dw, WGRAD_GT.default_config(prob))
    dw = dw.cpu()
    assert torch.equal(torch.isnan(dw), torch.isnan(gbad))
    assert torch.equal(torch.isinf(dw), torch.isinf(gbad))
    fin = torch.isfinite(gbad)
    assert fin.any() and not fin.all()
    assert_close(dw[fin], gbad[fin], torch.float16, "wgrad_grouped_tma, finite entries beside NaN and Inf")


def test_wgrad_grouped_tma_is_a_candidate_and_refuses():
    """The rules' choice stays the untuned default; the merge refuses what it cannot take."""
    from convgemm.conv.backward import DWGRAD, WGRAD_GT, choose_wgrad

    x, w, dy, kw = make((2, 32, 9, 7, 32, 3, 3, 1, 1, 1, 8, False), torch.float16)
    prob = ConvProblem.from_tensors(x, w, None, **kw)
    assert choose_wgrad(prob, x, dy)[0] is DWGRAD  # no dw: the default, nothing timed
    assert WGRAD_GT.group_tiles(prob) == [8, 4]  # 32 and 16 input channels per super-group

    def reason(c, k, groups, dtype=torch.float16, stride=1):
        x, w, dy, kw = make((1, c, 8, 8, k, 3, 3, stride, 1, 1, groups, False), dtype)
        return WGRAD_GT.supports(ConvProblem.from_tensors(x, w, None, **kw), x, dy)

    assert "groups = 1" in reason(16, 16, 1)
    assert "depthwise" in reason(16, 16, 16)
    xs, ws, dys, kws = make((1, 128, 8, 8, 128, 3, 3, 2, 1, 1, 8, False), torch.float16)
    strided = ConvProblem.from_tensors(xs, ws, None, **kws)
    assert WGRAD_GT.supports(strided, xs, dys) is None and WGRAD_GT.group_tiles(strided) == [4]
    assert "exactly 64" in reason(32, 32, 8, stride=2)  # strided: 4 per group never make 64 channels of 8 groups
    assert "no group count" in reason(9, 9, 3)  # 3 groups: no power of two divides them


# ---------------------------------------------------------------- sub-pixel dgrad (few channels)
# (N, C, H, W, K, R, S, stride, padding, dilation, groups, bias): RGB stems (7x7 stride 2 as
# ResNet's), odd sizes (every output_padding), stride 3, unequal strides, a filter narrower than
# the stride along one axis, padding 0
SUBPIXEL = [
    (2, 3, 16, 16, 8, 7, 7, 2, 3, 1, 1, False),
    (1, 3, 11, 9, 8, 3, 3, 2, 1, 1, 1, False),
    (1, 3, 10, 10, 8, 3, 3, 2, 0, 1, 1, False),
    (1, 4, 13, 10, 6, 5, 4, 3, 2, 1, 1, False),
    (1, 2, 9, 9, 4, 5, 5, (2, 3), (1, 2), 1, 1, False),
    (2, 3, 12, 11, 16, 4, 1, 2, 1, 1, 1, False),
]


@pytest.mark.parametrize(
    "m,layout",
    M_LAYOUTS,
)
@pytest.mark.parametrize("case", SUBPIXEL, ids=case_id)
@pytest.mark.interpreter_share(2, vary=("m", "layout"))
def test_dgrad_by_subpixel(case, m, layout):
    import convgemm.functional as fn

    x, w, dy, kw = make(case, DTYPES[m], channels_last=layout == "channels_last")
    assert fn._subpixel_pays(ConvProblem.from_tensors(x, w, None, **kw))
    dx = convgemm.conv2d_input(x.shape, w, dy, **kw)
    gx, _ = ref_grads(x, w, dy, kw)
    assert_close(dx, gx, DTYPES[m], "sub-pixel dgrad")
    assert dx.is_contiguous(memory_format=torch.channels_last if layout == "channels_last" else torch.contiguous_format)


def test_subpixel_route():
    import convgemm.functional as fn

    def pays(c, r, stride, groups=1, dil=1):
        x = torch.zeros(1, c, 16, 16)
        w = torch.zeros(8 * groups, c // groups, r, r)
        return fn._subpixel_pays(ConvProblem.from_tensors(x, w, None, stride=stride, dilation=dil, groups=groups))

    assert pays(3, 7, 2) and pays(4, 5, 3) and pays(4, 5, 4)
    assert not pays(16, 3, 2)  # not a first layer: the per-phase TMA kernel (untimed against it)
    assert not pays(3, 3, 1) and not pays(3, 2, 2) and not pays(3, 1, 2)  # stride 1; one tap per phase
    assert not pays(4, 3, 2, groups=2) and not pays(3, 3, 2, dil=2)


def test_subpixel_axis_places_every_tap_once():
    """Phase f's window positions hold exactly its taps, at their dy offsets, and the convolution
    gives ceil(size / stride) outputs from in-range dy rows."""
    from convgemm.functional import subpixel_axis

    for k, stride, pad, size in [
        (7, 2, 3, 224),
        (3, 2, 1, 9),
        (3, 2, 0, 10),
        (5, 3, 2, 13),
        (4, 2, 1, 11),
        (1, 2, 0, 8),
    ]:
        out = (size + 2 * pad - k) // stride + 1
        taps, start, stop, lo, hi, length = subpixel_axis(k, stride, pad, size, out)
        window = len(taps[0])
        assert length == -(-size // stride) and all(len(t) == window for t in taps)
        assert 0 <= start < stop <= out and lo >= 0 and hi >= 0
        assert stop - start + lo + hi - (window - 1) == length
        o_min = start - lo  # window position u reads dy row i + o_min + u
        for f in range(stride):
            placed = {r: u for u, r in enumerate(taps[f]) if r is not None}
            assert sorted(placed) == [r for r in range(k) if (f + pad - r) % stride == 0]
            assert all((f + pad - r) // stride == o_min + u for r, u in placed.items())


@pytest.mark.parametrize("case", SUBPIXEL[:3], ids=case_id)
def test_strided_dgrad_kernels_without_subpixel(case, monkeypatch):
    """The per-phase kernels still serve few-channel layers when the sub-pixel route is off."""
    import convgemm.functional as fn

    monkeypatch.setattr(fn, "_subpixel_pays", lambda prob: False)
    fn.clear_plans()
    try:
        x, w, dy, kw = make(case, torch.float32)
        gx, _ = ref_grads(x, w, dy, kw)
        assert_close(convgemm.conv2d_input(x.shape, w, dy, **kw), gx, torch.float32, "per-phase dgrad")
    finally:
        fn.clear_plans()


# ---------------------------------------------------------------- wgrad on the width unfold
UNFOLD_WGRAD = [
    (2, 3, 16, 16, 8, 7, 7, 2, 3, 1, 1, False),  # ResNet's stem: two row phases
    (1, 3, 19, 21, 24, 11, 11, 4, 2, 1, 1, False),  # AlexNet's: four row phases, odd sizes
    (1, 3, 11, 9, 8, 3, 3, 2, 0, 1, 1, False),  # a phase whose last rows are not read
    (1, 3, 10, 12, 8, 3, 3, 1, 1, 1, 1, False),  # CRAFT's conv1_1
    (2, 1, 9, 9, 4, 5, 5, (1, 3), (1, 2), 1, 1, False),  # a column stride (folded into the unfold)
    (1, 4, 13, 10, 6, 5, 4, 1, 2, 1, 1, False),
    (1, 2, 9, 12, 8, 3, 3, 1, 2, (2, 2), 1, False),  # dilated
    (1, 3, 7, 9, 16, 3, 7, 1, (0, 3), 1, 1, False),  # no row padding, wide columns
]


@pytest.mark.parametrize(
    "m,layout",
    [("fp16", "channels_last"), ("fp16", "nchw"), pytest.param("bf16", "channels_last", marks=pytest.mark.gpu)],
)
@pytest.mark.parametrize("case", UNFOLD_WGRAD, ids=case_id)
def test_wgrad_by_unfold(case, m, layout):
    import convgemm.functional as fn

    x, w, dy, kw = make(case, DTYPES[m], channels_last=layout == "channels_last")
    assert fn._unfold_wgrad_pays(ConvProblem.from_tensors(x, w, None, **kw))
    dw = convgemm.conv2d_weight(x, w.shape, dy, **kw)
    _, gw = ref_grads(x, w, dy, kw)
    assert_close(dw, gw, DTYPES[m], "wgrad by unfold")


def test_unfold_wgrad_route():
    import convgemm.functional as fn

    def pays(c, r, s, dtype=torch.float16, groups=1, stride=1, dil=1):
        x = torch.zeros(1, c, 16, 16, dtype=dtype)
        w = torch.zeros(8 * groups, c // groups, r, s, dtype=dtype)
        prob = ConvProblem.from_tensors(x, w, None, stride=stride, groups=groups, dilation=dil)
        return fn._unfold_wgrad_pays(prob)

    assert pays(3, 3, 3) and pays(1, 5, 5) and pays(4, 7, 7)
    assert not pays(8, 3, 3)  # the direct kernels read 16-byte channel rows
    assert pays(3, 7, 7, stride=2)  # a strided stem: one stride-1 wgrad per row phase
    assert not pays(3, 3, 3, stride=2, dil=2)  # a row phase's taps would not be consecutive
    assert not pays(3, 3, 1)  # one column: nothing to unfold
    assert not pays(3, 3, 3, dtype=torch.float32) and not pays(4, 3, 3, groups=2)


def test_wgrad_row_phases_read_what_the_strided_rows_read():
    """Each phase's stride-1 convolution gives exactly ``out`` rows, and its output row p, tap j
    reads the input row the strided convolution's tap reads."""
    from convgemm.functional import wgrad_row_phases

    for r, stride, pad, size in [(7, 2, 3, 224), (3, 2, 1, 9), (3, 2, 0, 11), (11, 4, 2, 19), (5, 3, 2, 13)]:
        out = (size + 2 * pad - r) // stride + 1
        seen = []
        for f, ph in enumerate(wgrad_row_phases(r, stride, pad, 1, size, out)):
            if ph is None:
                continue
            taps, start, stop, lo, hi = ph
            assert 0 <= start < stop <= len(range(f, size, stride)) and lo >= 0 and hi >= 0
            assert (stop - start) + lo + hi - (len(taps) - 1) == out
            for p in range(out):
                for j, t in enumerate(taps):
                    row = start - lo + p + j  # phase row, or padding when out of [start, stop)
                    want = p * stride + t - pad
                    if 0 <= want < size:
                        assert row * stride + f == want
                    else:
                        assert not start <= row < stop
            seen += taps
        assert sorted(seen) == [t for t in range(r) if any((p * stride + t - pad) in range(size) for p in range(out))]


@pytest.mark.parametrize(
    "case,route",
    [
        ((2, 16, 8, 8, 32, 3, 3, 1, 1, 1, 1, False), "dgrad_as_forward"),
        ((2, 3, 16, 16, 16, 7, 7, 2, 3, 1, 1, False), "dgrad_by_subpixel"),  # a first layer
        ((2, 16, 8, 8, 32, 3, 3, 2, 1, 1, 1, False), "dgrad_tma"),
        # a 1x1 downsample: by phases under the interpreter; on a GPU only from 2**20 input elements
        ((2, 16, 8, 8, 32, 1, 1, 2, 0, 1, 1, False), "dgrad_by_phases" if INTERPRET else "dgrad"),
        ((2, 16, 9, 9, 32, 3, 3, 2, 1, 1, 1, False), "dgrad"),  # odd sizes: no phase view
    ],
)
def test_dgrad_route(case, route):
    """``dgrad_route`` names the path conv2d_input takes (the benchmark's algorithm column reads
    it), and that path gives torch's gradient."""
    import convgemm.functional as fn

    x, w, dy, kw = make(case, torch.float32)
    prob = ConvProblem.from_tensors(x, w, None, **kw)
    if (
        DEVICE == "cuda"
        and route in ("dgrad_tma", "dgrad_by_phases")
        and not torch.cuda.get_device_capability()[0] >= 9
    ):
        pytest.skip("the TMA routes need Hopper")
    assert fn.dgrad_route(prob, dy) == route
    gx, _ = ref_grads(x, w, dy, kw)
    assert_close(convgemm.conv2d_input(x.shape, w, dy, **kw), gx, torch.float32, route)


def test_dgrad_tma_candidates_and_memo(monkeypatch):
    """The strided TMA dgrad is tuned among a few tiles (the default first; 128-wide ones only
    for strict fp32), and its choice is memoised apart from the same problem's wgrad choice."""
    from convgemm.conv import backward

    monkeypatch.setattr(backward, "interpreting", lambda: False)
    x = torch.zeros(8, 256, 28, 28).to(memory_format=torch.channels_last)
    w = torch.zeros(256, 256, 3, 3)
    prob = ConvProblem.from_tensors(x, w, None, stride=2, padding=1)
    bf16 = replace(prob, dtype=torch.bfloat16)
    cands = backward.DGRAD_TMA.configs(bf16)
    assert cands[0] == backward.DGRAD_TMA.default_config(bf16) and len(cands) == len(set(cands)) >= 4
    assert {(c.block_m, c.block_n) for c in cands} >= {(128, 256), (128, 128), (64, 128)}
    for c in cands:
        assert c.tile_n * c.tile_h * c.tile_w == c.block_n
    strict = replace(prob, precision="tf32x3")
    assert all(c.block_n <= 128 for c in backward.DGRAD_TMA.configs(strict))
    monkeypatch.setattr(backward, "interpreting", lambda: True)
    small = ConvProblem.from_tensors(torch.zeros(2, 32, 8, 8), torch.zeros(32, 32, 3, 3), None, stride=2, padding=1)
    dy = torch.zeros(2, 32, 4, 4).to(memory_format=torch.channels_last)
    dx = torch.zeros(2, 32, 8, 8).to(memory_format=torch.channels_last)
    cfg = backward.tuned_dgrad_tma(small, dy, torch.zeros(32, 32, 3, 3), dx)  # no GPU: the default, memoised
    assert cfg == backward.DGRAD_TMA.default_config(small) and backward.dgrad_tma_memo(small) == cfg
    assert (small.key(), ("dgrad_tma",), "dgrad_tma") in backward._wgrad_memo
    assert backward.dgrad_tma_memo(replace(small, k=64)) is None
