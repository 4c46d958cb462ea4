"""The source of a whole loop compiled into one numba function (see :mod:`funcgrad.compiler.loops`).

:func:`scan_source` and :func:`while_source` write a loop body's equations
(fused kernels, exact elementwise primitives, reshapes, transposes, leading
sums, matrix products through :mod:`~funcgrad.compiler.loop_blas`) as the
statements of one ``@numba.njit`` function, or raise :class:`Unsupported`
with the reason; :func:`render` gives its text. Running, caching and the
decision when to compile live in :mod:`funcgrad.compiler.loops`.
"""
from __future__ import annotations

import hashlib
import math
from typing import Any, Sequence

import numpy as np

from funcgrad._dtypes import ShapedArray
from funcgrad._ir import Literal, Var
from funcgrad.compiler import codegen, kernel_cache, loop_blas
from funcgrad.compiler.codegen import Elementwise, Op, lowering
from funcgrad.compiler.fusion import FusedKernel
from funcgrad.compiler.program import Program
from funcgrad.primitives.linalg import matmul_p
from funcgrad.primitives.elementwise import convert_p
from funcgrad.primitives.shape import reduce_sum_p, reshape_p, transpose_p

_DTYPES = {np.dtype(t) for t in ("float32", "float64", "int32", "int64", "uint32", "bool")}
_NUMBA_TYPES = {np.dtype("bool"): "np.bool_"}


class Unsupported(Exception):
    """A loop body has an equation the generated loop cannot run (the reason is the message)."""



def _np_type(dtype: np.dtype) -> str:
    return _NUMBA_TYPES.get(np.dtype(dtype), f"np.{np.dtype(dtype).name}")


def flat_size(aval: Any) -> int:
    return math.prod(aval.shape)


def _kernel_digest(spec: Any) -> str:
    # codegen names each kernel's module by this hash of its source (compile_kernel).
    return hashlib.sha256(codegen.generate_source(spec).encode()).hexdigest()[:24]


class Writer:
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
        self.products = 0                  # matrix products per step (they weigh in when to compile)
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
        self.setup.append(f"{name} = np.empty({flat_size(aval)}, {_np_type(aval.dtype)})")
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


def _emit_program(w: Writer, program: Program, inputs: Sequence[str], dest: dict, indent: str) -> list:
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
                w.step += _copy(target, ins[0], flat_size(eqn.outvars[0].aval), indent)
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


def _emit_matmul(w: Writer, eqn: Any, ins: list, outs: list, indent: str, views: dict) -> None:
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
    w.products += 1
    w.blas.add(helper)
    w.factors.update((a, b))
    args = [f"{a}.ctypes.data", w.dim(a_m), w.dim(a_n), f"{b}.ctypes.data", w.dim(b_n), w.dim(b_p),
            f"{outs[0]}.ctypes.data", w.dim(m), w.dim(n), w.dim(p)]
    w.step.append(f"{indent}{helper}({', '.join(args)})")


def _emit_kernel(w: Writer, eqn: Any, ins: list, outs: list, indent: str) -> None:
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
        elif flat_size(x.aval) != dims[0] * dims[1]:
            raise Unsupported(f"a fused kernel input {x.aval.str_short()} read as {dims}")
        args.append(f"{name}.reshape({dims[0]}, {dims[1]})")
    n_out = len(spec.outputs)
    args += [f"{name}.reshape({n0}, {n1})" for name in outs[:n_out]]
    if spec.reduction:
        args.append(outs[n_out])
    w.step.append(f"{indent}{w.kernel(spec)}({w.dim(n0)}, {w.dim(n1)}, {', '.join(args)})")


def _emit_transpose(w: Writer, eqn: Any, ins: list, outs: list, indent: str) -> None:
    """A matrix transpose, copied."""
    (x,) = eqn.inputs
    if isinstance(x, Literal) or tuple(eqn.params["perm"]) != (1, 0):
        raise Unsupported("a transpose of other than a matrix")
    rows, cols = x.aval.shape
    w.step += [f"{indent}for r in range({rows}):", f"{indent}    for q in range({cols}):",
               f"{indent}        {_at(outs[0], f'q * {rows} + r')} = {_at(ins[0], f'r * {cols} + q')}"]


def _emit_leading_sum(w: Writer, eqn: Any, ins: list, outs: list, indent: str) -> None:
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


def _broadcast(w: Writer, name: str, aval: Any, shape: tuple, indent: str) -> str:
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


def _emit_elementwise(w: Writer, eqn: Any, ins: list, outs: list, indent: str) -> None:
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
    n = flat_size(out_var.aval)
    args, loads, dtypes = [], [], {}
    for x, ref in zip(eqn.inputs, ins):
        if isinstance(x, Literal):
            if type(x.value) not in (bool, int, float):
                raise Unsupported(f"{name} of a literal {type(x.value).__name__}")
            args.append(x.value)
            continue
        if tuple(x.aval.shape) != out_shape and flat_size(x.aval) != 1:
            raise Unsupported(f"{name} broadcasting {x.aval.str_short()} to {out_var.aval.str_short()}")
        element = w.fresh("e")
        loads.append(f"{element} = {_at(ref, 'q' if n > 1 and flat_size(x.aval) == n else '0')}")
        dtypes[element] = np.dtype(x.aval.dtype)
        args.append(element)
    op = Op("r", prim, args, dtype, dict(eqn.params))
    expr = codegen._cast(codegen._expr(op, w.consts, lambda a: dtypes.get(a, dtype)), dtype)
    if n == 1:
        w.step += [indent + line for line in loads] + [f"{indent}{_at(outs[0], '0')} = {expr}"]
    elif n > 1:
        w.step.append(f"{indent}for q in range({n}):")
        w.step += [f"{indent}    {line}" for line in loads] + [f"{indent}    {_at(outs[0], 'q')} = {expr}"]


def _carries(w: Writer, n_carry: int, static: Sequence[bool], avals: Sequence[Any]) -> list[str]:
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


def _finish_step(w: Writer, outs: list, targets: list[str | None], avals: Sequence[Any], indent: str) -> None:
    """Copy the outputs not written in place into their targets (``nxt{k}``, ``ys{j}[it]``; None:
    a carry passed through), then swap each carry's buffers."""
    for out, target, aval in zip(outs, targets, avals):
        if target is None:
            continue
        if isinstance(out, Literal):
            raise Unsupported("a literal loop output")
        if out != target:
            w.step += _copy(target, out, flat_size(aval), indent)
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


def scan_source(body: Program, n_consts: int, n_carry: int, reverse: bool) -> Writer:
    """The generated function of a ``scan`` over ``body``: ``kernel(length, params...)`` returning
    ``(carries..., ys...)`` as flat arrays (ys as ``(length, size)``)."""
    w = Writer()
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
        w.setup.append(f"ys{j} = np.empty((length, {flat_size(aval)}), {_np_type(aval.dtype)})")
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


def while_source(cond: Program, body: Program, n_cond_consts: int, n_body_consts: int) -> Writer:
    """The generated function of a ``while_loop``: ``kernel(params...)`` returning the final carries
    (flat)."""
    w = Writer()
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


def render(w: Writer) -> str:
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
