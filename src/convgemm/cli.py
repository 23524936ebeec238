"""The ``convgemm`` command: ``convgemm bench ...``, ``convgemm tune ...`` and ``convgemm info``.

Without a CUDA GPU the command re-executes itself with ``TRITON_INTERPRET=1`` (Triton reads it when
kernels are defined, i.e. at import) and ``bench`` becomes a correctness demo on small shapes.
"""

from __future__ import annotations

import argparse
import os
import sys


def _ensure_backend() -> None:
    """Without a GPU, restart under Triton's interpreter before any kernel module is imported."""
    if os.environ.get("TRITON_INTERPRET") is not None:
        return
    import torch

    if torch.cuda.is_available():
        return
    env = dict(os.environ, TRITON_INTERPRET="1")
    os.execve(sys.executable, [sys.executable, "-m", "convgemm", *sys.argv[1:]], env)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="convgemm", description="GPU convolutions in Triton: benchmark and inspect.")
    sub = ap.add_subparsers(dest="cmd", required=True)

    b = sub.add_parser("bench", help="time convgemm against cuDNN on suites of convolution shapes")
    b.add_argument(
        "--suite",
        default=None,
        help="comma-separated suites: seed, floor, resnet50, craft, grouped, small-channel, conv1d, conv3d, all",
    )
    b.add_argument("--model", default=None, choices=["craft", "resnet50"],
                   help="a whole network instead of layers: craft (inference, 1x768x768) or resnet50 (--train)")  # fmt: skip
    b.add_argument("--train", action="store_true", help="with --model resnet50: time a training step (batch 64)")
    b.add_argument("--no-compile", action="store_true", help="with --model: eager only, skip torch.compile")
    b.add_argument("--modes", default=None, metavar="MODE[,MODE...]",
                   help="with --model: only these rows, e.g. 'eager,fused compile' (names as the table prints them "
                        "after the model and size)")  # fmt: skip
    b.add_argument("--shape", action="append", default=[], metavar="N,C,H,W,K,R,S[,stride,pad,dil,groups][,nobias]",
                   help="an extra shape (repeatable)")  # fmt: skip
    b.add_argument("--dtype", default="bf16", help="comma-separated: bf16, fp16, fp32 (strict: no TF32 rounding), tf32")
    b.add_argument(
        "--direction",
        default="fwd",
        type=_direction_arg,
        help="comma-separated: fwd, dgrad (input gradient), wgrad (weight gradient), or all (the three); "
        "backward against cuDNN's convolution_backward",
    )
    b.add_argument(
        "--layout", default="channels_last", choices=["channels_last", "nchw"], help="convgemm's input layout"
    )
    b.add_argument(
        "--baseline",
        default="cudnn",
        help="comma-separated: cudnn, and inductor (max-autotune: its Triton conv template or cuDNN, "
        "whichever it times faster) or inductor-triton (its TRITON conv backend alone: the template, and a matmul "
        "for 1x1 stride-1 layers)",
    )
    b.add_argument("--json", default=None, metavar="PATH", help="write the full result as JSON")
    b.add_argument("--csv", default=None, metavar="PATH", help="write the rows as CSV")
    b.add_argument("--plot", default=None, metavar="PATH.png", help="write a speedup / %% of roofline figure")
    b.add_argument(
        "--check", action="store_true", help="compare every output with the baseline's; exit 1 on a mismatch"
    )
    b.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="timing rounds, convgemm and its baselines in turn; each side's fastest round is reported (default 3)",
    )
    b.add_argument(
        "--timer",
        choices=["gpu", "do_bench"],
        default="gpu",
        help="layer timings: GPU time with the host's launch path off the clock (default), or "
        "triton.testing.do_bench (before session 9: host time beyond ~80 us per call counted); "
        "--model always includes host time",
    )

    t = sub.add_parser("tune", help="tune every shape of a suite now and store the choices in the tuning cache")
    t.add_argument("--suite", default="seed", help="comma-separated suites (as for bench)")
    t.add_argument("--shape", action="append", default=[], metavar="N,C,H,W,K,R,S[,stride,pad,dil,groups][,nobias]")
    t.add_argument("--dtype", default="bf16", help="comma-separated: bf16, fp16, fp32, tf32")
    t.add_argument("--layout", default="channels_last", choices=["channels_last", "nchw"])

    i = sub.add_parser("info", help="print the device, versions, algorithms and the tuning cache")
    for p in (b, t, i):
        p.add_argument("--plugin", action="append", default=[], metavar="FILE.py",
                       help="run this Python file first (as module 'convgemm_plugin'), e.g. to register "
                       "algorithms with convgemm.extend.register_algorithm (docs/extending.md)")  # fmt: skip
    return ap


