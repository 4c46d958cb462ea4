"""The negative binomial distribution (``jax.scipy.stats.nbinom``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._common import INF, promote
from funcgrad.typing import ArrayLike

__all__ = ["logpmf", "pmf"]


def logpmf(k: Any, n: Any, p: ArrayLike, loc: ArrayLike = 0) -> Any:
    """``gammaln(k + n) - gammaln(n) - gammaln(k + 1) + n log p + k log(1 - p)`` for ``k >= loc``; -inf below.

    >>> logpmf(fnp.array([0.0]), 2.0, 0.5)   # [2 log 0.5]
    Array([-1.3863], dtype=float32)
    """
    k, n, p, loc = promote(k, n, p, loc)
    y = k - loc
    comb = special.gammaln(y + n) - special.gammaln(n) - special.gammaln(y + 1.0)
    return fnp.where(k < loc, -INF, comb + special.xlogy(n, p) + special.xlogy(y, 1.0 - p))


def pmf(k: Any, n: Any, p: ArrayLike, loc: ArrayLike = 0) -> Any:
    """Probability mass. ``>>> pmf(fnp.array([0.0]), 2.0, 0.5)  # [0.25]``"""
    return fnp.exp(logpmf(k, n, p, loc))
