"""A CPU emulation of the Gluon kernels (the forward ``ws3d.ws_conv3d_kernel``, the weight
gradient ``ws_wgrad.ws_wgrad3d_kernel``, and ``row_ring.row_ring_kernel`` by ``run_row_ring``,
with its ring's barrier phases checked), for tests without a GPU.

Gluon does not run under ``TRITON_INTERPRET``, so these kernels' index arithmetic (work units,
pixel tiles, the views' box coordinates per filter tap, grouped channel offsets, the fix-up
list's tile numbers, where each tile is stored) was checked on the GPU only. Here both warp
partitions run their own code as plain Python: each jit function's code object is re-bound to
globals whose ``gl`` / ``tl`` / ``tma`` / ``mbarrier`` answer with the shims below. Per program,
the producer's code (``_producer`` -> ``_load_steps`` -> ``_x_coord``, ``_unit``,
``_tile_origin``, ``loaders3d.depth_k_range`` / ``phase_grid_coord``; ``_wg_producer`` for the
wgrad) runs first, its TMA copies recorded; then each consumer's code (``_consumer`` ->
``_mma_steps``, ``_list_nonfinite``, ``_epilogue`` / ``_epilogue_direct``; ``_wg_consumer`` ->
``_dw_tile``) reads the recorded fills in order. What stands in for the hardware is written
here: a TMA box read through the descriptor's strides (each coordinate bounded on its own axis,
zero fill), the TMA store, ``gl.load`` / ``gl.store`` through pointer offsets, and ``wgmma`` as
a float64 matrix product. Scalars derived from program ids and loop counters are ``IntT`` (with
Gluon's ``.to``). The Triton kernels a call also launches (split-K finish, grouped fix-up) run
under the interpreter as they are.

Not emulated: stream-K (``STREAM``), ring-slot synchronisation (the consumer simply reads the
fills in the producer's order), layouts, TF32 rounding, the Gluon lowering. Install with
``install(monkeypatch)``: ``gluon_launch`` then runs this instead of launching.
"""

from __future__ import annotations

import types

import torch

_state = {"pid": 0, "programs": 1}


class IntT(int):
    """An integer with the ``.to(dtype)`` of a Gluon scalar (``u.to(gl.int64)``), arithmetic
    keeping the type, so that every index the kernel derives from a program id or a loop counter
    takes ``.to`` too."""

    def to(self, dtype):
        return self


def _keep(name):
    base = getattr(int, name)

    def op(self, other):
        r = base(self, other)
        return IntT(r) if type(r) is int else r

    return op


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__", "__rfloordiv__",
              "__mod__", "__rmod__"):  # fmt: skip
    setattr(IntT, _name, _keep(_name))


def _range(*args):
    return (IntT(v) for v in range(*args))


class Acc(torch.Tensor):
    """A float64 accumulator with the ``.type.shape`` a Gluon tensor has."""

    @property
    def type(self):
        return types.SimpleNamespace(shape=list(self.shape))


def _flat(t: torch.Tensor) -> torch.Tensor:
    """The storage from ``t``'s first element on, as one flat tensor (element offsets from ``t``'s
    address, as a descriptor or pointer counts them)."""
    n = t.untyped_storage().nbytes() // t.element_size() - t.storage_offset()
    return t.new_empty(0).set_(t.untyped_storage(), t.storage_offset(), (n,), (1,))


class Ptr:
    """A pointer (a tensor's storage and element offsets) for ``gl.load`` / ``gl.store``."""

    def __init__(self, t: torch.Tensor, off=0, flat: torch.Tensor | None = None):
        self.flat = _flat(t) if flat is None else flat
        self.off = off
        self.dtype = types.SimpleNamespace(element_ty=t.dtype)

    def __add__(self, o):
        return Ptr(self.flat, self.off + o, self.flat)

    __radd__ = __add__


