"""NaN and Inf in the input reach exactly the outputs whose receptive field holds them."""

import pytest
import torch
import torch.nn.functional as F
from conftest import DEVICE

import convgemm
from convgemm.conv.fprop import ALGORITHMS
from convgemm.problem import ConvProblem

# (algorithm, C, K, groups, kernel)
CASES = [
    ("implicit_gemm", 8, 8, 1, 3),
    ("implicit_gemm_tma", 16, 16, 1, 3),
    # the block-diagonal GEMM recomputes tiles with non-finite sums one group at a time
    ("grouped", 16, 16, 4, 3),
    ("grouped", 32, 16, 8, 1),
    ("grouped", 32, 256, 16, 3),  # 16 groups per GEMM, each N tile holding only some of them
    # several groups as one on the TMA kernel: listed tiles recomputed by a direct fix-up launch
    ("grouped_tma", 16, 16, 4, 3),
    ("grouped_tma", 32, 16, 8, 1),
    ("grouped_tma", 32, 256, 16, 3),
    ("small_k", 3, 8, 1, 3),
    ("depthwise", 8, 8, 8, 3),
    ("gemm_1x1", 16, 16, 1, 1),
]


@pytest.mark.parametrize("algorithm,c,k,groups,r", CASES)
def test_nan_and_inf_propagate_like_the_reference(algorithm, c, k, groups, r, monkeypatch):
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")
    x = torch.randn(1, c, 6, 6, device=DEVICE).to(memory_format=torch.channels_last)
    x[0, 0, 2, 3] = float("nan")
    x[0, c - 1, 4, 1] = float("inf")
    w = torch.randn(k, c // groups, r, r, device=DEVICE).to(memory_format=torch.channels_last)
    kw = dict(padding=r // 2, groups=groups)
    try:
        y = convgemm.conv2d(x, w, **kw, algorithm=algorithm)
    except ValueError as e:
        pytest.skip(str(e))
    ref = F.conv2d(x.double().cpu(), w.double().cpu(), **kw)
    y = y.double().cpu()
    assert torch.equal(torch.isnan(y), torch.isnan(ref))
    assert torch.equal(torch.isinf(y), torch.isinf(ref))
    assert torch.equal(torch.sign(y[torch.isinf(y)]), torch.sign(ref[torch.isinf(ref)]))


@pytest.mark.parametrize(
    "dtype,channels_last,with_bias",
    [(torch.float32, True, False), (torch.float32, False, True), (torch.float64, True, True)],
    ids=["fp32-nhwc", "fp32-nchw-bias", "fp64-nhwc-bias"],
)
def test_grouped_fixup_rewrites_only_the_tiles_holding_nonfinite_values(dtype, channels_last, with_bias, monkeypatch):
    """The block-diagonal GEMM lists the tiles whose sums are not finite and recomputes only
    those, one group at a time: every other tile is bitwise the output of the same call on
    finite inputs, and the recomputed tiles match the reference (NaN and Inf where it has them,
    the other groups' outputs finite and correct)."""
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    # 64 channels in 16 groups of 4: two super-groups of 8 groups (32 channels) per GEMM
    n, c, hw, groups = 2, 64, 12, 16
    x = torch.randn(n, c, hw, hw, device=DEVICE, dtype=dtype).to(memory_format=fmt)
    w = torch.randn(c, c // groups, 3, 3, device=DEVICE, dtype=dtype).to(memory_format=fmt)
    bias = torch.randn(c, device=DEVICE, dtype=dtype) if with_bias else None
    kw = dict(padding=1, groups=groups)
    algo = ALGORITHMS["grouped"]
    prob = ConvProblem.from_tensors(x, w, bias, **kw)
    gt, cfg = algo.groups_per_gemm(prob), algo.default_config(prob)
    num_m = -(-n * prob.p * prob.q // cfg.block_m)
    # several GEMMs, several M tiles each, one N tile: a tile's sum is then non-finite exactly when
    # the reference has a NaN or Inf in it
    assert gt == 8 and num_m > 2 and gt * prob.kg == cfg.block_n
    y_clean = convgemm.conv2d(x, w, bias, **kw, algorithm="grouped")

    bad = x.clone()
    bad[0, 1, 0, 0] = float("nan")  # super-group 0, the first M tile
    bad[1, 60, hw - 1, hw - 1] = float("inf")  # super-group 1, the last M tile
    for _ in range(2):  # the second call runs through the cached plan, on a list left empty
        y = convgemm.conv2d(bad, w, bias, **kw, algorithm="grouped")
        assert algo.fix_list(bad.device, 0)[:2].tolist() == [0, 0]
        ref = F.conv2d(bad.double().cpu(), w.double().cpu(), None if bias is None else bias.double().cpu(), **kw)
        y, yc = y.cpu(), y_clean.cpu()

        # the GEMM tile of each output element (M = image, row, column; batch = super-group), as
        # the kernels number them: (super-group * M tiles + M tile) * N tiles + N tile
        m = torch.arange(n * prob.p * prob.q).reshape(n, 1, prob.p, prob.q)
        tile = (torch.arange(c).reshape(1, c, 1, 1) // (gt * prob.kg)) * num_m + m // cfg.block_m
        nonfinite = ~torch.isfinite(ref)
        listed = tile[nonfinite].unique()
        assert 0 < len(listed) < num_m * groups // gt
        # the main kernel listed exactly those tiles (the fix-up zeroes the count, not the ids)
        ids = algo.fix_list(bad.device, 0)[2 : 2 + len(listed)].cpu()
        assert torch.equal(ids.sort().values, listed.to(ids.dtype))
        touched = torch.isin(tile, listed)
        assert torch.equal(y[~touched], yc[~touched])  # bitwise: those tiles were not recomputed

        assert torch.equal(torch.isnan(y), torch.isnan(ref))
        assert torch.equal(torch.isinf(y), torch.isinf(ref))
        assert torch.equal(y[torch.isinf(y)], ref[torch.isinf(ref)].to(dtype))
        fixed = touched & ~nonfinite  # finite outputs of recomputed tiles: other groups' among them
        assert fixed.any()
        torch.testing.assert_close(y[fixed], yc[fixed])


@pytest.mark.parametrize("pdl", ["0", pytest.param("1", marks=pytest.mark.gpu)])
def test_grouped_tma_fixup_rewrites_only_the_listed_tiles(pdl, monkeypatch):
    """``grouped_tma`` lists the TMA tiles whose sums are not finite and recomputes only those:
    every other output is bitwise the same call's on finite inputs, the listed tiles are exactly
    those holding a non-finite value of the super-group product, and the result matches the
    reference (NaN and Inf where it has them, the other groups' outputs finite). With
    ``CONVGEMM_PDL=1`` (GPU) the fix-up is a programmatic dependent launch: the same."""
    from dataclasses import replace

    from convgemm import functional
    from convgemm.conv.fprop import Grouped

    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")
    monkeypatch.setenv("CONVGEMM_PDL", pdl)
    functional.clear_plans()  # plans hold their launches' compiled form: plan afresh under this setting
    n, c, hw, groups = 2, 64, 12, 16  # 16 groups of 4 channels
    x = torch.randn(n, c, hw, hw, device=DEVICE, dtype=torch.float16).to(memory_format=torch.channels_last)
    w = torch.randn(c, c // groups, 3, 3, device=DEVICE, dtype=torch.float16)
    bias = torch.randn(c, device=DEVICE, dtype=torch.float16)
    kw = dict(padding=1, groups=groups)
    algo = ALGORITHMS["grouped_tma"]
    prob = ConvProblem.from_tensors(x, w, bias, **kw)
    prob = replace(prob, tma_ok=True, input_tma_rows_ok=True)
    cfg = algo.default_config(prob)
    ks = cfg.gt * prob.kg  # output channels per super-group
    num_m = -(-ks // cfg.block_m)
    tiles_w, tiles_h = -(-prob.q // cfg.tile_w), -(-prob.p // cfg.tile_h)
    num_n = -(-n // cfg.tile_n) * tiles_h * tiles_w
    y_clean = convgemm.conv2d(x, w, bias, **kw, algorithm="grouped_tma")

    bad = x.clone()
    bad[0, 1, 0, 0] = float("nan")  # super-group 0
    bad[1, 60, hw - 1, hw - 1] = float("inf")  # the last super-group
    ref = F.conv2d(bad.double().cpu(), w.double().cpu(), bias.double().cpu(), **kw)
    # each output's tile as the kernel numbers it: (super-group * M tiles + M tile) * N tiles + N tile
    kk = torch.arange(c).reshape(1, c, 1, 1)
    nn_ = torch.arange(n).reshape(n, 1, 1, 1)
    pp = torch.arange(prob.p).reshape(1, 1, prob.p, 1)
    qq = torch.arange(prob.q).reshape(1, 1, 1, prob.q)
    pid_n = (nn_ // cfg.tile_n) * tiles_h * tiles_w + (pp // cfg.tile_h) * tiles_w + qq // cfg.tile_w
    tile = ((kk // ks) * num_m + (kk % ks) // cfg.block_m) * num_n + pid_n
    # a tile's super-group sum is non-finite where a non-finite input reaches any of its groups
    mixed = F.conv2d(
        (~torch.isfinite(bad.cpu())).double(), torch.ones(c, c // groups * cfg.gt, 3, 3, dtype=torch.float64),
        padding=1, groups=groups // cfg.gt,
    )  # fmt: skip
    expected = tile[mixed > 0].unique()
    assert 0 < len(expected) < num_m * num_n * (groups // cfg.gt)
    for _ in range(2):  # the second call runs through the cached plan, on a list left empty
        y = convgemm.conv2d(bad, w, bias, **kw, algorithm="grouped_tma")
        fix = Grouped.fix_list(bad.device, 0)
        assert fix[:2].tolist() == [0, 0]
        ids = fix[2 : 2 + len(expected)].cpu()
        assert torch.equal(ids.sort().values, expected.to(ids.dtype))
        touched = torch.isin(tile, expected).expand_as(y_clean.cpu())
        yc, y = y_clean.cpu(), y.cpu()
        assert torch.equal(y[~touched], yc[~touched])
        assert torch.equal(torch.isnan(y), torch.isnan(ref))
        assert torch.equal(torch.isinf(y), torch.isinf(ref))
        fixed = touched & torch.isfinite(ref)
        assert fixed.any()
        torch.testing.assert_close(y[fixed].float(), ref[fixed].float(), atol=2e-2, rtol=2e-3)


@pytest.mark.parametrize("per_sm", [1, 3])
def test_grouped_tma_persistent_walks_every_super_group(per_sm, monkeypatch):
    """``grouped_tma`` on persistent programs (``persistent_gemm_kernel`` walking the tiles of
    every super-group, ``BATCHES``): the bias of each super-group, every tile written, and the
    non-finite listing and fix-up as on one tile a program (under the interpreter one SM: a few
    programs walk every super-group's tiles)."""
    from dataclasses import replace

    from reference import assert_close, conv2d_ref

    from convgemm.functional import _prepare

    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")
    n, c, hw, groups = 2, 128, 6, 32
    x = torch.randn(n, c, hw, hw, device=DEVICE, dtype=torch.float16).to(memory_format=torch.channels_last)
    w = torch.randn(c, c // groups, 3, 3, device=DEVICE, dtype=torch.float16)
    bias = torch.randn(c, device=DEVICE, dtype=torch.float16)
    algo = ALGORITHMS["grouped_tma"]
    prob, _, y = _prepare(x, w, bias, 1, 1, 1, groups)
    cfg = replace(algo.default_config(prob), persistent=per_sm)
    assert algo.supports(prob) is None and 1 < cfg.gt < groups  # several super-groups
    for bad in (False, True):
        xx = x.clone()
        if bad:
            xx[0, 1, 0, 0] = float("nan")
            xx[1, 120, hw - 1, hw - 1] = float("inf")
        y.fill_(float("nan"))
        algo.run(prob, xx, w, bias, y, cfg)
        ref = conv2d_ref(xx, w, bias, 1, 1, 1, groups)
        yc = y.double().cpu()
        assert torch.equal(torch.isnan(yc), torch.isnan(ref)) and torch.equal(torch.isinf(yc), torch.isinf(ref))
        fin = torch.isfinite(ref)
        assert_close(yc[fin].to(torch.float16), ref[fin].to(torch.float16), torch.float16, f"persistent {per_sm} {bad}")
