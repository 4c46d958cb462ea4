"""Property-based tests of the shape and indexing functions (reshape, transpose, expand_dims, squeeze,
swaps/moves/flips, broadcast_to, basic and integer indexing, take, tile/repeat, concatenate/stack): against
numpy, under jit and under vmap, and differentiated against central differences (see
``test_properties.py`` for the method; the shared checks are in ``property_checks.py``).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import funcgrad.numpy as fnp
from funcgrad.testing import check_grads
from conftest import config_set
from property_checks import (ANY, F32, F64, I32, BOOL, SHAPES, _examples, _random_axis_form, arrays, batch_for,
                             check_transforms)


# ----------------------------------------------------------------------------
# Shape and indexing
# ----------------------------------------------------------------------------


def _factorisations(n: int, max_dims: int) -> list[tuple]:
    """Every shape of up to ``max_dims`` dims with ``n`` elements (sides > 1, plus a few 1s and 0s)."""
    if n == 0:
        return [(0,), (3, 0), (0, 2, 1)]
    out = [()] if n == 1 else []
    def grow(rest: int, prefix: tuple):
        if rest == 1:
            out.append(prefix)
            return
        if len(prefix) < max_dims:
            for d in range(2, rest + 1):
                if rest % d == 0:
                    grow(rest // d, prefix + (d,))
    grow(n, ())
    return out + [s + (1,) for s in out if len(s) < max_dims]


@st.composite
def reshape_op(draw, x):
    new = list(draw(st.sampled_from(_factorisations(x.size, 4))))
    if new and x.size and draw(st.booleans()):
        new[draw(st.integers(0, len(new) - 1))] = -1
    new = tuple(new)
    return lambda v: fnp.reshape(v, new), lambda v: np.reshape(v, new)


@st.composite
def transpose_op(draw, x):
    if draw(st.integers(0, 3)) == 0:
        return fnp.transpose, np.transpose
    perm = tuple(_random_axis_form(draw, a, x.ndim) for a in draw(st.permutations(range(x.ndim))))
    return lambda v: fnp.transpose(v, perm), lambda v: np.transpose(v, perm)


@st.composite
def expand_dims_op(draw, x):
    n = x.ndim + draw(st.integers(1, 2))
    axes = draw(st.lists(st.integers(0, n - 1), min_size=n - x.ndim, max_size=n - x.ndim, unique=True))
    axes = tuple(_random_axis_form(draw, a, n) for a in axes)
    axis = axes[0] if len(axes) == 1 else axes
    return lambda v: fnp.expand_dims(v, axis), lambda v: np.expand_dims(v, axis)


@st.composite
def squeeze_op(draw, x):
    ones = [i for i, s in enumerate(x.shape) if s == 1]
    if not ones or draw(st.booleans()):
        return fnp.squeeze, np.squeeze
    axes = tuple(_random_axis_form(draw, a, x.ndim) for a in draw(st.lists(st.sampled_from(ones), min_size=1,
                                                                            unique=True)))
    return lambda v: fnp.squeeze(v, axes), lambda v: np.squeeze(v, axes)


@st.composite
def swap_move_flip_op(draw, x):
    if x.ndim == 0:
        return lambda v: fnp.flip(v), lambda v: np.flip(v)
    a, b = (_random_axis_form(draw, draw(st.integers(0, x.ndim - 1)), x.ndim) for _ in range(2))
    kind = draw(st.sampled_from(["swapaxes", "moveaxis", "flip"]))
    if kind == "flip":
        return lambda v: fnp.flip(v, a), lambda v: np.flip(v, a)
    return lambda v: getattr(fnp, kind)(v, a, b), lambda v: getattr(np, kind)(v, a, b)


@st.composite
def broadcast_to_op(draw, x):
    lead = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    target = lead + tuple(draw(st.integers(0, 3)) if s == 1 else s for s in x.shape)
    return lambda v: fnp.broadcast_to(v, target), lambda v: np.broadcast_to(v, target)


@st.composite
def basic_index_op(draw, x):
    index = draw(hnp.basic_indices(x.shape, allow_newaxis=True, allow_ellipsis=True))
    return lambda v: v[index], lambda v: v[index]


@st.composite
def integer_index_op(draw, x):
    if x.ndim == 0 or 0 in x.shape:
        return lambda v: v[..., None], lambda v: v[..., None]
    index = draw(hnp.integer_array_indices(x.shape, result_shape=hnp.array_shapes(min_dims=0, max_dims=2,
                                                                                  max_side=3)))
    return lambda v: v[index], lambda v: v[index]


@st.composite
def take_op(draw, x):
    axis = None if x.ndim == 0 or draw(st.booleans()) else draw(st.integers(-x.ndim, x.ndim - 1))
    n = x.size if axis is None else x.shape[axis]
    ishape = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3)) if n else (0,)
    indices = draw(hnp.arrays(np.int32, ishape, elements=st.integers(-n, n - 1))) if n else np.zeros(0, np.int32)
    return lambda v: fnp.take(v, indices, axis=axis), lambda v: np.take(v, indices, axis=axis)


@st.composite
def tile_repeat_op(draw, x):
    if draw(st.booleans()):
        reps = tuple(draw(st.lists(st.integers(0, 2), min_size=1, max_size=3)))
        return lambda v: fnp.tile(v, reps), lambda v: np.tile(v, reps)
    repeats = draw(st.integers(0, 2))
    axis = None if x.ndim == 0 or draw(st.booleans()) else draw(st.integers(-x.ndim, x.ndim - 1))
    return lambda v: fnp.repeat(v, repeats, axis=axis), lambda v: np.repeat(v, repeats, axis=axis)


SHAPE_OPS = {"reshape": reshape_op, "transpose": transpose_op, "expand_dims": expand_dims_op,
             "squeeze": squeeze_op, "swap/move/flip": swap_move_flip_op, "broadcast_to": broadcast_to_op,
             "basic_index": basic_index_op, "integer_index": integer_index_op, "take": take_op,
             "tile/repeat": tile_repeat_op}


@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
@given(x64=st.booleans(), data=st.data())
@_examples(15)
def test_shape_ops_match_numpy_jit_and_vmap(name, x64, data):
    x = data.draw(arrays(data.draw(st.sampled_from([F32, F64, I32, BOOL])), data.draw(SHAPES)))
    fg_fn, np_fn = data.draw(SHAPE_OPS[name](x))
    check_transforms(fg_fn, np_fn, [x], x64, data.draw(batch_for([x], [ANY])), ulps=0)


@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
@given(data=st.data())
@_examples(8)
def test_shape_op_gradients_match_finite_differences(name, data):
    # Linear maps: a wrong transpose rule (permutation, scatter-add of repeated indices,
    # broadcast sum) shows as a mismatch of <u, J v> and <J^T u, v>.  Non-empty arrays of
    # 1-4 dims: 0-d and empty ones have nothing to get wrong here.
    x = data.draw(arrays(F64, data.draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=3))))
    fg_fn, _ = data.draw(SHAPE_OPS[name](x))
    with config_set("enable_x64", True):
        check_grads(fg_fn, (x,), order=1)


@st.composite
def join_cases(draw):
    """concatenate / stack: 1-3 arrays, mixed dtypes, along a random (maybe negative) axis."""
    stack = draw(st.booleans())
    base = list(draw(hnp.array_shapes(min_dims=0 if stack else 1, max_dims=3, min_side=0, max_side=3)))
    k = draw(st.integers(1, 3))
    if stack:
        axis = _random_axis_form(draw, draw(st.integers(0, len(base))), len(base) + 1)
        shapes = [tuple(base)] * k
    else:
        axis = _random_axis_form(draw, draw(st.integers(0, len(base) - 1)), len(base))
        shapes = [tuple(base[:axis] + [draw(st.integers(0, 3))] + base[axis + 1:]) if axis >= 0 else
                  tuple(base[:len(base) + axis] + [draw(st.integers(0, 3))] + base[len(base) + axis + 1:])
                  for _ in range(k)]
    xs = [draw(arrays(draw(st.sampled_from([F32, F64, I32, BOOL])), s)) for s in shapes]
    fg_join, np_join = (fnp.stack, np.stack) if stack else (fnp.concatenate, np.concatenate)
    return xs, (lambda *vs: fg_join(list(vs), axis=axis)), (lambda *vs: np_join(list(vs), axis=axis))


@given(case=join_cases(), x64=st.booleans(), data=st.data())
@_examples(50)
def test_concatenate_and_stack_match_numpy_jit_and_vmap(case, x64, data):
    xs, fg_fn, np_fn = case
    check_transforms(fg_fn, np_fn, xs, x64, data.draw(batch_for(xs, [ANY] * len(xs))), ulps=0)
