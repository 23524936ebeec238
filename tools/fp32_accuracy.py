"""Strict fp32, layer by layer: how far cuDNN (TF32 off) and convgemm each land from float64 on
the benchmark's own layers and tensors (GPU only).

    PYTHONPATH=src python3 tools/fp32_accuracy.py [--suite resnet50 craft] [--limit N]

convgemm runs at ``CONVGEMM_FP32_PRECISION`` (read at import: run the tool once per value).
The tensors are the benchmark's (``bench/runner._make_sets``: N(0, 1) input, weights scaled by
1/sqrt(fan-in), bias N(0, 1)); the reference is cuDNN's float64 convolution of the same
tensors. Prints each layer's two relative errors (Frobenius norm of the difference over the
reference's) and their ratio, then the geometric mean and the largest ratio.
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F

import convgemm
from convgemm._runtime import STRICT_FP32
from convgemm.bench.runner import _make_sets
from convgemm.bench.suites import suite


def rel(a: torch.Tensor, ref: torch.Tensor) -> float:
    return ((a.double() - ref).norm() / ref.norm().clamp_min(1e-300)).item()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", nargs="*", default=["resnet50", "craft"])
    ap.add_argument("--limit", type=int, default=0, help="at most this many layers per suite")
    a = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    ratios = []
    for name in a.suite:
        shapes = suite(name)[: a.limit or None]
        for shp in shapes:
            torch.manual_seed(0)
            x, w, b = _make_sets(shp, torch.float32, True, 0)[0]
            args = dict(stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
            ref = F.conv2d(x.double(), w.double(), None if b is None else b.double(), **args)
            e_cudnn = rel(F.conv2d(x, w, b, **args), ref)
            e_ours = rel(convgemm.conv2d(x, w, b, **args), ref)
            plan = convgemm.explain(x, w, b, **args)
            ratios.append(e_ours / max(e_cudnn, 1e-300))
            print(f"{shp.name:40s} cudnn {e_cudnn:.2e}  convgemm[{STRICT_FP32}] {e_ours:.2e}  "
                  f"ratio {ratios[-1]:6.2f}  {plan['algorithm']} {plan['config']}", flush=True)  # fmt: skip
            del x, w, b, ref
    g = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"{len(ratios)} layers: convgemm[{STRICT_FP32}] / cuDNN fp32 error, geomean {g:.2f}, max {max(ratios):.2f}")


if __name__ == "__main__":
    main()
