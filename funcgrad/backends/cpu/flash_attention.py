"""FlashAttention forward and backward as numba CPU kernels.

numpy arrays in, numpy arrays out; no autodiff here (the core library wraps
these as a primitive). Shapes: ``q`` (B, Nq, d), ``k`` and ``v`` (B, Nk, d),
C-contiguous, all float32 or all float64; B is batch x heads flattened.

Algorithm (Dao et al.): the keys are visited in tiles of ``block_k`` rows
with an online softmax (running row max ``m`` and row sum ``l``, the output
accumulator rescaled by ``exp(m_old - m_new)``), so nothing of size Nq x Nk
is ever allocated; per thread there is only O(block_q * block_k) scratch.
Tile products are BLAS calls (``np.dot`` inside njit -> scipy's OpenBLAS).
The backward recomputes ``P = exp(S * scale - lse)`` tile by tile.

Causal masking is **bottom-right aligned** (as in FlashAttention-2 and
PyTorch's ``CausalBias.LOWER_RIGHT``): query row ``i`` may attend key ``j``
iff ``j <= i + (Nk - Nq)``. Tiles entirely above that diagonal are never
loaded; only the tiles that straddle it are masked, and masking is done by
limiting each row's column range, so no -inf is ever written. When
``Nq > Nk`` the first ``Nq - Nk`` rows see no key at all: their output row
is 0 and their ``lse`` is ``+inf``, so the backward's ``exp(S - lse)`` is 0
and their gradient contributions are exactly 0 (never NaN).

Threading: parallel (``prange``) over B x query tiles (forward, dQ pass) or
B x key tiles (dK/dV pass), or over B (one-pass backward); BLAS is kept
single-threaded during the kernels (see ``_blas_single_thread``) because
each numba worker issues its own tile products. Results are deterministic:
every output element is accumulated by one thread in a fixed order.

Inputs with NaN/inf give unspecified results (the kernels use fast-math).

Measured at B=8, N=4096, d=64, float32 on 2 cores: see
``benchmarks/attention_tiles.py`` and ``_DEFAULT_BLOCKS`` below.
"""
from __future__ import annotations

import os
import threading

import numba
import numpy as np
from numba import prange, types
from numba.extending import overload

from ._fastmath import exp_f32, exp_f64

__all__ = ["flash_attention_forward", "flash_attention_backward"]

# (block_q, block_k) defaults, chosen with benchmarks/attention_tiles.py at
# B*H=8, N=4096, d=64 f32 on the shared 2-vCPU box (load ~5 from other jobs,
# so ratios are +-30%): 256x256 was best or tied in every run, fwd+bwd
# 1.15-1.47x SDPA (causal / non-causal) vs 128x128 1.45-1.54x and 512x256
# 1.37-1.61x; 64x64 tiles were 1.1-1.6x at N<=2048.
_DEFAULT_BLOCK_Q = 256
_DEFAULT_BLOCK_K = 256


# --------------------------------------------------------------------------
# dtype-generic helpers
# --------------------------------------------------------------------------

def _exp(x):  # pragma: no cover - replaced by the overload inside njit
    raise NotImplementedError


@overload(_exp, inline="always", fastmath=True)
def _exp_overload(x):
    """Vectorisable exp: ``exp_f32`` / ``exp_f64`` by argument type."""
    if x == types.float32:
        return lambda x: exp_f32(x)
    if x == types.float64:
        return lambda x: exp_f64(x)
    return None


def _blocks(n, block):
    """Number of tiles of size ``block`` covering ``n`` rows."""
    return (n + block - 1) // block


# --------------------------------------------------------------------------
# Forward
# --------------------------------------------------------------------------

