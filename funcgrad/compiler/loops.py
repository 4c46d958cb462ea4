"""Whole loops compiled into one numba function.

Under ``jit`` a ``scan`` or ``while_loop`` runs its compiled body (a
:class:`~funcgrad.compiler.program.Program`) once per iteration from Python:
the program's step loop, each fused kernel's wrapper and numba's dispatcher
cost microseconds per iteration, whatever the work.  When every equation of
the body (and of a while loop's ``cond``) is one of

* a fused kernel (:class:`~funcgrad.compiler.fusion.FusedKernel`) that runs
  serially (its inputs read as reshapes, single elements, or a broadcast
  materialised as its wrapper does: once per call for a loop invariant),
* an elementwise primitive whose numba lowering gives numpy's result bit for
  bit (``Elementwise.exact``: the loop counter's ``add``, a predicate's
  ``lt``; and integer/float ``convert``) on operands of its shape or single
  elements,
* a reshape (every value is a flat array: the same one), a matrix transpose
  (copied), a sum over leading axes (numpy's order: rows added to zeros),
* a matrix product (below),

the whole loop is generated as ONE ``@numba.njit`` function, which calls the
same kernels (numba functions calling numba functions).  A ``scan`` also
takes each step's slice of its ``xs`` and writes each step's ``ys`` into
their rows.  Carries live in two buffers each, allocated once per call and
swapped after each step; every intermediate has its own buffer.  Results are
the step-by-step loop's bit for bit: the same kernels run on the same values
in the same order.

A 2-d ``matmul`` (float32/float64) calls numpy's own BLAS through
:mod:`~funcgrad.compiler.loop_blas`: the call ``np.matmul`` makes for the
operands' strides (a transpose in the body is a view to numpy, read with a
transpose flag, so it is not copied), on the same thread pool.  numba's
``np.dot`` would call scipy's OpenBLAS instead -- another build (other bits
are possible) with its own thread pool, whose contention with numpy's made
an RNN's compiled loops many times slower on 2 cores.  Such a loop runs a
call step by step where an operand a product reads is strided (np.matmul
would follow its strides): ``stats()["strided"]`` counts those calls.  Where numpy's BLAS
cannot be bound (another BLAS), matrix products keep their loops step by
step.

The generated source is cached on disk as the kernels are
(:mod:`funcgrad.compiler.kernel_cache`, a file named by the hash of its
content; numba caches the machine code beside it).  Compiling costs more
than a short loop saves: a loop is compiled in a call that runs
:data:`MIN_STEPS` steps (a ``scan`` that long before it runs, a
``while_loop`` in the middle of the call, once it has run them step by step),
as ``jit`` compiles on a first call, or once its calls have run
:data:`MIN_TOTAL_STEPS` steps in all; a step with matrix products counts
for more (:data:`PRODUCT_WEIGHT`).  The analysis runs once per body
program (kept beside it), and anything unsupported runs the step-by-step path
as before.

``config.update("jit_loops", False)`` (``FUNCGRAD_JIT_LOOPS=0``) turns it off;
so do ``debug_nans`` and a running :mod:`funcgrad.profiler` (which show each
step of a loop body).  :func:`stats` counts compiled loops and their runs.
"""
from __future__ import annotations

import hashlib
import math
import threading
import warnings
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _core
from funcgrad._config import config
from funcgrad._dtypes import ShapedArray
from funcgrad._ir import Literal, Var
from funcgrad.compiler import codegen, kernel_cache, loop_blas
from funcgrad.compiler.codegen import Elementwise, Op, lowering
from funcgrad.compiler.fusion import FusedKernel
from funcgrad.compiler.program import Program
from funcgrad.primitives import control_flow
from funcgrad.primitives.linalg import matmul_p
from funcgrad.primitives.elementwise import convert_p
from funcgrad.primitives.shape import reduce_sum_p, reshape_p, transpose_p

# When a loop is compiled: in a call that runs MIN_STEPS steps (a scan that long before it
# runs, a while loop once it has run them), as jit compiles on a first call; or once its
# calls have run MIN_TOTAL_STEPS steps in all (short loops called often).  Measured on 2
# cores (CPU time): a step of a fori_loop of one kernel saves ~14 us; compiling its loop
# costs ~0.7 s with an empty cache, ~0.1 s loading it from the cache an earlier process
# filled.  More kernels save more per step but cost more to compile; a matrix product saves
# ~20 us a step (the RNN of benchmarks/control_flow.py: 64 us a step of its forward loop, two
# products and a kernel) and costs little to compile (numpy's BLAS helper compiles once per
# cache), so a step counts 1 + PRODUCT_WEIGHT per product: such loops compile after fewer steps.
MIN_STEPS = 10000
MIN_TOTAL_STEPS = 100000
PRODUCT_WEIGHT = 1.5

