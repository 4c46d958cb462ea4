"""Softmax, log_softmax, logsumexp (last axis) and fused softmax cross-entropy with integer labels.

See ``funcgrad/primitives/nn.py`` for how fused gradients get their own (composite) rules.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad._core import Primitive
from funcgrad._dtypes import ShapedArray, describe
from funcgrad.primitives import elementwise as E
from funcgrad.primitives.shape import shape_of
from funcgrad.primitives._nn_rules import (_batch_last_axis, _composite_rules, _expand_last, _fold_batch,
                                           _require_float, _same_aval_over_last_axis, _sum_last)
from funcgrad.primitives.reduce import reduce_sum

# --------------------------------------------------------------------------
# softmax and log_softmax over the last axis
# --------------------------------------------------------------------------


def _softmax_np(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def _log_softmax_np(x: np.ndarray) -> np.ndarray:
    shifted = x - np.max(x, axis=-1, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


# The implementations below are the numpy references; the CPU backend registers
# numba kernels for the float32/float64 cases (funcgrad/backends/cpu/impls.py).

softmax_p = Primitive("softmax")
softmax_p.impl = _softmax_np
softmax_p.abstract_eval = _same_aval_over_last_axis("softmax")
softmax_p.batch = _batch_last_axis(softmax_p)

log_softmax_p = Primitive("log_softmax")
log_softmax_p.impl = _log_softmax_np
log_softmax_p.abstract_eval = _same_aval_over_last_axis("log_softmax")
log_softmax_p.batch = _batch_last_axis(log_softmax_p)


def softmax(x: Any) -> Any:
    """``exp(x) / sum(exp(x))`` over the last axis (max-shifted). f32[..., C] -> f32[..., C].

    >>> lax.softmax(fnp.array([0.0, 0.0]))
    Array([0.5, 0.5], dtype=float32)
    """
    return softmax_p.bind(x)


def log_softmax(x: Any) -> Any:
    """``x - logsumexp(x)`` over the last axis. f32[..., C] -> f32[..., C].

    >>> lax.log_softmax(fnp.array([0.0, 0.0]))
    Array([-0.6931, -0.6931], dtype=float32)
    """
    return log_softmax_p.bind(x)


# The backward passes are primitives of their own (one fused kernel each);
# their derivatives come from the composites below.

def _softmax_grad_composite(y, g):
    # VJP of softmax at output y: y * (g - sum(g * y)). Also its JVP: the
    # Jacobian diag(y) - y y^T is symmetric.
    return E.mul(y, E.sub(g, _sum_last(E.mul(g, y))))


def _log_softmax_grad_composite(y, g):
    # VJP of log_softmax at output y: g - exp(y) * sum(g).
    return E.sub(g, E.mul(E.exp(y), _sum_last(g)))


softmax_grad_p = Primitive("softmax_grad")
softmax_grad_p.impl = lambda y, g: y * (g - np.sum(g * y, -1, keepdims=True))
softmax_grad_p.abstract_eval = _same_aval_over_last_axis("softmax_grad")
softmax_grad_p.batch = _batch_last_axis(softmax_grad_p)
_composite_rules(softmax_grad_p, _softmax_grad_composite)

log_softmax_grad_p = Primitive("log_softmax_grad")
log_softmax_grad_p.impl = lambda y, g: g - np.exp(y) * np.sum(g, -1, keepdims=True)
log_softmax_grad_p.abstract_eval = _same_aval_over_last_axis("log_softmax_grad")
log_softmax_grad_p.batch = _batch_last_axis(log_softmax_grad_p)
_composite_rules(log_softmax_grad_p, _log_softmax_grad_composite)


def _softmax_jvp(primals, tangents):
    y = softmax_p.bind(primals[0])
    return y, softmax_grad_p.bind(y, tangents[0])


def _log_softmax_jvp(primals, tangents):
    y = log_softmax_p.bind(primals[0])
    t = tangents[0]
    return y, E.sub(t, _sum_last(E.mul(t, E.exp(y))))


softmax_p.jvp = _softmax_jvp
softmax_p.vjp = lambda ct, primals, y, needs: (softmax_grad_p.bind(y, ct),)
log_softmax_p.jvp = _log_softmax_jvp
log_softmax_p.vjp = lambda ct, primals, y, needs: (log_softmax_grad_p.bind(y, ct),)

# --------------------------------------------------------------------------
# logsumexp over the last axis
# --------------------------------------------------------------------------


def _logsumexp_np(x: np.ndarray) -> np.ndarray:
    # Shift by 0 where the max is not finite (JAX's rule): +inf -> +inf,
    # all -inf -> -inf, never inf - inf = NaN.
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        return (np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True)) + m)[..., 0]


def _logsumexp_aval(x):
    _same_aval_over_last_axis("logsumexp")(x)
    return ShapedArray(x.shape[:-1], x.dtype)


logsumexp_p = Primitive("logsumexp")
logsumexp_p.impl = _logsumexp_np
logsumexp_p.abstract_eval = _logsumexp_aval
logsumexp_p.batch = _batch_last_axis(logsumexp_p)
def _logsumexp_weights(x, out):
    # d logsumexp / dx = exp(x - logsumexp(x)): the softmax for finite rows,
    # and JAX's values for the others (a +inf entry: NaN there, 0 elsewhere;
    # an all -inf row: NaN).
    return E.exp(E.sub(x, _expand_last(out)))


def _logsumexp_jvp(primals, tangents):
    x, = primals
    out = logsumexp_p.bind(x)
    return out, reduce_sum(E.mul(tangents[0], _logsumexp_weights(x, out)), (len(shape_of(x)) - 1,))


logsumexp_p.jvp = _logsumexp_jvp
logsumexp_p.vjp = lambda ct, primals, out, needs: (E.mul(_expand_last(ct), _logsumexp_weights(primals[0], out)),)


def logsumexp(x: Any) -> Any:
    """``log(sum(exp(x)))`` over the last axis. f32[..., C] -> f32[...].

    >>> lax.logsumexp(fnp.array([0.0, 0.0]))
    Array(0.6931, dtype=float32)
    """
    return logsumexp_p.bind(x)


# --------------------------------------------------------------------------
# Softmax cross-entropy with integer labels (fused)
# --------------------------------------------------------------------------


def _check_labels(name: str, logits: np.ndarray, labels: np.ndarray) -> None:
    """Raise a clear ValueError for labels outside [0, C) (never reach a kernel)."""
    n_classes = logits.shape[1]
    if labels.size == 0:
        return
    bad = np.flatnonzero((labels < 0) | (labels >= n_classes))
    if bad.size:
        row = int(bad[0])
        raise ValueError(f"{name}: label {int(labels[row])} at row {row} is out of range for logits "
                         f"{describe(logits)} with labels {describe(labels)}: labels must be in "
                         f"[0, {n_classes}) ({bad.size} bad label{'s' if bad.size > 1 else ''})")


def _xent_np(logits, labels):
    rows = np.arange(logits.shape[0])
    return _logsumexp_np(logits) - logits[rows, labels]


def _xent_impl(logits, labels):
    _check_labels("softmax_cross_entropy", logits, labels)
    return _xent_np(logits, labels)


def _xent_grad_np(logits, labels, g):
    d = _softmax_np(logits)
    d[np.arange(logits.shape[0]), labels] -= 1
    return d * g[:, None]


def _xent_grad_impl(logits, labels, g):
    _check_labels("softmax_cross_entropy_grad", logits, labels)
    return _xent_grad_np(logits, labels, g).astype(logits.dtype, copy=False)


def _xent_aval_check(name: str, logits: Any, labels: Any) -> None:
    if len(logits.shape) != 2:
        raise ValueError(f"{name}: logits must be 2-D (examples, classes), got {describe(logits)}; "
                         "reshape (..., C) to (N, C) first (funcgrad.nn.cross_entropy does)")
    _require_float(name, logits)
    if labels.dtype.kind not in "iu":
        raise TypeError(f"{name}: labels must be integers (class indices), got {describe(labels)}; "
                        "for probability targets use funcgrad.nn.cross_entropy with float targets")
    if tuple(labels.shape) != tuple(logits.shape[:1]):
        raise ValueError(f"{name}: labels {describe(labels)} do not match logits {describe(logits)}: "
                         f"expected one label per row, shape ({logits.shape[0]},)")
    if logits.shape[1] == 0 and logits.shape[0] > 0:
        raise ValueError(f"{name}: logits {describe(logits)} have zero classes")


def _xent_aval(logits, labels):
    _xent_aval_check("softmax_cross_entropy", logits, labels)
    return ShapedArray(logits.shape[:1], logits.dtype)


def _xent_grad_aval(logits, labels, g):
    _xent_aval_check("softmax_cross_entropy_grad", logits, labels)
    if tuple(g.shape) != tuple(logits.shape[:1]):
        raise ValueError(f"softmax_cross_entropy_grad: cotangent {describe(g)} must have shape "
                         f"({logits.shape[0]},) for logits {describe(logits)}")
    return ShapedArray(logits.shape, logits.dtype)


def one_hot_like(labels: Any, n_classes: int, dtype: np.dtype) -> Any:
    """``labels`` (N,) as an (N, C) one-hot array of ``dtype`` (a constant: no gradient)."""
    hot = E.eq(_expand_last(labels), np.arange(n_classes, dtype=labels.dtype))
    return E.convert(hot, dtype)


def _xent_grad_composite(logits, labels, g):
    # d loss / d logits = g[:, None] * (softmax(logits) - one_hot(labels)).
    hot = one_hot_like(labels, shape_of(logits)[1], logits.dtype)
    return E.mul(_expand_last(g), E.sub(softmax(logits), hot))


softmax_cross_entropy_grad_p = Primitive("softmax_cross_entropy_grad")
softmax_cross_entropy_grad_p.impl = _xent_grad_impl
softmax_cross_entropy_grad_p.abstract_eval = _xent_grad_aval
_composite_rules(softmax_cross_entropy_grad_p, _xent_grad_composite)
softmax_cross_entropy_grad_p.batch = _fold_batch(softmax_cross_entropy_grad_p)

softmax_cross_entropy_p = Primitive("softmax_cross_entropy")
softmax_cross_entropy_p.impl = _xent_impl
softmax_cross_entropy_p.abstract_eval = _xent_aval
softmax_cross_entropy_p.batch = _fold_batch(softmax_cross_entropy_p)


def _xent_jvp(primals, tangents):
    logits, labels = primals
    loss = softmax_cross_entropy_p.bind(logits, labels)
    ones = np.ones(shape_of(logits)[:1], logits.dtype)
    dlogits = softmax_cross_entropy_grad_p.bind(logits, labels, ones)
    return loss, reduce_sum(E.mul(tangents[0], dlogits), (1,))


softmax_cross_entropy_p.jvp = _xent_jvp
softmax_cross_entropy_p.vjp = lambda ct, primals, out, needs: (
    softmax_cross_entropy_grad_p.bind(primals[0], primals[1], ct), None)


def softmax_cross_entropy(logits: Any, labels: Any) -> Any:
    """Per-example ``logsumexp(logits[i]) - logits[i, labels[i]]``.

    logits: f32[N, C]; labels: int[N] in [0, C) (out of range: ValueError).
    Returns f32[N].

    >>> lax.softmax_cross_entropy(fnp.zeros((1, 4)), fnp.array([2]))
    Array([1.3863], dtype=float32)
    """
    return softmax_cross_entropy_p.bind(logits, labels)


