"""debug_nans: the check that a primitive made no NaN, and the error that points at the user's line
(in a backward pass, at the forward operation whose derivative made it).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._array import Array
from funcgrad._dtypes import describe
from funcgrad._primitive import Primitive
from funcgrad._trace_stack import _thread_state
from funcgrad._tracer import user_source_line


def backward_context() -> list:
    """This thread's record nodes whose vjp rules are running, innermost last.

    While a reverse-mode transform walks its record backwards, it names here
    the forward operation whose vjp rule is running, so a NaN raised inside a
    derivative can point at the user's line that created it.
    """
    return _thread_state.backward_context


def _describe_node(node: Any) -> str:
    name = node.prim if isinstance(node.prim, str) else node.prim.name
    return f"'{name}' created at {node.where}" if node.where else f"'{name}'"


def describe_backward_context() -> str | None:
    """The forward operation whose vjp rule is running in this thread, as
    "'sqrt' created at model.py:12 (loss)", or None outside a backward pass."""
    context = _thread_state.backward_context
    return _describe_node(context[-1]) if context else None


def check_nans(prim: Primitive, values: Sequence[Any], outs: Sequence[Array], source: str | None = None,
               backward: str | None = None) -> None:
    """Raise FloatingPointError if ``prim`` made a NaN that was not in its inputs.

    ``source`` (the user's line) and ``backward`` (the forward operation whose
    derivative this is, see ``describe_backward_context``) default to the
    present; a jitted program passes what was recorded when it was traced.
    """
    for out in outs:
        v = out._value
        if _dtypes.kind(v.dtype) in "fc" and np.isnan(v).any():
            if any(isinstance(x, np.ndarray) and _dtypes.kind(x.dtype) in "fc" and np.isnan(x).any() for x in values):
                continue  # NaN came in: the first producer already reported (or was user input)
            backward = backward or describe_backward_context()
            where = f" in the backward pass of {backward}" if backward else ""
            raise FloatingPointError(
                f"debug_nans: primitive '{prim.name}' produced a NaN{where} "
                f"(inputs: {', '.join(describe(x) for x in values)}) at {source or user_source_line()}. "
                + (_BACKWARD_NAN_HINT if backward else _forward_nan_hint(prim, values, v)))


_BACKWARD_NAN_HINT = (
    "The forward values were not NaN: the derivative is. A NaN in a gradient through fnp.where often comes "
    "from the branch not taken (e.g. where(x > 0, sqrt(x), 0) at x = 0, where sqrt's derivative is inf and "
    "inf * 0 = NaN): use the double-where pattern where(x > 0, sqrt(where(x > 0, x, 1)), 0).")


def _forward_nan_hint(prim: Primitive, values: Sequence[Any], out: np.ndarray) -> str:
    """Why a forward NaN came from NaN-free inputs: the input values at its first position."""
    first = tuple(int(i) for i in np.argwhere(np.isnan(out))[0])
    shown = []
    for x in values:
        if isinstance(x, (np.ndarray, np.generic, bool, int, float, complex)):
            x = np.asarray(x)
            if x.shape == out.shape:
                shown.append(repr(x[first].item()))
            elif x.ndim == 0:
                shown.append(repr(x.item()))
    at = f" at index {first}" if first else ""
    inputs = f", from the input value{'s' if len(shown) > 1 else ''} {', '.join(shown)}" if shown else ""
    infinite = any(isinstance(x, np.ndarray) and _dtypes.kind(x.dtype) in "fc" and np.isinf(x).any() for x in values)
    cause = ("inputs that were already infinite (inf - inf, 0 * inf, inf / inf)" if infinite
             else f"inputs outside the domain of '{prim.name}'")
    return (f"The first NaN is{at}{inputs}: a NaN computed from {cause}. Keep the inputs in range "
            "(clip them, or guard them: a value that fnp.where later discards must be replaced before the "
            "operation too, as in where(x > 0, log(where(x > 0, x, 1)), 0)).")