def _inside(ptr, off, mask):
    # torch would wrap a negative offset round: an address before the tensor must fail here
    live = off[mask]
    assert live.numel() == 0 or (int(live.min()) >= 0 and int(live.max()) < ptr.flat.numel()), "an access outside"


def _load(ptr, mask=None, other=0.0):
    off = torch.as_tensor(ptr.off)
    mask = torch.ones_like(off, dtype=torch.bool) if mask is None else torch.as_tensor(mask).expand(off.shape)
    _inside(ptr, off, mask)
    out = torch.full(off.shape, float(other), dtype=torch.float64)
    out[mask] = ptr.flat[off[mask]].double()
    return out


def _store(ptr, val, mask=None):
    off = torch.as_tensor(ptr.off)
    mask = torch.ones_like(off, dtype=torch.bool) if mask is None else torch.as_tensor(mask).expand(off.shape)
    _inside(ptr, off, mask)
    ptr.flat[off[mask]] = torch.as_tensor(val).expand(off.shape)[mask].to(ptr.flat.dtype)


def _gl_where(c, a, b):
    if isinstance(c, torch.Tensor):
        return torch.where(c, torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64))
    return a if c else b


def _cdiv(a, b):
    return -(-a // b)


GL = types.SimpleNamespace(
    int64=torch.int64,
    float32=torch.float32,
    expand_dims=torch.unsqueeze,
    cdiv=_cdiv,
    minimum=min,
    maximum=max,
    where=_gl_where,
    static_range=range,
    program_id=lambda axis: IntT(_state["pid"]),
    num_programs=lambda axis: _state["programs"],
    num_warps=lambda: 4,
    NVMMADistributedLayout=lambda **kw: None,
    SliceLayout=lambda *a: None,
    arange=lambda a, b, layout=None: torch.arange(a, b),
    zeros=lambda shape, dtype=None, layout=None: torch.zeros(shape, dtype=torch.float64).as_subclass(Acc),
    load=_load,
    store=_store,
)
TL = GL


class _Recorder:
    """``tma``: every global -> shared copy, as (descriptor, coordinate, buffer)."""

    def __init__(self):
        self.copies = []

    def async_copy_global_to_shared(self, desc, coord, bar, buf):
        self.copies.append((desc, [int(c) for c in coord], buf))


class _NoOp:
    def __getattr__(self, name):
        return lambda *a, **k: None


class _Bufs:
    def __init__(self, name):
        self.name = name

    def index(self, i):
        return (self.name, int(i))


def _python(fn, overrides: dict, cache: dict):
    """The plain-Python function behind a (Gluon or Triton) jit function, its module globals'
    ``gl``, ``tl``, ``tma``, ``mbarrier`` and jit callees replaced (``overrides`` by name; the
    recorder as ``overrides["tma"]``)."""
    raw = getattr(fn, "fn", fn)
    if raw in cache:
        return cache[raw]
    g = dict(raw.__globals__)
    g.update(gl=GL, tl=TL, mbarrier=overrides.get("mbarrier", _NoOp()), tma=overrides.get("tma"), range=_range)
    f = types.FunctionType(raw.__code__, g, raw.__name__, raw.__defaults__, raw.__closure__)
    cache[raw] = f
    for name in raw.__code__.co_names:
        if name in overrides:
            g[name] = overrides[name]
        else:
            v = raw.__globals__.get(name)
            if hasattr(v, "fn") and callable(v.fn) and type(v).__name__ != "module":
                g[name] = _python(v, overrides, cache)
    return f


class Desc:
    """A host ``TensorDescriptor`` as the kernel sees it (``block_type.shape``, ``.nbytes``), and
    TMA's reads and stores through it. Elements are addressed as the copy engine does, from the
    base address by the descriptor's strides, each coordinate checked against its own axis only:
    the phase-grid view's declared extent passes the tensor's end, while every in-bounds
    coordinate lands inside it."""

    def __init__(self, d):
        base = d.base
        self.flat = _flat(base)
        self.shape, self.strides = list(d.shape), list(d.strides)
        self.block = list(d.block_shape)
        self.block_type = types.SimpleNamespace(shape=self.block, nbytes=base.element_size() * _prod(self.block))
        self.dtype = base.dtype

    def _offsets(self, coord):
        offs = torch.zeros(self.block, dtype=torch.int64)
        ok = torch.ones(self.block, dtype=torch.bool)
        for i, (c, b, n, st) in enumerate(zip(coord, self.block, self.shape, self.strides, strict=True)):
            idx = (c + torch.arange(b)).reshape([b if j == i else 1 for j in range(len(self.block))])
            offs = offs + idx * st
            ok = ok & (idx >= 0) & (idx < n)
        assert not ok.any() or int(offs[ok].max()) < self.flat.numel(), "an in-bounds box element past the tensor"
        return offs, ok

    def read(self, coord) -> torch.Tensor:
        """The box at ``coord``, float64, zeros out of bounds (TMA's zero fill)."""
        offs, ok = self._offsets(coord)
        box = torch.zeros(self.block, dtype=torch.float64)
        box[ok] = self.flat[offs[ok]].double()
        return box

    def write(self, coord, box: torch.Tensor) -> None:
        """A TMA store: the part of ``box`` inside the view."""
        offs, ok = self._offsets(coord)
        self.flat[offs[ok]] = box[ok].to(self.dtype)


def _prod(v):
    out = 1
    for x in v:
        out *= x
    return out


def _kernel_args(kernel, args: tuple, kw: dict) -> dict:
    """A launch's arguments by the kernel's parameter names (runtime ones, then constexprs)."""
    names = kernel.arg_names
    return dict(zip(names, (*args, *[kw[k] for k in names[len(args) :]]), strict=True))


def _produce(producer, rec: _Recorder, args: tuple, kinds: list[str]) -> list[list[torch.Tensor]]:
    """Run the producer partition's code for the current program; its fills, each the boxes of
    one ring slot in copy order (``kinds``: the buffers one fill copies into), read in float64."""
    rec.copies.clear()
    producer(*args)
    n = len(kinds)
    steps = [rec.copies[i : i + n] for i in range(0, len(rec.copies), n)]
    assert all([b[0] for _, _, b in st] == kinds for st in steps), f"a fill is {kinds}"
    return [[d.read(c) for d, c, _ in st] for st in steps]


class _Barriers:
    """``mbarrier`` for one consumer: each wait on a ``ready`` slot is the next ring fill (a
    consumer reads the fills in the producer's order); the rest is synchronisation."""

    def __init__(self):
        self.cursor = -1

    def wait(self, token, phase):
        if token[0] == "ready":
            self.cursor += 1

    def __getattr__(self, name):
        return lambda *a, **k: None


class _Ring:
    """A ring of shared-memory buffers as a consumer reads it: buffer ``k`` is box ``pick(k)`` of
    the current fill (a fill: the boxes the producer copied for one step, in order)."""

    def __init__(self, fills, bar, pick, shape, bits):
        self.fills, self.bar, self.pick = fills, bar, pick
        self.type = types.SimpleNamespace(shape=shape)
        self.dtype = types.SimpleNamespace(primitive_bitwidth=bits)

    def index(self, k):
        return _Slot(self, int(k))


class _Slot:
    def __init__(self, ring, k):
        self.ring, self.k = ring, k

    def _box(self):
        return self.ring.fills[self.ring.bar.cursor][self.ring.pick(self.k)]

    def reshape(self, shape):
        return self._box().reshape(shape)

    def permute(self, dims):
        return self._box().reshape(self.ring.type.shape[1:]).permute(dims)


class _Staging:
    """``c_smem``: each consumer's staging tile, stored to and copied out by TMA."""

    def index(self, i):
        return self

    def reshape(self, shape):
        return self

    def store(self, val):
        self.data = val


class _StoreTma:
    """``tma`` in the consumer: the TMA store of a staging tile through its descriptor."""

    def store_wait(self, n):
        pass

    def async_copy_shared_to_global(self, desc, coord, buf):
        desc.write([int(c) for c in coord], buf.data.reshape(desc.block))


def run_ws_conv3d(grid, args: tuple, kw: dict) -> None:
    """Emulate one launch of ``ws3d.ws_conv3d_kernel`` (its launch arguments as ``ws_conv3d``
    builds them): per program, the producer partition's code fills the ring (recorded), then each
    consumer partition's code (``_consumer`` -> ``_mma_steps``, ``_list_nonfinite``,
    ``_epilogue`` / ``_epilogue_direct``) reads the fills in order, its wgmma a float64 product."""
    from convgemm.conv import ws3d

    a = _kernel_args(ws3d.ws_conv3d_kernel, args, kw)
    if a["STREAM"]:
        raise NotImplementedError("gluon_emu: stream-K is not emulated")
    geo = tuple(a[k] for k in ("num_units", "tiles_n", "OD", "P", "Q", "pd", "ph", "pw", "dd", "dh", "dw", "R", "S",
                               "c_tiles", "k_steps", "D", "HS", "SD", "SH", "SW", "C"))  # fmt: skip
    grp = (a["GC"], a["KB"], a["NPIX"])
    ys = (a["syn"], a["syd"], a["syh"], a["syw"])
    x_d, w_d, y_d = Desc(a["x_desc"]), Desc(a["w_desc"]), Desc(a["y_desc"])
    TD, TH, TW, CONS, SPLIT = a["TD"], a["TH"], a["TW"], a["CONS"], a["SPLIT"]
    BN, BK = w_d.block
    fixes = []

    def list_if_nonfinite(acc, fix_ptr, tile):
        if not torch.isfinite(acc).all():
            fixes.append(int(tile))

    rec = _Recorder()
    producer = _python(ws3d._producer, {"tma": rec}, {})
    bias, ws = Ptr(a["bias_ptr"]), Ptr(a["ws_ptr"])
    bits = a["x_desc"].base.element_size() * 8
    programs = grid[0]
    _state["programs"] = programs
    triggered = set()  # (program, consumer) pairs that signalled the dependent launch
    for pid in range(programs):
        _state["pid"] = pid
        fills = _produce(producer, rec, (x_d, w_d, _Bufs("ready"), _Bufs("empty"), _Bufs("x"), _Bufs("w"), geo, grp,
                                         TD, TH, TW, a["STAGES"], SPLIT, a["STRIDED"], CONS, 0, a["GROUPED"],
                                         a["STACK"]),
                         ["x"] * CONS + ["w"])  # fmt: skip
        for ci in range(CONS):
            bar = _Barriers()
            overrides = {"mbarrier": bar, "tma": _StoreTma(), "fence_async_shared": lambda: None,
                         "warpgroup_mma": lambda x, w, acc, is_async=False: acc + x @ w,
                         "warpgroup_mma_wait": lambda num_outstanding=0, deps=(): deps[0],
                         "fix_list_append_if_nonfinite": list_if_nonfinite,
                         "gdc_launch_dependents": lambda ci=ci: triggered.add((_state["pid"], ci))}  # fmt: skip
            consumer = _python(ws3d._consumer, overrides, {})
            x_ring = _Ring(fills, bar, lambda k: k % CONS, [a["STAGES"] * CONS, *x_d.block], bits)
            w_ring = _Ring(fills, bar, lambda k: CONS, [a["STAGES"], BN, BK], bits)
            consumer(y_d, bias, ws, a["lock_ptr"], _Bufs("ready"), _Bufs("empty"), x_ring, w_ring, _Staging(), geo,
                     a["K"], ys, grp, TD, TH, TW, a["HAS_BIAS"], a["ACT"], a["STAGES"], SPLIT, CONS, ci, 0, a["EPI"],
                     a["GROUPED"], a["PDL_TRIGGER"], a["STACK"])  # fmt: skip
            assert bar.cursor == len(fills) - 1, "the consumer read every fill the producer made"
    # a dependent launch starts only once every program has signalled it (or exited); every
    # consumer partition signals, so none is left out whichever the hardware counts
    every = {(p, ci) for p in range(programs) for ci in range(CONS)}
    assert triggered == (every if a["PDL_TRIGGER"] else set()), "every program's consumers signal the dependent launch"
    if a["GROUPED"]:
        fix = a["lock_ptr"]
        for t in fixes:
            slot = int(fix[0])
            fix[2 + slot] = t
            fix[0] = slot + 1


def run_ws_wgrad3d(grid, args: tuple, kw: dict) -> None:
    """Emulate one launch of ``ws_wgrad.ws_wgrad3d_kernel``: per program, the producer's code
    (``_wg_producer``, ``_wg_unit``, ``_wg_tile``, ``ws3d._x_coord``) fills the ring, then the
    consumer's code (``_wg_consumer``, ``_dw_tile``) reads it, its wgmma of dy^T and x a float64
    product."""
    from convgemm.conv import ws_wgrad

    a = _kernel_args(ws_wgrad.ws_wgrad3d_kernel, args, kw)
    geo = tuple(a[k] for k in ("num_units", "tiles", "m_tiles", "c_tiles", "k_blocks", "OD", "P", "Q", "pd", "ph",
                               "pw", "dd", "dh", "dw", "R", "S", "D", "HS", "SD", "SH", "SW", "C"))  # fmt: skip
    grp = (a["GC"], a["KS"], a["CG"], a["KG"])
    dws = (a["sdk"], a["sdc"], a["sdt"], a["sdr"], a["sds"])
    dy_d, x_d = Desc(a["dy_desc"]), Desc(a["x_desc"])
    TD, TH, TW, SPLIT, STAGES = a["TD"], a["TH"], a["TW"], a["SPLIT"], a["STAGES"]
    rec = _Recorder()
    producer = _python(ws_wgrad._wg_producer, {"tma": rec}, {})
    bits = a["x_desc"].base.element_size() * 8
    programs = grid[0]
    _state["programs"] = programs
    triggered = set()  # the programs whose consumer signalled the dependent finish kernel
    for pid in range(programs):
        _state["pid"] = pid
        fills = _produce(producer, rec, (dy_d, x_d, _Bufs("ready"), _Bufs("empty"), _Bufs("dy"), _Bufs("x"), geo,
                                         grp, TD, TH, TW, STAGES, SPLIT, a["STRIDED"], a["GROUPED"]), ["dy", "x"])  # fmt: skip
        bar = _Barriers()
        overrides = {"mbarrier": bar, "warpgroup_mma": lambda a_, b_, acc, is_async=False: acc + a_ @ b_,
                     "warpgroup_mma_wait": lambda num_outstanding=0, deps=(): deps[0],
                     "gdc_launch_dependents": lambda: triggered.add(_state["pid"])}  # fmt: skip
        consumer = _python(ws_wgrad._wg_consumer, overrides, {})
        dy_ring = _Ring(fills, bar, lambda k: 0, [STAGES, *dy_d.block], bits)
        x_ring = _Ring(fills, bar, lambda k: 1, [STAGES, *x_d.block], bits)
        consumer(Ptr(a["ws_ptr"]), Ptr(a["dw_ptr"]), dws, a["K"], _Bufs("ready"), _Bufs("empty"), dy_ring, x_ring,
                 geo, grp, TD, TH, TW, STAGES, SPLIT, a["GROUPED"], a["PDL_TRIGGER"])  # fmt: skip
        assert bar.cursor == len(fills) - 1, "the consumer read every fill the producer made"
    # a dependent finish kernel launches only once every program has signalled it (or exited)
    assert triggered == (set(range(programs)) if a["PDL_TRIGGER"] else set()), "every program signals the finish kernel"


def install(monkeypatch) -> None:
    """``gluon_launch`` runs the Gluon kernels by emulation and any Triton kernel (the split-K
    finish kernels) under the interpreter."""
    from convgemm.conv import ws3d, ws_wgrad

    def launch(handle, fn, grid, args, kw):
        if fn is ws3d.ws_conv3d_kernel:
            run_ws_conv3d(grid, args, kw)
        elif fn is ws_wgrad.ws_wgrad3d_kernel:
            run_ws_wgrad3d(grid, args, kw)
        else:
            # the interpreter runs launches in order and has no gdc_wait: a programmatic
            # dependent launch (tests that force PDL on) runs as a plain one
            fn[grid](*args, **{k: v for k, v in kw.items() if k not in ("PDL", "launch_pdl")})

    monkeypatch.setattr(ws3d, "gluon_launch", launch)
    monkeypatch.setattr(ws_wgrad, "gluon_launch", launch)


# ---------------------------------------------------------------- conv/row_ring.py's kernel
class _RingBarrier:
    """One ``mbarrier`` of the row ring, with the hardware's phase rule: ``wait(phase)`` passes
    once the barrier's phase of that parity has completed. Copies complete when issued here, so
    the check is that each wait is for the slot's *latest* copy (the phase that copy completes);
    a wait for an older parity would pass on the GPU before the copy landed."""

    def __init__(self):
        self.done = 0  # completed phases (one copy each: count 1, expect + TMA)
        self.waited = 0  # the completions the last wait covered
        self.armed = False

    def wait(self, phase):
        assert self.done >= 1 and (self.done - 1) & 1 == int(phase), (
            f"wait for phase {int(phase)} on a barrier with {self.done} completed phases: not the latest copy"
        )
        self.waited = self.done


class _RingSlot:
    """A shared-memory buffer: a row-ring slot (``reshape``: the landed box, only once its barrier
    was waited for) or a weight tap (``store`` / ``permute``)."""

    def __init__(self, ring, i):
        self.ring, self.i, self.data = ring, i, None

    def reshape(self, shape):
        bar = self.ring.emu.bars.items[self.i]
        assert bar.waited == bar.done, f"ring slot {self.i} read before waiting for its latest copy"
        out = self.data.reshape(shape).clone().as_subclass(_SlotRead)
        out.slot = (self.ring, self.i)
        return out

    def store(self, val):
        self.data = torch.as_tensor(val, dtype=torch.float64).clone()

    def permute(self, dims):
        return self.data.permute(dims)


class _SlotRead(torch.Tensor):
    """A ring slot's contents as a wgmma operand (remembers the slot, for the in-flight check)."""


class _Smem:
    def __init__(self, n, emu):
        self.items = [_RingSlot(self, i) for i in range(n)]
        self.emu = emu  # its barriers: emu.bars (allocated after the buffers)

    def index(self, i):
        return self.items[int(i)]


class _BarrierArray:
    def __init__(self, n):
        self.items = [_RingBarrier() for _ in range(n)]

    def index(self, i):
        return self.items[int(i)]


class _RowRingEmu:
    """``gl`` / ``mbarrier`` / ``tma`` / wgmma for ``row_ring_kernel``: TMA row copies land at once
    and complete their barrier's phase; an async wgmma keeps its ring slot in flight until
    ``warpgroup_mma_wait``, and a copy into a slot in flight fails (the WAR race the GPU would
    have)."""

    def __init__(self):
        self.ring = None
        self.in_flight = set()
        self.copies = 0

    def allocate_shared_memory(self, dtype, shape, layout=None):
        if dtype is torch.int64:  # the barriers
            self.bars = _BarrierArray(shape[0])
            return self.bars
        smem = _Smem(shape[0], self)
        if len(shape) == 5:  # the row ring [4, 1, 1, TW, BC]
            self.ring = smem
        return smem

    # mbarrier
    def init(self, bar, count):
        assert count == 1

    def expect(self, bar, nbytes):
        assert not bar.armed, "expect on a barrier whose copy has not completed"
        bar.armed = True

    def wait(self, bar, phase):
        bar.wait(phase)

    def invalidate(self, bar):
        assert not bar.armed, "a barrier invalidated with a copy in flight"

    # tma
    def async_copy_global_to_shared(self, desc, coord, bar, buf):
        assert bar.armed, "a TMA copy onto a barrier without expect"
        assert buf.ring is not self.ring or (self.ring, buf.i) not in self.in_flight, (
            f"a row copied into ring slot {buf.i} while a wgmma still reads it"
        )
        buf.data = desc.read([int(c) for c in coord])
        self.copies += 1
        bar.armed = False
        bar.done += 1

    def mma(self, a, b, acc, is_async=False):
        if isinstance(a, _SlotRead):
            self.in_flight.add(a.slot)
        return acc + a.as_subclass(torch.Tensor).double() @ b

    def mma_wait(self, num_outstanding=0, deps=()):
        assert num_outstanding == 0
        self.in_flight.clear()
        return deps[0]


def run_row_ring(grid, args: tuple, kw: dict, fn=None) -> int:
    """Emulate one launch of ``row_ring.row_ring_kernel`` program by program (the kernel's own
    Python code, its unit walk, ring schedule, barrier phases and stores); returns the number of
    row copies it made. ``fn``: the kernel (``row_ring.row_ring_kernel`` unless given)."""
    from convgemm.conv import row_ring

    fn = row_ring.row_ring_kernel if fn is None else fn
    a = _kernel_args(fn, args, kw)
    emu = _RowRingEmu()
    x_d = Desc(a["x_desc"])
    x_d.layout = None
    gl_ = types.SimpleNamespace(**vars(GL))
    gl_.allocate_shared_memory = emu.allocate_shared_memory
    gl_.static_assert = lambda cond, msg="": None if cond else (_ for _ in ()).throw(AssertionError(msg))
    gl_.BlockedLayout = lambda *a, **k: None
    gl_.NVMMASharedLayout = types.SimpleNamespace(get_default_for=lambda *a, **k: None)
    gl_.NVMMADistributedLayout = lambda **k: None
    gl_.convert_layout = lambda v, layout: v
    gl_.thread_barrier = lambda: None
    gl_.minimum = lambda p, q: torch.clamp(p, max=q) if isinstance(p, torch.Tensor) else min(int(p), int(q))
    gl_.maximum = lambda v, lo: torch.clamp(v, min=float(lo))
    gl_.gather = lambda src, index, axis: torch.gather(src, axis, index.long())
    gl_.reshape = lambda t, shape: t.reshape(shape)
    gl_.sum = lambda t, axis: t.sum(axis)
    bar_ns = types.SimpleNamespace(init=emu.init, expect=emu.expect, wait=emu.wait, invalidate=emu.invalidate,
                                   MBarrierLayout=lambda: None)  # fmt: skip
    tma_ns = types.SimpleNamespace(async_copy_global_to_shared=emu.async_copy_global_to_shared)
    overrides = {"mbarrier": bar_ns, "tma": tma_ns, "fence_async_shared": lambda: None,
                 "warpgroup_mma": emu.mma, "warpgroup_mma_wait": emu.mma_wait}  # fmt: skip
    cache: dict = {}
    kernel = _python(fn, overrides, cache)
    for f in cache.values():
        f.__globals__["gl"] = gl_
    programs = grid[0]
    _state["programs"] = programs
    names = fn.arg_names
    call = [a[n] for n in names]
    call[names.index("x_desc")] = x_d
    call[names.index("w_ptr")] = Ptr(a["w_ptr"])
    call[names.index("out_ptr")] = Ptr(a["out_ptr"])
    call[names.index("bias_ptr")] = Ptr(a["bias_ptr"])
    for pid in range(programs):
        _state["pid"] = pid
        emu.bars = None
        kernel(*call)
        assert all(not b.armed for b in emu.bars.items), "a row copy issued and never waited for"
    return emu.copies
