"""Batching (vmap): tracers carry a value and the axis that is mapped (or None)."""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

from funcgrad import _core
from funcgrad._core import ConcretizationError, Primitive, Trace, Tracer
from funcgrad._dtypes import ShapedArray
from funcgrad.primitives.collectives import NAMED_RULES
from funcgrad.primitives.indexing import batch_by_loop
from funcgrad.primitives.shape import move_to_front, moveaxis


class BatchTracer(Tracer):
    __slots__ = ("value", "bdim")

    def __init__(self, trace: "BatchTrace", value: Any, bdim: int | None):
        self._trace = trace
        self.value = value
        self.bdim = bdim

    @property
    def aval(self):
        aval = _core.get_aval(self.value)
        if self.bdim is None:
            return aval
        shape = aval.shape[:self.bdim] + aval.shape[self.bdim + 1:]
        return ShapedArray(shape, aval.dtype)

    def concrete_value(self):
        if self.bdim is None:
            v = self.value
            return v.concrete_value() if isinstance(v, Tracer) else v
        raise ConcretizationError(
            f"a Python value (bool/int/float/if/while) was needed from an array {_core.describe(self)} "
            "that vmap maps over, so it differs between examples. Use fnp.where or lax.cond (each "
            "example takes its own branch), lax.while_loop (each example stops at its own step), or "
            "compute the condition outside vmap, instead of Python control flow.")


class AxisData:
    """What a vmap maps over: the axis size and its name (None: unnamed), for collectives."""

    __slots__ = ("size", "axis_name")

    def __init__(self, size: int, axis_name: Any = None):
        self.size = size
        self.axis_name = axis_name


class _RuleContext(threading.local):
    # The name of the vmap whose batching rule is running in this thread: a rule that maps a
    # function over the same axis again (a loop body, a branch, a called program) maps it under
    # that name, so collectives inside still find it.
    axis_name: Any = None


_rule_context = _RuleContext()
_INHERIT = object()


class BatchTrace(Trace):
    __slots__ = ()

    @property
    def axis_size(self) -> int:
        return self.main.data.size

    @property
    def axis_name(self) -> Any:
        return self.main.data.axis_name

    def pure(self, value: Any) -> BatchTracer:
        return BatchTracer(self, value, None)

    lift = pure

    def process_primitive(self, prim: Primitive, args: list, params: dict) -> Any:
        tracers = [self.full_raise(a) for a in args]
        values = [t.value for t in tracers]
        dims = [t.bdim for t in tracers]
        name = self.main.data.axis_name
        if name is not None and prim in NAMED_RULES and name in params["axes"]:
            out, out_dim = NAMED_RULES[prim](values, dims, self.axis_size, name, **params)
            return BatchTracer(self, out, out_dim)
        if all(d is None for d in dims):
            return _core.bind(prim, values, params)
        rule = prim.batch if prim.batch is not None else batch_by_loop(prim)
        if name is None:
            out, out_dim = rule(values, dims, self.axis_size, **params)
        else:
            previous, _rule_context.axis_name = _rule_context.axis_name, name
            try:
                out, out_dim = rule(values, dims, self.axis_size, **params)
            finally:
                _rule_context.axis_name = previous
        if prim.multiple_results:
            return [BatchTracer(self, o, d) for o, d in zip(out, out_dim)]
        return BatchTracer(self, out, out_dim)

    def _to_front(self, tracers: list) -> tuple[list, list, list, int]:
        """The tracers' values with mapped axes moved first: ``(values, dims, dims at 0, size)``."""
        dims = [t.bdim for t in tracers]
        moved = [t.value if d is None else moveaxis(t.value, d, 0) for t, d in zip(tracers, dims)]
        return moved, dims, [None if d is None else 0 for d in dims], self.axis_size

    def process_custom_vjp(self, call: _core.CustomVJPCall, tracers: list) -> list:
        # Batch the function and both halves of its rule, then bind one level down.
        moved, dims, dims0, size = self._to_front(tracers)

        name = self.axis_name

        def fun(*xs):
            return vmap_flat(call.fun, xs, dims0, size, axis_name=name)

        def fwd(*xs):
            n_out: list[int] = []

            def flat_fwd(*ys):
                outs, res = call.fwd(*ys)
                n_out.append(len(list(outs)))
                return list(outs) + list(res)

            both = vmap_flat(flat_fwd, xs, dims0, size, axis_name=name)
            return both[:n_out[0]], both[n_out[0]:]

        def bwd(residuals, cts):
            n_res = len(residuals)

            def flat_bwd(*ys):
                return list(call.bwd(list(ys[:n_res]), list(ys[n_res:])))

            in_cts = vmap_flat(flat_bwd, list(residuals) + list(cts), [0] * (n_res + len(cts)), size,
                               axis_name=name)
            # An input that was not batched gets the sum of its per-example cotangents.
            return [ct if d is not None else ct.sum(axis=0) for ct, d in zip(in_cts, dims)]

        outs = _core.CustomVJPCall(call.name, fun, fwd, bwd).bind(*moved)
        return [BatchTracer(self, o, 0) for o in outs]

    def process_custom_jvp(self, call: _core.CustomJVPCall, tracers: list) -> list:
        # Batch the function and its rule (a tangent is batched where its primal is), then bind one level down.
        moved, dims, dims0, size = self._to_front(tracers)
        name = self.axis_name

        def fun(*xs):
            return vmap_flat(call.fun, xs, dims0, size, axis_name=name)

        def jvp(primals, tangents):
            n_in, n_out = len(primals), []

            def flat_rule(*ys):
                outs, tangent_outs = call.jvp(list(ys[:n_in]), list(ys[n_in:]))
                outs, tangent_outs = list(outs), list(tangent_outs)
                n_out.append(len(outs))
                return outs + tangent_outs

            both = vmap_flat(flat_rule, list(primals) + list(tangents), dims0 + dims0, size, axis_name=name)
            return both[:n_out[0]], both[n_out[0]:]

        outs = _core.CustomJVPCall(call.name, fun, jvp).bind(*moved)
        return [BatchTracer(self, o, 0) for o in outs]


