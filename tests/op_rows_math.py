"""Op-table rows for funcgrad.numpy's math functions (loaded by op_table.py; see its Op record).

Functions that return no array (dtype utilities, isscalar, io, printing), the ones that raise as
in JAX (fromfile, fromiter), keyword variants and special cases are tested in
tests/test_numpy_math.py.
"""
from __future__ import annotations

import numpy as np

import funcgrad.numpy as fnp
from op_table import Op, boolean, halves, ints, nonzero, normal, positive, small_ints_as_float, unit, with_specials

# Fewer shape cases than op_table's UNARY/BINARY (CI time): a matrix, 0-d, and broadcasting.
UNARY = [((3, 4),), ((),), ((0,),)]
BINARY = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (3,))]


def unary(name, gen=normal, ref=None, **kw):
    return Op(name, getattr(fnp, name), ref or getattr(np, name), UNARY, gen, **kw)


def binary(name, gens=normal, ref=None, **kw):
    return Op(name, getattr(fnp, name), ref or getattr(np, name), BINARY, gens, **kw)

S = [((3, 4),)]                # one small shape: rows of aliases and variants
S2 = [((3, 4), (3, 4)), ((3, 1), (4,))]


def above_one(rng, shape):
    return rng.uniform(1.2, 3.0, shape)


def shifts(rng, shape):
    return rng.integers(0, 6, shape).astype(np.int32)


def with_zeros(rng, shape):    # sinc at 0 and around it
    x = rng.standard_normal(shape)
    x.reshape(-1)[::3] = 0.0
    return x


_MASK = np.array([[True, False, True, True], [False, False, True, False], [True, True, True, False]])
_ROW_MASK = np.array([True, False, True, True])
_MASK2 = np.array([[True, True, False, True], [False, True, True, False], [True, False, True, True]])  # >= 2 a row


def _elementwise():
    return [
        # inverse hyperbolics, cbrt, logs, angles
        unary("arcsinh"), Op("asinh", fnp.asinh, np.arcsinh, S),
        Op("arccosh", fnp.arccosh, np.arccosh, UNARY, above_one), Op("acosh", fnp.acosh, np.arccosh, S, above_one),
        unary("arctanh", unit), Op("atanh", fnp.atanh, np.arctanh, S, unit),
        Op("asin", fnp.asin, np.arcsin, S, unit), Op("acos", fnp.acos, np.arccos, S, unit),
        Op("atan", fnp.atan, np.arctan, S), Op("atan2", fnp.atan2, np.arctan2, S2),
        unary("cbrt", nonzero), unary("log10", positive), unary("deg2rad"), unary("rad2deg"),
        Op("radians", fnp.radians, np.radians, S), Op("degrees", fnp.degrees, np.degrees, S),
        Op("fabs", fnp.fabs, np.fabs, UNARY, nonzero),
        Op("fabs[int]", fnp.fabs, lambda x: np.fabs(x), S, ints, diff=False, out="none"),
        unary("sinc", with_zeros, grad_tol=1e-5), Op("i0", fnp.i0, np.i0, UNARY),
        Op("i0[large]", fnp.i0, np.i0, S, lambda rng, s: rng.uniform(-12.0, 12.0, s), rtol=2e-5, atol=1e-4),
        unary("trunc", halves, diff=False), Op("trunc[int]", fnp.trunc, np.trunc, S, ints, diff=False, out="same"),
        unary("rint", halves, diff=False),
        Op("signbit", fnp.signbit, np.signbit, UNARY, with_specials, diff=False, out="bool"),
        Op("signbit[int]", fnp.signbit, np.signbit, S, ints, diff=False, out="bool"),
        Op("spacing", fnp.spacing, np.spacing, UNARY, diff=False),
        Op("isinf", fnp.isinf, np.isinf, UNARY, with_specials, diff=False, out="bool"),
        Op("isposinf", fnp.isposinf, np.isposinf, S, with_specials, diff=False, out="bool"),
        Op("isneginf", fnp.isneginf, np.isneginf, S, with_specials, diff=False, out="bool"),
        Op("nan_to_num", lambda x: fnp.nan_to_num(x, nan=0.5, posinf=9.0, neginf=-9.0),
           lambda x: np.nan_to_num(x, nan=0.5, posinf=9.0, neginf=-9.0), UNARY, with_specials, diff=False),
        Op("nan_to_num[finite]", fnp.nan_to_num, np.nan_to_num, S),
        Op("modf", fnp.modf, np.modf, UNARY), Op("frexp", fnp.frexp, np.frexp, UNARY, out="none"),
        # binary
        Op("copysign", fnp.copysign, np.copysign, BINARY, (nonzero, nonzero)),
        binary("float_power", (positive, normal)), Op("pow", fnp.pow, np.power, S2, (positive, normal)),
        binary("fmax"), binary("fmin"),
        Op("fmax[nan]", fnp.fmax, np.fmax, S2, with_specials, diff=False),
        Op("fmin[nan]", fnp.fmin, np.fmin, S2, with_specials, diff=False),
        binary("fmod", (unit, nonzero)),
        Op("fmod[int]", fnp.fmod, np.fmod, BINARY[:3], (ints, lambda r, s: (r.integers(1, 4, s) * r.choice(
            [-1, 1], s)).astype(np.int32)), diff=False, out="same"),
        binary("heaviside"), binary("hypot"), binary("logaddexp"), binary("logaddexp2"),
        Op("nextafter", fnp.nextafter, np.nextafter, S2, diff=False),
        Op("ldexp", fnp.ldexp, np.ldexp, BINARY[:4], (normal, ints)),
        Op("gcd", fnp.gcd, np.gcd, BINARY, ints, diff=False, out="same"),
        Op("lcm", fnp.lcm, np.lcm, BINARY, ints, diff=False, out="same"),
        Op("divmod", fnp.divmod, np.divmod, S2, (normal, nonzero), diff=False, out="none"),
        Op("divmod[int]", fnp.divmod, np.divmod, S2, (ints, lambda r, s: (r.integers(1, 4, s)).astype(np.int32)),
           diff=False, out="same"),
    ]