_DTYPES = {np.dtype(t) for t in ("float32", "float64", "int32", "int64", "uint32", "bool")}
_NUMBA_TYPES = {np.dtype("bool"): "np.bool_"}

_counts = {"compiled": 0, "runs": 0, "unsupported": 0, "strided": 0}
_counts_lock = threading.Lock()


def stats() -> dict:
    """Counters since the process started: ``compiled`` (loops compiled into one function and
    loaded), ``runs`` (calls that ran a compiled loop), ``unsupported`` (loop bodies found
    not to compile; they run step by step), ``strided`` (calls of a loop with matrix products
    given a strided operand, which run step by step)."""
    return dict(_counts)


def _count(key: str) -> None:
    with _counts_lock:
        _counts[key] += 1


class Unsupported(Exception):
    """A loop body has an equation the generated loop cannot run (the reason is the message)."""


# ----------------------------------------------------------------------------- generation


def _np_type(dtype: np.dtype) -> str:
    return _NUMBA_TYPES.get(np.dtype(dtype), f"np.{np.dtype(dtype).name}")


def _size(aval: Any) -> int:
    return math.prod(aval.shape)


def _kernel_digest(spec: Any) -> str:
    # codegen names each kernel's module by this hash of its source (compile_kernel).
    return hashlib.sha256(codegen.generate_source(spec).encode()).hexdigest()[:24]


class _Writer:
    """The pieces of one generated loop function."""

    def __init__(self) -> None:
        self.params: list[str] = []
        self.sources: list[tuple] = []     # per parameter: where the wrapper takes its value
        self.setup: list[str] = []         # before the loop (allocations)
        self.step: list[str] = []          # one iteration
        self.kernels: dict[str, Any] = {}  # kernel module digest -> spec
        self.aliases: dict[str, str] = {}  # kernel module digest -> its name in the source
        self.consts: dict = {}             # literal constants (codegen's naming: c0, c1, ...)
        self.dims: dict[int, str] = {}     # ints passed to kernels -> their variables
        self.head = ""                     # the loop statement
        self.blas: set[str] = set()        # numpy's BLAS helpers called (loop_blas)
        self.factors: set[str] = set()     # the arrays they read (a parameter there must be a C array)
        self.weight = 1.0                  # what a step counts for in the thresholds (PRODUCT_WEIGHT)
        self.results: list[str] = []       # the arrays returned
        self.count = 0

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def param(self, name: str, source: tuple) -> str:
        self.params.append(name)
        self.sources.append(source)
        return name

    def buffer(self, aval: Any) -> str:
        name = self.fresh("tmp")
        self.setup.append(f"{name} = np.empty({_size(aval)}, {_np_type(aval.dtype)})")
        return name

    def dim(self, n: int) -> str:
        """A variable holding the int ``n`` (typed int64, not as a literal: a kernel called with
        literals would be compiled again for them)."""
        if n not in self.dims:
            self.dims[n] = f"dim{len(self.dims)}"
        return self.dims[n]

    def kernel(self, spec: Any) -> str:
        digest = _kernel_digest(spec)
        if digest not in self.aliases:
            self.aliases[digest] = f"fk{len(self.aliases)}"
            self.kernels[digest] = spec
        return self.aliases[digest]


def _at(ref: str, index: str) -> str:
    """Element ``index`` of the flat array ``ref`` (a step's row ``ys0[it]`` indexed as ``ys0[it, q]``)."""
    return f"{ref[:-1]}, {index}]" if ref.endswith("[it]") else f"{ref}[{index}]"


def _copy(dst: str, src: str, n: int, indent: str) -> list[str]:
    """Lines copying ``n`` elements (explicit loops: numba compiles array assignment slowly)."""
    return [f"{indent}for q in range({n}):", f"{indent}    {_at(dst, 'q')} = {_at(src, 'q')}"]


def _check_dtype(aval: Any, what: str) -> None:
    if np.dtype(aval.dtype) not in _DTYPES:
        raise Unsupported(f"{what} of dtype {np.dtype(aval.dtype).name}")


