"""Drop-in ``torch.nn`` modules running on convgemm, and ``patch`` / ``unpatch`` for whole models.

``convgemm.nn.Conv1d``, ``Conv2d``, ``Conv3d`` and ``ConvTranspose1d/2d/3d`` subclass the
``torch.nn`` classes: same constructor, parameters, ``state_dict`` and ``padding_mode`` handling;
only the convolution itself is convgemm's. ``patch(model)`` turns every such ``torch.nn`` module
of a model into its convgemm class *in place* by swapping the module's class, so parameters,
buffers, hooks, device, dtype and training mode are untouched; ``unpatch`` swaps the classes back.

Inference calls (no gradient needed) keep a packed copy of the weight and bias: cast to the
autocast dtype when autocast is on, and the weight with its channels innermost (channels_last for
2-D), which the TMA kernels read in place. The copy is keyed by the parameter's address, dtype and version counter, so
any in-place update -- an optimizer step, ``load_state_dict``, ``copy_`` -- makes the next call
pack again. A write through ``.data`` bypasses the version counter (as it bypasses autograd): call
``convgemm.nn.clear_weight_cache(model)`` after one. Calls that need a gradient, and
``torch.compile`` tracing, use the parameters directly and cache nothing.
"""

from __future__ import annotations

import fnmatch
import weakref
from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrize import is_parametrized

from .._runtime import REPLAY, may_cache, transforming
from ..functional import PLANS_GENERATION, _allow_tf32, _autocast, conv2d, conv_transpose2d, forward_replay
from ..functional1d import conv1d, conv_transpose1d
from ..functional3d import conv3d, conv_transpose3d

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "patch", "unpatch",
           "clear_weight_cache", "fuse"]  # fmt: skip

_CACHE_ATTR = "_convgemm_packed"


def _key(t: torch.Tensor | None):
    return None if t is None else (t.data_ptr(), t._version, t.dtype, t.device, t.shape, t.stride())


def _packed(module: nn.Module, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None):
    """The (weight, bias) the kernels should read: a cached packed copy for inference calls."""
    if (torch.compiler.is_compiling() or not isinstance(input, torch.Tensor) or not may_cache(input.device)
            or transforming()):  # fmt: skip
        return weight, bias
    if torch.is_grad_enabled() and (weight.requires_grad or (bias is not None and bias.requires_grad)):
        return weight, bias  # the gradient must reach the parameters themselves
    dt, dev = weight.dtype, input.device.type
    if torch.is_autocast_enabled(dev) and weight.is_floating_point() and weight.dtype != torch.float64:
        dt = torch.get_autocast_dtype(dev)
    key = (_key(weight), _key(bias), dt)
    hit = module.__dict__.get(_CACHE_ATTR)
    if hit is not None and hit[0] == key and _same(hit[3], weight) and _same(hit[4], bias):
        return hit[1], hit[2]
    with torch.no_grad():
        w = weight.detach().to(dt)
        # channels innermost (KRSC / KTRSC / KRC), which the TMA kernels read in place: a 1-D
        # weight [K, C, R] stored as [K, R, C] is a channels_last [K, C, 1, R] once unsqueezed
        if w.dim() == 4:
            w = w.contiguous(memory_format=torch.channels_last)
        elif w.dim() == 5:
            w = w.contiguous(memory_format=torch.channels_last_3d)
        else:
            w = w.transpose(1, 2).contiguous().transpose(1, 2)
        b = None if bias is None else bias.detach().to(dt)
    # weak references to the parameters themselves: a new parameter can take a freed one's
    # address and version counter (a deep copy's cache outliving its original, say)
    module.__dict__[_CACHE_ATTR] = (key, w, b, weakref.ref(weight), None if bias is None else weakref.ref(bias))
    return w, b


def _same(ref, t: torch.Tensor | None) -> bool:
    """Whether the weak reference ``ref`` (None for no tensor) refers to ``t``."""
    return t is None if ref is None else ref() is t


class _Caches:
    """Mixin of the convgemm modules: pickling and deep copies leave out the packed weight and the
    replay (caches of this process, rebuilt on the next call; the replay is a closure and the
    cache holds weak references, neither of which pickles), and dtype or device conversions of
    the module drop them."""

    def __getstate__(self):
        state = super().__getstate__()
        for attr in _CACHES:
            state.pop(attr, None)
        return state

    def _apply(self, *args, **kwargs):
        # .to(), .half(), .cuda() and the like replace the parameters' data through `.data =`,
        # which no version counter sees, and the old memory may come back at the same address
        for attr in _CACHES:
            self.__dict__.pop(attr, None)
        return super()._apply(*args, **kwargs)


