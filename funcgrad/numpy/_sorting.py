"""funcgrad.numpy: sorting, searching, counting and histograms (JAX's semantics).

Sorting is written on ``lax.sort`` (a stable argsort primitive, then a gather), so
``sort``/``partition`` are differentiable: the cotangent is un-permuted.  Index results
(``argsort``, ``searchsorted``, ``digitize``, ``bincount`` counts) have no gradient.

>>> import funcgrad.numpy as fnp
>>> fnp.sort(fnp.array([3.0, 1.0, 2.0]))
Array([1., 2., 3.], dtype=float32)
>>> fnp.searchsorted(fnp.array([1.0, 2.0, 3.0]), 2.5)
Array(2, dtype=int32)
"""
from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array, Tracer
from funcgrad._dtypes import describe
from funcgrad import lax
from funcgrad.numpy._base import arr, concrete_value, index_arg, normalize_axis, promote, promote_inexact
from funcgrad.numpy import _reductions as _R, _shape as _S
from funcgrad.typing import ArrayLike, DTypeLike

__all__ = ["argpartition", "argsort", "bincount", "digitize", "histogram", "histogram2d", "histogram_bin_edges",
           "histogramdd", "lexsort", "partition", "searchsorted", "sort"]

_range = builtins.range


def _no_kind_order(name: str, kind: Any, order: Any) -> None:
    if kind is not None:
        raise TypeError(f"{name}: the 'kind' argument is not supported (as in JAX); use stable=True or stable=False")
    if order is not None:
        raise TypeError(f"{name}: the 'order' argument is not supported (as in JAX): funcgrad has no structured "
                        "arrays")


def _flat_axis(name: str, x: Any, axis: Any) -> tuple[Any, int]:
    if axis is None:
        return lax.reshape(x, (x.size,)), 0
    if x.ndim == 0:
        raise ValueError(f"{name}: axis {axis} is out of bounds for a 0-d array {describe(x)}; use axis=None")
    return x, normalize_axis(name, axis, x.ndim, x)


def concrete(name: str, x: ArrayLike, what: str, fix: str) -> np.ndarray:
    """The value of ``x`` as numpy, or a clear error when it is traced (under jit/vmap)."""
    return concrete_value(x, f"{name}: {what} depends on the values of {{x}}, which are unknown under jit/vmap; "
                             f"{fix}")


def sort(a: ArrayLike, axis: int | Sequence[int] = -1, *, kind: Any = None, order: Any = None, stable: bool = True,
         descending: bool = False) -> Array:
    """``a`` sorted along ``axis`` (None: the flattened array); NaNs sort last (first with ``descending``).

    Differentiable: the gradient goes back to each element's original position.

    >>> sort(fnp.array([[3, 1], [0, 2]]), axis=0)
    Array([[0, 1],
           [3, 2]], dtype=int32)
    """
    _no_kind_order("sort", kind, order)
    x, axis = _flat_axis("sort", arr(a), axis)
    out = lax.sort(x, dimension=axis, is_stable=stable)
    return lax.rev(out, (axis,)) if descending else out


def argsort(a: ArrayLike, axis: int | Sequence[int] = -1, *, kind: Any = None, order: Any = None, stable: bool = True,
            descending: bool = False, dtype: DTypeLike | None = None) -> Array:
    """The indices that sort ``a`` along ``axis`` (ties keep their order; with ``descending`` too).

    Integer output (default int, or ``dtype``), no gradient.

    >>> argsort(fnp.array([3.0, 1.0, 2.0]))
    Array([1, 2, 0], dtype=int32)
    """
    _no_kind_order("argsort", kind, order)
    x, axis = _flat_axis("argsort", arr(a), axis)
    if descending:
        # reversed stable ascending sort of the reversed array: equal keys keep their order
        n = x.shape[axis]
        order_ = lax.argsort(lax.rev(x, (axis,)), axis)
        out = lax.rev(lax.sub(n - 1, order_), (axis,))
    else:
        out = lax.argsort(x, axis)
    return out if dtype is None else lax.convert_element_type(out, dtype)


