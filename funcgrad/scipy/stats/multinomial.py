"""The multinomial distribution (``jax.scipy.stats.multinomial``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._common import INF, promote

from funcgrad.numpy._base import arr
from funcgrad.typing import ArrayLike

__all__ = ["logpmf", "pmf"]


def logpmf(x: ArrayLike, n: Any, p: ArrayLike) -> Any:
    """Log mass of counts ``x`` (integer, last axis the categories) for ``n`` trials (integer) and
    probabilities ``p``; -inf where ``sum(x) != n``.

    >>> logpmf(fnp.array([1, 2]), 3, fnp.array([0.5, 0.5]))   # [log 3/8]
    Array(-0.9808, dtype=float32)
    """
    x, n = arr(x), arr(n)
    if x.dtype.kind not in "iu" or n.dtype.kind not in "iu":
        raise ValueError(f"multinomial.logpmf: x and n must be of integer type; got x.dtype={x.dtype}, "
                         f"n.dtype={n.dtype}")
    (p,) = promote(p)
    xf = x.astype(p.dtype)
    nf = n.astype(p.dtype)
    val = special.gammaln(nf + 1.0) + fnp.sum(special.xlogy(xf, p) - special.gammaln(xf + 1.0), axis=-1)
    return fnp.where(fnp.sum(x, axis=-1) == n, val, -INF)


def pmf(x: ArrayLike, n: Any, p: ArrayLike) -> Any:
    """Probability mass. ``>>> pmf(fnp.array([1, 2]), 3, fnp.array([0.5, 0.5]))  # [0.375]``"""
    return fnp.exp(logpmf(x, n, p))

