"""The rest of ``jax.lax`` a real program uses: JAX's dimension-number forms of gather and scatter
(``gather``, ``scatter_max``/``min``/``mul``/``sub``/``apply``), ``index_take``, ``batch_matmul``,
convolution helpers (``conv_transpose``, ``conv_with_general_padding``, ``conv_dimension_numbers``,
``padtype_to_pads`` and the ``*_shape_tuple`` functions), ``optimization_barrier``, ``reduce_precision``,
``mulhi``, ``clz``, ``approx_max_k``/``approx_min_k``, ``broadcast_like``, ``empty``, ``tile``, ``stack``,
``unstack``, ``custom_linear_solve``/``custom_root`` (implicit differentiation), ``ragged_dot``,
``conv_general_dilated_patches``, ``with_sharding_constraint``, ``shape_as_value``; ``rng_uniform`` /
``rng_bit_generator`` raise, pointing to ``funcgrad.random``.

Written on funcgrad.lax's functions and primitives, so grad, vmap and jit apply.
"""
from __future__ import annotations

import builtins
import enum
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from funcgrad._core import bind
from funcgrad._dtypes import describe
from funcgrad.primitives import elementwise as _E, indexing as _I, shape as _S
from funcgrad.primitives.random_bits import (bitcast_convert_type, bitwise_and, bitwise_or, shift_left,
                                             shift_right_logical)
from funcgrad.primitives.linalg import einsum
from funcgrad.primitives.shape import shape_of
from funcgrad.lax import _more

__all__ = ["ConvDimensionNumbers", "ConvGeneralDilatedDimensionNumbers", "DotDimensionNumbers",
           "GatherDimensionNumbers", "GatherScatterMode", "PrecisionLike", "ScatterDimensionNumbers", "approx_max_k",
           "approx_min_k", "batch_matmul", "broadcast_like", "clz", "composite", "conv_dimension_numbers",
           "conv_general_dilated_local", "conv_general_dilated_patches", "conv_general_permutations",
           "conv_general_shape_tuple", "conv_shape_tuple", "conv_transpose", "conv_transpose_shape_tuple",
           "conv_with_general_padding", "custom_linear_solve", "custom_root", "empty", "gather", "index_take",
           "mulhi", "optimization_barrier", "padtype_to_pads", "ragged_dot", "reduce_precision",
           "reduce_window_shape_tuple", "rng_bit_generator", "rng_uniform", "scatter", "scatter_add", "scatter_apply",
           "scatter_max", "scatter_min", "scatter_mul", "scatter_sub", "shape_as_value", "stack", "tile", "unstack",
           "with_sharding_constraint"]

Array = Any
_range = builtins.range


def _bitcast(x: Any, dtype: Any) -> Any:
    # bitcast_convert_type between equal widths keeps the shape (the primitive turns a 0-d operand 1-d).
    return _S.reshape(bitcast_convert_type(x, dtype), tuple(shape_of(x)))


# ------------------------------------------------------------------ gather / scatter (JAX's forms)


class GatherDimensionNumbers(NamedTuple):
    """How ``gather`` reads ``operand`` (XLA's Gather): as ``jax.lax.GatherDimensionNumbers``."""
    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """How the ``scatter_*`` functions write ``operand`` (XLA's Scatter): as ``jax.lax.ScatterDimensionNumbers``."""
    update_window_dims: Sequence[int]
    inserted_window_dims: Sequence[int]
    scatter_dims_to_operand_dims: Sequence[int]
    operand_batching_dims: Sequence[int] = ()
    scatter_indices_batching_dims: Sequence[int] = ()


class GatherScatterMode(enum.Enum):
    """The out-of-bounds modes of gather and scatter, as ``jax.lax.GatherScatterMode`` (also accepted as the
    strings ``"clip"``, ``"fill"``, ``"promise_in_bounds"``). ``ONE_HOT`` is not supported.

    >>> GatherScatterMode.from_any("clip")      # GatherScatterMode.CLIP
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

    >>> dn = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
    ...                              scatter_dims_to_operand_dims=(0,))
    >>> {name}(fnp.zeros(3), fnp.array([[0], [2], [0]]), fnp.array([1., 2., 3.]), dn)
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

    >>> dn = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
    ...                              scatter_dims_to_operand_dims=(0,))
    >>> scatter_add(fnp.zeros(3), fnp.array([[0], [2], [0]]), fnp.array([1., 2., 3.]), dn)    # [4, 0, 2]
    """)
