"""funcgrad.numpy: math functions, bit operations, predicates and dtype utilities.

Written on lax and primitives, so every differentiable function here works
under grad (any order), vmap and jit.  Gradient conventions follow JAX
(``fmax``/``fmin`` send the gradient to the chosen side, ``copysign`` has
derivative 0 at ``x1 == 0``, integer-valued functions have zero gradients).
"""
from __future__ import annotations

import builtins
import functools
import re
from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array, Tracer
from funcgrad._dtypes import describe
from funcgrad import lax
from funcgrad.numpy import _elementwise as _E
from funcgrad.numpy._base import arr, index_arg, operand, promote, promote_inexact
from funcgrad.numpy._creation import (_window, as_array, bartlett, blackman, copy, empty, empty_like,  # noqa: F401
                                      fromfile, frombuffer, fromfunction, fromiter, fromstring, geomspace, hamming,
                                      hanning, identity, logspace, tri)
from funcgrad.numpy._reductions import all, any  # noqa: A004 - numpy's names (exported from here)
from funcgrad.lax import _math as _M

__all__ = [
    "acos", "acosh", "arccosh", "arcsinh", "arctanh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "copysign",
    "deg2rad", "degrees", "divmod", "fabs", "float_power", "fmax", "fmin", "fmod", "frexp", "gcd", "heaviside",
    "hypot", "i0", "isinf", "isneginf", "isposinf", "lcm", "ldexp", "log10", "logaddexp", "logaddexp2", "modf",
    "nan_to_num", "nextafter", "pow", "rad2deg", "radians", "rint", "signbit", "sinc", "spacing", "trunc",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_invert", "invert", "bitwise_count",
    "bitwise_left_shift", "bitwise_right_shift", "left_shift", "right_shift",
    "all", "any", "allclose", "isclose", "array_equal", "array_equiv", "isscalar", "iterable",
    "can_cast", "isdtype", "issubdtype", "promote_types", "result_type", "finfo", "iinfo",
    "vectorize", "apply_along_axis", "apply_over_axes", "frompyfunc", "ufunc",
    "empty", "empty_like", "identity", "tri", "logspace", "geomspace", "fromfunction", "frombuffer", "fromfile",
    "fromiter", "fromstring", "copy", "bartlett", "blackman", "hamming", "hanning", "kaiser",
    "load", "save", "savez", "array_repr", "array_str", "get_printoptions", "set_printoptions", "printoptions",
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

def acos(x: Any, /) -> Any:
    """Alias of :func:`arccos` (the array API's name).

    >>> fnp.acos(fnp.array([1.0]))            # [0]
    """
    return _E.arccos(x)


def asin(x: Any, /) -> Any:
    """Alias of :func:`arcsin`.

    >>> fnp.asin(fnp.array([0.0]))            # [0]
    """
    return _E.arcsin(x)


def atan(x: Any, /) -> Any:
    """Alias of :func:`arctan`.

    >>> fnp.atan(fnp.array([0.0]))            # [0]
    """
    return _E.arctan(x)


def atan2(x1: Any, x2: Any, /) -> Any:
    """Alias of :func:`arctan2`: the angle of the point ``(x2, x1)``.

    >>> fnp.atan2(fnp.array([1.0]), fnp.array([1.0]))   # [0.7854]
    """
    return _E.arctan2(x1, x2)


def pow(x1: Any, x2: Any, /) -> Any:  # noqa: A001 - the array API's name
    """Alias of :func:`power`.

    >>> fnp.pow(fnp.array([2.0]), 3)          # [8]
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

    >>> fnp.arcsinh(fnp.array([0.0, 1.0]))    # [0, 0.8814]
    """)
arccosh = _inexact_unary(_M.arccosh_p, "arccosh", """Inverse hyperbolic cosine (NaN below 1), elementwise.

    >>> fnp.arccosh(fnp.array([1.0, 2.0]))    # [0, 1.317]
    """)
arctanh = _inexact_unary(_M.arctanh_p, "arctanh", """Inverse hyperbolic tangent (+-inf at +-1), elementwise.

    >>> fnp.arctanh(fnp.array([0.0, 0.5]))    # [0, 0.5493]
    """)
cbrt = _inexact_unary(_M.cbrt_p, "cbrt", """Real cube root, elementwise (negative for negative x; the derivative
    is inf at 0).

    >>> fnp.cbrt(fnp.array([-8.0, 27.0]))     # [-2, 3]
    """)
asinh, acosh, atanh = arcsinh, arccosh, arctanh


def log10(x: Any, /) -> Any:
    """Base-10 logarithm, elementwise (``log(x) / log(10)``, as JAX).

    >>> fnp.log10(fnp.array([1.0, 100.0]))    # [0, 2]
    """
    (x,) = promote_inexact(x)
    return lax.div(lax.log(x), _LN10)


def deg2rad(x: Any, /) -> Any:
    """Degrees to radians, elementwise (integers become the default float).

    >>> fnp.deg2rad(fnp.array([180.0]))       # [3.14159]
    """
    (x,) = promote_inexact(x)
    return lax.mul(x, float(np.pi / 180.0))


def rad2deg(x: Any, /) -> Any:
    """Radians to degrees, elementwise.

    >>> fnp.rad2deg(fnp.array([fnp.pi]))      # [180]
    """
    (x,) = promote_inexact(x)
    return lax.mul(x, float(180.0 / np.pi))


radians, degrees = deg2rad, rad2deg


def fabs(x: Any, /) -> Any:
    """|x| as a float (integers become the default float, as ``jnp.fabs``).

    >>> fnp.fabs(fnp.array([-2, 3]))          # f32 [2, 3]
    """
    (x,) = promote_inexact(x)
    return lax.abs(x)


def divmod(x1: Any, x2: Any, /) -> tuple:  # noqa: A001 - numpy's name
    """``(floor_divide(x1, x2), mod(x1, x2))``.

    >>> fnp.divmod(fnp.array([5, -5]), 3)     # ([1, -2], [2, 1])
    """
    return _E.floor_divide(x1, x2), _E.mod(x1, x2)


def float_power(x: Any, y: Any, /) -> Any:
    """``x ** y`` computed in floats (the default float for integers; float32 without x64, as JAX --
    numpy's float_power always uses float64).

    >>> fnp.float_power(fnp.array([2, 3]), 2)   # f32 [4, 9]
    """
    return lax.pow(*promote_inexact(x, y))


def fmax(x1: Any, x2: Any) -> Any:
    """Elementwise maximum ignoring NaNs (NaN only where both are NaN).

    The gradient goes to the chosen side: ``x1`` where ``x1 > x2`` or ``x2`` is NaN, else ``x2``
    (at ties ``x2``, as JAX).

    >>> fnp.fmax(fnp.array([1.0, fnp.nan]), fnp.array([fnp.nan, 2.0]))   # [1, 2]
    """
    x1, x2 = promote(x1, x2)
    return _E.where(_E.logical_or(_E.greater(x1, x2), _E.isnan(x2)), x1, x2)