def _emit_program(w: _Writer, program: Program, inputs: Sequence[str], dest: dict, indent: str) -> list:
    """The lines of one run of ``program`` (appended to ``w.step``) on the arrays named ``inputs``;
    returns the names of its outputs (a Literal stays one).  ``dest``: var id -> the array an
    equation writes that var into (else a buffer of its own)."""
    env: dict[int, str] = {}
    # The strided views the step-by-step program would hand a matmul (var id -> (array, row
    # stride, column stride), None: a layout not followed); every other value is a C array.
    views: dict[int, tuple | None] = {}
    products_only = _read_by_products_only(program)
    for v, c in zip(program.jaxpr.constvars, program.consts):
        _check_dtype(v.aval, "a constant")
        env[id(v)] = w.param(w.fresh("pc"), ("value", c, v.aval))
        if not np.asarray(c).flags.c_contiguous:
            views[id(v)] = None
    for v, name in zip(program.jaxpr.invars, inputs):
        _check_dtype(v.aval, "an input")
        env[id(v)] = name
    for eqn in program.jaxpr.eqns:
        for v in eqn.outvars:
            _check_dtype(v.aval, f"{getattr(eqn.prim, 'name', eqn.prim)}'s output")
        ins = [x if isinstance(x, Literal) else env[id(x)] for x in eqn.inputs]
        if eqn.prim is reshape_p and isinstance(ins[0], str):
            # Every value is a flat array: a reshape is the same array (copied only into a target).
            target = dest.get(id(eqn.outvars[0]))
            if target is not None:
                w.step += _copy(target, ins[0], _size(eqn.outvars[0].aval), indent)
            env[id(eqn.outvars[0])] = target or ins[0]
            if id(eqn.inputs[0]) in views:   # numpy may copy or give a view: not followed
                views[id(eqn.outvars[0])] = None
            continue
        if eqn.prim is transpose_p and isinstance(ins[0], str) and tuple(eqn.params["perm"]) == (1, 0):
            # A view for numpy: a matmul reads it with a transpose flag, as np.matmul does.
            views[id(eqn.outvars[0])] = _transposed(eqn.inputs[0], ins[0], views)
            if id(eqn.outvars[0]) in products_only and id(eqn.outvars[0]) not in dest:
                env[id(eqn.outvars[0])] = ins[0]   # no copy: only matmuls read it, through the view
                continue
        outs = [dest.get(id(v)) or w.buffer(v.aval) for v in eqn.outvars]
        if isinstance(eqn.prim, FusedKernel):
            _emit_kernel(w, eqn, ins, outs, indent)
        elif eqn.prim is transpose_p:
            _emit_transpose(w, eqn, ins, outs, indent)
        elif eqn.prim is matmul_p:
            _emit_matmul(w, eqn, ins, outs, indent, views)
        elif eqn.prim is reduce_sum_p:
            _emit_leading_sum(w, eqn, ins, outs, indent)
        else:
            _emit_elementwise(w, eqn, ins, outs, indent)
        for v, name in zip(eqn.outvars, outs):
            env[id(v)] = name
    if w.blas and any(isinstance(v, Var) and id(v) in views for v in program.jaxpr.outvars):
        raise Unsupported("a loop with a matmul whose body returns a transposed view")
    return [v if isinstance(v, Literal) else env[id(v)] for v in program.jaxpr.outvars]


def _read_by_products_only(program: Program) -> set[int]:
    """Ids of the vars only ever read as a matmul's factors (not an output): a transpose producing one
    needs no copy."""
    other = {id(v) for v in program.jaxpr.outvars if isinstance(v, Var)}
    factors = set()
    for eqn in program.jaxpr.eqns:
        for x in eqn.inputs:
            if isinstance(x, Var):
                (factors if eqn.prim is matmul_p else other).add(id(x))
    return factors - other


def _view(x: Any, name: str, views: dict) -> tuple:
    """``(array, row stride, column stride)`` of the 2-d matrix ``x`` (strides in elements)."""
    if id(x) in views:
        found = views[id(x)]
        if found is None:
            raise Unsupported("a matmul of a strided view (a transpose reshaped, a strided constant)")
        return found
    return name, x.aval.shape[1], 1


def _transposed(x: Any, name: str, views: dict) -> tuple | None:
    """The view of ``x.T`` (``x`` a matrix): its strides swapped."""
    if views.get(id(x), ()) is None:
        return None
    name, rows, cols = _view(x, name, views)
    return name, cols, rows


def _emit_matmul(w: _Writer, eqn: Any, ins: list, outs: list, indent: str, views: dict) -> None:
    """A 2-d matrix product through numpy's BLAS (:mod:`loop_blas`): the call ``np.matmul`` makes for
    the operands' strides (a transpose is a view to numpy, read with a transpose flag)."""
    if not loop_blas.AVAILABLE:
        raise Unsupported(f"matmul ({loop_blas.REASON})")
    factors, names = eqn.inputs, ins
    out = eqn.outvars[0].aval
    dtype = np.dtype(out.dtype)
    if dtype not in (np.dtype("float32"), np.dtype("float64")) or len(out.shape) != 2 or any(
            isinstance(x, Literal) or len(x.aval.shape) != 2 or np.dtype(x.aval.dtype) != dtype for x in factors):
        raise Unsupported("a matmul of other than 2-d float32/float64 matrices of its dtype")
    (m, n), p = factors[0].aval.shape, factors[1].aval.shape[1]
    if 0 in (m, n, p):
        raise Unsupported("a matmul with an empty dimension")
    (a, a_m, a_n), (b, b_n, b_p) = (_view(x, name, views) for x, name in zip(factors, names))
    helper = loop_blas.function(dtype)
    w.weight += PRODUCT_WEIGHT
    w.blas.add(helper)
    w.factors.update((a, b))
    args = [f"{a}.ctypes.data", w.dim(a_m), w.dim(a_n), f"{b}.ctypes.data", w.dim(b_n), w.dim(b_p),
            f"{outs[0]}.ctypes.data", w.dim(m), w.dim(n), w.dim(p)]
    w.step.append(f"{indent}{helper}({', '.join(args)})")


