"""GPU implementations of indexing, scatters, sorting, convolution, pooling and a few bit primitives.

Each entry of :data:`MAKERS` builds, for a :class:`~funcgrad.backends.gpu.array.Binding`, the
function run on device buffers (CuPy, or the tests' numpy stand-in); :mod:`.impls` registers
them. Everything runs on the device and computes what the CPU implementation computes:

* ``getitem``: CuPy's indexing. The index arrays reaching it are in bounds by construction (the
  gather and scatter modes clamp or redirect them first), except with ``mode="promise_in_bounds"``,
  where, as in JAX, an out-of-bounds index is the caller's broken promise (CuPy wraps it). With
  ``config.checked_indexing`` they are checked (one device read) and raise IndexError, as on the CPU.
* ``scatter_add`` / ``scatter_max`` / ``scatter_min``: ``cupyx.scatter_add`` / ``scatter_max`` /
  ``scatter_min`` (atomics: every duplicate index applied, as numpy's ``ufunc.at``) for the dtypes
  CuPy's atomics take (``x[rows] += y``, the embedding gradient, in place; other indices through
  the flat position of each update); NaN propagates as in ``numpy.maximum.at`` whatever the
  atomics do.
  ``scatter_set`` keeps the last write of each duplicate position (numpy's order): the update
  ids are max-scattered into a board and each position takes its winner, with no device read.
  ``scatter_mul`` and the dtypes without atomics run in rounds: round ``k`` applies every
  position's ``k``-th update in numpy's order (one device read for the number of rounds).
* ``argsort``: CuPy's stable sort (NaN last, as numpy).
* ``conv2d`` and its two gradients: im2col (a strided view of the padded input, copied into a
  ``(groups, C/groups*KH*KW, N*OH*OW)`` matrix) and one batched ``matmul`` (cuBLAS); the input
  gradient adds the columns back with one strided add per kernel offset.
* ``max_pool2d`` (first maximum of each window; NaN wins, padding never does), ``avg_pool2d``
  (padding counted) and their gradients; ``max_pool2d_grad`` scatter-adds (the indices
  ``max_pool2d`` made; checked, with a device read, under ``config.checked_indexing``).
* ``population_count``, ``frexp_mantissa`` / ``frexp_exponent`` (float16 and bfloat16 through float32,
  exactly).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from funcgrad import _dtypes
from funcgrad._config import config
from funcgrad._core import Primitive
from funcgrad._dtypes import describe
from funcgrad.backends.gpu import array as gpu_array
from funcgrad.primitives import conv as C
from funcgrad.primitives import elementwise_more as EM
from funcgrad.primitives import indexing as I
from funcgrad.primitives import random_bits as RB

__all__ = ["MAKERS"]

Maker = Callable[[gpu_array.Binding], Callable[..., Any]]

# primitive -> make(binding) -> implementation; registered by funcgrad.backends.gpu.impls.
MAKERS: dict[Primitive, Maker] = {}


def _simple(prim: Primitive) -> Callable[[Callable[[Any], Callable[..., Any]]], Callable[[Any], Callable[..., Any]]]:
    """Decorator: ``fn(xp) -> impl`` is ``prim``'s implementation maker (it needs only the array module)."""
    def decorate(fn: Callable[[Any], Callable[..., Any]]) -> Callable[[Any], Callable[..., Any]]:
        MAKERS[prim] = lambda b: fn(b.xp)
        return fn
    return decorate


def _with_cupyx(prim: Primitive) -> Callable[[Callable[[Any, Any], Callable[..., Any]]], Any]:
    """Decorator: ``fn(xp, cupyx) -> impl`` (``cupyx``: CuPy's extras, or the stand-in's)."""
    def decorate(fn: Callable[[Any, Any], Callable[..., Any]]) -> Any:
        MAKERS[prim] = lambda b: fn(b.xp, _cupyx(b.xp))
        return fn
    return decorate


