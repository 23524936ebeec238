"""``grouped_direct`` (``conv/grouped_direct.py``): grouped convolutions of 2-8 channels a group on
the CUDA cores, forced on every shape kind it claims, against the float64 reference."""

from dataclasses import replace

import pytest
import torch
from conftest import DEVICE
from reference import assert_close, conv2d_ref

import convgemm
from convgemm.conv import fprop, grouped_direct
from convgemm.conv.fprop import ALGORITHMS
from convgemm.problem import ConvProblem

pytestmark = pytest.mark.usefixtures("no_tf32")

ALGO = ALGORITHMS["grouped_direct"]

# N, C, H, W, K, R, groups, stride, padding, dilation
CASES = [
    (2, 16, 9, 10, 16, 3, 4, 1, 1, 1),  # ResNeXt's 4 channels a group, a ragged last strip
    (1, 32, 11, 9, 32, 3, 8, 2, 1, 1),  # stride 2 with odd input sizes
    (2, 24, 8, 8, 6, 3, 3, 1, 2, 2),  # 8 -> 2 channels a group, dilation 2
    (1, 8, 7, 9, 32, 3, 4, 1, 0, 1),  # 2 -> 8, no padding
    (1, 32, 6, 6, 16, 3, 8, 2, 1, 1),  # 4 -> 2 channels a group, stride 2
    (1, 12, 6, 7, 6, 5, 6, 1, 2, 1),  # 2 -> 1, 5x5
    (3, 18, 5, 4, 18, 1, 9, 1, 0, 1),  # 1x1, 2 channels a group, group count not a power of two
    (1, 24, 7, 9, 24, 3, 3, 2, 1, 1),  # ResNeXt's 8 x 8 at stride 2: each group over 4 threads
    (2, 16, 6, 5, 8, 3, 2, 1, 1, 1),  # 8 -> 4 channels a group: over 2 threads
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_forced_matches_float64(case, dtype):
    """Every config ``configs`` offers (interpreter: small tiles), forced, with a bias; bf16 runs
    under the interpreter too (the kernel has FMAs, no tl.dot)."""
    n, c, h, w, k, r, g, st, pad, dil = case
    torch.manual_seed(0)
    x = torch.randn(n, c, h, w).to(dtype).to(DEVICE).contiguous(memory_format=torch.channels_last)
    wt = (torch.randn(k, c // g, r, r) / (c // g * r * r) ** 0.5).to(dtype).to(DEVICE)
    b = torch.randn(k).to(dtype).to(DEVICE)
    prob = ConvProblem.from_tensors(x, wt, b, stride=st, padding=pad, dilation=dil, groups=g)
    assert ALGO.supports(prob) is None
    ref = conv2d_ref(x, wt, b, st, pad, dil, g)
    for cfg in ALGO.configs(prob):
        y = torch.full((n, k, prob.p, prob.q), float("nan"), dtype=dtype, device=DEVICE)
        y = y.contiguous(memory_format=torch.channels_last)
        ALGO.run(prob, x, wt, b, y, cfg)
        assert_close(y, ref, dtype, f"{case} {cfg.describe()}")
    y = convgemm.conv2d(x, wt, b, stride=st, padding=pad, dilation=dil, groups=g, algorithm="grouped_direct")
    assert_close(y, ref, dtype, f"{case} conv2d")


@pytest.mark.parametrize("layout", ["nchw", "sliced_out"])
def test_any_strides_and_relu(layout):
    """An NCHW input and output, and an output that is a channel slice of a wider tensor, with
    the fused ReLU."""
    n, c, h, w, k, g = 2, 16, 7, 8, 16, 4
    torch.manual_seed(1)
    x = torch.randn(n, c, h, w, device=DEVICE)
    if layout != "nchw":
        x = x.contiguous(memory_format=torch.channels_last)
    wt = torch.randn(k, c // g, 3, 3, device=DEVICE)
    ref = torch.relu(conv2d_ref(x, wt, None, 1, 1, 1, g))
    if layout == "nchw":
        y = convgemm.conv2d(x, wt, None, padding=1, groups=g, algorithm="grouped_direct", activation="relu")
        assert_close(y, ref, torch.float32, layout)
        return
    prob = replace(ConvProblem.from_tensors(x, wt, None, padding=1, groups=g), activation="relu")
    big = torch.full((n, k + 5, h, w), float("nan"), device=DEVICE).contiguous(memory_format=torch.channels_last)
    y = big[:, 3 : 3 + k]
    ALGO.run(prob, x, wt, None, y, ALGO.default_config(prob))
    assert_close(y, ref, torch.float32, layout)
    assert torch.isnan(big[:, :3]).all() and torch.isnan(big[:, 3 + k :]).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_word_loads_and_their_fallback(dtype):
    """Channels loaded as one word where the strides and alignment allow (4 16-bit or 2 fp32
    channels in 8 bytes), one at a time on a view starting one channel in; both right."""
    from convgemm.conv.grouped_direct import word_channels

    torch.manual_seed(2)
    big = torch.randn(2, 20, 6, 7).to(dtype).to(DEVICE).contiguous(memory_format=torch.channels_last)
    wt = torch.randn(16, 4, 3, 3).to(dtype).to(DEVICE)
    for x, want in ((big[:, :16], 4 // (dtype.itemsize // 2)), (big[:, 1:17], 1)):
        assert word_channels(x, 4) == want
        y = convgemm.conv2d(x, wt, padding=1, groups=4, algorithm="grouped_direct")
        assert_close(y, conv2d_ref(x, wt, None, 1, 1, 1, 4), dtype, f"word width {word_channels(x, 4)}")
    x = big[:, :16].contiguous(memory_format=torch.channels_last)
    assert word_channels(x, 4) == 4 // (dtype.itemsize // 2) and word_channels(x.contiguous(), 4) == 1


def test_nonfinite_stays_in_its_group():
    """A NaN in one group's input reaches that group's outputs only (no block-diagonal padding
    here to spread it)."""
    x = torch.randn(1, 16, 6, 6, device=DEVICE).contiguous(memory_format=torch.channels_last)
    x[0, 5, 2, 2] = float("nan")  # group 1 (channels 4-7)
    wt = torch.randn(16, 4, 3, 3, device=DEVICE)
    y = convgemm.conv2d(x, wt, padding=1, groups=4, algorithm="grouped_direct")
    assert torch.isnan(y[0, 4:8]).any()
    assert torch.isfinite(y[0, :4]).all() and torch.isfinite(y[0, 8:]).all()


@pytest.mark.parametrize(
    "wshape,groups,kw,why",
    [
        ((16, 16, 3, 3), 1, {}, "groups = 1"),
        ((16, 1, 3, 3), 16, {}, "depthwise"),
        ((32, 16, 3, 3), 2, {}, "at most 8"),
        ((64, 4, 3, 3), 4, {}, "at most 8"),  # 16 output channels a group
        ((8, 2, 1, 31), 2, dict(dilation=3), "registers"),
        ((12, 8, 3, 3), 2, {}, "power-of-two split"),  # 8 x 6: 48 weights a tap, 6 splits only in two (24)
        ((10, 4, 3, 3), 2, {}, "power-of-two split"),  # 4 x 5: 20, and 5 is odd
    ],
    ids=str,
)
def test_supports_gives_a_reason(wshape, groups, kw, why):
    x = torch.randn(1, wshape[1] * groups, 4, 100, device=DEVICE)
    prob = ConvProblem.from_tensors(x, torch.empty(wshape, device=DEVICE), None, groups=groups, **kw)
    reason = ALGO.supports(prob)
    assert reason is not None and why in reason, reason
    with pytest.raises(ValueError, match=why.split()[0]):
        convgemm.conv2d(x, torch.randn(wshape, device=DEVICE), groups=groups, algorithm="grouped_direct", **kw)


def test_pick_cols_and_gpu_candidates(monkeypatch):
    """Columns a thread: 8 for ResNeXt's 4 -> 4 groups at Q = 56, 7 where Q = 28 or 14 (no masked
    column), 4 for 8 -> 8 split over 4 threads (2 output channels a thread) at stride 2 (the
    register budget); the GPU's candidates are one element a thread on 4 warps, 8 to 32 groups a
    program."""
    assert grouped_direct.pick_cols(4, 4, 3, 1, 1, 56) == 8
    assert grouped_direct.pick_cols(4, 4, 3, 1, 1, 28) == 7
    assert grouped_direct.pick_cols(8, 2, 3, 1, 1, 14) == 7
    assert grouped_direct.pick_cols(8, 2, 3, 2, 1, 28) == 4
    # there 5 columns fit the budget, 6 do not; 4 is picked over 5: 7 strips of 4 mask none (6 of 5: 2 of 30)
    assert (
        grouped_direct.row_values(5, 8, 2, 3, 2, 1)
        <= grouped_direct.REG_VALUES
        < grouped_direct.row_values(6, 8, 2, 3, 2, 1)
    )
    assert grouped_direct.pick_cols(4, 4, 3, 1, 1, 3) == 3  # no wider than Q
    assert grouped_direct.pick_cols(4, 4, 3, 1, 1, 13) == 7  # 14 columns for 13, where 8 would take 16
    for cols in (8, 4, 2, 1):
        v = grouped_direct.row_values(cols, 8, 8, 31, 1, 3)
        assert v > grouped_direct.REG_VALUES
    monkeypatch.setattr(fprop, "interpreting", lambda: False)
    x = torch.empty(64, 128, 56, 56)
    prob = ConvProblem.from_tensors(x, torch.empty(128, 4, 3, 3), None, padding=1, groups=32)
    cfgs = ALGO.configs(prob)
    assert [c.block_n for c in cfgs] == [32]  # the widest only (session 61: 32 beat 16 in 14 of 15 logs)
    assert all(c.block_m * c.block_n == 32 * c.num_warps for c in cfgs)
    assert ALGO.default_config(prob) == cfgs[0] and not ALGO.heuristic_ok(prob)


def test_bad_tile_is_refused():
    x = torch.randn(1, 16, 6, 6)
    wt = torch.randn(16, 4, 3, 3)
    prob = ConvProblem.from_tensors(x, wt, None, padding=1, groups=4)
    y = torch.empty(1, 16, 6, 6)
    with pytest.raises(ValueError, match="powers of two"):
        ALGO.run(prob, x, wt, None, y, replace(ALGO.default_config(prob), block_n=3))
    with pytest.raises(ValueError, match="must divide K/groups = 4"):
        ALGO.run(prob, x, wt, None, y, replace(ALGO.default_config(prob), parts=3))
    x8 = torch.randn(1, 16, 6, 6)
    prob8 = ConvProblem.from_tensors(x8, torch.randn(16, 8, 3, 3), None, padding=1, groups=2)
    assert ALGO.default_config(prob8).parts == 4
    with pytest.raises(ValueError, match="at most 16 weights a tap a thread .8 x 4.; use parts = 4"):
        ALGO.run(prob8, x8, torch.randn(16, 8, 3, 3), None, y, replace(ALGO.default_config(prob8), parts=2))


def test_split_parts():
    """A thread holds at most 16 weights a tap: 4 x 4 and narrower stay one thread a group, 8 x 4
    and 4 x 8 take two, 8 x 8 four."""
    assert [grouped_direct.split_parts(cg, kg) for cg, kg in ((4, 4), (2, 8), (8, 2), (8, 4), (4, 8), (8, 8))] == [
        1,
        1,
        1,
        2,
        2,
        4,
    ]


def test_split_forms_are_not_tuned(monkeypatch):
    """Groups split over several threads (8 x 8) lost to grouped_tma on both ResNeXt layers timed
    (H100, session 44): on a GPU the tuner gets no grouped_direct candidate for them, unless
    ``SPLIT_CANDIDATES``; forced, they still run (``test_forced_matches_float64``)."""
    monkeypatch.setattr(fprop, "interpreting", lambda: False)
    x = torch.empty(64, 256, 28, 28)
    prob = ConvProblem.from_tensors(x, torch.empty(256, 8, 3, 3), None, padding=1, groups=32)
    assert ALGO.supports(prob) is None and ALGO.default_config(prob).parts == 4
    assert ALGO.configs(prob) == []
    monkeypatch.setattr(type(ALGO), "SPLIT_CANDIDATES", True)
    assert ALGO.configs(prob) and all(c.parts == 4 for c in ALGO.configs(prob))


def test_tuner_offers_it():
    """On a ResNeXt-like layer the tuner's pairs (after its prune) include this algorithm's
    configs, and the untuned heuristic never picks it."""
    from convgemm.tune import autotune as at

    x = torch.randn(1, 16, 6, 6).contiguous(memory_format=torch.channels_last)
    prob = ConvProblem.from_tensors(x, torch.randn(16, 4, 3, 3), None, padding=1, groups=4)
    cands = [ALGORITHMS[n] for n in at._HEURISTIC_ORDER if at._supports(ALGORITHMS[n], prob) is None]
    assert ALGO in cands
    assert [c for a, c in at.tuning_pairs(prob, cands) if a is ALGO] == ALGO.configs(prob)
    assert next(a for a in cands if a.heuristic_ok(prob)) is not ALGO


# ResNeXt-50's 4-channel-group 3x3 layer, the same at stride 2, a 2 -> 8 layer and ResNeXt's two 8-channel-group
# layers (each group over 4 threads) (C, H, stride, C/g, K/g) at batch 2
GPU_LAYERS = [(128, 56, 1, 4, 4), (128, 56, 2, 4, 4), (64, 28, 1, 2, 8), (256, 28, 1, 8, 8), (256, 56, 2, 8, 8)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("layer", GPU_LAYERS, ids=str)
def test_gpu_resnext_layers(layer, dtype, monkeypatch):
    """Every GPU candidate through the Gluon entry; in bf16 on the 4-channel layer also the
    Triton entry (``CONVGEMM_DEPTHWISE_GLUON=0``; 30 s to compile here): the same bits."""
    c, hw, st, cg, kg = layer
    monkeypatch.setattr(type(ALGO), "SPLIT_CANDIDATES", True)  # the split forms too, though not tuned
    torch.manual_seed(c)
    x = torch.randn(2, c, hw, hw, device="cuda").to(dtype).contiguous(memory_format=torch.channels_last)
    k = c // cg * kg
    wt = (torch.randn(k, cg, 3, 3, device="cuda") / 6).to(dtype)
    b = torch.randn(k, device="cuda").to(dtype)
    prob = ConvProblem.from_tensors(x, wt, b, stride=st, padding=1, groups=c // cg)
    ref = conv2d_ref(x, wt, b, st, 1, 1, c // cg)
    assert ALGO.configs(prob)
    for i, cfg in enumerate(ALGO.configs(prob)):
        outs = []
        for flag in ("1", "0") if i == 0 and st == 1 and cg == 4 and dtype == torch.bfloat16 else ("1",):
            monkeypatch.setenv("CONVGEMM_DEPTHWISE_GLUON", flag)
            y = torch.full((2, k, prob.p, prob.q), float("nan"), dtype=dtype, device="cuda")
            y = y.contiguous(memory_format=torch.channels_last)
            ALGO.run(prob, x, wt, b, y, cfg)
            outs.append(y)
        assert all(torch.equal(outs[0], o) for o in outs[1:]), f"{cfg.describe()}: the two entries differ"
        assert_close(outs[0], ref, dtype, f"{layer} {cfg.describe()}")


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
def test_word_width_is_a_power_of_two(dtype):
    """Three 16-bit channels a group (conv1d's grouped case on the H100, session 46) are no word
    the kernel can load: at a 6-byte aligned address XV was 3 and 84 of 96 outputs were garbage.
    Every offset of the input, so that some are word-aligned, computes right."""
    from convgemm.conv.grouped_direct import word_channels

    torch.manual_seed(3)
    wt = torch.randn(4, 3, 1, 3).to(dtype).to(DEVICE)
    big = torch.randn(3 * 15 * 6 + 8).to(dtype).to(DEVICE)
    for off in range(4):
        x = big[off : off + 3 * 15 * 6].view(3, 1, 15, 6).permute(0, 3, 1, 2)  # NHWC strides
        xv = word_channels(x, 3)
        assert xv & (xv - 1) == 0 and 3 % xv == 0, xv
        kw = dict(stride=(1, 2), padding=(0, 2), dilation=(1, 2), groups=2)
        y = convgemm.conv2d(x, wt, None, algorithm="grouped_direct", **kw)
        assert_close(y, conv2d_ref(x, wt, None, **kw), dtype, f"offset {off}")
    for cg in range(1, 9):
        for esize_dtype in (torch.float16, torch.float32):
            x = torch.zeros(1, 8, 2, 2, dtype=esize_dtype).contiguous(memory_format=torch.channels_last)
            xv = word_channels(x, cg)
            assert xv & (xv - 1) == 0 and cg % xv == 0, (cg, esize_dtype, xv)
