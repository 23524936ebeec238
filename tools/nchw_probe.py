"""Does the copy engine take a box whose innermost coordinate is not 16-byte aligned? (GPU)

    PYTHONPATH=src python3 tools/nchw_probe.py R S PAD_H PAD_W

Runs ``implicit_gemm_tma_nchw``'s kernel directly (bypassing ``supports``) on one NCHW bf16
layer with an R x S filter: S > 1 or column padding shifts the boxes' first column by
``s - pad_w`` elements, which is not a 16-byte multiple. Prints the error against cuDNN, or the
CUDA error. Run each case in its own process: an illegal instruction poisons the context.
"""

import sys
from dataclasses import replace

import torch
import torch.nn.functional as F

from convgemm.conv.fprop import ALGORITHMS
from convgemm.problem import ConvProblem

r, s, ph, pw = map(int, sys.argv[1:5])
x = torch.randn(8, 64, 56, 64, device="cuda", dtype=torch.bfloat16)
w = torch.randn(64, 64, r, s, device="cuda", dtype=torch.bfloat16) / (64 * r * s) ** 0.5
prob = replace(ConvProblem.from_tensors(x, w, None, padding=(ph, pw)), tma_ok=True, input_nchw=True, input_tma_ok=True)
algo = ALGORITHMS["implicit_gemm_tma_nchw"]
ref = F.conv2d(x, w, padding=(ph, pw))
y = torch.full_like(ref, float("nan")).contiguous()
try:
    algo.run(prob, x, w, None, y, algo.default_config(prob))
    torch.cuda.synchronize()
    err = ((y.double() - ref.double()).norm() / ref.double().norm()).item()
    print(f"probe {r}x{s} pad ({ph},{pw}): rel err {err:.2e}")
except Exception as e:  # noqa: BLE001
    print(f"probe {r}x{s} pad ({ph},{pw}): {type(e).__name__}: {str(e)[:120]}")
