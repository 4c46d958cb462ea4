"""The op table driving tests/test_ops.py: one record per public ``funcgrad.numpy`` function.

Each record names the funcgrad function, a numpy reference, argument shapes
(broadcasting, 0-d and zero-size where numpy allows them), a generator for
each argument's values (domain restrictions such as ``x > 0`` for ``log``)
and whether the function is differentiable.  Adding a primitive = one row here.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

import funcgrad.numpy as fnp

# ----------------------------------------------------------------------------
# Value generators (float64 numpy; cast to the tested dtype by the checkers)
# ----------------------------------------------------------------------------


def normal(rng, shape):
    return rng.standard_normal(shape)


def positive(rng, shape):
    return rng.uniform(0.5, 2.0, shape)


def unit(rng, shape):          # |x| < 1, away from the singular endpoints
    return rng.uniform(-0.9, 0.9, shape)


def nonzero(rng, shape):       # |x| in [0.5, 2], either sign
    return rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


def small_ints_as_float(rng, shape):   # many ties, for comparisons
    return rng.integers(-2, 3, shape).astype(np.float64)


def halves(rng, shape):        # round-half-to-even cases
    return rng.integers(-6, 7, shape) * 0.5


def with_specials(rng, shape):
    x = rng.standard_normal(shape)
    flat = x.reshape(-1)
    specials = [np.inf, -np.inf, np.nan]
    for i in range(min(flat.size, 3)):
        flat[(i * 5) % flat.size] = specials[i]
    return x


def boolean(rng, shape):
    return rng.random(shape) > 0.5


def ints(rng, shape):
    return rng.integers(-7, 8, shape).astype(np.int32)


def nonzero_ints(rng, shape):
    return (rng.integers(1, 4, shape) * rng.choice([-1, 1], shape)).astype(np.int32)


# ----------------------------------------------------------------------------
# The table
# ----------------------------------------------------------------------------


@dataclasses.dataclass
class Op:
    name: str
    fn: Callable                  # funcgrad
    ref: Callable                 # numpy (applied to float64 / int64 / bool numpy arrays)
    shapes: Sequence[tuple]       # one tuple of argument shapes per case
    gens: Any = normal            # one generator, or one per argument
    diff: bool = True
    out: str = "float"            # "float": the input float dtype; "bool"; "int" (default int); "same"; "none"
    rtol: float = 1e-5            # float32 forward tolerance (float64 uses 1e-12 unless raised here)
    atol: float = 1e-5
    atol64: float = 1e-12
    grad_tol: float | None = None
    transforms: bool = True       # False: shape depends on values (boolean mask of an argument): no vmap/jit
    area: str = "core"            # the op_rows_<area>.py file a row comes from ("core": this file)

    def gen_list(self, nargs: int) -> list:
        return list(self.gens) if isinstance(self.gens, (list, tuple)) else [self.gens] * nargs


UNARY = [((3, 4),), ((),), ((0,),), ((2, 1, 3),)]
BINARY = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 4)), ((), (3,)), ((0, 3), (3,))]
RED = [((2, 3, 4),)]


def unary(name, gen=normal, ref=None, **kw):
    return Op(name, getattr(fnp, name), ref or getattr(np, name), UNARY, gen, **kw)


def binary(name, gens=normal, ref=None, **kw):
    return Op(name, getattr(fnp, name), ref or getattr(np, name), BINARY, gens, **kw)


def _np_logsumexp(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis if axis is not None else tuple(range(x.ndim)))


def _reductions():
    rows = []
    axes = [None, 0, 1, -1, (0, 2), (-1, 0)]
    for fname in ["sum", "mean", "max", "min", "prod", "var", "std", "logsumexp"]:
        ref = _np_logsumexp if fname == "logsumexp" else getattr(np, fname)
        for axis in axes:
            for keepdims in (False, True):
                rows.append(Op(f"{fname}[axis={axis},keepdims={keepdims}]",
                               (lambda f, a, k: lambda x: f(x, axis=a, keepdims=k))(getattr(fnp, fname), axis, keepdims),
                               (lambda f, a, k: lambda x: f(x, axis=a, keepdims=k))(ref, axis, keepdims),
                               RED, normal, atol=2e-5, rtol=2e-5))
    # 0-d and zero-size inputs where numpy allows them
    rows += [
        Op("sum[0-d]", lambda x: fnp.sum(x), np.sum, [((),)]),
        Op("sum[zero-size,axis=0]", lambda x: fnp.sum(x, axis=0), lambda x: np.sum(x, axis=0), [((0, 3),)]),
        Op("prod[zero-size,axis=0]", lambda x: fnp.prod(x, axis=0), lambda x: np.prod(x, axis=0), [((0, 3),)]),
        Op("max[0-d]", lambda x: fnp.max(x), np.max, [((),)]),
        Op("sum[int]", lambda x: fnp.sum(x, axis=1), lambda x: np.sum(x, axis=1), [((3, 4),)], ints,
           diff=False, out="int"),
        Op("sum[bool]", lambda x: fnp.sum(x), lambda x: np.sum(x), [((3, 4),)], boolean, diff=False, out="int"),
        Op("mean[int]", lambda x: fnp.mean(x, axis=0), lambda x: np.mean(x, axis=0), [((3, 4),)], ints,
           diff=False, out="float"),
        Op("max[int]", lambda x: fnp.max(x, axis=0), lambda x: np.max(x, axis=0), [((3, 4),)], ints,
           diff=False, out="same"),
    ]
    for fname in ["argmax", "argmin"]:
        for axis in [None, 0, 1, -1]:
            for keepdims in (False, True):
                rows.append(Op(f"{fname}[axis={axis},keepdims={keepdims}]",
                               (lambda f, a, k: lambda x: f(x, axis=a, keepdims=k))(getattr(fnp, fname), axis, keepdims),
                               (lambda f, a, k: lambda x: f(x, axis=a, keepdims=k))(getattr(np, fname), axis, keepdims),
                               [((3, 4),)], normal, diff=False, out="int"))
    for axis in [None, 0, 1, -1]:
        rows.append(Op(f"cumsum[axis={axis}]", (lambda a: lambda x: fnp.cumsum(x, axis=a))(axis),
                       (lambda a: lambda x: np.cumsum(x, axis=a))(axis), [((3, 4),), ((2, 3, 2),)]))
    rows.append(Op("cumsum[0-d]", lambda x: fnp.cumsum(x), np.cumsum, [((),)]))
    return rows


def _creation():
    return [
        Op("array[list]", lambda: fnp.array([[1.0, 2.0], [3.0, 4.5]]), lambda: np.array([[1.0, 2.0], [3.0, 4.5]]),
           [()], diff=False),
        Op("array[ndarray]", lambda x: fnp.array(x), lambda x: np.array(x), UNARY),
        Op("array[int list]", lambda: fnp.array([1, 2, 3]), lambda: np.array([1, 2, 3]), [()], diff=False, out="int"),
        Op("array[dtype]", lambda x: fnp.array(x, dtype=fnp.int32), lambda x: np.array(x, dtype=np.int32),
           [((3,),)], ints, diff=False, out="same"),
        Op("asarray", lambda x: fnp.asarray(x), np.asarray, UNARY),
        Op("zeros", lambda: fnp.zeros((2, 3)), lambda: np.zeros((2, 3)), [()], diff=False),
        Op("zeros[int shape]", lambda: fnp.zeros(4), lambda: np.zeros(4), [()], diff=False),
        Op("zeros[0-d]", lambda: fnp.zeros(()), lambda: np.zeros(()), [()], diff=False),
        Op("zeros[zero-size]", lambda: fnp.zeros((0, 2)), lambda: np.zeros((0, 2)), [()], diff=False),
        Op("ones", lambda: fnp.ones((3, 2)), lambda: np.ones((3, 2)), [()], diff=False),
        Op("ones[int32]", lambda: fnp.ones((3,), dtype=fnp.int32), lambda: np.ones((3,), np.int32), [()],
           diff=False, out="int32"),
        Op("full", lambda: fnp.full((2, 2), 1.5), lambda: np.full((2, 2), 1.5), [()], diff=False),
        Op("full[int]", lambda: fnp.full((2,), 7), lambda: np.full((2,), 7), [()], diff=False, out="int"),
        Op("zeros_like", fnp.zeros_like, np.zeros_like, UNARY, diff=False),
        Op("ones_like", fnp.ones_like, np.ones_like, UNARY, diff=False),
        Op("full_like", lambda x: fnp.full_like(x, 2.5), lambda x: np.full_like(x, 2.5), UNARY, diff=False),
        Op("zeros_like[int]", fnp.zeros_like, np.zeros_like, [((3,),)], ints, diff=False, out="same"),
        Op("arange[int]", lambda: fnp.arange(5), lambda: np.arange(5), [()], diff=False, out="int"),
        Op("arange[start,stop,step]", lambda: fnp.arange(2, 11, 3), lambda: np.arange(2, 11, 3), [()],
           diff=False, out="int"),
        Op("arange[float]", lambda: fnp.arange(0.0, 1.0, 0.25), lambda: np.arange(0.0, 1.0, 0.25), [()], diff=False),
        Op("linspace", lambda: fnp.linspace(0.0, 1.0, 5), lambda: np.linspace(0.0, 1.0, 5), [()], diff=False),
        Op("linspace[no endpoint]", lambda: fnp.linspace(-1.0, 1.0, 4, endpoint=False),
           lambda: np.linspace(-1.0, 1.0, 4, endpoint=False), [()], diff=False),
        Op("eye", lambda: fnp.eye(3), lambda: np.eye(3), [()], diff=False),
        Op("eye[N,M,k]", lambda: fnp.eye(3, 4, k=1), lambda: np.eye(3, 4, k=1), [()], diff=False),
    ]


def _elementwise():
    rows = [
        binary("add"), binary("subtract"), binary("multiply"),
        binary("divide", (normal, nonzero)),
        binary("floor_divide", (normal, nonzero)),
        binary("mod", (normal, nonzero)),
        Op("floor_divide[int]", fnp.floor_divide, np.floor_divide, BINARY[:3], (ints, nonzero_ints), diff=False,
           out="same"),
        Op("mod[int]", fnp.mod, np.mod, BINARY[:3], (ints, nonzero_ints), diff=False, out="same"),
        Op("add[int]", fnp.add, np.add, BINARY[:3], ints, diff=False, out="same"),
        Op("multiply[int]", fnp.multiply, np.multiply, BINARY[:3], ints, diff=False, out="same"),
        Op("divide[int]", fnp.divide, np.divide, BINARY[:3], (ints, nonzero_ints), diff=False, out="float"),
        unary("negative"),
        binary("power", (positive, normal)),
        Op("power[int exponent]", lambda x: fnp.power(x, 3), lambda x: np.power(x, 3), UNARY),
        Op("power[float exponent]", lambda x: fnp.power(x, 0.5), lambda x: np.power(x, 0.5), UNARY, positive),
        unary("square"), unary("sqrt", positive), unary("reciprocal", nonzero),
        unary("exp"), unary("exp2"), unary("log", positive), unary("log2", positive),
        unary("log1p", positive), unary("expm1"),
        unary("sin"), unary("cos"), unary("tan", unit), unary("tanh"),
        unary("arcsin", unit), unary("arccos", unit), unary("arctan"),
        binary("arctan2", (normal, nonzero)),
        unary("sinh"), unary("cosh"),
        unary("abs", nonzero), unary("sign", nonzero),
        Op("sign[ints,zero]", fnp.sign, np.sign, [((9,),)], ints, diff=False, out="same"),
        binary("maximum"), binary("minimum"),
        Op("where", fnp.where, np.where, [((3, 4), (3, 4), (3, 4)), ((3, 1), (4,), ()), ((), (2, 3), (2, 3)),
                                          ((0, 2), (2,), (0, 2))], (boolean, normal, normal)),
        Op("where[scalar branch]", lambda c, x: fnp.where(c, x, 0.0), lambda c, x: np.where(c, x, 0.0),
           [((3, 4), (3, 4)), ((3,), ())], (boolean, normal)),
        Op("clip", lambda x: fnp.clip(x, -0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7), UNARY),
        Op("clip[array bounds]", fnp.clip, np.clip, [((3, 4), (4,), (3, 1))],
           (normal, lambda r, s: r.uniform(-1.5, -0.5, s), lambda r, s: r.uniform(0.5, 1.5, s))),
        Op("clip[min only]", lambda x: fnp.clip(x, 0.1), lambda x: np.clip(x, 0.1, None), UNARY),
        unary("floor"), unary("ceil"), unary("round"),
        Op("round[halves]", fnp.round, np.round, UNARY, halves, diff=False),
        Op("round[decimals=2]", lambda x: fnp.round(x, 2), lambda x: np.round(x, 2), UNARY, diff=False,
           atol=1e-5),
        unary("isfinite", with_specials, diff=False, out="bool"),
        unary("isnan", with_specials, diff=False, out="bool"),
    ]
    for name in ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]:
        rows.append(binary(name, small_ints_as_float, diff=False, out="bool"))
        rows.append(Op(f"{name}[int]", getattr(fnp, name), getattr(np, name), BINARY[:2], ints, diff=False,
                       out="bool"))
    for name in ["logical_and", "logical_or"]:
        rows.append(binary(name, boolean, diff=False, out="bool"))
    rows.append(unary("logical_not", boolean, diff=False, out="bool"))
    return rows


def _shape_ops():
    def row(name, fn, ref, shapes, **kw):
        return Op(name, fn, ref, shapes, **kw)

    rows = [
        row("reshape", lambda x: fnp.reshape(x, (2, 6)), lambda x: np.reshape(x, (2, 6)), [((3, 4),)]),
        row("reshape[-1]", lambda x: fnp.reshape(x, (3, -1, 2)), lambda x: np.reshape(x, (3, -1, 2)), [((3, 4),)]),
        row("reshape[to 0-d]", lambda x: fnp.reshape(x, ()), lambda x: np.reshape(x, ()), [((1, 1),)]),
        row("reshape[zero-size]", lambda x: fnp.reshape(x, (3, 0)), lambda x: np.reshape(x, (3, 0)), [((0, 3),)]),
        row("ravel", fnp.ravel, np.ravel, UNARY),
        row("transpose", fnp.transpose, np.transpose, UNARY),
        row("transpose[axes]", lambda x: fnp.transpose(x, (1, 0, 2)), lambda x: np.transpose(x, (1, 0, 2)),
            [((2, 3, 4),)]),
        row("transpose[negative axes]", lambda x: fnp.transpose(x, (-1, 0, 1)), lambda x: np.transpose(x, (-1, 0, 1)),
            [((2, 3, 4),)]),
        row("swapaxes", lambda x: fnp.swapaxes(x, 0, 2), lambda x: np.swapaxes(x, 0, 2), [((2, 3, 4),)]),
        row("swapaxes[-1]", lambda x: fnp.swapaxes(x, -1, 1), lambda x: np.swapaxes(x, -1, 1), [((2, 3, 4),)]),
        row("moveaxis", lambda x: fnp.moveaxis(x, 0, -1), lambda x: np.moveaxis(x, 0, -1), [((2, 3, 4),)]),
        row("moveaxis[multi]", lambda x: fnp.moveaxis(x, [0, 1], [-1, -3]), lambda x: np.moveaxis(x, [0, 1], [-1, -3]),
            [((2, 3, 4),)]),
        row("moveaxis[2->0]", lambda x: fnp.moveaxis(x, 2, 0), lambda x: np.moveaxis(x, 2, 0), [((2, 3, 4),)]),
        row("expand_dims[0]", lambda x: fnp.expand_dims(x, 0), lambda x: np.expand_dims(x, 0), UNARY),
        row("expand_dims[-1]", lambda x: fnp.expand_dims(x, -1), lambda x: np.expand_dims(x, -1), UNARY),
        row("expand_dims[(0,2)]", lambda x: fnp.expand_dims(x, (0, 2)), lambda x: np.expand_dims(x, (0, 2)),
            [((3, 4),)]),
        row("squeeze", fnp.squeeze, np.squeeze, [((1, 3, 1),), ((1,),), ((),)]),
        row("squeeze[axis]", lambda x: fnp.squeeze(x, axis=(0, -1)), lambda x: np.squeeze(x, axis=(0, -1)),
            [((1, 3, 1),)]),
        row("broadcast_to", lambda x: fnp.broadcast_to(x, (4, 2, 3)), lambda x: np.broadcast_to(x, (4, 2, 3)),
            [((3,),), ((1, 3),), ((),), ((2, 1),)]),
        row("concatenate", lambda x, y: fnp.concatenate([x, y], axis=1),
            lambda x, y: np.concatenate([x, y], axis=1), [((2, 3), (2, 4)), ((2, 0), (2, 2))]),
        row("concatenate[-1,3 args]", lambda x, y, z: fnp.concatenate([x, y, z], axis=-1),
            lambda x, y, z: np.concatenate([x, y, z], axis=-1), [((2, 1), (2, 3), (2, 2))]),
        row("concatenate[axis0]", lambda x, y: fnp.concatenate((x, y)), lambda x, y: np.concatenate((x, y)),
            [((1, 3), (2, 3)), ((2,), (3,))]),
        row("stack", lambda x, y: fnp.stack([x, y]), lambda x, y: np.stack([x, y]),
            [((2, 3), (2, 3)), ((), ())]),
        row("stack[axis=-1]", lambda x, y, z: fnp.stack([x, y, z], axis=-1),
            lambda x, y, z: np.stack([x, y, z], axis=-1), [((2, 3), (2, 3), (2, 3))]),
        row("stack[axis=1]", lambda x, y: fnp.stack([x, y], axis=1), lambda x, y: np.stack([x, y], axis=1),
            [((2, 3), (2, 3))]),
        row("split[sections]", lambda x: fnp.split(x, 3, axis=1), lambda x: np.split(x, 3, axis=1), [((2, 6),)]),
        row("split[indices]", lambda x: fnp.split(x, [1, 3]), lambda x: np.split(x, [1, 3]), [((5, 2),)]),
        row("flip", fnp.flip, np.flip, UNARY),
        row("flip[axis]", lambda x: fnp.flip(x, 1), lambda x: np.flip(x, 1), [((2, 3, 4),)]),
        row("flip[axes]", lambda x: fnp.flip(x, (0, -1)), lambda x: np.flip(x, (0, -1)), [((2, 3, 4),)]),
        row("pad", lambda x: fnp.pad(x, ((1, 2), (0, 1))), lambda x: np.pad(x, ((1, 2), (0, 1))), [((2, 3),)]),
        row("pad[int,value]", lambda x: fnp.pad(x, 1, constant_values=2.0),
            lambda x: np.pad(x, 1, constant_values=2.0), [((2, 3),), ((3,),)]),
        row("tile", lambda x: fnp.tile(x, (2, 1)), lambda x: np.tile(x, (2, 1)), [((2, 3),), ((3,),), ((),)]),
        row("tile[int]", lambda x: fnp.tile(x, 3), lambda x: np.tile(x, 3), [((2, 2),)]),
        row("repeat", lambda x: fnp.repeat(x, 2, axis=1), lambda x: np.repeat(x, 2, axis=1), [((2, 3),)]),
        row("repeat[list]", lambda x: fnp.repeat(x, [1, 0, 2], axis=0), lambda x: np.repeat(x, [1, 0, 2], axis=0),
            [((3, 2),)]),
        row("repeat[axis=None]", lambda x: fnp.repeat(x, 2), lambda x: np.repeat(x, 2), [((2, 2),), ((),)]),
        row("take", lambda x: fnp.take(x, np.array([2, 0, 2]), axis=1),
            lambda x: np.take(x, np.array([2, 0, 2]), axis=1), [((2, 3),)]),
        row("take[flat]", lambda x: fnp.take(x, np.array([[5, 0], [1, 1]])),
            lambda x: np.take(x, np.array([[5, 0], [1, 1]])), [((2, 3),)]),
        row("take[int]", lambda x: fnp.take(x, 1, axis=-1), lambda x: np.take(x, 1, axis=-1), [((2, 3),)]),
        row("take[negative]", lambda x: fnp.take(x, np.array([-1, 0]), axis=0),
            lambda x: np.take(x, np.array([-1, 0]), axis=0), [((3, 2),)]),
        row("take_along_axis", lambda x: fnp.take_along_axis(x, _TAKE_IDX, axis=1),
            lambda x: np.take_along_axis(x, _TAKE_IDX, axis=1), [((3, 4),)]),
        row("take_along_axis[0]", lambda x: fnp.take_along_axis(x, _TAKE_IDX0, axis=0),
            lambda x: np.take_along_axis(x, _TAKE_IDX0, axis=0), [((3, 3),)]),
        row("tril", fnp.tril, np.tril, [((4, 4),), ((3, 5),), ((2, 3, 3),)]),
        row("tril[k=-1]", lambda x: fnp.tril(x, -1), lambda x: np.tril(x, -1), [((4, 4),)]),
        row("triu", fnp.triu, np.triu, [((4, 4),), ((3, 5),), ((2, 3, 3),)]),
        row("triu[k=1]", lambda x: fnp.triu(x, 1), lambda x: np.triu(x, 1), [((4, 4),)]),
    ]
    return rows


_TAKE_IDX = np.array([[0, 3], [2, 2], [1, 0]])          # (3, 2): indices into axis 1 of a (3, 4) array
_TAKE_IDX0 = np.array([[0, 2, 1], [2, 2, 0]])         # (2, 3): indices into axis 0 of a (3, 3) array


def _linalg():
    def row(name, fn, ref, shapes, **kw):
        return Op(name, fn, ref, shapes, **kw)

    return [
        row("matmul", fnp.matmul, np.matmul, [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
                                              ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)),
                                              ((2, 1, 3, 4), (3, 4, 2)), ((4,), (2, 4, 3)), ((0, 3), (3, 2))]),
        row("dot", fnp.dot, np.dot, [((3, 4), (4, 5)), ((4,), (4,)), ((3, 4), (4,)), ((), (3,)),
                                     ((2, 3, 4), (4, 2))]),
        row("tensordot[2]", fnp.tensordot, np.tensordot, [((2, 3, 4), (3, 4, 5))]),
        row("tensordot[1]", lambda x, y: fnp.tensordot(x, y, 1), lambda x, y: np.tensordot(x, y, 1),
            [((2, 3), (3, 4))]),
        row("tensordot[axes lists]", lambda x, y: fnp.tensordot(x, y, ([0, 2], [2, 0])),
            lambda x, y: np.tensordot(x, y, ([0, 2], [2, 0])), [((2, 3, 4), (4, 5, 2))]),
        row("outer", fnp.outer, np.outer, [((3,), (4,)), ((2, 2), (3,))]),
        row("einsum[MLP bi,io->bo]", lambda x, w: fnp.einsum("bi,io->bo", x, w),
            lambda x, w: np.einsum("bi,io->bo", x, w), [((4, 3), (3, 5))]),
        row("einsum[conv1x1 nchw,oc->nohw]", lambda x, w: fnp.einsum("nchw,oc->nohw", x, w),
            lambda x, w: np.einsum("nchw,oc->nohw", x, w), [((2, 3, 4, 4), (5, 3))]),
        row("einsum[patches nphwc,hwco->npo]", lambda x, w: fnp.einsum("nphwc,hwco->npo", x, w),
            lambda x, w: np.einsum("nphwc,hwco->npo", x, w), [((2, 4, 3, 3, 2), (3, 3, 2, 5))]),
        row("einsum[attn scores]", lambda q, k: fnp.einsum("bhqd,bhkd->bhqk", q, k),
            lambda q, k: np.einsum("bhqd,bhkd->bhqk", q, k), [((2, 2, 3, 4), (2, 2, 5, 4))]),
        row("einsum[attn values]", lambda p, v: fnp.einsum("bhqk,bhkd->bhqd", p, v),
            lambda p, v: np.einsum("bhqk,bhkd->bhqd", p, v), [((2, 2, 3, 5), (2, 2, 5, 4))]),
        row("einsum[implicit ij,jk]", lambda x, y: fnp.einsum("ij,jk", x, y), lambda x, y: np.einsum("ij,jk", x, y),
            [((2, 3), (3, 4))]),
        row("einsum[transpose ij->ji]", lambda x: fnp.einsum("ij->ji", x), lambda x: np.einsum("ij->ji", x),
            [((2, 3),)]),
        row("einsum[sum ij->]", lambda x: fnp.einsum("ij->", x), lambda x: np.einsum("ij->", x), [((2, 3),)]),
        row("einsum[inner i,i->]", lambda x, y: fnp.einsum("i,i->", x, y), lambda x, y: np.einsum("i,i->", x, y),
            [((4,), (4,))]),
        row("einsum[3 operands]", lambda x, y, z: fnp.einsum("ij,jk,kl->il", x, y, z),
            lambda x, y, z: np.einsum("ij,jk,kl->il", x, y, z), [((2, 3), (3, 4), (4, 2))]),
        row("linalg.norm", fnp.linalg.norm, np.linalg.norm, [((3,),), ((3, 4),), ((2, 3, 2),)]),
        row("linalg.norm[ord=1]", lambda x: fnp.linalg.norm(x, 1), lambda x: np.linalg.norm(x, 1), [((5,),)],
            gens=nonzero),
        row("linalg.norm[ord=inf]", lambda x: fnp.linalg.norm(x, np.inf), lambda x: np.linalg.norm(x, np.inf), [((5,),)]),
        row("linalg.norm[ord=-inf]", lambda x: fnp.linalg.norm(x, -np.inf), lambda x: np.linalg.norm(x, -np.inf),
            [((5,),)], gens=nonzero),
        row("linalg.norm[ord=3]", lambda x: fnp.linalg.norm(x, 3), lambda x: np.linalg.norm(x, 3), [((5,),)], gens=nonzero),
        row("linalg.norm[ord=0]", lambda x: fnp.linalg.norm(x, 0), lambda x: np.linalg.norm(x, 0), [((6,),)],
            gens=small_ints_as_float, diff=False),
        row("linalg.norm[axis=1,keepdims]", lambda x: fnp.linalg.norm(x, axis=1, keepdims=True),
            lambda x: np.linalg.norm(x, axis=1, keepdims=True), [((3, 4),)]),
        row("linalg.norm[axis=-1]", lambda x: fnp.linalg.norm(x, axis=-1), lambda x: np.linalg.norm(x, axis=-1),
            [((2, 3, 4),)]),
        row("linalg.norm[fro]", lambda x: fnp.linalg.norm(x, "fro"), lambda x: np.linalg.norm(x, "fro"), [((3, 4),)]),
        row("linalg.norm[matrix ord=1]", lambda x: fnp.linalg.norm(x, 1, axis=(0, 1)),
            lambda x: np.linalg.norm(x, 1, axis=(0, 1)), [((3, 4),)], gens=nonzero),
        row("linalg.norm[matrix ord=inf]", lambda x: fnp.linalg.norm(x, np.inf, axis=(0, 1)),
            lambda x: np.linalg.norm(x, np.inf, axis=(0, 1)), [((3, 4),)], gens=nonzero),
        row("linalg.norm[matrix axes (2,0)]", lambda x: fnp.linalg.norm(x, "fro", axis=(2, 0)),
            lambda x: np.linalg.norm(x, "fro", axis=(2, 0)), [((2, 3, 4),)]),
    ]


# Array methods and operators: the same lambda serves as funcgrad function and numpy reference.
_IDX = np.array([0, 2, 2])
_MASK = np.array([True, False, True, True])


def _scatter_ref(mode):
    def ref(x, v):
        y = np.array(x, copy=True)
        if mode == "set":
            y[_IDX] = v
        else:
            np.add.at(y, _IDX, v)
        return y
    return ref


def _methods():
    def same(name, f, shapes, **kw):
        return Op(name, f, f, shapes, **kw)

    return [
        same("x + y", lambda x, y: x + y, BINARY),
        same("x - y", lambda x, y: x - y, BINARY),
        same("x * y", lambda x, y: x * y, BINARY),
        same("x / y", lambda x, y: x / y, BINARY, gens=(normal, nonzero)),
        same("x // y", lambda x, y: x // y, BINARY, gens=(normal, nonzero)),
        same("x % y", lambda x, y: x % y, BINARY, gens=(normal, nonzero)),
        same("x ** y", lambda x, y: x ** y, BINARY, gens=(positive, normal)),
        same("x @ y", lambda x, y: x @ y, [((3, 4), (4, 2)), ((4,), (4, 2)), ((2, 3, 4), (4,))]),
        same("2.0 - x (reflected)", lambda x: 2.0 - x, UNARY),
        same("2.0 / x (reflected)", lambda x: 2.0 / x, UNARY, gens=nonzero),
        same("2.0 ** x (reflected)", lambda x: 2.0 ** x, UNARY),
        same("x ** 2", lambda x: x ** 2, UNARY),
        same("-x", lambda x: -x, UNARY),
        same("abs(x)", lambda x: abs(x), UNARY, gens=nonzero),
        same("x < y", lambda x, y: x < y, BINARY, gens=small_ints_as_float, diff=False, out="bool"),
        same("x <= y", lambda x, y: x <= y, BINARY, gens=small_ints_as_float, diff=False, out="bool"),
        same("x > y", lambda x, y: x > y, BINARY, gens=small_ints_as_float, diff=False, out="bool"),
        same("x >= y", lambda x, y: x >= y, BINARY, gens=small_ints_as_float, diff=False, out="bool"),
        same("x == y", lambda x, y: x == y, BINARY, gens=small_ints_as_float, diff=False, out="bool"),
        same("x != y", lambda x, y: x != y, BINARY, gens=small_ints_as_float, diff=False, out="bool"),
        same("x[int]", lambda x: x[1], [((3, 4),), ((3,),)]),
        same("x[-1, 2]", lambda x: x[-1, 2], [((3, 4),)]),
        same("x[slices]", lambda x: x[1:, ::2], [((3, 4),)]),
        same("x[negative step]", lambda x: x[::-1, -3:-1], [((3, 4),)]),
        same("x[None, ..., 1]", lambda x: x[None, ..., 1], [((2, 3, 4),)]),
        same("x[..., None]", lambda x: x[..., None], [((2, 3),), ((),)]),
        same("x[int array]", lambda x: x[_IDX], [((3, 2),)]),
        same("x[:, int array]", lambda x: x[:, _IDX], [((2, 3),)]),
        same("x[int arrays pair]", lambda x: x[_IDX, np.array([1, 0, 1])], [((3, 2),)]),
        same("x[int list]", lambda x: x[[2, 0]], [((3, 2),)]),
        same("x[bool mask]", lambda x: x[_MASK], [((4,),), ((4, 2),)]),
        same("x[:, bool mask]", lambda x: x[:, _MASK], [((2, 4),)]),
        same("x[x > 0]", lambda x: x[x > 0], [((3, 4),)], diff=False, transforms=False),
        same(".T", lambda x: x.T, [((3, 4),), ((2, 3, 4),), ((3,),)]),
        same(".reshape(tuple)", lambda x: x.reshape((4, 3)), [((3, 4),)]),
        same(".reshape(*ints)", lambda x: x.reshape(2, -1), [((3, 4),)]),
        same(".astype(int32)", lambda x: x.astype(np.int32), [((3, 4),)], diff=False, out="int32"),
        same(".astype(bool)", lambda x: x.astype(bool), [((3, 4),)], gens=small_ints_as_float, diff=False,
             out="bool"),
        same(".sum()", lambda x: x.sum(), [((3, 4),)]),
        same(".sum(axis)", lambda x: x.sum(axis=0), [((3, 4),)]),
        same(".mean(axis,keepdims)", lambda x: x.mean(axis=-1, keepdims=True), [((3, 4),)]),
        same(".max()", lambda x: x.max(), [((3, 4),)]),
        same(".min(axis)", lambda x: x.min(axis=1), [((3, 4),)]),
        Op(".at[idx].set", lambda x, v: x.at[_IDX].set(v), _scatter_ref("set"), [((4,), (3,)), ((4, 2), (2,))]),
        Op(".at[idx].add (duplicates)", lambda x, v: x.at[_IDX].add(v), _scatter_ref("add"),
           [((4,), (3,)), ((4, 2), (3, 2)), ((4,), ())]),
        Op(".at[slice].set", lambda x, v: x.at[1:3].set(v), lambda x, v: _np_set(x, slice(1, 3), v),
           [((4, 2), (2, 2)), ((4,), ())]),
        Op(".at[int].add", lambda x, v: x.at[1, 0].add(v), lambda x, v: _np_add(x, (1, 0), v), [((3, 2), ())]),
    ]


def _aliases():
    """Names numpy and JAX keep beside their usual spelling (and a few conversions)."""
    return [
        unary("absolute", nonzero), unary("positive"), unary("around"),
        binary("remainder", (normal, nonzero)), binary("true_divide", (normal, nonzero)),
        binary("logical_xor", boolean, diff=False, out="bool"),
        Op("amax", lambda x: fnp.amax(x, axis=1), lambda x: np.amax(x, axis=1), [((3, 4),)]),
        Op("amin", lambda x: fnp.amin(x, axis=0), lambda x: np.amin(x, axis=0), [((3, 4),)]),
        Op("inner", fnp.inner, np.inner, [((3,), (3,)), ((2, 3), (4, 3))]),
        Op("vdot", fnp.vdot, np.vdot, [((3,), (3,)), ((2, 3), (3, 2))]),
        Op("astype", lambda x: fnp.astype(x, np.int32), lambda x: x.astype(np.int32), [((3, 4),)], diff=False,
           out="int32"),
        Op("broadcast_arrays", lambda x, y: fnp.stack(fnp.broadcast_arrays(x, y)),
           lambda x, y: np.stack(np.broadcast_arrays(x, y)), [((3, 1), (4,))]),
    ]


def _np_set(x, idx, v):
    y = np.array(x, copy=True)
    y[idx] = v
    return y


def _np_add(x, idx, v):
    y = np.array(x, copy=True)
    y[idx] += v
    return y


OPS = _creation() + _elementwise() + _reductions() + _shape_ops() + _linalg() + _methods() + _aliases()

# Every public function of funcgrad.numpy listed here has at least one row.
PUBLIC = ("array asarray zeros ones full zeros_like ones_like full_like arange linspace eye add subtract multiply "
          "divide floor_divide mod negative power square sqrt reciprocal exp exp2 log log2 log1p expm1 sin cos tan "
          "tanh arcsin arccos arctan arctan2 sinh cosh abs sign maximum minimum where clip floor ceil round isfinite "
          "isnan equal not_equal less less_equal greater greater_equal logical_and logical_or logical_not sum mean "
          "max min prod var std argmax argmin cumsum logsumexp reshape ravel transpose swapaxes moveaxis expand_dims "
          "squeeze broadcast_to concatenate stack split flip pad tile repeat take take_along_axis tril triu matmul "
          "dot tensordot outer einsum linalg.norm absolute positive around remainder true_divide logical_xor amax amin "
          "inner vdot astype broadcast_arrays").split()

# Each area's rows live in its own file (``op_rows_<area>.py``, defining ``OPS`` and ``PUBLIC``);
# the files import their helpers from this module, so they are loaded last.
_AREAS = ("math", "arrays", "sorting", "linalg", "fft", "complex")
for _area in _AREAS:
    _module = __import__(f"op_rows_{_area}")
    for _op in _module.OPS:
        _op.area = _area
    OPS += _module.OPS
    PUBLIC += _module.PUBLIC
