"""Fused row kernels in Triton: softmax, log_softmax, softmax cross-entropy
with integer labels, and layer norm (forward and backward).

Every kernel works on a C-contiguous ``(N, C)`` matrix, one program per row
(the layer-norm weight/bias gradients use a second, column-blocked kernel).
The host wrappers flatten leading dims: ``(..., C) -> (N, C)``.

* Inputs are float32, float16 or bfloat16 (``ml_dtypes.bfloat16`` arrays, or
  ``uint16`` bit patterns, see ``_triton_host``); every sum, max and exp is done in float32 and the
  result is rounded once, when it is stored.
* Rows longer than ``BLOCK_C`` are swept in column blocks; the ragged last
  block is masked (loads of masked lanes return a neutral value, stores are
  masked), so any ``C >= 1`` works with any power-of-two ``BLOCK_C``.
* Row statistics use a per-lane *online* softmax (running max and rescaled
  sum per lane, combined across lanes once at the end), so one sweep gives
  ``max`` and ``sum(exp(x - max))`` without a cross-lane reduction per block.
* Plain pointer arithmetic only (``tl.make_block_ptr`` is gone in Triton 3.9);
  row offsets are int64 (``N * C`` may exceed 2**31).

Status: the kernels are tested in Triton's interpreter (``TRITON_INTERPRET=1``,
numpy arrays) against float64 references and compiled for sm_90 on the CPU
(``compile_report``). They have **not yet been run on a GPU**;
the CuPy path of the wrappers (``_triton_host.launch``) is the one used by the
FlashAttention kernels.

>>> import numpy as np                        # with TRITON_INTERPRET=1 set
>>> x = np.random.rand(4, 37).astype(np.float16)
>>> y = softmax(x)                            # f16[4, 37], rows sum to ~1
>>> loss, lse = softmax_cross_entropy(x, np.array([0, 3, 36, 1]))   # f32[4] each
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import triton
import triton.language as tl

from . import _triton_host as host

__all__ = [
    "softmax",
    "log_softmax",
    "softmax_backward",
    "log_softmax_backward",
    "softmax_cross_entropy",
    "softmax_cross_entropy_backward",
    "layer_norm",
    "layer_norm_backward",
    "RowConfig",
    "row_config",
    "compile_report",
    "KERNELS",
]


# ==========================================================================
# device helpers
# ==========================================================================


@triton.jit
def _finite_or_zero(x):
    """x where finite, else 0 (the shift used for a max of +-inf or NaN)."""
    return tl.where(tl.abs(x) < float("inf"), x, 0.0)


@triton.jit
def _row_max_and_sum(row_ptr, n_cols, BLOCK_C: tl.constexpr):
    """(max x, sum exp(x - shift)) of one row, in float32, in one sweep, where
    shift = max x if that is finite, else 0 (JAX's logsumexp rule).

    Each lane keeps its own running max ``m`` and a sum ``s`` relative to
    ``_finite_or_zero(m)``; the lanes are combined once at the end. Shifting
    by 0 instead of an infinite max keeps ``inf - inf = NaN`` out: a row of
    only -inf sums to 0, a row holding +inf sums to +inf, and the sum is NaN
    only when the row holds a NaN. Rescaling by ``exp(m_old - shift)`` (not
    ``exp(_finite_or_zero(m_old) - shift)``) is exact for finite ``m_old``,
    gives 0 for ``m_old = -inf`` (where ``s = 0``) and inf for ``+inf``
    (where ``s = inf``).
    """
    offs = tl.arange(0, BLOCK_C)
    m = tl.full([BLOCK_C], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_C], tl.float32)
    for start in range(0, n_cols, BLOCK_C):
        cols = start + offs
        x = tl.load(row_ptr + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        m_safe = _finite_or_zero(m_new)
        s = s * tl.exp(m - m_safe) + tl.exp(x - m_safe)
        m = m_new
    row_max = tl.max(m, 0)
    return row_max, tl.sum(s * tl.exp(m - _finite_or_zero(row_max)), 0)


# ==========================================================================
# softmax / log_softmax
# ==========================================================================


@triton.jit
def _softmax_fwd(X, Y, n_cols, LOG: tl.constexpr, BLOCK_C: tl.constexpr):
    """Y[r] = softmax(X[r]) (or log_softmax with LOG). X, Y: (N, n_cols), one
    dtype. Grid: (N,)."""
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * n_cols
    y_row = Y + row * n_cols
    row_max, total = _row_max_and_sum(x_row, n_cols, BLOCK_C)
    shift = _finite_or_zero(row_max)
    # As in JAX: a row holding +inf gives NaN (exp(x - max) has inf - inf);
    # an all -inf row gives 0 / 0 = NaN by itself.
    total = tl.where(row_max == float("inf"), float("nan"), total)
    log_total = tl.log(total)
    for start in range(0, n_cols, BLOCK_C):
        cols = start + tl.arange(0, BLOCK_C)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        if LOG:
            y = x - shift - log_total
        else:
            y = tl.exp(x - shift) / total
        tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_bwd(Y, DY, DX, n_cols, LOG: tl.constexpr, BLOCK_C: tl.constexpr):
    """Vector-Jacobian product at the forward *output* Y.

    softmax:     dx = y * (dy - sum(dy * y))
    log_softmax: dx = dy - exp(y) * sum(dy)
    Y, DY, DX: (N, n_cols), one dtype. Grid: (N,).
    """
    row = tl.program_id(0).to(tl.int64)
    y_row = Y + row * n_cols
    dy_row = DY + row * n_cols
    dx_row = DX + row * n_cols
    offs = tl.arange(0, BLOCK_C)
    acc = tl.zeros([BLOCK_C], tl.float32)
    for start in range(0, n_cols, BLOCK_C):
        cols = start + offs
        mask = cols < n_cols
        dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
        if LOG:
            acc += dy
        else:
            acc += dy * tl.load(y_row + cols, mask=mask, other=0.0).to(tl.float32)
    total = tl.sum(acc, 0)
    for start in range(0, n_cols, BLOCK_C):
        cols = start + offs
        mask = cols < n_cols
        y = tl.load(y_row + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
        if LOG:
            dx = dy - tl.exp(y) * total
        else:
            dx = y * (dy - total)
        tl.store(dx_row + cols, dx.to(DX.dtype.element_ty), mask=mask)


# ==========================================================================
# softmax cross-entropy with integer labels
# ==========================================================================


@triton.jit
def _xent_fwd(LOGITS, LABELS, LOSS, LSE, BAD, n_cols, BLOCK_C: tl.constexpr):
    """LOSS[r] = lse(LOGITS[r]) - LOGITS[r, LABELS[r]], LSE[r] = lse (both
    float32, LSE is saved for the backward). A label outside [0, n_cols) sets
    BAD[0] = 1 (int32, zeroed by the host) and reads column 0 instead, so the
    kernel never reads outside the row. Grid: (N,)."""
    row = tl.program_id(0).to(tl.int64)
    row_ptr = LOGITS + row * n_cols
    row_max, total = _row_max_and_sum(row_ptr, n_cols, BLOCK_C)
    # +inf entry -> +inf, all -inf -> log(0) = -inf, NaN -> NaN (as JAX's logsumexp)
    lse = _finite_or_zero(row_max) + tl.log(total)
    label = tl.load(LABELS + row).to(tl.int64)
    bad = (label < 0) | (label >= n_cols)
    tl.store(BAD, 1, mask=bad)
    picked = tl.load(row_ptr + tl.where(bad, 0, label)).to(tl.float32)
    tl.store(LOSS + row, lse - picked)
    tl.store(LSE + row, lse)


@triton.jit
def _xent_bwd(LOGITS, LABELS, LSE, G, DLOGITS, BAD, n_cols, BLOCK_C: tl.constexpr, HAS_LSE: tl.constexpr):
    """DLOGITS[r] = G[r] * (softmax(LOGITS[r]) - onehot(LABELS[r])), with the
    softmax from the forward's saved LSE (float32) when HAS_LSE, else from a
    first sweep over the row (as the forward computes it). G: (N,) float32.
    A label outside [0, n_cols) sets BAD[0] = 1. Grid: (N,)."""
    row = tl.program_id(0).to(tl.int64)
    x_row = LOGITS + row * n_cols
    d_row = DLOGITS + row * n_cols
    if HAS_LSE:
        lse = tl.load(LSE + row)
    else:
        row_max, total = _row_max_and_sum(x_row, n_cols, BLOCK_C)
        lse = _finite_or_zero(row_max) + tl.log(total)
    g = tl.load(G + row)
    label = tl.load(LABELS + row).to(tl.int64)
    tl.store(BAD, 1, mask=(label < 0) | (label >= n_cols))
    offs = tl.arange(0, BLOCK_C)
    for start in range(0, n_cols, BLOCK_C):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        p = tl.exp(x - lse)
        d = g * (p - tl.where(cols == label, 1.0, 0.0))
        tl.store(d_row + cols, d.to(DLOGITS.dtype.element_ty), mask=mask)


# ==========================================================================
# layer norm
# ==========================================================================


@triton.jit
def _layer_norm_fwd(X, W, B, Y, MEAN, RSTD, n_cols, eps, BLOCK_C: tl.constexpr):
    """Y[r] = (X[r] - mean) * rstd * W + B over the last axis.

    X, Y: (N, n_cols); W, B: (n_cols,), same dtype as X; MEAN, RSTD: (N,)
    float32, saved for the backward. Two-pass variance (sum of squared
    deviations from the mean), which stays accurate for rows with a large
    mean. Grid: (N,).
    """
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * n_cols
    y_row = Y + row * n_cols
    offs = tl.arange(0, BLOCK_C)
    acc = tl.zeros([BLOCK_C], tl.float32)
    for start in range(0, n_cols, BLOCK_C):
        cols = start + offs
        acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, 0) / n_cols
    acc = tl.zeros([BLOCK_C], tl.float32)
    for start in range(0, n_cols, BLOCK_C):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        diff = tl.where(mask, x - mean, 0.0)  # masked lanes must not add mean**2
        acc += diff * diff
    rstd = 1.0 / tl.sqrt(tl.sum(acc, 0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK_C):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=mask)
    tl.store(MEAN + row, mean)
    tl.store(RSTD + row, rstd)


@triton.jit
def _layer_norm_bwd_dx(X, W, DY, MEAN, RSTD, DX, n_cols, BLOCK_C: tl.constexpr):
    """dx = rstd * (w*dy - mean(w*dy) - xhat * mean(w*dy * xhat)), xhat =
    (x - mean) * rstd. Masked lanes load w = dy = 0, so they add nothing to
    either mean. Grid: (N,)."""
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * n_cols
    dy_row = DY + row * n_cols
    dx_row = DX + row * n_cols
    mean = tl.load(MEAN + row)
    rstd = tl.load(RSTD + row)
    offs = tl.arange(0, BLOCK_C)
    acc_wdy_xhat = tl.zeros([BLOCK_C], tl.float32)
    acc_wdy = tl.zeros([BLOCK_C], tl.float32)
    for start in range(0, n_cols, BLOCK_C):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
        wdy = w * dy
        acc_wdy_xhat += wdy * (x - mean) * rstd
        acc_wdy += wdy
    c1 = tl.sum(acc_wdy_xhat, 0) / n_cols
    c2 = tl.sum(acc_wdy, 0) / n_cols
    for start in range(0, n_cols, BLOCK_C):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(tl.float32)
        xhat = (x - mean) * rstd
        dx = (w * dy - (xhat * c1 + c2)) * rstd
        tl.store(dx_row + cols, dx.to(DX.dtype.element_ty), mask=mask)


@triton.jit
def _layer_norm_bwd_dwdb(X, DY, MEAN, RSTD, DW_PART, DB_PART, n_rows, n_cols, rows_per_group,
                         BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """Partial dW = sum dy * xhat and dB = sum dy over one group of rows, for
    one block of columns. DW_PART, DB_PART: (n_groups, n_cols) float32; the
    host sums them over groups. Each output element has exactly one writer:
    no atomics, deterministic. Grid: (cdiv(n_cols, BLOCK_C), n_groups).
    """
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    group = tl.program_id(1)
    col_mask = cols < n_cols
    row_lo = group * rows_per_group
    row_hi = tl.minimum(row_lo + rows_per_group, n_rows)
    dw = tl.zeros([BLOCK_C], tl.float32)
    db = tl.zeros([BLOCK_C], tl.float32)
    for start in range(row_lo, row_hi, BLOCK_R):
        rows = start + tl.arange(0, BLOCK_R)
        row_mask = rows < row_hi
        mask = row_mask[:, None] & col_mask[None, :]
        offs = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
        x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(DY + offs, mask=mask, other=0.0).to(tl.float32)
        mean = tl.load(MEAN + rows, mask=row_mask, other=0.0)
        rstd = tl.load(RSTD + rows, mask=row_mask, other=0.0)
        xhat = (x - mean[:, None]) * rstd[:, None]
        dw += tl.sum(dy * xhat, 0)
        db += tl.sum(dy, 0)
    out = group.to(tl.int64) * n_cols + cols
    tl.store(DW_PART + out, dw, mask=col_mask)
    tl.store(DB_PART + out, db, mask=col_mask)


# ==========================================================================
# launch configs
# ==========================================================================


@dataclass(frozen=True)
class RowConfig:
    """Columns per block and warps of the per-row kernels."""
    BLOCK_C: int
    num_warps: int


MAX_BLOCK_C = 4096  # longer rows are swept in blocks of this many columns
DWDB_BLOCK_R, DWDB_BLOCK_C = 16, 128  # (rows, cols) tile of the dW/dB column kernel: 8 fp32 values/thread/operand


def row_config(n_cols: int) -> RowConfig:
    """One block for rows up to 4096 columns (a power of two >= 16); warps
    grow with the block so each thread holds <= 8 values per vector (at 8
    warps a 4096 block made ptxas spill in the fp16 layer norm). Not tuned on
    a GPU."""
    block = max(16, min(MAX_BLOCK_C, triton.next_power_of_2(max(int(n_cols), 1))))
    return RowConfig(block, max(4, min(16, block // 256)))


# ==========================================================================
# host wrappers (numpy under TRITON_INTERPRET=1, or CuPy)
# ==========================================================================

_FLOAT_DTYPES = {np.dtype(np.float32), np.dtype(np.float16), host.BF16, np.dtype(np.uint16)}


def _check_float(name: str, *arrays: Any) -> None:
    for a in arrays:
        if np.dtype(a.dtype) not in _FLOAT_DTYPES:
            raise TypeError(f"{name}: expected float32, float16, bfloat16 or uint16 (bfloat16 bits), got {a.dtype}")
    if len({np.dtype(a.dtype) for a in arrays}) > 1:
        raise TypeError(f"{name}: arrays must share one dtype, got {', '.join(str(a.dtype) for a in arrays)}")


def _rows(xp, x) -> tuple[Any, int, int]:
    """(…, C) -> contiguous (N, C) (a view when already contiguous), N, C."""
    if x.ndim < 1 or x.shape[-1] < 1:
        raise ValueError(f"expected an array (..., C) with C >= 1, got shape {tuple(x.shape)}")
    n_cols = int(x.shape[-1])
    n_rows = int(np.prod(x.shape[:-1], dtype=np.int64))
    return xp.ascontiguousarray(x).reshape(n_rows, n_cols), n_rows, n_cols


def _meta(cfg: RowConfig | None, n_cols: int, **constexprs: Any) -> dict[str, Any]:
    cfg = cfg or row_config(n_cols)
    return dict(BLOCK_C=cfg.BLOCK_C, num_warps=cfg.num_warps, **constexprs)


def _softmax_like(x, log: bool, config: RowConfig | None):
    name = "log_softmax" if log else "softmax"
    _check_float(name, x)
    xp = host.array_module(x)
    xf, n_rows, n_cols = _rows(xp, x)
    y = xp.empty_like(xf)
    if n_rows:
        host.launch(_softmax_fwd, (n_rows,), [xf, y, n_cols], _meta(config, n_cols, LOG=log), like=x)
    return y.reshape(x.shape)


def softmax(x, *, config: RowConfig | None = None):
    """Softmax over the last axis. x: (..., C) f32/f16/bf16(uint16) -> same."""
    return _softmax_like(x, False, config)


def log_softmax(x, *, config: RowConfig | None = None):
    """Log-softmax over the last axis. x: (..., C) f32/f16/bf16(uint16) -> same."""
    return _softmax_like(x, True, config)


def _softmax_like_backward(y, dy, log: bool, config: RowConfig | None):
    name = "log_softmax_backward" if log else "softmax_backward"
    _check_float(name, y, dy)
    if tuple(y.shape) != tuple(dy.shape):
        raise ValueError(f"{name}: y {tuple(y.shape)} and dy {tuple(dy.shape)} must have one shape")
    xp = host.array_module(y)
    yf, n_rows, n_cols = _rows(xp, y)
    dyf = xp.ascontiguousarray(dy).reshape(n_rows, n_cols)
    dx = xp.empty_like(yf)
    if n_rows:
        host.launch(_softmax_bwd, (n_rows,), [yf, dyf, dx, n_cols], _meta(config, n_cols, LOG=log), like=y)
    return dx.reshape(y.shape)


def softmax_backward(y, dy, *, config: RowConfig | None = None):
    """dx of softmax at its output y: ``y * (dy - sum(dy * y))``. y, dy: (..., C)."""
    return _softmax_like_backward(y, dy, False, config)


def log_softmax_backward(y, dy, *, config: RowConfig | None = None):
    """dx of log_softmax at its output y: ``dy - exp(y) * sum(dy)``. y, dy: (..., C)."""
    return _softmax_like_backward(y, dy, True, config)


def _check_labels(xp, logits, labels, bad) -> Any:
    """The labels' dtype and shape (host metadata); their range is checked by the kernel, which sets
    ``bad[0]`` for a label outside [0, C). Returns the flag buffer to pass: ``bad`` when the caller
    reads it later (no host synchronisation here), else a fresh one that is read right after the
    launch (on a GPU: one small transfer and a sync)."""
    if labels.dtype.kind not in "iu" or np.dtype(labels.dtype).itemsize not in (4, 8):
        raise TypeError(f"softmax_cross_entropy: labels must be int32 or int64, got {labels.dtype}")
    if tuple(labels.shape) != tuple(logits.shape[:1]):
        raise ValueError(f"softmax_cross_entropy: labels {tuple(labels.shape)} must be ({logits.shape[0]},) "
                         f"for logits {tuple(logits.shape)}")
    if bad is None:
        return xp.zeros((1,), dtype=xp.int32)
    if tuple(bad.shape) != (1,) or bad.dtype != np.int32:
        raise ValueError(f"softmax_cross_entropy: bad must be a (1,) int32 buffer, got {bad.dtype}{tuple(bad.shape)}")
    return bad


def _host_copy(x) -> np.ndarray:
    return np.asarray(x).view(np.ndarray) if host.is_numpy(x) else host.array_module(x).asnumpy(x)


def labels_error(name: str, n_classes: int, labels: Any) -> ValueError:
    """The error for labels outside [0, n_classes) (copies the labels to the host for their range).

    >>> labels_error("softmax_cross_entropy", 5, np.array([0, 7]))   # ValueError(... got values in [0, 7])
    """
    values = _host_copy(labels)
    return ValueError(f"{name}: labels must be in [0, {n_classes}), got values in "
                      f"[{int(values.min())}, {int(values.max())}]")


def _raise_if_bad(flag, own: bool, name: str, logits, labels) -> None:
    """Read the flag right away when this call allocated it (the caller did not take the check over)."""
    if own and labels.size and _host_copy(flag)[0]:
        raise labels_error(name, logits.shape[1], labels)


def softmax_cross_entropy(logits, labels, *, config: RowConfig | None = None, bad=None):
    """Per-row ``logsumexp(logits[i]) - logits[i, labels[i]]``.

    Args:
        logits: (N, C) float32/float16/uint16(bf16). labels: (N,) int32/int64
            in [0, C).
        bad: optional (1,) int32 device buffer: a label outside [0, C) sets
            ``bad[0] = 1`` and the caller reads it when convenient (no host
            synchronisation here). Without it, such labels raise ValueError
            after the launch.

    Returns:
        (loss, lse): both (N,) float32; pass lse to the backward.
    """
    _check_float("softmax_cross_entropy", logits)
    if logits.ndim != 2:
        raise ValueError(f"softmax_cross_entropy: logits must be (N, C), got shape {tuple(logits.shape)}")
    xp = host.array_module(logits)
    flag = _check_labels(xp, logits, labels, bad)
    xf, n_rows, n_cols = _rows(xp, logits)
    labels = xp.ascontiguousarray(labels)
    loss = xp.empty((n_rows,), dtype=xp.float32)
    lse = xp.empty((n_rows,), dtype=xp.float32)
    if n_rows:
        host.launch(_xent_fwd, (n_rows,), [xf, labels, loss, lse, flag, n_cols], _meta(config, n_cols),
                    like=logits)
    _raise_if_bad(flag, bad is None, "softmax_cross_entropy", logits, labels)
    return loss, lse


def softmax_cross_entropy_backward(logits, labels, lse, g, *, config: RowConfig | None = None, bad=None):
    """dlogits = g[:, None] * (softmax(logits) - one_hot(labels)).

    Args:
        logits, labels: as in the forward; lse: its (N,) float32 output, or
        None to have the kernel compute it from the row (one more sweep over
        each row in the same launch, instead of a forward launch);
        g: (N,) cotangent of the loss (any float dtype; used as float32);
        bad: as in the forward.

    Returns:
        dlogits (N, C), dtype of logits.
    """
    _check_float("softmax_cross_entropy_backward", logits)
    xp = host.array_module(logits)
    flag = _check_labels(xp, logits, labels, bad)
    xf, n_rows, n_cols = _rows(xp, logits)
    if (lse is not None and tuple(lse.shape) != (n_rows,)) or tuple(g.shape) != (n_rows,):
        raise ValueError(f"softmax_cross_entropy_backward: lse and g must be ({n_rows},), "
                         f"got {None if lse is None else tuple(lse.shape)} and {tuple(g.shape)}")
    labels = xp.ascontiguousarray(labels)
    has_lse = lse is not None
    lse = xp.ascontiguousarray(lse, dtype=xp.float32) if has_lse else flag   # (a placeholder pointer, unread)
    g = xp.ascontiguousarray(g, dtype=xp.float32)
    d = xp.empty_like(xf)
    if n_rows:
        host.launch(_xent_bwd, (n_rows,), [xf, labels, lse, g, d, flag, n_cols],
                    _meta(config, n_cols, HAS_LSE=has_lse), like=logits)
    _raise_if_bad(flag, bad is None, "softmax_cross_entropy_backward", logits, labels)
    return d


def layer_norm(x, weight, bias, *, eps: float = 1e-5, config: RowConfig | None = None):
    """Layer norm over the last axis.

    Args:
        x: (..., C); weight, bias: (C,); one dtype (float32, float16 or
            uint16 = bf16).
        eps: added to the variance.

    Returns:
        (y, mean, rstd): y like x; mean and rstd (...,) float32 (the
        backward needs them).
    """
    _check_float("layer_norm", x, weight, bias)
    xp = host.array_module(x)
    xf, n_rows, n_cols = _rows(xp, x)
    if tuple(weight.shape) != (n_cols,) or tuple(bias.shape) != (n_cols,):
        raise ValueError(f"layer_norm: weight and bias must be ({n_cols},), got {tuple(weight.shape)} "
                         f"and {tuple(bias.shape)}")
    y = xp.empty_like(xf)
    mean = xp.empty((n_rows,), dtype=xp.float32)
    rstd = xp.empty((n_rows,), dtype=xp.float32)
    if n_rows:
        host.launch(_layer_norm_fwd, (n_rows,),
                    [xf, xp.ascontiguousarray(weight), xp.ascontiguousarray(bias), y, mean, rstd, n_cols, float(eps)],
                    _meta(config, n_cols), like=x)
    lead = tuple(x.shape[:-1])
    return y.reshape(x.shape), mean.reshape(lead), rstd.reshape(lead)


def _dwdb_groups(n_rows: int, max_groups: int = 256) -> tuple[int, int]:
    """(n_groups, rows_per_group): enough groups to fill a GPU (columns x
    groups programs), each a multiple of DWDB_BLOCK_R rows."""
    blocks = triton.cdiv(n_rows, DWDB_BLOCK_R)
    n_groups = max(1, min(max_groups, blocks))
    rows_per_group = triton.cdiv(blocks, n_groups) * DWDB_BLOCK_R
    return triton.cdiv(n_rows, rows_per_group), rows_per_group


def layer_norm_backward(x, weight, mean, rstd, dy, *, config: RowConfig | None = None):
    """Gradients of :func:`layer_norm`.

    Args:
        x, weight: the forward inputs; mean, rstd: its float32 outputs;
        dy: cotangent of y (like x).

    Returns:
        (dx, dweight, dbias): dx like x; dweight, dbias (C,) in weight's dtype
        (summed over rows in float32, deterministic).
    """
    _check_float("layer_norm_backward", x, weight, dy)
    xp = host.array_module(x)
    xf, n_rows, n_cols = _rows(xp, x)
    dyf = xp.ascontiguousarray(dy).reshape(n_rows, n_cols)
    meanf = xp.ascontiguousarray(mean, dtype=xp.float32).reshape(n_rows)
    rstdf = xp.ascontiguousarray(rstd, dtype=xp.float32).reshape(n_rows)
    dx = xp.empty_like(xf)
    n_groups, rows_per_group = _dwdb_groups(n_rows)
    dw_part = xp.zeros((n_groups, n_cols), dtype=xp.float32)
    db_part = xp.zeros((n_groups, n_cols), dtype=xp.float32)
    if n_rows:
        host.launch(_layer_norm_bwd_dx, (n_rows,), [xf, xp.ascontiguousarray(weight), dyf, meanf, rstdf, dx, n_cols],
                    _meta(config, n_cols), like=x)
        host.launch(_layer_norm_bwd_dwdb, (triton.cdiv(n_cols, DWDB_BLOCK_C), n_groups),
                    [xf, dyf, meanf, rstdf, dw_part, db_part, n_rows, n_cols, rows_per_group],
                    dict(BLOCK_R=DWDB_BLOCK_R, BLOCK_C=DWDB_BLOCK_C, num_warps=4), like=x)
    # The group sum is a tiny (n_groups, C) reduction: numpy/CuPy does it.
    dw, db = dw_part.sum(axis=0), db_part.sum(axis=0)
    return dx.reshape(x.shape), _to_dtype(xp, dw, weight.dtype), _to_dtype(xp, db, weight.dtype)


def _to_dtype(xp, x32, dtype):
    """float32 -> dtype; uint16 means bf16 bits (round to nearest even)."""
    if np.dtype(dtype) == np.uint16:
        bits = xp.ascontiguousarray(x32, dtype=xp.float32).view(xp.uint32)
        rounded = (bits + xp.uint32(0x7FFF) + ((bits >> xp.uint32(16)) & xp.uint32(1))) >> xp.uint32(16)
        return xp.where(xp.isnan(x32), xp.uint32(0x7FC0), rounded).astype(xp.uint16)
    return x32.astype(dtype)


# ==========================================================================
# ahead-of-time compile check (no GPU needed)
# ==========================================================================

KERNELS: dict[str, Any] = {
    "softmax_fwd": _softmax_fwd,
    "softmax_bwd": _softmax_bwd,
    "xent_fwd": _xent_fwd,
    "xent_bwd": _xent_bwd,
    "layer_norm_fwd": _layer_norm_fwd,
    "layer_norm_bwd_dx": _layer_norm_bwd_dx,
    "layer_norm_bwd_dwdb": _layer_norm_bwd_dwdb,
}

# Argument types that do not follow the input dtype.
_FIXED_TYPES = {"LABELS": "*i64", "LOSS": "*fp32", "LSE": "*fp32", "BAD": "*i32", "G": "*fp32", "MEAN": "*fp32",
                "RSTD": "*fp32", "DW_PART": "*fp32", "DB_PART": "*fp32", "n_cols": "i32", "n_rows": "i32",
                "rows_per_group": "i32", "eps": "fp32"}


def _signature(kernel, elem: str) -> dict[str, str]:
    sig = {}
    for name in kernel.arg_names:
        if name in _FIXED_TYPES:
            sig[name] = _FIXED_TYPES[name]
        elif name.isupper():
            sig[name] = f"*{elem}"
        else:
            sig[name] = "constexpr"
    return sig


def _launch_constexprs(n_cols: int) -> list[tuple[str, Any, dict, dict]]:
    cfg = row_config(n_cols)
    row = dict(BLOCK_C=cfg.BLOCK_C)
    opts = dict(num_warps=cfg.num_warps)
    return [
        ("softmax_fwd", _softmax_fwd, dict(row, LOG=False), opts),
        ("softmax_bwd", _softmax_bwd, dict(row, LOG=True), opts),
        ("xent_fwd", _xent_fwd, row, opts),
        ("xent_bwd", _xent_bwd, dict(row, HAS_LSE=False), opts),
        ("layer_norm_fwd", _layer_norm_fwd, row, opts),
        ("layer_norm_bwd_dx", _layer_norm_bwd_dx, row, opts),
        ("layer_norm_bwd_dwdb", _layer_norm_bwd_dwdb, dict(BLOCK_R=DWDB_BLOCK_R, BLOCK_C=DWDB_BLOCK_C),
         dict(num_warps=4)),
    ]


def compile_report(n_cols: int = 4096, dtype: str = "float16", *, arch: int = 90,
                   kernels: tuple[str, ...] | None = None) -> dict[str, dict[str, Any]]:
    """Compile the kernels with the wrappers' config for ``n_cols`` for
    ``cuda:sm_<arch>`` on the CPU (the ptxas bundled with Triton; no GPU).

    Must run where ``TRITON_INTERPRET`` is unset. Returns {kernel name:
    {"shared": bytes of shared memory per block, "n_regs", "spill_stores",
    "spill_loads" (from ``ptxas -v``, None if unparsed), "config"}}.
    """
    elem = host.TRITON_SHORT[dtype]
    return host.compile_for_target(_launch_constexprs(n_cols), lambda kernel: _signature(kernel, elem), arch=arch,
                                   kernels=kernels)
