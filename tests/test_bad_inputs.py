"""The bad-input table for the libraries (nn, optim, random, checkpoints,
datasets, funcgrad.numpy values): one row per wrong call, through the shared
checker of ``bad_input_table.py``.  The transforms and core have their table in
``test_bad_inputs_core.py``; shapes, sizes and axes in ``test_bad_inputs_shapes.py``.

A second, smaller table (``NO_MUTATION``) calls functions on a user's numpy
arrays and checks that the arrays are unchanged afterwards.

Adding a bad input = one row in the section of its module.
"""
from __future__ import annotations

import json
import os
import tempfile
from collections import namedtuple

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.nn as nn
import funcgrad.numpy as fnp
from funcgrad import datasets, optim, random
from funcgrad.optim import serialization

from bad_input_table import Case, f32, table_tests  # noqa: F401

CASES: list[Case] = []
# Each section appends its rows: ``CASES += [Case("id", lambda: ..., ValueError, ["op", "f32[3]"]), ...]``

# --- nn

_LIN, _ = nn.Linear(2).init(random.key(0), (-1, 3))      # {"w": f32[3,2], "b": f32[2]}
_CONV, _ = nn.Conv2d(4, 3).init(random.key(0), (-1, 2, 8, 8))
_LN, _ = nn.LayerNorm().init(random.key(0), (-1, 3))
_EMB, _ = nn.Embedding(10, 4).init(random.key(0), (-1,))
_SEQ = nn.Sequential(nn.Linear(2), nn.ReLU())

