"""``funcgrad.nn``'s jax.nn-compatible activations and normalisers: values against float64 numpy formulas,
derivatives against finite differences away from kinks, and JAX's choices at the kinks."""
from __future__ import annotations

import math

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.nn as nn
import funcgrad.numpy as fnp
from funcgrad.testing import check_grads

ALPHA, SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _relu6(x):
    return np.minimum(np.maximum(x, 0), 6)


# name -> numpy float64 formula
REFERENCE = {
    "elu": lambda x: np.where(x > 0, x, np.expm1(x)),
    "celu": lambda x: np.maximum(x, 0) + np.expm1(np.minimum(x, 0)),
    "selu": lambda x: SCALE * np.where(x > 0, x, ALPHA * np.expm1(x)),
    "relu6": _relu6,
    "hard_sigmoid": lambda x: _relu6(x + 3) / 6,
    "hard_silu": lambda x: x * _relu6(x + 3) / 6,
    "hard_swish": lambda x: x * _relu6(x + 3) / 6,
    "hard_tanh": lambda x: np.clip(x, -1, 1),
    "log_sigmoid": lambda x: -np.logaddexp(0, -x),
    "soft_sign": lambda x: x / (np.abs(x) + 1),
    "mish": lambda x: x * np.tanh(np.logaddexp(0, x)),
    "squareplus": lambda x: (x + np.sqrt(x * x + 4)) / 2,
    "sparse_plus": lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4)),
    "sparse_sigmoid": lambda x: np.clip(x + 1, 0, 2) / 2,
    "identity": lambda x: x,
}
# Points away from every kink (+-1, 0, 3, 6, -3), both signs, large and small.
POINTS = np.array([-7.5, -3.7, -2.2, -0.6, -0.05, 0.3, 0.8, 1.7, 4.4, 6.9, 12.0])


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_values_and_derivatives(x64, name):
    f = getattr(nn, name)
    np.testing.assert_allclose(np.asarray(f(fnp.array(POINTS))), REFERENCE[name](POINTS), rtol=1e-12, atol=1e-14)
    check_grads(f, (fnp.array(POINTS),), order=2)


@pytest.mark.parametrize("name", ["elu", "relu6", "log_sigmoid", "mish", "sparse_plus"])
def test_float32_and_nan(name):
    f = getattr(nn, name)
    out = f(fnp.array(np.append(POINTS, np.nan).astype(np.float32)))
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out)[:-1], REFERENCE[name](POINTS), rtol=1e-5, atol=1e-6)
    assert np.isnan(np.asarray(out)[-1])


# JAX 0.10.2's derivatives at the kinks: jax.grad(jax.nn.NAME)(x).
KINKS = [("relu6", 0.0, 0.0), ("relu6", 6.0, 0.0), ("hard_sigmoid", -3.0, 0.0), ("hard_sigmoid", 3.0, 0.0),
         ("hard_tanh", 1.0, 1.0), ("hard_tanh", -1.0, 1.0), ("sparse_plus", 1.0, 1.0), ("sparse_plus", -1.0, 0.0),
         ("sparse_sigmoid", 1.0, 0.25), ("celu", 0.0, 1.0), ("elu", 0.0, 1.0), ("selu", 0.0, SCALE * ALPHA),
         ("soft_sign", 0.0, 1.0)]


@pytest.mark.parametrize("name,x,expected", KINKS)
def test_derivative_at_kinks_as_jax(name, x, expected):
    assert float(fg.grad(getattr(nn, name))(x)) == pytest.approx(expected, rel=1e-6)


def test_elu_large_negative_and_positive_have_finite_gradients(x64):
    x = fnp.array([-1000.0, 1000.0])
    np.testing.assert_allclose(np.asarray(fg.grad(lambda x: fnp.sum(nn.elu(x)))(x)), [0.0, 1.0])


def test_log1mexp(x64):
    x = np.array([1e-8, 1e-3, 0.5, math.log(2.0), 3.0, 40.0])
    # float64 references in the form accurate for each range (Maechler)
    want = np.array([math.log(-math.expm1(-v)) if v < 0.7 else math.log1p(-math.exp(-v)) for v in x])
    np.testing.assert_allclose(np.asarray(nn.log1mexp(fnp.array(x))), want, rtol=1e-12)
    check_grads(nn.log1mexp, (fnp.array(x[2:]),), order=2)   # FD needs moderate curvature


def test_glu(x64):
    x = np.random.default_rng(0).standard_normal((3, 4))
    np.testing.assert_allclose(np.asarray(nn.glu(fnp.array(x))), x[:, :2] * _sigmoid(x[:, 2:]), rtol=1e-12)
    check_grads(nn.glu, (fnp.array(x),), order=2)
    with pytest.raises(ValueError, match="glu: axis 0 of f64\\[3,4\\] must exist and have an even size"):
        nn.glu(fnp.array(x), axis=0)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 1, (0, 2)])
def test_logmeanexp_with_where(x64, axis, keepdims):
    rng = np.random.default_rng(1)
    x, mask = rng.standard_normal((2, 3, 4)), rng.random((2, 3, 4)) > 0.3
    mask[:, :, 0] = True            # no empty reduction
    got = nn.logmeanexp(fnp.array(x), axis=axis, where=fnp.array(mask), keepdims=keepdims)
    e = np.where(mask, np.exp(x), 0.0)
    want = np.log(e.sum(axis=axis, keepdims=keepdims) / mask.sum(axis=axis, keepdims=keepdims))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    plain = np.log(np.mean(np.exp(x), axis=axis, keepdims=keepdims))
    np.testing.assert_allclose(np.asarray(nn.logmeanexp(fnp.array(x), axis=axis, keepdims=keepdims)), plain,
                               rtol=1e-12)


@pytest.mark.parametrize("algorithm", ["fast", "stable"])
def test_standardize(x64, algorithm):
    rng = np.random.default_rng(2)
    x, mask = rng.standard_normal((3, 5)) * 3 + 1, rng.random((3, 5)) > 0.3
    mask[:, :2] = True
    got = nn.standardize(fnp.array(x), where=fnp.array(mask), algorithm=algorithm)
    m = np.where(mask, x, 0).sum(-1, keepdims=True) / mask.sum(-1, keepdims=True)
    v = np.where(mask, (x - m) ** 2, 0).sum(-1, keepdims=True) / mask.sum(-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(got), (x - m) / np.sqrt(v + 1e-5), rtol=1e-10)
    check_grads(lambda x: nn.standardize(x, axis=0, algorithm=algorithm), (fnp.array(x),), order=2)
    with pytest.raises(ValueError, match="algorithm must be 'fast' or 'stable'"):
        nn.standardize(fnp.array(x), algorithm="exact")


def test_jit_and_vmap_agree_with_eager():
    x = fnp.array(np.linspace(-8, 8, 24).reshape(4, 6).astype(np.float32))

    def f(x):
        return nn.mish(x) + nn.hard_silu(x) + nn.selu(x) + nn.sparse_plus(x)

    eager = np.asarray(f(x))
    np.testing.assert_allclose(np.asarray(fg.jit(f)(x)), eager, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(fg.vmap(f)(x)), eager, rtol=1e-6, atol=1e-6)
