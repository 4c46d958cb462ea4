"""Jitted loops compiled into one numba function (``funcgrad.compiler.loops``).

Each compiled loop is checked three ways: that it was compiled and ran as one
function (the module's counters), that its results are bit for bit those of
the step-by-step loop (the same jitted program with ``jit_loops`` off: the same
kernels on the same values), and against a float64 numpy loop. Bodies the
generator does not take fall back to the step-by-step loop, with the reason
recorded. Shapes are small and the loops few: each is one numba compile.
"""
from __future__ import annotations

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.compiler import loops
from conftest import config_set

X = np.linspace(0.1, 1.0, 16, dtype=np.float32)


@pytest.fixture
def eager_compile(monkeypatch):
    """Loops compile on their first call, however short."""
    monkeypatch.setattr(loops, "MIN_STEPS", 0)


def _runs_compiled(f, *args):
    """``f(*args)`` with compiled loops on, as numpy, and how many calls ran a compiled loop."""
    before = loops.stats()["runs"]
    out = [np.asarray(o) for o in fg.tree_util.tree_leaves(f(*args))]
    return out, loops.stats()["runs"] - before


def _step_by_step(f, *args):
    with config_set("jit_loops", False):
        before = loops.stats()["runs"]
        out = [np.asarray(o) for o in fg.tree_util.tree_leaves(f(*args))]
        assert loops.stats()["runs"] == before, "jit_loops=False must run no compiled loop"
    return out


def _assert_same_bits(compiled, stepped):
    assert len(compiled) == len(stepped)
    for a, b in zip(compiled, stepped):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        assert a.tobytes() == b.tobytes(), (a, b)


def _fori_ref(x, n):
    x = x.astype(np.float64)
    for _ in range(n):
        x = x * 0.999 + np.sin(x) * 0.001
    return x


def test_fori_loop_runs_as_one_function(eager_compile):
    f = fg.jit(lambda x: lax.fori_loop(0, 300, lambda i, v: v * 0.999 + fnp.sin(v) * 0.001, x))
    compiled_before = loops.stats()["compiled"]
    (out,), runs = _runs_compiled(f, X)
    assert runs == 1
    (again,), runs = _runs_compiled(f, X)
    assert runs == 1 and loops.stats()["compiled"] - compiled_before <= 1, "compiled once per loop"
    _assert_same_bits([out], _step_by_step(f, X))
    _assert_same_bits([again], [out])
    np.testing.assert_allclose(out, _fori_ref(X, 300), rtol=1e-5)
    assert loops.explain(f.lower(X)) == ["scan: compiles into one function"]


def test_while_loop_with_a_data_dependent_trip_count(eager_compile):
    def f(x):
        return lax.while_loop(lambda c: fnp.sum(c * c) < 40.0, lambda c: c * 1.05 + 0.01, x)

    jf = fg.jit(f)
    for scale in (1.0, 0.5, 3.0):   # 3.0: the predicate is false at once, a zero-trip loop
        x = X * scale
        (out,), runs = _runs_compiled(jf, x)
        assert runs == 1
        _assert_same_bits([out], _step_by_step(jf, x))
        ref = x.astype(np.float64)
        while np.sum(ref.astype(np.float32) ** 2) < 40.0:
            ref = ref * 1.05 + 0.01
        np.testing.assert_allclose(out, ref, rtol=1e-5)


def test_fori_loop_with_traced_bounds_and_an_integer_counter(eager_compile):
    def f(x, hi):
        return lax.fori_loop(0, hi, lambda i, v: v * 0.5 + fnp.cos(v) + i.astype(np.float32) * 0.01, x)

    jf = fg.jit(f)
    assert "while[" in str(jf.lower(X, 7))
    for hi in (7, 0):
        (out,), runs = _runs_compiled(jf, X, hi)
        assert runs == 1
        _assert_same_bits([out], _step_by_step(jf, X, hi))
        ref = X.astype(np.float64)
        for i in range(hi):
            ref = ref * 0.5 + np.cos(ref) + i * 0.01
        np.testing.assert_allclose(out, ref, rtol=1e-5)


