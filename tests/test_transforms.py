"""Transforms and their compositions, checked against finite differences,
analytic derivatives and Python loops (never against funcgrad itself).
"""
from __future__ import annotations

import dataclasses
from collections import namedtuple
from typing import Any

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.testing import check_grads
from funcgrad.tree_util import flatten_fun, register_dataclass, tree_flatten, tree_leaves, tree_structure

# ------------------------------------------------------------------ helpers


def fd_grad(f, x, eps=1e-6):
    """Central-difference gradient of a scalar numpy function ``f`` at float64 ``x``."""
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def fd_jacobian(f, x, eps=1e-6):
    """Central-difference Jacobian, shape ``out.shape + x.shape``."""
    x = np.asarray(x, np.float64)
    out0 = np.asarray(f(x))
    jac = np.zeros(out0.shape + x.shape)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        jac[(Ellipsis,) + i] = (np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps)
    return jac


def to_np(x):
    return np.asarray(x, dtype=np.float64)


def loss_fn(x):
    """A scalar function with non-trivial second derivatives."""
    return fnp.sum(fnp.sin(x) * x ** 2) + fnp.sum(fnp.tanh(x)) ** 2


def loss_np(x):
    return np.sum(np.sin(x) * x ** 2) + np.sum(np.tanh(x)) ** 2


# -------------------------------------------------------- higher order


