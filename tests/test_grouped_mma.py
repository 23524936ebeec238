"""``grouped_mma`` (``conv/grouped_mma.py``): grouped convolutions of 2-64 channels a group as one
batched matrix product, forced on every shape kind it claims, against the float64 reference."""

import itertools
from dataclasses import replace

import pytest
import torch
from conftest import DEVICE
from reference import assert_close, conv2d_ref

import convgemm
from convgemm.conv import grouped_mma as gm
from convgemm.conv.fprop import ALGORITHMS, Config
from convgemm.problem import ConvProblem

pytestmark = pytest.mark.usefixtures("no_tf32")

ALGO = ALGORITHMS["grouped_mma"]

# N, C, H, W, K, R, S, groups, stride, padding, dilation
CASES = [
    (2, 64, 7, 6, 64, 3, 3, 4, 1, 1, 1),  # 16 channels a group: one tap a reduction chunk
    (1, 32, 9, 7, 32, 3, 3, 8, 2, 1, 1),  # ResNeXt's 4 channels a group at stride 2: 4 taps a chunk
    (2, 24, 6, 6, 48, 3, 3, 3, 1, 2, 2),  # 8 -> 16 channels a group, 3 groups, dilation 2
    (1, 20, 5, 6, 10, 3, 3, 2, 1, 1, 1),  # 10 -> 5: padded channels and output columns
    (1, 64, 5, 5, 64, 1, 1, 2, 1, 0, 1),  # 32 channels a group, 1x1
    (1, 12, 6, 7, 12, 5, 3, 6, 1, 1, 1),  # 2 channels a group, a 5x3 filter (8 taps a chunk)
    (2, 128, 4, 4, 128, 3, 3, 2, 2, 1, 1),  # 64 channels a group (the widest) at stride 2
]


