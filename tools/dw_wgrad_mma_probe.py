"""Depthwise wgrad on tensor cores, a probe (not a library algorithm): is it faster than the
FMA kernels on ConvNeXt's 7x7 layers?

    PYTHONPATH=src python3 tools/dw_wgrad_mma_probe.py              # GPU: time it (bf16)
    PYTHONPATH=src python3 tools/dw_wgrad_mma_probe.py --cpu        # interpreter: check it (fp32)

Why it could be: per channel c, with stride 1,

    dW[c, r, s] = sum_{n, h, q} x[n, h, q + s - pw, c] * dy[n, h - r + ph, q, c]

(h runs over x's rows). For one channel that is a GEMM whose M axis is the column tap s (A[s, j]
= x[n, h, q0 + j + s - pw]: a Hankel matrix of one x row), whose N axis is the row tap r (B[j, r]
= dy[n, h - r + ph, q0 + j]: R rows of dy), and whose K axis is the pixels (n, h, q): both
operands depend on one tap each, so R x S taps become an (S x R) output tile. Channels are the
batch of a 3-D ``tl.dot`` ([CB, 16, 16] x [CB, 16, 16], ``mma.sync`` on Hopper). A 7x7 filter
uses 49 of each 16 x 16 tile's 256 products (19%); the FMA kernels run at about 20% of the fp32
FMA rate on these layers (benchmarks/NOTES.md, session 21), and the tensor cores' rate is about
ten times that. What may bound it instead: the operand gathers (each x element is read for
every s, each dy row for every r, from L1) and the layout conversions into the MMA operands.

Programs: channel blocks of CB x row ranges of (n, h); each writes its fp32 partial [CB, R, S]
and the host sums the partials (a fixed order: deterministic).

Not timed (session 34): the sm_90 compile (``sm90-compile``, CB = 16, 4 warps: 128 registers,
16 KB of shared memory, no spills) has 386 instructions a warp in the inner loop for its 8
``HMMA.16816``: the gathers' address arithmetic and the operands' round trip through shared
memory (64 STS, 68 LDS a loop). Issue-bound at 4 instructions a clock per SM, ConvNeXt's 96 @56
would take about 130 us (86,016 loop iterations of 4 warps over 132 SMs at 1.9 GHz), cuDNN's time,
so no device time was spent on it. A form that builds the Hankel operand from one shared-memory
row (row offsets per tap, as ``ldmatrix`` takes them) would avoid the gathers; Triton does not
express it.
"""

from __future__ import annotations

import os
import sys

if "--cpu" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"

import argparse  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def dw_wgrad_mma_kernel(x_ptr, dy_ptr, part_ptr, H, W, C, P, Q, ph, pw, rows, rows_per,
                        sxn, sxh, sxw, syn, syh, syw, R: tl.constexpr, S: tl.constexpr,
                        CB: tl.constexpr, BQ: tl.constexpr, MT: tl.constexpr):  # fmt: skip
    pc = tl.program_id(0)
    pr = tl.program_id(1)
    cb = pc * CB + tl.arange(0, CB)
    t = tl.arange(0, MT)  # a tap: s on A's rows, r on B's columns
    j = tl.arange(0, BQ)  # a pixel of the K step
    c3 = cb[:, None, None]
    acc = tl.zeros((CB, MT, MT), dtype=tl.float32)
    row0 = pr * rows_per
    for row in range(row0, tl.minimum(row0 + rows_per, rows)):
        n = row // H
        h = row - n * H
        x_row = x_ptr + n.to(tl.int64) * sxn + h * sxh
        for q0 in range(0, Q, BQ):
            # A[c, s, j] = x[n, h, q0 + j + s - pw, c]
            col = q0 + j[None, None, :] + t[None, :, None] - pw
            a_ok = (t[None, :, None] < S) & (col >= 0) & (col < W) & (c3 < C)
            a = tl.load(x_row + col * sxw + c3, mask=a_ok, other=0.0)
            # B[c, j, r] = dy[n, h - r + ph, q0 + j, c]
            prow = h - t[None, None, :] + ph
            q = q0 + j[None, :, None]
            b_ok = (t[None, None, :] < R) & (prow >= 0) & (prow < P) & (q < Q) & (c3 < C)
            b = tl.load(dy_ptr + n.to(tl.int64) * syn + prow * syh + q * syw + c3, mask=b_ok, other=0.0)
            acc = tl.dot(a, b, acc)
    # part[pr, c, r, s] = acc[c, s, r]
    s_ = t[None, :, None]
    r_ = t[None, None, :]
    ok = (c3 < C) & (s_ < S) & (r_ < R)
    tl.store(part_ptr + ((pr * C + c3) * R + r_) * S + s_, acc, mask=ok)


