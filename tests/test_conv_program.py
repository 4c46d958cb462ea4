"""Convolution and pooling inside compiled programs: they write into the program's planned buffers, the max-pool
indices come in the stored integer dtype, and the results match float64 references and eager mode."""
from __future__ import annotations

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax, nn
from funcgrad.backends.cpu import kernels_conv as kc
from funcgrad.primitives import conv as C

from conftest import config_set
from test_cpu_kernels import ref_conv, ref_conv_grads, ref_pool

CONV_PRIMS = (C.conv2d_p, C.conv2d_input_grad_p, C.conv2d_weight_grad_p, C.max_pool2d_p, C.max_pool2d_grad_p,
              C.avg_pool2d_p, C.avg_pool2d_grad_p)


def _block(x, w1, w2):
    """conv (direct path: one channel) -> ReLU -> max-pool -> conv (im2col) -> ReLU -> avg-pool -> sum."""
    h = lax.max_pool2d(nn.relu(lax.conv2d(x, w1, padding=1)), 2)
    return fnp.sum(lax.avg_pool2d(nn.relu(lax.conv2d(h, w2, padding=1)), 2) ** 2)


def _reference(x, w1, w2):
    """The loss and its gradients in float64 numpy, through the tap-by-tap references."""
    z1 = ref_conv(x, w1, (1, 1), (1, 1), (1, 1), 1)
    a1 = np.maximum(z1, 0)
    h, idx = ref_pool(a1, (2, 2), (2, 2), (0, 0), "max")
    z2 = ref_conv(h, w2, (1, 1), (1, 1), (1, 1), 1)
    a2 = np.maximum(z2, 0)
    p, _ = ref_pool(a2, (2, 2), (2, 2), (0, 0), "avg")
    loss = (p ** 2).sum()
    dp = 2 * p
    da2 = np.repeat(np.repeat(dp, 2, axis=2), 2, axis=3) / 4
    da2 = np.pad(da2, ((0, 0), (0, 0), (0, a2.shape[2] - da2.shape[2]), (0, a2.shape[3] - da2.shape[3])))
    dz2 = da2 * (z2 > 0)
    dh, dw2 = ref_conv_grads(h, w2, dz2, (1, 1), (1, 1), (1, 1), 1)
    da1 = np.zeros(a1.shape).reshape(a1.shape[0], a1.shape[1], -1)
    n, c = np.indices(idx.shape[:2])
    for (pi, qi) in np.ndindex(*idx.shape[2:]):
        np.add.at(da1, (n, c, idx[:, :, pi, qi]), dh[:, :, pi, qi])
    dz1 = da1.reshape(a1.shape) * (z1 > 0)
    _, dw1 = ref_conv_grads(x, w1, dz1, (1, 1), (1, 1), (1, 1), 1)
    return loss, dw1, dw2


@pytest.fixture
def operands():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 1, 9, 10)).astype(np.float32)
    w1 = (rng.standard_normal((4, 1, 3, 3)) * 0.5).astype(np.float32)
    w2 = (rng.standard_normal((5, 4, 3, 3)) * 0.3).astype(np.float32)
    return x, w1, w2


