"""funcgrad.numpy: unique and the set operations (isin, union1d, intersect1d, setdiff1d, setxor1d)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad import lax
from funcgrad.numpy._base import arr, normalize_axis, promote
from funcgrad.numpy._shape import concatenate, moveaxis, ravel
from funcgrad.numpy._arrays import _const, _fill, _index, _iota, _py_slice, _size_arg, _take, _true_positions, _where
from funcgrad.numpy._selection import _resolve_size
from funcgrad.typing import Array, ArrayLike

__all__ = [
    "intersect1d", "isin", "setdiff1d", "setxor1d", "union1d", "unique", "unique_all", "unique_counts",
    "unique_inverse", "unique_values",
]


# ---------------------------------------------------------------------------------------------- unique and sets


def _argsort(x: Any) -> Any:
    """Stable ascending order of a 1-d ``x`` (NaNs last), int32, with no derivative."""
    if _dtypes.kind(x.dtype) == "f":
        x = lax.stop_gradient(x)
    return lax.convert_element_type(lax.argsort(x, 0), np.int32)


def _groups(x: Any, keep: Any, equal_nan: bool) -> tuple[Any, Any, Any]:
    """Sort a 1-d ``x`` (the kept entries first when ``keep`` is given): the permutation, the sorted values
    and a bool array marking the first entry of each run of equal kept values."""
    n = x.shape[0]
    if x.ndim == 1:
        perm = _argsort(x)
    else:   # rows, in lexicographic order: stable sorts from the last column to the first
        perm = None
        for j in range(x.shape[1] - 1, -1, -1):
            col = lax.getitem(x, (_py_slice(None), j))
            step = _argsort(col if perm is None else _take(col, perm, 0))
            perm = step if perm is None else _take(perm, step, 0)
        if perm is None:
            perm = _iota(n)
    if keep is not None:
        order = _argsort(lax.convert_element_type(lax.logical_not(_take(keep, perm, 0)), np.int32))
        perm = _take(perm, order, 0)
    s = _take(x, perm, 0)
    first = lax.full((1,), True, bool)
    if n > 1:
        prev, cur = lax.static_slice(s, 0, 0, n - 1), lax.static_slice(s, 0, 1, n)
        differs = lax.ne(cur, prev)
        if equal_nan and _dtypes.kind(s.dtype) == "f":
            differs = lax.logical_and(differs, lax.logical_not(lax.logical_and(lax.isnan(cur), lax.isnan(prev))))
        if x.ndim > 1:   # a row is new where any of its entries differs from the row before
            differs = lax.gt(lax.reduce_max(lax.convert_element_type(differs, np.int32), (1,)),
                             lax.full((), 0, np.int32)) if x.shape[1] else lax.full((n - 1,), False, bool)
        is_new = lax.concatenate_p.bind(first, differs, axis=0)
    else:
        is_new = lax.broadcast_to(first, (n,))
    if keep is not None:
        is_new = lax.logical_and(is_new, _take(keep, perm, 0))
    return perm, s, is_new


def _unique_1d(name: str, x: Any, keep: Any, size: Any, fill_value: Any, equal_nan: bool,
               fill_default: Any = None, need: tuple = ()) -> dict:
    """The unique (kept) values of a 1-d ``x`` in sorted order, and on request ('index', 'inverse',
    'counts') the index of each one's first occurrence, the group of every entry and the group sizes."""
    n = x.shape[0]
    if n == 0:
        k = 0 if size is None else _size_arg(name, size)
        fill = 0 if fill_value is None else fill_value
        res = {"values": lax.convert_element_type(lax.broadcast_to(arr(fill), (k,) + x.shape[1:]), x.dtype),
               "index": lax.full((k,), 0, np.int32), "inverse": lax.full((0,), 0, np.int32),
               "counts": lax.full((k,), 0, np.int32), "valid": lax.full((k,), False, bool)}
        return res
    perm, s, is_new = _groups(x, keep, equal_nan)
    k = _resolve_size(name, size, is_new, "the array")
    idx, valid = _true_positions(is_new, k + 1)
    first, valid_k = lax.static_slice(idx, 0, 0, k), lax.static_slice(valid, 0, 0, k)
    values = _take(s, first, 0)
    fill = fill_value if fill_value is not None else fill_default
    if fill is not None and size is not None:
        values = _fill(values, valid_k, fill)
    res = {"values": values, "valid": valid_k, "first": first, "perm": perm}
    if "index" in need:
        res["index"] = _take(perm, first, 0)
    if "inverse" in need:
        group = lax.sub(lax.cumsum(lax.convert_element_type(is_new, np.int32), 0), lax.full((), 1, np.int32))
        res["inverse"] = lax.scatter(lax.full((n,), 0, np.int32), perm, group)
    if "counts" in need:
        starts = _where(valid, idx, lax.full((), n, np.int32))
        res["counts"] = lax.sub(lax.static_slice(starts, 0, 1, k + 1), lax.static_slice(starts, 0, 0, k))
    return res


