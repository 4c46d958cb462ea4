"""funcgrad.numpy: array functions -- stacking and splitting, rolling and rotating, diagonals, index helpers,
value-dependent selections (``nonzero``, ``unique`` and the set operations) and bit packing.

Everything is written on lax and the primitives, so grad, vmap and jit apply.  Functions whose output shape
depends on the values (``nonzero``, ``unique``, ``compress``, ...) run eagerly on concrete arrays; under
jit/vmap they need ``size=`` (and optionally ``fill_value=``), as in JAX.

>>> import funcgrad.numpy as fnp
>>> fnp.hstack([fnp.ones(2), fnp.zeros(1)])          # [1., 1., 0.]
>>> fnp.unique(fnp.array([3, 1, 3]), size=3, fill_value=-1)   # [1, 3, -1]
"""
from __future__ import annotations

import builtins
from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array, ConcretizationError, Tracer, as_array
from funcgrad._dtypes import describe
from funcgrad import lax
from funcgrad.numpy._base import arr, index_arg, normalize_axes, normalize_axis, promote, shape_tuple
from funcgrad.numpy._shape import (broadcast_to, concatenate, flip, moveaxis, ravel, reshape, split,
                                   stack, transpose)

__all__ = [
    "append", "argwhere", "array_split", "atleast_1d", "atleast_2d", "atleast_3d", "block", "broadcast_shapes",
    "choose", "column_stack", "compress", "concat", "delete", "diag", "diag_indices", "diag_indices_from",
    "diagflat", "diagonal", "dsplit", "dstack", "extract", "fill_diagonal", "flatnonzero", "fliplr", "flipud",
    "hsplit", "hstack", "indices", "insert", "intersect1d", "isin", "ix_", "kron", "mask_indices",
    "matrix_transpose", "meshgrid", "nonzero", "packbits", "permute_dims", "piecewise", "place", "put",
    "put_along_axis", "ravel_multi_index", "resize", "roll", "rollaxis", "rot90", "select", "setdiff1d",
    "setxor1d", "trace", "tril_indices", "tril_indices_from", "trim_zeros", "triu_indices", "triu_indices_from",
    "union1d", "unique", "unique_all", "unique_counts", "unique_inverse", "unique_values", "unpackbits",
    "unravel_index", "unstack", "vsplit", "vstack",
]

_py_slice, _py_max, _py_min = builtins.slice, builtins.max, builtins.min


# ---------------------------------------------------------------------------------------------- helpers


def _index(x: Any) -> Any:
    """An index result in the default int dtype (int32, or int64 with x64), as JAX returns them."""
    return lax.convert_element_type(x, _dtypes.int_)


def _const(value: Any, dtype: Any = None) -> Any:
    return as_array(np.asarray(value) if dtype is None else np.asarray(value, dtype=_dtypes.canonicalize(dtype)))


def _iota(n: int) -> Any:
    return _const(np.arange(n, dtype=np.int32))


def _is_traced(x: Any) -> bool:
    return isinstance(x, Tracer)


def _concrete(x: Any, name: str, what: str, hint: str = "pass size=N (and fill_value=) to fix the output size") \
        -> np.ndarray:
    """The numpy value of ``x``; a traced value (under jit or vmap) raises a ConcretizationError saying why a
    value is needed and the fix."""
    if isinstance(x, Tracer):
        try:
            return np.asarray(x.concrete_value())
        except ConcretizationError:
            raise ConcretizationError(
                f"{name}: the output shape depends on the values of {what} {describe(x)}, which are not known "
                f"under jit/vmap: {hint}") from None
    return np.asarray(x._value if isinstance(x, Array) else x)


def _truth(x: Any) -> Any:
    x = arr(x)
    return x if x.dtype.kind == "b" else lax.ne(x, lax.full((), 0, x.dtype))


def _where(c: Any, x: Any, y: Any) -> Any:
    x, y = promote(x, y)
    return lax.select_p.bind(c, x, y)


def _take(x: Any, idx: Any, axis: int) -> Any:
    """``x`` gathered along ``axis`` with an int index array (in range)."""
    return lax.getitem(x, (_py_slice(None),) * axis + (idx,))


def _size_arg(name: str, size: Any) -> int:
    n = index_arg(name, "size", size)
    if n < 0:
        raise ValueError(f"{name}: size must be >= 0, got {n}")
    return n


def _true_positions(mask: Any, size: int) -> tuple[Any, Any]:
    """For a 1-d bool ``mask`` (traced or not): the first ``size`` positions where it is True, in order
    (int32, padded with 0), and a bool array saying which entries are real."""
    n = mask.shape[0]
    if n == 0:
        return _const(np.zeros(size, np.int32)), _const(np.zeros(size, bool))
    key = lax.convert_element_type(lax.logical_not(mask), np.int32)   # 0 where True: stable sort puts them first
    order = lax.convert_element_type(lax.argsort(key, 0), np.int32)
    if size <= n:
        order = lax.static_slice(order, 0, 0, size)
    else:
        order = lax.pad_p.bind(order, widths=((0, size - n),), value=0)
    count = lax.reduce_sum(lax.convert_element_type(mask, np.int32), (0,))
    valid = lax.lt(_iota(size), count)
    return lax.select_p.bind(valid, order, lax.full((), 0, np.int32)), valid


def _count_true(mask: Any, name: str, what: str) -> int:
    return int(np.count_nonzero(_concrete(mask, name, what)))


def _fill(values: Any, valid: Any, fill_value: Any) -> Any:
    """``values`` where ``valid`` (broadcast from the left), else ``fill_value`` (cast to their dtype)."""
    if valid.ndim < values.ndim:
        valid = lax.reshape(valid, valid.shape + (1,) * (values.ndim - valid.ndim))
        valid = lax.broadcast_to(valid, values.shape)
    fill = arr(fill_value)
    return lax.select_p.bind(valid, values, lax.convert_element_type(fill, values.dtype))


# ---------------------------------------------------------------------------------------------- shapes


def broadcast_shapes(*shapes: Any) -> tuple[int, ...]:
    """The shape that arrays of ``shapes`` broadcast to (ints count as 1-d shapes).

    >>> broadcast_shapes((3, 1), (4,))    # (3, 4)
    """
    tuples = [shape_tuple(s, "broadcast_shapes") for s in shapes]
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*tuples))
    except ValueError:
        raise ValueError(f"broadcast_shapes: shapes {', '.join(map(str, tuples))} cannot be broadcast together: "
                         "aligned from the right, each axis must be 1 or the same size") from None


def _atleast(name: str, nd: int, arys: tuple) -> Any:
    out = []
    for a in arys:
        a = arr(a)
        if a.ndim < nd:
            if nd == 3 and a.ndim == 1:
                shape = (1, a.shape[0], 1)
            elif nd == 3 and a.ndim == 2:
                shape = a.shape + (1,)
            else:
                shape = (1,) * (nd - a.ndim) + a.shape
            a = lax.reshape(a, shape)
        out.append(a)
    return out[0] if len(out) == 1 else out


def atleast_1d(*arys: Any) -> Any:
    """Each argument as an array of rank >= 1 (one array for one argument, else a list).

    >>> atleast_1d(2.0).shape    # (1,)
    """
    return _atleast("atleast_1d", 1, arys)


def atleast_2d(*arys: Any) -> Any:
    """Each argument with rank >= 2 (leading length-1 axes added).

    >>> atleast_2d(fnp.ones(3)).shape    # (1, 3)
    """
    return _atleast("atleast_2d", 2, arys)


def atleast_3d(*arys: Any) -> Any:
    """Each argument with rank >= 3: ``(n,)`` -> ``(1, n, 1)``, ``(m, n)`` -> ``(m, n, 1)``, as numpy.

    >>> atleast_3d(fnp.ones(3)).shape    # (1, 3, 1)
    """
    return _atleast("atleast_3d", 3, arys)


def _sequence(name: str, tup: Any) -> list:
    if isinstance(tup, (Array, Tracer, np.ndarray)):
        tup = arr(tup)
        if tup.ndim == 0:
            raise ValueError(f"{name}: expected a sequence of arrays, got a 0-d array {describe(tup)}")
        return [lax.getitem(tup, i) for i in range(tup.shape[0])]
    seq = list(tup)
    if not seq:
        raise ValueError(f"{name}: need at least one array to stack")
    return seq


def _dtyped(out: Any, dtype: Any) -> Any:
    return out if dtype is None else lax.convert_element_type(out, dtype)


def hstack(tup: Any, dtype: Any = None) -> Any:
    """Arrays joined along axis 1 (axis 0 for 1-d arrays); 0-d arrays count as 1-d.

    >>> hstack([fnp.ones(2), fnp.zeros(1)])    # f32[3]
    """
    xs = [atleast_1d(a) for a in _sequence("hstack", tup)]
    return _dtyped(concatenate(xs, axis=0 if xs[0].ndim == 1 else 1), dtype)


