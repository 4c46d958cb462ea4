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
from funcgrad._array import host_numpy
from funcgrad._config import config
from funcgrad._core import Array, Primitive, Tracer, zeros_like
from funcgrad._dtypes import ShapedArray, describe, result_type
from funcgrad.primitives.elementwise import (add, convert, div, eq, ge_p, lt_p, maximum_p, minimum_p, mod_p, mul,
                                             or_p, select)
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
            mask = item.concrete_value() if isinstance(item, Tracer) else host_numpy(item)   # (a GPU mask too)
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


def _masked_single_array(shape: tuple[int, ...], template: tuple, arrays: Sequence[Any], how: str,
                         wrap_negative: bool) -> tuple[Any, Any] | None:
    """For "fill" with exactly one traced index array and no integer items: (clamped index array,
    validity mask shaped to broadcast over ``x[index]``); None when the padded path applies."""
    if how != "fill" or len(arrays) != 1 or not isinstance(arrays[0], Tracer) or any(t[0] == "i" for t in template):
        return None
    k = _first_array_item(template)
    n = shape[_item_axes(template, len(shape))[k]]
    if n == 0:
        return None
    a = arrays[0]
    if a.dtype.kind == "u" or a.dtype.itemsize < 4:
        a = convert(a, np.int32)
    if wrap_negative:
        a = select(lt_p.bind(a, 0), add(a, n), a)
    bad = or_p.bind(lt_p.bind(a, 0), ge_p.bind(a, n))
    a = maximum_p.bind(minimum_p.bind(a, n - 1), 0)
    consumed = sum(1 for t in template if t[0] in "isa")
    dims = [1 if t[0] in "ns" else max(len(shape) - consumed, 0) if t[0] == "e" else 0 for t in template]
    before, after = sum(dims[:k]), sum(dims[k + 1:])
    if not any(t[0] == "e" for t in template):
        after += len(shape) - consumed    # the axes the index leaves implicit at the end
    valid = eq(bad, False)
    mask = reshape(valid, (1,) * before + shape_of(a) + (1,) * after)
    return a, mask


def static_slice(x: Any, axis: int, start: int, stop: int) -> Any:
    """``x[..., start:stop, ...]`` on ``axis`` (static bounds).

    >>> lax.static_slice(fnp.arange(6).reshape(2, 3), 1, 0, 2)
    Array([[0, 1],
           [3, 4]], dtype=int32)
    """
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


# scatter_max / scatter_min: ``x`` with ``x[index] = max(x[index], y)``, every duplicate index
# applied (numpy's ufunc.at). Derivatives follow JAX: where several candidates (the operand and
# any updates) tie for the extremum, they share the tangent/cotangent equally.


def _extremal_impl(ufunc):
    def impl(x, y, *arrays, template):
        out = np.array(x, dtype=np.result_type(x, y), copy=True)
        index = build_index(template, arrays)
        ufunc.at(out, index, np.broadcast_to(np.asarray(y, out.dtype), np.shape(out[index])))
        return out
    return impl


def _extremal_wins(x, y, out, arrays, template):
    """(operand wins, update wins (target-shaped), number of winners per position), as floats."""
    dtype = result_type(out, 0.0)
    x_wins = convert(eq(x, out), dtype)
    y_wins = convert(eq(y, getitem_p.bind(out, *arrays, template=template)), dtype)
    count = add(x_wins, scatter_add_p.bind(zeros_like(out, dtype), y_wins, *arrays, template=template))
    return x_wins, y_wins, count


def _extremal_jvp(p: Primitive):
    def jvp(primals, tangents, template):
        x, y, arrays = primals[0], primals[1], primals[2:]
        out = p.bind(x, y, *arrays, template=template)
        x_wins, y_wins, count = _extremal_wins(x, y, out, arrays, template)
        tx = zeros_like(x, x_wins.dtype) if tangents[0] is None else tangents[0]
        ty = zeros_like(y, x_wins.dtype) if tangents[1] is None else tangents[1]
        from_y = scatter_add_p.bind(zeros_like(out, x_wins.dtype), mul(y_wins, ty), *arrays, template=template)
        return out, div(add(mul(x_wins, tx), from_y), count)
    return jvp


def _extremal_vjp(p: Primitive):
    def vjp(ct, primals, out, needs, template):
        x, y, arrays = primals[0], primals[1], primals[2:]
        x_wins, y_wins, count = _extremal_wins(x, y, out, arrays, template)
        share = div(ct, count)
        cx = mul(share, x_wins) if needs[0] else None
        cy = (unbroadcast(mul(getitem_p.bind(share, *arrays, template=template), y_wins), shape_of(y))
              if needs[1] else None)
        return (cx, cy) + (None,) * len(arrays)
    return vjp


