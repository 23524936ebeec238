"""convgemm.matmul.matmul, the plain GEMM built from the convolution's blocks, against float64 torch."""

import pytest
import torch
import triton
import triton.language as tl
from conftest import DEVICE
from reference import THRESHOLDS, rel_err

from convgemm.matmul import matmul
from convgemm.matmul.blocks import _tf32_parts, dot_acc

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}


@pytest.fixture(autouse=True)
def _strict_fp32():
    """fp32 is strict IEEE unless torch.backends.cuda.matmul.allow_tf32 says otherwise: pin it off."""
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = old


def rand(*shape, dtype):
    return torch.randn(*shape, device=DEVICE).to(dtype)


def col_major(rows, cols, dtype):
    """A [rows, cols] tensor stored column by column (a transposed contiguous tensor)."""
    return rand(cols, rows, dtype=dtype).t()


def ref_mm(a, b, bias=None):
    out = a.detach().double().cpu() @ b.detach().double().cpu()
    return out if bias is None else out + bias.detach().double().cpu()


def check(c, ref, dtype, what=""):
    assert tuple(c.shape) == tuple(ref.shape), what
    assert c.dtype == dtype, what
    assert c.is_contiguous(), what
    err = rel_err(c, ref)
    assert err <= THRESHOLDS[{v: k for k, v in DTYPES.items()}[dtype]], f"{what}: relative error {err:.2e}"


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("use_tma", [False, True, None], ids=["ptr", "tma", "auto"])
@pytest.mark.parametrize("name", list(DTYPES))
def test_odd_sizes(name, use_tma, bias):
    """M = 37 (not a tile multiple), K = 40, N = 24: strides 16-byte aligned, so TMA may be forced."""
    dtype = DTYPES[name]
    M, K, N = 37, 40, 24
    a = rand(M, K, dtype=dtype)
    # the TMA path reads B as [N, K] rows: b must be K-contiguous (column-major)
    b = col_major(K, N, dtype) if use_tma else rand(K, N, dtype=dtype)
    bv = rand(N, dtype=dtype) if bias else None
    if use_tma and dtype == torch.float64:  # the TMA path is for tensor-core dtypes
        with pytest.raises(ValueError, match="use_tma=True needs"):
            matmul(a, b, bv, use_tma=use_tma)
        return
    c = matmul(a, b, bv, use_tma=use_tma)
    check(c, ref_mm(a, b, bv), dtype, f"{name} use_tma={use_tma}")


@pytest.mark.parametrize("name", list(DTYPES))
def test_unaligned_sizes(name):
    """M, K, N odd (no 16-byte aligned strides): the auto choice must fall back to pointer loads."""
    dtype = DTYPES[name]
    a, b, bv = rand(33, 19, dtype=dtype), rand(19, 5, dtype=dtype), rand(5, dtype=dtype)
    check(matmul(a, b, bv), ref_mm(a, b, bv), dtype, name)
    check(matmul(a, b), ref_mm(a, b), dtype, name)


@pytest.mark.parametrize("use_tma", [False, None], ids=["ptr", "auto"])
@pytest.mark.parametrize("name", ["fp32", "fp16"])
def test_transposed_and_sliced_operands(name, use_tma):
    dtype = DTYPES[name]
    M, K, N = 21, 40, 24
    a = rand(K, M, dtype=dtype).t()  # non-contiguous, M-contiguous
    b = rand(K, N, dtype=dtype)
    assert not a.is_contiguous()
    check(matmul(a, b, use_tma=use_tma), ref_mm(a, b), dtype, "a transposed")
    bt = col_major(K, N, dtype)
    assert not bt.is_contiguous()
    check(matmul(a, bt, use_tma=use_tma), ref_mm(a, bt), dtype, "both transposed")
    big = rand(2 * M, K + 7, dtype=dtype)
    sliced = big[::2, 3 : 3 + K]  # row stride 2 * (K + 7), column stride 1
    check(matmul(sliced, b, use_tma=use_tma), ref_mm(sliced, b), dtype, "a sliced")
    bsl = rand(K, 3 * N, dtype=dtype)[:, ::3]  # column stride 3
    check(matmul(a, bsl, use_tma=use_tma), ref_mm(a, bsl), dtype, "b strided")


def test_transposed_a_with_tma():
    a = rand(37, 40, dtype=torch.float16)
    b = col_major(40, 24, torch.float16)
    bias = rand(24, dtype=torch.float16)
    check(matmul(a, b, bias, use_tma=True), ref_mm(a, b, bias), torch.float16, "tma")


