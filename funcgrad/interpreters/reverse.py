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

from funcgrad import _dtypes
from funcgrad import _core
from funcgrad._core import Array, MainTrace, PrimalTracer, Primitive, Trace, Tracer, user_source_line
from funcgrad._config import config
from funcgrad import tree_util as _tree_util
from funcgrad.interpreters.forward import custom_jvp_rule
from funcgrad.primitives import elementwise as _elementwise


class Node:
    """One recorded equation of the forward pass."""

    __slots__ = ("prim", "params", "primals", "outs", "parents", "needs", "rule", "where")

    def __init__(self, prim: Any, params: dict, primals: list, outs: list, parents: list, needs: Any,
                 rule: Callable | None):
        self.prim = prim
        self.params = params
        self.primals = primals
        self.outs = outs
        self.parents = parents   # per input: the record key of the value it came from, or None
        self.needs = needs       # per input: whether it wants a cotangent (a sequence of bools)
        self.rule = rule         # custom backward (custom_vjp, checkpoint) or None
        self.where = user_source_line() if config.debug_nans else None


# Record keys: each differentiable value is known to the backward pass by a
# key under which its cotangent accumulates: the Node itself for the output of
# a single-output primitive, (Node, i) for output i of a multiple-output one,
# and a _Leaf for a differentiated input.