def unique(ar: ArrayLike, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis: int | None = None, *, equal_nan: bool = True, size: int | None = None,
           fill_value: ArrayLike | None = None, sorted: bool = True) -> Any:  # noqa: A002 -- JAX's keyword
    """The sorted unique values of ``ar`` (flattened, or the unique slices along ``axis``), and optionally the
    index of each one's first occurrence, the inverse (``values[inverse]`` rebuilds ``ar``) and the counts.

    Eagerly the length is the number of unique values; under jit/vmap pass ``size=``: the first ``size`` are
    kept, and missing ones are ``fill_value`` (default: the smallest value; counts 0).  With ``axis`` the
    slices are compared whole, in lexicographic order.  The values are differentiable (a gather from ``ar``).

    >>> unique(fnp.array([3, 1, 3]), return_counts=True)
    (Array([1, 3], dtype=int32), Array([1, 2], dtype=int32))
    """
    x = arr(ar)
    extras = [f for f, on in (("index", return_index), ("inverse", return_inverse), ("counts", return_counts)) if on]
    if axis is not None:
        axis = normalize_axis("unique", axis, x.ndim, x)
        moved = moveaxis(x, axis, 0)
        rows = lax.reshape(moved, (moved.shape[0], int(np.prod(moved.shape[1:], dtype=np.int64))))
        got = _unique_1d("unique", rows, None, size, fill_value, equal_nan, need=tuple(extras))
        values = got["values"]
        got["values"] = moveaxis(lax.reshape(values, (values.shape[0],) + moved.shape[1:]), 0, axis)
    else:
        got = _unique_1d("unique", ravel(x), None, size, fill_value, equal_nan, need=tuple(extras))
        if return_inverse:
            got["inverse"] = lax.reshape(got["inverse"], x.shape)
    if not extras:
        return got["values"]
    return (got["values"],) + tuple(_index(got[e]) for e in extras)


def _named(name: str, fields: Sequence[str]) -> type:
    from collections import namedtuple
    return namedtuple(name, fields)


