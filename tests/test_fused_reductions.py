"""Sums over leading axes fused into the kernel that makes their operand (a column accumulation), the
CPU compiler's memory-minimising order of equations, and fused outputs written over inputs that die
(``funcgrad/compiler/fusion.py``, ``codegen.py``, ``schedule.py``, ``program.py``): that each applies, and
the results against float64 numpy."""
import pathlib
import sys

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.compiler import codegen, schedule
from funcgrad.compiler.codegen import wait_for_kernels

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
from dispatch import mlp_data, numpy_mlp_grad  # noqa: E402
from mlp_step import LR, funcgrad_step  # noqa: E402


@pytest.fixture(autouse=True)
def _own_kernel_table(monkeypatch):
    """Kernels these tests load stay out of the process's table of loaded kernels afterwards (tests of
    the first call expect the MLP step's kernels not loaded yet)."""
    monkeypatch.setattr(codegen, "_loaded", type(codegen._loaded)())


def _fused(program) -> list:
    return [e.prim for e in program.jaxpr.eqns if e.prim.name == "fused"]


def _names(program) -> list[str]:
    return [e.prim.name for e in program.jaxpr.eqns]


def _masked(m, g, s):
    """The backward of a ReLU layer and its bias gradient: ``select(m, 0, g * s)`` and its column sums."""
    d = lax.select(m, fnp.zeros_like(g), g * s)
    return d, d.sum(axis=0)


def _data(shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) > 0.3, rng.standard_normal(shape).astype(np.float32), \
        rng.standard_normal(shape[-1]).astype(np.float32)


def _run(f, *args):
    """``f``'s results once its kernels are compiled (the first calls may run fused groups on numpy)."""
    f(*args)
    assert wait_for_kernels(timeout=120)
    return [np.asarray(r) for r in f(*args)]


@pytest.mark.parametrize("shape", [(16, 24), (3, 1), (1, 7), (5, 4, 6)])
def test_leading_sum_is_an_output_of_the_producing_kernel(shape):
    m, g, s = _data(shape)
    axes = tuple(range(len(shape) - 1))
    f = fg.jit(lambda m, g, s: (lambda d: (d, d.sum(axis=axes)))(lax.select(m, fnp.zeros_like(g), g * s)))
    program = f.lower(m, g, s)
    assert "reduce_sum" not in _names(program)
    (kernel,) = _fused(program)
    assert kernel.spec.leading and kernel.spec.reduction is not None
    d, total = _run(f, m, g, s)
    want = np.where(m, 0.0, g.astype(np.float64) * s)
    np.testing.assert_allclose(d, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(total, want.sum(axis=axes), rtol=1e-5, atol=1e-5)
    # The rows are added in order, as numpy adds them: the float32 result is numpy's, bit for bit.
    np.testing.assert_array_equal(total, np.add.reduce(d, axis=axes))
    assert total.dtype == np.float32 and total.shape == want.shape[len(axes):]


def test_the_kernel_and_its_numpy_stand_in_agree_bit_for_bit():
    m, g, s = _data((33, 40), seed=1)
    f = fg.jit(_masked)
    program = f.lower(m, g, s)
    (eqn,) = [e for e in program.jaxpr.eqns if e.prim.name == "fused"]
    kernel = eqn.prim
    assert codegen.is_exact(kernel.spec)   # so it may run on numpy until its kernel is compiled
    env = {id(v): a for v, a in zip(program.jaxpr.invars, (m, g, s))}
    env.update((id(v), c) for v, c in zip(program.jaxpr.constvars, program.consts))
    inputs = [env[id(v)] for v in eqn.inputs]
    on_numpy = kernel._run_on_numpy(inputs, kernel.out_buffers())
    kernel.kernel = codegen.compile_kernel(kernel.spec)
    compiled = kernel.impl(*inputs)
    for a, b in zip(compiled, on_numpy):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(compiled[1], np.where(m, 0.0, g.astype(np.float64) * s).sum(0), rtol=1e-5, atol=1e-5)


def test_max_over_leading_axes_keeps_nan_and_int_sums_wrap_as_numpy():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((12, 9)).astype(np.float32)
    x[3, 4] = np.nan
    f = fg.jit(lambda x: fnp.max(fnp.abs(x) * 2.0, axis=0))
    assert _fused(f.lower(x))[0].spec.leading
    got = np.asarray(f(x))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(np.max(np.abs(x.astype(np.float64)), axis=0)))
    np.testing.assert_allclose(got, np.max(np.abs(x.astype(np.float64)) * 2, axis=0), rtol=1e-6)
    i = rng.integers(-2**30, 2**30, (6, 5)).astype(np.int32)
    h = fg.jit(lambda i: fnp.sum(i * 3 + 1, axis=0))
    assert _fused(h.lower(i))[0].spec.leading
    np.testing.assert_array_equal(np.asarray(h(i)), np.sum(i * np.int32(3) + np.int32(1), axis=0, dtype=np.int32))


