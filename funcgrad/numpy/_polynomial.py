"""funcgrad.numpy: 1-d convolution and polynomials (coefficients highest power first, as numpy).

As in JAX, results keep static shapes: ``polymul``/``polydiv`` do not trim leading zeros unless asked
(``trim_leading_zeros=True``, eager only), and ``polydiv``'s remainder has ``u``'s length.

>>> import funcgrad.numpy as fnp
>>> fnp.polyval(fnp.array([1.0, 0.0, -1.0]), 3.0)
Array(8., dtype=float32)
>>> fnp.convolve(fnp.array([1.0, 2.0]), fnp.array([1.0, 1.0]))
Array([1., 3., 2.], dtype=float32)
"""
from __future__ import annotations

from typing import Any

import sys

import numpy as np

from funcgrad._core import Tracer
from funcgrad import _dtypes
from funcgrad._dtypes import describe
from funcgrad import lax
from funcgrad.numpy._base import arr, index_arg, operand, promote, promote_arrays, promote_inexact
from funcgrad.numpy._sorting import concrete
from funcgrad.typing import ArrayLike

__all__ = ["convolve", "correlate", "poly", "roots", "polyadd", "polyder", "polydiv", "polyfit", "polyint", "polymul",
           "polysub", "polyval", "vander"]