scatter = _jax_or_numpy_form("scatter", _I.scatter_set, """``operand`` with the updates written at their indices
    (for a duplicated index, one of the writes wins), as ``jax.lax.scatter``; the two forms as
    :func:`scatter_add` (numpy-index form: ``scatter(x, index, value)`` = ``x.at[index].set(value)``).

    >>> dn = ScatterDimensionNumbers((), (0,), (0,))
    >>> scatter(fnp.zeros(3), fnp.array([[2]]), fnp.array([5.]), dn)    # [0, 0, 5]
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


def scatter_apply(operand: Array, scatter_indices: Array, func: Callable, dimension_numbers: Any = None, *,
                  update_shape: Sequence[int] = (), indices_are_sorted: bool = False, unique_indices: bool = False,
                  mode: Any = None) -> Array:
    """``operand`` with ``func`` applied at each scattered index, as ``jax.lax.scatter_apply``
    (``update_shape``: the shape the updates would have; a duplicated index gets ``func`` once per
    occurrence). Traced (jit/vmap) indices need ``unique_indices=True``.

    >>> dn = ScatterDimensionNumbers((), (0,), (0,))
    >>> scatter_apply(fnp.arange(3.), fnp.array([[1]]), lambda v: v * 10, dn, update_shape=(1,))  # [0, 10, 2]
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

    >>> index_take(fnp.arange(12.).reshape(3, 4), (fnp.array([0, 2]), fnp.array([1, 3])), (0, 1))  # [1, 11]
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


# ------------------------------------------------------------------ matmul, shapes, small ops


def batch_matmul(lhs: Array, rhs: Array, precision: Any = None) -> Array:
    """Batched matrix product ``lhs[..., i, j] @ rhs[..., j, k]`` with equal batch dims, as
    ``jax.lax.batch_matmul``.

    >>> batch_matmul(fnp.ones((2, 3, 4)), fnp.ones((2, 4, 5))).shape     # (2, 3, 5)
    """
    ls, rs = shape_of(lhs), shape_of(rhs)
    if len(ls) < 2 or len(ls) != len(rs) or ls[:-2] != rs[:-2] or ls[-1] != rs[-2]:
        raise ValueError(f"lax.batch_matmul: needs (..., m, k) and (..., k, n) operands of equal rank and batch "
                         f"dims, got {describe(lhs)} and {describe(rhs)}")
    b = "abcdefghijklmnopqrstuvw"[:len(ls) - 2]
    return einsum(f"{b}xy,{b}yz->{b}xz", lhs, rhs)


def broadcast_like(arr: Array, like_arr: Array) -> Array:
    """``arr`` broadcast to the shape of ``like_arr`` (numpy's rules), as ``jax.lax.broadcast_like``.

    >>> broadcast_like(fnp.arange(3.), fnp.ones((2, 3))).shape     # (2, 3)
    """
    return _S.broadcast_to(arr, tuple(shape_of(like_arr)))


def empty(shape: Sequence[int], dtype: Any, *, out_sharding: Any = None) -> Array:
    """An array of ``shape`` and ``dtype``, as ``jax.lax.empty``: its values are unspecified in JAX; funcgrad's
    are zeros.

    >>> empty((2, 3), fnp.float32).shape     # (2, 3)
    """
    if out_sharding is not None:
        raise NotImplementedError("lax.empty: out_sharding is not supported (funcgrad has no shardings)")
    return _more.lax.full(tuple(int(n) for n in shape), 0, dtype)


def tile(operand: Array, reps: Sequence[int]) -> Array:
    """``operand`` repeated ``reps[i]`` times along axis ``i``, as ``jax.lax.tile`` (``len(reps)`` must equal
    ``operand.ndim``).

    >>> tile(fnp.arange(3), (2,))    # [0, 1, 2, 0, 1, 2]
    """
    shape = tuple(shape_of(operand))
    reps = _ints(reps)
    if len(reps) != len(shape) or any(r < 0 for r in reps):
        raise ValueError(f"lax.tile: reps={reps} must give one nonnegative count per dimension of "
                         f"{describe(operand)}")
    # (r0, n0, r1, n1, ...) by broadcasting, then merged.
    inter = tuple(x for r, n in zip(reps, shape) for x in (1, n))
    big = tuple(x for r, n in zip(reps, shape) for x in (r, n))
    y = _S.broadcast_to(_S.reshape(operand, inter), big)
    return _S.reshape(y, tuple(r * n for r, n in zip(reps, shape)))


def stack(operands: Sequence[Array], axis: int = 0) -> Array:
    """The operands (equal shapes) joined along a new axis ``axis``, as ``jax.lax.stack``.

    >>> stack([fnp.ones(2), fnp.zeros(2)], axis=1).shape     # (2, 2)
    """
    if not operands:
        raise ValueError("lax.stack: needs at least one operand")
    shape = tuple(shape_of(operands[0]))
    nd = len(shape) + 1
    if not -nd <= axis < nd:
        raise ValueError(f"lax.stack: axis {axis} is out of range for {nd}-d output")
    axis %= nd
    for x in operands:
        if tuple(shape_of(x)) != shape:
            raise ValueError(f"lax.stack: operands must have equal shapes, got {describe(operands[0])} and "
                             f"{describe(x)}")
    new = shape[:axis] + (1,) + shape[axis:]
    return bind(_I.concatenate_p, tuple(_S.reshape(x, new) for x in operands), {"axis": axis})


def unstack(x: Array, axis: int = 0) -> tuple:
    """The slices of ``x`` along ``axis``, as a tuple, as ``jax.lax.unstack``.

    >>> [a.shape for a in unstack(fnp.ones((2, 3)), axis=1)]     # [(2,), (2,), (2,)]
    """
    nd = len(shape_of(x))
    if not -nd <= axis < nd:
        raise ValueError(f"lax.unstack: axis {axis} is out of range for {describe(x)}")
    axis %= nd
    return tuple(_more.index_in_dim(x, i, axis, keepdims=False) for i in _range(shape_of(x)[axis]))


def optimization_barrier(operand: Any, /) -> Any:
    """``operand`` itself (any pytree), as ``jax.lax.optimization_barrier``: XLA uses it to stop reordering;
    funcgrad's compiler has nothing to stop, so it is the identity (derivatives pass through).

    >>> optimization_barrier((x, y))     # (x, y)
    """
    return operand


def _approx_k(op: str, operand: Array, k: int, reduction_dimension: int, reduction_input_size_override: int,
              largest: bool) -> list:
    nd = len(shape_of(operand))
    if not -nd <= reduction_dimension < nd:
        raise ValueError(f"{op}: reduction_dimension={reduction_dimension} is out of range for {describe(operand)}")
    d = reduction_dimension % nd
    x = _S.moveaxis(operand, d, nd - 1)
    vals, idx = _more.top_k(x if largest else _E.neg(x), k)
    vals = vals if largest else _E.neg(vals)
    return [_S.moveaxis(vals, nd - 1, d), _S.moveaxis(idx, nd - 1, d)]


def approx_max_k(operand: Array, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True) -> list:
    """The ``k`` largest values along ``reduction_dimension`` and their indices, as ``jax.lax.approx_max_k``
    (computed exactly: recall 1, which meets any ``recall_target``; returns ``[values, indices]``).

    >>> approx_max_k(fnp.array([[1., 5., 3.]]), 2)     # [values [[5, 3]], indices [[1, 2]]]
    """
    if not aggregate_to_topk:
        raise NotImplementedError("lax.approx_max_k: aggregate_to_topk=False is not supported")
    return _approx_k("lax.approx_max_k", operand, k, reduction_dimension, reduction_input_size_override, True)


def approx_min_k(operand: Array, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True) -> list:
    """The ``k`` smallest values along ``reduction_dimension`` and their indices, as ``jax.lax.approx_min_k``
    (computed exactly; returns ``[values, indices]``).

    >>> approx_min_k(fnp.array([[1., 5., 3.]]), 2)     # [values [[1, 3]], indices [[0, 2]]]
    """
    if not aggregate_to_topk:
        raise NotImplementedError("lax.approx_min_k: aggregate_to_topk=False is not supported")
    return _approx_k("lax.approx_min_k", operand, k, reduction_dimension, reduction_input_size_override, False)


def _int_kind(op: str, *xs: Any) -> np.dtype:
    dt = _more.dtype(xs[0])
    for x in xs:
        if not np.issubdtype(_more.dtype(x), np.integer):
            raise TypeError(f"{op}: needs integer operands, got {describe(x)}")
    return np.dtype(dt)


def clz(x: Array) -> Array:
    """The number of leading zero bits of each integer (its dtype's width for 0), as ``jax.lax.clz``.

    >>> clz(fnp.array([0, 1, 255], fnp.int32))     # [32, 31, 24]
    """
    dt = _int_kind("lax.clz", x)
    bits = dt.itemsize * 8
    udt = np.dtype(f"uint{bits}")
    u = _bitcast(x, udt) if dt != udt else x
    n = _more.lax.full((), 0, udt)
    shift = bits // 2
    while shift:      # binary search: if the top `shift` bits are zero, count them and shift left
        s = _more.lax.full((), shift, udt)
        zero_top = _E.eq(shift_right_logical(u, _more.lax.full((), bits - shift, udt)), _more.lax.full((), 0, udt))
        u = _E.select(zero_top, shift_left(u, s), u)
        n = _E.select(zero_top, _E.add(n, s), n)
        shift //= 2
    n = _E.select(_E.eq(u, _more.lax.full((), 0, udt)), _E.add(n, _more.lax.full((), 1, udt)), n)
    return _E.convert(n, dt)


def mulhi(x: Array, y: Array, /) -> Array:
    """The high half of the double-width product ``x * y`` of integers of one dtype, as ``jax.lax.mulhi``
    (8, 16 and 32 bits).

    >>> mulhi(fnp.uint32(3000000000), fnp.uint32(3000000000))    # 2095475792
    """
    dt = _int_kind("lax.mulhi", x, y)
    if _more.dtype(y) != dt:
        raise TypeError(f"lax.mulhi: operands must have one dtype, got {describe(x)} and {describe(y)}")
    bits = dt.itemsize * 8
    full = _more.lax.full
    if bits > 32:
        raise NotImplementedError("lax.mulhi: 64-bit operands are not supported (8, 16 and 32 bits are)")
    if bits < 32:      # the exact product fits 32 bits
        wide = np.dtype(np.int32 if dt.kind == "i" else np.uint32)
        p = _E.mul(_E.convert(x, wide), _E.convert(y, wide))
        if dt.kind == "i":
            hi = _more.shift_right_arithmetic(p, full((), bits, wide))
        else:
            hi = shift_right_logical(p, full((), bits, wide))
        return _E.convert(hi, dt)
    u32 = np.dtype(np.uint32)
    ux = _bitcast(x, u32) if dt.kind == "i" else x
    uy = _bitcast(y, u32) if dt.kind == "i" else y

    def c(v: int) -> Any:
        return full((), v, u32)
    lo16 = c(0xFFFF)
    a_lo, a_hi = bitwise_and(ux, lo16), shift_right_logical(ux, c(16))
    b_lo, b_hi = bitwise_and(uy, lo16), shift_right_logical(uy, c(16))
    hi_lo = _E.mul(a_hi, b_lo)
    cross = _E.add(_E.add(shift_right_logical(_E.mul(a_lo, b_lo), c(16)), bitwise_and(hi_lo, lo16)),
                   _E.mul(a_lo, b_hi))
    hi = _E.add(_E.add(_E.mul(a_hi, b_hi), shift_right_logical(hi_lo, c(16))), shift_right_logical(cross, c(16)))
    if dt.kind == "i":      # signed: subtract the other operand for each negative one (mod 2**32)
        zero = c(0)
        hi = _E.sub(hi, _E.select(_E.lt(x, full((), 0, dt)), uy, zero))
        hi = _E.sub(hi, _E.select(_E.lt(y, full((), 0, dt)), ux, zero))
        return _bitcast(hi, dt)
    return hi


def reduce_precision(operand: Any, exponent_bits: int, mantissa_bits: int) -> Array:
    """``operand`` rounded to a float format with ``exponent_bits`` and ``mantissa_bits`` (round to nearest
    even; overflow to inf; results below the format's smallest normal flush to zero, as XLA), kept in its dtype; the
    derivative is the identity (straight through). ``exponent_bits=5, mantissa_bits=10`` rounds
    through float16's values.

    >>> reduce_precision(fnp.float32(1.1234567), exponent_bits=5, mantissa_bits=10)    # 1.1230469
    """
    dt = np.dtype(_more.dtype(operand))
    if not np.issubdtype(dt, np.floating):
        raise TypeError(f"lax.reduce_precision: needs a float operand, got {describe(operand)}")
    ebits, mbits = int(exponent_bits), int(mantissa_bits)
    finfo = np.finfo(dt)
    src_m, src_e = int(finfo.nmant), int(finfo.iexp)
    if ebits < 1 or mbits < 0:
        raise ValueError(f"lax.reduce_precision: exponent_bits={ebits} must be >= 1 and mantissa_bits={mbits} >= 0")
    if mbits >= src_m and ebits >= src_e:
        return operand
    if dt.itemsize not in (4, 8):
        raise NotImplementedError(f"lax.reduce_precision: {dt} operands are not supported (float32, float64 are)")
    udt = np.dtype(f"uint{dt.itemsize * 8}")
    full = _more.lax.full

    def u(v: int) -> Any:
        return full((), v, udt)
    x = _E.stop_gradient_p.bind(operand)
    bits = _bitcast(x, udt)
    if mbits < src_m:      # round the mantissa to nearest even (XLA's ReducePrecision)
        drop = src_m - mbits
        last = bitwise_and(shift_right_logical(bits, u(drop)), u(1))
        bias = _E.add(u((1 << (drop - 1)) - 1), last)
        bits = bitwise_and(_E.add(bits, bias), u(~((1 << drop) - 1) & ((1 << (dt.itemsize * 8)) - 1)))
    if ebits < src_e:      # clamp the exponent: overflow to inf, underflow to signed zero
        nbits = dt.itemsize * 8
        sign_mask = 1 << (nbits - 1)
        exp_mask = ((1 << src_e) - 1) << src_m
        src_bias = (1 << (src_e - 1)) - 1
        dst_bias = (1 << (ebits - 1)) - 1
        max_exp = (src_bias + dst_bias) << src_m
        min_exp = (src_bias - dst_bias) << src_m
        exp = bitwise_and(bits, u(exp_mask))
        sign = bitwise_and(bits, u(sign_mask))
        over = _E.gt(exp, u(max_exp))
        under = _E.le_p.bind(exp, u(min_exp))
        bits = _E.select(over, bitwise_or(sign, u(exp_mask)), bits)
        bits = _E.select(under, sign, bits)
    y = _bitcast(bits, dt)
    y = _E.select(_E.isnan_p.bind(x), x, y)
    # Straight-through derivative; infinities pass as values (inf - inf would be NaN).
    finite = _E.isfinite_p.bind(x)
    zero = _more.lax.full((), 0, dt)
    step = _E.stop_gradient_p.bind(_E.sub(_E.select(finite, y, zero), _E.select(finite, x, zero)))
    return _E.select(finite, _E.add(operand, step), y)


def rng_uniform(a: Any, b: Any, shape: Sequence[int]) -> Array:
    """Not supported: ``jax.lax.rng_uniform`` is XLA's stateful generator (its results depend on the
    backend). Use ``funcgrad.random.uniform(key, shape, minval=a, maxval=b)``.

    >>> rng_uniform(0., 1., (2,))     # NotImplementedError: use funcgrad.random.uniform
    """
    raise NotImplementedError("lax.rng_uniform (XLA's stateful generator) is not supported: use "
                              "funcgrad.random.uniform(key, shape, minval=a, maxval=b)")


def rng_bit_generator(key: Any, shape: Sequence[int], dtype: Any = np.uint32, algorithm: Any = None, *,
                      out_sharding: Any = None) -> tuple:
    """Not supported: ``jax.lax.rng_bit_generator``'s bits are XLA's (per-backend) algorithms. Use
    ``funcgrad.random.bits(key, shape, dtype)``.

    >>> rng_bit_generator(key, (2,))     # NotImplementedError: use funcgrad.random.bits
    """
    raise NotImplementedError("lax.rng_bit_generator (XLA's per-backend bit generators) is not supported: use "
                              "funcgrad.random.bits(key, shape, dtype) and funcgrad.random.split")


# ------------------------------------------------------------------ convolution helpers


class ConvDimensionNumbers(NamedTuple):
    """A convolution's layouts as index permutations, as ``jax.lax.ConvDimensionNumbers``: ``lhs_spec``
    (batch, feature, spatial...), ``rhs_spec`` (out feature, in feature, spatial...), ``out_spec``."""
    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


ConvGeneralDilatedDimensionNumbers = Any      # None | (str, str, str) | ConvDimensionNumbers, as JAX's alias
DotDimensionNumbers = tuple    # ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)), as JAX's alias


def conv_general_permutations(dimension_numbers: Any) -> tuple:
    """The permutations ``(lhs, rhs, out)`` of the string form ``("NHWC", "HWIO", "NHWC")``, as JAX's.

    >>> conv_general_permutations(("NHWC", "HWIO", "NHWC"))    # ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    """
    specs = tuple(dimension_numbers)
    if len(specs) != 3 or not all(isinstance(s, str) for s in specs):
        raise TypeError(f"conv_general_permutations: needs three layout strings, got {dimension_numbers!r}")
    return _more._conv_dims(specs, len(specs[0]))


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                           dimension_numbers: Any) -> ConvDimensionNumbers:
    """``dimension_numbers`` (None, three layout strings, or a ConvDimensionNumbers) as a
    :class:`ConvDimensionNumbers`, as ``jax.lax.conv_dimension_numbers``.

    >>> conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 8), ("NHWC", "HWIO", "NHWC"))
    ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1), out_spec=(0, 3, 1, 2))
    """
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if len(lhs_shape) != len(rhs_shape):
        raise TypeError(f"convolution requires lhs and rhs ndim to be equal, got {len(lhs_shape)} and "
                        f"{len(rhs_shape)}.")
    if dimension_numbers is None:
        iota = tuple(_range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    if not isinstance(dimension_numbers, (list, tuple)) or len(dimension_numbers) != 3:
        raise TypeError(f"convolution dimension_numbers must be None or a length-3 tuple/list, got "
                        f"{dimension_numbers!r}")
    if all(isinstance(s, str) for s in dimension_numbers):
        for s in dimension_numbers:
            if len(s) != len(lhs_shape):
                raise TypeError(f"convolution dimension_numbers {dimension_numbers!r} must have len equal to the "
                                f"ndim of lhs and rhs ({len(lhs_shape)})")
        return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))
    return ConvDimensionNumbers(*(tuple(int(i) for i in s) for s in dimension_numbers))


def padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int], window_strides: Sequence[int],
                    padding: Any) -> list:
    """``"SAME"`` / ``"SAME_LOWER"`` / ``"VALID"`` as explicit ``(low, high)`` pads per dimension, as
    ``jax.lax.padtype_to_pads``.

    >>> padtype_to_pads((5,), (3,), (2,), "SAME")     # [(1, 1)]
    """
    name = str(getattr(padding, "name", padding)).upper()
    if name not in ("SAME", "SAME_LOWER", "VALID"):
        raise RuntimeError(f"Unrecognized padding type: expected 'VALID', 'SAME', or 'SAME_LOWER', got {padding}.")
    if name == "VALID":
        return [(0, 0)] * len(in_shape)
    pads = []
    for n, w, s in zip(in_shape, window_shape, window_strides):
        out = -(-int(n) // int(s))
        total = builtins.max((out - 1) * int(s) + int(w) - int(n), 0)
        pads.append((total // 2, total - total // 2) if name == "SAME" else (total - total // 2, total // 2))
    return pads


def _stride_dim(n: int, w: int, s: int) -> int:
    return builtins.max(0, (n - w) // s + 1) if n >= w else 0


def conv_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], strides: Sequence[int], pads: Any,
                     batch_group_count: int = 1) -> tuple:
    """The output shape of a convolution in (N, C, spatial...) / (O, I, spatial...) layouts, as
    ``jax.lax.conv_shape_tuple``.

    >>> conv_shape_tuple((2, 3, 7, 7), (4, 3, 3, 3), (2, 2), "SAME")     # (2, 4, 4, 4)
    """
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"Wrong number of explicit pads for convolution: expected {len(lhs_shape) - 2}, got "
                        f"{len(pads)}.")
    padded = [int(n) + int(lo) + int(hi) for n, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(p < 0 for p in padded):
        raise ValueError(f"Negative padding is larger than the size of the corresponding dimension: got "
                         f"padding={pads} for lhs_shape[2:]={tuple(lhs_shape[2:])}")
    space = tuple(_stride_dim(p, int(w), int(s)) for p, w, s in zip(padded, rhs_shape[2:], strides))
    n0 = int(lhs_shape[0]) // batch_group_count if batch_group_count > 1 else int(lhs_shape[0])
    return (n0, int(rhs_shape[0])) + space


def conv_general_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], window_strides: Sequence[int],
                             padding: Any, dimension_numbers: Any) -> tuple:
    """The output shape of ``conv_general_dilated`` (no dilation) for string layouts, as JAX's.

    >>> conv_general_shape_tuple((2, 7, 7, 3), (3, 3, 3, 4), (1, 1), "VALID", ("NHWC", "HWIO", "NHWC"))
    (2, 5, 5, 4)
    """
    lp, rp, op = conv_general_permutations(dimension_numbers)
    out = conv_shape_tuple([lhs_shape[i] for i in lp], [rhs_shape[i] for i in rp], window_strides, padding)
    return tuple(out[i] for i in np.argsort(op))


