"""Jitted loops compiled into one numba function (``funcgrad.compiler.loops``).

Each compiled loop is checked three ways: that it was compiled and ran as one
function (the module's counters), that its results are bit for bit those of
the step-by-step loop (the same jitted program with ``jit_loops`` off: the same
kernels on the same values), and against a float64 numpy loop. Bodies the
generator does not take fall back to the step-by-step loop, with the reason
recorded. Matrix products call numpy's BLAS (``funcgrad.compiler.loop_blas``),
whose helper is also checked against ``np.matmul`` directly. Shapes are small
and the loops few: each is one numba compile.
"""
from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.compiler import kernel_cache, loop_blas, loops
from conftest import config_set

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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


def _rnn_grad_reference(p, xs, eps=1e-6):
    """The loss's gradient in float64, by central differences."""
    grads = {}
    for k, v in p.items():
        g = np.zeros(v.shape)
        for idx in np.ndindex(v.shape):
            up, down = dict(p), dict(p)
            up[k], down[k] = v.astype(np.float64).copy(), v.astype(np.float64).copy()
            up[k][idx] += eps
            down[k][idx] -= eps
            g[idx] = (_rnn_reference(up, xs) - _rnn_reference(down, xs)) / (2 * eps)
        grads[k] = g
    return grads


def test_an_rnn_forward_and_backward_compile_with_numpys_blas(eager_compile):
    # The products of both loops (h @ W, and the backward's ct @ W.T, h.T @ ct) call numpy's BLAS from
    # the generated function: the same calls np.matmul makes, so the same bits.
    p, xs = _rnn_inputs()
    both = fg.jit(fg.value_and_grad(_rnn_loss))
    assert loops.explain(both.lower(p, xs)) == ["scan: compiles into one function"] * 2
    out, runs = _runs_compiled(both, p, xs)
    assert runs == 2
    _assert_same_bits(out, _step_by_step(both, p, xs))
    value, grads = both(p, xs)
    np.testing.assert_allclose(float(value), _rnn_reference(p, xs), rtol=1e-5)
    expected = _rnn_grad_reference(p, xs)
    for k in p:
        np.testing.assert_allclose(np.asarray(grads[k]), expected[k], rtol=1e-3, atol=1e-4)


def test_vector_products_and_a_matrix_times_its_transpose_in_float64(eager_compile):
    # np.matmul calls gemv for a matrix times a column (and a row times a matrix), dot for a row
    # times a column, syrk for a matrix times its own transpose (a view of the same memory).  float32
    # takes the same paths (the RNN above; the helper against np.matmul below).
    dtype = "float64"
    def body(i, c):
        v, r, s = c
        v = fnp.tanh(m @ v) * 0.9                # (4, 4) @ (4, 1): gemv
        r = fnp.tanh(r @ m) * 0.5 + (v.T @ v)    # (1, 4) @ (4, 4): gemv; (1, 4) @ (4, 1): dot
        s = fnp.tanh(s @ s.T) * 0.5              # s @ s.T: syrk
        return v, r, s

    rng = np.random.default_rng(3)
    m = (rng.standard_normal((4, 4)) * 0.5).astype(dtype)
    c = tuple((rng.standard_normal(shape) * 0.5).astype(dtype) for shape in ((4, 1), (1, 4), (4, 4)))
    with config_set("enable_x64", True):
        jf = fg.jit(lambda c: lax.fori_loop(0, 5, body, c))
        assert loops.explain(jf.lower(c)) == ["scan: compiles into one function"]
        out, runs = _runs_compiled(jf, c)
        assert runs == 1 and all(o.dtype == np.dtype(dtype) for o in out)
        _assert_same_bits(out, _step_by_step(jf, c))
    v, r, s = (x.astype(np.float64) for x in c)
    m64 = m.astype(np.float64)
    for _ in range(5):
        v = np.tanh(m64 @ v) * 0.9
        r = np.tanh(r @ m64) * 0.5 + v.T @ v
        s = np.tanh(s @ s.T) * 0.5
    for got, want in zip(out, (v, r, s)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_the_product_helper_is_np_matmul_bit_for_bit():
    # The generated loops' matrix product, on C matrices and transposed views of all shapes np.matmul
    # treats apart: gemm with each transpose flag, gemv, dot, the plain loop for an outer product, syrk.
    helpers = loop_blas.load()
    rng = np.random.default_rng(4)
    for dtype in (np.float32, np.float64):
        helper = getattr(helpers, loop_blas.function(dtype))
        for m, n, p in itertools.product((1, 2, 5), (1, 3, 17), (1, 2, 6)):
            for ta, tb in itertools.product((False, True), repeat=2):
                a = rng.standard_normal((n, m) if ta else (m, n)).astype(dtype)
                b = rng.standard_normal((p, n) if tb else (n, p)).astype(dtype)
                expected = np.matmul(a.T if ta else a, b.T if tb else b)
                out = np.empty(m * p, dtype)
                helper(a.ctypes.data, *((1, m) if ta else (n, 1)), b.ctypes.data,
                       *((1, n) if tb else (p, 1)), out.ctypes.data, m, n, p)
                assert out.tobytes() == expected.tobytes(), (dtype, m, n, p, ta, tb)
                np.testing.assert_allclose(out.reshape(m, p), (a.T if ta else a).astype(np.float64)
                                           @ (b.T if tb else b).astype(np.float64), rtol=1e-4, atol=1e-4)
            x = rng.standard_normal((m, n)).astype(dtype)   # x @ x.T and x.T @ x: one memory, syrk
            for rows, inner, first, second in ((m, n, (n, 1), (1, n)), (n, m, (1, n), (n, 1))):
                expected = x @ x.T if rows == m and first == (n, 1) else x.T @ x
                out = np.empty(rows * rows, dtype)
                helper(x.ctypes.data, *first, x.ctypes.data, *second, out.ctypes.data, rows, inner, rows)
                assert out.tobytes() == expected.tobytes(), (dtype, m, n, "syrk")


def test_without_numpys_blas_matmul_loops_run_step_by_step(eager_compile, monkeypatch):
    monkeypatch.setattr(loop_blas, "AVAILABLE", False)
    monkeypatch.setattr(loop_blas, "REASON", "numpy's BLAS has no CBLAS symbols")
    p, xs = _rnn_inputs()
    forward = fg.jit(_rnn_loss)
    (why,) = loops.explain(forward.lower(p, xs))
    assert why == "scan: runs step by step: matmul (numpy's BLAS has no CBLAS symbols)", why
    (value,), runs = _runs_compiled(forward, p, xs)
    assert runs == 0
    np.testing.assert_allclose(value, _rnn_reference(p, xs), rtol=1e-5)


def test_a_strided_matrix_product_operand_runs_that_call_step_by_step(eager_compile):
    # W.T computed outside the loop reaches it as a transposed view: np.matmul reads it with a
    # transpose flag, so the compiled loop (whose operands are C arrays) leaves the call step by step.
    # A strided operand no product reads is copied as before: that loop compiles.
    p, xs = _rnn_inputs()
    f = fg.jit(lambda w, xs: lax.scan(lambda h, x: (fnp.tanh(h @ w.T + x), fnp.sum(h, axis=0)), xs[0] * 0.0, xs))
    strided = loops.stats()["strided"]
    out, runs = _runs_compiled(f, p["W"], xs)
    assert runs == 0 and loops.stats()["strided"] == strided + 1
    _assert_same_bits(out, _step_by_step(f, p["W"], xs))
    h = np.zeros(xs.shape[1:])
    for x in xs.astype(np.float64):
        h = np.tanh(h @ p["W"].T.astype(np.float64) + x)
    np.testing.assert_allclose(out[0], h, rtol=1e-5)

    batch_major = np.ascontiguousarray(xs.swapaxes(0, 1))
    g = fg.jit(lambda w, xb: lax.scan(lambda h, x: (fnp.tanh(h @ w + x), fnp.sum(h, axis=0)), xb[:, 0] * 0.0,
                                      fnp.swapaxes(xb, 0, 1)))   # a strided view of the xs, read elementwise
    out, runs = _runs_compiled(g, p["W"], batch_major)
    assert runs == 1 and loops.stats()["strided"] == strided + 1
    _assert_same_bits(out, _step_by_step(g, p["W"], batch_major))
    h = np.zeros(xs.shape[1:])
    for x in xs.astype(np.float64):
        h = np.tanh(h @ p["W"].astype(np.float64) + x)
    np.testing.assert_allclose(out[0], h, rtol=1e-5)


_PRODUCT_LOOP = """
import numpy as np, funcgrad as fg, funcgrad.numpy as fnp
from funcgrad import lax
m = (np.eye(4) * 0.5 + 0.1).astype(np.float32)
product = fg.jit(lambda c, n: lax.fori_loop(0, n, lambda i, c: c @ m, c))   # traced bounds: a while loop
c0 = np.linspace(0.1, 1.0, 12, dtype=np.float32).reshape(3, 4)
"""

_FRESH = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {repo!r})
    from funcgrad.compiler import loops
    loops.MIN_STEPS = 0
