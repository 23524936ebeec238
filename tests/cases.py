"""The forward shape matrix: every value the spec names appears at least once.

(N, C, H, W, K, R, S, stride, padding, dilation, groups, bias)
"""

CASES = [
    # C = 1, K = 2, batch 1, H != W
    (1, 1, 8, 10, 2, 3, 3, 1, 1, 1, 1, True),
    # C = 3, K = 33, odd batch, no padding, no bias
    (3, 3, 9, 7, 33, 3, 3, 1, 0, 1, 1, False),
    # C = 17, K = 1, stride 2
    (2, 17, 7, 9, 1, 3, 3, 2, 1, 1, 1, True),
    # 1x1, C = 64, K = 33 (odd output channels)
    (1, 64, 6, 5, 33, 1, 1, 1, 0, 1, 1, True),
    # 1x1 as a GEMM (TMA-eligible)
    (3, 64, 6, 5, 32, 1, 1, 1, 0, 1, 1, True),
    # 1x1 stride 2 (ResNet downsample)
    (2, 16, 12, 10, 16, 1, 1, 2, 0, 1, 1, False),
    # 1x1 stride 3 on odd sizes (13 -> 5 rows, 11 -> 4 columns): the TMA kernel's subsampled view
    (1, 32, 13, 11, 48, 1, 1, 3, 0, 1, 1, True),
    # 5x5, padding 2
    (1, 3, 13, 11, 2, 5, 5, 1, 2, 1, 1, True),
    # 7x7 stride 3 padding 3
    (3, 17, 9, 12, 33, 7, 7, 3, 3, 1, 1, True),
    # 1x7 with asymmetric (0, 3) padding
    (1, 8, 8, 14, 16, 1, 7, 1, (0, 3), 1, 1, True),
    # 11x11 stride 4 (AlexNet's first layer, small)
    (1, 3, 23, 19, 8, 11, 11, 4, 2, 1, 1, True),
    # dilation 6 padding 6 (CRAFT's fc6)
    (1, 16, 14, 13, 16, 3, 3, 1, 6, 6, 1, True),
    # dilation 2
    (2, 16, 9, 8, 24, 3, 3, 1, 2, 2, 1, False),
    # padding='same'
    (1, 16, 8, 9, 16, 3, 3, 1, "same", 1, 1, True),
    # padding='same' with an even kernel: one more row/column at the bottom/right
    (1, 8, 8, 9, 8, 4, 4, 1, "same", 1, 1, False),
    # 'same' + dilation 2 + groups 2
    (1, 16, 9, 8, 16, 3, 3, 1, "same", 2, 2, True),
    # groups 2 (TMA-eligible: 8 channels per group)
    (3, 16, 7, 9, 32, 3, 3, 1, 1, 1, 2, True),
    # groups 4, stride 2
    (1, 64, 6, 7, 8, 3, 3, 2, 1, 1, 4, True),
    # depthwise, odd batch 5
    (5, 17, 6, 5, 17, 3, 3, 1, 1, 1, 17, True),
    # depthwise with channel multiplier 2, stride 2, no bias
    (1, 16, 10, 9, 32, 3, 3, 2, 1, 1, 16, False),
    # ResNeXt-like: 4 channels per group, 8 groups in one GEMM
    (2, 32, 7, 8, 32, 3, 3, 1, 1, 1, 8, True),
    # 6 groups of 4 -> 8 channels, stride 2: only 2 groups per GEMM divide 6
    (1, 24, 6, 7, 48, 3, 3, 2, 1, 1, 6, False),
    # depthwise 7x7 (ConvNeXt-like), padding 3
    (1, 8, 9, 11, 8, 7, 7, 1, 3, 1, 8, True),
    # depthwise, multiplier 3, stride 2, dilation 2
    (1, 8, 10, 9, 24, 3, 3, 2, 2, 2, 8, False),
    # padding 5 > kernel radius
    (1, 3, 9, 10, 4, 3, 3, 1, 5, 1, 1, True),
    # pair padding (0, 4)
    (1, 4, 6, 7, 4, 3, 3, 1, (0, 4), 1, 1, False),
    # C = 64 (several K tiles per tap on the GPU)
    (2, 64, 9, 10, 64, 3, 3, 1, 1, 1, 1, True),
    # several spatial output tiles
    (1, 32, 20, 21, 16, 3, 3, 1, 1, 1, 1, True),
    # 'valid' with an even kernel
    (1, 8, 7, 8, 8, 2, 2, 1, "valid", 1, 1, True),
    # non-square stride/padding/dilation, stride 4 once more
    (1, 8, 10, 12, 8, 3, 2, (1, 2), (1, 0), (2, 1), 1, True),
    (1, 4, 17, 18, 4, 3, 3, 4, 1, 1, 1, True),
]


def case_id(c) -> str:
    n, ch, h, w, k, r, s, st, pad, dil, g, b = c
    return f"n{n}c{ch}_{h}x{w}_k{k}_{r}x{s}_s{st}_p{pad}_d{dil}_g{g}{'_b' if b else ''}".replace(" ", "")
