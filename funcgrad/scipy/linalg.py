"""``funcgrad.scipy.linalg``: ``jax.scipy.linalg`` over funcgrad's decomposition primitives.

Differentiable (any order), batched over leading dimensions where JAX is, and usable under jit/vmap.
As in JAX, nothing raises LinAlgError: singular systems give inf/NaN, a matrix that is not positive
definite gives a NaN Cholesky factor. ``overwrite_*``/``check_finite`` are accepted and ignored (they
have no meaning for immutable arrays), as in JAX.

``sqrtm``, ``funm``, ``rsf2csf`` and ``schur(output='complex')`` return complex arrays (as JAX) and
have no derivatives (as JAX: they go through the Schur decomposition); ``dft`` is a constant.
Not available: generalized eigenproblems (``eigh(a, b)``, not in JAX either).
"""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from funcgrad._dtypes import describe
from funcgrad.numpy._base import arr, promote, promote_inexact
from funcgrad.numpy import _linalg, linalg as _nl
from funcgrad.numpy._elementwise import abs, divide, multiply, subtract, where
from funcgrad.numpy._shape import broadcast_to, concatenate, ravel, reshape
from funcgrad import lax
from funcgrad.lax import linalg as _L
import funcgrad.numpy as _fnp
from funcgrad.typing import ArrayLike, DTypeLike

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "companion", "convolution_matrix", "det",
           "dft", "eigh", "eigh_tridiagonal", "expm", "expm_frechet", "fiedler", "fiedler_companion", "funm",
           "hadamard", "hankel", "helmert", "hessenberg", "hilbert", "inv", "invhilbert", "invpascal", "leslie", "lu",
           "lu_factor", "lu_solve", "pascal", "polar", "qr", "qr_multiply", "rsf2csf", "schur", "solve",
           "solve_sylvester", "solve_triangular", "sqrtm", "svd", "toeplitz"]

_max, _min = builtins.max, builtins.min


def _mT(x: Any) -> Any:
    nd = x.ndim
    return lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _square(name: str, a: Any) -> Any:
    (a,) = promote_inexact(arr(a))
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"scipy.linalg.{name}: expected a square matrix (shape (..., n, n)), got {describe(a)}")
    return a


def _as_matrix_rhs(name: str, a: Any, b: Any) -> tuple[Any, bool]:
    """b (n,) -> (n, 1) (and a flag to undo it); b (..., n, k) as is."""
    n = a.shape[-1]
    if b.ndim == 1:
        if b.shape[0] != n:
            raise ValueError(f"scipy.linalg.{name}: the right-hand side {describe(b)} must have length {n} to match "
                             f"{describe(a)}")
        return reshape(b, (n, 1)), True
    if b.ndim < 2 or b.shape[-2] != n:
        raise ValueError(f"scipy.linalg.{name}: the right-hand side {describe(b)} must have shape (n,) or (..., n, k) "
                         f"with n = {n} to match {describe(a)}")
    return b, False

# ------------------------------------------------------------------ factorizations and solves


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


def _matrix(name: str, a: Any) -> Any:
    (a,) = promote_inexact(arr(a))
    if a.ndim < 2:
        raise ValueError(f"scipy.linalg.{name}: expected a matrix (shape (..., m, n)), got {describe(a)}")
    return a


def _nl_tril(x: Any, k: int = 0) -> Any:
    m, n = x.shape[-2:]
    return multiply(x, lax.convert_element_type(np.tri(m, n, k), x.dtype))


def _nl_triu(x: Any, k: int = 0) -> Any:
    m, n = x.shape[-2:]
    return multiply(x, lax.convert_element_type(1.0 - np.tri(m, n, k - 1), x.dtype))


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


