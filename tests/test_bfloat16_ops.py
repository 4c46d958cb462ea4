"""The op table (tests/op_table.py) on bfloat16 inputs: forward, jit, vmap and grad.

Every float argument of a row is drawn, rounded to bfloat16 and handed over as
a bfloat16 array. References are the row's numpy function evaluated in float64
on those same (exactly representable) values, and float64 central differences
of it for gradients, so a test fails when funcgrad computes the wrong thing,
returns another dtype than JAX would (a row's "float" output is bfloat16), or
loses more precision than bfloat16 arithmetic with float32 accumulation does.
"""
from __future__ import annotations

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.tree_util import tree_leaves
from conftest import config_set
from op_table import OPS, Op

BF16 = np.dtype(fnp.bfloat16)
EPS = 2.0 ** -7            # bfloat16's machine epsilon (8 significant bits)
RTOL = 4 * EPS              # a few roundings of the output, and float32 accumulation inside
GRAD_RTOL = 8 * EPS


def _has_float_argument(op: Op, shapes: tuple) -> bool:
    rng = np.random.default_rng(0)
    return any(np.asarray(gen(rng, shape)).dtype.kind == "f" for gen, shape in zip(op.gen_list(len(shapes)), shapes))


def _cases(predicate=lambda op: True, first_only=False):
    """The rows with a float argument (``first_only``: each row's first shape set, for the checks that
    compile a program per case)."""
    out = []
    for op in OPS:
        if predicate(op):
            for i, shapes in enumerate(op.shapes[:1] if first_only else op.shapes):
                if _has_float_argument(op, shapes):
                    out.append(pytest.param(op, shapes, id=f"{op.name}-{'x'.join(map(str, shapes)) or 'noargs'}-{i}"))
    return out


def make_args(op: Op, shapes: tuple, rng) -> list[np.ndarray]:
    """The row's arguments, its float ones as bfloat16 (complex arguments as complex64)."""
    args = []
    for gen, shape in zip(op.gen_list(len(shapes)), shapes):
        a = np.asarray(gen(rng, shape))
        if a.dtype.kind == "f":
            a = a.astype(BF16)
        elif a.dtype.kind == "c":
            a = a.astype(np.complex64)
        args.append(a)
    return args


def as_float64(args):
    return [a.astype(np.float64) if a.dtype == BF16 else a.astype(np.complex128) if a.dtype.kind == "c" else a
            for a in args]


def reference(op: Op, args):
    with np.errstate(all="ignore"):
        return op.ref(*as_float64(args))


def _float64(a) -> np.ndarray:
    a = np.asarray(a)
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64) if a.dtype.kind not in "biu" else a


def assert_close(actual, expected, rtol, what):
    a_leaves, e_leaves = tree_leaves(actual), [np.asarray(e) for e in tree_leaves(expected)]
    assert len(a_leaves) == len(e_leaves), f"{what}: {len(a_leaves)} outputs vs {len(e_leaves)} expected"
    for a, e in zip(a_leaves, e_leaves):
        a = np.asarray(a)
        assert a.shape == e.shape, f"{what}: shape {a.shape} vs expected {e.shape}"
        if a.dtype.kind in "biu" and e.dtype.kind in "biu":
            np.testing.assert_array_equal(a, e, err_msg=what)
            continue
        e64 = _float64(e)
        finite = np.isfinite(e64)
        scale = float(np.max(np.abs(e64[finite]), initial=1.0))
        np.testing.assert_allclose(_float64(a), e64, rtol=rtol, atol=rtol * scale, equal_nan=True, err_msg=what)


# Rows whose float outputs are float32 on bfloat16 inputs, as in JAX: parts of a complex result (there is
# no bfloat16 complex dtype: complex64 it is), and fftfreq, whose dtype is its dtype= argument's, not d's.
FLOAT32_OUTPUTS = {"linalg.eig", "linalg.eigvals", "linalg.eigvals[conjugate pairs]", "fft.fftfreq[even,d array]"}


def expected_dtype(op: Op, args) -> np.dtype | None:
    if op.out == "float":
        return np.dtype(np.float32) if op.name in FLOAT32_OUTPUTS else BF16
    if op.out == "complex":
        return np.dtype(np.complex64)
    if op.out == "bool":
        return np.dtype(bool)
    if op.out in ("int", "int32"):
        return np.dtype(np.int32)
    if op.out == "same":
        return np.dtype(args[0].dtype)
    return None


@pytest.mark.parametrize("op,shapes", _cases())
def test_forward(op, shapes, rng, x32):
    args = make_args(op, shapes, rng)
    out = op.fn(*[fnp.asarray(a) for a in args])
    assert_close(out, reference(op, args), max(op.rtol, RTOL), f"{op.name} on bfloat16 vs numpy in float64")
    want = expected_dtype(op, args)
    for leaf in tree_leaves(out):
        assert isinstance(leaf, fg.Array), f"{op.name} returned {type(leaf).__name__}, not a funcgrad Array"
        if want is not None:
            assert leaf.dtype == want, f"{op.name} on bfloat16: output dtype {leaf.dtype}, expected {want}"


