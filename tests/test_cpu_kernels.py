"""Numerics tests for the numba CPU kernels (funcgrad/backends/cpu/kernels_*).

Every kernel is compared with a plain-numpy float64 reference written here,
for float32 and float64 inputs on small ragged shapes; results must not
depend on the thread count. The conv and pooling kernels trust their
arguments: bad ones must raise a ValueError naming the op from the
primitive, on the kernel path and on the numpy reference alike.
Kept fast (numba compiles ~40 kernels; cache=True reuses them).
"""

from __future__ import annotations

import numpy as np
import pytest

from funcgrad import lax
from funcgrad.backends.cpu import _threads
from funcgrad.backends.cpu import kernels_conv as kc
from funcgrad.backends.cpu import kernels_scatter as ksc
from funcgrad.backends.cpu import kernels_softmax as ks
from funcgrad.backends.cpu.impls import select_large
from funcgrad.primitives import conv as C
from funcgrad.primitives.elementwise import select_p

DTYPES = [np.float32, np.float64]
# float32 kernels accumulate in float32 with a ~1-ulp exp: compare loosely.
TOL = {np.float32: dict(rtol=5e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def rand(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def close(actual, expected, dtype, scale=1.0):
    """assert_allclose with the dtype's tolerance; scale: typical magnitude."""
    tol = TOL[dtype]
    np.testing.assert_allclose(actual, expected, rtol=tol["rtol"], atol=tol["atol"] * scale)


# ---------------------------------------------------------------------------
# float64 references
# ---------------------------------------------------------------------------

def ref_softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def ref_logsumexp(x):
    x = x.astype(np.float64)
    m = x.max(1)
    return m + np.log(np.exp(x - m[:, None]).sum(1))


def ref_conv(x, w, stride, pad, dil, groups):
    """Direct tap-by-tap cross-correlation in float64."""
    (sh, sw), (ph, pw), (dh, dw) = stride, pad, dil
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, o, oh, ow))
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                win = xs[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                         j * dw:j * dw + sw * (ow - 1) + 1:sw]
                y[:, g * og:(g + 1) * og] += np.einsum(
                    "ncpq,oc->nopq", win, w[g * og:(g + 1) * og, :, i, j])
    return y


def ref_conv_grads(x, w, dy, stride, pad, dil, groups):
    """(dx, dw) of ref_conv by the adjoint of each tap, float64."""
    (sh, sw), (ph, pw), (dh, dw_) = stride, pad, dil
    x, w, dy = (a.astype(np.float64) for a in (x, w, dy))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    oh, ow = dy.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(w)
    for g in range(groups):
        cs, os_ = slice(g * cg, (g + 1) * cg), slice(g * og, (g + 1) * og)
        for i in range(kh):
            for j in range(kw):
                sl = (slice(None), cs,
                      slice(i * dh, i * dh + sh * (oh - 1) + 1, sh),
                      slice(j * dw_, j * dw_ + sw * (ow - 1) + 1, sw))
                dxp[sl] += np.einsum("nopq,oc->ncpq", dy[:, os_], w[os_, :, i, j])
                dw[os_, :, i, j] = np.einsum("nopq,ncpq->oc", dy[:, os_], xp[sl])
    return dxp[:, :, ph:ph + h, pw:pw + wd], dw


def ref_pool(x, k, s, p, kind):
    """Max (with flat argmax) or mean (count_include_pad) pooling, loops."""
    n, c, h, w = x.shape
    x = x.astype(np.float64)
    oh, ow = (h + 2 * p[0] - k[0]) // s[0] + 1, (w + 2 * p[1] - k[1]) // s[1] + 1
    y = np.zeros((n, c, oh, ow))
    idx = np.zeros((n, c, oh, ow), np.int64)
    for a in range(oh):
        for b in range(ow):
            h0, w0 = a * s[0] - p[0], b * s[1] - p[1]
            hs = slice(max(h0, 0), min(h0 + k[0], h))
            ws = slice(max(w0, 0), min(w0 + k[1], w))
            win = x[:, :, hs, ws]
            if kind == "avg":
                y[:, :, a, b] = win.sum((2, 3)) / (k[0] * k[1])
                continue
            flat = win.reshape(n, c, -1)
            arg = flat.argmax(-1)
            y[:, :, a, b] = flat.max(-1)
            wwin = ws.stop - ws.start
            idx[:, :, a, b] = (hs.start + arg // wwin) * w + ws.start + arg % wwin
    return y, idx


# ---------------------------------------------------------------------------
# softmax family
# ---------------------------------------------------------------------------

SOFTMAX_SHAPES = [(1, 1), (3, 5), (17, 33), (64, 1000), (5, 4099)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SOFTMAX_SHAPES)
def test_softmax_family_forward(dtype, shape):
    rng = np.random.default_rng(sum(shape))
    x = rand(rng, shape, dtype, scale=3.0)
    ref = ref_softmax(x)
    out = np.empty_like(x)
    close(ks.softmax(x, out), ref, dtype)
    close(ks.log_softmax(x, out), np.log(ref), dtype, scale=10)
    lse = np.empty(shape[0], dtype)
    close(ks.logsumexp_rows(x, lse), ref_logsumexp(x), dtype, scale=10)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (4, 7), (33, 130)])