def clear_weight_cache(model: nn.Module) -> nn.Module:
    """Drop the packed weight copies of every convgemm module of ``model`` (needed only after a
    write through ``.data``, which PyTorch's version counters do not see); returns ``model``."""
    for mod in model.modules():
        for attr in _CACHES:
            mod.__dict__.pop(attr, None)
    return model


_FAST_ATTR = "_convgemm_replay"
_TRAIN_ATTR = "_convgemm_train"
#: the per-module caches: packed weight, inference replay, training replay
_CACHES = (_CACHE_ATTR, _FAST_ATTR, _TRAIN_ATTR)


def _replaying_forward(mod: nn.Module, input: torch.Tensor, rank: int, build, train: bool = False) -> torch.Tensor:
    """``forward`` of a module that replays its plan (``Conv2d``, ``Conv1d``): the module keeps
    ``(key, state, weak refs to the weight and bias)`` of its last inference call; ``state`` is
    None when the key was seen once, False when the plan cannot be replayed, else the replay.
    The second call in a row with a key builds the replay (``build(input, packed weight, packed
    bias)``), and later ones run it; a key seen once builds nothing. ``train``: calls that need a
    gradient replay too (``_training_forward``)."""
    if torch.compiler.is_compiling():  # traced: the operators, never a replay
        return mod._conv_forward(input, mod.weight, mod.bias)
    w, b = _weight_bias(mod)
    if train and REPLAY and torch.is_grad_enabled():
        if w.requires_grad or (b is not None and b.requires_grad) or getattr(input, "requires_grad", False):
            return _training_forward(mod, input, w, b, rank)
    key = _replay_key(mod, input, w, b) if REPLAY and mod.padding_mode == "zeros" else None
    fast = mod.__dict__.get(_FAST_ATTR)
    again = fast is not None and key is not None and key == fast[0] and fast[2]() is w and _same(fast[3], b)
    if again and fast[1]:
        return fast[1](input)
    y = mod._conv_forward(input, w, b)
    if key is None or input.dim() != rank or (again and fast[1] is False):
        return y
    hit = mod.__dict__.get(_CACHE_ATTR)  # the packed weight and bias this call used
    if hit is None or hit[0][0] != _key(w) or not _same(hit[3], w) or not _same(hit[4], b):
        return y
    state = None
    if again:  # the second call with this key: replay from the next one on
        x = _autocast(input, None, None)[0]  # the input as the call above gave the kernels
        state = build(x, hit[1], hit[2]) or False
        if state and x is not input:  # autocast casts the input (its dtype is in the key)
            state = _casting(state, x.dtype)
    mod.__dict__[_FAST_ATTR] = (key, state, hit[3], hit[4])
    return y


def _casting(replay, dtype: torch.dtype):
    """``replay`` on its input cast to ``dtype`` (autocast's cast of a 32-bit input)."""
    return lambda x: replay(x.to(dtype))


def _weight_bias(mod: nn.Module) -> tuple:
    """``(mod.weight, mod.bias)`` without ``nn.Module.__getattr__`` (about 1 us each on the host)
    where both are registered parameters (or a registered None bias), else through it (a
    parametrized weight is a property, a plain tensor attribute lives in ``__dict__``)."""
    p = mod._parameters
    if "weight" in p and "bias" in p:
        return p["weight"], p["bias"]
    return mod.weight, mod.bias


