"""JAX's dimension-number forms of gather and scatter (``gather``, ``scatter``, ``scatter_add``/``sub``/``mul``/
``min``/``max``/``apply``, the numpy-index form kept beside them) and ``index_take``.

Written on funcgrad.lax's functions and primitives, so grad, vmap and jit apply.
"""
from __future__ import annotations

import builtins
import enum
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from funcgrad._dtypes import describe
from funcgrad.primitives import elementwise as _E, indexing as _I, shape as _S
from funcgrad.primitives.random_bits import bitcast_convert_type
from funcgrad.primitives.shape import shape_of
from funcgrad.lax import _more

__all__ = ["GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers", "gather", "index_take",
           "scatter", "scatter_add", "scatter_apply", "scatter_max", "scatter_min", "scatter_mul", "scatter_sub"]

Array = Any
_range = builtins.range


def _bitcast(x: Any, dtype: Any) -> Any:
    # bitcast_convert_type between equal widths keeps the shape (the primitive turns a 0-d operand 1-d).
    return _S.reshape(bitcast_convert_type(x, dtype), tuple(shape_of(x)))


# ------------------------------------------------------------------ gather / scatter (JAX's forms)


class GatherDimensionNumbers(NamedTuple):
    """How ``gather`` reads ``operand`` (XLA's Gather): as ``jax.lax.GatherDimensionNumbers``.

    >>> dn = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
    >>> lax.gather(fnp.arange(5.0), fnp.array([[3], [1]]), dn, slice_sizes=(1,))
    Array([3., 1.], dtype=float32)
    """
    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """How the ``scatter_*`` functions write ``operand`` (XLA's Scatter): as ``jax.lax.ScatterDimensionNumbers``.

    >>> dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
    ...                                 scatter_dims_to_operand_dims=(0,))
    >>> lax.scatter_add(fnp.zeros(3), fnp.array([[1]]), fnp.array([5.0]), dn)
    Array([0., 5., 0.], dtype=float32)
    """
    update_window_dims: Sequence[int]
    inserted_window_dims: Sequence[int]
    scatter_dims_to_operand_dims: Sequence[int]
    operand_batching_dims: Sequence[int] = ()
    scatter_indices_batching_dims: Sequence[int] = ()


class GatherScatterMode(enum.Enum):
    """The out-of-bounds modes of gather and scatter, as ``jax.lax.GatherScatterMode`` (also accepted as the
    strings ``"clip"``, ``"fill"``, ``"promise_in_bounds"``). ``ONE_HOT`` is not supported.

    >>> GatherScatterMode.from_any("clip")      # GatherScatterMode.CLIP
    <GatherScatterMode.CLIP: 0>
    """
    CLIP = 0
    FILL_OR_DROP = 1
    PROMISE_IN_BOUNDS = 2
    ONE_HOT = 3

    @staticmethod
    def from_any(s: Any) -> "GatherScatterMode":
        if isinstance(s, GatherScatterMode):
            return s
        if s is None:
            return GatherScatterMode.FILL_OR_DROP
        name = {"clip": "CLIP", "fill": "FILL_OR_DROP", "drop": "FILL_OR_DROP",
                "promise_in_bounds": "PROMISE_IN_BOUNDS", "one_hot": "ONE_HOT"}.get(str(s).lower())
        if name is None:
            raise ValueError(f"Unknown gather mode {s!r}")
        return GatherScatterMode[name]


def _mode(op: str, mode: Any, scatter: bool) -> str:
    """JAX's mode (None, a string, or a GatherScatterMode) as funcgrad's gather/scatter mode string.
    None: gather clamps (``"clip"``), scatter drops out-of-bounds updates, as jax.lax."""
    if mode is None:
        return "drop" if scatter else "clip"
    name = str(getattr(mode, "name", mode)).lower().replace("gatherscattermode.", "")
    name = {"fill_or_drop": "fill", "drop": "fill"}.get(name, name)
    if name not in ("clip", "fill", "promise_in_bounds"):
        raise NotImplementedError(f"{op}: mode={mode!r} is not supported; use 'clip', 'fill' (FILL_OR_DROP) or "
                                  "'promise_in_bounds'")
    return "drop" if scatter and name == "fill" else name