def test_zero_trip_loops_return_a_copy_of_the_initial_carry(eager_compile):
    x = fnp.array(X)
    for f in (fg.jit(lambda v: lax.fori_loop(0, 0, lambda i, c: fnp.sin(c) * 2.0 + 1.0, v)),
              fg.jit(lambda v: lax.while_loop(lambda c: fnp.sum(c * c) < 1.0, lambda c: fnp.sin(c) * 2.0 + c, v))):
        (out,), runs = _runs_compiled(f, x)
        assert runs == 1
        np.testing.assert_array_equal(out, X)
        y = f(x)
        assert not np.shares_memory(np.asarray(y), np.asarray(x))


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_slices_xs_and_writes_ys(eager_compile, reverse):
    def f(c0, xs):
        def step(c, x):
            c = c * 0.5 + x
            return c, (fnp.sin(c) * c, c > 0.25)
        return lax.scan(step, c0, xs, reverse=reverse)

    rng = np.random.default_rng(0)
    c0 = rng.standard_normal((2, 3)).astype(np.float32)
    xs = rng.standard_normal((5, 2, 3)).astype(np.float32)
    jf = fg.jit(f)
    out, runs = _runs_compiled(jf, c0, xs)
    assert runs == 1
    _assert_same_bits(out, _step_by_step(jf, c0, xs))
    c, ys, flags = c0.astype(np.float64), [None] * 5, [None] * 5
    for t in (range(4, -1, -1) if reverse else range(5)):
        c = c * 0.5 + xs[t]
        ys[t], flags[t] = np.sin(c) * c, c > 0.25
    np.testing.assert_allclose(out[0], c, rtol=1e-6)
    np.testing.assert_allclose(out[1], np.stack(ys), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out[2], np.stack(flags))


def test_derivatives_and_batching_of_compiled_loops(eager_compile):
    def loop(v):
        return lax.fori_loop(0, 20, lambda i, c: fnp.sin(c) * 0.9 + c * 0.2, v)

    def ref(v):
        v = v.astype(np.float64)
        for _ in range(20):
            v = np.sin(v) * 0.9 + v * 0.2
        return v

    x = X[:5]
    x64 = x.astype(np.float64)
    grad = fg.jit(fg.grad(lambda v: fnp.sum(loop(v))))
    jvp = fg.jit(lambda v, t: fg.jvp(loop, (v,), (t,)))
    vmapped = fg.jit(fg.vmap(loop))
    batch = np.stack([x, x * 2.0, x - 0.3]).astype(np.float32)
    for f, args in ((grad, (x,)), (jvp, (x, np.ones_like(x))), (vmapped, (batch,))):
        out, runs = _runs_compiled(f, *args)
        assert runs >= 1, "the forward loop compiles"
        _assert_same_bits(out, _step_by_step(f, *args))
    eps = 1e-6
    fd = [(ref(x64 + eps * e) - ref(x64 - eps * e)).sum() / (2 * eps) for e in np.eye(5)]
    np.testing.assert_allclose(np.asarray(grad(x)), fd, rtol=1e-4, atol=1e-5)
    primal, tangent = jvp(x, np.ones_like(x))
    np.testing.assert_allclose(np.asarray(primal), ref(x), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(tangent), (ref(x64 + eps) - ref(x64 - eps)) / (2 * eps), rtol=1e-4)
    np.testing.assert_allclose(np.asarray(vmapped(batch)), np.stack([ref(b) for b in batch]), rtol=1e-5)


def test_reverse_mode_through_a_jitted_while_loop(eager_compile):
    def loss(x, n):
        return fnp.sum(lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, fnp.sin(c[1]) * 0.5 + c[1]),
                                      (0, x))[1])

    g = fg.jit(fg.value_and_grad(loss))   # the value: a while loop counting its trips; the gradient: while_grad
    x = X[:4]
    out, runs = _runs_compiled(g, x, 6)
    assert runs >= 1, "the forward loop compiles"
    _assert_same_bits(out, _step_by_step(g, x, 6))

    def ref(v):
        v = v.astype(np.float64)
        for _ in range(6):
            v = np.sin(v) * 0.5 + v
        return v.sum()
    eps = 1e-6
    fd = [(ref(x + eps * e) - ref(x - eps * e)) / (2 * eps) for e in np.eye(4)]
    np.testing.assert_allclose(out[0], ref(x), rtol=1e-5)
    np.testing.assert_allclose(out[1], fd, rtol=1e-4, atol=1e-5)


def _rnn_inputs(T=6, B=3, H=4):
    rng = np.random.default_rng(1)
    return ({"W": (rng.standard_normal((H, H)) * 0.5).astype(np.float32),
             "U": rng.standard_normal((H, H)).astype(np.float32),
             "b": (rng.standard_normal(H) * 0.1).astype(np.float32)},
            rng.standard_normal((T, B, H)).astype(np.float32))


def _rnn_loss(p, xs):
    def step(h, x):
        h = fnp.tanh(h @ p["W"] + x @ p["U"] + p["b"])
        return h, fnp.sum(h * h)
    _, ys = lax.scan(step, fnp.zeros(xs.shape[1:]), xs)
    return fnp.sum(ys) / xs.shape[0]


def _rnn_reference(p, xs):
    """The loss in float64."""
    p = {k: v.astype(np.float64) for k, v in p.items()}
    h, loss = np.zeros(xs.shape[1:]), 0.0
    for x in xs.astype(np.float64):
        h = np.tanh(h @ p["W"] + x @ p["U"] + p["b"])
        loss += float(np.sum(h * h))
    return loss / len(xs)


