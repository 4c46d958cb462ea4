"""float16 accumulation, bfloat16 conversion, Policy casts and dynamic loss scaling."""
from __future__ import annotations

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import mixed_precision as mp

# --------------------------------------------------------------------------
# Accumulating 0.01 one thousand times (float64 reference: 1000 * fl(0.01))
# --------------------------------------------------------------------------


def _sequential(dtype, n=1000):
    acc = dtype(0)
    for _ in range(n):
        acc = dtype(acc + dtype(0.01))
    return float(acc)


def test_accumulation_example_float32_float16_and_float16_into_float32():
    ref32 = 1000 * float(np.float32(0.01))   # float64 sums of the stored values
    ref16 = 1000 * float(np.float16(0.01))   # fl16(0.01) = 0.01000213623046875
    # Python loops, one rounding per add: float32 drifts by ~1e-4, float16
    # stalls at 9.95 (at ~10 the float16 spacing is 0.0078, so each +0.01
    # rounds to +0.0078125 from 8 on).
    assert abs(_sequential(np.float32) - ref32) < 2e-4
    assert _sequential(np.float16) == 9.953125
    # funcgrad sums accumulate float16 in float32 and round once.
    x16 = fnp.array(np.full(1000, 0.01, np.float16))
    s16 = fnp.sum(x16)
    assert s16.dtype == np.float16 and float(s16) == float(np.float16(ref16)) == 10.0
    # float16 values into a float32 accumulator: exact to float32 rounding.
    s32 = fnp.sum(x16, dtype=fnp.float32)
    assert s32.dtype == np.float32 and abs(float(s32) - ref16) <= 1e-6 * ref16
    # along a non-contiguous axis numpy alone accumulates in float16 (stalls at 2048)
    ones = np.ones((4096, 3), np.float16)
    assert np.sum(ones, axis=0)[0] == 2048
    assert np.all(np.asarray(fnp.sum(fnp.array(ones), axis=0)) == 4096)
    assert np.asarray(fg.jit(lambda a: fnp.sum(a * 1, axis=0))(fnp.array(ones)))[0] == 4096
    assert float(fnp.cumsum(fnp.array(ones[:, 0]))[-1]) == 4096
    assert float(fnp.mean(fnp.array(ones), axis=0)[0]) == 1.0


def test_float16_matmul_accumulates_in_float32():
    """numpy's float16 matmul/einsum accumulate in float32 (checked, so no upcast is added)."""
    a = fnp.array(np.ones((2, 4096), np.float16))
    b = fnp.array(np.ones((4096, 3), np.float16))
    out = a @ b
    assert out.dtype == np.float16 and np.all(np.asarray(out) == 4096)
    assert np.all(np.asarray(fnp.einsum("ij,jk->ik", a, b)) == 4096)
    x = fnp.array(np.full((1, 1000), 0.01, np.float16))
    assert float((x @ fnp.array(np.ones((1000, 1), np.float16)))[0, 0]) == 10.0  # not 9.95


def test_float16_end_to_end_arithmetic_grad_and_jit():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float16)
    x = rng.standard_normal((5, 4)).astype(np.float16)

    def loss(w, x):
        return fnp.mean(fnp.tanh(x @ w) ** 2)

    g = fg.grad(loss)(fnp.array(w), fnp.array(x))
    assert g.dtype == np.float16
    w64, x64 = w.astype(np.float64), x.astype(np.float64)
    t = np.tanh(x64 @ w64)
    want = x64.T @ (2 * t * (1 - t ** 2)) / t.size
    np.testing.assert_allclose(np.asarray(g, np.float64), want, rtol=2e-2, atol=2e-3)
    jg = fg.jit(fg.grad(loss))(fnp.array(w), fnp.array(x))
    np.testing.assert_allclose(np.asarray(jg, np.float64), np.asarray(g, np.float64), rtol=1e-2, atol=1e-3)
    assert (fnp.array(w) + 1).dtype == np.float16 and (fnp.array(w) * 2.5).dtype == np.float16


# --------------------------------------------------------------------------
# bfloat16
# --------------------------------------------------------------------------


