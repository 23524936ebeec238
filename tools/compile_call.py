#!/usr/bin/env python3
"""Compile for sm_90, without a GPU, exactly the kernels one algorithm launches for one problem
and config, and summarise each: registers, spills, shared memory, wgmma (and whether its A
operand comes from registers or shared memory), TMA loads.

    PYTHONPATH=src python3 tools/compile_call.py --direction wgrad --shape 64,256,14,14,1024,1,1 \\
        --config "block_m=128,block_n=128,block_k=64,num_warps=8,num_stages=3"

The algorithm's own ``run`` builds the arguments on CPU tensors; the launch is intercepted and
handed to Triton's binder (the same run-time specialisation as on the GPU: divisibility by 16,
integers equal to 1) and compiled for ``cuda:90``. Unlike ``tools/sm90_check.py`` no signature
has to be written by hand. Nothing runs. The cubin, PTX, SASS, TTGIR and TTIR go to ``--out``.
The Gluon algorithm (``implicit_gemm_ws``, e.g. ``--config ...,parts=3`` for its 192-pixel
tiles) is captured at ``ws3d.gluon_launch`` and compiled as ``tools/compile_gluon.py`` does
(for a 132-SM grid).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys

os.environ.pop("TRITON_INTERPRET", None)


def _compile(fn, grid, args, constexprs, options, out: str) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    while not isinstance(fn, triton.runtime.jit.JITFunction) and hasattr(fn, "fn"):
        fn = fn.fn
    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    kwargs = {**constexprs, **options}
    bound, spec, opts = binder(*args, **kwargs)
    opts, signature, consts, attrs = fn._pack_args(backend, kwargs, bound, spec, opts)
    k = triton.compile(ASTSource(fn, signature, consts, attrs), target=target, options=opts.__dict__)
    name = fn.__name__
    os.makedirs(out, exist_ok=True)
    cubin = os.path.join(out, f"{name}.cubin")
    with open(cubin, "wb") as f:
        f.write(k.asm["cubin"])
    for ext in ("ptx", "ttgir", "ttir"):
        with open(os.path.join(out, f"{name}.{ext}"), "w") as f:
            f.write(k.asm[ext])
    bindir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    res = subprocess.run([os.path.join(bindir, "cuobjdump"), "--dump-resource-usage", cubin],
                         capture_output=True, text=True).stdout  # fmt: skip
    sass = subprocess.run([os.path.join(bindir, "cuobjdump"), "--dump-sass", cubin],
                          capture_output=True, text=True).stdout  # fmt: skip
    with open(os.path.join(out, f"{name}.sass"), "w") as f:
        f.write(sass)
    ptx, ttgir = k.asm["ptx"], k.asm["ttgir"]
    regs = re.search(r"REG:(\d+)", res)
    # wgmma with A in registers is the "RS" form: its A operand is a register list, not a descriptor
    rs = len(re.findall(r"wgmma\.mma_async\.sync\.aligned\.\S+\s+\{[^}]*\},\s*\{", ptx))
    return {
        "kernel": name,
        "grid": tuple(grid),
        "shared": k.metadata.shared,
        "regs": int(regs.group(1)) if regs else None,
        "LDL/STL": len(re.findall(r"\b(?:LDL|STL)\b", sass)),
        "wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
        "wgmma_A_in_regs": rs,
        "wgmma.wait": len(re.findall(r"wgmma\.wait_group", ptx)),
        "tma": len(re.findall(r"cp\.async\.bulk\.tensor", ptx)),
        "local_alloc(ttgir)": len(re.findall(r"ttg\.local_alloc", ttgir)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--direction", choices=("fwd", "wgrad", "dgrad", "fwd3d"), default="wgrad",
                    help="dgrad: the strided one-launch TMA dgrad (dgrad_tma)")  # fmt: skip
    ap.add_argument(
        "--shape",
        required=True,
        help="N,C,H,W,K,R,S[,stride,pad,dil,groups] as the bench suites write it "
        "(fwd3d: N,C,D,H,W,K,T,R,S,SDxSHxSW,PDxPHxPW,DDxDHxDW,groups, with or without the 3d: prefix)",
    )
    ap.add_argument("--algorithm", default="wgrad_tma")
    ap.add_argument("--config", default="", help="comma-separated Config fields over the default, e.g. block_m=128")
    ap.add_argument(
        "--dtype",
        default="bf16",
        help="bf16, fp16, fp32 (tf32 dots) or ieee (strict fp32, TF32 off: 3xTF32 dots by default, "
        "FMA dots with CONVGEMM_FP32_PRECISION=ieee)",
    )
    ap.add_argument("--out", default="/tmp/compile_call")
    ap.add_argument("--layout", choices=("channels_last", "nchw"), default="channels_last",
                    help="fwd: nchw hands the NCHW algorithms (reads_nchw) an NCHW input and output")  # fmt: skip
    a = ap.parse_args()

    import torch

    from convgemm.bench.suites import parse_shape
    from convgemm.conv import backward, fprop
    from convgemm.problem import ConvProblem

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "ieee": torch.float32}[a.dtype]
    # the problem's precision follows cuDNN's TF32 switch, as in convgemm.conv2d
    torch.backends.cudnn.allow_tf32 = a.dtype != "ieee"
    captured = []

    # the Gluon kernels (implicit_gemm_ws, wgrad_ws) launch through ws3d.gluon_launch, not
    # _run_kernel: their launches are captured there and compiled with Gluon's front end
    from triton.experimental.gluon._runtime import GluonJITFunction

    def capture(launch, fn, grid, args, constexprs, options):
        if isinstance(fn, GluonJITFunction):  # depthwise_rows_kernel_gl: a Gluon kernel through _run_kernel
            captured.append((fn, grid, args, {**constexprs(), **options}, None))
        else:
            captured.append((fn, grid, args, constexprs(), options))

    fprop._run_kernel = capture

    from convgemm.conv import ws3d, ws_wgrad

    def capture_gluon(launch, fn, grid, args, kw):
        if isinstance(fn, GluonJITFunction):
            captured.append((fn, grid, args, kw, None))
        else:  # a Triton kernel launched the same way (the split-K finish kernels)
            opts = {k: kw[k] for k in ("num_warps", "num_stages") if k in kw}
            captured.append((fn, grid, args, {k: v for k, v in kw.items() if k not in opts}, opts))

    ws3d.gluon_launch = ws_wgrad.gluon_launch = capture_gluon
    ws3d.sm_count = ws_wgrad.sm_count = lambda *_, **__: 132
    if a.direction == "fwd3d":
        cfg = _run3d(a, dtype, fprop)
        _report(cfg, captured, a.out)
        return
    shp = parse_shape(a.shape)
    fmt = torch.channels_last if a.layout == "channels_last" else torch.contiguous_format
    x = torch.zeros(shp.n, shp.c, shp.h, shp.w, dtype=dtype).to(memory_format=fmt)
    w = torch.zeros(shp.k, shp.c // shp.groups, shp.r, shp.s, dtype=dtype)
    prob = ConvProblem.from_tensors(x, w, stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
    if a.layout == "nchw":
        from convgemm.functional import NCHW_TMA, _nchw_planes_dense, _nchw_view_ok

        prob = dataclasses.replace(prob, input_nchw=True, tma_ok=True, input_dense=_nchw_planes_dense(x),
                                   input_tma_ok=_nchw_view_ok(x, NCHW_TMA.planes(prob) is not prob))  # fmt: skip
    else:  # as functional._prepare sees the dense NHWC input on an sm_90 device
        from convgemm.conv.layout import tma_aligned

        prob = dataclasses.replace(prob, tma_ok=True, input_dense=True, input_tma_ok=tma_aligned(x, prob.cg),
                                   input_tma_rows_ok=True, input_phases_ok=True)  # fmt: skip
    if a.direction == "wgrad":
        algo = {
            x.name: x
            for x in (backward.WGRAD_TMA, backward.WGRAD, backward.WGRAD_GT, backward.DWGRAD, backward.WGRAD_WS,
                      backward.WGRAD_GS)
        }[a.algorithm]  # fmt: skip
        cfg = algo.default_config(prob)
    elif a.direction == "dgrad":
        algo = backward.DGRAD_TMA
        cfg = algo.default_config(prob)
    else:
        algo = fprop.ALGORITHMS[a.algorithm]
        cfg = algo.default_config(prob)
    fields = {f.name: f.type for f in dataclasses.fields(cfg)}
    for item in filter(None, a.config.split(",")):
        k, v = item.split("=")
        if k not in fields:
            sys.exit(f"compile_call: Config has no field {k!r} (fields: {', '.join(fields)})")
        cfg = dataclasses.replace(cfg, **{k: int(v)})
    if a.direction == "wgrad":
        cfg = backward.WgradTma._shaped(prob, cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_warps,
                                        cfg.num_stages, cfg.taps) if a.algorithm == "wgrad_tma" and "split_k" not in a.config else cfg  # fmt: skip
        dy = torch.zeros(shp.n, shp.k, prob.p, prob.q, dtype=dtype).to(memory_format=torch.channels_last)
        dw = torch.zeros_like(w)
        algo.run(prob, x, dy, dw, cfg)
    elif a.direction == "dgrad":
        dy = torch.zeros(shp.n, shp.k, prob.p, prob.q, dtype=dtype).to(memory_format=torch.channels_last)
        algo.run(prob, dy, w, torch.zeros_like(x).to(memory_format=torch.channels_last), cfg)
    else:
        y = torch.zeros(shp.n, shp.k, prob.p, prob.q, dtype=dtype).to(memory_format=fmt)
        algo.run(prob, x, algo.pack_weight(prob, w) if hasattr(algo, "pack_weight") else w, None, y, cfg)
    _report(cfg, captured, a.out)


def _report(cfg, captured, out: str) -> None:
    sys.path.insert(0, os.path.dirname(__file__))
    from compile_gluon import compile_sm90

    print(f"config: {cfg}")
    for fn, grid, args, consts, options in captured:
        if options is None:  # a Gluon launch (ws3d.gluon_launch): constexprs and options in one dict
            r = {"grid": tuple(grid), **compile_sm90(fn, args, consts, out)}
        else:
            r = _compile(fn, grid, args, consts, options, out)
        print("  ".join(f"{k}={v}" for k, v in r.items()))


def _run3d(a, dtype, fprop):
    """Build and capture the 3-D TMA forward's launch (``conv3d_tma``; ``--config`` over its default)."""
    import torch

    from convgemm.conv import conv3d
    from convgemm.problem3d import ConvProblem3d

    f = a.shape.removeprefix("3d:").split(",")
    n, c, d, h, w, k, t, r, s = map(int, f[:9])
    trip = [tuple(map(int, v.split("x"))) for v in f[9:12]] or [(1, 1, 1), (0, 0, 0), (1, 1, 1)]
    x = torch.zeros(n, c, d, h, w, dtype=dtype).to(memory_format=torch.channels_last_3d)
    wt = torch.zeros(k, c, t, r, s, dtype=dtype)
    prob = ConvProblem3d.from_tensors(x, wt, None, stride=trip[0], padding=trip[1], dilation=trip[2])
    prob = dataclasses.replace(prob, tma_input_ok=True, input_phases_ok=True, tma_ok=True)
    cfg = conv3d.Tma3d().default_config(prob)
    for item in filter(None, a.config.split(",")):
        key, v = item.split("=")
        cfg = dataclasses.replace(cfg, **{key: int(v)})
    if cfg.tile_n * cfg.tile_h * cfg.tile_w != cfg.block_n:
        _, td, th, tw = conv3d.spatial_tiles3(prob, cfg.block_n)[0]
        cfg = dataclasses.replace(cfg, tile_n=td, tile_h=th, tile_w=tw)
    y = torch.zeros(n, k, prob.od, prob.p, prob.q, dtype=dtype).to(memory_format=torch.channels_last_3d)
    conv3d.Tma3d().run(prob, x, wt, None, y, cfg)
    return cfg


if __name__ == "__main__":
    main()
