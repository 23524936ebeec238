"""conv1d / conv_transpose1d and the 1-D modules against float64 torch on the CPU."""

import pytest
import torch
import torch.nn.functional as F
from conftest import DEVICE
from reference import assert_close
from torch import nn

import convgemm

pytestmark = pytest.mark.usefixtures("no_tf32")

# N, C, L, K, R, stride, padding, dilation, groups
CASES = [
    (2, 3, 17, 5, 3, 1, 1, 1, 1),
    (1, 1, 60, 8, 10, 5, 0, 1, 1),  # wav2vec2's first layer, small
    (2, 16, 20, 16, 4, 1, 3, 1, 16),  # depthwise causal (padding R-1)
    (3, 6, 15, 4, 3, 2, 2, 2, 2),  # strided, dilated, grouped
    (2, 8, 9, 8, 2, 2, 0, 1, 1),
    (1, 4, 11, 6, 5, 1, "same", 2, 1),
]
ids = [str(c) for c in CASES]


def _tensors(case, dtype, channels_last=False):
    n, c, length, k, r, stride, padding, dilation, groups = case
    if channels_last:  # channel stride 1: [N, L, C] transposed
        x = torch.randn(n, length, c, device=DEVICE).to(dtype).transpose(1, 2)
    else:
        x = torch.randn(n, c, length, device=DEVICE).to(dtype)
    w = torch.randn(k, c // groups, r, device=DEVICE).to(dtype)
    b = torch.randn(k, device=DEVICE).to(dtype)
    return x, w, b, dict(stride=stride, padding=padding, dilation=dilation, groups=groups)


def _ref(x, w, b, kw):
    return F.conv1d(x.double().cpu(), w.double().cpu(), None if b is None else b.double().cpu(), **kw)


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("case", CASES, ids=ids)
def test_conv1d_matches_torch(case, dtype, channels_last):
    x, w, b, kw = _tensors(case, dtype, channels_last)
    y = convgemm.conv1d(x, w, b, **kw)
    ref = _ref(x, w, b, kw)
    assert y.shape == ref.shape and y.dtype == dtype
    assert_close(y, ref, dtype, f"conv1d {case}")


def test_conv1d_unbatched_and_tuple_arguments():
    x, w, b, _ = _tensors((1, 4, 12, 6, 3, 1, 0, 1, 1), torch.float32)
    y = convgemm.conv1d(x[0], w, b, stride=(2,), padding=(1,), dilation=(1,))
    assert y.shape == (6, 6)
    assert_close(y, _ref(x[0], w, b, dict(stride=2, padding=1)), torch.float32, "unbatched")


@pytest.mark.parametrize("case", [CASES[2], CASES[3]], ids=["depthwise", "grouped-strided"])
def test_conv1d_gradients(case):
    x, w, b, kw = _tensors(case, torch.float32)
    xs, ws, bs = (t.clone().requires_grad_() for t in (x, w, b))
    y = convgemm.conv1d(xs, ws, bs, **kw)
    dy = torch.randn_like(y)
    y.backward(dy)
    xd, wd, bd = (t.detach().double().cpu().requires_grad_() for t in (x, w, b))
    F.conv1d(xd, wd, bd, **kw).backward(dy.double().cpu())
    for name, got, want in (("x", xs.grad, xd.grad), ("w", ws.grad, wd.grad), ("b", bs.grad, bd.grad)):
        assert_close(got, want, torch.float32, f"grad {name} {case}")


@pytest.mark.parametrize(
    "n,c_in,length,c_out,r,stride,padding,output_padding,groups,dilation",
    [(2, 4, 7, 6, 3, 2, 1, 1, 1, 1), (1, 6, 9, 4, 4, 3, 2, 2, 2, 1), (2, 3, 5, 5, 3, 1, 0, 0, 1, 2)],
)
def test_conv_transpose1d_matches_torch(n, c_in, length, c_out, r, stride, padding, output_padding, groups, dilation):
    x = torch.randn(n, c_in, length, device=DEVICE)
    w = torch.randn(c_in, c_out // groups, r, device=DEVICE)
    b = torch.randn(c_out, device=DEVICE)
    y = convgemm.conv_transpose1d(x, w, b, stride, padding, output_padding, groups, dilation)
    ref = F.conv_transpose1d(
        x.double().cpu(), w.double().cpu(), b.double().cpu(), stride, padding, output_padding, groups, dilation
    )
    assert y.shape == ref.shape
    assert_close(y, ref, torch.float32, "conv_transpose1d")


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda: convgemm.conv1d(torch.randn(2, 3, 4, 5), torch.randn(4, 3, 3)), ValueError, r"input must be 3-D"),
        (lambda: convgemm.conv1d(torch.randn(2, 3, 8), torch.randn(4, 3, 3, 1)), ValueError, r"weight must be 3-D"),
        (
            lambda: convgemm.conv1d(torch.randn(2, 3, 8), torch.randn(4, 3, 3), stride=(1, 1)),
            TypeError,
            r"stride must be an int or a 1-tuple",
        ),  # fmt: skip
        (
            lambda: convgemm.conv1d(torch.randn(2, 3, 8), torch.randn(4, 3, 3), padding=True),
            TypeError,
            r"padding must be an int or a 1-tuple of ints, got a bool",
        ),  # fmt: skip
        (lambda: convgemm.conv1d("x", torch.randn(4, 3, 3)), TypeError, r"input must be a torch.Tensor"),
        (
            lambda: convgemm.conv_transpose1d(torch.randn(2, 3, 8), torch.randn(3, 4, 3), padding="same"),
            ValueError,
            r"padding must be an int or a 1-tuple",
        ),  # fmt: skip
    ],
)
def test_conv1d_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv1d_module_and_patch(padding_mode):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv1d(4, 8, 3, padding=1, padding_mode=padding_mode),
        nn.ReLU(),
        nn.ConvTranspose1d(8, 4, 4, stride=2, padding=1),
    ).to(DEVICE)
    x = torch.randn(2, 4, 10, device=DEVICE)
    with torch.no_grad():
        want = model.double().cpu()(x.double().cpu())
    model.float().to(DEVICE)
    convgemm.patch(model)
    assert type(model[0]) is convgemm.nn.Conv1d and type(model[2]) is convgemm.nn.ConvTranspose1d
    with torch.no_grad():
        assert_close(model(x), want, torch.float32, f"patched 1-D model, {padding_mode}")
    convgemm.unpatch(model)
    assert type(model[0]) is nn.Conv1d and type(model[2]) is nn.ConvTranspose1d


def test_conv1d_module_caches_a_channels_inner_weight():
    """The packed copy of a 1-D weight is stored [K, R, C], which the 2-D kernels read in place."""
    from convgemm.conv.layout import krsc_weight

    m = convgemm.patch(nn.Conv1d(16, 8, 3, padding=1)).to(DEVICE)
    x = torch.randn(2, 16, 10, device=DEVICE)
    with torch.no_grad():
        y = m(x)
    w = m.__dict__["_convgemm_packed"][1]
    assert torch.equal(w, m.weight.detach()) and w.stride(1) == 1
    assert krsc_weight(w.unsqueeze(2), 16).data_ptr() == w.data_ptr()  # no copy
    assert_close(y, F.conv1d(x.double().cpu(), m.weight.double().cpu(), m.bias.double().cpu(), padding=1),
                 torch.float32, "cached 1-D weight")  # fmt: skip