def test_softmax_backward_matches_jacobian(dtype, shape):
    rng = np.random.default_rng(1)
    x = rand(rng, shape, dtype, scale=2.0)
    g = rand(rng, shape, dtype)
    p = ref_softmax(x)
    # Row-wise explicit Jacobians: d softmax = diag(p) - p p^T,
    # d log_softmax = I - 1 p^T.
    jac_sm = np.einsum("ij,jk->ijk", p, np.eye(shape[1])) - p[:, :, None] * p[:, None, :]
    jac_lsm = np.eye(shape[1])[None] - p[:, None, :]
    g64 = g.astype(np.float64)
    out = np.empty_like(x)
    y = ks.softmax(x, np.empty_like(x))
    close(ks.softmax_bwd(y, g, out), np.einsum("ij,ijk->ik", g64, jac_sm), dtype)
    ly = ks.log_softmax(x, np.empty_like(x))
    close(ks.log_softmax_bwd(ly, g, out), np.einsum("ij,ijk->ik", g64, jac_lsm), dtype,
          scale=10)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (7, 3), (128, 10), (40, 1001)])
def test_softmax_xent(dtype, shape):
    n, c = shape
    rng = np.random.default_rng(c)
    x = rand(rng, shape, dtype, scale=4.0)
    labels = rng.integers(0, c, n).astype(np.int32)
    g = rand(rng, n, dtype)
    loss, lse = np.empty(n, dtype), np.empty(n, dtype)
    ks.softmax_xent_fwd(x, labels, loss, lse)
    ref_lse = ref_logsumexp(x)
    close(lse, ref_lse, dtype, scale=10)
    close(loss, ref_lse - x.astype(np.float64)[np.arange(n), labels], dtype, scale=10)
    dx = np.empty_like(x)
    ks.softmax_xent_bwd(x, labels, lse, g, dx)
    onehot = np.eye(c)[labels]
    close(dx, g.astype(np.float64)[:, None] * (ref_softmax(x) - onehot), dtype, scale=4)


def test_softmax_special_values():
    x = np.array([[0.0, -np.inf, 1.0, -np.inf],
                  [1e4, 1e4, -1e4, 0.0],
                  [-np.inf, -np.inf, -np.inf, 5.0]], np.float32)
    y = ks.softmax(x, np.empty_like(x))
    e = np.exp(np.float64(1.0))
    np.testing.assert_allclose(y[0], [1 / (1 + e), 0, e / (1 + e), 0], rtol=1e-6)
    np.testing.assert_allclose(y[1], [0.5, 0.5, 0, 0], rtol=1e-6)
    np.testing.assert_array_equal(y[2], [0, 0, 0, 1])
    ly = ks.log_softmax(x, np.empty_like(x))
    assert ly[0, 1] == -np.inf and ly[2, 3] == 0.0
    assert np.isfinite(ks.logsumexp_rows(x, np.empty(3, np.float32))).all()


