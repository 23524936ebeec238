"""What a warm launch costs on the host, part by part (GPU).

    PYTHONPATH=src python3 tools/launch_cost.py [--shape 64,256,14,14,256,3,3,1,1,1,1]

A ResNet-50 training step makes about 204 ``Launch.fast`` calls, at 19.6 us each on session 23's
slow host (``tools/host_split.py``): 4 ms of a 38.6 ms step. This splits one warm launch of the
given forward layer (bf16, channels_last, tuned) into:

1. ``convgemm.conv2d`` (plan key, lookup, output allocation, launch);
2. the replay runner ``functional.forward_runner`` (allocation and launch, no key);
3. ``Launch.fast`` on the runner's last tensors (argument marshalling and the C launcher);
4. ``Launch.fast`` with the C launcher replaced by a no-op (the Python marshalling alone);
5. the C launcher alone, with the arguments ``Launch.fast`` last built (Triton's argument parsing
   and ``cuLaunchKernelEx``);
6. for scale: an empty ``torch.empty_strided`` of the output, and cuDNN's ``F.conv2d``.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from host_split import per_call as _per_call  # noqa: E402


def per_call(fn) -> float:
    # 300 calls: fewer than the launch queue holds, so a kernel slower than its launch cannot
    # block the host and make this time the GPU
    return _per_call(fn, 300)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="64,256,14,14,256,3,3,1,1,1,1", help="N,C,H,W,K,R,S,stride,pad,dil,groups")
    a = ap.parse_args()
    import convgemm
    from convgemm import functional
    from convgemm.matmul import launch as lm

    n, c, h, w, k, r, s, st, pad, dil, g = map(int, a.shape.split(","))
    x = torch.randn(n, c, h, w, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    wt = torch.randn(k, c // g, r, s, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    kw = dict(stride=st, padding=pad, dilation=dil, groups=g)
    for _ in range(3):
        convgemm.conv2d(x, wt, **kw)
    torch.cuda.synchronize()
    run = functional.forward_runner(x, wt, None, st, pad, dil, g)
    if run is None:
        sys.exit("launch_cost: this layer's plan has no replay runner (more than one launch, or NCHW)")

    seen = {}
    fast = lm.Launch.fast

    def spy(self, bases):
        seen["launch"], seen["bases"] = self, bases
        return fast(self, bases)

    lm.Launch.fast = spy
    try:
        run(x, wt, None)
    finally:
        lm.Launch.fast = fast
    launch, bases = seen["launch"], seen["bases"]
    raw, *rest = launch._fast
    captured = {}

    def record(*args):
        captured["args"] = args
        return raw(*args)

    launch._fast = (record, *rest)
    launch.fast(bases)
    launch._fast = (lambda *args: None, *rest)
    prep = per_call(lambda: launch.fast(bases))
    launch._fast = (raw, *rest)
    args = captured["args"]
    y = run(x, wt, None)
    shape, strides = tuple(y.shape), y.stride()
    print(f"== {a.shape} bf16 channels_last, {len(args)} launcher arguments")
    print(f"convgemm.conv2d              {per_call(lambda: convgemm.conv2d(x, wt, **kw)):6.2f} us")
    print(f"replay runner                {per_call(lambda: run(x, wt, None)):6.2f} us")
    print(f"Launch.fast                  {per_call(lambda: launch.fast(bases)):6.2f} us")
    print(f"  Python marshalling only    {prep:6.2f} us")
    print(f"  C launcher only            {per_call(lambda: raw(*args)):6.2f} us")
    print(f"torch.empty_strided (output) "
          f"{per_call(lambda: torch.empty_strided(shape, strides, dtype=x.dtype, device='cuda')):6.2f} us")  # fmt: skip
    print(f"cuDNN F.conv2d               {per_call(lambda: F.conv2d(x, wt, **kw)):6.2f} us")


if __name__ == "__main__":
    main()
