"""More of ``jax.lax``'s user API, written over the primitives: slicing and padding, iotas, clamping,
cumulative reductions, sorting and ``top_k``, ``reduce``/``reduce_window``, ``conv_general_dilated``, and
integer bit operations.

Derivatives come from the primitives these are written with; where JAX
fixes a derivative at a tie it is matched (``clamp`` passes no gradient to
anything at the bounds).

>>> import funcgrad.lax as lax, funcgrad.numpy as fnp
>>> lax.slice(fnp.arange(10.0), (2,), (8,), (3,))
Array([2., 5.], dtype=float32)
>>> lax.pad(fnp.ones(2), 0.0, [(1, 0, 1)])
Array([0., 1., 0., 1.], dtype=float32)
>>> lax.top_k(fnp.array([3.0, 1.0, 4.0, 1.5]), 2)
(Array([4., 3.], dtype=float32), Array([2, 0], dtype=int32))
"""
from __future__ import annotations

import builtins
import math
from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array as _ConcreteArray, _freeze
from funcgrad._dtypes import ShapedArray, describe
from funcgrad.lax._associative_scan import associative_scan
from funcgrad.primitives import conv as _C, elementwise as _E, indexing as _I, random_bits as _B, reduce as _R
from funcgrad.primitives import shape as _S
from funcgrad.primitives.linalg import einsum
from funcgrad.primitives.shape import shape_of
from funcgrad.primitives.subprograms import trace_sub


class _Ops:
    """The handful of primitive-level operations this module is written with (``funcgrad.lax`` itself
    imports this module, so they are bound here directly)."""

    add, sub, mul, div, neg, exp, log, sqrt = _E.add, _E.sub, _E.mul, _E.div, _E.neg, _E.exp, _E.log, _E.sqrt
    select, eq, gt, lt, convert = _E.select, _E.eq, _E.gt, _E.lt, _E.convert
    getitem, reshape, moveaxis, transpose, broadcast_to = _I.getitem, _S.reshape, _S.moveaxis, _S.transpose, \
        _S.broadcast_to
    argsort, bitwise_and, bitwise_or = _B.argsort, _B.bitwise_and, _B.bitwise_or
    shift_left, shift_right_logical, conv2d = _B.shift_left, _B.shift_right_logical, _C.conv2d

    @staticmethod
    def binary(p: Any) -> Callable:
        return lambda x, y: p.bind(x, y)

    @staticmethod
    def reduce(p: Any) -> Callable:
        return lambda x, axes: p.bind(x, axes=tuple(int(a) for a in axes))

    @staticmethod
    def full(shape: Sequence[int], value: Any, dtype: Any) -> Any:
        return _ConcreteArray(_freeze(np.full(tuple(shape), value, _dtypes.canonicalize(dtype, requested=True))))


lax = _Ops
lax.max, lax.min, lax.rem = _Ops.binary(_E.maximum_p), _Ops.binary(_E.minimum_p), _Ops.binary(_E.mod_p)
lax.floor_divide, lax.logical_and = _Ops.binary(_E.floor_divide_p), _Ops.binary(_E.and_p)
lax.logical_xor = _Ops.binary(_E.xor_p)
lax.logical_not, lax.isnan = (lambda x: _E.logical_not_p.bind(x)), (lambda x: _E.isnan_p.bind(x))
lax.stop_gradient = lambda x: _E.stop_gradient_p.bind(x)
lax.reduce_sum, lax.reduce_prod = _Ops.reduce(_S.reduce_sum_p), _Ops.reduce(_R.reduce_prod_p)
lax.reduce_max, lax.reduce_min = _Ops.reduce(_R.reduce_max_p), _Ops.reduce(_R.reduce_min_p)
lax.pow = lambda x, y: _E.pow_p.bind(x, y)


__all__ = ["bitwise_not", "bitwise_xor", "broadcast", "broadcast_shapes", "broadcast_to_rank", "broadcasted_iota",
           "clamp", "collapse", "conv", "conv_general_dilated", "cummax", "cumlogsumexp", "cummin", "cumprod", "dot",
           "dtype", "index_in_dim", "integer_pow", "iota", "pad", "reciprocal", "reduce", "reduce_and", "reduce_or",
           "reduce_window", "reduce_xor", "rsqrt", "select_n", "shift_right_arithmetic", "slice", "slice_in_dim",
           "sort", "sort_key_val", "split", "square", "top_k"]

