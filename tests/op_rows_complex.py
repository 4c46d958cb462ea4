"""Op-table rows for funcgrad.numpy's complex functions, and complex inputs through the elementwise,
reduction and contraction functions (loaded by op_table.py; see its Op record).

Complex arguments are complex64 in the float32 checks and complex128 in the float64 ones; derivatives
are checked along random directions in both the real and the imaginary part (funcgrad.testing)."""
from __future__ import annotations

import numpy as np

import funcgrad.numpy as fnp
from op_table import BINARY, Op, nonzero, normal

C_UNARY = [((3, 4),), ((),), ((2, 1, 3),)]


def cnormal(rng, shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def cnonzero(rng, shape):       # |z| in about [0.5, 2.8]: away from 0 (abs, angle, log, division)
    return nonzero(rng, shape) + 1j * nonzero(rng, shape)


def csome_real(rng, shape):     # some entries with a zero imaginary part, for iscomplex / isreal
    z = cnormal(rng, shape)
    flat = z.reshape(-1)
    flat[::2] = flat[::2].real
    return z


def cdistinct(rng, shape):      # distinct real parts, 1 apart: the order survives finite differences
    re = rng.permutation(np.arange(int(np.prod(shape)))).reshape(shape).astype(np.float64)
    return re + 1j * rng.standard_normal(shape)


def cties(rng, shape):          # pairs of equal real parts: sort_complex orders those by the imaginary part
    re = rng.permutation(np.arange(int(np.prod(shape))) // 2).reshape(shape).astype(np.float64)
    return re + 1j * rng.standard_normal(shape)


def _cu(name, gen=cnormal, ref=None, out="complex", **kw):
    return Op(f"{name}[complex]", getattr(fnp, name), ref or getattr(np, name), C_UNARY, gen, out=out, **kw)


def _cb(name, gens=cnormal, **kw):
    return Op(f"{name}[complex]", getattr(fnp, name), getattr(np, name), BINARY[:3], gens, out="complex", **kw)


OPS = [
    # the new functions
    Op("real", fnp.real, np.real, C_UNARY, cnormal),
    Op("real[float]", fnp.real, np.real, [((3, 4),)], normal),
    Op("imag", fnp.imag, np.imag, C_UNARY, cnormal),
    Op("imag[float]", fnp.imag, np.imag, [((3, 4),)], normal),
    Op("conj", fnp.conj, np.conj, C_UNARY, cnormal, out="complex"),
    Op("conj[float]", fnp.conj, np.conj, [((3, 4),)], normal),
    Op("conjugate", fnp.conjugate, np.conjugate, [((3, 4),)], cnormal, out="complex"),
    Op("angle", fnp.angle, np.angle, C_UNARY, cnonzero),
    Op("angle[deg]", lambda z: fnp.angle(z, deg=True), lambda z: np.angle(z, deg=True), [((3, 4),)], cnonzero,
       rtol=2e-5, atol=2e-4),
    Op("angle[float]", fnp.angle, np.angle, [((3, 4),)], nonzero),
    Op("iscomplex", fnp.iscomplex, np.iscomplex, [((3, 4),), ((),)], csome_real, diff=False, out="bool"),
    Op("iscomplex[float]", fnp.iscomplex, np.iscomplex, [((3,),)], normal, diff=False, out="bool"),
    Op("isreal", fnp.isreal, np.isreal, [((3, 4),)], csome_real, diff=False, out="bool"),
    Op("iscomplexobj", lambda z: fnp.asarray(fnp.iscomplexobj(z)), lambda z: np.asarray(np.iscomplexobj(z)),
       [((2,),)], cnormal, diff=False, out="bool", transforms=False),
    Op("iscomplexobj[float]", lambda z: fnp.asarray(fnp.iscomplexobj(z)), lambda z: np.asarray(np.iscomplexobj(z)),
       [((2,),)], normal, diff=False, out="bool", transforms=False),
    Op("isrealobj", lambda z: fnp.asarray(fnp.isrealobj(z)), lambda z: np.asarray(np.isrealobj(z)),
       [((2,),)], cnormal, diff=False, out="bool", transforms=False),
    Op("sort_complex", fnp.sort_complex, np.sort_complex, [((6,),), ((2, 4),)], cdistinct, out="complex"),
    Op("sort_complex[ties]", fnp.sort_complex, np.sort_complex, [((6,),), ((2, 4),)], cties, out="complex",
       diff=False),
    Op("sort_complex[float]", fnp.sort_complex, np.sort_complex, [((5,),)], normal, out="complex"),
    # complex values through the existing functions (holomorphic rules, and abs's own)
    _cb("add"), _cb("subtract"), _cb("multiply"), _cb("divide", (cnormal, cnonzero)),
    _cu("negative"), _cu("square"), _cu("exp"), _cu("log", cnonzero), _cu("sqrt", cnonzero),
    _cu("sin"), _cu("cos"), _cu("tanh"), _cu("sinh"), _cu("cosh"), _cu("reciprocal", cnonzero),
    _cu("abs", cnonzero, out="float"),
    Op("power[complex]", lambda z: fnp.power(z, 3), lambda z: np.power(z, 3), [((3, 4),)], cnormal, out="complex"),
    Op("sum[complex]", lambda z: fnp.sum(z, axis=0), lambda z: np.sum(z, axis=0), [((3, 4),)], cnormal,
       out="complex"),
    Op("mean[complex]", fnp.mean, np.mean, [((3, 4),)], cnormal, out="complex"),
    Op("prod[complex]", lambda z: fnp.prod(z, axis=1), lambda z: np.prod(z, axis=1), [((3, 4),)], cnormal,
       out="complex"),
    Op("matmul[complex]", fnp.matmul, np.matmul, [((3, 4), (4, 2))], cnormal, out="complex"),
    Op("einsum[complex]", lambda a, b: fnp.einsum("ij,j->i", a, b), lambda a, b: np.einsum("ij,j->i", a, b),
       [((3, 4), (4,))], (cnormal, normal), out="complex"),
    Op("vdot[complex]", fnp.vdot, np.vdot, [((4,), (4,)), ((2, 3), (2, 3))], cnormal, out="complex"),
    Op("var[complex]", lambda z: fnp.var(z, axis=0), lambda z: np.var(z, axis=0), [((3, 4),)], cnormal),
    Op("std[complex]", lambda z: fnp.std(z, ddof=1), lambda z: np.std(z, ddof=1), [((3, 4),)], cnormal),
    Op("linalg.norm[complex]", fnp.linalg.norm, np.linalg.norm, [((3, 4),), ((4,),)], cnormal),
    Op("linalg.norm[complex,axis]", lambda z: fnp.linalg.norm(z, axis=1), lambda z: np.linalg.norm(z, axis=1),
       [((3, 4),)], cnormal),
    Op("where[complex]", lambda c, z: fnp.where(c > 0, z, 0.0), lambda c, z: np.where(c > 0, z, 0.0),
       [((3, 4), (3, 4))], (normal, cnormal), out="complex"),
    Op("reshape[complex]", lambda z: fnp.reshape(z, (4, 3)), lambda z: np.reshape(z, (4, 3)), [((3, 4),)], cnormal,
       out="complex"),
    Op("concatenate[complex]", lambda a, b: fnp.concatenate([a, b], axis=1),
       lambda a, b: np.concatenate([a, b], axis=1), [((2, 3), (2, 2))], cnormal, out="complex"),
]

PUBLIC: list[str] = ["real", "imag", "conj", "conjugate", "angle", "iscomplex", "isreal", "iscomplexobj", "isrealobj",
                     "sort_complex"]
