"""``convgemm.matmul.matmul``: a plain GEMM built from the same blocks as the convolutions."""

from __future__ import annotations

import torch
import triton
from triton.tools.tensor_descriptor import TensorDescriptor

from .._runtime import cdiv, check_device, dense_bias, fp32_precision, has_tma, interpreting
from . import loaders
from .blocks import gemm_kernel


def _desc_ok(t: torch.Tensor) -> bool:
    e = t.element_size()
    return t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and (t.stride(0) * e) % 16 == 0


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    block: tuple[int, int, int] | None = None,
    num_warps: int = 4,
    num_stages: int = 3,
    use_tma: bool | None = None,
    split_k: int = 1,
) -> torch.Tensor:
    """``a @ b (+ bias)`` for 2-D ``a [M, K]``, ``b [K, N]``, ``bias [N]``; fp16, bf16, fp32 or fp64.

    Any strides. Accumulates in fp32 (fp64 for fp64); fp32 inputs use TF32 exactly when
    ``torch.backends.cuda.matmul.allow_tf32`` is True, else 3xTF32 (fp32-accurate) or, with
    ``CONVGEMM_FP32_PRECISION=ieee``, fp32 FMAs. Returns a new contiguous ``[M, N]`` tensor in
    the inputs' dtype. ``use_tma=None`` uses TMA descriptors when the operands allow them.
    ``split_k > 1`` divides the K tiles among that many programs per output tile (their fp32
    partials are summed in a fixed order by the last to finish: the result is deterministic).
    """
    if type(split_k) is not int or split_k < 1:
        raise ValueError(f"matmul: split_k must be an int >= 1, got {split_k!r}")
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"matmul: a and b must be 2-D, got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: inner sizes differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        raise TypeError(f"matmul: dtype {a.dtype} is not supported; use float16, bfloat16, float32 or float64")
    if a.dtype != b.dtype or (bias is not None and bias.dtype != a.dtype):
        raise TypeError("matmul: a, b and bias must share one dtype; cast them first")
    if b.device != a.device or (bias is not None and bias.device != a.device):
        raise ValueError("matmul: a, b and bias must be on one device; move them with .to(a.device)")
    if bias is not None and tuple(bias.shape) != (b.shape[1],):
        raise ValueError(f"matmul: bias must have shape [{b.shape[1]}], got {tuple(bias.shape)}")
    bias = dense_bias(bias)  # the kernel reads bias[j] at bias_ptr + j
    check_device(a, "matmul")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_() if bias is None else c.copy_(bias.expand(M, N))
    precision = fp32_precision(torch.backends.cuda.matmul.allow_tf32) if a.dtype == torch.float32 else "ieee"
    # fp32 tiles (sm_90 compiles, 3 stages, 4 warps): 128x128x64 asks 262 KB of shared memory
    # with TF32 (over the SM's 227) and 229 KB with 3xTF32, which also splits both operands in
    # registers beside a second accumulator and spills; 128x128x32 (TF32) and 64x128x32 (3xTF32)
    # fit without spilling
    if interpreting():
        default = (32, 32, 32)
    elif a.dtype == torch.float32:
        default = (64, 128, 32) if precision == "tf32x3" else (128, 128, 32)
    else:
        default = (128, 128, 64)
    BM, BN, BK = block or default
    bt = b.t()  # [N, K]: B rows are output columns, K contiguous when b is column-major
    tma_ok = has_tma(a) and _desc_ok(a) and _desc_ok(bt) and _desc_ok(c) and a.dtype != torch.float64
    if use_tma is None:
        use_tma = tma_ok
    elif use_tma and not tma_ok:
        raise ValueError(
            "matmul: use_tma=True needs a TMA-capable device, a and b.T with K contiguous (b column-major, "
            "e.g. b = bt.t() for a contiguous bt [N, K]), 16-byte aligned rows, and not float64; "
            "pass use_tma=None to choose automatically"
        )
    if use_tma:
        a_op = (TensorDescriptor(a, [M, K], [a.stride(0), 1], [BM, BK]), (0,))
        # a size-1 batch axis; its stride only has to be 16-byte aligned
        b_op = (TensorDescriptor(bt, [N, 1, K], [bt.stride(0), bt.stride(0), 1], [BN, 1, BK]), ())
        c_op = (TensorDescriptor(c, [M, N], [N, 1], [BM, BN]), ())
        a_fns = (loaders.desc2d_init, loaders.desc2d_a_load)
        b_fns = (loaders.desc_init, loaders.desc_b_load)
        store = loaders.desc2d_store
    else:
        a_op = (None, (a, a.stride(0), 0, a.stride(1), M, K))
        b_op = (None, (bt, bt.stride(0), 0, bt.stride(1), N, K))
        c_op = (None, (c, N, 0, 1, M, N))
        a_fns = (loaders.ptr_init, loaders.ptr_a_load)
        b_fns = (loaders.ptr_init, loaders.ptr_b_load)
        store = loaders.ptr_store
    num_pid_m, num_pid_n = cdiv(M, BM), cdiv(N, BN)
    ws = locks = c
    if split_k > 1:
        acc_t = (
            torch.float64 if a.dtype == torch.float64 else torch.float32
        )  # partials keep the accumulator's precision
        ws = torch.empty(num_pid_m * num_pid_n * split_k * BM * BN, dtype=acc_t, device=a.device)
        locks = torch.zeros(num_pid_m * num_pid_n, dtype=torch.int32, device=a.device)
    gemm_kernel[(num_pid_m * num_pid_n, 1, split_k)](
        *a_op,
        *b_op,
        *c_op,
        bias if bias is not None else c,
        N,
        num_pid_m,
        num_pid_n,
        triton.cdiv(K, BK),
        ws,
        locks,
        BLOCK_M=BM,
        BLOCK_N=BN,
        BLOCK_K=BK,
        GROUP_M=8,
        A_INIT=a_fns[0],
        A_LOAD=a_fns[1],
        B_INIT=b_fns[0],
        B_LOAD=b_fns[1],
        C_STORE=store,
        HAS_BIAS=bias is not None,
        BIAS_ALONG_M=False,
        PRECISION=precision,
        UPCAST=interpreting() and a.dtype == torch.bfloat16,
        F64=a.dtype == torch.float64,
        SPLIT_K=min(split_k, 2),  # a switch: the count is the grid's third axis
        ACT="",
        num_warps=num_warps,
        num_stages=num_stages,
    )
    return c
