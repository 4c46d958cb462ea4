"""Parameter initializers: ``init(key, shape, dtype=float32) -> array``.

Factories return initializers, as in ``jax.nn.initializers``::

    from funcgrad import random
    import funcgrad.nn.initializers as init
    w = init.he_normal()(random.key(0), (784, 512))           # f32[784,512], std sqrt(2/784)
    k = init.glorot_uniform(in_axis=1, out_axis=0)(random.key(1), (32, 1, 3, 3))   # OIHW conv

Fans: ``fan_in = shape[in_axis] * receptive``, ``fan_out = shape[out_axis] *
receptive`` where ``receptive`` is the product of the other axes (the kernel
window). The defaults ``in_axis=-2, out_axis=-1`` fit Linear weights
``(in, out)``; for OIHW convolution weights use ``in_axis=1, out_axis=0``
(the layers here do).

Names: ``kaiming_*`` are aliases of ``he_*``, ``xavier_*`` of ``glorot_*``.
The ``*_normal`` variance-scaling initializers draw from a plain normal
(PyTorch's convention), not a truncated one (JAX's).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import random

__all__ = ["Initializer", "zeros", "ones", "constant", "normal", "uniform", "variance_scaling", "he_normal",
           "he_uniform", "kaiming_normal", "kaiming_uniform", "glorot_normal", "glorot_uniform", "xavier_normal",
           "xavier_uniform", "lecun_normal", "lecun_uniform"]

Initializer = Callable[..., Any]   # (key, shape, dtype=float32) -> array


def zeros(key: Any, shape: Sequence[int], dtype: Any = np.float32) -> Any:
    """All zeros (the key is ignored)."""
    return fnp.zeros(tuple(shape), dtype)


def ones(key: Any, shape: Sequence[int], dtype: Any = np.float32) -> Any:
    """All ones (the key is ignored)."""
    return fnp.ones(tuple(shape), dtype)


def constant(value: float) -> Initializer:
    """Every entry ``value``."""
    def init(key: Any, shape: Sequence[int], dtype: Any = np.float32) -> Any:
        return fnp.full(tuple(shape), value, dtype)
    return init


def normal(stddev: float = 1e-2) -> Initializer:
    """Normal with mean 0 and standard deviation ``stddev``."""
    def init(key: Any, shape: Sequence[int], dtype: Any = np.float32) -> Any:
        return random.normal(key, tuple(shape), dtype) * stddev
    return init


def uniform(scale: float = 1e-2) -> Initializer:
    """Uniform on ``[-scale, scale)``."""
    def init(key: Any, shape: Sequence[int], dtype: Any = np.float32) -> Any:
        return random.uniform(key, tuple(shape), dtype, -scale, scale)
    return init


def _fans(shape: Sequence[int], in_axis: int, out_axis: int) -> tuple[float, float]:
    shape = tuple(shape)
    if len(shape) < 2:
        # Biases and other vectors: the one axis is both fans (as JAX).
        n = shape[0] if shape else 1
        return float(n), float(n)
    in_axis, out_axis = in_axis % len(shape), out_axis % len(shape)
    receptive = math.prod(s for i, s in enumerate(shape) if i not in (in_axis, out_axis))
    return float(shape[in_axis] * receptive), float(shape[out_axis] * receptive)


def variance_scaling(scale: float, mode: str, distribution: str, in_axis: int = -2,
                     out_axis: int = -1) -> Initializer:
    """Variance ``scale / fan`` with ``fan`` = fan_in, fan_out or their mean (``mode``).

    ``distribution``: ``"normal"`` or ``"uniform"`` (same variance).
    """
    if mode not in ("fan_in", "fan_out", "fan_avg"):
        raise ValueError(f"variance_scaling: mode must be 'fan_in', 'fan_out' or 'fan_avg', got {mode!r}")
    if distribution not in ("normal", "uniform"):
        raise ValueError(f"variance_scaling: distribution must be 'normal' or 'uniform', got {distribution!r}")

    def init(key: Any, shape: Sequence[int], dtype: Any = np.float32) -> Any:
        fan_in, fan_out = _fans(shape, in_axis, out_axis)
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
        variance = scale / max(fan, 1.0)
        if distribution == "normal":
            return random.normal(key, tuple(shape), dtype) * math.sqrt(variance)
        limit = math.sqrt(3.0 * variance)   # uniform on [-a, a) has variance a^2 / 3
        return random.uniform(key, tuple(shape), dtype, -limit, limit)
    return init


def he_normal(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """Kaiming/He normal: std ``sqrt(2 / fan_in)`` (for ReLU layers)."""
    return variance_scaling(2.0, "fan_in", "normal", in_axis, out_axis)


def he_uniform(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """Kaiming/He uniform: ``U(-sqrt(6 / fan_in), sqrt(6 / fan_in))``."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis)


def glorot_normal(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """Glorot/Xavier normal: std ``sqrt(2 / (fan_in + fan_out))``."""
    return variance_scaling(1.0, "fan_avg", "normal", in_axis, out_axis)


def glorot_uniform(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """Glorot/Xavier uniform: ``U(-sqrt(6 / (fan_in + fan_out)), +...)``."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis)


def lecun_normal(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """LeCun normal: std ``sqrt(1 / fan_in)``."""
    return variance_scaling(1.0, "fan_in", "normal", in_axis, out_axis)


def lecun_uniform(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """LeCun uniform: ``U(-sqrt(3 / fan_in), sqrt(3 / fan_in))``."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis)


kaiming_normal, kaiming_uniform = he_normal, he_uniform
xavier_normal, xavier_uniform = glorot_normal, glorot_uniform
