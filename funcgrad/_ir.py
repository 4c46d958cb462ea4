"""The IR: a typed, first-order program of primitive applications.

``make_jaxpr(f)(*args)`` prints one; ``jit`` traces the same IR, optimises it
and runs it.  Example::

    { lambda ; a:f32[3] . let
        b:f32[3] = sin a
        c:f32[3] = mul b a
        d:f32[] = reduce_sum[axes=(0,)] c
      in ( d ) }
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad import _core
from funcgrad._dtypes import ShapedArray


class Var:
    """A variable of the IR; identity is the variable."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval


class Literal:
    """A Python scalar written into the program."""

    __slots__ = ("value", "aval")

    def __init__(self, value: Any):
        self.value = value
        self.aval = _core.get_aval(value)

    def __repr__(self) -> str:
        return repr(self.value)


class Eqn:
    """``outvars = prim[params] inputs``."""

    __slots__ = ("prim", "inputs", "params", "outvars", "source", "backward")

    def __init__(self, prim: Any, inputs: list, params: dict, outvars: list, source: str | None = None,
                 backward: str | None = None):
        self.prim = prim
        self.inputs = inputs
        self.params = params
        self.outvars = outvars
        # Recorded only when tracing with debug_nans on, for its messages: the
        # user's line, and for an equation made by a vjp rule the forward
        # operation it differentiates ("'sqrt' created at model.py:12 (loss)").
        self.source = source
        self.backward = backward

    def with_inputs(self, inputs: list) -> "Eqn":
        """The same equation (and source information) reading ``inputs``."""
        return Eqn(self.prim, inputs, self.params, self.outvars, self.source, self.backward)


class Jaxpr:
    """A closed program: constants (with their values), inputs, equations, outputs."""

    __slots__ = ("constvars", "consts", "invars", "eqns", "outvars")

    def __init__(self, constvars: list, consts: list, invars: list, eqns: list, outvars: list):
        self.constvars = constvars
        self.consts = consts
        self.invars = invars
        self.eqns = eqns
        self.outvars = outvars

    def __repr__(self) -> str:
        return pretty_print(self)

    @property
    def in_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.invars]

    @property
    def out_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.outvars]


class SubProgram:
    """A closed program held in a primitive's parameters: a loop body, a branch of ``cond``.

    The constants of a user's function are hoisted out (:func:`close_jaxpr`):
    they are leading inputs, passed to the primitive as operands, so that
    transforms see them (a loop body closing over a traced parameter is
    differentiated with respect to it). Only concrete constants that a
    rule made (zeros, literals) stay inside. A
    compiler may attach ``program``, its compiled form (see
    ``funcgrad.compiler.passes.compile_subprograms``); without one the
    primitive's implementation runs the equations one by one.
    """

    __slots__ = ("jaxpr", "program")

    def __init__(self, jaxpr: Jaxpr, program: Any = None):
        self.jaxpr = jaxpr
        self.program = program

    @property
    def in_avals(self) -> list[ShapedArray]:
        return self.jaxpr.in_avals

    @property
    def out_avals(self) -> list[ShapedArray]:
        return self.jaxpr.out_avals

    def with_program(self, program: Any) -> "SubProgram":
        return SubProgram(self.jaxpr, program)

    def __call__(self, *args: Any) -> list:
        """Apply the program with ``bind`` (so transforms see its primitives)."""
        return eval_jaxpr(self.jaxpr, args)

    def __repr__(self) -> str:
        return pretty_print(self.jaxpr)


def close_jaxpr(jaxpr: Jaxpr) -> tuple[SubProgram, list]:
    """``jaxpr`` with its constants hoisted into leading inputs, and the constants' values."""
    hoisted = Jaxpr([], [], list(jaxpr.constvars) + list(jaxpr.invars), jaxpr.eqns, jaxpr.outvars)
    return SubProgram(hoisted), list(jaxpr.consts)


def _var_names() -> Any:
    import itertools
    import string
    for n in itertools.count(1):
        for combo in itertools.product(string.ascii_lowercase, repeat=n):
            yield "".join(combo)


