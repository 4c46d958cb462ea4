"""The jit's tiered start: fused groups run on numpy while their kernels compile
on a background thread, kernels shared across programs, the small
cross-entropy gradient kernel."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.backends.cpu import kernels_softmax as K
from funcgrad.compiler import codegen, kernel_cache
from funcgrad.compiler.fusion import FusedKernel
from funcgrad.primitives import softmax as SM

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def held_jobs(monkeypatch, tmp_path):
    """Background compiles are collected, not run, until the test runs them: the
    calls before that deterministically take the numpy path.  Compiles that earlier tests queued
    finish first: one still running would load kernels while this test counts its own."""
    codegen.wait_for_kernels()
    jobs: list = []
    monkeypatch.setattr(codegen, "compile_in_background", jobs.append)
    monkeypatch.setattr(codegen, "BACKGROUND_COMPILE", "exact")
    monkeypatch.setattr(codegen, "_loaded", type(codegen._loaded)())   # none loaded by earlier tests
    before = fg.config.cache_dir
    fg.config.update("cache_dir", str(tmp_path / "kernels"))
    try:
        yield jobs
    finally:
        fg.config.update("cache_dir", before)


@pytest.fixture
def numpy_runs(monkeypatch):
    calls: list = []
    original = FusedKernel._run_on_numpy

    def counting(self, inputs, outs):
        calls.append(self.summary)
        return original(self, inputs, outs)
    monkeypatch.setattr(FusedKernel, "_run_on_numpy", counting)
    return calls


def _step(scale: float):
    """A bias + relu and an SGD-like update: exact operations only (add, compare, select, mul, sub)."""
    def f(w, x, b):
        h = fnp.where(x + b > 0, x + b, 0.0)
        return w - scale * h, h
    return f


def _reference(scale, w, x, b):
    h = np.where(x + b > 0, x + b, np.float32(0))
    return w - np.float32(scale) * h, h


def test_exact_group_runs_on_numpy_until_its_kernel_is_ready(held_jobs, numpy_runs):
    rng = np.random.default_rng(0)
    w, x = (rng.standard_normal((64, 48)).astype(np.float32) for _ in range(2))
    b = rng.standard_normal(48).astype(np.float32)
    step = fg.jit(_step(0.0371))
    first = [np.asarray(o) for o in step(w, x, b)]
    second = [np.asarray(o) for o in step(w, x, b)]
    assert held_jobs and len(numpy_runs) == 2 * len(held_jobs)   # both calls on numpy, one job per group
    for job in held_jobs:
        job()                                                     # the kernels arrive
    after = [np.asarray(o) for o in step(w, x, b)]
    assert len(numpy_runs) == 2 * len(held_jobs)                  # the third call ran the kernels
    expected = _reference(0.0371, w, x, b)
    for a, s, k, e in zip(first, second, after, expected):
        np.testing.assert_array_equal(a, e)                       # numpy's bits ...
        np.testing.assert_array_equal(k, a)                       # ... before and after the kernel arrives
        np.testing.assert_array_equal(s, a)


_EXACT_FNS = {
    "arithmetic": lambda a, b: (a + b) * a - b * 0.3,
    "sqrt_abs_floor_ceil": lambda a, b: fnp.sqrt(fnp.abs(a)) + fnp.floor(b) - fnp.ceil(a),
    "neg": lambda a, b: -a * b + 1.5,
    "compare_select": lambda a, b: fnp.where((a < b) | (a == b), a - b, -a) * 2.0,
    "isnan_isfinite": lambda a, b: fnp.where(fnp.isnan(a) | ~fnp.isfinite(b), 0.0, a) + b,
}


@pytest.mark.parametrize("name", sorted(_EXACT_FNS))
def test_exact_lowerings_give_numpys_values_on_special_inputs(name, held_jobs):
    rng = np.random.default_rng(7)
    x, y = (rng.standard_normal((16, 40)).astype(np.float32) * 3 for _ in range(2))
    x.flat[:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45]
    y.flat[:6] = [0.0, -0.0, np.inf, np.nan, -np.inf, 3.0]
    f = fg.jit(_EXACT_FNS[name])
    with warnings.catch_warnings():
        warnings.simplefilter("error")         # the numpy path is as quiet as the kernel about NaN and inf
        first = np.asarray(f(x, y)).copy()
    assert held_jobs
    for job in held_jobs:
        job()
    after = np.asarray(f(x, y))
    np.testing.assert_array_equal(after, first)   # NaN where NaN (its sign bit may differ), -0.0 == 0.0 ...
    assert np.array_equal(np.signbit(after) | np.isnan(after), np.signbit(first) | np.isnan(first))   # ... not here


def test_donated_argument_on_the_numpy_path(held_jobs, numpy_runs):
    f = fg.jit(lambda p, g: (p - 0.0123 * g * p, p * 2.0), donate_argnums=0)
    g = np.full((256, 256), 0.5, np.float32)
    p = fnp.array(np.linspace(-1, 1, 256 * 256, dtype=np.float32).reshape(256, 256))
    expected = np.asarray(p)
    for step in range(3):
        if step == 2:
            for job in held_jobs:
                job()
        p, twice = f(p, g)
        np.testing.assert_array_equal(np.asarray(twice), expected * np.float32(2))
        expected = expected - np.float32(0.0123) * g * expected
        np.testing.assert_array_equal(np.asarray(p), expected)
    assert held_jobs and len(numpy_runs) == 2 * len(held_jobs)


def test_inexact_group_compiles_before_its_first_run(held_jobs, numpy_runs):
    x = np.linspace(-2, 2, 96, dtype=np.float32).reshape(8, 12)
    out = fg.jit(lambda v: fnp.exp(v) * 0.4217 + v)(x)            # exp: not numpy's bits, so not tiered
    assert held_jobs == [] and numpy_runs == []
    np.testing.assert_allclose(np.asarray(out), np.exp(x.astype(np.float64)) * 0.4217 + x, rtol=1e-6,
                               atol=1e-6)


def test_off_compiles_every_kernel_before_its_first_run(held_jobs, numpy_runs, monkeypatch):
    monkeypatch.setattr(codegen, "BACKGROUND_COMPILE", "off")
    rng = np.random.default_rng(1)
    w, x = (rng.standard_normal((16, 40)).astype(np.float32) for _ in range(2))
    b = rng.standard_normal(40).astype(np.float32)
    out = fg.jit(_step(0.0443))(w, x, b)
    assert held_jobs == [] and numpy_runs == []
    for o, e in zip(out, _reference(0.0443, w, x, b)):
        np.testing.assert_array_equal(np.asarray(o), e)


def test_a_kernel_is_compiled_once_for_two_programs(held_jobs, numpy_runs, monkeypatch):
    loads: list = []
    original = kernel_cache.load_kernel
    monkeypatch.setattr(kernel_cache, "load_kernel", lambda digest, source: loads.append(digest) or
                        original(digest, source))
    rng = np.random.default_rng(2)
    f = _step(0.0519)
    small = [rng.standard_normal(s).astype(np.float32) for s in ((8, 24), (8, 24), (24,))]
    large = [rng.standard_normal(s).astype(np.float32) for s in ((32, 24), (32, 24), (24,))]
    fg.jit(f)(*small)
    for job in held_jobs:
        job()
    n_jobs, n_loads, n_numpy = len(held_jobs), len(loads), len(numpy_runs)
    assert n_loads == n_jobs > 0
    out = fg.jit(f)(*large)    # another program (other shapes): the same kernels, at once
    assert (len(held_jobs), len(loads), len(numpy_runs)) == (n_jobs, n_loads, n_numpy)
    for o, e in zip(out, _reference(0.0519, *large)):
        np.testing.assert_array_equal(np.asarray(o), e)


def test_a_failed_background_compile_is_raised_by_the_next_call(held_jobs, monkeypatch):
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((4, 24), (4, 24), (24,))]
    step = fg.jit(_step(0.0677))
    step(*args)

    def broken(spec):
        raise RuntimeError("no compiler today")
    monkeypatch.setattr("funcgrad.compiler.fusion.compile_kernel", broken)
    for job in held_jobs:
        with pytest.raises(RuntimeError):
            job()
    with pytest.raises(RuntimeError, match="no compiler today"):
        step(*args)


def test_all_runs_softmax_kernels_after_numpy(monkeypatch):
    jobs: list = []
    monkeypatch.setattr(codegen, "compile_in_background", jobs.append)
    monkeypatch.setattr(codegen, "BACKGROUND_COMPILE", "all")
    x = np.random.default_rng(4).standard_normal((5, 7, 3))   # a key of its own: (float64, rank 3, small)
    expected = np.log(np.sum(np.exp(x), axis=-1))
    before = SM.logsumexp_p.impl(x)
    assert len(jobs) == 1                     # the numpy reference ran; the kernel compiles later
    assert SM.logsumexp_p.impl(x) is not None and len(jobs) == 1   # queued once
    jobs[0]()
    after = SM.logsumexp_p.impl(x)
    assert len(jobs) == 1
    np.testing.assert_allclose(before, expected, rtol=1e-12)
    np.testing.assert_allclose(after, expected, rtol=1e-12)


def test_wait_for_kernels_runs_queued_jobs():
    done: list = []
    codegen.compile_in_background(lambda: done.append(1))
    codegen.compile_in_background(lambda: done.append(2))
    assert codegen.wait_for_kernels(timeout=60)
    assert done == [1, 2]


def test_a_process_exits_cleanly_with_compiles_queued(tmp_path):
    """It finishes them: the next process finds the kernels on disk."""
    code = textwrap.dedent(f"""
        import sys, numpy as np
        sys.path.insert(0, {REPO!r})
        import funcgrad as fg, funcgrad.numpy as fnp
        x = np.ones((64, 600), np.float32)
        fg.jit(lambda v, w: (fnp.where(v > 0, v, 0.0) * 0.75 - w, v * w + 0.5))(x, x)
        print("ok")
    """)
    env = dict(os.environ, FUNCGRAD_CACHE_DIR=str(tmp_path), FUNCGRAD_JIT_BACKGROUND_COMPILE="exact")
    env.pop("NUMBA_CACHE_DIR", None)   # numba's files beside the kernels' sources, where this test looks
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok" and "Traceback" not in proc.stderr
    sources = [f for f in os.listdir(tmp_path) if f.endswith(".py")]
    compiled = [f for f in os.listdir(tmp_path / "__pycache__") if f.endswith(".nbi")]
    assert sources and len(compiled) == len(sources)


# ------------------------------------------------------- small cross-entropy gradient


def _xent_grad_reference(x, labels, g):
    x = x.astype(np.float64)
    m = np.max(x, axis=1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    lse = m + np.log(np.sum(np.exp(x - m), axis=1, keepdims=True))
    d = np.exp(x - lse)
    d[np.arange(len(labels)), labels] -= 1.0
    return d * g.astype(np.float64)[:, None]


@pytest.mark.parametrize("shape", [(128, 10), (3, 1), (40, 100)])   # the small kernel (<= 4096 elements)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_xent_grad_matches_float64(shape, dtype):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    labels = rng.integers(0, shape[1], shape[0])
    g = rng.uniform(0.5, 2, shape[0]).astype(dtype)
    out = K.softmax_xent_grad(x, labels, g, np.empty_like(x))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, _xent_grad_reference(x, labels, g), rtol=tol, atol=tol)


def test_small_and_large_xent_grad_agree():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((80, 60)).astype(np.float32)   # 4800 elements: the logsumexp + backward pair
    labels = rng.integers(0, 60, 80)
    g = np.ones(80, np.float32)
    large = K.softmax_xent_grad(x, labels, g, np.empty_like(x))
    small = K.softmax_xent_grad(x[:60], labels[:60], g[:60], np.empty_like(x[:60]))
    np.testing.assert_allclose(small, large[:60], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(large, _xent_grad_reference(x, labels, g), rtol=1e-5, atol=1e-7)


def test_small_xent_grad_special_values():
    x = np.array([[0.0, -np.inf, 1.0], [np.inf, 0.0, 1.0], [-np.inf, -np.inf, -np.inf], [np.nan, 0.0, 1.0]],
                 np.float32)
    labels, g = np.array([0, 1, 2, 0]), np.ones(4, np.float32)
    out = K.softmax_xent_grad(x, labels, g, np.empty_like(x))
    with np.errstate(all="ignore"):
        expected = _xent_grad_reference(x, labels, g)
    assert np.isnan(expected[1, 0]) and expected[1, 1] == -1 and np.isnan(expected[2]).all()
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-7)   # NaNs where the reference has them


def test_small_xent_grad_bad_labels():
    x = np.zeros((4, 3), np.float32)
    with pytest.raises(ValueError, match=r"label 3 at row 2 is out of range"):
        K.softmax_xent_grad(x, np.array([0, 1, 3, 0]), np.ones(4, np.float32), np.empty_like(x))
    with pytest.raises(ValueError, match=r"label -1 at row 0"):
        K.softmax_xent_grad(x, np.array([-1, 1, 2, 0]), np.ones(4, np.float32), np.empty_like(x))


# ------------------------------------------------------- the compiler thread gives way


def test_the_tiered_start_is_the_default():
    modes = {v: codegen.background_mode(v) for v in (None, "", "off", "0", "all", "exact", " Exact ", "bogus")}
    assert modes == {None: "exact", "": "exact", "off": "off", "0": "off", "all": "all", "exact": "exact",
                     " Exact ": "exact", "bogus": "exact"}
    assert codegen.BACKGROUND_COMPILE == codegen.background_mode(os.environ.get("FUNCGRAD_JIT_BACKGROUND_COMPILE"))


def test_background_compiles_wait_for_the_callers_compiles(monkeypatch):
    """A job starts only after the queue settled and while no other thread wants numba's
    compiler lock: a compile the caller needs now does not queue behind the background ones
    (the background compiles on this thread: no compile process)."""
    monkeypatch.setenv("FUNCGRAD_JIT_COMPILE_PROCESS", "0")
    monkeypatch.setattr(codegen, "SETTLE_S", 0.05)
    compiler = codegen._compiler
    compiler._listen()
    started: list = []
    compiler._lock_event(+1)                   # the caller holds numba's compiler lock
    try:
        codegen.compile_in_background(lambda: started.append(True))
        assert not codegen.wait_for_kernels(timeout=0.5) and started == []
    finally:
        compiler._lock_event(-1)
    assert codegen.wait_for_kernels(timeout=60) and started == [True]


def test_a_real_foreground_compile_is_seen(monkeypatch):
    """numba's compiler-lock events from the calling thread count as a foreground compile."""
    import numba
    seen: list = []
    compiler = codegen._compiler
    compiler._listen()

    @numba.njit(cache=False)
    def plus_one(v):
        return v + 1

    original = compiler._lock_event

    def spy(delta):
        original(delta)
        seen.append(compiler.foreground)
    monkeypatch.setattr(compiler, "_lock_event", spy)
    assert plus_one(41) == 42
    assert seen and max(seen) >= 1 and compiler.foreground == 0