def _cupyx(xp: Any) -> Any:
    """``cupyx`` for the array module (a test stand-in for CuPy carries its own as ``xp.cupyx``)."""
    own = getattr(xp, "cupyx", None)
    if own is not None:
        return own
    import cupyx  # noqa: PLC0415 -- optional dependency, present with CuPy

    return cupyx


# The value dtypes CuPy's atomic scatters take (CuPy 14: others raise TypeError).
_ATOMIC_EXTREMAL_DTYPES = {np.dtype(t) for t in (np.int32, np.int64, np.uint32, np.uint64, np.float32, np.float64)}
_ATOMIC_ADD_DTYPES = _ATOMIC_EXTREMAL_DTYPES | {np.dtype(np.float16)}
_INT32_MAX = 2**31 - 1


# ---------------------------------------------------------------- getitem


def _check_in_bounds(xp: Any, x: Any, template: tuple, arrays: tuple, op: str) -> None:
    """Under ``config.checked_indexing``: raise numpy's IndexError for an index array value outside
    ``[-n, n)`` of its axis (one device read)."""
    if not config.checked_indexing:
        return
    axes = I._item_axes(template, x.ndim)
    items = [(arrays[t[1]], axes[k], x.shape[axes[k]]) for k, t in enumerate(template) if t[0] == "a"]
    items = [(a, axis, n) for a, axis, n in items if a.size]
    if not items:
        return
    bad = [(a < -n) | (a >= n) for a, _, n in items]
    if not bool(xp.stack([b.any() for b in bad]).any()):
        return
    for (a, axis, n), b in zip(items, bad):
        if bool(b.any()):
            value = int(a[b].ravel()[0])
            raise IndexError(f"{op}: index {value} is out of bounds for axis {axis} with size {n} (array "
                             f"{describe(x)})")


@_simple(I.getitem_p)
def _getitem(xp):
    def impl(x, *arrays, template):
        _check_in_bounds(xp, x, template, arrays, "getitem")
        return x[I.build_index(template, arrays)]
    return impl


# ---------------------------------------------------------------- scatters


def _result_dtype(x: Any, y: Any) -> np.dtype:
    # As the CPU's np.result_type(x, y): a Python scalar update is weak.
    return np.result_type(x.dtype, y if isinstance(y, (bool, int, float, complex)) else y.dtype)


def _updates(xp: Any, y: Any, dtype: np.dtype, target: tuple) -> Any:
    """``y`` as ``dtype``, broadcast to the target region's shape (leading 1-axes dropped, as numpy's
    assignment does)."""
    y = xp.asarray(y, dtype=dtype)
    extra = y.ndim - len(target)
    if extra > 0 and all(s == 1 for s in y.shape[:extra]):
        y = y.reshape(y.shape[extra:])
    return xp.broadcast_to(y, target)


def _positions(xp: Any, shape: tuple, index: tuple) -> Any:
    """The flat position in an array of ``shape`` of each element of ``array[index]``."""
    size = int(np.prod(shape, dtype=np.int64))
    board = xp.arange(size, dtype=np.int32 if size <= _INT32_MAX else np.int64).reshape(shape)
    return board[index]


def _rounds(xp: Any, flat: Any, pos: Any, vals: Any, combine: Callable[[Any, Any], Any]) -> Any:
    """``flat[pos[k]] = combine(flat[pos[k]], vals[k])`` for k in order (duplicates applied in turn).

    Round r applies every position's r-th update at once; positions without one that round go
    to a discarded extra slot. One device read: the number of rounds.
    """
    n = pos.size
    if n == 0:
        return flat
    pos = pos.astype(np.int64, copy=False)
    keys = pos * n + xp.arange(n, dtype=np.int64)          # unique: sorts by position, then order
    order = xp.argsort(keys)
    ranked = pos[order]
    rank = xp.empty(n, dtype=np.int64)
    rank[order] = xp.arange(n, dtype=np.int64) - xp.searchsorted(ranked, ranked, side="left")
    padded = xp.concatenate([flat, flat[:1]])
    discard = flat.size
    for r in range(int(rank.max()) + 1):
        at = xp.where(rank == r, pos, discard)
        padded[at] = combine(padded[at], vals)
    return padded[:discard]


