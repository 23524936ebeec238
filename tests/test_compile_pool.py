"""The tuner's compile workers (``convgemm.tune.compile_pool``), without a GPU: a kernel compiled
for sm_90 in a worker is found by Triton's own compile in the tuner's process, the worker
protocol's failures come back as messages, and ``CONVGEMM_COMPILE_PROCS`` is checked."""

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from convgemm.tune import compile_pool

ROOT = Path(__file__).resolve().parents[1]


def _env(tmp_path) -> dict:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env.pop("TRITON_ALWAYS_COMPILE", None)
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return env


def test_a_worker_compile_is_the_cache_entry_the_tuner_reads(tmp_path):
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "fixtures" / "compile_pool_check.py")],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout)
    # the GEMM kernel takes its loaders as constexpr JIT functions: they travel by name
    assert r["jit_constants"] >= 4
    assert r["job"] and not r["outside_job"]
    assert r["reply"] is None
    # one cache entry, written by the worker; Triton's compile in this process added none
    assert len(r["before"]) == 1
    assert r["after"] == r["before"]
    assert r["name"] == "gemm_kernel" and r["cubin"] > 0


@pytest.fixture
def pool(monkeypatch, tmp_path):
    for k, v in _env(tmp_path).items():
        monkeypatch.setenv(k, v)
    p = compile_pool.CompilePool(1, "cuda,90,32")  # the warm-up sets up the sm_90 backend
    yield p
    p.close()


def test_worker_errors_come_back_as_messages(pool):
    assert pool.workers[0].ready.wait(120) and pool.ready()
    job = ("convgemm.no_such_module", "k", ("x", "y"), {}, {}, {}, {}, ("cuda", 90, 32), "/nonexistent")
    reply = pool.call(pickle.dumps(job))
    assert reply.startswith("ModuleNotFoundError")
    assert pool.call(pickle.dumps(("too", "few"))).startswith("TypeError")
    pool.workers[0].proc.kill()
    pool.workers[0].proc.wait()
    assert pool.call(pickle.dumps(())).startswith("compile worker failed")
    assert pool.call(pickle.dumps(())) == "no compile worker is running"
    assert not pool.ready()


def test_a_failed_warm_up_leaves_the_worker_serving(monkeypatch, tmp_path):
    for k, v in _env(tmp_path).items():
        monkeypatch.setenv(k, v)
    p = compile_pool.CompilePool(1, "cuda,not-an-arch,32")
    try:
        assert p.workers[0].ready.wait(120) and p.ready()
        assert p.call(pickle.dumps(("too", "few"))).startswith("TypeError")
    finally:
        p.close()


def test_workers_that_cannot_start_leave_threads_with_one_warning(monkeypatch):
    monkeypatch.setenv("CONVGEMM_COMPILE_PROCS", "2")
    monkeypatch.setattr(compile_pool, "_pool", None)
    monkeypatch.setattr(compile_pool, "_start_failed", False)
    monkeypatch.setattr(compile_pool.sys, "executable", "/nonexistent/python")
    with pytest.warns(RuntimeWarning, match="compile worker processes"):
        assert compile_pool.get_pool() is None
    assert compile_pool.get_pool() is None  # no second attempt, no second warning


