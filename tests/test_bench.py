"""The benchmark: suites as data, shape parsing, the CLI's arguments, and report rendering (no GPU needed)."""

import csv
import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import convgemm
from convgemm.bench import report
from convgemm.bench.runner import Result, Row
from convgemm.bench.suites import SUITES, Shape, parse_shape, suite
from convgemm.cli import _shapes, build_parser, main

FIXTURE = Path(__file__).parent / "fixtures" / "bench_result.json"
SUITE_NAMES = [*SUITES, "all"]


# ---------------------------------------------------------------- suites
def _meta_output(shp: Shape) -> tuple:
    x = torch.empty(shp.n, shp.c, shp.h, shp.w, device="meta")
    w = torch.empty(shp.k, shp.c // shp.groups, shp.r, shp.s, device="meta")
    b = torch.empty(shp.k, device="meta") if shp.bias else None
    y = F.conv2d(x, w, b, stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
    return tuple(y.shape)


def test_conv3d_suite_shapes_are_valid():
    from convgemm.bench.suites import Shape3d

    shapes = suite("conv3d")
    assert shapes and len({s.name for s in shapes}) == len(shapes)
    for shp in shapes:
        assert isinstance(shp, Shape3d)
        x = torch.empty(shp.n, shp.c, shp.d, shp.h, shp.w, device="meta")
        w = torch.empty(shp.k, shp.c // shp.groups, shp.t, shp.r, shp.s, device="meta")
        y = F.conv3d(x, w, None, stride=shp.stride, padding=shp.pad, dilation=shp.dil, groups=shp.groups)
        assert tuple(y.shape) == (shp.n, shp.k, shp.od, shp.p, shp.q), shp.name
        assert shp.flops == 2 * shp.n * shp.k * shp.od * shp.p * shp.q * shp.c // shp.groups * shp.t * shp.r * shp.s


@pytest.mark.parametrize("name", [n for n in SUITE_NAMES if n != "conv3d"])
def test_suite_shapes_are_valid(name):
    shapes = suite(name)
    assert shapes, name
    for shp in shapes:
        assert isinstance(shp, Shape)
        pairs = [v if isinstance(v, tuple) else (v, v) for v in (shp.stride, shp.pad, shp.dil)]
        assert min(shp.n, shp.c, shp.h, shp.w, shp.k, shp.r, shp.s, *pairs[0], *pairs[2], shp.groups) >= 1, shp
        assert min(pairs[1]) >= 0, shp
        assert shp.c % shp.groups == 0 and shp.k % shp.groups == 0, shp
        assert _meta_output(shp) == (shp.n, shp.k, shp.p, shp.q), shp.name
        assert shp.flops == 2 * shp.n * shp.k * shp.p * shp.q * (shp.c // shp.groups) * shp.r * shp.s
        assert parse_shape(shp.spec()).params() == shp.params(), shp.name  # spec round-trips, bias included


@pytest.mark.parametrize("name", SUITE_NAMES)
def test_suite_names_unique(name):
    names = [s.name for s in suite(name)]
    assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]
    params = [s.params() for s in suite(name)]
    assert len(params) == len(set(params)), f"{name}: the same layer twice"


def test_seed_suite():
    shapes = suite("seed")
    assert len(shapes) == 14
    assert all(s.n == 16 and s.bias and s.pad == 0 and s.groups == 1 for s in shapes)
    assert {(s.r, s.stride) for s in shapes} >= {(11, 4), (7, 2), (5, 1), (3, 1), (1, 1)}


def test_all_is_the_union_of_the_gpu_suites():
    everything = suite("all")
    params = {s.params() for s in everything}
    for name in ("seed", "floor", "resnet50", "craft", "grouped", "small-channel"):
        missing = [s.name for s in suite(name) if s.params() not in params]
        assert not missing, f"{name}: {missing}"
    assert not params & {s.params() for s in suite("tiny")}, "the interpreter demo shapes are not GPU suites"


def test_suites_hold_what_they_promise():
    grouped = suite("grouped")
    assert any(s.groups == 32 for s in grouped)  # ResNeXt
    assert any(s.groups == s.c == s.k and s.r == 7 for s in grouped)  # ConvNeXt depthwise 7x7
    assert any(s.dil == 6 and s.pad == 6 for s in suite("craft"))  # CRAFT's fc6
    assert all(s.c <= 16 or s.k <= 16 for s in suite("small-channel"))
    assert len(suite("floor")) == 8 and all(s.r == s.s == 3 for s in suite("floor"))
    tiny = suite("tiny")
    assert all(s.n * s.c * s.h * s.w <= 4096 for s in tiny)


def test_unknown_suite():
    with pytest.raises(ValueError, match=r"unknown suite 'nope'.*resnet50"):
        suite("nope")


# ---------------------------------------------------------------- parse_shape
@pytest.mark.parametrize(
    "text, want",
    [
        ("2,3,8,9,4,3,3", (2, 3, 8, 9, 4, 3, 3, 1, 0, 1, 1)),
        ("2,3,8,9,4,3,3,2", (2, 3, 8, 9, 4, 3, 3, 2, 0, 1, 1)),
        ("2,3,8,9,4,3,3,2,1", (2, 3, 8, 9, 4, 3, 3, 2, 1, 1, 1)),
        ("2,3,8,9,4,3,3,1,2,2", (2, 3, 8, 9, 4, 3, 3, 1, 2, 2, 1)),
        ("2,4,8,9,8,3,5,1,1,1,4", (2, 4, 8, 9, 8, 3, 5, 1, 1, 1, 4)),
        (" 1, 8 ,5,5,8,1,1", (1, 8, 5, 5, 8, 1, 1, 1, 0, 1, 1)),
    ],
)
def test_parse_shape(text, want):
    shp = parse_shape(text)
    assert shp.params()[:-1] == want
    assert shp.bias
    assert shp.name == f"custom {text}"
    assert parse_shape(text, name="mine").name == "mine"
    bare = parse_shape(text + ",nobias")
    assert bare.params()[:-1] == want and not bare.bias and bare.spec().endswith(",nobias")


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "expected integers"),
        ("1,2,3,4,5,6", "expected 7 to 11 integers.*got 6"),
        ("1,2,3,4,5,6,7,1,0,1,1,1", "expected 7 to 11 integers.*got 12"),
        ("1,2,3,4,5,x,3", "expected integers"),
        ("1,2,3.5,4,5,3,3", "expected integers"),
        ("1;2;8;8;4;3;3", "expected integers"),
        ("0,2,8,8,4,3,3", "sizes must be >= 1"),
        ("1,2,8,8,4,3,3,0", "sizes must be >= 1"),
        ("1,2,8,8,4,3,3,1,-1", "padding >= 0"),
        ("1,2,8,8,4,3,3,1,0,0", "sizes must be >= 1"),
        ("1,6,8,8,4,3,3,1,0,1,4", "groups must divide C and K"),
        ("1,4,8,8,6,3,3,1,0,1,4", "groups must divide C and K"),
        ("1,2,4,4,4,5,5", "output would be empty"),
        ("1,2,5,5,4,3,3,1,0,3", "output would be empty"),
    ],
)
def test_parse_shape_rejects(text, match):
    with pytest.raises(ValueError, match=match):
        parse_shape(text)


