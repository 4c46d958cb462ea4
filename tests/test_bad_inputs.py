"""The bad-input table: one row per wrong call, one shared checker.

Each ``Case`` is a zero-argument ``call`` that must raise ``error``, whose
message must contain every entry of ``needles`` (plain substrings, or compiled
regexes for ``re.search``): the operation's name, the shapes and dtypes
involved (as ``describe`` writes them, e.g. ``f32[3,1]``) and what was
expected.  The checker also refuses internal exception types (AttributeError,
KeyError, IndexError, AssertionError, numba or pickle errors) unless the row
names that type on purpose, so no bad input leaks an implementation detail.

A second, smaller table (``NO_MUTATION``) calls functions on a user's numpy
arrays and checks that the arrays are unchanged afterwards.

Adding a bad input = one row in the section of its module.
"""
from __future__ import annotations

import json
import os
import pickle
import re
import tempfile
from collections import namedtuple

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.nn as nn
import funcgrad.numpy as fnp
from funcgrad import datasets, optim, random
from funcgrad.optim import checkpoint

Case = namedtuple("Case", "id call error needles")

# Exception types that only ever come from inside the implementation: a user
# must never see one of these for a mistake in their own arguments.
INTERNAL = (AttributeError, KeyError, IndexError, AssertionError, pickle.UnpicklingError)


def _is_internal(exc: BaseException) -> bool:
    module = type(exc).__module__ or ""
    return isinstance(exc, INTERNAL) or module.startswith("numba")


def check_raises(case: Case) -> None:
    """``case.call()`` raises ``case.error`` with every needle in its message."""
    with pytest.raises(BaseException) as info:
        case.call()
    exc = info.value
    assert isinstance(exc, case.error), (
        f"expected {case.error.__name__}, got {type(exc).__name__}: {exc}")
    if not (isinstance(case.error, type) and issubclass(case.error, INTERNAL)):
        assert not _is_internal(exc), f"internal {type(exc).__name__} leaked: {exc}"
    msg = str(exc)
    for needle in case.needles:
        if isinstance(needle, re.Pattern):
            assert needle.search(msg), f"{needle.pattern!r} not in message: {msg}"
        else:
            assert needle in msg, f"{needle!r} not in message: {msg}"


def f32(*shape):
    """A float32 funcgrad array of ones (``f32[shape]``)."""
    return fnp.ones(shape, dtype=fnp.float32)


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

_KEY = random.key(0)

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
    Case("uniform-bfloat16", lambda: random.uniform(_KEY, (3,), dtype="bfloat16"), TypeError,
         ["random.uniform", "bfloat16", "round_to_bfloat16"]),
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
    """``checkpoint.load`` of a file ``bad.npz`` holding ``content`` (bytes, or a callable writing the path)."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "bad.npz")
        if callable(content):
            content(path)
        else:
            with open(path, "wb") as f:
                f.write(content)
        return checkpoint.load(path, like=like)


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
        checkpoint.save(path, tree)
        with open(path, "rb") as f:
            return f.read()


def _save_file(tree, name="c.npz"):
    """``checkpoint.save`` into a temporary directory (``name`` ending in / names an existing subdirectory)."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, name.rstrip("/"))
        if name.endswith("/"):
            os.mkdir(path)
        return checkpoint.save(path, tree)


def _record(tree):
    return {"format": "funcgrad.checkpoint", "version": 1, "tree": tree}


_F32_LEAF = {"node": "leaf", "kind": "array", "dtype": "<f4", "shape": [3]}
_NOT_CKPT = "is not a valid funcgrad checkpoint"

CASES += [
    Case("ckpt-random-bytes", lambda: _load_file(np.random.default_rng(0).bytes(300)), ValueError,
         ["checkpoint.load", "bad.npz", _NOT_CKPT, "not an .npz"]),
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
         ValueError, ["checkpoint.load", "w", "saved f32[2,3], expected f32[3,2]"]),
    Case("ckpt-save-str-leaf", lambda: _save_file({"a": "text"}), TypeError, ["checkpoint.save", "str", "a"]),
    Case("ckpt-save-over-directory", lambda: _save_file({"a": 1}, "sub/"), ValueError,
         ["checkpoint.save", "sub", "not a regular file"]),
    Case("ckpt-save-missing-directory",
         lambda: checkpoint.save(os.path.join(tempfile.gettempdir(), "no-such-dir-fg", "c.npz"), {"a": 1}),
         FileNotFoundError, ["checkpoint.save", "no-such-dir-fg", "does not exist"]),
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

