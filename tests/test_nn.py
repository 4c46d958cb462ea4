"""funcgrad.nn and the nn primitives: numerics vs float64 numpy, derivatives, shapes, errors.

Tables drive the checks:

* ``ACTIVATIONS``: each function vs a numpy reference (float32 and float64),
  ``check_grads`` to order 2 in float64, jit and vmap vs eager;
* ``CONV_CASES`` / ``POOL_CASES``: the primitives vs naive float64 loops,
  gradients (order 2), vmap (folded and looped rules), shape errors;
* ``LAYERS``: every layer's ``init`` shape vs its ``apply`` output, and
  gradients with respect to its parameters.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import pytest
from scipy.special import erf as np_erf

import funcgrad as fg
import funcgrad.nn as nn
import funcgrad.numpy as fnp
from funcgrad import random
from funcgrad.nn import initializers as init
from funcgrad.primitives import nn as P
from funcgrad.testing import check_grads
from funcgrad.tree_util import tree_leaves, tree_map

from nn_reference import distinct as _distinct, np_conv, np_log_softmax, np_logsumexp, np_sigmoid, np_softmax
# --------------------------------------------------------------------------
# Activations and the softmax family
# --------------------------------------------------------------------------

ACTIVATIONS: list[tuple[str, Callable, Callable]] = [
    ("relu", nn.relu, lambda x: np.maximum(x, 0)),
    ("leaky_relu", lambda x: nn.leaky_relu(x, 0.1), lambda x: np.where(x > 0, x, 0.1 * x)),
    ("gelu_tanh", nn.gelu, lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    ("gelu_exact", lambda x: nn.gelu(x, approximate=False), lambda x: 0.5 * x * (1 + np_erf(x / math.sqrt(2)))),
    ("sigmoid", nn.sigmoid, np_sigmoid),
    ("softplus", nn.softplus, lambda x: np.logaddexp(0.0, x)),
    ("silu", nn.silu, lambda x: x * np_sigmoid(x)),
    ("tanh", nn.tanh, np.tanh),
    ("softmax", nn.softmax, np_softmax),
    ("softmax_axis0", lambda x: nn.softmax(x, axis=0), lambda x: np_softmax(x, 0)),
    ("softmax_axes", lambda x: nn.softmax(x, axis=(0, 1)), lambda x: np_softmax(x.reshape(-1)).reshape(x.shape)),
    ("log_softmax", nn.log_softmax, np_log_softmax),
    ("log_softmax_axis0", lambda x: nn.log_softmax(x, axis=0), lambda x: np_log_softmax(x, 0)),
    ("logsumexp", lambda x: nn.logsumexp(x, axis=-1), np_logsumexp),
    ("logsumexp_axis0_keep", lambda x: nn.logsumexp(x, axis=0, keepdims=True),
     lambda x: np_logsumexp(x, 0, keepdims=True)),
    ("logsumexp_all", lambda x: nn.logsumexp(x, axis=None), lambda x: np_logsumexp(x.reshape(-1))),
]


def _away_from_kinks(rng, shape):
    # |x| >= 0.1 so finite differences never straddle relu's kink at 0.
    x = rng.standard_normal(shape)
    return np.where(np.abs(x) < 0.1, 0.1 * np.sign(x) + x, x)


@pytest.mark.parametrize("name,fn,ref", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activation_values(name, fn, ref, dtype, rng, x64):
    x = rng.standard_normal((3, 5)).astype(dtype)
    out = fn(fnp.array(x))
    expected = ref(x.astype(np.float64))
    assert out.shape == expected.shape and out.dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(np.asarray(out), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("name,fn,ref", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_grads(name, fn, ref, rng, x64):
    x = fnp.array(_away_from_kinks(rng, (3, 4)))
    check_grads(fn, (x,), order=2)


@pytest.mark.parametrize("name,fn,ref", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_jit_and_vmap(name, fn, ref, rng):
    x = fnp.array(rng.standard_normal((2, 3, 4)).astype(np.float32))
    eager = np.stack([np.asarray(fn(x[i])) for i in range(2)])
    np.testing.assert_allclose(np.asarray(fg.vmap(fn)(x)), eager, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(fg.jit(fn)(x[0])), eager[0], rtol=1e-6, atol=1e-6)


def test_activations_are_stable_at_extremes():
    x = fnp.array([-1000.0, -80.0, 0.0, 80.0, 1000.0])
    np.testing.assert_allclose(np.asarray(nn.softplus(x)), [0.0, np.exp(-80.0), np.log(2), 80.0, 1000.0],
                               rtol=1e-6)
    np.testing.assert_allclose(np.asarray(nn.sigmoid(x)), [0.0, np_sigmoid(-80.0), 0.5, 1.0, 1.0], atol=1e-30)
    big = fnp.array([[1000.0, 0.0, -1000.0]])
    assert np.all(np.isfinite(np.asarray(nn.log_softmax(big))))
    np.testing.assert_allclose(np.asarray(nn.softmax(big)), [[1.0, 0.0, 0.0]])
    np.testing.assert_allclose(np.asarray(nn.logsumexp(big, axis=-1)), [1000.0])


def test_gradients_at_the_kinks():
    x = fnp.array([-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(np.asarray(fg.grad(lambda v: nn.relu(v).sum())(x)), [0.0, 0.0, 1.0])
    np.testing.assert_allclose(np.asarray(fg.grad(lambda v: nn.softplus(v).sum())(x)), np_sigmoid(np.array([-1, 0, 2])),
                               rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_softmax_primitives_kernel_and_fallback_paths(dtype, rng, x64):
    # (300, 257) f32 takes the parallel kernel; float16 the numpy reference.
    for shape in [(2, 3, 5), (300, 257), (4, 1)]:
        x = rng.standard_normal(shape).astype(dtype)
        tol = {np.float16: 2e-3, np.float32: 1e-5, np.float64: 1e-12}[dtype]
        for fn, ref in [(P.softmax, np_softmax), (P.log_softmax, np_log_softmax), (P.logsumexp, np_logsumexp)]:
            out = fn(fnp.array(x))
            assert out.dtype == dtype
            np.testing.assert_allclose(np.asarray(out, np.float64), ref(x.astype(np.float64)), rtol=tol, atol=tol)


def test_softmax_family_needs_an_axis_and_floats():
    with pytest.raises(ValueError, match="softmax"):
        fg.jit(P.softmax)(fnp.array(1.0))
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        nn.softmax(fnp.ones((2, 3)), axis=2)


def test_one_hot():
    out = nn.one_hot(fnp.array([0, 2, 5, -1]), 3)
    np.testing.assert_array_equal(np.asarray(out), [[1, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]])
    assert out.dtype == np.float32
    assert nn.one_hot(fnp.array([[1]]), 4, dtype=np.int32).shape == (1, 1, 4)
    with pytest.raises(TypeError, match="integers"):
        nn.one_hot(fnp.array([0.5]), 3)


# --------------------------------------------------------------------------
# Losses
# --------------------------------------------------------------------------


def np_xent(logits, labels):
    return -np.take_along_axis(np_log_softmax(logits), labels[:, None], axis=1)[:, 0]


@pytest.mark.parametrize("reduction,reduce", [("mean", np.mean), ("sum", np.sum), ("none", lambda v: v)])
def test_cross_entropy_integer_labels(reduction, reduce, rng, x64):
    logits = rng.standard_normal((6, 4))
    labels = rng.integers(0, 4, 6)
    out = nn.cross_entropy(fnp.array(logits), fnp.array(labels), reduction=reduction)
    np.testing.assert_allclose(np.asarray(out), reduce(np_xent(logits, labels)), rtol=1e-12)


def test_cross_entropy_class_axis_and_leading_dims(rng, x64):
    logits = rng.standard_normal((2, 5, 3))          # class axis 1
    labels = rng.integers(0, 5, (2, 3))
    out = nn.cross_entropy(fnp.array(logits), fnp.array(labels), axis=1, reduction="none")
    moved = np.moveaxis(logits, 1, -1).reshape(-1, 5)
    np.testing.assert_allclose(np.asarray(out), np_xent(moved, labels.reshape(-1)).reshape(2, 3), rtol=1e-12)


def test_cross_entropy_probability_targets(rng, x64):
    logits = rng.standard_normal((4, 3))
    targets = np_softmax(rng.standard_normal((4, 3)))
    out = nn.cross_entropy(fnp.array(logits), fnp.array(targets), reduction="none")
    np.testing.assert_allclose(np.asarray(out), -np.sum(targets * np_log_softmax(logits), -1), rtol=1e-12)
    # Stable: huge logits give a finite loss.
    assert np.isfinite(float(nn.cross_entropy(fnp.array([[1e4, -1e4]]), fnp.array([[0.5, 0.5]]))))
    check_grads(lambda l, t: nn.cross_entropy(l, t), (fnp.array(logits), fnp.array(targets)), order=2)


def test_cross_entropy_grads_integer_labels_order_2(rng, x64):
    labels = fnp.array(rng.integers(0, 4, 5))
    logits = fnp.array(rng.standard_normal((5, 4)))
    check_grads(lambda l: nn.cross_entropy(l, labels, reduction="none"), (logits,), order=2)
    check_grads(lambda l: nn.cross_entropy(l, labels), (logits,), order=3, modes=("rev",))


def test_cross_entropy_fused_gradient_matches_reference(rng, x64):
    logits, labels = rng.standard_normal((7, 6)), rng.integers(0, 6, 7)
    g = np.asarray(fg.grad(lambda l: nn.cross_entropy(l, fnp.array(labels), reduction="sum"))(fnp.array(logits)))
    np.testing.assert_allclose(g, np_softmax(logits) - np.eye(6)[labels], rtol=1e-12, atol=1e-15)
    jaxpr = str(fg.make_jaxpr(fg.grad(lambda l: nn.cross_entropy(l, fnp.array(labels))))(fnp.array(logits)))
    assert "softmax_cross_entropy_grad" in jaxpr   # one fused backward primitive


def test_cross_entropy_vmap_and_jit(rng):
    logits = fnp.array(rng.standard_normal((3, 4, 5)).astype(np.float32))
    labels = fnp.array(rng.integers(0, 5, (3, 4)))
    per_batch = fg.vmap(lambda l, y: nn.cross_entropy(l, y))(logits, labels)
    expected = [float(nn.cross_entropy(logits[i], labels[i])) for i in range(3)]
    np.testing.assert_allclose(np.asarray(per_batch), expected, rtol=1e-6)
    grads = fg.vmap(fg.grad(lambda l, y: nn.cross_entropy(l, y)))(logits, labels)
    assert grads.shape == (3, 4, 5)
    np.testing.assert_allclose(float(fg.jit(nn.cross_entropy)(logits[0], labels[0])), expected[0], rtol=1e-6)


@pytest.mark.parametrize("bad", [10, -1])
@pytest.mark.parametrize("mode", ["eager", "jit", "grad"])
def test_cross_entropy_bad_labels(bad, mode):
    logits = fnp.zeros((4, 10))
    labels = fnp.array([1, 2, bad, 3])
    run = {"eager": lambda: nn.cross_entropy(logits, labels),
           "jit": lambda: fg.jit(nn.cross_entropy)(logits, labels),
           "grad": lambda: fg.grad(nn.cross_entropy)(logits, labels)}[mode]
    with pytest.raises(ValueError) as info:
        run()
    message = str(info.value)
    assert "softmax_cross_entropy" in message and f"label {bad} at row 2" in message
    assert "f32[4,10]" in message and "[0, 10)" in message


def test_cross_entropy_shape_and_dtype_errors():
    with pytest.raises(ValueError, match=r"integer labels i32\[3\] must have the shape"):
        nn.cross_entropy(fnp.zeros((4, 10)), fnp.array([1, 2, 3]))
    with pytest.raises(ValueError, match="probability targets"):
        nn.cross_entropy(fnp.zeros((4, 10)), fnp.zeros((4, 9)))
    with pytest.raises(ValueError, match="reduction"):
        nn.cross_entropy(fnp.zeros((4, 10)), fnp.array([1, 2, 3, 4]), reduction="avg")
    with pytest.raises(ValueError, match="softmax_cross_entropy"):
        fg.jit(P.softmax_cross_entropy)(fnp.zeros((4, 10)), fnp.zeros(3, np.int32))


def test_mse(rng, x64):
    p, t = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    np.testing.assert_allclose(float(nn.mse(fnp.array(p), fnp.array(t))), np.mean((p - t) ** 2), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(nn.mse(fnp.array(p), fnp.array(t), reduction="none")), (p - t) ** 2)
    check_grads(nn.mse, (fnp.array(p), fnp.array(t)), order=2)


def test_binary_cross_entropy_with_logits(rng, x64):
    x, t = rng.standard_normal(6) * 3, rng.uniform(size=6)
    ref = -(t * np.log(np_sigmoid(x)) + (1 - t) * np.log(1 - np_sigmoid(x)))
    out = nn.binary_cross_entropy_with_logits(fnp.array(x), fnp.array(t), reduction="none")
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-10)
    check_grads(lambda a, b: nn.binary_cross_entropy_with_logits(a, b), (fnp.array(x), fnp.array(t)), order=2)
    extreme = nn.binary_cross_entropy_with_logits(fnp.array([1000.0, -1000.0]), fnp.array([0.0, 1.0]),
                                                  reduction="none")
    np.testing.assert_allclose(np.asarray(extreme), [1000.0, 1000.0])


# --------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------

# (name, layer, input shape, input generator)
LAYERS = [
    ("Linear", nn.Linear(3), (4, 5), "normal"),
    ("Linear_3d", nn.Linear(2, use_bias=False), (2, 3, 4), "normal"),
    ("Conv2d", nn.Conv2d(3, 3, padding="same"), (2, 2, 5, 5), "normal"),
    ("Conv2d_strided", nn.Conv2d(4, (2, 3), stride=2, padding=1, groups=2), (1, 2, 6, 7), "normal"),
    ("MaxPool2d", nn.MaxPool2d(2), (2, 3, 4, 6), "distinct"),
    ("AvgPool2d", nn.AvgPool2d(3, stride=1, padding=1), (1, 2, 4, 4), "normal"),
    ("Flatten", nn.Flatten(), (2, 3, 4), "normal"),
    ("Dropout_eval", nn.Dropout(0.5), (3, 4), "normal"),
    ("LayerNorm", nn.LayerNorm(), (3, 6), "normal"),
    ("ReLU", nn.ReLU(), (3, 4), "normal"),
    ("GELU", nn.GELU(), (3, 4), "normal"),
    ("Sigmoid", nn.Sigmoid(), (3, 4), "normal"),
    ("Tanh", nn.Tanh(), (3, 4), "normal"),
    ("SiLU", nn.SiLU(), (3, 4), "normal"),
    ("Softplus", nn.Softplus(), (3, 4), "normal"),
    ("Softmax", nn.Softmax(), (3, 4), "normal"),
    ("LogSoftmax", nn.LogSoftmax(), (3, 4), "normal"),
    ("Sequential", nn.Sequential(nn.Conv2d(2, 3, padding=1), nn.Tanh(), nn.AvgPool2d(2), nn.Flatten(),
                                 nn.Linear(3)), (2, 1, 4, 4), "normal"),
]


def _layer_input(kind, rng, shape):
    return _distinct(rng, shape) if kind == "distinct" else rng.standard_normal(shape)


@pytest.mark.parametrize("name,layer,shape,kind", LAYERS, ids=[row[0] for row in LAYERS])
def test_layer_shapes(name, layer, shape, kind, rng):
    params, out_shape = layer.init(random.key(0), shape)
    y = layer.apply(params, fnp.array(_layer_input(kind, rng, shape).astype(np.float32)))
    assert tuple(y.shape) == tuple(out_shape)
    # An unknown batch size (-1) passes through init.
    _, unknown = layer.init(random.key(0), (-1,) + shape[1:])
    assert unknown == (-1,) + tuple(out_shape[1:])


@pytest.mark.parametrize("name,layer,shape,kind", LAYERS, ids=[row[0] for row in LAYERS])
def test_layer_grads(name, layer, shape, kind, rng, x64):
    params, _ = layer.init(random.key(1), shape)
    params = tree_map(lambda p: fnp.array(np.asarray(p, np.float64) + 0.1 * rng.standard_normal(p.shape)), params)
    x = fnp.array(_layer_input(kind, rng, shape))
    if tree_leaves(params):
        check_grads(lambda p, a: layer.apply(p, a), (params, x), order=1)
    else:
        check_grads(lambda a: layer.apply(params, a), (x,), order=2)


def test_linear_and_conv_numerics(rng, x64):
    x = rng.standard_normal((4, 5))
    params, _ = nn.Linear(3).init(random.key(0), x.shape)
    params = {"w": fnp.array(rng.standard_normal((5, 3))), "b": fnp.array(rng.standard_normal(3))}
    np.testing.assert_allclose(np.asarray(nn.Linear(3).apply(params, fnp.array(x))),
                               x @ np.asarray(params["w"]) + np.asarray(params["b"]), rtol=1e-12)
    conv = nn.Conv2d(2, 3, padding=1)
    xc = rng.standard_normal((1, 2, 5, 5))
    cp = {"w": fnp.array(rng.standard_normal((2, 2, 3, 3))), "b": fnp.array(np.array([0.5, -1.0]))}
    expected = np_conv(xc, np.asarray(cp["w"]), (1, 1), (1, 1), (1, 1), 1) + np.array([0.5, -1.0])[:, None, None]
    np.testing.assert_allclose(np.asarray(conv.apply(cp, fnp.array(xc))), expected, rtol=1e-12)


def test_layer_norm_numerics(rng, x64):
    x = rng.standard_normal((3, 6)) * 4 + 2
    layer = nn.LayerNorm(eps=1e-5)
    params = {"scale": fnp.array(rng.standard_normal(6)), "bias": fnp.array(rng.standard_normal(6))}
    ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(np.asarray(layer.apply(params, fnp.array(x))),
                               ref * np.asarray(params["scale"]) + np.asarray(params["bias"]), rtol=1e-10)


def test_embedding(rng):
    layer = nn.Embedding(10, 4)
    params, out_shape = layer.init(random.key(0), (2, 3))
    ids = np.array([[1, 2, 9], [0, 0, 5]])
    out = layer.apply(params, fnp.array(ids))
    assert out.shape == out_shape == (2, 3, 4)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(params["table"])[ids])
    g = fg.grad(lambda p: fnp.sum(layer.apply(p, fnp.array(ids))))(params)["table"]
    np.testing.assert_array_equal(np.asarray(g)[:, 0], np.bincount(ids.ravel(), minlength=10))
    with pytest.raises(TypeError, match="integers"):
        layer.apply(params, fnp.zeros((2,)))


def test_layer_input_errors():
    params, _ = nn.Linear(3).init(random.key(0), (2, 5))
    with pytest.raises(ValueError, match="Linear: input f32\\[2,4\\] has size 4"):
        nn.Linear(3).apply(params, fnp.zeros((2, 4)))
    with pytest.raises(ValueError, match="Conv2d: expected a 4-D input"):
        nn.Conv2d(2, 3).apply(nn.Conv2d(2, 3).init(random.key(0), (1, 1, 5, 5))[0], fnp.zeros((1, 5, 5)))
    with pytest.raises(ValueError, match="Conv2d"):
        nn.Conv2d(2, 3).init(random.key(0), (1, 3, 2, 2))
    with pytest.raises(ValueError, match="padding='same'"):
        nn.Conv2d(2, 2, padding="same")
    with pytest.raises(TypeError, match="Layer"):
        nn.Sequential(nn.relu)


# --------------------------------------------------------------------------
# Dropout
# --------------------------------------------------------------------------


def test_dropout_eval_is_identity():
    x = fnp.ones((50, 40))
    layer = nn.Dropout(0.3)
    assert layer.apply((), x) is x
    assert layer.apply((), x, key=random.key(0), train=False) is x


def test_dropout_train_keeps_with_probability_and_rescales():
    rate = 0.3
    x = fnp.ones((200, 100))
    y = np.asarray(nn.Dropout(rate).apply((), x, key=random.key(0), train=True))
    kept = y != 0
    assert abs(kept.mean() - (1 - rate)) < 0.01          # 20,000 draws: std ~0.003
    np.testing.assert_allclose(y[kept], 1 / (1 - rate), rtol=1e-6)
    assert abs(y.mean() - 1.0) < 0.02                     # unbiased in expectation


def test_dropout_keys():
    x = fnp.ones((20, 20))
    layer = nn.Dropout(0.5)
    a = np.asarray(layer.apply((), x, key=random.key(1), train=True))
    b = np.asarray(layer.apply((), x, key=random.key(1), train=True))
    c = np.asarray(layer.apply((), x, key=random.key(2), train=True))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    with pytest.raises(ValueError, match="needs a random key"):
        layer.apply((), x, train=True)
    with pytest.raises(ValueError, match="rate"):
        nn.Dropout(1.0)
    # Sequential gives each dropout its own key: the two masks differ.
    model = nn.Sequential(nn.Dropout(0.5), nn.Activation(lambda v: v * 1.0), nn.Dropout(0.5))
    first = np.asarray(model.layers[0].apply((), x, key=random.split(random.key(3), 3)[0], train=True))
    both = np.asarray(model.apply(model.init(random.key(0), x.shape)[0], x, key=random.key(3), train=True))
    assert np.all((both != 0) <= (first != 0)) and (both != 0).sum() < (first != 0).sum()


def test_dropout_gradient_uses_the_mask():
    x = fnp.ones((10, 10))
    g = np.asarray(fg.grad(lambda v: fnp.sum(nn.Dropout(0.5).apply((), v, key=random.key(0), train=True)))(x))
    y = np.asarray(nn.Dropout(0.5).apply((), x, key=random.key(0), train=True))
    np.testing.assert_array_equal(g, y)


# --------------------------------------------------------------------------
# Initializers
# --------------------------------------------------------------------------

# (initializer, shape, expected std, uniform bound or None)
INITS = [
    (init.he_normal(), (400, 300), math.sqrt(2 / 400), None),
    (init.kaiming_uniform(), (400, 300), math.sqrt(2 / 400), math.sqrt(6 / 400)),
    (init.glorot_normal(), (400, 300), math.sqrt(2 / 700), None),
    (init.xavier_uniform(), (400, 300), math.sqrt(2 / 700), math.sqrt(6 / 700)),
    (init.lecun_normal(), (400, 300), math.sqrt(1 / 400), None),
    (init.he_normal(in_axis=1, out_axis=0), (64, 32, 3, 3), math.sqrt(2 / (32 * 9)), None),
    (init.normal(0.05), (300, 300), 0.05, None),
    (init.uniform(0.2), (300, 300), 0.2 / math.sqrt(3), 0.2),
]


@pytest.mark.parametrize("initializer,shape,std,bound", INITS)
def test_initializer_statistics(initializer, shape, std, bound):
    w = np.asarray(initializer(random.key(0), shape))
    assert w.shape == shape and w.dtype == np.float32
    assert abs(w.mean()) < 0.05 * std + 1e-3
    assert abs(w.std() / std - 1) < 0.03
    if bound is not None:
        assert np.abs(w).max() <= bound


def test_constant_initializers():
    np.testing.assert_array_equal(np.asarray(init.zeros(random.key(0), (2, 3))), np.zeros((2, 3)))
    np.testing.assert_array_equal(np.asarray(init.ones(random.key(0), (2,), np.float64)), np.ones(2))
    np.testing.assert_array_equal(np.asarray(init.constant(0.5)(random.key(0), (2,))), [0.5, 0.5])
    with pytest.raises(ValueError, match="mode"):
        init.variance_scaling(1.0, "fan_sum", "normal")


# --------------------------------------------------------------------------
# End to end: a tiny model learns under jit(value_and_grad)
# --------------------------------------------------------------------------


def test_tiny_cnn_trains_under_jit(rng):
    model = nn.Sequential(nn.Conv2d(4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(2))
    params, _ = model.init(random.key(0), (-1, 1, 6, 6))
    x = rng.standard_normal((32, 1, 6, 6)).astype(np.float32)
    y = (x[:, 0, :3].sum(axis=(1, 2)) > x[:, 0, 3:].sum(axis=(1, 2))).astype(np.int32)

    @fg.jit
    def step(p, xb, yb):
        loss, g = fg.value_and_grad(lambda q: nn.cross_entropy(model.apply(q, xb), yb))(p)
        return tree_map(lambda a, b: a - 0.1 * b, p, g), loss

    losses = []
    for _ in range(60):
        params, loss = step(params, x, y)
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0]
    assert step.cache_info()["misses"] == 1
