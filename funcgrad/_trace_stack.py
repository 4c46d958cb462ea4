"""The trace stack: each active transform's :class:`MainTrace`, the :class:`Trace` base class of
the interpreters, the per-thread transform state, and the registry of flat transforms.

Transforms nest by levels, as in JAX's Autodidax: each active transform owns a
:class:`MainTrace` on this thread's stack, and a tracer belongs to exactly one
of them.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

from funcgrad._custom_calls import CustomJVPCall, CustomVJPCall
from funcgrad._primitive import Primitive
from funcgrad._tracer import Tracer, TracerLeakError, _leak_error

# --------------------------------------------------------------------------
# The trace stack
# --------------------------------------------------------------------------


class MainTrace:
    """One active transform: its level on the stack, its trace type, its data."""

    __slots__ = ("level", "trace_type", "data", "alive")

    def __init__(self, level: int, trace_type: type, data: Any):
        self.level = level
        self.trace_type = trace_type
        self.data = data
        self.alive = True


class Trace:
    """How one transform interprets primitives applied to its tracers."""

    __slots__ = ("main",)

    def __init__(self, main: MainTrace):
        self.main = main

    def pure(self, value: Any) -> "Tracer":
        raise NotImplementedError

    lift = pure

    def full_raise(self, value: Any) -> "Tracer":
        if not isinstance(value, Tracer):
            return self.pure(value)
        level = value._trace.main.level
        if value._trace.main is self.main:
            return value
        if level < self.main.level:
            return self.lift(value)
        if not value._trace.main.alive:
            raise _leak_error(value)
        raise TracerLeakError(
            f"a tracer of a transform at level {level} reached the transform at level {self.main.level}; "
            "this usually means a tracer escaped through a global or a closure")

    def process_primitive(self, prim: Primitive, args: Sequence[Any], params: dict) -> Any:
        """Apply ``prim`` to ``args`` (this trace's tracers, lower-level values, constants)."""
        raise NotImplementedError

    def process_custom_vjp(self, call: "CustomVJPCall", tracers: list) -> list:
        raise NotImplementedError

    def process_custom_jvp(self, call: "CustomJVPCall", tracers: list) -> list:
        # A transform without a rule of its own for it (none: the function itself).
        return list(call.fun(*tracers))

    def process_checkpoint(self, fun: Callable, tracers: list) -> list:
        # Outside reverse mode, checkpoint is the function itself.
        return fun(*tracers)


_TRANSFORMS: dict[str, Callable[..., Any]] = {}


def register_transform(name: str, fun: Callable[..., Any]) -> None:
    """Make a flat transform (``"jvp"``: ``jvp_flat``, ``"vjp"``: ``vjp_flat``) reachable from rules.

    A primitive whose derivative is that of a composite function (see
    ``primitives/_nn_rules.py``) differentiates it through here: the
    interpreters register themselves, so the primitives never import them.
    """
    _TRANSFORMS[name] = fun


def transform(name: str) -> Callable[..., Any]:
    """The flat transform registered as ``name`` (see :func:`register_transform`)."""
    return _TRANSFORMS[name]


class _ThreadState(threading.local):
    """The transform state of one Python thread.

    Transforms running in different threads must not see each other: a
    tracer's level is its transform's depth in *this thread's* stack, and a
    shared stack let one thread's push/pop renumber another's nested grads
    (silently wrong derivatives).  ``threading.local`` costs one attribute
    lookup per push/pop; eager ``bind`` never reads it.
    """

    def __init__(self) -> None:
        self.trace_stack: list[MainTrace] = []   # active transforms, innermost last
        self.backward_context: list = []         # record nodes whose vjp rule runs (debug_nans)


_thread_state = _ThreadState()


def push_main(trace_type: type, data: Any = None) -> MainTrace:
    """Push a transform onto this thread's stack; pair with :func:`pop_main` in a ``finally``."""
    stack = _thread_state.trace_stack
    main = MainTrace(len(stack) + 1, trace_type, data)
    stack.append(main)
    return main


def pop_main(main: MainTrace) -> None:
    """End a transform: its tracers count as leaked from now on."""
    main.alive = False
    _thread_state.trace_stack.pop()


def trace_stack() -> list[MainTrace]:
    """This thread's active transforms, innermost last (read-only use)."""
    return _thread_state.trace_stack


class new_main:
    """Push a transform onto the stack for the duration of a ``with`` block.

    (A class rather than a generator-based context manager: it is entered on
    every vmap/jvp call; grad's hot path uses push_main/pop_main directly.)
    """

    __slots__ = ("main",)

    def __init__(self, trace_type: type, data: Any = None):
        self.main = push_main(trace_type, data)

    def __enter__(self) -> MainTrace:
        return self.main

    def __exit__(self, *exc: Any) -> None:
        pop_main(self.main)