def lexsort(keys: Any, axis: int = -1) -> Any:
    """Indices that sort by several keys, the LAST key primary (numpy's order).

    >>> lexsort([fnp.array([1, 0, 1]), fnp.array([0, 0, 1])])
    Array([1, 0, 2], dtype=int32)
    """
    keys = [arr(k) for k in (keys if isinstance(keys, (tuple, list)) else
                             [keys[i] for i in _range(np.shape(keys)[0])])]
    if not keys:
        raise TypeError("lexsort: need a sequence of keys with len > 0")
    if len({k.shape for k in keys}) > 1:
        raise ValueError(f"lexsort: all keys need to have the same shape, got {', '.join(describe(k) for k in keys)}")
    if keys[0].ndim == 0:
        return lax.full((), 0, _dtypes.int_)
    axis = normalize_axis("lexsort", axis, keys[0].ndim, keys[0])
    iota = lax.broadcasted_iota(_dtypes.int_, keys[0].shape, axis)
    return lax.sort((*keys[::-1], iota), dimension=axis, num_keys=len(keys))[-1]


def _kth(name: str, kth: Any, x: Any, axis: int) -> int:
    n = x.shape[axis]
    k = index_arg(name, "kth", kth)
    if not -n <= k < n:
        raise ValueError(f"{name}: kth={k} is out of range for axis {axis} of an array {describe(x)} (size {n})")
    return k % n


def partition(a: ArrayLike, kth: int, axis: int = -1) -> Any:
    """``a`` with its ``kth`` smallest element along ``axis`` in place, smaller ones before it and larger
    ones after.  As in JAX, the part before is ascending and the part after DESCENDING (numpy leaves
    both in an unspecified order).  Differentiable.

    >>> partition(fnp.array([5.0, 1.0, 4.0, 2.0, 3.0]), 1)
    Array([1., 2., 5., 4., 3.], dtype=float32)
    """
    x = arr(a)
    if x.ndim == 0:
        raise ValueError("partition: a 0-d array cannot be partitioned")
    axis = normalize_axis("partition", axis, x.ndim, x)
    k = _kth("partition", kth, x, axis)
    s = lax.sort(x, dimension=axis)
    bottom = lax.slice_in_dim(s, 0, k + 1, 1, axis)
    top = lax.rev(lax.slice_in_dim(s, k + 1, x.shape[axis], 1, axis), (axis,))
    return lax.concatenate([bottom, top], axis)


def argpartition(a: ArrayLike, kth: int, axis: int = -1) -> Any:
    """Indices that partition ``a`` (see :func:`partition`): the ``kth + 1`` smallest first, ascending,
    then the other indices in increasing index order (JAX's layout).

    >>> argpartition(fnp.array([5.0, 1.0, 4.0, 2.0]), 1)
    Array([1, 3, 0, 2], dtype=int32)
    """
    x = arr(a)
    if x.ndim == 0:
        raise ValueError("argpartition: a 0-d array cannot be partitioned")
    axis = normalize_axis("argpartition", axis, x.ndim, x)
    k = _kth("argpartition", kth, x, axis)
    order_ = lax.argsort(x, axis)
    bottom = lax.slice_in_dim(order_, 0, k + 1, 1, axis)
    rest = lax.slice_in_dim(order_, k + 1, x.shape[axis], 1, axis)
    top = lax.sort(rest, dimension=axis)
    return lax.concatenate([bottom, top], axis)


def _less(x: Any, y: Any) -> Any:
    """``x < y`` in the sort order (NaN after every number)."""
    lt = lax.lt(x, y)
    if _dtypes.kind(np.dtype(x.dtype)) != "f":
        return lt
    return lax.logical_or(lt, lax.logical_and(lax.isnan(y), lax.logical_not(lax.isnan(x))))


_METHODS = ("scan", "scan_unrolled", "sort", "compare_all")


