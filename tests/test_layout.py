"""Layouts: the NHWC view of the input and the KRSC weight, and conv2d after weight updates."""

import pytest
import torch
from conftest import DEVICE
from reference import assert_close, conv2d_ref

import convgemm
from convgemm.conv.layout import _transpose, as_nhwc, channel_pad, krsc_weight, pack_weight, to_format


@pytest.fixture(autouse=True)
def _no_tuning(monkeypatch):
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")


# ---------------------------------------------------------------- as_nhwc
def test_as_nhwc_channels_last_is_not_copied():
    x = torch.randn(2, 8, 5, 6, device=DEVICE).contiguous(memory_format=torch.channels_last)
    assert as_nhwc(x) is x


def test_as_nhwc_channels_last_view_is_not_copied():
    big = torch.randn(3, 10, 7, 9, device=DEVICE).contiguous(memory_format=torch.channels_last)
    x = big[1:, 2:8, 1:6, ::2]
    y = as_nhwc(x)
    assert y is x
    assert y.stride(1) == 1


def test_as_nhwc_single_channel_is_not_copied():
    x = torch.randn(2, 1, 5, 6, device=DEVICE)
    assert x.is_contiguous()
    assert as_nhwc(x) is x


@pytest.mark.parametrize("shape", [(2, 8, 5, 6), (1, 3, 4, 4), (3, 2, 1, 7)])
def test_as_nhwc_copies_nchw(shape):
    x = torch.randn(*shape, device=DEVICE)
    y = as_nhwc(x)
    assert y is not x
    assert y.data_ptr() != x.data_ptr()
    assert y.stride(1) == 1 and y.is_contiguous(memory_format=torch.channels_last)
    assert y.shape == x.shape
    assert torch.equal(y, x)


def test_as_nhwc_copies_nchw_view():
    x = torch.randn(2, 8, 9, 9, device=DEVICE)[:, 1:7, ::2, 1:]
    y = as_nhwc(x)
    assert y.stride(1) == 1 and torch.equal(y, x)


# the tiled transpose: several tiles along both C and H*W, ragged edges, 2/4/8-byte elements
@pytest.mark.parametrize("shape", [(2, 70, 9, 11), (1, 3, 37, 41), (3, 130, 2, 3), (1, 65, 1, 1)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64], ids=str)
def test_transpose_both_ways(shape, dtype):
    x = torch.randn(*shape, device=DEVICE).to(dtype)
    y = _transpose(x, to_nhwc=True)
    assert y.is_contiguous(memory_format=torch.channels_last) and torch.equal(y, x)
    z = _transpose(y, to_nhwc=False)
    assert z.is_contiguous() and torch.equal(z, x)


def test_transpose_tile_for_small_planes():
    """NHWC -> NCHW of 129-256-pixel planes with 256+ channels takes one 64 x 256 tile of a plane
    on 8 warps (faster on the H100, session 52); other shapes and the other direction keep 64 x 64
    on 4 warps. Both tiles give PyTorch's transpose."""
    from convgemm.conv.layout import _transpose_spec

    def tile(c, hw, to_nhwc):
        grid, k, warps = _transpose_spec(2, c, hw, to_nhwc)
        return k["BLOCK_C"], k["BLOCK_HW"], warps, grid

    assert tile(1024, 196, False) == (64, 256, 8, (1, 16, 2))
    assert tile(256, 196, False)[:3] == (64, 256, 8)
    for c, hw, to_nhwc in ((1024, 196, True), (192, 196, False), (512, 49, False), (512, 784, False)):
        assert tile(c, hw, to_nhwc)[:3] == (64, 64, 4), (c, hw, to_nhwc)
    x = torch.randn(2, 256, 14, 14, device=DEVICE).to(torch.float16).contiguous(memory_format=torch.channels_last)
    z = _transpose(x, to_nhwc=False)
    assert z.is_contiguous() and torch.equal(z, x)


def test_transpose_tile_for_filter_planes():
    """Planes of at most 32 pixels (3x3 and 5x5 filters packed to KRSC) take a tile of the
    plane's size rounded up to a power of two, at least 16, and 4096 elements, so a 9-tap plane
    fills 9 of 16 lanes instead of 9 of 64; the weight packed through it is PyTorch's KRSC."""
    from convgemm.conv.layout import _transpose_spec, pack_weight

    def tile(c, hw):
        grid, k, warps = _transpose_spec(512, c, hw, True)
        return k["BLOCK_C"], k["BLOCK_HW"], warps, grid

    assert tile(512, 9) == (256, 16, 4, (1, 2, 512))
    assert tile(128, 25) == (128, 32, 4, (1, 1, 512))
    assert tile(3, 9)[:2] == (16, 16)  # a first layer's 3 channels: the smallest channel tile
    assert tile(512, 49)[:3] == (64, 64, 4)  # 7x7 planes keep the 64 x 64 tile
    w = torch.randn(40, 300, 3, 3, device=DEVICE).to(torch.float16)
    got = pack_weight(w, 300)
    assert torch.equal(got, w.permute(0, 2, 3, 1).reshape(40, 9, 300))