def fmin(x1: Any, x2: Any) -> Any:
    """Elementwise minimum ignoring NaNs (NaN only where both are NaN); gradient as :func:`fmax`.

    >>> fnp.fmin(fnp.array([1.0, fnp.nan]), fnp.array([fnp.nan, 2.0]))   # [1, 2]
    """
    x1, x2 = promote(x1, x2)
    return _E.where(_E.logical_or(_E.less(x1, x2), _E.isnan(x2)), x1, x2)


def fmod(x1: Any, x2: Any, /) -> Any:
    """C's remainder ``x1 - trunc(x1 / x2) * x2`` (sign of ``x1``; :func:`mod` has the sign of ``x2``).

    Gradients: 1 for ``x1``, ``-trunc(x1 / x2)`` for ``x2``.

    >>> fnp.fmod(fnp.array([5, -5]), 3)       # [2, -2]
    """
    x1, x2 = promote(x1, x2)
    if _dtypes.result_type(x1, x2).kind == "b":
        raise TypeError(f"fmod: not supported for bool operands ({describe(x1)}, {describe(x2)}); convert them "
                        "to integers first")
    return _M.fmod_p.bind(x1, x2)


def trunc(x: Any) -> Any:
    """Round towards zero; integers are returned unchanged; zero gradient.

    >>> fnp.trunc(fnp.array([-1.5, 1.5]))     # [-1, 1]
    """
    x = operand(x)
    if _dtype(x).kind in "iub":
        return arr(x)
    return lax.select(lax.lt(x, 0.0), lax.ceil(x), lax.floor(x))


def rint(x: Any, /) -> Any:
    """Round to the nearest integer, halves to even (integers become the default float).

    >>> fnp.rint(fnp.array([0.5, 1.5, -2.5]))   # [0, 2, -2]
    """
    (x,) = promote_inexact(x)
    return lax.round(x)


def modf(x: Any, /, out: None = None) -> tuple:
    """``(fractional part, integral part)``, both with the sign of ``x``.

    >>> fnp.modf(fnp.array([-2.5, 3.25]))     # ([-0.5, 0.25], [-2, 3])
    """
    if out is not None:
        raise NotImplementedError("modf: out= is not supported (funcgrad arrays are immutable)")
    (x,) = promote_inexact(x)
    whole = trunc(x)
    return lax.sub(x, whole), whole


def frexp(x: Any, /) -> tuple:
    """``(mantissa, exponent)`` with ``x = mantissa * 2**exponent`` and ``0.5 <= |mantissa| < 1``
    (exponent int32; 0 for 0, inf and NaN).  The mantissa's derivative is ``2**-exponent``.

    >>> fnp.frexp(fnp.array([3.0, 0.0]))      # ([0.75, 0], [2, 0])
    """
    (x,) = promote_inexact(x)
    return _M.frexp_mantissa_p.bind(x), _M.frexp_exponent_p.bind(x)


def ldexp(x1: Any, x2: Any, /) -> Any:
    """``x1 * 2**x2`` for an integer exponent ``x2``; the gradient w.r.t. ``x1`` is ``2**x2``.

    >>> fnp.ldexp(fnp.array([1.0, 0.75]), fnp.array([3, 2]))   # [8, 3]
    """
    x2 = operand(x2)
    if _dtype(x2).kind not in "iu":
        raise TypeError(f"ldexp: the exponent x2 must be an integer, got {describe(x2)}")
    (x1,) = promote_inexact(x1)
    dtype = _dtype(x1)
    n = lax.convert_element_type(arr(x2), dtype)
    half = lax.floor(lax.mul(n, 0.5))     # two factors: 2**n alone can overflow where x1 * 2**n does not
    return lax.mul(lax.mul(x1, lax.exp2(half)), lax.exp2(lax.sub(n, half)))


def gcd(x1: Any, x2: Any) -> Any:
    """Greatest common divisor of integers (non-negative; ``gcd(0, 0) = 0``).

    >>> fnp.gcd(fnp.array([12, -8]), fnp.array([18, 12]))    # [6, 4]
    """
    return _M.gcd_p.bind(*promote(x1, x2))


def lcm(x1: Any, x2: Any) -> Any:
    """Least common multiple of integers (non-negative; 0 if either is 0).

    >>> fnp.lcm(fnp.array([4, -6]), fnp.array([6, 4]))       # [12, 12]
    """
    return _M.lcm_p.bind(*promote(x1, x2))


def heaviside(x1: Any, x2: Any, /) -> Any:
    """Step function: 0 where ``x1 < 0``, 1 where ``x1 > 0``, ``x2`` where ``x1 == 0``.

    >>> fnp.heaviside(fnp.array([-1.0, 0.0, 2.0]), 0.5)   # [0, 0.5, 1]
    """
    x1, x2 = _float_arrays(x1, x2)
    inner = _E.where(_E.isnan(x1), x1, x2)
    return _E.where(_E.less(x1, 0), 0.0, _E.where(_E.greater(x1, 0), 1.0, inner))


def hypot(x1: Any, x2: Any, /) -> Any:
    """``sqrt(x1**2 + x2**2)`` without overflow or underflow (as ``jnp.hypot``).

    >>> fnp.hypot(fnp.array([3.0]), fnp.array([4.0]))    # [5]
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


def i0(x: Any) -> Any:
    """The modified Bessel function of the first kind, order 0, elementwise (real ``x``).

    Written with elementary operations (a power series for ``|x| <= 8``, a Chebyshev series of
    ``sqrt(x) exp(-x) i0(x)`` beyond), so its derivatives of every order are available and
    smooth at 0.

    >>> fnp.i0(fnp.array([0.0, 1.0]))         # [1, 1.2661]
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


def logaddexp(x1: Any, x2: Any, /, *, out: None = None, where: None = None) -> Any:
    """``log(exp(x1) + exp(x2))`` without overflow; its gradient is exact at ``x1 == x2`` (1/2 each).

    >>> fnp.logaddexp(fnp.array([0.0]), fnp.array([0.0]))   # [log 2]
    """
    if out is not None or where is not None:
        raise NotImplementedError("logaddexp: out= and where= are not supported (as in JAX)")
    return _M.logaddexp_p.bind(*promote_inexact(x1, x2))


def logaddexp2(x1: Any, x2: Any, /, *, out: None = None, where: None = None) -> Any:
    """``log2(2**x1 + 2**x2)`` without overflow.

    >>> fnp.logaddexp2(fnp.array([1.0]), fnp.array([1.0]))  # [2]
    """
    if out is not None or where is not None:
        raise NotImplementedError("logaddexp2: out= and where= are not supported (as in JAX)")
    x1, x2 = promote_inexact(x1, x2)
    return lax.div(_M.logaddexp_p.bind(lax.mul(x1, _LN2), lax.mul(x2, _LN2)), _LN2)


def nan_to_num(x: Any, copy: bool = True, nan: Any = 0.0, posinf: Any = None, neginf: Any = None) -> Any:
    """``x`` with NaN replaced by ``nan`` and +-inf by ``posinf``/``neginf`` (default: the dtype's
    largest / lowest finite value).  Integers and bools are returned unchanged.

    >>> fnp.nan_to_num(fnp.array([fnp.nan, fnp.inf]))     # [0, 3.4028235e38]
    """
    del copy
    x = arr(x)
    if x.dtype.kind != "f":
        return x
    info = np.finfo(x.dtype)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf

    def const(v: Any) -> Any:
        return lax.convert_element_type(arr(v), x.dtype) if _is_value(v) else lax.convert_element_type(
            arr(np.asarray(v, x.dtype)), x.dtype)
    out = _E.where(_E.isnan(x), const(nan), x)
    out = _E.where(isposinf(out), const(posinf), out)
    return _E.where(isneginf(out), const(neginf), out)