def _nearest_bf16_f64(x: np.ndarray) -> np.ndarray:
    """Reference rounding in float64: nearest bf16 value, ties to even mantissa."""
    x = x.astype(np.float64)
    out = np.empty_like(x)
    for i, v in enumerate(x):
        if not np.isfinite(v):
            out[i] = v
            continue
        m, e = np.frexp(abs(v))              # v = m * 2**e, m in [0.5, 1)
        e = max(e, -125)                     # below: bf16 subnormals share the smallest spacing
        step = 2.0 ** (e - 8)                # 8 significant bits
        lo = np.floor(abs(v) / step) * step
        hi = lo + step
        d_lo, d_hi = abs(v) - lo, hi - abs(v)
        pick = lo if d_lo < d_hi else hi if d_hi < d_lo else (lo if (lo / step) % 2 == 0 else hi)
        out[i] = np.copysign(pick if pick <= 3.3895313892515355e38 else np.inf, v)
    return out


def test_bfloat16_round_trip_matches_float64_nearest_even():
    rng = np.random.default_rng(1)
    special = np.array([0.0, -0.0, 1.0, 1.00390625, 1.01171875, -2.5, 3.14159, 1e-40, -1e-39, 65504.0,
                        3.389531e38, 3.4e38, np.inf, -np.inf, 1.0 + 2 ** -8 + 2 ** -20], np.float32)
    x = np.concatenate([special, (rng.standard_normal(2000) * 10.0 ** rng.integers(-30, 30, 2000))
                        .astype(np.float32)])
    bits = mp.to_bfloat16(fnp.array(x))
    assert bits.dtype == np.uint16
    back = mp.from_bfloat16(bits)
    assert back.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(back, np.float64), _nearest_bf16_f64(x))
    # bits of exactly representable values are the float32's top half
    np.testing.assert_array_equal(np.asarray(mp.to_bfloat16(back)), np.asarray(bits))


def test_bfloat16_nan_stays_nan_and_works_under_jit_and_vmap():
    nan_low_payload = np.array([0x7F800001, 0xFF800001], np.uint32).view(np.float32)
    bits = np.asarray(mp.to_bfloat16(fnp.array(nan_low_payload)))
    assert np.all(np.isnan(np.asarray(mp.from_bfloat16(fnp.array(bits)))))
    assert bits[1] >> 15 == 1  # sign kept
    x = fnp.array([1.0, 3.14159, -7.0])
    np.testing.assert_array_equal(np.asarray(fg.jit(mp.to_bfloat16)(x)), np.asarray(mp.to_bfloat16(x)))
    np.testing.assert_array_equal(np.asarray(fg.vmap(mp.round_to_bfloat16)(x)), [1.0, 3.140625, -7.0])
    with pytest.raises(TypeError, match="uint16"):
        mp.from_bfloat16(fnp.array([1.0]))


def test_round_to_bfloat16_has_straight_through_gradient():
    x = fnp.array([1.0, 3.14159])
    g = fg.grad(lambda v: fnp.sum(mp.round_to_bfloat16(v) ** 2))(x)
    np.testing.assert_allclose(np.asarray(g), [2.0, 2 * 3.140625])


# --------------------------------------------------------------------------
# Policy
# --------------------------------------------------------------------------


def test_policy_casts_only_floating_leaves():
    policy = mp.Policy("float32", "float16", "float32")
    tree = {"w": fnp.ones((2, 2)), "labels": fnp.array([1, 2]), "lr": 0.5}
    half = policy.cast_to_compute(tree)
    assert half["w"].dtype == np.float16 and half["labels"].dtype == np.int32
    assert half["lr"].dtype == np.float16
    back = policy.cast_to_param(half)
    assert back["w"].dtype == np.float32 and back["labels"].dtype == np.int32
    assert policy.cast_to_output(fnp.array([1.0], dtype=fnp.float16)).dtype == np.float32
    bf = mp.Policy(compute_dtype="bfloat16")
    out = bf.cast_to_compute({"w": fnp.array([3.14159]), "labels": fnp.array([3])})
    assert out["w"].dtype == fnp.bfloat16 and float(out["w"][0]) == 3.140625   # real bfloat16, nearest even
    assert out["labels"].dtype == np.int32
    assert mp.Policy(compute_dtype="bf16").compute_dtype == np.dtype(fnp.bfloat16) == mp.BFLOAT16
    assert bf.cast_to_param(out)["w"].dtype == np.float32
    with pytest.raises(TypeError, match="floating"):
        mp.Policy(compute_dtype="int32")


