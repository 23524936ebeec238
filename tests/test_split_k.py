"""Split-K configs of the TMA algorithms, run directly (the tuner only offers them on a GPU)."""

from dataclasses import replace

import pytest
import torch
from conftest import DEVICE
from reference import assert_close, conv2d_ref, conv_inputs

import convgemm
from convgemm._runtime import has_tma
from convgemm.conv.fprop import ALGORITHMS, Config, spatial_tiles
from convgemm.conv.layout import tma_aligned
from convgemm.problem import ConvProblem


def _problem(x, w, b, **kw):
    prob = ConvProblem.from_tensors(x, w, b, **kw)
    return replace(prob, tma_ok=has_tma(x), input_tma_ok=tma_aligned(x, prob.cg), input_dense=True)


@pytest.mark.parametrize("split_k", [2, 3, 4])
@pytest.mark.parametrize(
    "algorithm,shape",
    [
        ("implicit_gemm_tma", (2, 32, 5, 6, 48, 3, 3, 1, 1)),  # 9 taps x 2 channel tiles = 18 K tiles
        ("gemm_1x1", (2, 96, 4, 5, 40, 1, 1, 1, 0)),  # 6 K tiles of 16
    ],
)
def test_split_k_matches_reference(algorithm, shape, split_k):
    n, c, h, w_, k, r, s, stride, pad = shape
    dtype = torch.float16
    x = torch.randn(n, c, h, w_, device=DEVICE).to(dtype).to(memory_format=torch.channels_last)
    w = torch.randn(k, c, r, s, device=DEVICE).to(dtype).to(memory_format=torch.channels_last)
    b = torch.randn(k, device=DEVICE).to(dtype)
    prob = _problem(x, w, b, stride=stride, padding=pad)
    algo = ALGORITHMS[algorithm]
    assert algo.supports(prob) is None
    _, tn, th, tw = spatial_tiles(prob, 32)[0]
    tiles = dict(tile_n=tn, tile_h=th, tile_w=tw) if algorithm == "implicit_gemm_tma" else {}
    cfg = Config(32, 32, 16, 4, 1, split_k=split_k, **tiles)
    ref = conv2d_ref(x, w, b, stride=stride, padding=pad)
    for _ in range(2):  # the second launch finds its tile counters back at zero
        y = torch.full(ref.shape, float("nan"), dtype=dtype, device=DEVICE).to(memory_format=torch.channels_last)
        algo.run(prob, x, w, b, y, cfg)
        assert_close(y, ref, dtype, f"{algorithm} split_k={split_k}")


def test_split_k_on_a_side_stream_keeps_no_counters(monkeypatch):
    """Where ``may_cache`` says no (a CUDA graph's side stream: the graph's pool must not hold
    tensors a cache keeps), each split-K launch gets zeroed counters of its own (the counter cache
    that split-K and the Gluon kernel's stream-K share, ``ws_replay.counters``)."""
    from convgemm.conv import ws_replay

    monkeypatch.setattr(ws_replay, "may_cache", lambda device: False)
    monkeypatch.setattr(ws_replay, "_counters", {})
    x = torch.randn(2, 96, 4, 5, device=DEVICE).half().to(memory_format=torch.channels_last)
    w = torch.randn(40, 96, 1, 1, device=DEVICE).half().to(memory_format=torch.channels_last)
    prob = _problem(x, w, None)
    y = torch.full((2, 40, 4, 5), float("nan"), dtype=torch.float16, device=DEVICE)
    y = y.to(memory_format=torch.channels_last)
    ALGORITHMS["gemm_1x1"].run(prob, x, w, None, y, Config(32, 32, 16, 4, 1, split_k=3))
    assert_close(y, conv2d_ref(x, w, None), torch.float16, "split-K on a side stream")
    assert ws_replay._counters == {}


