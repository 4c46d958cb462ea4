"""Generated numba kernels for fused groups, cached on disk across processes.

numba cannot cache functions built with ``exec``, so each kernel's source is
written to a file named by the hash of its content in the kernel cache
directory (``FUNCGRAD_CACHE_DIR`` or ``config.update("cache_dir", ...)``;
default ``~/.cache/funcgrad/kernels``) and run from there; numba's own
``cache=True`` then stores the machine code beside it.
:mod:`funcgrad.compiler.kernel_cache` keeps that directory safe to share
between concurrent processes, heals damaged entries, falls back when the
directory is unusable and caps its size.

A kernel iterates over a 2-d view ``(outer, inner)`` of the group's shape:
``prange`` over ``outer`` (when the work is large enough to pay for
threads), a plain loop over ``inner``, and no temporaries: intermediate
values live in registers.  A trailing reduction accumulates over ``inner``;
a leading one (``leading``: a bias gradient's ``sum(g, axis=0)``) over
``outer``, into one accumulator per column ``j`` kept in its output, the
rows added in order as numpy's ``add.reduce`` adds them: such a kernel runs
on one thread (fusion gives it only work up to ``LEADING_MAX_ELEMENTS``).

What a primitive becomes inside a kernel is its *lowering*, registered
against the primitive object by the backend that compiles with this module
(``funcgrad/backends/cpu/lowering.py``)::

    _core.register_lowering(exp_p, COMPILER, unary("np.exp({0})"))

An :class:`Elementwise` lowering makes the primitive fusible; a
:class:`Reduction` lets it end a group.  The helpers the generated source
imports and the threading hooks come from the :class:`Runtime` that backend
installs with :func:`set_runtime`.
"""
from __future__ import annotations

import atexit
import hashlib
import os
import sys
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from funcgrad import _dtypes
from funcgrad.compiler import compile_worker, kernel_cache

# The key of this compiler's lowerings in ``Primitive.lowerings``.
COMPILER = "numba"

# numba has no bfloat16: a kernel takes bfloat16 arrays as their uint16 bit patterns (the caller
# passes ``x.view(np.uint16)``), widens each element it loads to float32 (exact), computes in
# float32 and rounds each operation's result to bfloat16 (``bf16_round``: numpy's per-operation
# rounding), and stores the bit pattern (``bf16_bits``); a reduction accumulates in float32 and
# rounds once. The runtime's helpers provide the three functions.
BF16 = _dtypes.bfloat16
# Kernels of more bfloat16 operations than this round behind an optimisation barrier
# (``bf16_round_opaque``): LLVM's optimiser took time exponential in the length of a recurrence
# through the rounding's integer work (minutes at ~60 operations); shorter kernels vectorise.
BF16_VECTOR_MAX_OPS = 24

# Which kernels compile on a background thread while their work runs on numpy
# (a tiered start, see :func:`compile_in_background`), from
# ``FUNCGRAD_JIT_BACKGROUND_COMPILE``:
# * "exact" (default): fused kernels whose results are bit-for-bit numpy's
#   (:func:`is_exact`) run on numpy until compiled, so a program's results
#   never depend on when its kernel arrives; other kernels compile before
#   they first run;
# * "all": every fused kernel and the softmax-family kernels too: the fastest
#   start, but results of the first calls may differ from later ones in the
#   last bits (numpy's exp and sums against the kernels');
# * "off": every kernel compiles before it first runs.
# While a group runs on numpy it allocates its intermediates (no buffer plan).
# The compiles run in a child process where there is more than one core
# (:func:`compile_elsewhere`), else beside the caller's thread (sharing the GIL).
def background_mode(value: str | None) -> str:
    """The mode a ``FUNCGRAD_JIT_BACKGROUND_COMPILE`` value asks for ("exact" when unset or unknown)."""
    return {"0": "off", "false": "off", "no": "off", "off": "off", "all": "all"}.get(
        (value or "exact").strip().lower(), "exact")


BACKGROUND_COMPILE = background_mode(os.environ.get("FUNCGRAD_JIT_BACKGROUND_COMPILE"))

# The most work a kernel with a leading reduction takes (it runs serially): a larger
# group keeps its reduction apart, and its elementwise kernel its threads.
LEADING_MAX_ELEMENTS = 1 << 18

