"""fp32 forward tiles: every candidate config of the GEMM algorithms, forced, in strict fp32
(``STRICT_FP32``: 3xTF32 by default, FMA dots with ``CONVGEMM_FP32_PRECISION=ieee``) and TF32 (with the one-tile-per-program 128x256 on two warpgroups), against float64.

The tuner times these configs on the first call; a wrong one would otherwise only show in
``convgemm bench --check``.
"""

import pytest
import torch
from conftest import DEVICE
from reference import assert_close, conv2d_ref, conv_inputs

import convgemm
from convgemm._runtime import STRICT_FP32
from convgemm.conv.fprop import ALGORITHMS
from convgemm.problem import ConvProblem

# N, C, H, W, K, R, S, stride, padding[, groups]
CASES = [
    (2, 64, 12, 10, 128, 3, 3, 1, 1),  # dense 3x3
    (2, 32, 12, 16, 64, 3, 3, 2, 1),  # strided 3x3 (the stride-phase view)
    (2, 32, 12, 10, 48, 3, 3, 1, 1),  # fewer than 64 filters (narrow_tma)
    (2, 64, 8, 8, 128, 1, 1, 1, 0),  # 1x1 (gemm_1x1)
    (2, 3, 16, 16, 32, 3, 3, 2, 1),  # an RGB stem (small_k, width_unfold)
    (2, 64, 12, 12, 64, 3, 3, 1, 1, 16),  # 4 channels a group (grouped_tma's super-groups)
]
NAMES = ("implicit_gemm_tma", "gemm_1x1", "implicit_gemm", "small_k", "width_unfold", "narrow_tma", "grouped_tma")


@pytest.fixture
def strict(request):
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = request.param == "tf32"
    yield request.param
    torch.backends.cudnn.allow_tf32 = old