CASES += [
    # losses: elementwise losses never broadcast
    Case("mse-broadcast", lambda: nn.mse(f32(4, 1), f32(4)), ValueError, ["mse", "f32[4]", "f32[4,1]", "shape"]),
    Case("mse-broadcast-row", lambda: nn.mse(f32(4, 3), f32(3)), ValueError, ["mse", "f32[3]", "f32[4,3]"]),
    Case("bce-broadcast", lambda: nn.binary_cross_entropy_with_logits(f32(4, 1), f32(4)), ValueError,
         ["binary_cross_entropy_with_logits", "f32[4]", "f32[4,1]", "shape"]),
    Case("mse-reduction", lambda: nn.mse(f32(2), f32(2), reduction="avg"), ValueError, ["mse", "'avg'", "mean"]),
    Case("xent-label-out-of-range", lambda: nn.cross_entropy(f32(4, 3), fnp.array([0, 1, 2, 3])), ValueError,
         ["label 3", "f32[4,3]", "[0, 3)"]),
    Case("xent-label-negative", lambda: nn.cross_entropy(f32(4, 3), fnp.array([0, 1, 2, -1])), ValueError,
         ["label -1", "[0, 3)"]),
    Case("xent-label-out-of-range-jit", lambda: fg.jit(nn.cross_entropy)(f32(4, 3), fnp.array([0, 1, 2, 3])),
         ValueError, ["label 3", "[0, 3)"]),
    Case("xent-label-shape", lambda: nn.cross_entropy(f32(4, 3), fnp.zeros((4, 1), fnp.int32)), ValueError,
         ["cross_entropy", "i32[4,1]", "f32[4,3]", "(4,)"]),
    Case("xent-prob-shape", lambda: nn.cross_entropy(f32(4, 3), f32(4)), ValueError,
         ["cross_entropy", "f32[4]", "f32[4,3]"]),
    Case("xent-bool-labels", lambda: nn.cross_entropy(f32(2, 3), fnp.array([True, False])), TypeError,
         ["cross_entropy", "bool[2]", "integer"]),
    Case("xent-axis-float", lambda: nn.cross_entropy(f32(2, 3), fnp.array([0, 1]), axis=1.0), TypeError,
         ["cross_entropy", "axis", "int"]),
    Case("xent-no-classes", lambda: nn.cross_entropy(f32(2, 0), fnp.array([0, 1])), ValueError,
         ["cross_entropy", "f32[2,0]", "no classes"]),
    # layers: params must be exactly what init made
    Case("linear-missing-bias", lambda: nn.Linear(2).apply({"w": _LIN["w"]}, f32(4, 3)), ValueError,
         ["Linear", "missing ['b']", "['b', 'w']"]),
    Case("linear-bias-without-use-bias", lambda: nn.Linear(2, use_bias=False).apply(_LIN, f32(4, 3)), ValueError,
         ["Linear", "unexpected ['b']", "use_bias"]),
    Case("linear-missing-w", lambda: nn.Linear(2).apply({"b": _LIN["b"]}, f32(4, 3)), ValueError,
         ["Linear", "missing ['w']"]),
    Case("linear-extra-key", lambda: nn.Linear(2).apply({**_LIN, "c": f32(1)}, f32(4, 3)), ValueError,
         ["Linear", "unexpected ['c']"]),
    Case("linear-params-not-dict", lambda: nn.Linear(2).apply((), f32(4, 3)), TypeError, ["Linear", "dict", "tuple"]),
    Case("linear-param-not-array", lambda: nn.Linear(2).apply({"w": 1, "b": 2}, f32(4, 3)), TypeError,
         ["Linear", "params['w']", "array", "int"]),
    Case("linear-w-1d", lambda: nn.Linear(2).apply({"w": f32(3), "b": f32(2)}, f32(4, 3)), ValueError,
         ["Linear", "params['w']", "f32[3]", "(in, 2)"]),
    Case("linear-input-size", lambda: nn.Linear(2).apply(_LIN, f32(4, 5)), ValueError,
         ["Linear", "f32[4,5]", "initialised for 3"]),
    Case("linear-b-shape", lambda: nn.Linear(2).apply({"w": _LIN["w"], "b": f32(3)}, f32(4, 3)), ValueError,
         ["Linear", "params['b']", "f32[3]", "(2,)"]),
    Case("linear-size-float", lambda: nn.Linear(2.5), TypeError, ["Linear", "out_features", "int", "2.5"]),
    Case("linear-size-zero", lambda: nn.Linear(0), ValueError, ["Linear", "out_features", ">= 1"]),
    Case("linear-init-shape-none", lambda: nn.Linear(2).init(random.key(0), None), TypeError,
         ["Linear.init", "input_shape", "NoneType"]),
    Case("conv-missing-bias", lambda: nn.Conv2d(4, 3).apply({"w": _CONV["w"]}, f32(1, 2, 8, 8)), ValueError,
         ["Conv2d", "missing ['b']"]),
    Case("conv-w-shape", lambda: nn.Conv2d(4, 3).apply({"w": f32(4, 2, 5, 5), "b": f32(4)}, f32(1, 2, 8, 8)),
         ValueError, ["Conv2d", "params['w']", "f32[4,2,5,5]", "(4, 2, 3, 3)"]),
    Case("conv-b-shape", lambda: nn.Conv2d(4, 3).apply({"w": _CONV["w"], "b": f32(3)}, f32(1, 2, 8, 8)),
         ValueError, ["Conv2d", "params['b']", "f32[3]", "(4,)"]),
    Case("conv-groups-zero", lambda: nn.Conv2d(4, 3, groups=0), ValueError, ["Conv2d", "groups", ">= 1"]),
    Case("layernorm-missing-scale", lambda: nn.LayerNorm().apply({"bias": _LN["bias"]}, f32(4, 3)), ValueError,
         ["LayerNorm", "missing ['scale']"]),
    Case("layernorm-scale-broadcasts", lambda: nn.LayerNorm().apply({"scale": f32(1), "bias": f32(1)}, f32(4, 5)),
         ValueError, ["LayerNorm", "params['scale']", "f32[1]", "(5,)", "f32[4,5]"]),
    Case("embedding-negative-id", lambda: nn.Embedding(10, 4).apply(_EMB, fnp.array([0, -1])), IndexError,
         ["Embedding", "-1", "[0, 10)"]),
    Case("embedding-id-too-large", lambda: nn.Embedding(10, 4).apply(_EMB, fnp.array([0, 10])), IndexError,
         ["Embedding", "10", "[0, 10)"]),
    Case("embedding-table-shape", lambda: nn.Embedding(10, 4).apply({"table": f32(5, 4)}, fnp.array([0])),
         ValueError, ["Embedding", "params['table']", "f32[5,4]", "(10, 4)"]),
    Case("embedding-float-ids", lambda: nn.Embedding(10, 4).apply(_EMB, f32(2)), TypeError,
         ["Embedding", "f32[2]", "integers"]),
    Case("stateless-given-params", lambda: nn.ReLU().apply({"w": f32(2)}, f32(2)), ValueError,
         ["ReLU", "no parameters", "params=()"]),
    Case("dropout-rate-str", lambda: nn.Dropout("0.5"), TypeError, ["Dropout", "rate", "str"]),
    Case("layernorm-eps-str", lambda: nn.LayerNorm(eps="a"), TypeError, ["LayerNorm", "eps", "str"]),
    Case("embedding-init-shape-str", lambda: nn.Embedding(3, 2).init(random.key(0), "ab"), TypeError,
         ["Embedding.init", "input_shape"]),
    Case("activation-not-callable", lambda: nn.Activation(3), TypeError, ["Activation", "function", "int"]),
    Case("sequential-params-dict", lambda: _SEQ.apply({"a": 1}, f32(4, 3)), TypeError,
         ["Sequential", "tuple", "dict"]),
    Case("sequential-params-misaligned", lambda: _SEQ.apply(((), _LIN), f32(4, 3)), TypeError,
         ["Linear", "dict", "tuple"]),
    # initializers
    Case("init-float-shape", lambda: nn.initializers.he_normal()(random.key(0), (2.5, 3)), TypeError,
         ["initializers", "shape", "(2.5, 3)"]),
    Case("init-negative-shape", lambda: nn.initializers.zeros(random.key(0), (-1, 3)), ValueError,
         ["initializers.zeros", "(-1, 3)", "negative"]),
    Case("init-axis-out-of-range", lambda: nn.initializers.he_normal(in_axis=5)(random.key(0), (2, 3)), ValueError,
         ["variance_scaling", "in_axis=5", "(2, 3)"]),
    Case("init-same-axes", lambda: nn.initializers.lecun_normal(0, 0)(random.key(0), (2, 3)), ValueError,
         ["variance_scaling", "same axis"]),
    Case("init-negative-scale", lambda: nn.initializers.variance_scaling(-1.0, "fan_in", "normal"), ValueError,
         ["variance_scaling", "scale", "positive"]),
    Case("init-int-dtype", lambda: nn.initializers.glorot_uniform()(random.key(0), (2, 3), fnp.int32), TypeError,
         ["uniform", "int32", "float"]),
    Case("init-key-none", lambda: nn.initializers.he_normal()(None, (2, 3)), TypeError, ["key", "NoneType"]),
    Case("init-constant-str", lambda: nn.initializers.constant("a"), TypeError, ["constant", "number", "str"]),
]

# --- optim

