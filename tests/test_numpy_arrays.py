"""funcgrad.numpy's array functions beyond the op table (tests/op_rows_arrays.py): keywords, the
``size=``/``fill_value=`` forms under jit and vmap, JAX's semantics where numpy differs (no in-place
updates, fill defaults, clipping), every pad mode on integers, pad's callable mode, and the errors.
References are numpy (float64) and finite differences."""
from __future__ import annotations

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.testing import check_grads


def close(a, b, **kw):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), **kw)


def padded(values, size, fill):
    v = np.asarray(values)
    out = np.full((size,) + v.shape[1:], fill, dtype=v.dtype)
    out[:min(size, len(v))] = v[:size]
    return out


# ------------------------------------------------------------------ no in-place updates


@pytest.mark.parametrize("call", [
    lambda: fnp.put(fnp.zeros(3), fnp.array([0]), 1.0),
    lambda: fnp.place(fnp.zeros(3), fnp.array([True, False, True]), fnp.array([1.0])),
    lambda: fnp.fill_diagonal(fnp.zeros((2, 2)), 1.0),
    lambda: fnp.put_along_axis(fnp.zeros((2, 2)), fnp.array([[0], [1]]), 1.0, axis=1),
], ids=["put", "place", "fill_diagonal", "put_along_axis"])
def test_inplace_updates_raise_as_in_jax(call):
    with pytest.raises(ValueError, match="inplace=False"):
        call()


def test_put_modes():
    x = np.arange(6.0)
    idx = np.array([1, 7, -2, -9])
    got = fnp.put(fnp.asarray(x), fnp.asarray(idx), fnp.array([10.0, 11.0, 12.0, 13.0]), inplace=False)
    close(got, [13, 10, 2, 3, 12, 11])    # None (JAX's default): negatives from the end, then clipped
    for mode in ("clip", "wrap"):
        want = x.copy()
        np.put(want, idx, [10.0, 11.0, 12.0, 13.0], mode=mode)
        close(fnp.put(fnp.asarray(x), fnp.asarray(idx), fnp.array([10.0, 11.0, 12.0, 13.0]), mode=mode,
                      inplace=False), want)
    with pytest.raises(IndexError, match="out of bounds"):
        fnp.put(fnp.asarray(x), fnp.asarray(idx), 1.0, mode="raise", inplace=False)
    with pytest.raises(ValueError, match="mode"):
        fnp.put(fnp.asarray(x), fnp.array([0]), 1.0, mode="bogus", inplace=False)
    with pytest.raises(TypeError, match="integers"):
        fnp.put(fnp.asarray(x), fnp.array([0.5]), 1.0, inplace=False)


def test_put_along_axis_flat_and_under_jit():
    x = np.arange(6.0).reshape(2, 3)
    want = x.copy()
    np.put_along_axis(want, np.array([4, 0]), np.array([7.0, 8.0]), axis=None)
    close(fnp.put_along_axis(fnp.asarray(x), np.array([4, 0]), np.array([7.0, 8.0]), None, inplace=False), want)
    f = fg.jit(lambda x, v: fnp.put_along_axis(x, np.array([[2], [0]]), v, 1, inplace=False))
    want = x.copy()
    np.put_along_axis(want, np.array([[2], [0]]), 5.0, 1)
    close(f(fnp.asarray(x), fnp.asarray(5.0)), want)


def test_place_under_jit_and_vmap_needs_no_concrete_mask():
    x = np.arange(8.0).reshape(2, 4)
    masks = np.array([[True, False, True, True], [False, False, True, False]])
    f = fg.vmap(lambda x, m: fnp.place(x, m, fnp.array([-1.0, -2.0]), inplace=False))
    got = fg.jit(f)(fnp.asarray(x), fnp.asarray(masks))
    for i in range(2):
        want = x[i].copy()
        np.place(want, masks[i], [-1.0, -2.0])
        close(got[i], want)


def test_fill_diagonal_gradient_reaches_value():
    g = fg.grad(lambda v: fnp.sum(fnp.fill_diagonal(fnp.ones((3, 3)), v, inplace=False) ** 2))(2.0)
    close(g, 3 * 2 * 2.0)


# ------------------------------------------------------------------ value-dependent shapes


