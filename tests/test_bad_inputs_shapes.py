"""Bad shapes, sizes and axes in funcgrad.numpy, tree_util, pooling sizes, jit's non-array
arguments: table rows through the shared checker, and their valid neighbours."""

import re

import numpy as np

import funcgrad as fg
import funcgrad.nn as nn
import funcgrad.numpy as fnp
from funcgrad import random

from bad_input_table import Case, _i32, _two, f32, table_tests  # noqa: F401

CASES: list[Case] = []

# --- numpy shapes, axes, tree_util and leftovers
# Shapes and axes go through one normaliser each (funcgrad.numpy._base): ints,
# numpy integers and concrete 0-d integer arrays are taken; floats, bools and
# strings are refused, never truncated.  Also jit's non-array arguments,
# tree_util's structures, pooling/conv sizes, attention params and seeds.

from funcgrad import tree_util  # noqa: E402

_A23 = f32(2, 3)
_NOT_ROUNDED = "never rounded"
_MHA = nn.MultiHeadAttention(2)
_MHA_PARAMS, _ = _MHA.init(random.key(0), (-1, 4, 8))
_MHA_NO_BK = {k: v for k, v in _MHA_PARAMS.items() if k != "bk"}

CASES += [
    # jit: a value that is no array among the traced arguments names its argument and the fix
    Case("jit-str-keyword", lambda: fg.jit(nn.cross_entropy)(f32(4, 3), _i32(0, 1, 2, 0), reduction="none"),
         TypeError, ["jit(cross_entropy)", "keyword argument 'reduction'", "str 'none'", "not an array",
                     "static_argnames=('reduction',)"]),
    Case("jit-object-positional", lambda: fg.jit(_two)(f32(3), object()), TypeError,
         ["jit(_two)", "argument 1 (y)", "an object", "static_argnums=(1,)", "static_argnames=('y',)"]),
    Case("jit-str-inside-pytree", lambda: fg.jit(lambda p: p["w"] * 2.0)({"w": f32(2), "name": "lin"}), TypeError,
         ["jit(<lambda>)", "argument 0 (p)", "str 'lin' among its leaves"]),
    Case("jit-trace-str", lambda: fg.jit(_two).trace(f32(3), "y"), TypeError, ["jit(_two)", "argument 1 (y)", "str"]),

    # shapes: creation and shape functions
    Case("reshape-float-size", lambda: fnp.reshape(_A23, (2.0, 3)), TypeError,
         ["reshape", "shape", "(2.0, 3)", "entry 0 is float 2.0", _NOT_ROUNDED]),
    Case("reshape-method-float-size", lambda: _A23.reshape(2.0, 3), TypeError, ["reshape", "(2.0, 3)", "int"]),
    Case("reshape-str", lambda: fnp.reshape(_A23, "a"), TypeError, ["reshape", "shape", "str 'a'", "tuple of ints"]),
    Case("reshape-two-unknown", lambda: fnp.reshape(_A23, (-1, -1)), ValueError,
         ["reshape", "(-1, -1)", "f32[2,3]", "one unknown dimension"]),
    Case("reshape-minus-two", lambda: fnp.reshape(_A23, (-2, 3)), ValueError,
         ["reshape", "(-2, 3)", "negative", "-1"]),
    Case("zeros-float-size", lambda: fnp.zeros((2.5, 2)), TypeError, ["zeros", "shape", "(2.5, 2)", "float 2.5"]),
    Case("zeros-str", lambda: fnp.zeros("a"), TypeError, ["zeros", "shape", "'a'", "int"]),
    Case("zeros-negative", lambda: fnp.zeros((-1, 2)), ValueError, ["zeros", "(-1, 2)", "negative", ">= 0"]),
    Case("ones-bool-size", lambda: fnp.ones((True, 2)), TypeError, ["ones", "shape", "bool True"]),
    Case("full-none-shape", lambda: fnp.full(None, 1.0), TypeError, ["full", "shape", "NoneType"]),
    Case("full-array-value-float-shape", lambda: fnp.full((2.5,), f32()), TypeError, ["full", "(2.5,)"]),
    Case("eye-float", lambda: fnp.eye(2.5), TypeError, ["eye", "2.5", "int"]),
    Case("linspace-num-float", lambda: fnp.linspace(0.0, 1.0, 2.5), TypeError, ["linspace", "num", "2.5"]),
    Case("linspace-num-negative", lambda: fnp.linspace(0.0, 1.0, -1), ValueError, ["linspace", "num", "-1"]),
    Case("broadcast-to-float", lambda: fnp.broadcast_to(_A23, (2.0, 3)), TypeError, ["broadcast_to", "(2.0, 3)"]),
    Case("broadcast-to-incompatible", lambda: fnp.broadcast_to(_A23, (4, 3)), ValueError,
         ["broadcast_to", "f32[2,3]", "(4, 3)", "size 1"]),
    Case("tile-negative", lambda: fnp.tile(_A23, (2, -1)), ValueError, ["tile", "reps", "(2, -1)", "negative"]),
    Case("tile-float", lambda: fnp.tile(_A23, 1.5), TypeError, ["tile", "reps", "1.5"]),
    Case("repeat-negative", lambda: fnp.repeat(_A23, -1), ValueError, ["repeat", "repeats", ">= 0", "-1"]),
    Case("repeat-float", lambda: fnp.repeat(_A23, 1.5), TypeError, ["repeat", "repeats", "1.5", "int"]),
    Case("repeat-count-length", lambda: fnp.repeat(_A23, [1, 2], axis=1), ValueError,
         ["repeat", "f32[2,3]", "2 repeat counts", "size 3"]),
    Case("pad-float", lambda: fnp.pad(_A23, 1.5), TypeError, ["pad", "pad_width", "1.5", "ints"]),
    Case("pad-negative", lambda: fnp.pad(_A23, -1), ValueError, ["pad", "pad_width", ">= 0"]),

    # axes: reductions, shape functions and the nn softmax family
    Case("mean-axis-str", lambda: fnp.mean(_A23, axis="0"), TypeError, ["mean", "axis", "str '0'", "int"]),
    Case("sum-axis-float", lambda: fnp.sum(_A23, axis=1.0), TypeError, ["sum", "axis", "float 1.0", _NOT_ROUNDED]),
    Case("sum-axis-bool", lambda: fnp.sum(_A23, axis=True), TypeError, ["sum", "axis", "bool"]),
    Case("sum-method-axis-str", lambda: _A23.sum("1"), TypeError, ["sum", "axis", "'1'"]),
    Case("sum-axis-repeated", lambda: fnp.sum(_A23, axis=(1, -1)), ValueError,
         ["sum", "(1, -1)", "f32[2,3]", "more than once"]),
    Case("sum-axis-float-array", lambda: fnp.sum(_A23, axis=fnp.asarray(1.0)), TypeError, ["sum", "axis", "f32[]"]),
    Case("var-axis-float", lambda: fnp.var(_A23, axis=0.5), TypeError, ["var", "axis", "0.5"]),
    Case("argmax-axis-float", lambda: fnp.argmax(_A23, axis=1.0), TypeError, ["argmax", "axis", "1.0"]),
    Case("cumsum-axis-float", lambda: fnp.cumsum(_A23, axis=1.0), TypeError, ["cumsum", "axis", "1.0"]),
    Case("logsumexp-axis-float", lambda: fnp.logsumexp(_A23, axis=0.5), TypeError, ["logsumexp", "axis", "0.5"]),
    Case("norm-axis-float", lambda: fnp.linalg.norm(_A23, axis=1.0), TypeError, ["norm", "axis", "1.0"]),
    Case("transpose-repeated", lambda: fnp.transpose(_A23, (0, 0)), ValueError,
         ["transpose", "(0, 0)", "f32[2,3]", "more than once"]),
    Case("transpose-too-few", lambda: fnp.transpose(_A23, (0,)), ValueError,
         ["transpose", "(0,)", "f32[2,3]", "permutation of all 2 axes"]),
    Case("transpose-float", lambda: _A23.transpose(1.0, 0), TypeError, ["transpose", "axis", "1.0"]),
    Case("swapaxes-float", lambda: fnp.swapaxes(_A23, 0.0, 1), TypeError, ["swapaxes", "axis", "0.0"]),
    Case("moveaxis-out-of-range", lambda: fnp.moveaxis(_A23, 0, 5), ValueError,
         ["moveaxis", "axis 5", "f32[2,3]", "[-2, 2)"]),
    Case("moveaxis-repeated", lambda: fnp.moveaxis(_A23, (0, 0), (1, 0)), ValueError,
         ["moveaxis", "(0, 0)", "more than once"]),
    Case("moveaxis-count", lambda: fnp.moveaxis(_A23, (0, 1), 0), ValueError, ["moveaxis", "f32[2,3]", "same number"]),
    Case("expand-dims-out-of-range", lambda: fnp.expand_dims(_A23, 5), ValueError,
         ["expand_dims", "axis 5", "f32[2,3]", "rank 3", "[-3, 3)"]),
    Case("expand-dims-repeated", lambda: fnp.expand_dims(_A23, (0, 0)), ValueError, ["expand_dims", "more than once"]),
    Case("expand-dims-float", lambda: fnp.expand_dims(_A23, 1.0), TypeError, ["expand_dims", "axis", "1.0"]),
    Case("squeeze-out-of-range", lambda: fnp.squeeze(_A23, 4), ValueError, ["squeeze", "axis 4", "f32[2,3]"]),
    Case("flip-axis-float", lambda: fnp.flip(_A23, 1.0), TypeError, ["flip", "axis", "1.0"]),
    Case("take-axis-float", lambda: fnp.take(_A23, 0, axis=1.0), TypeError, ["take", "axis", "1.0"]),
    Case("concatenate-rank", lambda: fnp.concatenate([_A23, f32(3)]), ValueError,
         ["concatenate", "f32[2,3]", "f32[3]", "same rank"]),
    Case("concatenate-other-axis", lambda: fnp.concatenate([_A23, f32(3, 2)], axis=0), ValueError,
         ["concatenate", "f32[2,3]", "f32[3,2]", "axis 0"]),
    Case("concatenate-axis-float", lambda: fnp.concatenate([_A23, _A23], axis=0.5), TypeError,
         ["concatenate", "axis", "0.5"]),
    Case("stack-empty", lambda: fnp.stack([]), ValueError, ["stack", "at least one array"]),
    Case("stack-axis-out-of-range", lambda: fnp.stack([_A23, _A23], axis=3), ValueError,
         ["stack", "axis 3", "f32[2,3]", "rank 3"]),
    Case("stack-axis-float", lambda: fnp.stack([_A23, _A23], axis=1.5), TypeError, ["stack", "axis", "1.5"]),
    Case("split-uneven", lambda: fnp.split(_A23, 2, axis=1), ValueError,
         ["split", "f32[2,3]", "size 3", "2 equal sections"]),
    Case("split-float-sections", lambda: fnp.split(_A23, 1.5), TypeError, ["split", "indices_or_sections", "1.5"]),
    Case("split-float-index", lambda: fnp.split(_A23, [1.5], axis=1), TypeError, ["split", "split index", "1.5"]),
    Case("softmax-axis-float", lambda: nn.softmax(f32(4, 3), axis=1.5), TypeError, ["softmax", "axis", "1.5", "int"]),
    Case("log-softmax-axis-str", lambda: nn.log_softmax(f32(4, 3), axis="1"), TypeError,
         ["log_softmax", "axis", "'1'"]),
    Case("softmax-axis-tuple-float", lambda: nn.softmax(f32(4, 3), axis=(0, 1.5)), TypeError,
         ["softmax", "axis", "1.5"]),
    Case("softmax-axis-out-of-range", lambda: nn.softmax(f32(4, 3), axis=3), ValueError,
         ["softmax", "axis 3", "f32[4,3]"]),

    # tree_util
    Case("tree-unflatten-not-a-treedef", lambda: tree_util.tree_unflatten({"a": 1}, [1]), TypeError,
         ["tree_unflatten", "PyTreeDef", "dict", "tree_unflatten(treedef, leaves)"]),
    Case("tree-unflatten-leaf-count", lambda: tree_util.tree_unflatten(tree_util.tree_structure({"a": 1, "b": 2}), [1]),
         ValueError, ["tree_unflatten", "{'a': *, 'b': *}", "2 leaves", "got 1"]),
    Case("tree-unflatten-leaves-not-iterable",
         lambda: tree_util.tree_unflatten(tree_util.tree_structure([1]), 5), TypeError,
         ["tree_unflatten", "leaves", "int", "1 leaves"]),
    Case("tree-flatten-uncomparable-keys", lambda: tree_util.tree_flatten({("a",): 1, (1,): 2}), TypeError,
         ["tree_flatten", "sortable", "('a',)", "(1,)"]),

    # pooling and conv sizes
    Case("maxpool-kernel-str", lambda: nn.MaxPool2d("a"), TypeError, ["MaxPool2d", "kernel_size", "str 'a'", "int"]),
    Case("conv-kernel-float", lambda: nn.Conv2d(2, 2.5), TypeError, ["Conv2d", "kernel_size", "2.5", "pair of ints"]),
    Case("avgpool-stride-float", lambda: nn.AvgPool2d(2, stride=(1, 1.5)), TypeError,
         ["AvgPool2d", "stride", "(1, 1.5)"]),
    Case("maxpool-padding-bool", lambda: nn.MaxPool2d(2, padding=True), TypeError, ["MaxPool2d", "padding", "bool"]),
    Case("maxpool-padding-negative", lambda: nn.MaxPool2d(2, padding=-1), ValueError,
         ["MaxPool2d", "padding", ">= 0"]),

    # attention params are checked like every layer's
    Case("mha-missing-bias", lambda: _MHA.apply(_MHA_NO_BK, f32(1, 4, 8)), ValueError,
         ["MultiHeadAttention", "missing ['bk']"]),
    Case("mha-bias-shape", lambda: _MHA.apply({**_MHA_PARAMS, "bo": f32(3)}, f32(1, 4, 8)), ValueError,
         ["MultiHeadAttention", "params['bo']", "f32[3]", "(8,)"]),
    Case("mha-params-not-dict", lambda: _MHA.apply((), f32(1, 4, 8)), TypeError, ["MultiHeadAttention", "dict"]),

    # random
    Case("key-seed-beyond-64-bits", lambda: random.key(2 ** 70), ValueError,
         [re.compile(r"^random\.key: "), str(2 ** 70), "64 bits"]),
]


