"""2-D convolution and pooling on the CPU (NCHW activations, OIHW weights).

Convolution is im2col + BLAS. The batch is split into one contiguous
range of samples per worker (``_threads.get_num_threads()`` Python threads);
each worker walks its range in chunks: a serial numba kernel (GIL
released) unfolds a chunk into the worker's reused workspace ``cols`` of
shape (B, C*KH*KW, OH*OW), then numpy's matmul multiplies it by the
weights per group with BLAS held to ONE thread (threadpoolctl) for the
duration of the call. ``dx`` = col2im(W^T @ dy); ``dw`` = sum over samples
of dy @ cols^T, summed per worker and then over workers in order.

Why not multi-threaded BLAS on bigger chunks: on the shared 2-core
machines another process often holds a core, and OpenBLAS's threads then
stall each other at every call. Measured on the 32->64 3x3 layer (batch
128, forward, contended machine, medians of 7): one chunked loop with
2-thread BLAS 430 ms wall / 512 ms CPU; two workers with 1-thread BLAS
217-240 ms wall / 136-141 ms CPU. Chunking keeps the workspace ~1 MiB per
worker (a whole-batch im2col would be 115 MB of fresh memory per call),
and the per-thread workspace is reused across calls (warm pages). im2col
and col2im go through a zero-padded copy of each sample, so that every row
they move is a plain contiguous copy (3x faster than bounds-checked rows).

Convolutions with few taps per output (C/groups * KH * KW <= 9: a first
layer on one channel, a depthwise layer) skip im2col: direct numba kernels,
parallel over samples, sum shifted copies of each zero-padded input plane
(``path_counts`` counts which path each call took).

Pooling kernels are direct loops, parallel over (sample, channel) planes:
a plane is owned by one thread, so the backward scatters need no atomics
and are deterministic. 2x2 max-pooling at stride 2 has its own branch-free
kernel; the indices come in the dtype the caller asks for (int32 unless
x64), so nothing converts them. Every kernel can write into a given
``out`` buffer (a compiled program's planned one).

Example::

    x = np.random.rand(128, 1, 28, 28).astype(np.float32)
    w = np.random.rand(32, 1, 3, 3).astype(np.float32)
    y = conv2d_forward(x, w, stride=1, padding=1)          # (128, 32, 28, 28)
    dx = conv2d_backward_input(np.ones_like(y), w, x.shape, padding=1)
    dw = conv2d_backward_weight(np.ones_like(y), x, w.shape, padding=1)
    p, idx = max_pool2d_forward(y, kernel=2)               # (128, 32, 14, 14)
    dy = max_pool2d_backward(np.ones_like(p), idx, y.shape)
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from numba import prange

from . import _threads  # first: selects numba's threading layer

try:  # optional: holds BLAS to one thread while our workers run
    from threadpoolctl import ThreadpoolController
except ImportError:  # pragma: no cover - then BLAS keeps its own threads
    ThreadpoolController = None

__all__ = ["conv2d_forward", "conv2d_backward_input", "conv2d_backward_weight",
           "max_pool2d_forward", "max_pool2d_backward",
           "avg_pool2d_forward", "avg_pool2d_backward"]

_JIT = dict(parallel=True, cache=True, nogil=True, error_model="numpy")
_SERIAL = dict(cache=True, nogil=True, error_model="numpy")

# Direct convolution (below) when C/groups * KH * KW is at most this.
_DIRECT_MAX_TAPS = 9
# The weight gradient's direct kernel sums this many sample ranges apart (fixed:
# the result does not depend on the thread count).
_DIRECT_PARTS = 8

# Which path each convolution call took ({"direct forward": calls, ...}).
path_counts: Counter = Counter()

# Target size of one worker's im2col workspace. Forward 32->64 layer,
# 2 workers, contended machine: 1 MiB 240 ms, 4 MiB 217 ms (median), within
# noise; 1 MiB keeps it inside L2 on quiet machines.
_CHUNK_BYTES = 1 << 20


# ---------------------------------------------------------------------------
# numba kernels
# ---------------------------------------------------------------------------

@numba.njit(inline="always", cache=True)
def _pad_into(x, b, xp, ph, pw):
    """xp[c] (flat (H+2ph)*(W+2pw), borders zero) <- x[b, c]."""
    nc, h, w = x.shape[1], x.shape[2], x.shape[3]
    wp = w + 2 * pw
    for c in range(nc):
        for r in range(h):
            d = xp[c, (r + ph) * wp + pw:]
            s = x[b, c, r]
            for t in range(w):
                d[t] = s[t]


@numba.njit(**_SERIAL)
def _im2col(x, cols, n0, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow):
    """cols[b, (c*kh + i)*kw + j, p*ow + q] = x[n0 + b, c, p*sh + i*dh - ph,
    q*sw + j*dw - pw], 0 where that is padding.

    x: (N, C, H, W); cols: (B, C*kh*kw, oh*ow). Serial: the workers
    calling it are the parallelism. Each sample is first copied
    into a zero-padded buffer, so that every output row is a plain copy
    (loops indexed by their own counters: they vectorise).
    """
    nb = cols.shape[0]
    nc, h, w = x.shape[1], x.shape[2], x.shape[3]
    wp = w + 2 * pw
    xp = np.zeros((nc, (h + 2 * ph) * wp), x.dtype)
    for b in range(nb):
        _pad_into(x, n0 + b, xp, ph, pw)
        for c in range(nc):
            src = xp[c]
            for i in range(kh):
                for j in range(kw):
                    row = cols[b, (c * kh + i) * kw + j]
                    for p in range(oh):
                        s = src[(p * sh + i * dh) * wp + j * dw:]
                        d = row[p * ow:(p + 1) * ow]
                        if sw == 1:
                            for q in range(ow):
                                d[q] = s[q]
                        else:
                            for q in range(ow):
                                d[q] = s[q * sw]


@numba.njit(**_SERIAL)
def _col2im(cols, dx, n0, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow):
    """Adjoint of _im2col: dx[n0 + b, c] = sum of the cols entries that
    _im2col read from each pixel (overwrites dx[n0:n0+B]), accumulated in a
    zero-padded buffer whose interior is then copied out.

    Workers own disjoint sample ranges: no races, deterministic.
    """
    nb = cols.shape[0]
    nc, h, w = dx.shape[1], dx.shape[2], dx.shape[3]
    wp = w + 2 * pw
    dxp = np.empty((nc, (h + 2 * ph) * wp), dx.dtype)
    for b in range(nb):
        dxp[:] = 0
        for c in range(nc):
            dst = dxp[c]
            for i in range(kh):
                for j in range(kw):
                    row = cols[b, (c * kh + i) * kw + j]
                    for p in range(oh):
                        d = dst[(p * sh + i * dh) * wp + j * dw:]
                        s = row[p * ow:(p + 1) * ow]
                        if sw == 1:
                            for q in range(ow):
                                d[q] += s[q]
                        else:
                            for q in range(ow):
                                d[q * sw] += s[q]
        for c in range(nc):
            for r in range(h):
                s = dxp[c, (r + ph) * wp + pw:]
                d = dx[n0 + b, c, r]
                for t in range(w):
                    d[t] = s[t]


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
# Direct convolution, for few taps per output (C/groups * KH * KW small, as
# a first layer on 1-3 channels or a depthwise layer): im2col would copy the
# input KH*KW times for a GEMM too thin to pay for it. Each sample's input
# is copied once into a zero-padded plane per channel; an output plane is
# then a sum of shifted, scaled padded planes. With stride 1 a tap is ONE
# contiguous loop over the flat padded plane: the accumulator keeps the
# padded row length, its last (KW-1)*DW columns of each row are scratch and
# never read out (the gradients read them as zeros).
# ---------------------------------------------------------------------------

@numba.njit(inline="always", cache=True)
def _pad_sample(x, b, xp, ph, pw):
    """xp[c] (flat (H+2ph)*(W+2pw), borders already zero) <- x[b, c];
    returns whether every value is finite."""
    nc, h, w = x.shape[1], x.shape[2], x.shape[3]
    wp = w + 2 * pw
    finite = True
    for c in range(nc):
        for r in range(h):
            row = (r + ph) * wp + pw
            for q in range(w):
                v = x[b, c, r, q]
                xp[c, row + q] = v
                if not math.isfinite(v):
                    finite = False
    return finite


@numba.njit(inline="always", cache=True)
def _out_rows(sh, sw, ow, wp):
    """Row length of the accumulator: the padded row at stride 1, else OW."""
    return wp if sh == 1 and sw == 1 else ow


@numba.njit(**_JIT)
def _direct_fwd(x, w, y, sh, sw, ph, pw, dh, dw):
    """y = conv(x, w), one sample per task."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh, ow = y.shape[2], y.shape[3]
    og = o // (c // cg)
    wp = wd + 2 * pw
    rl = _out_rows(sh, sw, ow, wp)
    flat = (oh - 1) * rl + ow            # the accumulator's span (stride 1)
    for b in prange(n):
        xp = np.zeros((c, (h + 2 * ph) * wp), x.dtype)
        _pad_sample(x, b, xp, ph, pw)
        acc = np.empty(oh * rl, x.dtype)
        for oc in range(o):
            c0 = (oc // og) * cg
            acc[:] = 0
            for ci in range(cg):
                src = xp[c0 + ci]
                for i in range(kh):
                    for j in range(kw):
                        wv = w[oc, ci, i, j]
                        off = i * dh * wp + j * dw
                        if rl == wp:
                            # slices: the loop indexes with its own counter
                            # (known >= 0: no wraparound test, it vectorises)
                            a, v = acc[:flat], src[off:off + flat]
                            for t in range(flat):
                                a[t] += wv * v[t]
                        else:
                            for p in range(oh):
                                base = off + p * sh * wp
                                for q in range(ow):
                                    acc[p * rl + q] += wv * src[base + q * sw]
            for p in range(oh):
                for q in range(ow):
                    y[b, oc, p, q] = acc[p * rl + q]


@numba.njit(inline="always", cache=True)
def _load_plane(dy, b, oc, g, rl):
    """g (flat, rl per row) <- dy[b, oc]; the scratch columns stay zero."""
    oh, ow = dy.shape[2], dy.shape[3]
    for p in range(oh):
        for q in range(ow):
            g[p * rl + q] = dy[b, oc, p, q]


@numba.njit(**_JIT)
def _direct_bwd_input(dy, w, dx, sh, sw, ph, pw, dh, dw, rowwise):
    """dx = the adjoint of _direct_fwd applied to dy, one sample per task.
    rowwise: touch only the real output columns (w not all finite: a
    scratch zero times inf would be NaN)."""
    n, c, h, wd = dx.shape
    o, cg, kh, kw = w.shape
    oh, ow = dy.shape[2], dy.shape[3]
    og = o // (c // cg)
    wp = wd + 2 * pw
    rl = _out_rows(sh, sw, ow, wp)
    flat = (oh - 1) * rl + ow
    for b in prange(n):
        dxp = np.zeros((c, (h + 2 * ph) * wp), dx.dtype)
        g = np.zeros(oh * rl, dx.dtype)
        for oc in range(o):
            c0 = (oc // og) * cg
            _load_plane(dy, b, oc, g, rl)
            for ci in range(cg):
                dst = dxp[c0 + ci]
                for i in range(kh):
                    for j in range(kw):
                        wv = w[oc, ci, i, j]
                        off = i * dh * wp + j * dw
                        if rl == wp and not rowwise:
                            d = dst[off:off + flat]
                            for t in range(flat):
                                d[t] += wv * g[t]
                        else:
                            for p in range(oh):
                                base = off + p * sh * wp
                                for q in range(ow):
                                    dst[base + q * sw] += wv * g[p * rl + q]
        for ci in range(c):
            for r in range(h):
                row = (r + ph) * wp + pw
                for q in range(wd):
                    dx[b, ci, r, q] = dxp[ci, row + q]


@numba.njit(**_JIT, fastmath={"reassoc", "contract"})
def _direct_bwd_weight(dy, x, parts, sh, sw, ph, pw, dh, dw):
    """parts[k] = dw summed over the k-th of len(parts) sample ranges
    (float64 accumulators; the caller sums the parts in order, so the result
    does not depend on the thread count)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = parts.shape[1], parts.shape[2], parts.shape[3], parts.shape[4]
    oh, ow = dy.shape[2], dy.shape[3]
    og = o // (c // cg)
    wp = wd + 2 * pw
    rl = _out_rows(sh, sw, ow, wp)
    flat = (oh - 1) * rl + ow
    nparts = parts.shape[0]
    for k in prange(nparts):
        xp = np.zeros((c, (h + 2 * ph) * wp), x.dtype)
        g = np.zeros(oh * rl, x.dtype)
        acc = parts[k]
        for b in range(n * k // nparts, n * (k + 1) // nparts):
            # non-finite x: the scratch zeros of g would meet it (0 * inf)
            rowwise = not _pad_sample(x, b, xp, ph, pw)
            for oc in range(o):
                c0 = (oc // og) * cg
                _load_plane(dy, b, oc, g, rl)
                for ci in range(cg):
                    src = xp[c0 + ci]
                    for i in range(kh):
                        for j in range(kw):
                            off = i * dh * wp + j * dw
                            s = x.dtype.type(0)
                            if rl == wp and not rowwise:
                                v = src[off:off + flat]
                                for t in range(flat):
                                    s += g[t] * v[t]
                            else:
                                for p in range(oh):
                                    base = off + p * sh * wp
                                    for q in range(ow):
                                        s += g[p * rl + q] * src[base + q * sw]
                            acc[oc, ci, i, j] += s


# ---------------------------------------------------------------------------
# Geometry (arguments are trusted: the conv2d and pooling primitives in
# funcgrad.primitives.conv validate them, once, before any kernel runs)
# ---------------------------------------------------------------------------

def _two(v) -> tuple[int, int]:
    """An int or an (h, w) pair as (int, int)."""
    return (int(v), int(v)) if isinstance(v, (int, np.integer)) else (int(v[0]), int(v[1]))


def _out_len(in_len, k, stride, pad, dil):
    return (in_len + 2 * pad - dil * (k - 1) - 1) // stride + 1


class _ConvGeometry:
    """A conv2d's sizes: shapes, stride/padding/dilation pairs, output size."""

    def __init__(self, x_shape, w_shape, stride, padding, dilation, groups):
        n, c, h, w = x_shape
        o, cg, kh, kw = w_shape
        self.sh, self.sw = _two(stride)
        self.ph, self.pw = _two(padding)
        self.dh, self.dw = _two(dilation)
        self.oh = _out_len(h, kh, self.sh, self.ph, self.dh)
        self.ow = _out_len(w, kw, self.sw, self.pw, self.dw)
        self.n, self.c, self.h, self.w = n, c, h, w
        self.o, self.cg, self.kh, self.kw = o, cg, kh, kw
        self.groups = int(groups)
        self.og = o // self.groups
        self.y_shape = (n, o, self.oh, self.ow)

    def kernel_args(self):
        return (self.kh, self.kw, self.sh, self.sw, self.ph, self.pw,
                self.dh, self.dw, self.oh, self.ow)

    def chunk(self, itemsize) -> int:
        """Samples per im2col chunk: ~_CHUNK_BYTES of workspace."""
        per_sample = self.c * self.kh * self.kw * self.oh * self.ow * itemsize
        return int(max(1, min(_CHUNK_BYTES // max(per_sample, 1), self.n)))

    def cols_shape(self, b):
        return (b, self.c * self.kh * self.kw, self.oh * self.ow)

    def direct(self, direction: str) -> bool:
        """Whether the direct kernels serve this geometry (few taps per
        output); counts the path taken."""
        ok = self.cg * self.kh * self.kw <= _DIRECT_MAX_TAPS
        path_counts[("direct " if ok else "im2col ") + direction] += 1
        return ok

    def strides(self):
        return (self.sh, self.sw, self.ph, self.pw, self.dh, self.dw)


# Per-thread workspace: reused pages are ~10x cheaper to write than fresh
# ones, and a thread-local buffer keeps concurrent callers apart.
_workspace = threading.local()


def _cols_buffer(shape, dtype) -> np.ndarray:
    size = int(np.prod(shape))
    key = np.dtype(dtype).str
    bufs = getattr(_workspace, "bufs", None)
    if bufs is None:
        bufs = _workspace.bufs = {}
    buf = bufs.get(key)
    if buf is None or buf.size < size:
        buf = bufs[key] = np.empty(size, dtype)
    return buf[:size].reshape(shape)


def _output(out, shape, dtype) -> np.ndarray:
    """``out`` when it can take the result (shape, dtype, C order), else a new array."""
    if (out is not None and out.shape == tuple(shape) and out.dtype == dtype
            and out.flags.c_contiguous and out.flags.writeable):
        return out
    return np.empty(shape, dtype)


def _ascontig(a):
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


# ---------------------------------------------------------------------------
# Workers: one contiguous sample range per thread, BLAS on one thread
# ---------------------------------------------------------------------------

_pool: ThreadPoolExecutor | None = None
_blas_controller = None
_init_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _init_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_threads.max_threads(),
                                       thread_name_prefix="funcgrad-conv")
    return _pool


_blas_turn = threading.Lock()   # one caller at a time holds BLAS to one thread


@contextlib.contextmanager
def _blas_one_thread():
    """Context holding BLAS libraries to one thread (process-wide while it
    lasts), or a no-op without threadpoolctl.

    The limit is process-wide, so callers in different Python threads take
    turns (each already runs on all cores through the worker pool): two
    overlapping limits would each restore what they found, the last one out
    leaving numpy's matmul on one thread for good.
    """
    global _blas_controller
    if ThreadpoolController is None:
        yield
        return
    with _init_lock:
        if _blas_controller is None:
            _blas_controller = ThreadpoolController()  # scans libs once
    with _blas_turn, _blas_controller.limit(limits=1, user_api="blas"):
        yield


def _run_workers(work, n: int) -> list:
    """work(lo, hi) over [0, n) split into get_num_threads() contiguous
    ranges; returns the results in range order. Exceptions propagate."""
    t = max(1, min(_threads.get_num_threads(), n))
    bounds = [n * i // t for i in range(t + 1)]
    with _blas_one_thread():
        if t == 1:
            return [work(0, n)]
        futures = [_executor().submit(work, bounds[i], bounds[i + 1])
                   for i in range(t)]
        return [f.result() for f in futures]


# ---------------------------------------------------------------------------
# Convolution
# ---------------------------------------------------------------------------

def conv2d_forward(x: np.ndarray, w: np.ndarray, stride=1, padding=0,
                   dilation=1, groups: int = 1, out=None) -> np.ndarray:
    """Cross-correlation, as torch.nn.functional.conv2d (no bias).

    x: (N, C, H, W) float32/float64; w: (O, C/groups, KH, KW), same dtype;
    stride, padding, dilation: int or (h, w) pair. Returns a new
    (N, O, OH, OW) array with OH = (H + 2*ph - dh*(KH-1) - 1)//sh + 1.
    Arguments are not checked (see the geometry section above). ``out``: an
    array to write the result into, used when it suits (as in the others).
    """
    g = _ConvGeometry(x.shape, w.shape, stride, padding, dilation, groups)
    x, w = _ascontig(x), _ascontig(w)
    y = _output(out, g.y_shape, x.dtype)
    if y.size == 0:
        return y
    k = g.cg * g.kh * g.kw
    w2 = w.reshape(g.groups, g.og, k)
    if g.direct("forward"):
        _threads.prepare()
        _threads.guard(_direct_fwd)(x, w, y, *g.strides())
        return y
    y3 = y.reshape(g.n, g.o, g.oh * g.ow)
    step = g.chunk(x.itemsize)

    def work(lo, hi):
        for n0 in range(lo, hi, step):
            b = min(step, hi - n0)
            cols = _cols_buffer(g.cols_shape(b), x.dtype)
            _im2col(x, cols, n0, *g.kernel_args())
            for gi in range(g.groups):
                np.matmul(w2[gi], cols[:, gi * k:(gi + 1) * k],
                          out=y3[n0:n0 + b, gi * g.og:(gi + 1) * g.og])

    _run_workers(work, g.n)
    return y


def conv2d_backward_input(dy: np.ndarray, w: np.ndarray, x_shape, stride=1,
                          padding=0, dilation=1,
                          groups: int = 1, out=None) -> np.ndarray:
    """Gradient of conv2d_forward with respect to x.

    dy: (N, O, OH, OW); w: (O, C/groups, KH, KW); x_shape: (N, C, H, W).
    Returns dx: (N, C, H, W), dy's dtype. Arguments are not checked.
    """
    x_shape = tuple(int(s) for s in x_shape)
    g = _ConvGeometry(x_shape, w.shape, stride, padding, dilation, groups)
    dy, w = _ascontig(dy), _ascontig(w)
    dx = _output(out, x_shape, w.dtype)
    if dx.size == 0:
        return dx
    if g.direct("input grad"):
        _threads.prepare()
        _threads.guard(_direct_bwd_input)(dy, w, dx, *g.strides(),
                                          not np.isfinite(w).all())
        return dx
    k = g.cg * g.kh * g.kw
    # W^T per group: (k, og); matmul sees a transposed view and tells BLAS.
    wt = w.reshape(g.groups, g.og, k).transpose(0, 2, 1)
    dy3 = dy.reshape(g.n, g.o, g.oh * g.ow)
    step = g.chunk(w.itemsize)

    def work(lo, hi):
        for n0 in range(lo, hi, step):
            b = min(step, hi - n0)
            cols = _cols_buffer(g.cols_shape(b), w.dtype)
            for gi in range(g.groups):
                np.matmul(wt[gi], dy3[n0:n0 + b, gi * g.og:(gi + 1) * g.og],
                          out=cols[:, gi * k:(gi + 1) * k])
            _col2im(cols, dx, n0, *g.kernel_args())

    _run_workers(work, g.n)
    return dx


def conv2d_backward_weight(dy: np.ndarray, x: np.ndarray, w_shape, stride=1,
                           padding=0, dilation=1,
                           groups: int = 1) -> np.ndarray:
    """Gradient of conv2d_forward with respect to w.

    dy: (N, O, OH, OW); x: (N, C, H, W); w_shape: (O, C/groups, KH, KW).
    Returns dw: (O, C/groups, KH, KW), x's dtype. Arguments are not checked.
    """
    w_shape = tuple(int(s) for s in w_shape)
    g = _ConvGeometry(x.shape, w_shape, stride, padding, dilation, groups)
    dy, x = _ascontig(dy), _ascontig(x)
    dw = np.zeros(w_shape, x.dtype)
    if dw.size == 0 or dy.size == 0:
        return dw
    if g.direct("weight grad"):
        parts = np.zeros((min(g.n, _DIRECT_PARTS),) + w_shape, np.float64)
        _threads.prepare()
        _threads.guard(_direct_bwd_weight)(dy, x, parts, *g.strides())
        return parts.sum(axis=0).astype(x.dtype)
    k = g.cg * g.kh * g.kw
    dy3 = dy.reshape(g.n, g.o, g.oh * g.ow)
    step = g.chunk(x.itemsize)

    def work(lo, hi):
        """This worker's share: sum over its samples, (groups, og, k)."""
        acc = np.zeros((g.groups, g.og, k), x.dtype)
        part = np.empty((step, g.og, k), x.dtype)
        for n0 in range(lo, hi, step):
            b = min(step, hi - n0)
            cols = _cols_buffer(g.cols_shape(b), x.dtype)
            _im2col(x, cols, n0, *g.kernel_args())
            for gi in range(g.groups):
                # per-sample (og, p) @ (p, k), then summed over the chunk
                np.matmul(dy3[n0:n0 + b, gi * g.og:(gi + 1) * g.og],
                          cols[:, gi * k:(gi + 1) * k].transpose(0, 2, 1),
                          out=part[:b])
                acc[gi] += part[:b].sum(axis=0)
        return acc

    for acc in _run_workers(work, g.n):  # fixed order: deterministic
        dw += acc.reshape(w_shape)
    return dw


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
