"""Time convgemm against cuDNN (and optionally Inductor) on suites of shapes.

Method (the README's "Results" section): CUDA-event medians of GPU time, the L2 cache flushed
before every run and the host's launch path kept off the clock (``_gpu_bench``; ``--timer
do_bench`` for ``triton.testing.do_bench``, the method before session 9), taken in alternating rounds (convgemm, cuDNN channels_last, cuDNN NCHW, again; ``--rounds``,
default 3) and each side's fastest round reported (``bench_rounds``); every callable runs once
before timing, so compilation, autotuning and cuDNN's own algorithm search
(``cudnn.benchmark=True``) stay out of the numbers; when a shape's tensors fit in L2 several
copies are rotated so each timed call reads from device memory. cuDNN is timed with
channels_last and with NCHW tensors and the faster is reported. Ceilings are measured at start.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import platform
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .._runtime import gpu_times
from ..problem import dtype_name
from .suites import Shape, Shape3d

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32}
#: ``--baseline`` names of Inductor's max-autotune and the conv backends each lets it choose among
INDUCTOR_BACKENDS = {"inductor": "ATEN,TRITON", "inductor-triton": "TRITON"}

#: relative difference from the baseline's output above which --check fails a row
CHECK_TOL = {"fp32": 1e-4, "tf32": 1e-2, "fp16": 4e-3, "bf16": 2e-2}


@dataclass
class Row:
    suite: str
    name: str
    shape: str
    dtype: str
    direction: str
    layout: str
    gflop: float
    convgemm_us: float | None = None
    cudnn_us: float | None = None
    cudnn_layout: str | None = None
    inductor_us: float | None = None
    speedup: float | None = None
    # cuDNN given the input's own layout (issue 9's NCHW target compares with this, not with the
    # best of both layouts that `speedup` uses)
    cudnn_same_us: float | None = None
    same_speedup: float | None = None
    inductor_speedup: float | None = None
    # what Inductor's max-autotune chose among: "ATEN,TRITON" (--baseline inductor: its Triton conv
    # template or cuDNN, whichever it timed faster) or "TRITON" (--baseline inductor-triton: the
    # template, issue 9's comparison; for 1x1 stride-1 unpadded layers Inductor's TRITON backend
    # also offers a matmul, aten_conv1x1_via_mm; dilated layers get no choice and fail)
    inductor_backends: str | None = None
    tflops: float | None = None
    cudnn_tflops: float | None = None
    roofline_us: float | None = None
    roofline_pct: float | None = None
    cudnn_roofline_pct: float | None = None
    algorithm: str | None = None
    config: str | None = None
    rel_err: float | None = None
    tune_s: float | None = None
    ok: bool = True
    note: str = ""
    # model rows: host time per iteration (issued back to back, unsynchronised): a row whose host
    # time is near its wall time measures the host, not the GPU
    host_us: float | None = None
    cudnn_host_us: float | None = None


@dataclass
class Result:
    gpu: str
    versions: dict
    ceilings: dict
    date: str
    rows: list[Row] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "gpu": self.gpu,
            "versions": self.versions,
            "ceilings": self.ceilings,
            "date": self.date,
            "method": {"timer": TIMER, "rounds": ROUNDS},  # layer timings (model rows: do_bench)
            "rows": [r.__dict__ for r in self.rows],
        }


def versions() -> dict:
    import triton

    import convgemm

    v = {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "convgemm": convgemm.__version__,
        "python": platform.python_version(),
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "cuda": torch.version.cuda,
        "driver": None,
    }
    try:
        import subprocess

        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        v["driver"] = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        pass
    return v


#: how layer timings are taken (``convgemm bench --timer``): ``"gpu"`` (``_gpu_bench``) or
#: ``"do_bench"`` (``triton.testing.do_bench``, the method before session 9)
TIMER = "gpu"
_flush: dict = {}


def _bench(fn, rep_ms: int = 100, timer: str | None = None) -> float:
    """Median time of ``fn`` in microseconds (CUDA events), by ``timer`` (default ``TIMER``)."""
    if (timer or TIMER) == "gpu":
        return _gpu_bench(fn, rep_ms)
    from triton.testing import do_bench

    return do_bench(fn, warmup=25, rep=rep_ms, return_mode="median") * 1e3


def _gpu_bench(fn, rep_ms: int = 100) -> float:
    """Median GPU time of ``fn`` in microseconds, the L2 cache flushed before every run.

    As ``triton.testing.do_bench`` (a 256 MB memset before each run, CUDA events around it), but
    the GPU also sleeps for longer than the host takes to queue each chunk of runs
    (``_runtime.gpu_times``), so the events time the GPU's work only. With
    do_bench the memset hides up to ~80 us of host time per call; a call whose host side takes
    longer (convgemm's Python path on a slow or busy host) had the rest counted as GPU time, and
    on the H200 machine of session 9 small layers then read ~35 us whatever their kernel took.
    Host costs are measured on their own: ``tools/overhead.py`` and the model benchmarks, whose
    eager rows keep ``do_bench`` (``bench_rounds(..., timer="do_bench")``).
    """
    buf = _flush.get("buf")
    if buf is None:
        buf = _flush["buf"] = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    fn()
    torch.cuda.synchronize()
    times = sorted(gpu_times(fn, rep_ms, 5, 1000, before=buf.zero_))
    return times[len(times) // 2] * 1e3


#: timing rounds per compared pair (``convgemm bench --rounds``)
ROUNDS = 3


def bench_rounds(fns: dict, rep_ms: int = 100, rounds: int | None = None, timer: str | None = None) -> dict:
    """Each callable's time in microseconds, the fastest of ``rounds`` medians taken in turn
    (A, B, C, A, B, C, ...), each round ``rep_ms / rounds`` long (at least 25 ms).

    On the H200 machine one kernel's median moved by up to 1.7x between consecutive measurements
    in one process (session 8): timing one side after the other can give a slow period to one
    side only. Alternating spreads such periods over both, and the fastest round is each side's
    undisturbed speed."""
    rounds = max(1, ROUNDS if rounds is None else rounds)
    per = max(25, rep_ms // rounds)
    best = {k: math.inf for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            best[k] = min(best[k], _bench(fn, per, timer))
    return best


def measure_ceilings() -> dict:
    """Measured bf16/fp16/tf32/fp32 matmul rates (TFLOP/s) and device-to-device copy bandwidth (GB/s)."""
    old = torch.backends.cuda.matmul.allow_tf32
    out = {}
    try:
        for key, dtype, n, tf32 in (("bf16", torch.bfloat16, 8192, False), ("fp16", torch.float16, 8192, False),
                                    ("tf32", torch.float32, 8192, True), ("fp32", torch.float32, 4096, False)):  # fmt: skip
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            us = _bench(lambda a=a, b=b: torch.matmul(a, b))
            out[f"{key}_tflops"] = 2 * n**3 / us / 1e6
            del a, b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    src = torch.empty(1 << 28, device="cuda", dtype=torch.float32)  # 1 GiB
    src.uniform_()
    dst = torch.empty_like(src)
    us = _bench(lambda d=dst, s=src: d.copy_(s))
    out["copy_gbps"] = 2 * src.numel() * 4 / us / 1e3
    del src, dst
    torch.cuda.empty_cache()
    return out


def min_bytes(shp: Shape, itemsize: int) -> int:
    total = (
        shp.n * shp.c * shp.h * shp.w + shp.k * (shp.c // shp.groups) * shp.r * shp.s + shp.n * shp.k * shp.p * shp.q
    )
    return (total + (shp.k if shp.bias else 0)) * itemsize


def roofline_us(shp: Shape, dtype_key: str, ceilings: dict) -> float:
    peak = ceilings[f"{dtype_key}_tflops"] * 1e12
    bw = ceilings["copy_gbps"] * 1e9
    t = max(shp.flops / peak, min_bytes(shp, DTYPES[dtype_key].itemsize) / bw)
    return t * 1e6


class _Rotation:
    """Several copies of (x, w, b) when one set fits in L2, so timed calls read device memory."""

    def __init__(self, sets):
        self.sets = sets
        self.i = 0

    def next(self):
        s = self.sets[self.i]
        self.i = (self.i + 1) % len(self.sets)
        return s


def _make_sets(shp: Shape, dtype: torch.dtype, channels_last: bool, l2_bytes: int):
    def one():
        x = torch.randn(shp.n, shp.c, shp.h, shp.w, device="cuda", dtype=dtype)
        w = torch.randn(shp.k, shp.c // shp.groups, shp.r, shp.s, device="cuda", dtype=dtype)
        w = w * (1.0 / math.sqrt(w[0].numel()))
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
            w = w.contiguous(memory_format=torch.channels_last)
        b = torch.randn(shp.k, device="cuda", dtype=dtype) if shp.bias else None
        return x, w, b

    first = one()
    per_set = min_bytes(shp, dtype.itemsize)
    copies = 1 if per_set >= 2 * l2_bytes else min(16, math.ceil(3 * l2_bytes / max(per_set, 1)))
    return [first] + [one() for _ in range(copies - 1)]


def run_shape(
    shp: Shape, suite: str, dtype_key: str, layout: str, baselines: list[str], check: bool, ceilings: dict
) -> Row:
    import convgemm

    dtype = DTYPES[dtype_key]
    torch.backends.cudnn.allow_tf32 = dtype_key == "tf32"
    torch.backends.cudnn.benchmark = True
    cl = layout == "channels_last"
    row = Row(suite, shp.name, shp.spec(), dtype_key, "fwd", layout, shp.flops / 1e9)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    sets = _make_sets(shp, dtype, cl, l2)
    args = dict(stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)

    # convgemm: the first call tunes (timed separately), then warm calls in rounds with cuDNN's
    x, w, b = sets[0]
    t0 = time.perf_counter()
    y = convgemm.conv2d(x, w, b, **args)
    torch.cuda.synchronize()
    row.tune_s = time.perf_counter() - t0
    rot = _Rotation(sets)
    for s in sets[1:]:
        convgemm.conv2d(*s, **args)  # packs each copy's weight once, as a module would
    fns = {"convgemm": lambda: convgemm.conv2d(*rot.next(), **args)}
    if "cudnn" in baselines:
        for lay in ("channels_last", "nchw"):
            fmt = torch.channels_last if lay == "channels_last" else torch.contiguous_format
            csets = [(sx.contiguous(memory_format=fmt), sw.contiguous(memory_format=fmt), sb) for sx, sw, sb in sets]
            F.conv2d(*csets[0], **args)
            if check and lay == "channels_last":
                ref = F.conv2d(*csets[0], **args)
            fns[lay] = lambda crot=_Rotation(csets): F.conv2d(*crot.next(), **args)
    times = bench_rounds(fns)
    row.convgemm_us = times.pop("convgemm")
    # check what was timed: a warm call (the plan's launch shortcut), not the first one
    y = convgemm.conv2d(x, w, b, **args)
    plan = convgemm.explain(x, w, b, **args)
    row.algorithm, row.config = plan["algorithm"], plan["config"]

    if "cudnn" in baselines:
        del fns
        row.cudnn_layout = min(times, key=times.get)
        row.cudnn_us = times[row.cudnn_layout]
        row.speedup = row.cudnn_us / row.convgemm_us
        row.cudnn_same_us = times[layout]
        row.same_speedup = row.cudnn_same_us / row.convgemm_us
        if check:
            row.rel_err = ((y.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()
            row.ok = bool(math.isfinite(row.rel_err) and row.rel_err <= CHECK_TOL[dtype_key])
    ind = [b for b in baselines if b in INDUCTOR_BACKENDS]
    if ind:
        row.inductor_backends = INDUCTOR_BACKENDS[ind[0]]
        try:
            import torch._inductor.config as inductor_config

            torch._dynamo.reset()  # each layer compiles and autotunes afresh, under these backends
            with inductor_config.patch(max_autotune_conv_backends=row.inductor_backends):
                fn = torch.compile(
                    lambda x, w, b: F.conv2d(x, w, b, **args), mode="max-autotune-no-cudagraphs", dynamic=False
                )
                fn(*sets[0])
            irot = _Rotation(sets)
            row.inductor_us = _bench(lambda: fn(*irot.next()))
            row.inductor_speedup = row.inductor_us / row.convgemm_us
        except Exception as e:  # noqa: BLE001 - a failed baseline is reported, not fatal
            row.note = f"inductor failed: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"

    row.tflops = shp.flops / row.convgemm_us / 1e6
    row.roofline_us = roofline_us(shp, dtype_key, ceilings)
    row.roofline_pct = 100 * row.roofline_us / row.convgemm_us
    if row.cudnn_us:
        row.cudnn_tflops = shp.flops / row.cudnn_us / 1e6
        row.cudnn_roofline_pct = 100 * row.roofline_us / row.cudnn_us
    del sets, y
    return row


def _dgrad_tma_config(x, w, dy, args: dict):
    """The config ``conv2d_input`` ran ``dgrad_tma`` with (its tuner's memo, on the problem it
    builds), else the default."""
    from convgemm.conv.backward import DGRAD_TMA, dgrad_tma_memo
    from convgemm.functional import _grad_problem

    prob = _grad_problem("conv2d_input", x.shape, None, w, dy, args["stride"], args["padding"], args["dilation"],
                         args["groups"])  # fmt: skip
    return dgrad_tma_memo(prob) or DGRAD_TMA.default_config(prob)


def run_shape_backward(
    shp: Shape, suite: str, dtype_key: str, layout: str, direction: str, check: bool, ceilings: dict
) -> Row:
    """dgrad or wgrad of one shape: convgemm against cuDNN's ``convolution_backward``."""
    import convgemm
    from convgemm.conv.backward import DGRAD, choose_wgrad
    from convgemm.functional import dgrad_route

    dtype = DTYPES[dtype_key]
    torch.backends.cudnn.allow_tf32 = dtype_key == "tf32"
    torch.backends.cudnn.benchmark = True
    cl = layout == "channels_last"
    row = Row(suite, shp.name, shp.spec(), dtype_key, direction, layout, shp.flops / 1e9)
    fmt = torch.channels_last if cl else torch.contiguous_format
    sets = []
    for x, w, _ in _make_sets(shp, dtype, cl, torch.cuda.get_device_properties(0).L2_cache_size):
        y_shape = (shp.n, shp.k, shp.p, shp.q)
        sets.append((x, w, torch.randn(y_shape, device="cuda", dtype=dtype).contiguous(memory_format=fmt)))
    args = dict(stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
    if direction == "dgrad":
        ours = lambda x, w, dy: convgemm.conv2d_input(x.shape, w, dy, **args)  # noqa: E731
        mask = [True, False, False]
    else:
        ours = lambda x, w, dy: convgemm.conv2d_weight(x, w.shape, dy, **args)  # noqa: E731
        mask = [False, True, False]
    pair = lambda v: [v, v] if isinstance(v, int) else list(v)  # noqa: E731

    def cudnn(x, w, dy):
        out = torch.ops.aten.convolution_backward(dy, x, w, None, pair(shp.stride), pair(shp.pad), pair(shp.dil),
                                                  False, [0, 0], shp.groups, mask)  # fmt: skip
        return out[0] if direction == "dgrad" else out[1]

    t0 = time.perf_counter()
    y = ours(*sets[0])
    torch.cuda.synchronize()
    row.tune_s = time.perf_counter() - t0
    rot, crot = _Rotation(sets), _Rotation(sets)
    cudnn(*sets[0])
    times = bench_rounds({"convgemm": lambda: ours(*rot.next()), "cudnn": lambda: cudnn(*crot.next())})
    row.convgemm_us, row.cudnn_us = times["convgemm"], times["cudnn"]
    x0, w0, _ = sets[0]
    prob = convgemm.ConvProblem.from_tensors(x0, w0, None, **args)
    if direction == "wgrad":
        # the timed calls tuned it: this reads the choice back from the memo
        algo, cfg, _, _ = choose_wgrad(prob, x0, sets[0][2], torch.empty_like(w0))
        row.algorithm, row.config = algo.name, (cfg.describe() if cfg is not None else "direct")
    else:
        row.algorithm = dgrad_route(prob, sets[0][2])
        row.config = {
            "dgrad_as_forward": "forward conv of dy (tuned)",
            "dgrad_by_subpixel": "one sub-pixel forward conv of dy (tuned)",
            "dgrad_tma": _dgrad_tma_config(x0, w0, sets[0][2], args).describe(),
            "dgrad_by_phases": "a forward conv of dy per stride phase (tuned)",
        }.get(row.algorithm) or DGRAD.default_config(prob).describe()
    row.cudnn_layout = layout
    row.speedup = row.cudnn_us / row.convgemm_us
    if check:
        ref = cudnn(*sets[0]).double()
        row.rel_err = ((y.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
        row.ok = bool(math.isfinite(row.rel_err) and row.rel_err <= CHECK_TOL[dtype_key])
    row.tflops = shp.flops / row.convgemm_us / 1e6
    row.roofline_us = roofline_us(shp, dtype_key, ceilings)
    row.roofline_pct = 100 * row.roofline_us / row.convgemm_us
    row.cudnn_tflops = shp.flops / row.cudnn_us / 1e6
    row.cudnn_roofline_pct = 100 * row.roofline_us / row.cudnn_us
    del sets, y
    return row


def run(
    shapes: list[tuple[str, Shape]],
    dtypes: list[str],
    layout: str,
    baselines: list[str],
    check: bool,
    progress=None,
    directions: tuple[str, ...] = ("fwd",),
) -> Result:
    """Benchmark every (suite, shape) x dtype on the current CUDA device."""
    ceilings = measure_ceilings()
    res = Result(
        gpu=torch.cuda.get_device_name(0),
        versions=versions(),
        ceilings=ceilings,
        date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )
    old_tf32 = torch.backends.cudnn.allow_tf32
    try:
        for direction in directions:
            for dk in dtypes:
                for suite_name, shp in shapes:
                    try:
                        if isinstance(shp, Shape3d):
                            if direction == "fwd":
                                row = run_shape3d(shp, suite_name, dk, layout, check, ceilings)
                            else:
                                row = run_shape3d_backward(shp, suite_name, dk, layout, direction, check, ceilings)
                        elif direction == "fwd":
                            row = run_shape(shp, suite_name, dk, layout, baselines, check, ceilings)
                        else:
                            row = run_shape_backward(shp, suite_name, dk, layout, direction, check, ceilings)
                    except torch.cuda.OutOfMemoryError:
                        row = Row(suite_name, shp.name, shp.spec(), dk, direction, layout, shp.flops / 1e9, ok=False,
                                  note="out of memory")  # fmt: skip
                        torch.cuda.empty_cache()
                    res.rows.append(row)
                    if progress:
                        progress(row)
    finally:
        torch.backends.cudnn.allow_tf32 = old_tf32
    return res


def run_shape3d(shp: Shape3d, suite: str, dtype_key: str, layout: str, check: bool, ceilings: dict) -> Row:
    """One 3-D forward shape: ``convgemm.conv3d`` against cuDNN's ``F.conv3d`` (both layouts)."""
    import convgemm

    dtype = DTYPES[dtype_key]
    torch.backends.cudnn.allow_tf32 = dtype_key == "tf32"
    torch.backends.cudnn.benchmark = True
    fmt = torch.channels_last_3d if layout == "channels_last" else torch.contiguous_format
    row = Row(suite, shp.name, shp.spec(), dtype_key, "fwd", layout, shp.flops / 1e9)
    x = torch.randn(shp.n, shp.c, shp.d, shp.h, shp.w, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
    w = torch.randn(shp.k, shp.c // shp.groups, shp.t, shp.r, shp.s, device="cuda", dtype=dtype)
    w = (w / math.sqrt(w[0].numel())).contiguous(memory_format=fmt)
    b = torch.randn(shp.k, device="cuda", dtype=dtype) if shp.bias else None
    args = dict(stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
    t0 = time.perf_counter()
    y = convgemm.conv3d(x, w, b, **args)
    torch.cuda.synchronize()
    row.tune_s = time.perf_counter() - t0
    fns = {"convgemm": lambda: convgemm.conv3d(x, w, b, **args)}
    for lay, f in (("channels_last", torch.channels_last_3d), ("nchw", torch.contiguous_format)):
        cx, cw = x.contiguous(memory_format=f), w.contiguous(memory_format=f)
        F.conv3d(cx, cw, b, **args)
        if check and lay == "channels_last":
            ref = F.conv3d(cx, cw, b, **args)
        fns[lay] = lambda cx=cx, cw=cw: F.conv3d(cx, cw, b, **args)
    times = bench_rounds(fns)
    row.convgemm_us = times.pop("convgemm")
    from convgemm.functional3d import conv3d_algorithm
    from convgemm.tune.autotune import autotune_enabled

    name, cfg = conv3d_algorithm(x, w, b, **args)  # the route the timed calls took (memoised choice)
    row.algorithm, row.config = name or "none", cfg.describe() if cfg is not None else ""
    if not autotune_enabled():
        row.config += " (heuristic)"
    row.cudnn_layout = min(times, key=times.get)
    row.cudnn_us = times[row.cudnn_layout]
    row.speedup = row.cudnn_us / row.convgemm_us
    row.cudnn_same_us = times[layout]
    row.same_speedup = row.cudnn_same_us / row.convgemm_us
    if check:
        row.rel_err = ((y.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()
        row.ok = bool(math.isfinite(row.rel_err) and row.rel_err <= CHECK_TOL[dtype_key])
    elems = x.numel() + w.numel() + y.numel() + (shp.k if shp.bias else 0)
    peak = ceilings[f"{dtype_key}_tflops"] * 1e12
    row.roofline_us = max(shp.flops / peak, elems * dtype.itemsize / (ceilings["copy_gbps"] * 1e9)) * 1e6
    row.tflops = shp.flops / row.convgemm_us / 1e6
    row.cudnn_tflops = shp.flops / row.cudnn_us / 1e6
    row.roofline_pct = 100 * row.roofline_us / row.convgemm_us
    row.cudnn_roofline_pct = 100 * row.roofline_us / row.cudnn_us
    return row


def run_shape3d_backward(
    shp: Shape3d, suite: str, dtype_key: str, layout: str, direction: str, check: bool, ceilings: dict
) -> Row:
    """dgrad or wgrad of one 3-D shape: ``conv3d_input`` / ``conv3d_weight`` against cuDNN's
    ``convolution_backward`` in the same layout."""
    from convgemm.conv import conv3d as k3
    from convgemm.functional3d import _ndhwc, conv3d_input, conv3d_weight, dgrad_route3d
    from convgemm.problem3d import ConvProblem3d

    dtype = DTYPES[dtype_key]
    torch.backends.cudnn.allow_tf32 = dtype_key == "tf32"
    torch.backends.cudnn.benchmark = True
    fmt = torch.channels_last_3d if layout == "channels_last" else torch.contiguous_format
    row = Row(suite, shp.name, shp.spec(), dtype_key, direction, layout, shp.flops / 1e9)
    x = torch.randn(shp.n, shp.c, shp.d, shp.h, shp.w, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
    w = torch.randn(shp.k, shp.c // shp.groups, shp.t, shp.r, shp.s, device="cuda", dtype=dtype)
    w = (w / math.sqrt(w[0].numel())).contiguous(memory_format=fmt)
    dy = torch.randn(shp.n, shp.k, shp.od, shp.p, shp.q, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
    args = dict(stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
    trip = lambda v: [v] * 3 if isinstance(v, int) else list(v)  # noqa: E731
    mask = [direction == "dgrad", direction == "wgrad", False]
    if direction == "dgrad":
        ours = lambda: conv3d_input(x.shape, w, dy, **args)  # noqa: E731
    else:
        ours = lambda: conv3d_weight(x, w.shape, dy, **args)  # noqa: E731

    def cudnn():
        out = torch.ops.aten.convolution_backward(dy, x, w, None, trip(shp.stride), trip(shp.pad), trip(shp.dil),
                                                  False, [0, 0, 0], shp.groups, mask)  # fmt: skip
        return out[0] if direction == "dgrad" else out[1]

    t0 = time.perf_counter()
    got = ours()
    torch.cuda.synchronize()
    row.tune_s = time.perf_counter() - t0
    cudnn()
    times = bench_rounds({"convgemm": ours, "cudnn": cudnn})
    row.convgemm_us, row.cudnn_us = times["convgemm"], times["cudnn"]
    prob = ConvProblem3d.from_tensors(x, w, None, **args)
    mode = k3.as_2d(prob)
    row.algorithm = (
        dgrad_route3d(prob) if direction == "dgrad" else f"conv3d_as_2d ({mode})" if mode else "conv3d_wgrad"
    )
    row.config = f"conv2d_{'input' if direction == 'dgrad' else 'weight'} (tuned)" if mode else ""
    if direction == "wgrad" and not mode:  # the choice the timed calls made (memoised)
        algo, cfg = k3.wgrad_choice(prob, _ndhwc(x), _ndhwc(dy), got)
        row.algorithm, row.config = algo.name, cfg.describe()
    row.cudnn_layout = layout
    row.speedup = row.cudnn_us / row.convgemm_us
    if check:
        ref = cudnn().double()
        row.rel_err = ((got.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
        row.ok = bool(math.isfinite(row.rel_err) and row.rel_err <= CHECK_TOL[dtype_key])
    elems = x.numel() + w.numel() + dy.numel()
    peak = ceilings[f"{dtype_key}_tflops"] * 1e12
    row.roofline_us = max(shp.flops / peak, elems * dtype.itemsize / (ceilings["copy_gbps"] * 1e9)) * 1e6
    row.tflops = shp.flops / row.convgemm_us / 1e6
    row.cudnn_tflops = shp.flops / row.cudnn_us / 1e6
    row.roofline_pct = 100 * row.roofline_us / row.convgemm_us
    row.cudnn_roofline_pct = 100 * row.roofline_us / row.cudnn_us
    return row


def interpreter_demo(shapes: list[Shape], print_fn=print, directions: tuple[str, ...] = ("fwd",)) -> bool:
    """No GPU: check convgemm against float64 torch on the CPU under Triton's interpreter."""
    import convgemm

    ok = True
    for direction in directions:
        for shp in shapes:
            for dtype in (torch.float32, torch.float16, torch.bfloat16):
                x = torch.randn(shp.n, shp.c, shp.h, shp.w).to(dtype)
                w = torch.randn(shp.k, shp.c // shp.groups, shp.r, shp.s).to(dtype)
                b = torch.randn(shp.k).to(dtype) if shp.bias else None
                args = dict(stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
                if direction == "fwd":
                    y = convgemm.conv2d(x, w, b, **args)
                    ref = F.conv2d(x.double(), w.double(), None if b is None else b.double(), **args)
                else:
                    dy = torch.randn(shp.n, shp.k, shp.p, shp.q).to(dtype)
                    if direction == "dgrad":
                        y = convgemm.conv2d_input(x.shape, w, dy, **args)
                        ref = torch.nn.grad.conv2d_input(x.shape, w.double(), dy.double(), **args)
                    else:
                        y = convgemm.conv2d_weight(x, w.shape, dy, **args)
                        ref = torch.nn.grad.conv2d_weight(x.double(), w.shape, dy.double(), **args)
                err = ((y.double() - ref).norm() / ref.norm()).item()
                tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}[dtype]
                good = math.isfinite(err) and err <= tol
                ok &= good
                print_fn(
                    f"  {direction:5s} {shp.name:28s} {dtype_name(dtype):5s} rel_err {err:.2e}  {'ok' if good else 'FAIL'}"
                )
    return ok


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
