"""Matmul building blocks (no convolution knowledge) and a plain GEMM built from them."""

from .api import matmul
from .blocks import bias_epilogue, gemm_kernel, k_loop, tile_grid

__all__ = ["matmul", "gemm_kernel", "k_loop", "tile_grid", "bias_epilogue"]
