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

Shapes are tuples of non-negative ints (an int is a 1-d shape); ``in_axis``
and ``out_axis`` must be two different axes of the shape.
"""
from __future__ import annotations

import math
from numbers import Real
from typing import Any, Callable, Sequence

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import random
from funcgrad.numpy.array_utils import shape_tuple

__all__ = ["Initializer", "zeros", "ones", "constant", "normal", "uniform", "variance_scaling", "he_normal",
           "he_uniform", "kaiming_normal", "kaiming_uniform", "glorot_normal", "glorot_uniform", "xavier_normal",
           "xavier_uniform", "lecun_normal", "lecun_uniform"]

Initializer = Callable[..., Any]   # (key, shape, dtype=float32) -> array


_PREFIX = "initializers."


def _shape(shape: Any, name: str) -> tuple[int, ...]:
    """``shape`` checked as ``fnp.zeros`` and ``random.normal`` check it, errors naming ``initializers.name``."""
    return shape_tuple(shape, _PREFIX + name)


def _number(name: str, arg: str, value: Any, positive: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, Real) or math.isnan(value):
        raise TypeError(f"{_PREFIX}{name}: {arg} must be a number, got {type(value).__name__}: {value!r:.40}")
    if positive and not value > 0:
        raise ValueError(f"{_PREFIX}{name}: {arg} must be positive, got {value}")


def zeros(key: Any, shape: Sequence[int], dtype: Any = np.float32) -> Any:
    """All zeros (the key is ignored).

    >>> nn.initializers.zeros(random.key(0), (2, 2))
    Array([[0., 0.],
           [0., 0.]], dtype=float32)
    """
    return fnp.zeros(_shape(shape, "zeros"), dtype)


def ones(key: Any, shape: Sequence[int], dtype: Any = np.float32) -> Any:
    """All ones (the key is ignored).

    >>> nn.initializers.ones(random.key(0), (2,))
    Array([1., 1.], dtype=float32)
    """
    return fnp.ones(_shape(shape, "ones"), dtype)


def constant(value: float) -> Initializer:
    """Every entry ``value``.

    >>> w = nn.initializers.constant(0.5)(random.key(0), (3, 4))
    >>> w.shape, w.dtype
    ((3, 4), dtype('float32'))
    """
    _number("constant", "value", value)

    def init(key: Any, shape: Sequence[int], dtype: Any = np.float32) -> Any:
        return fnp.full(_shape(shape, "constant"), value, dtype)
    return init


def normal(stddev: float = 1e-2) -> Initializer:
    """Normal with mean 0 and standard deviation ``stddev``.

    >>> w = nn.initializers.normal(stddev=0.1)(random.key(0), (3, 4))
    >>> w.shape, w.dtype
    ((3, 4), dtype('float32'))
    """
    _number("normal", "stddev", stddev)

    def init(key: Any, shape: Sequence[int], dtype: Any = np.float32) -> Any:
        return random.normal(key, _shape(shape, "normal"), dtype) * stddev
    return init


def uniform(scale: float = 1e-2) -> Initializer:
    """Uniform on ``[-scale, scale)``.

    >>> w = nn.initializers.uniform(scale=0.1)(random.key(0), (3, 4))
    >>> w.shape, w.dtype
    ((3, 4), dtype('float32'))
    """
    _number("uniform", "scale", scale)

    def init(key: Any, shape: Sequence[int], dtype: Any = np.float32) -> Any:
        return random.uniform(key, _shape(shape, "uniform"), dtype, -scale, scale)
    return init


def _fans(shape: tuple[int, ...], in_axis: int, out_axis: int) -> tuple[float, float]:
    if len(shape) < 2:
        # Biases and other vectors: the one axis is both fans (as JAX).
        n = shape[0] if shape else 1
        return float(n), float(n)
    rank = len(shape)
    for arg, axis in (("in_axis", in_axis), ("out_axis", out_axis)):
        if not -rank <= axis < rank:
            raise ValueError(f"{_PREFIX}variance_scaling: {arg}={axis} is out of range for a weight of shape "
                             f"{shape} (rank {rank}); for OIHW convolution weights use in_axis=1, out_axis=0")
    in_axis, out_axis = in_axis % rank, out_axis % rank
    if in_axis == out_axis:
        raise ValueError(f"{_PREFIX}variance_scaling: in_axis and out_axis are the same axis {in_axis} of the "
                         f"shape {shape}; they must be different")
    receptive = math.prod(s for i, s in enumerate(shape) if i not in (in_axis, out_axis))
    return float(shape[in_axis] * receptive), float(shape[out_axis] * receptive)


def variance_scaling(scale: float, mode: str, distribution: str, in_axis: int = -2,
                     out_axis: int = -1) -> Initializer:
    """Variance ``scale / fan`` with ``fan`` = fan_in, fan_out or their mean (``mode``).

    ``distribution``: ``"normal"`` or ``"uniform"`` (same variance).

    >>> w = nn.initializers.variance_scaling(1.0, "fan_in", "normal")(random.key(0), (3, 4))
    >>> w.shape, w.dtype
    ((3, 4), dtype('float32'))
    """
    if mode not in ("fan_in", "fan_out", "fan_avg"):
        raise ValueError(f"variance_scaling: mode must be 'fan_in', 'fan_out' or 'fan_avg', got {mode!r}")
    if distribution not in ("normal", "uniform"):
        raise ValueError(f"variance_scaling: distribution must be 'normal' or 'uniform', got {distribution!r}")
    _number("variance_scaling", "scale", scale, positive=True)
    for arg, axis in (("in_axis", in_axis), ("out_axis", out_axis)):
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
            raise TypeError(f"{_PREFIX}variance_scaling: {arg} must be an int, got {type(axis).__name__}: "
                            f"{axis!r:.40}")

    def init(key: Any, shape: Sequence[int], dtype: Any = np.float32) -> Any:
        shape = _shape(shape, "variance_scaling")
        fan_in, fan_out = _fans(shape, in_axis, out_axis)
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
        # An empty weight (a zero-sized axis) has fan 0 and nothing to draw.
        variance = scale / max(fan, 1.0)
        if distribution == "normal":
            return random.normal(key, shape, dtype) * math.sqrt(variance)
        limit = math.sqrt(3.0 * variance)   # uniform on [-a, a) has variance a^2 / 3
        return random.uniform(key, shape, dtype, -limit, limit)
    return init


def he_normal(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """Kaiming/He normal: std ``sqrt(2 / fan_in)`` (for ReLU layers).

    >>> w = nn.initializers.he_normal()(random.key(0), (3, 4))
    >>> w.shape, w.dtype
    ((3, 4), dtype('float32'))
    """
    return variance_scaling(2.0, "fan_in", "normal", in_axis, out_axis)


def he_uniform(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """Kaiming/He uniform: ``U(-sqrt(6 / fan_in), sqrt(6 / fan_in))``.

    >>> w = nn.initializers.he_uniform()(random.key(0), (3, 4))
    >>> w.shape, w.dtype
    ((3, 4), dtype('float32'))
    """
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis)


def glorot_normal(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """Glorot/Xavier normal: std ``sqrt(2 / (fan_in + fan_out))``.

    >>> w = nn.initializers.glorot_normal()(random.key(0), (3, 4))
    >>> w.shape, w.dtype
    ((3, 4), dtype('float32'))
    """
    return variance_scaling(1.0, "fan_avg", "normal", in_axis, out_axis)


def glorot_uniform(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """Glorot/Xavier uniform: ``U(-sqrt(6 / (fan_in + fan_out)), +...)``.

    >>> w = nn.initializers.glorot_uniform()(random.key(0), (3, 4))
    >>> w.shape, w.dtype
    ((3, 4), dtype('float32'))
    """
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis)


def lecun_normal(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """LeCun normal: std ``sqrt(1 / fan_in)``.

    >>> w = nn.initializers.lecun_normal()(random.key(0), (3, 4))
    >>> w.shape, w.dtype
    ((3, 4), dtype('float32'))
    """
    return variance_scaling(1.0, "fan_in", "normal", in_axis, out_axis)


def lecun_uniform(in_axis: int = -2, out_axis: int = -1) -> Initializer:
    """LeCun uniform: ``U(-sqrt(3 / fan_in), sqrt(3 / fan_in))``.

    >>> w = nn.initializers.lecun_uniform()(random.key(0), (3, 4))
    >>> w.shape, w.dtype
    ((3, 4), dtype('float32'))
    """
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis)


kaiming_normal, kaiming_uniform = he_normal, he_uniform
xavier_normal, xavier_uniform = glorot_normal, glorot_uniform
