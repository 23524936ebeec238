"""conv_transpose2d against float64 torch: forward, every output_padding, and gradients."""

import pytest
import torch
import torch.nn.functional as F
from conftest import DEVICE
from reference import assert_close

import convgemm

# (N, C_in, H, W, C_out, R, S, stride, padding, output_padding, dilation, groups, bias)
CASES = [
    (2, 4, 5, 6, 6, 3, 3, 1, 1, 0, 1, 1, True),
    (1, 6, 4, 5, 4, 3, 3, 2, 1, 0, 1, 1, True),
    (1, 6, 4, 5, 4, 3, 3, 2, 1, 1, 1, 1, False),  # every output_padding of stride 2
    (2, 4, 3, 4, 8, 4, 4, 3, 1, 0, 1, 2, True),
    (2, 4, 3, 4, 8, 4, 4, 3, 1, 1, 1, 2, False),
    (2, 4, 3, 4, 8, 4, 4, 3, 1, 2, 1, 2, True),  # ... and of stride 3
    (1, 5, 5, 4, 3, 3, 2, (2, 1), (0, 1), (1, 0), (2, 1), 1, True),
    (1, 8, 4, 4, 8, 3, 3, 2, 1, 1, 1, 8, True),  # depthwise
]


def _id(c):
    return "x".join(str(v).replace(" ", "") for v in c)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_conv_transpose2d(case):
    n, cin, h, w, cout, r, s, stride, padding, opad, dil, groups, has_bias = case
    kw = dict(stride=stride, padding=padding, output_padding=opad, groups=groups, dilation=dil)
    x = torch.randn(n, cin, h, w, device=DEVICE).to(memory_format=torch.channels_last)
    wt = torch.randn(cin, cout // groups, r, s, device=DEVICE)
    b = torch.randn(cout, device=DEVICE) if has_bias else None
    xs, ws = x.clone().requires_grad_(), wt.clone().requires_grad_()
    bs = b.clone().requires_grad_() if has_bias else None
    y = convgemm.conv_transpose2d(xs, ws, bs, **kw)
    xr, wr = x.double().cpu().requires_grad_(), wt.double().cpu().requires_grad_()
    br = b.double().cpu().requires_grad_() if has_bias else None
    yr = F.conv_transpose2d(xr, wr, br, **kw)
    assert_close(y, yr, torch.float32, "forward")
    dy = torch.randn_like(y)
    y.backward(dy)
    yr.backward(dy.double().cpu())
    assert_close(xs.grad, xr.grad, torch.float32, "input grad")
    assert_close(ws.grad, wr.grad, torch.float32, "weight grad")
    if has_bias:
        assert_close(bs.grad, br.grad, torch.float32, "bias grad")
    with torch.no_grad():  # the inference path, without the operator
        assert_close(convgemm.conv_transpose2d(x, wt, b, **kw), yr.detach(), torch.float32, "no_grad")


def test_conv_transpose2d_errors():
    x = torch.randn(1, 4, 5, 5, device=DEVICE)
    w = torch.randn(4, 2, 3, 3, device=DEVICE)
    with pytest.raises(ValueError, match="output_padding .* must be smaller than the stride"):
        convgemm.conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(ValueError, match="weight.shape\\[0\\] = 3 must equal the input's 4 channels"):
        convgemm.conv_transpose2d(x, torch.randn(3, 2, 3, 3, device=DEVICE))
    with pytest.raises(ValueError, match="no 'same'"):
        convgemm.conv_transpose2d(x, w, padding="same")
    with pytest.raises(ValueError, match="bias must be a tensor of shape \\[2\\]"):
        convgemm.conv_transpose2d(x, w, torch.randn(4, device=DEVICE))


def test_opcheck_conv_transpose2d():
    x = torch.randn(1, 4, 3, 4, device=DEVICE, requires_grad=True)
    w = torch.randn(4, 3, 3, 3, device=DEVICE, requires_grad=True)
    b = torch.randn(3, device=DEVICE, requires_grad=True)
    args = (x, w, b, [1, 3, 6, 8], [2, 2], [1, 1], [1, 1], 1)
    torch.library.opcheck(torch.ops.convgemm.conv_transpose2d.default, args)


def test_conv_transpose2d_compiled_calls_convgemm_directly(monkeypatch):
    """Inductor lowers conv_transpose2d to a direct call (``convgemm/_inductor.py``), with eager's
    result."""
    import torch._inductor.config
    from torch._inductor.utils import run_and_get_code

    import convgemm._inductor as ci

    monkeypatch.setattr(ci, "DEVICES", ("cuda", "cpu"))
    torch.manual_seed(0)
    x = torch.randn(2, 6, 5, 4, device=DEVICE).contiguous(memory_format=torch.channels_last)
    w = torch.randn(6, 2, 3, 3, device=DEVICE)
    b = torch.randn(6, device=DEVICE)

    def f(x, w, b):
        return convgemm.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=3)

    torch._dynamo.reset()
    with torch.no_grad(), torch._inductor.config.patch(fx_graph_cache=False):
        y, code = run_and_get_code(torch.compile(f, fullgraph=True), x, w, b)
    assert "extern_kernels.convgemm_conv_transpose2d(" in "\n".join(code)
    torch.testing.assert_close(y, f(x, w, b), rtol=0, atol=0)


@pytest.mark.parametrize(
    "rank, kw",
    [
        (2, dict(stride=1, padding=1, output_padding=1, dilation=2)),
        (2, dict(stride=(2, 1), padding=1, output_padding=(2, 0), dilation=(3, 1))),
        (1, dict(stride=1, padding=0, output_padding=2, dilation=3)),
        (3, dict(stride=1, padding=1, output_padding=1, dilation=2)),
    ],
    ids=["2d", "2d-s2-op2-d3", "1d", "3d"],
)
def test_output_padding_past_the_stride(rank, kw):
    """output_padding >= stride is allowed when the dilation is larger (PyTorch's rule): the last
    rows then read no input, and a forward convolution over the output has more positions than
    the input. convgemm refused these (a grad_output shape error) before session 39; forward and
    both gradients against float64."""
    fn = {1: convgemm.conv_transpose1d, 2: convgemm.conv_transpose2d, 3: convgemm.conv_transpose3d}[rank]
    ref_fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[rank]
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(2, 3, *[4] * rank, generator=g).to(DEVICE).requires_grad_()
    w = torch.randn(3, 2, *[3] * rank, generator=g).to(DEVICE).requires_grad_()
    b = torch.randn(2, generator=g).to(DEVICE).requires_grad_()
    y = fn(x, w, b, **kw)
    xd, wd, bd = (t.detach().double().cpu().requires_grad_() for t in (x, w, b))
    ref = ref_fn(xd, wd, bd, **kw)
    assert_close(y, ref, torch.float32, "forward")
    dy = torch.randn(ref.shape, generator=g, dtype=torch.float64)
    got = torch.autograd.grad(y, (x, w, b), dy.float().to(DEVICE))
    want = torch.autograd.grad(ref, (xd, wd, bd), dy)
    for name, a, e in zip(("dx", "dw", "db"), got, want, strict=True):
        assert_close(a, e, torch.float32, name)
