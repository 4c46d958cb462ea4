"""GPU implementations of indexing, scatters, argsort, conv2d, pooling and bit primitives.

Each check runs the public funcgrad functions (and grad, whose rules bind
further primitives) on GPU arrays and compares with float64 numpy
references. CI runs the checks over the numpy stand-in for CuPy
(``gpu_standin``, whose ``cupyx`` scatters refuse the dtypes CuPy's atomics
refuse, so both paths run); the test marked ``gpu`` runs the same checks on
real CuPy.
"""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.lax as lax
import funcgrad.nn as nn
import funcgrad.numpy as fnp
from funcgrad.backends.gpu import _detect
from gpu_standin import gpu_standin
from nn_reference import np_conv, np_pool

REPO_ROOT = Path(__file__).resolve().parents[1]


def dev(x, dtype=None):
    return fg.device_put(fnp.asarray(np.asarray(x, dtype=dtype)), "gpu")


def host(y):
    assert y.device == "gpu", type(y)
    return np.asarray(fg.device_put(y, "cpu"))


@contextlib.contextmanager
def checked_indexing():
    fg.config.update("checked_indexing", True)
    try:
        yield
    finally:
        fg.config.update("checked_indexing", False)


def close(y, ref, tol=1e-5):
    got = host(y)
    assert got.shape == np.shape(ref), (got.shape, np.shape(ref))
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=tol, atol=tol)


# ---------------------------------------------------------------- getitem


def check_getitem():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5, 3)).astype(np.float32)
    i = np.array([[3, 0], [-1, 1]], np.int32)
    j = np.array([4, 0], np.int32)
    gx = dev(x)
    close(gx[dev(i)], x[i])
    close(gx[1:, dev(j)], x[1:, j])
    close(gx[dev(j[1:] + 3), :, dev(np.array([2, 0], np.int32))], x[j[1:] + 3, :, [2, 0]])   # split: axes move to front
    close(gx[None, ..., dev(j % 3)], x[None, ..., j % 3])
    close(gx[[0, 2]], x[[0, 2]])                                   # host index arrays travel along
    close(gx[np.array([True, False, True, True])], x[[0, 2, 3]])   # a host mask
    close(gx[2, 1:4, 0], x[2, 1:4, 0])
    # grad: the cotangent scatter-adds back (duplicates accumulate)
    dup = np.array([0, 2, 0, 0], np.int32)
    g = fg.grad(lambda v: fnp.sum(v[dev(dup)] ** 2))(gx)
    ref = np.zeros(x.shape)
    np.add.at(ref, dup, 2 * x[dup].astype(np.float64))
    close(g, ref)
    # default mode clamps out-of-bounds device indices, as JAX's x[i]
    close(gx[dev(np.array([7, -9], np.int32))], x[[3, 0]])
    with checked_indexing():   # out-of-bounds indices raise (a device read), as on the CPU
        with pytest.raises(IndexError, match="getitem: index 9 is out of bounds for axis 1 with size 5"):
            gx[:, dev(np.array([1, 9], np.int32))]
        with pytest.raises(IndexError, match="scatter_add: index -5 is out of bounds for axis 0 with size 4"):
            gx.at[dev(np.array([-5], np.int32))].add(1.0)


# ---------------------------------------------------------------- scatters

_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _at(x, kind):
    return {"add": x.add, "mul": x.multiply, "max": x.max, "min": x.min, "set": x.set}[kind]


def _reference(x, index, y, kind):
    out = x.astype(np.result_type(x, y), copy=True)
    if kind == "set":
        out[index] = y
    else:
        with np.errstate(invalid="ignore"):   # (NaN operands)
            _UFUNCS[kind].at(out, index, np.broadcast_to(y, out[index].shape))
    return out