def _ints(xs: Any) -> tuple[int, ...]:
    return tuple(int(i) for i in xs)


def _index_columns(op: str, indices: Any, k: int) -> tuple[Any, ...]:
    """The ``k`` columns of ``indices``' last axis (the index vector), each of the batch shape."""
    ishape = shape_of(indices)
    if not ishape or ishape[-1] != k:
        raise ValueError(f"{op}: the indices {describe(indices)} must have a last axis of length {k} (one entry per "
                         "indexed operand dimension; JAX's index_vector_dim is the last axis)")
    if not np.issubdtype(_more.dtype(indices), np.integer):
        raise TypeError(f"{op}: the indices must be integers, got {describe(indices)}")
    return tuple(_I.getitem(indices, (Ellipsis, j)) for j in _range(k))


def _check_dims(op: str, what: str, dims: Sequence[int], ndim: int) -> None:
    if len(set(dims)) != len(dims) or any(not 0 <= d < ndim for d in dims):
        raise ValueError(f"{op}: {what}={tuple(dims)} must be distinct dimensions in [0, {ndim})")


def gather(operand: Array, start_indices: Array, dimension_numbers: GatherDimensionNumbers,
           slice_sizes: Sequence[int],
           *, unique_indices: bool = False, indices_are_sorted: bool = False, mode: Any = None,
           fill_value: Any = None) -> Array:
    """XLA's gather, as ``jax.lax.gather``: the slices of ``slice_sizes`` of ``operand`` starting at
    ``start_indices`` (dimensions outside ``start_index_map`` start at 0).

    Supported: the index vector on the last axis of ``start_indices``; no batching dims (others raise
    NotImplementedError). ``mode`` None or ``"clip"`` clamps each start so its window fits (as JAX);
    ``"fill"`` gives ``fill_value`` (NaN for floats) for every window not wholly in bounds. Negative
    indices are out of bounds (no wrapping).

    >>> dn = GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    >>> gather(fnp.arange(6.).reshape(3, 2), fnp.array([[2], [0]]), dn, (1, 2))    # rows 2 and 0
    Array([[4., 5.],
           [0., 1.]], dtype=float32)
    """
    from funcgrad._core import Array as _Concrete, _freeze
    op = "lax.gather"
    dn = dimension_numbers
    shape = tuple(shape_of(operand))
    nd = len(shape)
    sdims, collapsed = _ints(dn.start_index_map), _ints(dn.collapsed_slice_dims)
    sizes = _ints(slice_sizes)
    if tuple(getattr(dn, "operand_batching_dims", ())) or tuple(getattr(dn, "start_indices_batching_dims", ())):
        raise NotImplementedError(f"{op}: operand_batching_dims / start_indices_batching_dims are not supported; "
                                  "vmap the gather instead")
    if len(sizes) != nd or any(not 0 <= s <= n for s, n in zip(sizes, shape)):
        raise ValueError(f"{op}: slice_sizes={sizes} must give one size in [0, dim] per dimension of "
                         f"{describe(operand)}")
    _check_dims(op, "start_index_map", sdims, nd)
    _check_dims(op, "collapsed_slice_dims", collapsed, nd)
    if any(sizes[d] != 1 for d in collapsed):
        raise ValueError(f"{op}: collapsed_slice_dims={collapsed} must have slice size 1, got slice_sizes={sizes}")
    how = _mode(op, mode, False)
    rest = tuple(d for d in _range(nd) if d not in sdims)
    cols = _index_columns(op, start_indices, len(sdims))
    batch = tuple(shape_of(start_indices)[:-1])
    nb, k = len(batch), len(sdims)
    x = _S.transpose(operand, sdims + rest) if sdims + rest != tuple(_range(nd)) else operand
    idt = np.dtype(_more.dtype(start_indices))
    advanced, inside = [], None
    for j, d in enumerate(sdims):
        n, w = shape[d], sizes[d]
        start = cols[j]
        hi = _more.lax.full((), n - w, idt)
        if how == "fill":
            ok = _E.and_p.bind(_E.ge_p.bind(start, _more.lax.full((), 0, idt)), _E.le_p.bind(start, hi))
            inside = ok if inside is None else _E.and_p.bind(inside, ok)
        start = _more.clamp(_more.lax.full((), 0, idt), start, hi)      # the window fits (JAX's clamping)
        start = _S.reshape(start, batch + (1,) * k)
        if w != 1:
            offsets = _Concrete(_freeze(np.arange(w, dtype=idt).reshape((1,) * (nb + j) + (w,) + (1,) * (k - j - 1))))
            start = _E.add(start, offsets)
        advanced.append(start)
    index = tuple(advanced) + tuple(builtins.slice(0, sizes[d]) for d in rest)
    # The starts are in bounds now: batch + (indexed windows, in start_index_map order) + other windows.
    y = _I.getitem(x, index, "promise_in_bounds", wrap_negative_indices=False, op=op) if index else x
    if k:
        full = batch + tuple(sizes[d] for d in sdims) + tuple(sizes[d] for d in rest)
        y = _S.broadcast_to(y, full)        # an index vector of only size-1 windows broadcasts nothing
    if inside is not None:
        mask = _S.reshape(inside, batch + (1,) * nd)
        y = _E.select(mask, y, _I._fill_scalar(operand, fill_value, op))
    order = sdims + rest                    # windows back into operand-dimension order
    perm = tuple(_range(nb)) + tuple(nb + order.index(d) for d in _range(nd))
    if perm != tuple(_range(nb + nd)):
        y = _S.transpose(y, perm)
    windows = tuple(sizes[d] for d in _range(nd) if d not in collapsed)
    offset = tuple(sorted(_ints(dn.offset_dims)))
    if len(offset) != len(windows):
        raise ValueError(f"{op}: offset_dims={tuple(dn.offset_dims)} must name {len(windows)} output dimensions "
                         "(one per operand dimension not in collapsed_slice_dims)")
    y = _S.reshape(y, batch + windows)
    out_nd = len(batch) + len(windows)
    _check_dims(op, "offset_dims", offset, out_nd)
    batch_pos = [d for d in _range(out_nd) if d not in offset]
    perm2 = [0] * out_nd
    for i, d in enumerate(offset):
        perm2[d] = len(batch) + i
    for j, d in enumerate(batch_pos):
        perm2[d] = j
    return _S.transpose(y, tuple(perm2)) if perm2 != list(_range(out_nd)) else y


