"""Gradient transformations and the optimizers built from them.

Each building block does one thing (add weight decay, keep a momentum
trace, rescale by Adam's moments, clip, scale by the step size) and the
optimizers are chains of them, as in optax.  Updates follow optax's sign
convention: they are *added* to the parameters (``apply_updates``), so the
step-size block multiplies by ``-learning_rate``.
"""
from __future__ import annotations

import math
from numbers import Real
from typing import Any, Callable, NamedTuple, Union

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import dtypes as _dtypes
from funcgrad.core import describe
from funcgrad.optim._base import (EmptyState, GradientTransformation, Params, PyTree, Updates, _cast_like, chain,
                                  check_state, check_trees, increment, new_count, zeros_like_tree)
from funcgrad.tree_util import tree_leaves, tree_map

ScalarOrSchedule = Union[float, Callable[[Any], Any]]


# --------------------------------------------------------------------------
# States (immutable NamedTuples: pytrees, so they work under jit)
# --------------------------------------------------------------------------


class TraceState(NamedTuple):
    """Momentum buffer, shaped like the parameters.

    >>> optim.trace(decay=0.9).init({"w": fnp.zeros(2)})
    TraceState(trace={'w': Array([0., 0.], dtype=float32)})
    """
    trace: PyTree


class ScaleByAdamState(NamedTuple):
    """Adam's step counter (int32) and first/second moment estimates.

    >>> state = optim.scale_by_adam().init({"w": fnp.zeros(2)})
    >>> state.count, state.mu["w"].shape
    (Array(0, dtype=int32), (2,))
    """
    count: Any
    mu: PyTree
    nu: PyTree


class ScaleByScheduleState(NamedTuple):
    """Step counter (int32) feeding a learning-rate schedule.

    >>> state = optim.scale_by_learning_rate(optim.warmup_cosine_decay_schedule(0.0, 1e-3, 10, 100)).init({})
    >>> state
    ScaleByScheduleState(count=Array(0, dtype=int32))
    """
    count: Any


# --------------------------------------------------------------------------
# Hyperparameters (checked when the optimizer is built, as PyTorch does)
# --------------------------------------------------------------------------