# ------------------------------------------------------- the compile process


def test_signatures_travel_to_the_compile_process_unchanged():
    import numba
    from funcgrad.compiler import compile_worker
    ro = np.ones((3, 4), np.float32)
    ro.setflags(write=False)
    values = [7, ro, np.zeros((2, 5), np.bool_), np.ones((6, 2), np.int64)[:, :1], np.zeros(4, np.uint32)]
    signature = tuple(numba.typeof(v) for v in values)
    encoded = compile_worker.encode_signature(signature)
    assert encoded is not None
    assert compile_worker.decode_signature(encoded) == signature
    assert compile_worker.encode_signature((numba.typeof((1, 2)),)) is None   # a tuple: not sent


def _spec(parallel: bool):
    from funcgrad.compiler.codegen import KernelSpec, Op
    from funcgrad.primitives.elementwise import mul_p, sub_p
    f32 = np.dtype(np.float32)
    return KernelSpec([("x0", "[i, j]", f32), ("x1", "[0, j]", f32)],
                      [Op("v0", mul_p, ["x1", 0.0311], f32), Op("v1", sub_p, ["x0", "v0"], f32)],
                      ["v1"], None, parallel)


@pytest.mark.parametrize("parallel", [False, True])
def test_the_compile_process_fills_the_disk_cache(tmp_path, monkeypatch, parallel):
    """The child compiles; this process then loads the kernel from disk without compiling it."""
    import numba
    monkeypatch.setenv("FUNCGRAD_JIT_COMPILE_PROCESS", "1")
    monkeypatch.setattr(codegen, "_loaded", type(codegen._loaded)())
    spec = _spec(parallel)
    x0 = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)
    x1 = np.linspace(2, 3, 6, dtype=np.float32).reshape(1, 6)
    out = np.empty_like(x0)
    signature = tuple(numba.typeof(a) for a in (4, 6, x0, x1, out))
    before = fg.config.cache_dir
    fg.config.update("cache_dir", str(tmp_path / "kernels"))
    try:
        assert codegen.compile_elsewhere(spec, signature)
        kernel = codegen.compile_kernel(spec)
        dispatcher = kernel if hasattr(kernel, "compile") else kernel.__wrapped__
        dispatcher.compile(signature)
        kernel(4, 6, x0, x1, out)
    finally:
        fg.config.update("cache_dir", before)
        codegen._child.close()
    assert sum(dispatcher.stats.cache_hits.values()) == 1 and sum(dispatcher.stats.cache_misses.values()) == 0
    np.testing.assert_array_equal(out, x0 - x1 * np.float32(0.0311))