def _bits():
    rows = []
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        rows += [Op(name, getattr(fnp, name), getattr(np, name), BINARY, ints, diff=False, out="same"),
                 Op(f"{name}[bool]", getattr(fnp, name), getattr(np, name), S2, boolean, diff=False, out="bool")]
    for name, ref in (("bitwise_not", np.invert), ("invert", np.invert), ("bitwise_invert", np.invert)):
        rows.append(Op(name, getattr(fnp, name), ref, UNARY[:3], ints, diff=False, out="same"))
    rows += [
        Op("bitwise_not[bool]", fnp.bitwise_not, np.invert, S, boolean, diff=False, out="bool"),
        Op("bitwise_count", fnp.bitwise_count, np.bitwise_count, UNARY[:3], ints, diff=False, out="none"),
        Op("bitwise_count[uint8]", lambda x: fnp.bitwise_count(x.astype(np.uint8)),
           lambda x: np.bitwise_count(x.astype(np.uint8)), S, ints, diff=False, out="none"),
    ]
    for name, ref in (("left_shift", np.left_shift), ("bitwise_left_shift", np.left_shift),
                      ("right_shift", np.right_shift), ("bitwise_right_shift", np.right_shift)):
        rows.append(Op(name, getattr(fnp, name), ref, BINARY[:4], (ints, shifts), diff=False, out="same"))
    rows.append(Op("right_shift[uint32]", lambda x, y: fnp.right_shift(x.astype(np.uint32), y.astype(np.uint32)),
                   lambda x, y: np.right_shift(x.astype(np.uint32), y.astype(np.uint32)), S2, (ints, shifts),
                   diff=False, out="none"))
    return rows


