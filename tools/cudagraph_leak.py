"""Which allocation cudagraph trees refuse (GPU): "tensor(s) in the cudagraph pool not tracked as
outputs", from a training step under ``torch.compile(mode="reduce-overhead")``.

    PYTHONPATH=src python3 tools/cudagraph_leak.py --model resnet50 --batch 16 --side convgemm

Records the caching allocator's history (``torch.cuda.memory._record_memory_history``), so the
error from cudagraph trees carries the Python stack that made each untracked tensor.
"""

from __future__ import annotations

import argparse
import copy
import traceback

import torch
from torch import nn


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50", choices=["resnet50"])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--side", default="convgemm", choices=["convgemm", "cudnn"])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--mark-step", action="store_true", help="call cudagraph_mark_step_begin per step")
    a = ap.parse_args()
    import convgemm
    from convgemm.models.resnet import resnet50

    torch.cuda.memory._record_memory_history(max_entries=200000)
    x = torch.randn(a.batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    target = torch.randint(0, 1000, (a.batch,), device="cuda")
    model = copy.deepcopy(resnet50().cuda().to(memory_format=torch.channels_last)).train()
    if a.side == "convgemm":
        convgemm.patch(model)
    fwd = torch.compile(model, mode="reduce-overhead")
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    for i in range(a.steps):
        try:
            if a.mark_step:
                torch.compiler.cudagraph_mark_step_begin()
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = nn.functional.cross_entropy(fwd(x), target)
            loss.backward()
            opt.step()
            print(f"step {i}: loss {loss.item():.4f}", flush=True)
        except Exception:  # noqa: BLE001 - the point is the message
            print(f"step {i} failed:")
            traceback.print_exc()
            return
    print("ok")


if __name__ == "__main__":
    main()
