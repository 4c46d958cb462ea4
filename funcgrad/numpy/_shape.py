"""Shape manipulation and indexing helpers with numpy names."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array, Tracer
from funcgrad._dtypes import describe
from funcgrad.numpy._base import arr, as_list, normalize_axes, normalize_axis, promote, shape_tuple
from funcgrad.primitives import elementwise as E
from funcgrad.primitives import indexing as I
from funcgrad.primitives import shape as S


def reshape(x: Any, shape: Any, *more: int) -> Any:
    """Reshape (one dimension may be -1)."""
    x = arr(x)
    shape = shape_tuple(shape) + tuple(more)
    if shape.count(-1) > 1:
        raise ValueError(f"reshape: can only specify one unknown dimension (-1), got shape {shape} for an array "
                         f"{describe(x)}")
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
        if known == 0 or x.size % known:
            raise ValueError(f"reshape: cannot reshape an array {describe(x)} into shape {shape}")
        shape = tuple(x.size // known if s == -1 else s for s in shape)
    return S.reshape(x, shape)


def ravel(x: Any) -> Any:
    x = arr(x)
    return S.reshape(x, (x.size,))


def transpose(x: Any, axes: Sequence[int] | None = None) -> Any:
    x = arr(x)
    if axes is None:
        axes = tuple(reversed(range(x.ndim)))
    if len(axes) != x.ndim:
        raise ValueError(f"transpose: axes {tuple(axes)} do not match an array {describe(x)}")
    return S.transpose(x, tuple(normalize_axis("transpose", a, x.ndim, x) for a in axes))


def swapaxes(x: Any, axis1: int, axis2: int) -> Any:
    x = arr(x)
    perm = list(range(x.ndim))
    a, b = normalize_axis("swapaxes", axis1, x.ndim, x), normalize_axis("swapaxes", axis2, x.ndim, x)
    perm[a], perm[b] = perm[b], perm[a]
    return S.transpose(x, tuple(perm))


def moveaxis(x: Any, source: Any, destination: Any) -> Any:
    x = arr(x)
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination must have the same number of axes")
    src = [normalize_axis("moveaxis", a, x.ndim, x) for a in src]
    dst = [normalize_axis("moveaxis", a, x.ndim, x) for a in dst]
    order = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return S.transpose(x, tuple(order))


def expand_dims(x: Any, axis: Any) -> Any:
    x = arr(x)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out_ndim = x.ndim + len(axes)
    axes = sorted(normalize_axis("expand_dims", a, out_ndim, x) for a in axes)
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return S.reshape(x, tuple(shape))


def squeeze(x: Any, axis: Any = None) -> Any:
    x = arr(x)
    if axis is None:
        axes = tuple(i for i, s in enumerate(x.shape) if s == 1)
    else:
        axes = normalize_axes("squeeze", axis, x.ndim, x)
        for a in axes:
            if x.shape[a] != 1:
                raise ValueError(f"squeeze: cannot remove axis {a} of size {x.shape[a]} from an array {describe(x)}")
    return S.reshape(x, tuple(s for i, s in enumerate(x.shape) if i not in axes))


def broadcast_to(x: Any, shape: Any) -> Any:
    return S.broadcast_to(arr(x), shape_tuple(shape))


def broadcast_arrays(*xs: Any) -> list:
    xs = as_list(xs)
    shape = tuple(np.broadcast_shapes(*[x.shape for x in xs]))
    return [S.broadcast_to(x, shape) for x in xs]


def concatenate(arrays: Sequence[Any], axis: int = 0) -> Any:
    xs = promote(*as_list(arrays))
    if not xs:
        raise ValueError("concatenate: need at least one array")
    if any(x.ndim == 0 for x in xs):
        raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    axis = normalize_axis("concatenate", axis, xs[0].ndim, xs[0])
    return xs[0] if len(xs) == 1 else S.concatenate_p.bind(*xs, axis=axis)


def stack(arrays: Sequence[Any], axis: int = 0) -> Any:
    xs = as_list(arrays)
    if not xs:
        raise ValueError("stack: need at least one array")
    shapes = {x.shape for x in xs}
    if len(shapes) != 1:
        raise ValueError(f"stack: all arrays must have the same shape, got {', '.join(describe(x) for x in xs)}")
    if not -(xs[0].ndim + 1) <= int(axis) <= xs[0].ndim:
        raise ValueError(f"stack: axis {axis} is out of range for stacking arrays {describe(xs[0])} (the result has "
                         f"rank {xs[0].ndim + 1})")
    axis = normalize_axis("stack", axis, xs[0].ndim + 1)
    return concatenate([expand_dims(x, axis) for x in xs], axis=axis)


def split(x: Any, indices_or_sections: Any, axis: int = 0) -> list:
    x = arr(x)
    axis = normalize_axis("split", axis, x.ndim, x)
    n = x.shape[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0 or n % k:
            raise ValueError(f"split: an axis of size {n} cannot be split into {k} equal sections")
        bounds = [i * (n // k) for i in range(k + 1)]
    else:
        bounds = [0] + [int(i) for i in indices_or_sections] + [n]
    return [I.static_slice(x, axis, max(0, min(a, n)), max(0, min(b, n))) for a, b in zip(bounds[:-1], bounds[1:])]


def flip(x: Any, axis: Any = None) -> Any:
    x = arr(x)
    return S.flip_p.bind(x, axes=normalize_axes("flip", axis, x.ndim, x))


def pad(x: Any, pad_width: Any, mode: str = "constant", constant_values: float = 0) -> Any:
    """Constant padding only (numpy's ``pad_width`` forms)."""
    if mode != "constant":
        raise NotImplementedError(f"pad: mode {mode!r} is not supported; only 'constant'")
    x = arr(x)
    try:
        widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (x.ndim, 2))
    except ValueError:
        raise ValueError(f"pad: pad_width {pad_width} does not fit an array {describe(x)}: give one (before, after) "
                         f"pair per axis ({x.ndim}), one pair, or one int") from None
    return S.pad_p.bind(x, widths=tuple((int(a), int(b)) for a, b in widths), value=constant_values)


