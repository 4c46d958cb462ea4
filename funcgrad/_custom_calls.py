"""custom_vjp and custom_jvp calls (the primitive-like operations behind funcgrad.custom_vjp/custom_jvp),
and checkpointed calls: each goes to the trace of its innermost tracer, or runs as plain Python.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from funcgrad._tracer import Tracer, _leak_error


class CustomVJPCall:
    """A function with a user-supplied reverse-mode rule, on flat arguments.

    ``fun(*xs) -> outs``, ``fwd(*xs) -> (outs, residuals)``,
    ``bwd(residuals, cts) -> input cts`` (all flat lists).
    """

    __slots__ = ("name", "fun", "fwd", "bwd")

    def __init__(self, name: str, fun: Callable, fwd: Callable, bwd: Callable):
        self.name, self.fun, self.fwd, self.bwd = name, fun, fwd, bwd

    def bind(self, *args: Any) -> list:
        top = _top_tracer(args)
        if top is None:
            return list(self.fun(*args))
        trace = top._trace
        return trace.process_custom_vjp(self, [trace.full_raise(a) for a in args])


class CustomJVPCall:
    """A function with a user-supplied forward-mode rule, on flat arguments.

    ``fun(*xs) -> outs``; ``jvp(primals, tangents) -> (outs, tangent_outs)``
    (all flat lists; every tangent an array, zeros where the input's is zero).
    """

    __slots__ = ("name", "fun", "jvp")

    def __init__(self, name: str, fun: Callable, jvp: Callable):
        self.name, self.fun, self.jvp = name, fun, jvp

    def bind(self, *args: Any) -> list:
        top = _top_tracer(args)
        if top is None:
            return list(self.fun(*args))
        trace = top._trace
        return trace.process_custom_jvp(self, [trace.full_raise(a) for a in args])


def bind_checkpoint(fun: Callable, args: Sequence[Any]) -> list:
    """Apply a rematerialised (checkpointed) function of flat arguments."""
    top = _top_tracer(args)
    if top is None:
        return list(fun(*args))
    trace = top._trace
    return list(trace.process_checkpoint(fun, [trace.full_raise(a) for a in args]))


def _top_tracer(args: Sequence[Any]) -> Tracer | None:
    top = None
    for a in args:
        if isinstance(a, Tracer) and (top is None or a._trace.main.level > top._trace.main.level):
            top = a
    if top is not None and not top._trace.main.alive:
        raise _leak_error(top)
    return top
