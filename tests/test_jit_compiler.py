"""The jit compiler: each IR pass alone, fusion vs the unfused program, the
kernel disk cache across processes, the buffer plan, thread counts."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad._ir import eval_jaxpr
from funcgrad.compiler import fusion, passes
from funcgrad.compiler.fusion import FusedKernel
from funcgrad.backends.cpu import backend as cpu_backend

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _prims(jaxpr) -> list[str]:
    return [getattr(e.prim, "name", str(e.prim)) for e in jaxpr.eqns]


def _run(jaxpr, *args):
    return [np.asarray(v) for v in eval_jaxpr(jaxpr, [fnp.array(a) for a in args])]


def test_dce_removes_unused_equations():
    def f(x):
        unused = fnp.exp(x) * 3.0   # noqa: F841  (dead)
        return fnp.sin(x)
    x = np.linspace(-1, 1, 5).astype(np.float32)
    jaxpr = fg.make_jaxpr(f)(x)
    pruned = passes.dce(jaxpr)
    assert _prims(jaxpr) == ["exp", "mul", "sin"]
    assert _prims(pruned) == ["sin"]
    np.testing.assert_allclose(_run(pruned, x)[0], np.sin(x.astype(np.float64)), rtol=1e-6)


def test_cse_merges_identical_equations():
    def f(x):
        return fnp.sin(x) * fnp.sin(x) + fnp.sin(x * 2.0) + fnp.sin(x * 2.0)
    x = np.linspace(-1, 1, 7).astype(np.float32)
    jaxpr = fg.make_jaxpr(f)(x)
    merged = passes.dce(passes.cse(jaxpr))
    assert _prims(jaxpr).count("sin") == 4
    assert _prims(merged).count("sin") == 2
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(_run(merged, x)[0], np.sin(x64) ** 2 + 2 * np.sin(2 * x64), rtol=1e-5)


def test_constant_folding_evaluates_constant_subprograms():
    table = np.arange(6.0, dtype=np.float32).reshape(2, 3)

    def f(x):
        c = fnp.exp(fnp.array(table)) + 1.0    # depends on constants only
        return x * c
    x = np.ones((2, 3), np.float32)
    jaxpr = fg.make_jaxpr(f)(x)
    folded = passes.fold_constants(jaxpr)
    assert "exp" not in _prims(folded) and _prims(folded) == ["mul"]
    np.testing.assert_allclose(_run(folded, x)[0], np.exp(table.astype(np.float64)) + 1.0, rtol=1e-6)


def test_fusion_makes_one_kernel_and_matches_unfused():
    def f(x, b):
        return fnp.maximum(x * 2.0 + b, 0.0) * fnp.tanh(x)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((9, 7)).astype(np.float32)
    b = rng.standard_normal(7).astype(np.float32)
    jaxpr = passes.optimize(fg.make_jaxpr(f)(x, b))
    fused = fusion.fuse(jaxpr)
    assert len(fused.eqns) == 1 and isinstance(fused.eqns[0].prim, FusedKernel)
    x64, b64 = x.astype(np.float64), b.astype(np.float64)
    expected = np.maximum(x64 * 2 + b64, 0) * np.tanh(x64)
    np.testing.assert_allclose(cpu_backend.compile(fused).run([x, b])[0], expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("reduce", ["sum", "max", "min"])
def test_fusion_ends_with_a_trailing_reduction(reduce):
    op = getattr(fnp, reduce)
    ref = getattr(np, reduce)

    def f(x, y):
        return op(fnp.exp(x) * y - 1.0, axis=-1)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 5, 11)).astype(np.float32)
    y = rng.standard_normal((5, 11)).astype(np.float32)
    fused = fusion.fuse(passes.optimize(fg.make_jaxpr(f)(x, y)))
    assert len(fused.eqns) == 1 and fused.eqns[0].prim.spec.reduction is not None
    expected = ref(np.exp(x.astype(np.float64)) * y - 1.0, axis=-1)
    np.testing.assert_allclose(fg.jit(f)(x, y), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape_b", [(1, 7), (9, 1), (1, 1), (7,), (), (3, 9, 7), (3, 1, 7)])
def test_fusion_broadcast_patterns(shape_b):
    def f(a, b):
        return fnp.sin(a) * b + b * 0.5
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 9, 7) if len(shape_b) == 3 else (9, 7)).astype(np.float32)
    b = rng.standard_normal(shape_b).astype(np.float32)
    expected = np.sin(a.astype(np.float64)) * b + b * 0.5
    np.testing.assert_allclose(fg.jit(f)(a, b), expected, rtol=1e-6, atol=1e-6)


def test_jit_matches_eager_with_and_without_fusion():
    def loss(w, x):
        h = fnp.tanh(x @ w)
        return fnp.sum(fnp.logsumexp(h * 3.0, axis=1))
    rng = np.random.default_rng(3)
    w = rng.standard_normal((5, 4)).astype(np.float32)
    x = rng.standard_normal((8, 5)).astype(np.float32)
    eager = np.asarray(fg.grad(loss)(w, x))
    fused = np.asarray(fg.jit(fg.grad(loss))(w, x))
    fg.config.update("jit_fusion", False)
    try:
        unfused = np.asarray(fg.jit(fg.grad(loss))(w, x))
    finally:
        fg.config.update("jit_fusion", True)
    np.testing.assert_allclose(fused, eager, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(unfused, eager, rtol=1e-5, atol=1e-6)


def test_results_stay_valid_after_the_next_call():
    @fg.jit
    def f(x):
        return fnp.exp(x) * 2.0 + 1.0, fnp.sin(x) * fnp.cos(x)
    x1 = np.full((4, 5), 0.5, np.float32)
    x2 = np.full((4, 5), -1.0, np.float32)
    first = f(x1)
    kept = [np.array(a) for a in first]
    f(x2)
    for a, k in zip(first, kept):
        np.testing.assert_array_equal(np.asarray(a), k)
        assert not np.asarray(a).flags.writeable


def test_buffer_plan_reuses_buffers_across_calls():
    def f(x, w):
        h = fnp.maximum(x @ w + 1.0, 0.0)
        return fnp.sum(fnp.tanh(h @ w.T) * 2.0)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    w = rng.standard_normal((8, 8)).astype(np.float32)
    program = fg.jit(f).lower(x, w)
    assert program.plan, "matmul and fused outputs that do not escape should be planned"
    program.run([x, w])
    before = [id(b) for b in program.buffers]
    out = program.run([x, w])
    assert [id(b) for b in program.buffers] == before
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    expected = np.sum(np.tanh(np.maximum(x64 @ w64 + 1, 0) @ w64.T) * 2)
    np.testing.assert_allclose(np.asarray(out[0]), expected, rtol=1e-4)
    assert "buffer plan" in repr(program) and "fused" in repr(program)


def test_retrace_only_on_new_signature():
    traces = []

    @fg.jit
    def f(x):
        traces.append(1)
        return x * 2.0
    f(np.ones(3, np.float32))
    f(np.ones(3, np.float32) * 5)
    f(np.ones(4, np.float32))
    info = f.cache_info()
    assert len(traces) == 2 and info["misses"] == 2 and info["hits"] == 1 and info["size"] == 2


_CHILD = textwrap.dedent("""
    import sys, numpy as np
    sys.path.insert(0, {repo!r})
    import funcgrad as fg, funcgrad.numpy as fnp
    from funcgrad.compiler import codegen
    x = np.linspace(-2, 2, 40, dtype=np.float32).reshape(8, 5)
    out = fg.jit(lambda v: fnp.sum(fnp.exp(v) * fnp.sin(v) + {c}, axis=1))(x)
    expected = np.sum(np.exp(x.astype(np.float64)) * np.sin(x) + {c}, axis=1)
    assert np.allclose(np.asarray(out), expected, rtol=1e-5), (out, expected)
    misses = sum(sum(k.stats.cache_misses.values()) for k in codegen._loaded.values())
    hits = sum(sum(k.stats.cache_hits.values()) for k in codegen._loaded.values())
    print(hits, misses)