_VALUE_DEPENDENT = [
    ("nonzero", lambda x: fnp.nonzero(x)),
    ("argwhere", lambda x: fnp.argwhere(x)),
    ("flatnonzero", lambda x: fnp.flatnonzero(x)),
    ("where", lambda x: fnp.where(x)),
    ("unique", lambda x: fnp.unique(x)),
    ("unique_counts", lambda x: fnp.unique_counts(x)),
    ("union1d", lambda x: fnp.union1d(x, x)),
    ("intersect1d", lambda x: fnp.intersect1d(x, x)),
    ("setdiff1d", lambda x: fnp.setdiff1d(x, x[:1])),
    ("setxor1d", lambda x: fnp.setxor1d(x, x[:1])),
    ("compress", lambda x: fnp.compress(x > 0, x)),
    ("extract", lambda x: fnp.extract(x > 0, x)),
]


@pytest.mark.parametrize("name,fn", _VALUE_DEPENDENT, ids=[n for n, _ in _VALUE_DEPENDENT])
def test_value_dependent_shapes_need_size_under_jit_and_vmap(name, fn):
    x = fnp.array([0.0, 2.0, 0.0, 1.0])
    fn(x)   # eager: fine
    with pytest.raises(fg.ConcretizationError, match="size="):
        fg.jit(fn)(x)
    with pytest.raises(fg.ConcretizationError, match="size="):
        fg.vmap(fn)(fnp.stack([x, x]))


def test_trim_zeros_and_insert_need_concrete_values():
    with pytest.raises(fg.ConcretizationError, match="trim_zeros"):
        fg.jit(fnp.trim_zeros)(fnp.array([0.0, 1.0]))
    with pytest.raises(fg.ConcretizationError, match="obj"):
        fg.jit(lambda i: fnp.insert(fnp.zeros(3), i, 1.0))(fnp.asarray(1))
    with pytest.raises(fg.ConcretizationError, match="obj"):
        fg.jit(lambda i: fnp.delete(fnp.zeros(3), i))(fnp.asarray(1))


def test_nonzero_size_fill_value_forms():
    m = np.array([[0, 3, 0], [4, 0, 5]])
    rows, cols = np.nonzero(m)
    got = fg.jit(lambda x: fnp.nonzero(x, size=5, fill_value=(-1, -2)))(fnp.asarray(m))
    close(got[0], padded(rows, 5, -1))
    close(got[1], padded(cols, 5, -2))
    got = fnp.nonzero(m, size=2)      # truncated: the first ones in C order
    close(got[0], rows[:2])
    close(got[1], cols[:2])
    close(fnp.argwhere(m, size=4, fill_value=9), padded(np.argwhere(m), 4, 9))
    assert fnp.nonzero(fnp.zeros((2, 2)), size=3)[0].dtype == np.int32   # the default int (x64 off)
    with pytest.raises(ValueError, match="0-d"):
        fnp.nonzero(fnp.asarray(1.0))
    with pytest.raises(ValueError, match="fill_value"):
        fnp.nonzero(m, size=2, fill_value=(1, 2, 3))
    assert fnp.argwhere(fnp.asarray(0.0)).shape == np.argwhere(np.array(0.0)).shape == (0, 0)


def test_nonzero_and_unique_with_size_under_vmap():
    rng = np.random.default_rng(0)
    xs = rng.integers(-1, 2, (4, 6)).astype(np.float32)
    got = fg.vmap(lambda x: fnp.flatnonzero(x, size=6, fill_value=-1))(fnp.asarray(xs))
    for i in range(4):
        close(got[i], padded(np.flatnonzero(xs[i]), 6, -1))
    vals, counts = fg.vmap(lambda x: fnp.unique(x, return_counts=True, size=4, fill_value=7.0))(fnp.asarray(xs))
    for i in range(4):
        u, c = np.unique(xs[i], return_counts=True)
        close(vals[i], padded(u, 4, 7.0))
        close(counts[i], padded(c, 4, 0))


def test_unique_size_fills_follow_jax():
    x = np.array([3.0, 1.0, 3.0, 2.0, 5.0, 1.0])
    u, idx, inv, cnt = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    got = fg.jit(lambda x: fnp.unique(x, True, True, True, size=6))(fnp.asarray(x))
    close(got[0], padded(u, 6, u[0]))          # default fill: the smallest value
    close(got[1], padded(idx, 6, idx[0]))      # and its index
    close(got[2], inv)
    close(got[3], padded(cnt, 6, 0))           # counts of the padding: 0
    got = fnp.unique(x, True, True, True, size=2)
    close(got[0], u[:2])
    close(got[3], cnt[:2])
    close(got[2], inv)                          # the inverse still names the full groups


