"""Summary statistics: ``mode``, ``rankdata``, ``sem`` (``jax.scipy.stats``)."""
from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import _dtypes, lax
from funcgrad.numpy._base import arr, normalize_axis, promote_inexact
from funcgrad.typing import ArrayLike

__all__ = ["ModeResult", "mode", "rankdata", "sem"]


class ModeResult(NamedTuple):
    """``mode``'s result: the most common value and how often it occurs (``scipy.stats.mode``'s fields).

    >>> scipy.stats.mode(fnp.array([1.0, 2.0, 2.0, 3.0])).count
    Array(2, dtype=int32)
    """
    mode: Any
    count: Any


def _check_nan_policy(name: str, nan_policy: str) -> None:
    if nan_policy not in ("propagate", "omit", "raise"):
        raise ValueError(f"{name}: illegal nan_policy value {nan_policy!r}; expected one of "
                         "{'propagate', 'omit', 'raise'}")
    if nan_policy == "omit":
        raise NotImplementedError(f"{name}: nan_policy='omit' is not implemented (as in JAX)")
    if nan_policy == "raise":
        raise NotImplementedError(f"{name}: nan_policy='raise' is not supported (as in JAX: under jit the values "
                                  "are unknown); check for NaNs before calling")


def _groups(xs):
    """For ``xs`` sorted along its last axis (n >= 1): ``(start, end)``, the first and last sorted
    position of each entry's run of equal values (NaNs form one run, sorted last), as int arrays."""
    n = xs.shape[-1]
    pos = lax.broadcasted_iota(_dtypes.int_, xs.shape, xs.ndim - 1)
    diff = xs[..., 1:] != xs[..., :-1]
    if _dtypes.kind(xs.dtype) in "fc":
        diff = fnp.logical_and(diff, fnp.logical_not(fnp.logical_and(fnp.isnan(xs[..., 1:]),
                                                                       fnp.isnan(xs[..., :-1]))))
    first = fnp.ones(xs.shape[:-1] + (1,), dtype=bool)
    begins = fnp.concatenate([first, diff], axis=-1)    # position i starts a run
    ends = fnp.concatenate([diff, first], axis=-1)      # position i ends a run
    start = lax.cummax(fnp.where(begins, pos, 0), axis=xs.ndim - 1)
    end = lax.cummin(fnp.where(ends, pos, n - 1), axis=xs.ndim - 1, reverse=True)
    return start, end


def mode(a: ArrayLike, axis: int | Sequence[int] = 0, nan_policy: str = "propagate",
         keepdims: bool = False) -> ModeResult:
    """The most frequent value along ``axis`` (the smallest among ties) and its count.

    Returns ``ModeResult(mode, count)``; ``axis=None`` uses the flattened array. NaNs count as equal
    to each other and lose ties to numbers (as JAX's unique-based mode). Sort-based: O(n log n).
    The gradient of ``mode`` flows to the first occurrence of the modal value (as JAX). An empty
    axis gives mode NaN and count 0.0 in the default float dtype (as JAX and scipy).

    >>> mode(fnp.array([1.0, 2.0, 2.0, 3.0]))   # ModeResult(mode=2.0, count=2)
    ModeResult(mode=Array(2., dtype=float32), count=Array(2, dtype=int32))
    """
    _check_nan_policy("mode", nan_policy)
    x = arr(a)
    if x.ndim == 0:
        x = fnp.reshape(x, (1,))
    if axis is None:
        out_shape = (1,) * x.ndim if keepdims else ()
        x = fnp.reshape(x, (x.size,))
        ax = 0
    else:
        ax = normalize_axis("mode", axis, x.ndim, x)
        out_shape = tuple(1 if i == ax else s for i, s in enumerate(x.shape)) if keepdims else \
            tuple(s for i, s in enumerate(x.shape) if i != ax)
    x = fnp.moveaxis(x, ax, -1)
    if x.shape[-1] == 0:
        nan = fnp.full(out_shape, np.nan, dtype=_dtypes.float_)
        return ModeResult(nan, fnp.zeros(out_shape, dtype=_dtypes.float_))   # float counts here, as JAX/scipy
    xs = fnp.sort(x, axis=-1)
    start, end = _groups(xs)
    counts = end - start + 1
    best = fnp.argmax(counts, axis=-1, keepdims=True)    # the first (smallest) value among the most frequent
    value = fnp.take_along_axis(xs, best, axis=-1)[..., 0]
    top = fnp.take_along_axis(counts, best, axis=-1)[..., 0]
    return ModeResult(fnp.reshape(value, out_shape), fnp.reshape(top, out_shape))


