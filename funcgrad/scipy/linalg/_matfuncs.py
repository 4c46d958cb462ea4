"""Matrix functions of ``funcgrad.scipy.linalg``: ``expm`` and its Frechet derivative ``expm_frechet``,
``sqrtm`` and ``funm`` (these two complex, through the Schur form). Shared checks are in ``_base``; the
decompositions in ``_decomp`` and ``_solve``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad._dtypes import describe
from funcgrad.numpy._base import arr, promote_inexact
from funcgrad.numpy import _linalg, linalg as _nl
from funcgrad.numpy._elementwise import multiply, where
from funcgrad.numpy._shape import concatenate
from funcgrad.lax import linalg as _L
import funcgrad.numpy as _fnp
from funcgrad.scipy.linalg._base import _complex_dtype_of, _mT, _square


def sqrtm(A: Any, blocksize: int = 1) -> Any:
    """Principal matrix square root ``X`` (``X @ X = A``) of square (..., n, n) matrices, always complex (as JAX:
    complex64 for float32 input, complex128 for float64); computed by scipy (Schur method). No derivatives
    (as in JAX). A matrix with a non-finite entry, or without a square root (``[[0, 1], [0, 0]]``), gives NaN.

    >>> sqrtm(fnp.array([[4.0, 0.0], [0.0, 9.0]]))   # [[2, 0], [0, 3]] as complex
    Array([[2.+0.j, 0.+0.j],
           [0.+0.j, 3.+0.j]], dtype=complex64)
    """
    if blocksize > 1:
        raise NotImplementedError("scipy.linalg.sqrtm: the blocked version (blocksize > 1) is not implemented "
                                  "(as in JAX)")
    A = _square("sqrtm", A)
    return _L.sqrtm_p.bind(A)


def funm(A: Any, func: Any, disp: bool = True) -> Any:
    """Matrix function ``func(A)`` of a square (n, n) matrix, for a scalar function ``func`` applied elementwise
    (it receives the eigenvalues, a complex (n,) array): complex Schur form, then Parlett's recurrence
    (as JAX; complex result, no derivatives). ``disp=False``: ``(F, err)`` with an estimate of the relative
    error (JAX's formula). Inaccurate for close or repeated eigenvalues (as scipy and JAX).

    >>> funm(fnp.array([[1.0, 2.0], [0.0, 3.0]]), fnp.exp)   # equals expm(A), as complex
    Array([[ 2.7183+0.j, 17.3673 +0.j],
           [ 0.       +0.j, 20.0855 +0.j]], dtype=complex64)
    """
    (A,) = promote_inexact(arr(A))
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"scipy.linalg.funm: expected a square (n, n) matrix, got {describe(A)}")
    if not callable(func):
        raise TypeError(f"scipy.linalg.funm: func must be a callable taking the eigenvalues, got "
                        f"{type(func).__name__}")
    T, Z = _L.schur(A.astype(_complex_dtype_of(A)))
    fd = _fnp.asarray(func(_fnp.diagonal(T)))
    if fd.shape != (A.shape[0],):
        raise ValueError(f"scipy.linalg.funm: func must map the ({A.shape[0]},) eigenvalues to an array of that "
                         f"shape, got {describe(fd)}")
    F = _fnp.diag(fd).astype(T.dtype)
    F, minden = _L.parlett_p.bind(F, T)
    F = _linalg.matmul(_linalg.matmul(Z, F), _fnp.conj(_mT(Z)))
    if disp:
        return F
    tol = float(np.finfo(np.float32 if T.dtype == np.complex64 else np.float64).eps)
    minden = where(minden == 0.0, tol, minden)
    bound = _fnp.minimum(1.0, _fnp.maximum(tol, (tol / minden) * _nl.norm(_fnp.triu(T, 1), 1)))
    err = where(_fnp.any(_fnp.isinf(F)), np.inf, bound)
    return F, err


def expm(A: Any, *, upper_triangular: bool = False, max_squarings: int = 16) -> Any:
    """Matrix exponential of square matrices (..., n, n); its derivative is the Frechet derivative.

    >>> expm(fnp.zeros((2, 2)))   # identity
    Array([[1., 0.],
           [0., 1.]], dtype=float32)
    """
    return _L.expm(_square("expm", A))


def expm_frechet(A: Any, E: Any, *, method: Any = None, compute_expm: bool = True) -> Any:
    """Frechet derivative of expm at ``A`` in direction ``E``: ``(expm(A), L)`` or ``L``.

    >>> expm_A, L = expm_frechet(fnp.eye(2), fnp.ones((2, 2)))
    """
    if method not in (None, "SPS", "blockEnlarge"):
        raise ValueError(f"scipy.linalg.expm_frechet: method must be None, 'SPS' or 'blockEnlarge', got {method!r}")
    A, E = promote_inexact(arr(A), arr(E))
    A, E = _square("expm_frechet", A), _square("expm_frechet", E)
    if A.shape != E.shape:
        raise ValueError(f"scipy.linalg.expm_frechet: A {describe(A)} and E {describe(E)} must have the same shape")
    n = A.shape[-1]
    top = concatenate([A, E], axis=-1)
    bottom = concatenate([multiply(A, 0.0), A], axis=-1)
    big = _L.expm(concatenate([top, bottom], axis=-2))
    L = big[..., :n, n:]
    return (big[..., :n, :n], L) if compute_expm else L
