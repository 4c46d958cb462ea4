"""``gaussian_kde``: Gaussian kernel density estimation (``jax.scipy.stats.gaussian_kde``)."""
from __future__ import annotations

import math
from typing import Any, Callable

import funcgrad.numpy as fnp
from funcgrad.numpy._base import arr
from funcgrad.scipy import special
from funcgrad.scipy.stats._common import LOG_2PI, cholesky_solve_logdet, promote
from funcgrad.tree_util import register_pytree_node

__all__ = ["gaussian_kde"]


def _atleast_2d(x):
    return fnp.reshape(x, (1,) * (2 - x.ndim) + x.shape) if x.ndim < 2 else x


def _inverse(cov):
    """``cov^-1`` through its Cholesky factor: row i of ``Y`` solves ``L y = e_i``, so ``Y = L^-T``
    and ``cov^-1 = L^-T L^-1 = Y Y^T``."""
    d = cov.shape[-1]
    y, _ = cholesky_solve_logdet(cov, fnp.eye(d, dtype=cov.dtype))
    return fnp.matmul(y, fnp.transpose(y))


class gaussian_kde:  # noqa: N801 - scipy's and JAX's name
    """A Gaussian kernel density estimate of ``dataset`` (shape ``(d, n)``: n points in d dimensions;
    a 1-d array is n points in 1 dimension), as scipy/JAX.

    ``bw_method``: ``'scott'`` (default), ``'silverman'``, a scalar factor, or a callable of the
    estimator returning the factor. ``weights``: one per point (normalised here).

    A pytree (its arrays are leaves), so it passes through jit, vmap and grad. ``resample`` is not
    provided (it needs ``funcgrad.random``: draw ``dataset[:, choice] + multivariate normal`` there),
    and, as in JAX, ``integrate_box`` and ``set_bandwidth`` raise NotImplementedError.

    >>> kde = gaussian_kde(fnp.array([0.0, 1.0, 3.0]))
    >>> kde.evaluate(fnp.array([0.5, 2.0]))
    Array([0.2132, 0.1842], dtype=float32)
    """

    __slots__ = ("neff", "dataset", "weights", "covariance", "inv_cov")

    def __init__(self, dataset: Any, bw_method: str | float | Callable | None = None, weights: Any = None):
        dataset = _atleast_2d(arr(dataset))
        if not dataset.size > 1:
            raise ValueError("gaussian_kde: `dataset` input should have multiple elements.")
        d, n = dataset.shape
        if weights is not None:
            dataset, weights = promote(dataset, weights, broadcast=False)
            weights = fnp.reshape(weights, (1,)) if weights.ndim == 0 else weights
            if weights.ndim != 1:
                raise ValueError("gaussian_kde: `weights` input should be one-dimensional.")
            if weights.shape[0] != n:
                raise ValueError(f"gaussian_kde: `weights` input should be of length n = {n}, got {weights.shape[0]}")
            weights = weights / fnp.sum(weights)
        else:
            (dataset,) = promote(dataset)
            weights = fnp.full((n,), 1.0 / n, dtype=dataset.dtype)
        self._set("dataset", dataset)
        self._set("weights", weights)
        neff = self._set("neff", 1.0 / fnp.sum(weights ** 2))
        bw_method = "scott" if bw_method is None else bw_method
        if isinstance(bw_method, str) and bw_method == "scott":
            factor = neff ** (-1.0 / (d + 4))
        elif isinstance(bw_method, str) and bw_method == "silverman":
            factor = (neff * (d + 2) / 4.0) ** (-1.0 / (d + 4))
        elif isinstance(bw_method, (int, float)) and not isinstance(bw_method, bool):
            factor = bw_method
        elif callable(bw_method):
            factor = bw_method(self)
        else:
            raise ValueError("gaussian_kde: `bw_method` should be 'scott', 'silverman', a scalar, or a callable; "
                             f"got {bw_method!r}")
        mean = fnp.sum(dataset * weights, axis=1, keepdims=True)
        centred = dataset - mean
        # numpy.cov(dataset, aweights=weights) with normalised weights: divide by 1 - sum(w**2)
        data_cov = fnp.matmul(centred * weights, fnp.transpose(centred)) / (1.0 - fnp.sum(weights ** 2))
        self._set("covariance", data_cov * factor ** 2)
        self._set("inv_cov", _inverse(data_cov) / factor ** 2)

    def _set(self, name: str, value: Any) -> Any:
        object.__setattr__(self, name, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"gaussian_kde is immutable: cannot set {name!r}")

    @property
    def d(self) -> int:
        """The number of dimensions."""
        return self.dataset.shape[0]

    @property
    def n(self) -> int:
        """The number of data points."""
        return self.dataset.shape[1]

    def _points(self, points: Any) -> Any:
        (points,) = promote(points)
        points = _atleast_2d(points)
        d, m = points.shape
        if d != self.d:
            if d == 1 and m == self.d:
                points = fnp.reshape(points, (self.d, 1))
            else:
                raise ValueError(f"gaussian_kde: points have dimension {d}, dataset has dimension {self.d}")
        return points

    def _log_kernels(self, points: Any) -> Any:
        """``log N(point_j; data_i, covariance)``, shape (m, n)."""
        diff = fnp.transpose(points)[:, None, :] - fnp.transpose(self.dataset)[None, :, :]   # (m, n, d)
        y, logdet = cholesky_solve_logdet(self.covariance, diff)
        return -0.5 * fnp.sum(y * y, axis=-1) - logdet - 0.5 * self.d * LOG_2PI

    def evaluate(self, points: Any) -> Any:
        """The estimated density at ``points`` (shape ``(d, m)``, or ``(m,)`` for d = 1): shape ``(m,)``.

        >>> gaussian_kde(fnp.array([0.0, 1.0, 3.0])).evaluate(fnp.array([0.5]))
        Array([0.2132], dtype=float32)
        """
        return fnp.sum(fnp.exp(self._log_kernels(self._points(points))) * self.weights, axis=1)

    __call__ = evaluate

    def pdf(self, x: Any) -> Any:
        """The estimated density at ``x`` (same as ``evaluate``)."""
        return self.evaluate(x)

    def logpdf(self, x: Any) -> Any:
        """The log of the estimated density at ``x``, computed with logsumexp (accurate far from the data).

        >>> gaussian_kde(fnp.array([0.0, 1.0, 3.0])).logpdf(fnp.array([50.0]))
        Array([-736.7985], dtype=float32)
        """
        return special.logsumexp(self._log_kernels(self._points(x)) + fnp.log(self.weights), axis=1)

    def _convolve(self, cov: Any, target: Any, weights: Any, mean: Any) -> Any:
        """``sum_i weights_i N(mean; target_i, cov)``."""
        diff = fnp.transpose(target) - mean                                 # (n, d)
        y, logdet = cholesky_solve_logdet(cov, diff)
        norm = fnp.exp(-logdet) / math.sqrt(2 * math.pi) ** self.d
        return norm * fnp.sum(fnp.exp(-0.5 * fnp.sum(y * y, axis=-1)) * weights)

    def integrate_gaussian(self, mean: Any, cov: Any) -> Any:
        """The integral of the estimate times the Gaussian N(mean, cov).

        >>> gaussian_kde(fnp.array([0.0, 1.0, 3.0])).integrate_gaussian(fnp.array([0.0]), fnp.array([[1.0]]))
        Array(0.1668, dtype=float32)
        """
        mean, cov = promote(mean, cov, broadcast=False)
        mean = fnp.reshape(mean, (mean.size,))
        cov = _atleast_2d(cov)
        if mean.shape != (self.d,):
            raise ValueError(f"gaussian_kde.integrate_gaussian: mean does not have dimension {self.d}")
        if cov.shape != (self.d, self.d):
            raise ValueError(f"gaussian_kde.integrate_gaussian: covariance does not have dimension {self.d}")
        return self._convolve(self.covariance + cov, self.dataset, self.weights, mean)

    def integrate_box_1d(self, low: Any, high: Any) -> Any:
        """The integral of a 1-d estimate over [low, high].

        >>> gaussian_kde(fnp.array([0.0, 1.0, 3.0])).integrate_box_1d(-1.0, 1.0)
        Array(0.3616, dtype=float32)
        """
        if self.d != 1:
            raise ValueError("gaussian_kde.integrate_box_1d() only handles 1D pdfs")
        if fnp.ndim(low) != 0 or fnp.ndim(high) != 0:
            raise ValueError("gaussian_kde.integrate_box_1d: the limits of integration must be scalars")
        sigma = fnp.sqrt(self.covariance[0, 0])
        lo = (low - self.dataset[0]) / sigma
        hi = (high - self.dataset[0]) / sigma
        return fnp.sum(self.weights * (special.ndtr(hi) - special.ndtr(lo)))

    def integrate_kde(self, other: "gaussian_kde") -> Any:
        """The integral of the product of this estimate and ``other``."""
        if other.d != self.d:
            raise ValueError("gaussian_kde.integrate_kde: KDEs are not the same dimensionality")
        cov = self.covariance + other.covariance
        diff = fnp.transpose(self.dataset)[:, None, :] - fnp.transpose(other.dataset)[None, :, :]
        y, logdet = cholesky_solve_logdet(cov, diff)
        norm = fnp.exp(-logdet) / math.sqrt(2 * math.pi) ** self.d
        pair = fnp.exp(-0.5 * fnp.sum(y * y, axis=-1)) * self.weights[:, None] * other.weights[None, :]
        return norm * fnp.sum(pair)

    def resample(self, key: Any, shape: tuple = ()) -> Any:
        """Not provided: it needs funcgrad.random, which funcgrad.scipy does not import (layering)."""
        raise NotImplementedError(
            "gaussian_kde.resample is not provided in funcgrad; sample with funcgrad.random instead: "
            "idx = random.choice(k1, kde.n, shape, p=kde.weights); "
            "kde.dataset[:, idx] + random.multivariate_normal(k2, zeros(kde.d), kde.covariance, shape).T")

    def integrate_box(self, low_bounds: Any, high_bounds: Any, maxpts: Any = None) -> Any:
        """Not supported (as JAX): use ``integrate_box_1d``."""
        raise NotImplementedError("only 1D box integrations are supported; use `integrate_box_1d`")

    def set_bandwidth(self, bw_method: Any = None) -> None:
        """Not supported (as JAX): build a new estimator with the bandwidth."""
        raise NotImplementedError("dynamically changing the bandwidth method is not supported")


def _flatten(kde: gaussian_kde):
    return (kde.neff, kde.dataset, kde.weights, kde.covariance, kde.inv_cov), None


def _unflatten(aux: Any, children: Any) -> gaussian_kde:
    kde = object.__new__(gaussian_kde)
    for name, value in zip(gaussian_kde.__slots__, children):
        object.__setattr__(kde, name, value)
    return kde


register_pytree_node(gaussian_kde, _flatten, _unflatten)
