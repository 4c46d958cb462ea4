"""bfloat16 through execution and the transforms on the CPU, beyond the op table (test_bfloat16_ops.py).

Sums and contractions of bfloat16 accumulate in float32 and round once (numpy alone would add 10,000
bfloat16 ones to 256); Python numbers take the bfloat16 array's dtype; gradients of bfloat16 inputs are
bfloat16, to any order; jit, its cache and donation, and make_jaxpr know the dtype. References are float64
numpy on the same (exactly representable) bfloat16 values.
"""
from __future__ import annotations

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import _core
from funcgrad.backends.cpu import bfloat16 as cpu_bf16
from funcgrad.compiler import fusion, passes
from funcgrad.compiler.codegen import wait_for_kernels
from funcgrad.primitives.conv import conv2d
from conftest import config_set

BF16 = np.dtype(fnp.bfloat16)
EPS = 2.0 ** -7   # bfloat16's machine epsilon


def bf16(a) -> np.ndarray:
    return np.asarray(a, np.float32).astype(BF16)


def f64(a) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def _in_float32_calls(fn):
    before = cpu_bf16.calls[0]
    out = fn()
    return out, cpu_bf16.calls[0] - before


# ------------------------------------------------------------------ float32 accumulation


@pytest.mark.parametrize("compile", [False, True])
def test_long_sum_accumulates_in_float32(compile, rng):
    x = bf16(rng.uniform(0.5, 1.5, 10_000))
    assert float(np.sum(x)) < 0.5 * float(np.sum(f64(x)))   # numpy alone adds in bfloat16: it stalls
    f = fg.jit(fnp.sum) if compile else fnp.sum
    out = f(fnp.asarray(x))
    assert out.dtype == BF16
    np.testing.assert_allclose(float(out), np.sum(f64(x)), rtol=EPS)


def test_sum_over_a_strided_axis_mean_and_cumsum(rng):
    x = bf16(rng.uniform(0.5, 1.5, (4000, 3)))
    ref = np.sum(f64(x), axis=0)
    for out, want in ((fnp.sum(fnp.asarray(x), axis=0), ref), (fnp.mean(fnp.asarray(x), axis=0), ref / 4000),
                      (fnp.cumsum(fnp.asarray(x), axis=0)[-1], ref)):
        assert out.dtype == BF16
        np.testing.assert_allclose(f64(out), want, rtol=EPS)


@pytest.mark.parametrize("compile", [False, True])
def test_matmul_and_einsum_give_bfloat16_accumulated_in_float32(compile, rng):
    a, b = bf16(rng.standard_normal((3, 512))), bf16(rng.standard_normal((512, 4)))
    ref = f64(a) @ f64(b)
    matmul = fg.jit(fnp.matmul) if compile else fnp.matmul
    einsum = fg.jit(lambda x, y: fnp.einsum("ij,jk->ik", x, y)) if compile else \
        (lambda x, y: fnp.einsum("ij,jk->ik", x, y))
    for f in (matmul, einsum):
        out, calls = _in_float32_calls(lambda: f(fnp.asarray(a), fnp.asarray(b)))
        assert out.dtype == BF16 and calls >= 1
        # one rounding of the result (plus float32's own error, far below it)
        np.testing.assert_allclose(f64(out), ref, rtol=EPS, atol=EPS * np.abs(ref).max() / 4)


def test_mixed_bfloat16_float32_matmul_is_float32(rng):
    a, b = bf16(rng.standard_normal((3, 5))), rng.standard_normal((5, 2)).astype(np.float32)
    out = fnp.asarray(a) @ fnp.asarray(b)
    assert out.dtype == np.float32
    np.testing.assert_allclose(f64(out), f64(a) @ f64(b), rtol=1e-5, atol=1e-5)


def _conv2d64(x, w, pad):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    patches = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))   # N C OH OW KH KW
    return np.einsum("ncijkl,ockl->noij", patches, w)