def test_shapes_and_axes_take_every_integer_form():
    """Ints, numpy integers, lists and concrete 0-d integer arrays all work, as in numpy."""
    x = np.arange(6.0).reshape(2, 3)
    a, two, one = fnp.array(x), np.int64(2), fnp.asarray(1)
    assert fnp.zeros((two, 3)).shape == (2, 3) and fnp.ones([one, 2]).shape == (1, 2) and fnp.zeros(()).shape == ()
    np.testing.assert_array_equal(np.asarray(fnp.full(np.int32(2), 7.0)), np.full(2, 7.0))
    np.testing.assert_array_equal(np.asarray(fnp.reshape(a, (one, -1))), x.reshape(1, -1))
    np.testing.assert_array_equal(np.asarray(a.reshape(np.int64(3), two)), x.reshape(3, 2))
    np.testing.assert_array_equal(np.asarray(a.reshape(np.array([6]))), x.reshape(6))
    np.testing.assert_allclose(np.asarray(fnp.sum(a, axis=one)), x.sum(axis=1))
    np.testing.assert_allclose(np.asarray(fnp.mean(a, axis=[np.int64(0), -1])), x.mean(axis=(0, -1)))
    np.testing.assert_allclose(np.asarray(a.sum(np.int32(0))), x.sum(0))
    np.testing.assert_array_equal(np.asarray(fnp.transpose(a, [np.int64(1), 0])), x.T)
    np.testing.assert_array_equal(np.asarray(a.transpose(1, 0)), x.T)
    np.testing.assert_array_equal(np.asarray(fnp.moveaxis(fnp.zeros((2, 3, 4)), [0, 1], [-1, 0])).shape, (3, 4, 2))
    np.testing.assert_array_equal(np.asarray(fnp.expand_dims(a, (0, -1))), np.expand_dims(x, (0, -1)))
    np.testing.assert_array_equal(np.asarray(fnp.broadcast_to(a, (np.int64(4), 2, 3))), np.broadcast_to(x, (4, 2, 3)))
    np.testing.assert_array_equal(np.asarray(fnp.tile(a, (two, 1))), np.tile(x, (2, 1)))
    np.testing.assert_array_equal(np.asarray(fnp.repeat(a, [0, 2, 1], axis=1)), np.repeat(x, [0, 2, 1], axis=1))
    np.testing.assert_array_equal(np.asarray(fnp.repeat(a, fnp.asarray(2))), np.repeat(x, 2))
    np.testing.assert_array_equal(np.asarray(fnp.pad(a, [(0, 1), (2, 0)])), np.pad(x, [(0, 1), (2, 0)]))
    np.testing.assert_array_equal(np.asarray(fnp.stack([a, a], axis=np.int64(-1))), np.stack([x, x], axis=-1))
    np.testing.assert_array_equal(np.asarray(fnp.eye(np.int64(2), 3, k=1)), np.eye(2, 3, k=1))
    np.testing.assert_allclose(np.asarray(fnp.linspace(0.0, 1.0, np.int64(5))), np.linspace(0, 1, 5))
    np.testing.assert_allclose(np.asarray(nn.softmax(a, axis=np.int64(0))),
                               np.exp(x) / np.exp(x).sum(axis=0, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(nn.log_softmax(a, axis=(0, 1))),
                               x - np.log(np.exp(x).sum()), rtol=1e-6)
    assert random.normal(random.key(0), (one, np.int64(2))).shape == (1, 2)


def test_split_matches_numpy_for_every_index_form():
    x = np.arange(10.0).reshape(2, 5)
    for spec in (5, np.int64(1), [2], [-2], [1, 4], [3, 1], [0, 7], [-7, 2], np.array([2, 3])):
        got = fnp.split(fnp.array(x), spec, axis=1)
        want = np.split(x, spec, axis=1)
        assert len(got) == len(want), spec
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), w)


