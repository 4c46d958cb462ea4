"""bfloat16 on the CPU: the primitives that add up many values compute in float32.

numpy (with ml_dtypes) computes elementwise ufuncs on bfloat16 arrays as JAX
does, each operation in float32 and rounded once, but its other paths are
wrong or missing for bfloat16: reductions accumulate in bfloat16 (10,000
ones sum to 256), ``matmul`` returns float32, ``einsum`` raises, and the
numba kernels (convolutions, the softmax family) cannot take bfloat16 at
all. JAX accumulates such operations in float32 and rounds the result once.

So every primitive in :data:`IN_FLOAT32` runs, when a bfloat16 array is
among its arguments, its float32 implementation on the arguments converted
to float32, and its float outputs are rounded to the dtype its shape rule
gives (bfloat16 for bfloat16 inputs). Arguments of other dtypes take the
implementation unchanged, behind one dtype test per argument.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from funcgrad import _core
from funcgrad import _dtypes
from funcgrad._dtypes import ShapedArray
from funcgrad.primitives import conv as C
from funcgrad.primitives import elementwise as E
from funcgrad.primitives import linalg as L
from funcgrad.primitives import random_bits as RB
from funcgrad.primitives import reduce as R
from funcgrad.primitives import softmax as SM

BACKEND = "cpu"
BFLOAT16 = _dtypes.bfloat16
_FLOAT32 = np.dtype(np.float32)

Impl = Callable[..., Any]

# Sums, products and contractions (float32 accumulation), the primitives whose numba kernels
# take float32 but not bfloat16, the elementwise ones whose numpy code mixes in float32/64 constants
# (logistic) or calls scipy (erf, erf_inv), and argsort (numpy's bfloat16 sort leaves NaNs where they were;
# widening to float32 is exact, so the order is the right one). (reduce_sum, on every backward pass, does it in its own
# implementation, in the dtype test it makes for float16 anyway: no wrapper call.)
IN_FLOAT32 = (
    R.reduce_prod_p, R.cumsum_p, RB.argsort_p, E.logistic_p, RB.erf_p, RB.erf_inv_p,
    L.matmul_p, L.einsum_p,
    C.conv2d_p, C.conv2d_input_grad_p, C.conv2d_weight_grad_p,
    C.max_pool2d_p, C.max_pool2d_grad_p, C.avg_pool2d_p, C.avg_pool2d_grad_p,
    SM.softmax_p, SM.log_softmax_p, SM.softmax_grad_p, SM.log_softmax_grad_p, SM.logsumexp_p,
    SM.softmax_cross_entropy_p, SM.softmax_cross_entropy_grad_p,
)

# How many calls took the float32 path (tests check that it was taken).
calls = [0]


def _is_bfloat16(a: Any) -> bool:
    return getattr(a, "dtype", None) == BFLOAT16


def _aval(a: Any) -> Any:
    return ShapedArray(np.shape(a), _dtypes.canonicalize(a.dtype)) if hasattr(a, "dtype") else a


def out_dtypes(prim: _core.Primitive, args: tuple, params: dict) -> list[np.dtype] | None:
    """The dtypes ``prim``'s shape rule gives its outputs on ``args`` (None without a shape rule)."""
    if prim.abstract_eval is None:
        return None
    avals = prim.abstract_eval(*[_aval(a) for a in args], **params)
    return [a.dtype for a in (avals if prim.multiple_results else [avals])]


def _round(result: Any, dtype: np.dtype | None) -> Any:
    """``result`` rounded to ``dtype`` (float32 to bfloat16 where no shape rule says)."""
    if not isinstance(result, np.ndarray):
        result = np.asarray(result)
    if dtype is None:
        dtype = BFLOAT16 if result.dtype == _FLOAT32 else result.dtype
    return result if result.dtype == dtype else result.astype(dtype)


def in_float32(prim: _core.Primitive, impl: Impl) -> Impl:
    """``impl``, run in float32 when a bfloat16 array is among the arguments (see the module docstring).

    ``out=`` (a compiled program's planned buffer, of the shape rule's dtype) is filled with the
    rounded result."""
    def run(args: tuple, params: dict) -> Any:
        calls[0] += 1
        out = params.pop("out", None)
        dtypes = out_dtypes(prim, args, params)
        up = [a.astype(_FLOAT32) if _is_bfloat16(a) else a for a in args]
        result = impl(*up, **params)
        if prim.multiple_results:
            result = [_round(r, d) for r, d in zip(result, dtypes or [None] * len(result))]
        else:
            result = _round(result, dtypes[0] if dtypes else None)
        if out is None:
            return result
        for o, r in zip(out if prim.multiple_results else [out], result if prim.multiple_results else [result]):
            np.copyto(o, r)
        return out

    def wrapped(x: Any, *rest: Any, **params: Any) -> Any:
        # dtypes are singletons: an identity test; the first argument apart (most take one array)
        if getattr(x, "dtype", None) is BFLOAT16:
            return run((x,) + rest, params)
        if rest:
            for a in rest:
                if getattr(a, "dtype", None) is BFLOAT16:
                    return run((x,) + rest, params)
            return impl(x, *rest, **params)
        return impl(x, **params)

    wrapped.in_float32 = True   # type: ignore[attr-defined]
    wrapped.__wrapped__ = impl   # type: ignore[attr-defined]
    return wrapped


def register() -> None:
    """Wrap the host implementations of :data:`IN_FLOAT32` (idempotent)."""
    for prim in IN_FLOAT32:
        if not getattr(prim.impl, "in_float32", False):
            _core.register_impl(prim, BACKEND, in_float32(prim, prim.impl))
