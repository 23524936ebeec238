#!/usr/bin/env python3
"""Instruction mix of the loops in an sm_90 SASS dump (``cuobjdump --dump-sass`` text), for the
7x7 depthwise wgrad study (``convgemm.conv.depthwise_wgrad_window``): every backward branch ``BRA target`` closes a
loop ``[target, branch]``; each loop's body is counted by opcode class (FFMA, global / shared
loads, converts, integer / address, predicates, moves, other), innermost loops first.

    python tools/dw7_wgrad_sass.py /tmp/x/kernel.sass [--all]
    python tools/dw7_wgrad_sass.py --window 96,56 [--gluon] [--imgs 2] [--dtype fp32] [--set PREFETCH=2,UNROLL=1]
        [--maxnreg 168] [--filter 3]

No GPU needed. ``--all`` also prints the whole kernel's counts. ``--window C,H`` compiles the
library's window kernel (``convgemm.conv.depthwise_wgrad_window``) for sm_90 for ConvNeXt's layer
(batch 64, 7x7, padding 3, NHWC) with ``DepthwiseWgrad.window_configs``' tile at ``--imgs``
images a program, ``--set`` overriding constexprs, and reports registers, spills and the loop
mix per output pixel-channel. (Session 40's standalone prototype of that kernel, with an
inline-PTX L2 prefetch the library dropped, is ``tools/dw7_wgrad_proto.py`` in commit b9f47c7.)
"""

from __future__ import annotations

import collections
import os
import re

LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")

CLASSES = [
    ("FFMA", lambda op: op.startswith("FFMA") or op.startswith("FFMA2")),
    ("FMUL/FADD", lambda op: op.split(".")[0] in ("FMUL", "FADD", "FMUL2", "FADD2")),
    ("LDG", lambda op: op.startswith("LDG")),
    ("LDS", lambda op: op.startswith("LDS") or op.startswith("LDSM")),
    ("LDGSTS/TMA", lambda op: op.startswith("LDGSTS") or op.startswith("UTMALDG") or op.startswith("UBLKCP")),
    ("STG/STS", lambda op: op.startswith("STG") or op.startswith("STS")),
    ("LDL/STL", lambda op: op.startswith("LDL") or op.startswith("STL")),
    ("convert(PRMT/SHL/LOP3-hi/F2F/I2F)", lambda op: op.split(".")[0] in ("PRMT", "F2F", "F2FP", "I2F", "SHF", "SHL")),
    (
        "IMAD/IADD/LEA (int, address)",
        lambda op: op.split(".")[0] in ("IMAD", "IADD3", "LEA", "IADD", "IMNMX", "VIADDMNMX", "VIADD", "IABS", "IMUL"),
    ),
    ("LOP3", lambda op: op.split(".")[0] in ("LOP3", "LOP")),
    ("ISETP/FSETP/PLOP3/SEL", lambda op: op.split(".")[0] in ("ISETP", "FSETP", "PLOP3", "SEL", "FSEL", "P2R", "R2P")),
    ("MOV", lambda op: op.split(".")[0] in ("MOV", "UMOV", "CS2R", "S2R", "S2UR")),
    (
        "BRA/BAR/sync",
        lambda op: op.split(".")[0] in ("BRA", "BAR", "BSYNC", "BSSY", "WARPSYNC", "DEPBAR", "SYNCS", "EXIT", "NOP"),
    ),
]


def parse(path: str):
    ins = []
    with open(path) as f:
        for line in f:
            m = LINE.search(line)
            if m:
                addr = int(m.group(1), 16)
                ins.append((addr, m.group(3), (m.group(4) or "").strip(), line))
    return ins


def classify(op: str) -> str:
    for name, pred in CLASSES:
        if pred(op):
            return name
    return "other:" + op.split(".")[0]


def mix(body):
    c = collections.Counter(classify(op) for _, op, _, _ in body)
    return c


def loops(ins):
    out = []
    for addr, op, args, _ in ins:
        if op.startswith("BRA"):
            m = re.search(r"0x([0-9a-f]+)", args)
            if m:
                tgt = int(m.group(1), 16)
                if tgt <= addr:
                    body = [x for x in ins if tgt <= x[0] <= addr]
                    out.append((tgt, addr, body))
    return out


def report(path: str, show_all: bool = False) -> dict:
    ins = parse(path)
    res = {}
    ls = sorted(loops(ins), key=lambda t: t[1] - t[0])
    for tgt, end, body in ls:
        c = mix(body)
        ffma = c.get("FFMA", 0)
        total = len(body)
        print(
            f"loop [{tgt:#x}, {end:#x}]: {total} instructions, FFMA {ffma}"
            + (f" ({ffma / total:.0%}), non-FFMA per FFMA {(total - ffma) / ffma:.2f}" if ffma else "")
        )
        print("   " + ", ".join(f"{k} {v}" for k, v in c.most_common()))
        res[(tgt, end)] = c
    if show_all:
        c = mix(ins)
        print(f"whole kernel: {len(ins)} instructions")
        print("   " + ", ".join(f"{k} {v}" for k, v in c.most_common()))
    return res


