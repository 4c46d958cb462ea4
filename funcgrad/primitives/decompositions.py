"""Matrix decompositions backed by LAPACK (through numpy.linalg / scipy.linalg), with derivative rules.

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

from funcgrad._core import Primitive
from funcgrad._dtypes import ShapedArray, describe, result_type
from funcgrad.primitives.elementwise import (abs_p, add, complex_, conj, convert, div, eq_p, imag, mul, neg, real,
                                            sub)
from funcgrad.primitives.reduce import argmax_p
from funcgrad.primitives.indexing import concatenate_p, static_slice
from funcgrad.primitives.linalg import matmul
from funcgrad.primitives.shape import broadcast_to, reduce_sum, reshape, shape_of, transpose, unbroadcast

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
        if x.dtype.kind != "f":
            raise TypeError(f"{name}: expected float arrays, got {describe(x)}; convert with .astype(float)")


def _inexact(name: str, *xs: Any) -> None:
    for x in xs:
        if x.dtype.kind not in "fc":
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


def _quiet(fn: Callable) -> Callable:
    """LAPACK's warnings silenced (a singular matrix gives inf/NaN, as in JAX); float16 computed in float32
    (LAPACK has no half precision) and returned as float16."""
    def wrapped(*args, **kw):
        half = any(getattr(a, "dtype", None) == np.float16 for a in args)
        if half:
            args = tuple(a.astype(np.float32) if getattr(a, "dtype", None) == np.float16 else a for a in args)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            out = fn(*args, **kw)
        if half:
            if isinstance(out, list):
                return [o.astype(np.float16) if o.dtype == np.float32 else o for o in out]
            return out.astype(np.float16)
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

    >>> permutation_matrix(fnp.array([1, 0], dtype=fnp.int32), np.float32)   # [[0, 1], [1, 0]]
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

# ================================================================== eigh

eigh_p = Primitive("eigh", multiple_results=True)


def _eigh_one(a):
    try:
        return np.linalg.eigh(a, UPLO="L")
    except np.linalg.LinAlgError:
        return np.full(a.shape[-1:], np.nan, a.dtype), np.full(a.shape, np.nan, a.dtype)


@_quiet
def _eigh_impl(a):
    batch, n = a.shape[:-2], a.shape[-1]
    if _empty_batch(batch) or n == 0:
        return [np.zeros(batch + (n,), a.dtype), np.zeros(a.shape, a.dtype)]
    try:
        w, v = np.linalg.eigh(a, UPLO="L")
    except np.linalg.LinAlgError:
        w, v = _loop(_eigh_one, [a], [2], 2)
    return [np.asarray(w, a.dtype), np.asarray(v, a.dtype)]


def _eigh_aval(a):
    _float("eigh", a)
    n = _square("eigh", a)
    return [ShapedArray(shape_of(a)[:-2] + (n,), a.dtype), ShapedArray(shape_of(a), a.dtype)]


def _gap_inverse(w: Any) -> Any:
    """F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it."""
    n = shape_of(w)[-1]
    eye = _eye(n, w.dtype)
    diff = sub(_row(w), _T(_row(w)))
    return sub(div(1.0, add(diff, eye)), eye)


def _eigh_jvp(primals, tangents):
    (a,), (ta,) = primals, tangents
    w, v = eigh_p.bind(a)
    s = matmul(_T(v), matmul(ta, v))
    dw = _diag(s)
    dv = matmul(v, mul(_gap_inverse(w), s))
    return [w, v], [dw, dv]


def _eigh_vjp(cts, primals, outs, needs):
    cw, cv = cts
    w, v = outs
    inner = None
    if cw is not None:
        inner = _diag_embed(cw)
    if cv is not None:
        term = mul(_gap_inverse(w), matmul(_T(v), cv))
        inner = term if inner is None else add(inner, term)
    if inner is None:
        return (None,)
    return (matmul(v, matmul(inner, _T(v))),)


eigh_p.impl, eigh_p.abstract_eval = _eigh_impl, _eigh_aval
eigh_p.jvp, eigh_p.vjp = _eigh_jvp, _eigh_vjp
eigh_p.batch = _batch_front(eigh_p)

# ================================================================== svd

svd_p = Primitive("svd", multiple_results=True)


def _svd_one(a, full_matrices, compute_uv):
    try:
        if compute_uv:
            u, s, vt = np.linalg.svd(a, full_matrices=full_matrices)
            return s, u, vt
        return (np.linalg.svd(a, compute_uv=False),)
    except np.linalg.LinAlgError:
        m, n = a.shape
        k = min(m, n)
        s = np.full((k,), np.nan, a.dtype)
        if not compute_uv:
            return (s,)
        um, vn = (m, n) if full_matrices else (k, k)
        return s, np.full((m, um), np.nan, a.dtype), np.full((vn, n), np.nan, a.dtype)


def _svd_shapes(shape, full_matrices, compute_uv):
    batch, (m, n) = shape[:-2], shape[-2:]
    k = min(m, n)
    shapes = [batch + (k,)]
    if compute_uv:
        shapes += [batch + (m, m if full_matrices else k), batch + (n if full_matrices else k, n)]
    return shapes


@_quiet
def _svd_impl(a, *, full_matrices, compute_uv):
    shapes = _svd_shapes(a.shape, full_matrices, compute_uv)
    if any(d == 0 for d in a.shape):
        outs = [np.zeros(s, a.dtype) for s in shapes]
        if compute_uv and full_matrices:   # identity factors for an empty matrix's missing part
            for i in (1, 2):
                if outs[i].shape[-1] == outs[i].shape[-2] and not _empty_batch(outs[i].shape[:-2]):
                    outs[i] = np.broadcast_to(np.eye(outs[i].shape[-1], dtype=a.dtype), outs[i].shape).copy()
        return outs
    def one(x):
        return _svd_one(x, full_matrices, compute_uv)
    try:
        if compute_uv:
            u, s, vt = np.linalg.svd(a, full_matrices=full_matrices)
            out = [s, u, vt]
        else:
            out = [np.linalg.svd(a, compute_uv=False)]
    except np.linalg.LinAlgError:
        if len(shapes) == 1:
            out = [_loop(lambda x: one(x)[0], [a], [2], 1)]
        else:
            out = list(_loop(one, [a], [2], len(shapes)))
    return [np.asarray(o, a.dtype) for o in out]


def _svd_aval(a, *, full_matrices, compute_uv):
    _float("svd", a)
    if len(shape_of(a)) < 2:
        raise ValueError(f"svd: expected a matrix or a stack of them (shape (..., m, n)), got {describe(a)}")
    return [ShapedArray(s, a.dtype) for s in _svd_shapes(shape_of(a), full_matrices, compute_uv)]


def _svd_jvp(primals, tangents, *, full_matrices, compute_uv):
    (a,), (ta,) = primals, tangents
    m, n = shape_of(a)[-2:]
    if full_matrices and compute_uv and m != n:
        raise NotImplementedError("svd: derivatives of the full_matrices=True decomposition of a non-square "
                                  "matrix are not defined (as in JAX); use full_matrices=False")
    s, u, vt = svd_p.bind(a, full_matrices=False, compute_uv=True)
    v = _T(vt)
    ds_mat = matmul(_T(u), matmul(ta, v))
    ds = _diag(ds_mat)
    if not compute_uv:
        return [s], [ds]
    sr = _row(s)
    k = shape_of(s)[-1]
    eye = _eye(k, a.dtype)
    f = sub(div(1.0, add(mul(add(sr, _T(sr)), sub(sr, _T(sr))), eye)), eye)
    dss = mul(sr, ds_mat)
    sds = mul(_T(sr), ds_mat)
    du = matmul(u, mul(f, add(dss, _T(dss))))
    dv = matmul(v, mul(f, add(sds, _T(sds))))
    if m > n:
        dav = matmul(ta, v)
        du = add(du, div(sub(dav, matmul(u, matmul(_T(u), dav))), sr))
    if n > m:
        dau = matmul(_T(ta), u)
        dv = add(dv, div(sub(dau, matmul(v, matmul(vt, dau))), sr))
    return [s, u, vt], [ds, du, _T(dv)]


def _svd_vjp(cts, primals, outs, needs, *, full_matrices, compute_uv):
    (a,) = primals
    m, n = shape_of(a)[-2:]
    cs = cts[0]
    cu = cts[1] if compute_uv else None
    cvt = cts[2] if compute_uv else None
    if cu is None and cvt is None:
        if cs is None:
            return (None,)
        if compute_uv:
            s, u, vt = outs
        else:
            s, u, vt = svd_p.bind(a, full_matrices=False, compute_uv=True)
        if full_matrices and compute_uv and m != n:
            k = min(m, n)
            u, vt = static_slice(u, len(shape_of(u)) - 1, 0, k), static_slice(vt, len(shape_of(vt)) - 2, 0, k)
        return (matmul(u, mul(_T(_row(cs)), vt)),)
    if full_matrices and m != n:
        raise NotImplementedError("svd: derivatives of the full_matrices=True decomposition of a non-square "
                                  "matrix are not defined (as in JAX); use full_matrices=False")
    s, u, vt = outs
    v = _T(vt)
    sr = _row(s)
    k = shape_of(s)[-1]
    eye = _eye(k, a.dtype)
    f = sub(div(1.0, add(mul(add(sr, _T(sr)), sub(sr, _T(sr))), eye)), eye)
    cds = _diag_embed(cs) if cs is not None else None
    extra = None
    if cu is not None:
        j = mul(f, matmul(_T(u), cu))
        term = mul(add(j, _T(j)), sr)
        cds = term if cds is None else add(cds, term)
        if m > n:
            extra = matmul(div(sub(cu, matmul(u, matmul(_T(u), cu))), sr), vt)
    if cvt is not None:
        cv = _T(cvt)
        kk = mul(f, matmul(vt, cv))
        term = mul(_T(sr), add(kk, _T(kk)))
        cds = term if cds is None else add(cds, term)
        if n > m:
            t2 = matmul(u, _T(div(sub(cv, matmul(v, matmul(vt, cv))), sr)))
            extra = t2 if extra is None else add(extra, t2)
    out = matmul(u, matmul(cds, vt))
    return (out if extra is None else add(out, extra),)


svd_p.impl, svd_p.abstract_eval = _svd_impl, _svd_aval
svd_p.jvp, svd_p.vjp = _svd_jvp, _svd_vjp
svd_p.batch = _batch_front(svd_p)

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

# ================================================================== expm

expm_p = Primitive("expm")


@_quiet
def _expm_impl(a):
    if _empty_batch(a.shape[:-2]) or a.shape[-1] == 0:
        return np.zeros(a.shape, a.dtype)
    return np.asarray(_loop(scipy.linalg.expm, [a], [2], 1), a.dtype)


def _frechet(a: Any, e: Any) -> Any:
    """L(A, E) = the upper-right block of expm([[A, E], [0, A]])."""
    nd = len(shape_of(a))
    n = shape_of(a)[-1]
    top = concatenate_p.bind(a, e, axis=nd - 1)
    bottom = concatenate_p.bind(_zeros_like(a), a, axis=nd - 1)
    big = expm_p.bind(concatenate_p.bind(top, bottom, axis=nd - 2))
    return static_slice(static_slice(big, nd - 2, 0, n), nd - 1, n, 2 * n)


def _expm_jvp(primals, tangents):
    (a,), (ta,) = primals, tangents
    return expm_p.bind(a), _frechet(a, ta)


def _expm_vjp(ct, primals, out, needs):
    return (_frechet(_T(primals[0]), ct),)


expm_p.impl, expm_p.abstract_eval = _expm_impl, _same_aval("expm")
expm_p.jvp, expm_p.vjp = _expm_jvp, _expm_vjp
expm_p.batch = _batch_front(expm_p)


def cholesky(a: Any) -> Any:
    return cholesky_p.bind(a)


def lu(a: Any) -> Any:
    return lu_p.bind(a)


def eigh(a: Any) -> Any:
    return eigh_p.bind(a)


def svd(a: Any, full_matrices: bool = False, compute_uv: bool = True) -> Any:
    return svd_p.bind(a, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))


def qr(a: Any, full_matrices: bool = False) -> Any:
    return qr_p.bind(a, full_matrices=bool(full_matrices))


def expm(a: Any) -> Any:
    return expm_p.bind(a)


__all__ = ["cholesky", "cholesky_p", "eigh", "eigh_p", "expm", "expm_p", "lu", "lu_p", "permutation_matrix", "qr",
           "qr_p", "svd", "svd_p", "triangular_solve", "triangular_solve_p"]

# ================================================================== schur, hessenberg (forward only)


def _no_derivative(name: str) -> Callable:
    def rule(*args, **kw):
        raise NotImplementedError(f"{name}: derivatives are not implemented (as in JAX); differentiate a "
                                  "formulation through eigh/svd/qr instead")
    return rule


def _two_square_avals(name: str) -> Callable:
    def rule(a, **params):
        _inexact(name, a)
        _square(name, a)
        return [ShapedArray(shape_of(a), a.dtype), ShapedArray(shape_of(a), a.dtype)]
    return rule


schur_p = Primitive("schur", multiple_results=True)


@_quiet
def _schur_impl(a):
    if _empty_batch(a.shape[:-2]) or a.shape[-1] == 0:
        return [np.zeros(a.shape, a.dtype), np.zeros(a.shape, a.dtype)]
    t, z = _loop(lambda x: scipy.linalg.schur(x, output="real"), [a], [2], 2)
    return [np.asarray(t, a.dtype), np.asarray(z, a.dtype)]


hessenberg_p = Primitive("hessenberg", multiple_results=True)


@_quiet
def _hessenberg_impl(a):
    if _empty_batch(a.shape[:-2]) or a.shape[-1] == 0:
        return [np.zeros(a.shape, a.dtype), np.zeros(a.shape, a.dtype)]
    h, q = _loop(lambda x: scipy.linalg.hessenberg(x, calc_q=True), [a], [2], 2)
    return [np.asarray(h, a.dtype), np.asarray(q, a.dtype)]


for _p, _impl in ((schur_p, _schur_impl), (hessenberg_p, _hessenberg_impl)):
    _p.impl, _p.abstract_eval = _impl, _two_square_avals(_p.name)
    _p.jvp = _p.vjp = _no_derivative(_p.name)
    _p.batch = _batch_front(_p)


def schur(a: Any) -> Any:
    """Schur form ``(T, Z)`` with ``a = Z T Z^H`` (forward only): real (quasi-triangular T) for real ``a``,
    complex (triangular T) for complex ``a``."""
    return schur_p.bind(a)


def hessenberg(a: Any) -> Any:
    """Hessenberg form ``(H, Q)`` with ``a = Q H Q^T`` (forward only)."""
    return hessenberg_p.bind(a)


__all__ += ["hessenberg", "hessenberg_p", "schur", "schur_p"]

# ================================================================== eig (general matrices, complex results)
#
# ``eig_p``: eigenvalues ``w`` and (optionally) left / right eigenvectors of a general square matrix
# (LAPACK geev: each vector has unit 2-norm and a real largest-magnitude component). Outputs are complex
# (complex64 for float32/complex64 input, complex128 for float64/complex128). Derivatives as JAX's
# ``eig_jvp_rule``: eigenvalues always (dw = diag(V^-1 dA V)); eigenvectors only with
# ``enable_eigvec_derivs=True`` (differentiating through geev's normalisation). The reverse rule is the
# transpose of that tangent map, under JAX's convention (the pairing Re(sum(x * y)), no conjugation).

eig_p = Primitive("eig", multiple_results=True)
_CNAN = complex(np.nan, np.nan)    # what a failed decomposition gives (as JAX: nan+nanj)


def _complex_of(dtype: Any) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return dtype
    return np.dtype(np.complex128) if dtype == np.float64 else np.dtype(np.complex64)


def _eig_one(a, left, right):
    n = a.shape[-1]
    cd = _complex_of(a.dtype)
    try:
        if not np.all(np.isfinite(a)):
            raise ValueError("not finite")
        w, vl, vr = scipy.linalg.eig(a, left=True, right=True, check_finite=False)
    except (np.linalg.LinAlgError, ValueError):
        nan = np.full((n, n), _CNAN, cd)
        w, vl, vr = np.full((n,), _CNAN, cd), nan, nan
    if not np.all(np.isfinite(w)):
        w = np.full((n,), _CNAN, cd)
    out = [w.astype(cd)]
    if left:
        out.append(vl.astype(cd))
    if right:
        out.append(vr.astype(cd))
    return tuple(out)


@_quiet
def _eig_impl(a, *, compute_left_eigenvectors, compute_right_eigenvectors, enable_eigvec_derivs):
    left, right = compute_left_eigenvectors, compute_right_eigenvectors
    batch, n = a.shape[:-2], a.shape[-1]
    cd = _complex_of(a.dtype)
    nout = 1 + left + right
    if _empty_batch(batch) or n == 0:
        return [np.zeros(batch + (n,), cd)] + [np.zeros(a.shape, cd) for _ in range(nout - 1)]
    if not left and not _empty_batch(batch):
        try:   # numpy's stacked geev (no left eigenvectors there)
            if right:
                w, v = np.linalg.eig(a)
                return [np.asarray(w, cd), np.asarray(v, cd)]
            return [np.asarray(np.linalg.eigvals(a), cd)]
        except np.linalg.LinAlgError:
            pass
    if nout == 1:
        out = [_loop(lambda x: _eig_one(x, left, right)[0], [a], [2], 1)]
    else:
        out = _loop(lambda x: _eig_one(x, left, right), [a], [2], nout)
    return [np.asarray(o, cd) for o in out]


def _eig_aval(a, *, compute_left_eigenvectors, compute_right_eigenvectors, enable_eigvec_derivs):
    _inexact("eig", a)
    n = _square("eig", a)
    cd = _complex_of(a.dtype)
    out = [ShapedArray(shape_of(a)[:-2] + (n,), cd)]
    out += [ShapedArray(shape_of(a), cd)] * (int(compute_left_eigenvectors) + int(compute_right_eigenvectors))
    return out


def _csolve(a: Any, b: Any) -> Any:
    """x with a @ x = b through the LU primitive (float or complex, differentiable); a (..., n, n)."""
    lu_, _, perm = lu_p.bind(a)
    y = triangular_solve(lu_, matmul(permutation_matrix(perm, a.dtype), b), lower=True, unit_diagonal=True)
    return triangular_solve(lu_, y, lower=False)


def _H(x: Any) -> Any:
    return conj(_T(x))


def _cplx(x: Any, dtype: Any) -> Any:
    return x if x.dtype == dtype else convert(x, dtype)


def _colsum(x: Any) -> Any:
    """(..., n, k) -> (..., k): sum over the rows."""
    return reduce_sum(x, (len(shape_of(x)) - 2,))


def _eig_parts(w: Any, v: Any) -> tuple[Any, Any, Any]:
    """F (1 / (w_j - w_i), 0 on the diagonal), the argmax-row mask M of |v| per column, and
    r = Re(sum_i M_ij v_ij) (the real largest component of each column)."""
    n = shape_of(w)[-1]
    eye = _eye(n, w.dtype)
    f = sub(div(1.0, add(sub(_row(w), _T(_row(w))), eye)), eye)
    nd = len(shape_of(v))
    k = argmax_p.bind(abs_p.bind(v), axis=nd - 2)                       # (..., n)
    m = convert(eq_p.bind(_row(k), reshape(np.arange(n), (n, 1)).astype(k.dtype)), v.dtype)
    r = real(_colsum(mul(m, v)))
    return f, m, r


def _eig_vec_jvp(w: Any, v: Any, da: Any) -> tuple[Any, Any]:
    """JAX's ``_eig_vec_jvp``: (dw, dv) of the right eigenpairs (w, v) of A for a complex tangent dA."""
    f, m, r = _eig_parts(w, v)
    p = _csolve(v, matmul(da, v))
    dw = _diag(p)
    u = matmul(v, mul(f, p))
    c = complex_(neg(real(_colsum(mul(conj(v), u)))), div(neg(imag(_colsum(mul(m, u)))), r))
    return dw, add(u, mul(v, _row(c)))


