"""eval_shape and ShapeDtypeStruct, block_until_ready, jacobian, and has_aux on jvp/jacfwd/jacrev.

References are float64 numpy formulas, never funcgrad itself.
"""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.tree_util import tree_leaves


def to_np(x):
    return np.asarray(x, dtype=np.float64)


# ------------------------------------------------------------------ ShapeDtypeStruct


def test_shape_dtype_struct_is_a_small_frozen_value():
    s = fg.ShapeDtypeStruct([2, 3], "float32")
    assert s.shape == (2, 3) and s.dtype == np.float32 and s.ndim == 2 and s.size == 6 and len(s) == 2
    assert repr(s) == "ShapeDtypeStruct(shape=(2, 3), dtype=float32)"
    assert s == fg.ShapeDtypeStruct((2, 3), np.float32) and hash(s) == hash(fg.ShapeDtypeStruct((2, 3), np.float32))
    assert s != fg.ShapeDtypeStruct((3, 2), np.float32) and s != fg.ShapeDtypeStruct((2, 3), np.float64)
    assert pickle.loads(pickle.dumps(s)) == s
    assert tree_leaves({"a": s}) == [s]   # a leaf, not a container
    with pytest.raises(AttributeError, match="immutable"):
        s.shape = (1,)
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d ShapeDtypeStruct"):
        len(fg.ShapeDtypeStruct((), np.int32))
    with pytest.raises(ValueError, match=r"shape \(2, -1\) has a negative dimension"):
        fg.ShapeDtypeStruct((2, -1), np.float32)
    with pytest.raises(TypeError, match="shape must be a tuple of ints"):
        fg.ShapeDtypeStruct(None, np.float32)


# ------------------------------------------------------------------ eval_shape


def test_eval_shape_traces_without_computing():
    calls = []

    def f(x, params, scale=1.0):
        calls.append(type(x).__name__)
        h = fnp.tanh(x @ params["w"] + params["b"]) * scale
        return {"h": h, "stats": (fnp.sum(h), fnp.argmax(h, axis=1))}

    # 200,000 x 50,000 float32 inputs: 40 GB if anything were computed.
    x = fg.ShapeDtypeStruct((200_000, 50_000), np.float32)
    params = {"w": fg.ShapeDtypeStruct((50_000, 7), np.float32), "b": np.zeros(7, np.float32)}
    out = fg.eval_shape(f, x, params, scale=2.0)
    assert out == {"h": fg.ShapeDtypeStruct((200_000, 7), np.float32),
                   "stats": (fg.ShapeDtypeStruct((), np.float32), fg.ShapeDtypeStruct((200_000,), np.int32))}
    assert calls == ["JaxprTracer"]


def test_eval_shape_takes_arrays_scalars_and_structs_and_canonicalizes_dtypes():
    out = fg.eval_shape(lambda a, b, c, d: (a * b, c + d, d), fnp.ones((2, 3)), 2.0, np.arange(4),
                        fg.ShapeDtypeStruct((4,), np.float64))
    # float64 structs narrow to float32 without x64, as arrays do.
    assert out == (fg.ShapeDtypeStruct((2, 3), np.float32), fg.ShapeDtypeStruct((4,), np.float32),
                   fg.ShapeDtypeStruct((4,), np.float32))
    assert fg.eval_shape(lambda: 1.5) == fg.ShapeDtypeStruct((), np.float32)


def test_eval_shape_x64(x64):
    assert fg.eval_shape(fnp.sin, fg.ShapeDtypeStruct((3,), np.float64)) == fg.ShapeDtypeStruct((3,), np.float64)


def test_eval_shape_of_transforms_and_inside_them():
    g = fg.eval_shape(fg.grad(lambda w, x: fnp.sum((x @ w) ** 2)), fg.ShapeDtypeStruct((3, 2), np.float32),
                      fg.ShapeDtypeStruct((5, 3), np.float32))
    assert g == fg.ShapeDtypeStruct((3, 2), np.float32)

    def f(x):   # eval_shape of a tracer: its shape and dtype only, the value goes on
        assert fg.eval_shape(lambda v: v[:, None] * v, x) == fg.ShapeDtypeStruct((3, 3), np.float32)
        return fnp.sum(x ** 2)

    np.testing.assert_allclose(to_np(fg.grad(f)(fnp.asarray([1.0, 2.0, 3.0]))), [2.0, 4.0, 6.0])


def test_eval_shape_bad_input():
    with pytest.raises(TypeError, match=r"eval_shape\(scale\): argument leaf 0 is str 'x'; every leaf must be an "
                                        r"array, a Python scalar or a ShapeDtypeStruct"):
        fg.eval_shape(scale, "x", fnp.ones(2))
    with pytest.raises(TypeError, match=r"eval_shape\(<lambda>\): the function must return arrays .* output leaf 0 "
                                        r"is str"):
        fg.eval_shape(lambda x: "text", fnp.ones(2))
    with pytest.raises(ValueError, match=r"mul.*f32\[2\].*f32\[3\]"):
        fg.eval_shape(lambda a, b: a * b, fg.ShapeDtypeStruct((2,), np.float32), fg.ShapeDtypeStruct((3,), np.float32))


