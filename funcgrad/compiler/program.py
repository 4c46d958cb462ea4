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
from funcgrad.compiler.program_steps import (_UNKNOWN, _fast_step, _in_place_safe, _memory_root, _reader,
                                             _scalar_op, _scalar_step, _unaliased)

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
