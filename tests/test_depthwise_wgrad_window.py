"""The depthwise wgrad's window kernel (``conv/depthwise_wgrad_window.py``, ``DepthwiseWgrad``
configs with ``window > 0``) against float64 ``torch.nn.grad.conv2d_weight``."""

from dataclasses import replace

import pytest
import torch
import triton
from conftest import DEVICE
from reference import assert_close

from convgemm.conv import backward as bw
from convgemm.conv import depthwise_wgrad, depthwise_wgrad_window, fprop
from convgemm.conv.fprop import Config
from convgemm.problem import ConvProblem

# fp32 means strict IEEE fp32 here (the reference thresholds assume it)
pytestmark = pytest.mark.usefixtures("no_tf32")


def _problem(n, c, h, w, r, padding, dtype, device=DEVICE, stride=1, dilation=1, k=None, layout="channels_last",
             seed=0):  # fmt: skip
    """(prob, x, dy, float64 dw reference) of a depthwise layer (``k`` = C times a multiplier)."""
    k = k or c
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, h, w, generator=g, dtype=torch.float64).to(dtype)
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=c)
    prob = ConvProblem.from_tensors(x, torch.zeros(k, 1, r, r, dtype=dtype), None, **kw)
    dy = torch.randn(n, k, prob.p, prob.q, generator=g, dtype=torch.float64).to(dtype)
    ref = torch.nn.grad.conv2d_weight(x.double(), (k, 1, r, r), dy.double(), **kw)
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    x, dy = x.to(device).to(memory_format=fmt), dy.to(device).to(memory_format=fmt)
    return prob, x, dy, ref


def _nan_dw(k, r, s, dtype, device=DEVICE):
    """A NaN-filled dw [K, 1, R, S] with strides (2RS, 2, 2S, 2): every element must be written."""
    dw = torch.full((k, r, s, 2), float("nan"), dtype=dtype, device=device)
    return dw[..., 0].unsqueeze(1)


def _gpu_configs(prob, monkeypatch):
    """``window_configs`` as on a GPU."""
    monkeypatch.setattr(bw, "interpreting", lambda: False)
    cfgs = bw.DWGRAD.window_configs(prob)
    monkeypatch.undo()
    return cfgs


# N, C, H, W, R, padding: C not a multiple of the channel block, H not a multiple of 7 (the
# unrolled step loop's masked tail), batch 1 and 3 (an image group of 2 with one image)
CASES = [
    (1, 20, 9, 11, 7, 3),
    (3, 16, 14, 13, 7, 3),
    (3, 12, 10, 9, 5, 2),
    (2, 10, 12, 8, 7, (2, 1)),  # P = H - 2, Q = W - 4
    (2, 9, 11, 12, 5, 0),  # no padding: P = H - 4
    (2, 20, 10, 11, 3, 1),  # MobileNetV2's 3x3
    (1, 12, 8, 7, 3, (0, 2)),  # P = H - 2, Q = W + 2
]


