"""Row-wise softmax family on the CPU: numba, parallel over rows.

Every function works over the LAST axis of a C-contiguous 2-D float32 or
float64 array ``x`` of shape (N, C); the caller reshapes (N = prod of the
leading axes). Outputs are passed in, allocated by the caller with numpy:
arrays allocated inside numba kernels get no huge pages and fill ~4x
slower. Each row is processed by one thread in a few passes that stay in
L1/L2 (a 4096-float row is 16 KiB), with a vectorisable ``exp``
(``_fastmath``; numba's own exp is a scalar libm call).

Example::

    x = np.random.rand(128, 10).astype(np.float32)
    y = np.empty_like(x)
    softmax(x, y)                       # y[i] = exp(x[i]) / sum(exp(x[i]))

    labels = np.random.randint(0, 10, 128)
    loss, lse = np.empty(128, np.float32), np.empty(128, np.float32)
    softmax_xent_fwd(x, labels, loss, lse)
    dx = np.empty_like(x)
    softmax_xent_bwd(x, labels, lse, np.ones(128, np.float32), dx)

Numerics: max-subtracted (rows of -inf entries are fine: they give 0
probability; a row that is entirely -inf, or holds +inf, gives a NaN
softmax and log_softmax, as in JAX and PyTorch). ``logsumexp_rows`` (and
the cross-entropy's lse) shift by 0 instead of a non-finite max, as JAX's
``logsumexp`` does: a row holding +inf gives +inf, an all -inf row -inf,
a NaN gives NaN. Float32
inputs accumulate in float32 (as PyTorch does); fast-math lets LLVM
reassociate the row sums, so results differ from numpy in the last bits.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.extending import intrinsic, overload

from . import _threads  # first: selects numba's threading layer
from ._fastmath import exp_f32, exp_f64

__all__ = ["softmax", "log_softmax", "logsumexp_rows", "softmax_bwd",
           "log_softmax_bwd", "softmax_xent_fwd", "softmax_xent_bwd", "softmax_xent_grad"]

# Full fast-math: the exp helpers fix special values with integer bit tests,
# so -inf / NaN inputs still come out right (tested).
# error_model="numpy": 1/0 gives inf (a row of all -inf gives NaN, as in
# PyTorch) instead of numba's Python-style ZeroDivisionError check.
_JIT = dict(parallel=True, fastmath=True, cache=True, nogil=True,
            error_model="numpy")


# ---------------------------------------------------------------------------
# dtype-dispatched scalar helpers (resolved at compile time). Helpers and row
# bodies are separate numba functions that LLVM inlines into the kernels:
# numba's own IR inlining (inline="always") deep-copies the IR at every call
# site and made the softmax kernels compile up to 3x slower, for the same code.
# ---------------------------------------------------------------------------

def _exp(v):
    """exp(v) for a float32/float64 scalar, vectorisable (numba only)."""
    raise NotImplementedError  # pragma: no cover - replaced by the overload


@overload(_exp)
def _exp_overload(v):
    if v == types.float32:
        return lambda v: exp_f32(v)
    if v == types.float64:
        return lambda v: exp_f64(v)
    return None


@intrinsic
def _finite_or_zero(typingctx, x):
    """``x`` if finite, else 0, tested on the exponent bits: fast-math flags
    would let LLVM fold a float ``isfinite`` test to true."""
    if x not in (types.float32, types.float64):
        return None
    ity = ir.IntType(32 if x == types.float32 else 64)
    exp_mask = 0x7F800000 if x == types.float32 else 0x7FF0000000000000

    def codegen(context, builder, signature, args):
        (v,) = args
        mask = ir.Constant(ity, exp_mask)
        finite = builder.icmp_unsigned("!=", builder.and_(builder.bitcast(v, ity), mask), mask)
        return builder.select(finite, v, ir.Constant(v.type, 0.0))
    return x(x), codegen


@numba.njit(fastmath=True, cache=True)
def _max2(a, b):
    """max(a, b) ignoring a NaN b (NaN rows still end up NaN: exp(NaN) is
    NaN and poisons the row sum)."""
    return b if b > a else a


@numba.njit(fastmath=True, cache=True)
def _row_max(x, i):
    """max over row i of x (N, C), C >= 1.

    Eight independent running maxima: a single ``m = max(m, v)`` chain is
    not vectorised by LLVM and ran 2-2.5x slower (4096x4096 f32, 1 thread:
    40-46 ms vs 16-20 ms), which made it the slowest pass of softmax.
    """
    r = x[i]
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = r[0]
    n8 = r.shape[0] // 8 * 8
    for j in range(0, n8, 8):
        m0 = _max2(m0, r[j])
        m1 = _max2(m1, r[j + 1])
        m2 = _max2(m2, r[j + 2])
        m3 = _max2(m3, r[j + 3])
        m4 = _max2(m4, r[j + 4])
        m5 = _max2(m5, r[j + 5])
        m6 = _max2(m6, r[j + 6])
        m7 = _max2(m7, r[j + 7])
    m = _max2(_max2(_max2(m0, m1), _max2(m2, m3)),
              _max2(_max2(m4, m5), _max2(m6, m7)))
    for j in range(n8, r.shape[0]):
        m = _max2(m, r[j])
    return m


@numba.njit(fastmath=True, cache=True)
def _row_sum_exp(x, i, m):
    """sum_j exp(x[i, j] - m), accumulated in x's dtype."""
    s = x.dtype.type(0)
    for j in range(x.shape[1]):
        s += _exp(x[i, j] - m)
    return s


