"""numpy's own functions on funcgrad arrays (``__array_ufunc__``, ``__array_function__``, ``__array__``).

Which way each case goes:

* numpy ufuncs and functions that funcgrad.numpy also has (``np.sin(x)``,
  ``np.sum(x, axis=0)``, ``np_array * x``) run funcgrad's version: a funcgrad
  Array comes back and derivatives survive grad/jvp/vmap/jit;
* a traced value never silently becomes a numpy array: ``np.asarray(x)``
  and numpy functions without a funcgrad equivalent raise
  TracerArrayConversionError, naming the transform, shape/dtype, line and fix;
* outside transforms such functions run in numpy on the values (plain numpy result);
* ``out=`` naming a funcgrad array raises (immutable).

Every case is one function written with numpy's API; applied to a float64
numpy array it is its own reference, and finite differences of it check the
derivatives.
"""
from __future__ import annotations

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import _core
from funcgrad.testing import check_against_numpy, check_grads

# Values away from every kink of the cases below (0, +-0.5, 0.1, ties).
X = np.array([[0.3, -0.7, 1.1], [-0.2, 0.9, -1.3]])
W = np.linspace(0.5, 1.5, 6).reshape(2, 3)

CASES = {
    "sin": lambda x: np.sin(x),
    "exp_times_x": lambda x: np.exp(x) * x,
    "numpy_array_on_left": lambda x: W * x + W,
    "numpy_scalars_on_left": lambda x: np.float64(1.5) * x - np.float32(2.0) / (x * x + 1.0),
    "add_subtract": lambda x: np.add(x, 1.0) * np.subtract(2.0, x),
    "maximum": lambda x: np.maximum(x, 0.1),
    "sum_axis": lambda x: np.sum(np.tanh(x), axis=0),
    "mean_keepdims": lambda x: np.mean(x * x, axis=1, keepdims=True),
    "concatenate": lambda x: np.concatenate([x, np.square(x)], axis=1),
    "where": lambda x: np.where(x > 0.0, x * x, -x),
    "matmul": lambda x: np.matmul(x, np.transpose(x)),
    "numpy_matmul_on_left": lambda x: W.T @ x,
    "add_reduce": lambda x: np.add.reduce(np.sin(x)),
    "maximum_reduce": lambda x: np.maximum.reduce(x * 2.0, axis=1, keepdims=True),
    "add_accumulate": lambda x: np.add.accumulate(x, axis=1),
    "multiply_outer": lambda x: np.multiply.outer(x[0], x[1]),
    "clip": lambda x: np.clip(x, -0.5, 0.5),
    "max_of_stack": lambda x: np.max(np.stack([x, -x]), axis=0),
    "linalg_norm": lambda x: np.linalg.norm(x),
    "std_ddof": lambda x: np.std(x, ddof=1),
    "einsum": lambda x: np.einsum("ij,ij->i", x, x),
    "power": lambda x: np.power(np.abs(x) + 1.0, 1.5),
    "reshape_dot": lambda x: np.dot(np.reshape(x, (3, 2)), x),
    "clip_keywords": lambda x: np.clip(x, min=-0.5, max=0.5),
    "numpy_defaults_spelled_out": lambda x: np.sum(x, axis=0, dtype=None, out=None) + np.ravel(x[0], order="C"),
}


@pytest.mark.parametrize("name", CASES)
def test_numpy_call_returns_funcgrad_array_with_numpy_values(name):
    f = CASES[name]
    out = f(fnp.asarray(X))
    assert isinstance(out, fg.Array), type(out)
    check_against_numpy(f, f, (fnp.asarray(X),))


@pytest.mark.parametrize("name", CASES)
def test_numpy_call_derivatives_match_finite_differences(name, x64):
    check_grads(CASES[name], (fnp.asarray(X),), order=1)


@pytest.mark.parametrize("name", ["sin", "where", "add_reduce", "linalg_norm"])
def test_numpy_call_second_derivatives(name, x64):
    check_grads(CASES[name], (fnp.asarray(X),), order=2, modes=("rev",))


@pytest.mark.parametrize("name", ["numpy_array_on_left", "sum_axis", "concatenate", "where", "einsum",
                                  "multiply_outer", "std_ddof"])
