"""jit on GPU arrays: fused elementwise chains as generated Triton kernels.

CI has no GPU: the GPU backend runs over the numpy stand-in for CuPy
(``gpu_standin``) and the generated kernels in Triton's interpreter
(TRITON_INTERPRET=1, set below before triton is imported). References are
float64 numpy; the number of kernels is counted from the fusion rules. The
sm_90 compile check and the real-GPU test run in subprocesses without the
interpreter.
"""
from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # must precede any triton import

import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

triton = pytest.importorskip("triton", reason="triton is not installed (pip install triton==3.9.0)")

import funcgrad as fg  # noqa: E402
import funcgrad.numpy as fnp  # noqa: E402
from funcgrad.backends.gpu import _detect  # noqa: E402
from funcgrad.backends.gpu import triton_codegen as tc  # noqa: E402
from funcgrad.backends.gpu.compile import GpuProgram  # noqa: E402
from gpu_standin import FakeDeviceArray, gpu_standin  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]

if not isinstance(tc._load("import triton\n\n\n@triton.jit\ndef kernel(x):\n    pass\n"),
                  triton.runtime.interpreter.InterpretedFunction):
    pytest.skip("triton was imported before TRITON_INTERPRET=1 was set (another test module imported it "
                "first); run this module on its own", allow_module_level=True)


@pytest.fixture
def gpu():
    with gpu_standin(use_triton=True):
        yield


def dev(x):
    return fg.device_put(fnp.asarray(x), "gpu")


def host(y):
    assert y.device == "gpu" and isinstance(y._value, FakeDeviceArray)
    return np.asarray(fg.device_put(y, "cpu"))


def run(f, *args):
    """``jit(f)`` on device copies of ``args``: its program and its results on the host."""
    jf = fg.jit(f)
    dargs = [dev(a) for a in args]
    program = jf.lower(*dargs)
    assert isinstance(program, GpuProgram)
    out = jf(*dargs)
    return program, ([host(o) for o in out] if isinstance(out, (tuple, list)) else host(out))


def n_kernels(program):
    return len(program.kernels)


rng = np.random.default_rng(0)
X = rng.standard_normal((5, 7)).astype(np.float32)
ROW = rng.standard_normal(7).astype(np.float32)
COL = rng.standard_normal((5, 1)).astype(np.float32)


def test_chain_with_broadcasting_and_scalars_is_one_kernel(gpu):
    def f(x, row, col, s):
        return fnp.sin(x * 2.5 + row) * col / (1.0 + x * x) - s
    s = np.float32(0.75)
    program, y = run(f, X, ROW, COL, s)
    x, row, col = X.astype(np.float64), ROW.astype(np.float64), COL.astype(np.float64)
    assert n_kernels(program) == 1 and len(program.jaxpr.eqns) == 1
    assert y.dtype == np.float32 and y.shape == (5, 7)
    np.testing.assert_allclose(y, np.sin(x * 2.5 + row) * col / (1.0 + x * x) - 0.75, rtol=2e-6, atol=1e-6)
    # the row and the column are broadcast inputs (materialised), the scalar is read once
    assert sorted(w for _, _, w in program.kernels[0].inputs) == ["full", "full", "full", "one"]


def test_one_kernel_per_iteration_shape(gpu):
    # exp(col - s) has the column's shape: a group (and a kernel) of its own, sealed before the big one
    program, y = run(lambda x, col, s: fnp.cos(x) * fnp.exp(col - s) + x, X, COL, np.float32(0.75))
    x, col = X.astype(np.float64), COL.astype(np.float64)
    assert n_kernels(program) == 2 and [k.shape for k in program.kernels] == [(5, 1), (5, 7)]
    np.testing.assert_allclose(y, np.cos(x) * np.exp(col - 0.75) + x, rtol=2e-6, atol=1e-6)


