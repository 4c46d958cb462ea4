"""The forward FlashAttention kernel on the CPU: ``_fwd_kernel`` (a prange over workers taking batch x
query-tile jobs) and its online-softmax tile update ``_fwd_tile_softmax``. Called by
``flash_attention_forward`` in ``flash_attention.py`` (which documents the algorithm, the causal
alignment and the threading); its numba helpers are in ``_flash_intrinsics``, the backward in
``_flash_backward``.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import prange

from ._flash_intrinsics import _add_into, _exp2, _fmax, _next_job


@numba.njit(fastmath=True, cache=True, inline="always")
def _fwd_tile_softmax(s, mq, nk, row0, col0, off, causal, sc2, m, l, acc):
    """Online-softmax update of one (mq, nk) score tile, in place.

    s: (mq, nk) raw ``Q K^T``; on return ``P = 2**(s*sc2 - m_new)`` with
    masked columns 0 (sc2 = scale * log2(e), so m is in base-2 units).
    m, l: (mq,) running max / sum (``l == 0`` means no key seen yet; m is
    then unused). acc: (mq, d) rescaled by ``2**(m_old - m_new)``. Row r
    may use columns ``c < row0 + r + off + 1 - col0`` when causal.
    """
    zero = sc2 - sc2
    one = zero + 1
    d = acc.shape[1]
    for r in range(mq):
        jl = nk
        if causal:
            jl = min(nk, row0 + r + off + 1 - col0)
        sr = s[r]
        if jl <= 0:
            for c in range(nk):
                sr[c] = zero
            continue
        mx = sr[0] * sc2
        for c in range(1, jl):
            mx = _fmax(mx, sr[c] * sc2)
        lr = l[r]
        if lr == zero:
            m_new = mx
            alpha = zero
        else:
            m_new = _fmax(m[r], mx)
            alpha = _exp2(m[r] - m_new)
        tot = zero
        for c in range(jl):
            p = _exp2(sr[c] * sc2 - m_new)
            sr[c] = p
            tot += p
        for c in range(jl, nk):
            sr[c] = zero
        m[r] = m_new
        l[r] = lr * alpha + tot
        if alpha != one:
            ar = acc[r]
            for c in range(d):
                ar[c] *= alpha


@numba.njit(parallel=True, fastmath=True, cache=True)
def _fwd_kernel(q, k, v, o, lse, consts, causal, bq, bk, scratch, counter):
    """o (B, Nq, d), lse (B, Nq) <- attention(q, k, v); see module doc.

    consts: dtype array [scale, 0, 1, inf, scale*log2(e), ln 2] (typed
    scalars, so float32 code never promotes to float64; see ``_consts``). scratch: (threads, bq*bk + 2*bq*d + 2*bq)
    per-thread buffers, indexed by ``numba.get_thread_id()``. counter:
    int64 zeros, the dynamic job counter (``_next_job``) followed by one
    slot per worker (see ``_counter``).
    """
    B, Nq, d = q.shape
    Nk = k.shape[1]
    off = Nk - Nq
    zero = consts[1]
    one = consts[2]
    inf = consts[3]
    sc2 = consts[4]
    ln2 = consts[5]
    nqt = (Nq + bq - 1) // bq
    njobs = B * nqt
    for w in prange(counter.shape[0] - 1):
        buf = scratch[numba.get_thread_id()]
        while True:
            job = _next_job(counter)
            if job >= njobs:
                break
            # heaviest first when causal (the last query tiles see the most keys)
            b = job % B
            t = job // B
            if causal:
                t = nqt - 1 - t
            i0 = t * bq
            mq = min(bq, Nq - i0)
            s_all = buf[:bq * bk]
            acc = buf[bq * bk:bq * bk + mq * d].reshape((mq, d))
            pv = buf[bq * bk + bq * d:bq * bk + bq * d + mq * d].reshape((mq, d))
            m = buf[bq * bk + 2 * bq * d:bq * bk + 2 * bq * d + mq]
            l = buf[bq * bk + 2 * bq * d + bq:bq * bk + 2 * bq * d + bq + mq]
            acc[:] = zero
            l[:] = zero
            m[:] = zero
            # keys this tile can see: j <= (i0 + mq - 1) + off
            kend = Nk
            if causal:
                kend = min(Nk, max(0, i0 + mq + off))
            qt = q[b, i0:i0 + mq]
            for j0 in range(0, kend, bk):
                nk = min(bk, kend - j0)
                s = s_all[:mq * nk].reshape((mq, nk))
                np.dot(qt, k[b, j0:j0 + nk].T, s)
                diag = causal and (j0 + nk - 1 > i0 + off)
                _fwd_tile_softmax(s, mq, nk, i0, j0, off, diag, sc2, m, l, acc)
                np.dot(s, v[b, j0:j0 + nk], pv)
                _add_into(acc, pv)
            for r in range(mq):
                ob = o[b, i0 + r]
                if l[r] == zero:  # no visible key (causal, Nq > Nk)
                    lse[b, i0 + r] = inf
                    for c in range(d):
                        ob[c] = zero
                else:
                    inv = one / l[r]
                    lse[b, i0 + r] = m[r] * ln2 + np.log(l[r])
                    ar = acc[r]
                    for c in range(d):
                        ob[c] = ar[c] * inv
