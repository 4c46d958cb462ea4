"""Layers as pairs of pure functions over parameter pytrees (stax/equinox style).

Every layer is a small immutable object with two methods:

* ``init(key, input_shape) -> (params, output_shape)``: fresh parameters (a
  pytree of arrays; ``()`` for layers without any) and the shape the layer
  produces. Shapes include the leading batch axis, which may be ``-1``
  (unknown) and is passed through.
* ``apply(params, x, *, key=None, train=False) -> y``: the forward pass, a
  pure function of its arguments. ``key`` is a ``funcgrad.random`` key,
  needed only by layers that draw random numbers in training (Dropout);
  ``train`` switches those layers on. ``layer(params, x, ...)`` is the same.

The layer object holds only static settings (sizes, strides, initializers),
never arrays, so ``params`` is the one thing to differentiate, jit and
checkpoint:

>>> import funcgrad as fg, funcgrad.nn as nn, funcgrad.numpy as fnp
>>> from funcgrad import random
>>> model = nn.Sequential(nn.Linear(512), nn.ReLU(), nn.Dropout(0.1), nn.Linear(10))
>>> params, out_shape = model.init(random.key(0), (-1, 784))      # out_shape (-1, 10)
>>> x = fnp.ones((128, 784))
>>> logits = model.apply(params, x)                               # f32[128,784] -> f32[128,10]
>>> logits.shape
(128, 10)
>>> logits = model.apply(params, x, key=random.key(1), train=True)   # with dropout
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Callable, Sequence

import numpy as np

import funcgrad.lax as lax   # conv/pool shape rules shared with the primitives
import funcgrad.numpy as fnp
from funcgrad import random
from funcgrad.core import Array, describe
from funcgrad.nn import _functions as F
from funcgrad.nn import initializers as init_

__all__ = ["Layer", "Linear", "Conv2d", "MaxPool2d", "AvgPool2d", "Flatten", "Dropout", "LayerNorm", "Embedding",
           "Sequential", "serial", "Activation", "ReLU", "GELU", "Sigmoid", "Tanh", "SiLU", "Softplus", "Softmax",
           "LogSoftmax"]

Shape = tuple


class Layer:
    """Base class: ``init(key, input_shape)`` and ``apply(params, x, *, key=None, train=False)``.

    >>> layer = nn.Linear(2)                          # a Layer subclass
    >>> params, out_shape = layer.init(random.key(0), (-1, 3))
    >>> layer.apply(params, fnp.ones((5, 3))).shape, out_shape
    ((5, 2), (-1, 2))
    """

    def init(self, key: Any, input_shape: Sequence[int]) -> tuple[Any, Shape]:
        raise NotImplementedError

    def apply(self, params: Any, x: Any, *, key: Any = None, train: bool = False) -> Any:
        raise NotImplementedError

    def __call__(self, params: Any, x: Any, *, key: Any = None, train: bool = False) -> Any:
        return self.apply(params, x, key=key, train=train)

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not callable(v))
        return f"{type(self).__name__}({settings})"


def _size(name: str, arg: str, value: Any, minimum: int = 1) -> int:
    """A layer's size setting: an integer ``>= minimum`` (``2.5`` or ``"8"`` are mistakes, not sizes)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}: {arg} must be an int, got {type(value).__name__}: {value!r:.40}")
    if value < minimum:
        raise ValueError(f"{name}: {arg} must be >= {minimum}, got {value}")
    return int(value)


def _input_shape(name: str, input_shape: Sequence[int], ndim: int | None = None, min_ndim: int = 1) -> Shape:
    """``input_shape`` as a tuple of ints (``-1``: an unknown batch size)."""
    try:
        shape = tuple(input_shape)
    except TypeError:
        raise TypeError(f"{name}.init: input_shape must be a tuple of ints such as (-1, 784), got "
                        f"{type(input_shape).__name__}: {input_shape!r:.40}") from None
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= -1 for d in shape):
        raise TypeError(f"{name}.init: input_shape must be a tuple of ints >= -1 (-1: unknown batch size), "
                        f"got {shape!r:.60}")
    shape = tuple(int(d) for d in shape)
    if ndim is not None and len(shape) != ndim:
        raise ValueError(f"{name}: expected an input shape of rank {ndim}, got {shape}")
    if len(shape) < min_ndim:
        raise ValueError(f"{name}: expected an input shape of rank >= {min_ndim}, got {shape}")
    return shape


