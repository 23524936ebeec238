"""A/B timings of the choices session 3 made without a GPU (run on one; prints a table).

    PYTHONPATH=src python3 tools/ab_kernels.py [--quick]

Each row times two ways of computing the same thing on the same tensors (bf16, channels_last,
CUDA-event medians through triton.testing.do_bench) and checks that they agree:

- grouped forward: exact NaN/Inf semantics (main kernel listing non-finite tiles + fix-up launch)
  vs the main kernel with no NaN handling; and the exact path with one NaN in the input vs none;
- strided dgrad as per-phase forward convolutions vs the one-launch gather kernel (dense and
  depthwise), and the one-launch TMA kernel over all phases (`DgradTma`) vs the gather kernel;
- depthwise wgrad: the direct kernel vs the gather GEMM;
- wgrad_tma vs the gather wgrad on a dense layer;
- conv3d forward: the 5-D TMA kernel vs the gather kernel.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch


def _time(fn) -> float:
    from triton.testing import do_bench

    return do_bench(fn, warmup=10, rep=50, return_mode="median") * 1e3


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one shape per comparison")
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU: tiny shapes on the CPU under TRITON_INTERPRET=1, no timings (checks the script)")  # fmt: skip
    a = ap.parse_args()
    dev = "cuda"
    if a.dry_run:
        global _time
        dev, _time = "cpu", lambda fn: 0.0  # noqa: E731
    elif not torch.cuda.is_available():
        print("ab_kernels: needs a CUDA GPU (the comparisons are timings); --dry-run checks the script")
        return 0
    shrink = (lambda v: max(1, v // 16)) if a.dry_run else (lambda v: v)  # noqa: E731
    import convgemm
    from convgemm.conv import conv3d as k3
    from convgemm.conv.backward import DGRAD, DGRAD_TMA, DWGRAD, WGRAD, WGRAD_TMA
    from convgemm.conv.fprop import ALGORITHMS
    from convgemm.functional import _dgrad_by_phases
    from convgemm.problem import ConvProblem
    from convgemm.problem3d import ConvProblem3d

    dt, cl = torch.bfloat16, torch.channels_last
    rows = []

    def tensors(n, c, h, w, k, r, s, groups=1):
        n, h, w = shrink(n), max(shrink(h), 2 * r), max(shrink(w), 2 * s)
        x = torch.randn(n, c, h, w, device=dev, dtype=dt).contiguous(memory_format=cl)
        wt = (torch.randn(k, c // groups, r, s, device=dev, dtype=dt) * 0.1).contiguous(memory_format=cl)
        return x, wt

    grouped = ALGORITHMS["grouped"]

    def grouped_row(n, c, h, st, with_nan=False):
        """grouped forward: exact NaN/Inf (main + fix-up) vs no NaN handling (main only)"""
        x, wt = tensors(n, c, h, h, c, 3, 3, 32)
        kw = dict(stride=st, padding=1, groups=32)
        on = lambda: convgemm.conv2d(x, wt, None, **kw, algorithm="grouped")  # noqa: E731
        y_on = on()
        t_on = _time(on)
        if with_nan:  # the fix-up's rare path: one NaN, so a few tiles are recomputed
            x_nan = x.clone()
            x_nan[0, 0, 0, 0] = float("nan")
            nan = lambda: convgemm.conv2d(x_nan, wt, None, **kw, algorithm="grouped")  # noqa: E731
            y_nan = nan()
            fin = torch.isfinite(y_nan)
            rows.append((f"grouped fwd g32 {c}@{h}", "1 NaN", _time(nan), "no NaN", t_on,
                         _rel(y_nan[fin], y_on[fin])))  # fmt: skip
            return
        saved = type(grouped).EXACT_NONFINITE
        type(grouped).EXACT_NONFINITE = False
        convgemm.functional.clear_plans()
        try:
            y_off = on()
            t_off = _time(on)
        finally:
            type(grouped).EXACT_NONFINITE = saved
            convgemm.functional.clear_plans()
        rows.append((f"grouped fwd g32 {c}@{h}", "exact", t_on, "no NaN fix", t_off, _rel(y_on, y_off)))

    def dgrad_row(n, c, h, k, r, st, pad, groups=1):
        """strided dgrad: phases vs gather"""
        x, wt = tensors(n, c, h, h, k, r, r, groups)
        kw = dict(stride=st, padding=pad, groups=groups)
        prob = ConvProblem.from_tensors(x, wt, None, **kw)
        dy = torch.randn(prob.output_shape, device=dev, dtype=dt).contiguous(memory_format=cl)
        dx1 = torch.empty_like(x)
        dx2 = torch.empty_like(x)
        phases = lambda: _dgrad_by_phases(prob, wt, dy, dx1)  # noqa: E731
        gather = lambda: DGRAD.run(prob, dy, wt, dx2, DGRAD.default_config(prob))  # noqa: E731
        phases()
        gather()
        cudnn = _time(lambda: torch.nn.grad.conv2d_input(x.shape, wt, dy, **kw))
        t_gather = _time(gather)
        g = f" g{groups}" if groups > 1 else ""
        rows.append((f"dgrad {r}x{r} s{st} {c}->{k}{g} @{h} (cuDNN {cudnn:.1f} us)", "phases", _time(phases), "gather",
                     t_gather, _rel(dx1, dx2)))  # fmt: skip
        # the one-launch TMA kernel over all phases (experimental: CONVGEMM_STRIDED_TMA=1)
        os.environ["CONVGEMM_STRIDED_TMA"] = "1"
        try:
            why = DGRAD_TMA.supports(prob, dy)
            if why is None:
                dx3 = torch.empty_like(x)
                tma = lambda: DGRAD_TMA.run(prob, dy, wt, dx3, DGRAD_TMA.default_config(prob))  # noqa: E731
                tma()
                rows.append((f"dgrad {r}x{r} s{st} {c}->{k} @{h}", "tma phases", _time(tma), "gather", t_gather,
                             _rel(dx3, dx2)))  # fmt: skip
            else:
                print(f"ab_kernels: dgrad_tma skipped: {why}")
        finally:
            os.environ.pop("CONVGEMM_STRIDED_TMA", None)

    def direct_wgrad_row(label, n, c, h, r, groups, stride=1):
        """direct wgrad (depthwise, narrow groups) vs the gather GEMM"""
        x, wt = tensors(n, c, h, h, c, r, r, groups)
        prob = ConvProblem.from_tensors(x, wt, None, stride=stride, padding=r // 2, groups=groups)
        dy = torch.randn(prob.output_shape, device=dev, dtype=dt).contiguous(memory_format=cl)
        dw1, dw2 = torch.empty_like(wt), torch.empty_like(wt)
        direct = lambda: DWGRAD.run(prob, x, dy, dw1)  # noqa: E731
        gemm = lambda: WGRAD.run(prob, x, dy, dw2, WGRAD.default_config(prob))  # noqa: E731
        direct()
        gemm()
        rows.append((label, "direct", _time(direct), "gather", _time(gemm), _rel(dw1, dw2)))

    def dw_row(n, c, h, r):
        direct_wgrad_row(f"depthwise wgrad {r}x{r} {c}@{h}", n, c, h, r, c)

    def grouped_wgrad_row(n, c, h, st):
        # ResNeXt g32: 4 channels per group at 128
        direct_wgrad_row(f"grouped wgrad g32 {c}@{h} s{st}", n, c, h, 3, 32, st)

    count = 1 if a.quick else 2
    for args in [(64, 256, 56, 1), (64, 512, 28, 1)][:count]:
        grouped_row(*args)
    grouped_row(64, 256, 56, 1, with_nan=True)
    for args in [(64, 128, 56, 128, 3, 2, 1), (64, 256, 56, 512, 1, 2, 0)][:count]:
        dgrad_row(*args)
    # depthwise strided dgrad (MobileNetV2): the per-phase convolutions are depthwise forward
    # problems (the rows kernel); conv2d_input takes the gather kernel for 3x3 stride 2 today
    for args in [(64, 96, 112, 96, 3, 2, 1, 96), (64, 144, 56, 144, 3, 2, 1, 144)][:count]:
        dgrad_row(*args)
    for args in [(64, 144, 56, 3), (64, 384, 14, 7)][:count]:
        dw_row(*args)
    grouped_wgrad_row(64, 128, 56, 1)

    # dense wgrad: TMA vs gather
    x, wt = tensors(64, 128, 28, 28, 128, 3, 3)
    prob = ConvProblem.from_tensors(x, wt, None, padding=1)
    dy = torch.randn(prob.output_shape, device=dev, dtype=dt).contiguous(memory_format=cl)
    dw1, dw2 = torch.empty_like(wt), torch.empty_like(wt)
    tma = lambda: WGRAD_TMA.run(prob, x, dy, dw1, WGRAD_TMA.default_config(prob))  # noqa: E731
    gemm = lambda: WGRAD.run(prob, x, dy, dw2, WGRAD.default_config(prob))  # noqa: E731
    tma()
    gemm()
    rows.append(("wgrad 3x3 128@28", "wgrad_tma", _time(tma), "gather", _time(gemm), _rel(dw1, dw2)))

    # conv3d forward: TMA vs gather
    x = torch.randn(
        shrink(8), 16 if a.dry_run else 64, shrink(16) + 2, shrink(56) + 2, shrink(56) + 2, device=dev, dtype=dt
    ).contiguous(memory_format=torch.channels_last_3d)
    c3 = 16 if a.dry_run else 64
    wt = (torch.randn(c3, c3, 3, 3, 3, device=dev, dtype=dt) * 0.05).contiguous(memory_format=torch.channels_last_3d)
    p3 = ConvProblem3d.from_tensors(x, wt, None, padding=1)
    y1 = torch.empty(p3.output_shape, device=dev, dtype=dt).contiguous(memory_format=torch.channels_last_3d)
    y2 = torch.empty_like(y1)
    tma = lambda: k3.forward_tma(p3, x, wt, None, y1)  # noqa: E731
    gather = lambda: k3.forward(p3, x, wt, None, y2)  # noqa: E731
    tma()
    gather()
    ref = torch.nn.functional.conv3d(x, wt, padding=1)
    t_ref = _time(lambda: torch.nn.functional.conv3d(x, wt, padding=1))
    rows.append(("conv3d 3x3x3 64@16x56", "tma", _time(tma), "gather", _time(gather), _rel(y1, y2)))
    rows.append(("  (cuDNN conv3d, same layer)", "cudnn", t_ref, "tma rel err", 0.0, _rel(y1, ref)))

    print(f"{'comparison':36s} {'A':>10s} {'us':>9s} {'B':>12s} {'us':>9s} {'A/B':>6s}  rel diff")
    for name, an, ta, bn, tb, err in rows:
        ratio = f"{ta / tb:6.2f}" if tb else "     -"
        print(f"{name:36s} {an:>10s} {ta:9.1f} {bn:>12s} {tb:9.1f} {ratio}  {err:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