scatter_max_p = Primitive("scatter_max")
scatter_min_p = Primitive("scatter_min")
for _p, _ufunc in ((scatter_max_p, np.maximum), (scatter_min_p, np.minimum)):
    _p.impl = _extremal_impl(_ufunc)
    _p.abstract_eval = _scatter_aval(_p.name)
    _p.jvp, _p.vjp, _p.batch = _extremal_jvp(_p), _extremal_vjp(_p), _scatter_batch(_p)
del _p, _ufunc


# scatter_mul: ``x`` with ``x[index] *= y``, every duplicate index applied (numpy's multiply.at).
# Linear in ``x``; its derivative in ``y`` is JAX's too: only with unique indices (scatter_combine
# resolves concrete duplicate indices in rounds instead, which differentiate in both).

scatter_mul_p = Primitive("scatter_mul")
scatter_mul_p.impl = _extremal_impl(np.multiply)
scatter_mul_p.abstract_eval = _scatter_aval("scatter_mul")
scatter_mul_p.batch = _scatter_batch(scatter_mul_p)


def _scatter_mul_no_update_derivative() -> NotImplementedError:
    return NotImplementedError(
        "x.at[i].mul/divide: the derivative with respect to the updates needs unique indices (as in JAX): pass "
        "unique_indices=True if the traced indices are unique, or make them static (concrete index arrays)")


def _scatter_mul_jvp(primals, tangents, template):
    x, y, arrays = primals[0], primals[1], primals[2:]
    if tangents[1] is not None:
        raise _scatter_mul_no_update_derivative()
    out = scatter_mul_p.bind(x, y, *arrays, template=template)
    tx = zeros_like(x) if tangents[0] is None else tangents[0]
    return out, scatter_mul_p.bind(tx, y, *arrays, template=template)


def _scatter_mul_vjp(ct, primals, out, needs, template):
    y, arrays = primals[1], primals[2:]
    if needs[1]:
        raise _scatter_mul_no_update_derivative()
    return (scatter_mul_p.bind(ct, y, *arrays, template=template), None) + (None,) * len(arrays)


scatter_mul_p.jvp, scatter_mul_p.vjp = _scatter_mul_jvp, _scatter_mul_vjp


def _scatter(p: Primitive, x: Any, index: Any, value: Any, op: str, mode: str | None,
             wrap_negative_indices: bool) -> Any:
    shape = shape_of(x)
    template, arrays = split_index(index, shape, x, op)
    how = _scatter_how(mode, op)
    if p is scatter_add_p:
        masked = _masked_single_array(shape, template, arrays, how, wrap_negative_indices)
        if masked is not None:   # dropping an addend = adding zero at a clamped index (no padded copy)
            idx, mask = masked
            return p.bind(x, select(mask, value, 0), idx, template=template)
    template, arrays, pads = normalize_indices(shape, template, arrays, how, wrap_negative_indices, x, op)
    if not pads:
        return p.bind(x, value, *arrays, template=template)
    # Out-of-bounds updates land in one extra slot per indexed axis, sliced off afterwards.
    out = p.bind(pad_p.bind(x, widths=_pad_widths(len(shape), pads), value=0), value, *arrays, template=template)
    return getitem_p.bind(out, template=tuple(("s", 0, n, None) for n in shape))


def scatter_set(x: Any, index: Any, value: Any, op: str = "scatter_set", mode: str | None = None, *,
                wrap_negative_indices: bool = True) -> Any:
    """``x`` with ``x[index]`` replaced by ``value`` (numpy indexing; the last duplicate write wins).

    Out-of-bounds updates are dropped (JAX's default ``mode="drop"``/``"fill"``); ``mode="clip"``
    clamps the indices instead; ``"promise_in_bounds"`` checks nothing (an out-of-bounds index
    raises an IndexError when the update runs). ``config.checked_indexing`` makes the default raise.
    """
    return _scatter(scatter_set_p, x, index, value, op, mode, wrap_negative_indices)


def scatter_add(x: Any, index: Any, value: Any, op: str = "scatter_add", mode: str | None = None, *,
                wrap_negative_indices: bool = True) -> Any:
    """``x`` with ``value`` added at ``x[index]`` (numpy indexing; duplicate indices accumulate).

    Out-of-bounds updates are dropped by default; ``mode`` as in :func:`scatter_set`.
    """
    return _scatter(scatter_add_p, x, index, value, op, mode, wrap_negative_indices)


