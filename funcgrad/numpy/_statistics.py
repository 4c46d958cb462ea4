"""funcgrad.numpy: order statistics (median, quantiles), NaN-ignoring reductions, weighted averages,
covariance, cumulative products, differences and integrals (JAX's semantics).

All are written on lax, so grad (any order), vmap and jit apply.  The NaN-ignoring reductions give a
zero gradient at the NaN entries, as JAX.

>>> import funcgrad.numpy as fnp
>>> fnp.median(fnp.array([3.0, 1.0, 2.0, 10.0]))      # 2.5
>>> fnp.nanmean(fnp.array([1.0, fnp.nan, 3.0]))       # 2.0
"""
from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array, Tracer
from funcgrad._dtypes import describe
from funcgrad import lax
from funcgrad.numpy._base import arr, index_arg, keepdims_shape, normalize_axes, normalize_axis, promote, \
    promote_inexact
from funcgrad.numpy import _reductions as _R

__all__ = ["average", "corrcoef", "count_nonzero", "cov", "cumprod", "cumulative_prod", "cumulative_sum", "diff",
           "ediff1d", "gradient", "interp", "median", "nanargmax", "nanargmin", "nancumprod", "nancumsum", "nanmax",
           "nanmean", "nanmedian", "nanmin", "nanpercentile", "nanprod", "nanquantile", "nanstd", "nansum", "nanvar",
           "percentile", "ptp", "quantile", "trapezoid", "unwrap"]

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
              squash_nans: bool) -> Any:
    _no_out(name, out)
    if method not in _QMETHODS + ("inverted_cdf",):
        raise ValueError(f"{name}: method must be one of {_QMETHODS + ('inverted_cdf',)}, got {method!r}")
    if weights is not None and method != "inverted_cdf":
        raise NotImplementedError(f"{name}: method {method!r} does not support weights; only method='inverted_cdf' "
                                  "does (as in JAX and numpy)")
    a, q = promote_inexact(arr(a), arr(q))
    if q.ndim > 1:
        raise ValueError(f"{name}: q must have rank <= 1, got {describe(q)}")
    if not isinstance(q, Tracer):
        qv = np.asarray(q)
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
    qb = lax.reshape(q, q.shape + (1,) * len(batch))            # (q..., 1...)
    if squash_nans:
        counts = lax.convert_element_type(lax.reduce_sum(lax.convert_element_type(lax.logical_not(isnan), np.int32),
                                                         (len(batch),)), a.dtype)
        top = lax.sub(counts, 1.0)                               # (batch...)
    else:
        top = lax.full(batch, float(n - 1), a.dtype)
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
    if squash_nans:
        res = lax.select(lax.eq(lax.reshape(counts, (1,) * q.ndim + batch), 0.0), np.nan, res)
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
    cum = _R.cumsum(lax.stop_gradient(clean), last)
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


def quantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, *, weights: Any = None) -> Any:
    """The ``q``-th quantiles (``q`` in [0, 1], a scalar or 1-d) of ``a`` over ``axis``: shape
    ``q.shape + reduced shape``.  Methods: linear (default), lower, higher, midpoint, nearest
    (nearest picks the lower neighbour at exact halves, as JAX; numpy rounds to even), and
    inverted_cdf, the only one taking ``weights`` (``a``'s shape, or the reduced axes' shape).  A slice
    with a NaN gives NaN.  Differentiable in ``a`` (and in ``q`` for linear and midpoint).

    >>> quantile(fnp.array([1.0, 2.0, 3.0, 4.0]), 0.25)    # 1.75
    """
    return _quantile("quantile", a, q, axis, out, method, keepdims, weights, False)


def nanquantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
                method: str = "linear", keepdims: bool = False, *, weights: Any = None) -> Any:
    """:func:`quantile` ignoring NaNs (an all-NaN slice gives NaN); NaN entries get a zero gradient.

    >>> nanquantile(fnp.array([1.0, fnp.nan, 3.0]), 0.5)    # 2.0
    """
    return _quantile("nanquantile", a, q, axis, out, method, keepdims, weights, True)


def _percent(q: Any) -> Any:
    (q,) = promote_inexact(arr(q))
    return lax.div(q, 100.0)


