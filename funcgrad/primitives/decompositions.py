"""Matrix decompositions backed by LAPACK (through numpy.linalg / scipy.linalg), with derivative rules.

This module holds the shared helpers, the factorizations and the solves (triangular_solve, cholesky, lu,
qr); :mod:`funcgrad.primitives.eigen` the eigen- and singular-value ones (eigh, svd, eig, schur,
hessenberg); :mod:`funcgrad.primitives.matrix_functions` expm, sqrtm, rsf2csf and parlett.

Every primitive works on stacks of matrices (``(..., m, n)``: the impl loops over the leading
dimensions, so vmap just adds one), and its jvp and vjp rules are written with primitives
(matmul, triangular solves, the decompositions themselves), so they differentiate again.

* ``cholesky``: lower factor ``L`` of ``A = L L^T``; NaN where ``A`` is not positive definite (as JAX).
  Rules (Murray 2016): ``dL = L Phi(L^-1 dA L^-T)``, Phi = lower triangle with half the diagonal.
* ``triangular_solve``: ``op(A) X = B`` with ``A`` triangular (only that triangle is read); BLAS trsm,
  so a zero on the diagonal gives inf/NaN rather than an error (as JAX).
* ``lu``: ``A[perm] = L U`` ((..., m, n) matrices), outputs ``(lu, pivots, perm)`` as ``jax.lax.linalg.lu``.
* ``eigh``: ``(w, V)`` of a symmetric matrix (lower triangle read), eigenvalues ascending.
* ``svd``: ``(s, U, Vt)``, singular values descending; derivatives for the reduced decomposition.
* ``qr``: ``(Q, R)``; derivatives for ``m >= n`` reduced (or square).
* ``expm``: the matrix exponential (scipy); its derivative is the Frechet derivative, the upper-right
  block of ``expm([[A, E], [0, A]])`` (and the adjoint uses ``A^T``).
* ``eig``: eigenvalues and left/right eigenvectors of a general matrix (LAPACK geev), complex outputs;
  JAX's jvp rule (eigenvectors only with ``enable_eigvec_derivs``) and its transpose.
* ``schur``, ``hessenberg``, ``sqrtm``, ``rsf2csf``, ``parlett`` (funm's recurrence): forward only.

``lu``, ``triangular_solve``, ``eig``, ``schur``, ``hessenberg`` and ``sqrtm`` also take complex matrices;
their rules use plain transposes, which is JAX's cotangent convention for complex values (no conjugation).

Derivatives at repeated eigenvalues / singular values are undefined (the rules divide by their
differences and give inf/NaN), as in JAX; gauge-invariant functions of the vectors are fine elsewhere.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np
import scipy.linalg

from funcgrad import _dtypes
from funcgrad._core import Primitive
from funcgrad._dtypes import ShapedArray, describe, result_type
from funcgrad.primitives.elementwise import add, convert, eq_p, mul, neg, sub
from funcgrad.primitives.indexing import concatenate_p, static_slice
from funcgrad.primitives.linalg import matmul
from funcgrad.primitives.shape import broadcast_to, reduce_sum, reshape, shape_of, transpose, unbroadcast

__all__ = [
    "cholesky", "cholesky_p", "lu", "lu_p", "permutation_matrix", "qr", "qr_p", "triangular_solve",
    "triangular_solve_p",
]


# ------------------------------------------------------------------ helpers (written with primitives)


def _T(x: Any) -> Any:
    nd = len(shape_of(x))
    return transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _mask(x: Any, mask: np.ndarray) -> Any:
    return mul(x, mask.astype(x.dtype))


def _tril(x: Any, k: int = 0) -> Any:
    m, n = shape_of(x)[-2:]
    return _mask(x, np.tri(m, n, k, dtype=bool))


def _triu(x: Any, k: int = 0) -> Any:
    m, n = shape_of(x)[-2:]
    return _mask(x, ~np.tri(m, n, k - 1, dtype=bool))


def _eye(n: int, dtype: Any) -> np.ndarray:
    return np.eye(n, dtype=dtype)


def _diag(x: Any) -> Any:
    """(..., n, n) -> (..., n)."""
    n = shape_of(x)[-1]
    return reduce_sum(_mask(x, np.eye(n, dtype=bool)), (len(shape_of(x)) - 1,))


def _diag_embed(v: Any) -> Any:
    """(..., n) -> (..., n, n)."""
    s = shape_of(v)
    return mul(reshape(v, s + (1,)), _eye(s[-1], v.dtype))


def _row(v: Any) -> Any:
    """(..., k) -> (..., 1, k)."""
    s = shape_of(v)
    return reshape(v, s[:-1] + (1, s[-1]))


def _zeros_like(x: Any) -> Any:
    return mul(x, 0.0)


def _square(name: str, a: Any) -> int:
    s = shape_of(a)
    if len(s) < 2 or s[-1] != s[-2]:
        raise ValueError(f"{name}: expected a square matrix or a stack of them (shape (..., n, n)), got "
                         f"{describe(a)}")
    return s[-1]


def _float(name: str, *xs: Any) -> None:
    for x in xs:
        if _dtypes.kind(x.dtype) != "f":
            raise TypeError(f"{name}: expected float arrays, got {describe(x)}; convert with .astype(float)")


def _inexact(name: str, *xs: Any) -> None:
    for x in xs:
        if _dtypes.kind(x.dtype) not in "fc":
            raise TypeError(f"{name}: expected float or complex arrays, got {describe(x)}; convert with "
                            ".astype(float)")


# ------------------------------------------------------------------ impl helpers (numpy)


def _loop(fn: Callable, arrays: list[np.ndarray], core: list[int], n_out: int) -> Any:
    """Apply ``fn`` to each matrix of the broadcast leading dimensions; stack the outputs."""
    batch = np.broadcast_shapes(*[a.shape[:a.ndim - c] for a, c in zip(arrays, core)])
    arrays = [np.broadcast_to(a, batch + a.shape[a.ndim - c:]) for a, c in zip(arrays, core)]
    results = [fn(*[a[idx] for a in arrays]) for idx in np.ndindex(*batch)] if batch else None
    if not batch:
        out = fn(*arrays)
        return out
    if n_out == 1:
        return np.stack(results).reshape(batch + results[0].shape) if results else None
    return tuple(np.stack([r[i] for r in results]).reshape(batch + results[0][i].shape) for i in range(n_out))


def _empty_batch(batch: tuple) -> bool:
    return any(b == 0 for b in batch)


def _batch_front(prim: Primitive) -> Callable:
    """vmap rule: the mapped axis goes first (an unmapped operand gets a leading 1 that broadcasts)."""
    def rule(values, dims, size, **params):
        args = []
        for v, d in zip(values, dims):
            if d is None:
                args.append(reshape(v, (1,) + shape_of(v)))
            else:
                nd = len(shape_of(v))
                args.append(v if d == 0 else transpose(v, (d,) + tuple(i for i in range(nd) if i != d)))
        out = prim.bind(*args, **params)
        if prim.multiple_results:
            return out, [0] * len(out)
        return out, 0
    return rule


_HALF = (np.dtype(np.float16), _dtypes.bfloat16)


def _quiet(fn: Callable) -> Callable:
    """LAPACK's warnings silenced (a singular matrix gives inf/NaN, as in JAX); float16 and bfloat16
    computed in float32 (LAPACK has no half precision) and returned in their dtype."""
    def wrapped(*args, **kw):
        half = next((a.dtype for a in args if getattr(a, "dtype", None) in _HALF), None)
        if half is not None:
            args = tuple(a.astype(np.float32) if getattr(a, "dtype", None) == half else a for a in args)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            out = fn(*args, **kw)
        if half is not None:
            if isinstance(out, list):
                return [o.astype(half) if o.dtype == np.float32 else o for o in out]
            return out.astype(half) if out.dtype == np.float32 else out   # complex results stay complex
        return out
    return wrapped


# ================================================================== triangular_solve

triangular_solve_p = Primitive("triangular_solve")


def _trsm_one(a, b, lower, transpose_a, unit_diagonal):
    if a.shape[-1] == 0 or b.shape[-1] == 0:
        return np.zeros(b.shape, b.dtype)
    trsm = scipy.linalg.get_blas_funcs("trsm", (a, b))
    return trsm(1.0, a, b, side=0, lower=int(lower), trans_a=int(transpose_a), diag=int(unit_diagonal))


@_quiet
def _trsolve_impl(a, b, *, lower, transpose_a, unit_diagonal):
    dtype = np.result_type(a, b)
    a, b = np.asarray(a, dtype), np.asarray(b, dtype)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if _empty_batch(batch):
        return np.zeros(batch + b.shape[-2:], dtype)
    out = _loop(lambda x, y: _trsm_one(x, y, lower, transpose_a, unit_diagonal), [a, b], [2, 2], 1)
    return np.asarray(out, dtype)


def _trsolve_aval(a, b, *, lower, transpose_a, unit_diagonal):
    _inexact("triangular_solve", a, b)
    n = _square("triangular_solve", a)
    sb = shape_of(b)
    if len(sb) < 2 or sb[-2] != n:
        raise ValueError(f"triangular_solve: the right-hand side {describe(b)} must have shape (..., {n}, k) "
                         f"to match the matrix {describe(a)}")
    try:
        batch = np.broadcast_shapes(shape_of(a)[:-2], sb[:-2])
    except ValueError:
        raise ValueError(f"triangular_solve: batch dimensions of {describe(a)} and {describe(b)} cannot be "
                         "broadcast") from None
    return ShapedArray(tuple(batch) + sb[-2:], result_type(a, b))


def triangular_solve(a: Any, b: Any, lower: bool = True, transpose_a: bool = False,
                     unit_diagonal: bool = False) -> Any:
    """Solve ``op(a) @ x = b`` (``op`` = transpose when ``transpose_a``); ``a`` (..., n, n) triangular."""
    return triangular_solve_p.bind(a, b, lower=bool(lower), transpose_a=bool(transpose_a),
                                   unit_diagonal=bool(unit_diagonal))


def _tri_part(da: Any, lower: bool, unit_diagonal: bool) -> Any:
    k = -1 if unit_diagonal else 0
    return _tril(da, k) if lower else _triu(da, -k)


def _trsolve_jvp(primals, tangents, *, lower, transpose_a, unit_diagonal):
    a, b = primals
    ta, tb = tangents
    x = triangular_solve(a, b, lower, transpose_a, unit_diagonal)
    rhs = tb
    if ta is not None:
        da = _tri_part(ta, lower, unit_diagonal)
        term = matmul(_T(da) if transpose_a else da, x)
        rhs = neg(term) if rhs is None else sub(rhs, term)
    if rhs is None:
        return x, None
    t = triangular_solve(a, rhs, lower, transpose_a, unit_diagonal)
    return x, t


def _trsolve_vjp(ct, primals, out, needs, *, lower, transpose_a, unit_diagonal):
    a, b = primals
    cb = triangular_solve(a, ct, lower, not transpose_a, unit_diagonal)
    ca = None
    if needs[0]:
        g = matmul(cb, _T(out)) if not transpose_a else matmul(out, _T(cb))
        ca = unbroadcast(neg(_tri_part(g, lower, unit_diagonal)), shape_of(a))
    return ca, (unbroadcast(cb, shape_of(b)) if needs[1] else None)


triangular_solve_p.impl = _trsolve_impl
triangular_solve_p.abstract_eval = _trsolve_aval
triangular_solve_p.jvp, triangular_solve_p.vjp = _trsolve_jvp, _trsolve_vjp
triangular_solve_p.batch = _batch_front(triangular_solve_p)

# ================================================================== cholesky

cholesky_p = Primitive("cholesky")


def _chol_one(a):
    try:
        return np.tril(np.linalg.cholesky(a))
    except np.linalg.LinAlgError:
        return np.full(a.shape, np.nan, a.dtype)


@_quiet
def _chol_impl(a):
    if _empty_batch(a.shape[:-2]) or a.shape[-1] == 0:
        return np.zeros(a.shape, a.dtype)
    try:   # numpy's stacked LAPACK loop; one failing matrix fails the stack, then each gets its own answer
        return np.asarray(np.linalg.cholesky(a), a.dtype)
    except np.linalg.LinAlgError:
        return np.asarray(_loop(_chol_one, [a], [2], 1), a.dtype)


def _same_aval(name: str) -> Callable:
    def rule(a, **params):
        _float(name, a)
        _square(name, a)
        return ShapedArray(shape_of(a), a.dtype)
    return rule


def _phi(x: Any) -> Any:
    """Lower triangle with the diagonal halved."""
    n = shape_of(x)[-1]
    return _mask(x, np.tril(np.ones((n, n))) - 0.5 * np.eye(n))


def _chol_jvp(primals, tangents):
    (a,), (ta,) = primals, tangents
    L = cholesky_p.bind(a)
    # L^-1 dA L^-T
    tmp = triangular_solve(L, ta, lower=True)
    tmp = _T(triangular_solve(L, _T(tmp), lower=True))
    return L, matmul(L, _phi(tmp))


def _chol_vjp(ct, primals, L, needs):
    g = _phi(matmul(_T(L), ct))
    # L^-T g L^-1
    tmp = triangular_solve(L, g, lower=True, transpose_a=True)
    tmp = _T(triangular_solve(L, _T(tmp), lower=True, transpose_a=True))
    return (tmp,)


cholesky_p.impl = _chol_impl
cholesky_p.abstract_eval = _same_aval("cholesky")
cholesky_p.jvp, cholesky_p.vjp = _chol_jvp, _chol_vjp
cholesky_p.batch = _batch_front(cholesky_p)

# ================================================================== lu

lu_p = Primitive("lu", multiple_results=True)


def _lu_one(a):
    m, n = a.shape[-2:]
    k = min(m, n)
    perm = np.arange(m)
    if k == 0:
        return a.copy(), np.zeros(0, np.int32), perm.astype(np.int32)
    lu, piv = scipy.linalg.lu_factor(a, check_finite=False)
    for i, p in enumerate(piv):
        perm[i], perm[p] = perm[p], perm[i]
    return lu.astype(a.dtype), piv.astype(np.int32), perm.astype(np.int32)


@_quiet
def _lu_impl(a):
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    if _empty_batch(batch):
        return [np.zeros(a.shape, a.dtype), np.zeros(batch + (min(m, n),), np.int32),
                np.zeros(batch + (m,), np.int32)]
    return list(_loop(_lu_one, [a], [2], 3))


def _lu_aval(a):
    _inexact("lu", a)
    s = shape_of(a)
    if len(s) < 2:
        raise ValueError(f"lu: expected a matrix or a stack of them (shape (..., m, n)), got {describe(a)}")
    batch, (m, n) = s[:-2], s[-2:]
    return [ShapedArray(s, a.dtype), ShapedArray(batch + (min(m, n),), np.dtype(np.int32)),
            ShapedArray(batch + (m,), np.dtype(np.int32))]


def permutation_matrix(perm: Any, dtype: Any) -> Any:
    """(..., n) int permutation -> (..., n, n) matrix P with (P @ x) = x[perm].

    >>> permutation_matrix(fnp.array([1, 0], dtype=fnp.int32), np.float32)
    Array([[0., 1.],
           [1., 0.]], dtype=float32)
    """
    n = shape_of(perm)[-1]
    s = shape_of(perm)
    return convert(eq_p.bind(reshape(perm, s + (1,)), np.arange(n, dtype=np.int32)), dtype)


def _lu_parts(lu: Any) -> tuple[Any, Any]:
    """Square factors of an (m, n) ``lu``: L (m, m) unit lower, U (n, n) upper; the parts beyond
    k = min(m, n) are identity blocks (so both are invertible and L[:, :k] @ U[:k] is the product)."""
    m, n = shape_of(lu)[-2:]
    k = min(m, n)
    nd = len(shape_of(lu))
    low = _tril(lu, -1)
    if m > n:   # pad the columns of L to m
        low = concatenate_p.bind(low, broadcast_to(np.zeros((m, m - n), lu.dtype), shape_of(lu)[:-1] + (m - n,)),
                                 axis=nd - 1)
    else:
        low = static_slice(low, nd - 1, 0, m)
    up = _triu(lu)
    if n > m:   # pad the rows of U to n
        up = concatenate_p.bind(up, broadcast_to(np.zeros((n - m, n), lu.dtype), shape_of(lu)[:-2] + (n - m, n)),
                                axis=nd - 2)
    else:
        up = static_slice(up, nd - 2, 0, n)
    eye_u = np.eye(n, dtype=lu.dtype)
    eye_u[:k, :k] = 0.0
    return add(low, _eye(m, lu.dtype)), add(up, eye_u)


def _lu_jvp(primals, tangents):
    (a,), (ta,) = primals, tangents
    lu, piv, perm = lu_p.bind(a)
    L, U = _lu_parts(lu)
    P = permutation_matrix(perm, a.dtype)
    # F = L^-1 P dA U^-1
    f = triangular_solve(L, matmul(P, ta), lower=True, unit_diagonal=True)
    f = _T(triangular_solve(U, _T(f), lower=False, transpose_a=True))
    dlu = add(matmul(L, _tril(f, -1)), matmul(_triu(f), U))
    return [lu, piv, perm], [dlu, None, None]


def _lu_vjp(cts, primals, outs, needs):
    ct = cts[0]
    if ct is None:
        return (None,)
    lu, _, perm = outs
    L, U = _lu_parts(lu)
    g = add(_tril(matmul(_T(L), ct), -1), _triu(matmul(ct, _T(U))))
    # P^T L^-T G U^-T
    x = triangular_solve(L, g, lower=True, transpose_a=True, unit_diagonal=True)
    x = _T(triangular_solve(U, _T(x), lower=False))
    return (matmul(_T(permutation_matrix(perm, lu.dtype)), x),)


lu_p.impl, lu_p.abstract_eval = _lu_impl, _lu_aval
lu_p.jvp, lu_p.vjp = _lu_jvp, _lu_vjp
lu_p.batch = _batch_front(lu_p)

# ================================================================== qr

qr_p = Primitive("qr", multiple_results=True)


def _qr_shapes(shape, full_matrices):
    batch, (m, n) = shape[:-2], shape[-2:]
    k = m if full_matrices else min(m, n)
    return [batch + (m, k), batch + (k, n)]


@_quiet
def _qr_impl(a, *, full_matrices):
    shapes = _qr_shapes(a.shape, full_matrices)
    if any(d == 0 for d in a.shape):
        q = np.zeros(shapes[0], a.dtype)
        if shapes[0][-1] == shapes[0][-2] and not _empty_batch(shapes[0][:-2]):
            q = np.broadcast_to(np.eye(shapes[0][-1], dtype=a.dtype), shapes[0]).copy()
        return [q, np.zeros(shapes[1], a.dtype)]
    q, r = np.linalg.qr(a, mode="complete" if full_matrices else "reduced")
    return [np.asarray(q, a.dtype), np.asarray(r, a.dtype)]


def _qr_aval(a, *, full_matrices):
    _float("qr", a)
    if len(shape_of(a)) < 2:
        raise ValueError(f"qr: expected a matrix or a stack of them (shape (..., m, n)), got {describe(a)}")
    return [ShapedArray(s, a.dtype) for s in _qr_shapes(shape_of(a), full_matrices)]


def _qr_check(a, full_matrices):
    m, n = shape_of(a)[-2:]
    if m < n or (full_matrices and m != n):
        raise NotImplementedError(f"qr: derivatives are defined for m >= n with full_matrices=False (or a square "
                                  f"matrix), as in JAX; got {describe(a)} with full_matrices={full_matrices}")


def _qr_jvp(primals, tangents, *, full_matrices):
    (a,), (ta,) = primals, tangents
    _qr_check(a, full_matrices)
    q, r = qr_p.bind(a, full_matrices=full_matrices)
    y = _T(triangular_solve(r, _T(ta), lower=False, transpose_a=True))     # dA R^-1
    z = matmul(_T(q), y)
    lo = _tril(z, -1)
    do = sub(lo, _T(lo))
    dq = add(matmul(q, sub(do, z)), y)
    dr = matmul(sub(z, do), r)
    return [q, r], [dq, dr]


def _qr_vjp(cts, primals, outs, needs, *, full_matrices):
    (a,) = primals
    _qr_check(a, full_matrices)
    cq, cr = cts
    q, r = outs
    if cq is None and cr is None:
        return (None,)
    if cq is None:
        cq = _zeros_like(q)
    if cr is None:
        cr = _zeros_like(r)
    mm = sub(matmul(_T(q), cq), matmul(cr, _T(r)))
    cz = sub(_tril(sub(mm, _T(mm)), -1), mm)
    cy = add(cq, matmul(q, cz))
    # ct_A = ct_Y R^-T
    return (_T(triangular_solve(r, _T(cy), lower=False)),)


qr_p.impl, qr_p.abstract_eval = _qr_impl, _qr_aval
qr_p.jvp, qr_p.vjp = _qr_jvp, _qr_vjp
qr_p.batch = _batch_front(qr_p)

def cholesky(a: Any) -> Any:
    return cholesky_p.bind(a)


def lu(a: Any) -> Any:
    return lu_p.bind(a)


def qr(a: Any, full_matrices: bool = False) -> Any:
    return qr_p.bind(a, full_matrices=bool(full_matrices))


def _no_derivative(name: str) -> Callable:
    def rule(*args, **kw):
        raise NotImplementedError(f"{name}: derivatives are not implemented (as in JAX); differentiate a "
                                  "formulation through eigh/svd/qr instead")
    return rule
