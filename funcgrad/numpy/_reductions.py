"""Reductions: axis as int, tuple or None; keepdims."""
from __future__ import annotations

from typing import Any, Sequence

import builtins

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import bind
from funcgrad.numpy._base import arr, keepdims_shape, normalize_axes, normalize_axis, promote_inexact
from funcgrad.lax import reshape
from funcgrad import lax
from funcgrad.typing import Array, ArrayLike, DTypeLike


_ALL_AXES = [tuple(range(n)) for n in range(8)]


def _reduce(name: str, p, x: Any, axis: Any, keepdims: bool) -> Any:
    x = arr(x)
    axes = normalize_axes(name, axis, x.ndim, x)
    # No axes (a 0-d array, axis=()): nothing to reduce, but the result still has the
    # reduction's dtype, as in numpy (a bool or int32 sum is the default int).
    out = p.bind(x, axes=axes) if axes else lax.convert_element_type(x, p.abstract_eval(x, ()).dtype)
    return reshape(out, keepdims_shape(x.shape, axes)) if keepdims else out


def _no_out(name: str, out: Any) -> None:
    if out is not None:
        raise NotImplementedError(f"{name}: out= is not supported: funcgrad arrays are immutable; use the "
                                  "returned array")


def _legacy_keepdims(value: Any, keepdims: Any) -> tuple[Any, Any]:
    """A bool where JAX's signature has ``dtype``/``out`` is the keepdims of funcgrad's older
    ``f(x, axis, keepdims)`` order (a bool is never a valid dtype or out)."""
    if isinstance(value, (bool, np.bool_)):
        return None, bool(value)
    return value, keepdims


def _mask(name: str, where: Any, x: Any) -> Any:
    """``where`` as a bool mask broadcast to ``x``'s shape."""
    from funcgrad.numpy._elementwise import _truth
    from funcgrad.numpy._shape import broadcast_to
    mask = _truth(where)
    if getattr(mask, "shape", ()) == x.shape:
        return mask
    try:
        return broadcast_to(mask, x.shape)
    except ValueError:
        raise ValueError(f"{name}: where= mask of shape {np.shape(mask)} cannot be broadcast to the shape "
                         f"{x.shape} of the array being reduced") from None


def _masked(name: str, x: Any, where: Any, fill: Any) -> Any:
    return x if where is None else lax.select_p.bind(_mask(name, where, x), x, fill)


def _promote_integers(x: Any, out: Any, promote_integers: bool) -> Any:
    if not promote_integers and x.dtype.kind in "iu" and out.dtype != x.dtype:
        return lax.convert_element_type(out, x.dtype)
    return out


def sum(a: ArrayLike, axis: int | Sequence[int] | None = None, dtype: DTypeLike | None = None,  # noqa: A001
        out: None = None, keepdims: bool = False, initial: ArrayLike | None = None, where: ArrayLike | None = None,
        promote_integers: bool = True) -> Array:
    """Sum over ``axis`` (int, tuple or None = all), as ``jnp.sum``.

    Bools and integers sum in the default integer (unsigned: uint32/uint64) unless
    ``promote_integers=False``; ``where=`` (a bool mask broadcast to ``a``) sums only the
    selected elements; ``initial`` is added to the result.

    >>> fnp.sum(fnp.array([[1.0, 2.0], [3.0, 4.0]]), axis=0)
    Array([4., 6.], dtype=float32)
    >>> fnp.sum(fnp.array([1.0, 2.0, 3.0]), where=fnp.array([True, False, True]))
    Array(4., dtype=float32)
    """
    return _sum_or_prod("sum", lax.reduce_sum_p, lax.add_p, 0, a, axis, dtype, out, keepdims, initial, where,
                        promote_integers)