def test_unique_nan_handling_and_axis():
    x = np.array([1.0, np.nan, 2.0, np.nan])
    close(fnp.unique(x), np.unique(x))                               # equal_nan=True: one NaN
    close(fnp.unique(x, equal_nan=False), np.unique(x, equal_nan=False))
    close(fnp.unique_values(x), np.unique_values(x))                 # array API: every NaN
    rows = np.array([[1, 0], [0, 1], [1, 0]])
    for got, want in zip(fnp.unique(rows, return_index=True, return_inverse=True, return_counts=True, axis=0),
                         np.unique(rows, return_index=True, return_inverse=True, return_counts=True, axis=0)):
        close(got, want)
    cube = np.array([[[1, 2], [0, 1]], [[1, 2], [0, 1]], [[0, 5], [0, 1]]])
    for axis in (0, 1, 2, -1):
        for got, want in zip(fnp.unique(cube, return_index=True, return_inverse=True, return_counts=True, axis=axis),
                             np.unique(cube, return_index=True, return_inverse=True, return_counts=True, axis=axis)):
            close(got, want)
    u, c = fg.jit(lambda r: fnp.unique(r, return_counts=True, axis=0, size=3, fill_value=-1))(fnp.asarray(rows))
    close(u, [[0, 1], [1, 0], [-1, -1]])
    close(c, [1, 2, 0])
    g = fg.grad(lambda x: fnp.sum(fnp.unique(x) * fnp.array([1.0, 10.0])))(fnp.array([2.0, 1.0, 2.0]))
    close(g, [10.0, 1.0, 0.0])     # the gradient goes to each value's first occurrence


def test_set_operations_with_size():
    a = np.array([5.0, 1.0, 3.0, 3.0, 7.0])
    b = np.array([3.0, 9.0, 5.0])
    f = fg.jit(lambda a, b: (fnp.union1d(a, b, size=8), fnp.setdiff1d(a, b, size=4),
                             fnp.setxor1d(a, b, size=5, fill_value=-1.0), fnp.intersect1d(a, b, size=3)))
    union, diff, xor, inter = f(fnp.asarray(a), fnp.asarray(b))
    u = np.union1d(a, b)
    close(union, padded(u, 8, u[0]))
    close(diff, padded(np.setdiff1d(a, b), 4, 0.0))       # JAX's default fill for setdiff1d: 0
    close(xor, padded(np.setxor1d(a, b), 5, -1.0))
    i = np.intersect1d(a, b)
    close(inter, padded(i, 3, i[0]))
    vals, ia, ib = fnp.intersect1d(a, b, return_indices=True, size=3)
    _, wa, wb = np.intersect1d(a, b, return_indices=True)
    close(ia, padded(wa, 3, len(a)))
    close(ib, padded(wb, 3, len(b)))


def test_isin_under_jit_and_method():
    x, t = np.array([[1, 2], [3, 4]]), np.array([4, 1, 9])
    close(fg.jit(fnp.isin)(fnp.asarray(x), fnp.asarray(t)), np.isin(x, t))
    close(fnp.isin(np.array([np.nan, 1.0]), np.array([np.nan])), [False, False])
    with pytest.raises(ValueError, match="method"):
        fnp.isin(x, t, method="hash")


def test_compress_and_extract_details():
    x = np.arange(6.0).reshape(2, 3)
    close(fnp.compress(np.array([False, True]), x, axis=0), np.compress([False, True], x, axis=0))
    close(fnp.compress(np.array([1, 0, 1, 0]), np.arange(3.0)), [0.0, 2.0])   # extra False entries are fine
    with pytest.raises(ValueError, match="beyond"):
        fnp.compress(np.array([1, 0, 1, 1]), np.arange(3.0))
    with pytest.raises(ValueError, match="1-d"):
        fnp.compress(np.ones((2, 2), bool), x)
    with pytest.raises(ValueError, match="same size"):
        fnp.extract(np.ones(3, bool), x)
    got = fg.jit(lambda c, x: fnp.compress(c, x, axis=1, size=3, fill_value=-1.0))(
        fnp.array([True, False, True]), fnp.asarray(x))
    close(got, [[0.0, 2.0, -1.0], [3.0, 5.0, -1.0]])


def test_trim_zeros_cases():
    close(fnp.trim_zeros(np.zeros(3)), np.trim_zeros(np.zeros(3)))
    z = np.zeros((4, 5))
    z[1:3, 2] = 1.0
    close(fnp.trim_zeros(z), np.trim_zeros(z))
    close(fnp.trim_zeros(z, axis=1), np.trim_zeros(z, axis=1))
    with pytest.raises(ValueError, match="trim"):
        fnp.trim_zeros(z, "x")


