"""How an index is normalised: numpy-style indices split into a static *template* and index-array
operands (``split_index``/``build_index``), and the out-of-bounds modes (``normalize_indices``:
clip, fill/drop, wrap, checked) that gathers and scatters apply before they bind a primitive.

Template items::

    ("i", n)                 an integer
    ("s", start, stop, step) a slice
    ("n",)                   None (new axis)
    ("e",)                   Ellipsis
    ("a", k)                 the k-th index-array operand

Boolean masks are turned into integer arrays with ``nonzero``; that needs a concrete mask (not under
jit or vmap), since the result's shape depends on it. The primitives that use these live beside it:
``gather.py`` (getitem, concatenate, pad, flip) and ``scatter.py`` (the scatters).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad import _core
from funcgrad._array import host_numpy
from funcgrad._config import config
from funcgrad._core import Array, Tracer
from funcgrad._dtypes import describe
from funcgrad.primitives.elementwise import add, convert, eq, ge_p, lt_p, maximum_p, minimum_p, mod_p, mul, or_p, select
from funcgrad.primitives.shape import reshape, shape_of

# ------------------------------------------------------ index normalisation


def _is_int_array(x: Any) -> bool:
    return isinstance(x, (Array, Tracer, np.ndarray)) and x.dtype.kind in "iu"


def _is_bool_array(x: Any) -> bool:
    if isinstance(x, (Array, Tracer, np.ndarray)):
        return x.dtype.kind == "b"
    return isinstance(x, list) and len(x) > 0 and all(isinstance(v, bool) for v in x)


def _axes_used(item: Any) -> int:
    """How many axes of the indexed array an index item consumes (Ellipsis: counted apart)."""
    if item is None or item is Ellipsis:
        return 0
    if _is_bool_array(item):
        return len(np.shape(item)) if not isinstance(item, (Array, Tracer)) else item.ndim
    return 1


def _start_axis(index: tuple, k: int, ndim: int) -> int:
    """The axis of the indexed array at which index item ``k`` starts (Ellipsis spans what the others leave)."""
    used = [_axes_used(item) for item in index]
    return sum(ndim - sum(used) if item is Ellipsis else n for item, n in zip(index[:k], used[:k]))


def _check_mask(mask_shape: tuple[int, ...], shape: tuple[int, ...], axis: int, target: Any, op: str) -> None:
    """A boolean mask must match the axes it covers exactly (numpy raises IndexError; so do we)."""
    what = describe(target) if target is not None else f"of shape {shape}"
    mask = f"bool[{','.join(map(str, mask_shape))}]"
    if axis + len(mask_shape) > len(shape):
        raise IndexError(f"{op}: boolean mask {mask} at axis {axis} covers {len(mask_shape)} axes, but the array "
                         f"{what} has only {len(shape)}: too many indices")
    for k, n in enumerate(mask_shape):
        if shape[axis + k] != n:
            raise IndexError(f"{op}: boolean mask {mask} does not match the array {what} along axis {axis + k}: "
                             f"size of axis is {shape[axis + k]} but size of corresponding boolean axis is {n}. A "
                             "mask must have the shape of the axes it selects from (as in numpy)")


def split_index(index: Any, shape: tuple[int, ...], target: Any = None, op: str = "getitem") -> tuple[tuple, list]:
    """Normalise a numpy-style index into (template, index arrays).

    ``target`` (the indexed array) and ``op`` only serve error messages.
    """
    if not isinstance(index, tuple):
        index = (index,)
    template: list[tuple] = []
    arrays: list[Any] = []
    for k, item in enumerate(index):
        if item is None:
            template.append(("n",))
        elif item is Ellipsis:
            template.append(("e",))
        elif isinstance(item, slice):
            template.append(("s", _static_int(item.start), _static_int(item.stop), _static_int(item.step)))
        elif isinstance(item, (bool, np.bool_)):
            raise IndexError("indexing with a Python bool is not supported; use a boolean array mask")
        elif isinstance(item, (int, np.integer)):
            template.append(("i", int(item)))
        elif _is_bool_array(item):
            mask = item.concrete_value() if isinstance(item, Tracer) else host_numpy(item)   # (a GPU mask too)
            _check_mask(np.shape(mask), shape, _start_axis(index, k, len(shape)), target, op)
            for nz in np.nonzero(np.asarray(mask)):
                template.append(("a", len(arrays)))
                arrays.append(_core.as_array(nz.astype(np.int64)))
        elif isinstance(item, (list, tuple)) or _is_int_array(item):
            arr = _core.as_array(item) if not isinstance(item, (Array, Tracer)) else item
            if arr.dtype.kind not in "iu":
                raise IndexError(f"index arrays must be integers or booleans, got {describe(arr)}")
            if arr.ndim == 0 and isinstance(arr, Array):
                template.append(("i", int(arr.item())))
                continue
            template.append(("a", len(arrays)))
            arrays.append(arr)
        elif isinstance(item, (Array, Tracer)) and item.ndim == 0 and item.dtype.kind in "iu":
            template.append(("i", int(item)))
        else:
            raise IndexError(f"unsupported index {item!r:.60} of type {type(item).__name__}: use ints, slices, "
                             "None, Ellipsis, integer arrays or boolean masks")
    return tuple(template), arrays


def _static_int(v: Any) -> int | None:
    if v is None:
        return None
    try:
        return int(v)
    except TypeError:
        raise IndexError(f"slice bounds must be static integers, got {v!r:.60}") from None


def build_index(template: tuple, arrays: Sequence[Any]) -> tuple:
    out = []
    for item in template:
        kind = item[0]
        if kind == "i":
            out.append(item[1])
        elif kind == "s":
            out.append(slice(item[1], item[2], item[3]))
        elif kind == "n":
            out.append(None)
        elif kind == "e":
            out.append(Ellipsis)
        else:
            out.append(arrays[item[1]])
    return tuple(out)


def _advanced_are_adjacent(template: tuple) -> bool:
    has_arrays = any(t[0] == "a" for t in template)
    positions = [i for i, t in enumerate(template) if t[0] == "a" or (has_arrays and t[0] == "i")]
    return not positions or positions[-1] - positions[0] + 1 == len(positions)


def _index_rank(arrays: Sequence[Any]) -> int:
    return len(np.broadcast_shapes(*[shape_of(a) for a in arrays])) if arrays else 0


# ------------------------------------------------------- out-of-bounds indices
#
# Modes (JAX's names): gathers default to "clip" (x[i] clamps each index into its axis), "fill"
# gives a fill value; scatters default to dropping out-of-bounds updates ("drop"/"fill"), "clip"
# clamps.  Both are written with primitives: indices are clamped with minimum/maximum, and an
# out-of-bounds position is sent to one extra slot padded onto its axis (the fill value for a
# gather, a discarded slot for a scatter), so grad, vmap and jit need no new rules.  Concrete
# index arrays that are in bounds (the common eager case) pass through untouched.

GATHER_MODES = ("clip", "fill", "promise_in_bounds")
SCATTER_MODES = ("clip", "drop", "fill", "promise_in_bounds")


def _mode_name(mode: Any) -> Any:
    name = getattr(mode, "name", None)    # a GatherScatterMode-like enum
    if isinstance(name, str):
        return "fill" if name == "FILL_OR_DROP" else name.lower()
    return mode


def _gather_how(mode: Any, op: str) -> str:
    mode = _mode_name(mode)
    if mode is None:
        return "raw" if config.checked_indexing else "clip"
    if mode in ("clip", "promise_in_bounds"):
        return "clip"
    if mode in ("fill", "wrap"):     # "wrap" (indices modulo the axis): jnp.take's, not a JAX gather mode
        return mode
    raise ValueError(f"{op}: unknown gather mode {mode!r}; expected one of {', '.join(GATHER_MODES)} (or None)")


def _scatter_how(mode: Any, op: str) -> str:
    mode = _mode_name(mode)
    if mode is None:
        return "raw" if config.checked_indexing else "fill"
    if mode == "clip":
        return "clip"
    if mode in ("drop", "fill"):
        return "fill"
    if mode == "promise_in_bounds":
        return "raw"
    raise ValueError(f"{op}: unknown scatter mode {mode!r}; expected one of {', '.join(SCATTER_MODES)} (or None)")


def _item_axes(template: tuple, ndim: int) -> list:
    """The axis of the indexed array each template item indexes (None for None/Ellipsis)."""
    consumed = sum(1 for t in template if t[0] in "isa")
    axes, axis = [], 0
    for t in template:
        if t[0] in "isa":
            axes.append(axis)
            axis += 1
        else:
            axes.append(None)
            if t[0] == "e":
                axis += max(ndim - consumed, 0)
    return axes


def _first_array_item(template: tuple) -> int:
    return next(k for k, t in enumerate(template) if t[0] == "a")


def _pad_widths(ndim: int, pads: Sequence[int]) -> tuple:
    return tuple((0, 1) if d in pads else (0, 0) for d in range(ndim))


def fill_value_for(dtype: Any) -> Any:
    """JAX's default fill for out-of-bounds gathers: NaN, the most negative int, the largest uint, True."""
    dtype = np.dtype(dtype)
    if _dtypes.kind(dtype) in "fc":
        return float("nan")
    if dtype.kind == "i":
        return int(np.iinfo(dtype).min)
    if dtype.kind == "u":
        return int(np.iinfo(dtype).max)
    return True


