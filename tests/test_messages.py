"""Messages that must tell the truth: what went wrong and what to do.

* forward mode through a ``custom_vjp`` names ``custom_jvp`` as the fix (it exists) and reverse mode;
* ``debug_nans`` gives the domain hint for a NaN made in the forward pass (with the input's bad value)
  and the double-where hint only for a NaN made in a backward pass;
* numpy's floating-point RuntimeWarnings from inside funcgrad are not shown (NaN and inf flow as in JAX),
  while the user's own numpy code still warns;
* a 64-bit dtype asked for with x64 off warns once per line, naming the function, as JAX does.
"""
from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.lax as lax
import funcgrad.numpy as fnp

THIS_FILE = __file__.rsplit("/", 1)[-1]


# ------------------------------------------------------------------ custom_vjp in forward mode

def _sin_with_vjp():
    @fg.custom_vjp
    def f(x):
        return fnp.sin(x)

    f.defvjp(lambda x: (fnp.sin(x), x), lambda x, g: (g * fnp.cos(x),))
    return f


@pytest.mark.parametrize("transform", ["jvp", "jit_jvp", "jacfwd"])
def test_forward_mode_of_custom_vjp_names_custom_jvp_and_reverse_mode(transform):
    f = _sin_with_vjp()
    run = {"jvp": lambda: fg.jvp(f, (1.0,), (1.0,)),
           "jit_jvp": lambda: fg.jvp(fg.jit(f), (1.0,), (1.0,)),
           "jacfwd": lambda: fg.jacfwd(f)(fnp.asarray([1.0, 2.0]))}[transform]
    with pytest.raises(TypeError) as info:
        run()
    msg = str(info.value)
    assert "custom_vjp function 'f'" in msg
    assert "@fg.custom_jvp" in msg and "jacrev" in msg
    assert "not exist" not in msg


def test_the_fix_the_custom_vjp_message_names_works():
    # The message says: give the function a custom_jvp rule and every transform works. Check that it does.
    @fg.custom_jvp
    def f(x):
        return fnp.sin(x)

    f.defjvp(lambda primals, tangents: (fnp.sin(primals[0]), fnp.cos(primals[0]) * tangents[0]))
    _, tangent = fg.jvp(f, (0.5,), (1.0,))
    np.testing.assert_allclose(float(tangent), np.cos(0.5), rtol=1e-6)
    np.testing.assert_allclose(float(fg.grad(f)(0.5)), np.cos(0.5), rtol=1e-6)
    # and reverse mode of the custom_vjp function itself works, as the message says
    np.testing.assert_allclose(float(fg.grad(_sin_with_vjp())(0.5)), np.cos(0.5), rtol=1e-6)


# ------------------------------------------------------------------ debug_nans hints

def test_forward_nan_gets_the_domain_hint_with_the_bad_input(debug_nans):
    x = fnp.asarray([2.0, -3.0, 1.0])
    with pytest.raises(FloatingPointError) as info:
        line = inspect.currentframe().f_lineno + 1
        fnp.log(x)
    msg = str(info.value)
    assert "'log'" in msg and f"{THIS_FILE}:{line}" in msg
    assert "index (1,)" in msg and "-3.0" in msg       # where the first NaN is, and the input there
    assert "outside the domain of 'log'" in msg
    assert "double-where" not in msg and "backward pass" not in msg


def test_forward_nan_under_jit_gets_the_domain_hint(debug_nans):
    with pytest.raises(FloatingPointError) as info:
        fg.jit(lambda v: fnp.sqrt(v) + 1.0)(fnp.asarray([4.0, -0.5]))
    msg = str(info.value)
    assert "'sqrt'" in msg and "-0.5" in msg and "outside the domain" in msg
    assert "double-where" not in msg


def test_forward_nan_from_infinite_inputs_says_so(debug_nans):
    x = fnp.asarray([np.inf, 1.0])
    with pytest.raises(FloatingPointError) as info:
        x - x
    msg = str(info.value)
    assert "already infinite" in msg and "inf" in msg and "double-where" not in msg


