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

from .._runtime import gpu_times, interpreting, l2_flush
from ..conv.fprop import ALGORITHMS, COMPILE_ONLY, Algorithm, Config, flat_rows_narrow
from ..problem import ConvProblem
from .cache import TuneCache, cache_path

_memo: dict[tuple, tuple[Algorithm, Config]] = {}
_lock = threading.Lock()
#: names added by ``convgemm.extend.register_algorithm``: checked on every memo hit (the memo's
#: key buckets N, H and W, within which a built-in's ``supports`` answer never changes, a user's
#: may), their ``supports`` and ``configs`` errors caught, and part of the disk cache's key
USER_ALGORITHMS: set[str] = set()


def _supports(algo: Algorithm, prob: ConvProblem) -> str | None:
    """``algo.supports(prob)``; for a registered algorithm an exception is a refusal, with a warning."""
    if algo.name not in USER_ALGORITHMS:
        return algo.supports(prob)
    try:
        return algo.supports(prob)
    except Exception as e:  # noqa: BLE001 - a plugin's bug must not break every convolution
        import warnings

        warnings.warn(f"convgemm: registered algorithm {algo.name!r}: supports() raised {type(e).__name__}: {e}; "
                      "treated as a refusal", RuntimeWarning, stacklevel=3)  # fmt: skip
        return f"its supports() raised {type(e).__name__}: {e}"


def _valid_hit(hit, prob: ConvProblem):
    """A memo entry, unless it names a registered algorithm that refuses this very problem."""
    if hit is not None and hit[0].name in USER_ALGORITHMS and _supports(hit[0], prob) is not None:
        return None
    return hit


#: preference order when nothing is timed: the most specialised kernel that applies
_HEURISTIC_ORDER = (
    # only for an NCHW input kept as it is (ConvProblem.input_nchw)
    "head_1x1_nchw",
    "depthwise_nchw",
    "implicit_gemm_tma_nchw",
    "gemm_1x1_nchw",  # forced only until timed (Gemm1x1Nchw.CANDIDATES, heuristic_ok is False)
    "gemm_1x1",
    "head_1x1",
    "flat_rows",  # heuristic_ok: fprop.flat_rows_narrow (16-bit, 4-16 channels, 3x3); elsewhere tuned only
    "grouped_tma",  # before implicit_gemm_tma: it won ResNeXt's 8- and 16-channel groups too
    "grouped_ws",  # tuned only, and only once GroupedWs.CANDIDATES is on (untimed so far)
    "implicit_gemm_tma",
    "implicit_gemm_ws",  # Hopper only, never the untuned choice (heuristic_ok is False)
    "narrow_tma",
    "narrow_fold",  # tuned only (heuristic_ok is False)
    "depthwise",
    "depthwise_rows",
    "grouped",
    "grouped_direct",  # tuned only (heuristic_ok is False)
    "grouped_mma",  # tuned only (heuristic_ok is False; its configs from 8 channels a group)
    "width_unfold",
    "small_k",
    "implicit_gemm",
)


def _depthwise_only(prob: ConvProblem, names: set[str]) -> bool:
    return prob.cg == 1 and prob.kg == 1 and prob.groups > 1


def _merges_groups(prob: ConvProblem, names: set[str]) -> bool:
    return "grouped_tma" in names


def _flat_rows_narrow(prob: ConvProblem, names: set[str]) -> bool:
    return "flat_rows" in names and flat_rows_narrow(prob)


def _flat_rows_narrow_fp32(prob: ConvProblem, names: set[str]) -> bool:
    """``flat_rows_narrow``'s layers in fp32 (TF32 or strict): there the TMA kernels stay tuned."""
    return (
        "flat_rows" in names
        and prob.dtype == torch.float32
        and 4 <= prob.c <= 16
        and prob.groups == 1
        and 1 < prob.s <= 3
        and prob.r <= 3
    )


