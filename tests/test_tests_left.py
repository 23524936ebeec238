"""tools/tests_left.py: what a timed-out GPU test run left to run again."""

import importlib.util
import os

_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("tests_left", os.path.join(_root, "tools", "tests_left.py"))
tl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tl)

COLLECTED = [
    "tests/test_a.py::test_one",
    "tests/test_a.py::test_two[(2, 16, 9, 9)-nchw-3]",
    "tests/test_b.py::test_x[c16k16_3x3_s(2, 1)p1-dtype0]",
    "tests/test_c.py::test_never_reached",
    "",
    "4 tests collected in 1.2s",
]
LOG = [
    "[gw6] [ 53%] PASSED tests/test_a.py::test_one ",
    "[gw1] [ 71%] FAILED tests/test_a.py::test_two[(2, 16, 9, 9)-nchw-3] ",
    "[gw2] [ 83%] FAILED tests/test_b.py::test_x[c16k16_3x3_s(2, 1)p1-dtype0] ",
    "FAILED tests/test_b.py::test_x[c16k16_3x3_s(2, 1)p1-dtype0] - AssertionError: assert 2 == 1",
]


def test_files_with_unreported_tests_and_the_failures():
    files, failed = tl.tests_left(COLLECTED, [LOG])
    assert files == ["tests/test_c.py"]
    assert failed == [
        "tests/test_a.py::test_two[(2, 16, 9, 9)-nchw-3]",
        "tests/test_b.py::test_x[c16k16_3x3_s(2, 1)p1-dtype0]",
    ]


def test_a_later_pass_clears_a_failure_and_plain_verbose_lines_count():
    rerun = ["tests/test_a.py::test_two[(2, 16, 9, 9)-nchw-3] PASSED                [ 50%]",
             "tests/test_c.py::test_never_reached SKIPPED (needs two GPUs)            [100%]"]  # fmt: skip
    files, failed = tl.tests_left(COLLECTED, [LOG, rerun])
    assert files == [] and failed == ["tests/test_b.py::test_x[c16k16_3x3_s(2, 1)p1-dtype0]"]