def compile_sm90(
    fn, sig: dict, consts: dict, warps: int = 4, stages: int = 1, maxnreg: int | None = None, out: str = "/tmp/dw7_sass"
) -> dict:
    """Compile a @triton.jit kernel for sm_90 (no GPU); returns regs, stack, spill count, sass path."""
    import subprocess

    os.environ.pop("TRITON_INTERPRET", None)
    import triton
    from triton.backends.compiler import GPUTarget

    full = {p: ("constexpr" if p in consts else sig[p]) for p in fn.arg_names}
    source = triton.compiler.ASTSource
    try:
        from triton.experimental.gluon._runtime import GluonASTSource, GluonJITFunction

        if isinstance(fn, GluonJITFunction):
            source = GluonASTSource
    except ImportError:  # pragma: no cover
        pass
    src = source(fn=fn, signature=full, constexprs=consts)
    opts = {"num_warps": warps, "num_stages": stages}
    if maxnreg:
        opts["maxnreg"] = maxnreg
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)
    bindir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    os.makedirs(out, exist_ok=True)
    cubin = os.path.join(out, f"{fn.__name__}.cubin")
    open(cubin, "wb").write(k.asm["cubin"])
    res = subprocess.run([os.path.join(bindir, "cuobjdump"), "--dump-resource-usage", cubin],
                         capture_output=True, text=True).stdout  # fmt: skip
    sass = subprocess.run([os.path.join(bindir, "cuobjdump"), "--dump-sass", cubin],
                          capture_output=True, text=True).stdout  # fmt: skip
    path = os.path.join(out, f"{fn.__name__}.sass")
    open(path, "w").write(sass)
    regs = re.search(r"REG:(\d+)", res)
    stack = re.search(r"STACK:(\d+)", res)
    return {
        "regs": int(regs.group(1)) if regs else None,
        "stack": int(stack.group(1)) if stack else None,
        "LDL/STL": len(re.findall(r"\b(?:LDL|STL)\b", sass)),
        "shared": k.metadata.shared,
        "sass": path,
    }


def window_layer(c: int, h: int, overrides: dict, maxnreg: int | None, out: str, use_gluon: bool = False,
                 imgs: int = 1, dtype: str = "bf16", filt: int = 7) -> dict:  # fmt: skip
    """Compile the library's window kernel for the depthwise layer (C, H) (batch 64, ``filt`` x
    ``filt``, padding ``filt // 2``, NHWC: ConvNeXt's at 7, MobileNetV2's stride-1 layers at 3)
    with ``window_configs``' tile of ``imgs`` images a program, and print its loop mix."""
    import time
    from dataclasses import replace

    import torch

    from convgemm.conv import backward as bw
    from convgemm.conv import depthwise_wgrad_window as dww
    from convgemm.problem import ConvProblem

    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    x = torch.empty(64, c, h, h, dtype=tdt).to(memory_format=torch.channels_last)
    pad = filt // 2
    prob = ConvProblem.from_tensors(x, torch.empty(c, 1, filt, filt, dtype=tdt), None, padding=pad, groups=c)
    bw.interpreting = lambda: False  # the GPU's candidates (this process compiles only)
    cfg = replace(bw.DWGRAD.window_configs(prob)[0], window=imgs)
    const = dww.window_constexprs((c, h, h, prob.p, prob.q), (1, c, 1, c), (filt, filt, pad, pad), cfg.block_m,
                                  cfg.block_n, cfg.cols, cfg.window, cfg.block_k, cfg.num_stages - 1, False)  # fmt: skip
    const.update(overrides)
    sig = {"x_ptr": f"*{dtype}", "dy_ptr": f"*{dtype}", "ws_ptr": "*fp32"}
    sig.update({a: "i32" for a in ("N", "H", "W", "P", "Q", "s_xn", "s_xh", "s_yn", "s_yh")})
    fn = dww.depthwise_wgrad_window_kernel
    const.setdefault("LAYOUT", None)  # Triton's layouts (the defaulted parameter, bound here)
    if use_gluon:
        del const["LAYOUT"]
        fn = dww.depthwise_wgrad_window_kernel_gl
        const.update(dww.gluon_layout(cfg.block_m, cfg.block_n, cfg.num_warps))
    t0 = time.perf_counter()
    r = compile_sm90(fn, sig, const, cfg.num_warps, 1, maxnreg, out)
    print(
        f"C={c} H={h} {dtype} [{cfg.describe()}] maxnreg={maxnreg} {'gluon' if use_gluon else 'triton'} entry, "
        f"compiled in {time.perf_counter() - t0:.1f} s: {const}"
    )
    print(f"  registers {r['regs']}, stack {r['stack']} B, LDL/STL {r['LDL/STL']}, shared {r['shared']} B")
    mixes = report(r["sass"])
    main = max(mixes.items(), key=lambda kv: kv[1].get("FFMA", 0))[1]
    ffma = main.get("FFMA", 0)
    if ffma:
        per = ffma / (const["R"] * const["S"])
        tot = sum(main.values())
        print(
            f"  main loop per output pixel-channel: FFMA {ffma / per:.1f}, LDG {main.get('LDG', 0) / per:.2f}, "
            f"instructions {tot / per:.1f} ({tot / ffma:.2f} per FFMA)"
        )
    return r


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("sass", nargs="?")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--set", default="", help="constexpr overrides, e.g. PREFETCH=2,UNROLL=1")
    ap.add_argument("--maxnreg", type=int, default=None)
    ap.add_argument("--out", default="/tmp/dw7_sass")
    ap.add_argument("--gluon", action="store_true", help="with --window: the Gluon entry")
    ap.add_argument("--window", help="C,H of a ConvNeXt 7x7 layer: compile the library's window kernel for it")
    ap.add_argument("--imgs", type=int, default=1, help="with --window: the candidate of this many images a program")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"), help="with --window")
    ap.add_argument("--filter", type=int, default=7, help="with --window: the filter size (3, 5 or 7)")
    a = ap.parse_args()
    if a.window:
        import ast

        ov = {k: ast.literal_eval(v) for k, v in (kv.split("=") for kv in filter(None, a.set.split(",")))}
        cc, hh = map(int, a.window.split(","))
        window_layer(cc, hh, ov, a.maxnreg, a.out, a.gluon, a.imgs, a.dtype, a.filter)
    else:
        report(a.sass, a.all)