@numba.njit(fastmath=True, cache=True, inline="always")
def _fwd_tile_softmax(s, mq, nk, row0, col0, off, causal, sc, m, l, acc):
    """Online-softmax update of one (mq, nk) score tile, in place.

    s: (mq, nk) raw ``Q K^T``; on return ``P = exp(s*sc - m_new)`` with
    masked columns 0. m, l: (mq,) running max / sum (``l == 0`` means no
    key seen yet; m is then unused). acc: (mq, d) rescaled by
    ``exp(m_old - m_new)``. Row r may use columns ``c < row0 + r + off + 1
    - col0`` when causal.
    """
    zero = sc - sc
    for r in range(mq):
        jl = nk
        if causal:
            jl = min(nk, row0 + r + off + 1 - col0)
        if jl <= 0:
            for c in range(nk):
                s[r, c] = zero
            continue
        mx = s[r, 0] * sc
        for c in range(1, jl):
            mx = max(mx, s[r, c] * sc)
        if l[r] == zero:
            m_new = mx
            alpha = zero
        else:
            m_new = max(m[r], mx)
            alpha = _exp(m[r] - m_new)
        tot = zero
        for c in range(jl):
            p = _exp(s[r, c] * sc - m_new)
            s[r, c] = p
            tot += p
        for c in range(jl, nk):
            s[r, c] = zero
        m[r] = m_new
        l[r] = l[r] * alpha + tot
        for c in range(acc.shape[1]):
            acc[r, c] *= alpha


@numba.njit(parallel=True, fastmath=True, cache=True)
def _fwd_kernel(q, k, v, o, lse, consts, causal, bq, bk, scratch):
    """o (B, Nq, d), lse (B, Nq) <- attention(q, k, v); see module doc.

    consts: dtype array [scale, 0, 1, inf] (typed scalars, so float32 code
    never promotes to float64). scratch: (threads, bq*bk + 2*bq*d + 2*bq)
    per-thread buffers, indexed by ``numba.get_thread_id()``.
    """
    B, Nq, d = q.shape
    Nk = k.shape[1]
    off = Nk - Nq
    sc = consts[0]
    zero = consts[1]
    one = consts[2]
    inf = consts[3]
    nqt = (Nq + bq - 1) // bq
    for job in prange(B * nqt):
        b = job // nqt
        t = _balanced_tile(job % nqt, nqt, causal)
        i0 = t * bq
        mq = min(bq, Nq - i0)
        buf = scratch[numba.get_thread_id()]
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
            _fwd_tile_softmax(s, mq, nk, i0, j0, off, diag, sc, m, l, acc)
            np.dot(s, v[b, j0:j0 + nk], pv)
            for r in range(mq):
                for c in range(d):
                    acc[r, c] += pv[r, c]
        for r in range(mq):
            if l[r] == zero:  # no visible key (causal, Nq > Nk)
                lse[b, i0 + r] = inf
                for c in range(d):
                    o[b, i0 + r, c] = zero
            else:
                inv = one / l[r]
                lse[b, i0 + r] = m[r] + np.log(l[r])
                for c in range(d):
                    o[b, i0 + r, c] = acc[r, c] * inv


@numba.njit(cache=True, inline="always")
def _balanced_tile(u, n, causal):
    """Tile visited as the u-th of n: 0, n-1, 1, n-2, ... when causal.

    prange splits its range into contiguous chunks per thread; causal tiles
    cost in proportion to their index, so pairing light and heavy tiles
    keeps the chunks balanced even for B = 1.
    """
    if not causal:
        return u
    if u % 2 == 0:
        return u // 2
    return n - 1 - u // 2


# --------------------------------------------------------------------------
# Backward
# --------------------------------------------------------------------------

@numba.njit(fastmath=True, cache=True, inline="always")
def _bwd_tile_ds(s, dp, mq, nk, row0, col0, off, causal, sc, lse_t, D_t):
    """P and dS of one (mq, nk) tile, in place.

    s: raw ``Q K^T`` -> ``P = exp(s*sc - lse)`` (masked columns 0).
    dp: ``dO V^T`` -> ``dS * sc = P * (dP - D) * sc`` (the softmax scale is
    folded in here, so ``dK = dS^T Q`` and ``dQ = dS K`` need no rescale).
    """
    zero = sc - sc
    for r in range(mq):
        jl = nk
        if causal:
            jl = max(0, min(nk, row0 + r + off + 1 - col0))
        lr = lse_t[r]
        dr = D_t[r]
        for c in range(jl):
            p = _exp(s[r, c] * sc - lr)
            s[r, c] = p
            dp[r, c] = p * (dp[r, c] - dr) * sc
        for c in range(jl, nk):
            s[r, c] = zero
            dp[r, c] = zero


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