@pytest.mark.parametrize("jit", [False, True])
def test_backward_nan_from_finite_forward_values_gets_the_double_where_hint(debug_nans, jit):
    def f(x):
        return fnp.sum(fnp.where(x > 0, fnp.sqrt(x), 0.0))   # sqrt(0) = 0 is finite; its derivative is not

    g = fg.grad(fg.jit(f) if jit else f)
    forward = f(fnp.asarray([0.0, 1.0]))     # the forward pass alone raises nothing
    assert np.isfinite(float(forward))
    with pytest.raises(FloatingPointError) as info:
        g(fnp.asarray([0.0, 1.0]))
    msg = str(info.value)
    assert "backward pass" in msg and "'sqrt'" in msg
    assert "double-where" in msg and "where(x > 0, sqrt(where(x > 0, x, 1)), 0)" in msg
    assert "outside the domain" not in msg


# ------------------------------------------------------------------ numpy floating-point warnings

def _runtime_warnings(fn):
    # "always": every warning that passes the filters is recorded, even at a line that gave it before.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [w for w in caught if issubclass(w.category, RuntimeWarning)]


@pytest.mark.parametrize("case", ["log_negative", "divide_by_zero", "grad_sqrt_at_zero", "grad_log_at_zero",
                                  "jit_log_negative", "overflow"])
def test_float_errors_inside_funcgrad_do_not_warn(case):
    run = {"log_negative": lambda: fnp.log(fnp.asarray([-1.0, 1.0])),
           "divide_by_zero": lambda: fnp.asarray([1.0]) / fnp.asarray([0.0]),
           "grad_sqrt_at_zero": lambda: fg.grad(fnp.sqrt)(0.0),
           "grad_log_at_zero": lambda: fg.grad(lambda x: fnp.log(x))(0.0),
           "jit_log_negative": lambda: fg.jit(lambda v: fnp.log(v) * 2.0)(fnp.asarray([-2.0])),
           "overflow": lambda: fnp.exp(fnp.asarray([1000.0]))}[case]
    # `catch_warnings` starts from a copy of the filters, as pytest's per-test capture does: the filter
    # installed at import is gone there, and funcgrad must put it back.
    caught = _runtime_warnings(run)
    assert [str(w.message) for w in caught] == []


def test_float_errors_still_give_nan_and_inf():
    # silencing the warning changes nothing about the values (numpy float64 references)
    with np.errstate(all="ignore"):
        assert np.isnan(np.asarray(fnp.log(fnp.asarray([-1.0])))).all() and np.isnan(np.log(-1.0))
        assert float(fg.grad(fnp.sqrt)(0.0)) == np.inf == 0.5 / np.sqrt(0.0)


def test_users_own_numpy_still_warns_and_errstate_is_untouched():
    before = np.geterr()
    fnp.log(fnp.asarray([-1.0]))
    assert np.geterr() == before
    caught = _runtime_warnings(lambda: np.log(np.asarray([-1.0])))
    assert len(caught) == 1 and "invalid value" in str(caught[0].message)
    assert caught[0].filename == __file__


def test_error_filters_hold_for_the_users_code_only():
    # `-W error::RuntimeWarning`, or simplefilter("error") inside a block: the user's numpy code raises,
    # funcgrad's internal floating-point warnings stay silent (NaN flows, as in JAX).
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = fnp.log(fnp.asarray([-1.0]))
        assert np.isnan(np.asarray(out)).all()
        with pytest.raises(RuntimeWarning, match="invalid value"):
            np.log(np.asarray([-1.0]))


def test_funcgrads_own_runtime_warnings_are_not_filtered():
    from funcgrad._warnings import _FUNCGRAD_MODULES, _NUMPY_FLOAT_ERRORS
    import re
    assert re.match(_FUNCGRAD_MODULES, "funcgrad._core") and re.match(_FUNCGRAD_MODULES, "funcgrad")
    assert not re.match(_FUNCGRAD_MODULES, "funcgradx") and not re.match(_FUNCGRAD_MODULES, "mycode.funcgrad")
    assert not re.match(_NUMPY_FLOAT_ERRORS, "'getitem' has no GPU implementation", re.I)


