"""Activations, softmax family and ``one_hot`` (pure functions of arrays).

All work on any shape; float inputs keep their dtype, integer inputs are
computed in the default float dtype.

>>> import funcgrad.nn as nn, funcgrad.numpy as fnp
>>> x = fnp.array([[-1.0, 0.0, 2.0]])          # f32[1,3]
>>> nn.relu(x)                                 # f32[1,3]: [[0, 0, 2]]
Array([[0., 0., 2.]], dtype=float32)
>>> nn.softmax(x, axis=-1).sum(-1)             # f32[1]:   [1.]
Array([1.0000], dtype=float32)
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import funcgrad.lax as lax
import funcgrad.numpy as fnp
from funcgrad import dtypes as _dtypes
from funcgrad.core import describe
from funcgrad.dtypes import default_float_dtype
from funcgrad.numpy.array_utils import normalize_axes, normalize_axis

__all__ = ["relu", "leaky_relu", "gelu", "sigmoid", "softplus", "silu", "swish", "tanh", "softmax",
           "log_softmax", "logsumexp", "one_hot"]


def _float(x: Any) -> Any:
    """``x`` as a float Array or tracer (integers -> default float)."""
    x = fnp.asarray(x)
    return x if _dtypes.kind(x.dtype) == "f" else lax.convert_element_type(x, default_float_dtype())


def relu(x: Any) -> Any:
    """``max(x, 0)``, with derivative 0 at 0 (as JAX and PyTorch). f32[...] -> f32[...].

    NaN stays NaN (as ``jnp.maximum`` and ``torch.relu``), so a NaN weight
    cannot hide behind a finite loss; its derivative there passes the
    cotangent through (as PyTorch's).

    >>> nn.relu(fnp.array([-1.0, 0.0, 2.0]))
    Array([0., 0., 2.], dtype=float32)
    """
    x = _float(x)
    # Tested as x <= 0 (false for NaN) so NaN takes the x branch. A scalar 0.0
    # branch is a literal, not traced: the backward pass is one select (plus
    # its zeros), and -inf inputs give 0 (x * mask would give NaN).
    return lax.select(lax.le(x, 0.0), 0.0, x)


def leaky_relu(x: Any, negative_slope: float = 0.01) -> Any:
    """``x`` where ``x > 0``, else ``negative_slope * x``. f32[...] -> f32[...].

    >>> nn.leaky_relu(fnp.array([-1.0, 0.0, 2.0]))
    Array([-0.01,  0.  ,  2.  ], dtype=float32)
    """
    x = _float(x)
    return lax.select(lax.gt(x, 0.0), x, lax.mul(x, float(negative_slope)))


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu(x: Any, approximate: bool = True) -> Any:
    """Gaussian error linear unit ``x * Phi(x)``. f32[...] -> f32[...].

    ``approximate=True`` (the default, as in JAX) uses the tanh form
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``; ``False`` is the
    exact ``0.5 x (1 + erf(x / sqrt(2)))`` (PyTorch's default).

    >>> nn.gelu(fnp.array([-1.0, 0.0, 2.0]))
    Array([-0.1588 ,  0.       ,  1.9546], dtype=float32)
    """
    x = _float(x)
    if approximate:
        inner = lax.mul(_SQRT_2_OVER_PI, lax.add(x, lax.mul(0.044715, lax.mul(x, lax.mul(x, x)))))
        return lax.mul(lax.mul(0.5, x), lax.add(1.0, lax.tanh(inner)))
    return lax.mul(lax.mul(0.5, x), lax.add(1.0, lax.erf(lax.mul(x, 1.0 / math.sqrt(2.0)))))


def sigmoid(x: Any) -> Any:
    """``1 / (1 + exp(-x))`` (the ``logistic`` primitive; never overflows). f32[...] -> f32[...].

    >>> nn.sigmoid(fnp.array([-1.0, 0.0, 2.0]))
    Array([0.2689, 0.5      , 0.8808], dtype=float32)
    """
    return lax.logistic(_float(x))


def softplus(x: Any) -> Any:
    """``log(1 + exp(x))`` computed stably as ``max(x, 0) + log1p(exp(-|x|))``. f32[...] -> f32[...].

    >>> nn.softplus(fnp.array([-1.0, 0.0, 2.0]))
    Array([0.3133, 0.6931, 2.1269 ], dtype=float32)
    """
    x = _float(x)
    # maximum splits the derivative 1/2-1/2 at 0, so d/dx = sigmoid(0) = 1/2 there too.
    # -|x| as minimum(x, -x): its derivative at 0 is 0 (abs has 1 there, as in JAX).
    return fnp.maximum(x, 0.0) + fnp.log1p(fnp.exp(fnp.minimum(x, -x)))


def silu(x: Any) -> Any:
    """``x * sigmoid(x)`` (also called swish). f32[...] -> f32[...].

    >>> nn.silu(fnp.array([-1.0, 0.0, 2.0]))
    Array([-0.2689,  0.       ,  1.7616], dtype=float32)
    """
    x = _float(x)
    return lax.mul(x, lax.logistic(x))


swish = silu


def tanh(x: Any) -> Any:
    """Hyperbolic tangent. f32[...] -> f32[...].

    >>> nn.tanh(fnp.array([-1.0, 0.0, 2.0]))
    Array([-0.7616,  0.       ,  0.9640], dtype=float32)
    """
    return lax.tanh(_float(x))


def _single_axis(name: str, x: Any, axis: Any) -> int | None:
    """``axis`` normalised when it names one axis, else None (a tuple or None)."""
    if axis is None or isinstance(axis, (tuple, list)):
        normalize_axes(name, axis, x.ndim, x)   # checked here, so errors name this function
        return None
    if x.ndim == 0:   # no axis to normalise over (numpy would take axis 0 of a 0-d array)
        raise ValueError(f"{name}: axis {axis!r} is out of range for an array {describe(x)} of rank 0")
    return normalize_axis(name, axis, x.ndim, x)   # 1.5 or "1" are refused, not truncated


def _over_last_axis(fn: Any, x: Any, axis: int) -> Any:
    """Apply a last-axis primitive along ``axis`` (moving it there and back)."""
    if axis == x.ndim - 1:
        return fn(x)
    return fnp.moveaxis(fn(fnp.moveaxis(x, axis, -1)), -1, axis)


def _shifted(x: Any, axis: Any) -> Any:
    """``x - max(x, axis)`` with the max held constant (as JAX's softmax): a row
    holding +inf, or only -inf, becomes NaN in both softmaxes, as in JAX."""
    return x - fnp.stop_gradient(fnp.max(x, axis=axis, keepdims=True))


def softmax(x: Any, axis: Any = -1) -> Any:
    """``exp(x) / sum(exp(x), axis)``, max-shifted (fused kernel over one axis). f32[...] -> f32[...].

    ``axis`` may be an int or a tuple of axes (a tuple uses a composite form).

    >>> nn.softmax(fnp.array([-1.0, 0.0, 2.0]))
    Array([0.0420, 0.1142, 0.8438 ], dtype=float32)
    """
    x = _float(x)
    single = _single_axis("softmax", x, axis)
    if single is None:
        e = fnp.exp(_shifted(x, axis))
        return e / fnp.sum(e, axis=axis, keepdims=True)
    return _over_last_axis(lax.softmax, x, single)


def log_softmax(x: Any, axis: Any = -1) -> Any:
    """``x - logsumexp(x, axis)`` (fused kernel over one axis). f32[...] -> f32[...].

    >>> nn.log_softmax(fnp.array([-1.0, 0.0, 2.0]))
    Array([-3.1698  , -2.1698  , -0.1698], dtype=float32)
    """
    x = _float(x)
    single = _single_axis("log_softmax", x, axis)
    if single is None:
        shifted = _shifted(x, axis)
        return shifted - fnp.log(fnp.sum(fnp.exp(shifted), axis=axis, keepdims=True))
    return _over_last_axis(lax.log_softmax, x, single)


def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False, return_sign: bool = False,
              where: Any = None) -> Any:
    """``log(sum(b * exp(a), axis))`` computed stably, as ``jax.nn.logsumexp``. f32[...] -> f32[...].

    ``axis=None`` (the default, as in JAX) reduces over all axes; an int or tuple over those.
    ``b`` scales the terms (it may be negative: the sum's sign then comes back with
    ``return_sign=True``, else a negative sum gives NaN); ``where`` keeps only the True terms
    (an empty reduction gives -inf). As in JAX, a +inf entry gives +inf, an all -inf row -inf.

    >>> logsumexp(fnp.array([[0., 0.], [1., 1.]]), axis=1)   # Array([0.693..., 1.693...])
    Array([0.6931, 1.6931], dtype=float32)
    """
    x = _float(a)
    if b is None and where is None and not return_sign:
        single = _single_axis("logsumexp", x, axis)
        if single is None:
            return fnp.logsumexp(x, axis=axis, keepdims=keepdims)
        out = lax.logsumexp(x if single == x.ndim - 1 else fnp.moveaxis(x, single, -1))
        return fnp.expand_dims(out, single) if keepdims else out
    if b is not None:
        bb = fnp.asarray(b)
        bb = bb.astype(x.dtype) if bb.dtype.kind in "biu" else bb
        x, bb = fnp.broadcast_arrays(x, bb)
        x = x + fnp.zeros((), bb.dtype)      # the common float dtype
    if where is not None:
        x = fnp.where(where, x, -math.inf)
    if b is not None:
        # Terms with b == 0 must not set the shift (an inf there would poison the sum).
        x = fnp.where(bb != 0, x, -math.inf)
    m = lax.stop_gradient(fnp.max(x, axis=axis, keepdims=True))
    m = fnp.where(fnp.isfinite(m), m, 0.0)
    terms = fnp.exp(x - m)
    if b is not None:
        terms = terms * bb
    s = fnp.sum(terms, axis=axis, keepdims=True)
    sign = fnp.sign(s)
    empty = s == 0       # an empty (or all -inf) sum: -inf, without taking log(0)
    out = fnp.where(empty, -math.inf, fnp.log(fnp.where(empty, 1.0, fnp.abs(s)))) + m
    if not keepdims:
        out = fnp.squeeze(out, axis=axis) if axis is not None else fnp.reshape(out, ())
        sign = fnp.squeeze(sign, axis=axis) if axis is not None else fnp.reshape(sign, ())
    if return_sign:
        return out, lax.stop_gradient(sign)
    return fnp.where(sign < 0, math.nan, out)


def one_hot(labels: Any, num_classes: int, dtype: Any = np.float32) -> Any:
    """``labels`` int[...] -> dtype[..., num_classes], 1 at each label, 0 elsewhere.

    Labels outside ``[0, num_classes)`` give an all-zero row (as in JAX).

    >>> one_hot(fnp.array([0, 2]), 3)       # f32[2,3]: [[1, 0, 0], [0, 0, 1]]
    Array([[1., 0., 0.],
           [0., 0., 1.]], dtype=float32)
    """
    labels = fnp.asarray(labels)
    if labels.dtype.kind not in "iu":
        raise TypeError(f"one_hot: labels must be integers, got {describe(labels)}")
    num_classes = int(num_classes)
    if num_classes < 0:
        raise ValueError(f"one_hot: num_classes must be non-negative, got {num_classes}")
    hot = lax.eq(fnp.expand_dims(labels, -1), np.arange(num_classes, dtype=labels.dtype))
    return lax.convert_element_type(hot, dtype)