def _scatter_form(op: str, operand: Array, scatter_indices: Array, updates: Array, dn: Any, how: str) -> tuple:
    """(perm, index, updates') such that scattering ``updates'`` at numpy ``index`` of
    ``transpose(operand, perm)`` is JAX's scatter with dimension numbers ``dn``."""
    shape = shape_of(operand)
    nd = len(shape)
    sdims, inserted = _ints(dn.scatter_dims_to_operand_dims), _ints(dn.inserted_window_dims)
    window_dims = _ints(dn.update_window_dims)
    if tuple(getattr(dn, "operand_batching_dims", ())) or tuple(getattr(dn, "scatter_indices_batching_dims", ())):
        raise NotImplementedError(f"{op}: operand_batching_dims / scatter_indices_batching_dims are not supported; "
                                  "vmap the scatter instead")
    _check_dims(op, "scatter_dims_to_operand_dims", sdims, nd)
    _check_dims(op, "inserted_window_dims", inserted, nd)
    ushape = shape_of(updates)
    _check_dims(op, "update_window_dims", window_dims, len(ushape))
    windowed = tuple(d for d in _range(nd) if d not in inserted)     # operand dims the update windows cover
    if len(windowed) != len(window_dims):
        raise ValueError(f"{op}: update_window_dims={window_dims} must name one dimension of the updates "
                         f"{describe(updates)} per operand dimension not in inserted_window_dims={inserted}")
    wsize = dict(zip(windowed, (ushape[d] for d in sorted(window_dims))))
    if any(wsize[d] > shape[d] for d in windowed):
        raise ValueError(f"{op}: the update windows {tuple(wsize[d] for d in windowed)} exceed the operand "
                         f"{describe(operand)}")
    rest = tuple(d for d in _range(nd) if d not in sdims)
    cols = _index_columns(op, scatter_indices, len(sdims))
    batch = tuple(shape_of(scatter_indices)[:-1])
    nb, k = len(batch), len(sdims)
    ubatch = tuple(d for d in _range(len(ushape)) if d not in window_dims)
    if tuple(ushape[d] for d in ubatch) != batch:
        raise ValueError(f"{op}: the updates {describe(updates)} must have the indices' batch shape {batch} on the "
                         f"dimensions outside update_window_dims={window_dims}")
    # updates -> batch + windows of every operand dim (1 where inserted) -> batch + indexed dims' + the others'.
    u = _S.transpose(updates, ubatch + tuple(sorted(window_dims)))
    u = _S.reshape(u, batch + tuple(wsize.get(d, 1) for d in _range(nd)))
    order = sdims + rest
    if order != tuple(_range(nd)):
        u = _S.transpose(u, tuple(_range(nb)) + tuple(nb + d for d in order))
    # Each window's start is clamped so the window fits ("clip"), or the whole window is dropped when it does
    # not ("drop": its starts move past the end, where the scatter drops them).
    from funcgrad._core import Array as _Concrete, _freeze
    idt = np.dtype(_more.dtype(scatter_indices))
    starts, inside = [], None
    for j, d in enumerate(sdims):
        start, hi = cols[j], _more.lax.full((), shape[d] - wsize.get(d, 1), idt)
        if how == "drop":
            ok = _E.and_p.bind(_E.ge_p.bind(start, _more.lax.full((), 0, idt)), _E.le_p.bind(start, hi))
            inside = ok if inside is None else _E.and_p.bind(inside, ok)
        starts.append(_more.clamp(_more.lax.full((), 0, idt), start, hi))
    advanced = []
    for j, (d, start) in enumerate(zip(sdims, starts)):
        if inside is not None:
            start = _E.select(inside, start, _more.lax.full((), shape[d], idt))
        start = _S.reshape(start, batch + (1,) * k)
        w = wsize.get(d, 1)
        if w != 1:
            offsets = _Concrete(_freeze(np.arange(w, dtype=idt).reshape((1,) * (nb + j) + (w,) + (1,) * (k - j - 1))))
            start = _E.add(start, offsets)
        advanced.append(start)
    index = tuple(advanced) + tuple(builtins.slice(0, wsize.get(d, 1)) for d in rest)
    return order, index, u


