"""NaN and Inf in the input reach exactly the outputs whose receptive field holds them."""

import pytest
import torch
import torch.nn.functional as F
from conftest import DEVICE

import convgemm

# (algorithm, C, K, groups, kernel)
CASES = [
    ("implicit_gemm", 8, 8, 1, 3),
    ("implicit_gemm_tma", 16, 16, 1, 3),
    # the block-diagonal GEMM recomputes tiles with non-finite sums one group at a time
    ("grouped", 16, 16, 4, 3),
    ("grouped", 32, 16, 8, 1),
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