def _check_params(name: str, params: Any, expected: Sequence[str]) -> dict:
    """``params`` as the dict of exactly the ``expected`` keys, each an array; or a clear error.

    A missing ``"b"`` must not silently drop the bias, nor an extra key be ignored.
    """
    if not isinstance(params, Mapping):
        raise TypeError(f"{name}.apply: params must be the dict that {name}.init returns, with keys "
                        f"{sorted(expected)}, got {type(params).__name__}")
    missing = sorted(set(expected) - set(params))
    extra = sorted(set(params) - set(expected), key=str)
    if missing or extra:
        what = "; ".join(part for part in (f"missing {missing}" if missing else "",
                                           f"unexpected {extra}" if extra else "") if part)
        hint = " (it makes a bias only with use_bias=True)" if {"b", "bias"} & set(missing + extra) else ""
        raise ValueError(f"{name}.apply: params have keys {sorted(params, key=str)}, expected {sorted(expected)} "
                         f"({what}); use the params from this layer's init{hint}")
    for k in expected:
        if not hasattr(params[k], "shape") or not hasattr(params[k], "dtype"):
            raise TypeError(f"{name}.apply: params[{k!r}] must be an array, got {type(params[k]).__name__}")
    return params


def _check_param_shape(name: str, key: str, value: Any, expected: tuple, why: str) -> None:
    if tuple(value.shape) != tuple(expected):
        raise ValueError(f"{name}.apply: params[{key!r}] is {describe(value)}, expected shape {tuple(expected)} "
                         f"({why})")


def _check_no_params(name: str, params: Any) -> None:
    """A layer without parameters takes ``()`` (what its init returns); anything else is misaligned params."""
    if params is None or (isinstance(params, (tuple, list, dict)) and len(params) == 0):
        return
    raise ValueError(f"{name}.apply: this layer has no parameters and takes params=(), got a "
                     f"{type(params).__name__} of {len(params) if hasattr(params, '__len__') else 1} entries: "
                     "are the params aligned with the layers (e.g. from another model)?")


def _check_input(name: str, x: Any, ndim: int | None = None, last: int | None = None, axis: int = -1) -> Any:
    x = fnp.asarray(x)
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D input, got {describe(x)}")
    if x.ndim == 0:
        raise ValueError(f"{name}: expected an array with at least one axis, got {describe(x)}")
    if last is not None and x.shape[axis] != last:
        raise ValueError(f"{name}: input {describe(x)} has size {x.shape[axis]} on axis {axis}, but the layer "
                         f"was initialised for {last}")
    return x


# --------------------------------------------------------------------------
# Layers with parameters
# --------------------------------------------------------------------------


class Linear(Layer):
    """``y = x @ w + b`` over the last axis. params ``{"w": f32[in, out], "b": f32[out]}``.

    Defaults: LeCun-normal weights (std ``sqrt(1 / in)``, as Flax), zero bias.

    >>> params, shape = Linear(10).init(random.key(0), (-1, 784))   # shape (-1, 10)
    """

    def __init__(self, out_features: int, *, use_bias: bool = True, w_init: Callable | None = None,
                 b_init: Callable = init_.zeros):
        self.out_features = _size("Linear", "out_features", out_features)
        self.use_bias = bool(use_bias)
        self.w_init = w_init or init_.lecun_normal()
        self.b_init = b_init

    def init(self, key, input_shape):
        shape = _input_shape("Linear", input_shape)
        k_w, k_b = random.split(key)
        params = {"w": self.w_init(k_w, (shape[-1], self.out_features))}
        if self.use_bias:
            params["b"] = self.b_init(k_b, (self.out_features,))
        return params, shape[:-1] + (self.out_features,)

    def apply(self, params, x, *, key=None, train=False):
        params = _check_params("Linear", params, ("w", "b") if self.use_bias else ("w",))
        w = params["w"]
        if w.ndim != 2 or w.shape[1] != self.out_features:
            raise ValueError(f"Linear.apply: params['w'] is {describe(w)}, expected shape (in, {self.out_features}) "
                             "([in_features, out_features])")
        x = _check_input("Linear", x, last=w.shape[0])
        y = fnp.matmul(x, w)
        if not self.use_bias:
            return y
        _check_param_shape("Linear", "b", params["b"], (self.out_features,), "[out_features]")
        return y + params["b"]


