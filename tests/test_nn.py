"""convgemm.nn drop-in modules and patch / unpatch."""

import copy

import pytest
import torch
import torch.nn.functional as F
from conftest import DEVICE
from reference import THRESHOLDS, assert_close, rel_err
from torch import nn

import convgemm
from convgemm.conv.weight_prep import CastFlip

# fp32 means strict IEEE fp32 here (the reference thresholds assume it)
pytestmark = pytest.mark.usefixtures("no_tf32")


def _ref(module, x):
    """The torch module's output in float64 on the CPU (a deep copy, so the original is untouched)."""
    import copy

    m = convgemm.unpatch(copy.deepcopy(module)).double().cpu()
    with torch.no_grad():
        return m(x.double().cpu())


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv2d_module_padding_modes(padding_mode):
    torch.manual_seed(0)
    m = convgemm.nn.Conv2d(4, 6, 3, stride=(1, 2), padding=(2, 1), dilation=(2, 1), padding_mode=padding_mode)
    m = m.to(DEVICE)
    x = torch.randn(2, 4, 9, 8, device=DEVICE)
    with torch.no_grad():
        assert_close(m(x), _ref(m, x), torch.float32, padding_mode)


def test_conv2d_module_state_dict_round_trip():
    torch.manual_seed(0)
    ref = nn.Conv2d(3, 5, 3, padding="same", groups=1).to(DEVICE)
    ours = convgemm.nn.Conv2d(3, 5, 3, padding="same").to(DEVICE)
    ours.load_state_dict(ref.state_dict())
    assert set(ours.state_dict()) == set(ref.state_dict())
    x = torch.randn(1, 3, 7, 6, device=DEVICE)
    with torch.no_grad():
        assert_close(ours(x), _ref(ref, x), torch.float32, "state_dict")


def test_conv_transpose2d_module_with_output_size():
    torch.manual_seed(0)
    m = convgemm.nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1).to(DEVICE)
    x = torch.randn(1, 6, 5, 4, device=DEVICE)
    with torch.no_grad():
        y = m(x, output_size=[10, 8])
        assert y.shape == (1, 4, 10, 8)
        ref = convgemm.unpatch(__import__("copy").deepcopy(m)).double().cpu()(x.double().cpu(), output_size=[10, 8])
    assert_close(y, ref, torch.float32, "output_size")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.body = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=2), nn.ReLU(), nn.Conv2d(8, 8, 1))
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.head = nn.Conv2d(4, 2, 1)

    def forward(self, x):
        return self.head(self.up(self.body(torch.relu(self.stem(x)))))


def test_patch_swaps_in_place_and_unpatch_restores():
    torch.manual_seed(0)
    model = Net().to(DEVICE).eval()
    params = [id(p) for p in model.parameters()]
    x = torch.randn(2, 3, 6, 5, device=DEVICE)
    ref = _ref(model, x)
    assert convgemm.patch(model) is model
    assert type(model.stem) is convgemm.nn.Conv2d and type(model.up) is convgemm.nn.ConvTranspose2d
    assert [id(p) for p in model.parameters()] == params and not model.training
    with torch.no_grad():
        assert_close(model(x), ref, torch.float32, "patched")
    convgemm.unpatch(model)
    assert type(model.stem) is nn.Conv2d and type(model.up) is nn.ConvTranspose2d


def test_patch_include_exclude():
    model = Net()
    convgemm.patch(model, include=["body.*", "head"], exclude="body.2")
    assert type(model.body[0]) is convgemm.nn.Conv2d
    assert type(model.body[2]) is nn.Conv2d and type(model.stem) is nn.Conv2d
    assert type(model.head) is convgemm.nn.Conv2d and type(model.up) is nn.ConvTranspose2d
    with pytest.raises(TypeError, match="patch: model must be a torch.nn.Module"):
        convgemm.patch("not a model")
    with pytest.raises(TypeError, match="include must be a pattern string"):
        convgemm.patch(model, include=[1])


def test_in_place_weight_updates_are_seen():
    torch.manual_seed(0)
    m = convgemm.patch(nn.Sequential(nn.Conv2d(3, 4, 3))).to(DEVICE)
    x = torch.randn(1, 3, 5, 5, device=DEVICE)
    with torch.no_grad():
        y0 = m(x)
        m[0].weight.mul_(2)  # an optimizer-style in-place update
        assert_close(m(x), _ref(m, x), torch.float32, "after mul_")
        m[0].weight.data.zero_()  # through .data: no version bump, so the packed copy must be dropped
        convgemm.nn.clear_weight_cache(m)
        assert torch.allclose(m(x), m[0].bias.view(1, -1, 1, 1).expand_as(y0))


def _cached(mod):
    return mod.__dict__.get("_convgemm_packed")


def test_weight_cache_is_reused_and_invalidated():
    torch.manual_seed(0)
    m = convgemm.patch(nn.Sequential(nn.Conv2d(8, 8, 3, padding=1))).to(DEVICE)
    x = torch.randn(2, 8, 6, 6, device=DEVICE)
    conv = m[0]
    with torch.no_grad():
        m(x)
        first = _cached(conv)
        assert first is not None and first[1].is_contiguous(memory_format=torch.channels_last)
        m(x)
        assert _cached(conv) is first, "an unchanged weight must not be packed again"
    # an optimizer step (in place, under no_grad) changes the version: the next call repacks
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    m(x).square().mean().backward()
    assert _cached(conv) is first, "a call that needs gradients uses the parameters, not the cache"
    opt.step()
    with torch.no_grad():
        y = m(x)
    assert _cached(conv) is not first
    assert_close(y, _ref(m, x), torch.float32, "after an optimizer step")
    # load_state_dict copies in place: seen too
    sd = {k: torch.randn_like(v) for k, v in m.state_dict().items()}
    m.load_state_dict(sd)
    with torch.no_grad():
        assert_close(m(x), _ref(m, x), torch.float32, "after load_state_dict")
    convgemm.unpatch(m)
    assert _cached(conv) is None