# --- transforms and core
# Argument mistakes in the transforms (argnums, static_argnums, tangent dtypes,
# custom_vjp rules, non-scalar grad outputs) and the core (integer overflow,
# non-numeric arrays, bit operators, empty reductions, boolean masks).


def _two(x, y):
    return fnp.sum(x * y)


def _one_arg(x):
    return x * 2.0


def _var_args(*xs):
    return xs[0]


def _scale_with_bwd(bwd):
    """A custom_vjp ``scale(x) = 2 x`` whose backward rule is ``bwd(residual, g)``."""
    @fg.custom_vjp
    def scale(x):
        return x * 2.0

    scale.defvjp(lambda x: (x * 2.0, x), bwd)
    return lambda x: fg.grad(lambda v: fnp.sum(scale(v)))(x)


def _i32(*values):
    return fnp.array(list(values), dtype=fnp.int32)


_EMPTY_REDUCTION = ["zero-size", "no identity", "f32[0,3]", "axis 0"]
_MASK = ["bool[2]", "f32[3]", "axis 0", "size of axis is 3", "boolean axis is 2"]
_BITS = ["bool arrays only", "logical_and"]

CASES += [
    # argnums: repeated, negative repeats, wrong types, out of range -- for every transform that takes them
    Case("grad-argnums-repeated", lambda: fg.grad(_two, argnums=(0, 0)), ValueError,
         ["grad", "argnums=(0, 0)", "more than once", "argnums=(0,)"]),
    Case("value_and_grad-argnums-repeated", lambda: fg.value_and_grad(_two, argnums=[1, 1]), ValueError,
         ["value_and_grad", "argnums=(1, 1)", "more than once"]),
    Case("jacrev-argnums-repeated", lambda: fg.jacrev(_two, argnums=(0, 0)), ValueError, ["jacrev", "(0, 0)"]),
    Case("jacfwd-argnums-repeated", lambda: fg.jacfwd(_two, argnums=(1, 1)), ValueError, ["jacfwd", "(1, 1)"]),
    Case("hessian-argnums-repeated", lambda: fg.hessian(_two, argnums=(0, 0)), ValueError, ["hessian", "(0, 0)"]),
    Case("grad-argnums-negative-repeat", lambda: fg.grad(_two, argnums=(0, -2))(f32(3), f32(3)), ValueError,
         ["grad", "argnums=(0, -2)", "same argument twice", "2 positional"]),
    Case("grad-argnums-float", lambda: fg.grad(_two, argnums=0.5), TypeError,
         ["grad", "argnums", "0.5", "float", "int or a tuple of ints"]),
    Case("grad-argnums-bool", lambda: fg.grad(_two, argnums=True), TypeError, ["grad", "argnums", "bool"]),
    Case("jacrev-argnums-str", lambda: fg.jacrev(_two, argnums=("x",)), TypeError, ["jacrev", "argnums", "'x'"]),
    Case("grad-argnums-out-of-range", lambda: fg.grad(fnp.sum, argnums=2)(f32(3)), ValueError,
         ["grad", "argnums=2", "1 positional argument", "[-1, 1)"]),
    Case("jacfwd-argnums-out-of-range", lambda: fg.jacfwd(_one_arg, argnums=(0, 3))(f32(2)), ValueError,
         ["jacfwd", "argnums=(0, 3)", "1 positional argument"]),

    # jit's static arguments and cache size
    Case("jit-static-argnums-beyond-signature", lambda: fg.jit(_one_arg, static_argnums=5), ValueError,
         ["jit(_one_arg)", "static_argnums=(5,)", "takes 1 positional argument (x)", "[5]"]),
    Case("jit-static-argnums-beyond-call", lambda: fg.jit(_var_args, static_argnums=2)(f32(3)), ValueError,
         ["jit(_var_args)", "static_argnums=(2,)", "called with 1 positional argument", "static_argnames"]),
    Case("jit-static-argnums-decorator-form", lambda: fg.jit(static_argnums=1)(_one_arg), ValueError,
         ["jit(_one_arg)", "static_argnums=(1,)", "1 positional argument"]),
    Case("jit-static-argnums-float", lambda: fg.jit(_one_arg, static_argnums=0.5), TypeError,
         ["jit", "static_argnums", "0.5", "int"]),
    Case("jit-static-argnames-unknown", lambda: fg.jit(_one_arg, static_argnames="n"), ValueError,
         ["jit(_one_arg)", "static_argnames=('n',)", "['n']", "parameters: x"]),
    Case("jit-static-argnames-not-str", lambda: fg.jit(_one_arg, static_argnames=(0,)), TypeError,
         ["jit", "static_argnames", "str"]),
    Case("jit-cache-size-negative", lambda: fg.jit(_one_arg, cache_size=-1), ValueError,
         ["jit", "cache_size", "positive int", "-1"]),
    Case("jit-cache-size-zero", lambda: fg.jit(cache_size=0), ValueError, ["jit", "cache_size", "positive int", "0"]),
    Case("jit-cache-size-float", lambda: fg.jit(_one_arg, cache_size=2.5), ValueError, ["cache_size", "2.5"]),
    Case("make_jaxpr-static-argnums-beyond-call", lambda: fg.make_jaxpr(_one_arg, static_argnums=3)(f32(2)),
         ValueError, ["make_jaxpr(_one_arg)", "static_argnums=(3,)", "1 positional argument"]),
    Case("make_jaxpr-static-argnums-float", lambda: fg.make_jaxpr(_one_arg, static_argnums=0.5), TypeError,
         ["make_jaxpr", "static_argnums", "0.5"]),

    # tangents and cotangents live in their primal's space: same shape, same dtype
    Case("jvp-int-tangent-float-primal", lambda: fg.jvp(fnp.sin, (f32(3),), (_i32(1, 2, 3),)), TypeError,
         ["jvp", "tangent i32[3]", "primal f32[3]", "dtypes must be equal", "astype('float32')"]),
    Case("jvp-float-tangent-int-primal", lambda: fg.jvp(lambda i: i * 2, (_i32(1, 2),), (f32(2),)), TypeError,
         ["jvp", "tangent f32[2]", "primal i32[2]", "dtypes must be equal", "no derivative"]),
    Case("jvp-f16-tangent-f32-primal",
         lambda: fg.jvp(fnp.sin, (f32(2),), (fnp.ones(2, dtype=fnp.float16),)), TypeError,
         ["jvp", "f16[2]", "f32[2]", "float16", "float32"]),
    Case("jvp-tangent-shape", lambda: fg.jvp(fnp.sin, (f32(3),), (f32(2),)), ValueError,
         ["jvp", "tangent f32[2]", "primal f32[3]", "shapes must be equal"]),
    Case("vjp-int-cotangent", lambda: fg.vjp(fnp.sin, f32(3))[1](_i32(1, 2, 3)), TypeError,
         ["vjp", "cotangent i32[3]", "output f32[3]", "dtypes must be equal"]),
    Case("vjp-cotangent-shape", lambda: fg.vjp(fnp.sin, f32(3))[1](f32(3, 1)), ValueError,
         ["vjp", "cotangent f32[3,1]", "output f32[3]", "shapes must be equal"]),

    # custom_vjp backward rules are checked against the inputs
    Case("custom_vjp-int-cotangent", lambda: _scale_with_bwd(lambda r, g: ((g * 2.0).astype(fnp.int32),))(f32(3)),
         TypeError, ["custom_vjp scale", "input 0", "i32[3]", "f32[3]", "float32"]),
    Case("custom_vjp-cotangent-shape", lambda: _scale_with_bwd(lambda r, g: (fnp.ones(2),))(f32(3)), ValueError,
         ["custom_vjp scale", "input 0", "f32[2]", "f32[3]", "expected shape (3,)"]),
    Case("custom_vjp-too-many-cotangents", lambda: _scale_with_bwd(lambda r, g: (g, g))(f32(3)), ValueError,
         ["custom_vjp scale", "one cotangent per differentiable argument (1)", "length 2"]),
    Case("custom_vjp-bare-cotangent", lambda: _scale_with_bwd(lambda r, g: g * 2.0)(f32(3)), TypeError,
         ["custom_vjp scale", "tuple", "Array f32[3]", "(g,)"]),
    Case("custom_vjp-list-of-cotangents", lambda: _scale_with_bwd(lambda r, g: [g * 2.0])(f32(3)), TypeError,
         ["custom_vjp scale", "tuple", "got list"]),
    Case("custom_vjp-str-cotangent", lambda: _scale_with_bwd(lambda r, g: ("g",))(f32(3)), TypeError,
         ["custom_vjp scale", "str", "input 0", "f32[3]"]),

    # grad needs one float scalar: say what came back and what to do instead
    Case("grad-of-tuple", lambda: fg.grad(lambda x: (fnp.sum(x), x))(f32(3)), TypeError,
         ["grad", "scalar", "tuple of 2 items", "f32[], f32[3]", "has_aux=True"]),
    Case("value_and_grad-of-list", lambda: fg.value_and_grad(lambda x: [fnp.sum(x)])(f32(3)), TypeError,
         ["grad", "list of 1 item", "f32[]", "has_aux=True"]),
    Case("grad-of-dict", lambda: fg.grad(lambda x: {"loss": fnp.sum(x)})(f32(3)), TypeError,
         ["grad", "scalar array", "dict with keys ['loss']"]),
    Case("grad-of-none", lambda: fg.grad(lambda x: None)(f32(3)), TypeError, ["grad", "scalar array", "None"]),
    Case("grad-of-vector", lambda: fg.grad(lambda x: x * 2.0)(f32(3)), TypeError,
         ["grad", "scalar", "f32[3]", "vjp or jacrev"]),
    Case("grad-has-aux-not-a-pair", lambda: fg.grad(lambda x: fnp.sum(x), has_aux=True)(f32(3)), TypeError,
         ["grad(has_aux=True)", "pair (output, aux)", "f32[]"]),
    Case("grad-has-aux-triple", lambda: fg.grad(lambda x: (fnp.sum(x), x, x), has_aux=True)(f32(3)), TypeError,
         ["grad(has_aux=True)", "pair", "tuple of 3 items"]),

    # checkpoint returns arrays
    Case("checkpoint-str-output", lambda: fg.checkpoint(lambda x: "loss")(f32(3)), TypeError,
         ["checkpoint(<lambda>)", "output leaf 0", "str", "'loss'"]),
    Case("checkpoint-object-output-under-grad",
         lambda: fg.grad(lambda x: fnp.sum(fg.checkpoint(lambda v: (v, object()))(x)[0]))(f32(3)), TypeError,
         ["checkpoint(<lambda>)", "output leaf 1", "object"]),

    # core: numpy's ufunc errors re-raised with the primitive and dtypes (never a broken re-raise)
    Case("sign-of-bool", lambda: fnp.sign(f32(3) > 0), TypeError, ["sign", "bool[3]", "not supported"]),
    Case("sign-of-bool-jit", lambda: fg.jit(lambda x: fnp.sign(x > 0) + 1)(f32(3)), TypeError,
         ["sign", "bool[3]", "not supported"]),
    Case("neg-of-bool-jit", lambda: fg.jit(lambda x: -(x > 0) + 1)(f32(3)), TypeError,
         ["neg", "bool[3]", "logical_not"]),
    Case("sub-of-bools-jit", lambda: fg.jit(lambda x: ((x > 0) - (x > 1)) + 1)(f32(3)), TypeError,
         ["sub", "bool[3], bool[3]", "logical_xor"]),

    # core: integers that do not fit raise OverflowError (as in JAX), never wrap around
    Case("array-int-overflow", lambda: fnp.array([2 ** 40]), OverflowError,
         ["1099511627776", "int32", "enable_x64", "float"]),
    Case("asarray-int-overflow", lambda: fnp.asarray(2 ** 40), OverflowError, ["1099511627776", "int32"]),
    Case("array-int-beyond-int64", lambda: fnp.array([1, 2 ** 70]), OverflowError, [str(2 ** 70), "int32"]),
    Case("array-numpy-int64-overflow", lambda: fnp.asarray(np.array([1, -2 ** 40])), OverflowError,
         [str(-2 ** 40), "int32", "range [-2147483648, 2147483647]"]),
    Case("array-numpy-int64-scalar-overflow", lambda: fnp.asarray(np.int64(2 ** 33)), OverflowError,
         [str(2 ** 33), "int32"]),
    Case("add-int-overflow-eager", lambda: _i32(1, 2, 3) + 2 ** 40, OverflowError,
         ["add", "i32[3]", "1099511627776", "int32", "enable_x64"]),
    Case("add-int-overflow-jit-fused", lambda: fg.jit(lambda i: i * 2 + 2 ** 40)(_i32(1, 2, 3)), OverflowError,
         ["add", "i32[3]", "1099511627776", "int32", "enable_x64"]),
    Case("mul-int-overflow-vmap", lambda: fg.vmap(lambda i: i * 2 ** 35)(_i32(1, 2)), OverflowError,
         ["mul", "34359738368", "int32"]),

    # core: arrays hold bool/int/float only
    Case("array-of-str-and-int", lambda: fnp.array([1, "a"]), TypeError,
         ["<U21", "strings", "bool, integer and float"]),
    Case("array-of-str", lambda: fnp.array(["a", "b"]), TypeError, ["<U1", "strings"]),
    Case("asarray-numpy-str", lambda: fnp.asarray(np.array(["ab"])), TypeError,
         ["<U2", "strings", "bool, integer and float16/32/64"]),
    Case("array-with-none", lambda: fnp.array([1.0, None]), TypeError, ["list", "non-numeric", "None"]),
    Case("array-ragged", lambda: fnp.array([[1.0, 2.0], [3.0]]), ValueError, ["nested list", "inhomogeneous"]),

    # core: & | ^ ~ are logical on bools; numpy refuses them on floats, and on ints they are bitwise
    Case("and-floats", lambda: f32(3) & f32(3), TypeError, ["&", "bitwise_and", "f32[3] and f32[3]"] + _BITS),
    Case("or-float-scalar", lambda: f32(3) | 1.0, TypeError, ["|", "bitwise_or", "f32[3] and float scalar"]),
    Case("xor-reflected", lambda: 1.0 ^ f32(3), TypeError, ["^", "bitwise_xor", "float scalar and f32[3]"]),
    Case("invert-float", lambda: ~f32(3), TypeError, ["~", "invert", "f32[3]"] + _BITS),
    Case("and-ints-is-not-logical", lambda: _i32(1, 2, 3) & 1, TypeError, ["&", "i32[3] and int scalar"]),
    Case("and-floats-jit", lambda: fg.jit(lambda x: x & x)(f32(3)), TypeError, ["&", "f32[3] and f32[3]"]),
    Case("lshift", lambda: f32(3) << 1, TypeError, ["<<", "left_shift", "f32[3] and int scalar", "power of 2"]),
    Case("rshift-reflected", lambda: 8 >> _i32(1, 2), TypeError, [">>", "right_shift", "int scalar and i32[2]"]),

    # max/min/argmax/argmin of nothing: the same ValueError eagerly, under jit and under vmap
    Case("max-empty-eager", lambda: fnp.max(f32(0, 3), axis=0), ValueError, ["reduce_max"] + _EMPTY_REDUCTION),
    Case("max-empty-jit", lambda: fg.jit(lambda x: fnp.max(x * 2.0, axis=0))(f32(0, 3)), ValueError,
         ["reduce_max"] + _EMPTY_REDUCTION),
    Case("min-empty-jit-all-axes", lambda: fg.jit(lambda x: fnp.min(fnp.exp(x)))(f32(0)), ValueError,
         ["reduce_min", "zero-size", "f32[0]"]),
    Case("max-empty-vmap", lambda: fg.vmap(fnp.max)(f32(3, 0)), ValueError, ["reduce_max", "zero-size", "f32[3,0]"]),
    Case("argmax-empty-jit", lambda: fg.jit(lambda x: fnp.argmax(x, axis=0))(f32(0, 3)), ValueError,
         ["argmax"] + _EMPTY_REDUCTION),
    Case("argmin-empty-eager", lambda: fnp.argmin(f32(0, 3), axis=0), ValueError, ["argmin"] + _EMPTY_REDUCTION),

    # boolean masks must match the axes they select from (numpy's IndexError)
    Case("getitem-mask-too-short", lambda: f32(3)[fnp.array([True, False])], IndexError, ["getitem"] + _MASK),
    Case("getitem-numpy-mask-too-short", lambda: f32(3)[np.array([True, False])], IndexError, ["getitem"] + _MASK),
    Case("getitem-list-mask-too-long", lambda: f32(3)[[True, False, True, True]], IndexError,
         ["getitem", "bool[4]", "size of axis is 3"]),
    Case("getitem-mask-after-slice", lambda: f32(2, 3)[:, np.array([True, False])], IndexError,
         ["getitem", "bool[2]", "f32[2,3]", "axis 1", "size of axis is 3"]),
    Case("getitem-mask-after-ellipsis", lambda: f32(2, 3, 4)[..., np.array([True, False, True])], IndexError,
         ["getitem", "bool[3]", "f32[2,3,4]", "axis 2", "size of axis is 4"]),
    Case("getitem-mask-too-many-axes", lambda: f32(3)[np.ones((3, 1), bool)], IndexError,
         ["getitem", "bool[3,1]", "f32[3]", "too many indices"]),
    Case("getitem-mask-jit", lambda: fg.jit(lambda x: x[np.array([True, False])])(f32(3)), IndexError,
         ["getitem"] + _MASK),
    Case("at-set-mask-too-short", lambda: f32(3).at[fnp.array([True, False])].set(0.0), IndexError,
         ["at[...].set"] + _MASK),
    Case("at-add-mask-too-short", lambda: f32(3).at[np.array([True, False])].add(1.0), IndexError,
         ["at[...].add"] + _MASK),
    Case("at-set-mask-under-grad",
         lambda: fg.grad(lambda x: fnp.sum(x.at[np.array([True, False])].set(0.0)))(f32(3)), IndexError,
         ["at[...].set"] + _MASK),
]


