"""The depthwise forward kernel under every tile shape its configs can take.

``configs()`` on the GPU offers tiles of 1-8 output rows, 4-32 columns and 16-128 channels; under
the interpreter it offers two. Each config here is forced through ``default_config`` so the kernel
runs it exactly, against the float64 reference.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import DEVICE

import convgemm
from convgemm.conv.fprop import ALGORITHMS, Config
from convgemm.tune.autotune import clear_memo

# (N, C, H, W, multiplier, R, S, stride, pad, dil)
CASES = [
    (2, 16, 9, 11, 1, 3, 3, 1, 1, 1),  # odd sizes: partial row, column and channel blocks
    (1, 8, 13, 10, 1, 7, 7, 1, 3, 1),  # ConvNeXt-like 7x7
    (2, 6, 11, 9, 2, 3, 3, 2, 1, 2),  # multiplier 2, stride 2, dilation 2
    (1, 24, 5, 17, 1, 5, 5, 1, 2, 1),  # fewer rows than a tile, channels not a power of two
    (1, 32, 20, 21, 1, 3, 3, 1, 1, 1),  # tiles whose whole window is inside: the unmasked loop
]
# (BLOCK_Q, BLOCK_K, ROWS, warps): rows 1..8, each a power of two
CONFIGS = [(4, 16, 1, 1), (8, 16, 2, 2), (4, 32, 4, 2), (8, 16, 8, 4), (16, 16, 4, 2)]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "q{}k{}r{}w{}".format(*c))
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"c{c[1]}m{c[4]}_{c[5]}x{c[6]}_s{c[7]}d{c[9]}")
@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
@pytest.mark.interpreter_share(2, vary=("cfg", "layout"))
def test_every_tile_shape(case, cfg, layout, monkeypatch):
    _check_forced("depthwise", case, cfg, layout, monkeypatch)


def _check_forced(algorithm, case, cfg, layout, monkeypatch, seed=0):
    """``algorithm`` run with exactly ``cfg`` (through ``default_config``) against float64."""
    n, c, h, w, mult, r, s, stride, pad, dil = case
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, h, w, generator=g).to(DEVICE)
    wt = torch.randn(c * mult, 1, r, s, generator=g).to(DEVICE)
    b = torch.randn(c * mult, generator=g).to(DEVICE)
    if layout == "nhwc":
        x = x.to(memory_format=torch.channels_last)
    algo = ALGORITHMS[algorithm]
    extra = dict(zip(("cols", "vec", "num_stages"), cfg[4:], strict=False))
    monkeypatch.setattr(type(algo), "default_config", lambda self, prob: Config(*cfg[:4], **{"num_stages": 1, **extra}))
    clear_memo()
    try:
        y = convgemm.conv2d(x, wt, b, stride=stride, padding=pad, dilation=dil, groups=c, algorithm=algorithm)
    finally:
        clear_memo()
    ref = F.conv2d(x.double(), wt.double(), b.double(), stride=stride, padding=pad, dilation=dil, groups=c)
    torch.testing.assert_close(y.double().cpu(), ref.cpu(), rtol=1e-5, atol=1e-5)


# (BLOCK_Q, BLOCK_K, strip rows, warps[, columns per group, channels per thread, stages]): strips
# of one row, of fewer rows than the image (the last strip partial) and taller than the image;
# groups of 2, 3 and 4 neighbouring columns (the last group partial on most cases), with 2-channel
# loads; stages s loads the input rows of the next s - 1 steps before the current step's
# multiply-adds (3 and 4: past the strip's and the image's last rows); one channel per thread at
# 4 columns and, in one column group of 7, at 7 (``DepthwiseRows.one_channel``'s forms for large filters)
ROWS_CONFIGS = [(4, 16, 1, 1), (8, 16, 3, 2), (4, 32, 5, 2), (16, 16, 64, 4), (4, 16, 4, 1, 3, 2),
                (2, 32, 3, 2, 4, 2, 2), (4, 16, 64, 2, 2, 0), (4, 16, 3, 2, 2, 2, 3), (8, 16, 64, 2, 1, 2, 4),
                (2, 32, 5, 2, 4, 1, 2), (1, 32, 5, 1, 7, 1, 2)]  # fmt: skip
# (N, C, H, W, multiplier, R, S, (stride_h, stride_w), (pad_h, pad_w), (dil_h, dil_w))
ROWS_CASES = [
    (2, 16, 9, 11, 1, 3, 3, (1, 1), (1, 1), (1, 1)),
    (1, 8, 13, 10, 1, 7, 7, (1, 1), (3, 3), (1, 1)),  # ConvNeXt-like 7x7
    (2, 6, 11, 9, 2, 3, 3, (2, 2), (1, 1), (1, 2)),  # multiplier 2, stride 2, horizontal dilation
    (1, 24, 5, 17, 1, 5, 5, (1, 1), (2, 2), (1, 1)),  # fewer rows than the filter's reach
    (1, 8, 10, 12, 1, 5, 3, (2, 1), (0, 1), (1, 1)),  # stride 2 down, 1 across, no vertical padding
    (1, 8, 1, 19, 1, 1, 4, (1, 1), (0, 3), (1, 1)),  # causal conv1d as a 1-row image
]


# every strip shape on NHWC; NCHW (the same kernel with other strides) on one
ROWS_RUNS = [(c, "nhwc") for c in ROWS_CONFIGS] + [(ROWS_CONFIGS[1], "nchw")]


@pytest.mark.parametrize(
    "cfg,layout",
    ROWS_RUNS,
    ids=lambda v: (
        "q{}k{}r{}w{}".format(*v) + ("c{}v{}".format(*v[4:]) if len(v) > 4 else "") if isinstance(v, tuple) else v
    ),
)
@pytest.mark.parametrize("case", ROWS_CASES, ids=lambda c: f"c{c[1]}m{c[4]}_{c[5]}x{c[6]}_s{c[7][0]}{c[7][1]}")
@pytest.mark.interpreter_share(2, vary=("cfg", "layout"))
def test_rows_kernel_every_strip(case, cfg, layout, monkeypatch):
    """``depthwise_rows`` (inputs reused from registers down a column strip) against float64,
    with the unrolled first and last steps where ``DepthwiseRows.trim`` takes them."""
    monkeypatch.setenv("CONVGEMM_DEPTHWISE_TRIM", "1")
    _check_forced("depthwise_rows", case, cfg, layout, monkeypatch, seed=1)


# narrow groups: (N, C, H, W, groups, K, R, S, stride, pad); the rows kernel sums each output
# channel over the C/groups input channels of its group
NARROW_CASES = [
    (2, 8, 9, 11, 2, 8, 3, 3, (1, 1), (1, 1)),  # 4 in, 4 out per group
    (1, 12, 7, 10, 4, 8, 3, 3, (2, 2), (1, 1)),  # 3 in, 2 out per group, stride 2
    (1, 16, 6, 9, 2, 4, 3, 1, (1, 1), (1, 0)),  # 8 in, 2 out per group, 3x1
]


@pytest.mark.parametrize("cfg", [(4, 16, 3, 2, 3, 2, 2), (2, 32, 64, 2, 2, 0)], ids=str)
@pytest.mark.parametrize("case", NARROW_CASES, ids=str)
@pytest.mark.interpreter_share(2, vary=("cfg",))  # the 64-row strip took 18-49 s per case there
def test_rows_kernel_narrow_groups(case, cfg, monkeypatch):
    n, c, h, w, groups, k, r, s, stride, pad = case
    g = torch.Generator().manual_seed(2)
    x = torch.randn(n, c, h, w, generator=g).to(DEVICE).to(memory_format=torch.channels_last)
    wt = torch.randn(k, c // groups, r, s, generator=g).to(DEVICE)
    b = torch.randn(k, generator=g).to(DEVICE)
    extra = dict(zip(("cols", "vec", "num_stages"), cfg[4:], strict=False))
    algo = ALGORITHMS["depthwise_rows"]
    monkeypatch.setattr(type(algo), "default_config", lambda self, prob: Config(*cfg[:4], **{"num_stages": 1, **extra}))
    clear_memo()
    try:
        y = convgemm.conv2d(x, wt, b, stride=stride, padding=pad, groups=groups, algorithm="depthwise_rows")
    finally:
        clear_memo()
    ref = F.conv2d(x.double(), wt.double(), b.double(), stride=stride, padding=pad, groups=groups)
    torch.testing.assert_close(y.double().cpu(), ref.cpu(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "kw, reason",
    [
        (dict(dilation=(2, 1), padding=2), "vertical dilation 2"),
        (dict(stride=(3, 1), padding=1), "vertical stride 3"),
    ],
)
def test_rows_kernel_refuses(kw, reason):
    x = torch.randn(1, 4, 9, 9, device=DEVICE)
    wt = torch.randn(4, 1, 3, 3, device=DEVICE)
    with pytest.raises(ValueError, match=reason):
        convgemm.conv2d(x, wt, groups=4, algorithm="depthwise_rows", **kw)


def test_rows_gpu_configs(monkeypatch):
    """The rows kernel's GPU candidates: 4 warps, 2 channels of a tile per thread (and, for
    filters larger than 3x3, one more candidate at one channel per thread: ``one_channel``), the
    accumulators of every output row and column in flight plus the weights held within the
    register estimate, strips no taller than the image and enough programs for two per SM unless
    the strip is already short."""
    import convgemm.conv.fprop as fp
    from convgemm.problem import ConvProblem

    monkeypatch.setattr(fp, "interpreting", lambda: False)
    monkeypatch.setattr(fp, "sm_count", lambda: 132)
    algo = ALGORITHMS["depthwise_rows"]
    for nn_, c, h, w_, k, stride in [(64, 32, 112, 112, 3, 1), (64, 96, 56, 56, 7, 1), (64, 960, 7, 7, 3, 1),
                                     (64, 144, 56, 56, 3, 2), (64, 768, 7, 7, 7, 1)]:  # fmt: skip
        x = torch.empty(nn_, c, h, w_).to(memory_format=torch.channels_last)
        wt = torch.empty(c, 1, k, k)
        prob = ConvProblem.from_tensors(x, wt, stride=stride, padding=k // 2, groups=c)
        cfgs = algo.configs(prob) + [algo.default_config(prob)]
        assert 1 <= len(cfgs) <= 6
        ones = [cfg for cfg in cfgs[:-1] if cfg.vec == 1]
        assert ones == algo.one_channel(prob) and len(ones) == (0 if k <= 3 else 2 if c == 768 else 1), (
            "1-channel candidates for large filters only; a second where a tile of one column group masks fewer lanes"
        )
        if c == 768:  # ConvNeXt's 768 @7: every column of the image in one group, no masked lane
            assert ones[1].block_m == 1 and ones[1].cols == 7 and ones[1].block_n == 128, ones
        for cfg in cfgs:
            assert cfg.num_warps == 4 and cfg.vec in (1, 2) and cfg.num_stages == 2, cfg
            per_thread = cfg.block_m * cfg.block_n // (32 * cfg.num_warps)
            assert per_thread == cfg.vec, cfg
            held = k * k * per_thread if algo.preload(prob, cfg) else 0
            assert (per_thread * -(-k // stride) * cfg.cols + held) <= algo.REG_BUDGET, cfg
            assert 1 <= cfg.cols <= 8, cfg
            assert 1 <= cfg.block_k <= prob.p, cfg
            programs = (
                nn_ * -(-prob.p // cfg.block_k) * -(-prob.q // (cfg.block_m * cfg.cols)) * -(-prob.k // cfg.block_n)
            )
            assert programs >= 2 * 132 or cfg.block_k <= 8, cfg


def test_rows_columns_on_long_rows(monkeypatch):
    """The rows kernel's column count: on the causal conv1d suite's layers (8195 outputs, 0.7-2.9%
    masked at 8 columns) 7 or 8 columns, the widest within 2% of the fewest masked lanes, not the 3
    or 5 columns that mask a few lanes
    fewer (1.2-1.6x slower on the H200); on image rows (ConvNeXt's and MobileNetV2's) the
    fewest masked columns, as before."""
    import convgemm.conv.fprop as fp
    from convgemm.problem import ConvProblem

    monkeypatch.setattr(fp, "interpreting", lambda: False)
    monkeypatch.setattr(fp, "sm_count", lambda: 132)
    algo = ALGORITHMS["depthwise_rows"]
    for c, length in ((1024, 8192), (4096, 4096), (8192, 2048)):
        x = torch.empty(8, c, 1, length).to(memory_format=torch.channels_last)
        prob = ConvProblem.from_tensors(x, torch.empty(c, 1, 1, 4), padding=(0, 3), groups=c)
        assert min(cfg.cols for cfg in algo.configs(prob)) >= 7, algo.configs(prob)
    for q, bq, fit, want in ((56, 4, range(1, 9), 7), (28, 4, range(1, 9), 7), (112, 4, range(1, 9), 7),
                             (8195, 8, range(1, 9), 8), (2051, 4, range(1, 9), 8), (7, 4, range(1, 3), 2)):  # fmt: skip
        assert algo._widest_within(q, bq, list(fit)) == want, (q, bq, want)


def test_gpu_configs_are_runnable(monkeypatch):
    """The GPU's candidate list (built here with the interpreter switch off): rows a power of two
    no larger than the output's rows rounded up, 1-8 warps, at most eight, the default among valid ones."""
    import convgemm.conv.fprop as fp

    monkeypatch.setattr(fp, "interpreting", lambda: False)
    monkeypatch.setattr(fp, "sm_count", lambda: 132)
    algo = ALGORITHMS["depthwise"]
    for shape in [(64, 32, 112, 112, 3, 1), (64, 96, 56, 56, 7, 1), (64, 960, 7, 7, 3, 1), (8, 4096, 1, 4096, 1, 1)]:
        nn_, c, h, w_, k, _ = shape
        x = torch.empty(nn_, c, h, w_).to(memory_format=torch.channels_last)
        wt = torch.empty(c, 1, k if h > 1 else 1, k)
        from convgemm.problem import ConvProblem

        prob = ConvProblem.from_tensors(x, wt, padding=(k // 2 if h > 1 else 0, k // 2), groups=c)
        cfgs = algo.configs(prob) + [algo.default_config(prob)]
        assert 1 <= len(cfgs) <= 9
        for cfg in cfgs:
            rows = cfg.block_k
            assert rows >= 1 and rows & (rows - 1) == 0 and rows <= max(1, 2 * prob.p), (shape, cfg)
            assert 1 <= cfg.num_warps <= 8, (shape, cfg)
            per_thread = rows * cfg.block_m * cfg.block_n // (32 * cfg.num_warps)
            assert per_thread <= 16, (shape, cfg)
            assert algo.accepts(cfg)
    assert not algo.accepts(Config(16, 64, 0, 4, 1))  # an older version's cache entry


def test_stale_cache_entry_is_ignored(monkeypatch, tmp_path):
    """A tuning-cache entry written by an older version (depthwise config with 0 rows per program,
    whose kernel then divided by zero) is not used; a valid one is."""
    from convgemm.problem import ConvProblem
    from convgemm.tune import autotune as at
    from convgemm.tune import cache as tc

    monkeypatch.setenv("CONVGEMM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tc, "_warned", set())
    x = torch.empty(2, 16, 9, 11).to(memory_format=torch.channels_last)
    prob = ConvProblem.from_tensors(x, torch.empty(16, 1, 3, 3), padding=1, groups=16)
    key = at.cache_key(prob, x.device)
    at.disk_cache().put(key, "depthwise", Config(16, 64, 0, 4, 1), 5.0)
    assert at._from_disk(prob, key) is None
    at.disk_cache().put(key, "depthwise", Config(16, 64, 2, 4, 1), 5.0)
    algo, cfg = at._from_disk(prob, key)
    assert algo is ALGORITHMS["depthwise"] and cfg == Config(16, 64, 2, 4, 1)


def test_heuristic_sends_depthwise_to_the_rows_kernel(monkeypatch):
    """Untuned, a causal depthwise conv1d (a 1-row image) and a 2-D depthwise layer run
    depthwise_rows, a depthwise layer it does not take (vertical stride 3) and a float64 one the
    tap kernel, and a 1-channel input with a channel multiplier (not grouped) never the rows kernel."""
    from convgemm.problem import ConvProblem
    from convgemm.tune import autotune

    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")
    cases = [((2, 64, 1, 40), (64, 1, 1, 4), (0, 3), 64, "depthwise_rows", 1),
             ((2, 64, 12, 12), (64, 1, 3, 3), 1, 64, "depthwise_rows", 1),
             ((2, 64, 12, 12), (64, 1, 3, 3), 1, 64, "depthwise", (3, 1)),
             ((2, 1, 1, 400), (32, 1, 1, 10), 0, 1, None, 1)]  # fmt: skip
    cases.append(((2, 64, 12, 12), (64, 1, 7, 7), 3, 64, "depthwise", 1, torch.float64))  # doubles: tap kernel
    for xs, ws, pad, groups, want, stride, *dt in cases:
        x = torch.empty(xs, dtype=(dt or [torch.float32])[0]).to(memory_format=torch.channels_last)
        w = torch.empty(ws, dtype=x.dtype)
        prob = ConvProblem.from_tensors(x, w, padding=pad, groups=groups, stride=stride)
        clear_memo()
        algo, _ = autotune.choose(prob, x, None, None, None)
        if want is None:
            assert algo.name != "depthwise_rows", algo
        else:
            assert algo.name == want, (xs, algo)
    clear_memo()


def test_rows_trim_switch(monkeypatch):
    """The unrolled first and last steps (TRIM) are off unless CONVGEMM_DEPTHWISE_TRIM=1, then
    taken for 4 or more rows in flight on strips of at least M - 1 rows (the 7x7 and 5x5 cases of
    ``test_rows_kernel_every_strip`` run them on their tall strips with the variable set, the
    3x3 cases never)."""
    from convgemm.problem import ConvProblem

    algo = ALGORITHMS["depthwise_rows"]

    def prob(k, stride=1):
        x = torch.empty(1, 8, 13, 10)
        return ConvProblem.from_tensors(x, torch.empty(8, 1, k, k), padding=k // 2, stride=stride, groups=8)

    monkeypatch.delenv("CONVGEMM_DEPTHWISE_TRIM", raising=False)
    assert not algo.trim(prob(7), 64)
    monkeypatch.setenv("CONVGEMM_DEPTHWISE_TRIM", "1")
    assert algo.trim(prob(7), 64) and algo.trim(prob(7), 6) and not algo.trim(prob(7), 5)
    assert algo.trim(prob(5), 5) and algo.trim(prob(7, 2), 3) and not algo.trim(prob(3), 64)
    assert not algo.trim(prob(5, 2), 64)  # 3 rows in flight


@pytest.mark.parametrize("algorithm,cfg", [("depthwise", (4, 16, 2, 2)), ("depthwise_rows", (4, 16, 64, 2, 2, 2, 2)),
                                           ("depthwise_rows", (2, 16, 3, 1, 3, 0, 1))], ids=str)  # fmt: skip
def test_64_bit_offsets_path(algorithm, cfg, monkeypatch):
    """The kernels' 64-bit addressing (taken for images of 2**31 elements or more, which only
    the GPU's large tests allocate) forced on a small 7x7 problem: the same results. The rows
    configs take the unrolled first and last steps with the prefetch, and the plain loop."""
    monkeypatch.setenv("CONVGEMM_DEPTHWISE_TRIM", "1")
    monkeypatch.setattr(type(ALGORITHMS["depthwise"]), "image_span", staticmethod(lambda t: 2**31))
    _check_forced(algorithm, (1, 8, 13, 10, 1, 7, 7, 1, 3, 1), cfg, "nhwc", monkeypatch, seed=3)


@pytest.mark.parametrize(
    "c, size, stride, r, want",
    [(144, 56, 1, 3, {28}), (32, 112, 1, 3, {14}), (384, 14, 1, 3, set()), (96, 56, 1, 7, set())],
)
def test_shorter_strip_candidates(monkeypatch, c, size, stride, r, want):
    """3x3 candidates whose programs leave the SMs' resident slots empty come again with the
    strip halved (session 30's ncu: 2.9 programs per SM where 4 fit on 144 @56); others, and
    larger filters, do not."""
    from convgemm.conv import fprop
    from convgemm.problem import ConvProblem

    monkeypatch.setattr(fprop, "sm_count", lambda: 132)
    monkeypatch.setattr(fprop, "interpreting", lambda: False)
    algo = ALGORITHMS["depthwise_rows"]
    prob = ConvProblem(n=64, c=c, h=size, w=size, k=c, r=r, s=r, stride=(stride, stride), pad_h=(r // 2,) * 2,
                       pad_w=(r // 2,) * 2, groups=c, dtype=torch.bfloat16)  # fmt: skip
    cands = algo.candidates(prob)[:4]
    extra = algo.shorter_strip(prob, cands)
    assert {cfg.block_k for cfg in extra} == want
    for cfg in extra:  # the same tile, half the strip, more programs than before
        twin = [
            c0
            for c0 in cands
            if (c0.block_m, c0.block_n, c0.cols, c0.vec) == (cfg.block_m, cfg.block_n, cfg.cols, cfg.vec)
        ]
        assert twin and twin[0].block_k == 2 * cfg.block_k
    assert algo.configs(prob)[: len(cands)] == cands and all(cfg in algo.configs(prob) for cfg in extra)