def test_select_comparisons_and_bool_outputs(gpu):
    def f(x, row):
        pos = (x > 0) & (row <= 0.5)
        return fnp.where(pos, fnp.tanh(x), fnp.maximum(x, row) - 1.0), pos, ~pos
    program, (y, pos, neg) = run(f, X, ROW)
    x, row = X.astype(np.float64), ROW.astype(np.float64)
    ref_pos = (x > 0) & (row <= 0.5)
    assert n_kernels(program) == 1
    assert pos.dtype == np.bool_ and neg.dtype == np.bool_
    np.testing.assert_array_equal(pos, ref_pos)
    np.testing.assert_array_equal(neg, ~ref_pos)
    np.testing.assert_allclose(y, np.where(ref_pos, np.tanh(x), np.maximum(x, row) - 1.0), rtol=2e-6, atol=1e-6)


def test_tanh_and_logistic_accuracy_across_ranges(gpu):
    x = np.concatenate([np.linspace(-30, 30, 41), np.linspace(-0.2, 0.2, 41), [1e-6, -3e-5]]).astype(np.float32)
    program, (t, s) = run(lambda v: (fnp.tanh(v * 1.0), fg.nn.sigmoid(v) + 0.0), x)
    assert n_kernels(program) == 1
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(t, np.tanh(x64), rtol=4e-6, atol=1e-7)
    np.testing.assert_allclose(s, 1 / (1 + np.exp(-x64)), rtol=4e-6, atol=1e-7)


def test_nan_and_inf_semantics(gpu):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -1.5, 2.0], np.float32)
    y = np.array([1.0, np.nan, 0.0, -0.0, np.inf, 3.0], np.float32)
    program, (mx, mn, nan, fin) = run(
        lambda a, b: (fnp.maximum(a, b) * 1.0, fnp.minimum(a, b) * 1.0, fnp.isnan(a * b), fnp.isfinite(a + b)), x, y)
    assert n_kernels(program) == 1
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(mx, np.maximum(x, y))
        np.testing.assert_array_equal(mn, np.minimum(x, y))
        np.testing.assert_array_equal(nan, np.isnan(x * y))
        np.testing.assert_array_equal(fin, np.isfinite(x + y))


def test_int32_chain_wraps_and_mixes_with_float(gpu):
    a = np.array([[2 ** 30, -7, 5], [3, 0, -2 ** 31]], np.int32)
    b = np.array([3, -2, 7], np.int32)

    def f(a, b):
        i = fnp.maximum(a * 3 - b, -b)            # int32 arithmetic (wraps, as numpy)
        return i, (i > b) | (a == 0), i.astype(np.float32) * 0.5 + fnp.abs(b)
    program, (i, c, z) = run(f, a, b)
    with np.errstate(over="ignore"):
        ref = np.maximum(a * np.int32(3) - b, -b)
    # two iteration shapes: abs and the conversion of b ([3]) are a kernel; neg b, sealed alone, is not
    assert n_kernels(program) == 2 and [k.shape for k in program.kernels] == [(3,), (2, 3)]
    assert i.dtype == np.int32 and c.dtype == np.bool_ and z.dtype == np.float32
    np.testing.assert_array_equal(i, ref)
    np.testing.assert_array_equal(c, (ref > b) | (a == 0))
    np.testing.assert_allclose(z, ref.astype(np.float64) * 0.5 + np.abs(b), rtol=1e-7)


def test_logical_operations_on_integers_are_truth_values(gpu):
    a = np.array([5, 0, -3, 7, 0], np.int32)
    c = np.array([3, 10, 0, -1, 0], np.int32)
    program, (y, e) = run(lambda a, c: (fnp.logical_and(a, c) ^ fnp.logical_or(a > c, fnp.logical_not(c)),
                                        (a > c) == fnp.logical_not(a)), a, c)
    assert n_kernels(program) == 1 and y.dtype == np.bool_ and e.dtype == np.bool_
    np.testing.assert_array_equal(y, np.logical_and(a, c) ^ np.logical_or(a > c, np.logical_not(c)))
    np.testing.assert_array_equal(e, (a > c) == np.logical_not(a))


