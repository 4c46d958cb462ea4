"""Special functions as elementwise primitives (impl through ``scipy.special``).

Each primitive is declared with one partial derivative per operand, written
with primitives (so derivatives can be taken again): ``d lgamma = digamma``,
``d digamma = polygamma(1, .)``, ``d polygamma(n, .) = polygamma(n + 1, .)``...

A partial is ``None`` for an integer-valued operand (polygamma's order ``n``,
expn's ``n``, the Bessel order): no gradient flows to it, as in JAX.  Operands
whose derivative is not implemented (betainc's ``a``/``b``, as in JAX) raise
NotImplementedError when differentiated, never a silent zero.  The partials
that JAX has but no closed form gives (gammainc's ``a``, hyp1f1/hyp2f1's
parameters, zeta's ``x``) are primitives computed by Richardson-extrapolated
central differences in float64: first order only (differentiating them again
raises NotImplementedError).

Operands reach these primitives already promoted to one float dtype by
``funcgrad.scipy.special``; the impls compute in that dtype.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import scipy.special as sc

from funcgrad import _dtypes
from funcgrad._core import Primitive
from funcgrad.primitives.elementwise import (_declare, _no_complex, add, broadcast_tangent, div, eq, exp, log,
                                             log1p_p, lt, mul, neg, real, select, shape_of, sign, sin, cos, sub,
                                             sum_to_like)
from funcgrad.primitives.random_bits import erf

_SQRT_2PI = math.sqrt(2.0 * math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


class Unsupported:
    """A partial derivative that is not implemented: differentiating raises."""

    def __init__(self, what: str):
        self.what = what

    def fail(self) -> None:
        raise NotImplementedError(f"{self.what} is not implemented (as in JAX, or not yet in funcgrad); "
                                  "differentiate with respect to the other operands only "
                                  "(wrap this argument in lax.stop_gradient)")


def _float_dtype(*args: Any) -> np.dtype:
    return _dtypes.inexact(_dtypes.result_type(*args))


def _scipy_impl(f: Callable, dtype_rule: Callable = _float_dtype) -> Callable:
    """``f`` over operands cast to their common float dtype; the result in that dtype."""
    def impl(*args):
        dtype = dtype_rule(*args)   # the eager path runs the impl only: the dtype check too
        with np.errstate(all="ignore"):
            out = f(*[np.asarray(a).astype(dtype, copy=False) for a in args])
        return np.asarray(out).astype(dtype, copy=False)
    return impl


def nary(name: str, impl: Callable, partials: list, complex_ok: bool = False) -> Primitive:
    """Declare ``z = f(*xs)`` with ``partials[i](*xs, z)`` (None: no gradient; Unsupported: raises).

    Complex operands raise a TypeError unless ``complex_ok`` (then the partials are the complex
    derivatives of a holomorphic ``f``)."""
    rule = _float_dtype if complex_ok else _no_complex(name, _float_dtype)
    p = _declare(name, _scipy_impl(impl, rule), rule)

    def jvp(primals, tangents):
        z = p.bind(*primals)
        out = None
        for t, d in zip(tangents, partials):
            if t is None or d is None:
                continue
            if isinstance(d, Unsupported):
                d.fail()
            term = mul(t, d(*primals, z))
            out = term if out is None else add(out, term)
        return z, (None if out is None else broadcast_tangent(out, shape_of(z)))

    def vjp(ct, primals, z, needs):
        cts = []
        for x, need, d in zip(primals, needs, partials):
            if not need or d is None:
                cts.append(None)
                continue
            if isinstance(d, Unsupported):
                d.fail()
            cts.append(sum_to_like(mul(ct, d(*primals, z)), x))
        return tuple(cts)

    p.jvp, p.vjp = jvp, vjp
    return p


def _plus(n: Any, k: float) -> Any:
    """``n + k``; a Python scalar stays a weak Python scalar (no default-dtype array)."""
    return n + k if isinstance(n, (int, float)) else add(n, k)


def _safe(c, x, value=1.0):
    """``x`` with ``value`` where ``c`` holds (so a derivative formula stays finite there)."""
    return select(c, add(mul(x, 0.0), value), x)


# --------------------------------------------------------------------------
# Gamma family
# --------------------------------------------------------------------------

lgamma_p = nary("lgamma", sc.gammaln, [lambda x, y: digamma(x)])
digamma_p = nary("digamma", lambda x: np.where(x == 0, np.nan, sc.digamma(x)),  # NaN at 0, as JAX (scipy: -inf)
                  [lambda x, y: polygamma(1.0, x)])
polygamma_p = nary("polygamma", sc.polygamma, [None, lambda n, x, y: polygamma(_plus(n, 1.0), x)])
gammasgn_p = nary("gammasgn", sc.gammasgn, [None])


def _igamma_grad_a_impl(a, x):
    """d/da of the regularized lower incomplete gamma P(a, x), by Richardson-extrapolated central
    differences of scipy's gammainc in float64 (relative error about 1e-11)."""
    a64, x64 = np.asarray(a, np.float64), np.asarray(x, np.float64)
    h = 2e-3 * np.maximum(a64, 1e-300)

    def central(step):
        return (sc.gammainc(a64 + step, x64) - sc.gammainc(a64 - step, x64)) / (2.0 * step)
    return (4.0 * central(h / 2.0) - central(h)) / 3.0


