"""ZeRO stage 1: the optimizer state sharded across processes.

The parameters of each dtype are flattened into one vector, padded to a multiple of the process
count and cut into equal shards; process ``r`` keeps the optimizer state of shard ``r`` only. A
step reduce-scatters the gradients (``psum_scatter``: each process receives the sum of its shard),
updates its shard of the parameters, and all-gathers the shards back into full parameters
(``all_gather``). The optimizer state per
process shrinks by the process count; the parameters and gradients stay whole.

Only elementwise optimizers (each entry's update depends on that entry alone: sgd, momentum,
adam, adamw, weight decay, schedules) give the same steps on shards as on the whole;
``Zero1`` checks this on a probe vector and refuses the others (``clip_by_global_norm``).
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

import funcgrad.numpy as fnp
from funcgrad.distributed import _runtime
from funcgrad.distributed._buckets import flatten, plan_buckets, unflatten
from funcgrad.optim import GradientTransformation, apply_updates
from funcgrad.distributed._collectives import all_gather, psum_scatter
from funcgrad.tree_util import tree_flatten, tree_leaves, tree_unflatten

__all__ = ["Zero1", "check_elementwise"]


class _Group(NamedTuple):
    indices: tuple   # leaves of one dtype
    size: int        # their flattened size
    shard: int       # the shard length (size padded to a multiple of the process count, divided by it)


def check_elementwise(optimizer: GradientTransformation, owner: str = "zero") -> None:
    """Raise unless ``optimizer`` updates each entry from that entry alone (two steps on a probe vector
    equal the steps on its two halves).

    >>> check_elementwise(optim.adam(1e-3))       # passes
    >>> check_elementwise(optim.chain(optim.clip_by_global_norm(1.0), optim.sgd(0.1)))
    Traceback (most recent call last):
    ValueError: zero: ZeRO-1 updates each process's shard of the parameters on its own, ... an elementwise optimizer
    """
    p = np.linspace(-1.0, 1.0, 8).astype(np.float32)
    # Magnitudes from 1e-3 to 6e14, so that a global-norm clip with any sensible threshold clips.
    g = np.array([3e14, -2.0, 5e-3, 7e1, -1e-2, 4e2, 9.0, -6e14], np.float32)

    def two_steps(params: np.ndarray, grads: np.ndarray) -> np.ndarray:
        x = [fnp.asarray(params)]
        state = optimizer.init(x)
        out = []
        for k in (1.0, -0.5):
            updates, state = optimizer.update([fnp.asarray(grads * k)], state, x)
            x = apply_updates(x, updates)
            out.append(np.asarray(updates[0]))
        return np.concatenate(out)

    whole = two_steps(p, g).reshape(2, 8)
    halves = np.concatenate([two_steps(p[:4], g[:4]).reshape(2, 4), two_steps(p[4:], g[4:]).reshape(2, 4)], axis=1)
    if not np.allclose(whole, halves, rtol=1e-4, atol=1e-6):
        raise ValueError(f"{owner}: ZeRO-1 updates each process's shard of the parameters on its own, which gives "
                         "the optimizer's steps only when the update of every entry depends on that entry alone "
                         "(sgd, momentum, adam, adamw, weight decay); this optimizer's update of a vector differs "
                         "from the updates of its halves (clip_by_global_norm, for one, needs the norm of all "
                         "the gradients). Use zero=False, or an elementwise optimizer")


class Zero1:
    """The sharded optimizer of ``data_parallel(..., zero=True)``: ``init`` and ``update``."""

    def __init__(self, optimizer: GradientTransformation):
        check_elementwise(optimizer)
        self.optimizer = optimizer
        self.groups: list[_Group] = []

    def init(self, params: Any) -> Any:
        """This process's shard of the optimizer state: ``optimizer.init`` of a list of 1-D shards (one per dtype)."""
        leaves = tree_leaves(params)
        count = _runtime.process_count()
        self.groups = []
        for b in plan_buckets(leaves, math.inf, owner="zero"):
            indices = tuple(sorted(b.indices))
            size = sum(int(np.prod(np.shape(leaves[i]))) for i in indices)
            self.groups.append(_Group(indices, size, -(-size // count)))
        return self.optimizer.init(self._my_shards(leaves))

    def _padded(self, group: _Group, leaves: list, scale: float = 1.0) -> Any:
        flat = flatten([leaves[i] for i in group.indices])
        if scale != 1.0:
            flat = flat * scale
        pad = group.shard * _runtime.process_count() - group.size
        return fnp.concatenate([flat, fnp.zeros(pad, flat.dtype)]) if pad else flat

    def _my_shards(self, leaves: list) -> list:
        start = _runtime.process_index()
        return [self._padded(g, leaves)[start * g.shard:(start + 1) * g.shard] for g in self.groups]

    def update(self, grads: Any, state: Any, params: Any, weight: float) -> tuple[Any, Any]:
        """``(new params, new state)`` from this process's gradients of the mean loss over its rows (each
        weighted by ``weight``, its share of the global batch, then summed across processes)."""
        if not self.groups:
            raise ValueError("zero: call init(params) before update")
        leaves, treedef = tree_flatten(params)
        g_leaves = tree_leaves(grads)
        shard_grads = [psum_scatter(self._padded(g, g_leaves, weight), tiled=True) for g in self.groups]
        shard_params = self._my_shards(leaves)
        updates, state = self.optimizer.update(shard_grads, state, shard_params)
        new_shards = apply_updates(shard_params, updates)
        new = list(leaves)
        for g, shard in zip(self.groups, new_shards):
            full = all_gather(shard, tiled=True)
            for i, x in zip(g.indices, unflatten(full, [leaves[i] for i in g.indices])):
                new[i] = x
        return tree_unflatten(treedef, new), state
