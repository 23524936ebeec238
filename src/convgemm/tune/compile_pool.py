"""Compiling the tuner's candidate kernels in worker processes.

A new shape's first call compiles every candidate the tuner will time (``autotune._compile_all``).
On threads (Triton's ``AsyncCompileMode``) those compiles overlap only partly: a Triton compile
goes back and forth between Python (the frontend, the pass pipeline's driver) and C++ many times,
and every return to Python waits for the GIL. On the H200's 16-core host 20 implicit-GEMM
candidates took 11.3 s on one thread and 3.0 s on 16 (session 24, ``tools/tune_time.py``), where
16 independent compiles would take about two compile times, 1.1 s.

Here the candidates compile in worker processes instead, each with its own interpreter. The
workers write Triton's on-disk kernel cache, and the tuner's first real launch of each candidate
then compiles nothing: Triton finds the kernel there under the same key (same source, signature,
constants, options, target and cache-invalidating environment). On the H200's host the same 20
candidates took 4.3 s on 16 threads and 2.3-2.9 s on 8 workers in one run (session 24).

How a candidate gets to a worker: the tuner's compile-only pass runs under Triton's
``AsyncCompileMode`` with an executor of ours (``Offloading``). Triton hands it each compile as a
closure over the kernel's ``ASTSource``, target and options; for a kernel defined in a convgemm
module the executor sends those (kernels among the constants by module and name) to a worker,
which imports the module, rebuilds the ``ASTSource`` and calls ``triton.compile``. When the
worker is done, the closure runs on a waiting thread, finds the kernel in the cache and hands
Triton the loaded kernel. Anything else (a kernel defined elsewhere, a constant that does not
pickle) compiles on the tuner's threads as before.

The workers are plain ``python -c`` subprocesses (not ``multiprocessing``, whose spawned children
re-import the user's ``__main__`` script), started on the first tuning in a process and kept for
its lifetime. Each imports torch and convgemm once and compiles one trivial kernel (about 2 s on
the dev CPU; 8 at once took 6 s on the H200's host), so the first shape tuned in a process still
compiles on threads while they start; later shapes use them once all are ready.
``CONVGEMM_COMPILE_PROCS`` sets their number (``0``: threads only).
"""

from __future__ import annotations

import importlib
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from concurrent.futures import Executor, Future, ThreadPoolExecutor

import triton
import triton.language as tl

_ENV = "CONVGEMM_COMPILE_PROCS"


def pool_size() -> int:
    """The number of compile worker processes: ``$CONVGEMM_COMPILE_PROCS``, else the CPU count up
    to 8 where there are at least 4 CPUs (0 below: two or three cores gain little over threads).

    Each idle worker holds about 160 MB of private memory (torch, Triton and convgemm imported),
    more after compiling; 8 keeps a process's pool near 1.5-2 GB, which matters where several
    processes (one per GPU) tune at once."""
    raw = os.environ.get(_ENV, "").strip()
    if raw:
        try:
            n = int(raw)
        except ValueError:
            raise ValueError(
                f"{_ENV}={raw!r} is not an integer; set it to a number of worker processes, or 0 to compile "
                "the tuner's candidates on threads only"
            ) from None
        if n < 0:
            raise ValueError(f"{_ENV}={raw!r} is negative; set it to 0 (threads only) or a positive number")
        return n
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(cpus, 8) if cpus >= 4 else 0


# --- the wire format: length-prefixed pickles over the worker's stdin and stdout ---------------


def _send(stream, obj) -> None:
    data = pickle.dumps(obj)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _recv(stream):
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("the compile worker closed its output")
    (size,) = struct.unpack("<Q", head)
    return pickle.loads(stream.read(size))


# --- the worker side ---------------------------------------------------------------------------