def test_policy_inside_grad_gives_param_dtype_gradients():
    policy = mp.Policy("float32", "float16", "float32")

    def loss(params, x):
        p, x = policy.cast_to_compute((params, x))
        return policy.cast_to_output(fnp.sum(fnp.tanh(x @ p["w"])))

    params = {"w": fnp.array(np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2))}
    g = fg.grad(loss)(params, fnp.ones((4, 3)))
    assert g["w"].dtype == np.float32  # convert's vjp casts back to the input dtype


def test_bfloat16_policy_computes_in_bfloat16_arrays_on_the_cpu():
    """Real bfloat16: the activations are bfloat16 arrays (eagerly and under jit), the matmul accumulates
    in float32 (512 products), and the gradients of the float32 parameters are float32."""
    policy = mp.Policy("float32", "bfloat16", "float32")
    rng = np.random.default_rng(4)
    w = rng.standard_normal((512, 3)).astype(np.float32)
    x = rng.standard_normal((5, 512)).astype(np.float32)
    h = policy.cast_to_compute(fnp.array(x)) @ policy.cast_to_compute(fnp.array(w))
    assert h.dtype == fnp.bfloat16
    xb, wb = (a.astype(fnp.bfloat16).astype(np.float64) for a in (x, w))
    np.testing.assert_allclose(np.asarray(h).astype(np.float64), xb @ wb, rtol=2 ** -8, atol=1e-3)

    def loss(w, x):
        w16, x16 = policy.cast_to_compute((w, x))
        return policy.cast_to_output(fnp.sum(fnp.tanh(x16 @ w16 * 0.05)))

    for f in (fg.value_and_grad(loss), fg.jit(fg.value_and_grad(loss))):
        value, grad = f(fnp.array(w), fnp.array(x))
        assert value.dtype == grad.dtype == np.float32
        t = np.tanh(xb @ wb * 0.05)
        np.testing.assert_allclose(float(value), t.sum(), rtol=2 ** -6)
        np.testing.assert_allclose(np.asarray(grad), xb.T @ (1 - t ** 2) * 0.05, rtol=4 * 2 ** -7, atol=4 * 2 ** -7)


# --------------------------------------------------------------------------
# Dynamic loss scaling
# --------------------------------------------------------------------------


def _reference_state_machine(flags, scale, interval, factor, min_scale=1.0):
    counter, out = 0, []
    for ok in flags:
        if ok:
            counter += 1
            if counter == interval:
                scale, counter = scale * factor, 0
        else:
            scale, counter = max(scale / factor, min_scale), 0
        out.append((scale, counter))
    return out


@pytest.mark.parametrize("use_jit", [False, True])
def test_loss_scale_state_machine(use_jit):
    flags = [True, True, True, False, True, False, False, True, True, True, True]
    ls = mp.DynamicLossScale(scale=8.0, growth_interval=3, factor=2)
    adjust = fg.jit(lambda s, f: s.adjust(f)) if use_jit else (lambda s, f: s.adjust(f))
    got = []
    for f in flags:
        ls = adjust(ls, fnp.array(f))
        got.append((float(ls.scale), int(ls.counter)))
    assert got == _reference_state_machine(flags, 8.0, 3, 2)
    assert ls.scale.dtype == np.float32 and ls.counter.dtype == np.int32
    assert ls.growth_interval == 3  # static settings survive jit


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_loss_scale_floor_and_ceiling():
    ls = mp.DynamicLossScale(scale=2.0, growth_interval=1, factor=2, min_scale=1.0)
    for _ in range(3):
        ls = ls.adjust(False)
    assert float(ls.scale) == 1.0
    big = mp.DynamicLossScale(scale=2.0 ** 127, growth_interval=1, factor=2)
    assert float(big.adjust(True).scale) == 2.0 ** 127  # 2**128 would overflow float32
    with pytest.raises(ValueError, match="growth_interval"):
        mp.DynamicLossScale(growth_interval=0)


