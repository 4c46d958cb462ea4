"""funcgrad.numpy: order statistics (median, quantiles), NaN-ignoring reductions, weighted averages and
covariance (JAX's semantics).

All are written on lax, so grad (any order), vmap and jit apply.  The NaN-ignoring reductions give a
zero gradient at the NaN entries, as JAX.

>>> import funcgrad.numpy as fnp
>>> fnp.median(fnp.array([3.0, 1.0, 2.0, 10.0]))
Array(2.5, dtype=float32)
>>> fnp.nanmean(fnp.array([1.0, fnp.nan, 3.0]))
Array(2., dtype=float32)
"""
from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._array import host_numpy
from funcgrad._core import Tracer
from funcgrad._dtypes import describe
from funcgrad import lax
from funcgrad.numpy._base import arr, keepdims_shape, normalize_axes, normalize_axis, operand, promote_inexact
from funcgrad.numpy import _reductions as _R
from funcgrad.typing import Array, ArrayLike, DTypeLike

__all__ = ["average", "corrcoef", "count_nonzero", "cov", "median", "nanargmax", "nanargmin", "nanmax", "nanmean",
           "nanmedian", "nanmin", "nanpercentile", "nanprod", "nanquantile", "nanstd", "nansum", "nanvar",
           "percentile", "ptp", "quantile"]

_range, _max, _min = builtins.range, builtins.max, builtins.min


def _no_out(name: str, out: Any) -> None:
    if out is not None:
        raise NotImplementedError(f"{name}: the 'out' argument is not supported (funcgrad arrays are immutable); "
                                  "use the returned array")


def _reduced_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    return keepdims_shape(shape, axes) if keepdims else tuple(s for i, s in enumerate(shape) if i not in axes)


# ------------------------------------------------------------------ quantiles

_QMETHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(name: str, a: Any, q: Any, axis: Any, out: Any, method: str, keepdims: bool, weights: Any,
              squash_nans: bool, overwrite_input: bool = False) -> Any:
    if out is not None or overwrite_input:
        raise ValueError(f"{name}: overwrite_input=True and out= are not supported (as in JAX: funcgrad arrays are "
                         "immutable); use the returned array")
    if method not in _QMETHODS + ("inverted_cdf",):
        raise ValueError(f"{name}: method must be one of {_QMETHODS + ('inverted_cdf',)}, got {method!r}")
    if weights is not None and method != "inverted_cdf":
        raise NotImplementedError(f"{name}: method {method!r} does not support weights; only method='inverted_cdf' "
                                  "does (as in JAX and numpy)")
    a, q = promote_inexact(arr(a), operand(q))   # a Python q is weakly typed: a's dtype (bfloat16 stays)
    if isinstance(q, float):
        q = lax.convert_element_type(arr(q), a.dtype)
    if q.ndim > 1:
        raise ValueError(f"{name}: q must have rank <= 1, got {describe(q)}")
    if not isinstance(q, Tracer):
        qv = host_numpy(q)
        if np.any((qv < 0) | (qv > 1)):
            raise ValueError(f"{name}: quantiles must be in the range [0, 1] (percentiles in [0, 100]), got "
                             f"{np.asarray(qv).tolist()!r:.60}")
    axes = normalize_axes(name, axis, a.ndim, a)
    kept = tuple(i for i in _range(a.ndim) if i not in axes)
    out_shape = q.shape + _reduced_shape(a.shape, axes, keepdims)
    n = int(np.prod([a.shape[i] for i in axes], dtype=np.int64))
    # the reduced axes last, merged into one: (batch..., n)
    x = lax.transpose(a, kept + axes)
    batch = tuple(a.shape[i] for i in kept)
    x = lax.reshape(x, batch + (n,))
    if n == 0:
        return lax.full(out_shape, np.nan, a.dtype)
    isnan = lax.isnan(x)
    if not squash_nans:   # any NaN in a slice makes its quantile NaN
        anynan = lax.reshape(lax.reduce_or(isnan, (len(batch),)), batch + (1,))
        x = lax.select(lax.broadcast_to(anynan, x.shape), np.nan, x)
    if method == "inverted_cdf":
        w = _quantile_weights(name, a, weights, axis, axes, kept, batch + (n,))
        res = _inverted_cdf(x, w, q, batch, squash_nans)
        return lax.reshape(res, out_shape)
    s = lax.sort(x, dimension=len(batch))
    # NaNs (sorted last) are never picked but from a slice whose result is NaN anyway: zero them so that
    # no NaN reaches the interpolation weights' gradient (d/dq)
    s = lax.select(lax.isnan(s), 0.0, s)
    qb = lax.reshape(q, q.shape + (1,) * len(batch))            # (q..., 1...)
    if squash_nans:
        counts = lax.convert_element_type(lax.reduce_sum(lax.convert_element_type(lax.logical_not(isnan), np.int32),
                                                         (len(batch),)), a.dtype)
        top = lax.sub(counts, 1.0)                               # (batch...)
        nan_slice = lax.eq(counts, 0.0)
    else:
        top = lax.full(batch, float(n - 1), a.dtype)
        nan_slice = lax.reduce_or(isnan, (len(batch),))
    pos = lax.mul(qb, top)                                       # (q..., batch...)
    low = lax.floor(pos)
    high = lax.ceil(pos)
    high_w = lax.sub(pos, lax.stop_gradient(low))
    low_w = lax.sub(1.0, high_w)
    low = lax.clamp(0.0, lax.stop_gradient(low), lax.max(top, 0.0))
    high = lax.clamp(0.0, lax.stop_gradient(high), lax.max(top, 0.0))
    full = q.shape + batch

    def gather(idx: Any) -> Any:
        idx = lax.convert_element_type(idx, _dtypes.int_)
        index = tuple(lax.broadcasted_iota(_dtypes.int_, full, q.ndim + d) for d in _range(len(batch))) + (idx,)
        return lax.getitem(s, index)                             # (q..., batch...)

    lo_v, hi_v = gather(low), gather(high)
    if method == "linear":
        res = lax.add(lax.mul(lo_v, low_w), lax.mul(hi_v, high_w))
    elif method == "lower":
        res = lo_v
    elif method == "higher":
        res = hi_v
    elif method == "nearest":
        res = lax.select(lax.le(lax.stop_gradient(high_w), 0.5), lo_v, hi_v)
    else:
        res = lax.mul(lax.add(lo_v, hi_v), 0.5)
    res = lax.select(lax.broadcast_to(lax.reshape(nan_slice, (1,) * q.ndim + batch), res.shape), np.nan, res)
    return lax.reshape(res, out_shape)


def _quantile_weights(name: str, a: Any, weights: Any, axis: Any, axes: tuple, kept: tuple, shape: tuple) -> Any:
    """``weights`` laid out as the reshaped data (batch..., n): ``a``'s shape, or the reduced axes' shape."""
    if weights is None:
        return lax.full(shape, 1.0, a.dtype)
    (w,) = promote_inexact(arr(weights))
    w = lax.convert_element_type(w, a.dtype)
    if w.shape != a.shape:
        reduced = tuple(a.shape[i] for i in axes)
        if axis is None or w.shape != reduced:
            raise ValueError(f"{name}: weights {describe(w)} must have the shape of a {describe(a)}"
                             + ("" if axis is None else f" or of its reduced axes {reduced}"))
        full_shape = tuple(1 if i in kept else a.shape[i] for i in _range(a.ndim))
        w = lax.broadcast_to(lax.reshape(w, full_shape), a.shape)
    return lax.reshape(lax.transpose(w, kept + axes), shape)


