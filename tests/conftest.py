"""Test setup: run the kernels under Triton's interpreter when there is no GPU.

TRITON_INTERPRET must be set before convgemm (and its @triton.jit functions) is imported.
"""

import os
import zlib

if "TRITON_INTERPRET" not in os.environ:
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"

# every output a kernel writes starts as NaN, so unwritten elements fail the comparison
os.environ["CONVGEMM_POISON_OUTPUTS"] = "1"
# no compile worker processes: pytest-xdist's workers would each start a pool of their own
# (tests/test_compile_pool.py starts the ones it tests)
os.environ.setdefault("CONVGEMM_COMPILE_PROCS", "0")

import pytest  # noqa: E402
import torch  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
DEVICE = "cpu" if INTERPRET else "cuda"
if INTERPRET and os.environ.get("CONVGEMM_TEST_FAST_CALLS", "1") != "0":
    import interp_speed

    interp_speed.install()
#: under the interpreter, run only a share of the parametrizations of the tests marked
#: ``interpreter_share`` and of the elements of ``interpreter_subset``: ``CONVGEMM_TEST_ALL=0``,
#: for quicker runs on slow machines. By default the interpreter runs them all, as the GPU does:
#: 9.5 minutes of tests on our two cores (2778 passed) against 7.5 sampled (2230), session 50.
SAMPLE = INTERPRET and os.environ.get("CONVGEMM_TEST_ALL", "1") == "0"
#: Triton's interpreter redoes every int32 add, subtract and multiply of a kernel in int64 and
#: compares it with int32's range (``sanitize_overflow``, on by default), then drops the result:
#: its assertions fire only with its ``debug`` option, which nothing turns on. That work took 40%
#: of ResNet-50's training test (66 -> 40 s without it). So tests run without it, and tests marked
#: ``overflow_checks`` (the fuzz tests: random problems through every algorithm and direction),
#: or every test with ``CONVGEMM_TEST_OVERFLOW=1``, run with both on: an int32 overflow there
#: fails the test. The tests' tensors are small; the GPU tests past 2**31 elements
#: (``test_large.py``) are where index arithmetic meets int32's range, and compiled kernels
#: never check.
OVERFLOW_ALL = INTERPRET and os.environ.get("CONVGEMM_TEST_OVERFLOW", "0") not in ("", "0")


def pytest_collection_modifyitems(config, items):
    if not INTERPRET:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (running under Triton's interpreter)")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
    if not SAMPLE:
        return
    # interpreter_share(k, vary): the parametrizations that differ only in the parameters named
    # in ``vary`` (a dtype, a layout) form a group, and under the interpreter with
    # CONVGEMM_TEST_ALL=0 every k-th of each group runs, from an offset given by a checksum of
    # the group's other parameters: each case still runs, in a dtype or layout that varies from
    # case to case, and the same ones every run (and on every xdist worker). The GPU runs them
    # all. GPU-only parametrizations are left alone (they are skipped here anyway).
    seen: dict = {}
    keep, drop = [], []
    for item in items:
        mark = item.get_closest_marker("interpreter_share")
        spec = getattr(item, "callspec", None)
        if mark is None or spec is None or item.get_closest_marker("gpu") is not None:
            keep.append(item)
            continue
        k, vary = mark.args[0], set(mark.kwargs["vary"])
        fixed = repr(tuple((name, v) for name, v in sorted(spec.params.items()) if name not in vary))
        key = (str(item.path), item.originalname, fixed)
        j = seen[key] = seen.get(key, -1) + 1
        offset = zlib.crc32(f"{item.originalname}|{fixed}".encode())
        (keep if (j + offset) % k == 0 else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def interpreter_subset(seq, k: int) -> list:
    """``seq``; under the interpreter with ``CONVGEMM_TEST_ALL=0`` every k-th element and the
    last (configs of the tests that force every candidate: the interpreter checks their index
    arithmetic, the GPU compiles and runs each)."""
    seq = list(seq)
    if not SAMPLE or len(seq) <= 2:
        return seq
    return list(dict.fromkeys(seq[::k] + seq[-1:]))


@pytest.fixture(autouse=True)
def _interpreter_overflow_checks(request):
    """The interpreter's int32 overflow checks, reporting, for tests marked ``overflow_checks``
    (or every test with ``CONVGEMM_TEST_OVERFLOW=1``); neither computed nor reported for the
    others. The options are restored after each test."""
    if not INTERPRET:
        yield
        return
    import dataclasses

    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    old = builder.options
    on = OVERFLOW_ALL or request.node.get_closest_marker("overflow_checks") is not None
    builder.options = dataclasses.replace(old, sanitize_overflow=on, debug=on)
    yield
    builder.options = old


@pytest.fixture
def device():
    return DEVICE


@pytest.fixture
def fresh_tuning(monkeypatch, tmp_path):
    """A tuner with nothing remembered: an empty cache directory, no in-memory choices and the
    cache's one-time warnings re-armed (``test_tune_cache.py``, ``test_tune_load.py``)."""
    from convgemm.tune import autotune
    from convgemm.tune import cache as tc

    monkeypatch.setenv("CONVGEMM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tc, "_warned", set())
    autotune.clear_memo()
    yield
    autotune.clear_memo()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(1234)


@pytest.fixture
def launched(monkeypatch):
    """The kernels ``fprop._run_kernel`` launches, in order (each still launched)."""
    from convgemm.conv import fprop

    chosen = []
    real = fprop._run_kernel

    def spy(launch, fn, grid, args, constexprs, options):
        chosen.append(fn)
        real(launch, fn, grid, args, constexprs, options)

    monkeypatch.setattr(fprop, "_run_kernel", spy)
    return chosen


@pytest.fixture
def no_tf32():
    """Strict IEEE fp32 convolutions (cuDNN's TF32 flag off) for one test, restored after."""
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32 = old


@pytest.fixture
def tf32_on():
    """fp32 convolutions on TF32 tensor cores (cuDNN's TF32 flag on) for one test, restored after
    (after a module's ``no_tf32``, which runs first)."""
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    yield
    torch.backends.cudnn.allow_tf32 = old


def conv_tensors(shape, dtype):
    """Random channels_last ``(x, weight, bias, conv kwargs)`` on DEVICE for
    ``shape = (N, C, H, W, K, R, S, stride, padding, dilation, groups)``."""
    n, c, h, w, k, r, s, stride, pad, dil, groups = shape
    x = torch.randn(n, c, h, w, device=DEVICE).to(dtype).to(memory_format=torch.channels_last)
    wt = torch.randn(k, c // groups, r, s, device=DEVICE).to(dtype).to(memory_format=torch.channels_last)
    b = torch.randn(k, device=DEVICE).to(dtype)
    return x, wt, b, dict(stride=stride, padding=pad, dilation=dil, groups=groups)
