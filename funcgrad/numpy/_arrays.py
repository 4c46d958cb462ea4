"""funcgrad.numpy: array functions -- stacking and splitting here, with the helpers the other array modules
share; rolling and rotating in ``_rearrange``, diagonals in ``_diagonals``, index helpers in ``_index_helpers``,
value-dependent selections in ``_selection`` (``nonzero``, ...) and ``_sets`` (``unique`` and the set
operations), bit packing in ``_packbits``.

Everything is written on lax and the primitives, so grad, vmap and jit apply.  Functions whose output shape
depends on the values (``nonzero``, ``unique``, ``compress``, ...) run eagerly on concrete arrays; under
jit/vmap they need ``size=`` (and optionally ``fill_value=``), as in JAX.

>>> import funcgrad.numpy as fnp
>>> fnp.hstack([fnp.ones(2), fnp.zeros(1)])
Array([1., 1., 0.], dtype=float32)
>>> fnp.unique(fnp.array([3, 1, 3]), size=3, fill_value=-1)
Array([ 1,  3, -1], dtype=int32)
"""
from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array, Tracer, as_array
from funcgrad._dtypes import describe
from funcgrad import lax
from funcgrad.numpy._base import arr, concrete_value, index_arg, normalize_axis, promote, shape_tuple
from funcgrad.numpy._shape import concatenate, ravel, split
from funcgrad.typing import ArrayLike, DTypeLike

__all__ = [
    "append", "array_split", "atleast_1d", "atleast_2d", "atleast_3d", "block", "broadcast_shapes", "column_stack",
    "concat", "dsplit", "dstack", "hsplit", "hstack", "unstack", "vsplit", "vstack",
]


_py_slice, _py_max, _py_min = builtins.slice, builtins.max, builtins.min


# ---------------------------------------------------------------------------------------------- helpers


def _index(x: Any) -> Any:
    """An index result in the default int dtype (int32, or int64 with x64), as JAX returns them."""
    return lax.convert_element_type(x, _dtypes.int_)


def _const(value: Any, dtype: Any = None) -> Any:
    if dtype is None:
        return as_array(np.asarray(value))
    return as_array(np.asarray(value, dtype=_dtypes.canonicalize(dtype, requested=True)))


def _iota(n: int) -> Any:
    return _const(np.arange(n, dtype=np.int32))


def _is_traced(x: Any) -> bool:
    return isinstance(x, Tracer)


def _concrete(x: Any, name: str, what: str, hint: str = "pass size=N (and fill_value=) to fix the output size") \
        -> np.ndarray:
    """The numpy value of ``x``; a traced value (under jit or vmap) raises a ConcretizationError saying why a
    value is needed and the fix."""
    return concrete_value(x, f"{name}: the output shape depends on the values of {what} {{x}}, which are not "
                             f"known under jit/vmap: {hint}")


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

    >>> broadcast_shapes((3, 1), (4,))
    (3, 4)
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

    >>> atleast_1d(2.0).shape
    (1,)
    """
    return _atleast("atleast_1d", 1, arys)


def atleast_2d(*arys: Any) -> Any:
    """Each argument with rank >= 2 (leading length-1 axes added).

    >>> atleast_2d(fnp.ones(3)).shape
    (1, 3)
    """
    return _atleast("atleast_2d", 2, arys)


def atleast_3d(*arys: Any) -> Any:
    """Each argument with rank >= 3: ``(n,)`` -> ``(1, n, 1)``, ``(m, n)`` -> ``(m, n, 1)``, as numpy.

    >>> atleast_3d(fnp.ones(3)).shape
    (1, 3, 1)
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


def hstack(tup: Sequence[ArrayLike], dtype: DTypeLike | None = None) -> Array:
    """Arrays joined along axis 1 (axis 0 for 1-d arrays); 0-d arrays count as 1-d.

    >>> hstack([fnp.ones(2), fnp.zeros(1)])    # f32[3]
    Array([1., 1., 0.], dtype=float32)
    """
    xs = [atleast_1d(a) for a in _sequence("hstack", tup)]
    return _dtyped(concatenate(xs, axis=0 if xs[0].ndim == 1 else 1), dtype)


