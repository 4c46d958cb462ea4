"""The FlashAttention primitive: a tiled forward that saves only O and the
row log-sum-exp, and a backward that recomputes attention tile by tile.

``flash_attention(q, k, v; causal, scale) -> (o, lse)`` with q (B, Nq, d),
k and v (B, Nk, d) (any leading batch/head axes are flattened into B by the
caller).  ``lse`` (B, Nq) is float32 when q is float16 or bfloat16 (as
FlashAttention-2's and JAX's kernels keep it: the backward's
``exp(s - lse)`` would lose bits to a half-precision lse), else q's dtype.
Its vjp keeps nothing but (q, k, v, o, lse) and calls
``flash_attention_bwd`` -- memory O(N d), never O(N^2).  Causal masking is
aligned bottom-right (query i sees key j iff j <= i + Nk - Nq); rows that
see no key have output 0, lse = +inf and zero gradients.

Not defined (clear errors): forward mode (jvp) and second-order reverse
mode of the flash path -- use ``impl="naive"`` for those.

Implementations: the ``impl`` of each primitive here is a float64 numpy
reference that materialises the (Nq, Nk) scores (clear, O(N^2) memory);
the CPU backend registers its tiled numba kernels
(``funcgrad.backends.cpu.flash_attention``) as the host implementation; on
GPU arrays, the Triton kernels of
``funcgrad.backends.gpu.flash_attention`` (float32/float16/bfloat16), registered
as both primitives' ``"gpu"`` implementations.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Primitive, bind
from funcgrad._dtypes import ShapedArray, describe
from funcgrad.primitives.shape import move_to_front, shape_of
from funcgrad.primitives.shape import reshape

_SECOND_ORDER = ("second-order differentiation through dot_product_attention(impl='flash') is not implemented: "
                 "its backward is a fused kernel. Use impl='naive' (materialised softmax) for higher derivatives.")
_FORWARD_MODE = ("forward-mode differentiation (jvp/jacfwd/hessian) through dot_product_attention(impl='flash') is "
                 "not implemented; use impl='naive'.")


_BF16_BITS_HINT = ("; uint16 bfloat16 bits (mixed_precision.to_bfloat16) are not numbers funcgrad computes with: "
                   "use bfloat16 arrays, x.astype(fnp.bfloat16) (from bits: "
                   "mixed_precision.from_bfloat16(bits).astype(fnp.bfloat16))")


def _check(name: str, q: Any, k: Any, v: Any) -> tuple[int, int, int, int]:
    qs, ks, vs = shape_of(q), shape_of(k), shape_of(v)
    if len(qs) != 3 or len(ks) != 3 or len(vs) != 3 or ks != vs or qs[0] != ks[0] or qs[2] != ks[2]:
        raise ValueError(f"{name}: expected q (B, Nq, d) and k, v (B, Nk, d) with the same B and d, got "
                         f"q {describe(q)}, k {describe(k)}, v {describe(v)}")
    dtypes = {q.dtype, k.dtype, v.dtype}
    if len(dtypes) != 1 or _dtypes.kind(q.dtype) != "f":
        hint = _BF16_BITS_HINT if np.dtype(np.uint16) in dtypes else ""
        raise TypeError(f"{name}: q, k, v must share one float dtype, got {describe(q)}, {describe(k)}, "
                        f"{describe(v)}{hint}")
    return qs[0], qs[1], ks[1], qs[2]


_HALF_FLOATS = (np.dtype(np.float16), _dtypes.bfloat16)


def lse_dtype(dtype: Any) -> np.dtype:
    """The dtype of flash_attention's ``lse`` for q of ``dtype``: float32 for float16 and bfloat16, else q's."""
    dt = np.dtype(dtype)
    return np.dtype(np.float32) if dt in _HALF_FLOATS else dt


def _check_bwd(q: Any, k: Any, v: Any, o: Any, lse: Any, do: Any) -> None:
    """Check flash_attention_bwd's operands: q, k, v as for the forward; o, do (B, Nq, d) and
    lse (B, Nq), float (the forward gives ``lse_dtype(q.dtype)``)."""
    B, Nq, _, d = _check("flash_attention_bwd", q, k, v)
    for name, x, shape in (("o", o, (B, Nq, d)), ("do", do, (B, Nq, d)), ("lse", lse, (B, Nq))):
        if tuple(shape_of(x)) != shape or _dtypes.kind(x.dtype) != "f":
            raise ValueError(f"flash_attention_bwd: {name} must be a float array of shape {shape} for q "
                             f"{describe(q)}, got {describe(x)}")


# ---------------------------------------------------------- the reference


def _scores(q: np.ndarray, k: np.ndarray, causal: bool, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Scaled float64 logits (B, Nq, Nk), -inf where masked, and which queries see no key (Nq,)."""
    Nq, Nk = q.shape[1], k.shape[1]
    s = np.einsum("bid,bjd->bij", q.astype(np.float64), k.astype(np.float64)) * scale
    visible = np.ones((Nq, Nk), bool)
    if causal:
        visible = np.arange(Nk)[None, :] <= np.arange(Nq)[:, None] + (Nk - Nq)   # bottom-right aligned
    return np.where(visible, s, -np.inf), ~visible.any(axis=1)


