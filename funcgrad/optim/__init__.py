"""``funcgrad.optim``: optax-style optimizers as pure ``(init, update)`` pairs.

>>> import funcgrad as fg, funcgrad.numpy as fnp
>>> from funcgrad import optim
>>> opt = optim.chain(optim.clip_by_global_norm(1.0),
...                   optim.adamw(optim.warmup_cosine_decay_schedule(0.0, 1e-3, 100, 1000)))
>>> params = {"w": fnp.zeros(3)}
>>> loss = lambda params, x, y: fnp.mean((x @ params["w"] - y) ** 2)
>>> state = opt.init(params)                     # a NamedTuple pytree of arrays
>>> @fg.jit
... def step(params, state, x, y):
...     grads = fg.grad(loss)(params, x, y)
...     updates, state = opt.update(grads, state, params)
...     return optim.apply_updates(params, updates), state

Saving parameters and states to a file: :mod:`funcgrad.optim.serialization`
(``serialization.save(path, tree)``, ``serialization.load(path, like=tree)``).
"""
import warnings
from typing import Any

from funcgrad.optim import serialization
from funcgrad.optim._base import EmptyState, GradientTransformation, apply_updates, chain
from funcgrad.optim._schedules import constant_schedule, step_decay_schedule, warmup_cosine_decay_schedule
from funcgrad.optim._transforms import (ScaleByAdamState, ScaleByScheduleState, TraceState, adam, adamw,
                                        add_decayed_weights, clip_by_global_norm, scale_by_adam,
                                        scale_by_learning_rate, sgd, trace)

__all__ = ["EmptyState", "GradientTransformation", "ScaleByAdamState", "ScaleByScheduleState", "TraceState",
           "adam", "adamw", "add_decayed_weights", "apply_updates", "chain", "clip_by_global_norm",
           "constant_schedule", "scale_by_adam", "scale_by_learning_rate", "serialization", "sgd",
           "step_decay_schedule", "trace", "warmup_cosine_decay_schedule"]


def _warn_renamed(stacklevel: int) -> None:
    """The DeprecationWarning of the old name ``optim.checkpoint`` (``stacklevel``: frames up to the user's line)."""
    warnings.warn("funcgrad.optim.checkpoint is deprecated: use funcgrad.optim.serialization (the same save and "
                  "load, the same files; fg.checkpoint is rematerialisation)", DeprecationWarning,
                  stacklevel=stacklevel + 1)


def __getattr__(name: str) -> Any:
    """``optim.checkpoint``: the old name of ``optim.serialization``, still working with a DeprecationWarning."""
    if name == "checkpoint":
        _warn_renamed(stacklevel=2)
        return serialization
    raise AttributeError(f"module 'funcgrad.optim' has no attribute {name!r}")