def test_no_compile_process_when_switched_off(tmp_path, monkeypatch):
    import numba
    monkeypatch.setenv("FUNCGRAD_JIT_COMPILE_PROCESS", "0")
    x = np.ones((2, 3), np.float32)
    signature = tuple(numba.typeof(a) for a in (2, 3, x, x[:1], x))
    assert not codegen.compile_elsewhere(_spec(False), signature)


def _mlp_step():
    import funcgrad.nn as nn

    def loss(p, x, y):
        h = nn.relu(x @ p["w1"] + p["b1"])
        return nn.cross_entropy(h @ p["w2"] + p["b2"], y)

    def step(p, x, y):
        g = fg.grad(loss)(p, x, y)
        return fg.tree_util.tree_map(lambda w, gw: w - 0.05 * gw, p, g)
    rng = np.random.default_rng(8)
    p = {"w1": rng.standard_normal((12, 16)).astype(np.float32) * 0.3, "b1": np.zeros(16, np.float32),
         "w2": rng.standard_normal((16, 4)).astype(np.float32) * 0.3, "b2": np.zeros(4, np.float32)}
    return step, p, rng.standard_normal((8, 12)).astype(np.float32), rng.integers(0, 4, 8)


def test_a_training_steps_first_call_compiles_no_fused_kernel(held_jobs, numpy_runs, monkeypatch):
    """Under the default, the first call of an MLP step queues its fused kernels (all exact:
    bias + ReLU, SGD updates) and compiles none; its results are the bits of the step
    compiled up front."""
    compiled: list = []
    original = codegen.compile_kernel
    monkeypatch.setattr("funcgrad.compiler.fusion.compile_kernel", lambda spec: compiled.append(spec) or
                        original(spec))
    step, p, x, y = _mlp_step()
    first = fg.jit(step)(p, x, y)
    assert compiled == [] and len(held_jobs) >= 2 and len(numpy_runs) == len(held_jobs)
    for job in held_jobs:
        job()
    assert len(compiled) == len(held_jobs)
    monkeypatch.setattr(codegen, "BACKGROUND_COMPILE", "off")
    upfront = fg.jit(step)(p, x, y)   # another program: every kernel compiled before it runs
    for k in p:
        np.testing.assert_array_equal(np.asarray(first[k]), np.asarray(upfront[k]))


