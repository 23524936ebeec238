"""Launching a kernel again without paying for Triton's dispatch each time.

``kernel[grid](...)`` binds every argument, computes a specialization key and looks the compiled
kernel up on each call: tens of microseconds of Python for a kernel with tuple arguments, which
is as long as a whole small convolution. A caller that *knows* its arguments specialise the same
way every time (same dtypes, same integer values, same pointer alignment, which the caller
guarantees by keying its cache on them) can hold a ``Launch`` and, from the second call on,
hand the arguments straight to the compiled kernel's launcher.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

from triton.tools.tensor_descriptor import TensorDescriptor

from .._runtime import interpreting

_TMA_CACHE_SIZE = 1024
_tma_lock = threading.Lock()
_tma_installed = False


def install_tma_encode_cache() -> None:
    """Memoise the encoding of host TMA descriptors (``CUtensorMap``) in Triton's CUDA launcher.

    Triton encodes every host ``TensorDescriptor`` argument with ``cuTensorMapEncodeTiled`` on
    every launch; measured on an H200 that is about 20 us per descriptor, longer than many small
    convolutions take to run. The encoding is a pure function of (address, shape, strides, box,
    dtype, swizzle), so an exact-key cache returns the very same bytes. Weights hit always, and
    activations and outputs hit whenever PyTorch's caching allocator hands the same addresses out
    again (every iteration of a training or inference loop). The cache replaces Triton's
    ``make_tensordesc_arg`` for the whole process (same results for any kernel);
    ``CONVGEMM_TMA_DESC_CACHE=0`` leaves Triton untouched.
    """
    global _tma_installed
    if _tma_installed or os.environ.get("CONVGEMM_TMA_DESC_CACHE", "1") == "0":
        return
    with _tma_lock:
        if _tma_installed:
            return
        try:
            from triton.backends.nvidia import driver as nv
        except ImportError:  # pragma: no cover - another backend
            _tma_installed = True
            return
        original = nv.make_tensordesc_arg
        cache: OrderedDict = OrderedDict()

        def make_tensordesc_arg(arg, metadata):
            if metadata is None:
                return original(arg, metadata)
            key = (
                arg.base.data_ptr(),
                tuple(arg.shape),
                tuple(arg.strides),
                arg.padding,
                metadata["swizzle"],
                metadata["elem_size"],
                metadata["elem_type"],
                tuple(metadata["block_size"]),
                metadata["fp4_padded"],
            )
            hit = cache.get(key)
            if hit is None:
                hit = original(arg, metadata)
                with _tma_lock:
                    cache[key] = hit
                    if len(cache) > _TMA_CACHE_SIZE:
                        cache.popitem(last=False)
            return hit

        nv.make_tensordesc_arg = make_tensordesc_arg
        _tma_installed = True


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

    @property
    def warm(self) -> bool:
        """True once a compiled kernel is held: ``relaunch`` needs no constexprs or options."""
        return self._compiled is not None

    def relaunch(self, grid: tuple[int, int], args: tuple) -> None:
        """Launch the held kernel with new runtime arguments (same specialization)."""
        k = self._compiled
        from triton.runtime import driver

        stream = self._stream(driver.active.get_current_device())
        k.run(grid[0], grid[1], 1, stream, k.function, k.packed_metadata, None, None, None, *args, *self._tail)

    def __call__(self, fn, grid: tuple[int, int], args: tuple, constexprs: dict, options: dict) -> None:
        if self._compiled is None:
            kernel = fn[grid](*args, **constexprs, **options)
            if not interpreting():
                from triton.runtime import driver

                install_tma_encode_cache()

                # the launcher takes every parameter in signature order, constexprs included
                self._tail = tuple(constexprs[name] for name in fn.arg_names[len(args) :])
                self._stream = driver.active.get_current_stream
                self._compiled = kernel
            return
        self.relaunch(grid, args)
