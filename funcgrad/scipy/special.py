"""``funcgrad.scipy.special``: jax.scipy.special's functions over funcgrad's primitives.

Special functions are elementwise primitives (``funcgrad.primitives.special``,
computed by scipy.special) with derivative rules written with primitives, so
grad, vmap and jit work and derivatives can be taken again.  Integer and bool
inputs are computed in the default float dtype.  Complex inputs are taken where JAX
takes them (``wofz``, ``loggamma``, ``gamma``, ``expit``, ``logit``, ``xlogy``,
``xlog1py``, ``boxcox``, ``boxcox1p``, ``logsumexp``, ``softmax``, ``log_softmax``;
``sph_harm_y`` returns complex values); the other functions raise a TypeError.

Differences from JAX (see each docstring): the derivatives of ``gammainc``/``gammaincc``
with respect to ``a``, of ``hyp1f1``/``hyp2f1`` with respect to their parameters and
of ``zeta`` with respect to ``x`` are numerical (Richardson-extrapolated central
differences in float64, relative error about 1e-10) and first order only: taking
them again raises NotImplementedError.
"""
from __future__ import annotations

import math
import operator
import sys
from typing import Any, Sequence

import numpy as np
import scipy.special as _sc

from funcgrad import _dtypes, lax
from funcgrad._core import Array, ConcretizationError, Tracer
import funcgrad.numpy as fnp
from funcgrad.numpy._base import arr, normalize_axes, promote_inexact
from funcgrad.lax import _special as _p
from funcgrad.lax import erf_inv_p, erf_p
from funcgrad.typing import ArrayLike

__all__ = [
    "bernoulli", "bessel_jn", "beta", "betainc", "betaln", "boxcox", "boxcox1p", "comb", "dawsn", "digamma", "entr",
    "erf", "erfc", "erfcx", "erfinv", "exp1", "expi", "expit", "expn", "factorial", "fresnel", "gamma", "gammainc",
    "gammaincc", "gammaln", "gammasgn", "hyp1f1", "hyp2f1", "i0", "i0e", "i1", "i1e", "kl_div", "log_ndtr",
    "log_softmax", "loggamma", "logit", "logsumexp", "multigammaln", "ndtr", "ndtri", "owens_t", "poch", "polygamma",
    "rel_entr", "sici", "softmax", "spence", "sph_harm_y", "wofz", "xlog1py", "xlogy", "zeta",
]

_SCALARS = (bool, int, float)


def _caller_name() -> str:
    """The public function that called into these helpers: ``gammaln``, or ``norm.logpdf`` for stats."""
    frame = sys._getframe(2)
    while frame.f_back is not None and (frame.f_code.co_name.startswith("_")
                                        or frame.f_code.co_name in ("promote", "_floats")):
        frame = frame.f_back
    module = frame.f_globals.get("__name__", "").rsplit(".", 1)[-1]
    return frame.f_code.co_name if module == "special" else f"{module}.{frame.f_code.co_name}"


def _floats(*xs: Any, name: str | None = None, check: bool = True, complex_ok: bool = False) -> list:
    """The operands as arrays of their common float dtype (ints and bools: the default float).

    Operands that do not broadcast together raise a ValueError naming the calling function
    (``name``, else the caller's module and function: ``norm.logpdf``); complex operands raise a
    TypeError unless ``complex_ok`` (the functions JAX defines on complex numbers)."""
    xs = promote_inexact(*xs)
    if not complex_ok and any(isinstance(x, complex) or getattr(x, "dtype", None) is not None and
                              x.dtype.kind == "c" for x in xs):
        name = name or _caller_name()
        described = ", ".join(_dtypes.describe(x) for x in xs)
        raise TypeError(f"{name}: complex arguments ({described}) are not supported (as in JAX: it is defined "
                        "for real numbers); pass the real part (fnp.real(x)) if that is what you mean")
    shapes = [np.shape(x) for x in xs]
    if check and len(shapes) > 1:
        try:
            np.broadcast_shapes(*shapes)
        except ValueError:
            name = name or _caller_name()
            described = ", ".join(_dtypes.describe(x) for x in xs)
            raise ValueError(f"{name}: the arguments ({described}) cannot be broadcast together (numpy "
                             "broadcasting: aligned from the right, each dimension must match or be 1)") from None
    dtype = _dtypes.result_type(*xs)
    return [lax.convert_element_type(x, dtype) if isinstance(x, _SCALARS + (complex,)) else x for x in xs]