def dw_wgrad_mma(x: torch.Tensor, dy: torch.Tensor, r: int, s: int, pad: tuple[int, int], cb: int = 16,
                 programs: int = 0) -> torch.Tensor:  # fmt: skip
    """dW [C, 1, R, S] (fp32) of a stride-1 depthwise conv: x [N, C, H, W], dy [N, C, P, Q], both
    channels_last. ``programs``: row ranges per channel block (default: about 4 programs per SM
    over all channel blocks)."""
    n, c, h, w = x.shape
    _, _, p, q = dy.shape
    rows = n * h
    blocks = triton.cdiv(c, cb)
    if not programs:
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4
        programs = max(1, min(rows, 4 * sms // blocks))
    per = triton.cdiv(rows, programs)
    programs = triton.cdiv(rows, per)
    part = torch.empty(programs, c, r, s, dtype=torch.float32, device=x.device)
    dw_wgrad_mma_kernel[(blocks, programs)](
        x, dy, part, h, w, c, p, q, pad[0], pad[1], rows, per, x.stride(0), x.stride(2), x.stride(3),
        dy.stride(0), dy.stride(2), dy.stride(3), R=r, S=s, CB=cb, BQ=16, MT=16, num_warps=4,
    )  # fmt: skip
    return part.sum(0).unsqueeze(1)


def _case(n, c, h, r, pad, dtype, device):
    cl = torch.channels_last
    x = torch.randn(n, c, h, h, device=device, dtype=dtype).contiguous(memory_format=cl)
    p = h + 2 * pad - r + 1
    dy = torch.randn(n, c, p, p, device=device, dtype=dtype).contiguous(memory_format=cl)
    return x, dy


def check_cpu() -> None:
    for n, c, h, r, pad in ((2, 20, 9, 7, 3), (1, 16, 6, 3, 1), (2, 8, 11, 5, 0)):
        x, dy = _case(n, c, h, r, pad, torch.float32, "cpu")
        got = dw_wgrad_mma(x, dy, r, r, (pad, pad), cb=16, programs=3)
        want = torch.nn.grad.conv2d_weight(x.double(), (c, 1, r, r), dy.double(), padding=pad, groups=c)
        err = ((got.double() - want).norm() / want.norm()).item()
        print(f"cpu n{n} c{c} h{h} {r}x{r} pad{pad}: rel err {err:.2e}")
        assert err < 1e-5, err


def time_gpu(cbs: list[int]) -> None:
    import convgemm
    from convgemm.bench.runner import _bench

    for n, c, h in ((64, 96, 56), (64, 192, 28), (64, 384, 14), (64, 768, 7)):
        x, dy = _case(n, c, h, 7, 3, torch.bfloat16, "cuda")
        ref = torch.nn.grad.conv2d_weight(x.double(), (c, 1, 7, 7), dy.double(), padding=3, groups=c)
        cudnn = _bench(lambda: torch.nn.grad.conv2d_weight(x, (c, 1, 7, 7), dy, padding=3, groups=c))  # noqa: B023
        ours = _bench(lambda: convgemm.conv2d_weight(x, (c, 1, 7, 7), dy, padding=3, groups=c))  # noqa: B023
        line = [f"dw7x7 {c} @{h}: cuDNN {cudnn:.1f} us, convgemm {ours:.1f} us"]
        for cb in cbs:
            for per_sm in (2, 4, 8):
                progs = max(1, per_sm * 132 // triton.cdiv(c, cb))
                fn = lambda: dw_wgrad_mma(x, dy, 7, 7, (3, 3), cb=cb, programs=progs)  # noqa: B023, E731
                err = ((fn().double() - ref).norm() / ref.norm()).item()
                line.append(f"mma cb{cb} x{per_sm}/SM {_bench(fn):.1f} us (err {err:.1e})")
        print("  ".join(line), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", action="store_true", help="check against float64 under the interpreter")
    ap.add_argument("--cb", type=int, nargs="*", default=[16, 32], help="channels per program")
    a = ap.parse_args()
    if a.cpu:
        check_cpu()
    else:
        time_gpu(a.cb)


if __name__ == "__main__":
    main()
