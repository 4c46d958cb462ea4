"""Table-driven numerics tests: one row per public ``funcgrad.numpy`` function.

Every row names the funcgrad function, a numpy reference, argument shapes
(broadcasting, 0-d and zero-size where numpy allows them), a generator for
each argument's values (domain restrictions such as ``x > 0`` for ``log``)
and whether the function is differentiable.  Shared checkers drive the table:

* forward values vs numpy evaluated in float64, with float32 and float64
  (x64) inputs, and the documented output dtype;
* ``check_grads(order=2, modes=("fwd", "rev"))`` in float64 against finite
  differences (differentiable rows);
* ``vmap`` vs a Python loop over the batch;
* ``jit`` vs eager.

Non-float arguments (masks, integer operands) are generated too; the
gradient checker differentiates only with respect to the float ones.
"""
from __future__ import annotations

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.testing import check_grads
from funcgrad.tree_util import tree_leaves
from conftest import config_set
from op_table import OPS, PUBLIC, Op

def test_table_covers_public_api():
    # A row's name starts with the public name it covers: "sort[descending]" covers fnp.sort,
    # "linalg.solve[batched]" covers fnp.linalg.solve.
    names = {op.name.split("[")[0] for op in OPS}
    missing = [n for n in PUBLIC if n not in names]
    assert not missing, f"no table row for {missing}"
    for n in PUBLIC:
        owner = fnp
        *modules, attr = n.split(".")
        for m in modules:
            owner = getattr(owner, m)
        assert callable(getattr(owner, attr)), n


@pytest.mark.parametrize("shape", [(), (0,), (3, 4), (2, 1, 3)])
def test_shape_queries(shape):
    # ndim/shape/size: Python ints, eagerly and on tracers (they are static under jit), as numpy.
    x = np.zeros(shape, np.float32)
    want = (np.ndim(x), np.shape(x), np.size(x))
    assert (fnp.ndim(x), fnp.shape(x), fnp.size(x)) == want
    seen = []
    fg.jit(lambda a: seen.append((fnp.ndim(a), fnp.shape(a), fnp.size(a))) or a)(x)
    assert seen == [want]
    if len(shape) >= 2:
        assert fnp.size(x, axis=1) == np.size(x, axis=1)
        assert fnp.size(x, axis=(0, -1)) == shape[0] * shape[-1]


def _cases(predicate=lambda op: True):
    out = []
    for op in OPS:
        if not predicate(op):
            continue
        for i, shapes in enumerate(op.shapes):
            out.append(pytest.param(op, shapes, id=f"{op.name}-{'x'.join(map(str, shapes)) or 'noargs'}-{i}"))
    return out


# ----------------------------------------------------------------------------
# Shared helpers
# ----------------------------------------------------------------------------


def make_args(op: Op, shapes: tuple, rng, float_dtype) -> list[np.ndarray]:
    args = []
    for gen, shape in zip(op.gen_list(len(shapes)), shapes):
        a = np.asarray(gen(rng, shape))
        if a.dtype.kind == "f":
            a = a.astype(float_dtype)
        elif a.dtype.kind == "c":   # complex rows: complex64 beside float32, complex128 beside float64
            a = a.astype(np.result_type(float_dtype, np.complex64))
        args.append(a)
    return args


def as_float64(args):
    return [a.astype(np.float64) if a.dtype.kind == "f" else a.astype(np.complex128) if a.dtype.kind == "c" else a
            for a in args]


def to_fg(args):
    return [fnp.asarray(a) for a in args]


def expected_dtype(op: Op, args, float_dtype) -> np.dtype | None:
    x64 = fg.config.enable_x64
    default_int = np.dtype("int64") if x64 else np.dtype("int32")
    if op.out == "float":
        return np.dtype(float_dtype)
    if op.out == "complex":
        return np.result_type(float_dtype, np.complex64)
    if op.out == "bool":
        return np.dtype(bool)
    if op.out == "int":
        return default_int
    if op.out == "int32":
        return np.dtype("int32")
    if op.out == "same":
        return np.dtype(args[0].dtype)
    return None


def assert_tree_close(actual, expected, rtol, atol, what=""):
    a_leaves = tree_leaves(actual)
    e_leaves = [np.asarray(e) for e in tree_leaves(expected)]
    assert len(a_leaves) == len(e_leaves), f"{what}: {len(a_leaves)} outputs vs {len(e_leaves)} expected"
    for a, e in zip(a_leaves, e_leaves):
        a = np.asarray(a)
        assert a.shape == e.shape, f"{what}: shape {a.shape} vs expected {e.shape}"
        if e.dtype.kind in "biu" and a.dtype.kind in "biu":
            np.testing.assert_array_equal(a, e, err_msg=what)
        elif e.dtype.kind == "c" or a.dtype.kind == "c":
            assert a.dtype.kind == e.dtype.kind, f"{what}: dtype {a.dtype} vs expected {e.dtype}"
            np.testing.assert_allclose(a.astype(np.complex128), e.astype(np.complex128), rtol=rtol, atol=atol,
                                       equal_nan=True, err_msg=what)
        else:
            np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol,
                                       equal_nan=True, err_msg=what)


