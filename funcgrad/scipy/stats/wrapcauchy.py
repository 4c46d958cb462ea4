"""The wrapped Cauchy distribution (``jax.scipy.stats.wrapcauchy``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy.stats._common import INF, LOG_2PI, NAN, promote
from funcgrad.typing import ArrayLike

__all__ = ["logpdf", "pdf"]


def logpdf(x: ArrayLike, c: Any) -> Any:
    """``log((1 - c**2) / (2 pi (1 + c**2 - 2 c cos x)))`` on [0, 2 pi]; -inf outside; NaN unless 0 < c < 1.

    >>> logpdf(fnp.array([0.0]), 0.5)
    Array([-0.7393], dtype=float32)
    """
    x, c = promote(x, c)
    val = fnp.log(1.0 - c * c) - LOG_2PI - fnp.log(1.0 + c * c - 2.0 * c * fnp.cos(x))
    inside = fnp.logical_and(x >= 0, x <= 2 * fnp.pi)
    return fnp.where(fnp.logical_and(c > 0, c < 1), fnp.where(inside, val, -INF), NAN)


def pdf(x: ArrayLike, c: Any) -> Any:
    """Density. ``>>> pdf(fnp.array([0.0]), 0.5)``"""
    return fnp.exp(logpdf(x, c))