def test_conv_and_softmax_family_on_bfloat16(rng):
    x = bf16(rng.standard_normal((2, 3, 6, 6)))
    w = bf16(rng.standard_normal((4, 3, 3, 3)))
    out, calls = _in_float32_calls(lambda: conv2d(fnp.asarray(x), fnp.asarray(w), padding=1))
    ref = _conv2d64(f64(x), f64(w), 1)
    assert out.dtype == BF16 and calls == 1
    np.testing.assert_allclose(f64(out), ref, rtol=EPS, atol=EPS * np.abs(ref).max() / 2)
    logits = bf16(rng.standard_normal((5, 7)))
    sm = fg.nn.softmax(fnp.asarray(logits))
    e = np.exp(f64(logits) - f64(logits).max(-1, keepdims=True))
    assert sm.dtype == BF16
    np.testing.assert_allclose(f64(sm), e / e.sum(-1, keepdims=True), rtol=2 * EPS, atol=EPS / 8)


# ------------------------------------------------------------------ Python numbers are weakly typed


@pytest.mark.parametrize("compile", [False, True])
def test_python_numbers_take_the_bfloat16_dtype(compile):
    x = fnp.asarray(bf16([1.0, 2.5, -3.0]))

    def f(v):
        return [v * 0.1, 2.0 - v, 2.0 ** v, fnp.maximum(v, 0.5), fnp.where(v > 0, v, 0.25), v + 3]

    for out in (fg.jit(f) if compile else f)(x):
        assert out.dtype == BF16
    # JAX's rounding: the number converted to bfloat16 first, the product rounded once
    want = (f64(bf16(0.1)) * f64(x)).astype(np.float32).astype(BF16)
    np.testing.assert_array_equal(np.asarray((fg.jit(f) if compile else f)(x)[0]), want)


# ------------------------------------------------------------------ derivatives


def _loss(w, x):   # a bfloat16 MLP layer, the loss summed in float32 (as mixed-precision training does)
    return fnp.sum(fnp.tanh(x @ w).astype(fnp.float32) ** 2)


def _loss64(w, x):
    return np.sum(np.tanh(x @ w) ** 2)


def _numeric_grad(f, w, x, h=1e-6):
    g = np.zeros_like(w)
    for k in np.ndindex(w.shape):
        p, m = w.copy(), w.copy()
        p[k] += h
        m[k] -= h
        g[k] = (f(p, x) - f(m, x)) / (2 * h)
    return g


@pytest.mark.parametrize("compile", [False, True])
def test_grad_of_bfloat16_weights_through_a_float32_loss_is_bfloat16(compile, rng):
    w, x = bf16(rng.standard_normal((4, 3)) * 0.5), bf16(rng.standard_normal((6, 4)))
    g = (fg.jit(fg.grad(_loss)) if compile else fg.grad(_loss))(fnp.asarray(w), fnp.asarray(x))
    assert g.dtype == BF16
    ref = _numeric_grad(_loss64, f64(w), f64(x))
    np.testing.assert_allclose(f64(g), ref, rtol=8 * EPS, atol=8 * EPS * np.abs(ref).max())


def test_second_and_third_derivatives_are_bfloat16():
    x = fnp.asarray(bf16([0.5, -1.25, 2.0]))

    def f(v):
        return fnp.sum(fnp.sin(v) * 2.0).astype(fnp.float32)

    d1 = fg.grad(f)
    d2 = fg.grad(lambda v: fnp.sum(d1(v)).astype(fnp.float32))
    d3 = fg.grad(lambda v: fnp.sum(d2(v)).astype(fnp.float32))
    v = f64(x)
    for d, want in ((d1, 2 * np.cos(v)), (d2, -2 * np.sin(v)), (d3, -2 * np.cos(v))):
        out = d(x)
        assert out.dtype == BF16
        np.testing.assert_allclose(f64(out), want, rtol=4 * EPS, atol=4 * EPS)


def test_jvp_vjp_and_vmap_keep_bfloat16(rng):
    x = fnp.asarray(bf16(rng.standard_normal((3, 4))))
    t = fnp.asarray(bf16(rng.standard_normal((3, 4))))

    def f(v):
        return fnp.tanh(v @ v.T) * 3.0

    y, ty = fg.jvp(f, (x,), (t,))
    assert y.dtype == BF16 and ty.dtype == BF16
    xv, tv = f64(x), f64(t)
    s = np.tanh(xv @ xv.T)
    want = 3.0 * (1 - s ** 2) * (tv @ xv.T + xv @ tv.T)
    np.testing.assert_allclose(f64(ty), want, rtol=8 * EPS, atol=8 * EPS * np.abs(want).max())
    _, pullback = fg.vjp(f, x)
    ct, = pullback(fnp.ones((3, 3), fnp.bfloat16))
    assert ct.dtype == BF16
    batched = fg.vmap(lambda v: v @ v)(fnp.asarray(bf16(rng.standard_normal((2, 3, 3)))))
    assert batched.dtype == BF16


