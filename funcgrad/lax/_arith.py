"""Elementwise extras of ``funcgrad.lax``: ``integer_pow``, ``square``, ``reciprocal``, ``rsqrt``,
``clamp`` (no gradient at the bounds, as JAX), ``select_n`` and the integer bit operations ``bitwise_not``,
``bitwise_xor``, ``shift_right_arithmetic``. Written with the operations of ``_ops``; the other parts of the
API gathered in ``_more`` are in ``_slicing``, ``_reductions`` and ``_dot_conv``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._dtypes import describe
from funcgrad.lax._ops import Array, _ndim, lax
from funcgrad.lax._slicing import dtype
from funcgrad.primitives.shape import shape_of


# ------------------------------------------------------------------ elementwise


def integer_pow(x: Array, y: int) -> Array:
    """``x ** y`` for a static integer ``y``.

    >>> lax.integer_pow(fnp.array([2.0, 3.0]), 3)
    Array([ 8., 27.], dtype=float32)
    """
    if not isinstance(y, (int, np.integer)):
        raise TypeError(f"integer_pow: the exponent must be a Python int, got {y!r}; use lax.pow for array exponents")
    return lax.pow(x, int(y))


def square(x: Array) -> Array:
    """``x * x``.

    >>> lax.square(fnp.array([0.5, 2.0]))
    Array([0.25, 4.  ], dtype=float32)
    """
    return lax.mul(x, x)


def reciprocal(x: Array) -> Array:
    """``1 / x``.

    >>> lax.reciprocal(fnp.array([0.5, 2.0]))
    Array([2. , 0.5], dtype=float32)
    """
    return lax.div(1.0 if _dtypes.kind(np.dtype(dtype(x))) in "fc" else 1, x)


def rsqrt(x: Array) -> Array:
    """``1 / sqrt(x)``.

    >>> lax.rsqrt(fnp.array([0.5, 2.0]))
    Array([1.4142 , 0.7071], dtype=float32)
    """
    return lax.div(1.0, lax.sqrt(x))


def clamp(min: Any, x: Array, max: Any) -> Array:  # noqa: A002
    """``x`` clipped to ``[min, max]``. As in JAX, neither ``x`` nor the bounds get a gradient where
    ``x`` equals a bound.

    >>> lax.clamp(0.0, fnp.array([-1.0, 0.5, 2.0]), 1.0)
    Array([0. , 0.5, 1. ], dtype=float32)
    """
    if dtype(x) == _dtypes.bfloat16:   # Python bounds are weakly typed: bfloat16 here (numpy would say float32)
        min, max = (lax.convert(np.asarray(b, _dtypes.bfloat16), _dtypes.bfloat16)
                    if isinstance(b, (int, float)) else b for b in (min, max))
    below, above = lax.lt(x, min), lax.gt(x, max)
    inside = lax.logical_and(lax.gt(x, min), lax.lt(x, max))
    on_bound = lax.stop_gradient(lax.select(below, min, lax.select(above, max, x)))
    clipped = lax.select(below, lax.broadcast_to(min, shape_of(x)) if _ndim(min) < _ndim(x) else min,
                         lax.select(above, max, on_bound))
    return lax.select(inside, x, clipped)


def select_n(which: Array, *cases: Array) -> Array:
    """``cases[which]`` elementwise: ``which`` is bool (two cases) or an integer in ``[0, len(cases))``.

    >>> lax.select_n(fnp.array([True, False]), fnp.array([1.0, 2.0]), fnp.array([10.0, 20.0]))
    Array([10.,  2.], dtype=float32)
    """
    if not cases:
        raise ValueError("select_n: needs at least one case")
    if len(cases) == 1:
        return cases[0]
    kind = np.dtype(dtype(which)).kind
    if kind == "b":
        if len(cases) != 2:
            raise ValueError(f"select_n: a bool selector picks between 2 cases, got {len(cases)}")
        return lax.select(which, cases[1], cases[0])
    if kind not in "iu":
        raise TypeError(f"select_n: the selector must be bool or integer, got {describe(which)}")
    out = cases[-1]
    for i in range(len(cases) - 2, -1, -1):
        out = lax.select(lax.eq(which, i), cases[i], out)
    return out


def _int_operands(op: str, *xs: Array) -> None:
    for x in xs:
        if np.dtype(dtype(x)).kind not in "iub":
            raise TypeError(f"{op}: operands must be integers or bools, got {describe(x)}")


def bitwise_not(x: Array) -> Array:
    """``~x`` for integers (two's complement) and bools.

    >>> lax.bitwise_not(fnp.array([0, 5]))
    Array([-1, -6], dtype=int32)
    """
    _int_operands("bitwise_not", x)
    kind = np.dtype(dtype(x)).kind
    if kind == "b":
        return lax.logical_not(x)
    if kind == "u":
        return lax.sub(np.iinfo(dtype(x)).max, x)
    return lax.sub(lax.neg(x), 1)


def bitwise_xor(x: Array, y: Array) -> Array:
    """``x ^ y`` for integers and bools: ``(x | y) - (x & y)``, which never overflows.

    >>> lax.bitwise_xor(fnp.array([12, 5]), fnp.array([10, 3]))
    Array([6, 6], dtype=int32)
    """
    _int_operands("bitwise_xor", x, y)
    if np.dtype(dtype(x)).kind == "b":
        return lax.logical_xor(x, y)
    return lax.sub(lax.bitwise_or(x, y), lax.bitwise_and(x, y))


def shift_right_arithmetic(x: Array, y: Array) -> Array:
    """``x >> y`` keeping the sign (floor division by ``2 ** y``) for signed integers.

    >>> lax.shift_right_arithmetic(fnp.array([-8, 7]), fnp.array([2, 1]))
    Array([-2,  3], dtype=int32)
    """
    _int_operands("shift_right_arithmetic", x, y)
    if np.dtype(dtype(x)).kind == "u":
        return lax.shift_right_logical(x, y)
    return lax.floor_divide(x, lax.shift_left(lax.full(shape_of(x), 1, dtype(x)), y))
