"""The direct convolution kernels (few taps per output: a first layer on one channel, depthwise layers) against
float64 references: values, both gradients, non-finite inputs, thread counts, and that the direct path ran."""
from __future__ import annotations

import numpy as np
import pytest

import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.backends.cpu import _threads
from funcgrad.backends.cpu import kernels_conv as kc
from funcgrad.testing import check_grads

from test_cpu_kernels import TOL, ref_conv, ref_conv_grads

# (N, C, H, W), (O, KH, KW), stride, padding, dilation, groups: C/groups * KH * KW <= 9 in each
DIRECT_CASES = [
    ((3, 1, 8, 8), (5, 3, 3), 1, 1, 1, 1),           # the MNIST first layer's geometry, small
    ((2, 1, 7, 9), (4, 3, 3), 1, 0, 1, 1),           # valid padding: the scratch columns hold data
    ((2, 1, 9, 8), (3, 3, 2), (2, 1), (1, 0), (1, 2), 1),
    ((2, 1, 6, 7), (3, 2, 3), (1, 3), (2, 1), (2, 1), 1),
    ((2, 4, 7, 6), (8, 3, 3), 1, 1, 1, 4),           # depthwise, two outputs per channel
    ((3, 6, 10, 11), (6, 3, 3), 2, 2, 2, 6),         # depthwise, stride 2, dilation 2
    ((2, 3, 5, 6), (3, 1, 3), (1, 2), (0, 1), 1, 3),
    ((2, 4, 5, 5), (6, 1, 1), 1, 0, 1, 1),           # 1x1 on 4 channels: 4 taps
    ((2, 1, 4, 5), (2, 2, 2), 1, 3, 1, 1),           # padding wider than the kernel
    ((1, 2, 3, 3), (2, 3, 3), 1, 1, 1, 2),
]
IDS = [f"x{c[0]}-w{c[1]}-s{c[2]}-p{c[3]}-d{c[4]}-g{c[5]}" for c in DIRECT_CASES]


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _case(case, dtype, rng):
    xs, (o, kh, kw), s, p, d, g = case
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal((o, xs[1] // g, kh, kw)).astype(dtype)
    return x, w, (s, p, d, g), (_pair(s), _pair(p), _pair(d), g)


def _close(actual, expected, dtype):
    tol = TOL[dtype]
    np.testing.assert_allclose(actual, expected, rtol=tol["rtol"] * 10, atol=tol["atol"] * 100)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", DIRECT_CASES, ids=IDS)
def test_direct_matches_float64_reference(case, dtype):
    rng = np.random.default_rng(11)
    x, w, args, ref_args = _case(case, dtype, rng)
    before = dict(kc.path_counts)
    y = kc.conv2d_forward(x, w, *args)
    assert y.dtype == dtype
    y_ref = ref_conv(x, w, *ref_args)
    assert y.shape == y_ref.shape
    _close(y, y_ref, dtype)
    dy = rng.standard_normal(y.shape).astype(dtype)
    dx_ref, dw_ref = ref_conv_grads(x, w, dy, *ref_args)
    _close(kc.conv2d_backward_input(dy, w, x.shape, *args), dx_ref, dtype)
    _close(kc.conv2d_backward_weight(dy, x, w.shape, *args), dw_ref, dtype)
    for direction in ("forward", "input grad", "weight grad"):
        assert kc.path_counts[f"direct {direction}"] == before.get(f"direct {direction}", 0) + 1, direction


def test_many_taps_take_im2col():
    rng = np.random.default_rng(2)
    x, w, args, ref_args = _case(((2, 2, 6, 6), (3, 3, 3), 1, 1, 1, 1), np.float64, rng)   # 18 taps
    before = kc.path_counts["im2col forward"]
    np.testing.assert_allclose(kc.conv2d_forward(x, w, *args), ref_conv(x, w, *ref_args), rtol=1e-12, atol=1e-12)
    assert kc.path_counts["im2col forward"] == before + 1


def test_non_finite_values_stay_where_they_belong():
    """Valid padding: the flat loops' scratch columns read real input columns. An inf there must not
    leak into the taps that never see it (0 * inf would be NaN); likewise an inf weight."""
    rng = np.random.default_rng(5)
    x, w, args, ref_args = _case(((2, 1, 6, 7), (3, 3, 3), 1, 0, 1, 1), np.float64, rng)
    x[1, 0, 2, 6] = np.inf                     # last column: only the taps j == 2 read it
    y = kc.conv2d_forward(x, w, *args)
    dy = rng.standard_normal(y.shape)
    dx_ref, dw_ref = ref_conv_grads(x, w, dy, *ref_args)
    dw = kc.conv2d_backward_weight(dy, x, w.shape, *args)
    assert np.isfinite(dw[:, :, :, :2]).all() and not np.isfinite(dw[:, :, :, 2]).all()
    np.testing.assert_allclose(dw, dw_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(y, ref_conv(x, w, *ref_args), rtol=1e-12, atol=1e-12)

    w2 = w.copy()
    w2[1, 0, 0, 0] = np.inf
    x2 = x.copy()
    x2[1, 0, 2, 6] = 0.0
    dx = kc.conv2d_backward_input(dy, w2, x2.shape, *args)
    dx_ref, _ = ref_conv_grads(x2, w2, dy, *ref_args)
    assert np.isfinite(dx[:, :, -1, :]).all() and not np.isfinite(dx).all()   # tap (0, 0) never reaches the last row
    np.testing.assert_allclose(dx, dx_ref, rtol=1e-12, atol=1e-12)


@pytest.fixture
def restore_threads():
    before = _threads.get_num_threads()
    yield
    _threads.set_num_threads(before)


def test_direct_results_do_not_depend_on_the_thread_count(restore_threads):
    rng = np.random.default_rng(8)
    x, w, args, _ = _case(((13, 1, 9, 10), (6, 3, 3), 1, 1, 1, 1), np.float32, rng)
    dy = rng.standard_normal((13, 6, 9, 10)).astype(np.float32)
    runs = []
    for t in (1, _threads.max_threads()):
        _threads.set_num_threads(t)
        runs.append([kc.conv2d_forward(x, w, *args), kc.conv2d_backward_input(dy, w, x.shape, *args),
                     kc.conv2d_backward_weight(dy, x, w.shape, *args)])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


def test_direct_path_gradients_by_finite_differences(x64):
    """lax.conv2d through the direct kernels (the path counters say so), against finite differences to order 2."""
    rng = np.random.default_rng(4)
    x = fnp.array(rng.standard_normal((2, 2, 5, 6)))
    w = fnp.array(rng.standard_normal((4, 1, 3, 3)))
    before = kc.path_counts["direct forward"]
    check_grads(lambda a, b: lax.conv2d(a, b, stride=(1, 2), padding=1, groups=2), (x, w), order=2)
    assert kc.path_counts["direct forward"] > before
