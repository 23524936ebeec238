"""Benchmark suites, kept as data.

A shape is ``N,C,H,W,K,R,S,stride,pad,dil,groups`` plus a bias flag and a name. Suites:

* ``seed``: the reference PR's 14 benchmark shapes (batch 16, bias, padding 0).
* ``floor``: the eight dense 3x3 layers of the forward issue's speed floor.
* ``resnet50``: every distinct convolution of ResNet-50 (v1.5) at batch 64, 224x224 input.
* ``craft``: every distinct convolution of CRAFT at batch 1, 768x768 input.
* ``grouped``: ResNeXt-50 32x4d grouped 3x3, MobileNetV2 depthwise 3x3, ConvNeXt-T depthwise 7x7.
* ``small-channel``: first layers and heads with 1-16 channels.
* ``all``: the union of seed, resnet50, craft, grouped and small-channel (duplicates removed;
  every ``floor`` shape is in resnet50 or craft).
* ``conv1d``: wav2vec2's feature-extractor convolutions (batch 8, 5 s of 16 kHz audio) and the
  short causal depthwise convolutions of Mamba/Hyena-style blocks (kernel 4, padding 3, batch 8),
  as 2-D problems of height 1 (``convgemm.conv1d`` runs exactly these). Not part of ``all``.
* ``conv3d``: 3-D ResNet-18 and R(2+1)D layers on 16x112x112 clips (batch 8) and a 3-D U-Net
  block (``Shape3d``; forward only for now). Not part of ``all``.
* ``tiny``: small shapes for the interpreter demo (no GPU).

``stride``, ``pad`` and ``dil`` are an int (both spatial dimensions) or an (H, W) pair; in a
``--shape`` string a pair is written ``AxB``.
"""

from __future__ import annotations

from dataclasses import dataclass


