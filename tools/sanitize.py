#!/usr/bin/env python3
"""A representative set of convgemm kernels for NVIDIA compute-sanitizer, each checked for
correctness too.

Every forward algorithm forced on shapes it takes (odd sizes, stride 1 and 2, padding, dilation
2 where the algorithm has it, groups, depthwise, NCHW and channels_last), the TMA algorithms
with a forced split-K config as well, dgrad (stride 1, which runs as a forward convolution, and
the per-phase kernel) and wgrad (with and without split-K), in bf16 and fp32. Each case is
compared with the float64 CPU reference and prints one line; the exit status is 1 if any case
fails or raises.

    python3 tools/sanitize.py [-k SUBSTRING] [--dtypes bf16,fp32] [--list]
    bash tools/sanitize.sh            # the same under memcheck, racecheck and initcheck

Forced algorithms and ``CONVGEMM_AUTOTUNE=0`` keep the runs short (first-call tuning would
launch every candidate kernel). Outputs are poisoned with NaN before each kernel runs
(``CONVGEMM_POISON_OUTPUTS=1``), so an element a kernel fails to write fails the comparison.
Without a CUDA GPU it says so and exits 0; with ``TRITON_INTERPRET=1`` it runs the same cases
under Triton's interpreter on the CPU (slow: a check of this script, not of the compiled kernels).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, replace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
# read when convgemm is imported (poison) or a problem is first planned (autotune)
os.environ.setdefault("CONVGEMM_AUTOTUNE", "0")
os.environ.setdefault("CONVGEMM_POISON_OUTPUTS", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
#: ||y - ref|| / ||ref|| allowed (fp32 is strict IEEE here: TF32 is switched off)
TOLERANCE = {torch.bfloat16: 1e-2, torch.float32: 1e-5}
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
NAMES = {v: k for k, v in DTYPES.items()}


@dataclass(frozen=True)
class Case:
    direction: str  # fwd, dgrad or wgrad
    algorithm: str  # the forced forward algorithm; "" for the backward kernels (convgemm's choice)
    c: int
    k: int
    r: int
    stride: int = 1
    pad: int = 0
    dil: int = 1
    groups: int = 1
    bias: bool = False
    nchw: bool = False  # NCHW tensors instead of channels_last
    split_k: int = 1  # > 1: the algorithm's default config with this split count, run directly
    nan: bool = False  # one NaN in the input (grouped: the main kernel lists the tile, the fix-up redoes it)
    n: int = 3
    h: int = 13
    w: int = 11

    @property
    def label(self) -> str:
        s = f"{self.direction:5s} {self.algorithm or '-':17s} N{self.n} C{self.c} {self.h}x{self.w} K{self.k} "
        s += f"{self.r}x{self.r} s{self.stride} p{self.pad} d{self.dil} g{self.groups}"
        s += " nchw" if self.nchw else " nhwc"
        if self.bias:
            s += " bias"
        if self.split_k > 1:
            s += f" splitk{self.split_k}"
        if self.nan:
            s += " nan"
        return s


def _fwd(algorithm, c, k, r, **kw) -> Case:
    return Case("fwd", algorithm, c, k, r, **kw)


CASES = [
    _fwd("implicit_gemm", 17, 33, 3, pad=1, bias=True),
    _fwd("implicit_gemm", 17, 33, 3, stride=2, pad=1, dil=2, nchw=True),
    _fwd("implicit_gemm", 24, 40, 3, pad=1, groups=2),
    _fwd("small_k", 3, 33, 3, stride=2, pad=1, bias=True),
    _fwd("small_k", 17, 40, 3, pad=2, dil=2, nchw=True),
    _fwd("implicit_gemm_tma", 24, 40, 3, pad=1, bias=True),
    _fwd("implicit_gemm_tma", 24, 40, 3, pad=2, dil=2),
    _fwd("implicit_gemm_tma", 24, 40, 1, stride=2),  # strided 1x1: stride 1 on the subsampled view
    _fwd("implicit_gemm_tma", 48, 80, 3, pad=1, groups=2),
    _fwd("implicit_gemm_tma", 24, 40, 3, pad=1, bias=True, split_k=3),
    _fwd("gemm_1x1", 24, 40, 1, bias=True),
    _fwd("gemm_1x1", 48, 80, 1, groups=2),
    _fwd("gemm_1x1", 48, 40, 1, split_k=3),
    _fwd("grouped", 24, 40, 3, pad=1, groups=2, bias=True),
    _fwd("grouped", 32, 40, 3, stride=2, pad=2, dil=2, groups=4, nchw=True),
    _fwd("grouped", 32, 32, 3, pad=1, groups=8, bias=True, nan=True),  # the non-finite fix-up launch
    _fwd("depthwise", 17, 34, 3, pad=1, groups=17, bias=True),  # channel multiplier 2
    _fwd("depthwise", 24, 24, 3, stride=2, pad=2, dil=2, groups=24, nchw=True),
    Case("dgrad", "", 17, 33, 3, pad=1),  # stride 1: a forward convolution of dy
    Case("dgrad", "", 24, 40, 3, pad=1),  # the same, TMA-aligned
    Case("dgrad", "", 17, 33, 3, stride=2, pad=1),  # the per-phase kernel
    Case("dgrad", "", 24, 40, 3, stride=2, pad=2, dil=2, groups=2, nchw=True),
    Case("dgrad", "", 17, 33, 1, pad=1),  # padding wider than the kernel: per-phase at stride 1
    Case("wgrad", "", 17, 33, 3, pad=1),
    Case("wgrad", "", 17, 33, 3, stride=2, pad=1, dil=2, nchw=True),
    Case("wgrad", "", 24, 40, 3, pad=1),  # TMA-aligned
    Case("wgrad", "", 24, 40, 1, stride=2),
    Case("wgrad", "", 24, 40, 3, pad=1, groups=2),
    Case("wgrad", "", 17, 33, 3, pad=1, h=45, w=43),  # a long N*P*Q reduction: split-K on a GPU
    Case("wgrad", "", 24, 24, 3, pad=1, groups=24),  # depthwise: the direct kernel
    Case("wgrad", "", 16, 32, 7, stride=2, pad=3, groups=16, nchw=True, h=29, w=27),  # multiplier 2, 7x7
]


def _tensor(shape, dtype, device, nchw: bool) -> torch.Tensor:
    t = torch.randn(shape, device=device).to(dtype)
    return t if nchw else t.to(memory_format=torch.channels_last)


def _rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    y = y.detach().double().cpu()
    if tuple(y.shape) != tuple(ref.shape):
        return float("inf")
    bad = ~torch.isfinite(ref)
    if bad.any():  # a NaN input: the same NaN/Inf positions, and the finite rest compared
        if not torch.equal(torch.isnan(y), torch.isnan(ref)) or not torch.equal(torch.isinf(y), torch.isinf(ref)):
            return float("inf")
        y, ref = y[~bad], ref[~bad]
    if not torch.isfinite(y).all():
        return float("inf")
    den = ref.norm().item()
    num = (y - ref).norm().item()
    return num / den if den > 0 else num


def _forward_split_k(case: Case, x, w, b, kw) -> torch.Tensor:
    """The forced algorithm's default config with ``case.split_k`` splits, launched directly (the
    tuner is what offers split-K configs; ``conv2d`` with tuning off never does)."""
    from convgemm.conv.fprop import ALGORITHMS
    from convgemm.functional import _prepare

    prob, xn, y = _prepare(x, w, b, **kw)
    algo = ALGORITHMS[case.algorithm]
    reason = algo.supports(prob)
    if reason is not None:
        raise ValueError(f"algorithm {case.algorithm!r} cannot run {prob.describe()}: {reason}")
    algo.run(prob, xn, w, b, y, replace(algo.default_config(prob), split_k=case.split_k))
    return y


def run_case(case: Case, dtype: torch.dtype, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(convgemm's result, the float64 CPU reference) for one case."""
    import convgemm

    kw = dict(stride=case.stride, padding=case.pad, dilation=case.dil, groups=case.groups)
    x = _tensor((case.n, case.c, case.h, case.w), dtype, device, case.nchw)
    if case.nan:
        x[0, 0, case.h // 2, case.w // 2] = float("nan")
    w = _tensor((case.k, case.c // case.groups, case.r, case.r), dtype, device, case.nchw)
    xd, wd = x.double().cpu(), w.double().cpu()
    if case.direction == "fwd":
        b = torch.randn(case.k, device=device).to(dtype) if case.bias else None
        ref = F.conv2d(xd, wd, None if b is None else b.double().cpu(), **kw)
        if case.split_k > 1:
            y = _forward_split_k(case, x, w, b, kw)
        else:
            y = convgemm.conv2d(x, w, b, **kw, algorithm=case.algorithm)
        return y, ref
    p = (case.h + 2 * case.pad - case.dil * (case.r - 1) - 1) // case.stride + 1
    q = (case.w + 2 * case.pad - case.dil * (case.r - 1) - 1) // case.stride + 1
    dy = _tensor((case.n, case.k, p, q), dtype, device, case.nchw)
    if case.direction == "dgrad":
        ref = torch.nn.grad.conv2d_input(x.shape, wd, dy.double().cpu(), **kw)
        return convgemm.conv2d_input(x.shape, w, dy, **kw), ref
    ref = torch.nn.grad.conv2d_weight(xd, w.shape, dy.double().cpu(), **kw)
    return convgemm.conv2d_weight(x, w.shape, dy, **kw), ref


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", dest="only", default="", help="run only the cases whose line contains this")
    ap.add_argument("--dtypes", default="bf16,fp32", help="comma-separated: bf16, fp32")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    a = ap.parse_args(argv)
    dtypes = [DTYPES[d] for d in a.dtypes.split(",") if d]
    todo = [(c, d) for c in CASES for d in dtypes if a.only in f"{c.label} {NAMES[d]}"]
    if a.list:
        for c, d in todo:
            print(f"{c.label} {NAMES[d]}")
        return 0
    if INTERPRET:
        device = "cpu"
    elif torch.cuda.is_available():
        device = "cuda"
    else:
        print("tools/sanitize.py: needs a CUDA GPU (or TRITON_INTERPRET=1 to run under the interpreter); nothing run")
        return 0
    torch.backends.cudnn.allow_tf32 = False  # fp32 cases use strict IEEE products
    torch.manual_seed(0)
    print(f"{len(todo)} cases on {torch.cuda.get_device_name() if device == 'cuda' else 'the interpreter'}", flush=True)
    counts = {"ok": 0, "skip": 0, "FAIL": 0, "ERROR": 0}
    for case, dtype in todo:
        line = f"{case.label} {NAMES[dtype]}"
        try:
            y, ref = run_case(case, dtype, device)
            if device == "cuda":
                torch.cuda.synchronize()  # a fault is reported against this case
        except ValueError as e:
            if "cannot run" not in str(e):
                status, note = "ERROR", f"{type(e).__name__}: {e}"
            else:  # e.g. the TMA algorithms on a GPU older than Hopper
                status, note = "skip", str(e).split(": ", 1)[-1]
        except Exception as e:  # noqa: BLE001 - reported, counted, and the next case runs
            status, note = "ERROR", f"{type(e).__name__}: {e}"
        else:
            err, tol = _rel_err(y, ref), TOLERANCE[dtype]
            status = "ok" if err <= tol else "FAIL"
            note = f"rel err {err:.1e} (tol {tol:.0e})"
        counts[status] += 1
        print(f"{status:5s} {line}  {note}", flush=True)
    print(", ".join(f"{v} {k}" for k, v in counts.items()), flush=True)
    return 1 if counts["FAIL"] or counts["ERROR"] else 0


if __name__ == "__main__":
    sys.exit(main())