# ------------------------------------------------------------------ jit


def test_make_jaxpr_prints_bf16():
    text = str(fg.make_jaxpr(lambda v: fnp.sum(v * 2.0))(fnp.ones((2, 3), fnp.bfloat16)))
    assert "bf16[2,3]" in text and "bf16[] = reduce_sum" in text


def test_jit_cache_tells_bfloat16_from_float16():
    f = fg.jit(lambda v: v * 2.0)
    x = fnp.asarray(bf16([1.0, 2.0]))
    assert f(x).dtype == BF16
    assert f(x.astype(fnp.float16)).dtype == np.float16
    assert f(x).dtype == BF16
    info = f.cache_info()
    assert info["misses"] == 2 and info["hits"] == 1 and info["size"] == 2


@pytest.mark.parametrize("fusion", [True, False])
def test_jit_with_donated_bfloat16_buffers(fusion, rng):
    w0 = bf16(rng.standard_normal((6, 5)) * 0.5)
    xs = [bf16(rng.standard_normal((4, 6))) for _ in range(3)]

    def step(w, x):
        return w - 0.5 * fg.grad(_loss)(w, x)

    with config_set("jit_fusion", fusion):
        plain, donating = fg.jit(step), fg.jit(step, donate_argnums=(0,))
        a, b = fnp.asarray(w0), fnp.asarray(w0)
        for x in xs:
            a = step(a, fnp.asarray(x))    # eager
            old = b
            b = donating(b, fnp.asarray(x))
            assert old.is_deleted() and b.dtype == BF16
        c = fnp.asarray(w0)
        for x in xs:
            c = plain(c, fnp.asarray(x))
    np.testing.assert_array_equal(np.asarray(b), np.asarray(c))
    # jit and eager: one bfloat16 rounding apart at most, per step
    np.testing.assert_allclose(f64(b), f64(a), rtol=4 * EPS, atol=4 * EPS)


# ------------------------------------------------------------------ fused kernels


def _fused(f, *args):
    return [e.prim for e in fusion.fuse(passes.optimize(fg.make_jaxpr(f)(*args))).eqns
            if isinstance(e.prim, fusion.FusedKernel)]


def test_fused_kernel_rounds_each_operation_as_eager_does(rng):
    x = fnp.asarray(bf16(rng.standard_normal((16, 9)) * 3))

    def f(v):   # exact operations: the kernel's per-operation rounding is numpy's, bit for bit
        y = fnp.maximum(v * 0.1 + 1.0, v / 3.0) - v * v
        return y, fnp.where(y > 0.5, y, -y), (y > 0).astype(fnp.bfloat16)

    kernels = _fused(f, x)
    assert len(kernels) == 1 and kernels[0].bfloat16
    out = fg.jit(f)(x)
    wait_for_kernels()
    out = fg.jit(f)(x)
    for o, e in zip(out, f(x)):
        assert o.dtype == BF16
        np.testing.assert_array_equal(np.asarray(o).view(np.uint16), np.asarray(e).view(np.uint16))


def test_fused_conversion_to_bfloat16_matches_numpy_bit_for_bit():
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 3.4e38, -3.4e38, 1.00390625, 1.01171875, 1.0078125,
                         1e-40, -0.0, 0.1], np.float32)
    x = np.concatenate([specials, np.random.default_rng(0).standard_normal(500).astype(np.float32)])

    def f(v):
        return (v * 1.0).astype(fnp.bfloat16)

    assert len(_fused(f, x)) == 1
    out = fg.jit(f)(x)
    wait_for_kernels()
    out = fg.jit(f)(x)
    np.testing.assert_array_equal(np.asarray(out).view(np.uint16), x.astype(BF16).view(np.uint16))