def _scatter_add_flat(xp, cx, flat, pos, vals):
    if flat.dtype in _ATOMIC_ADD_DTYPES:
        cx.scatter_add(flat, pos, vals)
        return flat
    return _rounds(xp, flat, pos, vals, xp.add)


def _scatter_extremal_flat(xp, cx, flat, pos, vals, kind):
    """``kind``: "maximum" or "minimum"."""
    if flat.dtype not in _ATOMIC_EXTREMAL_DTYPES:
        return _rounds(xp, flat, pos, vals, getattr(xp, kind))
    atomic = cx.scatter_max if kind == "maximum" else cx.scatter_min
    if _dtypes.kind(flat.dtype) != "f":
        atomic(flat, pos, vals)
        return flat
    # NaN propagates (numpy.maximum.at), whatever the atomics make of it: they see no NaN.
    nan_in = xp.isnan(flat)
    nan_vals = xp.isnan(vals)
    neutral = -np.inf if kind == "maximum" else np.inf
    flat = xp.where(nan_in, neutral, flat).astype(flat.dtype, copy=False)
    atomic(flat, pos, xp.where(nan_vals, neutral, vals).astype(flat.dtype, copy=False))
    hit = xp.zeros(flat.size, dtype=np.int32)
    cx.scatter_max(hit, pos, nan_vals.astype(np.int32))
    return xp.where(nan_in | (hit > 0), np.nan, flat).astype(flat.dtype, copy=False)


def _scatter_set_flat(xp, cx, flat, pos, vals):
    """Each position takes its last update (numpy's order): update ids max-scattered into a board."""
    n = pos.size
    if n == 0:
        return flat
    if n > _INT32_MAX:
        return _rounds(xp, flat, pos, vals, lambda old, new: new)
    board = xp.full(flat.size, -1, dtype=np.int32)
    cx.scatter_max(board, pos, xp.arange(n, dtype=np.int32))
    return xp.where(board >= 0, vals[xp.maximum(board, 0)], flat)


def _is_row_index(template: tuple, arrays: tuple) -> bool:
    """``x[rows]`` / ``x[rows, :, ...]`` with one index array of rows."""
    return len(arrays) == 1 and template[0] == ("a", 0) and all(t == ("s", None, None, None) for t in template[1:])


def _scatter(name: str, kind: str) -> Callable[[Any, Any], Callable[..., Any]]:
    """The primitive ``name``; ``kind``: "set", or the ufunc that combines: "add", "multiply", "maximum",
    "minimum"."""
    def make(xp, cx):
        def impl(x, y, *arrays, template):
            dtype = _result_dtype(x, y)
            out = xp.array(x, dtype=dtype, copy=True)
            index = I.build_index(template, arrays)
            if arrays:
                _check_in_bounds(xp, out, template, arrays, name)
            vals = _updates(xp, y, dtype, I._target_shape(tuple(x.shape), template, arrays))
            if not arrays:   # basic indices never repeat
                out[index] = vals if kind == "set" else getattr(xp, kind)(out[index], vals)
                return out
            if kind == "add" and dtype in _ATOMIC_ADD_DTYPES and _is_row_index(template, arrays):
                cx.scatter_add(out, index, vals)   # x[rows] += y (embedding gradients): no position board
                return out
            flat = out.reshape(-1)
            pos = _positions(xp, out.shape, index).reshape(-1)
            vals = xp.ascontiguousarray(vals).reshape(-1)
            if kind == "add":
                flat = _scatter_add_flat(xp, cx, flat, pos, vals)
            elif kind == "set":
                flat = _scatter_set_flat(xp, cx, flat, pos, vals)
            elif kind == "multiply":
                flat = _rounds(xp, flat, pos, vals, xp.multiply)
            else:
                flat = _scatter_extremal_flat(xp, cx, flat, pos, vals, kind)
            return flat.reshape(out.shape)
        return impl
    return make


