"""The chi-squared distribution (``jax.scipy.stats.chi2``): gamma(df / 2, scale 2)."""
from __future__ import annotations

from typing import Any

from funcgrad.scipy.stats._common import promote

from funcgrad.scipy.stats import gamma as _gamma
from funcgrad.typing import ArrayLike

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def _args(x, df, loc, scale):
    x, df, loc, scale = promote(x, df, loc, scale)
    return x, df * 0.5, loc, scale * 2.0


def logpdf(x: ArrayLike, df: Any, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log density of chi-squared with ``df`` degrees of freedom. ``>>> logpdf(fnp.array([1.0]), 2.0)``"""
    return _gamma.logpdf(*_args(x, df, loc, scale))


def pdf(x: ArrayLike, df: Any, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Density. ``>>> pdf(fnp.array([1.0]), 2.0)  # [exp(-1/2) / 2]``"""
    return _gamma.pdf(*_args(x, df, loc, scale))


def cdf(x: ArrayLike, df: Any, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """CDF. ``>>> cdf(fnp.array([1.0]), 2.0)``"""
    return _gamma.cdf(*_args(x, df, loc, scale))


def logcdf(x: ArrayLike, df: Any, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log CDF. ``>>> logcdf(fnp.array([1.0]), 2.0)``"""
    return _gamma.logcdf(*_args(x, df, loc, scale))


def sf(x: ArrayLike, df: Any, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Survival function. ``>>> sf(fnp.array([1.0]), 2.0)``"""
    return _gamma.sf(*_args(x, df, loc, scale))


def logsf(x: ArrayLike, df: Any, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log survival function. ``>>> logsf(fnp.array([1.0]), 2.0)``"""
    return _gamma.logsf(*_args(x, df, loc, scale))