def _sum_or_prod(name: str, reduce_p: Any, combine_p: Any, unit: int, a: Any, axis: Any, dtype: Any, out: Any,
                 keepdims: bool, initial: Any, where: Any, promote_integers: bool) -> Any:
    """sum or prod: ``reduce_p`` over ``axis``; ``where=`` masks with ``unit``, ``initial`` joins by ``combine_p``."""
    dtype, keepdims = _legacy_keepdims(dtype, keepdims)
    _no_out(name, out)
    x = arr(a)
    if dtype is not None:
        x = lax.convert_element_type(x, dtype)
    elif reduce_p is lax.reduce_sum_p and axis is None and not keepdims and initial is None and where is None \
            and promote_integers:
        ndim = x.ndim   # the common case, kept cheap
        if ndim:
            return bind(lax.reduce_sum_p, (x,), {"axes": _ALL_AXES[ndim] if ndim < 8 else tuple(range(ndim))})
    if where is not None:
        x = _masked(name, x, where, lax.convert_element_type(unit, x.dtype) if x.dtype.kind != "b" else bool(unit))
    out = _reduce(name, reduce_p, x, axis, keepdims)
    if initial is not None:
        out = combine_p.bind(*_same(out, initial))
    return _promote_integers(x, out, promote_integers) if dtype is None else out


def _same(out: Any, value: Any) -> tuple:
    """``value`` (``initial``) in ``out``'s dtype: the reduction's dtype decides, as in JAX."""
    if isinstance(value, float) and not isinstance(value, bool) and _dtypes.kind(out.dtype) == "f":
        return out, value
    from funcgrad._core import Array, Tracer
    value = value if isinstance(value, (Array, Tracer)) else arr(np.asarray(value))
    return out, lax.convert_element_type(value, out.dtype)


def prod(a: ArrayLike, axis: int | Sequence[int] | None = None, dtype: DTypeLike | None = None, out: None = None,
         keepdims: bool = False, initial: ArrayLike | None = None, where: ArrayLike | None = None,
         promote_integers: bool = True) -> Array:
    """Product over ``axis``; its gradient is the product of the other elements (exact with zeros).
    ``where=`` multiplies only the selected elements; ``initial`` multiplies the result.

    >>> fnp.prod(fnp.array([1.0, 2.0, 3.0]), where=fnp.array([True, True, False]))
    Array(2., dtype=float32)
    """
    return _sum_or_prod("prod", lax.reduce_prod_p, lax.mul_p, 1, a, axis, dtype, out, keepdims, initial, where,
                        promote_integers)


def _extreme(name: str, p, combine, a: Any, axis: Any, out: Any, keepdims: bool, initial: Any, where: Any) -> Any:
    out, keepdims = _legacy_keepdims(out, keepdims)
    _no_out(name, out)
    x = arr(a)
    if where is not None:
        if initial is None:
            raise ValueError(f"{name}: reduction operation {name} does not have an identity, so to use a where "
                             "mask one has to specify 'initial'")
        x = _masked(name, x, where, _identity(name, x.dtype))
    axes = normalize_axes(name, axis, x.ndim, x)
    if initial is not None and builtins.any(x.shape[i] == 0 for i in axes):
        shape = keepdims_shape(x.shape, axes) if keepdims else tuple(d for i, d in enumerate(x.shape)
                                                                         if i not in axes)
        return lax.broadcast_to(lax.convert_element_type(arr(np.asarray(initial)), x.dtype), shape)
    result = _reduce(name, p, x, axis, keepdims)
    if initial is not None:
        result = combine(*_same(result, initial))
    return result


def _identity(name: str, dtype: np.dtype) -> Any:
    """The identity of max (the lowest value of ``dtype``) or min (the highest)."""
    low = name in ("max", "amax")
    if _dtypes.kind(dtype) == "f":
        return -np.inf if low else np.inf
    if dtype.kind == "b":
        return not low
    info = np.iinfo(dtype)
    return lax.convert_element_type(arr(np.asarray(info.min if low else info.max, dtype)), dtype)