def _conv_transpose_pads(k: int, s: int, padding: str) -> tuple[int, int]:
    # JAX's _conv_transpose_padding.
    if padding == "SAME":
        pad_len = k + s - 2
        pad_a = k - 1 if s > k - 1 else int(np.ceil(pad_len / 2))
    elif padding == "VALID":
        pad_len = k + s - 2 + builtins.max(k - s, 0)
        pad_a = k - 1
    else:
        raise ValueError(f"conv_transpose: padding must be 'SAME', 'VALID' or explicit pairs, got {padding!r}")
    return pad_a, pad_len - pad_a


def conv_transpose_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], window_strides: Sequence[int],
                               padding: Any, dimension_numbers: Any) -> tuple:
    """The output shape of ``conv_transpose`` for string layouts, as JAX's.

    >>> conv_transpose_shape_tuple((1, 3, 2), (2, 2, 4), (2,), "SAME", ("NHC", "HIO", "NHC"))  # (1, 6, 4)
    """
    lp, rp, op = conv_general_permutations(dimension_numbers)
    lt, rt = [lhs_shape[i] for i in lp], [rhs_shape[i] for i in rp]
    if isinstance(padding, str):
        padding = [_conv_transpose_pads(int(k), int(s), padding) for k, s in zip(rt[2:], window_strides)]
    total = [int(lo) + int(hi) for lo, hi in padding]
    space = [(int(i) - 1) * int(s) - int(k) + 2 + p for i, k, s, p in zip(lt[2:], rt[2:], window_strides, total)]
    out = (int(lt[0]), int(rt[0])) + tuple(space)
    return tuple(out[i] for i in np.argsort(op))


