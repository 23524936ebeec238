"""Where a new shape's first-call tuning time goes (GPU): the tuner's parallel compile pass, split.

    PYTHONPATH=src python3 tools/tune_time.py --shape 64,1024,7,7,1024,3,3,1,1,1,32 --workers 1 4 16

Issue 4 asks for 3 s per new shape. Session 23 found about 35 shapes over that in the tuner logs,
most with 14-37 candidate pairs. The GEMM kernels compile in 0.5-0.9 s each on the dev CPU, with
0.07-0.2 s in Triton's frontend. The question is what the pool's threads serialise. For each
worker count, every JIT function's in-memory kernel cache is cleared (``TRITON_ALWAYS_COMPILE=1``
bypasses the disk cache), and ``autotune._compile_all`` is timed in parts:

- submit: the main thread's pass over the pairs (each algorithm's ``run`` under ``COMPILE_ONLY``:
  arguments, descriptors, derived weights, Triton's binder), which holds the GIL;
- wait: until the pool has compiled everything;
- the sum and the longest of the compiles themselves (each JIT function's ``compile``): a sum far
  above the wall time means they overlapped;
- load: the first real launch of every pair, as ``_tune`` does next (module loads, and any
  compile the parallel pass missed).
"""

from __future__ import annotations

import os

os.environ["TRITON_ALWAYS_COMPILE"] = "1"

import argparse  # noqa: E402
import gc  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402
import triton.runtime._async_compile as ac  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", required=True, help="N,C,H,W,K,R,S[,stride,pad,dil,groups] as the suites write it")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 4, 16])
    a = ap.parse_args()
    from convgemm.bench.suites import parse_shape
    from convgemm.conv.fprop import ALGORITHMS
    from convgemm.matmul.launch import Launch
    from convgemm.problem import ConvProblem
    from convgemm.tune import autotune

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
    compile_fn = triton.compile

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

    # each JIT function holds the compiler as an instance attribute (``self.compile``)
    jits = [o for o in gc.get_objects() if isinstance(o, JITFunction)]
    for f in jits:
        f.compile = timed_compile
    ac.AsyncCompileMode.__exit__ = timed_exit
    cpu_count = os.cpu_count
    try:
        for n in a.workers:
            for f in jits:
                f.device_caches.clear()
            compiles.clear()
            os.cpu_count = lambda n=n: n
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            autotune._compile_all(prob, pairs, x, w, None, y)
            t1 = time.perf_counter()
            os.cpu_count = cpu_count
            for algo, cfg in pairs:
                try:
                    algo.run(prob, x, w, None, y, cfg, Launch())
                except Exception:  # noqa: BLE001, S112 - the tuner skips it too
                    continue
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            total = sum(d for _, d in compiles)
            longest = max(compiles, key=lambda c: c[1]) if compiles else ("-", 0.0)
            print(f"workers {n:2d}: compile pass {t1 - t0:5.2f} s (submit {marks['submitted'] - t0:5.2f}, "
                  f"wait {t1 - marks['submitted']:5.2f}), {len(compiles)} compiles summing {total:5.2f} s, "
                  f"longest {longest[1]:4.2f} s ({longest[0]}); load {t2 - t1:5.2f} s")  # fmt: skip
    finally:
        os.cpu_count = cpu_count
        for f in jits:
            f.compile = compile_fn
        ac.AsyncCompileMode.__exit__ = exit_fn


if __name__ == "__main__":
    main()
