"""funcgrad.numpy: index helpers -- put, place, put_along_axis, ravel/unravel, choose, select,
piecewise, delete, insert.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._array import host_numpy
from funcgrad._core import Array, Tracer
from funcgrad._dtypes import describe
from funcgrad import lax
from funcgrad.numpy._base import arr, normalize_axis, operand, promote, promote_arrays, shape_tuple
from funcgrad.numpy._shape import broadcast_to, concatenate, moveaxis, ravel
from funcgrad.numpy._arrays import (_concrete, _const, _is_traced, _py_max, _py_slice, _take, _truth, _where,
                                    broadcast_shapes, unstack)
from funcgrad.numpy._diagonals import _no_inplace
from funcgrad.typing import ArrayLike, DTypeLike, ShapeLike

__all__ = [
    "choose", "delete", "insert", "piecewise", "place", "put", "put_along_axis", "ravel_multi_index", "select",
    "unravel_index",
]


# ---------------------------------------------------------------------------------------------- index helpers


def _index_mode(name: str, idx: Any, n: int, mode: str | None, default: str) -> Any:
    """Integer indices into an axis of length ``n`` under ``mode``: 'raise' (checked when concrete),
    'wrap', 'clip', or 'fill' (numpy-style negatives; out of range -> ``n``, a slot that is dropped)."""
    mode = default if mode is None else mode
    idx = lax.convert_element_type(arr(idx), np.int32)
    size = lax.full((), n, np.int32)
    zero = lax.full((), 0, np.int32)
    if mode == "wrap":
        return lax.mod(idx, size) if n else idx
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
        v = host_numpy(idx)
        if v.size and (v.min() < -n or v.max() >= n):
            raise IndexError(f"{name}: index {int(v.min() if v.min() < -n else v.max())} is out of bounds for "
                             f"an axis of size {n}")
    idx = _where(lax.lt(idx, zero), lax.add(idx, size), idx)
    bad = lax.logical_or(lax.lt(idx, zero), lax.ge(idx, size))
    return _where(bad, size, idx)


def put(a: ArrayLike, ind: Any, v: ArrayLike, mode: str | None = None, *, inplace: bool = True) -> Any:
    """``a`` with the flat positions ``ind`` set to ``v`` (repeated as needed); needs ``inplace=False``.

    ``mode``: None (JAX's default: negative indices count from the end, then out-of-range ones are
    clipped), 'clip', 'wrap', or 'raise' (numpy's; checked on concrete indices).

    >>> put(fnp.zeros(3), fnp.array([0, 2]), 1.0, inplace=False)
    Array([1., 0., 1.], dtype=float32)
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


def place(arr: ArrayLike, mask: Any, vals: Any, *, inplace: bool = True) -> Any:  # noqa: F811
    """``arr`` with the entries where ``mask`` is true replaced, in order, by ``vals`` (cycled); needs
    ``inplace=False``.  Works under jit (no concrete mask needed).

    >>> place(fnp.zeros(4), fnp.array([1, 0, 1, 1]), fnp.array([7.0, 8.0]), inplace=False)
    Array([7., 0., 8., 7.], dtype=float32)
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
        if not _is_traced(m) and np.any(host_numpy(m)):
            raise ValueError("place: vals is empty but mask selects entries")
        return x
    k = lax.cumsum(lax.convert_element_type(ravel(m), np.int32), 0)
    src = lax.mod(lax.sub(k, lax.full((), 1, np.int32)), lax.full((), v.size, np.int32))
    fills = lax.reshape(_take(lax.convert_element_type(v, x.dtype), src, 0), x.shape)
    return lax.select_p.bind(m, fills, x)


def put_along_axis(arr: ArrayLike, indices: Any, values: ArrayLike, axis: int | None,  # noqa: F811
                   inplace: bool = True, *, mode: str | None = None) -> Any:
    """``arr`` with ``values`` written at ``indices`` along ``axis`` (the inverse of take_along_axis); needs
    ``inplace=False``.  ``axis=None`` works on the flattened array.

    >>> put_along_axis(fnp.zeros((2, 2)), fnp.array([[1], [0]]), 5.0, axis=1, inplace=False)
    Array([[0., 5.],
           [5., 0.]], dtype=float32)
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


def _out_of_range(x: Any, n: int) -> int | None:
    """An entry of the concrete index array ``x`` outside ``[0, n)`` (the smallest if negative, else the
    largest), or None when all are inside or ``x`` is traced (mode='raise' checks only what it can see)."""
    if _is_traced(x):
        return None
    v = host_numpy(x)
    if v.size and (v.min() < 0 or v.max() >= n):
        return int(v.min() if v.min() < 0 else v.max())
    return None


def ravel_multi_index(multi_index: Sequence[Any], dims: Sequence[int], mode: str = "raise", order: str = "C", *,
                      dtype: DTypeLike | None = None) -> Any:
    """Flat indices into an array of shape ``dims`` from a tuple of per-axis index arrays.

    ``mode``: 'raise' (checked on concrete indices), 'wrap' or 'clip'; ``order``: 'C' or 'F'.

    >>> ravel_multi_index((fnp.array([1, 2]), fnp.array([0, 1])), (3, 2))
    Array([2, 5], dtype=int32)
    """
    dims = shape_tuple(dims, "ravel_multi_index", "dims")
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: {len(multi_index)} index arrays for {len(dims)} dims {dims}")
    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"ravel_multi_index: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    dtype = _dtypes.canonicalize(dtype or _dtypes.int_, requested=True)
    idx = [arr(i) for i in multi_index]
    for i in idx:
        if i.dtype.kind not in "iu":
            raise TypeError(f"ravel_multi_index: index arrays must hold integers, got {describe(i)}")
    if mode == "raise":
        for i, n in zip(idx, dims):
            if _out_of_range(i, n) is not None:
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


def unravel_index(indices: Any, shape: ShapeLike) -> tuple:
    """Per-axis indices into an array of ``shape`` for flat ``indices`` (C order).  As JAX, negative indices
    count from the end and out-of-range ones are clipped.

    >>> unravel_index(fnp.array([5, 1]), (2, 3))
    (Array([1, 0], dtype=int32), Array([2, 1], dtype=int32))
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
        out.append(lax.mod(i, n))
        i = lax.floor_divide(i, n)
    return tuple(reversed(out))


def choose(a: ArrayLike, choices: Any, out: None = None, mode: str = "raise") -> Any:
    """``choices[a[i]][i]`` for every position ``i`` (all broadcast together).

    ``mode``: 'raise' (checked on concrete ``a``), 'wrap' or 'clip'.

    >>> choose(fnp.array([0, 1]), [fnp.array([1, 2]), fnp.array([10, 20])])
    Array([ 1, 20], dtype=int32)
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
        bad = _out_of_range(a, n)
        if bad is not None:
            raise ValueError(f"choose: entries of a must be in [0, {n}) for {n} choices, got {bad}")
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

    >>> x = fnp.array([-2.0, 0.0, 3.0])
    >>> fnp.select([x < 0, x > 0], [-x, x], 0.0)    # abs(x)
    Array([2., 0., 3.], dtype=float32)
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
    vals = promote_arrays(*[operand(c) for c in choicelist], operand(default))   # Python scalars are weak
    shape = broadcast_shapes(*[c.shape for c in conds], *[v.shape for v in vals])
    out = lax.broadcast_to(vals[-1], shape)
    for c, v in reversed(list(zip(conds, vals[:-1]))):
        out = lax.select_p.bind(lax.broadcast_to(c, shape), lax.broadcast_to(v, shape), out)
    return out


def piecewise(x: ArrayLike, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Any:
    """``funclist[i](x)`` where ``condlist[i]`` is true (later conditions win), an extra last function (or
    value) where none is, else 0.  Entries of ``funclist`` may be constants.

    Every function is evaluated on the whole of ``x`` and the results selected, so a function that is NaN
    off its piece still gives a NaN gradient there (the ``where`` caveat).

    >>> x = fnp.array([-2.0, 0.0, 3.0])
    >>> fnp.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v])    # abs(x)
    Array([2., 0., 3.], dtype=float32)
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


def delete(arr: ArrayLike, obj: Any, axis: int | None = None, *,  # noqa: F811
           assume_unique_indices: bool = False) -> Any:
    """``arr`` without the entries ``obj`` (an int, a slice, a sequence of ints or a boolean mask) along
    ``axis`` (None: of the flattened array).  ``obj`` must be concrete.

    >>> delete(fnp.arange(4), [0, 2])
    Array([1, 3], dtype=int32)
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


def insert(arr: ArrayLike, obj: Any, values: ArrayLike, axis: int | None = None) -> Any:  # noqa: F811
    """``arr`` with ``values`` inserted before the positions ``obj`` along ``axis`` (None: flattened), as numpy:
    an int ``obj`` inserts a block, a sequence one value per index.  ``obj`` must be concrete.

    >>> insert(fnp.array([1, 2, 3]), 1, 9)
    Array([1, 9, 2, 3], dtype=int32)
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
