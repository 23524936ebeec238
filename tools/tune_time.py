"""Where a new shape's first-call tuning time goes (GPU): the tuner's compile pass on threads
and on compile worker processes.

    PYTHONPATH=src python3 tools/tune_time.py --shape 64,1024,7,7,1024,3,3,1,1,1,32 --workers 1 16 --procs 8 16

Issue 4 asks for 3 s per new shape. Session 23 found about 35 shapes over that in the tuner logs,
most with 14-37 candidate pairs; session 24 timed 20 implicit-GEMM pairs at 11.3 s on one thread
and 3.0 s on 16. Each run here starts from an empty Triton cache directory and cleared in-memory
kernel caches, and times ``autotune._compile_all`` in parts:

- submit: the main thread's pass over the pairs (each algorithm's ``run`` under ``COMPILE_ONLY``:
  arguments, descriptors, derived weights, Triton's binder), which holds the GIL;
- wait: until every compile is done;
- the count, sum and longest of the compiles in this process (``triton.compiler.compile``; with
  worker processes these are the cache reads after each worker's compile);
- load: the first real launch of every pair, as ``_tune`` does next (module loads, and any
  compile the parallel pass missed).

``--workers`` runs use threads only (``CONVGEMM_COMPILE_PROCS=0``); ``--procs N ...`` then starts N
compile workers, waits until they are ready (the time is printed: a process pays it once) and
runs once more.
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import threading
import time

import torch
import triton
import triton.compiler as tc
import triton.runtime._async_compile as ac
from triton.runtime.jit import JITFunction


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", required=True, help="N,C,H,W,K,R,S[,stride,pad,dil,groups] as the suites write it")
    ap.add_argument("--workers", type=int, nargs="*", default=[1, 16], help="thread counts to run")
    ap.add_argument("--procs", type=int, nargs="*", default=[8, 16], help="compile worker process counts to run")
    a = ap.parse_args()
    from convgemm.bench.suites import parse_shape
    from convgemm.conv.fprop import ALGORITHMS
    from convgemm.matmul.launch import Launch
    from convgemm.problem import ConvProblem
    from convgemm.tune import autotune, compile_pool

    try:  # the Gluon kernels' modules load on first use: load them now, so their compiles are timed
        import convgemm.conv.ws3d  # noqa: F401
        import convgemm.conv.ws_wgrad  # noqa: F401
    except ImportError:
        pass

    shp = parse_shape(a.shape)
    x = torch.randn(shp.n, shp.c, shp.h, shp.w, device="cuda", dtype=torch.bfloat16)
    x = x.to(memory_format=torch.channels_last)
    w = torch.randn(shp.k, shp.c // shp.groups, shp.r, shp.s, device="cuda", dtype=torch.bfloat16)
    w = w.to(memory_format=torch.channels_last)
    kw = dict(stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
    prob = ConvProblem.from_tensors(x, w, None, **kw)
    cands = [ALGORITHMS[n] for n in autotune._HEURISTIC_ORDER
             if ALGORITHMS[n].reads_nchw == prob.input_nchw and ALGORITHMS[n].supports(prob) is None]  # fmt: skip
    pairs = autotune.tuning_pairs(prob, cands)
    y = torch.empty(shp.n, shp.k, prob.p, prob.q, device="cuda", dtype=x.dtype).to(memory_format=torch.channels_last)
    print(f"== {prob.describe()}: {len(pairs)} pairs over {sorted({p[0].name for p in pairs})}")

    compiles, lock = [], threading.Lock()
    compile_fn = tc.compile

    def timed_compile(src, *args, **kwargs):
        t = time.perf_counter()
        try:
            return compile_fn(src, *args, **kwargs)
        finally:
            with lock:
                compiles.append((getattr(getattr(src, "fn", None), "__name__", "?"), time.perf_counter() - t))

    marks = {}
    exit_fn = ac.AsyncCompileMode.__exit__

    def timed_exit(self, *args):
        marks["submitted"] = time.perf_counter()
        return exit_fn(self, *args)

    def run(label: str) -> None:
        triton.knobs.cache.dir = tempfile.mkdtemp(prefix="tune-time-")
        for f in [o for o in gc.get_objects() if isinstance(o, JITFunction)]:
            f.device_caches.clear()  # its binder picks up ``triton.compiler.compile`` anew
        compiles.clear()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        sent = autotune._compile_all(prob, pairs, x, w, None, y)
        t1 = time.perf_counter()
        for algo, cfg in pairs:
            try:
                algo.run(prob, x, w, None, y, cfg, Launch())
            except Exception:  # noqa: BLE001, S112 - the tuner skips it too
                continue
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        total = sum(d for _, d in compiles)
        longest = max(compiles, key=lambda c: c[1]) if compiles else ("-", 0.0)
        print(f"{label}: compile pass {t1 - t0:5.2f} s (submit {marks['submitted'] - t0:5.2f}, "
              f"wait {t1 - marks['submitted']:5.2f}), {sent} sent to workers, {len(compiles)} compiles here "
              f"summing {total:5.2f} s, longest {longest[1]:4.2f} s ({longest[0]}); load {t2 - t1:5.2f} s")  # fmt: skip

    tc.compile = timed_compile
    ac.AsyncCompileMode.__exit__ = timed_exit
    cpu_count = os.cpu_count
    try:
        os.environ["CONVGEMM_COMPILE_PROCS"] = "0"
        for n in a.workers:
            os.cpu_count = lambda n=n: n
            run(f"threads {n:2d}")
        os.cpu_count = cpu_count
        for n in a.procs:
            if compile_pool._pool is not None:
                compile_pool._pool.close()
                compile_pool._pool = None
            os.environ["CONVGEMM_COMPILE_PROCS"] = str(n)
            t = time.perf_counter()
            pool = compile_pool.get_pool()
            while not pool.ready():
                if any(wk.failed for wk in pool.workers):
                    raise SystemExit("tune_time: a compile worker failed to start")
                time.sleep(0.02)
            print(f"{n} compile workers ready in {time.perf_counter() - t:.2f} s")
            run(f"procs {n:3d}")
            run(f"procs {n:3d}")
    finally:
        os.cpu_count = cpu_count
        tc.compile = compile_fn
        ac.AsyncCompileMode.__exit__ = exit_fn


if __name__ == "__main__":
    main()
