"""The row-ring R x 1 convolution (``conv/row_ring.py``, session 38): its sm_90 compile and an
emulation of the kernel's own code on the CPU, and on the GPU its results against float64 (first
run on an H200 in session 40)."""

from __future__ import annotations

import os
import sys

import pytest
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: the emulated tests run the kernel's Python on CPU tensors and the column fold under Triton's
#: interpreter; on a GPU (no interpreter) the ``test_gpu_*`` tests run the kernel itself
emulated = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET", "0") in ("", "0"),
    reason="emulates the Gluon kernel on the CPU under Triton's interpreter; test_gpu_* cover the GPU",
)


_COMPILE = """
import collections, json, os, sys
import torch
sys.path.insert(0, os.path.join(sys.argv[1], "tools"))
from depthwise_gluon_check import _compile, _sass
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from convgemm.conv import row_ring as rr
n, c, h, w, j, r = 1, 64, 768, 768, 9, 3
x = torch.zeros(n, c, h, w, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
box = [1, 1, 128, c]
desc = TensorDescriptor(x, [n, h, w, c], [x.stride(0), x.stride(2), x.stride(3), 1], box,
                        gl.NVMMASharedLayout.get_default_for(box, gl.bfloat16))
fold = sys.argv[2] == "fold"
if fold:
    u = torch.zeros(n, 3, h, w, dtype=torch.bfloat16)
    strides = (u.stride(0), u.stride(2), u.stride(3), u.stride(1))
    args = (desc, torch.zeros(r, 16, c, dtype=torch.bfloat16), u, u, w, h, j, w, 1, 1, 288, 7, 48, *strides)
    const = dict(FOLD=True, S=3, K=3, KB=4, HAS_BIAS=False, RELU=False)
else:
    u = torch.zeros(n, h, w, j)
    args = (desc, torch.zeros(r, 16, c, dtype=torch.bfloat16), u, u, w, h, j, w, 1, 0, 288, 6, 48, *u.stride())
    const = dict(FOLD=False, S=1, K=1, KB=2, HAS_BIAS=False, RELU=False)
k, _ = _compile(rr.row_ring_kernel, args, dict(R=3, TW=128, BC=64, BN=16, ROWS=16, NS=int(sys.argv[3]), num_warps=4,
                                              **const))
sass, regs = _sass(k.asm["cubin"])
ops = collections.Counter(i.split()[1] if i.startswith("@") else i.split()[0] for i in sass)
print(json.dumps({"ops": ops, "regs": regs, "shared": k.metadata.shared}))
"""


@pytest.mark.parametrize("fold, slots", [("u", 4), ("u", 8), ("fold", 4), ("fold", 8)])
def test_compiles_for_sm90_to_wgmma_and_tma(fold, slots):
    """CRAFT's conv1_1 dgrad as narrow_fold reduces it (64 -> 9 channels, 3 x 1 at 768 x 768), with
    and without the fold in the epilogue: the kernel compiles for sm_90 with its R wgmmas on ring
    slots and one TMA row load a step. In a subprocess: the compile helper leaves the interpreter
    (``TRITON_INTERPRET``) for the process."""
    import json
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.path.join(ROOT, "src") + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", _COMPILE, ROOT, fold, str(slots)], env=env, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    ops = got["ops"]
    assert ops["HGMMA.64x16x16.F32.BF16"] == 3 * 2 * 4, ops  # 3 taps x 2 m64 halves x 4 k16 steps
    assert ops["UTMALDG.4D"] == slots + 1, ops  # the chunk's first rows (one ring), then one a step
    assert got["regs"] <= 128 and got["shared"] <= (100_000 if slots == 4 else 180_000), got


