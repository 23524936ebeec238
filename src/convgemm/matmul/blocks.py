"""Matmul building blocks: tile scheduling, the K loop, the epilogue. No convolution knowledge.

A kernel built from these blocks is a batched GEMM ``C[b] = A[b] @ B[b] (+ bias)`` whose operands
come from *loaders* and whose result goes to a *store*, all passed in as ``tl.constexpr``
``@triton.jit`` functions. The contract every loader and store follows:

``A_INIT(a_desc, a_args, pid_m, batch, BLOCK_M, BLOCK_K) -> a_state``
    Called once per output tile; computes whatever the loader needs for the M rows of tile
    ``pid_m`` of batch entry ``batch`` (row offsets, masks, descriptor coordinates). ``a_desc`` is
    a TMA tensor descriptor or None and ``a_args`` a tuple of pointers and integers, both as the
    host passed them. (Descriptors are separate arguments because Triton's launcher only accepts
    them at the top level of a kernel's signature, not inside tuples.)
``A_LOAD(a_state, kt, BLOCK_M, BLOCK_K) -> [BLOCK_M, BLOCK_K] tile``
    The ``kt``-th K tile of A for this output tile. Elements outside the problem must be zero.
``B_INIT(b_desc, b_args, pid_n, batch, BLOCK_N, BLOCK_K) -> b_state`` and
``B_LOAD(b_state, kt, BLOCK_N, BLOCK_K) -> [BLOCK_K, BLOCK_N] tile``
    The same for B.
``C_STORE(c_desc, c_args, acc, pid_m, pid_n, batch, BLOCK_M, BLOCK_N)``
    Writes the fp32 tile ``acc`` (bias already added) to its destination, casting to the output
    dtype and masking or clipping what lies outside.

``K_RANGE(a_state, b_state, k_tiles) -> (kt_lo, kt_hi)`` (optional; ``gemm_kernel`` only)
    This program's own K tiles ``kt_lo <= kt < kt_hi``, when they depend on the tile or the batch
    entry: strided dgrad's phases each have their own taps, and a 3-D tile whose depth taps read
    only zero padding skips them. Split-K splits this range. Without it every program runs
    ``0 <= kt < k_tiles``.

Assumptions: accumulation is fp32; without ``K_RANGE``, ``k_tiles`` is the same for every tile of
a launch.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


@triton.jit
def tile_grid(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Program id -> (pid_m, pid_n) in grouped order.

    Consecutive programs walk down a column band of ``GROUP_M`` M tiles before moving to the next
    N tile, so the B tiles they share (and the A tiles of the band) stay in L2.
    """
    num_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_in_group
    first_m = group_id * GROUP_M
    group_size = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile_id % num_in_group) % group_size
    pid_n = (tile_id % num_in_group) // group_size
    return pid_m, pid_n


@triton.jit
def batch_tile_grid(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr, BATCHES: tl.constexpr):
    """``(batch, pid_m, pid_n)`` of tile ``tile_id`` in a list of ``BATCHES`` batch entries'
    tiles (``tile_grid`` within each entry); no division when there is one entry."""
    if BATCHES == 1:
        batch = 0
        pid_m, pid_n = tile_grid(tile_id, num_pid_m, num_pid_n, GROUP_M)
    else:
        batch = tile_id // (num_pid_m * num_pid_n)
        pid_m, pid_n = tile_grid(tile_id - batch * (num_pid_m * num_pid_n), num_pid_m, num_pid_n, GROUP_M)
    return batch, pid_m, pid_n


@triton.jit
def _tf32_round(bits):
    # an fp32 bit pattern rounded to the nearest TF32 value (10 mantissa bits; ties away from
    # zero): adding half of the 13 dropped bits carries into the kept ones exactly then
    return ((bits + 4096) & -8192).to(tl.float32, bitcast=True)


