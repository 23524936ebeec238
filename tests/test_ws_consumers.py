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

pytestmark = pytest.mark.usefixtures("no_tf32")


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
    # written into one stride phase of a larger tensor: its pixels are no single row
    assert not WS.flat(replace(_prob(64, 1024, 14, 14, 256, 1, 1), output_strided=True))


def test_a_strided_out_is_part_of_the_problem(monkeypatch):
    """``conv2d_forward(..., out=view)`` with a view that is not dense NHWC (strided dgrad's
    phases) marks its problem ``output_strided``, which the tuning key keeps apart; the result
    is the convolution, written into the view alone."""
    from convgemm import functional

    seen = []
    real = functional.choose

    def choose(prob, *args, **kwargs):
        seen.append(prob)
        return real(prob, *args, **kwargs)

    monkeypatch.setattr(functional, "choose", choose)
    x = torch.randn(1, 16, 6, 6, device=DEVICE).contiguous(memory_format=torch.channels_last)
    w = torch.randn(8, 16, 1, 1, device=DEVICE)
    big = torch.zeros(1, 8, 12, 12, device=DEVICE).contiguous(memory_format=torch.channels_last)
    out = big[:, :, ::2, 1::2]
    functional.conv2d_forward(x, w, None, (1, 1), 0, (1, 1), 1, out=out)
    torch.testing.assert_close(out, F.conv2d(x, w), rtol=1e-4, atol=1e-4)
    assert (big[:, :, 1::2] == 0).all() and (big[:, :, ::2, ::2] == 0).all()
    assert len(seen) == 1 and seen[0].output_strided
    assert replace(seen[0], output_strided=False).key() != seen[0].key()
    functional.conv2d_forward(x, w, None, (1, 1), 0, (1, 1), 1, out=torch.empty_like(big[:, :, :6, :6]))
    assert len(seen) == 2 and not seen[1].output_strided


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


@pytest.mark.gpu
@pytest.mark.parametrize("parts", [1, 3])
def test_stores_into_a_stride_phase(parts):
    """Strided dgrad writes each phase's forward into ``dx[:, :, a::2, b::2]``: the kernel stores
    into that view in place (TMA over its strides) and leaves the other phases alone."""
    dtype = torch.bfloat16
    x = torch.randn(2, 64, 12, 40, device=DEVICE).to(dtype).contiguous(memory_format=torch.channels_last)
    wt = (torch.randn(128, 64, 3, 3, device=DEVICE) / (64 * 9) ** 0.5).to(dtype)
    want = F.conv2d(x.double().cpu(), wt.double().cpu(), padding=1)
    prob = ConvProblem.from_tensors(x, wt, padding=1)
    prob = replace(prob, tma_ok=True, input_tma_ok=True, input_dense=True, input_phases_ok=True)
    big = torch.full((2, 128, 24, 80), float("nan"), device=DEVICE, dtype=dtype).contiguous(
        memory_format=torch.channels_last
    )
    y = big[:, :, 1::2, ::2]
    cfg = (Config(64, 128, 64, 4, 3, tile_n=1, tile_h=4, tile_w=16, persistent=1, parts=3) if parts == 3
           else Config(128, 128, 64, 8, 3, tile_n=1, tile_h=4, tile_w=32, persistent=1))  # fmt: skip
    WS.run(prob, x, wt, None, y, cfg)
    assert_close(y, want, dtype, f"implicit_gemm_ws [{cfg.describe()}] into a stride phase")
    assert torch.isnan(big[:, :, 0::2]).all() and torch.isnan(big[:, :, 1::2, 1::2]).all()


def test_a_block_of_the_wrong_size_is_refused():
    """A forced config whose pixel block is not 64 pixels a warpgroup says so before compiling
    (wgmma's M is 64 rows a warpgroup)."""
    from convgemm.conv.ws3d import ws_conv3d

    x = torch.zeros(1, 64, 1, 4, 40, dtype=torch.bfloat16).to(memory_format=torch.channels_last_3d)
    y = torch.zeros(1, 128, 1, 4, 40, dtype=torch.bfloat16).to(memory_format=torch.channels_last_3d)
    wp = torch.zeros(128, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="16 per warp"):
        ws_conv3d(x, wp, None, y, (1, 1, 1), (0, 0, 0), (1, 1, 1), (1, 1, 16), 128, warps=4, consumers=3,
                  compile_only=True)  # fmt: skip


@pytest.fixture
def tf32_on():
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    yield
    torch.backends.cudnn.allow_tf32 = old


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES + [(2, 96, 10, 12, 64, 3, 3, 1, 1)], ids=str)
def test_tf32_every_candidate(case, tf32_on):
    """fp32 with TF32 on: the kernel's wgmma reads fp32 operands as TF32 (32 channels a K step).
    Every config the tuner would time, with a bias and the fused ReLU, against float64 at the
    TF32 threshold; C = 96 takes 32-channel K steps (three of them a tap)."""
    n, c, h, w, k, r, s, stride, pad = case
    x = torch.randn(n, c, h, w, device=DEVICE).contiguous(memory_format=torch.channels_last)
    wt = torch.randn(k, c, r, s, device=DEVICE) / (c * r * s) ** 0.5
    b = torch.randn(k, device=DEVICE)
    want = F.conv2d(x.double().cpu(), wt.double().cpu(), b.double().cpu(), stride=stride, padding=pad).clamp_min(0)
    prob = ConvProblem.from_tensors(x, wt, b, stride=stride, padding=pad)
    assert prob.precision == "tf32"
    prob = replace(prob, tma_ok=True, input_tma_ok=True, input_dense=True, input_phases_ok=True, activation="relu")
    assert WS.supports(prob) is None, WS.supports(prob)
    # a layer of few tiles (784 pixels) is offered nothing: its untuned config then
    cfgs = WS.configs(prob) or [WS.default_config(prob)]
    assert all(cfg.block_k <= 32 for cfg in cfgs)
    for cfg in cfgs:
        y = torch.full(want.shape, float("nan"), device=DEVICE).contiguous(memory_format=torch.channels_last)
        WS.run(prob, x, wt, b, y, cfg)
        assert_close(y, want, torch.float32, f"implicit_gemm_ws tf32 [{cfg.describe()}] {case}")


@pytest.mark.gpu
def test_strict_fp32_is_refused():
    """TF32 off: strict fp32 is 3xTF32 elsewhere, which this kernel does not do; it says so."""
    x = torch.randn(2, 64, 8, 8, device=DEVICE).contiguous(memory_format=torch.channels_last)
    wt = torch.randn(64, 64, 3, 3, device=DEVICE)
    prob = replace(ConvProblem.from_tensors(x, wt, padding=1), tma_ok=True, input_tma_ok=True, input_dense=True)
    assert "TF32 is off" in WS.supports(prob)