class _TwoArgValueError(ValueError):
    """An exception type whose constructor does not take one message (like numpy's _UFuncNoLoopError)."""

    def __init__(self, code, detail):
        super().__init__(f"code {code}: {detail}")


def test_core_reraise_survives_exception_constructors():
    """An implementation's error keeps its built-in base type and gains the primitive and shapes."""
    from funcgrad._core import Primitive

    p = Primitive("probe_op")

    def impl(x):
        raise _TwoArgValueError(7, "bad value")

    p.impl = impl
    with pytest.raises(ValueError) as info:
        p.bind(f32(2, 3))
    msg = str(info.value)
    assert "probe_op" in msg and "f32[2,3]" in msg and "code 7: bad value" in msg, msg
    assert isinstance(info.value.__cause__, _TwoArgValueError)

    def impl_numpy(x):   # numpy's own no-loop error: a private TypeError subclass taking (ufunc, dtypes)
        return np.sign(np.asarray(x, dtype=bool))

    p.impl = impl_numpy
    with pytest.raises(TypeError) as info:
        p.bind(f32(2))
    assert "probe_op" in str(info.value) and "not supported for the input types" in str(info.value)
    assert type(info.value) is TypeError


def test_core_argnums_valid_neighbours_are_right():
    x, y = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.25, -3.0])
    f = lambda a, b: fnp.sum(a * b ** 2)   # d/da = b**2, d/db = 2 a b
    ga, gb = fg.grad(f, argnums=(0, 1))(fnp.array(x), fnp.array(y))
    np.testing.assert_allclose(np.asarray(ga), y ** 2, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(gb), 2 * x * y, rtol=1e-6)
    gb_neg = fg.grad(f, argnums=-1)(fnp.array(x), fnp.array(y))
    np.testing.assert_allclose(np.asarray(gb_neg), 2 * x * y, rtol=1e-6)
    ga_np = fg.grad(f, argnums=np.int64(0))(fnp.array(x), fnp.array(y))
    np.testing.assert_allclose(np.asarray(ga_np), y ** 2, rtol=1e-6)
    jb = fg.jacrev(lambda a, b: a * b, argnums=[1])(fnp.array(x), fnp.array(y))[0]
    np.testing.assert_allclose(np.asarray(jb), np.diag(x), rtol=1e-6)


