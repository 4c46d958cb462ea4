"""funcgrad.lax's slicing, padding, iotas, clamping, bit operations, reductions, cumulative scans, sorting,
``reduce_window`` and ``conv_general_dilated``: values against float64 numpy, derivatives against finite
differences, JAX's conventions where it fixes a value (NaN order, ties, clamp at its bounds)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.lax as lax
import funcgrad.numpy as fnp
from funcgrad.testing import check_grads

RNG = np.random.default_rng(0)


def a(x):
    return fnp.array(x)


def test_slices_and_split():
    x = np.arange(60.0).reshape(3, 4, 5)
    np.testing.assert_array_equal(np.asarray(lax.slice(a(x), (0, 1, 0), (3, 4, 5), (2, 1, 3))), x[0:3:2, 1:4, 0:5:3])
    np.testing.assert_array_equal(np.asarray(lax.slice_in_dim(a(x), -3, None, 2, axis=2)), x[:, :, -3::2])
    np.testing.assert_array_equal(np.asarray(lax.index_in_dim(a(x), -1, axis=1, keepdims=False)), x[:, -1])
    np.testing.assert_array_equal(np.asarray(lax.index_in_dim(a(x), 2, axis=1)), x[:, 2:3])
    pieces = lax.split(a(x), (1, 0, 3), axis=1)
    for got, want in zip(pieces, np.split(x, [1, 1], axis=1)):
        np.testing.assert_array_equal(np.asarray(got), want)
    with pytest.raises(ValueError, match=r"slice: bounds \(2, 5, stride 1\) do not fit an axis of size 4"):
        lax.slice(a(x), (0, 2, 0), (3, 5, 5))
    with pytest.raises(ValueError, match=r"split: sizes \(1, 2\) must be non-negative and add up"):
        lax.split(a(x), (1, 2), axis=1)
    with pytest.raises(IndexError, match="index_in_dim: index 4 is out of range for axis 1"):
        lax.index_in_dim(a(x), 4, axis=1)


def _pad_reference(x, value, config):
    """numpy: place x at stride (interior + 1) in a filled array, then crop negative edges."""
    for axis, (lo, hi, interior) in enumerate(config):
        n = x.shape[axis]
        size = max(n + (n - 1) * interior, 0) + max(lo, 0) + max(hi, 0)
        out = np.full(x.shape[:axis] + (size,) + x.shape[axis + 1:], value, x.dtype)
        idx = [slice(None)] * x.ndim
        idx[axis] = slice(max(lo, 0), max(lo, 0) + n + (n - 1) * interior, interior + 1)
        out[tuple(idx)] = x
        idx[axis] = slice(max(-lo, 0), size - max(-hi, 0))
        x = out[tuple(idx)]
    return x


@pytest.mark.parametrize("config", [[(1, 2, 0), (0, 0, 1)], [(-1, 2, 1), (2, -1, 2)], [(0, 0, 0), (-2, -1, 0)]])
def test_pad_matches_numpy_and_differentiates(x64, config):
    x = RNG.standard_normal((3, 4))
    np.testing.assert_array_equal(np.asarray(lax.pad(a(x), -7.0, config)), _pad_reference(x, -7.0, config))
    check_grads(lambda x: lax.pad(x, 0.5, config), (a(x),), order=2)


def test_pad_with_a_traced_value(x64):
    x = RNG.standard_normal(3)
    config = [(1, 1, 1)]
    f = fg.jit(lambda x, v: lax.pad(x, v, config))
    np.testing.assert_array_equal(np.asarray(f(a(x), a(2.5))), _pad_reference(x, 2.5, config))
    # d/dv: one per padded slot
    assert float(fg.grad(lambda v: fnp.sum(lax.pad(a(x), v, config)))(1.0)) == 4.0


def test_iotas_and_shapes():
    np.testing.assert_array_equal(np.asarray(lax.iota(np.int32, 5)), np.arange(5))
    np.testing.assert_array_equal(np.asarray(lax.broadcasted_iota(np.float32, (2, 3), 1)),
                                  np.broadcast_to(np.arange(3.0), (2, 3)))
    assert lax.broadcast(fnp.ones((2,)), (4, 3)).shape == (4, 3, 2)
    assert lax.broadcast_shapes((3, 1), (1, 4)) == (3, 4)
    assert lax.broadcast_to_rank(fnp.ones(3), 3).shape == (1, 1, 3)
    assert lax.collapse(fnp.ones((2, 3, 4, 5)), 1, 3).shape == (2, 12, 5)
    with pytest.raises(ValueError, match=r"broadcast_shapes: shapes \(3,\), \(4,\) are incompatible"):
        lax.broadcast_shapes((3,), (4,))


def test_clamp_values_and_jax_gradient_at_bounds():
    x = np.array([-2.0, 0.0, 0.5, 1.0, 3.0])
    np.testing.assert_array_equal(np.asarray(lax.clamp(0.0, a(x), 1.0)), np.clip(x, 0, 1))
    g = fg.grad(lambda x: fnp.sum(lax.clamp(0.0, x, 1.0)))(a(x))
    np.testing.assert_array_equal(np.asarray(g), [0.0, 0.0, 1.0, 0.0, 0.0])   # jax.grad: 0 on the bounds
    gmin = fg.grad(lambda m: fnp.sum(lax.clamp(m, a(x), 1.0)))(0.0)
    assert float(gmin) == 1.0                                                   # only x = -2 is below


def test_select_n_and_elementwise_helpers(x64):
    which = np.array([0, 2, 1, 2])
    cases = [RNG.standard_normal(4) for _ in range(3)]
    np.testing.assert_array_equal(np.asarray(lax.select_n(a(which), *map(a, cases))), np.choose(which, cases))
    np.testing.assert_array_equal(np.asarray(lax.select_n(a(which > 1), a(cases[0]), a(cases[1]))),
                                  np.where(which > 1, cases[1], cases[0]))
    x = RNG.uniform(0.5, 2.0, 5)
    np.testing.assert_allclose(np.asarray(lax.rsqrt(a(x))), 1 / np.sqrt(x), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(lax.integer_pow(a(x), 3)), x ** 3, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(lax.reciprocal(a(x))), 1 / x, rtol=1e-14)
    check_grads(lambda x: lax.rsqrt(x) + lax.square(x), (a(x),), order=2)
    with pytest.raises(TypeError, match="integer_pow: the exponent must be a Python int"):
        lax.integer_pow(a(x), 2.5)


def test_integer_bit_operations():
    x = np.array([5, -3, 0, 2**30, -(2**31)], np.int32)
    y = np.array([3, 6, -1, 7, 1], np.int32)
    np.testing.assert_array_equal(np.asarray(lax.bitwise_xor(a(x), a(y))), x ^ y)
    np.testing.assert_array_equal(np.asarray(lax.bitwise_not(a(x))), ~x)
    u = np.array([0, 1, 2**32 - 1], np.uint32)
    np.testing.assert_array_equal(np.asarray(lax.bitwise_not(a(u))), ~u)
    np.testing.assert_array_equal(np.asarray(lax.shift_right_arithmetic(a(x), a(np.int32(2)))), x >> 2)
    with pytest.raises(TypeError, match="bitwise_xor: operands must be integers or bools, got f32"):
        lax.bitwise_xor(fnp.ones(2), fnp.ones(2))


def test_reductions():
    b = RNG.random((3, 4)) > 0.5
    b[0] = True
    for name, ref in (("reduce_and", np.all), ("reduce_or", np.any),
                      ("reduce_xor", lambda v, axis: np.bitwise_xor.reduce(v, axis=axis))):
        np.testing.assert_array_equal(np.asarray(getattr(lax, name)(a(b), (1,))), ref(b, axis=1))
    x = RNG.standard_normal((3, 4))
    np.testing.assert_allclose(np.asarray(lax.reduce(a(x), 1.5, lax.add, (0,))), x.sum(0) + 1.5, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(lax.reduce(a(x), -np.inf, lax.max, (1,))), x.max(1), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="reduce: funcgrad reduces one operand with addition"):
        lax.reduce(a(x), 0.0, lambda u, v: u - v, (0,))


@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative(x64, reverse):
    x = np.array([[1.5, -2.0, 0.0, 3.0, 0.5], [0.7, 0.0, 0.0, -1.2, 2.0]])
    flip = (lambda v: v[:, ::-1]) if reverse else (lambda v: v)
    refs = {"cumprod": np.cumprod, "cummax": np.maximum.accumulate, "cummin": np.minimum.accumulate,
            "cumlogsumexp": np.logaddexp.accumulate}
    for name, ref in refs.items():
        got = getattr(lax, name)(a(x), axis=1, reverse=reverse)
        np.testing.assert_allclose(np.asarray(got), flip(ref(flip(x), axis=1)), rtol=1e-13, err_msg=name)
    # gradients with zeros in the input (the product's gradient must not divide by x)
    check_grads(lambda x: lax.cumprod(x, axis=1, reverse=reverse), (a(x),), order=2)
    check_grads(lambda x: lax.cumlogsumexp(x, axis=1, reverse=reverse), (a(x),), order=2)
    distinct = RNG.permutation(10).reshape(2, 5).astype(float)   # no ties: max/min differentiable
    check_grads(lambda x: lax.cummax(x, axis=1, reverse=reverse), (a(distinct),), order=1)


def _windows_reference(x, window, strides, pads, fill, reduce):
    x = np.pad(x, pads, constant_values=fill)
    out_shape = [(n - w) // s + 1 for n, w, s in zip(x.shape, window, strides)]
    out = np.empty(out_shape)
    for idx in itertools.product(*map(range, out_shape)):
        sl = tuple(slice(i * s, i * s + w) for i, s, w in zip(idx, strides, window))
        out[idx] = reduce(x[sl])
    return out


@pytest.mark.parametrize("padding", ["VALID", "SAME", [(1, 0), (2, 1)]])
def test_reduce_window(x64, padding):
    x = RNG.permutation(42).reshape(6, 7).astype(float)          # distinct: max is differentiable
    window, strides = (2, 3), (2, 2)
    if padding == "VALID":
        pads = [(0, 0), (0, 0)]
    elif padding == "SAME":   # XLA: total = (ceil(n / s) - 1) * s + w - n, the odd one on the high side
        pads = [(0, 0), (1, 1)]
    else:
        pads = padding
    got = lax.reduce_window(a(x), -np.inf, lax.max, window, strides, padding)
    np.testing.assert_array_equal(np.asarray(got), _windows_reference(x, window, strides, pads, -np.inf, np.max))
    got = lax.reduce_window(a(x), 0.0, lax.add, window, strides, padding)
    np.testing.assert_allclose(np.asarray(got), _windows_reference(x, window, strides, pads, 0.0, np.sum))
    check_grads(lambda x: lax.reduce_window(x, -np.inf, lax.max, window, strides, padding), (a(x),), order=1)
    check_grads(lambda x: lax.reduce_window(x, 0.0, lax.add, window, strides, padding), (a(x),), order=2)


def test_sort_nan_last_keys_and_gradient(x64):
    x = np.array([3.0, np.nan, 1.0, -np.inf, 2.0])
    np.testing.assert_array_equal(np.asarray(lax.sort(a(x))), np.sort(x))
    keys = np.array([2, 1, 2, 1, 0])
    tie = np.array([4.0, 3.0, 1.0, 2.0, 9.0])
    vals = np.arange(5.0)
    k, t, v = lax.sort((a(keys), a(tie), a(vals)), num_keys=2)
    order = np.lexsort((tie, keys))
    np.testing.assert_array_equal(np.asarray(v), vals[order])
    np.testing.assert_array_equal(np.asarray(k), keys[order])
    m = RNG.standard_normal((3, 4))
    np.testing.assert_array_equal(np.asarray(lax.sort(a(m), dimension=0)), np.sort(m, axis=0))
    check_grads(lambda m: lax.sort(m, dimension=0) * fnp.arange(4.0), (a(m),), order=2)
    sk, sv = lax.sort_key_val(a(m), a(m * 10), dimension=1)
    np.testing.assert_array_equal(np.asarray(sv), np.take_along_axis(m * 10, np.argsort(m, 1), 1))


def test_top_k(x64):
    x = np.array([[1.0, 3.0, 3.0, np.nan, 2.0], [0.5, -1.0, 4.0, 0.0, 4.0]])
    values, idx = lax.top_k(a(x), 3)
    # JAX: NaN counts as the largest; equal values in index order
    np.testing.assert_array_equal(np.asarray(idx), [[3, 1, 2], [2, 4, 0]])
    np.testing.assert_array_equal(np.asarray(values)[1], [4.0, 4.0, 0.5])
    assert idx.dtype == np.int32
    y = RNG.standard_normal((2, 6))
    check_grads(lambda y: lax.top_k(y, 2)[0], (a(y),), order=2)
    with pytest.raises(ValueError, match=r"top_k: k=7 must be between 0 and the last axis of f64\[2,6\]"):
        lax.top_k(a(y), 7)


def test_dot(x64):
    m, v = RNG.standard_normal((3, 4)), RNG.standard_normal(4)
    np.testing.assert_allclose(np.asarray(lax.dot(a(m), a(v))), m @ v, rtol=1e-13)
    np.testing.assert_allclose(np.asarray(lax.dot(a(v), a(v))), v @ v, rtol=1e-13)
    np.testing.assert_allclose(np.asarray(lax.dot(a(m), a(m.T))), m @ m.T, rtol=1e-13)
    with pytest.raises(ValueError, match="dot: expected 1-d or 2-d operands"):
        lax.dot(a(m), a(m))


def _conv_reference(x, w, strides, pads, dilation, groups):
    """NCHW x OIHW cross-correlation in float64 loops."""
    x = np.pad(x, [(0, 0), (0, 0)] + list(pads))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    eh, ew = (kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1
    oh, ow = (h - eh) // strides[0] + 1, (wd - ew) // strides[1] + 1
    out = np.zeros((n, o, oh, ow))
    per = o // groups
    for oc in range(o):
        g = oc // per
        for i in range(oh):
            for j in range(ow):
                patch = x[:, g * cg:(g + 1) * cg, i * strides[0]:i * strides[0] + eh:dilation[0],
                          j * strides[1]:j * strides[1] + ew:dilation[1]]
                out[:, oc, i, j] = np.sum(patch * w[oc], axis=(1, 2, 3))
    return out


def test_conv_general_dilated_nhwc_same_dilated(x64):
    x, w = RNG.standard_normal((2, 5, 6, 4)), RNG.standard_normal((3, 2, 2, 6))   # NHWC, HWIO, 2 groups
    f = lambda x, w: lax.conv_general_dilated(x, w, (2, 1), "SAME", rhs_dilation=(1, 2),   # noqa: E731
                                              dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=2)
    got = f(a(x), a(w))
    # SAME with effective kernel (3, 3), strides (2, 1) on (5, 6): pads (1, 1) and (1, 1)
    ref = _conv_reference(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), (2, 1), [(1, 1), (1, 1)], (1, 2), 2)
    np.testing.assert_allclose(np.asarray(got), ref.transpose(0, 2, 3, 1), rtol=1e-12)
    check_grads(f, (a(x), a(w)), order=1)


def test_conv_general_dilated_1d_asymmetric_padding(x64):
    x, w = RNG.standard_normal((2, 3, 7)), RNG.standard_normal((4, 3, 3))
    got = lax.conv_general_dilated(a(x), a(w), (1,), [(2, 1)])
    ref = _conv_reference(x[:, :, None], w[:, :, None], (1, 1), [(0, 0), (2, 1)], (1, 1), 1)[:, :, 0]
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-12)
    with pytest.raises(NotImplementedError, match="lhs_dilation and batch_group_count"):
        lax.conv_general_dilated(a(x), a(w), (1,), "VALID", lhs_dilation=(2,))


def test_jit_and_vmap_of_the_composites():
    x = fnp.array(RNG.standard_normal((3, 8)).astype(np.float32))

    def f(row):
        v, _ = lax.top_k(row, 3)
        return lax.cumlogsumexp(lax.sort(row))[-1] + fnp.sum(v) + fnp.sum(lax.pad(row, 0.0, [(1, 1, 1)]))

    eager = np.array([np.asarray(f(r)) for r in x])
    np.testing.assert_allclose(np.asarray(fg.vmap(f)(x)), eager, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(fg.jit(fg.vmap(f))(x)), eager, rtol=1e-5)


def test_reduce_recognises_the_monoid_however_written():
    import operator
    x = RNG.standard_normal((3, 4))
    for computation, ref in ((operator.add, np.sum), (lambda u, v: u * v, np.prod), (fnp.maximum, np.max),
                             (lax.min, np.min)):
        got = lax.reduce(a(x), 0.0 if ref is np.sum else (1.0 if ref is np.prod else np.nan), computation, (1,))
        want = ref(x, axis=1) if ref in (np.sum, np.prod) else np.full(3, np.nan)   # max/min with a NaN init
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(lax.reduce_window(a(x), 0.0, operator.add, (1, 2), (1, 2))),
                               x.reshape(3, 2, 2).sum(-1), rtol=1e-6)


def test_round_breaks_ties_away_from_zero_by_default_as_jax():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -0.49999997, 1e8 + 0.5, 3.7, -3.2, 0.0],
                 np.float32)
    x64 = x.astype(np.float64)
    want = np.sign(x64) * np.floor(np.abs(x64) + 0.5)          # exact in float64 for these float32 values
    np.testing.assert_array_equal(np.asarray(lax.round(x)), want.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)), np.round(x))
    np.testing.assert_array_equal(np.asarray(fg.jit(lax.round)(x)), want.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(fg.grad(lambda v: lax.round(v).sum())(x)), np.zeros_like(x))
    with pytest.raises(ValueError, match="rounding_method"):
        lax.round(x, 7)
    with pytest.raises(TypeError, match="floating-point"):
        lax.round(np.array([1, 2]))


def test_rem_is_c_fmod_as_jax():
    x = np.array([7.0, -7.0, 7.5, -0.5], np.float64)
    y = np.array([3.0, 3.0, -2.0, 0.25], np.float64)
    np.testing.assert_allclose(np.asarray(lax.rem(x.astype(np.float32), y.astype(np.float32))), np.fmod(x, y))
    xi, yi = np.array([7, -7, 7, -7]), np.array([3, 3, -3, -3])
    np.testing.assert_array_equal(np.asarray(lax.rem(xi, yi)), np.fmod(xi, yi))
    check_grads(lambda a, b: lax.rem(a, b), (x[:2], y[:2]), order=1, modes=("rev",))


def test_population_count_keeps_the_dtype_and_argmax_takes_index_dtype():
    for dt in (np.int32, np.uint8, np.int8):
        x = np.array([7, 8, 0, -1 if np.dtype(dt).kind == "i" else 255], dt)
        got = lax.population_count(x)
        assert np.asarray(got).dtype == dt
        want = [bin(int(v) & (2 ** (8 * np.dtype(dt).itemsize) - 1)).count("1") for v in x]
        np.testing.assert_array_equal(np.asarray(got), want)
    m = np.array([[1.0, 3.0, 2.0], [5.0, 4.0, 6.0]])
    got = lax.argmax(m, 1, np.int16)
    assert np.asarray(got).dtype == np.int16
    np.testing.assert_array_equal(np.asarray(got), m.argmax(1))
    np.testing.assert_array_equal(np.asarray(lax.argmin(m, 0, np.int32)), m.argmin(0))
    with pytest.raises(TypeError, match="index_dtype"):
        lax.argmax(m, 1, np.float32)
