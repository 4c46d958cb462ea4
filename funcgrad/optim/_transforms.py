"""Gradient transformations and the optimizers built from them.

Each building block does one thing (add weight decay, keep a momentum
trace, rescale by Adam's moments, clip, scale by the step size) and the
optimizers are chains of them, as in optax.  Updates follow optax's sign
convention: they are *added* to the parameters (``apply_updates``), so the
step-size block multiplies by ``-learning_rate``.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Union

import funcgrad.numpy as fnp
from funcgrad.optim._base import (EmptyState, GradientTransformation, Params, PyTree, Updates, _cast_like, chain,
                                  increment, new_count, zeros_like_tree)
from funcgrad.tree_util import tree_leaves, tree_map

ScalarOrSchedule = Union[float, Callable[[Any], Any]]


# --------------------------------------------------------------------------
# States (immutable NamedTuples: pytrees, so they work under jit)
# --------------------------------------------------------------------------


class TraceState(NamedTuple):
    """Momentum buffer, shaped like the parameters."""
    trace: PyTree


class ScaleByAdamState(NamedTuple):
    """Adam's step counter (int32) and first/second moment estimates."""
    count: Any
    mu: PyTree
    nu: PyTree


class ScaleByScheduleState(NamedTuple):
    """Step counter (int32) feeding a learning-rate schedule."""
    count: Any


# --------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------


def _require_params(params: Params, name: str) -> None:
    if params is None:
        raise ValueError(f"{name}: weight decay needs the parameters: call update(grads, state, params)")


def add_decayed_weights(weight_decay: float) -> GradientTransformation:
    """``updates + weight_decay * params`` (L2 decay when placed before the step size)."""
    def init(params: Params) -> EmptyState:
        return EmptyState()

    def update(updates: Updates, state: EmptyState, params: Params = None) -> tuple[Updates, EmptyState]:
        if weight_decay == 0.0:
            return updates, state
        _require_params(params, "add_decayed_weights")
        return tree_map(lambda u, p: u + _cast_like(p * weight_decay, u), updates, params), state

    return GradientTransformation(init, update)


def trace(decay: float, nesterov: bool = False) -> GradientTransformation:
    """Momentum: ``buf = decay * buf + g``; the update is ``buf`` (or ``g + decay * buf`` with Nesterov).

    Matches PyTorch's SGD (no dampening): the first step's buffer is ``g``.
    """
    def init(params: Params) -> TraceState:
        return TraceState(zeros_like_tree(params))

    def update(updates: Updates, state: TraceState, params: Params = None) -> tuple[Updates, TraceState]:
        new_trace = tree_map(lambda g, t: g + decay * t, updates, state.trace)
        out = tree_map(lambda g, t: g + decay * t, updates, new_trace) if nesterov else new_trace
        return out, TraceState(new_trace)

    return GradientTransformation(init, update)


def scale_by_adam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> GradientTransformation:
    """Adam's direction ``m_hat / (sqrt(v_hat) + eps)`` with bias-corrected moments."""
    def init(params: Params) -> ScaleByAdamState:
        return ScaleByAdamState(new_count(), zeros_like_tree(params), zeros_like_tree(params))

    def update(updates: Updates, state: ScaleByAdamState, params: Params = None):
        mu = tree_map(lambda g, m: (1.0 - b1) * g + b1 * m, updates, state.mu)
        nu = tree_map(lambda g, v: (1.0 - b2) * (g * g) + b2 * v, updates, state.nu)
        count = increment(state.count)

        def direction(m: Any, v: Any) -> Any:
            # The correction factors in the moments' own dtype (count is int32).
            t = count.astype(m.dtype)
            m_hat = m / (1.0 - fnp.power(b1, t))
            v_hat = v / (1.0 - fnp.power(b2, t))
            return m_hat / (fnp.sqrt(v_hat) + eps)

        return tree_map(direction, mu, nu), ScaleByAdamState(count, mu, nu)

    return GradientTransformation(init, update)


