"""Bessel functions and integrals of ``funcgrad.scipy.special``: ``i0``, ``i0e``, ``i1``, ``i1e``,
``bessel_jn``, the exponential integrals ``exp1``, ``expi``, ``expn``, ``fresnel``, ``sici``, ``spence``, the
hypergeometric functions ``hyp1f1``, ``hyp2f1`` and the Hurwitz ``zeta``. Shared argument handling is in
``_base``; the other families in ``_gamma``, ``_erf``, ``_logistic`` and ``_complex``.
"""
from __future__ import annotations

from typing import Any

from funcgrad import lax
from funcgrad._core import Array
import funcgrad.numpy as fnp
from funcgrad.lax import _special as _p
from funcgrad.scipy.special._base import _floats, _static_int, _unary
from funcgrad.typing import ArrayLike


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
