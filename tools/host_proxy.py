"""The training replay's host cost per layer, on the CPU (no GPU needed): a proxy for issue 6.

    python3 tools/host_proxy.py [--autocast] [--kernel 3] [--stride 1] [--layers 8] [--profile]

The eager ResNet-50 training step is bound by the host (session 60 on the H100: 21.4 ms of host
a step against cuDNN's 15.9), and every microsecond of Python a patched layer spends per step
counts 53 times. A GPU's host is the place to time it (``tools/host_split.py``), but the Python
part of that cost is the same on any CPU. This tool builds a chain of ``--layers`` patched 16 ->
16 convolutions on CPU tensors, lets the interpreter make the plans and the training replay
(``ops.TrainReplay``, as ``tests/test_nn.py`` does with CPU plan keys), then **stubs every
kernel launch** (``Launch.fast`` and ``Launch.__call__`` do nothing) and times forward and backward steps: what is
left is the replay's own host work per layer (keys, autograd, allocation, the weight flip and
casts as CPU torch ops), without the C launcher's few microseconds a launch.

The floor is the same chain of a bare ``autograd.Function`` per layer (one allocation in the
forward, two in the backward, the autocast cast of the weight where ``--autocast``): the host
cost any custom autograd convolution pays. ``--autocast`` runs under CPU autocast in fp16 with
fp16 activations (ResNet-50's inner layers: the input is already 16-bit, the fp32 weight is
cast). ``--inference`` also times no-grad calls, the full path against the inference replay
(under ``--autocast`` on an fp32 input, which the replay casts as the full path does). Numbers are CPU microseconds on this host; compare versions in one run of one host.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ["TRITON_INTERPRET"] = "1"  # before convgemm is imported: the plans' kernels run on the CPU
os.environ.setdefault("CONVGEMM_AUTOTUNE", "0")  # heuristic configs: no timing runs on the interpreter

import torch  # noqa: E402
from torch import nn  # noqa: E402

import convgemm  # noqa: E402
import convgemm.functional as fn  # noqa: E402
from convgemm import nn as cnn  # noqa: E402
from convgemm.matmul import launch as L  # noqa: E402


def cpu_keys() -> None:
    """Plan and training keys for CPU tensors (the real ones are None off CUDA): the training key
    does the real key's work less its CUDA-only device and stream queries."""
    fn._signature = fn._plan_key
    fn._wgrad_signature = fn._wgrad_plan_key

    def train_key(mod, x, w, b):
        return (
            x.shape, x.stride(), x.dtype, x.data_ptr() & 15, 0,
            w.shape, w.stride(), w.dtype, w.data_ptr() & 15, 0,
            None if b is None else (b.stride(), b.dtype, b.data_ptr() & 15, 0),
            torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu"),
            mod.stride, mod.padding, mod.dilation, mod.groups, mod.__dict__.get(cnn._ACT_ATTR),
            False, fn.PLANS_GENERATION[0],
        )  # fmt: skip

    cnn._train_key = train_key

    def replay_key(mod, x, w, b):
        if torch.is_grad_enabled() and (x.requires_grad or w.requires_grad or (b is not None and b.requires_grad)):
            return None
        return (
            x.shape, x.stride(), x.dtype, x.data_ptr() & 15, 0,
            w.data_ptr(), w._version, None if b is None else (b.data_ptr(), b._version),
            torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu"),
            mod.stride, mod.padding, mod.dilation, mod.groups, mod.padding_mode, mod.__dict__.get(cnn._ACT_ATTR),
            False, fn.PLANS_GENERATION[0],
        )  # fmt: skip

    cnn._replay_key = replay_key