def nextafter(x: Any, y: Any, /) -> Any:
    """The next float after ``x`` towards ``y``, elementwise (no derivative: zero gradient).

    >>> fnp.nextafter(fnp.array([1.0]), 2.0)             # [1.0000001]
    """
    return lax.nextafter(*_float_arrays(x, y))    # in the result dtype: float32's next float, not float64's


def signbit(x: Any, /) -> Any:
    """True where the sign bit is set (``-0.0`` and negative NaNs included; False for unsigned and bools).

    >>> fnp.signbit(fnp.array([-0.0, 0.0, -1.0]))     # [True, False, True]
    """
    x = arr(x)
    kind = x.dtype.kind
    if kind == "f":
        bits = {2: np.int16, 4: np.int32, 8: np.int64}[x.dtype.itemsize]
        return lax.lt(_bitcast(x, bits), 0)
    if kind == "i":
        return lax.lt(x, 0)
    if kind in "ub":
        return _false_like(x)
    raise TypeError(f"signbit: expected a real number array, got {describe(x)}")


def copysign(x1: Any, x2: Any, /) -> Any:
    """``|x1|`` with the sign of ``x2`` (its sign bit, so ``-0.0`` counts as negative); the gradient
    w.r.t. ``x1`` is ``sign(x1) * sign(x2)`` (0 at ``x1 == 0``), w.r.t. ``x2`` it is 0.

    >>> fnp.copysign(fnp.array([1.0, -2.0]), fnp.array([-0.0, 3.0]))   # [-1, 2]
    """
    x1, x2 = _float_arrays(x1, x2)
    a = lax.abs(x1)
    return _E.where(signbit(x2), lax.neg(a), a)


def sinc(x: Any) -> Any:
    """``sin(pi x) / (pi x)``, 1 at 0.  Derivatives of every order are finite at 0 (a Taylor
    polynomial is used there, so the first six derivatives at 0 are exact).

    >>> fnp.sinc(fnp.array([0.0, 0.5]))       # [1, 0.6366]
    """
    (x,) = promote_inexact(x)
    at_zero = lax.eq(x, 0.0)
    pi_x = lax.mul(x, float(np.pi))
    safe = _E.where(at_zero, 1.0, pi_x)
    u = lax.mul(pi_x, pi_x)     # Taylor series of sin(t)/t in u = t^2, evaluated at x (used only at x == 0)
    taylor = lax.add(1.0, lax.mul(u, lax.add(-1.0 / 6.0, lax.mul(u, lax.add(1.0 / 120.0, lax.mul(u, -1.0 / 5040.0))))))
    return _E.where(at_zero, taylor, lax.div(lax.sin(safe), safe))


def spacing(x: Any, /) -> Any:
    """Distance from ``x`` to the next float away from zero (negative for negative ``x``), as
    ``numpy.spacing``; zero gradient.

    >>> fnp.spacing(fnp.array([1.0]))         # [1.1920929e-07]
    """
    (x,) = _float_arrays(x)
    x = lax.stop_gradient(x)
    inf = copysign(np.inf, x)
    result = lax.sub(lax.nextafter(x, inf), x)
    if x.dtype == np.float16:
        return result
    tiny = copysign(float(np.finfo(x.dtype).smallest_subnormal), x)
    return _E.where(lax.eq(result, 0.0), tiny, result)


def isinf(x: Any, /) -> Any:
    """True where ``x`` is +inf or -inf (always False for integers and bools).

    >>> fnp.isinf(fnp.array([1.0, -fnp.inf, fnp.nan]))   # [False, True, False]
    """
    x = arr(x)
    if x.dtype.kind != "f":
        return _false_like(x)
    return lax.eq(lax.abs(x), np.inf)


def isposinf(x: Any, out: None = None) -> Any:
    """True where ``x`` is +inf.

    >>> fnp.isposinf(fnp.array([fnp.inf, -fnp.inf]))     # [True, False]
    """
    if out is not None:
        raise NotImplementedError("isposinf: out= is not supported (funcgrad arrays are immutable)")
    x = arr(x)
    return lax.eq(x, np.inf) if x.dtype.kind == "f" else _false_like(x)


def isneginf(x: Any, out: None = None) -> Any:
    """True where ``x`` is -inf.

    >>> fnp.isneginf(fnp.array([fnp.inf, -fnp.inf]))     # [False, True]
    """
    if out is not None:
        raise NotImplementedError("isneginf: out= is not supported (funcgrad arrays are immutable)")
    x = arr(x)
    return lax.eq(x, -np.inf) if x.dtype.kind == "f" else _false_like(x)


def _false_like(x: Any) -> Any:
    # False of x's shape for an integer or bool x (x != x), a value under vmap and jit too.
    return lax.ne(x, x)


# ------------------------------------------------------------------ bit operations

_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _int_args(name: str, *xs: Any) -> list:
    xs = promote(*xs)
    for x in xs:
        if _dtype(x).kind not in "iub":
            raise TypeError(f"{name}: operands must be integers or bools, got "
                            f"{', '.join(describe(v) for v in xs)}; bit operations are not defined for floats")
    return [arr(x) if not _is_value(x) else x for x in xs]


def _bitcast(x: Any, dtype: Any) -> Any:
    # Same-width bitcast; a 0-d operand goes through shape (1,) (the primitive's impl gives 0-d arrays
    # shape (1,)).
    if x.ndim == 0:
        return lax.reshape(lax.bitcast_convert_type(lax.reshape(x, (1,)), dtype), ())
    return lax.bitcast_convert_type(x, dtype)


def _bitwise(name: str, op_unsigned: Any, op_bool: Any) -> Any:
    def f(x1: Any, x2: Any, /, *, out: None = None, where: None = None) -> Any:
        if out is not None or where is not None:
            raise NotImplementedError(f"{name}: out= and where= are not supported (as in JAX)")
        x, y = _int_args(name, x1, x2)
        x, y = promote(x, y)
        dtype = _dtypes.result_type(x, y)
        x, y = (lax.convert_element_type(arr(v), dtype) for v in (x, y))
        if dtype.kind == "b":
            return op_bool(x, y)
        if dtype.kind == "u":
            return op_unsigned(x, y)
        u = _UNSIGNED[dtype.itemsize]
        return _bitcast(op_unsigned(_bitcast(x, u), _bitcast(y, u)),
                                        dtype)
    f.__name__ = f.__qualname__ = name
    return f


def _xor_unsigned(x: Any, y: Any) -> Any:
    return lax.sub(lax.bitwise_or(x, y), lax.bitwise_and(x, y))