def _split_float(args):
    """Indices of the float arguments (differentiated) and a rebuild function."""
    float_idx = [i for i, a in enumerate(args) if a.dtype.kind in "fc"]

    def rebuild(float_vals):
        full = list(args)
        for i, v in zip(float_idx, float_vals):
            full[i] = v
        return full
    return float_idx, rebuild


# ----------------------------------------------------------------------------
# (a) forward values vs numpy, float32 and float64
# ----------------------------------------------------------------------------


def _check_forward(op, shapes, rng, float_dtype, rtol, atol):
    args = make_args(op, shapes, rng, float_dtype)
    with np.errstate(all="ignore"):
        expected = op.ref(*as_float64(args))
    out = op.fn(*to_fg(args))
    assert_tree_close(out, expected, rtol, atol, f"{op.name} vs numpy")
    want = expected_dtype(op, args, float_dtype)
    for leaf in tree_leaves(out):
        assert isinstance(leaf, fg.Array), f"{op.name} returned {type(leaf).__name__}, not a funcgrad Array"
        if want is not None:
            assert leaf.dtype == want, f"{op.name}: output dtype {leaf.dtype}, expected {want}"


@pytest.mark.parametrize("op,shapes", _cases())
def test_forward_float32(op, shapes, rng, x32):
    _check_forward(op, shapes, rng, np.float32, op.rtol, op.atol)


@pytest.mark.parametrize("op,shapes", _cases())
def test_forward_float64(op, shapes, rng, x64):
    _check_forward(op, shapes, rng, np.float64, 1e-12, op.atol64)


@pytest.fixture
def without_fast_path():
    """Eager evaluation with bind's inlined fast path off: every primitive goes through apply_primitive."""
    from funcgrad import _core
    previous = _core.set_fast_path(False)
    yield
    _core.set_fast_path(previous)


@pytest.mark.parametrize("op,shapes", _cases())
def test_forward_without_the_fast_path(op, shapes, rng, x32, without_fast_path):
    # The one general evaluation path gives numpy's results on the whole table, as the fast path does.
    _check_forward(op, shapes, rng, np.float32, op.rtol, op.atol)


def test_the_fast_path_switch_routes_binds(monkeypatch):
    from funcgrad import _core
    calls = []
    general = _core.apply_primitive
    monkeypatch.setattr(_core, "apply_primitive", lambda prim, args, params: calls.append(prim.name) or
                        general(prim, args, params))
    x = fnp.ones((2, 3))
    fnp.sin(x) + x
    assert calls == []                                     # the inlined fast path
    previous = _core.set_fast_path(False)
    try:
        out = fnp.sum(fnp.sin(x) + x, axis=1)
    finally:
        _core.set_fast_path(previous)
    assert calls == ["sin", "add", "reduce_sum"]
    np.testing.assert_allclose(np.asarray(out), (np.sin(np.ones((2, 3))) + 1).sum(axis=1), rtol=1e-6)


# ----------------------------------------------------------------------------
# (b) derivatives vs finite differences, float64, order 2, both modes
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("op,shapes", _cases(lambda op: op.diff and op.shapes != [()]))
def test_grads(op, shapes, rng, x64):
    args = make_args(op, shapes, rng, np.float64)
    float_idx, rebuild = _split_float(args)
    assert float_idx, f"{op.name} is marked differentiable but has no float argument"

    def f(*float_vals):   # finite differences call f with numpy arrays
        return op.fn(*[fnp.asarray(a) for a in rebuild(float_vals)])

    tol = op.grad_tol
    check_grads(f, [fnp.asarray(args[i]) for i in float_idx], order=2, modes=("fwd", "rev"), atol=tol, rtol=tol)


# ----------------------------------------------------------------------------
# (c) vmap vs a Python loop over the batch
# ----------------------------------------------------------------------------

B = 3


def _vmap_case(op, shapes, rng, in_axes_kind):
    per_example = [make_args(op, shapes, rng, np.float32) for _ in range(B)]
    nargs = len(shapes)
    if in_axes_kind == "first_only":
        axes = (0,) + (None,) * (nargs - 1)
    elif in_axes_kind == "last":
        axes = (-1,) * nargs
    else:
        axes = (0,) * nargs
    batched, loop_args = [], []
    for j, ax in enumerate(axes):
        if ax is None:
            batched.append(per_example[0][j])
            continue
        batched.append(np.stack([ex[j] for ex in per_example], axis=ax))
    for b in range(B):
        loop_args.append([per_example[b][j] if ax is not None else per_example[0][j] for j, ax in enumerate(axes)])
    return batched, loop_args, axes


def _vmap_cases():
    out = []
    for case in _cases(lambda op: op.shapes != [()] and op.transforms):
        op, shapes = case.values
        kinds = ["all0", "last"] + (["first_only"] if len(shapes) > 1 else [])
        out += [pytest.param(op, shapes, k, id=f"{case.id}-{k}") for k in kinds]
    return out


