"""Tests for the numba FlashAttention kernels and the fast exp helpers.

Everything is compared with a float64 numpy reference that materialises the
(Nq, Nk) softmax with a bottom-right aligned causal mask, and with its
analytic float64 gradient (plus one finite-difference check of that).
"""
import numpy as np
import pytest

numba = pytest.importorskip("numba")

from funcgrad.backends.cpu import _fastmath  # noqa: E402
from funcgrad.primitives.attention import flash_attention_bwd_p, flash_attention_p  # noqa: E402
from funcgrad.backends.cpu.flash_attention import (  # noqa: E402
    flash_attention_backward,
    flash_attention_forward,
)


# --------------------------------------------------------------------------
# float64 reference
# --------------------------------------------------------------------------

def _mask(Nq, Nk):
    """(Nq, Nk) bool, True where query i may attend key j (bottom-right)."""
    i = np.arange(Nq)[:, None]
    j = np.arange(Nk)[None, :]
    return j <= i + (Nk - Nq)


def ref_forward(q, k, v, causal, scale):
    """o (B, Nq, d), lse (B, Nq), P (B, Nq, Nk) in float64."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = np.einsum("bid,bjd->bij", q, k) * scale
    if causal:
        s = np.where(_mask(q.shape[1], k.shape[1]), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    empty = ~np.isfinite(m)  # rows with no visible key
    m = np.where(empty, 0.0, m)
    e = np.exp(s - m)
    tot = e.sum(axis=-1, keepdims=True)
    p = np.where(empty, 0.0, e / np.where(empty, 1.0, tot))
    lse = np.where(empty, np.inf, m + np.log(np.where(empty, 1.0, tot)))[..., 0]
    return np.einsum("bij,bjd->bid", p, v), lse, p


def ref_backward(q, k, v, do, causal, scale):
    """Analytic float64 gradients (dq, dk, dv) of sum(o * do)."""
    q, k, v, do = (a.astype(np.float64) for a in (q, k, v, do))
    _, _, p = ref_forward(q, k, v, causal, scale)
    dv = np.einsum("bij,bid->bjd", p, do)
    dp = np.einsum("bid,bjd->bij", do, v)
    ds = p * (dp - (p * dp).sum(-1, keepdims=True))
    dq = np.einsum("bij,bjd->bid", ds, k) * scale
    dk = np.einsum("bij,bid->bjd", ds, q) * scale
    return dq, dk, dv


def _inputs(B, Nq, Nk, d, dtype, seed=0, mag=1.0):
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((B, Nq, d)) * mag).astype(dtype)
    k = (rng.standard_normal((B, Nk, d)) * mag).astype(dtype)
    v = rng.standard_normal((B, Nk, d)).astype(dtype)
    do = rng.standard_normal((B, Nq, d)).astype(dtype)
    return q, k, v, do


def _rel(a, b):
    """Max abs error relative to the reference's max magnitude (floor 1).

    The floor matters where the exact answer is 0 (e.g. dq with one key),
    which float32 rounding only reproduces to ~1e-8.
    """
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1.0))


TOL = {np.float32: 2e-5, np.float64: 1e-11}

# Ragged shapes; small tiles so that several tiles, partial tiles and
# diagonal tiles all occur.
SHAPES = [
    (1, 1, 16), (1, 17, 16), (17, 1, 32), (17, 17, 32), (17, 64, 64),
    (64, 17, 16), (64, 64, 32), (129, 64, 64), (64, 129, 16), (129, 129, 32),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("Nq,Nk,d", SHAPES)
def test_forward_backward_match_reference(Nq, Nk, d, causal, dtype):
    B = 3
    q, k, v, do = _inputs(B, Nq, Nk, d, dtype, seed=Nq * 1000 + Nk)
    scale = d ** -0.5
    o, lse = flash_attention_forward(q, k, v, causal=causal, scale=scale,
                                     block_q=32, block_k=16)
    assert o.dtype == dtype and lse.dtype == dtype
    assert o.shape == (B, Nq, d) and lse.shape == (B, Nq)
    o_ref, lse_ref, _ = ref_forward(q, k, v, causal, scale)
    tol = TOL[dtype]
    assert _rel(o, o_ref) < tol
    fin = np.isfinite(lse_ref)
    assert np.array_equal(np.isfinite(lse), fin)
    np.testing.assert_allclose(lse[fin], lse_ref[fin], rtol=tol, atol=tol)

    for onepass in (True, False):
        grads = flash_attention_backward(q, k, v, o, lse, do, causal=causal,
                                         scale=scale, block_q=16, block_k=32,
                                         onepass=onepass)
        for g, g_ref in zip(grads, ref_backward(q, k, v, do, causal, scale)):
            assert g.dtype == dtype
            assert g.shape == g_ref.shape
            assert _rel(g, g_ref) < 5 * tol


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_default_tiles_and_tile_independence(dtype):
    q, k, v, do = _inputs(2, 129, 300, 32, dtype, seed=7)
    o1, l1 = flash_attention_forward(q, k, v, causal=True, scale=0.2)
    o2, l2 = flash_attention_forward(q, k, v, causal=True, scale=0.2,
                                     block_q=7, block_k=5)
    o_ref, lse_ref, _ = ref_forward(q, k, v, True, 0.2)
    assert _rel(o1, o_ref) < TOL[dtype] and _rel(o2, o_ref) < TOL[dtype]
    np.testing.assert_allclose(l1, lse_ref, rtol=TOL[dtype])
    g1 = flash_attention_backward(q, k, v, o1, l1, do, causal=True, scale=0.2)
    g2 = flash_attention_backward(q, k, v, o1, l1, do, causal=True, scale=0.2,
                                  block_q=5, block_k=9)
    for a, b, r in zip(g1, g2, ref_backward(q, k, v, do, True, 0.2)):
        assert _rel(a, r) < 5 * TOL[dtype] and _rel(b, r) < 5 * TOL[dtype]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True])
def test_large_logits_stay_finite(causal, dtype):
    """scale x100: logits ~1e3; the online max must keep exp in range."""
    q, k, v, do = _inputs(2, 64, 129, 32, dtype, seed=3, mag=3.0)
    scale = 100 * 32 ** -0.5
    o, lse = flash_attention_forward(q, k, v, causal=causal, scale=scale,
                                     block_q=16, block_k=32)
    assert np.all(np.isfinite(o)) and np.all(np.isfinite(lse))
    assert np.max(np.abs(lse)) > 1e3  # the logits really were large
    o_ref, lse_ref, _ = ref_forward(q, k, v, causal, scale)
    assert _rel(o, o_ref) < 1e-3
    np.testing.assert_allclose(lse, lse_ref, rtol=1e-5)
    grads = flash_attention_backward(q, k, v, o, lse, do, causal=causal,
                                     scale=scale, block_q=16, block_k=32)
    for g in grads:
        assert np.all(np.isfinite(g))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fully_masked_rows_give_zeros(dtype):
    """Causal with Nq > Nk: the first Nq - Nk rows see no key."""
    B, Nq, Nk, d = 2, 40, 9, 16
    q, k, v, do = _inputs(B, Nq, Nk, d, dtype, seed=11)
    o, lse = flash_attention_forward(q, k, v, causal=True, scale=0.25,
                                     block_q=8, block_k=4)
    dead = Nq - Nk
    assert np.all(o[:, :dead] == 0)
    assert np.all(lse[:, :dead] == np.inf)
    assert np.all(np.isfinite(lse[:, dead:]))
    o_ref, _, _ = ref_forward(q, k, v, True, 0.25)
    assert _rel(o, o_ref) < TOL[dtype]
    for onepass in (True, False):
        dq, dk, dv = flash_attention_backward(
            q, k, v, o, lse, do, causal=True, scale=0.25, block_q=8,
            block_k=4, onepass=onepass)
        for g in (dq, dk, dv):
            assert not np.any(np.isnan(g))
        assert np.all(dq[:, :dead] == 0)
        # dead rows' do must not leak into dk/dv: zero it and compare
        do2 = do.copy()
        do2[:, :dead] = 123.0
        _, dk2, dv2 = flash_attention_backward(
            q, k, v, o, lse, do2, causal=True, scale=0.25, block_q=8,
            block_k=4, onepass=onepass)
        np.testing.assert_array_equal(dk2, dk)
        np.testing.assert_array_equal(dv2, dv)


def test_reference_gradient_matches_finite_differences():
    """Guards the analytic reference itself (float64, tiny shape)."""
    B, Nq, Nk, d = 1, 5, 4, 3
    q, k, v, do = _inputs(B, Nq, Nk, d, np.float64, seed=5)
    for causal in (False, True):
        grads = ref_backward(q, k, v, do, causal, 0.7)
        kern = flash_attention_backward(
            q, k, v, *flash_attention_forward(q, k, v, causal=causal,
                                              scale=0.7),
            do, causal=causal, scale=0.7)
        eps = 1e-6
        for idx, (x, g) in enumerate(zip((q, k, v), grads)):
            fd = np.zeros_like(x)
            for pos in np.ndindex(x.shape):
                xp, xm = x.copy(), x.copy()
                xp[pos] += eps
                xm[pos] -= eps
                args_p = [q, k, v]
                args_m = [q, k, v]
                args_p[idx], args_m[idx] = xp, xm
                fp = np.sum(ref_forward(*args_p, causal, 0.7)[0] * do)
                fm = np.sum(ref_forward(*args_m, causal, 0.7)[0] * do)
                fd[pos] = (fp - fm) / (2 * eps)
            np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
            np.testing.assert_allclose(kern[idx], fd, rtol=1e-6, atol=1e-8)


def test_deterministic():
    q, k, v, do = _inputs(3, 129, 129, 32, np.float32, seed=2)
    o, lse = flash_attention_forward(q, k, v, causal=True, scale=0.2,
                                     block_q=32, block_k=16)
    a = flash_attention_backward(q, k, v, o, lse, do, causal=True, scale=0.2,
                                 block_q=32, block_k=16)
    o2, lse2 = flash_attention_forward(q, k, v, causal=True, scale=0.2,
                                       block_q=32, block_k=16)
    b = flash_attention_backward(q, k, v, o2, lse2, do, causal=True,
                                 scale=0.2, block_q=32, block_k=16)
    np.testing.assert_array_equal(o, o2)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


# --------------------------------------------------------------------------
# the primitives: validation (the kernels trust their arguments) and the
# numpy reference implementation
# --------------------------------------------------------------------------

@pytest.mark.parametrize("bad, error", [
    (lambda q, k, v: (q, k.astype(np.float64), v), TypeError),           # mixed dtype
    (lambda q, k, v: (q, k[:, :, :8].copy(), v[:, :, :8].copy()), ValueError),  # d mismatch
    (lambda q, k, v: (q, k[:1].copy(), v[:1].copy()), ValueError),       # B mismatch
    (lambda q, k, v: (q, k, v[:, :5].copy()), ValueError),               # Nk mismatch k/v
    (lambda q, k, v: (q[0], k[0], v[0]), ValueError),                    # 2-D
    (lambda q, k, v: (q.astype(np.int32), k.astype(np.int32), v.astype(np.int32)), TypeError),
])
@pytest.mark.parametrize("impl", ["cpu", "reference"])
def test_bad_input_raises(bad, error, impl):
    q, k, v, _ = _inputs(2, 16, 12, 16, np.float32)
    q, k, v = bad(q, k, v)
    with pytest.raises(error, match=r"flash_attention: .*[fi]\d\d\[[\d,]+\]"):
        flash_attention_p.impls[impl](q, k, v, causal=False, scale=1.0)


@pytest.mark.parametrize("impl", ["cpu", "reference"])
def test_bad_backward_input_raises(impl):
    q, k, v, do = _inputs(2, 16, 12, 16, np.float32)
    o, lse = flash_attention_forward(q, k, v, causal=False, scale=1.0)
    run = flash_attention_bwd_p.impls[impl]
    with pytest.raises(ValueError, match=r"flash_attention_bwd: lse must be .* shape \(2, 16\)"):
        run(q, k, v, o, lse[:, :3].copy(), do, causal=False, scale=1.0)
    with pytest.raises(ValueError, match=r"flash_attention_bwd: do must be .* shape \(2, 16, 16\)"):
        run(q, k, v, o, lse, do[:, :, :8].copy(), causal=False, scale=1.0)


def test_cpu_impl_takes_non_contiguous_inputs():
    q, k, v, do = _inputs(2, 16, 12, 16, np.float64, seed=4)
    qt = np.ascontiguousarray(q.transpose(0, 2, 1)).transpose(0, 2, 1)   # same values, strided
    o, lse = flash_attention_p.impl(qt, k, v, causal=True, scale=0.3)
    o_ref, lse_ref, _ = ref_forward(q, k, v, True, 0.3)
    assert _rel(o, o_ref) < TOL[np.float64]
    np.testing.assert_allclose(lse, lse_ref, rtol=TOL[np.float64])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("Nq,Nk", [(7, 5), (5, 7), (6, 0)])
def test_numpy_reference_implementation(Nq, Nk, causal):
    """The primitives' own numpy implementations (the kernels' reference; Nq > Nk with a
    causal mask leaves queries that see no key)."""
    q, k, v, do = _inputs(2, Nq, Nk, 4, np.float64, seed=Nq + Nk)
    o, lse = flash_attention_p.impls["reference"](q, k, v, causal=causal, scale=0.6)
    grads = flash_attention_bwd_p.impls["reference"](q, k, v, o, lse, do, causal=causal, scale=0.6)
    if Nk == 0:   # no key at all: every query is blind (the float64 reference above needs a key)
        o_ref, lse_ref = np.zeros_like(o), np.full_like(lse, np.inf)
        grads_ref = (np.zeros_like(q), k, v)
    else:
        o_ref, lse_ref, _ = ref_forward(q, k, v, causal, 0.6)
        grads_ref = ref_backward(q, k, v, do, causal, 0.6)
    np.testing.assert_allclose(o, o_ref, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(lse, lse_ref, rtol=1e-12)
    for g, g_ref in zip(grads, grads_ref):
        assert g.shape == g_ref.shape
        np.testing.assert_allclose(g, g_ref, rtol=1e-11, atol=1e-12)


# --------------------------------------------------------------------------
# fast exp
# --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,lo,hi,tol", [
    (np.float32, -87.3, 88.7, 2e-7),
    (np.float64, -708.0, 709.0, 1e-15),
])
def test_fast_exp_accuracy(dtype, lo, hi, tol):
    fn = _fastmath._exp_array_f32 if dtype == np.float32 else _fastmath._exp_array_f64
    x = np.random.default_rng(0).uniform(lo, hi, 200_000).astype(dtype)
    assert _fastmath._max_rel_err(fn, x) < tol


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fast_exp_special_values(dtype):
    fn = _fastmath._exp_array_f32 if dtype == np.float32 else _fastmath._exp_array_f64
    big = 1e4 if dtype == np.float32 else 1e6
    x = np.array([-np.inf, np.inf, np.nan, -big, big, 0.0, -0.0, 1.0],
                 dtype=dtype)
    out = np.empty_like(x)
    fn(x, out, 1)
    assert out[0] == 0.0 and out[3] == 0.0
    assert out[1] == np.inf and out[4] == np.inf
    assert np.isnan(out[2])
    assert out[5] == 1.0 and out[6] == 1.0
    assert abs(out[7] - np.e) < 4 * np.finfo(dtype).eps * np.e


def test_fast_tanh_accuracy_and_special_values():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-12, 12, 100_000), rng.uniform(-0.7, 0.7, 100_000),
                        rng.uniform(-1e-3, 1e-3, 10_000)]).astype(np.float32)
    assert _fastmath._max_rel_err(_fastmath._tanh_array_f32, x, np.tanh) < 5e-7
    special = np.array([-np.inf, np.inf, np.nan, 0.0, -0.0, 1e-30, 0.625, -0.625, 100.0], np.float32)
    out = np.empty_like(special)
    _fastmath._tanh_array_f32(special, out, 1)
    assert out[0] == -1.0 and out[1] == 1.0 and np.isnan(out[2])
    assert out[3] == 0.0 and out[5] == np.float32(1e-30) and out[8] == 1.0
    assert abs(out[6] - np.tanh(0.625)) < 3e-7 and out[7] == -out[6]
