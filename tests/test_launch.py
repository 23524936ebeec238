"""``matmul.launch.Launch.fast``'s argument marshalling, on any machine.

A warm call hands the compiled kernel's C launcher the first call's arguments with only the tensors
replaced: pointer arguments as integer addresses (the launcher takes an int as it is, a tensor
costs it a ``data_ptr()`` call and a driver query), descriptors as their encoded ``CUtensorMap``
(cached per base address), tensors inside tuple arguments as addresses, every other argument and
the grid as the first call's. The GPU tests (``test_repeat.py``, ``test_gluon_launch.py``) run
real launches; this one checks the order and the forms with a stand-in launcher and driver.
"""

import types

import pytest
import torch
import triton.runtime
from triton.tools.tensor_descriptor import TensorDescriptor

from convgemm.matmul import launch as lm


class _FakeDriver:
    def get_current_stream(self, device):
        return 1000 + device

    def get_current_device(self):
        return 3


@pytest.fixture
def bound(monkeypatch):
    """A ``Launch`` bound to a stand-in compiled kernel whose launcher records its arguments,
    first called with (descriptor over x, pointer y, int 7, tuple (pointer b, 5), None)."""
    from triton.backends.nvidia import driver as nv

    encoded = []

    def encode(desc, meta):
        encoded.append(desc.base.data_ptr())
        return [("map", desc.base.data_ptr(), tuple(desc.shape), tuple(desc.block_shape))]

    monkeypatch.setattr(nv, "make_tensordesc_arg", encode, raising=False)
    monkeypatch.delattr(nv, "_convgemm_original_make_tensordesc_arg", raising=False)
    monkeypatch.setattr(triton.runtime.driver, "_active", _FakeDriver(), raising=False)
    calls = []

    class CLauncher:  # the C function: grid, stream, function, metadata..., then the flat arguments
        def __call__(self, *args):
            calls.append(args)

    def wrapped(launcher):  # Triton's Python wrapper that expands descriptors around the C function
        def launch(*args):
            return launcher(*args)

        return launch

    run = types.SimpleNamespace(global_scratch_size=0, profile_scratch_size=0, launch=wrapped(CLauncher()),
                                launch_cooperative_grid=False, launch_pdl=False)  # fmt: skip
    kernel = types.SimpleNamespace(
        run=run, metadata=types.SimpleNamespace(tensordesc_meta=[{"m": 0}]), function="F", packed_metadata="P",
        name="k",
    )  # fmt: skip
    x0, y0, b0 = torch.zeros(4, 8), torch.zeros(3), torch.zeros(2)
    desc = lm.descriptor(x0, [4, 8], [8, 1], [2, 8])
    args = (desc, y0, 7, (b0, 5), None)
    fast = lm._bind_fast(kernel, (6, 2), args, ("TAIL",))
    assert fast is not None, "the stand-in kernel takes the shortcut"
    h = lm.Launch()
    h._fast = fast
    return h, calls, encoded, (x0, y0, b0)


def test_fast_passes_addresses_in_argument_order(bound):
    h, calls, encoded, (x0, _, _) = bound
    x, y, b = torch.zeros(4, 8), torch.zeros(3), torch.zeros(2)
    h.fast((x, y, b))
    (got,) = calls
    assert got[:3] == (6, 2, 1) and got[3] == 1003, "the first call's grid, the current device's stream"
    assert got[4] == "F" and got[9] == "P"
    flat = got[13:]
    assert flat[0] == ("map", x.data_ptr(), (4, 8), (2, 8)), "the descriptor re-encoded at x's address"
    assert flat[1] == y.data_ptr() and type(flat[1]) is int, "a pointer argument as its address"
    assert flat[2] == 7 and flat[3] == (b.data_ptr(), 5) and flat[4] is None and flat[5] == "TAIL"
    assert encoded == [x0.data_ptr(), x.data_ptr()]


def test_fast_reuses_a_descriptor_per_address(bound):
    h, calls, encoded, (x0, y0, b0) = bound
    before = list(lm.DESC_STATS)
    h.fast((x0, y0, b0))
    h.fast((x0, y0, b0))
    assert encoded == [x0.data_ptr()], "the first call's encoding is kept for its address"
    assert lm.DESC_STATS[0] - before[0] == 2 and lm.DESC_STATS[1] == before[1]
    assert [c[13] for c in calls] == [("map", x0.data_ptr(), (4, 8), (2, 8))] * 2


