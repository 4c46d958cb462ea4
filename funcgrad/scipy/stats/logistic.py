"""The logistic distribution (``jax.scipy.stats.logistic``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._common import promote
from funcgrad.typing import ArrayLike

__all__ = ["cdf", "isf", "logpdf", "pdf", "ppf", "sf"]


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """``-z - 2 log(1 + exp(-z)) - log(scale)``, computed stably. ``>>> logpdf(fnp.array([0.0]))  # [-log 4]``"""
    x, loc, scale = promote(x, loc, scale)
    a = fnp.abs((x - loc) / scale)
    return -a - 2.0 * fnp.log1p(fnp.exp(-a)) - fnp.log(scale)


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Density. ``>>> pdf(fnp.array([0.0]))  # [0.25]``"""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """CDF ``expit(z)``. ``>>> cdf(fnp.array([0.0]))  # [0.5]``"""
    x, loc, scale = promote(x, loc, scale)
    return special.expit((x - loc) / scale)


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Survival function ``expit(-z)``. ``>>> sf(fnp.array([0.0]))  # [0.5]``"""
    x, loc, scale = promote(x, loc, scale)
    return special.expit((loc - x) / scale)


def ppf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Quantile ``loc + scale * logit(q)`` (JAX names the argument ``x``). ``>>> ppf(fnp.array([0.5]))  # [0]``"""
    x, loc, scale = promote(x, loc, scale)
    return special.logit(x) * scale + loc


def isf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Inverse survival function ``loc - scale * logit(q)``. ``>>> isf(fnp.array([0.5]))  # [0]``"""
    x, loc, scale = promote(x, loc, scale)
    return loc - special.logit(x) * scale
