"""convgemm.extend: a user algorithm (``examples/patchify_algorithm.py``) registered, forced,
tuned, refused where it does not apply, and removed again."""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch
from conftest import DEVICE, INTERPRET
from reference import assert_close, conv2d_ref, conv_inputs

import convgemm
from convgemm import extend
from convgemm.tune import autotune

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the interpreter computes tl.dot on bf16 operands wrongly (raw bits): bf16 runs on the GPU
DTYPES = [torch.float32, torch.float16] if INTERPRET else [torch.bfloat16, torch.float16, torch.float32]


def _example():
    spec = importlib.util.spec_from_file_location("patchify_algorithm", os.path.join(ROOT, "examples",
                                                                                     "patchify_algorithm.py"))  # fmt: skip
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


EXAMPLE = _example()


@pytest.fixture
def patchify(monkeypatch):
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "0")
    algo = extend.register_algorithm(EXAMPLE.Patchify())
    yield algo
    extend.unregister_algorithm("patchify")


# (N, C, H, W, K, R, S): ConvNeXt's stem, a ViT-like patch embedding (K over one tile), a
# non-square patch with odd channel counts, an image whose edge drops a partial patch
CASES = [(2, 3, 16, 16, 96, 4, 4), (1, 3, 32, 32, 40, 8, 8), (2, 5, 9, 10, 7, 3, 5), (1, 16, 11, 13, 24, 2, 2)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["channels_last", "nchw"])
def test_forced_matches_reference(patchify, case, dtype, layout):
    n, c, h, w, k, r, s = case
    x, wt, b = conv_inputs(n, c, h, w, k, r, s, dtype, DEVICE, True, channels_last=layout == "channels_last")
    y = convgemm.conv2d(x, wt, b, stride=(r, s), algorithm="patchify")
    assert_close(y, conv2d_ref(x, wt, b, stride=(r, s)), dtype, f"patchify {case}")
    act = convgemm.conv2d(x, wt, b, stride=(r, s), algorithm="patchify", activation="relu")
    assert_close(act, conv2d_ref(x, wt, b, stride=(r, s)).clamp(min=0), dtype, f"patchify relu {case}")


def test_refuses_with_its_reason(patchify):
    x, wt, b = conv_inputs(1, 3, 8, 8, 4, 2, 2, torch.float32, DEVICE)
    with pytest.raises(ValueError, match="patchify needs stride == kernel"):
        convgemm.conv2d(x, wt, b, stride=2, padding=1, algorithm="patchify")
    x, wt, b = conv_inputs(1, 3, 8, 8, 6, 2, 2, torch.float32, DEVICE)
    with pytest.raises(ValueError, match="dilation 1 and groups 1"):
        convgemm.conv2d(x, wt[:, :1], b, stride=2, groups=3, algorithm="patchify")


def test_registry(patchify):
    assert "patchify" in convgemm.algorithms()
    order = autotune._HEURISTIC_ORDER
    assert order.index("patchify") == order.index("implicit_gemm") - 1, "after every built-in but the general one"
    with pytest.raises(ValueError, match="already registered"):
        extend.register_algorithm(EXAMPLE.Patchify())
    assert extend.register_algorithm(EXAMPLE.Patchify(), replace=True).name == "patchify"
    assert order.count("patchify") == 1 == autotune._HEURISTIC_ORDER.count("patchify")


def test_unregister_restores_the_builtins():
    before = (convgemm.algorithms(), autotune._HEURISTIC_ORDER)
    extend.register_algorithm(EXAMPLE.Patchify())
    extend.unregister_algorithm("patchify")
    assert (convgemm.algorithms(), autotune._HEURISTIC_ORDER) == before
    with pytest.raises(ValueError, match="was not registered"):
        extend.unregister_algorithm("patchify")
    with pytest.raises(ValueError, match="was not registered"):
        extend.unregister_algorithm("implicit_gemm")


def test_bad_registrations():
    class Builtin(EXAMPLE.Patchify):
        name = "implicit_gemm"

    class Nameless(EXAMPLE.Patchify):
        name = "?"

    class ReadsNchw(EXAMPLE.Patchify):
        name = "patchify_nchw"
        reads_nchw = True

    with pytest.raises(TypeError, match="not a convgemm.extend.Algorithm"):
        extend.register_algorithm(object())
    with pytest.raises(ValueError, match="built-in"):
        extend.register_algorithm(Builtin())
    with pytest.raises(ValueError, match="needs a name"):
        extend.register_algorithm(Nameless())
    with pytest.raises(ValueError, match="reads NCHW"):
        extend.register_algorithm(ReadsNchw())
    assert "patchify_nchw" not in convgemm.algorithms()


def test_launch_gemm_wants_five_functions(patchify):
    prob = convgemm.explain(*conv_inputs(1, 3, 8, 8, 4, 2, 2, torch.float32, DEVICE), stride=2)["problem"]
    with pytest.raises(ValueError, match="A_INIT, A_LOAD"):
        extend.launch_gemm(prob, patchify.default_config(prob), a=(), b=(), c=(), fns=(), m=1, n=1, k_tiles=1,
                           y=torch.empty(1))  # fmt: skip


