"""The warp-specialized Gluon wgrad (``conv/ws_wgrad.py``): ``conv3d_wgrad_ws`` and its 2-D form
``wgrad_ws``, against float64 torch on the CPU. The Gluon kernel runs on a Hopper GPU only; the
finish kernel, the candidate rules and the 2-D -> 3-D views also run under the interpreter."""

from dataclasses import replace

import pytest
import torch
from conftest import DEVICE
from reference import assert_close
from torch.nn.grad import conv2d_weight, conv3d_weight

from convgemm._runtime import interpreting
from convgemm.conv import backward as bw
from convgemm.conv import conv3d as k3
from convgemm.problem import ConvProblem
from convgemm.problem3d import ConvProblem3d

_CL3 = torch.channels_last_3d

pytestmark = pytest.mark.usefixtures("no_tf32")

# N, C, D, H, W, K, T, R, S, stride, padding, dilation
CASES3 = [
    # K = 80: a partial output-channel tile; C = 48: a partial input-channel tile; odd sizes: pixel
    # blocks past every edge
    ((2, 48, 3, 5, 7, 80, 3, 3, 3, 1, 1, 1), torch.bfloat16),
    ((2, 64, 4, 6, 9, 64, 3, 3, 3, 1, 1, 1), torch.float16),
    ((1, 32, 5, 8, 8, 96, 3, 1, 1, 1, (1, 0, 0), 1), torch.bfloat16),  # temporal 3x1x1
    ((1, 64, 4, 7, 10, 32, 3, 3, 3, 1, (1, 2, 3), (1, 2, 3)), torch.bfloat16),  # dilated
    ((2, 256, 2, 7, 7, 256, 3, 3, 3, 1, 1, 1), torch.bfloat16),  # 256-channel tiles, a tiny volume
    # strided, through the stride-phase view (C a multiple of 64)
    ((2, 64, 5, 6, 8, 48, 3, 3, 3, 2, 1, 1), torch.bfloat16),
    ((1, 128, 3, 8, 6, 32, 1, 3, 3, (1, 2, 2), (0, 1, 1), 1), torch.float16),
]


def _tensors3(case, dtype):
    n, c, d, h, w, k, t, r, s, stride, pad, dil = case
    x = torch.randn(n, c, d, h, w, device=DEVICE).to(dtype).contiguous(memory_format=_CL3)
    wt = torch.randn(k, c, t, r, s, device=DEVICE).to(dtype)
    kw = dict(stride=stride, padding=pad, dilation=dil)
    prob = ConvProblem3d.from_tensors(x, wt, None, **kw)
    dy = torch.randn(n, k, prob.od, prob.p, prob.q, device=DEVICE).to(dtype).contiguous(memory_format=_CL3)
    want = conv3d_weight(x.double().cpu(), wt.shape, dy.double().cpu(), **kw)
    return prob, x, dy, want