@pytest.mark.gpu
@pytest.mark.parametrize("strict", ["strict", "tf32"], indirect=True)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_gpu_fp32_every_config(case, strict):
    n, c, h, w, k, r, s, st, pad, *g = case
    g = g[0] if g else 1
    x, wt, b = conv_inputs(n, c, h, w, k, r, s, torch.float32, DEVICE)
    wt = wt[:, : c // g].contiguous()
    ref = conv2d_ref(x, wt, b, stride=st, padding=pad, groups=g)
    ran = 0
    for name in NAMES:
        try:
            prob = convgemm.explain(x, wt, b, stride=st, padding=pad, groups=g, algorithm=name)["problem"]
        except ValueError:
            continue  # the algorithm does not take this case
        assert prob.precision == ("tf32" if strict == "tf32" else STRICT_FP32)
        algo = ALGORITHMS[name]
        for cfg in algo.configs(prob):
            y = torch.full(ref.shape, float("nan"), device=DEVICE).contiguous(memory_format=torch.channels_last)
            wp = algo.pack_weight(prob, wt) if hasattr(algo, "pack_weight") else wt
            algo.run(prob, x, wp, b, y, cfg)
            assert_close(y, ref, torch.float32, f"{name} {cfg.describe()} {strict}")
            ran += 1
    assert ran >= 3


def test_tf32_offers_the_two_warpgroup_plain_tile(monkeypatch):
    """TF32 dense layers get a one-tile-per-program 128x256 (147 KB of shared memory at 3 stages)
    beside the persistent 128x128; 16-bit layers keep their own list (the H200's lists, not the
    interpreter's single small tile)."""
    from dataclasses import replace

    import convgemm.conv.fprop as fprop

    monkeypatch.setattr(fprop, "interpreting", lambda: False)
    monkeypatch.setattr(fprop, "sm_count", lambda: 132)
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.zeros(8, 256, 28, 28, dtype=dtype).to(memory_format=torch.channels_last)
        wt = torch.zeros(256, 256, 3, 3, dtype=dtype)
        prob = ConvProblem.from_tensors(x, wt, None, stride=2, padding=1)
        prob = replace(prob, tma_ok=True, input_tma_ok=True, input_dense=True, input_phases_ok=True)
        tma = ALGORITHMS["implicit_gemm_tma"].configs(prob)
        plain_wide = [c for c in tma if (c.block_m, c.block_n, c.num_warps) == (128, 256, 8) and not c.persistent]
        assert bool(plain_wide) == (dtype == torch.float32), [c.describe() for c in tma]
        # fp32's persistent two-warpgroup tile is 128x128: 128x256 needs 272 KB there
        wide_p = {(c.block_m, c.block_n) for c in tma if c.persistent and c.num_warps == 8}
        assert wide_p == ({(128, 128)} if dtype == torch.float32 else {(128, 256)}), wide_p


@pytest.mark.parametrize("shape", [(8, 256, 28, 28, 256, 3, 3, 2), (8, 64, 56, 56, 64, 3, 3, 1)], ids=str)
def test_strict_fp32_offers_no_tile_over_shared_memory(shape, monkeypatch):
    """3xTF32 (strict fp32's default) keeps high and low operand parts: on sm_90 the persistent
    64x256 needs 246-287 KB of shared memory (over the SM's 227 KB, session 46's compile survey)
    and cannot launch, and the plain 128x256 spills (it never won on the H200's strict suite).
    Neither is a candidate; the persistent 128x128 (213 KB, no spills) and the plain 64x256 are."""
    from dataclasses import replace

    import convgemm.conv.fprop as fprop

    monkeypatch.setattr(fprop, "interpreting", lambda: False)
    monkeypatch.setattr(fprop, "sm_count", lambda: 132)
    n, c, h, w, k, r, s, st = shape
    x = torch.zeros(n, c, h, w).to(memory_format=torch.channels_last)
    prob = ConvProblem.from_tensors(x, torch.zeros(k, c, r, s), None, stride=st, padding=1)
    prob = replace(prob, precision="tf32x3", tma_ok=True, input_tma_ok=True, input_dense=True, input_phases_ok=True)
    tma = ALGORITHMS["implicit_gemm_tma"].configs(prob)
    forms = {(c.block_m, c.block_n, c.num_warps, c.num_stages, bool(c.persistent)) for c in tma}
    assert not {f for f in forms if f[:2] == (64, 256) and f[4]}, sorted(forms)
    assert not {f for f in forms if f[:2] == (128, 256)}, sorted(forms)
    assert (64, 256, 4, 3, False) in forms, sorted(forms)
    if k > 64:  # 128-row tiles need more than 64 output channels
        assert (128, 128, 8, 4, True) in forms, sorted(forms)


def test_strict_fp32_grouped_tiles_are_64x128(monkeypatch):
    """grouped_tma under 3xTF32: only tiles of at most 128 pixels (its 64x256 spilled 370-500
    registers and lost by 33-43% on all seven ResNeXt layers of session 34's strict log), the
    stride-1 persistent forms among them; TF32 keeps the 64x256."""
    from dataclasses import replace

    import convgemm.conv.fprop as fprop

    monkeypatch.setattr(fprop, "interpreting", lambda: False)
    monkeypatch.setattr(fprop, "sm_count", lambda: 132)
    x = torch.zeros(8, 128, 28, 28).to(memory_format=torch.channels_last)
    prob = ConvProblem.from_tensors(x, torch.zeros(128, 4, 3, 3), None, padding=1, groups=32)
    prob = replace(prob, tma_ok=True, input_tma_ok=True, input_dense=True, input_tma_rows_ok=True)
    for precision in ("tf32x3", "tf32"):
        cfgs = ALGORITHMS["grouped_tma"].configs(replace(prob, precision=precision))
        widths = {c.block_n for c in cfgs}
        assert cfgs and any(c.persistent for c in cfgs), [c.describe() for c in cfgs]
        assert (max(widths) <= 128) == (precision == "tf32x3"), (precision, [c.describe() for c in cfgs])
