"""Dynamic slicing: ``dynamic_slice`` and ``dynamic_update_slice``, slices whose start indices
are values (traced integer scalars) while their sizes stay static, as a loop body needs when it
indexes with its loop counter.

Operands: ``dynamic_slice_p(operand, *starts, slice_sizes)`` and
``dynamic_update_slice_p(operand, update, *starts)``, one integer scalar start per axis of the
operand (an array, a tracer or a Python int).

Start indices follow ``jax.lax``: a negative start counts once from the end (``-1`` is the last
position), then every start is *clamped* into ``[0, dim - size]``, so that the slice always has
the requested size and stays inside the array::

    dynamic_slice(arange(5), (4,), (3,))    # [2, 3, 4]   (numpy's x[4:7] would be [4])
    dynamic_slice(arange(5), (-9,), (2,))   # [0, 1]

The two primitives are each other's transposes: the vjp of ``dynamic_slice`` writes the
cotangent into zeros with ``dynamic_update_slice``, and that of ``dynamic_update_slice`` splits
the cotangent into the window (the update's) and the rest (the operand's). Under ``vmap``, a
batched operand with shared starts stays one dynamic slice (the batch axis sliced whole);
per-example starts become one gather (``getitem`` with index arrays) or scatter.
"""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from funcgrad import _core, _dtypes
from funcgrad._core import Array, Primitive, Tracer, get_aval, zeros_like
from funcgrad._dtypes import ShapedArray, describe
from funcgrad.primitives.elementwise import add, convert, lt_p, maximum_p, minimum_p, select
from funcgrad.primitives.indexing import getitem, getitem_p, scatter_set_p
from funcgrad.primitives.shape import move_to_front, moveaxis, reshape, shape_of

__all__ = ["dynamic_slice_p", "dynamic_update_slice_p", "dynamic_slice", "dynamic_update_slice",
           "dynamic_slice_in_dim", "dynamic_index_in_dim", "dynamic_update_slice_in_dim",
           "dynamic_update_index_in_dim", "clamp_start", "dynamic_slice_impl", "dynamic_update_slice_impl"]

# ------------------------------------------------------------ start indices


def clamp_start(start: int, dim: int, size: int) -> int:
    """The start a window of ``size`` along an axis of length ``dim`` really takes (JAX's rule).

    >>> clamp_start(4, 5, 3), clamp_start(-1, 5, 1), clamp_start(-9, 5, 2)
    (2, 4, 0)
    """
    if start < 0:
        start += dim   # counted from the end, once
    return min(max(start, 0), dim - size)


def _window(shape: tuple[int, ...], starts: Sequence[Any], sizes: Sequence[int]) -> tuple:
    """The basic index of the clamped window (``...`` keeps a 0-d result an array)."""
    index = []
    for i, dim, size in zip(starts, shape, sizes):
        first = clamp_start(int(i), dim, size)
        index.append(slice(first, first + size))
    return tuple(index) + (Ellipsis,)


def _aval(x: Any) -> ShapedArray:
    return x if isinstance(x, ShapedArray) else get_aval(x)


def _check_starts(op: str, operand: Any, starts: Sequence[Any]) -> None:
    """One integer scalar start per axis of ``operand`` (values or avals)."""
    rank = len(shape_of(operand))
    if len(starts) != rank:
        raise ValueError(f"{op}: the operand {describe(operand)} takes {rank} start indices (one per axis), "
                         f"got {len(starts)}")
    for k, i in enumerate(starts):
        if type(i) is int:
            continue   # the common case, checked without building an aval
        aval = _aval(i)
        if aval.shape != () or aval.dtype.kind not in "iu":
            raise TypeError(f"{op}: start index {k} must be an integer scalar, got {describe(i)}. Pass Python ints "
                            "or 0-d integer arrays (a float index: lax.convert_element_type(i, fnp.int32); one "
                            "index per axis: unpack an index array into scalars)")


