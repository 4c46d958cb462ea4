"""The run-time form of a compiled program, with a buffer plan.

Shapes are static inside a jitted program, so the buffers of intermediates
are planned once: a liveness analysis assigns each planned value a buffer,
and values whose lifetimes do not overlap share one.  The buffers persist
across calls (new memory is expensive to touch the first time on these
machines: ~2 us per 4 KiB page), so a steady-state call allocates only its
outputs.  Values handed to the user are never planned buffers (nor views of
them): they stay valid and immutable after the next call.

Only equations that can write into a given buffer take part: primitives
with the ``"writes_out"`` trait (their host implementation takes ``out=``:
fused kernels, ``matmul``).  Everything else allocates as in eager mode.
Primitives with the ``"view"`` trait may return a view of their first
input, whose buffer then lives as long as the view does.  Traits are
declared on the primitive objects by the backend that owns their host
implementations (``funcgrad/backends/cpu/impls.py``).

Outputs of such equations are *recycled*: the program keeps each output
buffer it handed out, and reuses it on a later call only when nothing else
refers to it any more (the caller dropped the Array and no view of it
lives) -- in a training loop, yesterday's parameters become today's.
A lock makes one program safe to call from several threads.

The buffers kept between calls are bounded process-wide, in bytes
(``config.buffer_pool_max_bytes``, default 256 MiB): when a program
allocates and the total is over the budget, the programs run least recently
give theirs up (a program running now keeps its own), and a program dropped
from a jit cache gives them up at once.  A released output buffer still held
by the caller stays valid: the program only stops reusing it.
"""
from __future__ import annotations

import itertools
import operator
import sys
import threading
import warnings
import weakref
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

from funcgrad import _core
from funcgrad import _dtypes
from funcgrad._config import config
from funcgrad._core import Array, _wrap, check_nans, impl_error, run_impl
from funcgrad._ir import Jaxpr, Literal, pretty_print
from funcgrad._warnings import _filtered_list, float_warnings_filtered
from funcgrad.compiler.memory import analyze

# Output buffers remembered per output, for reuse once the caller drops them.
_MAX_RECYCLED = 4

# The errors of an implementation that run_impl turns into one naming the primitive.
_IMPL_ERRORS = (ValueError, TypeError, IndexError, OverflowError)


def _writes_into_buffers(eqn: Any) -> bool:
    return "writes_out" in eqn.prim.traits


class _BufferPool:
    """Bytes of the buffers programs keep between calls, with least-recently-run release.

    ``held`` maps a program's id to ``[weak reference, bytes]``; programs give
    their buffers up least recently run first (by ``Program.last_run``).  A victim is released only if its lock is free (never the
    program that is running, nor one another thread is running): a blocking
    wait here could deadlock against a program waiting for this lock.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()   # re-entered by a weakref callback firing inside it
        self.held: OrderedDict[int, list] = OrderedDict()
        self.total = 0

    def charge(self, program: "Program", nbytes: int) -> None:
        """``program`` keeps ``nbytes`` more (fewer if negative); release others if over budget."""
        key = id(program)
        with self.lock:
            entry = self.held.get(key)
            if entry is None:
                entry = self.held[key] = [weakref.ref(program, lambda _, key=key: self.forget(key)), 0]
                program.pooled = True
            self.held.move_to_end(key)
            entry[1] += nbytes
            self.total += nbytes
            budget = config.buffer_pool_max_bytes
            if nbytes <= 0 or budget <= 0 or self.total <= budget:
                return
            # Least recently run first: each run stamps its program (a counter, no lock on that path).
            by_age = sorted(self.held.items(), key=lambda item: getattr(item[1][0](), "last_run", 0))
            for other_key, (ref, _) in by_age:
                if self.total <= budget:
                    break
                other = ref()
                if other is not None and other_key != key and other.lock.acquire(blocking=False):
                    try:
                        other._release_buffers()
                    finally:
                        other.lock.release()

    def forget(self, key: int) -> int:
        """Stop counting a program's buffers; returns their bytes."""
        with self.lock:
            entry = self.held.pop(key, None)
            if entry is None:
                return 0
            self.total -= entry[1]
            return entry[1]


_POOL = _BufferPool()
_next_run = itertools.count(1).__next__