@triton.jit
def _tf32_parts(v):
    # v = hi + lo: hi is v rounded to the nearest TF32 value (which the tensor core reads
    # without loss), lo = v - hi (exact in fp32, |lo| <= 2^-11 |v|) rounded to TF32 too, so that
    # the tensor core's own truncation of an fp32 operand never applies. A finite v within half
    # a TF32 step of the largest float would round to Inf: it keeps the truncated hi. Where v is
    # not finite, hi is v itself and the returned hi_f and lo are zero, so that the cross
    # products never make Inf - Inf or 0 * Inf: Inf and NaN reach the result only through
    # hi * hi, as they do through an IEEE product.
    bits = v.to(tl.int32, bitcast=True)
    hi = _tf32_round(bits)
    hi = tl.where(hi - hi == 0, hi, (bits & -8192).to(tl.float32, bitcast=True))
    finite = v - v == 0
    lo = _tf32_round((v - hi).to(tl.int32, bitcast=True))
    return tl.where(finite, hi, v), tl.where(finite, hi, 0.0), tl.where(finite, lo, 0.0)


@triton.jit
def dot_acc(a, b, acc, PRECISION: tl.constexpr):
    """``acc + a @ b`` at ``PRECISION``: ``'tf32'`` or ``'ieee'`` as ``tl.dot`` has them, or
    ``'tf32x3'`` for fp32 operands: a_hi*b_hi + a_hi*b_lo + a_lo*b_hi on TF32 tensor cores
    (3xTF32), the operands split at the nearest TF32 value (``_tf32_parts``).

    The three products of one call are summed on the tensor core from zero and then added to
    ``acc`` by an IEEE fp32 add: the tensor core's own fp32 accumulation loses accuracy with the
    number of products it sums, as if each add truncated (``tools/tf32x3_probe.py`` on the H200,
    1024 x K x 1024 of N(0, 1): with one tensor-core accumulator over all of K the relative error was
    4e-6 at K = 576 and 1.3e-4 at K = 18432; summed per K tile, 1.5e-7 to 4.5e-7, under cuBLAS's
    own fp32 at 4.3e-7 to 1.2e-6). Triton's ``input_precision='tf32x3'`` is not used: its low
    parts turn an Inf operand into NaN (Inf - Inf) and it accumulates on the tensor core."""
    if PRECISION == "tf32x3":
        a_hi, a_hf, a_lo = _tf32_parts(a)
        b_hi, b_hf, b_lo = _tf32_parts(b)
        part = tl.dot(a_lo, b_hf, input_precision="tf32")
        part = tl.dot(a_hf, b_lo, part, input_precision="tf32")
        part = tl.dot(a_hi, b_hi, part, input_precision="tf32")
        acc += part
    else:
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    return acc


@triton.jit
def k_loop(
    a_state,
    b_state,
    kt_start,
    kt_end,
    A_LOAD: tl.constexpr,
    B_LOAD: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr,  # "ieee", "tf32" or "tf32x3" (dot_acc): chosen at compile time
    UPCAST: tl.constexpr,  # dot in fp32: Triton's interpreter multiplies raw bf16 bits otherwise
):
    """Accumulate ``sum_kt A_LOAD(kt) @ B_LOAD(kt)`` over ``kt_start <= kt < kt_end`` in fp32 and
    return the [BLOCK_M, BLOCK_N] tile.

    The loop is a plain ``for`` so that Triton's software pipeliner can multi-buffer the loads
    (``num_stages``) and, on Hopper, keep ``wgmma`` asynchronous.
    """
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(kt_start, kt_end):
        a = A_LOAD(a_state, kt, BLOCK_M, BLOCK_K)
        b = B_LOAD(b_state, kt, BLOCK_N, BLOCK_K)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = dot_acc(a, b, acc, PRECISION)
    return acc


