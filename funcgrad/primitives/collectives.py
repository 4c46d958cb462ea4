"""Collectives over named axes: psum, pmax, pmin, all_gather, psum_scatter, ppermute, all_to_all.

A collective names the axes it runs over (``axes``, a tuple of names). Two kinds of axis exist:

* a **vmap axis**, bound by ``vmap(f, axis_name=...)``: the examples of the batch play the part of
  devices, and the batching rule of the vmap with that name carries the collective out over the
  mapped axis (:data:`NAMED_RULES`);
* the **process axis** (:data:`PROCESS_AXIS`), always bound: the processes of the world. The host
  implementation runs it through the process world's communicator (MPI), which
  ``funcgrad.distributed`` registers with :func:`set_process_world`; without one (or in a
  one-process world) it is the size-1 case.

A collective over several names handles them one at a time: each vmap with one of the names does its
part and binds the collective again with the remaining names.

Derivatives follow JAX's ``shard_map`` (not legacy ``pmap``): each device differentiates its own
copy of the program, so the transpose of ``psum`` is the identity (the cotangent of the reduced,
identical-everywhere value is each device's own), ``all_gather`` and ``psum_scatter`` transpose into
each other, ``ppermute`` into the inverse permutation and ``all_to_all`` into the swapped one. On each
device, ``grad(lambda x: psum(x * x, name).sum())(x) == 2 * x``.

Collectives carry the ``"effect"`` trait: a compiled program runs them as their own steps, in
program order, and never drops one whose result is unused (the other devices wait for it).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _core
from funcgrad._core import Primitive, add_traits, get_aval
from funcgrad._dtypes import ShapedArray, describe
from funcgrad.primitives.elementwise import convert, div, eq, mul
from funcgrad.primitives.indexing import concatenate_p, static_slice
from funcgrad.primitives.reduce import reduce_max_p, reduce_min_p
from funcgrad.primitives.shape import (broadcast_to, move_to_front, moveaxis, reduce_sum, reshape, shape_of,
                                       sum_dtype)

#: The name of the axis that runs across the processes of the world.
PROCESS_AXIS = "processes"


# --------------------------------------------------------------------------
# The process world (registered from funcgrad.distributed)
# --------------------------------------------------------------------------

class _OneProcess:
    """The world of a plain ``python`` run: one process, no communication."""

    def size(self) -> int:
        return 1

    def rank(self) -> int:
        return 0

    def run(self, prim: Primitive, x: np.ndarray, params: dict, check: Any) -> np.ndarray:
        return size_one(prim, x, params)


_world: list = [_OneProcess()]


def set_process_world(world: Any) -> None:
    """Make ``world`` run the collectives over :data:`PROCESS_AXIS` on host buffers.

    ``world.size()``, ``world.rank()`` and ``world.run(prim, buffer, params, check) -> buffer``
    for each collective primitive of this module (``params`` without ``axes`` and ``check``;
    ``check``: a :class:`Handshake` or None).
    """
    _world[0] = world


def process_world() -> Any:
    return _world[0]


class Handshake:
    """A collective's "check the ranks agree once" token: a jitted program holds one per collective
    (checked on its first run); eager calls have none (checked under ``distributed_debug``)."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = False

    def __repr__(self) -> str:
        return "Handshake"


def _tracing_for_jit() -> bool:
    return any(m.trace_type.__name__ == "JaxprTrace" for m in _core.trace_stack())


# --------------------------------------------------------------------------
# Axis names: where each is bound, and its size
# --------------------------------------------------------------------------

def axes_of(axis_name: Any) -> tuple:
    """``axis_name`` (a name or a tuple of names) as a tuple of names."""
    names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    for n in names:
        try:
            hash(n)
        except TypeError:
            raise TypeError(f"axis names must be hashable (strings, usually), got {n!r}") from None
    if len(set(names)) != len(names):
        raise ValueError(f"axis_name {axis_name!r} names an axis twice")
    return names