def test_weight_cache_under_autocast_holds_the_cast_weight():
    m = convgemm.patch(nn.Conv2d(8, 8, 3, padding=1)).to(DEVICE)
    x = torch.randn(1, 8, 5, 5, device=DEVICE)
    dt = torch.bfloat16 if DEVICE == "cpu" else torch.float16
    with torch.no_grad(), torch.autocast(DEVICE, dtype=dt):
        y = m(x)
    assert y.dtype == dt and _cached(m)[1].dtype == dt and m.weight.dtype == torch.float32
    with torch.no_grad():
        assert m(x).dtype == torch.float32 and _cached(m)[1].dtype == torch.float32


def test_patched_training_step_matches():
    torch.manual_seed(0)
    model = Net().to(DEVICE)
    twin = __import__("copy").deepcopy(model)
    convgemm.patch(model)
    x = torch.randn(2, 3, 6, 5, device=DEVICE)
    for m in (model, twin):
        m(x).square().mean().backward()
    for (name, p), q in zip(model.named_parameters(), twin.parameters(), strict=True):
        assert_close(p.grad, q.grad.double().cpu(), torch.float32, name)


def test_functional_call_under_vmap_keeps_no_batched_weight():
    """torch.func.functional_call with a batch of parameter sets (an ensemble under vmap): every
    member's output matches its own unpatched module, and the module's packed-weight cache never
    holds a transform's wrapped tensor."""
    import warnings

    from torch import func

    ref = torch.nn.Conv2d(4, 6, 3, padding=1, dtype=torch.float64).to(DEVICE)
    mod = convgemm.patch(torch.nn.Sequential(copy.deepcopy(ref)))[0]
    x = torch.randn(2, 4, 5, 5, dtype=torch.float64, device=DEVICE)
    members = [torch.nn.Conv2d(4, 6, 3, padding=1, dtype=torch.float64).to(DEVICE) for _ in range(3)]
    params = {k: torch.stack([dict(m.named_parameters())[k].detach() for m in members]) for k in ("weight", "bias")}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*performance drop.*")
        got = func.vmap(lambda p: func.functional_call(mod, p, (x,)))(params)
        for i, m in enumerate(members):
            torch.testing.assert_close(got[i], m(x), rtol=1e-10, atol=1e-10)
    assert "_convgemm_packed" not in mod.__dict__
    with torch.no_grad():  # and the module still works, and caches, outside the transform
        torch.testing.assert_close(mod(x), ref(x), rtol=1e-10, atol=1e-10)


def _count_replays(mod) -> list[int]:
    """Wrap the module's kept replay so that its uses are counted (GPU: plans exist there only)."""
    key, fn, ref_w, ref_b = mod.__dict__["_convgemm_replay"]
    assert callable(fn), "no replay kept"
    n = [0]

    def counted(x):
        n[0] += 1
        return fn(x)

    mod.__dict__["_convgemm_replay"] = (key, counted, ref_w, ref_b)
    return n


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_module_replay_repeats_the_plan_and_sees_every_change(dtype):
    """A patched Conv2d keeps a replay of its plan after two inference calls with the same key
    (input geometry, parameters and their versions, module arguments, grad mode, ...) and runs it
    from the third on; any change takes the full path. Every call matches torch."""
    import convgemm.functional as fn

    torch.manual_seed(0)
    m = convgemm.patch(nn.Conv2d(16, 32, 3, padding=1)).to(DEVICE, dtype)
    cl = torch.channels_last

    def x_(n=2, h=9, fmt=cl):
        return torch.randn(n, 16, h, h, device=DEVICE, dtype=dtype).contiguous(memory_format=fmt)

    def check(make, what):
        # three calls: the full path, the full path that keeps a replay, the replay
        for i in range(3):
            x = make()
            y = m(x)
            assert y.is_contiguous(memory_format=cl), what
            assert_close(y, _ref(m, x), dtype, f"{what}, call {i + 1}")

    with torch.no_grad():
        check(x_, "first key")
        uses = _count_replays(m)
        check(x_, "repeat")
        assert uses[0] == 3
        m.weight.mul_(-0.5)  # in place: a new version, so a new key
        check(x_, "after an in-place weight update")
        assert uses[0] == 3, "the replay made for the old version must not run"
        uses = _count_replays(m)  # the rebuilt replay
        check(x_, "repeat after the update")
        assert uses[0] == 3
        check(lambda: x_(n=3), "another batch size")
        check(lambda: x_(fmt=torch.contiguous_format), "NCHW input")
        check(lambda: x_()[:, :, 1:, 1:], "a sliced view")
        m.bias = nn.Parameter(torch.randn(32, device=DEVICE, dtype=dtype))  # a new parameter
        check(x_, "a new bias")
        fn.clear_plans()
        check(x_, "after clear_plans")
        m.padding = (2, 0)
        check(x_, "changed padding")
        m.padding = (1, 1)
    x = x_().requires_grad_()
    y = m(x)
    assert y.grad_fn is not None, "a call that needs gradients takes the autograd path"
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
        # autocast replays too: the packed weight is the cast one, an fp32 input is cast first
        for make, what in (
            (lambda: x_().float(), "autocast, fp32 input"),
            (lambda: x_().half(), "autocast, fp16 input"),
        ):
            for i in range(3):
                x = make()
                y = m(x)
                assert y.dtype == torch.float16, what
                want = F.conv2d(x.double().half().double(), m.weight.half().double(), m.bias.half().double(), padding=1)
                assert_close(y, want, torch.float16, f"{what}, call {i + 1}")
                if i == 1:
                    uses = _count_replays(m)
            assert uses[0] == 1, f"{what}: the third call replayed"