def _check_sizes(op: str, operand: Any, sizes: tuple[int, ...], what: str = "slice_sizes") -> None:
    shape = tuple(shape_of(operand))
    if len(sizes) != len(shape):
        raise ValueError(f"{op}: {what} {sizes} must give one size per axis of the operand {describe(operand)}")
    for k, (size, dim) in enumerate(zip(sizes, shape)):
        if not 0 <= size <= dim:
            raise ValueError(f"{op}: {what} {sizes} do not fit the operand {describe(operand)}: along axis {k} "
                             f"the size {size} must be in [0, {dim}] (a dynamic slice never runs past the end; "
                             "its start is clamped instead)")


def _check_update(operand: Any, update: Any) -> None:
    op = "dynamic_update_slice"
    if len(shape_of(update)) != len(shape_of(operand)):
        raise ValueError(f"{op}: the update {describe(update)} must have the rank of the operand "
                         f"{describe(operand)}; add length-1 axes with lax.expand_dims "
                         "(dynamic_update_index_in_dim does it for its axis)")
    _check_sizes(op, operand, tuple(shape_of(update)), "the update's shape")
    _check_update_dtype(operand, update)


def _check_update_dtype(operand: Any, update: Any) -> None:
    if _aval(update).dtype != _aval(operand).dtype:
        raise TypeError(f"dynamic_update_slice: the update {describe(update)} must have the operand's dtype "
                        f"({describe(operand)}); convert it with lax.convert_element_type(update, operand.dtype)")


# ------------------------------------------------------------ dynamic_slice


def dynamic_slice_impl(x, *starts, slice_sizes):
    """The window as a view of ``x`` (numpy or CuPy: any numpy-like buffer; starts read as ints)."""
    return x[_window(x.shape, starts, slice_sizes)]


def _dynamic_slice_aval(x, *starts, slice_sizes):
    _check_starts("dynamic_slice", x, starts)
    _check_sizes("dynamic_slice", x, slice_sizes)
    return ShapedArray(slice_sizes, x.dtype)


def _dynamic_slice_jvp(primals, tangents, slice_sizes):
    x, starts = primals[0], primals[1:]
    out = dynamic_slice_p.bind(x, *starts, slice_sizes=slice_sizes)
    t = tangents[0]
    return out, None if t is None else dynamic_slice_p.bind(t, *starts, slice_sizes=slice_sizes)


def _dynamic_slice_vjp(ct, primals, out, needs, slice_sizes):
    x, starts = primals[0], primals[1:]
    cx = dynamic_update_slice_p.bind(zeros_like(x, ct.dtype), ct, *starts) if needs[0] else None
    return (cx,) + (None,) * len(starts)


def _dynamic_slice_batch(values, dims, size, slice_sizes):
    x, starts = values[0], values[1:]
    if all(d is None for d in dims[1:]):
        # Shared starts: one dynamic slice that takes the batch axis whole.
        x = moveaxis(x, dims[0], 0)
        return dynamic_slice_p.bind(x, 0, *starts, slice_sizes=(size,) + slice_sizes), 0
    x, arrays, template = _batched_windows(x, dims[0], starts, dims[1:], slice_sizes, size)
    return getitem_p.bind(x, *arrays, template=template), 0


dynamic_slice_p = Primitive("dynamic_slice")
dynamic_slice_p.impl = dynamic_slice_impl
dynamic_slice_p.abstract_eval = _dynamic_slice_aval
dynamic_slice_p.jvp = _dynamic_slice_jvp
dynamic_slice_p.vjp = _dynamic_slice_vjp
dynamic_slice_p.batch = _dynamic_slice_batch

# ----------------------------------------------------- dynamic_update_slice


def dynamic_update_slice_impl(x, update, *starts):
    """A copy of ``x`` with the window overwritten (numpy or CuPy buffers)."""
    out = x.copy()   # never into the caller's buffer
    out[_window(x.shape, starts, update.shape)] = update
    return out


