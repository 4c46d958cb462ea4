"""The numba building blocks of the CPU FlashAttention kernels (``flash_attention.py``): a lean
float32 ``2**x`` for base-2 softmax tiles (``_exp2``), a vectorisable max (``_fmax``, ``llvm.maxnum``), the
atomic job counter of the dynamic schedule (``_next_job``), tile counts and an in-place tile add. The
forward kernels that use them are in ``_flash_forward``, the backward kernels in ``_flash_backward``.
"""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from ._fastmath import exp_f64


# Softmax tiles work in base 2: the logits are scaled by ``scale * log2(e)``
# and exponentiated with ``_exp2``; ``lse`` is converted back (``* ln 2``).
_LOG2E = 1.4426950408889634
_LN2 = 0.6931471805599453

# 2**f on [-0.5, 0.5]: degree-5 fit of the relative error (Lawson
# iterations, float64), c0 = 1; max rel. error 9e-8 in exact arithmetic,
# 1.9e-7 evaluated in float32.
_EXP2_P = (1.0, 0.6931470036506653, 0.24022242426872253, 0.05550733581185341,
           0.009671504609286785, 0.0013264701701700687)


def _exp2_f32_codegen(context, builder, signature, args):
    """float32 2**x for the softmax, as straight-line LLVM IR.

    Arguments here are ``logit - running max`` (<= ~0). x is clamped to
    [-126, 126]; ``n = rint(x)``, ``f = x - n``; 2**f by the polynomial;
    2**n added to the exponent field with an integer add. x < -125
    (including -inf: fully masked rows have lse = +inf) gives exactly 0.
    About half the instructions of ``_fastmath.exp_f32`` (no NaN/overflow
    fix-ups, which the softmax cannot produce, and single-factor scaling).
    """
    (x,) = args
    f32 = ir.FloatType()
    i32 = ir.IntType(32)
    mod = builder.module
    fma = cgutils.get_or_insert_function(
        mod, ir.FunctionType(f32, [f32, f32, f32]), "llvm.fma.f32")
    rint = cgutils.get_or_insert_function(
        mod, ir.FunctionType(f32, [f32]), "llvm.rint.f32")

    def c(v):
        return ir.Constant(f32, float(np.float32(v)))

    xc = builder.select(builder.fcmp_ordered("<", x, c(-126.0)), c(-126.0), x)
    xc = builder.select(builder.fcmp_ordered(">", xc, c(126.0)), c(126.0), xc)
    n = builder.call(rint, [xc])
    f = builder.fsub(xc, n)
    p = c(_EXP2_P[5])
    for coef in _EXP2_P[4::-1]:
        p = builder.call(fma, [p, f, c(coef)])
    bits = builder.add(builder.bitcast(p, i32),
                       builder.shl(builder.fptosi(n, i32), ir.Constant(i32, 23)))
    y = builder.bitcast(bits, f32)
    return builder.select(builder.fcmp_ordered("<", x, c(-125.0)), c(0.0), y)


@intrinsic
def _exp2_f32(typingctx, x):
    """float32 ``2**x`` for softmax arguments; see ``_exp2_f32_codegen``."""
    if x != types.float32:
        return None
    return types.float32(types.float32), _exp2_f32_codegen


def _exp2(x):  # pragma: no cover - replaced by the overload inside njit
    raise NotImplementedError


@overload(_exp2, inline="always", fastmath=True)
def _exp2_overload(x):
    """Vectorisable 2**x: ``_exp2_f32`` / ``exp_f64(x ln 2)`` by type."""
    if x == types.float32:
        return lambda x: _exp2_f32(x)
    if x == types.float64:
        return lambda x: exp_f64(x * _LN2)
    return None


@intrinsic
def _fmax(typingctx, a, b):
    """``llvm.maxnum``: unlike numba's ``max`` (a compare and a branch that
    LLVM keeps scalar), a max reduction over it vectorises (measured 16x
    faster over a 256-wide row)."""
    if a != b or a not in (types.float32, types.float64):
        return None
    name = "llvm.maxnum.f32" if a == types.float32 else "llvm.maxnum.f64"

    def codegen(context, builder, signature, args):
        fty = args[0].type
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(fty, [fty, fty]), name)
        return builder.call(fn, list(args))
    return a(a, a), codegen


@intrinsic
def _next_job(typingctx, counter):
    """Atomically ``counter[0] += 1``; returns the old value (int64).

    Dynamic scheduling: each worker takes the next job when it is free, so
    a core slowed by other processes (shared machines) or heavier causal
    tiles do not leave the other workers idle at the end of a static split.
    Results do not depend on which worker runs a job.
    """
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64
            and counter.ndim == 1):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.atomic_rmw("add", ary.data, ir.Constant(ir.IntType(64), 1),
                                  "monotonic")
    return types.int64(counter), codegen


def _blocks(n, block):
    """Number of tiles of size ``block`` covering ``n`` rows."""
    return (n + block - 1) // block


@numba.njit(cache=True, inline="always")
def _add_into(dst, src):
    """dst += src for 2-D arrays of equal shape."""
    for r in range(dst.shape[0]):
        for c in range(dst.shape[1]):
            dst[r, c] += src[r, c]