@pytest.mark.gpu
def test_module_replay_after_fuse():
    """``fuse`` folds a batch norm and a ReLU into a module that already kept a replay: the next
    call must use the folded weight and the fused ReLU."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU()).to(DEVICE).eval()
    with torch.no_grad():
        model[1].running_mean.uniform_(-1, 1)
        model[1].running_var.uniform_(0.5, 2)
    x = torch.randn(2, 16, 8, 8, device=DEVICE).contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        want = model(x).double().cpu()
        convgemm.patch(model)
        model(x)
        model(x)
        convgemm.nn.fuse(model)
        got = model(x)
        again = model(x)
    assert_close(got, want, torch.float32, "fused after a replay was kept")
    assert torch.equal(got, again)


@pytest.mark.gpu
def test_module_replay_off(monkeypatch):
    """``CONVGEMM_REPLAY=0`` (read at import into ``convgemm.nn.REPLAY``): no replay is kept."""
    import convgemm.nn as cnn

    monkeypatch.setattr(cnn, "REPLAY", False)
    m = convgemm.patch(nn.Conv2d(16, 16, 3, padding=1)).to(DEVICE)
    x = torch.randn(1, 16, 6, 6, device=DEVICE).contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        m(x)
        y = m(x)
    assert "_convgemm_replay" not in m.__dict__
    assert_close(y, _ref(m, x), torch.float32, "replay off")


def test_patched_module_pickles_without_its_replay():
    """``torch.save(model)`` pickles modules whole: the kept replay (a closure over this process's
    plan) is left out, and the copy works and builds its own."""
    import io

    m = convgemm.patch(nn.Conv2d(4, 4, 3, padding=1)).to(DEVICE)
    m.__dict__["_convgemm_replay"] = (None, lambda x: x)  # as an inference call on a GPU leaves it
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    m2 = torch.load(buf, weights_only=False)
    assert "_convgemm_replay" not in m2.__dict__ and "_convgemm_replay" in m.__dict__
    x = torch.randn(1, 4, 5, 5, device=DEVICE)
    with torch.no_grad():
        assert_close(m2(x), _ref(m, x), torch.float32, "unpickled module")


def test_weight_cache_belongs_to_the_parameter_object():
    """The packed copy is used only for the very parameter it was made from: another parameter
    with the same address, version, dtype and shape (a freed one's memory and a fresh counter)
    packs anew. Deep copies and pickles start without the caches."""
    import weakref

    torch.manual_seed(0)
    m = convgemm.patch(nn.Conv2d(4, 4, 3, padding=1)).to(DEVICE)
    x = torch.randn(1, 4, 5, 5, device=DEVICE)
    with torch.no_grad():
        m(x)
    assert _cached(m) is not None and _cached(copy.deepcopy(m)) is None
    # a cache entry whose key matches the current weight but which was made from another object
    other = nn.Parameter(torch.zeros_like(m.weight))
    key, _, _, _, ref_b = _cached(m)
    stale = torch.zeros_like(m.weight).contiguous(memory_format=torch.channels_last)
    m.__dict__["_convgemm_packed"] = (key, stale, m.bias, weakref.ref(other), ref_b)
    with torch.no_grad():
        assert_close(m(x), _ref(m, x), torch.float32, "a cache made from another parameter object")
    assert _cached(m)[1] is not stale


def test_module_replay_bookkeeping(monkeypatch):
    """The module side of the replay on any machine: with a key and a replay stubbed in (plans,
    and so real replays, exist on CUDA devices only), the second call with a key builds the
    replay and later ones run it; a new weight object, a new version, or a key change starts
    over, and keys seen once build nothing."""
    from convgemm import nn as cnn

    built, ran = [], []

    def fake_replay(input, weight, bias, *args):
        built.append(weight)

        def replay(x):
            ran.append(1)
            return convgemm.conv2d(x, weight, bias, padding=1)

        return replay

    monkeypatch.setattr(cnn, "_replay_key", lambda mod, x, w, b: (x.shape, w._version))
    monkeypatch.setattr(cnn, "forward_replay", fake_replay)
    torch.manual_seed(0)
    m = convgemm.patch(nn.Conv2d(4, 4, 3, padding=1)).to(DEVICE)
    x = torch.randn(1, 4, 5, 5, device=DEVICE)
    with torch.no_grad():
        m(x)
        assert not built, "a key seen once builds nothing"
        m(x)
        assert len(built) == 1 and built[0] is _cached(m)[1] and not ran
        assert_close(m(x), _ref(m, x), torch.float32, "replayed")
        assert len(ran) == 1 and len(built) == 1
        m.weight.mul_(2)  # a new version: the full path twice, then a new replay
        assert_close(m(x), _ref(m, x), torch.float32, "after mul_")
        m(x)
        assert len(ran) == 1 and len(built) == 2
        m(x)
        assert len(ran) == 2
        new = nn.Parameter(m.weight.detach().clone())
        while new._version < m.weight._version:  # the old weight's version: the same key, another object
            new.mul_(1)
        m.weight = new
        assert_close(m(x), _ref(m, x), torch.float32, "a new parameter object")
        assert len(ran) == 2 and len(built) == 2
        m(x)
        assert len(ran) == 2 and len(built) == 3
        m(x)
        assert len(ran) == 3
        m(torch.randn(1, 4, 6, 6, device=DEVICE))  # keys that change every call build nothing
        m(torch.randn(1, 4, 7, 7, device=DEVICE))
        assert len(built) == 3


def test_module_conversions_drop_the_caches():
    """``module.double()`` / ``.float()`` (and ``.to``, ``.half``, ``.cuda``) swap the parameters'
    data without a version bump: the caches go, and the result is the converted weight's."""
    torch.manual_seed(0)
    m = convgemm.patch(nn.Conv2d(4, 4, 3, padding=1)).to(DEVICE)
    x = torch.randn(1, 4, 5, 5, device=DEVICE)
    with torch.no_grad():
        m(x)
        assert _cached(m) is not None
        m.double()
        assert _cached(m) is None
        assert_close(m(x.double()), _ref(m, x), torch.float64, "after double()")
        m.float()
        assert _cached(m) is None
        assert_close(m(x), _ref(m, x), torch.float32, "after float()")


def _cpu_plans(monkeypatch):
    """Plans (and so replays) on any device: the plan key without its CUDA-only condition, and a
    replay key for CPU tensors. The interpreter then runs a plan's kernels on every call."""
    import convgemm.functional as fn
    from convgemm import nn as cnn

    monkeypatch.setattr(fn, "_signature", fn._plan_key)
    monkeypatch.setattr(
        cnn, "_replay_key", lambda mod, x, w, b: (x.shape, x.stride(), x.dtype, w._version, fn.PLANS_GENERATION[0])
    )
    fn.clear_plans()


def _count_forward_replays(monkeypatch) -> list[int]:
    """Wrap ``functional.forward_replay`` as the nn modules call it: one entry per replay built,
    counting that replay's uses."""
    import convgemm.functional as fn
    from convgemm import nn as cnn

    made: list[int] = []
    real = fn.forward_replay

    def counting(*args):
        replay = real(*args)
        if replay is None:
            return None
        made.append(0)

        def counted(x):
            made[-1] += 1
            return replay(x)

        return counted

    monkeypatch.setattr(cnn, "forward_replay", counting)
    return made


@pytest.mark.parametrize("fused", [False, True], ids=["plain", "fused-relu"])
def test_module_replay_runs_the_plan(monkeypatch, fused):
    """The replay itself (``functional.forward_replay``), on the interpreter: from the third call
    with one key the module runs the kept plan's algorithm directly, with torch's results."""
    import convgemm.functional as fn

    _cpu_plans(monkeypatch)
    made = _count_forward_replays(monkeypatch)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU()).to(DEVICE)
    convgemm.patch(model)
    if fused:
        convgemm.nn.fuse(model)
    try:
        with torch.no_grad():
            for i in range(4):
                x = torch.randn(1, 16, 6, 6, device=DEVICE).contiguous(memory_format=torch.channels_last)
                want = torch.relu(_ref(model[0], x)) if not fused else _ref(model[0], x).relu()
                assert_close(model(x), want, torch.float32, f"call {i + 1}")
        assert made == [2], "built on the second call, run on the third and fourth"
    finally:
        fn.clear_plans()


