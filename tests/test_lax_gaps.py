"""funcgrad.lax's JAX-form gather/scatter, conv helpers, implicit solves and small ops
(funcgrad/lax/_gather_scatter.py, _conv_helpers.py, _implicit.py, _small_ops.py), and the top-level device/process/config names (funcgrad/_toplevel.py): against numpy float64 references,
finite differences, and JAX's documented semantics."""
from __future__ import annotations

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.lax as lax
import funcgrad.numpy as fnp
from funcgrad.testing import check_grads


@pytest.fixture(autouse=True)
def _x64():
    with fg.enable_x64():      # float64 references
        yield


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def _close(out, expected, tol=1e-12):
    np.testing.assert_allclose(np.asarray(out, dtype=np.float64), np.asarray(expected, np.float64), rtol=tol,
                               atol=tol)


ROWS = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
POINTS = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0, 1), start_index_map=(0, 1))
COLS = lax.GatherDimensionNumbers(offset_dims=(0,), collapsed_slice_dims=(1,), start_index_map=(1,))


# ------------------------------------------------------------------ gather


def test_gather_forms(rng):
    x = rng.normal(size=(3, 4))
    idx = np.array([[2], [0], [5], [-1]])
    _close(lax.gather(x, idx, ROWS, (1, 4)), x[np.clip(idx[:, 0], 0, 2)])          # None clamps, as JAX
    pts = np.array([[0, 1], [2, 3], [1, 0]])
    _close(lax.gather(x, pts, POINTS, (1, 1)), x[pts[:, 0], pts[:, 1]])
    cols = np.array([[3], [1]])
    _close(lax.gather(x, cols, COLS, (3, 1)), x[:, [3, 1]])
    # A window narrower than its dimension reads from 0; an indexed dimension kept (not collapsed) has size 1.
    kept = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0,))
    _close(lax.gather(x, np.array([[1], [2]]), kept, (1, 2)), x[[1, 2], None, :2])
    # 3-d, index vector naming dims (2, 0) in that order, window of 3 along dim 1.
    y = rng.normal(size=(3, 4, 5))
    idx3 = np.array([[4, 0], [1, 2], [0, 1]])
    dn3 = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0, 2), start_index_map=(2, 0))
    _close(lax.gather(y, idx3, dn3, (1, 3, 1)), y[idx3[:, 1], :3, idx3[:, 0]])


def test_gather_fill_mode_and_negative_indices(rng):
    x = rng.normal(size=(3, 4))
    out = np.asarray(lax.gather(x, np.array([[1], [3], [-1]]), ROWS, (1, 4), mode="fill"))
    _close(out[0], x[1])
    assert np.isnan(out[1:]).all()       # out of bounds, and a negative index is out of bounds (no wrapping)
    out = np.asarray(lax.gather(x, np.array([[1], [3]]), ROWS, (1, 4), mode="fill", fill_value=-7.0))
    _close(out[1], np.full(4, -7.0))


def test_gather_transforms(rng):
    x = rng.normal(size=(3, 4))
    idx = fnp.asarray(np.array([[2], [0], [2]]))
    check_grads(lambda a: lax.gather(a, idx, ROWS, (1, 4)), (fnp.asarray(x),), order=2)
    _close(fg.jit(lambda a, i: lax.gather(a, i, ROWS, (1, 4)))(x, idx), x[[2, 0, 2]])
    batch = rng.normal(size=(2, 3, 4))
    _close(fg.vmap(lambda a: lax.gather(a, idx, ROWS, (1, 4)))(batch), batch[:, [2, 0, 2]])


def test_gather_windows(rng):
    # Windows wider than 1 on indexed dimensions: JAX clamps each start so the window fits ("clip", the
    # default), or fills windows not wholly in bounds ("fill").
    x = rng.normal(size=(4, 5, 6))
    idx = np.array([[0, 0], [3, 2], [-1, 4], [2, -3], [5, 1]])
    dn = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(0,), start_index_map=(0, 1))
    clipped = np.stack([x[min(max(i, 0), 3), min(max(j, 0), 2):min(max(j, 0), 2) + 3, :2] for i, j in idx])
    _close(lax.gather(x, idx, dn, (1, 3, 2)), clipped)
    filled = np.asarray(lax.gather(x, idx, dn, (1, 3, 2), mode="fill"))
    inside = [(0 <= i <= 3 and 0 <= j <= 2) for i, j in idx]
    _close(filled[inside], clipped[inside])
    assert np.isnan(filled[np.logical_not(inside)]).all()
    check_grads(lambda a: lax.gather(a, idx, dn, (1, 3, 2)), (fnp.asarray(x),), order=2)
    _close(fg.vmap(lambda i: lax.gather(x, i, dn, (1, 3, 2)))(idx[:, None]), clipped[:, None])


