"""Factorizations and solves of ``funcgrad.scipy.linalg``: ``cholesky``, ``cho_factor``/``cho_solve``,
``solve_triangular``, ``lu``, ``lu_factor``/``lu_solve``, ``solve``, ``det``, ``inv`` and the Sylvester equation
``solve_sylvester``. Shared checks are in ``_base``; the other decompositions in ``_decomp``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad._dtypes import describe
from funcgrad.numpy._base import arr, promote_inexact
from funcgrad.numpy import _linalg, linalg as _nl
from funcgrad.numpy._elementwise import where
from funcgrad.numpy._shape import broadcast_to, ravel, reshape
from funcgrad import lax
from funcgrad.lax import linalg as _L
from funcgrad.scipy.linalg._base import _as_matrix_rhs, _matrix, _min, _mT, _nl_tril, _nl_triu, _square
from funcgrad.typing import ArrayLike


def cholesky(a: ArrayLike, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """Cholesky factor of symmetric positive definite matrices: upper ``U`` (``a = U.T @ U``) by default,
    lower with ``lower=True``; only that triangle of ``a`` is read (as JAX: no symmetrization, so the
    gradient is not symmetric). NaN where ``a`` is not positive definite.

    >>> cholesky(fnp.array([[4.0, 2.0], [2.0, 3.0]]))   # upper triangular
    Array([[2.       , 1.       ],
           [0.       , 1.4142]], dtype=float32)
    """
    a = _square("cholesky", a)
    # As JAX: the lower (or upper) triangle is read, without symmetrizing.
    L = _L.cholesky(a if lower else _mT(a), symmetrize_input=False)
    return L if lower else _mT(L)


def cho_factor(a: ArrayLike, lower: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> tuple[Any, bool]:
    """``(c, lower)`` for :func:`cho_solve`; ``c`` is the triangular Cholesky factor (zeros elsewhere).

    >>> c_and_lower = cho_factor(fnp.array([[4.0, 2.0], [2.0, 3.0]]))
    """
    return cholesky(a, lower=lower), bool(lower)


def cho_solve(c_and_lower: tuple[Any, bool], b: ArrayLike, overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """Solve ``a @ x = b`` given ``cho_factor(a)``. b: (n,) or (..., n, k).

    >>> cho_solve(cho_factor(fnp.array([[4.0, 2.0], [2.0, 3.0]])), fnp.array([1.0, 2.0]))
    Array([-0.1250,  0.7500], dtype=float32)
    """
    c, lower = c_and_lower
    c, b = promote_inexact(arr(c), arr(b))
    c = _square("cho_solve", c)
    b2, vec = _as_matrix_rhs("cho_solve", c, b)
    if lower:
        y = _L.triangular_solve(c, b2, left_side=True, lower=True)
        x = _L.triangular_solve(c, y, left_side=True, lower=True, transpose_a=True)
    else:
        y = _L.triangular_solve(c, b2, left_side=True, lower=False, transpose_a=True)
        x = _L.triangular_solve(c, y, left_side=True, lower=False)
    return reshape(x, x.shape[:-1]) if vec else x


def solve_triangular(a: ArrayLike, b: ArrayLike, trans: Any = 0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, debug: Any = None, check_finite: bool = True) -> Any:
    """Solve ``op(a) @ x = b`` with ``a`` triangular (only its ``lower``/upper triangle is read);
    ``trans`` 0/'N', 1/'T' or 2/'C' (conjugate transpose). b: (n,) or (..., n, k).
    A zero on the diagonal gives inf/NaN.

    >>> solve_triangular(fnp.array([[2.0, 0.0], [1.0, 1.0]]), fnp.array([2.0, 3.0]), lower=True)
    Array([1., 2.], dtype=float32)
    """
    a, b = promote_inexact(arr(a), arr(b))
    a = _square("solve_triangular", a)
    codes = {0: False, "N": False, 1: True, "T": True, 2: True, "C": True}
    if trans not in codes:
        raise ValueError(f"scipy.linalg.solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    b2, vec = _as_matrix_rhs("solve_triangular", a, b)
    x = _L.triangular_solve(a, b2, left_side=True, lower=bool(lower), transpose_a=codes[trans],
                            conjugate_a=trans in (2, "C"), unit_diagonal=bool(unit_diagonal))
    return reshape(x, x.shape[:-1]) if vec else x


def _perm_matrix(perm: Any, dtype: Any) -> Any:
    return _L.permutation_matrix(perm, dtype)


def lu(a: ArrayLike, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> tuple:
    """LU decomposition with partial pivoting of (..., m, n) matrices: ``(p, l, u)`` with ``a = p @ l @ u``,
    p (m, m), l (m, k) unit lower, u (k, n) upper, k = min(m, n) (``permute_l``: ``(p @ l, u)``).

    >>> p, l, u = lu(fnp.array([[1.0, 2.0], [3.0, 4.0]]))
    """
    a = _matrix("lu", a)
    lu_, _, perm = _L.lu(a)
    m, n = a.shape[-2:]
    k = _min(m, n)
    low = lax.add(_nl_tril(lu_[..., :, :k], -1), lax.convert_element_type(np.eye(m, k), a.dtype))
    up = _nl_triu(lu_[..., :k, :])
    p = _mT(_perm_matrix(perm, a.dtype))
    if permute_l:
        return _linalg.matmul(p, low), up
    return p, low, up


def lu_factor(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Any, Any]:
    """``(lu, piv)`` as LAPACK's getrf (0-based row interchanges), for :func:`lu_solve` (square ``a``).

    >>> lu_, piv = lu_factor(fnp.array([[1.0, 2.0], [3.0, 4.0]]))   # piv = [1, 1]
    """
    a = _matrix("lu_factor", a)
    lu_, piv, _ = _L.lu(a)
    return lu_, piv


def _pivots_to_perm(piv: Any) -> Any:
    """LAPACK row interchanges (..., n) -> the permutation (..., n), written with array ops (traceable)."""
    n = piv.shape[-1]
    idx = np.arange(n, dtype=np.int32)
    perm = broadcast_to(lax.convert_element_type(idx, np.int32), piv.shape)
    for i in range(n):
        p = piv[..., i:i + 1]
        at_i = perm[..., i:i + 1]
        at_p = _linalg_take(perm, p)
        perm = where(lax.eq_p.bind(idx, i), at_p, where(lax.eq_p.bind(idx, p), at_i, perm))
    return perm


def _linalg_take(x: Any, idx: Any) -> Any:
    from funcgrad.numpy._shape import take_along_axis
    return take_along_axis(x, idx, axis=-1)


def lu_solve(lu_and_piv: tuple[Any, Any], b: ArrayLike, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Any:
    """Solve ``a @ x = b`` (``trans`` 1: ``a.T @ x = b``, 2: ``a^H @ x = b``) given ``lu_factor(a)``.
    b: (n,) or (..., n, k).

    >>> lu_solve(lu_factor(fnp.array([[2.0, 0.0], [0.0, 4.0]])), fnp.array([2.0, 2.0]))
    Array([1. , 0.5], dtype=float32)
    """
    lu_, piv = lu_and_piv
    lu_, b = promote_inexact(arr(lu_), arr(b))
    lu_ = _square("lu_solve", lu_)
    piv = arr(piv)
    if trans not in (0, 1, 2):
        raise ValueError(f"scipy.linalg.lu_solve: trans must be 0, 1 or 2, got {trans!r}")
    b2, vec = _as_matrix_rhs("lu_solve", lu_, b)
    P = _perm_matrix(_pivots_to_perm(lax.convert_element_type(piv, np.int32)), lu_.dtype)
    if trans == 2 and lu_.dtype.kind == "c":   # a^H x = b: conj(a) = P^T conj(L) conj(U)
        lu_ = lax.conj(lu_)
    if trans == 0:
        y = _L.triangular_solve(lu_, _linalg.matmul(P, b2), left_side=True, lower=True, unit_diagonal=True)
        x = _L.triangular_solve(lu_, y, left_side=True, lower=False)
    else:
        y = _L.triangular_solve(lu_, b2, left_side=True, lower=False, transpose_a=True)
        z = _L.triangular_solve(lu_, y, left_side=True, lower=True, transpose_a=True, unit_diagonal=True)
        x = _linalg.matmul(_mT(P), z)
    return reshape(x, x.shape[:-1]) if vec else x


def solve(a: ArrayLike, b: ArrayLike, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          debug: bool = False, check_finite: bool = True, assume_a: str = "gen") -> Any:
    """Solve ``a @ x = b``; ``assume_a`` 'gen', 'sym', 'her' (LU) or 'pos' (Cholesky, reading the
    ``lower``/upper triangle). b: (n,) or (..., n, k).

    >>> solve(fnp.array([[2.0, 0.0], [0.0, 4.0]]), fnp.array([2.0, 2.0]))
    Array([1. , 0.5], dtype=float32)
    """
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ValueError(f"scipy.linalg.solve: assume_a must be 'gen', 'sym', 'her' or 'pos', got {assume_a!r}")
    a, b = promote_inexact(arr(a), arr(b))
    a = _square("solve", a)
    if assume_a != "pos":
        return _nl.solve(a, b)
    full = _nl_tril(a) + _mT(_nl_tril(a, -1)) if lower else _nl_triu(a) + _mT(_nl_triu(a, 1))
    return cho_solve((_L.cholesky(full, symmetrize_input=False), True), b)


def det(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """Determinant of square matrices (..., n, n) -> (...).

    >>> det(fnp.array([[1.0, 2.0], [3.0, 4.0]]))
    Array(-2.0000, dtype=float32)
    """
    return _nl.det(a)


def inv(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """Inverse of square matrices; inf/NaN for a singular matrix.

    >>> inv(fnp.array([[2.0, 0.0], [0.0, 4.0]]))
    Array([[0.5 , 0.  ],
           [0.  , 0.25]], dtype=float32)
    """
    return _nl.inv(a)

def solve_sylvester(A: Any, B: Any, C: Any, *, method: str = "schur", tol: float = 1e-8) -> Any:
    """Solve ``A @ X + X @ B = C`` (A (m, m), B (n, n), C (m, n)) as one (m n)-sized linear system
    (Kronecker form: exact and differentiable; meant for small matrices).

    >>> solve_sylvester(fnp.eye(2), fnp.eye(2), fnp.ones((2, 2)))   # all 0.5
    Array([[0.5, 0.5],
           [0.5, 0.5]], dtype=float32)
    """
    if method not in ("schur", "eigen"):
        raise ValueError(f"scipy.linalg.solve_sylvester: method must be 'schur' or 'eigen', got {method!r}")
    A, B, C = promote_inexact(arr(A), arr(B), arr(C))
    if A.ndim != 2 or B.ndim != 2 or C.ndim != 2 or A.shape[0] != A.shape[1] or B.shape[0] != B.shape[1] \
            or C.shape != (A.shape[0], B.shape[0]):
        raise ValueError(f"scipy.linalg.solve_sylvester: expected A (m, m), B (n, n), C (m, n), got {describe(A)}, "
                         f"{describe(B)}, {describe(C)}")
    m, n = C.shape
    # vec_row(A X + X B) = (kron(A, I_n) + kron(I_m, B.T)) vec_row(X)
    eye_m = lax.convert_element_type(np.eye(m), A.dtype)
    eye_n = lax.convert_element_type(np.eye(n), A.dtype)
    K = reshape(_linalg.einsum("ij,kl->ikjl", A, eye_n) + _linalg.einsum("ij,kl->ikjl", eye_m, _mT(B)),
                (m * n, m * n))
    return reshape(_nl.solve(K, ravel(C)), (m, n))