def _unary(p, x, complex_ok: bool = False):
    (x,) = _floats(x, complex_ok=complex_ok)
    return p.bind(x)


def _check_int_dtype(name: str, what: str, n: Any) -> None:
    if isinstance(n, (Array, Tracer, np.ndarray)) and n.dtype.kind not in "iub":
        raise ValueError(f"{name}: argument `{what}` must be of integer type, got {n.dtype} "
                         f"(as in JAX); convert with .astype(int)")
    if isinstance(n, float):
        raise ValueError(f"{name}: argument `{what}` must be an integer, got the float {n!r} (as in JAX)")


# --------------------------------------------------------------------------
# Gamma family
# --------------------------------------------------------------------------


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


def _static_int(name: str, what: str, value: Any) -> int:
    try:
        n = operator.index(value)
    except TypeError:
        if isinstance(value, (Array, np.ndarray)) and value.shape == () and value.dtype.kind in "iu":
            return int(value)
        raise TypeError(f"{name}: `{what}` must be a static Python int, got {type(value).__name__} "
                        f"{value!r:.40}") from None
    return int(n)


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


# --------------------------------------------------------------------------
# Error functions, normal distribution
# --------------------------------------------------------------------------


def erf(x: ArrayLike) -> Array:
    """The error function ``2/sqrt(pi) int_0^x exp(-t^2) dt``.

    >>> erf(fnp.array([0.0, 1.0]))
    Array([0.       , 0.8427], dtype=float32)
    """
    return _unary(erf_p, x)


def erfc(x: ArrayLike) -> Array:
    """``1 - erf(x)``, accurate for large ``x``.

    >>> erfc(fnp.array([0.0, 3.0]))
    Array([1.0000000e+00, 2.2090497e-05], dtype=float32)
    """
    return _unary(_p.erfc_p, x)


def erfcx(x: ArrayLike) -> Array:
    """The scaled complementary error function ``exp(x^2) erfc(x)``.

    >>> erfcx(fnp.array([0.0, 10.0]))
    Array([1.        , 0.0561], dtype=float32)
    """
    return _unary(_p.erfcx_p, x)


def erfinv(x: ArrayLike) -> Array:
    """The inverse of ``erf`` on (-1, 1); +-inf at +-1, NaN outside.

    >>> erfinv(fnp.array([0.0, 0.5]))
    Array([0.        , 0.4769], dtype=float32)
    """
    return _unary(erf_inv_p, x)


def ndtr(x: ArrayLike) -> Array:
    """The standard normal CDF ``(1 + erf(x / sqrt(2))) / 2``, computed with erfc in the tails.

    >>> ndtr(fnp.array([0.0]))
    Array([0.5], dtype=float32)
    """
    (x,) = _floats(x)
    z = lax.mul(x, 1.0 / math.sqrt(2.0))
    small = lax.add(0.5, lax.mul(0.5, erf_p.bind(z)))
    pos = lax.sub(1.0, lax.mul(0.5, _p.erfc_p.bind(z)))
    neg = lax.mul(0.5, _p.erfc_p.bind(lax.neg(z)))
    return fnp.where(fnp.abs(z) < 1.0 / math.sqrt(2.0), small, fnp.where(z > 0, pos, neg))


def ndtri(p: ArrayLike) -> Array:
    """The inverse of ``ndtr`` (the standard normal quantile); +-inf at 1 and 0, NaN outside [0, 1].

    >>> ndtri(fnp.array([0.5, 0.975]))
    Array([0.       , 1.9600], dtype=float32)
    """
    return _unary(_p.ndtri_p, p)


