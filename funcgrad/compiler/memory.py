"""How much memory a compiled program needs, read off its buffer plan before it runs.

``Jitted.lower(*args).memory_analysis()`` answers what JAX's
``jit(f).lower(*args).compile().memory_analysis()`` answers: the bytes of
the arguments, the outputs, and the temporaries a call needs, and their sum
at the busiest moment of a call.  It walks the program's equations in order
with the liveness of every value:

* planned buffers (intermediates written by fused kernels and ``matmul``)
  are allocated once and kept between calls: they count for the whole call;
* every other intermediate is allocated by its primitive and freed after its
  last use; outputs live from the step that makes them to the end;
* a view (``"view"`` trait: reshape, transpose, slices) shares its input's
  memory and counts nothing.

What it does not see: scratch memory inside one primitive (a convolution's
im2col columns, a sort's workspace, the carries a loop keeps for its
backward pass), which lives only while that primitive runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from funcgrad._ir import Literal


def _nbytes(aval: Any) -> int:
    return int(np.prod(aval.shape, dtype=np.int64)) * np.dtype(aval.dtype).itemsize


def _fmt(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


@dataclass(frozen=True)
class MemoryAnalysis:
    """The memory of one call of a compiled program, in bytes (see :mod:`funcgrad.compiler.memory`).

    * ``argument_bytes``: the arguments' buffers (the caller's);
    * ``constant_bytes``: arrays the program holds (values the function closed over);
    * ``output_bytes``: the results (new buffers, or recycled ones the caller dropped);
    * ``planned_bytes``: intermediates' buffers kept between calls (the buffer plan);
    * ``temp_bytes``: the most intermediate bytes alive at once during a call, planned buffers included;
    * ``peak_bytes``: arguments, constants, intermediates and the outputs made so far, at the busiest step.
    """

    argument_bytes: int
    constant_bytes: int
    output_bytes: int
    planned_bytes: int
    temp_bytes: int
    peak_bytes: int

    def __str__(self) -> str:
        rows = [("arguments", self.argument_bytes), ("constants", self.constant_bytes),
                ("outputs", self.output_bytes), ("planned buffers (kept between calls)", self.planned_bytes),
                ("temporaries at their peak (planned included)", self.temp_bytes),
                ("peak of a call", self.peak_bytes)]
        return "\n".join(f"{name:<46} {_fmt(n):>12}" for name, n in rows)


def analyze(program: Any) -> MemoryAnalysis:
    """The :class:`MemoryAnalysis` of a :class:`funcgrad.compiler.program.Program`."""
    jaxpr = program.jaxpr
    eqns = jaxpr.eqns
    outputs = {id(v) for v in jaxpr.outvars if not isinstance(v, Literal)}
    fixed = {id(v) for v in list(jaxpr.constvars) + list(jaxpr.invars)}
    last_use: dict[int, int] = {}
    base: dict[int, int] = {}   # a view -> the value whose memory it shares
    for i, eqn in enumerate(eqns):
        for x in eqn.inputs:
            if not isinstance(x, Literal):
                last_use[base.get(id(x), id(x))] = i
                last_use[id(x)] = i
        if "view" in eqn.prim.traits and eqn.inputs and not isinstance(eqn.inputs[0], Literal):
            root = base.get(id(eqn.inputs[0]), id(eqn.inputs[0]))
            base[id(eqn.outvars[0])] = root
    for v in jaxpr.outvars:   # an output that is a view keeps its base to the end
        if not isinstance(v, Literal) and id(v) in base:
            outputs.add(base[id(v)])

    planned: dict[int, int] = {}   # planned buffer index -> its bytes
    allocated: list[tuple[int, int, int]] = []   # (first step, last step, bytes) of memory primitives allocate
    output_bytes = 0
    n = len(eqns)
    for i, (eqn, step) in enumerate(zip(eqns, program.steps)):
        chosen = step[4]
        for k, v in enumerate(eqn.outvars):
            size = _nbytes(v.aval)
            if id(v) in outputs:
                output_bytes += size
            if chosen is not None and chosen[k][0] == "buf":
                planned[chosen[k][1]] = max(planned.get(chosen[k][1], 0), size)
                continue
            if id(v) in base:   # a view: its base's memory
                continue
            end = n if id(v) in outputs else last_use.get(id(v), i)
            allocated.append((i, end, size))
    for v in jaxpr.outvars:   # an argument or constant returned as it is is copied out
        if not isinstance(v, Literal) and id(v) in fixed:
            output_bytes += _nbytes(v.aval)

    live = [0] * (n + 1)
    for start, end, size in allocated:
        for i in range(start, min(end, n) + 1):
            live[i] += size
    out_live = [0] * (n + 1)   # output bytes alive at each step (they are part of ``live`` already)
    for start, end, size in allocated:
        if end == n:
            for i in range(start, n + 1):
                out_live[i] += size
    planned_bytes = sum(planned.values())
    temp = planned_bytes + max((a - o for a, o in zip(live, out_live)), default=0)
    args = sum(_nbytes(v.aval) for v in jaxpr.invars)
    consts = sum(int(getattr(c, "nbytes", 0)) for c in program.consts)
    peak = args + consts + planned_bytes + max(live, default=0)
    return MemoryAnalysis(args, consts, output_bytes, planned_bytes, temp, peak)