def eigh(a: ArrayLike, b: ArrayLike | None = None, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, turbo: bool = True, eigvals: Any = None, type: int = 1,  # noqa: A002
         check_finite: bool = True) -> Any:
    """Eigenvalues (ascending) and eigenvectors ``(w, v)`` of a symmetric matrix (``lower`` triangle read);
    ``eigvals_only``: ``w``. The generalized problem (``b``) is not supported (nor in JAX).

    >>> w, v = eigh(fnp.array([[2.0, 1.0], [1.0, 2.0]]))
    """
    if b is not None:
        raise NotImplementedError("scipy.linalg.eigh: only the b=None case is implemented (as in JAX)")
    if eigvals is not None:
        raise NotImplementedError("scipy.linalg.eigh: eigvals= (a subset) is not supported; slice the result")
    a = _square("eigh", a)
    v, w = _L.eigh(a, lower=lower, symmetrize_input=False)
    return w if eigvals_only else (w, v)


def eigh_tridiagonal(d: Any, e: Any, *, eigvals_only: bool = False, select: str = "a", select_range: Any = None,
                     tol: Any = None, key: Any = None) -> Any:
    """Eigenvalues (and with ``eigvals_only=False`` eigenvectors) of the symmetric tridiagonal matrix with
    diagonal ``d`` (n,) and off-diagonal ``e`` (n-1,).

    >>> eigh_tridiagonal(fnp.array([1.0, 2.0, 3.0]), fnp.array([1.0, 1.0]), eigvals_only=True)
    Array([0.2679, 2.       , 3.7321 ], dtype=float32)
    """
    if select != "a" or select_range is not None:
        raise NotImplementedError("scipy.linalg.eigh_tridiagonal: only select='a' is supported")
    d, e = promote_inexact(arr(d), arr(e))
    if d.ndim != 1 or e.ndim != 1 or e.shape[0] != _max(d.shape[0] - 1, 0):
        raise ValueError(f"scipy.linalg.eigh_tridiagonal: expected d (n,) and e (n-1,), got {describe(d)} and "
                         f"{describe(e)}")
    n = d.shape[0]
    m = multiply(reshape(d, (n, 1)), lax.convert_element_type(np.eye(n), d.dtype))
    if n > 1:
        sub_ = lax.convert_element_type(np.eye(n, k=-1), d.dtype)     # ones at [j + 1, j]
        off = multiply(sub_, reshape(concatenate([e, lax.convert_element_type(np.zeros(1), d.dtype)]), (1, n)))
        m = m + off + _mT(off)
    v, w = _L.eigh(m, symmetrize_input=False)
    return w if eigvals_only else (w, v)


def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd") -> Any:
    """Singular value decomposition ``(u, s, vh)`` (``compute_uv=False``: ``s``), s descending.

    >>> u, s, vh = svd(fnp.ones((3, 2)), full_matrices=False)
    """
    if lapack_driver not in ("gesdd", "gesvd"):
        raise ValueError(f"scipy.linalg.svd: lapack_driver must be 'gesdd' or 'gesvd', got {lapack_driver!r}")
    out = _nl.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(out) if compute_uv else out


def qr(a: ArrayLike, overwrite_a: bool = False, lwork: Any = None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True) -> tuple:
    """QR decomposition: ``mode`` 'full' (q is m x m), 'economic' (k = min(m, n)) -> ``(q, r)``;
    'r' -> ``(r,)``. Gradients need m >= n with 'economic', or square matrices.

    >>> q, r = qr(fnp.ones((3, 2)), mode="economic")
    """
    if pivoting:
        raise NotImplementedError("scipy.linalg.qr: pivoting=True is not supported")
    if mode == "raw":
        raise NotImplementedError("scipy.linalg.qr: mode='raw' is not supported")
    if mode not in ("full", "economic", "r"):
        raise ValueError(f"scipy.linalg.qr: mode must be 'full', 'economic', 'r' or 'raw', got {mode!r}")
    (a,) = promote_inexact(arr(a))
    if a.ndim < 2:
        raise ValueError(f"scipy.linalg.qr: expected a matrix, got {describe(a)}")
    q, r = _L.qr(a, full_matrices=mode != "economic")
    return (r,) if mode == "r" else (q, r)