def _inverted_cdf(x: Any, w: Any, q: Any, batch: tuple, squash_nans: bool) -> Any:
    """The smallest value whose weighted CDF reaches ``q`` (numpy's ``inverted_cdf``); NaN for a slice with
    a negative or NaN weight (or NaN data, unless squashed)."""
    last = len(batch)
    s, ws = lax.sort((x, w), dimension=last, num_keys=1)
    nan_data = lax.isnan(s)
    bad = lax.logical_or(lax.lt(ws, 0.0), lax.isnan(ws))
    clean = lax.select(lax.logical_or(bad, nan_data), 0.0, ws)
    cum = _R.cumsum(lax.stop_gradient(clean), axis=last)
    total = lax.slice_in_dim(cum, cum.shape[last] - 1, cum.shape[last], 1, last)          # (batch..., 1)
    qb = lax.reshape(lax.stop_gradient(q), q.shape + (1,) * (last + 1))
    target = lax.mul(qb, total)                                                            # (q..., batch..., 1)
    below = lax.lt(lax.broadcast_to(cum, q.shape + cum.shape), target)
    idx = lax.reduce_sum(lax.convert_element_type(below, _dtypes.int_), (q.ndim + last,))  # (q..., batch...)
    valid = lax.reduce_sum(lax.convert_element_type(lax.logical_not(nan_data), _dtypes.int_), (last,))
    idx = lax.clamp(0, idx, lax.broadcast_to(lax.max(lax.sub(valid, 1), 0), q.shape + batch))
    index = tuple(lax.broadcasted_iota(_dtypes.int_, q.shape + batch, q.ndim + d) for d in _range(last)) + (idx,)
    res = lax.getitem(s, index)
    force = lax.reduce_or(bad, (last,))
    force = lax.logical_or(force, lax.eq(valid, 0) if squash_nans else lax.reduce_or(nan_data, (last,)))
    return lax.select(lax.broadcast_to(force, res.shape), np.nan, res)


def quantile(a: ArrayLike, q: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None,
             overwrite_input: bool = False, method: str = "linear", keepdims: bool = False, *,
             weights: ArrayLike | None = None) -> Any:
    """The ``q``-th quantiles (``q`` in [0, 1], a scalar or 1-d) of ``a`` over ``axis``: shape
    ``q.shape + reduced shape``.  Methods: linear (default), lower, higher, midpoint, nearest
    (nearest picks the lower neighbour at exact halves, as JAX; numpy rounds to even), and
    inverted_cdf, the only one taking ``weights`` (``a``'s shape, or the reduced axes' shape).  A slice
    with a NaN gives NaN.  Differentiable in ``a`` (and in ``q`` for linear and midpoint).

    >>> quantile(fnp.array([1.0, 2.0, 3.0, 4.0]), 0.25)
    Array(1.75, dtype=float32)
    """
    return _quantile("quantile", a, q, axis, out, method, keepdims, weights, False, overwrite_input)


def nanquantile(a: ArrayLike, q: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None,
                overwrite_input: bool = False, method: str = "linear", keepdims: bool = False, *,
                weights: ArrayLike | None = None) -> Any:
    """:func:`quantile` ignoring NaNs (an all-NaN slice gives NaN); NaN entries get a zero gradient.

    >>> nanquantile(fnp.array([1.0, fnp.nan, 3.0]), 0.5)
    Array(2., dtype=float32)
    """
    return _quantile("nanquantile", a, q, axis, out, method, keepdims, weights, True, overwrite_input)


def _percent(q: Any) -> Any:
    if type(q) in (int, float):   # stays a weakly typed Python number
        return float(q) / 100.0
    (q,) = promote_inexact(arr(q))
    return lax.div(q, 100.0)


def _check_percent(name: str, q: Any) -> None:
    if not isinstance(q, Tracer):
        qv = host_numpy(q)
        if np.any((qv < 0) | (qv > 100)):
            raise ValueError(f"{name}: percentiles must be in the range [0, 100], got {qv.tolist()!r:.60}")


