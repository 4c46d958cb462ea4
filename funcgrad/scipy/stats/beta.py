"""The beta distribution (``jax.scipy.stats.beta``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._common import INF, NAN, promote
from funcgrad.typing import ArrayLike

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """``(a-1) log z + (b-1) log(1-z) - betaln(a, b) - log(scale)`` on [0, 1]; -inf outside;
    NaN for ``a <= 0``, ``b <= 0`` or ``scale <= 0`` (as JAX).

    >>> logpdf(fnp.array([0.5]), 2.0, 2.0)   # [log 1.5]
    Array([0.4055], dtype=float32)
    """
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    z = (x - loc) / scale
    ok = fnp.logical_and(z >= 0, z <= 1)
    zs = fnp.where(ok, z, 0.5)
    val = special.xlogy(a - 1.0, zs) + special.xlog1py(b - 1.0, -zs) - special.betaln(a, b) - fnp.log(scale)
    val = fnp.where(ok, val, fnp.where(fnp.isnan(z), z, -INF))   # a NaN point stays NaN (as JAX)
    return fnp.where((a <= 0) | (b <= 0) | (scale <= 0), NAN, val)


def pdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Density. ``>>> pdf(fnp.array([0.5]), 2.0, 2.0)  # [1.5]``"""
    return fnp.exp(logpdf(x, a, b, loc, scale))


def _z(x, a, b, loc, scale):
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    z = fnp.clip((x - loc) / scale, 0.0, 1.0)
    return a, b, z


def cdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """CDF ``betainc(a, b, z)`` (differentiable in x, loc, scale; not in a, b: as JAX).

    >>> cdf(fnp.array([0.5]), 2.0, 2.0)
    Array([0.5], dtype=float32)
    """
    a, b, z = _z(x, a, b, loc, scale)
    return special.betainc(a, b, z)


def logcdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log CDF. ``>>> logcdf(fnp.array([0.5]), 2.0, 2.0)``"""
    return fnp.log(cdf(x, a, b, loc, scale))


def sf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Survival function ``betainc(b, a, 1 - z)``. ``>>> sf(fnp.array([0.5]), 2.0, 2.0)  # [0.5]``"""
    a, b, z = _z(x, a, b, loc, scale)
    return special.betainc(b, a, 1.0 - z)


def logsf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log survival function. ``>>> logsf(fnp.array([0.5]), 2.0, 2.0)``"""
    return fnp.log(sf(x, a, b, loc, scale))