def _grouped_ws_wgrad(prob: ConvProblem, names: set[str]) -> bool:
    return "wgrad_grouped_ws" in names and "wgrad_grouped_tma" in names


def _unfolds_stem(prob: ConvProblem, names: set[str]) -> bool:
    return "width_unfold" in names and ALGORITHMS["width_unfold"].heuristic_ok(prob)


#: What the tuner leaves out, each rule measured on the H200 (benchmarks/NOTES.md): (algorithm,
#: "drop" (not tuned) or "default" (its default config only, a fallback), when(problem, names of
#: every algorithm that supports it)). Every candidate is a compile on a shape's first call.
_PRUNE = (
    # depthwise without a channel multiplier: the GEMM kernels ran 6-50x slower than the
    # depthwise kernels on all 14 depthwise layers of the grouped suite (session 9), and their
    # compiles were most of the first call's tuning time (up to 21.6 s)
    ("small_k", "drop", _depthwise_only),
    ("implicit_gemm", "drop", _depthwise_only),
    # the tap kernel lost to the rows kernel on all 15 depthwise layers of session 12's tuner log
    # (1.16-3.2x slower), and its 7x7 compile took 9 s; float64 keeps it (its 7x7 rows tiles spill)
    ("depthwise", "drop", lambda p, n: "depthwise_rows" in n and p.dtype != torch.float64),
    ("depthwise", "default", lambda p, n: "depthwise_rows" in n),
    # narrow groups that merge on the TMA kernel (ResNeXt g32, session 12): grouped_tma, or
    # implicit_gemm_tma at 32 channels per group, won all seven layers; depthwise_rows was
    # 2.3-5.6x slower, small_k 2.1-17x, implicit_gemm 1.2-22x, grouped 1.27-1.86x, and
    # implicit_gemm_tma's narrow K tiles at 16 or fewer channels per group 1.4-5.5x
    ("depthwise_rows", "drop", _merges_groups),
    ("small_k", "drop", _merges_groups),
    ("implicit_gemm", "drop", _merges_groups),
    ("grouped", "default", _merges_groups),
    # ... and in 16 bits over an NHWC input it never won where the TMA kernels were timed beside
    # it: 1.18-1.87x slower than the winner in all 149 ResNeXt layer timings of 31 tuner logs (H200,
    # sessions 12-38; H100, sessions 44-59), and its one config was the longest compile of four
    # of the seven layers (0.76-0.99 s on the dev CPU, session 59). It stays for fp32 (1.06x in
    # strict fp32, session 34) and NCHW input (it reads NCHW in place: it won 512 @28 s2 by 4%
    # in session 48, where the TMA kernels pay a transpose)
    ("grouped", "drop", lambda p, n: _merges_groups(p, n) and p.dtype != torch.float32 and not p.input_nchw),
    ("implicit_gemm_tma", "default", lambda p, n: "grouped_tma" in n and p.cg <= 16),
    # narrow groups without the merge (session 10): the rows kernel 1.3-3.7x slower than grouped
    ("depthwise_rows", "default", lambda p, n: "grouped" in n),
    # where a TMA kernel applies, the pointer-gather kernel's best config was 1.4-2x slower
    ("implicit_gemm", "default", lambda p, n: "implicit_gemm_tma" in n or "gemm_1x1" in n),
    # the Gluon kernel on narrow layers: at K <= 16 output or C <= 32 input channels it lost all 7
    # forward layers where the H200's tuner logs of sessions 19-21 timed it (1.06-1.45x slower
    # than the winner: narrow_tma, narrow_fold, implicit_gemm_tma or implicit_gemm), and its
    # compile is the slowest of a first call's candidates (heads' tuning went 3.2-3.6 s -> 5.2-7.3 s
    # between sessions 13 and 21)
    ("implicit_gemm_ws", "drop", lambda p, n: p.k <= 16 or p.c <= 32),
    # RGB stems of 64 or more filters (width_unfold's heuristic): the unfold won each one timed,
    # 2.8-3.4x faster than cuDNN (session 11)
    ("small_k", "default", _unfolds_stem),
    ("implicit_gemm", "default", _unfolds_stem),
    # one input channel: the unfold lost every such layer the H200's tuner logs timed since the
    # tuner charged an NCL result's transpose (sessions 12-26: gray 1->16 5x5 1.32-2.43x, mnist
    # 1->32 3x3 1.58-2.17x, wav2vec2's conv0 1->512 k10 1.74-1.75x slower than small_k), and its
    # eight candidates were half of those layers' first-call compiles
    ("width_unfold", "drop", lambda p, n: p.c == 1),
    # one input channel without groups (a channel multiplier of K on the rows kernel): it lost
    # every such layer the H200's tuner logs timed since session 26 (mnist 1->32 3x3 1.47-1.92x,
    # gray 1->16 5x5 1.66-2.39x slower than the winner, bf16, fp16 and fp32; wav2vec2's conv0
    # 1->512 k10 3.1x in session 25), and its 1-3 candidates are compiles on the first call
    ("depthwise_rows", "drop", lambda p, n: p.c == 1 and p.groups == 1),
    # flat_rows from 64 input channels on: the per-tap K tiles of the GEMM kernels are dense there,
    # and its candidates would only add compiles to a first call (not timed on such layers)
    ("flat_rows", "drop", lambda p, n: p.c >= 64),
    # 4-16 input channels under a 3x3 filter, 16-bit (fprop.flat_rows_narrow): flat_rows won the three
    # such layers of session 29's all suite (narrow 8->8, latent 4->64, seed 16->16), the next
    # best 2.15-2.49x slower; the TMA kernels' 25-34 candidates made the seed layer's first call
    # 5.7 s. implicit_gemm keeps one fallback config
    *(
        (a, "drop", _flat_rows_narrow)
        for a in ("width_unfold", "narrow_tma", "narrow_fold", "implicit_gemm_tma", "implicit_gemm_ws", "small_k")
    ),
    ("implicit_gemm", "default", _flat_rows_narrow),
    # the same layers in fp32: flat_rows won two of the three (latent 4->64, narrow 8->8) and
    # narrow_tma the seed 16->16, in TF32 (session 35) and strict fp32 (session 34) alike; the
    # unfold was 1.49-3.30x slower than the winner on all six, small_k 1.56-5.92x, implicit_gemm
    # 1.45-4.53x. Their 16-17 candidates made the process's first shape (the seed 16->16) a
    # 4.3-6.3 s first call
    ("width_unfold", "drop", _flat_rows_narrow_fp32),
    ("small_k", "drop", _flat_rows_narrow_fp32),
    ("implicit_gemm", "default", _flat_rows_narrow_fp32),
    # 1-3 input channels in fp32 (RGB stems and first layers, MNIST, gray): the pointer-gather GEMM
    # was 2.29-8.49x slower than the winner (width_unfold, flat_rows or small_k) on all eight such
    # layers of the all suite, in TF32 (session 35) and strict fp32 (session 34); its 2-10
    # candidates a layer were the most of any algorithm there
    ("implicit_gemm", "default", lambda p, n: p.dtype == torch.float32 and p.c <= 3 and p.groups == 1),
    # RGB stems of 7 or more filter rows: width_unfold won all four the H200 timed (session 29:
    # flat_rows 1.75-1.94x slower on the 7x7 and 11x11 stems; it won the 3x3 ones)
    ("flat_rows", "drop", lambda p, n: "width_unfold" in n and p.r >= 7),
    # grouped wgrad where the Gluon super-group kernel applies (16-bit, ResNeXt-like groups):
    # wgrad_grouped_ws won all 7 ResNeXt g32 layers of session 37's tuner log (bf16, from empty
    # caches); the best of the others was slower on every one: wgrad_grouped_tma 1.44-2.04x, the
    # depthwise kernel on 4-8 channels a group 3.7-9.6x, the gather wgrad 5.9-7.8x, wgrad_tma
    # 1.42-3.2x. Their candidates were most of those first calls' compiles (3.2 and 4.5 s on
    # the first two layers); wgrad_grouped_tma keeps one config as the fallback
    *((a, "drop", _grouped_ws_wgrad) for a in ("depthwise_wgrad", "wgrad", "wgrad_tma")),
    ("wgrad_grouped_tma", "default", _grouped_ws_wgrad),
)


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
    # a process with registered algorithms keeps entries of its own: its candidates differ
    user = ["+" + ",".join(sorted(USER_ALGORITHMS))] if USER_ALGORITHMS else []
    return json.dumps([gpu, triton.__version__, __version__, *prob.key(), *user], separators=(",", ":"))


