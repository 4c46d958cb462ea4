"""Checks deferred to the next host synchronisation, and their capture into CUDA graphs.

A GPU implementation that must refuse bad data it cannot see without waiting for the device (labels out of
range) computes a flag on the device and defers the check. While a CUDA graph is captured
(:mod:`funcgrad.backends.gpu.graphs`) a flag holds no value yet: the checks deferred inside
:func:`collect_deferred_checks` are collected instead, and the graph re-arms them at every replay.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

__all__ = ["capture_scopes", "collect_deferred_checks", "defer_check", "pending"]

# One list per capture in progress (innermost last): where checks deferred during a capture go.
capture_scopes: list[list] = []
# The checks waiting for the next host synchronisation: key -> (flag, make_error) (see gpu/array.py).
pending: dict[Any, tuple[Any, Callable[[], Exception]]] = {}
# ``defer_check(flag, make_error, key=None)``: installed by funcgrad.backends.gpu.array (which owns the queue
# and reads it); here so that modules the array module imports can defer checks too.
defer_check: Callable[..., None]


@contextlib.contextmanager
def collect_deferred_checks() -> Iterator[list]:
    """Within the block, checks deferred on the GPU are collected into the yielded list (as
    ``(flag, make_error)`` pairs) instead of being queued.

    >>> with collect_deferred_checks() as checks:
    ...     capture_scopes[-1].append(("flag", "error"))
    >>> checks
    [('flag', 'error')]
    """
    scope: list = []
    capture_scopes.append(scope)
    try:
        yield scope
    finally:
        capture_scopes.remove(scope)