def tile(x: Any, reps: Any) -> Any:
    x = arr(x)
    reps = shape_tuple(reps)
    nd = max(x.ndim, len(reps))
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (nd - x.ndim) + x.shape
    x = S.reshape(x, tuple(v for s in shape for v in (1, s)))
    x = S.broadcast_to(x, tuple(v for r, s in zip(reps, shape) for v in (r, s)))
    return S.reshape(x, tuple(r * s for r, s in zip(reps, shape)))


def repeat(x: Any, repeats: Any, axis: int | None = None) -> Any:
    x = arr(x)
    if axis is None:
        x, axis = ravel(x), 0
    axis = normalize_axis("repeat", axis, x.ndim, x)
    if isinstance(repeats, (Array, Tracer)):
        repeats = np.asarray(repeats)
    idx = np.repeat(np.arange(x.shape[axis]), repeats)
    return take(x, idx, axis=axis)


def take(x: Any, indices: Any, axis: int | None = None) -> Any:
    """Gather along ``axis`` (None: from the flattened array). Indices must be in range."""
    x = arr(x)
    if axis is None:
        x, axis = ravel(x), 0
    axis = normalize_axis("take", axis, x.ndim, x)
    if isinstance(indices, (int, np.integer)):
        index = (slice(None),) * axis + (int(indices),)
        return I.getitem(x, index)
    return I.getitem(x, (slice(None),) * axis + (arr(indices),))


def take_along_axis(x: Any, indices: Any, axis: int) -> Any:
    x, indices = arr(x), arr(indices)
    if indices.ndim != x.ndim:
        raise ValueError(f"take_along_axis: indices {describe(indices)} and array {describe(x)} must have the "
                         "same rank")
    axis = normalize_axis("take_along_axis", axis, x.ndim, x)
    index = []
    for d in range(x.ndim):
        if d == axis:
            index.append(indices)
        else:
            shape = [1] * x.ndim
            shape[d] = x.shape[d]
            index.append(np.arange(x.shape[d]).reshape(shape))
    return I.getitem(x, tuple(index))


def _tri_mask(x: Any, k: int, lower: bool) -> np.ndarray:
    n, m = x.shape[-2:]
    return np.tri(n, m, k, dtype=bool) if lower else ~np.tri(n, m, k - 1, dtype=bool)


def tril(x: Any, k: int = 0) -> Any:
    x = arr(x)
    return E.select_p.bind(_tri_mask(x, k, True), x, False if x.dtype.kind == "b" else 0)


def triu(x: Any, k: int = 0) -> Any:
    x = arr(x)
    return E.select_p.bind(_tri_mask(x, k, False), x, False if x.dtype.kind == "b" else 0)


def astype(x: Any, dtype: Any) -> Any:
    return E.convert(arr(x), dtype)


def shape(x: Any) -> tuple[int, ...]:
    return tuple(np.shape(x)) if not hasattr(x, "shape") else tuple(x.shape)


def ndim(x: Any) -> int:
    return len(shape(x))


def size(x: Any) -> int:
    return int(np.prod(shape(x), dtype=np.int64))


del _dtypes