def test_numpy_call_under_vmap_matches_a_loop(name):
    f = CASES[name]
    xs = np.stack([X, 2.0 * X, -X, X[::-1]])
    out = fg.vmap(f)(fnp.asarray(xs))
    expected = np.stack([f(x) for x in xs])
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["sum_axis", "matmul", "concatenate"])
def test_numpy_call_under_jit_matches_numpy(name):
    f = CASES[name]
    out = fg.jit(f)(fnp.asarray(X))
    assert isinstance(out, fg.Array)
    np.testing.assert_allclose(np.asarray(out), f(X), rtol=1e-5, atol=1e-6)


def test_grad_of_numpy_calls_under_jit():
    g = fg.jit(fg.grad(lambda x: np.sum(np.sin(x) * x)))(fnp.asarray(X))
    np.testing.assert_allclose(np.asarray(g), np.cos(X) * X + np.sin(X), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------- the two silent cases


def test_np_sin_inside_grad_has_the_cos_gradient():
    g = fg.grad(lambda x: fnp.sum(np.sin(x)))(fnp.ones(3))
    np.testing.assert_allclose(np.asarray(g), np.cos(np.ones(3)), rtol=1e-6)
    # and through nesting: d2/dx2 sin = -sin
    d2 = fg.grad(fg.grad(lambda x: np.sin(x)))(fnp.asarray(0.7))
    assert float(d2) == pytest.approx(-np.sin(0.7), rel=1e-5)


def _asarray_times_x(x):
    return fnp.sum(np.asarray(x) * x)


_TRANSFORMS = {
    "grad": lambda f, x: fg.grad(f)(x),
    "jvp": lambda f, x: fg.jvp(f, (x,), (fnp.ones(3),)),
    "vmap": lambda f, x: fg.vmap(f)(fnp.stack([x, x])),
    "jit": lambda f, x: fg.jit(f)(x),
}


def _assert_conversion_message(msg, transform, line, *also):
    code = _asarray_times_x.__code__
    assert f"inside {transform}" in msg, msg
    assert "f32[3]" in msg, msg
    assert f"{code.co_filename}:{line}" in msg, msg
    assert "funcgrad.numpy" in msg and "stop_gradient" in msg, msg
    for word in also:
        assert word in msg, msg


@pytest.mark.parametrize("transform", _TRANSFORMS)
def test_np_asarray_of_a_traced_value_raises(transform):
    x = fnp.ones(3)
    with pytest.raises(fg.TracerArrayConversionError) as info:
        _TRANSFORMS[transform](_asarray_times_x, x)
    line = _asarray_times_x.__code__.co_firstlineno + 1
    _assert_conversion_message(str(info.value), transform, line, "np.asarray")


@pytest.mark.parametrize("convert", [
    lambda x: np.array([x[0], x[1]]),
    lambda x: np.float32(x[0]),
    lambda x: np.asarray(x, dtype=np.float64),
])
def test_every_numpy_conversion_of_a_traced_value_raises(convert):
    with pytest.raises(fg.TracerArrayConversionError, match=r"inside grad.*funcgrad\.numpy"):
        fg.grad(lambda x: fnp.sum(convert(x) * x))(fnp.ones(3))


def test_conversion_error_type_is_exported_and_a_type_error():
    assert fg.TracerArrayConversionError is _core.TracerArrayConversionError
    assert issubclass(fg.TracerArrayConversionError, TypeError)
    assert "TracerArrayConversionError" in fg.__all__


def test_python_scalars_from_values_under_grad_still_work():
    # Control flow on concrete values under grad is a feature; only array conversion raises.
    def f(x):
        if bool(x > 0) and float(x) > 0.0 and x.item() > 0.0:
            return x * x
        return -x
    assert float(fg.grad(f)(fnp.asarray(2.0))) == pytest.approx(4.0)
    assert float(fg.grad(f)(fnp.asarray(-2.0))) == pytest.approx(-1.0)


# ------------------------------------------- numpy functions funcgrad lacks


def _log10_sum(x):
    return fnp.sum(np.log10(x))


def _real_if_close(x):
    return np.real_if_close(x)


def _sum_where(x):
    return np.sum(x, where=np.array([True, False, True]))


@pytest.mark.parametrize("f, transform, names", [
    (_log10_sum, "grad", ["numpy.log10", "has no log10"]),
    (_real_if_close, "jit", ["numpy.real_if_close"]),
    (_sum_where, "grad", ["numpy.sum", "where="]),
])
def test_numpy_function_without_funcgrad_equivalent_raises_on_traced_values(f, transform, names):
    x = fnp.asarray([1.0, 2.0, 3.0])
    run = fg.grad(f) if transform == "grad" else fg.jit(f)
    with pytest.raises(fg.TracerArrayConversionError) as info:
        run(x if f is not _real_if_close else fnp.asarray(X))
    msg = str(info.value)
    code = f.__code__
    assert f"inside {transform}" in msg and f"{code.co_filename}:{code.co_firstlineno + 1}" in msg, msg
    assert ("f32[3]" in msg or "f32[2,3]" in msg) and "funcgrad.numpy" in msg, msg
    for name in names:
        assert name in msg, msg


def test_numpy_function_without_funcgrad_equivalent_runs_in_numpy_on_concrete_arrays():
    x = fnp.asarray(np.abs(X) + 0.5)
    values = np.asarray(x)
    out = np.log10(x)
    assert type(out) is np.ndarray
    np.testing.assert_allclose(out, np.log10(values), rtol=1e-6)
    s = np.linalg.svd(fnp.asarray(X), compute_uv=False)
    np.testing.assert_allclose(s, np.linalg.svd(X, compute_uv=False), rtol=1e-5)
    mask = np.array([True, False, True])
    assert float(np.sum(fnp.asarray([1.0, 2.0, 4.0]), where=mask)) == 5.0
    # a funcgrad function that calls numpy back on its own arguments falls back too
    np.testing.assert_allclose(np.asarray(np.linspace(fnp.asarray(0.0), 1.0, 5)), np.linspace(0.0, 1.0, 5))


def test_shape_and_dtype_queries_work_on_tracers():
    def f(x):
        assert np.shape(x) == (2, 3) and np.ndim(x) == 2 and np.size(x) == 6
        assert np.result_type(x, np.float32) == np.float32
        return x * 2.0
    out = fg.jit(f)(fnp.asarray(X))
    np.testing.assert_allclose(np.asarray(out), 2.0 * X, rtol=1e-6)


# ------------------------------------------------------------------ out=


@pytest.mark.parametrize("call", [
    lambda a: np.add(a, a, out=a),
    lambda a: np.sin(a, out=a),
    lambda a: np.sum(a, axis=0, out=a[0]),
    lambda a: np.add.at(a, [0], 1.0),
])
def test_out_naming_a_funcgrad_array_raises(call):
    a = fnp.asarray(X)
    with pytest.raises(TypeError, match=r"immutable.*\.at\[") as info:
        call(a)
    assert "f32[" in str(info.value)
    np.testing.assert_array_equal(np.asarray(a), X.astype(np.float32))


def test_numpy_buffer_plus_equals_funcgrad_array():
    # Into the user's own numpy buffer, numpy's semantics: the buffer is written.
    a = fnp.asarray(X)
    z = np.ones((2, 3))
    z += a
    assert type(z) is np.ndarray and z.dtype == np.float64
    np.testing.assert_allclose(z, 1.0 + X.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(a), X.astype(np.float32))

    def accumulate(x):
        total = np.zeros(3)
        total += x
        return fnp.sum(x)
    with pytest.raises(fg.TracerArrayConversionError, match=r"numpy\.add.*inside grad"):
        fg.grad(accumulate)(fnp.ones(3))


# ------------------------------------------------ numpy operands on the left


def test_numpy_values_on_the_left_give_funcgrad_arrays():
    a = fnp.asarray(X[0])
    left = np.array([2.0, -1.0, 0.5])
    cases = [(left * a, left * X[0]), (np.float64(3.0) * a, 3.0 * X[0]), (left - a, left - X[0]),
             (left @ a, left @ X[0]), (left ** 2 / (a + 2.0), left ** 2 / (X[0] + 2))]
    for out, expected in cases:
        assert isinstance(out, fg.Array) and out.dtype == np.float32, (type(out), getattr(out, "dtype", None))
        np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-6)
    compare = left > a
    assert isinstance(compare, fg.Array) and compare.dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(compare), left > X[0])
    both = np.array([True, False, True]) & fnp.asarray([True, True, False])
    assert isinstance(both, fg.Array)
    np.testing.assert_array_equal(np.asarray(both), [True, False, False])