def vmap_flat(fun: Callable, args: Sequence[Any], in_dims: Sequence[int | None], axis_size: int,
              out_dims: Any = 0, axis_name: Any = _INHERIT) -> list:
    """Map flat ``fun`` over axis ``in_dims`` of ``args``; outputs moved to ``out_dims``.

    ``axis_name`` names the mapped axis for collectives; by default a batching rule's own
    mapping of a function inherits the name of the vmap running the rule."""
    values, dims = vmap_flat_dims(fun, args, in_dims, axis_size, axis_name)
    if callable(out_dims):  # a pytree prefix resolved once the outputs are known
        out_dims = out_dims()
    if not isinstance(out_dims, (list, tuple)):
        out_dims = [out_dims] * len(values)
    return [_to_out_dim(v, d, od, axis_size) for v, d, od in zip(values, dims, out_dims)]


def vmap_flat_dims(fun: Callable, args: Sequence[Any], in_dims: Sequence[int | None], axis_size: int,
                   axis_name: Any = _INHERIT) -> tuple[list, list]:
    """Map flat ``fun`` like :func:`vmap_flat`, returning each output where it came out: ``(values, dims)``
    (dim None: the output does not depend on the mapped inputs). Control-flow rules use it to find
    which loop carries become mapped."""
    if axis_name is _INHERIT:
        axis_name = _rule_context.axis_name
    previous, _rule_context.axis_name = _rule_context.axis_name, None   # the function itself is not a rule
    if axis_name is not None:
        _named_vmap_entered()
    try:
        with _core.new_main(BatchTrace, AxisData(axis_size, axis_name)) as main:
            trace = BatchTrace(main)
            tracers = [BatchTracer(trace, a, d) if d is not None else a for a, d in zip(args, in_dims)]
            values, dims = [], []
            for o in fun(*tracers):
                if isinstance(o, BatchTracer) and o._trace.main is main:
                    values.append(o.value)
                    dims.append(o.bdim)
                else:
                    values.append(o)
                    dims.append(None)
    finally:
        _rule_context.axis_name = previous
        if axis_name is not None:
            _named_vmap_left()
    return values, dims


# While a named vmap runs (in any thread), bind's inlined eager fast path is off: every eager
# evaluation goes through apply_primitive, where a collective over the vmap's name on a value the
# vmap does not map is handed back to the vmap (see _core.EAGER_CLAIMS).
_named_lock = threading.Lock()
_named_active = [0, True]   # [named vmaps running, the fast-path setting before the first]


def _named_vmap_entered() -> None:
    with _named_lock:
        if _named_active[0] == 0:
            _named_active[1] = _core.set_fast_path(False)
        _named_active[0] += 1


def _named_vmap_left() -> None:
    with _named_lock:
        _named_active[0] -= 1
        if _named_active[0] == 0:
            _core.set_fast_path(_named_active[1])


_core.register_transform("vmap", vmap_flat)
_core.register_transform("vmap_dims", vmap_flat_dims)


def _to_out_dim(value: Any, bdim: int | None, out_dim: int | None, size: int) -> Any:
    if out_dim is None:
        if bdim is not None:
            raise ValueError("vmap: out_axes=None was given for an output that depends on the mapped inputs")
        return value
    value = move_to_front(_core.as_array(value), bdim, size)
    ndim = _core.get_aval(value).ndim
    if not -ndim <= out_dim < ndim:
        raise ValueError(f"vmap: out_axes={out_dim} is out of range for an output of rank {ndim}")
    return moveaxis(value, 0, out_dim % ndim)
