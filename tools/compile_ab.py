"""CRAFT under torch.compile: wall and host time per iteration of one variant (GPU).

    CONVGEMM_INDUCTOR_LOWERING=0|1 PYTHONPATH=src python3 tools/compile_ab.py [--fuse] [--unpatched]
        [--folded] [--size 768] [--dtype bf16] [--profile]

Run it in alternating processes with the lowering on and off (the variable is read at import)
to see what the direct call of ``extern_conv2d`` saves in a compiled graph against Inductor's
fallback through ``torch.ops.convgemm.*``. ``--unpatched`` times cuDNN's model as torch.compile
takes it (``--folded``: with its batch norms folded first). Prints the wall time (alternating-round
median, ``runner.bench_rounds``), the host time per iteration (enqueue without synchronising),
and how the compiled wrapper calls convgemm.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch._inductor.config

import convgemm
from convgemm.bench.models import fold_batch_norms, host_us
from convgemm.bench.runner import DTYPES, bench_rounds
from convgemm.models.craft import CRAFT


def split_host(compiled, x, n: int = 10) -> None:
    """Where the compiled wrapper's host time goes: each lowered convgemm function wrapped in a
    timer (the wrapper looks them up on every call), ``n`` iterations enqueued without
    synchronising, and the TMA descriptor encodes they caused."""
    import time

    from torch._inductor.select_algorithm import extern_kernels

    from convgemm.matmul.launch import DESC_MISSES

    spent: dict[str, list] = {}
    real = {k: getattr(extern_kernels, k) for k in dir(extern_kernels) if k.startswith("convgemm_")}

    def timed(name, fn):
        acc = spent.setdefault(name, [0.0, 0])

        def call(*a, **k):
            t = time.perf_counter()
            r = fn(*a, **k)
            acc[0] += time.perf_counter() - t
            acc[1] += 1
            return r

        return call

    for k, fn in real.items():
        setattr(extern_kernels, k, timed(k, fn))
    misses = sum(DESC_MISSES.values())
    try:
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            compiled(x)
        host = (time.perf_counter() - t) / n * 1e6
        torch.cuda.synchronize()
    finally:
        for k, fn in real.items():
            setattr(extern_kernels, k, fn)
    inside = sum(v[0] for v in spent.values()) / n * 1e6
    print(f"  host {host:.0f} us/iter, of which {inside:.0f} us in convgemm's functions; "
          f"TMA descriptor encodes per iter: {(sum(DESC_MISSES.values()) - misses) / n:.1f}")  # fmt: skip
    for k, (sec, calls) in sorted(spent.items()):
        if calls:
            print(f"  {k:24s} {calls // n:3d} calls/iter  {sec / calls * 1e6:6.1f} us/call")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fuse", action="store_true", help="convgemm.nn.fuse the patched model first")
    ap.add_argument("--unpatched", action="store_true", help="cuDNN's model")
    ap.add_argument("--folded", action="store_true", help="with --unpatched: batch norms folded first")
    ap.add_argument("--size", type=int, default=768)
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    ap.add_argument("--profile", action="store_true", help="then cProfile 20 iterations (host functions)")
    a = ap.parse_args()
    dtype = DTYPES[a.dtype]
    torch.backends.cudnn.benchmark = True
    model = CRAFT().eval().cuda().to(dtype).to(memory_format=torch.channels_last)
    if a.unpatched:
        if a.folded:
            model = fold_batch_norms(model)
        what = "cuDNN" + (" folded" if a.folded else "")
    else:
        model = convgemm.patch(model)
        if a.fuse:
            model = convgemm.nn.fuse(model)
        what = "convgemm" + (" fused" if a.fuse else "")
    x = torch.randn(1, 3, a.size, a.size, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    from torch._inductor.utils import run_and_get_code

    # compile here: Inductor's on-disk cache does not know whether the lowering was on
    torch._inductor.config.fx_graph_cache = False
    compiled = torch.compile(model)
    with torch.no_grad():
        _, code = run_and_get_code(compiled, x)
        lines = "\n".join(code).splitlines()
        # calls only: comments and assertions name the operators too
        code_lines = [line.split("#", 1)[0] for line in lines if "assert_size_stride" not in line]
        extern = sum("extern_kernels.convgemm_" in line for line in code_lines)
        ops = sum("torch.ops.convgemm." in line for line in code_lines)
        for _ in range(3):
            compiled(x)
        wall = bench_rounds({"it": lambda: compiled(x)}, rep_ms=600, timer="do_bench")["it"]
        host = min(host_us(lambda: compiled(x), 10) for _ in range(5))
        if extern:
            split_host(compiled, x)
        if a.profile:
            import cProfile
            import pstats

            pr = cProfile.Profile()
            pr.enable()
            for _ in range(20):
                compiled(x)
            pr.disable()
            torch.cuda.synchronize()
            print("--- cProfile of 20 iterations (tottime, top 25; the profiler inflates small calls)")
            pstats.Stats(pr).sort_stats("tottime").print_stats(25)
    lowering = os.environ.get("CONVGEMM_INDUCTOR_LOWERING", "1")
    print(f"{what:16s} compile  lowering={lowering}  wall {wall:7.1f} us  host {host:7.1f} us/iter  "
          f"wrapper: {extern} direct calls, {ops} operator calls")  # fmt: skip


if __name__ == "__main__":
    main()