def _eig_vec_vjp(w: Any, v: Any, cw: Any, cv: Any) -> Any:
    """The transpose of ``_eig_vec_jvp`` (pairing Re(sum(x * y))): cotangent of dA for (cw, cv)."""
    f, m, r = _eig_parts(w, v)
    cp = None
    if cv is not None:
        gc = _colsum(mul(v, cv))                                    # cotangent of c
        re, im = real(gc), imag(gc)
        cu = add(cv, mul(conj(v), _row(_cplx(neg(re), v.dtype))))
        cu = add(cu, mul(m, _row(complex_(mul(re, 0.0), neg(div(im, r))))))
        cp = mul(f, matmul(_T(v), cu))
    if cw is not None:
        cp = _diag_embed(cw) if cp is None else add(cp, _diag_embed(cw))
    if cp is None:
        return None
    # P = V^-1 dA V  =>  ct_dA = V^-T ct_P V^T
    return _csolve(_T(v), matmul(cp, _T(v)))


def _eig_full(a: Any, left: bool) -> list:
    return eig_p.bind(a, compute_left_eigenvectors=left, compute_right_eigenvectors=True, enable_eigvec_derivs=True)


def _eig_check(left, right, enable):
    if (left or right) and not enable:
        raise NotImplementedError(
            "eig: derivatives of non-symmetric eigenvectors are only valid under assumptions on the input that "
            "cannot be checked (as in JAX): pass enable_eigvec_derivs=True to funcgrad.lax.linalg.eig to opt in, "
            "or differentiate only eigenvalues with funcgrad.numpy.linalg.eigvals")