def test_float16_computes_in_float32_and_rounds_once(gpu):
    x = rng.uniform(-2, 2, (4, 9)).astype(np.float16)
    w = rng.uniform(0.5, 1.5, 9).astype(np.float16)
    program, y = run(lambda x, w: fnp.exp(x * w) - x / w, x, w)
    assert n_kernels(program) == 1 and y.dtype == np.float16
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    ref = np.exp(x64 * w64) - x64 / w64
    # one rounding to float16 of a float32-accurate value: within half an ulp (plus float32 slack)
    ulp = np.spacing(np.abs(ref).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(y.astype(np.float64) - ref) <= 0.5 * ulp + 1e-6 * np.abs(ref))


def test_mixed_float16_float32_promotion(gpu):
    x = rng.standard_normal((3, 4)).astype(np.float16)
    program, y = run(lambda x, v: fnp.sqrt(fnp.abs(x + v)) * 3.0, x, ROW[:4])
    assert n_kernels(program) == 1 and y.dtype == np.float32
    ref = np.sqrt(np.abs(x.astype(np.float64) + ROW[:4].astype(np.float64))) * 3.0
    np.testing.assert_allclose(y, ref, rtol=2e-6)


def test_unfusible_operations_split_groups_and_lone_ops_stay_unfused(gpu):
    w = rng.standard_normal((7, 3)).astype(np.float32)

    def f(x, w):
        h = fnp.exp(x) * 0.5 + 1.0              # kernel 1
        z = h @ w                                # matmul: the GPU implementation
        p = fnp.power(fnp.abs(z), 1.5)           # pow has no Triton lowering: unfused
        # kernel 2: add, log, mul ending in the sum, which alone leaves it; z + 1.0 (sealed after it) is alone
        return fnp.sum(fnp.log(p + 1.0) * z, axis=1), z + 1.0
    program, (s, z1) = run(f, X, w)
    names = [e.prim.name for e in program.jaxpr.eqns]
    assert n_kernels(program) == 2 and "matmul" in names and "pow" in names and "reduce_sum" not in names
    assert program.kernels[1].reduction[0].name == "reduce_sum" and program.kernels[1].outputs == []
    x64 = X.astype(np.float64)
    z = (np.exp(x64) * 0.5 + 1.0) @ w.astype(np.float64)
    np.testing.assert_allclose(s, np.sum(np.log(np.abs(z) ** 1.5 + 1.0) * z, axis=1), rtol=2e-5)
    np.testing.assert_allclose(z1, z + 1.0, rtol=2e-5)
    # one operation is one kernel either way: not fused
    program, y = run(lambda x: fnp.exp(x), X)
    assert n_kernels(program) == 0
    np.testing.assert_allclose(y, np.exp(X.astype(np.float64)), rtol=1e-6)