class _Leaf:
    """The record key of a differentiated input."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


class VJPTracer(PrimalTracer):
    __slots__ = ("key",)

    def __init__(self, trace: "VJPTrace", primal: Any, key: Any):
        self._trace = trace
        self.primal = primal
        self.key = key   # record key, or None for a value that depends on no input


class VJPTrace(Trace):
    __slots__ = ()

    def pure(self, value: Any) -> VJPTracer:
        return VJPTracer(self, value, None)

    lift = pure

    def process_primitive(self, prim: Primitive, args: list, params: dict) -> Any:
        main = self.main
        primals, parents, needs, tracked = [], [], [], False
        for a in args:
            # Constants and values of lower levels are used as they are; no
            # tracer is made for them (this loop runs once per operation).
            if type(a) is VJPTracer and a._trace.main is main:
                primals.append(a.primal)
                if a.key is not None:
                    parents.append(a.key)
                    needs.append(True)
                    tracked = True
                    continue
            else:
                primals.append(a)
            parents.append(None)
            needs.append(False)
        if tracked and prim.vjp_forward is not None:
            outs, backward = prim.vjp_forward(primals, needs, **params)
            node = Node(prim, params, primals, outs, parents, needs, lambda cts, node: backward(cts))
            main.data.append(node)
            if "early_backward" in prim.traits:
                main.data.early += (node,)
            return [VJPTracer(self, o, (node, i)) if _differentiable(o) else o for i, o in enumerate(outs)]
        out = _core.bind(prim, primals, params)
        if not tracked or prim.vjp is None:
            return out  # independent of the inputs, or not differentiable
        if prim.multiple_results:
            node = Node(prim, params, primals, out, parents, needs, None)
            main.data.append(node)
            return [VJPTracer(self, o, (node, i)) if _differentiable(o) else o for i, o in enumerate(out)]
        node = Node(prim, params, primals, [out], parents, needs, None)
        main.data.append(node)
        if type(out) is Array and ((d := out._value.dtype).kind in "fc" or d is _BFLOAT16) or _differentiable(out):
            return VJPTracer(self, out, node)
        return out

    def process_saved(self, prim: Primitive, args: list, params: dict, known: list) -> Any:
        """:meth:`process_primitive` with the outputs ``known`` (kept by a checkpoint policy):
        recorded for the backward pass without computing ``prim`` again."""
        main = self.main
        primals, parents, needs, tracked = [], [], [], False
        for a in args:
            if type(a) is VJPTracer and a._trace.main is main:
                primals.append(a.primal)
                if a.key is not None:
                    parents.append(a.key)
                    needs.append(True)
                    tracked = True
                    continue
            else:
                primals.append(a)
            parents.append(None)
            needs.append(False)
        out = list(known) if prim.multiple_results else known[0]
        if not tracked or prim.vjp is None:
            return out
        node = Node(prim, params, primals, list(known), parents, needs, None)
        main.data.append(node)
        if prim.multiple_results:
            return [VJPTracer(self, o, (node, i)) if _differentiable(o) else o for i, o in enumerate(known)]
        return VJPTracer(self, out, node) if _differentiable(out) else out

    def _record_call(self, name: Any, tracers: list, primals: list, outs: list, rule: Callable) -> list:
        """Record a function call with a backward ``rule(cts, node)`` (custom_vjp, checkpoint)."""
        parents = [t.key for t in tracers]
        if all(k is None for k in parents):
            return outs
        node = Node(name, {}, primals, outs, parents, tuple([k is not None for k in parents]), rule)
        self.main.data.append(node)
        return [VJPTracer(self, o, (node, i)) if _differentiable(o) else o for i, o in enumerate(outs)]

    def process_custom_vjp(self, call: _core.CustomVJPCall, tracers: list) -> list:
        primals = [t.primal for t in tracers]
        outs, residuals = call.fwd(*primals)

        def rule(cts: list, node: Node) -> list:
            cts = [zeros_like_value(o) if c is None else c for c, o in zip(cts, node.outs)]
            return list(call.bwd(residuals, cts))

        return self._record_call(call, tracers, primals, list(outs), rule)

    def process_custom_jvp(self, call: _core.CustomJVPCall, tracers: list) -> list:
        """Reverse mode from a forward-mode rule: the forward pass runs the function once (at the level
        below, which sees the call and its rule); the backward pass pulls the cotangents back through the
        rule's tangent map ``t -> jvp(primals, t)[1]``, which is linear in ``t``, by reverse mode. The rule
        is differentiated as written, so where it is differentiable, so is the gradient (grad of grad)."""
        primals = [t.primal for t in tracers]
        outs = call.bind(*primals)

        def rule(cts: list, node: Node) -> list:
            cts = [zeros_like_value(o) if c is None else c for c, o in zip(cts, node.outs)]
            wanted = [i for i, need in enumerate(node.needs) if need]

            def tangent_map(*ts: Any) -> list:
                tangents = [zeros_like_value(p) for p in node.primals]
                for i, t in zip(wanted, ts):
                    tangents[i] = t
                return custom_jvp_rule(call, node.primals, tangents)[1]

            _, pullback = vjp_flat(tangent_map, [zeros_like_value(node.primals[i]) for i in wanted])
            in_cts: list = [None] * len(node.primals)
            for i, ct in zip(wanted, pullback(cts)):
                in_cts[i] = ct
            return in_cts

        return self._record_call(call, tracers, primals, outs, rule)

    def process_checkpoint(self, fun: Callable, tracers: list) -> list:
        primals = [t.primal for t in tracers]
        forward = getattr(fun, "checkpoint_forward", None)
        if forward is not None:
            # A checkpoint policy: the forward pass keeps the outputs the policy saves, and
            # ``replay`` recomputes only the others (recording the saved ones as they were).
            outs, replay = forward(primals)
        else:
            outs, replay = list(fun(*primals)), fun  # forward values only: nothing inside is recorded

        def rule(cts: list, node: Node) -> list:
            # Recompute the forward pass now, recording it, and pull back (to the inputs that
            # need a cotangent only: the others are constants of the recomputation).
            cts = [zeros_like_value(o) if c is None else c for c, o in zip(cts, node.outs)]
            needed = [i for i, n in enumerate(node.needs) if n]
            if len(needed) == len(node.primals):
                _, pullback = vjp_flat(replay, node.primals)
                return pullback(cts)
            fixed = list(node.primals)

            def part(*xs: Any) -> Any:
                args = list(fixed)
                for i, x in zip(needed, xs):
                    args[i] = x
                return replay(*args)

            _, pullback = vjp_flat(part, [fixed[i] for i in needed])
            in_cts: list = [None] * len(fixed)
            for i, ct in zip(needed, pullback(cts)):
                in_cts[i] = ct
            return in_cts

        return self._record_call("checkpoint", tracers, primals, outs, rule)


_BFLOAT16 = _dtypes.bfloat16   # inline dtype tests on the per-operation path (a call costs more)

def bind_saved(prim: Primitive, args: list, params: dict, known: list) -> Any:
    """``bind(prim, args, params)`` whose outputs are already ``known`` (a checkpoint policy kept
    them): under reverse mode the primitive is recorded with them instead of run again."""
    top = max((a for a in args if isinstance(a, Tracer)), key=lambda a: a._trace.main.level, default=None)
    if type(top) is VJPTracer and prim.vjp_forward is None:
        return top._trace.process_saved(prim, args, params, known)
    if top is None:
        return list(known) if prim.multiple_results else known[0]
    return _core.bind(prim, args, params)


def _differentiable(x: Any) -> bool:
    if type(x) is Array:
        return (d := x._value.dtype).kind in "fc" or d is _BFLOAT16
    return not isinstance(x, (bool, int, float)) and _dtypes.kind(x.dtype) in "fc"


def zeros_like_value(x: Any) -> Any:
    return _core.zeros_like(x)


def _add(a: Any, b: Any) -> Any:
    return _core.bind(_elementwise.add_p, (a, b), _NO_PARAMS)


_NO_PARAMS: dict = {}


def vjp_flat(fun: Callable, primals: Sequence[Any], has_aux: bool = False) -> tuple[Any, ...]:
    """Run ``fun`` on flat ``primals`` recording it; return ``(outs, pullback[, aux])``.

    ``pullback(cts)`` maps a list of output cotangents (``None`` = zero) to a
    list of input cotangents (zeros for inputs the outputs do not depend on).
    """
    main = _core.push_main(VJPTrace, _Record())   # not a with-block: this runs on every grad call
    try:
        trace = VJPTrace(main)
        leaves, tracers = [], []
        for i, x in enumerate(primals):
            leaf = _Leaf(i)
            leaves.append(leaf)
            tracers.append(VJPTracer(trace, x, leaf))
        result = fun(*tracers)
        if has_aux:
            result, aux = result
        outs_t = list(result)
        outs = []
        for o in outs_t:   # a loop, not a comprehension: this runs on every grad call
            outs.append(o.primal if type(o) is VJPTracer and o._trace.main is main else o)
        if has_aux:
            aux = _lower_tree(aux, main)
    finally:
        _core.pop_main(main)
    record: list[Node] = main.data
    if record.early:
        _schedule_early(record)

    def pullback(cts: Sequence[Any]) -> list:
        return backward_pass(record, outs_t, list(cts), main, primals, leaves)

    if has_aux:
        return outs, pullback, aux
    return outs, pullback


class _Record(list):
    """The recorded equations, and those among them whose backward should run as early as possible."""

    early: tuple = ()   # a tuple of nodes, set on the instance when there are any


def _schedule_early(record: _Record) -> None:
    """Move each node of a primitive with the ``"early_backward"`` trait to just before the first node
    that reads one of its outputs: walked backwards, it then runs as soon as its cotangents are complete
    (a bucket of gradients starts its all-reduce while the rest of the backward pass runs) instead of
    at its creation position. The order stays topological: the node still follows its inputs."""
    for node in record.early:
        start = record.index(node)
        outputs = {(node, i) for i in range(len(node.outs))}
        for j in range(start + 1, len(record)):
            if any(p in outputs for p in record[j].parents if type(p) is tuple):
                if j > start + 1:
                    del record[start]
                    record.insert(j - 1, node)
                break


def _lower(x: Any, main: MainTrace) -> Any:
    if isinstance(x, VJPTracer) and x._trace.main is main:
        return x.primal
    return x


def _lower_tree(tree: Any, main: MainTrace) -> Any:
    return _tree_util.tree_map(lambda x: _lower(x, main), tree)


def backward_pass(record: list, outs: list, cts: list, main: MainTrace, primals: Sequence[Any],
                  leaves: Sequence[_Leaf]) -> list:
    """Propagate output cotangents back to the inputs through the record."""
    ct_of: dict = {}   # record key -> accumulated cotangent
    for out, ct in zip(outs, cts):
        if ct is not None and type(out) is VJPTracer and out._trace.main is main and out.key is not None:
            prev = ct_of.get(out.key)
            ct_of[out.key] = ct if prev is None else _add(prev, ct)

    context = _core.backward_context()   # this thread's (debug_nans names the running rule)
    pop = ct_of.pop
    for node in reversed(record):
        if node.rule is None and not node.prim.multiple_results:
            ct = pop(node, None)
            if ct is None:
                continue
            context.append(node)  # named only if debug_nans reports
            try:
                in_cts = node.prim.vjp(ct, node.primals, node.outs[0], node.needs, **node.params)
            finally:
                context.pop()
        else:
            node_cts = [pop((node, i), None) for i in range(len(node.outs))]
            if all(c is None for c in node_cts):
                continue
            context.append(node)
            try:
                if node.rule is not None:
                    in_cts = node.rule(node_cts, node)
                else:
                    in_cts = node.prim.vjp(node_cts, node.primals, node.outs, node.needs, **node.params)
            finally:
                context.pop()
        for key, ct, primal in zip(node.parents, in_cts, node.primals):
            if key is not None and ct is not None:
                if type(ct) is not Array or type(primal) is not Array or ct._value.dtype is not primal._value.dtype:
                    ct = _in_dtype_of(ct, primal)
                prev = ct_of.get(key)
                ct_of[key] = ct if prev is None else _add(prev, ct)

    in_cts = []
    for leaf, p in zip(leaves, primals):
        ct = ct_of.get(leaf)
        if ct is None:
            ct = zeros_like_value(p)
        elif type(ct) is not Array or type(p) is not Array or ct._value.dtype is not p._value.dtype:
            ct = _input_cotangent(ct, p)
        in_cts.append(ct)
    return in_cts


def _input_cotangent(ct: Any, primal: Any) -> Any:
    """The cotangent of a differentiated input, of another dtype than the input's."""
    if _dtypes.kind(primal.dtype) == "f" and _dtypes.kind(getattr(ct, "dtype", primal.dtype)) == "c":
        # a real input that met complex values (lax ops on mixed dtypes): its cotangent is the real part
        ct = _core.bind(_elementwise.real_p, (ct,), _NO_PARAMS)
    return _in_dtype_of(ct, primal)


def _in_dtype_of(ct: Any, primal: Any) -> Any:
    """``ct`` in ``primal``'s dtype when both are of different float dtypes (JAX's rule: a cotangent has
    its primal's dtype).

    A rule may leave a wider one: a bfloat16 value used in float32 arithmetic (a loss summed in
    float32) gets a float32 cotangent from the convert's transpose, a rule mixing in a float32
    constant promotes. Cast back at each input, the backward pass computes in the primal dtypes as
    the forward pass did, and a bfloat16 input gets a bfloat16 gradient.
    """
    if isinstance(primal, (bool, int, float)) or isinstance(ct, (bool, int, float)):
        return ct
    want, have = primal.dtype, ct.dtype
    if want == have or not (_dtypes.is_float(want) and _dtypes.is_float(have)):
        return ct
    return _core.bind(_elementwise.convert_p, (ct,), {"dtype": want})


_core.register_transform("vjp", vjp_flat)