def find_axis(name: Any) -> _core.MainTrace | None:
    """The innermost active vmap bound to ``name`` (None: not bound by a vmap)."""
    for main in reversed(_core.trace_stack()):
        if getattr(main.data, "axis_name", None) == name:
            return main
    return None


def check_bound(op: str, axes: Sequence[Any]) -> None:
    """Raise NameError for a name that no vmap binds (the process axis is always bound)."""
    for name in axes:
        if name != PROCESS_AXIS and find_axis(name) is None:
            raise NameError(f"unbound axis name: {name!r} ({op}). Names are bound by "
                            f"vmap(f, axis_name={name!r}) around the call; {PROCESS_AXIS!r} "
                            "(funcgrad.distributed.PROCESS_AXIS) is always bound to the processes")


def axis_size(name: Any) -> int:
    """The size of the axis bound to ``name``."""
    if name == PROCESS_AXIS and find_axis(name) is None:
        return _world[0].size()
    main = find_axis(name)
    if main is None:
        check_bound("axis_size", (name,))
    return main.data.size   # type: ignore[union-attr]


def total_size(axes: Sequence[Any]) -> int:
    n = 1
    for name in axes:
        n *= axis_size(name)
    return n


# --------------------------------------------------------------------------
# Binding: at the vmap that binds a name, even when no argument is one of its tracers
# --------------------------------------------------------------------------

def bind_collective(prim: Primitive, x: Any, **params: Any) -> Any:
    """Apply ``prim`` to ``x`` over ``params["axes"]``.

    The collective goes to the innermost transform among ``x``'s and the vmaps that bind its
    names: ``psum(c, "i")`` of a value ``c`` that vmap "i" does not map is still that vmap's
    business (``c * axis_size``).
    """
    axes = params["axes"]
    check_bound(prim.name, axes)
    if not axes:
        return x
    params.setdefault("check", Handshake() if _tracing_for_jit() else None)
    mains = [m for m in (find_axis(n) for n in axes) if m is not None]
    main = max(mains, key=lambda m: m.level, default=None)
    top = x._trace.main.level if isinstance(x, _core.Tracer) else 0
    if main is not None and main.level > top:
        trace = main.trace_type(main)
        return trace.process_primitive(prim, [trace.full_raise(x)], params)
    return _core.bind(prim, (x,), params)


def _claim(prim: Primitive, args: Sequence[Any], params: dict) -> Any:
    """A collective over the name of an active vmap, re-bound on a value that vmap does not map
    (a grad or jvp inside the vmap evaluating its primal): still that vmap's to carry out."""
    if any(find_axis(name) is not None for name in params["axes"]):
        return bind_collective(prim, args[0], **params)
    return NotImplemented


def _rest(axes: tuple, name: Any) -> tuple:
    return tuple(a for a in axes if a != name)


# --------------------------------------------------------------------------
# The size-1 case (a one-process world) on host buffers
# --------------------------------------------------------------------------

def size_one(prim: Primitive, x: np.ndarray, params: dict) -> np.ndarray:
    """``prim`` over an axis of size 1 (a one-process world) on a host buffer (never a view of ``x``:
    a compiled program may reuse ``x``'s buffer once this step has run)."""
    out = _size_one(prim.name, x, params)
    return out.copy() if np.may_share_memory(out, x) else out


def _size_one(kind: str, x: np.ndarray, params: dict) -> np.ndarray:
    if kind == "psum":
        return x.astype(sum_dtype(x.dtype)) if x.dtype.kind == "b" else x
    if kind in ("pmax", "pmin", "pvary"):
        return x
    if kind == "all_gather":
        return x if params["tiled"] else np.expand_dims(x, params["axis"])
    if kind == "psum_scatter":
        return x if params["tiled"] else np.squeeze(x, params["scatter_dimension"])
    if kind == "ppermute":
        return x if (0, 0) in params["perm"] else np.zeros_like(x)
    if kind == "pbroadcast":
        return x
    if kind == "all_to_all":
        if params["tiled"]:
            return x
        return np.expand_dims(np.squeeze(x, params["split_axis"]), params["concat_axis"])
    raise ValueError(f"unknown collective {kind}")