# Iteration sizes below this run serially: starting numba's threads costs
# more than the loop itself.
PARALLEL_MIN_ELEMENTS = 1 << 15


@dataclass
class Op:
    """One fused operation: ``out = prim(args)``; args are names or literal values."""

    out: str
    prim: Any             # the Primitive; its numba lowering writes the expression
    args: list
    dtype: np.dtype
    params: dict = field(default_factory=dict)


@dataclass
class KernelSpec:
    """Everything the source depends on."""

    inputs: list          # (name, index pattern "[i, j]" / "[0, j]" / "[i, 0]" / "[0, 0]", dtype)
    ops: list             # Op, in order
    outputs: list         # names written at [i, j]
    reduction: tuple | None  # (primitive, operand name, dtype, output name) or None
    parallel: bool
    leading: bool = False     # the reduction is over the outer axis (a column per j), not the inner one
    aliases: tuple = ()       # (output name, input name): the output is stored into that input's array


# Renders one operand of an operation: a name stays as it is; a literal
# becomes a typed constant of the kernel, typed like ``other`` (weak typing).
Ref = Callable[..., str]


@dataclass(frozen=True)
class Elementwise:
    """The lowering of an elementwise primitive: ``emit(op, ref)`` is its expression.

    ``reassoc``: the expression needs fastmath ``reassoc`` to vectorise (the
    fast exp); ``free``: it moves no data of its own (``broadcast_to``: the
    kernel's index patterns broadcast), so it does not count towards
    making a group worth a kernel; ``exact``: it gives bit-for-bit the
    primitive's eager (numpy) result for every input (IEEE arithmetic,
    comparisons, selection; a NaN's sign bit aside), so a group of such operations may run on numpy
    until its kernel is compiled without changing any result.

    >>> neg = Elementwise(lambda op, ref: f"-{ref(op.args[0])}")
    """

    emit: Callable[[Op, Ref], str]
    reassoc: bool = False
    free: bool = False
    exact: bool = False


@dataclass(frozen=True)
class Reduction:
    """The lowering of a reduction that may end a group, over its trailing axes.

    ``identity(dtype)`` starts the accumulator ``acc``; ``update`` are the
    lines folding the operand ``{x}`` into it (inside the inner loop).

    >>> total = Reduction(lambda dtype: 0, ("acc += {x}",))
    """

    identity: Callable[[np.dtype], Any]
    update: tuple[str, ...]


def unary(template: str, **options: Any) -> Elementwise:
    """The lowering writing ``template`` with the operand as ``{0}``: ``unary("np.sin({0})")``."""
    return Elementwise(lambda op, ref: template.format(ref(op.args[0])), **options)


def binary(template: str, **options: Any) -> Elementwise:
    """The lowering writing ``template`` with operands ``{0}`` and ``{1}``: ``binary("{0} + {1}")``.

    A literal operand takes the dtype of the array operand beside it.
    """
    def emit(op: Op, ref: Ref) -> str:
        x, y = op.args
        return template.format(ref(x, y), ref(y, x))
    return Elementwise(emit, **options)


def lowering(prim: Any) -> Any:
    """``prim``'s lowering for this compiler, or None (it then stays outside kernels)."""
    return prim.lowerings.get(COMPILER)


@dataclass(frozen=True)
class Runtime:
    """What generated kernels run with, installed by the backend compiling with them.

    * ``imports``: the import line of the helper functions lowerings call;
    * ``helpers_digest``: a hash of those helpers' source, written into every
      kernel, so a change in a helper makes new kernels (and cache entries);
    * ``prepare()``: called before each kernel run (the requested thread
      count, in whichever Python thread runs it);
    * ``guard(kernel)``: wraps a parallel kernel (e.g. serialises launches
      under a threading layer that allows one at a time).
    """

    imports: str
    helpers_digest: str
    prepare: Callable[[], None]
    guard: Callable[[Callable], Callable]


_runtime: list[Runtime] = []


def set_runtime(runtime: Runtime) -> None:
    """Install the runtime generated kernels use (the CPU backend does, on import)."""
    _runtime[:] = [runtime]


def runtime() -> Runtime:
    if not _runtime:
        raise RuntimeError("funcgrad.compiler: no numba runtime installed; import funcgrad (its CPU backend "
                           "installs it) before compiling")
    return _runtime[0]


