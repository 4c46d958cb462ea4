"""fg.profiler: counts, times, the table, the Chrome trace, and no cost or trace left when it is off.

The counts are checked against what is known independently: the primitives a
small MLP step calls eagerly (3 matmuls forward, 5 backward), and the steps of
the compiled program as ``jit(f).lower`` shows them.
"""
from __future__ import annotations

import collections
import json
import threading

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import _core

SIZES = (6, 5, 4, 3)
B = 4


def _mlp(rng):
    params = {}
    for i, (n_in, n_out) in enumerate(zip(SIZES[:-1], SIZES[1:]), 1):
        params[f"w{i}"] = fnp.asarray(rng.standard_normal((n_in, n_out)).astype(np.float32))
        params[f"b{i}"] = fnp.asarray(rng.standard_normal(n_out).astype(np.float32))
    x = fnp.asarray(rng.standard_normal((B, SIZES[0])).astype(np.float32))
    y = fnp.asarray(rng.standard_normal((B, SIZES[-1])).astype(np.float32))
    return params, x, y


def _loss(p, x, y):
    h = fnp.maximum(x @ p["w1"] + p["b1"], 0.0)
    h = fnp.maximum(h @ p["w2"] + p["b2"], 0.0)
    return fnp.mean((h @ p["w3"] + p["b3"] - y) ** 2)


def _step(p, x, y):
    g = fg.grad(_loss)(p, x, y)
    return {k: p[k] - 0.1 * g[k] for k in p}


def _counts(prof, category):
    counts = collections.Counter()
    for row in prof.stats():
        if row["category"] == category:
            counts[row["name"]] += row["calls"]
    return counts


@pytest.fixture(autouse=True)
def _profiler_left_off():
    yield
    assert _core._profiler is None
    assert _core._fast_path[0] is True


# ----------------------------------------------------------------- eager


def test_eager_counts_are_the_primitive_calls(rng):
    params, x, y = _mlp(rng)
    with fg.profiler.profile() as prof:
        _loss(params, x, y)
    assert _counts(prof, "eager")["matmul"] == 3
    with fg.profiler.profile() as prof:
        new = _step(params, x, y)
    # 3 forward; backward: dW3, dh2, dW2, dh1, dW1 (x takes no gradient).
    assert _counts(prof, "eager")["matmul"] == 8
    assert set(_counts(prof, "jit")) == set() and set(_counts(prof, "kernel")) == set()
    # The profiled step still computes the step.
    ref = _step(params, x, y)
    for k in params:
        np.testing.assert_array_equal(np.asarray(new[k]), np.asarray(ref[k]))


def test_eager_output_bytes_and_shapes():
    x = fnp.asarray(np.linspace(0.0, 1.0, 10, dtype=np.float32))
    with fg.profiler.profile(record_shapes=True) as prof:
        out = fnp.sin(x)
        fnp.sin(fnp.ones((2, 3), dtype=np.float32))
    np.testing.assert_allclose(np.asarray(out), np.sin(np.linspace(0.0, 1.0, 10)), rtol=1e-6)
    sins = {tuple(r["shapes"]): r for r in prof.stats() if r["name"] == "sin"}
    assert set(sins) == {("f32[10]",), ("f32[2,3]",)}
    assert sins[("f32[10]",)]["out_bytes"] == 40 and sins[("f32[10]",)]["calls"] == 1
    assert sins[("f32[2,3]",)]["out_bytes"] == 24
    assert sins[("f32[10]",)]["alloc_bytes"] == 40   # a new array
    with fg.profiler.profile() as views:
        fnp.transpose(fnp.ones((2, 3), dtype=np.float32))
    (t,) = [r for r in views.stats() if r["name"] == "transpose"]
    assert t["out_bytes"] == 24 and t["alloc_bytes"] == 0   # numpy's transpose is a view
    merged = [r for r in prof.stats(group_by_input_shape=False) if r["name"] == "sin"]
    assert len(merged) == 1 and merged[0]["calls"] == 2 and merged[0]["shapes"] is None


def test_tracing_records_no_eager_work(rng):
    params, x, y = _mlp(rng)
    with fg.profiler.profile() as prof:
        fg.make_jaxpr(_step)(params, x, y)
    assert _counts(prof, "eager")["matmul"] == 0


