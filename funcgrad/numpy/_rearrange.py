"""funcgrad.numpy: flips, rolls and rotations, permute_dims, resize, kron, meshgrid, indices, ix_."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array, Tracer
from funcgrad._dtypes import describe
from funcgrad import lax
from funcgrad.numpy._base import arr, index_arg, normalize_axis, promote, shape_tuple
from funcgrad.numpy._shape import concatenate, flip, moveaxis, ravel, reshape, transpose
from funcgrad.numpy._arrays import _const, _iota, _is_traced, _py_max, _take
from funcgrad.numpy._selection import nonzero
from funcgrad.typing import ArrayLike, DTypeLike

__all__ = [
    "fliplr", "flipud", "indices", "ix_", "kron", "matrix_transpose", "meshgrid", "permute_dims", "resize", "roll",
    "rollaxis", "rot90",
]


def fliplr(m: ArrayLike) -> Array:
    """``m`` reversed along axis 1 (rank >= 2).

    >>> fliplr(fnp.eye(2))
    Array([[0., 1.],
           [1., 0.]], dtype=float32)
    """
    m = arr(m)
    if m.ndim < 2:
        raise ValueError(f"fliplr: needs an array of rank >= 2, got {describe(m)}")
    return flip(m, 1)


def flipud(m: ArrayLike) -> Array:
    """``m`` reversed along axis 0 (rank >= 1).

    >>> flipud(fnp.arange(3))
    Array([2, 1, 0], dtype=int32)
    """
    m = arr(m)
    if m.ndim < 1:
        raise ValueError(f"flipud: needs an array of rank >= 1, got {describe(m)}")
    return flip(m, 0)


def permute_dims(a: ArrayLike, /, axes: tuple[int, ...]) -> Any:
    """The array-API name of :func:`transpose` (``axes`` required).

    >>> permute_dims(fnp.ones((2, 3)), (1, 0)).shape
    (3, 2)
    """
    return transpose(a, axes)


def matrix_transpose(x: ArrayLike, /) -> Any:
    """``x`` with its last two axes swapped (rank >= 2).

    >>> matrix_transpose(fnp.ones((4, 2, 3))).shape
    (4, 3, 2)
    """
    x = arr(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: needs an array of rank >= 2, got {describe(x)}")
    return lax.transpose(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


def rollaxis(a: ArrayLike, axis: int, start: int = 0) -> Any:
    """Axis ``axis`` moved to before position ``start`` (numpy's older :func:`moveaxis`).

    >>> rollaxis(fnp.ones((2, 3, 4)), 2).shape
    (4, 2, 3)
    """
    a = arr(a)
    axis = normalize_axis("rollaxis", axis, a.ndim, a)
    start = index_arg("rollaxis", "start", start)
    if not -a.ndim <= start <= a.ndim:
        raise ValueError(f"rollaxis: start {start} is out of range for {describe(a)}: expected -{a.ndim} <= start "
                         f"<= {a.ndim}")
    start %= a.ndim + 1
    if axis < start:
        start -= 1
    return moveaxis(a, axis, start) if axis != start else a


def roll(a: ArrayLike, shift: Any, axis: int | Sequence[int] | None = None) -> Array:
    """Elements shifted by ``shift`` along ``axis`` (None: the flattened array), wrapping around.
    ``shift`` may be a traced integer.

    >>> roll(fnp.arange(4), 1)
    Array([3, 0, 1, 2], dtype=int32)
    """
    x = arr(a)
    if axis is None:
        return reshape(roll(ravel(x), shift, 0), x.shape)
    if isinstance(axis, np.ndarray):
        axis = axis.tolist()
    if isinstance(shift, np.ndarray):
        shift = shift.tolist()
    axes = [normalize_axis("roll", ax, x.ndim, x) for ax in (axis if isinstance(axis, (tuple, list)) else [axis])]
    if isinstance(shift, (Array, Tracer)) and (_is_traced(shift) or shift.ndim > 0):   # shifts as values
        if shift.dtype.kind not in "iu":
            raise TypeError(f"roll: shift must hold integers, got {describe(shift)}")
        shifts = [shift] if shift.ndim == 0 else [lax.getitem(shift, i) for i in range(shift.shape[0])]
    else:
        shifts = [index_arg("roll", "shift", v) for v in (shift if isinstance(shift, (tuple, list)) else [shift])]
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    elif len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: {len(shifts)} shifts for {len(axes)} axes: give one shift, one axis, or as many "
                         "of each")
    for s, ax in zip(shifts, axes):
        n = x.shape[ax]
        if n == 0:
            continue
        if isinstance(s, int):
            s %= n
            if s:
                x = concatenate([lax.static_slice(x, ax, n - s, n), lax.static_slice(x, ax, 0, n - s)], axis=ax)
        else:
            s = lax.convert_element_type(s, np.int32)
            idx = lax.mod(lax.sub(_iota(n), s), lax.full((), n, np.int32))   # rem has the divisor's sign
            x = _take(x, idx, ax)
    return x


def rot90(m: ArrayLike, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Array:
    """``m`` rotated by 90 degrees ``k`` times in the plane of ``axes`` (from the first axis towards the second).

    >>> rot90(fnp.array([[1, 2], [3, 4]]))
    Array([[2, 4],
           [1, 3]], dtype=int32)
    """
    m = arr(m)
    if len(tuple(axes)) != 2:
        raise ValueError(f"rot90: axes must name two axes, got {axes!r}")
    a0, a1 = (normalize_axis("rot90", ax, m.ndim, m) for ax in axes)
    if a0 == a1:
        raise ValueError(f"rot90: axes {tuple(axes)} must be two different axes of {describe(m)}")
    k = index_arg("rot90", "k", k) % 4
    if k == 0:
        return m
    if k == 2:
        return flip(m, (a0, a1))
    perm = list(range(m.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return lax.transpose(flip(m, a1), tuple(perm))
    return flip(lax.transpose(m, tuple(perm)), a1)


def resize(a: ArrayLike, new_shape: Any) -> Any:
    """An array of ``new_shape`` filled with ``a``'s flattened elements, repeated as often as needed.

    >>> resize(fnp.arange(3), (2, 2))
    Array([[0, 1],
           [2, 0]], dtype=int32)
    """
    a = arr(a)
    shape = shape_tuple(new_shape, "resize", "new_shape")
    total = int(np.prod(shape, dtype=np.int64))
    flat = ravel(a)
    if a.size == 0:
        return lax.full(shape, 0, a.dtype)
    return lax.reshape(_take(flat, _const(np.arange(total, dtype=np.int32) % a.size), 0), shape)


def kron(a: ArrayLike, b: ArrayLike) -> Array:
    """The Kronecker product: blocks ``a[i, j] * b`` (shapes aligned from the right).

    >>> kron(fnp.eye(2), fnp.ones((2, 2))).shape
    (4, 4)
    """
    a, b = promote(arr(a), arr(b))
    nd = _py_max(a.ndim, b.ndim)
    sa, sb = (1,) * (nd - a.ndim) + a.shape, (1,) * (nd - b.ndim) + b.shape
    a2 = lax.reshape(a, tuple(v for s in sa for v in (s, 1)))
    b2 = lax.reshape(b, tuple(v for s in sb for v in (1, s)))
    prod = lax.mul(lax.broadcast_to(a2, tuple(v for x, y in zip(sa, sb) for v in (x, y))), b2)
    return lax.reshape(prod, tuple(x * y for x, y in zip(sa, sb)))


def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> list:
    """Coordinate arrays from 1-d coordinate vectors (``indexing='xy'``: the first two axes swapped).

    >>> [g.shape for g in meshgrid(fnp.arange(3), fnp.arange(2))]
    [(2, 3), (2, 3)]
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    xs = [arr(x) for x in xi]
    for x in xs:
        if x.ndim != 1:
            raise ValueError(f"meshgrid: each coordinate vector must be 1-d, got {describe(x)}")
    n = len(xs)
    shape = [x.shape[0] for x in xs]
    if indexing == "xy" and n >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        pos = i if indexing == "ij" or n < 2 or i > 1 else 1 - i
        one = [1] * n
        one[pos] = x.shape[0]
        y = lax.reshape(x, tuple(one))
        out.append(y if sparse else lax.broadcast_to(y, tuple(shape)))
    return out


def indices(dimensions: Sequence[int], dtype: DTypeLike | None = None, sparse: bool = False) -> Any:
    """An array of index grids, one per dimension (a tuple of broadcastable ones with ``sparse=True``).

    >>> indices((2, 3)).shape
    (2, 2, 3)
    """
    dims = shape_tuple(dimensions, "indices", "dimensions")
    dtype = _dtypes.canonicalize(dtype or _dtypes.int_, requested=True)
    grids = np.indices(dims, dtype=dtype, sparse=sparse)
    return tuple(_const(g) for g in grids) if sparse else _const(grids)


def ix_(*args: Any) -> tuple:
    """Open-mesh index arrays from 1-d integer (or boolean: their nonzero positions) sequences, for
    ``x[ix_(rows, cols)]``.  Other dtypes pass through unchanged, as in JAX.

    >>> [i.shape for i in ix_(fnp.array([0, 1]), fnp.array([2, 0, 1]))]
    [(2, 1), (1, 3)]
    """
    out = []
    n = len(args)
    for k, a in enumerate(args):
        a = arr(a)
        if a.ndim != 1:
            raise ValueError(f"ix_: each argument must be 1-d, got {describe(a)} for argument {k}")
        if a.dtype.kind == "b":
            a = nonzero(a)[0]
        out.append(lax.reshape(a, (1,) * k + (a.shape[0],) + (1,) * (n - k - 1)))
    return tuple(out)