def log_ndtr(x: ArrayLike, series_order: int = 3) -> Array:
    """``log(ndtr(x))``, accurate far in both tails.

    ``series_order`` (0..30) is checked as in JAX but does not change the result: funcgrad
    evaluates scipy's log_ndtr, which is accurate everywhere (JAX truncates an asymptotic
    series for ``x < -20``).

    >>> log_ndtr(fnp.array([-40.0, 0.0]))
    Array([-8.0460846e+02, -6.9314718e-01], dtype=float32)
    """
    if not isinstance(series_order, int) or isinstance(series_order, bool):
        raise TypeError(f"log_ndtr: series_order must be a Python int, got {series_order!r}")
    if series_order < 0:
        raise ValueError("log_ndtr: series_order must be non-negative.")
    if series_order > 30:
        raise ValueError("log_ndtr: series_order must be <= 30.")
    return _unary(_p.log_ndtr_p, x)


def dawsn(x: ArrayLike) -> Array:
    """Dawson's integral ``exp(-x^2) int_0^x exp(t^2) dt``.

    >>> dawsn(fnp.array([1.0]))
    Array([0.5381], dtype=float32)
    """
    return _unary(_p.dawsn_p, x)


def owens_t(h: Any, a: ArrayLike) -> Any:
    """Owen's T function ``T(h, a)``; differentiable in both.

    >>> owens_t(fnp.array([0.5]), fnp.array([1.0]))
    Array([0.1067], dtype=float32)
    """
    h, a = _floats(h, a)
    return _p.owens_t_p.bind(h, a)


# --------------------------------------------------------------------------
# Logistic, entropy and log helpers
# --------------------------------------------------------------------------


def expit(x: ArrayLike) -> Array:
    """The logistic sigmoid ``1 / (1 + exp(-x))``.

    >>> expit(fnp.array([0.0]))
    Array([0.5], dtype=float32)
    """
    return _unary(lax.logistic_p, x, complex_ok=True)


def logit(x: ArrayLike) -> Array:
    """The inverse of ``expit``: ``log(x / (1 - x))``; +-inf at 1/0, NaN outside [0, 1].

    >>> logit(fnp.array([0.5]))
    Array([0.], dtype=float32)
    """
    (x,) = _floats(x, complex_ok=True)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


def xlogy(x: ArrayLike, y: ArrayLike) -> Array:
    """``x * log(y)``, 0 where ``x == 0`` (even at ``y == 0``).

    Gradients as JAX: ``d/dx = log(y)`` (-inf at ``y == 0``); ``d/dy = x / y``, which
    funcgrad gives as 0 where ``x == 0`` (JAX gives NaN at ``(0, 0)``).

    >>> xlogy(fnp.array([0.0, 2.0]), fnp.array([0.0, 3.0]))   # [0, 2 log 3]
    Array([0.       , 2.1972], dtype=float32)
    """
    x, y = _floats(x, y, complex_ok=True)
    return _p.xlogy_p.bind(x, y)


def xlog1py(x: ArrayLike, y: ArrayLike) -> Array:
    """``x * log1p(y)``, 0 where ``x == 0`` (even at ``y == -1``); gradients as ``xlogy``.

    >>> xlog1py(fnp.array([0.0, 2.0]), fnp.array([-1.0, 3.0]))   # [0, 2 log 4]
    Array([0.       , 2.7726], dtype=float32)
    """
    x, y = _floats(x, y, complex_ok=True)
    return _p.xlog1py_p.bind(x, y)


def entr(x: ArrayLike) -> Array:
    """Elementwise entropy ``-x log(x)``: 0 at 0 (derivative +inf there, as JAX), -inf for ``x < 0``.

    >>> entr(fnp.array([0.0, 0.5]))
    Array([-0.       ,  0.3466], dtype=float32)
    """
    (x,) = _floats(x)
    neg = x < 0
    safe = fnp.where(neg, 1.0, x)
    return fnp.where(neg, -np.inf, lax.neg(_p.xlogy_p.bind(safe, safe)))