def _conv(op: str, x: Any, y: Any, mode: str, precision: Any, preferred_element_type: Any) -> Any:
    x, y = arr(x), arr(y)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError(f"{op}: only 1-d inputs are supported, got {describe(x)} and {describe(y)}")
    x, y = promote_inexact(x, y)
    if x.shape[0] == 0 or y.shape[0] == 0:
        raise ValueError(f"{op}: inputs cannot be empty, got {describe(x)} and {describe(y)}")
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"{op}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    reverse = False
    if op == "correlate":
        if x.shape[0] < y.shape[0]:
            x, y, reverse = y, x, True
    else:
        if x.shape[0] < y.shape[0]:
            x, y = y, x
        y = lax.rev(y, (0,))
    n, m = x.shape[0], y.shape[0]
    lo, hi = {"valid": (0, 0), "same": (m // 2, m - m // 2 - 1), "full": (m - 1, m - 1)}[mode]
    # out[k] = sum_j x_padded[k + j] * y[j]: a 1-d correlation, run as a convolution with one channel
    out = lax.conv_general_dilated(lax.reshape(x, (1, 1, n)), lax.reshape(y, (1, 1, m)), (1,), [(lo, hi)])
    out = lax.reshape(out, (n + lo + hi - m + 1,))
    if reverse:
        out = lax.rev(out, (0,))
    return out if preferred_element_type is None else lax.convert_element_type(out, preferred_element_type)


def convolve(a: ArrayLike, v: ArrayLike, mode: str = "full", *, precision: Any = None,
             preferred_element_type: Any = None) -> Any:
    """The discrete linear convolution of 1-d ``a`` and ``v``; ``mode``: "full" (length n+m-1),
    "same" (max(n, m)) or "valid" (max - min + 1).  Integers are convolved in the default float.

    >>> convolve(fnp.array([1.0, 2.0, 3.0]), fnp.array([0.0, 1.0, 0.5]), mode="same")
    Array([1. , 2.5, 4. ], dtype=float32)
    """
    return _conv("convolve", a, v, mode, precision, preferred_element_type)


def correlate(a: ArrayLike, v: ArrayLike, mode: str = "valid", *, precision: Any = None,
              preferred_element_type: Any = None) -> Any:
    """The cross-correlation ``c[k] = sum_n a[n + k] * v[n]`` of 1-d ``a`` and ``v`` (numpy's definition and
    modes; default "valid").

    >>> correlate(fnp.array([1.0, 2.0, 3.0]), fnp.array([0.0, 1.0, 0.5]), mode="full")
    Array([0.5, 2. , 3.5, 3. , 0. ], dtype=float32)
    """
    return _conv("correlate", a, v, mode, precision, preferred_element_type)


def vander(x: ArrayLike, N: int | None = None, increasing: bool = False) -> Any:
    """The Vandermonde matrix of 1-d ``x``: columns ``x**(N-1), ..., x, 1`` (reversed with ``increasing``).

    >>> vander(fnp.array([1.0, 2.0, 3.0]), 3)
    Array([[1., 1., 1.],
           [4., 2., 1.],
           [9., 3., 1.]], dtype=float32)
    """
    x = arr(x)
    if x.ndim != 1:
        raise ValueError(f"vander: x must be 1-d, got {describe(x)}")
    n = x.shape[0] if N is None else index_arg("vander", "N", N)
    if n < 0:
        raise ValueError(f"vander: N must be non-negative, got {n}")
    cols, power = [], None
    for k in range(n):
        power = lax.full(x.shape, 1, x.dtype) if k == 0 else (x if k == 1 else lax.mul(power, x))
        cols.append(power)
    if not increasing:
        cols = cols[::-1]
    if not cols:
        return lax.full((x.shape[0], 0), 0, x.dtype)
    return lax.concatenate([lax.reshape(c, (x.shape[0], 1)) for c in cols], 1)


def _poly1d(name: str, p: Any) -> Any:
    p = arr(p)
    if p.ndim != 1:
        raise ValueError(f"{name}: polynomial coefficients must be 1-d, got {describe(p)}")
    return p


def polyval(p: ArrayLike, x: ArrayLike, *, unroll: int = 16) -> Any:
    """The polynomial with coefficients ``p`` (highest power first) at ``x``, by Horner's rule (written
    out for up to ``unroll`` coefficients, a ``lax.scan`` beyond).

    >>> polyval(fnp.array([3.0, 0.0, 1.0]), fnp.array([1.0, 2.0]))
    Array([ 4., 13.], dtype=float32)
    """
    p = _poly1d("polyval", p)
    p, x = promote_arrays(p, operand(x))   # a Python x is weakly typed
    unroll = index_arg("polyval", "unroll", unroll)
    y = lax.full(x.shape, 0, p.dtype)
    if p.shape[0] <= max(unroll, 1):      # short: Horner's steps written out
        for i in range(p.shape[0]):
            y = lax.add(lax.mul(y, x), p[i])
        return y
    y, _ = lax.scan(lambda y, c: (lax.add(lax.mul(y, x), c), None), y, p)   # long: one step, looped
    return y


def _align(a1: Any, a2: Any) -> tuple[Any, Any]:
    a1, a2 = promote(_poly1d("polyadd", a1), _poly1d("polyadd", a2))
    n = max(a1.shape[0], a2.shape[0])
    return (lax.pad(a1, 0, [(n - a1.shape[0], 0, 0)]), lax.pad(a2, 0, [(n - a2.shape[0], 0, 0)]))


def polyadd(a1: ArrayLike, a2: ArrayLike) -> Any:
    """The sum of two polynomials (the shorter padded with leading zeros).

    >>> polyadd(fnp.array([1.0, 2.0]), fnp.array([1.0, 1.0, 1.0]))
    Array([1., 2., 3.], dtype=float32)
    """
    return lax.add(*_align(a1, a2))


def polysub(a1: ArrayLike, a2: ArrayLike) -> Any:
    """The difference of two polynomials.

    >>> polysub(fnp.array([1.0, 2.0]), fnp.array([1.0, 1.0, 1.0]))
    Array([-1.,  0.,  1.], dtype=float32)
    """
    return lax.sub(*_align(a1, a2))


def _trim_front(name: str, p: Any) -> Any:
    if isinstance(p, Tracer):
        raise NotImplementedError(f"{name}: trim_leading_zeros=True needs concrete coefficients (the result's "
                                  "length depends on them); not under jit/vmap")
    v = np.asarray(p)
    nz = np.flatnonzero(v)
    start = nz[0] if nz.size else v.size
    return p[start:] if start < v.size else p[:0]


def polymul(a1: ArrayLike, a2: ArrayLike, *, trim_leading_zeros: bool = False) -> Any:
    """The product of two polynomials (length ``len(a1) + len(a2) - 1``; leading zeros kept unless
    ``trim_leading_zeros``, as JAX).

    >>> polymul(fnp.array([1.0, 1.0]), fnp.array([1.0, -1.0]))
    Array([ 1.,  0., -1.], dtype=float32)
    """
    a1, a2 = _poly1d("polymul", a1), _poly1d("polymul", a2)
    if trim_leading_zeros and (a1.shape[0] > 1 or a2.shape[0] > 1):
        a1, a2 = _trim_front("polymul", a1), _trim_front("polymul", a2)
    a1, a2 = promote_inexact(a1, a2)
    if a1.shape[0] == 0:
        a1 = lax.full((1,), 0, a1.dtype)
    if a2.shape[0] == 0:
        a2 = lax.full((1,), 0, a2.dtype)
    return _conv("convolve", a1, a2, "full", None, None)


def polydiv(u: Any, v: ArrayLike, *, trim_leading_zeros: bool = False) -> tuple[Any, Any]:
    """Quotient and remainder of ``u / v``: the quotient has ``len(u) - len(v) + 1`` coefficients (at least
    1), the remainder ``len(u)`` (leading zeros kept unless ``trim_leading_zeros``, as JAX).

    >>> polydiv(fnp.array([1.0, 3.0, 2.0]), fnp.array([1.0, 1.0]))
    (Array([1., 2.], dtype=float32), Array([0., 0., 0.], dtype=float32))
    """
    u, v = promote_inexact(_poly1d("polydiv", u), _poly1d("polydiv", v))
    m, n = u.shape[0] - 1, v.shape[0] - 1
    if n < 0:
        raise ValueError("polydiv: the divisor v must not be empty")
    r = [u[i] for i in range(m + 1)]
    vs = [v[j] for j in range(n + 1)]
    q = []
    for k in range(m - n + 1):
        d = lax.div(r[k], vs[0])
        q.append(d)
        for j in range(n + 1):
            r[k + j] = lax.sub(r[k + j], lax.mul(d, vs[j]))
    quotient = lax.concatenate([lax.reshape(c, (1,)) for c in q], 0) if q else lax.full((1,), 0, u.dtype)
    remainder = lax.concatenate([lax.reshape(c, (1,)) for c in r], 0) if r else u
    if trim_leading_zeros:
        if isinstance(remainder, Tracer):
            raise NotImplementedError("polydiv: trim_leading_zeros=True needs concrete values (not under jit/vmap)")
        tol = np.sqrt(_dtypes.finfo(u.dtype).eps)
        val = np.asarray(remainder)
        big = np.flatnonzero(np.abs(val) >= tol)
        remainder = remainder[big[0]:] if big.size else remainder[:0]
    return quotient, remainder


def polyder(p: ArrayLike, m: int = 1) -> Any:
    """The ``m``-th derivative of a polynomial (empty when ``m >= len(p)``).

    >>> polyder(fnp.array([1.0, 1.0, 1.0]))
    Array([2., 1.], dtype=float32)
    """
    p = _poly1d("polyder", p)
    m = index_arg("polyder", "m", m)
    if m < 0:
        raise ValueError(f"polyder: order of derivative must be non-negative, got {m}")
    n = p.shape[0]
    if m == 0:
        return p
    if m >= n:
        return p[:0]
    powers = np.arange(n - 1, -1, -1)[: n - m]                      # the kept terms' exponents
    coeff = np.prod([powers - i for i in range(m)], axis=0)
    (p,) = promote_inexact(p)     # float coefficients, as JAX
    return lax.mul(p[: n - m], lax.full((n - m,), 0, p.dtype) + np.asarray(coeff).astype(np.dtype(p.dtype)))


def polyint(p: ArrayLike, m: int = 1, k: Any = None) -> Any:
    """The ``m``-th antiderivative of a polynomial, with integration constants ``k`` (a scalar or ``m`` of
    them, the first for the outermost integral; default 0).

    >>> polyint(fnp.array([3.0, 2.0, 1.0]))
    Array([1., 1., 1., 0.], dtype=float32)
    """
    m = index_arg("polyint", "m", m)
    if m < 0:
        raise ValueError("polyint: order of integral must be positive (see polyder)")
    (p,) = promote_inexact(_poly1d("polyint", p))
    if k is None:
        k = lax.full((m,), 0, p.dtype)
    else:
        k = lax.convert_element_type(arr(k), p.dtype)
        if k.ndim == 0:
            k = lax.reshape(k, (1,))
        if k.ndim != 1 or k.shape[0] not in (1, m):
            raise ValueError(f"polyint: k must be a scalar or a 1-d array of length 1 or m ({m}), got {describe(k)}")
        if k.shape[0] == 1:
            k = lax.broadcast_to(k, (m,))
    if m == 0:
        return p
    grid = np.arange(p.shape[0] + m)[None, :] - np.arange(m)[:, None]
    coeff = np.maximum(1, grid).prod(0)[::-1].astype(np.dtype(p.dtype))
    return lax.div(lax.concatenate([p, k], 0), coeff)


def poly(seq_of_zeros: Any) -> Any:
    """The coefficients of the monic polynomial with the given roots (1-d), or the characteristic
    polynomial ``det(x I - A)`` of a square matrix (2-d; real coefficients, where JAX gives complex).

    >>> poly(fnp.array([1.0, 2.0]))
    Array([ 1., -3.,  2.], dtype=float32)
    """
    (z,) = promote_inexact(arr(seq_of_zeros))
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0] > 0:
        return _charpoly(z)
    if z.ndim != 1:
        raise ValueError(f"poly: input must be a 1-d array of roots or a non-empty square 2-d array, got {describe(z)}")
    if z.shape[0] == 0:   # no roots: the constant 1 (0-d, as numpy and JAX)
        return lax.full((), 1, z.dtype)
    coeffs = [lax.full((), 1, z.dtype)]
    for i in range(z.shape[0]):   # multiply by (x - z_i)
        zi = z[i]
        coeffs = [coeffs[0]] + [lax.sub(coeffs[j], lax.mul(zi, coeffs[j - 1])) for j in range(1, len(coeffs))] + \
            [lax.neg(lax.mul(zi, coeffs[-1]))]
    return lax.concatenate([lax.reshape(c, (1,)) for c in coeffs], 0)


def _charpoly(a: Any) -> Any:
    """Faddeev-LeVerrier: the characteristic polynomial's coefficients from traces of matrix products."""
    n = a.shape[0]
    eye = np.eye(n, dtype=np.dtype(a.dtype))
    coeffs = [lax.full((), 1, a.dtype)]
    mk = None
    for k in range(1, n + 1):
        mk = lax.add(lax.einsum("ij,jk->ik", a, mk), lax.mul(coeffs[-1], eye)) if mk is not None else \
            lax.mul(coeffs[-1], eye)
        trace = lax.einsum("ij,ji->", a, mk)                        # tr(A M_k)
        coeffs.append(lax.div(lax.neg(trace), float(k)))
    return lax.concatenate([lax.reshape(c, (1,)) for c in coeffs], 0)


def _lstsq_qr(a: Any, b: Any) -> Any:
    """Least squares ``argmin |a c - b|`` for a tall ``a`` with few columns, by modified Gram-Schmidt
    QR and back substitution (written with lax, so it is differentiable)."""
    cols = [a[:, j] for j in range(a.shape[1])]
    qs, r = [], {}
    for j, v in enumerate(cols):
        for i, q in enumerate(qs):
            r[i, j] = lax.einsum("n,n->", q, v)
            v = lax.sub(v, lax.mul(r[i, j], q))
        for i, q in enumerate(qs):   # a second pass keeps Q orthogonal in float32 ("twice is enough")
            extra = lax.einsum("n,n->", q, v)
            r[i, j] = lax.add(r[i, j], extra)
            v = lax.sub(v, lax.mul(extra, q))
        r[j, j] = lax.sqrt(lax.einsum("n,n->", v, v))
        qs.append(lax.div(v, r[j, j]))
    spec = "n,n->" if len(b.shape) == 1 else "n,nk->k"
    qtb = [lax.einsum(spec, q, b) for q in qs]
    c = [None] * len(qs)
    for i in reversed(range(len(qs))):
        acc = qtb[i]
        for j in range(i + 1, len(qs)):
            acc = lax.sub(acc, lax.mul(r[i, j], c[j]))
        c[i] = lax.div(acc, r[i, i])
    return lax.concatenate([lax.reshape(ci, (1,) + ci.shape) for ci in c], 0), r


def _inverse_gram(r: dict, k: int) -> Any:
    """``inv(A^T A) = inv(R) inv(R)^T`` from the QR factor ``R`` (k x k, upper triangular, as scalars)."""
    inv = {}
    for j in range(k):
        for i in range(j, -1, -1):
            acc = 1.0 if i == j else 0.0
            for m in range(i + 1, j + 1):
                acc = lax.sub(acc, lax.mul(r[i, m], inv[m, j]))
            inv[i, j] = lax.div(acc, r[i, i])
    zero = lax.full((), 0, r[0, 0].dtype)
    rinv = lax.concatenate([lax.reshape(inv.get((i, j), zero), (1,)) for i in range(k) for j in range(k)], 0)
    rinv = lax.reshape(rinv, (k, k))
    return lax.einsum("ij,kj->ik", rinv, rinv)


def polyfit(x: ArrayLike, y: ArrayLike, deg: int, rcond: float | None = None, full: bool = False, w: Any = None,
            cov: bool = False) -> Any:
    """The least-squares polynomial of degree ``deg`` through the points ``(x, y)`` (``y`` 1-d, or 2-d with
    one data set per column), coefficients highest power first; ``w`` weights the residuals.

    Solved by QR of the column-scaled Vandermonde matrix (differentiable in ``x``, ``y`` and ``w``).
    ``cov=True`` (or ``"unscaled"``) also returns the coefficients' covariance, as numpy;
    ``full=True`` is not supported (NotImplementedError).

    >>> polyfit(fnp.array([0.0, 1.0, 2.0]), fnp.array([1.0, 3.0, 5.0]), 1)
    Array([2.0000, 1.0000], dtype=float32)
    """
    if rcond is not None:
        raise NotImplementedError("polyfit: rcond= (a singular-value cutoff) is not supported: funcgrad fits by QR "
                                  "and needs a full-rank Vandermonde matrix; leave rcond=None")
    if full:
        raise NotImplementedError("polyfit: full=True (residuals, rank, singular values) is not supported; use "
                                  "the coefficients (and cov=True)")
    deg = index_arg("polyfit", "deg", deg)
    if deg < 0:
        raise ValueError(f"polyfit: expected deg >= 0, got {deg}")
    x, y = promote_inexact(arr(x), arr(y))
    if x.ndim != 1 or x.shape[0] == 0:
        raise TypeError(f"polyfit: expected a non-empty 1-d x, got {describe(x)}")
    if y.ndim not in (1, 2) or y.shape[0] != x.shape[0]:
        raise TypeError(f"polyfit: expected y 1-d or 2-d with x's length ({x.shape[0]}), got {describe(y)}")
    if x.shape[0] < deg + 1:
        raise ValueError(f"polyfit: {x.shape[0]} points cannot determine a degree-{deg} polynomial uniquely")
    lhs = vander(x, deg + 1)
    rhs = y
    if w is not None:
        (w,) = promote_inexact(arr(w))
        if w.ndim != 1 or w.shape[0] != x.shape[0]:
            raise TypeError(f"polyfit: expected w 1-d with x's length ({x.shape[0]}), got {describe(w)}")
        lhs = lax.mul(lhs, w[:, None])
        rhs = lax.mul(rhs, w if rhs.ndim == 1 else w[:, None])
    scale = lax.sqrt(lax.reduce_sum(lax.mul(lhs, lhs), (0,)))
    lhs = lax.div(lhs, scale[None, :])
    c, r = _lstsq_qr(lhs, rhs)
    coeffs = lax.div(c, scale if c.ndim == 1 else scale[:, None])
    if not cov:
        return coeffs
    order = deg + 1
    vbase = lax.div(_inverse_gram(r, order), lax.mul(scale[:, None], scale[None, :]))
    if cov == "unscaled":
        fac = 1.0
    else:
        if x.shape[0] <= order:
            raise ValueError("polyfit: the number of data points must exceed order to scale the covariance matrix")
        resid = lax.sub(rhs, lax.einsum("nk,k->n" if c.ndim == 1 else "nk,km->nm", lhs, c))
        fac = lax.div(lax.reduce_sum(lax.mul(resid, resid), (0,)), float(x.shape[0] - order))
    if y.ndim == 1:
        return coeffs, lax.mul(vbase, fac)
    return coeffs, lax.mul(vbase[:, :, None], fac)


def roots(p: ArrayLike, *, strip_zeros: bool = True) -> Any:
    """The roots of the polynomial with coefficients ``p`` (highest degree first), as a complex array.

    The eigenvalues of the companion matrix, as numpy and JAX compute them; the result is complex even when
    every root is real (as JAX). Leading zeros are stripped (``p`` must then be concrete); with
    ``strip_zeros=False`` (usable under jit) the roots they stand for are NaN and come last.

    >>> roots(fnp.array([1.0, -3.0, 2.0]))     # [2, 1] (complex64)
    Array([2.+0.j, 1.+0.j], dtype=complex64)
    """
    fnp = sys.modules["funcgrad.numpy"]        # the package: linalg.eigvals, roll, ... (a module import would cycle)
    (p,) = promote_inexact(arr(p))
    if p.ndim == 0:
        p = lax.reshape(p, (1,))
    if p.ndim != 1:
        raise ValueError(f"roots: p must be a 1-d array of coefficients, got {describe(p)}")
    complex_dtype = np.result_type(p.dtype, np.complex64)
    if p.shape[0] < 2:
        return fnp.zeros((0,), complex_dtype)
    if strip_zeros:
        values = concrete("roots", p, "stripping the leading zeros", "pass strip_zeros=False (the roots that "
                          "leading zeros stand for are then NaN)")
        nonzero = np.flatnonzero(values != 0)
        start = int(nonzero[0]) if nonzero.size else p.shape[0]
        return _companion_roots(fnp, p[start:], complex_dtype)
    is_zero = lax.convert_element_type(lax.eq_p.bind(p, 0.0), np.int32)
    leading = fnp.sum(fnp.cumprod(is_zero))                  # the number of leading zeros (traced)
    n = p.shape[0]
    safe = fnp.where(leading == n, fnp.ones_like(p), p)      # all zeros: any polynomial, its roots become NaN
    found = _companion_roots(fnp, fnp.roll(safe, -leading), complex_dtype)
    order = fnp.argsort(lax.convert_element_type(lax.eq_p.bind(found, 0.0), np.int32), stable=True)
    found = found[order]                                     # the zero roots the rolled zeros added go last
    keep = fnp.arange(n - 1) < (n - 1) - leading
    return fnp.where(keep, found, fnp.asarray(complex(np.nan, np.nan), complex_dtype))


def _companion_roots(fnp: Any, p: Any, complex_dtype: Any) -> Any:
    m = p.shape[0]
    if m < 2:
        return fnp.zeros((0,), complex_dtype)
    companion = fnp.diag(fnp.ones((m - 2,), p.dtype), -1)
    companion = companion.at[0, :].set(-p[1:] / p[0])
    return fnp.linalg.eigvals(companion)
