"""Property-based tests of the elementwise functions: unary, binary (broadcasting, mixed dtypes, weak
Python scalars) and ``where``, each against numpy in float64, under jit and under vmap, and the smooth ones
differentiated against central differences (see ``test_properties.py`` for the method; the shared
checks are in ``property_checks.py``).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import funcgrad.numpy as fnp
from funcgrad.testing import check_grads
from conftest import config_set
from property_checks import (ANY, F32, F64, I32, BOOL, SHAPES, Domain, _examples, _names, arrays, batch_for,
                             check_transforms, dtypes_for)


# ----------------------------------------------------------------------------
# Elementwise unary
# ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Unary:
    fn: Callable
    ref: Callable
    kinds: str = "fib"
    domain: Domain = ANY
    smooth: bool = True       # differentiable on the domain: checked against finite differences


POSITIVE = Domain(0.125, 100.0)
UNIT = Domain(-0.875, 0.875)
UNARY = {
    "sin": Unary(fnp.sin, np.sin), "cos": Unary(fnp.cos, np.cos), "tanh": Unary(fnp.tanh, np.tanh),
    "exp": Unary(fnp.exp, np.exp, domain=Domain(-20.0, 20.0)),
    "exp2": Unary(fnp.exp2, np.exp2, domain=Domain(-20.0, 20.0)),
    "expm1": Unary(fnp.expm1, np.expm1),
    "log": Unary(fnp.log, np.log, "fi", POSITIVE), "log2": Unary(fnp.log2, np.log2, "fi", POSITIVE),
    "log1p": Unary(fnp.log1p, np.log1p, "fib", Domain(-0.875, 10.0)),
    "sqrt": Unary(fnp.sqrt, np.sqrt, "fib", Domain(0.0, 100.0), smooth=False),
    "sqrt>0": Unary(fnp.sqrt, np.sqrt, "fi", POSITIVE),
    "tan": Unary(fnp.tan, np.tan, "fib", Domain(-1.25, 1.25)),
    "arcsin": Unary(fnp.arcsin, np.arcsin, "fi", UNIT), "arccos": Unary(fnp.arccos, np.arccos, "fi", UNIT),
    "arctan": Unary(fnp.arctan, np.arctan), "sinh": Unary(fnp.sinh, np.sinh, domain=Domain(-5.0, 5.0)),
    "cosh": Unary(fnp.cosh, np.cosh, domain=Domain(-5.0, 5.0)),
    "abs": Unary(fnp.abs, np.abs, "fi", smooth=False), "abs!=0": Unary(fnp.abs, np.abs, "f", Domain(gap=0.5)),
    "negative": Unary(fnp.negative, np.negative, "fi"), "square": Unary(fnp.square, np.square, "fi"),
    # Of ints: a float, as 1 / x (numpy's integer reciprocal truncates).
    "reciprocal": Unary(fnp.reciprocal, lambda v: np.divide(1.0, v), "fi", Domain(gap=0.5)),
    "sign": Unary(fnp.sign, np.sign, "fi", smooth=False),
    "floor": Unary(fnp.floor, np.floor, "f", smooth=False), "ceil": Unary(fnp.ceil, np.ceil, "f", smooth=False),
    "round": Unary(fnp.round, np.round, "f", smooth=False),
    "isfinite": Unary(fnp.isfinite, np.isfinite, smooth=False),
    "logical_not": Unary(fnp.logical_not, np.logical_not, smooth=False),
}


@pytest.mark.parametrize("name", _names(UNARY))
@given(x64=st.booleans(), data=st.data())
@_examples(8)
def test_unary_matches_numpy_jit_and_vmap(name, x64, data):
    op = UNARY[name]
    x = data.draw(arrays(data.draw(st.sampled_from(dtypes_for(op.kinds))), data.draw(SHAPES), op.domain))
    check_transforms(op.fn, op.ref, [x], x64, data.draw(batch_for([x], [op.domain])))


@pytest.mark.parametrize("name", _names(UNARY, smooth_only=True))
@given(data=st.data())
@_examples(4)
def test_unary_gradients_match_finite_differences(name, data):
    op = UNARY[name]
    x = data.draw(arrays(F64, data.draw(SHAPES), op.domain))
    with config_set("enable_x64", True):
        check_grads(op.fn, (x,), order=1)


# ----------------------------------------------------------------------------
# Elementwise binary, with broadcasting and weak Python scalars
# ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Binary:
    fn: Callable
    ref: Callable
    kinds: str = "fib"
    domains: tuple = (ANY, ANY)
    smooth: bool = False


NONZERO = Domain(gap=0.5)
BINARY = {
    "add": Binary(fnp.add, np.add, smooth=True), "subtract": Binary(fnp.subtract, np.subtract, "fi", smooth=True),
    "multiply": Binary(fnp.multiply, np.multiply, smooth=True),
    "divide": Binary(fnp.divide, np.divide, "fib", (ANY, NONZERO), smooth=True),
    "floor_divide": Binary(fnp.floor_divide, np.floor_divide, "fi", (ANY, NONZERO)),
    "mod": Binary(fnp.mod, np.mod, "fi", (ANY, NONZERO)),
    "power": Binary(fnp.power, np.power, "f", (Domain(0.25, 4.0), Domain(-3.0, 3.0)), smooth=True),
    "power_int": Binary(fnp.power, np.power, "i", (Domain(-4.0, 4.0), Domain(0.0, 4.0))),
    "maximum": Binary(fnp.maximum, np.maximum), "minimum": Binary(fnp.minimum, np.minimum),
    "arctan2": Binary(fnp.arctan2, np.arctan2, "fi", (NONZERO, NONZERO), smooth=True),
    "equal": Binary(fnp.equal, np.equal), "not_equal": Binary(fnp.not_equal, np.not_equal),
    "less": Binary(fnp.less, np.less), "less_equal": Binary(fnp.less_equal, np.less_equal),
    "greater": Binary(fnp.greater, np.greater), "greater_equal": Binary(fnp.greater_equal, np.greater_equal),
    "logical_and": Binary(fnp.logical_and, np.logical_and), "logical_or": Binary(fnp.logical_or, np.logical_or),
    "logical_xor": Binary(fnp.logical_xor, np.logical_xor),
}


def _python_scalar(draw, dtype: np.dtype, domain: Domain) -> Any:
    """A weak Python scalar of ``dtype``'s kind."""
    value = draw(domain.elements(dtype))
    return {"f": float, "i": int, "b": bool}[dtype.kind](value)


