"""funcgrad.numpy: math functions (bit operations are in ``_bitwise``, predicates and dtype utilities in
``_predicates``, vectorize and ufunc in ``_vectorize``, printing and io in ``_io``).

Written on lax and primitives, so every differentiable function here works
under grad (any order), vmap and jit.  Gradient conventions follow JAX
(``fmax``/``fmin`` send the gradient to the chosen side, ``copysign`` has
derivative 0 at ``x1 == 0``, integer-valued functions have zero gradients).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array, Tracer
from funcgrad._dtypes import describe
from funcgrad import lax
from funcgrad.numpy import _elementwise as _E
from funcgrad.numpy._base import arr, operand, promote, promote_inexact
from funcgrad.lax import _math as _M
from funcgrad.numpy._creation import (bartlett, blackman, copy, empty, empty_like, fromfile,  # noqa: F401
                                      frombuffer, fromfunction, fromiter, fromstring, geomspace, hamming,
                                      hanning, identity, logspace, tri)
from funcgrad.numpy._reductions import all, any  # noqa: A004 - numpy's names (exported from here)
from funcgrad.typing import ArrayLike

__all__ = [
    "acos", "acosh", "arccosh", "arcsinh", "arctanh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "copysign",
    "deg2rad", "degrees", "divmod", "fabs", "float_power", "fmax", "fmin", "fmod", "frexp", "gcd", "heaviside",
    "hypot", "i0", "isinf", "isneginf", "isposinf", "lcm", "ldexp", "log10", "logaddexp", "logaddexp2", "modf",
    "nan_to_num", "nextafter", "pow", "rad2deg", "radians", "rint", "signbit", "sinc", "spacing", "trunc", "all",
    "any", "empty", "empty_like", "identity", "tri", "logspace", "geomspace", "fromfunction", "frombuffer",
    "fromfile", "fromiter", "fromstring", "copy", "bartlett", "blackman", "hamming", "hanning",
]


_NO_PARAMS: dict = {}
_LN2 = float(np.log(2.0))
_LN10 = float(np.log(10.0))


def _is_value(x: Any) -> bool:
    return isinstance(x, (Array, Tracer))


def _dtype(x: Any) -> np.dtype:
    return _dtypes.result_type(x)


def _float_arrays(*xs: Any) -> list:
    """:func:`promote_inexact`, then Python scalars as arrays of the common float dtype (for ops like
    ``lax.abs`` that would otherwise make a default-float array of a scalar)."""
    xs = promote_inexact(*xs)
    dtype = _dtypes.result_type(*xs)
    return [lax.convert_element_type(arr(x), dtype) if isinstance(x, float) else x for x in xs]


# ------------------------------------------------------------------ aliases and simple math

def acos(x: ArrayLike, /) -> Any:
    """Alias of :func:`arccos` (the array API's name).

    >>> fnp.acos(fnp.array([1.0]))
    Array([0.], dtype=float32)
    """
    return _E.arccos(x)


def asin(x: ArrayLike, /) -> Any:
    """Alias of :func:`arcsin`.

    >>> fnp.asin(fnp.array([0.0]))
    Array([0.], dtype=float32)
    """
    return _E.arcsin(x)


def atan(x: ArrayLike, /) -> Any:
    """Alias of :func:`arctan`.

    >>> fnp.atan(fnp.array([0.0]))
    Array([0.], dtype=float32)
    """
    return _E.arctan(x)


def atan2(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    """Alias of :func:`arctan2`: the angle of the point ``(x2, x1)``.

    >>> fnp.atan2(fnp.array([1.0]), fnp.array([1.0]))
    Array([0.7854], dtype=float32)
    """
    return _E.arctan2(x1, x2)


def pow(x1: ArrayLike, x2: ArrayLike, /) -> Any:  # noqa: A001 - the array API's name
    """Alias of :func:`power`.

    >>> fnp.pow(fnp.array([2.0]), 3)
    Array([8.], dtype=float32)
    """
    return _E.power(x1, x2)


def _inexact_unary(p: Any, name: str, doc: str) -> Any:
    def f(x: Any, /) -> Any:
        (x,) = promote_inexact(x)
        return p.bind(x)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


arcsinh = _inexact_unary(_M.arcsinh_p, "arcsinh", """Inverse hyperbolic sine, elementwise (integers compute in the
    default float).

    >>> fnp.arcsinh(fnp.array([0.0, 1.0]))
    Array([0.    , 0.8814], dtype=float32)
    """)
arccosh = _inexact_unary(_M.arccosh_p, "arccosh", """Inverse hyperbolic cosine (NaN below 1), elementwise.

    >>> fnp.arccosh(fnp.array([1.0, 2.0]))
    Array([0.   , 1.317], dtype=float32)
    """)
arctanh = _inexact_unary(_M.arctanh_p, "arctanh", """Inverse hyperbolic tangent (+-inf at +-1), elementwise.

    >>> fnp.arctanh(fnp.array([0.0, 0.5]))
    Array([0.    , 0.5493], dtype=float32)
    """)
cbrt = _inexact_unary(_M.cbrt_p, "cbrt", """Real cube root, elementwise (negative for negative x; the derivative
    is inf at 0).

    >>> fnp.cbrt(fnp.array([-8.0, 27.0]))
    Array([-2.,  3.], dtype=float32)
    """)
asinh, acosh, atanh = arcsinh, arccosh, arctanh


def log10(x: ArrayLike, /) -> Any:
    """Base-10 logarithm, elementwise (``log(x) / log(10)``, as JAX).

    >>> fnp.log10(fnp.array([1.0, 100.0]))
    Array([0., 2.], dtype=float32)
    """
    (x,) = promote_inexact(x)
    return lax.div(lax.log(x), _LN10)


def deg2rad(x: ArrayLike, /) -> Any:
    """Degrees to radians, elementwise (integers become the default float).

    >>> fnp.deg2rad(fnp.array([180.0]))
    Array([3.1416], dtype=float32)
    """
    (x,) = promote_inexact(x)
    return lax.mul(x, float(np.pi / 180.0))


def rad2deg(x: ArrayLike, /) -> Any:
    """Radians to degrees, elementwise.

    >>> fnp.rad2deg(fnp.array([fnp.pi]))
    Array([180.], dtype=float32)
    """
    (x,) = promote_inexact(x)
    return lax.mul(x, float(180.0 / np.pi))


radians, degrees = deg2rad, rad2deg


def fabs(x: ArrayLike, /) -> Any:
    """|x| as a float (integers become the default float, as ``jnp.fabs``).

    >>> fnp.fabs(fnp.array([-2, 3]))          # f32 [2, 3]
    Array([2., 3.], dtype=float32)
    """
    (x,) = promote_inexact(x)
    return lax.abs(x)


def divmod(x1: ArrayLike, x2: ArrayLike, /) -> tuple:  # noqa: A001 - numpy's name
    """``(floor_divide(x1, x2), mod(x1, x2))``.

    >>> fnp.divmod(fnp.array([5, -5]), 3)
    (Array([ 1, -2], dtype=int32), Array([2, 1], dtype=int32))
    """
    return _E.floor_divide(x1, x2), _E.mod(x1, x2)


def float_power(x: ArrayLike, y: ArrayLike, /) -> Any:
    """``x ** y`` computed in floats (the default float for integers; float32 without x64, as JAX --
    numpy's float_power always uses float64).

    >>> fnp.float_power(fnp.array([2, 3]), 2)   # f32 [4, 9]
    Array([4., 9.], dtype=float32)
    """
    return lax.pow(*promote_inexact(x, y))


def fmax(x1: ArrayLike, x2: ArrayLike) -> Array:
    """Elementwise maximum ignoring NaNs (NaN only where both are NaN).

    The gradient goes to the chosen side: ``x1`` where ``x1 > x2`` or ``x2`` is NaN, else ``x2``
    (at ties ``x2``, as JAX).

    >>> fnp.fmax(fnp.array([1.0, fnp.nan]), fnp.array([fnp.nan, 2.0]))
    Array([1., 2.], dtype=float32)
    """
    x1, x2 = promote(x1, x2)
    return _E.where(_E.logical_or(_E.greater(x1, x2), _E.isnan(x2)), x1, x2)


def fmin(x1: ArrayLike, x2: ArrayLike) -> Array:
    """Elementwise minimum ignoring NaNs (NaN only where both are NaN); gradient as :func:`fmax`.

    >>> fnp.fmin(fnp.array([1.0, fnp.nan]), fnp.array([fnp.nan, 2.0]))
    Array([1., 2.], dtype=float32)
    """
    x1, x2 = promote(x1, x2)
    return _E.where(_E.logical_or(_E.less(x1, x2), _E.isnan(x2)), x1, x2)


def fmod(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    """C's remainder ``x1 - trunc(x1 / x2) * x2`` (sign of ``x1``; :func:`mod` has the sign of ``x2``).

    Gradients: 1 for ``x1``, ``-trunc(x1 / x2)`` for ``x2``.

    >>> fnp.fmod(fnp.array([5, -5]), 3)
    Array([ 2, -2], dtype=int32)
    """
    x1, x2 = promote(x1, x2)
    if _dtypes.result_type(x1, x2).kind == "b":
        raise TypeError(f"fmod: not supported for bool operands ({describe(x1)}, {describe(x2)}); convert them "
                        "to integers first")
    return _M.fmod_p.bind(x1, x2)


def trunc(x: ArrayLike) -> Array:
    """Round towards zero; integers are returned unchanged; zero gradient.

    >>> fnp.trunc(fnp.array([-1.5, 1.5]))
    Array([-1.,  1.], dtype=float32)
    """
    x = operand(x)
    if _dtype(x).kind in "iub":
        return arr(x)
    return lax.select(lax.lt(x, 0.0), lax.ceil(x), lax.floor(x))


def rint(x: ArrayLike, /) -> Any:
    """Round to the nearest integer, halves to even (integers become the default float).

    >>> fnp.rint(fnp.array([0.5, 1.5, -2.5]))
    Array([ 0.,  2., -2.], dtype=float32)
    """
    (x,) = promote_inexact(x)
    return lax.round_half_even(x)


def modf(x: ArrayLike, /, out: None = None) -> tuple:
    """``(fractional part, integral part)``, both with the sign of ``x``.

    >>> fnp.modf(fnp.array([-2.5, 3.25]))
    (Array([-0.5 ,  0.25], dtype=float32), Array([-2.,  3.], dtype=float32))
    """
    if out is not None:
        raise NotImplementedError("modf: out= is not supported (funcgrad arrays are immutable)")
    (x,) = promote_inexact(x)
    whole = trunc(x)
    return lax.sub(x, whole), whole


def frexp(x: ArrayLike, /) -> tuple:
    """``(mantissa, exponent)`` with ``x = mantissa * 2**exponent`` and ``0.5 <= |mantissa| < 1``
    (exponent int32; 0 for 0, inf and NaN).  The mantissa's derivative is ``2**-exponent``.

    >>> fnp.frexp(fnp.array([3.0, 0.0]))
    (Array([0.75, 0.  ], dtype=float32), Array([2, 0], dtype=int32))
    """
    (x,) = promote_inexact(x)
    return _M.frexp_mantissa_p.bind(x), _M.frexp_exponent_p.bind(x)


def ldexp(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    """``x1 * 2**x2`` for an integer exponent ``x2``; the gradient w.r.t. ``x1`` is ``2**x2``.

    >>> fnp.ldexp(fnp.array([1.0, 0.75]), fnp.array([3, 2]))
    Array([8., 3.], dtype=float32)
    """
    x2 = operand(x2)
    if _dtype(x2).kind not in "iu":
        raise TypeError(f"ldexp: the exponent x2 must be an integer, got {describe(x2)}")
    (x1,) = promote_inexact(x1)
    dtype = _dtype(x1)
    n = lax.convert_element_type(arr(x2), dtype)
    half = lax.floor(lax.mul(n, 0.5))     # two factors: 2**n alone can overflow where x1 * 2**n does not
    return lax.mul(lax.mul(x1, lax.exp2(half)), lax.exp2(lax.sub(n, half)))


def gcd(x1: ArrayLike, x2: ArrayLike) -> Any:
    """Greatest common divisor of integers (non-negative; ``gcd(0, 0) = 0``).

    >>> fnp.gcd(fnp.array([12, -8]), fnp.array([18, 12]))
    Array([6, 4], dtype=int32)
    """
    return _M.gcd_p.bind(*promote(x1, x2))


def lcm(x1: ArrayLike, x2: ArrayLike) -> Any:
    """Least common multiple of integers (non-negative; 0 if either is 0).

    >>> fnp.lcm(fnp.array([4, -6]), fnp.array([6, 4]))
    Array([12, 12], dtype=int32)
    """
    return _M.lcm_p.bind(*promote(x1, x2))


def heaviside(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    """Step function: 0 where ``x1 < 0``, 1 where ``x1 > 0``, ``x2`` where ``x1 == 0``.

    >>> fnp.heaviside(fnp.array([-1.0, 0.0, 2.0]), 0.5)
    Array([0. , 0.5, 1. ], dtype=float32)
    """
    x1, x2 = _float_arrays(x1, x2)
    inner = _E.where(_E.isnan(x1), x1, x2)
    return _E.where(_E.less(x1, 0), 0.0, _E.where(_E.greater(x1, 0), 1.0, inner))


def hypot(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    """``sqrt(x1**2 + x2**2)`` without overflow or underflow (as ``jnp.hypot``).

    >>> fnp.hypot(fnp.array([3.0]), fnp.array([4.0]))
    Array([5.], dtype=float32)
    """
    x1, x2 = _float_arrays(x1, x2)
    x1, x2 = lax.abs(x1), lax.abs(x2)
    any_inf = _E.logical_or(isposinf(x1), isposinf(x2))
    big, small = _E.maximum(x1, x2), _E.minimum(x1, x2)
    zero = lax.eq(big, 0.0)
    ratio = lax.div(small, _E.where(zero, 1.0, big))
    out = _E.where(zero, big, lax.mul(big, lax.sqrt(lax.add(1.0, lax.mul(ratio, ratio)))))
    return _E.where(any_inf, np.inf, out)


# i0 for |x| > 8: sqrt(x) * exp(-x) * i0(x) as a Chebyshev series in 16 / x - 1 (fitted to scipy's i0e).
_I0_BIG = (0.4022452055070544, 0.003369116478255682, 6.889758346910166e-05, 2.8913705208338563e-06,
           2.0489185877405602e-07, 2.2666689916321828e-08, 3.396231725801304e-09, 4.940602238917327e-10,
           1.1888673620442996e-11, -3.149918007587214e-11, -1.3216423124988623e-11, -1.7941783324737986e-12,
           7.174599079091778e-13, 3.8526669777144456e-13, 1.496387554929559e-14, -4.150001598407263e-14,
           -1.0083117915495104e-14, 3.80130709518396e-15, 1.0764336282235213e-15, -3.572021905315721e-16,
           -1.1560800625988043e-15, 1.9308226515220113e-17, -9.56963976660597e-16)
# i0 for |x| <= 8: its power series sum (x^2/4)^k / (k!)^2 (positive terms: no cancellation).
_I0_SERIES = tuple(1.0 / float(np.prod(np.arange(1, k + 1, dtype=np.float64))) ** 2 for k in range(27))


def i0(x: ArrayLike) -> Array:
    """The modified Bessel function of the first kind, order 0, elementwise (real ``x``).

    Written with elementary operations (a power series for ``|x| <= 8``, a Chebyshev series of
    ``sqrt(x) exp(-x) i0(x)`` beyond), so its derivatives of every order are available and
    smooth at 0.

    >>> fnp.i0(fnp.array([0.0, 1.0]))
    Array([1.       , 1.2661], dtype=float32)
    """
    (x,) = promote_inexact(x)
    ax = lax.abs(x)
    small = lax.le(ax, 8.0)
    xs = _E.where(small, x, 0.0)
    y = lax.mul(lax.mul(xs, xs), 0.25)
    series = _I0_SERIES[-1]
    for c in _I0_SERIES[-2::-1]:
        series = lax.add(lax.mul(series, y), c)
    xb = _E.where(small, 9.0, ax)
    u2 = lax.mul(lax.sub(lax.div(16.0, xb), 1.0), 2.0)
    b1, b2 = 0.0, 0.0      # Clenshaw's recurrence
    for c in _I0_BIG[:0:-1]:
        b1, b2 = lax.add(lax.sub(lax.mul(u2, b1), b2), c), b1
    cheb = lax.add(lax.sub(lax.mul(lax.mul(u2, 0.5), b1), b2), _I0_BIG[0])
    big = lax.div(lax.mul(lax.exp(xb), cheb), lax.sqrt(xb))
    return _E.where(small, series, big)


def logaddexp(x1: ArrayLike, x2: ArrayLike, /, *, out: None = None, where: None = None) -> Any:
    """``log(exp(x1) + exp(x2))`` without overflow; its gradient is exact at ``x1 == x2`` (1/2 each).

    >>> fnp.logaddexp(fnp.array([0.0]), fnp.array([0.0]))   # [log 2]
    Array([0.6931], dtype=float32)
    """
    if out is not None or where is not None:
        raise NotImplementedError("logaddexp: out= and where= are not supported (as in JAX)")
    return _M.logaddexp_p.bind(*promote_inexact(x1, x2))


def logaddexp2(x1: ArrayLike, x2: ArrayLike, /, *, out: None = None, where: None = None) -> Any:
    """``log2(2**x1 + 2**x2)`` without overflow.

    >>> fnp.logaddexp2(fnp.array([1.0]), fnp.array([1.0]))
    Array([2.], dtype=float32)
    """
    if out is not None or where is not None:
        raise NotImplementedError("logaddexp2: out= and where= are not supported (as in JAX)")
    x1, x2 = promote_inexact(x1, x2)
    return lax.div(_M.logaddexp_p.bind(lax.mul(x1, _LN2), lax.mul(x2, _LN2)), _LN2)


def nan_to_num(x: ArrayLike, copy: bool = True, nan: Any = 0.0, posinf: Any = None, neginf: Any = None) -> Array:
    """``x`` with NaN replaced by ``nan`` and +-inf by ``posinf``/``neginf`` (default: the dtype's
    largest / lowest finite value).  Integers and bools are returned unchanged.

    >>> fnp.nan_to_num(fnp.array([fnp.nan, fnp.inf]))
    Array([0.0000000e+00, 3.4028235e+38], dtype=float32)
    """
    del copy
    x = arr(x)
    if _dtypes.kind(x.dtype) != "f":
        return x
    info = _dtypes.finfo(x.dtype)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf

    def const(v: Any) -> Any:
        return lax.convert_element_type(arr(v), x.dtype) if _is_value(v) else lax.convert_element_type(
            arr(np.asarray(v, x.dtype)), x.dtype)
    out = _E.where(_E.isnan(x), const(nan), x)
    out = _E.where(isposinf(out), const(posinf), out)
    return _E.where(isneginf(out), const(neginf), out)


def nextafter(x: ArrayLike, y: ArrayLike, /) -> Any:
    """The next float after ``x`` towards ``y``, elementwise (no derivative: zero gradient).

    >>> fnp.nextafter(fnp.array([1.0]), 2.0)
    Array([1.0000], dtype=float32)
    """
    return lax.nextafter(*_float_arrays(x, y))    # in the result dtype: float32's next float, not float64's


def signbit(x: ArrayLike, /) -> Any:
    """True where the sign bit is set (``-0.0`` and negative NaNs included; False for unsigned and bools).

    >>> fnp.signbit(fnp.array([-0.0, 0.0, -1.0]))     # [True, False, True]
    Array([ True, False,  True], dtype=bool)
    """
    x = arr(x)
    kind = _dtypes.kind(x.dtype)
    if kind == "f":
        bits = {2: np.int16, 4: np.int32, 8: np.int64}[x.dtype.itemsize]
        return lax.lt(_bitcast(x, bits), 0)
    if kind == "i":
        return lax.lt(x, 0)
    if kind in "ub":
        return _false_like(x)
    raise TypeError(f"signbit: expected a real number array, got {describe(x)}")


def copysign(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    """``|x1|`` with the sign of ``x2`` (its sign bit, so ``-0.0`` counts as negative); the gradient
    w.r.t. ``x1`` is ``sign(x1) * sign(x2)`` (0 at ``x1 == 0``), w.r.t. ``x2`` it is 0.

    >>> fnp.copysign(fnp.array([1.0, -2.0]), fnp.array([-0.0, 3.0]))
    Array([-1.,  2.], dtype=float32)
    """
    x1, x2 = _float_arrays(x1, x2)
    a = lax.abs(x1)
    return _E.where(signbit(x2), lax.neg(a), a)


def sinc(x: ArrayLike) -> Array:
    """``sin(pi x) / (pi x)``, 1 at 0.  Derivatives of every order are finite at 0 (a Taylor
    polynomial is used there, so the first six derivatives at 0 are exact).

    >>> fnp.sinc(fnp.array([0.0, 0.5]))
    Array([1.        , 0.6366], dtype=float32)
    """
    (x,) = promote_inexact(x)
    at_zero = lax.eq(x, 0.0)
    pi_x = lax.mul(x, float(np.pi))
    safe = _E.where(at_zero, 1.0, pi_x)
    u = lax.mul(pi_x, pi_x)     # Taylor series of sin(t)/t in u = t^2, evaluated at x (used only at x == 0)
    taylor = lax.add(1.0, lax.mul(u, lax.add(-1.0 / 6.0, lax.mul(u, lax.add(1.0 / 120.0, lax.mul(u, -1.0 / 5040.0))))))
    return _E.where(at_zero, taylor, lax.div(lax.sin(safe), safe))


def spacing(x: ArrayLike, /) -> Any:
    """Distance from ``x`` to the next float away from zero (negative for negative ``x``), as
    ``numpy.spacing``; zero gradient.

    >>> fnp.spacing(fnp.array([1.0]))
    Array([1.1920929e-07], dtype=float32)
    """
    (x,) = _float_arrays(x)
    x = lax.stop_gradient(x)
    inf = copysign(np.inf, x)
    result = lax.sub(lax.nextafter(x, inf), x)
    if x.dtype == np.float16:
        return result
    tiny = copysign(float(_dtypes.finfo(x.dtype).smallest_subnormal), x)
    return _E.where(lax.eq(result, 0.0), tiny, result)


def isinf(x: ArrayLike, /) -> Any:
    """True where ``x`` is +inf or -inf (always False for integers and bools).

    >>> fnp.isinf(fnp.array([1.0, -fnp.inf, fnp.nan]))   # [False, True, False]
    Array([False,  True, False], dtype=bool)
    """
    x = arr(x)
    if _dtypes.kind(x.dtype) != "f":
        return _false_like(x)
    return lax.eq(lax.abs(x), np.inf)


def isposinf(x: ArrayLike, out: None = None) -> Array:
    """True where ``x`` is +inf.

    >>> fnp.isposinf(fnp.array([fnp.inf, -fnp.inf]))     # [True, False]
    Array([ True, False], dtype=bool)
    """
    if out is not None:
        raise NotImplementedError("isposinf: out= is not supported (funcgrad arrays are immutable)")
    x = arr(x)
    return lax.eq(x, np.inf) if _dtypes.kind(x.dtype) == "f" else _false_like(x)


def isneginf(x: ArrayLike, out: None = None) -> Array:
    """True where ``x`` is -inf.

    >>> fnp.isneginf(fnp.array([fnp.inf, -fnp.inf]))     # [False, True]
    Array([False,  True], dtype=bool)
    """
    if out is not None:
        raise NotImplementedError("isneginf: out= is not supported (funcgrad arrays are immutable)")
    x = arr(x)
    return lax.eq(x, -np.inf) if _dtypes.kind(x.dtype) == "f" else _false_like(x)


def _false_like(x: Any) -> Any:
    # False of x's shape for an integer or bool x (x != x), a value under vmap and jit too.
    return lax.ne(x, x)



def _bitcast(x: Any, dtype: Any) -> Any:
    # Same-width bitcast; a 0-d operand goes through shape (1,) (the primitive's impl gives 0-d arrays
    # shape (1,)).
    if x.ndim == 0:
        return lax.reshape(lax.bitcast_convert_type(lax.reshape(x, (1,)), dtype), ())
    return lax.bitcast_convert_type(x, dtype)