def scale(k, x):
    return k * x


# ------------------------------------------------------------------ block_until_ready


class _AsyncLeaf:
    """A leaf that counts the waits (a device array's block_until_ready waits for its device)."""

    def __init__(self):
        self.waits = 0

    def block_until_ready(self):
        self.waits += 1
        return self


def test_block_until_ready_returns_the_tree_and_waits_for_each_leaf():
    x = fnp.ones(3)
    assert x.block_until_ready() is x
    pending = [_AsyncLeaf(), _AsyncLeaf()]
    tree = {"a": x, "b": (pending[0], 3, "name"), "c": [pending[1], None]}
    assert fg.block_until_ready(tree) is tree
    assert [p.waits for p in pending] == [1, 1]
    assert fg.block_until_ready(x) is x
    y = fg.jit(lambda v: v * 2)(x)
    np.testing.assert_array_equal(to_np(fg.block_until_ready(y)), [2.0, 2.0, 2.0])


# ------------------------------------------------------------------ jacobian, has_aux


def test_jacobian_is_jacrev(x64):
    assert fg.jacobian is fg.jacrev
    x = np.array([0.3, -1.2])
    jac = fg.jacobian(lambda v: fnp.stack([v[0] * v[1], fnp.sin(v[0])]))(fnp.asarray(x))
    np.testing.assert_allclose(to_np(jac), [[x[1], x[0]], [np.cos(x[0]), 0.0]], rtol=1e-14)


def _with_aux(v):
    out = {"y": fnp.sin(v) * v[0]}
    return out, {"sq": v ** 2, "label": "step", "count": 2}


def _expected_jac(x):
    # d(sin(v_i) v_0)/dv_j = cos(v_i) v_0 [i == j] + sin(v_i) [j == 0]
    jac = np.diag(np.cos(x) * x[0])
    jac[:, 0] += np.sin(x)
    return jac


@pytest.mark.parametrize("jac", [fg.jacfwd, fg.jacrev], ids=["jacfwd", "jacrev"])
def test_jacobians_with_has_aux(jac, x64):
    x = np.array([0.5, -1.0, 2.0])
    result, aux = jac(_with_aux, has_aux=True)(fnp.asarray(x))
    np.testing.assert_allclose(to_np(result["y"]), _expected_jac(x), rtol=1e-14)
    np.testing.assert_allclose(to_np(aux["sq"]), x ** 2, rtol=1e-14)
    assert aux["label"] == "step" and aux["count"] == 2
    # under vmap the aux values are per example
    xs = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    array_aux = lambda v: (_with_aux(v)[0], _with_aux(v)[1]["sq"])  # noqa: E731 (vmap returns arrays only)
    results, auxes = fg.vmap(jac(array_aux, has_aux=True))(fnp.asarray(xs))
    for i in range(2):
        np.testing.assert_allclose(to_np(results["y"][i]), _expected_jac(xs[i]), rtol=1e-14)
    np.testing.assert_allclose(to_np(auxes), xs ** 2, rtol=1e-14)
    # argnums and has_aux together
    jx, aux2 = jac(lambda a, b: (a * b, a + b), argnums=1, has_aux=True)(fnp.asarray(x), fnp.asarray(x[::-1]))
    np.testing.assert_allclose(to_np(jx), np.diag(x), rtol=1e-14)
    np.testing.assert_allclose(to_np(aux2), x + x[::-1], rtol=1e-14)


def test_jvp_with_has_aux(x64):
    x, t = np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0, -0.5])
    out, t_out, aux = fg.jvp(_with_aux, (fnp.asarray(x),), (fnp.asarray(t),), has_aux=True)
    np.testing.assert_allclose(to_np(out["y"]), np.sin(x) * x[0], rtol=1e-14)
    np.testing.assert_allclose(to_np(t_out["y"]), _expected_jac(x) @ t, rtol=1e-14)
    np.testing.assert_allclose(to_np(aux["sq"]), x ** 2, rtol=1e-14)
    assert type(aux["sq"]) is fg.Array and aux["label"] == "step"
    # aux is a value, not a tracer: differentiating through jvp works and aux stays concrete
    g = fg.grad(lambda v: fnp.sum(fg.jvp(_with_aux, (v,), (fnp.asarray(t),), has_aux=True)[1]["y"]))(fnp.asarray(x))
    assert g.shape == (3,)


@pytest.mark.parametrize("call", [
    lambda f: fg.jacfwd(f, has_aux=True)(fnp.ones(2)),
    lambda f: fg.jacrev(f, has_aux=True)(fnp.ones(2)),
    lambda f: fg.jvp(f, (fnp.ones(2),), (fnp.ones(2),), has_aux=True),
], ids=["jacfwd", "jacrev", "jvp"])
def test_has_aux_without_a_pair_is_an_error(call):
    def no_aux(v):
        return v * 2

    with pytest.raises(TypeError, match=r"(jacfwd|jacrev|jvp)\(has_aux=True\): no_aux must return a pair "
                                        r"\(output, aux\), got f32\[2\]"):
        call(no_aux)
    with pytest.raises(TypeError, match=r"must return a pair \(output, aux\), got a tuple of 3 items"):
        call(lambda v: (v, v, v))
