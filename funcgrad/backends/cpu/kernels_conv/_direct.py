"""Direct convolution, for few taps per output (C/groups * KH * KW small, as a first layer on 1-3
channels or a depthwise layer): im2col would copy the input KH*KW times for a GEMM too thin to pay
for it.

Each sample's input is copied once into a zero-padded plane per channel; an output plane is then a
sum of shifted, scaled padded planes. With stride 1 a tap is ONE contiguous loop over the flat
padded plane: the accumulator keeps the padded row length, its last (KW-1)*DW columns of each row
are scratch and never read out (the gradients read them as zeros). The kernels are parallel over
samples (the weight gradient over fixed sample ranges, so its result does not depend on the thread
count).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange

from funcgrad.backends.cpu import _threads  # noqa: F401 -- first: selects numba's threading layer
from funcgrad.backends.cpu.kernels_conv._common import _JIT


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

