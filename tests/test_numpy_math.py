"""funcgrad.numpy math, predicates, where= masks, dtype utilities, creation and io: the cases the
op table (tests/op_rows_math.py) cannot express -- keywords, errors, special values, gradient
conventions at special points, functions that return no array.

References are numpy/scipy in float64, closed forms and finite differences (check_grads).
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special

import funcgrad as fg
import funcgrad.lax as lax
import funcgrad.numpy as fnp
from funcgrad.testing import check_grads
from conftest import config_set


@pytest.fixture
def f64():
    with config_set("enable_x64", True):
        yield


def val(x):
    return np.asarray(x)


# ------------------------------------------------------------------ gradients at special points


def test_sinc_derivatives_at_zero(f64):
    d = fnp.sinc
    for k, want in enumerate([1.0, 0.0, -np.pi ** 2 / 3, 0.0, np.pi ** 4 / 5]):
        assert np.isclose(float(d(0.0)), want, rtol=1e-12, atol=1e-12), (k, float(d(0.0)), want)
        d = fg.grad(d)
    check_grads(fnp.sinc, [fnp.array([0.0, 0.3, -1.7])], order=2, modes=("fwd", "rev"))


def test_logaddexp_gradients_at_equal_arguments(f64):
    g = fg.grad(fnp.logaddexp, argnums=(0, 1))(1.5, 1.5)
    assert np.allclose([float(g[0]), float(g[1])], [0.5, 0.5])
    assert np.isclose(float(fg.grad(fg.grad(fnp.logaddexp))(1.5, 1.5)), 0.25)
    x = fnp.array([0.3, -1.0, 2.0])
    check_grads(fnp.logaddexp, [x, x], order=2, modes=("fwd", "rev"))
    check_grads(fnp.logaddexp2, [x, x + 0.5], order=2, modes=("fwd", "rev"))


def test_logaddexp_infinities(f64):
    assert float(fnp.logaddexp(-np.inf, -np.inf)) == -np.inf
    g = fg.grad(fnp.logaddexp, argnums=(0, 1))(-np.inf, 1.0)
    assert (float(g[0]), float(g[1])) == (0.0, 1.0)
    g = fg.grad(fnp.logaddexp, argnums=(0, 1))(-np.inf, -np.inf)
    assert (float(g[0]), float(g[1])) == (0.5, 0.5)


def test_differentiable_functions_check_grads(f64):
    rng = np.random.default_rng(0)
    x = fnp.asarray(rng.uniform(0.5, 2.0, 4) * np.array([1, -1, 1, -1]))
    y = fnp.asarray(rng.uniform(0.5, 2.0, 4))
    for f in (fnp.cbrt, fnp.arcsinh, lambda v: fnp.arccosh(v * v + 1.1), lambda v: fnp.arctanh(v / 3),
              fnp.i0, lambda v: fnp.log10(fnp.abs(v)), fnp.deg2rad, lambda v: fnp.modf(v)[0], lambda v: fnp.frexp(v)[0],
              lambda v: fnp.ldexp(v, fnp.array([1, -2, 3, 0]))):
        check_grads(f, [x], order=2, modes=("fwd", "rev"))
    for f in (fnp.hypot, fnp.copysign, fnp.fmod, lambda a, b: fnp.float_power(b, a),
              fnp.fmax, fnp.fmin):
        check_grads(f, [x, y], order=2, modes=("fwd", "rev"))


def test_cbrt_gradient_is_inf_at_zero():
    assert float(fg.grad(fnp.cbrt)(0.0)) == np.inf


def test_i0_against_scipy_and_its_derivatives(f64):
    x = np.array([0.0, 0.4, -3.0, 7.9, 8.0, 8.2, 15.0, 60.0, -200.0])
    np.testing.assert_allclose(val(fnp.i0(x)), scipy.special.i0(x), rtol=1e-13)
    d1 = fg.vmap(fg.grad(fnp.i0))(fnp.asarray(x))
    np.testing.assert_allclose(val(d1), scipy.special.i1(x), rtol=1e-11, atol=1e-14)
    d2 = fg.grad(fg.grad(fnp.i0))
    assert np.isclose(float(d2(0.0)), 0.5)
    assert np.isclose(float(d2(3.0)), scipy.special.i0(3.0) - scipy.special.i1(3.0) / 3.0, rtol=1e-11)


def test_copysign_gradient_conventions(f64):
    gx = fg.grad(fnp.copysign, argnums=(0, 1))
    assert [float(v) for v in gx(2.0, -1.0)] == [-1.0, 0.0]
    assert [float(v) for v in gx(0.0, -1.0)] == [-1.0, 0.0]   # JAX 0.10: d|x1|/dx1 at 0 is 1, times sign(x2)
    assert float(fnp.copysign(1.0, -0.0)) == -1.0


def test_fmax_fmin_send_the_gradient_to_the_chosen_side(f64):
    g = fg.grad(fnp.fmax, argnums=(0, 1))
    assert [float(v) for v in g(1.0, 1.0)] == [0.0, 1.0]          # ties: x2, as JAX
    assert [float(v) for v in g(np.nan, 1.0)] == [0.0, 1.0]
    assert [float(v) for v in g(1.0, np.nan)] == [1.0, 0.0]
    g = fg.grad(fnp.fmin, argnums=(0, 1))
    assert [float(v) for v in g(1.0, 1.0)] == [0.0, 1.0]
    assert float(fnp.fmax(np.nan, np.nan)) != float(fnp.fmax(np.nan, np.nan))   # NaN only where both are


def test_zero_gradients_of_integer_valued_and_bit_functions(f64):
    for f in (fnp.trunc, fnp.rint, fnp.spacing, lambda v: fnp.nextafter(v, 3.0), lambda v: fnp.modf(v)[1],
              lambda v: fnp.heaviside(v, 0.5)):
        assert float(fg.grad(f)(1.3)) == 0.0
    assert float(fg.grad(lambda v: fnp.frexp(v)[0])(3.0)) == 0.25      # 2 ** -exponent
    assert float(fg.grad(lambda v: fnp.ldexp(v, 3))(1.5)) == 8.0


def test_hypot_at_zero_and_infinity(f64):
    assert float(fnp.hypot(0.0, 0.0)) == 0.0
    assert np.isfinite(val(fg.grad(fnp.hypot)(0.0, 0.0)))
    assert float(fnp.hypot(np.inf, np.nan)) == np.inf
    assert float(fnp.hypot(1e200, 1e200)) == pytest.approx(np.hypot(1e200, 1e200))


# ------------------------------------------------------------------ special values and dtypes


def test_spacing_is_exact_in_float32():
    x = np.array([1.0, -1.0, 0.0, 3.5e-3, 1e30], np.float32)
    np.testing.assert_array_equal(val(fnp.spacing(x)), np.spacing(x))
    assert fnp.spacing(x).dtype == np.float32


def test_nan_to_num_defaults_follow_the_dtype():
    x = np.array([np.nan, np.inf, -np.inf, 1.5], np.float32)
    np.testing.assert_array_equal(val(fnp.nan_to_num(x)), np.nan_to_num(x))
    np.testing.assert_array_equal(val(fnp.nan_to_num(fnp.array([1, 2]))), [1, 2])


def test_signbit_negative_zero_and_nan():
    x = np.array([-0.0, 0.0, -np.nan, np.nan, -np.inf], np.float32)
    np.testing.assert_array_equal(val(fnp.signbit(x)), np.signbit(x))
    assert val(fnp.signbit(np.float32(-0.0))).shape == ()
    np.testing.assert_array_equal(val(fnp.signbit(np.array([0, 3], np.uint8))), [False, False])


def test_output_dtypes():
    i = fnp.array([1, -2, 3])
    assert fnp.fabs(i).dtype == np.float32
    assert fnp.rint(i).dtype == np.float32
    assert fnp.trunc(i).dtype == np.int32
    assert fnp.isinf(i).dtype == np.bool_ and not val(fnp.isinf(i)).any()
    assert fnp.bitwise_count(i).dtype == np.uint8
    assert fnp.float_power(i, 2).dtype == np.float32
    assert fnp.frexp(fnp.array([3.0]))[1].dtype == np.int32
    assert fnp.gcd(i, 4).dtype == np.int32


def test_shifts_by_the_bit_width_or_more():
    x = np.array([-8, 8, -1, 1 << 30], np.int32)
    np.testing.assert_array_equal(val(fnp.right_shift(x, 40)), [-1, 0, -1, 0])
    np.testing.assert_array_equal(val(fnp.left_shift(x, 32)), [0, 0, 0, 0])
    np.testing.assert_array_equal(val(fnp.left_shift(x, 1)), np.left_shift(x, 1))   # wraps as numpy


@pytest.mark.parametrize("call", [
    lambda: fnp.bitwise_and(fnp.ones(2), 1), lambda: fnp.left_shift(fnp.array([True]), fnp.array([True])),
    lambda: fnp.ldexp(fnp.ones(2), 1.5), lambda: fnp.gcd(fnp.ones(2), fnp.ones(2)),
    lambda: fnp.bitwise_not(fnp.ones(2)), lambda: fnp.fmod(fnp.array([True]), fnp.array([True])),
])
def test_bad_dtypes_raise_type_errors(call):
    with pytest.raises(TypeError, match=r"\w+: "):
        call()


def test_ufunc_style_keywords_are_refused_not_ignored():
    with pytest.raises(NotImplementedError, match="where="):
        fnp.logaddexp(1.0, 2.0, where=True)
    with pytest.raises(NotImplementedError, match="out="):
        fnp.bitwise_and(1, 2, out=np.zeros(1))
    with pytest.raises(NotImplementedError, match="out="):
        fnp.modf(1.0, out=np.zeros(1))


def test_lax_additions():
    x = fnp.array([0.5, 1.5])
    np.testing.assert_allclose(val(lax.asinh(x)), np.arcsinh([0.5, 1.5]), rtol=1e-6)
    np.testing.assert_allclose(val(lax.acosh(x + 1.0)), np.arccosh([1.5, 2.5]), rtol=1e-6)
    np.testing.assert_allclose(val(lax.atanh(x / 2)), np.arctanh([0.25, 0.75]), rtol=1e-6)
    np.testing.assert_allclose(val(lax.cbrt(x)), np.cbrt([0.5, 1.5]), rtol=1e-6)
    # jax.lax.population_count counts the two's complement bits; fnp.bitwise_count those of |x| (numpy)
    ints = np.array([-1, 3, -2 ** 31], np.int32)
    np.testing.assert_array_equal(val(lax.population_count(fnp.asarray(ints))), [32, 2, 1])
    np.testing.assert_array_equal(val(fnp.bitwise_count(ints)), np.bitwise_count(ints))


def test_fused_jit_of_new_primitives():
    x = fnp.array([0.3, 1.2, 2.5])
    f = fg.jit(lambda v: fnp.arcsinh(v) + fnp.arccosh(v + 1) + fnp.arctanh(v / 3) + fnp.cbrt(v)
               + fnp.logaddexp(v, 1.0) + fnp.fmod(v, 0.7))
    with config_set("jit_fusion", True):
        np.testing.assert_allclose(val(f(x)), np.arcsinh(val(x)) + np.arccosh(val(x) + 1) + np.arctanh(val(x) / 3)
                                   + np.cbrt(val(x)) + np.logaddexp(val(x), 1.0) + np.fmod(val(x), 0.7), rtol=1e-5)


# ------------------------------------------------------------------ reductions: where=, initial=, signatures


def test_max_with_where_needs_initial():
    with pytest.raises(ValueError, match="initial"):
        fnp.max(fnp.ones(3), where=fnp.array([True, False, True]))


def test_initial_is_the_result_of_an_empty_reduction():
    np.testing.assert_array_equal(val(fnp.max(fnp.zeros((0, 3)), axis=0, initial=5.0)), [5.0, 5.0, 5.0])
    np.testing.assert_array_equal(val(fnp.min(fnp.zeros((2, 0)), axis=1, initial=-1.0, keepdims=True)),
                                  [[-1.0], [-1.0]])
    assert float(fnp.sum(fnp.zeros((0,)), initial=2.5)) == 2.5


def test_reductions_refuse_out():
    for f in (fnp.sum, fnp.prod, fnp.mean, fnp.var, fnp.std, fnp.max, fnp.min, fnp.all, fnp.any, fnp.argmax,
              fnp.cumsum):
        with pytest.raises(NotImplementedError, match="out="):
            f(fnp.ones(3), out=np.zeros(1))


def test_var_ddof_and_correction():
    x = fnp.array([1.0, 2.0, 4.0])
    with pytest.raises(ValueError, match="correction"):
        fnp.var(x, ddof=1, correction=1)
    assert np.isnan(float(fnp.var(x, ddof=3)))                      # N - ddof <= 0: NaN, as JAX
    assert np.isnan(float(fnp.var(x, ddof=1, where=fnp.array([False, True, False]))))
    assert float(fnp.var(x, mean=fnp.array(2.0))) == pytest.approx(np.mean((val(x) - 2.0) ** 2))


def test_mean_of_nothing_selected_is_nan():
    assert np.isnan(float(fnp.mean(fnp.ones(3), where=fnp.zeros(3, bool))))


def test_sum_integer_promotion():
    assert fnp.sum(fnp.array([1, 2], fnp.int8)).dtype == np.int32
    assert fnp.sum(fnp.array([100, 100], fnp.int8), promote_integers=False).dtype == np.int8
    assert fnp.sum(fnp.asarray(np.array([1, 2], np.uint8))).dtype == np.uint32
    assert fnp.sum(fnp.array([True, True]), where=fnp.array([True, False])).dtype == np.int32


def test_jax_positional_order_and_the_old_keepdims_position():
    x = fnp.ones((2, 3))
    assert fnp.sum(x, 0, fnp.float32).dtype == np.float32          # JAX: (a, axis, dtype, out, keepdims)
    assert fnp.sum(x, 0, None, None, True).shape == (1, 3)
    assert fnp.sum(x, 0, True).shape == (1, 3)                     # funcgrad's older (x, axis, keepdims)
    assert fnp.max(x, 1, True).shape == (2, 1)
    assert fnp.var(x, 1, None, None, 1).shape == (2,)              # ddof is var's 5th


def test_where_mask_must_broadcast():
    with pytest.raises(ValueError, match=r"sum: where= mask of shape \(2,\)"):
        fnp.sum(fnp.ones((3, 4)), where=fnp.array([True, False]))


def test_where_masks_are_values_under_the_transforms(f64):
    x = fnp.array([1.0, -2.0, 3.0, -0.5])
    g = fg.grad(lambda v: fnp.sum(v * v, where=v > 0))(x)
    np.testing.assert_array_equal(val(g), [2.0, 0.0, 6.0, 0.0])
    f = fg.jit(lambda v: fnp.mean(v, where=v > 0))
    assert float(f(x)) == 2.0
    out = fg.vmap(lambda v: fnp.max(v, where=v < 2.0, initial=-10.0))(fnp.stack([x, x + 1]))
    np.testing.assert_array_equal(val(out), [1.0, 0.5])
    check_grads(lambda v: fnp.var(v, where=fnp.array([True, True, False, True])), [x], order=2,
                modes=("fwd", "rev"))


def test_all_any_edge_cases():
    assert bool(fnp.all(fnp.zeros((0,)))) and not bool(fnp.any(fnp.zeros((0,))))
    assert fnp.all(fnp.ones((2, 0)), axis=1).shape == (2,)
    assert bool(fnp.all(fnp.array(2.0))) and fnp.any(fnp.ones((2, 3)), keepdims=True).shape == (1, 1)
    assert bool(fnp.all(fnp.array([np.nan])))                                     # NaN is true
    assert bool(fnp.all(fnp.array([1.0, 0.0]), where=fnp.array([True, False])))
    assert fg.jit(lambda v: fnp.any(v > 2.0))(fnp.arange(4.0)).dtype == np.bool_


def test_clip_keywords():
    x = fnp.array([-1.0, 0.5, 2.0])
    np.testing.assert_array_equal(val(fnp.clip(x, min=0.0)), [0.0, 0.5, 2.0])
    np.testing.assert_array_equal(val(fnp.clip(x, 0.0, 1.0)), [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(val(np.clip(x, 0.0, 1.0)), [0.0, 0.5, 1.0])     # numpy's dispatch
    with pytest.raises(ValueError, match="no input"):
        fnp.clip()
    with pytest.raises(TypeError):
        fnp.clip(x, a_min=0.0)            # as JAX 0.10: only min=/max= (or positionally)


# ------------------------------------------------------------------ predicates


def test_isclose_infinities_and_nans():
    a = np.array([np.inf, np.inf, -np.inf, np.nan, 1.0])
    b = np.array([np.inf, -np.inf, -np.inf, np.nan, 1.0 + 1e-9])
    np.testing.assert_array_equal(val(fnp.isclose(a, b)), np.isclose(a, b))
    np.testing.assert_array_equal(val(fnp.isclose(a, b, equal_nan=True)), np.isclose(a, b, equal_nan=True))
    out = fnp.allclose(a[2:], b[2:], equal_nan=True)
    assert isinstance(out, fg.Array) and out.shape == () and bool(out)


def test_array_equal_and_equiv_shapes():
    assert not bool(fnp.array_equal(fnp.ones(3), fnp.ones(4)))
    assert not bool(fnp.array_equiv(fnp.ones(3), fnp.ones(4)))
    assert bool(fnp.array_equiv(fnp.ones((2, 3)), 1.0))
    assert bool(fnp.array_equal(fnp.array([1.0, np.nan]), fnp.array([1.0, np.nan]), equal_nan=True))
    assert not bool(fnp.array_equal(fnp.array([1.0, np.nan]), fnp.array([1.0, np.nan])))


def test_isscalar_and_iterable():
    assert fnp.isscalar(1.0) and fnp.isscalar(np.float32(1)) and fnp.isscalar(fnp.array(1.0))
    assert fnp.isscalar(np.array(1.0))                       # a 0-d array is a scalar here (as JAX)
    assert not fnp.isscalar([1]) and not fnp.isscalar(None) and not fnp.isscalar(fnp.ones(2))
    assert fnp.iterable([1]) and fnp.iterable(fnp.ones(2))
    assert not fnp.iterable(3.0) and not fnp.iterable(fnp.array(1.0))
    assert fg.jit(lambda v: fnp.asarray(float(fnp.isscalar(v))))(fnp.array(2.0)) == 1.0


# ------------------------------------------------------------------ dtype utilities


def test_result_type():
    assert fnp.result_type(fnp.ones(2, fnp.int8), 1.0) == np.float32     # weak Python float
    assert fnp.result_type(fnp.float16, 1.0) == np.float16
    assert fnp.result_type(fnp.int8, float) == np.float32                 # the types int/float are weak too
    assert fnp.result_type(1, 2.0) == np.float32 and fnp.result_type(int) == np.int32
    assert fnp.result_type(np.float64) == np.float32                      # canonical without x64
    assert fnp.result_type(fnp.ones(2, fnp.int8), fnp.ones(2, fnp.uint8)) == np.int16
    # it agrees with what the arithmetic gives
    for a, b in [(fnp.ones(2, fnp.int8), 2.5), (fnp.ones(2, fnp.int32), fnp.ones(2, fnp.float16)),
                 (fnp.ones(2, fnp.uint8), 3)]:
        assert fnp.result_type(a, b) == (a + b).dtype
    with config_set("enable_x64", True):
        assert fnp.result_type(np.float64) == np.float64 and fnp.result_type(1.0) == np.float64
    with pytest.raises(ValueError):
        fnp.result_type()


def test_promote_types_can_cast_isdtype_issubdtype():
    assert fnp.promote_types(fnp.int8, fnp.float32) == np.float32
    assert fnp.promote_types("int32", "uint32") == np.int64             # not canonicalised, as JAX
    assert fnp.can_cast(fnp.int8, fnp.int32) and not fnp.can_cast(fnp.float32, fnp.int32)
    assert fnp.can_cast(fnp.ones(2, fnp.int8), fnp.int16)
    assert not fnp.can_cast(fnp.float32, fnp.int32, casting="same_kind")
    assert fnp.can_cast(fnp.float32, fnp.int32, casting="unsafe")
    assert fnp.isdtype(fnp.float32, "real floating") and fnp.isdtype(fnp.int8, ("bool", "signed integer"))
    assert fnp.isdtype(fnp.int8, fnp.int8) and not fnp.isdtype(fnp.uint8, "signed integer")
    assert fnp.issubdtype(fnp.float32, np.floating) and not fnp.issubdtype(fnp.int32, np.floating)


def test_finfo_iinfo_take_arrays():
    assert fnp.finfo(fnp.float32).eps == np.finfo(np.float32).eps
    assert fnp.finfo(fnp.ones(2)).dtype == np.float32
    assert fnp.iinfo(fnp.array([1], fnp.int8)).max == 127 and fnp.iinfo(fnp.uint8).max == 255
    with pytest.raises(ValueError):
        fnp.iinfo(fnp.float32)


# ------------------------------------------------------------------ creation


def test_linspace_like_jax():
    np.testing.assert_array_equal(val(fnp.linspace(0, 1, 4, dtype=int)), [0, 0, 0, 1])   # the floor, as JAX
    assert fnp.linspace(0.0, 1.0, 0).shape == (0,)
    np.testing.assert_array_equal(val(fnp.linspace(2.0, 3.0, 1)), [2.0])
    out, step = fnp.linspace(0.0, 1.0, 5, retstep=True)
    assert float(step) == 0.25 and float(out[-1]) == 1.0
    assert fnp.linspace(fnp.zeros((2, 3)), 1.0, 4, axis=1).shape == (2, 4, 3)
    with pytest.raises(ValueError, match="num"):
        fnp.linspace(0.0, 1.0, -1)


def test_linspace_and_kaiser_are_differentiable(f64):
    check_grads(lambda a, b: fnp.linspace(a, b, 5), [fnp.array(0.3), fnp.array(2.0)], order=2, modes=("fwd", "rev"))
    check_grads(lambda b: fnp.kaiser(6, b), [fnp.array(2.5)], order=2, modes=("fwd", "rev"))
    check_grads(lambda a: fnp.geomspace(a, 8.0, 4), [fnp.array(1.5)], order=1, modes=("fwd", "rev"))
    g = fg.grad(lambda s: fnp.sum(fnp.linspace(s, 2.0, 5)))(0.5)
    assert float(g) == pytest.approx(2.5)                    # weights 1, .75, .5, .25, 0


def test_empty_identity_tri_and_like_shapes():
    assert fnp.empty((2, 3), fnp.int32).dtype == np.int32 and not val(fnp.empty(3)).any()
    assert fnp.empty_like(fnp.ones(2), shape=(4, 1)).shape == (4, 1)
    assert fnp.zeros_like(fnp.ones((2, 2), fnp.int32), shape=3).dtype == np.int32
    assert fnp.full_like(fnp.ones(2), 3, shape=(2, 2)).shape == (2, 2)
    assert fnp.identity(2, dtype=int).dtype == np.int32
    np.testing.assert_array_equal(val(fnp.tri(3, k=1, dtype=bool)), np.tri(3, k=1, dtype=bool))
    with pytest.raises(NotImplementedError, match="out_sharding"):
        fnp.zeros(3, out_sharding="x")
    assert fnp.zeros(2, device="cpu").shape == (2,)


def test_geomspace_logspace_signs_and_bases():
    np.testing.assert_allclose(val(fnp.geomspace(-1.0, -8.0, 4)), np.geomspace(-1.0, -8.0, 4), rtol=1e-6)
    np.testing.assert_allclose(val(fnp.logspace(0.0, 3.0, 4, base=2.0, endpoint=False)),
                               np.logspace(0.0, 3.0, 4, base=2.0, endpoint=False), rtol=1e-6)
    np.testing.assert_array_equal(val(fnp.logspace(0, 2, 3, base=2.0, dtype=int)), [1, 2, 4])
    with pytest.raises(ValueError, match="nonzero"):
        fnp.geomspace(0.0, 1.0, 3)


def test_fromfunction_frombuffer_fromstring():
    out = fnp.fromfunction(lambda i, j, scale: (i - j) * scale, (2, 3), dtype=float, scale=2.0)
    np.testing.assert_array_equal(val(out), np.fromfunction(lambda i, j: (i - j) * 2.0, (2, 3)))
    data = np.arange(4, dtype=np.float32).tobytes()
    np.testing.assert_array_equal(val(fnp.frombuffer(data, dtype=np.float32, count=2, offset=4)), [1.0, 2.0])
    assert fnp.frombuffer(np.arange(2.0).tobytes()).dtype == np.float32       # float64 data, x32
    np.testing.assert_array_equal(val(fnp.fromstring("1,2,3", dtype=int, sep=",")), [1, 2, 3])


def test_fromfile_and_fromiter_raise_as_in_jax():
    with pytest.raises(NotImplementedError, match="np.fromfile"):
        fnp.fromfile("x.bin")
    with pytest.raises(NotImplementedError, match="np.fromiter"):
        fnp.fromiter(iter([1, 2]), dtype=int)


def test_copy_and_windows():
    x = fnp.arange(3.0)
    np.testing.assert_array_equal(val(fnp.copy(x)), val(x))
    with pytest.raises(NotImplementedError, match="order"):
        fnp.copy(x, order="F")
    for name in ("bartlett", "blackman", "hamming", "hanning"):
        for m in (0, 1, 5):
            np.testing.assert_allclose(val(getattr(fnp, name)(m)), getattr(np, name)(m), atol=1e-7)
    np.testing.assert_allclose(val(fnp.kaiser(7, fnp.array(4.0))), np.kaiser(7, 4.0), rtol=1e-6)
    assert fnp.kaiser(1, fnp.array(4.0)).shape == (1,)


# ------------------------------------------------------------------ vectorize, apply_along_axis, apply_over_axes


def test_vectorize_excluded_and_none():
    f = fnp.vectorize(lambda x, p, *, shift: x ** p + shift, excluded={1, "shift"})
    np.testing.assert_array_equal(val(f(fnp.arange(3.0), 2, shift=1.0)), [1.0, 2.0, 5.0])
    g = fnp.vectorize(lambda x, y: x if y is None else x + y)
    np.testing.assert_array_equal(val(g(fnp.arange(3.0), None)), [0.0, 1.0, 2.0])
    calls = []
    h = fnp.vectorize(lambda x: (calls.append(np.shape(x)), x * 2)[1])
    assert h(fnp.ones((2, 3))).shape == (2, 3) and calls[0] == ()   # pyfunc sees one element


def test_vectorize_signature_outputs_and_errors():
    f = fnp.vectorize(lambda v: (fnp.sum(v), v * 2), signature="(n)->(),(n)")
    s, d = f(fnp.ones((4, 3)))
    assert s.shape == (4,) and d.shape == (4, 3)
    bad = fnp.vectorize(lambda v: fnp.sum(v), signature="(n)->(n)")
    with pytest.raises(ValueError, match="core dimensions"):
        bad(fnp.ones((2, 3)))
    with pytest.raises(ValueError, match="signature"):
        fnp.vectorize(lambda v: v, signature="(n->()")(fnp.ones(2))
    with pytest.raises(TypeError, match="excluded"):
        fnp.vectorize(lambda v: v, excluded={1.5})
    with pytest.raises(ValueError, match="enough dimensions"):
        fnp.vectorize(lambda v: v, signature="(n,m)->()")(fnp.ones(3))


def test_vectorize_under_jit_and_grad(f64):
    dot = fnp.vectorize(lambda a, b: fnp.sum(a * b), signature="(n),(n)->()")
    x = fnp.asarray(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(val(fg.jit(dot)(x, x)), np.sum(val(x) ** 2, axis=1))
    check_grads(lambda a: dot(a, a), [x], order=2, modes=("fwd", "rev"))


def test_apply_along_axis_and_over_axes():
    x = fnp.asarray(np.arange(24.0).reshape(2, 3, 4))
    out = fnp.apply_along_axis(lambda v, k, scale=1.0: v[:k] * scale, 1, x, 2, scale=3.0)
    np.testing.assert_array_equal(val(out), np.apply_along_axis(lambda v: v[:2] * 3.0, 1, val(x)))
    np.testing.assert_array_equal(val(fnp.apply_over_axes(fnp.max, x, (0, 1))), np.apply_over_axes(np.max, val(x),
                                                                                                      (0, 1)))
    with pytest.raises(ValueError, match="correct shape"):
        fnp.apply_over_axes(lambda a, ax: fnp.sum(a), x, [0])


# ------------------------------------------------------------------ io and printing


def test_save_load_savez(tmp_path):
    x = fnp.arange(4.0).reshape(2, 2)
    fnp.save(tmp_path / "x.npy", x)
    y = fnp.load(tmp_path / "x.npy")
    assert isinstance(y, fg.Array) and np.array_equal(val(y), val(x))
    fnp.savez(tmp_path / "z.npz", a=x, b=fnp.ones(2, fnp.int32))
    with fnp.load(tmp_path / "z.npz") as z:
        assert np.array_equal(z["a"], val(x)) and z["b"].dtype == np.int32


def test_array_repr_str_and_printoptions():
    x = fnp.array([1.0, 2.5])
    assert fnp.array_repr(x) == "Array([1. , 2.5], dtype=float32)"
    assert fnp.array_repr(fnp.array([1, 2])) == "Array([1, 2], dtype=int32)"
    assert fnp.array_str(x) == np.array_str(np.array([1.0, 2.5], np.float32))
    with fnp.printoptions(precision=2):
        assert fnp.get_printoptions()["precision"] == 2
        assert fnp.array_str(fnp.array([1 / 3])) == "[0.33]"
    assert fnp.get_printoptions()["precision"] == np.get_printoptions()["precision"]
    with pytest.raises(TypeError, match="traced"):
        fg.jit(lambda v: fnp.asarray(len(fnp.array_str(v))))(x)


# ------------------------------------------------------------------ ufunc / frompyfunc


def test_ufunc_methods_against_numpy():
    add = fnp.frompyfunc(lambda a, b: a + b, 2, 1, identity=0.0)
    x = np.arange(12.0).reshape(3, 4)
    assert add.nin == 2 and add.nout == 1 and add.nargs == 2 and add.identity == 0.0
    np.testing.assert_array_equal(val(add.reduce(x, axis=1)), np.add.reduce(x, axis=1))
    np.testing.assert_array_equal(val(add.reduce(x, axis=None)), np.add.reduce(x, axis=None))
    assert add.reduce(x, axis=(0, 1), keepdims=True).shape == (1, 1)
    np.testing.assert_array_equal(val(add.reduce(x, axis=0, where=x > 5)), np.add.reduce(x, axis=0, where=x > 5))
    np.testing.assert_array_equal(val(add.reduce(x, axis=0, initial=10.0)), np.add.reduce(x, axis=0, initial=10.0))
    np.testing.assert_array_equal(val(add.reduce(fnp.zeros((0, 3)))), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(val(add.accumulate(x, axis=1)), np.add.accumulate(x, axis=1))
    np.testing.assert_array_equal(val(add.outer(fnp.arange(2.0), fnp.arange(3.0))), np.add.outer(np.arange(2.0),
                                                                                              np.arange(3.0)))


def test_ufunc_at_applies_repeated_indices_in_turn():
    mul_add = fnp.frompyfunc(lambda a, b: a * b + 1, 2, 1)
    np.testing.assert_array_equal(val(mul_add.at(fnp.ones(3), fnp.array([0, 0]), 2.0, inplace=False)), [7.0, 1, 1])
    neg = fnp.frompyfunc(lambda a: -a, 1, 1)
    np.testing.assert_array_equal(val(neg.at(fnp.arange(4.0), [1, 3], inplace=False)), [0.0, -1, 2, -3])
    with pytest.raises(NotImplementedError, match="inplace=False"):
        neg.at(fnp.arange(4.0), [1])


def test_ufunc_errors_and_multiple_outputs():
    mul_add = fnp.frompyfunc(lambda a, b: a * b + 1, 2, 1)
    with pytest.raises(ValueError, match="no identity"):
        mul_add.reduce(fnp.zeros(0))
    with pytest.raises(ValueError, match="initial"):
        mul_add.reduce(fnp.ones(3), where=fnp.array([True, False, True]))
    with pytest.raises(TypeError, match="2 positional"):
        mul_add(fnp.ones(2))
    with pytest.raises(NotImplementedError):
        mul_add.reduceat(fnp.ones(3), [0, 1])
    dm = fnp.frompyfunc(lambda a, b: (a // b, a % b), 2, 2)
    q, r = dm(fnp.arange(5), 2)
    np.testing.assert_array_equal(val(q), [0, 0, 1, 1, 2]) and np.testing.assert_array_equal(val(r), [0, 1, 0, 1, 0])
    with pytest.raises(ValueError, match="binary"):
        dm.reduce(fnp.ones(3))


def test_ufunc_under_grad_and_jit(f64):
    mul_add = fnp.frompyfunc(lambda a, b: a * b + 1, 2, 1)
    check_grads(lambda v: mul_add.reduce(v), [fnp.array([1.0, 2.0, 3.0])], order=2, modes=("fwd", "rev"))
    np.testing.assert_array_equal(val(fg.jit(mul_add.accumulate)(fnp.arange(1.0, 4.0))), [1.0, 3.0, 10.0])


def test_numpy_calls_dispatch_to_the_new_functions_under_jit(f64):
    x = fnp.array([0.5, -1.5, 2.0])
    for f in (np.sinc, np.isposinf, np.isneginf, np.cbrt, np.arcsinh, np.fmax, np.hypot, np.logaddexp, np.i0,
              lambda v: np.nan_to_num(v), lambda v: np.sum(v, where=v > 0), lambda v: np.max(v, initial=0.0),
              lambda v: np.clip(v, a_min=0.0, a_max=1.0), lambda v: np.isclose(v, 0.5), np.copysign):
        args = (x, x[::-1]) if f in (np.fmax, np.hypot, np.logaddexp, np.copysign) else (x,)
        np.testing.assert_allclose(val(fg.jit(f)(*args)), f(*[val(a) for a in args]), rtol=1e-12)
    check_grads(lambda v: np.sum(np.sinc(v) * np.cbrt(v)), [x], order=2, modes=("fwd", "rev"))


def test_where_one_argument_form():
    if not hasattr(fnp, "nonzero"):
        with pytest.raises(NotImplementedError, match="nonzero"):
            fnp.where(fnp.array([True, False]))
    else:
        (idx,) = fnp.where(fnp.array([0.0, 2.0, 3.0]))
        np.testing.assert_array_equal(val(idx), [1, 2])
    with pytest.raises(ValueError, match="both or neither"):
        fnp.where(fnp.array([True]), 1.0)
    with pytest.raises(ValueError, match="one-argument"):
        fnp.where(fnp.array([True]), 1.0, 2.0, size=3)


def test_round_keeps_integers_as_jax():
    a = fnp.array([15, 25, -7])
    assert fnp.round(a).dtype == np.int32 and fnp.around(a, 1).dtype == np.int32
    np.testing.assert_array_equal(val(fnp.round(a)), [15, 25, -7])
    with pytest.raises(NotImplementedError, match="decimals < 0"):
        fnp.round(a, -1)
    with pytest.raises(NotImplementedError, match="out="):
        fnp.round(fnp.ones(2), out=np.zeros(2))


def test_vectorize_maps_keyword_arguments_as_numpy():
    f = fnp.vectorize(lambda x, scale=1.0: x * scale)
    out = f(fnp.ones(3), scale=fnp.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(val(out), np.vectorize(lambda x, scale=1.0: x * scale)(np.ones(3),
                                                                                         scale=np.array([1., 2, 3])))
    g = fnp.vectorize(lambda v, w=None: fnp.sum(v) if w is None else fnp.sum(v * w), signature="(n)->()")
    assert g(fnp.ones((2, 3)), w=fnp.ones(3)).shape == (2,)        # with a signature: passed as it is


def test_python_scalars_compute_in_the_default_float_and_keep_float16():
    assert float(fnp.nextafter(1.0, 2.0)) == float(np.nextafter(np.float32(1), np.float32(2)))
    x16 = fnp.asarray(np.array([0.5, -1.5], np.float16))
    for out in (fnp.spacing(x16), fnp.hypot(3.0, x16), fnp.copysign(2.0, x16), fnp.heaviside(0.0, x16),
                fnp.nextafter(x16, 1.0), fnp.logaddexp(x16, 1.0), fnp.cbrt(x16), fnp.i0(x16)):
        assert out.dtype == np.float16


def test_ufunc_methods_on_the_binary_functions():
    x = np.arange(1.0, 13.0).reshape(3, 4)
    for f, ref in ((fnp.add, np.add), (fnp.multiply, np.multiply), (fnp.maximum, np.maximum),
                   (fnp.minimum, np.minimum), (fnp.subtract, np.subtract), (fnp.logaddexp, np.logaddexp),
                   (fnp.hypot, np.hypot)):
        for axis in (0, 1) if f is fnp.subtract else (0, 1, None):   # numpy: subtract is not reorderable
            np.testing.assert_allclose(val(f.reduce(x, axis=axis)), ref.reduce(x, axis=axis), rtol=1e-6)
        np.testing.assert_allclose(val(f.accumulate(x, axis=1)), ref.accumulate(x, axis=1), rtol=1e-6)
        np.testing.assert_allclose(val(f.outer(x[0], x[1])), ref.outer(x[0], x[1]), rtol=1e-6)
    np.testing.assert_array_equal(val(fnp.add.reduce(x, axis=1, where=x > 5, initial=1.0)),
                                  np.add.reduce(x, axis=1, where=x > 5, initial=1.0))
    np.testing.assert_array_equal(val(fnp.add.at(fnp.zeros(3), np.array([0, 0, 2]), 1.0, inplace=False)),
                                  [2.0, 0.0, 1.0])
    np.testing.assert_array_equal(val(fnp.maximum.at(fnp.zeros(3), [0, 0, 2], fnp.array([3.0, 1.0, -1.0]),
                                                     inplace=False)), [3.0, 0.0, 0.0])
    assert fnp.add.identity == 0 and fnp.multiply.identity == 1 and fnp.maximum.identity is None
    np.testing.assert_array_equal(val(fnp.bitwise_or.reduce(fnp.array([1, 2, 4]))), 7)
    assert not bool(fnp.logical_and.reduce(fnp.array([True, False])))
    with pytest.raises(NotImplementedError, match="inplace=False"):
        fnp.add.at(fnp.zeros(3), [0], 1.0)


def test_var_std_older_positional_order():
    x = fnp.asarray(np.arange(6.0).reshape(2, 3))
    np.testing.assert_allclose(val(fnp.var(x, 1, True, 1)), np.var(val(x), 1, keepdims=True, ddof=1))
    np.testing.assert_allclose(val(fnp.std(x, 0, False, 1)), np.std(val(x), 0, ddof=1))