def load_plugins(paths: list[str]) -> None:
    """Run each plugin file as the module ``convgemm_plugin`` (its ``register_algorithm`` calls
    then apply to this process)."""
    import runpy

    for path in paths:
        if not os.path.isfile(path):
            raise SystemExit(f"convgemm: --plugin {path}: no such file; give the path of a Python file")
        runpy.run_path(path, run_name="convgemm_plugin")


def _shapes(args) -> list:
    from .bench.suites import parse_shape, suite

    out = []
    names = args.suite.split(",") if args.suite else ([] if args.shape else ["seed"])
    for name in (n.strip() for n in names):
        out += [(name, s) for s in suite(name)]
    out += [("custom", parse_shape(s)) for s in args.shape]
    return out


def _bench_model(args, dtypes, console) -> int:
    from .bench import models, report, runner

    if args.model == "resnet50" and not args.train:
        console.print("[red]--model resnet50 times a training step: add --train[/red]")
        return 2
    if args.model == "craft" and args.train:
        console.print("[red]--model craft is inference only: drop --train[/red]")
        return 2
    if args.modes is not None:
        unknown = [m.strip() for m in args.modes.split(",") if m.strip() not in models.MODES[args.model]]
        if unknown:
            console.print(f"[red]--modes: unknown for --model {args.model}: {unknown}; choose from "
                          f"{models.MODES[args.model]}[/red]")  # fmt: skip
            return 2
    if runner.interpreting():
        console.print(
            "[yellow]No CUDA GPU: a correctness demo of the model (width 1/8, 32x32) under Triton's "
            "interpreter. No timings are claimed.[/yellow]"
        )
        return 0 if models.interpreter_demo(args.model, console.print) else 1
    import datetime

    import torch

    res = runner.Result(
        gpu=torch.cuda.get_device_name(0),
        versions=runner.versions(),
        ceilings=runner.measure_ceilings(),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    )
    for dk in dtypes:
        only = None if args.modes is None else [m.strip() for m in args.modes.split(",") if m.strip()]
        if args.model == "craft":
            res.rows += models.bench_craft(dk, not args.no_compile, only=only)
        else:
            res.rows += models.bench_resnet50_train(dk, not args.no_compile, only=only)
    for r in res.rows:
        if r.speedup is None:  # a mode that failed (its note says how)
            console.print(f"{r.name:32s} {r.dtype:5s} {r.note}")
            continue
        console.print(
            f"{r.name:32s} {r.dtype:5s} convgemm {r.convgemm_us:9.1f} us  cuDNN {r.cudnn_us:9.1f} us  "
            f"{r.speedup:5.2f}x  rel_err {r.rel_err:.1e} {'ok' if r.ok else 'MISMATCH'}  {r.note}"
        )
    if args.json:
        report.write_json(res, args.json)
    return 0 if all(r.ok for r in res.rows) else 1


def cmd_bench(args) -> int:
    from rich.console import Console

    from .bench import report, runner

    console = Console()
    dtypes = [d.strip() for d in args.dtype.split(",")]
    for d in dtypes:
        if d not in runner.DTYPES:
            console.print(f"[red]--dtype {d!r}: choose from {sorted(runner.DTYPES)}[/red]")
            return 2
    baselines = [b.strip() for b in args.baseline.split(",")]
    for b in baselines:
        if b not in ("cudnn", *runner.INDUCTOR_BACKENDS):
            console.print(f"[red]--baseline {b!r}: choose from cudnn, {', '.join(runner.INDUCTOR_BACKENDS)}[/red]")
            return 2
    if len([b for b in baselines if b in runner.INDUCTOR_BACKENDS]) > 1:
        console.print(
            "[red]--baseline: give one of inductor and inductor-triton (they share the Inductor columns)[/red]"
        )
        return 2
    if args.rounds < 1:
        console.print(f"[red]--rounds {args.rounds}: give at least 1[/red]")
        return 2
    runner.ROUNDS = args.rounds
    runner.TIMER = args.timer
    from .tune import compile_pool

    compile_pool.prestart()  # the workers import while the first layers' inputs and baselines are set up
    if args.model is not None:
        return _bench_model(args, dtypes, console)
    try:
        shapes = _shapes(args)
    except ValueError as e:
        console.print(f"[red]{e}[/red]")
        return 2

    if runner.interpreting():
        from .bench.suites import suite

        console.print(
            "[yellow]No CUDA GPU: running a correctness demo under Triton's interpreter on small shapes "
            "(convgemm vs float64 PyTorch on the CPU). No timings are claimed.[/yellow]"
        )
        ok = runner.interpreter_demo(suite("tiny"), console.print, _directions(args.direction))
        console.print("[green]all outputs match[/green]" if ok else "[red]some outputs do not match[/red]")
        return 0 if ok else 1

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    directions = _directions(args.direction)
    total = len(shapes) * len(dtypes) * len(directions)
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as prog:
        task = prog.add_task("measuring ceilings", total=total)

        def step(row):
            prog.update(task, advance=1, description=f"{row.dtype} {row.name[:40]}")

        res = runner.run(shapes, dtypes, args.layout, baselines, args.check, progress=step, directions=directions)
    c = res.ceilings
    console.print(
        f"{res.gpu} · ceilings: bf16 {c['bf16_tflops']:.0f}, fp16 {c['fp16_tflops']:.0f}, tf32 {c['tf32_tflops']:.0f}, "
        f"fp32 {c['fp32_tflops']:.1f} TFLOP/s, copy {c['copy_gbps'] / 1e3:.2f} TB/s · torch {res.versions['torch']}, "
        f"triton {res.versions['triton']}, cuDNN {res.versions['cudnn']}"
    )
    for t in report.tables(res):
        console.print(t)
    if args.json:
        report.write_json(res, args.json)
    if args.csv:
        report.write_csv(res, args.csv)
    if args.plot:
        report.plot(res, args.plot)
    bad = [r for r in res.rows if not r.ok]
    if args.check and bad:
        console.print(f"[red]{len(bad)} row(s) failed the check: {', '.join(r.name for r in bad)}[/red]")
        return 1
    return 0


