"""Whether a 3-D dgrad call is host-bound (GPU).

    PYTHONPATH=src python3 tools/dgrad3d_host.py [--shape 8,64,16,56,56,128,3,3,3,2,1] [--profile 200]

r3d-18's strided l2 dgrad (``dgrad_by_phases``: eight phase convolutions, each its own launch
and host-side work) took 145.0 us in session 25 against 113.0 us in session 19, on other hosts.
This prints, for ``convgemm.conv3d_input`` and cuDNN's ``convolution_backward`` on the same
tensors (bf16, channels_last_3d, tuned first):

- host: microseconds of host time per call, calls issued back to back without synchronising
  (``bench.models.host_us``);
- gpu: microseconds per call measured with CUDA events while a long sleep kernel queued first
  keeps the GPU behind the host, so the host's time is hidden;
- the route ``functional3d.dgrad_route3d`` takes.

A call whose host time is at or above its GPU time is host-bound, and the bench's number is
then the host's.
"""

from __future__ import annotations

import argparse

import torch


def gpu_us(fn, n: int = 50) -> float:
    """GPU time per call, the host kept ahead by a sleep kernel queued before the events."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(50_000_000)  # about 25-50 ms of GPU time: the host queues all n calls meanwhile
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="8,64,16,56,56,128,3,3,3,2,1", help="N,C,D,H,W,K,T,R,S,stride,pad")
    ap.add_argument("--profile", type=int, default=0, metavar="CALLS",
                    help="also cProfile this many warm convgemm calls and print the top functions")  # fmt: skip
    a = ap.parse_args()

    import convgemm
    from convgemm.bench.models import host_us
    from convgemm.functional3d import dgrad_route3d
    from convgemm.problem3d import ConvProblem3d

    n, c, d, h, w, k, t, r, s, stride, pad = map(int, a.shape.split(","))
    cl = torch.channels_last_3d
    x = torch.randn(n, c, d, h, w, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=cl)
    wt = torch.randn(k, c, t, r, s, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=cl)
    dy = torch.nn.functional.conv3d(x, wt, stride=stride, padding=pad).contiguous(memory_format=cl)
    prob = ConvProblem3d.from_tensors(x, wt, None, stride=stride, padding=pad)
    ours = lambda: convgemm.conv3d_input(x.shape, wt, dy, stride=stride, padding=pad)  # noqa: E731
    ref = lambda: torch.ops.aten.convolution_backward(  # noqa: E731
        dy, x, wt, None, (stride,) * 3, (pad,) * 3, (1,) * 3, False, (0,) * 3, 1, (True, False, False)
    )
    ours()  # tunes every phase convolution on the first call
    print(f"shape {a.shape}: route {dgrad_route3d(prob)}")
    for name, fn in (("convgemm", ours), ("cuDNN", ref)):
        for _ in range(50):
            fn()
        print(f"  {name:8s} host {host_us(fn, 200):7.1f} us/call  gpu {gpu_us(fn):7.1f} us/call")
    if a.profile:
        # where the host time goes (session 26: the eight-phase strided dgrad took 965 us of host a
        # call against cuDNN's 41): own and cumulative time per warm call
        import cProfile
        import os
        import sys

        sys.path.insert(0, os.path.dirname(__file__))
        from host_profile import print_top

        prof = cProfile.Profile()
        prof.enable()
        for _ in range(a.profile):
            ours()
        prof.disable()
        torch.cuda.synchronize()
        print_top(prof, 25, f"{a.profile} calls")


if __name__ == "__main__":
    main()