@pytest.mark.parametrize("input_dtype", [torch.float32, torch.float16], ids=["fp32-input", "fp16-input"])
def test_module_replay_under_autocast(monkeypatch, input_dtype):
    """Inference under autocast replays (on the interpreter, CPU autocast in fp16): the kept plan
    reads the packed weight cast to fp16, and an fp32 input is cast first, as autocast does on the
    full path; every call equals the full path's result bit for bit."""
    import convgemm.functional as fn
    from convgemm import nn as cnn

    _cpu_plans(monkeypatch)
    monkeypatch.setattr(
        cnn,
        "_replay_key",
        lambda mod, x, w, b: (x.shape, x.stride(), x.dtype, w._version, torch.is_autocast_enabled("cpu"),
                              fn.PLANS_GENERATION[0]),
    )  # fmt: skip
    made = _count_forward_replays(monkeypatch)
    torch.manual_seed(0)
    m = convgemm.patch(nn.Conv2d(16, 16, 3, padding=1)).to(DEVICE)
    plain = copy.deepcopy(m)
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
            for i in range(4):
                x = torch.randn(1, 16, 6, 6, device=DEVICE).to(input_dtype)
                x = x.contiguous(memory_format=torch.channels_last)
                y = m(x)
                monkeypatch.setattr(cnn, "REPLAY", False)
                want = plain(x)
                monkeypatch.setattr(cnn, "REPLAY", True)
                assert y.dtype == torch.float16 and torch.equal(y, want), f"call {i + 1}"
        assert made == [2], "built on the second call, run on the third and fourth"
    finally:
        fn.clear_plans()


@pytest.mark.parametrize("padding", [1, "same"], ids=["pad1", "same"])
def test_conv1d_module_replay_runs_the_plan(monkeypatch, padding):
    """``Conv1d`` replays the plan of the 2-D call ``conv1d`` makes (on the interpreter here):
    channels-last ``[N, C, L]`` input, torch's results on every call, the replay from the third."""
    import convgemm.functional as fn

    _cpu_plans(monkeypatch)
    made = _count_forward_replays(monkeypatch)
    torch.manual_seed(0)
    m = convgemm.patch(nn.Conv1d(16, 32, 3, padding=padding, stride=1)).to(DEVICE)
    try:
        with torch.no_grad():
            for i in range(4):
                x = torch.randn(2, 11, 16, device=DEVICE).transpose(1, 2)  # [N, C, L], channel stride 1
                y = m(x)
                assert y.shape == (2, 32, 11)
                assert_close(y, _ref(m, x), torch.float32, f"call {i + 1}")
        assert made == [2], "built on the second call, run on the third and fourth"
    finally:
        fn.clear_plans()


def _cpu_train_plans(monkeypatch):
    """``_cpu_plans`` for training calls: a training key and wgrad plan keys for CPU tensors."""
    import convgemm.functional as fn
    from convgemm import nn as cnn

    _cpu_plans(monkeypatch)
    monkeypatch.setattr(fn, "_wgrad_signature", fn._wgrad_plan_key)
    monkeypatch.setattr(
        cnn,
        "_train_key",
        lambda mod, x, w, b: (x.shape, x.stride(), x.dtype, w.shape, w.stride(), w.requires_grad, b is None,
                              fn.PLANS_GENERATION[0]),
    )  # fmt: skip