_P = {"layer1": {"w": f32(3)}}
_G_COLUMN = {"layer1": {"w": f32(3, 1)}}                   # broadcasts against f32[3] into f32[3,3]


def _update(opt, grads=_G_COLUMN, params=_P, state=None):
    return opt.update(grads, opt.init(params) if state is None else state, params)


CASES += [
    Case("sgd-grad-shape", lambda: _update(optim.sgd(0.1)), ValueError,
         ["sgd.update", "['layer1']['w']", "f32[3,1]", "f32[3]"]),
    Case("sgd-momentum-grad-shape", lambda: _update(optim.sgd(0.1, momentum=0.9)), ValueError,
         ["sgd.update", "['layer1']['w']", "f32[3,1]", "f32[3]"]),
    Case("adam-grad-shape", lambda: _update(optim.adam(0.1)), ValueError,
         ["adam.update", "['layer1']['w']", "f32[3,1]", "f32[3]"]),
    Case("adamw-param-shape", lambda: optim.adamw(0.1).update(_P, optim.adamw(0.1).init(_P), _G_COLUMN), ValueError,
         ["adamw.update", "['layer1']['w']", "f32[3,1]", "f32[3]"]),
    Case("momentum-grad-shape-no-params",
         lambda: optim.sgd(0.1, momentum=0.9).update(_G_COLUMN, optim.sgd(0.1, momentum=0.9).init(_P)), ValueError,
         ["trace", "['layer1']['w']", "f32[3,1]", "f32[3]"]),
    Case("apply-updates-shape", lambda: optim.apply_updates(_P, _G_COLUMN), ValueError,
         ["apply_updates", "['layer1']['w']", "f32[3,1]", "f32[3]"]),
    Case("apply-updates-structure", lambda: optim.apply_updates(_P, {"w": f32(3)}), ValueError,
         ["apply_updates", "structure", "{'w': *}"]),
    Case("apply-updates-int-param", lambda: optim.apply_updates({"n": fnp.ones(3, fnp.int32)}, {"n": f32(3)}),
         TypeError, ["apply_updates", "['n']", "i32[3]", "f32[3]", "integer"]),
    Case("grads-structure", lambda: _update(optim.adam(0.1), grads={"x": f32(3)}), ValueError,
         ["adam.update", "structure", "{'x': *}", "{'layer1': {'w': *}}"]),
    Case("grads-none", lambda: _update(optim.sgd(0.1), grads=None), ValueError, ["sgd.update", "None"]),
    # states belong to one optimizer and one parameter tree
    Case("adam-given-sgd-momentum-state", lambda: _update(optim.adam(0.1), grads=_P,
                                                          state=optim.sgd(0.1, momentum=0.9).init(_P)),
         ValueError, ["adam.update", "2 parts", "TraceState", "another optimizer"]),
    Case("sgd-given-adam-state", lambda: _update(optim.sgd(0.1), grads=_P, state=optim.adam(0.1).init(_P)),
         TypeError, ["sgd.update", "ScaleByAdamState", "expected EmptyState", "another optimizer"]),
    Case("adam-given-sgd-state", lambda: _update(optim.adam(0.1), grads=_P, state=optim.sgd(0.1).init(_P)),
         TypeError, ["adam.update", "state[0]", "EmptyState", "expected ScaleByAdamState"]),
    Case("scheduled-given-constant-state",
         lambda: _update(optim.sgd(optim.constant_schedule(0.1)), grads=_P, state=optim.sgd(0.1).init(_P)),
         TypeError, ["sgd.update", "expected ScaleByScheduleState"]),
    Case("nested-chain-state", lambda: _update(optim.chain(optim.clip_by_global_norm(1.0), optim.adam(0.1)),
                                               grads=_P, state=(optim.EmptyState(), optim.sgd(0.1).init(_P))),
         TypeError, ["chain.update", "state[1][0]", "expected ScaleByAdamState"]),
    Case("adam-state-other-params", lambda: _update(optim.adam(0.1), grads=_P,
                                                    state=optim.adam(0.1).init({"a": f32(3)})),
         ValueError, ["scale_by_adam", "first moment", "{'a': *}"]),
    Case("adam-state-other-shapes", lambda: _update(optim.adam(0.1), grads=_P,
                                                    state=optim.adam(0.1).init({"layer1": {"w": f32(4)}})),
         ValueError, ["scale_by_adam", "['layer1']['w']", "f32[4]", "f32[3]"]),
    Case("block-given-foreign-state", lambda: optim.trace(0.9).update(_P, optim.EmptyState()), TypeError,
         ["trace", "EmptyState", "expected TraceState"]),
    Case("state-not-a-tuple", lambda: optim.sgd(0.1).update(_P, 5, _P), TypeError, ["sgd.update", "tuple", "int"]),
    Case("init-int-params", lambda: optim.adam(0.1).init({"n": fnp.ones(3, fnp.int32)}), TypeError,
         ["scale_by_adam", "['n']", "i32[3]", "float"]),
    # hyperparameters
    Case("lr-str", lambda: optim.sgd("0.1"), TypeError, ["sgd", "learning_rate", "str"]),
    Case("lr-negative", lambda: optim.adam(-1e-3), ValueError, ["adam", "learning_rate", "-0.001"]),
    Case("momentum-negative", lambda: optim.sgd(0.1, momentum=-0.5), ValueError, ["sgd", "momentum", "-0.5"]),
    Case("adam-b1", lambda: optim.adam(0.1, b1=1.0), ValueError, ["b1", "[0, 1)"]),
    Case("clip-zero", lambda: optim.clip_by_global_norm(0.0), ValueError, ["clip_by_global_norm", "max_norm"]),
    Case("chain-non-transform", lambda: optim.chain(optim.sgd(0.1), lambda g: g), TypeError,
         ["chain", "transformation 1", "GradientTransformation"]),
    Case("schedule-vector", lambda: _update(optim.sgd(lambda count: fnp.ones(2)), grads=_P), ValueError,
         ["scale_by_learning_rate", "f32[2]", "scalar"]),
    Case("schedule-steps-str", lambda: optim.warmup_cosine_decay_schedule(0.0, 1.0, "10", 100), TypeError,
         ["warmup_cosine_decay_schedule", "warmup_steps", "integer"]),
    Case("schedule-step-size-float", lambda: optim.step_decay_schedule(1.0, 2.5, 0.5), TypeError,
         ["step_decay_schedule", "step_size", "2.5"]),
]