def test_core_jit_static_valid_neighbours_are_right():
    def power(x, n=2):
        return x ** n

    x = np.array([0.5, 1.5, -2.0])
    by_position = fg.jit(power, static_argnums=1)
    np.testing.assert_allclose(np.asarray(by_position(fnp.array(x), 3)), x ** 3, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(by_position(fnp.array(x), n=4)), x ** 4, rtol=1e-6)   # by keyword
    np.testing.assert_allclose(np.asarray(by_position(fnp.array(x))), x ** 2, rtol=1e-6)        # the default
    by_name = fg.jit(power, static_argnames="n", cache_size=1)
    np.testing.assert_allclose(np.asarray(by_name(fnp.array(x), n=3)), x ** 3, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fg.jit(_var_args, static_argnums=1)(fnp.array(x), "tag")), x)
    ir = str(fg.make_jaxpr(lambda v, n: v * n, static_argnums=-1)(fnp.array(x), 7))   # n is a constant of the IR
    assert "mul" in ir and "7" in ir and "f32[3]" in ir, ir


def test_core_matching_tangents_are_accepted_and_right():
    x = np.array([0.3, -1.2, 2.0])
    _, t = fg.jvp(fnp.sin, (fnp.array(x),), (fnp.array([1.0, 2.0, -1.0]),))
    np.testing.assert_allclose(np.asarray(t), np.cos(x) * [1.0, 2.0, -1.0], rtol=1e-6)
    _, t0 = fg.jvp(fnp.sin, (fnp.asarray(0.5),), (2.0,))   # a Python float takes the primal's dtype
    assert t0.dtype == np.float32
    np.testing.assert_allclose(float(t0), 2.0 * np.cos(0.5), rtol=1e-6)
    _, pullback = fg.vjp(fnp.sin, fnp.array(x))
    (ct,) = pullback(np.array([1.0, 1.0, 2.0]))   # numpy float64 is stored as float32 without x64
    np.testing.assert_allclose(np.asarray(ct), np.cos(x) * [1.0, 1.0, 2.0], rtol=1e-6)
    _, ti = fg.jvp(lambda i: i * 3, (_i32(1, 2),), (_i32(1, 1),))   # int primal, int tangent: as before
    np.testing.assert_array_equal(np.asarray(ti), [3, 3])