bitwise_and = _bitwise("bitwise_and", lax.bitwise_and, lax.logical_and)
bitwise_or = _bitwise("bitwise_or", lax.bitwise_or, lax.logical_or)
bitwise_xor = _bitwise("bitwise_xor", _xor_unsigned, lax.logical_xor)
bitwise_and.__doc__ = """Elementwise ``x1 & x2`` for integers and bools (two's complement for signed).

    >>> fnp.bitwise_and(fnp.array([12, -1]), 10)     # [8, 10]
    """
bitwise_or.__doc__ = """Elementwise ``x1 | x2`` for integers and bools.

    >>> fnp.bitwise_or(fnp.array([12, 1]), 2)        # [14, 3]
    """
bitwise_xor.__doc__ = """Elementwise ``x1 ^ x2`` for integers and bools.

    >>> fnp.bitwise_xor(fnp.array([12, -1]), 10)     # [6, -11]
    """


def bitwise_not(x: Any, /) -> Any:
    """Elementwise ``~x``: two's complement for integers, logical not for bools.

    >>> fnp.bitwise_not(fnp.array([0, 5]))           # [-1, -6]
    """
    (x,) = _int_args("bitwise_not", x)
    return lax.bitwise_not(x)


invert = bitwise_invert = bitwise_not


def bitwise_count(x: Any, /) -> Any:
    """The number of 1 bits in ``|x|`` (uint8), as ``numpy.bitwise_count``.

    >>> fnp.bitwise_count(fnp.array([3, -1, 255]))   # [2, 1, 8]
    """
    (x,) = _int_args("bitwise_count", x)
    if x.dtype.kind == "i":
        x = lax.abs(x)     # abs(INT_MIN) wraps to INT_MIN, whose bits count 1 (numpy's answer)
    return _M.population_count_p.bind(x)


def left_shift(x: Any, y: Any, /) -> Any:
    """Elementwise ``x << y`` for integers (shifts of the bit width or more give 0).

    >>> fnp.left_shift(fnp.array([1, 3]), 2)         # [4, 12]
    """
    x, y = _int_args("left_shift", x, y)
    dtype = _dtypes.result_type(x, y)
    if dtype.kind == "b":
        raise TypeError("left_shift: not supported for bool operands; convert them to integers first")
    x, y = (lax.convert_element_type(v, dtype) for v in (x, y))
    if dtype.kind == "u":
        return lax.shift_left(x, y)
    u = _UNSIGNED[dtype.itemsize]
    return _bitcast(lax.shift_left(_bitcast(x, u), _bitcast(y, u)),
                                    dtype)


def right_shift(x1: Any, x2: Any, /) -> Any:
    """Elementwise ``x >> y``: arithmetic (sign-filling) for signed integers, logical for unsigned;
    shifts of the bit width or more give 0 (or -1 for negative signed values).

    >>> fnp.right_shift(fnp.array([16, -16]), 2)     # [4, -4]
    """
    x, y = _int_args("right_shift", x1, x2)
    dtype = _dtypes.result_type(x, y)
    if dtype.kind == "b":
        raise TypeError("right_shift: not supported for bool operands; convert them to integers first")
    x, y = (lax.convert_element_type(v, dtype) for v in (x, y))
    if dtype.kind == "u":
        return lax.shift_right_logical(x, y)
    u = _UNSIGNED[dtype.itemsize]
    yu = _bitcast(y, u)
    # Negative x: ~((~x) >> y) with ~x >= 0, so a logical shift of it fills with sign bits.
    neg = lax.lt(x, 0)
    base = lax.select(neg, lax.bitwise_not(x), x)
    shifted = _bitcast(lax.shift_right_logical(_bitcast(base, u), yu), dtype)
    return lax.select(neg, lax.bitwise_not(shifted), shifted)


bitwise_left_shift, bitwise_right_shift = left_shift, right_shift


# ------------------------------------------------------------------ predicates


def isclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08, equal_nan: bool = False) -> Any:
    """Elementwise ``|a - b| <= atol + rtol * |b|`` (infinities equal only to themselves; NaNs
    equal with ``equal_nan``), computed in ``a`` and ``b``'s float dtype.

    >>> fnp.isclose(fnp.array([1.0, 2.0]), fnp.array([1.0 + 1e-9, 2.1]))   # [True, False]
    """
    a, b = promote(a, b)
    a, b = promote_inexact(a, b)
    a, b = arr(a), arr(b)
    dtype = _dtypes.result_type(a, b)
    rtol = lax.convert_element_type(arr(rtol) if _is_value(rtol) else arr(np.asarray(rtol)), dtype)
    atol = lax.convert_element_type(arr(atol) if _is_value(atol) else arr(np.asarray(atol)), dtype)
    in_range = lax.le(lax.abs(lax.sub(a, b)), lax.add(atol, lax.mul(rtol, lax.abs(b))))
    out = _E.logical_or(lax.eq(a, b), _E.logical_and(lax.is_finite(b), in_range))
    if equal_nan:
        out = _E.logical_or(out, _E.logical_and(lax.isnan(a), lax.isnan(b)))
    return out


def allclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08, equal_nan: bool = False) -> Any:
    """True (a 0-d bool array) where :func:`isclose` holds everywhere.

    >>> fnp.allclose(fnp.array([1.0, 2.0]), fnp.array([1.0, 2.0 + 1e-7]))   # True
    """
    return all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> Any:
    """True (a 0-d bool array) where the arrays have the same shape and elements (NaNs equal
    with ``equal_nan``); False for different shapes.

    >>> fnp.array_equal(fnp.array([1, 2]), fnp.array([1, 2]))      # True
    """
    a1, a2 = arr(a1), arr(a2)
    if a1.shape != a2.shape:
        return arr(np.asarray(False))
    eq = _E.equal(a1, a2)
    if equal_nan and _dtypes.result_type(a1, a2).kind == "f":
        eq = _E.logical_or(eq, _E.logical_and(_E.isnan(a1), _E.isnan(a2)))
    return all(eq)


def array_equiv(a1: Any, a2: Any) -> Any:
    """True (a 0-d bool array) where the arrays are equal after broadcasting; False where their
    shapes do not broadcast.

    >>> fnp.array_equiv(fnp.array([1, 2]), fnp.array([[1, 2], [1, 2]]))   # True
    """
    a1, a2 = arr(a1), arr(a2)
    try:
        np.broadcast_shapes(a1.shape, a2.shape)
    except ValueError:
        return arr(np.asarray(False))
    return all(_E.equal(a1, a2))


def isscalar(element: Any) -> bool:
    """True for Python/numpy scalars and for 0-d arrays (unlike numpy, as JAX: a 0-d funcgrad array
    is a scalar); False for lists, None and arrays with axes.

    >>> fnp.isscalar(1.0), fnp.isscalar(fnp.array(1.0)), fnp.isscalar([1])   # True, True, False
    """
    if np.isscalar(element):
        return True
    if isinstance(element, (np.ndarray, Array, Tracer)):
        return element.ndim == 0
    return False


def iterable(y: Any) -> bool:
    """True where ``iter(y)`` works (numpy's ``iterable``; a 0-d array is not iterable).

    >>> fnp.iterable([1, 2]), fnp.iterable(3.0)    # True, False
    """
    if isinstance(y, (Array, Tracer)):
        return y.ndim > 0
    return bool(np.iterable(y))


# ------------------------------------------------------------------ dtype utilities