def test_bind_refuses_what_it_cannot_replay(bound):
    run = types.SimpleNamespace(global_scratch_size=16, profile_scratch_size=0, launch=lambda *a: None)
    kernel = types.SimpleNamespace(run=run, metadata=types.SimpleNamespace(tensordesc_meta=[]))
    assert lm._bind_fast(kernel, (1,), (torch.zeros(1),), ()) is None, "a kernel with scratch memory"
    run.global_scratch_size = 0
    d = TensorDescriptor(torch.zeros(4, 8), [4, 8], [8, 1], [2, 8])
    kernel.metadata.tensordesc_meta = [None]
    assert lm._bind_fast(kernel, (1,), (d,), ()) is None, "a descriptor lowered without TMA"


def test_pdl_is_on_by_default_and_off_under_the_interpreter(monkeypatch):
    """``CONVGEMM_PDL``: on unless set to 0, and never under the interpreter (its inline PTX,
    ``griddepcontrol``, has no interpreter form); a grouped layer with it set still runs there."""
    from conftest import DEVICE, INTERPRET
    from reference import assert_close, conv2d_ref

    import convgemm
    from convgemm.conv import fprop

    monkeypatch.setenv("CONVGEMM_PDL", "0")
    assert not fprop.pdl_enabled()
    monkeypatch.delenv("CONVGEMM_PDL", raising=False)
    assert fprop.pdl_enabled() is (not INTERPRET)
    x = torch.randn(1, 32, 5, 6, device=DEVICE).to(torch.float16).contiguous(memory_format=torch.channels_last)
    w = torch.randn(32, 4, 3, 3, device=DEVICE).to(torch.float16)
    y = convgemm.conv2d(x, w, None, padding=1, groups=8, algorithm="grouped_tma")
    assert_close(y, conv2d_ref(x, w, None, 1, 1, 1, 8), torch.float16, "grouped_tma with CONVGEMM_PDL=1")


