"""Host overhead per call: wall-clock time of many back-to-back calls on a tiny shape (GPU).

A tiny convolution's kernel runs in a few microseconds, so the time per call is what the host
spends: validation, planning, descriptor encoding and the launch itself.

    PYTHONPATH=src python3 tools/overhead.py              # GPU: every algorithm, the op, autograd
    PYTHONPATH=src python3 tools/overhead.py --dispatch   # any machine: the operators' dispatch cost

``--dispatch`` replaces the kernels behind ``torch.ops.convgemm.*`` with stubs that return a
preallocated tensor and times the operator calls against calling the stubbed implementation
directly: what the dispatcher and convgemm's registrations cost per call, nothing else (the
path a compiled graph takes; run it on the CPU, where no kernel can hide in it).
"""

import os
import sys
import time

if "--dispatch" in sys.argv and "TRITON_INTERPRET" not in os.environ:
    os.environ["TRITON_INTERPRET"] = "1"  # before convgemm is imported; no kernel runs anyway

import torch
import torch.nn.functional as F

import convgemm


def per_call_us(fn, n=500):
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def dispatch_overhead(n: int = 20000) -> None:
    from convgemm import ops

    out = torch.empty(1)
    ops.conv2d_forward = ops.conv2d_input = ops.conv2d_weight = lambda *a, **k: out

    def us(fn):
        for _ in range(200):
            fn()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t) / n * 1e6

    x, w = torch.empty(2, 4, 4, 4), torch.empty(4, 4, 3, 3)
    a = (x, w, None, [1, 1], [1, 1, 1, 1], [1, 1], 1, "auto")
    g = ([1, 1], [1, 1, 1, 1], [1, 1], 1)
    for _ in range(2):  # twice: the machine's noise shows as the difference
        print(f"torch.ops.convgemm.conv2d        {us(lambda: torch.ops.convgemm.conv2d.default(*a)):6.2f} us/call")
        with torch.no_grad():
            print(f"  under no_grad                  {us(lambda: torch.ops.convgemm.conv2d.default(*a)):6.2f} us/call")
        print(f"torch.ops.convgemm.conv2d_input  "
              f"{us(lambda: torch.ops.convgemm.conv2d_input.default([2, 4, 4, 4], w, x, *g)):6.2f} us/call")  # fmt: skip
        print(f"torch.ops.convgemm.conv2d_weight "
              f"{us(lambda: torch.ops.convgemm.conv2d_weight.default(x, [4, 4, 3, 3], x, *g)):6.2f} us/call")  # fmt: skip
        print(f"the implementation, called directly {us(lambda: ops._conv2d(*a)):6.2f} us/call")


if __name__ == "__main__" and "--dispatch" in sys.argv:
    dispatch_overhead()
