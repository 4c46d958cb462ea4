"""The beta-binomial distribution (``jax.scipy.stats.betabinom``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._common import INF, NAN, promote
from funcgrad.typing import ArrayLike

__all__ = ["logpmf", "pmf"]


def logpmf(k: Any, n: Any, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0) -> Any:
    """Log mass at ``y = floor(k) - loc`` in [0, n]: ``-log(n + 1) - betaln(n - y + 1, y + 1) + betaln(y + a,
    n - y + b) - betaln(a, b)``; -inf outside; NaN for ``n < 0``, ``a <= 0`` or ``b <= 0``.

    >>> logpmf(fnp.array([1.0]), 2.0, 1.0, 1.0)   # [log 1/3]
    Array([-1.0986], dtype=float32)
    """
    k, n, a, b, loc = promote(k, n, a, b, loc)
    y = fnp.floor(k) - loc
    combiln = -(fnp.log1p(n) + special.betaln(n - y + 1.0, y + 1.0))
    val = combiln + special.betaln(y + a, n - y + b) - special.betaln(a, b)
    val = fnp.where(fnp.logical_and(y == 0, n == 0), 0.0, val)
    out = fnp.logical_or(fnp.logical_or(y < -loc, y > n), y + a <= 0)
    val = fnp.where(out, -INF, val)
    return fnp.where(fnp.logical_or(fnp.logical_or(n < 0, a <= 0), b <= 0), NAN, val)


def pmf(k: Any, n: Any, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0) -> Any:
    """Probability mass. ``>>> pmf(fnp.array([1.0]), 2.0, 1.0, 1.0)  # [1/3]``"""
    return fnp.exp(logpmf(k, n, a, b, loc))