def vstack(tup: Sequence[ArrayLike], dtype: DTypeLike | None = None) -> Array:
    """Arrays joined along axis 0 after :func:`atleast_2d`.

    >>> vstack([fnp.ones(2), fnp.zeros(2)]).shape
    (2, 2)
    """
    return _dtyped(concatenate([atleast_2d(a) for a in _sequence("vstack", tup)], axis=0), dtype)


def dstack(tup: Sequence[ArrayLike], dtype: DTypeLike | None = None) -> Any:
    """Arrays joined along axis 2 after :func:`atleast_3d`.

    >>> dstack([fnp.ones((2, 2)), fnp.zeros((2, 2))]).shape
    (2, 2, 2)
    """
    return _dtyped(concatenate([atleast_3d(a) for a in _sequence("dstack", tup)], axis=2), dtype)


def column_stack(tup: Sequence[ArrayLike]) -> Any:
    """1-d arrays as columns (and 2-d arrays as they are) joined along axis 1.

    >>> column_stack([fnp.ones(3), fnp.zeros(3)]).shape
    (3, 2)
    """
    xs = []
    for a in _sequence("column_stack", tup):
        a = arr(a)
        xs.append(lax.reshape(a, (a.size, 1)) if a.ndim < 2 else a)
    return concatenate(xs, axis=1)


def concat(arrays: Sequence[Any], /, *, axis: int | None = 0) -> Any:
    """The array-API name of :func:`concatenate`; ``axis=None`` joins the flattened arrays.

    >>> concat([fnp.ones(2), fnp.zeros(1)])    # f32[3]
    Array([1., 1., 0.], dtype=float32)
    """
    if axis is None:
        return concatenate([ravel(a) for a in arrays], axis=0)
    return concatenate(arrays, axis=axis)


def append(arr: ArrayLike, values: ArrayLike, axis: int | None = None) -> Any:  # noqa: F811 -- numpy's parameter name
    """``values`` appended to ``arr`` along ``axis`` (None: both flattened).

    >>> append(fnp.ones(2), 3.0)
    Array([1., 1., 3.], dtype=float32)
    """
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], axis=0)
    return concatenate([arr, values], axis=axis)


def block(arrays: Sequence[ArrayLike]) -> Any:
    """An array assembled from nested lists of blocks (the innermost lists join along the last axis).

    >>> block([[fnp.eye(2), fnp.zeros((2, 1))]]).shape
    (2, 3)
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


def unstack(x: ArrayLike, /, *, axis: int = 0) -> tuple:
    """The slices of ``x`` along ``axis``, as a tuple.

    >>> len(unstack(fnp.ones((3, 2))))
    3
    """
    x = arr(x)
    if x.ndim == 0:
        raise ValueError("unstack: needs an array of rank >= 1, got a 0-d array")
    axis = normalize_axis("unstack", axis, x.ndim, x)
    return tuple(lax.getitem(x, (_py_slice(None),) * axis + (i,)) for i in range(x.shape[axis]))


def array_split(ary: ArrayLike, indices_or_sections: Any, axis: int = 0) -> list:
    """Like :func:`split`, but an int number of sections need not divide the axis (the first pieces get one more).

    >>> [p.shape for p in array_split(fnp.arange(5), 3)]
    [(2,), (2,), (1,)]
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


def hsplit(ary: ArrayLike, indices_or_sections: Any) -> list:
    """:func:`split` along axis 1 (axis 0 for 1-d arrays).

    >>> [p.shape for p in hsplit(fnp.ones((2, 4)), 2)]
    [(2, 2), (2, 2)]
    """
    return _split_on("hsplit", 1, 1, ary, indices_or_sections)


def vsplit(ary: ArrayLike, indices_or_sections: Any) -> list:
    """:func:`split` along axis 0 of an array of rank >= 2.

    >>> [p.shape for p in vsplit(fnp.ones((4, 2)), 2)]
    [(2, 2), (2, 2)]
    """
    return _split_on("vsplit", 0, 2, ary, indices_or_sections)


def dsplit(ary: ArrayLike, indices_or_sections: Any) -> list:
    """:func:`split` along axis 2 of an array of rank >= 3.

    >>> [p.shape for p in dsplit(fnp.ones((1, 1, 4)), 2)]
    [(1, 1, 2), (1, 1, 2)]
    """
    return _split_on("dsplit", 2, 3, ary, indices_or_sections)