_SCATTERS = ((I.scatter_add_p, "add"), (I.scatter_set_p, "set"), (I.scatter_mul_p, "multiply"),
             (I.scatter_max_p, "maximum"), (I.scatter_min_p, "minimum"))
for _prim, _kind in _SCATTERS:
    _with_cupyx(_prim)(_scatter(_prim.name, _kind))
del _prim, _kind


# ---------------------------------------------------------------- sorting and bits


@_simple(RB.argsort_p)
def _argsort(xp):
    def impl(x, axis):
        if x.dtype == _dtypes.bfloat16:   # (CuPy's sort has no bfloat16; float32 holds every value, in order)
            x = x.astype(np.float32)
        return xp.argsort(x, axis=axis, kind="stable")   # (CuPy's argsort is always stable; NaN sorts last)
    return impl


@_simple(EM.population_count_p)
def _population_count(xp):
    def impl(x):
        x = xp.asarray(x)
        if x.dtype.kind == "b":
            x = x.astype(np.uint8)
        elif x.dtype.kind == "i":   # the two's complement bits: -1 has all bits set
            # (ascontiguousarray makes a 0-d array 1-d, as numpy's does: reshape back)
            x = xp.ascontiguousarray(x).view(np.dtype(f"u{x.dtype.itemsize}")).reshape(x.shape)
        return xp.bitwise_count(x).astype(np.uint8)
    return impl


def _frexp(xp: Any, x: Any) -> tuple[Any, Any]:
    # float16 and bfloat16 through float32: the same value, so the same exponent and an exact mantissa.
    if x.dtype in (np.dtype(np.float16), _dtypes.bfloat16):
        m, e = xp.frexp(x.astype(np.float32))
        return m.astype(x.dtype), e
    return xp.frexp(x)


_simple(EM.frexp_mantissa_p)(lambda xp: lambda x: _frexp(xp, xp.asarray(x))[0])
_simple(EM.frexp_exponent_p)(lambda xp: lambda x: _frexp(xp, xp.asarray(x))[1].astype(np.int32))


# ---------------------------------------------------------------- convolution (im2col + cuBLAS)


def _pad_hw(xp: Any, x: Any, padding: tuple, value: float = 0) -> Any:
    if not any(padding):
        return xp.ascontiguousarray(x)
    widths = ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2)
    return xp.pad(x, widths, mode="constant", constant_values=value)


def _windows(xp: Any, xpad: Any, kernel: tuple, stride: tuple, dilation: tuple, out_hw: tuple) -> Any:
    """The (N, C, KH, KW, OH, OW) strided view of a padded (N, C, H, W) input: no copy."""
    xpad = xp.ascontiguousarray(xpad)
    n, c = xpad.shape[:2]
    s_n, s_c, s_h, s_w = xpad.strides
    return xp.lib.stride_tricks.as_strided(
        xpad, shape=(n, c, kernel[0], kernel[1], out_hw[0], out_hw[1]),
        strides=(s_n, s_c, dilation[0] * s_h, dilation[1] * s_w, stride[0] * s_h, stride[1] * s_w))


