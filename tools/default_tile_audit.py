#!/usr/bin/env python3
"""Compile every forward algorithm's *default* config for sm_90 on a set of layer kinds and
dtypes, without a GPU, and flag the ones a launch would refuse or that spill.

    PYTHONPATH=src python3 tools/default_tile_audit.py [--dtypes bf16 fp32 ieee] [--shapes 0 3]

The tuner drops a candidate that fails, but the untuned paths take the default config as it is
(``CONVGEMM_AUTOTUNE=0``, and the algorithms the tuner never sees). Session 34 found two such
defaults over the SM's shared memory (227 KB) only by compiling them: the strided TMA dgrad's
and ``convgemm.matmul``'s fp32 tiles. This walks the forward algorithms the same way (the
launches captured as ``tools/compile_call.py`` does) and prints one line per compiled kernel:
shared memory, registers, spill instructions, and ``OVER`` where the shared memory exceeds
227 KB. An algorithm that refuses the problem on the CPU, or fails to build its launch, is
listed as skipped with the reason.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

os.environ.pop("TRITON_INTERPRET", None)

#: (name, N, C, H, W, K, R, S, stride, pad, groups)
SHAPES = [
    ("dense 3x3", 8, 256, 28, 28, 256, 3, 3, 1, 1, 1),
    ("1x1", 8, 1024, 14, 14, 256, 1, 1, 1, 0, 1),
    ("strided 3x3", 8, 256, 28, 28, 256, 3, 3, 2, 1, 1),
    ("RGB stem", 8, 3, 224, 224, 64, 7, 7, 2, 3, 1),
    ("grouped g32", 8, 256, 28, 28, 256, 3, 3, 1, 1, 32),
    ("depthwise", 8, 144, 56, 56, 144, 3, 3, 1, 1, 144),
    ("narrow 64->16", 1, 64, 96, 96, 16, 3, 3, 1, 1, 1),
    ("head 16->1", 8, 16, 64, 64, 1, 1, 1, 1, 0, 1),
]
SMEM_LIMIT = 232_448  # 227 KB: the most shared memory one block may have on sm_90


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtypes", nargs="*", default=["bf16", "fp32", "ieee"],
                    help="bf16, fp16, fp32 (TF32 on) or ieee (TF32 off: strict fp32)")  # fmt: skip
    ap.add_argument("--shapes", nargs="*", type=int, help="indices into SHAPES (default: all)")
    a = ap.parse_args()

    import torch

    sys.path.insert(0, os.path.dirname(__file__))
    from compile_call import _compile
    from compile_gluon import compile_sm90

    from convgemm.conv import fprop, ws3d
    from convgemm.problem import ConvProblem

    captured = []
    fprop._run_kernel = lambda launch, fn, grid, args, cx, options: captured.append((fn, grid, args, cx(), options))
    ws3d.gluon_launch = lambda launch, fn, grid, args, kw: captured.append((fn, grid, args, kw, None))
    ws3d.sm_count = lambda *_, **__: 132
    bad = 0
    for dt in a.dtypes:
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "ieee": torch.float32}[dt]
        torch.backends.cudnn.allow_tf32 = dt != "ieee"
        for i in a.shapes if a.shapes is not None else range(len(SHAPES)):
            name, n, c, h, w, k, r, s, st, pad, g = SHAPES[i]
            x = torch.zeros(n, c, h, w, dtype=dtype).to(memory_format=torch.channels_last)
            wt = torch.zeros(k, c // g, r, s, dtype=dtype)
            prob = ConvProblem.from_tensors(x, wt, stride=st, padding=pad, groups=g)
            # the device's flags, as a Hopper GPU would set them for this dense input
            prob = dataclasses.replace(prob, tma_ok=True, input_tma_ok=True, input_dense=True, input_phases_ok=True)
            for algo in fprop.ALGORITHMS.values():
                if getattr(algo, "reads_nchw", False):
                    continue
                try:
                    reason = algo.supports(prob)
                except TypeError:
                    reason = algo.supports(prob, x)
                if reason and "TRITON_INTERPRET" not in reason and "Hopper" not in reason:
                    continue
                captured.clear()
                try:
                    cfg = algo.default_config(prob)
                    y = torch.zeros(n, k, prob.p, prob.q, dtype=dtype).to(memory_format=torch.channels_last)
                    packed = algo.pack_weight(prob, wt) if hasattr(algo, "pack_weight") else wt
                    algo.run(prob, x, packed, None, y, cfg)
                except Exception as e:  # noqa: BLE001 - report and go on
                    print(f"{dt:5s} {name:14s} {algo.name:22s} skipped: {type(e).__name__}: {str(e)[:90]}")
                    continue
                for fn, grid, args, consts, options in captured:
                    try:
                        if options is None:
                            r_ = compile_sm90(fn, args, consts, "/tmp/default_tile_audit")
                        else:
                            r_ = _compile(fn, grid, args, consts, options, "/tmp/default_tile_audit")
                    except Exception as e:  # noqa: BLE001
                        print(f"{dt:5s} {name:14s} {algo.name:22s} compile failed: {type(e).__name__}: {str(e)[:90]}")
                        bad += 1
                        continue
                    smem = int(r_.get("shared", 0))
                    spills = int(r_.get("LDL/STL", 0) or 0)
                    flag = " OVER" if smem > SMEM_LIMIT else ""
                    bad += bool(flag)
                    print(f"{dt:5s} {name:14s} {algo.name:22s} {cfg.describe():28s} {r_.get('kernel', '?'):24s} "
                          f"smem {smem:7d} regs {r_.get('regs')} spills {spills}{flag}", flush=True)  # fmt: skip
    print(f"{bad} kernel(s) over the shared-memory limit or failing to compile")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