def scatter_max(x: Any, index: Any, value: Any, op: str = "scatter_max", mode: str | None = None, *,
                wrap_negative_indices: bool = True) -> Any:
    """``x`` with ``x[index] = maximum(x[index], value)``, each duplicate index applied (traced indices too)."""
    return _scatter(scatter_max_p, x, index, value, op, mode, wrap_negative_indices)


def scatter_min(x: Any, index: Any, value: Any, op: str = "scatter_min", mode: str | None = None, *,
                wrap_negative_indices: bool = True) -> Any:
    """``x`` with ``x[index] = minimum(x[index], value)``, each duplicate index applied (traced indices too)."""
    return _scatter(scatter_min_p, x, index, value, op, mode, wrap_negative_indices)


def scatter_combine(x: Any, index: Any, value: Any, combine: Any, op: str, mode: str | None = None, *,
                    unique_indices: bool = False, wrap_negative_indices: bool = True, multiply: bool = False) -> Any:
    """``x`` with ``x[index]`` replaced by ``combine(x[index], value)``, each duplicate index applied in turn.

    The engine of ``x.at[i].mul/divide/power/apply``: duplicates are resolved in rounds (round k
    updates every position's k-th occurrence), which needs the index arrays' values; traced index
    arrays (under jit or vmap) need ``unique_indices=True``, except with ``multiply=True`` (``combine``
    is a product), which then runs the scatter_mul primitive.
    """
    shape = shape_of(x)
    template, arrays = split_index(index, shape, x, op)
    how = _scatter_how(mode, op)
    template, arrays, pads = normalize_indices(shape, template, arrays, how, wrap_negative_indices, x, op)
    rounds: list = [None]
    if arrays and not unique_indices:
        if multiply and any(not _on_host(a) for a in arrays):
            # Traced (or device) indices that may repeat: the scatter_mul primitive applies each duplicate.
            out = x if not pads else pad_p.bind(x, widths=_pad_widths(len(shape), pads), value=0)
            out = scatter_mul_p.bind(out, value, *arrays, template=template)
            return out if not pads else getitem_p.bind(out, template=tuple(("s", 0, n, None) for n in shape))
        if any(isinstance(a, Tracer) for a in arrays):
            raise NotImplementedError(
                f"{op}: the index arrays are traced (under jit or vmap), so funcgrad cannot tell whether they "
                "repeat, and this update is applied once per occurrence of an index. Pass unique_indices=True "
                "if the indices are unique, or make the indices static (static_argnums, numpy arrays)")
        first_axis = _item_axes(template, len(shape))[_first_array_item(template)]
        rounds = _duplicate_rounds(shape, template, arrays, pads)
        if len(rounds) > 1 and first_axis not in pads:
            pads = tuple(sorted(set(pads) | {first_axis}))
    out = x if not pads else pad_p.bind(x, widths=_pad_widths(len(shape), pads), value=0)
    for redirected in rounds:
        idx = list(arrays)
        if redirected is not None:
            idx[0] = redirected
        old = getitem_p.bind(out, *idx, template=template)
        out = scatter_set_p.bind(out, combine(old, value), *idx, template=template)
    if pads:
        out = getitem_p.bind(out, template=tuple(("s", 0, n, None) for n in shape))
    return out


# ------------------------------------------------------- out-of-bounds indices
#
# Modes (JAX's names): gathers default to "clip" (x[i] clamps each index into its axis), "fill"
# gives a fill value; scatters default to dropping out-of-bounds updates ("drop"/"fill"), "clip"
# clamps.  Both are written with primitives: indices are clamped with minimum/maximum, and an
# out-of-bounds position is sent to one extra slot padded onto its axis (the fill value for a
# gather, a discarded slot for a scatter), so grad, vmap and jit need no new rules.  Concrete
# index arrays that are in bounds (the common eager case) pass through untouched.

GATHER_MODES = ("clip", "fill", "promise_in_bounds")
SCATTER_MODES = ("clip", "drop", "fill", "promise_in_bounds")


def _mode_name(mode: Any) -> Any:
    name = getattr(mode, "name", None)    # a GatherScatterMode-like enum
    if isinstance(name, str):
        return "fill" if name == "FILL_OR_DROP" else name.lower()
    return mode