def check_scatters():
    rng = np.random.default_rng(1)
    idx = np.array([1, 3, 1, 0, 1], np.int32)
    for dtype in (np.float32, np.float16, np.int32, np.int8, np.uint8):
        x = rng.integers(-3, 4, (4, 3)).astype(dtype) if dtype != np.uint8 else rng.integers(0, 4, (4, 3)).astype(dtype)
        y = rng.integers(1, 4, (5, 3)).astype(dtype)
        for kind in ("add", "set", "mul", "max", "min"):
            got = _at(dev(x).at[dev(idx)], kind)(dev(y))
            ref = _reference(x, idx, y, kind)
            assert host(got).dtype == ref.dtype, (kind, dtype)
            np.testing.assert_array_equal(host(got), ref, err_msg=f"{kind} {np.dtype(dtype)}")
    # bool (max = or, min = and), two index arrays split by a slice, a basic index, scalars
    b = rng.random((4, 3)) < 0.5
    yb = rng.random((5, 3)) < 0.5
    for kind in ("max", "min", "set"):
        np.testing.assert_array_equal(host(_at(dev(b).at[dev(idx)], kind)(dev(yb))), _reference(b, idx, yb, kind))
    x3 = rng.standard_normal((3, 2, 4)).astype(np.float32)
    i0, i2 = np.array([2, 0, 2], np.int32), np.array([1, 3, 1], np.int32)
    y3 = rng.standard_normal((3, 2)).astype(np.float32)
    for kind in ("add", "set", "mul", "max", "min"):
        got = _at(dev(x3).at[dev(i0), :, dev(i2)], kind)(dev(y3))
        close(got, _reference(x3.astype(np.float64), (i0, slice(None), i2), y3.astype(np.float64), kind))
        close(_at(dev(x3).at[1:, 0], kind)(2.0), _reference(x3.astype(np.float64), (slice(1, None), 0), 2.0, kind))
    # NaN propagates through max/min, from the operand and from the updates
    xn = np.array([0.0, np.nan, 2.0, 3.0], np.float32)
    yn = np.array([5.0, 1.0, np.nan, 1.0], np.float32)
    jn = np.array([0, 1, 2, 0], np.int32)
    for kind in ("max", "min"):
        close(_at(dev(xn).at[dev(jn)], kind)(dev(yn)), _reference(xn, jn, yn, kind).astype(np.float64))
    # divide / power with repeated device indices: applied once per occurrence, in order (np.ufunc.at)
    xf, yf = rng.uniform(1, 2, (4, 3)), rng.uniform(1, 2, (5, 3))
    for method, ufunc in (("divide", np.divide), ("power", np.power)):
        ref = xf.copy()
        ufunc.at(ref, idx, yf)
        close(getattr(dev(xf, np.float32).at[dev(idx)], method)(dev(yf, np.float32)), ref, 1e-5)
    # host index arrays (a list here) move to the device with the indexed array
    close(dev(np.zeros(3, np.float32)).at[[0, 2, 0]].add(dev(np.ones(3, np.float32))), [2.0, 0.0, 1.0])
    # out-of-bounds device indices are dropped (default mode)
    close(dev(np.zeros(3, np.float32)).at[dev(np.array([0, 5, 0], np.int32))].add(1.0), [2.0, 0.0, 0.0])


def check_scatter_grads():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    y = rng.standard_normal((3, 3)).astype(np.float32)
    c = rng.standard_normal((4, 3))
    idx = np.array([2, 0, 2], np.int32)

    def loss(kind):
        return lambda a, b: fnp.sum(_at(a.at[dev(idx)], kind)(b) * dev(c, np.float32))

    gx, gy = fg.grad(loss("add"), argnums=(0, 1))(dev(x), dev(y))
    close(gx, c)
    close(gy, c[idx])
    gx, gy = fg.grad(loss("set"), argnums=(0, 1))(dev(x), dev(y))
    close(gx, np.where(np.isin(np.arange(4), idx)[:, None], 0.0, c))
    close(gy, c[idx] * np.array([0, 1, 1])[:, None])       # row 2's first write is overwritten
    gx, gy = fg.grad(loss("max"), argnums=(0, 1))(dev(x), dev(y))
    out = _reference(x.astype(np.float64), idx, y.astype(np.float64), "max")
    close(gx, c * (x == out))
    close(gy, c[idx] * (y == out[idx]))


# ---------------------------------------------------------------- argsort and bits


