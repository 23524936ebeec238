"""Generate the results tables (README.md, docs/results.md) from a committed benchmark JSON.

    python tools/results_table.py benchmarks/results/h200-2026-11-30.json            # print it
    python tools/results_table.py benchmarks/results/h200-2026-11-30.json --update README.md

``--update`` replaces the text between ``<!-- results:start -->`` and ``<!-- results:end -->``;
with ``--block NAME``, between ``<!-- results-NAME:start -->`` and ``<!-- results-NAME:end -->``
(a README may carry several generated tables). Several JSON files (runs of one session on one
machine) render as one block, their rows in the order given, under the first file's header.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from convgemm.bench.report import load, markdown_table  # noqa: E402

START, END = "<!-- results:start -->", "<!-- results:end -->"


def render(*paths: str) -> str:
    data = load(paths[0])
    for p in paths[1:]:
        data = {**data, "rows": data["rows"] + load(p)["rows"]}
    v, c = data["versions"], data["ceilings"]
    src = ", ".join(f"`{p}`" for p in paths)
    head = (
        f"{data['gpu']}, {data['date'][:10]}: torch {v['torch']}, triton {v['triton']}, cuDNN {v['cudnn']}, "
        f"driver {v['driver']}. Measured ceilings: bf16 {c['bf16_tflops']:.0f} TFLOP/s, "
        f"copy {c['copy_gbps'] / 1e3:.2f} TB/s. Source{'s' if len(paths) > 1 else ''}: {src}.\n"
    )
    return head + "\n" + markdown_table(data)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+")
    ap.add_argument("--update", metavar="README", default=None)
    ap.add_argument("--block", default=None, help="update the block named NAME instead of the main one")
    a = ap.parse_args()
    start, end = (
        (START, END) if not a.block else (f"<!-- results-{a.block}:start -->", f"<!-- results-{a.block}:end -->")
    )
    table = render(*a.json)
    if not a.update:
        print(table)
        return 0
    text = open(a.update).read()
    if start not in text or end not in text:
        print(f"{a.update}: markers {start} / {end} not found", file=sys.stderr)
        return 1
    pre, rest = text.split(start, 1)
    _, post = rest.split(end, 1)
    with open(a.update, "w") as f:
        f.write(pre + start + "\n" + table + "\n" + end + post)
    return 0


if __name__ == "__main__":
    sys.exit(main())
