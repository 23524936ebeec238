"""Repeat calls: the second and later calls of a signature take the plan's launch shortcut.

``conv2d`` keeps a plan per call signature; from the second call on it launches the compiled
kernel directly with only the new tensors (``matmul.launch.Launch.fast``), reusing the first
call's grid, integers and TMA descriptor geometry. Every call here uses fresh tensors (new
addresses, new values), so a shortcut that kept a stale pointer, descriptor or grid fails.
The shortcut exists only on a GPU: the interpreter has no plans.
"""

import pytest
import torch
from reference import assert_close, conv2d_ref

import convgemm

pytestmark = pytest.mark.gpu

# (N, C, H, W, K, R, S, stride, padding, groups, bias): channel counts larger than one tile,
# so a launch that lost a grid dimension leaves output unwritten
SHAPES = [
    (2, 64, 14, 13, 96, 3, 3, 1, 1, 1, True),  # implicit_gemm(_tma)
    (3, 64, 9, 7, 160, 1, 1, 1, 0, 1, False),  # gemm_1x1
    (2, 3, 33, 31, 40, 5, 5, 2, 2, 1, True),  # small_k
    (2, 320, 12, 11, 320, 3, 3, 1, 1, 320, True),  # depthwise, 3 channel blocks
    (2, 128, 10, 9, 128, 3, 3, 2, 1, 32, False),  # grouped
]


def _fresh(shape, dtype, channels_last):
    n, c, h, w, k, r, s, stride, padding, groups, has_bias = shape
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(n, c, h, w, device="cuda", dtype=dtype).to(memory_format=fmt)
    wt = torch.randn(k, c // groups, r, s, device="cuda", dtype=dtype).to(memory_format=fmt)
    b = torch.randn(k, device="cuda", dtype=dtype) if has_bias else None
    return x, wt, b, dict(stride=stride, padding=padding, groups=groups)


@pytest.mark.parametrize("channels_last", [True, False], ids=["cl", "nchw"])
@pytest.mark.parametrize("algorithm", convgemm.algorithms())
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:7])))
def test_repeat_calls_see_new_tensors(shape, algorithm, channels_last, monkeypatch):
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")
    keep = []  # hold earlier tensors so the allocator must hand out new addresses
    for i in range(4):
        x, w, b, kw = _fresh(shape, torch.float16, channels_last)
        try:
            y = convgemm.conv2d(x, w, b, **kw, algorithm=algorithm)
        except ValueError as e:
            pytest.skip(str(e))
        assert_close(y, conv2d_ref(x, w, b, **kw), torch.float16, f"call {i} {algorithm}")
        keep.append((x, w, b, y))


def test_repeat_calls_reuse_addresses():
    """The allocator hands the same addresses back: cached descriptors must still be right."""
    shape = SHAPES[0]
    for i in range(3):
        x, w, b, kw = _fresh(shape, torch.bfloat16, True)
        y = convgemm.conv2d(x, w, b, **kw)
        assert_close(y, conv2d_ref(x, w, b, **kw), torch.bfloat16, f"call {i}")
        del x, w, b, y


def _wgrad_ref(x, wshape, dy, **kw):
    return torch.nn.grad.conv2d_weight(x.double().cpu(), wshape, dy.double().cpu(), **kw)


# (N, C, H, W, K, R, S, stride, padding, groups): wgrad_tma (3x3 and 1x1, with split-K), the
# gather wgrad (stride 2 3x3), the direct depthwise wgrad
WGRAD_SHAPES = [
    (2, 64, 14, 13, 96, 3, 3, 1, 1, 1),
    (3, 128, 9, 7, 64, 1, 1, 1, 0, 1),
    (2, 32, 15, 13, 48, 3, 3, 2, 1, 1),
    (2, 144, 12, 11, 144, 3, 3, 1, 1, 144),
]


@pytest.mark.parametrize("channels_last", [True, False], ids=["cl", "nchw"])
@pytest.mark.parametrize("shape", WGRAD_SHAPES, ids=lambda s: "x".join(map(str, s[:7])))
def test_wgrad_repeat_calls_see_new_tensors(shape, channels_last):
    """conv2d_weight keeps a plan per signature (tuned config, launch handle): every repeat call
    on fresh tensors must give that call's gradient."""
    n, c, h, w, k, r, s, stride, padding, groups = shape
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    kw = dict(stride=stride, padding=padding, groups=groups)
    p = (h + 2 * padding - r) // stride + 1
    q = (w + 2 * padding - s) // stride + 1
    keep = []
    for i in range(4):
        x = torch.randn(n, c, h, w, device="cuda", dtype=torch.bfloat16).to(memory_format=fmt)
        dy = torch.randn(n, k, p, q, device="cuda", dtype=torch.bfloat16).to(memory_format=fmt)
        wshape = (k, c // groups, r, s)
        dw = convgemm.conv2d_weight(x, wshape, dy, **kw)
        assert_close(dw, _wgrad_ref(x, wshape, dy, **kw), torch.bfloat16, f"call {i}")
        keep.append((x, dy, dw))
