"""The order a compiled program runs its equations in: fewer intermediate bytes alive at once.

A traced training step comes out of autodiff in an order that keeps more
alive than it needs: each weight's update runs at the end, so every layer's
activation waits for it, although its product could run as soon as the
layer's cotangent is known.  :func:`schedule` (a pass of the CPU compiler,
after fusion, before the buffer plan) reorders the equations, as XLA's
memory-minimising scheduler does: of the equations whose inputs are ready,
it runs next the one that frees the most bytes for the fewest it allocates
(ties: the earlier one in the traced order).  Any order of a program's
equations that keeps each after its inputs gives the same results.  A
program with effects (``"effect"`` trait: prints, callbacks, collectives,
whose start/done pairs overlap communication with the work placed between
them; also inside a loop body or a branch) keeps its traced order.

Counted: intermediates only (the program's outputs live to the end anyway,
arguments are the caller's); a view (``"view"`` trait) shares its input's
memory, which lives until every use of the view is done too.
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from funcgrad._ir import Jaxpr, Var, has_effect

# Programs longer than this keep their order.
MAX_EQUATIONS = 20000


def _nbytes(v: Var) -> int:
    return math.prod(v.aval.shape) * np.dtype(v.aval.dtype).itemsize


def schedule(jaxpr: Jaxpr) -> Jaxpr:
    """``jaxpr`` with its equations reordered to keep fewer intermediate bytes alive at once."""
    eqns = jaxpr.eqns
    n = len(eqns)
    if n < 3 or n > MAX_EQUATIONS or any(has_effect(eqn) for eqn in eqns):
        return jaxpr
    producer: dict[int, int] = {}
    for i, eqn in enumerate(eqns):
        for v in eqn.outvars:
            producer[id(v)] = i
    root: dict[int, int] = {}          # a view's variable -> the variable whose memory it is
    size: dict[int, int] = {}          # an intermediate's bytes (0: an output's, a view's)
    outputs = {id(v) for v in jaxpr.outvars if isinstance(v, Var)}
    for eqn in eqns:
        is_view = "view" in eqn.prim.traits and eqn.inputs and isinstance(eqn.inputs[0], Var) \
            and id(eqn.inputs[0]) in producer
        for v in eqn.outvars:
            if is_view:
                root[id(v)] = root.get(id(eqn.inputs[0]), id(eqn.inputs[0]))
            size[id(v)] = 0 if is_view else _nbytes(v)
    for v in list(outputs):
        outputs.add(root.get(v, v))
    for v in outputs:
        size[v] = 0

    deps: list[set[int]] = []
    reads: list[set[int]] = []         # per equation: the memory (roots) it reads, views aside
    remaining: dict[int, int] = {}     # root -> equations still to run that read it
    for i, eqn in enumerate(eqns):
        deps.append({producer[id(x)] for x in eqn.inputs if isinstance(x, Var) and id(x) in producer})
        is_view = bool(eqn.outvars) and id(eqn.outvars[0]) in root
        r = set() if is_view else {root.get(id(x), id(x)) for x in eqn.inputs
                                   if isinstance(x, Var) and id(x) in producer}
        reads.append(r)
        for m in r:
            remaining[m] = remaining.get(m, 0) + 1
    users: list[list[int]] = [[] for _ in range(n)]
    waiting = [len(d) for d in deps]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    readers: dict[int, list[int]] = {}
    for i, r in enumerate(reads):
        for m in r:
            readers.setdefault(m, []).append(i)

    def gain(i: int) -> int:
        freed = sum(size.get(m, 0) for m in reads[i] if remaining[m] == 1)
        return freed - sum(size[id(v)] for v in eqns[i].outvars)

    # The ready equations in a heap by (-gain, position); a gain that grows (an equation
    # becomes the last reader of some memory) is pushed again, the stale entry skipped.
    current: dict[int, int] = {}
    heap: list[tuple[int, int]] = []

    def push(i: int) -> None:
        current[i] = gain(i)
        heapq.heappush(heap, (-current[i], i))

    for i in range(n):
        if waiting[i] == 0:
            push(i)
    done = [False] * n
    order: list[int] = []
    while heap:
        g, best = heapq.heappop(heap)
        if done[best] or -g != current[best]:
            continue
        done[best] = True
        order.append(best)
        for m in reads[best]:
            remaining[m] -= 1
            if remaining[m] == 1:   # its last reader, if ready, now frees it
                last = next(i for i in readers[m] if not done[i])
                if waiting[last] == 0:
                    push(last)
        for u in users[best]:
            waiting[u] -= 1
            if waiting[u] == 0:
                push(u)
    if order == list(range(n)):
        return jaxpr
    return Jaxpr(jaxpr.constvars, jaxpr.consts, jaxpr.invars, [eqns[i] for i in order], jaxpr.outvars)