def _two(v: int | tuple[int, int]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _fmt(v: int | tuple[int, int]) -> str:
    return str(v) if isinstance(v, int) else f"{v[0]}x{v[1]}"


@dataclass(frozen=True)
class Shape:
    name: str
    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    stride: int | tuple[int, int] = 1
    pad: int | tuple[int, int] = 0
    dil: int | tuple[int, int] = 1
    groups: int = 1
    bias: bool = True

    @property
    def p(self) -> int:
        st, pad, dil = _two(self.stride)[0], _two(self.pad)[0], _two(self.dil)[0]
        return (self.h + 2 * pad - dil * (self.r - 1) - 1) // st + 1

    @property
    def q(self) -> int:
        st, pad, dil = _two(self.stride)[1], _two(self.pad)[1], _two(self.dil)[1]
        return (self.w + 2 * pad - dil * (self.s - 1) - 1) // st + 1

    @property
    def flops(self) -> int:
        return 2 * self.n * self.k * self.p * self.q * (self.c // self.groups) * self.r * self.s

    def spec(self) -> str:
        """The ``--shape`` string for this shape (``,nobias`` at the end of a layer without bias:
        the same sizes with and without one are different rows, e.g. cuDNN's grouped 3x3 with a
        bias took 1.5-1.7x as long as without on the H200, session 12)."""
        f = (self.n, self.c, self.h, self.w, self.k, self.r, self.s, self.stride, self.pad, self.dil, self.groups)
        return ",".join(map(_fmt, f)) + ("" if self.bias else ",nobias")

    def params(self) -> tuple:
        return (
            self.n,
            self.c,
            self.h,
            self.w,
            self.k,
            self.r,
            self.s,
            self.stride,
            self.pad,
            self.dil,
            self.groups,
            self.bias,
        )


def _three(v: int | tuple[int, int, int]) -> tuple[int, int, int]:
    return (v, v, v) if isinstance(v, int) else (int(v[0]), int(v[1]), int(v[2]))


@dataclass(frozen=True)
class Shape3d:
    """A 3-D convolution: input ``[n, c, d, h, w]``, weight ``[k, c/groups, t, r, s]``."""

    name: str
    n: int
    c: int
    d: int
    h: int
    w: int
    k: int
    t: int
    r: int
    s: int
    stride: int | tuple[int, int, int] = 1
    pad: int | tuple[int, int, int] = 0
    dil: int | tuple[int, int, int] = 1
    groups: int = 1
    bias: bool = True

    def _out(self, size: int, ksize: int, i: int) -> int:
        st, pad, dil = _three(self.stride)[i], _three(self.pad)[i], _three(self.dil)[i]
        return (size + 2 * pad - dil * (ksize - 1) - 1) // st + 1

    @property
    def od(self) -> int:
        return self._out(self.d, self.t, 0)

    @property
    def p(self) -> int:
        return self._out(self.h, self.r, 1)

    @property
    def q(self) -> int:
        return self._out(self.w, self.s, 2)

    @property
    def flops(self) -> int:
        return 2 * self.n * self.k * self.od * self.p * self.q * (self.c // self.groups) * self.t * self.r * self.s

    def spec(self) -> str:
        f = (self.n, self.c, self.d, self.h, self.w, self.k, self.t, self.r, self.s)
        return "3d:" + ",".join(map(str, f)) + "," + ",".join("x".join(map(str, _three(v))) for v in
                                                            (self.stride, self.pad, self.dil)) + f",{self.groups}"  # fmt: skip

    def params(self) -> tuple:
        return (self.n, self.c, self.d, self.h, self.w, self.k, self.t, self.r, self.s, _three(self.stride),
                _three(self.pad), _three(self.dil), self.groups, self.bias)  # fmt: skip


def parse_shape(text: str, name: str | None = None) -> Shape:
    """``'N,C,H,W,K,R,S,stride,pad,dil,groups[,nobias]'`` (stride to groups optional; with a bias
    unless the last field is ``nobias``) -> Shape."""

    fields = [v.strip() for v in text.split(",")]
    bias = fields[-1] != "nobias"
    body = ",".join(fields if bias else fields[:-1])

    def val(i: int, v: str):
        if 7 <= i <= 9 and "x" in v:  # stride, pad, dil: an (H, W) pair
            a, b = v.split("x", 1)
            return (int(a), int(b))
        return int(v)

    try:
        vals = [val(i, v) for i, v in enumerate(body.split(","))]
    except ValueError:
        raise ValueError(
            f"--shape {text!r}: expected integers N,C,H,W,K,R,S[,stride,pad,dil,groups] (stride, pad, dil may be "
            "an HxW pair)"
        ) from None
    if len(vals) < 7 or len(vals) > 11:
        raise ValueError(
            f"--shape {text!r}: expected 7 to 11 integers N,C,H,W,K,R,S[,stride,pad,dil,groups], got {len(vals)}"
        )
    defaults = [1, 0, 1, 1]
    vals = vals + defaults[len(vals) - 7 :]
    n, c, h, w, k, r, s, st, pad, dil, g = vals
    if min(n, c, h, w, k, r, s, *_two(st), *_two(dil), g) < 1 or min(_two(pad)) < 0 or c % g or k % g:
        raise ValueError(f"--shape {text!r}: sizes must be >= 1, padding >= 0, and groups must divide C and K")
    shp = Shape(name or f"custom {text}", n, c, h, w, k, r, s, st, pad, dil, g, bias=bias)
    if shp.p < 1 or shp.q < 1:
        raise ValueError(f"--shape {text!r}: the output would be empty ({shp.p}x{shp.q})")
    return shp


def _seed() -> list[Shape]:
    rows = [
        (16, 512, 512, 16, 3, 1),
        (3, 227, 227, 96, 11, 4),
        (3, 231, 231, 96, 11, 4),
        (3, 227, 227, 64, 7, 2),
        (64, 224, 224, 64, 7, 2),
        (96, 24, 24, 256, 5, 1),
        (256, 12, 12, 512, 3, 1),
        (3, 224, 224, 64, 3, 1),
        (64, 112, 112, 128, 3, 1),
        (64, 56, 56, 64, 3, 1),
        (128, 28, 28, 128, 3, 1),
        (256, 14, 14, 256, 3, 1),
        (512, 7, 7, 512, 3, 1),
        (96, 224, 224, 64, 1, 1),
    ]
    return [Shape(f"seed {c}x{h}x{w}->{k} {r}x{r} s{st}", 16, c, h, w, k, r, r, st, 0) for c, h, w, k, r, st in rows]


def _floor() -> list[Shape]:
    out = [
        Shape(f"resnet50 3x3 {c}->{c} @{h}", 64, c, h, h, c, 3, 3, 1, 1, bias=False)
        for c, h in ((64, 56), (128, 28), (256, 14), (512, 7))
    ]
    out += [
        Shape(f"craft 3x3 {c}->{c} @{h}", 1, c, h, h, c, 3, 3, 1, 1)
        for c, h in ((64, 768), (128, 384), (256, 192), (512, 96))
    ]
    return out


def _resnet50() -> list[Shape]:
    b = 64
    rows = [("stem 7x7", 3, 224, 64, 7, 2, 3)]
    # (stage, in channels of the first block, width, input size, stride of the stage)
    inp = 64
    for stage, (width, size, stride) in enumerate(((64, 56, 1), (128, 56, 2), (256, 28, 2), (512, 14, 2)), start=1):
        out = width * 4
        o = size // stride
        rows += [
            (f"l{stage} 1x1 reduce (first)", inp, size, width, 1, 1, 0),
            (f"l{stage} 3x3 (first)", width, size, width, 3, stride, 1),
            (f"l{stage} 1x1 expand", width, o, out, 1, 1, 0),
            (f"l{stage} 1x1 downsample", inp, size, out, 1, stride, 0),
            (f"l{stage} 1x1 reduce", out, o, width, 1, 1, 0),
            (f"l{stage} 3x3", width, o, width, 3, 1, 1),
        ]
        inp = out
    seen, shapes = set(), []
    for name, c, h, k, r, st, pad in rows:
        shp = Shape(f"resnet50 {name} {c}->{k} @{h}", b, c, h, h, k, r, r, st, pad, bias=False)
        if shp.params() not in seen:
            seen.add(shp.params())
            shapes.append(shp)
    return shapes


def _craft() -> list[Shape]:
    rows = [
        ("conv1_1", 3, 768, 64, 3, 1, 1),
        ("conv1_2", 64, 768, 64, 3, 1, 1),
        ("conv2_1", 64, 384, 128, 3, 1, 1),
        ("conv2_2", 128, 384, 128, 3, 1, 1),
        ("conv3_1", 128, 192, 256, 3, 1, 1),
        ("conv3_x", 256, 192, 256, 3, 1, 1),
        ("conv4_1", 256, 96, 512, 3, 1, 1),
        ("conv4_x", 512, 96, 512, 3, 1, 1),
        ("conv5_x", 512, 48, 512, 3, 1, 1),
        ("fc6 d6", 512, 48, 1024, 3, 1, 6),
        ("fc7", 1024, 48, 1024, 1, 1, 0),
        ("up1 1x1", 1536, 48, 512, 1, 1, 0),
        ("up1 3x3", 512, 48, 256, 3, 1, 1),
        ("up2 1x1", 768, 96, 256, 1, 1, 0),
        ("up2 3x3", 256, 96, 128, 3, 1, 1),
        ("up3 1x1", 384, 192, 128, 1, 1, 0),
        ("up3 3x3", 128, 192, 64, 3, 1, 1),
        ("up4 1x1", 192, 384, 64, 1, 1, 0),
        ("up4 3x3", 64, 384, 32, 3, 1, 1),
        ("head 3x3 32", 32, 384, 32, 3, 1, 1),
        ("head 3x3 16", 32, 384, 16, 3, 1, 1),
        ("head 1x1 16", 16, 384, 16, 1, 1, 0),
        ("head 1x1 2", 16, 384, 2, 1, 1, 0),
    ]
    return [
        Shape(f"craft {name} {c}->{k} @{h}", 1, c, h, h, k, r, r, 1, pad, 6 if "d6" in name else 1)
        for name, c, h, k, r, _st, pad in rows
    ]


def _grouped() -> list[Shape]:
    b = 64
    out = []
    for width, size, st in (
        (128, 56, 1),
        (256, 56, 2),
        (256, 28, 1),
        (512, 28, 2),
        (512, 14, 1),
        (1024, 14, 2),
        (1024, 7, 1),
    ):
        out.append(
            Shape(
                f"resnext50 3x3 g32 {width} @{size} s{st}", b, width, size, size, width, 3, 3, st, 1, 1, 32, bias=False
            )
        )
    for c, size, st in ((32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1), (192, 28, 2), (384, 14, 1),
                        (576, 14, 1), (576, 14, 2), (960, 7, 1)):  # fmt: skip
        out.append(Shape(f"mobilenetv2 dw3x3 {c} @{size} s{st}", b, c, size, size, c, 3, 3, st, 1, 1, c, bias=False))
    for c, size in ((96, 56), (192, 28), (384, 14), (768, 7)):
        out.append(Shape(f"convnext-t dw7x7 {c} @{size}", b, c, size, size, c, 7, 7, 1, 3, 1, c))
    return out


def _small_channel() -> list[Shape]:
    return [
        Shape("resnet stem 3->64 7x7 s2 @224", 64, 3, 224, 224, 64, 7, 7, 2, 3, bias=False),
        Shape("mobilenet stem 3->32 3x3 s2 @224", 64, 3, 224, 224, 32, 3, 3, 2, 1, bias=False),
        Shape("craft conv1_1 3->64 3x3 @768", 1, 3, 768, 768, 64, 3, 3, 1, 1),
        Shape("alexnet 3->96 11x11 s4 @227", 16, 3, 227, 227, 96, 11, 11, 4, 0),
        Shape("mnist 1->32 3x3 @28", 256, 1, 28, 28, 32, 3, 3, 1, 1),
        Shape("gray 1->16 5x5 @64", 64, 1, 64, 64, 16, 5, 5, 1, 2),
        Shape("latent 4->64 3x3 @64", 16, 4, 64, 64, 64, 3, 3, 1, 1),
        Shape("narrow 8->8 3x3 @128", 32, 8, 128, 128, 8, 3, 3, 1, 1),
        Shape("craft head 32->16 3x3 @384", 1, 32, 384, 384, 16, 3, 3, 1, 1),
        Shape("craft head 16->16 1x1 @384", 1, 16, 384, 384, 16, 1, 1, 1, 0),
        Shape("craft head 16->2 1x1 @384", 1, 16, 384, 384, 2, 1, 1, 1, 0),
        Shape("seg head 16->1 1x1 @256", 8, 16, 256, 256, 1, 1, 1, 1, 0),
    ]


def _tiny() -> list[Shape]:
    return [
        Shape("tiny 3x3 16->16", 2, 16, 10, 12, 16, 3, 3, 1, 1),
        Shape("tiny 1x1 32->16", 2, 32, 8, 8, 16, 1, 1, 1, 0),
        Shape("tiny 3->8 5x5 s2", 1, 3, 15, 13, 8, 5, 5, 2, 2),
        Shape("tiny 11x11 s4", 1, 3, 27, 27, 8, 11, 11, 4, 0),
        Shape("tiny d2 3x3 16->8", 1, 16, 9, 9, 8, 3, 3, 1, 2, 2),
        Shape("tiny depthwise 3x3", 2, 8, 9, 9, 8, 3, 3, 1, 1, 1, 8),
    ]


def _conv1d() -> list[Shape]:
    b = 8
    out = []
    # wav2vec2 (base) feature extractor on 5 s of 16 kHz audio: 1->512 k10 s5, 4x 512->512 k3 s2,
    # 2x 512->512 k2 s2; no bias
    length = 80_000
    for i, (c, r, st) in enumerate(((1, 10, 5), (512, 3, 2), (512, 3, 2), (512, 3, 2), (512, 3, 2), (512, 2, 2),
                                    (512, 2, 2))):  # fmt: skip
        shp = Shape(
            f"wav2vec2 conv{i} {c}->512 k{r} s{st} @{length}", b, c, 1, length, 512, 1, r, (1, st), 0, bias=False
        )
        out.append(shp)
        length = shp.q
    # causal depthwise conv1d, kernel 4: padded by 3 (the sequence model keeps the first L outputs)
    for c, length in ((1024, 8192), (4096, 4096), (8192, 2048)):
        out.append(Shape(f"causal dw conv1d k4 {c} @{length}", b, c, 1, length, c, 1, 4, 1, (0, 3), 1, c))
    return out


def _conv3d() -> list[Shape3d]:
    b = 8
    out = [
        # 3-D ResNet-18 (r3d_18) on 16x112x112 clips
        Shape3d(
            "r3d18 stem 3->64 3x7x7 s1x2x2 @16x112", b, 3, 16, 112, 112, 64, 3, 7, 7, (1, 2, 2), (1, 3, 3), bias=False
        ),  # fmt: skip
        Shape3d("r3d18 l1 3x3x3 64->64 @16x56", b, 64, 16, 56, 56, 64, 3, 3, 3, 1, 1, bias=False),
        Shape3d("r3d18 l2 3x3x3 s2 64->128 @16x56", b, 64, 16, 56, 56, 128, 3, 3, 3, 2, 1, bias=False),
        Shape3d("r3d18 l2 3x3x3 128->128 @8x28", b, 128, 8, 28, 28, 128, 3, 3, 3, 1, 1, bias=False),
        Shape3d("r3d18 l3 3x3x3 256->256 @4x14", b, 256, 4, 14, 14, 256, 3, 3, 3, 1, 1, bias=False),
        Shape3d("r3d18 l4 3x3x3 512->512 @2x7", b, 512, 2, 7, 7, 512, 3, 3, 3, 1, 1, bias=False),
        # R(2+1)D: the 3x3x3 split into a spatial 1x3x3 and a temporal 3x1x1 convolution
        Shape3d("r2plus1d spatial 1x3x3 64->144 @16x56", b, 64, 16, 56, 56, 144, 1, 3, 3, 1, (0, 1, 1), bias=False),
        Shape3d("r2plus1d temporal 3x1x1 144->64 @16x56", b, 144, 16, 56, 56, 64, 3, 1, 1, 1, (1, 0, 0), bias=False),
        Shape3d("r2plus1d spatial 1x3x3 128->288 @8x28", b, 128, 8, 28, 28, 288, 1, 3, 3, 1, (0, 1, 1), bias=False),
        Shape3d("r2plus1d temporal 3x1x1 288->128 @8x28", b, 288, 8, 28, 28, 128, 3, 1, 1, 1, (1, 0, 0), bias=False),
        # a 3-D U-Net block (medical volumes)
        Shape3d("unet3d 3x3x3 32->32 @64^3", 2, 32, 64, 64, 64, 32, 3, 3, 3, 1, 1),
        Shape3d("unet3d 3x3x3 64->64 @32^3", 2, 64, 32, 32, 32, 64, 3, 3, 3, 1, 1),
    ]
    return out


SUITES = {
    "seed": _seed,
    "floor": _floor,
    "resnet50": _resnet50,
    "craft": _craft,
    "grouped": _grouped,
    "small-channel": _small_channel,
    "conv1d": _conv1d,
    "conv3d": _conv3d,
    "tiny": _tiny,
}


def suite(name: str) -> list[Shape]:
    """The shapes of one suite (``all`` is the union of every GPU suite, without duplicates)."""
    if name == "all":
        seen, out = set(), []
        for key in ("seed", "resnet50", "craft", "grouped", "small-channel"):
            for shp in SUITES[key]():
                if shp.params() not in seen:
                    seen.add(shp.params())
                    out.append(shp)
        return out
    if name not in SUITES:
        raise ValueError(f"unknown suite {name!r}; choose from {sorted([*SUITES, 'all'])}")
    return SUITES[name]()
