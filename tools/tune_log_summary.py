#!/usr/bin/env python3
"""Summarise a tuner log (``CONVGEMM_TUNE_LOG``): per tuned problem, the fastest candidate, and
the fastest of each candidate class given by ``--split`` regexes over "algorithm config".

    python3 tools/tune_log_summary.py tune.jsonl --split "t1x1x" --split "taps"
    python3 tools/tune_log_summary.py benchmarks/results/h100-*tune*.jsonl --never-won --only "g32 bf16"

For each problem prints the best overall and, per class, its best and its ratio to the best of
the candidates outside every class (>1: the class is faster); then the candidates the tuner
skipped because they did not launch (e.g. over the shared-memory limit), with the error.

``--never-won`` reads many logs (each log's problems apart: one tuning run each) and lists the
candidate forms, tile sides (``tHxWxD``) pooled, that never were a problem's fastest: how often
each was timed, its best and median ratio to the winner. That is the evidence a candidate prune
needs (each candidate is a compile on a shape's first call); ``--only`` keeps problems whose
description matches a regex (``"g32 bf16"``: ResNeXt's 16-bit layers).
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections import defaultdict

_SIDES = re.compile(r" t\d+x\d+x\d+")


def form(algorithm: str, config: str) -> str:
    """A candidate's form: ``algorithm config`` without the pixel block's sides (`` t8x4x4``)."""
    return algorithm + " " + _SIDES.sub("", config)


def never_won(logs: list[list[str]], only: str = "") -> list[tuple[str, int, float, float]]:
    """``(form, timings, best ratio, median ratio)`` for each candidate form that was timed and
    never a problem's fastest, over ``logs`` (each the lines of one tuner log), ratios to each
    problem's winner, best ratio first."""
    ratios, wins = defaultdict(list), set()
    for lines in logs:
        probs = defaultdict(list)
        for line in lines:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("us") is not None and "algorithm" in e and re.search(only, e.get("problem", "")):
                probs[e["problem"]].append((e["us"], form(e["algorithm"], e["config"])))
        for cands in probs.values():
            best = min(us for us, _ in cands)
            for us, f in cands:
                ratios[f].append(us / best)
                if us == best:
                    wins.add(f)
    out = []
    for f, r in ratios.items():
        if f not in wins:
            r.sort()
            out.append((f, len(r), r[0], r[len(r) // 2]))
    return sorted(out, key=lambda t: t[2])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", nargs="+")
    ap.add_argument("--split", action="append", default=[], help="a regex over 'algorithm config' (repeatable)")
    ap.add_argument("--never-won", action="store_true", help="the forms that never won over all the logs")
    ap.add_argument("--only", default="", help="with --never-won: a regex the problems must match")
    a = ap.parse_args()
    if a.never_won:
        logs = []
        for path in a.log:
            with open(path) as f:
                logs.append(f.readlines())
        for f, n, lo, med in never_won(logs, a.only):
            print(f"{f:<56} timed {n:4d}x  best {lo:.3f}x  median {med:.3f}x the winner")
        return
    if len(a.log) > 1:
        ap.error("one log at a time, except with --never-won")
    rows, skipped = defaultdict(list), defaultdict(list)
    with open(a.log[0]) as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if "us" in e and e.get("us") is not None:
                rows[e["problem"]].append((e["us"], f"{e['algorithm']} {e['config']}"))
            elif "skipped" in e:  # a candidate that did not launch (the tuner skipped it)
                skipped[e["problem"]].append(f"{e['algorithm']} {e['config']}: {e['skipped']}")
    gains = defaultdict(list)
    for prob, cands in rows.items():
        cands.sort()
        print(f"{prob}: {len(cands)} candidates, best {cands[0][0]:.1f} us {cands[0][1]}")
        rest = [c for c in cands if not any(re.search(p, c[1]) for p in a.split)]
        for p in a.split:
            mine = [c for c in cands if re.search(p, c[1])]
            if mine and rest:
                r = rest[0][0] / mine[0][0]
                gains[p].append(r)
                print(f"    {p!r}: {mine[0][0]:.1f} us {mine[0][1]}  ({r:.2f}x the rest's {rest[0][0]:.1f})")
    for prob, why in skipped.items():
        print(f"{prob}: {len(why)} candidates skipped (did not launch)")
        for w in why:
            print(f"    {w}")
    for p, g in gains.items():
        print(f"class {p!r}: geomean {math.exp(sum(map(math.log, g)) / len(g)):.3f}x over {len(g)} problems")


if __name__ == "__main__":
    main()
