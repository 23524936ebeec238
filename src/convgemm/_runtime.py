"""Where kernels run: compiled on a CUDA GPU, or under Triton's interpreter on the CPU."""

from __future__ import annotations

import functools
import os
import time

import torch


def interpreting() -> bool:
    """True when Triton's interpreter runs the kernels (``TRITON_INTERPRET=1``, read at import)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _strict_fp32() -> str:
    v = (os.environ.get("CONVGEMM_FP32_PRECISION") or "tf32x3").strip().lower()
    if v not in ("tf32x3", "ieee"):
        raise ValueError(f"CONVGEMM_FP32_PRECISION={v!r}: use 'tf32x3' (the default) or 'ieee'")
    return v


STRICT_FP32 = _strict_fp32()  # read once, at import


def fp32_precision(allow_tf32: bool) -> str:
    """The dot precision of an fp32 problem: ``'tf32'`` when TF32 is allowed, else
    ``STRICT_FP32``: ``'tf32x3'`` (the default: three TF32 tensor-core products per multiply,
    each K tile's sum added in IEEE fp32, ``matmul/blocks.py:dot_acc``) or ``'ieee'`` (fp32
    FMAs, no tensor cores). On the H200 (session 34) 3xTF32 landed closer to float64 than
    cuDNN's own fp32 on 44 of ResNet-50's and CRAFT's 46 layers (the ratio of the errors 0.37
    in geometric mean, at most 1.26; ``tools/fp32_accuracy.py``), and ran 1.52x cuDNN's fp32 over
    the ``all`` suite (ResNet-50's layers 1.48x, where the FMA path ran 0.46x in session 28)."""
    return "tf32" if allow_tf32 else STRICT_FP32


#: every environment variable convgemm and its tests read (the one table: docs/environment.md;
#: tests/test_bench.py checks the two agree and that the sources read no other CONVGEMM_ name)
ENV_VARS = (
    "TRITON_INTERPRET",
    "CONVGEMM_AUTOTUNE",
    "CONVGEMM_CACHE_DIR",
    "CONVGEMM_DEPTHWISE_TRIM",
    "CONVGEMM_DEPTHWISE_GLUON",
    "CONVGEMM_ROW_RING",
    "CONVGEMM_TUNE_LOG",
    "CONVGEMM_NCHW_TMA",
    "CONVGEMM_PDL",
    "CONVGEMM_COMPILE_PROCS",
    "CONVGEMM_TUNE_WARM",
    "CONVGEMM_TMA_DESC_CACHE",
    "CONVGEMM_FAST_LAUNCH",
    "CONVGEMM_FP32_PRECISION",
    "CONVGEMM_STRIDED_TMA",
    "CONVGEMM_REPLAY",
    "CONVGEMM_INDUCTOR_LOWERING",
    "CONVGEMM_POISON_OUTPUTS",
    "CONVGEMM_FUZZ_EXAMPLES",
    "CONVGEMM_FUZZ_SHARDS",
    "CONVGEMM_FUZZ_SEED",
    "CONVGEMM_FUZZ_EXAMPLES_ALIGNED",
    "CONVGEMM_FUZZ_EXAMPLES_3D",
    "CONVGEMM_FUZZ_EXAMPLES_T",
    "CONVGEMM_TEST_ALL",
    "CONVGEMM_TEST_FAST_CALLS",
    "CONVGEMM_TEST_OVERFLOW",
)


def env_settings(environ=None) -> tuple[list[str], list[str]]:
    """(``NAME=value`` for each variable of ``ENV_VARS`` that is set, the names of set
    ``CONVGEMM_*`` variables convgemm does not read: misspellings, or removed settings)."""
    environ = os.environ if environ is None else environ
    known = [f"{k}={environ[k]}" for k in ENV_VARS if k in environ]
    unknown = sorted(k for k in environ if k.startswith("CONVGEMM_") and k not in ENV_VARS)
    return known, unknown


def may_cache(device: torch.device) -> bool:
    """Whether a device tensor made now may be kept for later calls (a derived weight, split-K
    counters, a tap table): everywhere except on a CUDA device while another stream than the
    default one is current.

    CUDA graphs are captured on a side stream, and ``torch.compile(mode="reduce-overhead")``
    (cudagraph trees) warms a graph up on one too, with every allocation of the thread routed to
    the graph's private pool: a cache that kept such a tensor would hold graph memory that the
    graph does not know about (cudagraph trees refuse it: "tensor(s) in the cudagraph pool not
    tracked as outputs"), and a value cached before capture would be baked into the graph even
    after the weight it came from changed. On a side stream these caches are bypassed: the
    derived tensors are made per call, so a graph records their making and replays it.
    """
    if device.type != "cuda":
        return True
    return (
        torch._C._cuda_getCurrentRawStream(device.index if device.index is not None else torch.cuda.current_device())
        == 0
    )


def transforming() -> bool:
    """Whether a torch.func transform (grad, vmap, jvp, ...) or a forward-mode AD dual level
    (``torch.autograd.forward_ad``) is active: convgemm's calls then go through its
    transform-aware ``autograd.Function`` (``ops.func_function``), not the kernels directly."""
    return torch._C._are_functorch_transforms_active() or torch.autograd.forward_ad._current_level >= 0


def check_device(t: torch.Tensor, op: str) -> None:
    """Refuse tensors the kernels cannot run on, saying how to fix it."""
    if t.device.type == "cuda":
        if interpreting():
            raise ValueError(
                f"{op}: TRITON_INTERPRET=1 runs kernels on the CPU, but the tensors are on {t.device}; "
                "move them to the CPU or unset TRITON_INTERPRET"
            )
        return
    if t.device.type == "cpu":
        if interpreting():
            return
        raise ValueError(
            f"{op}: convgemm runs on CUDA GPUs, got tensors on the CPU; move them with .cuda() "
            "(or set TRITON_INTERPRET=1 before importing convgemm to run the kernels slowly on the CPU)"
        )
    raise ValueError(f"{op}: tensors on {t.device} are not supported; convgemm runs on CUDA GPUs")


@functools.cache
def capability(index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(index)


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def sm_count() -> int:
    """Streaming multiprocessors of the current CUDA device (132 on an H200; 1 without a GPU)."""
    if interpreting() or not torch.cuda.is_available():
        return 1
    return _sm_count(torch.cuda.current_device())


def has_tma(t: torch.Tensor) -> bool:
    """Can this tensor's device use TMA tensor descriptors (Hopper or newer, or the interpreter)?"""
    if t.device.type == "cpu":
        return interpreting()
    return capability(t.device.index if t.device.index is not None else torch.cuda.current_device())[0] >= 9


def dense_bias(bias: torch.Tensor | None) -> torch.Tensor | None:
    """``bias`` with unit stride: every kernel reads ``bias[k]`` at ``bias_ptr + k`` (a sliced
    bias, ``b[::2]``, would read the wrong elements). A copy of K elements where it has another
    stride; the same tensor otherwise."""
    # anything else (None, or a bad argument the caller's validation reports) passes through
    if isinstance(bias, torch.Tensor) and bias.dim() == 1 and bias.shape[0] > 1 and bias.stride(0) != 1:
        return bias.contiguous()
    return bias


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# read once: this is on every call's path
POISON = os.environ.get("CONVGEMM_POISON_OUTPUTS", "0") == "1"
#: ``convgemm.nn`` modules replay their plans on repeat inference calls (read once, at import)
REPLAY = os.environ.get("CONVGEMM_REPLAY", "1") != "0"


def empty(shape, dtype: torch.dtype, device, memory_format=torch.contiguous_format) -> torch.Tensor:
    """Allocate an output. With ``CONVGEMM_POISON_OUTPUTS=1`` (read at import) it is filled with
    NaN, so any element a kernel fails to write shows up in the result (the tests run this way)."""
    if memory_format is torch.channels_last and len(shape) == 4:
        # torch.empty's memory_format path costs host microseconds more than empty_strided
        n, c, h, w = shape
        t = torch.empty_strided(shape, (h * w * c, 1, w * c, c), dtype=dtype, device=device)
    else:
        t = torch.empty(shape, dtype=dtype, device=device, memory_format=memory_format)
    if POISON:
        t.fill_(float("nan"))
    return t


_flushers: dict = {}


def l2_flush(device: torch.device):
    """A callable that evicts ``device``'s L2 cache: zeroes a buffer of twice its size (kept per
    device). Timed runs preceded by it read their inputs from device memory, as
    ``convgemm bench`` times them (it zeroes 256 MB)."""
    key = device.index if device.index is not None else torch.cuda.current_device()
    fn = _flushers.get(key)
    if fn is None:
        size = max(2 * torch.cuda.get_device_properties(key).L2_cache_size, 32 << 20)
        fn = torch.empty(size // 4, dtype=torch.int32, device=f"cuda:{key}").zero_
        # a first tuning inside cudagraph trees' warm-up runs on a side stream with allocations
        # routed to the graph's pool: a buffer kept from there is an untracked pool tensor, and
        # cudagraph trees refuse the graph (session 24, ResNet-50 "compile cudagraphs")
        if may_cache(torch.device("cuda", key)):
            _flushers[key] = fn
    return fn


#: GPU clock cycles per microsecond for ``torch.cuda._sleep`` (the H200 runs its SMs at up to
#: 1.98 GHz; a slower clock only makes a sleep longer, which is harmless)
_CYCLES_PER_US = 2000


def gpu_times(fn, budget_ms: float, min_runs: int, max_runs: int, before=None, chunk: int = 100) -> list[float]:
    """GPU times in ms of about ``budget_ms`` of runs of ``fn`` (``min_runs`` to ``max_runs``),
    each preceded by ``before()`` (untimed; e.g. an L2 flush), by CUDA events around each run.

    The GPU is kept busy (``torch.cuda._sleep``) for twice the time the host takes to queue
    each chunk of runs, so the runs start back to back and the events time GPU work only, not
    the host's launch path: a small layer's kernel takes less than convgemm's host overhead per
    call (tens of microseconds), and timed without the sleep it measured the host (session 9:
    small layers read ~30-35 us in one call's tuner and bench whatever their kernel, 15 us in
    another). The tuner's timer and the layer benchmark's both use this."""

    def one():
        if before is not None:
            before()
        fn()

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    for _ in range(3):
        one()
    end.record()
    host_us = (time.perf_counter() - t0) / 3 * 1e6  # the host's time to queue one run
    end.synchronize()
    n = max(min_runs, min(max_runs, int(budget_ms / max(start.elapsed_time(end) / 3, 1e-3))))
    times: list[float] = []
    for lo in range(0, n, chunk):
        m = min(chunk, n - lo)
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(m)]
        torch.cuda._sleep(int(min(20000.0, 2 * host_us * m + 200) * _CYCLES_PER_US))
        for s, e in events:
            if before is not None:
                before()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        times += [s.elapsed_time(e) for s, e in events]
    return times