def typed_constant(value: Any, dtype: np.dtype) -> str:
    """``value`` as a source literal of ``dtype``: ``np.float32(0.5)``, ``np.float32(-np.inf)``, ``True``.

    A bfloat16 value is held as the float32 of the same number (see :data:`BF16`)."""
    if dtype == BF16:
        return typed_constant(float(np.asarray(value, BF16)), np.dtype(np.float32))
    if dtype.kind == "b":
        return "True" if value else "False"
    if dtype.kind == "f" and not np.isfinite(value):
        return f"np.{dtype.name}({'np.nan' if np.isnan(value) else ('np.inf' if value > 0 else '-np.inf')})"
    return f"np.{dtype.name}({value!r})"


def _expr(op: Op, consts: dict, operand_dtype: Callable[[Any], np.dtype]) -> str:
    def ref(a: Any, other: Any = None) -> str:
        if isinstance(a, str):
            return a
        # A literal takes the dtype of the array operand beside it (weak typing),
        # unless it is of a higher kind (i32 * 2.5 computes in float, not in i32).
        if other is not None and isinstance(other, str):
            beside = operand_dtype(other)   # a number beside bfloat16 is bfloat16 (numpy would say float)
            dt = BF16 if beside == BF16 else _dtypes.canonicalize(np.result_type(beside, a))
        else:
            dt = op.dtype
        key = (type(a), a, dt)
        if key not in consts:
            consts[key] = (f"c{len(consts)}", typed_constant(a, dt))
        return consts[key][0]

    return lowering(op.prim).emit(op, ref)


def _fastmath_flags(spec: KernelSpec) -> str:
    """Only ``reassoc``, and only where it pays: it lets the fast exp and the
    reductions vectorise (~10x on exp-heavy groups).  Never nnan/ninf (NaN and
    inf behave as in numpy) nor contract (no FMA): kernels without exp or a
    reduction give bit-for-bit numpy's results; sums may differ from numpy's
    by float reassociation."""
    if (spec.reduction and not spec.leading) or any(lowering(op.prim).reassoc for op in spec.ops):
        return ", fastmath={'reassoc'}"
    return ""


def _cast(expr: str, dtype: np.dtype) -> str:
    # Keep numba's arithmetic in the dtype numpy would use (f32 stays f32); a bfloat16 result is
    # computed in float32 and rounded, as numpy computes bfloat16.
    if dtype == BF16:
        return f"bf16_round(np.float32({expr}))"
    return f"np.{dtype.name}({expr})" if dtype.kind in "fiu" else expr


def _load(name: str, pattern: str, dtype: np.dtype) -> str:
    value = f"a_{name}{pattern}"
    return f"bf16_widen({value})" if dtype == BF16 else value


def _store(name: str, dtype: np.dtype) -> str:
    return f"bf16_bits({name})" if dtype == BF16 else name


def generate_source(spec: KernelSpec) -> str:
    """The Python source of the kernel described by ``spec``."""
    rt = runtime()
    dtypes = {name: dtype for name, _, dtype in spec.inputs}
    dtypes.update({op.out: op.dtype for op in spec.ops})
    consts: dict = {}
    body = [f"            {name} = {_load(name, pattern, dtype)}" for name, pattern, dtype in spec.inputs]
    for op in spec.ops:
        body.append(f"            {op.out} = {_cast(_expr(op, consts, lambda n: dtypes.get(n, op.dtype)), op.dtype)}")
    if sum(op.dtype == BF16 for op in spec.ops) > BF16_VECTOR_MAX_OPS:
        body = [line.replace("bf16_round(", "bf16_round_opaque(") for line in body]
    # An output written over an input (the buffer plan's in-place outputs) is stored through the
    # input's own argument: passed twice, LLVM's alias checks fail and its loop runs ~20x slower.
    into = dict(spec.aliases)
    body += [f"            {'a_' + into[name] if name in into else 'o_' + name}[i, j] = {_store(name, dtypes[name])}"
             for name in spec.outputs]
    loop = "numba.prange" if spec.parallel else "range"
    args = ["n0", "n1"] + [f"a_{n}" for n, _, _ in spec.inputs] + [f"o_{n}" for n in spec.outputs if n not in into]
    lines = ["# Generated by funcgrad.compiler.codegen; do not edit.",
             f"# helpers: {rt.helpers_digest}",   # a change in the helpers makes a new file (and cache entry)
             "import numba", "import numpy as np",
             rt.imports, "", "",
             "@numba.njit(parallel=%s, cache=True, error_model='numpy', nogil=True%s)"
             % (spec.parallel, _fastmath_flags(spec)),
             f"def kernel({', '.join(args + (['r_out'] if spec.reduction else []))}):"]
    lines += [f"    {name} = {value}" for name, value in consts.values()]
    if spec.reduction and spec.leading:
        return "\n".join(lines + _leading_loops(spec, body)) + "\n"
    lines.append(f"    for i in {loop}(n0):")
    if spec.reduction:
        prim, operand, dtype, _ = spec.reduction
        reduction = lowering(prim)
        lines.append(f"        acc = {typed_constant(reduction.identity(dtype), dtype)}")
    lines.append("        for j in range(n1):")
    lines += body
    if spec.reduction:
        lines += ["            " + line.format(x=operand) for line in reduction.update]
        lines.append(f"        r_out[i] = {_store('acc', dtype)}")
    return "\n".join(lines) + "\n"


