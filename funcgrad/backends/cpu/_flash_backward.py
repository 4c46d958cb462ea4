"""The backward FlashAttention kernels on the CPU: ``_rowdot_kernel`` (``D = rowsum(dO * O)``) and
``_bwd_kernel``, in one-pass (jobs over the batch) or two-pass (dK/dV over key tiles, then dQ over query
tiles) schedules, with the tile pieces ``_bwd_tile_ds``, ``_bwd_pair`` and ``_views``. Called by
``flash_attention_backward`` in ``flash_attention.py``; its numba helpers are in ``_flash_intrinsics``, the
forward in ``_flash_forward``.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import prange

from ._flash_intrinsics import _add_into, _exp2, _next_job


@numba.njit(fastmath=True, cache=True, inline="always")
def _bwd_tile_ds(s, dp, mq, nk, row0, col0, off, causal, sc, sc2, log2e,
                 lse_t, D_t):
    """P and dS of one (mq, nk) tile, in place.

    s: raw ``Q K^T`` -> ``P = 2**(s*sc2 - lse*log2(e))`` (masked columns 0;
    sc2 = scale*log2(e)). dp: ``dO V^T`` -> ``dS * sc = P * (dP - D) * sc``
    (the softmax scale is folded in here, so ``dK = dS^T Q`` and
    ``dQ = dS K`` need no rescale).
    """
    zero = sc - sc
    for r in range(mq):
        jl = nk
        if causal:
            jl = max(0, min(nk, row0 + r + off + 1 - col0))
        lr = lse_t[r] * log2e
        dr = D_t[r]
        sr = s[r]
        dpr = dp[r]
        for c in range(jl):
            p = _exp2(sr[c] * sc2 - lr)
            sr[c] = p
            dpr[c] = p * (dpr[c] - dr) * sc
        for c in range(jl, nk):
            sr[c] = zero
            dpr[c] = zero


@numba.njit(parallel=True, fastmath=True, cache=True)
def _rowdot_kernel(do, o, D):
    """D (B, Nq) <- rowsum(dO * O)."""
    B, Nq, d = o.shape
    for i in prange(B * Nq):
        b = i // Nq
        r = i % Nq
        acc = D[b, r] - D[b, r]
        for c in range(d):
            acc += do[b, r, c] * o[b, r, c]
        D[b, r] = acc


@numba.njit(fastmath=True, cache=True, inline="always")
def _bwd_pair(b, i0, mq, j0, nk, q, k, v, do, lse, D, dq, dk, dv, off,
              causal, sc, sc2, log2e, s, dp, tmp_q, tmp_k, with_dq, with_dkv):
    """All gradient contributions of query tile i0 x key tile j0."""
    qt = q[b, i0:i0 + mq]
    kt = k[b, j0:j0 + nk]
    dot = do[b, i0:i0 + mq]
    np.dot(qt, kt.T, s)
    np.dot(dot, v[b, j0:j0 + nk].T, dp)
    diag = causal and (j0 + nk - 1 > i0 + off)
    _bwd_tile_ds(s, dp, mq, nk, i0, j0, off, diag, sc, sc2, log2e,
                 lse[b, i0:i0 + mq], D[b, i0:i0 + mq])
    if with_dkv:
        np.dot(s.T, dot, tmp_k)          # P^T dO
        _add_into(dv[b, j0:j0 + nk], tmp_k)
        np.dot(dp.T, qt, tmp_k)          # dS^T Q (scale folded in dS)
        _add_into(dk[b, j0:j0 + nk], tmp_k)
    if with_dq:
        np.dot(dp, kt, tmp_q)            # dS K
        _add_into(dq[b, i0:i0 + mq], tmp_q)


@numba.njit(cache=True, inline="always")
def _views(buf, bq, bk, d, mq, nk):
    """Slice one thread's scratch row into (s, dp, tmp_q, tmp_k)."""
    n = bq * bk
    s = buf[:mq * nk].reshape((mq, nk))
    dp = buf[n:n + mq * nk].reshape((mq, nk))
    tq = buf[2 * n:2 * n + mq * d].reshape((mq, d))
    tk = buf[2 * n + bq * d:2 * n + bq * d + nk * d].reshape((nk, d))
    return s, dp, tq, tk


_ONEPASS, _DKV, _DQ = 0, 1, 2


@numba.njit(parallel=True, fastmath=True, cache=True)
def _bwd_kernel(q, k, v, do, lse, D, dq, dk, dv, consts, causal, bq, bk,
                scratch, mode, counter):
    """dq, dk, dv += gradients, by schedule ``mode`` (one kernel, so that
    only one parallel kernel per dtype is compiled for the backward):

    _ONEPASS: jobs are the B slices; the thread running b loops key tiles
      (outer) and query tiles (inner) and accumulates dq, dk, dv (5
      GEMMs/pair).
    _DKV: jobs are B x key tiles, dk and dv only (4 GEMMs/pair).
    _DQ: jobs are B x query tiles, dq only (3 GEMMs/pair).
    Jobs are taken dynamically (``_next_job`` on ``counter``), heaviest
    first when causal. Each output tile belongs to one job: no races, and a
    fixed accumulation order, so results are deterministic.
    """
    B, Nq, d = q.shape
    Nk = k.shape[1]
    off = Nk - Nq
    sc = consts[0]
    sc2 = consts[4]
    log2e = consts[6]
    nqt = (Nq + bq - 1) // bq
    nkt = (Nk + bk - 1) // bk
    per = 1
    if mode == _DKV:
        per = nkt
    elif mode == _DQ:
        per = nqt
    njobs = B * per
    for w in prange(counter.shape[0] - 1):
        buf = scratch[numba.get_thread_id()]
        while True:
            job = _next_job(counter)
            if job >= njobs:
                break
            b = job % B
            u = job // B
            if mode == _DQ:
                if causal:  # the last query tiles see the most keys
                    u = nqt - 1 - u
                i0 = u * bq
                mq = min(bq, Nq - i0)
                kend = Nk
                if causal:
                    kend = min(Nk, max(0, i0 + mq + off))
                for j0 in range(0, kend, bk):
                    nk = min(bk, kend - j0)
                    s, dp, tq, tk = _views(buf, bq, bk, d, mq, nk)
                    _bwd_pair(b, i0, mq, j0, nk, q, k, v, do, lse, D, dq, dk,
                              dv, off, causal, sc, sc2, log2e, s, dp, tq, tk,
                              True, False)
            else:
                jlo = 0
                jhi = nkt
                if mode == _DKV:
                    # the first key tiles see the most queries when causal
                    jlo = u
                    jhi = jlo + 1
                for jt in range(jlo, jhi):
                    j0 = jt * bk
                    nk = min(bk, Nk - j0)
                    # first query row that sees key j0: i + off >= j0
                    istart = 0
                    if causal:
                        istart = max(0, j0 - off) // bq * bq
                    for i0 in range(istart, Nq, bq):
                        mq = min(bq, Nq - i0)
                        s, dp, tq, tk = _views(buf, bq, bk, d, mq, nk)
                        _bwd_pair(b, i0, mq, j0, nk, q, k, v, do, lse, D, dq,
                                  dk, dv, off, causal, sc, sc2, log2e, s, dp,
                                  tq, tk, mode == _ONEPASS, True)