def test_a_failing_compile_process_falls_back_to_this_one(tmp_path, monkeypatch):
    """A child that cannot start (or dies) is not tried again; the kernel compiles here."""
    import numba
    from funcgrad.compiler import compile_worker
    monkeypatch.setenv("FUNCGRAD_JIT_COMPILE_PROCESS", "1")
    monkeypatch.setattr(compile_worker, "_CHILD", "import sys; sys.exit(3)")
    monkeypatch.setattr(codegen, "_child", compile_worker.Child())
    monkeypatch.setattr(codegen, "_loaded", type(codegen._loaded)())
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(2, 6)
    out = np.empty_like(x)
    signature = tuple(numba.typeof(a) for a in (2, 6, x, x[:1], out))
    before = fg.config.cache_dir
    fg.config.update("cache_dir", str(tmp_path / "kernels"))
    try:
        assert not codegen.compile_elsewhere(_spec(False), signature)
        assert codegen._child.broken and not codegen._child.usable()
        kernel = codegen.compile_kernel(_spec(False))
        kernel(2, 6, x, x[:1], out)
    finally:
        fg.config.update("cache_dir", before)
    np.testing.assert_array_equal(out, x - x[:1] * np.float32(0.0311))


# ------------------------------------------------------- the warm start (kernels on disk)