@pytest.mark.parametrize("name", ["sum", "max", "min"])
def test_trailing_reduction_ends_the_kernel(gpu, name):
    x = rng.standard_normal((2, 3, 37)).astype(np.float32)
    x[1, 2, 5] = np.nan                       # NaN propagates through sum, max and min, as in numpy
    red, ref_red = getattr(fnp, name), getattr(np, name)

    def f(x, row):
        y = fnp.tanh(x) * 2.0 + row
        return y, red(y * y - 1.0, axis=-1), red(fnp.exp(x) * x, axis=(1, 2))
    row = rng.standard_normal(37).astype(np.float32)
    program, (y, a, b) = run(f, x, row)
    assert n_kernels(program) == 2 and len(program.jaxpr.eqns) == 2   # a row epilogue in each
    assert [k.reduction[0].name for k in program.kernels] == [f"reduce_{name}"] * 2
    x64 = x.astype(np.float64)
    y64 = np.tanh(x64) * 2.0 + row
    np.testing.assert_allclose(y, y64, rtol=4e-6, atol=1e-6)
    assert a.shape == (2, 3) and b.shape == (2,)
    np.testing.assert_allclose(a, ref_red(y64 * y64 - 1.0, axis=-1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b, ref_red(np.exp(x64) * x64, axis=(1, 2)), rtol=1e-5, atol=1e-5)
    assert np.isnan(a[1, 2]) and np.isnan(b[1]) and not np.isnan(a[0]).any()


def test_reductions_over_long_rows_int32_and_float16(gpu):
    x = rng.standard_normal((2, 2100)).astype(np.float32)   # three 1024-element chunks per row
    program, s = run(lambda v: fnp.sum(fnp.abs(v) * 0.5 + 1.0, axis=1), x)
    assert n_kernels(program) == 1 and program.kernels[0].block == 1024
    np.testing.assert_allclose(s, np.sum(np.abs(x.astype(np.float64)) * 0.5 + 1.0, axis=1), rtol=1e-6)
    i = rng.integers(-1000, 1000, (3, 50)).astype(np.int32)
    program, (m, t) = run(lambda v: (fnp.max(v * 3 - 7, axis=1), fnp.sum(fnp.abs(v) + 1, axis=1)), i)
    assert n_kernels(program) == 2 and m.dtype == np.int32 and t.dtype == np.int32
    np.testing.assert_array_equal(m, np.max(i * 3 - 7, axis=1))
    np.testing.assert_array_equal(t, np.sum(np.abs(i) + 1, axis=1))
    h = rng.uniform(-1, 1, (4, 300)).astype(np.float16)      # accumulates in float32, rounds once
    program, hs = run(lambda v: fnp.sum(v * v + 1.0, axis=-1), h)
    assert n_kernels(program) == 1 and hs.dtype == np.float16
    ref = np.sum(h.astype(np.float64) ** 2 + 1.0, axis=-1)
    assert np.all(np.abs(hs.astype(np.float64) - ref) <= 0.5 * np.spacing(ref.astype(np.float16)) + 1e-5 * ref)


def test_long_rows_reduce_outside_the_kernel(gpu):
    x = rng.standard_normal(tc.MAX_ROW + 5).astype(np.float32)
    program, s = run(lambda v: fnp.sum(fnp.exp(v) * 0.5, axis=0), x)
    assert n_kernels(program) == 1 and program.kernels[0].reduction is None
    assert [e.prim.name for e in program.jaxpr.eqns] == ["triton_fused", "reduce_sum"]
    np.testing.assert_allclose(s, np.sum(np.exp(x.astype(np.float64)) * 0.5), rtol=1e-5)


def test_small_integer_powers_fuse_as_products(gpu):
    x = rng.uniform(0.5, 2.0, (3, 5)).astype(np.float32) * np.array([1, -1, 1, -1, 1], np.float32)
    program, (a, b, c) = run(lambda v: (v ** 2 + v ** 3, 1.0 + v ** -2, fnp.abs(v) ** 2.5 * 1.0), x)
    # abs joins the first kernel (same shape, independent); 2.5 is no small integer: pow stays, and the
    # lone multiply after it is not worth a kernel
    assert n_kernels(program) == 1
    assert [e.prim.name for e in program.jaxpr.eqns] == ["triton_fused", "pow", "mul"]
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(a, x64 ** 2 + x64 ** 3, rtol=2e-6)
    np.testing.assert_allclose(b, 1.0 + x64 ** -2.0, rtol=2e-6)
    np.testing.assert_allclose(c, np.abs(x64) ** 2.5, rtol=2e-6)
    i = np.array([[3, -4, 1000, 70000]], np.int32)
    program, j = run(lambda v: v ** 2 - v ** 3, i)
    assert n_kernels(program) == 1 and j.dtype == np.int32
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(j, i * i - i * i * i)   # wrapping, as numpy's int32


def test_empty_reduction_stays_unfused(gpu):
    program, (s, m) = run(lambda v: (fnp.sum(fnp.exp(v) * 2.0, axis=1), fnp.exp(v) * 3.0 + 1.0),
                          np.zeros((3, 0), np.float32))
    assert all(k.reduction is None for k in program.kernels)
    np.testing.assert_array_equal(s, np.zeros(3))
    assert m.shape == (3, 0)


def test_mlp_step_elementwise_parts_fuse_and_match_the_cpu(gpu):
    w1 = (rng.standard_normal((7, 6)) * 0.4).astype(np.float32)
    w2 = (rng.standard_normal((6, 3)) * 0.4).astype(np.float32)
    b1 = rng.standard_normal(6).astype(np.float32) * 0.1
    t = rng.standard_normal((5, 3)).astype(np.float32)

    def loss(params, x, t):
        w1, b1, w2 = params
        h = fnp.tanh(x @ w1 + b1)
        y = h @ w2
        return fnp.mean((y - t) ** 2)

    def step(params, x, t):
        value, grads = fg.value_and_grad(loss)(params, x, t)
        return value, tuple(p - 0.1 * g for p, g in zip(params, grads))

    params = (w1, b1, w2)
    jstep = fg.jit(step)
    dparams = tuple(dev(p) for p in params)
    program = jstep.lower(dparams, dev(X), dev(t))
    assert n_kernels(program) >= 2   # the forward's bias+tanh, the backward's tanh derivative chain
    value, new = jstep(dparams, dev(X), dev(t))
    ref_value, ref_new = fg.jit(step)(params, fnp.asarray(X), fnp.asarray(t))   # the CPU's compiled step
    np.testing.assert_allclose(host(value), np.asarray(ref_value), rtol=1e-5)
    for a, b in zip(new, ref_new):
        np.testing.assert_allclose(host(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    # and against float64 numpy
    x64, t64 = X.astype(np.float64), t.astype(np.float64)
    h = np.tanh(x64 @ w1 + b1)
    np.testing.assert_allclose(host(value), np.mean((h @ w2 - t64) ** 2), rtol=1e-5)


def test_loop_bodies_are_compiled_and_fused(gpu):
    from funcgrad import lax
    x = X[:3, :4]

    def f(x):
        return lax.fori_loop(0, 3, lambda i, c: fnp.sin(c) * 0.5 + x * i, x) * 2.0 + 1.0
    program, y = run(f, x)
    (loop,) = [e for e in program.jaxpr.eqns if e.prim.name == "scan"]
    body = loop.params["body"].program
    # per step: the counter and its float ([] shape), then the carry's chain
    assert [k.summary for k in body.kernels] == ["add,convert_element_type", "sin,mul,mul,add"]
    c = x64 = x.astype(np.float64)
    for i in range(3):
        c = np.sin(c) * 0.5 + x64 * i
    np.testing.assert_allclose(y, c * 2.0 + 1.0, rtol=2e-6, atol=1e-6)
    # the body's compiled form on host buffers (a loop whose operands are all host values) runs on the host
    args = [np.int32(1), x, np.int32(2), x]
    host_out = body.run_buffers(args)
    assert all(type(o) is np.ndarray for o in host_out)
    np.testing.assert_allclose(host_out[1], np.sin(x64) * 0.5 + x64 * 2, rtol=2e-6)
    # gradients through the loop match the CPU's
    g = lambda v: fnp.sum(lax.fori_loop(0, 3, lambda i, c: fnp.tanh(c) * v + 0.1, v))   # noqa: E731
    np.testing.assert_allclose(host(fg.jit(fg.grad(g))(dev(x))), np.asarray(fg.grad(g)(fnp.asarray(x))),
                               rtol=1e-5, atol=1e-6)


def test_kernels_are_cached_by_source(gpu):
    f = lambda x, r: fnp.cos(x) * r - 2.0   # noqa: E731
    run(f, X, ROW)
    before = tc.kernel_count()
    program, y = run(f, X + 1, ROW)         # a new jit, same program: same kernel
    assert tc.kernel_count() == before and n_kernels(program) == 1
    np.testing.assert_allclose(y, np.cos(X.astype(np.float64) + 1) * ROW - 2.0, rtol=2e-6, atol=1e-6)


def test_without_fusion_or_triton_runs_unfused(gpu):
    f = lambda x: fnp.exp(x) * 2.0 - 1.0    # noqa: E731
    ref = np.exp(X.astype(np.float64)) * 2.0 - 1.0
    fg.config.update("jit_fusion", False)
    try:
        program, y = run(f, X)
    finally:
        fg.config.update("jit_fusion", True)
    assert n_kernels(program) == 0
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)
    with gpu_standin(use_triton=False):
        program, y = run(f, X)
    assert n_kernels(program) == 0
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)


def test_debug_nans_runs_unfused_and_host_scalars_are_uploaded(gpu):
    f = lambda x, s: fnp.exp(x) * s - 1.0   # noqa: E731
    jf = fg.jit(f)
    gx = dev(X)
    program = jf.lower(gx, 2.5)
    assert n_kernels(program) == 1 and [w for _, _, w in program.kernels[0].inputs] == ["full", "one"]
    np.testing.assert_allclose(host(jf(gx, 2.5)), np.exp(X.astype(np.float64)) * 2.5 - 1.0, rtol=1e-6, atol=1e-6)
    fg.config.update("debug_nans", True)
    try:
        program = fg.jit(f).lower(gx, 2.5)
    finally:
        fg.config.update("debug_nans", False)
    assert n_kernels(program) == 0


def test_bool_to_number_conversions_select_zero_or_one(gpu):
    # Found on an H200 with Triton 3.6: an int1 true cast to int32 became -1 on the GPU (the interpreter
    # and later Triton give 1), so jit(allclose(x, x)) was False there. Conversions of bools select 0 or 1.
    x = np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)
    program, outs = run(lambda a, b: (fnp.allclose(a, b), (a > 0).astype(np.int32) * 3, (a > b).astype(np.float32)),
                        x, x)
    assert program.kernels and any("tl.where(" in k.source for k in program.kernels)
    seen = 0
    for source in (k.source for k in program.kernels):
        for name in re.findall(r"(v\d+) = .*\.to\(tl\.int1\)", source):   # a bool is never cast to a number
            seen += 1
            assert not re.search(rf"\b{name}\)?\.to\(tl\.(int32|float32|float16)\)", source), (name, source)
    assert seen
    assert bool(outs[0]) is True
    np.testing.assert_array_equal(outs[1], (x > 0).astype(np.int32) * 3)
    np.testing.assert_array_equal(outs[2], np.zeros((3, 4), np.float32))