def test_where_one_argument_form():
    c = np.array([[0, 1], [1, 1]])
    for got, want in zip(fnp.where(c), np.where(c)):
        close(got, want)
    got = fg.jit(lambda c: fnp.where(c, size=4, fill_value=-1))(fnp.asarray(c))
    close(got[0], padded(np.where(c)[0], 4, -1))
    with pytest.raises(ValueError, match="both"):
        fnp.where(c, 1.0)
    with pytest.raises(ValueError, match="one-argument"):
        fnp.where(c, 1.0, 2.0, size=2)


# ------------------------------------------------------------------ index helpers


def test_choose_modes_and_errors():
    a = np.array([0, 3, -1, 2])
    cs = [np.arange(4.0), np.arange(4.0) * 10, np.arange(4.0) * 100]
    for mode in ("wrap", "clip"):
        close(fnp.choose(a, cs, mode=mode), np.choose(a, cs, mode=mode))
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        fnp.choose(a, cs)
    with pytest.raises(TypeError, match="integers"):
        fnp.choose(np.array([0.5]), cs)
    with pytest.raises(NotImplementedError, match="out"):
        fnp.choose(np.array([0]), cs, out=np.zeros(1))


def test_select_and_piecewise_errors_and_scalars():
    x = fnp.arange(4.0)
    with pytest.raises(ValueError, match="one choice per condition"):
        fnp.select([x > 1], [x, x])
    with pytest.raises(TypeError, match="bool"):
        fnp.select([x], [x])
    with pytest.raises(ValueError, match="funclist"):
        fnp.piecewise(x, [x > 1], [1.0, 2.0, 3.0])
    close(fnp.piecewise(fnp.asarray(2.0), fnp.asarray(True), [lambda v: v * 3]), 6.0)
    close(fnp.piecewise(x, [x > 1], [lambda v, a: v * a], 5.0), np.piecewise(np.arange(4.0), [np.arange(4.0) > 1],
                                                                              [lambda v, a: v * a], 5.0))


def test_ravel_and_unravel_index_modes():
    i, j = np.array([1, 5, -1]), np.array([0, 2, 7])
    for mode in ("wrap", "clip"):
        close(fnp.ravel_multi_index((i, j), (3, 4), mode=mode), np.ravel_multi_index((i, j), (3, 4), mode=mode))
    with pytest.raises(ValueError, match="invalid entry"):
        fnp.ravel_multi_index((i, j), (3, 4))
    assert fnp.ravel_multi_index((np.array([1]), np.array([2])), (3, 4), dtype=np.int32).dtype == np.int32
    # unravel_index: JAX clips out-of-range indices (negative ones count from the end first)
    got = fnp.unravel_index(np.array([-1, 7, 20, 0]), (2, 3))
    close(got[0], [1, 1, 1, 0])
    close(got[1], [2, 2, 2, 0])
    got = fg.jit(lambda k: fnp.unravel_index(k, (3, 4)))(fnp.array([5, 11]))
    for g, w in zip(got, np.unravel_index([5, 11], (3, 4))):
        close(g, w)


def test_insert_and_delete_numpy_forms():
    x = np.arange(12.0).reshape(3, 4)
    for obj, values, axis in [(1, 9.0, None), (-1, [7.0, 8.0], None), (2, [[1.0], [2.0], [3.0]], 1),
                              ([0, 4], [7.0, 8.0], 1), (np.array([1]), [[5.0, 6.0, 7.0, 8.0]], 0)]:
        close(fnp.insert(x, obj, fnp.asarray(np.array(values)), axis=axis), np.insert(x, obj, values, axis=axis))
    for obj, axis in [(np.array([0, -1]), 1), (slice(None, None, -2), 0), ([], None), ([1, 1], 0)]:
        close(fnp.delete(x, obj, axis=axis), np.delete(x, obj, axis=axis))
    with pytest.raises(IndexError, match="out of bounds"):
        fnp.delete(x, 5, axis=0)
    with pytest.raises(IndexError, match="out of bounds"):
        fnp.insert(x, 6, 1.0, axis=1)
    close(fnp.delete(x, np.array([True, False, True]), axis=0), np.delete(x, np.array([True, False, True]), axis=0))
    with pytest.raises(ValueError, match="mask"):
        fnp.delete(x, np.array([True, False]), axis=0)
    with pytest.raises(TypeError, match="mask"):
        fnp.insert(x, np.array([True, False, True]), 1.0, axis=0)
    check_grads(lambda x, v: fnp.insert(x, [0, 2], v, axis=0), [fnp.asarray(x), fnp.ones(4)], order=2,
                modes=("fwd", "rev"))