def test_gather_unsupported():
    x = np.zeros((3, 4))
    with pytest.raises(ValueError, match="collapsed_slice_dims"):
        lax.gather(x, np.array([[0]]), lax.GatherDimensionNumbers((1,), (0,), (0,)), (2, 4))
    with pytest.raises(NotImplementedError, match="batching"):
        lax.gather(x, np.array([[0]]), lax.GatherDimensionNumbers((1,), (0,), (0,), (1,), (0,)), (1, 4))
    with pytest.raises(ValueError, match="last axis of length 2"):
        lax.gather(x, np.array([[0]]), POINTS, (1, 1))
    with pytest.raises(ValueError, match="slice_sizes"):
        lax.gather(x, np.array([[0]]), ROWS, (1, 5))


# ------------------------------------------------------------------ scatter


SROWS = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                    scatter_dims_to_operand_dims=(0,))
SCOLS = lax.ScatterDimensionNumbers(update_window_dims=(0,), inserted_window_dims=(1,),
                                    scatter_dims_to_operand_dims=(1,))
SPOINTS = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0, 1),
                                      scatter_dims_to_operand_dims=(0, 1))


@pytest.mark.parametrize("name, ufunc", [("scatter_max", np.maximum), ("scatter_min", np.minimum),
                                         ("scatter_mul", np.multiply), ("scatter_sub", np.subtract)])
def test_scatter_combiners(rng, name, ufunc):
    fn = getattr(lax, name)
    x = rng.normal(size=(3, 4))
    idx = np.array([0, 2, 0, 5, -1])          # duplicates apply in turn; 5 and -1 are out of bounds: dropped
    u = rng.normal(size=(5, 4))
    want = x.copy()
    ufunc.at(want, idx[:3], u[:3])
    _close(fn(x, idx[:, None], u, SROWS), want)
    # Along axis 1: the updates' window (axis 0) spans the rows.
    uc = rng.normal(size=(3, 5))
    want = x.copy()
    ufunc.at(want, (slice(None), idx[:3]), uc[:, :3])
    _close(fn(x, idx[:, None], uc, SCOLS), want)
    # Points, and clip mode (indices clamped into range).
    pts = np.array([[0, 1], [4, 9]])
    want = x.copy()
    ufunc.at(want, ([0, 2], [1, 3]), [1.5, -2.0])
    _close(fn(x, pts, np.array([1.5, -2.0]), SPOINTS, mode="clip"), want)


def test_scatter_numpy_index_form(rng):
    # Without dimension_numbers: funcgrad's numpy-index form, as funcgrad.lax.scatter_add.
    x = rng.normal(size=(4,))
    want = x.copy()
    np.maximum.at(want, [1, 1, 3], [5.0, -1.0, 0.5])
    _close(lax.scatter_max(x, np.array([1, 1, 3]), np.array([5.0, -1.0, 0.5])), want)


def test_scatter_apply(rng):
    x = rng.normal(size=(5,))
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    want = x.copy()
    want[1] *= 4.0          # applied once per occurrence
    want[3] *= 2.0
    _close(lax.scatter_apply(x, np.array([[1], [3], [1], [9]]), lambda v: v * 2.0, dn, update_shape=(4,)), want)


def test_scatter_grads(rng):
    x = fnp.asarray(rng.normal(size=(3, 4)))
    u = fnp.asarray(rng.normal(size=(2, 4)) + 3.0)     # larger than x: max picks u, min picks x (no ties)
    idx = fnp.asarray(np.array([[0], [2]]))
    for fn in (lax.scatter_max, lax.scatter_min, lax.scatter_sub):
        check_grads(lambda a, b: fn(a, idx, b, SROWS), (x, u), order=2)
    check_grads(lambda a, b: lax.scatter_mul(a, idx, b, SROWS, unique_indices=True), (x, u), order=2)
    dup = fnp.asarray(np.array([[0], [0]]))
    # Concrete duplicate indices are resolved in rounds (differentiable in both); traced ones need
    # unique indices for the updates' derivative, as JAX.
    check_grads(lambda a, b: lax.scatter_mul(a, dup, b, SROWS), (x, u), order=1)
    with pytest.raises(NotImplementedError, match="unique"):
        fg.jit(fg.grad(lambda b, i: lax.scatter_mul(x, i, b, SROWS).sum()))(u, dup)


