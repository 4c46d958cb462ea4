"""The convolution entry points: conv2d and its two gradients, each on the direct or the GEMM path.

Convolutions with few taps per output (C/groups * KH * KW <= 9: a first
layer on one channel, a depthwise layer) run the direct kernels
(``_direct``); the others im2col + BLAS (``_gemm``). ``path_counts``
counts which path each call took.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from funcgrad.backends.cpu import _threads
from funcgrad.backends.cpu.kernels_conv._common import _ascontig, _output, _two
from funcgrad.backends.cpu.kernels_conv._direct import _direct_bwd_input, _direct_bwd_weight, _direct_fwd
from funcgrad.backends.cpu.kernels_conv._gemm import _col2im, _cols_buffer, _im2col, _run_workers

# Direct convolution (``_direct``) when C/groups * KH * KW is at most this.
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


# ---------------------------------------------------------------------------
# Convolution
# ---------------------------------------------------------------------------

def conv2d_forward(x: np.ndarray, w: np.ndarray, stride=1, padding=0,
                   dilation=1, groups: int = 1, out=None) -> np.ndarray:
    """Cross-correlation, as torch.nn.functional.conv2d (no bias).

    x: (N, C, H, W) float32/float64; w: (O, C/groups, KH, KW), same dtype;
    stride, padding, dilation: int or (h, w) pair. Returns a new
    (N, O, OH, OW) array with OH = (H + 2*ph - dh*(KH-1) - 1)//sh + 1.
    Arguments are not checked (see ``_common``). ``out``: an
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