Array = Any
_py_slice = builtins.slice   # this module defines lax.slice


def _ndim(x: Any) -> int:
    return len(shape_of(x))


def _axis(op: str, axis: int, ndim: int, x: Any) -> int:
    if not -ndim <= int(axis) < ndim:
        raise ValueError(f"{op}: axis {axis} is out of range for an operand {describe(x)}")
    return int(axis) % ndim


# ------------------------------------------------------------------ slicing and padding


def slice(operand: Array, start_indices: Sequence[int], limit_indices: Sequence[int],  # noqa: A001
          strides: Sequence[int] | None = None) -> Array:
    """``operand[start:limit:stride]`` on every axis (static bounds), as ``jax.lax.slice``.

    >>> lax.slice(fnp.arange(10), (1,), (8,), (3,))
    Array([1, 4, 7], dtype=int32)
    """
    shape = shape_of(operand)
    strides = (1,) * len(shape) if strides is None else tuple(strides)
    if not len(start_indices) == len(limit_indices) == len(strides) == len(shape):
        raise ValueError(f"slice: start_indices {tuple(start_indices)}, limit_indices {tuple(limit_indices)} and "
                         f"strides {strides} must each have one entry per axis of {describe(operand)}")
    for s, lo, hi, st in zip(shape, start_indices, limit_indices, strides):
        if not (0 <= lo <= hi <= s) or st < 1:
            raise ValueError(f"slice: bounds ({lo}, {hi}, stride {st}) do not fit an axis of size {s} in "
                             f"{describe(operand)}; expected 0 <= start <= limit <= size and stride >= 1")
    return lax.getitem(operand, tuple(_py_slice(int(a), int(b), int(c))
                                      for a, b, c in zip(start_indices, limit_indices, strides)))


def slice_in_dim(operand: Array, start_index: int | None, limit_index: int | None, stride: int = 1,
                 axis: int = 0) -> Array:
    """``operand[..., start:limit:stride, ...]`` on one axis; negative and None bounds as Python's.

    >>> lax.slice_in_dim(fnp.arange(12).reshape(3, 4), 1, 3, axis=1)
    Array([[ 1,  2],
           [ 5,  6],
           [ 9, 10]], dtype=int32)
    """
    shape = shape_of(operand)
    axis = _axis("slice_in_dim", axis, len(shape), operand)
    start, stop, step = _py_slice(start_index, limit_index, stride).indices(shape[axis])
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, max(stop, start), step
    return slice(operand, starts, limits, strides)


def index_in_dim(operand: Array, index: int, axis: int = 0, keepdims: bool = True) -> Array:
    """Element ``index`` (negative counts from the end) of one axis, keeping that axis unless ``keepdims=False``.

    >>> lax.index_in_dim(fnp.arange(6).reshape(2, 3), 1, axis=1, keepdims=False)
    Array([1, 4], dtype=int32)
    """
    shape = shape_of(operand)
    axis = _axis("index_in_dim", axis, len(shape), operand)
    if not -shape[axis] <= index < shape[axis]:
        raise IndexError(f"index_in_dim: index {index} is out of range for axis {axis} of {describe(operand)}")
    index %= shape[axis]
    out = slice_in_dim(operand, index, index + 1, 1, axis)
    return out if keepdims else lax.reshape(out, shape[:axis] + shape[axis + 1:])


def split(operand: Array, sizes: Sequence[int], axis: int = 0) -> list:
    """Consecutive pieces of ``sizes`` along ``axis`` (the sizes must add up to the axis).

    >>> lax.split(fnp.arange(5), (2, 3))
    [Array([0, 1], dtype=int32), Array([2, 3, 4], dtype=int32)]
    """
    shape = shape_of(operand)
    axis = _axis("split", axis, len(shape), operand)
    if sum(sizes) != shape[axis] or any(s < 0 for s in sizes):
        raise ValueError(f"split: sizes {tuple(sizes)} must be non-negative and add up to axis {axis} of "
                         f"{describe(operand)} ({shape[axis]})")
    bounds = np.cumsum((0,) + tuple(sizes))
    return [slice_in_dim(operand, int(a), int(b), 1, axis) for a, b in zip(bounds[:-1], bounds[1:])]


