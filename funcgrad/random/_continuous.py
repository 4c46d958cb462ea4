"""uniform, normal and the continuous laws that transform them; bernoulli and randint."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import funcgrad.lax as lax
import funcgrad.numpy as fnp
from funcgrad import dtypes as _dtypes
from funcgrad.core import Array, Tracer, describe
from funcgrad.dtypes import canonicalize_dtype, default_float_dtype, default_int_dtype
from funcgrad.lax import convert_element_type as convert
from funcgrad.random._keys import (_SQRT2, _U32, _as, _check_broadcast, _check_key, _float_dtype, _int_dtype,
                                   _no_sharding, _numel, _random_bits, _shape, _split2, _start)


# --------------------------------------------------------------------------
# Continuous distributions
# --------------------------------------------------------------------------


def _unit_floats(k: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """Floats uniform on [0, 1): random mantissa bits under the exponent of 1.0, minus 1."""
    info = _dtypes.finfo(dtype)
    nbits, nmant = info.bits, info.nmant
    word = _random_bits(k, nbits, _numel(shape))
    one_bits = int(np.array(1.0, dtype).view(f"uint{nbits}"))
    mantissa = lax.shift_right_logical(word, nbits - nmant)
    floats = lax.bitcast_convert_type(lax.bitwise_or(mantissa, one_bits), dtype) - 1.0
    return fnp.reshape(floats, shape)


def uniform(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, minval: Any = 0.0,
            maxval: Any = 1.0, *, out_sharding: Any = None) -> Any:
    """Floats uniform on ``[minval, maxval)`` (``minval``/``maxval`` broadcast into ``shape``).

    >>> x = random.uniform(random.key(0), (1000,), minval=-1.0, maxval=1.0)   # f32[1000] in [-1, 1)
    """
    k = _check_key(key, "uniform")
    _no_sharding(out_sharding, "uniform")
    shape = _shape(shape, "uniform")
    dtype = _float_dtype(dtype, "uniform")
    minval, maxval = _as(minval, dtype, "uniform", "minval"), _as(maxval, dtype, "uniform", "maxval")
    _check_broadcast("uniform", shape, minval, maxval)
    out = _unit_floats(k, shape, dtype) * (maxval - minval) + minval
    # Rounding in the line above can reach maxval itself; keep the interval
    # half-open, and never go below minval (the product can round down).
    top = fnp.nextafter(fnp.stop_gradient(maxval), -np.inf)
    out = fnp.maximum(minval, fnp.minimum(out, top))
    return fnp.broadcast_to(out, shape)


def normal(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Standard normal floats (inverse-erf method: ``sqrt(2) * erf_inv(u)``, ``u`` uniform on (-1, 1)).

    >>> z = random.normal(random.key(0), (2, 3))        # f32[2,3]
    """
    k = _check_key(key, "normal")
    _no_sharding(out_sharding, "normal")
    shape = _shape(shape, "normal")
    dtype = _float_dtype(dtype, "normal")
    # Just above -1, so erf_inv never sees -1 (which would give -inf).
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = uniform(k, shape, dtype, lo, 1.0)
    # erf_inv computes float16 in float32: round back to the requested dtype.
    return convert(lax.erf_inv(u) * _SQRT2, dtype)


