"""Student's t distribution (``jax.scipy.stats.t``)."""
from __future__ import annotations

import math
from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._common import promote
from funcgrad.typing import ArrayLike

__all__ = ["logpdf", "pdf"]


def logpdf(x: ArrayLike, df: Any, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Log density of Student's t with ``df`` degrees of freedom (differentiable in all arguments).

    >>> logpdf(fnp.array([0.0]), 3.0)
    Array([-1.0009], dtype=float32)
    """
    x, df, loc, scale = promote(x, df, loc, scale)
    z = (x - loc) / scale
    half = 0.5 * (df + 1.0)
    return (special.gammaln(half) - special.gammaln(0.5 * df) - 0.5 * fnp.log(df * math.pi) - fnp.log(scale)
            - half * fnp.log1p(z * z / df))


def pdf(x: ArrayLike, df: Any, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    """Density of Student's t. ``>>> pdf(fnp.array([0.0]), 1.0)  # [1 / pi]``"""
    return fnp.exp(logpdf(x, df, loc, scale))
