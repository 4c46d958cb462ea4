"""The right-skewed Gumbel distribution (``jax.scipy.stats.gumbel_r``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy.stats._common import NAN, promote
from funcgrad.typing import ArrayLike

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _z(x, loc, scale):
    x, loc, scale = promote(x, loc, scale)
    return (x - loc) / fnp.where(scale > 0, scale, NAN), scale   # NaN for scale <= 0, as JAX


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """``-z - exp(-z) - log(scale)``. ``>>> logpdf(fnp.array([0.0]))  # [-1]``"""
    z, scale = _z(x, loc, scale)
    return -z - fnp.exp(-z) - fnp.log(scale)


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Density. ``>>> pdf(fnp.array([0.0]))  # [exp(-1)]``"""
    return fnp.exp(logpdf(x, loc, scale))


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log CDF ``-exp(-z)``. ``>>> logcdf(fnp.array([0.0]))  # [-1]``"""
    z, _ = _z(x, loc, scale)
    return -fnp.exp(-z)


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """CDF ``exp(-exp(-z))``. ``>>> cdf(fnp.array([0.0]))``"""
    return fnp.exp(logcdf(x, loc, scale))


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Survival function ``1 - exp(-exp(-z))``. ``>>> sf(fnp.array([0.0]))``"""
    return -fnp.expm1(logcdf(x, loc, scale))


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log survival function. ``>>> logsf(fnp.array([0.0]))``"""
    return fnp.log(sf(x, loc, scale))


def ppf(p: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Quantile ``loc - scale log(-log p)``; NaN outside (0, 1) (as JAX). ``>>> ppf(fnp.array([0.5]))``"""
    p, loc, scale = promote(p, loc, scale)
    ok = fnp.logical_and(p > 0, p < 1)
    return fnp.where(ok, loc - scale * fnp.log(-fnp.log(p)), NAN)