def _eig_jvp(primals, tangents, *, compute_left_eigenvectors, compute_right_eigenvectors, enable_eigvec_derivs):
    left, right = compute_left_eigenvectors, compute_right_eigenvectors
    _eig_check(left, right, enable_eigvec_derivs)
    (a,), (ta,) = primals, tangents
    outs = _eig_full(a, left)
    w, vr = outs[0], outs[-1]
    da = _cplx(ta, w.dtype)
    dw, dvr = _eig_vec_jvp(w, vr, da)
    prim, tan = [w], [dw]
    if left:
        _, dvl = _eig_vec_jvp(conj(w), outs[1], _H(da))
        prim.append(outs[1])
        tan.append(dvl)
    if right:
        prim.append(vr)
        tan.append(dvr)
    return prim, tan


def _eig_vjp(cts, primals, outs, needs, *, compute_left_eigenvectors, compute_right_eigenvectors,
             enable_eigvec_derivs):
    left, right = compute_left_eigenvectors, compute_right_eigenvectors
    _eig_check(left, right, enable_eigvec_derivs)
    (a,) = primals
    cts = list(cts)
    cw = cts[0]
    cvl = cts[1] if left else None
    cvr = cts[-1] if right else None
    if cw is None and cvl is None and cvr is None:
        return (None,)
    w, vr = (outs[0], outs[-1]) if right else _eig_full(a, False)
    ca = _eig_vec_vjp(w, vr, cw, cvr) if (cw is not None or cvr is not None) else None
    if cvl is not None:
        cl = _H(_eig_vec_vjp(conj(w), outs[1], None, cvl))
        ca = cl if ca is None else add(ca, cl)
    if a.dtype.kind != "c":
        ca = convert(real(ca), a.dtype)
    return (ca,)