def _emit_kernel(w: _Writer, eqn: Any, ins: list, outs: list, indent: str) -> None:
    fk = eqn.prim
    spec = fk.spec
    if spec.parallel:
        raise Unsupported("a parallel fused kernel")
    n0, n1 = fk.n0, fk.n1
    args = []
    for x, name, (pattern, _) in zip(eqn.inputs, ins, fk.layouts):
        dims = {"[i, j]": (n0, n1), "[0, j]": (1, n1), "[i, 0]": (n0, 1), "[0, 0]": (1, 1)}.get(pattern)
        if isinstance(x, Literal) or dims is None:
            raise Unsupported("a fused kernel input that is not an array")
        if pattern == "[i, j]" and tuple(x.aval.shape) != tuple(fk.shape):
            name = _broadcast(w, name, x.aval, fk.shape, indent)   # as the kernel's wrapper: materialised
        elif _size(x.aval) != dims[0] * dims[1]:
            raise Unsupported(f"a fused kernel input {x.aval.str_short()} read as {dims}")
        args.append(f"{name}.reshape({dims[0]}, {dims[1]})")
    n_out = len(spec.outputs)
    args += [f"{name}.reshape({n0}, {n1})" for name in outs[:n_out]]
    if spec.reduction:
        args.append(outs[n_out])
    w.step.append(f"{indent}{w.kernel(spec)}({w.dim(n0)}, {w.dim(n1)}, {', '.join(args)})")


def _emit_transpose(w: _Writer, eqn: Any, ins: list, outs: list, indent: str) -> None:
    """A matrix transpose, copied."""
    (x,) = eqn.inputs
    if isinstance(x, Literal) or tuple(eqn.params["perm"]) != (1, 0):
        raise Unsupported("a transpose of other than a matrix")
    rows, cols = x.aval.shape
    w.step += [f"{indent}for r in range({rows}):", f"{indent}    for q in range({cols}):",
               f"{indent}        {_at(outs[0], f'q * {rows} + r')} = {_at(ins[0], f'r * {cols} + q')}"]


def _emit_leading_sum(w: _Writer, eqn: Any, ins: list, outs: list, indent: str) -> None:
    """A sum over leading axes, as numpy's ``add.reduce`` does it (the inner axes contiguous): from
    zeros (so ``-0.0`` rows sum to ``0.0``), each row added in order, elementwise."""
    (x,) = eqn.inputs
    axes, shape = tuple(eqn.params["axes"]), tuple(x.aval.shape)
    out = eqn.outvars[0].aval
    if isinstance(x, Literal) or not axes or axes != tuple(range(len(axes))) or np.dtype(out.dtype) != x.aval.dtype:
        raise Unsupported("reduce_sum over other than leading axes")
    rows, cols = math.prod(shape[:len(axes)]), math.prod(shape[len(axes):])
    if cols < 2:   # along a contiguous axis numpy sums pairwise
        raise Unsupported("reduce_sum of a contiguous axis")
    src, dst = ins[0], outs[0]
    total = _cast_expr(f"{_at(dst, 'q')} + {_at(src, f'r * {cols} + q')}", out.dtype)
    w.step += [f"{indent}for q in range({cols}):", f"{indent}    {_at(dst, 'q')} = 0",
               f"{indent}for r in range({rows}):", f"{indent}    for q in range({cols}):",
               f"{indent}        {_at(dst, 'q')} = {total}"]


def _cast_expr(expr: str, dtype: Any) -> str:
    return codegen._cast(expr, np.dtype(dtype))


def _broadcast(w: _Writer, name: str, aval: Any, shape: tuple, indent: str) -> str:
    """A buffer holding ``name`` broadcast to ``shape`` (filled once, before the loop, when ``name``
    is the same on every step: a constant or a loop operand)."""
    padded = (1,) * (len(shape) - len(aval.shape)) + tuple(aval.shape)
    out = w.buffer(ShapedArray(tuple(shape), aval.dtype))
    lines, flat, src, stride = [], "0", [], 1
    for d in range(len(shape) - 1, -1, -1):   # the source's index: its strides on the axes it has
        if padded[d] != 1:
            src.append(f"b{d} * {stride}")
            stride *= padded[d]
    for d, size in enumerate(shape):
        lines.append(" " * (4 * d) + f"for b{d} in range({size}):")
        flat = f"({flat}) * {size} + b{d}"
    lines.append(" " * (4 * len(shape)) + f"{out}[{flat}] = {_at(name, ' + '.join(src) or '0')}")
    if name.startswith(("arg", "pc")):   # the same on every step: filled once
        w.setup += lines
    else:
        w.step += [indent + line for line in lines]
    return out


