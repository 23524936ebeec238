"""``convgemm bench --model``: whole networks, patched (convgemm) against unpatched (cuDNN).

* ``craft``: CRAFT inference, batch 1, 768x768, channels_last, eager, ``torch.compile`` (default
  and ``reduce-overhead``, i.e. CUDA graphs), and after ``convgemm.nn.fuse`` (batch norms
  folded, ReLUs in the epilogue; eager, compiled, and compiled with CUDA graphs) against cuDNN
  on the same folded weights (``fold_batch_norms``; its ReLUs stay separate in eager), and
  compiled against cuDNN's unfolded model compiled (``fused compile``: what a user of each
  gets from ``torch.compile``).
* ``resnet50 --train``: one ResNet-50 training step (forward, backward, SGD) at batch 64,
  224x224, channels_last, under autocast to the chosen 16-bit dtype (or in fp32), eager and
  ``torch.compile`` (default and ``reduce-overhead``).

Rows use the layer benchmark's schema (``runner.Row``); ``direction`` is ``inference`` or
``train``, ``gflop`` counts the convolutions only, and ``rel_err`` compares the outputs (inference)
or the first step's losses (training) with the unpatched model's.
"""

from __future__ import annotations

import copy
import math
import time

import torch
from torch import nn

from .runner import DTYPES, Row, bench_rounds


def conv_gflop(model: nn.Module, x: torch.Tensor) -> float:
    """Forward multiply-add work of every Conv2d in ``model`` for input ``x`` (GFLOP, 2 per MAC)."""
    total = 0

    def hook(m, inp, out):
        nonlocal total
        total += 2 * out.numel() * m.weight[0].numel()

    hs = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, nn.Conv2d)]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in hs:
            h.remove()
    return total / 1e9


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def _failure(e: Exception) -> str:
    """A failed mode's row note: the exception's type and first line."""
    first = str(e).splitlines()[0][:160] if str(e) else ""
    return f"failed: {type(e).__name__}: {first}"


def _run(fn, *args):
    """``fn(*args)`` as one iteration: tells cudagraph trees (``reduce-overhead``) that a new step
    begins, so the previous step's outputs may be overwritten (a no-op for other modes)."""
    torch.compiler.cudagraph_mark_step_begin()
    return fn(*args)


def host_us(fn, n: int) -> float:
    """Host time per iteration of ``fn``: ``n`` iterations issued back to back without
    synchronising, timed until the last one returns (``n`` small enough that the launch queue
    never fills and blocks the host). Near the wall time, the iteration is host-bound."""
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    el = time.perf_counter() - t
    torch.cuda.synchronize()
    return el / n * 1e6


def _note_host(row: Row) -> None:
    row.note = f"host {row.host_us:.0f} us/iter (cuDNN {row.cudnn_host_us:.0f})"


def fold_batch_norms(model: nn.Module) -> nn.Module:
    """The cuDNN side of the ``fused eager`` row: every ``nn.Conv2d`` -> ``BatchNorm2d`` pair of a
    Sequential folded into the convolution (``convgemm.nn.fuse``'s arithmetic), the batch norm
    replaced by ``nn.Identity``; ReLUs and the convolutions' class stay PyTorch's."""
    from convgemm.nn import _fold_bn

    for seq in [m for m in model.modules() if isinstance(m, nn.Sequential)]:
        names = list(seq._modules)
        for a, b in zip(names, names[1:], strict=False):
            conv, bn = seq._modules[a], seq._modules[b]
            if type(conv) is nn.Conv2d and isinstance(bn, nn.BatchNorm2d) and not bn.training:
                _fold_bn(conv, bn)
                seq._modules[b] = nn.Identity()
    return model


#: the rows each model's benchmark can time (``convgemm bench --model ... --modes``)
MODES = {
    "craft": ["eager", "fused eager", "compile", "fused compile", "fused compile vs folded", "compile cudagraphs",
              "fused compile cudagraphs"],
    "resnet50": ["eager", "eager one-thread", "compile", "compile cudagraphs"],
}  # fmt: skip