def _leading_loops(spec: KernelSpec, body: list) -> list:
    """The loops of a kernel whose reduction runs over the outer axis: ``r_out[j]`` accumulates
    column ``j`` over the rows ``i`` in order (one thread: such kernels are never parallel).

    The inner loop reads and writes rows taken once per ``i`` (``row_x = a_x[i]``, then
    ``row_x[j]``): indexed ``a_x[i, j]`` beside the ``r_out[j]`` updates, LLVM did not
    vectorise it (36 us against 9 us on f32[128,512] in cache, one thread; an MLP step's
    operands come from memory, where both take about 40 us). The operations are the same."""
    prim, operand, dtype, _ = spec.reduction
    reduction = lowering(prim)
    # bfloat16 columns accumulate in float32 (``cols``), stored rounded at the end
    cols = "cols" if dtype == BF16 else "r_out"
    update = [f"            acc = {cols}[j]"]
    update += ["            " + line.format(x=operand) for line in reduction.update]
    update.append(f"            {cols}[j] = acc")
    before, per_row = [], []
    for array, pattern in _arrays(spec):
        if pattern == "[i, j]":
            per_row.append(f"        row_{array} = {array}[i]")
        elif pattern == "[0, j]":
            before.append(f"    row_{array} = {array}[0]")
        else:
            continue
        body = [line.replace(f"{array}{pattern}", f"row_{array}[j]") for line in body]
    start = ["    cols = np.empty(n1, np.float32)"] if cols == "cols" else []
    end = ["    for j in range(n1):", "        r_out[j] = bf16_bits(cols[j])"] if cols == "cols" else []
    return (start + ["    for j in range(n1):", f"        {cols}[j] = {typed_constant(reduction.identity(dtype), dtype)}"]
            + before + ["    for i in range(n0):"] + per_row + ["        for j in range(n1):"] + body + update + end)


def _arrays(spec: KernelSpec) -> list:
    """The kernel's array arguments with the index pattern its body uses for each."""
    into = dict(spec.aliases)
    return ([(f"a_{name}", pattern) for name, pattern, _ in spec.inputs]
            + [(f"o_{name}", "[i, j]") for name in spec.outputs if name not in into])


# Kernels loaded in this process, oldest first; bounded (programs hold their own
# kernels: a forgotten one is only loaded again from the disk cache if needed).
_loaded: OrderedDict[str, Callable] = OrderedDict()
MAX_LOADED = 1024
_load_lock = threading.Lock()


def compile_kernel(spec: KernelSpec) -> Callable:
    """The compiled kernel for ``spec``: from this process, the disk cache, or numba."""
    source = generate_source(spec)
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    kernel = _loaded.get(digest)
    if kernel is not None:
        return kernel
    with _load_lock:   # threads missing together load a kernel once
        kernel = _loaded.get(digest)
        if kernel is None:
            kernel = _load_kernel(spec, source, digest)
    return kernel