@pytest.mark.gpu
@pytest.mark.parametrize("case,dtype", CASES3, ids=str)
def test_conv3d_wgrad_ws_every_candidate_config(case, dtype):
    """Every config ``conv3d_wgrad_ws`` offers on a 132-SM GPU and on a 2-SM one (fewer splits),
    and the first ones unsplit and split in two, against float64; each run twice into a NaN-filled dw (a persistent program reuses its ring
    across units, and the second run must not read the first's partials)."""
    prob, x, dy, want = _tensors3(case, dtype)
    algo = k3.WGRAD3D_WS
    assert algo.supports(prob, x, dy) is None, algo.supports(prob, x, dy)
    cfgs = algo.candidates(prob, 132) + algo.candidates(prob, 2)
    assert cfgs
    # unsplit (each tile stores dw itself) and split (partials summed by the finish kernel)
    c0 = cfgs[0]
    blocks = prob.n * -(-prob.od // c0.tile_n) * -(-prob.p // c0.tile_h) * -(-prob.q // c0.tile_w)
    two = [replace(c0, split_k=2)] if blocks >= 2 else []  # (a split must not be empty)
    cfgs = list(dict.fromkeys(cfgs + [replace(c, split_k=1) for c in cfgs[:2]] + two))
    for cfg in cfgs:
        dw = torch.full(want.shape, float("nan"), device=DEVICE, dtype=dtype)
        algo.run(prob, x, dy, dw, cfg)
        algo.run(prob, x, dy, dw, cfg)
        assert_close(dw, want, dtype, f"conv3d_wgrad_ws [{cfg.describe()}] {case}")


@pytest.mark.gpu
def test_conv3d_wgrad_tuner_offers_ws():
    """On Hopper the 3-D wgrad tuner times ``conv3d_wgrad_ws`` beside the Triton kernels, and the
    gradient it returns (whichever won) is right."""
    case, dtype = CASES3[1]
    prob, x, dy, want = _tensors3(case, dtype)
    dw = torch.empty(want.shape, device=DEVICE, dtype=dtype)
    algo, cfg = k3.wgrad_choice(prob, x, dy, dw)
    if torch.cuda.get_device_capability()[0] == 9:
        assert k3.WGRAD3D_WS.supports(prob, x, dy) is None
    algo.run(prob, x, dy, dw, cfg)
    assert_close(dw, want, dtype, f"tuned 3-D wgrad ({algo.name}) {case}")


# N, C, H, W, K, R, S, stride, padding, dilation
CASES2 = [
    ((4, 64, 9, 11, 96, 3, 3, 1, 1, 1), torch.bfloat16),  # odd sizes, K = 96
    ((2, 128, 14, 14, 256, 3, 3, 1, 2, 2), torch.float16),  # dilated
    ((3, 64, 7, 7, 128, 1, 1, 1, 0, 1), torch.bfloat16),  # 1x1: one row of N*H*W pixels
    ((2, 64, 16, 16, 128, 1, 1, 2, 0, 1), torch.bfloat16),  # strided 1x1 (a ResNet shortcut)
    ((2, 64, 14, 12, 64, 3, 3, 2, 1, 1), torch.bfloat16),  # strided 3x3
    ((1, 48, 7, 20, 32, 5, 5, 1, 2, 1), torch.bfloat16),  # 5x5, C = 48
    # strided with 7x7 outputs: pixel blocks of several images (``conv3d.depth_free``)
    ((4, 64, 14, 14, 64, 3, 3, 2, 1, 1), torch.bfloat16),
    ((5, 128, 14, 14, 64, 1, 1, 2, 0, 1), torch.float16),
]


def _tensors2(case, dtype):
    n, c, h, w, k, r, s, stride, pad, dil = case
    x = torch.randn(n, c, h, w, device=DEVICE).to(dtype).contiguous(memory_format=torch.channels_last)
    wt = torch.randn(k, c, r, s, device=DEVICE).to(dtype)
    kw = dict(stride=stride, padding=pad, dilation=dil)
    prob = ConvProblem.from_tensors(x, wt, None, **kw)
    dy = torch.randn(n, k, prob.p, prob.q, device=DEVICE).to(dtype).contiguous(memory_format=torch.channels_last)
    want = conv2d_weight(x.double().cpu(), wt.shape, dy.double().cpu(), **kw)
    return prob, x, wt, dy, want


@pytest.mark.gpu
@pytest.mark.parametrize("case,dtype", CASES2, ids=str)
def test_wgrad_ws_2d_every_candidate_config(case, dtype):
    """``wgrad_ws`` (the Gluon wgrad on a 2-D layer, the batch as depth; 1x1 layers flat) with
    every config it offers, into a channels_last dw, against float64; and the tuned weight
    gradient through autograd."""
    prob, x, wt, dy, want = _tensors2(case, dtype)
    algo = bw.WGRAD_WS
    assert algo.supports(prob, x, dy) is None, algo.supports(prob, x, dy)
    p3 = algo._problem3d(prob)
    cfgs = list(dict.fromkeys(k3.WGRAD3D_WS.candidates(p3, 132) + k3.WGRAD3D_WS.candidates(p3, 2)))
    assert cfgs
    if prob.stride != (1, 1) and prob.p == 7:
        assert any(c.tile_n > 1 for c in cfgs), "7x7 strided outputs: blocks of several images"
    for cfg in cfgs:
        dw = torch.full(want.shape, float("nan"), device=DEVICE, dtype=dtype).contiguous(
            memory_format=torch.channels_last
        )
        algo.run(prob, x, dy, dw, cfg)
        assert_close(dw, want, dtype, f"wgrad_ws [{cfg.describe()}] {case}")
    # the tuner's choice (wgrad_ws among the candidates on Hopper)
    dw = torch.empty(want.shape, device=DEVICE, dtype=dtype)
    algo2, cfg2, xk, dyk = bw.choose_wgrad(prob, x, dy, dw)
    algo2.run(prob, xk, dyk, dw, cfg2)
    assert_close(dw, want, dtype, f"tuned wgrad ({algo2.name}) {case}")


@pytest.mark.parametrize(
    "case",
    [
        (2, 16, 5, 7, 24, 3, 3, 1, 1, 1),
        (3, 32, 6, 4, 16, 3, 1, 1, (1, 0), (2, 1)),
        (2, 16, 3, 5, 32, 1, 1, 1, 0, 1),  # flat: one row of 30 pixels
    ],
    ids=str,
)
def test_wgrad_ws_3d_view(case):
    """``wgrad_ws`` runs a 2-D layer as the 3-D problem and views of ``WgradWs._views`` (the batch
    as depth; a 1x1 layer as one row): that mapping, checked under the interpreter by running the
    same problem and views through ``conv3d_wgrad_tma`` (the Gluon kernel is GPU-only)."""
    prob, x, wt, dy, want = _tensors2(case, torch.float16)
    p3, x5, dy5 = bw.WGRAD_WS._views(prob, x, dy)
    n, c, h, w = x.shape
    if prob.is_1x1:
        assert (p3.d, p3.h, p3.w, p3.q) == (1, 1, n * h * w, n * h * w)
    else:
        assert (p3.n, p3.d, p3.t, p3.od, p3.p, p3.q) == (1, n, 1, n, prob.p, prob.q)
    dw = torch.full(want.shape, float("nan"), device=DEVICE, dtype=torch.float16)
    p3 = replace(p3, **k3.input_flags(x5, p3.stride))
    assert k3.WGRAD3D_TMA.supports(p3, x5, dy5) is None, k3.WGRAD3D_TMA.supports(p3, x5, dy5)
    k3.WGRAD3D_TMA.run(p3, x5, dy5, dw.unsqueeze(2), k3.WGRAD3D_TMA.default_config(p3))
    assert_close(dw, want, torch.float16, f"conv3d_wgrad_tma on wgrad_ws's views {case}")


def test_ws_wgrad_finish_kernel():
    """The second kernel of the Gluon wgrad (plain Triton, so it runs under the interpreter): each
    tile's partials (split-major units) summed, rows past K and columns past C left alone, into
    a [K, C, T, R, S] dw with non-contiguous strides, each tile at its tap."""
    from convgemm.conv.ws_wgrad import wgrad_finish, wgrad_geometry

    k, c, taps, bm, bn, split = 40, 24, (2, 3, 1), 32, 16, 3
    dw_full = torch.full((k, c, 2, 3, 1), 5.0, device=DEVICE).permute(0, 2, 3, 4, 1)  # strided storage
    dw = dw_full.permute(0, 4, 1, 2, 3)  # [K, C, T, R, S] view, channels last in memory
    tiles, m_tiles, c_tiles, _, units = wgrad_geometry((1, c), (1, k, 1, 1, 1), taps, (1, 1, 16), bm, bn, split)
    assert (tiles, m_tiles, c_tiles, units) == (2 * 6 * 2, 2, 2, 2 * 6 * 2 * 3)
    ws = torch.randn(units, bm, bn, device=DEVICE)
    wgrad_finish(ws.flatten(), dw, tiles, m_tiles, c_tiles, split, taps, bm, bn)
    total = ws.view(split, tiles, bm, bn).sum(0).cpu()
    want = torch.empty(k, c, *taps)
    for tile in range(tiles):
        mb, rest = tile % m_tiles, tile // m_tiles
        cb, tap = rest % c_tiles, rest // c_tiles
        t, r, s = tap // 3, tap % 3, 0
        rows = slice(mb * bm, min(k, mb * bm + bm))
        cols = slice(cb * bn, min(c, cb * bn + bn))
        want[rows, cols, t, r, s] = total[tile, : rows.stop - rows.start, : cols.stop - cols.start]
    assert_close(dw.float(), want.double(), torch.float32, "ws wgrad finish")


def test_wgrad_ws_supports_and_candidates():
    """What the Gluon wgrad refuses and offers (its candidates depend only on the problem)."""

    def prob(n, c, d, h, w, k, t=3, stride=(1, 1, 1), **kw):
        base = dict(dtype=torch.bfloat16, groups=1)
        base.update(kw)
        return ConvProblem3d(n, c, d, h, w, k, t, 3, 3, stride, (1, 1, 1), (1, 1, 1), (1, 1, 1), base["groups"],
                             base["dtype"], tma_input_ok=True)  # fmt: skip

    algo = k3.WGRAD3D_WS
    if interpreting():
        assert "TRITON_INTERPRET" in algo.supports(prob(8, 64, 8, 8, 8, 64))
    for p, why in ((prob(8, 64, 8, 8, 8, 64, groups=2), "groups"), (prob(8, 64, 8, 8, 8, 64, dtype=torch.float32),
                   "fp16 or bf16"), (prob(8, 96, 8, 8, 8, 64, stride=(2, 2, 2)), "multiple of 64")):  # fmt: skip
        reason = algo.supports(p)
        assert reason is not None and (why in reason or "TRITON_INTERPRET" in reason), reason
    # ResNet-50's 512@7 3x3 at batch 64 as the 2-D view: 128 x 256 tiles = 4 x 9 x 2 = 72 tiles,
    # 64 x 7 x 7 pixels in blocks of 64 (1 x 8 x 8) -> 64 blocks
    p2 = ConvProblem3d(1, 512, 64, 7, 7, 512, 1, 3, 3, (1, 1, 1), (0, 1, 1), (0, 1, 1), (1, 1, 1), 1,
                       torch.bfloat16, tma_input_ok=True)  # fmt: skip
    for cands in (algo.candidates(p2, 132), algo.candidates(prob(8, 256, 4, 14, 14, 256), 132)):
        assert cands
        for cfg in cands:
            assert cfg.block_k == cfg.tile_n * cfg.tile_h * cfg.tile_w and cfg.num_warps == cfg.block_m // 16
            assert cfg.num_stages * cfg.block_k * (cfg.block_m + cfg.block_n) * 2 <= 200_000
    # splits by the cost model: 72 tiles x 64 blocks of 64 pixels (a unit's fixed cost: 4 blocks
    # unsplit, 7 split, plus 4 once for the finish kernel): one split, 1 wave x (64 + 4) = 68;
    # three, 2 x (21.3 + 7) + 4 = 60.7; five, 3 x (12.8 + 7) + 4 = 63.4
    assert k3.Wgrad3dWs.splits(72, 64, 132, 64) == [3, 5]
    # ResNet-50's 512 s2 3x3 @14 as 72 tiles x 49 blocks: unsplit 1 x (49 + 4) = 53 now ranks
    # second (three: 2 x (16.3 + 7) + 4 = 50.7); the H200 timed it 43.0 us against 44.9 for three
    assert k3.Wgrad3dWs.splits(72, 49, 132, 64) == [1, 3]
    # every range at least 4 blocks and none empty, at most four waves
    for tiles, blocks in ((9, 1568), (36, 98), (1, 5), (600, 64)):
        for sk in k3.Wgrad3dWs.splits(tiles, blocks, 132, 128):
            per = -(-blocks // sk)
            assert sk == 1 or (per >= 4 and (sk - 1) * per < blocks and tiles * sk <= 4 * 132)


def test_ws_layouts_are_memoised():
    """The Gluon kernels' TMA box layouts (``ws3d._layout``) are computed once per box and dtype
    (computing one took about 20 us of a launch's host time here) and equal Gluon's own default."""
    from triton.experimental.gluon import language as gl

    from convgemm.conv.ws3d import _layout

    for block, dtype, gdt in (([1, 2, 8, 8, 64], torch.bfloat16, gl.bfloat16), ([1, 1, 1, 128, 256], torch.float16,
                                                                                 gl.float16)):  # fmt: skip
        got = _layout(block, dtype)
        assert got is _layout(list(block), dtype)
        assert got == gl.NVMMASharedLayout.get_default_for(block, gdt)