_WARM_SCRIPT = """
import json, sys
import numpy as np
sys.path.insert(0, {repo!r})
import funcgrad as fg
import funcgrad.nn as nn
from funcgrad.compiler import kernel_cache

def loss(p, x, y):
    h = nn.relu(x @ p["w1"] + p["b1"])
    return nn.cross_entropy(h @ p["w2"] + p["b2"], y)

def step(p, x, y):
    g = fg.grad(loss)(p, x, y)
    return fg.tree_util.tree_map(lambda w, gw: w - 0.05 * gw, p, g)

data = np.load(sys.argv[1])
p = {{k: data[k] for k in ("w1", "b1", "w2", "b2")}}
new_p = fg.jit(step)(p, data["x"], data["y"])
big = fg.jit(lambda a, b: a * b + 1.5)(data["a"], data["a"])   # a parallel kernel (32768 elements)
out = {{"refreshed": "numba.np.arraymath" in sys.modules, "light": kernel_cache.light_loads}}
# A kernel that is not on disk compiles after the loads (numba refreshes its context then).
shift = float(sys.argv[3])   # a constant of its own in each process
other = fg.jit(lambda a, b: a * b - shift)(data["x"], data["x"])   # serial: a quick compile
out["refreshed_after_compile"] = "numba.np.arraymath" in sys.modules
np.savez(sys.argv[2], big=np.asarray(big), other=np.asarray(other), **{{k: np.asarray(v) for k, v in new_p.items()}})
print(json.dumps(out))
"""


