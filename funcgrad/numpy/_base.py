"""Argument handling shared by the funcgrad.numpy functions."""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._array import host_numpy
from funcgrad._core import Array, ConcretizationError, Tracer, as_array
from funcgrad._dtypes import describe
from funcgrad.lax import convert_element_type as convert
from funcgrad.typing import ArrayLike, ShapeLike

_SCALARS = (bool, int, float)


def arr(x: ArrayLike) -> Any:
    """An Array or tracer for ``x`` (numpy arrays and lists are copied in)."""
    return x if isinstance(x, (Array, Tracer)) else as_array(x)


def operand(x: ArrayLike) -> Any:
    """Like :func:`arr` but Python scalars stay weakly typed."""
    return x if isinstance(x, (Array, Tracer, bool, int, float)) else as_array(x)


# Array kinds a weak Python scalar joins without changing the array's dtype.
_WEAK_KINDS = {float: "f", int: "iuf"}


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
            elif x.dtype.kind in _WEAK_KINDS.get(type(y), ""):
                return list(xs)
        elif isinstance(y, (Array, Tracer)) and y.dtype.kind in _WEAK_KINDS.get(type(x), ""):
            return list(xs)
    if any(type(x) is complex for x in xs):
        xs = _weak_complex(xs)
    xs = [operand(x) for x in xs]
    dtypes = {x.dtype for x in xs if not isinstance(x, _SCALARS)}
    if len(dtypes) <= 1 and not _scalar_above(xs, dtypes):
        return _bfloat16_floats(xs) if _dtypes.bfloat16 in dtypes else xs
    dtype = _dtypes.result_type(*xs)
    xs = [x if isinstance(x, _SCALARS) else convert(x, dtype) for x in xs]
    return _bfloat16_floats(xs) if dtype == _dtypes.bfloat16 else xs


def promote_arrays(*xs: Any) -> list:
    """:func:`promote`, with Python scalars then made arrays of the promoted dtype (they are weakly typed:
    ``promote_arrays(bf16_array, 0.5)`` gives two bfloat16 arrays)."""
    xs = promote(*xs)
    arrays = [x for x in xs if not isinstance(x, _SCALARS)]
    if len(arrays) == len(xs):
        return xs
    if not arrays:
        return promote(*[as_array(x) for x in xs])
    dtype = arrays[0].dtype
    return [convert(as_array(x), dtype) if isinstance(x, _SCALARS) else x for x in xs]


def _bfloat16_floats(xs: list) -> list:
    """Python floats beside bfloat16 arrays as bfloat16 scalars: weakly typed, they take the arrays' dtype
    (numpy's ``bf16_array - 2.0`` would compute in float32; ints and bools already keep bfloat16)."""
    return [as_array(np.asarray(x, dtype=_dtypes.bfloat16)) if type(x) is float else x for x in xs]


def _weak_complex(xs: tuple) -> list:
    """Python complex scalars as arrays of the complex dtype the other operands call for (weakly typed, as
    JAX: ``f32_array * 1j`` is complex64 with or without x64)."""
    arrays = [operand(x).dtype for x in xs if not isinstance(x, (bool, int, float, complex))]
    out = []
    for x in xs:
        if type(x) is complex:
            dtype = _dtypes.canonicalize(np.result_type(*arrays, x)) if arrays else _dtypes.complex_
            x = as_array(np.asarray(x, dtype=dtype))
        out.append(x)
    return out


_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def _scalar_rank(x: Any) -> int:
    return 2 if isinstance(x, float) else 0 if isinstance(x, bool) else 1


def _scalar_above(xs: list, dtypes: set) -> bool:
    """A weak scalar of a higher kind than the arrays (``i32 * 2.5``, ``bool + 3``).

    The arrays are then converted to the result dtype here, so every primitive
    sees array operands of its computation dtype (the fused kernels type a
    literal by the array beside it: ``i32 * 2.5`` must not compute ``i32 * 2``).
    """
    if not dtypes:
        return False
    rank = _KIND_RANK.get(_dtypes.kind(next(iter(dtypes))), 2)
    return any(_scalar_rank(x) > rank for x in xs if isinstance(x, _SCALARS))


def promote_inexact(*xs: Any) -> list:
    """:func:`promote`, then integers and bools to the default float."""
    if len(xs) == 1 and isinstance(xs[0], (Array, Tracer)) and ((d := xs[0].dtype).kind in "fc"
                                                                  or d is _dtypes.bfloat16):
        return list(xs)
    xs = promote(*xs)
    out = []
    scalars, dtype = False, None
    for x in xs:
        if isinstance(x, _SCALARS):
            out.append(float(x))
            scalars = True
        elif _dtypes.kind(dtype := x.dtype) not in "fc":
            out.append(convert(x, _dtypes.float_))
        else:
            out.append(x)
    if scalars and dtype is _dtypes.bfloat16:   # (promote gave the arrays one dtype)
        return _bfloat16_floats(out)   # an int scalar beside bfloat16 became a Python float here
    return out


def _shown(value: Any) -> str:
    """``value`` for an error message: ``f32[]`` for arrays, else its type and repr."""
    if isinstance(value, (Array, Tracer)):
        return describe(value)
    return f"{type(value).__name__} {value!r:.60}"