def qr_multiply(a: ArrayLike, c: Any, mode: str = "right", pivoting: bool = False, conjugate: bool = False,
                overwrite_a: bool = False, overwrite_c: bool = False) -> tuple[Any, Any]:
    """``(Q @ c, R)`` (``mode='left'``) or ``(c @ Q, R)`` ('right') with ``Q, R`` the economic QR of ``a``
    (Q (m, k), R (k, n), k = min(m, n)); 1-d ``c`` is a column ('left') or a row ('right'). ``conjugate``
    is the identity for real arrays.

    >>> cq, r = qr_multiply(fnp.ones((3, 2)), fnp.ones((2, 3)))
    """
    if pivoting:
        raise NotImplementedError("scipy.linalg.qr_multiply: pivoting=True is not supported")
    if mode not in ("right", "left"):
        raise ValueError(f"scipy.linalg.qr_multiply: mode must be 'right' or 'left', got {mode!r}")
    a, c = promote_inexact(arr(a), arr(c))
    if a.ndim < 2:
        raise ValueError(f"scipy.linalg.qr_multiply: a must be a matrix, got {describe(a)}")
    onedim = c.ndim == 1
    if onedim:
        c = reshape(c, (c.shape[0], 1)) if mode == "left" else reshape(c, (1, c.shape[0]))
    m, n = a.shape[-2:]
    k = _min(m, n)
    if mode == "left" and c.shape[-2] != k:
        raise ValueError(f"scipy.linalg.qr_multiply: Q @ c needs c with {k} rows (Q of {describe(a)} has {k} "
                         f"columns), got {describe(c)}")
    if mode == "right" and c.shape[-1] != m:
        raise ValueError(f"scipy.linalg.qr_multiply: c @ Q needs c with {m} columns (Q of {describe(a)} has {m} "
                         f"rows), got {describe(c)}")
    q, r = _L.qr(a, full_matrices=False)
    cq = _linalg.matmul(q, c) if mode == "left" else _linalg.matmul(c, q)
    return (ravel(cq) if onedim else cq), r


def schur(a: ArrayLike, output: str = "real") -> tuple[Any, Any]:
    """Schur decomposition ``(t, z)`` with ``a = z @ t @ z^H`` (forward only; no derivatives, as in JAX):
    ``output='real'``: real quasi-triangular ``t`` for real ``a``; ``output='complex'``: complex upper-triangular
    ``t`` (complex64 for float32 input, complex128 for float64). A complex ``a`` always gives the complex form.

    >>> t, z = schur(fnp.array([[1.0, 2.0], [3.0, 4.0]]))
    >>> tc, zc = schur(fnp.array([[0.0, 1.0], [-1.0, 0.0]]), output="complex")   # diag(tc) = [1j, -1j]
    """
    if output not in ("real", "complex"):
        raise ValueError(f"scipy.linalg.schur: output must be 'real' or 'complex', got {output!r}")
    a = _square("schur", a)
    if output == "complex":
        a = a.astype(_complex_dtype_of(a))
    return _L.schur(a)


def _complex_dtype_of(a: Any) -> Any:
    """complex64 for float32/float16/complex64, complex128 for float64/complex128."""
    return np.dtype(np.complex128) if a.dtype in (np.float64, np.complex128) else np.dtype(np.complex64)


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


def rsf2csf(T: Any, Z: Any, check_finite: bool = True) -> tuple[Any, Any]:
    """Real Schur form ``(T, Z)`` (from ``schur``) -> complex Schur form ``(T2, Z2)`` with ``T2`` upper
    triangular and ``Z2 @ T2 @ Z2^H == Z @ T @ Z^T``; (..., n, n) each, complex. No derivatives.

    >>> T2, Z2 = rsf2csf(*schur(fnp.array([[0.0, 1.0], [-1.0, 0.0]])))
    """
    T, Z = promote_inexact(arr(T), arr(Z))
    for name, x in (("T", T), ("Z", Z)):
        if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
            raise ValueError(f"scipy.linalg.rsf2csf: {name} must be a square matrix (shape (..., n, n)), got "
                             f"{describe(x)}")
    if T.shape[-1] != Z.shape[-1]:
        raise ValueError(f"scipy.linalg.rsf2csf: T {describe(T)} and Z {describe(Z)} must have the same size")
    t2, z2 = _L.rsf2csf_p.bind(T, Z)
    return t2, z2


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