@pytest.mark.parametrize("op,shapes,in_axes_kind", _vmap_cases())
def test_vmap_matches_loop(op, shapes, in_axes_kind, rng, x32):
    batched, loop_args, axes = _vmap_case(op, shapes, rng, in_axes_kind)
    out = fg.vmap(op.fn, in_axes=axes)(*to_fg(batched))
    loop = [op.fn(*to_fg(a)) for a in loop_args]
    expected = [np.stack([np.asarray(tree_leaves(o)[k]) for o in loop]) for k in range(len(tree_leaves(loop[0])))]
    assert_tree_close(tree_leaves(out), expected, 2e-6, 2e-6, f"vmap({op.name}) vs loop")


# ----------------------------------------------------------------------------
# (d) jit equals eager
# ----------------------------------------------------------------------------


def _jit_cases():
    # The table's own rows run jit fused and unfused in both float widths. The area rows (compositions
    # of the same primitives) run unfused in float64 on every case and fused in float32 on their first
    # case: compiling fused kernels is most of this test's time, and tests/test_jit_compiler.py checks
    # the fusion of every fusible primitive.
    out, fused_seen = [], set()
    for case in _cases(lambda op: op.transforms):
        op, shapes = case.values
        if op.area == "core":
            combos = [("fused", np.float32), ("unfused", np.float32), ("fused", np.float64), ("unfused", np.float64)]
        else:
            combos = [("unfused", np.float64)] + ([("fused", np.float32)] if op.name not in fused_seen else [])
            fused_seen.add(op.name)
        out += [pytest.param(op, shapes, dtype, fusion, id=f"{fusion}-{case.id}-{np.dtype(dtype).name}")
                for fusion, dtype in combos]
    return out


@pytest.mark.parametrize("op,shapes,dtype,fusion", _jit_cases())
def test_jit_matches_eager(op, shapes, dtype, fusion, rng):
    with config_set("enable_x64", dtype == np.float64), config_set("jit_fusion", fusion == "fused"):
        args = to_fg(make_args(op, shapes, rng, dtype))
        eager = op.fn(*args)
        jitted = fg.jit(op.fn)
        out = jitted(*args)
        tol = 1e-6 if dtype == np.float32 else 1e-12
        assert_tree_close(out, eager, tol, tol, f"jit({op.name}) vs eager")
        for a, e in zip(tree_leaves(out), tree_leaves(eager)):
            assert a.dtype == e.dtype, f"jit({op.name}): dtype {a.dtype} vs eager {e.dtype}"
        out2 = jitted(*args)   # the cached program
        assert_tree_close(out2, eager, tol, tol, f"jit({op.name}) second call vs eager")


def _first_cases(pred):
    """One shape set per op: the transform-composition checks below compile a program per case."""
    seen, out = set(), []
    for case in _cases(pred):
        op = case.values[0]
        if op.name not in seen:
            seen.add(op.name)
            out.append(case)
    return out


@pytest.fixture
def unfused():
    """Composition tests run unfused: each would otherwise compile kernels of its own (CI time);
    fusion of every fusible primitive is checked in tests/test_jit_compiler.py."""
    with config_set("jit_fusion", False):
        yield


@pytest.mark.parametrize("op,shapes", _first_cases(lambda op: op.diff and op.transforms and op.shapes != [()]))
def test_jit_of_grad_matches_eager_grad(op, shapes, rng, x32, unfused):
    args = make_args(op, shapes, rng, np.float32)
    float_idx, rebuild = _split_float(args)

    def loss(*float_vals):
        # complex outputs count through their real and imaginary parts
        return sum(fnp.sum(leaf * 0.5) if leaf.dtype.kind == "f" else fnp.sum(fnp.real(leaf) * 0.5 + fnp.imag(leaf))
                   for leaf in tree_leaves(op.fn(*rebuild(float_vals))) if leaf.dtype.kind in "fc")

    float_args = [fnp.asarray(args[i]) for i in float_idx]
    argnums = tuple(range(len(float_args)))
    eager = fg.grad(loss, argnums=argnums)(*float_args)
    jitted = fg.jit(fg.grad(loss, argnums=argnums))(*float_args)
    assert_tree_close(jitted, eager, 2e-5, 2e-5, f"jit(grad({op.name})) vs grad")


@pytest.mark.parametrize("op,shapes", _first_cases(lambda op: op.transforms and op.shapes != [()]))
def test_jit_of_vmap_matches_vmap(op, shapes, rng, x32, unfused):
    batched, _, axes = _vmap_case(op, shapes, rng, "all0")
    args = to_fg(batched)
    eager = fg.vmap(op.fn, in_axes=axes)(*args)
    jitted = fg.jit(fg.vmap(op.fn, in_axes=axes))(*args)
    assert_tree_close(jitted, eager, 1e-6, 1e-6, f"jit(vmap({op.name})) vs vmap")
