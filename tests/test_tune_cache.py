"""The persistent tuning cache: round trip, faults, concurrent writers, and its use by the tuner."""

import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
from conftest import DEVICE

from convgemm.conv.fprop import ALGORITHMS, Config
from convgemm.tune import autotune
from convgemm.tune import cache as tc

CACHE_PY = tc.__file__


@pytest.fixture(autouse=True)
def _fresh(fresh_tuning):
    yield


CFG = Config(64, 128, 64, 4, 3, tile_n=2, tile_h=4, tile_w=16)


def test_round_trip(tmp_path):
    c = tc.TuneCache()
    assert c.get("k") is None and len(c) == 0
    c.put("k", "implicit_gemm_tma", CFG, 12.5)
    fresh = tc.TuneCache()  # a new process's view: read from disk
    e = fresh.get("k")
    assert e == {"algorithm": "implicit_gemm_tma", "config": CFG.__dict__, "us": 12.5}
    assert Config(**e["config"]) == CFG
    data = json.load(open(tc.cache_path()))
    assert data["schema"] == tc.SCHEMA and list(data["entries"]) == ["k"]


@pytest.mark.parametrize(
    "content",
    [b'{"schema": 1, "entries": {"k": {"algor', b"\x00\xff garbage \xfe", b'{"schema": 0, "entries": {}}', b"[1, 2]"],
    ids=["truncated", "garbage", "old-schema", "not-a-dict"],
)
def test_bad_file_warns_once_and_is_rewritten(content):
    os.makedirs(tc.cache_dir())
    with open(tc.cache_path(), "wb") as f:
        f.write(content)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        c = tc.TuneCache()
        assert c.get("k") is None
        assert tc.TuneCache().get("other") is None  # a second read: no second warning
    assert len([w for w in rec if "tuning cache" in str(w.message)]) == 1
    c.put("k", "implicit_gemm", CFG)
    assert tc.TuneCache().get("k")["algorithm"] == "implicit_gemm"  # the file is valid again


def test_invalid_entries_are_dropped_valid_ones_kept():
    os.makedirs(tc.cache_dir())
    entries = {
        "good": {"algorithm": "implicit_gemm", "config": {"block_m": 64}},
        "bad-config": {"algorithm": "implicit_gemm", "config": {"block_m": "64"}},
        "no-algo": {"config": {}},
    }
    json.dump({"schema": tc.SCHEMA, "entries": entries}, open(tc.cache_path(), "w"))
    c = tc.TuneCache()
    assert c.get("good") is not None and c.get("bad-config") is None and c.get("no-algo") is None


