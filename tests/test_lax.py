"""funcgrad.lax: the primitive-level wrappers against numpy (float64) and finite differences.

The primitives themselves are covered by the op table (tests/test_ops.py, through
funcgrad.numpy); these tests hold the wrappers that lax adds (argument
conventions, dimension numbers, composites such as broadcast_in_dim).
"""
from __future__ import annotations

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.lax as lax
import funcgrad.numpy as fnp
from funcgrad.testing import check_grads


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def _close(out, expected, rtol=1e-12):
    np.testing.assert_allclose(np.asarray(out, dtype=np.float64), expected, rtol=rtol, atol=rtol)


UNARY = [("exp2", np.exp2), ("log2", np.log2), ("log1p", np.log1p), ("expm1", np.expm1), ("tan", np.tan),
         ("asin", np.arcsin), ("acos", np.arccos), ("atan", np.arctan), ("abs", np.abs), ("floor", np.floor),
         ("ceil", np.ceil), ("round", np.round), ("is_finite", np.isfinite), ("isnan", np.isnan),
         ("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("sin", np.sin), ("cos", np.cos),
         ("tanh", np.tanh), ("neg", np.negative), ("sign", np.sign)]
BINARY = [("max", np.maximum), ("min", np.minimum), ("pow", np.power), ("atan2", np.arctan2), ("rem", np.mod),
          ("floor_divide", np.floor_divide), ("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
          ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal), ("add", np.add),
          ("sub", np.subtract), ("mul", np.multiply), ("div", np.true_divide)]


@pytest.mark.parametrize("name,ref", UNARY, ids=[n for n, _ in UNARY])
def test_unary_wrappers(name, ref, rng, x64):
    x = rng.uniform(0.1, 0.9, (3, 4))
    _close(getattr(lax, name)(fnp.asarray(x)), ref(x))


@pytest.mark.parametrize("name,ref", BINARY, ids=[n for n, _ in BINARY])
def test_binary_wrappers_broadcast_as_numpy(name, ref, rng, x64):
    x, y = rng.uniform(0.5, 2.0, (3, 4)), rng.uniform(0.5, 2.0, (4,))
    _close(getattr(lax, name)(fnp.asarray(x), fnp.asarray(y)), ref(x, y))


def test_logical_wrappers():
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    for name, ref in [("logical_and", np.logical_and), ("logical_or", np.logical_or),
                      ("logical_xor", np.logical_xor)]:
        np.testing.assert_array_equal(np.asarray(getattr(lax, name)(fnp.asarray(a), fnp.asarray(b))), ref(a, b))
    np.testing.assert_array_equal(np.asarray(lax.logical_not(fnp.asarray(a))), ~a)


def test_broadcast_in_dim(rng, x64):
    x = rng.standard_normal((3, 2))
    out = lax.broadcast_in_dim(fnp.asarray(x), (3, 4, 2), (0, 2))
    _close(out, np.broadcast_to(x[:, None, :], (3, 4, 2)))
    check_grads(lambda v: lax.broadcast_in_dim(v, (2, 3, 5, 2), (1, 3)), (fnp.asarray(x),), order=2)
    with pytest.raises(ValueError, match="broadcast_in_dim: broadcast_dimensions"):
        lax.broadcast_in_dim(fnp.asarray(x), (3, 4, 2), (2, 0))


def test_expand_dims_and_squeeze(rng, x64):
    x = rng.standard_normal((3, 2))
    e = lax.expand_dims(fnp.asarray(x), (0, 3))
    assert e.shape == (1, 3, 2, 1)
    _close(lax.squeeze(e, (0, 3)), x)
    with pytest.raises(ValueError, match="squeeze: axis 1 .* has length 3, not 1"):
        lax.squeeze(e, (1,))


def test_rev_and_concatenate(rng, x64):
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((2, 1))
    _close(lax.rev(fnp.asarray(x), (0, 1)), x[::-1, ::-1])
    _close(lax.concatenate([fnp.asarray(x), fnp.asarray(y)], 1), np.concatenate([x, y], 1))
    check_grads(lambda a, b: lax.rev(lax.concatenate([a, b], 1), (1,)), (fnp.asarray(x), fnp.asarray(y)), order=2)


@pytest.mark.parametrize("x_shape,y_shape,dims,spec", [
    ((3, 4), (4, 5), (((1,), (0,)), ((), ())), "ij,jk->ik"),
    ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,))), "bij,bjk->bik"),
    ((4, 3), (5, 4), (((0,), (1,)), ((), ())), "ji,kj->ik"),
    ((2, 4, 3), (3, 2, 4), (((1,), (2,)), ((0,), (1,))), "bji,kbj->bik"),
])
def test_dot_general_matches_einsum(x_shape, y_shape, dims, spec, rng, x64):
    x, y = rng.standard_normal(x_shape), rng.standard_normal(y_shape)
    _close(lax.dot_general(fnp.asarray(x), fnp.asarray(y), dims), np.einsum(spec, x, y))
    check_grads(lambda a, b: lax.dot_general(a, b, dims), (fnp.asarray(x), fnp.asarray(y)), order=2)


def test_reductions_and_cumsum(rng, x64):
    x = rng.standard_normal((3, 4))
    _close(lax.reduce_max(fnp.asarray(x), (1,)), x.max(1))
    _close(lax.reduce_min(fnp.asarray(x), 0), x.min(0))
    _close(lax.reduce_prod(fnp.asarray(x), (0, 1)), x.prod())
    np.testing.assert_array_equal(np.asarray(lax.argmax(fnp.asarray(x), 1)), x.argmax(1))
    np.testing.assert_array_equal(np.asarray(lax.argmin(fnp.asarray(x), 0)), x.argmin(0))
    _close(lax.cumsum(fnp.asarray(x), 1, reverse=True), np.cumsum(x[:, ::-1], 1)[:, ::-1])
    check_grads(lambda v: lax.reduce_prod(v, (1,)), (fnp.asarray(x),), order=2)


def test_scatter_forms(rng, x64):
    x = rng.standard_normal((4, 3))
    idx = np.array([0, 2, 0])
    expected = x.copy()
    np.add.at(expected, idx, 1.5)
    _close(lax.scatter_add(fnp.asarray(x), idx, 1.5), expected)
    expected = x.copy()
    expected[1:3] = -1.0
    _close(lax.scatter(fnp.asarray(x), slice(1, 3), -1.0), expected)
    g = fg.grad(lambda v: fnp.sum(lax.scatter_add(v, idx, v[:3] * 2.0) ** 2))(fnp.asarray(x))
    assert g.shape == x.shape


def test_constants_and_stop_gradient(x64):
    x = fnp.asarray(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(np.asarray(lax.full((2, 2), 3, "int32")), np.full((2, 2), 3, np.int32))
    z = lax.zeros_like_array(x)
    assert z.shape == (2, 3) and z.dtype == x.dtype and not np.asarray(z).any()
    _close(lax.full_like(x, 2.5), np.full((2, 3), 2.5))
    _close(fg.grad(lambda v: fnp.sum(v * lax.stop_gradient(v)))(x), np.arange(6.0).reshape(2, 3))


def test_every_public_name_exists_and_primitives_are_exported():
    missing = [n for n in lax.__all__ if not hasattr(lax, n)]
    assert missing == []
    assert lax.sin_p.name == "sin" and lax.reduce_sum_p.name == "reduce_sum"
    assert list(lax.__all__) == sorted(lax.__all__)
