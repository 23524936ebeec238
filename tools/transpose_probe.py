#!/usr/bin/env python3
"""How fast the NCHW <-> channels_last transposes run against a copy of the same bytes (GPU).

An NCHW input to a kernel that reads NHWC is transposed first (``layout.as_nhwc``), and its
NCHW result after (``layout.to_format``); on issue 9's NCHW rows these two copies are what
separates convgemm from its channels_last time (session 33: ResNet-50's l4 3x3 (first) 69.2 us
NCHW against 39.5 channels_last, where a copy of both tensors' bytes would take about 8 us).

For every distinct activation of the ``all`` suite (inputs and outputs, batch as the suite
has it, C > 1) and both directions: a device copy of the tensor (``torch.Tensor.copy_`` into a
preallocated tensor of the same layout: read and write the bytes once), the library's transpose
as it is (``layout._transpose``), and ``_transpose_kernel`` with other tiles (``--tiles``,
``BLOCK_C x BLOCK_HW / warps``). Times as ``convgemm bench`` takes them: medians of GPU time, L2
flushed before each run, host off the clock (``_runtime.gpu_times``); rates in TB/s of the bytes
moved (read + write).

    PYTHONPATH=src python3 tools/transpose_probe.py [--dtype bf16] [--tiles 64x64/4,32x256/8] [--limit N]

``--layers`` instead splits the NCHW rows that were under 1.0x (session 33) into their parts, each
timed alone the same way: ``convgemm.conv2d`` on the NCHW input and weight as ``convgemm bench
--layout nchw`` runs it (tuned first), the input's transpose, the call on the NHWC copy with a
channels_last weight (a channels_last result), the result's transpose to NCHW, and cuDNN given the
NCHW tensors. Where the first is about the sum of the next three, the transposes' share of the
gap is theirs.
"""

from __future__ import annotations

import argparse
import statistics

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
DEFAULT_TILES = "64x64/4,32x128/4,64x128/8,16x256/4,32x256/8,64x256/8,128x64/8"


def activations(limit: int | None) -> list[tuple[str, tuple[int, int, int, int]]]:
    """(name, (N, C, H, W)) of the ``all`` suite's distinct inputs and outputs with C > 1."""
    from convgemm.bench.suites import suite

    seen, out = set(), []
    for shp in suite("all"):
        for what, dims in (("x", (shp.n, shp.c, shp.h, shp.w)), ("y", (shp.n, shp.k, shp.p, shp.q))):
            if dims[1] > 1 and dims not in seen:
                seen.add(dims)
                out.append((f"{shp.name} {what}", dims))
    return out[:limit] if limit else out


