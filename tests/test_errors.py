"""Every bad argument to conv2d is refused with a TypeError/ValueError that names it, before any kernel runs."""

import numpy as np
import pytest
import torch
from conftest import DEVICE

import convgemm
import convgemm.conv.fprop as fprop

_REAL_LAUNCH = fprop._run_kernel


def _kernel_reached(*args, **kwargs):
    raise AssertionError("kernel reached")


@pytest.fixture(autouse=True)
def no_kernels(monkeypatch):
    """Every convolution kernel launches through fprop._run_kernel: make reaching it a test failure."""
    monkeypatch.setattr(fprop, "_run_kernel", _kernel_reached)
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")


def t(*shape, dtype=torch.float32, device=DEVICE):
    return torch.randn(shape, device=device).to(dtype)


def test_the_guard_catches_kernel_launches():
    """Sanity check of the fixture: a valid call does reach the (patched) launch, for every algorithm."""
    x, w = t(1, 8, 5, 5).contiguous(memory_format=torch.channels_last), t(8, 8, 1, 1)
    reached = []
    for algorithm in ("auto", *convgemm.algorithms()):
        try:
            convgemm.conv2d(x, w, algorithm=algorithm)
        except ValueError as e:  # a TMA algorithm on a GPU without TMA
            assert algorithm not in ("auto", "implicit_gemm") and "cannot run" in str(e)
        except AssertionError as e:
            assert str(e) == "kernel reached"
            reached.append(algorithm)
    assert "auto" in reached and "implicit_gemm" in reached
    if DEVICE == "cpu":  # the interpreter has TMA: every dense algorithm applies to this 1x1 problem
        # (width_unfold needs a kernel wider than one tap: it is guarded below)
        dense = {
            a
            for a in convgemm.algorithms()
            if a
            not in (
                "depthwise",
                "depthwise_rows",
                "grouped",
                "grouped_tma",
                "grouped_ws",
                "grouped_direct",
                "grouped_mma",
                "width_unfold",
                "narrow_fold",
                "implicit_gemm_tma_nchw",
                "gemm_1x1_nchw",
                "head_1x1_nchw",
                "depthwise_nchw",
                "implicit_gemm_ws",
            )  # fmt: skip
        }
        assert set(reached) == {"auto", *dense}
        # the NCHW kernel takes an NCHW 16-bit input as it is
        with pytest.raises(AssertionError, match="kernel reached"):
            convgemm.conv2d(t(1, 16, 4, 16, dtype=torch.float16), t(16, 16, 1, 1, dtype=torch.float16),
                            algorithm="implicit_gemm_tma_nchw")  # fmt: skip
        # and the NCHW head an NCHW 1x1 head of any dtype
        with pytest.raises(AssertionError, match="kernel reached"):
            convgemm.conv2d(t(1, 16, 4, 16), t(2, 16, 1, 1), algorithm="head_1x1_nchw")
        # and the NCHW planes GEMM any NCHW 1x1 layer with dense planes
        with pytest.raises(AssertionError, match="kernel reached"):
            convgemm.conv2d(t(1, 16, 7, 7), t(8, 16, 1, 1), algorithm="gemm_1x1_nchw")
        # width_unfold's unfold kernel is the first it reaches
        with pytest.raises(AssertionError, match="kernel reached"):
            convgemm.conv2d(t(1, 3, 8, 8, dtype=torch.float16), t(8, 3, 3, 3, dtype=torch.float16), stride=2,
                            algorithm="width_unfold")  # fmt: skip
        # narrow_fold needs a filter wider than one column and few output channels
        with pytest.raises(AssertionError, match="kernel reached"):
            convgemm.conv2d(t(1, 16, 8, 8, dtype=torch.float16).contiguous(memory_format=torch.channels_last),
                            t(3, 16, 3, 3, dtype=torch.float16), padding=1, algorithm="narrow_fold")  # fmt: skip
    # the grouped and depthwise algorithms (the latter not GEMMs) go through the same guard
    for algorithm, groups, wd in (("grouped", 2, t(8, 4, 3, 3)), ("depthwise", 8, t(8, 1, 3, 3)),
                                  ("depthwise_rows", 8, t(8, 1, 3, 3)), ("grouped_tma", 2, t(8, 4, 3, 3)),
                                  ("depthwise_nchw", 8, t(8, 1, 3, 3))):  # fmt: skip
        with pytest.raises(AssertionError, match="kernel reached"):
            convgemm.conv2d(t(1, 8, 5, 5), wd, groups=groups, algorithm=algorithm)


