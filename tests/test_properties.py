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
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.testing import check_grads
from conftest import config_set

F32, F64, I32, BOOL = (np.dtype(t) for t in ("float32", "float64", "int32", "bool"))

# Small shapes: 0-d, size-0 and size-1 sides, up to 4 dims (at most 81 elements).
SHAPES = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=3)


def _examples(n: int) -> settings:
    """``n`` examples under the default profile, scaled up by the ``thorough`` one."""
    return settings(max_examples=max(1, n * settings.default.max_examples // 30))


# ----------------------------------------------------------------------------
# Values
# ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Domain:
    """Where an argument's values lie: ``lo <= x <= hi`` and ``|x| >= gap``.

    Float values are exactly representable in float32 (``width=32``), so a
    float64 input narrowed without x64 keeps its value, and so do weak
    Python float scalars.
    """

    lo: float = -10.0
    hi: float = 10.0
    gap: float = 0.0

    def _intervals(self, lo: float, hi: float, gap: float) -> list[tuple]:
        """[lo, hi] without the open interval (-gap, gap)."""
        if gap <= 0:
            return [(lo, hi)]
        parts = [(max(lo, gap), hi), (lo, min(hi, -gap))]
        return [(a, b) for a, b in parts if a <= b]

    def floats(self, width: int = 32) -> st.SearchStrategy:
        return st.one_of(*[st.floats(a, b, width=width, allow_subnormal=False)
                           for a, b in self._intervals(self.lo, self.hi, self.gap)])

    def ints(self) -> st.SearchStrategy:
        lo, hi = max(math.ceil(self.lo), -50), min(math.floor(self.hi), 50)
        return st.one_of(*[st.integers(a, b) for a, b in self._intervals(lo, hi, math.ceil(self.gap))])

    def bools(self) -> st.SearchStrategy:
        return st.just(True) if self.gap > 0 or self.lo > 0 else st.booleans()

    def elements(self, dtype: np.dtype) -> st.SearchStrategy:
        return {"f": self.floats, "i": self.ints, "b": self.bools}[dtype.kind]()


ANY = Domain()


def arrays(dtype: np.dtype, shape: tuple, domain: Domain = ANY, unique: bool = False) -> st.SearchStrategy:
    return hnp.arrays(dtype, shape, elements=domain.elements(dtype), unique=unique)


def dtypes_for(kinds: str) -> list[np.dtype]:
    """Input dtypes for an op accepting dtype kinds ``kinds`` ("f", "i", "b")."""
    return [d for d in (F32, F64, I32, BOOL) if d.kind in kinds]


# ----------------------------------------------------------------------------
# References and comparisons
# ----------------------------------------------------------------------------


def _is_array(a: Any) -> bool:
    return isinstance(a, np.ndarray)


def expected_dtype(np_fn: Callable, args: list) -> np.dtype:
    """The dtype funcgrad documents for ``np_fn(*args)``: numpy's (NEP 50, weak
    Python scalars), with 64-bit types narrowed to 32 bits unless x64 is on,
    and the default float where numpy would pick float16 for bools."""
    probe = [np.ones(a.shape, a.dtype) if _is_array(a) else a for a in args]
    with np.errstate(all="ignore"):
        dt = np.asarray(np_fn(*probe)).dtype
    if dt == np.float16:
        dt = F64
    if not fg.config.enable_x64:
        dt = {F64: F32, np.dtype("int64"): I32, np.dtype("uint64"): np.dtype("uint32")}.get(dt, dt)
    return dt


def reference(np_fn: Callable, args: list) -> np.ndarray:
    """``np_fn`` in float64 (float arrays widened; ints, bools and Python scalars as they are)."""
    wide = [a.astype(F64) if _is_array(a) and a.dtype.kind == "f" else a for a in args]
    with np.errstate(all="ignore"):
        out = np.asarray(np_fn(*wide))
        if out.dtype == np.float16:   # numpy's float16 for bools: funcgrad computes in the default float
            out = np.asarray(np_fn(*[a.astype(F64) if _is_array(a) else a for a in args]))
    return out


def _tolerance(dtype: np.dtype, ulps: float) -> float:
    return ulps * float(np.finfo(dtype).eps) if dtype.kind == "f" else 0.0


def assert_matches(actual: Any, expected: np.ndarray, dtype: np.dtype, what: str, ulps: float = 64,
                   scale: float = 1.0) -> None:
    """``actual`` has ``dtype`` and ``expected``'s shape and values (floats: ``ulps`` of
    ``dtype`` relative, and absolute on the scale ``scale``; others exactly)."""
    assert isinstance(actual, fg.Array), f"{what}: returned {type(actual).__name__}, not an Array"
    assert actual.dtype == dtype, f"{what}: dtype {actual.dtype}, expected {dtype}"
    got = np.asarray(actual)
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}"
    if dtype.kind == "f":
        tol = _tolerance(dtype, ulps)
        np.testing.assert_allclose(got.astype(F64), expected.astype(F64), rtol=tol, atol=tol * scale,
                                   equal_nan=False, err_msg=what)
    else:
        np.testing.assert_array_equal(got, expected, err_msg=what)


def _same(actual: Any, expected: Any, what: str, scale: float = 1.0) -> None:
    """Two funcgrad results agree to a few ulps (jit vs eager, vmap vs loop)."""
    dt = np.dtype(expected.dtype)
    assert_matches(actual, np.asarray(expected), dt, what, ulps=4, scale=scale)


@dataclasses.dataclass
class Batch:
    """``vmap`` inputs: ``args`` with a batch of ``size`` along ``in_axes`` (None: not batched)."""

    in_axes: tuple
    args: list
    size: int

    def slices(self, i: int) -> list:
        return [a if ax is None else np.asarray(np.take(a, i, axis=ax)) for a, ax in zip(self.args, self.in_axes)]


def _to_fg(args: list) -> list:
    """numpy arrays as funcgrad Arrays (narrowed without x64); Python scalars as they are."""
    return [fnp.asarray(a) if _is_array(a) else a for a in args]


def check_transforms(fg_fn: Callable, np_fn: Callable, args: list, x64: bool, batch: Batch | None,
                     ulps: float = 64, scale: float = 1.0) -> None:
    """``fg_fn(*args)`` vs numpy, ``jit(fg_fn)`` vs eager, ``vmap(fg_fn)`` vs a loop."""
    with config_set("enable_x64", x64), config_set("jit_fusion", False):
        out = fg_fn(*_to_fg(args))
        assert_matches(out, reference(np_fn, args), expected_dtype(np_fn, args), "eager vs numpy", ulps, scale)
        # Python scalars are closed over, not passed: jit traces a scalar *argument* as
        # a strongly typed array of the default dtype, not as a weak scalar.
        where = [i for i, a in enumerate(args) if _is_array(a)]

        def on_arrays(*arrays):
            full = list(args)
            for i, a in zip(where, arrays):
                full[i] = a
            return fg_fn(*full)

        _same(fg.jit(on_arrays)(*_to_fg([args[i] for i in where])), out, "jit(f) vs f", scale)
        if batch is not None:
            loop = [fg_fn(*_to_fg(batch.slices(i))) for i in range(batch.size)]
            stacked = np.stack([np.asarray(o) for o in loop])
            got = fg.vmap(fg_fn, in_axes=batch.in_axes)(*_to_fg(batch.args))
            assert_matches(got, stacked, loop[0].dtype, f"vmap(f, in_axes={batch.in_axes}) vs loop", 4, scale)


def _random_axis_form(draw, axis: int, ndim: int) -> int:
    """``axis`` (in range(ndim)) written as itself or as its negative form."""
    return axis - ndim if draw(st.booleans()) else axis


@st.composite
def batch_for(draw, args: list, domains: list) -> Batch:
    """A batch of fresh values shaped like ``args``, batched along random axes
    (given or negative); Python scalars are never batched."""
    size = draw(st.integers(1, 3))
    in_axes, out = [], []
    arrays_at = [i for i, a in enumerate(args) if _is_array(a)]
    must = draw(st.sampled_from(arrays_at))
    for i, (a, dom) in enumerate(zip(args, domains)):
        if not _is_array(a) or (i != must and not draw(st.booleans())):
            in_axes.append(None)
            out.append(a)
            continue
        pos = draw(st.integers(0, a.ndim))
        shape = a.shape[:pos] + (size,) + a.shape[pos:]
        in_axes.append(_random_axis_form(draw, pos, a.ndim + 1))
        out.append(draw(arrays(a.dtype, shape, dom)))
    return Batch(tuple(in_axes), out, size)


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


def _names(table: dict, smooth_only: bool = False) -> list[str]:
    return sorted(n for n, op in table.items() if op.smooth or not smooth_only)


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
