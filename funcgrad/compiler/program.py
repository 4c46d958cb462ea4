"""The run-time form of a compiled program, with a buffer plan.

Shapes are static inside a jitted program, so the buffers of intermediates
are planned once: a liveness analysis assigns each planned value a buffer,
and values whose lifetimes do not overlap share one.  The buffers persist
across calls (new memory is expensive to touch the first time on these
machines: ~2 us per 4 KiB page), so a steady-state call allocates only its
outputs.  Values handed to the user are never planned buffers (nor views of
them): they stay valid and immutable after the next call.

Only equations that can write into a given buffer take part: fused kernels
and ``matmul`` (``np.matmul(..., out=)``).  Everything else allocates as in
eager mode.

Outputs of such equations are *recycled*: the program keeps each output
buffer it handed out, and reuses it on a later call only when nothing else
refers to it any more (the caller dropped the Array and no view of it
lives) -- in a training loop, yesterday's parameters become today's.
A lock makes one program safe to call from several threads.
"""
from __future__ import annotations

import sys
import threading
from typing import Any, Sequence

import numpy as np

from funcgrad import _core
from funcgrad._config import config
from funcgrad._core import Array, _wrap, check_nans
from funcgrad._ir import Jaxpr, Literal, pretty_print
from funcgrad.compiler.fusion import FusedKernel

# Primitives whose result may be a view of their first input: the buffer
# behind such a result must stay alive as long as the view does.
# Output buffers remembered per output, for reuse once the caller drops them.
_MAX_RECYCLED = 4

_VIEWS = {"reshape", "transpose", "broadcast_to", "getitem", "stop_gradient", "flip"}


def _writes_into_buffers(eqn: Any) -> bool:
    return isinstance(eqn.prim, FusedKernel) or getattr(eqn.prim, "name", "") == "matmul"


