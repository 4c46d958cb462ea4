"""Learning-rate schedules: pure functions ``step -> value``.

``step`` may be a Python int or an int32 array (the counter kept in an
optimizer's state, traced under ``jit``); the value is a 0-d float array.

>>> sched = warmup_cosine_decay_schedule(0.0, 1e-3, warmup_steps=100, decay_steps=1000)
>>> float(sched(100))          # the peak, at the end of warm-up
0.001
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

import funcgrad.numpy as fnp
from funcgrad.dtypes import default_float_dtype
from funcgrad.lax import convert_element_type as convert

Schedule = Callable[[Any], Any]


def _step_count(owner: str, name: str, value: Any) -> int:
    """A schedule's length argument: a non-negative Python (or numpy) integer."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{owner}: {name} must be an integer number of steps, got {type(value).__name__}: "
                        f"{value!r:.40}")
    if value < 0:
        raise ValueError(f"{owner}: {name} must be non-negative, got {value}")
    return int(value)


def _float_step(step: Any) -> Any:
    return convert(fnp.asarray(step), default_float_dtype())


def constant_schedule(value: float) -> Schedule:
    """The same value at every step.

    >>> float(constant_schedule(0.1)(1234))
    0.1...
    """
    def schedule(step: Any) -> Any:
        return fnp.full((), value, default_float_dtype())
    return schedule


def step_decay_schedule(init_value: float, step_size: int, decay_rate: float) -> Schedule:
    """Exponential staircase: ``init_value * decay_rate ** (step // step_size)``.

    >>> s = step_decay_schedule(1.0, step_size=10, decay_rate=0.5)
    >>> float(s(9)), float(s(10)), float(s(25))
    (1.0, 0.5, 0.25)
    """
    step_size = _step_count("step_decay_schedule", "step_size", step_size)
    if step_size == 0:
        raise ValueError(f"step_decay_schedule: step_size must be positive, got {step_size}")

    def schedule(step: Any) -> Any:
        stage = fnp.floor(_float_step(step) / float(step_size))
        return fnp.power(fnp.full((), decay_rate, default_float_dtype()), stage) * init_value
    return schedule


def warmup_cosine_decay_schedule(init_value: float, peak_value: float, warmup_steps: int, decay_steps: int,
                                 end_value: float = 0.0) -> Schedule:
    """Linear warm-up from ``init_value`` to ``peak_value``, then cosine decay to ``end_value``.

    As in optax, ``decay_steps`` counts the whole schedule *including* the
    warm-up: the value is ``peak_value`` at ``warmup_steps`` and reaches
    ``end_value`` at ``decay_steps``, staying there afterwards.

    >>> s = warmup_cosine_decay_schedule(0.0, 1.0, warmup_steps=10, decay_steps=110)
    >>> float(s(0)), float(s(10)), float(s(60)), float(s(110))
    (0.0, 1.0, 0.5, 0.0)
    """
    warmup_steps = _step_count("warmup_cosine_decay_schedule", "warmup_steps", warmup_steps)
    decay_steps = _step_count("warmup_cosine_decay_schedule", "decay_steps", decay_steps)
    if not warmup_steps <= decay_steps:
        raise ValueError(f"warmup_cosine_decay_schedule: need 0 <= warmup_steps <= decay_steps, got "
                         f"warmup_steps={warmup_steps}, decay_steps={decay_steps}")
    # max(.., 1) only guards the division in the branch not taken.
    warmup = float(max(warmup_steps, 1))
    decay_len = float(max(decay_steps - warmup_steps, 1))

    def schedule(step: Any) -> Any:
        t = _float_step(step)
        rising = init_value + (peak_value - init_value) * fnp.minimum(t / warmup, 1.0)
        progress = fnp.clip((t - float(warmup_steps)) / decay_len, 0.0, 1.0)
        falling = end_value + (peak_value - end_value) * 0.5 * (1.0 + fnp.cos(progress * math.pi))
        return fnp.where(t < float(warmup_steps), rising, falling)
    return schedule