def rel_entr(p: ArrayLike, q: ArrayLike) -> Array:
    """``p log(p / q)`` for ``p, q > 0``; 0 where ``p == 0, q >= 0``; inf elsewhere.

    >>> rel_entr(fnp.array([0.5]), fnp.array([0.25]))   # [0.5 log 2]
    Array([0.3466], dtype=float32)
    """
    p, q = _floats(p, q)
    both = fnp.logical_and(p > 0, q > 0)
    sp, sq = fnp.where(both, p, 1.0), fnp.where(both, q, 1.0)
    val = lax.mul(sp, lax.log(lax.div(sp, sq)))
    return fnp.where(both, val, fnp.where(fnp.logical_and(p == 0, q >= 0), lax.mul(p, 0.0), np.inf))


def kl_div(p: ArrayLike, q: ArrayLike) -> Array:
    """``rel_entr(p, q) - p + q``: ``p log(p / q) - p + q`` for ``p, q > 0``; ``q`` where ``p == 0, q >= 0``;
    inf elsewhere.

    >>> kl_div(fnp.array([0.5]), fnp.array([0.25]))
    Array([0.0966], dtype=float32)
    """
    p, q = _floats(p, q)
    return lax.add(lax.sub(rel_entr(p, q), p), q)


def boxcox(x: ArrayLike, lmbda: Any) -> Any:
    """The Box-Cox transform ``(x**lmbda - 1) / lmbda`` (``log(x)`` at ``lmbda == 0``).

    >>> boxcox(fnp.array([2.0]), 0.5)
    Array([0.8284], dtype=float32)
    """
    x, lmbda = _floats(x, lmbda, complex_ok=True)
    return _boxcox(lax.log(x), lmbda)


def boxcox1p(x: ArrayLike, lmbda: Any) -> Any:
    """The Box-Cox transform of ``1 + x``: ``((1 + x)**lmbda - 1) / lmbda`` (``log1p(x)`` at ``lmbda == 0``).

    >>> boxcox1p(fnp.array([1.0]), 0.5)
    Array([0.8284], dtype=float32)
    """
    x, lmbda = _floats(x, lmbda, complex_ok=True)
    return _boxcox(lax.log1p(x), lmbda)


def _boxcox(logx, lmbda):
    zero = lmbda == 0.0
    safe = fnp.where(zero, 1.0, lmbda)
    return fnp.where(zero, logx + lax.mul(lmbda, 0.0), lax.div(lax.expm1(lax.mul(safe, logx)), safe))


def logsumexp(a: ArrayLike, axis: int | Sequence[int] | None = None, b: ArrayLike | None = None, keepdims: bool = False,
              return_sign: bool = False, where: ArrayLike | None = None) -> Any:
    """``log(sum(b * exp(a), axis))``, computed stably (max-shifted).

    With ``return_sign=True`` returns ``(log|s|, sign(s))``; otherwise a negative sum gives NaN.
    ``where`` masks entries out of the sum. An all -inf slice gives -inf.

    >>> logsumexp(fnp.array([1.0, 2.0]), b=fnp.array([1.0, -2.0]), return_sign=True)
    (Array(2.4899, dtype=float32), Array(-1., dtype=float32))
    """
    if b is not None:
        a, b = _floats(a, b, complex_ok=True)
        a, b = fnp.broadcast_arrays(a, b)
    else:
        (a,) = _floats(a, complex_ok=True)
    axes = normalize_axes("logsumexp", axis, a.ndim, a)
    if where is not None:
        where = fnp.broadcast_to(arr(where), a.shape)
        if where.dtype != np.bool_:
            raise TypeError(f"logsumexp: where must be a bool array, got {where.dtype}")
        a = fnp.where(where, a, -np.inf)
        if b is not None:
            b = fnp.where(where, b, 0.0)
    m = lax.stop_gradient(fnp.max(a, axis=axes, keepdims=True))
    m = fnp.where(fnp.isfinite(m), m, 0.0)
    e = lax.exp(lax.sub(a, m))
    if b is not None:
        e = lax.mul(e, b)
    s = fnp.sum(e, axis=axes, keepdims=True)
    if return_sign:
        sign = fnp.sign(s)
        out = lax.add(lax.log(fnp.abs(s)), m)
    else:
        out = lax.add(lax.log(s), m)
    if not keepdims:
        shape = tuple(d for i, d in enumerate(a.shape) if i not in axes)
        out = fnp.reshape(out, shape)
        if return_sign:
            sign = fnp.reshape(sign, shape)
    return (out, sign) if return_sign else out


