"""The exponential distribution (``jax.scipy.stats.expon``).

Invalid parameters (``scale <= 0``) give NaN, as scipy (JAX returns whatever its formulas give there).
"""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy.stats._common import INF, NAN, promote
from funcgrad.typing import ArrayLike

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _z(x, loc, scale):
    x, loc, scale = promote(x, loc, scale)
    z = (x - loc) / scale
    return z, fnp.where(z < 0, fnp.zeros_like(z), z), scale


def _valid(scale, value):
    """``value``, NaN where ``scale <= 0`` (an invalid parameter, as scipy)."""
    return fnp.where(scale > 0, value, NAN)


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """``-z - log(scale)`` for ``z = (x - loc) / scale >= 0``, -inf below.

    >>> logpdf(fnp.array([1.0]))
    Array([-1.], dtype=float32)
    """
    z, zs, scale = _z(x, loc, scale)
    return _valid(scale, fnp.where(z < 0, -INF, -zs - fnp.log(fnp.where(scale > 0, scale, 1.0))))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Density ``exp(-z) / scale``. ``>>> pdf(fnp.array([0.0]))  # [1]``"""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """CDF ``1 - exp(-z)`` (0 below loc). ``>>> cdf(fnp.array([1.0]))``"""
    z, zs, scale = _z(x, loc, scale)
    return _valid(scale, -fnp.expm1(-zs))


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log CDF ``log(1 - exp(-z))`` (-inf below loc). ``>>> logcdf(fnp.array([1.0]))``"""
    z, zs, scale = _z(x, loc, scale)
    return _valid(scale, fnp.where(z <= 0, -INF, fnp.log(-fnp.expm1(-fnp.where(z <= 0, 1.0, zs)))))


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Survival function ``exp(-z)`` (1 below loc). ``>>> sf(fnp.array([1.0]))``"""
    z, zs, scale = _z(x, loc, scale)
    return _valid(scale, fnp.exp(-zs))


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log survival function ``-z`` (0 below loc). ``>>> logsf(fnp.array([1.0]))  # [-1]``"""
    z, zs, scale = _z(x, loc, scale)
    return _valid(scale, -zs)


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Quantile ``loc - scale * log(1 - q)``; NaN outside [0, 1]. ``>>> ppf(fnp.array([0.5]))  # [log 2]``"""
    q, loc, scale = promote(q, loc, scale)
    return _valid(scale, fnp.where(fnp.logical_and(q >= 0, q <= 1), loc - scale * fnp.log1p(-q), NAN))
