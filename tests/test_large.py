"""Tensors of more than 2**31 elements: every address computation must be 64-bit where it can pass
2**31 (a 32-bit offset wraps around and reads or writes the wrong place, or faults).

GPU only (several GB each; about 20 GB of free device memory for the largest). Each test checks
the bottom-right corner of the *last* image, whose elements lie past 2**31 in the tensors that
exceed it, against the float64 reference on a crop that holds its whole receptive field.
Select with ``-m large``, leave out with ``-m "not large"``::

    pytest -m large tests/test_large.py -v
"""

import gc

import pytest
import torch
from conftest import DEVICE
from reference import assert_close, conv2d_ref

import convgemm
from convgemm.functional import clear_plans

pytestmark = [pytest.mark.gpu, pytest.mark.large]

BIG = 2**31
CORNER = 20  # output rows/columns compared, at the bottom-right of the last image
GIB = 2**30


@pytest.fixture(autouse=True)
def _release(monkeypatch):
    """No tuning (it would time candidates on these tensors); give every GB back afterwards.

    ``clear_plans``: a call plan's launch handle may still refer to its first call's tensors.
    """
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")
    yield
    clear_plans()
    gc.collect()
    torch.cuda.empty_cache()


def _need(gib: float) -> None:
    free, _ = torch.cuda.mem_get_info()
    if free < gib * GIB:
        pytest.skip(f"needs about {gib:.0f} GiB of free GPU memory, {free / GIB:.1f} GiB free")


def _randn_nhwc(n, c, h, w, dtype=torch.bfloat16) -> torch.Tensor:
    """``[n, c, h, w]`` channels_last, drawn directly in ``dtype`` (no float32 temporary)."""
    return torch.randn(n, h, w, c, dtype=dtype, device=DEVICE).permute(0, 3, 1, 2)


def _offset(t: torch.Tensor, *index: int) -> int:
    """Element offset of ``t[index]`` (negative indices allowed) from the start of its storage."""
    return t.storage_offset() + sum((i % d) * s for i, d, s in zip(index, t.shape, t.stride(), strict=True))


def _corner(t: torch.Tensor) -> torch.Tensor:
    return t[-1:, :, -CORNER:, -CORNER:]


# (algorithm, (N, C, H, W), (K, C/groups, R, S), padding, groups)
FORWARD = [
    ("implicit_gemm", (3, 64, 3400, 3400), (64, 64, 3, 3), 1, 1),
    ("implicit_gemm_tma", (3, 64, 3400, 3400), (64, 64, 3, 3), 1, 1),
    ("gemm_1x1", (3, 64, 3400, 3400), (64, 64, 1, 1), 0, 1),
    ("depthwise", (3, 64, 3400, 3400), (64, 1, 3, 3), 1, 64),
    ("depthwise_rows", (3, 64, 3400, 3400), (64, 1, 3, 3), 1, 64),
    ("grouped", (3, 64, 3400, 3400), (64, 8, 3, 3), 1, 8),
    # 3 channels: 2.2e9 input elements, a 5.8e9-element output (its last image past 2**32)
    ("small_k", (3, 3, 15500, 15500), (8, 3, 3, 3), 1, 1),
]