# ------------------------------------------------------------------ 64-bit dtypes without x64

def _user_warnings(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [w for w in caught if w.category is UserWarning]


_REQUESTS = {
    "zeros": lambda: fnp.zeros(2, dtype=np.float64),
    "ones": lambda: fnp.ones((2,), dtype="float64"),
    "full": lambda: fnp.full(2, 3, dtype=np.int64),
    "array": lambda: fnp.array([1.0, 2.0], dtype=np.float64),
    "asarray": lambda: fnp.asarray([1, 2], dtype=np.int64),
    "astype": lambda: fnp.ones(2).astype(np.float64),
    "arange": lambda: fnp.arange(3, dtype=np.int64),
    "linspace": lambda: fnp.linspace(0.0, 1.0, 3, dtype=np.float64),
    "eye": lambda: fnp.eye(2, dtype=np.float64),
    "sum": lambda: fnp.sum(fnp.ones(3), dtype=np.float64),
    "zeros_like": lambda: fnp.zeros_like(fnp.ones(2), dtype=np.complex128),
}
_NARROWED = {"float64": "float32", "int64": "int32", "complex128": "complex64"}


@pytest.mark.parametrize("name", sorted(_REQUESTS))
def test_explicit_64_bit_dtype_without_x64_warns_at_the_users_line(name, x32):
    out, caught = _user_warnings(_REQUESTS[name])
    assert len(caught) == 1, [str(w.message) for w in caught]
    msg = str(caught[0].message)
    requested = msg.split("Explicitly requested dtype ")[1].split()[0]
    assert f"requested in {name} is not available" in msg
    assert f"truncated to dtype {_NARROWED[requested]}" in msg and str(out.dtype) == _NARROWED[requested]
    assert "enable_x64" in msg and "FUNCGRAD_ENABLE_X64" in msg
    assert caught[0].filename == __file__          # the user's line, not funcgrad's


def test_dtype_warning_under_jit_points_at_the_traced_line(x32):
    out, caught = _user_warnings(lambda: fg.jit(lambda a: a + fnp.zeros(2, dtype=np.float64))(fnp.ones(2)))
    assert out.dtype == np.float32
    assert len(caught) == 1 and "requested in zeros" in str(caught[0].message)
    assert caught[0].filename == __file__


def test_dtype_warning_once_per_call_site_by_default(x32):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in range(3):
            fnp.zeros(2, dtype=np.float64)    # one line: one warning
        fnp.ones(2, dtype=np.float64)         # another line: another
    assert len([w for w in caught if w.category is UserWarning]) == 2


@pytest.mark.parametrize("case", ["float32", "default", "numpy_float64_data", "python_float", "random",
                                  "frombuffer_default", "python_types"])
def test_no_dtype_warning_when_nothing_64_bit_was_asked_for(case, x32):
    run = {"float32": lambda: fnp.zeros(2, dtype=np.float32),
           "default": lambda: fnp.arange(3),
           "numpy_float64_data": lambda: fnp.asarray(np.zeros(3)),     # data narrows silently, as in JAX
           "python_float": lambda: fnp.array(1.5) * 2.0,
           "random": lambda: fg.random.uniform(fg.random.PRNGKey(0), (2,)),
           "frombuffer_default": lambda: fnp.frombuffer(np.zeros(2).tobytes()),
           "python_types": lambda: (fnp.zeros(2, dtype=float), fnp.arange(3, dtype=int),   # the defaults, as JAX
                                    fnp.fromfunction(lambda i: i, (2,)))}[case]
    _, caught = _user_warnings(run)
    assert [str(w.message) for w in caught] == []


def test_no_dtype_warning_with_x64(x64):
    out, caught = _user_warnings(lambda: lax.convert_element_type(fnp.ones(2), np.float64))
    assert out.dtype == np.float64 and caught == []
