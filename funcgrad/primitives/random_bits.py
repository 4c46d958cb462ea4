"""Primitives behind ``funcgrad.random``: the Threefry hash, bit operations,
bitcasts, argsort and the error function pair.

Random numbers are made from integer bits, so none of the bit primitives
has a derivative: their jvp/vjp rules are left ``None`` and every transform
treats their outputs as constants (as for ``argmax``).  ``erf`` and
``erf_inv`` are ordinary smooth functions and do carry derivative rules, so
``truncated_normal`` stays differentiable in its bounds.

Every primitive here is elementwise with numpy broadcasting except
``argsort`` (one static axis) and ``threefry2x32`` (elementwise, but with two
outputs), so batching (vmap) just lines the mapped axes up at the front.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.special

from funcgrad import _dtypes, _threefry
from funcgrad._core import Primitive
from funcgrad._dtypes import ShapedArray, describe
from funcgrad.primitives.elementwise import (batch_elementwise, binary, broadcast_shapes, exp, mul, shape_of,
                                             unary)
from funcgrad.primitives.shape import moveaxis

_U32 = np.dtype(np.uint32)

# --------------------------------------------------------------------------
# threefry2x32: (key0, key1, count0, count1) -> (hash0, hash1), all uint32
# --------------------------------------------------------------------------

threefry2x32_p = Primitive("threefry2x32", multiple_results=True)
threefry2x32_p.impl = lambda k0, k1, x0, x1: list(_threefry.threefry2x32(k0, k1, x0, x1))


def _threefry_aval(k0: Any, k1: Any, x0: Any, x1: Any) -> list[ShapedArray]:
    # Python ints would be silently promoted (and could be out of range):
    # callers must hand over uint32 arrays.
    for a in (k0, k1, x0, x1):
        if isinstance(a, (bool, int, float)) or np.dtype(a.dtype) != _U32:
            raise TypeError(f"threefry2x32: every operand must be a uint32 array, got "
                            f"{', '.join(describe(b) for b in (k0, k1, x0, x1))}")
    shape = broadcast_shapes("threefry2x32", k0, k1, x0, x1)
    return [ShapedArray(shape, _U32), ShapedArray(shape, _U32)]


def _threefry_batch(values, dims, size):
    # The elementwise rule aligns the mapped axes; it binds the primitive
    # once, and we only need to say that both outputs are mapped on axis 0.
    outs, _ = batch_elementwise(threefry2x32_p)(values, dims, size)
    return outs, [0, 0]


threefry2x32_p.abstract_eval = _threefry_aval
threefry2x32_p.batch = _threefry_batch


def threefry2x32(k0: Any, k1: Any, x0: Any, x1: Any) -> list:
    """Hash uint32 counters ``(x0, x1)`` under the key words ``(k0, k1)`` (broadcast together).

    >>> k = fnp.array([0, 42], dtype=fnp.uint32)
    >>> y0, y1 = threefry2x32(k[0], k[1], fnp.arange(4, dtype=fnp.uint32), fnp.zeros(4, fnp.uint32))
    >>> y0.shape, y0.dtype
    ((4,), dtype('uint32'))
    """
    return threefry2x32_p.bind(k0, k1, x0, x1)


# --------------------------------------------------------------------------
# Bit operations on unsigned integers (no derivatives)
# --------------------------------------------------------------------------


def _unsigned_dtype(name: str):
    def rule(*args: Any) -> np.dtype:
        dtype = _dtypes.result_type(*args)
        if dtype.kind != "u":
            raise TypeError(f"{name}: operands must be unsigned integers, got "
                            f"{', '.join(describe(a) for a in args)}")
        return dtype
    return rule


def _shift_right_logical(x: Any, s: Any) -> np.ndarray:
    # Shifting by the bit width or more is undefined in C (numpy inherits
    # that); XLA defines it as 0, and so do we.
    x = np.asarray(x)
    bits = x.dtype.itemsize * 8
    s = np.asarray(s, dtype=x.dtype)
    return np.where(s < bits, np.right_shift(x, np.minimum(s, bits - 1).astype(x.dtype)), 0).astype(x.dtype)


def _shift_left(x: Any, s: Any) -> np.ndarray:
    x = np.asarray(x)
    bits = x.dtype.itemsize * 8
    s = np.asarray(s, dtype=x.dtype)
    return np.where(s < bits, np.left_shift(x, np.minimum(s, bits - 1).astype(x.dtype)), 0).astype(x.dtype)


shift_right_logical_p = binary("shift_right_logical", _shift_right_logical, None, None,
                               _unsigned_dtype("shift_right_logical"))
shift_left_p = binary("shift_left", _shift_left, None, None, _unsigned_dtype("shift_left"))
bitwise_and_p = binary("bitwise_and", np.bitwise_and, None, None, _unsigned_dtype("bitwise_and"))
bitwise_or_p = binary("bitwise_or", np.bitwise_or, None, None, _unsigned_dtype("bitwise_or"))


def shift_right_logical(x: Any, s: Any) -> Any:
    """``x >> s`` filling with zeros (``x`` unsigned; ``s >= bits`` gives 0).

    >>> lax.shift_right_logical(fnp.array([8, 7], fnp.uint32), fnp.array([2, 1], fnp.uint32))
    Array([2, 3], dtype=uint32)
    """
    return shift_right_logical_p.bind(x, s)


def shift_left(x: Any, s: Any) -> Any:
    """``x << s`` modulo ``2**bits`` (``x`` unsigned; ``s >= bits`` gives 0).

    >>> lax.shift_left(fnp.array([1, 3], fnp.uint32), fnp.array([2, 1], fnp.uint32))
    Array([4, 6], dtype=uint32)
    """
    return shift_left_p.bind(x, s)


def bitwise_and(x: Any, y: Any) -> Any:
    """Elementwise ``x & y`` for integers and bools.

    >>> lax.bitwise_and(fnp.array([12, 5]), fnp.array([10, 3]))
    Array([8, 1], dtype=int32)
    """
    return bitwise_and_p.bind(x, y)


def bitwise_or(x: Any, y: Any) -> Any:
    """Elementwise ``x | y`` for integers and bools.

    >>> lax.bitwise_or(fnp.array([12, 5]), fnp.array([10, 3]))
    Array([14,  7], dtype=int32)
    """
    return bitwise_or_p.bind(x, y)


# --------------------------------------------------------------------------
# bitcast_convert_type: reinterpret the bits (same width), e.g. u32 -> f32
# --------------------------------------------------------------------------

bitcast_convert_type_p = Primitive("bitcast_convert_type")
# view() needs a contiguous buffer when the element type changes; ascontiguousarray makes 0-d inputs 1-d,
# so the shape is put back (the element sizes are equal: the aval rule checks).
bitcast_convert_type_p.impl = lambda x, dtype: np.ascontiguousarray(x).view(dtype).reshape(np.shape(x))


def _bitcast_aval(x: Any, dtype: np.dtype) -> ShapedArray:
    if isinstance(x, (bool, int, float)) or np.dtype(x.dtype).itemsize != dtype.itemsize:
        raise TypeError(f"bitcast_convert_type: cannot reinterpret {describe(x)} as {dtype}: "
                        "the element sizes differ")
    return ShapedArray(shape_of(x), dtype)


bitcast_convert_type_p.abstract_eval = _bitcast_aval
bitcast_convert_type_p.batch = lambda values, dims, size, dtype: (
    bitcast_convert_type_p.bind(values[0], dtype=dtype), dims[0])


def bitcast_convert_type(x: Any, dtype: Any) -> Any:
    """The bits of ``x`` read as ``dtype`` of the same width (u32[n] -> f32[n]).

    >>> lax.bitcast_convert_type(fnp.array([1.0], fnp.float32), fnp.uint32)
    Array([1065353216], dtype=uint32)
    """
    return bitcast_convert_type_p.bind(x, dtype=np.dtype(dtype))


# --------------------------------------------------------------------------
# argsort along one axis (stable; integer output, no derivative)
# --------------------------------------------------------------------------

argsort_p = Primitive("argsort")
# A stable sort makes ties (rare with 32-bit keys) resolve the same way on
# every machine, so permutations are reproducible.
argsort_p.impl = lambda x, axis: np.argsort(x, axis=axis, kind="stable")


def _argsort_aval(x: Any, axis: int) -> ShapedArray:
    shape = shape_of(x)
    if not 0 <= axis < len(shape):
        raise ValueError(f"argsort: axis {axis} is out of range for an array {describe(x)}")
    return ShapedArray(shape, _dtypes.int_)


def _argsort_batch(values, dims, size, axis):
    return argsort_p.bind(moveaxis(values[0], dims[0], 0), axis=axis + 1), 0


argsort_p.abstract_eval = _argsort_aval
argsort_p.batch = _argsort_batch


def argsort(x: Any, axis: int) -> Any:
    """Indices that sort ``x`` along ``axis`` (non-negative), ties in order of position.

    >>> lax.argsort(fnp.array([3.0, 1.0, 2.0]), 0)
    Array([1, 2, 0], dtype=int32)
    """
    return argsort_p.bind(x, axis=axis)


# --------------------------------------------------------------------------
# erf and its inverse (differentiable; the inverse makes normals from uniforms)
# --------------------------------------------------------------------------

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_TWO = math.sqrt(math.pi) / 2.0


def _float_unary(f):
    # scipy keeps float32 as float32; integers are computed in the default float.
    def impl(x):
        x = np.asarray(x)
        return f(x if _dtypes.kind(x.dtype) == "f" else x.astype(_dtypes.float_))
    return impl


def _float_dtype(x: Any) -> np.dtype:
    return _dtypes.inexact(_dtypes.result_type(x))


erf_p = unary("erf", _float_unary(scipy.special.erf),
              lambda x, y: mul(exp(mul(mul(x, x), -1.0)), _TWO_OVER_SQRT_PI), _float_dtype)
erf_inv_p = unary("erf_inv", _float_unary(scipy.special.erfinv),
                  lambda x, y: mul(exp(mul(y, y)), _SQRT_PI_OVER_TWO), _float_dtype)

# nextafter(x, y): the float after x towards y (used to keep samples strictly
# inside open bounds); a step function, so it has no derivative.
nextafter_p = binary("nextafter", np.nextafter, None, None)


def erf(x: Any) -> Any:
    """The error function ``2/sqrt(pi) * integral_0^x exp(-t**2) dt``, elementwise.

    >>> lax.erf(fnp.array([0.0, 1.0]))
    Array([0. , 0.8427], dtype=float32)
    """
    return erf_p.bind(x)


def erf_inv(x: Any) -> Any:
    """Inverse of ``erf`` on (-1, 1); ``+-inf`` at ``+-1``.

    >>> lax.erf_inv(fnp.array([0.25, 0.5]))
    Array([0.2253, 0.4769], dtype=float32)
    """
    return erf_inv_p.bind(x)


def nextafter(x: Any, y: Any) -> Any:
    """Elementwise ``nextafter``: the next float after ``x`` towards ``y``.

    >>> lax.nextafter(fnp.array([1.0, -3.0]), fnp.array([2.0, 2.0]))
    Array([ 1.0000, -3.0000], dtype=float32)
    """
    return nextafter_p.bind(x, y)


# --------------------------------------------------------------------------
# random_gamma_grad(a, x): d x / d a for x ~ Gamma(a) at fixed CDF value
# (implicit reparameterization: -(dP/da)(a, x) / p(x; a))
# --------------------------------------------------------------------------


def _gamma_grad_impl(a: Any, x: Any) -> np.ndarray:
    """-(d/da P(a, x)) / pdf(x; a) in float64, rounded to the operands' float type.

    d/da of the regularized incomplete gamma function by a Richardson-extrapolated
    central difference (relative step 1e-3, error ~1e-12 relative), taken on P below the
    mode and on Q = 1 - P above it so that each tail keeps its relative accuracy.
    """
    a, x = np.asarray(a), np.asarray(x)
    dtype = np.result_type(a, x)
    dtype = dtype if _dtypes.kind(dtype) == "f" else np.dtype(_dtypes.float_)
    a64, x64 = np.broadcast_arrays(a.astype(np.float64), x.astype(np.float64))
    lower = x64 < a64
    h = 1e-3 * a64

    def dp(step):
        plus = np.where(lower, scipy.special.gammainc(a64 + step, x64), -scipy.special.gammaincc(a64 + step, x64))
        minus = np.where(lower, scipy.special.gammainc(a64 - step, x64), -scipy.special.gammaincc(a64 - step, x64))
        return (plus - minus) / (2 * step)

    with np.errstate(all="ignore"):
        d_a = (4 * dp(h / 2) - dp(h)) / 3
        log_pdf = (a64 - 1) * np.log(x64) - x64 - scipy.special.gammaln(a64)
        out = np.where(x64 > 0, -d_a / np.exp(log_pdf), 0.0)
        out = np.where(np.isfinite(out), out, 0.0)
    return out.astype(dtype)


def _no_third_derivative(*_: Any) -> Any:
    raise NotImplementedError("random_gamma_grad: third derivatives of gamma samples with respect to a are not "
                              "implemented")


def _gamma_grad_parts(a: Any, x: Any) -> tuple:
    """Float64 ``(a, x, g, log pdf, digamma(a), dtype)`` shared by the partials of random_gamma_grad."""
    dtype = np.result_type(np.asarray(a), np.asarray(x))
    dtype = dtype if _dtypes.kind(dtype) == "f" else np.dtype(_dtypes.float_)
    a64, x64 = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    g = _gamma_grad_impl(a64, x64).astype(np.float64)
    with np.errstate(all="ignore"):
        log_pdf = (a64 - 1) * np.log(x64) - x64 - scipy.special.gammaln(a64)
    return a64, x64, g, log_pdf, scipy.special.digamma(a64), dtype


def _gamma_grad_dx_impl(a: Any, x: Any) -> np.ndarray:
    """d g / d x for g = random_gamma_grad(a, x): -(log x - digamma(a)) - g ((a - 1) / x - 1)."""
    a64, x64, g, _, psi, dtype = _gamma_grad_parts(a, x)
    with np.errstate(all="ignore"):
        out = -(np.log(x64) - psi) - g * ((a64 - 1) / x64 - 1)
        out = np.where(np.isfinite(out) & (x64 > 0), out, 0.0)
    return out.astype(dtype)


def _gamma_grad_da_impl(a: Any, x: Any) -> np.ndarray:
    """d g / d a: -(d2P/da2) / pdf - g (log x - digamma(a)), d2P/da2 by Richardson-extrapolated second differences
    (on P below the mode, on -Q above it)."""
    a64, x64, g, log_pdf, psi, dtype = _gamma_grad_parts(a, x)
    lower = x64 < a64

    def cdf(aa):
        return np.where(lower, scipy.special.gammainc(aa, x64), -scipy.special.gammaincc(aa, x64))

    def d2(step):
        return (cdf(a64 + step) - 2 * cdf(a64) + cdf(a64 - step)) / (step * step)

    h = 1e-2 * a64
    with np.errstate(all="ignore"):
        p_aa = (4 * d2(h / 2) - d2(h)) / 3
        out = -p_aa / np.exp(log_pdf) - g * (np.log(x64) - psi)
        out = np.where(np.isfinite(out) & (x64 > 0), out, 0.0)
    return out.astype(dtype)


_float_result = lambda a, x: _dtypes.inexact(_dtypes.result_type(a, x))  # noqa: E731
random_gamma_grad_da_p = binary("random_gamma_grad_da", _gamma_grad_da_impl, _no_third_derivative,
                                _no_third_derivative, _float_result)
random_gamma_grad_dx_p = binary("random_gamma_grad_dx", _gamma_grad_dx_impl, _no_third_derivative,
                                _no_third_derivative, _float_result)
random_gamma_grad_p = binary("random_gamma_grad", _gamma_grad_impl,
                             lambda a, x, g: random_gamma_grad_da_p.bind(a, x),
                             lambda a, x, g: random_gamma_grad_dx_p.bind(a, x), _float_result)


def random_gamma_grad(a: Any, x: Any) -> Any:
    """The derivative of a ``Gamma(a)`` sample ``x`` w.r.t. ``a`` at a fixed uniform (``jax.lax.random_gamma_grad``).

    >>> random_gamma_grad(fnp.array(2.0), fnp.array(1.5))     # f32[]
    Array(0.9366, dtype=float32)
    """
    return random_gamma_grad_p.bind(a, x)