def test_to_format():
    x = torch.randn(2, 5, 4, 3, device=DEVICE)
    assert to_format(x, torch.contiguous_format) is x
    cl = to_format(x, torch.channels_last)
    assert cl.is_contiguous(memory_format=torch.channels_last) and torch.equal(cl, x)
    back = to_format(cl, torch.contiguous_format)
    assert back.is_contiguous() and torch.equal(back, x)
    v = x[:, :, ::2]  # neither format: PyTorch's copy
    assert to_format(v, torch.channels_last).is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(to_format(v, torch.channels_last), v)


@pytest.mark.parametrize("algorithm", ["implicit_gemm", "small_k"])
def test_nchw_in_nchw_out(algorithm):
    """NCHW input and weight: the kernels write NHWC, and the result is transposed back to NCHW,
    first call and plan (repeat) call alike."""
    x = torch.randn(2, 6, 9, 10, device=DEVICE)
    w = torch.randn(20, 6, 3, 3, device=DEVICE)
    b = torch.randn(20, device=DEVICE)
    ref = conv2d_ref(x, w, b, padding=1)
    for _ in range(2):
        y = convgemm.conv2d(x, w, b, padding=1, algorithm=algorithm)
        assert y.is_contiguous() and not y.is_contiguous(memory_format=torch.channels_last)
        assert_close(y, ref, x.dtype)


# ---------------------------------------------------------------- pack_weight
@pytest.mark.parametrize(
    "k, cg, r, s, cp", [(4, 3, 3, 3, 16), (6, 16, 1, 1, 16), (5, 17, 2, 3, 32), (8, 1, 3, 3, 16), (24, 32, 3, 3, 32)]
)
def test_pack_weight(k, cg, r, s, cp):
    w = torch.randn(k, cg, r, s, device=DEVICE)
    p = pack_weight(w, cp)
    assert p.shape == (k, r * s, cp)
    assert p.dtype == w.dtype and p.is_contiguous()
    for kk in range(k):
        for i in range(r):
            for j in range(s):
                assert torch.equal(p[kk, i * s + j, :cg], w[kk, :, i, j])
    assert (p[:, :, cg:] == 0).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_pack_weight_unpadded_nchw_weight(dtype):
    """An NCHW-contiguous weight with no channel padding goes through the tiled transpose (one
    launch); the values and the dense KRSC layout are those of the permuted copy."""
    w = torch.randn(80, 64, 3, 3, device=DEVICE).to(dtype)
    p = pack_weight(w, 64)
    assert p.shape == (80, 9, 64) and p.dtype == dtype and p.is_contiguous()
    assert torch.equal(p, w.permute(0, 2, 3, 1).reshape(80, 9, 64))


def test_pack_weight_of_channels_last_and_sliced_weight():
    wbig = torch.randn(8, 6, 3, 5, device=DEVICE).contiguous(memory_format=torch.channels_last)
    w = wbig[::2, :, :, 1:4]
    p = pack_weight(w, 16)
    assert torch.equal(p[:, :, :6], w.permute(0, 2, 3, 1).reshape(4, 9, 6))
    assert (p[:, :, 6:] == 0).all()


@pytest.mark.parametrize("cg, bk, want", [(1, 16, 16), (16, 16, 16), (17, 16, 32), (3, 32, 32), (64, 32, 64)])
def test_channel_pad(cg, bk, want):
    assert channel_pad(cg, bk) == want


# ---------------------------------------------------------------- the KRSC weight
def test_krsc_weight_is_a_view_of_a_channels_last_weight():
    w = torch.randn(8, 16, 3, 3, device=DEVICE).contiguous(memory_format=torch.channels_last)
    v = krsc_weight(w, 16)
    assert v.data_ptr() == w.data_ptr() and v.shape == (8, 9, 16)
    assert torch.equal(v, pack_weight(w, 16))


@pytest.mark.parametrize(
    "make, c_pad",
    [
        (lambda: torch.randn(8, 16, 3, 3), 16),  # NCHW weight: packed
        (lambda: torch.randn(8, 12, 3, 3).contiguous(memory_format=torch.channels_last), 16),  # needs padding
        (lambda: torch.randn(8, 16, 3, 5)[..., 1:4].contiguous(memory_format=torch.channels_last)[:4], 16),
    ],
    ids=["nchw", "padded", "sliced"],
)
def test_krsc_weight_packs_when_it_must(make, c_pad):
    w = make().to(DEVICE)
    v = krsc_weight(w, c_pad)
    assert torch.equal(v, pack_weight(w, c_pad))
    assert v.is_contiguous()