def dft(n: int, scale: str | None = None, *, dtype: DTypeLike | None = None) -> Any:
    """The n x n discrete Fourier transform matrix ``W[j, k] = exp(-2 pi i j k / n)`` (``dft(n) @ x ==
    fft(x)``); ``scale``: None, ``'sqrtn'`` (unitary) or ``'n'``. Complex (the default complex dtype:
    complex64, complex128 with x64, or ``dtype``).

    >>> dft(2)
    Array([[ 1.+0.0000000e+00j,  1.+0.0000000e+00j],
           [ 1.+0.0000000e+00j, -1.-1.2246469e-16j]], dtype=complex64)
    """
    if scale is not None and scale not in ("sqrtn", "n"):
        raise ValueError(f"scipy.linalg.dft: scale must be None, 'sqrtn' or 'n', got {scale!r}")
    n = _operator_index("dft", n)
    if n < 0:
        raise ValueError(f"scipy.linalg.dft: n must be non-negative, got {n}")
    from funcgrad import _dtypes
    dt = _dtypes.complex_ if dtype is None else np.dtype(dtype)
    if dt.kind != "c":
        raise ValueError(f"scipy.linalg.dft: dtype must be a complex floating-point type, got {dt}")
    dt = _dtypes.canonicalize(dt)
    k = np.arange(n)
    w = np.exp(-2j * np.pi * np.outer(k, k) / max(n, 1))
    if scale == "sqrtn":
        w = w / np.sqrt(n)
    elif scale == "n":
        w = w / n
    return _fnp.asarray(w.astype(dt))


def _operator_index(name: str, n: Any) -> int:
    import operator
    try:
        return operator.index(n)
    except TypeError:
        raise TypeError(f"scipy.linalg.{name}: n must be an integer, got {type(n).__name__} {n!r}") from None


