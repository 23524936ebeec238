"""Where a network's host time goes, without a profiler's distortion (GPU).

    PYTHONPATH=src python3 tools/host_split.py --model craft [--fuse] [--unpatched]

1. Enqueue time: N warm iterations issued back to back with no synchronisation, timed until the
   last one is issued (the host's own cost per iteration), then until the GPU finishes (the
   wall time). Host close to wall means the network is host-bound.
2. Nested timers (patched models): the mean wall time per call inside ``nn.Conv2d.forward``,
   ``convgemm.conv2d``, ``conv2d_forward``, ``Launch.fast`` and ``_runtime.empty``, so the
   per-convolution host cost splits into module, wrapper, plan and launch parts.
3. Reference costs of the same host: a bare ``nn.Module`` call, ``torch.empty``, cuDNN's
   ``F.conv2d`` on a tiny layer.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(__file__))
from profile_model import add_model_args, warm_step  # noqa: E402


def enqueue(step, n: int) -> tuple[float, float]:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return (t1 - t0) / n * 1e6, (t2 - t0) / n * 1e6


def timed(owner, name: str, acc: dict, label: str):
    inner = getattr(owner, name)

    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            a = acc.setdefault(label, [0.0, 0])
            a[0] += time.perf_counter() - t
            a[1] += 1

    setattr(owner, name, wrapper)
    return lambda: setattr(owner, name, inner)


def per_call(fn, n: int = 2000) -> float:
    from convgemm.bench.models import host_us

    for _ in range(50):
        fn()
    return host_us(fn, n)


def main() -> None:
    ap = argparse.ArgumentParser()
    add_model_args(ap, iters=20, top=0)
    a = ap.parse_args()
    step = warm_step(a)
    for _ in range(2):
        host, wall = enqueue(step, a.iters)
        print(f"== {a.model}{' fused' if a.fuse else ''} {'cudnn' if a.unpatched else 'convgemm'}: "
              f"host {host:.0f} us/iter, wall {wall:.0f} us/iter")  # fmt: skip
    if not a.unpatched:
        import convgemm.functional as fn
        import convgemm.nn as cnn
        from convgemm import _runtime
        from convgemm.conv import fprop
        from convgemm.matmul import launch

        acc: dict = {}
        undo = [
            timed(cnn.Conv2d, "forward", acc, "convgemm.nn.Conv2d.forward"),
            timed(cnn, "_replay_key", acc, "nn._replay_key"),
            timed(nn.Conv2d, "forward", acc, "nn.Conv2d.forward"),
            timed(fn, "conv2d", acc, "functional.conv2d"),
            timed(fn, "conv2d_forward", acc, "conv2d_forward"),
            timed(launch.Launch, "fast", acc, "Launch.fast"),
            timed(fprop, "empty", acc, "empty (fprop)"),
            timed(_runtime, "empty", acc, "empty (_runtime)"),
        ]
        # functional and the nn module bound these names at import: patch their copies too
        undo.append(timed(cnn, "conv2d", acc, "functional.conv2d"))
        undo.append(timed(fn, "empty", acc, "empty (functional)"))
        # training: the autograd Function's forward and backward and the two gradients
        # (ops bound them at import; the backward runs on autograd's device thread)
        from convgemm import ops

        undo.append(timed(ops, "conv2d_forward", acc, "conv2d_forward (ops)"))
        undo.append(timed(ops, "_backward", acc, "ops._backward"))
        undo.append(timed(ops, "conv2d_input", acc, "conv2d_input"))
        undo.append(timed(ops, "conv2d_weight", acc, "conv2d_weight"))
        # the training replay (ops.TrainReplay): the module's call, the Function's forward, the
        # backward (autograd's device thread unless --one-thread) and the flip dgrad needs
        undo.append(timed(ops.TrainReplay, "__call__", acc, "TrainReplay (Function.apply)"))
        undo.append(timed(ops._ReplayConv2d, "forward", acc, "_ReplayConv2d.forward"))
        undo.append(timed(ops.TrainReplay, "backward", acc, "TrainReplay.backward"))
        undo.append(timed(fn, "_flip_swap", acc, "_flip_swap"))
        try:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(a.iters):
                step()
            host = (time.perf_counter() - t0) / a.iters * 1e6
            torch.cuda.synchronize()
        finally:
            for u in reversed(undo):
                u()
        print(f"   with timers: host {host:.0f} us/iter")
        for label, (t, k) in acc.items():
            print(f"   {label:24s} {t / k * 1e6:7.1f} us/call  x{k // a.iters} per iter  "
                  f"{t / a.iters * 1e6:7.0f} us/iter")  # fmt: skip
    x = torch.randn(1, 64, 8, 8, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    ident = nn.Identity()
    print(f"-- reference: nn.Identity() call {per_call(lambda: ident(x)):.1f} us, "
          f"torch.empty_like {per_call(lambda: torch.empty_like(x)):.1f} us, "
          f"F.conv2d 3x3 64->64 @8 {per_call(lambda: F.conv2d(x, w, padding=1)):.1f} us")  # fmt: skip


if __name__ == "__main__":
    main()
