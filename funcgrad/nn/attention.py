"""Scaled dot-product attention (flash or naive) and a multi-head attention layer.

>>> q = k = v = fnp.ones((1, 2, 4, 8))                    # f32[B,H,N,d]
>>> out = nn.dot_product_attention(q, k, v, causal=True)
>>> out.shape
(1, 2, 4, 8)

Causal masking is aligned **bottom-right** when ``Nq != Nk`` (as
FlashAttention >= 2.1 and PyTorch's ``CausalBias.LOWER_RIGHT``): query ``i``
attends key ``j`` iff ``j <= i + (Nk - Nq)``.  With ``Nq > Nk`` the first
``Nq - Nk`` query rows attend no key at all: their output is defined as 0
and their gradients as 0 (never NaN), in both implementations.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import dtypes as _dtypes
from funcgrad import random
from funcgrad.core import describe
from funcgrad.lax import flash_attention
from funcgrad.nn import initializers as init_
from funcgrad.nn._layers import Layer, _check_param_shape, _check_params, _input_shape

__all__ = ["dot_product_attention", "MultiHeadAttention"]

# "auto" uses the flash kernels once the score matrix would have this many
# entries per head: below it, the materialised softmax is cheaper to run.
AUTO_FLASH_MIN_SCORES = 128 * 128


def _causal_mask(nq: int, nk: int) -> np.ndarray:
    # True where query i may attend key j (bottom-right aligned).
    return np.tril(np.ones((nq, nk), dtype=bool), k=nk - nq)


def _naive(q: Any, k: Any, v: Any, causal: bool, scale: float) -> Any:
    """Materialised softmax(q k^T * scale) v: the reference, differentiable to any order."""
    nq, nk = q.shape[-2], k.shape[-2]
    s = fnp.matmul(q, fnp.swapaxes(k, -1, -2)) * scale
    # Which rows see a key is known from the shapes alone: a row whose
    # scores are all -inf (inf in q or k) is not mistaken for a masked one
    # and gives NaN, as in JAX; only rows with no key are defined as 0.
    has_key = np.full((nq, 1), nk > 0)
    if causal:
        mask = _causal_mask(nq, nk)
        s = fnp.where(mask, s, -np.inf)
        has_key = mask.any(axis=-1, keepdims=True)
    m = fnp.stop_gradient(fnp.max(s, axis=-1, keepdims=True)) if nk else 0.0
    m = fnp.where(fnp.isfinite(m), m, 0.0)            # rows with no key (or a +inf score): shift by 0
    p = fnp.exp(s - m)                                # masked entries: exp(-inf) = 0
    total = fnp.sum(p, axis=-1, keepdims=True)
    if not has_key.all():
        total = fnp.where(has_key, total, 1.0)        # rows with no key: output 0, gradient 0
    return fnp.matmul(p / total, v)


def dot_product_attention(q: Any, k: Any, v: Any, *, causal: bool = False, scale: float | None = None,
                          impl: str = "auto") -> Any:
    """``softmax(q @ k^T * scale) @ v`` over the last two axes.

    q: (..., Nq, d); k, v: (..., Nk, d) with the same leading (batch, head)
    axes; d <= 256; ``scale`` defaults to ``1/sqrt(d)``.

    ``impl``: ``"flash"`` -- tiled kernels that never store the Nq x Nk
    matrix (memory O(N d)); the backward recomputes it tile by tile.
    Reverse mode (grad, vjp, vmap, jit, checkpoint) works; forward mode and
    second-order derivatives raise NotImplementedError pointing here.
    ``"naive"`` -- the materialised softmax (any derivative order).
    ``"auto"`` -- flash when Nq * Nk >= 16384 and d <= 256, else naive.

    >>> q = k = v = fnp.ones((2, 4, 8))            # f32[..., N, d]
    >>> nn.dot_product_attention(q, k, v, causal=True).shape
    (2, 4, 8)
    """
    q, k, v = (fnp.asarray(x) for x in (q, k, v))
    if q.ndim < 2 or k.ndim != q.ndim or v.shape != k.shape or q.shape[:-2] != k.shape[:-2] \
            or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"dot_product_attention: expected q (..., Nq, d) and k, v (..., Nk, d) with the same leading "
                         f"axes and d, got q {describe(q)}, k {describe(k)}, v {describe(v)}")
    if _dtypes.kind(q.dtype) != "f" or q.dtype != k.dtype or q.dtype != v.dtype:
        raise TypeError(f"dot_product_attention: q, k, v must share a float dtype, got {describe(q)}, "
                        f"{describe(k)}, {describe(v)}")
    d = q.shape[-1]
    if d > 256:
        raise ValueError(f"dot_product_attention: head dimension {d} > 256 is not supported")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    if impl == "auto":
        impl = "flash" if q.shape[-2] * k.shape[-2] >= AUTO_FLASH_MIN_SCORES else "naive"
    if impl == "naive":
        return _naive(q, k, v, causal, scale)
    if impl != "flash":
        raise ValueError(f"dot_product_attention: impl must be 'auto', 'flash' or 'naive', got {impl!r}")
    lead = q.shape[:-2]
    b = math.prod(lead)
    o = flash_attention(fnp.reshape(q, (b,) + q.shape[-2:]), fnp.reshape(k, (b,) + k.shape[-2:]),
                        fnp.reshape(v, (b,) + v.shape[-2:]), causal=causal, scale=scale)
    return fnp.reshape(o, q.shape)


class MultiHeadAttention(Layer):
    """Multi-head self-attention over x f32[B, N, D] -> f32[B, N, D].

    params ``{"wq", "wk", "wv": f32[D, H*hd], "wo": f32[H*hd, D], "bq", "bk", "bv": f32[H*hd], "bo": f32[D]}``
    (Glorot-uniform weights, zero biases); ``head_dim`` defaults to D / H.

    >>> mha = MultiHeadAttention(num_heads=4, causal=True)
    >>> params, shape = mha.init(random.key(0), (-1, 128, 64))
    >>> y = mha.apply(params, fnp.ones((2, 128, 64)))
    >>> y.shape
    (2, 128, 64)
    """

    def __init__(self, num_heads: int, *, head_dim: int | None = None, causal: bool = False, impl: str = "auto",
                 w_init: Callable | None = None):
        self.num_heads = int(num_heads)
        self.head_dim = head_dim
        self.causal = bool(causal)
        self.impl = impl
        self.w_init = w_init or init_.glorot_uniform()

    def init(self, key, input_shape):
        shape = _input_shape("MultiHeadAttention", input_shape, ndim=3)
        d_model = shape[-1]
        hd = self.head_dim or d_model // self.num_heads
        if self.head_dim is None and d_model % self.num_heads:
            raise ValueError(f"MultiHeadAttention: model dimension {d_model} is not divisible by "
                             f"num_heads={self.num_heads}; pass head_dim=")
        inner = self.num_heads * hd
        keys = random.split(key, 4)
        params = {name: self.w_init(kk, shp) for name, kk, shp in
                  (("wq", keys[0], (d_model, inner)), ("wk", keys[1], (d_model, inner)),
                   ("wv", keys[2], (d_model, inner)), ("wo", keys[3], (inner, d_model)))}
        params.update(bq=init_.zeros(None, (inner,)), bk=init_.zeros(None, (inner,)),
                      bv=init_.zeros(None, (inner,)), bo=init_.zeros(None, (d_model,)))
        return params, shape

    def _check_params(self, params: Any) -> None:
        """The eight arrays that init makes, with shapes that agree (a missing bias must not be a KeyError)."""
        _check_params("MultiHeadAttention", params, ("wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo"))
        wq = params["wq"]
        if wq.ndim != 2 or wq.shape[1] % self.num_heads:
            raise ValueError(f"MultiHeadAttention.apply: params['wq'] is {describe(wq)}, expected shape "
                             f"(D, num_heads * head_dim) with num_heads={self.num_heads}")
        d, inner = wq.shape
        for name, shape, why in (("wk", (d, inner), "[D, H*hd], as wq"), ("wv", (d, inner), "[D, H*hd], as wq"),
                                 ("wo", (inner, d), "[H*hd, D]"), ("bq", (inner,), "[H*hd]"),
                                 ("bk", (inner,), "[H*hd]"), ("bv", (inner,), "[H*hd]"), ("bo", (d,), "[D]")):
            _check_param_shape("MultiHeadAttention", name, params[name], shape, why)

    def _heads(self, x: Any) -> Any:
        b, n, inner = x.shape
        return fnp.transpose(fnp.reshape(x, (b, n, self.num_heads, inner // self.num_heads)), (0, 2, 1, 3))

    def apply(self, params, x, *, key=None, train=False):
        self._check_params(params)
        x = fnp.asarray(x)
        if x.ndim != 3 or x.shape[-1] != params["wq"].shape[0]:
            raise ValueError(f"MultiHeadAttention: expected x (B, N, {params['wq'].shape[0]}), got {describe(x)}")
        q = self._heads(x @ params["wq"] + params["bq"])
        k = self._heads(x @ params["wk"] + params["bk"])
        v = self._heads(x @ params["wv"] + params["bv"])
        o = dot_product_attention(q, k, v, causal=self.causal, impl=self.impl)       # (B, H, N, hd)
        b, h, n, hd = o.shape
        o = fnp.reshape(fnp.transpose(o, (0, 2, 1, 3)), (b, n, h * hd))
        return o @ params["wo"] + params["bo"]
