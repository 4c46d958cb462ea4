"""Losses: cross-entropy (integer labels or probabilities), MSE, binary cross-entropy.

Each takes ``reduction``: ``"mean"`` (default), ``"sum"`` or ``"none"``
(the per-example losses).

The elementwise losses (``mse``, ``binary_cross_entropy_with_logits``)
need targets of exactly the predictions' shape (or a Python number): a
``f32[4,1]`` prediction against ``f32[4]`` targets would broadcast to a
``[4,4]`` loss, a silently wrong value, so it raises ValueError instead
(PyTorch only warns).  Reshape one side first, e.g. ``pred[:, 0]``.

>>> import funcgrad.nn as nn, funcgrad.numpy as fnp
>>> logits = fnp.zeros((4, 10))                # f32[4,10]
>>> labels = fnp.array([1, 2, 3, 4])           # i32[4]
>>> nn.cross_entropy(logits, labels)           # f32[]: log(10) = 2.302...
Array(2.3026, dtype=float32)
"""
from __future__ import annotations

from typing import Any

import numpy as np

import funcgrad.lax as lax
import funcgrad.numpy as fnp
from funcgrad import dtypes as _dtypes
from funcgrad.core import describe
from funcgrad.nn._functions import _float, log_softmax, softplus

__all__ = ["cross_entropy", "mse", "binary_cross_entropy_with_logits"]

_REDUCTIONS = ("mean", "sum", "none")


def _reduce(name: str, losses: Any, reduction: str) -> Any:
    if reduction == "mean":
        return fnp.mean(losses)
    if reduction == "sum":
        return fnp.sum(losses)
    if reduction == "none":
        return losses
    raise ValueError(f"{name}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def _array(x: Any) -> Any:
    return fnp.asarray(x)


def _targets_like(name: str, predictions: Any, targets: Any, what: str = "predictions") -> Any:
    """``targets`` as an array of exactly the shape of ``predictions`` (a Python number is fine too)."""
    if isinstance(targets, (int, float)) and not isinstance(targets, bool):
        return targets
    t = _array(targets)
    if tuple(t.shape) != tuple(predictions.shape):
        raise ValueError(f"{name}: targets {describe(t)} must have the shape of the {what} "
                         f"{describe(predictions)}: elementwise losses do not broadcast (that would silently "
                         "average a different set of pairs); reshape one to the other's shape first")
    return t


def cross_entropy(logits: Any, labels: Any, *, axis: int = -1, reduction: str = "mean") -> Any:
    """Softmax cross-entropy between ``logits`` and integer labels or probability targets.

    * integer ``labels`` (the shape of ``logits`` without ``axis``): the
      fused ``softmax_cross_entropy`` primitive (one kernel forward, one
      backward); labels outside ``[0, C)`` raise ValueError, eagerly and
      under ``jit`` alike (the kernel checks every label; JAX instead
      returns a silently wrong loss for them). On GPU arrays the check runs
      on the device and the error is raised at the next point where the host
      waits for the GPU (``block_until_ready``, ``fg.device_put(x, "cpu")``,
      ``float(x)``), as CUDA reports device-side errors: a step never waits
      for the GPU just to check its labels;
    * float ``labels`` (the shape of ``logits``): ``-sum(labels *
      log_softmax(logits), axis)``, stable for any logits.

    >>> cross_entropy(fnp.zeros((8, 10)), fnp.zeros(8, fnp.int32))           # f32[]
    Array(2.3026, dtype=float32)
    >>> cross_entropy(fnp.zeros((8, 10)), fnp.full((8, 10), 0.1), reduction="none")   # f32[8]
    Array([2.3026, 2.3026, 2.3026, 2.3026, 2.3026, 2.3026,
           2.3026, 2.3026], dtype=float32)
    """
    logits, labels = _float(logits), _array(labels)
    if logits.ndim == 0:
        raise ValueError(f"cross_entropy: logits must have a class axis, got {describe(logits)}")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"cross_entropy: axis must be an int, got {type(axis).__name__}: {axis!r:.40}")
    axis = int(axis) % logits.ndim if -logits.ndim <= axis < logits.ndim else _bad_axis(axis, logits)
    if logits.shape[axis] == 0:
        raise ValueError(f"cross_entropy: logits {describe(logits)} have no classes on axis {axis}")
    if labels.dtype.kind in "iu":
        losses = _integer_label_xent(logits, labels, axis)
    elif _dtypes.kind(labels.dtype) == "f":
        if tuple(labels.shape) != tuple(logits.shape):
            raise ValueError(f"cross_entropy: probability targets {describe(labels)} must have the shape of "
                             f"logits {describe(logits)}")
        losses = -fnp.sum(labels * log_softmax(logits, axis=axis), axis=axis)
    else:
        raise TypeError(f"cross_entropy: labels must be integer class indices or float probabilities, got "
                        f"{describe(labels)}")
    return _reduce("cross_entropy", losses, reduction)


def _bad_axis(axis: int, logits: Any) -> int:
    raise ValueError(f"cross_entropy: axis {axis} is out of range for logits {describe(logits)}")


def _integer_label_xent(logits: Any, labels: Any, axis: int) -> Any:
    batch_shape = tuple(logits.shape[:axis]) + tuple(logits.shape[axis + 1:])
    if tuple(labels.shape) != batch_shape:
        raise ValueError(f"cross_entropy: integer labels {describe(labels)} must have the shape of logits "
                         f"{describe(logits)} without the class axis {axis}, i.e. {batch_shape}")
    if axis != logits.ndim - 1:
        logits = fnp.moveaxis(logits, axis, -1)
    n_classes = logits.shape[-1]
    flat = lax.softmax_cross_entropy(fnp.reshape(logits, (-1, n_classes)), fnp.reshape(labels, (-1,)))
    return fnp.reshape(flat, batch_shape)


def mse(predictions: Any, targets: Any, *, reduction: str = "mean") -> Any:
    """Squared error ``(predictions - targets) ** 2``, reduced.

    ``targets`` must have the shape of ``predictions`` (or be a Python
    number); other shapes raise ValueError instead of broadcasting.

    >>> mse(fnp.array([1.0, 2.0]), fnp.array([1.0, 4.0]))     # f32[]: 2.0
    Array(2., dtype=float32)
    """
    predictions = _float(predictions)
    diff = predictions - _targets_like("mse", predictions, targets)
    return _reduce("mse", diff * diff, reduction)


def binary_cross_entropy_with_logits(logits: Any, targets: Any, *, reduction: str = "mean") -> Any:
    """``-(t log sigmoid(x) + (1 - t) log(1 - sigmoid(x)))``, stable for any logits.

    Computed as ``softplus(x) - x * t`` (no log of a rounded probability).
    ``targets`` in [0, 1] with exactly the shape of ``logits`` (or a Python
    number); other shapes raise ValueError instead of broadcasting.

    >>> binary_cross_entropy_with_logits(fnp.array([0.0]), fnp.array([1.0]))   # f32[]: log 2
    Array(0.6931, dtype=float32)
    """
    x = _float(logits)
    t = _targets_like("binary_cross_entropy_with_logits", x, targets, "logits")
    return _reduce("binary_cross_entropy_with_logits", softplus(x) - x * t, reduction)
