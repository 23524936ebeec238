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