def test_index_constructors():
    close(fnp.tril_indices(4, -1)[1], np.tril_indices(4, -1)[1])
    close(fnp.triu_indices(3, 0, 5)[1], np.triu_indices(3, 0, 5)[1])
    close(fnp.diag_indices_from(np.ones((2, 2, 2)))[2], np.diag_indices_from(np.ones((2, 2, 2)))[2])
    with pytest.raises(ValueError, match="equal length"):
        fnp.diag_indices_from(np.ones((2, 3)))
    with pytest.raises(ValueError, match="2-d"):
        fnp.tril_indices_from(np.ones(3))
    g = fnp.ix_(np.array([0, 2]), np.array([1, 0, 3]))
    close(np.arange(12).reshape(3, 4)[tuple(np.asarray(i) for i in g)],
          np.arange(12).reshape(3, 4)[np.ix_([0, 2], [1, 0, 3])])
    with pytest.raises(ValueError, match="1-d"):
        fnp.ix_(np.ones((2, 2), int))
    assert fnp.indices((2, 3), dtype=np.int32).dtype == np.int32


# ------------------------------------------------------------------ shapes


def test_stacking_forms():
    x = np.arange(6.0).reshape(2, 3)
    close(fnp.hstack(fnp.asarray(x)), np.hstack(x))          # an array stacks its rows
    close(fnp.vstack([x, x], dtype=np.int32), np.vstack([x, x]).astype(np.int32))
    assert fnp.vstack([x, x], dtype=np.int32).dtype == np.int32
    assert fnp.atleast_2d(1.0, np.ones(2))[1].shape == (1, 2)
    close(fnp.block([[np.ones((1, 2)), 2.0 * np.ones((1, 1))], [np.zeros((2, 3))]]),
          np.block([[np.ones((1, 2)), 2.0 * np.ones((1, 1))], [np.zeros((2, 3))]]))
    with pytest.raises(ValueError, match="depths"):
        fnp.block([[np.ones(2)], np.ones(2)])
    with pytest.raises(ValueError, match="empty"):
        fnp.block([])
    close(fnp.meshgrid(np.arange(3.0))[0], np.meshgrid(np.arange(3.0))[0])
    with pytest.raises(ValueError, match="indexing"):
        fnp.meshgrid(np.arange(2), indexing="yx")


@pytest.mark.parametrize("call,match", [
    (lambda: fnp.hsplit(fnp.asarray(1.0), 1), "rank >= 1"),
    (lambda: fnp.vsplit(fnp.ones(4), 2), "rank >= 2"),
    (lambda: fnp.dsplit(fnp.ones((2, 2)), 2), "rank >= 3"),
    (lambda: fnp.fliplr(fnp.ones(3)), "rank >= 2"),
    (lambda: fnp.flipud(fnp.asarray(1.0)), "rank >= 1"),
    (lambda: fnp.diagonal(fnp.ones(3)), "rank >= 2"),
    (lambda: fnp.diagonal(fnp.ones((2, 2)), 0, 1, -1), "must differ"),
    (lambda: fnp.matrix_transpose(fnp.ones(3)), "rank >= 2"),
    (lambda: fnp.rot90(fnp.ones((2, 2)), 1, (0, 0)), "different axes"),
    (lambda: fnp.diag(fnp.ones((2, 2, 2))), "1-d or 2-d"),
    (lambda: fnp.broadcast_shapes((2, 3), (4,)), "cannot be broadcast"),
    (lambda: fnp.array_split(fnp.ones(4), 0), "> 0"),
    (lambda: fnp.roll(fnp.ones((2, 2)), (1, 2, 3), (0, 1)), "shifts"),
    (lambda: fnp.unstack(fnp.asarray(1.0)), "rank >= 1"),
    (lambda: fnp.rollaxis(fnp.ones((2, 2)), 0, 5), "start"),
], ids=["hsplit", "vsplit", "dsplit", "fliplr", "flipud", "diagonal", "diagonal-axes", "matrix_transpose", "rot90",
        "diag", "broadcast_shapes", "array_split", "roll", "unstack", "rollaxis"])
