"""The Gluon kernels' replayed launches (``ws3d.gluon_launch``, ``matmul.launch.Launch.fast``):
a call plan's handle compiles and binds on its first call, and later calls on new tensors of the
same shapes skip Triton's dispatch and the descriptors' construction. Gluon runs on a Hopper GPU
only; the interpreter runs the unit tests of the helpers."""

from dataclasses import replace

import pytest
import torch
from conftest import DEVICE
from reference import assert_close, conv2d_ref
from torch.nn.grad import conv2d_weight

from convgemm.conv import backward as bw
from convgemm.conv import ws3d
from convgemm.conv.fprop import ALGORITHMS
from convgemm.matmul.launch import Launch
from convgemm.problem import ConvProblem

_CL = torch.channels_last


def test_fast_ready_needs_the_finish_kernel_when_split():
    class H:
        def __init__(self, fast, extra=None, aux=None):
            self.fast_ready, self.extra, self.aux = fast, extra, aux

    assert not ws3d.fast_ready(None, 1)
    assert not ws3d.fast_ready(H(False, 4), 1)
    assert not ws3d.fast_ready(H(True, None), 1), "the first call's workspace size is not known yet"
    assert ws3d.fast_ready(H(True, 1), 1)
    assert not ws3d.fast_ready(H(True, 8), 2), "a split call replays its finish kernel too"
    assert not ws3d.fast_ready(H(True, 8, H(False)), 2)
    assert ws3d.fast_ready(H(True, 8, H(True)), 2)


def test_aux_handle_is_kept():
    from convgemm.matmul.launch import aux_of

    assert aux_of(None) is None
    h = Launch()
    a = aux_of(h)
    assert isinstance(a, Launch) and aux_of(h) is a


def _fwd(n, c, h, w, k, r, s, stride, pad, dtype=torch.bfloat16):
    x = torch.randn(n, c, h, w, device=DEVICE).to(dtype).contiguous(memory_format=_CL)
    wt = (torch.randn(k, c, r, s, device=DEVICE) / (c * r * s) ** 0.5).to(dtype).contiguous(memory_format=_CL)
    b = torch.randn(k, device=DEVICE).to(dtype)
    return x, wt, b


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(2, 64, 14, 14, 128, 3, 3, 1, 1), (4, 64, 16, 16, 64, 3, 3, 2, 1)], ids=str)
def test_gpu_implicit_gemm_ws_replays(shape):
    """Unsplit and split configs: three calls each on one handle, new tensors every call."""
    algo = ALGORITHMS["implicit_gemm_ws"]
    x, wt, b = _fwd(*shape)
    prob = ConvProblem.from_tensors(x, wt, b, stride=shape[7], padding=shape[8])
    prob = replace(prob, tma_ok=True, input_tma_ok=True, input_dense=True, input_phases_ok=shape[7] > 1,
                   input_tma_rows_ok=True)  # fmt: skip
    assert algo.supports(prob) is None, algo.supports(prob)
    base = algo.default_config(prob)  # (too few tiles for the tuner to offer it: configs is empty)
    for cfg in (replace(base, split_k=1), replace(base, split_k=2)):
        h = Launch()
        for i in range(3):
            x, wt, b = _fwd(*shape)
            ref = conv2d_ref(x, wt, b, stride=shape[7], padding=shape[8])
            y = torch.full(ref.shape, float("nan"), device=DEVICE, dtype=x.dtype).contiguous(memory_format=_CL)
            algo.run(prob, x, wt, b, y, cfg, h)
            assert_close(y, ref, x.dtype, f"{cfg.describe()} call {i}")
            assert ws3d.fast_ready(h, cfg.split_k), "bound after the first call"


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(2, 64, 14, 14, 128, 3, 3, 1, 1), (4, 64, 16, 16, 64, 1, 1, 2, 0)], ids=str)
def test_gpu_wgrad_ws_replays(shape):
    n, c, hh, ww, k, r, s, stride, pad = shape
    x, wt, _ = _fwd(*shape)
    prob = ConvProblem.from_tensors(x, wt, None, stride=stride, padding=pad)
    dy = torch.randn(n, k, prob.p, prob.q, device=DEVICE).to(x.dtype).contiguous(memory_format=_CL)
    assert bw.WGRAD_WS.supports(prob, x, dy) is None, bw.WGRAD_WS.supports(prob, x, dy)
    base = bw.WGRAD_WS.configs(prob)[0]
    for cfg in (replace(base, split_k=1), replace(base, split_k=2)):
        h = Launch()
        for i in range(3):
            x = torch.randn(n, c, hh, ww, device=DEVICE).to(x.dtype).contiguous(memory_format=_CL)
            dy = torch.randn(n, k, prob.p, prob.q, device=DEVICE).to(x.dtype).contiguous(memory_format=_CL)
            dw = torch.full(tuple(wt.shape), float("nan"), device=DEVICE, dtype=x.dtype)
            bw.WGRAD_WS.run(prob, x, dy, dw, cfg, h)
            want = conv2d_weight(x.double().cpu(), wt.shape, dy.double().cpu(), stride=stride, padding=pad)
            assert_close(dw, want, x.dtype, f"{cfg.describe()} call {i}")
            assert ws3d.fast_ready(h, cfg.split_k), "bound after the first call"


