"""tools/tune_log_summary.py --never-won: the evidence behind a tuner candidate prune."""

import importlib.util
import json
import os

_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("tls", os.path.join(_root, "tools", "tune_log_summary.py"))
tls = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tls)


def _log(*rows) -> list[str]:
    lines = [json.dumps({"problem": p, "algorithm": a, "config": c, "us": us}) for p, a, c, us in rows]
    # what a log also holds: the tune summary, a skipped candidate, a torn last line
    return [*lines, json.dumps({"problem": "P", "tune": {"pairs": 3}}), '{"problem": "P", "skipped": "x"}', '{"pro']


def test_forms_that_never_won_pool_tile_sides_and_keep_logs_apart():
    one = _log(
        ("P g32 bf16", "grouped_tma", "64x128x64 w4 s4 t2x8x8 gt16", 100.0),
        ("P g32 bf16", "grouped_tma", "64x256x64 w4 s3 t4x8x8 gt16", 110.0),
        ("P g32 bf16", "grouped_tma", "64x256x64 w4 s3 t8x4x8 gt16", 105.0),
        ("Q g32 bf16", "grouped_direct", "4x32x8 w4 s1", 90.0),
        ("Q g32 bf16", "grouped_tma", "64x256x64 w4 s3 t4x8x8 gt16", 99.0),
        ("R g1 bf16", "gemm_1x1", "64x256x64 w4 s3", 10.0),
    )
    # the same problem in a second run (another log, another machine): twice as fast there, so
    # merged with the first log it would make every first-log ratio about 2x
    two = _log(
        ("P g32 bf16", "grouped_mma", "64x8x16 w4 s3", 50.0),
        ("P g32 bf16", "grouped_direct", "8x16x8 w4 s1", 50.5),
    )
    out = tls.never_won([one, two], only="g32 bf16")
    assert [(f, n) for f, n, _, _ in out] == [
        ("grouped_direct 8x16x8 w4 s1", 1),
        ("grouped_tma 64x256x64 w4 s3 gt16", 3),  # both tile sides, both problems: one form
    ]
    assert abs(out[0][2] - 1.01) < 1e-9
    _, _, best, median = out[1]
    assert abs(best - 1.05) < 1e-9 and abs(median - 1.1) < 1e-9
    # without the filter the 1x1 layer's only candidate won its problem: still not listed
    assert "gemm_1x1 64x256x64 w4 s3" not in {f for f, *_ in tls.never_won([one, two])}
    # a form that wins once anywhere is not listed
    three = _log(("Q g32 bf16", "grouped_tma", "64x256x64 w4 s3 t8x4x8 gt16", 80.0))
    assert "grouped_tma 64x256x64 w4 s3 gt16" not in {f for f, *_ in tls.never_won([one, two, three])}
