"""funcgrad.numpy: value-dependent selections (nonzero, argwhere, compress, extract, trim_zeros):
eager on concrete arrays, or ``size=`` (and ``fill_value=``) under jit/vmap, as in JAX.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad._array import host_numpy
from funcgrad._dtypes import describe
from funcgrad import lax
from funcgrad.numpy._base import arr, normalize_axes, normalize_axis
from funcgrad.numpy._shape import ravel, stack
from funcgrad.numpy._arrays import (_concrete, _count_true, _fill, _index, _is_traced, _py_slice, _size_arg, _take,
                                    _true_positions, _truth, atleast_1d)
from funcgrad.typing import ArrayLike

__all__ = [
    "argwhere", "compress", "extract", "flatnonzero", "nonzero", "trim_zeros",
]


# ---------------------------------------------------------------------------------------------- value-dependent


def _resolve_size(name: str, size: Any, mask: Any, what: str) -> int:
    """``size`` if given, else the number of true entries of ``mask`` (which must then be concrete)."""
    return _count_true(mask, name, what) if size is None else _size_arg(name, size)


def nonzero(a: ArrayLike, *, size: int | None = None, fill_value: ArrayLike | None = None) -> tuple:
    """The indices of the nonzero entries of ``a``, one int32 array per axis (C order).

    Eagerly the length is the number of nonzeros; under jit/vmap pass ``size=`` (the first ``size`` are kept,
    missing ones padded with ``fill_value``: 0, a scalar, or one value per axis).

    >>> nonzero(fnp.array([0, 3, 0, 4]))
    (Array([1, 3], dtype=int32),)
    """
    a = arr(a)
    if a.ndim == 0:
        raise ValueError("nonzero: calling nonzero on a 0-d array is not allowed (as in JAX and numpy >= 2); "
                         "use atleast_1d(a) first")
    mask = ravel(_truth(a))
    n = _resolve_size("nonzero", size, mask, "the array")
    flat, valid = _true_positions(mask, n)
    out = []
    rest = flat
    for d in range(a.ndim - 1, -1, -1):
        dim = lax.full((), a.shape[d], np.int32)
        out.append(lax.mod(rest, dim) if a.shape[d] else rest)
        rest = lax.floor_divide(rest, dim) if a.shape[d] else rest
    out = [_index(o) for o in reversed(out)]
    if fill_value is not None or size is not None:
        fills = fill_value if fill_value is not None else 0
        fills = list(fills) if isinstance(fills, (tuple, list)) else [fills] * a.ndim
        if len(fills) != a.ndim:
            raise ValueError(f"nonzero: fill_value must be a scalar or one value per axis ({a.ndim}), got "
                             f"{len(fills)}")
        out = [_fill(o, valid, f) for o, f in zip(out, fills)]
    return tuple(out)


def flatnonzero(a: ArrayLike, *, size: int | None = None, fill_value: ArrayLike | None = None) -> Any:
    """The indices of the nonzero entries of the flattened ``a`` (``size=``/``fill_value=`` as :func:`nonzero`).

    >>> flatnonzero(fnp.array([[0, 1], [1, 0]]))
    Array([1, 2], dtype=int32)
    """
    return nonzero(ravel(arr(a)), size=size, fill_value=fill_value)[0]


def argwhere(a: ArrayLike, *, size: int | None = None, fill_value: ArrayLike | None = None) -> Any:
    """The indices of the nonzero entries as rows of an ``(count, a.ndim)`` array (see :func:`nonzero`).

    >>> argwhere(fnp.array([[0, 1], [1, 0]]))
    Array([[0, 1],
           [1, 0]], dtype=int32)
    """
    a = arr(a)
    result = stack(nonzero(atleast_1d(a), size=size, fill_value=fill_value), axis=-1)
    if a.ndim == 0:
        return lax.reshape(lax.static_slice(result, 1, 0, 0), (result.shape[0], 0))
    return result


def compress(condition: ArrayLike, a: ArrayLike, axis: int | None = None, *, size: int | None = None,
             fill_value: ArrayLike = 0, out: None = None) -> Any:
    """The slices of ``a`` along ``axis`` (None: flattened) where the 1-d ``condition`` is true.

    Under jit/vmap pass ``size=``: the first ``size`` slices are kept, the rest filled with ``fill_value``.

    >>> compress(fnp.array([True, False, True]), fnp.arange(3.0))
    Array([0., 2.], dtype=float32)
    """
    if out is not None:
        raise NotImplementedError("compress: the out argument is not supported (funcgrad arrays are immutable)")
    c, x = arr(condition), arr(a)
    if c.ndim != 1:
        raise ValueError(f"compress: condition must be 1-d, got {describe(c)}")
    if axis is None:
        x, axis = ravel(x), 0
    axis = normalize_axis("compress", axis, x.ndim, x)
    c = _truth(c)
    n = x.shape[axis]
    if c.shape[0] > n:
        if not _is_traced(c) and np.any(host_numpy(c)[n:]):
            raise ValueError(f"compress: condition {describe(c)} selects entries beyond axis {axis} of "
                             f"{describe(x)} (size {n})")
        c = lax.static_slice(c, 0, 0, n)
    k = _resolve_size("compress", size, c, "the condition")
    idx, valid = _true_positions(c, k)
    if n == 0:
        shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
        return lax.convert_element_type(lax.full(shape, 0, x.dtype) if fill_value is None else
                                        lax.broadcast_to(arr(fill_value), shape), x.dtype)
    taken = _take(x, idx, axis)
    if size is None:
        return taken
    valid = lax.reshape(valid, (1,) * axis + (k,) + (1,) * (x.ndim - axis - 1))
    return _fill(taken, lax.broadcast_to(valid, taken.shape), fill_value)


def extract(condition: ArrayLike, arr: ArrayLike, *, size: int | None = None,  # noqa: F811
            fill_value: ArrayLike = 0) -> Any:
    """The entries of the flattened ``arr`` where the flattened ``condition`` is true (``size=`` as
    :func:`compress`).

    >>> extract(fnp.array([1, 0, 1]), fnp.array([4.0, 5.0, 6.0]))
    Array([4., 6.], dtype=float32)
    """
    from funcgrad.numpy._base import arr as _arr
    c, x = ravel(_arr(condition)), ravel(_arr(arr))
    if c.shape != x.shape:
        raise ValueError(f"extract: condition {describe(_arr(condition))} and arr {describe(_arr(arr))} must have "
                         "the same size")
    return compress(c, x, size=size, fill_value=fill_value)


def trim_zeros(filt: Any, trim: str = "fb", axis: int | Sequence[int] | None = None) -> Any:
    """``filt`` without its leading ('f') and/or trailing ('b') zeros (along ``axis``: None = every axis, where
    a slice counts as zero when all its entries are).  Needs a concrete ``filt``.

    >>> trim_zeros(fnp.array([0, 1, 0, 2, 0]))
    Array([1, 0, 2], dtype=int32)
    """
    x = arr(filt)
    t = trim.lower()
    if not set(t) <= {"f", "b"}:
        raise ValueError(f"trim_zeros: trim must be a combination of 'f' and 'b', got {trim!r}")
    nz = _concrete(_truth(x), "trim_zeros", "the array", "trim_zeros has no size= argument; slice with static "
                   "bounds instead")
    axes = normalize_axes("trim_zeros", axis, x.ndim, x)
    index = [_py_slice(None)] * x.ndim
    for ax in axes:
        others = tuple(d for d in range(x.ndim) if d != ax)
        line = np.any(nz, axis=others) if others else nz
        where = np.nonzero(line)[0]
        if where.size == 0:
            index[ax] = _py_slice(0, 0)
            continue
        start = int(where[0]) if "f" in t else 0
        stop = int(where[-1]) + 1 if "b" in t else x.shape[ax]
        index[ax] = _py_slice(start, stop)
    return lax.getitem(x, tuple(index))



def where_nonzero(condition: ArrayLike, x: ArrayLike, y: ArrayLike, size: Any, fill_value: ArrayLike) -> tuple:
    """``where(condition)`` with one argument: :func:`nonzero` (called by ``funcgrad.numpy.where``)."""
    if x is not None or y is not None:
        if x is None or y is None:
            raise ValueError("where: give both x and y, or neither (where(condition) is nonzero(condition))")
        raise ValueError("where: size= and fill_value= only apply to the one-argument form where(condition)")
    return nonzero(condition, size=size, fill_value=fill_value)
