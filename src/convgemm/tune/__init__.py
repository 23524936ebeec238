"""Choosing an algorithm and a config for each problem."""

from .autotune import choose, clear_memo

__all__ = ["choose", "clear_memo"]