@numba.njit(cache=True, inline="always")
def _add_into(dst, src):
    """dst += src for 2-D arrays of equal shape."""
    for r in range(dst.shape[0]):
        for c in range(dst.shape[1]):
            dst[r, c] += src[r, c]


@numba.njit(fastmath=True, cache=True, inline="always")
def _bwd_pair(b, i0, mq, j0, nk, q, k, v, do, lse, D, dq, dk, dv, off,
              causal, sc, s, dp, tmp_q, tmp_k, with_dq, with_dkv):
    """All gradient contributions of query tile i0 x key tile j0."""
    qt = q[b, i0:i0 + mq]
    kt = k[b, j0:j0 + nk]
    dot = do[b, i0:i0 + mq]
    np.dot(qt, kt.T, s)
    np.dot(dot, v[b, j0:j0 + nk].T, dp)
    diag = causal and (j0 + nk - 1 > i0 + off)
    _bwd_tile_ds(s, dp, mq, nk, i0, j0, off, diag, sc,
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
                scratch, mode):
    """dq, dk, dv += gradients, by schedule ``mode`` (one kernel, so that
    only one parallel kernel per dtype is compiled for the backward):

    _ONEPASS: parallel over B; the thread owning b loops key tiles (outer)
      and query tiles (inner) and accumulates dq, dk, dv (5 GEMMs/pair).
    _DKV: parallel over B x key tiles, dk and dv only (4 GEMMs/pair).
    _DQ: parallel over B x query tiles, dq only (3 GEMMs/pair).
    Each output tile has one owner thread: no races, deterministic order.
    """
    B, Nq, d = q.shape
    Nk = k.shape[1]
    off = Nk - Nq
    sc = consts[0]
    nqt = (Nq + bq - 1) // bq
    nkt = (Nk + bk - 1) // bk
    per = 1
    if mode == _DKV:
        per = nkt
    elif mode == _DQ:
        per = nqt
    for job in prange(B * per):
        b = job // per
        u = job % per
        buf = scratch[numba.get_thread_id()]
        if mode == _DQ:
            i0 = _balanced_tile(u, nqt, causal) * bq
            mq = min(bq, Nq - i0)
            kend = Nk
            if causal:
                kend = min(Nk, max(0, i0 + mq + off))
            for j0 in range(0, kend, bk):
                nk = min(bk, kend - j0)
                s, dp, tq, tk = _views(buf, bq, bk, d, mq, nk)
                _bwd_pair(b, i0, mq, j0, nk, q, k, v, do, lse, D, dq, dk, dv,
                          off, causal, sc, s, dp, tq, tk, True, False)
        else:
            jlo = 0
            jhi = nkt
            if mode == _DKV:
                # key tiles near the end see the fewest queries when causal
                jlo = _balanced_tile(u, nkt, causal)
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
                    _bwd_pair(b, i0, mq, j0, nk, q, k, v, do, lse, D, dq, dk,
                              dv, off, causal, sc, s, dp, tq, tk,
                              mode == _ONEPASS, True)


# --------------------------------------------------------------------------
# Python wrappers
# --------------------------------------------------------------------------

_BLAS_LOCK = threading.Lock()
_blas_percall = None  # controller limited around each call, or None


def _owned_by(path, pkg):
    parts = os.path.normpath(path).split(os.sep)
    return pkg in parts or pkg + ".libs" in parts