def _dynamic_update_slice_aval(x, update, *starts):
    _check_starts("dynamic_update_slice", x, starts)
    _check_update(x, update)
    return ShapedArray(x.shape, x.dtype)


def _dynamic_update_slice_jvp(primals, tangents):
    x, update, starts = primals[0], primals[1], primals[2:]
    out = dynamic_update_slice_p.bind(x, update, *starts)
    tx, tu = tangents[0], tangents[1]
    if tx is None and tu is None:
        return out, None
    tx = zeros_like(x, tu.dtype) if tx is None else tx
    tu = zeros_like(update, tx.dtype) if tu is None else tu
    return out, dynamic_update_slice_p.bind(tx, tu, *starts)


def _dynamic_update_slice_vjp(ct, primals, out, needs):
    update, starts = primals[1], primals[2:]
    cx = dynamic_update_slice_p.bind(ct, zeros_like(update, ct.dtype), *starts) if needs[0] else None
    cu = dynamic_slice_p.bind(ct, *starts, slice_sizes=tuple(shape_of(update))) if needs[1] else None
    return (cx, cu) + (None,) * len(starts)


def _dynamic_update_slice_batch(values, dims, size):
    # The result is batched whatever is: every example gets its own copy of the operand.
    x = move_to_front(values[0], dims[0], size)
    update = move_to_front(values[1], dims[1], size)
    starts = values[2:]
    if all(d is None for d in dims[2:]):
        return dynamic_update_slice_p.bind(x, update, 0, *starts), 0
    x, arrays, template = _batched_windows(x, 0, starts, dims[2:], tuple(shape_of(update))[1:], size)
    return scatter_set_p.bind(x, update, *arrays, template=template), 0   # windows never overlap


dynamic_update_slice_p = Primitive("dynamic_update_slice")
dynamic_update_slice_p.impl = dynamic_update_slice_impl
dynamic_update_slice_p.abstract_eval = _dynamic_update_slice_aval
dynamic_update_slice_p.jvp = _dynamic_update_slice_jvp
dynamic_update_slice_p.vjp = _dynamic_update_slice_vjp
dynamic_update_slice_p.batch = _dynamic_update_slice_batch

# ------------------------------------------------- per-example starts (vmap)


def _clamped_values(start: Any, dim: int, size: int) -> Any:
    """:func:`clamp_start` on an array of starts (or a traced scalar), with primitives."""
    if isinstance(start, (int, np.integer)):
        return clamp_start(int(start), dim, size)
    if start.dtype != _dtypes.int_:
        start = convert(start, _dtypes.int_)   # room for start + dim, whatever the index dtype
    start = select(lt_p.bind(start, 0), add(start, dim), start)
    return maximum_p.bind(minimum_p.bind(start, dim - size), 0)


def _batched_windows(x: Any, x_dim: int | None, starts: Sequence[Any], start_dims: Sequence[int | None],
                     sizes: Sequence[int], size: int) -> tuple[Any, list, tuple]:
    """Each example's window of ``x`` as numpy index arrays: ``x[arrays]`` is (batch, *sizes).

    Example ``b`` reads rows ``clamped start_k[b] + arange(sizes[k])`` along each axis ``k``
    (of its own slice of ``x`` when ``x`` is batched: a leading ``arange(batch)`` index).
    """
    shape = tuple(shape_of(x))
    rank = len(shape) - (x_dim is not None)
    arrays = []
    if x_dim is not None:
        x = moveaxis(x, x_dim, 0)
        shape = tuple(shape_of(x))[1:]
        arrays.append(_core.as_array(np.arange(size, dtype=_dtypes.int_).reshape((size,) + (1,) * rank)))
    for k, (start, d) in enumerate(zip(starts, start_dims)):
        first = _clamped_values(start if d is None else moveaxis(start, d, 0), shape[k], sizes[k])
        if d is not None:
            first = reshape(first, (size,) + (1,) * rank)
        offsets = np.arange(sizes[k], dtype=_dtypes.int_).reshape((1,) * (k + 1) + (sizes[k],) + (1,) * (rank - k - 1))
        arrays.append(add(first, _core.as_array(offsets)))
    return x, arrays, tuple(("a", j) for j in range(len(arrays)))