igamma_grad_a_p = nary("igamma_grad_a", _igamma_grad_a_impl,
                       [Unsupported("the second derivative of gammainc/gammaincc with respect to a")] * 2)


def _igamma_dx(a, x, y):
    # x^(a-1) e^-x / Gamma(a)
    return exp(sub(sub(mul(sub(a, 1.0), log(x)), x), lgamma(a)))


igamma_p = nary("igamma", sc.gammainc, [lambda a, x, y: igamma_grad_a_p.bind(a, x), _igamma_dx])
igammac_p = nary("igammac", sc.gammaincc, [lambda a, x, y: neg(igamma_grad_a_p.bind(a, x)),
                                           lambda a, x, y: neg(_igamma_dx(a, x, y))])

betaln_p = nary("betaln", sc.betaln, [lambda a, b, y: sub(digamma(a), digamma(add(a, b))),
                                      lambda a, b, y: sub(digamma(b), digamma(add(a, b)))])


def _betainc_dx(a, b, x, y):
    lx = add(mul(sub(a, 1.0), log(x)), mul(sub(b, 1.0), log1p_p.bind(neg(x))))
    return exp(sub(lx, betaln_p.bind(a, b)))


betainc_p = nary("betainc", sc.betainc, [Unsupported("the derivative of betainc with respect to a"),
                                         Unsupported("the derivative of betainc with respect to b"), _betainc_dx])

# log Gamma of complex numbers (principal branch, one cut along the negative real axis: scipy's
# loggamma). Its derivative, digamma, is composed from primitives: the derivative of the Lanczos
# approximation (g = 7, 9 terms; relative error about 1e-13) for Re z >= 1/2 and the reflection
# psi(z) = psi(1 - z) - pi cot(pi z) below, so derivatives of any order follow (holomorphic rules:
# tangent t * psi(z), cotangent ct * psi(z), JAX's convention).
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
            1.5056327351493116e-7)


def _lanczos_digamma(w):
    """digamma(w) for Re w >= 1/2: the derivative of log of the Lanczos approximation."""
    zz = sub(w, 1.0)
    ag, dag = None, None
    for k, c in enumerate(_LANCZOS[1:], 1):
        inv = div(1.0, add(zz, float(k)))
        ag = mul(inv, c) if ag is None else add(ag, mul(inv, c))
        sq = mul(mul(inv, inv), -c)
        dag = sq if dag is None else add(dag, sq)
    ag = add(ag, _LANCZOS[0])
    t = add(zz, 7.5)
    return add(sub(add(log(t), div(add(zz, 0.5), t)), 1.0), div(dag, ag))


def complex_digamma(z):
    """digamma of complex ``z``, written with primitives (any order of derivatives)."""
    reflect = lt(real(z), 0.5)
    psi = _lanczos_digamma(select(reflect, sub(1.0, z), z))
    pz = mul(select(reflect, z, add(mul(z, 0.0), 0.5)), math.pi)   # cot(pi/2) = 0 where unused
    return select(reflect, sub(psi, mul(div(cos(pz), sin(pz)), math.pi)), psi)


loggamma_complex_p = nary("loggamma_complex", sc.loggamma, [lambda z, y: complex_digamma(z)], complex_ok=True)

# --------------------------------------------------------------------------
# Error functions and the normal distribution
# --------------------------------------------------------------------------