def _check_percent(name: str, q: Any) -> None:
    if not isinstance(q, Tracer):
        qv = np.asarray(q)
        if np.any((qv < 0) | (qv > 100)):
            raise ValueError(f"{name}: percentiles must be in the range [0, 100], got {qv.tolist()!r:.60}")


def percentile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
               method: str = "linear", keepdims: bool = False, *, weights: Any = None,
               out_sharding: Any = None) -> Any:
    """:func:`quantile` with ``q`` in percent ([0, 100]).

    >>> percentile(fnp.array([1.0, 2.0, 3.0, 4.0]), 50)    # 2.5
    """
    if out_sharding is not None:
        raise NotImplementedError("percentile: out_sharding is not supported (funcgrad runs on one device)")
    _check_percent("percentile", q)
    return _quantile("percentile", a, _percent(q), axis, out, method, keepdims, weights, False)


def nanpercentile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
                  method: str = "linear", keepdims: bool = False, *, weights: Any = None) -> Any:
    """:func:`percentile` ignoring NaNs.

    >>> nanpercentile(fnp.array([1.0, fnp.nan, 3.0]), 50)    # 2.0
    """
    _check_percent("nanpercentile", q)
    return _quantile("nanpercentile", a, _percent(q), axis, out, method, keepdims, weights, True)


def median(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False, keepdims: bool = False) -> Any:
    """The median over ``axis`` (the mean of the two middle values for an even count); NaN if a slice has
    a NaN.  Differentiable.

    >>> median(fnp.array([[1.0, 3.0], [2.0, 5.0]]), axis=0)    # [1.5, 4.]
    """
    return _quantile("median", a, 0.5, axis, out, "linear", keepdims, None, False)


def nanmedian(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
              keepdims: bool = False) -> Any:
    """:func:`median` ignoring NaNs.

    >>> nanmedian(fnp.array([1.0, fnp.nan, 4.0]))    # 2.5
    """
    return _quantile("nanmedian", a, 0.5, axis, out, "linear", keepdims, None, True)


# ------------------------------------------------------------------ NaN-ignoring reductions


def _fill(a: Any, value: float) -> Any:
    """``a`` with NaNs replaced by ``value`` (no gradient to the NaN entries)."""
    return lax.select(lax.isnan(a), value, a) if a.dtype.kind == "f" else a


def _where(name: str, a: Any, where: Any, value: Any) -> Any:
    if where is None:
        return a
    where = arr(where)
    if where.dtype.kind != "b":
        raise TypeError(f"{name}: where must be a bool array, got {describe(where)}")
    return lax.select(lax.broadcast_to(where, a.shape) if where.shape != a.shape else where, a,
                      lax.full(a.shape, value, a.dtype))


def _dtype_arg(a: Any, dtype: Any) -> Any:
    return a if dtype is None else lax.convert_element_type(a, dtype)


def nansum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> Any:
    """The sum over ``axis`` treating NaNs as 0 (``where``: only where True; ``initial`` is added).

    >>> nansum(fnp.array([1.0, fnp.nan, 2.0]))    # 3.0
    """
    _no_out("nansum", out)
    a = _where("nansum", _fill(_dtype_arg(arr(a), dtype), 0.0), where, 0)
    res = _R.sum(a, axis, keepdims)
    return res if initial is None else lax.add(res, lax.convert_element_type(arr(initial), res.dtype))


def nanprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            initial: Any = None, where: Any = None) -> Any:
    """The product over ``axis`` treating NaNs as 1.

    >>> nanprod(fnp.array([2.0, fnp.nan, 3.0]))    # 6.0
    """
    _no_out("nanprod", out)
    a = _where("nanprod", _fill(_dtype_arg(arr(a), dtype), 1.0), where, 1)
    res = _R.prod(a, axis, keepdims)
    return res if initial is None else lax.mul(res, lax.convert_element_type(arr(initial), res.dtype))


def _valid_count(a: Any, axis: Any, keepdims: bool, where: Any, dtype: Any) -> Any:
    valid = lax.logical_not(lax.isnan(a)) if a.dtype.kind == "f" else lax.full(a.shape, True, np.bool_)
    if where is not None:
        valid = lax.logical_and(valid, lax.broadcast_to(arr(where), a.shape))
    return lax.convert_element_type(_R.sum(lax.convert_element_type(valid, np.int32), axis, keepdims), dtype)


