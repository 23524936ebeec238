"""The interpreter's int32 overflow checks report exactly where ``tests/conftest.py`` says: in
tests marked ``overflow_checks`` (the fuzz tests) and, with ``CONVGEMM_TEST_OVERFLOW=1``, in all.
Without the conftest's options Triton's interpreter computes the checks and never reports them
(its assertions need its ``debug`` option)."""

import pytest
import torch
import triton
import triton.language as tl
from conftest import INTERPRET, OVERFLOW_ALL
from triton.runtime.errors import InterpreterError

pytestmark = pytest.mark.skipif(not INTERPRET, reason="the overflow checks are the interpreter's")


@triton.jit
def _product_kernel(out_ptr, ab_ptr):
    tl.store(out_ptr, tl.load(ab_ptr) * tl.load(ab_ptr + 1))


def _product(a: int, b: int) -> int:
    """``a * b`` in int32 arithmetic, in a kernel (two loaded int32 values)."""
    out = torch.zeros(1, dtype=torch.int32)
    _product_kernel[(1,)](out, torch.tensor([a, b], dtype=torch.int32))
    return int(out.item())


@pytest.mark.overflow_checks
def test_marked_test_reports_int32_overflow():
    assert _product(3, 5) == 15
    with pytest.raises(InterpreterError, match="int32 overflow detected"):
        _product(1 << 20, 1 << 11)


def test_unmarked_test_wraps_like_the_gpu():
    if OVERFLOW_ALL:
        pytest.skip("CONVGEMM_TEST_OVERFLOW=1: every test checks")
    assert _product(1 << 20, 1 << 11) == -(1 << 31)
