"""funcgrad.numpy: cumulative products and sums, differences, numerical gradients, integrals,
interpolation and phase unwrapping (JAX's semantics).

All are written on lax, so grad (any order), vmap and jit apply; ``cumprod``'s gradient is exact with
zeros in the input.

>>> import funcgrad.numpy as fnp
>>> fnp.diff(fnp.array([1.0, 4.0, 9.0]))
Array([3., 5.], dtype=float32)
>>> fnp.interp(0.5, fnp.array([0.0, 1.0]), fnp.array([0.0, 2.0]))
Array(1., dtype=float32)
"""
from __future__ import annotations

import builtins
import math
from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._dtypes import describe
from funcgrad import lax
from funcgrad.numpy._base import (arr, index_arg, normalize_axes, normalize_axis, promote, promote_arrays,
                                  promote_inexact)
from funcgrad.numpy import _reductions as _R
from funcgrad.numpy._sorting import searchsorted
from funcgrad.numpy._statistics import _fill, _no_out
from funcgrad.typing import Array, ArrayLike, DTypeLike

__all__ = ["cumprod", "cumulative_prod", "cumulative_sum", "diff", "ediff1d", "gradient", "interp", "nancumprod",
           "nancumsum", "trapezoid", "unwrap"]

_range, _max = builtins.range, builtins.max


# ------------------------------------------------------------------ cumulative


def _cum_dtype(a: Any, dtype: Any) -> Any:
    if dtype is not None:
        return lax.convert_element_type(a, dtype)
    if a.dtype.kind == "b":
        return lax.convert_element_type(a, _dtypes.int_)
    return a


def _cumsum(x: Any, axis: Any = None, dtype: Any = None) -> Any:
    """numpy's cumsum, with ``dtype=bool`` a running "any" (summed as ints, then ``!= 0``), as JAX."""
    if dtype is not None and np.dtype(dtype) == np.bool_:
        x = lax.convert_element_type(lax.convert_element_type(x, np.bool_), _dtypes.int_)
        return lax.ne(_R.cumsum(x, axis=axis), 0)
    return _R.cumsum(x, axis=axis, dtype=dtype)


def _cum_axis(name: str, a: Any, axis: Any) -> tuple[Any, int]:
    if axis is None or a.ndim == 0:
        a = lax.reshape(a, (a.size,))
        return a, 0 if axis is None else normalize_axis(name, axis, 1, a)
    return a, normalize_axis(name, axis, a.ndim, a)


def cumprod(a: ArrayLike, axis: int | Sequence[int] | None = None, dtype: DTypeLike | None = None,
            out: None = None) -> Array:
    """The running product along ``axis`` (None: over the flattened array).  Its gradient is exact
    with zeros in ``a`` (no division).

    >>> cumprod(fnp.array([1.0, 2.0, 0.0, 4.0]))
    Array([1., 2., 0., 0.], dtype=float32)
    """
    _no_out("cumprod", out)
    a, axis = _cum_axis("cumprod", _cum_dtype(arr(a), dtype), axis)
    return lax.cumprod(a, axis) if a.size else a


def nancumsum(a: ArrayLike, axis: int | Sequence[int] | None = None, dtype: DTypeLike | None = None,
              out: None = None) -> Array:
    """The running sum treating NaNs as 0.

    >>> nancumsum(fnp.array([1.0, fnp.nan, 2.0]))
    Array([1., 1., 3.], dtype=float32)
    """
    _no_out("nancumsum", out)
    a, axis = _cum_axis("nancumsum", _fill(arr(a), 0.0), axis)   # NaNs out before any cast
    return _cumsum(_cum_dtype(a, None) if dtype is None else a, axis=axis, dtype=dtype)


def nancumprod(a: ArrayLike, axis: int | Sequence[int] | None = None, dtype: DTypeLike | None = None,
               out: None = None) -> Array:
    """The running product treating NaNs as 1.

    >>> nancumprod(fnp.array([2.0, fnp.nan, 3.0]))
    Array([2., 2., 6.], dtype=float32)
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


def cumulative_sum(x: ArrayLike, /, *, axis: int | None = None, dtype: DTypeLike | None = None,
                   include_initial: bool = False) -> Any:
    """The running sum along ``axis`` (needed unless ``x`` is 1-d), optionally starting with a 0.

    >>> cumulative_sum(fnp.array([1, 2, 3]), include_initial=True)
    Array([0, 1, 3, 6], dtype=int32)
    """
    return _cumulative("cumulative_sum", _cumsum, x, axis, dtype, include_initial, 0)


def cumulative_prod(x: ArrayLike, /, *, axis: int | None = None, dtype: DTypeLike | None = None,
                    include_initial: bool = False) -> Any:
    """The running product along ``axis`` (needed unless ``x`` is 1-d), optionally starting with a 1.

    >>> cumulative_prod(fnp.array([1, 2, 3]), include_initial=True)
    Array([1, 1, 2, 6], dtype=int32)
    """
    return _cumulative("cumulative_prod", cumprod, x, axis, dtype, include_initial, 1)


# ------------------------------------------------------------------ differences and integrals


def _append_along(name: str, a: Any, value: Any, axis: int) -> Any:
    v = promote_arrays(a, value)[1] if isinstance(value, (bool, int, float)) else arr(value)   # a weak scalar
    if v.ndim == 0:
        shape = list(a.shape)
        shape[axis] = 1
        v = lax.broadcast_to(v, tuple(shape))
    elif v.ndim != a.ndim or any(s != t for i, (s, t) in enumerate(zip(v.shape, a.shape)) if i != axis):
        raise ValueError(f"{name}: prepend/append {describe(v)} must be a scalar or match the array {describe(a)} "
                         f"on every axis but axis {axis}")
    return v


def diff(a: ArrayLike, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Array:
    """The ``n``-th discrete difference ``a[i+1] - a[i]`` along ``axis`` (``!=`` for bools), after adding
    ``prepend``/``append`` (scalars broadcast along the other axes).

    >>> diff(fnp.array([1.0, 4.0, 9.0, 16.0]), n=2)
    Array([2., 2.], dtype=float32)
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


