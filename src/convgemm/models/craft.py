"""CRAFT, the text detector the reference implementation was checked on: a VGG16-BN backbone
with a dilated fc6/fc7, a U-Net of upsampling blocks, and a small convolutional head.

Layer for layer as in the CRAFT paper's network (Baek et al., 2019): the backbone's five slices
end where CRAFT taps them (after the batch norm of conv2_2, conv3_2, conv4_2 and conv5_2, and
after fc7); each upsampling block is a 1x1 then a 3x3 convolution with batch norm and ReLU.
Weights are random but deterministic (``seed``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from . import init_deterministic

# VGG16-BN's feature layers: channel counts, "M" for a 2x2 max pool
_VGG16 = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512]
# where CRAFT cuts the feature sequence into slices (indices into the flat layer list)
_CUTS = (12, 19, 29, 39)


def _vgg16_bn_features(d: int) -> list[nn.Module]:
    layers: list[nn.Module] = []
    c = 3
    for v in _VGG16:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(c, v // d, 3, padding=1), nn.BatchNorm2d(v // d), nn.ReLU(inplace=True)]
            c = v // d
    return layers


class _DoubleConv(nn.Sequential):
    """1x1 (in -> mid) then 3x3 (mid -> out), each followed by batch norm and ReLU."""

    def __init__(self, cin: int, mid: int, out: int) -> None:
        super().__init__(
            nn.Conv2d(cin, mid, 1),
            nn.BatchNorm2d(mid),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, out, 3, padding=1),
            nn.BatchNorm2d(out),
            nn.ReLU(inplace=True),
        )


class CRAFT(nn.Module):
    """CRAFT: ``[N, 3, H, W] -> [N, H/2, W/2, 2]`` (region and affinity scores), H and W multiples of 16.

    ``width_div`` divides every channel count but the input's and the output's (1: the real
    network; the interpreter tests use 8 to stay fast, same topology).
    """

    def __init__(self, seed: int = 0, width_div: int = 1) -> None:
        super().__init__()
        d = width_div
        if d < 1 or 16 % d:
            raise ValueError(f"CRAFT: width_div must divide 16, got {width_div}")
        feats = _vgg16_bn_features(d)
        c1, c2, c3, c4 = _CUTS
        self.slice1 = nn.Sequential(*feats[:c1])
        self.slice2 = nn.Sequential(*feats[c1:c2])
        self.slice3 = nn.Sequential(*feats[c2:c3])
        self.slice4 = nn.Sequential(*feats[c3:c4])
        self.slice5 = nn.Sequential(
            nn.MaxPool2d(3, 1, 1),
            nn.Conv2d(512 // d, 1024 // d, 3, padding=6, dilation=6),  # fc6
            nn.Conv2d(1024 // d, 1024 // d, 1),  # fc7
        )
        self.upconv1 = _DoubleConv((1024 + 512) // d, 512 // d, 256 // d)
        self.upconv2 = _DoubleConv((512 + 256) // d, 256 // d, 128 // d)
        self.upconv3 = _DoubleConv((256 + 128) // d, 128 // d, 64 // d)
        self.upconv4 = _DoubleConv((128 + 64) // d, 64 // d, 32 // d)
        self.conv_cls = nn.Sequential(
            nn.Conv2d(32 // d, 32 // d, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(32 // d, 32 // d, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(32 // d, 16 // d, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(16 // d, 16 // d, 1),
            nn.ReLU(inplace=True),
            nn.Conv2d(16 // d, 2, 1),
        )
        init_deterministic(self, seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h2 = self.slice1(x)
        h3 = self.slice2(h2)
        h4 = self.slice3(h3)
        h5 = self.slice4(h4)
        fc7 = self.slice5(h5)
        y = self.upconv1(torch.cat([fc7, h5], dim=1))
        for up, skip in ((self.upconv2, h4), (self.upconv3, h3), (self.upconv4, h2)):
            y = F.interpolate(y, size=skip.shape[2:], mode="bilinear", align_corners=False)
            y = up(torch.cat([y, skip], dim=1))
        return self.conv_cls(y).permute(0, 2, 3, 1)