# ---------------------------------------------------------------- the CLI
def test_cli_bench_arguments():
    args = build_parser().parse_args(
        ["bench", "--suite", "seed,tiny", "--shape", "1,8,5,5,8,3,3", "--shape", "2,4,9,9,4,1,1,2",
         "--dtype", "fp16,bf16", "--json", "out.json", "--check"]
    )  # fmt: skip
    assert args.cmd == "bench"
    assert args.suite == "seed,tiny"
    assert args.shape == ["1,8,5,5,8,3,3", "2,4,9,9,4,1,1,2"]
    assert args.dtype == "fp16,bf16"
    assert args.json == "out.json"
    assert args.check is True
    shapes = _shapes(args)
    assert len(shapes) == 14 + len(suite("tiny")) + 2
    assert [label for label, _ in shapes].count("custom") == 2
    assert shapes[-1][1].params()[:-1] == (2, 4, 9, 9, 4, 1, 1, 2, 0, 1, 1)


def test_cli_bench_defaults():
    args = build_parser().parse_args(["bench"])
    assert (args.suite, args.shape, args.dtype, args.json, args.csv, args.plot, args.check) == (
        None, [], "bf16", None, None, None, False
    )  # fmt: skip
    assert (args.direction, args.layout, args.baseline, args.rounds) == ("fwd", "channels_last", "cudnn", 3)
    assert args.timer == "gpu"
    assert [label for label, _ in _shapes(args)] == ["seed"] * 14  # no suite, no shape: the seed suite
    only_shape = build_parser().parse_args(["bench", "--shape", "1,8,5,5,8,3,3"])
    assert [label for label, _ in _shapes(only_shape)] == ["custom"]  # a shape alone: no default suite


