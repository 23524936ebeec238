"""The depthwise rows kernel's Gluon entry (``depthwise_rows_kernel_gl``): when ``run`` takes it,
the layout it gives, and that it compiles to the Triton entry's sm_90 SASS.

The GPU tests of ``depthwise_rows`` (``test_depthwise.py``, ``test_algorithms.py``) run the Gluon
entry wherever it applies, so they check its results; the interpreter cannot run Gluon, and on
the CPU the kernel compiles for sm_90 without a GPU."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import triton
from reference import assert_close, conv2d_ref

from convgemm.conv import fprop
from convgemm.conv.fprop import Config, DepthwiseRows
from convgemm.problem import ConvProblem

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _case(c=96, h=14, w=14, r=3, groups=None, dtype=torch.bfloat16, nchw=False):
    x = torch.zeros(2, c, h, w, dtype=dtype)
    if not nchw:
        x = x.to(memory_format=torch.channels_last)
    groups = groups or c
    wt = torch.zeros(c, c // groups, r, r, dtype=dtype)
    prob = ConvProblem.from_tensors(x, wt, stride=(1, 1), padding=(r // 2, r // 2), groups=groups)
    y = torch.zeros(2, c, prob.p, prob.q, dtype=dtype)
    if not nchw:
        y = y.to(memory_format=torch.channels_last)
    packed = torch.zeros(r * r * (c // groups), c, dtype=dtype)
    return prob, x, y, packed


@pytest.fixture
def on_gpu_path(monkeypatch):
    """Both rows kernels' ``gluon_layout`` as on a GPU (``DepthwiseRows.gluon_blocked``): off
    under the interpreter."""
    monkeypatch.setattr(fprop, "interpreting", lambda: False)
    monkeypatch.delenv("CONVGEMM_DEPTHWISE_GLUON", raising=False)


def test_layout_on_tiles_of_vec_elements_a_thread(on_gpu_path):
    prob, x, y, wt = _case()
    # the layouts Triton's coalescing pass gave these tiles (their sm_90 TTGIR, session 37)
    got = DepthwiseRows.gluon_layout(prob, Config(4, 32, 14, 4, 2, cols=7, vec=1), x, y, wt, None)
    assert got == {"SPT_K": 1, "TPW_Q": 1, "TPW_K": 32, "WPC_Q": 4, "WPC_K": 1}
    got = DepthwiseRows.gluon_layout(prob, Config(8, 32, 14, 4, 2, cols=2, vec=2), x, y, wt, None)
    assert got == {"SPT_K": 2, "TPW_Q": 2, "TPW_K": 16, "WPC_Q": 4, "WPC_K": 1}
    # channels past one warp's lanes take warps
    got = DepthwiseRows.gluon_layout(prob, Config(1, 128, 14, 4, 2, cols=7, vec=1), x, y, wt, None)
    assert got == {"SPT_K": 1, "TPW_Q": 1, "TPW_K": 32, "WPC_Q": 1, "WPC_K": 4}
    for bk in (8, 16, 32, 64, 128, 256):
        for vec in (1, 2, 4):
            for warps in (1, 2, 4, 8):
                bq = 32 * warps * vec // bk  # vec elements a thread, as configs() makes them
                lay = DepthwiseRows.gluon_layout(prob, Config(bq, bk, 14, warps, 2, vec=vec), x, y, wt, None)
                if bq == 0:
                    assert lay is None
                    continue
                assert lay["TPW_Q"] * lay["TPW_K"] == 32 and lay["WPC_Q"] * lay["WPC_K"] == warps
                # the tile is covered exactly: rows of lanes x warps x one thread's channels
                assert lay["TPW_K"] * lay["WPC_K"] * vec == bk and lay["TPW_Q"] * lay["WPC_Q"] == bq


def test_triton_entry_where_the_layout_is_not_certain(on_gpu_path, monkeypatch):
    cfg = Config(8, 32, 14, 4, 2, cols=2, vec=2)
    prob, x, y, wt = _case()
    assert DepthwiseRows.gluon_layout(prob, cfg, x, y, wt, None) is not None
    assert DepthwiseRows.gluon_layout(prob, cfg, x, y, wt, torch.zeros(96, dtype=torch.bfloat16)) is not None
    # 16-byte vectors (vec 0): the pass sizes them from its alignment analysis
    assert DepthwiseRows.gluon_layout(prob, Config(8, 32, 14, 4, 2, cols=2, vec=0), x, y, wt, None) is None
    # narrow groups: the pass lays the gathered loads out otherwise (different SASS, session 37)
    gp, gx, gy, gw = _case(c=64, groups=16)
    assert DepthwiseRows.gluon_layout(gp, cfg, gx, gy, gw, None) is None
    # a channel count whose pixel strides are not multiples of 16
    odd = _case(c=100)
    assert DepthwiseRows.gluon_layout(odd[0], cfg, *odd[1:], None) is None
    # NCHW (channel stride not 1)
    nchw = _case(nchw=True)
    assert DepthwiseRows.gluon_layout(nchw[0], cfg, *nchw[1:], None) is None
    # a tensor not 16-byte aligned
    base = torch.zeros(x.numel() + 8, dtype=x.dtype)
    shifted = base[1:].as_strided(x.shape, x.stride())
    assert DepthwiseRows.gluon_layout(prob, cfg, shifted, y, wt, None) is None
    # a channel multiplier: k // MULT hides the channels' contiguity from the pass (other SASS)
    xm = torch.zeros(2, 64, 14, 14, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    wm = torch.zeros(128, 1, 3, 3, dtype=torch.bfloat16)
    pm = ConvProblem.from_tensors(xm, wm, stride=(1, 1), padding=(1, 1), groups=64)
    ym = torch.zeros(2, 128, 14, 14, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    assert pm.kg == 2 and DepthwiseRows.gluon_layout(pm, cfg, xm, ym, torch.zeros(9, 128, dtype=xm.dtype), None) is None
    # tiles of other than vec elements a thread: the pass would give a thread another count
    assert DepthwiseRows.gluon_layout(prob, Config(8, 32, 14, 4, 2, cols=2, vec=1), x, y, wt, None) is None
    assert DepthwiseRows.gluon_layout(prob, Config(4, 32, 14, 4, 2, cols=2, vec=2), x, y, wt, None) is None
    # more than 16 bytes a thread
    f64 = _case(dtype=torch.float64)
    assert DepthwiseRows.gluon_layout(f64[0], Config(8, 64, 14, 4, 2, vec=4), *f64[1:], None) is None
    assert DepthwiseRows.gluon_layout(f64[0], Config(8, 32, 14, 4, 2, vec=2), *f64[1:], None) is not None
    # 64-bit offsets
    monkeypatch.setattr(DepthwiseRows, "image_span", staticmethod(lambda t: 2**31))
    assert DepthwiseRows.gluon_layout(prob, cfg, x, y, wt, None) is None
    monkeypatch.undo()
    # switched off
    monkeypatch.setattr(fprop, "interpreting", lambda: False)
    monkeypatch.setenv("CONVGEMM_DEPTHWISE_GLUON", "0")
    assert DepthwiseRows.gluon_layout(prob, cfg, x, y, wt, None) is None


def test_launch_binds_every_parameter_of_both_entries(on_gpu_path, monkeypatch):
    """``Launch`` hands the compiled launcher every parameter after the runtime arguments: the
    Triton entry's ``LAYOUT`` comes from its default (a KeyError on every GPU launch of it before
    ``launch_tail``), the Gluon entry's layout constexprs from ``run``."""
    from convgemm.conv import depthwise
    from convgemm.matmul.launch import launch_tail

    captured = []
    monkeypatch.setattr(fprop, "_run_kernel", lambda launch, fn, grid, args, constexprs, options: captured.append(
        (fn, args, constexprs())))  # fmt: skip
    algo = fprop.ALGORITHMS["depthwise_rows"]
    prob, x, y, _ = _case()
    w = torch.zeros(96, 1, 3, 3, dtype=torch.bfloat16)
    algo.run(prob, x, w, None, y, Config(8, 32, 14, 4, 2, cols=2, vec=2))  # aligned: Gluon
    nprob, nx, ny, _ = _case(c=64, groups=16)
    algo.run(
        nprob, nx, torch.zeros(64, 4, 3, 3, dtype=torch.bfloat16), None, ny, Config(8, 32, 14, 4, 2, cols=2, vec=1)
    )
    (gl_fn, gl_args, gl_kw), (tt_fn, tt_args, tt_kw) = captured
    assert gl_fn is depthwise.depthwise_rows_kernel_gl and tt_fn is depthwise.depthwise_rows_kernel
    # under the interpreter the Triton entry is an InterpretedFunction: its JITFunction binds the same
    tt_fn = tt_fn if hasattr(tt_fn, "params") else triton.runtime.jit.JITFunction(tt_fn.fn)
    gl_tail = launch_tail(gl_fn, len(gl_args), gl_kw)
    tt_tail = launch_tail(tt_fn, len(tt_args), tt_kw)
    assert len(gl_tail) == len(gl_fn.arg_names) - len(gl_args) and gl_tail[-5:] == (2, 2, 16, 4, 1)
    assert len(tt_tail) == len(tt_fn.arg_names) - len(tt_args) and tt_tail[-1] is None
    with pytest.raises(TypeError, match="no value for parameter 'INT64'"):
        launch_tail(tt_fn, len(tt_args), {k: v for k, v in tt_kw.items() if k != "INT64"})