def _tensors(case, dtype, seed=0):
    n, c, h, w, k, r, s, g, st, pad, dil = case
    torch.manual_seed(seed)
    x = torch.randn(n, c, h, w).to(dtype).to(DEVICE).contiguous(memory_format=torch.channels_last)
    wt = (torch.randn(k, c // g, r, s) / (c // g * r * s) ** 0.5).to(dtype).to(DEVICE)
    b = torch.randn(k).to(dtype).to(DEVICE)
    return x, wt, b, dict(stride=st, padding=pad, dilation=dil, groups=g)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_forced_matches_float64(case, dtype):
    """Every config ``configs`` offers, with a bias, and through ``conv2d``; bf16 runs under the
    interpreter too (its dot is computed in fp32 there, ``UPCAST``)."""
    x, wt, b, kw = _tensors(case, dtype)
    prob = ConvProblem.from_tensors(x, wt, b, **kw)
    assert ALGO.supports(prob) is None
    ref = conv2d_ref(x, wt, b, kw["stride"], kw["padding"], kw["dilation"], kw["groups"])
    for cfg in ALGO.configs(prob):
        y = torch.full((x.shape[0], wt.shape[0], prob.p, prob.q), float("nan"), dtype=dtype, device=DEVICE)
        y = y.contiguous(memory_format=torch.channels_last)
        ALGO.run(prob, x, wt, b, y, cfg)
        assert_close(y, ref, dtype, f"{case} {cfg.describe()}")
    y = convgemm.conv2d(x, wt, b, **kw, algorithm="grouped_mma")
    assert_close(y, ref, dtype, f"{case} conv2d")


def test_several_programs_each_way():
    """Pixel tiles and group blocks that do not divide the problem (a ragged last tile each way)."""
    x, wt, b, kw = _tensors((1, 48, 5, 7, 48, 3, 3, 3, 1, 1, 1), torch.float32, seed=4)
    prob = ConvProblem.from_tensors(x, wt, b, **kw)
    ref = conv2d_ref(x, wt, b, 1, 1, 1, 3)
    y = torch.full((1, 48, 5, 7), float("nan"), device=DEVICE).contiguous(memory_format=torch.channels_last)
    ALGO.run(prob, x, wt, b, y, Config(16, 2, 16, 1, 1))  # 35 pixels over 3 tiles, 3 groups over 2 blocks
    assert_close(y, ref, torch.float32, "ragged")


@pytest.mark.parametrize("layout", ["nchw", "sliced_out"])
def test_any_strides_and_relu(layout):
    """An NCHW input and output, and an output that is a channel slice of a wider tensor, with
    the fused ReLU."""
    n, c, h, w, k, g = 2, 32, 7, 8, 32, 2
    torch.manual_seed(1)
    x = torch.randn(n, c, h, w, device=DEVICE)
    if layout != "nchw":
        x = x.contiguous(memory_format=torch.channels_last)
    wt = torch.randn(k, c // g, 3, 3, device=DEVICE)
    ref = torch.relu(conv2d_ref(x, wt, None, 1, 1, 1, g))
    if layout == "nchw":
        y = convgemm.conv2d(x, wt, None, padding=1, groups=g, algorithm="grouped_mma", activation="relu")
        assert_close(y, ref, torch.float32, layout)
        return
    prob = replace(ConvProblem.from_tensors(x, wt, None, padding=1, groups=g), activation="relu")
    big = torch.full((n, k + 5, h, w), float("nan"), device=DEVICE).contiguous(memory_format=torch.channels_last)
    y = big[:, 3 : 3 + k]
    ALGO.run(prob, x, wt, None, y, ALGO.default_config(prob))
    assert_close(y, ref, torch.float32, layout)
    assert torch.isnan(big[:, :3]).all() and torch.isnan(big[:, 3 + k :]).all()


@pytest.mark.parametrize("cg", [4, 16])
def test_nonfinite_stays_in_its_group(cg):
    """A NaN in one group's input reaches that group's outputs only: the reduction never runs over
    another group's channels (``grouped_tma``'s block-diagonal tiles need a fix-up pass for this)."""
    g = 4
    x = torch.randn(1, g * cg, 6, 6, device=DEVICE).contiguous(memory_format=torch.channels_last)
    x[0, cg + 1, 2, 2] = float("nan")  # group 1
    wt = torch.randn(g * 16, cg, 3, 3, device=DEVICE)
    y = convgemm.conv2d(x, wt, padding=1, groups=g, algorithm="grouped_mma")
    assert torch.isnan(y[0, 16:32]).any()
    assert torch.isfinite(y[0, :16]).all() and torch.isfinite(y[0, 32:]).all()


def test_packed_weight_layout():
    """``[chunks, groups, KC, KGP]``: ``[ch, g, t * CGP + c, k]`` is tap ``ch * KC // CGP + t``'s
    weight of the group's channel c for its output k; zeros in every padded place."""
    w = torch.randn(2 * 5, 3, 3, 3)  # 2 groups, 3 -> 5 channels: CGP 4, KGP 16, KC 16 (4 taps a chunk)
    cgp, kgp, kc, chunks = gm.geometry(3, 5, 9)
    assert (cgp, kgp, kc, chunks) == (4, 16, 16, 3)
    p = gm.packed_weight(w, 2)
    assert p.shape == (3, 2, 16, 16) and p.is_contiguous()
    for tap in range(9):
        ch, t = divmod(tap, kc // cgp)
        r, s = divmod(tap, 3)
        for g in range(2):
            assert torch.equal(p[ch, g, t * cgp : t * cgp + 3, :5], w[g * 5 : g * 5 + 5, :, r, s].T)
    mask = torch.zeros_like(p, dtype=torch.bool)
    for tap in range(9):
        ch, t = divmod(tap, kc // cgp)
        mask[ch, :, t * cgp : t * cgp + 3, :5] = True
    assert (p[~mask] == 0).all()
    assert gm.geometry(16, 16, 9) == (16, 16, 16, 9) and gm.geometry(64, 64, 9) == (64, 64, 64, 9)
    # tap_minor (the TMA form): row c * TPC + t of the chunk
    tpc = kc // cgp
    q = gm.packed_weight(w, 2, tap_minor=True)
    assert q.shape == p.shape and q.is_contiguous()
    for ch, g, t, c in itertools.product(range(chunks), range(2), range(tpc), range(cgp)):
        assert torch.equal(q[ch, g, c * tpc + t], p[ch, g, t * cgp + c])


@pytest.mark.parametrize(
    "wshape,groups,dtype,why",
    [
        ((16, 16, 3, 3), 1, torch.float32, "groups = 1"),
        ((16, 1, 3, 3), 16, torch.float32, "depthwise"),
        ((256, 128, 3, 3), 2, torch.float32, "at most 64"),
        ((256, 16, 3, 3), 2, torch.float32, "at most 64"),  # 128 output channels a group
        ((16, 4, 3, 3), 4, torch.float64, "tensor cores"),
    ],
    ids=str,
)
def test_supports_gives_a_reason(wshape, groups, dtype, why):
    x = torch.randn(1, wshape[1] * groups, 6, 6, device=DEVICE, dtype=dtype)
    w = torch.randn(wshape, device=DEVICE, dtype=dtype)
    prob = ConvProblem.from_tensors(x, w, None, groups=groups)
    reason = ALGO.supports(prob)
    assert reason is not None and why in reason, reason
    with pytest.raises(ValueError, match=why.split()[0]):
        convgemm.conv2d(x, w, groups=groups, algorithm="grouped_mma")


def test_bad_tile_is_refused():
    x, wt, b, kw = _tensors(CASES[0], torch.float32)
    prob = ConvProblem.from_tensors(x, wt, b, **kw)
    y = torch.empty(2, 64, 7, 6, device=DEVICE).contiguous(memory_format=torch.channels_last)
    for cfg in (Config(24, 2, 16, 1, 1), Config(16, 3, 16, 1, 1), Config(8, 2, 16, 1, 1)):
        with pytest.raises(ValueError, match="power"):
            ALGO.run(prob, x, wt, b, y, cfg)


def test_gpu_candidates_fit_the_register_budget(monkeypatch):
    """The GPU candidates (pretending not to interpret): the most groups a program whose
    accumulators and reduction values stay within ``ACC_PER_THREAD`` a thread."""
    from convgemm.conv import fprop

    monkeypatch.setattr(fprop, "interpreting", lambda: False)
    x = torch.empty(64, 512, 14, 14)
    prob = ConvProblem.from_tensors(x, torch.empty(512, 16, 3, 3), None, padding=1, groups=32)
    assert ALGO.configs(prob) == []  # offered from 32 channels a group on only (MIN_TUNED_CG)
    x32g = torch.empty(64, 1024, 7, 7)
    cfgs = ALGO.configs(ConvProblem.from_tensors(x32g, torch.empty(1024, 32, 3, 3), None, padding=1, groups=32))
    assert cfgs and all(c.num_stages == 3 for c in cfgs)
    monkeypatch.setattr(type(ALGO), "MIN_TUNED_CG", 1)
    for (c, cg, kg), dtype, prec in itertools.product(
        ((512, 16, 16), (128, 4, 4), (256, 8, 8), (1024, 32, 32), (128, 64, 64)),
        (torch.bfloat16, torch.float32),
        ("tf32", "tf32x3"),
    ):
        x = torch.empty(64, c, 14, 14, dtype=dtype)
        w = torch.empty(c // cg * kg, cg, 3, 3, dtype=dtype)
        prob = replace(ConvProblem.from_tensors(x, w, None, padding=1, groups=c // cg), precision=prec)
        cfgs = ALGO.configs(prob)
        assert cfgs and len(set(cfgs)) == len(cfgs)
        _, kgp, kc, _ = gm.geometry(cg, kg, 9)
        # 32-bit registers a reduction value: half for 16-bit types, two for strict fp32's split
        per = dtype.itemsize / 4 * (2 if dtype == torch.float32 and prec == "tf32x3" else 1)
        for cfg in cfgs:
            threads = 32 * cfg.num_warps
            assert cfg.block_n * cfg.block_m * kgp <= ALGO.ACC_PER_THREAD * threads, cfg
            assert cfg.block_n * cfg.block_m * kc * per <= ALGO.A_REGS_PER_THREAD * threads, cfg
            assert cfg.block_n <= prob.groups and cfg.block_k == kc
        assert ALGO.default_config(prob) in cfgs
    # ResNeXt's 16-channel groups: four groups of 128 pixels on four warps
    x = torch.empty(64, 512, 14, 14, dtype=torch.bfloat16)
    prob = ConvProblem.from_tensors(x, torch.empty(512, 16, 3, 3, dtype=torch.bfloat16), None, padding=1, groups=32)
    assert ALGO.default_config(prob) == Config(128, 4, 16, 4, 3)
    # one 64-channel group in strict fp32 fits no 64- or 128-pixel tile: 32 pixels
    x = torch.empty(2, 128, 6, 6)
    prob = replace(
        ConvProblem.from_tensors(x, torch.empty(128, 64, 3, 3), None, padding=1, groups=2), precision="tf32x3"
    )
    assert ALGO.default_config(prob) == Config(32, 1, 64, 4, 3)
    # fp32 values take a register each (half the groups), 3xTF32's two (a quarter)
    x32 = torch.empty(64, 512, 14, 14, dtype=torch.float32)
    w32 = torch.empty(512, 16, 3, 3, dtype=torch.float32)
    tf32 = replace(ConvProblem.from_tensors(x32, w32, None, padding=1, groups=32), precision="tf32")
    assert ALGO.default_config(tf32) == Config(128, 2, 16, 4, 3)
    assert ALGO.default_config(replace(tf32, precision="tf32x3")) == Config(128, 1, 16, 4, 3)


def test_tuner_offers_it():
    """On a ResNeXt-like layer the tuner's pairs include this algorithm's configs, and the untuned
    heuristic never picks it."""
    from convgemm.tune import autotune as at

    x = torch.randn(1, 64, 6, 6).contiguous(memory_format=torch.channels_last)
    prob = ConvProblem.from_tensors(x, torch.randn(64, 16, 3, 3), None, padding=1, groups=4)
    cands = [ALGORITHMS[n] for n in at._HEURISTIC_ORDER if at._supports(ALGORITHMS[n], prob) is None]
    assert ALGO in cands
    assert [c for a, c in at.tuning_pairs(prob, cands) if a is ALGO] == ALGO.configs(prob)
    assert next(a for a in cands if a.heuristic_ok(prob)) is not ALGO


# ResNeXt-50's 3x3 layers (C, H, stride, C/g) at batch 2, and a 64-channel-group layer
GPU_LAYERS = [(128, 56, 1, 4), (256, 56, 2, 8), (256, 28, 1, 8), (512, 28, 2, 16), (512, 14, 1, 16), (1024, 14, 2, 32),
              (1024, 7, 1, 32), (256, 14, 1, 64)]  # fmt: skip


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("layer", GPU_LAYERS, ids=str)
def test_gpu_resnext_layers(layer, dtype, monkeypatch):
    """Every GPU config (offered to the tuner or not: ``MIN_TUNED_CG``, ``TMA_CANDIDATES``),
    with a bias, against the float64 reference."""
    from convgemm.functional import _prepare

    monkeypatch.setattr(type(ALGO), "MIN_TUNED_CG", 1)
    monkeypatch.setattr(type(ALGO), "MIN_TMA_CG", 1)
    c, hw, st, cg = layer
    torch.manual_seed(c)
    x = torch.randn(2, c, hw, hw, device="cuda").to(dtype).contiguous(memory_format=torch.channels_last)
    wt = (torch.randn(c, cg, 3, 3, device="cuda") / (3 * cg**0.5)).to(dtype)
    b = torch.randn(c, device="cuda").to(dtype)
    prob, x, _ = _prepare(x, wt, b, (st, st), (1, 1), (1, 1), c // cg)
    ref = conv2d_ref(x, wt, b, st, 1, 1, c // cg)
    assert ALGO.configs(prob)
    assert any(cfg.tile_h for cfg in ALGO.configs(prob))  # the TMA form's configs are there too
    for cfg in ALGO.configs(prob):
        y = torch.full((2, c, prob.p, prob.q), float("nan"), dtype=dtype, device="cuda")
        y = y.contiguous(memory_format=torch.channels_last)
        ALGO.run(prob, x, wt, b, y, cfg)
        assert_close(y, ref, dtype, f"{layer} {cfg.describe()}")


# the TMA-box form: N, C, H, W, K, R, S, groups, stride, padding, dilation, (GB, TN, TH, TW)
TMA_CASES = [
    ((2, 64, 7, 6, 64, 3, 3, 4, 1, 1, 1), (2, 2, 4, 4)),  # 16 channels a group, ragged 4x4 tiles
    ((2, 32, 6, 7, 32, 3, 3, 4, 1, 1, 1), (2, 1, 4, 4)),  # 8 channels: two taps a chunk (a padded tap)
    ((1, 32, 9, 7, 32, 3, 3, 8, 1, 1, 1), (4, 1, 2, 8)),  # 4 channels: four taps a chunk, 3 padded
    ((2, 32, 8, 6, 32, 3, 3, 4, 2, 1, 1), (2, 2, 2, 4)),  # stride 2 through the phase view
    ((1, 48, 6, 6, 48, 3, 3, 3, 1, 2, 2), (2, 1, 4, 4)),  # dilation 2, 3 groups over 2 blocks
    ((1, 64, 8, 8, 32, 3, 3, 2, 2, 1, 1), (1, 1, 2, 8)),  # 32 -> 16 channels a group at stride 2
]


def _prepared(case, dtype, seed=0):
    from convgemm.functional import _prepare

    x, wt, b, kw = _tensors(case, dtype, seed)
    two = lambda v: (v, v)  # noqa: E731
    prob, xn, y = _prepare(x, wt, b, two(kw["stride"]), two(kw["padding"]), two(kw["dilation"]), kw["groups"])
    return prob, xn, x, wt, b, kw, y


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case,tile", TMA_CASES, ids=str)
def test_tma_form_matches_float64(case, tile, dtype):
    """The TMA-box form (tile fields set) against the float64 reference: every chunk width
    (1, 2, 4 taps), the stride-phase view, dilation, ragged tiles and group blocks."""
    prob, xn, x, wt, b, kw, y = _prepared(case, dtype)
    gb, tn, th, tw = tile
    assert ALGO.tma_reason(prob, gb) is None
    kc = gm.geometry(prob.cg, prob.kg, prob.r * prob.s)[2]
    cfg = Config(tn * th * tw, gb, kc, 1, 1, tile_n=tn, tile_h=th, tile_w=tw)
    ref = conv2d_ref(x, wt, b, kw["stride"], kw["padding"], kw["dilation"], kw["groups"])
    y.fill_(float("nan"))
    ALGO.run(prob, xn, wt, b, y, cfg)
    assert_close(y, ref, dtype, f"{case} {cfg.describe()}")


def test_tma_form_nan_stays_in_its_group():
    """A NaN input value reaches only its own group's outputs (the box carries its neighbours)."""
    case = (1, 64, 6, 6, 64, 3, 3, 4, 1, 1, 1)
    prob, xn, x, wt, b, kw, y = _prepared(case, torch.float32)
    xn[0, 5, 2, 3] = float("nan")  # group 0 (channels 0-15)
    ALGO.run(prob, xn, wt, b, y, Config(16, 4, 16, 1, 1, tile_n=1, tile_h=4, tile_w=4))
    bad = torch.isnan(y).flatten(2).any(-1)[0]
    assert bad[:16].any() and not bad[16:].any()


def test_tma_form_refusals():
    """Configs and problems the TMA form cannot take say why and what to do."""
    prob, xn, x, wt, b, kw, y = _prepared((1, 24, 6, 6, 24, 3, 3, 2, 1, 1, 1), torch.float32)
    assert "power of two" in ALGO.tma_reason(prob, 1) or "4, 8, 16" in ALGO.tma_reason(prob, 1)
    with pytest.raises(ValueError, match="without tile_"):
        ALGO.run(prob, xn, wt, b, y, Config(16, 1, 16, 1, 1, tile_n=1, tile_h=4, tile_w=4))
    prob, xn, x, wt, b, kw, y = _prepared((1, 16, 6, 6, 16, 3, 3, 4, 1, 1, 1), torch.float16)
    assert "16 bytes" in ALGO.tma_reason(prob, 1)  # one 4-channel group: an 8-byte box row
    with pytest.raises(ValueError, match="multiply to block_m"):
        ALGO.run(prob, xn, wt, b, y, Config(32, 4, 16, 1, 1, tile_n=1, tile_h=4, tile_w=4))
    prob, xn, x, wt, b, kw, y = _prepared((1, 16, 7, 6, 16, 3, 3, 2, 2, 1, 1), torch.float32)
    assert "stride-phase view" in ALGO.tma_reason(prob, 2)  # 7 rows: not a multiple of the stride


def test_tuner_offers_the_tma_form_from_8_channels(monkeypatch):
    """On a GPU (pretended), the tuner gets the TMA form's configs from 8 channels a group on
    (where sessions 54 and 55's H100 probes timed it fastest), the pointer form's from 32,
    neither at 4."""
    from convgemm.conv import fprop

    monkeypatch.setattr(fprop, "interpreting", lambda: False)

    def offered(c, h, st, cg):
        x = torch.empty(64, c, h, h, dtype=torch.bfloat16)
        prob = ConvProblem.from_tensors(x, torch.empty(c, cg, 3, 3, dtype=torch.bfloat16), None, stride=st,
                                        padding=1, groups=32)  # fmt: skip
        prob = replace(prob, tma_ok=True, input_tma_rows_ok=True, input_phases_ok=st > 1)
        return ALGO.configs(prob)

    for layer in ((512, 14, 1, 16), (512, 28, 2, 16)):
        cfgs = offered(*layer)
        assert cfgs and all(c.tile_n * c.tile_h * c.tile_w == c.block_m for c in cfgs), layer
        assert Config(128, 4, 16, 4, 3, tile_n=32, tile_h=2, tile_w=2) in cfgs  # the probe's winner
    both = offered(1024, 7, 1, 32)
    assert any(c.tile_h for c in both) and any(not c.tile_h for c in both)
    narrow = offered(256, 28, 1, 8)
    assert narrow and all(c.tile_h for c in narrow)
    assert offered(128, 56, 1, 4) == []
