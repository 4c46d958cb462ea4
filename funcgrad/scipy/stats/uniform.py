"""The uniform distribution on [loc, loc + scale] (``jax.scipy.stats.uniform``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy.stats._common import INF, NAN, promote

__all__ = ["cdf", "logpdf", "pdf", "ppf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-log(scale)`` on [loc, loc + scale] (both ends included), -inf outside.

    >>> logpdf(fnp.array([0.5, 2.0]))   # [0, -inf]
    """
    x, loc, scale = promote(x, loc, scale)
    inside = fnp.logical_and(x >= loc, x <= loc + scale)
    # a NaN point gives NaN (as scipy; JAX's support test lets it through as -log(scale))
    return fnp.where(inside, -fnp.log(scale), fnp.where(fnp.isnan(x), NAN, -INF))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """Density: ``1 / scale`` on [loc, loc + scale]. ``>>> pdf(fnp.array([0.5]))  # [1]``"""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """CDF ``clip((x - loc) / scale, 0, 1)``. ``>>> cdf(fnp.array([0.25]))  # [0.25]``"""
    x, loc, scale = promote(x, loc, scale)
    z = (x - loc) / scale
    return fnp.where(z < 0, 0.0 * z, fnp.where(z > 1, 0.0 * z + 1.0, z))


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """Quantile ``loc + q * scale`` for q in [0, 1], NaN outside. ``>>> ppf(fnp.array([0.5]))  # [0.5]``"""
    q, loc, scale = promote(q, loc, scale)
    return fnp.where(fnp.logical_and(q >= 0, q <= 1), loc + q * scale, NAN)
