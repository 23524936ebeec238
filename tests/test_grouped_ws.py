"""``grouped_ws``: narrow groups merged into super-groups on the Gluon kernel (``ws3d`` with
``GROUPED``), output pixels on M and a super-group's channels on N and K.

The kernel is Gluon, so only the GPU tests run it; the CPU tests check which merges and tiles are
offered, what reaches the kernel through the algorithm's own ``run``, and the refusals."""

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from conftest import DEVICE
from reference import assert_close

import convgemm
from convgemm.conv.fprop import ALGORITHMS, COMPILE_ONLY, GroupedWs
from convgemm.conv.grouped_tma import blockdiag_weight
from convgemm.matmul.launch import Launch
from convgemm.problem import ConvProblem

GWS = ALGORITHMS["grouped_ws"]

pytestmark = pytest.mark.usefixtures("no_tf32")


def _prob(n, c, h, w, k, r, s, groups, stride=1, pad=1, dtype=torch.bfloat16):
    x = torch.zeros(n, c, h, w, dtype=dtype).to(memory_format=torch.channels_last)
    wt = torch.zeros(k, c // groups, r, s, dtype=dtype)
    prob = ConvProblem.from_tensors(x, wt, stride=stride, padding=pad, groups=groups)
    return replace(prob, tma_ok=True, input_tma_ok=True, input_tma_rows_ok=True, input_dense=True, input_phases_ok=True)


@pytest.mark.parametrize(
    "dtype,width,want",
    [
        # ResNeXt-50's 3x3 layers: 32 groups of width/32 channels
        (torch.bfloat16, 128, [16, 8, 32]),  # 4 a group: 64 channels (128 bytes), 32, 128
        (torch.bfloat16, 256, [8, 4, 16]),
        (torch.bfloat16, 1024, [2, 1, 4]),  # 32 a group: one group is 64 bytes
        (torch.float32, 128, [8, 4, 16]),  # fp32: 32 channels are one 128-byte box row
        (torch.float32, 512, [2, 1, 4]),
        (torch.float32, 1024, [1, 2]),  # 32 a group: one group is 128 bytes; no 64-byte merge
    ],
)
def test_widths_prefer_one_full_box_row(dtype, width, want):
    """The merges offered: a super-group of 128 input-channel bytes first, then 64, then 256."""
    prob = _prob(2, width, 8, 8, width, 3, 3, 32, dtype=dtype)
    got = GroupedWs.widths(prob)
    assert got == want
    e = dtype.itemsize
    for gt in got:
        assert prob.groups % gt == 0 and gt * prob.kg <= 256 and gt * prob.cg * e in (64, 128, 256)


def test_candidates_keep_tiles_in_one_super_group():
    """Every candidate's channel tile is the super-group's output channels and its K step divides
    the super-group's input channels, so no tile reads another super-group's channels; pixel
    blocks are 16 per warp."""
    for dtype in (torch.bfloat16, torch.float32):
        for width, stride in ((128, 1), (256, 2), (512, 1), (1024, 2)):
            prob = _prob(64, width, 28 * stride, 28 * stride, width, 3, 3, 32, stride=stride, dtype=dtype)
            cands = GWS.candidates(prob)
            assert cands, (dtype, width)
            assert {c.gt for c in cands} == set(GroupedWs.widths(prob)[:2])
            for c in cands:
                gc, ks = c.gt * prob.cg, c.gt * prob.kg
                assert c.block_n == ks and gc % c.block_k == 0 and c.block_k * dtype.itemsize <= 128
                assert c.tile_n * c.tile_h * c.tile_w == c.block_m == 16 * c.num_warps
                assert c.split_k == 1 and not c.stream_k and c.parts <= 1
                assert not c.direct or dtype == torch.float32


def test_a_merge_is_a_power_of_two_channel_block():
    """K/g = 12 (16 groups of 4 -> 12): merges of 8 or 16 groups are 96 and 192 output channels,
    which no tile's channel block (a power of two) covers: none is offered."""
    prob = _prob(2, 64, 8, 8, 192, 3, 3, 16)
    assert GroupedWs.widths(prob) == []
    assert "no power-of-two number" in GWS.supports(prob)


def test_narrow_16_bit_groups_are_not_refused_for_their_width():
    """bf16 with 4 channels a group: a group's 8 bytes are under TMA's 16-byte minimum, which
    sets ``input_tma_ok`` False, but the kernel reads whole super-groups (128 bytes)."""
    prob = replace(_prob(2, 128, 8, 8, 128, 3, 3, 32), input_tma_ok=False)
    dense = GWS.dense(prob)
    assert dense.groups == 1 and dense.input_tma_ok


def test_a_forced_merge_that_does_not_fit_is_refused():
    x = torch.zeros(2, 128, 8, 8, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    wt = torch.zeros(128, 4, 3, 3, dtype=torch.bfloat16)
    prob = _prob(2, 128, 8, 8, 128, 3, 3, 32)
    cfg = GWS.candidates(prob)[0]
    for bad in (replace(cfg, gt=3), replace(cfg, gt=64), replace(cfg, block_n=cfg.block_n * 2)):
        with pytest.raises(ValueError, match="does not fit"):
            GWS.run(prob, x, wt, None, torch.zeros_like(x), bad)


def test_not_a_tuner_candidate_until_timed(monkeypatch):
    """``CANDIDATES`` off: the tuner's ``configs`` is empty (the forced algorithm still runs)."""
    prob = _prob(2, 128, 8, 8, 128, 3, 3, 32)
    monkeypatch.setattr(GroupedWs, "CANDIDATES", False)
    assert GWS.configs(prob) == []


def test_refusals_say_why():
    assert "groups = 1" in GWS.supports(_prob(2, 64, 8, 8, 64, 3, 3, 1))
    assert "depthwise" in GWS.supports(_prob(2, 64, 8, 8, 64, 3, 3, 64))
    reason = GWS.supports(_prob(2, 128, 8, 8, 128, 3, 3, 32))
    # under the interpreter (CI) the Gluon kernel cannot run; on a GPU the layer is supported
    assert reason is None or "grouped_ws" in reason, reason
    # (on the device the tests run on: CPU tensors on a GPU machine are refused before the algorithm)
    x = torch.zeros(1, 96, 8, 8, device=DEVICE).to(memory_format=torch.channels_last)
    with pytest.raises(ValueError, match="grouped_ws"):
        convgemm.conv2d(x, torch.zeros(96, 32, 3, 3, device=DEVICE), padding=1, groups=3, algorithm="grouped_ws")


def test_run_hands_the_kernel_the_super_groups(monkeypatch):
    """Through the algorithm's own ``run`` (compile-only launches caught): ``GROUPED`` = 1, the
    weight packed as [K, R*S*GC] from the block-diagonal expansion, K steps over GC channels, the
    fix-up list in the counters' slot, and the fix-up ids' pixel-block count."""
    from convgemm.conv import fprop, ws3d

    n, c, hw, groups = 2, 128, 8, 32
    x = torch.zeros(n, c, hw, hw, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    wt = torch.randn(c, c // groups, 3, 3).to(torch.bfloat16)
    prob = _prob(n, c, hw, hw, c, 3, 3, groups)
    cfg = GWS.candidates(prob)[0]
    gt = cfg.gt
    gc, ks = gt * prob.cg, gt * prob.kg
    y = torch.zeros(n, c, hw, hw, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    seen, fixups = [], []
    real = ws3d.ws_conv3d

    def spy(*args, **kw):
        launches = real(*args, **{**kw, "compile_only": True})
        seen.append((args, kw, launches[0]))
        return launches if kw.get("compile_only") else None

    monkeypatch.setattr(ws3d, "ws_conv3d", spy)
    monkeypatch.setattr(fprop, "_run_kernel", lambda *a, **k: fixups.append(a))
    token = COMPILE_ONLY.set(False)
    try:
        GWS.run(prob, x, wt, None, y, cfg)
    finally:
        COMPILE_ONLY.reset(token)
    ((args, kw, (_, _, kargs, kconst)),) = seen
    wp = args[1]
    assert wp.shape == (c, 9 * gc)
    want = blockdiag_weight(wt, gt, groups).permute(0, 2, 3, 1).reshape(c, -1)
    assert torch.equal(wp, want)
    assert kw["super_groups"] == (gc, ks)
    assert kconst["GROUPED"] == 1
    fix = kw["fix"]
    assert kargs[5] is fix  # x_desc, w_desc, y_desc, bias, ws, locks
    npix = -(-n // cfg.tile_n) * -(-hw // cfg.tile_h) * -(-hw // cfg.tile_w)
    assert kargs[-3:] == (gc, ks // cfg.block_n, npix)
    assert kargs[20] == gc // cfg.block_k  # c_tiles (after K, units, tiles_n, OD, P, Q, 3 pads, 3 dilations, R, S)
    assert fix.numel() >= (c // cfg.block_n) * npix + 2
    # the fix-up reads the same list and numbering: (super-group channel blocks, pixel blocks)
    ((_, fn, _, fargs, _, _),) = fixups
    assert fn is fprop.grouped_tma_fixup_kernel
    assert fargs[4] is fix and fargs[5:7] == (ks // cfg.block_n, npix)
    assert fargs[-4:] == (cfg.block_n, cfg.tile_n, cfg.tile_h, cfg.tile_w)


def test_ws_conv3d_refuses_a_tile_across_super_groups():
    from convgemm.conv.ws3d import ws_conv3d

    x = torch.zeros(1, 128, 2, 8, 8, dtype=torch.bfloat16).to(memory_format=torch.channels_last_3d)
    y = torch.zeros(1, 128, 2, 8, 8, dtype=torch.bfloat16).to(memory_format=torch.channels_last_3d)
    wp = torch.zeros(128, 9 * 64, dtype=torch.bfloat16)
    fix = torch.zeros(1026, dtype=torch.int32)
    for bad in (dict(block_n=128), dict(block_n=64, split=2), dict(block_n=64, fix=None)):
        kw = dict(block_n=64, fix=fix) | bad
        with pytest.raises(ValueError, match="super-groups"):
            ws_conv3d(x, wp, None, y, (1, 3, 3), (0, 1, 1), (1, 1, 1), (2, 8, 8), kw.pop("block_n"), warps=8,
                      compile_only=True, super_groups=(64, 64), **kw)  # fmt: skip


# N, C, H, W, K, R, S, stride, pad, groups
GPU_CASES = [
    (2, 128, 14, 14, 128, 3, 3, 1, 1, 32),  # 4 channels a group (ResNeXt's first stage)
    (2, 256, 16, 16, 256, 3, 3, 2, 1, 32),  # 8 a group, strided: the stride-phase view
    (3, 512, 7, 9, 512, 3, 3, 1, 1, 32),  # 16 a group, tiles past the image's edge
    (2, 1024, 8, 8, 1024, 3, 3, 2, 1, 32),  # 32 a group
    (2, 64, 10, 10, 64, 1, 1, 1, 0, 8),  # 1x1: the spatial view, never the flat one
]


def _case(case, dtype):
    """(x, w, bias, conv2d keywords, the problem as ``convgemm.conv2d`` prepares it, with the
    fused ReLU): ``functional._prepare`` sets the TMA and layout flags that ``supports`` reads."""
    from convgemm.functional import _prepare

    n, c, h, w, k, r, s, stride, pad, groups = case
    x = torch.randn(n, c, h, w, device=DEVICE).to(dtype).contiguous(memory_format=torch.channels_last)
    wt = (torch.randn(k, c // groups, r, s, device=DEVICE) / (c // groups * r * s) ** 0.5).to(dtype)
    b = torch.randn(k, device=DEVICE).to(dtype)
    kw = dict(stride=stride, padding=pad, groups=groups)
    prob, xn, _ = _prepare(x, wt, b, (stride, stride), (pad, pad), (1, 1), groups)
    assert xn is x
    return x, wt, b, kw, replace(prob, activation="relu")


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=str)
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "tf32"])
def test_every_candidate_matches_reference(case, dtype):
    """Every candidate (both merges, both pixel blocks, direct stores in fp32) with a bias and the
    fused ReLU against float64; three runs into NaN-filled outputs, then three through a call
    plan's Launch (bound on the first, replayed after), each into a fresh output."""
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}[dtype]
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = dtype == "tf32"
    try:
        x, wt, b, kw, prob = _case(case, dt)
        # every case is one the algorithm claims (a skip here would check nothing)
        assert GWS.supports(prob) is None, GWS.supports(prob)
        want = F.conv2d(x.double().cpu(), wt.double().cpu(), b.double().cpu(), **kw).clamp_min(0)
        for cfg in GWS.candidates(prob):
            label = f"grouped_ws [{cfg.describe()}] {dtype} {case}"
            y = torch.empty(want.shape, device=DEVICE, dtype=dt).contiguous(memory_format=torch.channels_last)
            for _ in range(3):
                y.fill_(float("nan"))
                GWS.run(prob, x, wt, b, y, cfg)
                assert_close(y, want, dt, label)
            launch = Launch()
            for _ in range(3):
                y = torch.full_like(y, float("nan"))
                GWS.run(prob, x, wt, b, y, cfg, launch=launch)
                assert_close(y, want, dt, f"{label} replayed")
    finally:
        torch.backends.cudnn.allow_tf32 = old


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize(
    "case", [(2, 128, 12, 12, 128, 3, 3, 1, 1, 32), (2, 256, 12, 16, 256, 3, 3, 2, 1, 32)], ids=str
)
def test_nan_and_inf_stay_in_their_group(dtype, case):
    """A NaN and an Inf input: the block-diagonal product spreads NaN over their super-group's
    other groups, which the fix-up recomputes; the result has NaN and Inf exactly where the
    reference has them, and the other outputs match it."""
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    try:
        x, wt, b, kw, prob = _case(case, dtype)
        prob = replace(prob, activation="")
        x[0, 1, 0, 0] = float("nan")  # the first super-group
        x[1, x.shape[1] - 8, x.shape[2] - 1, x.shape[3] - 1] = float("inf")  # the last one
        ref = F.conv2d(x.double().cpu(), wt.double().cpu(), b.double().cpu(), **kw)
        assert GWS.supports(prob) is None, GWS.supports(prob)
        for cfg in GWS.candidates(prob):
            launch = Launch()
            for i in range(2):  # bound, then replayed: the list must be back at zero after each fix-up
                y = torch.full(ref.shape, 7.0, device=DEVICE, dtype=dtype).contiguous(memory_format=torch.channels_last)
                GWS.run(prob, x, wt, b, y, cfg, launch=launch)
                got = y.double().cpu()
                label = f"[{cfg.describe()}] call {i}"
                assert torch.equal(torch.isnan(got), torch.isnan(ref)), label
                assert torch.equal(torch.isinf(got), torch.isinf(ref)), label
                fin = torch.isfinite(ref)
                assert_close(y.cpu()[fin], ref[fin], dtype, f"finite outputs beside NaN and Inf {label}")
    finally:
        torch.backends.cudnn.allow_tf32 = old


def test_every_algorithm_can_be_tuned():
    """The tuner's candidates come from ``autotune._HEURISTIC_ORDER``: a registered algorithm
    missing there would never be tuned, only forced."""
    from convgemm.tune import autotune

    assert set(ALGORITHMS) == set(autotune._HEURISTIC_ORDER)


def test_candidates_reach_the_tuner_once_switched_on(monkeypatch):
    """With ``CANDIDATES`` on, ``tuning_pairs`` of a ResNeXt layer in fp32 holds grouped_ws's
    candidates beside grouped_tma's (no prune rule drops it); 16-bit layers get them only with
    ``SIXTEEN_BIT`` (off: the tuner picked it on no bf16 layer, session 37)."""
    from convgemm.tune import autotune

    monkeypatch.setattr(GroupedWs, "CANDIDATES", True)
    prob = _prob(64, 256, 28, 28, 256, 3, 3, 32, dtype=torch.float32)
    pairs = autotune.tuning_pairs(prob, [ALGORITHMS["grouped_tma"], GWS])
    assert GWS.candidates(prob) and [c for a, c in pairs if a is GWS] == GWS.candidates(prob)
    half = _prob(64, 256, 28, 28, 256, 3, 3, 32)
    assert GWS.candidates(half) and GWS.configs(half) == [] and not GroupedWs.SIXTEEN_BIT
    monkeypatch.setattr(GroupedWs, "SIXTEEN_BIT", True)
    pairs = autotune.tuning_pairs(half, [ALGORITHMS["grouped_tma"], GWS])
    assert [c for a, c in pairs if a is GWS] == GWS.candidates(half)


# --- wgrad_grouped_ws: grouped weight gradients on the Gluon wgrad ------------------------------


@pytest.mark.parametrize(
    "cg,kg,dtype,want",
    [
        (4, 4, torch.bfloat16, [16, 32]),  # super-groups of 64 and 128 channels
        (8, 8, torch.bfloat16, [8, 16]),
        (32, 32, torch.bfloat16, [2, 4]),
        (8, 16, torch.float16, [4, 8]),  # 64 and 128 output channels, 32 and 64 input channels
        (2, 2, torch.bfloat16, []),  # 16 groups of 2: at most 32 output channels a super-group
    ],
)
def test_wgrad_widths(cg, kg, dtype, want):
    from convgemm.conv import backward as bw

    groups = 16 if cg == 2 else 32
    prob = _prob(2, cg * groups, 8, 8, kg * groups, 3, 3, groups, dtype=dtype)
    assert bw.WgradGroupedWs.widths(prob) == want


def test_wgrad_candidates_and_refusals(monkeypatch):
    """Every candidate's tile lies in one super-group (block_m divides KS, block_n is GC, 16
    pixels a warp); the refusals say why; ``choose_wgrad`` times it only once switched on."""
    from convgemm.conv import backward as bw

    prob = _prob(64, 256, 28, 28, 256, 3, 3, 32)
    for c in bw.WGRAD_GS.candidates(prob, 132):
        gc, ks = c.gt * prob.cg, c.gt * prob.kg
        assert ks % c.block_m == 0 and c.block_n == gc and c.num_warps * 16 == c.block_m
        assert c.tile_n * c.tile_h * c.tile_w == c.block_k and c.gt in bw.WgradGroupedWs.widths(prob)
    x = torch.zeros(2, 64, 8, 8, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    dy = torch.zeros(2, 64, 8, 8, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    assert "groups = 1" in bw.WGRAD_GS.supports(_prob(2, 64, 8, 8, 64, 3, 3, 1), x, dy)
    assert "depthwise" in bw.WGRAD_GS.supports(_prob(2, 64, 8, 8, 64, 3, 3, 64), x, dy)
    assert "no power-of-two number" in bw.WGRAD_GS.supports(_prob(2, 16, 8, 8, 16, 3, 3, 4), x, dy)
    monkeypatch.setattr(bw.WgradGroupedWs, "CANDIDATES", False)
    assert bw.WGRAD_GS.configs(prob) == []  # off: the tuner gets none (a forced config still runs)
    with pytest.raises(ValueError, match="does not fit"):
        cfg = bw.WGRAD_GS.candidates(prob, 132)[0]
        bw.WGRAD_GS.run(prob, x, dy, torch.zeros(256, 8, 3, 3), replace(cfg, gt=3))


def test_choose_wgrad_offers_it_once_switched_on(monkeypatch):
    """With ``CANDIDATES`` on and the kernel supported, the grouped layer's wgrad candidates
    include ``wgrad_grouped_ws`` beside ``wgrad_grouped_tma``."""
    from convgemm.conv import backward as bw

    seen = []
    monkeypatch.setattr(bw.WgradGroupedWs, "CANDIDATES", True)
    monkeypatch.setattr(bw.WgradGroupedWs, "supports", lambda self, p, x, dy: None)  # the interpreter refuses Gluon
    monkeypatch.setattr(bw, "has_tma", lambda t: True)
    monkeypatch.setattr(
        bw, "tuned_wgrad", lambda algos, *a, **k: seen.append([x.name for x in algos]) or (algos[0], None)
    )
    x = torch.zeros(2, 256, 8, 8, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    dy = torch.zeros(2, 256, 8, 8, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    prob = _prob(2, 256, 8, 8, 256, 3, 3, 32)
    bw.choose_wgrad(prob, x, dy, torch.zeros(256, 8, 3, 3, dtype=torch.bfloat16))
    assert seen and "wgrad_grouped_ws" in seen[0], seen


@pytest.mark.parametrize("c,stride", [(128, 1), (256, 2), (512, 1), (1024, 2)])
def test_wgrad_tuning_pairs_beside_grouped_ws(monkeypatch, c, stride):
    """Where wgrad_grouped_ws is a candidate, the tuner times its configs and one
    wgrad_grouped_tma fallback; the depthwise, gather and plain TMA wgrads (3.7-9.6x, 5.9-7.8x and
    1.42-3.2x slower on ResNeXt, session 37) are left out. Without it everything stays."""
    from convgemm.conv import backward as bw
    from convgemm.tune import autotune

    monkeypatch.setattr(bw, "sm_count", lambda *a, **k: 132)
    prob = _prob(64, c, 28, 28, c, 3, 3, 32, stride=stride)
    others = [bw.DWGRAD if bw.DWGRAD.narrow(prob) else bw.WGRAD, bw.WGRAD_TMA]
    algos = [bw._AsForward(a) for a in [*others, bw.WGRAD_GT, bw.WGRAD_GS]]
    names = [a.name for a, _ in autotune.tuning_pairs(prob, algos)]
    assert names.count("wgrad_grouped_tma") == 1 and names.count("wgrad_grouped_ws") == len(bw.WGRAD_GS.configs(prob))
    assert set(names) == {"wgrad_grouped_tma", "wgrad_grouped_ws"}
    names = [a.name for a, _ in autotune.tuning_pairs(prob, algos[:-1])]
    assert set(names) == {others[0].name, "wgrad_tma", "wgrad_grouped_tma"}


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=str)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gpu_wgrad_every_candidate(case, dtype):
    """Every wgrad_grouped_ws candidate (and a K split of the first where the layer has two pixel
    blocks or more) against float64: a plain run, then two through a call plan's Launch (bound,
    then replayed), each call on new x and dy."""
    from torch.nn.grad import conv2d_weight

    from convgemm.conv import backward as bw
    from convgemm.conv.ws_wgrad import wgrad_geometry

    n, c, h, w, k, r, s, stride, pad, groups = case
    wt = torch.zeros(k, c // groups, r, s, device=DEVICE, dtype=dtype)

    def tensors():
        x = torch.randn(n, c, h, w, device=DEVICE).to(dtype).contiguous(memory_format=torch.channels_last)
        prob = ConvProblem.from_tensors(x, wt, None, stride=stride, padding=pad, groups=groups)
        dy = torch.randn(n, k, prob.p, prob.q, device=DEVICE).to(dtype).contiguous(memory_format=torch.channels_last)
        want = conv2d_weight(x.double().cpu(), wt.shape, dy.double().cpu(), stride=stride, padding=pad, groups=groups)
        return x, dy, prob, want

    x, dy, prob, _ = tensors()
    assert bw.WGRAD_GS.supports(prob, x, dy) is None, bw.WGRAD_GS.supports(prob, x, dy)
    cands = bw.WGRAD_GS.candidates(prob, 132)
    first = cands[0]
    p3, x5, dy5 = bw.WGRAD_WS._views(prob, x, dy)
    tile = (first.tile_n, first.tile_h, first.tile_w)
    if wgrad_geometry(x5.shape, dy5.shape, (1, r, s), tile, first.block_m, first.block_n, 1)[3] >= 2:
        cands.append(replace(first, split_k=2))
    for cfg in cands:
        launch = Launch()
        for i in range(3):
            x, dy, prob, want = tensors()
            dw = torch.full(wt.shape, float("nan"), device=DEVICE, dtype=dtype)
            bw.WGRAD_GS.run(prob, x, dy, dw, cfg, launch if i else None)
            assert_close(dw, want, dtype, f"wgrad_grouped_ws [{cfg.describe()}] {case} call {i}")