# ------------------------------------------------------------ the user API


def _start_list(op: str, operand: Any, start_indices: Any) -> list:
    """The start indices as a list of scalars: Python ints where they are known, else scalar arrays."""
    if isinstance(start_indices, (list, tuple)):
        items = list(start_indices)
    else:   # an index array of shape (rank,), as JAX accepts
        arr = start_indices if isinstance(start_indices, (Array, Tracer)) else np.asarray(start_indices)
        if arr.ndim != 1:
            raise ValueError(f"{op}: start_indices must be a sequence of scalars or a 1-d integer array, got "
                             f"{describe(arr)}")
        items = [getitem(arr, i) if isinstance(arr, (Array, Tracer)) else arr[i] for i in range(arr.shape[0])]
    out = []
    for i in items:
        if isinstance(i, (np.ndarray, np.integer)) and np.ndim(i) == 0 and np.asarray(i).dtype.kind in "iu":
            i = int(i)
        elif type(i) is Array and i.ndim == 0 and i.dtype.kind in "iu":
            i = int(i._value)   # known now: a literal under jit
        out.append(i)
    _check_starts(op, operand, out)
    return out


def _update_array(update: Any, operand: Any) -> Any:
    """``update`` as an array; a Python scalar is weakly typed: it takes the operand's dtype
    where that loses nothing (an int into a float array, not a float into an int array)."""
    kind = _dtypes.kind(operand.dtype)
    if isinstance(update, bool) or (isinstance(update, int) and kind in "iuf") or (
            isinstance(update, float) and kind == "f"):
        return _core.as_array(np.asarray(update, operand.dtype))
    return _core.as_array(update)


def _static_sizes(op: str, sizes: Any) -> tuple[int, ...]:
    try:
        return tuple(operator.index(s) for s in sizes)
    except TypeError:
        raise TypeError(f"{op}: slice_sizes must be static Python ints (shapes are static under jit), got "
                        f"{sizes!r:.80}") from None


def _axis(op: str, operand: Any, axis: Any) -> int:
    rank = len(shape_of(operand))
    axis = operator.index(axis)
    if not -rank <= axis < rank:
        raise ValueError(f"{op}: axis {axis} is out of range for the operand {describe(operand)}")
    return axis % rank


def dynamic_slice(operand: Any, start_indices: Sequence[Any], slice_sizes: Sequence[int]) -> Any:
    """The window of ``operand`` of static shape ``slice_sizes`` starting at ``start_indices``
    (one integer scalar per axis, traced or not), as ``jax.lax.dynamic_slice``.

    Starts are clamped so the window stays inside the array (a negative start first counts
    from the end):

    >>> x = fnp.arange(12).reshape(3, 4)
    >>> dynamic_slice(x, (1, 1), (2, 3))
    Array([[ 5,  6,  7],
           [ 9, 10, 11]], dtype=int32)
    >>> dynamic_slice(x, (1, 1), (2, 4))    # start (1, 0): [[4, 5, 6, 7], [8, 9, 10, 11]]
    Array([[ 4,  5,  6,  7],
           [ 8,  9, 10, 11]], dtype=int32)
    """
    operand = _core.as_array(operand)
    starts = _start_list("dynamic_slice", operand, start_indices)
    sizes = _static_sizes("dynamic_slice", slice_sizes)
    _check_sizes("dynamic_slice", operand, sizes)
    return dynamic_slice_p.bind(operand, *starts, slice_sizes=sizes)