@pytest.mark.parametrize(
    "argv",
    [[], ["frobnicate"], ["bench", "--layout", "nhwc"], ["bench", "--direction", "bwd"], ["bench", "--check", "yes"]],
)
def test_cli_rejects_bad_arguments(argv, capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    assert info.value.code == 2


@pytest.mark.parametrize(
    "argv, match",
    [
        (["bench", "--dtype", "fp8"], "--dtype 'fp8'"),
        (["bench", "--baseline", "tensorrt"], "--baseline 'tensorrt'"),
        (["bench", "--baseline", "cudnn,inductor,inductor-triton"], "give one of inductor and inductor-triton"),
        (["bench", "--shape", "1,2,3"], "expected 7 to 11 integers"),
        (["bench", "--suite", "nope"], "unknown suite 'nope'"),
        (["bench", "--rounds", "0"], "--rounds 0: give at least 1"),
        (["bench", "--model", "craft", "--modes", "eager,bogus"], "unknown for --model craft: ['bogus']"),
        (["bench", "--model", "resnet50", "--train", "--modes", "fused eager"], "choose from ['eager',"),
    ],
)
def test_cli_bench_refuses_bad_values(argv, match, capsys):
    """Bad values are reported with exit status 2 before anything is run."""
    assert main(argv) == 2
    assert match in " ".join(capsys.readouterr().out.split())


def test_bench_rounds_alternate_and_keep_each_sides_fastest(monkeypatch):
    """``bench_rounds`` times the callables in turn, round after round, each for ``rep_ms /
    rounds``, and reports each one's fastest round (a slow period then costs both sides)."""
    from convgemm.bench import runner

    calls = []
    fake = {"a": iter([30.0, 10.0, 20.0]), "b": iter([5.0, 50.0, 7.0])}

    def timed(fn, rep_ms=100, timer=None):
        calls.append((fn(), rep_ms))
        timers.append(timer)
        return next(fake[fn()])

    timers = []

    monkeypatch.setattr(runner, "_bench", timed)
    got = runner.bench_rounds({"a": lambda: "a", "b": lambda: "b"}, rep_ms=150, rounds=3)
    assert got == {"a": 10.0, "b": 5.0}
    assert calls == [("a", 50), ("b", 50), ("a", 50), ("b", 50), ("a", 50), ("b", 50)]
    monkeypatch.setattr(runner, "ROUNDS", 1)
    fake = {"a": iter([3.0]), "b": iter([4.0])}
    calls.clear()
    assert runner.bench_rounds({"a": lambda: "a", "b": lambda: "b"}, timer="do_bench") == {"a": 3.0, "b": 4.0}
    assert calls == [("a", 100), ("b", 100)]
    assert timers == [None] * 6 + ["do_bench"] * 2  # None: the module's TIMER (--timer)


@pytest.mark.gpu
def test_gpu_timer_keeps_the_host_off_the_clock():
    """The default layer timer counts GPU time only: a call with 300 us of host work before a
    tiny kernel times at the kernel's few microseconds, where do_bench counts the host work
    beyond its L2 flush."""
    import time

    from convgemm.bench import runner

    x = torch.randn(1024, device="cuda")

    def fn():
        t = time.perf_counter()
        while time.perf_counter() - t < 300e-6:
            pass
        x.add_(1.0)

    assert runner._bench(fn, 20, "gpu") < 60
    assert runner._bench(fn, 20, "do_bench") > 150


def test_cli_info(capsys, monkeypatch):
    monkeypatch.setenv("CONVGEMM_PDL", "0")
    monkeypatch.setenv("CONVGEMM_AUTOTUNNE", "0")  # misspelt
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"convgemm {convgemm.__version__}" in out
    assert f"torch {torch.__version__}" in out
    assert "algorithms: " + ", ".join(convgemm.algorithms()) in out
    env = next(line for line in out.splitlines() if line.startswith("environment: "))
    assert "CONVGEMM_PDL=0" in env and "AUTOTUNNE" not in env
    assert "not read by convgemm" in out and "CONVGEMM_AUTOTUNNE" in out


def test_environment_variables_are_the_documented_ones():
    """``_runtime.ENV_VARS`` is docs/environment.md's table, in its order, and every
    ``CONVGEMM_*`` name the sources and tests mention is in it (so ``convgemm info`` flags only
    names nothing reads)."""
    import re
    from pathlib import Path

    from convgemm._runtime import ENV_VARS

    root = Path(__file__).resolve().parents[1]
    table = re.findall(r"^\| `([A-Z_0-9]+)` \|", (root / "docs" / "environment.md").read_text(), re.M)
    assert tuple(table) == ENV_VARS
    mentioned = set()
    for f in [*(root / "src").rglob("*.py"), *(root / "tests").rglob("*.py"), *(root / "tools").glob("*.*")]:
        mentioned |= set(re.findall(r"CONVGEMM_[A-Z0-9_]*[A-Z0-9]", f.read_text()))
    mentioned.discard("CONVGEMM_AUTOTUNNE")  # test_cli_info's misspelling
    assert mentioned <= set(ENV_VARS), sorted(mentioned - set(ENV_VARS))


# ---------------------------------------------------------------- reports
@pytest.fixture
def data():
    return report.load(str(FIXTURE))


def test_fixture_is_schema_correct(data):
    assert set(report.JSON_KEYS) <= set(data)
    assert {"torch", "triton", "cudnn", "convgemm", "driver"} <= set(data["versions"])
    fields = set(Row.__dataclass_fields__)
    for r in data["rows"]:
        assert set(r) == fields
        Row(**r)  # constructible
    assert set(report.ROW_KEYS) <= fields


# (ids "no-<key>": an id of plain "gpu" would make conftest skip the test as a GPU test)
@pytest.mark.parametrize("key", report.JSON_KEYS, ids=lambda k: f"no-{k}")
def test_load_rejects_missing_keys(key, tmp_path):
    d = json.loads(FIXTURE.read_text())
    del d[key]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=f"not a convgemm bench result.*'{key}'"):
        report.load(str(path))


