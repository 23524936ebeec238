"""Pick (algorithm, config) per problem: a forced choice, a remembered one, a timed one, or a heuristic.

Order for ``algorithm='auto'``: this process's memo, then the persistent cache on disk
(``tune/cache.py``), then tuning: every supported algorithm's candidate configs timed on the call's
own tensors (writing to a scratch output); the winner goes to both. Tuning, and the disk cache with
it, is skipped under Triton's interpreter (its timings mean nothing) or when
``CONVGEMM_AUTOTUNE=0``: the heuristic choice is used then.
"""

from __future__ import annotations

import json
import os
import threading

import torch

from .._runtime import gpu_times, interpreting
from ..conv.fprop import ALGORITHMS, COMPILE_ONLY, Algorithm, Config
from ..problem import ConvProblem
from .cache import TuneCache, cache_path

_memo: dict[tuple, tuple[Algorithm, Config]] = {}
_lock = threading.Lock()
#: preference order when nothing is timed: the most specialised kernel that applies
_HEURISTIC_ORDER = (
    "gemm_1x1",
    "head_1x1",
    "grouped_tma",  # before implicit_gemm_tma: it won ResNeXt's 8- and 16-channel groups too
    "implicit_gemm_tma",
    "depthwise",
    "depthwise_rows",
    "grouped",
    "width_unfold",
    "small_k",
    "implicit_gemm",
)


#: algorithm -> algorithms that beat it wherever they apply: it is then tuned with its default only
_DOMINATED = {
    "implicit_gemm": ("implicit_gemm_tma", "gemm_1x1"),
    "depthwise": ("depthwise_rows",),
    # narrow groups (ResNeXt g32, session 10's tuner log): 1.3-3.7x slower than grouped
    "depthwise_rows": ("grouped",),
    # ResNeXt g32 (session 12's tuner log, 5 layers of 4-16 channels per group): 1.27-1.86x
    # slower than grouped_tma
    "grouped": ("grouped_tma",),
}


def autotune_enabled() -> bool:
    return os.environ.get("CONVGEMM_AUTOTUNE", "1") != "0" and not interpreting()


_disk: TuneCache | None = None


def disk_cache() -> TuneCache:
    """The process's view of the tuning cache file (re-opened if ``CONVGEMM_CACHE_DIR`` changed)."""
    global _disk
    path = cache_path()
    if _disk is None or _disk.path != path:
        _disk = TuneCache(path)
    return _disk


def cache_key(prob: ConvProblem, device: torch.device) -> str:
    """The disk-cache key: GPU name and compute capability, Triton and convgemm versions, problem key."""
    import triton

    from .. import __version__

    if device.type == "cuda":
        idx = device.index if device.index is not None else torch.cuda.current_device()
        cap = torch.cuda.get_device_capability(idx)
        gpu = f"{torch.cuda.get_device_name(idx)} sm{cap[0]}{cap[1]}"
    else:
        gpu = device.type
    return json.dumps([gpu, triton.__version__, __version__, *prob.key()], separators=(",", ":"))


def _from_disk(prob: ConvProblem, key: str) -> tuple[Algorithm, Config] | None:
    entry = disk_cache().get(key)
    if entry is None:
        return None
    algo = ALGORITHMS.get(entry["algorithm"])
    if algo is None or algo.supports(prob) is not None:
        return None
    try:
        cfg = Config(**entry["config"])
    except TypeError:  # a config field this version does not know
        return None
    return (algo, cfg) if algo.accepts(cfg) else None


def clear_memo() -> None:
    """Forget every tuning result (and the call plans built on them)."""
    from ..conv.backward import _wgrad_memo
    from ..functional import clear_plans

    with _lock:
        _memo.clear()
        _wgrad_memo.clear()
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
        pick = next(a for a in candidates if a.heuristic_ok(prob))
        choice = (pick, pick.default_config(prob))
    else:
        dkey = cache_key(prob, x.device)
        choice = _from_disk(prob, dkey)
        if choice is None:
            algo, cfg, us = _tune(prob, candidates, x, w, bias, y)
            choice = (algo, cfg)
            if us is not None:
                disk_cache().put(dkey, algo.name, cfg, us)
    with _lock:
        _memo[key] = choice
    return choice