class _Kernel:
    """A JIT function among a kernel's constants (convgemm passes loaders and epilogues as
    constexpr functions), sent by module and name."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name


def _lookup(module: str, name: str):
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _unref(v):
    if isinstance(v, _Kernel):
        return _lookup(v.module, v.name)
    if isinstance(v, tuple):
        return tuple(_unref(x) for x in v)
    return v


def compile_job(module: str, name: str, source: tuple, signature: dict, constants: dict, attrs: dict,
                options: dict, target: tuple, cache_dir: str) -> None:  # fmt: skip
    """Compile one kernel into Triton's cache: the source (class ``source``: Triton's or Gluon's
    ``ASTSource``, by module and name) of kernel ``module.name`` with these signature, constants
    and attributes, for ``target`` (backend, arch, warp size), into the Triton cache ``cache_dir``
    (the tuner's, read when the job was made)."""
    from triton.backends.compiler import GPUTarget

    triton.knobs.cache.dir = cache_dir
    fn = _lookup(module, name)
    src = _lookup(*source)(fn, signature, {k: _unref(v) for k, v in constants.items()}, attrs)
    triton.compile(src, target=GPUTarget(*target), options=options)


#: the modules holding convgemm's kernels (imported by a worker before it reports ready)
KERNEL_MODULES = (
    "convgemm.conv.fprop", "convgemm.conv.backward", "convgemm.conv.conv3d", "convgemm.conv.depthwise",
    "convgemm.conv.depthwise_wgrad", "convgemm.conv.depthwise_wgrad_window", "convgemm.conv.grouped_tma",
    "convgemm.conv.head", "convgemm.conv.fold", "convgemm.conv.unfold", "convgemm.conv.wgrad_taps",
    "convgemm.conv.ws3d", "convgemm.conv.ws_wgrad",
)  # fmt: skip


@triton.jit
def _warm_kernel(x_ptr, n, BLOCK: tl.constexpr):
    """A trivial kernel a worker compiles while starting (see ``_warm_up``)."""
    i = tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1.0, mask=i < n)


def _warm_up(target: str) -> None:
    """What a process pays on its first compile, paid before the worker reports ready: the
    kernel modules' imports (the Gluon ones may be missing: their kernels then compile on
    threads) and, for ``target`` ("backend,arch,warp_size"), one trivial kernel's compile, which
    sets up Triton's backend, LLVM and ptxas (about 0.3 s of a first compile on the dev CPU)."""
    for name in KERNEL_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    if target:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource, make_backend

        backend, arch, warp = target.split(",")
        gpu = GPUTarget(backend, int(arch), int(warp))
        options = make_backend(gpu).parse_options({"num_warps": 1})
        src = ASTSource(_warm_kernel, {"x_ptr": "*fp32", "n": "i32"}, {(2,): 32}, {})
        triton.compile(src, target=gpu, options=options.__dict__)


def serve(target: str = "") -> None:
    """A worker's loop: jobs in on stdin, ``None`` or an error message out on stdout."""
    out, inp = sys.stdout.buffer, sys.stdin.buffer
    sys.stdout = sys.stderr  # anything a compile prints must not corrupt the replies
    try:
        _warm_up(target)
    except Exception as e:  # noqa: BLE001 - a compile reports the same failure with its context
        print(f"convgemm compile worker: warm-up failed ({type(e).__name__}: {e})", file=sys.stderr)

    try:
        out.write(b"R")
        out.flush()
        while True:
            try:
                job = _recv(inp)
            except EOFError:
                return
            try:
                compile_job(*pickle.loads(job))
                reply = None
            except Exception as e:  # noqa: BLE001 - sent back: the tuner's own launch reports it
                reply = f"{type(e).__name__}: {e}"
            _send(out, reply)
    except BrokenPipeError:
        # the tuner's process ended first (a short script that tuned one shape while the workers
        # were still starting): nothing to report to, and no traceback on the terminal it left
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the interpreter's own flush at exit


# --- the tuner side ----------------------------------------------------------------------------