# ---------------------------------------------------------------- conv2d after in-place updates
@pytest.mark.parametrize("algorithm", ["auto", "implicit_gemm", "implicit_gemm_tma", "gemm_1x1"])
def test_conv2d_sees_in_place_weight_update(algorithm):
    r = 1 if algorithm == "gemm_1x1" else 3
    pad = 0 if r == 1 else 1
    x = torch.randn(2, 8, 5, 6, device=DEVICE).contiguous(memory_format=torch.channels_last)
    w = torch.randn(8, 8, r, r, device=DEVICE)
    b = torch.randn(8, device=DEVICE)
    try:
        y1 = convgemm.conv2d(x, w, b, padding=pad, algorithm=algorithm)
    except ValueError as e:
        pytest.skip(str(e))  # a TMA algorithm on a GPU without TMA
    assert_close(y1, conv2d_ref(x, w, b, padding=pad), torch.float32, "before")
    w.add_(1)
    y2 = convgemm.conv2d(x, w, b, padding=pad, algorithm=algorithm)
    assert_close(y2, conv2d_ref(x, w, b, padding=pad), torch.float32, "after add_")
    assert not torch.allclose(y1, y2)
    with torch.no_grad():
        w[:4].mul_(-1)
    y3 = convgemm.conv2d(x, w, b, padding=pad, algorithm=algorithm)
    assert_close(y3, conv2d_ref(x, w, b, padding=pad), torch.float32, "after a view's mul_")


def test_conv2d_parameter_training_step():
    conv = torch.nn.Conv2d(4, 8, 3, padding=1).to(DEVICE)
    x = torch.randn(2, 4, 6, 6, device=DEVICE)
    opt = torch.optim.SGD(conv.parameters(), lr=0.1)
    outs = []
    for _ in range(3):
        with torch.no_grad():  # the Parameter itself: the same tensor object at every step
            y = convgemm.conv2d(x, conv.weight, conv.bias, padding=1)
        assert_close(y, conv2d_ref(x, conv.weight, conv.bias, padding=1), torch.float32)
        outs.append(y)
        opt.zero_grad()
        conv(x).square().mean().backward()
        opt.step()
    assert not torch.allclose(outs[0], outs[-1])


def test_conv2d_sees_update_through_data():
    x = torch.randn(1, 4, 5, 5, device=DEVICE)
    w = torch.randn(8, 4, 3, 3, device=DEVICE)
    convgemm.conv2d(x, w, padding=1)
    w.data.mul_(2)  # as EMA / weight-averaging code commonly does
    assert_close(convgemm.conv2d(x, w, padding=1), conv2d_ref(x, w, padding=1), torch.float32)


@pytest.mark.parametrize(
    "k,cg,r,s,g", [(8, 3, 3, 3, 1), (12, 2, 3, 5, 3), (6, 6, 1, 1, 1), (4, 1, 7, 7, 4), (16, 4, 2, 3, 2)]
)
@pytest.mark.parametrize("channels_last", [True, False])
@pytest.mark.parametrize("weight_layout", ["contiguous", "channels_last", "sliced"])
def test_dgrad_weight_transform_is_flip_then_swap(k, cg, r, s, g, channels_last, weight_layout):
    """dgrad's weight [C, K/g, R, S] (taps flipped, channel axes swapped per group), made in one
    gather, equals flip-then-swap exactly, in the requested memory format."""
    from convgemm.functional import _flip_swap, _flipper, _swap_channels

    def make():
        w = torch.randn(k, cg + (weight_layout == "sliced"), r, s, dtype=torch.float64, device=DEVICE)
        if weight_layout == "sliced":
            return w[:, 1:]
        if weight_layout == "channels_last":
            return w.contiguous(memory_format=torch.channels_last)
        return w

    w = make()
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    want = _swap_channels(w.flip(2, 3), g).contiguous(memory_format=fmt)
    got = _flip_swap(w, g, channels_last)
    assert got.shape == want.shape and torch.equal(got, want)
    assert got.is_contiguous(memory_format=fmt)
    # the training replay's form: made once for the layout, applied to new weights of it, with
    # _flip_swap's strides (the forward plan it runs is keyed on them)
    flip = _flipper(w, g, channels_last)
    for v in (w, make()):
        want = _flip_swap(v, g, channels_last)
        got = flip(v)
        assert got.shape == want.shape and got.stride() == want.stride() and torch.equal(got, want)