# --- random

_KEY = random.PRNGKey(0)   # a raw u32[2] key (random.key(0) is a typed key)

CASES += [
    Case("split-float-num", lambda: random.split(_KEY, 2.5), TypeError, ["random.split", "num", "int", "2.5"]),
    Case("split-str-num", lambda: random.split(_KEY, "2"), TypeError, ["random.split", "num", "int"]),
    Case("split-negative-num", lambda: random.split(_KEY, -1), ValueError, ["random.split", "non-negative", "-1"]),
    Case("key-float", lambda: random.split(f32(2)), TypeError, ["random.split", "u32[2]", "f32[2]"]),
    Case("key-u32-3", lambda: random.normal(fnp.zeros(3, fnp.uint32), (2,)), TypeError,
         ["random.normal", "u32[2]", "u32[3]"]),
    Case("key-batch", lambda: random.normal(random.split(_KEY, 4), (2,)), TypeError,
         ["random.normal", "u32[4,2]", "vmap"]),
    Case("key-none", lambda: random.uniform(None, (2,)), TypeError, ["random.uniform", "key", "NoneType"]),
    Case("key-seed-float", lambda: random.key(1.5), TypeError, ["random.key", "integer", "float"]),
    Case("shape-float", lambda: random.normal(_KEY, (2.5, 3)), TypeError, ["random.normal", "shape", "(2.5, 3)"]),
    Case("shape-float-scalar", lambda: random.uniform(_KEY, 2.0), TypeError, ["random.uniform", "shape", "2.0"]),
    Case("shape-str", lambda: random.normal(_KEY, "3"), TypeError, ["random.normal", "shape"]),
    Case("shape-negative", lambda: random.normal(_KEY, (-1, 3)), ValueError, ["random.normal", "(-1, 3)", "negative"]),
    Case("normal-int-dtype", lambda: random.normal(_KEY, (3,), dtype=fnp.int32), TypeError,
         ["random.normal", "int32", "float"]),
    Case("uniform-complex-dtype", lambda: random.uniform(_KEY, (3,), dtype=fnp.complex64), TypeError,
         ["random.uniform", "complex64", "bfloat16, float16/32/64"]),
    Case("normal-bad-dtype", lambda: random.normal(_KEY, (3,), dtype="foo"), TypeError, ["random.normal", "'foo'"]),
    Case("bits-float-dtype", lambda: random.bits(_KEY, (3,), fnp.float32), TypeError,
         ["random.bits", "unsigned", "float32"]),
    Case("randint-float-dtype", lambda: random.randint(_KEY, (3,), 0, 5, dtype=fnp.float32), TypeError,
         ["random.randint", "integer", "float32"]),
    Case("randint-float-bounds", lambda: random.randint(_KEY, (3,), 0.5, 5), TypeError,
         ["random.randint", "bounds", "integers"]),
    Case("uniform-params-enlarge-shape", lambda: random.uniform(_KEY, (3,), minval=f32(2, 3)), ValueError,
         ["random.uniform", "(3,)", "(2, 3)"]),
    Case("fold-in-float", lambda: random.fold_in(_KEY, 2.5), TypeError, ["random.fold_in", "int", "2.5"]),
    Case("fold-in-negative", lambda: random.fold_in(_KEY, -1), ValueError, ["random.fold_in", "2**32", "-1"]),
    Case("permutation-float", lambda: random.permutation(_KEY, 2.5), TypeError, ["random.permutation", "int", "2.5"]),
    Case("permutation-negative", lambda: random.permutation(_KEY, -3), ValueError,
         ["random.permutation", "non-negative", "-3"]),
    Case("categorical-axis", lambda: random.categorical(_KEY, f32(2, 3), axis=2), ValueError,
         ["random.categorical", "axis 2", "f32[2,3]"]),
    Case("categorical-axis-float", lambda: random.categorical(_KEY, f32(2, 3), axis=1.0), TypeError,
         ["random.categorical", "axis", "int"]),
    Case("permutation-axis-float", lambda: random.permutation(_KEY, f32(2, 3), axis=1.0), TypeError,
         ["random.permutation", "axis", "int"]),
    Case("uniform-maxval-none", lambda: random.uniform(_KEY, (2,), maxval=None), TypeError,   # was all NaN
         ["random.uniform", "maxval", "NoneType"]),
    Case("bernoulli-p-str", lambda: random.bernoulli(_KEY, "a", (3,)), TypeError, ["random.bernoulli", "p", "str"]),
    Case("truncated-normal-bound-str", lambda: random.truncated_normal(_KEY, "a", 1.0, (2,)), TypeError,
         ["random.truncated_normal", "lower", "str"]),
]

