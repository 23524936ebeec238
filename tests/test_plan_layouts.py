"""The first call of a signature and the plan's replay hand the kernels tensors of the same
strides, and the result has PyTorch's memory format, for every mix of NCHW and channels_last
input and weight, with every algorithm that takes the problem, forced, and with auto.

A GPU launch handle (``matmul.launch.Launch``) is specialised on the first call's strides and
replays them blindly: a replay that allocated its output in another layout would write it as
the first layout (session 45 found one: a forced NCHW reader under a channels_last weight).
The interpreter has no launch handles, so here the plans are made for CPU tensors
(``functional._plan_key``) and the kernels' arguments are compared instead.
"""

import pytest
import torch
from conftest import DEVICE
from reference import assert_close, conv2d_ref

import convgemm
from convgemm import functional
from convgemm.conv.fprop import ALGORITHMS
from convgemm.problem import output_memory_format

# (N, C, H, W, K, R, S, stride, padding, groups): tiny, so that each algorithm is one program
CASES = [
    (1, 16, 5, 6, 16, 3, 3, 1, 1, 1),  # dense 3x3
    (1, 16, 4, 5, 24, 1, 1, 1, 0, 1),  # 1x1
    (1, 16, 7, 6, 16, 3, 3, 2, 1, 16),  # depthwise, strided (the NCHW planes kernel's case)
    (1, 32, 5, 5, 32, 3, 3, 1, 1, 4),  # grouped, 8 channels a group
    (1, 3, 7, 8, 16, 3, 3, 2, 1, 1),  # an RGB stem
]
LAYOUTS = [("nchw", "nchw"), ("nchw", "cl"), ("cl", "nchw"), ("cl", "cl")]


def _as(t: torch.Tensor, name: str) -> torch.Tensor:
    """``t`` with NHWC strides, written out: ``contiguous(memory_format=channels_last)`` and a
    permuted ``contiguous()`` both keep a one-channel weight's NCHW strides (size-1 dimensions
    count as contiguous either way), and those suggest an NCHW result."""
    if name != "cl":
        return t.contiguous()
    n, c, h, w = t.shape
    return torch.empty_strided(t.shape, (h * w * c, 1, w * c, c), dtype=t.dtype, device=t.device).copy_(t)


@pytest.mark.interpreter_share(2, vary=["layout"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda lay: f"x_{lay[0]}-w_{lay[1]}")
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_replay_sees_the_first_calls_layouts(case, layout, monkeypatch):
    n, c, h, w, k, r, s, stride, pad, groups = case
    dtype = torch.float32 if DEVICE == "cpu" else torch.float16
    x = _as(torch.randn(n, c, h, w, device=DEVICE).to(dtype), layout[0])
    wt = _as(torch.randn(k, c // groups, r, s, device=DEVICE).to(dtype), layout[1])
    b = torch.randn(k, device=DEVICE).to(dtype)
    kw = dict(stride=stride, padding=pad, groups=groups)
    ref = conv2d_ref(x, wt, b, **kw)
    want = output_memory_format(x, wt)

    seen: list = []
    # the spies go on the instances: pytest's monkeypatch before 9.2 (pytest issue 10644; the
    # GPU image's), undoing a patch of an instance's method (other tests spy on
    # ALGORITHMS["small_k"].run so), leaves the bound method behind as an instance attribute,
    # which a spy on the class never sees (session 46's GPU run: small_k made no recorded call)
    for algo in ALGORITHMS.values():

        def spy(prob, xx, ww, bias, y, *a, _run=algo.run, _name=algo.name, **k2):
            seen.append((_name, tuple(xx.stride()), tuple(y.stride())))
            return _run(prob, xx, ww, bias, y, *a, **k2)

        monkeypatch.setattr(algo, "run", spy)
    monkeypatch.setattr(functional, "_signature", functional._plan_key)  # plans for CPU tensors too
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")
    ran = []
    try:
        for algorithm in ["auto", *convgemm.algorithms()]:
            functional.clear_plans()
            calls = []
            for _ in range(2):  # the full path, then the plan's replay
                del seen[:]
                try:
                    y = convgemm.conv2d(x, wt, b, algorithm=algorithm, **kw)
                except ValueError:
                    break  # the algorithm does not take this problem (its reason is tested elsewhere)
                calls.append(list(seen))
                assert y.is_contiguous(memory_format=want), (algorithm, tuple(y.stride()), want)
                assert_close(y, ref, dtype, f"{algorithm} {layout}")
            if calls:
                assert len(calls) == 2 and calls[0] and calls[0] == calls[1], (algorithm, calls)
                ran.append(algorithm)
    finally:
        functional.clear_plans()
    assert "auto" in ran and len(ran) >= 3, ran
