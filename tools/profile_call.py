"""Where a call's time goes (GPU): torch.profiler over warm calls of one direction and shape.

    PYTHONPATH=src python3 tools/profile_call.py --direction dgrad --shape 64,64,56,56,64,3,3,1,1,1,1
    PYTHONPATH=src python3 tools/profile_call.py --layout nchw --shape 64,128,28,28,128,3,3,1,1,1,1

Prints the kernels launched per call with their CUDA time, and the host time per call, so a
slow direction can be told apart as "slow kernel", "extra kernels" or "host-bound".

    PYTHONPATH=src python3 tools/profile_call.py --direction wgrad --shape 64,192,28,28,192,7,7,1,3,1,192 \
        --dw-reduce-pdl on

forces the depthwise wgrad's reduce to be a programmatic dependent launch (``off``: a plain one)
whatever ``DepthwiseWgrad.reduce_dependent`` decides (session 48: about 6 us lost on some layers).
"""

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

import convgemm


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--direction", default="fwd", choices=["fwd", "dgrad", "wgrad"])
    ap.add_argument("--shape", required=True, help="N,C,H,W,K,R,S,stride,pad,dil,groups")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument(
        "--layout",
        default="channels_last",
        choices=["channels_last", "nchw"],
        help="memory format of every tensor of the call (input, weight, grad_output)",
    )
    ap.add_argument(
        "--dw-reduce-pdl",
        default="policy",
        choices=["policy", "on", "off"],
        help="the depthwise wgrad's wgrad_reduce_kernel as a programmatic dependent launch: as "
        "DepthwiseWgrad.reduce_dependent decides, or forced (after the rows kernel, which has no "
        "trigger, it then starts as the rows kernel's programs exit)",
    )
    a = ap.parse_args()
    if a.dw_reduce_pdl != "policy":
        from convgemm.conv import backward
        from convgemm.conv.fprop import pdl_enabled

        on = a.dw_reduce_pdl == "on"
        backward.DepthwiseWgrad.reduce_dependent = staticmethod(lambda prob, window: on and pdl_enabled())
    n, c, h, w, k, r, s, st, pad, dil, g = (int(v) for v in a.shape.split(","))
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[a.dtype]
    cl = torch.channels_last if a.layout == "channels_last" else torch.contiguous_format
    x = torch.randn(n, c, h, w, device="cuda", dtype=dt).contiguous(memory_format=cl)
    wt = torch.randn(k, c // g, r, s, device="cuda", dtype=dt).contiguous(memory_format=cl)
    kw = dict(stride=st, padding=pad, dilation=dil, groups=g)
    y = torch.nn.functional.conv2d(x, wt, **kw)
    dy = torch.randn_like(y).contiguous(memory_format=cl)
    fn = {
        "fwd": lambda: convgemm.conv2d(x, wt, None, **kw),
        "dgrad": lambda: convgemm.conv2d_input(x.shape, wt, dy, **kw),
        "wgrad": lambda: convgemm.conv2d_weight(x, wt.shape, dy, **kw),
    }[a.direction]
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(a.calls):
        fn()
    torch.cuda.synchronize()
    print(f"{a.direction} {a.shape} {a.dtype}: {(time.perf_counter() - t) / a.calls * 1e6:.1f} us/call wall")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(a.calls):
            fn()
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=60))
    print_spans(prof, a.calls)


def print_spans(prof: profile, calls: int) -> None:
    """Each call's kernels on one time line (medians over the calls, the upper one of an even
    count; us from the call's first kernel's start): where each starts and ends, and the call's
    GPU span. A programmatic dependent launch's kernel starts before the one it depends on ends,
    so its own CUDA time counts its wait; the span is what the call costs the GPU either way."""
    kernels = sorted(
        (e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
        key=lambda e: e.time_range.start,
    )
    if not kernels or len(kernels) % calls:
        print(f"spans: {len(kernels)} GPU events over {calls} calls, not a whole number a call; skipped")
        return
    per = len(kernels) // calls
    rows = [kernels[i * per : (i + 1) * per] for i in range(calls)]

    def med(v: list[float]) -> float:
        return sorted(v)[len(v) // 2]

    for j in range(per):
        start = med([r[j].time_range.start - r[0].time_range.start for r in rows])
        end = med([r[j].time_range.end - r[0].time_range.start for r in rows])
        print(f"span kernel {j} {rows[0][j].name[:48]}: starts {start:.2f} ends {end:.2f} us")
    span = med([max(e.time_range.end for e in r) - r[0].time_range.start for r in rows])
    gap = med([rows[i + 1][0].time_range.start - max(e.time_range.end for e in rows[i]) for i in range(calls - 1)])
    print(f"span per call {span:.2f} us (median; next call's first kernel {gap:.2f} us after)")


if __name__ == "__main__":
    main()
