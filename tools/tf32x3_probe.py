"""Why 3xTF32 is less accurate than its error model says (NOTES, session 6): five ways of
computing an fp32 matmul with a plain Triton kernel, each against a float64 reference (GPU only).

    PYTHONPATH=src python3 tools/tf32x3_probe.py [--k 512 4608 16384]

Modes (``MODE``):

0. ``ieee``: FMAs (``input_precision="ieee"``);
1. ``x3``: ``matmul.blocks.dot_acc``'s 3xTF32 (truncating split, one tensor-core accumulator);
2. ``x3 rn``: the split rounded to nearest (hi and lo both TF32 values);
3. ``x3 tile``: as 1, but each K tile's products summed in a fresh accumulator and added to the
   running sum by an IEEE add (the tensor core's own adds then span one K tile, not all of K);
4. ``x3 rn tile``: 2 and 3 together.

The hypothesis under test: the tensor core's fp32 accumulation rounds toward zero, a bias that
grows with K; then modes 3-4 are as accurate as ``ieee`` and modes 1-2 get worse with K.
Prints the relative error (Frobenius) of each mode and of cuBLAS fp32 (TF32 off), and each
mode's time on a 4096^3 product.
"""

from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl


@triton.jit
def _split(v, RN: tl.constexpr):
    bits = v.to(tl.int32, bitcast=True)
    if RN:
        bits = bits + 4096  # half of the 13 cleared bits: round to nearest (ties away)
    hi = (bits & -8192).to(tl.float32, bitcast=True)
    lo = v - hi
    if RN:
        lo = ((lo.to(tl.int32, bitcast=True) + 4096) & -8192).to(tl.float32, bitcast=True)
    return hi, lo


@triton.jit
def _mm(a_ptr, b_ptr, c_ptr, M, N, K, MODE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :])
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :])
        if MODE == 0:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            a_hi, a_lo = _split(a, MODE == 2 or MODE == 4)
            b_hi, b_lo = _split(b, MODE == 2 or MODE == 4)
            if MODE >= 3:
                part = tl.dot(a_lo, b_hi, input_precision="tf32")
                part = tl.dot(a_hi, b_lo, part, input_precision="tf32")
                part = tl.dot(a_hi, b_hi, part, input_precision="tf32")
                acc += part
            else:
                acc = tl.dot(a_lo, b_hi, acc, input_precision="tf32")
                acc = tl.dot(a_hi, b_lo, acc, input_precision="tf32")
                acc = tl.dot(a_hi, b_hi, acc, input_precision="tf32")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


NAMES = ["ieee", "x3", "x3 rn", "x3 tile", "x3 rn tile"]


def run(a: torch.Tensor, b: torch.Tensor, mode: int) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty(m, n, device=a.device, dtype=torch.float32)
    bm, bn, bk = (64, 64, 16) if mode == 0 else (128, 128, 32)
    _mm[(m // bm, n // bn)](a, b, c, m, n, k, MODE=mode, BM=bm, BN=bn, BK=bk, num_warps=8 if mode else 4,
                            num_stages=3)  # fmt: skip
    return c


def rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    return ((x.double() - ref).norm() / ref.norm()).item()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, nargs="*", default=[576, 4608, 18432])
    ap.add_argument("--m", type=int, default=1024)
    ap.add_argument("--positive", action="store_true", help="uniform [0, 1) operands (sums that only grow)")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    for k in a.k:
        for dist in ("normal", "uniform") if not a.positive else ("uniform",):
            gen = torch.randn if dist == "normal" else torch.rand
            x = gen(a.m, k, device="cuda")
            y = gen(k, a.m, device="cuda")
            ref = x.double() @ y.double()
            row = [f"K {k:6d} {dist:8s} cuBLAS fp32 {rel(x @ y, ref):.2e}"]
            for mode, name in enumerate(NAMES):
                row.append(f"{name} {rel(run(x, y, mode), ref):.2e}")
            print("  ".join(row), flush=True)
    from convgemm.bench.runner import _bench

    x = torch.randn(4096, 4096, device="cuda")
    y = torch.randn(4096, 4096, device="cuda")
    flop = 2 * 4096**3
    times = [f"cuBLAS fp32 {flop / _bench(lambda: x @ y) / 1e6:.0f}"]
    for mode, name in enumerate(NAMES):
        times.append(f"{name} {flop / _bench(lambda mode=mode: run(x, y, mode)) / 1e6:.0f}")
    print("TFLOP/s on 4096^3: " + "  ".join(times))


if __name__ == "__main__":
    main()