def _predicates():
    return [
        Op("all", fnp.all, np.all, UNARY, small_ints_as_float, diff=False, out="bool"),
        Op("all[axis=1,keepdims]", lambda x: fnp.all(x, axis=1, keepdims=True),
           lambda x: np.all(x, axis=1, keepdims=True), S, boolean, diff=False, out="bool"),
        Op("all[where]", lambda x: fnp.all(x, axis=0, where=_MASK), lambda x: np.all(x, axis=0, where=_MASK), S,
           small_ints_as_float, diff=False, out="bool"),
        Op("any", fnp.any, np.any, UNARY, small_ints_as_float, diff=False, out="bool"),
        Op("any[axis=(0,1)]", lambda x: fnp.any(x, axis=(0, 1)), lambda x: np.any(x, axis=(0, 1)),
           [((2, 3, 4),)], boolean, diff=False, out="bool"),
        Op("any[where]", lambda x: fnp.any(x, axis=1, where=_ROW_MASK), lambda x: np.any(x, axis=1, where=_ROW_MASK),
           S, small_ints_as_float, diff=False, out="bool"),
        Op("isclose", fnp.isclose, np.isclose, BINARY, small_ints_as_float, diff=False, out="bool"),
        Op("isclose[tolerances]", lambda a, b: fnp.isclose(a, b, rtol=0.3, atol=0.5),
           lambda a, b: np.isclose(a, b, rtol=0.3, atol=0.5), S2, diff=False, out="bool"),
        Op("isclose[equal_nan]", lambda a, b: fnp.isclose(a, b, equal_nan=True),
           lambda a, b: np.isclose(a, b, equal_nan=True), S2, with_specials, diff=False, out="bool"),
        Op("allclose", fnp.allclose, np.allclose, S2, small_ints_as_float, diff=False, out="bool"),
        Op("allclose[same]", lambda a: fnp.allclose(a, a * (1 + 1e-7)), lambda a: np.allclose(a, a * (1 + 1e-7)),
           S, diff=False, out="bool"),
        Op("array_equal", fnp.array_equal, np.array_equal, [((3, 4), (3, 4)), ((3, 4), (4,))],
           lambda r, s: r.integers(0, 2, s).astype(np.float64), diff=False, out="bool"),
        Op("array_equal[same]", lambda a: fnp.array_equal(a, a + 0.0), lambda a: np.array_equal(a, a + 0.0), S,
           diff=False, out="bool"),
        Op("array_equiv", fnp.array_equiv, np.array_equiv, [((3, 4), (4,)), ((3, 4), (3,))],
           lambda r, s: r.integers(0, 2, s).astype(np.float64), diff=False, out="bool"),
        Op("array_equiv[same rows]", lambda a: fnp.array_equiv(fnp.stack([a, a]), a),
           lambda a: np.array_equiv(np.stack([a, a]), a), [((4,),)], diff=False, out="bool"),
    ]


def _reductions():
    red = [((3, 4),)]
    return [
        Op("sum[where]", lambda x: fnp.sum(x, where=_MASK), lambda x: np.sum(x, where=_MASK), red),
        Op("sum[axis,initial,where]", lambda x: fnp.sum(x, axis=1, initial=2.0, where=_ROW_MASK),
           lambda x: np.sum(x, axis=1, initial=2.0, where=_ROW_MASK), red),
        Op("prod[where]", lambda x: fnp.prod(x, axis=0, where=_MASK), lambda x: np.prod(x, axis=0, where=_MASK), red),
        Op("prod[initial]", lambda x: fnp.prod(x, axis=1, initial=0.5), lambda x: np.prod(x, axis=1, initial=0.5),
           red),
        Op("max[where,initial]", lambda x: fnp.max(x, axis=1, where=_MASK, initial=-1.5),
           lambda x: np.max(x, axis=1, where=_MASK, initial=-1.5), red),
        Op("min[initial]", lambda x: fnp.min(x, axis=0, initial=0.1), lambda x: np.min(x, axis=0, initial=0.1), red),
        Op("amax[where,initial]", lambda x: fnp.amax(x, where=_MASK, initial=-5.0),
           lambda x: np.amax(x, where=_MASK, initial=-5.0), red),
        Op("amin[keepdims]", lambda x: fnp.amin(x, axis=1, keepdims=True), lambda x: np.amin(x, axis=1, keepdims=True),
           red),
        Op("mean[where]", lambda x: fnp.mean(x, axis=1, where=_MASK), lambda x: np.mean(x, axis=1, where=_MASK), red),
        Op("var[where,ddof]", lambda x: fnp.var(x, axis=0, where=_MASK[:, :1] | _MASK, ddof=1),
           lambda x: np.var(x, axis=0, where=_MASK[:, :1] | _MASK, ddof=1), red, grad_tol=1e-5),
        Op("std[where,keepdims]", lambda x: fnp.std(x, axis=1, keepdims=True, where=_MASK2),
           lambda x: np.std(x, axis=1, keepdims=True, where=_MASK2), red, grad_tol=1e-5),
        Op("var[correction]", lambda x: fnp.var(x, axis=1, correction=1), lambda x: np.var(x, axis=1, ddof=1), red),
        Op("logsumexp[where]", lambda x: fnp.logsumexp(x, axis=1, where=_MASK),
           lambda x: np.log(np.sum(np.exp(x), axis=1, where=_MASK)), red),
        Op("clip[keywords]", lambda x: fnp.clip(x, min=-0.5, max=0.7), lambda x: np.clip(x, -0.5, 0.7), UNARY),
        Op("clip[max only]", lambda x: fnp.clip(x, max=0.3), lambda x: np.minimum(x, 0.3), S),
    ]