""")


def _child(cache_dir: str, constant: float) -> subprocess.Popen:
    env = dict(os.environ, FUNCGRAD_CACHE_DIR=cache_dir)
    return subprocess.Popen([sys.executable, "-c", _CHILD.format(repo=REPO, c=constant)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(p: subprocess.Popen) -> tuple[int, int]:
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    hits, misses = map(int, out.split())
    return hits, misses


def test_second_process_hits_the_disk_cache(tmp_path):
    cache = str(tmp_path / "kernels")
    assert _result(_child(cache, 1.25)) == (0, 1)       # compiled and stored
    assert _result(_child(cache, 1.25)) == (1, 0)       # loaded, no recompilation
    assert len([f for f in os.listdir(cache) if f.endswith(".py")]) == 1


def test_concurrent_compiles_leave_a_usable_cache(tmp_path):
    cache = str(tmp_path / "kernels")
    procs = [_child(cache, 2.5), _child(cache, 2.5)]
    for p in procs:
        _result(p)            # both succeed whatever the interleaving
    assert _result(_child(cache, 2.5)) == (1, 0)


def test_one_and_two_threads_agree():
    from funcgrad.backends.cpu import _threads
    rng = np.random.default_rng(5)
    x = rng.standard_normal((256, 257)).astype(np.float32)   # large enough for a parallel kernel
    f = fg.jit(lambda v: fnp.sum(fnp.exp(v * 0.1) * fnp.tanh(v), axis=1))
    original = _threads.get_num_threads()
    try:
        _threads.set_num_threads(1)
        one = np.asarray(f(x))
        _threads.set_num_threads(min(2, _threads.max_threads()))
        two = np.asarray(f(x))
    finally:
        _threads.set_num_threads(original)
    np.testing.assert_allclose(one, two, rtol=1e-6)
    expected = np.sum(np.exp(x.astype(np.float64) * 0.1) * np.tanh(x), axis=1)
    np.testing.assert_allclose(one, expected, rtol=1e-4)


# Every fusible primitive, through generated kernels, in a few chains per dtype.
_CHAINS = {
    "arith": lambda x, y: fnp.maximum(x * y - x / (fnp.abs(y) + 1.0), -(x + y)) + fnp.minimum(x, y) * 0.5,
    "transcendental": lambda x, y: (fnp.exp(x) + fnp.log(fnp.abs(y) + 1) + fnp.sqrt(fnp.abs(x)) + fnp.sin(x)
                                    + fnp.cos(y) + fnp.tanh(x) + fnp.exp2(x) + fnp.log2(fnp.abs(y) + 1)
                                    + fnp.log1p(fnp.abs(x)) + fnp.expm1(y) + fnp.arctan(x) + fnp.sinh(y)
                                    + fnp.cosh(x) + fnp.arctan2(x, y) + fnp.abs(x) ** y),
    "rounding": lambda x, y: (fnp.sign(x) + fnp.floor(y) + fnp.ceil(x) + fnp.arcsin(fnp.clip(x, -1, 1))
                              + fnp.arccos(fnp.clip(y, -1, 1)) + fnp.tan(x * 0.1)),
    "logic": lambda x, y: (fnp.where(fnp.logical_and(x > 0, fnp.logical_or(y < 0, x <= 1)), x, y * 2.0)
                           + fnp.where(fnp.logical_not(x >= y), 1.0, 0.0) + (x == y) + (x != y)
                           + fnp.isnan(x / (y * 0)) + fnp.isfinite(x / (y * 0))),
    "convert": lambda x, y: (x * 10).astype(fnp.int32) * 3 + 1,
    "reductions": lambda x, y: (fnp.sum(x * y + 1.0, axis=1) + fnp.max(x * y, axis=-1)
                                + fnp.min(x - y, axis=1)),
    "logistic": lambda x, y: fg.nn.sigmoid(x * 2.0) * y,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("chain", sorted(_CHAINS))
def test_every_fusible_primitive_matches_eager(chain, dtype, x64):
    f = _CHAINS[chain]
    rng = np.random.default_rng(6)
    x = rng.standard_normal((33, 17)).astype(dtype)
    y = rng.standard_normal((33, 17)).astype(dtype)
    with np.errstate(all="ignore"):
        eager = np.asarray(f(fnp.array(x), fnp.array(y)))
        program = fg.jit(f).lower(x, y)
        fused = np.asarray(fg.jit(f)(x, y))
    assert any(isinstance(e.prim, FusedKernel) for e in program.jaxpr.eqns), program
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(fused, eager, rtol=tol, atol=tol)
    assert fused.dtype == eager.dtype


def test_dropped_outputs_are_recycled_and_live_ones_never():
    f = fg.jit(lambda x, y: fnp.exp(x) * y + 1.0)
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    y = np.full((8, 8), 2.0, np.float32)
    first = f(x, y)
    address = np.asarray(first).__array_interface__["data"][0]
    kept = f(x, y * 3)                      # `first` is alive: a fresh buffer
    assert np.asarray(kept).__array_interface__["data"][0] != address
    del first
    again = f(x, y * 5)                     # `first` was dropped: its buffer is reused
    assert np.asarray(again).__array_interface__["data"][0] == address
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(np.asarray(kept), np.exp(x64) * 6 + 1, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(again), np.exp(x64) * 10 + 1, rtol=1e-6)
    assert not np.asarray(again).flags.writeable


@pytest.mark.parametrize("prim,literal,reference", [
    ("mul_p", 2.5, lambda x: x * 2.5),
    ("add_p", 0.75, lambda x: x + 0.75),
    ("lt_p", 1.5, lambda x: x < 1.5),
])
def test_fused_literal_of_a_higher_kind_is_not_truncated(prim, literal, reference):
    # A primitive bound directly on an int array and a float literal: the fused
    # kernel must compute in float (the literal is weak, but never narrowed to int).
    from funcgrad.primitives import elementwise as E
    x = np.arange(-3, 5, dtype=np.int32)
    f = lambda a: getattr(E, prim).bind(a * 1, literal)
    got = np.asarray(fg.jit(f)(fnp.array(x)))
    np.testing.assert_array_equal(got, reference(x.astype(np.float64)).astype(got.dtype))
    assert got.dtype == (np.bool_ if prim == "lt_p" else np.float32)


# ------------------------------------------------------- lowerings and backends


def test_fusion_follows_the_registered_lowerings_not_names():
    """What fuses is what has a numba lowering, looked up on the primitive object."""
    from funcgrad import _core
    from funcgrad._dtypes import ShapedArray
    from funcgrad.compiler.codegen import COMPILER, unary
    same_aval = lambda x: ShapedArray(x.shape, x.dtype)   # noqa: E731
    cube = _core.Primitive("cube")
    cube.impl, cube.abstract_eval = (lambda x: x * x * x), same_aval
    _core.register_lowering(cube, COMPILER, unary("{0} * {0} * {0}"))
    impostor = _core.Primitive("add")   # the name of a fusible primitive, but no lowering
    impostor.impl, impostor.abstract_eval = (lambda x: x + 1), same_aval

    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    fused = fusion.fuse(fg.make_jaxpr(lambda v: cube.bind(v * 2.0) - 1.0)(x))
    assert len(fused.eqns) == 1 and isinstance(fused.eqns[0].prim, FusedKernel)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(cpu_backend.compile(fused).run([x])[0], (2 * x64) ** 3 - 1, rtol=1e-6)
    kept = fusion.fuse(fg.make_jaxpr(lambda v: impostor.bind(v) * 2.0)(x))
    assert [e.prim for e in kept.eqns][0] is impostor   # left to its host implementation


@pytest.mark.parametrize("reduce", ["max", "min"])
def test_fused_bool_max_min_match_numpy(reduce):
    # The accumulator starts at the identity of bool max/min (False/True).
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
    f = lambda v: getattr(fnp, reduce)((v * 2.0) > 1.0, axis=-1)   # noqa: E731
    assert isinstance(fg.jit(f).lower(x).jaxpr.eqns[-1].prim, FusedKernel)
    np.testing.assert_array_equal(np.asarray(fg.jit(f)(x)), getattr(np, reduce)(x * 2.0 > 1.0, axis=-1))


def test_errors_inside_a_compiled_program_name_the_primitive():
    # (mode="promise_in_bounds": by default an out-of-bounds update is dropped, as in JAX)
    f = fg.jit(lambda table, idx: table.at[idx].add(1.0, mode="promise_in_bounds"))
    table = np.zeros((3, 2), np.float32)
    np.testing.assert_array_equal(np.asarray(f(table, np.array([0, 2, 2]))), [[1, 1], [0, 0], [2, 2]])
    with pytest.raises(IndexError, match=r"^scatter_add: invalid arguments \(f32\[3,2\], .*index 5"):
        f(table, np.array([0, 5, 1]))


class _Tagged(fg.Array):
    """An array of a made-up backend: numpy buffers, host implementations."""

    __slots__ = ()
    device = "tagged"


class _TaggedBackend:
    """The least a backend provides for jit: arrays in and out, and optionally ``compile``."""

    name = "tagged"
    compile = None

    def device_value(self, a):
        return a._value if isinstance(a, fg.Array) else a

    def wrap(self, out):
        return _Tagged(np.asarray(out))

    def host_value(self, value):
        return value

    def missing_impl(self, prim):
        return prim.impl

    def to_device(self, x):
        return _Tagged(x._value)


def test_jit_on_a_backend_without_compile_replays_the_trace_op_by_op():
    _Tagged.backend = _TaggedBackend()
    traced = []

    def f(x, w):
        traced.append(1)
        return fnp.tanh(x @ w) * fnp.ones(3)   # a constant made while tracing meets the device array
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    jf = fg.jit(f)
    for _ in range(2):
        out = jf(_Tagged(x), _Tagged(w))
        assert type(out) is _Tagged
        np.testing.assert_allclose(out._value, np.tanh(x.astype(np.float64) @ w), rtol=1e-5)
    assert len(traced) == 1   # traced once, run twice
    host = jf(x, w)           # host arrays: the host's compiled program, a separate signature
    assert type(host) is fg.Array and len(traced) == 2


def test_jit_on_a_backend_with_compile_uses_it():
    class Compiling(_TaggedBackend):
        def __init__(self):
            self.compiled = []

        def compile(self, jaxpr):   # reuse the host's compiler; results stay on this backend
            self.compiled.append(jaxpr)
            program = cpu_backend.compile(jaxpr)
            program.run = lambda buffers, run=program.run: [_Tagged(o._value) for o in run(buffers)]
            return program
    backend = _Tagged.backend = Compiling()
    x = np.linspace(0, 1, 6, dtype=np.float32)
    jf = fg.jit(lambda v: fnp.sin(v) * 2.0 + 1.0)
    outs = [jf(_Tagged(x)) for _ in range(3)]
    assert len(backend.compiled) == 1 and all(type(o) is _Tagged for o in outs)
    np.testing.assert_allclose(outs[-1]._value, np.sin(x.astype(np.float64)) * 2 + 1, rtol=1e-6)


def test_chains_of_reshapes_and_transposes_fold():
    """``vmap`` of a matrix-vector product leaves reshape triples that give back their start's shape, and its
    transpose rule transposes twice: the compiler folds each chain into one step, or none."""
    x = np.arange(24, dtype=np.float32).reshape(4, 6)

    def f(x):
        same = x.reshape(24).reshape(6, 4).reshape(4, 6) * 2.0       # back to x's shape: no reshape
        twice = fnp.transpose(fnp.transpose(x.reshape(2, 3, 4), (1, 2, 0)), (2, 0, 1))   # the identity order
        once = x.reshape(24).reshape(3, 8).T + 1.0                     # one reshape and one transpose remain
        return same, twice, once

    program = fg.jit(f).lower(x)
    prims = _prims(program.jaxpr)
    assert prims.count("reshape") == 2 and prims.count("transpose") == 1, program   # 4x6 -> 2x3x4 and -> 3x8
    got = fg.jit(f)(x)
    want = (x * 2.0, x.reshape(2, 3, 4), x.reshape(3, 8).T + 1.0)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)


def test_vmapped_dot_gradient_has_no_reshape_chains():
    """The gradient of ``vmap(dot)`` layers (JAX's MNIST tutorial's ``predict``) keeps no reshape of a
    reshape and no transpose of a transpose, and matches a float64 reference."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((5, 7)).astype(np.float32)
    xs = rng.standard_normal((3, 7)).astype(np.float32)

    def loss(w, xs):
        return fnp.sum(fnp.tanh(fg.vmap(lambda x: fnp.dot(w, x))(xs)))

    program = fg.jit(fg.grad(loss)).lower(w, xs)
    made = {id(v): e.prim.name for e in program.jaxpr.eqns if getattr(e.prim, "name", None) in ("reshape", "transpose")
            for v in e.outvars}
    chained = [e for e in program.jaxpr.eqns if getattr(e.prim, "name", None) in ("reshape", "transpose")
               and made.get(id(e.inputs[0])) == e.prim.name]
    assert not chained, program
    w64, xs64 = w.astype(np.float64), xs.astype(np.float64)
    want = ((1 - np.tanh(xs64 @ w64.T) ** 2).T @ xs64)
    np.testing.assert_allclose(np.asarray(fg.jit(fg.grad(loss))(w, xs)), want, rtol=1e-5, atol=1e-6)