class Program:
    """A traced, optimised IR ready to run on numpy buffers."""

    def __init__(self, jaxpr: Jaxpr, plan_memory: bool = True):
        self.jaxpr = jaxpr
        slot: dict[int, int] = {}
        for i, v in enumerate(list(jaxpr.constvars) + list(jaxpr.invars)):
            slot[id(v)] = i
        n = len(slot)
        self.steps = []
        for eqn in jaxpr.eqns:
            ins = [("lit", x.value) if isinstance(x, Literal) else ("var", slot[id(x)]) for x in eqn.inputs]
            outs = []
            for v in eqn.outvars:
                slot[id(v)] = n
                outs.append(n)
                n += 1
            self.steps.append([eqn.prim, ins, eqn.params, outs, None])
        self.outs = [("lit", v.value) if isinstance(v, Literal) else ("var", slot[id(v)]) for v in jaxpr.outvars]
        self.n_slots = n
        self.n_fixed = len(jaxpr.constvars) + len(jaxpr.invars)
        self.consts = [c._value for c in jaxpr.consts]
        self.plan: list[str] = []
        self.buffers: list[np.ndarray | None] = []
        self.recycled: dict[int, list[np.ndarray]] = {}
        self.lock = threading.Lock()
        if plan_memory:
            self._plan(slot)

    # ------------------------------------------------------------ planning

    def _plan(self, slot: dict) -> None:
        """Give planned slots persistent buffers; share them across disjoint lifetimes."""
        eqns = self.jaxpr.eqns
        last_use: dict[int, int] = {}
        for i, (prim, ins, params, outs, _) in enumerate(self.steps):
            for kind, s in ins:
                if kind == "var":
                    last_use[s] = i
        # A view keeps its base's buffer alive (walk backwards so chains propagate).
        base_of: dict[int, int] = {}
        for i, (prim, ins, params, outs, _) in enumerate(self.steps):
            if getattr(prim, "name", "") in _VIEWS and ins and ins[0][0] == "var":
                base_of[outs[0]] = base_of.get(ins[0][1], ins[0][1])
        for view, base in base_of.items():
            last_use[base] = max(last_use.get(base, -1), last_use.get(view, -1))
        escaping = {s for kind, s in self.outs if kind == "var"}
        escaping |= {base_of[s] for s in list(escaping) if s in base_of}

        free: dict[tuple, list[int]] = {}     # (shape, dtype) -> buffer ids free for reuse
        releases: dict[int, list[tuple]] = {}  # step -> buffers that die after it
        for i, (eqn, step) in enumerate(zip(eqns, self.steps)):
            if _writes_into_buffers(eqn):
                chosen = []
                for v, s in zip(eqn.outvars, step[3]):
                    if s in escaping:   # handed to the caller: a recycled output buffer
                        chosen.append(("out", s))
                        self.plan.append(f"{v.aval.str_short()} -> output (recycled once the caller drops it)")
                        continue
                    key = (v.aval.shape, v.aval.dtype)
                    pool = free.get(key)
                    buf = pool.pop() if pool else len(self.buffers)
                    if buf == len(self.buffers):
                        self.buffers.append(None)   # allocated on first use, reused after
                    chosen.append(("buf", buf))
                    releases.setdefault(last_use.get(s, i), []).append((key, buf))
                    self.plan.append(f"{v.aval.str_short()} -> buffer {buf}")
                step[4] = chosen
            for key, buf in releases.pop(i, []):
                free.setdefault(key, []).append(buf)

    def _buffer(self, index: int, aval: Any) -> np.ndarray:
        buf = self.buffers[index]
        if buf is None:
            buf = self.buffers[index] = np.empty(aval.shape, aval.dtype)
        return buf

    def _output(self, slot: int, aval: Any) -> np.ndarray:
        pool = self.recycled.setdefault(slot, [])
        for buf in pool:
            # References: the pool's list, ``buf`` and getrefcount's argument. Any
            # more (the caller's Array, a view's base) and the buffer is in use.
            if sys.getrefcount(buf) == 3:
                buf.flags.writeable = True   # ours again: it owns its memory and nothing sees it
                return buf
        buf = np.empty(aval.shape, aval.dtype)
        pool.append(buf)
        if len(pool) > _MAX_RECYCLED:   # callers keeping many results: stop tracking the oldest
            pool.pop(0)
        return buf

    def _target(self, kind: str, index: int, aval: Any) -> np.ndarray:
        return self._buffer(index, aval) if kind == "buf" else self._output(index, aval)

    # -------------------------------------------------------------- running

    def run(self, args: Sequence[np.ndarray]) -> list[Array]:
        with self.lock:   # planned and recycled buffers belong to one call at a time
            return self._run(args)

    def _run(self, args: Sequence[np.ndarray]) -> list[Array]:
        env: list[Any] = [None] * self.n_slots
        env[:len(self.consts)] = self.consts
        env[len(self.consts):self.n_fixed] = args
        debug = config.debug_nans
        for (prim, ins, params, outs, buffers), eqn in zip(self.steps, self.jaxpr.eqns):
            values = [env[i] if kind == "var" else i for kind, i in ins]
            if buffers is not None:
                targets = [self._target(kind, b, v.aval) for (kind, b), v in zip(buffers, eqn.outvars)]
                if isinstance(prim, FusedKernel):
                    results = prim.impl(*values, out=targets)
                else:
                    results = [np.matmul(*values, out=targets[0])]
            else:
                out = prim.impl(*values, **params)
                results = list(out) if prim.multiple_results else [out]
                results = [r if type(r) is np.ndarray and (r.dtype.itemsize != 8 or config.enable_x64)
                           else _wrap(r)._value for r in results]
            if debug:
                check_nans(prim, values, [Array(r) for r in results], eqn.source)
            for i, r in zip(outs, results):
                env[i] = r
        return [_wrap(env[i]) if kind == "var" else _core.as_array(i) for kind, i in self.outs]

    def __repr__(self) -> str:
        text = pretty_print(self.jaxpr)
        if self.plan:
            text += "\nbuffer plan (reused across calls):\n  " + "\n  ".join(self.plan)
        return text