def test_softmax_nan_row_stays_nan():
    x = np.array([[0.0, np.nan, 1.0], [0.0, 1.0, 2.0], [-np.inf] * 3], np.float32)
    y = ks.softmax(x, np.empty_like(x))
    assert np.isnan(y[0]).all() and np.isfinite(y[1]).all()
    assert np.isnan(y[2]).all()  # all -inf: NaN, as in PyTorch
    assert np.isnan(ks.logsumexp_rows(x, np.empty(3, np.float32))[0])


def test_softmax_empty_rows():
    x = np.empty((0, 5), np.float32)
    assert ks.softmax(x, np.empty_like(x)).shape == (0, 5)


@pytest.mark.parametrize("call, match", [
    (lambda: ks.softmax(np.ones((2, 3, 4), np.float32), np.ones((2, 3, 4), np.float32)),
     "softmax: x must be 2-D"),
    (lambda: ks.softmax(np.ones((2, 3), np.int64), np.ones((2, 3))), "float32 or float64"),
    (lambda: ks.softmax(np.ones((2, 3)), np.ones((2, 3), np.float32)),
     r"softmax: out is float32\[2, 3\], expected float64\[2, 3\]"),
    (lambda: ks.softmax(np.ones((3, 2)).T, np.ones((2, 3))), "C-contiguous"),
    (lambda: ks.softmax(np.ones((2, 0)), np.ones((2, 0))), "empty last axis"),
    (lambda: ks.softmax_xent_fwd(np.ones((3, 10)), np.array([1, 10, 2]), np.ones(3),
                                 np.ones(3)),
     r"softmax_xent_fwd: label 10 at row 1 is out of range for logits float64\[3, 10\]"),
    (lambda: ks.softmax_xent_fwd(np.ones((3, 10)), np.array([-1, 0, 2]), np.ones(3),
                                 np.ones(3)), "label -1 at row 0"),
    (lambda: ks.softmax_xent_fwd(np.ones((3, 10)), np.array([1.0, 0, 2]), np.ones(3),
                                 np.ones(3)), "labels must be integers"),
    (lambda: ks.softmax_xent_bwd(np.ones((3, 10)), np.array([1, 2]), np.ones(3), np.ones(3),
                                 np.ones((3, 10))), r"labels shape \(2,\) does not match"),
    (lambda: ks.softmax_xent_bwd(np.ones((3, 10)), np.array([1, 2, 99]), np.ones(3),
                                 np.ones(3), np.ones((3, 10))), "softmax_xent_bwd: label 99"),
])
def test_softmax_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---------------------------------------------------------------------------
# conv2d
# ---------------------------------------------------------------------------

# (N, C, H, W), (O, KH, KW), stride, padding, dilation, groups
CONV_CASES = [
    ((2, 3, 7, 9), (4, 3, 3), 1, 1, 1, 1),
    ((3, 1, 8, 8), (5, 3, 3), 1, 1, 1, 1),
    ((2, 4, 8, 7), (6, 3, 2), (2, 1), (1, 0), (1, 2), 2),
    ((3, 6, 10, 11), (6, 3, 3), 2, 2, 2, 6),   # depthwise
    ((1, 2, 5, 5), (3, 5, 5), 1, 0, 1, 1),     # kernel == input
    ((2, 2, 5, 6), (4, 1, 1), 3, 2, 1, 2),     # 1x1, outputs over pure padding
    ((2, 3, 9, 4), (2, 2, 3), (3, 2), (0, 2), 1, 1),
]