def _as_dtype(name: str, x: Any) -> Any:
    """A dtype, Python scalar (weakly typed) or array's dtype for the promotion functions."""
    if isinstance(x, (bool, int, float)):
        return x
    if x is bool or x is int or x is float:
        return {bool: False, int: 0, float: 0.0}[x]
    dtype = getattr(x, "dtype", None)
    if dtype is not None and not isinstance(x, type):
        return np.dtype(dtype)
    try:
        return np.dtype(x)
    except TypeError:
        raise TypeError(f"{name}: {x!r} is not a dtype, array or scalar") from None


def result_type(*args: Any) -> np.dtype:
    """The dtype funcgrad's arithmetic gives these arrays, dtypes and scalars (Python scalars and the
    types ``int``/``float`` are weakly typed; the result is canonical: 32-bit without x64).

    funcgrad promotes as numpy 2 (NEP 50) on array dtypes: ``int32`` with ``float16`` is
    ``float32`` here (``float64`` narrowed), ``float16`` in JAX.

    >>> fnp.result_type(fnp.ones(2, fnp.int8), 1.0)     # float32
    """
    if not args:
        raise ValueError("result_type: at least one array or dtype is required")
    items = [_as_dtype("result_type", a) for a in args]
    if builtins.all(isinstance(i, (bool, int, float)) for i in items):
        return _dtypes.result_type(*items)
    return _dtypes.canonicalize(np.result_type(*items))


def promote_types(a: Any, b: Any) -> np.dtype:
    """The dtype two dtypes promote to (numpy's lattice, not narrowed to 32 bits: as
    ``jnp.promote_types``, this does not canonicalise).

    >>> fnp.promote_types(fnp.int8, fnp.float32)      # float32
    """
    return np.promote_types(_dtype_arg("promote_types", a), _dtype_arg("promote_types", b))


def _dtype_arg(name: str, x: Any) -> np.dtype:
    dtype = getattr(x, "dtype", None)
    if dtype is not None and not isinstance(x, type):
        return np.dtype(dtype)
    try:
        return np.dtype(x)
    except TypeError:
        raise TypeError(f"{name}: {x!r} is not a dtype") from None


def can_cast(from_: Any, to: Any, casting: str = "safe") -> bool:
    """Whether ``from_`` (a dtype or an array's dtype) casts to ``to`` under numpy's ``casting`` rule.

    >>> fnp.can_cast(fnp.int8, fnp.int32), fnp.can_cast(fnp.float32, fnp.int32)   # True, False
    """
    return bool(np.can_cast(_dtype_arg("can_cast", from_), _dtype_arg("can_cast", to), casting))


def isdtype(dtype: Any, kind: Any) -> bool:
    """Whether ``dtype`` is of ``kind`` (the array API's ``isdtype``): a dtype, or one of ``"bool"``,
    ``"signed integer"``, ``"unsigned integer"``, ``"integral"``, ``"real floating"``,
    ``"complex floating"``, ``"numeric"``, or a tuple of these.

    >>> fnp.isdtype(fnp.float32, "real floating")     # True
    """
    kinds = kind if isinstance(kind, tuple) else (kind,)
    kinds = tuple(k if isinstance(k, str) else _dtype_arg("isdtype", k) for k in kinds)
    return bool(np.isdtype(_dtype_arg("isdtype", dtype), kinds))


def issubdtype(arg1: Any, arg2: Any) -> bool:
    """numpy's ``issubdtype``: whether ``arg1`` is ``arg2`` or below it in the type hierarchy
    (``fnp.floating``-style abstract types from numpy work).

    >>> fnp.issubdtype(fnp.float32, np.floating)      # True
    """
    return bool(np.issubdtype(arg1, arg2))


def finfo(dtype: Any) -> np.finfo:
    """Machine limits of a float dtype (numpy's ``finfo``; an array stands for its dtype).

    >>> fnp.finfo(fnp.float32).eps                     # 1.1920929e-07
    """
    return np.finfo(_dtype_arg("finfo", dtype))


def iinfo(int_type: Any) -> np.iinfo:
    """Machine limits of an integer dtype (numpy's ``iinfo``; an array stands for its dtype).

    >>> fnp.iinfo(fnp.int8).max                        # 127
    """
    return np.iinfo(_dtype_arg("iinfo", int_type))


# ------------------------------------------------------------------ vectorize, apply_along_axis, apply_over_axes

_DIM = r"\w+"
_CORE = "(?:{0:}(?:,{0:})*)?".format(_DIM)
_ARG = rf"\({_CORE}\)"
_ARGS = "{0:}(?:,{0:})*".format(_ARG)
_SIGNATURE = "^{0:}->{0:}$".format(_ARGS)


def _parse_signature(signature: str) -> tuple[list, list]:
    if not isinstance(signature, str) or not re.match(_SIGNATURE, signature.replace(" ", "")):
        raise ValueError(f"vectorize: not a valid gufunc signature: {signature!r} (expected e.g. '(n),(n)->()')")
    ins, outs = ([tuple(re.findall(_DIM, a)) for a in re.findall(_ARG, part)]
                 for part in signature.replace(" ", "").split("->"))
    return ins, outs


def _core_sizes(sizes: dict, shape: tuple, core: tuple, context: str, is_input: bool) -> None:
    if is_input and len(shape) < len(core):
        raise ValueError(f"vectorize: an input of shape {shape} does not have enough dimensions for the core "
                         f"dimensions {core} {context}")
    if not is_input and len(shape) != len(core):
        raise ValueError(f"vectorize: an output of shape {shape} does not match the core dimensions {core} {context}")
    for dim, size in zip(core, shape[len(shape) - len(core):] if core else ()):
        if sizes.setdefault(dim, size) != size:
            raise ValueError(f"vectorize: inconsistent size for core dimension {dim!r}: {size} vs {sizes[dim]} "
                             f"{context}")