eig_p.impl, eig_p.abstract_eval = _eig_impl, _eig_aval
eig_p.jvp, eig_p.vjp = _eig_jvp, _eig_vjp
eig_p.batch = _batch_front(eig_p)


def eig(a: Any, compute_left_eigenvectors: bool = True, compute_right_eigenvectors: bool = True,
        enable_eigvec_derivs: bool = False) -> list:
    """Eigenvalues and eigenvectors ``[w, (vl), (vr)]`` of general square matrices (complex results)."""
    return eig_p.bind(a, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                      compute_right_eigenvectors=bool(compute_right_eigenvectors),
                      enable_eigvec_derivs=bool(enable_eigvec_derivs))


__all__ += ["eig", "eig_p"]

# ================================================================== sqrtm, rsf2csf, funm's Parlett recurrence
# (forward only, as in JAX, whose versions go through the Schur decomposition, which has no derivatives)

sqrtm_p = Primitive("sqrtm")


@_quiet
def _sqrtm_impl(a):
    cd = _complex_of(a.dtype)
    if _empty_batch(a.shape[:-2]) or a.shape[-1] == 0:
        return np.zeros(a.shape, cd)

    def one(x):
        if not np.all(np.isfinite(x)):
            return np.full(x.shape, _CNAN, cd)
        out = np.asarray(scipy.linalg.sqrtm(x), cd)
        return out if np.all(np.isfinite(out)) else np.full(x.shape, _CNAN, cd)   # no square root: NaN (as JAX)
    return np.asarray(_loop(one, [a], [2], 1), cd)