_MUL_ADD = fnp.frompyfunc(lambda a, b: a * 0.5 + b, 2, 1)


def _np_fold(x, axis, accumulate=False):
    """(((x0 * .5 + x1) * .5 + x2) ...) along ``axis``: _MUL_ADD's reduce / accumulate in numpy."""
    x = np.moveaxis(x, axis, 0)
    out = [x[0]]
    for v in x[1:]:
        out.append(out[-1] * 0.5 + v)
    return np.moveaxis(np.stack(out), 0, axis) if accumulate else out[-1]


def _functional():
    return [
        Op("vectorize", fnp.vectorize(lambda a, b: fnp.sum(a * b), signature="(n),(n)->()"),
           np.vectorize(lambda a, b: np.sum(a * b), signature="(n),(n)->()"), [((3, 4), (4,)), ((2, 1, 4), (3, 4))]),
        Op("vectorize[elementwise]", fnp.vectorize(lambda a, b: a * fnp.sin(b)),
           np.vectorize(lambda a, b: a * np.sin(b)), S2),
        Op("apply_along_axis", lambda x: fnp.apply_along_axis(fnp.cumsum, 0, x),
           lambda x: np.apply_along_axis(np.cumsum, 0, x), [((3, 4),), ((2, 3, 2),)]),
        Op("apply_along_axis[axis=-1,scalar]", lambda x: fnp.apply_along_axis(lambda v: fnp.sum(v * v), -1, x),
           lambda x: np.apply_along_axis(lambda v: np.sum(v * v), -1, x), [((2, 3, 2),)]),
        Op("frompyfunc", fnp.frompyfunc(lambda a, b: a * fnp.cos(b) + 1.0, 2, 1), lambda a, b: a * np.cos(b) + 1.0,
           S2),
        Op("frompyfunc[reduce]", lambda x: _MUL_ADD.reduce(x, axis=1), lambda x: _np_fold(x, 1), [((3, 4),)]),
        Op("frompyfunc[accumulate]", lambda x: _MUL_ADD.accumulate(x, axis=0), lambda x: _np_fold(x, 0, True),
           [((3, 2),)]),
        Op("frompyfunc[outer]", lambda a, b: _MUL_ADD.outer(a, b), lambda a, b: np.add.outer(a * 0.5, b),
           [((3,), (2,))]),
        Op("apply_over_axes", lambda x: fnp.apply_over_axes(fnp.sum, x, [0, 2]),
           lambda x: np.apply_over_axes(np.sum, x, [0, 2]), [((2, 3, 4),)]),
    ]