def scale_by_learning_rate(learning_rate: ScalarOrSchedule) -> GradientTransformation:
    """Multiply by ``-learning_rate`` (a float, or a schedule of the step count kept in the state)."""
    if not callable(learning_rate):
        rate = float(learning_rate)

        def init(params: Params) -> EmptyState:
            return EmptyState()

        def update(updates: Updates, state: EmptyState, params: Params = None):
            return tree_map(lambda u: u * -rate, updates), state

        return GradientTransformation(init, update)

    def init_scheduled(params: Params) -> ScaleByScheduleState:
        return ScaleByScheduleState(new_count())

    def update_scheduled(updates: Updates, state: ScaleByScheduleState, params: Params = None):
        # The first update uses schedule(0), as in optax.
        rate = fnp.asarray(learning_rate(state.count))
        return (tree_map(lambda u: u * _cast_like(-rate, u), updates),
                ScaleByScheduleState(increment(state.count)))

    return GradientTransformation(init_scheduled, update_scheduled)


def clip_by_global_norm(max_norm: float) -> GradientTransformation:
    """Rescale all updates together so their global L2 norm is at most ``max_norm``.

    >>> opt = chain(clip_by_global_norm(1.0), sgd(0.1))
    """
    def init(params: Params) -> EmptyState:
        return EmptyState()

    def update(updates: Updates, state: EmptyState, params: Params = None):
        leaves = tree_leaves(updates)
        if not leaves:
            return updates, state
        norm = fnp.sqrt(sum(fnp.sum(fnp.square(x.astype(fnp.float32) if x.dtype.itemsize < 4 else x))
                            for x in leaves))
        # Dividing only where clipping happens keeps a zero gradient at zero.
        scale = fnp.where(norm < max_norm, 1.0, max_norm / fnp.maximum(norm, max_norm))
        return tree_map(lambda u: u * _cast_like(scale, u), updates), state

    return GradientTransformation(init, update)


# --------------------------------------------------------------------------
# Optimizers
# --------------------------------------------------------------------------


def sgd(learning_rate: ScalarOrSchedule, momentum: float = 0.0, nesterov: bool = False,
        weight_decay: float = 0.0) -> GradientTransformation:
    """Stochastic gradient descent, with PyTorch's momentum, Nesterov and (L2) weight decay.

    Per step: ``g += weight_decay * p``; ``buf = momentum * buf + g``;
    ``d = g + momentum * buf`` (Nesterov) or ``buf``; ``p -= lr * d``.

    >>> opt = sgd(0.1, momentum=0.9)
    >>> state = opt.init({"w": fnp.zeros((3, 2))})    # (EmptyState(), TraceState(...), EmptyState())
    """
    if nesterov and momentum <= 0.0:
        raise ValueError("sgd: nesterov=True needs a positive momentum")
    parts = [add_decayed_weights(weight_decay)]
    if momentum:
        parts.append(trace(momentum, nesterov))
    parts.append(scale_by_learning_rate(learning_rate))
    return chain(*parts)


def adam(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8
         ) -> GradientTransformation:
    """Adam (Kingma & Ba): ``p -= lr * m_hat / (sqrt(v_hat) + eps)``.

    >>> opt = adam(1e-3)
    >>> state = opt.init(params)     # (ScaleByAdamState(count=i32[], mu=..., nu=...), EmptyState())
    """
    return chain(scale_by_adam(b1, b2, eps), scale_by_learning_rate(learning_rate))


def adamw(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 1e-4) -> GradientTransformation:
    """Adam with decoupled weight decay (Loshchilov & Hutter; optax's and PyTorch's AdamW).

    ``p -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * p)``: the decay
    is not fed through the moments, unlike L2 regularisation.

    >>> opt = adamw(1e-3, weight_decay=1e-2)
    """
    return chain(scale_by_adam(b1, b2, eps), add_decayed_weights(weight_decay),
                 scale_by_learning_rate(learning_rate))
