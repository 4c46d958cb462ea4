"""The Dirichlet distribution (``jax.scipy.stats.dirichlet``)."""
from __future__ import annotations

from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._common import INF, promote
from funcgrad.typing import ArrayLike

__all__ = ["logpdf", "pdf"]


def logpdf(x: ArrayLike, alpha: Any) -> Any:
    """Log density at ``x`` of shape ``(K, ...)`` (or ``(K - 1, ...)``: the last component is ``1 - sum``),
    for ``alpha`` of shape ``(K,)``, as scipy; -inf off the simplex (tolerance 1e-6, as JAX).

    >>> logpdf(fnp.array([0.2, 0.8]), fnp.array([1.0, 2.0]))   # [log 1.6]
    Array(0.4700, dtype=float32)
    """
    x, alpha = promote(x, alpha, broadcast=False)
    if alpha.ndim != 1:
        raise ValueError(f"dirichlet.logpdf: `alpha` must be one-dimensional; got alpha.shape={alpha.shape}")
    K = alpha.shape[0]
    if x.ndim == 0 or x.shape[0] not in (K, K - 1):
        raise ValueError("dirichlet.logpdf: `x` must have either the same number of entries as `alpha` or one "
                         f"entry fewer; got x.shape={x.shape}, alpha.shape={alpha.shape}")
    if x.shape[0] != K:
        x = fnp.concatenate([x, 1.0 - fnp.sum(x, axis=0, keepdims=True)], axis=0)
    normalize = fnp.sum(special.gammaln(alpha)) - special.gammaln(fnp.sum(alpha))
    a = fnp.reshape(alpha, (K,) + (1,) * (x.ndim - 1))
    log_probs = fnp.sum(special.xlogy(a - 1.0, x), axis=0) - normalize
    simplex = fnp.logical_and(fnp.min(x, axis=0) > 0, fnp.abs(fnp.sum(x, axis=0) - 1.0) < 1e-6)
    return fnp.where(simplex, log_probs, -INF)


def pdf(x: ArrayLike, alpha: Any) -> Any:
    """Density. ``>>> pdf(fnp.array([0.2, 0.8]), fnp.array([1.0, 2.0]))  # [1.6]``"""
    return fnp.exp(logpdf(x, alpha))
