"""Batched contractions stay matrix products: ``vmap`` of ``dot``/``matmul`` against a shared matrix, and the
gradients of both, are one matrix product each, never a stack of per-example products summed afterwards.

Values are checked against float64 numpy; the structure (no intermediate as large as batch x rows x
columns) is read from the traced program, which is what decides the memory and the time.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.testing import check_grads

B, M, K, N = 6, 5, 4, 3


def _largest_intermediate(f, *args) -> int:
    """The most elements any equation of ``f``'s traced program produces."""
    jaxpr = fg.make_jaxpr(f)(*args)
    return max(math.prod(v.aval.shape) for eqn in jaxpr.eqns for v in eqn.outvars)


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return {"w": rng.standard_normal((M, K)), "b": rng.standard_normal(M), "xs": rng.standard_normal((B, K)),
            "ys": rng.standard_normal((B, M)), "stack": rng.standard_normal((B, N, K)),
            "mats": rng.standard_normal((B, K, N))}


def _linear_loss_reference(d):
    """Loss mean((tanh(w @ x + b) - y)^2) over the batch, and its gradient with respect to w and b."""
    pre = d["xs"] @ d["w"].T + d["b"]
    h = np.tanh(pre)
    loss = np.mean((h - d["ys"]) ** 2)
    dpre = 2 * (h - d["ys"]) / h.size * (1 - h * h)
    return loss, dpre.T @ d["xs"], dpre.sum(0)


@pytest.mark.parametrize("compile", [False, True], ids=["eager", "jit"])
def test_grad_through_vmapped_dot_matches_numpy(x64, data, compile):
    """The tutorial pattern: ``vmap(predict, in_axes=(None, 0))`` with ``dot(w, x)``, then ``grad``."""
    def predict(p, x):
        return fnp.tanh(fnp.dot(p[0], x) + p[1])

    def loss(p, xs, ys):
        return fnp.mean((fg.vmap(predict, in_axes=(None, 0))(p, xs) - ys) ** 2)

    step = fg.value_and_grad(loss)
    step = fg.jit(step) if compile else step
    params = (fnp.array(data["w"]), fnp.array(data["b"]))
    value, (gw, gb) = step(params, fnp.array(data["xs"]), fnp.array(data["ys"]))
    ref_loss, ref_gw, ref_gb = _linear_loss_reference(data)
    np.testing.assert_allclose(float(value), ref_loss, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(gw), ref_gw, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(gb), ref_gb, rtol=1e-10, atol=1e-12)
    # The gradient with respect to w is one (M, B) x (B, K) product: nothing as large as B x M x K.
    size = _largest_intermediate(fg.grad(loss), params, fnp.array(data["xs"]), fnp.array(data["ys"]))
    assert size < B * M * K


@pytest.mark.parametrize("shared", ["left", "right"])
def test_vmapped_matmul_with_a_shared_matrix(x64, data, shared):
    """Either side shared: values and both gradients against numpy's per-example products."""
    w, mats, stack = fnp.array(data["w"]), fnp.array(data["mats"]), fnp.array(data["stack"])
    if shared == "left":      # w (M, K) @ mats[b] (K, N)
        f = fg.vmap(lambda m, w: fnp.matmul(w, m), in_axes=(0, None))
        args, ref = (mats, w), np.einsum("mk,bkn->bmn", data["w"], data["mats"])
    else:                     # stack[b] (N, K) @ w.T (K, M)
        f = fg.vmap(lambda s, w: fnp.matmul(s, w.T), in_axes=(0, None))
        args, ref = (stack, w), np.einsum("bnk,mk->bnm", data["stack"], data["w"])
    np.testing.assert_allclose(np.asarray(f(*args)), ref, rtol=1e-12)
    check_grads(lambda a, b: fnp.sum(fnp.sin(f(a, b))), args, order=2)
    assert _largest_intermediate(fg.grad(lambda a, b: fnp.sum(f(a, b) ** 2), argnums=1), *args) <= ref.size


@pytest.mark.parametrize("shared", ["left", "right"])
def test_stacked_matmul_gradient_of_the_shared_operand(x64, data, shared):
    """A stack times a shared matrix written directly (numpy broadcasting, no vmap): the shared matrix's
    gradient is one product, checked against numpy and finite differences."""
    stack, mats, w = fnp.array(data["stack"]), fnp.array(data["mats"]), fnp.array(data["w"])
    if shared == "right":     # stack (B, N, K) @ w.T
        product = lambda w: fnp.matmul(stack, w.T)  # noqa: E731
        out = np.einsum("bnk,mk->bnm", data["stack"], data["w"])
        ref = np.einsum("bnm,bnk->mk", 2 * out, data["stack"])
    else:                     # w (M, K) @ mats (B, K, N)
        product = lambda w: fnp.matmul(w, mats)  # noqa: E731
        out = np.einsum("mk,bkn->bmn", data["w"], data["mats"])
        ref = np.einsum("bmn,bkn->mk", 2 * out, data["mats"])

    def loss(w):
        return fnp.sum(product(w) ** 2)

    np.testing.assert_allclose(np.asarray(fg.grad(loss)(w)), ref, rtol=1e-12)
    check_grads(lambda w: fnp.sum(fnp.sin(product(w))), (w,), order=2)
    assert _largest_intermediate(fg.grad(loss), w) <= out.size


def test_transpose_of_unit_axes_is_a_reshape():
    """Moving only size-1 axes keeps the element order: no transpose equation (a copy under jit)."""
    x = fnp.ones((3, 1, 4))
    jaxpr = fg.make_jaxpr(lambda x: fnp.transpose(x, (1, 0, 2)) * 2.0)(x)
    assert [e.prim.name for e in jaxpr.eqns][0] == "reshape"
    np.testing.assert_array_equal(np.asarray(fnp.transpose(fnp.arange(12.0).reshape(3, 1, 4), (1, 0, 2))),
                                  np.transpose(np.arange(12.0).reshape(3, 1, 4), (1, 0, 2)))
