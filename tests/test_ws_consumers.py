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


def _relu_case(case, dtype, bm):
    """(x, w, bias, float64 reference with ReLU, the problem with the fused ReLU, a pixel block
    of ``bm`` pixels that the layer's view takes) for a GPU case tuple."""
    n, c, h, w, k, r, s, stride, pad = case
    x = torch.randn(n, c, h, w, device=DEVICE).to(dtype).contiguous(memory_format=torch.channels_last)
    wt = (torch.randn(k, c, r, s, device=DEVICE) / (c * r * s) ** 0.5).to(dtype)
    b = torch.randn(k, device=DEVICE).to(dtype)
    want = F.conv2d(x.double().cpu(), wt.double().cpu(), b.double().cpu(), stride=stride, padding=pad).clamp_min(0)
    prob = ConvProblem.from_tensors(x, wt, b, stride=stride, padding=pad)
    prob = replace(prob, tma_ok=True, input_tma_ok=True, input_dense=True, input_phases_ok=True, activation="relu")
    assert WS.supports(prob) is None, WS.supports(prob)
    tile = next(t[1:] for t in k3.spatial_tiles3(WS.as_3d(prob), bm) if stride == 1 or t[1] == 1)
    return x, wt, b, want, prob, tile


def _runs_and_replays(prob, x, wt, b, want, cfg, label):
    """Three plain runs into a NaN-filled output (persistent state, counters, must be back where
    a launch expects them), then three through a call plan's Launch (the first binds, the next
    ones replay), each into a fresh output: a replay must write where the new tensor is."""
    y = torch.empty(want.shape, device=DEVICE, dtype=x.dtype).contiguous(memory_format=torch.channels_last)
    for _ in range(3):
        y.fill_(float("nan"))
        WS.run(prob, x, wt, b, y, cfg)
        assert_close(y, want, x.dtype, label)
    launch = Launch()
    for _ in range(3):
        y = torch.full_like(y, float("nan"))
        WS.run(prob, x, wt, b, y, cfg, launch=launch)
        assert_close(y, want, x.dtype, f"{label} replayed")
    assert launch.fast_ready


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=str)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("parts", [2, 3])
def test_consumers_match_reference(case, dtype, parts):
    """Tiles of 2 or 3 consumer blocks, with a bias and the fused ReLU, against float64, run and
    replayed (a persistent program reuses its ring and store buffers); and the flat view unsplit
    on one consumer."""
    x, wt, b, want, prob, (td, th, tw) = _relu_case(case, dtype, 64)
    cfgs = [Config(64, 128, 64, 4, 3, tile_n=td, tile_h=th, tile_w=tw, persistent=1, parts=parts)]
    if parts == 3:
        cfgs.append(Config(128, 128, 64, 8, 3, tile_n=1, tile_h=1, tile_w=128, persistent=1) if WS.flat(prob)
                    else cfgs[0])  # fmt: skip
    for cfg in cfgs:
        _runs_and_replays(prob, x, wt, b, want, cfg, f"implicit_gemm_ws [{cfg.describe()}] {case}")


def test_stacked_tiles_go_where_rows_are_short(monkeypatch):
    """``Config.stack`` (consecutive pixel blocks, ws3d's STACK) is offered only with
    ``STACKED_CANDIDATES`` on (the default), and then where the blocks-side-by-side form is not (14x14 outputs:
    rows shorter than 3 x 16 pixels) and the 192-pixel tiles fill the SMs about as well as the
    power-of-two ones (``STACKED_FILL``): ResNet-50's l3 3x3 makes 66 x 2 tiles of 192 x 128 on 132 SMs. The layers
    that had the side-by-side form keep it, and 7x7 outputs (68 tiles) get neither."""
    from convgemm.conv.conv3d import Ws3d

    def offered(prob):
        p3 = WS.as_3d(prob)
        return Ws3d.side_by_side(p3, 132, 64, Ws3d._deep(p3))

    l3 = _prob(64, 256, 14, 14, 256, 3, 3, pad=1)
    l3_first = _prob(64, 256, 28, 28, 256, 3, 3, stride=2, pad=1)
    l4 = _prob(64, 512, 7, 7, 512, 3, 3, pad=1)
    reduce = _prob(64, 1024, 14, 14, 256, 1, 1)
    monkeypatch.setattr(Ws3d, "STACKED_CANDIDATES", False)
    assert offered(l3) == [] and offered(l3_first) == []
    monkeypatch.setattr(Ws3d, "STACKED_CANDIDATES", True)
    for prob in (l3, l3_first):
        (cfg,) = offered(prob)
        assert (cfg.stack, cfg.parts, cfg.block_m, cfg.block_n, cfg.persistent) == (1, 3, 64, 128, 1), cfg
        # 16 images x 2 x 2 covers 14 x 14 exactly: 196 blocks, 66 units of 3 a channel block
        assert (cfg.tile_n, cfg.tile_h, cfg.tile_w) == (16, 2, 2)
    assert offered(l4) == []
    # 28x28 outputs: 262 units of 192 pixels tie 392 of 128 but for the last unit's two blocks
    # past the end (STACKED_FILL); at a fill threshold of 1.0 they are not offered
    l2 = _prob(64, 128, 28, 28, 128, 3, 3, pad=1)
    (cfg,) = offered(l2)
    assert (cfg.stack, cfg.tile_n, cfg.tile_h, cfg.tile_w) == (1, 4, 4, 4), cfg
    monkeypatch.setattr(Ws3d, "STACKED_FILL", 1.0)
    assert offered(l2) == []
    (cfg,) = offered(reduce)  # the flat row: side by side, as before
    assert cfg.stack == 0 and cfg.parts == 3


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("case,block", [((4, 64, 7, 7, 128, 3, 3, 1, 1), (4, 4, 4)),
                                        ((3, 64, 14, 14, 256, 3, 3, 1, 1), (16, 2, 2)),
                                        ((4, 64, 14, 14, 128, 3, 3, 2, 1), (1, 8, 8))], ids=str)  # fmt: skip
