"""Indexing: ``getitem`` (gather) and its transposes ``scatter_add`` / ``scatter_set``.

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
from funcgrad._core import Array, Primitive, Tracer
from funcgrad._dtypes import ShapedArray, describe, result_type
from funcgrad.interpreters.batching import batch_by_loop, move_to_front
from funcgrad.primitives.elementwise import shape_of, unbroadcast
from funcgrad.primitives.shape import moveaxis, reshape

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
    from funcgrad.numpy import zeros
    x, arrays = primals[0], primals[1:]
    zero = zeros(shape_of(x), ct.dtype)
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
    def impl(x, y, *arrays, template):
        out = np.array(x, dtype=np.result_type(x, y), copy=True)
        index = build_index(template, arrays)
        if mode == "set":
            out[index] = y
        elif _is_row_gather(template, arrays, out):
            _scatter_rows(out, arrays[0], y)
        elif arrays:
            np.add.at(out, index, y)   # accumulates duplicate indices
        else:
            out[index] += y            # basic indices never repeat
        return out
    return impl


def _is_row_gather(template: tuple, arrays: Sequence[Any], out: np.ndarray) -> bool:
    """``x[idx]`` / ``x[idx, :, ...]`` with one 1-d index array: the embedding/take pattern."""
    return (len(arrays) == 1 and template[0] == ("a", 0) and np.ndim(arrays[0]) == 1 and out.ndim >= 1
            and out.dtype.kind == "f" and all(t == ("s", None, None, None) for t in template[1:]))


def _scatter_rows(out: np.ndarray, idx: Any, y: Any) -> None:
    # The numba kernel is deterministic and ~10x faster than np.add.at.
    from funcgrad.backends.cpu.kernels_scatter import scatter_add_rows
    inner = int(np.prod(out.shape[1:], dtype=np.int64))
    if len(idx) == 0 or inner == 0:   # nothing to add (and reshape(-1) is ambiguous at size 0)
        return
    rows = out.reshape(out.shape[0], inner)
    src = np.broadcast_to(np.asarray(y, out.dtype), (len(idx),) + out.shape[1:]).reshape(len(idx), inner)
    scatter_add_rows(rows, np.asarray(idx), src)


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
    from funcgrad.primitives.elementwise import eq
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
            from funcgrad.primitives.elementwise import mul, select
            part = select(_landed(shape_of(x), arrays, template), part, mul(part, 0.0))
        cy = unbroadcast(part, shape_of(y))
    return (cx, cy) + (None,) * len(arrays)


def _scatter_jvp(p: Primitive):
    def jvp(primals, tangents, template):
        from funcgrad.numpy import zeros_like
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


class _IndexUpdateRef:
    __slots__ = ("array", "index")

    def __init__(self, array: Any, index: Any):
        self.array, self.index = array, index

    def get(self) -> Any:
        return getitem(self.array, self.index)

    def set(self, value: Any) -> Any:
        template, arrays = split_index(self.index, shape_of(self.array), self.array, "at[...].set")
        return scatter_set_p.bind(self.array, value, *arrays, template=template)

    def add(self, value: Any) -> Any:
        template, arrays = split_index(self.index, shape_of(self.array), self.array, "at[...].add")
        return scatter_add_p.bind(self.array, value, *arrays, template=template)


class IndexUpdateHelper:
    """``x.at[index].set(v)`` / ``.add(v)`` / ``.get()``: functional updates.

    >>> x = fnp.zeros(3)
    >>> x.at[1].set(5.0)     # Array([0., 5., 0.]); x is unchanged
    """

    __slots__ = ("array",)

    def __init__(self, array: Any):
        self.array = array

    def __getitem__(self, index: Any) -> _IndexUpdateRef:
        return _IndexUpdateRef(self.array, index)