def _gather_how(mode: Any, op: str) -> str:
    mode = _mode_name(mode)
    if mode is None:
        return "raw" if config.checked_indexing else "clip"
    if mode in ("clip", "promise_in_bounds"):
        return "clip"
    if mode in ("fill", "wrap"):     # "wrap" (indices modulo the axis): jnp.take's, not a JAX gather mode
        return mode
    raise ValueError(f"{op}: unknown gather mode {mode!r}; expected one of {', '.join(GATHER_MODES)} (or None)")


def _scatter_how(mode: Any, op: str) -> str:
    mode = _mode_name(mode)
    if mode is None:
        return "raw" if config.checked_indexing else "fill"
    if mode == "clip":
        return "clip"
    if mode in ("drop", "fill"):
        return "fill"
    if mode == "promise_in_bounds":
        return "raw"
    raise ValueError(f"{op}: unknown scatter mode {mode!r}; expected one of {', '.join(SCATTER_MODES)} (or None)")


def _item_axes(template: tuple, ndim: int) -> list:
    """The axis of the indexed array each template item indexes (None for None/Ellipsis)."""
    consumed = sum(1 for t in template if t[0] in "isa")
    axes, axis = [], 0
    for t in template:
        if t[0] in "isa":
            axes.append(axis)
            axis += 1
        else:
            axes.append(None)
            if t[0] == "e":
                axis += max(ndim - consumed, 0)
    return axes


def _first_array_item(template: tuple) -> int:
    return next(k for k, t in enumerate(template) if t[0] == "a")


def _pad_widths(ndim: int, pads: Sequence[int]) -> tuple:
    return tuple((0, 1) if d in pads else (0, 0) for d in range(ndim))


