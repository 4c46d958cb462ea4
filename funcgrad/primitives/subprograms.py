"""Closed sub-programs of control-flow primitives: tracing them, running them, transforming them.

A control-flow primitive (:mod:`funcgrad.primitives.control_flow`) holds
its branches and loop bodies as :class:`funcgrad._ir.SubProgram` values.
Its rules build new sub-programs from old ones -- the jvp of a body
(:func:`jvp_sub`), a body batched over some inputs (:func:`vmap_sub`),
which outputs a batched body maps (:func:`batched_outputs`) -- by tracing a
function that applies the old one under the transform. The transforms are
reached through ``funcgrad._core.transform`` (the interpreters register
them), so this module sits below them.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from funcgrad import _dtypes
from funcgrad import _core
from funcgrad._dtypes import ShapedArray
from funcgrad._ir import SubProgram, close_jaxpr, dce
from funcgrad.primitives.shape import move_to_front, moveaxis


def trace_sub(fun: Callable, in_avals: Sequence[ShapedArray]) -> tuple[SubProgram, list]:
    """Trace flat ``fun`` on ``in_avals`` into a sub-program; return it and its hoisted constants."""
    jaxpr, _ = _core.transform("trace")(fun, list(in_avals))
    return close_jaxpr(jaxpr)




def run_sub(sub: SubProgram, values: Sequence[Any]) -> list:
    """Run ``sub`` on raw host buffers (what an implementation receives); raw buffers out.

    A compiled sub-program runs its compiled form; otherwise each equation
    is evaluated eagerly, as the user's Python would have been.
    """
    if sub.program is not None:
        return sub.program.run_buffers(values)
    wrapped = [v if isinstance(v, (bool, int, float)) else _core._wrap(v) for v in values]
    return [_core.as_array(o)._value for o in sub(*wrapped)]


def is_float(aval: Any) -> bool:
    return _dtypes.kind(aval.dtype) in "fc"


def aval_of(x: Any) -> ShapedArray:
    return _core.get_aval(x)






def instantiate(ct: Any, like: Any) -> Any:
    return _core.zeros_like(like) if ct is None else ct


def jvp_sub(sub: SubProgram, groups: Sequence[int], float_masks: Sequence[Sequence[bool]],
            out_groups: Sequence[int] | None = None) -> SubProgram:
    """The jvp of ``sub`` as a sub-program, tangents interleaved by groups.

    ``sub``'s inputs come in consecutive groups of sizes ``groups`` (a
    loop's consts, carries, inputs); in the new program each group is
    followed by the tangents of its float inputs (``float_masks``). Outputs
    likewise, by ``out_groups`` (default: one group): each group's primal
    outputs, then the tangents of its float outputs.
    """
    avals = sub.in_avals
    in_avals, start = [], 0
    for size, mask in zip(groups, float_masks):
        group = avals[start:start + size]
        in_avals += group + [a for a, m in zip(group, mask) if m]
        start += size
    out_float = [is_float(a) for a in sub.out_avals]
    out_groups = [len(out_float)] if out_groups is None else list(out_groups)

    def fun(*args: Any) -> list:
        primals, tangents, pos = [], [], 0
        for size, mask in zip(groups, float_masks):
            primals += args[pos:pos + size]
            pos += size
            for m in mask:
                tangents.append(args[pos] if m else None)
                pos += m
        outs, touts = _core.transform("jvp")(sub, primals, tangents)
        result, start = [], 0
        for size in out_groups:
            result += outs[start:start + size]
            result += [t for t, f in zip(touts[start:start + size], out_float[start:start + size]) if f]
            start += size
        return result

    return closed(fun, in_avals)


def closed(fun: Callable, in_avals: Sequence[ShapedArray]) -> SubProgram:
    """Trace a rule's ``fun`` into a sub-program. Rules pass every traced value in as an argument,
    so the constants their tracing makes (zeros, literals) are concrete and stay inside."""
    jaxpr, _ = _core.transform("trace")(fun, list(in_avals))
    if any(isinstance(c, _core.Tracer) for c in jaxpr.consts):
        raise AssertionError("a control-flow rule closed over a traced value")
    return SubProgram(dce(jaxpr))   # a vjp's forward values that the rule does not return go


def batched_aval(aval: ShapedArray, dim: int | None, size: int) -> ShapedArray:
    if dim is None:
        return aval
    shape = list(aval.shape)
    shape.insert(dim, size)
    return ShapedArray(tuple(shape), aval.dtype)


def vmap_sub(sub: SubProgram, in_dims: Sequence[int | None], size: int,
             out_dims: Sequence[int | None]) -> SubProgram:
    """``sub`` batched: inputs mapped on ``in_dims``, outputs on ``out_dims`` (None: unmapped)."""
    in_avals = [batched_aval(a, d, size) for a, d in zip(sub.in_avals, in_dims)]

    def fun(*args: Any) -> list:
        return _core.transform("vmap")(sub, args, in_dims, size, list(out_dims))

    return closed(fun, in_avals)


def batched_outputs(sub: SubProgram, in_dims: Sequence[int | None], size: int) -> list[bool]:
    """Which outputs of ``sub`` depend on its mapped inputs (found by tracing, nothing runs)."""
    in_avals = [batched_aval(a, d, size) for a, d in zip(sub.in_avals, in_dims)]
    found: list = []

    def fun(*args: Any) -> list:
        _, dims = _core.transform("vmap_dims")(sub, args, in_dims, size)
        found.append([d is not None for d in dims])
        return []

    _core.transform("trace")(fun, in_avals)
    return found[0]


def to_dim(x: Any, d: int | None, want: int | None, size: int) -> Any:
    """``x`` (mapped on ``d``) mapped on ``want``: moved, or broadcast if it was unmapped."""
    if want is None:
        return x
    return moveaxis(move_to_front(x, d, size), 0, want)






def split(values: Sequence[Any], *sizes: int) -> list[list]:
    parts, start = [], 0
    for size in sizes:
        parts.append(list(values[start:start + size]))
        start += size
    parts.append(list(values[start:]))
    return parts


def unpack(values: Sequence[Any], mask: Sequence[bool]) -> list:
    """``values`` (one per True in ``mask``) spread over ``mask``, None where it is False."""
    it = iter(values)
    return [next(it) if m else None for m in mask]


def float_masks(*groups: Sequence[Any]) -> list[list[bool]]:
    return [[is_float(aval_of(v)) for v in g] for g in groups]
