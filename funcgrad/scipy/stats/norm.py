"""The normal distribution (``jax.scipy.stats.norm``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._common import LOG_2PI, promote
from funcgrad.typing import ArrayLike

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log density of N(loc, scale**2) at ``x`` (broadcast together).

    >>> logpdf(fnp.array([0.0, 1.0]))
    Array([-0.9189, -1.4189], dtype=float32)
    """
    x, loc, scale = promote(x, loc, scale)
    z = (x - loc) / scale
    return -0.5 * z * z - fnp.log(scale) - 0.5 * LOG_2PI


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Density of N(loc, scale**2) at ``x``. ``>>> pdf(fnp.array([0.0]))  # [0.3989...]``"""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """CDF of N(loc, scale**2) (``ndtr``). ``>>> cdf(fnp.array([0.0]))  # [0.5]``"""
    x, loc, scale = promote(x, loc, scale)
    return special.ndtr((x - loc) / scale)


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log CDF (``log_ndtr``, accurate in the far left tail). ``>>> logcdf(fnp.array([-40.0]))``"""
    x, loc, scale = promote(x, loc, scale)
    return special.log_ndtr((x - loc) / scale)


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Survival function ``1 - cdf`` (computed as ``ndtr(-z)``). ``>>> sf(fnp.array([0.0]))  # [0.5]``"""
    x, loc, scale = promote(x, loc, scale)
    return special.ndtr((loc - x) / scale)


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log survival function (``log_ndtr(-z)``). ``>>> logsf(fnp.array([40.0]))``"""
    x, loc, scale = promote(x, loc, scale)
    return special.log_ndtr((loc - x) / scale)


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Quantile function (inverse CDF). ``>>> ppf(fnp.array([0.975]))  # [1.95996...]``"""
    q, loc, scale = promote(q, loc, scale)
    return special.ndtri(q) * scale + loc


def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Inverse survival function ``ppf(1 - q)``. ``>>> isf(fnp.array([0.025]))  # [1.95996...]``"""
    q, loc, scale = promote(q, loc, scale)
    return loc - special.ndtri(q) * scale
