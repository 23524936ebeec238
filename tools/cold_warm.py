"""Every tuning candidate of a few layers timed twice: L2 warm (as the tuner times) and L2 cold
(as ``convgemm bench`` times, the cache flushed and the inputs rotated), with cuDNN cold.

    PYTHONPATH=src python3 tools/cold_warm.py [--all] [--json OUT.json] SHAPE [SHAPE ...]

SHAPE is a ``convgemm bench --shape`` string (``N,C,H,W,K,R,S,stride,pad,dil,groups[,nobias]``).
``--all`` times every config of every supported algorithm, not only what the tuner's pruning
keeps. The question it answers: does the tuner's warm-L2 ranking pick what is fastest in the
benchmark's cold-L2 timing, and how much is lost where it does not.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import torch
import torch.nn.functional as F


def _one_shape(text: str, every: bool) -> dict:
    from convgemm._runtime import gpu_times
    from convgemm.bench.runner import _gpu_bench, _make_sets
    from convgemm.bench.suites import parse_shape
    from convgemm.conv.fprop import ALGORITHMS
    from convgemm.functional import _prepare
    from convgemm.tune import autotune as at

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    shp = parse_shape(text)
    args = dict(stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
    sets = _make_sets(shp, torch.bfloat16, True, l2)
    preps = [_prepare(x, w, b, **args) for x, w, b in sets]
    prob, x0, _ = preps[0]
    cands = [ALGORITHMS[n] for n in at._HEURISTIC_ORDER if ALGORITHMS[n].supports(prob) is None]
    pairs = [(al, c) for al in cands for c in al.configs(prob)] if every else at.tuning_pairs(prob, cands)
    scratch = [torch.empty_like(y) for _, _, y in preps]
    at._compile_all(prob, pairs, x0, sets[0][1], sets[0][2], scratch[0])
    ref = F.conv2d(*sets[0], **args)
    turn = {"k": 0}

    def warm(al, c):
        al.run(prob, x0, sets[0][1], sets[0][2], scratch[0], c, None)

    def cold(al, c):
        k = turn["k"] = (turn["k"] + 1) % len(sets)
        al.run(preps[k][0], preps[k][1], sets[k][1], sets[k][2], scratch[k], c, None)

    def cudnn():
        k = turn["k"] = (turn["k"] + 1) % len(sets)
        F.conv2d(*sets[k], **args)

    rows = []
    for algo, cfg in pairs:
        try:
            warm(algo, cfg)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - report and go on
            print(f"  {algo.name} {cfg.describe()}: {type(e).__name__}")
            continue
        err = ((scratch[0].double() - ref.double()).norm() / ref.double().norm()).item()
        tw = sorted(gpu_times(lambda al=algo, c=cfg: warm(al, c), 5.0, 5, 100))
        tc = _gpu_bench(lambda al=algo, c=cfg: cold(al, c), 60)
        rows.append({"algorithm": algo.name, "config": cfg.describe(), "warm_us": tw[len(tw) // 2] * 1e3,
                     "cold_us": tc, "rel_err": err})  # fmt: skip
    cud = _gpu_bench(cudnn, 100)
    bw = min(rows, key=lambda r: r["warm_us"])
    bc = min(rows, key=lambda r: r["cold_us"])
    print(f"== {shp.spec()}  cuDNN cold {cud:.1f} us, {len(rows)} candidates")
    for r in sorted(rows, key=lambda r: r["cold_us"])[:8]:
        print(f"   {r['algorithm']:18s} {r['config']:32s} warm {r['warm_us']:7.1f} cold {r['cold_us']:7.1f}"
              f"  err {r['rel_err']:.1e}")  # fmt: skip
    print(f"   warm pick {bw['config']} cold {bw['cold_us']:.1f} ({cud / bw['cold_us']:.2f}x); "
          f"cold best {bc['config']} {bc['cold_us']:.1f} ({cud / bc['cold_us']:.2f}x)")  # fmt: skip
    sys.stdout.flush()
    return {"shape": shp.spec(), "cudnn_cold_us": cud, "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shapes", nargs="+")
    ap.add_argument("--all", action="store_true", help="every config, not only the pruned tuning set")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("cold_warm: needs a CUDA GPU")
        return 0

    out = [_one_shape(text, a.all) for text in a.shapes]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    g = [o["cudnn_cold_us"] / min(r["cold_us"] for r in o["rows"]) for o in out]
    gw = [o["cudnn_cold_us"] / min(o["rows"], key=lambda r: r["warm_us"])["cold_us"] for o in out]
    print(f"geomean speedup, cold best {math.exp(sum(map(math.log, g)) / len(g)):.3f}x, "
          f"warm pick {math.exp(sum(map(math.log, gw)) / len(gw)):.3f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
