"""Shape manipulation and indexing helpers with numpy names."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array, Tracer
from funcgrad._dtypes import describe
from funcgrad.numpy._base import arr, as_list, index_arg, normalize_axes, normalize_axis, promote, shape_tuple
from funcgrad import lax
from funcgrad._config import config as _config


def reshape(x: Any, shape: Any, *more: int) -> Any:
    """Reshape (one dimension may be -1)."""
    x = arr(x)
    shape = shape_tuple((shape,) + more if more else shape, "reshape", unknown=True)
    if shape.count(-1) > 1:
        raise ValueError(f"reshape: can only specify one unknown dimension (-1), got shape {shape} for an array "
                         f"{describe(x)}")
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
        if known == 0 or x.size % known:
            raise ValueError(f"reshape: cannot reshape an array {describe(x)} into shape {shape}")
        shape = tuple(x.size // known if s == -1 else s for s in shape)
    return lax.reshape(x, shape)


def ravel(x: Any) -> Any:
    x = arr(x)
    return lax.reshape(x, (x.size,))


def transpose(x: Any, axes: Sequence[int] | None = None) -> Any:
    x = arr(x)
    if axes is None:
        return lax.transpose(x, tuple(reversed(range(x.ndim))))
    perm = normalize_axes("transpose", axes, x.ndim, x, keep_order=True)
    if len(perm) != x.ndim:
        raise ValueError(f"transpose: axes {tuple(perm)} do not match an array {describe(x)}: give a permutation of "
                         f"all {x.ndim} axes, e.g. {tuple(reversed(range(x.ndim)))}")
    return lax.transpose(x, perm)


def swapaxes(x: Any, axis1: int, axis2: int) -> Any:
    x = arr(x)
    perm = list(range(x.ndim))
    a, b = normalize_axis("swapaxes", axis1, x.ndim, x), normalize_axis("swapaxes", axis2, x.ndim, x)
    perm[a], perm[b] = perm[b], perm[a]
    return lax.transpose(x, tuple(perm))


def moveaxis(x: Any, source: Any, destination: Any) -> Any:
    x = arr(x)
    src = normalize_axes("moveaxis", source, x.ndim, x, keep_order=True)
    dst = normalize_axes("moveaxis", destination, x.ndim, x, keep_order=True)
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {source!r} and destination {destination!r} must name the same number "
                         f"of axes (array {describe(x)})")
    order = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return lax.transpose(x, tuple(order))


def expand_dims(x: Any, axis: Any) -> Any:
    x = arr(x)
    out_ndim = x.ndim + (len(axis) if isinstance(axis, (tuple, list)) else 1)
    axes = normalize_axes("expand_dims", axis, out_ndim, x,
                          of=f"the result of expanding an array {describe(x)} (rank {out_ndim})")
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return lax.reshape(x, tuple(shape))


def squeeze(x: Any, axis: Any = None) -> Any:
    x = arr(x)
    if axis is None:
        axes = tuple(i for i, s in enumerate(x.shape) if s == 1)
    else:
        axes = normalize_axes("squeeze", axis, x.ndim, x)
        for a in axes:
            if x.shape[a] != 1:
                raise ValueError(f"squeeze: cannot remove axis {a} of size {x.shape[a]} from an array {describe(x)}")
    return lax.reshape(x, tuple(s for i, s in enumerate(x.shape) if i not in axes))


def broadcast_to(x: Any, shape: Any) -> Any:
    x, shape = arr(x), shape_tuple(shape, "broadcast_to")
    if len(shape) < x.ndim or any(a not in (1, b) for a, b in zip(x.shape[::-1], shape[::-1])):
        raise ValueError(f"broadcast_to: cannot broadcast an array {describe(x)} to shape {shape}: aligned from the "
                         "right, each of its axes must have size 1 or the target's size")
    return lax.broadcast_to(x, shape)


def broadcast_arrays(*xs: Any) -> list:
    xs = as_list(xs)
    shape = tuple(np.broadcast_shapes(*[x.shape for x in xs]))
    return [lax.broadcast_to(x, shape) for x in xs]


def concatenate(arrays: Sequence[Any], axis: int = 0) -> Any:
    xs = promote(*as_list(arrays))
    if not xs:
        raise ValueError("concatenate: need at least one array")
    if any(x.ndim == 0 for x in xs):
        raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    axis = normalize_axis("concatenate", axis, xs[0].ndim, xs[0])
    if any(x.ndim != xs[0].ndim or x.shape[:axis] + x.shape[axis + 1:] != xs[0].shape[:axis] + xs[0].shape[axis + 1:]
           for x in xs):
        raise ValueError(f"concatenate: arrays {', '.join(describe(x) for x in xs)} must have the same rank and the "
                         f"same sizes on every axis but the joined one (axis {axis})")
    return xs[0] if len(xs) == 1 else lax.concatenate_p.bind(*xs, axis=axis)


def stack(arrays: Sequence[Any], axis: int = 0) -> Any:
    xs = as_list(arrays)
    if not xs:
        raise ValueError("stack: need at least one array")
    shapes = {x.shape for x in xs}
    if len(shapes) != 1:
        raise ValueError(f"stack: all arrays must have the same shape, got {', '.join(describe(x) for x in xs)}")
    axis = normalize_axis("stack", axis, xs[0].ndim + 1,
                          of=f"stacking arrays {describe(xs[0])} (the result has rank {xs[0].ndim + 1})")
    return concatenate([expand_dims(x, axis) for x in xs], axis=axis)


def split(x: Any, indices_or_sections: Any, axis: int = 0) -> list:
    x = arr(x)
    axis = normalize_axis("split", axis, x.ndim, x)
    n = x.shape[axis]
    if not isinstance(indices_or_sections, (tuple, list, np.ndarray, Array, Tracer)) \
            or getattr(indices_or_sections, "ndim", 1) == 0:
        k = index_arg("split", "indices_or_sections", indices_or_sections)
        if k <= 0 or n % k:
            raise ValueError(f"split: axis {axis} of an array {describe(x)} (size {n}) cannot be split into {k} equal "
                             "sections: pass a number of sections that divides it, or a list of split indices")
        return [lax.static_slice(x, axis, i * (n // k), (i + 1) * (n // k)) for i in range(k)]
    cuts = np.asarray(indices_or_sections)
    if cuts.ndim != 1:
        raise TypeError(f"split: indices_or_sections must be an int or a 1-d list of indices, got {cuts.ndim}-d")
    bounds = [0] + [index_arg("split", "each split index", i) for i in cuts] + [n]
    # Each piece is x[a:b] along axis, with Python's slice rules (as numpy): negative
    # indices count from the end, and a piece whose end is before its start is empty.
    pieces = [slice(a, b).indices(n)[:2] for a, b in zip(bounds[:-1], bounds[1:])]
    return [lax.static_slice(x, axis, a, max(a, b)) for a, b in pieces]


def flip(x: Any, axis: Any = None) -> Any:
    x = arr(x)
    return lax.flip_p.bind(x, axes=normalize_axes("flip", axis, x.ndim, x))


def pad(x: Any, pad_width: Any, mode: str = "constant", constant_values: float = 0) -> Any:
    """Constant padding only (numpy's ``pad_width`` forms)."""
    if mode != "constant":
        raise NotImplementedError(f"pad: mode {mode!r} is not supported; only 'constant'")
    x = arr(x)
    given = np.asarray(pad_width)
    if given.dtype.kind not in "iu":   # 1.5 would be truncated to 1
        raise TypeError(f"pad: pad_width must hold ints, got {pad_width!r:.60} (dtype {given.dtype})")
    if given.size and given.min() < 0:
        raise ValueError(f"pad: pad_width must be >= 0, got {pad_width!r:.60}")
    try:
        widths = np.broadcast_to(given, (x.ndim, 2))
    except ValueError:
        raise ValueError(f"pad: pad_width {pad_width} does not fit an array {describe(x)}: give one (before, after) "
                         f"pair per axis ({x.ndim}), one pair, or one int") from None
    return lax.pad_p.bind(x, widths=tuple((int(a), int(b)) for a, b in widths), value=constant_values)


def tile(x: Any, reps: Any) -> Any:
    x = arr(x)
    reps = shape_tuple(reps, "tile", "reps")
    nd = max(x.ndim, len(reps))
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (nd - x.ndim) + x.shape
    x = lax.reshape(x, tuple(v for s in shape for v in (1, s)))
    x = lax.broadcast_to(x, tuple(v for r, s in zip(reps, shape) for v in (r, s)))
    return lax.reshape(x, tuple(r * s for r, s in zip(reps, shape)))


def repeat(x: Any, repeats: Any, axis: int | None = None) -> Any:
    x = arr(x)
    if axis is None:
        x, axis = ravel(x), 0
    axis = normalize_axis("repeat", axis, x.ndim, x)
    if isinstance(repeats, (Array, Tracer)):   # counts set the output shape, so they must be concrete
        repeats = np.asarray(repeats.concrete_value() if isinstance(repeats, Tracer) else repeats)
    counts = np.asarray(repeats)
    if counts.dtype.kind not in "iu" or counts.ndim > 1:
        raise TypeError(f"repeat: repeats must be an int or a 1-d sequence of ints, got {repeats!r:.60}")
    if counts.size and counts.min() < 0:
        raise ValueError(f"repeat: repeats must be >= 0, got {repeats!r:.60}")
    if counts.ndim == 1 and counts.size not in (1, x.shape[axis]):
        raise ValueError(f"repeat: {counts.size} repeat counts for axis {axis} of an array {describe(x)} (size "
                         f"{x.shape[axis]}): give one count, or one per element")
    idx = np.repeat(np.arange(x.shape[axis]), counts)
    return take(x, idx, axis=axis)


def _take_how(op: str, mode: Any, wrap: bool) -> tuple[str | None, bool]:
    """(the gather mode, whether negative indices count from the end) for take/take_along_axis's ``mode``."""
    if mode is None:
        return ("fill" if not _config.checked_indexing else None), wrap
    if mode == "raise":
        raise NotImplementedError(f"{op}: mode='raise' is not supported (as in JAX: indices cannot be checked "
                                  "inside compiled code); use mode='fill', 'clip' or 'wrap', or set "
                                  "fg.config.update('checked_indexing', True) to make out-of-bounds indices raise")
    if mode not in ("clip", "fill", "wrap") and not (op == "take_along_axis" and mode == "promise_in_bounds"):
        raise ValueError(f"{op}: invalid mode {mode!r}; expected 'fill' (the default), 'clip' or 'wrap'")
    return ("clip" if mode == "promise_in_bounds" else mode), wrap


def take(a: Any, indices: Any, axis: int | None = None, out: None = None, mode: str | None = None,
         unique_indices: bool = False, indices_are_sorted: bool = False, fill_value: Any = None) -> Any:
    """Gather along ``axis`` (None: from the flattened array), as ``jnp.take``.

    Out-of-bounds indices (after a negative index counts once from the end) give ``fill_value``
    (default NaN for floats, the most negative value for signed ints) with ``mode="fill"`` (the
    default); ``"clip"`` clamps into ``[0, n-1]`` (negative indices clamp to 0, as numpy's take);
    ``"wrap"`` takes indices modulo ``n``.

    >>> fnp.take(fnp.array([1., 2., 3.]), fnp.array([0, 2, 5]))   # Array([1., 3., nan])
    """
    if out is not None:
        raise NotImplementedError("take: the out= argument is not supported (funcgrad arrays are immutable); "
                                  "use the return value")
    x = arr(a)
    if axis is None:
        x, axis = ravel(x), 0
    axis = normalize_axis("take", axis, x.ndim, x)
    how, wrap = _take_how("take", mode, True)
    idx = int(indices) if isinstance(indices, (int, np.integer)) else arr(indices)
    if not isinstance(idx, int) and idx.dtype.kind not in "iu":
        raise TypeError(f"take: indices must be integers, got {describe(idx)}")
    index = (slice(None),) * axis + (idx,)
    if how == "clip":
        wrap = False     # numpy's take: 'clip' clamps negative indices to 0
    return lax.getitem(x, index, how, fill_value, wrap_negative_indices=wrap, op="take")


def take_along_axis(arr: Any, indices: Any, axis: int | None = -1, mode: str | None = None,
                    fill_value: Any = None, *, wrap_negative_indices: bool | None = None) -> Any:
    """Pick ``arr``'s elements at ``indices`` along ``axis`` (same rank; other axes broadcast), as JAX.

    Out-of-bounds indices give ``fill_value`` (default NaN for floats) with the default mode
    ``"fill"``; ``"clip"`` clamps them. ``axis=None`` works on the flattened array.

    >>> fnp.take_along_axis(fnp.array([[3., 1.], [0., 2.]]), fnp.array([[1], [0]]), axis=1)   # [[1.], [0.]]
    """
    x, indices = _arr(arr), _arr(indices)
    if indices.dtype.kind not in "iu":
        raise TypeError(f"take_along_axis: indices must be integers, got {describe(indices)}")
    if axis is None:
        x, indices, axis = ravel(x), ravel(indices), 0
    if indices.ndim != x.ndim:
        raise ValueError(f"take_along_axis: indices {describe(indices)} and array {describe(x)} must have the "
                         "same rank")
    axis = normalize_axis("take_along_axis", axis, x.ndim, x)
    for d in range(x.ndim):
        if d != axis and indices.shape[d] not in (1, x.shape[d]) and x.shape[d] != 1:
            raise ValueError(f"take_along_axis: indices {describe(indices)} do not broadcast against the array "
                             f"{describe(x)} along axis {d}")
    how, wrap = _take_how("take_along_axis", mode, True if wrap_negative_indices is None else
                          bool(wrap_negative_indices))
    index = []
    for d in range(x.ndim):
        if d == axis:
            index.append(indices)
        else:
            shape = [1] * x.ndim
            shape[d] = x.shape[d]
            index.append(np.arange(x.shape[d]).reshape(shape))
    return lax.getitem(x, tuple(index), how, fill_value, wrap_negative_indices=wrap, op="take_along_axis")


_arr = arr


def _tri_mask(x: Any, k: int, lower: bool) -> np.ndarray:
    n, m = x.shape[-2:]
    return np.tri(n, m, k, dtype=bool) if lower else ~np.tri(n, m, k - 1, dtype=bool)


def tril(x: Any, k: int = 0) -> Any:
    x = arr(x)
    return lax.select_p.bind(_tri_mask(x, k, True), x, False if x.dtype.kind == "b" else 0)


def triu(x: Any, k: int = 0) -> Any:
    x = arr(x)
    return lax.select_p.bind(_tri_mask(x, k, False), x, False if x.dtype.kind == "b" else 0)


def astype(x: Any, dtype: Any) -> Any:
    return lax.convert_element_type(arr(x), dtype)


def shape(x: Any) -> tuple[int, ...]:
    return tuple(np.shape(x)) if not hasattr(x, "shape") else tuple(x.shape)


def ndim(x: Any) -> int:
    return len(shape(x))


def size(x: Any) -> int:
    return int(np.prod(shape(x), dtype=np.int64))


del _dtypes
