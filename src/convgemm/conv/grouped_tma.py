"""Narrow groups on the TMA kernel: ``GT`` groups of a grouped convolution as one wider group.

ResNeXt's 3x3 layers have 4-32 input and output channels per group. A group's own GEMM is far
narrower than a tensor-core tile, and 4 channels (8 bytes in 16-bit types) are under the copy
engine's 16-byte minimum, so ``implicit_gemm_tma`` cannot read them at all. Taking ``GT`` neighbouring
groups as one super-group of ``GT*C/g`` input and ``GT*K/g`` output channels, with the weight
expanded block-diagonally (zeros between groups, ``blockdiag_weight``), turns the layer into a
grouped convolution with ``groups / GT`` wide groups, which the TMA kernel runs unchanged: the
input is read in place, every tile is a full TMA box, and the tensor cores multiply ``GT`` times
more (mostly zero) products: on ResNeXt's 128-channel layer with 16 groups as one, 30 GFLOP
instead of 1.9, which at the dense layers' rate would take under half the time the
pointer-gather ``grouped`` kernel took there (an estimate, benchmarks/NOTES.md session 11, not
yet timed); the tuner also offers the half as wide merge.

Exact NaN / Inf: a non-finite input times another group's zero weight is NaN, which the
super-group's product adds to every group of the tile. As in ``grouped`` (``loaders.py``), any
non-finite input makes the tile's sum non-finite, so a finite tile is exact: the store lists the
tiles that are not (``tma_output_store_listed``), and a second launch (``grouped_tma_fixup_kernel``)
recomputes those directly, each output channel from its own group's inputs only. With no
non-finite value the second launch reads one integer per program.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

from ..matmul.blocks import activation_epilogue
from .loaders import _spatial_tile, fix_list_append_if_nonfinite, fix_list_release, tma_output_store


def blockdiag_weight(w: torch.Tensor, gt: int, groups: int) -> torch.Tensor:
    """``w [K, C/g, R, S]`` -> ``[K, GT*C/g, R, S]`` (channels_last): output channel k of
    super-group ``k // (GT*K/g)`` sees its own group's ``C/g`` channels at offset
    ``(k // (K/g)) % GT * C/g`` and zeros elsewhere."""
    k, cg, r, s = w.shape
    kg = k // groups
    out = w.new_zeros((k, gt * cg, r, s))
    slot = (torch.arange(k, device=w.device) // kg) % gt
    idx = (slot * cg)[:, None] + torch.arange(cg, device=w.device)[None, :]  # [K, cg] target channels
    out.scatter_(1, idx[:, :, None, None].expand(k, cg, r, s), w)
    return out.contiguous(memory_format=torch.channels_last)


@triton.jit
def tma_output_store_listed(y_desc, args, acc, pid_m, pid_n, g, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """``loaders.tma_output_store``, and a tile holding a NaN or Inf is appended to the fix-up
    list. ``args``: ``(P, Q, fix_ptr, num_pid_m, num_pid_n)``; ``fix_ptr`` is int32 ``[count,
    tickets, tile ids ...]``, count and tickets zero when the launch starts. The tile id is
    ``(g * num_pid_m + pid_m) * num_pid_n + pid_n``."""
    (P, Q, fix_ptr, num_pid_m, num_pid_n) = args
    tma_output_store(y_desc, (P, Q), acc, pid_m, pid_n, g, BLOCK_M, BLOCK_N)
    # after the ReLU too: it keeps NaN, and a wrongly mixed group is always NaN
    fix_list_append_if_nonfinite(acc, fix_ptr, (g * num_pid_m + pid_m) * num_pid_n + pid_n)


@triton.jit(do_not_specialize=["BLOCK_M", "TILE_N", "TILE_H", "TILE_W"])
def grouped_tma_fixup_kernel(
    x_ptr,
    w_ptr,  # the original weight [K, C/g, R, S], any strides
    b_ptr,
    y_ptr,  # the NHWC output the main launch stored to (channel stride 1)
    fix_ptr,  # int32 [count, tickets, tile ids ...] as tma_output_store_listed left it
    num_pid_m,
    num_pid_n,
    H,
    W,
    P,
    Q,
    N,
    Cg,
    Kg,
    KS,  # output channels per super-group (GT * Kg)
    s_xn,
    s_xh,
    s_xw,
    s_wk,
    s_wc,
    s_wr,
    s_ws,
    s_yn,
    s_yp,
    s_yq,
    stride_h,
    stride_w,
    pad_h,
    pad_w,
    dil_h,
    dil_w,
    R,
    S,
    BLOCK_M,  # the main launch's tile: output channels
    TILE_N,  # and its TILE_N x TILE_H x TILE_W block of output pixels
    TILE_H,
    TILE_W,
    PB: tl.constexpr,  # pixels and channels recomputed at a time
    KB: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    ACT: tl.constexpr,
    ACC_F64: tl.constexpr,
    PDL: tl.constexpr = False,  # launched as a programmatic dependent of the main launch
):
    """Recompute and overwrite the listed tiles: each output directly (CUDA cores, fp32 or fp64)
    from its own group's inputs, plus bias and the activation. Grid: (programs,), any count;
    they share the list and release it (``loaders.fix_list_release``). Speed does not matter
    here: only tiles holding a non-finite value come this way; but the launch itself is paid on
    every call, so with ``PDL`` (``fprop.pdl_enabled``) it is a programmatic dependent launch that
    starts while the main launch's last tiles run and waits for them (``gdc_wait``).

    The main launch's tile sides are run-time values (not specialised) and the taps and the
    group's input channels one flat loop: each tuner candidate's launch then reuses one compiled
    fix-up kernel, and Triton's frontend, which holds the GIL while the tuner compiles its
    candidates in parallel and visits a loop's body again for each enclosing loop, has four
    levels of loops to walk rather than six (0.77 s of each ResNeXt candidate's 1.4 s compile on
    the dev CPU, before)."""
    acc_t = tl.float64 if ACC_F64 else tl.float32
    if PDL:  # started before the main launch ended: its list and stores are complete after this
        gdc_wait()
    count = tl.load(fix_ptr)
    for i in range(tl.program_id(0), count, tl.num_programs(0)):
        tile = tl.load(fix_ptr + 2 + i)
        pid_n = tile % num_pid_n
        rest = tile // num_pid_n
        pid_m = rest % num_pid_m
        sg = rest // num_pid_m
        n0, oh0, ow0 = _spatial_tile(pid_n, P, Q, TILE_N, TILE_H, TILE_W)
        for p0 in range(0, TILE_N * TILE_H * TILE_W, PB):
            t = p0 + tl.arange(0, PB)
            n = n0 + t // (TILE_H * TILE_W)
            oh = oh0 + (t // TILE_W) % TILE_H
            ow = ow0 + t % TILE_W
            pix_ok = (n < N) & (oh < P) & (ow < Q)
            for k0 in range(0, BLOCK_M, KB):
                kl = pid_m * BLOCK_M + k0 + tl.arange(0, KB)  # channel within the super-group
                k_ok = kl < KS
                k = sg * KS + kl
                c_base = (k // Kg) * Cg  # the first input channel of each output channel's group
                acc = tl.zeros((PB, KB), dtype=acc_t)
                for j in range(R * S * Cg):  # tap (r, s), input channel c: the order of the loops it replaced
                    r = j // (S * Cg)
                    s = (j // Cg) % S
                    c = j % Cg
                    ih = oh * stride_h - pad_h + r * dil_h
                    iw = ow * stride_w - pad_w + s * dil_w
                    ok = pix_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
                    row = n.to(tl.int64) * s_xn + ih.to(tl.int64) * s_xh + iw.to(tl.int64) * s_xw
                    xv = tl.load(x_ptr + row[:, None] + (c_base + c)[None, :], mask=ok[:, None] & k_ok[None, :],
                                 other=0.0)  # fmt: skip
                    wv = tl.load(w_ptr + k * s_wk + c * s_wc + r * s_wr + s * s_ws, mask=k_ok, other=0.0)
                    acc += xv.to(acc_t) * wv.to(acc_t)[None, :]
                if HAS_BIAS:
                    acc += tl.load(b_ptr + k, mask=k_ok, other=0.0).to(acc_t)[None, :]
                acc = activation_epilogue(acc, ACT)
                out = n.to(tl.int64) * s_yn + oh.to(tl.int64) * s_yp + ow.to(tl.int64) * s_yq
                tl.store(y_ptr + out[:, None] + k[None, :], acc.to(y_ptr.dtype.element_ty),
                         mask=pix_ok[:, None] & k_ok[None, :])  # fmt: skip
    fix_list_release(fix_ptr)