class _Floor(torch.autograd.Function):
    """A convolution-shaped Function that computes nothing: y, dx and dw allocated only."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return torch.empty_like(x)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return torch.empty_like(x), torch.empty_like(w)


def timed(step, n: int, repeat: int) -> tuple[float, float]:
    """(forward, backward) microseconds of ``step()``'s two halves: the mean over ``n`` steps,
    the least of ``repeat`` such means (a shared CPU's noise only ever adds)."""
    best = (float("inf"), float("inf"))
    for _ in range(repeat):
        tf = tb = 0.0
        for i in range(n + n // 10):
            t0 = time.perf_counter()
            y, g = step()
            t1 = time.perf_counter()
            y.backward(g)
            t2 = time.perf_counter()
            if i >= n // 10:
                tf, tb = tf + t1 - t0, tb + t2 - t1
        best = (min(best[0], tf / n * 1e6), min(best[1], tb / n * 1e6))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--autocast", action="store_true", help="CPU autocast in fp16, fp16 activations")
    ap.add_argument("--kernel", type=int, default=3)
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5, help="timings of --steps steps; the least is kept")
    ap.add_argument("--profile", action="store_true", help="cProfile 500 steps after the timing")
    ap.add_argument(
        "--inference",
        action="store_true",
        help="also time inference calls (no_grad; with --autocast an fp32 input, which the replay casts): "
        "the full path (CONVGEMM_REPLAY off) against the inference replay",
    )
    args = ap.parse_args()
    cpu_keys()
    torch.manual_seed(0)
    k, s, c = args.kernel, args.stride, 16
    half = torch.float16
    convs = [nn.Conv2d(c, c, k, stride=s if i == 0 else 1, padding=k // 2, bias=False) for i in range(args.layers)]
    model = convgemm.patch(nn.Sequential(*convs)).to(memory_format=torch.channels_last)
    x = torch.randn(2, c, 8, 8).contiguous(memory_format=torch.channels_last)
    if args.autocast:
        x = x.to(half)
    x.requires_grad_()
    ac = torch.autocast("cpu", dtype=half, enabled=args.autocast)
    with ac:
        g = torch.ones_like(model(x).detach())

    def step(m=model):
        with ac:
            return m(x), g

    for _ in range(4):  # plans on the first call, the replay built on the second, its gradients' on the third
        y, _ = step()
        y.backward(g)
    for i, m in enumerate(model):
        st = m.__dict__.get(cnn._TRAIN_ATTR)
        assert st and st[1] and st[1].dgrad and st[1].wgrad, f"layer {i} does not replay both gradients"
        if args.autocast and m.stride == (1, 1):  # a stride-1 dgrad by the forward: the fused cast and flip
            assert st[1].prep, f"layer {i}: no CastFlip"
    L.Launch.fast_ready = property(lambda self: True)
    L.Launch.fast = lambda self, bases: None
    L.Launch.__call__ = lambda self, *a, **k: None  # a launch site without the fast path (relaunch on a GPU)
    fwd, bwd = timed(step, args.steps, args.repeat)
    weights = [m.weight for m in model]

    def floor():
        with ac:
            h = x
            for w in weights:
                h = _Floor.apply(h, w.to(half) if args.autocast else w)
        return h, gf

    gf = torch.ones_like(x).detach()  # the floor keeps the input's shape

    f0, b0 = timed(floor, args.steps, args.repeat)
    n = args.layers
    kind = f"{k}x{k} s{s}, {'autocast fp16' if args.autocast else 'fp32'}, {n} layers"
    print(f"{kind}: replay per layer forward {fwd / n:.1f} us, backward {bwd / n:.1f} us (launches stubbed)")
    print(f"{kind}: floor  per layer forward {f0 / n:.1f} us, backward {b0 / n:.1f} us")
    print(
        f"{kind}: over the floor {(fwd - f0) / n:.1f} + {(bwd - b0) / n:.1f} = {(fwd + bwd - f0 - b0) / n:.1f} us a layer"
    )
    if args.inference:
        xi = x.detach().float()

        def infer():
            with torch.no_grad(), ac:
                return model(xi)

        for replay in (False, True):
            cnn.REPLAY = replay
            for _ in range(3):  # a replay is built on a key's second call
                infer()
            t = time.perf_counter()
            for _ in range(args.steps):
                infer()
            us = (time.perf_counter() - t) / args.steps * 1e6 / n
            print(f"{kind}: inference per layer {us:.1f} us ({'replay' if replay else 'full path'})")
        kept = [m.__dict__.get(cnn._FAST_ATTR) for m in model]
        assert all(k and k[1] for k in kept), "every layer kept an inference replay"
    if args.profile:
        import cProfile
        import pstats

        pr = cProfile.Profile()
        pr.enable()
        for _ in range(500):
            y, _ = step()
            y.backward(g)
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