# --- checkpoints


def _load_file(content, like=None):
    """``serialization.load`` of a file ``bad.npz`` holding ``content`` (bytes, or a callable writing the path)."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "bad.npz")
        if callable(content):
            content(path)
        else:
            with open(path, "wb") as f:
                f.write(content)
        return serialization.load(path, like=like)


def _npz(record=None, **arrays):
    """A writer of an .npz with ``arrays`` and, unless None, ``record`` as the structure record (JSON)."""
    def write(path):
        if record is not None:
            arrays["__funcgrad_checkpoint__"] = np.frombuffer(json.dumps(record).encode(), np.uint8)
        with open(path, "wb") as f:
            np.savez(f, **arrays)
    return write


def _saved_bytes(tree):
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "good.npz")
        serialization.save(path, tree)
        with open(path, "rb") as f:
            return f.read()


def _save_file(tree, name="c.npz"):
    """``serialization.save`` into a temporary directory (``name`` ending in / names an existing subdirectory)."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, name.rstrip("/"))
        if name.endswith("/"):
            os.mkdir(path)
        return serialization.save(path, tree)


def _record(tree):
    return {"format": "funcgrad.checkpoint", "version": 1, "tree": tree}


_F32_LEAF = {"node": "leaf", "kind": "array", "dtype": "<f4", "shape": [3]}
_NOT_CKPT = "is not a valid funcgrad checkpoint"

CASES += [
    Case("ckpt-random-bytes", lambda: _load_file(np.random.default_rng(0).bytes(300)), ValueError,
         ["serialization.load", "bad.npz", _NOT_CKPT, "not an .npz"]),
    Case("ckpt-empty", lambda: _load_file(b""), ValueError, ["bad.npz", _NOT_CKPT, "empty"]),
    Case("ckpt-truncated", lambda: _load_file(_saved_bytes({"w": fnp.arange(100.0)})[:300]), ValueError,
         ["bad.npz", _NOT_CKPT, "truncated"]),
    Case("ckpt-no-record", lambda: _load_file(_npz(a=np.ones(3))), ValueError,
         ["bad.npz", _NOT_CKPT, "no __funcgrad_checkpoint__ record"]),
    Case("ckpt-record-missing-children",
         lambda: _load_file(_npz(_record({"node": "dict", "keys": ["a"], "key_types": ["str"]}), leaf_0=np.ones(3))),
         ValueError, ["bad.npz", "structure record is malformed", "'children'"]),
    Case("ckpt-record-missing-shape",
         lambda: _load_file(_npz(_record({"node": "leaf", "kind": "array", "dtype": "<f4"}),
                                 leaf_0=np.ones(3, np.float32))),
         ValueError, ["bad.npz", "structure record is malformed", "'shape'"]),
    Case("ckpt-record-bad-dtype",
         lambda: _load_file(_npz(_record({**_F32_LEAF, "dtype": "zz"}), leaf_0=np.ones(3, np.float32))),
         ValueError, ["bad.npz", "malformed", "'zz'"]),
    Case("ckpt-record-key-count",
         lambda: _load_file(_npz(_record({"node": "dict", "keys": ["a", "b"], "key_types": ["str", "str"],
                                          "children": [{"node": "none"}]}))),
         ValueError, ["bad.npz", "malformed", "2 keys"]),
    Case("ckpt-record-unknown-node", lambda: _load_file(_npz(_record({"node": "set", "children": []}))), ValueError,
         ["bad.npz", "malformed", "'set'"]),
    Case("ckpt-array-shape-disagrees",
         lambda: _load_file(_npz(_record(_F32_LEAF), leaf_0=np.ones(4, np.float32))), ValueError,
         ["bad.npz", _NOT_CKPT, "recorded as f32[3] but stored as f32[4]"]),
    Case("ckpt-array-missing", lambda: _load_file(_npz(_record({"node": "list", "children": [_F32_LEAF]}))),
         ValueError, ["bad.npz", "[0]", "missing"]),
    Case("ckpt-object-array", lambda: _load_file(_npz(__funcgrad_checkpoint__=np.array([{"a": 1}], dtype=object))),
         ValueError, ["bad.npz", _NOT_CKPT, "pickle"]),
    Case("ckpt-like-mismatch", lambda: _load_file(_saved_bytes({"w": f32(2, 3)}), like={"w": f32(3, 2)}),
         ValueError, ["serialization.load", "w", "saved f32[2,3], expected f32[3,2]"]),
    Case("ckpt-save-str-leaf", lambda: _save_file({"a": "text"}), TypeError, ["serialization.save", "str", "a"]),
    Case("ckpt-save-over-directory", lambda: _save_file({"a": 1}, "sub/"), ValueError,
         ["serialization.save", "sub", "not a regular file"]),
    Case("ckpt-save-missing-directory",
         lambda: serialization.save(os.path.join(tempfile.gettempdir(), "no-such-dir-fg", "c.npz"), {"a": 1}),
         FileNotFoundError, ["serialization.save", "no-such-dir-fg", "does not exist"]),
]

# --- datasets

