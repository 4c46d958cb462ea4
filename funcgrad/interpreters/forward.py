"""Forward mode: tracers carry a primal and a tangent (``None`` = zero)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from funcgrad import _dtypes
from funcgrad import _core
from funcgrad._core import PrimalTracer, Primitive, Trace
from funcgrad._dtypes import describe


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
            return list(call.bind(*[t.primal for t in tracers]))   # the levels below still see the rule
        raise TypeError(
            f"forward-mode differentiation (jvp, jacfwd, linearize) of the custom_vjp function "
            f"'{call.name}' is not defined: a custom_vjp rule only gives reverse mode. Use reverse mode "
            "(grad, vjp, jacrev), or give the function a forward-mode rule with @fg.custom_jvp instead of "
            "@fg.custom_vjp: grad and vjp derive reverse mode from a custom_jvp rule, so every transform works.")

    def process_custom_jvp(self, call: _core.CustomJVPCall, tracers: list) -> list:
        primals = [t.primal for t in tracers]
        if all(t.tangent is None for t in tracers):
            return call.bind(*primals)   # nothing to differentiate; the levels below still see the rule
        tangents = [_core.zeros_like(p) if t.tangent is None else t.tangent for p, t in zip(primals, tracers)]
        outs, tangent_outs = custom_jvp_rule(call, primals, tangents)
        return [JVPTracer(self, o, t) for o, t in zip(outs, tangent_outs)]


def custom_jvp_rule(call: _core.CustomJVPCall, primals: list, tangents: list) -> tuple[list, list]:
    """``call``'s jvp rule applied and checked: as many tangents as outputs, each of its output's
    shape and (float) dtype; ``None`` (zero) for outputs that have no derivative (int, bool)."""
    result = call.jvp(primals, tangents)
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise TypeError(f"custom_jvp {call.name}: the jvp rule must return a pair (primal outputs, tangent "
                        f"outputs), got {type(result).__name__}")
    outs, tangent_outs = [_core.as_array(o) for o in result[0]], list(result[1])
    if len(tangent_outs) != len(outs):
        raise ValueError(f"custom_jvp {call.name}: the jvp rule returned {len(outs)} primal outputs but "
                         f"{len(tangent_outs)} tangent outputs; it must return one tangent per output")
    return outs, [_rule_tangent(call.name, i, o, t) for i, (o, t) in enumerate(zip(outs, tangent_outs))]


def _rule_tangent(name: str, i: int, out: Any, t: Any) -> Any:
    aval = _core.get_aval(out)
    if _dtypes.kind(aval.dtype) not in "fc":
        return None   # an integer or bool output has no derivative, whatever the rule says
    if isinstance(t, (int, float)) and not isinstance(t, bool):
        t = _core.full_like(out, t)   # a Python number is weakly typed: it takes the output's dtype
    shape, dtype = getattr(t, "shape", None), getattr(t, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(f"custom_jvp {name}: the jvp rule returned {type(t).__name__} {t!r:.40} as the tangent of "
                        f"output {i} ({describe(aval)}); expected an array {describe(aval)}")
    if tuple(shape) != aval.shape or dtype != aval.dtype:
        raise TypeError(f"custom_jvp {name}: the jvp rule returned a tangent {describe(t)} for output {i}, a primal "
                        f"output {describe(aval)}: a tangent must have its primal output's shape and dtype. Fix the "
                        f"rule (broadcast the tangent, or convert it with .astype('{aval.dtype}'))")
    return t


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