def _training_forward(
    mod: nn.Module, input: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, rank: int
) -> torch.Tensor:
    """A ``Conv2d`` (rank 4) or ``Conv1d`` (rank 3) call that needs a gradient: as
    ``_replaying_forward``, with the training key (``_train_key``) and ``ops.TrainReplay`` (the
    forward's plan and, after the first backward, the gradients' plans). The weight is not part
    of the key: it changes every step, and the plans depend only on its shape, strides, dtype and
    alignment. A 1-D module replays the 2-D call ``conv1d`` makes, on the ``[N, C, 1, L]`` view
    (``unsqueeze`` and ``squeeze`` record their own, view-only gradients)."""
    key = _train_key(mod, input, w, b) if mod.padding_mode == "zeros" else None
    st = mod.__dict__.get(_TRAIN_ATTR)
    again = key is not None and st is not None and st[0] == key
    if again and st[1]:
        plan = st[1]
        if plan.packed:  # frozen parameters: the kernels read the module's packed copy, as the full path's
            w, b = _packed(mod, input, w, b)
        # the key holds the dtypes and the autocast state: whether each tensor is cast is the
        # plan's (the weight and bias are cast inside its Function, see ops._ReplayConv2d)
        x = input if plan.cast_input is None else input.to(plan.cast_input)
        if rank == 3:
            return plan(x.unsqueeze(2), w.unsqueeze(2), b).squeeze(2)
        y = plan(x, w, b)
        return torch.relu(y) if mod.__dict__.get(_ACT_ATTR) else y
    y = mod._conv_forward(input, w, b)
    if key is None or input.dim() != rank or (again and st[1] is False):
        return y
    state = None
    if again:  # the second call with this key: replay from the next one on
        from ..ops import TrainReplay

        wp, bp = _packed(mod, input, w, b)  # frozen parameters: the packed copy (cast, channels innermost)
        x, wc, bc = _autocast(input, wp, bp)  # the tensors the call above gave the kernels
        if rank == 3:
            args = (x.unsqueeze(2), wc.unsqueeze(2), bc, *_conv1d_as_2d(mod))
        else:
            args = (x, wc, bc, mod.stride, mod.padding, mod.dilation, mod.groups)
        state = TrainReplay.build(*args) or False
        if state:
            state.cast_input = None if x is input else x.dtype
            if wp is not w:  # frozen: the packed copy, already in the autocast dtype
                state.packed = True
            elif wc is not w and (b is None or bc is not b or b.dtype == wc.dtype):
                state.cast = wc.dtype  # autocast casts the parameters: inside the plan's Function
            elif bc is not b:  # only the bias cast (a float64 weight): not replayed
                state = False
    mod.__dict__[_TRAIN_ATTR] = (key, state)
    return y


def _train_key(mod: nn.Module, x, w: torch.Tensor, b: torch.Tensor | None) -> tuple | None:
    """Everything a training call's plans depend on (shapes, strides, dtypes, alignment,
    devices, whether the parameters need gradients (frozen ones are read from the packed copy),
    autocast dtype, module arguments), or None when it must take the full path (not a
    plain CUDA tensor, a tensor off the current device, a torch.func transform, a side stream)."""
    if type(x) is not torch.Tensor or type(w) not in _PLAIN or (b is not None and type(b) not in _PLAIN):
        return None
    if _wrapped(x):  # a torch.func wrapper that outlived its transform: the replay skips their unwrapping
        return None
    dev = x.get_device()
    # the replay launches on the current device's stream, with no device guard: a tensor on
    # another device than the current one takes the full path, which switches devices
    if dev < 0 or dev != torch._C._cuda_getDevice() or transforming() or torch._C._cuda_getCurrentRawStream(dev):
        return None
    return (
        x.shape, x.stride(), x.dtype, x.data_ptr() & 15, dev,
        w.shape, w.stride(), w.dtype, w.data_ptr() & 15, w.get_device(), w.requires_grad,
        None if b is None else (b.stride(), b.dtype, b.data_ptr() & 15, b.get_device(), b.requires_grad),
        torch.is_autocast_enabled("cuda") and torch.get_autocast_dtype("cuda"),
        mod.stride, mod.padding, mod.dilation, mod.groups, mod.__dict__.get(_ACT_ATTR),
        _allow_tf32(), PLANS_GENERATION[0],
    )  # fmt: skip


_PLAIN = (torch.Tensor, nn.Parameter)
_wrapped = torch._C._functorch.is_functorch_wrapped_tensor


def _conv1d_as_2d(mod: nn.Module) -> tuple:
    """(stride, padding, dilation, groups) of the 2-D call ``conv1d`` makes for a 1-D module,
    argument for argument, so that a replay looks up the plan that call made."""
    pad = mod.padding if isinstance(mod.padding, str) else (0, mod.padding[0])
    return (1, mod.stride[0]), pad, (1, mod.dilation[0]), mod.groups