@pytest.mark.parametrize("block", [(16, 16, 16), (32, 16, 32), (16, 32, 16)])
def test_block_sizes(block):
    """Several tiles along every dimension, and K not a multiple of BLOCK_K."""
    a, b, bias = rand(45, 50, dtype=torch.float32), rand(50, 37, dtype=torch.float32), rand(37, dtype=torch.float32)
    check(matmul(a, b, bias, block=block), ref_mm(a, b, bias), torch.float32, str(block))


def test_bias_is_added_per_column():
    """A large bias on a zero product shows the bias goes along N (columns), not M."""
    a = torch.zeros(6, 8, device=DEVICE)
    b = torch.zeros(8, 5, device=DEVICE)
    bias = torch.arange(5, dtype=torch.float32, device=DEVICE) * 100
    c = matmul(a, b, bias)
    assert torch.equal(c.cpu(), bias.cpu().expand(6, 5))


def test_strided_bias():
    """A sliced bias (stride 2) adds its own elements (it read neighbours' before session 39)."""
    a = torch.zeros(6, 8, device=DEVICE)
    b = torch.zeros(8, 5, device=DEVICE)
    bias = (torch.arange(10, dtype=torch.float32, device=DEVICE) * 100)[::2]
    assert torch.equal(matmul(a, b, bias).cpu(), bias.cpu().expand(6, 5))


def test_fp64_keeps_fp64_precision():
    """Sums exact in float64 but rounded away by any float32 step (inputs, products or accumulator)."""
    a = torch.tensor([[1 + 2**-40, 1.0]], dtype=torch.float64, device=DEVICE)
    b = torch.tensor([[1.0, 2.0], [1.0, 0.5]], dtype=torch.float64, device=DEVICE)
    for use_tma in (False, None):
        c = matmul(a, b.t().contiguous().t(), use_tma=use_tma)
        assert c.cpu().tolist() == [[2 + 2**-40, 2.5 + 2**-39]], use_tma


def test_empty_sizes():
    a, b, bias = rand(0, 8, dtype=torch.float32), rand(8, 5, dtype=torch.float32), rand(5, dtype=torch.float32)
    assert matmul(a, b, bias).shape == (0, 5)
    assert matmul(rand(4, 8, dtype=torch.float32), rand(8, 0, dtype=torch.float32)).shape == (4, 0)
    # K = 0: the empty sum is zero, plus the bias
    a0, b0 = rand(4, 0, dtype=torch.float32), rand(0, 5, dtype=torch.float32)
    assert torch.equal(matmul(a0, b0).cpu(), torch.zeros(4, 5))
    assert torch.equal(matmul(a0, b0, bias).cpu(), bias.cpu().expand(4, 5))


@pytest.mark.parametrize(
    "a_shape, b_shape, bias_shape, exc, match",
    [
        ((4, 8, 1), (8, 5), None, ValueError, r"must be 2-D, got \(4, 8, 1\) and \(8, 5\)"),
        ((4, 8), (8,), None, ValueError, r"must be 2-D"),
        ((8,), (8, 5), None, ValueError, r"must be 2-D"),
        ((4, 8), (9, 5), None, ValueError, r"inner sizes differ: a is \(4, 8\), b is \(9, 5\)"),
        ((4, 8), (8, 5), (4,), ValueError, r"bias must have shape \[5\], got \(4,\)"),
        ((4, 8), (8, 5), (1, 5), ValueError, r"bias must have shape \[5\], got \(1, 5\)"),
        ((4, 8), (8, 5), (), ValueError, r"bias must have shape \[5\]"),
    ],
)
def test_errors(a_shape, b_shape, bias_shape, exc, match):
    a, b = torch.randn(a_shape, device=DEVICE), torch.randn(b_shape, device=DEVICE)
    bias = None if bias_shape is None else torch.randn(bias_shape, device=DEVICE)
    with pytest.raises(exc, match=match):
        matmul(a, b, bias)


@pytest.mark.parametrize(
    "da, db, dbias", [(torch.float32, torch.float16, None), (torch.float16, torch.float16, torch.float32)]
)
def test_dtype_mismatch(da, db, dbias):
    a, b = rand(4, 8, dtype=da), rand(8, 5, dtype=db)
    bias = None if dbias is None else rand(5, dtype=dbias)
    with pytest.raises(TypeError, match="share one dtype"):
        matmul(a, b, bias)


def test_forced_tma_with_row_major_b():
    """Forcing TMA on ordinary contiguous operands must either work or be refused with a ValueError."""
    a, b = rand(37, 40, dtype=torch.float16), rand(40, 24, dtype=torch.float16)
    try:
        c = matmul(a, b, use_tma=True)
    except ValueError:
        return
    check(c, ref_mm(a, b), torch.float16, "forced tma, row-major b")


