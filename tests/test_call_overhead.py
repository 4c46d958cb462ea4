"""The fixed cost of a compiled call: the fast path of ``Program`` and of loops over compiled bodies.

A compiled program with constants runs the general loop on its first call
(which finds the outputs aliasing them), and every program runs it under the profiler, ``debug_nans`` or
donation; every other call takes ``Program._run_fast``, whose per-step
functions are built once.  Each test checks that the path it means was
taken (``program.fast_runs``) and that the results are float64 numpy's, or
bit-for-bit the general path's.  Nothing here is timed: the Python work of a
call is counted instead.
"""
from __future__ import annotations

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from conftest import config_set
from call_counting import _python_calls, _tiny


def _program(jitted):
    """The one program ``jitted`` has compiled."""
    (program, _), = jitted._cache.values()
    return program


def _general(program, args):
    with program.lock:
        return program._run_general(args, None, None)


# ------------------------------------------------------------ one program


def test_tiny_jit_grad_takes_the_fast_path_with_the_general_paths_bits():
    g = fg.jit(fg.grad(lambda x: fnp.sum(fnp.sin(x) * x)))
    x, ref = _tiny()
    first = np.asarray(g(x))                      # the general path: finds the constant-aliased outputs
    program = _program(g)
    assert program.fast_runs == 0
    fast = np.asarray(g(x))
    assert program.fast_runs == 1
    np.testing.assert_allclose(fast, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(fast, first)
    np.testing.assert_array_equal(fast, _general(program, [x._value])[0])
    assert fast.dtype == np.float32


def test_tiny_jit_call_runs_few_python_calls():
    g = fg.jit(fg.grad(lambda x: fnp.sum(fnp.sin(x) * x)))
    x, ref = _tiny()
    g(x)
    g(x)
    out, counts = _python_calls(g, x)
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-6)
    # __call__, run, _run_fast, the kernel's step, the recycled output buffer, the kernel (as numba's
    # dispatcher reports it) and _wrap: 7, and 2 to spare (the general path runs 20).
    assert sum(counts.values()) <= 9, counts.most_common(12)


def test_outputs_stay_valid_and_are_recycled_once_dropped():
    f = fg.jit(lambda x: fnp.tanh(x) * 2.0 + x)
    x64 = np.linspace(-2.0, 2.0, 12).reshape(3, 4)
    x = fnp.array(x64.astype(np.float32))
    ref = np.tanh(x64) * 2 + x64
    kept = [f(x) for _ in range(6)]               # held: each call writes a buffer of its own
    assert _program(f).fast_runs >= 5             # (no constants: even the first call may take it)
    for out in kept:
        np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-6)
    assert len({id(out._value) for out in kept}) == 6
    assert not kept[-1]._value.flags.writeable


def test_planned_buffers_views_are_dropped_with_the_buffers():
    def f(x, w):
        h = fnp.maximum(x @ w + 1.0, 0.0)         # a fused kernel writing a planned buffer
        return fnp.sum(fnp.tanh(h @ w.T) * 2.0)

    rng = np.random.default_rng(4)
    x64, w64 = rng.standard_normal((16, 8)), rng.standard_normal((8, 8))
    x, w = fnp.array(x64.astype(np.float32)), fnp.array(w64.astype(np.float32))
    ref = np.sum(np.tanh(np.maximum(x64 @ w64 + 1, 0) @ w64.T) * 2)
    jf = fg.jit(f)
    jf(x, w)
    program = _program(jf)
    runs = program.fast_runs
    np.testing.assert_allclose(np.asarray(jf(x, w)), ref, rtol=1e-4)
    assert program.fast_runs == runs + 1 and program._views, "the kernel's planned buffer has a kept 2-d view"
    kept = [buf for buf, _ in program._views.values()]
    assert all(any(buf is b for b in program.buffers) for buf in kept)
    program.release_buffers()
    assert not program._views
    np.testing.assert_allclose(np.asarray(jf(x, w)), ref, rtol=1e-4)
    assert program.fast_runs == runs + 2 and program._views


