"""``funcgrad.lax.linalg``: matrix decompositions, as ``jax.lax.linalg``.

Each function binds one primitive of ``funcgrad.primitives.decompositions`` (LAPACK through
numpy/scipy on the host, derivative rules written with primitives, batched over leading dims).

>>> import funcgrad.lax as lax, funcgrad.numpy as fnp
>>> L = lax.linalg.cholesky(fnp.array([[4.0, 2.0], [2.0, 3.0]]))   # lower factor
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._array import host_numpy
from funcgrad._core import Tracer, as_array
from funcgrad.primitives import decompositions as _D
from funcgrad.primitives.decompositions import cholesky_p, lu_p, permutation_matrix, qr_p, triangular_solve_p
from funcgrad.primitives.eigen import eig_p, eigh_p, hessenberg_p, schur_p, svd_p
from funcgrad.primitives.matrix_functions import expm_p, parlett_p, rsf2csf_p, sqrtm_p
from funcgrad.primitives.elementwise import add, conj, mul
from funcgrad.primitives.linalg import matmul
from funcgrad.primitives.shape import reshape, shape_of, transpose

Array = Any

# parlett_p, rsf2csf_p, sqrtm_p: forward-only primitives behind funcgrad.scipy.linalg's funm, rsf2csf and sqrtm
# (no jax.lax.linalg counterparts, so not in __all__).
_SCIPY_PRIMITIVES = (parlett_p, rsf2csf_p, sqrtm_p)

__all__ = ["cholesky", "eigh", "expm", "lu", "lu_pivots_to_permutation", "permutation_matrix", "qr", "svd",
           "triangular_solve",
           "cholesky_p", "eigh_p", "expm_p", "lu_p", "qr_p", "svd_p", "triangular_solve_p", "schur", "schur_p",
           "hessenberg_p", "tridiagonal_solve", "eig", "eig_p"]


def _T(x: Array) -> Array:
    nd = len(shape_of(x))
    return transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _checked(prim: Any, *args: Array, **params: Any) -> None:
    """Run the primitive's shape/dtype rule up front, so eager calls get its clear error too."""
    prim.abstract_eval(*args, **params)


def _symmetrize(x: Array) -> Array:
    return mul(add(x, _T(x)), 0.5)


def cholesky(x: Array, *, symmetrize_input: bool = True) -> Array:
    """Lower Cholesky factor of a symmetric positive definite (..., n, n) matrix; NaN if not positive definite.

    >>> cholesky(fnp.array([[4.0, 2.0], [2.0, 3.0]]))
    Array([[2.       , 0.       ],
           [1.       , 1.4142]], dtype=float32)
    """
    _checked(cholesky_p, x)
    return cholesky_p.bind(_symmetrize(x) if symmetrize_input else x)


def eigh(x: Array, *, lower: bool = True, symmetrize_input: bool = True, sort_eigenvalues: bool = True,
         subset_by_index: Any = None, implementation: Any = None) -> tuple[Array, Array]:
    """Eigenvectors and eigenvalues ``(v, w)`` of a symmetric (..., n, n) matrix, ascending eigenvalues.

    >>> v, w = eigh(fnp.array([[2.0, 1.0], [1.0, 2.0]]))   # w = [1, 3]
    """
    if subset_by_index is not None:
        raise NotImplementedError("eigh: subset_by_index is not supported; slice the full result")
    if not sort_eigenvalues:
        raise NotImplementedError("eigh: sort_eigenvalues=False is not supported (eigenvalues are always sorted)")
    if implementation is not None:
        raise NotImplementedError("eigh: implementation= is not supported (LAPACK is always used)")
    _checked(eigh_p, x)
    if symmetrize_input:
        x = _symmetrize(x)
    elif not lower:
        x = _T(x)
    w, v = eigh_p.bind(x)
    return v, w