def _softmax_axes(name, x, axis):
    return normalize_axes(name, axis, x.ndim, x)


def softmax(x: ArrayLike, /, *, axis: int | Sequence[int] | None = None) -> Any:
    """``exp(x) / sum(exp(x), axis)`` (max-shifted). ``axis=None`` (JAX's default here) normalises
    over all axes.

    >>> softmax(fnp.array([1.0, 2.0]))
    Array([0.2689, 0.7311], dtype=float32)
    """
    (x,) = _floats(x, complex_ok=True)
    axes = _softmax_axes("softmax", x, axis)
    m = lax.stop_gradient(fnp.max(x, axis=axes, keepdims=True))
    e = lax.exp(lax.sub(x, fnp.where(fnp.isfinite(m), m, 0.0)))
    return lax.div(e, fnp.sum(e, axis=axes, keepdims=True))


def log_softmax(x: ArrayLike, /, *, axis: int | Sequence[int] | None = None) -> Any:
    """``x - logsumexp(x, axis)``. ``axis=None`` (JAX's default here) normalises over all axes.

    >>> log_softmax(fnp.array([1.0, 2.0]))
    Array([-1.3133 , -0.3133], dtype=float32)
    """
    (x,) = _floats(x, complex_ok=True)
    axes = _softmax_axes("log_softmax", x, axis)
    m = lax.stop_gradient(fnp.max(x, axis=axes, keepdims=True))
    shifted = lax.sub(x, fnp.where(fnp.isfinite(m), m, 0.0))
    return lax.sub(shifted, lax.log(fnp.sum(lax.exp(shifted), axis=axes, keepdims=True)))


# --------------------------------------------------------------------------
# Bessel functions, integrals
# --------------------------------------------------------------------------


def i0e(x: ArrayLike) -> Array:
    """The exponentially scaled modified Bessel function of order 0, ``exp(-|x|) I0(x)``.

    >>> i0e(fnp.array([0.0, 1.0]))
    Array([1.       , 0.4658], dtype=float32)
    """
    return _unary(_p.i0e_p, x)


def i1e(x: ArrayLike) -> Array:
    """The exponentially scaled modified Bessel function of order 1, ``exp(-|x|) I1(x)``.

    >>> i1e(fnp.array([0.0, 1.0]))
    Array([0.        , 0.2079], dtype=float32)
    """
    return _unary(_p.i1e_p, x)


def i0(x: ArrayLike) -> Array:
    """The modified Bessel function of order 0, ``I0(x) = exp(|x|) i0e(x)``.

    >>> i0(fnp.array([0.0, 1.0]))
    Array([1.      , 1.2661], dtype=float32)
    """
    (x,) = _floats(x)
    return lax.mul(lax.exp(lax.abs(x)), _p.i0e_p.bind(x))


def i1(x: ArrayLike) -> Array:
    """The modified Bessel function of order 1, ``I1(x) = exp(|x|) i1e(x)``.

    >>> i1(fnp.array([0.0, 1.0]))
    Array([0.        , 0.5652], dtype=float32)
    """
    (x,) = _floats(x)
    return lax.mul(lax.exp(lax.abs(x)), _p.i1e_p.bind(x))