def test_an_error_on_the_fast_path_names_the_primitive_as_the_general_path_does():
    def check(v):
        if np.any(v < 0):
            raise ValueError("negative input")
        return v

    f = fg.jit(lambda x: fg.pure_callback(check, fg.ShapeDtypeStruct((3,), np.float32), x * 2.0) + 1.0)
    good, bad = fnp.array([1.0, 2.0, 3.0]), fnp.array([1.0, -2.0, 3.0])
    with pytest.raises(ValueError) as general:
        f(bad)                                    # first call: the general path
    np.testing.assert_allclose(np.asarray(f(good)), [3.0, 5.0, 7.0])
    program = _program(f)
    runs = program.fast_runs
    with pytest.raises(ValueError) as fast:
        f(bad)
    assert program.fast_runs == runs + 1
    assert str(fast.value) == str(general.value)
    assert "pure_callback" in str(fast.value) and "negative input" in str(fast.value)


def test_literal_and_constant_outputs_are_fresh_arrays():
    c = np.arange(3, dtype=np.float32)
    f = fg.jit(lambda x: (x + 1.0, fnp.asarray(c), 2.0))
    x = fnp.array([1.0, 2.0, 3.0])
    f(x)
    outs = [f(x) for _ in range(2)]
    assert _program(f).fast_runs == 2
    for a, b, lit in outs:
        np.testing.assert_array_equal(np.asarray(a), [2.0, 3.0, 4.0])
        np.testing.assert_array_equal(np.asarray(b), c)
        assert float(lit) == 2.0
    assert outs[0][1]._value is not outs[1][1]._value


# ------------------------------------------------------------ what takes the general path


def test_profiled_calls_take_the_general_path_and_are_recorded():
    g = fg.jit(fg.grad(lambda x: fnp.sum(fnp.sin(x) * x)))
    x, ref = _tiny()
    g(x)
    program = _program(g)
    with fg.profiler.profile() as prof:
        out = g(x)
    assert program.fast_runs == 0
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-6)
    kernels = [row for row in prof.stats() if row["category"] == "kernel"]
    assert sum(row["calls"] for row in kernels) == 1
    g(x)
    assert program.fast_runs == 1


def test_debug_nans_takes_the_general_path_and_still_raises():
    f = fg.jit(lambda x: fnp.log(x) * 2.0)
    x = fnp.array([1.0, 2.0])
    f(x)
    fast_program = _program(f)
    runs = fast_program.fast_runs
    f(x)
    assert fast_program.fast_runs == runs + 1
    with config_set("debug_nans", True):
        np.testing.assert_allclose(np.asarray(f(x)), 2 * np.log([1.0, 2.0]), rtol=1e-6)
        f(x)                                      # the checked program's second call
        with pytest.raises(FloatingPointError, match="log"):
            f(fnp.array([-1.0, 2.0]))
    checked = [p for p, _ in f._cache.values() if p is not fast_program]
    assert checked and all(p.fast_runs == 0 for p in checked)


def test_donating_calls_take_the_general_path_and_write_into_the_donated_buffer():
    step = fg.jit(lambda p, g: p - 0.5 * g, donate_argnums=0)
    g = fnp.array(np.full(64, 2.0, np.float32))
    p = fnp.array(np.arange(64, dtype=np.float32))
    p = step(p, g)
    program = _program(step)
    assert program.donation_plan
    for _ in range(3):
        address = p._value.ctypes.data
        p = step(p, g)
        assert p._value.ctypes.data == address     # the output went into the donated buffer
    assert program.fast_runs == 0
    np.testing.assert_array_equal(np.asarray(p), np.arange(64) - 4.0)


# ------------------------------------------------------------ loops