@pytest.mark.skipif(not fprop.interpreting(), reason="checks the interpreter's choice")
def test_interpreter_runs_the_triton_entry():
    prob, x, y, wt = _case()
    assert DepthwiseRows.gluon_layout(prob, Config(8, 32, 14, 4, 2, cols=2, vec=2), x, y, wt, None) is None


def _check(*argv: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.path.join(ROOT, "src") + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "depthwise_gluon_check.py"), *argv],
                         env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    return out.stdout


def test_gluon_entry_compiles_to_the_triton_entrys_sass():
    """Every candidate of a ConvNeXt-like 7x7 layer (2-channel tiles and the one-channel 7-column
    tile) and of a strided 3x3 (fp32, bias), compiled for sm_90 both ways: same registers, same
    instructions in the same order (register numbers aside)."""
    out = _check("16,96,28,28,96,7,7,1,3,1,96", "8,64,1,300,64,1,4,1,0,1,64")
    out += _check("--dtype", "fp32", "--bias", "--max", "2", "16,144,28,28,144,3,3,2,1,1,144")
    lines = [ln for ln in out.splitlines() if "compile Triton" in ln]
    assert len(lines) >= 6 and all(ln.endswith("same") for ln in lines), out
    assert any(" v1]" in ln for ln in lines), "the one-channel tile was not among the candidates"


