"""float64 numpy references shared by the nn tests."""
from __future__ import annotations

import numpy as np



def np_logsumexp(x, axis=-1, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def np_softmax(x, axis=-1):
    return np.exp(x - np_logsumexp(x, axis, keepdims=True))


def np_log_softmax(x, axis=-1):
    return x - np_logsumexp(x, axis, keepdims=True)


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_conv(x, w, stride, padding, dilation, groups):
    """Direct loops: y[n, o, p, q] = sum_{c, i, j} x[n, g*Cg + c, p*s + i*d - pad, ...] w[o, c, i, j]."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    og = o // groups
    y = np.zeros((n, o, oh, ow))
    for oc in range(o):
        g = oc // og
        for p in range(oh):
            for q in range(ow):
                window = xp[:, g * cg:(g + 1) * cg, p * sh:p * sh + dh * (kh - 1) + 1:dh,
                            q * sw:q * sw + dw * (kw - 1) + 1:dw]
                y[:, oc, p, q] = np.sum(window * w[oc], axis=(1, 2, 3))
    return y


def np_pool(x, kernel, stride, padding, reduce, fill):
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    y = np.zeros((n, c, oh, ow))
    for p in range(oh):
        for q in range(ow):
            y[:, :, p, q] = reduce(xp[:, :, p * sh:p * sh + kh, q * sw:q * sw + kw], axis=(2, 3))
    return y




def distinct(rng, shape):
    """Values without ties: a permutation, so no pooling window has a tied maximum (smooth max derivative)."""
    return (rng.permutation(int(np.prod(shape))).reshape(shape) / 7.0).astype(np.float64)