def test_scatter_transforms(rng):
    x = rng.normal(size=(3, 4))
    u = rng.normal(size=(2, 4))
    idx = np.array([[0], [0]])
    want = x.copy()
    np.maximum.at(want, [0, 0], u)
    _close(fg.jit(lambda a, i, b: lax.scatter_max(a, i, b, SROWS))(x, idx, u), want)
    xs = rng.normal(size=(2, 3, 4))
    got = fg.vmap(lambda a: lax.scatter_sub(a, idx, u, SROWS))(xs)
    for k in range(2):
        w = xs[k].copy()
        np.subtract.at(w, [0, 0], u)
        _close(got[k], w)


@pytest.mark.parametrize("mode", [None, "clip"])
def test_scatter_windows(rng, mode):
    # Windows wider than 1 on an indexed dimension: a window that does not fit is dropped (default) or its
    # start clamped ("clip"), as JAX.
    x = rng.normal(size=(4, 5))
    idx = np.array([[0, 1], [3, 3], [-1, 0], [1, 1]])
    u = rng.normal(size=(4, 2, 3))
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1, 2), inserted_window_dims=(),
                                     scatter_dims_to_operand_dims=(0, 1))
    for fn, ufunc in ((lax.scatter_add, np.add), (lax.scatter_max, np.maximum)):
        want = x.copy()
        for (i, j), w in zip(idx, u):
            if mode == "clip":
                i, j = min(max(i, 0), 2), min(max(j, 0), 2)
            elif not (0 <= i <= 2 and 0 <= j <= 2):
                continue
            ufunc.at(want, (slice(i, i + 2), slice(j, j + 3)), w)
        _close(fn(x, idx, u, dn, mode=mode), want)


def test_scatter_errors():
    x = np.zeros((3, 4))
    with pytest.raises(ValueError, match="batch shape"):
        lax.scatter_max(x, np.array([[0], [1]]), np.zeros((3, 4)), SROWS)
    with pytest.raises(ValueError, match="exceed"):
        lax.scatter_max(x, np.array([[0]]), np.zeros((1, 4, 4)), lax.ScatterDimensionNumbers((1, 2), (), (0,)))
    with pytest.raises(TypeError, match="integers"):
        lax.scatter_min(x, np.array([[0.5]]), np.zeros((1, 4)), SROWS)


# ------------------------------------------------------------------ small ops


def test_index_take_batch_matmul(rng):
    x = rng.normal(size=(3, 4, 2))
    i0, i1 = np.array([0, 2, 1]), np.array([1, 3, 3])
    _close(lax.index_take(x, (i0, i1), (0, 1)), x[i0, i1])
    _close(lax.index_take(x, (i1,), (1,)), np.moveaxis(x, 1, 0)[i1])
    _close(lax.index_take(x, (np.array([-1, 5, 3]),), (0,)), x[[2, 2, 0]])      # modulo the axis, as JAX
    a, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 4, 2))
    _close(lax.batch_matmul(a, b), a @ b)
    check_grads(lax.batch_matmul, (fnp.asarray(a), fnp.asarray(b)), order=2)
    with pytest.raises(ValueError, match="batch_matmul"):
        lax.batch_matmul(a, rng.normal(size=(3, 4, 2)))


def test_shape_ops(rng):
    x = rng.normal(size=(2, 3))
    _close(lax.tile(x, (2, 1)), np.tile(x, (2, 1)))
    _close(lax.tile(x, (1, 3)), np.tile(x, (1, 3)))
    check_grads(lambda a: lax.tile(a, (2, 2)), (fnp.asarray(x),), order=2)
    _close(lax.stack([x, 2 * x], 1), np.stack([x, 2 * x], 1))
    parts = lax.unstack(x, 1)
    assert isinstance(parts, tuple) and len(parts) == 3
    _close(parts[2], x[:, 2])
    _close(lax.broadcast_like(np.arange(3.0), x), np.broadcast_to(np.arange(3.0), (2, 3)))
    e = lax.empty((2, 3), np.float32)
    assert e.shape == (2, 3) and e.dtype == np.float32
    tree = (x, {"a": 1.0})
    assert lax.optimization_barrier(tree) is tree
    check_grads(lambda a: lax.optimization_barrier(a) ** 2, (fnp.asarray(x),), order=2)
    with pytest.raises(ValueError, match="reps"):
        lax.tile(x, (2,))


def test_approx_k(rng):
    x = rng.normal(size=(3, 5))
    vals, idx = lax.approx_max_k(x, 2)
    order = np.argsort(-x, axis=-1)[:, :2]
    _close(vals, np.take_along_axis(x, order, -1))
    np.testing.assert_array_equal(np.asarray(idx), order)
    vals, idx = lax.approx_min_k(x, 2, reduction_dimension=0)
    order = np.argsort(x, axis=0)[:2]
    _close(vals, np.take_along_axis(x, order, 0))
    np.testing.assert_array_equal(np.asarray(idx), order)
    check_grads(lambda a: lax.approx_max_k(a, 2)[0], (fnp.asarray(x),), order=2)


