"""The gamma family of ``funcgrad.scipy.special``: ``gamma``, ``gammaln``, ``loggamma``, ``gammasgn``,
``digamma``, ``polygamma``, ``multigammaln``, the beta function and its logarithm, the incomplete gamma and
beta functions, ``factorial``, ``poch``, ``comb`` and the Bernoulli numbers. Shared argument handling is in
``_base``; the other families in ``_erf``, ``_logistic``, ``_bessel`` and ``_complex``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.special as _sc

from funcgrad import _dtypes, lax
from funcgrad._core import Array
import funcgrad.numpy as fnp
from funcgrad.lax import _special as _p
from funcgrad.scipy.special._base import _check_int_dtype, _floats, _static_int, _unary
from funcgrad.typing import ArrayLike


def gammaln(x: ArrayLike) -> Array:
    """``log|Gamma(x)|`` elementwise (derivative: digamma). f32[...] -> f32[...].

    >>> gammaln(fnp.array([1.0, 4.0]))   # [0, log 6]
    Array([0.       , 1.7918], dtype=float32)
    """
    return _unary(_p.lgamma_p, x)


def loggamma(x: ArrayLike) -> Array:
    """``log(Gamma(x))``: for real ``x``, ``gammaln`` for ``x > 0`` and NaN for ``x <= 0`` (as JAX);
    for complex ``x`` the principal branch (one cut along the negative real axis, as scipy and JAX),
    NaN at the poles 0, -1, -2, ... Differentiable to any order (complex: holomorphic, derivative
    digamma).

    >>> loggamma(fnp.array([0.5, 3.0]))
    Array([0.5724, 0.6931], dtype=float32)
    >>> loggamma(fnp.array([1.0 + 1.0j]))
    Array([-0.6509-0.3016j], dtype=complex64)
    """
    (x,) = _floats(x, complex_ok=True)
    if x.dtype.kind == "c":
        pole, safe = _complex_poles(x)
        return fnp.where(pole, complex(np.nan, np.nan), _p.loggamma_complex_p.bind(safe))
    return fnp.where(x > 0, _p.lgamma_p.bind(x), np.nan)


def _complex_poles(z: Any) -> tuple:
    """``(pole, z with 1 at the poles)``: poles of Gamma are 0, -1, -2, ... on the real axis (and NaNs)."""
    re = lax.real(z)
    pole = fnp.logical_or(fnp.logical_and(fnp.logical_and(lax.imag(z) == 0, re == fnp.floor(re)), re <= 0),
                          fnp.isnan(z))
    return pole, fnp.where(pole, fnp.ones_like(z), z)


def gamma(x: ArrayLike) -> Array:
    """The gamma function: ``gammasgn(x) * exp(gammaln(x))`` for real ``x`` (NaN at poles -1, -2, ...,
    +inf at 0, as JAX); ``exp(loggamma(x))`` for complex ``x`` (NaN at every pole, as JAX).

    >>> gamma(fnp.array([0.5, 5.0]))   # [sqrt(pi), 24]
    Array([ 1.7725, 24.       ], dtype=float32)
    """
    (x,) = _floats(x, complex_ok=True)
    if x.dtype.kind == "c":
        pole, safe = _complex_poles(x)
        return fnp.where(pole, complex(np.nan, np.nan), lax.exp(_p.loggamma_complex_p.bind(safe)))
    return lax.mul(_p.gammasgn_p.bind(x), lax.exp(_p.lgamma_p.bind(x)))


def gammasgn(x: ArrayLike) -> Array:
    """The sign of the gamma function (1 or -1; NaN at non-positive integers). Zero gradient.

    >>> gammasgn(fnp.array([-1.5, 2.0]))
    Array([1., 1.], dtype=float32)
    """
    return _unary(_p.gammasgn_p, x)


def digamma(x: ArrayLike) -> Array:
    """``d/dx log Gamma(x)`` (derivative: ``polygamma(1, x)``). f32[...] -> f32[...].

    >>> digamma(fnp.array([1.0]))
    Array([-0.5772], dtype=float32)
    """
    return _unary(_p.digamma_p, x)


def polygamma(n: Any, x: ArrayLike) -> Any:
    """The ``n``-th derivative of digamma at ``x``; ``n`` is an integer array (no gradient).

    >>> polygamma(1, fnp.array([1.0]))   # [pi**2 / 6]
    Array([1.6449], dtype=float32)
    """
    _check_int_dtype("polygamma", "n", n)
    n, x = _floats(n, x)
    return _p.polygamma_p.bind(n, x)


def multigammaln(a: ArrayLike, d: Any) -> Any:
    """The log of the multivariate gamma function of dimension ``d`` (a static int).

    ``sum_{j<d} gammaln(a - j/2) + d(d-1)/4 log(pi)``.

    >>> multigammaln(fnp.array([3.0]), 2)
    Array([1.5502], dtype=float32)
    """
    d = _static_int("multigammaln", "d", d)
    (a,) = _floats(a)
    out = d * (d - 1) / 4.0 * math.log(math.pi)
    terms = [_p.lgamma_p.bind(lax.sub(a, j / 2.0)) for j in range(d)]
    total = terms[0] if terms else lax.mul(a, 0.0)
    for t in terms[1:]:
        total = lax.add(total, t)
    return lax.add(total, out)


def betaln(a: ArrayLike, b: ArrayLike) -> Array:
    """``log|B(a, b)|`` (the log of the beta function). Differentiable in both.

    >>> betaln(fnp.array([1.0]), fnp.array([2.0]))   # [log 0.5]
    Array([-0.6931], dtype=float32)
    """
    a, b = _floats(a, b)
    return _p.betaln_p.bind(a, b)


def beta(a: ArrayLike, b: ArrayLike) -> Array:
    """The beta function ``Gamma(a) Gamma(b) / Gamma(a + b)``.

    >>> beta(fnp.array([2.0]), fnp.array([3.0]))   # [1/12]
    Array([0.0833], dtype=float32)
    """
    a, b = _floats(a, b)
    sign = lax.mul(lax.mul(_p.gammasgn_p.bind(a), _p.gammasgn_p.bind(b)), _p.gammasgn_p.bind(lax.add(a, b)))
    return lax.mul(sign, lax.exp(_p.betaln_p.bind(a, b)))


def betainc(a: ArrayLike, b: ArrayLike, x: ArrayLike) -> Any:
    """The regularized incomplete beta function ``I_x(a, b)``; differentiable in ``x`` only (as JAX).

    >>> betainc(fnp.array([2.0]), fnp.array([3.0]), fnp.array([0.5]))
    Array([0.6875], dtype=float32)
    """
    a, b, x = _floats(a, b, x)
    return _p.betainc_p.bind(a, b, x)


def gammainc(a: ArrayLike, x: ArrayLike) -> Array:
    """The regularized lower incomplete gamma function ``P(a, x)``; differentiable in ``a`` and ``x``.

    >>> gammainc(fnp.array([1.0]), fnp.array([2.0]))   # [1 - exp(-2)]
    Array([0.8647], dtype=float32)
    """
    a, x = _floats(a, x)
    return _p.igamma_p.bind(a, x)


def gammaincc(a: ArrayLike, x: ArrayLike) -> Array:
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``.

    >>> gammaincc(fnp.array([1.0]), fnp.array([2.0]))   # [exp(-2)]
    Array([0.1353], dtype=float32)
    """
    a, x = _floats(a, x)
    return _p.igammac_p.bind(a, x)


