"""Reductions over static axes (``axes`` is a sorted tuple of non-negative ints).

Gradient conventions (JAX's): ``max``/``min`` split the cotangent evenly
among tied maxima; ``prod`` uses the product of the *other* elements, so it
is exact when some elements are zero; ``argmax``/``argmin`` have none.
``reduce_sum`` lives in :mod:`funcgrad.primitives.shape` (it is
``broadcast_to``'s transpose) and is re-exported here.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Primitive
from funcgrad._dtypes import ShapedArray
from funcgrad.primitives.elementwise import convert, div, eq, mul, select
from funcgrad.primitives.shape import (broadcast_to, check_nonempty, declare_reduction, expand_reduced,
                                       moveaxis, reduce_sum, reduce_sum_p, reduced_shape, reshape, shape_of,
                                       sum_dtype, transpose)


def _max_impl(x, axes):
    if x.size == 0:
        check_nonempty("reduce_max", x, axes)
    return np.max(x, axis=axes)


def _min_impl(x, axes):
    if x.size == 0:
        check_nonempty("reduce_min", x, axes)
    return np.min(x, axis=axes)


reduce_max_p = declare_reduction("reduce_max", _max_impl, lambda d: d, identity=False)
reduce_min_p = declare_reduction("reduce_min", _min_impl, lambda d: d, identity=False)
reduce_prod_p = declare_reduction("reduce_prod", lambda x, axes: np.prod(x, axis=axes), sum_dtype)


def _chooser_weights(x: Any, out: Any, axes: tuple[int, ...]) -> Any:
    """1/count at the positions that attain the max (or min), 0 elsewhere."""
    location = convert(eq(x, expand_reduced(out, shape_of(x), axes)), x.dtype)
    counts = reduce_sum(location, axes)
    return div(location, expand_reduced(counts, shape_of(x), axes))


def _chooser_rules(p: Primitive) -> None:
    def jvp(primals, tangents, axes):
        x, = primals
        out = p.bind(x, axes=axes)
        return out, reduce_sum(mul(tangents[0], _chooser_weights(x, out, axes)), axes)

    def vjp(ct, primals, out, needs, axes):
        x, = primals
        return (mul(expand_reduced(ct, shape_of(x), axes), _chooser_weights(x, out, axes)),)

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
    grouped = reshape(transpose(x, perm), lead + (1, n))
    grid = broadcast_to(grouped, lead + (n, n))
    others = reduce_prod_p.bind(select(np.eye(n, dtype=bool), 1.0, grid), axes=(len(lead) + 1,))
    back = reshape(others, tuple(shape[i] for i in perm))
    return transpose(back, tuple(np.argsort(perm)))


def _prod_jvp(primals, tangents, axes):
    x, = primals
    return reduce_prod_p.bind(x, axes=axes), reduce_sum(mul(tangents[0], _prod_of_others(x, axes)), axes)


reduce_prod_p.jvp = _prod_jvp
reduce_prod_p.vjp = lambda ct, primals, out, needs, axes: (
    mul(expand_reduced(ct, shape_of(primals[0]), axes), _prod_of_others(primals[0], axes)),)


def _argdeclare_reduction(name: str, impl) -> Primitive:
    p = Primitive(name)

    def checked_impl(x, axis):
        if x.size == 0:
            check_nonempty(name, x, (axis,))
        return impl(x, axis)

    p.impl = checked_impl

    def abstract_eval(x, axis):
        shape = reduced_shape(name, x, (axis,))
        check_nonempty(name, x, (axis,))
        return ShapedArray(shape, _dtypes.int_)

    p.abstract_eval = abstract_eval

    def batch(values, dims, size, axis):
        return p.bind(moveaxis(values[0], dims[0], 0), axis=axis + 1), 0

    p.batch = batch
    return p


argmax_p = _argdeclare_reduction("argmax", np.argmax)
argmin_p = _argdeclare_reduction("argmin", np.argmin)


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
    x.shape if 0 <= axis < len(x.shape) else reduced_shape("cumsum", x, (axis,)), sum_dtype(x.dtype))
cumsum_p.jvp = lambda primals, tangents, axis, reverse: (
    cumsum_p.bind(primals[0], axis=axis, reverse=reverse), cumsum_p.bind(tangents[0], axis=axis, reverse=reverse))
cumsum_p.vjp = lambda ct, primals, out, needs, axis, reverse: (
    cumsum_p.bind(ct, axis=axis, reverse=not reverse),)


def _cumsum_batch(values, dims, size, axis, reverse):
    return cumsum_p.bind(moveaxis(values[0], dims[0], 0), axis=axis + 1, reverse=reverse), 0


cumsum_p.batch = _cumsum_batch
__all__ = ["argmax_p", "argmin_p", "cumsum_p", "reduce_max_p", "reduce_min_p", "reduce_prod_p", "reduce_sum",
           "reduce_sum_p"]