erfc_p = nary("erfc", sc.erfc, [lambda x, y: mul(exp(neg(mul(x, x))), -_TWO_OVER_SQRT_PI)])
erfcx_p = nary("erfcx", sc.erfcx, [lambda x, y: sub(mul(mul(x, y), 2.0), _TWO_OVER_SQRT_PI)])
ndtri_p = nary("ndtri", sc.ndtri, [lambda p, y: mul(exp(mul(mul(y, y), 0.5)), _SQRT_2PI)])
log_ndtr_p = nary("log_ndtr", sc.log_ndtr,
                  [lambda x, y: div(exp(sub(mul(mul(x, x), -0.5), y)), _SQRT_2PI)])
dawsn_p = nary("dawsn", sc.dawsn, [lambda x, y: sub(1.0, mul(mul(x, y), 2.0))])
owens_t_p = nary("owens_t", sc.owens_t, [
    lambda h, a, y: mul(div(exp(mul(mul(h, h), -0.5)), -2.0 * _SQRT_2PI), erf(mul(mul(a, h), 1.0 / math.sqrt(2.0)))),
    lambda h, a, y: div(exp(mul(mul(mul(h, h), add(1.0, mul(a, a))), -0.5)), mul(add(1.0, mul(a, a)), 2.0 * math.pi)),
])

# The Faddeeva function w(z) = exp(-z^2) erfc(-iz), complex operands only (funcgrad.scipy.special.wofz
# promotes): holomorphic, so the tangent is t * w'(z) and the cotangent ct * w'(z) (JAX's convention,
# no conjugate), with w'(z) = -2 z w(z) + 2i / sqrt(pi).
wofz_p = nary("wofz", sc.wofz, [lambda z, w: add(mul(mul(z, w), -2.0), 1j * _TWO_OVER_SQRT_PI)],
              complex_ok=True)

# --------------------------------------------------------------------------
# Bessel functions, exponential integrals, Fresnel and sine/cosine integrals
# --------------------------------------------------------------------------

i0e_p = nary("bessel_i0e", sc.i0e, [lambda x, y: sub(i1e(x), mul(sign(x), y))])


def _i1e_d(x, y):
    zero = eq(x, 0.0)
    sx = _safe(zero, x)
    return select(zero, add(mul(x, 0.0), 0.5), sub(i0e(x), mul(y, add(sign(x), div(1.0, sx)))))


i1e_p = nary("bessel_i1e", sc.i1e, [_i1e_d])
jv_p = nary("bessel_jv", sc.jv, [None, lambda n, z, y: mul(sub(jv(_plus(n, -1.0), z), jv(_plus(n, 1.0), z)), 0.5)])

exp1_p = nary("exp1", sc.exp1, [lambda x, y: neg(div(exp(neg(x)), x))])
expi_p = nary("expi", lambda x: np.where(x == 0, np.nan, sc.expi(x)),  # NaN at 0, as JAX (scipy: -inf)
                [lambda x, y: div(exp(x), x)])


def _expn_dx(n, x, y):
    # d/dx E_n = -E_{n-1}; E_0(x) = e^-x / x, whose derivative is -E_0 (1 + 1/x).
    zero = eq(n, 0.0)
    lower = sub(_safe(zero, n), 1.0)   # n - 1, kept >= 0 so the unchosen side (and its derivative) stays finite
    return select(zero, neg(mul(y, add(1.0, div(1.0, x)))), neg(expn_p.bind(lower, x)))


expn_p = nary("expn", sc.expn, [None, _expn_dx])


def _half_pi_x2(x):
    return mul(mul(x, x), math.pi / 2.0)


fresnel_s_p = nary("fresnel_s", lambda x: sc.fresnel(x)[0], [lambda x, y: sin(_half_pi_x2(x))])
fresnel_c_p = nary("fresnel_c", lambda x: sc.fresnel(x)[1], [lambda x, y: cos(_half_pi_x2(x))])


def _sinc_d(x, y):
    zero = eq(x, 0.0)
    sx = _safe(zero, x)
    return select(zero, add(mul(x, 0.0), 1.0), div(sin(sx), sx))


si_p = nary("sici_si", lambda x: sc.sici(x)[0], [_sinc_d])
ci_p = nary("sici_ci", lambda x: sc.sici(np.abs(x))[1], [lambda x, y: div(cos(x), x)])


def _spence_d(x, y):
    one = eq(x, 1.0)
    sx = _safe(one, x, 2.0)
    return select(one, add(mul(x, 0.0), -1.0), div(log(sx), sub(1.0, sx)))


spence_p = nary("spence", sc.spence, [_spence_d])

# --------------------------------------------------------------------------
# x log(y), x log1p(y): 0 where x == 0; d/dx = log(y) everywhere (as JAX), d/dy = x / y with 0 where x == 0
# --------------------------------------------------------------------------