GPU_LAYERS = [
    (4, 96, 28, 28, 7, 1),  # ConvNeXt-like 7x7: the 2-channel tiles and the one-channel 7-column tile
    (4, 144, 28, 28, 3, 2),  # a strided 3x3
    (2, 64, 1, 300, 4, 1),  # a causal conv1d as a one-row image (1x4 filter)
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("layer", GPU_LAYERS, ids=str)
def test_gpu_both_entries_give_the_same_bits(layer, dtype, monkeypatch, launched):
    """Every candidate ``configs()`` makes, run through the Gluon entry and then with
    ``CONVGEMM_DEPTHWISE_GLUON=0`` through the Triton entry: the same SASS, so the same bits; and
    against float64."""
    from convgemm.conv import depthwise
    from convgemm.functional import _prepare

    n, c, h, w, r, stride = layer
    s_ = r
    if h == 1:  # the conv1d: a 1 x r filter
        r = 1
    g = torch.Generator().manual_seed(7)
    x = torch.randn(n, c, h, w, generator=g).to("cuda", dtype).to(memory_format=torch.channels_last)
    wt = torch.randn(c, 1, r, s_, generator=g).to("cuda", dtype)
    b = torch.randn(c, generator=g).to("cuda", dtype)
    pad = (r // 2, s_ // 2 if h > 1 else 0)
    prob, xp, _ = _prepare(x, wt, b, (stride, stride), pad, (1, 1), c)
    algo = fprop.ALGORITHMS["depthwise_rows"]
    ref = conv2d_ref(x, wt, b, stride, pad, 1, c)
    for cfg in algo.configs(prob):
        outs = []
        for flag in ("1", "0"):
            monkeypatch.setenv("CONVGEMM_DEPTHWISE_GLUON", flag)
            y = torch.full((n, c, prob.p, prob.q), float("nan"), device="cuda", dtype=dtype)
            y = y.to(memory_format=torch.channels_last)
            algo.run(prob, xp, wt, b, y, cfg)
            outs.append(y)
        assert launched[-2:] == [depthwise.depthwise_rows_kernel_gl, depthwise.depthwise_rows_kernel], cfg
        assert torch.equal(outs[0], outs[1]), f"{cfg.describe()}: the two entries differ"
        assert_close(outs[0], ref, dtype, cfg.describe())


# ---------------------------------------------------------------- the depthwise wgrad rows kernel's Gluon entry


def _wgrad_case(c=96, h=28, w=28, r=3, stride=1, groups=None, dtype=torch.bfloat16, nchw=False):
    x = torch.zeros(2, c, h, w, dtype=dtype)
    groups = groups or c
    wt = torch.zeros(c, c // groups, r, r, dtype=dtype)
    prob = ConvProblem.from_tensors(x, wt, stride=(stride, stride), padding=(r // 2, r // 2), groups=groups)
    dy = torch.zeros(2, c, prob.p, prob.q, dtype=dtype)
    if not nchw:
        x, dy = x.to(memory_format=torch.channels_last), dy.to(memory_format=torch.channels_last)
    return prob, x, dy


def test_wgrad_layout_rules(on_gpu_path, monkeypatch):
    from convgemm.conv.backward import DepthwiseWgrad

    cfg = Config(8, 32, 14, 4, 2, split_k=4, cols=7, vec=2)  # as rows_configs makes them: 2 channels a thread
    prob, x, dy = _wgrad_case()
    assert DepthwiseWgrad.gluon_layout(prob, cfg, x, dy) == {"SPT_K": 2, "TPW_Q": 2, "TPW_K": 16, "WPC_Q": 4,
                                                             "WPC_K": 1}  # fmt: skip
    got = DepthwiseWgrad.gluon_layout(prob, Config(4, 64, 14, 4, 2, split_k=4, cols=2, vec=2), x, dy)
    assert got == {"SPT_K": 2, "TPW_Q": 1, "TPW_K": 32, "WPC_Q": 4, "WPC_K": 1}
    s2 = _wgrad_case(c=144, stride=2)
    assert DepthwiseWgrad.gluon_layout(s2[0], cfg, *s2[1:]) is not None
    # the cases the Triton entry keeps, as the forward's rule
    assert DepthwiseWgrad.gluon_layout(prob, Config(4, 32, 14, 4, 2, cols=7, vec=2), x, dy) is None  # 1 a thread
    assert DepthwiseWgrad.gluon_layout(prob, Config(8, 32, 14, 4, 2, cols=7, vec=0), x, dy) is None
    gp, gx, gdy = _wgrad_case(c=64, groups=16)
    assert DepthwiseWgrad.gluon_layout(gp, cfg, gx, gdy) is None  # narrow groups: gathers
    odd = _wgrad_case(c=100)
    assert DepthwiseWgrad.gluon_layout(odd[0], cfg, *odd[1:]) is None  # strides not multiples of 16
    nchw = _wgrad_case(nchw=True)
    assert DepthwiseWgrad.gluon_layout(nchw[0], cfg, *nchw[1:]) is None
    base = torch.zeros(x.numel() + 8, dtype=x.dtype)
    assert DepthwiseWgrad.gluon_layout(prob, cfg, base[1:].as_strided(x.shape, x.stride()), dy) is None
    # the partial sums' store: more channels than threads would give a thread several
    assert DepthwiseWgrad.gluon_layout(prob, Config(1, 256, 14, 4, 2, cols=7, vec=2), x, dy) is None
    monkeypatch.setattr(DepthwiseRows, "image_span", staticmethod(lambda t: 2**31))
    assert DepthwiseWgrad.gluon_layout(prob, cfg, x, dy) is None  # 64-bit offsets
    monkeypatch.undo()
    monkeypatch.setattr(fprop, "interpreting", lambda: False)
    monkeypatch.setenv("CONVGEMM_DEPTHWISE_GLUON", "0")
    assert DepthwiseWgrad.gluon_layout(prob, cfg, x, dy) is None


def test_wgrad_launch_binds_every_parameter_of_both_entries(on_gpu_path, monkeypatch):
    """As the forward's: the Triton entry's defaulted ``LAYOUT`` / ``LAYOUT1`` are bound from
    their defaults, the Gluon entry's layout constexprs and ``INT64`` from ``run``."""
    from convgemm.conv import depthwise_wgrad
    from convgemm.conv.backward import DepthwiseWgrad
    from convgemm.matmul.launch import launch_tail

    captured = []
    monkeypatch.setattr(fprop, "_run_kernel", lambda launch, fn, grid, args, constexprs, options: captured.append(
        (fn, args, constexprs())))  # fmt: skip
    algo = DepthwiseWgrad()
    cfg = Config(8, 32, 14, 4, 2, split_k=4, cols=2, vec=2)
    prob, x, dy = _wgrad_case()
    algo.run(prob, x, dy, torch.zeros(96, 1, 3, 3, dtype=torch.bfloat16), cfg)  # aligned: Gluon
    odd, ox, ody = _wgrad_case(c=100)
    algo.run(odd, ox, ody, torch.zeros(100, 1, 3, 3, dtype=torch.bfloat16), cfg)  # Triton
    rows = [c for c in captured if c[0] is not depthwise_wgrad.wgrad_reduce_kernel]
    (gl_fn, gl_args, gl_kw), (tt_fn, tt_args, tt_kw) = rows
    assert gl_fn is depthwise_wgrad.depthwise_wgrad_rows_kernel_gl
    assert tt_fn is depthwise_wgrad.depthwise_wgrad_rows_kernel
    assert gl_kw["INT64"] is False and tt_kw["INT64"] is False
    tt_fn = tt_fn if hasattr(tt_fn, "params") else triton.runtime.jit.JITFunction(tt_fn.fn)
    gl_tail = launch_tail(gl_fn, len(gl_args), gl_kw)
    tt_tail = launch_tail(tt_fn, len(tt_args), tt_kw)
    assert len(gl_tail) == len(gl_fn.arg_names) - len(gl_args) and gl_tail[-5:] == (2, 2, 16, 4, 1)
    assert len(tt_tail) == len(tt_fn.arg_names) - len(tt_args) and tt_tail[-2:] == (None, None)


def test_wgrad_gluon_entry_compiles_to_the_same_mix():
    """Candidates of a strided 3x3 (30 x loads a step, the slowest wgrad first calls) and a 7x7,
    compiled for sm_90 both ways: the same registers and the same memory, floating-point,
    shuffle and barrier instructions (the order of address and mask code differs: Gluon has no
    LICM or instruction-reordering pass)."""
    out = _check("--wgrad", "--max", "3", "16,96,56,56,96,3,3,2,1,1,96")
    out += _check("--wgrad", "--max", "1", "8,96,28,28,96,7,7,1,3,1,96")
    out += _check("--wgrad", "--dtype", "fp32", "--max", "2", "16,96,28,28,96,3,3,1,1,1,96")
    lines = [ln for ln in out.splitlines() if "compile Triton" in ln]
    assert len(lines) >= 5 and all(" same" in ln and "DIFFERENT" not in ln for ln in lines), out


WGRAD_GPU_LAYERS = [
    (4, 96, 28, 28, 3, 1),
    (4, 96, 56, 56, 3, 2),  # MobileNetV2-like strided 3x3
    (4, 96, 28, 28, 7, 1),  # ConvNeXt-like 7x7
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("layer", WGRAD_GPU_LAYERS, ids=str)
def test_gpu_wgrad_both_entries_give_the_same_bits(layer, dtype, monkeypatch, launched):
    """Every rows candidate through the Gluon entry and then, with ``CONVGEMM_DEPTHWISE_GLUON=0``,
    through the Triton entry: the same multiply-adds in the same order (only address code is
    placed differently), so the same bits; and against float64."""
    from convgemm.conv import depthwise_wgrad
    from convgemm.conv.backward import DepthwiseWgrad

    n, c, h, w, r, stride = layer
    g = torch.Generator().manual_seed(11)
    x64 = torch.randn(n, c, h, w, generator=g, dtype=torch.float64)
    prob = ConvProblem.from_tensors(x64, torch.zeros(c, 1, r, r, dtype=torch.float64), stride=(stride, stride),
                                    padding=(r // 2, r // 2), groups=c)  # fmt: skip
    dy64 = torch.randn(n, c, prob.p, prob.q, generator=g, dtype=torch.float64)
    x = x64.to("cuda", dtype).to(memory_format=torch.channels_last)
    dy = dy64.to("cuda", dtype).to(memory_format=torch.channels_last)
    prob = ConvProblem.from_tensors(x, torch.zeros(c, 1, r, r, device="cuda", dtype=dtype), stride=(stride, stride),
                                    padding=(r // 2, r // 2), groups=c)  # fmt: skip
    ref = torch.nn.grad.conv2d_weight(x.double().cpu(), (c, 1, r, r), dy.double().cpu(), stride, r // 2, 1, c)
    algo = DepthwiseWgrad()
    cfgs = algo.rows_configs(prob)
    assert cfgs
    for cfg in cfgs:
        outs = []
        for flag in ("1", "0"):
            monkeypatch.setenv("CONVGEMM_DEPTHWISE_GLUON", flag)
            dw = torch.full((c, 1, r, r), float("nan"), device="cuda", dtype=dtype)
            algo.run(prob, x, dy, dw, cfg)
            outs.append(dw)
        rows = [f for f in launched if f is not depthwise_wgrad.wgrad_reduce_kernel][-2:]
        assert rows == [depthwise_wgrad.depthwise_wgrad_rows_kernel_gl, depthwise_wgrad.depthwise_wgrad_rows_kernel]
        assert torch.equal(outs[0], outs[1]), f"{cfg.describe()}: the two entries differ"
        assert_close(outs[0].cpu(), ref.to(dtype), dtype, cfg.describe())
