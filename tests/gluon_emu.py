"""A CPU emulation of the Gluon kernels (the forward ``ws3d.ws_conv3d_kernel``, the weight
gradient ``ws_wgrad.ws_wgrad3d_kernel``), for tests without a GPU.

Gluon does not run under ``TRITON_INTERPRET``, so the kernel's index arithmetic (work units,
pixel tiles, the input view's box coordinates per filter tap, grouped channel offsets, the
fix-up list's tile numbers) was checked on the GPU only. Here that arithmetic is the kernel's
own code: the producer (``_producer`` -> ``_load_steps`` -> ``_x_coord``, ``_unit``,
``_tile_origin``, ``loaders3d.depth_k_range`` / ``phase_grid_coord``) and ``_list_nonfinite``
run as plain Python on integers, their ``gl`` / ``tl`` / ``tma`` / ``mbarrier`` calls answered
by the shims below, and every TMA copy the producer issues is recorded. What stands in for the
hardware is written here: a TMA box read or store (the descriptor's view, out-of-bounds
elements zero on a read and dropped on a store), and the consumer's wgmma as a float64 matrix
product of the recorded boxes in the order the producer filled them; bias and ReLU as
``_epilogue`` applies them. The Triton kernels a call also launches (the split-K finish, the
grouped fix-up) run under the interpreter as they are.

Not emulated: stream-K (``STREAM``), ring-slot synchronisation, layouts, TF32 rounding. Install
with ``install(monkeypatch)``: ``ws3d.gluon_launch`` then runs this instead of launching.
"""

from __future__ import annotations

import types

import torch

_state = {"pid": 0, "programs": 1}


