"""The truncated normal distribution on [a, b] in standard units (``jax.scipy.stats.truncnorm``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._common import INF, NAN, promote

from funcgrad.scipy.stats import norm as _norm
from funcgrad.typing import ArrayLike

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def _log_diff(x, y):
    """``log(exp(x) - exp(y))`` for ``x >= y``."""
    return x + fnp.log(-fnp.expm1(fnp.where(x == -INF, 0.0, y - x))) + fnp.where(x == -INF, x, 0.0)


def _log_gauss_mass(a, b):
    """``log(ndtr(b) - ndtr(a))``, computed in the tail that keeps it accurate."""
    a, b = fnp.broadcast_arrays(a, b)
    left, right = b <= 0, a > 0
    central = fnp.logical_not(fnp.logical_or(left, right))
    a_tail = fnp.where(right, -b, a)
    b_tail = fnp.where(right, -a, b)
    mass_tail = _log_diff(special.log_ndtr(b_tail), special.log_ndtr(a_tail))
    a_mid = fnp.where(central, a, -1.0)   # keeps the unchosen side (and its gradient) finite
    b_mid = fnp.where(central, b, 1.0)
    mass_central = fnp.log1p(-special.ndtr(a_mid) - special.ndtr(-b_mid))
    return fnp.where(central, mass_central, mass_tail)


def logpdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Normal log density renormalised to [a, b] (standard units); -inf outside, NaN if ``a >= b``.

    >>> logpdf(fnp.array([0.0]), -1.0, 1.0)
    Array([-0.5372], dtype=float32)
    """
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    val = _norm.logpdf(x, loc, scale) - _log_gauss_mass(a, b)
    z = (x - loc) / scale
    val = fnp.where(fnp.logical_or(z < a, z > b), -INF, val)
    return fnp.where(a >= b, NAN, val)


def pdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Density. ``>>> pdf(fnp.array([0.0]), -1.0, 1.0)``"""
    return fnp.exp(logpdf(x, a, b, loc, scale))


def logcdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log CDF. ``>>> logcdf(fnp.array([0.0]), -1.0, 1.0)  # [log 0.5]``"""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    x, a, b = fnp.broadcast_arrays(x, a, b)
    z = (x - loc) / scale
    zc = fnp.clip(z, a, b)
    lgm_ab = _log_gauss_mass(a, b)
    lcdf = _log_gauss_mass(a, zc) - lgm_ab
    lsf = _log_gauss_mass(zc, b) - lgm_ab
    out = fnp.where(lcdf > -0.1, fnp.log1p(-fnp.exp(lsf)), lcdf)
    out = fnp.where(z >= b, 0.0, fnp.where(z <= a, -INF, out))
    return fnp.where(a >= b, NAN, out)


def cdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """CDF. ``>>> cdf(fnp.array([0.0]), -1.0, 1.0)  # [0.5]``"""
    return fnp.exp(logcdf(x, a, b, loc, scale))


def logsf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log survival function (the log CDF of the mirrored distribution). ``>>> logsf(fnp.array([0.0]), -1.0, 1.0)``"""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    return logcdf(-x, -b, -a, -loc, scale)


def sf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Survival function. ``>>> sf(fnp.array([0.0]), -1.0, 1.0)  # [0.5]``"""
    return fnp.exp(logsf(x, a, b, loc, scale))
