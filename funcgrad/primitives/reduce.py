"""Reductions over static axes (``axes`` is a sorted tuple of non-negative ints).

Gradient conventions (JAX's): ``max``/``min`` split the cotangent evenly
among tied maxima; ``prod`` uses the product of the *other* elements, so it
is exact when some elements are zero; ``argmax``/``argmin`` have none.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Primitive
from funcgrad._dtypes import ShapedArray, describe
from funcgrad.primitives.elementwise import add, convert, div, eq, mul, select, shape_of


def _reduced_shape(name: str, x: Any, axes: tuple[int, ...]) -> tuple[int, ...]:
    shape = shape_of(x)
    for a in axes:
        if not 0 <= a < len(shape):
            raise ValueError(f"{name}: axis {a} is out of range for an array {describe(x)} of rank {len(shape)}")
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def _check_nonempty(name: str, x: Any, axes: tuple[int, ...]) -> None:
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


def _expand(v: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    """Broadcast a reduced value back to the input's ``shape`` (a tuple of ints)."""
    if len(axes) != len(shape) and axes != tuple(range(len(axes))):
        v = _shape.reshape(v, keepdims_shape(shape, axes))   # broadcasting right-aligns: leading axes need none
    return _shape.broadcast_to_p.bind(v, shape=shape) if axes else v


def _batch_axes(p: Primitive):
    def rule(values, dims, size, axes):
        x = _shape.moveaxis(values[0], dims[0], 0)
        return p.bind(x, axes=tuple(a + 1 for a in axes)), 0
    return rule


def _declare(name: str, impl, dtype_rule, identity: bool = True) -> Primitive:
    p = Primitive(name)
    p.impl = impl

    def abstract_eval(x, axes):
        shape = _reduced_shape(name, x, axes)
        if not identity:
            _check_nonempty(name, x, axes)
        return ShapedArray(shape, dtype_rule(x.dtype))

    p.abstract_eval = abstract_eval
    p.batch = _batch_axes(p)
    return p


def _sum_dtype(dtype: np.dtype) -> np.dtype:
    # numpy sums bools and small integers in the platform integer.
    if dtype.kind in "bi":
        return _dtypes.int_
    if dtype.kind == "u":
        return _dtypes.canonicalize(np.uint64)
    return dtype


def _sum_impl(x, axes):
    # float16 sums accumulate in float32 and round once: numpy accumulates
    # float16 in float16 when the reduced axis is not the contiguous one
    # (4096 ones sum to 2048), though it upcasts along contiguous rows.
    if x.dtype.char == "e":   # float16
        return np.add.reduce(x, axis=axes, dtype=np.float32).astype(np.float16)
    return np.add.reduce(x, axis=axes)   # np.sum's Python wrapper costs 2 us per call


reduce_sum_p = _declare("reduce_sum", _sum_impl, _sum_dtype)


def _max_impl(x, axes):
    if x.size == 0:
        _check_nonempty("reduce_max", x, axes)
    return np.max(x, axis=axes)


def _min_impl(x, axes):
    if x.size == 0:
        _check_nonempty("reduce_min", x, axes)
    return np.min(x, axis=axes)


reduce_max_p = _declare("reduce_max", _max_impl, lambda d: d, identity=False)
reduce_min_p = _declare("reduce_min", _min_impl, lambda d: d, identity=False)
reduce_prod_p = _declare("reduce_prod", lambda x, axes: np.prod(x, axis=axes), _sum_dtype)


def reduce_sum(x: Any, axes: tuple[int, ...]) -> Any:
    return reduce_sum_p.bind(x, axes=tuple(axes))


reduce_sum_p.jvp = lambda primals, tangents, axes: (reduce_sum(primals[0], axes), reduce_sum(tangents[0], axes))
reduce_sum_p.vjp = lambda ct, primals, out, needs, axes: (_expand(ct, shape_of(primals[0]), axes),)


def _chooser_weights(x: Any, out: Any, axes: tuple[int, ...]) -> Any:
    """1/count at the positions that attain the max (or min), 0 elsewhere."""
    location = convert(eq(x, _expand(out, shape_of(x), axes)), x.dtype)
    counts = reduce_sum(location, axes)
    return div(location, _expand(counts, shape_of(x), axes))