def reduce_window_shape_tuple(operand_shape: Sequence[int], window_dimensions: Sequence[int],
                              window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
                              base_dilation: Sequence[int] | None = None,
                              window_dilation: Sequence[int] | None = None) -> tuple:
    """The output shape of ``reduce_window``, as ``jax.lax.reduce_window_shape_tuple``.

    >>> reduce_window_shape_tuple((4, 6), (2, 3), (2, 1), [(0, 0), (1, 1)])     # (2, 6)
    """
    def dilate(shape: Sequence[int], d: Sequence[int]) -> list:
        return [0 if n == 0 else 1 + int(k) * (int(n) - 1) for n, k in zip(shape, d)]
    if base_dilation is not None:
        operand_shape = dilate(operand_shape, base_dilation)
    if window_dilation is not None:
        window_dimensions = dilate(window_dimensions, window_dilation)
    padded = [int(d) + int(lo) + int(hi) for d, (lo, hi) in zip(operand_shape, padding)]
    return tuple(_stride_dim(p, int(w), int(s)) for p, w, s in zip(padded, window_dimensions, window_strides))


def conv_with_general_padding(lhs: Array, rhs: Array, window_strides: Sequence[int], padding: Any,
                              lhs_dilation: Sequence[int] | None, rhs_dilation: Sequence[int] | None,
                              precision: Any = None, preferred_element_type: Any = None) -> Array:
    """``conv_general_dilated`` in NCHW / OIHW layouts, as ``jax.lax.conv_with_general_padding``.

    >>> conv_with_general_padding(fnp.ones((1, 1, 4, 4)), fnp.ones((2, 1, 3, 3)), (1, 1), [(1, 1), (0, 0)],
    ...                           None, None).shape     # (1, 2, 4, 2)
    """
    return _more.conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                      rhs_dilation=rhs_dilation, precision=precision,
                                      preferred_element_type=preferred_element_type)


def conv_transpose(lhs: Array, rhs: Array, strides: Sequence[int], padding: Any,
                   rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                   transpose_kernel: bool = False, precision: Any = None, preferred_element_type: Any = None,
                   use_consistent_padding: bool = False) -> Array:
    """The transposed convolution (fractionally strided), as ``jax.lax.conv_transpose``: a
    ``conv_general_dilated`` with ``lhs_dilation=strides``. ``dimension_numbers`` default to
    channels last, ``("NHC", "HIO", "NHC")`` / ``("NHWC", "HWIO", "NHWC")``, as JAX;
    ``transpose_kernel=True`` flips the spatial axes and swaps the kernel's I and O (the gradient of a
    strided conv).

    >>> conv_transpose(fnp.ones((1, 3, 1)), fnp.ones((2, 1, 1)), (2,), "VALID").shape   # (1, 6, 1)
    """
    if use_consistent_padding:
        raise NotImplementedError("lax.conv_transpose: use_consistent_padding=True is not supported")
    lhs_shape, rhs_shape = tuple(shape_of(lhs)), tuple(shape_of(rhs))
    nd = len(lhs_shape)
    if len(rhs_shape) != nd or nd < 3:
        raise ValueError(f"lax.conv_transpose: lhs and rhs need equal rank >= 3, got {describe(lhs)} and "
                         f"{describe(rhs)}")
    if dimension_numbers is None:      # JAX's defaults: channels last
        if nd > 5:
            raise ValueError("lax.conv_transpose: No 4+ dimensional dimension_number defaults.")
        sp = "HWD"[:nd - 2]
        dimension_numbers = ("N" + sp + "C", sp + "IO", "N" + sp + "C")
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    k_sdims = [rhs_shape[i] for i in dn.rhs_spec[2:]]
    if rhs_dilation is None:
        rhs_dilation = (1,) * (nd - 2)
    eff_k = [(k - 1) * int(d) + 1 for k, d in zip(k_sdims, rhs_dilation)]
    if isinstance(padding, str):
        pads = [_conv_transpose_pads(k, int(s), padding.upper()) for k, s in zip(eff_k, strides)]
    else:
        pads = [(int(lo), int(hi)) for lo, hi in padding]
    if transpose_kernel:
        rhs = bind(_I.flip_p, (rhs,), {"axes": tuple(int(a) for a in dn.rhs_spec[2:])})
        spec = list(dn.rhs_spec)
        spec[0], spec[1] = spec[1], spec[0]
        dn = ConvDimensionNumbers(dn.lhs_spec, tuple(spec), dn.out_spec)
    # lhs_dilation = strides, as interior padding, with the pads around it (negative pads crop).
    config = [(0, 0, 0)] * nd
    for j, (s, (lo, hi)) in enumerate(zip(strides, pads)):
        config[dn.lhs_spec[2 + j]] = (lo, hi, int(s) - 1)
    x = _more.pad(lhs, _more.lax.full((), 0, _more.dtype(lhs)), config)
    return _more.conv_general_dilated(x, rhs, (1,) * (nd - 2), [(0, 0)] * (nd - 2), rhs_dilation=rhs_dilation,
                                      dimension_numbers=dn, precision=precision,
                                      preferred_element_type=preferred_element_type)


# ------------------------------------------------------------------ implicit differentiation


def _closure_converted(op: str, fun: Callable, example: Any) -> tuple:
    """``fun`` (pytree -> pytree of ``example``'s structure) traced once on ``example``'s avals: (call, consts,
    tree) where ``call(consts, leaves) -> leaves`` and ``consts`` are the arrays ``fun`` closes over (hoisted, so
    their derivatives can be taken explicitly)."""
    from funcgrad._core import get_aval
    from funcgrad.primitives.subprograms import trace_sub
    from funcgrad.tree_util import tree_flatten, tree_unflatten
    leaves, tree = tree_flatten(example)
    avals = [get_aval(x) for x in leaves]

    def flat(*xs: Any) -> list:
        out, out_tree = tree_flatten(fun(tree_unflatten(tree, list(xs))))
        if out_tree != tree:
            raise TypeError(f"{op}: the function must return the structure of its input {tree}, got {out_tree}")
        return out
    sub, consts = trace_sub(flat, avals)
    outs = sub.jaxpr.outvars
    for v, a in zip(outs, avals):
        got = getattr(v, "aval", None)
        if got is not None and (tuple(got.shape) != tuple(a.shape) or np.dtype(got.dtype) != np.dtype(a.dtype)):
            raise TypeError(f"{op}: the function must keep its input's shapes and dtypes: {a} became {got}")
    return (lambda cs, xs: list(sub(*cs, *xs))), list(consts), tree


