"""Decompositions of ``funcgrad.scipy.linalg``: ``eigh``, ``eigh_tridiagonal``, ``svd``, ``qr``,
``qr_multiply``, ``schur``, ``rsf2csf``, ``hessenberg`` and ``polar``. Cholesky and LU (with their solves)
are in ``_solve``; matrix functions built on Schur in ``_matfuncs``; shared checks in ``_base``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad._dtypes import describe
from funcgrad.numpy._base import arr, promote_inexact
from funcgrad.numpy import _linalg, linalg as _nl
from funcgrad.numpy._elementwise import multiply
from funcgrad.numpy._shape import concatenate, ravel, reshape
from funcgrad import lax
from funcgrad.lax import linalg as _L
from funcgrad.scipy.linalg._base import _complex_dtype_of, _max, _min, _mT, _square
from funcgrad.typing import ArrayLike


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