def _replay_key(mod: nn.Module, x, w: torch.Tensor, b: torch.Tensor | None) -> tuple | None:
    """Everything a module's inference call depends on besides the input's values, or None
    when the call must take the full path (a gradient is needed, tracing, a torch.func
    transform, a side stream, not a plain CUDA tensor, a tensor off the current device). Equal
    keys: the same plan, the same packed weight (cast to the autocast dtype, if any), the same
    output allocation."""
    if type(x) is not torch.Tensor:
        return None
    dev = x.get_device()
    # the replay launches on the current device's stream, with no device guard (as _train_key)
    if dev < 0 or dev != torch._C._cuda_getDevice() or transforming():
        return None
    if torch.is_grad_enabled() and (x.requires_grad or w.requires_grad or (b is not None and b.requires_grad)):
        return None
    if torch._C._cuda_getCurrentRawStream(dev) != 0:  # may_cache: CUDA graph capture, side streams
        return None
    return (
        x.shape, x.stride(), x.dtype, x.data_ptr() & 15, dev,
        w.data_ptr(), w._version, None if b is None else (b.data_ptr(), b._version),
        torch.is_autocast_enabled("cuda") and torch.get_autocast_dtype("cuda"),
        mod.stride, mod.padding, mod.dilation, mod.groups, mod.padding_mode, mod.__dict__.get(_ACT_ATTR),
        _allow_tf32(), PLANS_GENERATION[0],
    )  # fmt: skip