def test_integer_dtype_is_refused():
    a = torch.ones(4, 8, dtype=torch.int32, device=DEVICE)
    with pytest.raises(TypeError):
        matmul(a, a.t().contiguous())


@pytest.mark.parametrize("split_k", [2, 3, 5])
@pytest.mark.parametrize("use_tma", [False, True], ids=["ptr", "tma"])
@pytest.mark.parametrize("name", ["fp32", "fp16", "fp64"])
def test_split_k(name, use_tma, split_k):
    """K tiles divided among programs, partials summed by the last: right for uneven splits too
    (K = 200 is 7 tiles of 32: splits of 4+3, 3+3+1, and 2+2+2+1+0 with one empty range)."""
    dtype = DTYPES[name]
    if use_tma and dtype == torch.float64:
        pytest.skip("the TMA path is for tensor-core dtypes")
    M, K, N = 70, 200, 48
    a = rand(M, K, dtype=dtype)
    b = col_major(K, N, dtype)
    bv = rand(N, dtype=dtype)
    c = matmul(a, b, bv, use_tma=use_tma, split_k=split_k, block=(32, 32, 32))
    check(c, ref_mm(a, b, bv), dtype, f"{name} split_k={split_k}")
    # the counters are left at zero: a second call on the same sizes is right again
    c2 = matmul(a, b, bv, use_tma=use_tma, split_k=split_k, block=(32, 32, 32))
    assert torch.equal(c, c2), "split-K must be deterministic"


def test_split_k_is_validated():
    a = rand(8, 8, dtype=torch.float32)
    with pytest.raises(ValueError, match="split_k must be an int >= 1"):
        matmul(a, a, split_k=0)