CASES += [
    Case("idx-parse-str", lambda: datasets.parse_idx("abc"), TypeError, ["parse_idx", "bytes", "str"]),
    Case("idx-truncated", lambda: datasets.parse_idx(b"\x00\x00\x08\x01\x00\x00\x00\x05\x01"),
         datasets.IdxFormatError, ["truncated", "(5,)"]),
    Case("idx-bad-magic", lambda: datasets.parse_idx(b"\x1f\x8b\x08\x00\x00"), datasets.IdxFormatError,
         ["bad idx magic", "compressed"]),
    Case("idx-bytes-int64", lambda: datasets.idx_bytes(np.ones(3, np.int64)), TypeError,
         ["idx_bytes", "int64", "uint8"]),
    Case("idx-bytes-0d", lambda: datasets.idx_bytes(np.array(1, np.uint8)), ValueError, ["idx_bytes", "dimensions"]),
    Case("verify-mnist-structure", lambda: datasets.verify_mnist(((1, 2), (3, 4))), TypeError,
         ["verify_mnist", "train_images", "tuple"]),
    Case("verify-mnist-shape",
         lambda: datasets.verify_mnist(((np.zeros((2, 28, 28), np.uint8), np.zeros(2, np.uint8)),) * 2),
         datasets.DataVerificationError, ["train images", "(2, 28, 28)", "(60000, 28, 28)"]),
    Case("mnist-download-str", lambda: datasets.mnist(cache_dir=tempfile.gettempdir(), download="no"), TypeError,
         ["mnist", "download", "'no'"]),
    Case("mnist-cache-dir-int", lambda: datasets.mnist(cache_dir=5), TypeError, ["mnist", "cache_dir", "int"]),
]

# --- numpy

CASES += [
    Case("reshape-size", lambda: fnp.reshape(f32(2, 3), (4, 2)), ValueError, ["reshape", "f32[2,3]", "(4, 2)"]),
    Case("matmul-inner", lambda: fnp.matmul(f32(2, 3), f32(2, 3)), ValueError, ["matmul", "f32[2,3]", "(3)"]),
    Case("sum-axis", lambda: fnp.sum(f32(2, 3), axis=5), ValueError, ["sum", "axis 5", "f32[2,3]"]),
    Case("concatenate-shapes", lambda: fnp.concatenate([f32(2, 3), f32(2, 4)], axis=0), ValueError,
         ["concatenate", "f32[2,3]", "f32[2,4]"]),
    Case("stack-shapes", lambda: fnp.stack([f32(2, 3), f32(3)]), ValueError, ["stack", "f32[2,3]", "f32[3]"]),
    Case("squeeze-non-unit", lambda: fnp.squeeze(f32(2, 3), 0), ValueError, ["squeeze", "f32[2,3]", "size 2"]),
    Case("einsum-sizes", lambda: fnp.einsum("ij,jk->ik", f32(2, 3), f32(2, 3)), ValueError,
         ["einsum", "f32[2,3]", "'j'"]),
    Case("max-empty-axis", lambda: fnp.max(f32(0, 3), axis=0), ValueError, ["reduce_max", "f32[0,3]", "zero-size"]),
    Case("index-float", lambda: f32(2, 3)[0.5], IndexError, ["0.5", "ints"]),
    Case("bool-mask-length", lambda: f32(2, 3)[fnp.array([True, False, True])], IndexError,
         ["bool[3]", "f32[2,3]"]),
    Case("asarray-dict", lambda: fnp.asarray({"a": 1}), TypeError, ["dict"]),
    Case("one-hot-float", lambda: nn.one_hot(f32(2), 3), TypeError, ["one_hot", "f32[2]", "integers"]),
]

test_bad_input, test_case_ids_are_unique = table_tests(CASES)


# ------------------------------------------------- no mutation of user arrays

# (id, function taking numpy arrays, the arrays to pass)
NoMutation = namedtuple("NoMutation", "id call args")

NO_MUTATION: list[NoMutation] = [
    NoMutation("mse", lambda p, t: nn.mse(p, t), [np.arange(4.0), np.ones(4)]),
    NoMutation("cross_entropy", lambda x, y: nn.cross_entropy(x, y),
               [np.linspace(-1, 1, 6).reshape(2, 3), np.array([0, 2], np.int32)]),
    NoMutation("linear", lambda w, b, x: nn.Linear(2).apply({"w": w, "b": b}, x),
               [np.ones((3, 2), np.float32), np.ones(2, np.float32), np.arange(6.0).reshape(2, 3)]),
    NoMutation("layernorm", lambda s, b, x: nn.LayerNorm().apply({"scale": s, "bias": b}, x),
               [np.ones(3, np.float32), np.zeros(3, np.float32), np.arange(6.0).reshape(2, 3)]),
    NoMutation("embedding", lambda t, i: nn.Embedding(4, 2).apply({"table": t}, i),
               [np.arange(8.0, dtype=np.float32).reshape(4, 2), np.array([3, 0], np.int32)]),
    NoMutation("adam-update", lambda p, g: optim.adam(0.1).update({"w": g}, optim.adam(0.1).init({"w": p}), {"w": p}),
               [np.ones(3, np.float32), np.full(3, 0.5, np.float32)]),
    NoMutation("sgd-momentum-apply",
               lambda p, g: optim.apply_updates({"w": p}, optim.sgd(0.1, momentum=0.9).update(
                   {"w": g}, optim.sgd(0.1, momentum=0.9).init({"w": p}), {"w": p})[0]),
               [np.ones(3, np.float32), np.full(3, 0.5, np.float32)]),
    NoMutation("uniform-bounds", lambda lo, hi: random.uniform(random.key(0), (3,), minval=lo, maxval=hi),
               [np.zeros(3, np.float32), np.ones(3, np.float32)]),
    NoMutation("checkpoint-save", lambda a, b: _save_file({"a": a, "b": [b]}),
               [np.arange(3.0), np.ones((2, 2), np.int32)]),
    NoMutation("idx-bytes", lambda a: datasets.idx_bytes(a), [np.arange(6, dtype=np.uint8).reshape(2, 3)]),
]