def _as_int(value: Any) -> int | None:
    """``value`` as an int, or None where it is no integer (a float, bool, string, or
    an array that is not 0-d integer).  A traced integer raises its own error: its
    value is unknown under jit, and that error says to make the argument static."""
    if type(value) is int:   # the common case, kept cheap
        return value
    if isinstance(value, (bool, np.bool_, float, np.floating)):
        return None
    if isinstance(value, (Array, Tracer)):
        return operator.index(value) if value.shape == () and value.dtype.kind in "iu" else None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _not_int(value: Any) -> str:
    """Why ``value`` is not an int, for an error message."""
    hint = " (sizes and axes are never rounded: convert with int() if that is meant)" \
        if isinstance(value, (float, np.floating)) else ""
    return f"{_shown(value)}{hint}"


def index_arg(name: str, what: str, value: Any) -> int:
    """``value`` as a Python int: an int, a numpy integer or a concrete 0-d integer
    array (through ``__index__``, as numpy and JAX take them).

    Floats are refused, never truncated (``2.5`` is a mistake, not a size), and so
    are bools and strings, as in numpy.  ``name`` and ``what`` head the error.

    >>> index_arg("zeros", "shape", np.int64(3))
    3
    """
    n = _as_int(value)
    if n is None:
        raise TypeError(f"{name}: {what} must be an int, got {_not_int(value)}")
    return n


def _entries(value: Any) -> tuple:
    """The items of an int-or-sequence argument (``axis``, ``shape``, ``reps``) as a tuple."""
    if isinstance(value, (tuple, list)):
        return tuple(value)
    if isinstance(value, (np.ndarray, Array)) and value.ndim == 1:
        return tuple(np.asarray(value))
    return (value,)


def normalize_axis(name: str, axis: int | Sequence[int], ndim: int, x: ArrayLike | None = None,
                   of: str | None = None) -> int:
    """``axis`` (an int in ``[-ndim, ndim)``) as a non-negative int; ``of`` says what the
    axis is of when that is not ``x`` itself (expand_dims and stack name their result)."""
    axis = index_arg(name, "axis", axis)
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        what = of or (f"an array {describe(x)} (rank {ndim})" if x is not None else f"a rank-{ndim} array")
        raise ValueError(f"{name}: axis {axis} is out of range for {what}: expected an axis in "
                         f"[{-ndim}, {max(ndim, 1)})")
    return axis % ndim if ndim else 0


def normalize_axes(name: str, axis: int | Sequence[int], ndim: int, x: ArrayLike | None = None, *,
                   keep_order: bool = False, of: str | None = None) -> tuple[int, ...]:
    """``None`` -> all axes; an int or a tuple/list of ints -> a sorted tuple of
    non-negative axes (in the given order with ``keep_order``: transpose, moveaxis).
    Each axis may appear once.

    >>> normalize_axes("sum", (-1, 0), 3)
    (0, 2)
    """
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(normalize_axis(name, a, ndim, x, of) for a in _entries(axis))
    if len(set(axes)) != len(axes):
        what = f" of an array {describe(x)}" if x is not None else ""
        raise ValueError(f"{name}: axis {axis!r} names an axis{what} more than once; give each axis once")
    return axes if keep_order else tuple(sorted(axes))


def shape_tuple(shape: ShapeLike, name: str = "shape", what: str = "shape", unknown: bool = False) -> tuple[int, ...]:
    """``shape`` (an int, or a tuple/list of ints) as a tuple of Python ints, each >= 0.

    With ``unknown`` (reshape), entries may be -1 (the caller allows one).  ``2.5``, ``True`` and
    ``"3"`` are refused, never truncated; numpy integers and concrete 0-d
    integer arrays are accepted.

    >>> shape_tuple([2, np.int64(3)], "zeros")
    (2, 3)
    """
    if type(shape) is tuple and all(type(d) is int and d >= 0 for d in shape):   # the common cases, kept cheap
        return shape
    if type(shape) is int and shape >= 0:
        return (shape,)
    entries = (shape,) if isinstance(shape, (str, bytes)) else _entries(shape)   # "3" is no shape
    dims = tuple(_as_int(d) for d in entries)
    if None in dims:
        bad = "" if entries[0] is shape else f": entry {dims.index(None)} is {_not_int(entries[dims.index(None)])}"
        raise TypeError(f"{name}: {what} must be an int or a tuple of ints, got {_not_int(shape)}{bad}")
    if any(d < (-1 if unknown else 0) for d in dims):
        allowed = "sizes must be >= 0 (or -1 for the one inferred size)" if unknown else "sizes must be >= 0"
        raise ValueError(f"{name}: {what} {dims} has a negative dimension; {allowed}")
    return dims


def as_list(xs: Sequence[Any]) -> list:
    return [arr(x) for x in xs]


def keepdims_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` with the reduced ``axes`` kept as length 1 (``keepdims=True``)."""
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def concrete_value(x: ArrayLike, message: str, *, error: type = ConcretizationError, any_tracer: bool = False) \
        -> np.ndarray:
    """The numpy value of ``x``, or ``error(message)`` when it is traced and its value unknown (under jit or
    vmap).  ``message`` names the operation, why a value is needed and the fix; ``{x}`` in it is replaced by
    ``describe(x)``.  ``any_tracer=True``: every traced value raises (also one whose value is known, as under
    grad)."""
    if isinstance(x, Tracer):
        if any_tracer:
            raise error(message.replace("{x}", describe(x)))
        try:
            return np.asarray(x.concrete_value())
        except ConcretizationError:
            raise error(message.replace("{x}", describe(x))) from None
    return host_numpy(x)
