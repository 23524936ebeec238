"""End to end: CRAFT and ResNet-50, patched vs unpatched (the reference PR's CRAFT check)."""

import copy

import pytest
import torch
from conftest import DEVICE
from reference import rel_err

import convgemm
from convgemm.models.craft import CRAFT
from convgemm.models.resnet import resnet50


@pytest.fixture(autouse=True)
def _strict_fp32():
    old = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = old


def test_craft_patched_matches_float64_reference():
    """A width-1/8 CRAFT (same layers and topology) at 32x32, fp32, under the interpreter in CI."""
    model = CRAFT(width_div=8).eval().to(DEVICE)
    x = torch.randn(1, 3, 32, 32, device=DEVICE)
    with torch.no_grad():
        ref = copy.deepcopy(model).double().cpu()(x.double().cpu())
        y = convgemm.patch(model)(x)
    assert y.shape == (1, 16, 16, 2)
    assert rel_err(y, ref) <= 1e-5


def test_craft_fused_matches_float64_reference():
    """nn.fuse on CRAFT: batch norms folded, ReLUs in the epilogue (a ReLU that opens the next
    slice stays a module), same output as the unfused float64 model."""
    model = CRAFT(width_div=8).eval().to(DEVICE)
    x = torch.randn(1, 3, 32, 32, device=DEVICE)
    with torch.no_grad():
        ref = copy.deepcopy(model).double().cpu()(x.double().cpu())
        fused = convgemm.nn.fuse(convgemm.patch(model))
        y = fused(x)
    bns = [m for m in fused.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    acts = [m for m in fused.modules() if m.__dict__.get("_convgemm_activation") == "relu"]
    assert not bns, "every batch norm of CRAFT follows a convolution in one Sequential"
    # 12 VGG convs (CRAFT's slices end at the 12th) + 8 U-Net convs + 4 head convs, less the 4
    # whose ReLU opens the next slice (the slices are cut between a batch norm and its ReLU)
    assert len(acts) == 20
    assert rel_err(y, ref) <= 1e-5


def test_bench_folds_batch_norms_for_cudnn():
    """The cuDNN side of the bench's ``fused eager`` row: batch norms folded into torch convs
    (nothing of convgemm runs), same output in float64, no batch norm left."""
    from convgemm.bench.models import fold_batch_norms

    model = CRAFT(width_div=8).eval().double()
    x = torch.randn(1, 3, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        ref = model(x)
        folded = fold_batch_norms(copy.deepcopy(model))
        y = folded(x)
    assert not [m for m in folded.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert all(type(m) is torch.nn.Conv2d for m in folded.modules() if isinstance(m, torch.nn.Conv2d))
    assert rel_err(y, ref) <= 1e-12


def test_resnet50_training_steps_match():
    """Two SGD steps from one initialisation, patched and unpatched: the same losses and weights.

    Batch norm uses its running statistics here (eval mode): at this tiny size (batch 2, 1x1
    pixels in layer4) training-mode batch norm normalises two values per channel, which turns
    1e-7 rounding differences into 50% gradient differences in *both* implementations (each
    convolution gradient alone matches float64 to 1e-7). The GPU test trains in train mode."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 32, 32, device=DEVICE)
    target = torch.tensor([1, 7], device=DEVICE)
    runs = []
    for patched in (False, True):
        model = resnet50(num_classes=10, width_div=8).to(DEVICE).eval()
        with torch.no_grad():  # damp each residual branch so 16 blocks without batch statistics stay finite
            for m in model.modules():
                if hasattr(m, "bn3"):
                    m.bn3.weight.mul_(0.2)
        if patched:
            convgemm.patch(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        losses = []
        for _ in range(2):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), target)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        runs.append((losses, model.conv1.weight.detach().clone()))
    (l0, w0), (l1, w1) = runs
    assert l0 == pytest.approx(l1, rel=1e-4)
    assert rel_err(w1, w0.double().cpu()) <= 1e-4


def test_autocast_runs_in_the_autocast_dtype():
    x = torch.randn(1, 4, 6, 6, device=DEVICE)
    w = torch.randn(5, 4, 3, 3, device=DEVICE, requires_grad=True)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        y = convgemm.conv2d(x, w, padding=1)
    assert y.dtype == torch.bfloat16
    ref = torch.nn.functional.conv2d(x.bfloat16().double().cpu(), w.detach().bfloat16().double().cpu(), padding=1)
    assert rel_err(y, ref) <= 1e-2
    y.float().sum().backward()
    assert w.grad is not None and w.grad.dtype == torch.float32


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.float16, 5e-3), (torch.bfloat16, 3e-2)])
def test_craft_768_on_the_gpu(dtype, tol):
    """The full CRAFT at 768x768, batch 1: convgemm vs cuDNN on the same weights and input."""
    torch.backends.cudnn.allow_tf32 = False
    model = CRAFT().eval().cuda().to(dtype).to(memory_format=torch.channels_last)
    x = torch.randn(1, 3, 768, 768, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    with torch.no_grad():
        ref = model(x)
        y = convgemm.patch(model)(x)
    assert rel_err(y, ref.double().cpu()) <= tol


@pytest.mark.gpu
def test_resnet50_20_steps_bf16_autocast_on_the_gpu():
    """ResNet-50 at batch 64, 224x224: 20 SGD steps under bf16 autocast, patched vs unpatched."""
    torch.manual_seed(0)
    x = torch.randn(64, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    target = torch.randint(0, 1000, (64,), device="cuda")
    curves = []
    for patched in (False, True):
        model = resnet50().cuda().to(memory_format=torch.channels_last).train()
        if patched:
            convgemm.patch(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        losses = []
        for _ in range(20):
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), target)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        curves.append(losses)
    for a, b in zip(*curves, strict=True):
        assert a == pytest.approx(b, rel=5e-2)