def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            where: Any = None) -> Any:
    """The mean over ``axis`` of the non-NaN entries (NaN where there are none).

    >>> nanmean(fnp.array([[1.0, fnp.nan], [3.0, 4.0]]), axis=1)    # [1., 3.5]
    """
    _no_out("nanmean", out)
    a = _dtype_arg(arr(a), dtype)
    (a,) = promote_inexact(a)
    total = _R.sum(_where("nanmean", _fill(a, 0.0), where, 0), axis, keepdims)
    count = _valid_count(a, axis, keepdims, where, a.dtype)
    none = lax.eq(count, 0.0)
    return lax.select(none, np.nan, lax.div(total, lax.select(none, 1.0, count)))


def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False,
           where: Any = None, mean: Any = None) -> Any:
    """The variance over ``axis`` of the non-NaN entries, divided by ``count - ddof`` (NaN if that is
    <= 0).  ``mean``: a precomputed mean (with ``keepdims=True`` shape).

    >>> nanvar(fnp.array([1.0, fnp.nan, 3.0]))    # 1.0
    """
    _no_out("nanvar", out)
    a = _dtype_arg(arr(a), dtype)
    (a,) = promote_inexact(a)
    if mean is None:
        mean = nanmean(a, axis, keepdims=True, where=where)
    else:
        (mean,) = promote_inexact(arr(mean))
    centered = _fill(lax.sub(a, mean), 0.0)
    centered = lax.select(lax.isnan(a), 0.0, centered)
    sq = _where("nanvar", lax.mul(centered, centered), where, 0)
    total = _R.sum(sq, axis, keepdims)
    norm = lax.sub(_valid_count(a, axis, keepdims, where, a.dtype), float(ddof))
    bad = lax.le(norm, 0.0)
    return lax.select(bad, np.nan, lax.div(total, lax.select(bad, 1.0, norm)))


def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False,
           where: Any = None, mean: Any = None) -> Any:
    """The square root of :func:`nanvar`.

    >>> nanstd(fnp.array([1.0, fnp.nan, 3.0]))    # 1.0
    """
    return lax.sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where, mean))


def _nan_extreme(name: str, red: Any, fill: float, a: Any, axis: Any, out: Any, keepdims: bool, initial: Any,
                 where: Any) -> Any:
    _no_out(name, out)
    a = arr(a)
    if a.dtype.kind != "f":
        if where is not None and initial is None:
            raise ValueError(f"{name}: where= needs initial= for a non-float array (an empty selection has no "
                             "value)")
        fill_value = (np.iinfo(a.dtype).min if fill < 0 else np.iinfo(a.dtype).max) if a.dtype.kind in "iu" \
            else bool(fill > 0)
        x = _where(name, a, where, fill_value)
        res = red(x, axis, keepdims)
    else:
        x = _where(name, _fill(a, fill), where, fill)
        res = red(x, axis, keepdims)
        if initial is None:
            allnan = lax.logical_not(lax.convert_element_type(
                _R.max(lax.convert_element_type(lax.logical_not(lax.isnan(a)), np.int32), axis, keepdims), np.bool_))
            res = lax.select(allnan, np.nan, res)
    if initial is not None:
        init = lax.convert_element_type(arr(initial), res.dtype)
        res = lax.max(res, init) if fill < 0 else lax.min(res, init)
    return res


def nanmax(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, initial: Any = None,
           where: Any = None) -> Any:
    """The maximum over ``axis`` ignoring NaNs (NaN for an all-NaN slice, as JAX; numpy also warns).

    >>> nanmax(fnp.array([1.0, fnp.nan, 3.0]))    # 3.0
    """
    return _nan_extreme("nanmax", _R.max, -np.inf, a, axis, out, keepdims, initial, where)


def nanmin(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, initial: Any = None,
           where: Any = None) -> Any:
    """The minimum over ``axis`` ignoring NaNs (NaN for an all-NaN slice).

    >>> nanmin(fnp.array([1.0, fnp.nan, 3.0]))    # 1.0
    """
    return _nan_extreme("nanmin", _R.min, np.inf, a, axis, out, keepdims, initial, where)