class _Worker:
    def __init__(self, target: str = "") -> None:
        env = dict(os.environ)
        env.pop("TRITON_INTERPRET", None)
        # the parent's import path (a tool may have extended sys.path); each job names the
        # Triton cache directory to write
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"from convgemm.tune.compile_pool import serve; serve({target!r})"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self.ready = threading.Event()
        self.failed = False
        threading.Thread(target=self._wait_ready, daemon=True).start()

    def _wait_ready(self) -> None:
        try:
            ok = self.proc.stdout.read(1) == b"R"
        except (OSError, ValueError):
            ok = False
        self.failed = not ok
        self.ready.set()

    def call(self, job: bytes) -> str | None:
        _send(self.proc.stdin, job)
        return _recv(self.proc.stdout)

    def close(self) -> None:
        """End the worker: it exits when its input closes (after a compile under way)."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


class CompilePool:
    """``n`` compile workers and one thread per worker to talk to it."""

    def __init__(self, n: int, target: str = "") -> None:
        """``target``: the GPU the kernels are for, "backend,arch,warp_size" (e.g. "cuda,90,32"),
        whose compiler backend the workers set up while starting; empty: on their first job."""
        self.workers = [_Worker(target) for _ in range(n)]
        self._idle: queue.SimpleQueue = queue.SimpleQueue()
        for w in self.workers:
            self._idle.put(w)
        #: threads that wait on the workers (blocked on pipes, so the GIL is free meanwhile)
        self.waiters = ThreadPoolExecutor(max_workers=n, thread_name_prefix="convgemm-compile")

    def ready(self) -> bool:
        """Whether every worker has started (imported torch, Triton and convgemm) and none failed."""
        return all(w.ready.is_set() and not w.failed for w in self.workers)

    def call(self, job: bytes) -> str | None:
        """Compile one pickled job on a free worker; ``None`` or the error it raised."""
        while True:
            if all(w.failed for w in self.workers):
                return "no compile worker is running"
            try:
                w = self._idle.get(timeout=0.5)
                break
            except queue.Empty:
                continue
        try:
            return w.call(job)
        except (OSError, EOFError, pickle.UnpicklingError) as e:
            w.failed = True  # a dead worker: its jobs fall back to the tuner's own launch
            return f"compile worker failed: {type(e).__name__}: {e}"
        finally:
            if not w.failed:
                self._idle.put(w)

    def close(self) -> None:
        for w in self.workers:
            w.close()
        self.waiters.shutdown(wait=False)


_pool: CompilePool | None = None
_pool_lock = threading.Lock()


def _current_target() -> str:
    try:
        from triton.runtime import driver

        t = driver.active.get_current_target()
        return f"{t.backend},{t.arch},{t.warp_size}"
    except Exception:  # noqa: BLE001 - no GPU driver: the workers set the backend up on their first job
        return ""


_start_failed = False


def get_pool() -> CompilePool | None:
    """The process's compile pool, started on the first call (``None`` where ``pool_size()`` is 0,
    or where the workers could not be started: one warning, then threads only)."""
    global _pool, _start_failed
    if _pool is None and not _start_failed:
        with _pool_lock:
            n = pool_size()
            if _pool is None and n > 0 and not _start_failed:
                try:
                    _pool = CompilePool(n, _current_target())
                except OSError as e:
                    _start_failed = True
                    import warnings

                    warnings.warn(
                        f"convgemm: could not start compile worker processes with {sys.executable!r} "
                        f"({type(e).__name__}: {e}); the tuner compiles on threads instead. Set "
                        f"{_ENV}=0 to skip the attempt.",
                        RuntimeWarning,
                        stacklevel=2,
                    )
    return _pool


# --- handing Triton's compiles to the workers ------------------------------------------------


def _kernel_ref(fn):
    """A JIT function as (module, qualified name) when a worker finds this very object again by
    importing them (convgemm's own kernels and helpers), else None."""
    from triton.runtime.jit import JITFunction

    if not isinstance(fn, JITFunction):
        return None
    module, name = fn.fn.__module__, fn.fn.__qualname__
    if not module.startswith("convgemm."):
        return None
    try:
        return (module, name) if _lookup(module, name) is fn else None
    except (ImportError, AttributeError):  # made at run time, not a module attribute
        return None


def _ref(v):
    from triton.runtime.jit import JITFunction

    if isinstance(v, JITFunction):
        r = _kernel_ref(v)
        if r is None:
            raise TypeError(f"{v!r} cannot be found again by module and name")
        return _Kernel(*r)
    if isinstance(v, tuple):
        return tuple(_ref(x) for x in v)
    return v


def job_of(compile_fn) -> bytes | None:
    """The pickled worker job of one of Triton's ``AsyncCompileMode`` compile closures (Triton
    3.6's ``JITFunction._do_compile``: free variables ``src``, ``target`` and ``options``), or
    None when it cannot go to a worker."""
    code, cells = getattr(compile_fn, "__code__", None), getattr(compile_fn, "__closure__", None)
    if code is None or cells is None:
        return None
    free = dict(zip(code.co_freevars, (c.cell_contents for c in cells), strict=True))
    src, target, options = free.get("src"), free.get("target"), free.get("options")
    if src is None or target is None or options is None:
        return None
    ref = _kernel_ref(getattr(src, "fn", None))
    if ref is None:
        return None
    try:
        constants = {k: _ref(v) for k, v in src.constants.items()}
        source = (type(src).__module__, type(src).__qualname__)
        box = (target.backend, target.arch, target.warp_size)
        from triton import knobs

        return pickle.dumps(
            (*ref, source, src.signature, constants, src.attrs, dict(options.__dict__), box, knobs.cache.dir)
        )
    except Exception:  # noqa: BLE001 - anything unpicklable compiles on a thread instead
        return None


class Offloading(Executor):
    """The executor for Triton's ``AsyncCompileMode``: convgemm's kernels compile on the
    workers, and the rest on ``threads``. ``sent`` counts the compiles sent to workers."""

    def __init__(self, threads: Executor, pool: CompilePool) -> None:
        self.threads, self.pool, self.sent = threads, pool, 0

    def submit(self, fn, /, *args, **kwargs) -> Future:
        job = job_of(fn) if not args and not kwargs else None
        if job is None:
            return self.threads.submit(fn, *args, **kwargs)
        self.sent += 1
        return self.pool.waiters.submit(self._remote, job, fn)

    def _remote(self, job: bytes, fn):
        # whatever the worker says, Triton's own compile runs next: a cache hit after a worker's
        # compile, and otherwise the compile here, which raises the error where Triton expects it
        self.pool.call(job)
        return fn()


# --- the launchers: built beside the compiles, not in the first launches ----------------------

_launchers: set = set()
_launchers_lock = threading.Lock()


def prebuild_launcher(kernel) -> bool:
    """Build (or find in Triton's cache) the host launcher of a compiled kernel now; True if this
    call built or loaded it, False if another did or it failed.

    Triton 3.6 launches a kernel through a C extension generated from the kernel's signature and
    compiled with the system's C compiler on the kernel's first launch (``CudaLauncher``,
    ``compile_module_from_src``), then kept in the on-disk cache. From an empty cache a new
    shape's candidates need several launchers; built one after another in the tuner's first
    launches they took up to 3.2 s of a first call (session 26's ``load_s``, the whole suite from
    empty caches). Built here as each candidate's compile finishes (``Prebuilding``'s threads),
    they overlap the other compiles (the C compiler runs in a subprocess, without the GIL); on
    the H200, 26 small-channel and seed shapes from empty caches went from 76.2 to 51.9 s of
    first-call tuning in all (session 26). The launcher's
    source depends only on the signature and the descriptors' metadata, so candidates that share
    those share one build. Nothing here touches the GPU: the first launch still loads the module."""
    if kernel is None:
        return False
    try:
        from triton.runtime import driver

        src, metadata = kernel.src, kernel.metadata
        key = (
            tuple((k, str(v)) for k, v in src.signature.items()),
            repr(getattr(metadata, "tensordesc_meta", None)),
        )
        with _launchers_lock:
            if key in _launchers:
                return False
            _launchers.add(key)
        driver.active.launcher_cls(src, metadata)
        return True
    except Exception:  # noqa: BLE001 - the first launch builds it then, and reports any error
        return False


class Prebuilding(Executor):
    """Wraps the executor of the tuner's ``AsyncCompileMode``: each compile's future completes
    only after ``prebuild_launcher`` has run on its kernel, on threads of its own (a compile
    that finishes at once, a cache hit, would otherwise build on the submitting thread). The
    ``inner`` executor gets Triton's closures as they are (``Offloading`` reads them)."""

    def __init__(self, inner: Executor, threads: int = 8) -> None:
        self.inner = inner
        self.builders = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="convgemm-launcher")

    def submit(self, fn, /, *args, **kwargs) -> Future:
        outer: Future = Future()

        def finish(f: Future) -> None:
            try:
                kernel = f.result()
            except BaseException as e:  # noqa: BLE001 - handed on to the compile's waiter
                outer.set_exception(e)
                return
            prebuild_launcher(kernel)
            outer.set_result(kernel)

        self.inner.submit(fn, *args, **kwargs).add_done_callback(lambda f: self.builders.submit(finish, f))
        return outer

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.builders.shutdown(wait=wait, cancel_futures=cancel_futures)