def _conv_padding(name: str, padding: Any, kernel: tuple[int, int], dilation: tuple[int, int],
                  stride: tuple[int, int]) -> Any:
    """``"valid"`` -> 0; ``"same"`` -> the symmetric padding keeping H, W (stride 1, odd kernel)."""
    if not isinstance(padding, str):
        return padding
    if padding.lower() == "valid":
        return (0, 0)
    if padding.lower() != "same":
        raise ValueError(f"{name}: padding must be an int, a pair, 'same' or 'valid', got {padding!r}")
    spans = [d * (k - 1) for k, d in zip(kernel, dilation)]
    if stride != (1, 1) or any(s % 2 for s in spans):
        raise ValueError(f"{name}: padding='same' needs stride 1 and an odd (dilated) kernel, got kernel {kernel}, "
                         f"dilation {dilation}, stride {stride}; give the padding explicitly")
    return tuple(s // 2 for s in spans)


class Conv2d(Layer):
    """2-D convolution on NCHW inputs. params ``{"w": f32[O, C/groups, KH, KW], "b": f32[O]}``.

    ``padding``: int, (h, w), ``"valid"`` or ``"same"`` (stride 1).
    Defaults: LeCun-normal weights over fan_in = C/groups * KH * KW, zero bias.

    >>> params, shape = Conv2d(32, 3, padding="same").init(random.key(0), (-1, 1, 28, 28))
    >>> shape
    (-1, 32, 28, 28)
    """

    def __init__(self, out_channels: int, kernel_size: Any, *, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, use_bias: bool = True, w_init: Callable | None = None,
                 b_init: Callable = init_.zeros):
        self.out_channels = _size("Conv2d", "out_channels", out_channels)
        self.kernel_size = lax.int_pair("Conv2d", "kernel_size", kernel_size, 1)
        self.stride = lax.int_pair("Conv2d", "stride", stride, 1)
        self.dilation = lax.int_pair("Conv2d", "dilation", dilation, 1)
        self.padding = lax.int_pair("Conv2d", "padding",
                               _conv_padding("Conv2d", padding, self.kernel_size, self.dilation, self.stride), 0)
        self.groups = _size("Conv2d", "groups", groups)
        self.use_bias = bool(use_bias)
        self.w_init = w_init or init_.lecun_normal(in_axis=1, out_axis=0)
        self.b_init = b_init

    def init(self, key, input_shape):
        n, c, h, w = _input_shape("Conv2d", input_shape, ndim=4)
        w_shape = (self.out_channels, c // self.groups) + self.kernel_size
        # Checks channels/groups and that the output is not empty.
        _, o, oh, ow = lax.conv2d_shape((max(n, 1), c, h, w), w_shape, self.stride, self.padding, self.dilation,
                                        self.groups, name="Conv2d", x_what="input", w_what="weights")
        k_w, k_b = random.split(key)
        params = {"w": self.w_init(k_w, w_shape)}
        if self.use_bias:
            params["b"] = self.b_init(k_b, (self.out_channels,))
        return params, (n, o, oh, ow)

    def apply(self, params, x, *, key=None, train=False):
        params = _check_params("Conv2d", params, ("w", "b") if self.use_bias else ("w",))
        x = _check_input("Conv2d", x, ndim=4)
        _check_param_shape("Conv2d", "w", params["w"],
                           (self.out_channels, x.shape[1] // self.groups) + self.kernel_size,
                           f"[out_channels, C/groups, KH, KW] for the input {describe(x)}, groups={self.groups}")
        y = lax.conv2d(x, params["w"], self.stride, self.padding, self.dilation, self.groups)
        if not self.use_bias:
            return y
        _check_param_shape("Conv2d", "b", params["b"], (self.out_channels,), "[out_channels]")
        return y + fnp.reshape(params["b"], (1, -1, 1, 1))


class LayerNorm(Layer):
    """Normalise over the last axis: ``(x - mean) / sqrt(var + eps) * scale + bias``.

    params ``{"scale": f32[D], "bias": f32[D]}`` (ones and zeros).

    >>> layer = nn.LayerNorm()
    >>> params, out_shape = layer.init(random.key(0), (-1, 3))
    >>> layer.apply(params, fnp.array([[1.0, 2.0, 3.0]]))
    Array([[-1.2247,  0.       ,  1.2247]], dtype=float32)
    """

    def __init__(self, eps: float = 1e-5, *, use_scale: bool = True, use_bias: bool = True):
        if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)):
            raise TypeError(f"LayerNorm: eps must be a number, got {type(eps).__name__}: {eps!r:.40}")
        self.eps = float(eps)
        self.use_scale = bool(use_scale)
        self.use_bias = bool(use_bias)

    def init(self, key, input_shape):
        shape = _input_shape("LayerNorm", input_shape)
        d = shape[-1]
        params = {}
        if self.use_scale:
            params["scale"] = init_.ones(key, (d,))
        if self.use_bias:
            params["bias"] = init_.zeros(key, (d,))
        return params, shape

    def apply(self, params, x, *, key=None, train=False):
        names = ("scale",) * self.use_scale + ("bias",) * self.use_bias
        params = _check_params("LayerNorm", params, names)
        x = _check_input("LayerNorm", x)
        for k in names:
            _check_param_shape("LayerNorm", k, params[k], x.shape[-1:],
                               f"one entry per feature of the input {describe(x)}")
        mean = fnp.mean(x, axis=-1, keepdims=True)
        centred = x - mean
        var = fnp.mean(centred * centred, axis=-1, keepdims=True)
        y = centred / fnp.sqrt(var + self.eps)
        if self.use_scale:
            y = y * params["scale"]
        if self.use_bias:
            y = y + params["bias"]
        return y


class Embedding(Layer):
    """Look up rows of a table: int[...] -> f32[..., features]. params ``{"table": f32[V, features]}``.

    Indices must be in ``[0, V)``: out of range raises IndexError. A
    negative index is checked eagerly only; under ``jit`` (traced indices)
    it counts from the end, as numpy's ``take`` does. Default init: standard normal.

    >>> layer = nn.Embedding(10, 4)
    >>> params, out_shape = layer.init(random.key(0), (-1,))
    >>> layer.apply(params, fnp.array([1, 7])).shape     # i32[B] -> f32[B, 4])
    (2, 4)
    """

    def __init__(self, num_embeddings: int, features: int, *, table_init: Callable | None = None):
        self.num_embeddings = _size("Embedding", "num_embeddings", num_embeddings)
        self.features = _size("Embedding", "features", features)
        self.table_init = table_init or init_.normal(1.0)

    def init(self, key, input_shape):
        shape = _input_shape("Embedding", input_shape, min_ndim=0)
        return {"table": self.table_init(key, (self.num_embeddings, self.features))}, shape + (self.features,)

    def apply(self, params, x, *, key=None, train=False):
        params = _check_params("Embedding", params, ("table",))
        _check_param_shape("Embedding", "table", params["table"], (self.num_embeddings, self.features),
                           "[num_embeddings, features]")
        ids = fnp.asarray(x)
        if ids.dtype.kind not in "iu":
            raise TypeError(f"Embedding: indices must be integers, got {describe(ids)}")
        if isinstance(ids, Array) and ids.size:
            # Concrete indices only: traced ones (under jit) cannot be looked at.
            for bad in (int(fnp.min(ids)), int(fnp.max(ids))):
                if not 0 <= bad < self.num_embeddings:
                    raise IndexError(f"Embedding: index {bad} in {describe(ids)} is out of range "
                                     f"[0, {self.num_embeddings})")
        return fnp.take(params["table"], ids, axis=0)


# --------------------------------------------------------------------------
# Layers without parameters
# --------------------------------------------------------------------------


class _Stateless(Layer):
    """A layer with no parameters whose output shape is computed by ``output_shape``."""

    def output_shape(self, input_shape: Shape) -> Shape:
        return input_shape

    def init(self, key, input_shape):
        return (), self.output_shape(_input_shape(type(self).__name__, input_shape, min_ndim=0))


class _Pool(_Stateless):
    _name = "pool"

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0):
        self.kernel_size = lax.int_pair(self._name, "kernel_size", kernel_size, 1)
        self.stride = self.kernel_size if stride is None else lax.int_pair(self._name, "stride", stride, 1)
        self.padding = lax.int_pair(self._name, "padding", padding, 0)

    def output_shape(self, input_shape):
        n, c, h, w = _input_shape(self._name, input_shape, ndim=4)
        _, _, oh, ow = lax.pool2d_shape((max(n, 1), c, h, w), self.kernel_size, self.stride, self.padding,
                                        name=self._name)
        return (n, c, oh, ow)


