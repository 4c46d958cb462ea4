"""nn.dot_product_attention (flash and naive) and nn.MultiHeadAttention vs float64 numpy.

Everything is compared with :func:`reference_attention` /
:func:`reference_attention_grads` below: a materialised softmax with the
bottom-right causal mask and its gradients written out by hand, both in
float64 numpy. The funcgrad side runs in float32 (tolerances are relative to
the largest reference entry) except for the finite-difference checks, which
run in float64 under the ``x64`` fixture.

Layout of the file:

* the numerics grid (forward + the three input gradients): every
  Nq x Nk x causal at d=32, a smaller diagonal at d in {16, 64, 128};
  leading (batch, head) axes rotate through 0, 1 and 2 dims across cases;
* large logits, fully masked rows, check_grads;
* transforms: vmap, jit, checkpoint, grad through MultiHeadAttention;
* the clear errors (second order / forward mode of flash, bad inputs);
* the memory test (B*H=8, N=8192, d=64 through ``fg.vjp``; a few seconds).
"""
from __future__ import annotations

import itertools
import math
import time
import tracemalloc

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.nn as nn
import funcgrad.numpy as fnp
from funcgrad import random
from funcgrad.testing import check_grads, process_memory, reset_peak_memory

# --------------------------------------------------------------------------
# float64 numpy references
# --------------------------------------------------------------------------


def visible(nq: int, nk: int, causal: bool) -> np.ndarray:
    """bool[nq, nk]: may query i attend key j? Bottom-right aligned: j <= i + (nk - nq)."""
    if not causal:
        return np.ones((nq, nk), dtype=bool)
    return np.arange(nk)[None, :] <= np.arange(nq)[:, None] + (nk - nq)


