"""Eigen- and singular-value decompositions backed by LAPACK: eigh, svd, eig (complex results), schur and
hessenberg (forward only), with derivative rules written with primitives. See
:mod:`funcgrad.primitives.decompositions` for the conventions (stacks of matrices, complex cotangents,
repeated eigenvalues).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import scipy.linalg

from funcgrad._core import Primitive
from funcgrad._dtypes import ShapedArray, describe
from funcgrad.primitives.elementwise import abs_p, add, complex_, conj, convert, div, eq_p, imag, mul, neg, real, sub
from funcgrad.primitives.reduce import argmax_p
from funcgrad.primitives.indexing import static_slice
from funcgrad.primitives.linalg import matmul
from funcgrad.primitives.shape import reduce_sum, reshape, shape_of
from funcgrad.primitives.decompositions import (_T, _batch_front, _diag, _diag_embed, _empty_batch, _eye, _float,
                                                _inexact, _loop, _no_derivative, _quiet, _row, _square, lu_p,
                                                permutation_matrix, triangular_solve)

__all__ = [
    "eigh", "eigh_p", "svd", "svd_p", "hessenberg", "hessenberg_p", "schur", "schur_p", "eig", "eig_p",
]


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

def eigh(a: Any) -> Any:
    return eigh_p.bind(a)


def svd(a: Any, full_matrices: bool = False, compute_uv: bool = True) -> Any:
    return svd_p.bind(a, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))


# ================================================================== schur, hessenberg (forward only)


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