@pytest.mark.parametrize("algorithm,xshape,wshape,pad,groups", FORWARD, ids=[f[0] for f in FORWARD])
def test_forward_past_2_31_elements(algorithm, xshape, wshape, pad, groups):
    n, c, h, w_ = xshape
    k, _, r, s = wshape
    x_elems, y_elems = n * c * h * w_, n * k * (h + 2 * pad - r + 1) * (w_ + 2 * pad - s + 1)
    assert x_elems > BIG
    _need((x_elems + y_elems) * 2 / GIB + 2)
    x = _randn_nhwc(*xshape)
    w = torch.randn(wshape, device=DEVICE).to(torch.bfloat16).to(memory_format=torch.channels_last)
    b = torch.randn(k, device=DEVICE).to(torch.bfloat16)
    assert _offset(x, -1, 0, -CORNER, -CORNER) > BIG
    try:
        y = convgemm.conv2d(x, w, b, padding=pad, groups=groups, algorithm=algorithm)
    except ValueError as e:
        assert "cannot run" in str(e), e
        pytest.skip(str(e))
    torch.cuda.synchronize()
    # the receptive field of the output corner: CORNER + R - 1 - pad input rows (and columns)
    crop = CORNER + r - 1 - pad
    ref = conv2d_ref(x[-1:, :, -crop:, -crop:], w, b, padding=pad, groups=groups)[..., -CORNER:, -CORNER:]
    assert_close(_corner(y), ref, torch.bfloat16, f"{algorithm} output corner")
    # and the first image's corner, before any offset passes 2**31
    ref0 = conv2d_ref(x[:1, :, :crop, :crop], w, b, padding=pad, groups=groups)[..., :CORNER, :CORNER]
    assert_close(y[:1, :, :CORNER, :CORNER], ref0, torch.bfloat16, f"{algorithm} first corner")


# (N, C, H, W, K) of the backward tests: 3x3 kernel, padding 1
BACKWARD = (3, 64, 3400, 3400, 64)


@pytest.mark.parametrize("stride", [1, 2], ids=["stride1_as_forward", "stride2_per_phase"])
def test_dgrad_past_2_31_elements(stride):
    """dx of 2.2e9 elements (and dy too at stride 1: dgrad then runs as a forward convolution;
    stride 2 takes the per-phase dgrad kernel)."""
    n, c, h, w_, k = BACKWARD
    p = (h + 2 - 3) // stride + 1
    _need((n * c * h * w_ + n * k * p * p) * 2 / GIB + 2)
    w = torch.randn(k, c, 3, 3, device=DEVICE).to(torch.bfloat16).to(memory_format=torch.channels_last)
    dy = _randn_nhwc(n, k, p, p)
    dx = convgemm.conv2d_input((n, c, h, w_), w, dy, stride=stride, padding=1)
    torch.cuda.synchronize()
    assert dx.numel() > BIG and _offset(dx, -1, 0, -CORNER, -CORNER) > BIG
    # a crop of hc input rows whose first row has the same stride phase as in the full problem;
    # its gradient from the last pc rows of dy is exact in its last CORNER rows (and columns)
    hc = CORNER + 1 if stride == 1 else CORNER + 2
    assert (h - hc) % stride == 0
    pc = (hc + 2 - 3) // stride + 1
    ref = torch.nn.grad.conv2d_input(
        (1, c, hc, hc), w.double().cpu(), dy[-1:, :, -pc:, -pc:].double().cpu(), stride=stride, padding=1
    )[..., -CORNER:, -CORNER:]
    assert_close(_corner(dx), ref, torch.bfloat16, f"dgrad stride {stride} corner")


def test_wgrad_past_2_31_elements(no_tf32):
    """x and dy of 2.2e9 elements each: the reduction over N*P*Q walks every image, the last one
    past 2**31. The reference is cuDNN's in strict fp32, one image at a time (each under 2**31)."""
    n, c, h, w_, k = BACKWARD
    _need(2 * n * c * h * w_ * 2 / GIB + 2 * c * h * w_ * 4 / GIB + 4)
    x = _randn_nhwc(n, c, h, w_)
    dy = _randn_nhwc(n, k, h, w_)
    assert _offset(x, -1, 0, -1, -1) > BIG
    dw = convgemm.conv2d_weight(x, (k, c, 3, 3), dy, padding=1)
    torch.cuda.synchronize()
    ref = torch.zeros(k, c, 3, 3, dtype=torch.float64, device=DEVICE)
    for i in range(n):
        xi, dyi = x[i : i + 1].float(), dy[i : i + 1].float()
        ref += torch.nn.grad.conv2d_weight(xi, (k, c, 3, 3), dyi, padding=1).double()
        del xi, dyi
        torch.cuda.empty_cache()
    assert_close(dw, ref.cpu(), torch.bfloat16, "wgrad")
