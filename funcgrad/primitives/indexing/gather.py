"""Gathers and joins: the ``getitem`` primitive (``x[index]``) and its wrappers ``getitem`` /
``static_slice``, ``concatenate``, ``pad``, ``flip`` (whose transposes slice), and ``batch_by_loop``
(the per-example batching rule every primitive can fall back to).

The index templates and out-of-bounds modes these use are in ``normalize.py``; the scatters, and the
getitem primitive's transpose (a ``scatter_add``), in ``scatter.py``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad import _core
from funcgrad._core import Primitive
from funcgrad._dtypes import ShapedArray, describe, result_type
from funcgrad.primitives.elementwise import select
from funcgrad.primitives.indexing.normalize import (_advanced_are_adjacent, _fill_scalar, _gather_how, _index_rank,
                                                    _masked_single_array, _pad_widths, build_index, normalize_indices,
                                                    split_index)
from funcgrad.primitives.shape import linear_jvp, move_to_front, moveaxis, reshape, shape_of

# ---------------------------------------------------------------- getitem

getitem_p = Primitive("getitem")


def _getitem_impl(x, *arrays, template):
    return x[build_index(template, arrays)]


getitem_p.impl = _getitem_impl


def _batch_position(template: tuple, arrays: Sequence[Any]) -> int:
    # With a leading full slice prepended, the batch axis stays first unless
    # the advanced indices are split up, in which case numpy moves their
    # dimensions to the front.
    return 0 if _advanced_are_adjacent(template) else _index_rank(arrays)


def _getitem_batch(values, dims, size, template):
    x, arrays = values[0], values[1:]
    if any(d is not None for d in dims[1:]):
        return batch_by_loop(getitem_p)(values, dims, size, template=template)
    new_template = (("s", None, None, None),) + template
    out = getitem_p.bind(moveaxis(x, dims[0], 0), *arrays, template=new_template)
    return out, _batch_position(new_template, arrays)


def _getitem_jvp(primals, tangents, template):
    x, arrays = primals[0], primals[1:]
    return getitem_p.bind(x, *arrays, template=template), getitem_p.bind(tangents[0], *arrays, template=template)


getitem_p.batch, getitem_p.jvp = _getitem_batch, _getitem_jvp


def getitem(x: Any, index: Any, mode: str | None = None, fill_value: Any = None, *,
            wrap_negative_indices: bool = True, op: str = "getitem") -> Any:
    """``x[index]`` (numpy indexing) with JAX's out-of-bounds rule for the gathered positions.

    ``mode``: None or ``"clip"`` / ``"promise_in_bounds"`` clamp each index into its axis (after a
    negative index has counted once from the end), as JAX's ``x[i]`` does; ``"fill"`` gives
    ``fill_value`` (default: NaN for inexact dtypes, the most negative value for signed integers,
    the largest for unsigned, True for bool) at out-of-bounds positions. With
    ``config.checked_indexing`` set, the default mode raises an IndexError instead.

    >>> lax.getitem(fnp.arange(4), 1)
    Array(1, dtype=int32)
    """
    shape = shape_of(x)
    template, arrays = split_index(index, shape, x, op)
    how = _gather_how(mode, op)
    masked = _masked_single_array(shape, template, arrays, how, wrap_negative_indices)
    if masked is not None:
        # One traced index array (take, embedding lookups under jit): gather at clamped indices and
        # fill the out-of-bounds positions, without copying x into a padded array.
        idx, mask = masked
        out = getitem_p.bind(x, idx, template=template)
        return select(mask, out, _fill_scalar(x, fill_value, op))
    template, arrays, pads = normalize_indices(shape, template, arrays, how, wrap_negative_indices, x, op)
    if pads:
        x = pad_p.bind(x, widths=_pad_widths(len(shape), pads), value=_fill_scalar(x, fill_value, op))
    return getitem_p.bind(x, *arrays, template=template)


def static_slice(x: Any, axis: int, start: int, stop: int) -> Any:
    """``x[..., start:stop, ...]`` on ``axis`` (static bounds).

    >>> lax.static_slice(fnp.arange(6).reshape(2, 3), 1, 0, 2)
    Array([[0, 1],
           [3, 4]], dtype=int32)
    """
    index = (slice(None),) * axis + (slice(start, stop),)
    return getitem(x, index)


def batch_by_loop(prim: Primitive):
    """A correct (slow) batching rule for any primitive: apply it per example and stack."""
    def take(v: Any, i: int, axis: int) -> Any:
        return getitem(v, (slice(None),) * axis + (i,))

    def stack(xs: Sequence[Any]) -> Any:
        return concatenate_p.bind(*[reshape(x, (1,) + shape_of(x)) for x in xs], axis=0)

    def rule(values, dims, size, **params):
        per_example = []
        for i in range(size):
            args = [v if d is None else take(v, i, d) for v, d in zip(values, dims)]
            per_example.append(_core.bind(prim, args, params))
        if prim.multiple_results:
            outs = [stack([ex[j] for ex in per_example]) for j in range(len(per_example[0]))]
            return outs, [0] * len(outs)
        return stack(per_example), 0
    return rule


# ------------------------------------------------------------ concatenate


def _concat_impl(*xs, axis):
    return np.concatenate(xs, axis=axis)


def _concat_aval(*xs, axis):
    first = shape_of(xs[0])
    for x in xs[1:]:
        s = shape_of(x)
        if len(s) != len(first) or any(a != b for i, (a, b) in enumerate(zip(s, first)) if i != axis):
            raise ValueError(f"concatenate: arrays {', '.join(describe(x) for x in xs)} must have the same "
                             f"shape except along axis {axis}")
    total = sum(shape_of(x)[axis] for x in xs)
    return ShapedArray(first[:axis] + (total,) + first[axis + 1:], result_type(*xs))


concatenate_p = Primitive("concatenate")
concatenate_p.impl = _concat_impl
concatenate_p.abstract_eval = _concat_aval
concatenate_p.jvp = linear_jvp(concatenate_p)


def _concat_vjp(ct, primals, out, needs, axis):
    cts, start = [], 0
    for x, need in zip(primals, needs):
        n = shape_of(x)[axis]
        cts.append(static_slice(ct, axis, start, start + n) if need else None)
        start += n
    return cts


def _concat_batch(values, dims, size, axis):
    xs = [move_to_front(v, d, size) for v, d in zip(values, dims)]
    return concatenate_p.bind(*xs, axis=axis + 1), 0


concatenate_p.vjp = _concat_vjp
concatenate_p.batch = _concat_batch

# ------------------------------------------------------------------- pad

pad_p = Primitive("pad")
pad_p.impl = lambda x, widths, value: np.pad(x, widths, mode="constant", constant_values=value)


def _pad_aval(x, widths, value):
    if len(widths) != len(shape_of(x)) or any(lo < 0 or hi < 0 for lo, hi in widths):
        raise ValueError(f"pad: widths {widths} do not fit an array {describe(x)} (one non-negative "
                         "(before, after) pair per axis)")
    return ShapedArray(tuple(s + lo + hi for s, (lo, hi) in zip(x.shape, widths)), x.dtype)


def _pad_vjp(ct, primals, out, needs, widths, value):
    index = tuple(slice(lo, lo + s) for s, (lo, hi) in zip(shape_of(primals[0]), widths))
    return (getitem(ct, index),)


def _pad_jvp(primals, tangents, widths, value):
    t = tangents[0]
    return pad_p.bind(primals[0], widths=widths, value=value), pad_p.bind(t, widths=widths, value=0)


pad_p.abstract_eval = _pad_aval
pad_p.jvp = _pad_jvp
pad_p.vjp = _pad_vjp
pad_p.batch = lambda values, dims, size, widths, value: (
    pad_p.bind(moveaxis(values[0], dims[0], 0), widths=((0, 0),) + widths, value=value), 0)

# ------------------------------------------------------------------ flip

flip_p = Primitive("flip")
flip_p.impl = lambda x, axes: np.flip(x, axes)
flip_p.abstract_eval = lambda x, axes: ShapedArray(shape_of(x), x.dtype)
flip_p.jvp = linear_jvp(flip_p)
flip_p.vjp = lambda ct, primals, out, needs, axes: (flip_p.bind(ct, axes=axes),)
flip_p.batch = lambda values, dims, size, axes: (
    flip_p.bind(moveaxis(values[0], dims[0], 0), axes=tuple(a + 1 for a in axes)), 0)