def _from_disk(prob: ConvProblem, key: str) -> tuple[Algorithm, Config] | None:
    entry = disk_cache().get(key)
    if entry is None:
        return None
    algo = ALGORITHMS.get(entry["algorithm"])
    if algo is None or _supports(algo, prob) is not None:
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
        hit = _valid_hit(_memo.get(prob.key()), prob)
        if hit is not None and hit[0] is algo:
            return hit
        return algo, algo.default_config(prob)
    key = prob.key()
    hit = _valid_hit(_memo.get(key), prob)
    if hit is not None:
        return hit
    # an NCHW input kept as it is (``functional._prepare``) goes to the algorithms that read NCHW
    candidates = [
        ALGORITHMS[n]
        for n in _HEURISTIC_ORDER
        if ALGORITHMS[n].reads_nchw == prob.input_nchw and _supports(ALGORITHMS[n], prob) is None
    ]
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


def _log(prob, algo, cfg, t_ms: float, load_s: float | None = None) -> None:
    """Append one timing to ``$CONVGEMM_TUNE_LOG`` (JSON lines), when set: the raw data behind
    choices, and the seconds the candidate's first launch took in the tuner's load phase."""
    row = {"problem": prob.describe(), "algorithm": algo.name, "config": cfg.describe(), "us": t_ms * 1e3}
    if load_s is not None:
        row["load_s"] = round(load_s, 4)
    _log_row(row)