elif __name__ == "__main__":
    x = torch.randn(1, 64, 8, 8, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    w1 = torch.randn(64, 64, 1, 1, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    b = torch.randn(64, device="cuda", dtype=torch.bfloat16)
    xd = torch.randn(1, 64, 8, 8, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    wd = torch.randn(64, 1, 3, 3, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    wg = torch.randn(64, 4, 3, 3, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    ws = torch.randn(64, 3, 3, 3, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    xs = torch.randn(1, 3, 8, 8, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    # (input, weight, padding, groups) each algorithm accepts
    calls = {
        "gemm_1x1": (x, w1, 0, 1),
        "depthwise": (xd, wd, 1, 64),
        "grouped": (x, wg, 1, 16),
        "small_k": (xs, ws, 1, 1),
    }
    for algo in convgemm.algorithms():
        xi, wt, pad, g = calls.get(algo, (x, w, 1, 1))
        fn = lambda a=algo, xi=xi, wt=wt, pad=pad, g=g: convgemm.conv2d(xi, wt, b, padding=pad, groups=g, algorithm=a)  # noqa: E731
        try:
            print(f"convgemm {algo:18s} {per_call_us(fn):7.1f} us/call")
        except ValueError as e:  # an algorithm for other shapes (head_1x1, the NCHW kernels)
            print(f"convgemm {algo:18s}   n/a ({str(e)[:60]})")
    print(f"torch F.conv2d (cuDNN) 3x3   {per_call_us(lambda: F.conv2d(x, w, b, padding=1)):7.1f} us/call")
    print(f"torch.empty                  {per_call_us(lambda: torch.empty_like(x)):7.1f} us/call")

    # the training and torch.compile paths: the custom op, and autograd forward + backward
    xg, wg2 = x.clone().requires_grad_(), w.clone().requires_grad_()
    dy = torch.randn_like(F.conv2d(x, w, padding=1))
    op = torch.ops.convgemm.conv2d
    with torch.no_grad():
        print(
            f"torch.ops.convgemm.conv2d    {per_call_us(lambda: op(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 1, 'auto')):7.1f} us/call"
        )
        # what an Inductor-compiled graph calls instead of the op (convgemm/_inductor.py)
        from convgemm._inductor import extern_conv2d

        kw = dict(stride=[1, 1], padding=[1, 1, 1, 1], dilation=[1, 1], groups=1, algorithm="auto")
        print(f"extern_conv2d (compiled)     {per_call_us(lambda: extern_conv2d(x, w, b, **kw)):7.1f} us/call")
    print(
        f"convgemm fwd+bwd (autograd)  {per_call_us(lambda: convgemm.conv2d(xg, wg2, padding=1).backward(dy)):7.1f} us/call"
    )
    print(f"cuDNN    fwd+bwd (autograd)  {per_call_us(lambda: F.conv2d(xg, wg2, padding=1).backward(dy)):7.1f} us/call")
    print(
        f"convgemm dgrad + wgrad       {per_call_us(lambda: (convgemm.conv2d_input(x.shape, w, dy, padding=1), convgemm.conv2d_weight(x, w.shape, dy, padding=1))):7.1f} us/call"
    )

    import cProfile
    import pstats
    import sys

    if "--profile" in sys.argv:
        with torch.no_grad():
            fns = {"op": lambda: op(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 1, "auto")}
        # the autograd engine runs a CUDA backward on its own thread, out of cProfile's sight:
        # first time the Python backward itself there, against the whole call
        from convgemm import ops

        inner = ops._Conv2dFunction.backward
        spent = [0.0, 0]

        def timed(ctx, grad):
            t = time.perf_counter()
            r = inner(ctx, grad)
            spent[0] += time.perf_counter() - t
            spent[1] += 1
            return r

        ops._Conv2dFunction.backward = staticmethod(timed)
        for threads in (True, False):
            torch.autograd.set_multithreading_enabled(threads)
            spent[:] = [0.0, 0]
            whole = per_call_us(lambda: convgemm.conv2d(xg, wg2, padding=1).backward(dy))
            print(
                f"fwd+bwd {'device thread' if threads else 'one thread   '} {whole:7.1f} us/call, "
                f"of which Python backward {spent[0] / max(spent[1], 1) * 1e6:6.1f} us"
            )
        ops._Conv2dFunction.backward = staticmethod(inner)
        fns["autograd"] = lambda: convgemm.conv2d(xg, wg2, padding=1).backward(dy)
        print(f"convgemm fwd+bwd, one thread {per_call_us(fns['autograd']):7.1f} us/call")
        for algo in ("autograd", "op"):
            pr = cProfile.Profile()
            fn = fns.get(algo) or (lambda a=algo: convgemm.conv2d(x, w, b, padding=1, algorithm=a))  # noqa: E731
            fn()
            pr.enable()
            for _ in range(2000):
                fn()
            pr.disable()
            torch.cuda.synchronize()
            print(f"--- profile of 2000 calls, {algo} (tottime, top 18)")
            pstats.Stats(pr).sort_stats("tottime").print_stats(18)