def test_jit_with_a_static_string_argument_matches_float64(rng):
    logits, labels = rng.normal(size=(3, 4)), np.array([0, 3, 1], np.int32)
    log_probs = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    f = fg.jit(nn.cross_entropy, static_argnames=("reduction",))
    got = f(fnp.asarray(logits), fnp.asarray(labels), reduction="none")
    np.testing.assert_allclose(np.asarray(got), -log_probs[np.arange(3), labels], rtol=1e-5)
    got = f(fnp.asarray(logits), fnp.asarray(labels), reduction="sum")
    np.testing.assert_allclose(float(got), -log_probs[np.arange(3), labels].sum(), rtol=1e-5)


def test_tree_util_dicts_with_mixed_key_types():
    """Keys 1 and "a" flatten in one fixed order (type name, then value), whatever the insertion order."""
    t1 = {"b": 2.0, 1: 3.0, "a": 5.0, 0: 7.0}
    t2 = {0: 7.0, "a": 5.0, 1: 3.0, "b": 2.0}
    (l1, d1), (l2, d2) = tree_util.tree_flatten(t1), tree_util.tree_flatten(t2)
    assert l1 == l2 == [7.0, 3.0, 5.0, 2.0] and d1 == d2 and hash(d1) == hash(d2)
    assert tree_util.tree_unflatten(d1, l1) == t1
    w = np.array([0.5, -1.5, 2.0])
    params = {0: fnp.array(w), "s": fnp.asarray(3.0)}
    g = fg.grad(lambda p: fnp.sum(p[0] ** 2) * p["s"])(params)
    np.testing.assert_allclose(np.asarray(g[0]), 2 * w * 3.0, rtol=1e-6)
    np.testing.assert_allclose(float(g["s"]), np.sum(w ** 2), rtol=1e-6)
    out = fg.jit(lambda p: p[0] * p["s"])(params)
    np.testing.assert_allclose(np.asarray(out), w * 3.0, rtol=1e-6)


def test_pooling_with_numpy_integer_sizes_matches_numpy():
    x = np.arange(32.0).reshape(1, 2, 4, 4) % 7
    got = nn.MaxPool2d(np.int64(2), stride=(2, np.int32(2))).apply((), fnp.array(x))
    np.testing.assert_array_equal(np.asarray(got), x.reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5)))


def test_random_key_at_the_seed_bounds():
    np.testing.assert_array_equal(np.asarray(random.PRNGKey(2 ** 64 - 1)), [0xFFFFFFFF, 0xFFFFFFFF])
    np.testing.assert_array_equal(np.asarray(random.PRNGKey(-2 ** 63)), [0x80000000, 0])


test_bad_input, test_case_ids_are_unique = table_tests(CASES)
