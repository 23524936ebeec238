#!/usr/bin/env python3
"""Time forced (algorithm, config) pairs on one forward layer against cuDNN and the tuner's
choice (GPU; bf16, channels_last or ``--layout nchw``), each output checked against cuDNN's.

    PYTHONPATH=src python3 tools/config_probe.py --shape 64,1024,14,14,256,1,1,1,0,1,1,nobias \\
        --try "gemm_1x1:block_m=256,block_n=128,block_k=64,num_warps=8,num_stages=3" \\
        --try "implicit_gemm_tma:block_m=256,block_n=128,num_warps=8,num_stages=3,tile_n=8,tile_h=4,tile_w=4"

Each ``--try`` is ``ALGORITHM:FIELD=VALUE,...``: the fields override the algorithm's default
config for the layer (``Config``'s field names, integers), so a field left out takes the GPU
default's value, which may be a K split or several consumers (``implicit_gemm_ws`` on ResNet-50's
l4 3x3 @7 defaults to split 2 and three consumers; stream-K refuses both): name every field the
form depends on. Times are medians of GPU time with the
L2 cache flushed before each run and the host's launch path off the clock, as ``convgemm bench``
and the tuner time layers (``_runtime.gpu_times``). For trying a tile the tuner does not offer
before adding it to the candidates (session 26: a 256-channel M tile for ResNet-50's l3 1x1
reduce, which the 128-row tiles read twice).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import torch


def parse_try(text: str):
    """``'ALGORITHM:k=v,...'`` -> (algorithm name, {field: int})."""
    name, _, rest = text.partition(":")
    fields = {}
    for item in filter(None, rest.split(",")):
        k, eq, v = item.partition("=")
        if not eq:
            raise ValueError(f"--try {text!r}: {item!r} is not FIELD=VALUE")
        fields[k.strip()] = int(v)
    return name.strip(), fields


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", required=True, help="N,C,H,W,K,R,S[,stride,pad,dil,groups][,nobias] as bench takes it")
    ap.add_argument("--try", dest="tries", action="append", default=[], metavar="ALGORITHM:FIELD=VALUE,...")
    ap.add_argument("--layout", choices=("channels_last", "nchw"), default="channels_last",
                    help="the input's layout (nchw: the tuner and forced NCHW algorithms see it as it is)")  # fmt: skip
    ap.add_argument("--configs", action="append", default=[], metavar="ALGORITHM",
                    help="also time every tuning candidate of ALGORITHM on the layer")  # fmt: skip
    ap.add_argument("--parts", action="store_true",
                    help="also time implicit_gemm_tma's parts_configs (pixel-tile parts, not yet tuner candidates)")  # fmt: skip
    ap.add_argument("--stream", action="store_true",
                    help="also time implicit_gemm_ws's candidates with their stream-K forms (not yet offered to the "
                         "tuner: conv3d.Ws3d.STREAM_CANDIDATES)")  # fmt: skip
    ap.add_argument("--dtype", choices=("bf16", "tf32"), default="bf16",
                    help="tf32: fp32 tensors with TF32 on for cuDNN and convgemm, as bench --dtype tf32")  # fmt: skip
    ap.add_argument("--direct", action="store_true",
                    help="time implicit_gemm_ws's candidates both staged and in the direct-store form that the tuner "
                         "offers in their place (conv3d.Ws3d.direct_form)")  # fmt: skip
    ap.add_argument("--grouped", action="store_true",
                    help="also time grouped_ws's candidates (not yet offered to the tuner: fprop.GroupedWs.CANDIDATES) "
                         "and grouped_tma's")  # fmt: skip
    a = ap.parse_args()
    if a.grouped:
        a.configs = [*a.configs, "grouped_tma", "grouped_ws"]
    if a.stream or a.direct:
        a.configs = [*a.configs, "implicit_gemm_ws"]
    if not torch.cuda.is_available():
        print("config_probe: needs a CUDA GPU", file=sys.stderr)
        return 2

    import convgemm
    from convgemm._runtime import gpu_times, l2_flush
    from convgemm.bench.suites import parse_shape
    from convgemm.conv.fprop import ALGORITHMS
    from convgemm.functional import _prepare

    shp = parse_shape(a.shape)
    dev = torch.device("cuda")
    fmt = torch.channels_last if a.layout == "channels_last" else torch.contiguous_format
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    torch.backends.cudnn.allow_tf32 = a.dtype == "tf32"
    # as the bench does: without it cuDNN runs its heuristic pick, up to 19% slower on ResNeXt's
    # layers (session 55: 256 @56 s2 72.7 us here against 61.2 in the bench), and the ratios
    # printed here flattered convgemm
    torch.backends.cudnn.benchmark = True
    x = torch.randn(shp.n, shp.c, shp.h, shp.w, device=dev).to(dt).contiguous(memory_format=fmt)
    w = (torch.randn(shp.k, shp.c // shp.groups, shp.r, shp.s, device=dev) / (shp.c * shp.r * shp.s) ** 0.5).to(dt)
    w = w.contiguous(memory_format=fmt)  # the bench's weights follow the input's layout
    b = torch.randn(shp.k, device=dev).to(dt) if shp.bias else None
    kw = dict(stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
    flush = l2_flush(dev)

    def time_us(fn) -> float:
        fn()
        t = sorted(gpu_times(fn, 15.0, 10, 200, before=flush))
        return t[len(t) // 2] * 1e3

    ref = torch.nn.functional.conv2d(x, w, b, **kw).float()

    def err(y) -> float:
        return ((y.float() - ref).norm() / ref.norm()).item()

    cudnn_us = time_us(lambda: torch.nn.functional.conv2d(x, w, b, **kw))
    print(f"{'form':<64} {'us':>8} {'vs cuDNN':>8} {'rel err':>9}")
    print(f"{'cudnn':<64} {cudnn_us:8.1f} {1.0:7.2f}x {0.0:9.2e}")
    got = convgemm.conv2d(x, w, b, **kw)
    pick = convgemm.explain(x, w, b, **kw)
    us = time_us(lambda: convgemm.conv2d(x, w, b, **kw))
    tuned = f"tuned {pick['algorithm']} {pick['config']}"
    print(f"{tuned[:64]:<64} {us:8.1f} {cudnn_us / us:7.2f}x {err(got):9.2e}")
    pads = shp.pad if isinstance(shp.pad, tuple) else (shp.pad, shp.pad)
    stride = shp.stride if isinstance(shp.stride, tuple) else (shp.stride, shp.stride)
    dil = shp.dil if isinstance(shp.dil, tuple) else (shp.dil, shp.dil)
    prob, xn, y = _prepare(x, w, b, stride, pads, dil, shp.groups)
    tries = list(a.tries)
    if a.stream:
        # after the tuned call, so that its pick is the tuner's without stream-K
        from convgemm.conv import conv3d

        conv3d.Ws3d.STREAM_CANDIDATES = True
    if a.grouped:
        # after the tuned call, so that its pick is the tuner's without grouped_ws
        from convgemm.conv.fprop import GroupedWs

        GroupedWs.CANDIDATES = True
    if a.direct:
        # the staged forms first; the candidates themselves (direct forms in their place) follow
        from convgemm.conv import conv3d

        conv3d.Ws3d.DIRECT_CANDIDATES = False
        try:
            for cfg in ALGORITHMS["implicit_gemm_ws"].configs(prob):
                fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
                text = "implicit_gemm_ws:" + ",".join(f"{k}={v}" for k, v in fields.items())
                if text not in tries:
                    tries.append(text)
        finally:
            conv3d.Ws3d.DIRECT_CANDIDATES = True
    if "grouped_mma" in a.configs:
        # after the tuned call, so that its pick is the tuner's without grouped_mma
        from convgemm.conv.fprop import GroupedMma

        GroupedMma.CANDIDATES = True
        GroupedMma.MIN_TUNED_CG = 1
        GroupedMma.TMA_CANDIDATES = True
        GroupedMma.MIN_TMA_CG = 1
    for name in a.configs:
        for cfg in ALGORITHMS[name].configs(prob) if name in ALGORITHMS else [None]:
            fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)} if cfg else {}
            tries.append(f"{name}:" + ",".join(f"{k}={v}" for k, v in fields.items()))
    if a.parts:
        for cfg in ALGORITHMS["implicit_gemm_tma"].parts_configs(prob):
            fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
            tries.append("implicit_gemm_tma:" + ",".join(f"{k}={v}" for k, v in fields.items()))
    # every form's kernel compiled at once, as the tuner does (worker processes or threads):
    # one at a time, seven ResNeXt layers' grouped_mma configs took most of a device call
    pairs = []
    for text in tries:
        name, fields = parse_try(text)
        algo = ALGORITHMS.get(name)
        if algo is not None and not algo.supports(prob):
            try:
                pairs.append((algo, dataclasses.replace(algo.default_config(prob), **fields)))
            except Exception:  # noqa: BLE001, S112 - reported by the timing loop below
                continue
    try:
        from convgemm.tune.autotune import _compile_all

        _compile_all(prob, pairs, xn, w, b, lambda algo: torch.empty_like(y))
    except Exception as e:  # noqa: BLE001 - each form then compiles on its first launch
        print(f"(compiling the forms together failed: {type(e).__name__}: {str(e)[:120]})")
    for text in tries:
        name, fields = parse_try(text)
        algo = ALGORITHMS.get(name)
        if algo is None:
            print(f"{text[:64]:<64} unknown algorithm; choose from {', '.join(ALGORITHMS)}")
            continue
        p_t, x_t, y_t = prob, xn, y
        if algo.reads_nchw and a.layout == "nchw":
            # an NCHW reader gets the call as forcing it prepares it (auto may not keep the input
            # for it: gemm_1x1_nchw until timed), the NCHW input as it is
            p_t, x_t, y_t = _prepare(x, w, b, stride, pads, dil, shp.groups, algorithm=name)
        reason = algo.supports(p_t)
        if reason:
            print(f"{text[:64]:<64} not supported: {reason}")
            continue
        try:
            cfg = dataclasses.replace(algo.default_config(p_t), **fields)
            out = torch.empty_like(y_t)
            us = time_us(lambda algo=algo, cfg=cfg, out=out, p_t=p_t, x_t=x_t: algo.run(p_t, x_t, w, b, out, cfg))
        except Exception as e:  # noqa: BLE001 - report and go on to the next form
            print(f"{text[:64]:<64} failed: {type(e).__name__}: {str(e)[:160]}")
            continue
        print(f"{(name + ' ' + cfg.describe())[:64]:<64} {us:8.1f} {cudnn_us / us:7.2f}x {err(out):9.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
