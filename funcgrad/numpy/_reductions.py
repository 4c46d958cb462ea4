"""Reductions: axis as int, tuple or None; keepdims."""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import bind
from funcgrad.numpy._base import arr, keepdims_shape, normalize_axes, normalize_axis, promote_inexact
from funcgrad.lax import reshape
from funcgrad import lax


_ALL_AXES = [tuple(range(n)) for n in range(8)]


def _reduce(name: str, p, x: Any, axis: Any, keepdims: bool) -> Any:
    x = arr(x)
    axes = normalize_axes(name, axis, x.ndim, x)
    # No axes (a 0-d array, axis=()): nothing to reduce, but the result still has the
    # reduction's dtype, as in numpy (a bool or int32 sum is the default int).
    out = p.bind(x, axes=axes) if axes else lax.convert_element_type(x, p.abstract_eval(x, ()).dtype)
    return reshape(out, keepdims_shape(x.shape, axes)) if keepdims else out


def sum(x: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None) -> Any:  # noqa: A001
    """Sum over ``axis`` (int, tuple or None = all). Bools and ints sum as integers."""
    x = arr(x)
    if dtype is not None:
        x = lax.convert_element_type(x, dtype)
    elif axis is None and not keepdims:   # the common case, kept cheap
        ndim = x.ndim
        if ndim:
            return bind(lax.reduce_sum_p, (x,), {"axes": _ALL_AXES[ndim] if ndim < 8 else tuple(range(ndim))})
    return _reduce("sum", lax.reduce_sum_p, x, axis, keepdims)


def max(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Maximum; tied maxima share the gradient equally (JAX's convention)."""
    return _reduce("max", lax.reduce_max_p, x, axis, keepdims)


def min(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    return _reduce("min", lax.reduce_min_p, x, axis, keepdims)


amax, amin = max, min


def prod(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """Product; its gradient is the product of the other elements (exact with zeros)."""
    return _reduce("prod", lax.reduce_prod_p, x, axis, keepdims)


def _count(x: Any, axis: Any) -> int:
    axes = normalize_axes("mean", axis, x.ndim, x)
    return int(np.prod([x.shape[a] for a in axes], dtype=np.int64))


def mean(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    (x,) = promote_inexact(arr(x))
    n = _count(x, axis)
    return lax.div_p.bind(sum(x, axis, keepdims), float(n))


def var(x: Any, axis: Any = None, keepdims: bool = False, ddof: int = 0) -> Any:
    return _variance("var", x, axis, keepdims, ddof)


def _variance(name: str, x: Any, axis: Any, keepdims: bool, ddof: int) -> Any:
    (x,) = promote_inexact(arr(x))
    normalize_axes(name, axis, x.ndim, x)   # a bad axis is reported as var/std's, not the inner mean's
    centered = lax.sub_p.bind(x, mean(x, axis, keepdims=True))
    n = _count(x, axis)
    if x.dtype.kind == "c":   # |x - mean|^2: a real variance, as numpy
        re, im = lax.real(centered), lax.imag(centered)
        squares = lax.add_p.bind(lax.mul_p.bind(re, re), lax.mul_p.bind(im, im))
    else:
        squares = lax.mul_p.bind(centered, centered)
    return lax.div_p.bind(sum(squares, axis, keepdims), float(n - ddof))


def std(x: Any, axis: Any = None, keepdims: bool = False, ddof: int = 0) -> Any:
    return lax.sqrt_p.bind(_variance("std", x, axis, keepdims, ddof))


def _arg(name: str, p, x: Any, axis: Any, keepdims: bool) -> Any:
    x = arr(x)
    if axis is None:
        out = p.bind(reshape(x, (x.size,)), axis=0)
        return reshape(out, (1,) * x.ndim) if keepdims else out
    axis = normalize_axis(name, axis, x.ndim, x)
    out = p.bind(x, axis=axis)
    return reshape(out, keepdims_shape(x.shape, (axis,))) if keepdims else out


def argmax(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """Index of the first maximum (int32; int64 with x64)."""
    return _arg("argmax", lax.argmax_p, x, axis, keepdims)


def argmin(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    return _arg("argmin", lax.argmin_p, x, axis, keepdims)


def cumsum(x: Any, axis: Any = None, dtype: Any = None) -> Any:
    """Cumulative sum along ``axis`` (None: over the flattened array)."""
    x = arr(x)
    if dtype is not None:
        x = lax.convert_element_type(x, dtype)
    if axis is None:
        x, axis = reshape(x, (x.size,)), 0
    return lax.cumsum_p.bind(x, axis=normalize_axis("cumsum", axis, x.ndim, x), reverse=False)


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """``log(sum(exp(x)))`` computed stably (shifted by the max; -inf rows give -inf)."""
    (x,) = promote_inexact(arr(x))
    axes = normalize_axes("logsumexp", axis, x.ndim, x)
    m = lax.stop_gradient_p.bind(max(x, axes, keepdims=True))
    m = lax.select_p.bind(lax.isfinite_p.bind(m), m, 0.0)   # all -inf rows: shift by 0
    s = sum(lax.exp_p.bind(lax.sub_p.bind(x, m)), axes, keepdims=True)
    out = lax.add_p.bind(lax.log_p.bind(s), m)
    return out if keepdims else reshape(out, tuple(d for i, d in enumerate(x.shape) if i not in axes))


del _dtypes
