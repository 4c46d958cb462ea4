"""Semantics users rely on: immutability, dtype promotion, which inputs have
gradients, tie conventions, the where-NaN trap, and debug_nans.
"""
from __future__ import annotations

import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp

# ------------------------------------------------------------ immutability


def test_item_assignment_raises_with_at_hint():
    x = fnp.zeros(3)
    with pytest.raises(TypeError, match=r"\.at\["):
        x[0] = 1.0
    with pytest.raises(TypeError, match=r"\.at\["):
        x[1:] = fnp.ones(2)
    np.testing.assert_array_equal(np.asarray(x), np.zeros(3))


def test_np_asarray_of_array_is_read_only():
    x = fnp.arange(4.0)
    view = np.asarray(x)
    assert not view.flags.writeable
    with pytest.raises(ValueError):
        view[0] = 100.0
    np.testing.assert_array_equal(np.asarray(x), np.arange(4.0))
    # an explicit copy is the user's to write
    copy = np.array(x, copy=True)
    copy[0] = 5.0
    assert float(x[0]) == 0.0


def test_at_updates_do_not_modify_the_original():
    x = fnp.arange(4.0)
    y = x.at[1].set(10.0).at[2].add(5.0)
    np.testing.assert_array_equal(np.asarray(x), [0.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(np.asarray(y), [0.0, 10.0, 7.0, 3.0])


def _user_input(rng):
    x = rng.standard_normal((3, 4))
    return x, x.copy()


@pytest.mark.parametrize("how", ["array", "op", "grad", "jit", "vmap", "jvp", "vjp", "at_set"])
def test_users_numpy_input_is_never_modified_nor_frozen(how, rng):
    x, original = _user_input(rng)
    f = lambda v: fnp.sum(fnp.sin(v) * v)
    if how == "array":
        a = fnp.array(x)
        b = fnp.asarray(x)
        np.testing.assert_allclose(np.asarray(a), original.astype(np.float32))
        del b
    elif how == "op":
        fnp.exp(x), fnp.add(x, x), fnp.reshape(x, (12,)), fnp.sum(x, axis=0), fnp.matmul(x, x.T)
    elif how == "grad":
        fg.grad(f)(x)
    elif how == "jit":
        fg.jit(f)(x)
        fg.jit(f)(x)
    elif how == "vmap":
        fg.vmap(f)(x)
    elif how == "jvp":
        fg.jvp(f, (x,), (np.ones_like(x),))
    elif how == "vjp":
        fg.vjp(f, x)[1](fnp.asarray(1.0))
    elif how == "at_set":
        fnp.asarray(x).at[0].set(0.0)
    assert x.flags.writeable, f"{how} froze the user's array"
    np.testing.assert_array_equal(x, original)
    x[0, 0] = 123.0             # still the user's to write
    assert x[0, 0] == 123.0


def test_array_does_not_alias_users_buffer(x64):
    x = np.arange(3.0)
    a = fnp.asarray(x)
    x[0] = 99.0
    assert float(a[0]) == 0.0


# ------------------------------------------------------------ dtype rules


def test_default_float_is_float32(x32):
    assert fnp.asarray([1.0, 2.0]).dtype == np.float32
    assert fnp.zeros(2).dtype == np.float32
    assert fnp.asarray(1.5).dtype == np.float32
    assert fnp.asarray(np.ones(2, np.float64)).dtype == np.float32
    assert fnp.asarray(np.ones(2, np.int64)).dtype == np.int32


def test_float64_input_stays_float64_with_x64(x64):
    assert fnp.asarray(np.ones(2, np.float64)).dtype == np.float64
    assert fnp.asarray([1.0, 2.0]).dtype == np.float64
    assert (fnp.asarray(np.ones(2)) * 2.0).dtype == np.float64
    assert fnp.asarray(np.ones(2, np.float32)).dtype == np.float32
    assert fnp.arange(3).dtype == np.int64


@pytest.mark.parametrize("make,expected", [
    (lambda: fnp.ones(2, dtype=fnp.float32) * 2.0, np.float32),       # Python float is weak
    (lambda: 2.0 * fnp.ones(2, dtype=fnp.float32), np.float32),
    (lambda: fnp.ones(2, dtype=fnp.float16) + 1.5, np.float16),
    (lambda: fnp.ones(2, dtype=fnp.int32) * 2.5, np.float32),          # int array * Python float -> default float
    (lambda: fnp.ones(2, dtype=fnp.int32) * 2, np.int32),
    (lambda: 3 + fnp.ones(2, dtype=fnp.float32), np.float32),          # Python int + f32 array
    (lambda: fnp.ones(2, dtype=fnp.int32) + fnp.ones(2, dtype=fnp.float32), np.float32),
    (lambda: fnp.ones(2, dtype=fnp.int8) + fnp.ones(2, dtype=fnp.int32), np.int32),
    (lambda: fnp.asarray([True, False]) + 1, np.int32),                  # bool + Python int
    (lambda: fnp.asarray([True, False]) + fnp.ones(2, dtype=fnp.int32), np.int32),
    (lambda: fnp.asarray([True, False]) * 1.5, np.float32),
    (lambda: fnp.ones(2, dtype=fnp.int32) / 2, np.float32),            # true division of ints
    (lambda: fnp.sqrt(fnp.ones(2, dtype=fnp.int32)), np.float32),
    (lambda: fnp.mean(fnp.ones(2, dtype=fnp.int32)), np.float32),
    (lambda: fnp.ones(2, dtype=fnp.float16) * fnp.ones(2, dtype=fnp.float32), np.float32),
])
def test_promotion(make, expected, x32):
    out = make()
    assert out.dtype == np.dtype(expected), f"got {out.dtype}, expected {np.dtype(expected)}"


@pytest.mark.parametrize("make,expected", [
    (lambda: fnp.ones(2, dtype=fnp.int32) * 2.5, np.float64),
    (lambda: fnp.ones(2, dtype=fnp.float32) * 2.0, np.float32),
    (lambda: fnp.ones(2, dtype=fnp.float32) + fnp.ones(2, dtype=fnp.float64), np.float64),
    (lambda: fnp.ones(2, dtype=fnp.int64) + 1, np.int64),
])
def test_promotion_x64(make, expected, x64):
    assert make().dtype == np.dtype(expected)


def test_float64_input_without_x64_is_float32_through_transforms(x32):
    x = np.linspace(0.0, 1.0, 4)   # float64
    f = lambda v: fnp.sum(v ** 2)
    assert fg.grad(f)(x).dtype == np.float32
    assert fg.jit(lambda v: v * 2.0)(x).dtype == np.float32
    assert fg.vmap(lambda v: v * 2.0)(x).dtype == np.float32


# ------------------------------------------------------ integer / bool inputs


@pytest.mark.parametrize("value,dtype_name", [(np.arange(3, dtype=np.int32), "i32"),
                                              (np.array([True, False]), "bool"), (3, "i32")])
def test_grad_wrt_integer_or_bool_raises(value, dtype_name, x32):
    with pytest.raises(TypeError, match=dtype_name):
        fg.grad(lambda x: fnp.sum(x * 1.0))(value)


def test_integer_argument_not_differentiated_is_fine(x32):
    g = fg.grad(lambda x, k: fnp.sum(x * k))(fnp.ones(2), fnp.asarray([2, 3]))
    np.testing.assert_array_equal(np.asarray(g), [2.0, 3.0])


def test_jacobian_wrt_int_raises(x32):
    with pytest.raises(TypeError, match="i32"):
        fg.jacrev(lambda x: x * 1.0)(fnp.arange(3))
    with pytest.raises(TypeError, match="i32"):
        fg.jacfwd(lambda x: x * 1.0)(fnp.arange(3))


def test_int_intermediate_has_no_gradient(x64):
    # gradient through argmax/astype(int) is zero, not an error
    g = fg.grad(lambda x: fnp.sum(x * fnp.argmax(x).astype(fnp.float64)))(fnp.asarray([1.0, 3.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(g), [1.0, 1.0, 1.0])
    g2 = fg.grad(lambda x: fnp.sum(x.astype(fnp.int32).astype(fnp.float64) + x))(fnp.asarray([1.5, 2.5]))
    np.testing.assert_array_equal(np.asarray(g2), [1.0, 1.0])


# ------------------------------------------------------ tie conventions


def test_grad_of_max_with_ties_splits_evenly(x64):
    g = fg.grad(lambda x: fnp.max(x))(fnp.asarray([1.0, 3.0, 3.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(g), [0.0, 0.5, 0.5, 0.0])
    g = fg.grad(lambda x: fnp.sum(fnp.max(x, axis=1)))(fnp.asarray([[2.0, 2.0, 2.0], [0.0, 1.0, -1.0]]))
    np.testing.assert_allclose(np.asarray(g), [[1 / 3, 1 / 3, 1 / 3], [0.0, 1.0, 0.0]], rtol=1e-15)
    g = fg.grad(lambda x: fnp.min(x))(fnp.asarray([1.0, 1.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(g), [0.5, 0.5, 0.0])


def test_maximum_of_x_with_itself_gives_half_each(x64):
    gx, gy = fg.grad(lambda x, y: fnp.sum(fnp.maximum(x, y)), argnums=(0, 1))(fnp.ones(2), fnp.ones(2))
    np.testing.assert_array_equal(np.asarray(gx), [0.5, 0.5])
    np.testing.assert_array_equal(np.asarray(gy), [0.5, 0.5])
    g = fg.grad(lambda x: fnp.sum(fnp.maximum(x, x)))(fnp.asarray([1.0, -2.0]))
    np.testing.assert_array_equal(np.asarray(g), [1.0, 1.0])       # 0.5 + 0.5 through both arguments
    g = fg.grad(lambda x: fnp.sum(fnp.minimum(x, 0.0)))(fnp.asarray([0.0, -1.0, 1.0]))
    np.testing.assert_array_equal(np.asarray(g), [0.5, 1.0, 0.0])


def test_abs_at_zero_gives_one_as_jax(x64):
    g = fg.grad(lambda x: fnp.sum(fnp.abs(x)))(fnp.asarray([0.0, -2.0, 3.0, -0.0]))
    np.testing.assert_array_equal(np.asarray(g), [1.0, -1.0, 1.0, 1.0])    # jax.grad(jnp.abs)(0.) == 1.
    _, t = fg.jvp(fnp.abs, (fnp.asarray(0.0),), (fnp.asarray(1.0),))
    assert float(t) == 1.0
    assert float(fg.grad(abs)(0.0)) == 1.0


def test_clip_at_bound_gives_half(x64):
    g = fg.grad(lambda x: fnp.sum(fnp.clip(x, -1.0, 1.0)))(fnp.asarray([-1.0, 1.0, 0.0, 2.0, -3.0]))
    np.testing.assert_array_equal(np.asarray(g), [0.5, 0.5, 1.0, 0.0, 0.0])


def test_zero_gradient_conventions(x64):
    x = fnp.asarray([0.3, -1.7, 2.5])
    for f in (fnp.floor, fnp.ceil, fnp.round, fnp.sign):
        np.testing.assert_array_equal(np.asarray(fg.grad(lambda v: fnp.sum(f(v)))(x)), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(np.asarray(fg.grad(lambda v: fnp.sum(v // 2.0))(x)), [0.0, 0.0, 0.0])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # the branch not taken divides by zero
def test_pow_conventions_at_zero(x64):
    # d/dx x**0 = 0 even at x = 0; d/dy 0**y = 0 (JAX's convention)
    g = fg.grad(lambda x: fnp.sum(fnp.power(x, 0.0)))(fnp.asarray([0.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(g), [0.0, 0.0])
    g = fg.grad(lambda y: fnp.sum(fnp.power(fnp.zeros(2), y)))(fnp.asarray([1.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(g), [0.0, 0.0])
    # d/dx x**2 at 0 is 0 (not nan)
    g = fg.grad(lambda x: fnp.sum(x ** 2))(fnp.asarray([0.0]))
    np.testing.assert_array_equal(np.asarray(g), [0.0])


def test_prod_gradient_exact_with_zeros(x64):
    x = np.asarray([2.0, 0.0, 3.0, 4.0])
    g = fg.grad(lambda v: fnp.prod(v))(fnp.asarray(x))
    np.testing.assert_array_equal(np.asarray(g), [0.0, 24.0, 0.0, 0.0])
    g = fg.grad(lambda v: fnp.prod(v))(fnp.asarray([0.0, 0.0, 3.0]))
    np.testing.assert_array_equal(np.asarray(g), [0.0, 0.0, 0.0])


# ------------------------------------------------------------ the where trap


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # 0 * inf: the point of the test
def test_where_sqrt_at_zero_gives_nan_gradient(x64):
    g = fg.grad(lambda x: fnp.sum(fnp.where(x > 0, fnp.sqrt(x), 0.0)))(fnp.asarray([0.0, 4.0]))
    g = np.asarray(g)
    assert np.isnan(g[0])
    assert g[1] == pytest.approx(0.25)


def test_double_where_gives_zero_gradient(x64):
    def safe_sqrt(x):
        return fnp.where(x > 0, fnp.sqrt(fnp.where(x > 0, x, 1.0)), 0.0)

    g = fg.grad(lambda x: fnp.sum(safe_sqrt(x)))(fnp.asarray([0.0, 4.0, -1.0]))
    np.testing.assert_array_equal(np.asarray(g), [0.0, 0.25, 0.0])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # 0 / 0: the point of the test
def test_norm_gradient_at_zero_is_nan(x64):
    g = fg.grad(fnp.linalg.norm)(fnp.zeros(3))
    assert np.isnan(np.asarray(g)).all()


# ------------------------------------------------------------- debug_nans

THIS_FILE = os.path.basename(__file__)


def test_debug_nans_off_by_default_gives_nan_silently(x32):
    assert not fg.config.debug_nans
    with np.errstate(invalid="ignore"):
        out = fnp.log(fnp.asarray([-1.0]))
    assert np.isnan(np.asarray(out)[0])


def test_debug_nans_forward_names_primitive_and_line(debug_nans):
    x = fnp.asarray([-1.0, 1.0])
    with np.errstate(invalid="ignore"):
        with pytest.raises(FloatingPointError) as info:
            line = inspect.currentframe().f_lineno + 1
            fnp.log(x)     # the line the error must name
    msg = str(info.value)
    assert "'log'" in msg
    assert f"{THIS_FILE}:{line}" in msg


def test_debug_nans_backward_names_the_forward_line(debug_nans, x64):
    def f(x):
        return fnp.sum(fnp.where(x > 0, fnp.sqrt(x), 0.0))   # NaN appears in sqrt's backward pass

    with np.errstate(all="ignore"):
        with pytest.raises(FloatingPointError) as info:
            fg.grad(f)(fnp.asarray([0.0, 1.0]))
    msg = str(info.value)
    assert "backward pass" in msg and "'sqrt'" in msg
    assert f"{THIS_FILE}:{f.__code__.co_firstlineno + 1}" in msg    # where sqrt was applied
    assert "where" in msg     # the hint about the double-where pattern


def test_debug_nans_under_jit(debug_nans):
    with np.errstate(invalid="ignore"):
        with pytest.raises(FloatingPointError, match="'log'") as info:
            fg.jit(lambda v: fnp.log(v) * 2.0)(fnp.asarray([-1.0]))  # LOG_LINE
    line = next(i for i, text in enumerate(open(__file__).read().splitlines(), 1) if text.endswith("# LOG_LINE"))
    assert f"test_semantics.py:{line}" in str(info.value)   # the traced line, not the call site


def test_debug_nans_under_jit_unfused_primitive(debug_nans):
    # a primitive jit does not fuse (matmul) is named even with fusion on
    x = fnp.asarray([[np.inf, 0.0]])
    with np.errstate(invalid="ignore"):
        with pytest.raises(FloatingPointError, match="'matmul'"):
            fg.jit(lambda a, b: a @ b)(x, fnp.asarray([[0.0], [1.0]]))


def test_debug_nans_does_not_fire_on_nan_input(debug_nans):
    out = fnp.asarray([np.nan, 1.0]) * 2.0    # the NaN came in; nothing produced it
    assert np.isnan(np.asarray(out)[0])


def _produce_nan():
    """Run by the subprocess below: a NaN made on a line of this file."""
    np.seterr(all="ignore")
    x = fnp.asarray([-1.0])
    return fnp.sqrt(x)  # NAN_LINE


def test_debug_nans_env_var_in_subprocess():
    here = os.path.dirname(os.path.abspath(__file__))
    line = next(i for i, text in enumerate(open(__file__).read().splitlines(), 1)
                if text.strip().endswith("# NAN_LINE") and "return" in text)
    repo = os.path.dirname(here)
    code = "import test_semantics; test_semantics._produce_nan()"
    env = dict(os.environ, FUNCGRAD_DEBUG_NANS="1",
               PYTHONPATH=os.pathsep.join([here, repo, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0, "FUNCGRAD_DEBUG_NANS=1 did not raise"
    assert "FloatingPointError" in proc.stderr, proc.stderr
    assert "'sqrt'" in proc.stderr, proc.stderr
    assert f"{THIS_FILE}:{line}" in proc.stderr, proc.stderr
    env["FUNCGRAD_DEBUG_NANS"] = "0"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