def test_jitted_conv_and_pool_write_into_planned_buffers(operands):
    x, w1, w2 = operands
    step = fg.jit(fg.value_and_grad(_block, argnums=(1, 2)))
    program = step.lower(x, w1, w2)
    planned = {s[0] for s in program.steps if s[4] is not None}
    assert {C.conv2d_p, C.conv2d_weight_grad_p, C.conv2d_input_grad_p, C.max_pool2d_p, C.max_pool2d_grad_p,
            C.avg_pool2d_p, C.avg_pool2d_grad_p} <= planned

    loss, (dw1, dw2) = step(x, w1, w2)
    ref_loss, ref_dw1, ref_dw2 = _reference(x, w1, w2)
    np.testing.assert_allclose(float(loss), ref_loss, rtol=1e-4)
    np.testing.assert_allclose(np.asarray(dw1), ref_dw1, rtol=1e-4, atol=1e-4 * np.abs(ref_dw1).max())
    np.testing.assert_allclose(np.asarray(dw2), ref_dw2, rtol=1e-4, atol=1e-4 * np.abs(ref_dw2).max())

    kept = [np.array(dw1), np.array(dw2)]
    loss2, (dw1b, dw2b) = step(x * 2, w1, w2)   # the planned buffers again, other values
    np.testing.assert_array_equal(np.asarray(dw1), kept[0])   # results handed out stay as they were
    np.testing.assert_array_equal(np.asarray(dw2), kept[1])
    eager_loss, (e1, e2) = fg.value_and_grad(_block, argnums=(1, 2))(x * 2, w1, w2)
    np.testing.assert_allclose(float(loss2), float(eager_loss), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(dw1b), np.asarray(e1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(dw2b), np.asarray(e2), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("prim", CONV_PRIMS, ids=lambda p: p.name)
def test_cpu_impls_take_out(prim):
    assert "writes_out" in prim.traits


def test_impl_writes_into_out_or_copies():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    geo = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    ref = ref_conv(x, w, (1, 1), (1, 1), (1, 1), 1)
    out = np.full((2, 4, 6, 6), np.nan, np.float32)
    assert C.conv2d_p.impl(x, w, **geo, out=out) is out
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    strided = np.full((2, 4, 6, 12), np.nan, np.float32)[..., ::2]   # not C order: computed, then copied in
    assert C.conv2d_p.impl(x, w, **geo, out=strided) is strided
    np.testing.assert_allclose(strided, ref, rtol=1e-5, atol=1e-5)
    half = np.empty((2, 4, 6, 6), np.float16)    # the numpy reference (float16), copied in
    C.conv2d_p.impl(x.astype(np.float16), w.astype(np.float16), **geo, out=half)
    np.testing.assert_allclose(half, ref, rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize("x64_on", [False, True])
def test_max_pool_indices_in_the_stored_dtype(x64_on):
    x = np.random.default_rng(3).standard_normal((2, 3, 6, 7)).astype(np.float32)
    with config_set("enable_x64", x64_on):
        y, idx = C.max_pool2d_p.impl(x, kernel=(2, 2), stride=(2, 2), padding=(0, 0))
        assert idx.dtype == (np.int64 if x64_on else np.int32)
        y_ref, idx_ref = ref_pool(x, (2, 2), (2, 2), (0, 0), "max")
        np.testing.assert_array_equal(y, y_ref.astype(np.float32))
        np.testing.assert_array_equal(idx, idx_ref)
        dy = np.ones_like(y)
        dx = C.max_pool2d_grad_p.impl(dy, idx, in_hw=(6, 7))
        np.testing.assert_array_equal(dx, C.max_pool2d_grad_p.impls["reference"](dy, idx_ref, in_hw=(6, 7)))


@pytest.mark.parametrize("case", [((2, 3, 8, 8), 2, 2, 0), ((1, 2, 7, 9), 2, 2, 0), ((2, 2, 6, 6), 2, 1, 0),
                                  ((1, 2, 6, 6), 3, 2, 1)])
def test_max_pool_2x2_kernel_and_general_kernel(case):
    """The 2x2/stride-2 kernel (odd sizes drop the last row/column) and the general one, NaN and ties included."""
    xs, k, s, p = case
    rng = np.random.default_rng(4)
    x = rng.integers(-3, 3, xs).astype(np.float64)   # many ties
    x.flat[::7] = np.nan
    x.flat[3::11] = -np.inf
    y, idx = kc.max_pool2d_forward(x, k, s, p)
    y_ref, idx_ref = ref_pool(x, (k, k), (s, s), (p, p), "max")
    np.testing.assert_array_equal(idx, idx_ref)
    np.testing.assert_array_equal(y, y_ref)


def test_max_pool_backward_checks_indices_of_either_dtype():
    for dt in (np.int32, np.int64):
        with pytest.raises(ValueError, match="indices out of range"):
            kc.max_pool2d_backward(np.ones((1, 1, 2, 2)), np.array([[[[0, 1], [-1, 2]]]], dt), (1, 1, 4, 4))


def test_weight_gradients_written_into_donated_weights(operands):
    """The weights are dead once the forward pass used them: with donate_argnums the weight gradients (outputs of
    conv2d_weight_grad) may take their buffers; the results are those of the plain program."""
    x, w1, w2 = operands

    def grads(w1, w2, x):
        return fg.grad(_block, argnums=(1, 2))(x, w1, w2)

    expected = [np.asarray(g) for g in fg.jit(grads)(w1, w2, x)]
    donating = fg.jit(grads, donate_argnums=(0, 1))
    program = donating.lower(fnp.asarray(w1), fnp.asarray(w2), x)
    assert any("donated argument" in line for line in program.donation_plan)
    a1, a2 = fnp.asarray(w1) + 0.0, fnp.asarray(w2) + 0.0    # Arrays owning their buffers
    addresses = {a._value.__array_interface__["data"][0] for a in (a1, a2)}
    got = donating(a1, a2, x)
    assert addresses & {g._value.__array_interface__["data"][0] for g in got}   # a gradient took a weight's buffer
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(np.asarray(g), e)