def test_empty_and_zero_dim_arrays(gpu):
    program, y = run(lambda x: fnp.exp(x) + x * 2.0, np.zeros((0, 3), np.float32))
    assert n_kernels(program) == 1 and y.shape == (0, 3)
    program, y = run(lambda x: fnp.exp(x) + x * 2.0, np.float32(0.5))
    assert n_kernels(program) == 1 and y.shape == ()
    np.testing.assert_allclose(y, np.exp(0.5) + 1.0, rtol=1e-6)


def test_float64_stays_unfused_under_x64(gpu):
    fg.config.update("enable_x64", True)
    try:
        x = np.linspace(-1, 1, 6)
        program, y = run(lambda v: fnp.sin(v) * 2.0 + 1.0, x)
    finally:
        fg.config.update("enable_x64", False)
    assert n_kernels(program) == 0 and y.dtype == np.float64
    np.testing.assert_allclose(y, np.sin(x) * 2.0 + 1.0, rtol=1e-12)


# --------------------------------------------------------------------------
# sm_90 compile check (CPU only, subprocess without TRITON_INTERPRET)
# --------------------------------------------------------------------------

_COMPILE_SCRIPT = """
import funcgrad as fg, funcgrad.numpy as fnp, numpy as np
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from funcgrad.backends.gpu import compile as gc
jaxpr = fg.make_jaxpr(lambda x, h, b: (fnp.where(x > 0, fnp.tanh(x * h.astype(np.float32)), x) + b,
                                        (x > b) & (h > 0)))(
    fnp.ones((4, 8)), fnp.ones((4, 8), np.float16), fnp.ones(8))
kernel = gc.fuse(jaxpr).eqns[0].prim
sig = {f"{n}_ptr": "*" + {"float32": "fp32", "float16": "fp16", "int32": "i32", "uint8": "u8"}[
    {"float32": "float32", "float16": "float16", "int32": "int32", "bool": "uint8"}[np.dtype(d).name]]
    for n, d, _ in kernel.inputs}
sig.update({f"{n}_out": "*" + {"float32": "fp32", "float16": "fp16", "int32": "i32", "bool": "u8"}[np.dtype(d).name]
            for n, d in kernel.outputs})
sig.update(n="i32", BLOCK="constexpr")
src = ASTSource(fn=kernel.kernel, signature=sig, constexprs={"BLOCK": 1024})
compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
print("COMPILED", len(kernel.inputs), len(kernel.outputs), "ptx" in compiled.asm, "cubin" in compiled.asm)
jaxpr = fg.make_jaxpr(lambda x: fnp.max(fnp.exp(x) * 2.0 - x, axis=-1))(fnp.ones((4, 3000)))
kernel = gc.fuse(jaxpr).eqns[0].prim
src = ASTSource(fn=kernel.kernel, signature={"x0_ptr": "*fp32", "r_out": "*fp32", "cols": "i32",
                                             "BLOCK": "constexpr"}, constexprs={"BLOCK": kernel.block})
compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
print("REDUCTION", kernel.reduction[0].name, "cubin" in compiled.asm)
bf = fnp.bfloat16
jaxpr = fg.make_jaxpr(lambda x, w: fnp.sum(fnp.tanh(x * w) - x.astype(np.float32).astype(bf), axis=-1))(
    fnp.ones((4, 64), bf), fnp.ones(64, bf))
kernel = gc.fuse(jaxpr).eqns[0].prim
sig = {f"{n}_ptr": "*bf16" for n, _, _ in kernel.inputs}
sig.update(r_out="*bf16", cols="i32", BLOCK="constexpr")
compiled = triton.compile(ASTSource(fn=kernel.kernel, signature=sig, constexprs={"BLOCK": kernel.block}),
                          target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
print("BFLOAT16", len(kernel.inputs), "tl.bfloat16" in kernel.source, "cubin" in compiled.asm)
"""