@pytest.mark.parametrize(
    "case",
    [
        dict(k=3, stride=1, padding=1, bias=True),  # dgrad as a forward convolution of dy
        dict(k=3, stride=2, padding=1, bias=False),  # strided: one launch over the phases (dgrad_tma)
        dict(k=1, stride=2, padding=0, bias=True),  # dgrad by phases (one of four gets the tap)
        # an RGB first layer in fp16: wgrad on the width unfold by row phase; no input gradient
        dict(k=3, stride=2, padding=1, bias=False, c=3, dtype=torch.float16, input_grad=False),
    ],
    ids=["3x3", "3x3-s2", "1x1-s2", "rgb-s2-fp16"],
)
def test_module_training_replay(monkeypatch, case):
    """Training calls replay their plans (``ops.TrainReplay``), on the interpreter: from the third
    step the forward runs the kept plan, from the fourth the gradients do too; the results
    equal the general path's bit for bit (the same kernels and configs) and torch's in float64,
    with the weight updated in place between steps."""
    import convgemm.functional as fn
    from convgemm import nn as cnn
    from convgemm import ops

    _cpu_train_plans(monkeypatch)
    used = {"forward": 0, "dgrad": 0, "wgrad": 0}

    def counting(name, real):
        def make(*args):
            run = real(*args)
            if run is None:
                return None

            def counted(*a):
                used[name] += 1
                return run(*a)

            return counted

        return make

    monkeypatch.setattr(ops, "forward_runner", counting("forward", ops.forward_runner))
    monkeypatch.setattr(ops, "dgrad_runner", counting("dgrad", ops.dgrad_runner))
    monkeypatch.setattr(ops, "wgrad_runner", counting("wgrad", ops.wgrad_runner))
    torch.manual_seed(0)
    k, stride, padding, bias = case["k"], case["stride"], case["padding"], case["bias"]
    c, dtype, input_grad = case.get("c", 16), case.get("dtype", torch.float32), case.get("input_grad", True)
    m = convgemm.patch(nn.Conv2d(c, 16, k, stride=stride, padding=padding, bias=bias)).to(DEVICE, dtype)
    plain = copy.deepcopy(m)  # the same module on the general path (no replay)
    try:
        for step in range(4):
            x = torch.randn(2, c, 8, 8, device=DEVICE, dtype=dtype).contiguous(memory_format=torch.channels_last)
            results = []
            for mod, replay in ((m, True), (plain, False)):
                monkeypatch.setattr(cnn, "REPLAY", replay)
                xi = x.clone().requires_grad_(input_grad)
                y = mod(xi)
                g = torch.randn(y.shape, generator=torch.Generator().manual_seed(step)).to(DEVICE, dtype)
                g = g.contiguous(memory_format=torch.channels_last)
                y.backward(g)
                results.append((y.detach(), xi.grad, mod.weight.grad, mod.bias.grad if bias else None))
            (y, dx, dw, db), want = results
            for a, b, what in zip((y, dx, dw, db), want, ("y", "dx", "dw", "db"), strict=True):
                if a is not None:
                    assert torch.equal(a, b), f"step {step + 1}: {what} differs from the general path"
            ref = convgemm.unpatch(copy.deepcopy(m)).double().cpu()
            xr = x.double().cpu().requires_grad_(input_grad)
            yr = ref(xr)
            yr.backward(g.double().cpu())
            assert_close(y, yr.detach(), dtype, f"step {step + 1}: y")
            if input_grad:
                assert_close(dx, xr.grad, dtype, f"step {step + 1}: dx")
            assert_close(dw, ref.weight.grad, dtype, f"step {step + 1}: dw")
            with torch.no_grad():  # an optimizer step: in place, as the plan must not care
                for mod in (m, plain):
                    for p in mod.parameters():
                        p -= 0.1 * p.grad
                        p.grad = None
        assert used["forward"] == 2, "the forward replayed on steps 3 and 4"
        assert used["wgrad"] == 1, "wgrad replayed on step 4 (its plan made by step 3's backward)"
        assert used["dgrad"] == (1 if input_grad else 0), "dgrad replayed on step 4"
        unfold = fn._unfold_wgrad_pays(fn.make_problem(x, m.weight, None, stride, padding, 1, 1))
        assert unfold == (c == 3), "the RGB case is the one whose wgrad runs on the width unfold"
        assert type(m.__dict__[cnn._TRAIN_ATTR][1]) is ops.TrainReplay
        assert cnn._TRAIN_ATTR not in plain.__dict__ or not plain.__dict__[cnn._TRAIN_ATTR][1]
    finally:
        fn.clear_plans()


@pytest.mark.gpu
@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "autocast-bf16"])
def test_gpu_training_replay_matches_general_path(monkeypatch, autocast):
    """A small CNN trained six steps (SGD) with the training replay and without it, from one
    initialisation: the same kernels and configs, so the losses and parameters agree bit for bit;
    every convolution ends up replaying (forward and both gradients where the route has them)."""
    from convgemm import nn as cnn
    from convgemm import ops

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1, bias=False), nn.ReLU(),
        nn.Conv2d(64, 64, 1), nn.ReLU(),
        nn.Conv2d(64, 128, 1, stride=2, bias=False), nn.ReLU(),
        nn.Conv2d(128, 128, 3, padding=2, dilation=2, groups=4),
    ).to(DEVICE).to(memory_format=torch.channels_last)  # fmt: skip
    a = convgemm.patch(model)
    b = copy.deepcopy(a)
    opts = [torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for m in (a, b)]
    x = torch.randn(4, 3, 32, 32, device=DEVICE).contiguous(memory_format=torch.channels_last)
    for step in range(6):
        losses = []
        for mod, opt, replay in ((a, opts[0], True), (b, opts[1], False)):
            monkeypatch.setattr(cnn, "REPLAY", replay)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                loss = mod(x).float().square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.item())
        assert losses[0] == losses[1], f"step {step + 1}: loss {losses[0]} with the replay, {losses[1]} without"
    for (name, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q), f"{name} differs after six steps"
    for name, mod in a.named_modules():
        if isinstance(mod, nn.Conv2d):
            state = mod.__dict__.get(cnn._TRAIN_ATTR)
            assert state is not None and type(state[1]) is ops.TrainReplay, f"{name} does not replay"
            plan = state[1]
            if name == "0":  # the RGB layer: wgrad by the width unfold (no runner), dx not needed
                continue
            assert plan.dy_key is not None, f"{name}: never went backward through the replay"
            if plan.dy_key[0][1] == 1:  # a channels_last grad_output: runners
                assert plan.wgrad, f"{name}: wgrad has no runner"
                assert plan.dgrad is not None, f"{name}: dgrad never ran"
            # an NCHW grad_output (the last layer's) keeps a runner exactly where its plan's kernel
            # takes any strides (session 17 on the H200: the grouped layer's wgrad in fp32), so
            # no assertion on which: the bitwise checks above are what matter there


def test_module_training_replay_double_backward(monkeypatch):
    """``create_graph`` through a replayed training call (a gradient penalty): the replay's
    backward hands over to the operators, which record their own gradients; the results equal
    the general path's."""
    import convgemm.functional as fn
    from convgemm import nn as cnn
    from convgemm import ops

    _cpu_train_plans(monkeypatch)
    torch.manual_seed(0)
    m = convgemm.patch(nn.Conv2d(8, 8, 3, padding=1)).to(DEVICE)
    plain = copy.deepcopy(m)
    try:
        for step in range(4):
            x = torch.randn(2, 8, 6, 6, device=DEVICE).contiguous(memory_format=torch.channels_last)
            got = []
            for mod, replay in ((m, True), (plain, False)):
                monkeypatch.setattr(cnn, "REPLAY", replay)
                xi = x.clone().requires_grad_()
                (gx,) = torch.autograd.grad(mod(xi).square().sum(), xi, create_graph=True)
                gx.square().sum().backward()
                got.append((gx.detach(), xi.grad, mod.weight.grad.clone()))
                mod.zero_grad(set_to_none=True)
            for a, b, what in zip(*got, ("dx", "d(penalty)/dx", "d(penalty)/dw"), strict=True):
                assert torch.equal(a, b), f"step {step + 1}: {what}"
        assert type(m.__dict__[cnn._TRAIN_ATTR][1]) is ops.TrainReplay, "the calls replayed"
    finally:
        fn.clear_plans()


