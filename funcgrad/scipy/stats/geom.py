"""The geometric distribution (``jax.scipy.stats.geom``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._common import INF, promote
from funcgrad.typing import ArrayLike

__all__ = ["logpmf", "pmf"]


def logpmf(k: Any, p: ArrayLike, loc: ArrayLike = 0) -> Any:
    """``(k - 1) log(1 - p) + log p`` for ``k - loc > 0`` (JAX's support test); -inf from 0 down.

    >>> logpmf(fnp.array([1.0, 2.0]), 0.5)   # [log 0.5, log 0.25]
    Array([-0.6931, -1.3863], dtype=float32)
    """
    k, p, loc = promote(k, p, loc)
    x = k - loc
    return fnp.where(x <= 0, -INF, special.xlog1py(x - 1.0, -p) + fnp.log(p))


def pmf(k: Any, p: ArrayLike, loc: ArrayLike = 0) -> Any:
    """Probability mass. ``>>> pmf(fnp.array([2.0]), 0.5)  # [0.25]``"""
    return fnp.exp(logpmf(k, p, loc))
