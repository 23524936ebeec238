"""Render benchmark results: rich tables with a geometric-mean footer, JSON, CSV and a figure."""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict

from .runner import Result, Row

JSON_KEYS = ("gpu", "versions", "ceilings", "date", "rows")
ROW_KEYS = ("suite", "name", "dtype", "direction", "layout", "convgemm_us", "cudnn_us", "speedup", "roofline_pct",
            "cudnn_roofline_pct", "algorithm", "rel_err")  # fmt: skip


def geomean(vals) -> float | None:
    vals = [v for v in vals if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def load(path: str) -> dict:
    with open(path) as f:
        data = json.load(f)
    missing = [k for k in JSON_KEYS if k not in data]
    if missing:
        raise ValueError(f"{path}: not a convgemm bench result (missing {missing})")
    return data


def rows_of(data: dict | Result) -> list[dict]:
    if isinstance(data, Result):
        return [r.__dict__ for r in data.rows]
    return data["rows"]


def _fmt(v, spec: str, dash: str = "-") -> str:
    return dash if v is None else format(v, spec)


def tables(data: dict | Result):
    """One rich Table per (dtype, direction, layout), with a geometric-mean footer."""
    from rich.table import Table

    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows_of(data):
        groups[(r["dtype"], r["direction"], r["layout"])].append(r)
    out = []
    for (dtype, direction, layout), rows in groups.items():
        t = Table(title=f"{dtype} {direction} ({layout})", show_footer=True)
        gm = geomean(r["speedup"] for r in rows)
        gm_roof = geomean(r["roofline_pct"] for r in rows)
        gm_croof = geomean(r["cudnn_roofline_pct"] for r in rows)
        cols = [
            ("shape", "geomean", "left"),
            ("GFLOP", "", "right"),
            ("convgemm µs", "", "right"),
            ("cuDNN µs", "", "right"),
            ("speedup", _fmt(gm, ".2f") + "×" if gm else "-", "right"),
            ("TFLOP/s", "", "right"),
            ("% roof", _fmt(gm_roof, ".0f"), "right"),
            ("cuDNN % roof", _fmt(gm_croof, ".0f"), "right"),
            ("algorithm / config", "", "left"),
            ("rel err", "", "right"),
        ]
        ind = any(r.get("inductor_us") for r in rows)
        if ind:  # only when --baseline inductor ran: its time and convgemm's speedup over it
            gm_ind = geomean(r.get("inductor_speedup") for r in rows)
            cols[5:5] = [
                (f"{_inductor_name(rows)} µs", "", "right"),
                ("vs Inductor", _fmt(gm_ind, ".2f") + "×" if gm_ind else "-", "right"),
            ]
        # an NCHW run also shows cuDNN on the same NCHW input (issue 9's target), beside its best layout
        same = layout != "channels_last" and any(r.get("same_speedup") for r in rows)
        if same:
            gm_same = geomean(r.get("same_speedup") for r in rows)
            cols[5:5] = [
                ("cuDNN µs (same layout)", "", "right"),
                ("vs same layout", _fmt(gm_same, ".2f") + "×" if gm_same else "-", "right"),
            ]
        for name, footer, just in cols:
            t.add_column(name, footer=footer, justify=just)
        for r in rows:
            sp = r["speedup"]
            style = None if sp is None else ("green" if sp >= 1.0 else "red" if sp < 0.9 else "yellow")
            cells = [
                r["name"],
                _fmt(r["gflop"], ".2f"),
                _fmt(r["convgemm_us"], ".1f"),
                _fmt(r["cudnn_us"], ".1f"),
                _fmt(sp, ".2f"),
                _fmt(r["tflops"], ".0f"),
                _fmt(r["roofline_pct"], ".0f"),
                _fmt(r["cudnn_roofline_pct"], ".0f"),
                f"{r['algorithm'] or '-'} {r['config'] or ''}".strip(),
                ("" if r["ok"] else "FAIL ") + _fmt(r["rel_err"], ".1e"),
            ]
            if same:
                cells[5:5] = [_fmt(r.get("cudnn_same_us"), ".1f"), _fmt(r.get("same_speedup"), ".2f")]
            if ind:
                cells[5:5] = [_fmt(r.get("inductor_us"), ".1f"), _fmt(r.get("inductor_speedup"), ".2f")]
            t.add_row(*cells, style=style)
        out.append(t)
    return out


def _inductor_name(rows: list[dict]) -> str:
    """The Inductor baseline's name in tables: its TRITON conv backend alone (the conv template,
    and for 1x1 stride-1 layers also Inductor's matmul lowering, ``aten_conv1x1_via_mm``), or
    max-autotune's pick among those and cuDNN (results before session 35 have no backends field)."""
    backends = {r.get("inductor_backends") for r in rows if r.get("inductor_us")}
    return "Inductor (Triton template)" if backends == {"TRITON"} else "Inductor"


def write_json(data: Result, path: str) -> None:
    with open(path, "w") as f:
        json.dump(data.to_json(), f, indent=1)
        f.write("\n")


def write_csv(data: dict | Result, path: str) -> None:
    rows = rows_of(data)
    keys = list(Row.__dataclass_fields__)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k) for k in keys})