# ---------------------------------------------------------------------------
# Row bodies, each compiled twice: a parallel kernel (prange over
# rows) and a serial one. A numba parallel launch costs ~30 us here, more
# than a whole (128, 10) cross-entropy, so small inputs run serially.
# ---------------------------------------------------------------------------

_ROW = dict(fastmath=True, cache=True, error_model="numpy")
_SER = dict(fastmath=True, cache=True, nogil=True, error_model="numpy")
# Elements below which the serial kernel wins (launch cost ~ 30 us ~ 60k
# exps on one core).
_PARALLEL_MIN_SIZE = 1 << 16


@numba.njit(**_ROW)
def _softmax_row(x, out, i):
    m = _row_max(x, i)
    s = x.dtype.type(0)
    for j in range(x.shape[1]):
        e = _exp(x[i, j] - m)
        out[i, j] = e
        s += e
    inv = x.dtype.type(1) / s
    for j in range(x.shape[1]):
        out[i, j] *= inv


@numba.njit(**_ROW)
def _log_softmax_row(x, out, i):
    m = _row_max(x, i)
    shift = m + np.log(_row_sum_exp(x, i, m))
    for j in range(x.shape[1]):
        out[i, j] = x[i, j] - shift


@numba.njit(fastmath=True, cache=True)
def _row_lse(x, i):
    """logsumexp of row i, shifted by its max, or by 0 where that max is
    +-inf or NaN (JAX's rule: +inf -> +inf, all -inf -> -inf, no NaN from
    inf - inf)."""
    m = _finite_or_zero(_row_max(x, i))
    return m + np.log(_row_sum_exp(x, i, m))


@numba.njit(**_ROW)
def _logsumexp_row(x, out, i):
    out[i] = _row_lse(x, i)


@numba.njit(**_ROW)
def _softmax_bwd_row(y, g, out, i):
    dot = y.dtype.type(0)
    for j in range(y.shape[1]):
        dot += g[i, j] * y[i, j]
    for j in range(y.shape[1]):
        out[i, j] = y[i, j] * (g[i, j] - dot)


@numba.njit(**_ROW)
def _log_softmax_bwd_row(y, g, out, i):
    total = y.dtype.type(0)
    for j in range(y.shape[1]):
        total += g[i, j]
    for j in range(y.shape[1]):
        out[i, j] = g[i, j] - _exp(y[i, j]) * total


@numba.njit(**_ROW)
def _xent_fwd_row(x, labels, loss_out, lse_out, i):
    lse = _row_lse(x, i)
    lse_out[i] = lse
    loss_out[i] = lse - x[i, labels[i]]


@numba.njit(**_ROW)
def _xent_bwd_row(x, labels, lse, g, out, i):
    gi = g[i]
    li = lse[i]
    for j in range(x.shape[1]):
        out[i, j] = gi * _exp(x[i, j] - li)
    out[i, labels[i]] -= gi


