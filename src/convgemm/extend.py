"""Writing your own forward algorithm: the pieces convgemm's own algorithms are made of.

An algorithm is a subclass of :class:`Algorithm` (``supports``, ``configs``, ``default_config``,
``run``) registered with :func:`register_algorithm`; from then on ``convgemm.conv2d(...,
algorithm=name)`` runs it, and ``algorithm="auto"`` times it against the built-in ones on every
problem it supports (the tuning cache keeps the winner). A GEMM-shaped algorithm is a set of
loaders and a store (``@triton.jit`` functions following the contract in
``convgemm.matmul.blocks``) handed to the shared kernel by :func:`launch_gemm`; the library's own
loaders (``convgemm.conv.loaders``) can be reused. ``docs/extending.md`` walks through
``examples/patchify_algorithm.py``, a complete one.
"""

from __future__ import annotations

import torch

from ._runtime import cdiv, dense_bias, interpreting
from .conv import loaders
from .conv.fprop import ALGORITHMS, Algorithm, Config, _launch
from .matmul import blocks
from .problem import ConvProblem

__all__ = [
    "Algorithm",
    "Config",
    "ConvProblem",
    "blocks",
    "interpreting",
    "launch_gemm",
    "loaders",
    "register_algorithm",
    "unregister_algorithm",
]


def launch_gemm(
    prob: ConvProblem,
    cfg: Config,
    *,
    a: tuple,
    b: tuple,
    c: tuple,
    fns: tuple,
    m: int,
    n: int,
    k_tiles: int,
    y: torch.Tensor,
    bias: torch.Tensor | None = None,
    batch: int = 1,
    launch=None,
) -> None:
    """Run the shared GEMM kernel (``matmul.blocks.gemm_kernel``) once: ``C[g] = A[g] @ B[g]`` for
    ``g < batch``, plus ``bias`` along N and ``prob.activation``, tiled ``cfg.block_m x
    cfg.block_n`` with K tiles of ``cfg.block_k`` on ``cfg.num_warps`` warps and
    ``cfg.num_stages`` pipeline stages (the plain kernel: no split-K, persistent, stream-K or
    multi-part configs).

    ``a``, ``b``, ``c``: each ``(TMA descriptor or None, tuple of pointers and ints)``, handed to
    your ``A_INIT``, ``B_INIT`` and ``C_STORE`` as they are. ``fns``: ``(A_INIT, A_LOAD, B_INIT,
    B_LOAD, C_STORE)``. ``m``, ``n``: the GEMM's rows and columns per batch entry; ``bias``, when
    given, holds ``batch * n`` values, entry ``g * n + j`` added to column j of C[g] (a grouped
    convolution's ``[K]`` bias with ``n = K / groups``). ``k_tiles``: K tiles per output tile.
    ``y``: the output (a placeholder pointer where there is no bias). ``launch``: the ``launch``
    argument ``Algorithm.run`` was given (the call plan's handle: repeat calls skip Triton's
    dispatch and replay the kernel it first launched), or None. An algorithm that launches a
    second kernel in one ``run`` gives it its own handle, ``matmul.launch.aux_of(launch)``.
    """
    if len(fns) != 5:
        raise ValueError(f"fns: (A_INIT, A_LOAD, B_INIT, B_LOAD, C_STORE), got {len(fns)} functions")
    special = {f: getattr(cfg, f) for f in ("persistent", "stream_k", "parts", "reduce", "taps", "ring")}
    if cfg.split_k > 1 or any(special.values()):
        raise ValueError(f"launch_gemm runs the plain kernel: config {cfg.describe()} asks for split-K, persistent, "
                         "stream-K or other tiles it does not set up; use Config(block_m, block_n, block_k, "
                         "num_warps, num_stages)")  # fmt: skip
    if bias is not None and bias.numel() != batch * n:
        raise ValueError(f"launch_gemm: bias has {bias.numel()} values, the GEMM {batch} x {n} columns: give "
                         "batch * n (the bias of every batch entry, one after another)")  # fmt: skip
    bias = dense_bias(bias)
    num_m, num_n = cdiv(m, cfg.block_m), cdiv(n, cfg.block_n)
    _launch(launch, (num_m * num_n, batch), a, b, c, bias, y, n, num_m, num_n, k_tiles, cfg, fns, False, prob,
            act=prob.activation)  # fmt: skip


def register_algorithm(algo: Algorithm, *, replace: bool = False) -> Algorithm:
    """Make ``algo`` a forward algorithm of this process: ``conv2d(..., algorithm=algo.name)``
    runs it, and the tuner times it on every problem it supports, as every forward convolution
    convgemm runs (a stride-1 dgrad and conv1d are such convolutions too). Untuned
    (``CONVGEMM_AUTOTUNE=0``), the heuristic takes the first algorithm in its order whose
    ``heuristic_ok`` holds; registered ones come last but ``implicit_gemm``. It must read NHWC
    input (channel stride 1; ``reads_nchw`` False). Returns ``algo``.

    Registering forgets earlier tuning results and plans of this process, so problems already seen
    are tuned again with it; a process with registered algorithms keeps tuning-cache entries of
    its own (their names are part of the key). Errors raised by a registered algorithm's
    ``supports`` or ``configs``, or by its first run while tuning, skip it with a warning.
    ``replace=True`` replaces an algorithm registered under the same name (built-in ones cannot be
    replaced). Register before other threads run convolutions.
    """
    from .tune import autotune

    if not isinstance(algo, Algorithm):
        raise TypeError(f"register_algorithm: {algo!r} is not a convgemm.extend.Algorithm; subclass it")
    name = algo.name
    if not isinstance(name, str) or not name or name in ("auto", "?"):
        raise ValueError(f"register_algorithm: {type(algo).__name__} needs a name (a class attribute), not {name!r}")
    if algo.reads_nchw:
        raise ValueError(f"register_algorithm: {name!r} reads NCHW input; registered algorithms take NHWC "
                         "(channel stride 1): set reads_nchw = False")  # fmt: skip
    with autotune._lock:
        user = autotune.USER_ALGORITHMS
        if name in ALGORITHMS and name not in user:
            raise ValueError(f"register_algorithm: {name!r} is a built-in algorithm; choose another name")
        if name in user and not replace:
            raise ValueError(f"register_algorithm: {name!r} is already registered; pass replace=True to replace it")
        ALGORITHMS[name] = algo
        user.add(name)
        order = [n for n in autotune._HEURISTIC_ORDER if n != name]
        order.insert(order.index("implicit_gemm"), name)  # after every built-in but the general one
        autotune._HEURISTIC_ORDER = tuple(order)
    autotune.clear_memo()
    return algo


def unregister_algorithm(name: str) -> None:
    """Remove an algorithm :func:`register_algorithm` added (and forget tuning results and plans
    of this process that may have chosen it)."""
    from .tune import autotune

    with autotune._lock:
        user = autotune.USER_ALGORITHMS
        if name not in user:
            raise ValueError(f"unregister_algorithm: {name!r} was not registered with register_algorithm "
                             f"(registered: {sorted(user)})")  # fmt: skip
        # the order first: the tuner looks names of the order up in ALGORITHMS
        autotune._HEURISTIC_ORDER = tuple(n for n in autotune._HEURISTIC_ORDER if n != name)
        del ALGORITHMS[name]
        user.discard(name)
    autotune.clear_memo()