def _setup_blas():
    """Make the BLAS that numba's ``np.dot`` calls single-threaded.

    numba calls scipy's BLAS (``scipy.linalg.cython_blas``). Every numba
    worker issues its own tile GEMMs, so a multi-threaded BLAS would
    oversubscribe the cores (measured: 3-25x slower). When scipy bundles its
    own OpenBLAS (pip wheels: ``scipy.libs/``), that library is limited to
    one thread once and for all: numpy's matmul uses numpy's own copy and is
    unaffected, and limiting per call then restoring was measured to be up
    to 1.6x slower (restoring wakes OpenBLAS' spinning workers, which then
    compete with the next kernel). If the BLAS is shared with numpy (conda,
    system builds) it is limited around each kernel call instead.
    """
    global _blas_percall
    import scipy.linalg.cython_blas  # noqa: F401 -- loads the BLAS numba uses
    import threadpoolctl
    ctl = threadpoolctl.ThreadpoolController().select(user_api="blas")
    own = [c for c in ctl.lib_controllers
           if _owned_by(c.filepath, "scipy") and not _owned_by(c.filepath, "numpy")]
    if own:
        for c in own:
            c.set_num_threads(1)
    else:
        _blas_percall = ctl


_blas_ready = False


class _blas_single_thread:
    """Context manager: BLAS on one thread while a kernel runs.

    See ``_setup_blas``. threadpoolctl limits are process-wide, hence the
    lock (which also serialises concurrent callers, whose numba workers
    would oversubscribe the cores anyway).
    """

    def __enter__(self):
        global _blas_ready
        _BLAS_LOCK.acquire()
        try:
            if not _blas_ready:
                _setup_blas()
                _blas_ready = True
            self._limit = (None if _blas_percall is None
                           else _blas_percall.limit(limits=1))
        except BaseException:
            _BLAS_LOCK.release()
            raise
        return self

    def __exit__(self, *exc):
        try:
            if self._limit is not None:
                self._limit.restore_original_limits()
        finally:
            _BLAS_LOCK.release()


def _check_qkv(q, k, v):
    """Validate q (B, Nq, d), k/v (B, Nk, d), one float dtype, contiguous."""
    arrs = (q, k, v)
    desc = ", ".join(f"{n}: {getattr(a, 'shape', None)} {getattr(a, 'dtype', type(a).__name__)}"
                     for n, a in zip("qkv", arrs))
    if not all(isinstance(a, np.ndarray) for a in arrs):
        raise ValueError(f"flash_attention: q, k, v must be numpy arrays ({desc})")
    if q.dtype not in (np.float32, np.float64) or not (q.dtype == k.dtype == v.dtype):
        raise ValueError("flash_attention: q, k, v must share dtype float32 or "
                         f"float64 ({desc})")
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise ValueError(f"flash_attention: q, k, v must be 3-D (B, N, d) ({desc})")
    if k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[2] != k.shape[2]:
        raise ValueError("flash_attention: expected q (B, Nq, d), k and v "
                         f"(B, Nk, d) ({desc})")
    if not all(a.flags.c_contiguous for a in arrs):
        raise ValueError(f"flash_attention: q, k, v must be C-contiguous ({desc})")


def _check_like(name, a, shape, dtype):
    if not isinstance(a, np.ndarray) or a.shape != shape or a.dtype != dtype \
            or not a.flags.c_contiguous:
        got = (getattr(a, "shape", None), getattr(a, "dtype", type(a).__name__))
        raise ValueError(f"flash_attention: {name} must be a C-contiguous "
                         f"{np.dtype(dtype).name} array of shape {shape}, "
                         f"got {got[0]} {got[1]}")


def _tiles(Nq, Nk, block_q, block_k):
    bq = _DEFAULT_BLOCK_Q if block_q is None else int(block_q)
    bk = _DEFAULT_BLOCK_K if block_k is None else int(block_k)
    if bq < 1 or bk < 1:
        raise ValueError(f"flash_attention: block sizes must be >= 1, got "
                         f"block_q={block_q}, block_k={block_k}")
    # no point in tiles larger than the problem
    return max(1, min(bq, Nq)), max(1, min(bk, Nk))


def _consts(scale, dtype):
    return np.array([scale, 0.0, 1.0, np.inf], dtype=dtype)


def _scratch(width, dtype):
    """Per-thread scratch rows; allocated by numpy (see PERF-NOTES)."""
    return np.empty((numba.config.NUMBA_NUM_THREADS, width), dtype=dtype)


