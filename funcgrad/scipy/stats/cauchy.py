"""The Cauchy distribution (``jax.scipy.stats.cauchy``)."""
from __future__ import annotations

import math
from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy.stats._common import promote
from funcgrad.typing import ArrayLike

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """``-log(pi scale (1 + z**2))``. ``>>> logpdf(fnp.array([0.0]))  # [-log pi]``"""
    x, loc, scale = promote(x, loc, scale)
    z = (x - loc) / scale
    return -math.log(math.pi) - fnp.log(scale) - fnp.log1p(z * z)


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Density. ``>>> pdf(fnp.array([0.0]))  # [1 / pi]``"""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """CDF ``1/2 + arctan(z) / pi``. ``>>> cdf(fnp.array([1.0]))  # [0.75]``"""
    x, loc, scale = promote(x, loc, scale)
    return 0.5 + fnp.arctan((x - loc) / scale) / math.pi


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log CDF. ``>>> logcdf(fnp.array([1.0]))``"""
    return fnp.log(cdf(x, loc, scale))


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Survival function ``1/2 - arctan(z) / pi``. ``>>> sf(fnp.array([1.0]))  # [0.25]``"""
    x, loc, scale = promote(x, loc, scale)
    return 0.5 - fnp.arctan((x - loc) / scale) / math.pi


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log survival function. ``>>> logsf(fnp.array([1.0]))``"""
    return fnp.log(sf(x, loc, scale))


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Quantile ``loc + scale tan(pi (q - 1/2))``. ``>>> ppf(fnp.array([0.75]))  # [1]``"""
    q, loc, scale = promote(q, loc, scale)
    return loc + scale * fnp.tan(math.pi * (q - 0.5))


def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Inverse survival function ``loc + scale tan(pi (1/2 - q))``. ``>>> isf(fnp.array([0.25]))  # [1]``"""
    q, loc, scale = promote(q, loc, scale)
    return loc + scale * fnp.tan(math.pi * (0.5 - q))