def _log(prob, algo, cfg, t_ms: float) -> None:
    """Append one timing to ``$CONVGEMM_TUNE_LOG`` (JSON lines), when set: the raw data behind choices."""
    _log_row({"problem": prob.describe(), "algorithm": algo.name, "config": cfg.describe(), "us": t_ms * 1e3})


def _log_row(row: dict) -> None:
    path = os.environ.get("CONVGEMM_TUNE_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


def _compile_all(prob, pairs, x, w, bias, scratch) -> None:
    """Compile every candidate's kernel at once, on a thread pool.

    Most of a Triton compile (MLIR passes, ptxas) runs without the GIL, so candidates compile in
    parallel: tuning a new shape costs about one compile rather than one per candidate. Errors
    are ignored here; the candidate's first real launch reports them.
    """
    from concurrent.futures import ThreadPoolExecutor

    try:
        from triton.runtime._async_compile import AsyncCompileMode
    except ImportError:  # an older Triton: each candidate compiles on its first launch
        return
    workers = max(1, min(len(pairs), os.cpu_count() or 1, 16))
    with ThreadPoolExecutor(max_workers=workers) as pool, AsyncCompileMode(pool, ignore_errors=True):
        token = COMPILE_ONLY.set(True)
        try:
            for algo, cfg in pairs:
                try:
                    algo.run(prob, x, w, bias, scratch, cfg, None)
                except Exception:  # noqa: BLE001, S112 - reported by the launch that follows
                    continue
        finally:
            COMPILE_ONLY.reset(token)


def tuning_pairs(prob: ConvProblem, candidates: list[Algorithm]) -> list[tuple[Algorithm, Config]]:
    """The (algorithm, config) pairs the tuner compiles and times for ``prob``, pruned by what
    the H200 measured (benchmarks/NOTES.md)."""
    if prob.cg == 1 and prob.kg == 1 and prob.groups > 1:
        # depthwise (no channel multiplier): on all 14 depthwise layers of the grouped suite the
        # GEMM kernels ran 6-50x slower than the depthwise kernels (session 9's tuner log), and
        # their compiles and runs were most of the first call's tuning time (up to 21.6 s)
        kept = [a for a in candidates if a.name not in ("small_k", "implicit_gemm")]
        candidates = kept or candidates
    if any(a.name == "depthwise_rows" for a in candidates) and prob.dtype != torch.float64:
        # the tap kernel lost to the rows kernel on all 15 depthwise layers of session 12's
        # tuner log (1.16-3.2x slower), and its 7x7 compile took 9 s of the first call
        candidates = [a for a in candidates if a.name != "depthwise"]
    if any(a.name == "grouped_tma" for a in candidates):
        # narrow groups that merge on the TMA kernel: on ResNeXt's seven g32 layers (session 12's
        # tuner log) grouped_tma, or implicit_gemm_tma at 32 channels per group, won every one;
        # depthwise_rows was 2.3-5.6x slower, small_k 2.1-17x, implicit_gemm 1.2-22x, and
        # depthwise_rows's one compile took seconds of the first call
        kept = [a for a in candidates if a.name not in ("depthwise_rows", "depthwise", "small_k", "implicit_gemm")]
        candidates = kept or candidates
    # at 16 or fewer channels per group implicit_gemm_tma's narrow K tiles were 1.4-5.5x slower
    # than grouped_tma (session 12, three ResNeXt layers); at 32 it won by 3-9% and keeps its list
    narrow_tma = any(a.name == "grouped_tma" for a in candidates) and prob.cg <= 16
    # RGB stems of 64 or more filters (width_unfold's heuristic): the unfold won each one the
    # H200 timed, 2.8-3.4x faster than cuDNN (session 11); small_k and implicit_gemm keep a
    # fallback config each
    unfold = any(a.name == "width_unfold" and a.heuristic_ok(prob) for a in candidates)
    pairs = []
    for algo in candidates:
        cfgs = algo.configs(prob)
        if (unfold and algo.name in ("small_k", "implicit_gemm")) or (narrow_tma and algo.name == "implicit_gemm_tma"):
            cfgs = [algo.default_config(prob)]
        elif algo.name in _DOMINATED and any(a.name in _DOMINATED[algo.name] for a in candidates):
            # measured on the H200 (benchmarks/NOTES.md): on problems the TMA kernels take, the
            # pointer-gather kernel's best config is 1.4-2x slower; on problems the rows
            # depthwise kernel takes, the tap kernel's is 1.3-3.7x slower; on narrow groups the
            # rows kernel is slower than grouped; one config keeps each a fallback
            cfgs = [algo.default_config(prob)]
        pairs += [(algo, cfg) for cfg in cfgs]
    return pairs


def _time_ms(fn, budget_ms: float = 2.0) -> float:
    """Median GPU time of ``fn`` in ms, over about ``budget_ms`` of back-to-back runs (3 to 50;
    ``_runtime.gpu_times``: the host's launch path off the clock).

    Lighter than ``triton.testing.do_bench`` (no L2 flush, no fixed 10 ms windows): tuning only
    ranks candidates of one problem against each other, and must stay within a few seconds.
    """
    times = sorted(gpu_times(fn, budget_ms, 3, 50))
    return times[len(times) // 2]


def _tune(prob, candidates, x, w, bias, y) -> tuple[Algorithm, Config, float | None]:
    """Compile every candidate first (in parallel), then time them back to back.

    Timing right after a compile measures a GPU whose clocks dropped while the host compiled; one
    pass of compiles, then two interleaved timing passes (keeping each candidate's better median),
    keeps the comparison fair.
    """
    import time

    from ..matmul.launch import Launch

    t0 = time.perf_counter()
    scratch = torch.empty_like(y)
    pairs = tuning_pairs(prob, candidates)
    if len(pairs) > 1:
        _compile_all(prob, pairs, x, w, bias, scratch)
    t1 = time.perf_counter()
    ready = []
    for algo, cfg in pairs:
        launch = Launch()  # timed as conv2d will run it: without Triton's per-call dispatch
        try:
            algo.run(prob, x, w, bias, scratch, cfg, launch)  # loads the kernel; errors surface here
        except Exception as e:  # noqa: BLE001 - a candidate that cannot run is not a candidate
            if not ("OutOfResources" in type(e).__name__ or "out of resource" in str(e).lower()):
                # not a resource limit: a bug worth reporting, but the call can still succeed
                import warnings

                warnings.warn(
                    f"convgemm: {algo.name} [{cfg.describe()}] failed on {prob.describe()} "
                    f"({type(e).__name__}: {str(e)[:200]}); skipped while tuning",
                    RuntimeWarning,
                    stacklevel=2,
                )
            continue
        ready.append((algo, cfg, launch))
    torch.cuda.synchronize(x.device)
    t2 = time.perf_counter()
    if not ready:  # every config was over budget: fall back to the heuristic (not cached)
        pick = next(a for a in candidates if a.heuristic_ok(prob))
        return pick, pick.default_config(prob), None
    best_t = [float("inf")] * len(ready)
    for _ in range(2):
        for i, (algo, cfg, launch) in enumerate(ready):
            t = _time_ms(lambda a=algo, c=cfg, h=launch: a.run(prob, x, w, bias, scratch, c, h))
            best_t[i] = min(best_t[i], t)
    for (algo, cfg, _), t in zip(ready, best_t, strict=True):
        _log(prob, algo, cfg, t)
    # where a first call's tuning time goes (issue 4 asks for 3 s): compiles, first launches
    # (module loads, descriptors, the compiles the parallel pass missed) and the timing runs
    _log_row(
        {
            "problem": prob.describe(),
            "tune": {
                "pairs": len(pairs),
                "ready": len(ready),
                "compile_s": round(t1 - t0, 4),
                "load_s": round(t2 - t1, 4),
                "time_s": round(time.perf_counter() - t2, 4),
            },
        }
    )
    i = min(range(len(ready)), key=best_t.__getitem__)
    return ready[i][0], ready[i][1], best_t[i] * 1e3
