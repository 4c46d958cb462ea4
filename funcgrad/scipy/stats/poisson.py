"""The Poisson distribution (``jax.scipy.stats.poisson``)."""
from __future__ import annotations

from typing import Any

import numpy as np

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._common import INF, NAN, promote
from funcgrad.typing import ArrayLike

__all__ = ["cdf", "entropy", "logpmf", "pmf"]


def logpmf(k: Any, mu: Any, loc: ArrayLike = 0) -> Any:
    """``k log mu - gammaln(k + 1) - mu`` at integer ``k - loc >= 0``; -inf elsewhere.

    >>> logpmf(fnp.array([0.0, 2.0]), 2.0)
    Array([-2.       , -1.3069], dtype=float32)
    """
    k, mu, loc = promote(k, mu, loc)
    x = k - loc
    bad = fnp.logical_or(x < 0, fnp.round(k) != k)
    xs = fnp.where(bad, 0.0, x)   # keeps the unchosen side (and its gradient) finite
    return fnp.where(bad, -INF, special.xlogy(xs, mu) - special.gammaln(xs + 1.0) - mu)


def pmf(k: Any, mu: Any, loc: ArrayLike = 0) -> Any:
    """Probability mass. ``>>> pmf(fnp.array([0.0]), 2.0)  # [exp(-2)]``"""
    return fnp.exp(logpmf(k, mu, loc))


def cdf(k: Any, mu: Any, loc: ArrayLike = 0) -> Any:
    """CDF ``gammaincc(floor(k - loc) + 1, mu)`` (0 below loc). ``>>> cdf(fnp.array([0.0]), 2.0)  # [exp(-2)]``"""
    k, mu, loc = promote(k, mu, loc)
    x = k - loc
    return fnp.where(x < 0, 0.0 * mu, special.gammaincc(fnp.floor(fnp.where(x < 0, 0.0, x)) + 1.0, mu))


def entropy(mu: Any, loc: ArrayLike = 0) -> Any:
    """The entropy of Poisson(mu) (``loc`` does not change it): a sum over ``k`` below 250 for ``mu < 100``
    (static bound, as JAX), the asymptotic expansion
    ``log(2 pi e mu) / 2 - 1 / (12 mu) - 1 / (24 mu**2) - 19 / (360 mu**3)`` above
    (JAX keeps the first two terms: about 1e-6 less accurate).

    >>> entropy(fnp.array([3.0]))
    Array([1.9315], dtype=float32)
    """
    mu, loc = promote(mu, loc)
    shape = np.broadcast_shapes(mu.shape, loc.shape)
    m = fnp.reshape(mu, (1,) + mu.shape)
    k = fnp.reshape(fnp.arange(250, dtype=mu.dtype), (250,) + (1,) * mu.ndim)
    small = m < 100
    safe = fnp.where(small, m, 1.0)
    probs = fnp.exp(special.xlogy(k, safe) - special.gammaln(k + 1.0) - safe)
    series = fnp.sum(special.entr(probs), axis=0)
    big = fnp.where(mu >= 100, mu, 100.0)
    asym = (0.5 * fnp.log(2 * fnp.pi * fnp.e * big) - 1.0 / (12.0 * big) - 1.0 / (24.0 * big ** 2)
            - 19.0 / (360.0 * big ** 3))
    out = fnp.where(mu == 0, 0.0 * mu, fnp.where(mu < 100, series, asym))
    out = fnp.where(mu < 0, NAN, out)
    return fnp.broadcast_to(out, shape)