def weights() -> list[tuple[str, tuple[int, int, int, int]]]:
    """(name, (K, C/g, R, S)) of the ``all`` suite's distinct filters of more than one tap and
    channel a group: the NCHW-contiguous weights that ``layout.pack_weight`` transposes to KRSC
    on every call (nn.Conv2d's default layout; ``convgemm bench --layout nchw``'s weights)."""
    from convgemm.bench.suites import suite

    seen, out = set(), []
    for shp in suite("all"):
        dims = (shp.k, shp.c // shp.groups, shp.r, shp.s)
        if dims[1] > 1 and shp.r * shp.s > 1 and dims not in seen:
            seen.add(dims)
            out.append((f"{shp.name} w", dims))
    return out


def one(name, dims, dtype, to_nhwc: bool, tiles, us) -> tuple[float, float, list[float]]:
    """(copy us, library transpose us, [us per tile]) for one activation and direction, each
    transpose checked against PyTorch's."""
    from convgemm._runtime import cdiv
    from convgemm.conv.layout import _transpose, _transpose_kernel, _transpose_spec

    n, c, h, w = dims
    hw = h * w
    src_fmt = torch.contiguous_format if to_nhwc else torch.channels_last
    dst_fmt = torch.channels_last if to_nhwc else torch.contiguous_format
    src = (
        torch.randn(n, c, h, w, device="cuda" if torch.cuda.is_available() else "cpu")
        .to(dtype)
        .contiguous(memory_format=src_fmt)
    )
    same = torch.empty_like(src)
    t_copy = us(lambda: same.copy_(src))
    ref = src.contiguous(memory_format=dst_fmt)
    assert torch.equal(_transpose(src, to_nhwc), ref), f"{name}: the library's transpose differs from PyTorch's"
    t_lib = us(lambda: _transpose(src, to_nhwc))
    _, consts, _ = _transpose_spec(n, c, hw, to_nhwc)
    dst = torch.empty_like(src, memory_format=dst_fmt)
    row = []
    for bc, bhw, warps in tiles:
        grid = (cdiv(hw, bhw), cdiv(c, bc), n)
        k = dict(consts, BLOCK_C=bc, BLOCK_HW=bhw)

        def run(grid=grid, k=k, warps=warps):
            _transpose_kernel[grid](src, dst, c, hw, **k, num_warps=warps)

        dst.zero_()
        run()
        assert torch.equal(dst, ref), f"{name}: tile {bc}x{bhw}/{warps} differs"
        row.append(us(run))
    return t_copy, t_lib, row


#: session 33's NCHW rows under 1.0x against cuDNN given NCHW (``h200-2026-12-04-s33-call6-nchw-all.json``),
#: by their ``all``-suite names
NCHW_LAYERS = (
    "resnet50 l3 1x1 reduce (first) 512->256 @28",
    "resnet50 l2 1x1 expand 128->512 @28",
    "resnet50 l2 1x1 reduce (first) 256->128 @56",
    "resnet50 l1 1x1 reduce 256->64 @56",
    "resnet50 l4 3x3 (first) 512->512 @14",
    "resnet50 l3 1x1 reduce 1024->256 @14",
    "resnet50 l1 1x1 reduce (first) 64->64 @56",
    "resnet50 l1 1x1 expand 64->256 @56",
)


def layers(dtype, us) -> None:
    """``--layers``: each NCHW row split into its parts (module docstring)."""
    import torch.nn.functional as F

    import convgemm
    from convgemm.conv.layout import as_nhwc, to_format

    torch.backends.cudnn.benchmark = True
    print(f"{'layer':46s} {'NCHW call':>9s} {'x->NHWC':>8s} {'NHWC call':>9s} {'y->NCHW':>8s} {'sum':>7s} "
          f"{'cuDNN NCHW':>10s}")  # fmt: skip
    from convgemm.bench.suites import suite

    shapes = {shp.name: shp for shp in suite("all")}
    for name in NCHW_LAYERS:
        shp = shapes[name]
        n, c, h, w, k, r, s, st, pad = shp.n, shp.c, shp.h, shp.w, shp.k, shp.r, shp.s, shp.stride, shp.pad
        x = torch.randn(n, c, h, w, device="cuda").to(dtype)
        wt = (torch.randn(k, c, r, s, device="cuda") / (c * r * s) ** 0.5).to(dtype)
        x_cl = x.contiguous(memory_format=torch.channels_last)
        w_cl = wt.contiguous(memory_format=torch.channels_last)

        def nchw_call(x=x, wt=wt, st=st, pad=pad):
            return convgemm.conv2d(x, wt, stride=st, padding=pad)

        def nhwc_call(x_cl=x_cl, w_cl=w_cl, st=st, pad=pad):
            return convgemm.conv2d(x_cl, w_cl, stride=st, padding=pad)

        y = nchw_call()  # tunes
        y_cl = nhwc_call()
        assert y.is_contiguous(), f"{name}: an NCHW call gives an NCHW result"
        torch.testing.assert_close(y, y_cl, rtol=2e-2, atol=2e-2)
        t = [us(nchw_call), us(lambda x=x: as_nhwc(x)), us(nhwc_call),
             us(lambda y_cl=y_cl: to_format(y_cl, torch.contiguous_format)),
             us(lambda x=x, wt=wt, st=st, pad=pad: F.conv2d(x, wt, stride=st, padding=pad))]  # fmt: skip
        print(f"{name:46s} {t[0]:9.1f} {t[1]:8.1f} {t[2]:9.1f} {t[3]:8.1f} {t[1] + t[2] + t[3]:7.1f} {t[4]:10.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    ap.add_argument("--tiles", default=DEFAULT_TILES, help="BLOCK_CxBLOCK_HW/warps, comma-separated")
    ap.add_argument("--limit", type=int, default=None, help="only the first N activations")
    ap.add_argument("--layers", action="store_true", help="split the NCHW rows under 1.0x into their parts")
    ap.add_argument("--max-hw", type=int, default=None, help="only activations of at most this many pixels an image")
    ap.add_argument("--weights", action="store_true",
                    help="the suite's filters (NCHW -> KRSC) instead of its activations")  # fmt: skip
    args = ap.parse_args()

    from convgemm._runtime import gpu_times, l2_flush

    dev = torch.device("cuda")
    dtype = DTYPES[args.dtype]
    flush = l2_flush(dev)
    tiles = []
    for t in args.tiles.split(","):
        bc_bhw, warps = t.split("/")
        bc, bhw = bc_bhw.split("x")
        tiles.append((int(bc), int(bhw), int(warps)))

    def us(fn) -> float:
        return statistics.median(gpu_times(fn, 30.0, 10, 200, before=flush)) * 1e3

    if args.layers:
        layers(dtype, us)
        return 0

    header = f"{'activation':52s} {'N,C,HxW':>18s} {'dir':>4s} {'MB':>6s} {'copy':>7s} {'lib':>7s}"
    print(header + "".join(f" {f'{bc}x{bhw}/{w}':>10s}" for bc, bhw, w in tiles) + "  best/copy  lib/copy")
    ratios_lib, ratios_best = [], []
    for name, dims in weights() if args.weights else activations(args.limit):
        if args.max_hw and dims[2] * dims[3] > args.max_hw:
            continue
        for to_nhwc in (True,) if args.weights else (True, False):
            t_copy, t_lib, row = one(name, dims, dtype, to_nhwc, tiles, us)
            best = min(row)
            ratios_lib.append(t_lib / t_copy)
            ratios_best.append(best / t_copy)
            n, c, h, w = dims
            mb = n * c * h * w * dtype.itemsize / 1e6
            print(f"{name:52s} {f'{n},{c},{h}x{w}':>18s} {'in' if to_nhwc else 'out':>4s} {mb:6.1f} "
                  f"{t_copy:7.1f} {t_lib:7.1f}" + "".join(f" {v:10.1f}" for v in row)
                  + f"  {best / t_copy:9.2f} {t_lib / t_copy:9.2f}")  # fmt: skip
    if ratios_lib:
        gm = statistics.geometric_mean
        print(f"geomean time against the copy: library {gm(ratios_lib):.2f}, best tile {gm(ratios_best):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