def _creation():
    c = dict(diff=False)
    return [
        Op("empty", lambda: fnp.empty((2, 3)), lambda: np.zeros((2, 3)), [()], **c),
        Op("empty_like", fnp.empty_like, np.zeros_like, S, **c),
        Op("identity", lambda: fnp.identity(3), lambda: np.identity(3), [()], **c),
        Op("tri", lambda: fnp.tri(3, 4, -1), lambda: np.tri(3, 4, -1), [()], **c),
        Op("logspace", lambda: fnp.logspace(0.0, 2.0, 5), lambda: np.logspace(0.0, 2.0, 5), [()], **c),
        Op("logspace[arrays,base]", lambda a, b: fnp.logspace(a, b, 4, base=2.0, axis=1),
           lambda a, b: np.logspace(a, b, 4, base=2.0, axis=1), [((3,), (3,))], unit),
        Op("geomspace", lambda: fnp.geomspace(1.0, 1000.0, 4), lambda: np.geomspace(1.0, 1000.0, 4), [()], **c,
           rtol=2e-5),
        Op("geomspace[arrays]", lambda a, b: fnp.geomspace(a, b, 3), lambda a, b: np.geomspace(a, b, 3),
           [((2,), (2,))], positive, rtol=2e-5, atol64=1e-11),
        Op("linspace[arrays,axis]", lambda a, b: fnp.linspace(a, b, 5, axis=-1),
           lambda a, b: np.linspace(a, b, 5, axis=-1), [((3,), (3,)), ((2, 1), (3,))]),
        Op("linspace[retstep]", lambda a: fnp.linspace(a, 2.0, 4, endpoint=False, retstep=True),
           lambda a: np.linspace(a, 2.0, 4, endpoint=False, retstep=True), [((),)]),
        Op("fromfunction", lambda: fnp.fromfunction(lambda i, j: i * 3 + j, (2, 3), dtype=int),
           lambda: np.fromfunction(lambda i, j: i * 3 + j, (2, 3), dtype=int), [()], out="int", **c),
        Op("frombuffer", lambda: fnp.frombuffer(b"\x01\x02\x03", dtype=np.uint8),
           lambda: np.frombuffer(b"\x01\x02\x03", dtype=np.uint8), [()], out="none", **c),
        Op("fromstring", lambda: fnp.fromstring("1.5 2 3", sep=" "), lambda: np.fromstring("1.5 2 3", sep=" "), [()],
           **c),
        Op("copy", fnp.copy, np.copy, UNARY),
        Op("bartlett", lambda: fnp.bartlett(6), lambda: np.bartlett(6), [()], **c),
        Op("blackman", lambda: fnp.blackman(6), lambda: np.blackman(6), [()], **c),
        Op("hamming", lambda: fnp.hamming(6), lambda: np.hamming(6), [()], **c),
        Op("hanning", lambda: fnp.hanning(6), lambda: np.hanning(6), [()], **c),
        Op("kaiser", lambda: fnp.kaiser(6, 3.0), lambda: np.kaiser(6, 3.0), [()], **c),
        Op("kaiser[traced beta]", lambda b: fnp.kaiser(5, b), lambda b: np.kaiser(5, b), [((),)], positive,
           transforms=True),
    ]


OPS = _elementwise() + _bits() + _predicates() + _reductions() + _functional() + _creation()

PUBLIC = """acos acosh arccosh arcsinh arctanh asin asinh atan atan2 atanh cbrt copysign deg2rad degrees rad2deg
radians divmod fabs float_power fmax fmin fmod frexp ldexp gcd lcm heaviside hypot i0 logaddexp logaddexp2 log10
modf nan_to_num nextafter pow rint signbit sinc spacing trunc isinf isneginf isposinf
bitwise_and bitwise_or bitwise_xor bitwise_not bitwise_invert invert bitwise_count bitwise_left_shift
bitwise_right_shift left_shift right_shift all any allclose isclose array_equal array_equiv
empty empty_like identity tri logspace geomspace fromfunction frombuffer fromstring copy bartlett blackman hamming
hanning kaiser vectorize apply_along_axis apply_over_axes frompyfunc""".split()