def _sgd_reference(p, x, y, lr=0.05):
    """One SGD step of the two-layer ReLU MLP with mean softmax cross-entropy, in float64."""
    p = {k: v.astype(np.float64) for k, v in p.items()}
    pre = x.astype(np.float64) @ p["w1"] + p["b1"]
    h = np.maximum(pre, 0)
    logits = h @ p["w2"] + p["b2"]
    prob = np.exp(logits - logits.max(1, keepdims=True))
    prob /= prob.sum(1, keepdims=True)
    d = prob
    d[np.arange(len(y)), y] -= 1
    d /= len(y)
    dh = (d @ p["w2"].T) * (pre > 0)
    g = {"w2": h.T @ d, "b2": d.sum(0), "w1": x.astype(np.float64).T @ dh, "b1": dh.sum(0)}
    return {k: p[k] - lr * g[k] for k in p}


def test_a_warm_process_loads_its_kernels_without_numbas_context_refresh(tmp_path):
    """A second process on the same caches loads every kernel (fused, parallel, hand-written)
    from disk without numba's target-context refresh, and computes the first process's bits;
    a kernel compiled afterwards in that process works too."""
    rng = np.random.default_rng(3)
    p = {"w1": rng.standard_normal((12, 16)).astype(np.float32) * 0.3, "b1": rng.standard_normal(16).astype(np.float32),
         "w2": rng.standard_normal((16, 4)).astype(np.float32) * 0.3, "b2": np.zeros(4, np.float32)}
    x, y = rng.standard_normal((8, 12)).astype(np.float32), rng.integers(0, 4, 8).astype(np.int32)
    a = rng.standard_normal((256, 128)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x, y=y, a=a, **p)
    env = dict(os.environ, FUNCGRAD_CACHE_DIR=str(tmp_path / "kernels"), FUNCGRAD_JIT_BACKGROUND_COMPILE="off")
    env.pop("NUMBA_CACHE_DIR", None)
    script = _WARM_SCRIPT.format(repo=REPO)
    runs = []
    for name, shift in (("cold", "2.25"), ("warm", "3.5")):
        proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "in.npz"), str(tmp_path / f"{name}.npz"),
                               shift],
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        runs.append((__import__("json").loads(proc.stdout.strip().splitlines()[-1]), np.load(tmp_path / f"{name}.npz")))
    (cold, cold_out), (warm, warm_out) = runs
    assert cold["refreshed"]                                   # the cold process compiled
    assert not warm["refreshed"] and warm["light"] >= 3        # loaded alone: fused, parallel, cross-entropy
    assert warm["refreshed_after_compile"]
    for k in set(cold_out.files) - {"other"}:
        np.testing.assert_array_equal(warm_out[k], cold_out[k])   # the same kernels: the same bits
    expected = _sgd_reference(p, x, y)
    for k in p:
        np.testing.assert_allclose(warm_out[k], expected[k], rtol=1e-5, atol=1e-6)
    a64 = a.astype(np.float64)
    np.testing.assert_allclose(warm_out["big"], a64 * a64 + 1.5, rtol=1e-6)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(cold_out["other"], x64 * x64 - 2.25, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(warm_out["other"], x64 * x64 - 3.5, rtol=1e-6, atol=1e-6)


def test_a_kernel_on_disk_loads_through_the_light_path(tmp_path, monkeypatch):
    """A kernel whose machine code is on disk: loaded (counted), not compiled, correct."""
    import numba
    monkeypatch.setattr(codegen, "_loaded", type(codegen._loaded)())
    spec = _spec(False)
    x0 = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)
    x1 = np.linspace(2, 3, 6, dtype=np.float32).reshape(1, 6)
    signature = tuple(numba.typeof(a) for a in (4, 6, x0, x1, x0))
    before = fg.config.cache_dir
    fg.config.update("cache_dir", str(tmp_path / "kernels"))
    try:
        codegen.compile_kernel(spec).compile(signature)             # compiled, and its files written
        codegen._loaded.clear()                                     # a later process's view: only the disk
        loads = kernel_cache.light_loads
        kernel = codegen.compile_kernel(spec)
        kernel.compile(signature)
        out = np.empty_like(x0)
        kernel(4, 6, x0, x1, out)
    finally:
        fg.config.update("cache_dir", before)
    assert kernel_cache.light_loads == loads + 1
    assert sum(kernel.stats.cache_hits.values()) == 1 and sum(kernel.stats.cache_misses.values()) == 0
    np.testing.assert_allclose(out, x0.astype(np.float64) - x1.astype(np.float64) * 0.0311, rtol=1e-6)


