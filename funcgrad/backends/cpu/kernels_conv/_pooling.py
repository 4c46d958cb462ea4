"""Max and average pooling kernels and their entry points.

Pooling kernels are direct loops, parallel over (sample, channel) planes:
a plane is owned by one thread, so the backward scatters need no atomics
and are deterministic. 2x2 max-pooling at stride 2 has its own branch-free
kernel; the indices come in the dtype the caller asks for (int32 unless
x64), so nothing converts them. Every kernel can write into a given
``out`` buffer (a compiled program's planned one).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from funcgrad.backends.cpu import _threads  # first: selects numba's threading layer
from funcgrad.backends.cpu.kernels_conv._common import _JIT, _ascontig, _output, _two


@numba.njit(**_JIT)
def _max_pool_fwd(x, y, idx, kh, kw, sh, sw, ph, pw):
    """y[n, c, p, q] = max over the window; idx = flat h*W + w of the max
    in the input plane (first one on ties; NaN wins, as in PyTorch)."""
    n, c, h, w = x.shape
    oh, ow = y.shape[2], y.shape[3]
    for nc in prange(n * c):
        a = nc // c
        b = nc - a * c
        plane = x[a, b]
        for p in range(oh):
            h0 = p * sh - ph
            for q in range(ow):
                w0 = q * sw - pw
                best = -np.inf
                best_i = -1
                for i in range(max(h0, 0), min(h0 + kh, h)):
                    for j in range(max(w0, 0), min(w0 + kw, w)):
                        v = plane[i, j]
                        if v > best or best_i < 0 or v != v:
                            best = v
                            best_i = i * w + j
                            if v != v:
                                break
                    if best != best:
                        break
                y[a, b, p, q] = best
                idx[a, b, p, q] = best_i


@numba.njit(inline="always", cache=True)
def _scan4(e0, e1, e2, e3, w):
    """Max of a 2x2 window in scan order, the first NaN winning; its offset
    in the plane (0, 1, w or w + 1)."""
    if e0 != e0:
        return e0, 0
    best, k = e0, 0
    for v, kv in ((e1, 1), (e2, w), (e3, w + 1)):
        if not v <= best:   # larger, or NaN
            best, k = v, kv
            if v != v:
                break
    return best, k


@numba.njit(**_JIT)
def _max_pool_2x2_fwd(x, y, idx):
    """_max_pool_fwd for 2x2 windows at stride 2 without padding (the
    common case), same results. Each row pair: a branch-free tournament
    (the first of equal maxima wins: row 0 before row 1, left before
    right), then the windows holding a NaN (their sum is NaN) again by
    the scan."""
    n, c, h, w = x.shape
    oh, ow = y.shape[2], y.shape[3]
    for nc in prange(n * c):
        a = nc // c
        b = nc - a * c
        for p in range(oh):
            r0 = x[a, b, 2 * p]
            r1 = x[a, b, 2 * p + 1]
            yr = y[a, b, p]
            ir = idx[a, b, p]
            k0 = 2 * p * w
            for q in range(ow):
                e0, e1 = r0[2 * q], r0[2 * q + 1]
                e2, e3 = r1[2 * q], r1[2 * q + 1]
                t = e1 > e0
                m01 = e1 if t else e0
                k01 = 1 if t else 0
                t = e3 > e2
                m23 = e3 if t else e2
                k23 = w + 1 if t else w
                t = m23 > m01
                yr[q] = m23 if t else m01
                ir[q] = k0 + 2 * q + (k23 if t else k01)
            for q in range(ow):
                e0, e1 = r0[2 * q], r0[2 * q + 1]
                e2, e3 = r1[2 * q], r1[2 * q + 1]
                s = e0 + e1 + e2 + e3
                if s != s:
                    best, k = _scan4(e0, e1, e2, e3, w)
                    yr[q] = best
                    ir[q] = k0 + 2 * q + k


@numba.njit(**_JIT)
def _max_pool_bwd(dy, idx, dx, bad):
    """dx[n, c].flat[idx[n, c, p, q]] += dy[n, c, p, q]; overwrites dx.
    An index outside its plane is skipped and flags bad[n * C + c]."""
    n, c = dx.shape[0], dx.shape[1]
    size = dx.shape[2] * dx.shape[3]
    for nc in prange(n * c):
        a = nc // c
        b = nc - a * c
        flat = dx[a, b].reshape(-1)  # contiguous plane: a view
        flat[:] = 0
        g = dy[a, b]
        k = idx[a, b]
        for p in range(g.shape[0]):
            for q in range(g.shape[1]):
                t = k[p, q]
                if t < 0 or t >= size:
                    bad[nc] = True
                else:
                    flat[t] += g[p, q]


@numba.njit(**_JIT)
def _avg_pool_fwd(x, y, kh, kw, sh, sw, ph, pw):
    """Window mean with zero padding counted (count_include_pad=True)."""
    n, c, h, w = x.shape
    oh, ow = y.shape[2], y.shape[3]
    inv = x.dtype.type(1.0 / (kh * kw))
    for nc in prange(n * c):
        a = nc // c
        b = nc - a * c
        plane = x[a, b]
        for p in range(oh):
            h0 = p * sh - ph
            for q in range(ow):
                w0 = q * sw - pw
                s = x.dtype.type(0)
                for i in range(max(h0, 0), min(h0 + kh, h)):
                    for j in range(max(w0, 0), min(w0 + kw, w)):
                        s += plane[i, j]
                y[a, b, p, q] = s * inv


@numba.njit(**_JIT)
def _avg_pool_bwd(dy, dx, kh, kw, sh, sw, ph, pw):
    """Adjoint of _avg_pool_fwd; overwrites dx. One thread per plane."""
    n, c, h, w = dx.shape
    oh, ow = dy.shape[2], dy.shape[3]
    inv = dx.dtype.type(1.0 / (kh * kw))
    for nc in prange(n * c):
        a = nc // c
        b = nc - a * c
        plane = dx[a, b]
        plane[:, :] = 0
        for p in range(oh):
            h0 = p * sh - ph
            for q in range(ow):
                w0 = q * sw - pw
                g = dy[a, b, p, q] * inv
                for i in range(max(h0, 0), min(h0 + kh, h)):
                    for j in range(max(w0, 0), min(w0 + kw, w)):
                        plane[i, j] += g



# ---------------------------------------------------------------------------
# Pooling
# ---------------------------------------------------------------------------

def _pool_geometry(x_shape, kernel, stride, padding):
    """Kernel arguments and output shape (arguments trusted, as for conv2d)."""
    kh, kw = _two(kernel)
    sh, sw = _two(kernel if stride is None else stride)
    ph, pw = _two(padding)
    n, c, h, w = x_shape
    oh = (h + 2 * ph - kh) // sh + 1
    ow = (w + 2 * pw - kw) // sw + 1
    return (kh, kw, sh, sw, ph, pw), (n, c, oh, ow)


def max_pool2d_forward(x: np.ndarray, kernel, stride=None, padding=0,
                       index_dtype=np.int64, out=None):
    """Max pooling. x: (N, C, H, W) f32/f64; kernel/stride/padding: int or
    pair (stride defaults to kernel; padding counts as -inf).

    Returns (y, indices): y (N, C, OH, OW); indices of ``index_dtype``
    (int64 or int32), same shape, the flat position h*W + w of each max in
    its input plane (PyTorch's convention), for max_pool2d_backward.
    """
    args, y_shape = _pool_geometry(x.shape, kernel, stride, padding)
    x = _ascontig(x)
    y_out, idx_out = (None, None) if out is None else out
    y = _output(y_out, y_shape, x.dtype)
    idx = _output(idx_out, y_shape, np.dtype(index_dtype))
    _threads.prepare()
    if args == (2, 2, 2, 2, 0, 0):   # kernel 2x2, stride 2, no padding
        _threads.guard(_max_pool_2x2_fwd)(x, y, idx)
    else:
        _threads.guard(_max_pool_fwd)(x, y, idx, *args)
    return y, idx


def max_pool2d_backward(dy: np.ndarray, indices: np.ndarray,
                        x_shape, out=None) -> np.ndarray:
    """dx (x_shape, dy's dtype): each dy routed to its window's argmax
    (summed where windows overlap). indices: int32 or int64. Shapes are not
    checked; index values are, by the kernel (they are data: one out of its
    plane would write out of bounds)."""
    x_shape = tuple(int(s) for s in x_shape)
    if indices.dtype not in (np.int32, np.int64):
        indices = indices.astype(np.int64)
    dx = _output(out, x_shape, dy.dtype)
    bad = np.zeros(x_shape[0] * x_shape[1], np.bool_)
    _threads.prepare()
    _threads.guard(_max_pool_bwd)(_ascontig(dy), _ascontig(indices), dx, bad)
    if bad.any():
        plane = x_shape[2] * x_shape[3]
        raise ValueError(f"max_pool2d_backward: indices out of range [0, {plane}) "
                         f"for x_shape {x_shape}")
    return dx


def avg_pool2d_forward(x: np.ndarray, kernel, stride=None,
                       padding=0, out=None) -> np.ndarray:
    """Average pooling, count_include_pad=True (PyTorch's default): every
    window divides by KH*KW. x: (N, C, H, W) f32/f64 -> (N, C, OH, OW)."""
    args, y_shape = _pool_geometry(x.shape, kernel, stride, padding)
    y = _output(out, y_shape, x.dtype)
    _threads.prepare()
    _threads.guard(_avg_pool_fwd)(_ascontig(x), y, *args)
    return y


def avg_pool2d_backward(dy: np.ndarray, x_shape, kernel, stride=None,
                        padding=0, out=None) -> np.ndarray:
    """Gradient of avg_pool2d_forward: dx of x_shape, dy's dtype."""
    x_shape = tuple(int(s) for s in x_shape)
    args, _ = _pool_geometry(x_shape, kernel, stride, padding)
    dx = _output(out, x_shape, dy.dtype)
    _threads.prepare()
    _threads.guard(_avg_pool_bwd)(_ascontig(dy), dx, *args)
    return dx