def vstack(tup: Any, dtype: Any = None) -> Any:
    """Arrays joined along axis 0 after :func:`atleast_2d`.

    >>> vstack([fnp.ones(2), fnp.zeros(2)]).shape    # (2, 2)
    """
    return _dtyped(concatenate([atleast_2d(a) for a in _sequence("vstack", tup)], axis=0), dtype)


def dstack(tup: Any, dtype: Any = None) -> Any:
    """Arrays joined along axis 2 after :func:`atleast_3d`.

    >>> dstack([fnp.ones((2, 2)), fnp.zeros((2, 2))]).shape    # (2, 2, 2)
    """
    return _dtyped(concatenate([atleast_3d(a) for a in _sequence("dstack", tup)], axis=2), dtype)


def column_stack(tup: Any) -> Any:
    """1-d arrays as columns (and 2-d arrays as they are) joined along axis 1.

    >>> column_stack([fnp.ones(3), fnp.zeros(3)]).shape    # (3, 2)
    """
    xs = []
    for a in _sequence("column_stack", tup):
        a = arr(a)
        xs.append(lax.reshape(a, (a.size, 1)) if a.ndim < 2 else a)
    return concatenate(xs, axis=1)


def concat(arrays: Sequence[Any], /, *, axis: int | None = 0) -> Any:
    """The array-API name of :func:`concatenate`; ``axis=None`` joins the flattened arrays.

    >>> concat([fnp.ones(2), fnp.zeros(1)])    # f32[3]
    """
    if axis is None:
        return concatenate([ravel(a) for a in arrays], axis=0)
    return concatenate(arrays, axis=axis)


def append(arr: Any, values: Any, axis: int | None = None) -> Any:  # noqa: F811 -- numpy's parameter name
    """``values`` appended to ``arr`` along ``axis`` (None: both flattened).

    >>> append(fnp.ones(2), 3.0)    # [1., 1., 3.]
    """
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], axis=0)
    return concatenate([arr, values], axis=axis)


def block(arrays: Any) -> Any:
    """An array assembled from nested lists of blocks (the innermost lists join along the last axis).

    >>> block([[fnp.eye(2), fnp.zeros((2, 1))]]).shape    # (2, 3)
    """
    def depth(a: Any, path: str) -> int:
        if isinstance(a, tuple):
            raise TypeError(f"block: {path} is a tuple; only lists nest blocks")
        if isinstance(a, list):
            if not a:
                raise ValueError(f"block: {path} is an empty list")
            ds = {depth(b, f"{path}[{i}]") for i, b in enumerate(a)}
            if len(ds) != 1:
                raise ValueError(f"block: the lists in {path} are nested to different depths {sorted(ds)}")
            return ds.pop() + 1
        return 0

    def leaves(a: Any) -> list:
        return [leaf for b in a for leaf in leaves(b)] if isinstance(a, list) else [arr(a)]

    levels = depth(arrays, "arrays")
    nd = _py_max([levels] + [x.ndim for x in leaves(arrays)])

    def build(a: Any, level: int) -> Any:
        if not isinstance(a, list):
            a = arr(a)
            return lax.reshape(a, (1,) * (nd - a.ndim) + a.shape)
        return concatenate([build(b, level + 1) for b in a], axis=nd - (levels - level))

    return build(arrays, 0)


def unstack(x: Any, /, *, axis: int = 0) -> tuple:
    """The slices of ``x`` along ``axis``, as a tuple.

    >>> len(unstack(fnp.ones((3, 2))))    # 3
    """
    x = arr(x)
    if x.ndim == 0:
        raise ValueError("unstack: needs an array of rank >= 1, got a 0-d array")
    axis = normalize_axis("unstack", axis, x.ndim, x)
    return tuple(lax.getitem(x, (_py_slice(None),) * axis + (i,)) for i in range(x.shape[axis]))


def array_split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list:
    """Like :func:`split`, but an int number of sections need not divide the axis (the first pieces get one more).

    >>> [p.shape for p in array_split(fnp.arange(5), 3)]    # [(2,), (2,), (1,)]
    """
    x = arr(ary)
    axis = normalize_axis("array_split", axis, x.ndim, x)
    if isinstance(indices_or_sections, (int, np.integer)) or getattr(indices_or_sections, "ndim", 1) == 0:
        k = index_arg("array_split", "indices_or_sections", indices_or_sections)
        if k <= 0:
            raise ValueError(f"array_split: the number of sections must be > 0, got {k}")
        each, extra = divmod(x.shape[axis], k)
        cuts = np.cumsum([each + 1] * extra + [each] * (k - extra))[:-1]
        return split(x, [int(c) for c in cuts], axis=axis)
    return split(x, indices_or_sections, axis=axis)


def _split_on(name: str, axis: int, min_ndim: int, ary: Any, indices_or_sections: Any) -> list:
    x = arr(ary)
    if x.ndim < min_ndim:
        raise ValueError(f"{name}: needs an array of rank >= {min_ndim}, got {describe(x)}")
    return split(x, indices_or_sections, axis=axis if x.ndim > 1 or name != "hsplit" else 0)


def hsplit(ary: Any, indices_or_sections: Any) -> list:
    """:func:`split` along axis 1 (axis 0 for 1-d arrays).

    >>> [p.shape for p in hsplit(fnp.ones((2, 4)), 2)]    # [(2, 2), (2, 2)]
    """
    return _split_on("hsplit", 1, 1, ary, indices_or_sections)


def vsplit(ary: Any, indices_or_sections: Any) -> list:
    """:func:`split` along axis 0 of an array of rank >= 2.

    >>> [p.shape for p in vsplit(fnp.ones((4, 2)), 2)]    # [(2, 2), (2, 2)]
    """
    return _split_on("vsplit", 0, 2, ary, indices_or_sections)


def dsplit(ary: Any, indices_or_sections: Any) -> list:
    """:func:`split` along axis 2 of an array of rank >= 3.

    >>> [p.shape for p in dsplit(fnp.ones((1, 1, 4)), 2)]    # [(1, 1, 2), (1, 1, 2)]
    """
    return _split_on("dsplit", 2, 3, ary, indices_or_sections)


def fliplr(m: Any) -> Any:
    """``m`` reversed along axis 1 (rank >= 2).

    >>> fliplr(fnp.eye(2))    # [[0., 1.], [1., 0.]]
    """
    m = arr(m)
    if m.ndim < 2:
        raise ValueError(f"fliplr: needs an array of rank >= 2, got {describe(m)}")
    return flip(m, 1)


def flipud(m: Any) -> Any:
    """``m`` reversed along axis 0 (rank >= 1).

    >>> flipud(fnp.arange(3))    # [2, 1, 0]
    """
    m = arr(m)
    if m.ndim < 1:
        raise ValueError(f"flipud: needs an array of rank >= 1, got {describe(m)}")
    return flip(m, 0)


def permute_dims(a: Any, /, axes: tuple[int, ...]) -> Any:
    """The array-API name of :func:`transpose` (``axes`` required).

    >>> permute_dims(fnp.ones((2, 3)), (1, 0)).shape    # (3, 2)
    """
    return transpose(a, axes)


