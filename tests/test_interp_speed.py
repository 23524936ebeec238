"""``tests/interp_speed.py``: under the interpreter, helper calls inside a launch skip the
re-patching walk, compute the same, and leave ``triton.language`` as it was after the launch."""

import pytest
import torch
import triton
import triton.language as tl
from conftest import INTERPRET

pytestmark = pytest.mark.skipif(not INTERPRET, reason="a speed-up of Triton's interpreter")


@triton.jit
def _inner(x):
    return tl.sum(x * 2, axis=0)


@triton.jit
def _outer(x):
    return _inner(x) + tl.max(x, axis=0)


@triton.jit
def _helpers_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid * BLOCK + tl.arange(0, BLOCK))
    tl.store(out_ptr + pid, _outer(x))


def test_helpers_compute_the_same_without_a_walk_each(monkeypatch):
    from triton.runtime import interpreter

    assert getattr(interpreter, "_convgemm_fast_calls", False), "tests/conftest.py did not install it"
    walks = []
    real = interpreter._patch_builtin
    monkeypatch.setattr(interpreter, "_patch_builtin", lambda *a: walks.append(a[0]) or real(*a))
    before = {name: getattr(tl, name) for name in ("sum", "max", "arange", "load")}
    x = torch.randn(8, 16)
    counts = []
    for programs in (1, 8):
        out = torch.full((8,), float("nan"))
        walks.clear()
        _helpers_kernel[(programs,)](x, out, BLOCK=16)
        counts.append(len(walks))
        want = (2 * x[:programs]).sum(1) + x[:programs].max(1).values
        torch.testing.assert_close(out[:programs], want)
    # the launch's own walk and the first call's of each new helper module, not one per
    # helper call: eight programs walk as often as one
    assert counts[0] == counts[1] > 0, counts
    # the launch restored triton.language's builtins
    assert {name: getattr(tl, name) for name in before} == before
