"""custom_jvp: a hand-written forward-mode rule, used by every transform.

References are float64 numpy formulas and finite differences, never funcgrad
itself. Several tests give a rule that differs on purpose from the function's
true derivative: a transform that differentiated the function instead of
using the rule would then give a different number.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.testing import check_grads


def to_np(x):
    return np.asarray(x, dtype=np.float64)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def sigmoid_slope(x):
    """sigmoid'(x) = sigmoid(x) (1 - sigmoid(x)), written so that it keeps its digits for large x."""
    return sigmoid(x) * sigmoid(-np.asarray(x, np.float64))


# JAX's documentation example: log(1 + e^x), whose plain derivative is inf / inf = nan at x = 100.

@fg.custom_jvp
def log1pexp(x):
    return fnp.log1p(fnp.exp(x))


@log1pexp.defjvp
def log1pexp_jvp(primals, tangents):
    x, = primals
    x_dot, = tangents
    return log1pexp(x), x_dot * (1 - 1 / (1 + fnp.exp(x)))


def plain_log1pexp(x):
    return fnp.log1p(fnp.exp(x))


# ------------------------------------------------------------ the JAX examples


def test_log1pexp_grad_is_finite_where_plain_autodiff_gives_nan():
    x = fnp.asarray(100.0, dtype=fnp.float32)
    with np.errstate(all="ignore"):
        assert np.isnan(to_np(fg.grad(plain_log1pexp)(x)))
        g = fg.grad(log1pexp)(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(to_np(g), sigmoid(100.0), rtol=1e-6)


def test_log1pexp_value_jvp_grad_against_float64(x64):
    xs = np.array([-3.0, -0.5, 0.0, 0.7, 4.0])
    x = fnp.asarray(xs)
    np.testing.assert_allclose(to_np(log1pexp(x)), np.log1p(np.exp(xs)), rtol=1e-12)
    t = np.array([1.0, -2.0, 0.5, 3.0, 0.25])
    y, y_dot = fg.jvp(log1pexp, (x,), (fnp.asarray(t),))
    np.testing.assert_allclose(to_np(y), np.log1p(np.exp(xs)), rtol=1e-12)
    np.testing.assert_allclose(to_np(y_dot), sigmoid(xs) * t, rtol=1e-12)
    g = fg.grad(lambda v: fnp.sum(log1pexp(v) * fnp.asarray(t)))(x)
    np.testing.assert_allclose(to_np(g), sigmoid(xs) * t, rtol=1e-12)


def test_log1pexp_grad_of_grad_differentiates_the_rule(x64):
    # d/dx sigmoid(x) = sigmoid(x) (1 - sigmoid(x)); at 50 plain autodiff would give nan again.
    for x in (-1.5, 0.0, 0.8, 50.0):
        slope = sigmoid_slope(x)
        np.testing.assert_allclose(to_np(fg.grad(fg.grad(log1pexp))(fnp.asarray(x))), slope, rtol=1e-10)
        np.testing.assert_allclose(to_np(fg.hessian(log1pexp)(fnp.asarray(x))), slope, rtol=1e-10)
        # forward over reverse and reverse over forward
        fwd_rev = fg.jvp(fg.grad(log1pexp), (fnp.asarray(x),), (fnp.asarray(1.0),))[1]
        rev_fwd = fg.grad(lambda v: fg.jvp(log1pexp, (v,), (fnp.asarray(1.0),))[1])(fnp.asarray(x))
        np.testing.assert_allclose(to_np(fwd_rev), slope, rtol=1e-10)
        np.testing.assert_allclose(to_np(rev_fwd), slope, rtol=1e-10)


def test_log1pexp_vmap_and_jit(x64):
    xs = np.array([-2.0, 0.0, 1.0, 100.0])
    x = fnp.asarray(xs)
    np.testing.assert_allclose(to_np(fg.vmap(fg.grad(log1pexp))(x)), sigmoid(xs), rtol=1e-12)
    np.testing.assert_allclose(to_np(fg.jit(log1pexp)(x)), np.log1p(np.exp(xs)), rtol=1e-12)
    np.testing.assert_allclose(to_np(fg.jit(fg.vmap(fg.grad(log1pexp)))(x)), sigmoid(xs), rtol=1e-12)
    np.testing.assert_allclose(to_np(fg.grad(fg.jit(log1pexp))(fnp.asarray(100.0))), 1.0, rtol=1e-12)
    np.testing.assert_allclose(to_np(fg.vmap(fg.grad(fg.grad(log1pexp)))(x)), sigmoid_slope(xs), rtol=1e-10)


def test_defjvps_sin_x_times_y(x64):
    f = fg.custom_jvp(lambda x, y: fnp.sin(x) * y)
    assert f.defjvps(lambda x_dot, ans, x, y: fnp.cos(x) * x_dot * y,
                     lambda y_dot, ans, x, y: fnp.sin(x) * y_dot) is None
    x, y, tx, ty = 0.7, -1.3, 0.4, 2.5
    out, t_out = fg.jvp(f, (fnp.asarray(x), fnp.asarray(y)), (fnp.asarray(tx), fnp.asarray(ty)))
    np.testing.assert_allclose(to_np(out), np.sin(x) * y, rtol=1e-14)
    np.testing.assert_allclose(to_np(t_out), np.cos(x) * tx * y + np.sin(x) * ty, rtol=1e-14)
    gx, gy = fg.grad(f, argnums=(0, 1))(fnp.asarray(x), fnp.asarray(y))
    np.testing.assert_allclose([to_np(gx), to_np(gy)], [np.cos(x) * y, np.sin(x)], rtol=1e-14)
    # The rules are differentiable: second derivatives of sin(x) y.
    hxx = fg.grad(fg.grad(f))(fnp.asarray(x), fnp.asarray(y))
    hxy = fg.grad(fg.grad(f), argnums=1)(fnp.asarray(x), fnp.asarray(y))
    np.testing.assert_allclose([to_np(hxx), to_np(hxy)], [-np.sin(x) * y, np.cos(x)], rtol=1e-14)


def test_defjvps_none_rule_means_no_contribution(x64):
    # y gets no rule: its derivative is zero, although sin(x) * y depends on it.
    f = fg.custom_jvp(lambda x, y: fnp.sin(x) * y)
    f.defjvps(lambda x_dot, ans, x, y: fnp.cos(x) * x_dot * y, None)
    gx, gy = fg.grad(f, argnums=(0, 1))(fnp.asarray(0.3), fnp.asarray(2.0))
    np.testing.assert_allclose([to_np(gx), to_np(gy)], [np.cos(0.3) * 2.0, 0.0], rtol=1e-14)
    _, t_out = fg.jvp(f, (fnp.asarray(0.3), fnp.asarray(2.0)), (fnp.asarray(0.0), fnp.asarray(1.0)))
    assert to_np(t_out) == 0.0


# ------------------------------------------------- every transform uses the rule


def _wrong_rule_cube():
    """x**3 whose rule says the derivative is 5 x (not 3 x**2): which one a transform used shows."""
    calls = {"fun": 0, "rule": 0}

    @fg.custom_jvp
    def cube(x):
        calls["fun"] += 1
        return x ** 3

    @cube.defjvp
    def cube_jvp(primals, tangents):
        calls["rule"] += 1
        x, = primals
        t, = tangents
        return x ** 3, 5.0 * x * t

    return cube, calls


def test_every_transform_uses_the_rule(x64):
    cube, _ = _wrong_rule_cube()
    xs = np.array([0.5, -1.0, 2.0])
    x = fnp.asarray(xs)
    np.testing.assert_allclose(to_np(fg.jvp(cube, (x,), (fnp.ones(3),))[1]), 5 * xs)
    np.testing.assert_allclose(to_np(fg.grad(lambda v: fnp.sum(cube(v)))(x)), 5 * xs)
    np.testing.assert_allclose(to_np(fg.jacfwd(cube)(x)), np.diag(5 * xs))
    np.testing.assert_allclose(to_np(fg.jacrev(cube)(x)), np.diag(5 * xs))
    np.testing.assert_allclose(to_np(fg.vmap(fg.grad(cube))(x)), 5 * xs)
    np.testing.assert_allclose(to_np(fg.grad(lambda v: fnp.sum(fg.vmap(cube)(v)))(x)), 5 * xs)
    np.testing.assert_allclose(to_np(fg.jit(fg.grad(lambda v: fnp.sum(cube(v))))(x)), 5 * xs)
    # second order: the rule 5 x t differentiated once more is 5
    np.testing.assert_allclose(to_np(fg.vmap(fg.grad(fg.grad(cube)))(x)), [5.0, 5.0, 5.0])
    np.testing.assert_allclose(to_np(fg.hessian(lambda v: fnp.sum(cube(v)))(x)), 5 * np.eye(3))
    # the function's value is the function's, eagerly and under every transform
    np.testing.assert_allclose(to_np(cube(x)), xs ** 3)
    np.testing.assert_allclose(to_np(fg.value_and_grad(lambda v: fnp.sum(cube(v)))(x)[0]), np.sum(xs ** 3))


def test_reverse_mode_runs_the_function_once_and_the_rule_in_the_backward_pass():
    cube, calls = _wrong_rule_cube()
    x = fnp.asarray([1.0, 2.0])
    y, pullback = fg.vjp(cube, x)
    assert calls == {"fun": 1, "rule": 0}
    (ct,) = pullback(fnp.asarray([1.0, 3.0]))
    assert calls == {"fun": 1, "rule": 1}
    np.testing.assert_allclose(to_np(ct), [5.0, 30.0])
    fg.jvp(cube, (x,), (fnp.ones(2),))
    assert calls == {"fun": 1, "rule": 2}   # forward mode calls the rule only


def test_rule_primal_output_is_the_jvp_output():
    # Under jvp the rule's primal output is the result (the function is not run), as in JAX.
    f = fg.custom_jvp(lambda x: x * 2)
    f.defjvp(lambda p, t: (p[0] * 3, t[0]))
    out, _ = fg.jvp(f, (fnp.asarray(1.0),), (fnp.asarray(1.0),))
    assert float(out) == 3.0
    assert float(f(fnp.asarray(1.0))) == 2.0


def test_check_grads_against_finite_differences(x64, rng):
    @fg.custom_jvp
    def softplus_times(x, w):
        return fnp.log1p(fnp.exp(x)) * w

    @softplus_times.defjvp
    def _(primals, tangents):
        x, w = primals
        tx, tw = tangents
        s = 1 / (1 + fnp.exp(-x))
        return softplus_times(x, w), s * w * tx + fnp.log1p(fnp.exp(x)) * tw

    args = (fnp.asarray(rng.normal(size=3)), fnp.asarray(rng.normal(size=3)))
    check_grads(softplus_times, args, order=2, modes=("fwd", "rev"))
    check_grads(fg.vmap(softplus_times), args, order=1, modes=("fwd", "rev"))


# ---------------------------------------------------------------- pytrees, dtypes


def test_pytree_arguments_and_outputs(x64):
    @fg.custom_jvp
    def f(params, x):
        return {"y": params["a"] * x, "z": (fnp.sum(params["b"] * x), fnp.asarray(7))}

    @f.defjvp
    def f_jvp(primals, tangents):
        (p, x), (tp, tx) = primals, tangents
        assert isinstance(primals, tuple) and set(tp) == {"a", "b"}
        out = f(p, x)
        # The int output's tangent is ignored, whatever the rule gives.
        return out, {"y": tp["a"] * x + p["a"] * tx,
                     "z": (fnp.sum(tp["b"] * x + p["b"] * tx), fnp.asarray(0))}

    p = {"a": fnp.asarray(2.0), "b": fnp.asarray([1.0, -1.0])}
    x = fnp.asarray([0.5, 3.0])
    out = f(p, x)
    assert out["z"][1].dtype.kind == "i"
    g = fg.grad(lambda p: fnp.sum(f(p, x)["y"]) + f(p, x)["z"][0] * 2)(p)
    np.testing.assert_allclose(to_np(g["a"]), np.sum([0.5, 3.0]))
    np.testing.assert_allclose(to_np(g["b"]), 2 * np.array([0.5, 3.0]))
    _, t = fg.jvp(lambda x: f(p, x), (x,), (fnp.asarray([1.0, 0.0]),))
    np.testing.assert_allclose(to_np(t["y"]), [2.0, 0.0])
    np.testing.assert_allclose(to_np(t["z"][0]), 1.0)


def test_integer_argument_gets_zero_tangent(x64):
    seen = []

    @fg.custom_jvp
    def scale(x, n):
        return x * n

    @scale.defjvp
    def _(primals, tangents):
        seen.append(to_np(tangents[1]))
        return scale(*primals), tangents[0] * primals[1]

    x, n = fnp.asarray(1.5), fnp.asarray(3)
    np.testing.assert_allclose(to_np(fg.jvp(lambda x: scale(x, n), (x,), (fnp.asarray(1.0),))[1]), 3.0)
    np.testing.assert_allclose(to_np(fg.grad(scale)(x, n)), 3.0)
    assert seen and all(s == 0 for s in seen)


def test_keyword_arguments_are_resolved_to_positions(x64):
    f = fg.custom_jvp(lambda x, y=2.0: x * y)
    f.defjvp(lambda p, t: (p[0] * p[1], t[0] * p[1] + p[0] * t[1]))
    np.testing.assert_allclose(to_np(fg.grad(lambda x: f(x, y=fnp.asarray(4.0)))(fnp.asarray(1.0))), 4.0)
    np.testing.assert_allclose(to_np(fg.grad(lambda x: f(x))(fnp.asarray(1.0))), 2.0)


# ------------------------------------------------------------------ nondiff_argnums


def test_nondiff_argnums_with_a_function_argument(x64):
    # JAX's example: the rule gets the function first; its tangent rule (2 x_dot) is used.
    @functools.partial(fg.custom_jvp, nondiff_argnums=(0,))
    def app(f, x):
        return f(x)

    @app.defjvp
    def app_jvp(f, primals, tangents):
        x, = primals
        x_dot, = tangents
        return f(x), 2.0 * x_dot

    cube = lambda v: v ** 3  # noqa: E731
    np.testing.assert_allclose(to_np(app(cube, fnp.asarray(3.0))), 27.0)
    np.testing.assert_allclose(to_np(fg.grad(app, 1)(cube, fnp.asarray(3.0))), 2.0)
    np.testing.assert_allclose(to_np(fg.jvp(lambda x: app(cube, x), (fnp.asarray(3.0),), (fnp.asarray(1.5),))[1]),
                               3.0)
    np.testing.assert_allclose(to_np(fg.vmap(lambda x: fg.grad(app, 1)(cube, x))(fnp.asarray([1.0, 2.0]))),
                               [2.0, 2.0])


def test_nondiff_argnums_order_and_traced_arrays(x64):
    # nondiff arguments come first to the rule in the order nondiff_argnums gives; a traced array among
    # them works under every transform and has a zero derivative (stop_gradient), as in JAX.
    @functools.partial(fg.custom_jvp, nondiff_argnums=(2, 0))
    def f(k, x, name):
        assert name == "tag"
        return k * x

    @f.defjvp
    def f_jvp(name, k, primals, tangents):
        assert name == "tag"
        return f(k, primals[0], name), k * tangents[0]

    k = fnp.asarray([1.0, 2.0, 3.0])
    x = fnp.asarray([0.5, -1.0, 2.0])
    np.testing.assert_allclose(to_np(fg.grad(lambda x: fnp.sum(f(k, x, "tag")))(x)), to_np(k))
    np.testing.assert_allclose(to_np(fg.grad(lambda k: fnp.sum(f(k, x, "tag")))(k)), np.zeros(3))
    per_example = fg.vmap(fg.grad(lambda k, x: f(k, x, "tag"), 1))(k, x)
    np.testing.assert_allclose(to_np(per_example), to_np(k))
    np.testing.assert_allclose(to_np(fg.vmap(lambda k, x: f(k, x, "tag"))(k, x)), to_np(k) * to_np(x))
    jitted = fg.jit(lambda k, x: fg.grad(lambda x: fnp.sum(f(k, x, "tag")))(x))
    np.testing.assert_allclose(to_np(jitted(k, x)), to_np(k))


# ------------------------------------------------------------------ inside control flow


def test_rule_used_inside_a_scan_body(x64):
    # grad through lax.scan: the body's custom_jvp call keeps its rule (finite at 100, where autodiff is nan).
    def total(x):
        def body(carry, xi):
            return carry + log1pexp(xi * x), None
        return lax.scan(body, fnp.asarray(0.0), fnp.asarray([1.0, 2.0]))[0]

    x = 50.0
    expected = sigmoid(x) * 1.0 + sigmoid(2 * x) * 2.0
    np.testing.assert_allclose(to_np(fg.grad(total)(fnp.asarray(x))), expected, rtol=1e-12)
    np.testing.assert_allclose(to_np(fg.jit(fg.grad(total))(fnp.asarray(x))), expected, rtol=1e-12)


# ------------------------------------------------------------------ bad input


def test_calling_without_a_rule_is_an_error():
    f = fg.custom_jvp(lambda x: x * 2)
    with pytest.raises(TypeError, match=r"custom_jvp <lambda>: no jvp rule was defined; call <lambda>\.defjvp"):
        f(fnp.ones(2))
    with pytest.raises(TypeError, match=r"defjvp takes the rule, a function .* got int"):
        f.defjvp(3)


def test_rule_returning_bad_values_is_an_error():
    def make(rule):
        def double(x):
            return x * 2
        f = fg.custom_jvp(double)
        f.defjvp(rule)
        return f

    x, t = fnp.ones(3), fnp.ones(3)
    cases = [
        (lambda p, t: p[0] * 2, TypeError, r"custom_jvp double: the jvp rule must return a pair \(primal_out, "
                                           r"tangent_out\), got f32\[3\]"),
        (lambda p, t: (p[0] * 2, t[0][:2]), TypeError, r"custom_jvp double: the jvp rule returned a tangent f32\[2\] "
                                                      r"for output 0, a primal output f32\[3\].*shape and dtype"),
        (lambda p, t: (p[0] * 2, t[0].astype(fnp.int32)), TypeError, r"tangent i32\[3\] for output 0, a primal "
                                                                    r"output f32\[3\].*astype\('float32'\)"),
        (lambda p, t: (p[0] * 2, (t[0], t[0])), TypeError, r"primal output of structure \* but a tangent output "
                                                          r"of structure \(\*, \*\)"),
        (lambda p, t: (p[0] * 2, "zero"), TypeError, r"returned str 'zero' as the tangent of output 0 \(f32\[3\]\)"),
    ]
    for rule, kind, message in cases:
        f = make(rule)
        for run in (lambda: fg.jvp(f, (x,), (t,)), lambda: fg.grad(lambda v: fnp.sum(f(v)))(x)):
            with pytest.raises(kind, match=message):
                run()


def test_rule_returning_another_structure_than_the_function_is_an_error():
    f = fg.custom_jvp(lambda x: (x, x))
    f.defjvp(lambda p, t: (p[0], t[0]))
    with pytest.raises(TypeError, match=r"the jvp rule's primal output has structure \* but <lambda> returns "
                                        r"\(\*, \*\)"):
        fg.grad(lambda v: fnp.sum(f(v)[0]))(fnp.ones(2))


def test_nondiff_argnums_and_defjvps_are_checked():
    with pytest.raises(ValueError, match=r"custom_jvp scale: nondiff_argnums=\(2,\) but scale takes 2 positional"):
        fg.custom_jvp(lambda_scale, nondiff_argnums=2)
    with pytest.raises(TypeError, match=r"custom_jvp: nondiff_argnums must be an int or a tuple of ints"):
        fg.custom_jvp(lambda_scale, nondiff_argnums="k")
    f = fg.custom_jvp(lambda_scale, nondiff_argnums=0)
    with pytest.raises(TypeError, match=r"defjvps cannot be used with nondiff_argnums \(0,\)"):
        f.defjvps(None)
    g = fg.custom_jvp(lambda_scale)
    g.defjvps(lambda t, ans, k, x: t * x)
    with pytest.raises(TypeError, match=r"defjvps was given 1 rules but scale was called with 2 arguments"):
        fg.grad(g)(fnp.asarray(1.0), fnp.asarray(2.0))
    with pytest.raises(TypeError, match=r"defjvps takes one function \(or None\) per argument; rule 1 is int"):
        g.defjvps(None, 4)
    h = fg.custom_jvp(lambda_scale)
    h.defjvps(lambda t, ans, k, x: (t, t), None)
    with pytest.raises(TypeError, match=r"the defjvps rule for argument 0 returned a value of structure \(\*, \*\); "
                                        r"it must have the output's structure \*"):
        fg.jvp(h, (fnp.asarray(1.0), fnp.asarray(2.0)), (fnp.asarray(1.0), fnp.asarray(0.0)))


def lambda_scale(k, x):
    return k * x


lambda_scale.__name__ = "scale"