def _convertible(src: np.dtype, dst: np.dtype) -> bool:
    # Conversions numba and numpy do alike (float -> int of NaN or out of range differ).
    return src.kind in "biu" or (src.kind == "f" and dst.kind in "fb")


def _emit_elementwise(w: _Writer, eqn: Any, ins: list, outs: list, indent: str) -> None:
    prim = eqn.prim
    rule = lowering(prim) if hasattr(prim, "lowerings") else None
    name = getattr(prim, "name", type(prim).__name__)
    if not isinstance(rule, Elementwise) or len(eqn.outvars) != 1:
        raise Unsupported(f"{name} (no elementwise numba lowering)")
    out_var = eqn.outvars[0]
    out_shape, dtype = tuple(out_var.aval.shape), np.dtype(out_var.aval.dtype)
    if prim is convert_p:
        if not _convertible(np.dtype(eqn.inputs[0].aval.dtype), dtype):
            raise Unsupported(f"convert from {np.dtype(eqn.inputs[0].aval.dtype).name} to {dtype.name}")
    elif not (rule.exact or rule.free):
        raise Unsupported(f"{name} (its numba lowering may differ from numpy in the last bits)")
    n = _size(out_var.aval)
    args, loads, dtypes = [], [], {}
    for x, ref in zip(eqn.inputs, ins):
        if isinstance(x, Literal):
            if type(x.value) not in (bool, int, float):
                raise Unsupported(f"{name} of a literal {type(x.value).__name__}")
            args.append(x.value)
            continue
        if tuple(x.aval.shape) != out_shape and _size(x.aval) != 1:
            raise Unsupported(f"{name} broadcasting {x.aval.str_short()} to {out_var.aval.str_short()}")
        element = w.fresh("e")
        loads.append(f"{element} = {_at(ref, 'q' if n > 1 and _size(x.aval) == n else '0')}")
        dtypes[element] = np.dtype(x.aval.dtype)
        args.append(element)
    op = Op("r", prim, args, dtype, dict(eqn.params))
    expr = codegen._cast(codegen._expr(op, w.consts, lambda a: dtypes.get(a, dtype)), dtype)
    if n == 1:
        w.step += [indent + line for line in loads] + [f"{indent}{_at(outs[0], '0')} = {expr}"]
    elif n > 1:
        w.step.append(f"{indent}for q in range({n}):")
        w.step += [f"{indent}    {line}" for line in loads] + [f"{indent}    {_at(outs[0], 'q')} = {expr}"]


def _carries(w: _Writer, n_carry: int, static: Sequence[bool], avals: Sequence[Any]) -> list[str]:
    """Parameters and buffers of the carries: ``cur{k}`` (a copy of the initial value) and, unless
    the body passes carry ``k`` through unchanged, ``nxt{k}``, swapped with it after each step."""
    names = []
    for k in range(n_carry):
        _check_dtype(avals[k], "a carry")
        init = w.param(f"init{k}", ("carry", k, avals[k]))
        w.setup.append(f"cur{k} = {init}.copy()")
        if not static[k]:
            w.setup.append(f"nxt{k} = np.empty_like(cur{k})")
        names.append(f"cur{k}")
    return names


def _produced(program: Program) -> set[int]:
    return {id(v) for eqn in program.jaxpr.eqns for v in eqn.outvars}


def _finish_step(w: _Writer, outs: list, targets: list[str | None], avals: Sequence[Any], indent: str) -> None:
    """Copy the outputs not written in place into their targets (``nxt{k}``, ``ys{j}[it]``; None:
    a carry passed through), then swap each carry's buffers."""
    for out, target, aval in zip(outs, targets, avals):
        if target is None:
            continue
        if isinstance(out, Literal):
            raise Unsupported("a literal loop output")
        if out != target:
            w.step += _copy(target, out, _size(aval), indent)
    for target in targets:
        if target is not None and target.startswith("nxt"):
            k = target[3:]
            w.step.append(f"{indent}cur{k}, nxt{k} = nxt{k}, cur{k}")


def _destinations(program: Program, targets: list[str | None]) -> dict:
    """Which output var each equation writes straight into its target (the first target of a var
    an equation produces)."""
    produced = _produced(program)
    dest: dict[int, str] = {}
    for v, target in zip(program.jaxpr.outvars, targets):
        if target is not None and isinstance(v, Var) and id(v) in produced and id(v) not in dest:
            dest[id(v)] = target
    return dest