# ----------------------------------------------------------------- jit


def test_jit_counts_are_the_program_steps(rng):
    params, x, y = _mlp(rng)
    step = fg.jit(_step)
    program = step.lower(params, x, y)
    kernels = collections.Counter(repr(s[0]) for s in program.steps if getattr(s[0], "spec", None) is not None)
    prims = collections.Counter(s[0].name for s in program.steps if getattr(s[0], "spec", None) is None)
    # 8 products: the 3 weight updates' (w - lr * h.T @ d) run as one GEMM each (matmul_update)
    assert prims["matmul"] + prims["matmul_update"] == 8 and prims["matmul_update"] == 3
    assert sum(kernels.values()) > 0
    step(params, x, y)   # compiled outside the profile
    with fg.profiler.profile() as prof:
        for _ in range(3):
            out = step(params, x, y)
    assert _counts(prof, "primitive") == collections.Counter({k: 3 * n for k, n in prims.items()})
    assert _counts(prof, "kernel") == collections.Counter({k: 3 * n for k, n in kernels.items()})
    assert _counts(prof, "jit") == {"jit(_step)": 3}
    assert _counts(prof, "overhead")["program (run loop)"] == 3
    assert _counts(prof, "eager") == {}
    ref = _step(params, x, y)
    for k in params:
        np.testing.assert_allclose(np.asarray(out[k]), np.asarray(ref[k]), rtol=1e-5, atol=1e-6)
    # Kernels and matmuls write into the buffers the program keeps across calls.
    assert all(r["alloc_bytes"] == 0 < r["out_bytes"] for r in prof.stats()
               if r["category"] == "kernel" or r["name"] in ("matmul", "matmul_update"))
    digests = {r["digest"] for r in prof.stats() if r["category"] == "kernel"}
    assert all(isinstance(d, str) and len(d) == 24 for d in digests)


def test_first_call_is_named_as_a_compile():
    f = fg.jit(lambda a: fnp.sin(a) * 2.0 + 1.0)
    x = fnp.ones(5, dtype=np.float32)
    with fg.profiler.profile() as prof:
        f(x)
        f(x)
    assert _counts(prof, "jit") == {"jit(<lambda>) [trace+compile]": 1, "jit(<lambda>)": 1}


def test_times_are_positive_and_self_times_fit_in_the_wall_time(rng):
    params, x, y = _mlp(rng)
    step = fg.jit(_step)
    step(params, x, y)
    with fg.profiler.profile() as prof:
        step(params, x, y)
        _step(params, x, y)
    rows = prof.stats()
    wall_us = prof.wall_time * 1e6
    assert all(r["total_us"] > 0 and r["calls"] > 0 for r in rows)
    assert all(0 <= r["self_us"] <= r["total_us"] + 1e-9 for r in rows)
    assert sum(r["self_us"] for r in rows) <= wall_us
    assert sum(r["share"] for r in rows) <= 1.0 + 1e-9
    jit_total = sum(r["total_us"] for r in rows if r["category"] == "jit")
    steps = sum(r["total_us"] for r in rows if r["category"] in ("kernel", "primitive"))
    assert steps < jit_total <= wall_us
    for r in rows:
        np.testing.assert_allclose(r["mean_us"], r["total_us"] / r["calls"])


def test_loop_bodies_nest_inside_their_step():
    def f(x):
        def body(c, _):
            c = fnp.sin(c) * 2.0 + 1.0
            return c, fnp.sum(c)
        return fg.lax.scan(body, x, None, length=4)

    jf = fg.jit(f)
    x = fnp.ones(5, dtype=np.float32)
    jf(x)
    with fg.profiler.profile() as prof:
        carry, ys = jf(x)
    c, ref = np.ones(5), []
    for _ in range(4):
        c = np.sin(c) * 2.0 + 1.0
        ref.append(c.sum())
    np.testing.assert_allclose(np.asarray(carry), c, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(ys), ref, rtol=1e-5)
    (scan,) = [e for e in prof._events if e[0] == "scan"]
    runs = [e for e in prof._events if e[0] == "program (run loop)"]
    inner = [e for e in runs if scan[2] <= e[2] and e[3] <= scan[3]]
    assert len(runs) == 5 and len(inner) == 4   # the program, and the body once per iteration
    rows = {r["name"]: r for r in prof.stats()}
    assert 0 <= rows["scan"]["self_us"] < rows["scan"]["total_us"]
    assert sum(r["self_us"] for r in rows.values()) <= prof.wall_time * 1e6


