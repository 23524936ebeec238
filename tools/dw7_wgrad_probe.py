#!/usr/bin/env python3
"""Times the 7x7 depthwise wgrad prototype (``tools/dw7_wgrad_proto.py``) on ConvNeXt-T's four
7x7 depthwise layers (batch 64, bf16, channels_last, stride 1, padding 3) over a small sweep of
its constexprs, against the library's current path (``convgemm.conv2d_weight``, tuned) and
cuDNN (``aten.convolution_backward``, weight only), and checks the prototype's result.

    PYTHONPATH=src python3 tools/dw7_wgrad_probe.py [--layers 0,1,2,3] [--quick] [--check] [--triton]

One line per layer and form: median GPU time (us; L2 flushed before every run:
``convgemm.bench.runner._gpu_bench``), registers / spills of the prototype's main kernel, the
speedup against cuDNN and against the library, the share of the fp32 FMA floor (R*S multiply-adds
per output pixel-channel at 132 SMs x 128 lanes x 1.98 GHz) and the relative error
(max |dw - ref| / max |ref|) against cuDNN's bf16 result and against an fp32 reference
(cuDNN's fp32 wgrad of the same bf16 inputs, TF32 off). A form that fails to compile or run
prints its error and the probe goes on. ``main`` is the prototype's main kernel alone (without
the ordered reduce of its per-image partial sums).

``--check`` first runs the prototype's GPU self-check (small shapes and two ConvNeXt layers at
batch 2, against float64; Gluon entry; ``--triton`` also the Triton entry, whose 7x7 compiles
take ~25 s each). ``--triton`` also times the default form through the Triton entry.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# (C, H=W): ConvNeXt-T's 7x7 depthwise layers, batch 64
LAYERS = [(96, 56), (192, 28), (384, 14), (768, 7)]
N = 64
FMA_PER_S = 132 * 128 * 1.98e9  # H200: 132 SMs x 128 fp32 lanes x boost clock

#: the prototype's forms: dw7_wgrad keyword arguments (defaults: 7 columns a thread, one step
#: prefetched in registers, the step loop unrolled 7 times, one image a program, 4 warps, Gluon entry)
FORMS = [
    {},
    {"prefetch": 0},
    {"prefetch": 2},
    {"maxnreg": 168},
    {"pf_l2": 2},
    {"pf_l2": 4},
    {"pf_l2": 3, "maxnreg": 168},
    {"imgs": 2},
    {"imgs": 4},
    {"unroll": 1},
    {"num_warps": 2},
    {"cols": 4},
]
QUICK = [{}, {"maxnreg": 168}, {"pf_l2": 3}, {"imgs": 2}, {"imgs": 4}]


def _err(got: torch.Tensor, ref: torch.Tensor) -> float:
    got, ref = got.float().reshape(ref.shape), ref.float()
    return ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


def _layer(c: int, h: int, forms: list[dict], triton_entry: bool, rep_ms: int) -> None:
    import dw7_wgrad_proto as proto

    import convgemm
    from convgemm.bench.runner import _gpu_bench

    dev = torch.device("cuda")
    torch.manual_seed(0)
    fmt = torch.channels_last
    x = torch.randn(N, c, h, h, device=dev).to(torch.bfloat16).contiguous(memory_format=fmt)
    dy = torch.randn(N, c, h, h, device=dev).to(torch.bfloat16).contiguous(memory_format=fmt)
    wt = torch.empty(c, 1, 7, 7, device=dev, dtype=torch.bfloat16)
    name = f"7x7 {c} @{h}"
    fma_floor_us = N * h * h * c * 49 / FMA_PER_S * 1e6

    def cudnn():
        return torch.ops.aten.convolution_backward(dy, x, wt, None, [1, 1], [3, 3], [1, 1], False, [0, 0], c,
                                                   [False, True, False])[1]  # fmt: skip

    ref_bf16 = cudnn()
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    ref32 = torch.ops.aten.convolution_backward(dy.float(), x.float(), wt.float(), None, [1, 1], [3, 3], [1, 1], False,
                                                [0, 0], c, [False, True, False])[1]  # fmt: skip
    torch.backends.cudnn.allow_tf32 = old

    def line(form: str, us: float, regs="", got=None) -> None:
        errs = f"{_err(got, ref_bf16):9.2e} {_err(got, ref32):9.2e}" if got is not None else f"{'':9} {'':9}"
        lib = f"{lib_us / us:6.2f}x" if lib_us else f"{'':7}"
        print(f"{name:<14} {form:<44} {us:8.1f} {str(regs):>9} {cudnn_us / us:6.2f}x {lib} "
              f"{fma_floor_us / us:6.0%} {errs}", flush=True)  # fmt: skip

    lib_us = None
    cudnn_us = _gpu_bench(cudnn, rep_ms)
    line("cudnn", cudnn_us, got=ref_bf16)
    try:
        t0 = time.perf_counter()
        got = convgemm.conv2d_weight(x, wt.shape, dy, padding=3, groups=c)  # first call: tunes
        tune_s = time.perf_counter() - t0
        lib_us = _gpu_bench(lambda: convgemm.conv2d_weight(x, wt.shape, dy, padding=3, groups=c), rep_ms)
        line(f"convgemm (first call {tune_s:.1f} s)", lib_us, got=got)
    except Exception as ex:  # noqa: BLE001
        print(f"{name:<14} convgemm failed: {type(ex).__name__}: {str(ex)[:200]}", flush=True)

    parts_max = N
    ws = torch.empty(parts_max * 49 * c, dtype=torch.float32, device=dev)
    todo = [(f, True) for f in forms]
    if triton_entry:
        todo.append(({}, False))
    for kw, gl_entry in todo:
        label = (",".join(f"{k}={v}" for k, v in kw.items()) or "default") + ("" if gl_entry else " [triton]")
        info: dict = {}
        try:
            t0 = time.perf_counter()
            got = proto.dw7_wgrad(x, dy, ws=ws, use_gluon=gl_entry, info=info, **kw)
            torch.cuda.synchronize()
            comp_s = time.perf_counter() - t0
            us = _gpu_bench(lambda kw=kw, g=gl_entry: proto.dw7_wgrad(x, dy, ws=ws, use_gluon=g, **kw), rep_ms)
            main_us = _gpu_bench(lambda kw=kw, g=gl_entry: proto.dw7_wgrad(x, dy, ws=ws, use_gluon=g, reduce=False,
                                                                            **kw), rep_ms)  # fmt: skip
        except Exception as ex:  # noqa: BLE001 - report and go on to the next form
            print(f"{name:<14} {label:<44} failed: {type(ex).__name__}: {str(ex)[:300]}", flush=True)
            continue
        regs = f"{info.get('regs')}/{info.get('spills')}"
        line(f"{label} (main {main_us:.1f}, c {comp_s:.0f}s)"[:44], us, regs, got)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", default="0,1,2,3", help="indices into LAYERS: (96,56), (192,28), (384,14), (768,7)")
    ap.add_argument("--quick", action="store_true", help="5 forms a layer instead of 12")
    ap.add_argument("--check", action="store_true", help="first the prototype's GPU self-check against float64")
    ap.add_argument("--triton", action="store_true", help="also the Triton entry (slow compiles)")
    ap.add_argument("--rep-ms", type=int, default=100)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print(
            "dw7_wgrad_probe: needs a GPU (for the CPU self-check: TRITON_INTERPRET=1 python tools/dw7_wgrad_proto.py)"
        )
        return 1
    os.environ.pop("TRITON_INTERPRET", None)
    torch.backends.cudnn.benchmark = True
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    if a.check:
        import dw7_wgrad_proto as proto

        for g in (True, False) if a.triton else (True,):
            print(f"self-check, {'Gluon' if g else 'Triton'} entry:", flush=True)
            try:
                proto._check("cuda", use_gluon=g, big=True)
            except Exception as ex:  # noqa: BLE001
                print(f"self-check failed: {type(ex).__name__}: {str(ex)[:300]}", flush=True)
    print(f"{'layer':<14} {'form':<44} {'us':>8} {'regs/spl':>9} {'cuDNN/':>7} {'lib/':>7} {'fma fl':>6} "
          f"{'err bf16':>9} {'err fp32':>9}")  # fmt: skip
    for i in a.layers.split(","):
        c, h = LAYERS[int(i)]
        try:
            _layer(c, h, QUICK if a.quick else FORMS, a.triton, a.rep_ms)
        except Exception as ex:  # noqa: BLE001
            print(f"layer {c} @{h} failed: {type(ex).__name__}: {str(ex)[:300]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