def _format_param(v: Any, indent: int = 0) -> str:
    if isinstance(v, SubProgram):
        return _indented(pretty_print(v.jaxpr, indent + 4), indent)
    if isinstance(v, tuple) and v and all(isinstance(b, SubProgram) for b in v):
        return "(" + ", ".join(_format_param(b, indent) for b in v) + ")"
    if isinstance(v, np.dtype):
        return str(v)
    if callable(v) or hasattr(v, "bind"):   # a function, or a call object (custom_vjp, custom_jvp)
        return getattr(v, "__name__", None) or getattr(v, "name", None) or type(v).__name__
    return repr(v)


def _indented(text: str, indent: int) -> str:
    """A nested program as a parameter: on its own lines, indented under the equation."""
    pad = " " * (indent + 6)
    return "\n" + "\n".join(pad + line for line in text.splitlines()) + "\n" + " " * (indent + 4)


def pretty_print(jaxpr: Jaxpr, indent: int = 0) -> str:
    """The program as text; nested programs (loop bodies, branches) print indented in the parameters."""
    names: dict[int, str] = {}
    gen = _var_names()

    def name(v: Any) -> str:
        if isinstance(v, Literal):
            return repr(v.value)
        if id(v) not in names:
            names[id(v)] = next(gen)
        return names[id(v)]

    def decl(v: Var) -> str:
        return f"{name(v)}:{v.aval.str_short()}"

    lines = ["{ lambda " + " ".join(decl(v) for v in jaxpr.constvars) + " ; "
             + " ".join(decl(v) for v in jaxpr.invars) + " . let"]
    for eqn in jaxpr.eqns:
        params = ",".join(f"{k}={_format_param(v, indent)}" for k, v in sorted(eqn.params.items()))
        prim_name = getattr(eqn.prim, "name", str(eqn.prim))
        head = prim_name + (f"[{params}]" if params else "")
        lhs = " ".join(decl(v) for v in eqn.outvars)
        lines.append(f"    {lhs} = {head} " + " ".join(name(x) for x in eqn.inputs))
    lines.append("  in ( " + " ".join(name(v) for v in jaxpr.outvars) + " ) }")
    return "\n".join(lines)


def has_effect(eqn: Eqn) -> bool:
    """Whether running ``eqn`` does more than make its results: a primitive with the ``"effect"`` trait (a
    print, a callback, a collective), or a loop body or branch in its parameters that holds one."""
    return "effect" in getattr(eqn.prim, "traits", ()) or any(_holds_effect(v) for v in eqn.params.values())


def _holds_effect(value: Any) -> bool:
    if isinstance(value, SubProgram):
        value = value.jaxpr
    if isinstance(value, Jaxpr):
        return any(has_effect(eqn) for eqn in value.eqns)
    if isinstance(value, (tuple, list)):
        return any(_holds_effect(v) for v in value)
    return False


def dce(jaxpr: Jaxpr) -> Jaxpr:
    """Drop equations (and constants) whose results are never used (those with an effect stay)."""
    live = {id(v) for v in jaxpr.outvars if isinstance(v, Var)}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        # An equation with an effect (debug.print's callback, a loop printing) stays though nothing reads it.
        if any(id(v) in live for v in eqn.outvars) or has_effect(eqn):
            kept.append(eqn)
            live.update(id(x) for x in eqn.inputs if isinstance(x, Var))
    kept.reverse()
    pairs = [(v, c) for v, c in zip(jaxpr.constvars, jaxpr.consts) if id(v) in live]
    return Jaxpr([v for v, _ in pairs], [c for _, c in pairs], jaxpr.invars, kept, jaxpr.outvars)


def eval_jaxpr(jaxpr: Jaxpr, args: Sequence[Any]) -> list:
    """Evaluate the program with ``bind`` (so it can itself be transformed)."""
    env: dict[int, Any] = {}

    def read(x: Any) -> Any:
        return x.value if isinstance(x, Literal) else env[id(x)]

    for v, val in zip(jaxpr.constvars, jaxpr.consts):
        env[id(v)] = val
    for v, val in zip(jaxpr.invars, args):
        env[id(v)] = val
    for eqn in jaxpr.eqns:
        out = _core.bind(eqn.prim, [read(x) for x in eqn.inputs], eqn.params)
        outs = out if eqn.prim.multiple_results else [out]
        for v, o in zip(eqn.outvars, outs):
            env[id(v)] = o
    return [read(v) for v in jaxpr.outvars]