# ----------------------------------------------------------------- table and trace


def test_table_lists_rows_sorted():
    x = fnp.ones((3, 3), dtype=np.float32)
    with fg.profiler.profile() as prof:
        for _ in range(3):
            fnp.exp(x)
        fnp.sin(x)
    text = prof.table(sort_by="calls", limit=1)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["Name", "Category", "Calls"]
    assert lines[2].split()[:3] == ["exp", "eager", "3"] and "sin" not in text
    assert "Wall time" in lines[-1]
    by_name = prof.table(sort_by="name", limit=None)
    assert by_name.index("\nexp") < by_name.index("\nsin")
    with pytest.raises(ValueError, match="sort_by='fastest'"):
        prof.table(sort_by="fastest")
    with pytest.raises(ValueError, match="record_shapes=True"):
        prof.stats(group_by_input_shape=True)


def test_chrome_trace_is_valid_and_nested(tmp_path, rng):
    params, x, y = _mlp(rng)
    step = fg.jit(_step)
    step(params, x, y)
    with fg.profiler.profile(record_shapes=True) as prof:
        step(params, x, y)
        fnp.sin(x)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(path)
    trace = json.loads(path.read_text())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(events) == len(prof._events)
    for e in events:
        assert {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert e["cat"] in fg.profiler.CATEGORIES and e["ts"] >= 0 and e["dur"] >= 0
        assert isinstance(e["args"]["out_bytes"], int)
    (call,) = [e for e in events if e["cat"] == "jit"]
    (run,) = [e for e in events if e["cat"] == "overhead"]
    steps = [e for e in events if e["cat"] in ("kernel", "primitive")]

    def inside(inner, outer):
        return outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 1e-3

    assert inside(run, call) and steps and all(inside(s, run) for s in steps)
    (sin,) = [e for e in events if e["name"] == "sin"]
    assert sin["cat"] == "eager" and not inside(sin, call) and sin["args"]["shapes"] == ["f32[4,6]"]
    assert all("digest" in e["args"] for e in steps if e["cat"] == "kernel")
    assert all(isinstance(e["args"]["shapes"], list) for e in steps)


# ----------------------------------------------------------------- on, off, nesting, threads


def test_off_means_no_records_and_no_hooks():
    x = fnp.ones(4, dtype=np.float32)
    prof = fg.profiler.profile()
    with prof:
        assert _core._profiler is not None and prof.active
        fnp.sin(x)
    n = len(prof._events)
    assert _core._profiler is None and not prof.active
    fnp.sin(x)
    fg.jit(fnp.cos)(x)
    assert len(prof._events) == n == 1


def test_an_exception_inside_the_block_leaves_nothing_behind():
    x = fnp.ones(4, dtype=np.float32)
    with pytest.raises(ValueError, match="matmul"):
        with fg.profiler.profile() as prof:
            fnp.sin(x)
            fnp.ones((2, 3)) @ fnp.ones((2, 3))
    assert _core._profiler is None and not prof.active
    assert _counts(prof, "eager")["sin"] == 1
    with pytest.raises(ZeroDivisionError):
        with fg.profiler.profile():
            fg.jit(lambda a: a + 1 // 0)(x)
    assert _core._profiler is None


def test_fast_path_setting_is_restored():
    previous = _core.set_fast_path(False)
    try:
        with fg.profiler.profile():
            pass
        assert _core._fast_path[0] is False
    finally:
        _core.set_fast_path(previous)


def test_nested_blocks_each_record_their_span():
    x = fnp.ones(4, dtype=np.float32)
    with fg.profiler.profile() as outer:
        fnp.sin(x)
        with fg.profiler.profile() as inner:
            fnp.cos(x)
        fnp.exp(x)
    assert _counts(outer, "eager") == {"sin": 1, "cos": 1, "exp": 1}
    assert _counts(inner, "eager") == {"cos": 1}
    assert inner.wall_time <= outer.wall_time


def test_same_profile_reentered_and_as_a_function():
    x = fnp.ones(4, dtype=np.float32)
    prof = fg.profiler.profile()
    with prof:
        with prof:   # a nested entry of the same profile is part of the outer one
            fnp.sin(x)
        assert prof.active
    assert not prof.active
    with prof:       # a later activation adds to it
        fnp.sin(x)
    assert _counts(prof, "eager") == {"sin": 2}

    @fg.profiler.profile
    def work(a):
        return fnp.tanh(a)

    np.testing.assert_allclose(np.asarray(work(x)), np.tanh(1.0) * np.ones(4), rtol=1e-6)
    work(x)
    assert _counts(work, "eager") == {"tanh": 2} and work.__name__ == "work"
    class Model:
        @fg.profiler.profile
        def forward(self, a):
            return fnp.exp(a)

    model = Model()
    np.testing.assert_allclose(np.asarray(model.forward(x)), np.e * np.ones(4), rtol=1e-6)
    assert _counts(Model.forward, "eager") == {"exp": 1}
    with pytest.raises(TypeError, match="profile\\(fn\\)"):
        fg.profiler.profile()(x)
    with pytest.raises(TypeError, match="expected a function"):
        fg.profiler.profile(3)


def test_other_threads_are_not_recorded():
    x = fnp.ones(4, dtype=np.float32)
    f = fg.jit(lambda a: fnp.cos(a) + 1.0)
    f(x)
    started, stop = threading.Event(), threading.Event()
    results = []

    def other():
        started.set()
        while not stop.is_set():
            results.append(np.asarray(fnp.exp(x)))
            results.append(np.asarray(f(x)))

    thread = threading.Thread(target=other)
    with fg.profiler.profile() as prof:
        thread.start()
        started.wait()
        fnp.sin(x)
        while len(results) < 4:
            stop.wait(0.001)
    stop.set()
    thread.join()
    assert _counts(prof, "eager") == {"sin": 1}
    assert _counts(prof, "jit") == {} and _counts(prof, "kernel") == {}
    for r in results:
        assert np.allclose(r, np.exp(1.0)) or np.allclose(r, np.cos(1.0) + 1.0)


def test_two_threads_profile_at_once():
    x = fnp.ones(4, dtype=np.float32)
    profs, errors = {}, []
    barrier = threading.Barrier(2)

    def work(op, n):
        try:
            with fg.profiler.profile() as prof:
                barrier.wait()
                for _ in range(n):
                    op(x)
                barrier.wait()
            profs[op.__name__] = prof
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(fnp.sin, 3)), threading.Thread(target=work, args=(fnp.cos, 5))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _counts(profs["sin"], "eager") == {"sin": 3}
    assert _counts(profs["cos"], "eager") == {"cos": 5}
    shared = profs["sin"]
    thread = threading.Thread(target=lambda: errors.append(pytest.raises(RuntimeError, shared.__enter__)))
    with shared:
        thread.start()
        thread.join()
    assert "another thread" in str(errors[0].value)


# ----------------------------------------------------------------- device arrays (the stand-in GPU backend)


def test_device_arrays_are_recorded_per_primitive():
    from gpu_standin import gpu_standin

    with gpu_standin(use_triton=False):
        g = fg.device_put(fnp.asarray(np.linspace(-1.0, 1.0, 6, dtype=np.float32)), "gpu")
        f = fg.jit(lambda a: fnp.sin(a) * 2.0)
        f(g)
        with fg.profiler.profile() as prof:
            out = fnp.cos(g)
            jitted = f(g)
        np.testing.assert_allclose(np.asarray(fg.device_put(out, "cpu")), np.cos(np.linspace(-1, 1, 6)), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(fg.device_put(jitted, "cpu")), 2 * np.sin(np.linspace(-1, 1, 6)), rtol=1e-6)
    # Without a compiler the jitted call runs its primitives one by one, each an eager event inside it.
    assert _counts(prof, "eager") == {"cos": 1, "sin": 1, "mul": 1}
    assert _counts(prof, "jit") == {"jit(<lambda>)": 1}
    events = {e[0]: e for e in prof._events}
    call = events["jit(<lambda>)"]
    assert call[2] <= events["sin"][2] and events["mul"][3] <= call[3] and not call[2] <= events["cos"][2]
    (cos,) = [r for r in prof.stats() if r["name"] == "cos"]
    assert cos["out_bytes"] == 24