def percentile(a: ArrayLike, q: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None,
               overwrite_input: bool = False, method: str = "linear", keepdims: bool = False, *,
               weights: ArrayLike | None = None, out_sharding: Any = None) -> Any:
    """:func:`quantile` with ``q`` in percent ([0, 100]).

    >>> percentile(fnp.array([1.0, 2.0, 3.0, 4.0]), 50)
    Array(2.5, dtype=float32)
    """
    if out_sharding is not None:
        raise NotImplementedError("percentile: out_sharding is not supported (funcgrad runs on one device)")
    _check_percent("percentile", q)
    return _quantile("percentile", a, _percent(q), axis, out, method, keepdims, weights, False, overwrite_input)


def nanpercentile(a: ArrayLike, q: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None,
                  overwrite_input: bool = False, method: str = "linear", keepdims: bool = False, *,
                  weights: ArrayLike | None = None) -> Any:
    """:func:`percentile` ignoring NaNs.

    >>> nanpercentile(fnp.array([1.0, fnp.nan, 3.0]), 50)
    Array(2., dtype=float32)
    """
    _check_percent("nanpercentile", q)
    return _quantile("nanpercentile", a, _percent(q), axis, out, method, keepdims, weights, True,
                     overwrite_input)


def median(a: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Array:
    """The median over ``axis`` (the mean of the two middle values for an even count); NaN if a slice has
    a NaN.  Differentiable.

    >>> median(fnp.array([[1.0, 3.0], [2.0, 5.0]]), axis=0)
    Array([1.5, 4. ], dtype=float32)
    """
    return _quantile("median", a, 0.5, axis, out, "linear", keepdims, None, False, overwrite_input)


def nanmedian(a: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None, overwrite_input: bool = False,
              keepdims: bool = False) -> Array:
    """:func:`median` ignoring NaNs.

    >>> nanmedian(fnp.array([1.0, fnp.nan, 4.0]))
    Array(2.5, dtype=float32)
    """
    return _quantile("nanmedian", a, 0.5, axis, out, "linear", keepdims, None, True, overwrite_input)


# ------------------------------------------------------------------ NaN-ignoring reductions


def _fill(a: Any, value: float) -> Any:
    """``a`` with NaNs replaced by ``value`` (no gradient to the NaN entries)."""
    return lax.select(lax.isnan(a), value, a) if _dtypes.kind(a.dtype) == "f" else a


def _where(name: str, a: Any, where: Any, value: Any) -> Any:
    if where is None:
        return a
    where = arr(where)
    if where.dtype.kind != "b":
        raise TypeError(f"{name}: where must be a bool array, got {describe(where)}")
    return lax.select(lax.broadcast_to(where, a.shape) if where.shape != a.shape else where, a,
                      lax.full(a.shape, value, a.dtype))


def _axes(name: str, a: Any, axis: Any) -> None:
    """Check ``axis`` for ``a`` (so that a bad one is reported under ``name``, not an inner reduction's)."""
    x = arr(a)
    normalize_axes(name, axis, x.ndim, x)


def _dtype_arg(a: Any, dtype: Any) -> Any:
    return a if dtype is None else lax.convert_element_type(a, dtype)


def _inexact_in(a: Any, dtype: Any) -> Any:
    """``a`` as floats to compute a NaN-aware mean or variance in: ``dtype`` if it is a float type (an
    integer ``dtype`` would lose the NaNs: the result is cast to it instead, by :func:`_cast_out`)."""
    a = arr(a)
    if dtype is not None and _dtypes.kind(np.dtype(dtype)) == "f":
        a = lax.convert_element_type(a, dtype)
    (a,) = promote_inexact(a)
    return a


def _cast_out(res: Any, dtype: Any) -> Any:
    return res if dtype is None or _dtypes.kind(np.dtype(dtype)) == "f" else lax.convert_element_type(res, dtype)


def nansum(a: ArrayLike, axis: int | Sequence[int] | None = None, dtype: DTypeLike | None = None, out: None = None,
           keepdims: bool = False, initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Array:
    """The sum over ``axis`` treating NaNs as 0 (``where``: only where True; ``initial`` is added).

    >>> nansum(fnp.array([1.0, fnp.nan, 2.0]))
    Array(3., dtype=float32)
    """
    _no_out("nansum", out)
    _axes("nansum", a, axis)
    a = _where("nansum", _dtype_arg(_fill(arr(a), 0.0), dtype), where, 0)   # NaNs out before any cast
    res = _R.sum(a, axis=axis, keepdims=keepdims)
    return res if initial is None else lax.add(res, lax.convert_element_type(arr(initial), res.dtype))


def nanprod(a: ArrayLike, axis: int | Sequence[int] | None = None, dtype: DTypeLike | None = None, out: None = None,
            keepdims: bool = False, initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Array:
    """The product over ``axis`` treating NaNs as 1.

    >>> nanprod(fnp.array([2.0, fnp.nan, 3.0]))
    Array(6., dtype=float32)
    """
    _no_out("nanprod", out)
    _axes("nanprod", a, axis)
    a = _where("nanprod", _dtype_arg(_fill(arr(a), 1.0), dtype), where, 1)
    res = _R.prod(a, axis=axis, keepdims=keepdims)
    return res if initial is None else lax.mul(res, lax.convert_element_type(arr(initial), res.dtype))


def _valid_count(a: Any, axis: Any, keepdims: bool, where: Any, dtype: Any) -> Any:
    valid = lax.logical_not(lax.isnan(a)) if _dtypes.kind(a.dtype) == "f" else lax.full(a.shape, True, np.bool_)
    if where is not None:
        valid = lax.logical_and(valid, lax.broadcast_to(arr(where), a.shape))
    count = _R.sum(lax.convert_element_type(valid, np.int32), axis=axis, keepdims=keepdims)
    return lax.convert_element_type(count, dtype)


def nanmean(a: ArrayLike, axis: int | Sequence[int] | None = None, dtype: DTypeLike | None = None, out: None = None,
            keepdims: bool = False, where: ArrayLike | None = None) -> Array:
    """The mean over ``axis`` of the non-NaN entries (NaN where there are none).

    >>> nanmean(fnp.array([[1.0, fnp.nan], [3.0, 4.0]]), axis=1)
    Array([1. , 3.5], dtype=float32)
    """
    _no_out("nanmean", out)
    _axes("nanmean", a, axis)
    a = _inexact_in(a, dtype)
    total = _R.sum(_where("nanmean", _fill(a, 0.0), where, 0), axis=axis, keepdims=keepdims)
    count = _valid_count(a, axis, keepdims, where, a.dtype)
    none = lax.eq(count, 0.0)
    return _cast_out(lax.select(none, np.nan, lax.div(total, lax.select(none, 1.0, count))), dtype)


def nanvar(a: ArrayLike, axis: int | Sequence[int] | None = None, dtype: DTypeLike | None = None, out: None = None,
           ddof: int = 0, keepdims: bool = False, where: ArrayLike | None = None, mean: Any = None) -> Array:
    """The variance over ``axis`` of the non-NaN entries, divided by ``count - ddof`` (NaN if that is
    <= 0).  ``mean``: a precomputed mean (with ``keepdims=True`` shape).

    >>> nanvar(fnp.array([1.0, fnp.nan, 3.0]))
    Array(1., dtype=float32)
    """
    _no_out("nanvar", out)
    _axes("nanvar", a, axis)
    a = _inexact_in(a, dtype)
    if mean is None:
        mean = nanmean(a, axis, keepdims=True, where=where)
    else:
        (mean,) = promote_inexact(arr(mean))
    centered = _fill(lax.sub(a, mean), 0.0)
    centered = lax.select(lax.isnan(a), 0.0, centered)
    sq = _where("nanvar", lax.mul(centered, centered), where, 0)
    total = _R.sum(sq, axis=axis, keepdims=keepdims)
    norm = lax.sub(_valid_count(a, axis, keepdims, where, a.dtype), float(ddof))
    bad = lax.le(norm, 0.0)
    return _cast_out(lax.select(bad, np.nan, lax.div(total, lax.select(bad, 1.0, norm))), dtype)


def nanstd(a: ArrayLike, axis: int | Sequence[int] | None = None, dtype: DTypeLike | None = None, out: None = None,
           ddof: int = 0, keepdims: bool = False, where: ArrayLike | None = None, mean: Any = None) -> Array:
    """The square root of :func:`nanvar`.

    >>> nanstd(fnp.array([1.0, fnp.nan, 3.0]))
    Array(1., dtype=float32)
    """
    var = nanvar(a, axis, None if dtype is None or _dtypes.kind(np.dtype(dtype)) != "f" else dtype, out, ddof, keepdims,
                 where, mean)
    return _cast_out(lax.sqrt(var), dtype)


def _nan_extreme(name: str, red: Any, fill: float, a: Any, axis: Any, out: Any, keepdims: bool, initial: Any,
                 where: Any) -> Any:
    _no_out(name, out)
    a = arr(a)
    _axes(name, a, axis)
    if _dtypes.kind(a.dtype) != "f":
        if where is not None and initial is None:
            raise ValueError(f"{name}: where= needs initial= for a non-float array (an empty selection has no "
                             "value)")
        fill_value = (np.iinfo(a.dtype).min if fill < 0 else np.iinfo(a.dtype).max) if a.dtype.kind in "iu" \
            else bool(fill > 0)
        x = _where(name, a, where, fill_value)
        res = red(x, axis=axis, keepdims=keepdims)
    else:
        x = _where(name, _fill(a, fill), where, fill)
        res = red(x, axis=axis, keepdims=keepdims)
        if initial is None:
            some = _R.max(lax.convert_element_type(lax.logical_not(lax.isnan(a)), np.int32), axis=axis,
                          keepdims=keepdims)
            allnan = lax.eq(some, 0)
            res = lax.select(allnan, np.nan, res)
    if initial is not None:
        init = lax.convert_element_type(arr(initial), res.dtype)
        res = lax.max(res, init) if fill < 0 else lax.min(res, init)
    return res


def nanmax(a: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None, keepdims: bool = False,
           initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Array:
    """The maximum over ``axis`` ignoring NaNs (NaN for an all-NaN slice, as JAX; numpy also warns).

    >>> nanmax(fnp.array([1.0, fnp.nan, 3.0]))
    Array(3., dtype=float32)
    """
    return _nan_extreme("nanmax", _R.max, -np.inf, a, axis, out, keepdims, initial, where)


def nanmin(a: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None, keepdims: bool = False,
           initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Array:
    """The minimum over ``axis`` ignoring NaNs (NaN for an all-NaN slice).

    >>> nanmin(fnp.array([1.0, fnp.nan, 3.0]))
    Array(1., dtype=float32)
    """
    return _nan_extreme("nanmin", _R.min, np.inf, a, axis, out, keepdims, initial, where)


def _nanarg(name: str, red: Any, fill: float, a: Any, axis: Any, out: Any, keepdims: Any) -> Any:
    _no_out(name, out)
    a = arr(a)
    if axis is not None:
        normalize_axis(name, axis, a.ndim, a)
    keepdims = bool(keepdims)
    if _dtypes.kind(a.dtype) != "f":
        return red(a, axis=axis, keepdims=keepdims)
    nan = lax.isnan(a)
    res = red(lax.select(nan, fill, a), axis=axis, keepdims=keepdims)
    if axis is None:
        allnan = lax.reduce_and(lax.reshape(nan, (a.size,)), (0,))
        if keepdims:
            allnan = lax.reshape(allnan, (1,) * a.ndim)
    else:
        ax = normalize_axis(name, axis, a.ndim, a)
        allnan = lax.reduce_and(nan, (ax,))
        if keepdims:
            allnan = lax.reshape(allnan, keepdims_shape(a.shape, (ax,)))
    return lax.select(allnan, lax.full(res.shape, -1, res.dtype), res)


def nanargmax(a: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None, keepdims: Any = None) -> Array:
    """The index of the maximum ignoring NaNs; -1 for an all-NaN slice (as JAX; numpy raises).

    >>> nanargmax(fnp.array([1.0, fnp.nan, 3.0]))
    Array(2, dtype=int32)
    """
    return _nanarg("nanargmax", _R.argmax, -np.inf, a, axis, out, keepdims)


def nanargmin(a: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None, keepdims: Any = None) -> Array:
    """The index of the minimum ignoring NaNs; -1 for an all-NaN slice.

    >>> nanargmin(fnp.array([1.0, fnp.nan, 3.0]))
    Array(0, dtype=int32)
    """
    return _nanarg("nanargmin", _R.argmin, np.inf, a, axis, out, keepdims)


# ------------------------------------------------------------------ averages, spread, covariance


def average(a: ArrayLike, axis: int | Sequence[int] | None = None, weights: ArrayLike | None = None,
            returned: bool = False, keepdims: bool = False) -> Any:
    """The (``weights``-weighted) mean over ``axis``; with ``returned`` also the sum of the weights.
    ``weights``: ``a``'s shape, or 1-d along a single ``axis``.

    >>> average(fnp.array([1.0, 2.0, 4.0]), weights=fnp.array([1.0, 1.0, 2.0]))
    Array(2.75, dtype=float32)
    """
    (a,) = promote_inexact(arr(a))
    axes = normalize_axes("average", axis, a.ndim, a)
    if weights is None:
        avg = _R.mean(a, axis=axes, keepdims=keepdims)
        count = float(np.prod([a.shape[i] for i in axes], dtype=np.int64))
        scl = lax.full(avg.shape, count, avg.dtype)
    else:
        a, w = promote_inexact(a, arr(weights))
        if w.shape != a.shape:
            if axis is None or isinstance(axis, (tuple, list)):
                raise ValueError(f"average: weights {describe(w)} differ in shape from a {describe(a)}: give axis= "
                                 "(one int) when weights are 1-d")
            if w.ndim != 1 or w.shape[0] != a.shape[axes[0]]:
                raise ValueError(f"average: 1-d weights {describe(w)} must have the length of axis {axes[0]} of "
                                 f"a {describe(a)}")
            shape = [1] * a.ndim
            shape[axes[0]] = w.shape[0]
            w = lax.broadcast_to(lax.reshape(w, tuple(shape)), a.shape)
        scl = _R.sum(w, axis=axes, keepdims=keepdims)
        avg = lax.div(_R.sum(lax.mul(a, w), axis=axes, keepdims=keepdims), scl)
    if returned:
        return avg, lax.broadcast_to(scl, avg.shape) if scl.shape != avg.shape else scl
    return avg


def ptp(a: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None, keepdims: bool = False) -> Array:
    """The range ``max - min`` over ``axis``.

    >>> ptp(fnp.array([[1.0, 5.0], [2.0, 3.0]]), axis=1)
    Array([4., 1.], dtype=float32)
    """
    _no_out("ptp", out)
    a = arr(a)
    _axes("ptp", a, axis)
    return lax.sub(_R.max(a, axis=axis, keepdims=keepdims), _R.min(a, axis=axis, keepdims=keepdims))


def count_nonzero(a: ArrayLike, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:
    """The number of nonzero (True) entries over ``axis`` (default int).

    >>> count_nonzero(fnp.array([[0, 1], [2, 3]]), axis=0)
    Array([1, 2], dtype=int32)
    """
    a = arr(a)
    _axes("count_nonzero", a, axis)
    nz = lax.ne(a, False if a.dtype.kind == "b" else 0)
    return _R.sum(lax.convert_element_type(nz, _dtypes.int_), axis=axis, keepdims=keepdims)


def _rows(name: str, m: Any, rowvar: bool) -> Any:
    if m.ndim > 2:
        raise ValueError(f"{name}: m must have at most 2 dimensions, got {describe(m)}")
    x = lax.reshape(m, (1,) * (2 - m.ndim) + m.shape)
    if not rowvar and x.shape[0] != 1:
        x = lax.transpose(x, (1, 0))
    return x


def cov(m: ArrayLike, y: ArrayLike | None = None, rowvar: bool = True, bias: bool = False, ddof: int | None = None,
        fweights: Any = None, aweights: Any = None, dtype: DTypeLike | None = None) -> Array:
    """The covariance matrix of the variables in the rows of ``m`` (columns unless ``rowvar``), with
    ``y``'s variables appended; normalized by ``N - 1`` (``N`` with ``bias``, ``N - ddof`` given ``ddof``).
    ``fweights`` (integer repeat counts) and ``aweights`` (observation weights) as numpy.  A single
    variable gives a 0-d result.

    >>> cov(fnp.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    Array([[ 1., -1.],
           [-1.,  1.]], dtype=float32)
    """
    m = arr(m)
    if dtype is not None:
        m = lax.convert_element_type(m, dtype)
    (m,) = promote_inexact(m)
    x = _rows("cov", m, rowvar)
    if y is not None:
        yy = arr(y)
        if dtype is not None:
            yy = lax.convert_element_type(yy, dtype)
        x, yy = promote_inexact(x, yy)
        x = lax.concatenate([x, _rows("cov", yy, rowvar)], 0)
    if ddof is None:
        ddof = 0 if bias else 1
    n = x.shape[1]
    w = None
    if fweights is not None:
        fw = arr(fweights)
        if fw.dtype.kind not in "iub":
            raise TypeError(f"cov: fweights must be integer (repeat counts), got {describe(fw)}")
        if fw.ndim != 1 or fw.shape[0] != n:
            raise ValueError(f"cov: fweights {describe(fw)} must be 1-d with one weight per observation ({n})")
        w = lax.convert_element_type(fw, x.dtype)
    if aweights is not None:
        aw = arr(aweights)
        if aw.ndim != 1 or aw.shape[0] != n:
            raise ValueError(f"cov: aweights {describe(aw)} must be 1-d with one weight per observation ({n})")
        aw = lax.convert_element_type(aw, x.dtype)
        w = aw if w is None else lax.mul(w, aw)
    if w is None:
        avg = _R.mean(x, axis=1, keepdims=True)
        fact = float(n - ddof)
    else:
        w_sum = lax.reduce_sum(w, (0,))
        avg = lax.div(lax.reduce_sum(lax.mul(x, w), (1,)), w_sum)[:, None]
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = lax.sub(w_sum, float(ddof))
        else:
            fact = lax.sub(w_sum, lax.div(lax.mul(float(ddof), lax.reduce_sum(lax.mul(w, aw), (0,))), w_sum))
    xc = lax.sub(x, avg)
    xw = xc if w is None else lax.mul(xc, w)
    c = lax.div(lax.einsum("ik,jk->ij", xc, xw), fact)
    return lax.reshape(c, ()) if c.shape == (1, 1) else c


def corrcoef(x: ArrayLike, y: ArrayLike | None = None, rowvar: bool = True, dtype: DTypeLike | None = None) -> Array:
    """The correlation coefficients of the variables (rows of ``x``, unless ``rowvar=False``), clipped to
    [-1, 1].  A single variable gives ``c / c`` (1, or NaN for a constant).

    >>> corrcoef(fnp.array([1.0, 2.0, 4.0]), fnp.array([1.0, 0.0, 3.0]))
    Array([[1.       , 0.7857],
           [0.7857, 1.       ]], dtype=float32)
    """
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return lax.div(c, c)
    idx = np.arange(c.shape[0])
    d = lax.sqrt(lax.getitem(c, (idx, idx)))
    c = lax.div(lax.div(c, d[:, None]), d[None, :])
    return lax.clamp(-1.0, c, 1.0)

