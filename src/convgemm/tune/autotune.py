"""Pick (algorithm, config) per problem: a forced choice, a remembered one, a timed one, or a heuristic.

Tuning times every supported algorithm's candidate configs on the call's own tensors (writing to a
scratch output), remembers the fastest per ``ConvProblem.key()`` for the life of the process, and
is skipped under Triton's interpreter (its timings mean nothing) or when ``CONVGEMM_AUTOTUNE=0``.
"""

from __future__ import annotations

import os
import threading

import torch

from .._runtime import interpreting
from ..conv.fprop import ALGORITHMS, Algorithm, Config
from ..problem import ConvProblem

_memo: dict[tuple, tuple[Algorithm, Config]] = {}
_lock = threading.Lock()
#: preference order when nothing is timed: the most specialised kernel that applies
_HEURISTIC_ORDER = ("gemm_1x1", "implicit_gemm_tma", "implicit_gemm")


def autotune_enabled() -> bool:
    return os.environ.get("CONVGEMM_AUTOTUNE", "1") != "0" and not interpreting()


def clear_memo() -> None:
    """Forget every tuning result (and the call plans built on them)."""
    from ..functional import clear_plans

    with _lock:
        _memo.clear()
    clear_plans()


def _get(name: str) -> Algorithm:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}; choose 'auto' or one of {sorted(ALGORITHMS)}") from None


def choose(prob: ConvProblem, x, w, bias, y, algorithm: str = "auto") -> tuple[Algorithm, Config]:
    """The algorithm and config to run ``prob`` with.

    ``algorithm`` forces an algorithm (``ValueError`` with its reason if it does not support the
    problem); ``'auto'`` lets the tuner decide.
    """
    if algorithm != "auto":
        algo = _get(algorithm)
        reason = algo.supports(prob)
        if reason is not None:
            raise ValueError(f"algorithm {algorithm!r} cannot run {prob.describe()}: {reason}; use algorithm='auto'")
        hit = _memo.get(prob.key())
        if hit is not None and hit[0] is algo:
            return hit
        return algo, algo.default_config(prob)
    key = prob.key()
    hit = _memo.get(key)
    if hit is not None:
        return hit
    candidates = [ALGORITHMS[n] for n in _HEURISTIC_ORDER if ALGORITHMS[n].supports(prob) is None]
    if not autotune_enabled():
        choice = (candidates[0], candidates[0].default_config(prob))
    else:
        choice = _tune(prob, candidates, x, w, bias, y)
    with _lock:
        _memo[key] = choice
    return choice


def _log(prob, algo, cfg, t_ms: float) -> None:
    """Append one timing to ``$CONVGEMM_TUNE_LOG`` (JSON lines), when set: the raw data behind choices."""
    path = os.environ.get("CONVGEMM_TUNE_LOG")
    if path:
        import json

        with open(path, "a") as f:
            f.write(
                json.dumps(
                    {"problem": prob.describe(), "algorithm": algo.name, "config": cfg.describe(), "us": t_ms * 1e3}
                )
                + "\n"
            )


def _tune(prob, candidates, x, w, bias, y) -> tuple[Algorithm, Config]:
    from triton.testing import do_bench

    scratch = torch.empty_like(y)
    best, best_t = None, float("inf")
    for algo in candidates:
        for cfg in algo.configs(prob):
            try:
                algo.run(prob, x, w, bias, scratch, cfg)  # compiles; errors surface here
                t = do_bench(
                    lambda a=algo, c=cfg: a.run(prob, x, w, bias, scratch, c), warmup=2, rep=10, return_mode="median"
                )
            except Exception as e:  # out of shared memory or registers: not a candidate
                if "OutOfResources" in type(e).__name__ or "out of resource" in str(e).lower():
                    continue
                raise
            _log(prob, algo, cfg, t)
            if t < best_t:
                best, best_t = (algo, cfg), t
    if best is None:  # every config was over budget: fall back to the heuristic
        return candidates[0], candidates[0].default_config(prob)
    return best