def test_generated_kernel_compiles_for_sm90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    res = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT], cwd=REPO_ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "COMPILED 3 2 True True" in res.stdout, res.stdout[-2000:]
    assert "REDUCTION reduce_max True" in res.stdout, res.stdout[-2000:]
    assert "BFLOAT16 2 True True" in res.stdout, res.stdout[-2000:]   # bf16 buffers, float32 math, RNE bits


# --------------------------------------------------------------------------
# real GPU (CuPy, compiled kernels): a subprocess without the interpreter
# --------------------------------------------------------------------------

_GPU_SCRIPT = """
import numpy as np, funcgrad as fg, funcgrad.numpy as fnp
f = lambda x, r: (fnp.where(x > 0, fnp.tanh(x * 2.0 + r), fnp.exp(x) - 1.0), (x * r).astype(np.float16) * 2)
x = np.random.default_rng(0).standard_normal((300, 517)).astype(np.float32)
r = np.linspace(-1, 1, 517, dtype=np.float32)
jf = fg.jit(f)
gx, gr = fg.device_put(fnp.asarray(x), "gpu"), fg.device_put(fnp.asarray(r), "gpu")
assert len(jf.lower(gx, gr).kernels) == 1
a, b = jf(gx, gr)
x64, r64 = x.astype(np.float64), r.astype(np.float64)
np.testing.assert_allclose(np.asarray(fg.device_put(a, "cpu")),
                           np.where(x64 > 0, np.tanh(x64 * 2 + r64), np.exp(x64) - 1), rtol=3e-6, atol=1e-6)
# float16: rtol for normal numbers, atol of two float16 subnormal steps (2**-24) for the tiny products
np.testing.assert_allclose(np.asarray(fg.device_put(b, "cpu")).astype(np.float64), (x64 * r64) * 2, rtol=2e-3,
                           atol=2 * 2.0 ** -24)
print("GPU OK")
"""


@pytest.mark.gpu
@pytest.mark.skipif(not _detect.gpu_available(), reason="no usable GPU detected")
def test_real_gpu_fused_kernel():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    res = subprocess.run([sys.executable, "-c", _GPU_SCRIPT], cwd=REPO_ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "GPU OK" in res.stdout
