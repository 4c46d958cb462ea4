"""Reverse mode: evaluate while recording, then walk the record backwards.

A :class:`VJPTrace` evaluates each primitive on the level below (so the
forward pass costs one Python dispatch per operation, as in eager mode) and
records an equation: the primitive, its parameters, its input values and
outputs (the values its vjp rule needs), and which recorded equation made
each input.  The record belongs to one ``vjp`` call and dies with it: there
is no global tape and nothing is stored on arrays.

The backward pass walks the record in reverse creation order (a valid
topological order) calling each primitive's vjp rule.  The rules apply
primitives through ``bind``, so the backward pass is itself traceable:
``grad(grad(f))``, ``jit(grad(f))`` and ``vmap(grad(f))`` need nothing more.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from funcgrad import _core
from funcgrad._core import Array, MainTrace, PrimalTracer, Primitive, Trace, user_source_line
from funcgrad._config import config


class Node:
    """One recorded equation of the forward pass."""

    __slots__ = ("prim", "params", "primals", "outs", "parents", "needs", "rule", "where")

    def __init__(self, prim: Any, params: dict, primals: list, outs: list, parents: list, rule: Callable | None):
        self.prim = prim
        self.params = params
        self.primals = primals
        self.outs = outs
        self.parents = parents   # per input: (Node, output index) or None
        self.needs = tuple([p is not None for p in parents])  # which inputs want a cotangent
        self.rule = rule         # custom backward (custom_vjp, checkpoint) or None
        self.where = user_source_line() if config.debug_nans else None


class _Leaf:
    """The record entry of a differentiated input."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


class VJPTracer(PrimalTracer):
    __slots__ = ("node", "out_index")

    def __init__(self, trace: "VJPTrace", primal: Any, node: Any, out_index: int = 0):
        self._trace = trace
        self.primal = primal
        self.node = node
        self.out_index = out_index


class VJPTrace(Trace):
    __slots__ = ()

    def pure(self, value: Any) -> VJPTracer:
        return VJPTracer(self, value, None)

    lift = pure

    def process_primitive(self, prim: Primitive, args: list, params: dict) -> Any:
        main = self.main
        primals, parents, tracked = [], [], False
        for a in args:
            # Constants and values of lower levels are used as they are; no
            # tracer is made for them (this loop runs once per operation).
            if type(a) is VJPTracer and a._trace.main is main:
                primals.append(a.primal)
                if a.node is not None:
                    parents.append((a.node, a.out_index))
                    tracked = True
                    continue
            else:
                primals.append(a)
            parents.append(None)
        out = _core.bind(prim, primals, params)
        if not tracked or prim.vjp is None:
            return out  # independent of the inputs, or not differentiable
        if prim.multiple_results:
            node = Node(prim, params, primals, out, parents, None)
            main.data.append(node)
            return [VJPTracer(self, o, node, i) if _differentiable(o) else o for i, o in enumerate(out)]
        node = Node(prim, params, primals, [out], parents, None)
        main.data.append(node)
        return VJPTracer(self, out, node, 0) if _differentiable(out) else out

    def process_custom_vjp(self, call: _core.CustomVJPCall, tracers: list) -> list:
        primals = [t.primal for t in tracers]
        parents = [(t.node, t.out_index) if t.node is not None else None for t in tracers]
        outs, residuals = call.fwd(*primals)
        outs = list(outs)
        if all(p is None for p in parents):
            return outs

        def rule(cts: list, node: Node) -> list:
            cts = [zeros_like_value(o) if c is None else c for c, o in zip(cts, node.outs)]
            return list(call.bwd(residuals, cts))

        node = Node(call, {}, primals, outs, parents, rule)
        self.main.data.append(node)
        return [VJPTracer(self, o, node, i) if _differentiable(o) else o for i, o in enumerate(outs)]

    def process_checkpoint(self, fun: Callable, tracers: list) -> list:
        primals = [t.primal for t in tracers]
        parents = [(t.node, t.out_index) if t.node is not None else None for t in tracers]
        outs = list(fun(*primals))  # forward values only: nothing inside is recorded
        if all(p is None for p in parents):
            return outs

        def rule(cts: list, node: Node) -> list:
            # Recompute the forward pass now, recording it, and pull back.
            cts = [zeros_like_value(o) if c is None else c for c, o in zip(cts, node.outs)]
            _, pullback = vjp_flat(fun, node.primals)
            return pullback(cts)

        node = Node("checkpoint", {}, primals, outs, parents, rule)
        self.main.data.append(node)
        return [VJPTracer(self, o, node, i) if _differentiable(o) else o for i, o in enumerate(outs)]