def pool_bytes() -> int:
    """Bytes of the buffers compiled programs keep between calls, over all programs."""
    return _POOL.total


def _memory_root(a: Any) -> Any:
    """The object owning ``a``'s memory (views, broadcasts and strided views point to it)."""
    while getattr(a, "base", None) is not None:
        a = a.base
    return a


def _unaliased(results: list, values: list) -> list:
    """``results``, with a copy of each that shares memory with an input.

    A loop that runs zero times returns its initial carry, a branch may
    return its operand: such an output is an input's buffer, which may be
    one this program reuses on its next call (a planned buffer), so it must
    not escape or outlive the input as the same memory.
    """
    roots = {id(_memory_root(v)) for v in values if isinstance(v, np.ndarray)}
    return [r.copy() if id(_memory_root(r)) in roots else r for r in results]


def _literal(eqn: Any, value: Any) -> Any:
    """A literal as the step hands it to the implementation: a Python number beside a bfloat16
    operand of an elementwise primitive as a 0-d bfloat16 array (eager evaluation converts it so:
    ``_core.weak_scalars``), else the number."""
    if "elementwise" in eqn.prim.traits and any(
            not isinstance(x, Literal) and x.aval.dtype == _dtypes.bfloat16 for x in eqn.inputs):
        return np.asarray(value, _dtypes.bfloat16)
    return value