def test_core_custom_vjp_valid_cotangents_are_used():
    grad_of = _scale_with_bwd(lambda r, g: (g * 3.0,))   # deliberately not 2: the rule's own value must come out
    np.testing.assert_allclose(np.asarray(grad_of(f32(3))), np.full(3, 3.0))
    scalar = _scale_with_bwd(lambda r, g: (1.5,))   # a Python float for a 0-d input
    np.testing.assert_allclose(float(scalar(fnp.asarray(2.0))), 1.5)
    zero = _scale_with_bwd(lambda r, g: (None,))
    np.testing.assert_array_equal(np.asarray(zero(f32(2))), np.zeros(2))


def test_core_valid_outputs_of_grad_and_checkpoint():
    x = np.array([0.3, -1.2, 2.0])
    (loss, aux), g = fg.value_and_grad(lambda v: (fnp.sum(v ** 2), v * 2.0), has_aux=True)(fnp.array(x))
    np.testing.assert_allclose(np.asarray(g), 2 * x, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(aux), 2 * x, rtol=1e-6)
    f = lambda v: fnp.sum(fnp.sin(v) ** 2)
    g_ckpt = fg.grad(lambda v: fg.checkpoint(f)(v))(fnp.array(x))
    np.testing.assert_allclose(np.asarray(g_ckpt), 2 * np.sin(x) * np.cos(x), rtol=1e-5)
    const = fg.checkpoint(lambda v: (fnp.sum(v), 3.0))(fnp.array(x))   # a Python number becomes an array
    assert float(const[1]) == 3.0