def usable() -> bool:
    """Whether worker compiles can pay off here: Triton's on-disk cache in use (not
    ``TRITON_ALWAYS_COMPILE``), and a pool configured."""
    from triton import knobs

    return not knobs.compilation.always_compile and pool_size() > 0


def prestart() -> None:
    """Start the compile workers now, where tuning is on and they would be used: for commands that
    tune many shapes (``convgemm bench``, ``convgemm tune``), so that they import while the
    command sets up and the first shape tuned already has them."""
    import torch

    from .autotune import autotune_enabled

    if autotune_enabled() and torch.cuda.is_available() and usable():
        get_pool()
        # The hash of Triton's own sources and libtriton (``triton_key``, in every kernel's cache
        # key) is computed once a process, on its first compile: 1.0 s of the first shape's
        # first call on the H200's host (tools/first_call.py, session 27). Computed here on a
        # thread, it overlaps the command's setup; a first compile that comes sooner computes
        # it again itself (lru_cache holds no lock), which costs what it did before.
        threading.Thread(target=_warm_triton_key, daemon=True, name="convgemm-triton-key").start()


def _warm_triton_key() -> None:
    try:
        from triton.runtime.cache import triton_key

        triton_key()
    except Exception:  # noqa: BLE001, S110 - the first compile computes it and reports any failure
        pass
