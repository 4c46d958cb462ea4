"""``debug_callback``: call a Python function on runtime values, for ``fg.debug.print`` / ``callback``.

``debug_callback_p(*values, callback)`` calls ``callback.fn(*numpy values)`` when it runs and
returns a dummy int32 scalar. It has the ``effect`` trait, so the IR passes keep it although
nothing reads its result (and never evaluate it at trace time): under ``jit`` it runs on every
call with that call's values. It has no derivative rules (it is invisible to grad: the primal
values are printed); under ``vmap`` the callback runs once per batch element, as JAX's.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from funcgrad._core import Primitive, add_traits
from funcgrad._dtypes import ShapedArray
from funcgrad.primitives.indexing import getitem

__all__ = ["debug_callback_p", "Callback", "debug_callback"]


class Callback:
    """A hashable (by identity) holder for the Python function, so it can be a primitive parameter."""

    __slots__ = ("fn", "name")

    def __init__(self, fn: Callable, name: str = "callback"):
        self.fn, self.name = fn, name

    def __repr__(self) -> str:
        return self.name


debug_callback_p = Primitive("debug_callback")


def _impl(*values: Any, callback: Callback) -> np.ndarray:
    callback.fn(*[np.asarray(v) for v in values])
    return np.zeros((), np.int32)


def _batch(values, dims, size, callback):
    for i in range(size):
        debug_callback_p.bind(*[v if d is None else getitem(v, (slice(None),) * d + (i,))
                                for v, d in zip(values, dims)], callback=callback)
    return np.zeros((), np.int32), None


debug_callback_p.impl = _impl
debug_callback_p.abstract_eval = lambda *values, callback: ShapedArray((), np.dtype(np.int32))
debug_callback_p.batch = _batch
add_traits(debug_callback_p, "effect")


def debug_callback(fn: Callable, values: list, name: str = "callback") -> None:
    """Run ``fn(*numpy values)`` when the program runs (now, eagerly; at each call, under jit)."""
    debug_callback_p.bind(*values, callback=Callback(fn, name))
