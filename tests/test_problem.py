"""ConvProblem: output sizes against PyTorch, the GEMM view, the tuning key and the output layout."""

import itertools
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from convgemm.problem import ConvProblem, GemmShape, _bucket, output_memory_format


def _tensors(n, c, h, w, k, r, s, groups=1, dtype=torch.float32):
    x = torch.randn(n, c, h, w, dtype=dtype)
    wt = torch.randn(k, c // groups, r, s, dtype=dtype)
    return x, wt


# ---------------------------------------------------------------- output size P x Q
# (H, W, R, S, stride, padding, dilation): every combination gives a non-empty output
_SPATIAL = [
    (h, w, r, s, st, pad, dil)
    for (h, w), (r, s), st, pad, dil in itertools.product(
        [(7, 9), (12, 5)],
        [(1, 1), (3, 3), (2, 4), (1, 3)],
        [1, 2, 3, (1, 2), (3, 1)],
        [0, 1, 2, (0, 3), (2, 0), "valid"],
        [1, 2, (2, 1)],
    )
]


def _torch_out(x, wt, **kw):
    return tuple(F.conv2d(x, wt, **kw).shape)


@pytest.mark.parametrize("h, w, r, s, stride, padding, dilation", _SPATIAL[::3])
def test_output_size_matches_torch(h, w, r, s, stride, padding, dilation):
    x, wt = _tensors(2, 3, h, w, 4, r, s)
    kw = dict(stride=stride, padding=padding, dilation=dilation)
    try:
        want = _torch_out(x, wt, **kw)
    except RuntimeError:
        # torch refuses (kernel larger than the padded input): so must convgemm
        with pytest.raises(ValueError, match="output would be empty"):
            ConvProblem.from_tensors(x, wt, **kw)
        return
    prob = ConvProblem.from_tensors(x, wt, **kw)
    assert prob.output_shape == want
    assert (prob.p, prob.q) == want[2:]


@pytest.mark.parametrize("h, w", [(7, 9), (8, 8), (1, 5)])
@pytest.mark.parametrize("r, s", [(1, 1), (3, 3), (2, 2), (4, 3), (1, 4), (5, 2)])
@pytest.mark.parametrize("dilation", [1, 2, (3, 1)])
def test_same_padding(h, w, r, s, dilation):
    """'same' keeps H x W; an even effective kernel pads one more at the bottom/right (left = total // 2)."""
    x, wt = _tensors(1, 2, h, w, 3, r, s)
    prob = ConvProblem.from_tensors(x, wt, padding="same", dilation=dilation)
    assert (prob.p, prob.q) == (h, w)
    assert prob.output_shape == _torch_out(x, wt, padding="same", dilation=dilation)

    dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
    th, tw = dh * (r - 1), dw * (s - 1)
    assert prob.pad_h == (th // 2, th - th // 2)
    assert prob.pad_w == (tw // 2, tw - tw // 2)
    # the split is PyTorch's: explicit asymmetric zero padding + 'valid' gives torch's 'same' result
    same = F.conv2d(x.double(), wt.double(), padding="same", dilation=dilation)
    padded = F.pad(x.double(), (prob.pad_w[0], prob.pad_w[1], prob.pad_h[0], prob.pad_h[1]))
    assert torch.allclose(F.conv2d(padded, wt.double(), dilation=dilation), same, rtol=0, atol=1e-12)


def test_same_padding_even_kernel_is_asymmetric():
    x, wt = _tensors(1, 2, 8, 8, 2, 4, 2)
    prob = ConvProblem.from_tensors(x, wt, padding="same")
    assert prob.pad_h == (1, 2)  # total 3: 1 on top, 2 at the bottom
    assert prob.pad_w == (0, 1)  # total 1: 0 on the left, 1 on the right


def test_valid_padding_is_zero():
    x, wt = _tensors(1, 2, 8, 9, 2, 3, 4)
    prob = ConvProblem.from_tensors(x, wt, padding="valid")
    assert prob.pad_h == (0, 0) and prob.pad_w == (0, 0)
    assert prob.output_shape == (1, 2, 6, 6)


def test_pair_and_int_arguments_agree():
    x, wt = _tensors(1, 2, 9, 9, 2, 3, 3)
    a = ConvProblem.from_tensors(x, wt, stride=2, padding=1, dilation=2)
    b = ConvProblem.from_tensors(x, wt, stride=(2, 2), padding=[1, 1], dilation=(2,))
    assert a == b
    c = ConvProblem.from_tensors(x, wt, stride=(1, 2), padding=(2, 0))
    assert (c.stride, c.pad_h, c.pad_w) == ((1, 2), (2, 2), (0, 0))


# ---------------------------------------------------------------- the GEMM view
@pytest.mark.parametrize(
    "n, c, h, w, k, r, s, stride, padding, dilation, groups",
    [
        (2, 8, 9, 7, 12, 3, 2, 2, 1, 1, 4),
        (3, 5, 6, 6, 7, 1, 1, 1, 0, 1, 1),
        (1, 16, 10, 11, 32, 3, 3, 1, 2, 2, 16),
        (4, 6, 12, 9, 4, 5, 3, (2, 1), (2, 1), 1, 2),
    ],
)
def test_as_matmul_problem(n, c, h, w, k, r, s, stride, padding, dilation, groups):
    x, wt = _tensors(n, c, h, w, k, r, s, groups)
    prob = ConvProblem.from_tensors(x, wt, stride=stride, padding=padding, dilation=dilation, groups=groups)
    _, _, p, q = _torch_out(x, wt, stride=stride, padding=padding, dilation=dilation, groups=groups)
    g = prob.as_matmul_problem()
    assert g == GemmShape(m=n * p * q, n=k // groups, k=r * s * c // groups, batch=groups)
    assert prob.flops == 2 * n * p * q * (k // groups) * r * s * (c // groups) * groups
    assert (prob.cg, prob.kg) == (c // groups, k // groups)


def test_depthwise_and_1x1_flags():
    x, wt = _tensors(1, 8, 5, 5, 8, 3, 3, groups=8)
    assert ConvProblem.from_tensors(x, wt, padding=1, groups=8).is_depthwise
    assert not ConvProblem.from_tensors(x, torch.randn(8, 4, 3, 3), padding=1, groups=2).is_depthwise
    x, wt = _tensors(1, 8, 5, 5, 4, 1, 1)
    assert ConvProblem.from_tensors(x, wt).is_1x1
    assert not ConvProblem.from_tensors(x, wt, padding=1).is_1x1  # padded 1x1 is not a plain GEMM


# ---------------------------------------------------------------- the tuning key
def _prob(**kw):
    base = dict(n=8, c=16, h=14, w=14, k=32, r=3, s=3, pad_h=(1, 1), pad_w=(1, 1))
    return ConvProblem(**{**base, **kw})


@pytest.mark.parametrize("v, want", [(0, 1), (1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (33, 64), (64, 64), (65, 128)])
def test_bucket(v, want):
    assert _bucket(v) == want


def test_key_buckets_batch_and_spatial_sizes():
    assert _prob(n=33).key() == _prob(n=64).key()
    assert _prob(n=33).key() != _prob(n=65).key()
    assert _prob(h=9, w=20).key() == _prob(h=16, w=32).key()
    assert _prob(h=16).key() != _prob(h=17).key()
    assert _prob(w=16).key() != _prob(w=17).key()


@pytest.mark.parametrize(
    "change",
    [
        dict(c=17),
        dict(k=33),
        dict(r=1, s=1, pad_h=(0, 0), pad_w=(0, 0)),
        dict(s=5),
        dict(stride=(2, 2)),
        dict(pad_h=(1, 2)),
        dict(dilation=(2, 1)),
        dict(groups=2),
        dict(dtype=torch.float16),
        dict(has_bias=True),
        dict(channels_last_out=False),
        dict(precision="tf32"),
        dict(tma_ok=True),
        dict(input_tma_ok=True),
        dict(input_tma_rows_ok=True),
        dict(input_dense=True),
        dict(input_phases_ok=True),
    ],
    ids=lambda d: ",".join(d),
)
def test_key_distinguishes_layer_parameters(change):
    """Everything except N/H/W is exact: N=33 and N=64 share a key, but a different C does not."""
    assert _prob(n=33).key() == _prob(n=64).key()
    assert _prob(n=33, **change).key() != _prob(n=64).key()


def test_key_from_tensors():
    x1, w1 = _tensors(33, 4, 6, 6, 8, 3, 3)
    x2, w2 = _tensors(64, 4, 8, 5, 8, 3, 3)
    x3, w3 = _tensors(64, 6, 8, 5, 8, 3, 3)
    k1 = ConvProblem.from_tensors(x1, w1, padding=1).key()
    assert k1 == ConvProblem.from_tensors(x2, w2, padding=1).key()
    assert k1 != ConvProblem.from_tensors(x3, w3, padding=1).key()
    assert k1 != ConvProblem.from_tensors(x1, w1, padding=0).key()
    hash(k1)  # usable as a dict key


# ---------------------------------------------------------------- output memory format
CL, NCHW = torch.channels_last, torch.contiguous_format


@pytest.mark.parametrize(
    "x_fmt, w_fmt, dtype, want",
    [
        (NCHW, NCHW, torch.float32, NCHW),
        (CL, NCHW, torch.float32, CL),
        (NCHW, CL, torch.float32, CL),
        (CL, CL, torch.float32, CL),
        (CL, NCHW, torch.float16, CL),
        (NCHW, CL, torch.bfloat16, CL),
        (NCHW, NCHW, torch.float16, NCHW),
        (CL, CL, torch.float64, NCHW),
        (CL, NCHW, torch.float64, NCHW),
        (NCHW, CL, torch.float64, NCHW),
    ],
)
def test_output_memory_format(x_fmt, w_fmt, dtype, want):
    x, wt = _tensors(2, 4, 5, 6, 8, 3, 3, dtype=dtype)
    x, wt = x.contiguous(memory_format=x_fmt), wt.contiguous(memory_format=w_fmt)
    assert output_memory_format(x, wt) == want
    assert ConvProblem.from_tensors(x, wt).channels_last_out == (want == CL)


def test_output_memory_format_of_sliced_channels_last_view():
    """A crop of a channels_last tensor still suggests channels_last."""
    big = torch.randn(2, 8, 10, 10).contiguous(memory_format=CL)
    x = big[:, :, 1:9, 2:8]
    assert not x.is_contiguous() and not x.is_contiguous(memory_format=CL)
    assert output_memory_format(x, torch.randn(4, 8, 3, 3)) == CL
    nchw_crop = torch.randn(2, 8, 10, 10)[:, :, 1:9, 2:8]
    assert output_memory_format(nchw_crop, torch.randn(4, 8, 3, 3)) == NCHW


def test_channels_last_rule_matches_torch():
    """``_suggest_channels_last`` (written out to keep sympy off a first call) agrees with
    PyTorch's own rule on permuted, sliced, expanded, size-1 and empty tensors."""
    from torch._prims_common import suggest_memory_format

    from convgemm.problem import _suggest_channels_last

    gen = torch.Generator().manual_seed(0)
    cases = []
    for _ in range(400):
        shape = [int(v) for v in torch.randint(0, 4, (4,), generator=gen)]
        base = torch.empty(shape)
        perm = [int(v) for v in torch.randperm(4, generator=gen)]
        t = base.permute(perm).contiguous().permute([perm.index(i) for i in range(4)])
        cases.append(t)
        if min(shape) > 0:
            cases.append(t[:, :, ::2, 1:])  # a strided crop
            cases.append(t[:, :1].expand(shape))  # stride 0 along C
    cases += [
        torch.empty(3, 1, 1, 1),
        torch.empty(1, 5, 1, 4).transpose(1, 3),
        torch.empty(2, 8, 10, 10).contiguous(memory_format=CL)[:, :, 1:9, 2:8],
        torch.empty(1, 1, 5, 5).contiguous(memory_format=CL),
        torch.empty(2, 1, 4, 5).contiguous(memory_format=CL).expand(2, 3, 4, 5),  # stride 0 along C
    ]
    for t in cases:
        want = suggest_memory_format(t) == CL
        assert _suggest_channels_last(t) == want, (tuple(t.shape), t.stride())


def test_precision_follows_cudnn_tf32_flag():
    x, wt = _tensors(1, 2, 5, 5, 2, 3, 3)
    old = torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = True
        assert ConvProblem.from_tensors(x, wt).precision == "tf32"
        assert ConvProblem.from_tensors(x.half(), wt.half()).precision == "ieee"
        torch.backends.cudnn.allow_tf32 = False
        # strict fp32: 3xTF32 unless CONVGEMM_FP32_PRECISION=ieee (read at import)
        want = (os.environ.get("CONVGEMM_FP32_PRECISION") or "tf32x3").strip().lower()
        assert ConvProblem.from_tensors(x, wt).precision == want
    finally:
        torch.backends.cudnn.allow_tf32 = old


@pytest.mark.parametrize("value, want", [("ieee", "ieee"), ("TF32X3", "tf32x3"), ("", "tf32x3"), ("fp32", None)])
def test_fp32_precision_variable(value, want):
    """CONVGEMM_FP32_PRECISION picks the strict-fp32 dot; another value is refused at import."""
    code = "import convgemm._runtime as r; print(r.fp32_precision(False), r.fp32_precision(True))"
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    env = {**os.environ, "CONVGEMM_FP32_PRECISION": value, "PYTHONPATH": src}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if want is None:
        assert res.returncode != 0
        assert f"CONVGEMM_FP32_PRECISION={value.strip().lower()!r}: use 'tf32x3' (the default) or 'ieee'" in res.stderr
    else:
        assert res.returncode == 0, res.stderr
        assert res.stdout.split() == [want, "tf32"]


def test_min_bytes():
    prob = _prob(dtype=torch.float16, has_bias=True)
    elems = 8 * 16 * 14 * 14 + 32 * 16 * 9 + 8 * 32 * 14 * 14 + 32
    assert prob.min_bytes() == 2 * elems


def test_more_than_2_31_pixels_is_refused_clearly():
    # meta tensors: the shapes alone, no memory
    x = torch.empty(2, 1, 32768, 32769, device="meta")
    w = torch.empty(4, 1, 1, 1, device="meta")
    with pytest.raises(ValueError, match=r"pixels .* reach 2\*\*31.*split the batch"):
        ConvProblem.from_tensors(x, w, None)
    ConvProblem.from_tensors(x[:1], w, None)  # one image of 1.07e9 pixels is fine


def test_tf32x3_conv2d_end_to_end():
    """The 3xTF32 path (the strict-fp32 default) through a whole conv2d (its own process: the variable is read at
    import), against float64 at the fp32 threshold, Inf kept. On a GPU the tensor cores round
    the TF32 parts; under the interpreter this checks the plumbing and the split."""
    code = (
        "import torch, convgemm, torch.nn.functional as F\n"
        "from convgemm._runtime import STRICT_FP32\n"
        "torch.backends.cudnn.allow_tf32 = False\n"
        f"dev = {('cpu' if os.environ.get('TRITON_INTERPRET', '0') not in ('', '0') else 'cuda')!r}\n"
        "g = torch.Generator().manual_seed(0)\n"
        "x = torch.randn(2, 8, 9, 9, generator=g).to(dev); w = torch.randn(16, 8, 3, 3, generator=g).to(dev)\n"
        "x[0, 0, 4, 4] = float('inf')\n"
        "y = convgemm.conv2d(x, w, padding=1).double().cpu()\n"
        "ref = F.conv2d(x.double().cpu(), w.double().cpu(), padding=1)\n"
        "fin = torch.isfinite(ref)\n"
        "assert torch.equal(torch.isfinite(y), fin) and torch.equal(y[~fin].isnan(), ref[~fin].isnan())\n"
        "err = ((y[fin] - ref[fin]).norm() / ref[fin].norm()).item()\n"
        "print(STRICT_FP32, err)\n"
        "assert err <= 1e-5, err\n"
    )
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    env = {**os.environ, "CONVGEMM_FP32_PRECISION": "tf32x3", "PYTHONPATH": src}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split()[0] == "tf32x3"