def _x_over(x, y_shifted):
    zero = eq(x, 0.0)
    return select(zero, mul(x, 0.0), div(x, _safe(zero, y_shifted)))


xlogy_p = nary("xlogy", sc.xlogy, [lambda x, y, z: log(y), lambda x, y, z: _x_over(x, y)], complex_ok=True)
xlog1py_p = nary("xlog1py", sc.xlog1py, [lambda x, y, z: log1p_p.bind(y), lambda x, y, z: _x_over(x, add(y, 1.0))],
                 complex_ok=True)

# --------------------------------------------------------------------------
# Hypergeometric and zeta functions
# --------------------------------------------------------------------------

def _richardson(f: Callable, i: int, xp: Any = np) -> Callable:
    """d f / d (operand ``i``) by Richardson-extrapolated central differences of ``f`` in float64
    (step 1e-3 relative to ``max(|v|, 1)``; relative error about 1e-10 where ``f`` is smooth).
    ``xp``: the array module the values live in (the GPU backend passes CuPy)."""
    def impl(*args):
        vals = [xp.asarray(a, dtype=xp.float64) for a in args]
        v = vals[i]
        h = 1e-3 * xp.maximum(xp.abs(v), 1.0)

        def central(step):
            up, down = list(vals), list(vals)
            up[i], down[i] = v + step, v - step
            return (f(*up) - f(*down)) / (2.0 * step)
        return (4.0 * central(h / 2.0) - central(h)) / 3.0
    return impl


def _numeric_partial(name: str, f: Callable, i: int, nargs: int, what: str) -> Primitive:
    """A primitive for a partial derivative JAX has but no closed form gives: first order only."""
    return nary(name, _richardson(f, i), [Unsupported(f"the second derivative of {what}")] * nargs)


hyp1f1_grad_a_p = _numeric_partial("hyp1f1_grad_a", sc.hyp1f1, 0, 3, "hyp1f1 with respect to a")
hyp1f1_grad_b_p = _numeric_partial("hyp1f1_grad_b", sc.hyp1f1, 1, 3, "hyp1f1 with respect to b")
hyp1f1_p = nary("hyp1f1", sc.hyp1f1, [
    lambda a, b, x, y: hyp1f1_grad_a_p.bind(a, b, x),
    lambda a, b, x, y: hyp1f1_grad_b_p.bind(a, b, x),
    lambda a, b, x, y: mul(div(a, b), hyp1f1_p.bind(_plus(a, 1.0), _plus(b, 1.0), x))])
hyp2f1_grad_a_p = _numeric_partial("hyp2f1_grad_a", sc.hyp2f1, 0, 4, "hyp2f1 with respect to a")
hyp2f1_grad_b_p = _numeric_partial("hyp2f1_grad_b", sc.hyp2f1, 1, 4, "hyp2f1 with respect to b")
hyp2f1_grad_c_p = _numeric_partial("hyp2f1_grad_c", sc.hyp2f1, 2, 4, "hyp2f1 with respect to c")
hyp2f1_p = nary("hyp2f1", sc.hyp2f1, [
    lambda a, b, c, x, y: hyp2f1_grad_a_p.bind(a, b, c, x),
    lambda a, b, c, x, y: hyp2f1_grad_b_p.bind(a, b, c, x),
    lambda a, b, c, x, y: hyp2f1_grad_c_p.bind(a, b, c, x),
    lambda a, b, c, x, y: mul(div(mul(a, b), c), hyp2f1_p.bind(_plus(a, 1.0), _plus(b, 1.0), _plus(c, 1.0), x))])
zeta_grad_x_p = _numeric_partial("zeta_grad_x", sc.zeta, 0, 2, "zeta with respect to x")
zeta_p = nary("zeta", sc.zeta, [lambda x, q, y: zeta_grad_x_p.bind(x, q),
                                lambda x, q, y: neg(mul(x, zeta_p.bind(_plus(x, 1.0), q)))])


# --------------------------------------------------------------------------
# Binding helpers
# --------------------------------------------------------------------------


def lgamma(x: Any) -> Any:
    return lgamma_p.bind(x)


def digamma(x: Any) -> Any:
    return digamma_p.bind(x)


def polygamma(n: Any, x: Any) -> Any:
    return polygamma_p.bind(n, x)


def i0e(x: Any) -> Any:
    return i0e_p.bind(x)


def i1e(x: Any) -> Any:
    return i1e_p.bind(x)


def jv(n: Any, z: Any) -> Any:
    return jv_p.bind(n, z)
