"""``implicit_gemm_ws`` with several consumer partitions (``ws3d``'s ``CONS``: 192-pixel tiles of
three 64-pixel blocks side by side) and the flat view of 1x1 layers (one row of N*H*W pixels).

The kernel is Gluon, so the GPU tests run it; the CPU tests check the views and which layers are
offered the three-consumer tile."""

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from conftest import DEVICE
from reference import assert_close

from convgemm.conv import conv3d as k3
from convgemm.conv.fprop import ALGORITHMS, Config
from convgemm.matmul.launch import Launch
from convgemm.problem import ConvProblem

WS = ALGORITHMS["implicit_gemm_ws"]


def _prob(n, c, h, w, k, r, s, stride=1, pad=0, dense=True):
    x = torch.zeros(n, c, h, w, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    wt = torch.zeros(k, c, r, s, dtype=torch.bfloat16)
    prob = ConvProblem.from_tensors(x, wt, stride=stride, padding=pad)
    return replace(prob, tma_ok=True, input_tma_ok=True, input_dense=dense, input_phases_ok=True)


def test_flat_view_is_the_pixel_row():
    """A dense NHWC tensor (and one whose pixels are padded to a wider stride) seen as
    [1, C, 1, 1, N*H*W]: column i of the view is pixel i in (n, h, w) order."""
    x = torch.randn(2, 8, 3, 5).contiguous(memory_format=torch.channels_last)
    v = WS.view_3d(x, flat=True)
    assert v.shape == (1, 8, 1, 1, 30)
    torch.testing.assert_close(v[0, :, 0, 0, :], x.permute(1, 0, 2, 3).reshape(8, -1), rtol=0, atol=0)
    wide = torch.randn(2, 3, 5, 12)[..., :8].permute(0, 3, 1, 2)  # pixel stride 12, channels 0-7
    v = WS.view_3d(wide, flat=True)
    torch.testing.assert_close(v[0, :, 0, 0, :], wide.permute(1, 0, 2, 3).reshape(8, -1), rtol=0, atol=0)


def test_flat_problems():
    """Which layers run as one pixel row: 1x1, stride 1, unpadded, evenly strided pixels only."""
    assert WS.flat(_prob(64, 1024, 14, 14, 256, 1, 1))
    p3 = WS.as_3d(_prob(64, 1024, 14, 14, 256, 1, 1))
    assert (p3.n, p3.d, p3.h, p3.w, p3.od, p3.p, p3.q) == (1, 1, 1, 12544, 1, 1, 12544)
    assert not WS.flat(_prob(64, 1024, 14, 14, 256, 1, 1, dense=False))
    assert not WS.flat(_prob(64, 1024, 14, 14, 256, 1, 1, stride=2))
    assert not WS.flat(_prob(64, 1024, 14, 14, 256, 1, 1, pad=1))
    assert not WS.flat(_prob(64, 256, 14, 14, 256, 3, 3, pad=1))


def test_three_consumer_tiles_where_waves_fill():
    """ResNet-50's l3 1x1 reduce (12,544 pixels x 256 channels: 98 tiles of 128x256 or 196 of
    128x128 on 132 SMs, 132 of 192x128) and CRAFT's 192-wide rows are offered the 192-pixel tile;
    layers of fewer than 128 output channels and 7x7 images (rows of 16 or more pixels side by
    side would be mostly padding) are not."""

    def x3(*shape, **kw):
        return [c for c in k3.WS3D.candidates(WS.as_3d(_prob(*shape, **kw)), 132) if c.parts > 1]

    reduce = x3(64, 1024, 14, 14, 256, 1, 1)
    assert len(reduce) == 1, [c.describe() for c in reduce]
    c = reduce[0]
    assert (c.block_m, c.block_n, c.num_warps, c.split_k, c.persistent, c.parts) == (64, 128, 4, 1, 1, 3)
    assert (c.tile_n, c.tile_h, c.tile_w) == (1, 1, 64)
    # three input boxes and the shared weight per stage, three store tiles: within shared memory
    assert c.num_stages * (3 * 64 + 128) * c.block_k * 2 + 3 * 64 * 128 * 2 <= 225_000 and c.num_stages >= 3
    assert " x3" in c.describe()
    craft = x3(1, 256, 192, 192, 256, 3, 3, pad=1)
    assert [(c.tile_n, c.tile_h, c.tile_w) for c in craft] == [(1, 1, 64)]  # three blocks: one whole row
    assert not x3(64, 256, 56, 56, 64, 1, 1)  # 64 output channels
    assert not x3(64, 512, 7, 7, 512, 3, 3, pad=1)


# N, C, H, W, K, R, S, stride, pad
GPU_CASES = [
    (4, 64, 14, 14, 256, 1, 1, 1, 0),  # flat: 784 pixels, the last tile's blocks 1 and 2 past the end
    (16, 64, 56, 56, 96, 1, 1, 1, 0),  # flat, 262 tiles (programs take two), K = 96: a partial channel tile
    (2, 64, 9, 30, 128, 3, 3, 1, 1),  # spatial blocks side by side along 30 columns, padded
    (2, 64, 16, 48, 64, 3, 3, 2, 1),  # strided: the stride-phase view
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=str)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("parts", [2, 3])
def test_consumers_match_reference(case, dtype, parts):
    """Tiles of 2 or 3 consumer blocks, with a bias and the fused ReLU, twice (a persistent
    program reuses its ring and store buffers), against float64; and the flat view unsplit on one
    consumer."""
    n, c, h, w, k, r, s, stride, pad = case
    x = torch.randn(n, c, h, w, device=DEVICE).to(dtype).contiguous(memory_format=torch.channels_last)
    wt = (torch.randn(k, c, r, s, device=DEVICE) / (c * r * s) ** 0.5).to(dtype)
    b = torch.randn(k, device=DEVICE).to(dtype)
    want = F.conv2d(x.double().cpu(), wt.double().cpu(), b.double().cpu(), stride=stride, padding=pad).clamp_min(0)
    prob = ConvProblem.from_tensors(x, wt, b, stride=stride, padding=pad)
    prob = replace(prob, tma_ok=True, input_tma_ok=True, input_dense=True, input_phases_ok=True, activation="relu")
    assert WS.supports(prob) is None, WS.supports(prob)
    p3 = WS.as_3d(prob)
    deep = stride == 1
    td, th, tw = next(t[1:] for t in k3.spatial_tiles3(p3, 64) if deep or t[1] == 1)
    cfgs = [Config(64, 128, 64, 4, 3, tile_n=td, tile_h=th, tile_w=tw, persistent=1, parts=parts)]
    if parts == 3:
        cfgs.append(Config(128, 128, 64, 8, 3, tile_n=1, tile_h=1, tile_w=128, persistent=1) if WS.flat(prob)
                    else cfgs[0])  # fmt: skip
    for cfg in cfgs:
        y = torch.full(want.shape, float("nan"), device=DEVICE, dtype=dtype).contiguous(
            memory_format=torch.channels_last
        )
        WS.run(prob, x, wt, b, y, cfg)
        WS.run(prob, x, wt, b, y, cfg)
        assert_close(y, want, dtype, f"implicit_gemm_ws [{cfg.describe()}] {case}")
        # a call plan's path: the first call binds the launcher, the next ones replay it
        launch = Launch()
        for _ in range(3):
            y.fill_(float("nan"))
            WS.run(prob, x, wt, b, y, cfg, launch=launch)
            assert_close(y, want, dtype, f"implicit_gemm_ws [{cfg.describe()}] replayed {case}")
        assert launch.fast_ready
