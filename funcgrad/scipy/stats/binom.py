"""The binomial distribution (``jax.scipy.stats.binom``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._common import INF, promote
from funcgrad.typing import ArrayLike

__all__ = ["logpmf", "pmf"]


def logpmf(k: Any, n: Any, p: ArrayLike, loc: ArrayLike = 0) -> Any:
    """``log C(n, k) + k log p + (n - k) log(1 - p)`` for ``0 <= k - loc < n + 1`` (JAX's support test: ``k``
    need not be an integer); -inf outside.

    >>> logpmf(fnp.array([1.0]), 2.0, 0.5)   # [log 0.5]
    Array([-0.6931], dtype=float32)
    """
    k, n, p, loc = promote(k, n, p, loc)
    inside = (k >= loc) & (k < loc + n + 1)
    y = fnp.where(inside, k - loc, 0.0)   # keeps the unchosen side (and its gradient) finite
    comb = special.gammaln(n + 1.0) - special.gammaln(y + 1.0) - special.gammaln(n - y + 1.0)
    linear = special.xlogy(y, p) + special.xlog1py(n - y, -p)
    val = fnp.where(((y == 0) & (n == 0)) | (linear == 0), 0.0, comb + linear)
    return fnp.where(inside, val, -INF)


def pmf(k: Any, n: Any, p: ArrayLike, loc: ArrayLike = 0) -> Any:
    """Probability mass. ``>>> pmf(fnp.array([1.0]), 2.0, 0.5)  # [0.5]``"""
    return fnp.exp(logpmf(k, n, p, loc))