@triton.jit
def k_loop_f64(
    a_state,
    b_state,
    kt_start,
    kt_end,
    A_LOAD: tl.constexpr,
    B_LOAD: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """The K loop for float64 operands: accumulates in float64 (used for reference-grade checks)."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64)
    for kt in range(kt_start, kt_end):
        a = A_LOAD(a_state, kt, BLOCK_M, BLOCK_K)
        b = B_LOAD(b_state, kt, BLOCK_N, BLOCK_K)
        acc = tl.dot(a, b, acc, input_precision="ieee", out_dtype=tl.float64)
    return acc


@triton.jit
def bias_epilogue(acc, bias_ptr, offs, mask, HAS_BIAS: tl.constexpr, ALONG_M: tl.constexpr):
    """Add ``bias[offs]`` to ``acc`` in acc's precision: one value per row (``ALONG_M``) or per column."""
    if HAS_BIAS:
        b = tl.load(bias_ptr + offs, mask=mask, other=0.0).to(acc.dtype)
        if ALONG_M:
            acc = acc + b[:, None]
        else:
            acc = acc + b[None, :]
    return acc


ACTIVATIONS = ("relu",)  # what ``activation_epilogue`` (and so ``convgemm.conv2d``) can fuse


@triton.jit
def activation_epilogue(acc, ACT: tl.constexpr):
    """``ACT`` applied to the finished tile (after the bias): ``""`` none, ``"relu"`` max(x, 0)
    with NaN kept, as ``torch.relu`` keeps it (``x < 0`` is false for NaN)."""
    if ACT == "relu":
        acc = tl.where(acc < 0, 0.0, acc)
    return acc


@triton.jit
def split_range(kt_lo, kt_hi, SPLIT_K: tl.constexpr):
    """This program's K tiles ``[start, end)`` of ``[kt_lo, kt_hi)``: all of them, or with
    ``SPLIT_K > 1`` its share of an even split over grid axis 2 (possibly empty: its partial is
    then zero). The split count is the grid's size there, not a compile-time constant, so one
    compiled kernel serves every split count."""
    kt_start = kt_lo
    kt_end = kt_hi
    if SPLIT_K > 1:
        per_split = tl.cdiv(kt_hi - kt_lo, tl.num_programs(2))
        kt_start = kt_lo + tl.program_id(2) * per_split
        kt_end = tl.minimum(kt_start + per_split, kt_hi)
    return kt_start, kt_end


@triton.jit
def split_k_reduce(acc, ws_ptr, lock_ptr, tile, split, n_split, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Combine the ``n_split`` partial tiles of one output tile; returns (sum, is_last).

    Every split writes its fp32 partial to the workspace and takes a ticket from the tile's
    counter; the split that draws the last ticket adds the others' partials to its own and
    finishes the tile (``is_last``), then zeroes the counter so the buffer is ready for the next
    launch. No second kernel, no atomics on the output, and the sum is taken in split order, so
    the result does not depend on which split finished last.
    """
    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    base = ws_ptr + tile.to(tl.int64) * n_split * (BLOCK_M * BLOCK_N)
    tl.store(base + split * (BLOCK_M * BLOCK_N) + offs, acc)
    tl.debug_barrier()  # every thread's partial is written before the ticket is taken
    ticket = tl.atomic_add(lock_ptr + tile, 1, sem="acq_rel", scope="gpu")
    is_last = ticket == n_split - 1
    total = tl.zeros((BLOCK_M, BLOCK_N), dtype=acc.dtype)
    if is_last:
        # unrolled so that several partials' loads are in flight at once: a rolled loop waits
        # one L2 round trip per split before the next load issues (the order of the sum is kept)
        for s in tl.range(0, n_split, loop_unroll_factor=4):
            total += tl.load(base + s * (BLOCK_M * BLOCK_N) + offs, cache_modifier=".cg")
        tl.store(lock_ptr + tile, 0)
    return total, is_last


@triton.jit
def split_k_store(acc, ws_ptr, tile, split, n_split, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Write this split's fp32 partial of output tile ``tile`` to the workspace, for
    ``split_k_finish_kernel`` (the layout ``split_k_reduce`` uses: tile-major, then split)."""
    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    base = ws_ptr + (tile.to(tl.int64) * n_split + split) * (BLOCK_M * BLOCK_N)
    tl.store(base + offs, acc)


@triton.jit
def split_k_finish_kernel(
    ws_ptr,  # n_split partials per output tile, as split_k_store wrote them
    c_desc,
    c_args,
    num_pid_m,
    num_pid_n,
    n_split,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SUB_M: tl.constexpr,  # rows of a tile per program
    C_STORE: tl.constexpr,
    PDL: tl.constexpr = False,  # launched as a programmatic dependent of the GEMM (its PDL_TRIGGER)
):
    """The second half of a two-kernel split-K: grid = (tiles * BLOCK_M / SUB_M, batch). Each
    program sums ``SUB_M`` rows of one tile over its ``n_split`` partials, in split order (the
    result is the same on every run), and stores them with ``C_STORE`` as rows ``sub`` of a tile
    of ``SUB_M`` rows (stores that place row ``pid_m * BLOCK_M + i``, as the pointer stores do).

    ``split_k_reduce`` leaves each tile's sum to its last split alone: for a few large tiles
    split many ways (a weight gradient: 128x128 fp32 tiles, 29 splits, 1.9 MB per tile) that
    one program's serial read is the kernel's tail. Here every tile's sum is spread over
    ``BLOCK_M / SUB_M`` programs. With ``PDL`` it may start before the GEMM ends, and waits for
    the GEMM's completion and memory (``gdc_wait``) before reading a partial."""
    if PDL:
        gdc_wait()
    subs: tl.constexpr = BLOCK_M // SUB_M
    pid = tl.program_id(0)
    batch = tl.program_id(1)
    t = pid // subs
    sub = pid - t * subs
    pid_m = t // num_pid_n
    pid_n = t - pid_m * num_pid_n
    tile = (batch * num_pid_m + pid_m) * num_pid_n + pid_n
    offs = (sub * SUB_M + tl.arange(0, SUB_M))[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    base = ws_ptr + tile.to(tl.int64) * n_split * (BLOCK_M * BLOCK_N)
    acc = tl.zeros((SUB_M, BLOCK_N), dtype=ws_ptr.dtype.element_ty)
    for s in tl.range(0, n_split, loop_unroll_factor=4):
        acc += tl.load(base + s * (BLOCK_M * BLOCK_N) + offs, cache_modifier=".cg")
    C_STORE(c_desc, c_args, acc, pid_m * subs + sub, pid_n, batch, SUB_M, BLOCK_N)


@triton.jit
def gemm_kernel(
    a_desc,
    a_args,
    b_desc,
    b_args,
    c_desc,
    c_args,
    bias_ptr,
    bias_len,  # bias entries per batch entry (rows of C with BIAS_ALONG_M, else columns)
    num_pid_m,
    num_pid_n,
    k_tiles,
    ws_ptr,  # SPLIT_K > 1: workspace in the accumulator dtype, SPLIT_K * BLOCK_M * BLOCK_N per output tile
    lock_ptr,  # SPLIT_K > 1: one int32 counter per output tile, zero before the launch (and after)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    A_INIT: tl.constexpr,
    A_LOAD: tl.constexpr,
    B_INIT: tl.constexpr,
    B_LOAD: tl.constexpr,
    C_STORE: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BIAS_ALONG_M: tl.constexpr,  # the transposed conv view puts output channels on M
    PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
    F64: tl.constexpr,  # float64 operands: accumulate in float64
    # > 1: K tiles split over grid axis 2 (its size is the split count); 2: the last split of a
    # tile sums the partials (split_k_reduce), 3: every split only writes its partial, and
    # split_k_finish_kernel sums them
    SPLIT_K: tl.constexpr = 1,
    ACT: tl.constexpr = "",  # activation_epilogue after the bias: "" or one of ACTIVATIONS
    K_RANGE: tl.constexpr = None,  # optional fn(a_state, b_state, k_tiles) -> this program's (kt_lo, kt_hi)
    PDL_TRIGGER: tl.constexpr = False,  # let a programmatic dependent launch after it start early
):
    """One output tile (or one of its K ranges) per program:
    grid = (num_pid_m * num_pid_n, batch, number of K splits).

    Every kernel of convgemm is this function with different loaders and stores; see the module
    docstring for their contract. Split-K lets a problem with few output tiles and a long
    reduction fill the GPU: the splits of a tile meet in ``split_k_reduce``.

    ``PDL_TRIGGER``: each program first signals that the next kernel on the stream, if it was
    launched as a programmatic dependent (``launch_pdl``), may start; that kernel waits for this
    one's completion and memory with ``gdc_wait`` before reading anything it wrote (Hopper's grid
    dependency control; a second launch's start-up then overlaps this one's last wave).
    """
    if PDL_TRIGGER:
        gdc_launch_dependents()
    pid_m, pid_n = tile_grid(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
    batch = tl.program_id(1)
    a_state = A_INIT(a_desc, a_args, pid_m, batch, BLOCK_M, BLOCK_K)
    b_state = B_INIT(b_desc, b_args, pid_n, batch, BLOCK_N, BLOCK_K)
    kt_lo = 0
    kt_hi = k_tiles
    if K_RANGE is not None:
        # a reduction whose taps depend on the tile or the batch entry (strided dgrad: each stride
        # phase of dx has its own filter taps; a 3-D tile near the volume's front or back: depth
        # taps that read only padding) runs only its own K tiles, not the whole filter's
        kt_lo, kt_hi = K_RANGE(a_state, b_state, k_tiles)
    kt_start, kt_end = split_range(kt_lo, kt_hi, SPLIT_K)
    if F64:
        acc = k_loop_f64(a_state, b_state, kt_start, kt_end, A_LOAD, B_LOAD, BLOCK_M, BLOCK_N, BLOCK_K)
    else:
        acc = k_loop(a_state, b_state, kt_start, kt_end, A_LOAD, B_LOAD, BLOCK_M, BLOCK_N, BLOCK_K, PRECISION, UPCAST)
    is_last = True
    if SPLIT_K == 3:
        tile = (batch * num_pid_m + pid_m) * num_pid_n + pid_n
        split_k_store(acc, ws_ptr, tile, tl.program_id(2), tl.num_programs(2), BLOCK_M, BLOCK_N)
        is_last = False
    elif SPLIT_K > 1:
        tile = (batch * num_pid_m + pid_m) * num_pid_n + pid_n
        acc, is_last = split_k_reduce(
            acc, ws_ptr, lock_ptr, tile, tl.program_id(2), tl.num_programs(2), BLOCK_M, BLOCK_N
        )
    if is_last:
        if BIAS_ALONG_M:
            offs = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        else:
            offs = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = bias_epilogue(acc, bias_ptr, batch * bias_len + offs, offs < bias_len, HAS_BIAS, BIAS_ALONG_M)
        acc = activation_epilogue(acc, ACT)
        C_STORE(c_desc, c_args, acc, pid_m, pid_n, batch, BLOCK_M, BLOCK_N)


@triton.jit
def persistent_gemm_kernel(
    a_desc,
    a_args,
    b_desc,
    b_args,
    c_desc,
    c_args,
    bias_ptr,
    bias_len,
    num_pid_m,
    num_pid_n,
    k_tiles,
    ws_ptr,  # unused: the signature is gemm_kernel's, so one launcher serves both
    lock_ptr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    A_INIT: tl.constexpr,
    A_LOAD: tl.constexpr,
    B_INIT: tl.constexpr,
    B_LOAD: tl.constexpr,
    C_STORE: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BIAS_ALONG_M: tl.constexpr,
    PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
    F64: tl.constexpr,
    SPLIT_K: tl.constexpr = 1,
    ACT: tl.constexpr = "",
    K_RANGE: tl.constexpr = None,  # gemm_kernel's signature; must be None here (every tile runs k_tiles)
    BATCHES: tl.constexpr = 1,  # batch entries (gemm_kernel's grid axis 1: groups), walked as one tile list
    PDL_TRIGGER: tl.constexpr = False,  # as gemm_kernel's
):
    """``gemm_kernel``'s work with a fixed number of programs (grid = (programs,)), each walking
    the output tiles ``pid, pid + programs, ...`` of the ``BATCHES`` batch entries in turn.

    The tile loop asks Triton to flatten it with the K loop into one software-pipelined loop
    (``tl.range(..., flatten=True)``), so that the loads of a program's next tile would be in
    flight while it finishes the current one's epilogue. Triton 3.6 leaves the loops nested: it
    fuses them only where it knows the K loop runs (session 60, sm_90 TTGIR: with
    ``tl.assume(k_tiles > 0)`` they fuse). The fused form timed the same as the nested one on
    the six `all`-suite layers whose pick is a persistent config (H100, session 61), so the
    assumption is not made; every measurement of this kernel is of the nested loops.
    """
    if PDL_TRIGGER:
        gdc_launch_dependents()
    start = tl.program_id(0)
    step = tl.num_programs(0)
    num_tiles = num_pid_m * num_pid_n * BATCHES
    # the epilogue's tile index is carried separately from the loop variable so that the
    # pipeliner does not tie the prologue's and epilogue's uses of one value together
    tile_c = start - step
    for tile_id in tl.range(start, num_tiles, step, flatten=True):
        batch, pid_m, pid_n = batch_tile_grid(tile_id, num_pid_m, num_pid_n, GROUP_M, BATCHES)
        a_state = A_INIT(a_desc, a_args, pid_m, batch, BLOCK_M, BLOCK_K)
        b_state = B_INIT(b_desc, b_args, pid_n, batch, BLOCK_N, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(k_tiles):
            a = A_LOAD(a_state, kt, BLOCK_M, BLOCK_K)
            b = B_LOAD(b_state, kt, BLOCK_N, BLOCK_K)
            if UPCAST:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = dot_acc(a, b, acc, PRECISION)
        tile_c += step
        batch_c, pid_m, pid_n = batch_tile_grid(tile_c, num_pid_m, num_pid_n, GROUP_M, BATCHES)
        if BIAS_ALONG_M:
            offs = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        else:
            offs = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = bias_epilogue(acc, bias_ptr, batch_c * bias_len + offs, offs < bias_len, HAS_BIAS, BIAS_ALONG_M)
        acc = activation_epilogue(acc, ACT)
        C_STORE(c_desc, c_args, acc, pid_m, pid_n, batch_c, BLOCK_M, BLOCK_N)


@triton.jit
def parts_gemm_kernel(
    a_desc,
    a_args,
    b_desc,
    b_args,
    c_desc,
    c_args,
    bias_ptr,
    bias_len,
    num_pid_m,
    num_pid_n,  # tiles of N_PARTS * BLOCK_N along N
    k_tiles,
    ws_ptr,  # unused: gemm_kernel's signature
    lock_ptr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    A_INIT: tl.constexpr,
    A_LOAD: tl.constexpr,
    B_INIT: tl.constexpr,
    B_LOAD: tl.constexpr,
    C_STORE: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BIAS_ALONG_M: tl.constexpr,
    PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
    F64: tl.constexpr,
    SPLIT_K: tl.constexpr = 1,
    ACT: tl.constexpr = "",
    K_RANGE: tl.constexpr = None,  # gemm_kernel's signature; must be None here
    N_PARTS: tl.constexpr = 3,
):
    """``persistent_gemm_kernel``'s walk over output tiles of ``BLOCK_M x (N_PARTS * BLOCK_N)``:
    each K step loads the tile's A block once and multiplies it with ``N_PARTS`` B blocks (the
    B tiles ``pid_n * N_PARTS + j``, which ``B_INIT`` and ``C_STORE`` address as usual) into as
    many accumulators.

    Why: Triton tensors have power-of-two sides, and a GEMM's tile count decides how many SMs
    work. On the H200 (session 30, Nsight Compute) cuBLAS runs ResNet-50's l3 1x1 reduce (12,544
    pixels x 256 channels) as 132 tiles of 192 pixels x 128 channels, one per SM, where the
    pow2 tiles give 98 (128 x 256: 34 SMs idle) or 196 (1.48 waves). Three 64-pixel parts under
    one 128-channel A block make the same 192-pixel tile. B tiles past the last one (the tile
    count need not divide by N_PARTS) are zero-filled by TMA and clipped by the store: the
    caller (``conv.fprop._launch``) allows only the TMA im2col loaders.
    """
    start = tl.program_id(0)
    step = tl.num_programs(0)
    num_tiles = num_pid_m * num_pid_n
    for tile_id in range(start, num_tiles, step):
        pid_m, pid_n = tile_grid(tile_id, num_pid_m, num_pid_n, GROUP_M)
        a_state = A_INIT(a_desc, a_args, pid_m, 0, BLOCK_M, BLOCK_K)
        b_states = ()
        for j in tl.static_range(N_PARTS):
            b_states = b_states + (B_INIT(b_desc, b_args, pid_n * N_PARTS + j, 0, BLOCK_N, BLOCK_K),)
        accs = (tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32),) * N_PARTS
        for kt in range(k_tiles):
            a = A_LOAD(a_state, kt, BLOCK_M, BLOCK_K)
            if UPCAST:
                a = a.to(tl.float32)
            new = ()
            for j in tl.static_range(N_PARTS):
                b = B_LOAD(b_states[j], kt, BLOCK_N, BLOCK_K)
                if UPCAST:
                    b = b.to(tl.float32)
                new = new + (dot_acc(a, b, accs[j], PRECISION),)
            accs = new
        for j in tl.static_range(N_PARTS):
            if BIAS_ALONG_M:
                offs = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            else:
                offs = (pid_n * N_PARTS + j) * BLOCK_N + tl.arange(0, BLOCK_N)
            acc = bias_epilogue(accs[j], bias_ptr, offs, offs < bias_len, HAS_BIAS, BIAS_ALONG_M)
            acc = activation_epilogue(acc, ACT)
            C_STORE(c_desc, c_args, acc, pid_m, pid_n * N_PARTS + j, 0, BLOCK_M, BLOCK_N)


@triton.jit
def stream_k_owner(it, programs, total):
    """The program whose share of a stream-K launch holds K iteration ``it`` (program ``p``
    owns ``[p * total // programs, (p + 1) * total // programs)``)."""
    return ((it + 1) * programs - 1) // total


@triton.jit
def stream_k_reduce(
    acc,
    zero,
    ws_ptr,
    lock_ptr,
    offs,
    tile,
    k_tiles,
    pid,
    is_first,
    programs,
    total,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """Combine the partial sums of an output tile whose K iterations several stream-K programs
    share; returns (sum, is_last). ``offs``: each accumulator element's offset in a
    ``BLOCK_M x BLOCK_N`` row-major partial, and ``zero`` a zero tensor, both in the
    accumulator's layout (the Gluon kernel, ``conv.ws3d``, calls this with its wgmma layout's,
    which a Triton helper cannot name: Gluon's zeros need a layout).

    Each program writes at most two partials (its first segment and its last one; every segment
    in between is a whole tile), to workspace slots ``2 * pid`` and ``2 * pid + 1``. As in
    ``split_k_reduce``, every segment takes a ticket from the tile's counter and the one that draws
    the last ticket sums all of them, in program order (the result does not depend on timing),
    finishes the tile and zeroes the counter. Nobody waits for anybody, so the programs need not
    all be resident at once.
    """
    slot = 2 * pid + tl.where(is_first, 0, 1)
    tl.store(ws_ptr + slot.to(tl.int64) * (BLOCK_M * BLOCK_N) + offs, acc)
    tl.debug_barrier()  # every thread's partial is written before the ticket is taken
    start = tile * k_tiles
    q0 = stream_k_owner(start, programs, total)
    q1 = stream_k_owner(start + k_tiles - 1, programs, total)
    ticket = tl.atomic_add(lock_ptr + tile, 1, sem="acq_rel", scope="gpu")
    is_last = ticket == q1 - q0
    out = zero
    if is_last:
        for q in range(q0, q1 + 1):
            # the tile is program q's first segment when q's share starts inside it
            s = 2 * q + tl.where(q * total // programs >= start, 0, 1)
            out += tl.load(ws_ptr + s.to(tl.int64) * (BLOCK_M * BLOCK_N) + offs, cache_modifier=".cg")
        tl.store(lock_ptr + tile, 0)
    return out, is_last


@triton.jit
def stream_k_gemm_kernel(
    a_desc,
    a_args,
    b_desc,
    b_args,
    c_desc,
    c_args,
    bias_ptr,
    bias_len,
    num_pid_m,
    num_pid_n,
    k_tiles,
    ws_ptr,  # 2 * programs partial tiles of BLOCK_M * BLOCK_N in the accumulator dtype
    lock_ptr,  # one int32 counter per output tile, zero before the launch (and after)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    A_INIT: tl.constexpr,
    A_LOAD: tl.constexpr,
    B_INIT: tl.constexpr,
    B_LOAD: tl.constexpr,
    C_STORE: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BIAS_ALONG_M: tl.constexpr,
    PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
    F64: tl.constexpr,  # gemm_kernel's signature; must be False here
    SPLIT_K: tl.constexpr = 1,  # gemm_kernel's signature; unused
    ACT: tl.constexpr = "",
    K_RANGE: tl.constexpr = None,  # gemm_kernel's signature; must be None here (every tile runs k_tiles)
):
    """``gemm_kernel``'s work split evenly by K iteration ("stream-K"): grid = (programs,), and
    program ``p`` runs iterations ``[p * T // programs, (p + 1) * T // programs)`` of the
    ``T = tiles * k_tiles`` (output tile, K tile) pairs of batch entry 0, tile by tile.

    Where the output tiles are few or do not divide into whole waves (a deep layer on a small
    volume: 56 tiles for 132 SMs, or 224 = 1.7 waves), every SM still gets the same amount of
    work; a tile that two or three programs share is summed by ``stream_k_reduce``. The price is
    one fp32 partial tile written and read per program, at most two.
    """
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    total = num_pid_m * num_pid_n * k_tiles
    first = pid * total // programs
    end = (pid + 1) * total // programs
    it = first
    while it < end:
        tile = it // k_tiles
        kt0 = it - tile * k_tiles
        kt1 = tl.minimum(k_tiles, kt0 + (end - it))
        pid_m, pid_n = tile_grid(tile, num_pid_m, num_pid_n, GROUP_M)
        a_state = A_INIT(a_desc, a_args, pid_m, 0, BLOCK_M, BLOCK_K)
        b_state = B_INIT(b_desc, b_args, pid_n, 0, BLOCK_N, BLOCK_K)
        acc = k_loop(a_state, b_state, kt0, kt1, A_LOAD, B_LOAD, BLOCK_M, BLOCK_N, BLOCK_K, PRECISION, UPCAST)
        is_last = True
        if kt1 - kt0 < k_tiles:
            offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
            acc, is_last = stream_k_reduce(
                acc,
                tl.zeros((BLOCK_M, BLOCK_N), dtype=acc.dtype),
                ws_ptr,
                lock_ptr,
                offs,
                tile,
                k_tiles,
                pid,
                it == first,
                programs,
                total,
                BLOCK_M,
                BLOCK_N,
            )
        if is_last:
            if BIAS_ALONG_M:
                offs = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            else:
                offs = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            acc = bias_epilogue(acc, bias_ptr, offs, offs < bias_len, HAS_BIAS, BIAS_ALONG_M)
            acc = activation_epilogue(acc, ACT)
            C_STORE(c_desc, c_args, acc, pid_m, pid_n, 0, BLOCK_M, BLOCK_N)
        it += kt1 - kt0