def test_left_apart_where_the_result_is_not_1d_or_the_work_is_large(monkeypatch):
    m, g, s = _data((4, 5, 6))
    f = fg.jit(lambda m, g, s: (lambda d: (d, d.sum(axis=0)))(lax.select(m, fnp.zeros_like(g), g * s)))
    program = f.lower(m, g, s)
    assert "reduce_sum" in _names(program) and not any(k.spec.reduction for k in _fused(program))
    monkeypatch.setattr("funcgrad.compiler.fusion.LEADING_MAX_ELEMENTS", 100)
    m, g, s = _data((16, 24))
    program = fg.jit(_masked).lower(m, g, s)
    assert "reduce_sum" in _names(program)
    d, total = fg.jit(_masked)(m, g, s)
    np.testing.assert_allclose(np.asarray(total), np.where(m, 0.0, g.astype(np.float64) * s).sum(0), rtol=1e-5,
                               atol=1e-5)


def _mlp(batch=8, sizes=(20, 24, 24, 10)):
    p, x, y = mlp_data(batch, sizes)
    return fg.jit(funcgrad_step()), ({k: fnp.array(v) for k, v in p.items()}, fnp.array(x), fnp.array(y)), (p, x, y)


def test_mlp_step_is_scheduled_with_fewer_activation_buffers(monkeypatch):
    f, args, (p, x, y) = _mlp()
    program = f.lower(*args)
    planned = program.memory_analysis()
    activation = "f32[8,24] -> buffer"
    grads = numpy_mlp_grad({k: v.astype(np.float64) for k, v in p.items()}, x.astype(np.float64), y)
    want = {k: p[k] - LR * grads[k] for k in p}
    got = f(*args)
    assert wait_for_kernels(timeout=120)
    for name, value in (("scheduled", f(*args)), ("first call", got)):
        for k in p:
            np.testing.assert_allclose(np.asarray(value[k]), want[k], rtol=2e-5, atol=2e-6, err_msg=f"{name} {k}")

    monkeypatch.setattr(schedule, "schedule", lambda jaxpr: jaxpr)   # the traced order, as before the pass
    traced = fg.jit(funcgrad_step()).lower(*args)

    def buffers(prog) -> int:   # distinct planned buffers of the hidden activations' shape
        return len({line.split("buffer ")[1].split()[0] for line in prog.plan if activation in line})
    assert buffers(program) == 2 < buffers(traced)
    assert planned.temp_bytes < traced.memory_analysis().temp_bytes
    assert any("in place of its input" in line for line in program.plan)
    # Both bias gradients of the hidden layers are fused into the kernels of their ReLU backward.
    assert sum(1 for k in _fused(program) if k.spec.leading) == 2


