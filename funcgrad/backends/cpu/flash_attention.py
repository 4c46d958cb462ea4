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

Threading: ``prange`` over the worker threads, each of which takes jobs
from a shared atomic counter (``_next_job``): B x query tiles (forward, dQ
pass), B x key tiles (dK/dV pass) or B (one-pass backward), heaviest first
when causal. Dynamic scheduling keeps both cores busy when a core is slowed
by other processes or when causal tiles differ in cost. BLAS is kept
single-threaded during the kernels (see ``_blas_single_thread``) because
each numba worker issues its own tile products. Results are deterministic:
every output element is accumulated by one job in a fixed order, whichever
worker runs it.

Softmax arithmetic is done in base 2 (logits scaled by ``scale * log2(e)``,
``_exp2``: a lean vectorised 2**x, rel. error 2e-7) and row maxima use
``llvm.maxnum`` (``_fmax``), which LLVM vectorises (numba's ``max`` stays
scalar and cost as much as the exp pass).

NaN and inf: the kernels use fast-math, so they run only when every score
is provably finite (``_scores_finite``: finite ``scale`` and
``||q||_F ||k||_F max(1, |scale| log2 e)`` far below the dtype's max; a
NaN or inf anywhere in q or k fails the test). Otherwise a chunked numpy
path (``_careful_forward`` / ``_careful_backward``) computes exactly what
the materialised softmax (``impl='naive'``) and JAX give: a query row whose
scores hold NaN or +inf, or are all -inf, has a NaN output and spreads NaN
to the gradients of every key it sees; rows with no visible key keep
``o = 0``, ``lse = +inf`` and zero gradients. NaN or inf in ``v`` or ``do``
flow through the products as in any matmul.

Measured at B=8, N=4096, d=64, float32 on 2 cores: see
``benchmarks/attention_tiles.py`` and ``_DEFAULT_FWD_BLOCKS`` below.

This module is the driver (tile sizes, BLAS threads, the numpy path for non-finite
scores, the public functions); the numba kernels are in ``_flash_forward`` and
``_flash_backward``, their shared intrinsics (``_exp2``, ``_fmax``, ``_next_job``) in
``_flash_intrinsics``.
"""
from __future__ import annotations

import math
import os
import threading

import numba
import numpy as np

from ._flash_backward import _DKV, _DQ, _ONEPASS, _bwd_kernel, _rowdot_kernel
from ._flash_forward import _fwd_kernel
from ._flash_intrinsics import _LN2, _LOG2E

__all__ = ["flash_attention_forward", "flash_attention_backward"]

# (block_q, block_k) defaults, chosen with benchmarks/attention_tiles.py and
# interleaved A/B runs at B*H=8, N=4096, d=64 f32 on the shared 2-vCPU box
# (load 4-7 from other jobs, so single ratios are +-30%; medians of 7-9
# rounds). Forward: 256x512 (the P V product then has K = 512, where scipy's
# OpenBLAS is nearly as fast as MKL; 256x256 was 1.02-1.2x slower). Backward:
# 256x256 (two 256x256 scratch tiles stay in the 1 MiB L2; 256x512 and
# 512x256 were within noise, not better).
_DEFAULT_FWD_BLOCKS = (256, 512)
_DEFAULT_BWD_BLOCKS = (256, 256)


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


def _tiles(Nq, Nk, block_q, block_k, defaults):
    bq = defaults[0] if block_q is None else int(block_q)
    bk = defaults[1] if block_k is None else int(block_k)
    if bq < 1 or bk < 1:
        raise ValueError(f"flash_attention: block sizes must be >= 1, got "
                         f"block_q={block_q}, block_k={block_k}")
    # no point in tiles larger than the problem
    return max(1, min(bq, Nq)), max(1, min(bk, Nk))


def _consts(scale, dtype):
    """[scale, 0, 1, inf, scale*log2(e), ln 2, log2(e)] in the kernel dtype."""
    return np.array([scale, 0.0, 1.0, np.inf, scale * _LOG2E, _LN2, _LOG2E],
                    dtype=dtype)


def _counter():
    """Job counter for ``_next_job`` (one per kernel call), plus one slot
    per worker: the kernels run ``len(counter) - 1`` workers (calling
    ``numba.get_num_threads()`` inside them would stop ``cache=True``)."""
    return np.zeros(1 + numba.get_num_threads(), dtype=np.int64)


def _scratch(width, dtype):
    """Per-thread scratch rows; allocated by numpy (huge pages; kernel-side allocations fill slower)."""
    return np.empty((numba.config.NUMBA_NUM_THREADS, width), dtype=dtype)


# --------------------------------------------------------------------------
# Non-finite scores: a numpy path with the materialised softmax's semantics
# --------------------------------------------------------------------------

# Elements of one chunk of scores in the numpy path (8 MiB in float64).
_CAREFUL_CHUNK = 1 << 20


def _frobenius(a):
    """sqrt(sum a^2) as a Python float, in one BLAS pass (twice as fast as
    max and min): inf if ``a`` holds an inf (or the sum overflows), NaN if it
    holds a NaN."""
    flat = a.reshape(-1)
    return math.sqrt(float(np.dot(flat, flat)))


def _scores_finite(q, k, scale):
    """True when every score ``q_i . k_j * scale`` -- unscaled, scaled to
    base 2 and minus a row max -- is finite, which the fast-math kernels
    need: they cannot tell NaN or inf apart. By Cauchy-Schwarz every
    ``|q_i . k_j| <= ||q||_F ||k||_F``; the two norms are O(N d) work next
    to the kernels' O(N^2 d)."""
    if not math.isfinite(scale):
        return False
    if q.size == 0 or k.size == 0:
        return True
    bound = _frobenius(q) * _frobenius(k) * max(1.0, abs(scale) * _LOG2E)
    return bound < float(np.finfo(q.dtype).max) / 8   # False for NaN and inf