def test_fori_loop_body_runs_on_the_fast_path():
    n = 50
    f = fg.jit(lambda x: lax.fori_loop(0, n, lambda i, v: v * 0.999 + fnp.sin(v) * 0.001, x))
    x64 = np.linspace(0.1, 1.0, 16)
    x = fnp.array(x64.astype(np.float32))
    f(x)
    out = f(x)
    (scan,) = [s for s in _program(f).steps if s[0].name == "scan"]
    body = scan[2]["body"].program
    assert body.fast_runs >= n                     # every step but the first call's first
    assert len(_scalar_steps(body)) == 1           # the counter's add
    ref = x64.copy()
    for _ in range(n):
        ref = ref * 0.999 + np.sin(ref) * 0.001
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5)


@pytest.mark.parametrize("x64_mode", [False, True])
def test_loop_counter_keeps_its_dtype(x64_mode):
    with config_set("enable_x64", x64_mode):
        f = fg.jit(lambda x: lax.fori_loop(0, 7, lambda i, v: v + i * 2, x))
        x = fnp.arange(3)                         # the default int, as the counter
        f(x)
        out = f(x)
        (scan,) = [s for s in _program(f).steps if s[0].name == "scan"]
        assert scan[2]["body"].program.fast_runs >= 7
        np.testing.assert_array_equal(np.asarray(out), np.arange(3) + 2 * sum(range(7)))
        assert out.dtype == (np.int64 if x64_mode else np.int32)


def test_while_loop_with_traced_bound_runs_its_cond_and_body_fast():
    f = fg.jit(lambda x, n: lax.fori_loop(0, n, lambda i, v: v * 1.5 + 1.0, x))
    x64 = np.linspace(0.0, 1.0, 4)
    x = fnp.array(x64.astype(np.float32))
    n = fnp.array(9, dtype=fnp.int32)
    f(x, n)
    out = f(x, n)
    (loop,) = [s for s in _program(f).steps if s[0].name == "while"]
    assert loop[2]["cond"].program.fast_runs >= 9 and loop[2]["body"].program.fast_runs >= 9
    ref = x64.copy()
    for _ in range(9):
        ref = ref * 1.5 + 1.0
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-6)


def _rnn_reference(w, u, h0, xs):
    """Forward and the gradient of sum(h_T) in float64 numpy (tanh RNN, manual backprop)."""
    hs = [h0]
    for x in xs:
        hs.append(np.tanh(hs[-1] @ w + x @ u))
    gh = np.ones_like(h0)
    gw, gu = np.zeros_like(w), np.zeros_like(u)
    for t in range(len(xs), 0, -1):
        gz = gh * (1 - hs[t] ** 2)
        gw += hs[t - 1].T @ gz
        gu += xs[t - 1].T @ gz
        gh = gz @ w.T
    return hs[-1], gw, gu


def test_rnn_scan_forward_and_backward_on_the_fast_path():
    rng = np.random.default_rng(7)
    T, B, H, D = 12, 2, 5, 3
    w64, u64 = rng.standard_normal((H, H)) * 0.4, rng.standard_normal((D, H)) * 0.4
    h064, xs64 = rng.standard_normal((B, H)), rng.standard_normal((T, B, D))
    w, u, h0, xs = (fnp.array(a.astype(np.float32)) for a in (w64, u64, h064, xs64))

    def last(w, u, h0, xs):
        hT, _ = lax.scan(lambda h, x: (fnp.tanh(h @ w + x @ u), None), h0, xs)
        return hT

    fwd = fg.jit(last)
    grad = fg.jit(fg.grad(lambda w, u: fnp.sum(last(w, u, h0, xs)), argnums=(0, 1)))
    fwd(w, u, h0, xs), grad(w, u)
    hT, (gw, gu) = fwd(w, u, h0, xs), grad(w, u)
    ref_h, ref_gw, ref_gu = _rnn_reference(w64, u64, h064, xs64)
    np.testing.assert_allclose(np.asarray(hT), ref_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(gw), ref_gw, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(gu), ref_gu, rtol=1e-4, atol=1e-5)
    bodies = [s[2]["body"].program for s in _program(grad).steps if s[0].name == "scan"]
    assert bodies and all(b.fast_runs >= T for b in bodies)


