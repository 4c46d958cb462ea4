"""More elementwise primitives: inverse hyperbolics, cbrt, logaddexp, fmod, and
integer/bit helpers (gcd, lcm, population count, frexp's two parts).

Declared with the rule builders of :mod:`funcgrad.primitives.elementwise`, so
each has its shape/dtype rule, batching, and (where differentiable) jvp/vjp
rules written with primitives, which can be differentiated again.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import zeros_like
from funcgrad._dtypes import describe
from funcgrad._dtypes import result_type
from funcgrad.primitives.elementwise import (_declare, add, binary, ceil_p, convert, div, exp2_p, floor_p, isnan_p,
                                             logistic, lt_p, mul, select, sqrt, sub, unary)


def _rsqrt_prod(x: Any) -> Any:
    # 1 / (sqrt(x - 1) * sqrt(x + 1)): no overflow of x*x for large x.
    return div(1.0, mul(sqrt(sub(x, 1.0)), sqrt(add(x, 1.0))))


arcsinh_p = unary("arcsinh", np.arcsinh, lambda x, y: div(1.0, sqrt(add(mul(x, x), 1.0))))
arccosh_p = unary("arccosh", np.arccosh, lambda x, y: _rsqrt_prod(x))
arctanh_p = unary("arctanh", np.arctanh, lambda x, y: div(1.0, sub(1.0, mul(x, x))))
# d cbrt = 1 / (3 cbrt(x)^2): inf at 0, as JAX.
cbrt_p = unary("cbrt", np.cbrt, lambda x, y: div(1.0 / 3.0, mul(y, y)))


def _trunc(q: Any) -> Any:
    return select(lt_p.bind(q, 0.0), ceil_p.bind(q), floor_p.bind(q))


def _logaddexp_d(x: Any, y: Any) -> Any:
    """d logaddexp(x, y) / dx = logistic(x - y); 1/2 where x - y is NaN (equal infinities)."""
    diff = sub(x, y)
    half = add(zeros_like(diff), 0.5)
    return select(isnan_p.bind(diff), half, logistic(diff))


logaddexp_p = binary("logaddexp", np.logaddexp, lambda x, y, z: _logaddexp_d(x, y),
                     lambda x, y, z: _logaddexp_d(y, x))
# C's fmod (sign of x): x - trunc(x / y) * y; d/dx = 1, d/dy = -trunc(x / y) (as JAX's rem).
fmod_p = binary("fmod", np.fmod, lambda x, y, z: add(zeros_like(mul(x, y)), 1.0),
                lambda x, y, z: sub(0.0, _trunc(div(x, y))))


def _int_only(name: str, what: str = "integers"):
    def rule(*args: Any) -> np.dtype:
        dtype = result_type(*args)
        if dtype.kind not in "iu":
            raise TypeError(f"{name}: operands must be {what}, got {', '.join(describe(a) for a in args)}")
        return dtype
    return rule


def _ints_or_bools(name: str):
    def rule(x: Any) -> np.dtype:
        dtype = result_type(x)
        if dtype.kind not in "iub":
            raise TypeError(f"{name}: the operand must be an integer or bool array, got {describe(x)}")
        return np.dtype(np.uint8)
    return rule


def _float_only(name: str, out: Any = None):
    def rule(x: Any) -> np.dtype:
        dtype = result_type(x)
        if _dtypes.kind(dtype) != "f":
            raise TypeError(f"{name}: the operand must be a float array, got {describe(x)}")
        return dtype if out is None else np.dtype(out)
    return rule


gcd_p = binary("gcd", np.gcd, None, None, _int_only("gcd"))
lcm_p = binary("lcm", np.lcm, None, None, _int_only("lcm"))
def _popcount(x: Any) -> np.ndarray:
    # Of the two's complement bits (jax.lax's population_count: -1 has all bits set).
    x = np.asarray(x)
    if x.dtype.kind == "i":
        x = x.view(np.dtype(f"u{x.dtype.itemsize}"))
    return np.bitwise_count(x).astype(np.uint8)


population_count_p = _declare("population_count", _popcount, _ints_or_bools("population_count"))


def _frexp_mantissa(x: Any) -> np.ndarray:
    return np.frexp(np.asarray(x))[0]


def _frexp_exponent(x: Any) -> np.ndarray:
    return np.frexp(np.asarray(x))[1].astype(np.int32)


frexp_mantissa_p = _declare("frexp_mantissa", _frexp_mantissa, _float_only("frexp"))
frexp_exponent_p = _declare("frexp_exponent", _frexp_exponent, _float_only("frexp", np.int32))


def _mantissa_jvp(primals, tangents):
    # mantissa = x * 2**-e with e piecewise constant: d mantissa = t * 2**-e (JAX's rule).
    (x,), (t,) = primals, tangents
    return frexp_mantissa_p.bind(x), mul(t, _inverse_scale(x))


def _mantissa_vjp(ct, primals, m, needs):
    return (mul(ct, _inverse_scale(primals[0])),)


def _inverse_scale(x: Any) -> Any:
    """``2 ** -exponent(x)``: the mantissa's derivative."""
    return exp2_p.bind(sub(0.0, convert(frexp_exponent_p.bind(x), result_type(x))))


frexp_mantissa_p.jvp, frexp_mantissa_p.vjp = _mantissa_jvp, _mantissa_vjp

__all__ = ["arccosh_p", "arcsinh_p", "arctanh_p", "cbrt_p", "fmod_p", "frexp_exponent_p", "frexp_mantissa_p",
           "gcd_p", "lcm_p", "logaddexp_p", "population_count_p"]

