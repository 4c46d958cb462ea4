"""The generalized normal distribution (``jax.scipy.stats.gennorm``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._common import promote
from funcgrad.typing import ArrayLike

__all__ = ["cdf", "logpdf", "pdf"]


def logpdf(x: ArrayLike, beta: Any) -> Any:
    """``log(beta / 2) - gammaln(1 / beta) - |x|**beta``. ``>>> logpdf(fnp.array([0.0]), 2.0)``"""
    x, beta = promote(x, beta)
    return fnp.log(0.5 * beta) - special.gammaln(1.0 / beta) - fnp.abs(x) ** beta


def pdf(x: ArrayLike, beta: Any) -> Any:
    """Density. ``>>> pdf(fnp.array([0.0]), 2.0)  # [1 / sqrt(pi)]``"""
    return fnp.exp(logpdf(x, beta))


def cdf(x: ArrayLike, beta: Any) -> Any:
    """CDF ``(1 + sign(x) gammainc(1 / beta, |x|**beta)) / 2`` (second derivative in beta unsupported).

    >>> cdf(fnp.array([0.0]), 2.0)
    Array([0.5], dtype=float32)
    """
    x, beta = promote(x, beta)
    return 0.5 * (1.0 + fnp.sign(x) * special.gammainc(1.0 / beta, fnp.abs(x) ** beta))