def truncated_normal(key: Any, lower: Any, upper: Any, shape: Sequence[int] | None = None,
                     dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Standard normals conditioned on ``lower < x < upper`` (bounds broadcast; may be +-inf).

    Sampled exactly by inverting the CDF on the sub-interval (no rejection
    loop); bounds deep in one tail (|bound| > ~5 in float32) lose precision
    because ``erf`` rounds to +-1 there.

    >>> x = random.truncated_normal(random.key(0), -1.0, 2.0, (1000,))     # f32[1000] in (-1, 2)
    """
    k, dtype = _start("truncated_normal", key, dtype, out_sharding)
    lower = _as(lower, dtype, "truncated_normal", "lower")
    upper = _as(upper, dtype, "truncated_normal", "upper")
    if shape is None:
        shape = tuple(np.broadcast_shapes(lower.shape, upper.shape))
    shape = _shape(shape, "truncated_normal")
    _check_broadcast("truncated_normal", shape, lower, upper)
    a = lax.erf(lower * (1.0 / _SQRT2))
    b = lax.erf(upper * (1.0 / _SQRT2))
    u = uniform(k, shape, dtype, a, b)
    out = lax.erf_inv(u) * _SQRT2
    # erf/erf_inv round-trips can step just outside the bounds: clamp inside.
    lo = fnp.nextafter(fnp.stop_gradient(lower), np.inf)
    hi = fnp.nextafter(fnp.stop_gradient(upper), -np.inf)
    # erf/erf_inv compute float16 in float32: clamp and round in the requested dtype.
    return fnp.minimum(fnp.maximum(convert(out, dtype), lo), hi)


def gumbel(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, mode: str | None = None, *,
           out_sharding: Any = None) -> Any:
    """Standard Gumbel floats, ``-log(-log(u))`` with ``u`` uniform on [tiny, 1) (JAX's ``mode="low"``).

    ``mode="high"`` builds ``u`` from two uniforms (finer near 0, for
    probabilities below ~1e-7 in float32), and ``"highest"`` (float32; other
    dtypes use ``"high"``) from 64 random bits, as JAX.

    >>> g = random.gumbel(random.key(0), (5,))          # f32[5]
    """
    k = _check_key(key, "gumbel")
    _no_sharding(out_sharding, "gumbel")
    shape = _shape(shape, "gumbel")
    dtype = _float_dtype(dtype, "gumbel")
    mode = "low" if mode is None else mode
    if mode not in ("low", "high", "highest"):
        raise ValueError(f"random.gumbel: mode must be 'low', 'high' or 'highest', got {mode!r}")
    info = _dtypes.finfo(dtype)
    if mode == "highest" and dtype == np.float32:
        return _gumbel_highest(k, shape)
    if mode in ("high", "highest"):
        both = uniform(k, (2,) + shape, dtype)
        high, low = both[0], both[1]
        x = fnp.where(high >= 0.5, high, high + 2.0 ** -info.nmant * low + float(info.tiny))
        return -fnp.log(-fnp.log1p(-x))
    u = uniform(k, shape, dtype, float(info.tiny), 1.0)
    return -fnp.log(-fnp.log(u))


# --------------------------------------------------------------------------
# Discrete distributions
# --------------------------------------------------------------------------


def _clz32(x: Any) -> Any:
    """Count leading zero bits of uint32 words (32 for 0), by a branch-free binary search."""
    n = fnp.zeros(x.shape, _U32)
    y = x
    for step in (16, 8, 4, 2, 1):
        top_clear = y < np.uint32(1 << (32 - step))
        n = fnp.where(top_clear, n + np.uint32(step), n)
        y = fnp.where(top_clear, lax.shift_left(y, np.uint32(step)), y)
    return fnp.where(x == 0, np.uint32(32), n)


def _pair_to_float32(hi: Any, lo: Any) -> Any:
    """The 64-bit fixed-point fraction ``(hi, lo) / 2**64`` rounded down to float32 (JAX's ``_safe_int_to_float``)."""
    hiclz, loclz = _clz32(hi), _clz32(lo)
    mantissa = lax.bitwise_or(lax.shift_left(hi, hiclz),
                              fnp.where(hiclz == 32, lax.shift_left(lo, loclz),
                                        lax.shift_right_logical(lo, np.uint32(32) - hiclz)))
    mantissa = lax.bitwise_and(lax.shift_right_logical(mantissa, np.uint32(8)), np.uint32((1 << 23) - 1))
    lead = fnp.where(hiclz == 32, np.uint32(32) + loclz, hiclz)
    exp = lax.shift_left(np.uint32(126) - lead, np.uint32(23))    # wraps like JAX's uint32 arithmetic
    exp = lax.bitwise_and(exp, np.uint32((1 << 30) - (1 << 22)))
    return lax.bitcast_convert_type(lax.bitwise_or(exp, mantissa), np.float32)


def _gumbel_highest(k: Any, shape: tuple[int, ...]) -> Any:
    """JAX's ``mode="highest"`` float32 Gumbel: a uniform from 64 random bits, log1p on the lower half."""
    words = fnp.reshape(_random_bits(k, 32, 2 * _numel(shape)), (2,) + shape)
    neg = lax.bitwise_not(words)
    lo_neg = neg[1]
    carry = fnp.stack([convert(lo_neg == np.uint32(0xFFFFFFFF), _U32), fnp.ones(shape, _U32)])
    neg = neg + carry                        # the 64-bit two's complement: 1 - u in fixed point
    flip = words[0] < np.uint32(1 << 31)
    chosen = fnp.where(flip, words, neg)
    x = _pair_to_float32(chosen[0], chosen[1])
    return fnp.where(flip, -fnp.log(-fnp.log1p(-x)), -fnp.log(-fnp.log(x)))


def bernoulli(key: Any, p: Any = 0.5, shape: Sequence[int] | None = None, mode: str = "low", *,
              out_sharding: Any = None) -> Any:
    """Booleans that are True with probability ``p`` (``p`` broadcasts into ``shape``).

    ``mode="high"`` compares against two uniforms (resolution 2**-46 in
    float32 instead of 2**-23), as JAX.

    >>> b = random.bernoulli(random.key(0), 0.3, (100,))     # bool[100], about 30 True
    """
    k = _check_key(key, "bernoulli")
    _no_sharding(out_sharding, "bernoulli")
    if mode not in ("high", "low"):
        raise ValueError(f"random.bernoulli: got mode={mode!r}, expected 'high' or 'low'")
    if isinstance(p, (Array, Tracer)) and _dtypes.kind(p.dtype) != "f":
        raise TypeError(f"random.bernoulli: the probability p must have a floating dtype, got {describe(p)}")
    p = p if isinstance(p, (Array, Tracer)) else _as(p, default_float_dtype(), "bernoulli", "p")
    shape = tuple(p.shape) if shape is None else _shape(shape, "bernoulli")
    _check_broadcast("bernoulli", shape, p)
    if mode == "high":
        both = uniform(k, (2,) + shape, p.dtype)
        u1, u2 = both[0], both[1] * 2.0 ** -_dtypes.finfo(p.dtype).nmant
        return u2 < p - u1
    return uniform(k, shape, p.dtype) < p


def _int_bound(value: Any, dtype: np.dtype, info: np.iinfo) -> Any:
    if isinstance(value, (Array, Tracer)):
        if value.dtype.kind not in "iub":
            raise TypeError(f"random.randint: bounds must be integers, got {describe(value)}")
        return convert(value, dtype)
    value = np.asarray(value)
    if value.dtype.kind not in "iub":
        raise TypeError(f"random.randint: bounds must be integers, got {value.dtype}")
    # Clip in Python/int64 first so out-of-range bounds saturate instead of wrapping.
    return fnp.asarray(np.array(np.clip(value.astype(object), info.min, info.max), dtype=object).astype(dtype))


def randint(key: Any, shape: Sequence[int] | int, minval: Any, maxval: Any, dtype: Any = None, *,
            out_sharding: Any = None) -> Any:
    """Integers uniform on ``[minval, maxval)`` (bounds broadcast into ``shape``; JAX's algorithm).

    Two random words per number are combined modulo the span, so the bias
    is below 2**-32 relative even for spans near 2**32.  ``maxval`` one past
    the dtype's largest value (e.g. ``randint(k, s, 0, 256, uint8)``) covers
    the whole range when given as a Python int.

    >>> d = random.randint(random.key(0), (10,), 1, 7)   # i32[10], dice rolls in 1..6
    """
    k = _check_key(key, "randint")
    _no_sharding(out_sharding, "randint")
    shape = _shape(shape, "randint")
    dtype = _int_dtype(dtype, "randint", TypeError)
    info = np.iinfo(dtype)
    nbits = info.bits
    unsigned = np.dtype(f"uint{nbits}")
    # Known only for concrete bounds: maxval beyond the dtype, i.e. the span
    # includes the largest value.
    past_top = not isinstance(maxval, (Array, Tracer)) and bool(np.any(np.asarray(maxval) > info.max))
    lo, hi = _int_bound(minval, dtype, info), _int_bound(maxval, dtype, info)
    _check_broadcast("randint", shape, lo, hi)
    k1, k2 = _split2(k)
    n = _numel(shape)
    higher = fnp.reshape(_random_bits(k1, nbits, n), shape)
    lower = fnp.reshape(_random_bits(k2, nbits, n), shape)

    # span = hi - lo as an unsigned number (exact even when hi - lo overflows
    # the signed type); an empty range returns lo, like JAX.
    span = convert(hi - lo, unsigned)
    span = fnp.where(hi <= lo, np.array(1, unsigned), span)
    if past_top:
        span = fnp.where(hi > lo, span + np.array(1, unsigned), span)
        # The full range wraps the span to 0: every bit pattern is a sample.
        full = fnp.broadcast_to(span == 0, shape)
        span = fnp.where(span == 0, np.array(1, unsigned), span)
    # offset = (higher * 2**nbits + lower) mod span, without 2*nbits-bit integers.
    multiplier = fnp.mod(np.array(2 ** (nbits // 2), unsigned), span)
    multiplier = fnp.mod(multiplier * multiplier, span)
    offset = fnp.mod(fnp.mod(higher, span) * multiplier + fnp.mod(lower, span), span)
    if past_top:
        offset = fnp.where(full, lower, offset)   # as XLA: rem by 0 keeps the value, so JAX returns the low word
    return fnp.broadcast_to(lo + convert(offset, dtype), shape)


# --------------------------------------------------------------------------
# More continuous distributions (JAX's algorithms: the same numbers)
# --------------------------------------------------------------------------


def _params(name: str, shape: Any, dtype: np.dtype, **params: Any) -> tuple[tuple[int, ...], list]:
    """The float parameters as arrays of ``dtype``, and the output shape: ``shape``, or their broadcast shape."""
    arrays = [_as(v, dtype, name, arg) for arg, v in params.items()]
    if shape is None:
        try:
            shape = tuple(np.broadcast_shapes(*(tuple(x.shape) for x in arrays)))
        except ValueError:
            raise ValueError(f"random.{name}: the parameter shapes "
                             f"{', '.join(str(tuple(x.shape)) for x in arrays)} do not broadcast together") from None
    else:
        shape = _shape(shape, name)
        _check_broadcast(name, shape, *arrays)
    return shape, arrays


def exponential(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Standard exponential floats (rate 1): ``-log1p(-u)``.

    >>> e = random.exponential(random.key(0), (3,))          # f32[3], mean 1
    """
    k = _check_key(key, "exponential")
    _no_sharding(out_sharding, "exponential")
    u = uniform(k, _shape(shape, "exponential"), _float_dtype(dtype, "exponential"))
    return -fnp.log1p(-u)


def laplace(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Standard Laplace floats (density ``exp(-|x|) / 2``).

    >>> x = random.laplace(random.key(0), (3,))
    """
    k, dtype = _start("laplace", key, dtype, out_sharding)
    u = uniform(k, _shape(shape, "laplace"), dtype, -1.0 + float(_dtypes.finfo(dtype).epsneg), 1.0)
    return fnp.sign(u) * fnp.log1p(-fnp.abs(u))


def logistic(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Standard logistic floats: ``log(u) - log1p(-u)``.

    >>> x = random.logistic(random.key(0), (3,))
    """
    k, dtype = _start("logistic", key, dtype, out_sharding)
    x = uniform(k, _shape(shape, "logistic"), dtype, float(_dtypes.finfo(dtype).tiny), 1.0)
    return fnp.log(x) - fnp.log1p(-x)


def cauchy(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Standard Cauchy floats: ``tan(pi * (u - 1/2))``.

    >>> x = random.cauchy(random.key(0), (3,))
    """
    k, dtype = _start("cauchy", key, dtype, out_sharding)
    u = uniform(k, _shape(shape, "cauchy"), dtype, float(_dtypes.finfo(dtype).eps), 1.0)
    return fnp.tan(np.pi * (u - 0.5))



def rademacher(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Random signs: -1 or +1 with probability 1/2 each (integers by default).

    >>> random.rademacher(random.key(0), (4,))                # i32[4] of +-1
    Array([-1, -1,  1,  1], dtype=int32)
    """
    k = _check_key(key, "rademacher")
    _no_sharding(out_sharding, "rademacher")
    try:
        dtype = default_int_dtype() if dtype is None else canonicalize_dtype(dtype)
    except TypeError as e:
        raise TypeError(f"random.rademacher: bad dtype {dtype!r:.40}: {e}") from None
    b = convert(bernoulli(k, 0.5, _shape(shape, "rademacher")), dtype)
    return convert(2 * b - 1, dtype)


def pareto(key: Any, b: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
           out_sharding: Any = None) -> Any:
    """Pareto floats with shape ``b`` (support ``[1, inf)``): ``exp(e / b)``, ``e`` exponential.

    >>> x = random.pareto(random.key(0), 3.0, (4,))
    """
    k, dtype = _start("pareto", key, dtype, out_sharding)
    shape, (b,) = _params("pareto", shape, dtype, b=b)
    return fnp.exp(exponential(k, shape, dtype) / b)


def rayleigh(key: Any, scale: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
             out_sharding: Any = None) -> Any:
    """Rayleigh floats: ``scale * sqrt(-2 log u)``.

    >>> x = random.rayleigh(random.key(0), 2.0, (4,))
    """
    k, dtype = _start("rayleigh", key, dtype, out_sharding)
    shape, (scale,) = _params("rayleigh", shape, dtype, scale=scale)
    u = uniform(k, shape, dtype)
    return scale * fnp.sqrt(fnp.log(u) * -2.0)


def maxwell(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Maxwell floats: the length of a standard normal 3-vector.

    >>> x = random.maxwell(random.key(0), (4,))
    """
    k, dtype = _start("maxwell", key, dtype, out_sharding)
    z = normal(k, _shape(shape, "maxwell") + (3,), dtype)
    return fnp.sqrt(fnp.sum(z * z, axis=-1))


def double_sided_maxwell(key: Any, loc: Any, scale: Any, shape: Sequence[int] | int = (), dtype: Any = None) -> Any:
    """Double-sided Maxwell floats: a random sign times a Maxwell sample, times ``scale``, plus ``loc``.

    As in JAX the output shape is ``shape + broadcast(loc, scale).shape``
    (``shape`` is a prefix), or the parameters' shape when ``shape`` is ``()``.

    >>> x = random.double_sided_maxwell(random.key(0), 0.0, 1.0, (4,))
    """
    k, dtype = _start("double_sided_maxwell", key, dtype)
    loc, scale = _as(loc, dtype, "double_sided_maxwell", "loc"), _as(scale, dtype, "double_sided_maxwell", "scale")
    params_shape = tuple(np.broadcast_shapes(tuple(loc.shape), tuple(scale.shape)))
    shape = _shape(shape, "double_sided_maxwell")
    shape = (shape or params_shape) + params_shape if shape else params_shape + params_shape
    k1, k2 = _split2(k)
    return rademacher(k2, shape, dtype) * maxwell(k1, shape, dtype) * scale + loc


def weibull_min(key: Any, scale: Any, concentration: Any, shape: Sequence[int] | int = (), dtype: Any = None) -> Any:
    """Weibull floats (inverse CDF): ``scale * (-log1p(-u)) ** (1 / concentration)``.

    >>> x = random.weibull_min(random.key(0), 1.0, 2.0, (4,))
    """
    k, dtype = _start("weibull_min", key, dtype)
    scale = _as(scale, dtype, "weibull_min", "scale")
    concentration = _as(concentration, dtype, "weibull_min", "concentration")
    u = uniform(k, _shape(shape, "weibull_min"), dtype)
    return fnp.power(-fnp.log1p(-u), 1.0 / concentration) * scale


def lognormal(key: Any, sigma: Any = 1.0, shape: Sequence[int] | None = None, dtype: Any = None, *,
              out_sharding: Any = None) -> Any:
    """Log-normal floats: ``exp(sigma * z)``, ``z`` standard normal.

    >>> x = random.lognormal(random.key(0), 0.5, (4,))
    """
    k, dtype = _start("lognormal", key, dtype, out_sharding)
    shape, (sigma,) = _params("lognormal", shape, dtype, sigma=sigma)
    return fnp.exp(normal(k, shape, dtype) * sigma)


def triangular(key: Any, left: Any, mode: Any, right: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
               out_sharding: Any = None) -> Any:
    """Triangular floats on ``[left, right]`` with peak at ``mode`` (inverse CDF).

    >>> x = random.triangular(random.key(0), 0.0, 0.3, 1.0, (4,))
    """
    k, dtype = _start("triangular", key, dtype, out_sharding)
    shape, (left, mode, right) = _params("triangular", shape, dtype, left=left, mode=mode, right=right)
    fc = (mode - left) / (right - left)
    u = uniform(k, shape, dtype)
    out1 = left + fnp.sqrt(u * (right - left) * (mode - left))
    out2 = right - fnp.sqrt((1 - u) * (right - left) * (right - mode))
    return fnp.where(u < fc, out1, out2)


def wald(key: Any, mean: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
         out_sharding: Any = None) -> Any:
    """Wald (inverse Gaussian, scale 1) floats with the given ``mean`` (Michael-Schucany-Haas).

    >>> x = random.wald(random.key(0), 2.0, (4,))
    """
    k, dtype = _start("wald", key, dtype, out_sharding)
    shape, (mean,) = _params("wald", shape, dtype, mean=mean)
    k1, k2 = _split2(k)
    mean = fnp.broadcast_to(mean, shape)
    v = normal(k1, shape, dtype)
    z = uniform(k2, shape, dtype)
    y = v * v
    mean_sq = mean * mean
    sqrt_term = fnp.sqrt(4 * mean * y + mean_sq * (y * y))
    x = mean + mean_sq * y / 2 - mean / 2 * sqrt_term
    return fnp.where(z <= mean / (mean + x), x, mean_sq / x)


def geometric(key: Any, p: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
              out_sharding: Any = None) -> Any:
    """Geometric integers: the number of Bernoulli(``p``) trials up to the first success (support 1, 2, ...).

    >>> n = random.geometric(random.key(0), 0.25, (4,))       # i32[4], mean 4
    """
    k, dtype = _start("geometric", key, dtype, out_sharding, integer=True)
    fdtype = p.dtype if isinstance(p, (Array, Tracer)) and _dtypes.kind(p.dtype) == "f" else default_float_dtype()
    shape, (p,) = _params("geometric", shape, fdtype, p=p)
    u = uniform(k, shape, fdtype)
    u = fnp.where(u == 0, np.array(1, fdtype), u)   # as JAX: u = 0 read as 1
    g = fnp.floor(fnp.log(u) / fnp.log1p(-p)) + 1
    return convert(fnp.broadcast_to(g, shape), dtype)
