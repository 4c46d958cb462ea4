"""Summary statistics: ``mode``, ``rankdata``, ``sem`` (``jax.scipy.stats``)."""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import _dtypes, lax
from funcgrad.numpy._base import arr, normalize_axis, promote_inexact

__all__ = ["ModeResult", "mode", "rankdata", "sem"]


class ModeResult(NamedTuple):
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


def _pairs(x):
    """``x`` (last axis n) as ``(x_i, x_j)`` broadcast to (..., n, n): i along axis -2, j along -1."""
    return fnp.expand_dims(x, -1), fnp.expand_dims(x, -2)


def mode(a: Any, axis: Any = 0, nan_policy: str = "propagate", keepdims: bool = False) -> ModeResult:
    """The most frequent value along ``axis`` (the smallest among ties) and its count.

    Returns ``ModeResult(mode, count)``; ``axis=None`` uses the flattened array. NaNs count as equal
    to each other (as JAX). Computed with pairwise comparisons: O(n**2) memory along the axis.

    >>> mode(fnp.array([1.0, 2.0, 2.0, 3.0]))   # ModeResult(mode=2.0, count=2)
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
        return ModeResult(nan, fnp.zeros(out_shape, dtype=_dtypes.int_))
    xi, xj = _pairs(x)
    same = xi == xj
    if x.dtype.kind == "f":
        same = fnp.logical_or(same, fnp.logical_and(fnp.isnan(xi), fnp.isnan(xj)))
    counts = fnp.sum(same.astype(_dtypes.int_), axis=-1)
    top = fnp.max(counts, axis=-1)
    chosen = counts == fnp.expand_dims(top, -1)
    if x.dtype.kind == "f":
        numeric = fnp.logical_and(chosen, fnp.logical_not(fnp.isnan(x)))
        has_numeric = fnp.sum(numeric.astype(_dtypes.int_), axis=-1) > 0
        value = fnp.min(fnp.where(numeric, x, np.inf), axis=-1)
        value = fnp.where(has_numeric, value, np.nan)
    else:
        big = np.iinfo(x.dtype).max if x.dtype.kind in "iu" else True
        value = fnp.min(fnp.where(chosen, x, big), axis=-1)
    return ModeResult(fnp.reshape(value, out_shape), fnp.reshape(top, out_shape))


_METHODS = ("average", "min", "max", "dense", "ordinal")


def rankdata(a: Any, method: str = "average", *, axis: Any = None, nan_policy: str = "propagate") -> Any:
    """Ranks of the data, from 1 (ties resolved by ``method``: average, min, max, dense, ordinal).

    ``axis=None`` ranks the flattened array. A slice holding a NaN gives NaNs (``nan_policy='propagate'``).
    The result is in the default float dtype (as JAX) and has no gradient. Computed with pairwise
    comparisons: O(n**2) memory along the axis.

    >>> rankdata(fnp.array([3.0, 1.0, 3.0, 2.0]))   # [3.5, 1, 3.5, 2]
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
    xi, xj = _pairs(x)
    below = fnp.sum((xj < xi).astype(out_dtype), axis=-1)
    equal = fnp.sum((xj == xi).astype(out_dtype), axis=-1)
    if method == "average":
        ranks = below + (equal + 1.0) * 0.5
    elif method == "min":
        ranks = below + 1.0
    elif method == "max":
        ranks = below + equal
    elif method == "ordinal":
        n = x.shape[-1]
        earlier = fnp.arange(n)[None, :] < fnp.arange(n)[:, None]    # j < i
        ranks = below + fnp.sum(fnp.logical_and(xj == xi, earlier).astype(out_dtype), axis=-1) + 1.0
    else:   # dense: the number of distinct values below, plus 1
        ties = fnp.expand_dims(equal, -2)   # the multiplicity of x_j
        ranks = fnp.round(fnp.sum(fnp.where(xj < xi, 1.0 / ties, 0.0), axis=-1)) + 1.0
    if x.dtype.kind == "f":
        any_nan = fnp.sum(fnp.isnan(x).astype(out_dtype), axis=-1, keepdims=True) > 0
        ranks = fnp.where(any_nan, np.nan, ranks)
    return fnp.moveaxis(ranks.astype(out_dtype), -1, ax)


def sem(a: Any, axis: Any = 0, ddof: int = 1, nan_policy: str = "propagate", *, keepdims: bool = False) -> Any:
    """The standard error of the mean, ``std(a, axis, ddof) / sqrt(n)``; ``nan_policy='omit'`` ignores NaNs.

    >>> sem(fnp.array([1.0, 2.0, 3.0]))   # [0.5773...]
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
