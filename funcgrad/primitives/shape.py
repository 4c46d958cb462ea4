"""The structural primitives every rule needs: reshape, transpose, broadcast_to and reduce_sum.

``broadcast_to`` and ``reduce_sum`` are each other's transpose, so they live
together at the bottom of the primitives, with the helpers that rules of
every other primitive use to undo broadcasting (``unbroadcast``,
``sum_to_like``) and to line up batch axes (``move_to_front``). This module
imports nothing above the core. All four primitives are linear: their jvp
applies the primitive to the tangent, their vjp is the transpose (reshape
back, inverse permutation, sum over broadcast axes, broadcast back).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array, Primitive, get_aval, zeros_like
from funcgrad._dtypes import ShapedArray, describe


def shape_of(x: Any) -> tuple[int, ...]:
    if type(x) is Array:
        return x._value.shape
    return () if isinstance(x, (bool, int, float)) else tuple(x.shape)


def linear_jvp(p: Primitive):
    def jvp(primals, tangents, **params):
        out = p.bind(*primals, **params)
        ts = [zeros_like(x) if t is None else t for x, t in zip(primals, tangents)]
        return out, p.bind(*ts, **params)
    return jvp


def moveaxis(x: Any, src: int, dst: int) -> Any:
    """``x`` with axis ``src`` moved to position ``dst``.

    >>> lax.moveaxis(fnp.ones((2, 3, 4)), 0, 2).shape
    (3, 4, 2)
    """
    if src == dst:
        return x
    ndim = len(shape_of(x))
    perm = [i for i in range(ndim) if i != src]
    perm.insert(dst, src)
    return transpose(x, tuple(perm))


def move_to_front(x: Any, d: int | None, size: int) -> Any:
    """``x`` with its mapped axis first; an unmapped ``x`` is broadcast to ``size`` (batching rules use it)."""
    if d is None:
        return broadcast_to(x, (size,) + get_aval(x).shape)
    return moveaxis(x, d, 0)


# ---------------------------------------------------------------- reshape

reshape_p = Primitive("reshape")
reshape_p.impl = lambda x, shape: np.reshape(x, shape)


def _reshape_aval(x, shape):
    if int(np.prod(shape, dtype=np.int64)) != int(np.prod(shape_of(x), dtype=np.int64)):
        raise ValueError(f"reshape: cannot reshape an array {describe(x)} into shape {shape} "
                         "(the number of elements must stay the same)")
    return ShapedArray(shape, x.dtype)


reshape_p.abstract_eval = _reshape_aval
reshape_p.jvp = linear_jvp(reshape_p)
reshape_p.vjp = lambda ct, primals, out, needs, shape: (reshape(ct, shape_of(primals[0])),)
reshape_p.batch = lambda values, dims, size, shape: (
    reshape_p.bind(moveaxis(values[0], dims[0], 0), shape=(size,) + shape), 0)


def reshape(x: Any, shape: tuple[int, ...]) -> Any:
    """``x`` with a new ``shape`` of the same size (C order).

    >>> lax.reshape(fnp.arange(6), (2, 3))
    Array([[0, 1, 2],
           [3, 4, 5]], dtype=int32)
    """
    shape = tuple(map(int, shape))
    return x if shape_of(x) == shape else reshape_p.bind(x, shape=shape)


# -------------------------------------------------------------- transpose

transpose_p = Primitive("transpose")
transpose_p.impl = lambda x, perm: np.transpose(x, perm)


def _transpose_aval(x, perm):
    if sorted(perm) != list(range(len(shape_of(x)))):
        raise ValueError(f"transpose: {perm} is not a permutation of the axes of an array {describe(x)}")
    return ShapedArray(tuple(x.shape[p] for p in perm), x.dtype)


transpose_p.abstract_eval = _transpose_aval
transpose_p.jvp = linear_jvp(transpose_p)
transpose_p.vjp = lambda ct, primals, out, needs, perm: (transpose(ct, tuple(int(i) for i in np.argsort(perm))),)
transpose_p.batch = lambda values, dims, size, perm: (
    transpose_p.bind(moveaxis(values[0], dims[0], 0), perm=(0,) + tuple(p + 1 for p in perm)), 0)


def transpose(x: Any, perm: Sequence[int]) -> Any:
    """``x`` with its axes permuted to ``perm``.

    >>> lax.transpose(fnp.ones((2, 3, 4)), (2, 0, 1)).shape
    (4, 2, 3)
    """
    perm = tuple(int(p) for p in perm)
    if perm == tuple(range(len(perm))):
        return x
    shape = shape_of(x)
    moved = [p for p in perm if 0 <= p < len(shape) and shape[p] != 1]
    if sorted(perm) == list(range(len(shape))) and moved == sorted(moved):
        # only size-1 axes move: the same elements in the same order
        return reshape(x, tuple(shape[p] for p in perm))
    return transpose_p.bind(x, perm=perm)


# ----------------------------------------------------------- broadcast_to

broadcast_to_p = Primitive("broadcast_to")


def _broadcast_impl(x, shape):
    x = np.asarray(x)
    if math.prod(shape) <= 4096:
        # Small results: a filled copy is cheaper than numpy's broadcast_to machinery.
        out = np.empty(shape, x.dtype)
        out[...] = x
        return out
    return np.broadcast_to(x, shape)   # large fan-out: a zero-copy read-only view


broadcast_to_p.impl = _broadcast_impl


def _broadcast_aval(x, shape):
    try:
        if np.broadcast_shapes(shape_of(x), shape) != tuple(shape):
            raise ValueError
    except ValueError:
        raise ValueError(f"broadcast_to: cannot broadcast an array {describe(x)} to shape {shape} "
                         "(numpy broadcasting: aligned from the right, each dimension must match or be 1)") from None
    return ShapedArray(shape, x.dtype)


broadcast_to_p.abstract_eval = _broadcast_aval
broadcast_to_p.jvp = linear_jvp(broadcast_to_p)
broadcast_to_p.vjp = lambda ct, primals, out, needs, shape: (unbroadcast(ct, shape_of(primals[0])),)


def _broadcast_batch(values, dims, size, shape):
    x = moveaxis(values[0], dims[0], 0)
    inner = shape_of(x)[1:]
    x = reshape(x, (size,) + (1,) * (len(shape) - len(inner)) + inner)
    return broadcast_to_p.bind(x, shape=(size,) + tuple(shape)), 0


broadcast_to_p.batch = _broadcast_batch


def broadcast_to(x: Any, shape: tuple[int, ...]) -> Any:
    """``x`` broadcast to ``shape`` (numpy's rules).

    >>> lax.broadcast_to(fnp.array([1.0, 2.0]), (2, 2))
    Array([[1., 2.],
           [1., 2.]], dtype=float32)
    """
    shape = tuple(map(int, shape))
    return x if shape_of(x) == shape and not isinstance(x, (bool, int, float)) else broadcast_to_p.bind(x, shape=shape)


# ------------------------------------------------------ reductions (shared)

def reduced_shape(name: str, x: Any, axes: tuple[int, ...]) -> tuple[int, ...]:
    shape = shape_of(x)
    for a in axes:
        if not 0 <= a < len(shape):
            raise ValueError(f"{name}: axis {a} is out of range for an array {describe(x)} of rank {len(shape)}")
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def check_nonempty(name: str, x: Any, axes: tuple[int, ...]) -> None:
    """max/min/argmax/argmin have no identity: reducing a zero-size axis is an error, as in numpy and JAX.

    Checked by the shape rule and by the implementation alike, so eager,
    jit (whose compiled kernels would return -inf/+inf) and vmap agree.
    """
    shape = shape_of(x)
    for a in axes:
        if 0 <= a < len(shape) and shape[a] == 0:
            raise ValueError(f"{name}: zero-size reduction of an array {describe(x)} over axis {a} (size 0): it has "
                             "no identity, so the result is undefined (numpy and JAX raise too). Reduce a non-empty "
                             "axis, or mask entries with fnp.where instead of removing them.")


def keepdims_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def expand_reduced(v: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    """Broadcast a reduced value back to the input's ``shape`` (a tuple of ints)."""
    if len(axes) != len(shape) and axes != tuple(range(len(axes))):
        v = reshape(v, keepdims_shape(shape, axes))   # broadcasting right-aligns: leading axes need none
    return broadcast_to_p.bind(v, shape=shape) if axes else v


def batch_axes(p: Primitive):
    def rule(values, dims, size, axes):
        x = moveaxis(values[0], dims[0], 0)
        return p.bind(x, axes=tuple(a + 1 for a in axes)), 0
    return rule


def declare_reduction(name: str, impl, dtype_rule, identity: bool = True) -> Primitive:
    p = Primitive(name)
    p.impl = impl

    def abstract_eval(x, axes):
        shape = reduced_shape(name, x, axes)
        if not identity:
            check_nonempty(name, x, axes)
        return ShapedArray(shape, dtype_rule(x.dtype))

    p.abstract_eval = abstract_eval
    p.batch = batch_axes(p)
    return p


# ------------------------------------------------------------ reduce_sum

def sum_dtype(dtype: np.dtype) -> np.dtype:
    # numpy sums bools and small integers in the platform integer.
    if dtype.kind in "bi":
        return _dtypes.int_
    if dtype.kind == "u":
        return _dtypes.canonicalize(np.uint64)
    return dtype


def _sum_impl(x, axes):
    # float16 and bfloat16 sums accumulate in float32 and round once: numpy accumulates
    # float16 in float16 when the reduced axis is not the contiguous one
    # (4096 ones sum to 2048), though it upcasts along contiguous rows; bfloat16 always.
    if x.dtype.char in "eE":   # float16, bfloat16 (ml_dtypes' char): the same test costs nothing more
        return np.add.reduce(x, axis=axes, dtype=np.float32).astype(x.dtype)
    return np.add.reduce(x, axis=axes)   # np.sum's Python wrapper costs 2 us per call


reduce_sum_p = declare_reduction("reduce_sum", _sum_impl, sum_dtype)


def reduce_sum(x: Any, axes: tuple[int, ...]) -> Any:
    """The sum over ``axes``.

    >>> lax.reduce_sum(fnp.array([[1.0, 5.0], [3.0, 2.0]]), (1,))
    Array([6., 5.], dtype=float32)
    """
    return reduce_sum_p.bind(x, axes=tuple(axes))


reduce_sum_p.jvp = lambda primals, tangents, axes: (reduce_sum(primals[0], axes), reduce_sum(tangents[0], axes))
reduce_sum_p.vjp = lambda ct, primals, out, needs, axes: (expand_reduced(ct, shape_of(primals[0]), axes),)



# ------------------------------------------------- undoing broadcasting


def unbroadcast(ct: Any, shape: tuple[int, ...]) -> Any:
    """Sum ``ct`` over the axes that broadcasting added to reach it from ``shape``."""
    ct_shape = shape_of(ct)
    if ct_shape == shape:
        return ct
    shape = tuple(shape)
    if ct_shape == shape:
        return ct
    lead = len(ct_shape) - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and ct_shape[i + lead] != 1)
    out = reduce_sum(ct, axes) if axes else ct
    return reshape(out, shape) if shape_of(out) != shape else out


def sum_to_like(ct: Any, x: Any) -> Any:
    """``ct`` summed down to the shape of operand ``x`` (the vjp of broadcasting ``x``)."""
    if type(ct) is Array and type(x) is Array and ct._value.shape == x._value.shape:
        return ct   # the common case, decided without a call
    return unbroadcast(ct, shape_of(x))


def broadcast_tangent(t: Any, shape: tuple[int, ...]) -> Any:
    return t if shape_of(t) == tuple(shape) else broadcast_to(t, tuple(shape))
