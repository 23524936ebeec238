"""Every algorithm forced on one problem, and auto, against float64: which kernel gets it wrong?

    PYTHONPATH=src python3 tools/force_all.py --shape 3,6,1,15,4,1,3,1x2,0x2,1x2,2 --dtype fp16 [--layout nchw]

``--shape``: N,C,H,W,K,R,S,stride,padding,dilation,groups (pairs as AxB). Each algorithm that
takes the problem runs three times on fresh outputs, poisoned with NaN
(``CONVGEMM_POISON_OUTPUTS=1``, as the tests do) so that unwritten elements show, and on a new
NHWC copy of an NCHW input each time (a new address: session 46's fault showed at some
alignments only). The line gives its config, the largest error relative to the reference's
largest magnitude, and how many outputs are not finite. With ``--tune`` auto tunes (else
``CONVGEMM_AUTOTUNE=0``'s heuristic pick).
"""

import argparse
import os

import torch
import torch.nn.functional as F


def pair(s: str) -> tuple[int, int]:
    a = [int(v) for v in s.split("x")]
    return (a[0], a[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", required=True)
    ap.add_argument("--dtype", default="fp16", choices=("fp16", "bf16", "fp32"))
    ap.add_argument("--layout", default="nchw", choices=("nchw", "channels_last"))
    ap.add_argument("--tune", action="store_true")
    a = ap.parse_args()
    if not a.tune:
        os.environ["CONVGEMM_AUTOTUNE"] = "0"
    os.environ.setdefault("CONVGEMM_POISON_OUTPUTS", "1")  # read when convgemm is imported
    import convgemm

    n, c, h, w, k, r, s, st, pad, dil, g = a.shape.split(",")
    n, c, h, w, k, r, s, g = map(int, (n, c, h, w, k, r, s, g))
    kw = dict(stride=pair(st), padding=pair(pad), dilation=pair(dil), groups=g)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[a.dtype]
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    x = torch.randn(n, c, h, w, device=dev).to(dtype)
    if a.layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    wt = torch.randn(k, c // g, r, s, device=dev).to(dtype)
    b = torch.randn(k, device=dev).to(dtype)
    ref = F.conv2d(x.double().cpu(), wt.double().cpu(), b.double().cpu(), **kw)
    scale = ref.abs().max().item() or 1.0
    for name in ["auto", *convgemm.algorithms()]:
        try:
            info = convgemm.explain(x, wt, b, algorithm=name, **kw)
        except ValueError as e:
            if name == "auto":
                raise
            print(f"{name:24s} refused: {str(e)[:90]}")
            continue
        errs = []
        for _ in range(3):
            y = convgemm.conv2d(x, wt, b, algorithm=name, **kw).double().cpu()
            bad = int((~torch.isfinite(y)).sum())
            err = (y - ref).abs().nan_to_num(float("inf")).max().item() / scale
            errs.append(f"{err:.2e}/{bad}")
        cfg = info.get("config")
        print(f"{name:24s} {info.get('algorithm', name)!s:20s} {cfg!s:28s} {' '.join(errs)}")


if __name__ == "__main__":
    main()