def _columns(xp, x, kernel, stride, padding, dilation, groups, out_hw):
    """im2col: (groups, C/groups * KH * KW, N * OH * OW), one copy of the windows."""
    n, c = x.shape[:2]
    win = _windows(xp, _pad_hw(xp, x, padding), kernel, stride, dilation, out_hw)
    cols = xp.ascontiguousarray(win.transpose(1, 2, 3, 0, 4, 5))
    return cols.reshape(groups, (c // groups) * kernel[0] * kernel[1], n * out_hw[0] * out_hw[1])


def _rows_by_group(xp, dy, groups):
    """dy (N, O, OH, OW) -> (groups, O/groups, N * OH * OW)."""
    n, o, oh, ow = dy.shape
    g = dy.reshape(n, groups, o // groups, oh * ow).transpose(1, 2, 0, 3)
    return xp.ascontiguousarray(g).reshape(groups, o // groups, n * oh * ow)


def _mm(xp, a, b):
    """``a @ b``; bfloat16 operands in float32 (a float32 result: the callers round once, at the end)."""
    if _dtypes.bfloat16 in (a.dtype, b.dtype):
        a, b = a.astype(np.float32), b.astype(np.float32)
    return xp.matmul(a, b)


@_simple(C.conv2d_p)
def _conv2d(xp):
    def impl(x, w, stride, padding, dilation, groups):
        n, o, oh, ow = C._conv_geometry("conv2d", x.shape, w.shape, stride, padding, dilation, groups)
        cols = _columns(xp, x, w.shape[2:], stride, padding, dilation, groups, (oh, ow))
        y = _mm(xp, w.reshape(groups, o // groups, -1), cols)           # (G, O/G, N*OH*OW)
        y = y.reshape(groups, o // groups, n, oh, ow).transpose(2, 0, 1, 3, 4).reshape(n, o, oh, ow)
        return xp.ascontiguousarray(y).astype(x.dtype, copy=False)
    return impl


@_simple(C.conv2d_input_grad_p)
def _conv2d_input_grad(xp):
    def impl(dy, w, in_hw, stride, padding, dilation, groups):
        n, c, h, wd = C._conv_input_grad_check(dy, w, in_hw, stride, padding, dilation, groups)
        o, cg, kh, kw = w.shape
        oh, ow = dy.shape[2:]
        wg = w.reshape(groups, o // groups, cg * kh * kw).transpose(0, 2, 1)
        # (bfloat16: the columns and their overlapping sums in float32, rounded once at the end)
        acc = np.dtype(np.float32) if dy.dtype == _dtypes.bfloat16 else dy.dtype
        dcols = _mm(xp, wg, _rows_by_group(xp, dy, groups)).astype(acc, copy=False)
        dcols = dcols.reshape(groups, cg, kh, kw, n, oh, ow)
        dxp = xp.zeros((n, c, h + 2 * padding[0], wd + 2 * padding[1]), dtype=acc)
        for i in range(kh):   # col2im: add each kernel offset's columns back
            for j in range(kw):
                part = dcols[:, :, i, j].transpose(2, 0, 1, 3, 4).reshape(n, c, oh, ow)
                dxp[:, :, C._patch_slices(i, dilation[0], stride[0], oh),
                    C._patch_slices(j, dilation[1], stride[1], ow)] += part
        return dxp[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + wd].astype(dy.dtype, copy=False)
    return impl


@_simple(C.conv2d_weight_grad_p)
def _conv2d_weight_grad(xp):
    def impl(dy, x, kernel_hw, stride, padding, dilation, groups):
        o, cg, kh, kw = C._conv_weight_grad_check(dy, x, kernel_hw, stride, padding, dilation, groups)
        cols = _columns(xp, x, (kh, kw), stride, padding, dilation, groups, dy.shape[2:])
        dw = _mm(xp, _rows_by_group(xp, dy, groups), cols.transpose(0, 2, 1))   # (G, O/G, C/G*KH*KW)
        return dw.reshape(o, cg, kh, kw).astype(x.dtype, copy=False)
    return impl


# ---------------------------------------------------------------- pooling


def _in_bounds_taps(h: int, w: int, kernel: tuple, stride: tuple, padding: tuple, out_hw: tuple) -> np.ndarray:
    """bool (KH*KW, OH, OW): which window taps fall inside the unpadded input (host; geometry only)."""
    i = np.arange(kernel[0])[:, None, None, None]
    j = np.arange(kernel[1])[None, :, None, None]
    rows = np.arange(out_hw[0])[None, None, :, None] * stride[0] - padding[0] + i
    cols = np.arange(out_hw[1])[None, None, None, :] * stride[1] - padding[1] + j
    inside = (rows >= 0) & (rows < h) & (cols >= 0) & (cols < w)
    return inside.reshape(kernel[0] * kernel[1], out_hw[0], out_hw[1])


@_simple(C.max_pool2d_p)
def _max_pool2d(xp):
    def impl(x, kernel, stride, padding):
        n, c, oh, ow = C._pool_out_shape("max_pool2d", x.shape, kernel, stride, padding)
        h, w = x.shape[2:]
        k = kernel[0] * kernel[1]
        taps = _windows(xp, _pad_hw(xp, x, padding, -np.inf), kernel, stride, (1, 1), (oh, ow))
        taps = taps.reshape(n, c, k, oh, ow)
        nan = xp.isnan(taps)
        top = xp.max(xp.where(nan, -np.inf, taps), axis=2, keepdims=True)
        # The first NaN if there is one, else the first maximum; never a padded tap.
        hit = xp.where(nan.any(axis=2, keepdims=True), nan, taps == top)
        if any(padding):
            hit &= xp.asarray(_in_bounds_taps(h, w, kernel, stride, padding, (oh, ow)))
        arg = xp.argmax(hit.astype(np.int8), axis=2)
        y = xp.take_along_axis(taps, arg[:, :, None], axis=2)[:, :, 0]
        i, j = arg // kernel[1], arg % kernel[1]
        rows = xp.arange(oh).reshape(oh, 1) * stride[0] - padding[0] + i
        cols = xp.arange(ow).reshape(1, ow) * stride[1] - padding[1] + j
        return [y.astype(x.dtype, copy=False), (rows * w + cols).astype(np.int64)]
    return impl


@_with_cupyx(C.max_pool2d_grad_p)
def _max_pool2d_grad(xp, cx):
    def impl(dy, indices, in_hw):
        x_shape = C._max_pool_grad_check(dy, indices, in_hw)
        n, c = x_shape[:2]
        plane = int(in_hw[0]) * int(in_hw[1])
        if config.checked_indexing and indices.size and bool(((indices < 0) | (indices >= plane)).any()):
            raise ValueError(f"max_pool2d_grad: indices out of range [0, {plane}) for x_shape {x_shape}")
        planes = (xp.arange(n * c, dtype=np.int64) * plane).reshape(n * c, 1)
        pos = (indices.reshape(n * c, -1).astype(np.int64) + planes).reshape(-1)
        dx = xp.zeros(n * c * plane, dtype=dy.dtype)
        dx = _scatter_add_flat(xp, cx, dx, pos, xp.ascontiguousarray(dy).reshape(-1))
        return dx.reshape(x_shape)
    return impl


@_simple(C.avg_pool2d_p)
def _avg_pool2d(xp):
    def impl(x, kernel, stride, padding):
        _, _, oh, ow = C._pool_out_shape("avg_pool2d", x.shape, kernel, stride, padding)
        taps = _windows(xp, _pad_hw(xp, x, padding), kernel, stride, (1, 1), (oh, ow))
        # float16 and bfloat16 accumulate in float32 (numpy's mean does, on the CPU); integers average in float64.
        if x.dtype in (np.dtype(np.float16), _dtypes.bfloat16):
            acc = np.float32
        else:
            acc = x.dtype if _dtypes.kind(x.dtype) == "f" else np.float64
        total = xp.sum(taps, axis=(2, 3), dtype=acc)
        return (total / (kernel[0] * kernel[1])).astype(x.dtype, copy=False)
    return impl


@_simple(C.avg_pool2d_grad_p)
def _avg_pool2d_grad(xp):
    def impl(dy, in_hw, kernel, stride, padding):
        n, c, h, w = C._avg_pool_grad_check(dy, in_hw, kernel, stride, padding)
        oh, ow = dy.shape[2:]
        share = dy / (kernel[0] * kernel[1])
        dxp = xp.zeros((n, c, h + 2 * padding[0], w + 2 * padding[1]), dtype=dy.dtype)
        for i in range(kernel[0]):
            for j in range(kernel[1]):
                dxp[:, :, C._patch_slices(i, 1, stride[0], oh), C._patch_slices(j, 1, stride[1], ow)] += share
        return dxp[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + w]
    return impl
