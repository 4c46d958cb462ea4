"""Vectorisable scalar ``exp`` for numba kernels.

numba compiles ``math.exp`` / ``np.exp`` to scalar libm calls (no SVML in
this LLVM), which caps a loop at ~0.3-0.4 G elements/s per core and blocks
vectorisation of the surrounding loop. ``exp_f32`` / ``exp_f64`` below are
plain arithmetic that LLVM vectorises when inlined into a loop:

1. clamp x to the range where the result is a normal number,
2. Cody-Waite range reduction ``x = n*ln2 + r``, ``|r| <= ln2/2``, with
   ``n = floor(x*log2(e) + 0.5)`` using ``np.floor`` (``math.floor`` returns
   int64 and silently promotes a float32 loop to float64),
3. a polynomial for ``exp(r)`` (Cephes ``expf`` minimax for float32, Taylor
   degree 12 for float64),
4. scaling by ``2**n`` through exponent bit-casts (two factors, so that
   n = 128 / 1024 still overflows cleanly to inf),
5. special values fixed with integer bit tests, which fast-math flags cannot
   fold away: NaN -> NaN, x below ln(FLT_MIN) / ln(DBL_MIN) (including -inf)
   -> exactly 0 (results that would be subnormal are flushed to 0: softmax
   never needs them and producing subnormals is slow), x above the overflow
   threshold (including +inf) -> inf.

Use them from ``@njit(fastmath=True)`` code: they are ``inline="always"``, so
they are inlined at numba-IR level and take the caller's fast-math flags.

Measured with ``python -m funcgrad.backends.cpu._fastmath`` (1 thread,
4096-16384 elements in cache, x in [-30, 0], interleaved medians) on this
project's 2-vCPU Intel Xeon @ 2.5 GHz (AVX-512; shared and noisy, so treat
throughput as +-30%):

=========  ====================  =====================================
function   throughput            max relative error (vs long double)
=========  ====================  =====================================
exp_f32    ~1.0 G elem/s         1.2e-7 on [-87.3, 88.7] (~1 ulp)
exp_f64    ~0.4 G elem/s         4.1e-16 on [-708, 709] (~2 ulp)
np.exp     ~0.9 f32 / 0.6 f64    (numpy's own AVX-512 loops; reference)
=========  ====================  =====================================

The point is not to beat ``np.exp`` on whole arrays but to have an exp that
vectorises *inside* fused numba loops (libm ``math.exp`` there runs at
~0.3 G/s and keeps the loop scalar). The range reduction uses two
``llvm.fma`` calls because fast-math reassociation otherwise folds the
Cody-Waite steps ``x - n*C1 - n*C2`` into ``x - n*(C1+C2)`` (float32 error
then 3e-7, float64 2e-14); ``llvm.arithmetic.fence`` would stop that too
but blocks vectorisation. float32 machines without FMA would get libm fma
calls: all x86-64 CI runners here have FMA3.
"""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["exp_f32", "exp_f64", "tanh_f32", "bf16_round", "bf16_round_opaque", "bf16_bits", "bf16_widen"]


# --------------------------------------------------------------------------
# LLVM intrinsics: integer/bit work that numba's typing would otherwise widen
# to int64 (int32 + int32 -> int64 in numba), which would halve the vector
# width of a float32 loop.
# --------------------------------------------------------------------------

def _ldexp_codegen(fty, ity, mant_bits):
    """Build ``p * 2**n`` for ``p`` in [0.5, 2) and integral float ``n``.

    ``n`` is split into ``n1 = n >> 1`` and ``n2 = n - n1``: ``2**n1`` is
    added to p's exponent field with an integer add (exact, and out of reach
    of fast-math reassociation), ``2**n2`` is one float multiply, so n up to
    the overflow edge gives inf and n down to the underflow edge stays
    correct. (A product of two bit-cast powers, ``p * 2**n1 * 2**n2``, is
    reassociated under fast-math to ``p * (2**n1 * 2**n2)``, which overflows
    at n = 128.)
    """
    bias = (1 << (ity.width - mant_bits - 2)) - 1

    def codegen(context, builder, signature, args):
        p, n = args
        ni = builder.fptosi(n, ity)
        n1 = builder.ashr(ni, ir.Constant(ity, 1))
        n2 = builder.sub(ni, n1)
        pb = builder.add(builder.bitcast(p, ity),
                         builder.shl(n1, ir.Constant(ity, mant_bits)))
        e2 = builder.shl(builder.add(n2, ir.Constant(ity, bias)),
                         ir.Constant(ity, mant_bits))
        return builder.fmul(builder.bitcast(pb, fty), builder.bitcast(e2, fty))
    return codegen