def _hyper(owner: str, name: str, value: Any, low: float = 0.0, high: float = math.inf,
           open_high: bool = False, open_low: bool = False) -> float:
    """``value`` as a float in ``[low, high]`` (``(low, ...`` / ``..., high)`` when open), or a clear error."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{owner}: {name} must be a number, got {type(value).__name__}: {value!r:.40}")
    value = float(value)
    too_low = value <= low if open_low else value < low
    too_high = value >= high if open_high else value > high
    if math.isnan(value) or too_low or too_high:
        interval = f"{'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"
        raise ValueError(f"{owner}: {name} must lie in {interval}, got {value}")
    return value


def _learning_rate(owner: str, learning_rate: Any) -> Any:
    """A schedule (callable) or a non-negative float."""
    return learning_rate if callable(learning_rate) else _hyper(owner, "learning_rate", learning_rate)


def _tag(update: Callable, state_type: type) -> Callable:
    """Record on ``update`` which state class it takes (``chain`` checks states against it)."""
    update.state_kind = state_type
    return update


# --------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------


def _require_params(params: Params, name: str) -> None:
    if params is None:
        raise ValueError(f"{name}: weight decay needs the parameters: call update(grads, state, params)")


def add_decayed_weights(weight_decay: float) -> GradientTransformation:
    """``updates + weight_decay * params`` (L2 decay when placed before the step size).

    >>> opt = optim.add_decayed_weights(0.1)
    >>> updates, _ = opt.update({"w": fnp.zeros(2)}, opt.init({"w": fnp.ones(2)}), {"w": fnp.ones(2)})
    >>> updates["w"]                      # g + 0.1 * p
    Array([0.1, 0.1], dtype=float32)
    """
    weight_decay = _hyper("add_decayed_weights", "weight_decay", weight_decay)

    def init(params: Params) -> EmptyState:
        return EmptyState()

    def update(updates: Updates, state: EmptyState, params: Params = None) -> tuple[Updates, EmptyState]:
        check_state("add_decayed_weights", state, EmptyState)
        if weight_decay == 0.0:
            return updates, state
        _require_params(params, "add_decayed_weights")
        check_trees("add_decayed_weights", "params", params, "grads", updates)
        return tree_map(lambda u, p: u + _cast_like(p * weight_decay, u), updates, params), state

    return GradientTransformation(init, _tag(update, EmptyState))


def trace(decay: float, nesterov: bool = False) -> GradientTransformation:
    """Momentum: ``buf = decay * buf + g``; the update is ``buf`` (or ``g + decay * buf`` with Nesterov).

    Matches PyTorch's SGD (no dampening): the first step's buffer is ``g``.

    >>> opt = optim.trace(decay=0.9)
    >>> state = opt.init({"w": fnp.zeros(2)})
    >>> updates, state = opt.update({"w": fnp.ones(2)}, state)
    >>> updates, state = opt.update({"w": fnp.ones(2)}, state)
    >>> updates["w"]                      # 1 + 0.9 * 1
    Array([1.9, 1.9], dtype=float32)
    """
    decay = _hyper("trace", "decay (momentum)", decay)

    def init(params: Params) -> TraceState:
        return TraceState(zeros_like_tree("trace", params))

    def update(updates: Updates, state: TraceState, params: Params = None) -> tuple[Updates, TraceState]:
        check_state("trace", state, TraceState)
        check_trees("trace", "the momentum buffer", state.trace, "grads", updates)
        new_trace = tree_map(lambda g, t: g + decay * t, updates, state.trace)
        out = tree_map(lambda g, t: g + decay * t, updates, new_trace) if nesterov else new_trace
        return out, TraceState(new_trace)

    return GradientTransformation(init, _tag(update, TraceState))


def scale_by_adam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> GradientTransformation:
    """Adam's direction ``m_hat / (sqrt(v_hat) + eps)`` with bias-corrected moments.

    >>> opt = optim.scale_by_adam()
    >>> updates, state = opt.update({"w": fnp.array([2.0, -2.0])}, opt.init({"w": fnp.zeros(2)}))
    >>> updates["w"]                      # the first step is sign(g)
    Array([ 1.0000, -1.0000], dtype=float32)
    """
    b1 = _hyper("scale_by_adam", "b1", b1, 0.0, 1.0, open_high=True)
    b2 = _hyper("scale_by_adam", "b2", b2, 0.0, 1.0, open_high=True)
    eps = _hyper("scale_by_adam", "eps", eps)

    def init(params: Params) -> ScaleByAdamState:
        return ScaleByAdamState(new_count(), zeros_like_tree("scale_by_adam", params),
                                zeros_like_tree("scale_by_adam", params))

    def update(updates: Updates, state: ScaleByAdamState, params: Params = None):
        check_state("scale_by_adam", state, ScaleByAdamState)
        check_trees("scale_by_adam", "the first moment", state.mu, "grads", updates)
        check_trees("scale_by_adam", "the second moment", state.nu, "grads", updates)
        mu = tree_map(lambda g, m: (1.0 - b1) * g + b1 * m, updates, state.mu)
        nu = tree_map(lambda g, v: (1.0 - b2) * (g * g) + b2 * v, updates, state.nu)
        count = increment(state.count)

        def direction(m: Any, v: Any) -> Any:
            # The correction factors in the moments' own dtype (count is int32), but float32 for bfloat16,
            # where b2 = 0.999 rounds to 1 (as optax: computed in float32, then cast).
            dtype = np.dtype(np.float32) if m.dtype == _dtypes.bfloat16 else m.dtype
            t = count.astype(dtype)
            m_hat = m / (1.0 - fnp.power(b1, t)).astype(m.dtype)
            v_hat = v / (1.0 - fnp.power(b2, t)).astype(m.dtype)
            return m_hat / (fnp.sqrt(v_hat) + eps)

        return tree_map(direction, mu, nu), ScaleByAdamState(count, mu, nu)

    return GradientTransformation(init, _tag(update, ScaleByAdamState))


def scale_by_learning_rate(learning_rate: ScalarOrSchedule) -> GradientTransformation:
    """Multiply by ``-learning_rate`` (a float, or a schedule of the step count kept in the state).

    >>> opt = optim.scale_by_learning_rate(0.1)
    >>> updates, _ = opt.update({"w": fnp.ones(2)}, opt.init({"w": fnp.ones(2)}))
    >>> updates["w"]                      # -0.1 * g
    Array([-0.1, -0.1], dtype=float32)
    """
    if not callable(learning_rate):
        rate = _learning_rate("scale_by_learning_rate", learning_rate)

        def init(params: Params) -> EmptyState:
            return EmptyState()

        def update(updates: Updates, state: EmptyState, params: Params = None):
            check_state("scale_by_learning_rate", state, EmptyState)
            return tree_map(lambda u: u * -rate, updates), state

        return GradientTransformation(init, _tag(update, EmptyState))

    def init_scheduled(params: Params) -> ScaleByScheduleState:
        return ScaleByScheduleState(new_count())

    def update_scheduled(updates: Updates, state: ScaleByScheduleState, params: Params = None):
        check_state("scale_by_learning_rate", state, ScaleByScheduleState)
        # The first update uses schedule(0), as in optax.
        rate = fnp.asarray(learning_rate(state.count))
        if rate.shape != ():
            raise ValueError(f"scale_by_learning_rate: the learning-rate schedule returned {describe(rate)}, "
                             "expected a scalar (a 0-d array or a Python float)")
        return (tree_map(lambda u: u * _cast_like(-rate, u), updates),
                ScaleByScheduleState(increment(state.count)))

    return GradientTransformation(init_scheduled, _tag(update_scheduled, ScaleByScheduleState))


def clip_by_global_norm(max_norm: float) -> GradientTransformation:
    """Rescale all updates together so their global L2 norm is at most ``max_norm``.

    >>> opt = chain(clip_by_global_norm(1.0), sgd(0.1))
    """
    max_norm = _hyper("clip_by_global_norm", "max_norm", max_norm, open_low=True)

    def init(params: Params) -> EmptyState:
        return EmptyState()

    def update(updates: Updates, state: EmptyState, params: Params = None):
        check_state("clip_by_global_norm", state, EmptyState)
        leaves = tree_leaves(updates)
        if not leaves:
            return updates, state
        norm = fnp.sqrt(sum(fnp.sum(fnp.square(x.astype(fnp.float32) if x.dtype.itemsize < 4 else x))
                            for x in leaves))
        # Dividing only where clipping happens keeps a zero gradient at zero.
        scale = fnp.where(norm < max_norm, 1.0, max_norm / fnp.maximum(norm, max_norm))
        return tree_map(lambda u: u * _cast_like(scale, u), updates), state

    return GradientTransformation(init, _tag(update, EmptyState))


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
    learning_rate = _learning_rate("sgd", learning_rate)
    momentum = _hyper("sgd", "momentum", momentum)
    weight_decay = _hyper("sgd", "weight_decay", weight_decay)
    if nesterov and momentum <= 0.0:
        raise ValueError("sgd: nesterov=True needs a positive momentum")
    parts = [add_decayed_weights(weight_decay)]
    if momentum:
        parts.append(trace(momentum, nesterov))
    parts.append(scale_by_learning_rate(learning_rate))
    return chain(*parts, name="sgd")


def adam(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8
         ) -> GradientTransformation:
    """Adam (Kingma & Ba): ``p -= lr * m_hat / (sqrt(v_hat) + eps)``.

    >>> opt = optim.adam(1e-3)
    >>> state = opt.init({"w": fnp.zeros(2)})     # (ScaleByAdamState(count, mu, nu), EmptyState())
    >>> updates, state = opt.update({"w": fnp.array([1.0, -1.0])}, state)
    >>> updates["w"]                              # the first step is -lr * sign(g)
    Array([-0.0010,  0.0010], dtype=float32)
    """
    learning_rate = _learning_rate("adam", learning_rate)
    return chain(scale_by_adam(b1, b2, eps), scale_by_learning_rate(learning_rate), name="adam")


def adamw(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 1e-4) -> GradientTransformation:
    """Adam with decoupled weight decay (Loshchilov & Hutter; optax's and PyTorch's AdamW).

    ``p -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * p)``: the decay
    is not fed through the moments, unlike L2 regularisation.

    >>> opt = adamw(1e-3, weight_decay=1e-2)
    """
    learning_rate = _learning_rate("adamw", learning_rate)
    return chain(scale_by_adam(b1, b2, eps), add_decayed_weights(_hyper("adamw", "weight_decay", weight_decay)),
                 scale_by_learning_rate(learning_rate), name="adamw")