def flash_attention_forward(q, k, v, *, causal: bool, scale: float,
                            block_q: int | None = None,
                            block_k: int | None = None):
    """Softmax attention ``softmax(q k^T * scale [+ mask]) v``, tiled.

    Args:
      q: (B, Nq, d); k, v: (B, Nk, d). C-contiguous, same dtype (float32 or
        float64).
      causal: bottom-right aligned causal mask (key j visible to query i iff
        ``j <= i + Nk - Nq``).
      scale: multiplies the logits (usually ``d ** -0.5``).
      block_q, block_k: tile sizes (defaults chosen by benchmark).

    Returns:
      o: (B, Nq, d) and lse: (B, Nq), both q's dtype. ``lse`` is the
      row-wise logsumexp of the scaled, masked logits; rows with no visible
      key (causal, Nq > Nk) get ``o = 0`` and ``lse = +inf``.
    """
    _check_qkv(q, k, v)
    B, Nq, d = q.shape
    Nk = k.shape[1]
    dt = q.dtype
    o = np.empty((B, Nq, d), dtype=dt)
    lse = np.empty((B, Nq), dtype=dt)
    if B == 0 or Nq == 0:
        return o, lse
    if Nk == 0:  # nothing to attend to: the "no visible key" rows
        o[...] = 0
        lse[...] = np.inf
        return o, lse
    bq, bk = _tiles(Nq, Nk, block_q, block_k)
    scratch = _scratch(bq * bk + 2 * bq * d + 2 * bq, dt)
    with _blas_single_thread():
        _fwd_kernel(q, k, v, o, lse, _consts(scale, dt), bool(causal),
                    bq, bk, scratch)
    return o, lse


def _use_onepass(B):
    """Pick the one-pass backward when B alone keeps all threads busy.

    Cost model (measured, see benchmarks/attention_tiles.py): one-pass does
    5 GEMMs per tile pair but parallelises over B only; two-pass does 7 but
    parallelises over tiles: one-pass wins iff ceil(B/T) * 5 <= B * 7 / T.
    """
    T = numba.get_num_threads()
    return -(-B // T) * 5 * T <= 7 * B


def flash_attention_backward(q, k, v, o, lse, do, *, causal: bool,
                             scale: float, block_q: int | None = None,
                             block_k: int | None = None,
                             onepass: bool | None = None):
    """Gradients of ``flash_attention_forward`` w.r.t. q, k, v.

    Args:
      q, k, v: as for the forward; o (B, Nq, d) and lse (B, Nq) its outputs;
        do (B, Nq, d) the output cotangent. All the same dtype, C-contiguous.
      causal, scale, block_q, block_k: as for the forward (the tiles need
        not match the forward's).
      onepass: force the one-pass (parallel over B) or two-pass (parallel
        over tiles) schedule; default picks by ``_use_onepass``.

    Returns:
      dq (B, Nq, d), dk (B, Nk, d), dv (B, Nk, d), q's dtype. Rows with no
      visible key contribute exactly 0.
    """
    _check_qkv(q, k, v)
    B, Nq, d = q.shape
    Nk = k.shape[1]
    dt = q.dtype
    _check_like("o", o, (B, Nq, d), dt)
    _check_like("do", do, (B, Nq, d), dt)
    _check_like("lse", lse, (B, Nq), dt)
    dq = np.zeros((B, Nq, d), dtype=dt)
    dk = np.zeros((B, Nk, d), dtype=dt)
    dv = np.zeros((B, Nk, d), dtype=dt)
    if B == 0 or Nq == 0 or Nk == 0:
        return dq, dk, dv
    bq, bk = _tiles(Nq, Nk, block_q, block_k)
    D = np.empty((B, Nq), dtype=dt)
    scratch = _scratch(2 * bq * bk + bq * d + bk * d, dt)
    consts = _consts(scale, dt)
    causal = bool(causal)
    if onepass is None:
        onepass = _use_onepass(B)
    args = (q, k, v, do, lse, D, dq, dk, dv, consts, causal, bq, bk, scratch)
    with _blas_single_thread():
        _rowdot_kernel(do, o, D)
        if onepass:
            _bwd_kernel(*args, _ONEPASS)
        else:
            _bwd_kernel(*args, _DKV)
            _bwd_kernel(*args, _DQ)
    return dq, dk, dv
