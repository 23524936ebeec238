"""Launching a kernel again without paying for Triton's dispatch each time.

``kernel[grid](...)`` binds every argument, computes a specialization key and looks the compiled
kernel up on each call: tens of microseconds of Python for a kernel with tuple arguments, which
is as long as a whole small convolution. A caller that *knows* its arguments specialise the same
way every time (same dtypes, same integer values, same pointer alignment, which the caller
guarantees by keying its cache on them) can hold a ``Launch`` and, from the second call on,
hand the arguments straight to the compiled kernel's launcher.
"""

from __future__ import annotations

from triton.tools.tensor_descriptor import TensorDescriptor

from .._runtime import interpreting


def descriptor(base, shape, strides, block_shape) -> TensorDescriptor:
    """A host TMA descriptor without ``TensorDescriptor``'s per-call validation.

    The algorithms check alignment once, in ``supports()``; re-validating every stride on every
    call costs microseconds that matter for small convolutions.
    """
    d = object.__new__(TensorDescriptor)
    d.base = base
    d.shape = shape
    d.strides = strides
    d.block_shape = block_shape
    d.padding = "zero"
    return d


class Launch:
    """One launch site of a JIT kernel with a fixed specialization.

    The first call goes through Triton (compiling if needed) and keeps the compiled kernel; later
    calls launch it directly. Under the interpreter every call goes through Triton.
    """

    __slots__ = ("_compiled", "_tail", "_stream")

    def __init__(self) -> None:
        self._compiled = None

    def __call__(self, fn, grid: tuple[int, int], args: tuple, constexprs: dict, options: dict) -> None:
        if self._compiled is None:
            kernel = fn[grid](*args, **constexprs, **options)
            if not interpreting():
                from triton.runtime import driver

                # the launcher takes every parameter in signature order, constexprs included
                self._tail = tuple(constexprs[name] for name in fn.arg_names[len(args) :])
                self._stream = driver.active.get_current_stream
                self._compiled = kernel
            return
        k = self._compiled
        from triton.runtime import driver

        stream = self._stream(driver.active.get_current_device())
        k.run(grid[0], grid[1], 1, stream, k.function, k.packed_metadata, None, None, None, *args, *self._tail)