def test_stacked_consumers_match_reference(case, block, parts, dtype):
    """Consecutive pixel blocks as a tile's consumer blocks (``stack=1``; the last unit's blocks
    past the end not stored), with a bias and the fused ReLU, staged and direct stores, run and
    replayed, against float64."""
    x, wt, b, want, prob, _ = _relu_case(case, dtype, 64)
    td, th, tw = block
    cfg = Config(64, 128, 64, 4, 3, tile_n=td, tile_h=th, tile_w=tw, persistent=1, parts=parts, stack=1)
    for c in (cfg, replace(cfg, num_stages=4, direct=1)):
        _runs_and_replays(prob, x, wt, b, want, c, f"implicit_gemm_ws [{c.describe()}] {case}")


@pytest.mark.gpu
@pytest.mark.parametrize("parts", [1, 3, "direct"])
def test_stores_into_a_stride_phase(parts):
    """Strided dgrad writes each phase's forward into ``dx[:, :, a::2, b::2]``: the kernel stores
    into that view in place (TMA over its strides; ``direct``: stores from registers through y's
    own strides) and leaves the other phases alone."""
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
    if parts == "direct":
        cfg = replace(cfg, num_stages=4, direct=1)
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


# ---------------------------------------------------------------- stream-K (Config.stream_k)
def _dp_units(tiles, k_steps, programs, stream):
    """A mirror of ``ws3d._dp_units``: the tiles run whole before K is split (``stream`` = 2)."""
    if stream != 2:
        return 0
    dp = tiles // programs * programs
    rest = tiles - dp
    return dp - programs if rest > 0 and rest * k_steps < programs else dp


def _stream_pairs(tiles, k_steps, programs, stream=1):
    """A mirror of ws3d's stream-K arithmetic (``_dp_units``, ``_share``, ``_segment``,
    ``stream_k_reduce``'s slots): per program its segments (tile, k0, k1, slot written or None),
    tiles of the split part counted from the first one after the whole waves (``dp``)."""
    dp = _dp_units(tiles, k_steps, programs, stream)
    total = (tiles - dp) * k_steps
    out = []
    for p in range(programs):
        first, end = p * total // programs, (p + 1) * total // programs
        segs = [(u - dp, 0, k_steps, None) for u in range(p, dp, programs)]
        pos = first
        while pos < end:
            tile = pos // k_steps
            k0 = pos - tile * k_steps
            k1 = min(k_steps, k0 + (end - pos))
            slot = None if k1 - k0 == k_steps else 2 * p + (0 if pos == first else 1)
            segs.append((tile, k0, k1, slot))
            pos += k1 - k0
        out.append(segs)
    return out


@pytest.mark.parametrize("stream", [1, 2])
@pytest.mark.parametrize("tiles, k_steps, programs", [(98, 72, 132), (98, 32, 132), (49, 36, 132), (7, 9, 60),
                                                      (300, 8, 132), (1, 40, 40), (196, 32, 132), (392, 8, 132),
                                                      (133, 72, 132), (264, 9, 132), (265, 200, 132)])  # fmt: skip