def test_unwritable_directory_keeps_results_in_memory(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    c = tc.TuneCache(str(blocker / "tune-v1.json"))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        c.put("a", "implicit_gemm", CFG)
        c.put("b", "implicit_gemm", CFG)
    assert len([w for w in rec if "in memory only" in str(w.message)]) == 1
    assert c.get("a") is not None and c.get("b") is not None


def test_four_processes_storing_at_once_lose_nothing():
    """Each process stores 25 keys as fast as it can; every one of the 100 must survive."""
    script = textwrap.dedent(
        f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("tc", {CACHE_PY!r})
        tc = importlib.util.module_from_spec(spec); spec.loader.exec_module(tc)
        me = sys.argv[1]
        c = tc.TuneCache()
        for i in range(25):
            c.put(f"{{me}}-{{i}}", "implicit_gemm", {{"block_m": i}})
        """
    )
    env = dict(os.environ)
    procs = [subprocess.Popen([sys.executable, "-c", script, f"p{n}"], env=env) for n in range(4)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    keys = set(json.load(open(tc.cache_path()))["entries"])
    assert keys == {f"p{n}-{i}" for n in range(4) for i in range(25)}
    leftovers = [f for f in os.listdir(tc.cache_dir()) if f.startswith(".tune-")]
    assert leftovers == []  # no temp files left behind


# ---------------------------------------------------------------- the tuner and the cache
def _problem_and_tensors():
    from convgemm.functional import _prepare

    x = torch.randn(1, 16, 6, 7, device=DEVICE).to(memory_format=torch.channels_last)
    w = torch.randn(16, 16, 3, 3, device=DEVICE)
    prob, xx, y = _prepare(x, w, None, 1, 1, 1, 1)
    return prob, xx, w, y


@pytest.fixture
def fake_tuner(monkeypatch):
    """Tuning turned on, with timing replaced by a counter that always picks implicit_gemm."""
    calls = []

    def fake_tune(prob, candidates, x, w, bias, y):
        calls.append(prob)
        algo = ALGORITHMS["implicit_gemm"]
        return algo, algo.default_config(prob), 42.0

    monkeypatch.setattr(autotune, "autotune_enabled", lambda: True)
    monkeypatch.setattr(autotune, "_tune", fake_tune)
    return calls


def test_tuned_choice_is_stored_and_a_warm_cache_does_no_timing(fake_tuner):
    prob, x, w, y = _problem_and_tensors()
    algo, cfg = autotune.choose(prob, x, w, None, y)
    assert algo.name == "implicit_gemm" and len(fake_tuner) == 1
    assert len(tc.TuneCache()) == 1  # on disk
    autotune.clear_memo()  # as a new process would start
    algo2, cfg2 = autotune.choose(prob, x, w, None, y)
    assert (algo2.name, cfg2) == (algo.name, cfg) and len(fake_tuner) == 1


def test_cached_entry_for_an_unsupported_algorithm_is_retuned(fake_tuner):
    prob, x, w, y = _problem_and_tensors()
    key = autotune.cache_key(prob, x.device)
    tc.TuneCache().put(key, "gemm_1x1", CFG)  # gemm_1x1 cannot run a 3x3 problem
    autotune.choose(prob, x, w, None, y)
    assert len(fake_tuner) == 1


def test_tuning_disabled_uses_heuristics_and_stores_nothing(monkeypatch):
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")
    prob, x, w, y = _problem_and_tensors()
    algo, cfg = autotune.choose(prob, x, w, None, y)
    assert algo.supports(prob) is None and cfg == algo.default_config(prob)
    assert not os.path.exists(tc.cache_path())


def test_cache_key_names_device_and_versions():
    import triton

    import convgemm

    prob, x, _, _ = _problem_and_tensors()
    key = json.loads(autotune.cache_key(prob, x.device))
    assert key[1] == triton.__version__ and key[2] == convgemm.__version__
    assert key[3:] == json.loads(json.dumps(list(prob.key())))


@pytest.mark.gpu
def test_tuner_skips_a_failing_candidate_with_a_warning(monkeypatch):
    """A candidate that raises (not a resource limit) is reported and skipped; the call succeeds."""
    from reference import assert_close, conv2d_ref

    import convgemm
    from convgemm.conv import fprop

    def boom(self, *args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "1")
    monkeypatch.setattr(fprop.SmallK, "run", boom)
    x = torch.randn(2, 3, 20, 22, device=DEVICE).to(memory_format=torch.channels_last)
    w = torch.randn(8, 3, 3, 3, device=DEVICE)
    with pytest.warns(RuntimeWarning, match="small_k.*boom"):
        y = convgemm.conv2d(x, w, padding=1)
    assert_close(y, conv2d_ref(x, w, padding=1), torch.float32)


def test_tuner_drops_gemm_kernels_for_depthwise_only():
    """Depthwise layers (one channel per group, no multiplier) are tuned over the rows depthwise
    kernel only; a one-channel input with a channel multiplier (wav2vec2's conv0, where small_k
    wins) and a grouped layer keep the GEMM kernels."""
    from convgemm.problem import ConvProblem

    def names(xs, ws, groups):
        x = torch.empty(xs).to(memory_format=torch.channels_last)
        prob = ConvProblem.from_tensors(x, torch.empty(ws), padding=1, groups=groups)
        cands = [a for a in ALGORITHMS.values() if a.supports(prob) is None]
        return {a.name for a, _ in autotune.tuning_pairs(prob, cands)}

    assert names((2, 32, 9, 9), (32, 1, 3, 3), 32) == {"depthwise_rows"}  # the tap kernel: slower on every layer
    assert {"small_k", "implicit_gemm"} <= names((2, 1, 1, 400), (32, 1, 1, 10), 1)
    assert {"grouped", "implicit_gemm"} <= names((2, 32, 9, 9), (32, 4, 3, 3), 8)
    assert {"small_k", "implicit_gemm"} <= names((2, 8, 9, 9), (32, 1, 3, 3), 8)  # multiplier 4


@pytest.mark.gpu
def test_tuner_times_kernels_not_the_host():
    """``_time_ms`` measures GPU time: a call whose host side takes 300 us and whose kernel takes
    a few is timed at the kernel's few (the GPU sleeps while the host queues the runs). Timed the
    old way, every run measured the 300 us of host."""
    import time

    x = torch.randn(1024, device=DEVICE)

    def fn():
        t = time.perf_counter()
        while time.perf_counter() - t < 300e-6:
            pass
        x.add_(1.0)

    # the best of three: on a loaded host (the GPU suite's 14 workers) a descheduled host thread
    # can leave the GPU idle for one timing; the host-bound timer measured >= 0.3 ms every time
    assert min(autotune._time_ms(fn) for _ in range(3)) < 0.1


@pytest.mark.parametrize("error", ["resources", "bug"])
def test_a_candidate_that_cannot_launch_is_skipped_and_logged(monkeypatch, tmp_path, error):
    """A candidate whose launch fails is skipped (the other one is timed and picked) and written
    to the tuner log with its error; a resource limit (over the shared memory) silently, anything
    else with a warning. Session 46: two strict-fp32 tiles over the limit had been skipped on 55
    of 86 layers since session 34 with nothing in the log but a count."""
    from triton.runtime.errors import OutOfResources

    from convgemm.problem import ConvProblem

    x = torch.randn(1, 16, 6, 6, device=DEVICE).contiguous(memory_format=torch.channels_last)
    w = torch.randn(8, 16, 3, 3, device=DEVICE)
    prob = ConvProblem.from_tensors(x, w, padding=1)
    cands = [ALGORITHMS["implicit_gemm"], ALGORITHMS["small_k"]]
    exc = OutOfResources(245792, 232448, "shared memory") if error == "resources" else ValueError("a bug")

    def broken(*args, **kwargs):
        raise exc

    monkeypatch.setattr(cands[1], "run", broken)
    if DEVICE == "cpu":
        monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(autotune, "_time_ms", lambda fn, budget_ms=2.0, flush=None: (fn(), 1.0)[1])
    log = tmp_path / "tune.jsonl"
    monkeypatch.setenv("CONVGEMM_TUNE_LOG", str(log))
    y = torch.empty(prob.output_shape, device=DEVICE).contiguous(memory_format=torch.channels_last)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        algo, cfg, us = autotune._tune(prob, cands, x, w, None, y)
    assert algo.name == "implicit_gemm" and us is not None
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    skipped = [r for r in rows if "skipped" in r]
    assert skipped and all(r["algorithm"] == "small_k" for r in skipped), rows
    assert ("OutOfResources" if error == "resources" else "ValueError: a bug") in skipped[0]["skipped"]
    warned = [str(c.message) for c in caught if "skipped while tuning" in str(c.message)]
    assert bool(warned) == (error == "bug"), warned


@pytest.mark.parametrize("nchw", [True, False])
def test_tuner_charges_the_nchw_transpose(monkeypatch, nchw):
    """For an NCHW result, a candidate that stores NHWC tiles is charged the transpose the call
    will run after it, and one that writes NCHW is timed writing NCHW (session 19: width_unfold
    won wav2vec2's NCL conv0 in the tuner at 55 us and ran 171 us in the call). Fake timings:
    width_unfold 1.0 ms, small_k 1.5 ms, the transpose 1.0 ms."""
    from dataclasses import replace

    from convgemm.conv.fprop import ALGORITHMS
    from convgemm.problem import ConvProblem

    # two input channels: with one, the tuner no longer times the unfold at all (its prune rule)
    x = torch.randn(2, 2, 1, 400, device=DEVICE, dtype=torch.bfloat16)
    w = torch.randn(64, 2, 1, 10, device=DEVICE, dtype=torch.bfloat16)
    prob = ConvProblem.from_tensors(x, w, stride=(1, 5))
    prob = replace(prob, tma_ok=True, input_tma_ok=True, channels_last_out=not nchw)
    cands = [ALGORITHMS["width_unfold"], ALGORITHMS["small_k"]]
    assert all(a.supports(prob) is None for a in cands), [a.supports(prob) for a in cands]
    seen = []

    def fake_time(fn, budget_ms=2.0, flush=None):
        fn()
        name = seen[-1] if seen else "transpose"
        return {"width_unfold": 1.0, "small_k": 1.5, "transpose": 1.0}[name]

    def tracking(algo):
        real = algo.run

        def run(*args, **kwargs):
            seen.append(algo.name)
            out = args[4]
            # small_k is timed on an NCHW output exactly when the result is NCHW
            if algo.name == "small_k":
                assert out.is_contiguous() == nchw or out.shape[1] == 1
            return real(*args, **kwargs)

        return run

    for a in cands:
        monkeypatch.setattr(a, "run", tracking(a))
    if DEVICE == "cpu":  # the kernels run under the interpreter; nothing to synchronize
        monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(autotune, "_time_ms", lambda fn, budget_ms=2.0, flush=None: (seen.clear(), fake_time(fn))[1])
    y = torch.empty(prob.output_shape, device=DEVICE, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    algo, cfg, us = autotune._tune(prob, cands, x.to(memory_format=torch.channels_last), w, None, y)
    # a timed choice (None: every candidate failed and the heuristic answered)
    assert us is not None and algo.name == ("small_k" if nchw else "width_unfold"), (algo.name, us)
    assert us == pytest.approx(1500.0 if nchw else 1000.0)


def test_tuner_times_on_the_outputs_strides(monkeypatch):
    """Candidates are timed writing an output with the call's own strides: one stride phase of a
    larger NHWC tensor (strided dgrad's ``out``) is stored in place by some kernels and through a
    dense temporary and a copy by others, and only its own strides charge the copy (session 33)."""
    from convgemm.problem import ConvProblem

    x = torch.randn(1, 16, 6, 6, device=DEVICE).contiguous(memory_format=torch.channels_last)
    w = torch.randn(8, 16, 1, 1, device=DEVICE)
    prob = ConvProblem.from_tensors(x, w)
    big = torch.empty(1, 8, 12, 12, device=DEVICE).contiguous(memory_format=torch.channels_last)
    y = big[:, :, 1::2, ::2]  # a stride phase: pixels 2 apart, rows 4 apart
    cands = [ALGORITHMS["implicit_gemm"], ALGORITHMS["small_k"]]
    strides = []

    def tracking(algo):
        real = algo.run

        def run(*args, **kwargs):
            strides.append(args[4].stride())
            return real(*args, **kwargs)

        return run

    for a in cands:
        monkeypatch.setattr(a, "run", tracking(a))
    if DEVICE == "cpu":
        monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(autotune, "_time_ms", lambda fn, budget_ms=2.0, flush=None: (fn(), 1.0)[1])
    monkeypatch.setattr(autotune, "tuning_pairs", lambda prob, cands: [(a, a.default_config(prob)) for a in cands])
    monkeypatch.setattr(autotune, "_compile_all", lambda *a, **k: 0)
    autotune._tune(prob, cands, x, w, None, y)
    assert strides and all(s == y.stride() for s in strides), (strides, y.stride())


def test_cold_l2_switch(monkeypatch):
    monkeypatch.delenv("CONVGEMM_TUNE_WARM", raising=False)
    assert autotune._cold_l2()
    monkeypatch.setenv("CONVGEMM_TUNE_WARM", "1")
    assert not autotune._cold_l2()


@pytest.mark.gpu
def test_tuner_flushes_before_every_timed_run():
    from convgemm._runtime import l2_flush

    x = torch.randn(1024, device=DEVICE)
    flushes = []
    flush = l2_flush(x.device)

    def counted():
        flushes.append(1)
        flush()

    runs = []
    autotune._time_ms(lambda: runs.append(x.add_(1.0)), flush=counted)
    assert len(flushes) == len(runs) >= 3


def _gpu_like(xs, ws, groups=1, stride=1, dtype=torch.bfloat16):
    """A problem as a Hopper GPU's caller would describe it (TMA, aligned NHWC input)."""
    from dataclasses import replace

    from convgemm.problem import ConvProblem

    x = torch.empty(xs, dtype=dtype).to(memory_format=torch.channels_last)
    prob = ConvProblem.from_tensors(x, torch.empty(ws, dtype=dtype), padding=1, stride=stride, groups=groups)
    e = x.element_size()
    return replace(prob, tma_ok=True, input_tma_ok=(prob.cg * e) % 16 == 0, input_tma_rows_ok=True,
                   input_dense=True, input_phases_ok=stride > 1)  # fmt: skip


def test_tuner_prunes_narrow_groups_and_stems():
    """Where grouped_tma applies (ResNeXt), the pointer-gather and depthwise kernels are not
    tuned, nor ``grouped`` in 16 bits over an NHWC input (fp32 and an NCHW input keep its one
    default config); an RGB stem of 64 filters tunes the width unfold, with one config each of
    small_k and implicit_gemm."""
    from dataclasses import replace

    prob = _gpu_like((8, 128, 16, 16), (128, 4, 3, 3), groups=32)
    cands = [a for a in ALGORITHMS.values() if a.supports(prob) is None]
    assert {"grouped_tma", "grouped", "small_k", "depthwise_rows"} <= {a.name for a in cands}
    pairs = autotune.tuning_pairs(prob, cands)
    names = [a.name for a, _ in pairs]
    assert "grouped_tma" in names and "grouped" not in names
    assert not {"small_k", "implicit_gemm", "depthwise_rows", "depthwise"} & set(names)
    half = _gpu_like((8, 128, 16, 16), (128, 4, 3, 3), groups=32, dtype=torch.float16)
    assert "grouped" not in {a.name for a, _ in autotune.tuning_pairs(half, cands)}
    grouped = ALGORITHMS["grouped"]
    for kept in (replace(prob, input_nchw=True), _gpu_like((8, 128, 16, 16), (128, 4, 3, 3), groups=32,
                                                           dtype=torch.float32)):  # fmt: skip
        assert [c for a, c in autotune.tuning_pairs(kept, cands) if a is grouped] == [grouped.default_config(kept)]
    # without a group-merging TMA candidate it is tuned over all its configs
    assert [c for a, c in autotune.tuning_pairs(prob, [grouped])] == grouped.configs(prob)
    gts = {c.gt for a, c in pairs if a.name == "grouped_tma"}
    assert gts == {16}  # the widest merge only (64 channels per super-group)
    wide = _gpu_like((8, 256, 16, 16), (256, 16, 3, 3), groups=16)  # 16 per group: the TMA kernel applies
    cands = [a for a in ALGORITHMS.values() if a.supports(wide) is None]
    names = [a.name for a, _ in autotune.tuning_pairs(wide, cands)]
    assert names.count("implicit_gemm_tma") == 1 and "grouped_tma" in names

    stem = _gpu_like((2, 3, 32, 32), (64, 3, 7, 7), stride=2)
    cands = [a for a in ALGORITHMS.values() if a.supports(stem) is None]
    names = [a.name for a, _ in autotune.tuning_pairs(stem, cands)]
    assert "width_unfold" in names and names.count("small_k") == 1 and names.count("implicit_gemm") == 1

    # one input channel (gray 1->16 5x5): the unfold is not tuned, small_k is
    gray = _gpu_like((64, 1, 64, 64), (16, 1, 5, 5))
    cands = [a for a in ALGORITHMS.values() if a.supports(gray) is None]
    assert "width_unfold" in {a.name for a in cands}
    names = [a.name for a, _ in autotune.tuning_pairs(gray, cands)]
    assert "width_unfold" not in names and "small_k" in names


def test_tuner_prunes_for_flat_rows():
    """4-16 input channels under a 3x3 filter (16-bit): flat_rows and one
    implicit_gemm fallback are tuned (fp32: the TMA kernels too, not the unfold or small_k); RGB
    stems, one-channel layers and 1x1 heads keep the other kernels; from 64 channels flat_rows itself is left out, and on 7x7 stems the unfold
    takes its place."""

    def names(xs, ws, dtype=torch.float16, stride=1):
        prob = _gpu_like(xs, ws, dtype=dtype, stride=stride)
        cands = [a for a in ALGORITHMS.values() if a.supports(prob) is None]
        return [a.name for a, _ in autotune.tuning_pairs(prob, cands)]

    narrow = names((32, 8, 32, 32), (8, 8, 3, 3))
    assert set(narrow) == {"flat_rows", "implicit_gemm"} and narrow.count("implicit_gemm") == 1
    assert set(names((16, 16, 64, 64), (16, 16, 3, 3))) == {"flat_rows", "implicit_gemm"}
    # fp32: the TMA kernels stay (narrow_tma won the seed 16->16 in TF32), the unfold and small_k go
    fp32 = names((16, 16, 64, 64), (16, 16, 3, 3), dtype=torch.float32)
    assert {"flat_rows", "narrow_tma", "implicit_gemm_tma"} <= set(fp32) and fp32.count("implicit_gemm") == 1
    assert not {"width_unfold", "small_k"} & set(fp32)
    assert "small_k" in names((16, 16, 64, 64), (16, 16, 5, 5), dtype=torch.float32)  # a 5x5: not the rule's
    assert "width_unfold" in names((2, 3, 32, 32), (32, 3, 3, 3), stride=2)  # MobileNet's stem
    assert "narrow_tma" in names((1, 16, 32, 32), (16, 16, 1, 1))  # a 1x1 head
    assert "flat_rows" not in names((8, 64, 16, 16), (64, 64, 3, 3))
    stem = names((2, 3, 32, 32), (64, 3, 7, 7), stride=2)
    assert "width_unfold" in stem and "flat_rows" not in stem


def test_tuner_prunes_implicit_gemm_on_fp32_stems(monkeypatch):
    """1-3 input channels in fp32: one implicit_gemm config (a fallback) among the candidates,
    with the GPU's config lists (the interpreter's are one or two configs anyway); 16-bit stems of
    fewer than 64 filters keep all of its configs."""
    from convgemm.conv import fprop

    monkeypatch.setattr(fprop, "interpreting", lambda: False)
    monkeypatch.setattr(fprop, "sm_count", lambda *_: 132)

    def names(xs, ws, dtype, stride=1):
        prob = _gpu_like(xs, ws, dtype=dtype, stride=stride)
        cands = [a for a in ALGORITHMS.values() if a.supports(prob) is None]
        return [a.name for a, _ in autotune.tuning_pairs(prob, cands)]

    for xs, ws in (((2, 3, 64, 64), (64, 3, 7, 7)), ((2, 3, 64, 64), (32, 3, 3, 3)), ((8, 1, 28, 28), (32, 1, 3, 3))):
        fp32 = names(xs, ws, torch.float32)
        assert fp32.count("implicit_gemm") == 1 and len(set(fp32)) > 1, fp32
    assert names((2, 3, 64, 64), (32, 3, 3, 3), torch.float16, stride=2).count("implicit_gemm") > 1


def test_tuner_prunes_rows_kernel_on_one_channel_layers():
    """One input channel without groups: the depthwise rows kernel (as a channel multiplier) is
    not tuned (it lost every such layer timed since session 26); real depthwise layers keep it."""

    def names(xs, ws, groups=1):
        prob = _gpu_like(xs, ws, groups=groups)
        cands = [a for a in ALGORITHMS.values() if a.supports(prob) is None]
        assert "depthwise_rows" in {a.name for a in cands}, "the rows kernel supports the layer"
        return {a.name for a, _ in autotune.tuning_pairs(prob, cands)}

    gray = names((8, 1, 64, 64), (16, 1, 5, 5))
    assert "depthwise_rows" not in gray and "small_k" in gray
    assert "depthwise_rows" not in names((8, 1, 28, 28), (32, 1, 3, 3))
    assert "depthwise_rows" in names((8, 16, 28, 28), (16, 1, 3, 3), groups=16)


def test_gluon_kernel_pruned_for_narrow_layers(monkeypatch):
    """implicit_gemm_ws is not tuned on layers with at most 16 output or 32 input channels (it
    lost every such layer the H200 timed); wider layers keep it."""
    from convgemm.conv import conv3d

    monkeypatch.setattr(conv3d, "sm_count", lambda: 132)
    ws, tma = ALGORITHMS["implicit_gemm_ws"], ALGORITHMS["implicit_gemm_tma"]

    def names(xs, wsh):
        return {a.name for a, _ in autotune.tuning_pairs(_gpu_like(xs, wsh), [ws, tma])}

    assert names((1, 64, 96, 96), (16, 64, 3, 3)) == {"implicit_gemm_tma"}  # a 16-channel head
    assert names((1, 32, 96, 96), (128, 32, 3, 3)) == {"implicit_gemm_tma"}  # 32 input channels
    assert names((8, 64, 56, 56), (128, 64, 3, 3)) == {"implicit_gemm_ws", "implicit_gemm_tma"}


def test_tma_configs_pruned_for_dense_layers(monkeypatch):
    """Dense layers get the tile forms that won on the H200 (persistent 64x256 and 128x256,
    plain 64x256 at 2-3 stages, split-K 64x128); grouped problems keep every plain tile."""
    from convgemm.conv import fprop

    monkeypatch.setattr(fprop, "interpreting", lambda: False)
    monkeypatch.setattr(fprop, "sm_count", lambda: 132)
    tma = fprop.ALGORITHMS["implicit_gemm_tma"]

    def forms(prob):
        return {(c.block_m, c.block_n, c.num_warps, c.num_stages, bool(c.persistent), c.split_k > 1)
                for c in tma.configs(prob)}  # fmt: skip

    dense = forms(_gpu_like((64, 256, 14, 14), (256, 256, 3, 3)))
    assert {(64, 256, 4, 4, True, False), (128, 256, 8, 3, True, False), (64, 256, 4, 2, False, False)} <= dense
    assert not any(f[2] == 8 and f[0] == 64 for f in dense)  # 64x256 on 8 warps
    assert not any(f[:2] == (128, 128) for f in dense)
    assert all(f[:2] == (64, 128) for f in dense if f[5])  # split-K only on 64x128
    small = forms(_gpu_like((8, 512, 7, 7), (512, 512, 3, 3)))  # few tiles, long reduction
    assert any(f[5] for f in small)
    grouped = forms(_gpu_like((64, 512, 14, 14), (512, 128, 3, 3), groups=4))
    assert (64, 256, 8, 3, False, False) in grouped and (128, 128, 8, 4, False, False) in grouped
    assert not any(f[4] for f in grouped)
    gemm = fprop.ALGORITHMS["gemm_1x1"]
    one = _gpu_like((64, 1024, 14, 14), (256, 1024, 1, 1))
    one = __import__("dataclasses").replace(one, pad_h=(0, 0), pad_w=(0, 0))
    assert {c.block_m for c in gemm.configs(one)} == {64}


def test_untuned_tma_defaults(monkeypatch):
    """The untuned TMA config (CONVGEMM_AUTOTUNE=0, and the tuner's fallback): persistent 64x256
    for dense 16-bit layers; one tile per program wherever persistence cannot run (groups, and
    grouped_tma's listing store even when its merge leaves one group) and for fp32."""
    from dataclasses import replace

    from convgemm.conv import fprop

    monkeypatch.setattr(fprop, "interpreting", lambda: False)
    monkeypatch.setattr(fprop, "sm_count", lambda: 132)
    tma, gtma = fprop.ALGORITHMS["implicit_gemm_tma"], fprop.ALGORITHMS["grouped_tma"]
    dense = tma.default_config(_gpu_like((64, 256, 14, 14), (256, 256, 3, 3)))
    assert (dense.block_m, dense.block_n, dense.num_stages, dense.persistent) == (64, 256, 4, 1)
    assert not tma.default_config(_gpu_like((64, 256, 14, 14), (256, 128, 3, 3), groups=2)).persistent
    assert not tma.default_config(_gpu_like((64, 256, 14, 14), (256, 256, 3, 3), dtype=torch.float32)).persistent
    two = _gpu_like((8, 16, 16, 16), (16, 8, 3, 3), groups=2)  # 8 per group: both merged into one
    two = replace(two, input_tma_ok=False)
    cfg = gtma.default_config(two)
    assert cfg.gt == 2 and not cfg.persistent and cfg.split_k == 1
    one = replace(_gpu_like((64, 1024, 14, 14), (256, 1024, 1, 1)), pad_h=(0, 0), pad_w=(0, 0))
    assert fprop.ALGORITHMS["gemm_1x1"].default_config(one).block_m == 64


def test_grouped_tma_offers_persistent_tiles(monkeypatch):
    """On ResNeXt's stride-1 layers ``grouped_tma`` offers its first two tiles again on persistent
    programs (one per SM where the tile's shared memory leaves no room for two) beside the
    one-tile-a-program forms; the persistent ones walk every super-group (``BATCHES``). Not at
    stride 2, where they were 5-7% behind (H100, session 45)."""
    from dataclasses import replace

    from convgemm.conv import fprop

    monkeypatch.setattr(fprop, "interpreting", lambda: False)
    monkeypatch.setattr(fprop, "sm_count", lambda: 132)
    algo = fprop.ALGORITHMS["grouped_tma"]
    for xs, ws, stride in (((64, 512, 14, 14), (512, 16, 3, 3), 1), ((64, 256, 56, 56), (256, 8, 3, 3), 2)):
        cfgs = algo.configs(_gpu_like(xs, ws, groups=32, stride=stride))
        plain = [c for c in cfgs if not c.persistent]
        pers = [c for c in cfgs if c.persistent]
        assert plain and all(c.gt > 1 for c in cfgs)
        if stride > 1:
            assert pers == []
            continue
        assert len(pers) == 2 and [replace(c, persistent=0) for c in pers] == plain[:2]
        for c in pers:
            smem = (c.num_stages * (c.block_m + c.block_n) * c.block_k + c.block_m * c.block_n) * 2
            assert c.persistent == (2 if smem <= 110_000 else 1)
    # fp32 (TF32) tiles take twice the shared memory: only those under the SM's budget
    for c in algo.configs(_gpu_like((64, 512, 14, 14), (512, 16, 3, 3), groups=32, dtype=torch.float32)):
        if c.persistent:
            assert (c.num_stages * (c.block_m + c.block_n) * c.block_k + c.block_m * c.block_n) * 4 <= 220_000


def test_grouped_tma_leaves_out_the_3_stage_64x256_tile_in_16_bit(monkeypatch):
    """In 16-bit, ``grouped_tma`` no longer offers 64 x 256 at 3 stages (it never won a ResNeXt
    layer in the tuner logs of sessions 23-60); 64 x 256 at 2 stages (37 H200 wins) and the
    64 x 128 tiles stay, and fp32 keeps its list."""
    from convgemm.conv import fprop

    monkeypatch.setattr(fprop, "interpreting", lambda: False)
    monkeypatch.setattr(fprop, "sm_count", lambda: 132)
    algo = fprop.ALGORITHMS["grouped_tma"]
    for xs, ws in (((64, 128, 56, 56), (128, 4, 3, 3)), ((64, 512, 14, 14), (512, 16, 3, 3))):
        cfgs = algo.configs(_gpu_like(xs, ws, groups=32))
        forms = {(c.block_n, c.num_stages) for c in cfgs}
        assert (256, 3) not in forms and {(256, 2), (128, 4)} <= forms, forms
        assert len([c for c in cfgs if not c.persistent]) == 4
    t32 = algo.configs(_gpu_like((64, 512, 14, 14), (512, 16, 3, 3), groups=32, dtype=torch.float32))
    assert len([c for c in t32 if not c.persistent]) == 6
