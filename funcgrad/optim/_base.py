"""The optimizer interface: a pair of pure functions, and how to combine them.

An optimizer (a *gradient transformation*) never mutates anything: ``init``
builds a state from the parameters, ``update`` maps gradients and a state to
updates and a *new* state.  States are NamedTuples of pytrees of arrays, so
they are pytrees themselves: they pass through ``jit``, ``vmap`` and
checkpoints like parameters do.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

import funcgrad.numpy as fnp
from funcgrad._core import Array, Tracer
from funcgrad.primitives.elementwise import convert
from funcgrad.tree_util import tree_map

PyTree = Any
Params = PyTree
Updates = PyTree
OptState = Any


class GradientTransformation(NamedTuple):
    """``init(params) -> state``; ``update(grads, state, params=None) -> (updates, new_state)``.

    >>> opt = sgd(0.1)
    >>> state = opt.init(params)                       # any pytree of arrays
    >>> updates, state = opt.update(grads, state, params)
    >>> params = apply_updates(params, updates)        # params + updates
    """

    init: Callable[[Params], OptState]
    update: Callable[..., tuple[Updates, OptState]]


class EmptyState(NamedTuple):
    """The state of a transformation that keeps none."""


def apply_updates(params: Params, updates: Updates) -> Params:
    """``params + updates`` leaf by leaf, keeping each parameter's dtype.

    >>> apply_updates({"w": fnp.ones(2)}, {"w": fnp.full(2, -0.5)})["w"]
    Array([0.5, 0.5], dtype=float32)
    """
    return tree_map(lambda p, u: _cast_like(fnp.add(p, u), p), params, updates)


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """Apply ``transforms`` one after another; the state is the tuple of their states.

    >>> opt = chain(clip_by_global_norm(1.0), adam(1e-3))
    """
    transforms = tuple(transforms)

    def init(params: Params) -> tuple:
        return tuple(t.init(params) for t in transforms)

    def update(updates: Updates, state: tuple, params: Params = None) -> tuple[Updates, tuple]:
        if len(state) != len(transforms):
            raise ValueError(f"chain: expected a state of {len(transforms)} parts (one per transformation), "
                             f"got {len(state)}")
        new_state = []
        for t, s in zip(transforms, state):
            updates, s = t.update(updates, s, params)
            new_state.append(s)
        return updates, tuple(new_state)

    return GradientTransformation(init, update)


# --------------------------------------------------------------------------
# Helpers shared by the transformations
# --------------------------------------------------------------------------


def _cast_like(x: Any, like: Any) -> Any:
    """``x`` in the dtype of ``like`` (so a float32 step size never widens float16 params)."""
    dtype = like.dtype if isinstance(like, (Array, Tracer, np.ndarray)) else None
    return convert(x, dtype) if dtype is not None and x.dtype != dtype else x


def zeros_like_tree(tree: PyTree) -> PyTree:
    return tree_map(lambda x: fnp.zeros_like(fnp.asarray(x)), tree)


_INT32_MAX = np.iinfo(np.int32).max


def new_count() -> Array:
    """The step counter every stateful transformation keeps: an int32 0-d array."""
    return fnp.zeros((), np.int32)


def increment(count: Any) -> Any:
    # Saturate instead of wrapping to a negative step after 2**31 - 1 steps.
    return fnp.where(count < _INT32_MAX, count + 1, count)