@pytest.mark.parametrize("tuning", [True, False])
def test_prestart_starts_the_workers_only_where_tuning_is_on(monkeypatch, tuning):
    import torch

    from convgemm.tune import autotune

    started = []

    class FakePool:
        def __init__(self, n, target=""):
            started.append(n)

    monkeypatch.setenv("CONVGEMM_COMPILE_PROCS", "3")
    monkeypatch.setattr(compile_pool, "_pool", None)
    monkeypatch.setattr(compile_pool, "_start_failed", False)
    monkeypatch.setattr(compile_pool, "CompilePool", FakePool)
    monkeypatch.setattr(compile_pool, "usable", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(autotune, "autotune_enabled", lambda: tuning)
    from triton.runtime.cache import triton_key

    triton_key.cache_clear()
    compile_pool.prestart()
    assert started == ([3] if tuning else [])
    # with the workers, Triton's source hash is computed on a thread (it is 1 s of a first
    # compile on the H200's host); without tuning, nothing is started
    import threading

    for t in threading.enumerate():
        if t.name == "convgemm-triton-key":
            t.join(timeout=60)
    assert triton_key.cache_info().currsize == (1 if tuning else 0)


@pytest.mark.parametrize(("value", "n"), [("0", 0), ("3", 3), (" 12 ", 12)])
def test_pool_size_from_the_environment(monkeypatch, value, n):
    monkeypatch.setenv("CONVGEMM_COMPILE_PROCS", value)
    assert compile_pool.pool_size() == n


@pytest.mark.parametrize("value", ["-1", "four", "2.5"])
def test_bad_pool_size_says_what_to_set(monkeypatch, value):
    monkeypatch.setenv("CONVGEMM_COMPILE_PROCS", value)
    with pytest.raises(ValueError, match="CONVGEMM_COMPILE_PROCS"):
        compile_pool.pool_size()


def test_default_pool_size_follows_the_cpus(monkeypatch):
    monkeypatch.delenv("CONVGEMM_COMPILE_PROCS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(2)), raising=False)
    assert compile_pool.pool_size() == 0
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert compile_pool.pool_size() == 8


@pytest.mark.gpu
def test_a_new_shape_tunes_on_the_workers(monkeypatch, tmp_path):
    """A first call's tuning with a ready pool: the candidates compile in the workers (the
    tuner's log says how many), into a fresh Triton cache, and the tuned call is right."""
    import gc

    import torch
    import torch.nn.functional as F
    import triton
    from triton.runtime.jit import JITFunction

    import convgemm
    from convgemm import functional
    from convgemm.tune import autotune

    log = tmp_path / "tune.jsonl"
    for k, v in _env(tmp_path).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "1")
    monkeypatch.setenv("CONVGEMM_CACHE_DIR", str(tmp_path / "tune"))
    monkeypatch.setenv("CONVGEMM_COMPILE_PROCS", "2")
    monkeypatch.setenv("CONVGEMM_TUNE_LOG", str(log))
    monkeypatch.setattr(autotune, "_disk", None)
    monkeypatch.setattr(autotune, "_memo", {})
    monkeypatch.setattr(functional, "_plans", {})
    monkeypatch.setattr(triton.knobs.cache, "dir", str(tmp_path / "triton"))
    for f in [o for o in gc.get_objects() if isinstance(o, JITFunction)]:
        f.device_caches.clear()  # every candidate compiles anew (later tests reload theirs)
    pool = compile_pool.CompilePool(2, compile_pool._current_target())
    monkeypatch.setattr(compile_pool, "_pool", pool)
    try:
        assert all(w.ready.wait(120) for w in pool.workers) and pool.ready()
        x = torch.randn(4, 24, 20, 20, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
        w = torch.randn(40, 24, 3, 3, device="cuda", dtype=torch.bfloat16)
        y = convgemm.conv2d(x, w, padding=1)
        ref = F.conv2d(x.double(), w.double(), padding=1)
        torch.testing.assert_close(y.double(), ref, rtol=2e-2, atol=2e-1)
    finally:
        pool.close()
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    tuned = [r["tune"] for r in rows if "tune" in r]
    assert tuned and tuned[-1]["compiled_in_processes"] > 0
    assert tuned[-1]["ready"] >= 1


class _StubDriver:
    """Stands in for Triton's active driver: records each launcher built, and fails on request."""

    def __init__(self, fail=False):
        self.built, self.fail = [], fail

    def launcher_cls(self, src, metadata):
        if self.fail:
            raise RuntimeError("no C compiler")
        self.built.append((tuple(src.signature.items()), metadata.tensordesc_meta))


class _Kernel:
    def __init__(self, signature, meta=None):
        self.src = type("Src", (), {"signature": signature})()
        self.metadata = type("Meta", (), {"tensordesc_meta": meta})()


def test_launchers_are_built_once_per_signature(monkeypatch):
    from triton.runtime import driver

    stub = _StubDriver()
    monkeypatch.setattr(driver, "_active", stub)
    monkeypatch.setattr(compile_pool, "_launchers", set())
    a = {"x": "*bf16", "n": "i32", "BLOCK": "constexpr"}
    assert compile_pool.prebuild_launcher(_Kernel(a))
    assert not compile_pool.prebuild_launcher(_Kernel(dict(a)))  # same source: one build
    assert compile_pool.prebuild_launcher(_Kernel({**a, "n": "i64"}))
    assert compile_pool.prebuild_launcher(_Kernel(a, meta=[{"swizzle": 128}]))  # descriptors' metadata
    assert len(stub.built) == 3
    assert not compile_pool.prebuild_launcher(None)  # a compile hook's None: nothing to build
    stub.fail = True
    assert not compile_pool.prebuild_launcher(_Kernel({"y": "*fp16"}))  # errors wait for the launch


def test_prebuilding_executor_finishes_a_compile_after_its_launcher(monkeypatch):
    """The wrapped future completes with the compile's kernel once its launcher is built, or with
    the compile's error; the inner executor gets the closure itself."""
    from concurrent.futures import ThreadPoolExecutor

    from triton.runtime import driver

    stub = _StubDriver()
    monkeypatch.setattr(driver, "_active", stub)
    monkeypatch.setattr(compile_pool, "_launchers", set())
    seen = []

    class Inner(ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):
            seen.append(fn)
            return super().submit(fn, *args, **kwargs)

    def compile_ok():
        return _Kernel({"x": "*fp32"})

    def compile_bad():
        raise ValueError("bad kernel")

    with Inner(2) as inner, compile_pool.Prebuilding(inner) as ex:
        ok, bad = ex.submit(compile_ok), ex.submit(compile_bad)
        kernel = ok.result(timeout=30)
        with pytest.raises(ValueError, match="bad kernel"):
            bad.result(timeout=30)
    assert seen == [compile_ok, compile_bad]
    assert isinstance(kernel, _Kernel) and stub.built == [((("x", "*fp32"),), None)]


def test_a_worker_whose_tuner_has_gone_exits_quietly(tmp_path):
    """A short script that ends while its workers still start: the worker's ready byte meets a
    closed pipe, and it exits without a traceback on the terminal."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "from convgemm.tune.compile_pool import serve; serve('')"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(tmp_path),
    )
    proc.stdout.close()  # the tuner's end of the pipe, gone before the worker is ready
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()[-2000:]