@pytest.mark.parametrize("row", NO_MUTATION, ids=[r.id for r in NO_MUTATION])
def test_user_arrays_unchanged(row):
    args = [np.array(a) for a in row.args]
    before = [a.copy() for a in args]
    row.call(*args)
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype and a.shape == b.shape


# ------------------------------------- valid neighbours of the rows above (nn, optim, random, ...)
# Each check added above must leave correct calls alone: these compare them
# with float64 numpy references.


def test_elementwise_losses_of_equal_shapes_match_float64(rng):
    p, t = rng.normal(size=(4, 1)), rng.normal(size=(4, 1))
    np.testing.assert_allclose(float(nn.mse(fnp.asarray(p), fnp.asarray(t))), np.mean((p - t) ** 2), rtol=1e-6)
    np.testing.assert_allclose(float(nn.mse(fnp.asarray(p), 0.5)), np.mean((p - 0.5) ** 2), rtol=1e-6)
    x, y = rng.normal(size=(4, 1)) * 3, rng.uniform(size=(4, 1))
    expected = np.mean(np.logaddexp(0, x) - x * y)
    np.testing.assert_allclose(float(nn.binary_cross_entropy_with_logits(fnp.asarray(x), fnp.asarray(y))),
                               expected, rtol=1e-6)
    np.testing.assert_allclose(float(fg.jit(nn.binary_cross_entropy_with_logits)(fnp.asarray(x), fnp.asarray(y))),
                               expected, rtol=1e-6)


def test_cross_entropy_boundary_labels_match_float64(rng):
    logits = rng.normal(size=(3, 4))
    labels = np.array([0, 3, 3], np.int32)                      # the first and the last class
    log_probs = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    expected = -log_probs[np.arange(3), labels]
    per_example = lambda a, b: nn.cross_entropy(a, b, reduction="none")
    for f in (per_example, fg.jit(per_example)):
        got = f(fnp.asarray(logits), fnp.asarray(labels))
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5)
    got = nn.cross_entropy(fnp.asarray(logits.T), fnp.asarray(labels), axis=np.int64(0), reduction="none")
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5)


def test_layers_with_their_own_params_match_float64(rng):
    x = rng.normal(size=(2, 3))
    w, b = rng.normal(size=(3, 2)), rng.normal(size=2)
    f = lambda a: fnp.asarray(a.astype(np.float32))
    got = nn.Linear(2).apply({"w": f(w), "b": f(b)}, f(x))
    np.testing.assert_allclose(np.asarray(got), x @ w + b, rtol=1e-5, atol=1e-6)
    got = nn.Linear(2, use_bias=False).apply({"w": f(w)}, f(x))
    np.testing.assert_allclose(np.asarray(got), x @ w, rtol=1e-5, atol=1e-6)
    scale, bias = rng.normal(size=3), rng.normal(size=3)
    centred = x - x.mean(-1, keepdims=True)
    expected = centred / np.sqrt(centred.var(-1, keepdims=True) + 1e-5) * scale + bias
    got = nn.LayerNorm().apply({"scale": f(scale), "bias": f(bias)}, f(x))
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-4, atol=1e-5)
    got = nn.LayerNorm(use_scale=False, use_bias=False).apply({}, f(x))
    np.testing.assert_allclose(np.asarray(got), centred / np.sqrt(centred.var(-1, keepdims=True) + 1e-5),
                               rtol=1e-4, atol=1e-5)
    table = rng.normal(size=(5, 2))
    ids = np.array([[0, 4], [2, 0]], np.int32)                  # both ends of [0, V)
    np.testing.assert_array_equal(np.asarray(nn.Embedding(5, 2).apply({"table": f(table)}, ids)),
                                  table.astype(np.float32)[ids])
    for params in ((), None, {}):                               # what init returns, or nothing
        np.testing.assert_array_equal(np.asarray(nn.Activation(fnp.abs).apply(params, f(x))),
                                      np.abs(x).astype(np.float32))


def test_conv_layer_with_its_own_params_matches_float64(rng):
    layer = nn.Conv2d(2, (2, 1), groups=2)
    x, w, b = rng.normal(size=(1, 2, 3, 2)), rng.normal(size=(2, 1, 2, 1)), rng.normal(size=2)
    f = lambda a: fnp.asarray(a.astype(np.float32))
    expected = np.empty((1, 2, 2, 2))
    for o in range(2):                                          # group o sees channel o only
        for i in range(2):
            expected[0, o, i] = x[0, o, i] * w[o, 0, 0, 0] + x[0, o, i + 1] * w[o, 0, 1, 0] + b[o]
    np.testing.assert_allclose(np.asarray(layer.apply({"w": f(w), "b": f(b)}, f(x))), expected, rtol=1e-5)


def _reference_adam(p, grads, lr, b1=0.9, b2=0.999, eps=1e-8):
    m = v = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return p


