"""The rest of ``jax.nn``'s activations and normalisers, with JAX's signatures and derivative conventions.

Piecewise functions take JAX's side at each kink: ``relu6`` and ``hard_sigmoid``
have derivative 0 at both corners, ``hard_tanh`` 1 at +-1, ``sparse_plus`` 1 at
1; ``celu`` (``max``/``min`` form) has derivative 1 at 0. NaN stays NaN.

>>> import funcgrad.nn as nn, funcgrad.numpy as fnp
>>> nn.relu6(fnp.array([-1.0, 3.0, 7.0]))        # f32[3]: [0, 3, 6]
Array([0., 3., 6.], dtype=float32)
>>> nn.glu(fnp.arange(4.0))                      # f32[2]: [0 * sigmoid(2), 1 * sigmoid(3)]
Array([0.        , 0.9526], dtype=float32)
"""
from __future__ import annotations

import math
from typing import Any

import funcgrad.lax as lax
import funcgrad.numpy as fnp
from funcgrad.core import describe
from funcgrad.nn._functions import _float, logsumexp, sigmoid, softplus

__all__ = ["celu", "elu", "glu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh", "identity", "log1mexp",
           "log_sigmoid", "logmeanexp", "mish", "relu6", "selu", "soft_sign", "sparse_plus", "sparse_sigmoid",
           "squareplus", "standardize"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def identity(x: Any) -> Any:
    """``x`` itself (as an array).

    >>> nn.identity(fnp.array([-1.0, 0.0, 2.0]))
    Array([-1.,  0.,  2.], dtype=float32)
    """
    return fnp.asarray(x)


def elu(x: Any, alpha: Any = 1.0) -> Any:
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``; derivative ``alpha`` at 0 (as JAX).

    >>> nn.elu(fnp.array([-1.0, 0.0, 2.0]))
    Array([-0.6321,  0.        ,  2.        ], dtype=float32)
    """
    x = _float(x)
    positive = lax.gt(x, 0.0)
    # expm1 of the clamped value: the unused branch never overflows (exp of a large x would be inf).
    return lax.select(positive, x, fnp.multiply(alpha, fnp.expm1(lax.select(positive, fnp.zeros_like(x), x))))


def celu(x: Any, alpha: Any = 1.0) -> Any:
    """``max(x, 0) + alpha * expm1(min(x, 0) / alpha)``: continuously differentiable ELU.

    >>> nn.celu(fnp.array([-1.0, 0.0, 2.0]))
    Array([-0.6321,  0.        ,  2.        ], dtype=float32)
    """
    x = _float(x)
    return fnp.maximum(x, 0.0) + fnp.multiply(alpha, fnp.expm1(fnp.minimum(x, 0.0) / alpha))


def selu(x: Any) -> Any:
    """Scaled ELU with the self-normalising constants (``scale * elu(x, alpha)``).

    >>> nn.selu(fnp.array([-1.0, 0.0, 2.0]))
    Array([-1.1113,  0.       ,  2.1014 ], dtype=float32)
    """
    return lax.mul(elu(x, _SELU_ALPHA), _SELU_SCALE)


def relu6(x: Any) -> Any:
    """``min(max(x, 0), 6)``, derivative 1 strictly inside (0, 6) and 0 at both corners (as JAX).

    >>> nn.relu6(fnp.array([-1.0, 0.0, 2.0]))
    Array([0., 0., 2.], dtype=float32)
    """
    x = _float(x)
    # Tested so NaN falls through to x in both selects.
    return lax.select(lax.le(x, 0.0), fnp.zeros_like(x), lax.select(lax.ge(x, 6.0), fnp.full_like(x, 6.0), x))


def hard_sigmoid(x: Any) -> Any:
    """``relu6(x + 3) / 6``.

    >>> nn.hard_sigmoid(fnp.array([-1.0, 0.0, 2.0]))
    Array([0.3333, 0.5       , 0.8333 ], dtype=float32)
    """
    return lax.div(relu6(lax.add(_float(x), 3.0)), 6.0)


def hard_silu(x: Any) -> Any:
    """``x * hard_sigmoid(x)`` (also called hard swish).

    >>> nn.hard_silu(fnp.array([-1.0, 0.0, 2.0]))
    Array([-0.3333,  0.        ,  1.6667 ], dtype=float32)
    """
    x = _float(x)
    return lax.mul(x, hard_sigmoid(x))


hard_swish = hard_silu


def hard_tanh(x: Any) -> Any:
    """``x`` clipped to [-1, 1]; derivative 1 on the closed interval, 0 outside (as JAX).

    >>> nn.hard_tanh(fnp.array([-1.0, 0.0, 2.0]))
    Array([-1.,  0.,  1.], dtype=float32)
    """
    x = _float(x)
    return lax.select(lax.gt(x, 1.0), fnp.ones_like(x), lax.select(lax.lt(x, -1.0), fnp.full_like(x, -1.0), x))


def log_sigmoid(x: Any) -> Any:
    """``log(sigmoid(x)) = -softplus(-x)``, stable for large ``|x|``.

    >>> nn.log_sigmoid(fnp.array([-1.0, 0.0, 2.0]))
    Array([-1.3133, -0.6931, -0.1269 ], dtype=float32)
    """
    return lax.neg(softplus(lax.neg(_float(x))))


def soft_sign(x: Any) -> Any:
    """``x / (|x| + 1)``.

    >>> nn.soft_sign(fnp.array([-1.0, 0.0, 2.0]))
    Array([-0.5      ,  0.       ,  0.6667], dtype=float32)
    """
    x = _float(x)
    return lax.div(x, lax.add(lax.abs(x), 1.0))


def mish(x: Any) -> Any:
    """``x * tanh(softplus(x))``.

    >>> nn.mish(fnp.array([-1.0, 0.0, 2.0]))
    Array([-0.3034,  0.        ,  1.9440 ], dtype=float32)
    """
    x = _float(x)
    return lax.mul(x, lax.tanh(softplus(x)))


def squareplus(x: Any, b: Any = 4) -> Any:
    """``(x + sqrt(x^2 + b)) / 2``.

    >>> nn.squareplus(fnp.array([-1.0, 0.0, 2.0]))
    Array([0.6180 , 1.       , 2.4142], dtype=float32)
    """
    x = _float(x)
    return (x + fnp.sqrt(x * x + b)) / 2


def sparse_plus(x: Any) -> Any:
    """0 for ``x <= -1``, ``(x + 1)^2 / 4`` in between, ``x`` for ``x >= 1``.

    >>> nn.sparse_plus(fnp.array([-1.0, 0.0, 2.0]))
    Array([0.  , 0.25, 2.  ], dtype=float32)
    """
    x = _float(x)
    middle = lax.div(lax.mul(lax.add(x, 1.0), lax.add(x, 1.0)), 4.0)
    return lax.select(lax.le(x, -1.0), fnp.zeros_like(x), lax.select(lax.ge(x, 1.0), x, middle))


def sparse_sigmoid(x: Any) -> Any:
    """``clip(x + 1, 0, 2) / 2``, the derivative of ``sparse_plus``; half-derivatives at the corners (as JAX).

    >>> nn.sparse_sigmoid(fnp.array([-1.0, 0.0, 2.0]))
    Array([0. , 0.5, 1. ], dtype=float32)
    """
    return lax.mul(fnp.minimum(fnp.maximum(lax.add(_float(x), 1.0), 0.0), 2.0), 0.5)


def log1mexp(x: Any) -> Any:
    """``log(1 - exp(-x))`` for ``x >= 0``, accurate near 0 and for large ``x`` (Maechler's two forms).

    >>> nn.log1mexp(fnp.array([0.5, 2.0]))       # log(1 - exp(-x))
    Array([-0.9328, -0.1454], dtype=float32)
    """
    x = _float(x)
    small = lax.lt(x, math.log(2.0))
    return lax.select(small, fnp.log(-fnp.expm1(-x)), fnp.log1p(-fnp.exp(-x)))


def glu(x: Any, axis: int = -1) -> Any:
    """Gated linear unit: split ``x`` in two halves ``a, b`` along ``axis``, return ``a * sigmoid(b)``.

    >>> nn.glu(fnp.array([1.0, 2.0, 0.0, 1.0]))      # a * sigmoid(b), halves of the last axis
    Array([0.5      , 1.4621], dtype=float32)
    """
    x = _float(x)
    axis = int(axis)
    n = x.shape[axis] if -x.ndim <= axis < x.ndim else None
    if n is None or n % 2:
        raise ValueError(f"glu: axis {axis} of {describe(x)} must exist and have an even size, to split in two")
    a, b = fnp.split(x, 2, axis=axis)
    return a * sigmoid(b)


def _masked(x: Any, where: Any, fill: float) -> Any:
    return x if where is None else fnp.where(where, x, fill)


def _count(x: Any, axis: Any, where: Any, keepdims: bool) -> Any:
    """How many elements (``where`` True) each reduction over ``axis`` takes, in ``x``'s dtype."""
    mask = fnp.ones(x.shape, x.dtype) if where is None else fnp.broadcast_to(fnp.asarray(where), x.shape)
    return fnp.sum(mask.astype(x.dtype), axis=axis, keepdims=keepdims)


def logmeanexp(x: Any, axis: Any = None, where: Any = None, keepdims: bool = False) -> Any:
    """``log(mean(exp(x)))`` over ``axis`` (all axes by default) and the ``where`` elements, stably.

    >>> nn.logmeanexp(fnp.array([-1.0, 0.0, 2.0]))
    Array(1.0712, dtype=float32)
    """
    x = _float(x)
    lse = logsumexp(_masked(x, where, -math.inf), axis=axis, keepdims=keepdims)
    return lse - fnp.log(_count(x, axis, where, keepdims))


def _mean(x: Any, axis: Any, where: Any) -> Any:
    return fnp.sum(_masked(x, where, 0.0), axis=axis, keepdims=True) / _count(x, axis, where, True)


def standardize(x: Any, axis: Any = -1, mean: Any = None, variance: Any = None, epsilon: Any = 1e-5,
                where: Any = None, *, algorithm: str = "fast") -> Any:
    """``(x - mean) / sqrt(variance + epsilon)`` over ``axis``, the statistics taken over the ``where``
    elements unless given. ``algorithm="fast"`` uses ``mean(x^2) - mean(x)^2`` clipped at 0 (JAX's
    default); ``"stable"`` the two-pass ``mean((x - mean)^2)``.

    >>> nn.standardize(fnp.array([-1.0, 0.0, 2.0]))
    Array([-1.0690, -0.2673,  1.3363], dtype=float32)
    """
    x = _float(x)
    if algorithm not in ("fast", "stable"):
        raise ValueError(f"standardize: algorithm must be 'fast' or 'stable', got {algorithm!r}")
    if mean is None:
        mean = _mean(x, axis, where)
    if variance is None:
        if algorithm == "stable":
            variance = _mean(fnp.square(x - mean), axis, where)
        else:
            variance = fnp.maximum(_mean(fnp.square(x), axis, where) - fnp.square(mean), 0.0)
    return (x - mean) / fnp.sqrt(variance + epsilon)