def test_stream_k_split_covers_each_pair_once(tiles, k_steps, programs, stream):
    """Every (tile, K step) pair is run by exactly one program; a program writes at most two
    partials, to its own two slots; the slots the last ticket holder reads for a shared tile
    (``stream_k_reduce``'s program-order sum over owners q0..q1) are exactly the ones written for
    that tile, and their number is the ticket count that makes the last one (q1 - q0 + 1). The
    hybrid (``stream`` = 2) runs the whole waves' tiles unsplit, one per program and wave, and
    gives every program a pair of the split part (a remainder of fewer pairs than programs takes
    the last whole wave with it: 133 tiles of 72 K steps)."""
    dp = _dp_units(tiles, k_steps, programs, stream)
    assert dp % programs == 0 and 0 <= dp <= tiles
    if stream == 2:
        assert dp == {(196, 32): 132, (392, 8): 264, (133, 72): 0, (264, 9): 264, (265, 200): 264}.get(
            (tiles, k_steps), tiles // programs * programs
        )
    total = (tiles - dp) * k_steps
    seen = {}
    written = {}
    for p, segs in enumerate(_stream_pairs(tiles, k_steps, programs, stream)):
        assert segs, "every program has work"
        assert sum(s is not None for *_, s in segs) <= 2
        whole = [t for t, k0, k1, _ in segs if t < 0]
        assert whole == [u - dp for u in range(p, dp, programs)]
        # stream_k_reduce counts a ticket from every owner of a split tile's pairs
        assert not total or any(t >= 0 for t, *_ in segs), "a program without a pair of the split part"
        for tile, k0, k1, slot in segs:
            for k in range(k0, k1):
                assert (tile, k) not in seen
                seen[tile, k] = p
            if slot is not None:
                assert slot in (2 * p, 2 * p + 1)
                written.setdefault(tile, []).append(slot)
    assert len(seen) == tiles * k_steps
    owner = lambda it: ((it + 1) * programs - 1) // total  # noqa: E731
    for tile, slots in written.items():
        start = tile * k_steps
        q0, q1 = owner(start), owner(start + k_steps - 1)
        read = [2 * q + (0 if q * total // programs >= start else 1) for q in range(q0, q1 + 1)]
        assert sorted(read) == sorted(slots) and len(read) == q1 - q0 + 1
        assert [seen[tile, k] for k in range(k_steps)] == sorted(seen[tile, k] for k in range(k_steps))


def test_stream_configs_go_where_tiles_leave_sms_idle(monkeypatch):
    """Stream-K forms are offered (when the switch is on) for tiles that fill the last wave under
    90%, on layers whose every tile runs all its K steps; never with depth taps or padding."""
    monkeypatch.setattr(k3.Ws3d, "STREAM_CANDIDATES", True)
    l4 = WS.as_3d(_prob(64, 512, 14, 14, 512, 3, 3, stride=2, pad=1))  # 98 tiles of 64 x 256
    cands = k3.WS3D.candidates(l4, 132)
    streams = [c for c in cands if c.stream_k]
    assert streams and all(c.persistent == 1 and c.split_k == 1 and c.parts <= 1 for c in streams)
    assert any((c.block_m, c.block_n) == (64, 256) for c in streams)
    full = WS.as_3d(_prob(64, 256, 56, 56, 256, 3, 3, pad=1))  # 1568 tiles of 128 x 256: 11.9 waves
    assert not any(c.stream_k for c in k3.WS3D.candidates(full, 132))
    deep = replace(l4, t=3, pad=(1, 1, 1), pad_end=(1, 1, 1))
    assert not k3.Ws3d.stream_ok(deep)
    monkeypatch.setattr(k3.Ws3d, "STREAM_CANDIDATES", False)
    assert not any(c.stream_k for c in k3.WS3D.candidates(l4, 132))


def test_stream_k_refuses_what_it_cannot_split():
    """``ws_conv3d(stream=1)`` with several consumers, a K split or depth taps says why before
    compiling."""
    from convgemm.conv.ws3d import ws_conv3d

    x = torch.zeros(1, 64, 4, 8, 16, dtype=torch.bfloat16).to(memory_format=torch.channels_last_3d)
    wp = torch.zeros(128, 3 * 64, dtype=torch.bfloat16)
    y = torch.zeros(1, 128, 4, 8, 16, dtype=torch.bfloat16).to(memory_format=torch.channels_last_3d)
    with pytest.raises(ValueError, match="stream-K takes one consumer"):
        ws_conv3d(x, wp, None, y, (3, 1, 1), (1, 0, 0), (1, 1, 1), (1, 4, 16), 128, warps=4, stream=1,
                  compile_only=True)  # fmt: skip
    with pytest.raises(ValueError, match="stream=3; it is 0"):
        ws_conv3d(x, wp, None, y, (3, 1, 1), (1, 0, 0), (1, 1, 1), (1, 4, 16), 128, warps=4, stream=3,
                  compile_only=True)  # fmt: skip


@pytest.mark.gpu
@pytest.mark.parametrize(
    "case",
    [
        (4, 512, 14, 14, 256, 3, 3, 2, 1),  # strided: the phase view, 7x7 outputs
        (8, 256, 7, 7, 256, 3, 3, 1, 1),  # tiles shared by two or three programs
        (4, 128, 9, 11, 96, 1, 1, 1, 0),  # flat view, a partial channel tile
        # more tiles than SMs (the hybrid's whole waves on 132 SMs): 256 tiles of 8 x 8 pixels
        # x 128 channels or 8 x 16 x 128; the flat view's 196 of 64 x 128 (98 of 128 x 128)
        (64, 128, 14, 14, 512, 3, 3, 2, 1),
        (32, 256, 14, 14, 256, 1, 1, 1, 0),
    ],
    ids=str,
)
@pytest.mark.parametrize("block", [(64, 128, 4), (128, 128, 8)], ids=str)
@pytest.mark.parametrize("stream", [1, 2])
def test_stream_k_matches_reference(case, block, stream):
    """Stream-K (forced: not a tuner candidate yet), every tile split (1) or the hybrid (2),
    with a bias and the fused ReLU against float64, three times in a row (the ticket counters
    must be back at zero after each launch), then replayed through a call plan's Launch."""
    bm, bn, warps = block
    dtype = torch.bfloat16
    x, wt, b, want, prob, (td, th, tw) = _relu_case(case, dtype, bm)
    cfg = Config(bm, bn, 64, warps, 3, tile_n=td, tile_h=th, tile_w=tw, persistent=1, stream_k=stream)
    _runs_and_replays(prob, x, wt, b, want, cfg, f"implicit_gemm_ws stream-K [{cfg.describe()}] {case}")


# ---------------------------------------------------------------- direct stores (Config.direct)
def test_direct_form_takes_the_staging_tiles_room():
    """The direct-store form replaces the staged one where dropping the staging tile makes room
    for more ring stages, in fp32 (TF32) with 9 or more K steps: 128 x 256 from 2 stages to 4,
    the three-consumer tile from 3 to 4; never 16-bit, a tile that already has 4, short K loops
    or with the switch off."""
    tf32 = Config(128, 256, 32, 8, 2, tile_n=1, tile_h=16, tile_w=8, persistent=1)
    assert k3.Ws3d.direct_form(tf32, 4, 72) == replace(tf32, direct=1, num_stages=4)
    assert replace(tf32, direct=1).describe().endswith(" ds")
    assert k3.Ws3d.direct_form(tf32, 4, 8) == tf32  # a 1x1 layer of 256 channels
    bf16 = replace(tf32, block_k=64, num_stages=3)
    assert k3.Ws3d.direct_form(bf16, 2, 72) == bf16  # 16-bit: slower on the H200 (session 35)
    small = replace(tf32, block_m=64, block_n=128, num_stages=4)
    assert k3.Ws3d.direct_form(small, 4, 72) == small
    three = Config(64, 128, 32, 4, 3, tile_n=1, tile_h=1, tile_w=64, persistent=1, parts=3)  # 40 KB a slot
    assert k3.Ws3d.direct_form(three, 4, 72) == replace(three, direct=1, num_stages=4)
    # deeper where session 61 timed it: 64 x 256 (40 KB a slot) to 5, 128 x 128 (32 KB) to 6
    wide = replace(tf32, block_m=64, num_warps=4, num_stages=3)
    assert k3.Ws3d.direct_form(wide, 4, 72) == replace(wide, direct=1, num_stages=5)
    square = replace(tf32, block_n=128, num_stages=4)
    assert k3.Ws3d.direct_form(square, 4, 72) == replace(square, direct=1, num_stages=6)
    assert k3.Ws3d.direct_form(square, 4, 8) == square
    l3 = replace(WS.as_3d(_prob(64, 256, 28, 28, 256, 3, 3, pad=1)), dtype=torch.float32)
    cands = k3.WS3D.candidates(l3, 132)
    direct = [c for c in cands if c.direct]
    assert direct and all(c.split_k == 1 and not c.stream_k and c.num_stages >= 4 for c in direct)
    assert {(c.block_m, c.block_n, c.num_stages) for c in direct if c.parts <= 1} >= {(64, 256, 5), (128, 128, 6)}
    # in place of the staged forms: no tile is offered both ways
    shapes = [(c.block_m, c.block_n, c.parts, c.persistent, c.split_k) for c in cands]
    assert len(shapes) == len(set(shapes))
    assert not any(c.direct for c in k3.WS3D.candidates(replace(l3, dtype=torch.bfloat16), 132))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(k3.Ws3d, "DIRECT_CANDIDATES", False)
        assert not any(c.direct for c in k3.WS3D.candidates(l3, 132))


def test_direct_store_refuses_split_and_stream():
    """``ws_conv3d(direct=1)`` with a K split (whose partials a second kernel stores) says why."""
    from convgemm.conv.ws3d import ws_conv3d

    x = torch.zeros(1, 64, 1, 8, 16, dtype=torch.bfloat16).to(memory_format=torch.channels_last_3d)
    wp = torch.zeros(128, 9 * 64, dtype=torch.bfloat16)
    y = torch.zeros(1, 128, 1, 8, 16, dtype=torch.bfloat16).to(memory_format=torch.channels_last_3d)
    for bad in (dict(split=2), dict(stream=1)):
        with pytest.raises(ValueError, match="direct epilogue"):
            ws_conv3d(x, wp, None, y, (1, 3, 3), (0, 1, 1), (1, 1, 1), (1, 4, 16), 128, warps=4, direct=1,
                      compile_only=True, **bad)  # fmt: skip


def test_direct_config_reaches_the_kernel():
    """``Config.direct`` becomes the kernel's ``EPI`` = 1 with y itself in the workspace slot
    (what the warm-call replay passes), through the algorithm's own ``run``; 0 otherwise."""
    from convgemm.conv import ws3d
    from convgemm.conv.fprop import COMPILE_ONLY

    x = torch.zeros(2, 64, 8, 32, dtype=torch.float32).to(memory_format=torch.channels_last)
    wt = torch.zeros(128, 64, 3, 3, dtype=torch.float32)
    prob = replace(ConvProblem.from_tensors(x, wt, padding=1), tma_ok=True, input_tma_ok=True, input_dense=True)
    y = torch.zeros(2, 128, 8, 32).to(memory_format=torch.channels_last)
    seen = []
    real = ws3d.ws_conv3d

    def spy(*args, **kw):
        launches = real(*args, **{**kw, "compile_only": True})
        seen.append(launches[0])
        return launches if kw.get("compile_only") else None

    cfg = Config(128, 128, 32, 8, 4, tile_n=1, tile_h=4, tile_w=32, persistent=1, direct=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ws3d, "ws_conv3d", spy)
        token = COMPILE_ONLY.set(False)
        try:
            for c in (cfg, replace(cfg, direct=0, num_stages=2)):
                WS.run(prob, x, wt, None, y, c)
        finally:
            COMPILE_ONLY.reset(token)
    (_, _, args_d, kw_d), (_, _, args_s, kw_s) = seen
    assert kw_d["EPI"] == 1 and kw_s["EPI"] == 0
    ws_slot = 4  # x_desc, w_desc, y_desc, bias, ws, ...
    assert args_d[ws_slot].data_ptr() == y.data_ptr() and args_d[ws_slot].dtype == y.dtype
    assert args_s[ws_slot].data_ptr() != y.data_ptr()


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=str)
@pytest.mark.parametrize("dtype", ["bf16", "tf32"])
@pytest.mark.parametrize("block", [(64, 128, 4), (128, 256, 8)], ids=str)
def test_direct_store_matches_reference(case, dtype, block):
    """Stores from registers (``direct``), with a bias and the fused ReLU, against float64: tiles
    past the image's edge, a partial channel tile (K = 96), the strided phase view; three times,
    then
    replayed through a call plan's Launch (whose warm calls pass y as the workspace pointer)."""
    bm, bn, warps = block
    dt = torch.bfloat16 if dtype == "bf16" else torch.float32
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = dtype == "tf32"
    try:
        x, wt, b, want, prob, (td, th, tw) = _relu_case(case, dt, bm)
        cfg = Config(bm, bn, 64 if dtype == "bf16" else 32, warps, 4, tile_n=td, tile_h=th, tile_w=tw, persistent=1,
                     direct=1)  # fmt: skip
        _runs_and_replays(prob, x, wt, b, want, cfg, f"implicit_gemm_ws direct [{cfg.describe()}] {dtype} {case}")
    finally:
        torch.backends.cudnn.allow_tf32 = old