def _scatter(op: str, fn: Callable, operand: Array, scatter_indices: Array, updates: Array, dimension_numbers: Any,
             mode: Any, **kw: Any) -> Array:
    if dimension_numbers is None:      # funcgrad's numpy-index form (its modes, config.checked_indexing included)
        return fn(operand, scatter_indices, updates, op, mode, **kw)
    how = _mode(op, mode, True)
    perm, index, u = _scatter_form(op, operand, scatter_indices, updates, dimension_numbers, how)
    ident = perm == tuple(_range(len(perm)))
    x = operand if ident else _S.transpose(operand, perm)
    out = fn(x, index, u, op, how, wrap_negative_indices=False, **kw)
    return out if ident else _S.transpose(out, tuple(int(i) for i in np.argsort(perm)))


_SCATTER_DOC = """{what}, as ``jax.lax.{name}``.

    ``dimension_numbers``: a :class:`ScatterDimensionNumbers` (the index vector on the last axis of
    ``scatter_indices``; no batching dims), or None for funcgrad's numpy-index form
    (``scatter_indices`` is a numpy index of ``operand``, as ``funcgrad.lax.scatter_add``). An update
    window not wholly in bounds is dropped (``mode`` None, as JAX) or its start clamped (``"clip"``);
    negative indices are out of bounds. {grad}

    >>> dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
    ...                                  scatter_dims_to_operand_dims=(0,))
    >>> lax.{name}(fnp.zeros(3), fnp.array([[0], [2], [0]]), fnp.array([1., 2., 3.]), dn)
"""