def vectorize(pyfunc: Any, *, excluded: Any = frozenset(), signature: str | None = None) -> Any:
    """``pyfunc`` vectorized with broadcasting, in the style of numpy's generalized ufuncs, built on
    :func:`funcgrad.vmap` (as ``jnp.vectorize``): ``pyfunc`` is written for one element (or one core
    block, with ``signature`` such as ``"(n),(n)->()"``) and is mapped over all leading dimensions.

    ``excluded``: positions (ints) or keyword names (strs) passed to ``pyfunc`` as they are. Other
    keyword arguments are vectorized like the positional ones without a ``signature`` (as numpy;
    ``jnp.vectorize`` drops them), and passed as they are with one.

    >>> dot = fnp.vectorize(lambda a, b: fnp.sum(a * b), signature="(n),(n)->()")
    >>> dot(fnp.ones((4, 3)), fnp.ones(3)).shape            # (4,)
    """
    from funcgrad.api import vmap
    from funcgrad.numpy._shape import expand_dims, squeeze
    if builtins.any(not isinstance(e, (str, int)) for e in excluded):
        raise TypeError(f"vectorize can only exclude integer or string arguments, but excluded={excluded!r}")
    if builtins.any(isinstance(e, int) and e < 0 for e in excluded):
        raise ValueError(f"vectorize: excluded={excluded!r} contains negative numbers")
    parsed = _parse_signature(signature) if signature is not None else None

    @functools.wraps(pyfunc)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        context = f"(on a vectorized function with excluded={excluded!r} and signature={signature!r})"
        static = [(i, args[i]) for i in sorted(e for e in excluded if isinstance(e, int)) if i < len(args)]
        dynamic = [a for i, a in enumerate(args) if i not in excluded]
        # Keyword arguments not excluded are vectorized too (as numpy; jnp.vectorize drops them) when there
        # is no signature; with a signature they are passed as they are.
        mapped = [k for k in kwargs if k not in excluded] if parsed is None else []
        fixed = {k: v for k, v in kwargs.items() if k not in mapped}
        n_pos = len(dynamic)
        dynamic += [kwargs[k] for k in mapped]

        def call(*dyn: Any) -> Any:
            full = list(dyn[:n_pos])
            for i, a in static:
                full.insert(i, a)
            return pyfunc(*full, **fixed, **dict(zip(mapped, dyn[n_pos:])))

        if parsed is None:
            in_core, out_core = [()] * len(dynamic), None
        else:
            in_core, out_core = parsed
        nones = [i for i, a in enumerate(dynamic) if a is None]
        if nones:
            if builtins.any(in_core[i] != () for i in nones if i < len(in_core)):
                raise ValueError(f"vectorize: cannot pass None at positions {nones} with signature={signature!r}")
            inner, kept = call, dynamic

            def call(*dyn: Any) -> Any:  # noqa: F811 - the Nones put back
                it = iter(dyn)
                return inner(*[None if a is None else next(it) for a in kept])
            in_core = [c for i, c in enumerate(in_core) if i not in nones]
            dynamic = [a for a in dynamic if a is not None]
        dynamic = [arr(a) for a in dynamic]
        if len(dynamic) != len(in_core):
            raise TypeError(f"vectorize: wrong number of positional arguments: expected {len(in_core)}, got "
                            f"{len(dynamic)} {context}")
        sizes: dict = {}
        loop_shapes = []
        for a, core in zip(dynamic, in_core):
            _core_sizes(sizes, a.shape, core, context, True)
            loop_shapes.append(a.shape[:a.ndim - len(core)])
        try:
            loop = tuple(np.broadcast_shapes(*loop_shapes))
        except ValueError:
            raise ValueError(f"vectorize: the loop dimensions {loop_shapes} of the arguments cannot be broadcast "
                             f"together {context}") from None

        def checked(*dyn: Any) -> Any:
            out = call(*dyn)
            if out_core is None:
                return out
            if len(out_core) > 1 and not isinstance(out, tuple):
                raise TypeError(f"vectorize: the output must be a tuple when several outputs are expected "
                                f"{context}")
            outs = out if isinstance(out, tuple) else (out,)
            if len(outs) != len(out_core):
                raise TypeError(f"vectorize: wrong number of outputs: expected {len(out_core)}, got "
                                f"{len(outs)} {context}")
            own = dict(sizes)
            for o, core in zip(outs, out_core):
                _core_sizes(own, tuple(np.shape(o)), core, context, False)
            return out
        squeezed, rev_filled = [], []
        for a, core in zip(dynamic, in_core):
            noncore = a.shape[:a.ndim - len(core)]
            rev_filled.append(((1,) * (len(loop) - len(noncore)) + noncore)[::-1])
            ones = tuple(i for i, d in enumerate(noncore) if d == 1)
            squeezed.append(squeeze(a, ones) if ones else a)
        fn = checked
        expand = []
        for negdim, axis_sizes in enumerate(zip(*rev_filled)):
            in_axes = tuple(None if d == 1 else 0 for d in axis_sizes)
            if builtins.all(ax is None for ax in in_axes):
                expand.append(len(loop) - 1 - negdim)
            else:
                fn = vmap(fn, in_axes=in_axes)
        result = fn(*squeezed)
        if not expand:
            return result
        if isinstance(result, tuple):
            return tuple(expand_dims(r, tuple(sorted(expand))) for r in result)
        return expand_dims(result, tuple(sorted(expand)))
    return wrapped


