"""conv2d and pooling primitives vs naive float64 loops: values, gradients to order 2, vmap, shape errors."""
from __future__ import annotations


import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.primitives import nn as P
from funcgrad.testing import check_grads

from nn_reference import distinct as _distinct, np_conv, np_pool

# --------------------------------------------------------------------------
# conv2d
# --------------------------------------------------------------------------

# (x shape, w shape, stride, padding, dilation, groups)
CONV_CASES = [
    ((2, 3, 5, 6), (4, 3, 3, 3), (1, 1), (0, 0), (1, 1), 1),
    ((2, 3, 5, 6), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((1, 2, 7, 6), (3, 2, 3, 2), (2, 1), (1, 0), (1, 1), 1),
    ((2, 4, 7, 7), (6, 2, 3, 3), (2, 2), (1, 2), (2, 1), 2),
    ((1, 2, 4, 4), (2, 1, 1, 1), (1, 1), (0, 0), (1, 1), 2),
    ((3, 1, 6, 5), (2, 1, 2, 3), (3, 2), (1, 1), (1, 2), 1),
]
CONV_IDS = [f"x{c[0]}-w{c[1]}-s{c[2]}-p{c[3]}-d{c[4]}-g{c[5]}" for c in CONV_CASES]


def _conv_args(case, rng, dtype=np.float64):
    x_shape, w_shape, stride, padding, dilation, groups = case
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    return x, w, dict(stride=stride, padding=padding, dilation=dilation, groups=groups)


@pytest.mark.parametrize("case", CONV_CASES, ids=CONV_IDS)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_conv2d_values(case, dtype, rng, x64):
    x, w, geo = _conv_args(case, rng, dtype)
    out = P.conv2d(fnp.array(x), fnp.array(w), **geo)
    expected = np_conv(x.astype(np.float64), w.astype(np.float64), geo["stride"], geo["padding"],
                       geo["dilation"], geo["groups"])
    assert out.shape == expected.shape and out.dtype == dtype
    tol = {np.float16: 3e-2, np.float32: 1e-4, np.float64: 1e-12}[dtype]
    np.testing.assert_allclose(np.asarray(out, np.float64), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", CONV_CASES, ids=CONV_IDS)
def test_conv2d_grads_order_2(case, rng, x64):
    x, w, geo = _conv_args(case, rng)
    check_grads(lambda a, b: P.conv2d(a, b, **geo), (fnp.array(x), fnp.array(w)), order=2)


@pytest.mark.parametrize("case", CONV_CASES[:4], ids=CONV_IDS[:4])
def test_conv2d_gradient_primitives_grads(case, rng, x64):
    x, w, geo = _conv_args(case, rng)
    dy = fnp.array(rng.standard_normal(P.conv2d(fnp.array(x), fnp.array(w), **geo).shape))
    check_grads(lambda d, b: P.conv2d_input_grad(d, b, x.shape[2:], **geo), (dy, fnp.array(w)), order=2)
    check_grads(lambda d, a: P.conv2d_weight_grad(d, a, w.shape[2:], **geo), (dy, fnp.array(x)), order=2)


def test_conv2d_gradients_match_reference_adjoint(rng, x64):
    # <dy, conv(x, w)> differentiated by hand: the input and weight gradients.
    x, w, geo = _conv_args(CONV_CASES[3], rng)
    dy = rng.standard_normal(P.conv2d(fnp.array(x), fnp.array(w), **geo).shape)
    gx, gw = fg.grad(lambda a, b: fnp.sum(P.conv2d(a, b, **geo) * dy), argnums=(0, 1))(fnp.array(x), fnp.array(w))
    eps = 1e-6
    for arr, grad, which in [(x, gx, 0), (w, gw, 1)]:
        v = rng.standard_normal(arr.shape)
        plus = [x, w]
        minus = [x, w]
        plus[which], minus[which] = arr + eps * v, arr - eps * v
        fd = (np.sum(np_conv(*plus, **geo) * dy) - np.sum(np_conv(*minus, **geo) * dy)) / (2 * eps)
        np.testing.assert_allclose(np.sum(np.asarray(grad) * v), fd, rtol=1e-6)


def test_conv2d_vmap_folded_and_grouped(rng):
    x, w, geo = _conv_args(CONV_CASES[3], rng, np.float32)
    xs = rng.standard_normal((3,) + x.shape).astype(np.float32)
    ws = rng.standard_normal((3,) + w.shape).astype(np.float32)
    conv = lambda a, b: P.conv2d(a, b, **geo)   # noqa: E731
    only_x = fg.vmap(conv, in_axes=(0, None))(fnp.array(xs), fnp.array(w))
    both = fg.vmap(conv)(fnp.array(xs), fnp.array(ws))
    for i in range(3):
        np.testing.assert_allclose(np.asarray(only_x[i]), np.asarray(conv(fnp.array(xs[i]), fnp.array(w))),
                                   rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(both[i]), np.asarray(conv(fnp.array(xs[i]), fnp.array(ws[i]))),
                                   rtol=1e-5, atol=1e-5)
    # per-example weight gradients: vmap of grad batches conv2d_weight_grad through grouped convolution
    per_example = fg.vmap(fg.grad(lambda b, a: fnp.sum(conv(a[None], b) ** 2)), in_axes=(None, 0))(
        fnp.array(w), fnp.array(x))
    assert per_example.shape == (x.shape[0],) + w.shape
    one = fg.grad(lambda b: fnp.sum(conv(fnp.array(x[1:2]), b) ** 2))(fnp.array(w))
    np.testing.assert_allclose(np.asarray(per_example[1]), np.asarray(one), rtol=1e-4, atol=1e-4)


def test_conv2d_jit_matches_eager(rng):
    x, w, geo = _conv_args(CONV_CASES[2], rng, np.float32)
    f = lambda a, b: fnp.sum(P.conv2d(a, b, **geo) ** 2)   # noqa: E731
    eager = fg.grad(f, argnums=(0, 1))(fnp.array(x), fnp.array(w))
    jitted = fg.jit(fg.grad(f, argnums=(0, 1)))(fnp.array(x), fnp.array(w))
    for a, b in zip(eager, jitted):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


CONV_ERRORS = [
    ((2, 3, 5, 5), (4, 2, 3, 3), {}, "C=3 channels"),
    ((2, 3, 5, 5), (4, 3, 3, 3), {"groups": 2}, "groups=2 must divide"),
    ((2, 3, 2, 2), (4, 3, 3, 3), {}, "output size"),
    ((2, 3, 5), (4, 3, 3, 3), {}, "must be 4-D"),
    ((2, 3, 5, 5), (4, 3, 3, 3), {"stride": 0}, "stride must be >= 1"),
    ((2, 3, 5, 5), (4, 3, 3, 3), {"padding": (1, 2, 3)}, "padding must be an int or a pair"),
]


@pytest.mark.parametrize("x_shape,w_shape,kw,match", CONV_ERRORS, ids=[e[3] for e in CONV_ERRORS])
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_conv2d_shape_errors(x_shape, w_shape, kw, match, mode):
    x, w = fnp.zeros(x_shape), fnp.zeros(w_shape)
    f = (lambda a, b: P.conv2d(a, b, **kw)) if mode == "eager" else fg.jit(lambda a, b: P.conv2d(a, b, **kw))
    with pytest.raises(ValueError, match="conv2d") as info:
        f(x, w)
    assert match in str(info.value)


def test_conv2d_dtype_errors(x64):
    with pytest.raises(TypeError, match="same dtype"):
        fg.jit(P.conv2d)(fnp.zeros((1, 1, 3, 3), np.float32), fnp.zeros((1, 1, 3, 3), np.float64))
    with pytest.raises(TypeError, match="expected a float array"):
        fg.jit(P.conv2d)(fnp.zeros((1, 1, 3, 3), np.float32), fnp.zeros((1, 1, 3, 3), np.int32))


# --------------------------------------------------------------------------
# Pooling
# --------------------------------------------------------------------------

# (x shape, kernel, stride, padding)
POOL_CASES = [
    ((2, 3, 6, 6), (2, 2), (2, 2), (0, 0)),
    ((1, 2, 7, 5), (3, 3), (2, 2), (1, 1)),
    ((2, 1, 5, 6), (2, 3), (1, 2), (1, 0)),
]
POOL_IDS = [f"x{c[0]}-k{c[1]}-s{c[2]}-p{c[3]}" for c in POOL_CASES]


@pytest.mark.parametrize("case", POOL_CASES, ids=POOL_IDS)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_pool_values(case, dtype, rng, x64):
    shape, kernel, stride, padding = case
    x = rng.standard_normal(shape).astype(dtype)
    got_max = P.max_pool2d(fnp.array(x), kernel, stride, padding)
    got_avg = P.avg_pool2d(fnp.array(x), kernel, stride, padding)
    x64_ = x.astype(np.float64)
    tol = 1e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(np.asarray(got_max, np.float64), np_pool(x64_, kernel, stride, padding, np.max, -np.inf),
                               rtol=tol)
    np.testing.assert_allclose(np.asarray(got_avg, np.float64), np_pool(x64_, kernel, stride, padding, np.mean, 0.0),
                               rtol=tol, atol=tol)
    assert got_max.dtype == got_avg.dtype == dtype


@pytest.mark.parametrize("case", POOL_CASES, ids=POOL_IDS)
def test_pool_grads_order_2(case, rng, x64):
    shape, kernel, stride, padding = case
    x = fnp.array(_distinct(rng, shape))
    check_grads(lambda a: P.max_pool2d(a, kernel, stride, padding), (x,), order=2)
    check_grads(lambda a: P.avg_pool2d(a, kernel, stride, padding), (x,), order=2)


def test_max_pool_gradient_goes_to_the_max():
    x = fnp.array(np.array([[[[1.0, 5.0], [3.0, 2.0]]]]))
    np.testing.assert_array_equal(np.asarray(fg.grad(lambda a: P.max_pool2d(a, 2).sum())(x)),
                                  [[[[0.0, 1.0], [0.0, 0.0]]]])


def test_pool_vmap_and_jit(rng):
    xs = fnp.array(rng.standard_normal((3, 2, 2, 6, 6)).astype(np.float32))
    for fn in (lambda a: P.max_pool2d(a, 2), lambda a: P.avg_pool2d(a, 3, 1, 1)):
        batched = fg.vmap(fn)(xs)
        for i in range(3):
            np.testing.assert_allclose(np.asarray(batched[i]), np.asarray(fn(xs[i])), rtol=1e-6)
        grads = fg.vmap(fg.grad(lambda a: fnp.sum(fn(a) ** 2)))(xs)
        np.testing.assert_allclose(np.asarray(grads[1]), np.asarray(fg.grad(lambda a: fnp.sum(fn(a) ** 2))(xs[1])),
                                   rtol=1e-5)
        np.testing.assert_allclose(np.asarray(fg.jit(fn)(xs[0])), np.asarray(fn(xs[0])), rtol=1e-6)


@pytest.mark.parametrize("pool", [P.max_pool2d, P.avg_pool2d])
def test_pool_shape_errors(pool):
    with pytest.raises(ValueError, match="must be 4-D"):
        pool(fnp.zeros((2, 3, 4)), 2)
    with pytest.raises(ValueError, match="output size"):
        pool(fnp.zeros((1, 1, 2, 2)), 3)
    with pytest.raises(ValueError, match="at most half the kernel"):
        fg.jit(lambda a: pool(a, 2, 1, 2))(fnp.zeros((1, 1, 4, 4)))


@pytest.mark.parametrize("in_axes", [(0, 0), (None, 0), (1, 2), (0, None)])
def test_conv_gradient_primitives_vmap(in_axes, rng):
    x, w, geo = _conv_args(CONV_CASES[3], rng, np.float32)
    dy = rng.standard_normal(P.conv2d(fnp.array(x), fnp.array(w), **geo).shape).astype(np.float32)

    def stacked(a, axis):
        return np.stack([a * (i + 1) for i in range(3)], axis=axis) if axis is not None else a

    cases = [(lambda d, b: P.conv2d_input_grad(d, b, x.shape[2:], **geo), dy, w),
             (lambda d, a: P.conv2d_weight_grad(d, a, w.shape[2:], **geo), dy, x),
             (lambda a, b: P.conv2d(a, b, **geo), x, w)]
    for fn, first, second in cases:
        args = [stacked(first, in_axes[0]), stacked(second, in_axes[1])]
        batched = fg.vmap(fn, in_axes=in_axes)(fnp.array(args[0]), fnp.array(args[1]))
        for i in range(3):
            a = first * (i + 1) if in_axes[0] is not None else first
            b = second * (i + 1) if in_axes[1] is not None else second
            np.testing.assert_allclose(np.asarray(batched[i]), np.asarray(fn(fnp.array(a), fnp.array(b))),
                                       rtol=1e-4, atol=1e-4)
