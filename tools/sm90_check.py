#!/usr/bin/env python3
"""Compile a convgemm Triton kernel for Hopper (sm_90) without a GPU and summarise the result.

Like ../shared/tools/sm90-compile, but the signature may contain tuples (the matmul blocks take
their loader arguments as tuples), written as Python literals:

    python tools/sm90_check.py module.path:kernel \
        --sig "{'a_args': ('*bf16', 'i32'), 'c_ptr': '*bf16', 'M': 'i32'}" \
        --const "{'BLOCK_M': 128, 'A_LOAD': 'convgemm.matmul.loaders:rows_load'}" --warps 8 --stages 3

A constexpr given as 'module:attr' is imported (used for @triton.jit functions passed as arguments).
Prints shared memory, registers, spills and counts of wgmma / TMA / cp.async / mma.sync instructions.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import re
import subprocess
import sys


def _resolve(v):
    if isinstance(v, str) and ":" in v:
        mod, attr = v.split(":", 1)
        return getattr(importlib.import_module(mod), attr)
    return v


def compile_report(target: str, sig: dict, consts: dict, warps: int, stages: int, out: str, maxnreg: int = 0) -> dict:
    os.environ.pop("TRITON_INTERPRET", None)
    import triton
    from triton.backends.compiler import GPUTarget

    mod_name, name = target.split(":")
    fn = getattr(importlib.import_module(mod_name), name)
    while not isinstance(fn, triton.runtime.jit.JITFunction) and hasattr(fn, "fn"):
        fn = fn.fn
    consts = {k: _resolve(v) for k, v in consts.items()}
    full = {}
    cpaths = {}
    attrs = {}

    def walk(v, path):
        # a non-string leaf inside a tuple signature is a constexpr value at that path
        if isinstance(v, tuple):
            return tuple(walk(x, path + (i,)) for i, x in enumerate(v))
        if isinstance(v, str):
            # 'i32:16' / '*bf16:16': the value is divisible by 16 (what Triton's launcher infers
            # for aligned pointers and strides), which lets loads vectorise and pipeline
            if v.endswith(":16"):
                attrs[path] = [["tt.divisibility", 16]]
                return v[:-3]
            return v
        import triton.language as tl

        cpaths[path] = tl.constexpr(v)
        return "constexpr"

    defaults = {q.name: q.default for q in fn.params if q.has_default}
    for p in fn.arg_names:
        if p not in consts and p not in sig and p in defaults:
            consts[p] = defaults[p]  # a defaulted constexpr (depthwise_rows_kernel's LAYOUT)
        if p in consts:
            full[p] = "constexpr"
        elif p in sig:
            full[p] = walk(sig[p], (fn.arg_names.index(p),))
        else:
            sys.exit(f"sm90_check: argument '{p}' needs a type in --sig or a value in --const")
    src = triton.compiler.ASTSource(
        fn=fn,
        signature=full,
        constexprs={**{(fn.arg_names.index(k),): v for k, v in consts.items()}, **cpaths},
        attrs=attrs,
    )
    options = {"num_warps": warps, "num_stages": stages}
    if maxnreg:
        options["maxnreg"] = maxnreg
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
    os.makedirs(out, exist_ok=True)
    bindir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    cubin = os.path.join(out, f"{name}.cubin")
    with open(cubin, "wb") as f:
        f.write(k.asm["cubin"])
    ptx = k.asm["ptx"]
    for ext in ("ptx", "ttgir"):
        with open(os.path.join(out, f"{name}.{ext}"), "w") as f:
            f.write(k.asm[ext])
    res = subprocess.run(
        [os.path.join(bindir, "cuobjdump"), "--dump-resource-usage", cubin], capture_output=True, text=True
    ).stdout
    sass = subprocess.run(
        [os.path.join(bindir, "cuobjdump"), "--dump-sass", cubin], capture_output=True, text=True
    ).stdout
    with open(os.path.join(out, f"{name}.sass"), "w") as f:
        f.write(sass)
    regs = re.search(r"REG:(\d+)", res)
    stack = re.search(r"STACK:(\d+)", res)
    return {
        "shared": k.metadata.shared,
        "regs": int(regs.group(1)) if regs else None,
        "stack": int(stack.group(1)) if stack else None,
        "wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
        "mma.sync": len(re.findall(r"\bmma\.sync", ptx)),
        "tma": len(re.findall(r"cp\.async\.bulk\.tensor", ptx)),
        "cp.async": len(re.findall(r"cp\.async\.(?:ca|cg)", ptx)),
        "LDL/STL": len(re.findall(r"\b(?:LDL|STL)\b", sass)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target")
    ap.add_argument("--sig", required=True)
    ap.add_argument("--const", default="{}")
    ap.add_argument("--warps", type=int, default=4)
    ap.add_argument("--stages", type=int, default=3)
    ap.add_argument("--out", default="/tmp/sm90_check")
    ap.add_argument("--maxnreg", type=int, default=0, help="cap registers per thread (Triton's maxnreg option)")
    a = ap.parse_args()
    r = compile_report(
        a.target, ast.literal_eval(a.sig), ast.literal_eval(a.const), a.warps, a.stages, a.out, a.maxnreg
    )
    print("  ".join(f"{k}={v}" for k, v in r.items()))


if __name__ == "__main__":
    main()