def test_clz_mulhi(rng):
    xs = np.array([0, 1, 2, 255, 2**31 - 1, -1, -(2**31)], np.int32)
    want = [32 - int(v).bit_length() if v >= 0 else 0 for v in xs]
    np.testing.assert_array_equal(np.asarray(lax.clz(xs)), want)
    np.testing.assert_array_equal(np.asarray(lax.clz(np.array([0, 1, 200], np.uint8))), [8, 7, 0])
    a = rng.integers(0, 2**32, size=50, dtype=np.uint64)
    b = rng.integers(0, 2**32, size=50, dtype=np.uint64)
    want = ((a * b) >> np.uint64(32)).astype(np.uint32)    # exact: the product fits 64 bits
    np.testing.assert_array_equal(np.asarray(lax.mulhi(a.astype(np.uint32), b.astype(np.uint32))), want)
    sa = rng.integers(-2**31, 2**31, size=50).astype(np.int32)
    sb = rng.integers(-2**31, 2**31, size=50).astype(np.int32)
    want = np.array([(int(p) * int(q)) >> 32 for p, q in zip(sa, sb)], np.int64).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(lax.mulhi(sa, sb)), want)
    s16 = np.array([-300, 30000, 7], np.int16)
    t16 = np.array([1000, 30000, -2], np.int16)
    want = np.array([(int(p) * int(q)) >> 16 for p, q in zip(s16, t16)]).astype(np.int16)
    np.testing.assert_array_equal(np.asarray(lax.mulhi(s16, t16)), want)
    with pytest.raises(TypeError, match="integer"):
        lax.clz(np.ones(2))


def test_reduce_precision(rng):
    x = np.concatenate([rng.normal(size=20) * 10.0 ** rng.integers(-4, 5, size=20),
                        [65504.0, 65519.0, 65520.0, 1e5, -1e5, np.inf, -np.inf, 0.0]]).astype(np.float32)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    tiny = np.abs(want) < np.finfo(np.float16).tiny          # XLA flushes float16's subnormals to zero
    want[tiny] = 0.0 * want[tiny]
    got = np.asarray(lax.reduce_precision(x, exponent_bits=5, mantissa_bits=10))
    np.testing.assert_array_equal(got, want)
    assert np.isnan(np.asarray(lax.reduce_precision(np.float32(np.nan), 5, 10)))
    x64 = rng.normal(size=10)
    np.testing.assert_array_equal(np.asarray(lax.reduce_precision(x64, 8, 23)), x64.astype(np.float32))
    _close(fg.grad(lambda a: lax.reduce_precision(a, 5, 10).sum())(fnp.asarray(x64)), np.ones(10))


def test_rng_points_to_random():
    with pytest.raises(NotImplementedError, match="funcgrad.random.uniform"):
        lax.rng_uniform(0.0, 1.0, (2,))
    with pytest.raises(NotImplementedError, match="funcgrad.random.bits"):
        lax.rng_bit_generator(np.zeros(4, np.uint32), (2,))


# ------------------------------------------------------------------ convolution helpers


def _ref_conv_transpose(x, w, s, transpose_kernel=False):
    # 1-d, NHC / HIO, VALID: each input position spreads the (flipped) kernel over the output.
    b, n, _ = x.shape
    k = w.shape[0]
    wk = np.swapaxes(w[::-1], 1, 2) if transpose_kernel else w
    out = np.zeros((b, n * s + max(k - s, 0), wk.shape[2]))
    for i in range(n):
        for m in range(k):
            out[:, i * s + m, :] += x[:, i, :] @ wk[k - 1 - m]
    return out


@pytest.mark.parametrize("s, k", [(2, 3), (3, 2)])
def test_conv_transpose(rng, s, k):
    x = rng.normal(size=(2, 3, 2))
    w = rng.normal(size=(k, 2, 3))
    _close(lax.conv_transpose(x, w, (s,), "VALID"), _ref_conv_transpose(x, w, s), 1e-10)
    w2 = rng.normal(size=(k, 3, 2))
    _close(lax.conv_transpose(x, w2, (s,), "VALID", transpose_kernel=True),
           _ref_conv_transpose(x, w2, s, True), 1e-10)
    assert lax.conv_transpose(x, w, (s,), "SAME").shape == lax.conv_transpose_shape_tuple(
        x.shape, w.shape, (s,), "SAME", ("NHC", "HIO", "NHC")) == (2, 3 * s, 3)
    check_grads(lambda a, b: lax.conv_transpose(a, b, (s,), "SAME"), (fnp.asarray(x), fnp.asarray(w)), order=2)


