"""Every depthwise tile config on a few layers (GPU): time, bandwidth and instructions' worth.

    PYTHONPATH=src python3 tools/depthwise_sweep.py            # the grouped suite's depthwise shapes
    PYTHONPATH=src python3 tools/depthwise_sweep.py --quick    # three shapes, for ncu runs too
    PYTHONPATH=src python3 tools/depthwise_sweep.py --algorithm both --ab 5   # tap vs rows kernel
    PYTHONPATH=src python3 tools/depthwise_sweep.py --algorithm depthwise_rows --only 3 4 5 --deeper 3 4
    PYTHONPATH=src python3 tools/depthwise_sweep.py --algorithm depthwise_rows --only 5 --configs "1,128,7,4,2,7,1"

``--algorithm`` picks ``depthwise`` (the tap kernel, default), ``depthwise_rows`` or ``both``;
``--ab N`` then re-times each algorithm's fastest config and cuDNN in N alternating rounds and
prints each side's median, so a difference between the two kernels can be told from the machine's
drift (session 9 saw the same config differ 2.4x between two calls).

Forces each config of ``Depthwise.configs`` (and a few more) through ``default_config`` with
tuning off, times it with CUDA-event medians against cuDNN on the same tensors, and prints the
bytes moved per second (input read once, output written once), so a config family that is
latency-bound (few bytes per second at every size) can be told from one that is bandwidth-bound.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

os.environ.setdefault("CONVGEMM_AUTOTUNE", "0")

import torch
import torch.nn.functional as F
import triton.testing

import convgemm
from convgemm.conv.fprop import ALGORITHMS, Config
from convgemm.problem import ConvProblem

# (N, C, H, W, R, S, stride, pad_h, pad_w)
SHAPES = [
    (64, 144, 56, 56, 3, 3, 1, 1, 1),
    (64, 32, 112, 112, 3, 3, 1, 1, 1),
    (64, 576, 14, 14, 3, 3, 1, 1, 1),
    (64, 96, 56, 56, 7, 7, 1, 3, 3),
    (64, 384, 14, 14, 7, 7, 1, 3, 3),
    (64, 768, 7, 7, 7, 7, 1, 3, 3),
    (8, 4096, 1, 4096, 1, 4, 1, 0, 3),  # the causal depthwise conv1d (padded both sides here)
    (64, 144, 56, 56, 3, 3, 2, 1, 1),  # stride 2
]
EXTRA = [Config(8, 64, 4, 4, 1), Config(16, 128, 1, 8, 1), Config(16, 64, 1, 4, 1), Config(32, 64, 1, 8, 1)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", type=int, nargs="*", help="indices into SHAPES")
    ap.add_argument("--algorithm", choices=["depthwise", "depthwise_rows", "both"], default="depthwise")
    ap.add_argument("--vec", type=int, nargs="*", help="depthwise_rows: only candidates of these vec values")
    ap.add_argument("--stages", type=int, nargs="*", help="depthwise_rows: only candidates of these stage counts")
    ap.add_argument("--deeper", type=int, nargs="*", default=[],
                    help="depthwise_rows: each candidate also at these stage counts (s - 1 steps' rows loaded ahead)")  # fmt: skip
    ap.add_argument("--cols", type=int, nargs="*", help="depthwise_rows: only candidates of these column counts")
    ap.add_argument("--no-trim", action="store_true",
                    help="depthwise_rows: never unroll the strip's first and last steps (DepthwiseRows.trim), for an A/B")  # fmt: skip
    ap.add_argument("--configs", default="",
                    help="only these configs, ';'-separated 'bq,bk,rows,warps,stages,cols,vec' (e.g. 1,128,7,4,2,7,1)")  # fmt: skip
    ap.add_argument("--ab", type=int, default=0, metavar="N", help="alternating rounds of the best configs")
    a = ap.parse_args()
    names = ["depthwise", "depthwise_rows"] if a.algorithm == "both" else [a.algorithm]
    if a.no_trim:
        from convgemm.conv.fprop import DepthwiseRows

        DepthwiseRows.trim = staticmethod(lambda prob, rows: False)
    shapes = [SHAPES[i] for i in a.only] if a.only else SHAPES[:3] if a.quick else SHAPES
    for n, c, h, w, r, s, st, ph, pw in shapes:
        x = torch.randn(n, c, h, w, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
        wt = torch.randn(c, 1, r, s, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
        kw = dict(stride=st, padding=(ph, pw), groups=c)
        prob = ConvProblem.from_tensors(x, wt, **kw)
        ref = F.conv2d(x, wt, **kw)
        nbytes = (x.numel() + ref.numel()) * x.element_size()
        cudnn = triton.testing.do_bench(lambda x=x, wt=wt, kw=kw: F.conv2d(x, wt, **kw), return_mode="median") * 1e3
        print(f"== {n}x{c}x{h}x{w} {r}x{s} s{st}: cuDNN {cudnn:.1f} us ({nbytes / cudnn / 1e6:.2f} TB/s)")
        best = {}
        for name in names:
            algo = ALGORITHMS[name]
            if algo.supports(prob) is not None:
                print(f"  {name}: {algo.supports(prob)}")
                continue
            seen = set()
            if name == "depthwise":
                cfgs = algo.configs(prob) + [algo.default_config(prob)] + EXTRA
            else:  # every column-group width that fits the registers
                cfgs = [
                    c
                    for c in algo.candidates(prob, wide=True) + [algo.default_config(prob)]
                    if (a.vec is None or c.vec in a.vec)
                    and (a.stages is None or c.num_stages in a.stages)
                    and (a.cols is None or c.cols in a.cols)
                ]
                cfgs += [replace(c, num_stages=st) for c in cfgs if c.num_stages >= 2 for st in a.deeper]
            if a.configs:
                cfgs = [Config(*map(int, c.split(",")[:5]), cols=int(c.split(",")[5]), vec=int(c.split(",")[6]))
                        for c in a.configs.split(";")]  # fmt: skip
            for cfg in cfgs:
                key = cfg.describe()
                if key in seen:
                    continue
                seen.add(key)
                fn = _forced(name, cfg, x, wt, kw)
                y = fn()
                err = (y.float() - ref.float()).abs().max().item()
                us = triton.testing.do_bench(fn, return_mode="median") * 1e3
                if name not in best or us < best[name][1]:
                    best[name] = (cfg, us)
                print(f"  {name} {cfg.describe():24s}: "
                      f"{us:8.1f} us {nbytes / us / 1e6:5.2f} TB/s  {cudnn / us:5.2f}x cuDNN  max err {err:.3g}")  # fmt: skip
        if a.ab and best:
            fns = {name: _forced(name, cfg, x, wt, kw) for name, (cfg, _) in best.items()}
            fns["cuDNN"] = lambda x=x, wt=wt, kw=kw: F.conv2d(x, wt, **kw)
            times = {k: [] for k in fns}
            for _ in range(a.ab):
                for k, fn in fns.items():
                    times[k].append(triton.testing.do_bench(fn, return_mode="median") * 1e3)
            med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
            print("  A/B medians over", a.ab, "rounds:", ", ".join(f"{k} {v:.1f} us" for k, v in med.items()),
                  "| configs:", ", ".join(f"{k} {c.describe()}" for k, (c, _) in best.items()))  # fmt: skip


def _forced(name: str, cfg: Config, x, wt, kw):
    """A call of ``name`` that runs exactly ``cfg`` through conv2d's plan (as a warm call does):
    the algorithm's ``default_config`` is swapped in while this algorithm's plan is rebuilt (a
    forced algorithm runs its default config with tuning off), then the timed calls hit the plan
    and only launch. Other algorithms' plans are kept, so two can be timed in turn."""
    from convgemm import functional

    cls = type(ALGORITHMS[name])
    default = cls.default_config
    cls.default_config = lambda self, prob: cfg
    try:
        with functional._plans_lock:
            for key in [k for k in functional._plans if name in k]:
                del functional._plans[key]
        convgemm.conv2d(x, wt, algorithm=name, **kw)
    finally:
        cls.default_config = default
    return lambda: convgemm.conv2d(x, wt, algorithm=name, **kw)


if __name__ == "__main__":
    main()