def loaded_kernel(spec: KernelSpec) -> Callable | None:
    """The kernel for ``spec`` if this process has it already (compiled or loaded), else None."""
    return _loaded.get(hashlib.sha256(generate_source(spec).encode()).hexdigest()[:24])


def is_exact(spec: KernelSpec) -> bool:
    """Whether ``spec``'s kernel gives bit-for-bit numpy's results (a NaN's sign bit aside):
    only ``exact`` lowerings, and no reduction but a leading float sum (rows added in order,
    as numpy adds them)."""
    return (spec.reduction is None or _exact_reduction(spec)) and all(lowering(op.prim).exact for op in spec.ops)


def _exact_reduction(spec: KernelSpec) -> bool:
    prim, _, dtype, _ = spec.reduction
    float_sum = getattr(prim, "name", None) == "reduce_sum" and np.dtype(dtype).name in ("float32", "float64")
    return spec.leading and float_sum


def _load_kernel(spec: KernelSpec, source: str, digest: str) -> Callable:
    """Load the kernel (disk cache or numba) and record it; the caller holds ``_load_lock``."""
    kernel = kernel_cache.load_kernel(digest, source)
    kernel = runtime().guard(kernel) if spec.parallel else kernel
    _loaded[digest] = kernel
    while len(_loaded) > MAX_LOADED:
        sys.modules.pop(kernel_cache.module_name(_loaded.popitem(last=False)[0]), None)
    return kernel


def source_path(spec: KernelSpec) -> str:
    """Where the source of ``spec``'s kernel is cached (in the directory in use now)."""
    digest = hashlib.sha256(generate_source(spec).encode()).hexdigest()[:24]
    return os.path.join(kernel_cache.cache_dir() or "<memory>", f"fg_{digest}.py")


# ------------------------------------------------------------ background compiles


# The compiler thread starts a job only once no job has been queued for this
# long: a program's first call queues its groups one by one as it reaches them,
# and a compile it needs at once (a kernel that cannot run on numpy) should
# not wait behind them for numba's process-wide compiler lock.
SETTLE_S = 0.1
GIVE_WAY_MAX_S = 10.0


class _Compiler:
    """One daemon thread compiling queued jobs in order (numba compiles under one
    process-wide lock anyway, so a second thread would only wait for it).

    The callers' own compiles go first: a job starts only when no job was queued
    in the last ``SETTLE_S`` seconds and no other thread holds or waits for
    numba's compiler lock (its ``numba:compiler_lock`` events, counted by
    :meth:`_lock_event`)."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.jobs: deque = deque()
        self.busy = False
        self.thread: threading.Thread | None = None
        self.closed = False
        self.failures: list[BaseException] = []
        self.last_submit = 0.0
        self.foreground = 0           # acquisitions of numba's compiler lock by other threads, pending or held
        self.listening = False

    def submit(self, job: Callable[[], None]) -> None:
        self._listen()
        with self.lock:
            if self.closed:
                return
            self.jobs.append(job)
            self.last_submit = time.monotonic()
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._work, name="funcgrad-kernel-compiler", daemon=True)
                self.thread.start()
            self.lock.notify_all()

    def _listen(self) -> None:
        """Follow numba's compiler lock (once; numba is imported by the backend that compiles)."""
        if self.listening:
            return
        self.listening = True
        try:
            from numba.core import event
        except ImportError:   # pragma: no cover - no numba: nothing to give way to
            return
        compiler = self

        class _LockListener(event.Listener):
            def on_start(self, ev: Any) -> None:
                compiler._lock_event(+1)

            def on_end(self, ev: Any) -> None:
                compiler._lock_event(-1)
        event.register("numba:compiler_lock", _LockListener())

    def _lock_event(self, delta: int) -> None:
        if threading.current_thread() is self.thread:
            return
        with self.lock:
            self.foreground = max(self.foreground + delta, 0)
            if self.foreground == 0:
                self.lock.notify_all()

    def _give_way(self) -> None:
        """Wait (holding ``self.lock``, which the waits release) until the callers' compiles are
        done; at most ``GIVE_WAY_MAX_S`` (then numba's own lock orders the compiles)."""
        deadline = time.monotonic() + GIVE_WAY_MAX_S
        while not self.closed:
            now = time.monotonic()
            settle = self.last_submit + SETTLE_S - now
            if (settle <= 0 and self.foreground == 0) or now >= deadline:
                return
            self.lock.wait(timeout=min(max(settle, SETTLE_S), deadline - now))

    def give_way(self) -> None:
        """:meth:`_give_way`, called by a job on the compiler thread (elsewhere: nothing to wait for)."""
        if threading.current_thread() is self.thread:
            with self.lock:
                self._give_way()

    def _work(self) -> None:
        idle = False
        while not idle:
            with self.lock:
                while not self.jobs and not idle:
                    self.busy = False
                    self.lock.notify_all()
                    if not self.lock.wait(timeout=5.0) and not self.jobs:
                        self.thread = None   # idle: a later submit starts a new one
                        idle = True
                if idle:
                    break
                self.busy = True
                if not _child.usable():   # a compile process leaves this thread little to do
                    self._give_way()
                if not self.jobs:     # cleared by close() meanwhile
                    continue
                job = self.jobs.popleft()
            try:
                job()
            except BaseException as err:   # the group keeps running on numpy; the error is kept
                with self.lock:
                    self.failures.append(err)
        _child.close()   # idle: the compile process exits too (a later compile starts a new one)

    def wait(self, timeout: float | None = None) -> bool:
        with self.lock:
            return self.lock.wait_for(lambda: not self.jobs and not self.busy, timeout)

    def close(self) -> None:
        """At exit: finish the queued compiles (so the next process finds the kernels on
        disk, and the interpreter never stops inside numba while it writes its cache
        files), then take no more."""
        self.wait(timeout=120.0)
        with self.lock:
            self.closed = True
            self.jobs.clear()
        _child.close()


