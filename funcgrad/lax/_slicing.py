"""Slicing, padding, iotas and shapes of ``funcgrad.lax``: ``slice``, ``slice_in_dim``, ``index_in_dim``,
``split``, ``pad`` (with interior padding), ``iota``, ``broadcasted_iota``, ``broadcast``,
``broadcast_shapes``, ``broadcast_to_rank``, ``collapse`` and ``dtype``. Written with the operations of
``_ops``; the other parts of the API gathered in ``_more`` are in ``_arith``, ``_reductions`` and
``_dot_conv``.
"""
from __future__ import annotations

import builtins
import math
from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array as _ConcreteArray
from funcgrad._dtypes import describe
from funcgrad.lax._ops import Array, _axis, lax
from funcgrad.primitives import indexing as _I
from funcgrad.primitives.shape import shape_of

_py_slice = builtins.slice   # this module defines lax.slice


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