def _fma_codegen(fty, name):
    """``llvm.fma``: one rounding, and opaque to fast-math reassociation.

    Written as plain ``x - n*C1 - n*C2``, LLVM's reassociation folds the
    Cody-Waite steps into ``x - n*(C1+C2)`` and loses the extra bits of ln2
    (float32 rel. error 1.2e-7 -> 3e-7, float64 4e-16 -> 2e-14). Two fma
    calls are not folded and still vectorise (``llvm.arithmetic.fence``
    would also stop the fold but blocks vectorisation).
    """
    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(fty, [fty, fty, fty]), name)
        return builder.call(fn, list(args))
    return codegen


@intrinsic
def _fma_f32(typingctx, a, b, c):
    """float32 ``a*b + c`` with one rounding."""
    if not (a == b == c == types.float32):
        return None
    return (types.float32(types.float32, types.float32, types.float32),
            _fma_codegen(ir.FloatType(), "llvm.fma.f32"))


@intrinsic
def _fma_f64(typingctx, a, b, c):
    """float64 ``a*b + c`` with one rounding."""
    if not (a == b == c == types.float64):
        return None
    return (types.float64(types.float64, types.float64, types.float64),
            _fma_codegen(ir.DoubleType(), "llvm.fma.f64"))


@intrinsic
def _ldexp_f32(typingctx, p, n):
    """float32 ``p * 2**n``; p in [0.5, 2), n float32, integral, in [-126, 129]."""
    if p != types.float32 or n != types.float32:
        return None
    sig = types.float32(types.float32, types.float32)
    return sig, _ldexp_codegen(ir.FloatType(), ir.IntType(32), 23)


@intrinsic
def _ldexp_f64(typingctx, p, n):
    """float64 ``p * 2**n``; p in [0.5, 2), n float64, integral, in [-1022, 1025]."""
    if p != types.float64 or n != types.float64:
        return None
    sig = types.float64(types.float64, types.float64)
    return sig, _ldexp_codegen(ir.DoubleType(), ir.IntType(64), 52)


def _fixup_codegen(fty, ity, abs_mask, inf_bits, lo_abs_bits):
    """Select NaN -> x, (x < lo, incl. -inf) -> 0, else y, on integer bits.

    Integer compares are not touched by fast-math flags (``nnan``/``ninf``
    would let LLVM fold ``x != x`` or ``x == -inf`` to false).
    """
    def codegen(context, builder, signature, args):
        x, y = args
        bits = builder.bitcast(x, ity)
        mag = builder.and_(bits, ir.Constant(ity, abs_mask))
        is_nan = builder.icmp_unsigned(">", mag, ir.Constant(ity, inf_bits))
        is_neg = builder.icmp_signed("<", bits, ir.Constant(ity, 0))
        too_small = builder.and_(
            is_neg, builder.icmp_unsigned(">", mag, ir.Constant(ity, lo_abs_bits)))
        y = builder.select(too_small, ir.Constant(fty, 0.0), y)
        return builder.select(is_nan, x, y)
    return codegen


def _f32_bits(v):
    return int(np.array(v, dtype=np.float32).view(np.uint32))


def _f64_bits(v):
    return int(np.array(v, dtype=np.float64).view(np.uint64))


# Below these the result would be subnormal: flush to 0 (see module doc).
_LO32 = -87.33  # ln(FLT_MIN) = -87.3365
_LO64 = -708.39  # ln(DBL_MIN) = -708.3964
# Above these the two-factor scaling overflows to inf by itself.
_HI32 = 89.0  # ln(FLT_MAX) = 88.7228
_HI64 = 710.0  # ln(DBL_MAX) = 709.7827


@intrinsic
def _fixup_f32(typingctx, x, y):
    if x != types.float32 or y != types.float32:
        return None
    sig = types.float32(types.float32, types.float32)
    return sig, _fixup_codegen(ir.FloatType(), ir.IntType(32), 0x7FFFFFFF,
                               0x7F800000, _f32_bits(-_LO32))


@intrinsic
def _fixup_f64(typingctx, x, y):
    if x != types.float64 or y != types.float64:
        return None
    sig = types.float64(types.float64, types.float64)
    return sig, _fixup_codegen(ir.DoubleType(), ir.IntType(64),
                               0x7FFFFFFFFFFFFFFF, 0x7FF0000000000000,
                               _f64_bits(-_LO64))