def hessenberg(a: ArrayLike, *, calc_q: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """Upper Hessenberg form ``h`` (``calc_q``: ``(h, q)`` with ``a = q @ h @ q^H``; real or complex); forward only.

    >>> h = hessenberg(fnp.ones((3, 3)))
    """
    h, q = _L.hessenberg_p.bind(_square("hessenberg", a))
    return (h, q) if calc_q else h


def polar(a: ArrayLike, side: str = "right", *, method: str = "qdwh", eps: Any = None,
          max_iterations: Any = None) -> tuple[Any, Any]:
    """Polar decomposition ``(u, p)``: ``a = u @ p`` (side 'right') or ``p @ u`` ('left'), through the SVD
    (``method`` 'svd' or 'qdwh': both give the same factors here).

    >>> u, p = polar(fnp.array([[1.0, 2.0], [3.0, 4.0]]))
    """
    if side not in ("right", "left"):
        raise ValueError(f"scipy.linalg.polar: side must be 'right' or 'left', got {side!r}")
    if method not in ("qdwh", "svd"):
        raise ValueError(f"scipy.linalg.polar: method must be 'qdwh' or 'svd', got {method!r}")
    (a,) = promote_inexact(arr(a))
    if a.ndim != 2:
        raise ValueError(f"scipy.linalg.polar: expected a matrix, got {describe(a)}")
    u, s, vh = _L.svd(a, full_matrices=False)
    unitary = _linalg.matmul(u, vh)
    if side == "right":
        p = _linalg.matmul(_mT(vh), multiply(reshape(s, (s.shape[0], 1)), vh))
    else:
        p = _linalg.matmul(multiply(u, reshape(s, (1, s.shape[0]))), _mT(u))
    return unitary, p


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

# ------------------------------------------------------------------ special matrices


def block_diag(*arrs: Any) -> Any:
    """Block diagonal matrix of the arguments (0-d and 1-d arguments count as 1 x 1 and 1 x n blocks).

    >>> block_diag(fnp.ones((2, 2)), fnp.array([[3.0]])).shape
    (3, 3)
    """
    if not arrs:
        return lax.convert_element_type(np.zeros((1, 0)), np.float32)
    xs = promote(*[arr(a) for a in arrs])
    mats = []
    for x in xs:
        if x.ndim > 2:
            raise ValueError(f"scipy.linalg.block_diag: arguments must have at most 2 dimensions, got {describe(x)}")
        mats.append(reshape(x, (1,) * (2 - x.ndim) + x.shape))
    total = sum(m.shape[1] for m in mats)
    rows, col = [], 0
    from funcgrad.numpy._shape import pad
    for m in mats:
        rows.append(pad(m, ((0, 0), (col, total - col - m.shape[1]))))
        col += m.shape[1]
    return concatenate(rows, axis=0)


def _vec_last(name: str, x: Any) -> Any:
    x = arr(x)
    return x if x.ndim else reshape(x, (1,))


def toeplitz(c: Any, r: Any = None) -> Any:
    """Toeplitz matrix with first column ``c`` and first row ``r`` (default ``c``); batched over leading dims
    (as JAX: c (..., m), r (..., n) -> (..., m, n)).

    >>> toeplitz(fnp.array([1.0, 2.0, 3.0]))
    Array([[1., 2., 3.],
           [2., 1., 2.],
           [3., 2., 1.]], dtype=float32)
    """
    c = _vec_last("toeplitz", c)
    r = c if r is None else _vec_last("toeplitz", r)
    c, r = promote(c, r)
    m, n = c.shape[-1], r.shape[-1]
    batch = np.broadcast_shapes(c.shape[:-1], r.shape[:-1])
    c, r = broadcast_to(c, batch + (m,)), broadcast_to(r, batch + (n,))
    vals = concatenate([c[..., ::-1], r[..., 1:]], axis=-1)
    idx = (m - 1) - np.arange(m)[:, None] + np.arange(n)[None, :]
    return vals[..., idx]


def hankel(c: Any, r: Any = None) -> Any:
    """Hankel matrix with first column ``c`` and last row ``r`` (default zeros); batched as :func:`toeplitz`.

    >>> hankel(fnp.array([1.0, 2.0, 3.0]), fnp.array([3.0, 4.0, 5.0, 6.0]))
    Array([[1., 2., 3., 4.],
           [2., 3., 4., 5.],
           [3., 4., 5., 6.]], dtype=float32)
    """
    c = _vec_last("hankel", c)
    r = multiply(c, 0) if r is None else _vec_last("hankel", r)
    c, r = promote(c, r)
    m, n = c.shape[-1], r.shape[-1]
    batch = np.broadcast_shapes(c.shape[:-1], r.shape[:-1])
    c, r = broadcast_to(c, batch + (m,)), broadcast_to(r, batch + (n,))
    vals = concatenate([c, r[..., 1:]], axis=-1)
    idx = np.arange(m)[:, None] + np.arange(n)[None, :]
    return vals[..., idx]


def circulant(c: Any) -> Any:
    """Circulant matrix with first column ``c`` (..., n) -> (..., n, n).

    >>> circulant(fnp.array([1.0, 2.0, 3.0]))
    Array([[1., 3., 2.],
           [2., 1., 3.],
           [3., 2., 1.]], dtype=float32)
    """
    c = _vec_last("circulant", c)
    n = c.shape[-1]
    idx = (np.arange(n)[:, None] - np.arange(n)[None, :]) % n
    return c[..., idx]


def companion(a: ArrayLike) -> Any:
    """Companion matrix of the polynomial with coefficients ``a`` (n,), highest degree first: (n-1, n-1).

    >>> companion(fnp.array([1.0, 2.0, 3.0]))
    Array([[-2., -3.],
           [ 1.,  0.]], dtype=float32)
    """
    (a,) = promote_inexact(arr(a))
    if a.ndim != 1 or a.shape[0] < 2:
        raise ValueError(f"scipy.linalg.companion: expected a 1-d array of at least 2 coefficients, got {describe(a)}")
    n = a.shape[0]
    first = reshape(divide(-a[1:], a[0]), (1, n - 1))
    below = lax.convert_element_type(np.eye(n - 2, n - 1), a.dtype)
    return concatenate([first, below], axis=0)


def fiedler(a: ArrayLike) -> Any:
    """Fiedler matrix ``|a[i] - a[j]|`` of a 1-d array.

    >>> fiedler(fnp.array([1.0, 3.0, 7.0]))
    Array([[0., 2., 6.],
           [2., 0., 4.],
           [6., 4., 0.]], dtype=float32)
    """
    (a,) = promote_inexact(arr(a))
    if a.ndim != 1:
        raise ValueError(f"scipy.linalg.fiedler: expected a 1-d array, got {describe(a)}")
    return abs(subtract(reshape(a, (-1, 1)), reshape(a, (1, -1))))


def fiedler_companion(a: ArrayLike) -> Any:
    """Fiedler companion matrix of the polynomial coefficients ``a`` (n,) (``a[0]`` normalised to 1).

    >>> fiedler_companion(fnp.array([1.0, 2.0, 3.0, 4.0])).shape
    (3, 3)
    """
    (a,) = promote_inexact(arr(a))
    if a.ndim != 1 or a.shape[0] < 2:
        raise ValueError(f"scipy.linalg.fiedler_companion: expected a 1-d array of at least 2 coefficients, got "
                         f"{describe(a)}")
    n = a.shape[0]
    a = divide(a, a[0])
    if n == 2:
        return reshape(-a[1], (1, 1))
    # Every entry is a constant or -a[k]: the matrix is affine in a[1:], so build it from scipy's
    # matrices for unit coefficients (exact, differentiable).
    import scipy.linalg as _sl
    unit = np.eye(n)
    base = _sl.fiedler_companion(unit[0])
    total = lax.convert_element_type(base, a.dtype)
    for k in range(1, n):
        coeff = lax.convert_element_type(_sl.fiedler_companion(unit[0] + unit[k]) - base, a.dtype)
        total = total + multiply(coeff, a[k])
    return total


def hilbert(n: int) -> Any:
    """Hilbert matrix ``1 / (i + j + 1)``, (n, n), default float dtype.

    >>> hilbert(3)
    Array([[1.        , 0.5       , 0.3333],
           [0.5       , 0.3333, 0.25      ],
           [0.3333, 0.25      , 0.2       ]], dtype=float32)
    """
    i = np.arange(int(n))
    return _float_const(1.0 / (i[:, None] + i[None, :] + 1))


def _float_const(x: np.ndarray) -> Any:
    from funcgrad import _dtypes
    return lax.convert_element_type(np.asarray(x, np.float64), _dtypes.float_)


def invhilbert(n: int) -> Any:
    """Inverse of the (n, n) Hilbert matrix (exact formula, default float dtype).

    >>> invhilbert(2)
    Array([[ 4., -6.],
           [-6., 12.]], dtype=float32)
    """
    import scipy.linalg as _sl
    return _float_const(_sl.invhilbert(int(n)).astype(np.float64))


def pascal(n: int, kind: str | None = None) -> Any:
    """Pascal matrix (n, n): ``kind`` 'symmetric' (default), 'lower' or 'upper'; default float dtype.

    >>> pascal(3, "lower")
    Array([[1., 0., 0.],
           [1., 1., 0.],
           [1., 2., 1.]], dtype=float32)
    """
    kind = "symmetric" if kind is None else kind
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"scipy.linalg.pascal: kind must be 'symmetric', 'lower' or 'upper', got {kind!r}")
    import scipy.linalg as _sl
    return _float_const(_sl.pascal(int(n), kind=kind, exact=False))