# ---------------------------------------------------------------- 3xTF32 (CONVGEMM_FP32_PRECISION=tf32x3)
@triton.jit
def _dot_tile(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, PRECISION: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    acc = dot_acc(a, b, tl.zeros((M, N), dtype=tl.float32), PRECISION)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


def _dot(a, b, precision):
    c = torch.empty(a.shape[0], b.shape[1], device=a.device)
    _dot_tile[(1,)](a, b, c, a.shape[0], b.shape[1], a.shape[1], PRECISION=precision)
    return c


def test_tf32x3_is_fp32_accurate_and_keeps_inf_and_nan():
    """Each element within 2e-6 of |a| @ |b| (plain TF32 is ~1e-3 off: the GPU check below), and
    Inf/NaN exactly where float64 has them: an Inf times weights that TF32 holds exactly (their
    low part is 0) must stay Inf, not turn into Inf * 0 = NaN in a cross product."""
    g = torch.Generator().manual_seed(0)
    m, n, k = 32, 32, 64
    a = torch.randn(m, k, generator=g) * torch.logspace(-3, 3, k)  # a wide range of magnitudes
    b = torch.randn(k, n, generator=g)
    b[5] = torch.tensor([1.0, -0.5, 2.0, 0.25] * (n // 4))  # exact in TF32
    a[3, 5] = float("inf")  # row 3 meets the exact row 5 of b: Inf in every column
    a[7, 9] = float("-inf")
    b[9, 4] = 0.0  # -Inf * 0 = NaN in column 4 of row 7 only
    a[11, 20] = float("nan")
    b[30, 6] = float("inf")
    a, b = a.to(DEVICE), b.to(DEVICE)
    ref = a.double() @ b.double()
    scale = a.double().abs().nan_to_num(0, 0, 0) @ b.double().abs().nan_to_num(0, 0, 0)
    c = _dot(a, b, "tf32x3")
    fin = torch.isfinite(ref)
    assert (~fin).sum() >= 3 * n  # rows 3, 7, 11 and column 6
    assert torch.equal(torch.isnan(c), torch.isnan(ref))
    assert torch.equal(torch.isinf(c), torch.isinf(ref))
    assert torch.equal(c[torch.isinf(ref)], ref[torch.isinf(ref)].float())
    err = ((c.double() - ref).abs() / scale.clamp_min(1e-30))[fin]
    assert err.max().item() < 2e-6, err.max().item()
    if DEVICE == "cuda":  # the same check fails for plain TF32: the test tells the two apart
        t = _dot(a, b, "tf32").double()
        assert ((t - ref).abs() / scale.clamp_min(1e-30))[fin].max().item() > 1e-4


@triton.jit
def _parts_tile(v_ptr, hi_ptr, hf_ptr, lo_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    hi, hf, lo = _tf32_parts(tl.load(v_ptr + r))
    tl.store(hi_ptr + r, hi)
    tl.store(hf_ptr + r, hf)
    tl.store(lo_ptr + r, lo)


def test_tf32_split_rounds_to_nearest():
    """3xTF32's split: hi is the TF32 value nearest to v (so |v - hi| <= half a TF32 step, where
    clearing the 13 low bits left up to a whole one), lo is v - hi as a TF32 value, and hi + lo
    is within 2^-22 |v|. A value within half a step of the largest float keeps a finite hi;
    Inf and NaN pass through hi with hf and lo zero."""
    g = torch.Generator().manual_seed(1)
    v = torch.randn(1024, generator=g) * torch.logspace(-30, 30, 1024)
    big = torch.finfo(torch.float32).max
    v[:4] = torch.tensor([big, -big, float("inf"), float("nan")])
    out = [torch.empty_like(v) for _ in range(3)]
    outs = [t.to(DEVICE) for t in out]
    _parts_tile[(1,)](v.to(DEVICE), *outs, N=1024)
    hi, hf, lo = (t.cpu() for t in outs)
    fin = torch.isfinite(v)
    low13 = lambda t: t.view(torch.int32) & 8191  # noqa: E731
    assert (low13(hi[fin]) == 0).all() and (low13(lo[fin]) == 0).all()  # both TF32 values
    assert torch.isfinite(hi[fin]).all()
    step = torch.ldexp(torch.ones(()), torch.frexp(v)[1] - 11).double()  # the TF32 step at |v|
    miss = (v.double() - hi.double()).abs()
    assert (miss[4:] <= step[4:] / 2).all()  # nearest
    assert (miss[:2] < step[:2]).all() and (miss[:2] > 0).all()  # +-max: truncated, not Inf
    assert (((hi[fin].double() + lo[fin].double()) - v[fin].double()).abs() <= 2.0**-22 * v[fin].double().abs()).all()
    assert torch.equal(hf[fin], hi[fin])
    assert torch.isinf(hi[2]) and torch.isnan(hi[3]) and (hf[2:4] == 0).all() and (lo[2:4] == 0).all()


@triton.jit
def _dot_loop(a_ptr, b_ptr, c_ptr, K, M: tl.constexpr, N: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm, rn, rk = pm * M + tl.arange(0, M), pn * N + tl.arange(0, N), tl.arange(0, BK)
    acc = tl.zeros((M, N), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :])
        b = tl.load(b_ptr + (k0 + rk)[:, None] * (N * tl.num_programs(1)) + rn[None, :])
        acc = dot_acc(a, b, acc, PRECISION)
    tl.store(c_ptr + rm[:, None] * (N * tl.num_programs(1)) + rn[None, :], acc)


@pytest.mark.skipif(DEVICE != "cuda", reason="the interpreter's dot is exact fp32: no tensor-core rounding to see")
@pytest.mark.parametrize("k", [576, 18432])
def test_tf32x3_long_reductions_stay_fp32_accurate(k):
    """A long reduction (K = 18432, ResNet-50's 2048 x 3 x 3 scale) at fp32 accuracy: each K
    tile's three products are summed from zero and added by an IEEE add. With one tensor-core
    accumulator over all of K the error grew with K (1.3e-4 at 18432 on the H200); summed per
    tile it was 4.5e-7, under cuBLAS's fp32 (1.2e-6)."""
    torch.manual_seed(0)
    a = torch.randn(256, k, device=DEVICE)
    b = torch.randn(k, 256, device=DEVICE)
    c = torch.empty(256, 256, device=DEVICE)
    _dot_loop[(2, 2)](a, b, c, k, M=128, N=128, BK=32, PRECISION="tf32x3", num_warps=8)
    ref = a.double() @ b.double()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    assert err < 1e-6, err


@pytest.mark.skipif(DEVICE != "cuda", reason="the GPU's default tiles (the interpreter's are 32 wide)")
@pytest.mark.parametrize("tf32", [False, True])
def test_fp32_default_tiles_run(tf32):
    """fp32 at the default tile, TF32 on and off: 128x128x64 asked more shared memory than an SM
    has in fp32 (262 KB with TF32), so fp32 takes 32-wide K tiles (64x128 under 3xTF32)."""
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a, b = rand(300, 520, dtype=torch.float32), col_major(520, 260, torch.float32)
    c = matmul(a, b)
    ref = ref_mm(a, b)
    err = ((c.double().cpu() - ref).norm() / ref.norm()).item()
    assert err < (5e-3 if tf32 else 1e-6), err