@pytest.mark.parametrize("per_sm", [1, 2])
@pytest.mark.parametrize("shape", [(2, 32, 5, 6, 48, 3, 3, 1, 1), (3, 16, 7, 9, 40, 3, 3, 1, 2)])
def test_persistent_matches_reference(shape, per_sm):
    """Persistent configs: a fixed set of programs walks every tile (1 SM without a GPU, so one or
    two programs cover all 2 x 7-16 tiles here); the tuner only offers them on a GPU."""
    n, c, h, w_, k, r, s, stride, pad = shape
    dtype = torch.float16
    x = torch.randn(n, c, h, w_, device=DEVICE).to(dtype).to(memory_format=torch.channels_last)
    w = torch.randn(k, c, r, s, device=DEVICE).to(dtype).to(memory_format=torch.channels_last)
    b = torch.randn(k, device=DEVICE).to(dtype)
    prob = _problem(x, w, b, stride=stride, padding=pad)
    algo = ALGORITHMS["implicit_gemm_tma"]
    assert algo.supports(prob) is None
    _, tn, th, tw = spatial_tiles(prob, 16)[0]
    cfg = Config(32, 16, 16, 4, 2, tile_n=tn, tile_h=th, tile_w=tw, persistent=per_sm)
    ref = conv2d_ref(x, w, b, stride=stride, padding=pad)
    y = torch.full(ref.shape, float("nan"), dtype=dtype, device=DEVICE).to(memory_format=torch.channels_last)
    algo.run(prob, x, w, b, y, cfg)
    assert_close(y, ref, dtype, f"persistent {per_sm}/SM")


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize(
    "shape",
    [(2, 32, 5, 6, 48, 3, 3, 1, 1), (3, 16, 7, 9, 40, 3, 3, 1, 2), (2, 32, 8, 8, 24, 1, 1, 1, 0), (2, 32, 10, 8, 32, 3, 3, 2, 1)],
)  # fmt: skip
def test_parts_match_reference(shape, parts):
    """``parts``: each program's tile is ``parts`` pixel tiles under one block of output channels
    (``matmul.blocks.parts_gemm_kernel``), the last group reaching past the last pixel tile where
    the tile count does not divide (zero-filled loads, clipped stores); with a bias and ReLU."""
    n, c, h, w_, k, r, s, stride, pad = shape
    dtype = torch.float16
    x = torch.randn(n, c, h, w_, device=DEVICE).to(dtype).to(memory_format=torch.channels_last)
    w = torch.randn(k, c, r, s, device=DEVICE).to(dtype).to(memory_format=torch.channels_last)
    b = torch.randn(k, device=DEVICE).to(dtype)
    # the problem as conv2d builds it (the strided case reads the stride-phase view)
    prob = convgemm.explain(x, w, b, stride=stride, padding=pad, algorithm="implicit_gemm_tma")["problem"]
    prob = replace(prob, activation="relu")
    algo = ALGORITHMS["implicit_gemm_tma"]
    assert algo.supports(prob) is None
    _, tn, th, tw = spatial_tiles(prob, 16)[0]
    ref = torch.relu(conv2d_ref(x, w, b, stride=stride, padding=pad))
    for per_sm in (0, 1):
        cfg = Config(16, 16, 16, 4, 2, tile_n=tn, tile_h=th, tile_w=tw, persistent=per_sm, parts=parts)
        y = torch.full(ref.shape, float("nan"), dtype=dtype, device=DEVICE).to(memory_format=torch.channels_last)
        algo.run(prob, x, w, b, y, cfg)
        assert_close(y, ref, dtype, f"parts={parts} persistent={per_sm} {cfg.describe()}")


def test_parts_refused_off_the_tma_loader():
    x = torch.randn(2, 96, 4, 5, device=DEVICE).half().to(memory_format=torch.channels_last)
    w = torch.randn(40, 96, 1, 1, device=DEVICE).half().to(memory_format=torch.channels_last)
    prob = _problem(x, w, None)
    y = torch.empty(2, 40, 4, 5, dtype=torch.float16, device=DEVICE).to(memory_format=torch.channels_last)
    with pytest.raises(ValueError, match="parts"):
        ALGORITHMS["gemm_1x1"].run(prob, x, w, None, y, Config(32, 32, 16, 4, 1, parts=3))