def test_refuses_what_it_does_not_take():
    from convgemm.conv.row_ring import row_ring_conv

    x = torch.zeros(1, 128, 8, 8, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    with pytest.raises(ValueError, match="shared memory"):
        row_ring_conv(x, torch.zeros(9, 128, 3, 1, dtype=torch.bfloat16), 1, torch.zeros(1, 8, 8, 9), slots=8)

    x = torch.zeros(1, 48, 8, 8, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    with pytest.raises(ValueError, match="use narrow_tma"):
        row_ring_conv(x, torch.zeros(9, 48, 3, 1, dtype=torch.bfloat16), 1, torch.zeros(1, 8, 8, 9))
    x = torch.zeros(1, 64, 8, 8, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    with pytest.raises(ValueError, match="use narrow_tma"):
        row_ring_conv(x, torch.zeros(9, 64, 5, 1, dtype=torch.bfloat16), 2, torch.zeros(1, 8, 8, 9))


# (N, C, H, W, J, R, pad): conv1_1's reduction on a smaller image (a W tail past 128), one filter
# row, two rows, chunks ending early (P < ROWS), several images, 32 channels
GPU_CASES = [
    (1, 64, 40, 300, 9, 3, 1),
    (2, 64, 17, 128, 3, 1, 0),
    (1, 32, 9, 130, 16, 2, 1),
    (3, 64, 5, 64, 12, 3, 1),
    (1, 128, 33, 200, 32, 3, 1),
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("case", GPU_CASES, ids=str)
@pytest.mark.parametrize("rows", [16, 4])
def test_gpu_matches_float64(case, dtype, rows):
    from convgemm.conv.row_ring import row_ring_conv

    n, c, h, w, j, r, pad = case
    g = torch.Generator().manual_seed(5)
    x = torch.randn(n, c, h, w, generator=g).to(dtype)
    wt = (torch.randn(j, c, r, 1, generator=g) / c**0.5).to(dtype)
    ref = F.conv2d(x.double(), wt.double(), padding=(pad, 0)).permute(0, 2, 3, 1)  # [N, P, W, J]
    u = torch.full(tuple(ref.shape), float("nan"), device="cuda")
    row_ring_conv(x.cuda().contiguous(memory_format=torch.channels_last), wt.cuda(), pad, u, rows=rows)
    torch.cuda.synchronize()
    err = ((u.double().cpu() - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-5, f"rel err {err:.2e}"  # bf16/fp16 products summed in fp32 by wgmma


def _conv1_1_dgrad_problem(**kw):
    """CRAFT's conv1_1 dgrad as a forward convolution (dy 64 channels -> 3, 3 x 3 at 768 x 768)."""
    from convgemm.problem import ConvProblem

    base = dict(n=1, c=64, h=768, w=768, k=3, r=3, s=3, pad_h=(1, 1), pad_w=(1, 1), dtype=torch.bfloat16,
                tma_ok=True, input_tma_ok=True, input_dense=True)  # fmt: skip
    base.update(kw)
    return ConvProblem(**base)


@pytest.mark.parametrize("flag", ["1", "0", None])
def test_narrow_fold_times_the_ring_unless_turned_off(monkeypatch, flag):
    """``narrow_fold``'s configs (the GPU's list: the interpreter's single default is patched away)
    include the ring's two shapes, fused, unless ``CONVGEMM_ROW_RING=0``."""
    from convgemm.conv import fprop

    if flag is None:
        monkeypatch.delenv("CONVGEMM_ROW_RING", raising=False)
    else:
        monkeypatch.setenv("CONVGEMM_ROW_RING", flag)
    monkeypatch.setattr(fprop, "interpreting", lambda: False)
    prob = _conv1_1_dgrad_problem()
    algo = fprop.ALGORITHMS["narrow_fold"]
    assert algo.supports(prob) is None
    rings = [c for c in algo.configs(prob) if c.ring]
    if flag == "0":
        assert rings == []
    else:
        assert [(c.block_m, c.ring, c.num_stages, c.fused) for c in rings] == [(128, 16, 4, 1), (64, 16, 4, 1)]
        assert all(c.block_n == 16 and c.block_k == 64 and "ring" in c.describe() for c in rings)


def test_ring_unfused_where_the_fold_does_not_fit():
    """A stride along W (the fold cannot run in the epilogue) or a fused tile over the shared-memory
    limit (128 channels, K 20) gives the R x 1 step with the separate fold."""
    from convgemm.conv import fprop, row_ring

    algo = fprop.ALGORITHMS["narrow_fold"]
    for kw in (dict(stride=(1, 2)), dict(c=128, k=20)):
        prob = _conv1_1_dgrad_problem(**kw)
        rp = algo.reduced(prob)
        assert row_ring.fits(rp) is None, kw
        cfgs = row_ring.configs(prob, rp)
        assert [(c.block_m, c.fused) for c in cfgs] == [(128, 0), (64, 0)], kw
    # K 20 fits the fused fold (at most 128 channels) but not in shared memory
    assert row_ring.fold_fits(_conv1_1_dgrad_problem(c=128, k=20)) is None


@pytest.mark.parametrize(
    "kw, reason",
    [
        (dict(r=5, pad_h=(2, 2)), "at most 3"),
        (dict(c=48), "C = 48"),
        (dict(pad_h=(0, 1)), "the same above and below"),
        (dict(dilation=(2, 1), pad_h=(2, 2)), "dilation 1"),
        (dict(input_dense=False), "evenly strided"),
    ],
)
def test_ring_refuses_what_it_does_not_take(monkeypatch, kw, reason):
    from convgemm.conv import fprop, row_ring

    rp = fprop.ALGORITHMS["narrow_fold"].reduced(_conv1_1_dgrad_problem(**kw))
    assert reason in row_ring.fits(rp)
    monkeypatch.setattr(fprop, "interpreting", lambda: False)
    assert not any(c.ring for c in fprop.ALGORITHMS["narrow_fold"].configs(_conv1_1_dgrad_problem(**kw)))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize(
    "shape",
    [(1, 64, 40, 300, 3, 3, 1), (2, 32, 17, 70, 5, 3, 1), (1, 16, 9, 130, 16, 2, 1), (1, 32, 17, 131, 3, 3, 2)],
    ids=str,
)
def test_gpu_narrow_fold_on_the_ring_matches_float64(shape, dtype):
    """``narrow_fold``'s whole run (ring + column fold, bias) on every ring candidate: the fold in
    the ring's epilogue, or after it with a stride along W."""
    import convgemm
    from convgemm.conv.fprop import ALGORITHMS

    n, c, h, w, k, r, sw = shape
    g = torch.Generator().manual_seed(7)
    x = torch.randn(n, c, h, w, generator=g).to(dtype).cuda().contiguous(memory_format=torch.channels_last)
    wt = (torch.randn(k, c, r, 3, generator=g) / (3 * c) ** 0.5).to(dtype).cuda()
    b = torch.randn(k, generator=g).to(dtype).cuda()
    pad = (r // 2, 1)
    ref = F.conv2d(x.double(), wt.double(), b.double(), padding=pad, stride=(1, sw))
    algo = ALGORITHMS["narrow_fold"]
    prob = convgemm.explain(x, wt, b, padding=pad, stride=(1, sw), algorithm="narrow_fold")["problem"]
    rings = [cfg for cfg in algo.configs(prob) if cfg.ring]
    assert rings and all(cfg.fused == (sw == 1) for cfg in rings)
    for cfg in rings:
        y = torch.full(ref.shape, float("nan"), device="cuda", dtype=dtype).contiguous(
            memory_format=torch.channels_last
        )
        algo.run(prob, x, wt, b, y, cfg)
        torch.cuda.synchronize()
        err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
        assert err < 1e-2, f"{cfg.describe()}: rel err {err:.2e}"  # one bf16 rounding of the output


def _emulated(monkeypatch):
    """``row_ring_kernel`` launches run by ``gluon_emu.run_row_ring`` (on the CPU); returns the
    list of each launch's row-copy count."""
    from gluon_emu import run_row_ring

    from convgemm.conv import row_ring

    real = row_ring.row_ring_kernel
    copies = []

    class Emulated:
        arg_names = real.arg_names

        def __getitem__(self, grid):
            return lambda *args, **kw: copies.append(run_row_ring(grid, args, kw, real))

    monkeypatch.setattr(row_ring, "row_ring_kernel", Emulated())
    monkeypatch.setattr(row_ring, "sm_count", lambda: 2)  # a few persistent programs, several units each
    return copies


@emulated
@pytest.mark.parametrize("rows, slots", [(16, 4), (4, 4), (1, 4), (16, 8), (5, 8)])
@pytest.mark.parametrize("case", GPU_CASES, ids=str)
def test_emulated_matches_float64(monkeypatch, case, rows, slots):
    """The kernel's own code on the CPU (``gluon_emu.run_row_ring``): units, the ring's schedule
    and barrier phases (each wait for its slot's latest copy, no copy into a slot a wgmma still
    reads), stores, W tails; the result against float64 and the copy count (each chunk's rows
    once, plus R - 1 halo rows)."""
    from convgemm.conv.row_ring import row_ring_conv

    copies = _emulated(monkeypatch)
    n, c, h, w, j, r, pad = case
    g = torch.Generator().manual_seed(5)
    x = torch.randn(n, c, h, w, generator=g).to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
    wt = (torch.randn(j, c, r, 1, generator=g) / c**0.5).to(torch.bfloat16)
    ref = F.conv2d(x.double(), wt.double(), padding=(pad, 0)).permute(0, 2, 3, 1)
    u = torch.full(tuple(ref.shape), float("nan"))
    tw = 128 if w > 64 and slots * c <= 512 else 64  # C = 128 on 8 slots of 128 columns: over 227 KB
    row_ring_conv(x, wt, pad, u, tw=tw, rows=rows, slots=slots)
    err = ((u.double() - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-5, f"rel err {err:.2e}"
    p = ref.shape[1]
    chunks = -(-p // rows)
    strips = -(-w // tw)
    assert copies == [n * strips * (p + chunks * (r - 1))]


@emulated
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "shape",
    [(1, 64, 11, 70, 3, 3, 1), (2, 32, 6, 20, 5, 3, 1), (1, 16, 5, 9, 16, 2, 1), (1, 32, 6, 41, 3, 3, 2)],
    ids=str,
)
def test_emulated_narrow_fold_on_the_ring_matches_float64(monkeypatch, shape, dtype):
    """``narrow_fold``'s whole run on each ring candidate on the CPU: the ring emulated, the
    column fold (bias, S taps) in its epilogue or, with a stride along W, under the interpreter
    after it; y channels_last and NCHW."""
    import convgemm
    from convgemm.conv import row_ring
    from convgemm.conv.fprop import ALGORITHMS

    copies = _emulated(monkeypatch)
    n, c, h, w, k, r, sw = shape
    g = torch.Generator().manual_seed(7)
    x = torch.randn(n, c, h, w, generator=g).to(dtype).contiguous(memory_format=torch.channels_last)
    wt = (torch.randn(k, c, r, 3, generator=g) / (3 * c) ** 0.5).to(dtype)
    b = torch.randn(k, generator=g).to(dtype)
    pad = (r // 2, 1)
    ref = F.conv2d(x.double(), wt.double(), b.double(), padding=pad, stride=(1, sw))
    algo = ALGORITHMS["narrow_fold"]
    prob = convgemm.explain(x, wt, b, padding=pad, stride=(1, sw), algorithm="narrow_fold")["problem"]
    rp = algo.reduced(prob)
    assert row_ring.fits(rp) is None and (row_ring.fold_fits(prob) is None) == (sw == 1)
    assert all(cfg.fused == (sw == 1) for cfg in row_ring.configs(prob, rp))
    for cfg in row_ring.configs(prob, rp):
        for fmt in (torch.channels_last, torch.contiguous_format):
            y = torch.full(ref.shape, float("nan"), dtype=dtype).contiguous(memory_format=fmt)
            algo.run(prob, x, wt, b, y, cfg)
            err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
            assert err < 1e-2, f"{cfg.describe()}: rel err {err:.2e}"  # one 16-bit rounding of the output
    assert len(copies) == 2 * len(row_ring.configs(prob, rp))


# (N, C, H, W, K, R, S, pad_h, pad_w, Q less than the padded width by): conv1_1's dgrad on a small
# image, strips overlapping past 64 columns, K 1 and 5 (channel groups of 1 and 8), a 5-wide
# filter, no padding, right padding cut short (padding='same' with an even width), 32 and 16 channels
FOLD_CASES = [
    (1, 64, 12, 150, 3, 3, 3, 1, 1, 0),
    (2, 32, 7, 70, 5, 2, 3, 1, 1, 0),
    (1, 16, 5, 40, 1, 3, 5, 1, 2, 0),
    (1, 64, 9, 66, 4, 3, 3, 0, 0, 0),
    (1, 32, 6, 33, 3, 3, 4, 1, 2, 1),
]


@emulated
@pytest.mark.parametrize("tw, rows, slots", [(64, 4, 4), (128, 16, 8)])
@pytest.mark.parametrize("case", FOLD_CASES, ids=str)
def test_emulated_fold_matches_float64(monkeypatch, case, tw, rows, slots):
    """``row_ring_fold`` on the CPU: the column fold in the ring's epilogue (overlapping strips,
    the gather of each channel group from its shifted row, bias and relu), y NCHW and
    channels_last, against float64."""
    from convgemm.conv.row_ring import row_ring_fold

    copies = _emulated(monkeypatch)
    n, c, h, w, k, r, s, ph, pw, cut = case
    g = torch.Generator().manual_seed(11)
    x = torch.randn(n, c, h, w, generator=g).to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
    wt = (torch.randn(k, c, r, s, generator=g) / (s * c) ** 0.5).to(torch.bfloat16)
    b = torch.randn(k, generator=g).to(torch.bfloat16)
    ref = F.conv2d(x.double(), wt.double(), b.double(), padding=(ph, pw))
    ref = ref[..., : ref.shape[3] - cut]
    for fmt, act in ((torch.contiguous_format, ""), (torch.channels_last, "relu")):
        want = ref.clamp(min=0) if act else ref
        y = torch.full(ref.shape, float("nan"), dtype=torch.bfloat16).contiguous(memory_format=fmt)
        row_ring_fold(x, wt, b, y, ph, pw, act, tw=tw, rows=rows, slots=slots)
        err = ((y.double() - want).abs().max() / want.abs().max()).item()
        assert err < 1e-2, f"{fmt} {act!r}: rel err {err:.2e}"  # one bf16 rounding of y
    q, p = ref.shape[3], ref.shape[2]
    strips = -(-q // (tw - s + 1))
    assert copies[0] == n * strips * (p + -(-p // rows) * (r - 1))


def test_fold_refuses_what_it_does_not_take():
    from convgemm.conv import fprop, row_ring

    prob = _conv1_1_dgrad_problem(stride=(1, 2))
    assert "along W" in row_ring.fold_fits(prob)
    assert "along W" in row_ring.fold_fits(_conv1_1_dgrad_problem(dilation=(1, 2), pad_w=(2, 2)))
    assert "over 128" in row_ring.fold_fits(_conv1_1_dgrad_problem(k=40, s=5))
    assert row_ring.fold_fits(_conv1_1_dgrad_problem(activation="relu")) is None
    rp = fprop.ALGORITHMS["narrow_fold"].reduced(prob)
    assert not any(c.fused for c in row_ring.configs(prob, rp))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("tw, rows, slots", [(64, 4, 4), (128, 16, 8), (128, 32, 8)])
@pytest.mark.parametrize("case", FOLD_CASES, ids=str)
def test_gpu_fold_matches_float64(case, tw, rows, slots, dtype):
    from convgemm.conv.row_ring import row_ring_fold

    n, c, h, w, k, r, s, ph, pw, cut = case
    g = torch.Generator().manual_seed(11)
    x = torch.randn(n, c, h, w, generator=g).to(dtype)
    wt = (torch.randn(k, c, r, s, generator=g) / (s * c) ** 0.5).to(dtype)
    b = torch.randn(k, generator=g).to(dtype)
    ref = F.conv2d(x.double(), wt.double(), b.double(), padding=(ph, pw))
    ref = ref[..., : ref.shape[3] - cut]
    xg = x.cuda().contiguous(memory_format=torch.channels_last)
    for fmt, act in ((torch.contiguous_format, ""), (torch.channels_last, "relu")):
        want = ref.clamp(min=0) if act else ref
        y = torch.full(ref.shape, float("nan"), device="cuda", dtype=dtype).contiguous(memory_format=fmt)
        row_ring_fold(xg, wt.cuda(), b.cuda(), y, ph, pw, act, tw=tw, rows=rows, slots=slots)
        torch.cuda.synchronize()
        err = ((y.double().cpu() - want).abs().max() / want.abs().max()).item()
        assert err < 1e-2, f"{fmt} {act!r}: rel err {err:.2e}"  # one 16-bit rounding of y


@pytest.mark.gpu
def test_gpu_packed_weight_follows_in_place_updates():
    """The packed weight taps are cached per weight tensor and version: a repeat call reuses them,
    an in-place update (an optimizer step) is seen, in both forms."""
    from convgemm.conv.fold import fold_weight
    from convgemm.conv.row_ring import row_ring_conv, row_ring_fold

    g = torch.Generator().manual_seed(3)
    x = torch.randn(1, 64, 20, 140, generator=g).to(torch.bfloat16).cuda().contiguous(memory_format=torch.channels_last)
    w = (torch.randn(3, 64, 3, 3, generator=g) / 24).to(torch.bfloat16).cuda()
    y = torch.empty(1, 3, 20, 140, device="cuda", dtype=torch.bfloat16)
    u = torch.empty(1, 20, 140, 9, device="cuda")
    for step in range(3):
        if step == 2:
            w.mul_(-2)  # in place: the version counter moves
        ref = F.conv2d(x.double(), w.double(), padding=1)
        row_ring_fold(x, w, None, y, 1, 1)
        assert ((y.double() - ref).abs().max() / ref.abs().max()).item() < 1e-2, f"fold, call {step}"
        ref_u = F.conv2d(x.double(), fold_weight(w).double(), padding=(1, 0)).permute(0, 2, 3, 1)
        row_ring_conv(x, fold_weight(w), 1, u, source=w)
        assert ((u.double() - ref_u).abs().max() / ref_u.abs().max()).item() < 1e-5, f"u, call {step}"


@emulated
def test_emulated_fold_with_same_padding_of_an_even_filter(monkeypatch):
    """padding='same' with a 4-wide filter pads (1, 2) columns: the fused ring takes the right
    padding from y's width (a review found it refused this)."""
    import convgemm
    from convgemm.conv import row_ring
    from convgemm.conv.fprop import ALGORITHMS

    _emulated(monkeypatch)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(1, 32, 6, 40, generator=g).to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
    wt = (torch.randn(3, 32, 3, 4, generator=g) / 20).to(torch.bfloat16)
    ref = F.conv2d(x.double(), wt.double(), padding="same")
    algo = ALGORITHMS["narrow_fold"]
    prob = convgemm.explain(x, wt, None, padding="same", algorithm="narrow_fold")["problem"]
    assert prob.pad_w == (1, 2)
    fused = [c for c in row_ring.configs(prob, algo.reduced(prob)) if c.fused]
    assert fused
    for cfg in fused:
        y = torch.full(ref.shape, float("nan"), dtype=torch.bfloat16)
        algo.run(prob, x, wt, None, y, cfg)
        assert ((y.double() - ref).abs().max() / ref.abs().max()).item() < 1e-2, cfg.describe()


def test_configs_fit_in_shared_memory():
    """No candidate needs more shared memory than a block may have: a fused tile of 64 channels
    and K 9, S 5 keeps only the 64-column strip; with 128 channels neither fits, and the unfused
    ring is offered instead."""
    from convgemm.conv import fprop, row_ring

    cases = {
        (64, 3, 3): [(128, 1), (64, 1)],
        (128, 3, 3): [(128, 1), (64, 1)],
        (64, 9, 5): [(64, 1)],
        (128, 9, 5): [(128, 0), (64, 0)],
    }
    for (c, k, s), want in cases.items():
        prob = _conv1_1_dgrad_problem(c=c, k=k, s=s, pad_w=(s // 2, s // 2))
        rp = fprop.ALGORITHMS["narrow_fold"].reduced(prob)
        cfgs = row_ring.configs(prob, rp)
        assert [(cfg.block_m, cfg.fused) for cfg in cfgs] == want, (c, k, s)
        for cfg in cfgs:
            assert row_ring.fits_smem(row_ring.smem_bytes(cfg.block_m, rp.c, 2, cfg.block_n, cfg.num_stages, cfg.fused))
    assert row_ring.smem_bytes(128, 64, 2, 128, 4, 1) > row_ring.SMEM_LIMIT  # the case the filter removes
