"""Laws that need a matrix factorization: multivariate_normal, orthogonal."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import dtypes as _dtypes
from funcgrad.core import describe
from funcgrad.dtypes import default_float_dtype
from funcgrad.lax import convert_element_type as convert
from funcgrad.random._continuous import normal
from funcgrad.random._keys import _check_broadcast, _check_key, _count, _float_dtype, _no_sharding, _shape


# --------------------------------------------------------------------------
# Laws that need a matrix factorization (funcgrad.numpy.linalg)
# --------------------------------------------------------------------------


def _linalg(name: str, fn: str) -> Any:
    func = getattr(fnp.linalg, fn, None)
    if func is None:
        raise NotImplementedError(f"random.{name} needs funcgrad.numpy.linalg.{fn}, which this build lacks")
    return func


def multivariate_normal(key: Any, mean: Any, cov: Any, shape: Sequence[int] | None = None, dtype: Any = None,
                        method: str = "cholesky", *, out_sharding: Any = None) -> Any:
    """Normal vectors with the given ``mean`` (``[..., n]``) and covariance ``cov`` (``[..., n, n]``).

    ``mean + factor @ z`` with ``z`` standard normal and ``factor`` the
    Cholesky factor (``method="cholesky"``), or ``U sqrt(S)`` from ``svd`` /
    ``eigh``.  ``shape`` is the batch shape (broadcast with the parameters').

    >>> x = random.multivariate_normal(random.key(0), fnp.zeros(2), fnp.eye(2), (5,))    # f32[5,2]
    """
    k = _check_key(key, "multivariate_normal")
    _no_sharding(out_sharding, "multivariate_normal")
    if method not in ("svd", "eigh", "cholesky"):
        raise ValueError(f"random.multivariate_normal: method must be one of 'svd', 'eigh', 'cholesky', "
                         f"got {method!r}")
    mean, cov = fnp.asarray(mean), fnp.asarray(cov)
    fdtype = np.result_type(mean.dtype, cov.dtype)
    fdtype = fdtype if _dtypes.kind(fdtype) == "f" else default_float_dtype()
    dtype = fdtype if dtype is None else _float_dtype(dtype, "multivariate_normal")
    mean, cov = convert(mean, fdtype), convert(cov, fdtype)
    if mean.ndim < 1:
        raise ValueError(f"random.multivariate_normal: mean must have ndim >= 1, got {describe(mean)}")
    if cov.ndim < 2:
        raise ValueError(f"random.multivariate_normal: cov must have ndim >= 2, got {describe(cov)}")
    n = mean.shape[-1]
    if tuple(cov.shape[-2:]) != (n, n):
        raise ValueError(f"random.multivariate_normal: cov must have shape (..., {n}, {n}) for a mean of length "
                         f"{n}, got {describe(cov)}")
    batch = tuple(np.broadcast_shapes(tuple(mean.shape[:-1]), tuple(cov.shape[:-2])))
    if shape is None:
        shape = batch
    else:
        shape = _shape(shape, "multivariate_normal")
        _check_broadcast("multivariate_normal", shape, mean[..., 0], cov[..., 0, 0])
    if method == "svd":
        u, s_, _ = _linalg("multivariate_normal", "svd")(cov)
        factor = u * fnp.sqrt(s_)[..., None, :]
    elif method == "eigh":
        w, v = _linalg("multivariate_normal", "eigh")(cov)
        factor = v * fnp.sqrt(w)[..., None, :]
    else:
        factor = _linalg("multivariate_normal", "cholesky")(cov)
    z = normal(k, shape + (n,), dtype)
    return mean + fnp.sum(factor * z[..., None, :], axis=-1)


def orthogonal(key: Any, n: int, shape: Sequence[int] | int = (), dtype: Any = None, m: int | None = None, *,
               out_sharding: Any = None) -> Any:
    """Random ``n x m`` matrices with orthonormal columns (or rows, when ``n < m``), Haar-distributed.

    The QR factorization of a Gaussian matrix with the signs of ``R``'s
    diagonal moved into ``Q``, as JAX; ``m`` defaults to ``n``.

    >>> q = random.orthogonal(random.key(0), 3)                # f32[3,3], q @ q.T = I
    """
    k = _check_key(key, "orthogonal")
    _no_sharding(out_sharding, "orthogonal")
    n = _count(n, "orthogonal", "n")
    m_ = n if m is None else _count(m, "orthogonal", "m")
    dtype = _float_dtype(dtype, "orthogonal")
    shape = _shape(shape, "orthogonal")
    z = normal(k, shape + (max(n, m_), min(n, m_)), dtype)
    q, r = _linalg("orthogonal", "qr")(z)
    d = fnp.sum(r * fnp.eye(r.shape[-1], dtype=r.dtype), axis=-2)    # R's diagonal
    x = q * fnp.sign(d)[..., None, :]
    return fnp.swapaxes(x, -1, -2) if n < m_ else x
