"""IR passes, each a function ``Jaxpr -> Jaxpr`` that leaves its input unchanged.

* :func:`dce` removes equations whose outputs nothing uses;
* :func:`cse` merges equations that apply the same primitive, with the same
  parameters, to the same inputs;
* :func:`fold_views` folds chains of reshapes and of transposes (``vmap``
  of a matrix-vector product leaves ``reshape`` triples that give back the
  shape they started from, its transpose rule transposes twice);
* :func:`fold_constants` evaluates, at compile time, equations whose inputs
  are all constants (small results only, so a program does not grow by a
  large materialised constant; never a loop, which could run for long);
* :func:`compile_subprograms` compiles the sub-programs (loop bodies,
  branches) in the parameters of control-flow equations.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad._core import Array, _wrap, run_impl
from funcgrad._ir import Eqn, Jaxpr, Literal, SubProgram, Var, dce, has_effect

# Results larger than this stay computed at run time (they would bloat the
# program and cost memory for every cached signature).
FOLD_MAX_ELEMENTS = 1 << 16


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
        params_key = None if has_effect(eqn) else _hashable_params(eqn.params)   # each effect runs
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
        if (not (all_known and small and eqn.prim.impl is not None) or "higher_order" in eqn.prim.traits
                or "effect" in eqn.prim.traits):   # an effect (a print) runs on every call, not once here
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


def fold_views(jaxpr: Jaxpr) -> Jaxpr:
    """Fold chains of reshapes and of transposes.

    ``reshape(reshape(x, s1), s2)`` is ``reshape(x, s2)`` (both read ``x`` in row-major
    order) and ``transpose(transpose(x, p), q)`` is ``transpose(x, [p[j] for j in q])``; a
    fold that gives back ``x``'s shape, or the identity permutation, is ``x`` itself.  The
    intermediate steps are left to :func:`dce`.
    """
    made: dict[int, tuple] = {}        # a reshape's or transpose's output -> (primitive name, input, perm)
    rename: dict[int, Any] = {}
    eqns: list[Eqn] = []

    def use(x: Any) -> Any:
        return rename.get(id(x), x) if isinstance(x, Var) else x

    for eqn in jaxpr.eqns:
        name = getattr(eqn.prim, "name", None)
        x = use(eqn.inputs[0]) if eqn.inputs else None
        if name not in ("reshape", "transpose") or not isinstance(x, Var):
            eqns.append(eqn.with_inputs([use(v) for v in eqn.inputs]))
            continue
        before = made.get(id(x))
        params = dict(eqn.params)
        if name == "reshape":
            if before is not None and before[0] == "reshape":
                x = before[1]
            done = tuple(x.aval.shape) == tuple(eqn.outvars[0].aval.shape)
        else:
            perm = tuple(params["perm"])
            if before is not None and before[0] == "transpose":
                x, perm = before[1], tuple(before[2][j] for j in perm)
            params["perm"] = perm
            done = perm == tuple(range(len(perm)))
        if done:
            rename[id(eqn.outvars[0])] = x
            continue
        made[id(eqn.outvars[0])] = (name, x, params.get("perm"))
        eqns.append(Eqn(eqn.prim, [x], params, eqn.outvars, eqn.source, eqn.backward))
    return Jaxpr(jaxpr.constvars, jaxpr.consts, jaxpr.invars, eqns, [use(v) for v in jaxpr.outvars])


def inline_calls(jaxpr: Jaxpr) -> Jaxpr:
    """Replace each ``custom_call`` equation by the equations of its function.

    A compiled program only runs forward, where a function with custom
    derivative rules is just its function: inlined, it fuses with its
    neighbours. (Loop bodies keep theirs: a loop's rules may still apply
    them when the program is differentiated before it is compiled.)
    """
    if not any(getattr(e.prim, "name", None) == "custom_call" for e in jaxpr.eqns):
        return jaxpr
    constvars, consts = list(jaxpr.constvars), list(jaxpr.consts)
    rename: dict[int, Any] = {}

    def use(x: Any) -> Any:
        return rename.get(id(x), x) if isinstance(x, Var) else x

    eqns: list[Eqn] = []
    for eqn in jaxpr.eqns:
        if getattr(eqn.prim, "name", None) != "custom_call":
            eqns.append(eqn.with_inputs([use(x) for x in eqn.inputs]))
            continue
        inner = inline_calls(eqn.params["fun"].jaxpr)
        constvars += inner.constvars
        consts += inner.consts
        for v, x in zip(inner.invars, eqn.inputs):
            rename[id(v)] = use(x)
        for e in inner.eqns:
            eqns.append(e.with_inputs([use(x) for x in e.inputs]))
        for v, x in zip(eqn.outvars, inner.outvars):
            rename[id(v)] = use(x)
    return Jaxpr(constvars, consts, jaxpr.invars, eqns, [use(v) for v in jaxpr.outvars])


def compile_subprograms(jaxpr: Jaxpr, compile: Any) -> Jaxpr:
    """``jaxpr`` with every sub-program in its equations' parameters compiled by ``compile``
    (``Jaxpr -> program``; nested loops compile recursively through it): the loop then calls
    its body's compiled program each step instead of evaluating it equation by equation."""
    def compiled(value: Any) -> Any:
        if isinstance(value, SubProgram):
            return value.with_program(compile(value.jaxpr))
        if isinstance(value, tuple) and any(isinstance(v, SubProgram) for v in value):
            return tuple(compiled(v) for v in value)
        return value

    eqns = []
    for eqn in jaxpr.eqns:
        if "higher_order" in eqn.prim.traits:
            params = {k: compiled(v) for k, v in eqn.params.items()}
            eqn = Eqn(eqn.prim, eqn.inputs, params, eqn.outvars, eqn.source, eqn.backward)
        eqns.append(eqn)
    return Jaxpr(jaxpr.constvars, jaxpr.consts, jaxpr.invars, eqns, jaxpr.outvars)


def optimize(jaxpr: Jaxpr) -> Jaxpr:
    """The standard pipeline before fusion: inline calls, fold constants and views, merge, prune."""
    return dce(cse(fold_views(fold_constants(inline_calls(jaxpr)))))


__all__ = ["dce", "cse", "fold_views", "fold_constants", "inline_calls", "compile_subprograms", "optimize", "Array"]