@st.composite
def binary_args(draw, op: Binary, smooth_only: bool = False) -> list:
    """[x, y]: broadcast-compatible shapes, each side any accepted dtype (float64 for
    gradients), at most one side a Python scalar."""
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=3))
    scalar_side = None if smooth_only else draw(st.sampled_from([None, None, 0, 1]))
    args = []
    for side, (shape, dom) in enumerate(zip(shapes.input_shapes, op.domains)):
        dtype = F64 if smooth_only else draw(st.sampled_from(dtypes_for(op.kinds)))
        args.append(_python_scalar(draw, dtype, dom) if side == scalar_side else draw(arrays(dtype, shape, dom)))
    return args


@pytest.mark.parametrize("name", _names(BINARY))
@given(x64=st.booleans(), data=st.data())
@_examples(10)
def test_binary_matches_numpy_jit_and_vmap(name, x64, data):
    op = BINARY[name]
    args = data.draw(binary_args(op))
    check_transforms(op.fn, op.ref, args, x64, data.draw(batch_for(args, list(op.domains))))


@pytest.mark.parametrize("name", _names(BINARY, smooth_only=True))
@given(data=st.data())
@_examples(6)
def test_binary_gradients_unbroadcast_correctly(name, data):
    args = data.draw(binary_args(BINARY[name], smooth_only=True))
    with config_set("enable_x64", True):
        check_grads(BINARY[name].fn, tuple(args), order=1)


@st.composite
def where_cases(draw):
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=4, min_side=0, max_side=3))
    cond_dtype, x_dtype, y_dtype = (draw(st.sampled_from([F32, F64, I32, BOOL])) for _ in range(3))
    cond, x, y = (draw(arrays(d, s)) for d, s in zip((cond_dtype, x_dtype, y_dtype), shapes.input_shapes))
    if draw(st.booleans()):
        y = _python_scalar(draw, y_dtype, ANY)
    return [cond, x, y]


@given(args=where_cases(), x64=st.booleans(), data=st.data())
@_examples(40)
def test_where_matches_numpy_jit_and_vmap(args, x64, data):
    batch = data.draw(batch_for(args, [ANY] * 3))
    check_transforms(fnp.where, np.where, args, x64, batch)
