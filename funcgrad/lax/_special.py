"""jax.lax's special functions (lgamma, digamma, igamma, betainc, ...) and the primitives that
``funcgrad.scipy.special`` binds (declared in ``funcgrad.primitives.special``)."""
from __future__ import annotations

from typing import Any

from funcgrad.primitives.special import (betainc_p, betaln_p, ci_p, dawsn_p, digamma_p, erfc_p, erfcx_p, exp1_p,
                                         expi_p, expn_p, fresnel_c_p, fresnel_s_p, gammasgn_p, hyp1f1_p, hyp2f1_p,
                                         i0e_p, i1e_p, igamma_grad_a_p, igamma_p, igammac_p, jv_p, lgamma_p,
                                         loggamma_complex_p,
                                         log_ndtr_p, ndtri_p, owens_t_p, polygamma_p, si_p, spence_p, xlog1py_p,
                                         wofz_p, xlogy_p, zeta_p)

regularized_incomplete_beta_p = betainc_p
bessel_i0e_p, bessel_i1e_p = i0e_p, i1e_p


def lgamma(x: Any) -> Any:
    """``log|Gamma(x)|`` elementwise (float operands). ``>>> lgamma(fnp.array([4.0]))  # [log 6]``"""
    return lgamma_p.bind(x)


def digamma(x: Any) -> Any:
    """The digamma function ``d/dx lgamma(x)`` (float operands).

    >>> lax.digamma(fnp.array([0.5, 2.0]))
    Array([-1.9635   ,  0.4228], dtype=float32)
    """
    return digamma_p.bind(x)


def polygamma(m: Any, x: Any) -> Any:
    """The ``m``-th derivative of digamma (``m`` integer-valued, same float dtype as ``x``; no gradient in ``m``).

    >>> lax.polygamma(fnp.array(1.0), fnp.array([1.0, 2.0]))
    Array([1.6449  , 0.6449], dtype=float32)
    """
    return polygamma_p.bind(m, x)


def igamma(a: Any, x: Any) -> Any:
    """The regularized lower incomplete gamma function ``P(a, x)``.

    >>> lax.igamma(fnp.array(2.0), fnp.array([0.5, 2.0]))
    Array([0.0902, 0.5940], dtype=float32)
    """
    return igamma_p.bind(a, x)


def igammac(a: Any, x: Any) -> Any:
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``.

    >>> lax.igammac(fnp.array(2.0), fnp.array([0.5, 2.0]))
    Array([0.9098  , 0.4060], dtype=float32)
    """
    return igammac_p.bind(a, x)


def igamma_grad_a(a: Any, x: Any) -> Any:
    """``d/da P(a, x)`` (not differentiable again).

    >>> lax.igamma_grad_a(fnp.array(2.0), fnp.array([0.5, 2.0]))
    Array([-0.1510, -0.2940], dtype=float32)
    """
    return igamma_grad_a_p.bind(a, x)


def betainc(a: Any, b: Any, x: Any) -> Any:
    """The regularized incomplete beta function ``I_x(a, b)`` (differentiable in ``x``).

    >>> lax.betainc(fnp.array(2.0), fnp.array(3.0), fnp.array([0.25, 0.5]))
    Array([0.2617, 0.6875    ], dtype=float32)
    """
    return betainc_p.bind(a, b, x)


def erfc(x: Any) -> Any:
    """``1 - erf(x)``, accurate for large ``x``.

    >>> lax.erfc(fnp.array([0.5, 2.0]))
    Array([0.4795, 0.0047], dtype=float32)
    """
    return erfc_p.bind(x)


def zeta(x: Any, q: Any) -> Any:
    """The Hurwitz zeta function (differentiable in ``q``).

    >>> lax.zeta(fnp.array(2.0), fnp.array([1.0, 2.0]))
    Array([1.6449  , 0.6449], dtype=float32)
    """
    return zeta_p.bind(x, q)


def bessel_i0e(x: Any) -> Any:
    """``exp(-|x|) I0(x)``.

    >>> lax.bessel_i0e(fnp.array([0.5, 2.0]))
    Array([0.6450, 0.3085], dtype=float32)
    """
    return i0e_p.bind(x)


def bessel_i1e(x: Any) -> Any:
    """``exp(-|x|) I1(x)``.

    >>> lax.bessel_i1e(fnp.array([0.5, 2.0]))
    Array([0.1564 , 0.2153], dtype=float32)
    """
    return i1e_p.bind(x)


__all__ = [
    "bessel_i0e", "bessel_i0e_p", "bessel_i1e", "bessel_i1e_p", "betainc", "digamma", "digamma_p", "erfc", "erfc_p",
    "igamma", "igamma_grad_a", "igamma_grad_a_p", "igamma_p", "igammac", "igammac_p", "lgamma", "lgamma_p",
    "polygamma", "polygamma_p", "regularized_incomplete_beta_p", "zeta", "zeta_p",
]
# Bound by funcgrad.scipy.special (not JAX lax names).
_SCIPY_PRIMITIVES = (betaln_p, ci_p, dawsn_p, erfcx_p, exp1_p, expi_p, expn_p, fresnel_c_p, fresnel_s_p, gammasgn_p,
                     hyp1f1_p, hyp2f1_p, jv_p, log_ndtr_p, loggamma_complex_p, ndtri_p, owens_t_p, si_p, spence_p,
                     wofz_p, xlog1py_p, xlogy_p)