class MaxPool2d(_Pool):
    """Max pooling on NCHW inputs; ``stride`` defaults to the kernel size.

    >>> MaxPool2d(2).init(None, (-1, 32, 28, 28))[1]
    (-1, 32, 14, 14)
    """
    _name = "MaxPool2d"

    def apply(self, params, x, *, key=None, train=False):
        _check_no_params(self._name, params)
        return lax.max_pool2d(_check_input(self._name, x, ndim=4), self.kernel_size, self.stride, self.padding)


class AvgPool2d(_Pool):
    """Average pooling on NCHW inputs (zero padding counted); ``stride`` defaults to the kernel size.

    >>> layer = nn.AvgPool2d(2)
    >>> params, out_shape = layer.init(random.key(0), (-1, 1, 4, 4))
    >>> layer.apply(params, fnp.ones((1, 1, 4, 4)))
    Array([[[[1., 1.],
             [1., 1.]]]], dtype=float32)
    """
    _name = "AvgPool2d"

    def apply(self, params, x, *, key=None, train=False):
        _check_no_params(self._name, params)
        return lax.avg_pool2d(_check_input(self._name, x, ndim=4), self.kernel_size, self.stride, self.padding)


class Flatten(_Stateless):
    """Flatten all but the leading (batch) axis: (N, d1, d2, ...) -> (N, d1*d2*...).

    >>> layer = nn.Flatten()
    >>> params, out_shape = layer.init(random.key(0), (-1, 2, 3))
    >>> layer.apply(params, fnp.ones((5, 2, 3))).shape  # f32[B, 2, 3] -> f32[B, 6])
    (5, 6)
    """

    def output_shape(self, input_shape):
        shape = _input_shape("Flatten", input_shape)
        return (shape[0], math.prod(shape[1:]))

    def apply(self, params, x, *, key=None, train=False):
        _check_no_params("Flatten", params)
        x = _check_input("Flatten", x)
        return fnp.reshape(x, (x.shape[0], -1))