def _nanarg(name: str, red: Any, fill: float, a: Any, axis: Any, out: Any, keepdims: Any) -> Any:
    _no_out(name, out)
    a = arr(a)
    keepdims = bool(keepdims)
    if a.dtype.kind != "f":
        return red(a, axis, keepdims)
    nan = lax.isnan(a)
    res = red(lax.select(nan, fill, a), axis, keepdims)
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


def nanargmax(a: Any, axis: Any = None, out: Any = None, keepdims: Any = None) -> Any:
    """The index of the maximum ignoring NaNs; -1 for an all-NaN slice (as JAX; numpy raises).

    >>> nanargmax(fnp.array([1.0, fnp.nan, 3.0]))    # 2
    """
    return _nanarg("nanargmax", _R.argmax, -np.inf, a, axis, out, keepdims)


def nanargmin(a: Any, axis: Any = None, out: Any = None, keepdims: Any = None) -> Any:
    """The index of the minimum ignoring NaNs; -1 for an all-NaN slice.

    >>> nanargmin(fnp.array([1.0, fnp.nan, 3.0]))    # 0
    """
    return _nanarg("nanargmin", _R.argmin, np.inf, a, axis, out, keepdims)


# ------------------------------------------------------------------ cumulative


def _cum_dtype(a: Any, dtype: Any) -> Any:
    if dtype is not None:
        return lax.convert_element_type(a, dtype)
    if a.dtype.kind == "b":
        return lax.convert_element_type(a, _dtypes.int_)
    return a


def _cum_axis(name: str, a: Any, axis: Any) -> tuple[Any, int]:
    if axis is None or a.ndim == 0:
        a = lax.reshape(a, (a.size,))
        return a, 0 if axis is None else normalize_axis(name, axis, 1, a)
    return a, normalize_axis(name, axis, a.ndim, a)


def cumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """The running product along ``axis`` (None: over the flattened array).  Its gradient is exact
    with zeros in ``a`` (no division).

    >>> cumprod(fnp.array([1.0, 2.0, 0.0, 4.0]))    # [1., 2., 0., 0.]
    """
    _no_out("cumprod", out)
    a, axis = _cum_axis("cumprod", _cum_dtype(arr(a), dtype), axis)
    return lax.cumprod(a, axis) if a.size else a


def nancumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """The running sum treating NaNs as 0.

    >>> nancumsum(fnp.array([1.0, fnp.nan, 2.0]))    # [1., 1., 3.]
    """
    _no_out("nancumsum", out)
    a, axis = _cum_axis("nancumsum", _fill(_cum_dtype(arr(a), dtype), 0.0), axis)
    return _R.cumsum(a, axis)


def nancumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """The running product treating NaNs as 1.

    >>> nancumprod(fnp.array([2.0, fnp.nan, 3.0]))    # [2., 2., 6.]
    """
    return cumprod(_fill(arr(a), 1.0), axis, dtype, out)


def _cumulative(name: str, fn: Any, x: Any, axis: Any, dtype: Any, include_initial: bool, initial: float) -> Any:
    x = arr(x)
    if x.ndim == 0:
        raise ValueError(f"{name}: the input must be non-scalar (got a 0-d array)")
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"{name}: the input {describe(x)} has rank {x.ndim}, but axis was not given; axis is "
                             "optional only for 1-d arrays")
        axis = 0
    axis = normalize_axis(name, axis, x.ndim, x)
    out = fn(x, axis=axis, dtype=dtype)
    if include_initial:
        shape = list(out.shape)
        shape[axis] = 1
        out = lax.concatenate([lax.full(tuple(shape), initial, out.dtype), out], axis)
    return out


