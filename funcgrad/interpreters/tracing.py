"""Tracing to IR: tracers carry only an abstract value; primitives are recorded."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _core
from funcgrad._config import config
from funcgrad._core import ConcretizationError, Primitive, Trace, Tracer
from funcgrad._dtypes import ShapedArray
from funcgrad._ir import Eqn, Jaxpr, Literal, SubProgram, Var
from funcgrad.primitives.control_flow import custom_call_p


class JaxprTracer(Tracer):
    __slots__ = ("_aval", "var")

    def __init__(self, trace: "JaxprTrace", aval: ShapedArray, var: Any):
        self._trace = trace
        self._aval = aval
        self.var = var

    @property
    def aval(self) -> ShapedArray:
        return self._aval

    def concrete_value(self):
        raise ConcretizationError(
            f"a concrete Python value (bool/int/float, `if`, `while`, shape argument) was needed from "
            f"the traced array {_core.describe(self)} while tracing for jit/make_jaxpr; traced values "
            "are abstract (shape and dtype only). Mark the argument static with "
            "jit(f, static_argnums=...)/static_argnames=..., or replace the Python control flow with "
            "fnp.where, lax.cond/lax.switch (branches) or lax.while_loop/lax.fori_loop/lax.scan (loops).")


class _Builder:
    __slots__ = ("eqns", "constvars", "consts", "const_ids")

    def __init__(self) -> None:
        self.eqns: list[Eqn] = []
        self.constvars: list[Var] = []
        self.consts: list[Any] = []
        self.const_ids: dict[int, Var] = {}


class JaxprTrace(Trace):
    __slots__ = ()

    def pure(self, value: Any) -> JaxprTracer:
        if isinstance(value, (bool, int, float)):
            lit = Literal(value)
            return JaxprTracer(self, lit.aval, lit)
        builder: _Builder = self.main.data
        var = builder.const_ids.get(id(value))
        if var is None:
            value = _core.as_array(value)
            var = Var(value.aval)
            builder.const_ids[id(value)] = var
            builder.constvars.append(var)
            builder.consts.append(value)
        return JaxprTracer(self, var.aval, var)

    lift = pure

    def process_primitive(self, prim: Primitive, args: list, params: dict) -> Any:
        tracers = [self.full_raise(a) for a in args]
        avals = [t.var.value if isinstance(t.var, Literal) else t.aval for t in tracers]
        out_avals = abstract_eval(prim, avals, params)
        outs = out_avals if prim.multiple_results else [out_avals]
        outvars = [Var(a) for a in outs]
        source = backward = None
        if config.debug_nans:   # what eager debug_nans would name (part of jit's cache key)
            source, backward = _core.user_source_line(), _core.describe_backward_context()
        self.main.data.eqns.append(Eqn(prim, [t.var for t in tracers], params, outvars, source, backward))
        results = [JaxprTracer(self, v.aval, v) for v in outvars]
        return results if prim.multiple_results else results[0]

    def process_custom_vjp(self, call: _core.CustomVJPCall, tracers: list) -> list:
        return self._custom_call(call, call.fun, tracers)

    def process_custom_jvp(self, call: Any, tracers: list) -> list:
        return self._custom_call(call, call.fun, tracers)

    def process_checkpoint(self, fun: Callable, tracers: list) -> list:
        return self._custom_call(_Checkpointed(fun), fun, tracers)

    def _custom_call(self, call: Any, fun: Callable, tracers: list) -> list:
        """Record a function with rules of its own as one ``custom_call`` equation: the traced
        function runs it, and a transform of the program (a loop body differentiated, batched)
        applies ``call`` again, so its own rules (custom_vjp/custom_jvp, rematerialisation) hold.
        A function closing over traced values is recorded inline instead (its rules cannot
        name them)."""
        inner, outs = trace_to_jaxpr(lambda *xs: list(fun(*xs)), [t.aval for t in tracers])
        if any(isinstance(c, Tracer) for c in inner.consts):
            return list(fun(*tracers))
        return self.process_primitive(custom_call_p, tracers, {"call": call, "fun": SubProgram(inner)})


class _Checkpointed:
    """A checkpointed (rematerialised) function as a call object (``bind(*args) -> list``)."""

    __slots__ = ("fun", "__name__")

    def __init__(self, fun: Callable):
        self.fun = fun
        self.__name__ = f"checkpoint({getattr(fun, '__name__', 'f')})"

    def bind(self, *args: Any) -> list:
        return _core.bind_checkpoint(self.fun, args)


def abstract_eval(prim: Primitive, avals: Sequence[Any], params: dict) -> Any:
    """Output aval(s) of ``prim``; raises a clear error on bad shapes/dtypes."""
    if prim.abstract_eval is not None:
        return prim.abstract_eval(*avals, **params)
    return abstract_eval_by_example(prim, avals, params)


def _dummy(a: Any) -> Any:
    if isinstance(a, (bool, int, float)):
        return a
    # A zero-strided array: the right shape and dtype, one element of memory.
    return np.broadcast_to(np.zeros((), a.dtype), a.shape)


def abstract_eval_by_example(prim: Primitive, avals: Sequence[Any], params: dict) -> Any:
    """Shape/dtype rule by running the reference implementation on dummy inputs."""
    dummies = [_dummy(a) for a in avals]
    out = _core.run_impl(prim, prim.impls.get("reference", prim.impl), dummies, params)
    from funcgrad._dtypes import canonicalize
    if prim.multiple_results:
        return [ShapedArray(np.shape(o), canonicalize(np.asarray(o).dtype)) for o in out]
    return ShapedArray(np.shape(out), canonicalize(np.asarray(out).dtype))


def trace_to_jaxpr(fun: Callable, in_avals: Sequence[ShapedArray]) -> tuple[Jaxpr, list]:
    """Trace flat ``fun`` on abstract inputs; return the IR and the raw outputs."""
    with _core.new_main(JaxprTrace, _Builder()) as main:
        trace = JaxprTrace(main)
        invars = [Var(a) for a in in_avals]
        tracers = [JaxprTracer(trace, a, v) for a, v in zip(in_avals, invars)]
        outs = list(fun(*tracers))
        out_tracers = [trace.full_raise(o) for o in outs]
        builder: _Builder = main.data
        jaxpr = Jaxpr(builder.constvars, builder.consts, invars, builder.eqns, [t.var for t in out_tracers])
    return jaxpr, outs


_core.register_transform("trace", trace_to_jaxpr)