# --------------------------------------------------------------------------
# Constants, typed so that no float64 sneaks into the float32 path.
# --------------------------------------------------------------------------
_F32_LO = np.float32(_LO32)
_F32_HI = np.float32(_HI32)
_F32_LOG2E = np.float32(1.44269504088896341)
_F32_HALF = np.float32(0.5)
_F32_ONE = np.float32(1.0)
# Cody-Waite split of ln 2 (Cephes): C1 has few mantissa bits, so n*C1 is
# exact for |n| <= 256.
_F32_MC1 = np.float32(-0.693359375)
_F32_MC2 = np.float32(2.12194440e-4)
# Cephes expf minimax coefficients: exp(r) ~ 1 + r + r^2 * P(r).
_F32_P0 = np.float32(1.9875691500e-4)
_F32_P1 = np.float32(1.3981999507e-3)
_F32_P2 = np.float32(8.3334519073e-3)
_F32_P3 = np.float32(4.1665795894e-2)
_F32_P4 = np.float32(1.6666665459e-1)
_F32_P5 = np.float32(5.0000001201e-1)

_F64_LO = _LO64
_F64_HI = _HI64
_F64_LOG2E = 1.4426950408889634074
_F64_MC1 = -6.93145751953125e-1
_F64_MC2 = -1.42860682030941723212e-6


@numba.njit(inline="always", fastmath=True, cache=True)
def exp_f32(x):
    """exp of a float32 scalar, vectorisable; max rel. error ~1.2e-7.

    -inf and x < -87.33 -> 0 (subnormal results flushed), +inf and overflow
    -> inf, NaN -> NaN. Pass a float32 (e.g. an element of a float32 array);
    a float64 argument fails to type the internal intrinsics.
    """
    xc = min(max(x, _F32_LO), _F32_HI)
    n = np.floor(xc * _F32_LOG2E + _F32_HALF)
    r = _fma_f32(n, _F32_MC1, xc)
    r = _fma_f32(n, _F32_MC2, r)
    p = _F32_P0
    p = p * r + _F32_P1
    p = p * r + _F32_P2
    p = p * r + _F32_P3
    p = p * r + _F32_P4
    p = p * r + _F32_P5
    p = (p * r) * r + r + _F32_ONE
    return _fixup_f32(x, _ldexp_f32(p, n))


@numba.njit(inline="always", fastmath=True, cache=True)
def exp_f64(x):
    """exp of a float64 scalar, vectorisable; max rel. error ~2.3e-16.

    -inf and x < -708.39 -> 0 (subnormal results flushed), +inf and overflow
    -> inf, NaN -> NaN.
    """
    xc = min(max(x, _F64_LO), _F64_HI)
    n = np.floor(xc * _F64_LOG2E + 0.5)
    r = _fma_f64(n, _F64_MC1, xc)
    r = _fma_f64(n, _F64_MC2, r)
    # Taylor series to degree 12: truncation error r^13/13! < 2e-16 for
    # |r| <= ln2/2.
    p = 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = (p * r) * r + r + 1.0
    return _fixup_f64(x, _ldexp_f64(p, n))


# Cephes tanhf: an odd minimax polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above.
_F32_TANH_SMALL = np.float32(0.625)
_F32_TWO = np.float32(2.0)
_F32_ZERO = np.float32(0.0)
_F32_T0 = np.float32(-5.70498872745e-3)
_F32_T1 = np.float32(2.06390887954e-2)
_F32_T2 = np.float32(-5.37397155531e-2)
_F32_T3 = np.float32(1.33314422036e-1)
_F32_T4 = np.float32(-3.33332819422e-1)


@numba.njit(inline="always", fastmath=True, cache=True)
def tanh_f32(x):
    """tanh of a float32 scalar, vectorisable (numba's np.tanh is a scalar libm call, ~20 ns).

    Max relative error ~2.5e-7 (a few ulp); +-inf -> +-1, NaN -> NaN. Both
    branches are computed and one selected, so the loop stays branch-free.
    """
    ax = np.abs(x)
    e = exp_f32(ax + ax)
    big = _F32_ONE - _F32_TWO / (e + _F32_ONE)
    big = big if x >= _F32_ZERO else -big
    z = x * x
    p = (((_F32_T0 * z + _F32_T1) * z + _F32_T2) * z + _F32_T3) * z + _F32_T4
    small = p * z * x + x
    return small if ax < _F32_TANH_SMALL else big


# --------------------------------------------------------------------------
# bfloat16 in fused kernels: arrays are passed as their uint16 bit patterns; a
# value is held as the float32 of the same number (bfloat16 is float32's upper
# half), and every operation's float32 result is rounded to bfloat16's precision
# (to nearest, ties to even; a NaN becomes the quiet NaN of its sign), as numpy computes bfloat16 (ml_dtypes:
# each operation in float32, rounded once). Integer work on the bits: vectorises.
# --------------------------------------------------------------------------

_I16, _I32, _F32 = ir.IntType(16), ir.IntType(32), ir.FloatType()


def _c32(v):
    return ir.Constant(_I32, v)