# (id, builder -> (args, kwargs), exception type, regex the message must match)
BAD = [
    # ranks
    ("input 2-D", lambda: ((t(8, 5), t(4, 8, 3, 3)), {}), ValueError, r"input must be 4-D.*\(8, 5\)"),
    ("input 5-D", lambda: ((t(1, 2, 8, 5, 5), t(4, 8, 3, 3)), {}), ValueError, r"input must be 4-D.*\(1, 2, 8, 5, 5\)"),
    ("input 1-D", lambda: ((t(8), t(4, 8, 3, 3)), {}), ValueError, r"input must be 4-D"),
    ("weight 3-D", lambda: ((t(1, 8, 5, 5), t(4, 8, 3)), {}), ValueError, r"weight must be 4-D.*\(4, 8, 3\)"),
    ("weight 5-D", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3, 1)), {}), ValueError, r"weight must be 4-D"),
    # not tensors
    ("input ndarray", lambda: ((np.zeros((1, 8, 5, 5), np.float32), t(4, 8, 3, 3)), {}), TypeError,
     r"input must be a torch.Tensor, got ndarray"),
    ("weight list", lambda: ((t(1, 8, 5, 5), [[1.0]]), {}), TypeError, r"weight must be a torch.Tensor, got list"),
    ("bias list", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3), [0.0] * 4), {}), TypeError,
     r"bias must be a torch.Tensor or None"),
    # channels and groups
    ("channels", lambda: ((t(1, 8, 5, 5), t(4, 3, 3, 3)), {}), ValueError, r"input has 8 channels.*3 \* 1 = 3"),
    ("channels vs groups", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"groups": 2}), ValueError,
     r"input has 8 channels.*8 \* 2 = 16"),
    ("groups does not divide K", lambda: ((t(1, 8, 5, 5), t(6, 2, 3, 3)), {"groups": 4}), ValueError,
     r"out_channels \(weight.shape\[0\] = 6\) must be divisible by groups = 4"),
    ("groups 0", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"groups": 0}), ValueError, r"groups must be >= 1, got 0"),
    ("groups -1", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"groups": -1}), ValueError, r"groups must be >= 1, got -1"),
    ("groups float", lambda: ((t(1, 8, 5, 5), t(4, 4, 3, 3)), {"groups": 2.0}), TypeError, r"groups must be an int, got 2.0"),
    ("groups str", lambda: ((t(1, 8, 5, 5), t(4, 4, 3, 3)), {"groups": "2"}), TypeError, r"groups must be an int"),
    ("groups bool", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"groups": True}), TypeError, r"groups must be an int, got True"),
    # dtypes
    ("mixed fp32/fp16", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3, dtype=torch.float16)), {}), TypeError,
     r"share one dtype.*input torch.float32, weight torch.float16"),
    ("bias dtype", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3), t(4, dtype=torch.float16)), {}), TypeError,
     r"share one dtype.*bias torch.float16"),
    ("int32", lambda: ((t(1, 8, 5, 5, dtype=torch.int32), t(4, 8, 3, 3, dtype=torch.int32)), {}), TypeError,
     r"input has dtype torch.int32"),
    ("int64 weight", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3, dtype=torch.int64)), {}), TypeError,
     r"weight has dtype torch.int64"),
    ("uint8", lambda: ((t(1, 8, 5, 5, dtype=torch.uint8), t(4, 8, 3, 3, dtype=torch.uint8)), {}), TypeError,
     r"input has dtype torch.uint8"),
    ("bool", lambda: ((t(1, 8, 5, 5, dtype=torch.bool), t(4, 8, 3, 3, dtype=torch.bool)), {}), TypeError,
     r"input has dtype torch.bool"),
    ("complex64", lambda: ((t(1, 8, 5, 5, dtype=torch.complex64), t(4, 8, 3, 3, dtype=torch.complex64)), {}),
     TypeError, r"input has dtype torch.complex64"),
    ("int bias", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3), t(4, dtype=torch.int64)), {}), TypeError,
     r"bias has dtype torch.int64"),
    # devices: 'meta' is a second device even without a GPU
    ("weight on meta", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3, device="meta")), {}), ValueError,
     r"one device.*weight on meta"),
    ("bias on meta", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3), t(4, device="meta")), {}), ValueError,
     r"one device.*bias on meta"),
    # bias shape
    ("bias 2-D", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3), t(1, 4)), {}), ValueError, r"bias must have shape \[4\].*\(1, 4\)"),
    ("bias length", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3), t(5)), {}), ValueError, r"bias must have shape \[4\].*\(5,\)"),
    ("bias 0-D", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3), t()), {}), ValueError, r"bias must have shape \[4\]"),
    # stride / dilation / padding values
    ("stride 0", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"stride": 0}), ValueError, r"stride must be >= 1, got \(0, 0\)"),
    ("stride (1, 0)", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"stride": (1, 0)}), ValueError, r"stride must be >= 1"),
    ("stride -1", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"stride": -1}), ValueError, r"stride must be >= 1"),
    ("dilation 0", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"dilation": 0}), ValueError, r"dilation must be >= 1"),
    ("dilation (0, 1)", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"dilation": (0, 1)}), ValueError,
     r"dilation must be >= 1"),
    ("padding -1", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"padding": -1}), ValueError, r"padding must be >= 0"),
    ("padding (1, -2)", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"padding": (1, -2)}), ValueError,
     r"padding must be >= 0, got \(1, -2\)"),
    ("same with stride 2", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"padding": "same", "stride": 2}), ValueError,
     r"padding='same' is not supported for strided"),
    ("same with stride (1, 2)", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"padding": "same", "stride": (1, 2)}),
     ValueError, r"padding='same'"),
    ("unknown padding string", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"padding": "full"}), ValueError,
     r"padding must be an int, a pair, 'same' or 'valid', got 'full'"),
    ("padding 'SAME'", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"padding": "SAME"}), ValueError,
     r"got 'SAME'"),
    # stride / dilation / padding types
    ("stride 3-tuple", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"stride": (1, 1, 1)}), TypeError,
     r"stride must be an int or a pair of ints, got \(1, 1, 1\)"),
    ("padding 3-list", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"padding": [1, 1, 1]}), TypeError,
     r"padding must be an int or a pair"),
    ("dilation float", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"dilation": 1.0}), TypeError,
     r"dilation must be an int or a pair"),
    ("stride bool", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"stride": True}), TypeError, r"stride .*bool"),
    ("padding float pair", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"padding": (1.0, 1)}), TypeError,
     r"padding must be an int or a pair"),
    # empty outputs
    ("kernel bigger than input", lambda: ((t(1, 8, 4, 4), t(4, 8, 5, 5)), {}), ValueError,
     r"output would be empty.*dilated kernel 5x5"),
    ("kernel bigger than padded input", lambda: ((t(1, 8, 2, 6), t(4, 8, 5, 5)), {"padding": 1}), ValueError,
     r"output would be empty"),
    ("dilated kernel bigger than input", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"dilation": 3}), ValueError,
     r"output would be empty.*dilated kernel 7x7"),
    ("empty width", lambda: ((t(1, 8, 5, 0), t(4, 8, 1, 1)), {}), ValueError, r"output would be empty"),
    # fused activation
    ("activation unknown", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"activation": "gelu"}), ValueError,
     r"activation must be None or one of \('relu',\), got 'gelu'; apply any other activation to the result"),
    ("activation not a str", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"activation": True}), ValueError,
     r"activation must be None or one of"),
    # algorithms
    ("unknown algorithm", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"algorithm": "winograd"}), ValueError,
     r"unknown algorithm 'winograd'.*implicit_gemm"),
    ("gemm_1x1 on 3x3", lambda: ((t(1, 8, 5, 5), t(4, 8, 3, 3)), {"algorithm": "gemm_1x1"}), ValueError,
     r"'gemm_1x1' cannot run .*only 1x1.*algorithm='auto'"),
    ("gemm_1x1 on padded 1x1", lambda: ((t(1, 8, 5, 5), t(8, 8, 1, 1)), {"algorithm": "gemm_1x1", "padding": 1}),
     ValueError, r"cannot run"),
    ("tma with stride 2", lambda: ((t(1, 8, 9, 9).contiguous(memory_format=torch.channels_last), t(8, 8, 3, 3)),
                                   {"algorithm": "implicit_gemm_tma", "stride": 2}),
     ValueError, r"'implicit_gemm_tma' cannot run" + (".*stride" if DEVICE == "cpu" else "")),
    ("tma with fp64", lambda: ((t(1, 8, 5, 5, dtype=torch.float64), t(8, 8, 3, 3, dtype=torch.float64)),
                               {"algorithm": "implicit_gemm_tma"}),
     ValueError, r"cannot run.*float64"),
]  # fmt: skip


