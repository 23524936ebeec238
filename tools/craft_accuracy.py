"""CRAFT 768x768 fp32: how far cuDNN and convgemm each land from a float64 run of the same model.

    PYTHONPATH=src python3 tools/craft_accuracy.py            # convgemm at CONVGEMM_FP32_PRECISION
    CONVGEMM_FP32_PRECISION=ieee PYTHONPATH=src python3 tools/craft_accuracy.py

Prints one line: the relative errors (Frobenius norm of the difference over the reference's) of
cuDNN fp32 (TF32 off), cuDNN TF32 and convgemm against float64, and of convgemm against cuDNN fp32.
The float64 reference runs on the GPU (cuDNN's double convolutions).
"""

from __future__ import annotations

import copy

import torch

import convgemm
from convgemm._runtime import STRICT_FP32
from convgemm.models.craft import CRAFT


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


def main() -> None:
    torch.manual_seed(0)
    model = CRAFT().eval().cuda().to(memory_format=torch.channels_last)
    x = torch.randn(1, 3, 768, 768, device="cuda").to(memory_format=torch.channels_last)
    with torch.no_grad():
        ref = copy.deepcopy(model).double()(x.double())
        torch.backends.cudnn.allow_tf32 = False
        cudnn = model(x)
        torch.backends.cudnn.allow_tf32 = True
        cudnn_tf32 = model(x)
        torch.backends.cudnn.allow_tf32 = False
        ours = convgemm.patch(model)(x)
    print(
        f"craft 768 fp32 vs float64: cudnn {rel(cudnn, ref):.2e}  cudnn-tf32 {rel(cudnn_tf32, ref):.2e}  "
        f"convgemm[{STRICT_FP32}] {rel(ours, ref):.2e}  (convgemm vs cudnn {rel(ours, cudnn):.2e})"
    )


if __name__ == "__main__":
    main()