def bessel_jn(z: ArrayLike, *, v: int, n_iter: int = 50) -> Any:
    """Bessel functions of the first kind ``J_0(z) .. J_v(z)``, stacked: shape ``(v + 1,) + z.shape``.

    ``v`` is a static int. ``n_iter`` is checked (a positive int) but does not change the result:
    funcgrad evaluates scipy's ``jv``, exact to float precision (JAX runs ``n_iter`` steps of a
    recurrence).

    >>> bessel_jn(fnp.array([1.0, 2.0]), v=2).shape
    (3, 2)
    """
    v = _static_int("bessel_jn", "v", v)
    n_iter = _static_int("bessel_jn", "n_iter", n_iter)
    if v < 0:
        raise ValueError(f"bessel_jn: v must be >= 0, got {v}")
    if n_iter < 1:
        raise ValueError(f"bessel_jn: n_iter must be >= 1, got {n_iter}")
    (z,) = _floats(z)
    return fnp.stack([_p.jv_p.bind(lax.convert_element_type(float(k), z.dtype), z) for k in range(v + 1)])


def exp1(x: ArrayLike) -> Array:
    """The exponential integral ``E1(x) = int_x^inf exp(-t)/t dt``.

    >>> exp1(fnp.array([1.0]))
    Array([0.2194], dtype=float32)
    """
    return _unary(_p.exp1_p, x)


def expi(x: ArrayLike) -> Array:
    """The exponential integral ``Ei(x)``.

    >>> expi(fnp.array([1.0]))
    Array([1.8951], dtype=float32)
    """
    return _unary(_p.expi_p, x)


def expn(n: Any, x: ArrayLike) -> Any:
    """The generalised exponential integral ``E_n(x)`` (``n`` integer-valued, no gradient).

    >>> expn(2, fnp.array([1.0]))
    Array([0.1485], dtype=float32)
    """
    n, x = _floats(n, x)
    return _p.expn_p.bind(n, x)


def fresnel(x: ArrayLike) -> tuple:
    """The Fresnel integrals ``(S(x), C(x))`` (scipy's order).

    >>> S, C = fresnel(fnp.array([1.0]))
    """
    (x,) = _floats(x)
    return _p.fresnel_s_p.bind(x), _p.fresnel_c_p.bind(x)


def sici(x: ArrayLike) -> tuple:
    """The sine and cosine integrals ``(Si(x), Ci(x))``.

    For ``x < 0`` Ci is ``Ci(|x|)`` (as JAX; scipy gives NaN); -inf at 0.

    >>> si, ci = sici(fnp.array([1.0]))
    """
    (x,) = _floats(x)
    return _p.si_p.bind(x), _p.ci_p.bind(x)


def spence(x: ArrayLike) -> Array:
    """Spence's function (dilogarithm) ``int_1^x log(t) / (1 - t) dt``; NaN for ``x < 0``.

    >>> spence(fnp.array([1.0]))
    Array([0.], dtype=float32)
    """
    return _unary(_p.spence_p, x)


def hyp1f1(a: ArrayLike, b: ArrayLike, x: ArrayLike) -> Any:
    """Kummer's confluent hypergeometric function ``1F1(a; b; x)``.

    Differentiable in all arguments: in ``x`` to any order, in ``a`` and ``b`` to first order
    (numerically).

    >>> hyp1f1(fnp.array([1.0]), fnp.array([2.0]), fnp.array([0.5]))
    Array([1.2974], dtype=float32)
    """
    a, b, x = _floats(a, b, x)
    return _p.hyp1f1_p.bind(a, b, x)


