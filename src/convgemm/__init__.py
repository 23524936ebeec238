"""convgemm: GPU convolutions written in Triton, as implicit GEMMs built from reusable matmul blocks."""

from __future__ import annotations

__version__ = "0.2.0"

from . import nn
from . import ops as _ops  # noqa: E402, F401 - registers torch.ops.convgemm.*
from .conv.fprop import ALGORITHMS as _ALGORITHMS
from .functional import conv2d, conv2d_input, conv2d_weight, conv_transpose2d, explain
from .functional1d import conv1d, conv_transpose1d
from .functional3d import conv3d, conv3d_input, conv3d_weight, conv_transpose3d
from .problem import ConvProblem

patch = nn.patch
unpatch = nn.unpatch


def algorithms() -> list[str]:
    """Names of the registered forward algorithms (for ``conv2d(..., algorithm=name)``)."""
    return list(_ALGORITHMS)


__all__ = [
    "conv1d",
    "conv_transpose1d",
    "conv2d",
    "conv2d_input",
    "conv2d_weight",
    "conv_transpose2d",
    "conv3d",
    "conv3d_input",
    "conv3d_weight",
    "conv_transpose3d",
    "explain",
    "nn",
    "patch",
    "unpatch",
    "ConvProblem",
    "algorithms",
    "__version__",
]