def dynamic_update_slice(operand: Any, update: Any, start_indices: Sequence[Any]) -> Any:
    """``operand`` with the window at ``start_indices`` replaced by ``update`` (same rank and
    dtype), as ``jax.lax.dynamic_update_slice``; starts are clamped as in :func:`dynamic_slice`.

    >>> dynamic_update_slice(fnp.zeros(6), fnp.ones(3), (5,))
    Array([0., 0., 0., 1., 1., 1.], dtype=float32)
    """
    operand = _core.as_array(operand)
    update = _update_array(update, operand)
    starts = _start_list("dynamic_update_slice", operand, start_indices)
    _check_update(operand, update)
    return dynamic_update_slice_p.bind(operand, update, *starts)


def dynamic_slice_in_dim(operand: Any, start_index: Any, slice_size: int, axis: int = 0) -> Any:
    """``operand[..., start_index:start_index + slice_size]`` along ``axis``, with a clamped
    (possibly traced) start, as ``jax.lax.dynamic_slice_in_dim``.

    >>> dynamic_slice_in_dim(fnp.arange(5), 4, 3)
    Array([2, 3, 4], dtype=int32)
    """
    operand = _core.as_array(operand)
    axis = _axis("dynamic_slice_in_dim", operand, axis)
    starts: list[Any] = [0] * operand.ndim
    sizes = list(operand.shape)
    starts[axis], sizes[axis] = start_index, slice_size
    return dynamic_slice(operand, starts, sizes)


def dynamic_index_in_dim(operand: Any, index: Any, axis: int = 0, keepdims: bool = True) -> Any:
    """``operand[..., index]`` along ``axis`` with a clamped (possibly traced) index, as
    ``jax.lax.dynamic_index_in_dim`` (``keepdims`` keeps the axis, of length 1).

    >>> dynamic_index_in_dim(fnp.arange(12).reshape(3, 4), 1, axis=1, keepdims=False)
    Array([1, 5, 9], dtype=int32)
    """
    operand = _core.as_array(operand)
    axis = _axis("dynamic_index_in_dim", operand, axis)
    out = dynamic_slice_in_dim(operand, index, 1, axis)
    return out if keepdims else reshape(out, operand.shape[:axis] + operand.shape[axis + 1:])


def dynamic_update_slice_in_dim(operand: Any, update: Any, start_index: Any, axis: int) -> Any:
    """``operand`` with ``update`` written at ``start_index`` along ``axis`` (other axes from 0),
    as ``jax.lax.dynamic_update_slice_in_dim``.

    >>> dynamic_update_slice_in_dim(fnp.zeros((4, 4)), fnp.ones((2, 3)), 1, axis=0)   # rows 1-2, columns 0-2
    Array([[0., 0., 0., 0.],
           [1., 1., 1., 0.],
           [1., 1., 1., 0.],
           [0., 0., 0., 0.]], dtype=float32)
    """
    operand = _core.as_array(operand)
    axis = _axis("dynamic_update_slice_in_dim", operand, axis)
    starts: list[Any] = [0] * operand.ndim
    starts[axis] = start_index
    return dynamic_update_slice(operand, update, starts)


def dynamic_update_index_in_dim(operand: Any, update: Any, index: Any, axis: int) -> Any:
    """``operand`` with position ``index`` along ``axis`` replaced by ``update`` (with or without
    that axis), as ``jax.lax.dynamic_update_index_in_dim``.

    >>> dynamic_update_index_in_dim(fnp.zeros((4, 4)), fnp.ones(4), 1, axis=0)   # row 1 set to ones
    Array([[0., 0., 0., 0.],
           [1., 1., 1., 1.],
           [0., 0., 0., 0.],
           [0., 0., 0., 0.]], dtype=float32)
    """
    operand = _core.as_array(operand)
    axis = _axis("dynamic_update_index_in_dim", operand, axis)
    update = _update_array(update, operand)
    _check_update_dtype(operand, update)   # before the axis is added: the error names the user's update
    if update.ndim == operand.ndim - 1:
        shape = tuple(shape_of(update))
        update = reshape(update, shape[:axis] + (1,) + shape[axis:])
    return dynamic_update_slice_in_dim(operand, update, index, axis)
