"""Op-table rows for funcgrad.numpy's arrays functions (loaded by op_table.py; see its Op record):
stacking and splitting, rolling and rotating, diagonals, index helpers, value-dependent selections
(nonzero, unique, set operations; eager rows have ``transforms=False``, their ``size=`` forms run under
jit and vmap too), bit packing and the pad modes.  Keyword forms, errors and special cases are in
tests/test_numpy_arrays.py."""
from __future__ import annotations

import numpy as np

import funcgrad.numpy as fnp
from op_table import Op, boolean, ints, normal, small_ints_as_float


def _idx3(rng, shape):          # choices index: 0, 1 or 2
    return rng.integers(0, 3, shape).astype(np.int32)


def _row_idx(rng, shape):
    return rng.integers(0, 3, shape).astype(np.int32)


def _col_idx(rng, shape):
    return rng.integers(0, 4, shape).astype(np.int32)


def _flat_idx(rng, shape):
    return rng.integers(0, 12, shape).astype(np.int32)


def _shift(rng, shape):
    return rng.integers(-5, 6, shape).astype(np.int32)


def _bytes(rng, shape):
    return rng.integers(0, 256, shape).astype(np.uint8)


def _padded_zeros(rng, shape):  # zeros at both ends, a zero inside
    x = rng.integers(1, 4, shape).astype(np.float64)
    x.reshape(-1)[:2] = 0
    x.reshape(-1)[-1] = 0
    x.reshape(-1)[x.size // 2] = 0
    return x


def _with_copy(fn):
    def ref(x, *a):
        y = np.array(x, copy=True)
        fn(y, *a)
        return y
    return ref


def _sized(ref_values, size, fill):
    """A numpy reference for a ``size=``/``fill_value=`` variant: the first ``size`` results, padded with fill."""
    def ref(*a):
        v = np.asarray(ref_values(*a))
        out = np.full((size,) + v.shape[1:], fill, dtype=v.dtype)
        out[:min(size, v.shape[0])] = v[:size]
        return out
    return ref


_PUT_IDX = np.array([0, 5, -1, 5])
_PUT_ALONG = np.array([[0, 3], [2, 1], [1, 0]])


def _np_unique_all(x):
    r = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    return r[0], r[1], r[2].reshape(x.shape), r[3]


def _unique_cols_ref(x):
    u = np.unique(x, axis=1)[:, :4]
    return np.concatenate([u, np.zeros((x.shape[0], 4 - u.shape[1]))], axis=1)


def _rows():
    I32 = dict(diff=False, out="int")   # index results: the default int, as JAX
    return [
        Op("append", fnp.append, np.append, [((2, 3), (4,))]),
        Op("append[axis=1]", lambda x, y: fnp.append(x, y, axis=1), lambda x, y: np.append(x, y, axis=1),
           [((2, 3), (2, 2))]),
        Op("array_split", lambda x: fnp.array_split(x, 3, axis=1), lambda x: np.array_split(x, 3, axis=1),
           [((2, 5),)]),
        Op("atleast_1d", fnp.atleast_1d, np.atleast_1d, [((),), ((3,),)]),
        Op("atleast_1d[two]", lambda x, y: fnp.atleast_1d(x, y), lambda x, y: np.atleast_1d(x, y), [((), (2,))]),
        Op("atleast_2d", fnp.atleast_2d, np.atleast_2d, [((),), ((3,),)]),
        Op("atleast_3d", fnp.atleast_3d, np.atleast_3d, [((3,),), ((2, 3),)]),
        Op("block", lambda a, b, c, d: fnp.block([[a, b], [c, d]]), lambda a, b, c, d: np.block([[a, b], [c, d]]),
           [((2, 2), (2, 3), (1, 2), (1, 3))]),
        Op("block[1-d]", lambda a, b: fnp.block([a, b]), lambda a, b: np.block([a, b]), [((2,), (3,))]),
        Op("broadcast_shapes", lambda: fnp.array(fnp.broadcast_shapes((3, 1), (4,), ())),
           lambda: np.array(np.broadcast_shapes((3, 1), (4,), ())), [()], diff=False, out="int"),
        Op("choose", lambda a, x, y, z: fnp.choose(a, [x, y, z]), lambda a, x, y, z: np.choose(a, [x, y, z]),
           [((3, 4), (3, 4), (4,), (3, 1))], (_idx3, normal, normal, normal)),
        Op("choose[clip]", lambda a, x, y: fnp.choose(a, [x, y], mode="clip"),
           lambda a, x, y: np.choose(a, [x, y], mode="clip"), [((5,), (5,), (5,))], (_idx3, normal, normal)),
        Op("column_stack", lambda x, y: fnp.column_stack([x, y]), lambda x, y: np.column_stack([x, y]),
           [((3,), (3, 2))]),
        Op("compress", lambda c, x: fnp.compress(c, x, axis=1), lambda c, x: np.compress(c, x, axis=1),
           [((4,), (2, 4))], (boolean, normal), transforms=False),
        Op("compress[size]", lambda c, x: fnp.compress(c, x, size=3, fill_value=-1.0),
           _sized(lambda c, x: np.compress(c, x), 3, -1.0), [((5,), (5,))], (boolean, normal)),
        Op("concat", lambda x, y: fnp.concat([x, y]), lambda x, y: np.concatenate([x, y]),
           [((2, 3), (1, 3))]),
        Op("delete", lambda x: fnp.delete(x, [0, 2], axis=1), lambda x: np.delete(x, [0, 2], axis=1),
           [((3, 4),)]),
        Op("delete[flat int]", lambda x: fnp.delete(x, -2), lambda x: np.delete(x, -2), [((2, 3),)]),
        Op("delete[slice]", lambda x: fnp.delete(x, slice(None, None, 2), axis=0),
           lambda x: np.delete(x, slice(None, None, 2), axis=0), [((3, 2),)]),
        Op("diag", fnp.diag, np.diag, [((3,),), ((3, 4),)]),
        Op("diag[k=-1]", lambda x: fnp.diag(x, -1), lambda x: np.diag(x, -1), [((3,),)]),
        Op("diag[k=2]", lambda x: fnp.diag(x, 2), lambda x: np.diag(x, 2), [((3, 4),)]),
        Op("diagflat", lambda x: fnp.diagflat(x, 1), lambda x: np.diagflat(x, 1), [((2, 2),)]),
        Op("diag_indices", lambda: fnp.diag_indices(3), lambda: np.diag_indices(3), [()], **I32),
        Op("diag_indices_from", fnp.diag_indices_from, np.diag_indices_from, [((3, 3),)], transforms=False, **I32),
        Op("diagonal", fnp.diagonal, np.diagonal, [((3, 4),), ((2, 3, 4),)]),
        Op("diagonal[offset,axes]", lambda x: fnp.diagonal(x, -1, 2, 0), lambda x: np.diagonal(x, -1, 2, 0),
           [((2, 3, 4),)]),
        Op("dsplit", lambda x: fnp.dsplit(x, 2), lambda x: np.dsplit(x, 2), [((2, 1, 4),)]),
        Op("dstack", lambda x, y: fnp.dstack([x, y]), lambda x, y: np.dstack([x, y]), [((2, 3), (2, 3))]),
        Op("extract", fnp.extract, np.extract, [((3, 4), (3, 4))], (boolean, normal), transforms=False),
        Op("extract[size]", lambda c, x: fnp.extract(c, x, size=4),
           _sized(lambda c, x: np.extract(c, x), 4, 0.0), [((2, 3), (2, 3))], (boolean, normal)),
        Op("fill_diagonal", lambda x, v: fnp.fill_diagonal(x, v, inplace=False), _with_copy(np.fill_diagonal),
           [((4, 3), (2,)), ((2, 2, 2), ())]),
        Op("fill_diagonal[wrap]", lambda x, v: fnp.fill_diagonal(x, v, wrap=True, inplace=False),
           _with_copy(lambda y, v: np.fill_diagonal(y, v, wrap=True)), [((7, 3), (2,))]),
        Op("flatnonzero", fnp.flatnonzero, np.flatnonzero, [((3, 4),)], small_ints_as_float, transforms=False,
           **I32),
        Op("flatnonzero[size]", lambda x: fnp.flatnonzero(x, size=5, fill_value=-1),
           _sized(np.flatnonzero, 5, -1), [((2, 3),)], small_ints_as_float, **I32),
        Op("fliplr", fnp.fliplr, np.fliplr, [((2, 3),)]),
        Op("flipud", fnp.flipud, np.flipud, [((2, 3),)]),
        Op("hsplit", lambda x: fnp.hsplit(x, 2), lambda x: np.hsplit(x, 2), [((2, 4),)]),
        Op("hstack", lambda x, y: fnp.hstack([x, y]), lambda x, y: np.hstack([x, y]), [((2, 3), (2, 1)),
                                                                                      ((), ())]),
        Op("indices", lambda: fnp.indices((2, 3)), lambda: np.indices((2, 3)), [()], diff=False, out="int"),
        Op("indices[sparse]", lambda: fnp.indices((2, 3), sparse=True), lambda: np.indices((2, 3), sparse=True),
           [()], diff=False, out="int"),
        Op("insert", lambda x: fnp.insert(x, 1, 9.0), lambda x: np.insert(x, 1, 9.0), [((2, 3),)]),
        Op("insert[column]", lambda x, v: fnp.insert(x, 1, v, axis=1), lambda x, v: np.insert(x, 1, v, axis=1),
           [((3, 4), (3,))]),
        Op("insert[indices]", lambda x, v: fnp.insert(x, [3, 1, 1, 0], v, axis=1),
           lambda x, v: np.insert(x, [3, 1, 1, 0], v, axis=1), [((2, 3), (2, 4))]),
        Op("insert[slice]", lambda x, v: fnp.insert(x, slice(0, 2), v, axis=0),
           lambda x, v: np.insert(x, slice(0, 2), v, axis=0), [((3, 2), (2,))]),
        Op("intersect1d", fnp.intersect1d, np.intersect1d, [((6,), (5,)), ((2, 3), (4,))], small_ints_as_float,
           diff=False, transforms=False),
        Op("intersect1d[return_indices]", lambda x, y: fnp.intersect1d(x, y, return_indices=True),
           lambda x, y: np.intersect1d(x, y, return_indices=True), [((6,), (5,))], small_ints_as_float,
           diff=False, transforms=False, out="none"),
        Op("intersect1d[size]", lambda x, y: fnp.intersect1d(x, y, size=6, fill_value=9.0),
           _sized(np.intersect1d, 6, 9.0), [((6,), (5,))], small_ints_as_float, diff=False),
        Op("isin", fnp.isin, np.isin, [((3, 4), (5,)), ((3,), (0,))], small_ints_as_float,
           diff=False, out="bool"),
        Op("isin[invert]", lambda x, y: fnp.isin(x, y, invert=True), lambda x, y: np.isin(x, y, invert=True),
           [((6,), (3,))], small_ints_as_float, diff=False, out="bool"),
        Op("ix_", lambda: fnp.ix_(fnp.array([0, 2]), fnp.array([True, False, True])),
           lambda: np.ix_(np.array([0, 2]), np.array([True, False, True])), [()], diff=False, out="none"),
        Op("kron", fnp.kron, np.kron, [((2, 3), (2, 2)), ((2, 1, 2), (3, 2))]),
        Op("mask_indices", lambda: fnp.mask_indices(3, fnp.triu, 1), lambda: np.mask_indices(3, np.triu, 1), [()],
           **I32),
        Op("matrix_transpose", fnp.matrix_transpose, lambda x: np.swapaxes(x, -1, -2), [((2, 3),), ((2, 3, 4),)]),
        Op("meshgrid", lambda x, y: fnp.meshgrid(x, y), lambda x, y: np.meshgrid(x, y), [((3,), (2,))]),
        Op("meshgrid[ij,3]", lambda x, y, z: fnp.meshgrid(x, y, z, indexing="ij"),
           lambda x, y, z: np.meshgrid(x, y, z, indexing="ij"), [((3,), (2,), (2,))]),
        Op("meshgrid[sparse]", lambda x, y: fnp.meshgrid(x, y, sparse=True),
           lambda x, y: np.meshgrid(x, y, sparse=True), [((3,), (2,))]),
        Op("nonzero", fnp.nonzero, np.nonzero, [((3, 4),), ((5,),)], small_ints_as_float, transforms=False, **I32),
        Op("nonzero[size]", lambda x: fnp.nonzero(x, size=4, fill_value=-1),
           lambda x: tuple(_sized(lambda v: i, 4, -1)(x) for i in np.nonzero(x)), [((2, 3),)],
           small_ints_as_float, **I32),
        Op("argwhere", fnp.argwhere, np.argwhere, [((3, 4),), ((5,),), ((),)], small_ints_as_float,
           transforms=False, **I32),
        Op("argwhere[size]", lambda x: fnp.argwhere(x, size=3), _sized(np.argwhere, 3, 0), [((2, 3),)],
           small_ints_as_float, **I32),
        Op("permute_dims", lambda x: fnp.permute_dims(x, (2, 0, 1)), lambda x: np.permute_dims(x, (2, 0, 1)),
           [((2, 3, 4),)]),
        Op("piecewise", lambda x: fnp.piecewise(x, [x < -0.5, x > 0.5], [lambda v: v ** 2, lambda v: -v, 0.25]),
           lambda x: np.piecewise(x, [x < -0.5, x > 0.5], [lambda v: v ** 2, lambda v: -v, 0.25]),
           [((3, 4),), ((),)]),
        Op("place", lambda x, m, v: fnp.place(x, m, v, inplace=False), _with_copy(np.place),
           [((3, 4), (3, 4), (3,)), ((5,), (5,), (2,))], (normal, boolean, normal)),
        Op("put", lambda x, v: fnp.put(x, _PUT_IDX, v, inplace=False),
           _with_copy(lambda y, v: np.put(y, _PUT_IDX, v)), [((3, 4), (4,)), ((2, 3), (3,))]),
        Op("put_along_axis", lambda x, v: fnp.put_along_axis(x, _PUT_ALONG, v, 1, inplace=False),
           _with_copy(lambda y, v: np.put_along_axis(y, _PUT_ALONG, v, 1)), [((3, 4), (3, 2)), ((3, 4), ())]),
        Op("ravel_multi_index", lambda i, j: fnp.ravel_multi_index((i, j), (3, 4)),
           lambda i, j: np.ravel_multi_index((i, j), (3, 4)), [((2, 2), (2, 2))],
           (_row_idx, _col_idx), diff=False, out="int"),
        Op("ravel_multi_index[F]", lambda i, j: fnp.ravel_multi_index((i, j), (3, 4), order="F"),
           lambda i, j: np.ravel_multi_index((i, j), (3, 4), order="F"), [((5,), (5,))], (_row_idx, _col_idx),
           diff=False, out="int"),
        Op("resize", lambda x: fnp.resize(x, (4, 4)), lambda x: np.resize(x, (4, 4)), [((2, 3),)]),
        Op("roll", lambda x: fnp.roll(x, 2), lambda x: np.roll(x, 2), [((3, 4),)]),
        Op("roll[axes]", lambda x: fnp.roll(x, (1, -3), (0, 1)), lambda x: np.roll(x, (1, -3), (0, 1)),
           [((3, 4),)]),
        Op("roll[traced shift]", lambda x, s: fnp.roll(x, s, axis=1), lambda x, s: np.roll(x, int(s), axis=1),
           [((3, 4), ())], (normal, _shift)),
        Op("rollaxis", lambda x: fnp.rollaxis(x, 2, 1), lambda x: np.rollaxis(x, 2, 1), [((2, 3, 4),)]),
        Op("rot90", fnp.rot90, np.rot90, [((2, 3),)]),
        Op("rot90[k=2]", lambda x: fnp.rot90(x, 2), lambda x: np.rot90(x, 2), [((2, 3),)]),
        Op("rot90[k=-1,axes]", lambda x: fnp.rot90(x, -1, (2, 0)), lambda x: np.rot90(x, -1, (2, 0)),
           [((2, 3, 4),)]),
        Op("select", lambda c1, c2, x, y: fnp.select([c1, c2], [x, y], 0.5),
           lambda c1, c2, x, y: np.select([c1, c2], [x, y], 0.5), [((3, 4), (3, 4), (3, 4), (4,))],
           (boolean, boolean, normal, normal)),
        Op("tril_indices", lambda: fnp.tril_indices(3, 1, 4), lambda: np.tril_indices(3, 1, 4), [()], **I32),
        Op("triu_indices", lambda: fnp.triu_indices(3, -1), lambda: np.triu_indices(3, -1), [()], **I32),
        Op("tril_indices_from", fnp.tril_indices_from, np.tril_indices_from, [((3, 4),)], transforms=False, **I32),
        Op("triu_indices_from", lambda x: fnp.triu_indices_from(x, 1), lambda x: np.triu_indices_from(x, 1),
           [((3, 4),)], transforms=False, **I32),
        Op("trim_zeros", fnp.trim_zeros, np.trim_zeros, [((7,),)], _padded_zeros, diff=False, transforms=False),
        Op("trim_zeros[b]", lambda x: fnp.trim_zeros(x, "b"), lambda x: np.trim_zeros(x, "b"), [((7,),)],
           _padded_zeros, diff=False, transforms=False),
        Op("unravel_index", lambda i: fnp.unravel_index(i, (3, 4)), lambda i: np.unravel_index(i, (3, 4)),
           [((5,),)], _flat_idx, diff=False, out="same"),
        Op("unstack", fnp.unstack, lambda x: tuple(x), [((3, 2),)]),
        Op("unstack[axis=1]", lambda x: fnp.unstack(x, axis=1), lambda x: tuple(np.moveaxis(x, 1, 0)),
           [((2, 3, 2),)]),
        Op("vsplit", lambda x: fnp.vsplit(x, [1]), lambda x: np.vsplit(x, [1]), [((3, 2),)]),
        Op("vstack", lambda x, y: fnp.vstack([x, y]), lambda x, y: np.vstack([x, y]), [((3,), (2, 3))]),
        Op("trace", fnp.trace, np.trace, [((3, 4),)]),
        Op("trace[offset,axes]", lambda x: fnp.trace(x, 1, 2, 1), lambda x: np.trace(x, 1, 2, 1), [((2, 3, 4),)]),
        Op("trace[int]", fnp.trace, np.trace, [((3, 3),)], ints, diff=False, out="int"),
        Op("unique", fnp.unique, np.unique, [((3, 4),), ((0,),)], small_ints_as_float, diff=False,
           transforms=False),
        Op("unique[all outputs]", lambda x: fnp.unique(x, True, True, True), _np_unique_all, [((2, 5),)],
           small_ints_as_float, diff=False, transforms=False, out="none"),
        Op("unique[values grad]", lambda x: fnp.unique(x), np.unique, [((2, 3),)], transforms=False),
        Op("unique[size]", lambda x: fnp.unique(x, size=7, fill_value=-9.0), _sized(np.unique, 7, -9.0),
           [((3, 4),)], small_ints_as_float, diff=False),
        Op("unique[axis=1,size]", lambda x: fnp.unique(x, axis=1, size=4, fill_value=0.0), _unique_cols_ref,
           [((2, 5),)], small_ints_as_float, diff=False),
        Op("unique_all", fnp.unique_all, lambda x: tuple(np.unique_all(x)), [((2, 5),)], small_ints_as_float,
           diff=False, transforms=False, out="none"),
        Op("unique_counts", fnp.unique_counts, lambda x: tuple(np.unique_counts(x)), [((6,),)],
           small_ints_as_float, diff=False, transforms=False, out="none"),
        Op("unique_inverse", fnp.unique_inverse, lambda x: tuple(np.unique_inverse(x)), [((2, 3),)],
           small_ints_as_float, diff=False, transforms=False, out="none"),
        Op("unique_values", fnp.unique_values, np.unique_values, [((6,),)], small_ints_as_float, diff=False,
           transforms=False),
        Op("union1d", fnp.union1d, np.union1d, [((4,), (2, 2))], small_ints_as_float, diff=False,
           transforms=False),
        Op("setdiff1d", fnp.setdiff1d, np.setdiff1d, [((6,), (3,))], small_ints_as_float, diff=False,
           transforms=False),
        Op("setdiff1d[size]", lambda x, y: fnp.setdiff1d(x, y, size=5), _sized(np.setdiff1d, 5, 0.0),
           [((6,), (3,))], small_ints_as_float, diff=False),
        Op("setxor1d", fnp.setxor1d, np.setxor1d, [((6,), (4,))], small_ints_as_float, diff=False,
           transforms=False),
        Op("packbits", fnp.packbits, np.packbits, [((2, 5),)], boolean, diff=False, out="none"),
        Op("packbits[axis,little]", lambda x: fnp.packbits(x, axis=1, bitorder="little"),
           lambda x: np.packbits(x, axis=1, bitorder="little"), [((2, 10),)], boolean, diff=False, out="none"),
        Op("unpackbits", fnp.unpackbits, np.unpackbits, [((2, 2),)], _bytes, diff=False, out="same"),
        Op("unpackbits[axis,count]", lambda x: fnp.unpackbits(x, axis=0, count=-3, bitorder="little"),
           lambda x: np.unpackbits(x, axis=0, count=-3, bitorder="little"), [((2, 2),)], _bytes, diff=False,
           out="same"),
        Op("where[condition only]", lambda x: fnp.where(x), np.where, [((2, 3),)], small_ints_as_float,
           transforms=False, **I32),
        Op("where[condition only,size]", lambda x: fnp.where(x, size=4),
           lambda x: tuple(_sized(lambda v: i, 4, 0)(x) for i in np.where(x)), [((2, 3),)], small_ints_as_float,
           **I32),
    ] + _pad_rows()


def _pad_rows():
    def row(name, pw, mode, shapes=((3, 4),), **kw):
        return Op(f"pad[{name}]", lambda x: fnp.pad(x, pw, mode, **kw), lambda x: np.pad(x, pw, mode, **kw),
                  [(s,) for s in shapes])
    wide = ((3, 2), (1, 5))
    return [
        row("constant per axis", ((1, 2), (0, 1)), "constant", constant_values=((1.5, -2.0), (3.0, 4.0))),
        row("edge", wide, "edge"),
        row("linear_ramp", wide, "linear_ramp", end_values=((1.0, -2.0), (0.5, 4.0))),
        row("maximum", wide, "maximum", stat_length=((2, 1), (3, 2))),
        row("minimum", wide, "minimum"),
        row("mean", wide, "mean", stat_length=2),
        row("median", wide, "median", shapes=((2, 3),)),
        row("reflect", ((5, 2), (4, 7)), "reflect", shapes=((3, 4),)),
        row("reflect odd", ((5, 2), (4, 7)), "reflect", reflect_type="odd"),
        row("symmetric", ((5, 2), (4, 7)), "symmetric"),
        row("symmetric odd", ((2, 5), (1, 6)), "symmetric", reflect_type="odd"),
        row("wrap", ((5, 2), (4, 9)), "wrap"),
        Op("pad[constant traced value]", lambda x, c: fnp.pad(x, ((1, 0), (2, 1)), constant_values=c),
           lambda x, c: np.pad(x, ((1, 0), (2, 1)), constant_values=c), [((2, 3), ())]),
        Op("pad[linear_ramp traced end]", lambda x, c: fnp.pad(x, 2, "linear_ramp", end_values=c),
           lambda x, c: np.pad(x, 2, "linear_ramp", end_values=c), [((3,), ())]),
    ]


OPS = _rows()

PUBLIC = ("append array_split atleast_1d atleast_2d atleast_3d block broadcast_shapes choose column_stack compress "
          "concat delete diag diag_indices diag_indices_from diagflat diagonal dsplit dstack extract fill_diagonal "
          "flatnonzero fliplr flipud hsplit hstack indices insert ix_ kron mask_indices matrix_transpose meshgrid "
          "nonzero argwhere permute_dims piecewise place put put_along_axis ravel_multi_index resize roll rollaxis "
          "rot90 select tril_indices tril_indices_from triu_indices triu_indices_from trim_zeros unravel_index "
          "unstack vsplit vstack trace unique unique_all unique_counts unique_inverse unique_values union1d "
          "intersect1d setdiff1d setxor1d isin packbits unpackbits").split()
