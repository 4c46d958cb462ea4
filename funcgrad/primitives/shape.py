"""Shape primitives: reshape, transpose, broadcast_to, concatenate, pad, flip.

All are linear, so their jvp applies the primitive to the tangent and their
vjp is the transpose (reshape back, inverse permutation, sum over broadcast
axes, slice, unpad, flip).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from funcgrad._core import Primitive
from funcgrad._dtypes import ShapedArray, describe, result_type
from funcgrad.primitives.elementwise import shape_of, unbroadcast


def _linear_jvp(p: Primitive):
    def jvp(primals, tangents, **params):
        out = p.bind(*primals, **params)
        ts = [_fnp.zeros_like(x) if t is None else t for x, t in zip(primals, tangents)]
        return out, p.bind(*ts, **params)
    return jvp


def moveaxis(x: Any, src: int, dst: int) -> Any:
    if src == dst:
        return x
    ndim = len(shape_of(x))
    perm = [i for i in range(ndim) if i != src]
    perm.insert(dst, src)
    return transpose(x, tuple(perm))


# ---------------------------------------------------------------- reshape

reshape_p = Primitive("reshape")
reshape_p.impl = lambda x, shape: np.reshape(x, shape)


def _reshape_aval(x, shape):
    if int(np.prod(shape, dtype=np.int64)) != int(np.prod(shape_of(x), dtype=np.int64)):
        raise ValueError(f"reshape: cannot reshape an array {describe(x)} into shape {shape} "
                         "(the number of elements must stay the same)")
    return ShapedArray(shape, x.dtype)


reshape_p.abstract_eval = _reshape_aval
reshape_p.jvp = _linear_jvp(reshape_p)
reshape_p.vjp = lambda ct, primals, out, needs, shape: (reshape(ct, shape_of(primals[0])),)
reshape_p.batch = lambda values, dims, size, shape: (
    reshape_p.bind(moveaxis(values[0], dims[0], 0), shape=(size,) + shape), 0)


def reshape(x: Any, shape: tuple[int, ...]) -> Any:
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
transpose_p.jvp = _linear_jvp(transpose_p)
transpose_p.vjp = lambda ct, primals, out, needs, perm: (transpose(ct, tuple(int(i) for i in np.argsort(perm))),)
transpose_p.batch = lambda values, dims, size, perm: (
    transpose_p.bind(moveaxis(values[0], dims[0], 0), perm=(0,) + tuple(p + 1 for p in perm)), 0)


def transpose(x: Any, perm: Sequence[int]) -> Any:
    perm = tuple(int(p) for p in perm)
    return x if perm == tuple(range(len(perm))) else transpose_p.bind(x, perm=perm)


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
broadcast_to_p.jvp = _linear_jvp(broadcast_to_p)
broadcast_to_p.vjp = lambda ct, primals, out, needs, shape: (unbroadcast(ct, shape_of(primals[0])),)


def _broadcast_batch(values, dims, size, shape):
    x = moveaxis(values[0], dims[0], 0)
    inner = shape_of(x)[1:]
    x = reshape(x, (size,) + (1,) * (len(shape) - len(inner)) + inner)
    return broadcast_to_p.bind(x, shape=(size,) + tuple(shape)), 0


broadcast_to_p.batch = _broadcast_batch


def broadcast_to(x: Any, shape: tuple[int, ...]) -> Any:
    shape = tuple(map(int, shape))
    return x if shape_of(x) == shape and not isinstance(x, (bool, int, float)) else broadcast_to_p.bind(x, shape=shape)


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
concatenate_p.jvp = _linear_jvp(concatenate_p)


def _concat_vjp(ct, primals, out, needs, axis):
    from funcgrad.primitives.indexing import static_slice
    cts, start = [], 0
    for x, need in zip(primals, needs):
        n = shape_of(x)[axis]
        cts.append(static_slice(ct, axis, start, start + n) if need else None)
        start += n
    return cts


def _concat_batch(values, dims, size, axis):
    from funcgrad.interpreters.batching import move_to_front
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
    from funcgrad.primitives.indexing import getitem
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
flip_p.jvp = _linear_jvp(flip_p)
flip_p.vjp = lambda ct, primals, out, needs, axes: (flip_p.bind(ct, axes=axes),)
flip_p.batch = lambda values, dims, size, axes: (
    flip_p.bind(moveaxis(values[0], dims[0], 0), axes=tuple(a + 1 for a in axes)), 0)

# Imported last, as a module: it builds on this one.
from funcgrad import numpy as _fnp  # noqa: E402