@pytest.mark.gpu
def test_gpu_tuned_with_the_builtins(patchify, monkeypatch, tmp_path):
    """``auto`` times the registered algorithm against the built-in ones (GPU): whichever wins,
    the result is right, and the tuner's log shows the user algorithm was timed."""
    monkeypatch.setenv("CONVGEMM_AUTOTUNE", "1")
    monkeypatch.setenv("CONVGEMM_CACHE_DIR", str(tmp_path))
    log = tmp_path / "tune.jsonl"
    monkeypatch.setenv("CONVGEMM_TUNE_LOG", str(log))
    autotune.clear_memo()
    x, wt, b = conv_inputs(8, 3, 224, 224, 96, 4, 4, torch.bfloat16, DEVICE)
    y = convgemm.conv2d(x, wt, b, stride=4)
    assert_close(y, conv2d_ref(x, wt, b, stride=4), torch.bfloat16, "auto with patchify registered")
    assert '"algorithm": "patchify"' in log.read_text()


def test_cli_plugin_registers(capsys):
    """``convgemm info --plugin FILE`` runs the file as ``convgemm_plugin``: the example registers
    its algorithm then (and not when imported under another name, as this module does)."""
    from convgemm import cli

    assert "patchify" not in convgemm.algorithms()
    try:
        assert cli.main(["info", "--plugin", os.path.join(ROOT, "examples", "patchify_algorithm.py")]) == 0
        assert "patchify" in convgemm.algorithms()
        assert "patchify" in capsys.readouterr().out
    finally:
        if "patchify" in convgemm.algorithms():
            extend.unregister_algorithm("patchify")
    with pytest.raises(SystemExit, match="no such file"):
        cli.main(["info", "--plugin", os.path.join(ROOT, "examples", "missing.py")])


def test_cache_key_and_memo_follow_the_registry(patchify):
    """A process with registered algorithms keeps tuning-cache entries of its own, and a memo entry
    (keyed by bucketed sizes) naming a registered algorithm is used only where it supports the
    problem (the review's H = 15 case: the same bucket as H = 16)."""
    import dataclasses

    x, wt, b = conv_inputs(1, 3, 16, 16, 8, 4, 4, torch.float32, DEVICE)
    prob = convgemm.explain(x, wt, b, stride=4)["problem"]
    with_user = autotune.cache_key(prob, torch.device("cpu"))
    extend.unregister_algorithm("patchify")
    try:
        assert autotune.cache_key(prob, torch.device("cpu")) != with_user
    finally:
        extend.register_algorithm(EXAMPLE.Patchify())

    class EvenRows(EXAMPLE.Patchify):
        name = "even_rows"

        def supports(self, prob):
            return "odd image height" if prob.h % 2 else super().supports(prob)

    even = extend.register_algorithm(EvenRows())
    try:
        autotune._memo[prob.key()] = (even, even.default_config(prob))
        odd = dataclasses.replace(prob, h=15)  # the same bucket as 16 rows
        assert odd.key() == prob.key() and even.supports(odd) is not None
        assert autotune.choose(odd, x, wt, b, None)[0] is not even
        autotune._memo[prob.key()] = (even, even.default_config(prob))
        assert autotune.choose(prob, x, wt, b, None)[0] is even  # the entry still serves its own problem
    finally:
        extend.unregister_algorithm("even_rows")


def test_a_broken_plugin_is_skipped_with_a_warning(patchify):
    class Broken(EXAMPLE.Patchify):
        name = "broken"

        def supports(self, prob):
            raise RuntimeError("plugin bug")

    extend.register_algorithm(Broken())
    try:
        x, wt, b = conv_inputs(1, 3, 8, 8, 4, 2, 2, torch.float32, DEVICE)
        with pytest.warns(RuntimeWarning, match="supports\\(\\) raised RuntimeError"):
            y = convgemm.conv2d(x, wt, b, stride=2)
        assert_close(y, conv2d_ref(x, wt, b, stride=2), torch.float32, "auto beside a broken plugin")
    finally:
        extend.unregister_algorithm("broken")


def test_launch_gemm_refuses_what_it_does_not_set_up(patchify):
    import dataclasses

    x, wt, b = conv_inputs(1, 3, 8, 8, 4, 2, 2, torch.float32, DEVICE)
    prob = convgemm.explain(x, wt, b, stride=2)["problem"]
    cfg = patchify.default_config(prob)
    y = torch.empty(1, 4, 4, 4, device=DEVICE)
    call = dict(a=(), b=(), c=(), fns=(None,) * 5, m=16, n=4, k_tiles=1, y=y)
    with pytest.raises(ValueError, match="plain kernel"):
        extend.launch_gemm(prob, dataclasses.replace(cfg, split_k=2), **call)
    with pytest.raises(ValueError, match="plain kernel"):
        extend.launch_gemm(prob, dataclasses.replace(cfg, persistent=1), **call)
    with pytest.raises(ValueError, match="batch \\* n"):
        extend.launch_gemm(prob, cfg, bias=torch.zeros(5, device=DEVICE), **call)