def test_matmul_bodies_run_step_by_step(eager_compile):
    # numba's np.dot would call scipy's BLAS, not numpy's: the RNN's loop keeps its steps.
    p, xs = _rnn_inputs()
    forward = fg.jit(_rnn_loss)
    (why,) = loops.explain(forward.lower(p, xs))
    assert why.startswith("scan: runs step by step") and "matmul" in why, why
    (value,), runs = _runs_compiled(forward, p, xs)
    assert runs == 0
    np.testing.assert_allclose(value, _rnn_reference(p, xs), rtol=1e-5)


def test_a_transpose_in_the_body(eager_compile):
    def f(c0):
        return lax.fori_loop(0, 4, lambda i, c: ((fnp.sin(c) * 0.9).T * 0.5 + 0.25).T, c0)

    c0 = np.arange(6, dtype=np.float32).reshape(2, 3) * 0.1
    jf = fg.jit(f)
    assert loops.explain(jf.lower(c0)) == ["scan: compiles into one function"], str(jf.lower(c0))
    out, runs = _runs_compiled(jf, c0)
    assert runs == 1
    _assert_same_bits(out, _step_by_step(jf, c0))
    ref = c0.astype(np.float64)
    for _ in range(4):
        ref = np.sin(ref) * 0.9 * 0.5 + 0.25
    np.testing.assert_allclose(out[0], ref, rtol=1e-6)


def test_a_sum_over_a_leading_axis_is_numpys(eager_compile):
    # numpy adds the rows to zeros in order: a column of -0.0 sums to +0.0.
    def f(c0):
        def step(c, _):
            c = c * 0.5
            return c, fnp.sum(c, axis=0)
        return lax.scan(step, c0, None, length=3)

    c0 = np.array([[-0.0, 1.0, 2.0, -0.0], [-0.0, -1.0, 3.0, -0.0], [-0.0, 0.5, 1e-3, 5.0]], np.float32)
    jf = fg.jit(f)
    assert loops.explain(jf.lower(c0)) == ["scan: compiles into one function"]
    out, runs = _runs_compiled(jf, c0)
    assert runs == 1
    _assert_same_bits(out, _step_by_step(jf, c0))
    c, ys = c0.astype(np.float64), []
    for _ in range(3):
        c = c * 0.5
        ys.append(np.add.reduce(c, axis=0))
    np.testing.assert_allclose(out[1], np.stack(ys), rtol=1e-6)
    np.testing.assert_array_equal(np.signbit(out[1]), np.signbit(np.stack(ys)))


def test_unsupported_bodies_run_step_by_step(eager_compile):
    # A lone sum along a contiguous axis: numpy sums pairwise, which the generated loop does not.
    f = fg.jit(lambda x: lax.fori_loop(0, 5, lambda i, c: c * 0.5 + fnp.sum(c), x))
    unsupported = loops.stats()["unsupported"]
    (out,), runs = _runs_compiled(f, X)
    assert runs == 0 and loops.stats()["unsupported"] == unsupported + 1
    (why,) = loops.explain(f.lower(X))
    assert why.startswith("scan: runs step by step") and "reduce_sum" in why, why
    ref = X.astype(np.float64)
    for _ in range(5):
        ref = ref * 0.5 + ref.sum()
    np.testing.assert_allclose(out, ref, rtol=1e-5)


def test_when_loops_compile(monkeypatch):
    monkeypatch.setattr(loops, "MIN_STEPS", 50)
    monkeypatch.setattr(loops, "MIN_TOTAL_STEPS", 100)
    long = fg.jit(lambda x: lax.fori_loop(0, 60, lambda i, v: fnp.cos(v) * 0.75 + v * 0.125, x))
    assert _runs_compiled(long, X)[1] == 1, "a call of MIN_STEPS steps compiles at once"
    short = fg.jit(lambda x: lax.fori_loop(0, 40, lambda i, v: fnp.cos(v) * 0.5 + v * 0.25, x))
    runs = [_runs_compiled(short, X)[1] for _ in range(4)]
    assert runs == [0, 0, 1, 1], "40 + 40 steps run step by step; the third call (120 >= 100 in all) compiles"


def test_a_while_loop_switches_to_the_compiled_loop_mid_call(monkeypatch):
    monkeypatch.setattr(loops, "MIN_STEPS", 10)
    f = fg.jit(lambda x, n: lax.fori_loop(0, n, lambda i, v: fnp.sin(v) * 0.5 + v * 0.25, x))
    (out,), runs = _runs_compiled(f, X, 30)   # 10 steps step by step, then 20 compiled
    assert runs == 1
    _assert_same_bits([out], _step_by_step(f, X, 30))
    ref = X.astype(np.float64)
    for _ in range(30):
        ref = np.sin(ref) * 0.5 + ref * 0.25
    np.testing.assert_allclose(out, ref, rtol=1e-5)


def test_the_switch_turns_it_off(eager_compile):
    f = fg.jit(lambda x: lax.fori_loop(0, 10, lambda i, v: fnp.sin(v) + v * 0.5, x))
    with config_set("jit_loops", False):
        assert _runs_compiled(f, X)[1] == 0
    assert _runs_compiled(f, X)[1] == 1