def check_argsort_and_bits():
    x = np.array([[3.0, np.nan, 1.0, 3.0, -0.5, 1.0], [2.0, 2.0, -np.inf, 0.0, np.nan, 2.0]], np.float32)
    for axis in (0, 1):
        np.testing.assert_array_equal(host(lax.argsort(dev(x), axis)), np.argsort(x, axis=axis, kind="stable"))
    for v in (np.array([5, -1, 5, 0, -7], np.int32), np.array([True, False, True, False])):
        np.testing.assert_array_equal(host(lax.argsort(dev(v), 0)), np.argsort(v, kind="stable"))
    for v in (np.array([-1, 0, 7, -128], np.int8), np.array([65535, 3, 0], np.uint16),
              np.array([-1, 2**31 - 1, 5], np.int32), np.array([True, False])):
        bits = {"i": v.view(np.dtype(f"u{v.dtype.itemsize}")), "u": v, "b": v.astype(np.uint8)}[v.dtype.kind]
        got = host(lax.population_count(dev(v)))
        np.testing.assert_array_equal(got, np.bitwise_count(bits).astype(v.dtype if v.dtype != bool else got.dtype))
    for dtype in (np.float32, np.float16):
        tiny = np.finfo(dtype).smallest_subnormal
        v = np.array([0.0, -0.0, 8.0, -0.3, tiny, np.inf, np.nan, 1e4], dtype)
        m, e = fnp.frexp(dev(v))
        rm, re = np.frexp(v)
        np.testing.assert_array_equal(host(m), rm)
        assert host(m).dtype == np.dtype(dtype) and host(e).dtype == np.int32
        np.testing.assert_array_equal(host(e)[np.isfinite(v)], re[np.isfinite(v)])
    g = fg.grad(lambda a: fnp.sum(fnp.frexp(a)[0]))(dev(np.array([3.0, 0.2], np.float32)))
    close(g, 2.0 ** -np.frexp(np.array([3.0, 0.2]))[1])


# ---------------------------------------------------------------- conv2d


def np_conv_input_grad(dy, w, x_shape, stride, padding, dilation, groups):
    """The adjoint of np_conv in x: each output's cotangent spread over its window."""
    n, c, h, wd = x_shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    dxp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for p in range(dy.shape[2]):
            for q in range(dy.shape[3]):
                dxp[:, g * cg:(g + 1) * cg, p * sh:p * sh + dh * (kh - 1) + 1:dh,
                    q * sw:q * sw + dw * (kw - 1) + 1:dw] += dy[:, oc, p, q][:, None, None, None] * w[oc]
    return dxp[:, :, ph:ph + h, pw:pw + wd]


def np_conv_weight_grad(dy, x, w_shape, stride, padding, dilation, groups):
    o, cg, kh, kw = w_shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    dw_ = np.zeros(w_shape)
    og = o // groups
    for oc in range(o):
        g = oc // og
        for p in range(dy.shape[2]):
            for q in range(dy.shape[3]):
                window = xp[:, g * cg:(g + 1) * cg, p * sh:p * sh + dh * (kh - 1) + 1:dh,
                            q * sw:q * sw + dw * (kw - 1) + 1:dw]
                dw_[oc] += np.tensordot(dy[:, oc, p, q], window, axes=(0, 0))
    return dw_


def check_conv2d():
    rng = np.random.default_rng(3)
    cases = [((2, 4, 7, 6), (6, 2, 3, 2), dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)),
             ((1, 3, 5, 5), (4, 3, 3, 3), dict(stride=1, padding=1, dilation=1, groups=1))]
    for x_shape, w_shape, geo in cases:
        x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
        pairs = {k: (v, v) if isinstance(v, int) and k != "groups" else v for k, v in geo.items()}
        y_ref = np_conv(x, w, pairs["stride"], pairs["padding"], pairs["dilation"], geo["groups"])
        c = rng.standard_normal(y_ref.shape)
        for dtype, tol in ((np.float32, 1e-4), (np.float16, 3e-2)):
            y = nn.conv2d(dev(x, dtype), dev(w, dtype), **geo)
            assert host(y).dtype == np.dtype(dtype)
            close(y, y_ref, tol)
        args = (pairs["stride"], pairs["padding"], pairs["dilation"], geo["groups"])
        gx, gw = fg.grad(lambda a, b: fnp.sum(nn.conv2d(a, b, **geo) * dev(c, np.float32)), argnums=(0, 1))(
            dev(x, np.float32), dev(w, np.float32))
        close(gx, np_conv_input_grad(c, w, x_shape, *args), 1e-4)
        close(gw, np_conv_weight_grad(c, x, w_shape, *args), 1e-4)
        close(lax.conv2d_input_grad(dev(c, np.float32), dev(w, np.float32), x_shape[2:], **geo),
              np_conv_input_grad(c, w, x_shape, *args), 1e-4)
    # vmap over the weights: one grouped convolution (groups * batch)
    x, ws = rng.standard_normal((2, 3, 5, 5)), rng.standard_normal((3, 4, 3, 3, 3))
    y = fg.vmap(lambda b: nn.conv2d(dev(x, np.float32), b, padding=1), in_axes=0)(dev(ws, np.float32))
    close(y, np.stack([np_conv(x, b, (1, 1), (1, 1), (1, 1), 1) for b in ws]), 1e-4)


