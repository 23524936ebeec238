#!/usr/bin/env python3
"""The compile side of a first call, without a GPU: for each layer of a benchmark suite, every
(algorithm, config) pair the tuner would compile (``autotune.tuning_pairs`` over the supported
algorithms, the problem described as on a Hopper GPU), each kernel its ``run`` launches compiled
for sm_90 one after another, timed. Prints per layer the candidates, the longest single compile
(what a first call waits for when the compile workers outnumber the candidates) and the sum.

    PYTHONPATH=src python3 tools/compile_survey.py --suite grouped [--dtype bf16] [--json out.json]

Kernels are compiled into an empty Triton cache shared by the whole run, as ``convgemm bench``
tunes a suite in one process: a kernel an earlier layer compiled is a cache hit. Times are this
machine's (the H200's host took 2.4-2.7x the dev CPU's time per compile in session 37's
comparison); the tuner's timing runs and launches are not included.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

os.environ.pop("TRITON_INTERPRET", None)
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-survey-"))
sys.path.insert(0, os.path.dirname(__file__))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default="grouped")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    ap.add_argument("--only", default="", help="a substring of the layer names to keep")
    ap.add_argument("--json", default="")
    ap.add_argument("--each", action="store_true", help="print every candidate's compile time too")
    a = ap.parse_args()

    import torch
    from depthwise_gluon_check import _compile
    from triton.experimental.gluon._runtime import GluonJITFunction

    os.environ.pop("TRITON_ALWAYS_COMPILE", None)  # that tool's setting: here the cache is shared, as in a bench run

    import convgemm.functional as F
    from convgemm.bench.suites import suite
    from convgemm.conv import conv3d, fprop, ws3d, ws_wgrad
    from convgemm.tune import autotune as at

    # the problem and configs as on the H200: TMA present, 132 SMs
    F.has_tma = lambda *_: True
    F.check_device = lambda *_: None
    for mod in (fprop, conv3d, ws3d, ws_wgrad, at):
        if hasattr(mod, "sm_count"):
            mod.sm_count = lambda *_, **__: 132
    captured = []

    def capture(launch, fn, grid, args, constexprs, options):
        if isinstance(fn, GluonJITFunction):
            captured.append((fn, args, {**constexprs(), **options}, None))
        else:
            captured.append((fn, args, constexprs(), options))

    def capture_gluon(launch, fn, grid, args, kw):
        if isinstance(fn, GluonJITFunction):
            captured.append((fn, args, kw, None))
        else:
            opts = {k: kw[k] for k in ("num_warps", "num_stages") if k in kw}
            captured.append((fn, args, {k: v for k, v in kw.items() if k not in opts}, opts))

    fprop._run_kernel = capture
    ws3d.gluon_launch = ws_wgrad.gluon_launch = capture_gluon
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[a.dtype]
    rows = []
    for shp in suite(a.suite):
        if a.only and a.only not in shp.name:
            continue
        x = torch.zeros(shp.n, shp.c, shp.h, shp.w, dtype=dtype).to(memory_format=torch.channels_last)
        w = torch.zeros(shp.k, shp.c // shp.groups, shp.r, shp.s, dtype=dtype)
        prob, xp, y = F._prepare(x, w, None, shp.stride, shp.pad, shp.dil, shp.groups)
        cands = [fprop.ALGORITHMS[n] for n in at._HEURISTIC_ORDER if fprop.ALGORITHMS[n].supports(prob) is None]
        times, failed = [], 0
        for algo, cfg in at.tuning_pairs(prob, cands):
            captured.clear()
            try:
                algo.run(prob, xp, algo.pack_weight(prob, w) if hasattr(algo, "pack_weight") else w, None, y, cfg)
            except Exception:  # noqa: BLE001 - a candidate the tuner would drop
                failed += 1
                continue
            spent = 0.0
            for fn, args, kw, options in captured:
                try:
                    spent += _compile(fn, args, {**kw, **(options or {})})[1]
                except Exception as e:  # noqa: BLE001
                    failed += 1
                    print(f"  {algo.name} [{cfg.describe()}] {getattr(fn, '__name__', fn)}: {type(e).__name__}: {e}")
            times.append((spent, f"{algo.name} [{cfg.describe()}]"))
            if a.each:
                print(f"  {spent:5.2f} s  {times[-1][1]}", flush=True)
        longest = max(times, default=(0.0, ""))
        row = {"name": shp.name, "candidates": len(times), "failed": failed, "longest_s": round(longest[0], 3),
               "longest": longest[1], "sum_s": round(sum(t for t, _ in times), 3)}  # fmt: skip
        rows.append(row)
        print(f"{shp.name:44s} {row['candidates']:3d} candidates  longest {row['longest_s']:5.2f} s "
              f"({row['longest']})  sum {row['sum_s']:6.2f} s" + (f"  {failed} failed" if failed else ""), flush=True)  # fmt: skip
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
