"""The gamma distribution (``jax.scipy.stats.gamma``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._common import INF, promote
from funcgrad.typing import ArrayLike

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """``(a-1) log z - z - gammaln(a) - log(scale)`` for ``z = (x - loc) / scale >= 0``; -inf below.

    >>> logpdf(fnp.array([1.0]), 2.0)
    Array([-1.], dtype=float32)
    """
    x, a, loc, scale = promote(x, a, loc, scale)
    z = (x - loc) / scale
    ok = z >= 0
    zs = fnp.where(ok, z, 1.0)
    val = special.xlogy(a - 1.0, zs) - zs - special.gammaln(a) - fnp.log(scale)
    return fnp.where(ok, val, -INF)


def pdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Density. ``>>> pdf(fnp.array([1.0]), 1.0)  # [exp(-1)]``"""
    return fnp.exp(logpdf(x, a, loc, scale))


def _z(x, a, loc, scale):
    x, a, loc, scale = promote(x, a, loc, scale)
    z = (x - loc) / scale
    return a, fnp.where(z < 0, fnp.zeros_like(z), z)


def cdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """CDF ``gammainc(a, z)`` (differentiable in x, a, loc, scale). ``>>> cdf(fnp.array([1.0]), 1.0)``"""
    a, z = _z(x, a, loc, scale)
    return special.gammainc(a, z)


def logcdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log CDF. ``>>> logcdf(fnp.array([1.0]), 1.0)``"""
    return fnp.log(cdf(x, a, loc, scale))


def sf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Survival function ``gammaincc(a, z)``. ``>>> sf(fnp.array([1.0]), 1.0)  # [exp(-1)]``"""
    x, a, loc, scale = promote(x, a, loc, scale)
    z = (x - loc) / scale
    below = z < 0
    return fnp.where(below, fnp.ones_like(z), special.gammaincc(a, fnp.where(below, 0.0, z)))


def logsf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log survival function. ``>>> logsf(fnp.array([1.0]), 1.0)  # [-1]``"""
    return fnp.log(sf(x, a, loc, scale))