def _fill_scalar(x: Any, fill_value: Any, op: str) -> Any:
    if fill_value is None:
        return fill_value_for(x.dtype)
    if isinstance(fill_value, (Array, np.ndarray, np.generic)) and np.ndim(fill_value) == 0:
        return np.asarray(fill_value).item()
    if isinstance(fill_value, (bool, int, float, complex)):
        return fill_value
    raise TypeError(f"{op}: fill_value must be a static scalar (a Python number or a concrete 0-d array), got "
                    f"{describe(fill_value)}")


def _oob_error(op: str, bad: int, axis: int, n: int, x: Any) -> IndexError:
    why = ("config.checked_indexing is on, so out-of-bounds indices raise instead of being clamped (gathers) or "
           "dropped (scatters) as in JAX" if config.checked_indexing else
           "mode='promise_in_bounds' promised indices in bounds; use mode='drop' or 'clip' for indices that may not be")
    return IndexError(f"{op}: index {bad} is out of bounds for axis {axis} with size {n} (array {describe(x)}); "
                      f"{why}")


def normalize_indices(shape: tuple[int, ...], template: tuple, arrays: Sequence[Any], how: str,
                      wrap_negative: bool, x: Any = None, op: str = "getitem") -> tuple[tuple, list, tuple]:
    """Apply an out-of-bounds rule to a split index: ``(template, arrays, padded axes)``.

    ``how``: "clip" clamps into each axis, "fill" sends out-of-bounds positions to index ``n`` of an
    axis padded by one ("raw": left alone, except that concrete indices are checked). Axes in the
    returned tuple must be padded by one slot at their end before the index is used.
    """
    if how == "raw" and not arrays and all(t[0] != "i" for t in template):
        return template, list(arrays), ()
    axes = _item_axes(template, len(shape))
    new_template, new_arrays, pads = list(template), list(arrays), []
    for k, t in enumerate(template):
        if t[0] == "i":
            n, i = shape[axes[k]], t[1]
            lo = -n if wrap_negative else 0
            if lo <= i < n:
                if how == "fill" and i < 0:
                    new_template[k] = ("i", i + n)
                continue
            if how == "raw":
                raise _oob_error(op, i, axes[k], n, x)
            if how == "clip":
                new_template[k] = ("i", min(max(i, lo), n - 1) if n else 0)
            elif how == "wrap":
                new_template[k] = ("i", i % n if n else 0)
            else:
                new_template[k] = ("i", n)
                pads.append(axes[k])
        elif t[0] == "a":
            a, n = arrays[t[1]], shape[axes[k]]
            fixed, padded = _normalize_array(a, n, how, wrap_negative, op, axes[k], x)
            new_arrays[t[1]] = fixed
            if padded:
                pads.append(axes[k])
    if pads:   # a padded axis holds n + 1 slots: every negative index must count from the end first
        for k, t in enumerate(new_template):
            if t[0] == "i" and t[1] < 0:
                new_template[k] = ("i", t[1] + shape[axes[k]])
            elif t[0] == "a" and axes[k] not in pads:
                new_arrays[t[1]] = _wrap_negative(new_arrays[t[1]], shape[axes[k]])
    return tuple(new_template), new_arrays, tuple(sorted(set(pads)))