def apply_along_axis(func1d: Any, axis: int, arr: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: F811
    """``func1d`` applied to the 1-d slices of ``arr`` along ``axis`` (via vmap, as JAX); the
    slices' results take the place of that axis.

    >>> fnp.apply_along_axis(fnp.sum, 1, fnp.ones((2, 3)))    # [3, 3]
    """
    from funcgrad.api import vmap
    from funcgrad.numpy._base import normalize_axis
    x = _as_array(arr)
    axis = normalize_axis("apply_along_axis", axis, x.ndim, x)

    def func(v: Any) -> Any:
        return func1d(v, *args, **kwargs)
    for i in range(1, x.ndim - axis):
        func = vmap(func, in_axes=i, out_axes=-1)
    for _ in range(axis):
        func = vmap(func, in_axes=0, out_axes=0)
    return func(x)


def _as_array(x: Any) -> Any:
    from funcgrad.numpy._base import arr as _arr
    return _arr(x)


def apply_over_axes(func: Any, a: Any, axes: Any) -> Any:
    """``func(a, axis)`` applied for each axis in ``axes`` in turn; a result with one axis fewer
    gets it back as length 1 (so ``fnp.sum`` keeps dims).

    >>> fnp.apply_over_axes(fnp.sum, fnp.ones((2, 3, 4)), [0, 2]).shape     # (1, 3, 1)
    """
    from funcgrad.numpy._shape import expand_dims
    x = _as_array(a)
    for axis in (axes if isinstance(axes, (list, tuple)) else [axes]):
        b = func(x, axis)
        if b.ndim == x.ndim:
            x = b
        elif b.ndim == x.ndim - 1:
            x = expand_dims(b, axis)
        else:
            raise ValueError(f"apply_over_axes: function is not returning an array of the correct shape "
                             f"(got {describe(b)} from an input {describe(x)})")
    return x


def kaiser(M: int, beta: Any) -> Any:
    """The Kaiser window of ``M`` points with shape parameter ``beta``
    (``i0(beta * sqrt(1 - (2n/(M-1) - 1)**2)) / i0(beta)``); differentiable in ``beta``.

    >>> fnp.kaiser(4, 2.0)                                 # [0.4387, 0.9243, 0.9243, 0.4387]
    """
    M = index_arg("kaiser", "M", M)
    if not isinstance(beta, (Array, Tracer)):
        return _window("kaiser", M, lambda m: np.kaiser(m, float(beta)))
    (beta,) = promote_inexact(beta)
    if M <= 1:
        return _window("kaiser", M, np.ones)
    n = np.arange(M, dtype=np.float64)
    r = np.sqrt(np.maximum(1.0 - (2.0 * n / (M - 1) - 1.0) ** 2, 0.0))
    return lax.div(i0(lax.mul(beta, lax.convert_element_type(as_array(r), beta.dtype))), i0(beta))


class ufunc:
    """A universal function made from a Python function on scalars (as ``jnp.ufunc``): calling it
    broadcasts and maps the function over its arguments (:func:`vectorize`), and for binary
    functions ``reduce``, ``accumulate``, ``outer`` and ``at`` work as numpy's ufunc methods (through
    ``lax.scan``, so under jit and grad too).

    >>> mul_add = fnp.frompyfunc(lambda a, b: a * b + 1, 2, 1)
    >>> mul_add.reduce(fnp.array([1.0, 2.0, 3.0]))      # ((1*2+1)*3+1) = 10
    """

    def __init__(self, func: Any, /, nin: int, nout: int, *, name: str | None = None, nargs: int | None = None,
                 identity: Any = None, call: Any = None, reduce: Any = None, accumulate: Any = None,
                 at: Any = None, reduceat: Any = None) -> None:
        if reduceat is not None:
            raise NotImplementedError("ufunc: a custom reduceat= implementation is not supported")
        self._func = func
        self.nin, self.nout = index_arg("ufunc", "nin", nin), index_arg("ufunc", "nout", nout)
        self.nargs = self.nin if nargs is None else nargs
        self.identity = identity
        self.__name__ = name or getattr(func, "__name__", "ufunc")
        # call: an implementation that broadcasts by itself (else func is vectorized); reduce, accumulate,
        # at: faster implementations of those methods, with the methods' signatures (as jnp.ufunc).
        self._call = call if call is not None else vectorize(func)
        self._reduce, self._accumulate, self._at = reduce, accumulate, at

    def __repr__(self) -> str:
        return f"<fnp.ufunc '{self.__name__}'>"

    def __call__(self, *args: Any, out: None = None, where: None = None) -> Any:
        if out is not None or where is not None:
            raise NotImplementedError(f"{self.__name__}: out= and where= are not supported (as in JAX)")
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__}() takes {self.nin} positional arguments, got {len(args)}")
        return self._call(*args)

    def _binary(self, method: str) -> None:
        if self.nin != 2 or self.nout != 1:
            raise ValueError(f"{method} only supported for binary ufuncs with a single output; "
                             f"{self.__name__} has nin={self.nin}, nout={self.nout}")

    def outer(self, A: Any, B: Any, /) -> Any:
        """``self(a, b)`` for every pair of elements: shape ``A.shape + B.shape``."""
        self._binary("outer")
        A, B = _as_array(A), _as_array(B)
        return self(lax.reshape(A, tuple(A.shape) + (1,) * B.ndim), B)

    def reduce(self, a: Any, axis: Any = 0, dtype: Any = None, out: None = None, keepdims: bool = False,
               initial: Any = None, where: Any = None) -> Any:
        """Fold the function along ``axis`` (None: all axes), from ``initial`` or the first element."""
        from funcgrad.lax import scan
        from funcgrad.numpy._base import normalize_axes
        self._binary("reduce")
        if out is not None:
            raise NotImplementedError("reduce: out= is not supported (funcgrad arrays are immutable)")
        if self._reduce is not None:
            return self._reduce(a, axis, dtype, out, keepdims, initial, where)
        x = _as_array(a)
        if dtype is not None:
            x = lax.convert_element_type(x, dtype)
        axes = normalize_axes(f"{self.__name__}.reduce", axis, x.ndim, x)
        start = initial if initial is not None else self.identity
        if where is not None:
            if start is None:
                raise ValueError(f"reduction operation {self.__name__} does not have an identity, so to use a "
                                 "where mask one has to specify 'initial'")
            from funcgrad.numpy._reductions import _mask
            x = _E.where(_mask(f"{self.__name__}.reduce", where, x), x, start)
        kept = tuple(i for i in range(x.ndim) if i not in axes)
        flat = lax.reshape(lax.transpose(x, axes + kept) if x.ndim else x,
                           (int(np.prod([x.shape[i] for i in axes], dtype=np.int64)),)
                           + tuple(x.shape[i] for i in kept))
        if initial is None and flat.shape[0] == 0 and self.identity is None:
            raise ValueError(f"zero-size array to reduction operation {self.__name__} which has no identity")
        if initial is None:
            init, rest = (flat[0], flat[1:]) if flat.shape[0] else (None, flat)
            if init is None:
                init = lax.broadcast_to(lax.convert_element_type(_as_array(np.asarray(self.identity)), x.dtype),
                                        flat.shape[1:])
        else:
            init, rest = lax.broadcast_to(lax.convert_element_type(_as_array(np.asarray(initial))
                                                                   if not _is_value(initial) else initial, x.dtype),
                                          flat.shape[1:]), flat
        result, _ = scan(lambda c, v: (self(c, v), None), init, rest)
        if keepdims:
            result = lax.reshape(result, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
        return result

    def accumulate(self, a: Any, axis: int = 0, dtype: Any = None, out: None = None) -> Any:
        """The running fold along ``axis`` (``accumulate(add)`` is ``cumsum``)."""
        from funcgrad.lax import scan
        from funcgrad.numpy._base import normalize_axis
        from funcgrad.numpy._shape import concatenate, moveaxis
        self._binary("accumulate")
        if out is not None:
            raise NotImplementedError("accumulate: out= is not supported (funcgrad arrays are immutable)")
        if self._accumulate is not None:
            return self._accumulate(a, axis, dtype)
        x = _as_array(a)
        if dtype is not None:
            x = lax.convert_element_type(x, dtype)
        axis = normalize_axis(f"{self.__name__}.accumulate", axis, x.ndim, x)
        front = moveaxis(x, axis, 0)
        if front.shape[0] == 0:
            return x

        def step(c: Any, v: Any) -> tuple:
            c = self(c, v)
            return c, c
        _, ys = scan(step, front[0], front[1:])
        return moveaxis(concatenate([lax.reshape(front[0], (1,) + tuple(front.shape[1:])), ys]), 0, axis)

    def at(self, a: Any, indices: Any, b: Any = None, /, *, inplace: bool = True) -> Any:
        """A new array: ``a`` with ``self(a[indices], b)`` applied at each index in turn (repeated indices
        apply repeatedly).  ``inplace=False`` is required, as in JAX (arrays are immutable).  The
        indices must be concrete."""
        from funcgrad.lax import scan
        if inplace:
            raise NotImplementedError("ufunc.at: funcgrad arrays are immutable; pass inplace=False to get the "
                                      "result as a new array")
        if self.nout != 1 or self.nin != (1 if b is None else 2):
            raise ValueError(f"ufunc.at: {self.__name__} (nin={self.nin}, nout={self.nout}) does not match the "
                             "given arguments")
        if self._at is not None:
            return self._at(a, indices, b)
        x = _as_array(a)
        if isinstance(indices, Tracer):
            raise TypeError("ufunc.at: the indices must be concrete (not traced)")
        positions = np.arange(x.size).reshape(x.shape)[indices if not isinstance(indices, Array)
                                                       else np.asarray(indices)]
        pos = _as_array(np.ravel(positions).astype(np.int32))
        flat = lax.reshape(x, (x.size,))
        if b is None:
            def step(c: Any, p: Any) -> tuple:
                return c.at[p].set(self(c[p])), None
            out, _ = scan(step, flat, pos)
        else:
            vals = lax.broadcast_to(_as_array(b) if not isinstance(b, (bool, int, float)) else
                                    lax.convert_element_type(_as_array(np.asarray(b)), x.dtype), positions.shape)
            vals = lax.reshape(vals, (positions.size,))

            def step(c: Any, pv: Any) -> tuple:
                p, v = pv
                return c.at[p].set(self(c[p], v)), None
            out, _ = scan(step, flat, (pos, vals))
        return lax.reshape(out, x.shape)

    def reduceat(self, a: Any, indices: Any, axis: int = 0, dtype: Any = None, out: None = None) -> Any:
        """Not implemented (numpy's reduceat); raises NotImplementedError."""
        raise NotImplementedError("ufunc.reduceat is not implemented in funcgrad; use reduce on slices")


def _install_ufunc_methods() -> None:
    """numpy's ufunc methods on funcgrad.numpy's binary functions: ``fnp.add.reduce``,
    ``fnp.multiply.outer``, ``fnp.logaddexp.reduce``, ``fnp.add.at(x, i, v, inplace=False)``, ...
    (as ``jnp.add`` etc. are ``jnp.ufunc`` objects).  Sums, products, extremes and logsumexp reduce
    with their reductions; the others fold with ``lax.scan``."""
    from funcgrad.lax import cummax, cummin, cumprod
    from funcgrad.numpy import _reductions as R
    from funcgrad.numpy._base import normalize_axis

    def red(f: Any) -> Any:
        return lambda a, axis, dtype, out, keepdims, initial, where: f(
            a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)

    def extreme(f: Any) -> Any:
        def r(a: Any, axis: Any, dtype: Any, out: Any, keepdims: bool, initial: Any, where: Any) -> Any:
            x = _as_array(a) if dtype is None else lax.convert_element_type(_as_array(a), dtype)
            return f(x, axis=axis, keepdims=keepdims, initial=initial, where=where)
        return r

    def boolean(f: Any) -> Any:
        def r(a: Any, axis: Any, dtype: Any, out: Any, keepdims: bool, initial: Any, where: Any) -> Any:
            if initial is not None:
                raise NotImplementedError(f"{f.__name__}.reduce: initial= is not supported")
            return f(a, axis=axis, keepdims=keepdims, where=where)
        return r

    def logsumexp_reduce(a: Any, axis: Any, dtype: Any, out: Any, keepdims: bool, initial: Any,
                         where: Any) -> Any:
        x = _as_array(a) if dtype is None else lax.convert_element_type(_as_array(a), dtype)
        result = R.logsumexp(x, axis=axis, keepdims=keepdims, where=where)
        return result if initial is None else logaddexp(result, initial)

    def scan_acc(f: Any, name: str) -> Any:
        def acc(a: Any, axis: int, dtype: Any) -> Any:
            x = _as_array(a) if dtype is None else lax.convert_element_type(_as_array(a), dtype)
            return f(x, axis=normalize_axis(f"{name}.accumulate", axis, x.ndim, x))
        return acc

    def at_add(a: Any, indices: Any, b: Any) -> Any:
        return _as_array(a).at[indices].add(b)

    fast = {
        _E.add: (0, red(R.sum), scan_acc(lambda x, axis: R.cumsum(x, axis), "add"), at_add),
        _E.multiply: (1, red(R.prod), scan_acc(cumprod, "multiply"), None),
        _E.maximum: (None, extreme(R.max), scan_acc(cummax, "maximum"), None),
        _E.minimum: (None, extreme(R.min), scan_acc(cummin, "minimum"), None),
        _E.logical_and: (True, boolean(R.all), None, None),
        _E.logical_or: (False, boolean(R.any), None, None),
        logaddexp: (-np.inf, logsumexp_reduce, None, None),
    }
    binaries = [_E.subtract, _E.divide, _E.floor_divide, _E.mod, _E.power, _E.arctan2, _E.logical_xor,
                _E.equal, _E.not_equal, _E.less, _E.less_equal, _E.greater, _E.greater_equal, fmax, fmin, fmod,
                hypot, copysign, heaviside, logaddexp2, nextafter, float_power, ldexp, gcd, lcm, bitwise_and,
                bitwise_or, bitwise_xor, left_shift, right_shift]
    identities = {bitwise_or: 0, bitwise_xor: 0, bitwise_and: -1, gcd: 0, _E.logical_xor: False}
    for f in list(fast) + binaries:
        identity, reduce, accumulate, at = fast.get(f, (identities.get(f), None, None, None))
        u = ufunc(f, 2, 1, name=f.__name__, identity=identity, call=f, reduce=reduce, accumulate=accumulate,
                  at=at)
        f.reduce, f.accumulate, f.outer, f.at, f.reduceat = u.reduce, u.accumulate, u.outer, u.at, u.reduceat
        f.nin, f.nout, f.nargs, f.identity = 2, 1, 2, identity


def frompyfunc(func: Any, /, nin: int, nout: int, *, identity: Any = None) -> ufunc:
    """A :class:`ufunc` from a Python function on scalars with ``nin`` inputs and ``nout`` outputs.

    >>> add = fnp.frompyfunc(lambda a, b: a + b, 2, 1, identity=0)
    >>> add.outer(fnp.arange(2.0), fnp.arange(3.0)).shape          # (2, 3)
    """
    return ufunc(func, nin, nout, identity=identity)


_install_ufunc_methods()


# ------------------------------------------------------------------ io and printing (numpy's, on concrete arrays)

save, savez = np.save, np.savez
get_printoptions, set_printoptions, printoptions = np.get_printoptions, np.set_printoptions, np.printoptions


def load(file: Any, *args: Any, **kwargs: Any) -> Any:
    """numpy's ``load``; an array read back becomes a funcgrad array (``.npz`` archives and pickles
    come back as numpy returns them).

    >>> fnp.save("/tmp/x.npy", fnp.arange(3.0)); fnp.load("/tmp/x.npy")   # [0, 1, 2]
    """
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray):
        try:
            return _as_array(out)
        except TypeError:   # a dtype funcgrad does not hold (strings, objects): numpy's array
            return out
    return out