def _conv_args(case, dtype, rng):
    xs, (o, kh, kw), s, p, d, g = case
    x = rand(rng, xs, dtype)
    w = rand(rng, (o, xs[1] // g, kh, kw), dtype)
    pair = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    return x, w, (s, p, d, g), (pair(s), pair(p), pair(d), g)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_forward_and_grads(dtype, case):
    rng = np.random.default_rng(7)
    x, w, args, ref_args = _conv_args(case, dtype, rng)
    y = kc.conv2d_forward(x, w, *args)
    y_ref = ref_conv(x, w, *ref_args)
    assert y.shape == y_ref.shape
    assert y.dtype == dtype
    scale = 1e2 if dtype == np.float32 else 1.0
    close(y, y_ref, dtype, scale=scale)
    dy = rand(rng, y.shape, dtype)
    dx_ref, dw_ref = ref_conv_grads(x, w, dy, *ref_args)
    close(kc.conv2d_backward_input(dy, w, x.shape, *args), dx_ref, dtype, scale=scale)
    close(kc.conv2d_backward_weight(dy, x, w.shape, *args), dw_ref, dtype, scale=scale)


def test_conv2d_chunks_and_noncontiguous(monkeypatch):
    """Many small im2col chunks give the same result as one."""
    rng = np.random.default_rng(3)
    x = rand(rng, (9, 4, 6, 5), np.float64)
    w = rand(rng, (3, 4, 3, 3), np.float64)
    y_ref = ref_conv(x, w, (1, 1), (1, 1), (1, 1), 1)
    dy = rand(rng, y_ref.shape, np.float64)
    dx_ref, dw_ref = ref_conv_grads(x, w, dy, (1, 1), (1, 1), (1, 1), 1)
    monkeypatch.setattr(kc._conv, "_CHUNK_BYTES", 1)  # -> chunks of #threads samples
    xt = np.asfortranarray(x)                      # wrappers copy to C order
    np.testing.assert_allclose(kc.conv2d_forward(xt, w, 1, 1), y_ref, atol=1e-12)
    np.testing.assert_allclose(kc.conv2d_backward_input(dy, w, x.shape, 1, 1), dx_ref,
                               atol=1e-12)
    np.testing.assert_allclose(kc.conv2d_backward_weight(dy, xt, w.shape, 1, 1), dw_ref,
                               atol=1e-12)


# float32 runs the numba kernels, float16 the primitives' numpy references: both
# must stop bad arguments with the primitive's message before any work.
KERNEL_AND_REFERENCE = [np.float32, np.float16]


@pytest.mark.parametrize("dtype", KERNEL_AND_REFERENCE)
@pytest.mark.parametrize("call, match", [
    (lambda o: lax.conv2d(o((2, 3, 5, 5)), o((4, 2, 3, 3))),
     r"conv2d: x \(2, 3, 5, 5\) has C=3 channels, so with groups=1 .* need shape\[1\] == 3"),
    (lambda o: lax.conv2d(o((2, 4, 5, 5)), o((4, 2, 3, 3)), groups=3),
     "conv2d: groups=3 must divide the input channels"),
    (lambda o: lax.conv2d(o((2, 4, 5, 5)), o((3, 2, 3, 3)), groups=2), "output channels"),
    (lambda o: lax.conv2d(o((2, 1, 2, 2)), o((1, 1, 3, 3))), r"conv2d: output size 0x0 is empty"),
    (lambda o: lax.conv2d(o((2, 1, 5, 5)), o((1, 1, 3, 3)), dilation=3), "output size"),
    (lambda o: lax.conv2d(o((2, 1, 5)), o((1, 1, 3, 3))), "x must be 4-D"),
    (lambda o: lax.conv2d(o((2, 1, 5, 5)), o((1, 1, 3, 3)), stride=0), "conv2d: stride must be >= 1"),
    (lambda o: lax.conv2d(o((2, 1, 5, 5)), o((1, 1, 3, 3)), padding=(1, 2, 3)),
     "conv2d: padding must be an int or a pair"),
    (lambda o: lax.conv2d_input_grad(o((2, 1, 4, 4)), o((1, 1, 3, 3)), (5, 5)),
     r"conv2d_input_grad: dy \S+\[2,1,4,4\] does not match the conv2d output shape \(2, 1, 3, 3\)"),
    (lambda o: lax.conv2d_weight_grad(o((2, 1, 3, 3)), o((2, 1, 5, 5)), (2, 2)),
     r"conv2d_weight_grad: dy \S+\[2,1,3,3\] does not match the conv2d output shape \(2, 1, 4, 4\)"),
])
def test_conv2d_bad_inputs(call, match, dtype):
    with pytest.raises(ValueError, match=match):
        call(lambda shape: np.ones(shape, dtype))


# ---------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------

POOL_CASES = [  # (N, C, H, W), kernel, stride, padding
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0)),
    ((2, 2, 9, 7), (3, 3), (2, 2), (1, 1)),
    ((1, 3, 7, 9), (3, 3), (1, 1), (1, 1)),    # overlapping windows
    ((2, 1, 6, 9), (2, 3), (1, 2), (1, 1)),
    ((1, 2, 5, 5), (5, 5), (5, 5), (2, 2)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", POOL_CASES)
def test_pooling(dtype, case):
    xs, k, s, p = case
    rng = np.random.default_rng(11)
    x = rand(rng, xs, dtype)
    y_ref, idx_ref = ref_pool(x, k, s, p, "max")
    y, idx = kc.max_pool2d_forward(x, k, s, p)
    np.testing.assert_array_equal(y, y_ref.astype(dtype))
    np.testing.assert_array_equal(idx, idx_ref)
    dy = rand(rng, y.shape, dtype)
    dx_ref = np.zeros((xs[0] * xs[1], xs[2] * xs[3]))
    for r in range(dx_ref.shape[0]):
        np.add.at(dx_ref[r], idx_ref.reshape(dx_ref.shape[0], -1)[r],
                  dy.reshape(dx_ref.shape[0], -1)[r].astype(np.float64))
    close(kc.max_pool2d_backward(dy, idx, xs), dx_ref.reshape(xs), dtype)

    y_ref, _ = ref_pool(x, k, s, p, "avg")
    close(kc.avg_pool2d_forward(x, k, s, p), y_ref, dtype)
    # avg pooling is linear: check the backward by the adjoint identity.
    dx = kc.avg_pool2d_backward(dy, xs, k, s, p)
    z = rand(rng, xs, np.float64)
    lhs = float((ref_pool(z, k, s, p, "avg")[0] * dy).sum())
    assert abs(lhs - float((z * dx).sum())) < 1e-4 * max(1.0, abs(lhs))


def test_max_pool_nan_propagates():
    x = np.zeros((1, 1, 2, 2))
    x[0, 0, 1, 0] = np.nan
    y, idx = kc.max_pool2d_forward(x, 2)
    assert np.isnan(y[0, 0, 0, 0]) and idx[0, 0, 0, 0] == 2


@pytest.mark.parametrize("dtype", KERNEL_AND_REFERENCE)
@pytest.mark.parametrize("call, match", [
    (lambda o: lax.max_pool2d(o((1, 1, 4, 4)), 2, padding=2), r"max_pool2d: padding \(2, 2\) .* at most half"),
    (lambda o: lax.max_pool2d(o((1, 1, 2, 2)), 3), r"max_pool2d: output size 0x0 is empty"),
    (lambda o: lax.avg_pool2d(o((1, 1, 4, 4)), 2, stride=0), "avg_pool2d: stride must be >= 1"),
    (lambda o: C.avg_pool2d_grad_p.bind(o((1, 1, 3, 3)), in_hw=(4, 4), kernel=(2, 2), stride=(2, 2),
                                        padding=(0, 0)),
     r"avg_pool2d_grad: dy \S+\[1,1,3,3\] does not match the pooling output shape \(1, 1, 2, 2\)"),
    (lambda o: C.max_pool2d_grad_p.bind(o((1, 1, 2, 2)), np.zeros((1, 1, 2, 1), np.int32), in_hw=(4, 4)),
     "max_pool2d_grad: dy .* and indices .* must have the same 4-D shape"),
])
def test_pool_bad_inputs(call, match, dtype):
    with pytest.raises(ValueError, match=match):
        call(lambda shape: np.ones(shape, dtype))


def test_pool_padding_up_to_half_the_kernel_is_valid():
    x = rand(np.random.default_rng(2), (1, 2, 2, 2), np.float32)
    close(lax.avg_pool2d(x, 3, stride=1, padding=1), ref_pool(x, (3, 3), (1, 1), (1, 1), "avg")[0], np.float32)


def test_max_pool_backward_rejects_indices_outside_the_plane():
    # Index values are data (the kernel checks them itself: one outside its plane would write out of bounds).
    with pytest.raises(ValueError, match="indices out of range"):
        kc.max_pool2d_backward(np.ones((1, 1, 2, 2)), np.full((1, 1, 2, 2), 16), (1, 1, 4, 4))


# ---------------------------------------------------------------------------
# scatter_add_rows
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, n, k", [(1, 5, 1), (7, 100, 3), (50, 20, 33), (4, 0, 2)])
def test_scatter_add_rows(dtype, m, n, k):
    rng = np.random.default_rng(m + n + k)
    out = rand(rng, (m, k), dtype)
    idx = rng.integers(-m, m, n)
    src = rand(rng, (n, k), dtype)
    ref = out.astype(np.float64)
    np.add.at(ref, idx, src.astype(np.float64))
    close(ksc.scatter_add_rows(out, idx, src), ref, dtype, scale=10)


@pytest.mark.parametrize("call, error, match", [
    (lambda: ksc.scatter_add_rows(np.zeros((3, 2)), np.array([0, 3]), np.ones((2, 2))),
     IndexError, r"scatter_add_rows: index 3 at position 1 is out of range for out with 3 rows"),
    (lambda: ksc.scatter_add_rows(np.zeros((3, 2)), np.array([-4]), np.ones((1, 2))),
     IndexError, "index -4 at position 0"),
    (lambda: ksc.scatter_add_rows(np.zeros((3, 2)), np.array([0, 1]), np.ones((2, 3))),
     ValueError, r"src \(2, 3\) does not match"),
    (lambda: ksc.scatter_add_rows(np.zeros((3, 2)), np.array([0.0]), np.ones((1, 2))),
     ValueError, "idx must be a 1-D integer array"),
    (lambda: ksc.scatter_add_rows(np.zeros((3, 2)), np.array([0]), np.ones((1, 2), np.float32)),
     ValueError, "share a float32/float64 dtype"),
])
def test_scatter_bad_inputs(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ---------------------------------------------------------------------------
# threads
# ---------------------------------------------------------------------------

@pytest.fixture
def restore_threads():
    before = _threads.get_num_threads()
    yield
    _threads.set_num_threads(before)


def _run_all(rng_seed=5):
    rng = np.random.default_rng(rng_seed)
    x = rand(rng, (300, 257), np.float32, scale=3)  # above the serial cutoff
    labels = rng.integers(0, 257, 300)
    outs = [ks.softmax(x, np.empty_like(x)), ks.log_softmax(x, np.empty_like(x))]
    loss, lse = np.empty(300, np.float32), np.empty(300, np.float32)
    ks.softmax_xent_fwd(x, labels, loss, lse)
    outs += [loss, lse, ks.softmax_xent_bwd(x, labels, lse, np.ones(300, np.float32),
                                            np.empty_like(x))]
    xi = rand(rng, (6, 4, 9, 9), np.float32)
    w = rand(rng, (8, 2, 3, 3), np.float32)
    y = kc.conv2d_forward(xi, w, 1, 1, 1, 2)
    outs += [y, kc.conv2d_backward_input(y, w, xi.shape, 1, 1, 1, 2),
             kc.conv2d_backward_weight(y, xi, w.shape, 1, 1, 1, 2)]
    p, idx = kc.max_pool2d_forward(xi, 3, 2, 1)
    outs += [p, kc.max_pool2d_backward(p, idx, xi.shape)]
    return outs



# --------------------------------------------------------------------------
# select (where) on large arrays
# --------------------------------------------------------------------------

_SEL_SHAPE = (64, 80)   # 5120 elements: above kernels_select.MIN_SIZE


def _sel_case(name, rng):
    a = rng.standard_normal(_SEL_SHAPE).astype(np.float32)
    b = rng.standard_normal(_SEL_SHAPE).astype(np.float32)
    special = a.copy()
    special[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    return {
        "two arrays": (a, b),
        "array, python float": (a, 0.0),
        "python float, array": (-1.5, b),
        "array, numpy scalar": (a, np.float32(2.0)),
        "nan/inf/-0 pass through": (special, -np.inf),
        "float64 arrays": (a.astype(np.float64), b.astype(np.float64)),
        "int array, python float (promotes; np.where path)": ((a * 10).astype(np.int32), 0.5),
        "mixed dtypes (np.where path)": (a.astype(np.float64), b),
        "transposed view (np.where path)": (a.reshape(80, 64).T, b),
        "broadcast row (np.where path)": (a, b[:1]),
        "two scalars (np.where path)": (1.0, 2.0),
    }[name]


@pytest.mark.parametrize("name", ["two arrays", "array, python float", "python float, array", "array, numpy scalar",
                                  "nan/inf/-0 pass through", "float64 arrays", "int array, python float (promotes; np.where path)",
                                  "mixed dtypes (np.where path)", "transposed view (np.where path)",
                                  "broadcast row (np.where path)", "two scalars (np.where path)"])
def test_select_matches_np_where(name):
    rng = np.random.default_rng(7)
    c = rng.random(_SEL_SHAPE) > 0.5
    x, y = _sel_case(name, rng)
    assert (select_large(c, x, y) is not None) == ("np.where path" not in name)   # which path ran
    got, want = select_p.impl(c, x, y), np.where(c, x, y)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)   # bit-exact, NaN where NaN (and the sign of -0.0 kept)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def test_select_large_leaves_inputs_and_rejects_non_bool_condition():
    rng = np.random.default_rng(8)
    a = rng.standard_normal(_SEL_SHAPE).astype(np.float32)
    before = a.copy()
    select_p.impl(a > 0, a, 0.0)
    np.testing.assert_array_equal(a, before)
    for impl in (select_p.impl, select_p.impls["reference"]):
        with pytest.raises(TypeError, match="bool"):
            impl(a, a, 0.0)


@pytest.mark.skipif(_threads.max_threads() < 2, reason="needs 2 numba threads")
def test_thread_count_does_not_change_results(restore_threads):
    _threads.set_num_threads(1)
    assert _threads.get_num_threads() == 1
    one = _run_all()
    _threads.set_num_threads(2)
    two = _run_all()
    for a, b in zip(one, two):
        # float32 reassociation only: 1e-6 relative to the array's scale
        # (dw sums ~1e3-sized terms that cancel).
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6 * max(1.0, np.abs(b).max()))


def test_threading_layer_and_bad_thread_count():
    assert _threads.threading_layer() in ("workqueue", "tbb", "omp")
    with pytest.raises(ValueError, match="set_num_threads"):
        _threads.set_num_threads(0)


def test_env_thread_count_is_honoured():
    """FUNCGRAD_NUM_THREADS is read at import (fresh interpreter), and the
    default layer is TBB (a dependency), which parallel kernels may enter
    from several Python threads at once."""
    import os
    import subprocess
    import sys
    code = ("from funcgrad.backends.cpu import _threads as t; "
            "print(t.get_num_threads(), t.threading_layer())")
    env = dict(os.environ, FUNCGRAD_NUM_THREADS="1")
    env.pop("NUMBA_THREADING_LAYER", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    assert out == ["1", "tbb"]
