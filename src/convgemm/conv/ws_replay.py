"""Warm calls of the Gluon kernels (``ws3d``, ``ws_wgrad``), on the host only.

A call plan's ``matmul.launch.Launch`` binds the kernel's launcher on its first call; a warm call
then only hands it the new tensors. That path must cost as little host time as a Triton kernel's
warm call, so it lives here, importing neither Gluon nor the kernels' modules: ``fprop`` and
``backward`` call it from their hot paths without a function-level import, and nothing here builds
a view, a descriptor or (unsplit) a workspace.
"""

from __future__ import annotations

import torch

from .._runtime import may_cache

_counters: dict = {}


def counters(device: torch.device, tiles: int) -> torch.Tensor:
    """Per-tile int32 ticket counters for a split-K (``fprop.split_k_buffers``) or stream-K
    (``ws3d``, through ``matmul.blocks.stream_k_reduce``) launch of ``tiles`` output tiles: zero when a launch starts, and
    every launch leaves them zero, so one buffer per device serves every launch on the default
    stream (launches on one stream never overlap). On a CUDA graph's side stream (``may_cache``
    False) a fresh zeroed buffer, which the graph records. Here rather than in ``fprop`` so that
    the Gluon replay path reaches it without importing the kernels."""
    if not may_cache(device):
        return torch.zeros(max(tiles, 1), dtype=torch.int32, device=device)
    buf = _counters.get(device)
    if buf is None or buf.numel() < tiles:
        buf = _counters[device] = torch.zeros(max(tiles, 1024), dtype=torch.int32, device=device)
    return buf


def fast_ready(launch, split: int) -> bool:
    """Whether a call can be replayed from ``launch`` alone (``Launch.fast``: no descriptors
    built, no arguments bound): its kernel and, with a K split, its finish kernel bound."""
    return (
        launch is not None
        and launch.fast_ready
        and launch.extra is not None
        and (split == 1 or (launch.aux is not None and launch.aux.fast_ready))
    )


def _workspace(launch, split: int, unused: torch.Tensor) -> torch.Tensor:
    # the fp32 partials of a K split (``launch.extra`` elements, the first call's size); an
    # unsplit kernel never touches its workspace pointer (SPLIT is a constexpr), so any tensor
    # of the call stands in for it rather than a fresh allocation per call
    if split > 1:
        return torch.empty(launch.extra, dtype=torch.float32, device=unused.device)
    return unused


def ws_conv3d_replay(launch, x, wp, y, bias, split: int, stream: int = 0, locks: torch.Tensor | None = None) -> None:
    """A warm ``ws3d.ws_conv3d`` call (``fast_ready(launch, split)``): the first call's launches
    on new tensors. Only their addresses matter, so ``x``, ``wp`` and ``y`` may be the caller's
    own tensors rather than the views the first call described (same data pointers: a call plan
    fixes every shape and stride). ``stream``: a stream-K launch, whose ``launch.extra`` is
    (partials' elements, output tiles): a fresh workspace and the ticket counters. ``locks``: a
    grouped launch's fix-up list (``ws3d.ws_conv3d``'s ``fix``)."""
    b = y if bias is None else bias
    if stream:
        elems, tiles = launch.extra
        ws = torch.empty(elems, dtype=torch.float32, device=y.device)
        launch.fast((x, wp, y, b, ws, counters(y.device, tiles)))
        return
    ws = _workspace(launch, split, y)
    # the counters' pointer is unused without stream-K (STREAM is a constexpr) unless it is a
    # grouped launch's fix-up list
    launch.fast((x, wp, y, b, ws, ws if locks is None else locks))
    if split > 1:
        launch.aux.fast((ws, y, b))


def ws_wgrad3d_replay(launch, x: torch.Tensor, dy: torch.Tensor, dw: torch.Tensor, split: int) -> None:
    """A warm ``ws_wgrad.ws_wgrad3d`` call (``fast_ready(launch, split)``), as
    ``ws_conv3d_replay``: argument order (dy, x, workspace, dw), then the finish kernel's
    (workspace, dw)."""
    ws = _workspace(launch, split, dw)
    launch.fast((dy, x, ws, dw))
    if split > 1:
        launch.aux.fast((ws, dw))
