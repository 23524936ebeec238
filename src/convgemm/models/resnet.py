"""ResNet-50 (He et al., 2016; the torchvision layout: stride on the 3x3 of each bottleneck),
built here with deterministic random initialisation (``seed``), without torchvision."""

from __future__ import annotations

import torch
from torch import nn

from . import init_deterministic


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int = 1) -> None:
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + identity)


class ResNet50(nn.Module):
    """``[N, 3, H, W] -> [N, num_classes]`` logits. ``width_div`` divides every channel count
    (1: the real network; the interpreter tests use 8)."""

    def __init__(self, num_classes: int = 1000, seed: int = 0, width_div: int = 1) -> None:
        super().__init__()
        d = width_div
        if d < 1 or 64 % d:
            raise ValueError(f"ResNet50: width_div must divide 64, got {width_div}")
        self.conv1 = nn.Conv2d(3, 64 // d, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64 // d)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        layers, cin = [], 64 // d
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            stage = []
            for i in range(blocks):
                stage.append(Bottleneck(cin, width // d, stride if i == 0 else 1))
                cin = (width // d) * Bottleneck.expansion
            layers.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.fc = nn.Linear(cin, num_classes)
        init_deterministic(self, seed)
        g = torch.Generator().manual_seed(seed + 1)
        with torch.no_grad():
            self.fc.weight.copy_(torch.randn(self.fc.weight.shape, generator=g) * cin**-0.5)
            self.fc.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))


def resnet50(num_classes: int = 1000, seed: int = 0, width_div: int = 1) -> ResNet50:
    """ResNet-50 with deterministic random weights."""
    return ResNet50(num_classes, seed, width_div)