@pytest.mark.gpu
def test_gpu_train_key():
    """The training replay's key: unchanged by an optimizer step (the plans do not depend on the
    weight's values), changed by everything the plans depend on; None on a side stream."""
    import convgemm.functional as fn
    from convgemm import nn as cnn

    m = convgemm.nn.Conv2d(8, 8, 3, padding=1).to(DEVICE)
    x = torch.randn(2, 8, 6, 6, device=DEVICE)

    def key(x=x):
        return cnn._train_key(m, x, m.weight, m.bias)

    k = key()
    assert k is not None
    with torch.no_grad():
        m.weight.add_(1)  # an optimizer step
    assert key() == k, "an in-place weight update must not change the key"
    with torch.autocast("cuda", dtype=torch.bfloat16):
        assert key() != k, "the autocast dtype"
    assert key(x.contiguous(memory_format=torch.channels_last)) != k, "the input's strides"
    assert key(x[:, :, 1:]) != k, "the input's shape"
    m.padding = (2, 2)
    assert key() != k, "the module's arguments"
    m.padding = (1, 1)
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = not old
    try:
        assert key() != k, "the TF32 flag"
    finally:
        torch.backends.cudnn.allow_tf32 = old
    assert key() == k
    m.weight.requires_grad_(False)
    assert key() != k, "a frozen weight (the replay then reads the packed copy)"
    m.weight.requires_grad_(True)
    assert key() == k
    fn.clear_plans()
    assert key() != k, "clear_plans' generation"
    with torch.cuda.stream(torch.cuda.Stream()):
        assert key() is None, "a side stream takes the full path"
    if torch.cuda.device_count() > 1:  # the replays have no device guard
        m1 = convgemm.nn.Conv2d(8, 8, 3, padding=1).to("cuda:1")
        x1 = x.to("cuda:1")
        with torch.cuda.device(0):
            assert cnn._train_key(m1, x1, m1.weight, m1.bias) is None, "off the current device"
            with torch.no_grad():
                assert cnn._replay_key(m1, x1, m1.weight, m1.bias) is None, "off the current device"
        with torch.cuda.device(1):
            assert cnn._train_key(m1, x1, m1.weight, m1.bias) is not None


@pytest.mark.parametrize("padding", [1, "same"])
def test_conv1d_module_training_replay(monkeypatch, padding):
    """``nn.Conv1d`` training calls replay the 2-D call ``conv1d`` makes: from the third step the
    forward runs the kept plan, from the fourth the gradients do (tensors with channel stride 1,
    whose ``[N, C, 1, L]`` views are channels_last); equal to the general path bit for bit, and
    to torch in float64."""
    import convgemm.functional as fn
    from convgemm import nn as cnn
    from convgemm import ops

    _cpu_train_plans(monkeypatch)
    built = []
    real = ops.TrainReplay.build

    def counting(*args):
        plan = real(*args)
        built.append(plan)
        return plan

    monkeypatch.setattr(ops.TrainReplay, "build", counting)
    torch.manual_seed(0)
    m = convgemm.patch(nn.Conv1d(16, 32, 3, padding=padding)).to(DEVICE)
    plain = copy.deepcopy(m)
    try:
        for step in range(4):
            x = torch.randn(2, 11, 16, device=DEVICE).transpose(1, 2)  # [N, C, L], channel stride 1
            got = []
            for mod, replay in ((m, True), (plain, False)):
                monkeypatch.setattr(cnn, "REPLAY", replay)
                xi = x.clone().transpose(1, 2).contiguous().transpose(1, 2).requires_grad_()
                y = mod(xi)
                # channel stride 1, as x: then the [N, K, 1, L] view of dy is channels_last, which
                # the gradients' runners need (an NCL dy takes the general path)
                g = torch.randn(2, y.shape[2], 32, generator=torch.Generator().manual_seed(step)).to(DEVICE)
                g = g.transpose(1, 2)
                y.backward(g)
                got.append((y.detach(), xi.grad, mod.weight.grad, mod.bias.grad))
            for a, b, what in zip(*got, ("y", "dx", "dw", "db"), strict=True):
                assert torch.equal(a, b), f"step {step + 1}: {what} differs from the general path"
            ref = convgemm.unpatch(copy.deepcopy(m)).double().cpu()
            xr = x.double().cpu().requires_grad_()
            yr = ref(xr)
            yr.backward(g.double().cpu())
            y, dx, dw, _ = got[0]
            assert_close(y, yr.detach(), torch.float32, f"step {step + 1}: y")
            assert_close(dx, xr.grad, torch.float32, f"step {step + 1}: dx")
            assert_close(dw, ref.weight.grad, torch.float32, f"step {step + 1}: dw")
            with torch.no_grad():
                for mod in (m, plain):
                    for p in mod.parameters():
                        p -= 0.1 * p.grad
                        p.grad = None
        assert len(built) == 1 and type(built[0]) is ops.TrainReplay, "built once, on the second call"
        plan = built[0]
        assert plan.dgrad and plan.wgrad, "both gradients replayed after the first replayed backward"
    finally:
        fn.clear_plans()