@numba.njit(**_JIT)
def _softmax_par(x, out):
    for i in prange(x.shape[0]):
        _softmax_row(x, out, i)


@numba.njit(**_SER)
def _softmax_ser(x, out):
    for i in range(x.shape[0]):
        _softmax_row(x, out, i)


@numba.njit(**_JIT)
def _log_softmax_par(x, out):
    for i in prange(x.shape[0]):
        _log_softmax_row(x, out, i)


@numba.njit(**_SER)
def _log_softmax_ser(x, out):
    for i in range(x.shape[0]):
        _log_softmax_row(x, out, i)


@numba.njit(**_JIT)
def _logsumexp_par(x, out):
    for i in prange(x.shape[0]):
        _logsumexp_row(x, out, i)


@numba.njit(**_SER)
def _logsumexp_ser(x, out):
    for i in range(x.shape[0]):
        _logsumexp_row(x, out, i)


@numba.njit(**_JIT)
def _softmax_bwd_par(y, g, out):
    for i in prange(y.shape[0]):
        _softmax_bwd_row(y, g, out, i)


@numba.njit(**_SER)
def _softmax_bwd_ser(y, g, out):
    for i in range(y.shape[0]):
        _softmax_bwd_row(y, g, out, i)


@numba.njit(**_JIT)
def _log_softmax_bwd_par(y, g, out):
    for i in prange(y.shape[0]):
        _log_softmax_bwd_row(y, g, out, i)


@numba.njit(**_SER)
def _log_softmax_bwd_ser(y, g, out):
    for i in range(y.shape[0]):
        _log_softmax_bwd_row(y, g, out, i)


@numba.njit(**_JIT)
def _xent_fwd_par(x, labels, loss_out, lse_out):
    for i in prange(x.shape[0]):
        _xent_fwd_row(x, labels, loss_out, lse_out, i)


@numba.njit(**_SER)
def _xent_fwd_ser(x, labels, loss_out, lse_out):
    for i in range(x.shape[0]):
        _xent_fwd_row(x, labels, loss_out, lse_out, i)


@numba.njit(**_JIT)
def _xent_bwd_par(x, labels, lse, g, out):
    for i in prange(x.shape[0]):
        _xent_bwd_row(x, labels, lse, g, out, i)


@numba.njit(**_SER)
def _xent_bwd_ser(x, labels, lse, g, out):
    for i in range(x.shape[0]):
        _xent_bwd_row(x, labels, lse, g, out, i)


# Logits of at most this many elements take one small serial kernel for the
# cross-entropy gradient (a small classifier's head, e.g. (128, 10)): libm's
# exp and no helpers, so it compiles in a fraction of the time of the
# logsumexp + backward pair, and at these sizes runs as fast.
_SMALL_XENT = 1 << 12


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _xent_grad_small(x, labels, g, out):
    for i in range(x.shape[0]):
        m = x[i, 0]
        for j in range(1, x.shape[1]):
            if x[i, j] > m:
                m = x[i, j]
        if not np.isfinite(m):   # the logsumexp rule: shift by 0 (see the module docstring)
            m = x.dtype.type(0)
        s = x.dtype.type(0)
        for j in range(x.shape[1]):
            s += np.exp(x[i, j] - m)
        lse = m + np.log(s)
        gi = g[i]
        for j in range(x.shape[1]):
            out[i, j] = gi * np.exp(x[i, j] - lse)
        out[i, labels[i]] -= gi


def _pick(x, parallel_kernel, serial_kernel):
    """The parallel kernel for big inputs with >1 thread, else the serial."""
    if x.size >= _PARALLEL_MIN_SIZE and _threads.get_num_threads() > 1:
        _threads.prepare()
        return _threads.guard(parallel_kernel)   # serialised under numba's workqueue layer
    return serial_kernel


def _first_bad_label(labels, n_classes):
    """Index of the first label outside [0, n_classes), or None (numpy: no kernel to compile)."""
    bad = np.flatnonzero((labels < 0) | (labels >= n_classes))
    return int(bad[0]) if bad.size else None


# ---------------------------------------------------------------------------
# Validation (plain Python, before any kernel: never a numba error or crash)
# ---------------------------------------------------------------------------

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _describe(a) -> str:
    return f"{np.dtype(a.dtype).name}{list(a.shape)}"


