"""The Gluon forward kernel's index arithmetic on the CPU, through ``gluon_emu``: the kernel's own
producer code runs on integers and its recorded TMA boxes are multiplied in float64, so every
mode of ``ws3d`` (flat and spatial views, several consumers side by side or stacked, K splits with the finish kernel, the
stride-phase and phase-grid views, grouped super-groups with the fix-up list) is checked against
``torch.nn.functional.conv2d`` / ``conv3d`` here, not only on the GPU. What the emulation cannot
check (the Gluon lowering, synchronisation, layouts) stays with the GPU tests."""

from dataclasses import replace

import gluon_emu
import pytest
import torch
import torch.nn.functional as F
from conftest import INTERPRET

from convgemm.conv import conv3d as k3
from convgemm.conv import ws3d
from convgemm.conv.fprop import ALGORITHMS, COMPILE_ONLY, Config
from convgemm.problem import ConvProblem

WS = ALGORITHMS["implicit_gemm_ws"]
GWS = ALGORITHMS["grouped_ws"]

# the kernels a call also launches (the split-K finish, the fix-up) run under the interpreter on
# the CPU tensors here; on the GPU the Gluon kernel itself runs (test_ws_consumers, test_grouped_ws)
pytestmark = [
    pytest.mark.usefixtures("no_tf32"),
    pytest.mark.skipif(not INTERPRET, reason="emulates the Gluon kernel on the CPU, under Triton's interpreter"),
]


@pytest.fixture
def emulated(monkeypatch):
    """Gluon launches emulated, on three 'SMs' (programs loop over several units); launches made
    for real (not compile-only)."""
    from convgemm.conv import ws_wgrad

    gluon_emu.install(monkeypatch)
    monkeypatch.setattr(ws3d, "sm_count", lambda *a, **k: 3)
    monkeypatch.setattr(ws_wgrad, "sm_count", lambda *a, **k: 3)
    token = COMPILE_ONLY.set(False)
    yield
    COMPILE_ONLY.reset(token)


