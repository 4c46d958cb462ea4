"""The GEMM path of convolution: im2col and col2im kernels, their workspace, and the worker pool.

The batch is split into one contiguous range of samples per worker
(``_threads.get_num_threads()`` Python threads); each worker walks its range
in chunks: a serial numba kernel (GIL released) unfolds a chunk into the
worker's reused workspace ``cols`` of shape (B, C*KH*KW, OH*OW), then
numpy's matmul multiplies it by the weights per group with BLAS held to ONE
thread (threadpoolctl) for the duration of the call. ``dx`` = col2im(W^T @ dy);
``dw`` = sum over samples of dy @ cols^T, summed per worker and then over
workers in order.

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
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from funcgrad.backends.cpu import _threads  # first: selects numba's threading layer
from funcgrad.backends.cpu.kernels_conv._common import _SERIAL

try:  # optional: holds BLAS to one thread while our workers run
    from threadpoolctl import ThreadpoolController
except ImportError:  # pragma: no cover - then BLAS keeps its own threads
    ThreadpoolController = None


# ---------------------------------------------------------------------------
# im2col and col2im
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