def _hoisted(fn: Callable, args: list) -> tuple:
    """``fn`` (flat arrays -> flat list) traced on ``args``' avals: ``(run, consts)`` with ``run(consts, args)``;
    the arrays ``fn`` closes over (an outer transform's tracers included) become explicit ``consts``."""
    from funcgrad._core import get_aval
    from funcgrad.primitives.subprograms import trace_sub
    sub, consts = trace_sub(fn, [get_aval(a) for a in args])
    return (lambda cs, xs: list(sub(*cs, *xs))), list(consts)


def _zeros(ct: Any, like: Any) -> Any:
    from funcgrad._core import zeros_like
    return zeros_like(like) if ct is None else ct


def _vjp(fun: Callable, primals: list, cts: list) -> list:
    from funcgrad._core import transform
    _, pullback = transform("vjp")(fun, primals)
    return list(pullback(cts))


def _as_tree_fn(call: Callable, cs: list, tree: Any) -> Callable:
    from funcgrad.tree_util import tree_flatten, tree_unflatten
    return lambda v: tree_unflatten(tree, call(cs, tree_flatten(v)[0]))


def _neg_float(gs: list, likes: list) -> list:
    return [_E.neg(g) if np.dtype(_more.dtype(x)).kind in "fc" else g for g, x in zip(gs, likes)]


def _jvp(fun: Callable, primals: list, tangents: list) -> list:
    from funcgrad._core import transform
    return list(transform("jvp")(fun, primals, tangents)[1])


def _split(xs: list, *sizes: int) -> list:
    out, i = [], 0
    for n in sizes:
        out.append(list(xs[i:i + n]))
        i += n
    out.append(list(xs[i:]))
    return out


def custom_linear_solve(matvec: Callable, b: Any, solve: Callable, transpose_solve: Callable | None = None,
                        symmetric: bool = False, has_aux: bool = False) -> Any:
    """``solve(matvec, b)``, differentiated implicitly, as ``jax.lax.custom_linear_solve``: the derivative
    never goes through ``solve``'s iterations; reverse mode solves with ``transpose_solve`` (or ``solve``
    when ``symmetric``) against the transpose of ``matvec``, and differentiates ``matvec`` in the arrays
    it closes over. ``b`` and the solution are pytrees of ``matvec``'s input structure.

    Reverse mode (grad, vjp, jacrev, any order) only: forward mode (jvp, jacfwd) raises, as for a
    custom_vjp function.

    >>> a = fnp.array([[2., 1.], [1., 3.]])
    >>> x = custom_linear_solve(lambda v: a @ v, fnp.ones(2), lambda mv, r: fnp.linalg.solve(a, r),
    ...                         symmetric=True)
    """
    from funcgrad._core import CustomVJPCall, zeros_like
    from funcgrad.tree_util import tree_flatten, tree_unflatten
    op = "lax.custom_linear_solve"
    if not (callable(matvec) and callable(solve)):
        raise TypeError(f"{op}: matvec and solve must be callables")
    call, consts, tree = _closure_converted(op, matvec, b)
    b_leaves = tree_flatten(b)[0]
    nc, nb = len(consts), len(b_leaves)
    aux_tree: list = [None]
    unflat = lambda leaves: tree_unflatten(tree, list(leaves))  # noqa: E731
    zeros_b = [zeros_like(v) for v in b_leaves]

    def matvec_at(cs: list) -> Callable:
        return lambda v: unflat(call(cs, tree_flatten(v)[0]))

    def matvec_t_at(cs: list) -> Callable:      # A^T v: the pullback of the linear map (at any point)
        return lambda v: unflat(_vjp(lambda *xs: call(cs, list(xs)), zeros_b, tree_flatten(v)[0]))

    def solve_flat(*args: Any) -> list:
        cs, bl = _split(list(args), nc)
        out = solve(matvec_at(cs), unflat(bl))
        aux = None
        if has_aux:
            out, aux = out
        x, x_tree = tree_flatten(out)
        if x_tree != tree:
            raise TypeError(f"{op}: solve must return the structure of b {tree}, got {x_tree}")
        aux_leaves, aux_tree[0] = tree_flatten(aux)
        return x + [_E.stop_gradient_p.bind(a) for a in aux_leaves]

    def tsolve_flat(*args: Any) -> list:
        cs, v = _split(list(args), nc)
        out = transpose_solve(matvec_t_at(cs), unflat(v))
        return tree_flatten(out[0] if has_aux else out)[0]
    # The solvers' own closures are hoisted now, while the arrays they read are alive: constants with no
    # derivative, passed along to the backward pass.
    run_solve, s_consts = _hoisted(solve_flat, consts + b_leaves)
    run_tsolve, t_consts = (_hoisted(tsolve_flat, consts + b_leaves) if transpose_solve is not None
                            and not symmetric else (None, []))
    ns, nt = len(s_consts), len(t_consts)

    def fun(*args: Any) -> list:
        sc, _, rest = _split(list(args), ns, nt)
        return run_solve(sc, rest)

    def fwd(*args: Any) -> tuple:
        # The solution saved for bwd is this same call, so a higher-order derivative of bwd (which reads it)
        # differentiates it implicitly too (a transform's fwd runs on its own primals: no endless recursion).
        outs = call_obj.bind(*args)
        return outs, list(args[:ns + nt + nc]) + outs[:nb]

    def bwd(res: list, cts: list) -> list:
        sc, tc, cs, x = _split(res, ns, nt, nc)
        ct_x = [_zeros(c, xi) for c, xi in zip(cts[:nb], x)]

        def solve_fixed(mv: Callable, r: Any) -> Any:
            return unflat(run_solve(sc, cs + tree_flatten(r)[0])[:nb])
        if symmetric:
            lam = custom_linear_solve(matvec_at(cs), unflat(ct_x), solve_fixed, symmetric=True)
        else:
            if run_tsolve is None:
                raise TypeError(f"{op}: transpose_solve is required for reverse-mode differentiation unless "
                                "symmetric=True")

            def tsolve_fixed(mv: Callable, r: Any) -> Any:
                return unflat(run_tsolve(tc, cs + tree_flatten(r)[0]))
            lam = custom_linear_solve(matvec_t_at(cs), unflat(ct_x), tsolve_fixed, solve_fixed)
        lam_leaves = tree_flatten(lam)[0]
        # x = A(c)^-1 b: the constants' cotangent is -(d/dc A(c) x)^T lambda.
        ct_c = _neg_float(_vjp(lambda *c: call(list(c), x), cs, lam_leaves), cs) if nc else []
        return [_zeros(None, v) for v in sc + tc] + ct_c + lam_leaves

    call_obj = CustomVJPCall("custom_linear_solve", fun, fwd, bwd)
    outs = call_obj.bind(*s_consts, *t_consts, *consts, *b_leaves)
    x = unflat(outs[:nb])
    return (x, tree_unflatten(aux_tree[0], outs[nb:])) if has_aux else x