def _jit_cases():
    """Every row unfused; fused, one row per function of the core table (each fused case compiles a
    bfloat16 kernel: the lowerings live there, and tests/test_bfloat16_cpu.py checks the kernels' rounding)."""
    out, fused_seen = [], set()
    for case in _cases(lambda op: op.transforms, first_only=True):
        op, shapes = case.values
        out.append(pytest.param(op, shapes, "unfused", id=f"{case.id}-unfused"))
        root = op.name.split("[")[0]
        if op.area == "core" and root not in fused_seen:
            fused_seen.add(root)
            out.append(pytest.param(op, shapes, "fused", id=f"{case.id}-fused"))
    return out


@pytest.mark.parametrize("op,shapes,fusion", _jit_cases())
def test_jit_matches_eager(op, shapes, fusion, rng, x32):
    with config_set("jit_fusion", fusion == "fused"):
        args = [fnp.asarray(a) for a in make_args(op, shapes, rng)]
        eager = op.fn(*args)
        out = fg.jit(op.fn)(*args)
        # one bfloat16 rounding apart at most (a fused kernel may round an intermediate differently)
        assert_close(out, eager, EPS, f"jit({op.name}) on bfloat16 vs eager")
        for a, e in zip(tree_leaves(out), tree_leaves(eager)):
            assert a.dtype == e.dtype, f"jit({op.name}): dtype {a.dtype} vs eager {e.dtype}"


@pytest.mark.parametrize("op,shapes", _cases(lambda op: op.transforms and op.shapes != [()], first_only=True))
def test_vmap_matches_loop(op, shapes, rng, x32):
    per_example = [make_args(op, shapes, rng) for _ in range(3)]
    batched = [fnp.asarray(np.stack([ex[j] for ex in per_example])) for j in range(len(shapes))]
    out = fg.vmap(op.fn)(*batched)
    loop = [op.fn(*[fnp.asarray(a) for a in ex]) for ex in per_example]
    expected = [np.stack([np.asarray(tree_leaves(o)[k]).astype(np.float64) if tree_leaves(o)[k].dtype == BF16
                          else np.asarray(tree_leaves(o)[k]) for o in loop]) for k in range(len(tree_leaves(loop[0])))]
    assert_close(tree_leaves(out), expected, EPS, f"vmap({op.name}) on bfloat16 vs a loop")


def _numeric_grad(f, args: list[np.ndarray], i: int, h: float = 1e-6) -> np.ndarray:
    """Central differences of the float64 function ``f`` in argument ``i``."""
    x = args[i]
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[k] += h
        minus[k] -= h
        g[k] = (f(*args[:i], plus, *args[i + 1:]) - f(*args[:i], minus, *args[i + 1:])) / (2 * h)
    return g


@pytest.mark.parametrize("op,shapes", _cases(lambda op: op.diff and op.shapes != [()], first_only=True))
def test_grad(op, shapes, rng, x32):
    args = make_args(op, shapes, rng)
    float_idx = [i for i, a in enumerate(args) if a.dtype == BF16]
    weights = [rng.uniform(0.5, 1.5, np.shape(e)) for e in tree_leaves(reference(op, args))]

    def loss64(*xs):   # the weighted sum of the real float outputs, in float64
        with np.errstate(all="ignore"):
            return sum(float(np.sum(np.real(e) * w)) for e, w in zip(tree_leaves(op.ref(*xs)), weights)
                       if np.asarray(e).dtype.kind in "fc")

    def loss(*float_vals):
        full = list(args)
        for i, v in zip(float_idx, float_vals):
            full[i] = v
        outs = tree_leaves(op.fn(*full))
        return sum(fnp.sum(fnp.real(o).astype(np.float32) * w.astype(np.float32)) for o, w in zip(outs, weights)
                   if o.dtype.kind in "fc" or o.dtype == BF16)

    grads = fg.grad(loss, argnums=tuple(range(len(float_idx))))(*[fnp.asarray(args[i]) for i in float_idx])
    args64 = as_float64(args)
    for g, i in zip(grads, float_idx):
        assert g.dtype == BF16, f"grad of {op.name} in argument {i}: dtype {g.dtype}, expected bfloat16"
        numeric, g = _numeric_grad(loss64, args64, i), np.asarray(g).astype(np.float64)
        if op.name.split("[")[0] in SYMMETRIC_INPUT:
            numeric, g = _symmetric_part(numeric), _symmetric_part(g)
        assert_close(g, numeric, GRAD_RTOL, f"grad of {op.name} in argument {i}")


# Functions of a symmetric matrix: numpy reads one triangle, funcgrad's rules (as JAX's) differentiate along
# symmetric perturbations, so only the gradients' symmetric parts are comparable.
SYMMETRIC_INPUT = {"linalg.cholesky", "linalg.eigh"}


def _symmetric_part(g: np.ndarray) -> np.ndarray:
    return (g + np.swapaxes(g, -1, -2)) / 2