def _static(program: Program, n_before: int, n_carry: int) -> list[bool]:
    """Per carry: the body returns its own input unchanged."""
    ins, outs = program.jaxpr.invars, program.jaxpr.outvars
    return [outs[k] is ins[n_before + k] for k in range(n_carry)]


def scan_source(body: Program, n_consts: int, n_carry: int, reverse: bool) -> _Writer:
    """The generated function of a ``scan`` over ``body``: ``kernel(length, params...)`` returning
    ``(carries..., ys...)`` as flat arrays (ys as ``(length, size)``)."""
    w = _Writer()
    in_avals, out_avals = body.jaxpr.in_avals, body.jaxpr.out_avals
    n_xs, n_ys = len(in_avals) - n_consts - n_carry, len(out_avals) - n_carry
    if n_carry + n_ys == 0:
        raise Unsupported("a loop without outputs")
    w.param("length", ("length",))
    consts = [w.param(f"arg{j}", ("operand", j, in_avals[j])) for j in range(n_consts)]
    static = _static(body, n_consts, n_carry)
    carries = _carries(w, n_carry, static, in_avals[n_consts:])
    xs = []
    for j in range(n_xs):
        aval = in_avals[n_consts + n_carry + j]
        _check_dtype(aval, "an xs operand")
        xs.append(w.param(f"xs{j}", ("xs", n_consts + n_carry + j, aval)) + "[it]")
    for j, aval in enumerate(out_avals[n_carry:]):
        _check_dtype(aval, "a ys output")
        w.setup.append(f"ys{j} = np.empty((length, {_size(aval)}), {_np_type(aval.dtype)})")
    targets: list[str | None] = [None if s else f"nxt{k}" for k, s in enumerate(static)]
    targets += [f"ys{j}[it]" for j in range(n_ys)]
    dest = _destinations(body, targets)
    indent = " " * 8
    w.step.append(f"{indent}it = length - 1 - step" if reverse else f"{indent}it = step")
    outs = _emit_program(w, body, consts + carries + xs, dest, indent)
    _finish_step(w, outs, targets, out_avals, indent)
    w.head = "    for step in range(length):"
    w.results = [f"cur{k}" for k in range(n_carry)] + [f"ys{j}" for j in range(n_ys)]
    return w


def while_source(cond: Program, body: Program, n_cond_consts: int, n_body_consts: int) -> _Writer:
    """The generated function of a ``while_loop``: ``kernel(params...)`` returning the final carries
    (flat)."""
    w = _Writer()
    n_carry = len(body.jaxpr.outvars)
    if n_carry == 0:
        raise Unsupported("a loop without outputs")
    c_avals, b_avals = cond.jaxpr.in_avals, body.jaxpr.in_avals
    cc = [w.param(f"arg{j}", ("operand", j, c_avals[j])) for j in range(n_cond_consts)]
    bc = [w.param(f"arg{n_cond_consts + j}", ("operand", n_cond_consts + j, b_avals[j]))
          for j in range(n_body_consts)]
    static = _static(body, n_body_consts, n_carry)
    carries = _carries(w, n_carry, static, b_avals[n_body_consts:])
    indent = " " * 8
    (pred,) = _emit_program(w, cond, cc + carries, {}, indent)
    if isinstance(pred, Literal):
        raise Unsupported("a constant loop predicate")
    w.step.append(f"{indent}if not {_at(pred, '0')}:")
    w.step.append(f"{indent}    break")
    targets: list[str | None] = [None if s else f"nxt{k}" for k, s in enumerate(static)]
    dest = _destinations(body, targets)
    outs = _emit_program(w, body, bc + carries, dest, indent)
    _finish_step(w, outs, targets, body.jaxpr.out_avals, indent)
    w.head = "    while True:"
    w.results = [f"cur{k}" for k in range(n_carry)]
    return w


def render(w: _Writer) -> str:
    """The module source of a generated loop (its function is ``kernel``, as codegen's)."""
    rt = codegen.runtime()
    lines = ["# Generated by funcgrad.compiler.loops; do not edit.",
             f"# helpers: {rt.helpers_digest}", "import numba", "import numpy as np"]
    lines += [f"from {kernel_cache.module_name(d)} import kernel as {alias}" for d, alias in w.aliases.items()]
    lines += [f"from {kernel_cache.module_name(loop_blas.digest())} import {name}" for name in sorted(w.blas)]
    lines += ["", "", "@numba.njit(cache=True, error_model='numpy', nogil=True)",
              f"def kernel({', '.join(w.params + ['dims'])}):"]
    lines += [f"    {name} = {value}" for name, value in w.consts.values()]
    lines += [f"    {name} = dims[{k}]" for k, name in enumerate(w.dims.values())]
    lines += [f"    {line}" for line in w.setup]
    lines.append(w.head)
    lines += w.step
    lines.append(f"    return ({', '.join(w.results)},)")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- running


