"""The tuner's compile pass compiles every kernel its candidates' first launches need (GPU).

The tuner compiles all candidates at once (``autotune._compile_all``: each algorithm's ``run``
under ``fprop.COMPILE_ONLY``), then launches each once to load it. A kernel that the compile
pass missed, or warmed with another specialization than the launch uses, is compiled in the
launch, one candidate after another: session 27's tuner log put 0.15-0.7 s on each such first
launch (the split-K finish kernel of ``implicit_gemm_ws``; on one-channel layers, whose result
is NCHW, ``small_k`` and ``implicit_gemm``, compiled for the NHWC scratch output, and the
transpose the other candidates are timed with). Here Triton's ``jit_cache_hook``, which runs on every
in-memory cache miss, records what is compiled after the compile pass.
"""

import pytest
import torch

from convgemm.tune import autotune

pytestmark = pytest.mark.gpu

# (N, C, H, W, K, R, S, stride, pad): the candidates of each, from session 27's tuner log
SHAPES = {
    # one input channel, so an NCHW result: small_k and implicit_gemm write it NCHW, and
    # depthwise_rows (a dense layer as a channel multiplier) is timed with its transpose
    "gray 1->16 5x5": (64, 1, 64, 64, 16, 5, 5, 1, 2),
    "mnist 1->32 3x3": (256, 1, 28, 28, 32, 3, 3, 1, 1),
    # implicit_gemm_tma, implicit_gemm_ws with and without a K split, implicit_gemm
    "seed 96x24x24->256 5x5": (4, 96, 24, 24, 256, 5, 5, 1, 0),
    "seed 256x12x12->512 3x3": (4, 256, 12, 12, 512, 3, 3, 1, 0),
}


@pytest.fixture(autouse=True)
def _fresh(fresh_tuning):
    yield


@pytest.mark.parametrize("name", list(SHAPES))
def test_first_launches_compile_nothing(name, monkeypatch):
    from triton import knobs

    import convgemm

    n, c, h, w, k, r, s, stride, pad = SHAPES[name]
    phase = ["compile"]
    warmed: dict[str, list] = {}
    late: list[tuple[str, object]] = []
    compile_all = autotune._compile_all

    def compile_then_load(*args, **kwargs):
        try:
            return compile_all(*args, **kwargs)
        finally:
            phase[0] = "load"

    def hook(*, key, repr, fn, compile, is_manual_warmup, already_compiled):
        name = repr.split("[")[0]
        if phase[0] == "load":
            late.append((name, key))
        else:
            warmed.setdefault(name, []).append(key)
        return False  # compile as usual

    monkeypatch.setattr(autotune, "_compile_all", compile_then_load)
    monkeypatch.setattr(knobs.runtime, "jit_cache_hook", hook)
    x = torch.randn(n, c, h, w, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    wt = torch.randn(k, c, r, s, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    convgemm.conv2d(x, wt, None, stride=stride, padding=pad)
    torch.cuda.synchronize()
    assert phase[0] == "load", "the tuner did not compile several candidates (nothing tested)"
    assert late == [], "compiled after the compile pass (in the tuner's first launches):\n" + "\n".join(
        _diff(name, key, warmed.get(name, [])) for name, key in late
    )


def _diff(name: str, key, warm: list) -> str:
    """How a late compile's specialization key differs from the closest one the compile pass warmed."""
    if not warm:
        return f"{name}: not compiled by the compile pass at all"
    flat = str(key).split(", ")
    best = min(warm, key=lambda w: sum(a != b for a, b in zip(str(w).split(", "), flat, strict=False)))
    parts = [(i, a, b) for i, (a, b) in enumerate(zip(str(best).split(", "), flat, strict=False)) if a != b]
    return f"{name}: warmed {len(warm)} keys; the closest differs at {parts[:8]}"
