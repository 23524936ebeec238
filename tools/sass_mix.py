"""The SASS instruction mix of one Triton kernel compiled for sm_90, as Triton specialises it at
run time (no GPU needed).

    python tools/sass_mix.py src/convgemm/conv/depthwise.py:depthwise_kernel \\
        --sig 'x_ptr=*bf16:D,H=i32,W=i32:D,...' --const 'R=7,S=7,s_xc=1' --warps 8

``../shared/tools/sm90-compile`` compiles without Triton's run-time specialisations, and they
change the code: an integer argument equal to 1 becomes a constant (give it in ``--const``), and
pointers and integers divisible by 16 carry ``tt.divisibility`` (``:D`` here), which is what lets
loads be vectorised. Prints registers, spills and the count of each SASS opcode, so a change to a
memory-bound or instruction-bound kernel can be judged by instructions per useful FMA before any
device time is spent.
"""

from __future__ import annotations

import argparse
import ast
import collections
import importlib.util
import os
import re
import subprocess
import sys


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("target", help="path/to/module.py:kernel")
    ap.add_argument("--sig", required=True, help="name=type[:D], e.g. x=*bf16:D,N=i32:D,M=i32")
    ap.add_argument("--const", default="", help="name=value for constexprs and arguments equal to 1")
    ap.add_argument("--warps", type=int, default=4)
    ap.add_argument("--stages", type=int, default=3)
    ap.add_argument("--top", type=int, default=16)
    ap.add_argument("--out", default="/tmp/sass_mix")
    a = ap.parse_args()

    import triton
    from triton.backends.compiler import GPUTarget

    path, name = a.target.rsplit(":", 1)
    src_root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    sys.path.insert(0, os.path.abspath(src_root))
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(src_root))
    if not rel.startswith(".."):  # a module of the package: imported as one (relative imports work)
        mod = importlib.import_module(rel[: -len(".py")].replace(os.sep, "."))
    else:
        spec = importlib.util.spec_from_file_location("_kernel_module", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    fn = getattr(mod, name)
    while not isinstance(fn, triton.runtime.jit.JITFunction) and hasattr(fn, "fn"):
        fn = fn.fn
    sig, attrs, consts = {}, {}, {}
    for part in filter(None, a.sig.split(",")):
        k, v = part.split("=", 1)
        sig[k.strip()] = v.strip()
    for part in filter(None, a.const.split(",")):
        k, v = part.split("=", 1)
        try:
            consts[k.strip()] = ast.literal_eval(v.strip())
        except (ValueError, SyntaxError):
            consts[k.strip()] = getattr(mod, v.strip())
    full = {}
    defaults = {q.name: q.default for q in fn.params if q.has_default}
    for i, p in enumerate(fn.arg_names):
        if p not in consts and p not in sig and p in defaults:
            consts[p] = defaults[p]  # a defaulted constexpr (depthwise_rows_kernel's LAYOUT)
        if p in consts:
            full[p] = "constexpr"
        elif p in sig:
            ty = sig[p]
            if ty.endswith(":D"):
                ty = ty[:-2]
                attrs[(i,)] = [["tt.divisibility", 16]]
            full[p] = ty
        else:
            sys.exit(f"sass_mix: argument '{p}' needs a type in --sig or a value in --const")
    src = triton.compiler.ASTSource(fn=fn, signature=full, constexprs=consts, attrs=attrs)
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": a.warps, "num_stages": a.stages})
    os.makedirs(a.out, exist_ok=True)
    cubin = os.path.join(a.out, f"{name}.cubin")
    with open(cubin, "wb") as f:
        f.write(k.asm["cubin"])
    with open(os.path.join(a.out, f"{name}.ttgir"), "w") as f:
        f.write(k.asm["ttgir"])
    bindir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    res = subprocess.run([os.path.join(bindir, "cuobjdump"), "--dump-resource-usage", cubin],
                         capture_output=True, text=True).stdout  # fmt: skip
    sass = subprocess.run([os.path.join(bindir, "cuobjdump"), "--dump-sass", cubin],
                          capture_output=True, text=True).stdout  # fmt: skip
    with open(os.path.join(a.out, f"{name}.sass"), "w") as f:
        f.write(sass)
    ops = collections.Counter(
        m.group(1).split(".")[0]
        for m in re.finditer(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[0-9T] )?([A-Z][A-Z0-9_.]*)", sass, re.M)
        if not m.group(1).startswith("NOP")
    )
    regs = re.search(r"REG:(\d+)", res)
    stack = re.search(r"STACK:(\d+)", res)
    total = sum(ops.values())
    print(f"{name}: {regs.group(1) if regs else '?'} registers, stack {stack.group(1) if stack else '?'} B, "
          f"shared {k.metadata.shared} B, {total} instructions")  # fmt: skip
    wide = collections.Counter(m.group(1) for m in re.finditer(r"\b(LDG\.E(?:\.[A-Z0-9]+)*)", sass))
    print("  loads: " + ", ".join(f"{v} {w}" for w, v in wide.most_common()))
    for op, n in ops.most_common(a.top):
        print(f"  {n:6d} {op}")
    print(f"  files: {a.out}/{name}.sass .ttgir")


if __name__ == "__main__":
    main()