@pytest.mark.parametrize("build, exc, match", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_arguments(build, exc, match):
    args, kwargs = build()
    with pytest.raises(exc, match=match) as info:
        convgemm.conv2d(*args, **kwargs)
    assert type(info.value) in (TypeError, ValueError)


@pytest.mark.parametrize("build, exc, match", [b[1:] for b in BAD[:12]], ids=[b[0] for b in BAD[:12]])
def test_explain_refuses_the_same(build, exc, match):
    args, kwargs = build()
    if not isinstance(args[0], torch.Tensor):
        pytest.skip("explain() needs a tensor input to look at its rank")
    with pytest.raises(exc, match=match):
        convgemm.explain(*args, **kwargs)


@pytest.mark.parametrize("build, exc, match", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_torch_refuses_too(build, exc, match):
    """The same arguments are invalid for torch.nn.functional.conv2d (convgemm is not stricter)."""
    args, kwargs = build()
    if "algorithm" in kwargs:
        pytest.skip("convgemm-only argument")
    if any(isinstance(a, torch.Tensor) and a.device.type == "meta" for a in args):
        pytest.skip("torch dispatches a CPU/meta mix to the meta kernel instead of refusing it")
    if any(isinstance(a, torch.Tensor) and a.dtype in (torch.complex64,) for a in args):
        pytest.skip("torch convolves complex tensors; convgemm does not")
    if any(
        isinstance(a, torch.Tensor) and a.dtype in (torch.int32, torch.int64, torch.uint8, torch.bool) for a in args
    ):
        pytest.skip("torch's refusal of integer convolutions is backend-dependent")
    with pytest.raises((RuntimeError, TypeError, ValueError, NotImplementedError)):
        torch.nn.functional.conv2d(*args, **kwargs)


# (bad spelling, the valid value it compares equal to) -- Python: 2.0 == 2, True == 1, hash alike
ALIASES = [
    ("groups float", {"groups": 2.0}, {"groups": 2}, r"groups must be an int, got 2.0"),
    ("groups bool", {"groups": True}, {"groups": 1}, r"groups must be an int, got True"),
    ("stride bool", {"stride": True}, {"stride": 1}, r"stride must be an int or a pair of ints, got a bool"),
    ("padding float pair", {"padding": (1.0, 1)}, {"padding": (1, 1)}, r"padding must be an int or a pair"),
    ("dilation float", {"dilation": 1.0}, {"dilation": 1}, r"dilation must be an int or a pair"),
]


@pytest.mark.parametrize("bad, good, match", [a[1:] for a in ALIASES], ids=[a[0] for a in ALIASES])
def test_warm_call_still_validates(bad, good, match, monkeypatch):
    """A valid call first (conv2d may remember a plan for its arguments), then the same call with an
    invalid spelling of an equal value: refused exactly as on a cold call, before any kernel."""
    x = t(1, 8, 6, 6).contiguous(memory_format=torch.channels_last)
    groups = good.get("groups", 1)
    w = t(8, 8 // groups, 3, 3)
    monkeypatch.setattr(fprop, "_run_kernel", _REAL_LAUNCH)
    y = convgemm.conv2d(x, w, None, **{"padding": 1, **good})
    assert y.shape == (1, 8, 6, 6)
    monkeypatch.setattr(fprop, "_run_kernel", _kernel_reached)
    with pytest.raises(TypeError, match=match):
        convgemm.conv2d(x, w, None, **{"padding": 1, **bad})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device next to the CPU")
def test_mixed_cpu_and_cuda():
    with pytest.raises(ValueError, match=r"one device"):
        convgemm.conv2d(t(1, 8, 5, 5, device="cpu"), t(4, 8, 3, 3, device="cuda"))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("channels_last", [False, True])
def test_empty_batch_returns_empty_output(bias, channels_last):
    """N = 0 gives an empty [0, K, P, Q] output, as PyTorch does, and launches nothing."""
    x = t(0, 8, 7, 6)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    w = t(4, 8, 3, 2)
    b = t(4) if bias else None
    y = convgemm.conv2d(x, w, b, stride=(2, 1), padding=1)
    ref = torch.nn.functional.conv2d(x.cpu(), w.cpu(), None if b is None else b.cpu(), stride=(2, 1), padding=1)
    assert y.shape == ref.shape == (0, 4, 4, 7)
    assert y.dtype == x.dtype and y.device == x.device


def test_empty_batch_still_validates():
    with pytest.raises(ValueError, match="input has 8 channels"):
        convgemm.conv2d(t(0, 8, 5, 5), t(4, 2, 3, 3))


def test_errors_doc_is_current(monkeypatch):
    """docs/errors.md is generated from BAD: regenerate it (tools/errors_table.py) when a message changes."""
    if DEVICE != "cpu":
        pytest.skip("docs/errors.md is generated under the interpreter (a few messages name the device)")
    import importlib.util
    import os

    monkeypatch.setattr(fprop, "_run_kernel", _REAL_LAUNCH)  # the generator never reaches a kernel anyway
    root = os.path.join(os.path.dirname(__file__), "..")
    spec = importlib.util.spec_from_file_location("errors_table", os.path.join(root, "tools", "errors_table.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with open(os.path.join(root, "docs", "errors.md")) as f:
        assert f.read() == mod.render(), "docs/errors.md is stale: run python tools/errors_table.py"