_compiler = _Compiler()
_child = compile_worker.Child()
atexit.register(_compiler.close)


def compile_in_background(job: Callable[[], None]) -> None:
    """Run ``job`` (a kernel compile) on the background compiler thread, after those queued before it.

    >>> compile_in_background(lambda: None)
    >>> wait_for_kernels()
    True
    """
    _compiler.submit(job)


_runtime_queued: list[bool] = []


def start_runtime_early() -> None:
    """Queue the start of numba's runtime (:func:`kernel_cache.start_runtime`) on the compiler
    thread, once per process: called when a program is first traced, it runs beside the tracing
    and the program's first operations rather than inside the first kernel's load."""
    if not _runtime_queued:
        _runtime_queued.append(True)
        _compiler.submit(kernel_cache.start_runtime)


def compile_elsewhere(spec: KernelSpec, signature: tuple) -> bool:
    """Have the compile process (:mod:`funcgrad.compiler.compile_worker`) put ``spec``'s kernel for
    the numba argument types ``signature`` into the disk cache, where :func:`compile_kernel`'s
    kernel then finds it; False when it did not (then compile as usual: also when the disk
    cache holds the kernel already).  For the background compiles: the caller waits for it."""
    if not _child.usable():
        return False
    kernel = compile_kernel(spec)   # its source file written (or found) in the cache directory
    dispatcher = kernel if hasattr(kernel, "compile") else kernel.__wrapped__   # under a launch guard
    py_func = dispatcher.py_func
    path = py_func.__globals__.get("__file__")   # "<funcgrad kernel ...>" when compiled in memory
    if not path or not os.path.exists(path):
        return False
    if _cached_on_disk(dispatcher):
        # Loaded here, under the interpreter lock: after the callers' calls have settled, as
        # compiles without a compile process are (the first call of a warm start then runs alone).
        _compiler.give_way()
        return False
    return _child.compile(path, py_func.__module__, signature)


def _cached_on_disk(dispatcher: Any) -> bool:
    """Whether numba's index file for ``dispatcher`` exists (it then loads rather than compiles)."""
    try:
        return os.path.exists(dispatcher._cache._cache_file._index_path)
    except AttributeError:   # another numba layout, or not cached: let the child try
        return False


def wait_for_kernels(timeout: float | None = None) -> bool:
    """Block until every kernel queued for background compilation is ready (False: timed out).

    Programs run their fused groups on numpy until their kernel is ready; call this
    to have every later call run the compiled kernels (e.g. before timing a step).

    >>> wait_for_kernels()
    True
    """
    return _compiler.wait(timeout)
