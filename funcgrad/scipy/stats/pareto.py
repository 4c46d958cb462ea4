"""The Pareto distribution (``jax.scipy.stats.pareto``).

Invalid parameters (``b <= 0`` or ``scale <= 0``) give NaN, as scipy (JAX returns whatever its formulas give there).
"""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy.stats._common import INF, NAN, promote
from funcgrad.typing import ArrayLike

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _z(x, b, loc, scale):
    x, b, loc, scale = promote(x, b, loc, scale)
    z = (x - loc) / scale
    ok = fnp.logical_or(z >= 1, fnp.isnan(z))    # a NaN point stays NaN (as JAX)
    return b, z, ok, fnp.where(ok, z, 1.0), scale


def _valid(b, scale, value):
    """``value``, NaN where ``b <= 0`` or ``scale <= 0`` (invalid parameters, as scipy)."""
    return fnp.where(fnp.logical_and(b > 0, scale > 0), value, NAN)


def logpdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """``log(b) - (b + 1) log z - log(scale)`` for ``z = (x - loc) / scale >= 1``; -inf below.

    >>> logpdf(fnp.array([1.0]), 2.0)   # [log 2]
    Array([0.6931], dtype=float32)
    """
    b, z, ok, zs, scale = _z(x, b, loc, scale)
    val = fnp.where(ok, fnp.log(b) - (b + 1.0) * fnp.log(zs) - fnp.log(scale), -INF)
    return _valid(b, scale, val)


def pdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Density. ``>>> pdf(fnp.array([1.0]), 2.0)  # [2]``"""
    return fnp.exp(logpdf(x, b, loc, scale))


def logsf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log survival function ``-b log z`` (0 below 1). ``>>> logsf(fnp.array([2.0]), 2.0)  # [-log 4]``"""
    b, z, ok, zs, scale = _z(x, b, loc, scale)
    return _valid(b, scale, -b * fnp.log(zs))


def sf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Survival function ``z**-b``. ``>>> sf(fnp.array([2.0]), 2.0)  # [0.25]``"""
    return fnp.exp(logsf(x, b, loc, scale))


def cdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """CDF ``1 - z**-b``. ``>>> cdf(fnp.array([2.0]), 2.0)  # [0.75]``"""
    return -fnp.expm1(logsf(x, b, loc, scale))


def logcdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log CDF ``log1p(-z**-b)``. ``>>> logcdf(fnp.array([2.0]), 2.0)``"""
    return fnp.log1p(-sf(x, b, loc, scale))


def ppf(q: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Quantile ``loc + scale (1 - q)**(-1/b)``; NaN outside [0, 1]. ``>>> ppf(fnp.array([0.75]), 2.0)  # [2]``"""
    q, b, loc, scale = promote(q, b, loc, scale)
    ok = fnp.logical_and(q >= 0, q <= 1)
    return _valid(b, scale, fnp.where(ok, loc + scale * fnp.exp(-fnp.log1p(-q) / b), NAN))