def test_load_rejects_non_json(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("gpu,rows\n")
    with pytest.raises(ValueError):
        report.load(str(path))


@pytest.mark.parametrize(
    "vals, want",
    [([2.0, 8.0], 4.0), ([1.5], 1.5), ([2.0, None, 8.0], 4.0), ([0.0, -1.0, float("nan"), 3.0], 3.0), ([None], None)],
)
def test_geomean(vals, want):
    got = report.geomean(vals)
    assert got == want if want is None else math.isclose(got, want)


def _render(tables) -> str:
    from rich.console import Console

    console = Console(record=True, width=200)
    for t in tables:
        console.print(t)
    return console.export_text()


def test_tables(data):
    tables = report.tables(data)
    assert len(tables) == 2  # one per (dtype, direction)
    text = _render(tables)
    assert "bf16 fwd (channels_last)" in text and "fp16 fwd (channels_last)" in text
    lines = text.splitlines()
    footers = [[c.strip() for c in ln.split("│")[1:-1]] for ln in lines if "geomean" in ln]
    assert len(footers) == 2
    # columns: shape, GFLOP, convgemm µs, cuDNN µs, speedup, TFLOP/s, % roof, cuDNN % roof, algorithm, rel err
    # bf16: speedups 2 and 8 -> 4.00x; % of roofline 40 and 90 -> 60; cuDNN 20 and 11.25 -> 15
    assert footers[0] == ["geomean", "", "", "", "4.00×", "", "60", "15", "", ""]
    # fp16: the failed row (no timings) is left out of the means; one row has an Inductor time
    # (150 us against convgemm's 120), so that table has its two columns after the speedup
    assert footers[1] == ["geomean", "", "", "", "1.50×", "", "1.25×", "", "25", "17", "", ""]
    assert "FAIL" in text and "resnet50 3x3 64->64 @56" in text
    assert "implicit_gemm_tma 128x128x64 w8 s4 t8x16" in text


def test_tables_from_result_match_tables_from_json(data):
    res = Result(data["gpu"], data["versions"], data["ceilings"], data["date"], [Row(**r) for r in data["rows"]])
    assert _render(report.tables(res)) == _render(report.tables(data))


def test_markdown_table(data):
    md = report.markdown_table(data)
    lines = md.splitlines()
    header = (
        "| shape | GFLOP | convgemm µs | cuDNN µs | speedup | TFLOP/s | % roofline | cuDNN % roofline | algorithm |"
    )
    assert lines.count(header) == 1  # floor; the seed group has an Inductor time, so two more columns
    assert lines.count("|---|--:|--:|--:|--:|--:|--:|--:|---|") == 1
    assert lines.count("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|") == 1
    assert "**floor: bf16 fwd, channels_last** — geometric-mean speedup 4.00×" in md
    assert "convgemm at 60% of roofline (cuDNN 15%)" in md
    assert "| resnet50 3x3 64->64 @56 | 14.80 | 50.0 | 100.0 | 2.00 | 296 | 40 | 20 | implicit_gemm_tma |" in lines
    assert "| seed 512x7x7->512 3x3 s1 | 0.19 | - | - | - | - | - | - | - | - | - |" in lines
    assert len([ln for ln in lines if ln.startswith("| seed")]) == 2
    short = report.markdown_table(data, max_rows=1)
    assert len([ln for ln in short.splitlines() if ln.startswith("| seed")]) == 1


def test_inductor_columns_only_when_measured(data):
    """--baseline inductor adds two columns and a footer mean; without it the tables keep their shape."""
    d = json.loads(json.dumps(data))
    for r in d["rows"]:
        r["inductor_us"] = r["inductor_speedup"] = None
    assert "Inductor" not in report.markdown_table(d) and "Inductor" not in _render(report.tables(d))
    floor = [r for r in d["rows"] if r["suite"] == "floor"]
    for r, ind in zip(floor, (100.0, 25.0), strict=True):  # inductor 100 and 25 us
        r["inductor_us"], r["inductor_speedup"] = ind, ind / r["convgemm_us"]
    md = report.markdown_table(d)
    assert "| shape | GFLOP | convgemm µs | cuDNN µs | speedup | Inductor µs | vs Inductor | TFLOP/s |" in md
    assert "| resnet50 3x3 64->64 @56 | 14.80 | 50.0 | 100.0 | 2.00 | 100.0 | 2.00 | 296 |" in md
    want = report.geomean(r["inductor_speedup"] for r in floor)
    assert f"; {want:.2f}× over Inductor" in md
    assert md.count("Inductor µs") == 1  # the other group (fp16) has no Inductor times
    text = _render(report.tables(d))
    footers = [[c.strip() for c in ln.split("│")[1:-1]] for ln in text.splitlines() if "geomean" in ln]
    assert footers[0][5:7] == ["", f"{want:.2f}×"] and len(footers[1]) == 10


def test_inductor_template_only_is_named(data):
    """--baseline inductor-triton (the template alone, issue 9's comparison) is named so in both
    tables; rows without the backends field (results before session 35) read as plain Inductor."""
    d = json.loads(json.dumps(data))
    floor = [r for r in d["rows"] if r["suite"] == "floor"]
    for r in floor:
        r["inductor_us"], r["inductor_speedup"], r["inductor_backends"] = 80.0, 80.0 / r["convgemm_us"], "TRITON"
    md = report.markdown_table(d)
    assert "× over Inductor (Triton template)" in md
    assert "Inductor (Triton template) µs" in _render(report.tables(d))
    floor[0]["inductor_backends"] = "ATEN,TRITON"  # mixed runs are not called template-only
    assert "(Triton template)" not in report.markdown_table(d)


def test_same_layout_columns_only_for_nchw_runs(data):
    """An NCHW run shows cuDNN on the same NCHW input (issue 9's target) beside its best layout."""
    d = json.loads(json.dumps(data))
    assert "same layout" not in _render(report.tables(d)) and "given the same" not in report.markdown_table(d)
    floor = [r for r in d["rows"] if r["suite"] == "floor"]
    for r, same in zip(floor, (200.0, 40.0), strict=True):  # cuDNN on NCHW: 4x and 0.5x convgemm's time
        r["layout"], r["cudnn_same_us"], r["same_speedup"] = "nchw", same, same / r["convgemm_us"]
    want = report.geomean(r["same_speedup"] for r in floor)
    assert math.isclose(want, 2.0**0.5)
    assert f"; {want:.2f}× over cuDNN given the same nchw input" in report.markdown_table(d)
    text = _render(report.tables(d))
    assert "same layout" in text and "vs same" in text
    footers = [[c.strip() for c in ln.split("│")[1:-1]] for ln in text.splitlines() if "geomean" in ln]
    assert [f"{want:.2f}×"] in [f[6:7] for f in footers]


def _parse(v: str):
    if v == "":
        return None
    if v in ("True", "False"):
        return v == "True"
    try:
        return int(v)
    except ValueError:
        pass
    try:
        return float(v)
    except ValueError:
        return v


def test_write_csv_round_trip(data, tmp_path):
    path = tmp_path / "rows.csv"
    report.write_csv(data, str(path))
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == list(Row.__dataclass_fields__)
        back = list(reader)
    assert len(back) == len(data["rows"])
    for got, want in zip(back, data["rows"], strict=True):
        for k, v in want.items():
            g = _parse(got[k])
            if v == "":  # an empty note reads back as None
                assert g is None, k
            elif isinstance(v, float):
                assert math.isclose(g, v), k
            else:
                assert g == v, k
    # a Result writes the same file
    res = Result(data["gpu"], data["versions"], data["ceilings"], data["date"], [Row(**r) for r in data["rows"]])
    path2 = tmp_path / "rows2.csv"
    report.write_csv(res, str(path2))
    assert path2.read_text() == path.read_text()


def test_write_json_round_trip(data, tmp_path):
    res = Result(data["gpu"], data["versions"], data["ceilings"], data["date"], [Row(**r) for r in data["rows"]])
    path = tmp_path / "result.json"
    report.write_json(res, str(path))
    loaded = report.load(str(path))
    assert loaded.pop("method") == {"timer": "gpu", "rounds": 3}  # how the layer timings were taken
    assert loaded == data


def test_plot(data, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "speedup.png"
    report.plot(data, str(path))
    blob = path.read_bytes()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(blob) > 5000


def test_plot_without_timings_writes_nothing(data, tmp_path):
    path = tmp_path / "none.png"
    report.plot({**data, "rows": [r for r in data["rows"] if r["speedup"] is None]}, str(path))
    assert not path.exists()


def test_tune_command_parses_and_refuses_without_a_gpu():
    from conftest import DEVICE

    args = build_parser().parse_args(["tune", "--suite", "craft", "--dtype", "bf16,fp16"])
    assert args.cmd == "tune" and args.suite == "craft" and args.dtype == "bf16,fp16"
    if DEVICE == "cpu":
        assert main(["tune", "--suite", "tiny"]) == 2


def test_bench_direction_choices():
    from convgemm.cli import _directions, build_parser

    args = build_parser().parse_args(["bench", "--direction", "all"])
    assert _directions(args.direction) == ("fwd", "dgrad", "wgrad")
    assert _directions("wgrad") == ("wgrad",)
    args = build_parser().parse_args(["bench", "--direction", "wgrad,dgrad"])
    assert _directions(args.direction) == ("wgrad", "dgrad")
    assert _directions("dgrad,all") == ("dgrad", "fwd", "wgrad")
    for bad in ("sideways", "fwd,bwd", ""):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["bench", "--direction", bad])


def test_bench_model_flags():
    from convgemm.cli import build_parser

    args = build_parser().parse_args(["bench", "--model", "resnet50", "--train", "--no-compile"])
    assert args.model == "resnet50" and args.train and args.no_compile
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "--model", "vgg"])


def test_bench_model_demo_without_gpu(capsys):
    """Without a GPU, --model runs the width-1/8 network under the interpreter and claims no timings."""
    from convgemm.cli import main

    if torch.cuda.is_available():
        pytest.skip("the demo is what runs without a GPU")
    assert main(["bench", "--model", "craft"]) == 0
    assert main(["bench", "--model", "resnet50"]) == 2  # needs --train


def test_model_host_time(monkeypatch):
    """``bench.models.host_us``: the host's time per iteration, iterations issued back to back
    (the GPU synchronised only before and after); the model rows put it in their note."""
    import time

    from convgemm.bench import models
    from convgemm.bench.runner import Row

    syncs, calls = [], []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: syncs.append(len(calls)))
    us = models.host_us(lambda: (calls.append(1), time.sleep(0.002)), 3)
    assert len(calls) == 3 and syncs == [0, 3] and 2000 <= us < 20000
    row = Row("model", "m", "s", "bf16", "inference", "channels_last", 1.0, host_us=1781.2, cudnn_host_us=1999.0)
    models._note_host(row)
    assert row.note == "host 1781 us/iter (cuDNN 1999)"
