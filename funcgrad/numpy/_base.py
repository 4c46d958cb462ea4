"""Argument handling shared by the funcgrad.numpy functions."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array, Tracer, as_array
from funcgrad._dtypes import describe
from funcgrad.primitives.elementwise import convert

_SCALARS = (bool, int, float)


def arr(x: Any) -> Any:
    """An Array or tracer for ``x`` (numpy arrays and lists are copied in)."""
    return x if isinstance(x, (Array, Tracer)) else as_array(x)


def operand(x: Any) -> Any:
    """Like :func:`arr` but Python scalars stay weakly typed."""
    return x if isinstance(x, (Array, Tracer, bool, int, float)) else as_array(x)


def promote(*xs: Any) -> list:
    """Convert array operands to their common dtype (Python scalars stay weak)."""
    if len(xs) == 2:  # the common cases, kept cheap: one dtype, or an array and a weak scalar
        x, y = xs
        if type(x) is Array and type(y) is Array:
            if x._value.dtype is y._value.dtype:
                return list(xs)
        elif isinstance(x, (Array, Tracer)):
            if isinstance(y, (Array, Tracer)):
                if x.dtype == y.dtype:
                    return list(xs)
            elif type(y) is float and x.dtype.kind == "f":
                return list(xs)
        elif type(x) is float and isinstance(y, (Array, Tracer)) and y.dtype.kind == "f":
            return list(xs)
    xs = [operand(x) for x in xs]
    dtypes = {x.dtype for x in xs if not isinstance(x, _SCALARS)}
    if len(dtypes) <= 1:
        return xs
    dtype = _dtypes.result_type(*xs)
    return [x if isinstance(x, _SCALARS) else convert(x, dtype) for x in xs]


def promote_inexact(*xs: Any) -> list:
    """:func:`promote`, then integers and bools to the default float."""
    if len(xs) == 1 and isinstance(xs[0], (Array, Tracer)) and xs[0].dtype.kind == "f":
        return list(xs)
    xs = promote(*xs)
    out = []
    for x in xs:
        if isinstance(x, _SCALARS):
            out.append(float(x))
        elif x.dtype.kind != "f":
            out.append(convert(x, _dtypes.float_))
        else:
            out.append(x)
    return out


def normalize_axis(name: str, axis: int, ndim: int, x: Any = None) -> int:
    axis = int(axis)
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        what = describe(x) if x is not None else f"rank-{ndim} array"
        raise ValueError(f"{name}: axis {axis} is out of range for an array {what} (rank {ndim})")
    return axis % ndim if ndim else 0


def normalize_axes(name: str, axis: Any, ndim: int, x: Any = None) -> tuple[int, ...]:
    """``None`` -> all axes; int or tuple -> sorted non-negative tuple."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    axes = tuple(sorted(normalize_axis(name, a, ndim, x) for a in axis))
    if len(set(axes)) != len(axes):
        raise ValueError(f"{name}: repeated axis in {axis}")
    return axes


def shape_tuple(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def as_list(xs: Sequence[Any]) -> list:
    return [arr(x) for x in xs]