def _concrete(name: str, x: Any) -> np.ndarray:
    if isinstance(x, Tracer):
        raise TypeError(f"{name}: needs a concrete array, got a traced value {describe(x)} (inside jit, grad or "
                        "vmap); print it with funcgrad.debug / outside the transformation")
    return np.asarray(x)


def array_repr(arr: Any, max_line_width: Any = None, precision: Any = None, suppress_small: Any = None) -> str:
    """numpy's ``array_repr`` of a concrete array, with ``Array(`` for ``array(``.

    >>> fnp.array_repr(fnp.array([1.0, 2.0]))     # 'Array([1., 2.], dtype=float32)'
    """
    text = np.array_repr(_concrete("array_repr", arr), max_line_width, precision, suppress_small)
    body = text[len("array("):] if text.startswith("array(") else text
    if "dtype=" not in body:
        body = body[:-1] + f", dtype={np.asarray(arr).dtype.name})"
    return "Array(" + body.replace("\n      ", "\n      ")


def array_str(a: Any, max_line_width: Any = None, precision: Any = None, suppress_small: Any = None) -> str:
    """numpy's ``array_str`` of a concrete array.

    >>> fnp.array_str(fnp.array([1.0, 2.0]))      # '[1. 2.]'
    """
    return np.array_str(_concrete("array_str", a), max_line_width, precision, suppress_small)
