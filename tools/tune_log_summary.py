#!/usr/bin/env python3
"""Summarise a tuner log (``CONVGEMM_TUNE_LOG``): per tuned problem, the fastest candidate, and
the fastest of each candidate class given by ``--split`` regexes over "algorithm config".

    python3 tools/tune_log_summary.py tune.jsonl --split "t1x1x" --split "taps"

For each problem prints the best overall and, per class, its best and its ratio to the best of
the candidates outside every class (>1: the class is faster); then the candidates the tuner
skipped because they did not launch (e.g. over the shared-memory limit), with the error.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections import defaultdict


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("--split", action="append", default=[], help="a regex over 'algorithm config' (repeatable)")
    a = ap.parse_args()
    rows, skipped = defaultdict(list), defaultdict(list)
    with open(a.log) as f:
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