def _parameter(name: str) -> str:
    """The parameter an array of the generated function comes from: a step's row ``xs0[it]`` from
    ``xs0``, a carry ``cur0`` from ``init0`` (an intermediate: itself, no parameter)."""
    name = name[:-len("[it]")] if name.endswith("[it]") else name
    return "init" + name[3:] if name.startswith("cur") else name


def _readonly_flat(x: Any, aval: Any, rows: int | None = None) -> np.ndarray:
    """``x`` as a flat (or ``(rows, size)``) read-only C array of ``aval``'s dtype: every call
    then has the same numba signature."""
    a = np.ascontiguousarray(x, dtype=aval.dtype)
    a = a.reshape(-1) if rows is None else a.reshape(rows, _size(aval))
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


class CompiledLoop:
    """One loop's generated function: its source, where each argument comes from, and (once
    loaded) the numba dispatcher."""

    def __init__(self, w: _Writer, out_avals: Sequence[Any]):
        self.source = render(w)
        self.digest = "loop_" + hashlib.sha256(self.source.encode()).hexdigest()[:24]
        self.sources = w.sources
        self.dims = np.array(list(w.dims) or [0], np.int64)
        self.dims.flags.writeable = False
        self.kernels = w.kernels
        # The operands a matrix product reads: np.matmul follows their strides, so a call runs compiled
        # only when they are C arrays (indices into ``sources``).
        read = {_parameter(name) for name in w.factors}
        self.contiguous = [i for i, (name, source) in enumerate(zip(w.params, w.sources))
                           if name in read and source[0] in ("operand", "carry", "xs")]
        self.blas = bool(w.blas)
        self.out_avals = list(out_avals)
        self.fn: Callable | None = None
        self.failed: BaseException | None = None
        self.trips = 0.0          # steps run step by step so far (until compiled), weighted
        self.weight = w.weight
        self.lock = threading.Lock()
        # Program constants, flattened once.
        self.fixed = {i: _readonly_flat(s[1], s[2]) for i, s in enumerate(self.sources) if s[0] == "value"}

    def arguments(self, operands: Sequence[Any], carry: Sequence[Any], length: int = 0) -> list | None:
        """The generated function's arguments, or None where this call runs step by step: a loop
        calling BLAS given a strided operand (np.matmul's calls follow the strides)."""
        for i in self.contiguous:
            kind, k = self.sources[i][:2]
            if not np.asarray(carry[k] if kind == "carry" else operands[k]).flags.c_contiguous:
                _count("strided")
                return None
        args = []
        for i, source in enumerate(self.sources):
            kind = source[0]
            if kind == "value":
                args.append(self.fixed[i])
            elif kind == "length":
                args.append(length)
            elif kind == "operand":
                args.append(_readonly_flat(operands[source[1]], source[2]))
            elif kind == "carry":
                args.append(_readonly_flat(carry[source[1]], source[2]))
            else:   # xs: operand source[1], of shape (length,) + the slice's
                args.append(_readonly_flat(operands[source[1]], source[2], length))
        args.append(self.dims)
        return args

    def load(self, args: list) -> bool:
        """Compile (or load from the disk cache) for these arguments' types; False if that failed
        (the loop then runs step by step, with one warning)."""
        with self.lock:
            if self.fn is None and self.failed is None:
                try:
                    import numba   # the CPU backend has imported it already
                    for spec in self.kernels.values():
                        codegen.compile_kernel(spec)   # loaded, so the generated module can import it
                    if self.blas:
                        loop_blas.load()
                    fn = kernel_cache.load_kernel(self.digest, self.source)
                    fn.compile(tuple(numba.typeof(a) for a in args))
                    self.fn = fn
                    _count("compiled")
                except Exception as err:   # a generation bug must not break the program: run step by step
                    self.failed = err
                    warnings.warn(f"funcgrad: a jitted loop could not be compiled into one function and runs its "
                                  f"body step by step ({type(err).__name__}: {str(err).splitlines()[0][:300]})",
                                  RuntimeWarning, stacklevel=4)
            return self.fn is not None

    def run(self, args: list) -> list:
        _count("runs")
        outs = self.fn(*args)
        avals = self.out_avals
        return [o.reshape(a.shape) if o.ndim == 1 else o.reshape(o.shape[:1] + tuple(a.shape))
                for o, a in zip(outs, avals)]


# Per body program: {(loop kind and parameters): CompiledLoop, or the Unsupported reason}.
_decisions: "weakref.WeakKeyDictionary[Program, dict]" = weakref.WeakKeyDictionary()
_decisions_lock = threading.Lock()