class Program:
    """A traced, optimised IR ready to run on numpy buffers."""

    def __init__(self, jaxpr: Jaxpr, plan_memory: bool = True):
        self.jaxpr = jaxpr
        slot: dict[int, int] = {}
        for i, v in enumerate(list(jaxpr.constvars) + list(jaxpr.invars)):
            slot[id(v)] = i
        n = len(slot)
        self.steps = []
        for eqn in jaxpr.eqns:
            ins = [("lit", _literal(eqn, x.value)) if isinstance(x, Literal) else ("var", slot[id(x)])
                   for x in eqn.inputs]
            outs = []
            for v in eqn.outvars:
                slot[id(v)] = n
                outs.append(n)
                n += 1
            self.steps.append([eqn.prim, ins, eqn.params, outs, None])
        self.outs = [("lit", v.value) if isinstance(v, Literal) else ("var", slot[id(v)]) for v in jaxpr.outvars]
        self.n_slots = n
        self.n_fixed = len(jaxpr.constvars) + len(jaxpr.invars)
        self.consts = [c._value for c in jaxpr.consts]
        self.plan: list[str] = []
        self.buffers: list[np.ndarray | None] = []
        self.recycled: dict[int, list[np.ndarray]] = {}
        self.lock = threading.Lock()
        self.pooled = False   # whether the process-wide pool counts buffers of this program
        self.last_run = 0     # _next_run() stamp of the latest call: the pool releases the oldest first
        # Outputs that are (views of) constants are copied: a caller writing
        # through one (ignoring the read-only flag) must not change later calls.
        self._const_roots = {id(_memory_root(c)) for c in self.consts if isinstance(c, np.ndarray)}
        # Which outputs alias a constant is fixed by the program's dataflow, shapes
        # and dtypes, so it is found once, on the first run (None: not yet known).
        self._const_outputs: tuple[int, ...] | None = None if self._const_roots else ()
        # Donation (jit's donate_argnums): per step, {output position: argument index} of donated
        # arguments whose buffer that output may be written into (see plan_donation).
        self.donation: dict[int, dict[int, int]] = {}
        self.donation_plan: list[str] = []
        self._liveness: tuple | None = None
        self._base_of: dict[int, int] = {}   # a view's slot -> the slot whose memory it is (from _plan)
        # The fast path (_run_fast): per-step functions with their slots, literals and targets
        # worked out once, built on the first call that may take it; the 2-d views of planned
        # buffers that fused kernels write, kept until the buffers are released.
        self._fast: tuple | None = None
        self._views: dict[tuple, tuple] = {}
        self.fast_runs = 0    # calls that took the fast path
        if plan_memory:
            self._plan(slot)

    # ------------------------------------------------------------ planning

    def _plan(self, slot: dict) -> None:
        """Give planned slots persistent buffers; share them across disjoint lifetimes."""
        eqns = self.jaxpr.eqns
        last_use: dict[int, int] = {}
        for i, (prim, ins, params, outs, _) in enumerate(self.steps):
            for kind, s in ins:
                if kind == "var":
                    last_use[s] = i
        # A view keeps its base's buffer alive (walk backwards so chains propagate).
        base_of: dict[int, int] = {}
        for i, (prim, ins, params, outs, _) in enumerate(self.steps):
            if "view" in prim.traits and ins and ins[0][0] == "var":
                base_of[outs[0]] = base_of.get(ins[0][1], ins[0][1])
        for view, base in base_of.items():
            last_use[base] = max(last_use.get(base, -1), last_use.get(view, -1))
        self._base_of = base_of
        escaping = {s for kind, s in self.outs if kind == "var"}
        escaping |= {base_of[s] for s in list(escaping) if s in base_of}
        self._liveness = (last_use, escaping)

        free: dict[tuple, list[int]] = {}     # (shape, dtype) -> buffer ids free for reuse
        releases: dict[int, list[tuple]] = {}  # step -> buffers that die after it
        held: dict[int, int] = {}              # slot -> its planned buffer
        for i, (eqn, step) in enumerate(zip(eqns, self.steps)):
            if _writes_into_buffers(eqn):
                chosen = []
                for pos, (v, s) in enumerate(zip(eqn.outvars, step[3])):
                    if s in escaping:   # handed to the caller: a recycled output buffer
                        chosen.append(("out", s))
                        self.plan.append(f"{v.aval.str_short()} -> output (recycled once the caller drops it)")
                        continue
                    key = (v.aval.shape, v.aval.dtype)
                    buf = self._in_place(i, eqn, pos, step[1], key, held, last_use, releases)
                    if buf is None:
                        pool = free.get(key)
                        buf = pool.pop() if pool else len(self.buffers)
                        if buf == len(self.buffers):
                            self.buffers.append(None)   # allocated on first use, reused after
                        self.plan.append(f"{v.aval.str_short()} -> buffer {buf}")
                    else:
                        self.plan.append(f"{v.aval.str_short()} -> buffer {buf} (in place of its input)")
                    chosen.append(("buf", buf))
                    held[s] = buf
                    releases.setdefault(last_use.get(s, i), []).append((key, buf))
                step[4] = chosen
            for key, buf in releases.pop(i, []):
                free.setdefault(key, []).append(buf)

    def _in_place(self, i: int, eqn: Any, pos: int, ins: list, key: tuple, held: dict, last_use: dict,
                  releases: dict) -> int | None:
        """The planned buffer of an input of step ``i`` that its output ``pos`` may be written over
        (taken from the buffers released after the step), or None: an input of the output's shape
        and dtype that dies at this step, read by a fused kernel at the output's index
        (:func:`_in_place_safe`), as XLA shares an elementwise fusion's operand and result."""
        if not hasattr(self.steps[i][0], "in_place"):
            return None
        dying = releases.get(i, [])
        for k, (kind, s) in enumerate(ins):
            buf = held.get(s) if kind == "var" else None
            if buf is None or last_use.get(s) != i or (key, buf) not in dying \
                    or not _in_place_safe(eqn, pos, s, ins, self._base_of):
                continue
            dying.remove((key, buf))
            step = self.steps[i]
            step[0] = step[0].in_place(pos, k)   # the kernel storing the output through the input
            return buf
        return None

    def plan_donation(self, donated: Sequence[bool]) -> None:
        """Let outputs be written into donated arguments' buffers (``jit(donate_argnums=)``).

        ``donated[k]``: whether argument ``k`` may be donated.  An output written by a
        ``"writes_out"`` equation takes the buffer of a donated argument of its shape and
        dtype (first come, first served, as JAX pairs them) when the argument is dead by
        then: no later equation reads it or a view of it, and neither it nor a view of it
        is an output.  An equation may write over an argument it reads itself only where
        that is safe: an elementwise output of a fused kernel reading the argument at the
        same index (every input element is loaded before any output element is stored).
        Whether the buffer really is free (nothing else refers to it) is checked at run time.
        """
        self.donation, self.donation_plan = {}, []
        if self._liveness is None or not any(donated):
            return
        last_use, escaping = self._liveness
        n_consts = len(self.jaxpr.constvars)
        free = [k for k, d in enumerate(donated) if d and n_consts + k not in escaping]
        for i, (eqn, step) in enumerate(zip(self.jaxpr.eqns, self.steps)):
            if step[4] is None or not free:
                continue
            for pos, (v, (kind, _)) in enumerate(zip(eqn.outvars, step[4])):
                if kind != "out":   # only outputs: intermediates have their own planned buffers
                    continue
                for k in free:
                    arg = self.jaxpr.invars[k]
                    if arg.aval.shape != v.aval.shape or arg.aval.dtype != v.aval.dtype:
                        continue
                    used = last_use.get(n_consts + k, -1)
                    if used > i or (used == i and not _in_place_safe(eqn, pos, n_consts + k, step[1],
                                                                     self._base_of)):
                        continue
                    self.donation.setdefault(i, {})[pos] = k
                    self.donation_plan.append(f"{v.aval.str_short()} (output of step {i}) -> donated argument {k}")
                    free.remove(k)
                    break

    def _buffer(self, index: int, aval: Any) -> np.ndarray:
        buf = self.buffers[index]
        if buf is None:
            buf = self.buffers[index] = np.empty(aval.shape, aval.dtype)
            _POOL.charge(self, buf.nbytes)
        return buf

    def _output(self, slot: int, aval: Any) -> np.ndarray:
        pool = self.recycled.get(slot)
        if pool is None:
            pool = self.recycled[slot] = []
        for buf in pool:
            # References: the pool's list, ``buf`` and getrefcount's argument. Any
            # more (the caller's Array, a view's base) and the buffer is in use.
            if sys.getrefcount(buf) == 3:
                buf.setflags(write=True)   # ours again: it owns its memory and nothing sees it
                return buf
        buf = np.empty(aval.shape, aval.dtype)
        pool.append(buf)
        freed = pool.pop(0).nbytes if len(pool) > _MAX_RECYCLED else 0   # callers keeping many: forget the oldest
        _POOL.charge(self, buf.nbytes - freed)
        return buf

    def _release_buffers(self) -> None:
        """Drop the buffers kept between calls (the caller holds ``self.lock``)."""
        self.buffers = [None] * len(self.buffers)
        self._views.clear()
        self.recycled = {}
        self.pooled = False
        _POOL.forget(id(self))

    def release_buffers(self) -> None:
        """Give up the buffers kept between calls now (they are allocated again if it runs again)."""
        with self.lock:
            self._release_buffers()

    def memory_analysis(self) -> Any:
        """The bytes one call needs (arguments, outputs, temporaries, the peak), from the buffer plan:
        a :class:`funcgrad.compiler.memory.MemoryAnalysis` (JAX: ``compiled.memory_analysis()``)."""
        return analyze(self)

    def _target(self, kind: str, index: int, aval: Any) -> np.ndarray:
        return self._buffer(index, aval) if kind == "buf" else self._output(index, aval)

    # -------------------------------------------------------------- running

    def run(self, args: Sequence[np.ndarray], donated: Sequence[bool] | None = None) -> list[Array]:
        """The outputs on these argument buffers.  ``donated[k]``: the caller hands argument
        ``k``'s buffer over (its Array is deleted): an output may be written into it."""
        with self.lock:   # planned and recycled buffers belong to one call at a time
            self.last_run = _next_run()
            if _core._profiler is None and self._const_outputs is not None and not config.debug_nans \
                    and not (donated and self.donation):   # _run's test, inline
                return list(map(_wrap, self._run_fast(args)))
            return list(map(_wrap, self._run(args, donated)))

    def run_buffers(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        """:meth:`run`, returning raw buffers (a loop calling its compiled body each step)."""
        with self.lock:
            self.last_run = _next_run()
            if _core._profiler is None and self._const_outputs is not None and not config.debug_nans:
                return self._run_fast(args)   # _run's test, inline: a loop calls this every step
            return self._run(args)

    def _donatable(self, args: Sequence[np.ndarray], donated: Sequence[bool] | None) -> dict[int, int] | None:
        """``{argument index: reference count}`` of the donated buffers that are free to overwrite:
        contiguous numpy arrays owning their memory that nothing but ``args`` (and this
        program's own recycled-output lists, which reuse a buffer only once nobody refers
        to it) holds -- no other Array, no view.  The count is the one to expect at the
        step that overwrites it (a view made meanwhile raises it: the write is skipped)."""
        if not self.donation or not donated:
            return None
        found = {}
        for k, d in enumerate(donated):
            b = args[k] if d else None
            if type(b) is not np.ndarray or b.base is not None or not b.flags.c_contiguous:
                continue
            pooled = sum(1 for pool in self.recycled.values() for x in pool if x is b)
            # References: ``args``, ``env``, the argument of getrefcount, ``b``, and the recycled lists.
            if sys.getrefcount(b) == 4 + pooled:
                found[k] = pooled
        return found or None

    def _donated_target(self, env: list, k: int, pooled: int) -> np.ndarray | None:
        b = env[self.n_fixed - len(self.jaxpr.invars) + k]
        # References: ``args``, ``env``, the argument of getrefcount, ``b``, and the recycled lists.
        if sys.getrefcount(b) != 4 + pooled:
            return None
        b.setflags(write=True)   # ours: it owns its memory and nothing else sees it
        # A step reading it as well as writing it sees it read-only, as every input (the same
        # kernel signature; the slot is dead after this step).
        ro = b.view()
        ro.setflags(write=False)
        env[self.n_fixed - len(self.jaxpr.invars) + k] = ro
        return b

    def _run(self, args: Sequence[np.ndarray], donated: Sequence[bool] | None = None) -> list[np.ndarray]:
        prof = _core._profiler and _core._profiler.program(self)   # funcgrad.profiler's recorder, or None
        # The fast path once the first call has found which outputs alias constants, unless the call is
        # profiled, checks for NaNs or may write into donated buffers.
        if prof is None and self._const_outputs is not None and not config.debug_nans \
                and not (donated and self.donation):
            return self._run_fast(args)
        return self._run_general(args, donated, prof)

    def _run_general(self, args: Sequence[np.ndarray], donated: Sequence[bool] | None, prof: Any) -> list[np.ndarray]:
        """Every step through the primitives' implementations, with the profiler, debug_nans and donation."""
        env: list[Any] = [None] * self.n_slots
        env[:len(self.consts)] = self.consts
        env[len(self.consts):self.n_fixed] = args
        debug = config.debug_nans
        donatable = self._donatable(args, donated)
        for n, ((prim, ins, params, outs, buffers), eqn) in enumerate(zip(self.steps, self.jaxpr.eqns)):
            if prof is not None:
                start = prof.clock()
            if buffers is not None:   # a "writes_out" primitive: its impl fills the planned buffers
                given: dict[int, np.ndarray] = {}
                if donatable is not None and n in self.donation:
                    values = out = results = None   # the previous step's references go first
                    for pos, k in self.donation[n].items():
                        if k in donatable:
                            b = self._donated_target(env, k, donatable.pop(k))
                            if b is not None:
                                given[pos] = b
                targets = [given[pos] if pos in given else self._target(kind, b, v.aval)
                           for pos, ((kind, b), v) in enumerate(zip(buffers, eqn.outvars))]
                values = [env[i] if kind == "var" else i for kind, i in ins]
                out = targets if prim.multiple_results else targets[0]
                out = prim.impl(*values, out=out, **params) if params else prim.impl(*values, out=out)
                results = out if prim.multiple_results else [out]
            else:
                values = [env[i] if kind == "var" else i for kind, i in ins]
                out = run_impl(prim, prim.impl, values, params)
                results = list(out) if prim.multiple_results else [out]
                results = [r if type(r) is np.ndarray and (r.dtype.itemsize != 8 or config.enable_x64)
                           else _wrap(r)._value for r in results]
                if "higher_order" in prim.traits:
                    results = _unaliased(results, values)
            if prof is not None:
                prof.step(prim, values, results, start)
            if debug:
                check_nans(prim, values, [Array(r) for r in results], eqn.source, eqn.backward)
            for i, r in zip(outs, results):
                env[i] = r
        if self._const_outputs is None:
            self._const_outputs = tuple(n for n, (kind, i) in enumerate(self.outs)
                                        if kind == "var" and id(_memory_root(env[i])) in self._const_roots)
        outs = [env[i] if kind == "var" else _core.as_array(i)._value for kind, i in self.outs]
        for n in self._const_outputs:
            outs[n] = outs[n].copy()
        if prof is not None:
            prof.done()
        return outs

    def _run_fast(self, args: Sequence[Any]) -> list[np.ndarray]:
        """:meth:`_run_general`'s results, through per-step functions built once (:func:`_fast_step`)."""
        if self._fast is None:
            self._fast = self._build_fast()
        env0, steps, read_outs, literal_outs, errors = self._fast
        env = env0.copy()
        env[len(self.consts):self.n_fixed] = args
        self.fast_runs += 1
        if warnings.filters is not _filtered_list[0]:   # float_warnings_filtered(), inline
            float_warnings_filtered()
        try:
            for step in steps:
                step(env)
        except _IMPL_ERRORS as e:
            where = errors.get(step)   # a primitive run as run_impl runs it: its error names it
            if where is None:
                raise
            prim, slots, params = where
            raise impl_error(prim, [env[s] for s in slots], params, e) from e
        outs = list(read_outs(env))
        for n, value in literal_outs:
            outs[n] = _core.as_array(value)._value
        for n in self._const_outputs:
            outs[n] = outs[n].copy()
        return outs

    def _build_fast(self) -> tuple:
        """``(env template, step functions, output slots, literal outputs, error sources)`` of
        :meth:`_run_fast`.  Each literal input gets a slot of its own in the template, filled once."""
        env0: list[Any] = [None] * self.n_slots
        env0[:len(self.consts)] = self.consts

        def slot_of(kind: str, i: Any) -> int:
            if kind == "var":
                return i
            env0.append(i)
            return len(env0) - 1

        steps, errors = [], {}
        me = weakref.proxy(self)   # the steps must not keep their program alive (its buffers go with it)
        for (prim, ins, params, outs, buffers), eqn in zip(self.steps, self.jaxpr.eqns):
            slots = tuple(slot_of(kind, i) for kind, i in ins)
            op = _scalar_op(prim, params, eqn) if buffers is None else None
            if op is not None:   # constants and literals: their scalars, taken once
                known = [env0[s] if s < len(self.consts) or s >= self.n_slots else _UNKNOWN for s in slots]
                step = _scalar_step(op, slots, known, outs[0])
            else:
                step = _fast_step(me, prim, slots, params, tuple(outs), buffers, eqn)
            if buffers is None:   # run as run_impl runs it: an error names the primitive
                errors[step] = (prim, slots, params)
            steps.append(step)
        read_outs = _reader([i if kind == "var" else 0 for kind, i in self.outs])
        literal_outs = [(n, i) for n, (kind, i) in enumerate(self.outs) if kind != "var"]
        return env0, steps, read_outs, literal_outs, errors

    def __repr__(self) -> str:
        text = pretty_print(self.jaxpr)
        if self.plan:
            text += "\nbuffer plan (reused across calls):\n  " + "\n  ".join(self.plan)
        if self.donation_plan:
            text += "\ndonated buffers (written over when free):\n  " + "\n  ".join(self.donation_plan)
        return text


# ------------------------------------------------------------------ fast-path steps
#
# One function per step, ``step(env)``: it reads its inputs from the slots of ``env`` and writes
# its outputs there, doing what Program._run_general does for the step but with everything that
# does not change between calls (slots, literal values, targets, kernel views) fixed when it is
# built.  Results are those of the general path: the same implementations and kernels on the
# same buffers.


def _reader(slots: Sequence[int]) -> Any:
    """A C-level ``read(env)``: the values in ``slots``, as a sequence (Python 3.11 runs a list
    comprehension as a function call of its own)."""
    if len(slots) >= 2:
        return operator.itemgetter(*slots)
    return operator.itemgetter(slice(slots[0], slots[0] + 1) if slots else slice(0, 0))


def _fast_step(program: Program, prim: Any, slots: tuple, params: dict, outs: tuple, buffers: list | None,
               eqn: Any) -> Any:
    """The step function of one equation that is no 0-d arithmetic (:func:`_scalar_step`)."""
    if buffers is None:
        return _plain_step(prim, _reader(slots), params, outs)
    targets = [(kind, i, v.aval) for (kind, i), v in zip(buffers, eqn.outvars)]
    if getattr(prim, "input_views", None) is not None and not params:   # a fused kernel
        return _kernel_step(program, prim, slots, outs, targets, eqn)
    return _writing_step(program, prim, _reader(slots), params, outs, targets)


def _plain_step(prim: Any, read: Any, params: dict, outs: tuple) -> Any:
    """A primitive that allocates its results (as run_impl runs it; errors are named by the caller)."""
    impl = prim.impl
    if prim.multiple_results or "higher_order" in prim.traits:
        multiple, unaliased = prim.multiple_results, "higher_order" in prim.traits

        def step(env: list) -> None:
            values = read(env)
            out = impl(*values, **params)
            results = [_buffer_of(r) for r in (out if multiple else [out])]
            if unaliased:
                results = _unaliased(results, values)
            for i, r in zip(outs, results):
                env[i] = r
        return step
    out = outs[0]
    if params:
        def step(env: list) -> None:
            r = impl(*read(env), **params)
            env[out] = r if type(r) is np.ndarray and (r.dtype.itemsize != 8 or config.enable_x64) \
                else _wrap(r)._value
        return step

    def step(env: list) -> None:   # most primitives: no parameters
        r = impl(*read(env))
        env[out] = r if type(r) is np.ndarray and (r.dtype.itemsize != 8 or config.enable_x64) \
            else _wrap(r)._value
    return step


# Binary ufuncs whose result on two numpy scalars, by Python's operator, is the ufunc's on 0-d arrays
# (the same promotion, IEEE arithmetic; integers wrap around) at a tenth of the cost.
_SCALAR_OPS = {np.add: operator.add, np.subtract: operator.sub, np.multiply: operator.mul,
               np.less: operator.lt, np.less_equal: operator.le, np.greater: operator.gt,
               np.greater_equal: operator.ge, np.equal: operator.eq, np.not_equal: operator.ne}
_UNKNOWN = object()


def _scalar_op(prim: Any, params: dict, eqn: Any) -> Any:
    """The operator for ``eqn`` when it is one of :data:`_SCALAR_OPS` on 0-d integers or floats
    (a loop's counter, its bound test), else None."""
    impl = prim.impl
    op = next((op for f, op in _SCALAR_OPS.items() if f is impl), None) if not params and len(eqn.inputs) == 2 \
        else None
    if op is None or any(v.aval.shape != () or v.aval.dtype.kind not in "iuf" for v in eqn.inputs):
        return None
    return op if eqn.outvars[0].aval.shape == () else None


def _scalar_step(op: Any, slots: tuple, known: list, out: int) -> Any:
    """``op`` on numpy scalars (a 0-d array's ``[()]``; a Python number stays weakly typed), the
    result kept as the general path keeps it (a read-only 0-d array, 64-bit narrowed without x64)."""
    (s0, s1), (c0, c1) = slots, [k if k is _UNKNOWN or type(k) is not np.ndarray else k[()] for k in known]

    def step(env: list) -> None:
        x = env[s0] if c0 is _UNKNOWN else c0
        y = env[s1] if c1 is _UNKNOWN else c1
        r = np.asarray(op(x[()] if type(x) is np.ndarray else x, y[()] if type(y) is np.ndarray else y))
        if r.dtype.itemsize == 8 and not config.enable_x64:
            r = _wrap(r)._value
        else:
            r.setflags(write=False)
        env[out] = r
    return step


def _buffer_of(r: Any) -> np.ndarray:
    """What the general path keeps of an implementation's result: itself, or ``_wrap``'s buffer for a
    number, a numpy scalar or a 64-bit array without x64."""
    return r if type(r) is np.ndarray and (r.dtype.itemsize != 8 or config.enable_x64) else _wrap(r)._value


def _writing_step(program: Program, prim: Any, read: Any, params: dict, outs: tuple, targets: list) -> Any:
    """A ``"writes_out"`` primitive (matmul) filling its planned buffers."""
    impl, multiple = prim.impl, prim.multiple_results

    def step(env: list) -> None:
        full = [program._buffer(i, aval) if kind == "buf" else program._output(i, aval) for kind, i, aval in targets]
        out = impl(*read(env), out=full if multiple else full[0], **params)
        if multiple:
            for i, r in zip(outs, out):
                env[i] = r
        else:
            env[outs[0]] = out
    return step


def _kernel_step(program: Program, fused: Any, slots: tuple, outs: tuple, targets: list, eqn: Any) -> Any:
    """A fused kernel (:class:`funcgrad.compiler.fusion.FusedKernel`) run as its ``impl`` runs it, with
    its inputs' 2-d views worked out once and its planned buffers' 2-d views kept across calls (in
    ``program._views``, dropped when the buffers are released)."""
    from_args = [s < program.n_fixed for s in slots]   # arguments may be numbers or numpy scalars
    plans = [(slot,) + plan for slot, plan in zip(slots, fused.input_views([x.aval.shape for x in eqn.inputs],
                                                                           from_args))]
    planned = [(kind, i, aval, None if kind == "out" and tuple(aval.shape) == shape2d else shape2d)
               for (kind, i, aval), shape2d in zip(targets, fused.out_views)]
    # bfloat16 arrays go to the kernel as their uint16 bit patterns (views): inputs per call, planned
    # buffers' views once (kept in ``views``)
    bits_in = [x.aval.dtype == _dtypes.bfloat16 for x in eqn.inputs] if fused.bfloat16 else None
    as_bits = _kernel_view if fused.bfloat16 else _same
    passed = [k not in fused.aliased for k in range(len(planned))]   # outputs the kernel takes (not aliased)
    views = program._views
    n0, n1 = fused.n0, fused.n1
    prepare = fused.prepare if fused.spec.parallel else None   # thread counts matter to parallel kernels only

    def step(env: list) -> None:
        full, flat = [], []
        for (kind, i, aval, shape2d), take in zip(planned, passed):
            if kind == "buf":
                pair = views.get((i, shape2d))
                if pair is None:
                    buf = program._buffer(i, aval)
                    pair = views[(i, shape2d)] = (buf, as_bits(buf.reshape(shape2d)))
                full.append(pair[0])
                if take:
                    flat.append(pair[1])
            else:
                buf = program._output(i, aval)
                full.append(buf)
                flat.append(as_bits(buf if shape2d is None else buf.reshape(shape2d)))
        kernel = fused.kernel
        if kernel is None:   # not compiled yet
            fused.impl(*[env[slot] for slot in slots], out=full)
        else:
            args = [n0, n1]
            for slot, shape2d, broadcast, from_arg in plans:
                x = env[slot]
                if from_arg and type(x) is not np.ndarray:
                    x = np.asarray(x)
                if broadcast is not None:   # a mixed broadcast: materialised, as the kernel's impl does
                    x = np.ascontiguousarray(np.broadcast_to(x, broadcast))
                args.append(x if shape2d is None else x.reshape(shape2d))
            if bits_in is not None:
                args[2:] = [x.view(np.uint16) if bits else x for x, bits in zip(args[2:], bits_in)]
            if prepare is not None:
                prepare()
            kernel(*args, *flat)
        for i, r in zip(outs, full):
            env[i] = r
    return step


def _kernel_view(x: np.ndarray) -> np.ndarray:
    """A buffer as a fused kernel takes it: bfloat16 as its uint16 bit patterns (a view)."""
    return x.view(np.uint16) if x.dtype == _dtypes.bfloat16 else x


def _same(x: np.ndarray) -> np.ndarray:
    return x


def _in_place_safe(eqn: Any, pos: int, slot: int, ins: list, base_of: dict | None = None) -> bool:
    """Whether output ``pos`` of ``eqn`` may be written over input ``slot`` that it reads:
    only an elementwise output of a fused kernel, the input read at the same index (the
    input has the kernel's full shape; the kernel loads every input element before it
    stores any output element), and no other input a view of it (``base_of``: view slot ->
    the slot whose memory it is; ``x + x.T`` reads elements the kernel has written)."""
    spec = getattr(eqn.prim, "spec", None)
    if spec is None or pos >= len(spec.outputs):
        return False
    if base_of is not None and any(kind == "var" and s != slot and base_of.get(s) == slot for kind, s in ins):
        return False
    shape = eqn.prim.shape
    for (kind, s), x in zip(ins, eqn.inputs):
        if kind == "var" and s == slot and tuple(x.aval.shape) != tuple(shape):
            return False
    return True
