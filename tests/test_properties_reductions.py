"""Property-based tests of the reductions (random axes, negative axes, keepdims): against numpy in float64,
under jit and under vmap, and the smooth ones differentiated against central differences (see
``test_properties.py`` for the method; the shared checks are in ``property_checks.py``).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.testing import check_grads
from conftest import config_set
from property_checks import (ANY, F64, I32, Domain, _examples, _names, _random_axis_form, arrays, batch_for,
                             check_transforms, dtypes_for)


# ----------------------------------------------------------------------------
# Reductions
# ----------------------------------------------------------------------------


def _logsumexp(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


@dataclasses.dataclass(frozen=True)
class Reduction:
    fn: Callable
    ref: Callable
    kinds: str = "fib"
    domain: Domain = ANY
    single_axis: bool = False    # axis: an int or None, not a tuple
    nonempty: bool = False       # raises ValueError over zero elements (no identity)
    smooth: bool = True


REDUCTIONS = {
    "sum": Reduction(fnp.sum, np.sum), "mean": Reduction(fnp.mean, np.mean, nonempty=True),
    "var": Reduction(fnp.var, np.var, "f", nonempty=True),
    "prod": Reduction(fnp.prod, np.prod, "fi", Domain(-1.5, 1.5)),
    "max": Reduction(fnp.max, np.max, nonempty=True), "min": Reduction(fnp.min, np.min, nonempty=True),
    "logsumexp": Reduction(fnp.logsumexp, _logsumexp, "f", nonempty=True),
    "argmax": Reduction(fnp.argmax, np.argmax, single_axis=True, nonempty=True, smooth=False),
    "argmin": Reduction(fnp.argmin, np.argmin, single_axis=True, nonempty=True, smooth=False),
}


@st.composite
def axis_args(draw, ndim: int, single: bool):
    """``axis`` (None, an int or a tuple of distinct axes, each maybe negative) and ``keepdims``."""
    keepdims = draw(st.booleans())
    if ndim == 0 or draw(st.integers(0, 3)) == 0:
        return None, keepdims
    if single or draw(st.booleans()):
        return _random_axis_form(draw, draw(st.integers(0, ndim - 1)), ndim), keepdims
    axes = draw(st.lists(st.integers(0, ndim - 1), min_size=0, max_size=ndim, unique=True))
    return tuple(_random_axis_form(draw, a, ndim) for a in axes), keepdims


def _reduced_count(shape: tuple, axis: Any) -> int:
    if axis is None:
        return math.prod(shape)
    axes = (axis,) if isinstance(axis, int) else axis
    return math.prod(shape[a] for a in axes)


@st.composite
def reduction_args(draw, name: str, smooth_only: bool = False):
    """(x, axis, keepdims); for gradients float64 with no zero-size reduction."""
    op = REDUCTIONS[name]
    dtype = F64 if smooth_only else draw(st.sampled_from(dtypes_for(op.kinds)))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=1 if smooth_only else 0, max_side=3))
    if smooth_only and name in ("max", "min"):
        # Ties split the gradient evenly while differences see one side: distinct values, spaced
        # well beyond the difference step.
        x = draw(arrays(I32, shape, Domain(-50.0, 50.0), unique=True)).astype(F64) * 0.25
    else:
        x = draw(arrays(dtype, shape, op.domain))
    axis, keepdims = draw(axis_args(x.ndim, op.single_axis))
    return x, axis, keepdims


@pytest.mark.parametrize("name", _names(REDUCTIONS))
@given(x64=st.booleans(), data=st.data())
@_examples(12)
def test_reductions_match_numpy_jit_and_vmap(name, x64, data):
    x, axis, keepdims = data.draw(reduction_args(name))
    op = REDUCTIONS[name]
    fg_fn = lambda v: op.fn(v, axis=axis, keepdims=keepdims)   # noqa: E731
    np_fn = lambda v: op.ref(v, axis=axis, keepdims=keepdims)  # noqa: E731
    if op.nonempty and _reduced_count(x.shape, axis) == 0:
        # Over zero elements: numpy's ValueError for max-like reductions (mean and var: NaN in numpy,
        # not compared here); eager and jit alike.
        if name in ("max", "min", "argmax", "argmin"):
            with config_set("enable_x64", x64):
                for f in (fg_fn, fg.jit(fg_fn)):
                    with pytest.raises(ValueError):
                        f(x)
        return
    # Sums may be reassociated: absolute tolerance on the scale of sum(|x|).
    scale = 1.0 + float(np.sum(np.abs(x.astype(F64))))
    check_transforms(fg_fn, np_fn, [x], x64, data.draw(batch_for([x], [op.domain])), scale=scale)


@pytest.mark.parametrize("name", _names(REDUCTIONS, smooth_only=True))
@given(data=st.data())
@_examples(6)
def test_reduction_gradients_match_finite_differences(name, data):
    x, axis, keepdims = data.draw(reduction_args(name, smooth_only=True))
    with config_set("enable_x64", True):
        check_grads(lambda v: REDUCTIONS[name].fn(v, axis=axis, keepdims=keepdims), (x,), order=1)