def searchsorted(a: ArrayLike, v: ArrayLike, side: str = "left", sorter: Any = None, *, method: str = "scan") -> Any:
    """Where to insert ``v`` into the sorted 1-d ``a`` to keep it sorted: the first such index (``side="left"``)
    or the last (``"right"``).  NaN sorts last, as in :func:`sort`.  Default-int output of ``v``'s shape.

    Every ``method`` gives the same result: "compare_all" counts over all pairs (``len(a) * v.size``
    comparisons); the others run an unrolled binary search (``log2(len(a))`` steps).

    >>> searchsorted(fnp.array([1.0, 2.0, 2.0, 3.0]), fnp.array([2.0, 0.0]), side="right")
    Array([3, 0], dtype=int32)
    """
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if method not in _METHODS:
        raise ValueError(f"searchsorted: method must be one of {_METHODS}, got {method!r}")
    a, v = arr(a), arr(v)
    if a.ndim != 1:
        raise ValueError(f"searchsorted: a must be 1-d, got {describe(a)}")
    if sorter is not None:
        sorter = arr(sorter)
        if sorter.shape != a.shape or sorter.dtype.kind not in "iu":
            raise ValueError(f"searchsorted: sorter {describe(sorter)} must be integer indices of a's shape "
                             f"{a.shape} (a permutation that sorts a)")
        a = _S.take(a, sorter)
    a, v = promote(a, v)
    n = a.shape[0]
    if method == "compare_all" or n <= 8:   # count the smaller entries: n * v.size comparisons
        ab = lax.reshape(a, (1,) * v.ndim + (n,))
        vb = lax.reshape(v, v.shape + (1,))
        hit = _less(ab, vb) if side == "left" else lax.logical_not(_less(vb, ab))
        return lax.reduce_sum(lax.convert_element_type(hit, _dtypes.int_), (v.ndim,))
    # binary search, unrolled: ceil(log2(n + 1)) halvings of [lo, hi], each a gather and a comparison
    lo = lax.full(v.shape, 0, _dtypes.int_)
    hi = lax.full(v.shape, n, _dtypes.int_)
    for _ in _range(int(n).bit_length()):
        active = lax.lt(lo, hi)
        mid = lax.floor_divide(lax.add(lo, hi), 2)
        pivot = lax.getitem(a, (lax.min(mid, n - 1),))
        right = _less(pivot, v) if side == "left" else lax.logical_not(_less(v, pivot))
        lo = lax.select(lax.logical_and(active, right), lax.add(mid, 1), lo)
        hi = lax.select(lax.logical_and(active, lax.logical_not(right)), mid, hi)
    return lo


def digitize(x: ArrayLike, bins: Any, right: bool = False, *, method: str | None = None) -> Any:
    """The index of the bin each ``x`` falls in: ``bins[i-1] <= x < bins[i]`` (``right=True``:
    ``bins[i-1] < x <= bins[i]``); ``bins`` increasing or decreasing.

    >>> digitize(fnp.array([0.5, 1.0, 2.5]), fnp.array([1.0, 2.0, 3.0]))
    Array([0, 1, 2], dtype=int32)
    """
    x, bins = arr(x), arr(bins)
    if bins.ndim != 1:
        raise ValueError(f"digitize: bins must be 1-d, got {describe(bins)}")
    if bins.shape[0] == 0:
        return lax.full(x.shape, 0, _dtypes.int_)
    side = "left" if right else "right"
    kw = {} if method is None else {"method": method}
    up = searchsorted(bins, x, side=side, **kw)
    down = lax.sub(bins.shape[0], searchsorted(lax.rev(bins, (0,)), x, side=side, **kw))
    increasing = lax.ge(lax.getitem(bins, -1), lax.getitem(bins, 0))
    return lax.select(increasing, up, down)


def bincount(x: ArrayLike, weights: ArrayLike | None = None, minlength: int = 0, *, length: int | None = None,
             out_sharding: Any = None) -> Any:
    """The number of occurrences of each value ``0..length-1`` in the non-negative int array ``x``
    (the sum of ``weights`` at them, if given).

    ``length`` fixes the output size; without it the size is ``max(x) + 1`` (at least ``minlength``),
    which needs ``x``'s value: under jit pass ``length=``.  Values outside ``[0, length)`` are dropped
    (negative ones count in bin 0, as JAX clips them).

    >>> bincount(fnp.array([0, 1, 1, 3]))
    Array([1, 2, 0, 1], dtype=int32)
    """
    if out_sharding is not None:
        raise NotImplementedError("bincount: out_sharding is not supported (funcgrad runs on one device)")
    x = arr(x)
    if x.dtype.kind not in "iub":
        raise TypeError(f"bincount: x must be an integer array, got {describe(x)}")
    if x.ndim != 1:
        raise ValueError(f"bincount: x must be 1-d, got {describe(x)}")
    minlength = index_arg("bincount", "minlength", minlength)
    if minlength < 0:
        raise ValueError(f"bincount: minlength must be non-negative, got {minlength}")
    if length is None:
        value = concrete("bincount", x, "the output size (max(x) + 1)", "pass length= (a static size), as JAX "
                         "requires")
        length = builtins.max(minlength, int(value.max()) + 1 if value.size else 0, 1 if value.size else 0)
    else:
        length = index_arg("bincount", "length", length)
    if weights is None:
        w = lax.full(x.shape, 1, _dtypes.int_)
    else:
        w = arr(weights)
        if w.shape != x.shape:
            raise ValueError(f"bincount: weights {describe(w)} must have the shape of x {describe(x)}")
    if x.dtype.kind == "b":
        x = lax.convert_element_type(x, _dtypes.int_)
    idx = lax.clamp(0, x, length)    # length: the overflow slot, dropped below
    out = lax.scatter_add(lax.full((length + 1,), 0, w.dtype), (idx,), w)
    return lax.slice_in_dim(out, 0, length, 1, 0)


