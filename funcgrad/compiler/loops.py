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
from funcgrad.compiler import codegen, kernel_cache, loop_blas
from funcgrad.compiler.loop_codegen import Unsupported, Writer, flat_size, render, scan_source, while_source
from funcgrad.compiler.program import Program
from funcgrad.primitives import control_flow

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
    a = a.reshape(-1) if rows is None else a.reshape(rows, flat_size(aval))
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


class CompiledLoop:
    """One loop's generated function: its source, where each argument comes from, and (once
    loaded) the numba dispatcher."""

    def __init__(self, w: Writer, out_avals: Sequence[Any]):
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
        self.weight = 1.0 + PRODUCT_WEIGHT * w.products   # what a step counts for in the thresholds
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