def fill_value_for(dtype: Any) -> Any:
    """JAX's default fill for out-of-bounds gathers: NaN, the most negative int, the largest uint, True."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        return float("nan")
    if dtype.kind == "i":
        return int(np.iinfo(dtype).min)
    if dtype.kind == "u":
        return int(np.iinfo(dtype).max)
    return True


def _fill_scalar(x: Any, fill_value: Any, op: str) -> Any:
    if fill_value is None:
        return fill_value_for(x.dtype)
    if isinstance(fill_value, (Array, np.ndarray, np.generic)) and np.ndim(fill_value) == 0:
        return np.asarray(fill_value).item()
    if isinstance(fill_value, (bool, int, float, complex)):
        return fill_value
    raise TypeError(f"{op}: fill_value must be a static scalar (a Python number or a concrete 0-d array), got "
                    f"{describe(fill_value)}")


def _oob_error(op: str, bad: int, axis: int, n: int, x: Any) -> IndexError:
    why = ("config.checked_indexing is on, so out-of-bounds indices raise instead of being clamped (gathers) or "
           "dropped (scatters) as in JAX" if config.checked_indexing else
           "mode='promise_in_bounds' promised indices in bounds; use mode='drop' or 'clip' for indices that may not be")
    return IndexError(f"{op}: index {bad} is out of bounds for axis {axis} with size {n} (array {describe(x)}); "
                      f"{why}")


def normalize_indices(shape: tuple[int, ...], template: tuple, arrays: Sequence[Any], how: str,
                      wrap_negative: bool, x: Any = None, op: str = "getitem") -> tuple[tuple, list, tuple]:
    """Apply an out-of-bounds rule to a split index: ``(template, arrays, padded axes)``.

    ``how``: "clip" clamps into each axis, "fill" sends out-of-bounds positions to index ``n`` of an
    axis padded by one ("raw": left alone, except that concrete indices are checked). Axes in the
    returned tuple must be padded by one slot at their end before the index is used.
    """
    if how == "raw" and not arrays and all(t[0] != "i" for t in template):
        return template, list(arrays), ()
    axes = _item_axes(template, len(shape))
    new_template, new_arrays, pads = list(template), list(arrays), []
    for k, t in enumerate(template):
        if t[0] == "i":
            n, i = shape[axes[k]], t[1]
            lo = -n if wrap_negative else 0
            if lo <= i < n:
                if how == "fill" and i < 0:
                    new_template[k] = ("i", i + n)
                continue
            if how == "raw":
                raise _oob_error(op, i, axes[k], n, x)
            if how == "clip":
                new_template[k] = ("i", min(max(i, lo), n - 1) if n else 0)
            elif how == "wrap":
                new_template[k] = ("i", i % n if n else 0)
            else:
                new_template[k] = ("i", n)
                pads.append(axes[k])
        elif t[0] == "a":
            a, n = arrays[t[1]], shape[axes[k]]
            fixed, padded = _normalize_array(a, n, how, wrap_negative, op, axes[k], x)
            new_arrays[t[1]] = fixed
            if padded:
                pads.append(axes[k])
    if pads:   # a padded axis holds n + 1 slots: every negative index must count from the end first
        for k, t in enumerate(new_template):
            if t[0] == "i" and t[1] < 0:
                new_template[k] = ("i", t[1] + shape[axes[k]])
            elif t[0] == "a" and axes[k] not in pads:
                new_arrays[t[1]] = _wrap_negative(new_arrays[t[1]], shape[axes[k]])
    return tuple(new_template), new_arrays, tuple(sorted(set(pads)))


def _on_host(a: Any) -> bool:
    """A concrete index array whose values can be read without a device transfer."""
    return type(a) is Array or isinstance(a, np.ndarray)


def _wrap_negative(a: Any, n: int) -> Any:
    if _on_host(a):
        v = np.asarray(a)
        return a if not (v < 0).any() else _core.as_array(np.where(v < 0, v + n, v).astype(v.dtype))
    return select(lt_p.bind(a, 0), add(a, n), a)


def _normalize_array(a: Any, n: int, how: str, wrap_negative: bool, op: str, axis: int, x: Any) -> tuple[Any, bool]:
    lo = -n if wrap_negative else 0
    if _on_host(a):
        v = np.asarray(a)
        inside = bool(((v >= lo) & (v < n)).all())
        if inside:
            return a, False
        if how == "raw":
            bad = v[(v < lo) | (v >= n)].flat[0]
            raise _oob_error(op, int(bad), axis, n, x)
        v = v.astype(np.int64)
        if how == "clip":
            out = np.clip(v, lo, n - 1) if n else np.zeros_like(v)
            return _core.as_array(out.astype(np.int32 if n < 2**31 else np.int64)), False
        if how == "wrap":
            return _core.as_array((v % n if n else v * 0).astype(np.int32 if n < 2**31 else np.int64)), False
        v = np.where(v < 0, v + n, v) if wrap_negative else v
        out = np.where((v >= 0) & (v < n), v, n)
        return _core.as_array(out.astype(np.int32 if n < 2**31 - 1 else np.int64)), not inside
    if how == "raw":
        return a, False
    if a.dtype.kind == "u" or a.dtype.itemsize < 4:
        a = convert(a, np.int32)
    if how == "clip":
        if n == 0:
            return a, False
        return maximum_p.bind(minimum_p.bind(a, n - 1), lo), False
    if how == "wrap":
        return mod_p.bind(a, n), False
    if wrap_negative:
        a = select(lt_p.bind(a, 0), add(a, n), a)
    bad = or_p.bind(lt_p.bind(a, 0), ge_p.bind(a, n))
    return select(bad, _full_like_int(a, n), a), True


def _full_like_int(a: Any, n: int) -> Any:
    return add(mul(a, 0), n)


def _duplicate_rounds(shape: tuple[int, ...], template: tuple, arrays: Sequence[Any], pads: tuple) -> list:
    """[None] when the advanced positions never repeat; otherwise one redirected first index array per
    round (positions not in that round sent to the padded slot of its axis)."""
    axes = _item_axes(template, len(shape))
    items = [(k, t) for k, t in enumerate(template) if t[0] == "a"]
    values = np.broadcast_arrays(*[host_numpy(arrays[t[1]]).astype(np.int64) for _, t in items])
    sizes = [shape[axes[k]] + (1 if axes[k] in pads else 0) for k, _ in items]
    wrapped = [np.where(v < 0, v + s, v) for v, s in zip(values, sizes)]
    flat = np.ravel_multi_index([w.ravel() for w in wrapped], sizes) if wrapped[0].size else np.zeros(0, np.int64)
    if flat.size == 0 or np.unique(flat).size == flat.size:
        return [None]
    order = np.argsort(flat, kind="stable")
    ranked = flat[order]
    starts = np.r_[0, np.flatnonzero(np.diff(ranked)) + 1]
    group_start = np.repeat(starts, np.diff(np.r_[starts, ranked.size]))
    rank = np.empty_like(flat)
    rank[order] = np.arange(flat.size) - group_start
    rank = rank.reshape(values[0].shape)
    first_k, first_t = items[0]
    n0 = shape[axes[first_k]]
    first = host_numpy(arrays[first_t[1]]).astype(np.int64)
    first = np.broadcast_to(np.where(first < 0, first + n0, first), rank.shape)
    return [_core.as_array(np.where(rank == r, first, n0).astype(np.int32 if n0 < 2**31 - 1 else np.int64))
            for r in range(int(rank.max()) + 1)]


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

