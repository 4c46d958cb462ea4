"""The FlashAttention primitive: a tiled forward that saves only O and the
row log-sum-exp, and a backward that recomputes attention tile by tile.

``flash_attention(q, k, v; causal, scale) -> (o, lse)`` with q (B, Nq, d),
k and v (B, Nk, d) (any leading batch/head axes are flattened into B by the
caller).  Its vjp keeps nothing but (q, k, v, o, lse) and calls
``flash_attention_bwd`` -- memory O(N d), never O(N^2).  Causal masking is
aligned bottom-right (query i sees key j iff j <= i + Nk - Nq); rows that
see no key have output 0, lse = +inf and zero gradients.

Not defined (clear errors): forward mode (jvp) and second-order reverse
mode of the flash path -- use ``impl="naive"`` for those.

Implementations: numba kernels on the CPU (``funcgrad.backends.cpu
.flash_attention``); the Triton kernels in ``funcgrad.backends.gpu`` serve
GPU arrays.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad._core import Primitive, bind
from funcgrad._dtypes import ShapedArray, describe
from funcgrad.primitives.elementwise import shape_of
from funcgrad.primitives.shape import reshape

_SECOND_ORDER = ("second-order differentiation through dot_product_attention(impl='flash') is not implemented: "
                 "its backward is a fused kernel. Use impl='naive' (materialised softmax) for higher derivatives.")
_FORWARD_MODE = ("forward-mode differentiation (jvp/jacfwd/hessian) through dot_product_attention(impl='flash') is "
                 "not implemented; use impl='naive'.")


def _check(name: str, q: Any, k: Any, v: Any) -> tuple[int, int, int, int]:
    qs, ks, vs = shape_of(q), shape_of(k), shape_of(v)
    if len(qs) != 3 or len(ks) != 3 or len(vs) != 3 or ks != vs or qs[0] != ks[0] or qs[2] != ks[2]:
        raise ValueError(f"{name}: expected q (B, Nq, d) and k, v (B, Nk, d) with the same B and d, got "
                         f"q {describe(q)}, k {describe(k)}, v {describe(v)}")
    dtypes = {q.dtype, k.dtype, v.dtype}
    if len(dtypes) != 1 or q.dtype.kind != "f":
        raise TypeError(f"{name}: q, k, v must share one float dtype, got {describe(q)}, {describe(k)}, "
                        f"{describe(v)}")
    return qs[0], qs[1], ks[1], qs[2]


def _kernel_dtype(dtype: np.dtype) -> np.dtype:
    # The CPU kernels compute in float32 or float64; half precision goes through float32.
    return dtype if dtype in (np.float32, np.float64) else np.dtype(np.float32)


def _prepared(*xs: np.ndarray) -> list[np.ndarray]:
    dt = _kernel_dtype(xs[0].dtype)
    return [np.ascontiguousarray(x, dtype=dt) for x in xs]


# ---------------------------------------------------------------- forward

flash_attention_p = Primitive("flash_attention", multiple_results=True)


def _forward_impl(q, k, v, *, causal, scale):
    from funcgrad.backends.cpu.flash_attention import flash_attention_forward
    _check("flash_attention", q, k, v)
    o, lse = flash_attention_forward(*_prepared(q, k, v), causal=causal, scale=scale)
    return [o.astype(q.dtype, copy=False), lse.astype(q.dtype, copy=False)]


def _forward_aval(q, k, v, *, causal, scale):
    B, Nq, Nk, d = _check("flash_attention", q, k, v)
    return [ShapedArray((B, Nq, d), q.dtype), ShapedArray((B, Nq), q.dtype)]


def _forward_vjp(cts, primals, outs, needs, *, causal, scale):
    do, dlse = cts
    if dlse is not None:
        raise NotImplementedError("the log-sum-exp output of flash_attention is not differentiable")
    q, k, v = primals
    o, lse = outs
    return bind(flash_attention_bwd_p, (q, k, v, o, lse, do), {"causal": causal, "scale": scale})


def _forward_jvp(primals, tangents, **params):
    raise NotImplementedError(_FORWARD_MODE)


def _fold_batch(values, dims, size):
    """Move the vmapped axis first and merge it into B (an unmapped operand is broadcast)."""
    from funcgrad.interpreters.batching import move_to_front
    out = []
    for v, d in zip(values, dims):
        v = move_to_front(v, d, size)
        s = shape_of(v)
        out.append(reshape(v, (s[0] * s[1],) + s[2:]))
    return out


def _unfold(x, size):
    s = shape_of(x)
    return reshape(x, (size, s[0] // size) + s[1:])


def _forward_batch(values, dims, size, *, causal, scale):
    o, lse = bind(flash_attention_p, _fold_batch(values, dims, size), {"causal": causal, "scale": scale})
    return [_unfold(o, size), _unfold(lse, size)], [0, 0]


flash_attention_p.impl = _forward_impl
flash_attention_p.abstract_eval = _forward_aval
flash_attention_p.vjp = _forward_vjp
flash_attention_p.jvp = _forward_jvp
flash_attention_p.batch = _forward_batch

# --------------------------------------------------------------- backward

flash_attention_bwd_p = Primitive("flash_attention_bwd", multiple_results=True)


def _backward_impl(q, k, v, o, lse, do, *, causal, scale):
    from funcgrad.backends.cpu.flash_attention import flash_attention_backward
    dq, dk, dv = flash_attention_backward(*_prepared(q, k, v, o, lse, do), causal=causal, scale=scale)
    return [g.astype(q.dtype, copy=False) for g in (dq, dk, dv)]


def _backward_aval(q, k, v, o, lse, do, *, causal, scale):
    _check("flash_attention_bwd", q, k, v)
    return [ShapedArray(shape_of(x), x.dtype) for x in (q, k, v)]


def _backward_vjp(cts, primals, outs, needs, **params):
    raise NotImplementedError(_SECOND_ORDER)


def _backward_batch(values, dims, size, *, causal, scale):
    grads = bind(flash_attention_bwd_p, _fold_batch(values, dims, size), {"causal": causal, "scale": scale})
    return [_unfold(g, size) for g in grads], [0, 0, 0]


flash_attention_bwd_p.impl = _backward_impl
flash_attention_bwd_p.abstract_eval = _backward_aval
flash_attention_bwd_p.vjp = _backward_vjp
flash_attention_bwd_p.jvp = _forward_jvp
flash_attention_bwd_p.batch = _backward_batch


def flash_attention(q: Any, k: Any, v: Any, *, causal: bool, scale: float) -> Any:
    """``o`` of shape (B, Nq, d); see the module docstring."""
    o, _ = bind(flash_attention_p, (q, k, v), {"causal": bool(causal), "scale": float(scale)})
    return o


__all__ = ["flash_attention", "flash_attention_p", "flash_attention_bwd_p"]
