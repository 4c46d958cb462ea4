"""The multivariate normal distribution (``jax.scipy.stats.multivariate_normal``)."""
from __future__ import annotations

from typing import Any

import numpy as np

import funcgrad.numpy as fnp
from funcgrad.scipy.stats._common import LOG_2PI, cholesky_solve_logdet, promote
from funcgrad.typing import ArrayLike

__all__ = ["logpdf", "pdf"]


def logpdf(x: ArrayLike, mean: Any, cov: Any, allow_singular: None = None) -> Any:
    """Log density of N(mean, cov) at ``x`` (last axis the dimension; batched over leading axes).

    A scalar ``mean`` gives the univariate normal with variance ``cov``; a scalar ``cov`` means
    ``cov * I``. ``allow_singular`` raises NotImplementedError unless None (as JAX).

    >>> logpdf(fnp.zeros(2), fnp.zeros(2), fnp.eye(2))   # -log(2 pi)
    Array(-1.8379, dtype=float32)
    """
    if allow_singular is not None:
        raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf")
    x, mean, cov = promote(x, mean, cov, broadcast=False)
    if not mean.shape:
        return -0.5 * (x - mean) ** 2 / cov - 0.5 * (LOG_2PI + fnp.log(cov))
    n = mean.shape[-1]
    if not cov.shape:
        y = x - mean
        return -0.5 * fnp.sum(y * y, axis=-1) / cov - n / 2 * (LOG_2PI + fnp.log(cov))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal.logpdf got incompatible shapes: mean {mean.shape}, cov {cov.shape}; "
                         f"cov must be a scalar or end in ({n}, {n})")
    r = x - mean
    lead = np.broadcast_shapes(r.shape[:-1], cov.shape[:-2])
    r = fnp.broadcast_to(r, lead + (n,))
    y, logdet = cholesky_solve_logdet(cov, r)
    return -0.5 * fnp.sum(y * y, axis=-1) - n / 2 * LOG_2PI - logdet


def pdf(x: ArrayLike, mean: Any, cov: Any) -> Any:
    """Density. ``>>> pdf(fnp.zeros(2), fnp.zeros(2), fnp.eye(2))  # 1 / (2 pi)``"""
    return fnp.exp(logpdf(x, mean, cov))
