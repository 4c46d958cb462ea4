"""The uniform distribution on [loc, loc + scale] (``jax.scipy.stats.uniform``).

Invalid parameters (``scale <= 0``) give NaN, as scipy (JAX returns whatever its formulas give there).
"""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy.stats._common import INF, NAN, promote
from funcgrad.typing import ArrayLike

__all__ = ["cdf", "logpdf", "pdf", "ppf"]


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """``-log(scale)`` on [loc, loc + scale] (both ends included), -inf outside.

    >>> logpdf(fnp.array([0.5, 2.0]))   # [0, -inf]
    Array([ -0., -inf], dtype=float32)
    """
    x, loc, scale = promote(x, loc, scale)
    inside = fnp.logical_and(x >= loc, x <= loc + scale)
    # a NaN point gives NaN (as scipy; JAX's support test lets it through as -log(scale))
    val = fnp.where(inside, -fnp.log(fnp.where(scale > 0, scale, 1.0)), fnp.where(fnp.isnan(x), x, -INF))
    return fnp.where(scale > 0, val, NAN)    # scale <= 0 is invalid: NaN (as scipy)


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Density: ``1 / scale`` on [loc, loc + scale]. ``>>> pdf(fnp.array([0.5]))  # [1]``"""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """CDF ``clip((x - loc) / scale, 0, 1)``. ``>>> cdf(fnp.array([0.25]))  # [0.25]``"""
    x, loc, scale = promote(x, loc, scale)
    z = (x - loc) / fnp.where(scale > 0, scale, 1.0)
    return fnp.where(scale > 0, fnp.where(z < 0, fnp.zeros_like(z), fnp.where(z > 1, fnp.ones_like(z), z)), NAN)


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Quantile ``loc + q * scale`` for q in [0, 1], NaN outside. ``>>> ppf(fnp.array([0.5]))  # [0.5]``"""
    q, loc, scale = promote(q, loc, scale)
    return fnp.where(fnp.logical_and(fnp.logical_and(q >= 0, q <= 1), scale > 0), loc + q * scale, NAN)