def _check_matrix(op: str, name: str, a):
    """a must be a C-contiguous 2-D float32/float64 numpy array with C >= 1."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{op}: {name} must be a numpy array, got "
                        f"{type(a).__name__}")
    if a.ndim != 2:
        raise ValueError(f"{op}: {name} must be 2-D (rows, classes), got "
                         f"shape {a.shape}; reshape so the softmax axis is "
                         f"last")
    if a.dtype not in _FLOATS:
        raise ValueError(f"{op}: {name} must be float32 or float64, got "
                         f"{a.dtype}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{op}: {name} {_describe(a)} must be C-contiguous")
    if a.shape[1] == 0 and a.shape[0] > 0:
        raise ValueError(f"{op}: {name} {_describe(a)} has an empty last "
                         f"axis; softmax over zero classes is undefined")


def _check_like(op: str, name: str, a, shape, dtype):
    """a must be a writable/readable C-contiguous array of shape, dtype."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{op}: {name} must be a numpy array, got "
                        f"{type(a).__name__}")
    if a.shape != tuple(shape) or a.dtype != dtype:
        raise ValueError(f"{op}: {name} is {_describe(a)}, expected "
                         f"{np.dtype(dtype).name}{list(shape)}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{op}: {name} {_describe(a)} must be C-contiguous")


def _check_out(op: str, out, shape, dtype):
    _check_like(op, "out", out, shape, dtype)
    if not out.flags.writeable:
        raise ValueError(f"{op}: out {_describe(out)} is read-only")


def _check_labels(op: str, labels, logits):
    """labels: C-contiguous 1-D integer array, one per row, in [0, C)."""
    n, c = logits.shape
    if not isinstance(labels, np.ndarray):
        raise TypeError(f"{op}: labels must be a numpy integer array, got "
                        f"{type(labels).__name__}")
    if labels.dtype.kind not in "iu":
        raise ValueError(f"{op}: labels must be integers, got "
                         f"{labels.dtype} (logits {_describe(logits)})")
    if labels.shape != (n,):
        raise ValueError(f"{op}: labels shape {labels.shape} does not match "
                         f"logits {_describe(logits)}: expected ({n},)")
    if not labels.flags.c_contiguous:
        raise ValueError(f"{op}: labels must be C-contiguous")
    bad = _first_bad_label(labels, c)
    if bad is not None:
        raise ValueError(f"{op}: label {int(labels[bad])} at row {bad} is out "
                         f"of range for logits {_describe(logits)}: labels "
                         f"must be in [0, {c})")


# ---------------------------------------------------------------------------
# Public wrappers
# ---------------------------------------------------------------------------