def pad(operand: Array, padding_value: Any, padding_config: Sequence[tuple[int, int, int]]) -> Array:
    """Pad each axis with ``(low, high, interior)`` copies of ``padding_value``, as ``jax.lax.pad``:
    ``interior`` values go between neighbouring elements; a negative ``low``/``high`` crops instead.

    >>> lax.pad(fnp.array([1.0, 2.0]), 0.0, [(1, 2, 1)])
    Array([0., 1., 0., 2., 0., 0.], dtype=float32)
    """
    shape = shape_of(operand)
    config = [tuple(int(v) for v in c) for c in padding_config]
    if len(config) != len(shape) or any(len(c) != 3 or c[2] < 0 for c in config):
        raise ValueError(f"pad: padding_config {padding_config} must give one (low, high, interior) triple per axis "
                         f"of {describe(operand)}, with interior >= 0")
    concrete = isinstance(padding_value, (int, float, bool, np.generic)) or (
        isinstance(padding_value, _ConcreteArray) and np.ndim(padding_value) == 0)
    if not concrete:   # a traced fill: pad with zeros, add the fill where the padding went
        mask = pad(lax.full(shape, 0, operand.dtype), 1, config)
        return lax.add(pad(operand, 0, config), lax.mul(mask, lax.convert(padding_value, operand.dtype)))
    value = padding_value.item() if hasattr(padding_value, "item") else padding_value
    x = operand
    for axis, (lo, hi, interior) in enumerate(config):
        if interior:
            x = _interleave(x, axis, interior, value)
    widths = tuple((max(lo, 0), max(hi, 0)) for lo, hi, _ in config)
    if any(w != (0, 0) for w in widths):
        x = _I.pad_p.bind(x, widths=widths, value=value)
    if any(lo < 0 or hi < 0 for lo, hi, _ in config):
        now = shape_of(x)
        x = slice(x, [max(-lo, 0) for lo, _, _ in config],
                  [n - max(-hi, 0) for n, (_, hi, _) in zip(now, config)])
    return x


def _interleave(x: Array, axis: int, interior: int, value: Any) -> Array:
    """``interior`` copies of ``value`` between neighbours along ``axis``."""
    shape = shape_of(x)
    n = shape[axis]
    if n <= 1:
        return x
    last = len(shape) - 1
    moved = lax.moveaxis(x, axis, last)
    widths = ((0, 0),) * last + ((0, 0), (0, interior))
    grown = _I.pad_p.bind(lax.reshape(moved, shape_of(moved) + (1,)), widths=widths, value=value)
    flat = lax.reshape(grown, shape_of(moved)[:-1] + (n * (1 + interior),))
    trimmed = slice_in_dim(flat, 0, n * (1 + interior) - interior, 1, last)
    return lax.moveaxis(trimmed, last, axis)


# ------------------------------------------------------------------ iota and shapes


def iota(dtype: Any, size: int) -> Array:
    """``[0, 1, ..., size - 1]`` in ``dtype``.

    >>> lax.iota(fnp.int32, 4)
    Array([0, 1, 2, 3], dtype=int32)
    """
    return _ConcreteArray(np.arange(int(size), dtype=_dtypes.canonicalize(dtype, requested=True)))


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int) -> Array:
    """An array of ``shape`` whose entries count along ``dimension``.

    >>> lax.broadcasted_iota(fnp.int32, (2, 3), 1)
    Array([[0, 1, 2],
           [0, 1, 2]], dtype=int32)
    """
    shape = tuple(int(s) for s in shape)
    dimension = int(dimension) % len(shape)
    line = iota(dtype, shape[dimension])
    return lax.broadcast_to(lax.reshape(line, tuple(n if a == dimension else 1 for a, n in enumerate(shape))),
                            shape)