def test_a_background_load_from_disk_gives_way_and_starts_no_compile_process(tmp_path, monkeypatch):
    """A kernel already on disk is loaded here (no compile process), after the callers' calls settle."""
    import numba
    monkeypatch.setenv("FUNCGRAD_JIT_COMPILE_PROCESS", "1")
    monkeypatch.setattr(codegen, "_loaded", type(codegen._loaded)())
    waits: list = []
    sent: list = []
    monkeypatch.setattr(codegen._compiler, "give_way", lambda: waits.append(1))
    monkeypatch.setattr(codegen._child, "compile", lambda *a: sent.append(a) or True)
    x = np.ones((2, 6), np.float32)
    signature = tuple(numba.typeof(a) for a in (2, 6, x, x[:1], x))
    before = fg.config.cache_dir
    fg.config.update("cache_dir", str(tmp_path / "kernels"))
    try:
        assert codegen.compile_elsewhere(_spec(False), signature)   # not on disk: the compile process
        assert len(sent) == 1 and not waits
        codegen.compile_kernel(_spec(False)).compile(signature)     # now it is (compiled here)
        assert not codegen.compile_elsewhere(_spec(False), signature)
    finally:
        fg.config.update("cache_dir", before)
    assert len(sent) == 1 and waits == [1]


def test_give_way_waits_only_on_the_compiler_thread(monkeypatch):
    import time
    monkeypatch.setattr(codegen, "GIVE_WAY_MAX_S", 30.0)
    monkeypatch.setattr(codegen._compiler, "last_submit", time.monotonic() + 60)   # would wait its maximum
    t = time.monotonic()
    codegen._compiler.give_way()                                                  # this thread: returns at once
    assert time.monotonic() - t < 1.0


def test_the_first_trace_queues_numbas_runtime_start(monkeypatch):
    queued: list = []
    monkeypatch.setattr(codegen, "_runtime_queued", [])
    monkeypatch.setattr(codegen._compiler, "submit", queued.append)
    f = fg.jit(lambda v: v * 2.0 + 1.0)
    f(np.ones(3, np.float32))
    f(np.ones(4, np.float32))   # a second trace: queued once per process
    starts = [job for job in queued if job is kernel_cache.start_runtime]
    assert queued[0] is kernel_cache.start_runtime and len(starts) == 1   # first, and once per process
    kernel_cache.start_runtime()   # and it runs (the runtime already started here: a no-op)
    from numba.core.runtime import rtsys
    assert rtsys._init