def max(a: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None, keepdims: bool = False,  # noqa: A001
        initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Array:
    """Maximum over ``axis``; tied maxima share the gradient equally (JAX's convention).

    ``initial`` joins the reduction (and is the result of an empty one); ``where=`` needs
    ``initial``, as in JAX.

    >>> fnp.max(fnp.array([[1.0, 5.0], [3.0, 2.0]]), axis=1)
    Array([5., 3.], dtype=float32)
    """
    return _extreme("max", lax.reduce_max_p, lax.maximum_p.bind, a, axis, out, keepdims, initial, where)


def min(a: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None, keepdims: bool = False,  # noqa: A001
        initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Array:
    """Minimum over ``axis`` (as :func:`max`).

    >>> fnp.min(fnp.array([3.0, 1.0]), initial=0.0)
    Array(0., dtype=float32)
    """
    return _extreme("min", lax.reduce_min_p, lax.minimum_p.bind, a, axis, out, keepdims, initial, where)


def amax(a: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None, keepdims: bool = False,
         initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Array:
    """Alias of :func:`max`.

    >>> fnp.amax(fnp.array([1.0, 3.0]))
    Array(3., dtype=float32)
    """
    return _extreme("amax", lax.reduce_max_p, lax.maximum_p.bind, a, axis, out, keepdims, initial, where)


def amin(a: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None, keepdims: bool = False,
         initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Array:
    """Alias of :func:`min`.

    >>> fnp.amin(fnp.array([1.0, 3.0]))
    Array(1., dtype=float32)
    """
    return _extreme("amin", lax.reduce_min_p, lax.minimum_p.bind, a, axis, out, keepdims, initial, where)


def _count(x: Any, axis: Any, name: str = "mean") -> int:
    axes = normalize_axes(name, axis, x.ndim, x)
    return int(np.prod([x.shape[a] for a in axes], dtype=np.int64))


def _inexact(x: Any, dtype: Any) -> Any:
    if dtype is not None:
        dtype = _dtypes.canonicalize(dtype, requested=True)
        return lax.convert_element_type(x, dtype if _dtypes.kind(dtype) == "f" else _dtypes.float_)
    (x,) = promote_inexact(x)
    return x


def _where_count(name: str, x: Any, axis: Any, keepdims: bool, where: Any) -> Any:
    if where is None:
        return float(_count(x, axis, name))
    mask = lax.convert_element_type(_mask(name, where, x), x.dtype)
    return _reduce(name, lax.reduce_sum_p, mask, axis, keepdims)


def mean(a: ArrayLike, axis: int | Sequence[int] | None = None, dtype: DTypeLike | None = None, out: None = None,
         keepdims: bool = False, *, where: ArrayLike | None = None) -> Array:
    """Mean over ``axis`` (integers in the default float); ``where=`` averages the selected
    elements only (NaN where none is selected).

    >>> fnp.mean(fnp.array([1.0, 2.0, 4.0]), where=fnp.array([True, False, True]))
    Array(2.5, dtype=float32)
    """
    dtype, keepdims = _legacy_keepdims(dtype, keepdims)
    _no_out("mean", out)
    x = _inexact(arr(a), dtype)
    normalize_axes("mean", axis, x.ndim, x)   # errors name mean, not the inner sum
    total = sum(_masked("mean", x, where, 0.0), axis, keepdims=keepdims)
    return lax.div_p.bind(total, _where_count("mean", x, axis, keepdims, where))


def _ddof(name: str, ddof: Any, correction: Any) -> Any:
    if correction is None:
        return ddof
    if ddof != 0:
        raise ValueError(f"{name}: ddof and correction can't be provided simultaneously.")
    return correction


def var(a: ArrayLike, axis: int | Sequence[int] | None = None, dtype: DTypeLike | None = None, out: None = None,
        ddof: int = 0, keepdims: bool = False, *, where: ArrayLike | None = None, mean: Any = None,
        correction: Any = None) -> Array:
    """Variance over ``axis``: ``sum(|x - mean|^2) / (N - ddof)`` (``correction`` is the array-API
    name of ``ddof``); ``where=`` uses the selected elements only; ``mean=`` gives a precomputed
    mean (broadcastable as with ``keepdims=True``).

    >>> fnp.var(fnp.array([1.0, 2.0, 4.0]), ddof=1)
    Array(2.3333, dtype=float32)
    """
    if isinstance(dtype, (bool, np.bool_)) and isinstance(out, (int, float)) and not isinstance(out, bool):
        dtype, keepdims, out, ddof = None, bool(dtype), None, out   # the older (x, axis, keepdims, ddof)
    dtype, keepdims = _legacy_keepdims(dtype, keepdims)
    _no_out("var", out)
    return _variance("var", a, axis, dtype, _ddof("var", ddof, correction), keepdims, where, mean)


def _variance(name: str, a: Any, axis: Any, dtype: Any, ddof: Any, keepdims: bool, where: Any,
              mu: Any) -> Any:
    x = _inexact(arr(a), dtype)
    normalize_axes(name, axis, x.ndim, x)   # a bad axis is reported as var/std's, not the inner mean's
    if mu is None:
        mu = globals()["mean"](x, axis, keepdims=True, where=where)
    else:
        mu = lax.convert_element_type(arr(mu), x.dtype)
    centered = lax.sub_p.bind(x, mu)
    if centered.dtype.kind == "c":   # |x - mean|^2: a real variance, as numpy
        re, im = lax.real(centered), lax.imag(centered)
        sq = lax.add_p.bind(lax.mul_p.bind(re, re), lax.mul_p.bind(im, im))
    else:
        sq = lax.mul_p.bind(centered, centered)
    sq = _masked(name, sq, where, 0.0)
    n = _where_count(name, x, axis, keepdims, where)
    total = sum(sq, axis, keepdims=keepdims)
    if isinstance(n, float):   # N - ddof <= 0 gives NaN, as in JAX (numpy: inf or NaN)
        return lax.div_p.bind(total, n - ddof) if n - ddof > 0 else lax.mul_p.bind(total, np.nan)
    denom = lax.sub_p.bind(n, float(ddof))
    positive = lax.gt_p.bind(denom, 0.0)
    return lax.select_p.bind(positive, lax.div_p.bind(total, lax.select_p.bind(positive, denom, 1.0)), np.nan)


def std(a: ArrayLike, axis: int | Sequence[int] | None = None, dtype: DTypeLike | None = None, out: None = None,
        ddof: int = 0, keepdims: bool = False, *, where: ArrayLike | None = None, mean: Any = None,
        correction: Any = None) -> Array:
    """Standard deviation: ``sqrt(var(...))`` with the same arguments.

    >>> fnp.std(fnp.array([1.0, 3.0]))
    Array(1., dtype=float32)
    """
    if isinstance(dtype, (bool, np.bool_)) and isinstance(out, (int, float)) and not isinstance(out, bool):
        dtype, keepdims, out, ddof = None, bool(dtype), None, out   # the older (x, axis, keepdims, ddof)
    dtype, keepdims = _legacy_keepdims(dtype, keepdims)
    _no_out("std", out)
    return lax.sqrt_p.bind(_variance("std", a, axis, dtype, _ddof("std", ddof, correction), keepdims, where, mean))


def _arg(name: str, p, x: Any, axis: Any, keepdims: bool) -> Any:
    x = arr(x)
    if axis is None:
        out = p.bind(reshape(x, (x.size,)), axis=0)
        return reshape(out, (1,) * x.ndim) if keepdims else out
    axis = normalize_axis(name, axis, x.ndim, x)
    out = p.bind(x, axis=axis)
    return reshape(out, keepdims_shape(x.shape, (axis,))) if keepdims else out


def argmax(a: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None,
           keepdims: bool | None = None) -> Array:
    """Index of the first maximum (int32; int64 with x64) along ``axis`` (None: of the flattened array).

    >>> fnp.argmax(fnp.array([1.0, 3.0, 3.0]))
    Array(1, dtype=int32)
    """
    out, keepdims = _legacy_keepdims(out, keepdims)
    _no_out("argmax", out)
    return _arg("argmax", lax.argmax_p, a, axis, bool(keepdims))


def argmin(a: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None,
           keepdims: bool | None = None) -> Array:
    """Index of the first minimum (as :func:`argmax`).

    >>> fnp.argmin(fnp.array([2.0, 1.0]))
    Array(1, dtype=int32)
    """
    out, keepdims = _legacy_keepdims(out, keepdims)
    _no_out("argmin", out)
    return _arg("argmin", lax.argmin_p, a, axis, bool(keepdims))


def cumsum(a: ArrayLike, axis: int | Sequence[int] | None = None, dtype: DTypeLike | None = None,
           out: None = None) -> Array:
    """Cumulative sum along ``axis`` (None: over the flattened array).

    >>> fnp.cumsum(fnp.array([1.0, 2.0, 3.0]))
    Array([1., 3., 6.], dtype=float32)
    """
    _no_out("cumsum", out)
    x = arr(a)
    if dtype is not None:
        x = lax.convert_element_type(x, dtype)
    if axis is None:
        x, axis = reshape(x, (x.size,)), 0
    return lax.cumsum_p.bind(x, axis=normalize_axis("cumsum", axis, x.ndim, x), reverse=False)


def logsumexp(x: ArrayLike, axis: int | Sequence[int] | None = None, keepdims: bool = False, *,
              where: ArrayLike | None = None) -> Array:
    """``log(sum(exp(x)))`` computed stably (shifted by the max; -inf rows give -inf); ``where=``
    sums the selected elements only (-inf where none is selected).

    >>> fnp.logsumexp(fnp.array([0.0, 0.0]))                         # log 2
    Array(0.6931, dtype=float32)
    """
    (x,) = promote_inexact(arr(x))
    axes = normalize_axes("logsumexp", axis, x.ndim, x)
    if where is not None:
        x = _masked("logsumexp", x, where, -np.inf)
    m = lax.stop_gradient_p.bind(max(x, axes, keepdims=True))
    m = lax.select_p.bind(lax.isfinite_p.bind(m), m, 0.0)   # all -inf rows: shift by 0
    s = sum(lax.exp_p.bind(lax.sub_p.bind(x, m)), axes, keepdims=True)
    out = lax.add_p.bind(lax.log_p.bind(s), m)
    return out if keepdims else reshape(out, tuple(d for i, d in enumerate(x.shape) if i not in axes))



def _bool_reduce(name: str, a: Any, axis: Any, out: Any, keepdims: bool, where: Any, fill: bool) -> Any:
    from funcgrad.numpy._elementwise import _truth
    out, keepdims = _legacy_keepdims(out, keepdims)
    _no_out(name, out)
    x = _truth(arr(a))
    if where is not None:
        x = lax.select_p.bind(_mask(name, where, x), x, fill)
    axes = normalize_axes(name, axis, x.ndim, x)
    if not axes:
        result = x
    else:
        as_int = lax.convert_element_type(x, np.int32)
        p = lax.reduce_min_p if name == "all" else lax.reduce_max_p
        result = lax.eq_p.bind(p.bind(as_int, axes=axes), 1) if builtins.all(x.shape[i] for i in axes) else \
            lax.broadcast_to(arr(np.asarray(fill)), tuple(d for i, d in enumerate(x.shape) if i not in axes))
    return reshape(result, keepdims_shape(x.shape, axes)) if keepdims else result


def all(a: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None, keepdims: bool = False,  # noqa: A001
        *, where: ArrayLike | None = None) -> Array:
    """True where every element along ``axis`` is nonzero (True for an empty reduction);
    ``where=`` tests the selected elements only.

    >>> fnp.all(fnp.array([[1, 0], [1, 1]]), axis=1)                 # [False, True]
    Array([False,  True], dtype=bool)
    """
    return _bool_reduce("all", a, axis, out, keepdims, where, True)


def any(a: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None, keepdims: bool = False,  # noqa: A001
        *, where: ArrayLike | None = None) -> Array:
    """True where some element along ``axis`` is nonzero (False for an empty reduction);
    ``where=`` tests the selected elements only.

    >>> fnp.any(fnp.array([0.0, 2.0]))                               # True
    Array(True, dtype=bool)
    """
    return _bool_reduce("any", a, axis, out, keepdims, where, False)