class Dropout(_Stateless):
    """Zero each entry with probability ``rate`` in training, scaling the rest by ``1 / (1 - rate)``.

    With ``train=False`` (or ``rate=0``) it is the identity. In training a
    ``key`` is required; the same key gives the same mask.

    >>> x = fnp.ones(1000)
    >>> y = nn.Dropout(0.5).apply((), x, key=random.key(0), train=True)
    >>> bool(fnp.all((y == 0) | (y == 2)))     # kept entries scaled by 1 / (1 - rate)
    True
    """

    def __init__(self, rate: float):
        if isinstance(rate, bool) or not isinstance(rate, (int, float, np.integer, np.floating)):
            raise TypeError(f"Dropout: rate must be a number in [0, 1), got {type(rate).__name__}: {rate!r:.40}")
        rate = float(rate)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"Dropout: rate must be in [0, 1), got {rate}")
        self.rate = rate

    def apply(self, params, x, *, key=None, train=False):
        _check_no_params("Dropout", params)
        if not train or self.rate == 0.0:
            return x
        if key is None:
            raise ValueError("Dropout: train=True needs a random key (apply(params, x, key=..., train=True))")
        x = F._float(x)
        keep = 1.0 - self.rate
        mask = random.bernoulli(key, keep, x.shape)
        return fnp.where(mask, x * (1.0 / keep), 0.0)


