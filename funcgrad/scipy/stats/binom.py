"""The binomial distribution (``jax.scipy.stats.binom``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._common import INF, promote

__all__ = ["logpmf", "pmf"]


def logpmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    """``log C(n, k) + k log p + (n - k) log(1 - p)`` for ``0 <= k - loc <= n`` (k need not be an integer, as
    JAX); -inf outside.

    >>> logpmf(fnp.array([1.0]), 2.0, 0.5)   # [log 0.5]
    """
    k, n, p, loc = promote(k, n, p, loc)
    y = k - loc
    comb = special.gammaln(n + 1.0) - special.gammaln(y + 1.0) - special.gammaln(n - y + 1.0)
    val = comb + special.xlogy(y, p) + special.xlog1py(n - y, -p)
    return fnp.where(fnp.logical_and(y >= 0, y <= n), val, -INF)


def pmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    """Probability mass. ``>>> pmf(fnp.array([1.0]), 2.0, 0.5)  # [0.5]``"""
    return fnp.exp(logpmf(k, n, p, loc))