@pytest.mark.parametrize("rank", [2, 1], ids=["conv2d", "conv1d"])
def test_module_training_replay_under_autocast(monkeypatch, rank):
    """Under autocast the replay takes the fp32 weight and bias as they are and casts them inside
    its Function (``TrainReplay.cast``): no cast node of autograd's own between the parameters and
    the convolution, the same values bit for bit as the general path (where autocast casts and
    ``ToCopyBackward`` casts the gradients back), gradients in the parameters' dtype, and a
    gradient penalty (create_graph) still reaches the weight. CPU autocast in fp16 on the
    interpreter (its bf16 ``tl.dot`` is wrong); the GPU test runs bf16."""
    import convgemm.functional as fn
    from convgemm import nn as cnn
    from convgemm import ops

    _cpu_train_plans(monkeypatch)
    torch.manual_seed(0)
    conv = nn.Conv2d(16, 16, 3, padding=1) if rank == 2 else nn.Conv1d(16, 16, 3, padding=1)
    m = convgemm.patch(conv).to(DEVICE)
    plain = copy.deepcopy(m)
    shape = (2, 16, 6, 6) if rank == 2 else (2, 16, 9)
    half = torch.float16
    try:
        for step in range(5):
            x = torch.randn(shape, device=DEVICE, dtype=half)
            x = (
                x.contiguous(memory_format=torch.channels_last)
                if rank == 2
                else x.transpose(1, 2).contiguous().transpose(1, 2)
            )
            got = []
            for mod, replay in ((m, True), (plain, False)):
                monkeypatch.setattr(cnn, "REPLAY", replay)
                xi = x.clone().requires_grad_()
                with torch.autocast("cpu", dtype=half):
                    y = mod(xi)
                assert y.dtype == half
                if replay and step >= 2:  # replayed: the parameters feed the Function directly
                    node = y.grad_fn if rank == 2 else y.grad_fn.next_functions[0][0]
                    assert type(node).__name__ == "_ReplayConv2dBackward", type(node).__name__
                    nexts = [type(f).__name__ for f, _ in node.next_functions if f is not None]
                    assert "ToCopyBackward0" not in nexts, nexts
                g = torch.randn(y.shape, generator=torch.Generator().manual_seed(step)).to(DEVICE, half)
                # channel stride 1, as x (the gradients' runners need a channels_last dy)
                g = (
                    g.contiguous(memory_format=torch.channels_last)
                    if rank == 2
                    else g.transpose(1, 2).contiguous().transpose(1, 2)
                )
                y.backward(g)
                assert mod.weight.grad.dtype == torch.float32 and mod.bias.grad.dtype == torch.float32
                got.append((y.detach(), xi.grad, mod.weight.grad, mod.bias.grad))
            for a, b, what in zip(*got, ("y", "dx", "dw", "db"), strict=True):
                assert torch.equal(a, b), f"step {step + 1}: {what} differs from the general path"
            with torch.no_grad():
                for mod in (m, plain):
                    for p in mod.parameters():
                        p -= 0.1 * p.grad
                        p.grad = None
        plan = m.__dict__[cnn._TRAIN_ATTR][1]
        assert type(plan) is ops.TrainReplay and plan.cast == half and plan.cast_input is None
        assert plan.dgrad and plan.wgrad, "both gradients replayed"
        # a stride-1 dgrad by the forward: steps 4 and 5 cast and flipped the weight in one launch
        assert type(plan.prep) is CastFlip and plan.prep.launch is not None
        # a gradient penalty through the replayed call: d(penalty)/dw through the cast in the graph
        pens = []
        for mod, replay in ((m, True), (plain, False)):
            monkeypatch.setattr(cnn, "REPLAY", replay)
            xi = x.clone().requires_grad_()
            with torch.autocast("cpu", dtype=half):
                (gx,) = torch.autograd.grad(mod(xi).float().square().mean(), xi, create_graph=True)
            gx.float().square().mean().backward()
            pens.append((gx.detach(), mod.weight.grad.clone()))
            mod.zero_grad(set_to_none=True)
        assert pens[0][1].isfinite().all() and pens[0][1].abs().sum() > 0, "the penalty's gradient reached the weight"
        assert torch.equal(pens[0][0], pens[1][0]), "gradient penalty: dx differs from the general path"
        # d(penalty)/dw has two terms (through the forward and through dx). On the general path
        # they meet at autocast's one cast node and are summed in fp16, then cast; the replay
        # casts each to fp32 and sums there: equal to fp16 rounding, not bit for bit
        err = rel_err(pens[0][1], pens[1][1].double())
        assert err <= THRESHOLDS["fp16"], f"gradient penalty: d(penalty)/dw relative error {err:.2e}"
    finally:
        fn.clear_plans()


def test_module_training_replay_under_autocast_frozen_weight(monkeypatch):
    """A frozen convolution (weight and bias without gradients) under autocast whose input needs
    a gradient (an attack's input gradients through a frozen model, trainable layers before it):
    the replay reads the module's packed copy of the parameters (cast, channels innermost), as
    the full path does, so it replays at all (session 62: before, its plan never matched and
    every call took the full path); dx equals the full path's bit for bit, the parameters get no
    gradient, and unfreezing them is a new key."""
    import convgemm.functional as fn
    from convgemm import nn as cnn
    from convgemm import ops

    _cpu_train_plans(monkeypatch)
    torch.manual_seed(0)
    m = convgemm.patch(nn.Conv2d(16, 16, 3, padding=1)).to(DEVICE)
    m.requires_grad_(False)
    plain = copy.deepcopy(m)
    half = torch.float16
    try:
        for step in range(5):
            x = torch.randn(2, 16, 6, 6, device=DEVICE, dtype=half).contiguous(memory_format=torch.channels_last)
            g = torch.randn(2, 16, 6, 6, generator=torch.Generator().manual_seed(step)).to(DEVICE, half)
            g = g.contiguous(memory_format=torch.channels_last)
            got = []
            for mod, replay in ((m, True), (plain, False)):
                monkeypatch.setattr(cnn, "REPLAY", replay)
                xi = x.clone().requires_grad_()
                with torch.autocast("cpu", dtype=half):
                    y = mod(xi)
                y.backward(g)
                assert mod.weight.grad is None and mod.bias.grad is None
                got.append((y.detach(), xi.grad))
            for a, b, what in zip(*got, ("y", "dx"), strict=True):
                assert torch.equal(a, b), f"step {step + 1}: {what} differs from the general path"
        plan = m.__dict__[cnn._TRAIN_ATTR][1]
        assert type(plan) is ops.TrainReplay and plan.packed and plan.cast is None
        assert plan.dgrad and plan.wgrad is None, "dgrad replayed, no wgrad"
        m.requires_grad_(True)  # unfrozen: the parameters themselves, a new plan, and their gradients
        monkeypatch.setattr(cnn, "REPLAY", True)
        for _ in range(3):
            with torch.autocast("cpu", dtype=half):
                y = m(x.clone().requires_grad_())
            y.backward(g)
        plan = m.__dict__[cnn._TRAIN_ATTR][1]
        assert not plan.packed and plan.cast == half and m.weight.grad is not None
    finally:
        fn.clear_plans()


