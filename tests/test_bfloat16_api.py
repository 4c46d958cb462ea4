"""bfloat16 through the user-facing API: dtype utilities, creation, printing and conversion, weakly typed
Python scalars, random draws, nn functions, optimizers, checkpoints and testing.check_grads.

References are numpy in float64 on the same (exactly representable) bfloat16 values, and JAX's documented
promotion table; the op table on bfloat16 inputs is tests/test_bfloat16_ops.py.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import dtypes, nn, optim, random, testing
from funcgrad.optim import serialization

BF16 = np.dtype(fnp.bfloat16)
EPS = 2.0 ** -7     # bfloat16's machine epsilon


@pytest.fixture(autouse=True)
def _x32(x32):
    yield


def bf16(values) -> np.ndarray:
    """``values`` rounded to bfloat16 (numpy, through ml_dtypes)."""
    return np.asarray(values, np.float64).astype(BF16)


def bits(x) -> np.ndarray:
    return np.asarray(x).view(np.uint16)


def assert_bf16_close(actual, expected, rtol=4 * EPS, atol=None):
    assert actual.dtype == BF16, f"dtype {actual.dtype}, expected bfloat16"
    expected = np.asarray(expected, np.float64)
    scale = float(np.max(np.abs(expected), initial=1.0))
    np.testing.assert_allclose(np.asarray(actual).astype(np.float64), expected, rtol=rtol,
                               atol=rtol * scale if atol is None else atol)


# ------------------------------------------------------------------ dtype utilities


def test_bfloat16_is_a_real_floating_dtype():
    assert fnp.issubdtype(fnp.bfloat16, fnp.floating)
    assert fnp.issubdtype(BF16, fnp.inexact) and fnp.issubdtype("bfloat16", fnp.number)
    assert fnp.issubdtype(fnp.bfloat16, fnp.bfloat16)
    assert not fnp.issubdtype(fnp.bfloat16, fnp.integer)
    assert not fnp.issubdtype(fnp.bfloat16, fnp.complexfloating)
    assert not fnp.issubdtype(fnp.float32, fnp.bfloat16)
    assert fnp.isdtype(fnp.bfloat16, "real floating") and fnp.isdtype(BF16, ("integral", "numeric"))
    assert not fnp.isdtype(BF16, "complex floating") and not fnp.isdtype(BF16, "integral")
    assert fnp.isdtype(BF16, BF16) and not fnp.isdtype(BF16, np.dtype(np.float32))
    assert fnp.dtype("bfloat16") == BF16 and dtypes.bfloat16 == BF16


def test_finfo():
    info = fnp.finfo(fnp.bfloat16)
    assert float(info.eps) == 2.0 ** -7
    assert float(info.max) == (2 - 2.0 ** -7) * 2.0 ** 127
    assert float(info.tiny) == 2.0 ** -126
    assert info.bits == 16 and info.nmant == 7
    assert float(fnp.finfo(fnp.ones(2, fnp.bfloat16)).eps) == 2.0 ** -7   # an array stands for its dtype


# JAX's promotion table for bfloat16 (jax.numpy.promote_types / result_type)
@pytest.mark.parametrize("other, expected", [
    (np.float16, np.float32), (np.float32, np.float32), (np.float64, np.float64), (np.int32, BF16),
    (np.uint8, BF16), (np.int8, BF16), (np.bool_, BF16), (np.complex64, np.complex64), (BF16, BF16)])
def test_promote_types(other, expected):
    assert fnp.promote_types(fnp.bfloat16, other) == np.dtype(expected)
    assert fnp.promote_types(other, fnp.bfloat16) == np.dtype(expected)


def test_result_type():
    x = fnp.ones(2, fnp.bfloat16)
    assert fnp.result_type(fnp.bfloat16, 2.0) == BF16          # Python scalars are weak
    assert fnp.result_type(x, 2) == BF16
    assert fnp.result_type(x, 2.0) == BF16
    assert fnp.result_type(fnp.bfloat16, fnp.float32) == np.float32
    assert fnp.result_type(fnp.bfloat16, fnp.float16) == np.float32
    assert fnp.result_type(fnp.bfloat16, fnp.float64) == np.float32   # canonical: x64 is off
    assert dtypes.result_type(fnp.bfloat16, fnp.float16) == np.float32
    assert dtypes.result_type(fnp.bfloat16, fnp.int32) == BF16
    assert dtypes.result_type(fnp.bfloat16, 2.0) == BF16
    assert dtypes.result_type("bfloat16", float) == BF16
    assert dtypes.result_type(fnp.bfloat16, 1j) == np.complex64


def test_can_cast():
    # as jnp.can_cast: bfloat16 widens to float32, nothing wider narrows to it, small integers fit
    assert fnp.can_cast(fnp.bfloat16, fnp.float32)
    assert not fnp.can_cast(fnp.float32, fnp.bfloat16)
    assert not fnp.can_cast(fnp.float16, fnp.bfloat16) and not fnp.can_cast(fnp.bfloat16, fnp.float16)
    assert fnp.can_cast(fnp.int8, fnp.bfloat16) and not fnp.can_cast(fnp.bfloat16, fnp.int32)


# ------------------------------------------------------------------ creation and conversion


def test_creation_rounds_to_bfloat16():
    values = [1.0, 2.5, 3.3, -1e-3, 1e10]
    for made in (fnp.array(values, dtype=fnp.bfloat16), fnp.array(values, dtype="bfloat16"),
                 fnp.asarray(values, dtype=BF16), fnp.array(values).astype(fnp.bfloat16),
                 fnp.asarray(bf16(values))):
        assert made.dtype == BF16
        np.testing.assert_array_equal(bits(made), bits(bf16(values)))


def test_creation_functions():
    np.testing.assert_array_equal(bits(fnp.zeros((2, 3), fnp.bfloat16)), bits(bf16(np.zeros((2, 3)))))
    np.testing.assert_array_equal(bits(fnp.ones(3, "bfloat16")), bits(bf16(np.ones(3))))
    np.testing.assert_array_equal(bits(fnp.full((2,), 3.3, fnp.bfloat16)), bits(bf16([3.3, 3.3])))
    np.testing.assert_array_equal(bits(fnp.eye(3, dtype=fnp.bfloat16)), bits(bf16(np.eye(3))))
    np.testing.assert_array_equal(bits(fnp.arange(5, dtype=fnp.bfloat16)), bits(bf16(np.arange(5))))
    np.testing.assert_array_equal(bits(fnp.arange(0.0, 1.0, 0.25, dtype=fnp.bfloat16)), bits(bf16([0, .25, .5, .75])))
    assert_bf16_close(fnp.linspace(0.0, 1.0, 7, dtype=fnp.bfloat16), np.linspace(0.0, 1.0, 7), rtol=EPS)
    x = fnp.ones(3, fnp.bfloat16)
    assert fnp.zeros_like(x).dtype == BF16 and fnp.full_like(x, 2.5).dtype == BF16
    assert fnp.ones_like(x, dtype=fnp.float32).dtype == np.float32


def test_scalar_type_behaves_as_numpy_scalar_types():
    # fnp.float32(1.5) is numpy's scalar; fnp.bfloat16(1.5) is ml_dtypes' (jnp.bfloat16 is that type too)
    s = fnp.bfloat16(1.5)
    assert type(s) is type(np.asarray(bf16(1.5))[()]) and float(s) == 1.5
    assert float(fnp.bfloat16(3.3)) == float(bf16(3.3))
    assert fnp.asarray(s).dtype == BF16 and fnp.asarray(s).shape == ()
    assert (fnp.ones(2, fnp.bfloat16) + s).dtype == BF16
    assert (fnp.ones(2) + s).dtype == np.float32   # a numpy scalar is strongly typed


def test_printing_matches_jax():
    # JAX prints bfloat16 with numpy's formatting of ml_dtypes values: no trailing dots
    assert repr(fnp.array([1, 2.5], dtype=fnp.bfloat16)) == "Array([1, 2.5], dtype=bfloat16)"
    assert str(fnp.array([1, 2.5], dtype=fnp.bfloat16)) == "[1 2.5]"
    assert repr(fnp.array(3.25, dtype=fnp.bfloat16)) == "Array(3.25, dtype=bfloat16)"
    assert repr(fnp.ones((2, 2), fnp.bfloat16)) == "Array([[1, 1],\n       [1, 1]], dtype=bfloat16)"
    assert repr(fnp.array([np.nan, -np.inf], fnp.bfloat16)) == "Array([nan, -inf], dtype=bfloat16)"
    assert f"{fnp.array(3.25, dtype=fnp.bfloat16):.3f}" == "3.250"


def test_conversions_out():
    x = fnp.array([1.5, -2.0, 3.3], fnp.bfloat16)
    assert float(x[0]) == 1.5 and int(x[1]) == -2 and complex(x[0]) == 1.5 + 0j
    assert x[2].item() == float(bf16(3.3)) and type(x[2].item()) is float
    assert x.tolist() == [1.5, -2.0, float(bf16(3.3))]
    out = np.asarray(x)
    assert out.dtype == BF16 and not out.flags.writeable
    np.testing.assert_array_equal(bits(out), bits(bf16([1.5, -2.0, 3.3])))
    assert x.__array__().dtype == BF16
    assert np.asarray(x, dtype=np.float32).dtype == np.float32


def test_dlpack_export_is_a_clear_error():
    x = fnp.ones(3, fnp.bfloat16)
    with pytest.raises(BufferError, match=r"bfloat16 arrays cannot be exported through DLPack.*view\(np.uint16\).*"
                                          r"astype\(fnp.float32\)"):
        np.from_dlpack(x)
    np.testing.assert_array_equal(np.from_dlpack(fnp.ones(3)), np.ones(3, np.float32))   # other dtypes still go


# ------------------------------------------------------------------ weakly typed Python scalars


def test_python_scalars_are_weak():
    vals = bf16([0.5, 1.5, -2.0, 3.3])
    x = fnp.asarray(vals)
    v64 = vals.astype(np.float64)
    for out, ref in [(2.0 - x, 2.0 - v64), (x - 2.0, v64 - 2.0), (x * 3, v64 * 3), (x + True, v64 + 1),
                     (fnp.subtract(x, 0.25), v64 - 0.25), (fnp.divide(x, 2), v64 / 2)]:
        assert_bf16_close(out, ref, rtol=EPS)
    # the scalar is rounded to bfloat16 first, as JAX converts a weak scalar to the array's dtype
    np.testing.assert_array_equal(bits(x - 0.1), bits((v64 - float(bf16(0.1))).astype(BF16)))
    assert (x * 1j).dtype == np.complex64
    assert (x + fnp.ones(4, fnp.float16)).dtype == np.float32


def test_functions_keep_weak_arguments_weak():
    vals = bf16([[0.5, 1.5, -2.0], [3.3, 0.0, 1.0]])
    x, v64 = fnp.asarray(vals), vals.astype(np.float64)
    assert_bf16_close(fnp.clip(x, -1.0, 1.0), np.clip(v64, -1, 1), rtol=EPS)
    assert_bf16_close(fnp.select([x > 1, x < 0], [x, -x], 0.5), np.select([v64 > 1, v64 < 0], [v64, -v64], 0.5),
                      rtol=EPS)
    assert_bf16_close(fnp.diff(x, prepend=0.5), np.diff(v64, prepend=0.5), rtol=EPS)


def test_reductions_and_statistics_in_bfloat16():
    # bfloat16 results, accumulated in float32 (rounded once): a sum of 1000 ones is exact
    vals = bf16([[0.5, 1.5, -2.0, 0.25], [3.3, 0.0, 1.0, -0.75], [2.0, 1.0, 0.5, 4.0]])
    x, v64 = fnp.asarray(vals), vals.astype(np.float64)
    assert_bf16_close(fnp.mean(x, axis=0), v64.mean(0))
    assert_bf16_close(x.mean(), v64.mean())
    assert_bf16_close(fnp.var(x, axis=1), v64.var(1))
    assert_bf16_close(fnp.average(x, axis=1, weights=fnp.asarray(bf16([1, 2, 3, 4]))),
                      np.average(v64, axis=1, weights=[1, 2, 3, 4]))
    assert_bf16_close(x @ x.T, v64 @ v64.T)
    assert_bf16_close(fnp.cov(x), np.cov(v64))
    assert_bf16_close(fnp.corrcoef(x), np.corrcoef(v64), atol=8 * EPS)
    assert fnp.median(x).dtype == BF16 and fnp.quantile(x, 0.3).dtype == BF16    # a Python q is weak
    assert fnp.percentile(x, 40).dtype == BF16 and fnp.nanpercentile(x, 40.0).dtype == BF16
    assert fnp.quantile(x, fnp.array([0.3])).dtype == np.float32   # a float32 array is strongly typed
    assert_bf16_close(fnp.quantile(x, 0.3, axis=1), np.quantile(v64, 0.3, axis=1))
    assert float(fnp.sum(fnp.ones(1000, fnp.bfloat16))) == 1000.0
    assert float(fnp.mean(fnp.full(1000, 0.1, fnp.bfloat16))) == float(bf16(0.1))


def test_functions_counting_bfloat16_as_float():
    x = fnp.asarray(bf16([-1.5, 0.0, 2.0]))
    np.testing.assert_array_equal(fnp.signbit(-x), [False, True, True])   # -(-1.5), -0.0, -2
    np.testing.assert_array_equal(np.asarray(fnp.copysign(x, -1.0)).astype(np.float64), [-1.5, -0.0, -2.0])
    np.testing.assert_array_equal(np.asarray(fnp.spacing(x[::2])).astype(np.float64),
                                  np.spacing(np.asarray(x[::2])).astype(np.float64))
    spectrum = fnp.fft.rfft(x)
    assert spectrum.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(spectrum), np.fft.rfft(np.asarray(x).astype(np.float64)), atol=1e-6)


def test_scipy_stats_in_bfloat16():
    import scipy.stats as ss
    import funcgrad.scipy.stats as st
    vals = bf16([0.25, 0.5, 1.5, 2.0, 7.0])
    x, v = fnp.asarray(vals), vals.astype(np.float64)
    for out, ref in [(st.norm.logpdf(x, 0.0, 2.0), ss.norm.logpdf(v, 0.0, 2.0)),
                     (st.gamma.logpdf(x, 2.0), ss.gamma.logpdf(v, 2.0)),
                     (st.beta.logpdf(x / 8, 2.0, 3.0), ss.beta.logpdf(v / 8, 2.0, 3.0)),
                     (st.uniform.logpdf(x, 0.0, 2.0), ss.uniform.logpdf(v, 0.0, 2.0)),
                     (st.t.logpdf(x, 3.0), ss.t.logpdf(v, 3.0)),
                     (st.laplace.cdf(x), ss.laplace.cdf(v)),
                     (st.bernoulli.ppf(x / 8, 0.25), ss.bernoulli.ppf(v / 8, 0.25))]:
        assert out.dtype == BF16, out.dtype
        finite = np.isfinite(ref)
        np.testing.assert_array_equal(np.isfinite(np.asarray(out).astype(np.float64)), finite)
        np.testing.assert_allclose(np.asarray(out).astype(np.float64)[finite], ref[finite], rtol=4 * EPS,
                                   atol=4 * EPS)


# ------------------------------------------------------------------ random


@pytest.mark.parametrize("name, draw, mean, std, lo, hi", [
    ("uniform", lambda k: random.uniform(k, (4000,), fnp.bfloat16, -1.0, 3.0), 1.0, 4 / 12 ** 0.5, -1.0, 3.0),
    ("normal", lambda k: random.normal(k, (4000,), fnp.bfloat16), 0.0, 1.0, -np.inf, np.inf),
    ("truncated_normal", lambda k: random.truncated_normal(k, -1.0, 1.0, (4000,), fnp.bfloat16), 0.0, 0.5376, -1, 1),
    ("exponential", lambda k: random.exponential(k, (4000,), fnp.bfloat16), 1.0, 1.0, 0.0, np.inf),
    ("gamma", lambda k: random.gamma(k, 3.0, (4000,), fnp.bfloat16), 3.0, 3 ** 0.5, 0.0, np.inf),
    ("laplace", lambda k: random.laplace(k, (4000,), fnp.bfloat16), 0.0, 2 ** 0.5, -np.inf, np.inf),
])
def test_random_draws_in_bfloat16(name, draw, mean, std, lo, hi):
    x = draw(random.key(0))
    assert x.dtype == BF16, f"{name}: {x.dtype}"
    v = np.asarray(x).astype(np.float64)
    assert np.all((v >= lo) & (v <= hi)) and np.all(np.isfinite(v)), name
    # 4000 draws: the sample mean is within ~4 standard errors, the std within 10%
    assert abs(v.mean() - mean) < 4 * std / np.sqrt(v.size) + 2 * EPS * max(1.0, abs(mean)), (name, v.mean())
    assert abs(v.std() - std) < 0.1 * std, (name, v.std())
    assert len(np.unique(v)) > 20, name     # not a handful of repeated values


def test_random_uniform_stays_half_open_in_bfloat16():
    v = np.asarray(random.uniform(random.key(1), (20000,), fnp.bfloat16)).astype(np.float64)
    assert v.min() >= 0.0 and v.max() < 1.0
    assert len(np.unique(v)) == 128      # 7 mantissa bits: the multiples of 2**-7 in [0, 1)


def test_random_bfloat16_dtype_string_and_bad_dtype():
    assert random.normal(random.key(0), (3,), "bfloat16").dtype == BF16
    with pytest.raises(TypeError, match=r"random.normal: dtype must be a float type \(bfloat16, float16/32/64\)"):
        random.normal(random.key(0), (3,), np.int32)


def test_initializers_in_bfloat16():
    key = random.key(0)
    for init in (nn.initializers.normal(0.5), nn.initializers.glorot_uniform(), nn.initializers.he_normal(),
                 nn.initializers.lecun_normal(), nn.initializers.uniform(0.5), nn.initializers.constant(0.3)):
        w = init(key, (64, 32), fnp.bfloat16)
        assert w.dtype == BF16 and w.shape == (64, 32) and np.all(np.isfinite(np.asarray(w).astype(np.float64)))
    w = np.asarray(nn.initializers.glorot_uniform()(key, (64, 32), fnp.bfloat16)).astype(np.float64)
    limit = np.sqrt(6 / (64 + 32))
    assert np.abs(w).max() <= limit * (1 + EPS) and w.std() == pytest.approx(limit / np.sqrt(3), rel=0.1)
    assert np.all(np.asarray(nn.initializers.zeros(key, (2, 3), fnp.bfloat16)).astype(np.float64) == 0)


# ------------------------------------------------------------------ nn


def _softmax64(v):
    e = np.exp(v - v.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_nn_functions_in_bfloat16():
    vals = bf16(np.linspace(-3, 3, 12).reshape(3, 4))
    x, v = fnp.asarray(vals), vals.astype(np.float64)
    from scipy.special import erf
    cases = [
        (nn.relu(x), np.maximum(v, 0)),
        (nn.gelu(x, approximate=False), 0.5 * v * (1 + erf(v / np.sqrt(2)))),
        (nn.gelu(x), 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))),
        (nn.sigmoid(x), 1 / (1 + np.exp(-v))),
        (nn.silu(x), v / (1 + np.exp(-v))),
        (nn.softmax(x), _softmax64(v)),
        (nn.log_softmax(x), np.log(_softmax64(v))),
        (nn.logsumexp(x, axis=-1), np.log(np.exp(v).sum(-1))),
        (nn.standardize(x), (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + 1e-5)),
    ]
    for out, ref in cases:
        assert_bf16_close(out, ref, atol=4 * EPS)


def test_losses_and_layer_norm_in_bfloat16():
    vals = bf16(np.linspace(-2, 2, 12).reshape(3, 4))
    x, v = fnp.asarray(vals), vals.astype(np.float64)
    labels = np.array([0, 3, 1])
    per_example = -np.log(_softmax64(v))[np.arange(3), labels]
    assert_bf16_close(nn.cross_entropy(x, fnp.asarray(labels), reduction="none"), per_example)
    assert_bf16_close(nn.cross_entropy(x, fnp.asarray(labels)), per_example.mean())
    assert_bf16_close(nn.mse(x, x * 0.5), np.mean((0.5 * v) ** 2))
    assert nn.one_hot(fnp.asarray(labels), 4, dtype=fnp.bfloat16).dtype == BF16
    params = {"scale": fnp.asarray(bf16([1.0, 2.0, 0.5, 1.0])), "bias": fnp.asarray(bf16([0.0, 0.1, 0.0, -1.0]))}
    out = nn.LayerNorm().apply(params, x)
    ref = (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + 1e-5)
    assert_bf16_close(out, ref * [1.0, 2.0, 0.5, 1.0] + bf16([0.0, 0.1, 0.0, -1.0]).astype(np.float64),
                      atol=8 * EPS)


# ------------------------------------------------------------------ optim


def _params():
    return {"w": fnp.asarray(bf16(np.linspace(-1, 1, 6).reshape(2, 3))), "b": fnp.asarray(bf16([0.5, -0.25, 1.0]))}


def _grads():
    return {"w": fnp.asarray(bf16([[0.5, -0.1, 0.3], [2.0, -3.0, 0.01]])), "b": fnp.asarray(bf16([1.0, -0.5, 0.2]))}


def test_sgd_with_momentum_keeps_bfloat16_params():
    params, grads = _params(), _grads()
    opt = optim.sgd(0.1, momentum=0.9)
    state = opt.init(params)
    assert all(leaf.dtype == BF16 for leaf in fg.tree_util.tree_leaves(state))
    for step in range(2):
        updates, state = opt.update(grads, state, params)
        params = optim.apply_updates(params, updates)
    for k in params:
        p0 = np.asarray(_params()[k]).astype(np.float64)
        g = np.asarray(grads[k]).astype(np.float64)
        assert_bf16_close(params[k], p0 - 0.1 * g - 0.1 * 1.9 * g, atol=4 * EPS)   # momentum: g, then 1.9 g


def test_adam_keeps_bfloat16_params_and_moments():
    params, grads = _params(), _grads()
    opt = optim.adam(1e-2)
    state = opt.init(params)
    updates, state = opt.update(grads, state, params)
    new = optim.apply_updates(params, updates)
    # optax: the moments are kept in the parameters' dtype; the step counter is int32
    leaves = fg.tree_util.tree_leaves(state)
    assert sorted(str(leaf.dtype) for leaf in leaves) == ["bfloat16"] * 4 + ["int32"]
    for k in new:
        assert updates[k].dtype == BF16 and new[k].dtype == BF16
        g = np.asarray(grads[k]).astype(np.float64)
        # Adam's first step: m_hat = g, v_hat = g**2, so the step is -lr * g / (|g| + eps)
        step = -1e-2 * g / (np.abs(g) + 1e-8)
        np.testing.assert_allclose(np.asarray(updates[k]).astype(np.float64), step, rtol=4 * EPS)
        assert_bf16_close(new[k], np.asarray(params[k]).astype(np.float64) + step, atol=2 * EPS)


# ------------------------------------------------------------------ checkpoints


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_checkpoint_round_trip_is_exact(tmp_path, suffix):
    special = bf16([1.5, -2.0, 3.3e10, np.nan, -0.0, 1e-40, np.inf, 2.0 ** -133])
    tree = {"w": fnp.asarray(special), "layers": [fnp.ones((2, 3), fnp.bfloat16), 0.5], "f32": fnp.ones(2)}
    path = serialization.save(tmp_path / f"ckpt{suffix}", tree)
    back = serialization.load(path)
    assert back["w"].dtype == BF16 and back["layers"][0].dtype == BF16 and back["f32"].dtype == np.float32
    np.testing.assert_array_equal(bits(back["w"]), bits(special))        # bit for bit: NaN, -0, subnormals
    np.testing.assert_array_equal(bits(back["layers"][0]), bits(np.ones((2, 3), BF16)))
    like = serialization.load(path, like=tree)
    np.testing.assert_array_equal(bits(like["w"]), bits(special))
    with pytest.raises(ValueError, match=r"w: saved bf16\[8\], expected f32\[8\]"):
        serialization.load(path, like=dict(tree, w=fnp.ones(8)))


def test_safetensors_bf16_header_and_foreign_file(tmp_path):
    path = serialization.save(tmp_path / "p.safetensors", {"w": fnp.asarray(bf16([1.0, -2.5]))})
    raw = path if isinstance(path, str) else str(path)
    with open(raw, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    assert header["leaf_0"]["dtype"] == "BF16"     # the safetensors type other libraries read
    # a file written by another program (plain tensors, no funcgrad structure)
    import safetensors.numpy
    other = tmp_path / "other.safetensors"
    safetensors.numpy.save_file({"emb": bf16([[0.5, 3.3], [-1.0, 2.0]])}, str(other))
    back = serialization.load(other)
    assert back["emb"].dtype == BF16
    np.testing.assert_array_equal(bits(back["emb"]), bits(bf16([[0.5, 3.3], [-1.0, 2.0]])))


def test_numpy_save_and_load(tmp_path):
    # numpy writes bfloat16 as raw 2-byte records; fnp.load reads them back as bfloat16 (as jnp.load)
    vals = bf16([1.0, 2.5, 3.3, -0.0, np.nan])
    fnp.save(tmp_path / "x.npy", fnp.asarray(vals))
    back = fnp.load(tmp_path / "x.npy")
    assert isinstance(back, fg.Array) and back.dtype == BF16
    np.testing.assert_array_equal(bits(back), bits(vals))


# ------------------------------------------------------------------ testing.check_grads


def test_check_grads_on_bfloat16():
    x = fnp.asarray(bf16([0.3, 1.2, -0.7]))
    testing.check_grads(lambda x: fnp.sin(x) * x, (x,), order=2)
    testing.check_grads(lambda x: fnp.sum(fnp.tanh(x) ** 2), (x,), order=1)

    @fg.custom_jvp
    def wrong(x):
        return fnp.sin(x)
    wrong.defjvp(lambda primals, tangents: (fnp.sin(primals[0]), 1.5 * fnp.cos(primals[0]) * tangents[0]))
    with pytest.raises(AssertionError, match="jvp vs finite differences"):
        testing.check_grads(wrong, (x,), order=1, modes=("fwd",))