def test_optimizers_with_matching_trees_match_float64(rng):
    # A nested tree with a 0-d leaf and a column vector: the shapes the checks look at.
    params = {"layer1": {"w": rng.normal(size=(3, 1)), "b": np.array(0.5)}}
    grads = [{"layer1": {"w": rng.normal(size=(3, 1)), "b": np.array(g)}} for g in (0.3, -0.2)]
    f = lambda tree: {"layer1": {k: fnp.asarray(np.asarray(v, np.float32)) for k, v in tree["layer1"].items()}}
    for opt, step in [(optim.adam(0.1), fg.jit), (optim.adam(0.1), lambda s: s),
                      (optim.chain(optim.clip_by_global_norm(100.0), optim.adam(0.1)), lambda s: s)]:
        def update(p, s, g, opt=opt):
            u, s = opt.update(g, s, p)
            return optim.apply_updates(p, u), s
        update = step(update)
        p, s = f(params), opt.init(f(params))
        for g in grads:
            p, s = update(p, s, f(g))
        for k in ("w", "b"):
            expected = _reference_adam(params["layer1"][k], [g["layer1"][k] for g in grads], 0.1)
            np.testing.assert_allclose(np.asarray(p["layer1"][k]), expected, rtol=1e-5, atol=1e-6)


def test_optimizer_hyperparameters_at_their_bounds_are_accepted():
    p = {"w": fnp.asarray(np.array([1.0, -2.0], np.float32))}
    g = {"w": fnp.asarray(np.array([0.5, 0.25], np.float32))}
    for opt in (optim.sgd(0, momentum=0.0, weight_decay=0), optim.adam(0.0, b1=0.0, b2=0.0, eps=0.0)):
        updates, _ = opt.update(g, opt.init(p), p)
        np.testing.assert_array_equal(np.asarray(optim.apply_updates(p, updates)["w"]), np.asarray(p["w"]))
    # A float16 parameter takes a float32 update, rounded to float16 (the update is cast, not the parameter).
    half = {"w": fnp.asarray(np.array([1.0], np.float16))}
    got = optim.apply_updates(half, {"w": fnp.asarray(np.array([0.25], np.float32))})["w"]
    assert got.dtype == np.float16 and float(got[0]) == 1.25
    s = optim.step_decay_schedule(1.0, np.int64(2), 0.5)
    assert float(s(2)) == 0.5


def test_random_valid_arguments_match_float64():
    import scipy.special
    key = random.PRNGKey(0)
    assert random.split(key, np.int64(3)).shape == (3, 2)
    assert random.normal(key, (np.int32(2), 3)).shape == (2, 3) and random.uniform(key, 4).shape == (4,)
    for dtype in (np.float16, np.float32):
        z = random.normal(key, (64,), dtype=dtype)
        assert z.dtype == dtype
        # normal = sqrt(2) * erfinv(u) of the uniform drawn the same way, in float64, then rounded.
        lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
        u = np.asarray(random.uniform(key, (64,), dtype, lo, 1.0), np.float64)
        expected = (np.sqrt(2.0) * scipy.special.erfinv(u)).astype(dtype)
        np.testing.assert_allclose(np.asarray(z, np.float64), expected.astype(np.float64),
                                   rtol=2e-3 if dtype == np.float16 else 1e-5, atol=1e-6)
        t = random.truncated_normal(key, -0.5, 1.5, (64,), dtype=dtype)
        assert t.dtype == dtype and float(fnp.min(t)) > -0.5 and float(fnp.max(t)) < 1.5
        assert random.gumbel(key, (4,), dtype).dtype == dtype and random.uniform(key, (4,), dtype).dtype == dtype
    assert random.fold_in(key, np.array(7, np.uint32)).shape == (2,)
    np.testing.assert_array_equal(np.sort(np.asarray(random.permutation(key, np.int64(5)))), np.arange(5))


def test_initializers_with_valid_axes_match_float64():
    key = random.key(3)
    shape = (4, 2, 3, 3)                                        # OIHW: fan_in = 2 * 9
    got = nn.initializers.he_normal(in_axis=1, out_axis=0)(key, shape)
    expected = np.asarray(random.normal(key, shape), np.float64) * np.sqrt(2.0 / 18)
    np.testing.assert_allclose(np.asarray(got, np.float64), expected, rtol=1e-6)
    assert nn.initializers.zeros(key, 3).shape == (3,) and nn.initializers.lecun_normal()(key, (0, 3)).shape == (0, 3)
    assert nn.initializers.glorot_uniform()(key, (2, 3), np.float16).dtype == np.float16


def test_checkpoint_hand_written_valid_record_loads():
    # Every field the validator demands, written by hand rather than by save.
    record = {"node": "dict", "keys": [3, "a"], "key_types": ["int", "str"], "children": [
        {"node": "namedtuple", "type": "nowhere:Pair", "fields": ["x", "y"],
         "children": [{"node": "leaf", "kind": "array", "dtype": "<f4", "shape": [2]}, {"node": "none"}]},
        {"node": "leaf", "kind": "int", "dtype": "<i8", "shape": []}]}
    value = np.array([1.5, -2.0], np.float32)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "hand.npz")
        _npz(_record(record), leaf_0=value, leaf_1=np.array(7, np.int64))(path)
        tree = serialization.load(path)
    assert sorted(tree, key=str) == [3, "a"] and tree["a"] == 7 and type(tree["a"]) is int
    assert tree[3]._fields == ("x", "y") and tree[3].y is None
    np.testing.assert_array_equal(np.asarray(tree[3].x), value)


def test_datasets_valid_neighbours():
    data = datasets.idx_bytes(np.arange(6, dtype=np.int16).reshape(2, 3))
    for form in (data, bytearray(data), memoryview(data)):
        np.testing.assert_array_equal(datasets.parse_idx(form), np.arange(6).reshape(2, 3))