def softmax(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out[i] = exp(x[i] - max x[i]) / sum(...). x, out: (N, C) f32/f64."""
    _check_matrix("softmax", "x", x)
    _check_out("softmax", out, x.shape, x.dtype)
    _pick(x, _softmax_par, _softmax_ser)(x, out)
    return out


def log_softmax(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out[i] = x[i] - logsumexp(x[i]). x, out: (N, C) f32/f64."""
    _check_matrix("log_softmax", "x", x)
    _check_out("log_softmax", out, x.shape, x.dtype)
    _pick(x, _log_softmax_par, _log_softmax_ser)(x, out)
    return out


def logsumexp_rows(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out[i] = log(sum_j exp(x[i, j])). x: (N, C) f32/f64, out: (N,)."""
    _check_matrix("logsumexp_rows", "x", x)
    _check_out("logsumexp_rows", out, x.shape[:1], x.dtype)
    _pick(x, _logsumexp_par, _logsumexp_ser)(x, out)
    return out


def softmax_bwd(y: np.ndarray, g: np.ndarray, out: np.ndarray) -> np.ndarray:
    """VJP of softmax: out = y * (g - sum(g * y, axis=1)). y = softmax(x).

    y, g, out: (N, C), one float dtype. out may alias g.
    """
    _check_matrix("softmax_bwd", "y", y)
    _check_like("softmax_bwd", "g", g, y.shape, y.dtype)
    _check_out("softmax_bwd", out, y.shape, y.dtype)
    _pick(y, _softmax_bwd_par, _softmax_bwd_ser)(y, g, out)
    return out


def log_softmax_bwd(y: np.ndarray, g: np.ndarray,
                    out: np.ndarray) -> np.ndarray:
    """VJP of log_softmax: out = g - exp(y) * sum(g, axis=1).

    y = log_softmax(x); y, g, out: (N, C), one float dtype. out may alias g.
    """
    _check_matrix("log_softmax_bwd", "y", y)
    _check_like("log_softmax_bwd", "g", g, y.shape, y.dtype)
    _check_out("log_softmax_bwd", out, y.shape, y.dtype)
    _pick(y, _log_softmax_bwd_par, _log_softmax_bwd_ser)(y, g, out)
    return out


def softmax_xent_fwd(logits: np.ndarray, labels: np.ndarray,
                     loss_out: np.ndarray, lse_out: np.ndarray) -> np.ndarray:
    """Per-row softmax cross-entropy with integer labels.

    loss_out[i] = logsumexp(logits[i]) - logits[i, labels[i]];
    lse_out[i] = logsumexp(logits[i]) (saved for the backward).
    logits: (N, C) f32/f64; labels: (N,) any integer dtype, in [0, C);
    loss_out, lse_out: (N,) logits' dtype. Returns loss_out.
    """
    op = "softmax_xent_fwd"
    _check_matrix(op, "logits", logits)
    _check_labels(op, labels, logits)
    _check_out(op, loss_out, logits.shape[:1], logits.dtype)
    _check_out(op, lse_out, logits.shape[:1], logits.dtype)
    _pick(logits, _xent_fwd_par, _xent_fwd_ser)(logits, labels, loss_out,
                                               lse_out)
    return loss_out


def softmax_xent_bwd(logits: np.ndarray, labels: np.ndarray, lse: np.ndarray,
                     g: np.ndarray, dlogits_out: np.ndarray) -> np.ndarray:
    """VJP of softmax_xent_fwd: dlogits = g[:, None] * (softmax - onehot).

    logits: (N, C); labels: (N,) integers in [0, C); lse: (N,) from the
    forward; g: (N,) cotangent of the per-row loss; dlogits_out: (N, C).
    Float arrays share logits' dtype. Returns dlogits_out.
    """
    op = "softmax_xent_bwd"
    _check_matrix(op, "logits", logits)
    _check_labels(op, labels, logits)
    _check_like(op, "lse", lse, logits.shape[:1], logits.dtype)
    _check_like(op, "g", g, logits.shape[:1], logits.dtype)
    _check_out(op, dlogits_out, logits.shape, logits.dtype)
    _pick(logits, _xent_bwd_par, _xent_bwd_ser)(logits, labels, lse, g,
                                               dlogits_out)
    return dlogits_out


def softmax_xent_grad(logits: np.ndarray, labels: np.ndarray, g: np.ndarray,
                      dlogits_out: np.ndarray) -> np.ndarray:
    """Gradient of the per-row softmax cross-entropy, without a saved lse:
    dlogits = g[:, None] * (softmax(logits) - onehot(labels)).

    logits: (N, C) f32/f64; labels: (N,) integers in [0, C); g: (N,) logits'
    dtype; dlogits_out: (N, C). Small logits take one serial kernel, larger
    ones ``logsumexp_rows`` then ``softmax_xent_bwd``. Returns dlogits_out.

    >>> x = np.zeros((2, 3), np.float32)
    >>> d = softmax_xent_grad(x, np.array([0, 2]), np.ones(2, np.float32), np.empty_like(x))
    >>> round(float(d[0, 0]), 4), round(float(d[0, 1]), 4)
    (-0.6667, 0.3333)
    """
    op = "softmax_xent_grad"
    _check_matrix(op, "logits", logits)
    _check_labels(op, labels, logits)
    _check_like(op, "g", g, logits.shape[:1], logits.dtype)
    _check_out(op, dlogits_out, logits.shape, logits.dtype)
    if logits.size <= _SMALL_XENT:
        _xent_grad_small(logits, labels, g, dlogits_out)
        return dlogits_out
    lse = np.empty(logits.shape[0], logits.dtype)
    _pick(logits, _logsumexp_par, _logsumexp_ser)(logits, lse)
    _pick(logits, _xent_bwd_par, _xent_bwd_ser)(logits, labels, lse, g, dlogits_out)
    return dlogits_out