@pytest.mark.parametrize("pdl", [True, False])
def test_split_wgrad_finishes_are_dependent_launches(pdl, monkeypatch):
    """A split weight gradient's second kernel (the Gluon wgrad's ``ws_wgrad_finish_kernel``,
    wgrad_tma's ``split_k_finish_kernel`` after a ``reduce`` config, the depthwise wgrad's
    ``wgrad_reduce_kernel`` after its window kernel on a 3x3 filter) is a programmatic dependent
    launch when ``pdl_enabled``: the first kernel triggers it (``PDL_TRIGGER``), the second is
    launched with ``launch_pdl`` and waits (``PDL``); an unsplit call triggers nothing. So is the
    Gluon forward's ``ws_split_finish_kernel``, and ``ws_conv3d_kernel`` triggers a grouped
    layer's fix-up. The launches are recorded, not run."""
    from dataclasses import replace

    from convgemm.conv import backward as bw
    from convgemm.conv import fprop, ws_wgrad
    from convgemm.conv.fprop import Config
    from convgemm.problem import ConvProblem

    monkeypatch.setattr(fprop, "pdl_enabled", lambda: pdl)
    monkeypatch.setattr(bw, "pdl_enabled", lambda: pdl)
    monkeypatch.setattr(ws_wgrad, "pdl_enabled", lambda: pdl)
    seen = []
    monkeypatch.setattr(ws_wgrad, "gluon_launch", lambda launch, fn, grid, args, kw: seen.append((fn.__name__, kw)))
    x = torch.zeros(2, 64, 1, 8, 8, dtype=torch.float16).contiguous(memory_format=torch.channels_last_3d)
    dy = torch.zeros(2, 64, 1, 8, 8, dtype=torch.float16).contiguous(memory_format=torch.channels_last_3d)
    dw = torch.zeros(64, 64, 1, 3, 3, dtype=torch.float16)
    for split in (2, 1):
        ws_wgrad.ws_wgrad3d(x, dy, dw, (1, 3, 3), (0, 1, 1), (1, 1, 1), (1, 1, 1), (1, 2, 8), 64, 64, split=split)
    (main, kw), (fin, fkw), (main1, kw1) = seen
    assert (main, fin, main1) == ("ws_wgrad3d_kernel", "ws_wgrad_finish_kernel", "ws_wgrad3d_kernel")
    assert kw.get("PDL_TRIGGER", False) is pdl and not kw1.get("PDL_TRIGGER", False)
    assert fkw.get("PDL", False) is pdl and fkw.get("launch_pdl", False) is pdl

    seen.clear()

    def record(launch, fn, grid, args, constexprs, options):
        seen.append((fn.__name__, constexprs(), options))

    monkeypatch.setattr(fprop, "_run_kernel", record)
    cl = torch.channels_last
    xs = torch.zeros(2, 32, 6, 6, dtype=torch.float16).contiguous(memory_format=cl)
    wt = torch.zeros(32, 32, 3, 3, dtype=torch.float16)
    dys = torch.zeros(2, 32, 6, 6, dtype=torch.float16).contiguous(memory_format=cl)
    prob = ConvProblem.from_tensors(xs, wt, None, padding=1)
    cfg = replace(bw.WGRAD_TMA._shaped(prob, 64, 64, 64, 4, 3), split_k=3, reduce=1)
    bw.WGRAD_TMA.run(prob, xs, dys, torch.zeros_like(wt), cfg, None)
    (g, gc, _), (f, fc, fo) = seen
    assert (g, f) == ("gemm_kernel", "split_k_finish_kernel")
    assert gc.get("PDL_TRIGGER", False) is pdl
    assert fc.get("PDL", False) is pdl and fo.get("launch_pdl", False) is pdl

    # the depthwise wgrad's rows and window kernels, then wgrad_reduce_kernel
    seen.clear()
    x = torch.zeros(2, 16, 9, 9, dtype=torch.float16).contiguous(memory_format=cl)
    dy = torch.zeros(2, 16, 9, 9, dtype=torch.float16).contiguous(memory_format=cl)
    wt = torch.zeros(16, 1, 3, 3, dtype=torch.float16)
    prob = ConvProblem.from_tensors(x, wt, None, padding=1, groups=16)
    for cfg in (Config(8, 16, 3, 4, 2, cols=2, split_k=2), Config(8, 16, 3, 4, 2, cols=2, window=1)):
        bw.DWGRAD.run(prob, x, dy, torch.zeros_like(wt), cfg, None)
    # and a 7x7 filter on the window kernel (a plain launch: measured slower as a dependent one)
    wt7 = torch.zeros(16, 1, 7, 7, dtype=torch.float16)
    prob7 = ConvProblem.from_tensors(x, wt7, None, padding=3, groups=16)
    bw.DWGRAD.run(prob7, x, dy, torch.zeros_like(wt7), Config(8, 16, 7, 4, 2, cols=2, window=1), None)
    names = [name for name, _, _ in seen]
    assert names[0].startswith("depthwise_wgrad_rows_kernel"), names
    assert names[2].startswith("depthwise_wgrad_window") and names[4].startswith("depthwise_wgrad_window"), names
    assert names[1::2] == ["wgrad_reduce_kernel"] * 3, names
    # dependent: the 3x3 window kernel's reduce only (the rows kernel's measured slower that way)
    for (_, main_c, _), (_, red_c, red_o), dep in zip(seen[::2], seen[1::2], (False, pdl, False), strict=True):
        assert main_c.get("PDL_TRIGGER", False) is dep
        assert red_c.get("PDL", False) is dep and red_o.get("launch_pdl", False) is dep

    # the Gluon forward's K split (ws_conv3d_kernel, then ws_split_finish_kernel), as compiled
    from convgemm.conv import ws3d

    monkeypatch.setattr(ws3d, "pdl_enabled", lambda: pdl)
    cl3 = torch.channels_last_3d
    x = torch.zeros(1, 64, 1, 8, 8, dtype=torch.float16).contiguous(memory_format=cl3)
    y = torch.zeros(1, 64, 1, 8, 8, dtype=torch.float16).contiguous(memory_format=cl3)
    wp = torch.zeros(64, 9 * 64, dtype=torch.float16)
    for split in (2, 1):
        launches = ws3d.ws_conv3d(x, wp, None, y, (1, 3, 3), (0, 1, 1), (1, 1, 1), (1, 8, 8), 64, warps=4,
                                  split=split, compile_only=True)  # fmt: skip
        assert launches[0][3]["PDL_TRIGGER"] is (pdl and split > 1)
        assert len(launches) == (2 if split > 1 else 1)
        if split > 1:
            fkw = launches[1][3]
            assert fkw.get("PDL", False) is pdl and fkw.get("launch_pdl", False) is pdl
    # a grouped layer (super-groups): its fix-up follows every call, so the kernel triggers it
    x = torch.zeros(1, 128, 1, 8, 8, dtype=torch.float16).contiguous(memory_format=cl3)
    y = torch.zeros(1, 128, 1, 8, 8, dtype=torch.float16).contiguous(memory_format=cl3)
    wp = torch.zeros(128, 9 * 64, dtype=torch.float16)
    (main,) = ws3d.ws_conv3d(x, wp, None, y, (1, 3, 3), (0, 1, 1), (1, 1, 1), (1, 8, 8), 64, warps=4,
                             compile_only=True, super_groups=(64, 64), fix=torch.zeros(1026, dtype=torch.int32))  # fmt: skip
    assert main[3]["PDL_TRIGGER"] is pdl