def _cdiv(a, b):
    return -(-a // b)


def _where(c, a, b):
    return a if c else b


GL = types.SimpleNamespace(
    int64=torch.int64,
    expand_dims=torch.unsqueeze,
    cdiv=_cdiv,
    minimum=min,
    maximum=max,
    where=_where,
    static_range=range,
    program_id=lambda axis: _state["pid"],
    num_programs=lambda axis: _state["programs"],
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
    g.update(gl=GL, tl=TL, mbarrier=_NoOp(), tma=overrides.get("tma"))
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
        self.d = d
        base = d.base
        n = base.untyped_storage().nbytes() // base.element_size() - base.storage_offset()
        self.flat = base.new_empty(0).set_(base.untyped_storage(), base.storage_offset(), (n,), (1,))
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


def run_ws_conv3d(grid, args: tuple, kw: dict, fix_ids: list | None = None) -> None:
    """Emulate one launch of ``ws3d.ws_conv3d_kernel`` (its launch arguments as ``ws_conv3d``
    builds them)."""
    from convgemm.conv import ws3d

    names = ws3d.ws_conv3d_kernel.arg_names
    a = dict(zip(names, (*args, *[kw[k] for k in names[len(args) :]]), strict=True))
    if a["STREAM"]:
        raise NotImplementedError("gluon_emu: stream-K is not emulated")
    geo = tuple(a[k] for k in ("num_units", "tiles_n", "OD", "P", "Q", "pd", "ph", "pw", "dd", "dh", "dw", "R", "S",
                               "c_tiles", "k_steps", "D", "HS", "SD", "SH", "SW", "C"))  # fmt: skip
    grp = (a["GC"], a["KB"], a["NPIX"])
    x_d, w_d, y_d = Desc(a["x_desc"]), Desc(a["w_desc"]), Desc(a["y_desc"])
    TD, TH, TW, CONS, SPLIT = a["TD"], a["TH"], a["TW"], a["CONS"], a["SPLIT"]
    BN, BK = w_d.block
    BP = TD * TH * TW
    rec = _Recorder()
    fixes = []

    def list_if_nonfinite(acc, fix_ptr, tile):
        if not torch.isfinite(acc).all():
            fixes.append(int(tile))

    cache: dict = {}
    overrides = {"fix_list_append_if_nonfinite": list_if_nonfinite, "tma": rec}
    producer = _python(ws3d._producer, overrides, cache)
    unit = _python(ws3d._unit, overrides, cache)
    list_nonfinite = _python(ws3d._list_nonfinite, overrides, cache)
    bias = a["bias_ptr"].double() if a["HAS_BIAS"] else None
    programs = grid[0]
    _state["programs"] = programs
    for pid in range(programs):
        _state["pid"] = pid
        rec.copies.clear()
        producer(x_d, w_d, _Bufs("ready"), _Bufs("empty"), _Bufs("x"), _Bufs("w"), geo, grp, TD, TH, TW, a["STAGES"], SPLIT,
                 a["STRIDED"], CONS, 0, a["GROUPED"])  # fmt: skip
        steps = [rec.copies[i : i + CONS + 1] for i in range(0, len(rec.copies), CONS + 1)]
        for s in steps:
            assert [b[0] for _, _, b in s] == ["x"] * CONS + ["w"], "a step is CONS input boxes, then the weight box"
        pos = 0
        for u in range(pid, a["num_units"], programs):
            pid_n, n, d0, h0, w0, k0, k1 = unit(u, geo, TD, TH, TW * CONS, SPLIT)
            mine = steps[pos : pos + (k1 - k0)]
            pos += k1 - k0
            for ci in range(CONS):
                acc = torch.zeros(BP, BN, dtype=torch.float64)
                for s in mine:
                    xd, xc, _ = s[ci]
                    wd, wc, _ = s[CONS]
                    acc += xd.read(xc).reshape(BP, BK) @ wd.read(wc).reshape(BN, BK).T
                if a["GROUPED"]:
                    list_nonfinite(acc, None, pid_n, n, d0, h0, w0 + ci * TW, a["OD"], a["P"], a["Q"], grp, TD, TH, TW)
                if SPLIT > 1:
                    a["ws_ptr"][u * BP * BN : (u + 1) * BP * BN] = acc.reshape(-1).float()
                    continue
                out = acc
                if bias is not None:
                    ch = pid_n * BN + torch.arange(BN)
                    out = out + torch.where(ch < a["K"], bias[ch.clamp(max=a["K"] - 1)], 0.0)
                if a["ACT"] == "relu":
                    out = out.clamp_min(0)
                y_d.write([n, d0, h0, w0 + ci * TW, pid_n * BN], out.reshape(1, TD, TH, TW, BN))
        assert pos == len(steps), "the consumer read every step the producer filled"
    if a["GROUPED"]:
        fix = a["lock_ptr"]
        for t in fixes:
            slot = int(fix[0])
            fix[2 + slot] = t
            fix[0] = slot + 1
        if fix_ids is not None:
            fix_ids.extend(fixes)


def run_ws_wgrad3d(grid, args: tuple, kw: dict) -> None:
    """Emulate one launch of ``ws_wgrad.ws_wgrad3d_kernel``: its producer (``_wg_producer``,
    ``_wg_unit``, ``_wg_tile``, ``ws3d._x_coord``) and its unsplit store's addressing
    (``_dw_tile``, called with a zero base for element offsets) are the kernel's code; the
    wgmma of dy^T and x is a float64 product."""
    from convgemm.conv import ws_wgrad

    names = ws_wgrad.ws_wgrad3d_kernel.arg_names
    a = dict(zip(names, (*args, *[kw[k] for k in names[len(args) :]]), strict=True))
    geo = tuple(a[k] for k in ("num_units", "tiles", "m_tiles", "c_tiles", "k_blocks", "OD", "P", "Q", "pd", "ph",
                               "pw", "dd", "dh", "dw", "R", "S", "D", "HS", "SD", "SH", "SW", "C"))  # fmt: skip
    grp = (a["GC"], a["KS"], a["CG"], a["KG"])
    dws = (a["sdk"], a["sdc"], a["sdt"], a["sdr"], a["sds"])
    dy_d, x_d = Desc(a["dy_desc"]), Desc(a["x_desc"])
    TD, TH, TW, SPLIT = a["TD"], a["TH"], a["TW"], a["SPLIT"]
    BM, BN = dy_d.block[4], x_d.block[4]
    BP = TD * TH * TW
    rec = _Recorder()
    cache: dict = {}
    overrides = {"tma": rec}
    producer = _python(ws_wgrad._wg_producer, overrides, cache)
    wg_unit = _python(ws_wgrad._wg_unit, overrides, cache)
    wg_tile = _python(ws_wgrad._wg_tile, overrides, cache)
    dw_tile = _python(ws_wgrad._dw_tile, overrides, cache)
    dw = a["dw_ptr"]
    n_el = dw.untyped_storage().nbytes() // dw.element_size() - dw.storage_offset()
    flat = dw.new_empty(0).set_(dw.untyped_storage(), dw.storage_offset(), (n_el,), (1,))
    programs = grid[0]
    _state["programs"] = programs
    for pid in range(programs):
        _state["pid"] = pid
        rec.copies.clear()
        producer(dy_d, x_d, _Bufs("ready"), _Bufs("empty"), _Bufs("dy"), _Bufs("x"), geo, grp, TD, TH, TW,
                 a["STAGES"], SPLIT, a["STRIDED"], a["GROUPED"])  # fmt: skip
        steps = [rec.copies[i : i + 2] for i in range(0, len(rec.copies), 2)]
        pos = 0
        for u in range(pid, a["num_units"], programs):
            tile, j0, j1 = wg_unit(u, a["tiles"], a["k_blocks"], SPLIT)
            acc = torch.zeros(BM, BN, dtype=torch.float64)
            for (dyd, dyc, dyb), (xd, xc, xb) in steps[pos : pos + (j1 - j0)]:
                assert dyb[0] == "dy" and xb[0] == "x"
                acc += dyd.read(dyc).reshape(BP, BM).T @ xd.read(xc).reshape(BP, BN)
            pos += j1 - j0
            if SPLIT > 1:
                a["ws_ptr"][u * BM * BN : (u + 1) * BM * BN] = acc.reshape(-1).float()
                continue
            mb, cb, t, r, s = wg_tile(tile, a["m_tiles"], a["c_tiles"], a["R"], a["S"])
            offs, mask = dw_tile(0, mb * BM + torch.arange(BM), cb * BN + torch.arange(BN), t, r, s, dws, a["K"],
                                 a["C"], grp, a["GROUPED"])  # fmt: skip
            flat[offs[mask]] = acc[mask].to(dw.dtype)
        assert pos == len(steps), "the consumer read every step the producer filled"


def install(monkeypatch, fix_ids: list | None = None) -> None:
    """``gluon_launch`` runs the Gluon kernels by emulation and any Triton kernel (the split-K
    finish kernels) under the interpreter."""
    from convgemm.conv import ws3d, ws_wgrad

    def launch(handle, fn, grid, args, kw):
        if fn is ws3d.ws_conv3d_kernel:
            run_ws_conv3d(grid, args, kw, fix_ids)
        elif fn is ws_wgrad.ws_wgrad3d_kernel:
            run_ws_wgrad3d(grid, args, kw)
        else:
            fn[grid](*args, **kw)

    monkeypatch.setattr(ws3d, "gluon_launch", launch)
    monkeypatch.setattr(ws_wgrad, "gluon_launch", launch)