@pytest.mark.parametrize("axis", [1, 0])
def test_fused_reductions_accumulate_in_float32(axis, rng):
    x = fnp.asarray(bf16(rng.uniform(0.5, 1.5, (700, 6))))
    b = fnp.asarray(bf16(rng.uniform(-0.5, 0.5, 6)))

    def f(v, c):   # a trailing (axis=1) or a leading (axis=0: the bias gradient's) reduction
        return fnp.sum(fnp.tanh(v + c), axis=axis)

    kernels = _fused(f, x, b)
    assert len(kernels) == 1 and kernels[0].spec.reduction is not None and kernels[0].spec.leading == (axis == 0)
    out = fg.jit(f)(x, b)
    wait_for_kernels()
    out = fg.jit(f)(x, b)
    y = np.tanh(f64(x) + f64(b)).astype(np.float32).astype(BF16).astype(np.float64)   # rounded, as computed
    ref = y.sum(axis=axis)
    assert out.dtype == BF16
    np.testing.assert_allclose(f64(out), ref, rtol=EPS, atol=EPS)   # tanh in float32: a bfloat16 ulp apart


def test_long_fused_recurrence_matches_eager():
    # A Clenshaw-type recurrence (each value used twice): LLVM took minutes on its rounding before the
    # barrier (an empty inline-asm statement after each rounding); now about a second.
    def f(v):
        b1, b2 = 0.0, 0.0
        for c in np.linspace(-1.0, 1.0, 40):
            b1, b2 = v * b1 - b2 + float(c), b1
        return b1
    x = fnp.asarray(bf16([0.5, -0.25, 0.75]))
    assert len(_fused(f, x)) == 1
    np.testing.assert_allclose(f64(fg.jit(f)(x)), f64(f(x)), rtol=4 * EPS, atol=4 * EPS)


_EAGER_VS_RULE = {
    "sum": lambda v: fnp.sum(v, axis=0), "mean": lambda v: fnp.mean(v), "var": lambda v: fnp.var(v, axis=1),
    "prod": lambda v: fnp.prod(v, axis=1), "cumsum": lambda v: fnp.cumsum(v, axis=1),
    "matmul": lambda v: v @ v.T, "einsum": lambda v: fnp.einsum("ij,kj->ik", v, v),
    "softmax": lambda v: fg.nn.softmax(v), "logsumexp": lambda v: fg.nn.logsumexp(v, axis=-1),
    "weak numbers": lambda v: fnp.clip(2.0 ** v * 0.5 - 1, -0.75, 3), "where": lambda v: fnp.where(v > 0, v, 0.0),
    "max": lambda v: fnp.max(v, axis=1), "norm": lambda v: fnp.linalg.norm(v),
}


@pytest.mark.parametrize("name", sorted(_EAGER_VS_RULE))
def test_eager_results_have_the_shape_rules_dtype(name, rng):
    f = _EAGER_VS_RULE[name]
    x = fnp.asarray(bf16(rng.standard_normal((3, 4))))
    rule = fg.make_jaxpr(f)(x).outvars[0].aval.dtype
    previous = _core.set_fast_path(False)   # the general path (apply_primitive) too
    try:
        general = f(x)
    finally:
        _core.set_fast_path(previous)
    assert rule == BF16 and f(x).dtype == BF16 and general.dtype == BF16


def test_donated_bfloat16_buffer_is_written_by_the_fused_kernel():
    def step(p, x):
        return p - 0.1 * fnp.tanh(x) * p

    f = fg.jit(step, donate_argnums=0)
    p, x = fnp.full((16, 8), 1.0, fnp.bfloat16) + 0.0, fnp.full((16, 8), 0.5, fnp.bfloat16)
    want = f64(p)
    for _ in range(3):
        addr = p._value.__array_interface__["data"][0]
        q = f(p, x)
        wait_for_kernels()
        assert q._value.__array_interface__["data"][0] == addr and p.is_deleted() and q.dtype == BF16
        # per operation rounded, as eager numpy computes bfloat16
        t = np.tanh(np.float32(0.5)).astype(BF16).astype(np.float32)
        prod = (np.float32(bf16(0.1)) * t).astype(BF16).astype(np.float32)
        want = (want.astype(np.float32) - (prod * want.astype(np.float32)).astype(BF16).astype(np.float32)).astype(BF16)
        np.testing.assert_array_equal(np.asarray(q), want)
        p = q