class Activation(_Stateless):
    """An elementwise (or per-row) function as a layer: ``Activation(nn.relu)``.

    >>> layer = nn.Activation(fnp.abs)
    >>> params, out_shape = layer.init(random.key(0), (-1, 2))
    >>> layer.apply(params, fnp.array([[-1.0, 2.0]]))
    Array([[1., 2.]], dtype=float32)
    """

    def __init__(self, fn: Callable[[Any], Any]):
        if not callable(fn):
            raise TypeError(f"Activation: expected a function of one array (such as nn.relu), got "
                            f"{type(fn).__name__}: {fn!r:.40}")
        self.fn = fn

    def apply(self, params, x, *, key=None, train=False):
        _check_no_params(type(self).__name__, params)
        return self.fn(x)

    def __repr__(self) -> str:
        return f"Activation({getattr(self.fn, '__name__', self.fn)})"


class ReLU(Activation):
    """The layer form of :func:`relu` (no parameters).

    >>> layer = nn.ReLU()
    >>> params, out_shape = layer.init(random.key(0), (-1, 2))
    >>> layer.apply(params, fnp.array([[-1.0, 2.0]]))
    Array([[0., 2.]], dtype=float32)
    """
    def __init__(self):
        super().__init__(F.relu)


class GELU(Activation):
    """GELU; ``approximate=True`` is the tanh form (see :func:`funcgrad.nn.gelu`).

    >>> layer = nn.GELU()
    >>> params, out_shape = layer.init(random.key(0), (-1, 2))
    >>> layer.apply(params, fnp.array([[-1.0, 2.0]]))
    Array([[-0.1588 ,  1.9546]], dtype=float32)
    """

    def __init__(self, approximate: bool = True):
        super().__init__(lambda x: F.gelu(x, approximate=approximate))
        self.approximate = approximate


class Sigmoid(Activation):
    """The layer form of :func:`sigmoid` (no parameters).

    >>> layer = nn.Sigmoid()
    >>> params, out_shape = layer.init(random.key(0), (-1, 2))
    >>> layer.apply(params, fnp.array([[-1.0, 2.0]]))
    Array([[0.2689, 0.8808]], dtype=float32)
    """
    def __init__(self):
        super().__init__(F.sigmoid)


class Tanh(Activation):
    """The layer form of :func:`tanh` (no parameters).

    >>> layer = nn.Tanh()
    >>> params, out_shape = layer.init(random.key(0), (-1, 2))
    >>> layer.apply(params, fnp.array([[-1.0, 2.0]]))
    Array([[-0.7616,  0.9640]], dtype=float32)
    """
    def __init__(self):
        super().__init__(F.tanh)


class SiLU(Activation):
    """The layer form of :func:`silu` (no parameters).

    >>> layer = nn.SiLU()
    >>> params, out_shape = layer.init(random.key(0), (-1, 2))
    >>> layer.apply(params, fnp.array([[-1.0, 2.0]]))
    Array([[-0.2689,  1.7616]], dtype=float32)
    """
    def __init__(self):
        super().__init__(F.silu)