def broadcast(operand: Array, sizes: Sequence[int]) -> Array:
    """``operand`` with new leading axes of ``sizes``.

    >>> lax.broadcast(fnp.array([1, 2]), (3,)).shape
    (3, 2)
    """
    shape = shape_of(operand)
    return lax.broadcast_to(operand, tuple(int(s) for s in sizes) + tuple(shape))


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape numpy broadcasting gives ``shapes``.

    >>> lax.broadcast_shapes((2, 1), (3,))
    (2, 3)
    """
    try:
        return tuple(np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        raise ValueError(f"broadcast_shapes: shapes {', '.join(str(tuple(s)) for s in shapes)} are incompatible "
                         "(each axis, aligned from the right, must be equal or 1)") from None


def broadcast_to_rank(x: Array, rank: int) -> Array:
    """``x`` with leading unit axes added up to ``rank``.

    >>> lax.broadcast_to_rank(fnp.ones(3), 3).shape
    (1, 1, 3)
    """
    shape = shape_of(x)
    return lax.reshape(x, (1,) * max(int(rank) - len(shape), 0) + tuple(shape))


def collapse(operand: Array, start_dimension: int, stop_dimension: int | None = None) -> Array:
    """Axes ``start_dimension`` up to ``stop_dimension`` merged into one.

    >>> lax.collapse(fnp.ones((2, 3, 4)), 0, 2).shape
    (6, 4)
    """
    shape = shape_of(operand)
    start, stop, _ = _py_slice(start_dimension, stop_dimension).indices(len(shape))
    return lax.reshape(operand, shape[:start] + (math.prod(shape[start:stop]),) + shape[stop:])


def dtype(x: Any) -> np.dtype:
    """The dtype ``x`` has (or would have as a funcgrad array).

    >>> lax.dtype(1.0), lax.dtype(fnp.ones(2, fnp.int32))
    (dtype('float32'), dtype('int32'))
    """
    if hasattr(x, "dtype"):
        return np.dtype(x.dtype)
    return _dtypes.result_type(x) if isinstance(x, (bool, int, float)) else _dtypes.canonicalize(np.asarray(x).dtype)


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
    return lax.div(1.0 if np.dtype(dtype(x)).kind in "fc" else 1, x)


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


# ------------------------------------------------------------------ reductions and scans

def _monoid(computation: Callable, x: Any) -> tuple[Any, Callable] | None:
    """(the reduction primitive, the binary function) when ``computation`` is addition, multiplication,
    max or min -- found as JAX does, by tracing it on two scalars of ``x``'s dtype and reading the one
    equation it makes (so ``lax.add``, ``fnp.maximum``, ``operator.mul`` and ``lambda a, b: a + b`` all count)."""
    scalar = ShapedArray((), dtype(x))
    try:
        sub, consts = trace_sub(lambda a, b: [computation(a, b)], [scalar, scalar])
    except Exception:   # not traceable as a binary function: reported below as unsupported
        return None
    eqns = sub.jaxpr.eqns
    if consts or len(eqns) != 1 or [id(v) for v in eqns[0].inputs] != [id(v) for v in sub.jaxpr.invars]:
        return None
    return _MONOIDS.get(eqns[0].prim)


_MONOIDS = {_E.add_p: (_S.reduce_sum_p, _E.add), _E.mul_p: (_R.reduce_prod_p, _E.mul),
            _E.maximum_p: (_R.reduce_max_p, lax.max), _E.minimum_p: (_R.reduce_min_p, lax.min)}


def reduce(operands: Any, init_values: Any, computation: Callable, dimensions: Sequence[int]) -> Any:
    """Reduce over ``dimensions`` with ``computation``, as ``jax.lax.reduce``, for the monoids
    ``lax.add``/``mul``/``max``/``min`` (the init value is combined in once).

    >>> lax.reduce(fnp.array([[1.0, 2.0], [3.0, 4.0]]), 0.0, lax.add, (0,))
    Array([4., 6.], dtype=float32)
    """
    single = not isinstance(operands, (tuple, list))
    monoid = _monoid(computation, operands) if single else None
    if monoid is None:
        raise NotImplementedError("reduce: funcgrad reduces one operand with addition, multiplication, max or min "
                                  "(lax.add, lax.mul, lax.max, lax.min); write other reductions with lax.scan or "
                                  "the numpy reductions")
    reduction, combine = monoid
    return combine(reduction.bind(operands, axes=tuple(int(d) for d in dimensions)), init_values)


def _reduce_bool(op: str, combine: Callable, operand: Array, axes: Sequence[int]) -> Array:
    _int_operands(op, operand)
    if np.dtype(dtype(operand)).kind != "b":
        raise TypeError(f"{op}: funcgrad reduces bool operands only, got {describe(operand)}")
    as_int = lax.convert(operand, np.int32)
    return combine(as_int, tuple(int(a) for a in axes))


def reduce_and(operand: Array, axes: Sequence[int]) -> Array:
    """True where every element along ``axes`` is True.

    >>> lax.reduce_and(fnp.array([[True, False], [True, True]]), (1,))
    Array([False,  True], dtype=bool)
    """
    return lax.eq(_reduce_bool("reduce_and", lax.reduce_min, operand, axes), 1)


def reduce_or(operand: Array, axes: Sequence[int]) -> Array:
    """True where any element along ``axes`` is True.

    >>> lax.reduce_or(fnp.array([[True, False], [False, False]]), (1,))
    Array([ True, False], dtype=bool)
    """
    return lax.eq(_reduce_bool("reduce_or", lax.reduce_max, operand, axes), 1)


def reduce_xor(operand: Array, axes: Sequence[int]) -> Array:
    """True where an odd number of elements along ``axes`` are True.

    >>> lax.reduce_xor(fnp.array([[True, True], [True, False]]), (1,))
    Array([False,  True], dtype=bool)
    """
    return lax.eq(lax.rem(_reduce_bool("reduce_xor", lax.reduce_sum, operand, axes), 2), 1)


def _cumulative(fn: Callable, doc: str) -> Callable:
    def cumulative(operand: Array, axis: int = 0, reverse: bool = False) -> Array:
        axis = _axis(fn.__name__, axis, _ndim(operand), operand)
        return associative_scan(fn, operand, reverse=reverse, axis=axis)
    cumulative.__doc__ = doc + " Written as an associative scan, so gradients hold with zeros and ties."
    return cumulative


def _logaddexp(a: Array, b: Array) -> Array:
    hi = lax.max(a, b)
    # exp(-inf - -inf) would be NaN: where both are -inf the sum is -inf.
    safe = lax.select(lax.eq(hi, -np.inf), 0.0, hi)
    return lax.add(safe, lax.log(lax.add(lax.exp(lax.sub(a, safe)), lax.exp(lax.sub(b, safe)))))


cumprod = _cumulative(lax.mul, "Running product along ``axis``.")
cummax = _cumulative(lax.max, "Running maximum along ``axis``.")
cummin = _cumulative(lax.min, "Running minimum along ``axis``.")
cumlogsumexp = _cumulative(_logaddexp, "Running ``log(sum(exp(x)))`` along ``axis``, computed stably.")
for _f, _n in ((cumprod, "cumprod"), (cummax, "cummax"), (cummin, "cummin"), (cumlogsumexp, "cumlogsumexp")):
    _f.__name__ = _f.__qualname__ = _n

# One checked example for each cumulative function: (function, call, printed result).
_CUMULATIVE_EXAMPLES = (
    (cumprod, 'lax.cumprod(fnp.array([1.0, 2.0, 3.0]))', 'Array([1., 2., 6.], dtype=float32)'),
    (cummax, 'lax.cummax(fnp.array([1.0, 3.0, 2.0]))', 'Array([1., 3., 3.], dtype=float32)'),
    (cummin, 'lax.cummin(fnp.array([3.0, 1.0, 2.0]))', 'Array([3., 1., 1.], dtype=float32)'),
    (cumlogsumexp, 'lax.cumlogsumexp(fnp.array([0.0, 0.0, 0.0]))', 'Array([0. , 0.6931, 1.0986], dtype=float32)'),
)
for _f, _call, _result in _CUMULATIVE_EXAMPLES:
    _f.__doc__ += f"\n\n    >>> {_call}\n    {_result}\n"


def reduce_window(operand: Array, init_value: Any, computation: Callable, window_dimensions: Sequence[int],
                  window_strides: Sequence[int] | None = None, padding: Any = "VALID",
                  base_dilation: Sequence[int] | None = None, window_dilation: Sequence[int] | None = None) -> Array:
    """Reduce every window of ``window_dimensions`` (pooling), as ``jax.lax.reduce_window``, for
    ``lax.add``/``mul``/``max``/``min``: the strided windows are combined offset by offset, so the
    gradient is that of the elementwise combiner. ``padding`` is "VALID", "SAME" or (low, high) pairs,
    padded with ``init_value``.

    >>> lax.reduce_window(fnp.arange(4.0), -fnp.inf, lax.max, (2,), (1,), "VALID")
    Array([1., 2., 3.], dtype=float32)
    """
    monoid = _monoid(computation, operand)
    if monoid is None:
        raise NotImplementedError("reduce_window: funcgrad supports addition, multiplication, max and min "
                                  "(lax.add, lax.mul, lax.max, lax.min)")
    reduction, combine = monoid
    shape = shape_of(operand)
    nd = len(shape)
    window = tuple(int(w) for w in window_dimensions)
    strides = (1,) * nd if window_strides is None else tuple(int(s) for s in window_strides)
    dilation = (1,) * nd if window_dilation is None else tuple(int(d) for d in window_dilation)
    if base_dilation is not None and any(int(d) != 1 for d in base_dilation):
        raise NotImplementedError("reduce_window: base_dilation other than 1 is not supported")
    if not len(window) == len(strides) == len(dilation) == nd:
        raise ValueError(f"reduce_window: window {window}, strides {strides} and window_dilation {dilation} need one "
                         f"entry per axis of {describe(operand)}")
    effective = tuple((w - 1) * d + 1 for w, d in zip(window, dilation))
    pads = _padding_pairs("reduce_window", padding, shape, effective, strides)
    init = init_value.item() if hasattr(init_value, "item") else init_value
    x = pad(operand, init, [(lo, hi, 0) for lo, hi in pads])
    padded = shape_of(x)
    out_shape = tuple((n - e) // s + 1 for n, e, s in zip(padded, effective, strides))
    out = None
    for offset in np.ndindex(*window):
        start = [o * d for o, d in zip(offset, dilation)]
        limit = [st + (m - 1) * s + 1 for st, m, s in zip(start, out_shape, strides)]
        piece = slice(x, start, limit, strides)
        out = piece if out is None else combine(out, piece)
    # max/min windows already saw the init value in their padding; a sum or product takes it once more
    folds_init = reduction in (_S.reduce_sum_p, _R.reduce_prod_p) and init != (0 if reduction is _S.reduce_sum_p else 1)
    return combine(out, init) if folds_init else out


def _padding_pairs(op: str, padding: Any, shape: Sequence[int], window: Sequence[int],
                   strides: Sequence[int]) -> list[tuple[int, int]]:
    """(low, high) per axis for "VALID", "SAME" (XLA's rule: extra on the high side) or explicit pairs."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return [(0, 0)] * len(shape)
        if mode in ("SAME", "SAME_LOWER"):
            pairs = []
            for n, w, s in zip(shape, window, strides):
                total = max((-(-n // s) - 1) * s + w - n, 0)
                small, big = total // 2, total - total // 2
                pairs.append((small, big) if mode == "SAME" else (big, small))
            return pairs
        raise ValueError(f"{op}: padding {padding!r} must be 'VALID', 'SAME', 'SAME_LOWER' or (low, high) pairs")
    pairs = [tuple(int(v) for v in p) for p in padding]
    if len(pairs) != len(shape) or any(len(p) != 2 for p in pairs):
        raise ValueError(f"{op}: padding {padding} must give one (low, high) pair per axis ({len(shape)})")
    return pairs


# ------------------------------------------------------------------ sorting


def _take_along(x: Array, idx: Array, axis: int) -> Array:
    """``x`` gathered with ``idx`` along ``axis`` (``idx`` has ``x``'s shape there or fewer along ``axis``)."""
    shape = shape_of(idx)
    index = tuple(idx if a == axis else broadcasted_iota(np.int32, shape, a) for a in range(len(shape)))
    return lax.getitem(x, index)


def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
    """Sort along ``dimension``; a tuple of operands is sorted by its first ``num_keys`` (lexicographically)
    and every operand permuted alike. NaNs sort last; differentiable (the gradient is un-permuted).

    >>> lax.sort(fnp.array([3.0, 1.0, 2.0]))
    Array([1., 2., 3.], dtype=float32)
    """
    single = not isinstance(operand, (tuple, list))
    ops = [operand] if single else list(operand)
    if not 1 <= num_keys <= len(ops):
        raise ValueError(f"sort: num_keys={num_keys} must be between 1 and the number of operands ({len(ops)})")
    dim = _axis("sort", dimension, _ndim(ops[0]), ops[0])
    order = None
    for key in reversed(ops[:num_keys]):   # stable sorts from the last key to the first: lexicographic order
        keyed = key if order is None else _take_along(key, order, dim)
        step = lax.argsort(lax.stop_gradient(keyed), dim)
        order = step if order is None else _take_along(order, step, dim)
    out = [_take_along(o, order, dim) for o in ops]
    return out[0] if single else tuple(out)


def sort_key_val(keys: Array, values: Array, dimension: int = -1, is_stable: bool = True) -> tuple[Array, Array]:
    """``keys`` sorted along ``dimension`` and ``values`` permuted alike.

    >>> lax.sort_key_val(fnp.array([3.0, 1.0, 2.0]), fnp.array([0, 1, 2]))
    (Array([1., 2., 3.], dtype=float32), Array([1, 2, 0], dtype=int32))
    """
    return sort((keys, values), dimension, is_stable, num_keys=1)


def top_k(operand: Array, k: int) -> tuple[Array, Array]:
    """The ``k`` largest entries along the last axis, largest first, and their indices (ties: lower index
    first, as JAX).

    >>> lax.top_k(fnp.array([1.0, 4.0, 2.0, 3.0]), 2)
    (Array([4., 3.], dtype=float32), Array([1, 3], dtype=int32))
    """
    n = shape_of(operand)[-1]
    if not 0 <= int(k) <= n:
        raise ValueError(f"top_k: k={k} must be between 0 and the last axis of {describe(operand)} ({n})")
    last = _ndim(operand) - 1
    # Sort the negation stably so equal values keep index order; NaN counts as the largest, as in JAX.
    key = lax.neg(lax.stop_gradient(operand))
    key = lax.select(lax.isnan(key), -np.inf, key)
    order = slice_in_dim(lax.argsort(key, last), 0, int(k), 1, last)
    return _take_along(operand, order, last), lax.convert(order, np.int32)


# ------------------------------------------------------------------ dot and convolution


def dot(lhs: Array, rhs: Array, precision: Any = None, preferred_element_type: Any = None) -> Array:
    """Vector-vector, matrix-vector or matrix-matrix product (``jax.lax.dot``); ``precision`` is accepted and
    ignored (the CPU computes in the operands' dtype).

    >>> lax.dot(fnp.ones((2, 3)), fnp.ones(3))
    Array([3., 3.], dtype=float32)
    """
    a, b = _ndim(lhs), _ndim(rhs)
    if a not in (1, 2) or b not in (1, 2) or shape_of(lhs)[-1] != shape_of(rhs)[0]:
        raise ValueError(f"dot: expected 1-d or 2-d operands whose inner sizes match, got {describe(lhs)} and "
                         f"{describe(rhs)}")
    out = einsum({(1, 1): "i,i->", (1, 2): "i,ij->j", (2, 1): "ij,j->i", (2, 2): "ij,jk->ik"}[a, b], lhs, rhs)
    return out if preferred_element_type is None else lax.convert(out, preferred_element_type)


def conv_general_dilated(lhs: Array, rhs: Array, window_strides: Sequence[int], padding: Any,
                         lhs_dilation: Sequence[int] | None = None, rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers: Any = None, feature_group_count: int = 1, batch_group_count: int = 1,
                         precision: Any = None, preferred_element_type: Any = None) -> Array:
    """N-d convolution as ``jax.lax.conv_general_dilated`` for one or two spatial axes, on funcgrad's conv2d
    kernels: any ``dimension_numbers`` (strings such as ``("NHWC", "HWIO", "NHWC")`` or index triples),
    strides, "SAME"/"VALID"/explicit padding, ``rhs_dilation`` and ``feature_group_count``.
    ``lhs_dilation`` (transposed convolution) and ``batch_group_count`` other than 1 raise
    NotImplementedError.

    >>> lax.conv_general_dilated(fnp.ones((1, 1, 5)), fnp.ones((1, 1, 3)), (1,), "SAME")
    Array([[[2., 3., 3., 3., 2.]]], dtype=float32)
    """
    nd = _ndim(lhs)
    spatial = nd - 2
    if spatial not in (1, 2) or _ndim(rhs) != nd:
        raise NotImplementedError(f"conv_general_dilated: funcgrad convolves over 1 or 2 spatial axes; got operands "
                                  f"{describe(lhs)} and {describe(rhs)}")
    if (lhs_dilation is not None and any(int(d) != 1 for d in lhs_dilation)) or batch_group_count != 1:
        raise NotImplementedError("conv_general_dilated: lhs_dilation and batch_group_count other than 1 are not "
                                  "supported; for a transposed convolution use the gradient of conv2d")
    lhs_spec, rhs_spec, out_spec = _conv_dims(dimension_numbers, nd)
    x = lax.transpose(lhs, lhs_spec)             # N, C, spatial...
    w = lax.transpose(rhs, rhs_spec)             # O, I, spatial...
    strides = tuple(int(s) for s in window_strides)
    dilation = (1,) * spatial if rhs_dilation is None else tuple(int(d) for d in rhs_dilation)
    if spatial == 1:                             # a 1-d convolution is a 2-d one over a unit axis
        x = lax.reshape(x, shape_of(x)[:2] + (1,) + shape_of(x)[2:])
        w = lax.reshape(w, shape_of(w)[:2] + (1,) + shape_of(w)[2:])
        strides, dilation = (1,) + strides, (1,) + dilation
        padding = padding if isinstance(padding, str) else [(0, 0)] + list(padding)
    window = [(k - 1) * d + 1 for k, d in zip(shape_of(w)[2:], dilation)]
    pads = _padding_pairs("conv_general_dilated", padding, shape_of(x)[2:], window, strides)
    symmetric = all(lo == hi for lo, hi in pads)
    if not symmetric:
        x = pad(x, 0, [(0, 0, 0), (0, 0, 0)] + [(lo, hi, 0) for lo, hi in pads])
    out = lax.conv2d(x, w, stride=strides, padding=tuple(lo for lo, _ in pads) if symmetric else 0,
                     dilation=dilation, groups=int(feature_group_count))
    if spatial == 1:
        out = lax.reshape(out, shape_of(out)[:2] + shape_of(out)[3:])
    out = lax.transpose(out, tuple(int(i) for i in np.argsort(out_spec)))
    return out if preferred_element_type is None else lax.convert(out, preferred_element_type)


def _conv_dims(dimension_numbers: Any, nd: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Permutations taking lhs to (N, C, spatial...), rhs to (O, I, spatial...), and out's (N, C, spatial...)
    positions, from JAX's string or index forms (None: NCHW, OIHW, NCHW)."""
    if dimension_numbers is None:
        default = tuple(range(nd))
        return default, default, default
    specs = tuple(dimension_numbers)
    if all(isinstance(s, str) for s in specs):
        lhs_s, rhs_s, out_s = specs
        for spec, first, second in ((lhs_s, "N", "C"), (rhs_s, "O", "I"), (out_s, "N", "C")):
            if len(spec) != nd or spec.count(first) != 1 or spec.count(second) != 1:
                raise ValueError(f"conv_general_dilated: dimension spec {spec!r} must have {nd} letters with one "
                                 f"{first!r} and one {second!r}")
        rhs_spatial = [i for i, c in enumerate(rhs_s) if c not in "OI"]
        order = [rhs_s[i] for i in rhs_spatial]      # spatial axes pair up by letter, in the kernel's order

        def perm(spec: str, first: str, second: str) -> tuple[int, ...]:
            if sorted(c for c in spec if c not in (first, second)) != sorted(order):
                raise ValueError(f"conv_general_dilated: spatial letters of {spec!r} and {rhs_s!r} differ")
            return (spec.index(first), spec.index(second), *[spec.index(c) for c in order])
        return perm(lhs_s, "N", "C"), (rhs_s.index("O"), rhs_s.index("I"), *rhs_spatial), perm(out_s, "N", "C")
    # ConvDimensionNumbers-like: (lhs_spec, rhs_spec, out_spec) as index tuples (batch/out, feature/in, spatial...)
    return tuple(tuple(int(i) for i in s) for s in specs)


def conv(lhs: Array, rhs: Array, window_strides: Sequence[int], padding: Any, precision: Any = None,
         preferred_element_type: Any = None) -> Array:
    """``conv_general_dilated`` with NCHW / OIHW layouts and no dilation.

    >>> lax.conv(fnp.ones((1, 1, 4, 4)), fnp.ones((2, 1, 3, 3)), (1, 1), "VALID")[0, :, 0, 0]
    Array([9., 9.], dtype=float32)
    """
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)