def plot(data: dict | Result, path: str) -> None:
    """Per-shape speedup bars (log axis) and % of roofline for convgemm and cuDNN side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows_of(data) if r["speedup"]]
    if not rows:
        return
    labels = [f"{r['name']} [{r['dtype']}]" for r in rows]
    n = len(rows)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(16, max(4, 0.28 * n + 1.5)), sharey=True)
    ys = list(range(n))
    sp = [r["speedup"] for r in rows]
    a1.barh(ys, sp, color=["tab:green" if v >= 1 else "tab:red" for v in sp])
    a1.set_xscale("log")
    a1.axvline(1.0, color="k", lw=0.8)
    a1.set_yticks(ys)
    a1.set_yticklabels(labels, fontsize=7)
    a1.invert_yaxis()
    a1.set_xlabel("speedup over cuDNN (log)")
    h = 0.4
    a2.barh([y - h / 2 for y in ys], [r["roofline_pct"] or 0 for r in rows], height=h, label="convgemm")
    a2.barh([y + h / 2 for y in ys], [r["cudnn_roofline_pct"] or 0 for r in rows], height=h, label="cuDNN")
    a2.set_xlabel("% of roofline")
    a2.legend(loc="lower right")
    gpu = data.gpu if isinstance(data, Result) else data.get("gpu")
    fig.suptitle(f"convgemm vs cuDNN on {gpu}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown_table(data: dict, max_rows: int | None = None) -> str:
    """A Markdown results table (used to generate the README's table from a committed JSON)."""
    lines = []
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows_of(data):
        groups[(r["suite"], r["dtype"], r["direction"], r["layout"])].append(r)
    for (suite, dtype, direction, layout), rows in groups.items():
        lines.append(f"**{suite}: {dtype} {direction}, {layout}** — geometric-mean speedup "
                     f"{_fmt(geomean(r['speedup'] for r in rows), '.2f')}×, convgemm at "
                     f"{_fmt(geomean(r['roofline_pct'] for r in rows), '.0f')}% of roofline "
                     f"(cuDNN {_fmt(geomean(r['cudnn_roofline_pct'] for r in rows), '.0f')}%)\n")  # fmt: skip
        if layout != "channels_last" and any(r.get("same_speedup") for r in rows):
            lines[-1] = lines[-1].rstrip("\n") + (
                f"; {_fmt(geomean(r.get('same_speedup') for r in rows), '.2f')}× over cuDNN given the same "
                f"{layout} input\n"
            )
        ind = any(r.get("inductor_us") for r in rows)
        if ind:
            lines[-1] = lines[-1].rstrip("\n") + (
                f"; {_fmt(geomean(r.get('inductor_speedup') for r in rows), '.2f')}× over {_inductor_name(rows)}\n"
            )
        extra_h, extra_a = (f" {_inductor_name(rows)} µs | vs Inductor |", "--:|--:|") if ind else ("", "")
        lines.append(
            "| shape | GFLOP | convgemm µs | cuDNN µs | speedup |" + extra_h
            + " TFLOP/s | % roofline | cuDNN % roofline | algorithm |"
        )  # fmt: skip
        lines.append("|---|--:|--:|--:|--:|" + extra_a + "--:|--:|--:|---|")
        for r in rows[:max_rows]:
            extra = f" {_fmt(r.get('inductor_us'), '.1f')} | {_fmt(r.get('inductor_speedup'), '.2f')} |" if ind else ""
            lines.append(
                f"| {r['name']} | {_fmt(r['gflop'], '.2f')} | {_fmt(r['convgemm_us'], '.1f')} | {_fmt(r['cudnn_us'], '.1f')} "
                f"| {_fmt(r['speedup'], '.2f')} |{extra} {_fmt(r['tflops'], '.0f')} | {_fmt(r['roofline_pct'], '.0f')} "
                f"| {_fmt(r['cudnn_roofline_pct'], '.0f')} | {r['algorithm'] or '-'} |"
            )
        lines.append("")
    return "\n".join(lines)
