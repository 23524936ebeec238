"""The convolution problem: shapes, validation, and its view as a matrix product.

`ConvProblem` is the one immutable description of a convolution that everything downstream reads:
the algorithms ask it whether they apply, the launchers read the GEMM view from it, and the tuner
uses `key()` as its cache key. All argument checking happens in `ConvProblem.from_tensors`, before
any kernel is compiled or launched, and every error says what was wrong and how to fix it.

Notation (PyTorch's): input ``x[N, C, H, W]``, weight ``w[K, C/groups, R, S]``, output
``y[N, K, P, Q]``. The kernels see the input as NHWC and the weight as KRSC.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import torch

from ._runtime import fp32_precision

IntOrPair = int | Sequence[int]
Padding = int | Sequence[int] | str

#: dtypes the kernels compute in. fp32 accumulation is used for all of them.
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

_DTYPE_NAMES = {
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float32: "fp32",
    torch.float64: "fp64",
}


def dtype_name(dtype: torch.dtype) -> str:
    """Short name of a supported dtype ('bf16', 'fp16', 'fp32', 'fp64')."""
    return _DTYPE_NAMES.get(dtype, str(dtype).replace("torch.", ""))


@dataclass(frozen=True)
class GemmShape:
    """A batched matrix product ``C[b] (M x N) = A[b] (M x K) @ B[b] (K x N)`` for b in [0, batch)."""

    m: int
    n: int
    k: int
    batch: int = 1

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k * self.batch


def _pair(value: IntOrPair, name: str) -> tuple[int, int]:
    if isinstance(value, bool):
        raise TypeError(f"conv2d: {name} must be an int or a pair of ints, got a bool ({value!r}); pass e.g. {name}=1")
    if isinstance(value, int):
        return (value, value)
    if isinstance(value, torch.Size) or isinstance(value, (tuple, list)):
        vals = tuple(value)
        if len(vals) == 1:
            vals = vals * 2
        if len(vals) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
            raise TypeError(f"conv2d: {name} must be an int or a pair of ints, got {value!r}; pass e.g. {name}=(1, 1)")
        return (vals[0], vals[1])
    raise TypeError(f"conv2d: {name} must be an int or a pair of ints, got {type(value).__name__} {value!r}")


def _suggest_channels_last(t: torch.Tensor) -> bool:
    """True when ATen's ``Tensor.suggest_memory_format()`` says channels_last for this 4-D tensor
    (c10's ``is_channels_last_strides_2d``: strides ordered C < W < H < N, each at least the
    span of the ones inside it; ambiguous N111 cases fall back to NCHW).

    Written out rather than taken from ``torch._prims_common.suggest_memory_format``: that one
    imports ``torch.fx.experimental.symbolic_shapes``, and with it sympy, on first use, which
    was 3.0 of the 10.8 s of a process's first convolution on the H200 host (session 27,
    ``tools/first_call.py``). ``tests/test_problem.py`` checks the two agree."""
    if t.layout != torch.strided or t.dim() != 4:
        return False
    shape, strides = t.shape, t.stride()
    if strides[1] == 0:
        return False
    lo = 0
    for d in (1, 3, 2, 0):
        if shape[d] == 0 or strides[d] < lo:
            return False
        if d == 0 and lo == strides[1]:
            return False
        lo = strides[d] * shape[d]
    return True


def output_memory_format(x: torch.Tensor, w: torch.Tensor) -> torch.memory_format:
    """The memory format PyTorch's CUDA convolution gives its output.

    cuDNN's rule (ATen ``cudnn_conv_suggest_memory_format``): channels_last when the input *or* the
    weight suggests channels_last, contiguous (NCHW) otherwise; float64 is always NCHW.
    """
    if x.dtype == torch.float64:
        return torch.contiguous_format
    if _suggest_channels_last(x) or _suggest_channels_last(w):
        return torch.channels_last
    return torch.contiguous_format


@dataclass(frozen=True)
class ConvProblem:
    """A 2-D convolution, fully described, and its GEMM view.

    Fields are PyTorch's names: ``n, c, h, w`` the input, ``k, r, s`` the output channels and the
    filter size, ``pad_h``/``pad_w`` the (top, bottom) and (left, right) zero padding (asymmetric
    only for ``padding='same'`` with an even effective kernel), ``groups``; ``channels_last_out``
    whether the output is channels_last; ``precision`` the dot precision: ``'tf32x3'`` (strict fp32's default) or ``'ieee'`` or
    ``'tf32'`` (fp32 inputs on tensor cores); ignored for fp16/bf16. ``tma_ok``,
    ``input_tma_ok`` and ``input_dense`` describe the device and the prepared NHWC input.
    """

    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    stride: tuple[int, int] = (1, 1)
    pad_h: tuple[int, int] = (0, 0)
    pad_w: tuple[int, int] = (0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    dtype: torch.dtype = torch.float32
    has_bias: bool = False
    channels_last_out: bool = True
    precision: str = "ieee"
    # the activation fused after the bias ("" or one of matmul.blocks.ACTIVATIONS); not in
    # key(): the epilogue does not change which kernel is fastest
    activation: str = ""
    # Facts about where and how the data lives, set by the caller that prepared the tensors
    # (``convgemm.functional``); they decide which algorithms apply, so they are part of the key.
    tma_ok: bool = False  # the device has TMA (Hopper or newer, or Triton's interpreter)
    # the NHWC input can be read through a TMA descriptor; for an NCHW input kept as it is
    # (input_nchw): the NCHW view [N, C, H, W] (or [N, C, 1, H*W] for 1x1 stride-1 layers) can
    input_tma_ok: bool = False
    # its base and strides suit a TMA descriptor whatever the group width (grouped_tma reads
    # several groups as one; input_tma_ok adds C/groups * itemsize % 16 == 0)
    input_tma_rows_ok: bool = False
    # the NHWC input's (n, h, w) rows are evenly strided; for an NCHW input kept as it is
    # (input_nchw): its planes are dense (each plane's pixels back to back)
    input_dense: bool = False
    # a strided input reshapes to the stride-phase view [N, H/sh, sh, W/sw, sw*C] (H and W
    # multiples of the stride, each pixel's C channels right after the previous pixel's)
    input_phases_ok: bool = False
    # the input given to the kernels is the caller's dense NCHW tensor, not an NHWC copy: only
    # algorithms that read NCHW (``Algorithm.reads_nchw``) take it; set by ``functional._prepare``
    # where one of them supports the call and wants it (``Algorithm.keeps_nchw``)
    input_nchw: bool = False
    # the output is written into a view that is not a dense NHWC tensor (``conv2d_forward``'s
    # ``out``: one stride phase of strided dgrad's dx); kernels that need dense output pixels
    # (``implicit_gemm_ws``'s flat view) then go through a temporary, so it is part of the key
    output_strided: bool = False

    # ---------------------------------------------------------------- derived sizes
    # (cached: read on every call's path; a frozen dataclass keeps them valid)
    @cached_property
    def cg(self) -> int:
        """Input channels per group."""
        return self.c // self.groups

    @cached_property
    def kg(self) -> int:
        """Output channels per group."""
        return self.k // self.groups

    @cached_property
    def p(self) -> int:
        """Output height."""
        eff = self.dilation[0] * (self.r - 1) + 1
        return (self.h + sum(self.pad_h) - eff) // self.stride[0] + 1

    @cached_property
    def q(self) -> int:
        """Output width."""
        eff = self.dilation[1] * (self.s - 1) + 1
        return (self.w + sum(self.pad_w) - eff) // self.stride[1] + 1

    @cached_property
    def output_shape(self) -> tuple[int, int, int, int]:
        return (self.n, self.k, self.p, self.q)

    @property
    def is_depthwise(self) -> bool:
        return self.groups > 1 and self.cg == 1

    @property
    def is_1x1(self) -> bool:
        return self.r == 1 and self.s == 1 and self.pad_h == (0, 0) and self.pad_w == (0, 0)

    # ---------------------------------------------------------------- the GEMM view
    def as_matmul_problem(self) -> GemmShape:
        """Forward convolution as a batched GEMM over groups.

        M = N·P·Q output pixels, N = K/groups output channels, K = R·S·C/groups reduction, one
        batch entry per group. A is im2col(x) (never materialised), B is the packed weight
        transposed.
        """
        return GemmShape(m=self.n * self.p * self.q, n=self.kg, k=self.r * self.s * self.cg, batch=self.groups)

    @property
    def flops(self) -> int:
        return self.as_matmul_problem().flops

    def min_bytes(self) -> int:
        """Fewest bytes a forward pass must move: input and weight read once, output written once."""
        e = torch.empty((), dtype=self.dtype).element_size()
        total = (
            self.n * self.c * self.h * self.w + self.k * self.cg * self.r * self.s + self.n * self.k * self.p * self.q
        )
        if self.has_bias:
            total += self.k
        return total * e

    # ---------------------------------------------------------------- tuning key
    def key(self) -> tuple:
        """Autotune cache key: exact layer parameters, batch and spatial sizes bucketed.

        N, H and W are rounded up to a power of two so that nearby sizes share a tuning result.
        """
        return (
            dtype_name(self.dtype),
            self.precision,
            "nhwc" if self.channels_last_out else "nchw",
            self.c,
            self.k,
            self.r,
            self.s,
            self.stride,
            self.pad_h,
            self.pad_w,
            self.dilation,
            self.groups,
            self.has_bias,
            self.tma_ok,
            self.input_tma_ok,
            self.input_tma_rows_ok,
            self.input_dense,
            self.input_phases_ok,
            self.input_nchw,
            _bucket(self.n),
            _bucket(self.h),
            _bucket(self.w),
        ) + (("strided_out",) if self.output_strided else ())

    def describe(self) -> str:
        return (
            f"N{self.n} C{self.c} {self.h}x{self.w} -> K{self.k} {self.r}x{self.s}"
            f" s{self.stride[0]}x{self.stride[1]} p{self.pad_h[0]}x{self.pad_w[0]}"
            f" d{self.dilation[0]}x{self.dilation[1]} g{self.groups} {dtype_name(self.dtype)}"
        )

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_tensors(
        cls,
        input: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None = None,
        stride: IntOrPair = 1,
        padding: Padding = 0,
        dilation: IntOrPair = 1,
        groups: int = 1,
    ) -> ConvProblem:
        """Validate ``torch.nn.functional.conv2d`` arguments and describe the problem.

        ``input`` must be 4-D ``[N, C, H, W]`` (callers unsqueeze unbatched 3-D input first).
        Raises ``TypeError`` or ``ValueError`` naming the argument and the fix.
        """
        for name, t in (("input", input), ("weight", weight)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"conv2d: {name} must be a torch.Tensor, got {type(t).__name__}")
        if bias is not None and not isinstance(bias, torch.Tensor):
            raise TypeError(f"conv2d: bias must be a torch.Tensor or None, got {type(bias).__name__}")
        if input.dim() != 4:
            raise ValueError(
                f"conv2d: input must be 4-D [N, C, H, W] (or 3-D [C, H, W] unbatched), got shape {tuple(input.shape)}"
            )
        if weight.dim() != 4:
            raise ValueError(f"conv2d: weight must be 4-D [K, C/groups, R, S], got shape {tuple(weight.shape)}")

        for name, t in (("input", input), ("weight", weight), ("bias", bias)):
            if t is None:
                continue
            if t.dtype not in SUPPORTED_DTYPES:
                raise TypeError(
                    f"conv2d: {name} has dtype {t.dtype}; convgemm computes in float16, bfloat16, float32 "
                    f"or float64: convert it first, e.g. {name}.float()"
                )
        if weight.dtype != input.dtype or (bias is not None and bias.dtype != input.dtype):
            got = f"input {input.dtype}, weight {weight.dtype}" + (f", bias {bias.dtype}" if bias is not None else "")
            raise TypeError(
                f"conv2d: input, weight and bias must share one dtype, got {got}; cast them, e.g. weight.to(input.dtype)"
            )
        if weight.device != input.device or (bias is not None and bias.device != input.device):
            got = f"input on {input.device}, weight on {weight.device}" + (
                f", bias on {bias.device}" if bias is not None else ""
            )
            raise ValueError(f"conv2d: all tensors must be on one device, got {got}; move them with .to(input.device)")

        if isinstance(groups, bool) or not isinstance(groups, int):
            raise TypeError(f"conv2d: groups must be an int, got {groups!r}")
        if groups < 1:
            raise ValueError(f"conv2d: groups must be >= 1, got {groups}")
        n, c, h, w = (int(v) for v in input.shape)
        k, cg, r, s = (int(v) for v in weight.shape)
        if k % groups != 0:
            raise ValueError(
                f"conv2d: out_channels (weight.shape[0] = {k}) must be divisible by groups = {groups}; "
                f"use a weight with a multiple of {groups} filters or change groups"
            )
        if c != cg * groups:
            raise ValueError(
                f"conv2d: input has {c} channels but weight expects C/groups * groups = {cg} * {groups} = {cg * groups}; "
                f"weight.shape[1] must be in_channels / groups"
            )
        if bias is not None and (bias.dim() != 1 or bias.shape[0] != k):
            raise ValueError(
                f"conv2d: bias must have shape [{k}] (one value per output channel), got {tuple(bias.shape)}"
            )

        st = _pair(stride, "stride")
        dil = _pair(dilation, "dilation")
        if min(st) < 1:
            raise ValueError(f"conv2d: stride must be >= 1, got {st}")
        if min(dil) < 1:
            raise ValueError(f"conv2d: dilation must be >= 1, got {dil}")
        if isinstance(padding, str):
            if padding == "valid":
                pad_h, pad_w = (0, 0), (0, 0)
            elif padding == "same":
                if st != (1, 1):
                    raise ValueError(
                        f"conv2d: padding='same' is not supported for strided convolutions (stride={st}), as in PyTorch; "
                        "give explicit padding instead"
                    )
                pad_h = _same(dil[0], r)
                pad_w = _same(dil[1], s)
            else:
                raise ValueError(f"conv2d: padding must be an int, a pair, 'same' or 'valid', got {padding!r}")
        else:
            ph, pw = _pair(padding, "padding")
            if ph < 0 or pw < 0:
                raise ValueError(
                    f"conv2d: padding must be >= 0, got {(ph, pw)}; crop the input instead of padding negatively"
                )
            pad_h, pad_w = (ph, ph), (pw, pw)

        precision = fp32_precision(torch.backends.cudnn.allow_tf32) if input.dtype == torch.float32 else "ieee"
        prob = cls(
            n=n,
            c=c,
            h=h,
            w=w,
            k=k,
            r=r,
            s=s,
            stride=st,
            pad_h=pad_h,
            pad_w=pad_w,
            dilation=dil,
            groups=groups,
            dtype=input.dtype,
            has_bias=bias is not None,
            channels_last_out=output_memory_format(input, weight) == torch.channels_last,
            precision=precision,
        )
        eff_r = dil[0] * (r - 1) + 1
        eff_s = dil[1] * (s - 1) + 1
        if prob.p < 1 or prob.q < 1:
            raise ValueError(
                f"conv2d: the output would be empty: input {h}x{w} with padding {pad_h}/{pad_w} is smaller than the "
                f"dilated kernel {eff_r}x{eff_s} (output {prob.p}x{prob.q}); use a larger input or more padding"
            )
        # pixel indices (n, h, w flattened) are 32-bit in the kernels; element offsets are 64-bit
        if max(n * h * w, n * prob.p * prob.q) >= 2**31:
            raise ValueError(
                f"conv2d: {max(n * h * w, n * prob.p * prob.q)} pixels (batch x height x width) reach 2**31, "
                "past what convgemm indexes; split the batch into smaller calls"
            )
        return prob


def _same(dil: int, size: int) -> tuple[int, int]:
    total = dil * (size - 1)
    left = total // 2
    return (left, total - left)


def _bucket(v: int) -> int:
    return 1 if v <= 1 else 1 << math.ceil(math.log2(v))
