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


def test_aux_launch_is_kept():
    assert ws3d.aux_launch(None) is None
    h = Launch()
    a = ws3d.aux_launch(h)
    assert isinstance(a, Launch) and ws3d.aux_launch(h) is a


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