def _sqrtm_aval(a):
    _inexact("sqrtm", a)
    _square("sqrtm", a)
    return ShapedArray(shape_of(a), _complex_of(a.dtype))


sqrtm_p.impl, sqrtm_p.abstract_eval = _sqrtm_impl, _sqrtm_aval
sqrtm_p.jvp = sqrtm_p.vjp = _no_derivative("sqrtm")
sqrtm_p.batch = _batch_front(sqrtm_p)


def sqrtm(a: Any) -> Any:
    """Principal matrix square root of (..., n, n) matrices, complex (scipy.linalg.sqrtm; forward only)."""
    return sqrtm_p.bind(a)


rsf2csf_p = Primitive("rsf2csf", multiple_results=True)


def _rsf2csf_one(t, z):
    t, z = t.copy(), z.copy()
    n = t.shape[-1]
    eps = np.finfo(t.dtype).eps
    for m in range(n - 1, 0, -1):
        if abs(t[m, m - 1]) > eps * (abs(t[m - 1, m - 1]) + abs(t[m, m])):
            mu = np.linalg.eigvals(t[m - 1:m + 1, m - 1:m + 1]) - t[m, m]
            r = np.sqrt(abs(mu[0]) ** 2 + abs(t[m, m - 1]) ** 2)
            c, s = mu[0] / r, t[m, m - 1] / r
            g = np.array([[np.conj(c), s], [-s, c]], t.dtype)
            t[m - 1:m + 1, m - 1:] = g @ t[m - 1:m + 1, m - 1:]
            t[:m + 1, m - 1:m + 1] = t[:m + 1, m - 1:m + 1] @ g.conj().T
            z[:, m - 1:m + 1] = z[:, m - 1:m + 1] @ g.conj().T
        t[m, m - 1] = 0.0
    return t, z


