#!/usr/bin/env python3
"""Compile the Gluon kernels (``conv/ws3d.py``, ``conv/ws_wgrad.py``) for sm_90 without a GPU, for
one 3-D problem and config, and summarise each: shared memory, registers, stack (spills), wgmma
and TMA instructions in the PTX. Nothing runs.

    PYTHONPATH=src python3 tools/compile_gluon.py --kernel wgrad --shape 8,512,2,7,7,512,3,3,3 \\
        --stride 1,1,1 --pad 1,1,1 --tile 1,8,8 --block 128,256 --stages 4 --warps 8 --split 1

``--shape`` is N,C,D,H,W,K,T,R,S (a 2-D layer as the kernels see it: N=1, D = the batch, T=1);
``--block`` is M,N of the tile: output channels x input channels for ``wgrad``, output pixels x
output channels for ``fwd`` (whose K step is ``--block-k``). The launch's arguments are built by
the kernels' own host functions on CPU tensors (``compile_only=True``), bound with Triton's
run-time specialisation and compiled with Gluon's front end.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

os.environ.pop("TRITON_INTERPRET", None)


def compile_sm90(fn, args: tuple, kw: dict, out: str) -> dict:
    """Compile Gluon JIT function ``fn`` for ``cuda:90`` with launch arguments ``args`` and
    options / constexprs ``kw``; return its resource summary (the cubin, PTX and SASS under ``out``)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import create_function_from_signature

    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, spec, opts = binder(*args, **kw)
    opts, signature, consts, attrs = fn._pack_args(backend, kw, bound, spec, opts)
    k = triton.compile(GluonASTSource(fn, signature, consts, attrs), target=target, options=opts.__dict__)
    os.makedirs(out, exist_ok=True)
    name = fn.__name__
    cubin = os.path.join(out, f"{name}.cubin")
    with open(cubin, "wb") as f:
        f.write(k.asm["cubin"])
    # the PTX, and the TTGIR and LLVM IR before it (where a barrier the SASS shows was inserted)
    for ext in ("ptx", "ttgir", "llir"):
        if ext in k.asm:
            with open(os.path.join(out, f"{name}.{ext}"), "w") as f:
                f.write(k.asm[ext])
    bindir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    res = subprocess.run([os.path.join(bindir, "cuobjdump"), "--dump-resource-usage", cubin],
                         capture_output=True, text=True).stdout  # fmt: skip
    ptx = k.asm["ptx"]
    regs, stack = re.search(r"REG:(\d+)", res), re.search(r"STACK:(\d+)", res)
    return {
        "kernel": name,
        "shared": k.metadata.shared,
        "regs": int(regs.group(1)) if regs else None,
        "stack": int(stack.group(1)) if stack else None,
        "wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
        "tma": len(re.findall(r"cp\.async\.bulk\.tensor", ptx)),
    }


def _ints(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split(","))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", choices=("fwd", "wgrad"), required=True)
    ap.add_argument("--shape", required=True, help="N,C,D,H,W,K,T,R,S")
    ap.add_argument("--stride", default="1,1,1")
    ap.add_argument("--pad", default="0,0,0")
    ap.add_argument("--dilation", default="1,1,1")
    ap.add_argument("--tile", required=True, help="depth,rows,columns of a pixel block")
    ap.add_argument("--block", required=True, help="M,N of the tile")
    ap.add_argument("--block-k", type=int, default=64, help="fwd: channels per K step")
    ap.add_argument("--stages", type=int, default=4)
    ap.add_argument("--warps", type=int, default=8)
    ap.add_argument("--split", type=int, default=1)
    ap.add_argument("--per-sm", type=int, default=1)
    ap.add_argument("--consumers", type=int, default=1, help="fwd: consumer partitions, each with its own --tile")
    ap.add_argument("--stream", type=int, default=0, help="fwd: stream-K (programs per SM: --per-sm)")
    ap.add_argument("--direct", type=int, default=0, help="fwd: 1 = stores from registers, no staging tile")
    ap.add_argument("--groups", default="", help="fwd: GC,KS = a super-group's input and output channels")
    ap.add_argument("--sms", type=int, default=132, help="SM count the grid is sized for")
    ap.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16", help="fp32: TF32 products (fwd)")
    ap.add_argument("--out", default="/tmp/compile_gluon")
    a = ap.parse_args()

    import torch

    from convgemm.conv import ws3d, ws_wgrad

    ws3d.sm_count = ws_wgrad.sm_count = lambda *_, **__: a.sms
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[a.dtype]
    n, c, d, h, w, k, t, r, s = _ints(a.shape)
    stride, pad, dil = _ints(a.stride), _ints(a.pad), _ints(a.dilation)
    dims = zip((d, h, w), pad, dil, (t, r, s), stride, strict=True)
    out_sz = [(i + 2 * p - q * (f - 1) - 1) // st + 1 for i, p, q, f, st in dims]
    cl3 = torch.channels_last_3d
    x = torch.zeros(n, c, d, h, w, dtype=dt).to(memory_format=cl3)
    y = torch.zeros(n, k, *out_sz, dtype=dt).to(memory_format=cl3)
    bm, bn = _ints(a.block)
    tile = _ints(a.tile)
    if a.kernel == "wgrad":
        dw = torch.zeros(k, c, t, r, s, dtype=dt)
        fn, grid, args, kw = ws_wgrad.ws_wgrad3d(x, y, dw, (t, r, s), pad, dil, stride, tile, bm, bn, a.stages,
                                                 a.warps, a.split, a.per_sm, compile_only=True)  # fmt: skip
    else:
        sg = _ints(a.groups) if a.groups else None
        wp = torch.zeros(k, t * r * s * (sg[0] if sg else c), dtype=dt)
        fix = torch.zeros(1024, dtype=torch.int32) if sg else None
        fn, grid, args, kw = ws3d.ws_conv3d(x, wp, None, y, (t, r, s), pad, dil, tile, bn, a.block_k, a.stages,
                                            a.warps, a.per_sm, "", a.split, stride, compile_only=True,
                                            consumers=a.consumers, stream=a.stream, direct=a.direct,
                                            super_groups=sg, fix=fix)[0]  # fmt: skip
    summary = compile_sm90(fn, args, kw, a.out)
    print(f"grid={grid} " + "  ".join(f"{key}={v}" for key, v in summary.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