# ---------------------------------------------------------------- pooling


def np_max_pool_first(x, kernel, stride, padding):
    """(y, flat argmax) over in-bounds taps: the first maximum, or the first NaN."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    y, idx = np.zeros((n, c, oh, ow)), np.zeros((n, c, oh, ow), np.int64)
    for a in range(n):
        for b in range(c):
            for p in range(oh):
                for q in range(ow):
                    taps = [(x[a, b, i, j], i * w + j) for i in range(p * sh - ph, p * sh - ph + kh)
                            for j in range(q * sw - pw, q * sw - pw + kw) if 0 <= i < h and 0 <= j < w]
                    nan = [t for t in taps if np.isnan(t[0])]
                    best = nan[0] if nan else max(taps, key=lambda t: (t[0], -t[1]))
                    y[a, b, p, q], idx[a, b, p, q] = best
    return y, idx


def check_pooling():
    rng = np.random.default_rng(4)
    x = rng.integers(-2, 3, (2, 3, 7, 6)).astype(np.float64)      # ties everywhere
    x[0, 0, 0, 0] = -np.inf
    x[0, 1, 1, :] = -np.inf
    x[1, 0, :2, :] = -np.inf      # windows whose in-bounds taps are all -inf: a padded tap never wins
    x[1, 2, 3, 3] = np.nan
    for kernel, stride, padding in (((2, 2), (2, 2), (0, 0)), ((3, 2), (2, 1), (1, 1)), ((3, 3), (1, 2), (1, 0))):
        y_ref, idx_ref = np_max_pool_first(x, kernel, stride, padding)
        for dtype in (np.float32, np.float16):
            y, idx = C_max_pool(dev(x, dtype), kernel, stride, padding)
            np.testing.assert_array_equal(host(y), y_ref.astype(dtype))
            np.testing.assert_array_equal(host(idx), idx_ref)
        finite = np.nan_to_num(x, nan=1.5, posinf=0, neginf=-3)
        close(nn.avg_pool2d(dev(finite, np.float32), kernel, stride, padding),
              np_pool(finite, kernel, stride, padding, np.mean, 0.0))
    # gradients: max routes each cotangent to its window's first maximum; avg spreads it
    v = rng.standard_normal((2, 2, 6, 5))
    c = rng.standard_normal((2, 2, 3, 3))
    kernel, stride, padding = (3, 2), (2, 2), (1, 1)
    g = fg.grad(lambda a: fnp.sum(nn.max_pool2d(a, kernel, stride, padding) * dev(c, np.float32)))(dev(v, np.float32))
    _, idx = np_max_pool_first(v.astype(np.float32).astype(np.float64), kernel, stride, padding)
    ref = np.zeros((2, 2, 30))
    np.add.at(ref, (np.arange(2)[:, None, None], np.arange(2)[None, :, None], idx.reshape(2, 2, -1)),
              c.reshape(2, 2, -1))
    close(g, ref.reshape(v.shape))
    from funcgrad.primitives.conv import max_pool2d_grad_p
    with checked_indexing(), pytest.raises(ValueError, match=r"indices out of range \[0, 30\)"):
        max_pool2d_grad_p.bind(dev(c, np.float32), dev(np.full(c.shape, 30, np.int32)), in_hw=(6, 5))
    t = rng.standard_normal(v.shape)     # jvp: the tangent read at each window's maximum
    _, ty = fg.jvp(lambda a: nn.max_pool2d(a, kernel, stride, padding), (dev(v, np.float32),), (dev(t, np.float32),))
    close(ty, np.take_along_axis(t.reshape(2, 2, -1), idx.reshape(2, 2, -1), axis=2).reshape(c.shape))
    g = fg.grad(lambda a: fnp.sum(nn.avg_pool2d(a, kernel, stride, padding) * dev(c, np.float32)))(dev(v, np.float32))
    ref = np.zeros((2, 2, 8, 7))
    for p in range(3):
        for q in range(3):
            ref[:, :, p * 2:p * 2 + 3, q * 2:q * 2 + 2] += c[:, :, p, q][:, :, None, None] / 6
    close(g, ref[:, :, 1:7, 1:6])


def C_max_pool(x, kernel, stride, padding):
    from funcgrad.primitives.conv import max_pool2d_p
    return max_pool2d_p.bind(x, kernel=kernel, stride=stride, padding=padding)


# ---------------------------------------------------------------- the MNIST CNN


def check_mnist_cnn_step():
    sys.path.insert(0, str(REPO_ROOT / "examples"))
    try:
        import mnist
    finally:
        sys.path.remove(str(REPO_ROOT / "examples"))
    from funcgrad import optim
    model, input_shape = mnist.build_model("cnn")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 1, 28, 28)).astype(np.float32)
    labels = np.array([3, 0, 9, 3], np.int32)
    params, _ = model.init(fg.random.PRNGKey(0), input_shape)
    opt = optim.sgd(0.05, momentum=0.9)
    train_step, _ = mnist.make_steps(model, opt)

    def loss(p, a, b):
        return nn.cross_entropy(model.apply(p, a), b)

    on_gpu = fg.tree_util.tree_map(lambda a: fg.device_put(a, "gpu"), params)
    ref_loss, ref_grads = fg.value_and_grad(loss)(params, fnp.asarray(x), fnp.asarray(labels))
    got_loss, got_grads = fg.value_and_grad(loss)(on_gpu, dev(x), dev(labels))
    close(got_loss, float(ref_loss), 1e-4)
    for got, ref in zip(fg.tree_util.tree_leaves(got_grads), fg.tree_util.tree_leaves(ref_grads)):
        close(got, np.asarray(ref, np.float64), 2e-4)
    state = opt.init(params)
    ref_params, _, ref_step_loss = train_step(params, state, fnp.asarray(x), fnp.asarray(labels))
    gpu_state = fg.tree_util.tree_map(lambda a: fg.device_put(a, "gpu"), state)
    new_params, _, step_loss = train_step(on_gpu, gpu_state, dev(x), dev(labels))
    close(step_loss, float(ref_step_loss), 1e-4)
    for got, ref in zip(fg.tree_util.tree_leaves(new_params), fg.tree_util.tree_leaves(ref_params)):
        close(got, np.asarray(ref, np.float64), 2e-4)


def check_zero_dim_and_boolean_masks():
    """Found on an H200: a 0-d popcount came back 1-d (``ascontiguousarray`` makes 0-d arrays 1-d), and
    ``x[mask]`` with a GPU mask read the mask with ``np.asarray`` (refused for GPU arrays)."""
    for v in (np.int32(7), np.int32(-1), np.uint8(255)):
        got = fnp.bitwise_count(dev(np.asarray(v)))
        assert got.device == "gpu" and got.shape == ()
        assert int(np.asarray(fg.device_put(got, "cpu"))) == int(np.bitwise_count(v))
    x = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    g = dev(x)
    got = g[g > 0]
    assert got.device == "gpu"
    np.testing.assert_array_equal(np.asarray(fg.device_put(got, "cpu")), x[x > 0])
    # static arguments given as GPU arrays are read on the host (pad widths, LU pivots)
    widths = np.array([[1, 0], [0, 2]])
    np.testing.assert_array_equal(np.asarray(fg.device_put(fnp.pad(g, dev(widths)), "cpu")), np.pad(x, widths))
    perm = fg.lax.linalg.lu_pivots_to_permutation(dev(np.array([2, 2, 2], np.int32)), 3)
    np.testing.assert_array_equal(np.asarray(fg.device_put(perm, "cpu")), [2, 0, 1])


CHECKS = [check_getitem, check_scatters, check_scatter_grads, check_argsort_and_bits, check_conv2d,
          check_pooling, check_mnist_cnn_step, check_zero_dim_and_boolean_masks]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__)
def test_on_the_cupy_standin(check):
    with gpu_standin(use_triton=False):
        check()


@pytest.mark.gpu
@pytest.mark.skipif(not _detect.gpu_available(), reason="no usable GPU detected")
def test_on_a_real_gpu():
    for check in CHECKS:
        check()