def _decide(body: Program, key: tuple, make: Callable[[], CompiledLoop]) -> CompiledLoop | None:
    table = _decisions.get(body)
    found = table.get(key) if table is not None else None
    if found is None:
        try:
            found = make()
        except Unsupported as why:
            found = why
            _count("unsupported")
        with _decisions_lock:
            table = _decisions.setdefault(body, {})
            found = table.setdefault(key, found)
    return found if isinstance(found, CompiledLoop) else None


def explain(program: Program) -> list[str]:
    """For each ``scan``/``while`` equation of a compiled program (``jit(f).lower(...)``), whether
    its loop compiles into one function, or why it runs step by step.

    >>> from funcgrad.compiler import loops
    >>> f = fg.jit(lambda x: lax.fori_loop(0, 9, lambda i, c: fnp.sin(c) * 2.0 + c, x))
    >>> loops.explain(f.lower(fnp.ones(3)))
    ['scan: compiles into one function']
    """
    found = []
    for eqn in program.jaxpr.eqns:
        params, name = eqn.params, getattr(eqn.prim, "name", "")
        try:
            if name == "scan" and type(params["body"].program) is Program:
                scan_source(params["body"].program, params["n_consts"], params["n_carry"], params["reverse"])
            elif name == "while" and type(params["body"].program) is Program \
                    and type(params["cond"].program) is Program:
                while_source(params["cond"].program, params["body"].program, params["n_cond_consts"],
                             params["n_body_consts"])
            else:
                continue
            found.append(f"{name}: compiles into one function")
        except Unsupported as why:
            found.append(f"{name}: runs step by step: {why}")
    return found


def _enabled(*programs: Any) -> bool:
    return (config.jit_loops and not config.debug_nans and _core._profiler is None
            and all(type(p) is Program for p in programs))


def _steps_before_compiling(loop: CompiledLoop) -> int:
    """How many more steps this call runs step by step before the loop is compiled."""
    if loop.fn is not None:
        return 0
    return math.ceil(max(min(MIN_STEPS, MIN_TOTAL_STEPS - loop.trips), 0) / loop.weight)


def run_scan(args: Sequence[Any], body: Any, n_consts: int, n_carry: int, length: int, reverse: bool) -> list | None:
    """A ``scan``'s outputs from its compiled loop, or None: run it step by step."""
    program = body.program
    if not _enabled(program):
        return None
    loop = _decide(program, ("scan", n_consts, n_carry, reverse),
                   lambda: CompiledLoop(scan_source(program, n_consts, n_carry, reverse), program.jaxpr.out_avals))
    if loop is None or loop.failed is not None:
        return None
    if length < _steps_before_compiling(loop):
        loop.trips += length * loop.weight   # not yet worth compiling: this call runs step by step
        return None
    operands = list(args)
    call = loop.arguments(operands, operands[n_consts:n_consts + n_carry], length)
    if call is None or not loop.load(call):
        return None
    return loop.run(call)


def run_while(args: Sequence[Any], cond: Any, body: Any, n_cond_consts: int, n_body_consts: int) -> list | None:
    """A ``while_loop``'s final carries, running its compiled loop once it has run enough steps (the
    first steps of a call may run step by step), or None: run it step by step."""
    if not _enabled(cond.program, body.program):
        return None
    key = ("while", n_cond_consts, n_body_consts, id(cond.program))
    loop = _decide(body.program, key, lambda: _while_loop(cond.program, body.program, n_cond_consts, n_body_consts))
    if loop is None or loop.failed is not None:
        return None
    operands = list(args[:n_cond_consts + n_body_consts])
    cc, bc = operands[:n_cond_consts], operands[n_cond_consts:]
    carry = list(args[n_cond_consts + n_body_consts:])
    if loop.fn is None:
        need = _steps_before_compiling(loop)
        while need > 0:   # step by step, as the primitive's implementation would
            if not cond.program.run_buffers(cc + carry)[0]:
                return carry
            carry = body.program.run_buffers(bc + carry)
            loop.trips += loop.weight
            need -= 1
    call = loop.arguments(operands, carry)
    if call is None or not loop.load(call):
        while cond.program.run_buffers(cc + carry)[0]:
            carry = body.program.run_buffers(bc + carry)
        return carry
    return loop.run(call)


def _while_loop(cond: Program, body: Program, n_cond_consts: int, n_body_consts: int) -> CompiledLoop:
    loop = CompiledLoop(while_source(cond, body, n_cond_consts, n_body_consts), body.jaxpr.out_avals)
    loop.cond = cond   # keeps the id in the key valid
    return loop


def install() -> None:
    """Let the host implementations of ``scan`` and ``while`` run compiled loops (the CPU backend calls this)."""
    control_flow.set_loop_compiler(run_scan, run_while)