_UniqueAllResult = _named("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])
_UniqueCountsResult = _named("UniqueCountsResult", ["values", "counts"])
_UniqueInverseResult = _named("UniqueInverseResult", ["values", "inverse_indices"])


def unique_values(x: ArrayLike, /, *, size: int | None = None, fill_value: ArrayLike | None = None) -> Any:
    """The sorted unique values of the flattened ``x`` (NaNs all kept, as the array API); ``size=`` as
    :func:`unique`.

    >>> unique_values(fnp.array([2, 1, 2]))
    Array([1, 2], dtype=int32)
    """
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


def unique_counts(x: ArrayLike, /, *, size: int | None = None, fill_value: ArrayLike | None = None) -> Any:
    """``(values, counts)`` of the flattened ``x`` as a named tuple (see :func:`unique`).

    >>> unique_counts(fnp.array([2, 1, 2])).counts
    Array([1, 2], dtype=int32)
    """
    return _UniqueCountsResult(*unique(x, return_counts=True, equal_nan=False, size=size, fill_value=fill_value))


def unique_inverse(x: ArrayLike, /, *, size: int | None = None, fill_value: ArrayLike | None = None) -> Any:
    """``(values, inverse_indices)`` as a named tuple; ``inverse_indices`` has ``x``'s shape.

    >>> unique_inverse(fnp.array([2, 1, 2])).inverse_indices
    Array([1, 0, 1], dtype=int32)
    """
    return _UniqueInverseResult(*unique(x, return_inverse=True, equal_nan=False, size=size, fill_value=fill_value))


def unique_all(x: ArrayLike, /, *, size: int | None = None, fill_value: ArrayLike | None = None) -> Any:
    """``(values, indices, inverse_indices, counts)`` as a named tuple (see :func:`unique`).

    >>> unique_all(fnp.array([2, 1, 2])).indices
    Array([1, 0], dtype=int32)
    """
    return _UniqueAllResult(*unique(x, return_index=True, return_inverse=True, return_counts=True,
                                    equal_nan=False, size=size, fill_value=fill_value))


def isin(element: ArrayLike, test_elements: ArrayLike, assume_unique: bool = False, invert: bool = False, *,
         method: str = "auto") -> Array:
    """A bool array of ``element``'s shape: True where the entry occurs in ``test_elements`` (NaN never
    does); ``invert=True`` negates it.  Works under jit: small inputs compare every pair ('compare_all'),
    large ones (or ``method='sort'``/``'binary_search'``) sort both arrays together.

    >>> isin(fnp.array([1, 2, 3]), fnp.array([2, 5]))    # [False, True, False]
    Array([False,  True, False], dtype=bool)
    """
    if method not in ("auto", "compare_all", "binary_search", "sort"):
        raise ValueError(f"isin: method={method!r} is not implemented; options are 'compare_all', "
                         "'binary_search', 'sort', and 'auto'")
    e, t = promote(arr(element), ravel(arr(test_elements)))
    if t.shape[0] == 0 or e.size == 0:
        out = lax.full(e.shape, False, bool)
    elif method in ("sort", "binary_search") or (method == "auto" and e.size * t.shape[0] > 1 << 16):
        out = lax.reshape(_isin_sorted(ravel(e), t), e.shape)
    else:
        eq = lax.eq(lax.reshape(e, e.shape + (1,)), lax.reshape(t, (1,) * e.ndim + t.shape))
        out = lax.gt(lax.reduce_max(lax.convert_element_type(eq, np.int32), (e.ndim,)), lax.full((), 0, np.int32))
    return lax.logical_not(out) if invert else out


def _isin_sorted(e: Any, t: Any) -> Any:
    """``isin`` for 1-d arrays in O((n + m) log(n + m)): sort both together (test values before equal
    elements) and look back to the latest test value."""
    m, n = t.shape[0], e.shape[0]
    vals = lax.concatenate_p.bind(t, e, axis=0)
    is_t = _const(np.arange(m + n) < m)
    perm = _argsort(vals)   # stable: among equal values the test values (first in vals) come first
    sv, st = _take(vals, perm, 0), _take(is_t, perm, 0)
    last = lax.cummax(_where(st, _iota(m + n), lax.full((), -1, np.int32)), 0)
    seen = _take(sv, lax.max(last, lax.full((), 0, np.int32)), 0)
    found = lax.logical_and(lax.ge(last, lax.full((), 0, np.int32)), lax.eq(seen, sv))
    back = lax.scatter(lax.full((m + n,), False, bool), perm, found)
    return lax.static_slice(back, 0, m, m + n)


def union1d(ar1: ArrayLike, ar2: ArrayLike, *, size: int | None = None, fill_value: ArrayLike | None = None) -> Any:
    """The sorted unique values found in either array (flattened); ``size=``/``fill_value=`` as :func:`unique`.

    >>> union1d(fnp.array([3, 1]), fnp.array([2, 1]))
    Array([1, 2, 3], dtype=int32)
    """
    return unique(concatenate(promote(ravel(arr(ar1)), ravel(arr(ar2))), axis=0), size=size, fill_value=fill_value)


def intersect1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, return_indices: bool = False, *,
                size: int | None = None, fill_value: ArrayLike | None = None) -> Any:
    """The sorted unique values found in both arrays (flattened); with ``return_indices`` also the index of
    each one's first occurrence in each array (missing ones: the array's length).

    >>> intersect1d(fnp.array([1, 2, 2, 5]), fnp.array([2, 5, 9]))
    Array([2, 5], dtype=int32)
    """
    a, b = promote(ravel(arr(ar1)), ravel(arr(ar2)))
    got = _unique_1d("intersect1d", a, isin(a, b), size, fill_value, True)
    if not return_indices:
        return got["values"]
    if a.shape[0] == 0 or b.shape[0] == 0:
        k = got["values"].shape[0]
        return got["values"], lax.full((k,), a.shape[0], _dtypes.int_), lax.full((k,), b.shape[0], _dtypes.int_)
    got_b = _unique_1d("intersect1d", b, isin(b, a), got["values"].shape[0], None, True)

    def firsts(g: Any, n: int) -> Any:
        return _fill(_take(g["perm"], g["first"], 0), g["valid"], n)
    return got["values"], _index(firsts(got, a.shape[0])), _index(firsts(got_b, b.shape[0]))


def setdiff1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *, size: int | None = None,
              fill_value: ArrayLike | None = None) -> Any:
    """The sorted unique values of ``ar1`` not in ``ar2`` (flattened); with ``size=`` missing ones are
    ``fill_value`` (default 0, as JAX).

    >>> setdiff1d(fnp.array([3, 1, 2]), fnp.array([2]))
    Array([1, 3], dtype=int32)
    """
    a, b = promote(ravel(arr(ar1)), ravel(arr(ar2)))
    return _unique_1d("setdiff1d", a, isin(a, b, invert=True), size, fill_value, True, fill_default=0)["values"]


def setxor1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *, size: int | None = None,
             fill_value: ArrayLike | None = None) -> Any:
    """The sorted unique values found in exactly one of the arrays (flattened); ``size=`` as :func:`unique`.

    >>> setxor1d(fnp.array([1, 2]), fnp.array([2, 3]))
    Array([1, 3], dtype=int32)
    """
    a, b = promote(ravel(arr(ar1)), ravel(arr(ar2)))
    keep = concatenate([isin(a, b, invert=True), isin(b, a, invert=True)], axis=0)
    return _unique_1d("setxor1d", concatenate([a, b], axis=0), keep, size, fill_value, True)["values"]