def _pick(modes: list, only: list[str] | None) -> list:
    """The modes named in ``only`` (all when None); a name that is no mode is an error."""
    if only is None:
        return modes
    names = [m[0] for m in modes]
    unknown = [n for n in only if n not in names]
    if unknown:
        raise ValueError(f"bench --modes: unknown mode(s) {unknown}; this model's modes are {names}")
    return [m for m in modes if m[0] in only]


def bench_craft(dtype_key: str, compile_too: bool = True, size: int = 768, only: list[str] | None = None) -> list[Row]:
    import convgemm
    from convgemm.models.craft import CRAFT

    dtype = DTYPES[dtype_key]
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = dtype_key == "tf32"
    ref = CRAFT().eval().cuda().to(dtype).to(memory_format=torch.channels_last)
    ours = convgemm.patch(copy.deepcopy(ref))
    x = torch.randn(1, 3, size, size, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    gflop = conv_gflop(ref, x)
    # fused: batch norms folded and ReLUs in the epilogue (convgemm.nn.fuse), against cuDNN on
    # the same folded weights (batch norms folded too; its ReLUs stay separate kernels, as eager
    # PyTorch has no conv+ReLU fusion)
    fused = convgemm.nn.fuse(copy.deepcopy(ours))
    ref_folded = fold_batch_norms(copy.deepcopy(ref))
    rows = []
    modes = [("eager", lambda m: m, ours, ref), ("fused eager", lambda m: m, fused, ref_folded)]
    if compile_too:
        modes.append(("compile", torch.compile, ours, ref))
        # issue 6's comparison: convgemm's fused model compiled (each ReLU in its convolution's
        # epilogue through the conv2d_act operator) against cuDNN's model as torch.compile takes
        # it (Inductor runs each batch norm and ReLU as one pointwise kernel); then against
        # cuDNN on the same folded weights, compiled (ReLUs fused into Inductor's kernels)
        modes.append(("fused compile", torch.compile, fused, ref))
        modes.append(("fused compile vs folded", torch.compile, fused, ref_folded))
        # CUDA graphs (torch.compile's reduce-overhead mode) take the host out of both sides:
        # the like-for-like comparison of the GPU work when a network is host-bound
        graphs = lambda m: torch.compile(m, mode="reduce-overhead")  # noqa: E731
        modes.append(("compile cudagraphs", graphs, copy.deepcopy(ours), copy.deepcopy(ref)))
        # the fastest inference either side offers: folded batch norms, compiled, CUDA graphs
        modes.append(("fused compile cudagraphs", graphs, copy.deepcopy(fused), copy.deepcopy(ref_folded)))
    modes = _pick(modes, only)
    wrapped = {}  # one compiled module per (mode kind, model): rows that share one reuse it

    def wrap_once(wrap, m):
        key = (wrap, id(m))
        if key not in wrapped:
            wrapped[key] = wrap(m)
        return wrapped[key]

    for mode, wrap, model, base in modes:
        row = Row("model", f"craft {size} {mode}", f"1x3x{size}x{size}", dtype_key, "inference", "channels_last", gflop)
        row.algorithm = "patched+fused" if "fused" in mode else "patched"
        try:
            a, b = wrap_once(wrap, model), wrap_once(wrap, base)
            with torch.no_grad():
                # clones: a CUDA graph's output is overwritten when the next graph runs
                row.rel_err = _rel(_run(a, x).clone(), _run(b, x).clone())
                # do_bench: a whole network's eager time includes its host work, which is the point
                t = bench_rounds({"convgemm": lambda a=a: _run(a, x), "cudnn": lambda b=b: _run(b, x)},
                                 timer="do_bench")  # fmt: skip
                row.convgemm_us, row.cudnn_us = t["convgemm"], t["cudnn"]
                row.host_us = host_us(lambda a=a: _run(a, x), 10)
                row.cudnn_host_us = host_us(lambda b=b: _run(b, x), 10)
                _note_host(row)
        except Exception as e:  # one mode failing (a compile error) must not lose the others' rows
            row.note, row.ok = _failure(e), False
            rows.append(row)
            continue
        row.speedup = row.cudnn_us / row.convgemm_us
        row.tflops = gflop / row.convgemm_us * 1e3  # GFLOP per us = 1000 TFLOP/s
        row.cudnn_tflops = gflop / row.cudnn_us * 1e3
        row.ok = math.isfinite(row.rel_err) and row.rel_err <= 5e-2
        rows.append(row)
    return rows


def bench_resnet50_train(
    dtype_key: str, compile_too: bool = True, batch: int = 64, only: list[str] | None = None
) -> list[Row]:
    import convgemm
    from convgemm.models.resnet import resnet50

    dtype = DTYPES[dtype_key]
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = dtype_key == "tf32"
    x = torch.randn(batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    target = torch.randint(0, 1000, (batch,), device="cuda")
    base = resnet50().cuda().to(memory_format=torch.channels_last)
    gflop = 3 * conv_gflop(base, x)  # forward + dgrad + wgrad
    rows = []
    # "one-thread": the backward on the calling thread (torch.autograd.set_multithreading_enabled
    # (False)) on both sides. By default autograd runs a CUDA backward on its own device thread,
    # where convgemm's Python backward ran about twice as slowly as the same code on the
    # calling thread (tools/profile_model.py on the H200, session 7); cuDNN's C++ nodes did not.
    modes = [("eager", lambda m: m), ("eager one-thread", lambda m: m)]
    if compile_too:
        modes += [
            ("compile", torch.compile),
            ("compile cudagraphs", lambda m: torch.compile(m, mode="reduce-overhead")),
        ]
    for mode, wrap in _pick(modes, only):
        threads = not mode.endswith("one-thread")
        first = {}
        row = Row("model", f"resnet50 train b{batch} {mode}", f"{batch}x3x224x224", dtype_key, "train",
                  "channels_last", gflop)  # fmt: skip
        row.algorithm = "patched"
        try:
            steps = {}
            for name, patched in (("cudnn", False), ("convgemm", True)):
                model = copy.deepcopy(base).train()
                if patched:
                    convgemm.patch(model)
                fwd = wrap(model)
                opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

                def step(fwd=fwd, opt=opt, threads=threads):
                    opt.zero_grad(set_to_none=True)
                    with torch.autocast("cuda", dtype=dtype, enabled=dtype.itemsize == 2):
                        loss = nn.functional.cross_entropy(_run(fwd, x), target)
                    with torch.autograd.set_multithreading_enabled(threads):
                        loss.backward()
                    opt.step()
                    return loss

                first[name] = step().item()
                steps[name] = step
            # both models live at once, so their steps can be timed in alternating rounds
            times = bench_rounds(steps, rep_ms=750, timer="do_bench")  # host work included, as above
            # two steps: a step launches several hundred kernels, and a full launch queue would
            # block the host and time the GPU instead
            row.host_us, row.cudnn_host_us = host_us(steps["convgemm"], 2), host_us(steps["cudnn"], 2)
            _note_host(row)
        except Exception as e:  # one mode failing (a compile error) must not lose the others' rows
            row.note, row.ok = _failure(e), False
            rows.append(row)
            continue
        row.convgemm_us, row.cudnn_us = times["convgemm"], times["cudnn"]
        row.speedup = row.cudnn_us / row.convgemm_us
        row.rel_err = abs(first["convgemm"] - first["cudnn"]) / abs(first["cudnn"])
        row.ok = math.isfinite(row.rel_err) and row.rel_err <= 5e-2
        row.tflops = gflop / row.convgemm_us * 1e3  # GFLOP per us = 1000 TFLOP/s
        row.cudnn_tflops = gflop / row.cudnn_us * 1e3
        rows.append(row)
    return rows


def interpreter_demo(model: str, print_fn=print) -> bool:
    """No GPU: the model at width 1/8 and 32x32, patched vs float64 unpatched, under the interpreter."""
    import convgemm
    from convgemm.models.craft import CRAFT
    from convgemm.models.resnet import resnet50

    m = CRAFT(width_div=8) if model == "craft" else resnet50(num_classes=10, width_div=8)
    m.eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        ref = copy.deepcopy(m).double()(x.double())
        y = convgemm.patch(m)(x)
    err = _rel(y, ref)
    ok = math.isfinite(err) and err <= 1e-4
    print_fn(f"  {model} (width 1/8, 32x32, fp32) patched vs float64: rel_err {err:.2e}  {'ok' if ok else 'FAIL'}")
    return ok
