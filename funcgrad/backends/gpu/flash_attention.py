"""FlashAttention-2 forward and backward in Triton (plain pointer arithmetic).

Layout: every tensor is C-contiguous ``(B, N, HEAD_DIM)`` (leading dims are
flattened into ``B`` by the host wrappers); ``LSE`` and ``Delta`` are
``(B, Nq)`` float32. Inputs are fp32, fp16 or bf16; all matmuls accumulate
in fp32. Scores are ``scale * q @ k^T``; softmax is taken in base 2 with
``scale * log2(e)`` folded into the scores (one multiply instead of a
multiply and an ``exp``'s internal rescale), ``LSE`` is stored in natural log.

Causal masking is *bottom-right aligned*: query ``i`` attends key ``j`` iff
``j <= i + (Nk - Nq)``. With ``Nq > Nk`` the first ``Nq - Nk`` query rows see
no key at all: their output is 0 and their ``LSE`` is ``+inf``, which makes
``P = exp(S - LSE) = 0`` in the backward pass, hence zero gradients, no NaN.
NaN and inf follow the materialised softmax (``impl='naive'``) and JAX: a row
whose scores hold NaN or +inf, or are all -inf, has a NaN output and NaN
gradients for the keys it sees.

Kernels (structure follows Triton's tutorial 06: inner loop / outer kernel /
host wrapper):

* ``_attn_fwd``            grid (cdiv(Nq, BLOCK_M), B): O, LSE.
* ``_attn_bwd_preprocess`` grid (cdiv(Nq, BLOCK_M), B): Delta = rowsum(dO * O).
* ``_attn_bwd_dkdv``       grid (cdiv(Nk, BLOCK_N), B): dK, dV; loops over
  query blocks.
* ``_attn_bwd_dq``         grid (cdiv(Nq, BLOCK_M), B): dQ; loops over key
  blocks.

Each output element is written by exactly one program (no atomics), so
results are deterministic. Causal block skipping: loop bounds are computed so
that key/query blocks lying entirely above the diagonal are never loaded;
blocks entirely below it run without the causal mask.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import triton
import triton.language as tl

from . import _triton_host as host

__all__ = [
    "flash_attention_forward",
    "flash_attention_backward",
    "FwdConfig",
    "BwdConfig",
    "fwd_config",
    "bwd_config",
    "head_block",
]


# ==========================================================================
# shared helpers (device)
# ==========================================================================


@triton.jit
def _load_rows(base, offs_rows, offs_d, n_rows, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr):
    """Load a (len(offs_rows), BLOCK_D) tile of a row-major (n_rows, HEAD_DIM)
    matrix; rows >= n_rows and columns >= HEAD_DIM read as 0 (zeros are
    neutral for every dot product that follows)."""
    ptrs = base + offs_rows[:, None] * HEAD_DIM + offs_d[None, :]
    mask = offs_rows[:, None] < n_rows
    if BLOCK_D != HEAD_DIM:  # head dim padded up to a power of two
        mask = mask & (offs_d[None, :] < HEAD_DIM)
    return tl.load(ptrs, mask=mask, other=0.0)


@triton.jit
def _store_rows(base, tile, offs_rows, offs_d, n_rows, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr):
    """Store a tile into a row-major (n_rows, HEAD_DIM) matrix, masking the
    ragged row edge and the padded head-dim columns."""
    ptrs = base + offs_rows[:, None] * HEAD_DIM + offs_d[None, :]
    mask = offs_rows[:, None] < n_rows
    if BLOCK_D != HEAD_DIM:
        mask = mask & (offs_d[None, :] < HEAD_DIM)
    tl.store(ptrs, tile.to(base.dtype.element_ty), mask=mask)


@triton.jit
def _mm(a, b, DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr):
    """fp32 a @ b. UPCAST_DOT (set by the host only for bf16 under
    TRITON_INTERPRET): Triton 3.8's interpreter multiplies bf16 operands as
    their raw uint16 bit patterns, so there we upcast first. That is
    numerically what bf16 tensor cores do anyway (exact products, fp32 sums)."""
    if UPCAST_DOT:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    return tl.dot(a, b, input_precision=DOT_PRECISION)


@triton.jit
def _mma(a, b, acc, DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr):
    """acc + a @ b with fp32 acc; see _mm for UPCAST_DOT."""
    if UPCAST_DOT:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    return tl.dot(a, b, acc, input_precision=DOT_PRECISION)


@triton.jit
def _finite_or_zero(x):
    """x where finite, else 0 (the softmax shift for a max of +-inf or NaN)."""
    return tl.where(tl.abs(x) < float("inf"), x, 0.0)


@triton.jit
def _visible(offs_m, offs_n, n_k, causal_shift, CAUSAL: tl.constexpr):
    """(BLOCK_M, BLOCK_N) mask: key in bounds and, if causal, not in the
    future of the query (bottom-right aligned: j <= i + Nk - Nq)."""
    mask = offs_n[None, :] < n_k
    if CAUSAL:
        mask = mask & (offs_n[None, :] <= offs_m[:, None] + causal_shift)
    return mask


# ==========================================================================
# forward
# ==========================================================================


@triton.jit
def _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, offs_m, lo, hi, n_k, causal_shift, qk_scale,
                    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
                    MASKED: tl.constexpr, CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr):
    """Online-softmax sweep over key blocks [lo, hi).

    acc: (BLOCK_M, BLOCK_D) fp32 unnormalised output; l_i, m_i: (BLOCK_M,)
    fp32 running sum and running max of the base-2 scores. ``MASKED`` blocks
    straddle the diagonal or the ragged key edge; the others are known to be
    fully visible, so they skip building the mask.
    """
    offs_d = tl.arange(0, BLOCK_D)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = _load_rows(k_base, offs_n, offs_d, n_k, HEAD_DIM, BLOCK_D)
        s = _mm(q, tl.trans(k), DOT_PRECISION, UPCAST_DOT) * qk_scale
        if MASKED:
            s = tl.where(_visible(offs_m, offs_n, n_k, causal_shift, CAUSAL), s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        # Shift by 0 where the running max is not finite: a row that has seen
        # no visible key yet (m = -inf) keeps exp2(-inf - -inf) = NaN out of p
        # and alpha, and a +inf score gives p = inf (then O = inf / inf = NaN
        # and LSE = +inf, as the materialised softmax gives) instead of NaN
        # everywhere. p and l are relative to _finite_or_zero(m); the old l is
        # rescaled by exp2(m_old - m_sub), which is 0 for m_old = -inf (l = 0).
        m_sub = _finite_or_zero(m_new)
        p = tl.math.exp2(s - m_sub[:, None])
        alpha = tl.math.exp2(m_i - m_sub)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = _load_rows(v_base, offs_n, offs_d, n_k, HEAD_DIM, BLOCK_D)
        acc = acc * alpha[:, None]
        acc = _mma(p.to(v.dtype), v, acc, DOT_PRECISION, UPCAST_DOT)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(Q, K, V, O, LSE, n_q, n_k, sm_scale,
              HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr):
    """O = softmax(scale * Q K^T [+ causal mask]) V and LSE per query row.

    Q, O: (B, n_q, HEAD_DIM); K, V: (B, n_k, HEAD_DIM), all one dtype;
    LSE: (B, n_q) fp32, natural log, +inf for rows with no visible key.
    Grid: (cdiv(n_q, BLOCK_M), B).
    """
    start_m = tl.program_id(0) * BLOCK_M
    bid = tl.program_id(1).to(tl.int64)  # int64: B*N*D can exceed 2**31
    q_base = Q + bid * n_q * HEAD_DIM
    k_base = K + bid * n_k * HEAD_DIM
    v_base = V + bid * n_k * HEAD_DIM

    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    q = _load_rows(q_base, offs_m, offs_d, n_q, HEAD_DIM, BLOCK_D)

    qk_scale = sm_scale * 1.4426950408889634  # log2(e): softmax in base 2
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)

    causal_shift = n_k - n_q
    lo_masked, hi = _fwd_key_range(start_m, n_k, causal_shift, BLOCK_M, BLOCK_N, CAUSAL)
    # stage 1: key blocks fully visible to every row of this query block
    acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, offs_m, 0, lo_masked, n_k, causal_shift,
                                    qk_scale, HEAD_DIM, BLOCK_D, BLOCK_N, False, CAUSAL, DOT_PRECISION, UPCAST_DOT)
    # stage 2: blocks on the diagonal and/or the ragged key edge
    acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_base, v_base, offs_m, lo_masked, hi, n_k, causal_shift,
                                    qk_scale, HEAD_DIM, BLOCK_D, BLOCK_N, True, CAUSAL, DOT_PRECISION, UPCAST_DOT)

    # Rows with no visible key (causal, Nq > Nk; known from the shapes): O = 0,
    # LSE = +inf. Any other row with l = 0 had only -inf scores (inf in q or
    # k) and gets 0 / 0 = NaN, as in JAX; NaN scores give NaN through l.
    if CAUSAL:
        empty = offs_m + causal_shift < 0
    else:
        empty = offs_m < 0
    acc = acc / tl.where(empty, 1.0, l_i)[:, None]
    lse = tl.where(empty, float("inf"),
                   (_finite_or_zero(m_i) + tl.math.log2(tl.where(empty, 1.0, l_i))) * 0.6931471805599453)

    _store_rows(O + bid * n_q * HEAD_DIM, acc, offs_m, offs_d, n_q, HEAD_DIM, BLOCK_D)
    tl.store(LSE + bid * n_q + offs_m, lse, mask=offs_m < n_q)


@triton.jit
def _fwd_key_range(start_m, n_k, causal_shift, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   CAUSAL: tl.constexpr):
    """Key range of a query block [start_m, start_m + BLOCK_M).

    Returns (lo_masked, hi), both multiples of BLOCK_N except hi may be n_k:
    keys [0, lo_masked) are visible to every row (no mask needed), keys
    [lo_masked, hi) need masking, keys >= hi are invisible to every row and
    are never loaded.
    """
    if CAUSAL:
        # first row sees keys <= start_m + shift; last row <= start_m + BLOCK_M - 1 + shift
        hi = tl.minimum(tl.maximum(start_m + BLOCK_M + causal_shift, 0), n_k)
        lo_masked = tl.minimum(tl.maximum(start_m + causal_shift + 1, 0), n_k)
    else:
        hi = n_k
        lo_masked = n_k
    lo_masked = (lo_masked // BLOCK_N) * BLOCK_N
    return lo_masked, hi


# ==========================================================================
# backward
# ==========================================================================


@triton.jit
def _attn_bwd_preprocess(O, DO, DELTA, n_q, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                         BLOCK_M: tl.constexpr):
    """DELTA[b, i] = sum_d dO[b, i, d] * O[b, i, d] in fp32.

    O, DO: (B, n_q, HEAD_DIM); DELTA: (B, n_q) fp32. Grid: (cdiv(n_q, BLOCK_M), B).
    """
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    bid = tl.program_id(1).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    o = _load_rows(O + bid * n_q * HEAD_DIM, offs_m, offs_d, n_q, HEAD_DIM, BLOCK_D).to(tl.float32)
    do = _load_rows(DO + bid * n_q * HEAD_DIM, offs_m, offs_d, n_q, HEAD_DIM, BLOCK_D).to(tl.float32)
    tl.store(DELTA + bid * n_q + offs_m, tl.sum(o * do, 1), mask=offs_m < n_q)


@triton.jit
def _attn_bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, lse_base, delta_base, offs_n, lo, hi, n_q,
                         causal_shift, qk_scale,
                         HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
                         MASKED: tl.constexpr, DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr):
    """Accumulate dK, dV of one key block over query blocks [lo, hi).

    Works on transposed scores (BLOCK_N, BLOCK_M) so that every product is a
    plain ``dot(a, b)`` with a key-major left operand. Query rows beyond n_q
    load q = dO = 0 and LSE = +inf, so their P is exactly 0: no row mask is
    needed. Key rows beyond n_k are never stored.
    """
    offs_d = tl.arange(0, BLOCK_D)
    for start_m in range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q = _load_rows(q_base, offs_m, offs_d, n_q, HEAD_DIM, BLOCK_D)
        lse2 = tl.load(lse_base + offs_m, mask=offs_m < n_q, other=float("inf")) * 1.4426950408889634
        s_t = _mm(k, tl.trans(q), DOT_PRECISION, UPCAST_DOT) * qk_scale
        p_t = tl.math.exp2(s_t - lse2[None, :])
        if MASKED:  # causal: query i sees key j iff j <= i + shift
            visible_t = offs_n[:, None] <= offs_m[None, :] + causal_shift
            p_t = tl.where(visible_t, p_t, 0.0)
        do = _load_rows(do_base, offs_m, offs_d, n_q, HEAD_DIM, BLOCK_D)
        dv = _mma(p_t.to(do.dtype), do, dv, DOT_PRECISION, UPCAST_DOT)
        delta = tl.load(delta_base + offs_m, mask=offs_m < n_q, other=0.0)
        dp_t = _mm(v, tl.trans(do), DOT_PRECISION, UPCAST_DOT)
        ds_t = p_t * (dp_t - delta[None, :])
        if MASKED:  # 0, not 0 * NaN, where a query row with a NaN output meets a key it cannot see
            ds_t = tl.where(visible_t, ds_t, 0.0)
        dk = _mma(ds_t.to(q.dtype), q, dk, DOT_PRECISION, UPCAST_DOT)
    return dk, dv


@triton.jit
def _bwd_query_range(start_n, n_q, causal_shift, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     CAUSAL: tl.constexpr):
    """Query range that can see key block [start_n, start_n + BLOCK_N).

    Returns (lo, mid, hi): query blocks [lo, mid) straddle the diagonal and
    need the causal mask, [mid, hi) see every key of the block. Query blocks
    before lo see none of these keys and are never loaded. lo and mid are
    multiples of BLOCK_M.
    """
    hi = n_q
    if CAUSAL:
        # row i sees key j iff i >= j - shift
        lo = tl.minimum(tl.maximum(start_n - causal_shift, 0), n_q)
        lo = (lo // BLOCK_M) * BLOCK_M
        first_full = tl.maximum(start_n + BLOCK_N - 1 - causal_shift, 0)  # first row seeing all keys
        mid = tl.cdiv(first_full, BLOCK_M) * BLOCK_M
        mid = tl.maximum(tl.minimum(mid, tl.cdiv(n_q, BLOCK_M) * BLOCK_M), lo)
    else:
        lo = 0
        mid = 0
    return lo, mid, hi


@triton.jit
def _attn_bwd_dkdv(Q, K, V, DO, LSE, DELTA, DK, DV, n_q, n_k, sm_scale,
                   HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr):
    """dK, dV for one key block, looping over query blocks.

    Q, DO: (B, n_q, HEAD_DIM); K, V, DK, DV: (B, n_k, HEAD_DIM); LSE, DELTA:
    (B, n_q) fp32. Grid: (cdiv(n_k, BLOCK_N), B).
    """
    start_n = tl.program_id(0) * BLOCK_N
    bid = tl.program_id(1).to(tl.int64)
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    k = _load_rows(K + bid * n_k * HEAD_DIM, offs_n, offs_d, n_k, HEAD_DIM, BLOCK_D)
    v = _load_rows(V + bid * n_k * HEAD_DIM, offs_n, offs_d, n_k, HEAD_DIM, BLOCK_D)

    q_base = Q + bid * n_q * HEAD_DIM
    do_base = DO + bid * n_q * HEAD_DIM
    lse_base = LSE + bid * n_q
    delta_base = DELTA + bid * n_q
    qk_scale = sm_scale * 1.4426950408889634
    causal_shift = n_k - n_q

    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    lo, mid, hi = _bwd_query_range(start_n, n_q, causal_shift, BLOCK_M, BLOCK_N, CAUSAL)
    if CAUSAL:  # diagonal query blocks first, with the mask
        dk, dv = _attn_bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, lse_base, delta_base, offs_n, lo, mid, n_q,
                                      causal_shift, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_M, True, DOT_PRECISION, UPCAST_DOT)
    dk, dv = _attn_bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, lse_base, delta_base, offs_n, mid, hi, n_q,
                                  causal_shift, qk_scale, HEAD_DIM, BLOCK_D, BLOCK_M, False, DOT_PRECISION, UPCAST_DOT)

    _store_rows(DK + bid * n_k * HEAD_DIM, dk * sm_scale, offs_n, offs_d, n_k, HEAD_DIM, BLOCK_D)
    _store_rows(DV + bid * n_k * HEAD_DIM, dv, offs_n, offs_d, n_k, HEAD_DIM, BLOCK_D)


@triton.jit
def _attn_bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base, offs_m, lo, hi, n_k, causal_shift, qk_scale,
                       HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
                       MASKED: tl.constexpr, CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr):
    """Accumulate dQ of one query block over key blocks [lo, hi).

    Out-of-range keys load as 0, which already zeroes their dS @ K term, but
    exp2(0 - LSE) could overflow for very negative LSE, so MASKED blocks
    (diagonal / ragged edge) zero P explicitly.
    """
    offs_d = tl.arange(0, BLOCK_D)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = _load_rows(k_base, offs_n, offs_d, n_k, HEAD_DIM, BLOCK_D)
        v = _load_rows(v_base, offs_n, offs_d, n_k, HEAD_DIM, BLOCK_D)
        s = _mm(q, tl.trans(k), DOT_PRECISION, UPCAST_DOT) * qk_scale
        p = tl.math.exp2(s - lse2[:, None])
        if MASKED:
            p = tl.where(_visible(offs_m, offs_n, n_k, causal_shift, CAUSAL), p, 0.0)
        dp = _mm(do, tl.trans(v), DOT_PRECISION, UPCAST_DOT)
        ds = p * (dp - delta[:, None])
        dq = _mma(ds.to(k.dtype), k, dq, DOT_PRECISION, UPCAST_DOT)
    return dq


@triton.jit
def _attn_bwd_dq(Q, K, V, DO, LSE, DELTA, DQ, n_q, n_k, sm_scale,
                 HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr):
    """dQ for one query block, looping over key blocks.

    Same shapes as ``_attn_bwd_dkdv``; DQ: (B, n_q, HEAD_DIM).
    Grid: (cdiv(n_q, BLOCK_M), B).
    """
    start_m = tl.program_id(0) * BLOCK_M
    bid = tl.program_id(1).to(tl.int64)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    q = _load_rows(Q + bid * n_q * HEAD_DIM, offs_m, offs_d, n_q, HEAD_DIM, BLOCK_D)
    do = _load_rows(DO + bid * n_q * HEAD_DIM, offs_m, offs_d, n_q, HEAD_DIM, BLOCK_D)
    # padded rows: LSE = +inf -> P = 0
    lse2 = tl.load(LSE + bid * n_q + offs_m, mask=offs_m < n_q, other=float("inf")) * 1.4426950408889634
    delta = tl.load(DELTA + bid * n_q + offs_m, mask=offs_m < n_q, other=0.0)

    k_base = K + bid * n_k * HEAD_DIM
    v_base = V + bid * n_k * HEAD_DIM
    qk_scale = sm_scale * 1.4426950408889634
    causal_shift = n_k - n_q

    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    lo_masked, hi = _fwd_key_range(start_m, n_k, causal_shift, BLOCK_M, BLOCK_N, CAUSAL)
    dq = _attn_bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base, offs_m, 0, lo_masked, n_k, causal_shift,
                            qk_scale, HEAD_DIM, BLOCK_D, BLOCK_N, False, CAUSAL, DOT_PRECISION, UPCAST_DOT)
    dq = _attn_bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base, offs_m, lo_masked, hi, n_k, causal_shift,
                            qk_scale, HEAD_DIM, BLOCK_D, BLOCK_N, True, CAUSAL, DOT_PRECISION, UPCAST_DOT)
    _store_rows(DQ + bid * n_q * HEAD_DIM, dq * sm_scale, offs_m, offs_d, n_q, HEAD_DIM, BLOCK_D)


# ==========================================================================
# block configs
# ==========================================================================


@dataclass(frozen=True)
class FwdConfig:
    BLOCK_M: int
    BLOCK_N: int
    num_warps: int
    num_stages: int


@dataclass(frozen=True)
class BwdConfig:
    """dK/dV kernel tiles (BLOCK_N keys x BLOCK_M queries) and dQ kernel
    tiles (BLOCK_M2 queries x BLOCK_N2 keys)."""
    BLOCK_M: int
    BLOCK_N: int
    BLOCK_M2: int
    BLOCK_N2: int
    num_warps: int
    num_stages: int


def head_block(head_dim: int) -> int:
    """Head dim padded to a power of two >= 16 (tl.dot's minimum K)."""
    return max(16, triton.next_power_of_2(head_dim))


# Keyed by (padded head dim, bytes per element). Chosen by compiling each
# entry for sm_90 on the CPU (FlashAttentionCompileTest in
# tests/test_triton_flash.py): shared memory must fit the H100's 227 KB per
# block, and tiles are shrunk until ptxas stops spilling where possible.
# 16-bit entries compile without spills. fp32 entries use tf32x3 dots, whose
# hi/lo operand split triples register use, so float32 takes smaller tiles.
# Measured on an H200 (benchmarks/gpu_attention.py --tune: N=4096, B*H=32, not causal), the best of eight
# configurations each: bf16 d=128 backward 377 TFLOP/s with (32, 64, 64, 32, 4, 3) against 85 with the
# (16, 32, 32, 16, 8, 2) chosen before; fp32 d=128 forward 45.5 against 18.6, backward 28.5 against 9.8;
# fp32 d=64 backward 30.2 against 14.8. d=16, 32 and 256 were not tuned.
_FWD_CONFIGS = {
    (16, 2): FwdConfig(128, 64, 4, 3), (16, 4): FwdConfig(128, 64, 8, 3),
    (32, 2): FwdConfig(128, 64, 4, 3), (32, 4): FwdConfig(128, 64, 8, 3),
    (64, 2): FwdConfig(128, 64, 8, 3), (64, 4): FwdConfig(128, 64, 8, 2),
    (128, 2): FwdConfig(128, 128, 8, 3), (128, 4): FwdConfig(32, 64, 4, 2),
    (256, 2): FwdConfig(64, 32, 8, 2), (256, 4): FwdConfig(32, 32, 8, 2),
}
_BWD_CONFIGS = {
    (16, 2): BwdConfig(32, 64, 64, 32, 4, 3), (16, 4): BwdConfig(32, 64, 64, 32, 4, 2),
    (32, 2): BwdConfig(32, 64, 64, 32, 4, 3), (32, 4): BwdConfig(32, 64, 64, 32, 4, 2),
    (64, 2): BwdConfig(32, 128, 128, 32, 4, 3), (64, 4): BwdConfig(32, 64, 64, 32, 4, 2),
    (128, 2): BwdConfig(32, 64, 64, 32, 4, 3), (128, 4): BwdConfig(32, 32, 32, 32, 4, 2),
    (256, 2): BwdConfig(16, 32, 32, 16, 8, 2), (256, 4): BwdConfig(16, 16, 16, 16, 8, 2),
}


def preprocess_block_m(head_dim: int) -> int:
    """Rows per program of the Delta kernel: ~4096 elements per tile keeps
    both fp32 (rows, d) tiles in registers (32 values/thread at 4 warps)."""
    return max(16, min(128, 4096 // head_block(head_dim)))


def _config_key(head_dim: int, itemsize: int) -> tuple[int, int]:
    bd = head_block(head_dim)
    if bd > 256:
        raise ValueError(f"head dim {head_dim} > 256 is not supported")
    return bd, (4 if itemsize >= 4 else 2)


def fwd_config(head_dim: int, itemsize: int) -> FwdConfig:
    """Forward tile config for a head dim and element size (2 or 4 bytes)."""
    return _FWD_CONFIGS[_config_key(head_dim, itemsize)]


def bwd_config(head_dim: int, itemsize: int) -> BwdConfig:
    """Backward tile config for a head dim and element size (2 or 4 bytes)."""
    return _BWD_CONFIGS[_config_key(head_dim, itemsize)]


# ==========================================================================
# host wrappers
# ==========================================================================

# bfloat16 arrays (ml_dtypes.bfloat16), or uint16 arrays read as bf16 bit patterns.
_BF16 = host.BF16
_SUPPORTED = {np.dtype(np.float32), np.dtype(np.float16), _BF16, np.dtype(np.uint16)}


def _check_qkv(q, k, v) -> tuple[int, int, int, int]:
    """Validate shapes/dtypes; return (B, Nq, Nk, d) with leading dims flattened."""
    if q.ndim < 2 or k.ndim != q.ndim or v.ndim != q.ndim:
        raise ValueError(f"q, k, v must be (..., N, d) with equal rank; got {q.shape}, {k.shape}, {v.shape}")
    if q.shape[:-2] != k.shape[:-2] or k.shape != v.shape or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"incompatible shapes q={q.shape}, k={k.shape}, v={v.shape}")
    if not (q.dtype == k.dtype == v.dtype) or np.dtype(q.dtype) not in _SUPPORTED:
        raise TypeError(f"q, k, v must share one of float32, float16, bfloat16 (or uint16 bf16 bits); got "
                        f"{q.dtype}, {k.dtype}, {v.dtype}")
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    if n_q < 1 or n_k < 1 or d < 1:
        raise ValueError("empty sequence or head dim")
    batch = int(np.prod(q.shape[:-2], dtype=np.int64))
    return batch, n_q, n_k, d


def _flat(xp, x, batch: int):
    """(…, N, d) -> contiguous (B, N, d); a view when already contiguous."""
    return xp.ascontiguousarray(x).reshape(batch, x.shape[-2], x.shape[-1])


FP32_PRECISIONS = ("tf32x3", "ieee", "tf32")


def _dot_precision(dtype, fp32_precision: str) -> str:
    """tl.dot input precision. Only matters for fp32 inputs: "tf32x3" (default)
    runs on tensor cores with ~fp32 accuracy (3 tf32 products); "ieee" is
    exact fp32 on CUDA cores (needs small tiles; slow); "tf32" is fastest
    with ~1e-3 relative error. The interpreter always computes in fp32."""
    if fp32_precision not in FP32_PRECISIONS:
        raise ValueError(f"fp32_precision must be one of {FP32_PRECISIONS}, got {fp32_precision!r}")
    return fp32_precision if np.dtype(dtype) == np.float32 else "ieee"


def _upcast_dot(q) -> bool:
    """bf16 tl.dot is wrong in Triton 3.8's interpreter (see _mm)."""
    return host.is_numpy(q) and np.dtype(q.dtype) in (_BF16, np.dtype(np.uint16))


def _resolve_scale(scale: float | None, d: int) -> float:
    return 1.0 / math.sqrt(d) if scale is None else float(scale)


def flash_attention_forward(q, k, v, *, causal: bool = False, scale: float | None = None,
                            fp32_precision: str = "tf32x3", config: FwdConfig | None = None):
    """FlashAttention-2 forward.

    Args:
        q: (..., Nq, d); k, v: (..., Nk, d). numpy arrays (requires
            ``TRITON_INTERPRET=1``) or CuPy arrays on a GPU. dtype float32,
            float16, bfloat16, or uint16 holding bfloat16 bits; q, k, v share it.
        causal: bottom-right aligned causal mask (query i sees key j iff
            j <= i + Nk - Nq).
        scale: softmax scale, default 1/sqrt(d).
        fp32_precision: tl.dot precision for fp32 inputs on a GPU:
            "tf32x3" (default, ~fp32 accuracy on tensor cores), "ieee" or "tf32".
        config: override the tile config (tests / tuning).

    Returns:
        (o, lse): o like q (same dtype); lse (..., Nq) float32, natural-log
        log-sum-exp of the scaled scores; +inf for rows with no visible key
        (where o is 0).
    """
    xp = host.array_module(q)
    batch, n_q, n_k, d = _check_qkv(q, k, v)
    cfg = config or fwd_config(d, q.dtype.itemsize)
    bd = head_block(d)
    qf, kf, vf = (_flat(xp, x, batch) for x in (q, k, v))
    o = xp.empty_like(qf)
    lse = xp.empty((batch, n_q), dtype=xp.float32)
    grid = (triton.cdiv(n_q, cfg.BLOCK_M), batch)
    host.launch(_attn_fwd, grid, [qf, kf, vf, o, lse, n_q, n_k, _resolve_scale(scale, d)],
                dict(HEAD_DIM=d, BLOCK_D=bd, BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, CAUSAL=bool(causal),
                     DOT_PRECISION=_dot_precision(q.dtype, fp32_precision), UPCAST_DOT=_upcast_dot(q),
                     num_warps=cfg.num_warps, num_stages=cfg.num_stages), like=q)
    return o.reshape(q.shape), lse.reshape(q.shape[:-1])


def flash_attention_backward(q, k, v, o, lse, do, *, causal: bool = False, scale: float | None = None,
                             fp32_precision: str = "tf32x3", config: BwdConfig | None = None):
    """FlashAttention-2 backward.

    Args:
        q, k, v: as for :func:`flash_attention_forward`.
        o, lse: its outputs (o like q; lse (..., Nq) float32).
        do: gradient of o, like q.
        causal, scale, fp32_precision: as in the forward (causal and scale
            must match it).
        config: override the tile config.

    Returns:
        (dq, dk, dv) shaped and typed like q, k, v.
    """
    xp = host.array_module(q)
    batch, n_q, n_k, d = _check_qkv(q, k, v)
    if o.shape != q.shape or do.shape != q.shape or tuple(lse.shape) != tuple(q.shape[:-1]):
        raise ValueError(f"o/do must be {q.shape} and lse {q.shape[:-1]}; got {o.shape}, {do.shape}, {lse.shape}")
    cfg = config or bwd_config(d, q.dtype.itemsize)
    bd = head_block(d)
    sm_scale = _resolve_scale(scale, d)
    qf, kf, vf, of, dof = (_flat(xp, x.astype(q.dtype, copy=False), batch) for x in (q, k, v, o, do))
    lsef = xp.ascontiguousarray(lse, dtype=xp.float32).reshape(batch, n_q)
    delta = xp.empty((batch, n_q), dtype=xp.float32)
    dq, dk, dv = xp.empty_like(qf), xp.empty_like(kf), xp.empty_like(vf)
    common = dict(HEAD_DIM=d, BLOCK_D=bd, CAUSAL=bool(causal), DOT_PRECISION=_dot_precision(q.dtype, fp32_precision),
                  UPCAST_DOT=_upcast_dot(q),
                  num_warps=cfg.num_warps, num_stages=cfg.num_stages)

    pre_m = preprocess_block_m(d)
    host.launch(_attn_bwd_preprocess, (triton.cdiv(n_q, pre_m), batch), [of, dof, delta, n_q],
                dict(HEAD_DIM=d, BLOCK_D=bd, BLOCK_M=pre_m, num_warps=4), like=q)
    host.launch(_attn_bwd_dkdv, (triton.cdiv(n_k, cfg.BLOCK_N), batch),
                [qf, kf, vf, dof, lsef, delta, dk, dv, n_q, n_k, sm_scale],
                dict(BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, **common), like=q)
    host.launch(_attn_bwd_dq, (triton.cdiv(n_q, cfg.BLOCK_M2), batch),
                [qf, kf, vf, dof, lsef, delta, dq, n_q, n_k, sm_scale],
                dict(BLOCK_M=cfg.BLOCK_M2, BLOCK_N=cfg.BLOCK_N2, **common), like=q)
    return dq.reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape)


# Kernels and the constexpr names each one takes, for compile checks.
KERNELS: dict[str, Any] = {
    "fwd": _attn_fwd,
    "bwd_preprocess": _attn_bwd_preprocess,
    "bwd_dkdv": _attn_bwd_dkdv,
    "bwd_dq": _attn_bwd_dq,
}


# ==========================================================================
# ahead-of-time compile check (no GPU needed)
# ==========================================================================

_FP32_POINTERS = {"LSE", "DELTA"}  # always fp32, whatever the input dtype
_INT_ARGS = {"n_q": "i32", "n_k": "i32", "sm_scale": "fp32"}


def _signature(kernel, elem: str) -> dict[str, str]:
    """Triton signature for one of our kernels with element type ``elem``."""
    sig = {}
    for name in kernel.arg_names:
        if name in _INT_ARGS:
            sig[name] = _INT_ARGS[name]
        elif name.isupper() and "_" not in name or name in _FP32_POINTERS:
            sig[name] = "*fp32" if name in _FP32_POINTERS else f"*{elem}"
        else:
            sig[name] = "constexpr"
    return sig


def _kernel_launches(head_dim: int, itemsize: int, causal: bool, precision: str,
                     fc: FwdConfig | None = None, bc: BwdConfig | None = None):
    """(name, kernel, constexprs, options) for every kernel, with the tile
    config the host wrappers would pick unless fc / bc override it."""
    bd = head_block(head_dim)
    fc = fc or fwd_config(head_dim, itemsize)
    bc = bc or bwd_config(head_dim, itemsize)
    base = dict(HEAD_DIM=head_dim, BLOCK_D=bd, CAUSAL=causal, DOT_PRECISION=precision, UPCAST_DOT=False)
    return [
        ("fwd", _attn_fwd, dict(base, BLOCK_M=fc.BLOCK_M, BLOCK_N=fc.BLOCK_N),
         dict(num_warps=fc.num_warps, num_stages=fc.num_stages)),
        ("bwd_preprocess", _attn_bwd_preprocess,
         dict(HEAD_DIM=head_dim, BLOCK_D=bd, BLOCK_M=preprocess_block_m(head_dim)), dict(num_warps=4)),
        ("bwd_dkdv", _attn_bwd_dkdv, dict(base, BLOCK_M=bc.BLOCK_M, BLOCK_N=bc.BLOCK_N),
         dict(num_warps=bc.num_warps, num_stages=bc.num_stages)),
        ("bwd_dq", _attn_bwd_dq, dict(base, BLOCK_M=bc.BLOCK_M2, BLOCK_N=bc.BLOCK_N2),
         dict(num_warps=bc.num_warps, num_stages=bc.num_stages)),
    ]


def compile_report(head_dim: int, dtype: str = "float16", *, causal: bool = True, arch: int = 90,
                   kernels: tuple[str, ...] | None = None, fp32_precision: str = "tf32x3",
                   fwd: FwdConfig | None = None, bwd: BwdConfig | None = None) -> dict[str, dict[str, Any]]:
    """Compile every kernel for ``cuda:sm_<arch>`` on the CPU (no GPU needed).

    Uses the ptxas shipped in the Triton wheel. Must run in a process where
    ``TRITON_INTERPRET`` is unset (the interpreter replaces ``@triton.jit``).

    Args:
        head_dim: d. dtype: "float32", "float16" or "bfloat16".
        kernels: subset of ``KERNELS`` names (default all).
        fp32_precision: as in the wrappers (only used for float32).
        fwd, bwd: tile configs to try instead of the wrappers' choice.

    Returns:
        {kernel name: {"shared": bytes of shared memory per block,
        "n_regs": registers per thread, "spill_stores"/"spill_loads": bytes,
        "config": constexprs and launch options}}. Register/spill numbers come
        from ``ptxas -v`` and are None if its log could not be parsed.
    """
    elem = host.TRITON_SHORT[dtype]
    itemsize = 4 if dtype == "float32" else 2
    precision = _dot_precision(np.float32 if itemsize == 4 else np.float16, fp32_precision)
    launches = _kernel_launches(head_dim, itemsize, causal, precision, fwd, bwd)
    return host.compile_for_target(launches, lambda kernel: _signature(kernel, elem), arch=arch, kernels=kernels)
