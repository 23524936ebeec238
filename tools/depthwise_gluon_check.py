#!/usr/bin/env python3
"""Compile every ``depthwise_rows`` candidate of some layers for sm_90 through both entries of the
rows kernel, Triton's (``depthwise_rows_kernel``, laid out by Triton's coalescing pass) and
Gluon's (``depthwise_rows_kernel_gl``, the layout given by ``DepthwiseRows.gluon_layout``), and
compare them: registers, and the SASS with register and predicate numbers masked. No GPU needed.

    PYTHONPATH=src python3 tools/depthwise_gluon_check.py [--dtype bf16] [--bias] [--max 0] [--wgrad] SHAPE ...

``--wgrad`` does the same for the depthwise wgrad rows kernel's candidates
(``DepthwiseWgrad.rows_configs``): ``depthwise_wgrad_rows_kernel`` against
``depthwise_wgrad_rows_kernel_gl`` (``DepthwiseWgrad.gluon_layout``).

SHAPE is N,C,H,W,K,R,S[,stride,pad,dil,groups] (depthwise: groups = C). Prints one line per
candidate (both compile times, registers, SASS length, same or not) and exits 1 if any
candidate's SASS differs or if the Gluon entry was not the one ``run`` chose.

The wgrad kernel's two entries do not compile to the same order: Gluon's pipeline has no
``triton_licm`` or ``reorder_instructions`` pass, which place its loop-invariant address and mask
code. With ``--wgrad`` a candidate passes when the registers and the counts of every memory,
floating-point, shuffle and barrier instruction are the same ("same mix"); the line shows how many
instructions of other kinds (integer, predicate, select) differ.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter

os.environ.pop("TRITON_INTERPRET", None)
os.environ["TRITON_ALWAYS_COMPILE"] = "1"  # time the compiles, not Triton's cache

#: the Gluon entry's layout constexprs (the rest are the Triton entry's)
LAYOUT_KEYS = ("SPT_K", "TPW_Q", "TPW_K", "WPC_Q", "WPC_K")


def _compile(fn, args: tuple, kw: dict):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.experimental.gluon._runtime import GluonASTSource, GluonJITFunction
    from triton.runtime.jit import create_function_from_signature

    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, spec, opts = binder(*args, **kw)
    opts, signature, consts, attrs = fn._pack_args(backend, kw, bound, spec, opts)
    source = GluonASTSource if isinstance(fn, GluonJITFunction) else ASTSource
    t = time.perf_counter()
    k = triton.compile(source(fn, signature, consts, attrs), target=target, options=opts.__dict__)
    return k, time.perf_counter() - t


def _sass(cubin: bytes) -> tuple[list[str], int]:
    """(instructions with register and predicate numbers masked, registers) of a cubin."""
    import triton

    bindir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run(
            [os.path.join(bindir, "cuobjdump"), "-sass", f.name], capture_output=True, text=True
        ).stdout
        res = subprocess.run([os.path.join(bindir, "cuobjdump"), "--dump-resource-usage", f.name],
                             capture_output=True, text=True).stdout  # fmt: skip
    out = []
    for line in sass.splitlines():
        m = re.match(r"\s+/\*[0-9a-f]{4}\*/\s+(.*?);", line)
        if m:
            out.append(re.sub(r"\bU?P\d\b", "P", re.sub(r"\bU?R\d+\b", "R", m.group(1))).strip())
    return out, int(re.search(r"REG:(\d+)", res).group(1))


#: instruction kinds whose counts must match for "same mix": memory, floating point, shuffles,
#: barriers and atomics (what a kernel's time is made of); integer, predicate and select code may differ
_MIX = re.compile(r"^(LD|ST|RED|ATOM|F[A-Z0-9]|H[A-Z]|DADD|DFMA|DMUL|SHFL|BAR|MUFU|I2F|F2I)")


def _mix(sass: list[str]) -> Counter:
    # ptxas also moves zeros with HFMA2.MMA (-RZ, RZ, 0, 0): a register move, not arithmetic
    return Counter(op for op, rest in ((i.split(None, 1) + [""])[:2] for i in sass)
                   if _MIX.match(op) and not (op == "HFMA2.MMA" and "-RZ, RZ, 0, 0" in rest))  # fmt: skip


def check(shapes: list[str], dtype: str = "bf16", bias: bool = False, most: int = 0, wgrad: bool = False) -> int:
    """Compare the two entries on every candidate of ``shapes``; the number of failures."""
    import torch

    from convgemm.bench.suites import parse_shape
    from convgemm.conv import backward, depthwise, depthwise_wgrad, fprop
    from convgemm.problem import ConvProblem

    # the configs as the H200 (132 SMs) would make them
    fprop.sm_count = backward.sm_count = lambda *_, **__: 132
    captured = []
    fprop._run_kernel = lambda launch, fn, grid, args, constexprs, options: captured.append(
        (fn, args, {**constexprs(), **options})
    )
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    algo = backward.DepthwiseWgrad() if wgrad else fprop.ALGORITHMS["depthwise_rows"]
    if wgrad:
        gl_fn, tt_fn = depthwise_wgrad.depthwise_wgrad_rows_kernel_gl, depthwise_wgrad.depthwise_wgrad_rows_kernel
    else:
        gl_fn, tt_fn = depthwise.depthwise_rows_kernel_gl, depthwise.depthwise_rows_kernel
    failures = 0
    for text in shapes:
        shp = parse_shape(text)
        x = torch.zeros(shp.n, shp.c, shp.h, shp.w, dtype=dt).to(memory_format=torch.channels_last)
        w = torch.zeros(shp.k, shp.c // shp.groups, shp.r, shp.s, dtype=dt)
        b = torch.zeros(shp.k, dtype=dt) if bias else None
        prob = ConvProblem.from_tensors(x, w, stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
        why = algo.rows_ok(prob) if wgrad else algo.supports(prob)
        if why:
            print(f"{text}: depthwise_rows does not take it ({why})")
            failures += 1
            continue
        y = torch.zeros(shp.n, shp.k, prob.p, prob.q, dtype=dt).to(memory_format=torch.channels_last)
        cfgs = algo.rows_configs(prob) if wgrad else algo.configs(prob)
        for cfg in cfgs[:most] if most else cfgs:
            captured.clear()
            if wgrad:
                algo.run(prob, x, y, w, cfg)
                captured[:] = [c for c in captured if c[0] is not depthwise_wgrad.wgrad_reduce_kernel]
            else:
                algo.run(prob, x, w, b, y, cfg)
            (fn, args, kw), = captured  # fmt: skip
            label = f"{text} {dtype}{' bias' if bias else ''}{' wgrad' if wgrad else ''} [{cfg.describe()}]"
            if fn is not gl_fn:
                print(f"{label}: run chose {getattr(fn, '__name__', fn)}, not the Gluon entry")
                failures += 1
                continue
            k_gl, t_gl = _compile(fn, args, kw)
            plain = {k: v for k, v in kw.items() if k not in LAYOUT_KEYS}
            k_tt, t_tt = _compile(tt_fn, args, plain)
            (s_gl, r_gl), (s_tt, r_tt) = _sass(k_gl.asm["cubin"]), _sass(k_tt.asm["cubin"])
            same = s_gl == s_tt and r_gl == r_tt
            verdict = "same" if same else "DIFFERENT"
            if wgrad and not same and r_gl == r_tt and _mix(s_gl) == _mix(s_tt):
                other = Counter(i.split()[0] for i in s_gl)
                other.subtract(Counter(i.split()[0] for i in s_tt))
                verdict = f"same mix ({sum(abs(v) for v in other.values())} other instructions differ)"
            failures += verdict == "DIFFERENT"
            print(f"{label}: compile Triton {t_tt:.2f} s, Gluon {t_gl:.2f} s; registers {r_tt} / {r_gl}; "
                  f"SASS {len(s_tt)} / {len(s_gl)} instructions, {verdict}", flush=True)  # fmt: skip
    return failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shapes", nargs="+")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    ap.add_argument("--bias", action="store_true")
    ap.add_argument("--max", type=int, default=0, help="candidates per shape (0: all)")
    ap.add_argument("--wgrad", action="store_true", help="the depthwise wgrad rows kernel's candidates")
    a = ap.parse_args()
    return 1 if check(a.shapes, a.dtype, a.bias, a.max, a.wgrad) else 0


if __name__ == "__main__":
    sys.exit(main())
