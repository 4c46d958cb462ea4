"""The von Mises distribution (``jax.scipy.stats.vonmises``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._common import LOG_2PI, NAN, promote
from funcgrad.typing import ArrayLike

__all__ = ["logpdf", "pdf"]


def logpdf(x: ArrayLike, kappa: Any) -> Any:
    """``kappa (cos x - 1) - log(2 pi i0e(kappa))`` (periodic in ``x``, as JAX); NaN for ``kappa <= 0``.

    >>> logpdf(fnp.array([0.0]), 1.0)
    Array([-1.0738], dtype=float32)
    """
    x, kappa = promote(x, kappa)
    return fnp.where(kappa > 0, kappa * (fnp.cos(x) - 1.0) - LOG_2PI - fnp.log(special.i0e(kappa)), NAN)


def pdf(x: ArrayLike, kappa: Any) -> Any:
    """Density. ``>>> pdf(fnp.array([0.0]), 1.0)``"""
    return fnp.exp(logpdf(x, kappa))