def _careful_chunks(Nq, Nk, causal):
    """(rows, visible, has_key) per chunk of query rows: ``visible`` is the
    (rows, Nk) causal mask (or None), ``has_key`` which rows see a key."""
    off = Nk - Nq
    step = max(1, _CAREFUL_CHUNK // max(Nk, 1))
    for i0 in range(0, Nq, step):
        rows = np.arange(i0, min(i0 + step, Nq))
        if not causal:
            yield rows, None, np.full(len(rows), Nk > 0)
        else:
            yield rows, np.arange(Nk)[None, :] <= rows[:, None] + off, rows + off >= 0


def _careful_probs(qb, kb, rows, visible, has_key, scale):
    """P = softmax(q k^T * scale) over the visible keys for one chunk of
    rows, as the materialised softmax computes it (shift by the row max, or
    by 0 where that max is not finite; rows with no key give P = 0).
    Returns (P, log of the row sums + shift)."""
    s = (qb[rows] @ kb.T) * scale
    if visible is not None:
        s = np.where(visible, s, -np.inf)
    m = s.max(axis=1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    p = np.exp(s - m)
    total = p.sum(axis=1, keepdims=True)
    lse = (np.log(total) + m)[:, 0]
    return p / np.where(has_key[:, None], total, 1), np.where(has_key, lse, np.inf)


def _careful_forward(q, k, v, causal, scale):
    """``flash_attention_forward`` for inputs whose scores may be non-finite."""
    B, Nq, _ = q.shape
    o = np.empty_like(q)
    lse = np.empty((B, Nq), q.dtype)
    with np.errstate(all="ignore"):
        for b in range(B):
            for rows, visible, has_key in _careful_chunks(Nq, k.shape[1], causal):
                p, lse[b, rows] = _careful_probs(q[b], k[b], rows, visible, has_key, scale)
                o[b, rows] = p @ v[b]
    return o, lse


def _careful_backward(q, k, v, do, causal, scale):
    """``flash_attention_backward`` for inputs whose scores may be non-finite:
    the materialised softmax's gradients (NaN where it gives NaN)."""
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    with np.errstate(all="ignore"):
        for b in range(q.shape[0]):
            for rows, visible, has_key in _careful_chunks(q.shape[1], k.shape[1], causal):
                p, _ = _careful_probs(q[b], k[b], rows, visible, has_key, scale)
                dp = do[b, rows] @ v[b].T
                ds = p * (dp - (dp * p).sum(axis=1, keepdims=True))
                if visible is not None:
                    ds = np.where(visible, ds, 0)     # masked scores are constants
                ds *= scale                           # after the mask, as q k^T * scale is
                dq[b, rows] = ds @ k[b]
                dk[b] += ds.T @ q[b, rows]
                dv[b] += p.T @ do[b, rows]
    return dq, dk, dv


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
      key (causal, Nq > Nk) get ``o = 0`` and ``lse = +inf``. Rows whose
      scores hold NaN or +inf, or are all -inf, get a NaN output (see the
      module doc).

    Arguments are not checked: the flash_attention primitive validates them
    (``funcgrad.primitives.attention``), and its CPU implementation
    (``impls.py``) passes C-contiguous arrays of one float32/float64 dtype.
    """
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
    if not _scores_finite(q, k, scale):
        return _careful_forward(q, k, v, bool(causal), scale)
    bq, bk = _tiles(Nq, Nk, block_q, block_k, _DEFAULT_FWD_BLOCKS)
    scratch = _scratch(bq * bk + 2 * bq * d + 2 * bq, dt)
    with _blas_single_thread():
        _fwd_kernel(q, k, v, o, lse, _consts(scale, dt), bool(causal),
                    bq, bk, scratch, _counter())
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
      visible key contribute exactly 0; NaN follows the materialised softmax
      (see the module doc). Arguments are not checked (see the forward).
    """
    B, Nq, d = q.shape
    Nk = k.shape[1]
    dt = q.dtype
    dq = np.zeros((B, Nq, d), dtype=dt)
    dk = np.zeros((B, Nk, d), dtype=dt)
    dv = np.zeros((B, Nk, d), dtype=dt)
    if B == 0 or Nq == 0 or Nk == 0:
        return dq, dk, dv
    if not _scores_finite(q, k, scale):
        return _careful_backward(q, k, v, do, bool(causal), scale)
    bq, bk = _tiles(Nq, Nk, block_q, block_k, _DEFAULT_BWD_BLOCKS)
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
            _bwd_kernel(*args, _ONEPASS, _counter())
        else:
            _bwd_kernel(*args, _DKV, _counter())
            _bwd_kernel(*args, _DQ, _counter())
    return dq, dk, dv