def invpascal(n: int, kind: str | None = None) -> Any:
    """Inverse of the Pascal matrix (see :func:`pascal`); default float dtype.

    >>> invpascal(3)
    Array([[ 3., -3.,  1.],
           [-3.,  5., -2.],
           [ 1., -2.,  1.]], dtype=float32)
    """
    kind = "symmetric" if kind is None else kind
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"scipy.linalg.invpascal: kind must be 'symmetric', 'lower' or 'upper', got {kind!r}")
    import scipy.linalg as _sl
    return _float_const(_sl.invpascal(int(n), kind=kind, exact=False))


def hadamard(n: int, dtype: DTypeLike = int) -> Any:
    """Sylvester's Hadamard matrix (n, n), n a power of 2.

    >>> hadamard(2)
    Array([[ 1,  1],
           [ 1, -1]], dtype=int32)
    """
    n = int(n)
    if n < 1 or n & (n - 1):
        raise ValueError(f"scipy.linalg.hadamard: n must be a positive power of 2, got {n}")
    import scipy.linalg as _sl
    return lax.convert_element_type(_sl.hadamard(n, dtype=np.int64), dtype)


def helmert(n: int, full: bool = False) -> Any:
    """Helmert matrix: (n-1, n), or (n, n) with ``full``; default float dtype.

    >>> helmert(3).shape
    (2, 3)
    """
    import scipy.linalg as _sl
    return _float_const(_sl.helmert(int(n), full=bool(full)))