_METHODS = ("average", "min", "max", "dense", "ordinal")


def rankdata(a: ArrayLike, method: str = "average", *, axis: int | Sequence[int] | None = None,
             nan_policy: str = "propagate") -> Any:
    """Ranks of the data, from 1 (ties resolved by ``method``: average, min, max, dense, ordinal).

    ``axis=None`` ranks the flattened array. A slice holding a NaN gives NaNs (``nan_policy='propagate'``).
    The result is in the default float dtype (as JAX) and has no gradient. Sort-based: O(n log n)
    (a stable sort, so ``ordinal`` ranks ties in their order of appearance).

    >>> rankdata(fnp.array([3.0, 1.0, 3.0, 2.0]))
    Array([3.5, 1. , 3.5, 2. ], dtype=float32)
    """
    _check_nan_policy("rankdata", nan_policy)
    if method not in _METHODS:
        raise ValueError(f"rankdata: unknown method {method!r}; expected one of {_METHODS}")
    x = lax.stop_gradient(arr(a))
    if axis is None:
        x = fnp.reshape(x, (x.size,))
        ax = 0
    else:
        ax = normalize_axis("rankdata", axis, x.ndim, x)
    x = fnp.moveaxis(x, ax, -1)
    out_dtype = _dtypes.float_
    if x.shape[-1] == 0:
        return fnp.moveaxis(fnp.zeros(x.shape, dtype=out_dtype), -1, ax)
    last = x.ndim - 1
    pos = lax.broadcasted_iota(_dtypes.int_, x.shape, last)
    xs, perm = lax.sort((x, pos), dimension=last, num_keys=1)
    inv = fnp.argsort(perm, axis=-1)                       # the sorted position of each entry

    def unsort(v):
        return fnp.take_along_axis(v, inv, axis=-1)

    if method == "ordinal":
        ranks = (inv + 1).astype(out_dtype)
    elif method == "dense":
        new = fnp.concatenate([fnp.ones(x.shape[:-1] + (1,), dtype=bool), xs[..., 1:] != xs[..., :-1]], axis=-1)
        ranks = unsort(fnp.cumsum(new.astype(_dtypes.int_), axis=-1)).astype(out_dtype)
    else:
        start, end = (v.astype(out_dtype) for v in _groups(xs))
        if method == "min":
            ranks = unsort(start) + 1.0
        elif method == "max":
            ranks = unsort(end) + 1.0
        else:   # average
            ranks = unsort((start + end) * 0.5) + 1.0
    if _dtypes.kind(x.dtype) in "fc":
        any_nan = fnp.any(fnp.isnan(x), axis=-1, keepdims=True)
        ranks = fnp.where(any_nan, np.nan, ranks)
    return fnp.moveaxis(ranks, -1, ax)


def sem(a: ArrayLike, axis: int | Sequence[int] = 0, ddof: int = 1, nan_policy: str = "propagate", *,
        keepdims: bool = False) -> Any:
    """The standard error of the mean, ``std(a, axis, ddof) / sqrt(n)``; ``nan_policy='omit'`` ignores NaNs.

    >>> sem(fnp.array([1.0, 2.0, 3.0]))
    Array(0.5774, dtype=float32)
    """
    (b,) = promote_inexact(arr(a))
    if nan_policy == "propagate":
        size = b.size if axis is None else b.shape[normalize_axis("sem", axis, b.ndim, b)]
        return fnp.std(b, axis=axis, ddof=ddof, keepdims=keepdims) / np.sqrt(size).astype(b.dtype)
    if nan_policy == "omit":
        ok = fnp.logical_not(fnp.isnan(b))
        count = fnp.sum(ok.astype(b.dtype), axis=axis, keepdims=True)
        mean = fnp.sum(fnp.where(ok, b, 0.0), axis=axis, keepdims=True) / count
        dev = fnp.where(ok, b - mean, 0.0)
        var = fnp.sum(dev * dev, axis=axis, keepdims=True) / (count - ddof)
        out = fnp.sqrt(var / count)
        if not keepdims:
            axes = tuple(range(b.ndim)) if axis is None else (normalize_axis("sem", axis, b.ndim, b),)
            out = fnp.reshape(out, tuple(s for i, s in enumerate(out.shape) if i not in axes))
        return out
    raise ValueError(f"sem: nan_policy {nan_policy!r} is not supported; use 'propagate' or 'omit'")
