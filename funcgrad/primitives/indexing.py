"""Indexing and joining: ``getitem`` (gather), its transposes ``scatter_add`` /
``scatter_set``, and ``concatenate``, ``pad``, ``flip`` (whose transposes slice).

An index is split into a hashable *template* (a static parameter) and the
integer index arrays (operands).  Template items::

    ("i", n)                 an integer
    ("s", start, stop, step) a slice
    ("n",)                   None (new axis)
    ("e",)                   Ellipsis
    ("a", k)                 the k-th index-array operand

Boolean masks are turned into integer arrays with ``nonzero``; that needs a
concrete mask (not under jit or vmap), since the result's shape depends on it.
Duplicate indices in ``scatter_add`` accumulate (as in ``x.at[i].add(v)``);
in ``scatter_set`` the last write wins.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad import _core
from funcgrad._core import Array, Primitive, Tracer, zeros_like
from funcgrad._dtypes import ShapedArray, describe, result_type
from funcgrad.primitives.elementwise import eq, mul, select
from funcgrad.primitives.shape import linear_jvp, move_to_front, moveaxis, reshape, shape_of, unbroadcast

# ------------------------------------------------------ index normalisation


def _is_int_array(x: Any) -> bool:
    return isinstance(x, (Array, Tracer, np.ndarray)) and x.dtype.kind in "iu"


def _is_bool_array(x: Any) -> bool:
    if isinstance(x, (Array, Tracer, np.ndarray)):
        return x.dtype.kind == "b"
    return isinstance(x, list) and len(x) > 0 and all(isinstance(v, bool) for v in x)


def _axes_used(item: Any) -> int:
    """How many axes of the indexed array an index item consumes (Ellipsis: counted apart)."""
    if item is None or item is Ellipsis:
        return 0
    if _is_bool_array(item):
        return len(np.shape(item)) if not isinstance(item, (Array, Tracer)) else item.ndim
    return 1


def _start_axis(index: tuple, k: int, ndim: int) -> int:
    """The axis of the indexed array at which index item ``k`` starts (Ellipsis spans what the others leave)."""
    used = [_axes_used(item) for item in index]
    return sum(ndim - sum(used) if item is Ellipsis else n for item, n in zip(index[:k], used[:k]))


def _check_mask(mask_shape: tuple[int, ...], shape: tuple[int, ...], axis: int, target: Any, op: str) -> None:
    """A boolean mask must match the axes it covers exactly (numpy raises IndexError; so do we)."""
    what = describe(target) if target is not None else f"of shape {shape}"
    mask = f"bool[{','.join(map(str, mask_shape))}]"
    if axis + len(mask_shape) > len(shape):
        raise IndexError(f"{op}: boolean mask {mask} at axis {axis} covers {len(mask_shape)} axes, but the array "
                         f"{what} has only {len(shape)}: too many indices")
    for k, n in enumerate(mask_shape):
        if shape[axis + k] != n:
            raise IndexError(f"{op}: boolean mask {mask} does not match the array {what} along axis {axis + k}: "
                             f"size of axis is {shape[axis + k]} but size of corresponding boolean axis is {n}. A "
                             "mask must have the shape of the axes it selects from (as in numpy)")


def split_index(index: Any, shape: tuple[int, ...], target: Any = None, op: str = "getitem") -> tuple[tuple, list]:
    """Normalise a numpy-style index into (template, index arrays).

    ``target`` (the indexed array) and ``op`` only serve error messages.
    """
    if not isinstance(index, tuple):
        index = (index,)
    template: list[tuple] = []
    arrays: list[Any] = []
    for k, item in enumerate(index):
        if item is None:
            template.append(("n",))
        elif item is Ellipsis:
            template.append(("e",))
        elif isinstance(item, slice):
            template.append(("s", _static_int(item.start), _static_int(item.stop), _static_int(item.step)))
        elif isinstance(item, (bool, np.bool_)):
            raise IndexError("indexing with a Python bool is not supported; use a boolean array mask")
        elif isinstance(item, (int, np.integer)):
            template.append(("i", int(item)))
        elif _is_bool_array(item):
            mask = item.concrete_value() if isinstance(item, Tracer) else np.asarray(item)
            _check_mask(np.shape(mask), shape, _start_axis(index, k, len(shape)), target, op)
            for nz in np.nonzero(np.asarray(mask)):
                template.append(("a", len(arrays)))
                arrays.append(_core.as_array(nz.astype(np.int64)))
        elif isinstance(item, (list, tuple)) or _is_int_array(item):
            arr = _core.as_array(item) if not isinstance(item, (Array, Tracer)) else item
            if arr.dtype.kind not in "iu":
                raise IndexError(f"index arrays must be integers or booleans, got {describe(arr)}")
            if arr.ndim == 0 and isinstance(arr, Array):
                template.append(("i", int(arr.item())))
                continue
            template.append(("a", len(arrays)))
            arrays.append(arr)
        elif isinstance(item, (Array, Tracer)) and item.ndim == 0 and item.dtype.kind in "iu":
            template.append(("i", int(item)))
        else:
            raise IndexError(f"unsupported index {item!r:.60} of type {type(item).__name__}: use ints, slices, "
                             "None, Ellipsis, integer arrays or boolean masks")
    return tuple(template), arrays


def _static_int(v: Any) -> int | None:
    if v is None:
        return None
    try:
        return int(v)
    except TypeError:
        raise IndexError(f"slice bounds must be static integers, got {v!r:.60}") from None


def build_index(template: tuple, arrays: Sequence[Any]) -> tuple:
    out = []
    for item in template:
        kind = item[0]
        if kind == "i":
            out.append(item[1])
        elif kind == "s":
            out.append(slice(item[1], item[2], item[3]))
        elif kind == "n":
            out.append(None)
        elif kind == "e":
            out.append(Ellipsis)
        else:
            out.append(arrays[item[1]])
    return tuple(out)


def _advanced_are_adjacent(template: tuple) -> bool:
    has_arrays = any(t[0] == "a" for t in template)
    positions = [i for i, t in enumerate(template) if t[0] == "a" or (has_arrays and t[0] == "i")]
    return not positions or positions[-1] - positions[0] + 1 == len(positions)


def _index_rank(arrays: Sequence[Any]) -> int:
    return len(np.broadcast_shapes(*[shape_of(a) for a in arrays])) if arrays else 0


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


def _getitem_vjp(ct, primals, out, needs, template):
    x, arrays = primals[0], primals[1:]
    zero = zeros_like(x, ct.dtype)
    return (scatter_add_p.bind(zero, ct, *arrays, template=template),) + (None,) * len(arrays)


def _getitem_jvp(primals, tangents, template):
    x, arrays = primals[0], primals[1:]
    return getitem_p.bind(x, *arrays, template=template), getitem_p.bind(tangents[0], *arrays, template=template)


getitem_p.batch, getitem_p.vjp, getitem_p.jvp = _getitem_batch, _getitem_vjp, _getitem_jvp


def getitem(x: Any, index: Any) -> Any:
    template, arrays = split_index(index, shape_of(x), x)
    return getitem_p.bind(x, *arrays, template=template)


def static_slice(x: Any, axis: int, start: int, stop: int) -> Any:
    index = (slice(None),) * axis + (slice(start, stop),)
    return getitem(x, index)


# ---------------------------------------------------------------- scatter


def _scatter_impl(mode: str):
    # The reference; the CPU backend runs the embedding-gradient pattern of
    # scatter_add (one 1-d index array of rows) through a numba kernel.
    def impl(x, y, *arrays, template):
        out = np.array(x, dtype=np.result_type(x, y), copy=True)
        index = build_index(template, arrays)
        if mode == "set":
            out[index] = y
        elif arrays:
            np.add.at(out, index, y)   # accumulates duplicate indices
        else:
            out[index] += y            # basic indices never repeat
        return out
    return impl


def _scatter_aval(name: str):
    def rule(x, y, *arrays, template):
        dummy = np.broadcast_to(np.zeros((), x.dtype), x.shape)
        try:
            target = dummy[build_index(template, [np.zeros(shape_of(a), np.intp) for a in arrays])]
            np.broadcast_to(np.zeros((), y.dtype if hasattr(y, "dtype") else float), np.shape(target)) \
                if shape_of(y) == () else np.broadcast_shapes(shape_of(y), np.shape(target))
        except (IndexError, ValueError) as e:
            raise ValueError(f"{name}: cannot update an array {describe(x)} at the given index with a value "
                             f"{describe(y)}: {e}") from None
        return ShapedArray(x.shape, result_type(x, y))
    return rule


scatter_add_p = Primitive("scatter_add")
scatter_add_p.impl = _scatter_impl("add")
scatter_add_p.abstract_eval = _scatter_aval("scatter_add")
scatter_set_p = Primitive("scatter_set")
scatter_set_p.impl = _scatter_impl("set")
scatter_set_p.abstract_eval = _scatter_aval("scatter_set")


def _updated_part(ct, y, arrays, template):
    return unbroadcast(getitem_p.bind(ct, *arrays, template=template), shape_of(y))


def _scatter_add_vjp(ct, primals, out, needs, template):
    y, arrays = primals[1], primals[2:]
    cy = _updated_part(ct, y, arrays, template) if needs[1] else None
    return (ct if needs[0] else None, cy) + (None,) * len(arrays)


def _target_shape(x_shape: tuple[int, ...], template: tuple, arrays: Sequence[Any]) -> tuple[int, ...]:
    """Shape of ``x[index]``: the region an update value is broadcast to."""
    dummy = np.broadcast_to(np.zeros((), np.int8), x_shape)
    return np.shape(dummy[build_index(template, [np.zeros(shape_of(a), np.intp) for a in arrays])])


def _landed(x_shape: tuple[int, ...], arrays: Sequence[Any], template: tuple) -> Any:
    """Bool mask over ``x[index]``: True where that update element is the one that stays.

    With duplicate indices only one write survives (numpy: the last), so the
    others must get no cotangent.  Scatter the update positions' ids with the
    same primitive as the forward pass and read back who won.
    """
    target = _target_shape(x_shape, template, arrays)
    ids = _core.as_array(np.arange(int(np.prod(target, dtype=np.int64)), dtype=np.int32).reshape(target))
    board = _core.as_array(np.full(x_shape, -1, dtype=np.int32))
    winners = scatter_set_p.bind(board, ids, *arrays, template=template)
    return eq(getitem_p.bind(winners, *arrays, template=template), ids)


def _scatter_set_vjp(ct, primals, out, needs, template):
    x, y, arrays = primals[0], primals[1], primals[2:]
    cx = scatter_set_p.bind(ct, 0.0, *arrays, template=template) if needs[0] else None
    cy = None
    if needs[1]:
        part = getitem_p.bind(ct, *arrays, template=template)
        if arrays:   # index arrays may repeat: only the surviving writes get a cotangent
            part = select(_landed(shape_of(x), arrays, template), part, mul(part, 0.0))
        cy = unbroadcast(part, shape_of(y))
    return (cx, cy) + (None,) * len(arrays)


def _scatter_jvp(p: Primitive):
    def jvp(primals, tangents, template):
        x, y, arrays = primals[0], primals[1], primals[2:]
        tx = zeros_like(x) if tangents[0] is None else tangents[0]
        ty = zeros_like(y) if tangents[1] is None else tangents[1]
        return p.bind(x, y, *arrays, template=template), p.bind(tx, ty, *arrays, template=template)
    return jvp


def _scatter_batch(p: Primitive):
    def rule(values, dims, size, template):
        x, y, arrays = values[0], values[1], values[2:]
        new_template = (("s", None, None, None),) + template
        if any(d is not None for d in dims[2:]) or (dims[1] is not None and _batch_position(new_template, arrays)):
            return batch_by_loop(p)(values, dims, size, template=template)
        x = move_to_front(x, dims[0], size)
        if dims[1] is not None:
            target_rank = len(np.shape(np.broadcast_to(np.zeros((), np.int8), shape_of(x))[
                build_index(new_template, [np.zeros(shape_of(a), np.intp) for a in arrays])]))
            y = moveaxis(y, dims[1], 0)
            inner = shape_of(y)[1:]
            y = reshape(y, (size,) + (1,) * (target_rank - 1 - len(inner)) + inner)
        return p.bind(x, y, *arrays, template=new_template), 0
    return rule


scatter_add_p.vjp, scatter_add_p.jvp, scatter_add_p.batch = (
    _scatter_add_vjp, _scatter_jvp(scatter_add_p), _scatter_batch(scatter_add_p))
scatter_set_p.vjp, scatter_set_p.jvp, scatter_set_p.batch = (
    _scatter_set_vjp, _scatter_jvp(scatter_set_p), _scatter_batch(scatter_set_p))


def scatter_set(x: Any, index: Any, value: Any, op: str = "scatter_set") -> Any:
    """``x`` with ``x[index]`` replaced by ``value`` (numpy indexing; the last duplicate write wins)."""
    template, arrays = split_index(index, shape_of(x), x, op)
    return scatter_set_p.bind(x, value, *arrays, template=template)


def scatter_add(x: Any, index: Any, value: Any, op: str = "scatter_add") -> Any:
    """``x`` with ``value`` added at ``x[index]`` (numpy indexing; duplicate indices accumulate)."""
    template, arrays = split_index(index, shape_of(x), x, op)
    return scatter_add_p.bind(x, value, *arrays, template=template)


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