def histogram_bin_edges(a: ArrayLike, bins: Any = 10, range: Any = None,  # noqa: A002
                        weights: ArrayLike | None = None) -> Array:
    """The ``bins + 1`` equally spaced edges over ``range`` (default: ``a``'s min and max; widened by 0.5
    each way when they are equal), or ``bins`` itself when it is an array of edges.

    >>> histogram_bin_edges(fnp.array([0.0, 1.0]), bins=2)
    Array([0. , 0.5, 1. ], dtype=float32)
    """
    (a,) = promote_inexact(arr(a))
    if isinstance(bins, str):
        raise NotImplementedError(f"histogram_bin_edges: string bins ({bins!r}) are not supported (nor in JAX); "
                                  "give a number of bins or the edges")
    if np.ndim(bins) == 1:
        (edges,) = promote_inexact(arr(bins))
        return edges
    n = index_arg("histogram_bin_edges", "bins", bins)
    if n < 1:
        raise ValueError(f"histogram_bin_edges: bins must be >= 1, got {n}")
    if range is None:
        if a.size == 0:
            lo, hi = lax.full((), 0.0, a.dtype), lax.full((), 1.0, a.dtype)
        else:
            lo, hi = _R.min(a), _R.max(a)
    else:
        if not hasattr(range, "__len__") or len(range) != 2:
            raise ValueError(f"histogram_bin_edges: range must be a (min, max) pair, got {range!r}")
        lo, hi = (lax.convert_element_type(arr(r), a.dtype) for r in range)
    same = lax.eq(lo, hi)
    lo = lax.select(same, lax.sub(lo, 0.5), lo)
    hi = lax.select(same, lax.add(hi, 0.5), hi)
    steps = lax.div(lax.iota(a.dtype, n + 1), float(n))
    edges = lax.add(lo, lax.mul(lax.sub(hi, lo), steps))
    return lax.concatenate([lax.slice_in_dim(edges, 0, n, 1, 0), lax.reshape(hi, (1,))], 0)   # exact last edge


def _bin_index(name: str, a: Any, edges: Any) -> Any:
    """The bin of each element of ``a`` in 1..len(edges)-1 (0: below, len(edges): above or NaN);
    the last bin includes its right edge, as numpy's."""
    nedges = edges.shape[0]
    idx = searchsorted(edges, a, side="right")
    idx = lax.select(lax.eq(a, lax.getitem(edges, -1)), nedges - 1, idx)
    return idx


def histogram(a: ArrayLike, bins: Any = 10, range: Any = None, weights: ArrayLike | None = None,  # noqa: A002
              density: bool | None = None) -> tuple[Any, Any]:
    """Counts (or summed ``weights``) of ``a``'s elements in each bin, and the bin edges.

    ``bins``: a number of equal bins over ``range`` (default: ``a``'s min to max) or the edges.  The
    last bin includes its right edge; values outside the edges are not counted.  The counts are floats
    when ``weights`` or ``density`` are given, else the default float too (as JAX).

    >>> histogram(fnp.array([0.0, 0.2, 0.9, 1.0]), bins=2)
    (Array([2., 2.], dtype=float32), Array([0. , 0.5, 1. ], dtype=float32))
    """
    (a,) = promote_inexact(arr(a))
    edges = histogram_bin_edges(a, bins, range, weights)
    a = lax.reshape(a, (a.size,))
    if weights is None:
        w = lax.full(a.shape, 1.0, a.dtype)
    else:
        (w,) = promote_inexact(arr(weights))
        if w.size != a.size:
            raise ValueError(f"histogram: weights {describe(w)} must have the shape of a")
        w = lax.reshape(w, (w.size,))
    idx = _bin_index("histogram", a, edges)
    nedges = edges.shape[0]
    counts = lax.scatter_add(lax.full((nedges + 1,), 0, w.dtype), (idx,), w)
    counts = lax.slice_in_dim(counts, 1, nedges, 1, 0)
    if density:
        widths = lax.sub(lax.slice_in_dim(edges, 1, nedges, 1, 0), lax.slice_in_dim(edges, 0, nedges - 1, 1, 0))
        counts = lax.div(lax.div(counts, lax.reduce_sum(counts, (0,))), widths)
    return counts, edges


