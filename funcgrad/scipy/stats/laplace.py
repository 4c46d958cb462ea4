"""The Laplace distribution (``jax.scipy.stats.laplace``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy.stats._common import promote
from funcgrad.typing import ArrayLike

__all__ = ["cdf", "logpdf", "pdf"]


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """``-|x - loc| / scale - log(2 scale)``. ``>>> logpdf(fnp.array([0.0]))  # [-log 2]``"""
    x, loc, scale = promote(x, loc, scale)
    return -fnp.abs((x - loc) / scale) - fnp.log(2.0 * scale)


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Density ``exp(-|x - loc| / scale) / (2 scale)``. ``>>> pdf(fnp.array([0.0]))  # [0.5]``"""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """CDF: ``exp(z) / 2`` left of loc, ``1 - exp(-z) / 2`` right. ``>>> cdf(fnp.array([0.0]))  # [0.5]``"""
    x, loc, scale = promote(x, loc, scale)
    z = (x - loc) / scale
    neg = z < 0
    half = 0.5 * fnp.exp(-fnp.abs(z))
    return fnp.where(neg, half, 1.0 - half)
