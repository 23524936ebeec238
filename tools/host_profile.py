"""Where a network's host time goes (GPU): cProfile over warm iterations, and every implicit
host-device synchronisation one iteration makes.

    PYTHONPATH=src python3 tools/host_profile.py --model resnet50 --train
    PYTHONPATH=src python3 tools/host_profile.py --model craft

Uses ``tools/profile_model.py``'s models. Prints the synchronising calls (``torch.cuda``'s sync
debug mode, one line per distinct stack), then the functions with the most own time and the
most cumulative time per iteration.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(__file__))
from profile_model import add_model_args, warm_step  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    add_model_args(ap, iters=3, top=30)
    a = ap.parse_args()
    step = warm_step(a)
    seen: dict[str, int] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        step()
        torch.cuda.set_sync_debug_mode(0)
    for w in caught:
        if "synchroniz" in str(w.message):
            seen[f"{w.filename}:{w.lineno}"] = seen.get(f"{w.filename}:{w.lineno}", 0) + 1
    print(f"synchronising calls in one iteration: {sum(seen.values())}")
    for where, n in sorted(seen.items(), key=lambda kv: -kv[1])[:15]:
        print(f"  x{n:<4d} {where}")
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(a.iters):
        step()
    prof.disable()
    torch.cuda.synchronize()
    print(f"host+GPU {(time.perf_counter() - t0) / a.iters * 1e3:.1f} ms/iter under cProfile")
    print_top(prof, a.top, f"{a.iters} iterations")


def print_top(prof: cProfile.Profile, top: int, what: str) -> None:
    """The ``top`` functions of a profile by own time, then by cumulative time (``what``: what
    the times are for, e.g. "200 calls")."""
    for key in ("tottime", "cumulative"):
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats(key).print_stats(top)
        lines = [ln for ln in s.getvalue().splitlines() if ln.strip()]
        start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls"))
        print(f"-- by {key} (times for {what})")
        print("\n".join(ln[:200] for ln in lines[start : start + top + 1]))


if __name__ == "__main__":
    main()