def _chooser_rules(p: Primitive) -> None:
    def jvp(primals, tangents, axes):
        x, = primals
        out = p.bind(x, axes=axes)
        return out, reduce_sum(mul(tangents[0], _chooser_weights(x, out, axes)), axes)

    def vjp(ct, primals, out, needs, axes):
        x, = primals
        return (mul(_expand(ct, shape_of(x), axes), _chooser_weights(x, out, axes)),)

    p.jvp, p.vjp = jvp, vjp


_chooser_rules(reduce_max_p)
_chooser_rules(reduce_min_p)


def _prod_of_others(x: Any, axes: tuple[int, ...]) -> Any:
    """For every element, the product of the other elements in its reduction group.

    Built from primitives (a masked product over an n x n grid per group), so
    it is exact with zeros and differentiable again.
    """
    shape = shape_of(x)
    kept = [i for i in range(len(shape)) if i not in axes]
    perm = tuple(kept) + tuple(axes)
    n = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    lead = tuple(shape[i] for i in kept)
    grouped = _shape.reshape(_shape.transpose(x, perm), lead + (1, n))
    grid = _shape.broadcast_to(grouped, lead + (n, n))
    others = reduce_prod_p.bind(select(np.eye(n, dtype=bool), 1.0, grid), axes=(len(lead) + 1,))
    back = _shape.reshape(others, tuple(shape[i] for i in perm))
    return _shape.transpose(back, tuple(np.argsort(perm)))


def _prod_jvp(primals, tangents, axes):
    x, = primals
    return reduce_prod_p.bind(x, axes=axes), reduce_sum(mul(tangents[0], _prod_of_others(x, axes)), axes)


reduce_prod_p.jvp = _prod_jvp
reduce_prod_p.vjp = lambda ct, primals, out, needs, axes: (
    mul(_expand(ct, shape_of(primals[0]), axes), _prod_of_others(primals[0], axes)),)


def _arg_declare(name: str, impl) -> Primitive:
    p = Primitive(name)

    def checked_impl(x, axis):
        if x.size == 0:
            _check_nonempty(name, x, (axis,))
        return impl(x, axis)

    p.impl = checked_impl

    def abstract_eval(x, axis):
        shape = _reduced_shape(name, x, (axis,))
        _check_nonempty(name, x, (axis,))
        return ShapedArray(shape, _dtypes.int_)

    p.abstract_eval = abstract_eval

    def batch(values, dims, size, axis):
        return p.bind(_shape.moveaxis(values[0], dims[0], 0), axis=axis + 1), 0

    p.batch = batch
    return p


argmax_p = _arg_declare("argmax", np.argmax)
argmin_p = _arg_declare("argmin", np.argmin)


def _cumsum_impl(x, axis, reverse):
    # float16: accumulate in float32 (numpy's cumsum is sequential in float16).
    acc = np.float32 if x.dtype == np.float16 else None
    if reverse:
        out = np.flip(np.cumsum(np.flip(x, axis), axis=axis, dtype=acc), axis)
    else:
        out = np.cumsum(x, axis=axis, dtype=acc)
    return out if acc is None else out.astype(np.float16)


cumsum_p = Primitive("cumsum")
cumsum_p.impl = _cumsum_impl
cumsum_p.abstract_eval = lambda x, axis, reverse: ShapedArray(
    x.shape if 0 <= axis < len(x.shape) else _reduced_shape("cumsum", x, (axis,)), _sum_dtype(x.dtype))
cumsum_p.jvp = lambda primals, tangents, axis, reverse: (
    cumsum_p.bind(primals[0], axis=axis, reverse=reverse), cumsum_p.bind(tangents[0], axis=axis, reverse=reverse))
cumsum_p.vjp = lambda ct, primals, out, needs, axis, reverse: (
    cumsum_p.bind(ct, axis=axis, reverse=not reverse),)


def _cumsum_batch(values, dims, size, axis, reverse):
    return cumsum_p.bind(_shape.moveaxis(values[0], dims[0], 0), axis=axis + 1, reverse=reverse), 0


cumsum_p.batch = _cumsum_batch
del add

# Imported last, as a module: it builds on this one.
from funcgrad.primitives import shape as _shape  # noqa: E402