def test_shape_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_trace_keywords():
    x = np.arange(24.0).reshape(2, 3, 4)
    close(fnp.trace(x, -1, 1, 2), np.trace(x, -1, 1, 2))
    assert fnp.trace(np.eye(2, dtype=bool)).dtype.kind == "i"
    assert fnp.trace(np.ones((2, 2)), dtype=np.int32).dtype == np.int32
    with pytest.raises(NotImplementedError, match="out"):
        fnp.trace(x, out=np.zeros(4))


def test_roll_traced_shift_under_jit_and_grad():
    x = np.arange(10.0).reshape(2, 5)
    close(fnp.roll(x, np.array([1, -2]), axis=np.array([0, 1])), np.roll(x, np.array([1, -2]), axis=np.array([0, 1])))
    f = fg.jit(lambda x, s: fnp.roll(x, s))
    for s in (-7, 0, 3, 12):
        close(f(fnp.asarray(x), fnp.asarray(s)), np.roll(x, s))
    check_grads(lambda x: fnp.roll(x, fnp.asarray(2), axis=1), [fnp.asarray(x)], order=2, modes=("fwd", "rev"))


def test_resize_of_empty_and_kron_of_ints():
    close(fnp.resize(np.zeros(0), (2, 2)), np.resize(np.zeros(0), (2, 2)))
    a, b = np.array([[1, 2], [3, 4]]), np.array([[0, 5], [6, 7]])
    got = fnp.kron(a, b)
    close(got, np.kron(a, b))
    assert got.dtype.kind == "i"


def test_packbits_errors_and_roundtrip():
    x = np.random.default_rng(1).random((3, 13)) > 0.5
    packed = fnp.packbits(x, axis=1)
    assert packed.dtype == np.uint8
    close(fnp.unpackbits(packed, axis=1, count=13), x)
    close(fnp.unpackbits(np.array([3], np.uint8), count=10), np.unpackbits(np.array([3], np.uint8), count=10))
    with pytest.raises(TypeError, match="uint8"):
        fnp.unpackbits(np.array([3]))
    with pytest.raises(TypeError, match="integer or bool"):
        fnp.packbits(np.ones(3))
    with pytest.raises(ValueError, match="bitorder"):
        fnp.packbits(x, bitorder="middle")


# ------------------------------------------------------------------ pad


_PAD_CASES = [
    (((1, 2), (2, 0)), "constant", {"constant_values": ((7, 8), (9, 10))}),
    (((2, 3), (4, 1)), "edge", {}),
    (((2, 3), (4, 1)), "linear_ramp", {"end_values": ((1, -2), (30, 4))}),
    (((2, 3), (4, 1)), "maximum", {"stat_length": 2}),
    (((2, 3), (4, 1)), "minimum", {}),
    (((2, 3), (4, 1)), "mean", {"stat_length": ((1, 2), (3, 2))}),
    (((2, 3), (4, 1)), "median", {}),
    (((5, 3), (4, 7)), "reflect", {}),
    (((5, 3), (4, 7)), "reflect", {"reflect_type": "odd"}),
    (((5, 3), (4, 7)), "symmetric", {}),
    (((5, 3), (4, 7)), "symmetric", {"reflect_type": "odd"}),
    (((5, 3), (4, 9)), "wrap", {}),
]


@pytest.mark.parametrize("pw,mode,kw", _PAD_CASES, ids=[f"{m}-{k}" for _, m, k in _PAD_CASES])
def test_pad_modes_on_integers_match_numpy(pw, mode, kw):
    x = np.arange(1, 13).reshape(3, 4) * 3
    got = fnp.pad(x, pw, mode, **kw)
    assert got.dtype.kind == "i"
    close(got, np.pad(x, pw, mode, **kw))


@pytest.mark.parametrize("mode", ["maximum", "median", "reflect", "linear_ramp"])
def test_pad_modes_under_jit_and_vmap(mode, x64):
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((3, 4, 3))
    f = lambda x: fnp.pad(x, ((2, 1), (1, 3)), mode)   # noqa: E731
    got = fg.jit(fg.vmap(f))(fnp.asarray(xs))
    for i in range(3):
        close(got[i], np.pad(xs[i], ((2, 1), (1, 3)), mode), rtol=1e-12, atol=1e-12)