@pytest.mark.parametrize(
    "case",
    [
        dict(k=16, c=8, r=3, s=3, groups=1, cl=True),
        dict(k=70, c=5, r=3, s=1, groups=1, cl=True),  # blocks past K and C, a 3x1 filter
        dict(k=24, c=4, r=3, s=3, groups=6, cl=True),  # groups: channel axes swapped per group
        dict(k=16, c=8, r=1, s=1, groups=1, cl=False),  # 1x1, contiguous weight
        dict(k=8, c=8, r=5, s=3, groups=2, cl=False),
    ],
    ids=["3x3", "70x5-3x1", "g6", "1x1-nchw", "5x3-g2-nchw"],
)
@pytest.mark.parametrize("dtype", [torch.float16, pytest.param(torch.bfloat16, marks=pytest.mark.gpu)])
def test_cast_flip_equals_cast_then_flip(case, dtype):
    """``CastFlip`` (one kernel: the autocast cast of the weight and the dgrad's flipped copy)
    gives exactly ``weight.to(dtype)`` and ``_flipper``'s flip of it: values bit for bit (NaN and
    infinities included), shapes and strides. bf16 on the GPU only: Triton 3.6's interpreter
    rounds fp32 -> bf16 toward zero (``CastFlip.build``'s own check then refuses it)."""
    from convgemm.functional import _flipper

    torch.manual_seed(0)
    w = torch.randn(case["k"], case["c"], case["r"], case["s"], device=DEVICE) * 3
    w.view(-1)[:3] = torch.tensor([float("nan"), float("inf"), -float("inf")])
    w.view(-1)[3] = 1 + 2**-9  # a tie in bf16: rounds to even
    if case["cl"]:
        w = w.contiguous(memory_format=torch.channels_last)
    want_c = w.to(dtype)
    flip = _flipper(want_c, case["groups"], case["cl"])
    want_t = flip(want_c)
    prep = CastFlip.build(w, dtype, flip, case["groups"])
    assert prep is not None, "the kernel disagreed with .to and the flip on its own check"
    w2 = torch.randn_like(w)  # a later step's weight: same geometry, new values
    wc, wt = prep(w2)
    want_c, want_t = w2.to(dtype), flip(w2.to(dtype))
    for got, want, what in ((wc, want_c, "cast"), (wt, want_t, "flipped")):
        assert got.shape == want.shape and got.stride() == want.stride(), what
        assert torch.equal(got, want), f"{what} differs"


def test_cast_flip_refuses_a_kernel_that_disagrees(monkeypatch):
    """``CastFlip.build`` checks its kernel once against ``Tensor.to`` and the flip and returns
    None on any difference (the replay then casts and flips in two steps)."""
    from convgemm.functional import _flipper

    w = torch.randn(8, 8, 3, 3, device=DEVICE).contiguous(memory_format=torch.channels_last)
    flip = _flipper(w.half(), 1, True)
    assert CastFlip.build(w, torch.float16, flip, 1) is not None
    real = CastFlip.__call__

    def one_value_off(self, weight):
        wc, wt = real(self, weight)
        wt[1, 2, 0, 1] += 1
        return wc, wt

    monkeypatch.setattr(CastFlip, "__call__", one_value_off)
    assert CastFlip.build(w, torch.float16, flip, 1) is None
    assert CastFlip.build(w.view(8, 8, 9), torch.float16, flip, 1) is None, "not a 4-D weight"


def test_patch_and_unpatch_parametrized_modules():
    """A parametrized module's class is a per-module subclass holding the property: patch swaps
    it onto convgemm's class and unpatch back, the property still gives the parametrized value,
    and removing the parametrization leaves the swapped class."""
    from torch.nn.utils import parametrize

    class Scale(nn.Module):
        def forward(self, w):
            return w * 0.5

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(), nn.Conv2d(6, 2, 1)).to(DEVICE)
    parametrize.register_parametrization(model[0], "weight", Scale())
    original = model[0].parametrizations.weight.original
    x = torch.randn(2, 4, 7, 6, device=DEVICE)
    with torch.no_grad():
        ref = model(x)
    convgemm.patch(model)
    assert isinstance(model[0], convgemm.nn.Conv2d) and isinstance(model[2], convgemm.nn.Conv2d)
    assert parametrize.is_parametrized(model[0], "weight")
    assert torch.equal(model[0].weight, original * 0.5)
    with torch.no_grad():
        assert_close(model(x), ref.double().cpu(), torch.float32, "patched")
        original.mul_(-1)  # the next call sees the change through the property
        flipped = model(x)
    convgemm.unpatch(model)
    assert not isinstance(model[0], convgemm.nn.Conv2d) and isinstance(model[0], nn.Conv2d)
    with torch.no_grad():
        assert_close(flipped, model(x).double().cpu(), torch.float32, "unpatched after the change")
    convgemm.patch(model)
    expect = (original * 0.5).detach().clone()
    parametrize.remove_parametrizations(model[0], "weight")  # keeps the parametrized value
    assert type(model[0]) is convgemm.nn.Conv2d
    assert torch.equal(model[0].weight, expect)


def test_parametrized_weight_is_used():
    """A weight under ``torch.nn.utils.parametrize`` is a property, not a registered parameter:
    every call (inference, repeated, and training) must use the parametrized value, and a change
    to the underlying parameter must show on the next call."""
    from torch.nn.utils import parametrize

    class Scale(nn.Module):
        def forward(self, w):
            return w * 0.5

    torch.manual_seed(0)
    m = convgemm.nn.Conv2d(4, 6, 3, padding=1).to(DEVICE)
    parametrize.register_parametrization(m, "weight", Scale())
    x = torch.randn(2, 4, 7, 6, device=DEVICE)
    for i in range(3):
        with torch.no_grad():
            assert_close(m(x), _ref(m, x), torch.float32, f"inference call {i}")
    with torch.no_grad():
        m.parametrizations.weight.original.mul_(-1)
        assert_close(m(x), _ref(m, x), torch.float32, "after an in-place change of the original")
    y = m(x)
    y.sum().backward()
    g = m.parametrizations.weight.original.grad
    w0 = m.parametrizations.weight.original.detach().double().cpu().requires_grad_()
    yr = torch.nn.functional.conv2d(x.double().cpu(), w0 * 0.5, m.bias.detach().double().cpu(), padding=1)
    yr.sum().backward()
    assert_close(g, w0.grad, torch.float32, "gradient through the parametrization")