def test_core_integers_in_range_are_exact():
    big = 2 ** 31 - 1
    np.testing.assert_array_equal(np.asarray(fnp.array([big, -big - 1])), [big, -big - 1])
    np.testing.assert_array_equal(np.asarray(fnp.asarray(np.array([5, -7], np.int64))), [5, -7])
    i = _i32(1, 2, 3)
    expected = np.array([1, 2, 3], np.int64) * 2 + (2 ** 30)
    np.testing.assert_array_equal(np.asarray(i * 2 + 2 ** 30), expected)
    np.testing.assert_array_equal(np.asarray(fg.jit(lambda v: v * 2 + 2 ** 30)(i)), expected)
    np.testing.assert_allclose(np.asarray(f32(2) + 2 ** 40), np.full(2, 1.0 + 2 ** 40), rtol=1e-7)


def test_core_bool_operators_match_numpy():
    a, b = np.array([0.5, -1.0, 2.0, 0.0]), np.array([1.0, 1.0, -3.0, 0.0])
    xa, xb = fnp.array(a), fnp.array(b)
    for got, want in [((xa > 0) & (xb > 0), (a > 0) & (b > 0)), ((xa > 0) | (xb > 0), (a > 0) | (b > 0)),
                      ((xa > 0) ^ (xb > 0), (a > 0) ^ (b > 0)), (~(xa > 0), ~(a > 0)),
                      ((xa > 0) & True, (a > 0) & True), (np.array([True, False, True, True]) & (xb > 0),
                                                          np.array([True, False, True, True]) & (b > 0)),
                      (fg.jit(lambda u, v: (u > 0) & ~(v > 0))(xa, xb), (a > 0) & ~(b > 0))]:
        np.testing.assert_array_equal(np.asarray(got), want)


