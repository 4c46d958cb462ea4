"""Dynamic slicing (lax.dynamic_slice & co.), lax.stop_gradient on pytrees, lax.select and
lax.associative_scan: values against float64 numpy, derivatives against finite differences,
vmap against a Python loop, jit against eager, and the errors.

The numpy reference of a dynamic slice follows JAX's documented rule: a negative start counts
once from the end, then the start is clamped into [0, dim - size].
"""
from __future__ import annotations

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.lax as lax
import funcgrad.numpy as fnp
from funcgrad.testing import check_close, check_grads


def _np_start(start: int, dim: int, size: int) -> int:
    start = start + dim if start < 0 else start
    return int(np.clip(start, 0, dim - size))


def _np_window(shape, starts, sizes):
    firsts = [_np_start(int(s), d, n) for s, d, n in zip(starts, shape, sizes)]
    return tuple(slice(f, f + n) for f, n in zip(firsts, sizes))


def np_dynamic_slice(x, starts, sizes):
    x = np.asarray(x, dtype=np.float64)
    return x[_np_window(x.shape, starts, sizes)]


def np_dynamic_update_slice(x, update, starts):
    out = np.array(x, dtype=np.float64)
    out[_np_window(out.shape, starts, np.shape(update))] = update
    return out


def _as64(x):
    return np.asarray(x, dtype=np.float64)


X = np.arange(20.0).reshape(4, 5) / 7.0 - 1.0
# (starts, sizes): in range, past the end (clamped back), negative (from the end, then clamped), empty
SLICES = [((1, 2), (2, 3)), ((3, 4), (2, 3)), ((-1, -2), (1, 2)), ((-9, 7), (3, 5)), ((2, 0), (0, 5)),
          ((0, 0), (4, 5))]


# ------------------------------------------------------------------ values


