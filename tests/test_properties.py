"""Property-based tests (Hypothesis): random shapes, dtypes and broadcasting.

Four families -- elementwise unary, elementwise binary (broadcasting, mixed
dtypes, weak Python scalars), reductions (random axes, negative axes,
keepdims) and shape/indexing ops -- are each checked three ways per example:

* against numpy evaluated in float64, to a tolerance set by the dtype
  funcgrad computes in (float32 unless the example enables x64), with the
  result dtype numpy gives, canonicalised as funcgrad documents it;
* ``jit(f)(x)`` against ``f(x)``: same dtype and shape, values within a few ulps;
* ``vmap(f, in_axes)(xs)`` against stacking ``f`` over the slices of ``xs``.

Smooth members are differentiated too (``check_grads``: forward and reverse
mode against central differences, in float64).

The generic jit checks run unfused (a fresh shape would otherwise compile a
numba kernel per example); ``test_fused_chains_match_numpy`` covers fusion
over a few shapes.  Examples are derandomized: the ``funcgrad`` profile in
conftest.py; ``FUNCGRAD_HYPOTHESIS_PROFILE=thorough`` runs many more.

The families are in ``test_properties_elementwise.py`` (unary, binary, where),
``test_properties_reductions.py`` and ``test_properties_shapes.py``; what they share
(strategies, references, ``check_transforms``) in ``property_checks.py``.  This file keeps
the cases Hypothesis found, as plain examples, and the fused-kernel checks.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.testing import check_grads
from conftest import config_set
from property_checks import (F32, I32, Domain, _examples, _same, _to_fg, arrays, assert_matches, check_transforms,
                             reference)


# ----------------------------------------------------------------------------
# Cases Hypothesis found, kept as plain examples (funcgrad bugs, fixed, and
# semantics the references encode)
# ----------------------------------------------------------------------------

REGRESSIONS = {
    # A 0-d array or axis=() reduces nothing, yet the result has the reduction's dtype.
    "sum of a 0-d bool is the default int": (fnp.sum, np.sum, [np.array(True)], False),
    "prod over axis=() is int64 under x64": (lambda v: fnp.prod(v, axis=(), keepdims=True),
                                             lambda v: np.prod(v, axis=(), keepdims=True),
                                             [np.ones(2, np.int32)], True),
    "arctan of a bool is the default float (numpy: float16)": (fnp.arctan, np.arctan, [np.array(True)], False),
    "floor_divide rounds toward -inf": (fnp.floor_divide, np.floor_divide, [np.array([-7, 7], np.int32), -2],
                                        False),
    "mod takes the divisor's sign": (fnp.mod, np.mod, [np.array([-7.5, 7.5], np.float32),
                                                       np.array([2.0, -2.0], np.float32)], False),
    "argmax returns the first of tied maxima": (lambda v: fnp.argmax(v, axis=-1), lambda v: np.argmax(v, axis=-1),
                                                [np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 1.0]], np.float32)], False),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regressions(name):
    fg_fn, np_fn, args, x64 = REGRESSIONS[name]
    check_transforms(fg_fn, np_fn, args, x64, None)


@pytest.mark.parametrize("indices", [np.zeros(0, np.int32), np.array([1, 1, -2], np.int32)], ids=["none", "repeated"])
def test_take_gradient_scatter_adds(indices, x64):
    # No indices: the gradient's scatter-add of zero rows used to fail on a reshape.
    check_grads(lambda v: fnp.take(v, indices, axis=0), (np.array([[1.0, 2.0], [3.0, 4.0]]),), order=1)


# ----------------------------------------------------------------------------
# Fused kernels (few distinct shapes: each new kernel is a numba compile)
# ----------------------------------------------------------------------------

FUSED = {   # name: (funcgrad, numpy, dtype of x); y is float32
    "tanh(x) * y + 1": (lambda x, y: fnp.tanh(x) * y + 1.0, lambda x, y: np.tanh(x) * y + 1.0, F32),
    "where(x > y, sin(x), y)": (lambda x, y: fnp.where(x > y, fnp.sin(x), y),
                                lambda x, y: np.where(x > y, np.sin(x), y), F32),
    "sum(exp(x) * y, -1)": (lambda x, y: fnp.sum(fnp.exp(x) * y, axis=-1),
                            lambda x, y: np.sum(np.exp(x) * y, axis=-1), F32),
    # Logical ops of floats (zeros are frequent examples): once fused as Python's and/or/!= on the values.
    "logical ops of floats": (
        lambda x, y: fnp.where(fnp.logical_xor(x, y), x, fnp.logical_and(x, y) * 1.0 + fnp.logical_or(x, y) * 2.0),
        lambda x, y: np.where(np.logical_xor(x, y), x, np.logical_and(x, y) * 1.0 + np.logical_or(x, y) * 2.0),
        F32),
    # Weak scalars of a higher kind than the array: once fused as i32 * 2, bool * 1, i32 < 1.
    "i32 * 2.5 + (y > 0) * 3.0": (lambda i, y: (i * 2.5 + (y > 0) * 3.0) * fnp.where(i < 1.5, y, 0.5),
                                  lambda i, y: (i * 2.5 + (y > 0) * 3.0) * np.where(i < 1.5, y, 0.5), I32),
}
# A row broadcast and a mixed broadcast: at most 10 kernels (a few seconds of numba on a cold cache).
FUSED_SHAPES = [((2, 3), (3,)), ((4, 1), (1, 5))]


@given(name=st.sampled_from(sorted(FUSED)), shapes=st.sampled_from(FUSED_SHAPES), data=st.data())
@_examples(20)
def test_fused_chains_match_numpy(name, shapes, data):
    fg_fn, np_fn, x_dtype = FUSED[name]
    x, y = (data.draw(arrays(d, s, Domain(-5.0, 5.0))) for d, s in zip((x_dtype, F32), shapes))
    with config_set("enable_x64", False), config_set("jit_fusion", True):
        out = fg.jit(fg_fn)(x, y)
        ref = reference(np_fn, [x, y])
        scale = 1.0 + float(np.sum(np.abs(ref)))
        assert_matches(out, ref, F32, f"jit({name}) fused vs numpy", scale=scale)
        _same(out, fg_fn(*_to_fg([x, y])), f"jit({name}) fused vs eager", scale=scale)


@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_chains_fixed_values(name):
    # Every chain at least once, with zeros and both signs (same kernels as above: no extra compile).
    fg_fn, np_fn, x_dtype = FUSED[name]
    x = np.array([[0, 1.5, -2], [3, 0, -0.5]]).astype(x_dtype)
    y = np.array([0.0, 2.0, -1.0], np.float32)
    with config_set("enable_x64", False), config_set("jit_fusion", True):
        ref = reference(np_fn, [x, y])
        scale = 1.0 + float(np.sum(np.abs(ref)))
        assert_matches(fg.jit(fg_fn)(x, y), ref, F32, f"jit({name}) fused vs numpy", scale=scale)