def custom_root(f: Callable, initial_guess: Any, solve: Callable, tangent_solve: Callable,
                has_aux: bool = False) -> Any:
    """A root of ``f`` found by ``solve(f, initial_guess)``, differentiated implicitly, as
    ``jax.lax.custom_root``: ``f(x*, params) = 0`` gives the derivative in the arrays ``f`` closes over,
    without differentiating ``solve``'s iterations; ``tangent_solve(g, y)`` solves the linear system
    ``g(x) = y`` for a linear ``g`` (reverse mode hands it the transposed Jacobian, so it must solve any
    linear ``g``, e.g. ``lambda g, y: y / g(1.0)`` for scalars). The initial guess gets no gradient.

    Reverse mode (grad, vjp, jacrev, any order) only: forward mode (jvp, jacfwd) raises, as for a
    custom_vjp function.

    >>> sqrt2 = lambda a: custom_root(lambda x: x ** 2 - a, 1.0, newton, lambda g, y: y / g(1.0))
    """
    from funcgrad._core import CustomVJPCall
    from funcgrad.tree_util import tree_flatten, tree_unflatten
    op = "lax.custom_root"
    if not (callable(f) and callable(solve) and callable(tangent_solve)):
        raise TypeError(f"{op}: f, solve and tangent_solve must be callables")
    call, consts, tree = _closure_converted(op, f, initial_guess)
    g_leaves = tree_flatten(initial_guess)[0]
    nc, ng = len(consts), len(g_leaves)
    aux_tree: list = [None]
    unflat = lambda leaves: tree_unflatten(tree, list(leaves))  # noqa: E731

    def jac_t_at(cs: list, x: list) -> Callable:     # (df/dx at x)^T v
        return lambda v: unflat(_vjp(lambda *xs: call(cs, list(xs)), x, tree_flatten(v)[0]))

    def jac_at(cs: list, x: list) -> Callable:       # (df/dx at x) v
        return lambda v: unflat(_jvp(lambda *xs: call(cs, list(xs)), x, tree_flatten(v)[0]))

    def solve_flat(*args: Any) -> list:
        cs, gl = _split(list(args), nc)
        out = solve(lambda v: unflat(call(cs, tree_flatten(v)[0])), unflat(gl))
        aux = None
        if has_aux:
            out, aux = out
        x, x_tree = tree_flatten(out)
        if x_tree != tree:
            raise TypeError(f"{op}: solve must return the structure of initial_guess {tree}, got {x_tree}")
        aux_leaves, aux_tree[0] = tree_flatten(aux)
        return [_E.stop_gradient_p.bind(v) for v in x + aux_leaves]

    def tangent_flat(jac: Callable) -> Callable:
        def flat(*args: Any) -> list:
            cs, x, v = _split(list(args), nc, ng)
            return tree_flatten(tangent_solve(jac(cs, x), unflat(v)))[0]
        return flat
    run_solve, s_consts = _hoisted(solve_flat, consts + g_leaves)
    run_tt, t_consts = _hoisted(tangent_flat(jac_t_at), consts + g_leaves + g_leaves)
    run_t, u_consts = _hoisted(tangent_flat(jac_at), consts + g_leaves + g_leaves)
    ns, nt, nu = len(s_consts), len(t_consts), len(u_consts)

    def fun(*args: Any) -> list:
        sc, _, _, rest = _split(list(args), ns, nt, nu)
        return run_solve(sc, rest)

    def fwd(*args: Any) -> tuple:
        outs = call_obj.bind(*args)      # as custom_linear_solve's fwd: the saved root differentiates implicitly
        return outs, list(args[:ns + nt + nu + nc]) + outs[:ng]

    def bwd(res: list, cts: list) -> list:
        sc, tc, uc, cs, x = _split(res, ns, nt, nu, nc)
        ct_x = [_zeros(c, xi) for c, xi in zip(cts[:ng], x)]
        lam = custom_linear_solve(jac_t_at(cs, x), unflat(ct_x),
                                  lambda mv, r: unflat(run_tt(tc, cs + x + tree_flatten(r)[0])),
                                  lambda mv, r: unflat(run_t(uc, cs + x + tree_flatten(r)[0])))
        lam_leaves = tree_flatten(lam)[0]
        # f(x*(c), c) = 0: the constants' cotangent is -(df/dc)^T lambda with (df/dx)^T lambda = ct.
        ct_c = _neg_float(_vjp(lambda *c: call(list(c), x), cs, lam_leaves), cs) if nc else []
        return [_zeros(None, v) for v in sc + tc + uc] + ct_c + [_zeros(None, gi) for gi in g_leaves]

    call_obj = CustomVJPCall("custom_root", fun, fwd, bwd)
    outs = call_obj.bind(*s_consts, *t_consts, *u_consts, *consts, *g_leaves)
    x = unflat(outs[:ng])
    return (x, tree_unflatten(aux_tree[0], outs[ng:])) if has_aux else x


# ------------------------------------------------------------------ more of jax.lax


def conv_general_dilated_patches(lhs: Array, filter_shape: Sequence[int], window_strides: Sequence[int],
                                 padding: Any, lhs_dilation: Sequence[int] | None = None,
                                 rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                                 precision: Any = None, preferred_element_type: Any = None) -> Array:
    """The patches a convolution with a ``filter_shape`` window would see, as
    ``jax.lax.conv_general_dilated_patches``: the output's feature dimension has size
    ``C * prod(filter_shape)`` (channel-major), the rest is a convolution's output layout.

    >>> conv_general_dilated_patches(fnp.ones((1, 2, 4, 4)), (2, 2), (1, 1), "VALID").shape   # (1, 8, 3, 3)
    """
    from funcgrad._core import Array as _Concrete, _freeze
    filter_shape = _ints(filter_shape)
    lhs_shape = tuple(shape_of(lhs))
    dn = conv_dimension_numbers(lhs_shape, (1, 1) + filter_shape, dimension_numbers)
    size = int(np.prod(filter_shape))
    channels = lhs_shape[dn.lhs_spec[1]]
    eye = np.broadcast_to(np.eye(size), (channels, size, size)).reshape((channels * size, 1) + filter_shape)
    rhs = np.moveaxis(eye, (0, 1), (dn.rhs_spec[0], dn.rhs_spec[1]))
    rhs = _Concrete(_freeze(np.ascontiguousarray(rhs, dtype=np.dtype(_more.dtype(lhs)))))
    return _more.conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                      rhs_dilation=rhs_dilation, dimension_numbers=dn,
                                      feature_group_count=channels, precision=precision,
                                      preferred_element_type=preferred_element_type)


