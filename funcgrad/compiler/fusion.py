"""Fusion: chains of elementwise primitives (and a trailing reduction) -> one kernel.

The pass walks the program in order, growing *open groups*.  An elementwise
equation joins the open group that produced one of its inputs when the
shapes agree (every member of a group has the group's iteration shape;
inputs may broadcast into it); a ``reduce_sum/max/min`` over trailing axes
may end a group, and so may one over leading axes with a 1-d result (the
bias gradient ``sum(g, axis=0)`` of the ``g`` the group makes: a column
accumulation in the same kernel, instead of a second pass over ``g``; up
to ``codegen.LEADING_MAX_ELEMENTS`` of work, as such a kernel runs
serially).  A group is *sealed* -- emitted as one ``fused`` equation --
as soon as anything outside it uses one of its values, so every input of a
group is computed before the group runs.  Intermediates that nothing outside
the group uses never leave registers.

Which primitives may join is decided by their lowerings alone
(``prim.lowerings["numba"]``, see :mod:`funcgrad.compiler.codegen`): an
:class:`~funcgrad.compiler.codegen.Elementwise` one joins, a
:class:`~funcgrad.compiler.codegen.Reduction` one may end a group.
Matmul, convolutions and shape changes have none and stay as they are
(BLAS does those).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from funcgrad._core import run_impl
from funcgrad._dtypes import ShapedArray
from funcgrad._ir import Eqn, Jaxpr, Literal, Var
from funcgrad.compiler import codegen
from funcgrad.compiler.codegen import (LEADING_MAX_ELEMENTS, PARALLEL_MIN_ELEMENTS, Elementwise, KernelSpec, Op,
                                       Reduction, compile_kernel, lowering)

# bfloat16 arrays are passed to the kernels as their uint16 bit patterns (see codegen.BF16).
_DTYPES = {np.dtype(t) for t in ("float32", "float64", "int32", "int64", "uint32", "bool")} | {codegen.BF16}


class FusedKernel:
    """A fused group, standing in the optimised IR where a primitive would.

    ``impl(*inputs, out=None)`` runs the generated kernel; ``out`` may hold
    preallocated output buffers (the program's memory plan).
    """

    multiple_results = True
    name = "fused"
    lowerings: dict = {}                       # never fused again
    traits = frozenset({"writes_out"})         # impl(..., out=[buffers]): the program's memory plan

    def __init__(self, spec: KernelSpec, layouts: list, shape: tuple, view: tuple[int, int], out_avals: list,
                 summary: str, group: tuple | None = None):
        self.spec = spec
        self.layouts = layouts            # per input: (pattern, padded shape) as in the spec
        self.shape = shape                # the iteration shape
        self.n0, self.n1 = view           # the 2-d view the kernel loops over
        self.out_avals = out_avals
        self.summary = summary
        # (equations, input vars, output vars) of the group: what runs, on numpy, until the kernel is ready.
        self.group = group
        self.prepare = codegen.runtime().prepare
        # The 2-d views of the outputs the kernel writes (the reduction's last).
        self.out_views = [view] * len(spec.outputs) + ([(view[1] if spec.leading else view[0],)]
                                                         if spec.reduction else [])
        # Outputs stored into an input's array (spec.aliases): not passed to the kernel.
        self.aliased = frozenset(spec.outputs.index(o) for o, _ in spec.aliases)
        # Whether bfloat16 arrays are among its inputs or outputs (they are passed as uint16 views).
        self.bfloat16 = any(d == codegen.BF16 for _, _, d in spec.inputs) or any(
            a.dtype == codegen.BF16 for a in out_avals)
        self.kernel: Any = None
        self._queued = False              # its compile is queued on the background thread
        self._failed = False              # ... and failed there
        mode = codegen.BACKGROUND_COMPILE
        # Compiled before it first runs (not run on numpy meanwhile): at that run, not here, as the
        # buffer plan may run its in-place variant instead (:meth:`in_place`).
        self._compile_first = group is None or mode == "off" or (mode == "exact" and not codegen.is_exact(spec))
        self.kernel = codegen.loaded_kernel(spec)   # compiled before in this process: used at once

    def __repr__(self) -> str:
        return f"fused[{self.summary}]"

    def in_place(self, pos: int, k: int) -> "FusedKernel":
        """This kernel with elementwise output ``pos`` stored into input ``k``'s array (which must be the
        output's buffer, read at the kernel's full shape): what the buffer plan runs where an output
        takes the buffer of an input that dies there."""
        spec = self.spec
        aliases = spec.aliases + ((spec.outputs[pos], spec.inputs[k][0]),)
        spec = KernelSpec(spec.inputs, spec.ops, spec.outputs, spec.reduction, spec.parallel, spec.leading, aliases)
        return FusedKernel(spec, self.layouts, self.shape, (self.n0, self.n1), self.out_avals, self.summary, self.group)

    def out_buffers(self) -> list[np.ndarray]:
        return [np.empty(a.shape, a.dtype) for a in self.out_avals]

    def impl(self, *inputs: Any, out: list | None = None) -> list:
        n0, n1 = self.n0, self.n1
        args = [_as_2d(x, pattern, self.shape, n0, n1) for x, (pattern, _) in zip(inputs, self.layouts)]
        outs = out if out is not None else self.out_buffers()
        flat = [o.reshape(n0, n1) for k, o in enumerate(outs[:len(self.spec.outputs)]) if k not in self.aliased]
        if self.spec.reduction:
            flat.append(outs[-1].reshape(self.out_views[-1]))
        if self.bfloat16:   # passed as their bit patterns
            args, flat = [kernel_view(x) for x in args], [kernel_view(o) for o in flat]
        if self.kernel is None:   # not compiled yet: queue it (once) and run the group on numpy meanwhile
            if self._failed or self._compile_first:   # (a failed background compile raises its error here)
                self.kernel = compile_kernel(self.spec)
            else:
                if not self._queued:
                    self._queued = True
                    self._compile_later(args, flat)
                return self._run_on_numpy(inputs, outs)
        if self.spec.parallel:
            self.prepare()   # the requested thread count, in whichever Python thread runs this
        self.kernel(n0, n1, *args, *flat)
        return outs

    def input_views(self, in_shapes: Sequence[tuple], from_args: Sequence[bool]) -> list[tuple]:
        """What :meth:`impl` does to each input, worked out once for inputs of the shapes ``in_shapes``
        (a program calling the kernel again and again): per input ``(2-d shape or None, broadcast
        shape or None, from_arg)`` -- reshape it to the 2-d shape (None: it has it already), after
        materialising a mixed broadcast to the broadcast shape; ``from_args[k]``: input ``k`` may be
        a number or a numpy scalar (a program's argument), to make an array first.  The outputs'
        2-d views are :attr:`out_views`; the kernel runs as ``kernel(n0, n1, *inputs, *outputs)``
        after ``prepare()`` where ``spec.parallel``."""
        return [_view_plan(pattern, tuple(shape), self.shape, self.n0, self.n1) + (from_arg,)
                for (pattern, _), shape, from_arg in zip(self.layouts, in_shapes, from_args)]

    def _compile_later(self, args: list, flat: list) -> None:
        """Queue the kernel's compilation (or load from the disk cache) for the argument
        types of this call; later calls run it once it is ready."""
        import numba   # the CPU backend has imported it already
        signature = tuple(numba.typeof(a) for a in [self.n0, self.n1, *args, *flat])

        def job() -> None:
            try:
                codegen.compile_elsewhere(self.spec, signature)   # a compile process, where there is one
                kernel = compile_kernel(self.spec)
                dispatcher = kernel if hasattr(kernel, "compile") else kernel.__wrapped__   # under a launch guard
                dispatcher.compile(signature)
            except BaseException:
                self._failed = True
                raise
            self.kernel = kernel
        codegen.compile_in_background(job)

    def _run_on_numpy(self, inputs: tuple, outs: list) -> list:
        """The group's equations one by one on their eager implementations (numpy)."""
        eqns, invars, outvars = self.group
        env = {id(v): x for v, x in zip(invars, inputs)}
        with np.errstate(all="ignore"):   # as the kernel: NaN and inf without RuntimeWarnings
            for eqn in eqns:
                values = [x.value if isinstance(x, Literal) else env[id(x)] for x in eqn.inputs]
                # The numpy reference where a backend has put a numba kernel in front of it (select).
                impl = eqn.prim.impls.get("reference", eqn.prim.impl)
                env[id(eqn.outvars[0])] = run_impl(eqn.prim, impl, values, eqn.params)
        values = [env[id(v)] for v in outvars]
        # A value that is (a view of) an input whose buffer is also an output (a donated
        # argument) is copied before any output is written.
        values = [x.copy() if isinstance(x, np.ndarray) and any(np.may_share_memory(x, o) for o in outs) else x
                  for x in values]
        for o, x in zip(outs, values):
            np.copyto(o, x, casting="unsafe")
        return outs


def kernel_view(x: np.ndarray) -> np.ndarray:
    """``x`` as a kernel takes it: a bfloat16 array as its uint16 bit patterns (a view), else itself."""
    return x.view(np.uint16) if x.dtype == codegen.BF16 else x


def _as_2d(x: Any, pattern: str, shape: tuple, n0: int, n1: int) -> np.ndarray:
    x = np.asarray(x)
    if pattern == "[i, j]":
        if x.shape != shape:   # a mixed broadcast: materialise it once
            x = np.ascontiguousarray(np.broadcast_to(x, shape))
        return x.reshape(n0, n1)
    if pattern == "[0, j]":
        return x.reshape(1, n1)
    if pattern == "[i, 0]":
        return x.reshape(n0, 1)
    return x.reshape(1, 1)


def _view_plan(pattern: str, in_shape: tuple, shape: tuple, n0: int, n1: int) -> tuple:
    """``(2-d shape or None, broadcast shape or None)``: what :func:`_as_2d` does to an input of
    ``in_shape`` (None: nothing; an input already of its 2-d shape is passed as it is)."""
    broadcast = None
    if pattern == "[i, j]":
        shape2d = (n0, n1)
        if in_shape != shape:
            broadcast, in_shape = shape, shape
    else:
        shape2d = {"[0, j]": (1, n1), "[i, 0]": (n0, 1)}.get(pattern, (1, 1))
    return (None if in_shape == shape2d else shape2d), broadcast


def _pattern(in_shape: tuple, shape: tuple, split: int) -> str:
    padded = (1,) * (len(shape) - len(in_shape)) + tuple(in_shape)
    outer, inner = padded[:split], padded[split:]
    outer_full, inner_full = outer == shape[:split], inner == shape[split:]
    outer_one, inner_one = all(s == 1 for s in outer), all(s == 1 for s in inner)
    if outer_one and inner_one:
        return "[0, 0]"
    if outer_one and inner_full:
        return "[0, j]"
    if outer_full and inner_one:
        return "[i, 0]"
    return "[i, j]"   # equal shapes, or a mixed broadcast materialised by the wrapper


class _Group:
    def __init__(self, shape: tuple):
        self.shape = shape
        self.eqns: list[Eqn] = []
        self.members: set[int] = set()
        self.reduction: Eqn | None = None

    def add(self, eqn: Eqn) -> None:
        self.eqns.append(eqn)
        self.members.update(id(v) for v in eqn.outvars)

    def merge(self, other: "_Group") -> None:
        self.eqns.extend(other.eqns)
        self.members |= other.members


def _supported(eqn: Eqn) -> bool:
    values = [x for x in eqn.inputs if isinstance(x, Var)] + list(eqn.outvars)
    return all(v.aval.dtype in _DTYPES for v in values)


def numba_rule(eqn: Eqn) -> Any:
    """The numba lowering of ``eqn``'s primitive when its dtypes are ones the kernels take, else None."""
    return lowering(eqn.prim) if _supported(eqn) else None


def _elementwise_shape(eqn: Eqn, rule: Any = numba_rule) -> tuple | None:
    if isinstance(rule(eqn), Elementwise):
        return eqn.outvars[0].aval.shape
    return None


def _trailing_reduction(eqn: Eqn, shape: tuple, rule: Any = numba_rule) -> bool:
    if not isinstance(rule(eqn), Reduction):
        return False
    axes = eqn.params["axes"]
    return len(axes) > 0 and tuple(axes) == tuple(range(len(shape) - len(axes), len(shape)))


def _leading_reduction(eqn: Eqn, shape: tuple, rule: Any = numba_rule) -> bool:
    """A reduction over the leading axes of ``shape`` leaving a 1-d result (columns to accumulate)."""
    if not isinstance(rule(eqn), Reduction):
        return False
    axes = tuple(eqn.params["axes"])
    return 0 < len(axes) == len(shape) - 1 and axes == tuple(range(len(axes))) \
        and math.prod(shape) <= LEADING_MAX_ELEMENTS


def fuse(jaxpr: Jaxpr, rule: Any = numba_rule, emit: Any = None, leading: bool | None = None) -> Jaxpr:
    """Replace fusible chains by ``fused`` equations (see the module docstring).

    Another compiler reuses the grouping with its own ``rule(eqn)`` (an
    :class:`Elementwise` or :class:`Reduction` lowering when ``eqn`` may join
    a group, else None) and ``emit(group, consumers, outputs, position)`` (the
    equations standing for a sealed group; the default emits numba kernels).
    ``leading``: whether reductions over leading axes may end a group (the
    default: only with the default ``emit``, whose kernels accumulate columns).
    """
    leading = emit is None if leading is None else leading
    emit = _emit if emit is None else emit
    consumers: dict[int, int] = {}
    for eqn in jaxpr.eqns:
        for x in eqn.inputs:
            if isinstance(x, Var):
                consumers[id(x)] = consumers.get(id(x), 0) + 1
    outputs = {id(v) for v in jaxpr.outvars if isinstance(v, Var)}
    position = {id(e): i for i, e in enumerate(jaxpr.eqns)}

    new_eqns: list[Eqn] = []
    open_groups: dict[int, _Group] = {}   # var id -> open group that produces it
    order: list[_Group] = []

    def seal(group: _Group) -> None:
        if group not in order:
            return
        order.remove(group)
        for key in [k for k, g in open_groups.items() if g is group]:
            del open_groups[key]
        new_eqns.extend(emit(group, consumers, outputs, position))

    for eqn in jaxpr.eqns:
        producers = []
        for x in eqn.inputs:
            g = open_groups.get(id(x)) if isinstance(x, Var) else None
            if g is not None and g not in producers:
                producers.append(g)
        shape = _elementwise_shape(eqn, rule)
        target = None
        if shape is not None:
            same = [g for g in producers if g.shape == shape]
            # Open groups have no outside users yet, so any two can merge; an
            # independent operation of the same shape may join one as well.
            target = same[0] if same else next((g for g in reversed(order) if g.shape == shape), None)
            for g in same[1:]:
                target.merge(g)
                order.remove(g)
                for key, owner in list(open_groups.items()):
                    if owner is g:
                        open_groups[key] = target
            producers = [g for g in producers if g not in same[1:]]
        elif len(producers) == 1 and eqn.inputs[0].aval.shape == producers[0].shape \
                and (_trailing_reduction(eqn, producers[0].shape, rule)
                     or leading and _leading_reduction(eqn, producers[0].shape, rule)):
            target = producers[0]
        for g in producers:
            if g is not target:
                seal(g)
        if shape is None and target is None:
            new_eqns.append(eqn)
            continue
        if target is None:
            target = _Group(shape)
            order.append(target)
        if shape is None:
            target.reduction = eqn
            target.add(eqn)
            seal(target)
            continue
        target.add(eqn)
        for v in eqn.outvars:
            open_groups[id(v)] = target
    for g in list(order):
        seal(g)
    return Jaxpr(jaxpr.constvars, jaxpr.consts, jaxpr.invars, new_eqns, jaxpr.outvars)


def _free(eqn: Eqn) -> bool:
    rule = lowering(eqn.prim)
    return isinstance(rule, Elementwise) and rule.free


def _worth_fusing(group: _Group) -> bool:
    ops = [e for e in group.eqns if not _free(e)]
    if len(ops) >= 2:
        return True
    # A lone operation only pays off when threads can split it.
    return len(ops) == 1 and math.prod(group.shape) >= PARALLEL_MIN_ELEMENTS


def _flat_view(n: int) -> tuple[int, int]:
    """Split n elements into (rows, row length) with rows of at most 16384 (n = rows * length)."""
    for length in range(min(n, 16384), 0, -1):
        if n % length == 0:
            return n // length, length
    return 1, n


def _emit(group: _Group, consumers: dict, outputs: set, position: dict) -> list[Eqn]:
    group.eqns.sort(key=lambda e: position[id(e)])   # merged groups: back to program order
    if not _worth_fusing(group):
        return group.eqns
    shape = group.shape
    reduction = group.reduction
    lead = reduction is not None and _leading_reduction(reduction, shape) and not _trailing_reduction(reduction, shape)
    if reduction is None:
        split = max(len(shape) - 1, 0)
    else:   # the reduced axes are the outer ones of the 2-d view (leading) or the inner ones
        split = len(reduction.params["axes"]) if lead else len(shape) - len(reduction.params["axes"])
    names: dict[int, str] = {}
    inputs: list = []         # external Vars, in first-use order
    in_specs: list = []
    ops: list[Op] = []

    def name_of(x: Any) -> Any:
        if isinstance(x, Literal):
            return x.value
        if id(x) not in names:   # an input from outside the group
            names[id(x)] = f"x{len(inputs)}"
            inputs.append(x)
            in_specs.append((names[id(x)], _pattern(x.aval.shape, shape, split), x.aval.dtype))
        return names[id(x)]

    internal_uses: dict[int, int] = {}
    for eqn in group.eqns:
        for x in eqn.inputs:
            if isinstance(x, Var):
                internal_uses[id(x)] = internal_uses.get(id(x), 0) + 1
    for eqn in group.eqns:
        if eqn is reduction:
            break
        args = [name_of(x) for x in eqn.inputs]
        out = eqn.outvars[0]
        names[id(out)] = f"v{len(ops)}"
        ops.append(Op(names[id(out)], eqn.prim, args, out.aval.dtype, dict(eqn.params)))

    members = [e for e in group.eqns if e is not reduction]
    escaping = [e.outvars[0] for e in members
                if id(e.outvars[0]) in outputs or consumers.get(id(e.outvars[0]), 0) > internal_uses.get(id(e.outvars[0]), 0)]
    red = None
    outvars = list(escaping)
    if reduction is not None:
        operand = name_of(reduction.inputs[0])
        red = (reduction.prim, operand, reduction.outvars[0].aval.dtype, "r")
        outvars.append(reduction.outvars[0])
    n_work = math.prod(shape)
    view = (math.prod(shape[:split]), math.prod(shape[split:]))
    if reduction is None and view[0] < 64 and all(p in ("[i, j]", "[0, 0]") for _, p, _ in in_specs) \
            and all(x.aval.shape == shape or math.prod(x.aval.shape) == 1 for x in inputs):
        view = _flat_view(n_work)   # e.g. 1-d work: any factorisation will do, so make rows to share out
    spec = KernelSpec(in_specs, ops, [names[id(v)] for v in escaping], red,
                      n_work >= PARALLEL_MIN_ELEMENTS and not lead, lead)
    summary = ",".join(e.prim.name for e in group.eqns)
    kernel = FusedKernel(spec, [(p, None) for _, p, _ in in_specs], shape, view,
                         [ShapedArray(v.aval.shape, v.aval.dtype) for v in outvars], summary,
                         (list(group.eqns), list(inputs), list(outvars)))
    return [Eqn(kernel, inputs, {}, outvars)]