class _Warm:
    """A bound handle's stand-in: records what a warm call hands ``Launch.fast``."""

    def __init__(self, extra, split):
        self.fast_ready, self.extra, self.calls = True, extra, []
        self.aux = _Warm.__new__(_Warm) if split > 1 else None
        if self.aux is not None:
            self.aux.fast_ready, self.aux.extra, self.aux.aux, self.aux.calls = True, None, None, self.calls

    def fast(self, bases):
        self.calls.append(tuple(bases))


@pytest.mark.parametrize("r", [3, 1], ids=["3x3", "1x1 flat"])
@pytest.mark.parametrize("split", [1, 2])
def test_warm_wgrad_ws_passes_the_first_calls_addresses(r, split):
    """A warm ``wgrad_ws`` call skips the views and the 3-D problem: it must hand over tensors at
    the addresses the first call's descriptors and pointers were built from, in argument order
    (dy, x, workspace, dw), and the finish kernel (workspace, dw) when split."""
    x = torch.randn(2, 64, 6, 5).to(torch.bfloat16).contiguous(memory_format=_CL)
    wt = torch.randn(32, 64, r, r).to(torch.bfloat16)
    prob = ConvProblem.from_tensors(x, wt, None, padding=r // 2)
    dy = torch.randn(2, 32, prob.p, prob.q).to(torch.bfloat16).contiguous(memory_format=_CL)
    dw = torch.empty_like(wt)
    _, x5, dy5 = bw.WGRAD_WS._views(prob, x, dy)  # what the first call described
    h = _Warm(128, split)
    bw.WGRAD_WS.run(prob, x, dy, dw, replace(bw.WGRAD_WS.default_config(prob), split_k=split), h)
    main = h.calls[0]
    assert [t.data_ptr() for t in (main[0], main[1], main[3])] == [dy5.data_ptr(), x5.data_ptr(), dw.data_ptr()]
    if split > 1:  # the first call's workspace size; unsplit, the kernel never reads it: no allocation
        assert main[2].dtype == torch.float32 and main[2].numel() == 128
    else:
        assert main[2] is dw
    if split > 1:
        assert h.calls[1][0] is main[2] and h.calls[1][1].data_ptr() == dw.data_ptr()
    assert len(h.calls) == (2 if split > 1 else 1)


@pytest.mark.parametrize("split", [1, 2])
def test_warm_implicit_gemm_ws_passes_the_first_calls_addresses(split):
    algo = ALGORITHMS["implicit_gemm_ws"]
    x, wt, b = (t.cpu() for t in _fwd(2, 64, 6, 5, 32, 3, 3, 1, 1))
    prob = ConvProblem.from_tensors(x, wt, b, padding=1)
    y = torch.empty(2, 32, 6, 5, dtype=x.dtype).contiguous(memory_format=_CL)
    h = _Warm(64, split)
    algo.run(prob, x, wt, b, y, replace(algo.default_config(prob), split_k=split), h)
    main = h.calls[0]
    from convgemm.conv.fprop import krsc_weight

    want = [algo.view_3d(x).data_ptr(), krsc_weight(wt, 64).data_ptr(), algo.view_3d(y).data_ptr(), b.data_ptr()]
    assert [t.data_ptr() for t in main[:4]] == want
    assert main[1] is wt, "a channels_last weight is handed over as it is (no KRSC view built)"
    if split > 1:
        assert main[4].dtype == torch.float32 and main[4].numel() == 64
    else:
        assert main[4] is y
    if split > 1:
        assert h.calls[1][0] is main[4] and h.calls[1][1].data_ptr() == y.data_ptr() and h.calls[1][2] is b

    kcrs = wt.contiguous()  # not channels_last: the warm call must pack it, as the first call did
    h.calls.clear()
    algo.run(prob, x, kcrs, b, y, replace(algo.default_config(prob), split_k=split), h)
    packed = h.calls[0][1]
    assert packed.data_ptr() != kcrs.data_ptr() and torch.equal(packed.reshape(32, 3, 3, 64), wt.permute(0, 2, 3, 1))
