"""Where a whole network's time goes (GPU): torch.profiler over warm iterations, patched or not.

    PYTHONPATH=src python3 tools/profile_model.py --model resnet50 --train           # eager
    PYTHONPATH=src python3 tools/profile_model.py --model craft --compile --unpatched

Prints the wall time per iteration (CUDA-synchronised), the host time the profiler saw, and the
top CUDA kernels by time per iteration with their launch counts, so a slow network can be split
into "slow kernels", "extra kernels" (copies, transposes, casts) and "host-bound" (wall time
well above the kernels' sum).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import sys
import time

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

import convgemm

sys.path.insert(0, os.path.dirname(__file__))
from overhead import per_call_us  # noqa: E402


def build(a: argparse.Namespace):
    torch.backends.cudnn.benchmark = True
    if a.model == "craft":
        from convgemm.models.craft import CRAFT

        model = CRAFT().eval().cuda().to(torch.bfloat16).to(memory_format=torch.channels_last)
        x = torch.randn(1, 3, 768, 768, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
        if not a.unpatched:
            convgemm.patch(model)
        if a.fuse:
            convgemm.nn.fuse(model)
        fwd = torch.compile(model) if a.compile else model

        def step():
            with torch.no_grad():
                return fwd(x)

        return step
    from convgemm.models.resnet import resnet50

    model = resnet50().cuda().to(memory_format=torch.channels_last).train()
    if not a.unpatched:
        convgemm.patch(model)
    x = torch.randn(a.batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    target = torch.randint(0, 1000, (a.batch,), device="cuda")
    fwd = torch.compile(copy.copy(model)) if a.compile else model
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

    def step(parts: dict[str, float] | None = None):
        # parts: synchronised wall time of forward, backward and optimizer step (microseconds),
        # accumulated; None runs the step without synchronising
        marks = [time.perf_counter()]

        def mark():
            if parts is not None:
                torch.cuda.synchronize()
                marks.append(time.perf_counter())

        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(fwd(x), target)
        mark()
        loss.backward()
        mark()
        opt.step()
        mark()
        if parts is not None:
            for name, a0, a1 in zip(("forward", "backward", "optimizer"), marks, marks[1:], strict=False):
                parts[name] = parts.get(name, 0.0) + (a1 - a0) * 1e6

    return step


def add_model_args(ap: argparse.ArgumentParser, iters: int, top: int) -> None:
    """The model options shared with ``tools/host_profile.py``."""
    ap.add_argument("--model", choices=["craft", "resnet50"], required=True)
    ap.add_argument("--train", action="store_true", help="resnet50: a training step (the only mode)")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--fuse", action="store_true", help="craft: convgemm.nn.fuse after patching")
    ap.add_argument("--unpatched", action="store_true", help="the cuDNN model, for comparison")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--iters", type=int, default=iters)
    ap.add_argument("--top", type=int, default=top)
    ap.add_argument(
        "--one-thread",
        action="store_true",
        help="run backward on the calling thread (torch.autograd.set_multithreading_enabled(False)): "
        "sizes what autograd's device thread costs Python backward nodes, and lets cProfile see it",
    )


def warm_step(a: argparse.Namespace):
    """The model's step, built (``--one-thread`` applied) and run six times: compiles and tunes,
    and the nn modules' replays engage from the third call (the gradients' from the fourth),
    after which the caching allocator may still grow its pools for a step or two."""
    if a.one_thread:
        torch.autograd.set_multithreading_enabled(False)
    step = build(a)
    for _ in range(6):
        step()
    torch.cuda.synchronize()
    return step


@contextlib.contextmanager
def _timing_function(inside: dict[str, list[float]]):
    """Accumulate the wall time spent inside ``_Conv2dFunction``'s forward and backward (the
    backward runs on autograd's device thread unless ``--one-thread``), in microseconds."""
    from convgemm import ops

    fn = ops._Conv2dFunction
    saved = fn.forward, fn.backward

    def timed(name, inner):
        def wrapper(*args):
            t = time.perf_counter()
            r = inner(*args)
            acc = inside.setdefault(name, [0.0, 0])
            acc[0] += (time.perf_counter() - t) * 1e6
            acc[1] += 1
            return r

        return staticmethod(wrapper)

    fn.forward, fn.backward = timed("forward", saved[0]), timed("backward", saved[1])
    try:
        yield
    finally:
        fn.forward, fn.backward = staticmethod(saved[0]), staticmethod(saved[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    add_model_args(ap, iters=5, top=25)
    a = ap.parse_args()
    step = warm_step(a)
    wall = per_call_us(step, a.iters)
    parts: dict[str, float] = {}
    inside: dict[str, list[float]] = {}
    from convgemm.matmul.launch import DESC_MISSES, DESC_STATS

    seen = list(DESC_STATS)
    seen_sites = dict(DESC_MISSES)
    if a.model == "resnet50":  # where the wall time goes, each part synchronised
        with _timing_function(inside):
            for _ in range(a.iters):
                step(parts)
    else:
        for _ in range(a.iters):
            step()
    hits, misses = DESC_STATS[0] - seen[0], DESC_STATS[1] - seen[1]
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(a.iters):
            step()
        torch.cuda.synchronize()
    ev = prof.key_averages()
    kernels = sorted((e for e in ev if e.device_type.name == "CUDA"), key=lambda e: -e.device_time_total)
    if not kernels:  # a profiler that files kernels differently: its own table
        print(ev.table(sort_by="self_cuda_time_total", row_limit=a.top))
        return
    gpu = sum(e.device_time_total for e in kernels) / a.iters
    label = f"{a.model} {'compile' if a.compile else 'eager'}{' fused' if a.fuse else ''} {'cudnn' if a.unpatched else 'convgemm'}"
    label += " (one thread)" if a.one_thread else ""
    print(f"== {label}: wall {wall:.0f} us/iter, kernels {gpu:.0f} us/iter")
    if parts:
        print("   synchronised parts: " + ", ".join(f"{k} {v / a.iters:.0f} us" for k, v in parts.items()))
    if hits + misses:
        print(f"   TMA descriptors per iteration: {hits / a.iters:.0f} reused, {misses / a.iters:.0f} encoded anew")
        worst = sorted(((n - seen_sites.get(k, 0), k) for k, n in DESC_MISSES.items()), reverse=True)[:12]
        for n, (name, i, shape) in worst:
            if n:
                print(f"     {n / a.iters:5.1f} per iteration: {name} descriptor {i} {list(shape)}")
    if inside:
        print(
            "   inside convgemm's autograd Function: "
            + ", ".join(f"{k} {t / a.iters:.0f} us ({int(n) // a.iters} calls)" for k, (t, n) in inside.items())
        )
    for e in kernels[: a.top]:
        print(f"  {e.device_time_total / a.iters:9.1f} us  x{e.count // a.iters:<4d} {e.key[:110]}")
    host = sorted((e for e in ev if e.device_type.name == "CPU"), key=lambda e: -e.self_cpu_time_total)
    print(f"-- host: own CPU time per iteration (all ops {sum(e.self_cpu_time_total for e in host) / a.iters:.0f} us)")
    for e in host[: a.top]:
        print(f"  {e.self_cpu_time_total / a.iters:9.1f} us  x{e.count // a.iters:<4d} {e.key[:110]}")


if __name__ == "__main__":
    main()