def reference_attention(q, k, v, causal: bool, scale: float):
    """(o, p) in float64: o (..., Nq, d), p (..., Nq, Nk) the attention weights.

    Rows that see no key have p = 0 and o = 0 (the library's definition).
    """
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    s = np.where(visible(q.shape[-2], k.shape[-2], causal), q @ np.swapaxes(k, -1, -2) * scale, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    total = np.sum(p, axis=-1, keepdims=True)
    p = p / np.where(total > 0, total, 1.0)
    return p @ v, p


def reference_attention_grads(q, k, v, do, causal: bool, scale: float):
    """(o, dq, dk, dv) in float64, for the cotangent ``do`` of o.

    o = P V with P = softmax(S), S = scale Q K^T (masked):
    dV = P^T dO;  dP = dO V^T;  dS = P * (dP - rowsum(dP * P));
    dQ = scale dS K;  dK = scale dS^T Q.  Masked entries have P = 0, so dS = 0 there.
    """
    q, k, v, do = (np.asarray(x, np.float64) for x in (q, k, v, do))
    o, p = reference_attention(q, k, v, causal, scale)
    dv = np.swapaxes(p, -1, -2) @ do
    dp = do @ np.swapaxes(v, -1, -2)
    ds = p * (dp - np.sum(dp * p, axis=-1, keepdims=True))
    dq = scale * ds @ k
    dk = scale * np.swapaxes(ds, -1, -2) @ q
    return o, dq, dk, dv


def assert_close(actual, expected, tol: float, what: str) -> None:
    """max |actual - expected| <= tol * max(1, max |expected|), and everything finite."""
    a = np.asarray(actual, np.float64)
    e = np.asarray(expected, np.float64)
    assert a.shape == e.shape, f"{what}: shape {a.shape}, expected {e.shape}"
    assert np.all(np.isfinite(a)), f"{what}: non-finite values"
    if a.size == 0:
        return
    err = float(np.max(np.abs(a - e)))
    bound = tol * max(1.0, float(np.max(np.abs(e))))
    assert err <= bound, f"{what}: max abs error {err:.3g} > {bound:.3g}"


def random_qkv(rng, lead, nq, nk, d, dtype=np.float32):
    """q (*lead, nq, d), k, v (*lead, nk, d), do (*lead, nq, d): standard normal."""
    shapes = [lead + (nq, d), lead + (nk, d), lead + (nk, d), lead + (nq, d)]
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def attention_and_grads(q, k, v, do, *, causal, impl, scale=None):
    """funcgrad's (o, dq, dk, dv) as numpy arrays, through fg.vjp."""
    o, pullback = fg.vjp(lambda q, k, v: nn.dot_product_attention(q, k, v, causal=causal, scale=scale, impl=impl),
                         q, k, v)
    return [np.asarray(x) for x in (o, *pullback(do))]


# float32 tolerances (relative to the largest reference entry). Observed max
# errors on the grid were ~1e-6 (forward) and ~3e-6 (gradients); the bounds
# leave a margin for accumulation order and the kernels' polynomial exp.
TOL_F32_OUT = 2e-5
TOL_F32_GRAD = 5e-5

# --------------------------------------------------------------------------
# The numerics grid
# --------------------------------------------------------------------------

SIZES = (1, 17, 64, 129, 300)
LEADS = ((), (2,), (2, 3))   # 0, 1 and 2 leading (batch, head) axes, rotated across cases


def _grid():
    # d=32: every Nq x Nk x causal; other head sizes: a diagonal of shapes, both masks.
    cases = [(nq, nk, 32, causal) for nq, nk, causal in itertools.product(SIZES, SIZES, (False, True))]
    diagonal = [(1, 17), (17, 1), (64, 300), (129, 64), (300, 300)]
    cases += [(nq, nk, d, causal) for d in (16, 64, 128) for nq, nk in diagonal for causal in (False, True)]
    return [pytest.param(nq, nk, d, causal, LEADS[i % 3], id=f"Nq{nq}-Nk{nk}-d{d}-{'causal' if causal else 'full'}"
                         f"-lead{len(LEADS[i % 3])}") for i, (nq, nk, d, causal) in enumerate(cases)]


@pytest.mark.parametrize("impl", ["flash", "naive"])
@pytest.mark.parametrize("nq,nk,d,causal,lead", _grid())
def test_forward_and_gradients_match_float64_reference(impl, nq, nk, d, causal, lead):
    rng = np.random.default_rng(nq * 1000 + nk * 10 + d + causal)
    q, k, v, do = random_qkv(rng, lead, nq, nk, d)
    o, dq, dk, dv = attention_and_grads(q, k, v, do, causal=causal, impl=impl)
    ro, rdq, rdk, rdv = reference_attention_grads(q, k, v, do, causal, 1 / math.sqrt(d))
    assert o.dtype == np.float32 and dq.dtype == np.float32
    assert_close(o, ro, TOL_F32_OUT, "output")
    assert_close(dq, rdq, TOL_F32_GRAD, "dq")
    assert_close(dk, rdk, TOL_F32_GRAD, "dk")
    assert_close(dv, rdv, TOL_F32_GRAD, "dv")


def test_auto_picks_an_implementation_with_the_same_numbers(rng):
    for nq, nk in ((8, 8), (200, 130)):    # below and above the flash threshold
        q, k, v, do = random_qkv(rng, (2,), nq, nk, 16)
        got = attention_and_grads(q, k, v, do, causal=True, impl="auto")
        for g, r, tol in zip(got, reference_attention_grads(q, k, v, do, True, 0.25), (TOL_F32_OUT,) + (TOL_F32_GRAD,) * 3):
            assert_close(g, r, tol, f"auto {nq}x{nk}")


@pytest.mark.parametrize("impl", ["flash", "naive"])
@pytest.mark.parametrize("causal", [False, True])
def test_large_logits_stay_finite_and_accurate(impl, causal, rng):
    # scale x100: logits of order +-100, far past where a plain exp overflows float32.
    q, k, v, do = random_qkv(rng, (2,), 129, 129, 32)
    scale = 100 / math.sqrt(32)
    o, dq, dk, dv = attention_and_grads(q, k, v, do, causal=causal, impl=impl, scale=scale)
    ro, rdq, rdk, rdv = reference_attention_grads(q, k, v, do, causal, scale)
    # float32 logits of size ~500 carry absolute errors ~1e-4, which the softmax
    # turns into relative errors of the same order: hence the looser bound.
    assert_close(o, ro, 1e-3, "output")
    for name, g, r in (("dq", dq, rdq), ("dk", dk, rdk), ("dv", dv, rdv)):
        assert_close(g, r, 2e-3, name)


@pytest.mark.parametrize("impl", ["flash", "naive"])
@pytest.mark.parametrize("nq,nk", [(9, 4), (300, 17), (5, 1)])
def test_fully_masked_rows_give_zero_output_and_zero_gradients(impl, nq, nk, rng):
    # causal with Nq > Nk: the first Nq - Nk query rows see no key at all.
    q, k, v, do = random_qkv(rng, (2,), nq, nk, 16)
    o, dq, dk, dv = attention_and_grads(q, k, v, do, causal=True, impl=impl)
    masked = nq - nk
    for x in (o, dq, dk, dv):
        assert not np.any(np.isnan(x))
    assert np.all(o[:, :masked] == 0) and np.all(dq[:, :masked] == 0)
    ro, rdq, rdk, rdv = reference_attention_grads(q, k, v, do, True, 0.25)
    assert_close(o, ro, TOL_F32_OUT, "output")
    assert_close(dq, rdq, TOL_F32_GRAD, "dq")
    assert_close(dk, rdk, TOL_F32_GRAD, "dk")
    assert_close(dv, rdv, TOL_F32_GRAD, "dv")


# --------------------------------------------------------------------------
# Finite differences (float64)
# --------------------------------------------------------------------------

TINY = [(5, 7, False), (7, 5, True), (4, 4, True)]    # (Nq, Nk, causal); (7, 5) has 2 fully masked rows


@pytest.mark.parametrize("nq,nk,causal", TINY)
def test_flash_check_grads_reverse_order_1(x64, nq, nk, causal):
    q, k, v, _ = random_qkv(np.random.default_rng(nq + nk), (2,), nq, nk, 4, np.float64)
    f = lambda q, k, v: nn.dot_product_attention(q, k, v, causal=causal, impl="flash")   # noqa: E731
    check_grads(f, (q, k, v), order=1, modes=("rev",))


@pytest.mark.parametrize("nq,nk,causal", TINY)
def test_naive_check_grads_both_modes_order_2(x64, nq, nk, causal):
    q, k, v, _ = random_qkv(np.random.default_rng(nq * nk), (2,), nq, nk, 4, np.float64)
    f = lambda q, k, v: nn.dot_product_attention(q, k, v, causal=causal, impl="naive")   # noqa: E731
    check_grads(f, (q, k, v), order=2, modes=("fwd", "rev"))


def test_flash_float64_matches_reference_tightly(x64, rng):
    q, k, v, do = random_qkv(rng, (3,), 70, 130, 24, np.float64)
    got = attention_and_grads(q, k, v, do, causal=True, impl="flash")
    assert got[0].dtype == np.float64
    for g, r in zip(got, reference_attention_grads(q, k, v, do, True, 1 / math.sqrt(24))):
        assert_close(g, r, 1e-10, "float64 flash")


# --------------------------------------------------------------------------
# Half precision (bfloat16, float16) on the CPU
# --------------------------------------------------------------------------

BF16 = np.dtype(fnp.bfloat16)
HALF = [pytest.param(BF16, id="bf16"), pytest.param(np.dtype(np.float16), id="f16")]
# Gradients: errors observed up to 5e-3 (bfloat16) and 4.5e-4 (float16) of the largest entry over 20 seeds
# (o, rounded to the half dtype, enters the backward's rowsum(dO * O)).
TOL_HALF_GRAD = {BF16: 2e-2, np.dtype(np.float16): 2e-3}


@pytest.fixture
def cpu_flash_calls(monkeypatch):
    """The dtypes the CPU flash kernels' entry points were called with: ("forward" | "backward", dtype)."""
    from funcgrad.backends.cpu import flash_attention as kernels
    calls = []
    for name in ("flash_attention_forward", "flash_attention_backward"):
        def counting(*args, _f=getattr(kernels, name), _name=name.rsplit("_", 1)[1], **kwargs):
            calls.append((_name, args[0].dtype))
            return _f(*args, **kwargs)
        monkeypatch.setattr(kernels, name, counting)
    return calls


def assert_rounded_once(actual, expected, what: str) -> None:
    """Each entry of ``actual`` (a half-precision array) is ``expected`` (float64) rounded to its dtype: within
    half an ulp, plus the float32 kernels' own error (1e-5 of the largest entry; a bfloat16 ulp is 4e-3)."""
    e = np.asarray(expected, np.float64)
    half_ulp = 0.5 * np.spacing(np.abs(e).astype(actual.dtype)).astype(np.float64)
    err = np.abs(actual.astype(np.float64) - e)
    bad = err > half_ulp + 1e-5 * np.abs(e).max()
    assert not bad.any(), f"{what}: {bad.sum()} entries off by more than half an ulp, worst {err[bad].max():.3g}"


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_half_precision_flash_on_the_cpu_computes_in_float32_and_rounds_once(dtype, causal, cpu_flash_calls):
    """bfloat16/float16 q, k, v run the float32 kernels; o and dq, dk, dv come back in q's dtype."""
    q, k, v, do = random_qkv(np.random.default_rng(5 + causal), (2,), 12, 19, 32, dtype)
    o, dq, dk, dv = attention_and_grads(q, k, v, do, causal=causal, impl="flash")
    assert cpu_flash_calls == [("forward", np.float32), ("backward", np.float32)]
    ro, rdq, rdk, rdv = reference_attention_grads(q, k, v, do, causal, 1 / math.sqrt(32))
    assert o.dtype == dq.dtype == dk.dtype == dv.dtype == dtype
    assert_rounded_once(o, ro, "output")
    for name, g, r in (("dq", dq, rdq), ("dk", dk, rdk), ("dv", dv, rdv)):
        assert_close(g, r, TOL_HALF_GRAD[dtype], name)


@pytest.mark.parametrize("dtype", HALF)
def test_flash_lse_is_float32_for_half_precision_inputs(dtype, cpu_flash_calls):
    """The primitive's log-sum-exp stays float32 (the backward's exp(s - lse) needs its bits): the shape rule,
    the CPU kernels' path, jit and the numpy reference agree."""
    from funcgrad.primitives.attention import flash_attention_p
    q, k, v, _ = random_qkv(np.random.default_rng(11), (2,), 9, 5, 16, dtype)   # causal 9x5: 4 rows see no key
    params = {"causal": True, "scale": 0.3}
    s = np.where(visible(9, 5, True), q.astype(np.float64) @ np.swapaxes(k, 1, 2).astype(np.float64) * 0.3, -np.inf)
    with np.errstate(divide="ignore"):
        want = np.log(np.exp(s).sum(-1))
    want[:, :4] = np.inf   # rows without keys: the primitive's lse is +inf (log 0 = -inf above)
    o, lse = flash_attention_p.bind(fnp.array(q), fnp.array(k), fnp.array(v), **params)
    assert cpu_flash_calls == [("forward", np.float32)]
    jo, jlse = fg.jit(lambda q, k, v: flash_attention_p.bind(q, k, v, **params))(q, k, v)
    ro, rlse = flash_attention_p.impl(q, k, v, **params)
    for got in (lse, jlse, rlse):
        got = np.asarray(got)
        assert got.dtype == np.float32 and got.shape == (2, 9)
        np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
        np.testing.assert_allclose(got[:, 4:], want[:, 4:], rtol=1e-5, atol=1e-5)
    assert o.dtype == jo.dtype == ro.dtype == dtype
    np.testing.assert_array_equal(np.asarray(jo), np.asarray(o))   # jit runs the same kernels


def test_bfloat16_flash_under_jit_and_vmap_gives_eager_bits(rng):
    q, k, v, do = random_qkv(rng, (3, 2), 10, 14, 16, BF16)
    f = lambda q, k, v: nn.dot_product_attention(q, k, v, causal=True, impl="flash")   # noqa: E731
    pullback = lambda q, k, v, do: fg.vjp(f, q, k, v)[1](do)   # noqa: E731
    eager = [f(q, k, v), *pullback(q, k, v, do)]
    assert all(x.dtype == BF16 for x in eager)
    for name, got in (("jit", [fg.jit(f)(q, k, v), *fg.jit(pullback)(q, k, v, do)]),
                      ("vmap", [fg.vmap(f)(q, k, v), *fg.vmap(pullback)(q, k, v, do)])):
        for x, e in zip(got, eager):   # the same kernels on the same values
            np.testing.assert_array_equal(np.asarray(x).view(np.uint16), np.asarray(e).view(np.uint16), err_msg=name)


# --------------------------------------------------------------------------
# Transforms: vmap, jit, checkpoint
# --------------------------------------------------------------------------


def flash(causal=True):
    return lambda q, k, v: nn.dot_product_attention(q, k, v, causal=causal, impl="flash")


def flash_loss(causal=True):
    # A scalar whose gradient is the vjp with a fixed, non-trivial cotangent.
    w = np.random.default_rng(7).standard_normal((33, 16)).astype(np.float32)
    return lambda q, k, v: fnp.sum(flash(causal)(q, k, v) * w), w


@pytest.mark.parametrize("in_axes", [0, 1, (0, None, None)])
def test_flash_under_vmap_matches_a_loop(in_axes, rng):
    # An extra mapped axis of size 3 on top of a (2, Nq, d) problem.
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * 3
    base = random_qkv(rng, (2,), 33, 20, 16)[:3]
    args = [np.stack([x + i for i in range(3)], axis=a) if a is not None else x for x, a in zip(base, axes)]
    got = np.asarray(fg.vmap(flash(), in_axes=in_axes)(*args))
    take = lambda x, a, i: x if a is None else np.take(x, i, axis=a)   # noqa: E731
    for i in range(3):
        q, k, v = (take(x, a, i) for x, a in zip(args, axes))
        assert_close(got[i], reference_attention(q, k, v, True, 0.25)[0], TOL_F32_OUT, f"vmap slice {i}")


def test_grad_of_flash_under_vmap_matches_a_loop(rng):
    q, k, v, _ = random_qkv(rng, (3, 2), 33, 40, 16)
    loss, w = flash_loss()
    got = fg.vmap(fg.grad(loss, argnums=(0, 1, 2)))(q, k, v)
    do = np.broadcast_to(w, (2, 33, 16))
    for i in range(3):
        ref = reference_attention_grads(q[i], k[i], v[i], do, True, 0.25)[1:]
        for name, g, r in zip(("dq", "dk", "dv"), got, ref):
            assert_close(np.asarray(g)[i], r, TOL_F32_GRAD, f"vmap(grad) {name}[{i}]")


def test_flash_under_jit_forward_and_grad(rng):
    q, k, v, _ = random_qkv(rng, (2,), 33, 40, 16)
    loss, w = flash_loss()
    ro, rdq, rdk, rdv = reference_attention_grads(q, k, v, np.broadcast_to(w, (2, 33, 16)), True, 0.25)
    assert_close(fg.jit(flash())(q, k, v), ro, TOL_F32_OUT, "jit forward")
    grads = fg.jit(fg.grad(loss, argnums=(0, 1, 2)))(q, k, v)
    for name, g, r in zip(("dq", "dk", "dv"), grads, (rdq, rdk, rdv)):
        assert_close(g, r, TOL_F32_GRAD, f"jit(grad) {name}")
    # The traced program holds the attention primitive itself, not a materialised softmax.
    assert "flash_attention" in str(fg.make_jaxpr(loss)(q, k, v))


def test_flash_under_checkpoint(rng):
    q, k, v, _ = random_qkv(rng, (2,), 33, 40, 16)
    loss, w = flash_loss(causal=False)
    rematerialised = fg.checkpoint(flash(causal=False))
    grads = fg.grad(lambda q, k, v: fnp.sum(rematerialised(q, k, v) * w), argnums=(0, 1, 2))(q, k, v)
    ref = reference_attention_grads(q, k, v, np.broadcast_to(w, (2, 33, 16)), False, 0.25)[1:]
    for name, g, r in zip(("dq", "dk", "dv"), grads, ref):
        assert_close(g, r, TOL_F32_GRAD, f"checkpoint {name}")


# --------------------------------------------------------------------------
# MultiHeadAttention
# --------------------------------------------------------------------------


def reference_mha(params, x, heads, causal):
    """The layer in float64 numpy: (y, grads of sum(y) w.r.t. params (a dict), d sum(y) / dx)."""
    p = {name: np.asarray(val, np.float64) for name, val in params.items()}
    x = np.asarray(x, np.float64)
    b, n, _ = x.shape
    inner = p["wq"].shape[1]
    hd = inner // heads
    split = lambda t: t.reshape(b, n, heads, hd).transpose(0, 2, 1, 3)   # noqa: E731
    merge = lambda t: t.transpose(0, 2, 1, 3).reshape(b, n, inner)       # noqa: E731
    q, k, v = (split(x @ p["w" + c] + p["b" + c]) for c in "qkv")
    dy = np.ones((b, n, p["wo"].shape[1]))
    o_heads = reference_attention(q, k, v, causal, 1 / math.sqrt(hd))[0]
    o = merge(o_heads)
    y = o @ p["wo"] + p["bo"]
    _, dq, dk, dv = reference_attention_grads(q, k, v, split(dy @ p["wo"].T), causal, 1 / math.sqrt(hd))
    grads = {"wo": np.einsum("bni,bnj->ij", o, dy), "bo": dy.sum((0, 1))}
    dx = np.zeros_like(x)
    for c, dh in zip("qkv", (dq, dk, dv)):
        dm = merge(dh)
        grads["w" + c] = np.einsum("bni,bnj->ij", x, dm)
        grads["b" + c] = dm.sum((0, 1))
        dx += dm @ p["w" + c].T
    return y, grads, dx


@pytest.mark.parametrize("causal", [False, True])
def test_multi_head_attention_layer_output_and_gradients(causal, rng):
    heads, b, n, dm = 4, 2, 150, 32          # 150 x 150 scores: above the flash threshold too
    layer = nn.MultiHeadAttention(num_heads=heads, causal=causal, impl="flash")
    params, out_shape = layer.init(random.key(0), (-1, n, dm))
    assert out_shape == (-1, n, dm)
    x = rng.standard_normal((b, n, dm)).astype(np.float32)
    y = layer.apply(params, x)
    assert y.shape == (b, n, dm) and y.dtype == np.float32
    # Non-zero biases, so their gradients and their effect on q, k, v are exercised.
    params = {name: val + 0.1 * rng.standard_normal(val.shape).astype(np.float32) if name.startswith("b") else val
              for name, val in params.items()}
    ry, rgrads, rdx = reference_mha(params, x, heads, causal)
    assert_close(layer.apply(params, x), ry, TOL_F32_OUT * 5, "layer output")
    gparams, gx = fg.grad(lambda p, x: fnp.sum(layer.apply(p, x)), argnums=(0, 1))(params, x)
    assert set(gparams) == set(rgrads)
    for name in rgrads:
        assert_close(gparams[name], rgrads[name], TOL_F32_GRAD * 5, f"d{name}")
    assert_close(gx, rdx, TOL_F32_GRAD * 5, "dx")


# --------------------------------------------------------------------------
# Clear errors
# --------------------------------------------------------------------------


def test_second_order_through_flash_raises_a_clear_error(rng):
    q, k, v, _ = random_qkv(rng, (2,), 8, 8, 4)
    first = fg.grad(lambda q, k, v: fnp.sum(flash()(q, k, v) ** 2))
    with pytest.raises(NotImplementedError, match="second-order.*impl='naive'"):
        fg.grad(lambda q: fnp.sum(first(q, k, v)))(q)


def test_forward_mode_through_flash_raises_a_clear_error(rng):
    q, k, v, _ = random_qkv(rng, (2,), 8, 8, 4)
    with pytest.raises(NotImplementedError, match="forward-mode.*impl='naive'"):
        fg.jvp(flash(), (q, k, v), (q, k, v))
    with pytest.raises(NotImplementedError, match="impl='naive'"):
        fg.hessian(lambda q: fnp.sum(flash()(q, k, v)))(q)


def _f32(*shape):
    return np.zeros(shape, np.float32)


@pytest.mark.parametrize("q,k,v,error,match", [
    (_f32(2, 5, 8), _f32(2, 6, 8), _f32(2, 7, 8), ValueError, "k, v"),           # k and v lengths differ
    (_f32(2, 5, 8), _f32(2, 6, 16), _f32(2, 6, 16), ValueError, "d"),            # head dims differ
    (_f32(2, 5, 8), _f32(3, 6, 8), _f32(3, 6, 8), ValueError, "leading"),        # batch axes differ
    (_f32(5, 8), _f32(2, 6, 8), _f32(2, 6, 8), ValueError, r"\(\.\.\., Nq, d\)"),  # ranks differ
    (_f32(8), _f32(8), _f32(8), ValueError, "Nq"),                               # no sequence axis
    (np.zeros((2, 5, 8), np.int32),) * 3 + (TypeError, "float"),                 # integers
    (_f32(2, 5, 257), _f32(2, 6, 257), _f32(2, 6, 257), ValueError, "256"),     # head dim too large
])
@pytest.mark.parametrize("impl", ["flash", "naive"])
def test_bad_inputs_raise_clear_errors(q, k, v, error, match, impl):
    with pytest.raises(error, match=match):
        nn.dot_product_attention(q, k, v, impl=impl)


def test_mismatched_dtypes_raise(x64):
    with pytest.raises(TypeError, match="dtype"):
        nn.dot_product_attention(_f32(2, 5, 8), np.zeros((2, 5, 8)), np.zeros((2, 5, 8)), impl="flash")


def test_unknown_impl_raises():
    with pytest.raises(ValueError, match="impl must be 'auto', 'flash' or 'naive'.*'fast'"):
        nn.dot_product_attention(_f32(2, 5, 8), _f32(2, 5, 8), _f32(2, 5, 8), impl="fast")


# --------------------------------------------------------------------------
# Memory: O(N d), never O(N^2)
# --------------------------------------------------------------------------

MEM_BH, MEM_N, MEM_D = 8, 8192, 64
MEM_BUDGET = 100 * 2**20


@pytest.mark.slow
def test_flash_forward_backward_memory_is_linear_in_n():
    """fwd+bwd through ``fg.vjp`` at B*H=8, N=8192, d=64 f32 allocates < 100 MB beyond in/out/grads.

    What is measured:

    * tracemalloc: every numpy allocation (numpy reports its buffers to
      tracemalloc), i.e. the outputs, gradients, and all temporaries of the
      primitive, its vjp rule and the kernel wrappers (per-thread scratch,
      the row-dot D). Inputs are funcgrad Arrays made before measuring (a
      numpy input would be copied once by ``fg.vjp`` -- funcgrad never
      aliases memory the user can still write).
    * The numba kernels' own allocations (NRT) are invisible to tracemalloc;
      they get all scratch from numpy, and the process' peak RSS (VmHWM,
      reset just before) bounds everything, numba and BLAS included.

    The materialised (naive) path would need the score matrix alone:
    8 * 8192**2 * 4 bytes = 2 GiB (and the backward keeps P too).
    ``causal=True``: the same buffers as non-causal, but half the tiles, so
    the test takes half the time (~3 s on an idle 2-core machine).
    """
    naive_scores = MEM_BH * MEM_N ** 2 * 4
    assert naive_scores == 2 * 2**30 > 2e9

    rng = np.random.default_rng(0)
    shape = (2, MEM_BH // 2, MEM_N, MEM_D)            # (batch, heads, N, d)
    q, k, v, do = (fnp.asarray(rng.standard_normal(shape, dtype=np.float32)) for _ in range(4))
    f = lambda q, k, v: nn.dot_product_attention(q, k, v, causal=True, impl="flash")   # noqa: E731
    small = tuple(x[:, :, :512] for x in (q, k, v, do))
    out, pullback = fg.vjp(f, *small[:3])             # warm-up: load the kernels, start the threads
    pullback(small[3])

    has_rss = reset_peak_memory()
    rss_before = process_memory("VmRSS") if has_rss else None
    tracemalloc.start()
    start = time.perf_counter()
    try:
        out, pullback = fg.vjp(f, q, k, v)
        grads = pullback(do)
        _, traced_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    seconds = time.perf_counter() - start

    kept = np.asarray(out).nbytes + sum(np.asarray(g).nbytes for g in grads)      # 4 x 16 MiB
    extra = traced_peak - kept
    print(f"\nflash fwd+bwd B*H={MEM_BH} N={MEM_N} d={MEM_D}: {seconds:.1f} s, numpy peak {traced_peak / 2**20:.1f} MiB "
          f"= outputs+grads {kept / 2**20:.1f} MiB + extra {extra / 2**20:.1f} MiB "
          f"(naive scores alone: {naive_scores / 2**30:.0f} GiB)")
    assert extra < MEM_BUDGET, f"flash fwd+bwd allocated {extra / 2**20:.1f} MiB beyond its outputs and gradients"
    if has_rss:
        rss_extra = process_memory("VmHWM") - rss_before - kept
        print(f"peak RSS beyond outputs+grads: {rss_extra / 2**20:.1f} MiB")
        assert rss_extra < MEM_BUDGET, f"peak RSS grew {rss_extra / 2**20:.1f} MiB beyond outputs and gradients"
    # Still the right numbers, checked on the last 64 query rows against all keys: with the
    # bottom-right alignment, those rows alone (Nq=64, Nk=8192, causal) are the same problem.
    q_last, k0, v0 = np.asarray(q)[0, 0, -64:], np.asarray(k)[0, 0], np.asarray(v)[0, 0]
    assert_close(np.asarray(out)[0, 0, -64:], reference_attention(q_last, k0, v0, True, 1 / math.sqrt(MEM_D))[0],
                 TOL_F32_OUT, "last 64 rows")