def test_core_nonempty_reductions_still_work():
    x = np.arange(6.0).reshape(3, 2) - 2.5
    for fn, ref in [(fnp.max, np.max), (fnp.min, np.min), (fnp.argmax, np.argmax), (fnp.argmin, np.argmin)]:
        np.testing.assert_array_equal(np.asarray(fn(fnp.array(x), axis=0)), ref(x, axis=0))
        np.testing.assert_array_equal(np.asarray(fg.jit(lambda v: fn(v, axis=1))(fnp.array(x))), ref(x, axis=1))
    # Reducing a non-empty axis of an array with a zero-size axis elsewhere is fine (numpy agrees).
    e = np.ones((0, 3), np.float32)
    assert np.asarray(fnp.max(fnp.array(e), axis=1)).shape == np.max(e, axis=1).shape == (0,)
    assert np.asarray(fg.jit(lambda v: fnp.max(v, axis=1))(fnp.array(e))).shape == (0,)
    np.testing.assert_array_equal(np.asarray(fg.jit(lambda v: fnp.sum(v, axis=0))(fnp.array(e))), np.zeros(3))


def test_core_right_length_masks_match_numpy():
    x = np.arange(12.0).reshape(3, 4)
    rows, cols = np.array([True, False, True]), np.array([False, True, True, False])
    np.testing.assert_array_equal(np.asarray(fnp.array(x)[rows]), x[rows])
    np.testing.assert_array_equal(np.asarray(fnp.array(x)[..., cols]), x[..., cols])
    np.testing.assert_array_equal(np.asarray(fnp.array(x)[x > 4]), x[x > 4])
    expected = x.copy()
    expected[rows] = -1.0
    np.testing.assert_array_equal(np.asarray(fnp.array(x).at[fnp.array(rows)].set(-1.0)), expected)
    g = fg.grad(lambda v: fnp.sum(v[:, cols] ** 2))(fnp.array(x))
    np.testing.assert_allclose(np.asarray(g), np.where(cols, 2 * x, 0.0))