def _on_host(a: Any) -> bool:
    """A concrete index array whose values can be read without a device transfer."""
    return type(a) is Array or isinstance(a, np.ndarray)


def _wrap_negative(a: Any, n: int) -> Any:
    if _on_host(a):
        v = np.asarray(a)
        return a if not (v < 0).any() else _core.as_array(np.where(v < 0, v + n, v).astype(v.dtype))
    return select(lt_p.bind(a, 0), add(a, n), a)


def _normalize_array(a: Any, n: int, how: str, wrap_negative: bool, op: str, axis: int, x: Any) -> tuple[Any, bool]:
    lo = -n if wrap_negative else 0
    if _on_host(a):
        v = np.asarray(a)
        inside = bool(((v >= lo) & (v < n)).all())
        if inside:
            return a, False
        if how == "raw":
            bad = v[(v < lo) | (v >= n)].flat[0]
            raise _oob_error(op, int(bad), axis, n, x)
        v = v.astype(np.int64)
        if how == "clip":
            out = np.clip(v, lo, n - 1) if n else np.zeros_like(v)
            return _core.as_array(out.astype(np.int32 if n < 2**31 else np.int64)), False
        if how == "wrap":
            return _core.as_array((v % n if n else v * 0).astype(np.int32 if n < 2**31 else np.int64)), False
        v = np.where(v < 0, v + n, v) if wrap_negative else v
        out = np.where((v >= 0) & (v < n), v, n)
        return _core.as_array(out.astype(np.int32 if n < 2**31 - 1 else np.int64)), not inside
    if how == "raw":
        return a, False
    if a.dtype.kind == "u" or a.dtype.itemsize < 4:
        a = convert(a, np.int32)
    if how == "clip":
        if n == 0:
            return a, False
        return maximum_p.bind(minimum_p.bind(a, n - 1), lo), False
    if how == "wrap":
        return mod_p.bind(a, n), False
    if wrap_negative:
        a = select(lt_p.bind(a, 0), add(a, n), a)
    bad = or_p.bind(lt_p.bind(a, 0), ge_p.bind(a, n))
    return select(bad, _full_like_int(a, n), a), True


