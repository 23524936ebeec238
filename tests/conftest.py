"""Test setup: run the kernels under Triton's interpreter when there is no GPU.

TRITON_INTERPRET must be set before convgemm (and its @triton.jit functions) is imported.
"""

import os

if "TRITON_INTERPRET" not in os.environ:
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"

# every output a kernel writes starts as NaN, so unwritten elements fail the comparison
os.environ["CONVGEMM_POISON_OUTPUTS"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
DEVICE = "cpu" if INTERPRET else "cuda"


def pytest_collection_modifyitems(config, items):
    if INTERPRET:
        skip = pytest.mark.skip(reason="needs a CUDA GPU (running under Triton's interpreter)")
        for item in items:
            if item.get_closest_marker("gpu") is not None:
                item.add_marker(skip)


@pytest.fixture
def device():
    return DEVICE


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(1234)


@pytest.fixture
def no_tf32():
    """Strict IEEE fp32 convolutions (cuDNN's TF32 flag off) for one test, restored after."""
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
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