def test_core_check_grads_uses_the_computed_dtype(x32):
    from funcgrad.testing import check_grads

    # float64 numpy inputs are computed in float32 here: the float32 tolerances apply.
    check_grads(fnp.sin, (np.array([0.3, 1.2, 2.0]),), order=2)
    check_grads(lambda a, b: fnp.sum(fnp.tanh(a) * b), (np.array([0.3, -1.2]), np.array([[0.5, 2.0]])), order=1)

    @fg.custom_vjp
    def wrong_sin(x):
        return fnp.sin(x)

    wrong_sin.defvjp(lambda x: (fnp.sin(x), x), lambda x, g: (g * fnp.sin(x),))   # should be cos
    with pytest.raises(AssertionError, match="vjp"):
        check_grads(wrong_sin, (np.array([0.3, 1.2, 2.0]),), modes=("rev",), order=1)


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
    np.testing.assert_array_equal(np.asarray(random.key(2 ** 64 - 1)), [0xFFFFFFFF, 0xFFFFFFFF])
    np.testing.assert_array_equal(np.asarray(random.key(-2 ** 63)), [0x80000000, 0])


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case):
    check_raises(case)


def test_case_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


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
    key = random.key(0)
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
        tree = checkpoint.load(path)
    assert sorted(tree, key=str) == [3, "a"] and tree["a"] == 7 and type(tree["a"]) is int
    assert tree[3]._fields == ("x", "y") and tree[3].y is None
    np.testing.assert_array_equal(np.asarray(tree[3].x), value)


def test_datasets_valid_neighbours():
    data = datasets.idx_bytes(np.arange(6, dtype=np.int16).reshape(2, 3))
    for form in (data, bytearray(data), memoryview(data)):
        np.testing.assert_array_equal(datasets.parse_idx(form), np.arange(6).reshape(2, 3))