def factorial(n: Any, exact: bool = False) -> Any:
    """``n!`` as ``Gamma(n + 1)`` in floating point (0 for ``n < 0``, as scipy/JAX).

    ``exact=True`` raises NotImplementedError (as JAX).

    >>> factorial(fnp.array([3.0, 4.5]))
    Array([ 6.      , 52.3428], dtype=float32)
    """
    if exact:
        raise NotImplementedError("factorial: exact=True is not supported (as in JAX): it needs Python ints")
    (n,) = _floats(n)
    return fnp.where(n < 0, 0.0, gamma(lax.add(n, 1.0)))


def poch(z: ArrayLike, m: ArrayLike) -> Array:
    """The Pochhammer symbol ``Gamma(z + m) / Gamma(z)`` (1 where ``m == 0``).

    >>> poch(fnp.array([3.0]), fnp.array([2.0]))
    Array([12.], dtype=float32)
    """
    z, m = _floats(z, m)
    zm = lax.add(z, m)
    sign = lax.mul(_p.gammasgn_p.bind(zm), _p.gammasgn_p.bind(z))
    out = lax.mul(sign, lax.exp(lax.sub(_p.lgamma_p.bind(zm), _p.lgamma_p.bind(z))))
    return fnp.where(m == 0.0, 1.0, out)


def comb(N: Any, k: Any, *, repetition: bool = False) -> Any:  # noqa: N803 - scipy's name
    """The number of combinations of ``N`` things taken ``k`` at a time, in floating point.

    0 where ``k < 0`` or ``k > N`` or ``N < 0``; ``repetition=True`` counts with repetition
    (``comb(N + k - 1, k)``).

    >>> comb(fnp.array([5.0]), fnp.array([2.0]))
    Array([10.0000], dtype=float32)
    """
    N, k = _floats(N, k)
    if repetition:
        return fnp.where(fnp.logical_and(N == 0.0, k > 0), 0.0, comb(lax.sub(lax.add(N, k), 1.0), k))
    valid = fnp.logical_and(fnp.logical_and(k >= 0, N >= 0), k <= N)
    N, k = fnp.where(valid, N, 1.0), fnp.where(valid, k, 0.0)   # finite on the unchosen side, and its gradient
    lg = lax.sub(lax.sub(_p.lgamma_p.bind(lax.add(N, 1.0)), _p.lgamma_p.bind(lax.add(k, 1.0))),
                 _p.lgamma_p.bind(lax.add(lax.sub(N, k), 1.0)))
    return fnp.where(valid, lax.exp(fnp.where(valid, lg, 0.0)), 0.0)


def bernoulli(n: int) -> Any:
    """The first ``n + 1`` Bernoulli numbers ``B_0 .. B_n`` (``n`` a static int; B_1 = -1/2 as scipy).

    >>> bernoulli(4)   # [1, -0.5, 1/6, 0, -1/30]
    Array([ 1.        , -0.5       ,  0.1667,  0.        , -0.0333], dtype=float32)
    """
    n = _static_int("bernoulli", "n", n)
    if n < 0:
        raise ValueError(f"bernoulli: n must be >= 0, got {n}")
    return fnp.asarray(_sc.bernoulli(n).astype(_dtypes.float_))