def _full_like_int(a: Any, n: int) -> Any:
    return add(mul(a, 0), n)


def _duplicate_rounds(shape: tuple[int, ...], template: tuple, arrays: Sequence[Any], pads: tuple) -> list:
    """[None] when the advanced positions never repeat; otherwise one redirected first index array per
    round (positions not in that round sent to the padded slot of its axis)."""
    axes = _item_axes(template, len(shape))
    items = [(k, t) for k, t in enumerate(template) if t[0] == "a"]
    values = np.broadcast_arrays(*[host_numpy(arrays[t[1]]).astype(np.int64) for _, t in items])
    sizes = [shape[axes[k]] + (1 if axes[k] in pads else 0) for k, _ in items]
    wrapped = [np.where(v < 0, v + s, v) for v, s in zip(values, sizes)]
    flat = np.ravel_multi_index([w.ravel() for w in wrapped], sizes) if wrapped[0].size else np.zeros(0, np.int64)
    if flat.size == 0 or np.unique(flat).size == flat.size:
        return [None]
    order = np.argsort(flat, kind="stable")
    ranked = flat[order]
    starts = np.r_[0, np.flatnonzero(np.diff(ranked)) + 1]
    group_start = np.repeat(starts, np.diff(np.r_[starts, ranked.size]))
    rank = np.empty_like(flat)
    rank[order] = np.arange(flat.size) - group_start
    rank = rank.reshape(values[0].shape)
    first_k, first_t = items[0]
    n0 = shape[axes[first_k]]
    first = host_numpy(arrays[first_t[1]]).astype(np.int64)
    first = np.broadcast_to(np.where(first < 0, first + n0, first), rank.shape)
    return [_core.as_array(np.where(rank == r, first, n0).astype(np.int32 if n0 < 2**31 - 1 else np.int64))
            for r in range(int(rank.max()) + 1)]


def _masked_single_array(shape: tuple[int, ...], template: tuple, arrays: Sequence[Any], how: str,
                         wrap_negative: bool) -> tuple[Any, Any] | None:
    """For "fill" with exactly one traced index array and no integer items: (clamped index array,
    validity mask shaped to broadcast over ``x[index]``); None when the padded path applies."""
    if how != "fill" or len(arrays) != 1 or not isinstance(arrays[0], Tracer) or any(t[0] == "i" for t in template):
        return None
    k = _first_array_item(template)
    n = shape[_item_axes(template, len(shape))[k]]
    if n == 0:
        return None
    a = arrays[0]
    if a.dtype.kind == "u" or a.dtype.itemsize < 4:
        a = convert(a, np.int32)
    if wrap_negative:
        a = select(lt_p.bind(a, 0), add(a, n), a)
    bad = or_p.bind(lt_p.bind(a, 0), ge_p.bind(a, n))
    a = maximum_p.bind(minimum_p.bind(a, n - 1), 0)
    consumed = sum(1 for t in template if t[0] in "isa")
    dims = [1 if t[0] in "ns" else max(len(shape) - consumed, 0) if t[0] == "e" else 0 for t in template]
    before, after = sum(dims[:k]), sum(dims[k + 1:])
    if not any(t[0] == "e" for t in template):
        after += len(shape) - consumed    # the axes the index leaves implicit at the end
    valid = eq(bad, False)
    mask = reshape(valid, (1,) * before + shape_of(a) + (1,) * after)
    return a, mask
