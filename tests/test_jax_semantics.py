"""JAX semantics a real program relies on: out-of-bounds indices, nn.logsumexp's defaults,
grad(abs) at 0, jax_ config names, formatting, pytrees (OrderedDict, defaultdict, key paths,
fg.tree), jit on methods / donation / disable_jit, vmap(axis_size=), checkpoint policies,
fg.debug.print, and the concretization error.

References are numpy/scipy in float64 (JAX's rules written out with numpy) and finite
differences; JAX itself is never imported.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import math

import numpy as np
import pytest
import scipy.special

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax, nn, tree_util as tu
from funcgrad.testing import check_grads

from conftest import config_set

X = np.arange(5.0) * 1.5 - 2.0
IDX = np.array([1, 7, -7, -1, 5, -5, -6])
N = X.size


def _clamped(i, n=N):      # JAX's gather: a negative index counts once from the end, then clamps
    i = np.where(i < 0, i + n, i)
    return np.clip(i, 0, n - 1)


def _inside(i, n=N):
    return (i >= -n) & (i < n)


# --------------------------------------------------------------- out-of-bounds gathers


def test_getitem_clamps_out_of_bounds_indices(x64):
    x = fnp.asarray(X)
    assert float(x[7]) == X[-1] and float(x[-7]) == X[0] and float(x[-2]) == X[-2]
    np.testing.assert_array_equal(np.asarray(x[IDX]), X[_clamped(IDX)])
    np.testing.assert_array_equal(np.asarray(x.at[IDX].get()), X[_clamped(IDX)])
    y = np.arange(12.0).reshape(3, 4)
    rows, cols = np.array([0, 5, -9]), np.array([-9, 2, 3])
    np.testing.assert_array_equal(np.asarray(fnp.asarray(y)[rows, cols]), y[_clamped(rows, 3), _clamped(cols, 4)])
    np.testing.assert_array_equal(np.asarray(fnp.asarray(y)[:, cols]), y[:, _clamped(cols, 4)])


def test_traced_indices_clamp_under_jit_and_vmap(x64):
    x = fnp.asarray(X)
    f = fg.jit(lambda x, i: x[i])
    for i in (9, -9, 3, -1):
        assert float(f(x, i)) == X[_clamped(np.array(i))]
    np.testing.assert_array_equal(np.asarray(f(x, fnp.asarray(IDX))), X[_clamped(IDX)])
    np.testing.assert_array_equal(np.asarray(fg.vmap(lambda i: x[i])(fnp.asarray(IDX))), X[_clamped(IDX)])


def test_gather_fill_mode(x64):
    x = fnp.asarray(X)
    expected = np.where(_inside(IDX), X[_clamped(IDX)], np.nan)
    np.testing.assert_array_equal(np.asarray(x.at[IDX].get(mode="fill")), expected)
    np.testing.assert_array_equal(np.asarray(x.at[IDX].get(mode="fill", fill_value=-3.0)),
                                  np.where(_inside(IDX), X[_clamped(IDX)], -3.0))
    y = np.arange(12.0).reshape(3, 4)
    got = fnp.asarray(y).at[np.array([0, 5]), 1:3].get(mode="fill", fill_value=-1)
    np.testing.assert_array_equal(np.asarray(got), [[1.0, 2.0], [-1.0, -1.0]])
    # under jit, with traced indices
    got = fg.jit(lambda x, i: x.at[i].get(mode="fill", fill_value=0.5))(x, fnp.asarray(IDX))
    np.testing.assert_array_equal(np.asarray(got), np.where(_inside(IDX), X[_clamped(IDX)], 0.5))


def test_gather_gradients_skip_out_of_bounds_positions(x64):
    x = fnp.asarray(X)
    g = fg.grad(lambda v: fnp.sum(v.at[IDX].get(mode="fill", fill_value=0.0)))(x)
    expected = np.zeros(N)
    np.add.at(expected, _clamped(IDX)[_inside(IDX)], 1.0)
    np.testing.assert_array_equal(np.asarray(g), expected)
    check_grads(lambda v: fnp.asarray(v)[IDX] * fnp.asarray(v).at[IDX].get(mode="fill", fill_value=2.0), (x,), order=2)


def test_take_modes(x64):
    x = fnp.asarray(X)
    np.testing.assert_array_equal(np.asarray(fnp.take(x, IDX)), np.where(_inside(IDX), X[_clamped(IDX)], np.nan))
    np.testing.assert_array_equal(np.asarray(fnp.take(x, IDX, mode="fill", fill_value=7.0)),
                                  np.where(_inside(IDX), X[_clamped(IDX)], 7.0))
    np.testing.assert_array_equal(np.asarray(fnp.take(x, IDX, mode="clip")), np.take(X, IDX, mode="clip"))
    np.testing.assert_array_equal(np.asarray(fnp.take(x, IDX, mode="wrap")), np.take(X, IDX, mode="wrap"))
    assert math.isnan(float(fnp.take(x, 9))) and float(fnp.take(x, 9, mode="clip")) == X[-1]
    y = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(np.asarray(fnp.take(fnp.asarray(y), np.array([0, 6]), axis=1, mode="wrap")),
                                  np.take(y, [0, 6], axis=1, mode="wrap"))
    np.testing.assert_array_equal(np.asarray(fg.jit(lambda x, i: fnp.take(x, i, mode="wrap"))(x, fnp.asarray(IDX))),
                                  np.take(X, IDX, mode="wrap"))


def test_take_fill_values_per_dtype():
    i = np.array([0, 9])
    assert np.asarray(fnp.take(fnp.arange(3, dtype=fnp.int32), i))[1] == np.iinfo(np.int32).min
    assert np.asarray(fnp.take(fnp.arange(3).astype(fnp.uint8), i))[1] == 255
    assert np.asarray(fnp.take(fnp.arange(3) > 5, i))[1]


def test_take_errors():
    x = fnp.ones(3)
    with pytest.raises(NotImplementedError, match="take.*raise"):
        fnp.take(x, np.array([0]), mode="raise")
    with pytest.raises(ValueError, match="take: invalid mode 'bogus'"):
        fnp.take(x, np.array([0]), mode="bogus")
    with pytest.raises(NotImplementedError, match="out="):
        fnp.take(x, np.array([0]), out=x)
    with pytest.raises(ValueError, match="unknown gather mode"):
        x.at[0].get(mode="wrap")


def test_take_along_axis_modes(x64):
    x = fnp.asarray(X)
    np.testing.assert_array_equal(np.asarray(fnp.take_along_axis(x, IDX, axis=0)),
                                  np.where(_inside(IDX), X[_clamped(IDX)], np.nan))
    np.testing.assert_array_equal(np.asarray(fnp.take_along_axis(x, IDX, axis=0, mode="clip")), X[_clamped(IDX)])
    np.testing.assert_array_equal(np.asarray(fnp.take_along_axis(x, IDX, axis=0, wrap_negative_indices=False)),
                                  np.where((IDX >= 0) & (IDX < N), X[np.clip(IDX, 0, N - 1)], np.nan))
    y = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(np.asarray(fnp.take_along_axis(fnp.asarray(y), np.array([0, 13]), axis=None)),
                                  [0.0, np.nan])
    idx = np.array([[1, 0], [3, 2], [0, 0]])
    np.testing.assert_array_equal(np.asarray(fnp.take_along_axis(fnp.asarray(y), idx, axis=1)),
                                  np.take_along_axis(y, idx, axis=1))
    check_grads(lambda v: fnp.take_along_axis(v, idx, axis=1), (fnp.asarray(y),), order=2)


# --------------------------------------------------------------- out-of-bounds scatters


def _scatter_ref(values, mode):
    out = X.copy()
    for i, v in zip(IDX, np.broadcast_to(values, IDX.shape)):
        if mode == "clip":
            out[_clamped(np.array(i))] = v
        elif _inside(i):
            out[i] = v
    return out


def test_scatter_drops_out_of_bounds_updates(x64):
    x = fnp.asarray(X)
    vals = np.arange(IDX.size) + 10.0
    np.testing.assert_array_equal(np.asarray(x.at[IDX].set(vals)), _scatter_ref(vals, "drop"))
    np.testing.assert_array_equal(np.asarray(x.at[IDX].set(vals, mode="drop")), _scatter_ref(vals, "drop"))
    np.testing.assert_array_equal(np.asarray(x.at[IDX].set(vals, mode="clip")), _scatter_ref(vals, "clip"))
    assert np.array_equal(np.asarray(x.at[7].add(10.0)), X)
    added = X.copy()
    np.add.at(added, _clamped(IDX)[_inside(IDX)], vals[_inside(IDX)])
    np.testing.assert_array_equal(np.asarray(x.at[IDX].add(vals)), added)
    np.testing.assert_array_equal(np.asarray(fg.jit(lambda x, i, v: x.at[i].add(v))(x, fnp.asarray(IDX), vals)),
                                  added)
    np.testing.assert_array_equal(np.asarray(fg.vmap(lambda i: x.at[i].set(10.0))(fnp.asarray(IDX)))[1], X)
    y = np.arange(12.0).reshape(3, 4)
    got = fnp.asarray(y).at[np.array([0, 5]), 1:3].add(100.0)
    expected = y.copy()
    expected[0, 1:3] += 100.0
    np.testing.assert_array_equal(np.asarray(got), expected)


def test_scatter_gradients(x64):
    x = fnp.asarray(X)
    vals = fnp.asarray(np.arange(IDX.size) + 10.0)
    g = fg.grad(lambda v: fnp.sum(x.at[IDX].set(v) ** 2))(vals)
    # only the last in-bounds write to each position receives a cotangent
    expected = np.zeros(IDX.size)
    final = _scatter_ref(np.asarray(vals), "drop")
    last = {}
    for k, i in enumerate(IDX):
        if _inside(i):
            last[int(_clamped(np.array(i)))] = k
    for pos, k in last.items():
        expected[k] = 2 * final[pos]
    np.testing.assert_allclose(np.asarray(g), expected)
    check_grads(lambda a, v: fnp.asarray(a).at[IDX].add(v * v), (x, vals), order=2)


@pytest.mark.parametrize("method,ufunc", [("mul", np.multiply), ("min", np.minimum), ("max", np.maximum),
                                          ("divide", np.divide), ("power", np.power)])
def test_combining_updates_apply_each_duplicate(method, ufunc, x64):
    x0 = np.array([0.5, 1.5, 2.0, 3.0, 4.0])
    idx = np.array([1, 1, 2, -4, 9])
    vals = np.array([2.0, 3.0, 0.5, 1.5, 7.0])
    expected = x0.copy()
    keep = _inside(idx, 5)
    ufunc.at(expected, _clamped(idx, 5)[keep], vals[keep])
    got = getattr(fnp.asarray(x0).at[idx], method)(vals)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-12)
    if method in ("mul", "divide"):
        check_grads(lambda a, v: getattr(fnp.asarray(a).at[idx], method)(v), (fnp.asarray(x0), fnp.asarray(vals)), order=2)


def test_apply_and_subtract(x64):
    x = fnp.asarray(X)
    idx = np.array([1, 1, 3, 8])
    expected = X.copy()
    expected[1] = np.sin(np.sin(X[1]))
    expected[3] = np.sin(X[3])
    np.testing.assert_allclose(np.asarray(x.at[idx].apply(fnp.sin)), expected)
    sub = X.copy()
    np.subtract.at(sub, idx[:3], 2.0)
    np.testing.assert_allclose(np.asarray(x.at[idx].subtract(2.0)), sub)


def test_combining_updates_with_traced_indices_need_unique_indices(x64):
    x = fnp.asarray(X)
    with pytest.raises(NotImplementedError, match="unique_indices=True"):
        fg.jit(lambda x, i: x.at[i].power(2.0))(x, fnp.asarray([0, 1]))
    got = fg.jit(lambda x, i: x.at[i].power(2.0, unique_indices=True))(x, fnp.asarray([0, 9]))
    np.testing.assert_array_equal(np.asarray(got), np.r_[X[0] ** 2, X[1:]])


def test_mul_and_divide_with_traced_duplicate_indices(x64):
    x0 = np.array([0.5, 1.5, 2.0, 3.0, 4.0])
    idx, vals = np.array([1, 1, 2, -4, 9]), np.array([2.0, 3.0, 0.5, 1.5, 7.0])
    keep = _inside(idx, 5)
    prod = x0.copy()
    np.multiply.at(prod, _clamped(idx, 5)[keep], vals[keep])
    quot = x0.copy()
    np.divide.at(quot, _clamped(idx, 5)[keep], vals[keep])
    np.testing.assert_allclose(np.asarray(fg.jit(lambda x, i, v: x.at[i].mul(v))(x0, idx, vals)), prod)
    np.testing.assert_allclose(np.asarray(fg.jit(lambda x, i, v: x.at[i].divide(v))(x0, idx, vals)), quot)
    g = fg.jit(fg.grad(lambda x, i, v: fnp.sum(x.at[i].mul(v))))(fnp.asarray(x0), idx, vals)
    np.testing.assert_allclose(np.asarray(g), prod / x0)     # linear in x: d/dx = the product of the updates
    with pytest.raises(NotImplementedError, match="unique indices"):   # as JAX
        fg.jit(fg.grad(lambda v, x, i: fnp.sum(x.at[i].mul(v))))(vals, x0, idx)


@pytest.mark.parametrize("method,ufunc", [("max", np.maximum), ("min", np.minimum)])
def test_max_min_with_traced_duplicate_indices(method, ufunc, x64, rng):
    y = rng.standard_normal((4, 3))
    rows = np.array([0, 2, 0, 7, -1, 2])
    vals = rng.standard_normal((6, 3))
    expected = y.copy()
    keep = _inside(rows, 4)
    ufunc.at(expected, _clamped(rows, 4)[keep], vals[keep])
    f = fg.jit(lambda a, i, v: getattr(a.at[i], method)(v))
    np.testing.assert_array_equal(np.asarray(f(fnp.asarray(y), fnp.asarray(rows), fnp.asarray(vals))), expected)
    got = fg.vmap(lambda r, v: getattr(r.at[np.array([0, 0, 2])], method)(v))(fnp.asarray(y), fnp.asarray(vals[:4]))
    ref = y.copy()
    for k in range(4):
        ufunc.at(ref[k], [0, 0, 2], vals[k])
    np.testing.assert_array_equal(np.asarray(got), ref)
    check_grads(lambda a, v: getattr(fnp.asarray(a).at[rows], method)(v) * fnp.asarray(a),
                (fnp.asarray(y), fnp.asarray(vals)), order=2)


def test_max_ties_share_the_gradient_as_jax(x64):
    x = fnp.asarray([1.0, 2.0, 3.0])
    gx, gv = fg.grad(lambda x, v: fnp.sum(x.at[np.array([1, 1])].max(v)), argnums=(0, 1))(x, fnp.asarray([2.0, 2.0]))
    np.testing.assert_allclose(np.asarray(gx), [1.0, 1 / 3, 1.0])      # operand and two updates tie at 2.0
    np.testing.assert_allclose(np.asarray(gv), [1 / 3, 1 / 3])


def test_promise_in_bounds_and_checked_indexing():
    x = fnp.ones(3)
    with pytest.raises(IndexError, match="at\\[...\\].set: index 5 is out of bounds for axis 0 with size 3"):
        x.at[np.array([5])].set(2.0, mode="promise_in_bounds")
    with config_set("checked_indexing", True):
        with pytest.raises(IndexError, match="getitem: index 5 is out of bounds for axis 0 with size 3.*checked"):
            x[5]
        with pytest.raises(IndexError, match="take: index -4 is out of bounds for axis 0 with size 3"):
            fnp.take(x, np.array([0, -4]))
        with pytest.raises(IndexError, match="at\\[...\\].add: index 3 is out of bounds"):
            x.at[3].add(1.0)
        with pytest.raises(IndexError, match="out of bounds for axis 0 with size 3"):
            fg.jit(lambda x, i: x[i])(x, 4)
        assert float(x.at[3].get(mode="clip")) == 1.0     # an explicit mode still applies
        assert float(x[-1]) == 1.0
    assert float(x[5]) == 1.0


# --------------------------------------------------------------- nn.logsumexp, abs


def test_nn_logsumexp_matches_scipy(x64, rng):
    a = rng.standard_normal((2, 3))
    b = np.array([1.0, -2.0, 0.5])
    assert np.isclose(float(nn.logsumexp(fnp.asarray(a))), scipy.special.logsumexp(a))   # all axes by default
    np.testing.assert_allclose(np.asarray(nn.logsumexp(fnp.asarray(a), axis=1, keepdims=True)),
                               scipy.special.logsumexp(a, axis=1, keepdims=True))
    out, sign = nn.logsumexp(fnp.asarray(a), axis=1, b=b, return_sign=True)
    ref_out, ref_sign = scipy.special.logsumexp(a, axis=1, b=b, return_sign=True)
    np.testing.assert_allclose(np.asarray(out), ref_out)
    np.testing.assert_array_equal(np.asarray(sign), ref_sign)
    plain = np.asarray(nn.logsumexp(fnp.asarray(a), axis=1, b=b))
    np.testing.assert_allclose(plain, np.where(ref_sign < 0, np.nan, ref_out))
    mask = np.array([True, False, True])
    np.testing.assert_allclose(np.asarray(nn.logsumexp(fnp.asarray(a), axis=1, where=mask)),
                               scipy.special.logsumexp(a[:, mask], axis=1))
    assert np.all(np.asarray(nn.logsumexp(fnp.asarray(a), axis=1, where=np.zeros(3, bool))) == -np.inf)
    check_grads(lambda v: nn.logsumexp(v, axis=0, b=np.array([[1.0], [3.0]])), (fnp.asarray(a),), order=2)
    check_grads(lambda v: nn.logsumexp(v, b=b, return_sign=True)[0], (fnp.asarray(a),), order=2)


def test_grad_abs_at_zero_is_one():
    assert float(fg.grad(abs)(0.0)) == 1.0
    assert float(fg.grad(fnp.abs)(-0.0)) == 1.0
    assert float(fg.grad(fnp.abs)(-2.0)) == -1.0
    assert float(fg.grad(nn.softplus)(0.0)) == 0.5


# --------------------------------------------------------------- config, formatting


def test_jax_config_names():
    with config_set("enable_x64", False):
        fg.config.update("jax_enable_x64", True)
        assert fg.config.enable_x64 and fg.config.jax_enable_x64 and fg.config.read("jax_enable_x64")
        assert fnp.asarray(np.float64(1.0)).dtype == np.float64
        fg.config.update("jax_enable_x64", False)
        assert fnp.asarray(np.float64(1.0)).dtype == np.float32
    fg.config.update("jax_platform_name", "cpu")        # accepted, no effect
    fg.config.update("jax_default_matmul_precision", "highest")
    with pytest.raises(ValueError, match="unknown config option 'jax_bogus'"):
        fg.config.update("jax_bogus", True)
    fg.config.update("jax_numpy_rank_promotion", "allow")
    with pytest.raises(NotImplementedError, match="jax_numpy_rank_promotion.*'allow'"):
        fg.config.update("jax_numpy_rank_promotion", "raise")
    with pytest.raises(NotImplementedError, match="jax_debug_infs"):
        fg.config.update("jax_debug_infs", True)
    with config_set("disable_jit", False):
        fg.config.update("jax_disable_jit", True)
        assert fg.jit(lambda x: float(x))(2.0) == 2.0


def test_format_as_numpy():
    assert f"{fnp.asarray(3.14159):.2f}" == "3.14"
    assert f"{fnp.asarray(7, dtype=fnp.int32):4d}" == "   7"
    assert f"{fnp.asarray(np.float32(0.1))}" == str(np.float32(0.1))
    assert f"{fnp.arange(3.0)}" == str(np.arange(3.0, dtype=np.float32))
    with pytest.raises(TypeError):
        f"{fnp.arange(3.0):.2f}"


# --------------------------------------------------------------- pytrees


def test_ordered_dict_and_defaultdict_nodes():
    od = collections.OrderedDict([("b", 1.0), ("a", 2.0)])
    assert tu.tree_leaves(od) == [1.0, 2.0]          # insertion order
    out = tu.tree_map(lambda v: v * 10, od)
    assert type(out) is collections.OrderedDict and list(out.items()) == [("b", 10.0), ("a", 20.0)]
    assert tu.tree_structure(od) != tu.tree_structure(collections.OrderedDict([("a", 2.0), ("b", 1.0)]))
    dd = collections.defaultdict(list, {"b": 1.0, "a": 2.0})
    assert tu.tree_leaves(dd) == [2.0, 1.0]          # sorted keys
    out = tu.tree_map(lambda v: v + 1, dd)
    assert type(out) is collections.defaultdict and out.default_factory is list and out["a"] == 3.0
    g = fg.grad(lambda d: d["a"] * d["b"])(collections.OrderedDict([("b", 3.0), ("a", 2.0)]))
    assert type(g) is collections.OrderedDict and list(g) == ["b", "a"] and float(g["b"]) == 2.0


def test_key_paths():
    P = collections.namedtuple("P", "x y")
    tree = {"a": [1, (2,)], "b": P(3, 4), "c": collections.OrderedDict([("z", 5)])}
    pairs, treedef = tu.tree_flatten_with_path(tree)
    assert [x for _, x in pairs] == tu.tree_leaves(tree)
    assert [tu.keystr(p) for p, _ in pairs] == ["['a'][0]", "['a'][1][0]", "['b'].x", "['b'].y", "['c']['z']"]
    assert tu.keystr(pairs[1][0], simple=True, separator="/") == "a/1/0"
    assert pairs[2][0] == (tu.DictKey("b"), tu.GetAttrKey("x"))
    assert treedef == tu.tree_structure(tree)
    assert fg.tree.leaves_with_path([7]) == [((tu.SequenceKey(0),), 7)]
    assert fg.tree.map_with_path(lambda p, x, y: (tu.keystr(p), x + y), {"k": 1}, {"k": 2}) == {"k": ("['k']", 3)}


def test_tree_module_and_tree_util_functions():
    assert fg.tree.map(lambda x: x * 2, {"a": 1, "b": (2, 3)}) == {"a": 2, "b": (4, 6)}
    leaves, td = fg.tree.flatten({"b": 2, "a": [1]})
    assert leaves == [1, 2] and fg.tree.unflatten(td, [5, 6]) == {"a": [5], "b": 6}
    assert fg.tree.structure([1, 2]) == td.children[0].__class__(list, None, td.children[0].children * 2)
    assert fg.tree.all([1, True, (2,)]) and not fg.tree.all([1, 0])
    assert fg.tree.reduce(lambda a, b: a + b, [1, 2, 3], 10) == 16
    assert fg.tree.reduce_associative(lambda a, b: a + b, [1, 2, 3, 4, 5]) == 15
    with pytest.raises(TypeError, match="no leaves"):
        fg.tree.reduce_associative(lambda a, b: a + b, [])
    assert fg.tree.broadcast([1, {"a": 2}], [(1, 2), {"a": [3, 4]}]) == [(1, 1), {"a": [2, 2]}]
    outer, inner = fg.tree.structure([0, 0]), fg.tree.structure((0, 0, 0))
    assert fg.tree.transpose(outer, inner, [(1, 2, 3), (4, 5, 6)]) == ([1, 4], [2, 5], [3, 6])
    assert fg.tree.transpose(outer, None, [(1, 2, 3), (4, 5, 6)]) == ([1, 4], [2, 5], [3, 6])
    assert tu.flatten_one_level({"a": 1, "b": [2]}) == ((1, [2]), ("a", "b"))   # children as a tuple, as JAX
    with pytest.raises(ValueError, match="leaf"):
        tu.flatten_one_level(1)
    td = tu.tree_structure({"a": 1, "b": (2, 3)})
    assert tu.treedef_children(td) == [tu.tree_structure(1), tu.tree_structure((2, 3))]
    assert tu.treedef_is_leaf(tu.tree_structure(1)) and not tu.treedef_is_leaf(td)
    assert tu.treedef_tuple([tu.tree_structure(1), tu.tree_structure([1])]) == tu.tree_structure((1, [1]))
    assert tu.all_leaves([1, 2.0]) and not tu.all_leaves([1, (2,)])
    assert td.flatten_up_to({"a": [9], "b": (2, 3)}) == [[9], 2, 3]
    assert tu.tree_map(lambda x, y: (x, y), [1, 2], [(3, 4), 5]) == [(1, (3, 4)), (2, 5)]   # prefix
    for name in ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path", "map",
                 "map_with_path", "reduce", "reduce_associative", "static", "structure", "transpose", "unflatten"]:
        assert callable(getattr(fg.tree, name)), name


def test_register_dataclass_static_and_partial():
    @tu.register_dataclass
    @dataclasses.dataclass
    class Op:
        x: object
        y: object
        op: str = fg.tree.static(default="add")

    m = Op(fnp.ones(2), fnp.arange(2.0))
    assert len(fg.tree.leaves(m)) == 2
    f = fg.jit(lambda m: m.x + m.y if m.op == "add" else m.x - m.y)
    np.testing.assert_array_equal(np.asarray(f(m)), [1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(f(Op(m.x, m.y, "sub"))), [1.0, 0.0])

    @functools.partial(tu.register_dataclass, data_fields=["w"], meta_fields=["name"])
    @dataclasses.dataclass
    class Layer:
        w: object
        name: str

    g = fg.grad(lambda layer: fnp.sum(layer.w ** 2))(Layer(fnp.ones(2), "dense"))
    assert g.name == "dense" and np.array_equal(np.asarray(g.w), [2.0, 2.0])

    @tu.register_static
    class Cfg:
        def __init__(self, k):
            self.k = k

        def __hash__(self):
            return hash(self.k)

        def __eq__(self, other):
            return isinstance(other, Cfg) and other.k == self.k

    assert tu.tree_leaves([Cfg(2), 1.0]) == [1.0]
    np.testing.assert_array_equal(np.asarray(fg.jit(lambda c, x: x * c.k)(Cfg(3), fnp.ones(2))), [3.0, 3.0])

    add = tu.Partial(fnp.add, fnp.ones(2))
    np.testing.assert_array_equal(np.asarray(fg.jit(lambda f, x: f(x))(add, fnp.ones(2))), [2.0, 2.0])
    assert len(tu.tree_leaves(add)) == 1


# --------------------------------------------------------------- jit, vmap, checkpoint


def test_jit_on_methods():
    class Model:
        def __init__(self):
            self.k = 2.0

        @functools.partial(fg.jit, static_argnums=0)
        def scaled(self, x):
            return x * self.k

        @fg.jit
        def plain(self, x):
            return x * 2

    np.testing.assert_array_equal(np.asarray(Model().scaled(fnp.ones(2))), [2.0, 2.0])
    with pytest.raises(TypeError, match="argument 0 \\(self\\).*static_argnums"):
        Model().plain(fnp.ones(2))


def test_jit_options_and_disable_jit():
    f = fg.jit(lambda x, y: x + y, donate_argnums=0, keep_unused=True, inline=True)
    x = fnp.ones(3)
    np.testing.assert_array_equal(np.asarray(f(x, 1.0)), [2.0, 2.0, 2.0])
    assert x.is_deleted()   # donated, as in JAX (tests/test_donation_and_policies.py)
    with pytest.raises(RuntimeError, match="Array has been deleted"):
        np.asarray(x)
    with pytest.raises(NotImplementedError, match="in_shardings"):
        fg.jit(lambda x: x, in_shardings=object())
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        fg.jit(lambda x: x, bogus=1)
    g = fg.jit(lambda x: float(x) * 2)
    with fg.disable_jit():
        assert g(fnp.asarray(1.5)) == 3.0
    with pytest.raises(fg.ConcretizationError):
        g(fnp.asarray(1.5))
    with fg.ensure_compile_time_eval():
        assert float(fg.jit(lambda x: x + 1)(1.0)) == 2.0


def test_vmap_axis_size():
    assert fg.vmap(lambda: fnp.ones(2), axis_size=3)().shape == (3, 2)
    np.testing.assert_array_equal(np.asarray(fg.vmap(lambda x, y: x * y, in_axes=(None, 0), axis_size=3)(
        2.0, fnp.arange(3.0))), [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(np.asarray(fg.vmap(lambda x: x, in_axes=None, axis_size=2)(fnp.arange(3.0))),
                                  np.tile(np.arange(3.0), (2, 1)))
    with pytest.raises(ValueError, match="axis_size=2 does not match"):
        fg.vmap(lambda x: x, axis_size=2)(fnp.ones(3))
    with pytest.raises(ValueError, match="pass axis_size"):
        fg.vmap(lambda x: x, in_axes=None)(1.0)


@pytest.mark.parametrize("policy", ["nothing_saveable", "everything_saveable", "dots_saveable",
                                    "dots_with_no_batch_dims_saveable"])
def test_checkpoint_policies_give_the_same_gradients(policy, x64, rng):
    w, x = fnp.asarray(rng.standard_normal((3, 3))), fnp.asarray(rng.standard_normal((2, 3)))

    def layer(w, x):
        return fnp.tanh(x @ w) @ w

    expected = fg.grad(lambda w: fnp.sum(layer(w, x) ** 2))(w)
    remat = fg.checkpoint(layer, policy=getattr(fg.checkpoint_policies, policy))
    np.testing.assert_allclose(np.asarray(fg.grad(lambda w: fnp.sum(remat(w, x) ** 2))(w)), np.asarray(expected))
    check_grads(lambda w: remat(w, x), (w,), order=2)


def test_checkpoint_static_argnums(x64):
    f = functools.partial(fg.checkpoint, static_argnums=(1,))(lambda x, act: fnp.sin(x) if act == "sin" else x * x)
    assert float(fg.grad(lambda x: f(x, "sin"))(0.5)) == pytest.approx(np.cos(0.5))
    assert float(fg.jit(fg.grad(lambda x: f(x, "square")))(0.5)) == pytest.approx(1.0)


# --------------------------------------------------------------- debug, device_get, errors


def test_debug_print_eager_jit_vmap_grad(capsys):
    def f(x):
        fg.debug.print("x={x} twice={}", x * 2, x=x)
        return x + 1

    f(fnp.arange(2.0))
    jf = fg.jit(f)
    jf(fnp.arange(2.0))
    jf(fnp.arange(2.0) + 5)          # cached program: printed again, with this call's values
    fg.vmap(f)(fnp.arange(2.0))
    fg.grad(lambda x: fnp.sum(f(x)))(fnp.arange(2.0))
    const = fg.jit(lambda x: (fg.debug.print("const {:.1f}", 7.0), x)[1])
    const(1.0)
    const(2.0)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["x=[0. 1.] twice=[0. 2.]", "x=[0. 1.] twice=[0. 2.]", "x=[5. 6.] twice=[10. 12.]",
                     "x=0.0 twice=0.0", "x=1.0 twice=2.0", "x=[0. 1.] twice=[0. 2.]", "const 7.0", "const 7.0"]


def test_debug_print_in_loops_and_callback(capsys):
    lax.fori_loop(0, 2, lambda i, c: (fg.debug.print("i={}", i), c + 1)[1], 0)
    seen = []
    fg.jit(lambda x: (fg.debug.callback(seen.append, x), x)[1])(fnp.ones(2))
    assert capsys.readouterr().out.splitlines() == ["i=0", "i=1"]
    assert len(seen) == 1 and isinstance(seen[0], np.ndarray) and seen[0].tolist() == [1.0, 1.0]


def test_prints_inside_loops_and_branches_run_under_jit_as_eagerly(capsys):
    """A print inside a loop body or a branch is an effect of the loop or the ``cond``: ``jit`` keeps it when
    nothing uses the loop's results, and runs effects in the traced order (the memory-saving order of a
    compiled program would otherwise run the small loop B first)."""
    def f(x):
        lax.fori_loop(0, 2, lambda i, c: (fg.debug.print("unused {}", i), c + 1.0)[1], x)
        lax.cond(x[0] > 0, lambda v: (fg.debug.print("branch {}", v[0]), v)[1], lambda v: v, x)
        big = lax.fori_loop(0, 2, lambda i, c: (fg.debug.print("A {}", i), c * 2.0)[1], x)
        small = lax.fori_loop(0, 2, lambda i, c: (fg.debug.print("B {}", i), c + 1.0)[1], x[0])
        return big * small

    x = fnp.ones(4096)
    want = np.full(4096, 4.0 * 3.0)
    np.testing.assert_array_equal(np.asarray(f(x)), want)
    eager = capsys.readouterr().out.splitlines()
    assert eager == ["unused 0", "unused 1", "branch 1.0", "A 0", "A 1", "B 0", "B 1"]
    np.testing.assert_array_equal(np.asarray(fg.jit(f)(x)), want)
    assert capsys.readouterr().out.splitlines() == eager


def test_device_get():
    out = fg.device_get({"a": fnp.ones(2), "b": 3})
    assert type(out["a"]) is np.ndarray and out["b"] == 3


def test_concretization_error_is_type_error_naming_the_fixes():
    for f in (lambda x: int(x), lambda x: float(x), lambda x: 1 if x > 0 else 2):
        with pytest.raises(TypeError) as info:
            fg.jit(f)(1.0)
        assert isinstance(info.value, fg.ConcretizationError)
        assert isinstance(info.value, fg.errors.ConcretizationTypeError)
        assert "static_argnums" in str(info.value) and "lax.cond" in str(info.value)


def test_pure_callback_eager_jit_vmap():
    x = fnp.asarray([3.0, 1.0, 2.0])
    spec = fg.ShapeDtypeStruct((3,), fnp.float32)
    np.testing.assert_array_equal(np.asarray(fg.pure_callback(np.sort, spec, x)), [1.0, 2.0, 3.0])
    calls = []

    def counted_sort(a):
        calls.append(a.copy())
        return np.sort(a, axis=-1)

    f = fg.jit(lambda v: fg.pure_callback(counted_sort, spec, v) * 2)
    f(x)
    np.testing.assert_array_equal(np.asarray(f(x + 1)), [4.0, 6.0, 8.0])
    assert len(calls) == 2                         # run at each call, with that call's values
    xs = np.array([[3.0, 1.0, 2.0], [0.0, -1.0, 5.0]])
    for method in ("sequential", "expand_dims", "broadcast_all"):
        got = fg.vmap(lambda r: fg.pure_callback(counted_sort, spec, r, vmap_method=method))(fnp.asarray(xs))
        np.testing.assert_array_equal(np.asarray(got), np.sort(xs, axis=-1))
    with pytest.raises(NotImplementedError, match="vmap_method"):
        fg.vmap(lambda r: fg.pure_callback(np.sort, spec, r))(fnp.asarray(xs))
    with pytest.raises(ValueError, match="no derivative rule"):
        fg.grad(lambda r: fnp.sum(fg.pure_callback(np.sort, spec, r)))(x)
    with pytest.raises(ValueError, match="shape \\(2,\\) for result 0.*declares \\(3,\\)"):
        fg.pure_callback(lambda a: a[:2], spec, x)


def test_small_jax_top_level_names():
    x = fnp.ones((2, 3))
    aval = fg.typeof(x)
    assert aval.shape == (2, 3) and aval.dtype == np.float32
    assert fg.named_call(fnp.sin, name="s") is fnp.sin
    with fg.named_scope("block"):
        fg.effects_barrier()
    with config_set("enable_x64", False):
        with fg.enable_x64():
            assert fnp.asarray(np.float64(1.0)).dtype == np.float64
        assert fnp.asarray(np.float64(1.0)).dtype == np.float32


def test_traced_fill_gathers_and_dropping_adds_in_every_layout(x64, rng):
    # One traced index array takes the masked path (no padded copy): check it against numpy in
    # several layouts, under jit, vmap and grad.
    y = rng.standard_normal((3, 4))
    ids = np.array([[0, 5], [-1, -6]])
    for axis in (0, 1):
        n = y.shape[axis]
        ref = np.take(y, _clamped(ids, n), axis=axis)
        valid = _inside(ids, n).reshape((1,) * axis + ids.shape + (1,) * (1 - axis))
        ref = np.where(valid, ref, np.nan)
        got = fg.jit(lambda v, i: fnp.take(v, i, axis=axis))(fnp.asarray(y), fnp.asarray(ids))
        np.testing.assert_array_equal(np.asarray(got), ref)
    got = fg.vmap(lambda i: fnp.take(fnp.asarray(y), i, axis=1))(fnp.asarray(ids))
    np.testing.assert_array_equal(np.asarray(got)[1], np.where(_inside(ids[1], 4), y[:, _clamped(ids[1], 4)], np.nan))
    g = fg.jit(fg.grad(lambda v, i: fnp.sum(fnp.take(v, i, axis=0, fill_value=0.0) ** 2)))(
        fnp.asarray(y), fnp.asarray(np.array([2, 7, 2])))
    expected = np.zeros_like(y)
    expected[2] = 2 * 2 * y[2]
    np.testing.assert_allclose(np.asarray(g), expected)
    rows = np.array([2, 9, -1, -4])
    added = y.copy()
    np.add.at(added, (_clamped(rows, 3)[_inside(rows, 3)], slice(1, 3)), 10.0)
    got = fg.jit(lambda v, i: v.at[i, 1:3].add(10.0))(fnp.asarray(y), fnp.asarray(rows))
    np.testing.assert_array_equal(np.asarray(got), added)
    check_grads(lambda v: fg.jit(lambda v, i: fnp.take(v, i, axis=1, fill_value=0.5) * v[:, :1])(
        fnp.asarray(v), fnp.asarray(ids[0])), (fnp.asarray(y),), order=2)


def test_linear_transpose_and_closure_convert(x64, rng):
    w = rng.standard_normal((2, 3))
    f_t = fg.linear_transpose(lambda x: x @ fnp.asarray(w), fnp.ones(2))
    ct = rng.standard_normal(3)
    (got,) = f_t(fnp.asarray(ct))
    np.testing.assert_allclose(np.asarray(got), w @ ct)
    two = fg.linear_transpose(lambda x, y: (2 * x + y, x), 1.0, 2.0)
    assert [float(v) for v in two((1.0, 1.0))] == [3.0, 1.0]
    f, consts = fg.closure_convert(fnp.sin, 1.0)
    assert f is fnp.sin and consts == []
    fg.clear_caches()


def test_vmap_maps_keyword_arguments_over_axis_0():
    f = fg.vmap(lambda x, y=1.0: x * y, in_axes=(None,))
    np.testing.assert_array_equal(np.asarray(f(2.0, y=fnp.arange(3.0))), [0.0, 2.0, 4.0])
    got = fg.vmap(lambda x, y: x + y)(fnp.ones(2), y=fnp.arange(2.0))
    np.testing.assert_array_equal(np.asarray(got), [1.0, 2.0])