@_quiet
def _rsf2csf_impl(t, z):
    cd = _complex_of(np.result_type(t, z))
    t, z = np.asarray(t, cd), np.asarray(z, cd)
    batch = np.broadcast_shapes(t.shape[:-2], z.shape[:-2])
    if _empty_batch(batch) or t.shape[-1] == 0:
        return [np.zeros(batch + t.shape[-2:], cd), np.zeros(batch + z.shape[-2:], cd)]
    out = _loop(_rsf2csf_one, [t, z], [2, 2], 2)
    return [np.asarray(o, cd) for o in out]


def _rsf2csf_aval(t, z):
    _inexact("rsf2csf", t, z)
    n = _square("rsf2csf", t)
    if _square("rsf2csf", z) != n:
        raise ValueError(f"rsf2csf: T {describe(t)} and Z {describe(z)} must be square matrices of one size")
    try:
        batch = np.broadcast_shapes(shape_of(t)[:-2], shape_of(z)[:-2])
    except ValueError:
        raise ValueError(f"rsf2csf: batch dimensions of T {describe(t)} and Z {describe(z)} cannot be "
                         "broadcast") from None
    cd = _complex_of(result_type(t, z))
    return [ShapedArray(tuple(batch) + (n, n), cd)] * 2


rsf2csf_p.impl, rsf2csf_p.abstract_eval = _rsf2csf_impl, _rsf2csf_aval
rsf2csf_p.jvp = rsf2csf_p.vjp = _no_derivative("rsf2csf")
rsf2csf_p.batch = _batch_front(rsf2csf_p)


