"""Loaders and stores for plain (row-major, batched) matrices.

A is ``[M, K]`` and B is given transposed, ``[N, K]`` with K contiguous (the K-major operand
wgmma wants); batched operands carry the batch index as an extra axis. Two flavours:

* ``desc*``: Hopper TMA tensor descriptors; the copy engine zero-fills boxes that run past the
  edges, so loads need no masks, and clips stores.
* ``ptr_*``: plain pointers with strides and masks; any layout, any alignment.

See ``convgemm.matmul.blocks`` for the loader/store contract.
"""

from __future__ import annotations

import triton
import triton.language as tl


# ---------------------------------------------------------------- TMA descriptors
@triton.jit
def desc2d_init(desc, args, pid, batch, BLOCK: tl.constexpr, BLOCK_K: tl.constexpr):
    """A from a 2-D descriptor ``[batch * rows_per_batch, K]``, block ``[BLOCK, BLOCK_K]``.

    Rows past this batch entry's ``rows_per_batch`` belong to the next entry; they only feed
    output rows that the store clips.
    """
    rows_per_batch = args[0]
    return (desc, batch * rows_per_batch + pid * BLOCK)


@triton.jit
def desc2d_a_load(state, kt, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    # A plain 2-D box: wgmma reads it straight from shared memory.
    desc, row0 = state
    return desc.load([row0, kt * BLOCK_K])


@triton.jit
def desc_init(desc, args, pid, batch, BLOCK: tl.constexpr, BLOCK_K: tl.constexpr):
    """B from a 3-D descriptor ``[N, batch, K]`` (K contiguous), block ``[BLOCK, 1, BLOCK_K]``."""
    return (desc, pid * BLOCK, batch)


@triton.jit
def desc_b_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # The transposed view of a K-contiguous box is the K-major B operand wgmma reads from shared
    # memory (and the only one it accepts for tf32); reshape-then-transpose stays a view.
    desc, row0, batch = state
    return desc.load([row0, batch, kt * BLOCK_K]).reshape(BLOCK_N, BLOCK_K).T


@triton.jit
def desc2d_store(desc, args, acc, pid_m, pid_n, batch, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """C through a 2-D descriptor ``[M, N]``; the copy engine clips edge tiles."""
    desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(desc.dtype))


@triton.jit
def desc_store_t(desc, args, acc, pid_m, pid_n, batch, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """C transposed through a 3-D descriptor ``[N, batch, M]`` (for GEMMs computed as C^T)."""
    desc.store([pid_n * BLOCK_N, batch, pid_m * BLOCK_M], acc.to(desc.dtype).T.reshape(BLOCK_N, 1, BLOCK_M))


# ---------------------------------------------------------------- pointers
@triton.jit
def ptr_init(desc, args, pid, batch, BLOCK: tl.constexpr, BLOCK_K: tl.constexpr):
    ptr, stride_row, stride_batch, stride_k, rows, K = args
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    base = ptr + batch.to(tl.int64) * stride_batch
    return (base, offs.to(tl.int64) * stride_row, offs < rows, stride_k, K)


@triton.jit
def ptr_a_load(state, kt, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    base, row_off, row_mask, stride_k, K = state
    offs_k = kt * BLOCK_K + tl.arange(0, BLOCK_K)
    ptrs = base + row_off[:, None] + (offs_k * stride_k)[None, :]
    return tl.load(ptrs, mask=row_mask[:, None] & (offs_k < K)[None, :], other=0.0)


@triton.jit
def ptr_b_load(state, kt, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    base, row_off, row_mask, stride_k, K = state
    offs_k = kt * BLOCK_K + tl.arange(0, BLOCK_K)
    ptrs = base + row_off[None, :] + (offs_k * stride_k)[:, None]
    return tl.load(ptrs, mask=row_mask[None, :] & (offs_k < K)[:, None], other=0.0)


@triton.jit
def ptr_store(desc, args, acc, pid_m, pid_n, batch, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    ptr, stride_m, stride_batch, stride_n, M, N = args
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    base = ptr + batch.to(tl.int64) * stride_batch
    ptrs = base + (offs_m.to(tl.int64) * stride_m)[:, None] + (offs_n * stride_n)[None, :]
    tl.store(ptrs, acc.to(ptr.dtype.element_ty), mask=(offs_m < M)[:, None] & (offs_n < N)[None, :])