def test_schedule_keeps_every_equation_after_its_inputs_and_programs_with_effects_in_order():
    def f(x, w):
        a = fnp.sin(x) @ w
        b = fnp.cos(x) @ w
        return (a * 2.0 + 1.0) @ w - 0.5 * (b @ w)
    rng = np.random.default_rng(3)
    x, w = (rng.standard_normal((6, 6)).astype(np.float32) for _ in range(2))
    jaxpr = fg.jit(f).trace(x, w)
    ordered = schedule.schedule(jaxpr)
    assert sorted(map(id, ordered.eqns)) == sorted(map(id, jaxpr.eqns))
    seen = {id(v) for v in list(jaxpr.invars) + list(jaxpr.constvars)}
    for eqn in ordered.eqns:
        assert all(id(v) in seen for v in eqn.inputs if not hasattr(v, "value"))
        seen.update(id(v) for v in eqn.outvars)
    xd, wd = x.astype(np.float64), w.astype(np.float64)
    np.testing.assert_allclose(np.asarray(fg.jit(f)(x, w)),
                               (np.sin(xd) @ wd * 2 + 1) @ wd - 0.5 * (np.cos(xd) @ wd @ wd), rtol=1e-4, atol=1e-4)

    def g(x):
        a = fnp.sin(x) @ x
        fg.debug.print("first {}", a.sum())
        b = fnp.cos(x) @ x
        fg.debug.print("second {}", b.sum())
        return a + b
    traced = fg.jit(g).trace(x)
    assert any("effect" in e.prim.traits for e in traced.eqns)
    assert schedule.schedule(traced).eqns == traced.eqns


def test_fused_output_written_over_a_dying_input():
    rng = np.random.default_rng(4)
    x, w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((8, 12), (12, 16), (16, 5)))
    f = fg.jit(lambda x, w1, w2: (fnp.tanh(x @ w1) * 2.0 + 1.0) @ w2)
    program = f.lower(x, w1, w2)
    assert any("in place of its input" in line for line in program.plan)
    assert len(program.buffers) == 1
    got = _run(lambda *a: [f(*a)], x, w1, w2)[0]
    xd, w1d, w2d = (v.astype(np.float64) for v in (x, w1, w2))
    np.testing.assert_allclose(got, (np.tanh(xd @ w1d) * 2 + 1) @ w2d, rtol=1e-5, atol=1e-5)
    # Called again, the planned buffer is reused: the same result.
    np.testing.assert_array_equal(np.asarray(f(x, w1, w2)), got)


def test_no_output_over_an_input_that_another_input_views():
    """``(a - a.T) * 2``: the kernel reads ``a`` through its transpose as well, so writing over ``a`` would read
    elements it has written already."""
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((16, 16)).astype(np.float32), rng.standard_normal((16, 16)).astype(np.float32)
    f = fg.jit(lambda x, w: (lambda a: ((a - a.T) * 2.0) @ w)(x @ w))
    program = f.lower(x, w)
    assert _fused(program) and not any("in place" in line for line in program.plan)
    got = _run(lambda *a: [f(*a)], x, w)[0]
    a = x.astype(np.float64) @ w
    np.testing.assert_allclose(got, ((a - a.T) * 2) @ w, rtol=1e-4, atol=1e-4)


def test_matmul_update_finishes_in_one_pass_with_numpys_bits():
    from funcgrad.backends.cpu import gemm_update
    rng = np.random.default_rng(6)
    w, a, b = (rng.standard_normal(s).astype(np.float32) for s in ((24, 16), (24, 8), (8, 16)))
    f = fg.jit(lambda w, a, b: w - 0.05 * (a @ b))
    assert [e.prim.name for e in f.lower(w, a, b).jaxpr.eqns] == ["matmul_update"]
    first = np.asarray(f(w, a, b))            # the kernel compiles in the background: numpy meanwhile
    assert wait_for_kernels(timeout=120)
    before = gemm_update.stats["one_pass"]
    got = np.asarray(f(w, a, b))
    assert gemm_update.stats["one_pass"] == before + 1
    np.testing.assert_array_equal(got, first)
    np.testing.assert_array_equal(got, w + np.float32(-0.05) * np.matmul(a, b))   # rounded as written
    np.testing.assert_allclose(got, w - 0.05 * (a.astype(np.float64) @ b), rtol=1e-5, atol=1e-5)