def ediff1d(ary: ArrayLike, to_end: Any = None, to_begin: Any = None) -> Array:
    """The differences of the flattened ``ary``, with ``to_begin`` before and ``to_end`` after (cast to
    ``ary``'s dtype).

    >>> ediff1d(fnp.array([1, 4, 9]), to_begin=0)
    Array([0, 3, 5], dtype=int32)
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


def gradient(f: Any, *varargs: Any, axis: int | Sequence[int] | None = None, edge_order: int | None = None) -> Any:
    """The gradient of sampled ``f`` by central differences inside and one-sided ones at the edges
    (``edge_order=1``), for each axis in ``axis``: a list of arrays, or one array for one axis.
    ``varargs``: one spacing for all axes, one per axis, or coordinate arrays (non-uniform spacing).

    >>> gradient(fnp.array([1.0, 4.0, 9.0, 16.0]))
    Array([3., 4., 6., 7.], dtype=float32)
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


def trapezoid(y: ArrayLike, x: ArrayLike | None = None, dx: Any = 1.0, axis: int = -1) -> Array:
    """The integral of ``y`` along ``axis`` by the trapezoidal rule, at sample points ``x`` (1-d, or
    ``y``'s shape) or spacing ``dx``.

    >>> trapezoid(fnp.array([1.0, 2.0, 4.0]))
    Array(4.5, dtype=float32)
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


def interp(x: ArrayLike, xp: ArrayLike, fp: ArrayLike, left: Any = None, right: Any = None, period: Any = None) -> Any:
    """Piecewise-linear interpolation of the points ``(xp, fp)`` (``xp`` increasing) at ``x``; ``left``/
    ``right`` (default ``fp[0]``/``fp[-1]``) outside, or ``"extrapolate"`` to extend the end segments
    (JAX's option); ``period`` for periodic ``xp``.  Differentiable in ``x``, ``xp`` and ``fp``.

    >>> interp(fnp.array([0.5, 1.5]), fnp.array([0.0, 1.0, 2.0]), fnp.array([0.0, 2.0, 6.0]))
    Array([1., 4.], dtype=float32)
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
        x = lax.mod(x, period)
        xp = lax.mod(xp, period)
        xp, fp = lax.sort_key_val(xp, fp)
        xp = lax.concatenate([lax.sub(xp[-1:], period), xp, lax.add(xp[:1], period)], 0)
        fp = lax.concatenate([fp[-1:], fp, fp[:1]], 0)
    n = xp.shape[0]
    if n == 1:
        f = lax.broadcast_to(fp[0], x.shape)
    else:
        i = lax.clamp(1, searchsorted(xp, x, side="right"), n - 1)
        im1 = lax.sub(i, 1)
        x0, x1 = lax.getitem(xp, (im1,)), lax.getitem(xp, (i,))
        f0, f1 = lax.getitem(fp, (im1,)), lax.getitem(fp, (i,))
        dx = lax.sub(x1, x0)
        eps = float(np.spacing(_dtypes.finfo(x.dtype).eps))
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


def unwrap(p: ArrayLike, discont: Any = None, axis: int = -1, period: Any = 2 * math.pi) -> Array:
    """``p`` with jumps larger than ``discont`` (default ``period / 2``) along ``axis`` replaced by their
    ``period``-complement (phase unwrapping).

    >>> unwrap(fnp.array([0.0, 3.0, 6.5]))
    Array([0.      , 3.      , 0.2168], dtype=float32)
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
    ddmod = lax.sub(lax.mod(lax.add(dd, interval), period), interval)
    ddmod = lax.select(lax.logical_and(lax.eq(ddmod, lax.neg(interval) if not isinstance(interval, float)
                                              else -interval), lax.gt(dd, 0.0)),
                       lax.broadcast_to(interval, dd.shape) if not isinstance(interval, float) else
                       lax.full(dd.shape, interval, dd.dtype), ddmod)
    correct = lax.select(lax.lt(lax.abs(dd), discont), 0.0, lax.sub(ddmod, dd))
    rest = lax.add(lax.slice_in_dim(p, 1, n, 1, axis), _R.cumsum(correct, axis=axis))
    return lax.concatenate([lax.slice_in_dim(p, 0, 1, 1, axis), rest], axis)