def _log_row(row: dict) -> None:
    path = os.environ.get("CONVGEMM_TUNE_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


def _compile_all(prob, pairs, x, w, bias, out_for, transpose=None) -> int:
    """Compile every candidate's kernel at once; returns how many compiled in worker processes.

    ``out_for(algo)``: the output each candidate is timed on (an NCHW result is written NCHW by
    the algorithms that can, so their kernels specialise on its strides: compiled on the NHWC
    scratch instead, they compiled again in their first launches, 0.3-0.7 s each in session 27's
    tuner log of one-channel layers); ``transpose``: the NHWC result to be transposed to NCHW
    for the other candidates' timing, whose transpose kernel compiles here too.

    Once this process's compile workers have started (``compile_pool``, from the first tuning
    on), convgemm's kernels compile there, into Triton's on-disk cache, which the candidates'
    first launches then read. Meanwhile, and for everything else, Triton's ``AsyncCompileMode``
    compiles on a thread pool: much of a compile runs without the GIL, so threads overlap
    compiles partly. Errors are ignored here; the candidate's first real launch reports them.
    """
    from concurrent.futures import ThreadPoolExecutor

    try:
        from triton.runtime._async_compile import AsyncCompileMode
    except ImportError:  # an older Triton: each candidate compiles on its first launch
        return 0
    from . import compile_pool

    pool = compile_pool.get_pool() if compile_pool.usable() else None  # the first call starts it
    workers = max(1, min(len(pairs), os.cpu_count() or 1, 16))
    with ThreadPoolExecutor(max_workers=workers) as threads:
        inner = compile_pool.Offloading(threads, pool) if pool is not None and pool.ready() else threads
        # each candidate's host launcher is built as its compile finishes, not in its first launch
        with compile_pool.Prebuilding(inner) as executor, AsyncCompileMode(executor, ignore_errors=True):
            token = COMPILE_ONLY.set(True)
            try:
                for algo, cfg in pairs:
                    try:
                        algo.run(prob, x, w, bias, out_for(algo), cfg, None)
                    except Exception:  # noqa: BLE001, S112 - reported by the launch that follows
                        continue
                if transpose is not None:  # an NCHW result: NHWC candidates are timed with its transpose
                    from ..conv.layout import warm_transpose

                    try:
                        warm_transpose(transpose, to_nhwc=False)
                    except Exception:  # noqa: BLE001, S110 - its first launch compiles it then
                        pass
            finally:
                COMPILE_ONLY.reset(token)
    return getattr(inner, "sent", 0)


def tuning_pairs(prob: ConvProblem, candidates: list[Algorithm]) -> list[tuple[Algorithm, Config]]:
    """The (algorithm, config) pairs the tuner compiles and times for ``prob``: every
    candidate's configs, less what ``_PRUNE`` leaves out (never every candidate)."""
    names = {a.name for a in candidates}
    drop = {a for a, act, when in _PRUNE if act == "drop" and a in names and when(prob, names)}
    default = {a for a, act, when in _PRUNE if act == "default" and a in names and when(prob, names)}
    kept = [a for a in candidates if a.name not in drop] or candidates
    out = []
    for a in kept:
        try:
            out += [(a, c) for c in ([a.default_config(prob)] if a.name in default else a.configs(prob))]
        except Exception as e:  # noqa: BLE001 - a registered algorithm's bug: skip it, say so
            if a.name not in USER_ALGORITHMS:
                raise
            import warnings

            warnings.warn(f"convgemm: registered algorithm {a.name!r}: configs() raised {type(e).__name__}: {e}; "
                          "not tuned", RuntimeWarning, stacklevel=2)  # fmt: skip
    return out


def _time_ms(fn, budget_ms: float = 2.0, flush=None) -> float:
    """Median GPU time of ``fn`` in ms, over about ``budget_ms`` of runs (3 to 50;
    ``_runtime.gpu_times``: the host's launch path off the clock), each after ``flush()``
    (untimed) when given.

    Lighter than ``triton.testing.do_bench`` (no fixed 10 ms windows): tuning only ranks
    candidates of one problem against each other, and must stay within a few seconds.
    """
    times = sorted(gpu_times(fn, budget_ms, 3, 50, before=flush))
    return times[len(times) // 2]


def _cold_l2() -> bool:
    """Whether candidates are timed with the L2 cache flushed before each run (default), as
    ``convgemm bench`` times layers; ``CONVGEMM_TUNE_WARM=1`` times them back to back, inputs
    hot in L2."""
    return os.environ.get("CONVGEMM_TUNE_WARM", "0") in ("", "0")


def _tune(prob, candidates, x, w, bias, y) -> tuple[Algorithm, Config, float | None]:
    """Compile every candidate first (in parallel), then time them back to back.

    Timing right after a compile measures a GPU whose clocks dropped while the host compiled; one
    pass of compiles, then two interleaved timing passes (keeping each candidate's better median),
    keeps the comparison fair.
    """
    import time

    from ..matmul.launch import Launch

    t0 = time.perf_counter()
    # y's own strides, not empty_like's dense copy of them: an output that is one stride phase of
    # a larger tensor (strided dgrad's phases) is stored in place by the TMA kernels but through a
    # dense temporary and a copy by the others, and the copy belongs in their time (session 33:
    # on a dense scratch the tuner picked such a kernel for ResNet-50's strided 1x1 dgrad phases)
    scratch = torch.empty_strided(y.size(), y.stride(), dtype=y.dtype, device=y.device)
    # an NCHW result (conv2d's output for an NCHW input) is written in place by the algorithms
    # with pointer stores (``writes_nchw``) and written NHWC then transposed by the others
    # (``functional.conv2d_forward``): each is timed the way the call will run it. Timing every
    # candidate on the NHWC scratch alone chose width_unfold for wav2vec2's NCL conv0 (session 19:
    # 54.6 us in the tuner, 171 us in the call, the transpose of its 131 MB output; small_k writes
    # NCL directly in 88 us)
    nchw_out = not getattr(prob, "channels_last_out", True) and scratch.dim() == 4
    scratch_nchw = torch.empty(scratch.shape, dtype=scratch.dtype, device=scratch.device) if nchw_out else None

    def out_for(algo):
        return scratch_nchw if nchw_out and algo.writes_nchw else scratch

    pairs = tuning_pairs(prob, candidates)
    transposed = scratch if nchw_out and any(not a.writes_nchw for a, _ in pairs) else None
    in_procs = _compile_all(prob, pairs, x, w, bias, out_for, transposed) if len(pairs) > 1 else 0
    t1 = time.perf_counter()
    ready = []
    loads = []  # each candidate's first launch, in seconds (module load, launcher, compiles missed)
    for algo, cfg in pairs:
        launch = Launch()  # timed as conv2d will run it: without Triton's per-call dispatch
        t_load = time.perf_counter()
        try:
            algo.run(prob, x, w, bias, out_for(algo), cfg, launch)  # loads the kernel; errors surface here
        except Exception as e:  # noqa: BLE001 - a candidate that cannot run is not a candidate
            # in the tuner log either way: session 46 found two strict-fp32 candidates over the
            # shared-memory limit on 55 of 86 layers, skipped silently since session 34, each a
            # compile on the first call
            _log_row({"problem": prob.describe(), "algorithm": algo.name, "config": cfg.describe(),
                      "skipped": f"{type(e).__name__}: {str(e)[:160]}"})  # fmt: skip
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
        loads.append(time.perf_counter() - t_load)
    torch.cuda.synchronize(x.device)
    t2 = time.perf_counter()
    if not ready:  # every config was over budget: fall back to the heuristic (not cached)
        pick = next(a for a in candidates if a.heuristic_ok(prob))
        return pick, pick.default_config(prob), None
    best_t = [float("inf")] * len(ready)
    # L2 flushed before each run: the H200's rankings of warm and cold runs differ (session 13,
    # tools/cold_warm.py over the ten slowest layers against cuDNN: the warm pick lost 6% in
    # geometric mean, up to 26%, in the benchmark's cold timing; e.g. a one-tile 3-stage config
    # against the persistent 4-stage one)
    flush = l2_flush(x.device) if _cold_l2() and x.device.type == "cuda" else None
    transpose = 0.0
    if nchw_out and any(not a.writes_nchw for a, _, _ in ready):
        from ..conv.layout import to_format

        transpose = _time_ms(lambda: to_format(scratch, torch.contiguous_format), flush=flush)
    for _ in range(2):
        for i, (algo, cfg, launch) in enumerate(ready):
            out = out_for(algo)
            t = _time_ms(lambda a=algo, c=cfg, h=launch, o=out: a.run(prob, x, w, bias, o, c, h), flush=flush)
            best_t[i] = min(best_t[i], t + (0.0 if out is scratch_nchw else transpose))
    for (algo, cfg, _), t, ls in zip(ready, best_t, loads, strict=True):
        _log(prob, algo, cfg, t, ls)
    # where a first call's tuning time goes (issue 4 asks for 3 s): compiles, first launches
    # (module loads, descriptors, the compiles the parallel pass missed) and the timing runs
    _log_row(
        {
            "problem": prob.describe(),
            "tune": {
                "pairs": len(pairs),
                "ready": len(ready),
                "compiled_in_processes": in_procs,
                "compile_s": round(t1 - t0, 4),
                "load_s": round(t2 - t1, 4),
                "time_s": round(time.perf_counter() - t2, 4),
            },
        }
    )
    i = min(range(len(ready)), key=best_t.__getitem__)
    return ready[i][0], ready[i][1], best_t[i] * 1e3