def eig(x: Array, *, compute_left_eigenvectors: bool = True, compute_right_eigenvectors: bool = True,
        enable_eigvec_derivs: bool = False, implementation: Any = None, use_magma: Any = None) -> list:
    """Eigendecomposition of general square (..., n, n) matrices: ``[w, vl, vr]`` (the vectors as asked),
    complex (complex64 for float32 input, complex128 for float64). ``vr[..., :, j]`` is a right eigenvector
    (``x @ vr = vr * w``), ``vl[..., :, j]`` a left one (``vl^H x = w * vl^H``), each of unit norm with its
    largest component real (LAPACK geev). Eigenvalues are differentiable; eigenvectors only with
    ``enable_eigvec_derivs=True`` (as JAX: valid for distinct eigenvalues, through geev's normalisation).

    >>> w, vr = eig(fnp.array([[0.0, 1.0], [-1.0, 0.0]]), compute_left_eigenvectors=False)   # w = [1j, -1j]
    """
    if implementation is not None:
        raise NotImplementedError("eig: implementation= is not supported (LAPACK geev is always used)")
    params = dict(compute_left_eigenvectors=bool(compute_left_eigenvectors),
                  compute_right_eigenvectors=bool(compute_right_eigenvectors),
                  enable_eigvec_derivs=bool(enable_eigvec_derivs))
    _checked(eig_p, x, **params)
    return list(eig_p.bind(x, **params))


def lu(x: Array) -> tuple[Array, Array, Array]:
    """LU decomposition with partial pivoting of (..., m, n) matrices: ``(lu, pivots, permutation)``.

    ``x[permutation] == L @ U`` with ``L`` the unit lower triangle of ``lu`` and ``U`` its upper triangle.

    >>> lu_, piv, perm = lu(fnp.array([[1.0, 2.0], [3.0, 4.0]]))
    """
    _checked(lu_p, x)
    lu_, piv, perm = lu_p.bind(x)
    return lu_, piv, perm


def lu_pivots_to_permutation(pivots: Array, permutation_size: int) -> Array:
    """The permutation that LAPACK's row swaps (``pivots``, (..., k)) apply to ``arange(permutation_size)``.

    >>> lu_pivots_to_permutation(fnp.array([2, 2, 2], dtype=fnp.int32), 3)
    Array([2, 0, 1], dtype=int32)
    """
    if isinstance(pivots, Tracer):
        raise NotImplementedError("lu_pivots_to_permutation: pivots must be concrete (not traced) in funcgrad; "
                                  "use the permutation that lu returns")
    piv = host_numpy(pivots)
    batch = piv.shape[:-1]
    out = np.broadcast_to(np.arange(permutation_size, dtype=np.int32), batch + (permutation_size,)).copy()
    for idx in np.ndindex(*batch):
        perm = out[idx]
        for i, p in enumerate(piv[idx]):
            perm[i], perm[p] = perm[p], perm[i]
    return as_array(out)


def qr(x: Array, *, pivoting: bool = False, full_matrices: bool = True, use_magma: Any = None) -> Any:
    """QR decomposition ``(q, r)`` of a (..., m, n) matrix (``full_matrices``: q is m x m).

    >>> q, r = qr(fnp.ones((3, 2)), full_matrices=False)
    """
    if pivoting:
        raise NotImplementedError("qr: pivoting=True is not supported")
    _checked(qr_p, x, full_matrices=bool(full_matrices))
    q, r = qr_p.bind(x, full_matrices=bool(full_matrices))
    return q, r


