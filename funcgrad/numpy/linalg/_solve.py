"""Solves, inverses and determinants of ``funcgrad.numpy.linalg``: ``solve``, ``inv``, ``det`` (with
its cofactor derivative rule), ``slogdet``, ``pinv`` (with its derivative rule), ``lstsq``, ``tensorinv``
and ``tensorsolve``. Decompositions are in ``_decomp``, shared helpers in ``_base``; products in
``_products``, norms in ``_norms``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._dtypes import describe
from funcgrad.numpy._base import arr, promote_inexact
from funcgrad.numpy._elementwise import abs, divide, log, multiply, sign, where
from funcgrad.numpy._reductions import prod, sum
from funcgrad.numpy._shape import broadcast_to, ravel, reshape
from funcgrad.numpy import _linalg
from funcgrad import lax
from funcgrad.lax import linalg as _L
from funcgrad.numpy.linalg._base import SlogdetResult, _concrete, _diag, _eye_like, _matrix, _mT, max_, min_
from funcgrad.typing import Array, ArrayLike


def _lu_solve(lu: Any, perm: Any, b: Any) -> Any:
    """x with a x = b from a[perm] = L U; b is (..., n, k)."""
    P = _L.permutation_matrix(perm, lu.dtype)
    y = _L.triangular_solve(lu, _linalg.matmul(P, b), left_side=True, lower=True, unit_diagonal=True)
    return _L.triangular_solve(lu, y, left_side=True, lower=False)


def solve(a: ArrayLike, b: ArrayLike) -> Array:
    """Solve ``a @ x = b``: a (..., n, n); b (n,) (a vector) or (..., n, k) (batch dims broadcast).
    A singular ``a`` gives inf/NaN (numpy raises LinAlgError).

    >>> solve(fnp.array([[2.0, 0.0], [0.0, 4.0]]), fnp.array([2.0, 2.0]))
    Array([1. , 0.5], dtype=float32)
    """
    a, b = promote_inexact(arr(a), arr(b))
    a = _matrix("solve", a, square=True)
    n = a.shape[-1]
    if b.ndim == 1:
        if b.shape[0] != n:
            raise ValueError(f"linalg.solve: the right-hand side {describe(b)} must have length {n} to match "
                             f"{describe(a)}")
        lu, _, perm = _L.lu(a)
        return reshape(_lu_solve(lu, perm, reshape(b, (n, 1))), a.shape[:-2] + (n,))
    if b.ndim < 2 or b.shape[-2] != n:
        raise ValueError(f"linalg.solve: the right-hand side {describe(b)} must have shape (n,) or (..., n, k) "
                         f"with n = {n} to match {describe(a)}")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"linalg.solve: batch dimensions of {describe(a)} and {describe(b)} cannot be "
                         "broadcast") from None
    lu, _, perm = _L.lu(a)
    return _lu_solve(lu, perm, b)


def inv(a: ArrayLike) -> Array:
    """Inverse of square matrices (..., n, n); inf/NaN for a singular matrix (numpy raises).

    >>> inv(fnp.array([[2.0, 0.0], [0.0, 4.0]]))
    Array([[0.5 , 0.  ],
           [0.  , 0.25]], dtype=float32)
    """
    a = _matrix("inv", a, square=True)
    lu, _, perm = _L.lu(a)
    return _lu_solve(lu, perm, _eye_like(a))


def _lu_sign_diag(a: Any) -> tuple[Any, Any]:
    lu, piv, _ = _L.lu(a)
    n = a.shape[-1]
    swaps = sum(lax.convert_element_type(lax.ne_p.bind(piv, np.arange(n, dtype=np.int32)), np.int32), axis=-1)
    parity = lax.convert_element_type(1 - 2 * (swaps % 2), a.dtype)
    return parity, _diag(lu)


def _det_lu(a: Any) -> Any:
    parity, d = _lu_sign_diag(a)
    return multiply(parity, prod(d, axis=-1))


def _cofactor_solve(a: Any, b: Any) -> tuple[Any, Any]:
    """``(det(a), adj(a) @ b)`` for square a (..., n, n), n >= 2, finite where a has rank n - 1 too (JAX's
    cofactor solve: the LU factors with the last pivot replaced, so a singular a needs no division by 0)."""
    n = a.shape[-1]
    lu, piv, perm = _L.lu(a)
    diag = _diag(lu)
    swaps = sum(lax.convert_element_type(lax.ne_p.bind(piv, np.arange(n, dtype=np.int32)), np.int32), axis=-1)
    sign_ = lax.convert_element_type(1 - 2 * (swaps % 2), a.dtype)
    det_all = multiply(sign_, prod(diag, axis=-1))
    det_head = multiply(sign_, prod(diag[..., :-1], axis=-1))            # det(U) / u_nn, with the sign
    corner = np.zeros((n, n))
    corner[-1, -1] = 1.0
    corner = lax.convert_element_type(corner, a.dtype)
    lu = lu * (1.0 - corner) + corner * reshape(divide(1.0, det_head), det_head.shape + (1, 1))
    # matrices of rank < n - 1 have a zero adjugate: find them by a solve that overflows
    probe = _L.triangular_solve(lu, broadcast_to(lax.convert_element_type(np.ones((1, n)), a.dtype),
                                                  lu.shape[:-2] + (1, n)), left_side=False, lower=False)
    bad = lax.convert_element_type(lax.ne_p.bind(sum(lax.convert_element_type(
        lax.ne_p.bind(lax.isfinite_p.bind(probe), True), a.dtype), axis=(-2, -1)), 0), np.bool_)
    bad = reshape(bad, bad.shape + (1, 1))
    x = where(bad, 0.0, b)
    x = _linalg.matmul(_L.permutation_matrix(perm, a.dtype), x)
    x = _L.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
    scale = broadcast_to(reshape(det_all, det_all.shape + (1, 1)), det_all.shape + (n - 1, 1))
    ones = broadcast_to(lax.convert_element_type(np.ones((1, 1)), a.dtype), det_all.shape + (1, 1))
    from funcgrad.numpy._shape import concatenate
    x = x * concatenate([scale, ones], axis=-2)
    x = _L.triangular_solve(lu, x, left_side=True, lower=False)
    return det_all, where(bad, 0.0, x)


def _det_custom(a: Any) -> Any:
    return _det_lu(a)


def _det_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    (a,), (g,) = primals, tangents
    with np.errstate(all="ignore"):     # the inf/NaN of a rank < n - 1 matrix are filtered out
        y, z = _cofactor_solve(a, g)
    return y, sum(_diag(z), axis=-1)


def _make_det() -> Any:
    from funcgrad._custom_rules import custom_jvp
    f = custom_jvp(_det_custom)
    f.defjvp(_det_jvp)
    return f


_det_with_rule = _make_det()


def det(a: ArrayLike) -> Array:
    """Determinant of square matrices: (..., n, n) -> (...), through the LU decomposition. Its derivative
    is ``trace(adj(a) @ da)`` (as JAX: finite at singular matrices of rank n - 1 too).

    >>> det(fnp.array([[1.0, 2.0], [3.0, 4.0]]))
    Array(-2.0000, dtype=float32)
    """
    a = _matrix("det", a, square=True)
    if a.shape[-1] < 2:
        return _det_lu(a)
    return _det_with_rule(a)


def slogdet(a: ArrayLike, *, method: str | None = None) -> SlogdetResult:
    """Sign and log of the absolute determinant: ``SlogdetResult(sign, logabsdet)``, each (...).
    A singular matrix gives sign 0 and logabsdet -inf.

    >>> slogdet(fnp.array([[1.0, 2.0], [3.0, 4.0]]))   # sign -1, logabsdet log(2)
    SlogdetResult(sign=Array(-1., dtype=float32), logabsdet=Array(0.6931, dtype=float32))
    """
    if method not in (None, "lu"):
        raise NotImplementedError(f"linalg.slogdet: method={method!r} is not supported; use method='lu' "
                                  "(the default)")
    a = _matrix("slogdet", a, square=True)
    parity, d = _lu_sign_diag(a)
    s = multiply(parity, prod(sign(d), axis=-1))
    return SlogdetResult(s, sum(log(abs(d)), axis=-1))


def pinv(a: ArrayLike, rtol: Any = None, hermitian: bool = False, *, rcond: Any = None) -> Array:
    """Moore-Penrose pseudo-inverse through the SVD: (..., m, n) -> (..., n, m). Singular values at or
    below ``rtol * largest`` (default ``10 * max(m, n) * eps``) count as zero. Its derivative is the
    pseudo-inverse's own (as JAX), finite for rank-deficient matrices too.

    >>> pinv(fnp.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])).shape
    (2, 3)
    """
    if rcond is not None:
        if rtol is not None:
            raise ValueError("linalg.pinv: only one of rtol and rcond may be specified")
        rtol = rcond
    a = _matrix("pinv", a)
    if rtol is None:
        rtol = 10.0 * max_(a.shape[-2:]) * float(_dtypes.finfo(a.dtype).eps)
    rtol = arr(rtol) if not isinstance(rtol, (int, float)) else float(rtol)
    return _pinv_with_rule(a, rtol)


def _pinv_plain(a: Any, rtol: Any) -> Any:
    u, s, vh = _L.svd(a, full_matrices=False)
    if not isinstance(rtol, float):
        rtol = reshape(rtol, rtol.shape + (1,))
    cutoff = multiply(rtol, s[..., 0:1])
    s = where(lax.gt_p.bind(s, cutoff), s, np.inf)
    s = lax.convert_element_type(s, a.dtype)
    return _linalg.matmul(_mT(vh), divide(_mT(u), reshape(s, s.shape + (1,))))


def _pinv_jvp(rtol: Any, primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    # Golub & Pereyra's derivative of the pseudo-inverse (as JAX): finite for rank-deficient a too.
    (a,), (da,) = primals, tangents
    p = _pinv_plain(a, rtol)
    mm = _linalg.matmul
    eye_m = lax.convert_element_type(np.eye(a.shape[-2]), a.dtype)
    eye_n = lax.convert_element_type(np.eye(a.shape[-1]), a.dtype)
    da_t = _mT(da)
    dp = (-mm(mm(p, da), p)
          + mm(mm(mm(p, _mT(p)), da_t), eye_m - mm(a, p))
          + mm(mm(mm(eye_n - mm(p, a), da_t), _mT(p)), p))
    return p, dp


def _make_pinv() -> Any:
    from funcgrad._custom_rules import custom_jvp
    f = custom_jvp(_pinv_plain, nondiff_argnums=(1,))
    f.defjvp(_pinv_jvp)
    return f


_pinv_with_rule = _make_pinv()


def lstsq(a: ArrayLike, b: ArrayLike, rcond: Any = None, *, numpy_resid: bool = False) -> tuple[Any, Any, Any, Any]:
    """Least-squares solution of ``a @ x = b`` through the SVD: ``(x, residuals, rank, s)``.
    a (m, n); b (m,) or (m, k). Residuals are always computed (``numpy_resid=True``: empty when
    ``rank < n`` or ``m <= n``, as numpy; needs concrete values).

    >>> x, resid, rank, s = lstsq(fnp.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), fnp.array([1.0, 1.0, 2.0]))
    """
    a, b = promote_inexact(arr(a), arr(b))
    if a.ndim != 2:
        raise ValueError(f"linalg.lstsq: a must be a 2-d matrix, got {describe(a)}")
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ValueError(f"linalg.lstsq: b must be (m,) or (m, k) with m = {a.shape[0]} rows of a {describe(a)}, "
                         f"got {describe(b)}")
    b_ndim = b.ndim
    if b_ndim == 1:
        b = reshape(b, (b.shape[0], 1))
    m, n = a.shape
    dtype = a.dtype
    eps = float(_dtypes.finfo(dtype).eps)
    u, s, vt = _L.svd(a, full_matrices=False)
    if rcond is None:
        rcond = eps * max_(n, m)
    elif _concrete(rcond) and not isinstance(rcond, (int, float)):
        rcond = float(np.asarray(rcond))
    if isinstance(rcond, (int, float)) and rcond < 0:
        rcond = eps
    if min_(m, n) == 0:
        mask = s > 0.0
    else:
        mask = s >= multiply(rcond, s[0])
    rank = sum(mask)
    safe_s = where(mask, s, 1.0)
    s_inv = reshape(where(mask, divide(1.0, safe_s), 0.0), (s.shape[0], 1))
    x = _linalg.matmul(_mT(vt), multiply(s_inv, _linalg.matmul(_mT(u), b)))
    if numpy_resid:
        if not _concrete(rank):
            raise NotImplementedError("linalg.lstsq: numpy_resid=True needs a concrete rank (not under jit/vmap)")
        rank_value = int(np.asarray(rank))
        use_empty = rank_value < n or m <= n
    else:
        use_empty = False
    if use_empty:
        resid = lax.convert_element_type(np.zeros((0,)), dtype)
    else:
        r = b - _linalg.matmul(a, x)
        resid = sum(multiply(r, r), axis=0)
    if b_ndim == 1:
        x = ravel(x)
    return x, resid, rank, s


def tensorinv(a: ArrayLike, ind: int = 2) -> Any:
    """Inverse of a tensor seen as a matrix: shape ``a.shape[ind:] + a.shape[:ind]``.

    >>> tensorinv(fnp.eye(4).reshape(4, 2, 2), ind=1).shape
    (2, 2, 4)
    """
    a = arr(a)
    ind = int(ind)
    if ind <= 0:
        raise ValueError(f"linalg.tensorinv: ind must be a positive integer, got {ind}")
    rows, cols = a.shape[:ind], a.shape[ind:]
    r, c = int(np.prod(rows)), int(np.prod(cols))
    if r != c:
        raise ValueError(f"linalg.tensorinv: prod(a.shape[:ind]) = {r} must equal prod(a.shape[ind:]) = {c} "
                         f"for {describe(a)} with ind={ind}")
    return reshape(inv(reshape(a, (r, c))), cols + rows)


def tensorsolve(a: ArrayLike, b: ArrayLike, axes: Any = None) -> Any:
    """Solve ``tensordot(a, x, x.ndim) = b`` for x (shape ``a.shape[b.ndim:]``).

    >>> tensorsolve(fnp.eye(6).reshape(6, 2, 3), fnp.ones(6)).shape
    (2, 3)
    """
    a, b = promote_inexact(arr(a), arr(b))
    if axes is not None:
        axes = [ax % a.ndim for ax in ((axes,) if isinstance(axes, int) else axes)]
        rest = [i for i in range(a.ndim) if i not in axes]
        a = lax.transpose(a, tuple(rest + axes))
    out_shape = a.shape[b.ndim:]
    if a.shape[:b.ndim] != b.shape:
        raise ValueError(f"linalg.tensorsolve: the leading axes of {describe(a)} must match b {describe(b)}")
    r, c = int(np.prod(b.shape)), int(np.prod(out_shape))
    if r != c:
        raise ValueError(f"linalg.tensorsolve: a {describe(a)} is not square as a ({r}, {c}) matrix")
    return reshape(solve(reshape(a, (r, c)), ravel(b)), out_shape)