def _forward_reference(q, k, v, *, causal, scale):
    _check("flash_attention", q, k, v)
    s, blind = _scores(q, k, causal, scale)
    with np.errstate(invalid="ignore", divide="ignore"):   # NaN rows stay NaN, as in the kernels
        m = np.max(s, axis=-1, keepdims=True, initial=-np.inf)
        e = np.exp(s - m)
        total = e.sum(axis=-1, keepdims=True)
        o = np.einsum("bij,bjd->bid", e / total, v.astype(np.float64))
        lse = (m + np.log(total))[..., 0]
    o[:, blind], lse[:, blind] = 0.0, np.inf   # queries that see no key
    return [o.astype(q.dtype), lse.astype(lse_dtype(q.dtype))]


def _backward_reference(q, k, v, o, lse, do, *, causal, scale):
    _check_bwd(q, k, v, o, lse, do)
    s, _ = _scores(q, k, causal, scale)
    q64, k64, v64, do64 = (x.astype(np.float64) for x in (q, k, v, do))
    with np.errstate(invalid="ignore"):
        p = np.exp(s - lse.astype(np.float64)[..., None])   # 0 where masked and for blind queries
        dv = np.einsum("bij,bid->bjd", p, do64)
        delta = (do64 * o.astype(np.float64)).sum(axis=-1, keepdims=True)
        ds = p * (np.einsum("bid,bjd->bij", do64, v64) - delta)
        dq = np.einsum("bij,bjd->bid", ds, k64) * scale
        dk = np.einsum("bij,bid->bjd", ds, q64) * scale
    return [g.astype(q.dtype) for g in (dq, dk, dv)]


# ---------------------------------------------------------------- forward

flash_attention_p = Primitive("flash_attention", multiple_results=True)


def _forward_aval(q, k, v, *, causal, scale):
    B, Nq, Nk, d = _check("flash_attention", q, k, v)
    return [ShapedArray((B, Nq, d), q.dtype), ShapedArray((B, Nq), lse_dtype(q.dtype))]


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


flash_attention_p.impl = _forward_reference
flash_attention_p.abstract_eval = _forward_aval
flash_attention_p.vjp = _forward_vjp
flash_attention_p.jvp = _forward_jvp
flash_attention_p.batch = _forward_batch

# --------------------------------------------------------------- backward

flash_attention_bwd_p = Primitive("flash_attention_bwd", multiple_results=True)


def _backward_aval(q, k, v, o, lse, do, *, causal, scale):
    _check_bwd(q, k, v, o, lse, do)
    return [ShapedArray(shape_of(x), x.dtype) for x in (q, k, v)]


def _backward_vjp(cts, primals, outs, needs, **params):
    raise NotImplementedError(_SECOND_ORDER)


def _backward_batch(values, dims, size, *, causal, scale):
    grads = bind(flash_attention_bwd_p, _fold_batch(values, dims, size), {"causal": causal, "scale": scale})
    return [_unfold(g, size) for g in grads], [0, 0, 0]


flash_attention_bwd_p.impl = _backward_reference
flash_attention_bwd_p.abstract_eval = _backward_aval
flash_attention_bwd_p.vjp = _backward_vjp
flash_attention_bwd_p.jvp = _forward_jvp
flash_attention_bwd_p.batch = _backward_batch


def flash_attention(q: Any, k: Any, v: Any, *, causal: bool, scale: float) -> Any:
    """``o`` of shape (B, Nq, d); see the module docstring.

    >>> q = k = v = fnp.ones((1, 4, 8))             # f32[B, N, d]
    >>> lax.flash_attention(q, k, v, causal=True, scale=8 ** -0.5).shape
    (1, 4, 8)
    """
    o, _ = bind(flash_attention_p, (q, k, v), {"causal": bool(causal), "scale": float(scale)})
    return o


__all__ = ["flash_attention", "flash_attention_p", "flash_attention_bwd_p", "lse_dtype"]