class Conv2d(_Caches, nn.Conv2d):
    """``torch.nn.Conv2d`` computed by ``convgemm.conv2d`` (every ``padding_mode``).

    A module that ``fuse`` gave a ReLU applies it in the convolution's epilogue
    (``conv2d(..., activation='relu')``); it is kept in the attribute ``_convgemm_activation``.

    Inference calls repeat cheaply: when two calls in a row have the same key (``_replay_key``:
    the input's shape, strides, dtype, alignment and device, the parameters' addresses and
    version counters, the autocast dtype, the module's arguments, grad mode and the like) and the same parameter
    objects, the module keeps a replay of their plan (``functional.forward_replay``); from the
    third such call on, a call only allocates the output and launches the kernel. A key seen once
    builds nothing, so inputs whose size changes every call (a detector on images of many
    sizes) pay only the key.
    """

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return _replaying_forward(self, input, 4, self._replay, train=True)

    def _replay(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None):
        return forward_replay(x, weight, bias, self.stride, self.padding, self.dilation, self.groups,
                              self.__dict__.get(_ACT_ATTR) or "")  # fmt: skip

    def _conv_forward(self, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        weight, bias = _packed(self, input, weight, bias)
        act = getattr(self, _ACT_ATTR, None)
        if self.padding_mode != "zeros":
            # reflect / replicate / circular: pad explicitly, then an unpadded convolution
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv2d(input, weight, bias, self.stride, 0, self.dilation, self.groups, activation=act)
        return conv2d(input, weight, bias, self.stride, self.padding, self.dilation, self.groups, activation=act)


_ACT_ATTR = "_convgemm_activation"


def fuse(model: nn.Module) -> nn.Module:
    """Fold batch norms and ReLUs into the convolutions before them, for inference, in place.

    In every ``nn.Sequential`` of ``model``, a ``Conv2d`` (``torch.nn`` or convgemm) followed by
    a ``BatchNorm2d`` in eval mode with running statistics, by a ``ReLU``, or by both in that
    order, becomes one convgemm ``Conv2d``: the batch norm is folded into its weight and bias
    (``w * g / sqrt(var + eps)``, ``(b - mean) * g / sqrt(var + eps) + beta``) and the ReLU
    runs in the convolution's epilogue; the folded modules become ``nn.Identity``. That saves
    one or two passes over every such activation (VGG- and U-Net-style networks such as CRAFT
    are made of these blocks).

    Inference only: the convolutions' parameters are overwritten (folded), training the result
    would train something else, and ``unpatch`` does not undo it. Batch norms in training mode
    raise ``ValueError`` (call ``model.eval()`` first). Returns ``model``.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"fuse: model must be a torch.nn.Module, got {type(model).__name__}")
    for seq in [m for m in model.modules() if isinstance(m, nn.Sequential)]:
        names = list(seq._modules)
        i = 0
        while i < len(names):
            conv = seq._modules[names[i]]
            if type(conv) not in (nn.Conv2d, Conv2d):
                i += 1
                continue
            j = i + 1
            bn = seq._modules[names[j]] if j < len(names) else None
            if isinstance(bn, nn.BatchNorm2d) and bn.num_features == conv.out_channels:
                if bn.training or bn.running_mean is None:
                    raise ValueError(
                        f"fuse: {names[j]!r} is a batch norm in training mode (or without running statistics); "
                        "call model.eval() before fuse, and fuse only for inference"
                    )
                _fold_bn(conv, bn)
                seq._modules[names[j]] = nn.Identity()
                j += 1
            relu = seq._modules[names[j]] if j < len(names) else None
            if type(relu) is nn.ReLU:
                conv.__dict__[_ACT_ATTR] = "relu"
                seq._modules[names[j]] = nn.Identity()
                j += 1
            if j > i + 1:
                conv.__class__ = Conv2d
                for attr in (_FAST_ATTR, _TRAIN_ATTR):  # their keys would not match anyway
                    conv.__dict__.pop(attr, None)
            i = j
    return model


@torch.no_grad()
def _fold_bn(conv: nn.Conv2d, bn: nn.BatchNorm2d) -> None:
    scale = bn.running_var.double().add(bn.eps).rsqrt()
    if bn.weight is not None:
        scale = scale * bn.weight.double()
    shift = -bn.running_mean.double() * scale
    if bn.bias is not None:
        shift = shift + bn.bias.double()
    w = conv.weight
    conv.weight.copy_((w.double() * scale.view(-1, 1, 1, 1)).to(w.dtype))
    b = conv.bias.double() * scale + shift if conv.bias is not None else shift
    if conv.bias is None:
        conv.bias = nn.Parameter(b.to(device=w.device, dtype=w.dtype), requires_grad=w.requires_grad)
    else:
        conv.bias.copy_(b.to(conv.bias.dtype))


class ConvTranspose2d(_Caches, nn.ConvTranspose2d):
    """``torch.nn.ConvTranspose2d`` computed by ``convgemm.conv_transpose2d``."""

    def forward(self, input: torch.Tensor, output_size: list[int] | None = None) -> torch.Tensor:
        if self.padding_mode != "zeros":
            raise ValueError("Only 'zeros' padding mode is supported for ConvTranspose2d (as in PyTorch)")
        num_spatial_dims = 2
        output_padding = self._output_padding(
            input, output_size, self.stride, self.padding, self.kernel_size, num_spatial_dims, self.dilation
        )
        weight, bias = _packed(self, input, self.weight, self.bias)
        return conv_transpose2d(
            input, weight, bias, self.stride, self.padding, output_padding, self.groups, self.dilation
        )


class Conv1d(_Caches, nn.Conv1d):
    """``torch.nn.Conv1d`` computed by ``convgemm.conv1d`` (every ``padding_mode``). Inference and
    training calls replay their plans as ``Conv2d``'s do (on the ``[N, C, 1, L]`` view ``conv1d``
    runs)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return _replaying_forward(self, input, 3, self._replay, train=True)

    def _replay(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None):
        replay = forward_replay(x.unsqueeze(2), weight.unsqueeze(2), bias, *_conv1d_as_2d(self))
        if replay is None:
            return None
        return lambda x: replay(x.unsqueeze(2)).squeeze(2)

    def _conv_forward(self, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        weight, bias = _packed(self, input, weight, bias)
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv1d(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv1d(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)


class ConvTranspose1d(_Caches, nn.ConvTranspose1d):
    """``torch.nn.ConvTranspose1d`` computed by ``convgemm.conv_transpose1d``."""

    def forward(self, input: torch.Tensor, output_size: list[int] | None = None) -> torch.Tensor:
        if self.padding_mode != "zeros":
            raise ValueError("Only 'zeros' padding mode is supported for ConvTranspose1d (as in PyTorch)")
        output_padding = self._output_padding(
            input, output_size, self.stride, self.padding, self.kernel_size, 1, self.dilation
        )
        weight, bias = _packed(self, input, self.weight, self.bias)
        return conv_transpose1d(
            input, weight, bias, self.stride, self.padding, output_padding, self.groups, self.dilation
        )


class Conv3d(_Caches, nn.Conv3d):
    """``torch.nn.Conv3d`` computed by ``convgemm.conv3d`` (every ``padding_mode``)."""

    def _conv_forward(self, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        weight, bias = _packed(self, input, weight, bias)
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv3d(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv3d(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)


class ConvTranspose3d(_Caches, nn.ConvTranspose3d):
    """``torch.nn.ConvTranspose3d`` computed by ``convgemm.conv_transpose3d``."""

    def forward(self, input: torch.Tensor, output_size: list[int] | None = None) -> torch.Tensor:
        if self.padding_mode != "zeros":
            raise ValueError("Only 'zeros' padding mode is supported for ConvTranspose3d (as in PyTorch)")
        output_padding = self._output_padding(
            input, output_size, self.stride, self.padding, self.kernel_size, 3, self.dilation
        )
        weight, bias = _packed(self, input, self.weight, self.bias)
        return conv_transpose3d(
            input, weight, bias, self.stride, self.padding, output_padding, self.groups, self.dilation
        )


_SWAPS = {
    nn.Conv1d: Conv1d,
    nn.Conv2d: Conv2d,
    nn.Conv3d: Conv3d,
    nn.ConvTranspose1d: ConvTranspose1d,
    nn.ConvTranspose2d: ConvTranspose2d,
    nn.ConvTranspose3d: ConvTranspose3d,
}
_BACK = {v: k for k, v in _SWAPS.items()}


def _swapped(mod: nn.Module, table: dict) -> type | None:
    """The class ``mod`` takes in a swap by ``table`` (``_SWAPS`` or ``_BACK``), or None.

    A module under ``torch.nn.utils.parametrize`` has a class of its own: a subclass of its
    module class (``ParametrizedConv2d``) holding a property per parametrized tensor. Its swap
    is a new such subclass of the swapped base, with the same class attributes, so the
    properties keep working and ``remove_parametrizations`` (which restores ``__bases__[0]``)
    leaves the swapped class."""
    cls = type(mod)
    new = table.get(cls)
    if new is not None or len(cls.__bases__) != 1 or not is_parametrized(mod):
        return new
    base = table.get(cls.__bases__[0])
    if base is None:
        return None
    attrs = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
    return type(f"Parametrized{base.__name__}", (base,), attrs)


def _selected(name: str, include: Iterable[str] | None, exclude: Iterable[str] | None) -> bool:
    """``fnmatch`` patterns over qualified module names (``'backbone.*'``, ``'*.conv1'``)."""
    if include is not None and not any(fnmatch.fnmatchcase(name, p) for p in include):
        return False
    return not (exclude is not None and any(fnmatch.fnmatchcase(name, p) for p in exclude))


def _check_patterns(arg: str, patterns) -> list[str] | None:
    if patterns is None:
        return None
    if isinstance(patterns, str):
        return [patterns]
    patterns = list(patterns)
    if not all(isinstance(p, str) for p in patterns):
        raise TypeError(f"patch: {arg} must be a pattern string or a list of them, got {patterns!r}")
    return patterns


def patch(
    model: nn.Module, include: str | Iterable[str] | None = None, exclude: str | Iterable[str] | None = None
) -> nn.Module:
    """Run every ``nn.Conv1d/2d/3d`` and ``nn.ConvTranspose1d/2d/3d`` of ``model`` on convgemm,
    in place.

    Args:
        model: any module; it is modified in place and returned.
        include, exclude: ``fnmatch`` patterns (or lists of them) over qualified module names as
            ``model.named_modules()`` gives them; a module is patched when it matches ``include``
            (default: all) and not ``exclude``.

    Only modules of exactly those six classes are swapped (a subclass may override ``forward``
    in ways convgemm cannot know), and those classes under ``torch.nn.utils.parametrize``
    (weight normalisation, spectral norm, orthogonal), whose parametrized weight convgemm then
    reads on every call. Parameters, buffers, hooks, device, dtype and training mode
    are untouched: the module's class changes, nothing else.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"patch: model must be a torch.nn.Module, got {type(model).__name__}")
    include, exclude = _check_patterns("include", include), _check_patterns("exclude", exclude)
    for name, mod in model.named_modules():
        new = _swapped(mod, _SWAPS)
        if new is not None and _selected(name, include, exclude):
            mod.__class__ = new
    return model


def unpatch(model: nn.Module) -> nn.Module:
    """Undo ``patch``: every convgemm module of ``model`` becomes its ``torch.nn`` class again."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"unpatch: model must be a torch.nn.Module, got {type(model).__name__}")
    for mod in model.modules():
        old = _swapped(mod, _BACK)
        if old is not None:
            mod.__class__ = old
            for attr in _CACHES:
                mod.__dict__.pop(attr, None)
    return model
