"""``fg.debug``: print and inspect runtime values from inside transformed functions (``jax.debug``).

>>> @fg.jit
... def f(x):
...     fg.debug.print("x = {x}, sum = {}", fnp.sum(x), x=x)   # printed on every call, with its values
...     return x * 2
"""
from __future__ import annotations

import builtins
from typing import Any, Callable

import numpy as np

from funcgrad import _core
from funcgrad._core import Array, Tracer, trace_stack
from funcgrad.interpreters.tracing import JaxprTrace
from funcgrad.primitives.debug import debug_callback
from funcgrad.tree_util import tree_flatten, tree_unflatten

__all__ = ["print", "callback", "breakpoint"]


def _is_array_leaf(x: Any) -> bool:
    return isinstance(x, (Array, Tracer, np.ndarray, np.generic))


def callback(callback: Callable, *args: Any, ordered: bool = False, partitioned: bool = False,
             **kwargs: Any) -> None:
    """Call ``callback(*args, **kwargs)`` with the arrays' runtime values (numpy arrays), eagerly, under
    ``jit`` (each call) and ``vmap`` (once per element); it returns nothing.

    >>> history = []
    >>> fg.debug.callback(lambda v: history.append(v), fnp.ones(2))
    >>> history
    [array([1., 1.], dtype=float32)]
    """
    leaves, tree = tree_flatten((args, kwargs))
    where = [i for i, x in enumerate(leaves) if _is_array_leaf(x)]
    arrays = [x if isinstance(x, (Array, Tracer)) else _core.as_array(x) for x in (leaves[i] for i in where)]

    if not any(isinstance(a, Tracer) for a in arrays):
        # Concrete values only (a constant, or nothing) inside jit: stage the call anyway, so that
        # it runs at each call of the compiled function, not once while it is traced.
        staging = [m for m in trace_stack() if issubclass(m.trace_type, JaxprTrace)]
        if staging:
            trace = staging[-1].trace_type(staging[-1])
            arrays = [trace.full_raise(a) for a in arrays + [_core.as_array(np.int32(0))]]

    def run(*values: Any) -> None:
        values = values[:len(where)]
        full = list(leaves)
        for i, v in zip(where, values):
            full[i] = v
        a, kw = tree_unflatten(tree, full)
        callback(*a, **kw)

    debug_callback(run, arrays, getattr(callback, "__name__", "callback"))


def print(fmt: str, *args: Any, ordered: bool = False, partitioned: bool = False, skip_format_check: bool = False,
          **kwargs: Any) -> None:   # noqa: A001 (JAX's name)
    """Print ``fmt.format(*args, **kwargs)`` with the arrays' runtime values, as ``jax.debug.print``.

    Works eagerly, under ``jit`` (printed at each call with that call's values, not when
    tracing), under ``vmap`` (once per batch element) and under ``grad`` (the primal values).

    >>> fg.debug.print("loss={l:.3f} w={}", fnp.ones(2), l=fnp.asarray(0.5))
    loss=0.500 w=[1. 1.]
    """
    if not isinstance(fmt, str):
        raise TypeError(f"debug.print: the first argument must be a format string, got {type(fmt).__name__}")

    def show(*a: Any, **kw: Any) -> None:
        builtins.print(fmt.format(*a, **kw))

    callback(show, *args, **kwargs)


def breakpoint(*args: Any, **kwargs: Any) -> None:   # noqa: A001
    """Not supported: run the function eagerly (``with fg.disable_jit():``) and use Python's ``breakpoint()``.

    >>> def f(x):
    ...     fg.debug.breakpoint()        # opens pdb here (under jit: at each call) with x's value
    ...     return x * 2
    """
    raise NotImplementedError("debug.breakpoint is not supported; run eagerly under fg.disable_jit() and use "
                              "Python's breakpoint() (funcgrad evaluates concrete values eagerly)")
