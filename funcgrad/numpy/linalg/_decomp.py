"""Decompositions of ``funcgrad.numpy.linalg``: ``cholesky``, ``eigh``, ``eig``, ``eigvals``,
``eigvalsh``, ``svd``, ``svdvals`` and ``qr``, returning the named results of ``_base``. Solves and
determinants built on LU are in ``_solve``; products in ``_products``, norms in ``_norms``.
"""
from __future__ import annotations

from typing import Any

from funcgrad.lax import linalg as _L
from funcgrad.numpy.linalg._base import EigResult, EighResult, QRResult, SVDResult, _matrix, _mT
from funcgrad.typing import Array, ArrayLike


def cholesky(a: ArrayLike, *, upper: bool = False, symmetrize_input: bool = True) -> Array:
    """Cholesky factor of symmetric positive definite matrices: lower ``L`` with ``a = L @ L.T``
    (``upper``: ``U = L.T``). NaN where ``a`` is not positive definite (numpy raises).

    >>> cholesky(fnp.array([[4.0, 2.0], [2.0, 3.0]]))
    Array([[2.       , 0.       ],
           [1.       , 1.4142]], dtype=float32)
    """
    a = _matrix("cholesky", a, square=True)
    L = _L.cholesky(a, symmetrize_input=symmetrize_input)
    return _mT(L) if upper else L


def eigh(a: ArrayLike, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors (columns) of symmetric matrices: ``EighResult(w, v)``.

    >>> w, v = eigh(fnp.array([[2.0, 1.0], [1.0, 2.0]]))   # w = [1., 3.]
    """
    a = _matrix("eigh", a, square=True)
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    v, w = _L.eigh(a, lower=UPLO != "U", symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eig(a: ArrayLike) -> EigResult:
    """Eigenvalues and right eigenvectors of general square matrices: ``EigResult(w, v)`` with
    ``a @ v[..., :, j] = w[..., j] * v[..., :, j]``; (..., n, n) -> (..., n), (..., n, n), complex
    (unit-norm columns, as LAPACK geev; eigenvalues in LAPACK's order, unsorted). Eigenvalues are
    differentiable through ``eigvals``; differentiating this function raises (as in JAX).

    >>> w, v = eig(fnp.array([[2.0, 0.0], [0.0, 3.0]]))   # w = [2+0j, 3+0j]
    """
    a = _matrix("eig", a, square=True)
    w, v = _L.eig(a, compute_left_eigenvectors=False)
    return EigResult(w, v)


def eigvals(a: ArrayLike) -> Array:
    """Eigenvalues of general square matrices, complex: (..., n, n) -> (..., n) (LAPACK's order, unsorted).
    Differentiable (forward and reverse; distinct eigenvalues), as JAX.

    >>> eigvals(fnp.array([[0.0, 1.0], [-1.0, 0.0]]))
    Array([0.+1.j, 0.-1.j], dtype=complex64)
    """
    a = _matrix("eigvals", a, square=True)
    (w,) = _L.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)
    return w


def eigvalsh(a: ArrayLike, UPLO: str | None = "L", *, symmetrize_input: bool = True) -> Array:
    """Eigenvalues (ascending) of symmetric matrices: (..., n, n) -> (..., n).

    >>> eigvalsh(fnp.array([[2.0, 1.0], [1.0, 2.0]]))
    Array([1., 3.], dtype=float32)
    """
    return eigh(a, UPLO, symmetrize_input).eigenvalues


def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False,
        subset_by_index: Any = None) -> Any:
    """Singular value decomposition ``SVDResult(U, S, Vh)`` with ``a = U @ diag(S) @ Vh`` (S descending);
    ``compute_uv=False``: ``S`` only. Gradients need ``full_matrices=False`` (or square matrices).

    >>> U, S, Vh = svd(fnp.ones((3, 2)), full_matrices=False)
    """
    a = _matrix("svd", a)
    # hermitian=True: the general SVD is also an SVD of a symmetric matrix (computed without the shortcut).
    out = _L.svd(a, full_matrices=full_matrices, compute_uv=compute_uv, subset_by_index=subset_by_index)
    if not compute_uv:
        return out
    return SVDResult(*out)


def svdvals(x: ArrayLike, /) -> Any:
    """Singular values, descending: (..., m, n) -> (..., min(m, n)).

    >>> svdvals(fnp.array([[3.0, 0.0], [0.0, 4.0]]))
    Array([4., 3.], dtype=float32)
    """
    return svd(x, full_matrices=False, compute_uv=False)


def qr(a: ArrayLike, mode: str = "reduced") -> Any:
    """QR decomposition ``QRResult(Q, R)``; ``mode`` 'reduced' (k = min(m, n)), 'complete' (Q is m x m) or
    'r' (R only). Gradients need m >= n with 'reduced', or square matrices.

    >>> Q, R = qr(fnp.ones((3, 2)))
    """
    a = _matrix("qr", a)
    if mode == "raw":
        raise NotImplementedError("linalg.qr: mode='raw' (LAPACK's Householder form) is not supported")
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"linalg.qr: mode must be 'reduced', 'complete', 'r' or 'raw', got {mode!r}")
    q, r = _L.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)