def cumulative_sum(x: Any, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Any:
    """The running sum along ``axis`` (needed unless ``x`` is 1-d), optionally starting with a 0.

    >>> cumulative_sum(fnp.array([1, 2, 3]), include_initial=True)    # [0, 1, 3, 6]
    """
    return _cumulative("cumulative_sum", _R.cumsum, x, axis, dtype, include_initial, 0)


def cumulative_prod(x: Any, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Any:
    """The running product along ``axis`` (needed unless ``x`` is 1-d), optionally starting with a 1.

    >>> cumulative_prod(fnp.array([1, 2, 3]), include_initial=True)    # [1, 1, 2, 6]
    """
    return _cumulative("cumulative_prod", cumprod, x, axis, dtype, include_initial, 1)


# ------------------------------------------------------------------ averages, spread, covariance


def average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False, keepdims: bool = False) -> Any:
    """The (``weights``-weighted) mean over ``axis``; with ``returned`` also the sum of the weights.
    ``weights``: ``a``'s shape, or 1-d along a single ``axis``.

    >>> average(fnp.array([1.0, 2.0, 4.0]), weights=fnp.array([1.0, 1.0, 2.0]))    # 2.75
    """
    (a,) = promote_inexact(arr(a))
    axes = normalize_axes("average", axis, a.ndim, a)
    if weights is None:
        avg = _R.mean(a, axes, keepdims)
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
        scl = _R.sum(w, axes, keepdims)
        avg = lax.div(_R.sum(lax.mul(a, w), axes, keepdims), scl)
    if returned:
        return avg, lax.broadcast_to(scl, avg.shape) if scl.shape != avg.shape else scl
    return avg


def ptp(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """The range ``max - min`` over ``axis``.

    >>> ptp(fnp.array([[1.0, 5.0], [2.0, 3.0]]), axis=1)    # [4., 1.]
    """
    _no_out("ptp", out)
    a = arr(a)
    return lax.sub(_R.max(a, axis, keepdims), _R.min(a, axis, keepdims))


def count_nonzero(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """The number of nonzero (True) entries over ``axis`` (default int).

    >>> count_nonzero(fnp.array([[0, 1], [2, 3]]), axis=0)    # [1, 2]
    """
    a = arr(a)
    nz = lax.ne(a, False if a.dtype.kind == "b" else 0)
    return _R.sum(lax.convert_element_type(nz, _dtypes.int_), axis, keepdims)


def _rows(name: str, m: Any, rowvar: bool) -> Any:
    if m.ndim > 2:
        raise ValueError(f"{name}: m must have at most 2 dimensions, got {describe(m)}")
    x = lax.reshape(m, (1,) * (2 - m.ndim) + m.shape)
    if not rowvar and x.shape[0] != 1:
        x = lax.transpose(x, (1, 0))
    return x


def cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: int | None = None,
        fweights: Any = None, aweights: Any = None, dtype: Any = None) -> Any:
    """The covariance matrix of the variables in the rows of ``m`` (columns unless ``rowvar``), with
    ``y``'s variables appended; normalized by ``N - 1`` (``N`` with ``bias``, ``N - ddof`` given ``ddof``).
    ``fweights`` (integer repeat counts) and ``aweights`` (observation weights) as numpy.  A single
    variable gives a 0-d result.

    >>> cov(fnp.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))    # [[1., -1.], [-1., 1.]]
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
        if fw.ndim > 1 or fw.shape[0] != n:
            raise ValueError(f"cov: fweights {describe(fw)} must be 1-d with one weight per observation ({n})")
        w = lax.convert_element_type(fw, x.dtype)
    if aweights is not None:
        aw = arr(aweights)
        if aw.ndim > 1 or aw.shape[0] != n:
            raise ValueError(f"cov: aweights {describe(aw)} must be 1-d with one weight per observation ({n})")
        aw = lax.convert_element_type(aw, x.dtype)
        w = aw if w is None else lax.mul(w, aw)
    if w is None:
        avg = _R.mean(x, 1, keepdims=True)
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


def corrcoef(x: Any, y: Any = None, rowvar: bool = True, dtype: Any = None) -> Any:
    """The correlation coefficients of the variables (rows of ``x``, unless ``rowvar=False``), clipped to
    [-1, 1].  A single variable gives ``c / c`` (1, or NaN for a constant).

    >>> corrcoef(fnp.array([1.0, 2.0, 4.0]), fnp.array([1.0, 0.0, 3.0]))    # 2x2
    """
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return lax.div(c, c)
    idx = np.arange(c.shape[0])
    d = lax.sqrt(lax.getitem(c, (idx, idx)))
    c = lax.div(lax.div(c, d[:, None]), d[None, :])
    return lax.clamp(-1.0, c, 1.0)


# ------------------------------------------------------------------ differences and integrals


def _append_along(name: str, a: Any, value: Any, axis: int) -> Any:
    v = arr(value)
    if v.ndim == 0:
        shape = list(a.shape)
        shape[axis] = 1
        v = lax.broadcast_to(v, tuple(shape))
    elif v.ndim != a.ndim or any(s != t for i, (s, t) in enumerate(zip(v.shape, a.shape)) if i != axis):
        raise ValueError(f"{name}: prepend/append {describe(v)} must be a scalar or match the array {describe(a)} "
                         f"on every axis but axis {axis}")
    return v


def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Any:
    """The ``n``-th discrete difference ``a[i+1] - a[i]`` along ``axis`` (``!=`` for bools), after adding
    ``prepend``/``append`` (scalars broadcast along the other axes).

    >>> diff(fnp.array([1.0, 4.0, 9.0, 16.0]), n=2)    # [2., 2.]
    """
    a = arr(a)
    n = index_arg("diff", "n", n)
    if n < 0:
        raise ValueError(f"diff: order n must be non-negative, got {n}")
    if a.ndim == 0:
        raise ValueError("diff: requires input that is at least one dimensional")
    axis = normalize_axis("diff", axis, a.ndim, a)
    if n == 0:
        return a
    parts = []
    if prepend is not None:
        parts.append(_append_along("diff", a, prepend, axis))
    parts.append(a)
    if append is not None:
        parts.append(_append_along("diff", a, append, axis))
    if len(parts) > 1:
        parts = promote(*parts)
        a = lax.concatenate(parts, axis)
    for _ in _range(n):
        size = a.shape[axis]
        hi = lax.slice_in_dim(a, 1, size, 1, axis)
        lo = lax.slice_in_dim(a, 0, _max(size - 1, 0), 1, axis)
        a = lax.ne(hi, lo) if a.dtype.kind == "b" else lax.sub(hi, lo)
    return a


def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Any:
    """The differences of the flattened ``ary``, with ``to_begin`` before and ``to_end`` after (cast to
    ``ary``'s dtype).

    >>> ediff1d(fnp.array([1, 4, 9]), to_begin=0)    # [0, 3, 5]
    """
    a = arr(ary)
    a = lax.reshape(a, (a.size,))
    out = diff(a) if a.size else a
    parts = []
    if to_begin is not None:
        b = lax.convert_element_type(arr(to_begin), a.dtype)
        parts.append(lax.reshape(b, (b.size,)))
    parts.append(out)
    if to_end is not None:
        e = lax.convert_element_type(arr(to_end), a.dtype)
        parts.append(lax.reshape(e, (e.size,)))
    return lax.concatenate(parts, 0) if len(parts) > 1 else out


def gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int | None = None) -> Any:
    """The gradient of sampled ``f`` by central differences inside and one-sided ones at the edges
    (``edge_order=1``), for each axis in ``axis``: a list of arrays, or one array for one axis.
    ``varargs``: one spacing for all axes, one per axis, or coordinate arrays (non-uniform spacing).

    >>> gradient(fnp.array([1.0, 4.0, 9.0, 16.0]))    # [3., 4., 6., 7.]
    """
    if edge_order is not None and edge_order != 1:
        raise NotImplementedError(f"gradient: edge_order={edge_order} is not supported (only 1, as JAX)")
    (f,) = promote_inexact(arr(f))
    axes = normalize_axes("gradient", axis, f.ndim, f, keep_order=True)
    if not varargs:
        spacing = [1.0] * len(axes)
    elif len(varargs) == 1:
        spacing = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacing = list(varargs)
    else:
        raise TypeError(f"gradient: {len(varargs)} spacings given for {len(axes)} axes: give one, or one per axis")
    if any(f.shape[ax] < 2 for ax in axes):
        raise ValueError(f"gradient: an array {describe(f)} is too small for a numerical gradient: each axis "
                         "needs at least 2 (edge_order + 1) elements")
    out = []
    for ax, h in zip(axes, spacing):
        n = f.shape[ax]

        def sl(x, lo, hi, ax=ax):
            return lax.slice_in_dim(x, lo, hi, 1, ax)
        upper = lax.sub(sl(f, 1, 2), sl(f, 0, 1))
        lower = lax.sub(sl(f, n - 1, n), sl(f, n - 2, n - 1))
        if np.ndim(h) == 0:
            (h,) = promote_inexact(h if isinstance(h, (int, float)) else arr(h))
            h = float(h) if isinstance(h, (int, float)) else lax.convert_element_type(h, f.dtype)
            inner = lax.div(lax.mul(lax.sub(sl(f, 2, n), sl(f, 0, n - 2)), 0.5), h)
            upper, lower = lax.div(upper, h), lax.div(lower, h)
        else:
            x = lax.convert_element_type(arr(h), f.dtype)
            if x.ndim != 1 or x.shape[0] != n:
                raise ValueError(f"gradient: coordinates {describe(x)} must be 1-d with the length of axis {ax} "
                                 f"({n})")
            dx = diff(x)
            shape = [1] * f.ndim
            shape[ax] = n - 1
            dx = lax.reshape(dx, tuple(shape))
            upper = lax.div(upper, sl(dx, 0, 1))
            lower = lax.div(lower, sl(dx, n - 2, n - 1))
            dx1, dx2 = sl(dx, 0, n - 2), sl(dx, 1, n - 1)
            ca = lax.div(lax.neg(dx2), lax.mul(dx1, lax.add(dx1, dx2)))
            cb = lax.div(lax.sub(dx2, dx1), lax.mul(dx1, dx2))
            cc = lax.div(dx1, lax.mul(dx2, lax.add(dx1, dx2)))
            inner = lax.add(lax.add(lax.mul(ca, sl(f, 0, n - 2)), lax.mul(cb, sl(f, 1, n - 1))),
                            lax.mul(cc, sl(f, 2, n)))
        out.append(lax.concatenate([upper, inner, lower], ax))
    return out[0] if len(out) == 1 else out


def trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Any:
    """The integral of ``y`` along ``axis`` by the trapezoidal rule, at sample points ``x`` (1-d, or
    ``y``'s shape) or spacing ``dx``.

    >>> trapezoid(fnp.array([1.0, 2.0, 4.0]))    # 4.5
    """
    (y,) = promote_inexact(arr(y))
    axis = normalize_axis("trapezoid", axis, y.ndim, y)
    y = lax.moveaxis(y, axis, y.ndim - 1)
    n = y.shape[-1]
    if x is not None:
        x = arr(x)
        if x.ndim == 1:
            if x.shape[0] != n:
                raise ValueError(f"trapezoid: x {describe(x)} must have the length of axis {axis} of y ({n})")
            d = diff(x)
        else:
            d = diff(lax.moveaxis(x, axis, x.ndim - 1), axis=-1)
        (d,) = promote_inexact(d)
        y, d = promote(y, d)
    else:
        d = dx if isinstance(dx, (int, float)) else arr(dx)
    s = lax.add(lax.slice_in_dim(y, 1, n, 1, y.ndim - 1), lax.slice_in_dim(y, 0, _max(n - 1, 0), 1, y.ndim - 1))
    return lax.mul(lax.reduce_sum(lax.mul(d, s), (y.ndim - 1,)), 0.5)


def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None) -> Any:
    """Piecewise-linear interpolation of the points ``(xp, fp)`` (``xp`` increasing) at ``x``; ``left``/
    ``right`` (default ``fp[0]``/``fp[-1]``) outside, or ``"extrapolate"`` to extend the end segments
    (JAX's option); ``period`` for periodic ``xp``.  Differentiable in ``x``, ``xp`` and ``fp``.

    >>> interp(fnp.array([0.5, 1.5]), fnp.array([0.0, 1.0, 2.0]), fnp.array([0.0, 2.0, 6.0]))    # [1., 4.]
    """
    x, xp, fp = promote_inexact(arr(x), arr(xp), arr(fp))
    if xp.ndim != 1 or fp.ndim != 1 or xp.shape != fp.shape:
        raise ValueError(f"interp: xp {describe(xp)} and fp {describe(fp)} must be 1-d of the same length")
    if xp.shape[0] == 0:
        raise ValueError("interp: xp and fp must not be empty")
    for name, v in (("left", left), ("right", right)):
        if isinstance(v, str) and v != "extrapolate":
            raise ValueError(f"interp: {name} must be a number or 'extrapolate', got {v!r}")
    if period is not None:
        (period,) = promote_inexact(arr(period))
        period = lax.abs(lax.convert_element_type(period, x.dtype))
        x = lax.rem(x, period)
        xp = lax.rem(xp, period)
        xp, fp = lax.sort_key_val(xp, fp)
        xp = lax.concatenate([lax.sub(xp[-1:], period), xp, lax.add(xp[:1], period)], 0)
        fp = lax.concatenate([fp[-1:], fp, fp[:1]], 0)
    n = xp.shape[0]
    from funcgrad.numpy._sorting import searchsorted
    if n == 1:
        f = lax.broadcast_to(fp[0], x.shape)
    else:
        i = lax.clamp(1, searchsorted(xp, x, side="right"), n - 1)
        im1 = lax.sub(i, 1)
        x0, x1 = lax.getitem(xp, (im1,)), lax.getitem(xp, (i,))
        f0, f1 = lax.getitem(fp, (im1,)), lax.getitem(fp, (i,))
        dx = lax.sub(x1, x0)
        eps = float(np.spacing(np.finfo(x.dtype).eps))
        dx0 = lax.le(lax.abs(dx), eps)    # a repeated xp: no NaN gradient through 0/0
        slope = lax.div(lax.sub(f1, f0), lax.select(dx0, 1.0, dx))
        f = lax.select(dx0, f0, lax.add(f0, lax.mul(lax.sub(x, x0), slope)))
    if period is None:
        if not isinstance(left, str):
            lv = fp[0] if left is None else lax.convert_element_type(arr(left), x.dtype)
            f = lax.select(lax.lt(x, xp[0]), lax.broadcast_to(lv, f.shape), f)
        if not isinstance(right, str):
            rv = fp[-1] if right is None else lax.convert_element_type(arr(right), x.dtype)
            f = lax.select(lax.gt(x, xp[-1]), lax.broadcast_to(rv, f.shape), f)
    return f


def unwrap(p: Any, discont: Any = None, axis: int = -1, period: Any = 2 * math.pi) -> Any:
    """``p`` with jumps larger than ``discont`` (default ``period / 2``) along ``axis`` replaced by their
    ``period``-complement (phase unwrapping).

    >>> unwrap(fnp.array([0.0, 3.0, 6.5]))    # [0., 3., 0.2168...]
    """
    (p,) = promote_inexact(arr(p))
    if p.ndim == 0:
        raise ValueError("unwrap: requires input that is at least one dimensional")
    axis = normalize_axis("unwrap", axis, p.ndim, p)
    period = float(period) if isinstance(period, (int, float)) else lax.convert_element_type(arr(period), p.dtype)
    interval = lax.mul(period, 0.5) if not isinstance(period, float) else period / 2
    if discont is None:
        discont = interval
    elif not isinstance(discont, (int, float)):
        discont = lax.convert_element_type(arr(discont), p.dtype)
    n = p.shape[axis]
    if n < 2:
        return p
    dd = diff(p, axis=axis)
    ddmod = lax.sub(lax.rem(lax.add(dd, interval), period), interval)
    ddmod = lax.select(lax.logical_and(lax.eq(ddmod, lax.neg(interval) if not isinstance(interval, float)
                                              else -interval), lax.gt(dd, 0.0)),
                       lax.broadcast_to(interval, dd.shape) if not isinstance(interval, float) else
                       lax.full(dd.shape, interval, dd.dtype), ddmod)
    correct = lax.select(lax.lt(lax.abs(dd), discont), 0.0, lax.sub(ddmod, dd))
    rest = lax.add(lax.slice_in_dim(p, 1, n, 1, axis), _R.cumsum(correct, axis))
    return lax.concatenate([lax.slice_in_dim(p, 0, 1, 1, axis), rest], axis)


del Array