def hyp2f1(a: ArrayLike, b: ArrayLike, c: Any, x: ArrayLike) -> Any:
    """The Gauss hypergeometric function ``2F1(a, b; c; x)``.

    Differentiable in all arguments: in ``x`` to any order, in ``a``, ``b``, ``c`` to first order
    (numerically).

    >>> hyp2f1(fnp.array([1.0]), fnp.array([1.0]), fnp.array([2.0]), fnp.array([0.5]))   # [2 log 2]
    Array([1.3863], dtype=float32)
    """
    a, b, c, x = _floats(a, b, c, x)
    return _p.hyp2f1_p.bind(a, b, c, x)


def zeta(x: ArrayLike, q: ArrayLike | None = None) -> Any:
    """The Hurwitz zeta function ``sum_k (k + q)^-x``; differentiable in ``q`` (any order) and ``x``
    (first order, numerically).

    ``q=None`` raises NotImplementedError, as JAX (pass ``q=1`` for Riemann's zeta).

    >>> zeta(fnp.array([2.0]), 1.0)   # [pi**2 / 6]
    Array([1.6449], dtype=float32)
    """
    if q is None:
        raise NotImplementedError("zeta: the Riemann zeta function is not implemented (as in JAX); pass q=1 "
                                  "to compute it as the Hurwitz zeta function")
    x, q = _floats(x, q)
    return _p.zeta_p.bind(x, q)


# --------------------------------------------------------------------------
# Complex-valued: the Faddeeva function, spherical harmonics
# --------------------------------------------------------------------------


def _as_complex(name: str, z: Any) -> Any:
    """``z`` as a complex array (floats: complex64 for float32 and below, complex128 for float64)."""
    (z,) = _floats(z, complex_ok=True)
    if z.dtype.kind != "c":
        z = lax.convert_element_type(z, _dtypes.complex_dtype(z.dtype))
    return z


def wofz(z: ArrayLike) -> Array:
    """The Faddeeva function ``w(z) = exp(-z**2) erfc(-iz)``, elementwise; always complex
    (real input gives complex64 / complex128 as its precision, as JAX).

    Holomorphic, differentiable to any order: ``w'(z) = -2 z w(z) + 2i / sqrt(pi)``
    (``grad`` of a real part, ``jacfwd(..., holomorphic=True)`` ... as for any complex function).

    >>> wofz(fnp.array([1.0 + 1.0j, 0.5]))
    Array([0.3047+0.2082j, 0.7788+0.4789j], dtype=complex64)
    """
    return _p.wofz_p.bind(_as_complex("wofz", z))


def _int_operand(name: str, what: str, v: Any) -> Any:
    v = arr(v)
    if v.dtype.kind not in "iub":
        raise TypeError(f"{name}: `{what}` must be an integer array, got {_dtypes.describe(v)}; "
                        "convert with .astype(int)")
    return lax.convert_element_type(v, _dtypes.int_)


def _legendre_table(x: Any, s: Any, n_max: int) -> list:
    """The normalised associated Legendre functions with Condon-Shortley phase,
    ``sqrt((2l+1)/(4 pi) (l-k)!/(l+k)!) P_l^k(x)`` for ``0 <= k <= l <= n_max`` (``x = cos theta``,
    ``s = sin theta``), as ``table[k][l]`` (None for ``k > l``), by the stable three-term recurrence
    in ``l`` from the diagonal ``k = l``: only array ops, so differentiable to any order in theta."""
    table = [[None] * (n_max + 1) for _ in range(n_max + 1)]
    diag = lax.add(lax.mul(x, 0.0), 1.0 / math.sqrt(4.0 * math.pi))
    for k in range(n_max + 1):
        if k > 0:
            diag = lax.mul(lax.mul(diag, s), -math.sqrt((2.0 * k + 1.0) / (2.0 * k)))
        table[k][k] = diag
        if k + 1 <= n_max:
            table[k][k + 1] = lax.mul(lax.mul(x, diag), math.sqrt(2.0 * k + 3.0))
        for n in range(k + 2, n_max + 1):
            a = math.sqrt((4.0 * n * n - 1.0) / (n * n - k * k))
            b = math.sqrt(((n - 1.0) ** 2 - k * k) / (4.0 * (n - 1.0) ** 2 - 1.0))
            table[k][n] = lax.mul(lax.sub(lax.mul(x, table[k][n - 1]), lax.mul(table[k][n - 2], b)), a)
    return table