# ResNet-50 layers whose pixel count at batch 64 (12,544 x 1 or 4) fills the H200's 132 SMs with
# 192-pixel tiles (session 30's ncu: cuBLAS's tile), here at batch 4: every part count, 16-bit
# and TF32 (fewer stages: fp32 boxes take twice the shared memory), dense and strided
PARTS_GPU = [
    (4, 1024, 14, 14, 256, 1, 1, 1, 0),
    (4, 512, 28, 28, 256, 1, 1, 1, 0),
    (4, 256, 28, 28, 256, 3, 3, 2, 1),
    (4, 128, 56, 56, 128, 3, 3, 2, 1),
    (4, 256, 14, 14, 256, 3, 3, 1, 1),
]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", PARTS_GPU, ids=lambda v: "C{1}K{4}@{2}-{5}x{6}s{7}".format(*v))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_parts_gpu(shape, dtype):
    n, c, h, w_, k, r, s, stride, pad = shape
    x, w, b = conv_inputs(n, c, h, w_, k, r, s, dtype, DEVICE, True, True)
    prob = convgemm.explain(x, w, b, stride=stride, padding=pad, algorithm="implicit_gemm_tma")["problem"]
    algo = ALGORITHMS["implicit_gemm_tma"]
    ref = conv2d_ref(x, w, b, stride=stride, padding=pad)
    bk = 64 if dtype.itemsize == 2 else 32
    for parts, stages, per_sm in ((3, 4, 1), (3, 3, 2), (2, 4, 1)):
        stages = min(stages, 3) if dtype.itemsize == 4 else stages
        cfg = Config(128, 64, bk, 8, stages, tile_n=16, tile_h=2, tile_w=2, persistent=per_sm, parts=parts)
        y = torch.full(ref.shape, float("nan"), dtype=dtype, device=DEVICE).to(memory_format=torch.channels_last)
        algo.run(prob, x, w, b, y, cfg)
        assert_close(y, ref, dtype, f"parts {cfg.describe()} {shape}")


def test_parts_configs_pick_the_wave_filling_tiles(monkeypatch):
    """``parts_configs`` offers pixel-tile parts where they cut the widest SM's work by 10% or
    more against the 128-channel power-of-two tiles (132 SMs): ResNet-50's 14x14 stage at batch
    64 gets cuBLAS's 192 x 128 tile first; layers that those tiles already balance, grouped
    layers, fp32 and narrow layers get none."""
    from convgemm.conv import fprop

    monkeypatch.setattr(fprop, "sm_count", lambda: 132)
    algo = ALGORITHMS["implicit_gemm_tma"]

    def cfgs(n, c, h, k, r, stride=1, dtype=torch.bfloat16, groups=1):
        prob = ConvProblem(n=n, c=c, h=h, w=h, k=k, r=r, s=r, stride=(stride, stride), pad_h=(r // 2,) * 2,
                           pad_w=(r // 2,) * 2, groups=groups, dtype=dtype)  # fmt: skip
        return algo.parts_configs(replace(prob, tma_ok=True))

    first = cfgs(64, 1024, 14, 256, 1)[0]
    assert (first.block_m, first.block_n, first.parts, first.num_warps) == (128, 64, 3, 8)
    assert first.tile_n * first.tile_h * first.tile_w == 64 and first.persistent == 1
    assert cfgs(64, 256, 28, 256, 3, stride=2)[0].parts == 3  # l3 3x3 (first), 14x14 out
    assert cfgs(64, 512, 28, 256, 1) == []  # 524 tiles of 192 or 392 of 128x128: no better
    assert cfgs(64, 1024, 14, 256, 1, dtype=torch.float32) == []
    assert cfgs(64, 1024, 14, 256, 3, groups=32) == []
    assert cfgs(64, 64, 56, 64, 3) == []
    for cfg in cfgs(1, 512, 96, 512, 3):  # CRAFT's conv4_x: 96- and 160-pixel tiles
        assert cfg.parts * cfg.block_n in (96, 160)
