"""Forward mode: tracers carry a primal and a tangent (``None`` = zero)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from funcgrad import _core
from funcgrad._core import PrimalTracer, Primitive, Trace


class JVPTracer(PrimalTracer):
    __slots__ = ("tangent",)

    def __init__(self, trace: "JVPTrace", primal: Any, tangent: Any):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent


class JVPTrace(Trace):
    __slots__ = ()

    def pure(self, value: Any) -> JVPTracer:
        return JVPTracer(self, value, None)

    lift = pure

    def process_primitive(self, prim: Primitive, args: list, params: dict) -> Any:
        tracers = [self.full_raise(a) for a in args]
        primals = [t.primal for t in tracers]
        tangents = [t.tangent for t in tracers]
        if all(t is None for t in tangents) or prim.jvp is None:
            return _core.bind(prim, primals, params)
        out, tangent_out = prim.jvp(primals, tangents, **params)
        if prim.multiple_results:
            return [JVPTracer(self, o, t) for o, t in zip(out, tangent_out)]
        return JVPTracer(self, out, tangent_out)

    def process_custom_vjp(self, call: _core.CustomVJPCall, tracers: list) -> list:
        if all(t.tangent is None for t in tracers):
            return list(call.fun(*[t.primal for t in tracers]))
        raise TypeError(
            f"forward-mode differentiation (jvp, jacfwd, hessian) of the custom_vjp function "
            f"'{call.name}' is not defined: a custom_vjp rule only gives reverse mode. Use grad/vjp/jacrev, "
            "or define the function with primitives (or a custom_jvp) instead.")


def jvp_flat(fun: Callable, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list, list]:
    """Push flat ``tangents`` through ``fun`` at flat ``primals``."""
    with _core.new_main(JVPTrace) as main:
        trace = JVPTrace(main)
        tracers = [JVPTracer(trace, p, t) for p, t in zip(primals, tangents)]
        outs = fun(*tracers)
        primal_outs, tangent_outs = [], []
        for o in outs:
            if isinstance(o, JVPTracer) and o._trace.main is main:
                primal_outs.append(o.primal)
                tangent_outs.append(o.tangent)
            else:
                primal_outs.append(o)
                tangent_outs.append(None)
    tangent_outs = [_core.zeros_like(p) if t is None else t for p, t in zip(primal_outs, tangent_outs)]
    return primal_outs, tangent_outs


_core.register_transform("jvp", jvp_flat)