def _doc(fn: Callable, what: str, grad: str) -> Callable:
    fn.__doc__ = _SCATTER_DOC.format(what=what, name=fn.__name__, grad=grad)
    return fn


def scatter_max(operand: Array, scatter_indices: Array, updates: Array, dimension_numbers: Any = None, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Array:
    return _scatter("lax.scatter_max", _I.scatter_max, operand, scatter_indices, updates, dimension_numbers, mode)


def scatter_min(operand: Array, scatter_indices: Array, updates: Array, dimension_numbers: Any = None, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Array:
    return _scatter("lax.scatter_min", _I.scatter_min, operand, scatter_indices, updates, dimension_numbers, mode)


def scatter_sub(operand: Array, scatter_indices: Array, updates: Array, dimension_numbers: Any = None, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Array:
    return _scatter("lax.scatter_sub", _I.scatter_add, operand, scatter_indices, _E.neg(updates),
                    dimension_numbers, mode)


def _jax_or_numpy_form(name: str, fn: Callable, doc: str) -> Callable:
    def scatter_fn(operand: Array, scatter_indices: Array, updates: Array, dimension_numbers: Any = None, *,
                   indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None,
                   op: str | None = None, wrap_negative_indices: bool = True) -> Array:
        if isinstance(dimension_numbers, str):        # the numpy-index form's positional ``op``
            op, dimension_numbers = dimension_numbers, None
        if dimension_numbers is None:
            return fn(operand, scatter_indices, updates, op or name, mode,
                      wrap_negative_indices=wrap_negative_indices)
        return _scatter(f"lax.{name}", fn, operand, scatter_indices, updates, dimension_numbers, mode)
    scatter_fn.__name__ = scatter_fn.__qualname__ = name
    scatter_fn.__doc__ = doc
    return scatter_fn


scatter_add = _jax_or_numpy_form("scatter_add", _I.scatter_add, """``operand`` with the updates added at their
    indices (duplicates accumulate), as ``jax.lax.scatter_add``.

    With ``dimension_numbers`` (a :class:`ScatterDimensionNumbers`): JAX's form (the index vector on the last axis
    of ``scatter_indices``; no batching dims); an update window not wholly in bounds is dropped (``mode`` None)
    or its start clamped (``"clip"``); negative indices are out of bounds. Without it:
    funcgrad's numpy-index form, ``scatter_add(x, index, value)`` = ``x.at[index].add(value)``.

    >>> dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
    ...                                  scatter_dims_to_operand_dims=(0,))
    >>> lax.scatter_add(fnp.zeros(3), fnp.array([[0], [2], [0]]), fnp.array([1., 2., 3.]), dn)
    Array([4., 0., 2.], dtype=float32)
    """)
scatter = _jax_or_numpy_form("scatter", _I.scatter_set, """``operand`` with the updates written at their indices
    (for a duplicated index, one of the writes wins), as ``jax.lax.scatter``; the two forms as
    :func:`scatter_add` (numpy-index form: ``scatter(x, index, value)`` = ``x.at[index].set(value)``).

    >>> dn = ScatterDimensionNumbers((), (0,), (0,))
    >>> lax.scatter(fnp.zeros(3), fnp.array([[2]]), fnp.array([5.]), dn)
    Array([0., 0., 5.], dtype=float32)
    """)


def _combine(combine: Callable, multiply: bool, unique: bool) -> Callable:
    def fn(x: Any, index: Any, value: Any, op: str, mode: Any, **kw: Any) -> Any:
        return _I.scatter_combine(x, index, value, combine, op, mode, unique_indices=unique, multiply=multiply, **kw)
    return fn


def scatter_mul(operand: Array, scatter_indices: Array, updates: Array, dimension_numbers: Any = None, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Array:
    return _scatter("lax.scatter_mul", _combine(_E.mul, True, unique_indices), operand, scatter_indices, updates,
                    dimension_numbers, mode)


_doc(scatter_max, "``operand`` with ``maximum(operand[i], u)`` written at each index ``i`` (duplicates all apply)",
     "Ties share the gradient equally.")
_doc(scatter_min, "``operand`` with ``minimum(operand[i], u)`` written at each index ``i`` (duplicates all apply)",
     "Ties share the gradient equally.")
_doc(scatter_sub, "``operand`` with the updates subtracted at their indices (duplicates accumulate)", "")
_doc(scatter_mul, "``operand`` with ``operand[i] * u`` written at each index ``i`` (duplicates all apply)",
     "The derivative in the updates needs unique indices (as JAX): pass unique_indices=True.")
# The checked result of each docstring's example (operand zeros, updates 1, 2, 3 at indices 0, 2, 0).
for _fn, _result in ((scatter_max, "Array([3., 0., 2.], dtype=float32)"), (scatter_min, "Array([0., 0., 0.], dtype=float32)"),
                     (scatter_sub, "Array([-4., 0., -2.], dtype=float32)"), (scatter_mul, "Array([0., 0., 0.], dtype=float32)")):
    _fn.__doc__ += f"    {_result}\n"


def scatter_apply(operand: Array, scatter_indices: Array, func: Callable, dimension_numbers: Any = None, *,
                  update_shape: Sequence[int] = (), indices_are_sorted: bool = False, unique_indices: bool = False,
                  mode: Any = None) -> Array:
    """``operand`` with ``func`` applied at each scattered index, as ``jax.lax.scatter_apply``
    (``update_shape``: the shape the updates would have; a duplicated index gets ``func`` once per
    occurrence). Traced (jit/vmap) indices need ``unique_indices=True``.

    >>> dn = ScatterDimensionNumbers((), (0,), (0,))
    >>> scatter_apply(fnp.arange(3.), fnp.array([[1]]), lambda v: v * 10, dn, update_shape=(1,))
    Array([ 0., 10.,  2.], dtype=float32)
    """
    if not callable(func):
        raise TypeError(f"lax.scatter_apply: func must be callable, got {type(func).__name__}")
    updates = _more.lax.full(tuple(int(n) for n in update_shape), 0, _more.dtype(operand))
    return _scatter("lax.scatter_apply", _combine(lambda a, _: func(a), False, unique_indices), operand,
                    scatter_indices, updates, dimension_numbers, mode)


def index_take(src: Array, idxs: Sequence[Array], axes: Sequence[int]) -> Array:
    """``src`` indexed along ``axes`` by the 1-d (or equally shaped) arrays ``idxs``, as
    ``jax.lax.index_take``: the indexed axes become one leading axis, the others follow in order; an
    index is taken modulo its axis' length, as JAX.

    >>> index_take(fnp.arange(12.).reshape(3, 4), (fnp.array([0, 2]), fnp.array([1, 3])), (0, 1))
    Array([ 1., 11.], dtype=float32)
    """
    axes = _ints(axes)
    nd = len(shape_of(src))
    if len(idxs) != len(axes):
        raise ValueError(f"lax.index_take: {len(idxs)} index arrays for {len(axes)} axes")
    _check_dims("lax.index_take", "axes", axes, nd)
    rest = tuple(d for d in _range(nd) if d not in axes)
    x = _S.transpose(src, axes + rest)
    shape = shape_of(src)
    # Indices are taken modulo their axis' length (-1 is the last entry, n + 1 the second), as JAX.
    wrapped = tuple(_E.mod_p.bind(i, _more.lax.full((), shape[a], _more.dtype(i))) for i, a in zip(idxs, axes))
    return _I.getitem(x, wrapped, "clip", wrap_negative_indices=False, op="lax.index_take")