def ragged_dot(lhs: Array, rhs: Array, group_sizes: Array, precision: Any = None, preferred_element_type: Any = None,
               group_offset: Any = None, out_sharding: Any = None) -> Array:
    """Grouped matrix product, as ``jax.lax.ragged_dot``: ``lhs`` (m, k) rows are split into consecutive
    groups of ``group_sizes`` (g,) rows; group ``i`` is multiplied by ``rhs[i]`` (g, k, n). Rows past
    ``sum(group_sizes)`` give zeros. Computed densely (g products of (m, k) @ (k, n)).

    >>> ragged_dot(fnp.ones((3, 2)), fnp.stack([fnp.eye(2), 2 * fnp.eye(2)]), fnp.array([1, 2]))  # rows 1, 2, 2
    """
    if group_offset is not None:
        raise NotImplementedError("lax.ragged_dot: group_offset is not supported")
    if out_sharding is not None:
        raise NotImplementedError("lax.ragged_dot: out_sharding is not supported (funcgrad has no shardings)")
    ls, rs, gs = tuple(shape_of(lhs)), tuple(shape_of(rhs)), tuple(shape_of(group_sizes))
    if len(ls) != 2 or len(rs) != 3 or ls[1] != rs[1] or gs != rs[:1]:
        raise ValueError(f"lax.ragged_dot: needs lhs (m, k), rhs (g, k, n) and group_sizes (g,), got "
                         f"{describe(lhs)}, {describe(rhs)} and {describe(group_sizes)}")
    if not np.issubdtype(np.dtype(_more.dtype(group_sizes)), np.integer):
        raise TypeError(f"lax.ragged_dot: group_sizes must be integers, got {describe(group_sizes)}")
    m, g = ls[0], rs[0]
    from funcgrad._core import Array as _Concrete, _freeze
    sizes = _E.convert(group_sizes, np.int32)
    lower = _Concrete(_freeze(np.tril(np.ones((g, g), np.int32))))       # ends[j] = sum_{i <= j} sizes[i]
    ends = einsum("ji,i->j", lower, sizes)
    starts = _E.sub(ends, sizes)
    rows = _Concrete(_freeze(np.arange(m, dtype=np.int32).reshape(m, 1)))
    member = _E.and_p.bind(_E.ge_p.bind(rows, _S.reshape(starts, (1, g))), _E.lt(rows, _S.reshape(ends, (1, g))))
    dt = np.result_type(np.dtype(_more.dtype(lhs)), np.dtype(_more.dtype(rhs)))
    onehot = _E.convert(member, dt)
    out = einsum("mg,mk,gkn->mn", onehot, lhs, rhs)
    return out if preferred_element_type is None else _E.convert(out, preferred_element_type)


def shape_as_value(shape: Sequence[int]) -> Array:
    """A shape as an int32 array, as ``jax.lax.shape_as_value`` (funcgrad's shapes are always static).

    >>> shape_as_value((2, 3))     # int32 [2, 3]
    """
    from funcgrad._core import Array as _Concrete, _freeze
    return _Concrete(_freeze(np.asarray(_ints(shape), dtype=np.int32).reshape(len(tuple(shape)))))


def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """``x`` itself (any pytree), as ``jax.lax.with_sharding_constraint`` on one device: a sharding constraint
    never changes values, and funcgrad runs each computation on one device, so there is nothing to lay out.

    >>> with_sharding_constraint(x, sharding) is x     # True
    """
    return x


PrecisionLike = Any     # None | str | Precision | a pair of them, as JAX's alias (funcgrad computes at full precision)


def composite(decomposition: Callable, name: str, version: int = 0) -> Callable:
    """``decomposition`` as a named composite operation, as ``jax.lax.composite``: a composite's meaning
    is its decomposition (a compiler may recognise the name); funcgrad always runs the decomposition.

    >>> tangent = composite(lambda x: fnp.sin(x) / fnp.cos(x), name="my.tangent")
    """
    import functools
    if not callable(decomposition):
        raise TypeError(f"lax.composite: decomposition must be callable, got {type(decomposition).__name__}")
    if not isinstance(name, str):
        raise TypeError(f"lax.composite: name must be a str, got {type(name).__name__}")

    @functools.wraps(decomposition)
    def op(*args: Any, **kwargs: Any) -> Any:
        return decomposition(*args, **kwargs)
    return op


def _dot_general(x: Array, y: Array, dimension_numbers: Any) -> Array:
    # funcgrad.lax.dot_general's contraction (this module cannot import the package it is part of).
    (xc, yc), (xb, yb) = dimension_numbers
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    xs = [next(letters) for _ in shape_of(x)]
    ys = [next(letters) for _ in shape_of(y)]
    for i, j in zip(tuple(xc) + tuple(xb), tuple(yc) + tuple(yb)):
        ys[j] = xs[i]
    batch = [xs[i] for i in xb]
    free_x = [c for i, c in enumerate(xs) if i not in xc and i not in xb]
    free_y = [c for j, c in enumerate(ys) if j not in yc and j not in yb]
    return einsum(f"{''.join(xs)},{''.join(ys)}->{''.join(batch + free_x + free_y)}", x, y)


def conv_general_dilated_local(lhs: Array, rhs: Array, window_strides: Sequence[int], padding: Any,
                               filter_shape: Sequence[int], lhs_dilation: Sequence[int] | None = None,
                               rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                               precision: Any = None) -> Array:
    """A locally connected (unshared) convolution, as ``jax.lax.conv_general_dilated_local``: every output
    position has its own kernel; ``rhs``'s spatial axes are the output's, its ``I`` axis the input
    channels times the ``filter_shape`` window (channel-major), as in :func:`conv_general_dilated_patches`.

    >>> conv_general_dilated_local(fnp.ones((1, 1, 3, 3)), fnp.ones((2, 4, 2, 2)), (1, 1), "VALID", (2, 2)).shape
    (1, 2, 2, 2)
    """
    patches = conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=lhs_dilation,
                                           rhs_dilation=rhs_dilation, dimension_numbers=dimension_numbers)
    _, rhs_spec, out_spec = conv_dimension_numbers(tuple(shape_of(lhs)), (1, 1) + _ints(filter_shape),
                                                   dimension_numbers)
    lhs_b, rhs_b = list(out_spec[2:]), list(rhs_spec[2:])
    rhs_b = [rhs_b[i] for i in sorted(_range(len(rhs_b)), key=lambda k: lhs_b[k])]
    lhs_b = sorted(lhs_b)
    out = _dot_general(patches, rhs, (([out_spec[1]], [rhs_spec[1]]), (lhs_b, rhs_b)))
    nd = len(shape_of(out))           # (spatial..., N, O) -> out_spec's layout (numpy's moveaxis of two axes)
    perm: list = [None] * nd
    perm[out_spec[0]], perm[out_spec[1]] = nd - 2, nd - 1
    others = iter(_range(nd - 2))
    perm = [next(others) if p is None else p for p in perm]
    return _S.transpose(out, tuple(perm)) if perm != list(_range(nd)) else out