class Softplus(Activation):
    """The layer form of :func:`softplus` (no parameters).

    >>> layer = nn.Softplus()
    >>> params, out_shape = layer.init(random.key(0), (-1, 2))
    >>> layer.apply(params, fnp.array([[-1.0, 2.0]]))
    Array([[0.3133, 2.1269 ]], dtype=float32)
    """
    def __init__(self):
        super().__init__(F.softplus)


class Softmax(Activation):
    """The layer form of :func:`softmax` (no parameters).

    >>> layer = nn.Softmax()
    >>> params, out_shape = layer.init(random.key(0), (-1, 2))
    >>> layer.apply(params, fnp.array([[-1.0, 2.0]]))
    Array([[0.0474, 0.9526]], dtype=float32)
    """
    def __init__(self, axis: int = -1):
        super().__init__(lambda x: F.softmax(x, axis=axis))
        self.axis = axis


class LogSoftmax(Activation):
    """The layer form of :func:`log_softmax` (no parameters).

    >>> layer = nn.LogSoftmax()
    >>> params, out_shape = layer.init(random.key(0), (-1, 2))
    >>> layer.apply(params, fnp.array([[-1.0, 2.0]]))
    Array([[-3.0486 , -0.0486]], dtype=float32)
    """
    def __init__(self, axis: int = -1):
        super().__init__(lambda x: F.log_softmax(x, axis=axis))
        self.axis = axis


# --------------------------------------------------------------------------
# Composition
# --------------------------------------------------------------------------


class Sequential(Layer):
    """Layers applied one after the other. params: a tuple with one entry per layer.

    ``init`` and ``apply`` split the key into one key per layer, so each
    Dropout gets its own mask.

    >>> model = Sequential(Conv2d(32, 3, padding=1), ReLU(), MaxPool2d(2), Flatten(), Linear(10))
    >>> params, shape = model.init(random.key(0), (-1, 1, 28, 28))   # shape (-1, 10)
    """

    def __init__(self, *layers: Layer):
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = tuple(layers[0])
        for layer in layers:
            if not isinstance(layer, Layer):
                raise TypeError(f"Sequential: every item must be a Layer (with init/apply), got "
                                f"{type(layer).__name__}; wrap functions as Activation(fn)")
        self.layers = tuple(layers)

    def init(self, key, input_shape):
        keys = _split(key, len(self.layers))
        params, shape = [], tuple(input_shape)
        for layer, k in zip(self.layers, keys):
            p, shape = layer.init(k, shape)
            params.append(p)
        return tuple(params), shape

    def apply(self, params, x, *, key=None, train=False):
        if not isinstance(params, (tuple, list)):
            raise TypeError(f"Sequential.apply: params must be the tuple that Sequential.init returns (one entry "
                            f"per layer), got {type(params).__name__}")
        if len(params) != len(self.layers):
            raise ValueError(f"Sequential: got {len(params)} parameter entries for {len(self.layers)} layers")
        keys = _split(key, len(self.layers)) if key is not None else [None] * len(self.layers)
        for layer, p, k in zip(self.layers, params, keys):
            x = layer.apply(p, x, key=k, train=train)
        return x

    def __repr__(self) -> str:
        inner = ",\n  ".join(repr(layer) for layer in self.layers)
        return f"Sequential(\n  {inner}\n)"


def serial(*layers: Layer) -> Sequential:
    """``Sequential(*layers)`` (stax's name).

    >>> model = nn.serial(nn.Linear(4), nn.ReLU(), nn.Linear(2))     # as nn.Sequential
    >>> params, out_shape = model.init(random.key(0), (-1, 3))
    >>> out_shape
    (-1, 2)
    """
    return Sequential(*layers)


def _split(key: Any, n: int) -> list:
    if n == 0:
        return []
    keys = random.split(key, n)
    return [keys[i] for i in range(n)]