def test_conv_transpose_is_conv_gradient(rng):
    # transpose_kernel=True: the transpose of a strided convolution (its input gradient).
    x = rng.normal(size=(1, 2, 7, 7))
    w = rng.normal(size=(3, 2, 3, 3))            # OIHW
    conv = lambda a: lax.conv_general_dilated(a, fnp.asarray(w), (2, 2), "VALID")  # noqa: E731
    y, pullback = fg.vjp(conv, fnp.asarray(x))
    ct = rng.normal(size=y.shape)
    got = lax.conv_transpose(ct, w, (2, 2), "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW"),
                             transpose_kernel=True)
    _close(got, pullback(fnp.asarray(ct))[0], 1e-10)


def test_conv_shape_helpers():
    assert lax.padtype_to_pads((5, 6), (3, 3), (2, 1), "SAME") == [(1, 1), (1, 1)]
    assert lax.padtype_to_pads((6,), (4,), (1,), "SAME_LOWER") == [(2, 1)]
    assert lax.padtype_to_pads((6,), (4,), (1,), "VALID") == [(0, 0)]
    with pytest.raises(RuntimeError, match="padding"):
        lax.padtype_to_pads((6,), (4,), (1,), "FULL")
    assert lax.conv_shape_tuple((2, 3, 7, 7), (4, 3, 3, 3), (2, 2), "SAME") == (2, 4, 4, 4)
    assert lax.conv_shape_tuple((2, 3, 7, 7), (4, 3, 3, 3), (1, 1), [(0, 0), (1, 1)]) == (2, 4, 5, 7)
    assert lax.conv_general_shape_tuple((2, 7, 7, 3), (3, 3, 3, 4), (1, 1), "VALID",
                                        ("NHWC", "HWIO", "NHWC")) == (2, 5, 5, 4)
    dn = lax.conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 8), ("NHWC", "HWIO", "NHWC"))
    assert dn == lax.ConvDimensionNumbers((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    assert lax.conv_dimension_numbers((1, 2, 3), (1, 2, 3), None) == ((0, 1, 2),) * 3
    assert lax.reduce_window_shape_tuple((4, 6), (2, 3), (2, 1), [(0, 0), (1, 1)]) == (2, 6)
    assert lax.reduce_window_shape_tuple((4,), (2,), (1,), [(0, 0)], base_dilation=(2,)) == (6,)
    x = np.random.default_rng(1).normal(size=(1, 2, 5, 5))
    w = np.random.default_rng(2).normal(size=(3, 2, 3, 3))
    _close(lax.conv_with_general_padding(x, w, (1, 1), [(1, 1), (0, 0)], None, None),
           lax.conv_general_dilated(x, w, (1, 1), [(1, 1), (0, 0)]))


# ------------------------------------------------------------------ top level


def test_devices_and_processes():
    assert fg.default_backend() == fg.default_device()
    assert fg.device_count() == fg.local_device_count() == 1
    assert fg.local_devices() == [fg.default_backend()]
    assert (fg.process_count(), fg.process_index(), fg.process_indices()) == (1, 0, [0])
    assert (fg.host_count(), fg.host_id(), fg.host_ids()) == (1, 0, [0])
    assert "funcgrad" in fg.print_environment_info(return_string=True)
    with pytest.raises(ValueError, match="one process"):
        fg.local_devices(process_index=1)


def test_option_context_managers():
    with fg.numpy_rank_promotion("allow"), fg.numpy_dtype_promotion("standard"), fg.debug_infs(False):
        pass
    with fg.check_tracer_leaks(), fg.checking_leaks(), fg.log_compiles(), fg.default_matmul_precision("highest"):
        pass
    with fg.transfer_guard("allow"), fg.transfer_guard_host_to_device("allow"):
        pass
    with pytest.raises(NotImplementedError):
        with fg.numpy_rank_promotion("raise"):
            pass
    with pytest.raises(NotImplementedError):
        with fg.debug_infs():
            pass
    with pytest.raises(NotImplementedError, match="transfer"):
        with fg.transfer_guard("disallow"):
            pass
    with pytest.raises(TypeError, match="requires an argument"):
        fg.numpy_dtype_promotion()


def test_fwd_and_bwd(rng):
    x, w = rng.normal(size=(2, 3)), rng.normal(size=(3, 2))
    f = lambda a, b: fnp.sin(a @ b)  # noqa: E731
    fwd, bwd = fg.fwd_and_bwd(f, argnums=(0, 1))
    y, res = fwd(x, w)
    _close(y, np.sin(x @ w))
    ct = rng.normal(size=(2, 2))
    cx, cw = bwd(res, ct)
    g = ct * np.cos(x @ w)
    _close(cx, g @ w.T, 1e-10)
    _close(cw, x.T @ g, 1e-10)
    fwd, bwd = fg.fwd_and_bwd(lambda a, b: (f(a, b), 7), argnums=1, has_aux=True, jitted=False)
    y, res, aux = fwd(x, w)
    assert aux == 7
    _close(bwd(res, ct), x.T @ g, 1e-10)


def test_make_array_from_callback():
    data = np.arange(6.0).reshape(2, 3)
    seen = []
    out = fg.make_array_from_callback((2, 3), None, lambda idx: seen.append(idx) or data[idx])
    _close(out, data)
    assert seen == [(slice(None), slice(None))]
    with pytest.raises(ValueError, match="shape"):
        fg.make_array_from_callback((3, 2), None, lambda idx: data)


# ------------------------------------------------------------------ implicit differentiation


def _cg(mv, b):
    # Conjugate gradients for a 3x3 SPD system in a fori_loop (exact after 3 steps): the implicit rules
    # never differentiate it.
    def body(i, state):
        x, r, p = state
        ap = mv(p)
        alpha = (r @ r) / (p @ ap)
        x, rn = x + alpha * p, r - alpha * ap
        return x, rn, rn + (rn @ rn) / (r @ r) * p
    return lax.fori_loop(0, 3, body, (fnp.zeros_like(b), b, b))[0]


def _spd(rng):
    m = rng.normal(size=(3, 3))
    return m @ m.T + 3 * np.eye(3)


def test_custom_linear_solve(rng):
    a0, b0 = _spd(rng), rng.normal(size=3)
    sym = lambda s: 0.5 * (s + s.T)  # noqa: E731   (CG needs a symmetric matrix under the checks' perturbations)

    def solve_sym(s, b):
        a = sym(s)
        return lax.custom_linear_solve(lambda v: a @ v, b, _cg, symmetric=True)
    _close(solve_sym(a0, b0), np.linalg.solve(a0, b0), 1e-10)
    check_grads(solve_sym, (fnp.asarray(a0), fnp.asarray(b0)), order=2, modes=("rev",))

    def solve_general(a, b):
        return lax.custom_linear_solve(lambda v: a @ v, b, lambda mv, r: fnp.linalg.solve(a, r),
                                       lambda mv, r: fnp.linalg.solve(a.T, r))
    a1 = a0 + rng.normal(size=(3, 3))
    _close(solve_general(a1, b0), np.linalg.solve(a1, b0), 1e-10)
    check_grads(solve_general, (fnp.asarray(a1), fnp.asarray(b0)), order=2, modes=("rev",))
    # jit and vmap of the gradient
    loss = lambda s, b: fnp.sum(fnp.sin(solve_sym(s, b)))  # noqa: E731
    want = fg.grad(lambda s, b: fnp.sum(fnp.sin(fnp.linalg.solve(sym(s), b))))(a0, b0)
    _close(fg.jit(fg.grad(loss))(a0, b0), want, 1e-10)
    bs = rng.normal(size=(2, 3))
    got = fg.vmap(fg.grad(loss, 1), (None, 0))(a0, bs)
    for k in range(2):
        _close(got[k], np.linalg.solve(a0, np.cos(np.linalg.solve(a0, bs[k]))), 1e-10)


def test_custom_linear_solve_pytree_aux_and_errors(rng):
    d = rng.uniform(1, 2, size=3)
    b = {"u": rng.normal(size=3), "w": rng.normal(size=2)}
    mv = lambda v: {"u": d * v["u"], "w": 2.0 * v["w"]}  # noqa: E731
    solve = lambda m, r: ({"u": r["u"] / d, "w": r["w"] / 2.0}, 7.0)  # noqa: E731
    x, aux = lax.custom_linear_solve(mv, b, solve, symmetric=True, has_aux=True)
    _close(x["u"], b["u"] / d)
    _close(x["w"], b["w"] / 2.0)
    _close(aux, 7.0)
    with pytest.raises(TypeError, match="transpose_solve"):
        fg.grad(lambda b: fnp.sum(lax.custom_linear_solve(lambda v: 2.0 * v, b, lambda m, r: r / 2.0)))(
            fnp.ones(2))
    with pytest.raises(TypeError, match="structure"):
        lax.custom_linear_solve(lambda v: v, fnp.ones(2), lambda m, r: (r, r), symmetric=True)


def test_custom_root(rng):
    p0, c0 = rng.normal(size=3), 1.5

    def newton(f, x0):       # the solver: never differentiated
        return lax.fori_loop(0, 40, lambda i, x: x - f(x) / (1 - fnp.tanh(x) ** 2 + c0), x0)

    def tangent_solve(g, y):
        return fnp.linalg.solve(fg.jacobian(g)(y), y)

    def root(p):
        return lax.custom_root(lambda x: fnp.tanh(x) + c0 * x - p, fnp.zeros_like(p), newton, tangent_solve)
    x = np.asarray(root(p0))
    _close(np.tanh(x) + c0 * x, p0, 1e-10)
    s = 1 - np.tanh(x) ** 2
    _close(fg.jacrev(root)(p0), np.diag(1 / (s + c0)), 1e-10)        # implicit function theorem
    check_grads(root, (fnp.asarray(p0),), order=2, modes=("rev",))
    _close(fg.jit(fg.grad(lambda p: fnp.sum(root(p))))(p0), 1 / (s + c0), 1e-10)

    def sqrt_(a):
        return lax.custom_root(lambda x: x ** 2 - a, 1.0, lambda f, x0: lax.fori_loop(
            0, 30, lambda i, x: 0.5 * (x + a / x), x0), lambda g, y: y / g(1.0))
    _close(sqrt_(2.0), np.sqrt(2.0))
    _close(fg.grad(sqrt_)(2.0), 0.5 / np.sqrt(2.0))
    _close(fg.grad(fg.grad(sqrt_))(2.0), -0.25 * 2.0 ** -1.5)
    with pytest.raises(TypeError, match="forward-mode"):
        fg.jvp(sqrt_, (2.0,), (1.0,))


# ------------------------------------------------------------------ more of lax, more top-level options


def test_ragged_dot(rng):
    lhs, rhs = rng.normal(size=(5, 3)), rng.normal(size=(3, 3, 2))
    sizes = np.array([2, 0, 2])              # an empty group; the last row is in no group: zeros
    want = np.zeros((5, 2))
    want[:2] = lhs[:2] @ rhs[0]
    want[2:4] = lhs[2:4] @ rhs[2]
    _close(lax.ragged_dot(lhs, rhs, sizes), want)
    check_grads(lambda a, b: lax.ragged_dot(a, b, sizes), (fnp.asarray(lhs), fnp.asarray(rhs)), order=2)
    _close(fg.jit(lax.ragged_dot)(lhs, rhs, sizes), want)
    with pytest.raises(ValueError, match="group_sizes"):
        lax.ragged_dot(lhs, rhs, np.array([1, 2]))


def test_conv_general_dilated_patches(rng):
    x = rng.normal(size=(1, 2, 4, 5))
    got = np.asarray(lax.conv_general_dilated_patches(x, (2, 3), (1, 2), "VALID"))
    assert got.shape == (1, 12, 3, 2)
    for i in range(3):
        for j in range(2):
            # channel-major: feature c * 6 + (di * 3 + dj)
            _close(got[0, :, i, j], x[0, :, i:i + 2, 2 * j:2 * j + 3].reshape(12))
    nhwc = np.moveaxis(x, 1, -1)
    got2 = lax.conv_general_dilated_patches(nhwc, (2, 3), (1, 2), "VALID", dimension_numbers=("NHWC", "OIHW", "NHWC"))
    _close(got2, np.moveaxis(got, 1, -1))
    check_grads(lambda a: lax.conv_general_dilated_patches(a, (2, 2), (1, 1), "SAME"), (fnp.asarray(x),),
                order=1)


def test_shape_as_value_and_sharding_constraint(rng):
    v = lax.shape_as_value((2, 3))
    np.testing.assert_array_equal(np.asarray(v), [2, 3])
    assert v.dtype == np.int32
    x = rng.normal(size=3)
    assert lax.with_sharding_constraint(x, None) is x


def test_prng_option_context_managers():
    before = fg.config.threefry_partitionable
    with fg.threefry_partitionable(not before):
        assert fg.config.threefry_partitionable is (not before)
    assert fg.config.threefry_partitionable is before
    with fg.default_prng_impl("threefry2x32"), fg.debug_key_reuse(False), fg.enable_custom_prng(False):
        pass
    with fg.legacy_prng_key("allow"), fg.softmax_custom_jvp(True):
        pass
    for bad in (lambda: fg.default_prng_impl("rbg"), lambda: fg.debug_key_reuse(True),
                lambda: fg.legacy_prng_key("error"), lambda: fg.enable_custom_prng()):
        with pytest.raises(NotImplementedError):
            with bad():
                pass


def test_scatter_add_and_scatter_both_forms(rng):
    x = rng.normal(size=(3, 4))
    u = rng.normal(size=(3, 4))
    idx = np.array([[0], [2], [0]])
    want = x.copy()
    np.add.at(want, [0, 2, 0], u)
    _close(lax.scatter_add(x, idx, u, SROWS), want)
    got = np.asarray(lax.scatter(x, np.array([[1], [7]]), u[:2], SROWS))     # 7: dropped
    want = x.copy()
    want[1] = u[0]
    _close(got, want)
    check_grads(lambda a, b: lax.scatter_add(a, idx, b, SROWS), (fnp.asarray(x), fnp.asarray(u)), order=2)
    # funcgrad's numpy-index form stays: scatter_add(x, index, value) == x.at[index].add(value)
    want = x.copy()
    np.add.at(want, ([1, 1],), u[:2])
    _close(lax.scatter_add(x, (np.array([1, 1]),), u[:2]), want)
    _close(lax.scatter(x, 2, u[0]), np.concatenate([x[:2], u[:1]]))


def test_custom_gradient(rng):
    @fg.custom_gradient
    def f(x, y):      # a deliberately "wrong" gradient in x (times 10), so the custom rule is observable
        return fnp.sin(x) * y, lambda g: (g * fnp.cos(x) * y * 10.0, g * fnp.sin(x))
    x, y = 0.3, 2.0
    _close(f(x, y), np.sin(x) * y)
    gx, gy = fg.grad(f, (0, 1))(x, y)
    _close(gx, 10 * np.cos(x) * y)
    _close(gy, np.sin(x))
    _close(fg.jit(fg.grad(f))(x, y), 10 * np.cos(x) * y)
    _close(fg.grad(fg.grad(f))(x, y), -10 * np.sin(x) * y)        # the vjp's own derivative
    _close(fg.vmap(fg.grad(f))(np.array([0.1, 0.2]), np.array([1.0, 2.0])),
           10 * np.cos([0.1, 0.2]) * np.array([1.0, 2.0]))

    @fg.custom_gradient
    def clip_gradient(x):
        return x, lambda g: (fnp.clip(g, -1.0, 1.0),)
    _close(fg.grad(lambda v: fnp.sum(3.0 * clip_gradient(v)))(np.ones(3)), np.ones(3))

    @fg.custom_gradient
    def bad(x):
        return x, lambda g: g        # not a tuple
    with pytest.raises(TypeError, match="tuple"):
        fg.grad(bad)(1.0)


def test_composite_and_single_device_arrays(rng):
    tangent = lax.composite(lambda x: fnp.sin(x) / fnp.cos(x), name="my.tangent")
    x = rng.normal(size=3)
    _close(tangent(x), np.tan(x))
    _close(fg.grad(lambda v: fnp.sum(tangent(v)))(x), 1 / np.cos(x) ** 2)
    data = rng.normal(size=(2, 3))
    _close(fg.make_array_from_single_device_arrays((2, 3), None, [data]), data)
    _close(fg.make_array_from_process_local_data(None, data), data)
    assert fg.copy_to_host_async(data) is None
    with pytest.raises(NotImplementedError, match="one device"):
        fg.make_array_from_single_device_arrays((2, 3), None, [data, data])
    with pytest.raises(ValueError, match="shape"):
        fg.make_array_from_single_device_arrays((3, 2), None, [data])


def test_conv_general_dilated_local(rng):
    # Unshared convolution: each output position (i, j) has its own kernel w[:, :, i, j]; I is channel-major.
    x = rng.normal(size=(2, 3, 4, 5))
    fh, fw = 2, 3
    w = rng.normal(size=(4, 3 * fh * fw, 3, 3))
    want = np.zeros((2, 4, 3, 3))
    for i in range(3):
        for j in range(3):
            patch = x[:, :, i:i + fh, j:j + fw].reshape(2, -1)          # (N, C * fh * fw), channel-major
            want[:, :, i, j] = patch @ w[:, :, i, j].T
    got = lax.conv_general_dilated_local(x, w, (1, 1), "VALID", (fh, fw))
    _close(got, want, 1e-10)
    check_grads(lambda a, b: lax.conv_general_dilated_local(a, b, (1, 1), "VALID", (fh, fw)),
                (fnp.asarray(x), fnp.asarray(w)), order=1)


def test_gather_scatter_mode_enum(rng):
    x = rng.normal(size=(3, 4))
    mode = lax.GatherScatterMode.from_any("fill")
    assert mode is lax.GatherScatterMode.FILL_OR_DROP
    assert np.isnan(np.asarray(lax.gather(x, np.array([[5]]), ROWS, (1, 4), mode=mode))).all()
    _close(lax.gather(x, np.array([[5]]), ROWS, (1, 4), mode=lax.GatherScatterMode.CLIP), x[2:])
    with pytest.raises(NotImplementedError, match="ONE_HOT"):
        lax.gather(x, np.array([[0]]), ROWS, (1, 4), mode=lax.GatherScatterMode.ONE_HOT)
