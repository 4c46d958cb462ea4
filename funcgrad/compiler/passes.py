"""IR passes, each a function ``Jaxpr -> Jaxpr`` that leaves its input unchanged.

* :func:`dce` removes equations whose outputs nothing uses;
* :func:`cse` merges equations that apply the same primitive, with the same
  parameters, to the same inputs;
* :func:`fold_constants` evaluates, at compile time, equations whose inputs
  are all constants (small results only, so a program does not grow by a
  large materialised constant).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad._core import Array, _wrap, run_impl
from funcgrad._ir import Jaxpr, Literal, Var

# Results larger than this stay computed at run time (they would bloat the
# program and cost memory for every cached signature).
FOLD_MAX_ELEMENTS = 1 << 16


def dce(jaxpr: Jaxpr) -> Jaxpr:
    """Drop equations (and constants) whose results are never used."""
    live = {id(v) for v in jaxpr.outvars if isinstance(v, Var)}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        if any(id(v) in live for v in eqn.outvars):
            kept.append(eqn)
            live.update(id(x) for x in eqn.inputs if isinstance(x, Var))
    kept.reverse()
    pairs = [(v, c) for v, c in zip(jaxpr.constvars, jaxpr.consts) if id(v) in live]
    return Jaxpr([v for v, _ in pairs], [c for _, c in pairs], jaxpr.invars, kept, jaxpr.outvars)


def _hashable_params(params: dict) -> Any:
    try:
        key = tuple(sorted(params.items()))
        hash(key)
        return key
    except TypeError:
        return None   # unhashable parameters: never merged


def cse(jaxpr: Jaxpr) -> Jaxpr:
    """Reuse the result of an identical earlier equation."""
    rename: dict[int, Any] = {}
    seen: dict[Any, list] = {}
    eqns = []

    def use(x: Any) -> Any:
        return rename.get(id(x), x) if isinstance(x, Var) else x

    def input_key(x: Any) -> Any:
        return ("lit", type(x.value), x.value) if isinstance(x, Literal) else id(x)

    for eqn in jaxpr.eqns:
        inputs = [use(x) for x in eqn.inputs]
        params_key = _hashable_params(eqn.params)
        key = None if params_key is None else (id(eqn.prim), tuple(input_key(x) for x in inputs), params_key)
        if key is not None and key in seen:
            for old, new in zip(eqn.outvars, seen[key]):
                rename[id(old)] = new
            continue
        eqns.append(eqn.with_inputs(inputs))
        if key is not None:
            seen[key] = eqn.outvars
    return Jaxpr(jaxpr.constvars, jaxpr.consts, jaxpr.invars, eqns, [use(v) for v in jaxpr.outvars])


def fold_constants(jaxpr: Jaxpr) -> Jaxpr:
    """Evaluate equations whose inputs are all known, making their outputs constants."""
    known: dict[int, Any] = {id(v): c._value for v, c in zip(jaxpr.constvars, jaxpr.consts)}
    constvars, consts = list(jaxpr.constvars), list(jaxpr.consts)
    eqns = []
    for eqn in jaxpr.eqns:
        all_known = all(isinstance(x, Literal) or id(x) in known for x in eqn.inputs)
        small = all(int(np.prod(v.aval.shape, dtype=np.int64)) <= FOLD_MAX_ELEMENTS for v in eqn.outvars)
        if not (all_known and small and eqn.prim.impl is not None):
            eqns.append(eqn)
            continue
        values = [x.value if isinstance(x, Literal) else known[id(x)] for x in eqn.inputs]
        out = run_impl(eqn.prim, eqn.prim.impl, values, eqn.params)
        outs = out if eqn.prim.multiple_results else [out]
        for v, o in zip(eqn.outvars, outs):
            arr = _wrap(o)
            known[id(v)] = arr._value
            constvars.append(v)
            consts.append(arr)
    return dce(Jaxpr(constvars, consts, jaxpr.invars, eqns, jaxpr.outvars))


def optimize(jaxpr: Jaxpr) -> Jaxpr:
    """The standard pipeline before fusion: fold, merge, prune."""
    return dce(cse(fold_constants(jaxpr)))


__all__ = ["dce", "cse", "fold_constants", "optimize", "Array"]