def histogramdd(sample: Any, bins: Any = 10, range: Any = None, weights: ArrayLike | None = None,  # noqa: A002
                density: bool | None = None) -> tuple[Any, list]:
    """The multidimensional histogram of ``sample`` (N points of D coordinates, shape (N, D)): counts of
    shape ``(bins_1, ..., bins_D)`` (default int, or float with ``weights``/``density``, as JAX) and the
    D arrays of edges.

    ``bins``: an int, one int per dimension, or one array of edges per dimension.

    >>> h, edges = histogramdd(fnp.array([[0.0, 0.0], [1.0, 1.0]]), bins=2)    # h: [[1, 0], [0, 1]]
    """
    (sample,) = promote_inexact(arr(sample))
    if sample.ndim != 2:
        raise ValueError(f"histogramdd: sample must be 2-d (N points, D dimensions), got {describe(sample)}")
    n, d = sample.shape
    if isinstance(bins, (list, tuple)) or (np.ndim(bins) == 1 and not isinstance(bins, (Array, Tracer))):
        bins_per = list(bins)
        if len(bins_per) != d:
            raise ValueError(f"histogramdd: {len(bins_per)} bin specifications for {d} dimensions")
    else:
        bins_per = [bins] * d
    ranges = [None] * d if range is None else list(range)
    if len(ranges) != d:
        raise ValueError(f"histogramdd: {len(ranges)} ranges for {d} dimensions")
    edges, flat = [], None
    for i in _range(d):
        col = lax.getitem(sample, (slice(None), i))
        e = histogram_bin_edges(col, bins_per[i], ranges[i])
        idx = _bin_index("histogramdd", col, e)
        nb = e.shape[0] + 1                      # bins + the two overflow slots
        flat = idx if flat is None else lax.add(lax.mul(flat, nb), idx)
        edges.append(e)
    sizes = [e.shape[0] + 1 for e in edges]
    if weights is None:   # integer counts, as JAX (histogram's 1-d counts are floats)
        w = lax.full((n,), 1.0, sample.dtype) if density else lax.full((n,), 1, _dtypes.int_)
    else:
        (w,) = promote_inexact(arr(weights))
        if w.shape != (n,):
            raise ValueError(f"histogramdd: weights {describe(w)} must have shape ({n},)")
    total = int(np.prod(sizes))
    if flat is None:
        flat = lax.full((n,), 0, _dtypes.int_)
    counts = lax.scatter_add(lax.full((total,), 0, w.dtype), (flat,), w)
    counts = lax.reshape(counts, tuple(sizes))
    counts = lax.getitem(counts, tuple(slice(1, s - 1) for s in sizes))
    if density:
        counts = lax.div(counts, lax.reduce_sum(counts, tuple(_range(d))))
        for i, e in enumerate(edges):
            widths = lax.sub(lax.getitem(e, slice(1, None)), lax.getitem(e, slice(None, -1)))
            shape = [1] * d
            shape[i] = widths.shape[0]
            counts = lax.div(counts, lax.reshape(widths, tuple(shape)))
    return counts, edges


def histogram2d(x: ArrayLike, y: ArrayLike, bins: Any = 10, range: Any = None,  # noqa: A002
                weights: ArrayLike | None = None, density: bool | None = None) -> tuple[Any, Any, Any]:
    """The 2-d histogram of the points ``(x[i], y[i])``: counts ``(bins_x, bins_y)``, x edges, y edges.

    >>> h, xe, ye = histogram2d(fnp.array([0.0, 1.0]), fnp.array([0.0, 1.0]), bins=2)
    """
    x, y = promote_inexact(arr(x), arr(y))
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"histogram2d: x and y must be 1-d of the same length, got {describe(x)} and {describe(y)}")
    if isinstance(bins, (Array, Tracer)) or (not isinstance(bins, (list, tuple)) and np.ndim(bins) == 1):
        bins = [bins, bins]
    elif isinstance(bins, (list, tuple)) and len(bins) != 2:
        bins = [bins, bins]    # one array of edges for both
    sample = _S.stack([x, y], axis=1)
    counts, edges = histogramdd(sample, bins, range, weights, density)
    return counts, edges[0], edges[1]

