"""The 3-D convolution problem: ``ConvProblem``'s counterpart with a depth axis.

Input ``[N, C, D, H, W]``, weight ``[K, C/groups, T, R, S]``, output ``[N, K, OD, P, Q]``. The GEMM
view is the 2-D one with one more filter axis: M = N*OD*P*Q output pixels, N = K/groups output
channels, K = T*R*S*C/groups (per group).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._runtime import fp32_precision
from .problem import _bucket, dtype_name

Triple = tuple[int, int, int]

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _triple(value, name: str, op: str) -> Triple:
    if isinstance(value, bool):
        raise TypeError(f"{op}: {name} must be an int or a triple of ints, got a bool ({value!r})")
    if isinstance(value, int):
        return (value, value, value)
    if isinstance(value, (tuple, list, torch.Size)):
        vals = tuple(value)
        if len(vals) == 1:
            vals = vals * 3
        if len(vals) == 3 and all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
            return (vals[0], vals[1], vals[2])
    raise TypeError(f"{op}: {name} must be an int or a triple of ints, got {value!r}; pass e.g. {name}=(1, 1, 1)")


@dataclass(frozen=True)
class ConvProblem3d:
    n: int
    c: int
    d: int
    h: int
    w: int
    k: int
    t: int
    r: int
    s: int
    stride: Triple
    pad: Triple  # symmetric; 'same' with an even kernel pads one more at the end (pad_end)
    pad_end: Triple
    dilation: Triple
    groups: int
    dtype: torch.dtype
    precision: str = "ieee"
    #: the device has TMA and the NDHWC input view is 16-byte aligned (set by the caller that holds
    #: the input: ``conv3d.tma_input_ok``); part of the tuning key
    tma_input_ok: bool = False
    #: a strided layer's input is a dense NDHWC tensor whose height and width are multiples of the
    #: stride (the stride-phase TMA view of ``conv3d.Tma3d``; set with ``tma_input_ok``)
    input_phases_ok: bool = False
    #: the device has TMA (Hopper or newer, or the interpreter): ``conv3d.WidthUnfold3d`` writes
    #: its own aligned input, so only this matters to it
    tma_ok: bool = False

    @property
    def cg(self) -> int:
        return self.c // self.groups

    @property
    def kg(self) -> int:
        return self.k // self.groups

    def _out(self, size: int, k: int, i: int) -> int:
        return (size + self.pad[i] + self.pad_end[i] - self.dilation[i] * (k - 1) - 1) // self.stride[i] + 1

    @property
    def od(self) -> int:
        return self._out(self.d, self.t, 0)

    @property
    def p(self) -> int:
        return self._out(self.h, self.r, 1)

    @property
    def q(self) -> int:
        return self._out(self.w, self.s, 2)

    def key(self) -> tuple:
        """Autotune cache key: exact layer parameters and spatial sizes (the pixel tiles of the TMA
        kernel depend on them), batch bucketed to a power of two; tagged apart from 2-D keys."""
        return (
            "conv3d",
            dtype_name(self.dtype),
            self.precision,
            self.c,
            self.k,
            (self.t, self.r, self.s),
            self.stride,
            self.pad,
            self.pad_end,
            self.dilation,
            self.groups,
            self.tma_input_ok,
            self.input_phases_ok,
            self.tma_ok,
            _bucket(self.n),
            (self.d, self.h, self.w),
        )

    def describe(self) -> str:
        return (
            f"N{self.n} C{self.c} {self.d}x{self.h}x{self.w} -> K{self.k} {self.t}x{self.r}x{self.s}"
            f" s{'x'.join(map(str, self.stride))} p{'x'.join(map(str, self.pad))}"
            f" d{'x'.join(map(str, self.dilation))} g{self.groups} {dtype_name(self.dtype)}"
        )

    @property
    def output_shape(self) -> tuple[int, int, int, int, int]:
        return (self.n, self.k, self.od, self.p, self.q)

    @classmethod
    def from_tensors(cls, input, weight, bias, stride=1, padding=0, dilation=1, groups=1, op="conv3d",
                     pad_end=None):  # fmt: skip
        """Validate a ``conv3d`` call (``torch.nn.functional.conv3d`` semantics) and describe it."""
        for name, t in (("input", input), ("weight", weight)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if input.dim() != 5:
            raise ValueError(f"{op}: input must be 5-D [N, C, D, H, W] (or 4-D unbatched), got {tuple(input.shape)}")
        if weight.dim() != 5:
            raise ValueError(f"{op}: weight must be 5-D [K, C/groups, T, R, S], got {tuple(weight.shape)}")
        for name, t in (("input", input), ("weight", weight), ("bias", bias)):
            if t is not None and t.dtype not in _FLOATS:
                raise TypeError(f"{op}: {name} has dtype {t.dtype}; convgemm takes float16, bfloat16, float32, float64")
        if weight.dtype != input.dtype or weight.device != input.device:
            raise TypeError(
                f"{op}: input is {input.dtype} on {input.device} but weight is {weight.dtype} on {weight.device}; "
                "convert one with .to(...)"
            )
        if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
            raise ValueError(f"{op}: groups must be an int >= 1, got {groups!r}")
        n, c, d, h, w = input.shape
        k, cg, t, r, s = weight.shape
        if c % groups or k % groups:
            raise ValueError(
                f"{op}: groups = {groups} must divide the input's {c} channels and the weight's {k} filters"
            )
        if cg * groups != c:
            raise ValueError(
                f"{op}: weight.shape[1] = {cg} must be C/groups = {c}/{groups} = {c // groups}; check the weight's layout"
            )
        if bias is not None:
            if not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (k,):
                shape = tuple(bias.shape) if isinstance(bias, torch.Tensor) else type(bias).__name__
                raise ValueError(f"{op}: bias must have shape [{k}] (one per filter), got {shape}")
            if bias.dtype != input.dtype or bias.device != input.device:
                raise TypeError(f"{op}: bias is {bias.dtype} on {bias.device}; it must match the input")
        st, dil = _triple(stride, "stride", op), _triple(dilation, "dilation", op)
        if min(st) < 1:
            raise ValueError(f"{op}: stride must be >= 1, got {st}")
        if min(dil) < 1:
            raise ValueError(f"{op}: dilation must be >= 1, got {dil}")
        ks = (t, r, s)
        if isinstance(padding, str):
            if padding == "valid":
                pad, pad_end = (0, 0, 0), (0, 0, 0)
            elif padding == "same":
                if st != (1, 1, 1):
                    raise ValueError(f"{op}: padding='same' is not supported for strided convolutions (stride={st})")
                total = [dil[i] * (ks[i] - 1) for i in range(3)]
                pad = tuple(v // 2 for v in total)
                pad_end = tuple(v - v // 2 for v in total)
            else:
                raise ValueError(f"{op}: padding must be an int, a triple, 'same' or 'valid', got {padding!r}")
        else:
            pad = _triple(padding, "padding", op)
            # pad_end (internal, e.g. a strided dgrad's phase): the padding after each axis, when
            # it differs from the padding before
            pad_end = pad if pad_end is None else _triple(pad_end, "padding", op)
            if min(pad) < 0 or min(pad_end) < 0:
                raise ValueError(f"{op}: padding must be >= 0, got {pad}")
        precision = fp32_precision(torch.backends.cudnn.allow_tf32) if input.dtype == torch.float32 else "ieee"
        prob = cls(n, c, d, h, w, k, t, r, s, st, pad, pad_end, dil, groups, input.dtype, precision)
        if min(prob.od, prob.p, prob.q) < 1:
            raise ValueError(
                f"{op}: the output would be empty ({prob.od}x{prob.p}x{prob.q}): the input {d}x{h}x{w} with padding "
                f"{pad} is smaller than the dilated kernel; use a larger input or more padding"
            )
        if max(n * d * h * w, n * prob.od * prob.p * prob.q) >= 2**31:
            raise ValueError(f"{op}: 2**31 or more pixels (N x D x H x W); split the batch into smaller calls")
        return prob
