"""The float64 reference every kernel is checked against, and the per-dtype thresholds."""

from __future__ import annotations

import torch
import torch.nn.functional as F

#: ||y - ref|| / ||ref|| allowed per compute mode (inputs are exactly representable in each dtype,
#: so the error is the kernel's own: accumulation order, TF32 rounding, the output cast)
THRESHOLDS = {"fp32": 1e-5, "tf32": 5e-3, "fp16": 2e-3, "bf16": 1e-2, "fp64": 1e-12}


def mode(dtype: torch.dtype) -> str:
    if dtype == torch.float32:
        return "tf32" if torch.backends.cudnn.allow_tf32 else "fp32"
    return {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64"}[dtype]


def conv2d_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1) -> torch.Tensor:
    """torch's conv2d in float64 on the CPU, on the (already rounded) inputs upcast."""
    return F.conv2d(
        x.detach().double().cpu(),
        w.detach().double().cpu(),
        None if b is None else b.detach().double().cpu(),
        stride,
        padding,
        dilation,
        groups,
    )


def rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    y = y.detach().double().cpu()
    if not torch.isfinite(y).all():
        return float("inf")  # NaN from a poisoned, unwritten element, or a real overflow
    den = ref.norm().item()
    num = (y - ref).norm().item()
    return num / den if den > 0 else num


def assert_close(y: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, what: str = "") -> None:
    assert tuple(y.shape) == tuple(ref.shape), f"{what}: shape {tuple(y.shape)} != {tuple(ref.shape)}"
    assert y.dtype == dtype, f"{what}: dtype {y.dtype} != {dtype}"
    err = rel_err(y, ref)
    tol = THRESHOLDS[mode(dtype)]
    assert err <= tol, f"{what}: relative error {err:.3e} > {tol:.0e} ({mode(dtype)})"


def conv_inputs(n, c, h, w, k, r, s, dtype, device, bias=True, channels_last=True):
    """Random ``x [N, C, H, W]`` (channels_last or NCHW), a weight ``[K, C, R, S]`` scaled by
    1/sqrt(fan-in) so outputs stay near unit size in every dtype, and a bias (or None)."""
    x = torch.randn(n, c, h, w, device=device).to(dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    wt = (torch.randn(k, c, r, s, device=device) / (c * r * s) ** 0.5).to(dtype)
    b = torch.randn(k, device=device).to(dtype) if bias else None
    return x, wt, b