@pytest.mark.parametrize("starts,sizes", SLICES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_dynamic_slice_matches_numpy(starts, sizes, dtype, x64):
    x = fnp.array(X * 7 if dtype == "int32" else X, dtype=dtype)
    out = lax.dynamic_slice(x, starts, sizes)
    assert out.shape == sizes and out.dtype == np.dtype(dtype)
    check_close(_as64(out), np_dynamic_slice(x, starts, sizes), atol=0, rtol=0)


@pytest.mark.parametrize("starts", [(1, 2), (3, 4), (-1, -3), (-9, 9)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dynamic_update_slice_matches_numpy_and_leaves_its_input(starts, dtype, x64):
    x_np = np.array(X, dtype=dtype)
    u = np.array([[10.0, 20.0], [30.0, 40.0]], dtype=dtype)
    out = lax.dynamic_update_slice(x_np, u, starts)
    check_close(_as64(out), np_dynamic_update_slice(x_np, u, starts), atol=0, rtol=0)
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(x_np, np.array(X, dtype=dtype))   # the user's array is untouched
    x = fnp.array(x_np)
    lax.dynamic_update_slice(x, u, starts)
    np.testing.assert_array_equal(np.asarray(x), x_np)


def test_start_index_kinds_agree():
    x = fnp.array(X)   # float32
    expected = np_dynamic_slice(np.asarray(x), (2, 1), (2, 2))
    for starts in [(2, 1), (np.int64(2), np.int32(1)), (fnp.array(2), fnp.array(1, dtype=fnp.uint8)),
                   fnp.array([2, 1]), np.array([2, 1])]:
        check_close(_as64(lax.dynamic_slice(x, starts, (2, 2))), expected, atol=0, rtol=0)
    traced = fg.jit(lambda x, ij: lax.dynamic_slice(x, ij, (2, 2)))(x, fnp.array([2, 1]))
    check_close(_as64(traced), expected, atol=0, rtol=0)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("index", [1, -1, 7])
def test_in_dim_helpers_match_numpy(axis, index, x64):
    x = fnp.array(X)
    shape = X.shape
    sizes = list(shape)
    sizes[axis] = 2
    starts = [0, 0]
    starts[axis] = index
    check_close(_as64(lax.dynamic_slice_in_dim(x, index, 2, axis)), np_dynamic_slice(X, starts, sizes))
    sizes[axis] = 1
    kept = np_dynamic_slice(X, starts, sizes)
    check_close(_as64(lax.dynamic_index_in_dim(x, index, axis)), kept)
    check_close(_as64(lax.dynamic_index_in_dim(x, index, axis, keepdims=False)), np.squeeze(kept, axis))

    row = np.full(shape[1 - (axis % 2)], 9.0)   # the update without the indexed axis
    expected = np_dynamic_update_slice(X, np.expand_dims(row, axis), starts)
    check_close(_as64(lax.dynamic_update_index_in_dim(x, row, index, axis)), expected)
    check_close(_as64(lax.dynamic_update_index_in_dim(x, np.expand_dims(row, axis), index, axis)), expected)
    block = np.full((2, 2), 5.0)   # the other axis starts at 0
    check_close(_as64(lax.dynamic_update_slice_in_dim(x, block, index, axis)),
                np_dynamic_update_slice(X, block, starts))


def test_scalar_updates_take_the_operand_dtype():
    x = fnp.zeros(6, dtype=fnp.int32)
    out = lax.dynamic_update_index_in_dim(x, 7, 10, 0)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), np_dynamic_update_slice(np.zeros(6), [7], (10,)))
    out = lax.dynamic_update_index_in_dim(fnp.zeros(3), 2, 1, 0)
    assert out.dtype == np.float32


# ------------------------------------------------------------- derivatives


@pytest.mark.parametrize("starts,sizes", SLICES[:4])
def test_dynamic_slice_grads(starts, sizes, x64):
    check_grads(lambda x: fnp.sin(lax.dynamic_slice(x, starts, sizes)) * 2.0, (fnp.array(X),), order=2,
                modes=("fwd", "rev"))


@pytest.mark.parametrize("starts", [(1, 2), (3, 4), (-1, -9)])
def test_dynamic_update_slice_grads(starts, x64):
    u = fnp.array([[0.5, -0.2], [0.3, 0.9]])
    check_grads(lambda x, u: fnp.sin(lax.dynamic_update_slice(x * x, u * u, starts)), (fnp.array(X), u),
                order=2, modes=("fwd", "rev"))


def test_grads_of_in_dim_helpers_in_float32():
    x = fnp.array(X, dtype=fnp.float32)
    check_grads(lambda x: lax.dynamic_index_in_dim(x, -2, axis=1, keepdims=False) ** 2, (x,), order=2)
    check_grads(lambda x: lax.dynamic_update_index_in_dim(x, x[1] * 3.0, 2, 0) ** 2, (x,), order=2)


def test_grad_through_a_loop_indexed_by_its_counter(x64):
    # The use the primitives exist for: a loop body reading and writing row i (fori_loop's counter).
    def f(x):
        def body(i, carry):
            total, y = carry
            row = lax.dynamic_index_in_dim(y, i, keepdims=False)
            return total + fnp.sum(fnp.sin(row)), lax.dynamic_update_index_in_dim(y, row * row, i, 0)
        total, y = lax.fori_loop(0, 3, body, (0.0, x))
        return total + fnp.sum(y)

    def f_ref(x):
        y = np.array(x, dtype=np.float64)
        total = 0.0
        for i in range(3):
            total += np.sum(np.sin(y[i]))
            y[i] = y[i] ** 2
        return total + np.sum(y)

    x = fnp.array(X)
    check_close(float(f(x)), f_ref(X), atol=1e-12, rtol=1e-12)
    check_close(float(fg.jit(f)(x)), f_ref(X), atol=1e-12, rtol=1e-12)
    check_grads(f, (x,), order=2)
    check_close(_as64(fg.jit(fg.grad(f))(x)), _as64(fg.grad(f)(x)), atol=1e-12, rtol=1e-12)


# ------------------------------------------------------------------- vmap

XS = np.random.default_rng(1).normal(size=(3, 4, 5))
IS = np.array([0, 3, -1])
JS = np.array([4, -7, 2])


def _loop(f, *args):
    """``f`` applied per example (None: shared) and stacked: the reference for vmap."""
    n = next(len(a) for a in args if a is not None)
    return np.stack([_as64(f(*[a if a is None else a[k] for a in args])) for k in range(n)])


@pytest.mark.parametrize("mapped", ["operand", "indices", "both"])
def test_vmap_dynamic_slice_matches_a_loop(mapped, x64):
    xs = XS if mapped != "indices" else None
    i_s = IS if mapped != "operand" else None
    in_axes = (None if xs is None else 0, None if i_s is None else 0)
    x_arg, i_arg = XS[0] if xs is None else xs, 2 if i_s is None else i_s
    out = fg.vmap(lambda x, i: lax.dynamic_slice(x, (i, 1), (2, 3)), in_axes=in_axes)(x_arg, i_arg)
    expected = _loop(lambda x, i: np_dynamic_slice(XS[0] if x is None else x, (2 if i is None else i, 1), (2, 3)),
                     xs, i_s)
    check_close(_as64(out), expected, atol=0, rtol=0)


def test_vmap_dynamic_slice_of_an_inner_axis_and_two_batched_starts(x64):
    moved = np.moveaxis(XS, 0, 2)   # the batch axis in the middle of the operand
    out = fg.vmap(lambda x, i, j: lax.dynamic_slice(x, (i, j), (3, 2)), in_axes=(2, 0, 0))(moved, IS, JS)
    expected = _loop(lambda x, i, j: np_dynamic_slice(x, (i, j), (3, 2)), XS, IS, JS)
    check_close(_as64(out), expected, atol=0, rtol=0)


@pytest.mark.parametrize("mapped", ["operand", "update", "indices", "all"])
def test_vmap_dynamic_update_slice_matches_a_loop(mapped, x64):
    us = np.random.default_rng(2).normal(size=(3, 2, 3))
    xs = XS if mapped in ("operand", "all") else None
    ub = us if mapped in ("update", "all") else None
    i_s = IS if mapped in ("indices", "all") else None
    in_axes = tuple(None if a is None else 0 for a in (xs, ub, i_s))
    args = (XS[0] if xs is None else xs, us[0] if ub is None else ub, 1 if i_s is None else i_s)
    out = fg.vmap(lambda x, u, i: lax.dynamic_update_slice(x, u, (i, -1)), in_axes=in_axes)(*args)
    expected = _loop(lambda x, u, i: np_dynamic_update_slice(XS[0] if x is None else x, us[0] if u is None else u,
                                                             (1 if i is None else i, -1)), xs, ub, i_s)
    check_close(_as64(out), expected, atol=0, rtol=0)


def test_nested_vmap_and_grad_of_vmap_with_batched_indices(x64):
    idx = np.array([[0, 4, -2], [5, 1, 3]])
    xs = np.random.default_rng(3).normal(size=(2, 3, 6))
    out = fg.vmap(fg.vmap(lambda r, i: lax.dynamic_slice_in_dim(r, i, 3)))(xs, idx)
    expected = np.array([[np_dynamic_slice(xs[a, b], (idx[a, b],), (3,)) for b in range(3)] for a in range(2)])
    check_close(_as64(out), expected, atol=0, rtol=0)
    check_grads(lambda x: fg.vmap(lambda r, i: lax.dynamic_slice_in_dim(r, i, 3))(x, idx[0]) ** 3,
                (fnp.array(xs[0]),), order=2)
    check_grads(lambda x: fg.vmap(lambda r, i: lax.dynamic_update_slice_in_dim(r, r[:2] ** 2, i, 0))(x, idx[0]),
                (fnp.array(xs[0]),), order=2)


# -------------------------------------------------------------------- jit


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_jit_matches_eager_with_traced_and_clamped_starts(dtype, x64):
    x = fnp.array(X, dtype=dtype)
    u = fnp.ones((2, 2), dtype=dtype)

    def f(x, u, i, j):
        window = lax.dynamic_slice(x, (i, j), (2, 2))
        return lax.dynamic_update_slice(x, window * u + 1.0, (j, i)), window
    jf = fg.jit(f)
    for i, j in [(0, 0), (3, 4), (-1, -4), (-30, 30)]:
        for got, want in zip(jf(x, u, fnp.array(i), fnp.array(j)), f(x, u, i, j)):
            assert got.dtype == want.dtype == np.dtype(dtype)
            check_close(_as64(got), _as64(want), atol=0, rtol=0)


# ------------------------------------------------- stop_gradient and select


def test_stop_gradient_on_a_pytree(x64):
    x_np = np.array([0.5, -1.5, 2.0])
    flags = np.array([1, 0, 1])

    def f(x):
        tree = lax.stop_gradient({"w": x * x, "n": 3, "flags": flags})
        assert tree["n"] == 3 and type(tree["n"]) is int and tree["flags"] is flags   # int leaves as they are
        return fnp.sum(x * tree["w"] * tree["flags"])
    check_close(_as64(fg.grad(f)(fnp.array(x_np))), x_np ** 2 * flags)   # d/dx of x * const
    _, t = fg.jvp(lambda x: lax.stop_gradient((x, x))[1] * 2.0, (fnp.array(x_np),), (fnp.ones(3),))
    check_close(_as64(t), np.zeros(3), atol=0, rtol=0)


def test_select_matches_jax_semantics(x64):
    pred = np.array([True, False, True, False])
    on_true, on_false = np.array([1.0, 2.0, 3.0, 4.0]), np.array([-1.0, -2.0, -3.0, -4.0])
    check_close(_as64(lax.select(pred, on_true, on_false)), np.where(pred, on_true, on_false), atol=0, rtol=0)
    g_true, g_false = fg.grad(lambda a, b: fnp.sum(lax.select(pred, a, b) * 3.0), argnums=(0, 1))(on_true, on_false)
    check_close(_as64(g_true), 3.0 * pred, atol=0, rtol=0)
    check_close(_as64(g_false), 3.0 * ~pred, atol=0, rtol=0)


# -------------------------------------------------------- associative_scan


def _np_scan(op, x, axis, reverse):
    x = np.moveaxis(np.asarray(x, dtype=np.float64), axis, 0)
    order = range(len(x) - 1, -1, -1) if reverse else range(len(x))
    out, acc = np.empty_like(x), None
    for k in order:
        acc = x[k] if acc is None else op(acc, x[k])
        out[k] = acc
    return np.moveaxis(out, 0, axis)


@pytest.mark.parametrize("n", [1, 2, 5, 8, 9])
@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_sum_and_max(n, reverse, x64):
    x = np.random.default_rng(n).normal(size=(n, 3))
    check_close(_as64(lax.associative_scan(fnp.add, fnp.array(x), reverse=reverse)),
                np.flip(np.cumsum(np.flip(x, 0), 0), 0) if reverse else np.cumsum(x, 0), atol=1e-12, rtol=1e-12)
    check_close(_as64(lax.associative_scan(fnp.maximum, fnp.array(x), reverse=reverse, axis=-2)),
                _np_scan(np.maximum, x, 0, reverse), atol=0, rtol=0)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_associative_scan_of_matrix_products_along_axis_1(reverse, dtype, x64):
    # Not commutative: operands must keep their order.
    mats = np.random.default_rng(4).normal(size=(2, 7, 2, 2))
    out = lax.associative_scan(fnp.matmul, fnp.array(mats, dtype=dtype), reverse=reverse, axis=1)
    assert out.dtype == np.dtype(dtype) and out.shape == mats.shape
    tol = 1e-5 if dtype == "float32" else 1e-12
    check_close(_as64(out), _np_scan(np.matmul, mats, 1, reverse), atol=tol, rtol=tol)


def test_associative_scan_on_a_pytree_under_grad_vmap_and_jit(x64):
    # The linear recurrence h_k = a_k * h_{k-1} + b_k as a scan of affine maps (a, b).
    def compose(first, second):
        (a1, b1), (a2, b2) = first, second
        return a2 * a1, a2 * b1 + b2

    def recurrence(a, b):
        return lax.associative_scan(compose, (a, b))[1]

    def recurrence_ref(a, b):
        h, out = 0.0, []
        for ak, bk in zip(a, b):
            h = ak * h + bk
            out.append(h)
        return np.array(out)
    rng = np.random.default_rng(5)
    a, b = rng.uniform(0.5, 1.0, (6, 2, 3)), rng.normal(size=(6, 2, 3))
    check_close(_as64(recurrence(a, b)), recurrence_ref(a, b), atol=1e-12, rtol=1e-12)
    check_close(_as64(fg.jit(recurrence)(a, b)), recurrence_ref(a, b), atol=1e-12, rtol=1e-12)
    out = fg.vmap(recurrence, in_axes=1, out_axes=1)(a, b)
    check_close(_as64(out), recurrence_ref(a, b), atol=1e-12, rtol=1e-12)
    check_grads(recurrence, (fnp.array(a[:5, 0]), fnp.array(b[:5, 0])), order=2)


# ------------------------------------------------------------------ errors


def test_dynamic_slice_errors():
    x = fnp.zeros((3, 4))
    with pytest.raises(ValueError, match=r"dynamic_slice: the operand f32\[3,4\] takes 2 start indices .* got 1"):
        lax.dynamic_slice(x, (1,), (1, 1))
    with pytest.raises(ValueError, match=r"dynamic_slice: slice_sizes \(2, 5\) do not fit the operand f32\[3,4\]"
                                         r": along axis 1 the size 5 must be in \[0, 4\]"):
        lax.dynamic_slice(x, (0, 0), (2, 5))
    with pytest.raises(ValueError, match=r"size -1 must be in \[0, 3\]"):
        lax.dynamic_slice(x, (0, 0), (-1, 2))
    with pytest.raises(ValueError, match=r"slice_sizes \(2,\) must give one size per axis"):
        lax.dynamic_slice(x, (0, 0), (2,))
    with pytest.raises(TypeError, match=r"dynamic_slice: start index 1 must be an integer scalar, got f32\[\]"):
        lax.dynamic_slice(x, (0, fnp.array(1.0)), (1, 1))
    with pytest.raises(TypeError, match=r"start index 0 must be an integer scalar, got float scalar"):
        lax.dynamic_slice(x, (1.0, 0), (1, 1))
    with pytest.raises(TypeError, match=r"start index 0 must be an integer scalar, got bool scalar"):
        lax.dynamic_slice(x, (True, 0), (1, 1))
    with pytest.raises(TypeError, match=r"start index 0 must be an integer scalar, got i32\[2\]"):
        lax.dynamic_slice(x, (fnp.array([0, 1]), 0), (1, 1))
    with pytest.raises(ValueError, match=r"start_indices must be a sequence of scalars or a 1-d integer array"):
        lax.dynamic_slice(x, fnp.zeros((2, 1), dtype=fnp.int32), (1, 1))
    with pytest.raises(TypeError, match=r"slice_sizes must be static Python ints"):
        fg.jit(lambda x, n: lax.dynamic_slice(x, (0, 0), (n, 1)))(x, fnp.array(2))
    with pytest.raises(ValueError, match=r"dynamic_slice_in_dim: axis 2 is out of range for the operand f32\[3,4\]"):
        lax.dynamic_slice_in_dim(x, 0, 1, axis=2)


def test_dynamic_update_slice_errors():
    x = fnp.zeros((3, 4))
    with pytest.raises(ValueError, match=r"the update f32\[4\] must have the rank of the operand f32\[3,4\]"):
        lax.dynamic_update_slice(x, fnp.ones(4), (0, 0))
    with pytest.raises(ValueError, match=r"the update's shape \(4, 1\) do not fit the operand f32\[3,4\]: along "
                                         r"axis 0 the size 4"):
        lax.dynamic_update_slice(x, fnp.ones((4, 1)), (0, 0))
    with pytest.raises(TypeError, match=r"the update i32\[1,1\] must have the operand's dtype \(f32\[3,4\]\)"):
        lax.dynamic_update_slice(x, fnp.ones((1, 1), dtype=fnp.int32), (0, 0))
    with pytest.raises(TypeError, match=r"the update f32\[\] must have the operand's dtype \(i32\[3\]\)"):
        lax.dynamic_update_index_in_dim(fnp.zeros(3, dtype=fnp.int32), 1.5, 0, 0)
    with pytest.raises(TypeError, match=r"dynamic_update_slice: start index 0 must be an integer scalar"):
        lax.dynamic_update_slice(x, fnp.ones((1, 1)), (0.5, 0))


def test_the_shape_rules_check_traced_operands():
    # Binding the primitives directly (no wrapper) under jit: the shape rule raises the same errors.
    x = fnp.zeros((3, 4))
    with pytest.raises(TypeError, match=r"start index 1 must be an integer scalar, got f32\[\]"):
        fg.make_jaxpr(lambda x, i: lax.dynamic_slice_p.bind(x, 0, i, slice_sizes=(1, 1)))(x, fnp.array(1.0))
    with pytest.raises(ValueError, match=r"takes 2 start indices"):
        fg.make_jaxpr(lambda x, i: lax.dynamic_update_slice_p.bind(x, fnp.ones((1, 1)), i))(x, fnp.array(1))
    with pytest.raises(ValueError, match=r"along axis 0 the size 4 must be in \[0, 3\]"):
        fg.make_jaxpr(lambda x: lax.dynamic_slice_p.bind(x, 0, 0, slice_sizes=(4, 1)))(x)


def test_associative_scan_errors():
    with pytest.raises(ValueError, match=r"must have the same length along axis 0, got f32\[3\], f32\[4\]"):
        lax.associative_scan(lambda a, b: a, (fnp.zeros(3), fnp.zeros(4)))
    with pytest.raises(TypeError, match=r"fn must be callable"):
        lax.associative_scan(3, fnp.zeros(3))
    with pytest.raises(ValueError, match=r"axis 2 is out of range for the array f32\[3,4\]"):
        lax.associative_scan(fnp.add, fnp.zeros((3, 4)), axis=2)
    with pytest.raises(ValueError, match=r"elems holds no arrays"):
        lax.associative_scan(fnp.add, ())
    with pytest.raises(TypeError, match=r"fn must return the structure of elems"):
        lax.associative_scan(lambda a, b: (a, b), fnp.zeros(4))
    with pytest.raises(ValueError, match=r"fn must return arrays of its operands' shapes: leaf 0 of its result is "
                                         r"f32\[\] for operands f32\[2\]"):
        lax.associative_scan(lambda a, b: fnp.sum(a + b), fnp.zeros(4))


# -------------------------------------------------------------- GPU path


def test_gpu_implementations_on_the_standin():
    from gpu_standin import FakeDeviceArray, gpu_standin

    def f(x, u):
        y = lax.dynamic_update_slice(x, u * 2.0, (1, -1))
        return fnp.sum(lax.dynamic_slice(y, (0, 2), (2, 3)) ** 2)

    def f_ref(x, u):
        y = np_dynamic_update_slice(x, u * 2.0, (1, -1))
        return np.sum(np_dynamic_slice(y, (0, 2), (2, 3)) ** 2)

    x, u = X.astype(np.float32), np.ones((2, 2), np.float32)
    with gpu_standin(use_triton=False):
        xg, ug = fg.device_put(fnp.array(x), "gpu"), fg.device_put(fnp.array(u), "gpu")
        out = lax.dynamic_slice(xg, (1, 3), (2, 2))
        assert isinstance(out._value, FakeDeviceArray), "the slice stays on the device"
        check_close(_as64(fg.device_put(out, "cpu")), np_dynamic_slice(x, (1, 3), (2, 2)), atol=0, rtol=0)
        check_close(float(fg.device_put(f(xg, ug), "cpu")), f_ref(x, u), atol=1e-4, rtol=1e-5)
        gx, gu = fg.grad(f, argnums=(0, 1))(xg, ug)
        assert isinstance(gx._value, FakeDeviceArray) and isinstance(gu._value, FakeDeviceArray)
        gx, gu = fg.device_put((gx, gu), "cpu")
    check_close(_as64(gx), _fd_grad(lambda v: f_ref(v, u), x), atol=1e-4, rtol=1e-4)
    check_close(_as64(gu), _fd_grad(lambda v: f_ref(x, v), u), atol=1e-4, rtol=1e-4)


def _fd_grad(f, x, eps=1e-6):
    """Central differences of a numpy function, in float64."""
    x = np.array(x, dtype=np.float64)
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[k] = eps
        g[k] = (f(x + e) - f(x - e)) / (2 * eps)
    return g
