"""tools/profile_call.py's time line: each call's kernels from the profiler's GPU events."""

import importlib.util
import os
import types

import torch

_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("profile_call", os.path.join(_root, "tools", "profile_call.py"))
pc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pc)


def _event(name: str, start: float, end: float, device: bool = True):
    kind = torch.autograd.DeviceType.CUDA if device else torch.autograd.DeviceType.CPU
    return types.SimpleNamespace(name=name, device_type=kind, time_range=types.SimpleNamespace(start=start, end=end))


def test_spans_are_medians_per_call(capsys):
    # three calls of (main, dependent reduce), the reduce starting before the main kernel ends;
    # CPU events and the events' order in the list do not matter
    events = [_event("cpu op", 0, 500, device=False)]
    for t0, main_end, red in ((100, 36, (30, 43)), (200, 37, (29, 45)), (300, 35, (31, 40))):
        events += [_event("reduce", t0 + red[0], t0 + red[1]), _event("main", t0, t0 + main_end)]
    pc.print_spans(types.SimpleNamespace(events=lambda: events), 3)
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "span kernel 0 main: starts 0.00 ends 36.00 us",
        "span kernel 1 reduce: starts 30.00 ends 43.00 us",
        "span per call 43.00 us (median; next call's first kernel 57.00 us after)",  # gaps 57 and 55: the upper median
    ]


def test_spans_skip_a_count_that_is_not_a_whole_number_a_call(capsys):
    events = [_event("main", 0, 10), _event("main", 20, 30), _event("reduce", 31, 33)]
    pc.print_spans(types.SimpleNamespace(events=lambda: events), 2)
    assert "not a whole number a call; skipped" in capsys.readouterr().out