def cmd_tune(args) -> int:
    """Tune (or look up) every shape and print what was chosen; results land in the disk cache."""
    import time

    import torch

    from .bench.runner import DTYPES, interpreting
    from .tune.cache import cache_path

    if interpreting():
        print("convgemm tune: no CUDA GPU; tuning times kernels on a GPU, so there is nothing to tune here")
        return 2
    try:
        shapes = _shapes(args)
    except ValueError as e:
        print(e)
        return 2
    from .tune import compile_pool

    compile_pool.prestart()
    import convgemm

    for d in args.dtype.split(","):
        dtype_key = d.strip()
        if dtype_key not in DTYPES:
            print(f"--dtype {dtype_key!r}: choose from {sorted(DTYPES)}")
            return 2
        torch.backends.cudnn.allow_tf32 = dtype_key == "tf32"
        for _suite, shp in shapes:
            if not hasattr(shp, "h") or hasattr(shp, "d"):
                print(f"{dtype_key:5s} {shp.name[:44]:44s} (3-D: not tuned; one heuristic kernel)")
                continue
            dt = DTYPES[dtype_key]
            x = torch.randn(shp.n, shp.c, shp.h, shp.w, device="cuda", dtype=dt)
            w = torch.randn(shp.k, shp.c // shp.groups, shp.r, shp.s, device="cuda", dtype=dt)
            if args.layout == "channels_last":
                x, w = x.contiguous(memory_format=torch.channels_last), w.contiguous(memory_format=torch.channels_last)
            b = torch.randn(shp.k, device="cuda", dtype=dt) if shp.bias else None
            t0 = time.perf_counter()
            plan = convgemm.explain(x, w, b, stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
            dt_s = time.perf_counter() - t0
            print(f"{dtype_key:5s} {shp.name[:44]:44s} {plan['algorithm']:18s} {plan['config']:30s} {dt_s:6.1f} s")
    print(f"tuning cache: {cache_path()}")
    return 0


def cmd_info(args) -> int:
    import torch
    import triton

    import convgemm

    print(f"convgemm {convgemm.__version__}, torch {torch.__version__}, triton {triton.__version__}")
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        print(f"device: {p.name}, compute capability {p.major}.{p.minor}, {p.multi_processor_count} SMs")
    else:
        print("device: none (kernels run under Triton's interpreter)")
    print("algorithms:", ", ".join(convgemm.algorithms()))
    from .tune.cache import TuneCache, cache_path

    print(f"tuning cache: {cache_path()} ({len(TuneCache())} entries)")
    from ._runtime import env_settings

    known, unknown = env_settings()
    print("environment:", ", ".join(known) if known else "every setting at its default (docs/environment.md)")
    if unknown:
        print(f"not read by convgemm (a misspelling? docs/environment.md lists every variable): {', '.join(unknown)}")
    return 0


_DIRECTIONS = ("fwd", "dgrad", "wgrad")


def _directions(arg: str) -> tuple[str, ...]:
    """``--direction``'s value as the directions to run, in the order given (``all``: the three)."""
    out: list[str] = []
    for d in (v.strip() for v in arg.split(",")):
        for e in _DIRECTIONS if d == "all" else (d,):
            if e not in out:
                out.append(e)
    return tuple(out)


def _direction_arg(arg: str) -> str:
    bad = [d.strip() for d in arg.split(",") if d.strip() not in (*_DIRECTIONS, "all")]
    if bad or not arg.strip():
        raise argparse.ArgumentTypeError(
            f"{arg!r}: give one or more of fwd, dgrad, wgrad, all, comma-separated (e.g. 'dgrad,wgrad')"
        )
    return arg


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        _ensure_backend()
    args = build_parser().parse_args(argv)
    load_plugins(args.plugin)
    return {"bench": cmd_bench, "tune": cmd_tune, "info": cmd_info}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