def test_loss_scaling_recovers_small_float16_gradients_and_skips_overflow():
    """A float16 gradient of 1e-8 flushes to zero unscaled; scaled by 2**15
    it survives, and unscaling in float32 recovers it."""
    ls = mp.DynamicLossScale(scale=2.0 ** 15)
    w = fnp.array(np.ones(3, np.float16))

    def loss(w):
        return fnp.sum(w * fnp.array(np.float16(1e-8) * np.ones(3, np.float16)))

    plain = fg.grad(lambda w: fnp.sum(w * 1e-8).astype(fnp.float16))(w)
    assert float(fnp.max(fnp.abs(plain))) == 0.0
    scaled = fg.grad(lambda w: ls.scale_loss(loss(w)))(w)
    grads = ls.unscale_grads(mp.Policy("float32").cast_to_param(scaled))
    np.testing.assert_allclose(np.asarray(grads), float(np.float16(1e-8)), rtol=1e-3)
    assert bool(mp.all_finite({"g": grads})) is True

    bad = {"g": fnp.array([1.0, np.inf]), "n": fnp.array([1, 2])}
    finite = mp.all_finite(bad)
    assert bool(finite) is False
    params, new_params = {"w": fnp.ones(2)}, {"w": fnp.zeros(2)}
    kept = mp.select_tree(finite, new_params, params)
    np.testing.assert_array_equal(np.asarray(kept["w"]), [1.0, 1.0])
    assert float(ls.adjust(finite).scale) == 2.0 ** 14


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_loss_scaled_training_step_under_jit():
    policy = mp.Policy("float32", "float16", "float32")

    def loss(p, x):
        p, x = policy.cast_to_compute((p, x))
        return policy.cast_to_output(fnp.mean((x @ p) ** 2))

    @fg.jit
    def step(p, ls, x):
        grads = fg.grad(lambda q: ls.scale_loss(loss(q, x)))(p)
        grads = ls.unscale_grads(policy.cast_to_param(grads))
        finite = mp.all_finite(grads)
        return mp.select_tree(finite, p - 0.1 * grads, p), ls.adjust(finite)

    p = fnp.array(np.full((3, 1), 0.5, np.float32))
    x = fnp.ones((4, 3))
    ls = mp.DynamicLossScale(scale=2.0 ** 10, growth_interval=2)
    p1, ls1 = step(p, ls, x)
    # loss = mean((1.5)^2) -> grad = 2 * 1.5 * 1 = 3 per weight; the scaled
    # float16 gradient, 3 * 2**10, fits: finite, applied
    np.testing.assert_allclose(np.asarray(p1), 0.5 - 0.1 * 3.0, rtol=1e-3)
    assert int(ls1.counter) == 1
    # with 2**15 the float16 gradient 3 * 2**15 overflows (max 65504): the
    # step is skipped and the scale halved
    p2, ls2 = step(p, mp.DynamicLossScale(scale=2.0 ** 15, growth_interval=2), x)
    np.testing.assert_array_equal(np.asarray(p2), np.asarray(p))
    assert float(ls2.scale) == 2.0 ** 14 and int(ls2.counter) == 0


def test_float16_select_on_large_arrays_with_a_scalar():
    """where(mask, x, 0) and a ReLU's gradient on >= 4096 float16 values (the CPU select loops' size)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 80)).astype(np.float16)
    got = fnp.where(fnp.array(x > 0), fnp.array(x), 0.0)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(np.asarray(got), np.where(x > 0, x, np.float16(0)))
    grad = fg.jit(fg.grad(lambda v: fnp.sum(fnp.maximum(v, 0).astype(fnp.float32))))(fnp.array(x))
    assert grad.dtype == np.float16
    np.testing.assert_array_equal(np.asarray(grad), (x > 0).astype(np.float16))
