"""Reference networks for end-to-end checks: CRAFT (``models.craft``) and ResNet-50 (``models.resnet``).

Both are built here with deterministic random initialisation: no weight downloads and no
torchvision dependency. They are plain ``torch.nn`` models; ``convgemm.patch`` runs them on
convgemm.
"""

import torch
from torch import nn


def init_deterministic(model: nn.Module, seed: int) -> None:
    """He-normal convolution weights, small biases, and non-trivial batch-norm statistics, all
    drawn from one seeded generator (the same numbers on every machine)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
                fan_in = m.weight[0].numel()
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) * (2.0 / fan_in) ** 0.5)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.01)
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.copy_(1 + 0.1 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
                m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=g))
                m.running_var.copy_(1 + 0.1 * torch.rand(m.running_var.shape, generator=g))
