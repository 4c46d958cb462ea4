"""funcgrad.numpy: bit operations (bitwise_and/or/xor/not, bitwise_count, shifts) on integers and bools."""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._dtypes import describe
from funcgrad import lax
from funcgrad.numpy._base import arr, promote
from funcgrad.lax import _math as _M
from funcgrad.numpy._math import _bitcast, _dtype, _is_value
from funcgrad.typing import ArrayLike

__all__ = [
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_invert", "invert", "bitwise_count",
    "bitwise_left_shift", "bitwise_right_shift", "left_shift", "right_shift",
]


# ------------------------------------------------------------------ bit operations

_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _int_args(name: str, *xs: Any) -> list:
    xs = promote(*xs)
    for x in xs:
        if _dtype(x).kind not in "iub":
            raise TypeError(f"{name}: operands must be integers or bools, got "
                            f"{', '.join(describe(v) for v in xs)}; bit operations are not defined for floats")
    return [arr(x) if not _is_value(x) else x for x in xs]


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

    >>> fnp.bitwise_and(fnp.array([12, -1]), 10)
    Array([ 8, 10], dtype=int32)
    """
bitwise_or.__doc__ = """Elementwise ``x1 | x2`` for integers and bools.

    >>> fnp.bitwise_or(fnp.array([12, 1]), 2)
    Array([14,  3], dtype=int32)
    """
bitwise_xor.__doc__ = """Elementwise ``x1 ^ x2`` for integers and bools.

    >>> fnp.bitwise_xor(fnp.array([12, -1]), 10)
    Array([  6, -11], dtype=int32)
    """


def bitwise_not(x: ArrayLike, /) -> Any:
    """Elementwise ``~x``: two's complement for integers, logical not for bools.

    >>> fnp.bitwise_not(fnp.array([0, 5]))
    Array([-1, -6], dtype=int32)
    """
    (x,) = _int_args("bitwise_not", x)
    return lax.bitwise_not(x)


invert = bitwise_invert = bitwise_not


def bitwise_count(x: ArrayLike, /) -> Any:
    """The number of 1 bits in ``|x|`` (uint8), as ``numpy.bitwise_count``.

    >>> fnp.bitwise_count(fnp.array([3, -1, 255]))
    Array([2, 1, 8], dtype=uint8)
    """
    (x,) = _int_args("bitwise_count", x)
    if x.dtype.kind == "i":
        x = lax.abs(x)     # abs(INT_MIN) wraps to INT_MIN, whose bits count 1 (numpy's answer)
    return _M.population_count_p.bind(x)


def _shift_args(name: str, x: Any, y: Any) -> tuple[Any, Any, np.dtype]:
    """The shift operands, integers of their common dtype (bools refused), and that dtype."""
    x, y = _int_args(name, x, y)
    dtype = _dtypes.result_type(x, y)
    if dtype.kind == "b":
        raise TypeError(f"{name}: not supported for bool operands; convert them to integers first")
    x, y = (lax.convert_element_type(v, dtype) for v in (x, y))
    return x, y, dtype


def left_shift(x: ArrayLike, y: ArrayLike, /) -> Any:
    """Elementwise ``x << y`` for integers (shifts of the bit width or more give 0).

    >>> fnp.left_shift(fnp.array([1, 3]), 2)
    Array([ 4, 12], dtype=int32)
    """
    x, y, dtype = _shift_args("left_shift", x, y)
    if dtype.kind == "u":
        return lax.shift_left(x, y)
    u = _UNSIGNED[dtype.itemsize]
    return _bitcast(lax.shift_left(_bitcast(x, u), _bitcast(y, u)), dtype)


def right_shift(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    """Elementwise ``x >> y``: arithmetic (sign-filling) for signed integers, logical for unsigned;
    shifts of the bit width or more give 0 (or -1 for negative signed values).

    >>> fnp.right_shift(fnp.array([16, -16]), 2)
    Array([ 4, -4], dtype=int32)
    """
    x, y, dtype = _shift_args("right_shift", x1, x2)
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