""") + _PRODUCT_LOOP + textwrap.dedent("""
    out = product(c0, 30)
    fns = [loop.fn for table in loops._decisions.values() for loop in table.values() if hasattr(loop, "fn")]
    print(json.dumps({"out": np.asarray(out).tobytes().hex(), "runs": loops.stats()["runs"],
                      "hits": sum(sum(f.stats.cache_hits.values()) for f in fns),
                      "misses": sum(sum(f.stats.cache_misses.values()) for f in fns)}))
""")


def test_product_loops_compile_sooner_and_load_from_the_disk_cache_in_a_fresh_process(monkeypatch):
    # A step with a matrix product counts for more (1 + PRODUCT_WEIGHT): its loop compiles after fewer steps.
    # The BLAS symbols link by name: the machine code numba cached runs in another process.
    monkeypatch.setattr(loops, "MIN_STEPS", 50)
    monkeypatch.setattr(loops, "MIN_TOTAL_STEPS", 10**6)
    plain = fg.jit(lambda x: lax.fori_loop(0, 40, lambda i, v: fnp.cos(v) * 0.5 + v * 0.25, x))
    assert _runs_compiled(plain, X)[1] == 0, "40 steps of a two-equation body: under MIN_STEPS"
    scope: dict = {}
    exec(_PRODUCT_LOOP, scope)
    product, c0 = scope["product"], scope["c0"]
    (out,), runs = _runs_compiled(product, c0, 30)
    assert loops.PRODUCT_WEIGHT == 1.5
    assert runs == 1, "a step with a product counts 2.5: compiled after 20 of the 30 steps"
    _assert_same_bits([out], _step_by_step(product, c0, 30))
    ref = c0.astype(np.float64)
    for _ in range(30):
        ref = ref @ scope["m"].astype(np.float64)
    np.testing.assert_allclose(out, ref, rtol=1e-5)

    directory = kernel_cache.cache_dir()
    assert directory is not None, "a kernel cache on disk"
    env = dict(os.environ, FUNCGRAD_CACHE_DIR=directory)
    p = subprocess.run([sys.executable, "-c", _FRESH.replace("{repo!r}", repr(REPO))], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["runs"] == 1 and report["misses"] == 0 and report["hits"] == 1, report
    assert bytes.fromhex(report["out"]) == out.tobytes()


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
