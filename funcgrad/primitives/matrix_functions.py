"""Matrix functions backed by scipy: expm (with its Frechet-derivative rules), and the forward-only
sqrtm, rsf2csf and funm's Parlett recurrence.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg

from funcgrad._core import Primitive
from funcgrad._dtypes import ShapedArray, describe, result_type
from funcgrad.primitives.indexing import concatenate_p, static_slice
from funcgrad.primitives.shape import shape_of
from funcgrad.primitives.decompositions import (_T, _batch_front, _empty_batch, _inexact, _loop, _no_derivative,
                                                _quiet, _same_aval, _square, _zeros_like)
from funcgrad.primitives.eigen import _CNAN, _complex_of

__all__ = [
    "expm", "expm_p", "parlett", "parlett_p", "rsf2csf", "rsf2csf_p", "sqrtm", "sqrtm_p",
]


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


def expm(a: Any) -> Any:
    return expm_p.bind(a)


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
