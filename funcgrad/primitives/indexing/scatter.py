"""Scatters: ``x`` with ``x[index]`` set (``scatter_set``), added to (``scatter_add``), combined by
max/min (``scatter_max``/``scatter_min``) or a product (``scatter_mul``), their derivative and
batching rules, ``scatter_combine`` (the engine of ``x.at[i].mul/divide/power/apply``), and the
getitem primitive's transpose (a ``scatter_add`` of the cotangent).

Duplicate indices in ``scatter_add`` accumulate (as in ``x.at[i].add(v)``); in ``scatter_set`` the
last write wins. Index templates and out-of-bounds modes are in ``normalize.py``; ``getitem``,
``pad`` and ``batch_by_loop`` in ``gather.py``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad import _core
from funcgrad._core import Primitive, Tracer, zeros_like
from funcgrad._dtypes import ShapedArray, describe, result_type
from funcgrad.primitives.elementwise import add, convert, div, eq, mul, select
from funcgrad.primitives.indexing.gather import _batch_position, batch_by_loop, getitem_p, pad_p
from funcgrad.primitives.indexing.normalize import (_duplicate_rounds, _first_array_item, _item_axes,
                                                    _masked_single_array, _on_host, _pad_widths, _scatter_how,
                                                    build_index, normalize_indices, split_index)
from funcgrad.primitives.shape import move_to_front, moveaxis, reshape, shape_of, unbroadcast

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


def _getitem_vjp(ct, primals, out, needs, template):
    x, arrays = primals[0], primals[1:]
    zero = zeros_like(x, ct.dtype)
    return (scatter_add_p.bind(zero, ct, *arrays, template=template),) + (None,) * len(arrays)


getitem_p.vjp = _getitem_vjp   # the transpose of a gather: a scatter_add of the cotangent


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
