"""The Bernoulli distribution (``jax.scipy.stats.bernoulli``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._common import INF, NAN, promote
from funcgrad.typing import ArrayLike

__all__ = ["cdf", "logpmf", "pmf", "ppf"]


def logpmf(k: Any, p: ArrayLike, loc: ArrayLike = 0) -> Any:
    """``k log p + (1 - k) log(1 - p)`` for ``0 <= k - loc <= 1`` (as JAX, not only at 0 and 1); -inf outside.

    >>> logpmf(fnp.array([0.0, 1.0]), 0.25)   # [log 0.75, log 0.25]
    Array([-0.2877, -1.3863], dtype=float32)
    """
    k, p, loc = promote(k, p, loc)
    x = k - loc
    ok = fnp.logical_and(x >= 0, x <= 1)
    return fnp.where(ok, special.xlogy(x, p) + special.xlog1py(1.0 - x, -p), -INF)


def pmf(k: Any, p: ArrayLike, loc: ArrayLike = 0) -> Any:
    """Probability mass. ``>>> pmf(fnp.array([1.0]), 0.25)  # [0.25]``"""
    return fnp.exp(logpmf(k, p, loc))


def cdf(k: Any, p: ArrayLike) -> Any:
    """CDF: 0 below 0, ``1 - p`` on [0, 1), 1 from 1 on; NaN for ``p`` outside [0, 1].

    >>> cdf(fnp.array([0.5]), 0.25)
    Array([0.75], dtype=float32)
    """
    k, p = promote(k, p)
    invalid = fnp.isnan(k) | fnp.isnan(p) | (p < 0) | (p > 1)
    return fnp.where(invalid, NAN, fnp.where(k < 0, 0.0 * p, fnp.where(k < 1, 1.0 - p, 0.0 * p + 1.0)))


def ppf(q: ArrayLike, p: ArrayLike) -> Any:
    """Quantile: 0 for ``q <= 1 - p``, else 1; NaN for ``q`` or ``p`` outside [0, 1]
    (ppf(0) is 0, as JAX; scipy gives -1).

    >>> ppf(fnp.array([0.5, 0.9]), 0.25)
    Array([0., 1.], dtype=float32)
    """
    q, p = promote(q, p)
    ok = (q >= 0) & (q <= 1) & (p >= 0) & (p <= 1)
    return fnp.where(ok, (q > 1.0 - p).astype(q.dtype), NAN)