def rsf2csf(t: Any, z: Any) -> Any:
    """Real Schur form ``(T, Z)`` -> complex Schur form (Givens rotations as scipy/JAX; forward only)."""
    return rsf2csf_p.bind(t, z)


parlett_p = Primitive("parlett", multiple_results=True)


def _parlett_one(f, t):
    f = f.copy()
    n = t.shape[-1]
    minden = np.abs(t[0, 0])
    for p in range(1, n):
        for i in range(1, n - p + 1):
            j = i + p
            s = t[i - 1, j - 1] * (f[j - 1, j - 1] - f[i - 1, i - 1])
            s = s + t[i - 1, i:j - 1] @ f[i:j - 1, j - 1] - f[i - 1, i:j - 1] @ t[i:j - 1, j - 1]
            den = t[j - 1, j - 1] - t[i - 1, i - 1]
            if den != 0:
                s = s / den
            f[i - 1, j - 1] = s
            minden = min(minden, np.abs(den))
    return f, np.asarray(minden)


@_quiet
def _parlett_impl(f, t):
    if _empty_batch(t.shape[:-2]) or t.shape[-1] == 0:
        return [np.zeros(t.shape, t.dtype), np.zeros(t.shape[:-2], np.abs(t).dtype)]
    f, m = _loop(_parlett_one, [f, t], [2, 2], 2)
    return [np.asarray(f, t.dtype), np.asarray(m, np.abs(t).dtype)]


def _parlett_aval(f, t):
    _inexact("funm", f, t)
    _square("funm", t)
    if shape_of(f) != shape_of(t) or f.dtype != t.dtype:
        raise ValueError(f"funm: F {describe(f)} and T {describe(t)} must match")
    real_dt = np.dtype(np.float64) if t.dtype in (np.float64, np.complex128) else np.dtype(np.float32)
    return [ShapedArray(shape_of(t), t.dtype), ShapedArray(shape_of(t)[:-2], real_dt)]


parlett_p.impl, parlett_p.abstract_eval = _parlett_impl, _parlett_aval
parlett_p.jvp = parlett_p.vjp = _no_derivative("funm")
parlett_p.batch = _batch_front(parlett_p)


def parlett(f: Any, t: Any) -> Any:
    """Parlett's recurrence (Golub & Van Loan 11.1.1): ``f(T)`` of an upper-triangular ``T`` from its diagonal
    values on ``f``'s diagonal; returns ``[F, minden]`` (the smallest eigenvalue gap met). Forward only."""
    return parlett_p.bind(f, t)


__all__ += ["parlett", "parlett_p", "rsf2csf", "rsf2csf_p", "sqrtm", "sqrtm_p"]