def leslie(f: Any, s: Any) -> Any:
    """Leslie matrix from fecundities ``f`` (n,) and survival rates ``s`` (n-1,): (n, n).

    >>> leslie(fnp.array([1.0, 2.0, 3.0]), fnp.array([0.5, 0.6]))
    Array([[1. , 2. , 3. ],
           [0.5, 0. , 0. ],
           [0. , 0.6, 0. ]], dtype=float32)
    """
    f, s = promote_inexact(arr(f), arr(s))
    if f.ndim != 1 or s.ndim != 1 or s.shape[0] != f.shape[0] - 1 or f.shape[0] < 1:
        raise ValueError(f"scipy.linalg.leslie: expected f (n,) and s (n-1,), got {describe(f)} and {describe(s)}")
    n = f.shape[0]
    below = multiply(reshape(s, (n - 1, 1)), lax.convert_element_type(np.eye(n - 1, n), f.dtype))
    return concatenate([reshape(f, (1, n)), below], axis=0)


def convolution_matrix(a: ArrayLike, n: int, mode: str = "full") -> Any:
    """Matrix ``M`` with ``M @ v == convolve(a, v, mode)`` for v of length ``n``.

    >>> convolution_matrix(fnp.array([1.0, 2.0, 3.0]), 4, "same").shape
    (4, 4)
    """
    (a,) = promote_inexact(arr(a))
    if a.ndim != 1 or a.shape[0] == 0:
        raise ValueError(f"scipy.linalg.convolution_matrix: expected a non-empty 1-d array, got {describe(a)}")
    n = int(n)
    if n <= 0:
        raise ValueError(f"scipy.linalg.convolution_matrix: n must be positive, got {n}")
    if mode not in ("full", "valid", "same"):
        raise ValueError(f"scipy.linalg.convolution_matrix: mode must be 'full', 'valid' or 'same', got {mode!r}")
    m = a.shape[0]
    rows = m + n - 1
    i = np.arange(rows)[:, None] - np.arange(n)[None, :]
    valid = (i >= 0) & (i < m)
    padded = concatenate([a, lax.convert_element_type(np.zeros(1), a.dtype)])
    full = padded[np.where(valid, i, m)]
    if mode == "full":
        return full
    if mode == "valid":
        lo, hi = _min(m, n) - 1, rows - (_min(m, n) - 1)
    else:
        lo = (rows - _max(m, n)) // 2
        hi = lo + _max(m, n)
    return full[lo:hi]