def svd(x: Array, *, full_matrices: bool = True, compute_uv: bool = True, subset_by_index: Any = None,
        algorithm: Any = None) -> Any:
    """Singular value decomposition: ``(u, s, vh)`` or, with ``compute_uv=False``, ``s`` (descending).

    >>> u, s, vh = svd(fnp.ones((3, 2)), full_matrices=False)
    """
    if subset_by_index is not None:
        raise NotImplementedError("svd: subset_by_index is not supported; slice the full result")
    if algorithm is not None:
        raise NotImplementedError("svd: algorithm= is not supported (LAPACK gesdd is always used)")
    _checked(svd_p, x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    outs = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    if not compute_uv:
        return outs[0]
    s, u, vt = outs
    return u, s, vt


def triangular_solve(a: Array, b: Array, *, left_side: bool = False, lower: bool = False,
                     transpose_a: bool = False, conjugate_a: bool = False, unit_diagonal: bool = False) -> Array:
    """Solve ``op(a) @ x = b`` (``left_side``) or ``x @ op(a) = b`` with ``a`` (..., n, n) triangular
    (``op``: transpose if ``transpose_a``, complex conjugate if ``conjugate_a``, the identity on real arrays).

    >>> triangular_solve(fnp.eye(2), fnp.ones((2, 3)), left_side=True, lower=True)
    Array([[1., 1., 1.],
           [1., 1., 1.]], dtype=float32)
    """
    if conjugate_a and getattr(a, "dtype", np.dtype(float)).kind == "c":
        a = conj(a)
    if left_side:
        _checked(triangular_solve_p, a, b, lower=lower, transpose_a=transpose_a, unit_diagonal=unit_diagonal)
        return _D.triangular_solve(a, b, lower, transpose_a, unit_diagonal)
    if len(shape_of(b)) < 2:
        raise ValueError(f"triangular_solve: b must be a matrix or a stack of them, got shape {shape_of(b)}")
    _checked(triangular_solve_p, a, _T(b), lower=lower, transpose_a=transpose_a, unit_diagonal=unit_diagonal)
    return _T(_D.triangular_solve(a, _T(b), lower, not transpose_a, unit_diagonal))


def expm(x: Array) -> Array:
    """Matrix exponential of a (..., n, n) matrix (scipy's Pade approximation with scaling and squaring).

    >>> expm(fnp.zeros((2, 2)))   # identity
    Array([[1., 0.],
           [0., 1.]], dtype=float32)
    """
    _checked(expm_p, x)
    return expm_p.bind(x)


def schur(x: Array, *, compute_schur_vectors: bool = True, sort_eig_vals: bool = False,
          select_callable: Any = None) -> Any:
    """Schur decomposition ``(t, z)`` of a square (..., n, n) matrix: ``x = z @ t @ z^H`` (forward only); real
    (quasi-triangular ``t``) for a real ``x``, complex (triangular ``t``) for a complex one.

    >>> t, z = schur(fnp.array([[1.0, 2.0], [3.0, 4.0]]))
    """
    if sort_eig_vals or select_callable is not None:
        raise NotImplementedError("schur: sort_eig_vals / select_callable are not supported")
    _checked(schur_p, x)
    t, z = schur_p.bind(x)
    return (t, z) if compute_schur_vectors else t



def _dense_solve(a: Array, b: Array) -> Array:
    """x with a @ x = b through the LU primitive (differentiable); a (..., n, n), b (..., n, k)."""
    lu_, _, perm = lu_p.bind(a)
    y = _D.triangular_solve(lu_, matmul(permutation_matrix(perm, a.dtype), b), lower=True, unit_diagonal=True)
    return _D.triangular_solve(lu_, y, lower=False)


def tridiagonal_solve(dl: Array, d: Array, du: Array, b: Array, *, perturb_singular: bool = False) -> Array:
    """Solve a tridiagonal system: sub-diagonal ``dl``, diagonal ``d``, super-diagonal ``du`` (each (..., m);
    ``dl[..., 0]`` and ``du[..., -1]`` are ignored), right-hand sides ``b`` (..., m, n).

    Solved as a dense LU system (exact and differentiable; O(m^3), meant for moderate m).

    >>> tridiagonal_solve(fnp.zeros(3), 2 * fnp.ones(3), fnp.zeros(3), fnp.ones((3, 1)))   # all 0.5
    Array([[0.5],
           [0.5],
           [0.5]], dtype=float32)
    """
    if perturb_singular:
        raise NotImplementedError("tridiagonal_solve: perturb_singular=True is not supported")
    shapes = [shape_of(v) for v in (dl, d, du)]
    sb = shape_of(b)
    if len(set(shapes)) != 1 or len(shapes[0]) < 1 or len(sb) < 2 or sb[-2] != shapes[0][-1] \
            or sb[:-2] != shapes[0][:-1]:
        raise ValueError(f"tridiagonal_solve: expected dl, d, du of one shape (..., m) and b (..., m, n), got "
                         f"{shapes} and {sb}")
    m = shapes[0][-1]
    for v in (dl, d, du, b):
        if _dtypes.kind(v.dtype) != "f":
            raise TypeError(f"tridiagonal_solve: expected float arrays, got dtype {v.dtype}")
    batch = shapes[0][:-1]

    def band(v: Array, k: int) -> Array:
        # row i gets v[i] at column i + k (dl: k = -1 uses dl[i], du: k = 1 uses du[i])
        return mul(reshape(v, batch + (m, 1)), np.eye(m, k=k, dtype=v.dtype))

    a = add(add(band(d, 0), band(dl, -1)), band(du, 1))
    return _dense_solve(a, b)
