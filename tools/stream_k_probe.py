#!/usr/bin/env python3
"""Where does the stream-K kernel lose? Times forced ``conv3d_tma`` configs on one GPU.

    PYTHONPATH=src python3 tools/stream_k_probe.py

Session 19's tuner logs had ``stream_k_gemm_kernel`` 13-45% slower than the plain one-tile-per-
program kernel on the same tile shape with the same work per SM. This separates the causes:

1. a problem whose tiles are twice the SM count (264 tiles of 128 channels x 64 pixels): stream-K
   with one program per SM gives every program two whole tiles and no partial at all, so it
   differs from the persistent kernel (two tiles per program) only in its loop structure (a
   ``while`` over segments, each with its own pipelined K loop); with two programs per SM, each
   has one whole tile, as in the plain kernel;
2. r3d-18's 256-channel layer on 4x14x14, plain vs its stream-K forms (partial tiles), and two
   variants of the stream-K kernel built here (wrong results, timing only): "no reduce" (a
   partial tile is stored as if it were whole: the K loops and epilogues alone) and "store only"
   (each partial is also written to the workspace, with no ticket and no sum).

Each row: median GPU time with the L2 flushed before each run (the tuner's timer), and the error
against the plain kernel's output.
"""

from __future__ import annotations

import dataclasses
import sys

import torch

_VARIANTS = {
    "no reduce": """
@triton.jit
def _reduce(acc, ws_ptr, lock_ptr, tile, k_tiles, pid, is_first, programs, total, BLOCK_M: tl.constexpr,
            BLOCK_N: tl.constexpr):
    return acc, True
""",
    "store only": """
@triton.jit
def _reduce(acc, ws_ptr, lock_ptr, tile, k_tiles, pid, is_first, programs, total, BLOCK_M: tl.constexpr,
            BLOCK_N: tl.constexpr):
    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    slot = 2 * pid + tl.where(is_first, 0, 1)
    tl.store(ws_ptr + slot.to(tl.int64) * (BLOCK_M * BLOCK_N) + offs, acc)
    return acc, True
""",
}


def _variant(name: str):
    """``stream_k_gemm_kernel`` with its ``stream_k_reduce`` replaced (a module written to a
    temporary file: Triton reads a kernel's source from its file)."""
    import importlib.util
    import inspect
    import tempfile

    from convgemm.matmul import blocks

    src = inspect.getsource(blocks.stream_k_gemm_kernel.fn).replace("stream_k_reduce(", "_reduce(")
    src = src.replace("def stream_k_gemm_kernel(", "def variant_kernel(").replace("@triton.jit\n", "")
    text = ("import triton\nimport triton.language as tl\nfrom convgemm.matmul.blocks import *\n"
            "from convgemm.matmul.blocks import activation_epilogue, bias_epilogue, k_loop, tile_grid\n"
            + _VARIANTS[name] + "\n\n@triton.jit\n" + src)  # fmt: skip
    path = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
    path.write(text)
    path.close()
    spec = importlib.util.spec_from_file_location(f"sk_variant_{len(name)}", path.name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.variant_kernel


def main() -> int:
    from convgemm._runtime import gpu_times, l2_flush, sm_count
    from convgemm.conv import conv3d as k3
    from convgemm.conv.fprop import Config
    from convgemm.problem3d import ConvProblem3d

    if not torch.cuda.is_available():
        print("stream_k_probe: needs a CUDA GPU")
        return 1
    sms = sm_count()
    dev = torch.device("cuda")
    flush = l2_flush(dev)

    def problem(n, c, d, h, w, k):
        x = torch.randn(n, c, d, h, w, device=dev).to(torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)
        wt = torch.randn(k, c, 3, 3, 3, device=dev).to(torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)
        prob = ConvProblem3d.from_tensors(x, wt, None, padding=1)
        prob = dataclasses.replace(prob, **{**k3.input_flags(x, prob.stride), "tma_input_ok": True})
        return prob, x, wt

    def run(prob, x, wt, cfg):
        y = torch.empty(prob.output_shape, device=dev, dtype=torch.bfloat16).contiguous(
            memory_format=torch.channels_last_3d
        )
        k3.TMA3D.run(prob, x, wt, None, y, cfg)  # compile and warm
        t = gpu_times(lambda: k3.TMA3D.run(prob, x, wt, None, y, cfg), 20.0, 10, 200, before=flush)
        return sorted(t)[len(t) // 2] * 1e3, y

    rows = []
    # 1-2: 33 images of 4x8x16 output pixels, 128 channels: 264 tiles of 128 channels x 64 pixels
    # (t4x1x16), 108 K tiles each
    prob, x, wt = problem(33, 256, 4, 8, 16, 128)
    base = Config(128, 64, 64, 4, 4, tile_n=4, tile_h=1, tile_w=16)
    forms = [("plain", base), ("persistent p1", dataclasses.replace(base, persistent=1)),
             ("persistent p2", dataclasses.replace(base, persistent=2))]  # fmt: skip
    for programs in (sms, 2 * sms):
        forms.append((f"stream-K {programs} programs", dataclasses.replace(base, stream_k=programs // sms)))
    for label, cfg in forms:
        rows.append(("264 tiles", label, cfg, prob, x, wt))
    # 3: r3d-18 layer 3
    prob3, x3, w3 = problem(8, 256, 4, 14, 14, 256)
    for cfg in [Config(128, 64, 64, 4, 4, tile_n=2, tile_h=2, tile_w=16)] + k3.TMA3D.stream_k_candidates(prob3, sms):
        rows.append(("r3d18 l3", cfg.describe(), cfg, prob3, x3, w3))
    from convgemm.conv import fprop

    real = fprop.stream_k_gemm_kernel
    for vname in _VARIANTS:
        for cfg in k3.TMA3D.stream_k_candidates(prob3, sms)[1:3]:
            rows.append(("r3d18 l3", f"{cfg.describe()} {vname}", cfg, prob3, x3, w3, _variant(vname)))
    ref = {}
    print(f"{'problem':<10} {'form':<36} {'us':>8} {'rel err':>9}")
    for name, label, cfg, p, xx, ww, *kernel in rows:
        fprop.stream_k_gemm_kernel = kernel[0] if kernel else real
        us, y = run(p, xx, ww, cfg)
        if name not in ref:
            ref[name] = y.float()
        err = ((y.float() - ref[name]).norm() / ref[name].norm()).item()
        print(f"{name:<10} {label:<36} {us:8.1f} {err:9.2e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
