"""Does Triton's Gluon lower a TMA load shared by a CTA cluster to a multicast copy on sm_90?

Compiles (no GPU needed) a kernel of ``num_ctas=2`` that TMA-loads one 64 x 64 bf16 tile into a
shared layout whose ``cga_layout`` either gives both CTAs the same tile (``--cga "[[0, 0]]"``,
where a multicast would halve the L2 reads of a shared operand) or splits its rows between them
(``"[[1, 0]]"``), and prints the PTX lines of the copy and the cluster.

    PYTHONPATH=src python3 tools/multicast_probe.py --cga "[[0, 0]]"

Triton 3.6 (session 56): both forms emit one ``cp.async.bulk.tensor ... shared::cluster`` per
CTA, each CTA reading its own coordinates; no ``.multicast::cluster`` form.
"""

from __future__ import annotations

import argparse
import ast
import os

os.environ.pop("TRITON_INTERPRET", None)

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma  # noqa: E402


@gluon.jit
def probe_kernel(a_desc, out_ptr, BM: gl.constexpr, BK: gl.constexpr, SMEM: gl.constexpr, REG: gl.constexpr):
    buf = gl.allocate_shared_memory(gl.bfloat16, [BM, BK], SMEM)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, a_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(a_desc, [0, 0], bar, buf)
    mbarrier.wait(bar, 0)
    v = buf.load(REG)
    offs_m = gl.arange(0, BM, layout=gl.SliceLayout(1, REG))
    offs_k = gl.arange(0, BK, layout=gl.SliceLayout(0, REG))
    gl.store(out_ptr + offs_m[:, None] * BK + offs_k[None, :], v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cga", default="[[0, 0]]", help="the shared and register layouts' cga_layout (two CTAs)")
    a = ap.parse_args()
    cga = ast.literal_eval(a.cga)
    smem = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2, cga_layout=cga)
    reg = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0], cga_layout=cga)
    consts = {"BM": 64, "BK": 64, "SMEM": smem, "REG": reg}
    sig = {"a_desc": f"tensordesc<bf16[64, 64],{smem!r}>", "out_ptr": "*bf16", **dict.fromkeys(consts, "constexpr")}
    k = triton.compile(GluonASTSource(fn=probe_kernel, signature=sig, constexprs=consts),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_ctas": 2})  # fmt: skip
    for line in k.asm["ptx"].splitlines():
        if not line.lstrip().startswith((".loc", ".file")) and any(
            s in line for s in ("cp.async.bulk.tensor", "cluster", "multicast")
        ):
            print(line.strip())


if __name__ == "__main__":
    main()
