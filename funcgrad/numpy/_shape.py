"""Shape manipulation and indexing helpers with numpy names."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._array import host_numpy
from funcgrad._core import Array, Tracer
from funcgrad._dtypes import describe
from funcgrad.numpy._base import arr, as_list, index_arg, normalize_axes, normalize_axis, promote, shape_tuple
from funcgrad import lax
from funcgrad._config import config as _config
from funcgrad.typing import ArrayLike, DTypeLike, ShapeLike


def reshape(x: ArrayLike, shape: ShapeLike, *more: int) -> Array:
    """Reshape (one dimension may be -1).

    >>> fnp.reshape(fnp.arange(6), (2, -1))
    Array([[0, 1, 2],
           [3, 4, 5]], dtype=int32)
    """
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


def ravel(x: ArrayLike) -> Array:
    """``a`` flattened to 1-d (C order).

    >>> fnp.ravel(fnp.array([[1, 2], [3, 4]]))
    Array([1, 2, 3, 4], dtype=int32)
    """
    x = arr(x)
    return lax.reshape(x, (x.size,))


def transpose(x: ArrayLike, axes: Sequence[int] | None = None) -> Array:
    """``a`` with its axes permuted (reversed by default).

    >>> fnp.transpose(fnp.ones((2, 3, 4))).shape
    (4, 3, 2)
    """
    x = arr(x)
    if axes is None:
        return lax.transpose(x, tuple(reversed(range(x.ndim))))
    perm = normalize_axes("transpose", axes, x.ndim, x, keep_order=True)
    if len(perm) != x.ndim:
        raise ValueError(f"transpose: axes {tuple(perm)} do not match an array {describe(x)}: give a permutation of "
                         f"all {x.ndim} axes, e.g. {tuple(reversed(range(x.ndim)))}")
    return lax.transpose(x, perm)


def swapaxes(x: ArrayLike, axis1: int, axis2: int) -> Array:
    """``a`` with ``axis1`` and ``axis2`` exchanged.

    >>> fnp.swapaxes(fnp.ones((2, 3, 4)), 0, 2).shape
    (4, 3, 2)
    """
    x = arr(x)
    perm = list(range(x.ndim))
    a, b = normalize_axis("swapaxes", axis1, x.ndim, x), normalize_axis("swapaxes", axis2, x.ndim, x)
    perm[a], perm[b] = perm[b], perm[a]
    return lax.transpose(x, tuple(perm))


def moveaxis(x: ArrayLike, source: Any, destination: Any) -> Array:
    """``a`` with axis ``source`` moved to ``destination``.

    >>> fnp.moveaxis(fnp.ones((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
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


def expand_dims(x: ArrayLike, axis: int | Sequence[int]) -> Array:
    """``a`` with a length-1 axis inserted at ``axis``.

    >>> fnp.expand_dims(fnp.ones((2, 3)), 0).shape
    (1, 2, 3)
    """
    x = arr(x)
    out_ndim = x.ndim + (len(axis) if isinstance(axis, (tuple, list)) else 1)
    axes = normalize_axes("expand_dims", axis, out_ndim, x,
                          of=f"the result of expanding an array {describe(x)} (rank {out_ndim})")
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return lax.reshape(x, tuple(shape))


def squeeze(x: ArrayLike, axis: int | Sequence[int] | None = None) -> Array:
    """``a`` without its length-1 axes (or only those in ``axis``).

    >>> fnp.squeeze(fnp.ones((1, 3, 1))).shape
    (3,)
    """
    x = arr(x)
    if axis is None:
        axes = tuple(i for i, s in enumerate(x.shape) if s == 1)
    else:
        axes = normalize_axes("squeeze", axis, x.ndim, x)
        for a in axes:
            if x.shape[a] != 1:
                raise ValueError(f"squeeze: cannot remove axis {a} of size {x.shape[a]} from an array {describe(x)}")
    return lax.reshape(x, tuple(s for i, s in enumerate(x.shape) if i not in axes))


def broadcast_to(x: ArrayLike, shape: ShapeLike) -> Array:
    """``x`` broadcast to ``shape``.

    >>> fnp.broadcast_to(fnp.array([1, 2]), (2, 2))
    Array([[1, 2],
           [1, 2]], dtype=int32)
    """
    x, shape = arr(x), shape_tuple(shape, "broadcast_to")
    if len(shape) < x.ndim or any(a not in (1, b) for a, b in zip(x.shape[::-1], shape[::-1])):
        raise ValueError(f"broadcast_to: cannot broadcast an array {describe(x)} to shape {shape}: aligned from the "
                         "right, each of its axes must have size 1 or the target's size")
    return lax.broadcast_to(x, shape)


def broadcast_arrays(*xs: Any) -> list:
    """The arrays broadcast to their common shape.

    >>> a, b = fnp.broadcast_arrays(fnp.ones((2, 1)), fnp.ones(3))
    >>> a.shape, b.shape
    ((2, 3), (2, 3))
    """
    xs = as_list(xs)
    shape = tuple(np.broadcast_shapes(*[x.shape for x in xs]))
    return [lax.broadcast_to(x, shape) for x in xs]


def concatenate(arrays: Sequence[Any], axis: int = 0) -> Array:
    """The arrays joined along an existing ``axis``.

    >>> fnp.concatenate([fnp.array([1, 2]), fnp.array([3])])
    Array([1, 2, 3], dtype=int32)
    """
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


def stack(arrays: Sequence[Any], axis: int = 0) -> Array:
    """The arrays joined along a new ``axis``.

    >>> fnp.stack([fnp.array([1, 2]), fnp.array([3, 4])], axis=1)
    Array([[1, 3],
           [2, 4]], dtype=int32)
    """
    xs = as_list(arrays)
    if not xs:
        raise ValueError("stack: need at least one array")
    shapes = {x.shape for x in xs}
    if len(shapes) != 1:
        raise ValueError(f"stack: all arrays must have the same shape, got {', '.join(describe(x) for x in xs)}")
    axis = normalize_axis("stack", axis, xs[0].ndim + 1,
                          of=f"stacking arrays {describe(xs[0])} (the result has rank {xs[0].ndim + 1})")
    return concatenate([expand_dims(x, axis) for x in xs], axis=axis)


def split(x: ArrayLike, indices_or_sections: Any, axis: int = 0) -> list:
    """``ary`` split into equal sections (or at the given indices) along ``axis``.

    >>> fnp.split(fnp.arange(4), 2)
    [Array([0, 1], dtype=int32), Array([2, 3], dtype=int32)]
    """
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


def flip(x: ArrayLike, axis: int | Sequence[int] | None = None) -> Array:
    """``m`` reversed along ``axis`` (every axis by default).

    >>> fnp.flip(fnp.array([1, 2, 3]))
    Array([3, 2, 1], dtype=int32)
    """
    x = arr(x)
    return lax.flip_p.bind(x, axes=normalize_axes("flip", axis, x.ndim, x))


_PAD_KEYWORDS = {"constant": ("constant_values",), "edge": (), "linear_ramp": ("end_values",),
                 "maximum": ("stat_length",), "mean": ("stat_length",), "median": ("stat_length",),
                 "minimum": ("stat_length",), "reflect": ("reflect_type",), "symmetric": ("reflect_type",),
                 "wrap": (), "empty": ()}


def _pad_widths(pad_width: Any, x: Any) -> tuple[tuple[int, int], ...]:
    if isinstance(pad_width, Tracer):
        raise TypeError(f"pad: pad_width must be static ints, got a traced array {describe(pad_width)}")
    given = host_numpy(pad_width)
    if given.dtype.kind not in "iu":   # 1.5 would be truncated to 1
        raise TypeError(f"pad: pad_width must hold ints, got {pad_width!r:.60} (dtype {given.dtype})")
    if given.size and given.min() < 0:
        raise ValueError(f"pad: pad_width must be >= 0, got {pad_width!r:.60}")
    try:
        widths = np.broadcast_to(given, (x.ndim, 2))
    except ValueError:
        raise ValueError(f"pad: pad_width {pad_width} does not fit an array {describe(x)}: give one (before, after) "
                         f"pair per axis ({x.ndim}), one pair, or one int") from None
    return tuple((int(a), int(b)) for a, b in widths)


def _per_axis(name: str, value: Any, x: Any) -> Any:
    """A pad keyword (``constant_values``, ``end_values``, ``stat_length``) broadcast to ``(ndim, 2)``."""
    try:
        if isinstance(value, (Array, Tracer)):
            return lax.broadcast_to(value, (x.ndim, 2)) if x.ndim else value
        return np.broadcast_to(np.asarray(value, dtype=object if value is None else None), (x.ndim, 2))
    except ValueError:
        raise ValueError(f"pad: {name} {value!r:.60} does not fit an array {describe(x)}: give one value, one "
                         f"(before, after) pair, or one pair per axis ({x.ndim})") from None


def _pick(values: Any, d: int, j: int) -> Any:
    return lax.getitem(values, (d, j)) if isinstance(values, (Array, Tracer)) else values[d, j]


def _linear_pad(x: Any, axis: int, matrix: np.ndarray) -> Any:
    """``matrix @ x`` along ``axis`` for a padding matrix with few nonzeros per row: a sum of gathers."""
    rows = matrix.shape[0]
    nnz = np.count_nonzero(matrix, axis=1)
    out = None
    for j in range(int(nnz.max()) if rows else 0):
        idx = np.zeros(rows, np.int32)
        coef = np.zeros(rows, matrix.dtype)
        for r in range(rows):
            cols = np.nonzero(matrix[r])[0]
            if j < cols.size:
                idx[r], coef[r] = cols[j], matrix[r, cols[j]]
        term = lax.getitem(x, (slice(None),) * axis + (idx,))
        if not np.all(coef == 1):
            shape = [1] * x.ndim
            shape[axis] = rows
            term = lax.mul(term, lax.convert_element_type(np.asarray(coef).reshape(shape), x.dtype))
        out = term if out is None else lax.add(out, term)
    return out


def _gather_pad(x: Any, axis: int, idx: np.ndarray) -> Any:
    return lax.getitem(x, (slice(None),) * axis + (idx.astype(np.int32),))


def _ramp_pad(x: Any, axis: int, lo: int, hi: int, end_lo: Any, end_hi: Any) -> Any:
    """Linear ramps from the end values to the edges along ``axis``, with numpy's coefficients."""
    n = x.shape[axis]
    parts = [x]
    for j, (w, end) in enumerate(((lo, end_lo), (hi, end_hi))):
        if not w:
            continue
        unit = np.zeros(n)
        unit[0 if j == 0 else n - 1] = 1.0
        width = (lo, hi)
        rows = slice(0, lo) if j == 0 else slice(lo + n, lo + n + hi)
        c_edge = np.pad(unit, width, mode="linear_ramp", end_values=0.0)[rows]
        c_end = np.pad(np.zeros(n), width, mode="linear_ramp", end_values=(1.0, 0.0) if j == 0 else (0.0, 1.0))[rows]
        shape = [1] * x.ndim
        shape[axis] = w
        edge = lax.static_slice(x, axis, 0, 1) if j == 0 else lax.static_slice(x, axis, n - 1, n)
        block = lax.add(lax.mul(edge, lax.convert_element_type(c_edge.reshape(shape), x.dtype)),
                        lax.mul(lax.convert_element_type(arr(end), x.dtype),
                                lax.convert_element_type(c_end.reshape(shape), x.dtype)))
        parts.insert(0 if j == 0 else len(parts), block)
    return concatenate(parts, axis=axis)


def _round_for(x: Any, dtype: np.dtype) -> Any:
    """A float result cast back to an integer ``dtype`` as numpy's pad does (rounded half to even)."""
    if dtype.kind in "iu":
        return lax.convert_element_type(lax.round_half_even(x), dtype)
    return lax.convert_element_type(x, dtype)


def _stat(mode: str, region: Any, axis: int) -> Any:
    """The statistic of ``region`` along ``axis``, kept as a length-1 axis."""
    keep = region.shape[:axis] + (1,) + region.shape[axis + 1:]
    if mode in ("maximum", "minimum"):
        out = (lax.reduce_max if mode == "maximum" else lax.reduce_min)(region, (axis,))
        return lax.reshape(out, keep)
    from funcgrad._dtypes import inexact
    r = lax.convert_element_type(region, inexact(region.dtype))
    n = region.shape[axis]
    if mode == "mean":
        out = lax.div(lax.reduce_sum(r, (axis,)), lax.convert_element_type(np.asarray(n), r.dtype))
    else:   # median: the middle of the sorted values (the mean of the two middle ones for an even count)
        srt = lax.sort(r, dimension=axis)
        lo, hi = lax.static_slice(srt, axis, (n - 1) // 2, (n - 1) // 2 + 1), lax.static_slice(srt, axis, n // 2,
                                                                                             n // 2 + 1)
        out = lax.mul(lax.add(lo, hi), 0.5)
    return _round_for(lax.reshape(out, keep), region.dtype)


def _pad_callable(x: Any, widths: tuple, fn: Any, kwargs: dict) -> Any:
    from funcgrad.api import vmap
    out = lax.pad_p.bind(x, widths=widths, value=False if x.dtype.kind == "b" else 0)
    for d, w in enumerate(widths):
        moved = lax.moveaxis(out, d, out.ndim - 1)
        flat = lax.reshape(moved, (-1 if moved.size else 0, moved.shape[-1]) if moved.ndim > 1 else
                           (1, moved.shape[-1]))
        if flat.shape[0] == 0:
            continue
        got = vmap(lambda v, w=w, d=d: fn(v, w, d, kwargs))(flat)
        if tuple(got.shape) != tuple(flat.shape):
            raise ValueError(f"pad: the padding function returned shape {tuple(got.shape[1:])} for a vector of "
                             f"shape {tuple(flat.shape[1:])}; it must return the vector it was given, updated")
        out = lax.moveaxis(lax.reshape(lax.convert_element_type(got, x.dtype), moved.shape), out.ndim - 1, d)
    return out


def pad(array: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Array:
    """``array`` padded by ``pad_width`` (an int, a ``(before, after)`` pair, or one pair per axis), with
    numpy's modes: 'constant' (``constant_values``, per axis and side), 'edge', 'linear_ramp'
    (``end_values``), 'maximum'/'mean'/'median'/'minimum' (``stat_length``), 'reflect'/'symmetric'
    (``reflect_type`` 'even' or 'odd'), 'wrap', 'empty' (zeros), or a function
    ``f(vector, (before, after), axis, kwargs) -> vector`` applied to each zero-padded line (it must
    return the vector, as JAX: no in-place updates).  Differentiable in ``array`` and in the
    ``constant_values`` / ``end_values``.

    >>> pad(fnp.array([1.0, 2.0, 3.0]), 2, mode="reflect")
    Array([3., 2., 1., 2., 3., 2., 1.], dtype=float32)
    """
    x = arr(array)
    widths = _pad_widths(pad_width, x)
    if x.ndim == 0 and (callable(mode) or mode in _PAD_KEYWORDS):   # numpy: a 0-d array has no axis to pad
        return x
    if callable(mode):
        return _pad_callable(x, widths, mode, kwargs)
    if mode not in _PAD_KEYWORDS:
        raise NotImplementedError(f"pad: unimplemented padding mode {mode!r}; expected one of "
                                  f"{', '.join(sorted(_PAD_KEYWORDS))}, or a function")
    extra = set(kwargs) - set(_PAD_KEYWORDS[mode])
    if extra:
        raise ValueError(f"pad: unsupported keyword arguments for mode {mode!r}: {sorted(extra)}")
    zero = False if x.dtype.kind == "b" else 0
    if mode == "empty":
        return lax.pad_p.bind(x, widths=widths, value=zero)
    if mode == "constant":
        value = kwargs.get("constant_values", 0)
        if isinstance(value, (bool, int, float, np.generic)) or (isinstance(value, (np.ndarray, Array))
                                                                and np.ndim(value) == 0):
            value = value.item() if hasattr(value, "item") else value
            return lax.pad_p.bind(x, widths=widths, value=value)
        if isinstance(value, Tracer) and value.ndim == 0:
            return lax.pad(x, lax.convert_element_type(value, x.dtype), [(a, b, 0) for a, b in widths])
        values = _per_axis("constant_values", value if isinstance(value, (Array, Tracer)) else np.asarray(value),
                           x)
        for d, (lo, hi) in enumerate(widths):
            parts = []
            for j, w in ((0, lo), (1, hi)):
                if w:
                    v = lax.convert_element_type(arr(_pick(values, d, j)), x.dtype)
                    parts.append(lax.broadcast_to(v, x.shape[:d] + (w,) + x.shape[d + 1:]))
            if parts:
                x = concatenate(parts[:1] + [x] + parts[1:] if lo else [x] + parts, axis=d)
        return x
    reflect_type = kwargs.get("reflect_type", "even")
    if reflect_type not in ("even", "odd"):
        raise ValueError(f"pad: reflect_type must be 'even' or 'odd', got {reflect_type!r}")
    if mode == "linear_ramp":
        ends = _per_axis("end_values", kwargs.get("end_values", 0), x)
        from funcgrad._dtypes import inexact
        dtype = x.dtype
    if mode in ("maximum", "mean", "median", "minimum"):
        lengths = _per_axis("stat_length", kwargs.get("stat_length", None), x)
    for d, (lo, hi) in enumerate(widths):
        if lo == hi == 0:
            continue
        n = x.shape[d]
        if n == 0:
            raise ValueError(f"pad: cannot apply {mode!r} padding to the empty axis {d} of {describe(x)}")
        if mode in ("maximum", "mean", "median", "minimum"):
            parts = [x]
            for j, w in ((0, lo), (1, hi)):
                if not w:
                    continue
                length = lengths[d, j]
                length = n if length is None else index_arg("pad", "stat_length", length)
                if length <= 0:
                    raise ValueError(f"pad: stat_length {length} leaves no values to compute the {mode} of")
                length = min(length, n)
                region = lax.static_slice(x, d, 0, length) if j == 0 else lax.static_slice(x, d, n - length, n)
                block = lax.broadcast_to(_stat(mode, region, d), x.shape[:d] + (w,) + x.shape[d + 1:])
                parts.insert(0 if j == 0 else len(parts), block)
            x = concatenate(parts, axis=d)
            continue
        if mode == "linear_ramp":
            x = lax.convert_element_type(x, inexact(dtype))
            out = _ramp_pad(x, d, lo, hi, _pick(ends, d, 0), _pick(ends, d, 1))
            if dtype.kind in "iu":   # numpy's integer ramps round down (linspace in the integer dtype), axis by axis;
                # the tolerance absorbs the rounding of this formulation (1.9999 for numpy's exact 2)
                eps = 1e-9 if out.dtype == np.float64 else 1e-5
                out = lax.floor(lax.add(out, lax.mul(lax.add(lax.abs(out), 1.0), eps)))
            out = lax.convert_element_type(out, dtype)
        elif reflect_type == "odd" and mode in ("reflect", "symmetric"):
            limit = n - 1 if mode == "reflect" else n
            if lo <= limit and hi <= limit:   # one reflection: 2 * edge - the mirrored values
                base = _gather_pad(x, d, np.pad(np.arange(n), (lo, hi), mode=mode))
                parts = [x]
                if lo:
                    edge = lax.static_slice(x, d, 0, 1)
                    parts.insert(0, lax.sub(lax.add(edge, edge), lax.static_slice(base, d, 0, lo)))
                if hi:
                    edge = lax.static_slice(x, d, n - 1, n)
                    parts.append(lax.sub(lax.add(edge, edge), lax.static_slice(base, d, lo + n, lo + n + hi)))
                out = concatenate(parts, axis=d)
            else:   # repeated reflections: numpy's own padding of the identity gives the linear map
                matrix = np.pad(np.eye(n, dtype=np.int64), ((lo, hi), (0, 0)), mode=mode, reflect_type="odd")
                out = _linear_pad(x, d, matrix)
        else:   # edge, wrap, and even reflections gather: numpy's padding of arange(n) gives the indices
            out = _gather_pad(x, d, np.pad(np.arange(n), (lo, hi), mode=mode))
        x = out
    return x


def tile(x: ArrayLike, reps: Any) -> Array:
    """``A`` repeated ``reps`` times along each axis.

    >>> fnp.tile(fnp.array([1, 2]), 2)
    Array([1, 2, 1, 2], dtype=int32)
    """
    x = arr(x)
    reps = shape_tuple(reps, "tile", "reps")
    nd = max(x.ndim, len(reps))
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (nd - x.ndim) + x.shape
    x = lax.reshape(x, tuple(v for s in shape for v in (1, s)))
    x = lax.broadcast_to(x, tuple(v for r, s in zip(reps, shape) for v in (r, s)))
    return lax.reshape(x, tuple(r * s for r, s in zip(reps, shape)))


def repeat(x: ArrayLike, repeats: Any, axis: int | None = None) -> Array:
    """Each element repeated ``repeats`` times (along ``axis``; flattened by default).

    >>> fnp.repeat(fnp.array([1, 2]), 2)
    Array([1, 1, 2, 2], dtype=int32)
    """
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


def take(a: ArrayLike, indices: Any, axis: int | None = None, out: None = None, mode: str | None = None,
         unique_indices: bool = False, indices_are_sorted: bool = False, fill_value: ArrayLike | None = None) -> Array:
    """Gather along ``axis`` (None: from the flattened array), as ``jnp.take``.

    Out-of-bounds indices (after a negative index counts once from the end) give ``fill_value``
    (default NaN for floats, the most negative value for signed ints) with ``mode="fill"`` (the
    default); ``"clip"`` clamps into ``[0, n-1]`` (negative indices clamp to 0, as numpy's take);
    ``"wrap"`` takes indices modulo ``n``.

    >>> fnp.take(fnp.array([1., 2., 3.]), fnp.array([0, 2, 5]))   # Array([1., 3., nan])
    Array([ 1.,  3., nan], dtype=float32)
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


def take_along_axis(arr: ArrayLike, indices: Any, axis: int | None = -1, mode: str | None = None,
                    fill_value: ArrayLike | None = None, *, wrap_negative_indices: bool | None = None) -> Any:
    """Pick ``arr``'s elements at ``indices`` along ``axis`` (same rank; other axes broadcast), as JAX.

    Out-of-bounds indices give ``fill_value`` (default NaN for floats) with the default mode
    ``"fill"``; ``"clip"`` clamps them. ``axis=None`` works on the flattened array.

    >>> fnp.take_along_axis(fnp.array([[3., 1.], [0., 2.]]), fnp.array([[1], [0]]), axis=1)
    Array([[1.],
           [0.]], dtype=float32)
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


def tril(x: ArrayLike, k: int = 0) -> Array:
    """``m`` with the entries above the ``k``-th diagonal zeroed.

    >>> fnp.tril(fnp.ones((3, 3)))
    Array([[1., 0., 0.],
           [1., 1., 0.],
           [1., 1., 1.]], dtype=float32)
    """
    x = arr(x)
    return lax.select_p.bind(_tri_mask(x, k, True), x, False if x.dtype.kind == "b" else 0)


def triu(x: ArrayLike, k: int = 0) -> Array:
    """``m`` with the entries below the ``k``-th diagonal zeroed.

    >>> fnp.triu(fnp.ones((3, 3)), k=1)
    Array([[0., 1., 1.],
           [0., 0., 1.],
           [0., 0., 0.]], dtype=float32)
    """
    x = arr(x)
    return lax.select_p.bind(_tri_mask(x, k, False), x, False if x.dtype.kind == "b" else 0)


def astype(x: ArrayLike, dtype: DTypeLike) -> Array:
    """``x`` converted to ``dtype`` (floats to integers truncate towards zero).

    >>> fnp.astype(fnp.array([1.7, -1.7]), fnp.int32)
    Array([ 1, -1], dtype=int32)
    """
    return lax.convert_element_type(arr(x), dtype)


def shape(x: Any) -> tuple[int, ...]:
    """The shape of ``a`` (a tuple).

    >>> fnp.shape(fnp.ones((2, 3)))
    (2, 3)
    """
    return tuple(np.shape(x)) if not hasattr(x, "shape") else tuple(x.shape)


def ndim(x: Any) -> int:
    """The number of axes of ``a``.

    >>> fnp.ndim(fnp.ones((2, 3)))
    2
    """
    return len(shape(x))


def size(a: Any, axis: int | tuple[int, ...] | None = None) -> int:
    """The number of elements of ``a`` (along ``axis``, an int or a tuple of ints, if given), as a Python int.

    >>> size(fnp.zeros((2, 3)), axis=1)
    3
    """
    dims = shape(a)
    if axis is None:
        return int(np.prod(dims, dtype=np.int64))
    axes = normalize_axes("size", axis, len(dims), a)
    return int(np.prod([dims[i] for i in axes], dtype=np.int64))


del _dtypes