# --------------------------------------------------------------------------
# Shape rules (per device), shared by the abstract evaluation and the checks
# --------------------------------------------------------------------------

def _check_axis(op: str, x: Any, axis: int, ndim: int, what: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"{op}: {what}={axis} is out of range for an operand {describe(x)}")
    return axis % ndim


def out_aval(kind: str, x: Any, n: int, params: dict) -> ShapedArray:
    """The shape/dtype of ``kind`` applied to ``x`` on a device, the axes of size ``n`` in all."""
    aval = x if isinstance(x, ShapedArray) else get_aval(x)
    shape, dtype = aval.shape, aval.dtype
    if kind == "psum":
        return ShapedArray(shape, sum_dtype(dtype) if dtype.kind == "b" else dtype)
    if kind in ("pmax", "pmin"):
        if dtype.kind == "c":
            raise TypeError(f"{kind}: not defined for complex operands ({describe(aval)}); reduce fnp.real(z), "
                            "fnp.imag(z) or fnp.abs(z) instead")
        return aval
    if kind == "all_gather":
        if params["tiled"]:
            if not shape:
                raise ValueError(f"all_gather: tiled=True needs an operand of rank >= 1, got {describe(aval)}")
            a = _check_axis(kind, aval, params["axis"], len(shape), "axis")
            return ShapedArray(shape[:a] + (shape[a] * n,) + shape[a + 1:], dtype)
        a = _check_axis(kind, aval, params["axis"], len(shape) + 1, "axis")
        return ShapedArray(shape[:a] + (n,) + shape[a:], dtype)
    if kind == "psum_scatter":
        d = _check_axis(kind, aval, params["scatter_dimension"], max(len(shape), 1), "scatter_dimension")
        if not shape:
            raise ValueError(f"psum_scatter: needs an operand of rank >= 1, got {describe(aval)}")
        out_dtype = sum_dtype(dtype) if dtype.kind == "b" else dtype
        if params["tiled"]:
            if shape[d] % n:
                raise ValueError(f"psum_scatter: dimension {d} of {describe(aval)} ({shape[d]}) must be divisible "
                                 f"by the axis size {n} (tiled=True)")
            return ShapedArray(shape[:d] + (shape[d] // n,) + shape[d + 1:], out_dtype)
        if shape[d] != n:
            raise ValueError(f"psum_scatter: dimension {d} of {describe(aval)} ({shape[d]}) must equal the axis "
                             f"size {n} (tiled=False; with tiled=True it need only be divisible by it)")
        return ShapedArray(shape[:d] + shape[d + 1:], out_dtype)
    if kind in ("ppermute", "pvary"):
        return aval
    if kind == "pbroadcast":
        if not 0 <= params["source"] < n:
            raise ValueError(f"pbroadcast: source {params['source']} is outside the axis of size {n}")
        return aval
    if kind == "all_to_all":
        s = _check_axis(kind, aval, params["split_axis"], max(len(shape), 1), "split_axis")
        if not shape:
            raise ValueError(f"all_to_all: needs an operand of rank >= 1, got {describe(aval)}")
        if params["tiled"]:
            c = _check_axis(kind, aval, params["concat_axis"], len(shape), "concat_axis")
            if shape[s] % n:
                raise ValueError(f"all_to_all: split_axis {s} of {describe(aval)} ({shape[s]}) must be divisible "
                                 f"by the axis size {n}")
            out = list(shape)
            out[s] //= n
            out[c] *= n
            return ShapedArray(tuple(out), dtype)
        if shape[s] != n:
            raise ValueError(f"all_to_all: split_axis {s} of {describe(aval)} ({shape[s]}) must equal the axis "
                             f"size {n} (tiled=False; with tiled=True it need only be divisible by it)")
        rest = shape[:s] + shape[s + 1:]
        c = _check_axis(kind, aval, params["concat_axis"], len(rest) + 1, "concat_axis")
        return ShapedArray(rest[:c] + (n,) + rest[c:], dtype)
    raise ValueError(f"unknown collective {kind}")


# --------------------------------------------------------------------------
# The primitives
# --------------------------------------------------------------------------

KINDS = ("psum", "pmax", "pmin", "all_gather", "psum_scatter", "ppermute", "all_to_all", "pbroadcast", "pvary")
#: vmap rules for a collective over the vmap's own name: ``rule(values, dims, size, name, **params)``.
NAMED_RULES: dict[Primitive, Callable] = {}


def _host_impl(p: Primitive) -> Callable:
    kind = p.name

    def impl(x, *, axes, check=None, **params):
        x = np.asarray(x)
        for name in axes:
            if name != PROCESS_AXIS:
                raise NameError(f"unbound axis name: {name!r} ({kind}): a compiled program ran the collective "
                                "outside the vmap that binds the name")
        world = _world[0]
        if kind == "ppermute":
            _check_perm(params["perm"], world.size())
        out_aval(kind, x, world.size(), params)   # bad shapes raise here, on every rank alike
        return world.run(p, x, params, check)
    return impl


def _abstract_eval(kind: str) -> Callable:
    def rule(x, *, axes, check=None, **params):
        return out_aval(kind, x, total_size(axes), params)
    return rule


def _declare(kind: str) -> Primitive:
    p = Primitive(kind)
    p.impl = _host_impl(p)
    p.abstract_eval = _abstract_eval(kind)
    p.batch = _batch_other_axis(p, kind)
    add_traits(p, "effect")
    _core.EAGER_CLAIMS[p] = _claim
    return p


def _shift_params(kind: str, params: dict) -> dict:
    """The parameters for the operand with one more (mapped) axis in front."""
    out = dict(params)
    for key in ("axis", "scatter_dimension", "split_axis", "concat_axis"):
        if key in out:
            out[key] = out[key] + 1 if out[key] >= 0 else out[key]
    return out


def _batch_other_axis(p: Primitive, kind: str) -> Callable:
    """vmap rule for a collective over names other than this vmap's: each example takes part on its own."""
    def rule(values, dims, size, **params):
        x = move_to_front(values[0], dims[0], size)
        if kind not in ("psum", "pmax", "pmin", "ppermute"):
            params = _shift_params(kind, params)
        params["check"] = Handshake() if _tracing_for_jit() else None
        return bind_collective(p, x, **params), 0
    return rule


psum_p = _declare("psum")
pmax_p = _declare("pmax")
pmin_p = _declare("pmin")
all_gather_p = _declare("all_gather")
psum_scatter_p = _declare("psum_scatter")
ppermute_p = _declare("ppermute")
all_to_all_p = _declare("all_to_all")
pbroadcast_p = _declare("pbroadcast")
# pvary: the value as it is, marked as differing between the devices (lax.pcast(x, name, to="varying")):
# its transpose is psum, so a replicated value used per device collects every device's cotangent.
pvary_p = _declare("pvary")


# --------------------------------------------------------------------------
# Applying them (rules use these: each makes a fresh handshake token)
# --------------------------------------------------------------------------

def psum(x: Any, axes: tuple) -> Any:
    return bind_collective(psum_p, x, axes=axes)


def pmax(x: Any, axes: tuple) -> Any:
    return bind_collective(pmax_p, x, axes=axes)


def pmin(x: Any, axes: tuple) -> Any:
    return bind_collective(pmin_p, x, axes=axes)


def all_gather(x: Any, axes: tuple, axis: int = 0, tiled: bool = False) -> Any:
    return bind_collective(all_gather_p, x, axes=axes, axis=axis, tiled=tiled)


def psum_scatter(x: Any, axes: tuple, scatter_dimension: int = 0, tiled: bool = False) -> Any:
    return bind_collective(psum_scatter_p, x, axes=axes, scatter_dimension=scatter_dimension, tiled=tiled)


def ppermute(x: Any, axes: tuple, perm: tuple) -> Any:
    return bind_collective(ppermute_p, x, axes=axes, perm=perm)


def pvary(x: Any, axes: tuple) -> Any:
    return bind_collective(pvary_p, x, axes=axes)


def pbroadcast(x: Any, axes: tuple, source: int) -> Any:
    return bind_collective(pbroadcast_p, x, axes=axes, source=source)


def all_to_all(x: Any, axes: tuple, split_axis: int, concat_axis: int, tiled: bool = False) -> Any:
    return bind_collective(all_to_all_p, x, axes=axes, split_axis=split_axis, concat_axis=concat_axis, tiled=tiled)


# --------------------------------------------------------------------------
# Derivatives (shard_map's convention; see the module docstring)
# --------------------------------------------------------------------------

def _psum_jvp(primals, tangents, axes, check=None):
    return psum(primals[0], axes), psum(tangents[0], axes)


def _psum_vjp(ct, primals, out, needs, axes, check=None):
    return (ct,)


def _chooser_jvp(p: Primitive) -> Callable:
    def jvp(primals, tangents, axes, check=None):
        x, t = primals[0], tangents[0]
        out = bind_collective(p, x, axes=axes)
        weights = _chooser_weights(x, out, axes)
        return out, psum(mul(t, weights), axes)
    return jvp


def _chooser_weights(x: Any, out: Any, axes: tuple) -> Any:
    """1/count where a device holds the extreme value (ties share the derivative, as max's), else 0."""
    hit = convert(eq(x, out), get_aval(x).dtype)
    return div(hit, psum(hit, axes))


def _chooser_vjp(ct, primals, out, needs, axes, check=None):
    return (mul(ct, _chooser_weights(primals[0], out, axes)),)


def _linear_jvp(p: Primitive) -> Callable:
    def jvp(primals, tangents, **params):
        params.pop("check", None)
        return bind_collective(p, primals[0], **params), bind_collective(p, tangents[0], **params)
    return jvp


def _all_gather_vjp(ct, primals, out, needs, axes, axis, tiled, check=None):
    ndim = len(shape_of(primals[0]))
    axis = axis % (ndim if tiled else ndim + 1)
    return (psum_scatter(ct, axes, scatter_dimension=axis, tiled=tiled),)


def _psum_scatter_vjp(ct, primals, out, needs, axes, scatter_dimension, tiled, check=None):
    d = scatter_dimension % len(shape_of(primals[0]))
    return (all_gather(ct, axes, axis=d, tiled=tiled),)


def _ppermute_vjp(ct, primals, out, needs, axes, perm, check=None):
    return (ppermute(ct, axes, tuple((d, s) for s, d in perm)),)


def _all_to_all_vjp(ct, primals, out, needs, axes, split_axis, concat_axis, tiled, check=None):
    ndim = len(shape_of(primals[0]))
    s = split_axis % ndim
    c = concat_axis % (ndim if tiled else ndim)
    return (all_to_all(ct, axes, split_axis=c, concat_axis=s, tiled=tiled),)


def _pbroadcast_vjp(ct, primals, out, needs, axes, source, check=None):
    # The output is the same everywhere and only the source's operand made it: the source keeps its
    # own cotangent, the others get zeros (as psum's transpose keeps each device's own).
    return (ppermute(ct, axes, ((source, source),)),)


psum_p.jvp, psum_p.vjp = _psum_jvp, _psum_vjp
pvary_p.jvp, pvary_p.vjp = _linear_jvp(pvary_p), lambda ct, primals, out, needs, axes, check=None: (psum(ct, axes),)
pbroadcast_p.jvp, pbroadcast_p.vjp = _linear_jvp(pbroadcast_p), _pbroadcast_vjp
pmax_p.jvp, pmax_p.vjp = _chooser_jvp(pmax_p), _chooser_vjp
pmin_p.jvp, pmin_p.vjp = _chooser_jvp(pmin_p), _chooser_vjp
all_gather_p.jvp, all_gather_p.vjp = _linear_jvp(all_gather_p), _all_gather_vjp
psum_scatter_p.jvp, psum_scatter_p.vjp = _linear_jvp(psum_scatter_p), _psum_scatter_vjp
ppermute_p.jvp, ppermute_p.vjp = _linear_jvp(ppermute_p), _ppermute_vjp
all_to_all_p.jvp, all_to_all_p.vjp = _linear_jvp(all_to_all_p), _all_to_all_vjp


# --------------------------------------------------------------------------
# vmap over the collective's own name: the examples are the devices
# --------------------------------------------------------------------------
# Each rule moves the mapped axis to the front (an unmapped operand is the same on every
# example: broadcast), computes what every example receives with primitives (so the result is
# differentiable again), then hands the remaining names on.

def _named_reduce(p: Primitive) -> Callable:
    kind = p.name

    def rule(values, dims, size, name, axes, check=None):
        x, d = values[0], dims[0]
        out_aval(kind, x, size, {})   # the dtype check (pmax/pmin of complex)
        if kind == "psum":
            if get_aval(x).dtype.kind == "b":
                x = convert(x, sum_dtype(get_aval(x).dtype))
            out = mul(x, size) if d is None else reduce_sum(x, (d,))
        elif d is None:
            out = x
        else:
            out = (reduce_max_p if kind == "pmax" else reduce_min_p).bind(x, axes=(d,))
        rest = _rest(axes, name)
        return (bind_collective(p, out, axes=rest) if rest else out), None
    return rule


def _merge(x: Any, a: int) -> Any:
    """``x`` with axes ``a`` and ``a + 1`` merged into one."""
    shape = shape_of(x)
    return reshape(x, shape[:a] + (shape[a] * shape[a + 1],) + shape[a + 2:])


def _split(x: Any, a: int, n: int) -> Any:
    """``x`` with axis ``a`` split into ``(n, shape[a] // n)``."""
    shape = shape_of(x)
    return reshape(x, shape[:a] + (n, shape[a] // n) + shape[a + 1:])


def _single(kind: str, name: Any, axes: tuple) -> None:
    if len(axes) > 1:
        raise NotImplementedError(f"{kind} over several axis names {axes!r} at once is not supported; apply it "
                                  f"to one name at a time (e.g. {kind}({kind}(x, {axes[-1]!r}), {axes[0]!r}))")


def _named_all_gather(values, dims, size, name, axes, axis, tiled, check=None):
    _single("all_gather", name, axes)
    x = move_to_front(values[0], dims[0], size)     # (n, *s)
    per = shape_of(x)[1:]
    out_aval("all_gather", ShapedArray(per, get_aval(x).dtype), size, {"axis": axis, "tiled": tiled})
    if tiled:
        a = axis % len(per)
        return _merge(moveaxis(x, 0, a), a), None
    return moveaxis(x, 0, axis % (len(per) + 1)), None


def _named_psum_scatter(values, dims, size, name, axes, scatter_dimension, tiled, check=None):
    _single("psum_scatter", name, axes)
    x, d = values[0], dims[0]
    x = move_to_front(x, d, size)
    per = shape_of(x)[1:]
    out_aval("psum_scatter", ShapedArray(per, get_aval(x).dtype), size,
             {"scatter_dimension": scatter_dimension, "tiled": tiled})
    total = reduce_sum(x, (0,))                        # *s, the sum over the examples
    sd = scatter_dimension % len(per)
    if tiled:
        return moveaxis(_split(total, sd, size), sd, 0), 0
    return moveaxis(total, sd, 0), 0


def _named_ppermute(values, dims, size, name, axes, perm, check=None):
    _single("ppermute", name, axes)
    x = move_to_front(values[0], dims[0], size)
    source = {dst: src for src, dst in perm}
    _check_perm(perm, size)
    pieces = []
    for k in range(size):
        if k in source:
            pieces.append(static_slice(x, 0, source[k], source[k] + 1))
        else:
            pieces.append(broadcast_to(np.zeros((), get_aval(x).dtype), (1,) + shape_of(x)[1:]))
    return concatenate_p.bind(*pieces, axis=0), 0


def _named_all_to_all(values, dims, size, name, axes, split_axis, concat_axis, tiled, check=None):
    _single("all_to_all", name, axes)
    x = move_to_front(values[0], dims[0], size)        # (j, *s): example j's operand
    per = shape_of(x)[1:]
    out_aval("all_to_all", ShapedArray(per, get_aval(x).dtype), size,
             {"split_axis": split_axis, "concat_axis": concat_axis, "tiled": tiled})
    s = split_axis % len(per)
    y = _split(x, s + 1, size)                         # (j, ..., k, chunk, ...): k at s + 1
    y = moveaxis(y, s + 1, 0)                          # (k, j, ..., chunk, ...): example k receives y[k]
    if tiled:
        c = concat_axis % len(per)
        y = moveaxis(y, 1, c + 1)                      # j just before the concat axis
        return _merge(y, c + 1), 0
    y = reshape(y, shape_of(y)[:s + 2] + shape_of(y)[s + 3:])   # drop the size-1 chunk axis
    c = concat_axis % len(per)
    return moveaxis(y, 1, c + 1), 0


def _named_pbroadcast(values, dims, size, name, axes, source, check=None):
    _single("pbroadcast", name, axes)
    x, d = values[0], dims[0]
    out_aval("pbroadcast", ShapedArray(shape_of(x), get_aval(x).dtype), size, {"source": source})
    if d is None:
        return x, None
    x = moveaxis(x, d, 0)
    piece = static_slice(x, 0, source, source + 1)
    return reshape(piece, shape_of(piece)[1:]), None


def _named_pvary(values, dims, size, name, axes, check=None):
    rest = _rest(axes, name)
    return (pvary(values[0], rest) if rest else values[0]), dims[0]


def _check_perm(perm: tuple, size: int) -> None:
    srcs, dsts = [s for s, _ in perm], [d for _, d in perm]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        raise ValueError(f"ppermute: perm {list(perm)} sends from or to an index twice; each index may appear at "
                         "most once as a source and once as a destination")
    bad = [i for i in srcs + dsts if not 0 <= i < size]
    if bad:
        raise ValueError(f"ppermute: perm {list(perm)} names index {bad[0]}, outside the axis of size {size}")


NAMED_RULES.update({psum_p: _named_reduce(psum_p), pmax_p: _named_reduce(pmax_p), pmin_p: _named_reduce(pmin_p),
                    all_gather_p: _named_all_gather, psum_scatter_p: _named_psum_scatter,
                    ppermute_p: _named_ppermute, all_to_all_p: _named_all_to_all, pbroadcast_p: _named_pbroadcast,
                    pvary_p: _named_pvary})


def normalize_perm(perm: Any) -> tuple:
    """``perm`` as a tuple of ``(source, destination)`` int pairs."""
    try:
        pairs = tuple((int(s), int(d)) for s, d in perm)
    except (TypeError, ValueError):
        raise TypeError(f"ppermute: perm must be a sequence of (source, destination) index pairs, got {perm!r}") \
            from None
    return pairs