def sph_harm_y(n: Any, m: ArrayLike, theta: Any, phi: Any, diff_n: int | None = None, n_max: int | None = None) -> Any:
    """The spherical harmonics ``Y_n^m(theta, phi)`` (scipy's convention: ``theta`` the polar angle in
    [0, pi], ``phi`` the azimuth; Condon-Shortley phase included), complex.

    ``n`` (degree >= 0) and ``m`` (order) are integer arrays; ``n``, ``m``, ``theta``, ``phi``
    broadcast together (JAX requires 1-d arrays of one length; those work the same here), and
    scalars give shape ``(1,)`` as JAX. ``n_max`` is the largest degree, a static int (default
    ``max(n)``, which needs a concrete ``n``: pass ``n_max`` under jit/vmap); degrees above it are
    clipped to ``n_max`` as JAX. ``|m| > n`` gives 0. ``diff_n`` raises NotImplementedError (as JAX).
    Differentiable in ``theta`` and ``phi`` to any order (no gradient in ``n``, ``m``).
    Cost: O(n_max**2) array ops (the whole Legendre table up to ``n_max``).

    >>> sph_harm_y(fnp.array([2]), fnp.array([1]), fnp.array([0.5]), fnp.array([0.3]))
    Array([-0.3105-0.0961j], dtype=complex64)
    """
    if diff_n is not None:
        raise NotImplementedError("sph_harm_y: the 'diff_n' argument is not supported (as in JAX)")
    n = _int_operand("sph_harm_y", "n", n)
    m = _int_operand("sph_harm_y", "m", m)
    if n_max is None:
        if isinstance(n, Tracer):
            raise ConcretizationError("sph_harm_y: `n_max` must be given as a static int when `n` is traced "
                                      "(under jit, vmap or grad), e.g. sph_harm_y(n, m, theta, phi, n_max=4)")
        n_max = int(np.max(np.asarray(n))) if n.size else 0
    n_max = _static_int("sph_harm_y", "n_max", n_max)
    if n_max < 0:
        raise ValueError(f"sph_harm_y: n_max must be >= 0, got {n_max}")
    theta, phi = _floats(theta, phi, name="sph_harm_y")
    try:
        shape = np.broadcast_shapes(n.shape, m.shape, theta.shape, phi.shape)
    except ValueError:
        raise ValueError(f"sph_harm_y: n {_dtypes.describe(n)}, m {_dtypes.describe(m)}, theta "
                         f"{_dtypes.describe(theta)} and phi {_dtypes.describe(phi)} cannot be broadcast "
                         "together") from None
    shape = shape or (1,)
    n, m, theta, phi = (fnp.broadcast_to(v, shape) for v in (n, m, theta, phi))
    table = _legendre_table(lax.cos(theta), lax.sin(theta), n_max)
    zero = lax.mul(theta, 0.0)
    flat = [table[k][l] if k <= l else zero for k in range(n_max + 1) for l in range(n_max + 1)]  # noqa: E741
    am = lax.abs(m)
    index = lax.add(lax.mul(fnp.clip(am, 0, n_max), n_max + 1), fnp.clip(n, 0, n_max))
    legendre = fnp.take_along_axis(fnp.stack(flat), index[None], axis=0, mode="clip")[0]
    legendre = fnp.where(am > n_max, 0.0, legendre)     # |m| > n_max >= n: 0, as scipy
    angle = lax.mul(lax.convert_element_type(am, phi.dtype), phi)
    y = lax.complex(lax.mul(legendre, lax.cos(angle)), lax.mul(legendre, lax.sin(angle)))
    odd = lax.eq(lax.mod(am, 2), 1)
    negative = fnp.where(odd, lax.neg(lax.conj(y)), lax.conj(y))
    return fnp.where(m < 0, negative, y)