def test_hessian_vs_finite_differences_of_gradient(rng, x64):
    x = rng.standard_normal(4)
    h = fg.hessian(loss_fn)(fnp.asarray(x))
    assert h.shape == (4, 4)
    grad_np = lambda v: to_np(fg.grad(loss_fn)(fnp.asarray(v)))   # gradient itself checked below
    np.testing.assert_allclose(to_np(fg.grad(loss_fn)(fnp.asarray(x))), fd_grad(loss_np, x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(to_np(h), fd_jacobian(grad_np, x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_np(h), to_np(h).T, atol=1e-12)


def test_hessian_of_matrix_argument(rng, x64):
    w = rng.standard_normal((2, 3))
    f = lambda w: fnp.sum(fnp.exp(w) * w)
    h = fg.hessian(f)(fnp.asarray(w))
    assert h.shape == (2, 3, 2, 3)
    expected = np.diag(((2 + w) * np.exp(w)).ravel()).reshape(2, 3, 2, 3)   # d2/dw2 of w e^w = (2 + w) e^w
    np.testing.assert_allclose(to_np(h), expected, rtol=1e-12, atol=1e-12)


def test_third_order_grad_matches_analytic(x64):
    f = lambda x: fnp.sin(x) * fnp.exp(x)
    # d3/dx3 [sin(x) e^x] = 2 e^x (cos x - sin x)
    d3 = fg.grad(fg.grad(fg.grad(f)))
    for x in [-1.3, 0.0, 0.4, 2.1]:
        np.testing.assert_allclose(float(d3(fnp.asarray(x))), 2 * np.exp(x) * (np.cos(x) - np.sin(x)), rtol=1e-12)


def test_third_order_of_polynomial_float32(x32):
    d3 = fg.grad(fg.grad(fg.grad(lambda x: x ** 4 - 2.0 * x ** 3)))
    assert float(d3(fnp.asarray(1.5))) == pytest.approx(24 * 1.5 - 12, rel=1e-6)


def test_jvp_of_grad_is_hessian_vector_product(rng, x64):
    x, v = rng.standard_normal(5), rng.standard_normal(5)
    _, hvp = fg.jvp(fg.grad(loss_fn), (fnp.asarray(x),), (fnp.asarray(v),))
    hess_fd = fd_jacobian(lambda z: to_np(fg.grad(loss_fn)(fnp.asarray(z))), x)
    np.testing.assert_allclose(to_np(hvp), hess_fd @ v, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_np(hvp), to_np(fg.hessian(loss_fn)(fnp.asarray(x))) @ v, rtol=1e-10, atol=1e-10)


def test_grad_of_vjp_and_jit_of_grad(rng, x64):
    x = fnp.asarray(rng.standard_normal(3))
    g = fg.jit(fg.grad(loss_fn))
    np.testing.assert_allclose(to_np(g(x)), fd_grad(loss_np, to_np(x)), rtol=1e-6, atol=1e-7)
    check_grads(fg.grad(loss_fn), (x,), order=1)


# ------------------------------------------------------------ vmap x grad


def _mlp(params, x):
    h = fnp.tanh(x @ params["w1"] + params["b1"])
    return h @ params["w2"]


def _per_example_loss(params, x, y):
    return fnp.sum((_mlp(params, x) - y) ** 2)


def _params(rng):
    return {"w1": fnp.asarray(rng.standard_normal((3, 4))), "b1": fnp.asarray(rng.standard_normal(4)),
            "w2": fnp.asarray(rng.standard_normal((4, 2)))}


def test_per_example_gradients_vmap_grad_vs_loop(rng, x64):
    params = _params(rng)
    xs, ys = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    batched = fg.vmap(fg.grad(_per_example_loss), in_axes=(None, 0, 0))(params, fnp.asarray(xs), fnp.asarray(ys))
    for k in params:
        assert batched[k].shape == (5,) + params[k].shape
    for i in range(5):
        single = fg.grad(_per_example_loss)(params, fnp.asarray(xs[i]), fnp.asarray(ys[i]))
        for k in params:
            np.testing.assert_allclose(to_np(batched[k][i]), to_np(single[k]), rtol=1e-12, atol=1e-12)
        # and the single-example gradient against finite differences
        w2_fd = fd_grad(lambda w2: float(_per_example_loss({**params, "w2": fnp.asarray(w2)}, fnp.asarray(xs[i]),
                                                            fnp.asarray(ys[i]))), to_np(params["w2"]))
        np.testing.assert_allclose(to_np(single["w2"]), w2_fd, rtol=1e-6, atol=1e-7)


def test_grad_of_vmap(rng, x64):
    x = rng.standard_normal((4, 3))
    f = lambda x: fnp.sum(fg.vmap(lambda r: fnp.sin(r) @ r)(x) ** 2)
    f_np = lambda x: np.sum(np.einsum("ij,ij->i", np.sin(x), x) ** 2)
    np.testing.assert_allclose(to_np(fg.grad(f)(fnp.asarray(x))), fd_grad(f_np, x), rtol=1e-6, atol=1e-7)


def test_vmap_of_hessian_vs_loop(rng, x64):
    xs = rng.standard_normal((3, 2))
    hs = fg.vmap(fg.hessian(loss_fn))(fnp.asarray(xs))
    for i in range(3):
        grad_np = lambda v: to_np(fg.grad(loss_fn)(fnp.asarray(v)))
        np.testing.assert_allclose(to_np(hs[i]), fd_jacobian(grad_np, xs[i]), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------- custom_vjp


def _make_clip_gradient(calls):
    @fg.custom_vjp
    def clip_gradient(x):
        return x * 1.0

    def fwd(x):
        calls.append("fwd")
        return x * 1.0, None

    def bwd(res, g):
        calls.append("bwd")
        return (fnp.clip(g, -1.0, 1.0),)

    clip_gradient.defvjp(fwd, bwd)
    return clip_gradient


def test_custom_vjp_rule_is_used_under_grad(x64):
    calls = []
    clip_gradient = _make_clip_gradient(calls)
    x = fnp.asarray([0.5, 2.0, -3.0])
    # d/dx sum(10 * clip_gradient(x)): the true derivative is 10, the rule clips it to 1.
    g = fg.grad(lambda x: fnp.sum(10.0 * clip_gradient(x)))(x)
    np.testing.assert_array_equal(to_np(g), [1.0, 1.0, 1.0])
    assert calls == ["fwd", "bwd"]
    # the primal value is the function's own
    np.testing.assert_array_equal(to_np(clip_gradient(x)), to_np(x))
    # small cotangents pass through unchanged
    g_small = fg.grad(lambda x: fnp.sum(0.25 * clip_gradient(x)))(x)
    np.testing.assert_array_equal(to_np(g_small), [0.25, 0.25, 0.25])


def test_custom_vjp_with_residuals_matches_finite_differences(rng, x64):
    @fg.custom_vjp
    def logsig(x):
        return -fnp.log1p(fnp.exp(-x))

    def fwd(x):
        s = 1.0 / (1.0 + fnp.exp(-x))
        return -fnp.log1p(fnp.exp(-x)), s

    logsig.defvjp(fwd, lambda s, g: (g * (1.0 - s),))
    x = rng.standard_normal(4)
    g = fg.grad(lambda x: fnp.sum(logsig(x) * fnp.arange(1.0, 5.0)))(fnp.asarray(x))
    expected = fd_grad(lambda x: np.sum(-np.log1p(np.exp(-x)) * np.arange(1.0, 5.0)), x)
    np.testing.assert_allclose(to_np(g), expected, rtol=1e-6, atol=1e-8)
    check_grads(logsig, (fnp.asarray(x),), order=1, modes=("rev",))


def test_custom_vjp_under_vmap(x64):
    calls = []
    clip_gradient = _make_clip_gradient(calls)
    xs = fnp.asarray([[0.5, 2.0], [-3.0, 1.0], [0.1, 0.2]])
    scales = fnp.asarray([10.0, 0.5, -4.0])
    per_example = fg.vmap(fg.grad(lambda x, s: fnp.sum(s * clip_gradient(x))))(xs, scales)
    expected = np.clip(np.asarray([10.0, 0.5, -4.0])[:, None] * np.ones((3, 2)), -1.0, 1.0)
    np.testing.assert_array_equal(to_np(per_example), expected)
    assert "bwd" in calls
    # forward value under vmap
    np.testing.assert_array_equal(to_np(fg.vmap(clip_gradient)(xs)), to_np(xs))


def test_custom_vjp_inside_jit(x64):
    calls = []
    clip_gradient = _make_clip_gradient(calls)
    f = fg.jit(fg.grad(lambda x: fnp.sum(5.0 * clip_gradient(x) ** 2)))
    x = fnp.asarray([0.05, 1.0, -2.0])
    # true cotangent into clip_gradient: 10 x -> clipped to [-1, 1]
    np.testing.assert_allclose(to_np(f(x)), np.clip(10 * np.asarray([0.05, 1.0, -2.0]), -1, 1), rtol=1e-12)
    np.testing.assert_allclose(to_np(f(x)), np.clip(10 * np.asarray([0.05, 1.0, -2.0]), -1, 1), rtol=1e-12)
    # the value of the jitted function itself
    np.testing.assert_allclose(to_np(fg.jit(clip_gradient)(x)), to_np(x))


def test_custom_vjp_forward_mode_raises_clear_type_error():
    clip_gradient = _make_clip_gradient([])
    with pytest.raises(TypeError, match=r"clip_gradient.*custom_vjp|custom_vjp.*clip_gradient"):
        fg.jvp(clip_gradient, (fnp.ones(2),), (fnp.ones(2),))
    with pytest.raises(TypeError, match="forward-mode"):
        fg.jacfwd(clip_gradient)(fnp.ones(2))


def test_custom_vjp_nondiff_argnums(x64):
    @fg.custom_vjp
    def scaled(k, x):
        return x * k

    scaled.nondiff_argnums = (0,)
    scaled.defvjp(lambda k, x: (x * k, None), lambda k, res, g: (g * (2 * k),))
    g = fg.grad(lambda x: fnp.sum(scaled(3.0, x)))(fnp.ones(2))
    np.testing.assert_array_equal(to_np(g), [6.0, 6.0])


def test_custom_vjp_nondiff_argnums_negative_and_in_order(rng, x64):
    # bwd gets the non-differentiable arguments first, in nondiff_argnums order; -1 counts from the end
    seen = []

    def fwd(x, scale, power):
        return scale * x ** power, x

    def bwd(power, scale, x, g):
        seen.append((power, scale))
        return (g * scale * power * x ** (power - 1),)

    f = fg.custom_vjp(lambda x, scale, power: scale * x ** power, nondiff_argnums=(-1, 1))
    f.defvjp(fwd, bwd)
    x = rng.standard_normal(3)
    g = fg.grad(lambda v: fnp.sum(f(v, 2.5, 3)))(fnp.asarray(x))
    np.testing.assert_allclose(to_np(g), fd_grad(lambda v: np.sum(2.5 * v ** 3), x), rtol=1e-6, atol=1e-8)
    assert seen == [(3, 2.5)]
    assert f.nondiff_argnums == (2, 1)             # -1: the last parameter of the signature
    np.testing.assert_allclose(to_np(f(fnp.asarray(x), 2.5, 3)), 2.5 * x ** 3, rtol=1e-12)


# -------------------------------------------------------------- checkpoint


def _block(x):
    return fnp.tanh(fnp.sin(x) * x + 0.5)


def test_checkpoint_same_gradients(rng, x64):
    x = fnp.asarray(rng.standard_normal(4))
    f = lambda x: fnp.sum(_block(_block(x)) ** 2)
    f_ckpt = lambda x: fnp.sum(fg.checkpoint(_block)(fg.checkpoint(_block)(x)) ** 2)
    np.testing.assert_allclose(to_np(f_ckpt(x)), to_np(f(x)), rtol=1e-14)
    g, g_ckpt = fg.grad(f)(x), fg.grad(f_ckpt)(x)
    np.testing.assert_allclose(to_np(g_ckpt), to_np(g), rtol=1e-12, atol=1e-14)
    f_np = lambda x: np.sum(np.tanh(np.sin(np.tanh(np.sin(x) * x + 0.5)) * np.tanh(np.sin(x) * x + 0.5) + 0.5) ** 2)
    np.testing.assert_allclose(to_np(g_ckpt), fd_grad(f_np, to_np(x)), rtol=1e-6, atol=1e-8)


def test_checkpoint_grad_of_grad(rng, x64):
    x = fnp.asarray(rng.standard_normal(3))
    f = lambda x: fnp.sum(_block(x) ** 3)
    f_ckpt = lambda x: fnp.sum(fg.checkpoint(_block)(x) ** 3)
    h = fg.jacrev(fg.grad(f_ckpt))(x)
    np.testing.assert_allclose(to_np(h), to_np(fg.jacrev(fg.grad(f))(x)), rtol=1e-10, atol=1e-12)
    grad_np = lambda v: to_np(fg.grad(f)(fnp.asarray(v)))
    np.testing.assert_allclose(to_np(h), fd_jacobian(grad_np, to_np(x)), rtol=1e-5, atol=1e-6)
    check_grads(f_ckpt, (x,), order=2, modes=("rev",))


def test_checkpoint_does_not_keep_intermediates(x64):
    """The wrapped function runs again during the backward pass (rematerialisation)."""
    runs = []

    def block(x):
        runs.append(1)
        return fnp.sin(x) * x

    fg.grad(lambda x: fnp.sum(fg.checkpoint(block)(x)))(fnp.ones(3))
    assert len(runs) == 2


# ----------------------------------------------------------- stop_gradient


def test_stop_gradient(x64):
    x = fnp.asarray([1.0, 2.0])
    g = fg.grad(lambda x: fnp.sum(x * fg.stop_gradient(x)))(x)
    np.testing.assert_array_equal(to_np(g), [1.0, 2.0])          # d/dx x*c = c
    g2 = fg.grad(lambda x: fnp.sum(fg.stop_gradient(x ** 2)) + fnp.sum(x))(x)
    np.testing.assert_array_equal(to_np(g2), [1.0, 1.0])
    _, t = fg.jvp(lambda x: fg.stop_gradient(x) * 3.0, (x,), (fnp.ones(2),))
    np.testing.assert_array_equal(to_np(t), [0.0, 0.0])
    tree = fg.stop_gradient({"a": x, "b": [x]})
    np.testing.assert_array_equal(to_np(tree["b"][0]), to_np(x))


# ------------------------------------------------------------ grad options


def test_has_aux(x64):
    def f(x):
        y = fnp.sum(x ** 2)
        return y, {"norm": fnp.sqrt(y), "n": 3}

    g, aux = fg.grad(f, has_aux=True)(fnp.asarray([1.0, 2.0, 2.0]))
    np.testing.assert_array_equal(to_np(g), [2.0, 4.0, 4.0])
    assert float(aux["norm"]) == pytest.approx(3.0) and aux["n"] == 3
    assert isinstance(aux["norm"], fg.Array)          # no tracer escapes
    (v, aux2), g2 = fg.value_and_grad(f, has_aux=True)(fnp.asarray([1.0, 2.0, 2.0]))
    assert float(v) == pytest.approx(9.0) and float(aux2["norm"]) == pytest.approx(3.0)
    np.testing.assert_array_equal(to_np(g2), to_np(g))


def test_argnums_tuple(x64):
    f = lambda a, b, c: fnp.sum(a * b ** 2 + c)
    a, b, c = fnp.asarray([1.0, 2.0]), fnp.asarray([3.0, -1.0]), fnp.asarray([5.0, 5.0])
    ga, gb = fg.grad(f, argnums=(0, 1))(a, b, c)
    np.testing.assert_array_equal(to_np(ga), [9.0, 1.0])
    np.testing.assert_array_equal(to_np(gb), [6.0, -4.0])
    (gc,) = fg.grad(f, argnums=(2,))(a, b, c)
    np.testing.assert_array_equal(to_np(gc), [1.0, 1.0])
    gb_only = fg.grad(f, argnums=-2)(a, b, c)
    np.testing.assert_array_equal(to_np(gb_only), [6.0, -4.0])
    v, (ga2, gc2) = fg.value_and_grad(f, argnums=(0, 2))(a, b, c)
    assert float(v) == pytest.approx(float(np.sum([1 * 9 + 5, 2 * 1 + 5])))
    np.testing.assert_array_equal(to_np(gc2), [1.0, 1.0])


Point = namedtuple("Point", ["x", "y"])


@register_dataclass
@dataclasses.dataclass(frozen=True)
class Linear:
    w: Any
    b: Any


@pytest.mark.parametrize("kind", ["dict", "list", "tuple", "namedtuple", "dataclass", "nested_with_none"])
def test_pytree_params(kind, rng, x64):
    w, b = rng.standard_normal((3, 2)), rng.standard_normal(2)
    x = fnp.asarray(rng.standard_normal((4, 3)))
    W, Bv = fnp.asarray(w), fnp.asarray(b)
    make, get = {
        "dict": (lambda w, b: {"w": w, "b": b}, lambda p: (p["w"], p["b"])),
        "list": (lambda w, b: [w, b], lambda p: (p[0], p[1])),
        "tuple": (lambda w, b: (w, b), lambda p: (p[0], p[1])),
        "namedtuple": (lambda w, b: Point(w, b), lambda p: (p.x, p.y)),
        "dataclass": (lambda w, b: Linear(w, b), lambda p: (p.w, p.b)),
        "nested_with_none": (lambda w, b: {"layer": [w, None, (b,)], "extra": None},
                             lambda p: (p["layer"][0], p["layer"][2][0])),
    }[kind]

    def loss(params, x):
        pw, pb = get(params)
        return fnp.sum(fnp.tanh(x @ pw + pb) ** 2)

    g = fg.grad(loss)(make(W, Bv), x)
    assert type(g) is type(make(W, Bv))
    gw, gb = get(g)
    xn = to_np(x)
    loss_np_w = lambda w_: np.sum(np.tanh(xn @ w_ + b) ** 2)
    loss_np_b = lambda b_: np.sum(np.tanh(xn @ w + b_) ** 2)
    np.testing.assert_allclose(to_np(gw), fd_grad(loss_np_w, w), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(to_np(gb), fd_grad(loss_np_b, b), rtol=1e-6, atol=1e-8)
    if kind == "nested_with_none":
        assert g["extra"] is None and g["layer"][1] is None
    # the same tree structure through vmap and jit
    out = fg.jit(fg.grad(loss))(make(W, Bv), x)
    np.testing.assert_allclose(to_np(get(out)[0]), to_np(gw), rtol=1e-12)


# --------------------------------------------------------------- Jacobians


def _vec_fn(x):
    return fnp.stack([fnp.sin(x[0]) * x[1], x[0] * x[1] * x[2], fnp.exp(x[2]) - x[0] ** 2, fnp.sum(x ** 3)])


def _vec_np(x):
    return np.stack([np.sin(x[0]) * x[1], x[0] * x[1] * x[2], np.exp(x[2]) - x[0] ** 2, np.sum(x ** 3)])


def test_jacfwd_jacrev_finite_differences(rng, x64):
    x = rng.standard_normal(3)
    jf = to_np(fg.jacfwd(_vec_fn)(fnp.asarray(x)))
    jr = to_np(fg.jacrev(_vec_fn)(fnp.asarray(x)))
    assert jf.shape == jr.shape == (4, 3)
    fd = fd_jacobian(_vec_np, x)
    np.testing.assert_allclose(jf, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(jr, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(jf, jr, rtol=1e-12, atol=1e-12)


def test_jacobians_of_matrix_function_and_argnums(rng, x64):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 2))
    f = lambda a, b: fnp.tanh(a @ b)
    for jac in (fg.jacfwd, fg.jacrev):
        ja, jb = jac(f, argnums=(0, 1))(fnp.asarray(a), fnp.asarray(b))
        assert ja.shape == (2, 2, 2, 3) and jb.shape == (2, 2, 3, 2)
        np.testing.assert_allclose(to_np(ja), fd_jacobian(lambda a_: np.tanh(a_ @ b), a), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(to_np(jb), fd_jacobian(lambda b_: np.tanh(a @ b_), b), rtol=1e-6, atol=1e-8)


def test_jacobian_of_dict_output(rng, x64):
    x = rng.standard_normal(2)
    f = lambda x: {"s": fnp.sum(x ** 2), "v": x * 3.0}
    for jac in (fg.jacfwd, fg.jacrev):
        j = jac(f)(fnp.asarray(x))
        np.testing.assert_allclose(to_np(j["s"]), 2 * x, rtol=1e-12)
        np.testing.assert_allclose(to_np(j["v"]), 3 * np.eye(2), rtol=1e-12)


def test_jacobians_and_hessian_pass_keyword_arguments(rng, x64):
    # keyword arguments are held fixed, as in grad
    x = rng.standard_normal(3)
    f = lambda v, *, scale: fnp.sin(v) * scale
    expected = fd_jacobian(lambda v: np.sin(v) * 1.5, x)
    for jac in (fg.jacfwd, fg.jacrev):
        np.testing.assert_allclose(to_np(jac(f)(fnp.asarray(x), scale=1.5)), expected, rtol=1e-6, atol=1e-8)
    h = fg.hessian(lambda v, *, scale: fnp.sum(v ** 3) * scale)(fnp.asarray(x), scale=2.0)
    np.testing.assert_allclose(to_np(h), np.diag(12.0 * x), rtol=1e-12)


# ------------------------------------------ the pytree wrapper behind every transform


def test_flatten_fun_rebuilds_arguments_and_records_the_output_structure():
    def f(params, xs):
        return {"y": params["w"] * xs[0] + params["b"], "z": (xs[1], xs[0] - 1)}

    args = ({"w": 3, "b": 1}, [5, 7])
    leaves, in_tree = tree_flatten(args)
    flat_f, out_tree = flatten_fun(f, in_tree)
    assert out_tree() is None                      # known once it has run
    expected_leaves, expected_tree = tree_flatten(f(*args))
    assert flat_f(*leaves) == expected_leaves == [16, 7, 4]
    assert out_tree() == expected_tree
    # with aux: the output is flattened, the aux comes back untouched
    aux = {"note": [1, 2]}
    flat_aux, out_tree_aux = flatten_fun(lambda a, b: ((a + b, a * b), aux), tree_structure((0, 0)), has_aux=True)
    out_leaves, got_aux = flat_aux(2, 5)
    assert out_leaves == [7, 10] and got_aux is aux and out_tree_aux() == tree_structure((0, 0))
    with pytest.raises(TypeError, match=r"demo\(has_aux=True\): g must return a pair \(output, aux\), got int"):
        flatten_fun(lambda a: a, tree_structure((0,)), has_aux=True, where="demo(has_aux=True): g")[0](3)


def test_grad_of_single_leaf_and_pytree_arguments_agree(rng, x64):
    # the single-array fast path and the pytree path differentiate the same function alike
    x, w = rng.standard_normal(3), rng.standard_normal(3)
    loss = lambda p, w: fnp.sum(fnp.tanh(p["x"] * w) ** 2)
    g_tree = fg.grad(loss)({"x": fnp.asarray(x)}, fnp.asarray(w))["x"]
    g_leaf = fg.grad(lambda v, w: loss({"x": v}, w))(fnp.asarray(x), fnp.asarray(w))
    expected = fd_grad(lambda v: np.sum(np.tanh(v * w) ** 2), x)
    np.testing.assert_allclose(to_np(g_leaf), expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(to_np(g_tree), expected, rtol=1e-6, atol=1e-8)


# -------------------------------------------------------------------- jit


def test_jit_cache_retraces_only_on_new_signature():
    traces = []

    @fg.jit
    def f(x, y):
        traces.append(1)
        return x * 2.0 + y

    a, b = fnp.ones((2, 3)), fnp.ones(3)
    f(a, b)
    f(fnp.zeros((2, 3)), fnp.ones(3) * 5.0)         # same shapes/dtypes: hit
    info = f.cache_info()
    assert (info["misses"], info["hits"]) == (1, 1) and len(traces) == 1
    f(fnp.ones((4, 3)), b)                          # new shape: miss
    f(fnp.ones((2, 3), dtype=fnp.int32), b)         # new dtype: miss
    f({"not": "used"} and a, b)                     # same signature again: hit
    info = f.cache_info()
    assert (info["misses"], info["hits"]) == (3, 2) and len(traces) == 3
    np.testing.assert_array_equal(to_np(f(a, b)), np.full((2, 3), 3.0))


def test_jit_cache_pytree_structure_is_part_of_signature():
    traces = []

    @fg.jit
    def f(p):
        traces.append(1)
        return sum(tree_leaves(p))

    f({"a": fnp.ones(2), "b": fnp.ones(2)})
    f({"a": fnp.ones(2), "c": fnp.ones(2)})
    f([fnp.ones(2), fnp.ones(2)])
    f({"a": fnp.zeros(2), "b": fnp.ones(2)})
    assert f.cache_info()["misses"] == 3 and f.cache_info()["hits"] == 1 and len(traces) == 3


def test_jit_static_argnums():
    traces = []

    def power(x, n):
        traces.append(n)
        out = x
        for _ in range(n - 1):        # Python control flow on a static argument
            out = out * x
        return out

    f = fg.jit(power, static_argnums=1)
    x = fnp.asarray([1.5, -2.0])
    np.testing.assert_allclose(to_np(f(x, 3)), np.asarray([1.5, -2.0]) ** 3, rtol=1e-6)
    np.testing.assert_allclose(to_np(f(x, 3)), np.asarray([1.5, -2.0]) ** 3, rtol=1e-6)
    np.testing.assert_allclose(to_np(f(x, 2)), np.asarray([1.5, -2.0]) ** 2, rtol=1e-6)
    assert traces == [3, 2]
    assert f.cache_info()["misses"] == 2 and f.cache_info()["hits"] == 1
    g = fg.jit(power, static_argnames="n")
    np.testing.assert_allclose(to_np(g(x, n=4)), np.asarray([1.5, -2.0]) ** 4, rtol=1e-6)


def test_jit_static_argument_by_position_keyword_or_default():
    # a static position may come positionally, by keyword, or keep its default; -1 counts from the end
    traces = []

    def power(x, n=2):
        traces.append(n)
        out = x
        for _ in range(n - 1):        # Python control flow: only possible on a static value
            out = out * x
        return out

    x_np = np.asarray([1.5, -2.0])
    x = fnp.asarray(x_np)
    for nums in (1, -1, (np.int64(1),)):
        f = fg.jit(power, static_argnums=nums)
        np.testing.assert_allclose(to_np(f(x, 3)), x_np ** 3, rtol=1e-6)
        np.testing.assert_allclose(to_np(f(x, n=4)), x_np ** 4, rtol=1e-6)
        np.testing.assert_allclose(to_np(f(x)), x_np ** 2, rtol=1e-6)
    assert traces == [3, 4, 2, 3, 4, 2, 3, 4, 2]
    ir = str(fg.jit(power, static_argnums=1).trace(x, n=3))
    assert ir.count("mul") == 2, ir


def test_jit_runs_cached_program_without_python():
    side_effects = []

    @fg.jit
    def f(x):
        side_effects.append(1)
        return fnp.sin(x)

    for v in ([0.1, 0.2], [1.0, 2.0], [3.0, 4.0]):
        np.testing.assert_allclose(to_np(f(fnp.asarray(v))), np.sin(v), rtol=1e-6)
    assert len(side_effects) == 1


def test_make_jaxpr_contains_primitive_names():
    text = str(fg.make_jaxpr(lambda x, y: fnp.sum(fnp.sin(x) * y) + fnp.max(fnp.exp(x)))(fnp.ones(3), fnp.ones(3)))
    for name in ["sin", "mul", "reduce_sum", "exp", "reduce_max", "add"]:
        assert name in text, f"{name} missing from\n{text}"
    assert "f32[3]" in text
    text = str(fg.make_jaxpr(lambda a, b: a @ b)(fnp.ones((2, 3)), fnp.ones((3, 4))))
    assert "matmul" in text and "f32[2,4]" in text
    grad_text = str(fg.make_jaxpr(fg.grad(lambda x: fnp.sum(fnp.tanh(x))))(fnp.ones(3)))
    assert "tanh" in grad_text and "mul" in grad_text


# --------------------------------------------------- Python control flow


def _branchy(x):
    if fnp.sum(x) > 0:
        return fnp.sum(x ** 2)
    return fnp.sum(-x)


def test_python_control_flow_under_grad(x64):
    np.testing.assert_array_equal(to_np(fg.grad(_branchy)(fnp.asarray([1.0, 2.0]))), [2.0, 4.0])
    np.testing.assert_array_equal(to_np(fg.grad(_branchy)(fnp.asarray([-1.0, -2.0]))), [-1.0, -1.0])
    # and under grad of grad (the inner values are concrete too)
    d2 = fg.grad(fg.grad(lambda x: x ** 3 if x > 0 else -x))
    assert float(d2(fnp.asarray(2.0))) == pytest.approx(12.0)
    # jvp (concrete as well)
    _, t = fg.jvp(_branchy, (fnp.asarray([1.0, 2.0]),), (fnp.asarray([1.0, 1.0]),))
    assert float(t) == pytest.approx(6.0)


def test_python_control_flow_under_jit_raises_concretization_error():
    with pytest.raises(fg.ConcretizationError, match="static_argnums"):
        fg.jit(_branchy)(fnp.ones(2))
    assert issubclass(fg.ConcretizationError, TypeError)


def test_python_control_flow_under_vmap_raises_concretization_error():
    with pytest.raises(fg.ConcretizationError, match="where"):
        fg.vmap(_branchy)(fnp.ones((3, 2)))
    # a value that is not mapped stays concrete inside vmap
    out = fg.vmap(lambda x, s: x * 2.0 if s > 0 else x, in_axes=(0, None))(fnp.ones((3, 2)), fnp.asarray(1.0))
    np.testing.assert_array_equal(to_np(out), np.full((3, 2), 2.0))
