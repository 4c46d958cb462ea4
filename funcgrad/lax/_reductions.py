"""Reductions, scans and sorting of ``funcgrad.lax``: ``reduce`` (monoids recognised as the reduce
primitives), ``reduce_and``/``reduce_or``/``reduce_xor``, the cumulative ``cumprod``/``cummax``/``cummin``/
``cumlogsumexp`` (associative scans), ``reduce_window``, ``sort``, ``sort_key_val`` and ``top_k``. Written with
the operations of ``_ops``; the other parts of the API gathered in ``_more`` are in ``_slicing``, ``_arith``
and ``_dot_conv``.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from funcgrad._dtypes import ShapedArray, describe
from funcgrad.lax._associative_scan import associative_scan
from funcgrad.lax._arith import _int_operands
from funcgrad.lax._ops import Array, _axis, _ndim, lax
from funcgrad.lax._slicing import broadcasted_iota, dtype, pad, slice, slice_in_dim  # noqa: A004 (lax.slice)
from funcgrad.primitives import elementwise as _E, reduce as _R
from funcgrad.primitives import shape as _S
from funcgrad.primitives.shape import shape_of
from funcgrad.primitives.subprograms import trace_sub


# ------------------------------------------------------------------ reductions and scans

def _monoid(computation: Callable, x: Any) -> tuple[Any, Callable] | None:
    """(the reduction primitive, the binary function) when ``computation`` is addition, multiplication,
    max or min -- found as JAX does, by tracing it on two scalars of ``x``'s dtype and reading the one
    equation it makes (so ``lax.add``, ``fnp.maximum``, ``operator.mul`` and ``lambda a, b: a + b`` all count)."""
    scalar = ShapedArray((), dtype(x))
    try:
        sub, consts = trace_sub(lambda a, b: [computation(a, b)], [scalar, scalar])
    except Exception:   # not traceable as a binary function: reported below as unsupported
        return None
    eqns = sub.jaxpr.eqns
    if consts or len(eqns) != 1 or [id(v) for v in eqns[0].inputs] != [id(v) for v in sub.jaxpr.invars]:
        return None
    return _MONOIDS.get(eqns[0].prim)


_MONOIDS = {_E.add_p: (_S.reduce_sum_p, _E.add), _E.mul_p: (_R.reduce_prod_p, _E.mul),
            _E.maximum_p: (_R.reduce_max_p, lax.max), _E.minimum_p: (_R.reduce_min_p, lax.min)}


def reduce(operands: Any, init_values: Any, computation: Callable, dimensions: Sequence[int]) -> Any:
    """Reduce over ``dimensions`` with ``computation``, as ``jax.lax.reduce``, for the monoids
    ``lax.add``/``mul``/``max``/``min`` (the init value is combined in once).

    >>> lax.reduce(fnp.array([[1.0, 2.0], [3.0, 4.0]]), 0.0, lax.add, (0,))
    Array([4., 6.], dtype=float32)
    """
    single = not isinstance(operands, (tuple, list))
    monoid = _monoid(computation, operands) if single else None
    if monoid is None:
        raise NotImplementedError("reduce: funcgrad reduces one operand with addition, multiplication, max or min "
                                  "(lax.add, lax.mul, lax.max, lax.min); write other reductions with lax.scan or "
                                  "the numpy reductions")
    reduction, combine = monoid
    return combine(reduction.bind(operands, axes=tuple(int(d) for d in dimensions)), init_values)


def _reduce_bool(op: str, combine: Callable, operand: Array, axes: Sequence[int]) -> Array:
    _int_operands(op, operand)
    if np.dtype(dtype(operand)).kind != "b":
        raise TypeError(f"{op}: funcgrad reduces bool operands only, got {describe(operand)}")
    as_int = lax.convert(operand, np.int32)
    return combine(as_int, tuple(int(a) for a in axes))


def reduce_and(operand: Array, axes: Sequence[int]) -> Array:
    """True where every element along ``axes`` is True.

    >>> lax.reduce_and(fnp.array([[True, False], [True, True]]), (1,))
    Array([False,  True], dtype=bool)
    """
    return lax.eq(_reduce_bool("reduce_and", lax.reduce_min, operand, axes), 1)


def reduce_or(operand: Array, axes: Sequence[int]) -> Array:
    """True where any element along ``axes`` is True.

    >>> lax.reduce_or(fnp.array([[True, False], [False, False]]), (1,))
    Array([ True, False], dtype=bool)
    """
    return lax.eq(_reduce_bool("reduce_or", lax.reduce_max, operand, axes), 1)


def reduce_xor(operand: Array, axes: Sequence[int]) -> Array:
    """True where an odd number of elements along ``axes`` are True.

    >>> lax.reduce_xor(fnp.array([[True, True], [True, False]]), (1,))
    Array([False,  True], dtype=bool)
    """
    return lax.eq(lax.rem(_reduce_bool("reduce_xor", lax.reduce_sum, operand, axes), 2), 1)


def _cumulative(fn: Callable, doc: str) -> Callable:
    def cumulative(operand: Array, axis: int = 0, reverse: bool = False) -> Array:
        axis = _axis(fn.__name__, axis, _ndim(operand), operand)
        return associative_scan(fn, operand, reverse=reverse, axis=axis)
    cumulative.__doc__ = doc + " Written as an associative scan, so gradients hold with zeros and ties."
    return cumulative


def _logaddexp(a: Array, b: Array) -> Array:
    hi = lax.max(a, b)
    # exp(-inf - -inf) would be NaN: where both are -inf the sum is -inf.
    safe = lax.select(lax.eq(hi, -np.inf), 0.0, hi)
    return lax.add(safe, lax.log(lax.add(lax.exp(lax.sub(a, safe)), lax.exp(lax.sub(b, safe)))))


cumprod = _cumulative(lax.mul, "Running product along ``axis``.")
cummax = _cumulative(lax.max, "Running maximum along ``axis``.")
cummin = _cumulative(lax.min, "Running minimum along ``axis``.")
cumlogsumexp = _cumulative(_logaddexp, "Running ``log(sum(exp(x)))`` along ``axis``, computed stably.")
for _f, _n in ((cumprod, "cumprod"), (cummax, "cummax"), (cummin, "cummin"), (cumlogsumexp, "cumlogsumexp")):
    _f.__name__ = _f.__qualname__ = _n

# One checked example for each cumulative function: (function, call, printed result).
_CUMULATIVE_EXAMPLES = (
    (cumprod, 'lax.cumprod(fnp.array([1.0, 2.0, 3.0]))', 'Array([1., 2., 6.], dtype=float32)'),
    (cummax, 'lax.cummax(fnp.array([1.0, 3.0, 2.0]))', 'Array([1., 3., 3.], dtype=float32)'),
    (cummin, 'lax.cummin(fnp.array([3.0, 1.0, 2.0]))', 'Array([3., 1., 1.], dtype=float32)'),
    (cumlogsumexp, 'lax.cumlogsumexp(fnp.array([0.0, 0.0, 0.0]))', 'Array([0. , 0.6931, 1.0986], dtype=float32)'),
)
for _f, _call, _result in _CUMULATIVE_EXAMPLES:
    _f.__doc__ += f"\n\n    >>> {_call}\n    {_result}\n"


def reduce_window(operand: Array, init_value: Any, computation: Callable, window_dimensions: Sequence[int],
                  window_strides: Sequence[int] | None = None, padding: Any = "VALID",
                  base_dilation: Sequence[int] | None = None, window_dilation: Sequence[int] | None = None) -> Array:
    """Reduce every window of ``window_dimensions`` (pooling), as ``jax.lax.reduce_window``, for
    ``lax.add``/``mul``/``max``/``min``: the strided windows are combined offset by offset, so the
    gradient is that of the elementwise combiner. ``padding`` is "VALID", "SAME" or (low, high) pairs,
    padded with ``init_value``.

    >>> lax.reduce_window(fnp.arange(4.0), -fnp.inf, lax.max, (2,), (1,), "VALID")
    Array([1., 2., 3.], dtype=float32)
    """
    monoid = _monoid(computation, operand)
    if monoid is None:
        raise NotImplementedError("reduce_window: funcgrad supports addition, multiplication, max and min "
                                  "(lax.add, lax.mul, lax.max, lax.min)")
    reduction, combine = monoid
    shape = shape_of(operand)
    nd = len(shape)
    window = tuple(int(w) for w in window_dimensions)
    strides = (1,) * nd if window_strides is None else tuple(int(s) for s in window_strides)
    dilation = (1,) * nd if window_dilation is None else tuple(int(d) for d in window_dilation)
    if base_dilation is not None and any(int(d) != 1 for d in base_dilation):
        raise NotImplementedError("reduce_window: base_dilation other than 1 is not supported")
    if not len(window) == len(strides) == len(dilation) == nd:
        raise ValueError(f"reduce_window: window {window}, strides {strides} and window_dilation {dilation} need one "
                         f"entry per axis of {describe(operand)}")
    effective = tuple((w - 1) * d + 1 for w, d in zip(window, dilation))
    pads = _padding_pairs("reduce_window", padding, shape, effective, strides)
    init = init_value.item() if hasattr(init_value, "item") else init_value
    x = pad(operand, init, [(lo, hi, 0) for lo, hi in pads])
    padded = shape_of(x)
    out_shape = tuple((n - e) // s + 1 for n, e, s in zip(padded, effective, strides))
    out = None
    for offset in np.ndindex(*window):
        start = [o * d for o, d in zip(offset, dilation)]
        limit = [st + (m - 1) * s + 1 for st, m, s in zip(start, out_shape, strides)]
        piece = slice(x, start, limit, strides)
        out = piece if out is None else combine(out, piece)
    # max/min windows already saw the init value in their padding; a sum or product takes it once more
    folds_init = reduction in (_S.reduce_sum_p, _R.reduce_prod_p) and init != (0 if reduction is _S.reduce_sum_p else 1)
    return combine(out, init) if folds_init else out


def _padding_pairs(op: str, padding: Any, shape: Sequence[int], window: Sequence[int],
                   strides: Sequence[int]) -> list[tuple[int, int]]:
    """(low, high) per axis for "VALID", "SAME" (XLA's rule: extra on the high side) or explicit pairs."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return [(0, 0)] * len(shape)
        if mode in ("SAME", "SAME_LOWER"):
            pairs = []
            for n, w, s in zip(shape, window, strides):
                total = max((-(-n // s) - 1) * s + w - n, 0)
                small, big = total // 2, total - total // 2
                pairs.append((small, big) if mode == "SAME" else (big, small))
            return pairs
        raise ValueError(f"{op}: padding {padding!r} must be 'VALID', 'SAME', 'SAME_LOWER' or (low, high) pairs")
    pairs = [tuple(int(v) for v in p) for p in padding]
    if len(pairs) != len(shape) or any(len(p) != 2 for p in pairs):
        raise ValueError(f"{op}: padding {padding} must give one (low, high) pair per axis ({len(shape)})")
    return pairs


# ------------------------------------------------------------------ sorting


def _take_along(x: Array, idx: Array, axis: int) -> Array:
    """``x`` gathered with ``idx`` along ``axis`` (``idx`` has ``x``'s shape there or fewer along ``axis``)."""
    shape = shape_of(idx)
    index = tuple(idx if a == axis else broadcasted_iota(np.int32, shape, a) for a in range(len(shape)))
    return lax.getitem(x, index)


def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
    """Sort along ``dimension``; a tuple of operands is sorted by its first ``num_keys`` (lexicographically)
    and every operand permuted alike. NaNs sort last; differentiable (the gradient is un-permuted).

    >>> lax.sort(fnp.array([3.0, 1.0, 2.0]))
    Array([1., 2., 3.], dtype=float32)
    """
    single = not isinstance(operand, (tuple, list))
    ops = [operand] if single else list(operand)
    if not 1 <= num_keys <= len(ops):
        raise ValueError(f"sort: num_keys={num_keys} must be between 1 and the number of operands ({len(ops)})")
    dim = _axis("sort", dimension, _ndim(ops[0]), ops[0])
    order = None
    for key in reversed(ops[:num_keys]):   # stable sorts from the last key to the first: lexicographic order
        keyed = key if order is None else _take_along(key, order, dim)
        step = lax.argsort(lax.stop_gradient(keyed), dim)
        order = step if order is None else _take_along(order, step, dim)
    out = [_take_along(o, order, dim) for o in ops]
    return out[0] if single else tuple(out)


def sort_key_val(keys: Array, values: Array, dimension: int = -1, is_stable: bool = True) -> tuple[Array, Array]:
    """``keys`` sorted along ``dimension`` and ``values`` permuted alike.

    >>> lax.sort_key_val(fnp.array([3.0, 1.0, 2.0]), fnp.array([0, 1, 2]))
    (Array([1., 2., 3.], dtype=float32), Array([1, 2, 0], dtype=int32))
    """
    return sort((keys, values), dimension, is_stable, num_keys=1)


def top_k(operand: Array, k: int) -> tuple[Array, Array]:
    """The ``k`` largest entries along the last axis, largest first, and their indices (ties: lower index
    first, as JAX).

    >>> lax.top_k(fnp.array([1.0, 4.0, 2.0, 3.0]), 2)
    (Array([4., 3.], dtype=float32), Array([1, 3], dtype=int32))
    """
    n = shape_of(operand)[-1]
    if not 0 <= int(k) <= n:
        raise ValueError(f"top_k: k={k} must be between 0 and the last axis of {describe(operand)} ({n})")
    last = _ndim(operand) - 1
    # Sort the negation stably so equal values keep index order; NaN counts as the largest, as in JAX.
    key = lax.neg(lax.stop_gradient(operand))
    key = lax.select(lax.isnan(key), -np.inf, key)
    order = slice_in_dim(lax.argsort(key, last), 0, int(k), 1, last)
    return _take_along(operand, order, last), lax.convert(order, np.int32)
