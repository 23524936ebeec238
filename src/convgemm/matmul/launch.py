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
    every launch (an early session measured about 20 us per descriptor through Triton's launch
    path; session 16's ``tools/desc_cost.py`` timed the encode alone at 1.7 us). The encoding is a pure function of (address, shape, strides, box,
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
        nv._convgemm_original_make_tensordesc_arg = original
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
    """A host TMA descriptor without ``TensorDescriptor``'s per-call validation (strides of
    size-1 dimensions are replaced by dense ones).

    The algorithms check alignment once, in ``supports()``; re-validating every stride on every
    call costs microseconds that matter for small convolutions.
    """
    # a size-1 dimension is never stepped, but PyTorch may give it any stride (an NCHW output of
    # 1x1 pixels is also "channels_last" with stride 1 there): make it the dense one, which the
    # copy engine accepts (16-byte multiples) whenever the inner dimensions are aligned
    strides = list(strides)
    for i in range(len(shape) - 2, -1, -1):
        if shape[i] == 1:
            strides[i] = strides[i + 1] * shape[i + 1]
    d = object.__new__(TensorDescriptor)
    d.base = base
    d.shape = shape
    d.strides = strides
    d.block_shape = block_shape
    d.padding = "zero"
    return d


#: [hits, misses] of ``Launch.fast``'s per-address descriptor caches since import (a diagnostic
#: for ``tools/profile_model.py``: in a training step every activation is a new allocation, and
#: a miss re-encodes the descriptor on the host)
DESC_STATS = [0, 0]
#: misses of ``DESC_STATS`` by (kernel name, descriptor argument, its shape): which launch sites
#: re-encode (counted on misses only, which cost far more than the count)
DESC_MISSES: dict[tuple, int] = {}


class Launch:
    """One launch site of a JIT kernel with a fixed specialization, grid and argument layout.

    The first call goes through Triton (compiling if needed) and keeps the compiled kernel. Later
    calls take one of two shortcuts:

    - ``relaunch(grid, args)``: the full argument tuple, handed to the compiled kernel's launcher
      (Triton's own descriptor expansion still runs);
    - ``fast(bases)``: only the *tensors* of the call, in argument order (the base tensor for a
      TMA descriptor, the tensor for a pointer argument). Every other argument, the grid and the
      descriptors' shapes, strides and boxes are the first call's. The encoded ``CUtensorMap`` of
      each descriptor is kept per base address, and the C launcher is called directly.

    A handle therefore belongs to one problem and one config (a call plan or a tuning candidate):
    the caller guarantees that every non-tensor argument, and each descriptor's geometry, is the
    same on every call. Under the interpreter every call goes through Triton.
    """

    __slots__ = ("_compiled", "_tail", "_stream", "_fast", "extra", "aux")

    #: encoded descriptors kept per descriptor argument (distinct base addresses)
    DESC_CACHE = 64

    def __init__(self) -> None:
        self._compiled = None
        self._fast = None
        #: anything the algorithm wants to remember about its first call (fixed per plan)
        self.extra = None
        #: the handle of a second kernel an algorithm launches after this one (set by that
        #: algorithm, so that ``extra`` stays the first kernel's)
        self.aux = None

    @property
    def warm(self) -> bool:
        """True once a compiled kernel is held: ``relaunch`` needs no constexprs or options."""
        return self._compiled is not None

    @property
    def fast_ready(self) -> bool:
        """True when ``fast(bases)`` may be used."""
        return self._fast is not None

    def relaunch(self, grid: tuple[int, ...], args: tuple) -> None:
        """Launch the held kernel with new runtime arguments (same specialization)."""
        k = self._compiled
        from triton.runtime import driver

        stream = self._stream(driver.active.get_current_device())
        gx, gy, gz = (*grid, 1, 1)[:3]
        k.run(gx, gy, gz, stream, k.function, k.packed_metadata, None, None, None, *args, *self._tail)

    def fast(self, bases: tuple) -> None:
        """Launch again on new tensors: ``bases`` are the call's tensors in argument order."""
        raw, head, flat, ptrs, descs, tuples, current_stream = self._fast
        flat = flat.copy()
        # addresses as integers: the C launcher takes an int as it is, where a tensor costs a
        # ``data_ptr()`` call and a ``cuPointerGetAttribute`` driver query per pointer argument
        # (the plan already fixed the device; its key checks the tensors are on it)
        for pos, i in ptrs:
            flat[pos] = bases[i].data_ptr()
        for pos, template, inner in tuples:
            t = list(template)
            for j, i in inner:
                t[j] = bases[i].data_ptr()
            flat[pos] = tuple(t)
        for pos, i, cache, encode, site in descs:
            t = bases[i]
            m = cache.get(t.data_ptr())
            if m is None:
                m = encode(t)
                DESC_STATS[1] += 1
                DESC_MISSES[site] = DESC_MISSES.get(site, 0) + 1
            else:
                DESC_STATS[0] += 1
            flat[pos] = m
        raw(*head[0:3], current_stream(), *head[3:], *flat)

    def __call__(self, fn, grid: tuple[int, ...], args: tuple, constexprs: dict, options: dict) -> None:
        if self._compiled is None:
            kernel = fn[grid](*args, **constexprs, **options)
            if not interpreting():
                from triton.runtime import driver

                install_tma_encode_cache()

                self._tail = launch_tail(fn, len(args), constexprs)
                self._stream = driver.active.get_current_stream
                self._compiled = kernel
                if os.environ.get("CONVGEMM_FAST_LAUNCH", "1") != "0":
                    self._fast = _bind_fast(kernel, grid, args, self._tail)
            return
        self.relaunch(grid, args)


def launch_tail(fn, nargs: int, constexprs: dict) -> tuple:
    """The values of ``fn``'s parameters after its first ``nargs``, in signature order, as its
    compiled launcher takes them (constexprs included): from ``constexprs``, else the parameter's
    default, as Triton's binder filled it (``depthwise_rows_kernel``'s ``LAYOUT``)."""
    defaults = {p.name: p.default for p in fn.params if p.has_default}
    out = []
    for name in fn.arg_names[nargs:]:
        if name not in constexprs and name not in defaults:
            raise TypeError(f"{fn.__name__}: no value for parameter {name!r}; pass it with the launch's constexprs")
        out.append(constexprs[name] if name in constexprs else defaults[name])
    return tuple(out)


def aux_of(launch: Launch | None) -> Launch | None:
    """The handle of the second kernel a launch site runs after its first (a split-K finish, a
    fix-up, a fold): ``launch.aux``, created on first use; None without a handle."""
    if launch is None:
        return None
    if launch.aux is None:
        launch.aux = Launch()
    return launch.aux


def _bind_fast(kernel, grid, args: tuple, tail: tuple):
    """The state ``Launch.fast`` needs, or None when this kernel cannot take the shortcut.

    It reaches inside Triton 3.x's CUDA launcher (``CudaLauncher.launch`` wrapping the compiled
    C function); anything unexpected -- scratch buffers, another backend, a newer Triton with a
    different layout -- leaves the handle on ``relaunch``, which only uses public attributes.
    """
    try:
        import torch
        from triton.backends.nvidia import driver as nv
        from triton.runtime import driver
    except ImportError:  # pragma: no cover - another backend
        return None
    run = kernel.run
    if getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1):
        return None
    raw = run.launch
    code = getattr(raw, "__code__", None)
    if code is not None:  # Triton's wrapper that expands descriptor arguments: take the C function
        cells = dict(zip(code.co_freevars, raw.__closure__ or (), strict=True))
        if "launcher" not in cells:
            return None
        raw = cells["launcher"].cell_contents
    metas = getattr(kernel.metadata, "tensordesc_meta", None) or []
    encode_one = getattr(nv, "_convgemm_original_make_tensordesc_arg", nv.make_tensordesc_arg)
    flat, ptrs, descs, tuples = [], [], [], []
    n_desc = n_base = 0
    try:  # Gluon's host descriptor (its kernels: conv/ws3d.py, conv/ws_wgrad.py) encodes the same way
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor
    except ImportError:  # pragma: no cover - a Triton without Gluon
        GluonDescriptor = TensorDescriptor
    for a in args:
        if isinstance(a, (TensorDescriptor, GluonDescriptor)):
            if n_desc >= len(metas) or metas[n_desc] is None:
                return None  # lowered without TMA: the launcher wants another expansion
            meta = metas[n_desc]
            n_desc += 1
            enc = encode_one(a, meta)
            cache = {a.base.data_ptr(): enc[0]}
            # the geometry only: a handle kept in a plan must not keep the first call's tensors alive
            geom = (list(a.shape), list(a.strides), list(a.block_shape))

            def encode(t, geom=geom, meta=meta, cache=cache):
                m = encode_one(descriptor(t, *geom), meta)[0]
                if len(cache) >= Launch.DESC_CACHE:
                    cache.clear()
                cache[t.data_ptr()] = m
                return m

            site = (getattr(kernel, "name", "?"), n_desc - 1, tuple(a.shape))
            descs.append((len(flat), n_base, cache, encode, site))
            flat.extend(enc)
            n_base += 1
        elif isinstance(a, torch.Tensor):
            ptrs.append((len(flat), n_base))
            flat.append(None)  # every call supplies its own tensor
            n_base += 1
        elif isinstance(a, tuple):  # the launcher takes a tuple argument as a tuple
            inner = []
            for j, e in enumerate(a):
                if isinstance(e, torch.Tensor):
                    inner.append((j, n_base))
                    n_base += 1
                elif isinstance(e, (tuple, TensorDescriptor)):
                    return None  # not used by convgemm's kernels: keep the general path
            template = tuple(None if isinstance(e, torch.Tensor) else e for e in a)
            if inner:
                tuples.append((len(flat), template, tuple(inner)))
            flat.append(template)
        else:
            flat.append(a)
    flat.extend(tail)
    get_stream, get_device = driver.active.get_current_stream, driver.active.get_current_device
    if get_device is torch.cuda.current_device:  # its lazy-init check is done by the first call
        get_device = torch._C._cuda_getDevice
    head = (*(*grid, 1, 1)[:3], kernel.function, run.launch_cooperative_grid, run.launch_pdl, None, None,
            kernel.packed_metadata, None, None, None)  # fmt: skip
    return raw, head, flat, tuple(ptrs), tuple(descs), tuple(tuples), lambda: get_stream(get_device())