def _differentiable(x: Any) -> bool:
    if type(x) is Array:
        return x._value.dtype.kind == "f"
    return not isinstance(x, (bool, int, float)) and x.dtype.kind == "f"


def zeros_like_value(x: Any) -> Any:
    from funcgrad.numpy import zeros_like
    return zeros_like(x)


def _add(a: Any, b: Any) -> Any:
    from funcgrad.primitives.elementwise import add_p
    return _core.bind(add_p, (a, b), {})


def vjp_flat(fun: Callable, primals: Sequence[Any], has_aux: bool = False):
    """Run ``fun`` on flat ``primals`` recording it; return ``(outs, pullback[, aux])``.

    ``pullback(cts)`` maps a list of output cotangents (``None`` = zero) to a
    list of input cotangents (zeros for inputs the outputs do not depend on).
    """
    with _core.new_main(VJPTrace, []) as main:
        trace = VJPTrace(main)
        tracers = [VJPTracer(trace, x, _Leaf(i)) for i, x in enumerate(primals)]
        result = fun(*tracers)
        if has_aux:
            result, aux = result
        outs_t = list(result)
        outs = [_lower(o, main) for o in outs_t]
        if has_aux:
            aux = _lower_tree(aux, main)
    record: list[Node] = main.data

    def pullback(cts: Sequence[Any]) -> list:
        return backward_pass(record, outs_t, list(cts), main, primals)

    if has_aux:
        return outs, pullback, aux
    return outs, pullback


def _lower(x: Any, main: MainTrace) -> Any:
    if isinstance(x, VJPTracer) and x._trace.main is main:
        return x.primal
    return x


def _lower_tree(tree: Any, main: MainTrace) -> Any:
    from funcgrad.tree_util import tree_map
    return tree_map(lambda x: _lower(x, main), tree)


def backward_pass(record: list, outs: list, cts: list, main: MainTrace, primals: Sequence[Any]) -> list:
    """Propagate output cotangents back to the inputs through the record."""
    # Cotangents keyed by (id(node), output index); leaves by their input index.
    ct_of: dict = {}
    for out, ct in zip(outs, cts):
        if ct is not None and type(out) is VJPTracer and out._trace.main is main and out.node is not None:
            _accumulate(ct_of, _key(out.node, out.out_index), ct)

    context = _core._backward_context
    for node in reversed(record):
        key = id(node)
        if len(node.outs) == 1:
            ct = ct_of.pop((key, 0), None)
            if ct is None:
                continue
            node_cts = [ct]
        else:
            node_cts = [ct_of.pop((key, i), None) for i in range(len(node.outs))]
            if all(c is None for c in node_cts):
                continue
        context.append(node)  # named only if debug_nans reports
        try:
            if node.rule is not None:
                in_cts = node.rule(node_cts, node)
            else:
                if node.prim.multiple_results:
                    in_cts = node.prim.vjp(node_cts, node.primals, node.outs, node.needs, **node.params)
                else:
                    in_cts = node.prim.vjp(node_cts[0], node.primals, node.outs[0], node.needs, **node.params)
        finally:
            context.pop()
        for parent, ct in zip(node.parents, in_cts):
            if parent is not None and ct is not None:
                _accumulate(ct_of, _key(*parent), ct)

    return [ct_of.get(("leaf", i)) if ("leaf", i) in ct_of else zeros_like_value(p) for i, p in enumerate(primals)]


def _key(node: Any, index: int) -> tuple:
    return ("leaf", node.index) if type(node) is _Leaf else (id(node), index)


def _accumulate(ct_of: dict, key: Any, ct: Any) -> None:
    prev = ct_of.get(key)
    ct_of[key] = ct if prev is None else _add(prev, ct)
