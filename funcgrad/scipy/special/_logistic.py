"""Logistic, entropy and log helpers of ``funcgrad.scipy.special``: ``expit``, ``logit``, ``xlogy``,
``xlog1py``, ``entr``, ``rel_entr``, ``kl_div``, ``boxcox``, ``boxcox1p``, ``logsumexp``, ``softmax`` and
``log_softmax``. Shared argument handling is in ``_base``; the other families in ``_gamma``, ``_erf``,
``_bessel`` and ``_complex``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad import lax
from funcgrad._core import Array
import funcgrad.numpy as fnp
from funcgrad.numpy._base import arr, normalize_axes
from funcgrad.lax import _special as _p
from funcgrad.scipy.special._base import _floats, _unary
from funcgrad.typing import ArrayLike


def expit(x: ArrayLike) -> Array:
    """The logistic sigmoid ``1 / (1 + exp(-x))``.

    >>> expit(fnp.array([0.0]))
    Array([0.5], dtype=float32)
    """
    return _unary(lax.logistic_p, x, complex_ok=True)


def logit(x: ArrayLike) -> Array:
    """The inverse of ``expit``: ``log(x / (1 - x))``; +-inf at 1/0, NaN outside [0, 1].

    >>> logit(fnp.array([0.5]))
    Array([0.], dtype=float32)
    """
    (x,) = _floats(x, complex_ok=True)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


def xlogy(x: ArrayLike, y: ArrayLike) -> Array:
    """``x * log(y)``, 0 where ``x == 0`` (even at ``y == 0``).

    Gradients as JAX: ``d/dx = log(y)`` (-inf at ``y == 0``); ``d/dy = x / y``, which
    funcgrad gives as 0 where ``x == 0`` (JAX gives NaN at ``(0, 0)``).

    >>> xlogy(fnp.array([0.0, 2.0]), fnp.array([0.0, 3.0]))   # [0, 2 log 3]
    Array([0.       , 2.1972], dtype=float32)
    """
    x, y = _floats(x, y, complex_ok=True)
    return _p.xlogy_p.bind(x, y)


def xlog1py(x: ArrayLike, y: ArrayLike) -> Array:
    """``x * log1p(y)``, 0 where ``x == 0`` (even at ``y == -1``); gradients as ``xlogy``.

    >>> xlog1py(fnp.array([0.0, 2.0]), fnp.array([-1.0, 3.0]))   # [0, 2 log 4]
    Array([0.       , 2.7726], dtype=float32)
    """
    x, y = _floats(x, y, complex_ok=True)
    return _p.xlog1py_p.bind(x, y)


def entr(x: ArrayLike) -> Array:
    """Elementwise entropy ``-x log(x)``: 0 at 0 (derivative +inf there, as JAX), -inf for ``x < 0``.

    >>> entr(fnp.array([0.0, 0.5]))
    Array([-0.       ,  0.3466], dtype=float32)
    """
    (x,) = _floats(x)
    neg = x < 0
    safe = fnp.where(neg, 1.0, x)
    return fnp.where(neg, -np.inf, lax.neg(_p.xlogy_p.bind(safe, safe)))


def rel_entr(p: ArrayLike, q: ArrayLike) -> Array:
    """``p log(p / q)`` for ``p, q > 0``; 0 where ``p == 0, q >= 0``; inf elsewhere.

    >>> rel_entr(fnp.array([0.5]), fnp.array([0.25]))   # [0.5 log 2]
    Array([0.3466], dtype=float32)
    """
    p, q = _floats(p, q)
    both = fnp.logical_and(p > 0, q > 0)
    sp, sq = fnp.where(both, p, 1.0), fnp.where(both, q, 1.0)
    val = lax.mul(sp, lax.log(lax.div(sp, sq)))
    return fnp.where(both, val, fnp.where(fnp.logical_and(p == 0, q >= 0), lax.mul(p, 0.0), np.inf))


def kl_div(p: ArrayLike, q: ArrayLike) -> Array:
    """``rel_entr(p, q) - p + q``: ``p log(p / q) - p + q`` for ``p, q > 0``; ``q`` where ``p == 0, q >= 0``;
    inf elsewhere.

    >>> kl_div(fnp.array([0.5]), fnp.array([0.25]))
    Array([0.0966], dtype=float32)
    """
    p, q = _floats(p, q)
    return lax.add(lax.sub(rel_entr(p, q), p), q)


def boxcox(x: ArrayLike, lmbda: Any) -> Any:
    """The Box-Cox transform ``(x**lmbda - 1) / lmbda`` (``log(x)`` at ``lmbda == 0``).

    >>> boxcox(fnp.array([2.0]), 0.5)
    Array([0.8284], dtype=float32)
    """
    x, lmbda = _floats(x, lmbda, complex_ok=True)
    return _boxcox(lax.log(x), lmbda)


def boxcox1p(x: ArrayLike, lmbda: Any) -> Any:
    """The Box-Cox transform of ``1 + x``: ``((1 + x)**lmbda - 1) / lmbda`` (``log1p(x)`` at ``lmbda == 0``).

    >>> boxcox1p(fnp.array([1.0]), 0.5)
    Array([0.8284], dtype=float32)
    """
    x, lmbda = _floats(x, lmbda, complex_ok=True)
    return _boxcox(lax.log1p(x), lmbda)


def _boxcox(logx, lmbda):
    zero = lmbda == 0.0
    safe = fnp.where(zero, 1.0, lmbda)
    return fnp.where(zero, logx + lax.mul(lmbda, 0.0), lax.div(lax.expm1(lax.mul(safe, logx)), safe))


def logsumexp(a: ArrayLike, axis: int | Sequence[int] | None = None, b: ArrayLike | None = None, keepdims: bool = False,
              return_sign: bool = False, where: ArrayLike | None = None) -> Any:
    """``log(sum(b * exp(a), axis))``, computed stably (max-shifted).

    With ``return_sign=True`` returns ``(log|s|, sign(s))``; otherwise a negative sum gives NaN.
    ``where`` masks entries out of the sum. An all -inf slice gives -inf.

    >>> logsumexp(fnp.array([1.0, 2.0]), b=fnp.array([1.0, -2.0]), return_sign=True)
    (Array(2.4899, dtype=float32), Array(-1., dtype=float32))
    """
    if b is not None:
        a, b = _floats(a, b, complex_ok=True)
        a, b = fnp.broadcast_arrays(a, b)
    else:
        (a,) = _floats(a, complex_ok=True)
    axes = normalize_axes("logsumexp", axis, a.ndim, a)
    if where is not None:
        where = fnp.broadcast_to(arr(where), a.shape)
        if where.dtype != np.bool_:
            raise TypeError(f"logsumexp: where must be a bool array, got {where.dtype}")
        a = fnp.where(where, a, -np.inf)
        if b is not None:
            b = fnp.where(where, b, 0.0)
    m = lax.stop_gradient(fnp.max(a, axis=axes, keepdims=True))
    m = fnp.where(fnp.isfinite(m), m, 0.0)
    e = lax.exp(lax.sub(a, m))
    if b is not None:
        e = lax.mul(e, b)
    s = fnp.sum(e, axis=axes, keepdims=True)
    if return_sign:
        sign = fnp.sign(s)
        out = lax.add(lax.log(fnp.abs(s)), m)
    else:
        out = lax.add(lax.log(s), m)
    if not keepdims:
        shape = tuple(d for i, d in enumerate(a.shape) if i not in axes)
        out = fnp.reshape(out, shape)
        if return_sign:
            sign = fnp.reshape(sign, shape)
    return (out, sign) if return_sign else out


def _softmax_axes(name, x, axis):
    return normalize_axes(name, axis, x.ndim, x)


def softmax(x: ArrayLike, /, *, axis: int | Sequence[int] | None = None) -> Any:
    """``exp(x) / sum(exp(x), axis)`` (max-shifted). ``axis=None`` (JAX's default here) normalises
    over all axes.

    >>> softmax(fnp.array([1.0, 2.0]))
    Array([0.2689, 0.7311], dtype=float32)
    """
    (x,) = _floats(x, complex_ok=True)
    axes = _softmax_axes("softmax", x, axis)
    m = lax.stop_gradient(fnp.max(x, axis=axes, keepdims=True))
    e = lax.exp(lax.sub(x, fnp.where(fnp.isfinite(m), m, 0.0)))
    return lax.div(e, fnp.sum(e, axis=axes, keepdims=True))


def log_softmax(x: ArrayLike, /, *, axis: int | Sequence[int] | None = None) -> Any:
    """``x - logsumexp(x, axis)``. ``axis=None`` (JAX's default here) normalises over all axes.

    >>> log_softmax(fnp.array([1.0, 2.0]))
    Array([-1.3133 , -0.3133], dtype=float32)
    """
    (x,) = _floats(x, complex_ok=True)
    axes = _softmax_axes("log_softmax", x, axis)
    m = lax.stop_gradient(fnp.max(x, axis=axes, keepdims=True))
    shifted = lax.sub(x, fnp.where(fnp.isfinite(m), m, 0.0))
    return lax.sub(shifted, lax.log(fnp.sum(lax.exp(shifted), axis=axes, keepdims=True)))