def matrix_transpose(x: Any, /) -> Any:
    """``x`` with its last two axes swapped (rank >= 2).

    >>> matrix_transpose(fnp.ones((4, 2, 3))).shape    # (4, 3, 2)
    """
    x = arr(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: needs an array of rank >= 2, got {describe(x)}")
    return lax.transpose(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


def rollaxis(a: Any, axis: int, start: int = 0) -> Any:
    """Axis ``axis`` moved to before position ``start`` (numpy's older :func:`moveaxis`).

    >>> rollaxis(fnp.ones((2, 3, 4)), 2).shape    # (4, 2, 3)
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


def roll(a: Any, shift: Any, axis: Any = None) -> Any:
    """Elements shifted by ``shift`` along ``axis`` (None: the flattened array), wrapping around.
    ``shift`` may be a traced integer.

    >>> roll(fnp.arange(4), 1)    # [3, 0, 1, 2]
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
            idx = lax.rem(lax.sub(_iota(n), s), lax.full((), n, np.int32))   # rem has the divisor's sign
            x = _take(x, idx, ax)
    return x


def rot90(m: Any, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Any:
    """``m`` rotated by 90 degrees ``k`` times in the plane of ``axes`` (from the first axis towards the second).

    >>> rot90(fnp.array([[1, 2], [3, 4]]))    # [[2, 4], [1, 3]]
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


def resize(a: Any, new_shape: Any) -> Any:
    """An array of ``new_shape`` filled with ``a``'s flattened elements, repeated as often as needed.

    >>> resize(fnp.arange(3), (2, 2))    # [[0, 1], [2, 0]]
    """
    a = arr(a)
    shape = shape_tuple(new_shape, "resize", "new_shape")
    total = int(np.prod(shape, dtype=np.int64))
    flat = ravel(a)
    if a.size == 0:
        return lax.full(shape, 0, a.dtype)
    return lax.reshape(_take(flat, _const(np.arange(total, dtype=np.int32) % a.size), 0), shape)


def kron(a: Any, b: Any) -> Any:
    """The Kronecker product: blocks ``a[i, j] * b`` (shapes aligned from the right).

    >>> kron(fnp.eye(2), fnp.ones((2, 2))).shape    # (4, 4)
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

    >>> [g.shape for g in meshgrid(fnp.arange(3), fnp.arange(2))]    # [(2, 3), (2, 3)]
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


def indices(dimensions: Sequence[int], dtype: Any = None, sparse: bool = False) -> Any:
    """An array of index grids, one per dimension (a tuple of broadcastable ones with ``sparse=True``).

    >>> indices((2, 3)).shape    # (2, 2, 3)
    """
    dims = shape_tuple(dimensions, "indices", "dimensions")
    dtype = _dtypes.canonicalize(dtype or _dtypes.int_)
    grids = np.indices(dims, dtype=dtype, sparse=sparse)
    return tuple(_const(g) for g in grids) if sparse else _const(grids)


def ix_(*args: Any) -> tuple:
    """Open-mesh index arrays from 1-d integer (or boolean: their nonzero positions) sequences, for
    ``x[ix_(rows, cols)]``.  Other dtypes pass through unchanged, as in JAX.

    >>> [i.shape for i in ix_(fnp.array([0, 1]), fnp.array([2, 0, 1]))]    # [(2, 1), (1, 3)]
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


# ---------------------------------------------------------------------------------------------- diagonals


def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """The diagonal of ``a`` in the plane of ``axis1``/``axis2`` (``offset`` > 0: above it), as the last axis.

    >>> diagonal(fnp.arange(9).reshape(3, 3), 1)    # [1, 5]
    """
    a = arr(a)
    if a.ndim < 2:
        raise ValueError(f"diagonal: needs an array of rank >= 2, got {describe(a)}")
    ax1, ax2 = normalize_axis("diagonal", axis1, a.ndim, a), normalize_axis("diagonal", axis2, a.ndim, a)
    if ax1 == ax2:
        raise ValueError(f"diagonal: axis1 and axis2 must differ, got both {ax1} for {describe(a)}")
    offset = index_arg("diagonal", "offset", offset)
    rest = [d for d in range(a.ndim) if d not in (ax1, ax2)]
    x = lax.transpose(a, tuple(rest) + (ax1, ax2))
    n, m = x.shape[-2:]
    length = _py_max(0, _py_min(n + _py_min(offset, 0), m - _py_max(offset, 0)))
    rows = np.arange(length, dtype=np.int32) + _py_max(-offset, 0)
    cols = np.arange(length, dtype=np.int32) + _py_max(offset, 0)
    return lax.getitem(x, (Ellipsis, _const(rows), _const(cols)))


def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None, out: None = None) -> Any:
    """The sum along a diagonal (see :func:`diagonal`); bools and small ints sum as the default int.

    >>> trace(fnp.eye(3))    # 3.0
    """
    if out is not None:
        raise NotImplementedError("trace: the out argument is not supported (funcgrad arrays are immutable)")
    d = diagonal(a, offset, axis1, axis2)
    if dtype is not None:
        d = lax.convert_element_type(d, dtype)
    elif d.dtype.kind in "biu" and d.dtype.itemsize < _dtypes.int_.itemsize or d.dtype.kind == "b":
        d = lax.convert_element_type(d, _dtypes.int_)
    return lax.reduce_sum(d, (d.ndim - 1,))


def diag(v: Any, k: int = 0) -> Any:
    """A 1-d ``v`` placed on diagonal ``k`` of a square matrix, or diagonal ``k`` of a 2-d ``v``.

    >>> diag(fnp.array([1.0, 2.0]))    # [[1., 0.], [0., 2.]]
    """
    v = arr(v)
    k = index_arg("diag", "k", k)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError(f"diag: v must be 1-d or 2-d, got {describe(v)}")
    n = v.shape[0] + abs(k)
    i, j = np.indices((n, n))
    src = np.where(j - i == k, np.minimum(i, j), v.shape[0])   # v's index on the diagonal, else the padding slot
    padded = lax.pad_p.bind(v, widths=((0, 1),), value=False if v.dtype.kind == "b" else 0)
    return _take(padded, _const(src.astype(np.int32)), 0)


def diagflat(v: Any, k: int = 0) -> Any:
    """The flattened ``v`` placed on diagonal ``k`` of a square matrix.

    >>> diagflat(fnp.ones((2, 1))).shape    # (2, 2)
    """
    return diag(ravel(v), k)


def diag_indices(n: int, ndim: int = 2) -> tuple:
    """The indices of the main diagonal of an ``(n,) * ndim`` array: ``ndim`` copies of ``arange(n)``.

    >>> diag_indices(3)[0]    # [0, 1, 2]
    """
    n, ndim = index_arg("diag_indices", "n", n), index_arg("diag_indices", "ndim", ndim)
    if n < 0 or ndim < 0:
        raise ValueError(f"diag_indices: n and ndim must be >= 0, got n={n}, ndim={ndim}")
    return (_const(np.arange(n), _dtypes.int_),) * ndim


def diag_indices_from(arr: Any) -> tuple:  # noqa: F811 -- numpy's parameter name
    """:func:`diag_indices` for ``arr``, whose axes must all have the same length (rank >= 2).

    >>> len(diag_indices_from(fnp.ones((2, 2, 2))))    # 3
    """
    shape = np.shape(arr) if not hasattr(arr, "shape") else tuple(arr.shape)
    if len(shape) < 2 or len(set(shape)) != 1:
        raise ValueError(f"diag_indices_from: needs an array of rank >= 2 with all axes of equal length, got shape "
                         f"{shape}")
    return diag_indices(shape[0], len(shape))


def _tri_indices(name: str, fn: Callable, n: Any, k: Any, m: Any) -> tuple:
    n = index_arg(name, "n", n)
    k = index_arg(name, "k", k)
    m = n if m is None else index_arg(name, "m", m)
    if n < 0 or m < 0:
        raise ValueError(f"{name}: n and m must be >= 0, got n={n}, m={m}")
    return tuple(_const(i, _dtypes.int_) for i in fn(n, k, m))


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple:
    """Row and column indices of the lower triangle (on and below diagonal ``k``) of an ``n x m`` matrix.

    >>> tril_indices(2)    # ([0, 1, 1], [0, 0, 1])
    """
    return _tri_indices("tril_indices", np.tril_indices, n, k, m)


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple:
    """Row and column indices of the upper triangle (on and above diagonal ``k``) of an ``n x m`` matrix.

    >>> triu_indices(2)    # ([0, 0, 1], [0, 1, 1])
    """
    return _tri_indices("triu_indices", np.triu_indices, n, k, m)


def _tri_from(name: str, fn: Callable, arr: Any, k: int) -> tuple:
    shape = np.shape(arr) if not hasattr(arr, "shape") else tuple(arr.shape)
    if len(shape) != 2:
        raise ValueError(f"{name}: needs a 2-d array, got shape {shape}")
    return fn(shape[0], k, shape[1])


def tril_indices_from(arr: Any, k: int = 0) -> tuple:  # noqa: F811
    """:func:`tril_indices` for the shape of a 2-d ``arr``.

    >>> tril_indices_from(fnp.ones((2, 3)))    # ([0, 1, 1], [0, 0, 1])
    """
    return _tri_from("tril_indices_from", tril_indices, arr, k)


def triu_indices_from(arr: Any, k: int = 0) -> tuple:  # noqa: F811
    """:func:`triu_indices` for the shape of a 2-d ``arr``.

    >>> triu_indices_from(fnp.ones((2, 3)))    # ([0, 0, 0, 1, 1], [0, 1, 2, 1, 2])
    """
    return _tri_from("triu_indices_from", triu_indices, arr, k)


def mask_indices(n: int, mask_func: Callable, k: int = 0, *, size: int | None = None) -> tuple:
    """The indices where ``mask_func(ones((n, n)), k)`` is nonzero (e.g. ``mask_indices(3, fnp.triu)``).

    >>> mask_indices(2, fnp.triu)    # ([0, 0, 1], [0, 1, 1])
    """
    from funcgrad.numpy._creation import ones
    n = index_arg("mask_indices", "n", n)
    return nonzero(mask_func(ones((n, n), np.int32), k), size=size)


def _no_inplace(name: str, inplace: bool) -> None:
    if inplace:
        raise ValueError(f"{name} cannot modify arrays in place, because funcgrad arrays are immutable (as JAX's): "
                         f"pass inplace=False to get the updated array back")


def fill_diagonal(a: Any, val: Any, wrap: bool = False, *, inplace: bool = True) -> Any:
    """``a`` with its main diagonal set to ``val`` (repeated as needed); needs ``inplace=False``, as JAX.

    For rank > 2 every axis must have the same length; ``wrap=True`` continues the diagonal below a tall
    matrix every ``m + 1`` rows, as numpy.

    >>> fill_diagonal(fnp.zeros((2, 2)), 5.0, inplace=False)    # [[5., 0.], [0., 5.]]
    """
    _no_inplace("fill_diagonal", inplace)
    a = arr(a)
    if a.ndim < 2:
        raise ValueError(f"fill_diagonal: needs an array of rank >= 2, got {describe(a)}")
    if a.ndim > 2 and len(set(a.shape)) != 1:
        raise ValueError(f"fill_diagonal: an array of rank > 2 must have all axes of equal length, got {describe(a)}")
    if a.ndim == 2:
        step = a.shape[1] + 1
        end = a.size if wrap else _py_min(a.size, a.shape[1] * a.shape[1])
    else:
        step = 1 + int(np.cumprod(a.shape[:-1]).sum())
        end = a.size
    positions = np.arange(0, end, step, dtype=np.int32)
    vals = ravel(arr(val))
    if vals.size == 0 or positions.size == 0:
        return a
    vals = _take(vals, _const(np.arange(positions.size, dtype=np.int32) % vals.size), 0)
    out = lax.scatter(ravel(a), _const(positions), lax.convert_element_type(vals, a.dtype))
    return lax.reshape(out, a.shape)


# ---------------------------------------------------------------------------------------------- index helpers


def _index_mode(name: str, idx: Any, n: int, mode: str | None, default: str) -> Any:
    """Integer indices into an axis of length ``n`` under ``mode``: 'raise' (checked when concrete),
    'wrap', 'clip', or 'fill' (numpy-style negatives; out of range -> ``n``, a slot that is dropped)."""
    mode = default if mode is None else mode
    idx = lax.convert_element_type(arr(idx), np.int32)
    size = lax.full((), n, np.int32)
    zero = lax.full((), 0, np.int32)
    if mode == "wrap":
        return lax.rem(idx, size) if n else idx
    if mode == "clip":
        return lax.max(lax.min(idx, lax.full((), _py_max(n - 1, 0), np.int32)), zero)
    if mode == "negative-then-clip":   # JAX's put default: negatives count from the end, the rest is clipped
        idx = _where(lax.lt(idx, zero), lax.add(idx, size), idx)
        return lax.max(lax.min(idx, lax.full((), _py_max(n - 1, 0), np.int32)), zero)
    if mode == "drop":
        mode = "fill"
    if mode not in ("raise", "fill"):
        raise ValueError(f"{name}: mode must be 'raise', 'wrap', 'clip' or 'fill' (None: '{default}'), got {mode!r}")
    if mode == "raise" and not _is_traced(idx):
        v = np.asarray(idx._value)
        if v.size and (v.min() < -n or v.max() >= n):
            raise IndexError(f"{name}: index {int(v.min() if v.min() < -n else v.max())} is out of bounds for "
                             f"an axis of size {n}")
    idx = _where(lax.lt(idx, zero), lax.add(idx, size), idx)
    bad = lax.logical_or(lax.lt(idx, zero), lax.ge(idx, size))
    return _where(bad, size, idx)


def put(a: Any, ind: Any, v: Any, mode: str | None = None, *, inplace: bool = True) -> Any:
    """``a`` with the flat positions ``ind`` set to ``v`` (repeated as needed); needs ``inplace=False``.

    ``mode``: None (JAX's default: negative indices count from the end, then out-of-range ones are
    clipped), 'clip', 'wrap', or 'raise' (numpy's; checked on concrete indices).

    >>> put(fnp.zeros(3), fnp.array([0, 2]), 1.0, inplace=False)    # [1., 0., 1.]
    """
    _no_inplace("put", inplace)
    a = arr(a)
    idx = ravel(arr(ind))
    if idx.dtype.kind not in "iu":
        raise TypeError(f"put: ind must hold integers, got {describe(idx)}")
    vals = ravel(arr(v))
    if idx.size == 0:
        return a
    if vals.size == 0:
        raise ValueError("put: v is empty but ind is not: nothing to put")
    vals = _take(vals, _const(np.arange(idx.size, dtype=np.int32) % vals.size), 0)
    if mode not in (None, "clip", "wrap", "raise"):
        raise ValueError(f"put: mode must be None, 'clip', 'wrap' or 'raise', got {mode!r}")
    if a.size == 0:
        return a
    idx = _index_mode("put", idx, a.size, mode, "negative-then-clip")
    out = lax.scatter(ravel(a), idx, lax.convert_element_type(vals, a.dtype))
    return lax.reshape(out, a.shape)


def place(arr: Any, mask: Any, vals: Any, *, inplace: bool = True) -> Any:  # noqa: F811
    """``arr`` with the entries where ``mask`` is true replaced, in order, by ``vals`` (cycled); needs
    ``inplace=False``.  Works under jit (no concrete mask needed).

    >>> place(fnp.zeros(4), fnp.array([1, 0, 1, 1]), fnp.array([7.0, 8.0]), inplace=False)  # [7., 0., 8., 7.]
    """
    _no_inplace("place", inplace)
    from funcgrad.numpy._base import arr as _arr
    x, m, v = _arr(arr), _arr(mask), ravel(_arr(vals))
    if m.shape != x.shape:
        if m.size != x.size:
            raise ValueError(f"place: mask {describe(m)} and arr {describe(x)} must have the same size")
        m = lax.reshape(m, x.shape)
    m = _truth(m)
    if v.size == 0:
        if not _is_traced(m) and np.any(np.asarray(m._value)):
            raise ValueError("place: vals is empty but mask selects entries")
        return x
    k = lax.cumsum(lax.convert_element_type(ravel(m), np.int32), 0)
    src = lax.rem(lax.sub(k, lax.full((), 1, np.int32)), lax.full((), v.size, np.int32))
    fills = lax.reshape(_take(lax.convert_element_type(v, x.dtype), src, 0), x.shape)
    return lax.select_p.bind(m, fills, x)


def put_along_axis(arr: Any, indices: Any, values: Any, axis: int | None, inplace: bool = True, *,  # noqa: F811
                   mode: str | None = None) -> Any:
    """``arr`` with ``values`` written at ``indices`` along ``axis`` (the inverse of take_along_axis); needs
    ``inplace=False``.  ``axis=None`` works on the flattened array.

    >>> put_along_axis(fnp.zeros((2, 2)), fnp.array([[1], [0]]), 5.0, axis=1, inplace=False)  # [[0., 5.], [5., 0.]]
    """
    _no_inplace("put_along_axis", inplace)
    from funcgrad.numpy._base import arr as _arr
    x, idx = _arr(arr), _arr(indices)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"put_along_axis: indices must hold integers, got {describe(idx)}")
    shape = x.shape
    if axis is None:
        x, idx, axis = ravel(x), ravel(idx), 0
    if idx.ndim != x.ndim:
        raise ValueError(f"put_along_axis: indices {describe(idx)} and arr {describe(x)} must have the same rank")
    axis = normalize_axis("put_along_axis", axis, x.ndim, x)
    try:
        bshape = tuple(np.broadcast_shapes(tuple(s if d != axis else 1 for d, s in enumerate(x.shape)),
                                           tuple(s if d != axis else 1 for d, s in enumerate(idx.shape))))
    except ValueError:
        raise ValueError(f"put_along_axis: indices {describe(idx)} do not broadcast against arr {describe(x)} "
                         f"outside axis {axis}") from None
    bshape = bshape[:axis] + (idx.shape[axis],) + bshape[axis + 1:]
    idx = lax.broadcast_to(idx, bshape)
    idx = _index_mode("put_along_axis", idx, x.shape[axis], mode, "fill")
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, 1)
    padded = lax.pad_p.bind(x, widths=tuple(pad), value=False if x.dtype.kind == "b" else 0)
    index = []
    for d in range(x.ndim):
        if d == axis:
            index.append(idx)
        else:
            one = [1] * x.ndim
            one[d] = bshape[d]
            index.append(_const(np.arange(bshape[d], dtype=np.int32).reshape(one)))
    vals = lax.broadcast_to(lax.convert_element_type(_arr(values), x.dtype), bshape)
    out = lax.scatter(padded, tuple(index), vals)
    out = lax.static_slice(out, axis, 0, x.shape[axis])
    return lax.reshape(out, shape)


def ravel_multi_index(multi_index: Sequence[Any], dims: Sequence[int], mode: str = "raise", order: str = "C", *,
                      dtype: Any = None) -> Any:
    """Flat indices into an array of shape ``dims`` from a tuple of per-axis index arrays.

    ``mode``: 'raise' (checked on concrete indices), 'wrap' or 'clip'; ``order``: 'C' or 'F'.

    >>> ravel_multi_index((fnp.array([1, 2]), fnp.array([0, 1])), (3, 2))    # [2, 5]
    """
    dims = shape_tuple(dims, "ravel_multi_index", "dims")
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: {len(multi_index)} index arrays for {len(dims)} dims {dims}")
    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"ravel_multi_index: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    dtype = _dtypes.canonicalize(dtype or _dtypes.int_)
    idx = [arr(i) for i in multi_index]
    for i in idx:
        if i.dtype.kind not in "iu":
            raise TypeError(f"ravel_multi_index: index arrays must hold integers, got {describe(i)}")
    if mode == "raise":
        for i, n in zip(idx, dims):
            if not _is_traced(i):
                v = np.asarray(i._value)
                if v.size and (v.min() < 0 or v.max() >= n):
                    raise ValueError(f"ravel_multi_index: invalid entry in coordinates array: an index is outside "
                                     f"[0, {n}) (dims {dims})")
    else:
        idx = [_index_mode("ravel_multi_index", i, n, mode, mode) for i, n in zip(idx, dims)]
    strides = np.ones(len(dims), np.int64)
    ordered = range(len(dims) - 1, -1, -1) if order == "C" else range(len(dims))
    acc = 1
    for d in ordered:
        strides[d] = acc
        acc *= dims[d]
    out = lax.full((), 0, dtype)
    for i, s in zip(idx, strides):
        out = lax.add(out, lax.mul(lax.convert_element_type(i, dtype), lax.full((), int(s), dtype)))
    return out


def unravel_index(indices: Any, shape: Any) -> tuple:
    """Per-axis indices into an array of ``shape`` for flat ``indices`` (C order).  As JAX, negative indices
    count from the end and out-of-range ones are clipped.

    >>> unravel_index(fnp.array([5, 1]), (2, 3))    # ([1, 0], [2, 1])
    """
    shape = shape_tuple(shape, "unravel_index")
    i = arr(indices)
    if i.dtype.kind not in "iu":
        raise TypeError(f"unravel_index: indices must hold integers, got {describe(i)}")
    total = int(np.prod(shape, dtype=np.int64))
    dtype = i.dtype if i.dtype.kind == "i" else _dtypes.int_
    i = lax.convert_element_type(i, dtype)
    if total == 0:
        if i.size:
            raise ValueError(f"unravel_index: cannot unravel into the empty shape {shape}")
        return tuple(i for _ in shape)
    i = _where(lax.lt(i, lax.full((), 0, dtype)), lax.add(i, lax.full((), total, dtype)), i)
    i = lax.max(lax.min(i, lax.full((), total - 1, dtype)), lax.full((), 0, dtype))
    out = []
    for d in range(len(shape) - 1, -1, -1):
        n = lax.full((), shape[d], dtype)
        out.append(lax.rem(i, n))
        i = lax.floor_divide(i, n)
    return tuple(reversed(out))


def choose(a: Any, choices: Any, out: None = None, mode: str = "raise") -> Any:
    """``choices[a[i]][i]`` for every position ``i`` (all broadcast together).

    ``mode``: 'raise' (checked on concrete ``a``), 'wrap' or 'clip'.

    >>> choose(fnp.array([0, 1]), [fnp.array([1, 2]), fnp.array([10, 20])])    # [1, 20]
    """
    if out is not None:
        raise NotImplementedError("choose: the out argument is not supported (funcgrad arrays are immutable)")
    a = arr(a)
    if a.dtype.kind not in "iub":
        raise TypeError(f"choose: a must hold integers, got {describe(a)}")
    cs = promote(*[arr(c) for c in (unstack(arr(choices)) if isinstance(choices, (Array, Tracer, np.ndarray))
                                    else choices)])
    if not cs:
        raise ValueError("choose: needs at least one choice")
    n = len(cs)
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    a = lax.convert_element_type(a, np.int32)
    if mode == "raise":
        if not _is_traced(a):
            v = np.asarray(a._value)
            if v.size and (v.min() < 0 or v.max() >= n):
                raise ValueError(f"choose: entries of a must be in [0, {n}) for {n} choices, got "
                                 f"{int(v.min() if v.min() < 0 else v.max())}")
    else:
        a = _index_mode("choose", a, n, mode, mode)
    shape = broadcast_shapes(a.shape, *[c.shape for c in cs])
    a = lax.broadcast_to(a, shape)
    result = lax.broadcast_to(cs[0], shape)
    for i, c in enumerate(cs[1:], 1):
        result = lax.select_p.bind(lax.eq(a, lax.full((), i, np.int32)), lax.broadcast_to(c, shape), result)
    return result


def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Any:
    """For each position, the entry of the first choice whose condition is true, else ``default``.

    >>> select([x < 0, x > 0], [-x, x], 0.0)    # abs(x)
    """
    condlist, choicelist = list(condlist), list(choicelist)
    if len(condlist) != len(choicelist):
        raise ValueError(f"select: condlist has {len(condlist)} entries but choicelist {len(choicelist)}; give one "
                         "choice per condition")
    if not condlist:
        raise ValueError("select: condlist must not be empty")
    conds = [arr(c) for c in condlist]
    for i, c in enumerate(conds):
        if c.dtype.kind != "b":
            raise TypeError(f"select: condlist[{i}] must be a bool array, got {describe(c)}")
    vals = promote(*[arr(c) for c in choicelist], arr(default))
    shape = broadcast_shapes(*[c.shape for c in conds], *[v.shape for v in vals])
    out = lax.broadcast_to(vals[-1], shape)
    for c, v in reversed(list(zip(conds, vals[:-1]))):
        out = lax.select_p.bind(lax.broadcast_to(c, shape), lax.broadcast_to(v, shape), out)
    return out


def piecewise(x: Any, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Any:
    """``funclist[i](x)`` where ``condlist[i]`` is true (later conditions win), an extra last function (or
    value) where none is, else 0.  Entries of ``funclist`` may be constants.

    Every function is evaluated on the whole of ``x`` and the results selected, so a function that is NaN
    off its piece still gives a NaN gradient there (the ``where`` caveat).

    >>> piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v])    # abs(x)
    """
    x = arr(x)
    if isinstance(condlist, (Array, Tracer, np.ndarray, bool, np.bool_)) and np.ndim(condlist) <= x.ndim:
        condlist = [condlist]
    conds = [arr(c) for c in (unstack(arr(condlist)) if isinstance(condlist, (Array, Tracer, np.ndarray))
                              else condlist)]
    funcs = list(funclist)
    if len(funcs) not in (len(conds), len(conds) + 1):
        raise ValueError(f"piecewise: with {len(conds)} conditions, funclist must have {len(conds)} or "
                         f"{len(conds) + 1} entries, got {len(funcs)}")

    def value(f: Any) -> Any:
        v = f(x, *args, **kw) if callable(f) else f
        v = arr(v)
        return lax.broadcast_to(lax.convert_element_type(v, x.dtype), x.shape)

    out = value(funcs[-1]) if len(funcs) == len(conds) + 1 else lax.full(x.shape, 0, x.dtype)
    for c, f in zip(conds, funcs):
        c = _truth(c)
        out = lax.select_p.bind(lax.broadcast_to(c, x.shape), value(f), out)
    return out


def _obj_indices(name: str, obj: Any, n: int) -> np.ndarray:
    """The concrete integer positions named by ``obj`` (an int, a slice or a sequence) on an axis of length n."""
    if isinstance(obj, _py_slice):
        return np.arange(n)[obj]
    v = _concrete(obj, name, "obj", "pass obj as a static int, slice or sequence")
    if v.dtype.kind == "b":
        raise TypeError(f"{name}: obj must hold integers (a boolean mask is not supported; convert it with "
                        "nonzero)")
    if v.dtype.kind not in "iu" and v.size:
        raise TypeError(f"{name}: obj must be an int, a slice or a sequence of ints, got {obj!r:.60}")
    return v.astype(np.int64)


def delete(arr: Any, obj: Any, axis: int | None = None, *, assume_unique_indices: bool = False) -> Any:  # noqa: F811
    """``arr`` without the entries ``obj`` (an int, a slice, a sequence of ints or a boolean mask) along
    ``axis`` (None: of the flattened array).  ``obj`` must be concrete.

    >>> delete(fnp.arange(4), [0, 2])    # [1, 3]
    """
    from funcgrad.numpy._base import arr as _arr
    x = _arr(arr)
    if axis is None:
        x, axis = ravel(x), 0
    axis = normalize_axis("delete", axis, x.ndim, x)
    n = x.shape[axis]
    kind = np.dtype(obj.dtype).kind if hasattr(obj, "dtype") else np.asarray(obj).dtype.kind \
        if isinstance(obj, (list, tuple)) else "i"
    if kind == "b":
        mask = _concrete(obj, "delete", "obj", "pass obj as a static mask or list of indices").astype(bool)
        if mask.shape != (n,):
            raise ValueError(f"delete: a boolean mask obj must have shape ({n},) for axis {axis} of {describe(x)}, "
                             f"got {mask.shape}")
        return _take(x, _const(np.nonzero(~mask)[0].astype(np.int32)), axis)
    pos = _obj_indices("delete", obj, n)
    if pos.size and (pos.min() < -n or pos.max() >= n):
        raise IndexError(f"delete: index {int(pos.min() if pos.min() < -n else pos.max())} is out of bounds for "
                         f"axis {axis} of size {n}")
    keep = np.ones(n, bool)
    keep[pos % n if n else pos] = False
    return _take(x, _const(np.nonzero(keep)[0].astype(np.int32)), axis)


def insert(arr: Any, obj: Any, values: Any, axis: int | None = None) -> Any:  # noqa: F811
    """``arr`` with ``values`` inserted before the positions ``obj`` along ``axis`` (None: flattened), as numpy:
    an int ``obj`` inserts a block, a sequence one value per index.  ``obj`` must be concrete.

    >>> insert(fnp.array([1, 2, 3]), 1, 9)    # [1, 9, 2, 3]
    """
    from funcgrad.numpy._base import arr as _arr
    x = _arr(arr)
    if axis is None:
        x, axis = ravel(x), 0
    axis = normalize_axis("insert", axis, x.ndim, x)
    n = x.shape[axis]
    v = lax.convert_element_type(_arr(values), x.dtype)
    scalar = not isinstance(obj, _py_slice) and np.ndim(obj) == 0
    pos = _obj_indices("insert", obj, n + 1)
    if isinstance(obj, _py_slice):
        pos = np.arange(n)[obj]
    if pos.size and (pos.min() < -n or pos.max() > n):
        raise IndexError(f"insert: index {int(pos.min() if pos.min() < -n else pos.max())} is out of bounds for "
                         f"axis {axis} of size {n}")
    pos = np.where(pos < 0, pos + n, pos)
    if scalar:
        if v.ndim < x.ndim:
            v = lax.reshape(v, (1,) * (x.ndim - v.ndim) + v.shape)
        v = moveaxis(v, 0, axis) if x.ndim else v
        count = v.shape[axis] if x.ndim else 1
        starts = np.full(count, int(pos))
    else:
        count = pos.size
        order = np.argsort(pos, kind="stable")
        starts = pos[order]
    target = x.shape[:axis] + (count,) + x.shape[axis + 1:]
    try:
        v = broadcast_to(v, target)
    except ValueError:
        raise ValueError(f"insert: values {describe(v)} do not fit {count} inserted entries into {describe(x)} "
                         f"along axis {axis} (expected shape {target})") from None
    if not scalar:
        v = _take(v, _const(order.astype(np.int32)), axis)   # values in insertion order
    # Output position of each inserted value (numpy: the j-th after sorting lands at its index + j).
    new_pos = starts + np.arange(count)
    total = n + count
    src = np.empty(total, np.int64)
    is_new = np.zeros(total, bool)
    is_new[new_pos] = True
    src[is_new] = n + np.arange(count)
    src[~is_new] = np.arange(n)
    joined = concatenate([x, v], axis=axis)
    return _take(joined, _const(src.astype(np.int32)), axis)


# ---------------------------------------------------------------------------------------------- value-dependent


def _resolve_size(name: str, size: Any, mask: Any, what: str) -> int:
    """``size`` if given, else the number of true entries of ``mask`` (which must then be concrete)."""
    return _count_true(mask, name, what) if size is None else _size_arg(name, size)


def nonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> tuple:
    """The indices of the nonzero entries of ``a``, one int32 array per axis (C order).

    Eagerly the length is the number of nonzeros; under jit/vmap pass ``size=`` (the first ``size`` are kept,
    missing ones padded with ``fill_value``: 0, a scalar, or one value per axis).

    >>> nonzero(fnp.array([0, 3, 0, 4]))    # ([1, 3],)
    """
    a = arr(a)
    if a.ndim == 0:
        raise ValueError("nonzero: calling nonzero on a 0-d array is not allowed (as in JAX and numpy >= 2); "
                         "use atleast_1d(a) first")
    mask = ravel(_truth(a))
    n = _resolve_size("nonzero", size, mask, "the array")
    flat, valid = _true_positions(mask, n)
    out = []
    rest = flat
    for d in range(a.ndim - 1, -1, -1):
        dim = lax.full((), a.shape[d], np.int32)
        out.append(lax.rem(rest, dim) if a.shape[d] else rest)
        rest = lax.floor_divide(rest, dim) if a.shape[d] else rest
    out = [_index(o) for o in reversed(out)]
    if fill_value is not None or size is not None:
        fills = fill_value if fill_value is not None else 0
        fills = list(fills) if isinstance(fills, (tuple, list)) else [fills] * a.ndim
        if len(fills) != a.ndim:
            raise ValueError(f"nonzero: fill_value must be a scalar or one value per axis ({a.ndim}), got "
                             f"{len(fills)}")
        out = [_fill(o, valid, f) for o, f in zip(out, fills)]
    return tuple(out)


def flatnonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The indices of the nonzero entries of the flattened ``a`` (``size=``/``fill_value=`` as :func:`nonzero`).

    >>> flatnonzero(fnp.array([[0, 1], [1, 0]]))    # [1, 2]
    """
    return nonzero(ravel(arr(a)), size=size, fill_value=fill_value)[0]


def argwhere(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The indices of the nonzero entries as rows of an ``(count, a.ndim)`` array (see :func:`nonzero`).

    >>> argwhere(fnp.array([[0, 1], [1, 0]]))    # [[0, 1], [1, 0]]
    """
    a = arr(a)
    result = stack(nonzero(atleast_1d(a), size=size, fill_value=fill_value), axis=-1)
    if a.ndim == 0:
        return lax.reshape(lax.static_slice(result, 1, 0, 0), (result.shape[0], 0))
    return result


def compress(condition: Any, a: Any, axis: int | None = None, *, size: int | None = None, fill_value: Any = 0,
             out: None = None) -> Any:
    """The slices of ``a`` along ``axis`` (None: flattened) where the 1-d ``condition`` is true.

    Under jit/vmap pass ``size=``: the first ``size`` slices are kept, the rest filled with ``fill_value``.

    >>> compress(fnp.array([True, False, True]), fnp.arange(3.0))    # [0., 2.]
    """
    if out is not None:
        raise NotImplementedError("compress: the out argument is not supported (funcgrad arrays are immutable)")
    c, x = arr(condition), arr(a)
    if c.ndim != 1:
        raise ValueError(f"compress: condition must be 1-d, got {describe(c)}")
    if axis is None:
        x, axis = ravel(x), 0
    axis = normalize_axis("compress", axis, x.ndim, x)
    c = _truth(c)
    n = x.shape[axis]
    if c.shape[0] > n:
        if not _is_traced(c) and np.any(np.asarray(c._value)[n:]):
            raise ValueError(f"compress: condition {describe(c)} selects entries beyond axis {axis} of "
                             f"{describe(x)} (size {n})")
        c = lax.static_slice(c, 0, 0, n)
    k = _resolve_size("compress", size, c, "the condition")
    idx, valid = _true_positions(c, k)
    if n == 0:
        shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
        return lax.convert_element_type(lax.full(shape, 0, x.dtype) if fill_value is None else
                                        lax.broadcast_to(arr(fill_value), shape), x.dtype)
    taken = _take(x, idx, axis)
    if size is None:
        return taken
    valid = lax.reshape(valid, (1,) * axis + (k,) + (1,) * (x.ndim - axis - 1))
    return _fill(taken, lax.broadcast_to(valid, taken.shape), fill_value)


def extract(condition: Any, arr: Any, *, size: int | None = None, fill_value: Any = 0) -> Any:  # noqa: F811
    """The entries of the flattened ``arr`` where the flattened ``condition`` is true (``size=`` as
    :func:`compress`).

    >>> extract(fnp.array([1, 0, 1]), fnp.array([4.0, 5.0, 6.0]))    # [4., 6.]
    """
    from funcgrad.numpy._base import arr as _arr
    c, x = ravel(_arr(condition)), ravel(_arr(arr))
    if c.shape != x.shape:
        raise ValueError(f"extract: condition {describe(_arr(condition))} and arr {describe(_arr(arr))} must have "
                         "the same size")
    return compress(c, x, size=size, fill_value=fill_value)


def trim_zeros(filt: Any, trim: str = "fb", axis: Any = None) -> Any:
    """``filt`` without its leading ('f') and/or trailing ('b') zeros (along ``axis``: None = every axis, where
    a slice counts as zero when all its entries are).  Needs a concrete ``filt``.

    >>> trim_zeros(fnp.array([0, 1, 0, 2, 0]))    # [1, 0, 2]
    """
    x = arr(filt)
    t = trim.lower()
    if not set(t) <= {"f", "b"}:
        raise ValueError(f"trim_zeros: trim must be a combination of 'f' and 'b', got {trim!r}")
    nz = _concrete(_truth(x), "trim_zeros", "the array", "trim_zeros has no size= argument; slice with static "
                   "bounds instead")
    axes = normalize_axes("trim_zeros", axis, x.ndim, x)
    index = [_py_slice(None)] * x.ndim
    for ax in axes:
        others = tuple(d for d in range(x.ndim) if d != ax)
        line = np.any(nz, axis=others) if others else nz
        where = np.nonzero(line)[0]
        if where.size == 0:
            index[ax] = _py_slice(0, 0)
            continue
        start = int(where[0]) if "f" in t else 0
        stop = int(where[-1]) + 1 if "b" in t else x.shape[ax]
        index[ax] = _py_slice(start, stop)
    return lax.getitem(x, tuple(index))


# ---------------------------------------------------------------------------------------------- unique and sets


def _argsort(x: Any) -> Any:
    """Stable ascending order of a 1-d ``x`` (NaNs last), int32, with no derivative."""
    if x.dtype.kind == "f":
        x = lax.stop_gradient(x)
    return lax.convert_element_type(lax.argsort(x, 0), np.int32)


def _groups(x: Any, keep: Any, equal_nan: bool) -> tuple[Any, Any, Any]:
    """Sort a 1-d ``x`` (the kept entries first when ``keep`` is given): the permutation, the sorted values
    and a bool array marking the first entry of each run of equal kept values."""
    n = x.shape[0]
    if x.ndim == 1:
        perm = _argsort(x)
    else:   # rows, in lexicographic order: stable sorts from the last column to the first
        perm = None
        for j in range(x.shape[1] - 1, -1, -1):
            col = lax.getitem(x, (_py_slice(None), j))
            step = _argsort(col if perm is None else _take(col, perm, 0))
            perm = step if perm is None else _take(perm, step, 0)
        if perm is None:
            perm = _iota(n)
    if keep is not None:
        order = _argsort(lax.convert_element_type(lax.logical_not(_take(keep, perm, 0)), np.int32))
        perm = _take(perm, order, 0)
    s = _take(x, perm, 0)
    first = lax.full((1,), True, bool)
    if n > 1:
        prev, cur = lax.static_slice(s, 0, 0, n - 1), lax.static_slice(s, 0, 1, n)
        differs = lax.ne(cur, prev)
        if equal_nan and s.dtype.kind == "f":
            differs = lax.logical_and(differs, lax.logical_not(lax.logical_and(lax.isnan(cur), lax.isnan(prev))))
        if x.ndim > 1:   # a row is new where any of its entries differs from the row before
            differs = lax.gt(lax.reduce_max(lax.convert_element_type(differs, np.int32), (1,)),
                             lax.full((), 0, np.int32)) if x.shape[1] else lax.full((n - 1,), False, bool)
        is_new = lax.concatenate_p.bind(first, differs, axis=0)
    else:
        is_new = lax.broadcast_to(first, (n,))
    if keep is not None:
        is_new = lax.logical_and(is_new, _take(keep, perm, 0))
    return perm, s, is_new


def _unique_1d(name: str, x: Any, keep: Any, size: Any, fill_value: Any, equal_nan: bool,
               fill_default: Any = None, need: tuple = ()) -> dict:
    """The unique (kept) values of a 1-d ``x`` in sorted order, and on request ('index', 'inverse',
    'counts') the index of each one's first occurrence, the group of every entry and the group sizes."""
    n = x.shape[0]
    if n == 0:
        k = 0 if size is None else _size_arg(name, size)
        fill = 0 if fill_value is None else fill_value
        res = {"values": lax.convert_element_type(lax.broadcast_to(arr(fill), (k,) + x.shape[1:]), x.dtype),
               "index": lax.full((k,), 0, np.int32), "inverse": lax.full((0,), 0, np.int32),
               "counts": lax.full((k,), 0, np.int32), "valid": lax.full((k,), False, bool)}
        return res
    perm, s, is_new = _groups(x, keep, equal_nan)
    k = _resolve_size(name, size, is_new, "the array")
    idx, valid = _true_positions(is_new, k + 1)
    first, valid_k = lax.static_slice(idx, 0, 0, k), lax.static_slice(valid, 0, 0, k)
    values = _take(s, first, 0)
    fill = fill_value if fill_value is not None else fill_default
    if fill is not None and size is not None:
        values = _fill(values, valid_k, fill)
    res = {"values": values, "valid": valid_k, "first": first, "perm": perm}
    if "index" in need:
        res["index"] = _take(perm, first, 0)
    if "inverse" in need:
        group = lax.sub(lax.cumsum(lax.convert_element_type(is_new, np.int32), 0), lax.full((), 1, np.int32))
        res["inverse"] = lax.scatter(lax.full((n,), 0, np.int32), perm, group)
    if "counts" in need:
        starts = _where(valid, idx, lax.full((), n, np.int32))
        res["counts"] = lax.sub(lax.static_slice(starts, 0, 1, k + 1), lax.static_slice(starts, 0, 0, k))
    return res


def unique(ar: Any, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis: int | None = None, *, equal_nan: bool = True, size: int | None = None, fill_value: Any = None,
           sorted: bool = True) -> Any:  # noqa: A002 -- JAX's keyword
    """The sorted unique values of ``ar`` (flattened, or the unique slices along ``axis``), and optionally the
    index of each one's first occurrence, the inverse (``values[inverse]`` rebuilds ``ar``) and the counts.

    Eagerly the length is the number of unique values; under jit/vmap pass ``size=``: the first ``size`` are
    kept, and missing ones are ``fill_value`` (default: the smallest value; counts 0).  With ``axis`` the
    slices are compared whole, in lexicographic order.  The values are differentiable (a gather from ``ar``).

    >>> unique(fnp.array([3, 1, 3]), return_counts=True)    # ([1, 3], [1, 2])
    """
    x = arr(ar)
    extras = [f for f, on in (("index", return_index), ("inverse", return_inverse), ("counts", return_counts)) if on]
    if axis is not None:
        axis = normalize_axis("unique", axis, x.ndim, x)
        moved = moveaxis(x, axis, 0)
        rows = lax.reshape(moved, (moved.shape[0], int(np.prod(moved.shape[1:], dtype=np.int64))))
        got = _unique_1d("unique", rows, None, size, fill_value, equal_nan, need=tuple(extras))
        values = got["values"]
        got["values"] = moveaxis(lax.reshape(values, (values.shape[0],) + moved.shape[1:]), 0, axis)
    else:
        got = _unique_1d("unique", ravel(x), None, size, fill_value, equal_nan, need=tuple(extras))
        if return_inverse:
            got["inverse"] = lax.reshape(got["inverse"], x.shape)
    if not extras:
        return got["values"]
    return (got["values"],) + tuple(_index(got[e]) for e in extras)


def _named(name: str, fields: Sequence[str]) -> type:
    from collections import namedtuple
    return namedtuple(name, fields)


_UniqueAllResult = _named("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])
_UniqueCountsResult = _named("UniqueCountsResult", ["values", "counts"])
_UniqueInverseResult = _named("UniqueInverseResult", ["values", "inverse_indices"])


def unique_values(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The sorted unique values of the flattened ``x`` (NaNs all kept, as the array API); ``size=`` as
    :func:`unique`.

    >>> unique_values(fnp.array([2, 1, 2]))    # [1, 2]
    """
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


def unique_counts(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> Any:
    """``(values, counts)`` of the flattened ``x`` as a named tuple (see :func:`unique`).

    >>> unique_counts(fnp.array([2, 1, 2])).counts    # [1, 2]
    """
    return _UniqueCountsResult(*unique(x, return_counts=True, equal_nan=False, size=size, fill_value=fill_value))


def unique_inverse(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> Any:
    """``(values, inverse_indices)`` as a named tuple; ``inverse_indices`` has ``x``'s shape.

    >>> unique_inverse(fnp.array([2, 1, 2])).inverse_indices    # [1, 0, 1]
    """
    return _UniqueInverseResult(*unique(x, return_inverse=True, equal_nan=False, size=size, fill_value=fill_value))


def unique_all(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> Any:
    """``(values, indices, inverse_indices, counts)`` as a named tuple (see :func:`unique`).

    >>> unique_all(fnp.array([2, 1, 2])).indices    # [1, 0]
    """
    return _UniqueAllResult(*unique(x, return_index=True, return_inverse=True, return_counts=True,
                                    equal_nan=False, size=size, fill_value=fill_value))


def isin(element: Any, test_elements: Any, assume_unique: bool = False, invert: bool = False, *,
         method: str = "auto") -> Any:
    """A bool array of ``element``'s shape: True where the entry occurs in ``test_elements`` (NaN never
    does); ``invert=True`` negates it.  Works under jit: small inputs compare every pair ('compare_all'),
    large ones (or ``method='sort'``/``'binary_search'``) sort both arrays together.

    >>> isin(fnp.array([1, 2, 3]), fnp.array([2, 5]))    # [False, True, False]
    """
    if method not in ("auto", "compare_all", "binary_search", "sort"):
        raise ValueError(f"isin: method={method!r} is not implemented; options are 'compare_all', "
                         "'binary_search', 'sort', and 'auto'")
    e, t = promote(arr(element), ravel(arr(test_elements)))
    if t.shape[0] == 0 or e.size == 0:
        out = lax.full(e.shape, False, bool)
    elif method in ("sort", "binary_search") or (method == "auto" and e.size * t.shape[0] > 1 << 16):
        out = lax.reshape(_isin_sorted(ravel(e), t), e.shape)
    else:
        eq = lax.eq(lax.reshape(e, e.shape + (1,)), lax.reshape(t, (1,) * e.ndim + t.shape))
        out = lax.gt(lax.reduce_max(lax.convert_element_type(eq, np.int32), (e.ndim,)), lax.full((), 0, np.int32))
    return lax.logical_not(out) if invert else out


def _isin_sorted(e: Any, t: Any) -> Any:
    """``isin`` for 1-d arrays in O((n + m) log(n + m)): sort both together (test values before equal
    elements) and look back to the latest test value."""
    m, n = t.shape[0], e.shape[0]
    vals = lax.concatenate_p.bind(t, e, axis=0)
    is_t = _const(np.arange(m + n) < m)
    perm = _argsort(vals)   # stable: among equal values the test values (first in vals) come first
    sv, st = _take(vals, perm, 0), _take(is_t, perm, 0)
    last = lax.cummax(_where(st, _iota(m + n), lax.full((), -1, np.int32)), 0)
    seen = _take(sv, lax.max(last, lax.full((), 0, np.int32)), 0)
    found = lax.logical_and(lax.ge(last, lax.full((), 0, np.int32)), lax.eq(seen, sv))
    back = lax.scatter(lax.full((m + n,), False, bool), perm, found)
    return lax.static_slice(back, 0, m, m + n)


def union1d(ar1: Any, ar2: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The sorted unique values found in either array (flattened); ``size=``/``fill_value=`` as :func:`unique`.

    >>> union1d(fnp.array([3, 1]), fnp.array([2, 1]))    # [1, 2, 3]
    """
    return unique(concatenate(promote(ravel(arr(ar1)), ravel(arr(ar2))), axis=0), size=size, fill_value=fill_value)


def intersect1d(ar1: Any, ar2: Any, assume_unique: bool = False, return_indices: bool = False, *,
                size: int | None = None, fill_value: Any = None) -> Any:
    """The sorted unique values found in both arrays (flattened); with ``return_indices`` also the index of
    each one's first occurrence in each array (missing ones: the array's length).

    >>> intersect1d(fnp.array([1, 2, 2, 5]), fnp.array([2, 5, 9]))    # [2, 5]
    """
    a, b = promote(ravel(arr(ar1)), ravel(arr(ar2)))
    got = _unique_1d("intersect1d", a, isin(a, b), size, fill_value, True)
    if not return_indices:
        return got["values"]
    if a.shape[0] == 0 or b.shape[0] == 0:
        k = got["values"].shape[0]
        return got["values"], lax.full((k,), a.shape[0], _dtypes.int_), lax.full((k,), b.shape[0], _dtypes.int_)
    got_b = _unique_1d("intersect1d", b, isin(b, a), got["values"].shape[0], None, True)

    def firsts(g: Any, n: int) -> Any:
        return _fill(_take(g["perm"], g["first"], 0), g["valid"], n)
    return got["values"], _index(firsts(got, a.shape[0])), _index(firsts(got_b, b.shape[0]))


def setdiff1d(ar1: Any, ar2: Any, assume_unique: bool = False, *, size: int | None = None,
              fill_value: Any = None) -> Any:
    """The sorted unique values of ``ar1`` not in ``ar2`` (flattened); with ``size=`` missing ones are
    ``fill_value`` (default 0, as JAX).

    >>> setdiff1d(fnp.array([3, 1, 2]), fnp.array([2]))    # [1, 3]
    """
    a, b = promote(ravel(arr(ar1)), ravel(arr(ar2)))
    return _unique_1d("setdiff1d", a, isin(a, b, invert=True), size, fill_value, True, fill_default=0)["values"]


def setxor1d(ar1: Any, ar2: Any, assume_unique: bool = False, *, size: int | None = None,
             fill_value: Any = None) -> Any:
    """The sorted unique values found in exactly one of the arrays (flattened); ``size=`` as :func:`unique`.

    >>> setxor1d(fnp.array([1, 2]), fnp.array([2, 3]))    # [1, 3]
    """
    a, b = promote(ravel(arr(ar1)), ravel(arr(ar2)))
    keep = concatenate([isin(a, b, invert=True), isin(b, a, invert=True)], axis=0)
    return _unique_1d("setxor1d", concatenate([a, b], axis=0), keep, size, fill_value, True)["values"]


# ---------------------------------------------------------------------------------------------- bits


def _bitorder(name: str, bitorder: str) -> np.ndarray:
    if bitorder not in ("big", "little"):
        raise ValueError(f"{name}: bitorder must be 'big' or 'little', got {bitorder!r}")
    w = 2 ** np.arange(8, dtype=np.int32)
    return w[::-1].copy() if bitorder == "big" else w


def packbits(a: Any, axis: int | None = None, bitorder: str = "big") -> Any:
    """Groups of 8 truth values of an integer or bool array packed into uint8 bytes along ``axis``
    (None: flattened); the last group is padded with zeros.

    >>> packbits(fnp.array([1, 0, 1]))    # [160]
    """
    x = arr(a)
    if x.dtype.kind not in "biu":
        raise TypeError(f"packbits: expected an integer or bool array, got {describe(x)}")
    weights = _bitorder("packbits", bitorder)
    if axis is None:
        x, axis = ravel(x), 0
    axis = normalize_axis("packbits", axis, x.ndim, x)
    bits = lax.convert_element_type(_truth(x), np.int32)
    n = x.shape[axis]
    groups = -(-n // 8)
    if groups * 8 != n:
        pad = [(0, 0)] * x.ndim
        pad[axis] = (0, groups * 8 - n)
        bits = lax.pad_p.bind(bits, widths=tuple(pad), value=0)
    bits = moveaxis(bits, axis, -1)
    bits = lax.reshape(bits, bits.shape[:-1] + (groups, 8))
    packed = lax.reduce_sum(lax.mul(bits, _const(weights)), (bits.ndim - 1,))
    return moveaxis(lax.convert_element_type(packed, np.uint8), -1, axis)


def unpackbits(a: Any, axis: int | None = None, count: int | None = None, bitorder: str = "big") -> Any:
    """The bits of a uint8 array along ``axis`` (None: flattened), 8 per byte, as uint8 0/1; ``count`` keeps
    that many (negative: drops that many from the end; more than there are: pads with zeros).

    >>> unpackbits(fnp.array([160], dtype=fnp.uint8))    # [1, 0, 1, 0, 0, 0, 0, 0]
    """
    x = arr(a)
    if x.dtype != np.uint8:
        raise TypeError(f"unpackbits: expected a uint8 array, got {describe(x)}")
    weights = _bitorder("unpackbits", bitorder)
    if axis is None:
        x, axis = ravel(x), 0
    axis = normalize_axis("unpackbits", axis, x.ndim, x)
    v = lax.convert_element_type(moveaxis(x, axis, -1), np.int32)
    v = lax.reshape(v, v.shape + (1,))
    bits = lax.rem(lax.floor_divide(v, _const(weights)), lax.full((), 2, np.int32))
    bits = lax.reshape(bits, bits.shape[:-2] + (bits.shape[-2] * 8,))
    total = bits.shape[-1]
    if count is not None:
        count = index_arg("unpackbits", "count", count)
        keep = total + count if count < 0 else count
        keep = _py_max(keep, 0)
        if keep <= total:
            bits = lax.static_slice(bits, bits.ndim - 1, 0, keep)
        else:
            bits = lax.pad_p.bind(bits, widths=((0, 0),) * (bits.ndim - 1) + ((0, keep - total),), value=0)
    return moveaxis(lax.convert_element_type(bits, np.uint8), -1, axis)


def where_nonzero(condition: Any, x: Any, y: Any, size: Any, fill_value: Any) -> tuple:
    """``where(condition)`` with one argument: :func:`nonzero` (called by ``funcgrad.numpy.where``)."""
    if x is not None or y is not None:
        if x is None or y is None:
            raise ValueError("where: give both x and y, or neither (where(condition) is nonzero(condition))")
        raise ValueError("where: size= and fill_value= only apply to the one-argument form where(condition)")
    return nonzero(condition, size=size, fill_value=fill_value)