def _case(n, c, h, w, k, r, s, stride=1, pad=0, groups=1, bias=True):
    g = torch.Generator().manual_seed(n * 1000 + c + h + k)
    x = torch.randn(n, c, h, w, generator=g).contiguous(memory_format=torch.channels_last)
    wt = torch.randn(k, c // groups, r, s, generator=g) / (c // groups * r * s) ** 0.5
    b = torch.randn(k, generator=g) if bias else None
    prob = ConvProblem.from_tensors(x, wt, b, stride=stride, padding=pad, groups=groups)
    prob = replace(prob, tma_ok=True, input_tma_ok=True, input_tma_rows_ok=True, input_dense=True,
                   input_phases_ok=True, activation="relu")  # fmt: skip
    want = F.conv2d(x.double(), wt.double(), None if b is None else b.double(), stride=stride, padding=pad,
                    groups=groups).clamp_min(0)  # fmt: skip
    return x, wt, b, prob, want


def _check(algo, prob, x, wt, b, want, cfg):
    y = torch.full(want.shape, float("nan")).contiguous(memory_format=torch.channels_last)
    algo.run(prob, x, wt, b, y, cfg)
    torch.testing.assert_close(y.double(), want, rtol=1e-5, atol=1e-5, msg=lambda m: f"{cfg.describe()}: {m}")


# N, C, H, W, K, R, S, stride, pad
CASES = [
    (2, 64, 7, 9, 256, 1, 1, 1, 0),  # flat: one row of 126 pixels
    (2, 64, 9, 10, 96, 3, 3, 1, 1),  # K = 96: a partial channel tile; padded taps
    (2, 32, 12, 16, 64, 3, 3, 2, 1),  # strided: the stride-phase view
    (3, 32, 6, 6, 64, 5, 5, 1, 2),  # 5x5, tiles across images
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_every_candidate_matches_conv2d(case, emulated):
    x, wt, b, prob, want = _case(*case)
    cands = WS.configs(prob)
    assert cands
    for cfg in cands:
        _check(WS, prob, x, wt, b, want, cfg)


@pytest.mark.parametrize("case", CASES[1:3], ids=str)
def test_direct_store(case, emulated):
    """Tiles stored from registers (``direct``: ``_epilogue_direct``, y in the workspace slot): a
    partial channel tile, the strided view; dense and, on a grouped layer, through the fix-up."""
    x, wt, b, prob, want = _case(*case)
    cfg = replace(WS.configs(prob)[0], direct=1)
    _check(WS, prob, x, wt, b, want, cfg)
    x, wt, b, prob, want = _case(2, 128, 6, 40, 128, 3, 3, 1, 1, 32)
    x[1, 3, 2, 39] = float("nan")
    want = F.conv2d(x.double(), wt.double(), b.double(), padding=1, groups=32).clamp_min(0)
    y = torch.full(want.shape, 7.0).contiguous(memory_format=torch.channels_last)
    GWS.run(prob, x, wt, b, y, replace(GWS.candidates(prob)[0], direct=1))
    assert torch.equal(torch.isnan(y.double()), torch.isnan(want))
    fin = torch.isfinite(want)
    torch.testing.assert_close(y.double()[fin], want[fin], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("parts", [2, 3])
def test_consumers_side_by_side(parts, emulated):
    """Tiles of 2 or 3 consumer blocks along the columns (the last ones past the image's edge)."""
    x, wt, b, prob, want = _case(2, 64, 9, 30, 128, 3, 3, 1, 1)
    tile = next(t[1:] for t in k3.spatial_tiles3(WS.as_3d(prob), 64))
    cfg = Config(64, 128, 64, 4, 3, tile_n=tile[0], tile_h=tile[1], tile_w=tile[2], persistent=1, parts=parts)
    _check(WS, prob, x, wt, b, want, cfg)


@pytest.mark.parametrize("split,pdl", [(2, False), (3, False), (3, True)])
def test_k_split_and_finish_kernel(split, pdl, emulated, monkeypatch):
    """Partials of each K range in the workspace, summed by ``ws_split_finish_kernel`` (run by
    the interpreter). With PDL, every program's consumer signals the finish kernel once its last
    unit's main loop is done (``gluon_emu`` records the signals and asserts it)."""
    from convgemm.conv import ws3d

    monkeypatch.setattr(ws3d, "pdl_enabled", lambda: pdl)
    x, wt, b, prob, want = _case(2, 64, 8, 8, 64, 3, 3, 1, 1)
    cfg = Config(64, 64, 32, 4, 3, tile_n=1, tile_h=8, tile_w=8, persistent=1, split_k=split)
    _check(WS, prob, x, wt, b, want, cfg)


@pytest.mark.parametrize("split", [1, 2])
def test_taps_carried_across_k_steps(split, emulated):
    """The producer carries each K step's tap and channel block, and the tap's stride-phase rows,
    from step to step (it divides once a tap): a strided, dilated layer of three channel blocks a
    tap (fp32: 32 channels a K step), its K range split in the middle of a tap (27 steps, 14 and
    13), and a strided 3-D layer through the stride-phase view (depth taps, depth 5 not a multiple
    of the stride)."""
    g = torch.Generator().manual_seed(11)
    x = torch.randn(2, 96, 16, 16, generator=g).contiguous(memory_format=torch.channels_last)
    wt = torch.randn(64, 96, 3, 3, generator=g) / (96 * 9) ** 0.5
    b = torch.randn(64, generator=g)
    prob = ConvProblem.from_tensors(x, wt, b, stride=2, padding=2, dilation=2)
    prob = replace(prob, tma_ok=True, input_tma_ok=True, input_tma_rows_ok=True, input_dense=True,
                   input_phases_ok=True)  # fmt: skip
    want = F.conv2d(x.double(), wt.double(), b.double(), stride=2, padding=2, dilation=2)
    cfg = Config(64, 64, 32, 4, 3, tile_n=1, tile_h=8, tile_w=8, persistent=1, split_k=split)
    _check(WS, prob, x, wt, b, want, cfg)

    from convgemm.problem3d import ConvProblem3d

    x = torch.randn(2, 64, 5, 16, 16, generator=g).contiguous(memory_format=torch.channels_last_3d)
    wt = torch.randn(32, 64, 3, 3, 3, generator=g) / (64 * 27) ** 0.5
    want = F.conv3d(x.double(), wt.double(), stride=2, padding=1)
    prob = ConvProblem3d.from_tensors(x, wt, None, stride=(2, 2, 2), padding=(1, 1, 1), dilation=(1, 1, 1))
    prob = replace(prob, tma_input_ok=True, input_phases_ok=True, tma_ok=True)
    assert not k3.phase_grid(prob.stride, (3, 3, 3), prob.pad, prob.d)
    cfg = Config(64, 32, 32, 4, 3, tile_n=1, tile_h=8, tile_w=8, persistent=1, split_k=split)
    y = torch.full(want.shape, float("nan")).contiguous(memory_format=torch.channels_last_3d)
    k3.WS3D.run(prob, x, wt, None, y, cfg)
    torch.testing.assert_close(y.double(), want, rtol=1e-5, atol=1e-5)


def test_phase_grid_view_3d(emulated):
    """A strided 3-D layer whose depth is a multiple of its stride: the phase-grid view, tiles
    several output depths deep (``conv3d_ws``)."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 32, 4, 8, 8, generator=g).contiguous(memory_format=torch.channels_last_3d)
    wt = torch.randn(64, 32, 3, 3, 3, generator=g) / (32 * 27) ** 0.5
    want = F.conv3d(x.double(), wt.double(), stride=2, padding=1)
    from convgemm.problem3d import ConvProblem3d

    prob = ConvProblem3d.from_tensors(x, wt, None, stride=(2, 2, 2), padding=(1, 1, 1), dilation=(1, 1, 1))
    prob = replace(prob, tma_input_ok=True, input_phases_ok=True, tma_ok=True)
    assert k3.phase_grid(prob.stride, (3, 3, 3), prob.pad, prob.d)
    cfg = Config(64, 64, 32, 4, 3, tile_n=4, tile_h=4, tile_w=4, persistent=1)
    y = torch.full(want.shape, float("nan")).contiguous(memory_format=torch.channels_last_3d)
    k3.WS3D.run(prob, x, wt, None, y, cfg)
    torch.testing.assert_close(y.double(), want, rtol=1e-5, atol=1e-5)


# N, C, H, W, K, R, S, stride, pad, groups
GROUPED = [
    (2, 128, 10, 10, 128, 3, 3, 1, 1, 32),  # 4 channels a group
    (4, 256, 12, 16, 256, 3, 3, 2, 1, 32),  # 8 a group, strided
    (3, 64, 7, 9, 64, 3, 3, 1, 1, 4),  # 16 a group, tiles past the edges
    (2, 64, 6, 6, 64, 1, 1, 1, 0, 8),  # 1x1 through the spatial view (the forward's; wgrad's is flat)
]


@pytest.mark.parametrize("case", GROUPED, ids=str)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_grouped_every_candidate(case, dtype, emulated):
    """``grouped_ws``: super-groups' channel offsets and the block-diagonal weight (every
    candidate the merges give in this dtype; the data is fp32 either way)."""
    n, c, h, w, k, r, s, stride, pad, groups = case
    x, wt, b, prob, want = _case(n, c, h, w, k, r, s, stride, pad, groups)
    cands = GWS.candidates(replace(prob, dtype=dtype))
    assert cands
    for cfg in cands:
        _check(GWS, prob, x, wt, b, want, cfg)


def test_grouped_channel_tiles_within_a_super_group(emulated):
    """A tile half a super-group wide (``block_n`` = KS / 2: two channel blocks a super-group,
    ``KB`` = 2): both halves read their super-group's input channels."""
    x, wt, b, prob, want = _case(2, 128, 8, 8, 128, 3, 3, 1, 1, 32)
    cfg = GWS.candidates(prob)[0]
    _check(GWS, prob, x, wt, b, want, replace(cfg, block_n=cfg.block_n // 2))


@pytest.mark.parametrize("parts", [2, 3])
def test_grouped_consumers_side_by_side(parts, emulated, monkeypatch):
    """``grouped_ws`` forced onto tiles of 2-3 consumer blocks (not a candidate yet), with a NaN
    in the last consumer's block: each consumer lists its own pixel block. With PDL forced on
    for the main kernel (its trigger; the interpreted fix-up is an ordinary launch), every
    consumer of every program signals the fix-up."""
    from convgemm.conv import ws3d

    monkeypatch.setattr(ws3d, "pdl_enabled", lambda: True)
    x, wt, b, prob, _ = _case(2, 128, 6, 40, 128, 3, 3, 1, 1, 32)
    prob = replace(prob, activation="")
    x[1, 3, 2, 39] = float("nan")
    ref = F.conv2d(x.double(), wt.double(), b.double(), padding=1, groups=32)
    cfg = GWS.candidates(prob)[1]  # 64 pixels on 4 warps
    td, th, tw = next(t[1:] for t in k3.spatial_tiles3(WS.as_3d(prob, spatial=True), 64) if t[3] * parts < prob.q)
    cfg = replace(cfg, tile_n=td, tile_h=th, tile_w=tw, parts=parts)
    y = torch.full(ref.shape, 7.0).contiguous(memory_format=torch.channels_last)
    GWS.run(prob, x, wt, b, y, cfg)
    assert torch.equal(torch.isnan(y.double()), torch.isnan(ref))
    fin = torch.isfinite(ref)
    torch.testing.assert_close(y.double()[fin], ref[fin], rtol=1e-5, atol=1e-5)


# wide rows, so that a row holds several column blocks and a super-group several channel blocks
NONFINITE = [(2, 128, 3, 40, 128, 3, 3, 1, 1, 32), (1, 256, 4, 72, 256, 3, 3, 2, 1, 32)]


@pytest.mark.parametrize("case", NONFINITE, ids=str)
@pytest.mark.parametrize("half", [False, True], ids=["whole", "half"])
def test_grouped_nan_and_inf(case, half, emulated):
    """A NaN and an Inf input (the Inf in the last column block): the emulated kernel lists the
    pixel blocks whose block-diagonal sums are not finite, the fix-up kernel (interpreter)
    recomputes them, and the result has NaN and Inf exactly where float64 has them; with tiles
    the whole super-group wide and half of it."""
    n, c, h, w, k, r, s, stride, pad, groups = case
    x, wt, b, prob, _ = _case(n, c, h, w, k, r, s, stride, pad, groups)
    prob = replace(prob, activation="")
    x[0, 1, 0, 5] = float("nan")
    x[n - 1, c - 8, h - 1, w - 1] = float("inf")
    ref = F.conv2d(x.double(), wt.double(), b.double(), stride=stride, padding=pad, groups=groups)
    # each merge's first tile (the fix-up kernel, interpreted, recomputes whole tiles slowly)
    firsts = {c.gt: c for c in reversed(GWS.candidates(prob))}
    for cfg in firsts.values():
        # a row of several column blocks (the candidates' own tiles may span the row)
        td, th, tw = next(t[1:] for t in k3.spatial_tiles3(WS.as_3d(prob, spatial=True), cfg.block_m) if t[3] < prob.q)
        cfg = replace(cfg, tile_n=td, tile_h=th, tile_w=tw, block_n=cfg.block_n // 2 if half else cfg.block_n)
        y = torch.full(ref.shape, 7.0).contiguous(memory_format=torch.channels_last)
        GWS.run(prob, x, wt, b, y, cfg)
        got = y.double()
        assert torch.equal(torch.isnan(got), torch.isnan(ref)), cfg.describe()
        assert torch.equal(torch.isinf(got), torch.isinf(ref)), cfg.describe()
        fin = torch.isfinite(ref)
        torch.testing.assert_close(got[fin], ref[fin], rtol=1e-5, atol=1e-5)


# --- the weight gradient (ws_wgrad.ws_wgrad3d_kernel) -------------------------------------------

WGRAD_CASES = [
    (2, 64, 9, 10, 128, 3, 3, 1, 1),  # padded taps, pixel blocks past the edges
    (2, 64, 12, 16, 64, 3, 3, 2, 1),  # strided: the stride-phase view
    (2, 64, 7, 9, 128, 1, 1, 1, 0),  # 1x1: one row of pixels (flat_1x1)
    (2, 320, 6, 6, 64, 3, 3, 1, 1),  # several input-channel blocks, the last one partial
]


def _wgrad_case(n, c, h, w, k, r, s, stride, pad, groups=1, dtype=torch.float32):
    """(x, dy, problem, float64 reference from the rounded x and dy): a 16-bit ``dtype`` gives the
    problem the merges and tiles a 16-bit layer gets on the GPU."""
    g = torch.Generator().manual_seed(n * 1000 + c + h + k + groups)
    x = torch.randn(n, c, h, w, generator=g).to(dtype).contiguous(memory_format=torch.channels_last)
    p = (h + 2 * pad - r) // stride + 1
    q = (w + 2 * pad - s) // stride + 1
    dy = torch.randn(n, k, p, q, generator=g).to(dtype).contiguous(memory_format=torch.channels_last)
    wt = torch.zeros(k, c // groups, r, s, dtype=dtype)
    prob = ConvProblem.from_tensors(x, wt, None, stride=stride, padding=pad, groups=groups)
    want = torch.nn.grad.conv2d_weight(x.double(), wt.shape, dy.double(), stride=stride, padding=pad, groups=groups)
    return x, dy, prob, want


@pytest.mark.parametrize("case", WGRAD_CASES, ids=str)
def test_wgrad_every_candidate(case, emulated):
    from convgemm.conv import backward as bw

    x, dy, prob, want = _wgrad_case(*case)
    cands = bw.WGRAD_WS.configs(prob)
    assert cands
    for cfg in cands:
        dw = torch.full(want.shape, float("nan"))
        bw.WGRAD_WS.run(prob, x, dy, dw, cfg)
        torch.testing.assert_close(dw.double(), want, rtol=1e-5, atol=1e-4, msg=lambda m, c=cfg: f"{c.describe()}: {m}")


@pytest.mark.parametrize("split,pdl", [(2, False), (3, False), (3, True)])
def test_wgrad_split_and_finish_kernel(split, pdl, emulated, monkeypatch):
    """Pixel ranges summed by ``ws_wgrad_finish_kernel`` (interpreter) in split order. With PDL,
    every program's consumer signals the finish kernel once its last unit's main loop is done
    (``gluon_emu`` records the signals and asserts it)."""
    from convgemm.conv import backward as bw
    from convgemm.conv import ws_wgrad

    monkeypatch.setattr(ws_wgrad, "pdl_enabled", lambda: pdl)

    x, dy, prob, want = _wgrad_case(2, 64, 9, 10, 128, 3, 3, 1, 1)
    cfg = replace(bw.WGRAD_WS.configs(prob)[-1], split_k=split)
    dw = torch.full(want.shape, float("nan"))
    bw.WGRAD_WS.run(prob, x, dy, dw, cfg)
    torch.testing.assert_close(dw.double(), want, rtol=1e-5, atol=1e-4)


# N, C, H, W, K, R, S, stride, pad, groups
GROUPED_WGRAD = [
    (2, 128, 10, 10, 128, 3, 3, 1, 1, 32),  # 4 channels a group: 16 groups a super-group
    (4, 256, 12, 16, 256, 3, 3, 2, 1, 32),  # 8 a group, strided
    (3, 256, 7, 9, 256, 3, 3, 1, 1, 16),  # 16 a group, pixel blocks past the edges
    (4, 64, 6, 6, 128, 1, 1, 1, 0, 8),  # 1x1 (one row of pixels), 8 -> 16 channels a group
]


@pytest.mark.parametrize("case", GROUPED_WGRAD, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grouped_wgrad_every_candidate(case, dtype, emulated):
    """``wgrad_grouped_ws``: every candidate (and a K split of the first) stores each output
    channel's own group of the block-diagonal product into dw, against ``conv2d_weight``; bf16
    gives the GPU's merges (super-groups of 32-128 input channels), fp32 narrower ones."""
    from convgemm.conv import backward as bw

    x, dy, prob, want = _wgrad_case(*case, dtype=dtype)
    cands = bw.WGRAD_GS.candidates(prob, 132)
    assert cands
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-2)
    for cfg in [*cands, replace(cands[0], split_k=2)]:
        dw = torch.full(want.shape, float("nan"), dtype=dtype)
        bw.WGRAD_GS.run(prob, x, dy, dw, cfg)
        torch.testing.assert_close(dw.double(), want, **tol, msg=lambda m, c=cfg: f"{c.describe()}: {m}")


def test_grouped_wgrad_nan_stays_in_its_group(emulated):
    """A NaN input reaches only its own group's gradients (every entry is its own dot product;
    the discarded off-diagonal ones may hold it)."""
    from convgemm.conv import backward as bw

    x, dy, prob, _ = _wgrad_case(3, 128, 8, 8, 128, 3, 3, 1, 1, 32)
    x[0, 5, 3, 3] = float("nan")
    want = torch.nn.grad.conv2d_weight(x.double(), (128, 4, 3, 3), dy.double(), padding=1, groups=32)
    for split in (1, 2):
        cfg = replace(bw.WGRAD_GS.candidates(prob, 132)[0], split_k=split)
        dw = torch.zeros(want.shape)
        bw.WGRAD_GS.run(prob, x, dy, dw, cfg)
        assert torch.equal(torch.isnan(dw), torch.isnan(want)) and torch.isnan(want).any()
        fin = torch.isfinite(want)
        torch.testing.assert_close(dw.double()[fin], want[fin], rtol=1e-5, atol=1e-4)


def test_3d_depth_taps_in_the_padding(emulated):
    """A 3-D layer two frames deep under a 3-deep filter (r3d-18's last stage): tiles one frame
    deep skip the depth taps whose boxes are all padding (``_unit`` -> ``depth_k_range``); and a
    strided 3-D layer through the one-depth phase view."""
    from convgemm.problem3d import ConvProblem3d

    g = torch.Generator().manual_seed(11)
    for shape, stride, pad, tile in (((2, 64, 2, 7, 7), 1, 1, (1, 8, 8)), ((2, 32, 3, 8, 8), 2, 1, (1, 4, 16))):
        x = torch.randn(*shape, generator=g).contiguous(memory_format=torch.channels_last_3d)
        wt = torch.randn(64, shape[1], 3, 3, 3, generator=g) / (shape[1] * 27) ** 0.5
        want = F.conv3d(x.double(), wt.double(), stride=stride, padding=pad)
        prob = ConvProblem3d.from_tensors(x, wt, None, stride=(stride,) * 3, padding=(pad,) * 3, dilation=(1, 1, 1))
        prob = replace(prob, tma_input_ok=True, input_phases_ok=True, tma_ok=True)
        cfg = Config(64, 64, 32, 4, 3, tile_n=tile[0], tile_h=tile[1], tile_w=tile[2], persistent=1)
        y = torch.full(want.shape, float("nan")).contiguous(memory_format=torch.channels_last_3d)
        k3.WS3D.run(prob, x, wt, None, y, cfg)
        torch.testing.assert_close(y.double(), want, rtol=1e-5, atol=1e-5, msg=lambda m, s=shape: f"{s}: {m}")


def test_3d_wgrad(emulated):
    """``conv3d_wgrad_ws`` on a 3-D layer, unsplit and split, against ``conv3d_weight``."""
    from convgemm.problem3d import ConvProblem3d

    g = torch.Generator().manual_seed(12)
    x = torch.randn(2, 64, 3, 6, 6, generator=g).contiguous(memory_format=torch.channels_last_3d)
    wt = torch.zeros(64, 64, 3, 3, 3)
    dy = torch.randn(2, 64, 3, 6, 6, generator=g).contiguous(memory_format=torch.channels_last_3d)
    want = torch.nn.grad.conv3d_weight(x.double(), wt.shape, dy.double(), padding=1)
    prob = ConvProblem3d.from_tensors(x, wt, None, stride=(1, 1, 1), padding=(1, 1, 1), dilation=(1, 1, 1))
    base = k3.WGRAD3D_WS.candidates(prob, 132)[0]
    for cfg in (replace(base, split_k=1), replace(base, split_k=2)):
        dw = torch.full(want.shape, float("nan"))
        k3.WGRAD3D_WS.run(prob, x, dy, dw, cfg)
        torch.testing.assert_close(dw.double(), want, rtol=1e-5, atol=1e-4, msg=lambda m, c=cfg: f"{c.describe()}: {m}")


# N, C, H, W, K, R, S, stride, pad; a tile's blocks (images, rows, columns), 64 pixels each
STACKED = [
    ((3, 64, 7, 7, 128, 3, 3, 1, 1), (1, 8, 8)),  # one block an image; the last unit's second past the end
    ((3, 64, 7, 7, 128, 3, 3, 1, 1), (4, 4, 4)),  # blocks across images, partly past the last image
    ((5, 64, 2, 2, 128, 1, 1, 1, 0), (16, 2, 2)),  # blocks of 16 images x 2 x 2; K split over two channel blocks
    ((2, 32, 12, 12, 64, 3, 3, 2, 1), (1, 2, 32)),  # strided: the stride-phase view, rows of 6 pixels
    # strided, blocks across images (ResNet-50's l2 3x3 (first) takes 4x4x4 blocks since STACKED_FILL)
    ((5, 32, 16, 16, 64, 3, 3, 2, 1), (4, 4, 4)),
]


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("case,block", STACKED, ids=str)
def test_consumers_stacked(case, block, parts, emulated):
    """``Config.stack``: a tile's 2 or 3 consumer blocks are consecutive pixel blocks (whatever the
    row length), the last unit's blocks past the end read again and never stored."""
    x, wt, b, prob, want = _case(*case)
    td, th, tw = block
    cfg = Config(64, 64, 32, 4, 3, tile_n=td, tile_h=th, tile_w=tw, persistent=1, parts=parts, stack=1)
    assert cfg.describe().endswith(f"x{parts}st")
    _check(WS, prob, x, wt, b, want, cfg)
    _check(WS, prob, x, wt, b, want, replace(cfg, direct=1))


def test_stacked_refuses_what_it_cannot_stack():
    """Stacked blocks need several consumers, every unit's K steps (one depth tap, no depth
    padding), no groups, no split; a forced config outside that says what to change."""
    x = torch.zeros(1, 64, 4, 8, 8, dtype=torch.bfloat16).to(memory_format=torch.channels_last_3d)
    y = torch.zeros(1, 64, 4, 8, 8, dtype=torch.bfloat16).to(memory_format=torch.channels_last_3d)
    wp = torch.zeros(64, 64 * 3, dtype=torch.bfloat16)
    for kw in (dict(consumers=1), dict(consumers=2, split=2), dict(consumers=2, taps=(3, 1, 1), pad=(1, 0, 0))):
        taps, pad = kw.pop("taps", (1, 1, 1)), kw.pop("pad", (0, 0, 0))
        w = wp if taps[0] == 3 else wp[:, :64]
        with pytest.raises(ValueError, match="stack=0"):
            ws3d.ws_conv3d(x, w, None, y, taps, pad, (1, 1, 1), (1, 8, 8), 64, block_k=64, warps=4, stack=1,
                           compile_only=True, **kw)  # fmt: skip