# under the interpreter each case in one of the three dtypes (rotating from case to case; 5-21 s
# each there), the GPU all of them
@pytest.mark.interpreter_share(3, vary=("dtype",))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_window_configs_match_float64(case, dtype):
    """Every window config ``configs`` offers (interpreter: small tiles) and a few beyond it, each
    forced, into a NaN-filled non-contiguous dw in the input dtype; the first twice, bit-identical.
    (bf16 runs under the interpreter too: the kernel has no tl.dot, only converts and fp32 FMAs.)"""
    n, c, h, w, r, pad = case
    prob, x, dy, ref = _problem(n, c, h, w, r, pad, dtype)
    assert bw.DWGRAD.window_ok(prob) is None
    offered = bw.DWGRAD.window_configs(prob)
    assert offered and all(cfg in bw.DWGRAD.configs(prob) for cfg in offered)
    cols, qg, _ = depthwise_wgrad_window.pick(prob.q)
    extra = [
        Config(qg, 32, r, 4, 1, cols=cols, window=4),  # no prefetch, a channel block past C, imgs > N
        Config(2 * qg, 8, 2, 4, 3, cols=cols, window=1),  # column groups past Q, UNROLL 2, 2 steps ahead
        Config(triton.next_power_of_2(-(-prob.q // 4)), 4, r, 1, 2, cols=4, window=3),  # 4 columns a thread
    ]
    for i, cfg in enumerate(offered + extra):
        outs = []
        for _ in range(2 if i == 0 else 1):
            dw = _nan_dw(c, r, r, dtype)
            bw.DWGRAD.run(prob, x, dy, dw, cfg)
            outs.append(dw)
        assert_close(outs[0], ref.to(dtype), dtype, f"window wgrad {case} {cfg.describe()}")
        assert torch.equal(outs[0], outs[-1]), cfg.describe()


@pytest.mark.parametrize("layout", ["nchw", "sliced"])
def test_window_any_strides(layout):
    """Any strides (the tuner hands NHWC tensors; NCHW reads are slow but right): NCHW x and dy,
    and channels_last slices of wider tensors (image and row strides not C*H*W and C*W)."""
    n, c, h, w, r = 2, 12, 9, 8, 7
    prob, x, dy, ref = _problem(n, c, h, w, r, 3, torch.float32, layout="nchw" if layout == "nchw" else "channels_last")
    if layout == "sliced":
        big = torch.zeros(n, c + 5, h, w + 3, dtype=x.dtype, device=x.device).to(memory_format=torch.channels_last)
        big[:, 2 : c + 2, :, :w] = x
        x = big[:, 2 : c + 2, :, :w]
        big = torch.zeros(n, c + 3, prob.p, prob.q, dtype=dy.dtype, device=dy.device)
        big = big.to(memory_format=torch.channels_last)
        big[:, 3:, :, :] = dy
        dy = big[:, 3:]
        assert x.stride(1) == 1 and x.stride(3) == c + 5 and dy.stride(3) == c + 3
    for cfg in bw.DWGRAD.window_configs(prob):
        dw = _nan_dw(c, r, r, torch.float32)
        bw.DWGRAD.run(prob, x, dy, dw, cfg)
        assert_close(dw, ref.float(), torch.float32, f"{layout} {cfg.describe()}")


# the ConvNeXt layers' GPU forms (7 columns a thread: 8 x 16, 4 x 32, 2 x 64, 1 x 128 tiles) on
# fewer channels (C not a multiple of the block where it has two) and one or two images
CONVNEXT_FORMS = [(1, 24, 56), (1, 40, 28), (2, 72, 14), (2, 136, 7)]


@pytest.mark.parametrize("n,c,hw", CONVNEXT_FORMS, ids=str)
def test_window_gpu_forms_on_convnext_widths(n, c, hw, monkeypatch):
    """The tiles ``window_configs`` gives a GPU, run here whatever the device, against float64."""
    prob, x, dy, ref = _problem(n, c, hw, hw, 7, 3, torch.float32)
    cfgs = _gpu_configs(prob, monkeypatch)
    assert cfgs and all(cfg.cols == 7 and cfg.block_m * cfg.block_n == 128 for cfg in cfgs)
    for cfg in cfgs:
        dw = _nan_dw(c, 7, 7, torch.float32)
        bw.DWGRAD.run(prob, x, dy, dw, cfg)
        assert_close(dw, ref.float(), torch.float32, f"{c} @{hw} {cfg.describe()}")


def test_window_candidates_per_convnext_layer(monkeypatch):
    """ConvNeXt-T's four 7x7 layers at batch 64 (bf16): 7 columns a thread, all Q columns in one
    program, 128 threads, one image a program; it is the default config there, first among the
    candidates, and the rows kernel keeps one."""
    want = {(96, 56): (8, 16, (1,)), (192, 28): (4, 32, (1,)), (384, 14): (2, 64, (1,)), (768, 7): (1, 128, (1,))}
    for (c, hw), (qg, bk, imgs) in want.items():
        prob = ConvProblem.from_tensors(torch.empty(64, c, hw, hw, dtype=torch.bfloat16),
                                        torch.empty(c, 1, 7, 7, dtype=torch.bfloat16), None, padding=3, groups=c)  # fmt: skip
        cfgs = _gpu_configs(prob, monkeypatch)
        assert [(cf.block_m, cf.block_n, cf.block_k, cf.cols, cf.num_warps, cf.num_stages) for cf in cfgs] == [
            (qg, bk, 7, 7, 4, 2)
        ] * len(imgs), [cf.describe() for cf in cfgs]
        assert tuple(cf.window for cf in cfgs) == imgs
        monkeypatch.setattr(bw, "interpreting", lambda: False)
        offered = bw.DWGRAD.configs(prob)
        assert offered[: len(cfgs)] == cfgs and bw.DWGRAD.default_config(prob) == cfgs[0]
        assert [cf.cols for cf in offered[len(cfgs) :]] == [2] and not offered[-1].window  # the rows kernel's
        monkeypatch.undo()


@pytest.mark.parametrize(
    "kw,k,r,dtype,why",
    [
        (dict(stride=2), None, 7, torch.float32, "stride 1"),
        (dict(dilation=2), None, 7, torch.float32, "dilation 1"),
        (dict(), 32, 7, torch.float32, "multiplier"),
        (dict(), None, 1, torch.float32, "1x1"),
        (dict(), None, 9, torch.float32, "9x9"),
        (dict(), None, 7, torch.float64, "fp32"),
        (dict(padding=7), None, 7, torch.float32, "padding"),
    ],
    ids=str,
)
def test_window_ok_rejects_with_a_reason(kw, k, r, dtype, why):
    """``window_ok`` names why a problem is not the window kernel's; ``configs`` offers no window
    config then, and ``run`` refuses a forced one."""
    kw = {"padding": r // 2, **kw}
    prob, x, dy, _ = _problem(1, 16, 14, 14, r, kw.pop("padding"), dtype, k=k, **kw)
    reason = bw.DWGRAD.window_ok(prob)
    assert reason is not None and why in reason, reason
    assert bw.DWGRAD.window_configs(prob) == [] and not any(c.window for c in bw.DWGRAD.configs(prob))
    with pytest.raises(ValueError, match="window"):
        bw.DWGRAD.run(prob, x, dy, _nan_dw(prob.k, r, r, dtype), Config(2, 16, r, 4, 2, cols=7, window=1))


def test_window_ok_rejects_narrow_groups_and_wide_rows():
    """Narrow groups (several channels a group) and rows wider than 112 columns (fewer than 8
    channels a program) are not the window kernel's."""
    x = torch.empty(1, 32, 14, 14)
    prob = ConvProblem.from_tensors(x, torch.empty(32, 4, 7, 7), None, padding=3, groups=8)
    assert "depthwise" in bw.DWGRAD.window_ok(prob)
    wide = ConvProblem.from_tensors(torch.empty(1, 32, 8, 120), torch.empty(32, 1, 7, 7), None, padding=3, groups=32)
    assert "112" in bw.DWGRAD.window_ok(wide)
    ok = ConvProblem.from_tensors(torch.empty(1, 32, 8, 112), torch.empty(32, 1, 7, 7), None, padding=3, groups=32)
    assert bw.DWGRAD.window_ok(ok) is None


def test_window_config_field_and_bad_tiles():
    """``window`` shows in ``describe`` and survives the disk cache's round trip; a tile whose
    column groups do not cover Q, or that is not a power of two, is refused."""
    from dataclasses import asdict

    cfg = Config(8, 16, 7, 4, 2, cols=7, window=2)
    assert cfg.describe().endswith(" c7 win2") and Config(**asdict(cfg)) == cfg
    prob, x, dy, _ = _problem(1, 8, 9, 9, 7, 3, torch.float32)
    for bad in (replace(cfg, block_m=1), replace(cfg, block_n=12), replace(cfg, cols=0, block_m=2)):
        with pytest.raises(ValueError, match="window"):
            bw.DWGRAD.run(prob, x, dy, _nan_dw(8, 7, 7, torch.float32), bad)


def test_window_pick():
    """7 columns a thread on the ConvNeXt widths, else the fewest wasted columns (ties: more)."""
    assert [depthwise_wgrad_window.pick(q) for q in (56, 28, 14, 7)] == [(7, 8, 16), (7, 4, 32), (7, 2, 64),
                                                                         (7, 1, 128)]  # fmt: skip
    assert depthwise_wgrad_window.pick(32) == (4, 8, 16)
    assert depthwise_wgrad_window.pick(9) == (5, 2, 64)
    assert depthwise_wgrad_window.pick(3) == (3, 1, 128)


def test_window_launch_handle_and_reduce(launched):
    """A launch handle keeps the reduce's own handle in ``launch.extra``; a second call through the
    same handle gives the same bits."""
    from convgemm.matmul.launch import Launch

    prob, x, dy, ref = _problem(2, 16, 9, 9, 7, 3, torch.float32)
    cfg = bw.DWGRAD.window_configs(prob)[0]
    launch = Launch()
    outs = []
    for _ in range(2):
        dw = _nan_dw(16, 7, 7, torch.float32)
        bw.DWGRAD.run(prob, x, dy, dw, cfg, launch)
        outs.append(dw)
    assert isinstance(launch.extra, Launch)
    # the first call picks the entry (the Gluon one on the GPU for channel-contiguous tensors);
    # the warm second call names the Triton entry and relaunches what the first compiled
    main, gl = (
        depthwise_wgrad_window.depthwise_wgrad_window_kernel,
        depthwise_wgrad_window.depthwise_wgrad_window_kernel_gl,
    )
    first = gl if bw.DWGRAD.window_layout(prob, cfg, x, dy) is not None else main
    assert launched == [first, depthwise_wgrad.wgrad_reduce_kernel, main, depthwise_wgrad.wgrad_reduce_kernel]
    assert_close(outs[0], ref.float(), torch.float32, cfg.describe())
    assert torch.equal(outs[0], outs[1])


@pytest.mark.skipif(depthwise_wgrad_window.gl is None, reason="needs Triton's Gluon")
def test_window_entries_bind_every_parameter(monkeypatch):
    """On the GPU path: the Gluon entry for channel-contiguous tensors (its layout constexprs from
    ``window_layout``), the Triton entry for NCHW ones and with ``CONVGEMM_DEPTHWISE_GLUON=0``;
    every parameter of each bound (``launch_tail``, what a warm relaunch passes)."""
    from convgemm.matmul.launch import launch_tail

    captured = []
    monkeypatch.setattr(fprop, "_run_kernel", lambda launch, fn, grid, args, constexprs, options: captured.append(
        (fn, grid, args, constexprs())))  # fmt: skip
    monkeypatch.setattr(bw, "interpreting", lambda: False)
    monkeypatch.delenv("CONVGEMM_DEPTHWISE_GLUON", raising=False)
    prob, x, dy, _ = _problem(2, 96, 56, 56, 7, 3, torch.bfloat16, device="cpu")
    cfg = bw.DWGRAD.window_configs(prob)[0]
    assert bw.DWGRAD.window_layout(prob, cfg, x, dy) == {"TPW_Q": 2, "TPW_K": 16, "WPC_Q": 4, "WPC_K": 1}
    dw = torch.zeros(96, 1, 7, 7, dtype=torch.bfloat16)
    bw.DWGRAD.run(prob, x, dy, dw, cfg)
    bw.DWGRAD.run(prob, x.contiguous(), dy.contiguous(), dw, cfg)  # NCHW: the Triton entry
    monkeypatch.setenv("CONVGEMM_DEPTHWISE_GLUON", "0")
    bw.DWGRAD.run(prob, x, dy, dw, cfg)
    mains = [c for c in captured if c[0] is not depthwise_wgrad.wgrad_reduce_kernel]
    assert [c[0] for c in mains] == [depthwise_wgrad_window.depthwise_wgrad_window_kernel_gl,
                                     depthwise_wgrad_window.depthwise_wgrad_window_kernel,
                                     depthwise_wgrad_window.depthwise_wgrad_window_kernel]  # fmt: skip
    for fn, grid, args, kw in mains:
        assert grid == (6, 2)
        fn = fn if hasattr(fn, "params") else triton.runtime.jit.JITFunction(fn.fn)
        tail = launch_tail(fn, len(args), kw)
        assert len(tail) == len(fn.arg_names) - len(args)
    gl_kw, tt_kw, _ = (c[3] for c in mains)
    assert (gl_kw["XC"], gl_kw["XW"], gl_kw["YW"]) == (1, 96, 96) and (tt_kw["XC"], tt_kw["XW"]) == (56 * 56, 1)
    assert gl_kw["X_MASK"] == 0b1110000000111 and not gl_kw["DY_MASK"] and not gl_kw["ROW_MASK"]
    # a tile of other than one element a thread keeps the Triton entry
    assert bw.DWGRAD.window_layout(prob, replace(cfg, block_n=32), x, dy) is None


def test_window_tuned_choice_is_cached(monkeypatch, tmp_path):
    """A window config the tuner picks (a fake tuner takes the first window candidate; on the GPU
    the rows kernel's fallback comes after it) is stored on disk, read back by a fresh process
    without timing, and computes the gradient."""
    import convgemm
    from convgemm.tune import autotune as at
    from convgemm.tune import cache as tc

    monkeypatch.setenv("CONVGEMM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tc, "_warned", set())
    monkeypatch.setattr(bw, "_can_time", lambda x: True)
    monkeypatch.setattr(at, "autotune_enabled", lambda: True)
    calls = []

    def fake_tune(prob, candidates, x, w, bias, y):
        (algo,) = candidates
        cfg = next(c for c in algo.configs(prob) if c.window)
        calls.append(cfg)
        algo.run(prob, x, w, bias, y, cfg)
        return algo, cfg, 3.0

    monkeypatch.setattr(at, "_tune", fake_tune)
    prob, x, dy, ref = _problem(2, 8, 9, 8, 7, 3, torch.float32)
    at.clear_memo()
    try:
        algo, cfg, _, _ = bw.choose_wgrad(prob, x, dy, torch.empty(8, 1, 7, 7, device=DEVICE))
        assert algo is bw.DWGRAD and cfg.window and calls == [cfg]
        at.clear_memo()  # a new process: the disk answers, nothing is timed
        assert bw.choose_wgrad(prob, x, dy, torch.empty(8, 1, 7, 7, device=DEVICE))[1] == cfg and len(calls) == 1
        got = convgemm.conv2d_weight(x, (8, 1, 7, 7), dy, padding=3, groups=8)
        assert_close(got, ref.float(), torch.float32, "tuned window wgrad")
    finally:
        at.clear_memo()


# ConvNeXt-T's 7x7 depthwise layers (C, H = W, R) at batch 2, and MobileNetV2's widest, smallest
# and most-channel stride-1 3x3 layers
GPU_LAYERS = [(96, 56, 7), (192, 28, 7), (384, 14, 7), (768, 7, 7), (32, 112, 3), (144, 56, 3), (960, 7, 3)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("layer", GPU_LAYERS, ids=str)
def test_gpu_window_both_entries(layer, dtype, monkeypatch, launched):
    """The window candidate and two images a program through the Gluon entry, and, in bf16, the
    candidate also through the Triton entry (``CONVGEMM_DEPTHWISE_GLUON=0``; ~25 s to compile a
    7x7 tile here, 60 s or more on the GPU machine's host, so one a layer): the same FMAs in the
    same order, so the same bits; and against float64."""
    c, hw, r = layer
    prob, x, dy, ref = _problem(2, c, hw, hw, r, r // 2, dtype, device="cuda", seed=c)
    cfgs = bw.DWGRAD.window_configs(prob)
    assert cfgs and cfgs[0].window == 1
    cfgs = cfgs + [replace(cfgs[0], window=2)]
    for i, cfg in enumerate(cfgs):
        outs = []
        for flag in ("1", "0") if i == 0 and dtype == torch.bfloat16 else ("1",):
            monkeypatch.setenv("CONVGEMM_DEPTHWISE_GLUON", flag)
            dw = torch.full((c, 1, r, r), float("nan"), device="cuda", dtype=dtype)
            bw.DWGRAD.run(prob, x, dy, dw, cfg)
            outs.append(dw)
        mains = [f for f in launched if f is not depthwise_wgrad.wgrad_reduce_kernel][-len(outs) :]
        assert mains[0] is depthwise_wgrad_window.depthwise_wgrad_window_kernel_gl
        assert all(f is depthwise_wgrad_window.depthwise_wgrad_window_kernel for f in mains[1:])
        assert all(torch.equal(outs[0], o) for o in outs[1:]), f"{cfg.describe()}: the two entries differ"
        assert_close(outs[0].cpu(), ref.to(dtype), dtype, f"{c} @{hw} {cfg.describe()}")