def test_pad_callable_mode():
    def jax_style(vector, width, axis, kwargs):
        value = kwargs.get("value", 1.0)
        vector = vector.at[:width[0]].set(value)
        return vector.at[vector.shape[0] - width[1]:].set(-value) if width[1] else vector

    def numpy_style(vector, width, axis, kwargs):
        value = kwargs.get("value", 1.0)
        vector[:width[0]] = value
        if width[1]:
            vector[-width[1]:] = -value

    x = np.arange(6.0).reshape(2, 3)
    close(fnp.pad(x, ((1, 2), (2, 1)), jax_style, value=4.0), np.pad(x, ((1, 2), (2, 1)), numpy_style, value=4.0))
    check_grads(lambda x: fnp.pad(x, 1, jax_style), [fnp.asarray(x)], order=2, modes=("fwd", "rev"))
    with pytest.raises(ValueError, match="return the vector"):
        fnp.pad(x, 1, lambda v, w, a, k: v[:1])


def test_pad_gradients_of_statistics(x64):
    x = fnp.asarray(np.random.default_rng(3).standard_normal((3, 4)))
    for mode in ("mean", "median", "linear_ramp", "symmetric"):
        check_grads(lambda x: fnp.pad(x, ((2, 1), (0, 2)), mode), [x], order=2, modes=("fwd", "rev"))
    check_grads(lambda c: fnp.pad(x, 1, constant_values=c), [fnp.asarray(np.array([[1.0, 2.0], [3.0, 4.0]]))],
                order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("call,err,match", [
    (lambda: fnp.pad(fnp.ones(3), 1, "bogus"), NotImplementedError, "unimplemented padding mode"),
    (lambda: fnp.pad(fnp.ones(3), 1, "edge", constant_values=1), ValueError, "unsupported keyword"),
    (lambda: fnp.pad(fnp.ones(0), 1, "edge"), ValueError, "empty axis"),
    (lambda: fnp.pad(fnp.ones(3), 1, "reflect", reflect_type="sideways"), ValueError, "reflect_type"),
    (lambda: fnp.pad(fnp.ones(3), 1, "mean", stat_length=0), ValueError, "stat_length"),
    (lambda: fnp.pad(fnp.ones(3), 1.5), TypeError, "ints"),
    (lambda: fnp.pad(fnp.ones((2, 2)), ((1, 2, 3),)), ValueError, "pair per axis"),
    (lambda: fnp.pad(fnp.ones((2, 2)), 1, constant_values=(1, 2, 3)), ValueError, "constant_values"),
], ids=["mode", "keyword", "empty", "reflect_type", "stat_length", "float width", "bad width", "bad values"])
def test_pad_errors(call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_pad_empty_mode_and_zero_widths():
    close(fnp.pad(np.arange(3.0), 2, "empty"), [0, 0, 0, 1, 2, 0, 0])     # JAX's 'empty': zeros
    close(fnp.pad(np.arange(3.0), 0, "reflect"), np.arange(3.0))
    close(fnp.pad(np.ones((0, 2)), ((0, 0), (1, 1)), "edge"), np.pad(np.ones((0, 2)), ((0, 0), (1, 1)), "edge"))


def test_index_results_use_the_default_int(x64):
    x = fnp.array([0.0, 1.0, 2.0, 1.0])
    outs = [fnp.nonzero(x)[0], fnp.argwhere(x), fnp.flatnonzero(x, size=5), fnp.tril_indices(3)[0],
            fnp.diag_indices(2)[0], fnp.indices((2,)), fnp.mask_indices(3, fnp.triu)[0],
            *fnp.unique(x, True, True, True)[1:], fnp.intersect1d(x, x, return_indices=True)[1],
            fnp.ravel_multi_index((np.array([1]),), (3,))]
    assert {o.dtype for o in outs} == {np.dtype("int64")}


@pytest.mark.parametrize("mode", ["constant", "empty", "edge", "reflect", "mean"])
def test_pad_of_a_0d_array_is_the_array(mode):
    close(fnp.pad(fnp.asarray(1.5), 2, mode), np.pad(np.array(1.5), 2, mode))


@pytest.mark.parametrize("method", ["compare_all", "sort", "binary_search", "auto"])
def test_isin_methods_agree_with_numpy(method):
    rng = np.random.default_rng(4)
    x = rng.integers(-4, 5, (3, 5)).astype(np.float64)
    t = rng.integers(-3, 3, 6).astype(np.float64)
    x[0, 0], t[0] = np.nan, np.nan
    for invert in (False, True):
        close(fnp.isin(x, t, invert=invert, method=method), np.isin(x, t, invert=invert))
    close(fg.jit(lambda x, t: fnp.isin(x, t, method=method))(fnp.asarray(x), fnp.asarray(t)), np.isin(x, t))
    big = rng.integers(0, 1000, 600)     # 600 x 200 pairs: 'auto' sorts
    close(fnp.isin(big, big[::3] + 1, method=method), np.isin(big, big[::3] + 1))
    got = fg.vmap(lambda x: fnp.isin(x, t, method=method))(fnp.asarray(x))
    close(got, np.isin(x, t))


@pytest.mark.parametrize("mode,kw", [("reflect", {}), ("reflect", {"reflect_type": "odd"}), ("symmetric", {}),
                                     ("symmetric", {"reflect_type": "odd"}), ("wrap", {}), ("edge", {}),
                                     ("linear_ramp", {"end_values": (2.5, -1.0)}), ("mean", {}), ("median", {})])
def test_pad_widths_around_the_axis_length(mode, kw, x64):
    # one reflection and repeated reflections, axes of length 1 and 2
    for n in (1, 2, 3):
        x = np.arange(1.0, n + 1) ** 2
        for lo, hi in [(0, 1), (1, 0), (n - 1, n), (n, n + 1), (2 * n + 1, 3 * n)]:
            close(fnp.pad(x, (lo, hi), mode, **kw), np.pad(x, (lo, hi), mode, **kw), rtol=1e-12, atol=1e-12)


def test_pad_of_a_long_axis_stays_cheap():
    x = np.linspace(0.0, 1.0, 50000)
    for mode, kw in [("reflect", {"reflect_type": "odd"}), ("linear_ramp", {"end_values": 3.0}), ("wrap", {})]:
        close(fnp.pad(x, (3, 4), mode, **kw), np.pad(x, (3, 4), mode, **kw), rtol=1e-6, atol=1e-6)


_METHOD_CALLS = [
    ("sort", (), {}), ("sort", (), {"axis": 0}), ("argsort", (), {"axis": 0}), ("all", (), {}),
    ("any", (), {"axis": 1}), ("cumprod", (), {"axis": 1}), ("diagonal", (), {}), ("diagonal", (1,), {}),
    ("trace", (), {}), ("ptp", (), {"axis": 0}), ("round", (1,), {}), ("copy", (), {}),
    ("argpartition", (1,), {"axis": 1}), ("searchsorted", (0.5,), {}), ("choose", ([[10, 20], [30, 40]],), {}),
    ("compress", ([True, False],), {"axis": 0}),
]


@pytest.mark.parametrize("name,args,kw", _METHOD_CALLS, ids=[f"{c[0]}-{i}" for i, c in enumerate(_METHOD_CALLS)])
def test_array_methods_match_numpy(name, args, kw):
    base = np.array([[0.25, 1.0], [0.75, -2.0]])
    if name == "choose":
        base = np.array([[0, 1], [1, 0]])
    if name == "searchsorted":
        base = np.array([-1.0, 0.0, 2.0])
    x = fnp.asarray(base)
    got = getattr(x, name)(*args, **kw)
    if name == "argpartition":     # JAX's layout differs from numpy's: compare the partitioned values
        got, want = np.take_along_axis(base, np.asarray(got), 1)[:, 1], np.sort(base, axis=1)[:, 1]
    elif name in ("sort", "ptp"):   # numpy's sort method works in place; ndarray.ptp is gone in numpy 2
        want = getattr(np, name)(base, *args, **kw)
    else:
        want = getattr(base, name)(*args, **kw)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    if name != "compress":   # the output size of compress depends on the values
        jitted = fg.jit(lambda a: getattr(a, name)(*args, **kw))(x)
        np.testing.assert_allclose(np.asarray(jitted), np.asarray(getattr(x, name)(*args, **kw)), rtol=1e-6)


def test_array_byte_properties_and_matrix_transpose():
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = fnp.asarray(base)
    assert (x.itemsize, x.nbytes, x.tobytes()) == (base.itemsize, base.nbytes, base.tobytes())
    np.testing.assert_array_equal(np.asarray(x.mT), np.swapaxes(base, -1, -2))


def test_from_dlpack_copies_in_a_numpy_buffer():
    base = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    x = fnp.from_dlpack(base)
    np.testing.assert_array_equal(np.asarray(x), base)
    assert x.dtype == np.float32 and fnp.from_dlpack(base, device="cpu").shape == (2, 3)
    y = fnp.from_dlpack(base, copy=True)
    base[0, 0] = 7.0                  # a copy does not see later writes to the source
    assert float(y[0, 0]) == 0.0
