"""Error functions and the normal distribution in ``funcgrad.scipy.special``: ``erf``, ``erfc``,
``erfcx``, ``erfinv``, ``ndtr``, ``ndtri``, ``log_ndtr``, Dawson's integral ``dawsn`` and Owen's T
``owens_t``. The complex Faddeeva function ``wofz`` is in ``_complex``; shared argument handling in ``_base``.
"""
from __future__ import annotations

import math
from typing import Any

from funcgrad import lax
from funcgrad._core import Array
import funcgrad.numpy as fnp
from funcgrad.lax import _special as _p
from funcgrad.lax import erf_inv_p, erf_p
from funcgrad.scipy.special._base import _floats, _unary
from funcgrad.typing import ArrayLike


def erf(x: ArrayLike) -> Array:
    """The error function ``2/sqrt(pi) int_0^x exp(-t^2) dt``.

    >>> erf(fnp.array([0.0, 1.0]))
    Array([0.       , 0.8427], dtype=float32)
    """
    return _unary(erf_p, x)


def erfc(x: ArrayLike) -> Array:
    """``1 - erf(x)``, accurate for large ``x``.

    >>> erfc(fnp.array([0.0, 3.0]))
    Array([1.0000000e+00, 2.2090497e-05], dtype=float32)
    """
    return _unary(_p.erfc_p, x)


def erfcx(x: ArrayLike) -> Array:
    """The scaled complementary error function ``exp(x^2) erfc(x)``.

    >>> erfcx(fnp.array([0.0, 10.0]))
    Array([1.        , 0.0561], dtype=float32)
    """
    return _unary(_p.erfcx_p, x)


def erfinv(x: ArrayLike) -> Array:
    """The inverse of ``erf`` on (-1, 1); +-inf at +-1, NaN outside.

    >>> erfinv(fnp.array([0.0, 0.5]))
    Array([0.        , 0.4769], dtype=float32)
    """
    return _unary(erf_inv_p, x)


def ndtr(x: ArrayLike) -> Array:
    """The standard normal CDF ``(1 + erf(x / sqrt(2))) / 2``, computed with erfc in the tails.

    >>> ndtr(fnp.array([0.0]))
    Array([0.5], dtype=float32)
    """
    (x,) = _floats(x)
    z = lax.mul(x, 1.0 / math.sqrt(2.0))
    small = lax.add(0.5, lax.mul(0.5, erf_p.bind(z)))
    pos = lax.sub(1.0, lax.mul(0.5, _p.erfc_p.bind(z)))
    neg = lax.mul(0.5, _p.erfc_p.bind(lax.neg(z)))
    return fnp.where(fnp.abs(z) < 1.0 / math.sqrt(2.0), small, fnp.where(z > 0, pos, neg))


def ndtri(p: ArrayLike) -> Array:
    """The inverse of ``ndtr`` (the standard normal quantile); +-inf at 1 and 0, NaN outside [0, 1].

    >>> ndtri(fnp.array([0.5, 0.975]))
    Array([0.       , 1.9600], dtype=float32)
    """
    return _unary(_p.ndtri_p, p)


def log_ndtr(x: ArrayLike, series_order: int = 3) -> Array:
    """``log(ndtr(x))``, accurate far in both tails.

    ``series_order`` (0..30) is checked as in JAX but does not change the result: funcgrad
    evaluates scipy's log_ndtr, which is accurate everywhere (JAX truncates an asymptotic
    series for ``x < -20``).

    >>> log_ndtr(fnp.array([-40.0, 0.0]))
    Array([-8.0460846e+02, -6.9314718e-01], dtype=float32)
    """
    if not isinstance(series_order, int) or isinstance(series_order, bool):
        raise TypeError(f"log_ndtr: series_order must be a Python int, got {series_order!r}")
    if series_order < 0:
        raise ValueError("log_ndtr: series_order must be non-negative.")
    if series_order > 30:
        raise ValueError("log_ndtr: series_order must be <= 30.")
    return _unary(_p.log_ndtr_p, x)


def dawsn(x: ArrayLike) -> Array:
    """Dawson's integral ``exp(-x^2) int_0^x exp(t^2) dt``.

    >>> dawsn(fnp.array([1.0]))
    Array([0.5381], dtype=float32)
    """
    return _unary(_p.dawsn_p, x)


def owens_t(h: Any, a: ArrayLike) -> Any:
    """Owen's T function ``T(h, a)``; differentiable in both.

    >>> owens_t(fnp.array([0.5]), fnp.array([1.0]))
    Array([0.1067], dtype=float32)
    """
    h, a = _floats(h, a)
    return _p.owens_t_p.bind(h, a)