# ------------------------------------------------------------ 0-d arithmetic on numpy scalars


def _scalar_steps(program):
    return [s for s in program._fast[1] if s.__qualname__.startswith("_scalar_step")]


def test_scalar_steps_wrap_around_and_keep_dtypes_as_numpy_arrays_do():
    def body(c, _):
        i, k, u, f = c
        return (i * 3 + 7, k - 5, u * 5 + 3, f * 1.5 - 0.25), (i < 1000, f >= 2.0)

    init = (fnp.array(2_000_000_000, dtype=fnp.int32), fnp.array(-7, dtype=fnp.int32),
            fnp.array(4_000_000_000, dtype=fnp.uint32), fnp.array(0.5, dtype=fnp.float32))
    f = fg.jit(lambda c: lax.scan(body, c, None, length=6))
    with config_set("jit_fusion", False):         # each operation a step of its own (else one kernel)
        f(init)
        (carry, (small, big)) = f(init)
    (scan,) = [s for s in _program(f).steps if s[0].name == "scan"]
    program = scan[2]["body"].program
    assert program.fast_runs >= 6 and len(_scalar_steps(program)) >= 6
    # numpy's reference: 0-d arrays of the same dtypes (integers wrap around)
    i, k, u, fl = (np.array(2_000_000_000, np.int32), np.array(-7, np.int32), np.array(4_000_000_000, np.uint32),
                   np.array(0.5, np.float32))
    want_small, want_big = [], []
    with np.errstate(over="ignore"):
        for _ in range(6):
            want_small.append(i < 1000)
            want_big.append(fl >= 2.0)
            i, k, u, fl = (np.multiply(i, np.int32(3)) + np.int32(7), k - np.int32(5),
                           np.multiply(u, np.uint32(5)) + np.uint32(3), fl * np.float32(1.5) - np.float32(0.25))
    for got, want in zip(carry, (i, k, u, fl)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(np.asarray(small), want_small)
    np.testing.assert_array_equal(np.asarray(big), want_big)


def test_scalar_steps_give_the_general_paths_results():
    def g(i, x):
        return (i + 3, i * 2 - x, x * 0.5 + 1.0, i > 2, x <= 1.5)

    f = fg.jit(g)
    args = (fnp.array(5, dtype=fnp.int32), fnp.array(1.25, dtype=fnp.float32))
    with config_set("jit_fusion", False):         # each operation a step of its own (else one kernel)
        f(*args)
        program = _program(f)
        fast = f(*args)
    assert program.fast_runs >= 1 and len(_scalar_steps(program)) >= 4
    general = _general(program, [a._value for a in args])
    for got, want in zip(fast, general):
        assert got.dtype == want.dtype and got.shape == () and not got._value.flags.writeable
        np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal([np.asarray(v) for v in fast], [8, 8.75, 1.625, True, True])


def test_a_dropped_program_is_freed_at_once_with_its_buffers():
    import gc
    import weakref

    from funcgrad.compiler import program as program_mod

    f = fg.jit(lambda x: fnp.tanh(x @ x.T) * 2.0 + 1.0)
    x = fnp.array(np.ones((8, 8), np.float32))
    f(x), f(x)
    program = _program(f)
    assert program._fast is not None and program.fast_runs >= 1
    ref, key = weakref.ref(program), id(program)
    del program
    gc.disable()
    try:
        f.clear_cache()                           # drops the program: no cycle may keep it alive
        assert ref() is None
        assert key not in program_mod._POOL.held
    finally:
        gc.enable()
