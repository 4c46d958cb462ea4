"""``funcgrad.optim``: optax-style optimizers as pure ``(init, update)`` pairs.

>>> import funcgrad as fg
>>> from funcgrad import optim
>>> opt = optim.chain(optim.clip_by_global_norm(1.0),
...                   optim.adamw(optim.warmup_cosine_decay_schedule(0.0, 1e-3, 100, 1000)))
>>> state = opt.init(params)                     # a NamedTuple pytree of arrays
>>> @fg.jit
... def step(params, state, x, y):
...     grads = fg.grad(loss)(params, x, y)
...     updates, state = opt.update(grads, state, params)
...     return optim.apply_updates(params, updates), state

Checkpoints of parameters and states: :mod:`funcgrad.optim.checkpoint`
(``checkpoint.save(path, tree)``, ``checkpoint.load(path, like=tree)``).
"""
from funcgrad.optim import checkpoint
from funcgrad.optim._base import EmptyState, GradientTransformation, apply_updates, chain
from funcgrad.optim._schedules import constant_schedule, step_decay_schedule, warmup_cosine_decay_schedule
from funcgrad.optim._transforms import (ScaleByAdamState, ScaleByScheduleState, TraceState, adam, adamw,
                                        add_decayed_weights, clip_by_global_norm, scale_by_adam,
                                        scale_by_learning_rate, sgd, trace)

__all__ = ["EmptyState", "GradientTransformation", "ScaleByAdamState", "ScaleByScheduleState", "TraceState",
           "adam", "adamw", "add_decayed_weights", "apply_updates", "chain", "checkpoint", "clip_by_global_norm",
           "constant_schedule", "scale_by_adam", "scale_by_learning_rate", "sgd", "step_decay_schedule", "trace",
           "warmup_cosine_decay_schedule"]
