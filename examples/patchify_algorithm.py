#!/usr/bin/env python3
"""A new forward algorithm in about 60 lines: patch-embedding convolutions as a plain GEMM.

A "patchify" layer (ViT's 16x16 stride-16 patch embedding, ConvNeXt's 4x4 stride-4 stem) has
kernel size equal to its stride and no padding: every output pixel reads its own R x S patch,
and no patch is shared or cut by an edge. As a GEMM (M output pixels, N output channels,
K = R * S * C), each filter row of a patch is one contiguous run of S * C values in NHWC memory,
so the A loader below needs no per-tap bounds checks at all: only the last K tile's tail is
masked. Everything else comes from convgemm: the GEMM kernel (tile order, pipelined K loop, bias
and activation epilogue) and the library's weight loader and output store.

    python examples/patchify_algorithm.py          # a CUDA GPU, or TRITON_INTERPRET=1 on the CPU
    convgemm bench --plugin examples/patchify_algorithm.py --shape 64,3,224,224,96,4,4,4,0,1,1

``docs/extending.md`` explains each piece. ``tests/test_extend.py`` runs this file's algorithm
against float64 on the CPU.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import convgemm
from convgemm.extend import Algorithm, Config, ConvProblem, interpreting, launch_gemm, loaders, register_algorithm


@triton.jit
def patch_init(desc, args, pid_m, g, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """A's rows: output pixels m = (n, p, q); each row's patch starts at x[n, p*R, q*S, 0]."""
    (x_ptr, s_n, s_h, s_w, P, Q, M, R, S, C) = args
    m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    n = m // (P * Q)
    p = (m // Q) % P
    q = m % Q
    origin = n.to(tl.int64) * s_n + (p * R).to(tl.int64) * s_h + (q * S).to(tl.int64) * s_w
    return (x_ptr, origin, m < M, s_h, s_w, S, C, R * S * C)


@triton.jit
def patch_load(state, kt, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """K tile ``kt`` of A: columns k = (r, s, c) of the flattened patch; filter row r's S*C values
    sit one after another when the row's pixels are contiguous (s_w == C), as in NHWC."""
    (x_ptr, origin, row_ok, s_h, s_w, S, C, K) = state
    k = kt * BLOCK_K + tl.arange(0, BLOCK_K)
    r = k // (S * C)
    s = (k // C) % S
    c = k % C
    col = r.to(tl.int64) * s_h + s.to(tl.int64) * s_w + c
    return tl.load(x_ptr + origin[:, None] + col[None, :], mask=row_ok[:, None] & (k < K)[None, :], other=0.0)


class Patchify(Algorithm):
    """Kernel size == stride, no padding, dilation 1, groups 1 (any dtype, any K)."""

    name = "patchify"
    fuses_activation = True  # gemm_kernel's epilogue applies prob.activation
    writes_nchw = True  # gather_output_store takes y's strides

    def supports(self, prob: ConvProblem) -> str | None:
        if prob.stride != (prob.r, prob.s) or prob.pad_h != (0, 0) or prob.pad_w != (0, 0):
            return f"stride {prob.stride} with a {prob.r}x{prob.s} kernel and padding: patchify needs stride == kernel, no padding"
        if prob.dilation != (1, 1) or prob.groups != 1:
            return "patchify takes dilation 1 and groups 1"
        return None

    def configs(self, prob: ConvProblem) -> list[Config]:
        # (pixels, channels, K tile, warps, stages): wide pixel tiles; K tiles of 32 or 64
        return [
            Config(bm, bn, bk, w, 3) for bm, bn, w in ((128, 128, 8), (128, 64, 4), (64, 128, 4)) for bk in (32, 64)
        ]

    def default_config(self, prob: ConvProblem) -> Config:
        if interpreting():
            return Config(32, 32, 32, 4, 1)  # small tiles: the interpreter runs every lane in numpy
        return Config(128, 128 if prob.k > 64 else 64, 64, 8 if prob.k > 64 else 4, 3)

    def run(self, prob, x, w, bias, y, cfg, launch=None):
        # x [N, C, H, W] with channel stride 1 (convgemm hands every algorithm NHWC memory), y
        # [N, K, P, Q] with any strides, w [K, C, R, S] as the caller gave it
        m = prob.n * prob.p * prob.q
        a = (None, (x, x.stride(0), x.stride(2), x.stride(3), prob.p, prob.q, m, prob.r, prob.s, prob.c))
        # the library's flat weight loader reads w[K, C, R, S] in place in the same (r, s, c) order
        b = (None, (w, prob.k, prob.c, w.stride(0), w.stride(1), w.stride(2), w.stride(3), prob.r, prob.s))
        c = (None, (y, y.stride(0), y.stride(1), y.stride(2), y.stride(3), prob.p, prob.q, m, prob.k))
        fns = (patch_init, patch_load, loaders.gather_weight_init, loaders.gather_weight_flat_load,
               loaders.gather_output_store)  # fmt: skip
        k_tiles = triton.cdiv(prob.r * prob.s * prob.c, cfg.block_k)
        launch_gemm(prob, cfg, a=a, b=b, c=c, fns=fns, m=m, n=prob.k, k_tiles=k_tiles, y=y, bias=bias, launch=launch)


def main() -> int:
    register_algorithm(Patchify())
    device = "cuda" if torch.cuda.is_available() and not interpreting() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    x = torch.randn(2, 3, 64, 64, device=device, dtype=dtype).to(memory_format=torch.channels_last)
    w = torch.randn(96, 3, 4, 4, device=device, dtype=dtype) / 7
    b = torch.randn(96, device=device, dtype=dtype)
    y = convgemm.conv2d(x, w, b, stride=4, algorithm="patchify")
    ref = torch.nn.functional.conv2d(x.double(), w.double(), b.double(), stride=4)
    err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
    print(f"patchify 3->96 4x4 s4 on {device} ({dtype}): max error {err:.1e} relative to the largest output")
    print("explain(auto):", convgemm.explain(x, w, b, stride=4)["algorithm"])
    return 0 if err < 1e-2 else 1


if __name__ == "__main__":
    raise SystemExit(main())
elif __name__ == "convgemm_plugin":  # convgemm bench --plugin examples/patchify_algorithm.py ...
    register_algorithm(Patchify())