def _rounded_bits(builder, x):
    """The float32 bits of ``x`` rounded to bfloat16's precision (the low 16 bits zero)."""
    bits = builder.bitcast(x, _I32)
    lsb = builder.and_(builder.lshr(bits, _c32(16)), _c32(1))
    rounded = builder.and_(builder.add(bits, builder.add(_c32(0x7FFF), lsb)), _c32(0xFFFF0000))
    # NaN (|bits| > inf's): all ones, else 0 -- by an arithmetic shift, not a select (a select per
    # operation made LLVM's optimiser take minutes over a long kernel)
    nan = builder.ashr(builder.sub(_c32(0x7F800000), builder.and_(bits, _c32(0x7FFFFFFF))), _c32(31))
    quiet = builder.or_(builder.and_(bits, _c32(0x80000000)), _c32(0x7FC00000))   # ml_dtypes' NaN, signed
    return builder.or_(builder.and_(nan, quiet), builder.and_(builder.not_(nan), rounded))


def _opaque(builder, bits):
    """``bits`` through an empty inline-asm statement: LLVM's analyses stop there (on a long kernel
    reusing values, as a recurrence does, they took time exponential in its length through the
    rounding's integer work)."""
    return builder.asm(ir.FunctionType(_I32, [_I32]), "", "=r,0", [bits], False)


@intrinsic
def bf16_round(typingctx, x):
    """float32 ``x`` rounded to the nearest bfloat16 (ties to even), as a float32; vectorises."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(_rounded_bits(builder, args[0]), _F32)
    return types.float32(types.float32), codegen


@intrinsic
def bf16_round_opaque(typingctx, x):
    """:func:`bf16_round` behind an optimisation barrier, for long kernels: they compile in seconds,
    but their loops stay scalar."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(_opaque(builder, _rounded_bits(builder, args[0])), _F32)
    return types.float32(types.float32), codegen


@intrinsic
def bf16_bits(typingctx, x):
    """The bfloat16 bit pattern (uint16) of float32 ``x`` rounded to the nearest bfloat16."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.trunc(builder.lshr(_rounded_bits(builder, args[0]), _c32(16)), _I16)
    return types.uint16(types.float32), codegen


@intrinsic
def bf16_widen(typingctx, h):
    """The float32 of the bfloat16 whose bit pattern is the uint16 ``h`` (exact)."""
    if h != types.uint16:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.shl(builder.zext(args[0], _I32), _c32(16)), _F32)
    return types.float32(types.uint16), codegen


# --------------------------------------------------------------------------
# Self-check / benchmark (not used by the library).
# --------------------------------------------------------------------------

@numba.njit(fastmath=True, cache=True)
def _exp_array_f32(x, out, reps):
    for _ in range(reps):
        for i in range(x.shape[0]):
            out[i] = exp_f32(x[i])


@numba.njit(fastmath=True, cache=True)
def _exp_array_f64(x, out, reps):
    for _ in range(reps):
        for i in range(x.shape[0]):
            out[i] = exp_f64(x[i])


@numba.njit(fastmath={"reassoc"}, error_model="numpy", cache=True)   # as the generated kernels
def _tanh_array_f32(x, out, reps):
    for _ in range(reps):
        for i in range(x.shape[0]):
            out[i] = tanh_f32(x[i])


def _max_rel_err(fn, x, reference=np.exp):
    """Max relative error of ``fn`` over x vs a long-double reference (nonzero results)."""
    out = np.empty_like(x)
    fn(x, out, 1)
    ref = reference(x.astype(np.longdouble))
    nonzero = ref != 0
    return float(np.max(np.abs((out[nonzero] - ref[nonzero]) / ref[nonzero])))


def _self_check(n=1 << 14, reps=2000, repeats=7):
    """Print max relative error and single-thread in-cache throughput."""
    import time
    rng = np.random.default_rng(0)
    for dt, fn, lo, hi in ((np.float32, _exp_array_f32, -87.3, 88.7),
                           (np.float64, _exp_array_f64, -708.0, 709.0)):
        err = _max_rel_err(fn, rng.uniform(lo, hi, 1 << 22).astype(dt))
        err_sm = _max_rel_err(fn, rng.uniform(-30, 0, 1 << 22).astype(dt))
        x = rng.uniform(-30, 0, n).astype(dt)
        out = np.empty_like(x)
        ts, tn = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn(x, out, reps)
            ts.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            for _ in range(reps // 10):
                np.exp(x, out=out)
            tn.append((time.perf_counter() - t0) * 10)
        print(f"{np.dtype(dt).name}: max rel err {err:.2e} on [{lo}, {hi}], "
              f"{err_sm:.2e} on [-30, 0]; "
              f"{n * reps / np.median(ts) / 1e9:.2f} G/s "
              f"(np.exp {n * reps / np.median(tn) / 1e9:.2f} G/s)")


if __name__ == "__main__":
    _self_check()
