"""A profiler of what funcgrad runs: per primitive, per fused kernel, per jitted call.

>>> import funcgrad as fg
>>> import funcgrad.numpy as fnp
>>> with fg.profiler.profile() as prof:
...     y = fnp.sin(fnp.ones(3)) * 2.0
>>> sorted(row["name"] for row in prof.stats() if row["category"] == "eager")
['mul', 'sin']

Inside a ``profile`` block (or a call of a function wrapped by ``profile(fn)``)
every piece of work funcgrad does in this thread becomes one timed *event*:

* ``eager``: a primitive's implementation run eagerly (one per ``bind`` that
  computes something; tracing records nothing);
* ``jit``: one call of a jitted function, from the call to its return
  (``jit(f) [trace+compile]`` for a call that traced and compiled);
* ``overhead``: the run of a compiled program, ``program (run loop)``;
* ``kernel``: one step of a compiled program that runs a fused kernel,
  ``fused[mul,add,max]`` with the digest of the generated kernel;
* ``primitive``: one step of a compiled program that runs an unfused
  primitive (``matmul``, ``conv``, ...).

Events nest (a jitted call contains its program's run, which contains its
steps).  An event's *self* time is its time minus that of the events inside
it: the self time of a ``jit`` event is the call's dispatch (argument
flattening, the cache lookup, the output pytree, tracing and compiling on a
miss), that of ``program (run loop)`` the program's own work (argument and
buffer handling, the Python of the run loop).  Self times never overlap, so
they add up to at most the profiled wall time.

Turned off, the profiler costs a check of a module-level ``None`` in the
eager path behind bind's fast path (bind's fast path itself is untouched: the
profiler turns it off while it records), one at the top of a jitted call and
of a compiled program's run, and two checks of a local per step of the run.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
import time
import types
import weakref
from typing import Any, Callable

import numpy as np

from funcgrad import _core
from funcgrad._core import run_impl
from funcgrad._dtypes import describe

__all__ = ["Profile", "profile"]

_clock = time.perf_counter_ns

CATEGORIES = ("eager", "jit", "overhead", "kernel", "primitive")
_BOOKKEEPING = "profiler (bookkeeping)"
_SORT_KEYS = {"total": "total_us", "self": "self_us", "mean": "mean_us", "calls": "calls", "bytes": "out_bytes",
              "alloc": "alloc_bytes", "name": "name"}


# --------------------------------------------------------------------------
# Recording: the hook funcgrad._core, funcgrad.jit and the compiled programs call
# --------------------------------------------------------------------------

class _ThreadState(threading.local):
    """The profiles active in one thread (innermost last) and the jitted call being timed."""

    def __init__(self) -> None:
        self.profiles: list[Profile] = []
        self.timing: Any = None   # the Jitted whose call jit_call is timing (its own call passes through)


_state = _ThreadState()
_with_shapes = [0]   # active profiles with record_shapes=True, over all threads


def _shapes(values: Any) -> tuple[str, ...]:
    return tuple(describe(v) for v in values)


def _nbytes(results: Any, kept: bool = False) -> tuple[int, int]:
    """``(out, alloc)``: the bytes of ``results``, and of those that own new memory (not views,
    nor buffers a compiled program keeps across calls: ``kept``)."""
    out = alloc = 0
    for r in results:
        if type(r) is not np.ndarray:   # a device array, a scalar
            n, owner = getattr(r, "nbytes", 0), getattr(r, "base", None) is None
        else:
            n, owner = r.nbytes, r.base is None
        out += n
        if owner and not kept:
            alloc += n
    return out, alloc


def _emit(profiles: list, name: str, cat: str, start: int, end: int, nbytes: tuple[int, int], values: Any,
          kernel: Any) -> None:
    """Append one event to each profile active in this thread, with the time this bookkeeping took."""
    shapes = _shapes(values) if values is not None and _with_shapes[0] else None
    event = (name, cat, start, end, nbytes, shapes, kernel, _clock() - end)
    for p in profiles:
        p._events.append(event)


class _ProgramRun:
    """The recorder of one run of a compiled program (``Program._run`` calls ``step`` and ``done``)."""

    __slots__ = ("profiles", "start")
    clock = staticmethod(_clock)

    def __init__(self, profiles: list) -> None:
        self.profiles = list(profiles)
        self.start = _clock()

    def step(self, prim: Any, values: list, results: list, start: int) -> None:
        end = _clock()
        spec = getattr(prim, "spec", None)
        if spec is not None:   # a fused kernel (funcgrad.compiler.fusion.FusedKernel)
            # The kernel itself stands in for its digest, worked out when the profile is read.
            _emit(self.profiles, repr(prim), "kernel", start, end, _nbytes(results, True), values, prim)
        else:
            kept = "writes_out" in prim.traits   # it wrote into the program's buffers (matmul)
            _emit(self.profiles, prim.name, "primitive", start, end, _nbytes(results, kept), values, None)

    def done(self) -> None:
        _emit(self.profiles, "program (run loop)", "overhead", self.start, _clock(), (0, 0), None, None)


_digests: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()


def _digest(kernel: Any) -> str:
    """The digest naming ``kernel``'s generated source (as in the kernel cache's ``fg_<digest>.py``)."""
    digest = _digests.get(kernel)
    if digest is None:
        from funcgrad.compiler import codegen
        digest = _digests[kernel] = hashlib.sha256(codegen.generate_source(kernel.spec).encode()).hexdigest()[:24]
    return digest


class _Hook:
    """Installed as ``funcgrad._core._profiler`` while any thread profiles."""

    @staticmethod
    def eager(prim: Any, impl: Callable, values: list, params: dict) -> Any:
        profiles = _state.profiles
        if not profiles:   # another thread is profiling: run as usual
            return run_impl(prim, impl, values, params)
        start = _clock()
        out = run_impl(prim, impl, values, params)
        end = _clock()
        _emit(profiles, prim.name, "eager", start, end, _nbytes(out if prim.multiple_results else [out]), values,
              None)
        return out

    @staticmethod
    def program(program: Any) -> _ProgramRun | None:
        return _ProgramRun(_state.profiles) if _state.profiles else None

    @staticmethod
    def enters(jitted: Any) -> bool:
        """Whether this call of ``jitted`` is one to time (not its own call passing through, nor one
        made while a transform traces, which inlines it)."""
        state = _state
        return bool(state.profiles) and state.timing is not jitted and not _core.trace_stack()

    @staticmethod
    def jit_call(jitted: Any, args: tuple, kwargs: dict) -> Any:
        state = _state
        profiles = list(state.profiles)
        previous, state.timing = state.timing, jitted
        misses = jitted.misses
        start = _clock()
        try:
            return jitted(*args, **kwargs)
        finally:
            end = _clock()
            state.timing = previous
            name = f"jit({getattr(jitted.f, '__name__', type(jitted.f).__name__)})"
            if jitted.misses != misses:
                name += " [trace+compile]"
            _emit(profiles, name, "jit", start, end, (0, 0), None, None)


_HOOK = _Hook()
_install_lock = threading.Lock()
_installed = [0, True]   # [profiles active over all threads, bind's fast-path setting before the first]


def _install(shapes: bool) -> None:
    with _install_lock:
        _with_shapes[0] += shapes
        if _installed[0] == 0:
            _installed[1] = _core.set_fast_path(False)   # eager work then reaches apply_primitive's hook
            _core._profiler = _HOOK
        _installed[0] += 1


def _uninstall(shapes: bool) -> None:
    with _install_lock:
        _with_shapes[0] -= shapes
        _installed[0] -= 1
        if _installed[0] == 0:
            _core._profiler = None
            _core.set_fast_path(_installed[1])


# --------------------------------------------------------------------------
# The user's object
# --------------------------------------------------------------------------

class Profile:
    """A profile of what funcgrad runs in this thread while it is active (see :func:`profile`).

    Use it as a context manager, or call it as the function it wraps. It can
    be entered again (also while active: the nested entry is part of the
    outer one); each activation adds its events and wall time.

    >>> prof = fg.profiler.Profile()     # as fg.profiler.profile()
    >>> with prof:
    ...     _ = fnp.exp(fnp.zeros(4))
    >>> with prof:                       # a second activation adds to the first
    ...     _ = fnp.exp(fnp.zeros(4))
    >>> [(r["name"], r["calls"]) for r in prof.stats() if r["category"] == "eager"]
    [('exp', 2)]
    """

    def __init__(self, fn: Callable | None = None, *, record_shapes: bool = False):
        if fn is not None and not callable(fn):
            raise TypeError(f"fg.profiler.profile: expected a function to profile, got {type(fn).__name__}; "
                            "write `with fg.profiler.profile() as prof:` or `fg.profiler.profile(fn)(*args)`")
        self.fn = fn
        self.record_shapes = bool(record_shapes)
        self._events: list[tuple] = []
        self._depth = 0
        self._thread: int | None = None
        self._tid = threading.get_native_id()
        self._origin: int | None = None   # the clock at the first activation: the trace's time zero
        self._began = 0
        self._wall = 0
        if fn is not None:
            functools.update_wrapper(self, fn, updated=())

    # ---------------------------------------------------------- activation

    def __enter__(self) -> "Profile":
        me = threading.get_ident()
        if self._depth:
            if self._thread != me:
                raise RuntimeError("fg.profiler: this profile is active in another thread; a profile records "
                                   "one thread: make one profile per thread")
            self._depth += 1
            return self
        self._thread, self._tid, self._depth = me, threading.get_native_id(), 1
        _install(self.record_shapes)
        _state.profiles.append(self)
        self._began = _clock()
        if self._origin is None:
            self._origin = self._began
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._thread != threading.get_ident():
            raise RuntimeError("fg.profiler: a profile must be left in the thread that entered it")
        self._depth -= 1
        if self._depth:
            return
        self._wall += _clock() - self._began
        profiles = _state.profiles
        profiles.remove(self)
        _uninstall(self.record_shapes)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fn is None:
            raise TypeError("fg.profiler.profile(): only a profile made from a function, profile(fn), is called; "
                            "use this one as `with fg.profiler.profile() as prof:`")
        with self:
            return self.fn(*args, **kwargs)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        # @profile on a method: obj.method(x) runs the method under this profile.
        return self if obj is None else types.MethodType(self, obj)

    @property
    def active(self) -> bool:
        """Whether the profile is recording now."""
        return self._depth > 0

    @property
    def wall_time(self) -> float:
        """Seconds the profile has been active (all activations; up to now while active)."""
        now = _clock() - self._began if self._depth else 0
        return (self._wall + now) / 1e9

    # ------------------------------------------------------------ analysis

    def _timed(self) -> list[tuple[tuple, int]]:
        """``(event, self ns)`` per event: its time minus that of the events directly inside it
        and the profiler's bookkeeping after them."""
        order = sorted(range(len(self._events)), key=lambda i: (self._events[i][2], -self._events[i][3]))
        own = [e[3] - e[2] for e in self._events]
        stack: list[int] = []
        for i in order:
            start, end = self._events[i][2], self._events[i][3]
            while stack and self._events[stack[-1]][3] < end:
                stack.pop()
            if stack and self._events[stack[-1]][2] <= start:
                parent = stack[-1]
                own[parent] -= (end - start) + self._events[i][7]
            stack.append(i)
        return [(e, max(0, s)) for e, s in zip(self._events, own)]

    def stats(self, group_by_input_shape: bool | None = None) -> list[dict]:
        """The table's rows as data, one dict per (name, category[, kernel digest][, input shapes]).

        Keys: ``name``, ``category`` (eager/jit/overhead/kernel/primitive), ``calls``,
        ``total_us`` (time inside, children included), ``self_us`` (without the events
        inside), ``mean_us`` (``total_us / calls``), ``share`` (``self_us`` over the
        profiled wall time), ``out_bytes`` (``nbytes`` of the outputs the calls produced,
        views included), ``alloc_bytes`` (of those, the outputs that own new memory: not
        views, nor the buffers a compiled program keeps across calls and writes its kernels'
        and matmuls' outputs into; temporaries inside an implementation are not seen),
        ``digest`` (a fused kernel's) and ``shapes`` (the
        inputs' ``f32[128,784]``-style shapes, with ``record_shapes=True``; None otherwise).
        A last row ``profiler (bookkeeping)`` holds the profiler's own time between events.
        Sorted by ``total_us``, largest first.

        >>> import funcgrad as fg, funcgrad.numpy as fnp
        >>> with fg.profiler.profile() as prof:
        ...     _ = fnp.exp(fnp.zeros(4))
        >>> [(r["name"], r["calls"]) for r in prof.stats() if r["category"] == "eager"]
        [('exp', 1)]
        """
        by_shape = self.record_shapes if group_by_input_shape is None else bool(group_by_input_shape)
        if by_shape and not self.record_shapes:
            raise ValueError("fg.profiler: group_by_input_shape=True needs the shapes: profile with "
                             "fg.profiler.profile(record_shapes=True)")
        wall = max(self.wall_time * 1e6, 1e-9)
        rows: dict[tuple, dict] = {}
        book = 0
        for event, own in self._timed():
            name, cat, start, end, nbytes, shapes, kernel, spent = event
            digest = None if kernel is None else _digest(kernel)
            book += spent
            key = (name, cat, digest, shapes if by_shape else None)
            row = rows.get(key)
            if row is None:
                row = rows[key] = {"name": name, "category": cat, "calls": 0, "total_us": 0.0, "self_us": 0.0,
                                   "mean_us": 0.0, "share": 0.0, "out_bytes": 0, "alloc_bytes": 0, "digest": digest,
                                   "shapes": list(shapes) if by_shape and shapes is not None else None}
            row["calls"] += 1
            row["total_us"] += (end - start) / 1e3
            row["self_us"] += own / 1e3
            row["out_bytes"] += nbytes[0]
            row["alloc_bytes"] += nbytes[1]
        out = sorted(rows.values(), key=lambda r: -r["total_us"])
        if book:
            out.append({"name": _BOOKKEEPING, "category": "overhead", "calls": len(self._events),
                        "total_us": book / 1e3, "self_us": book / 1e3, "mean_us": 0.0, "share": 0.0,
                        "out_bytes": 0, "alloc_bytes": 0, "digest": None, "shapes": None})
        for row in out:
            row["mean_us"] = row["total_us"] / row["calls"]
            row["share"] = row["self_us"] / wall
        return out

    def table(self, sort_by: str = "total", limit: int | None = 20, group_by_input_shape: bool | None = None) -> str:
        """The rows of :meth:`stats` as a text table (``print(prof.table())``).

        ``sort_by``: ``"total"``, ``"self"``, ``"mean"``, ``"calls"``, ``"bytes"`` (out
        bytes), ``"alloc"`` (alloc bytes) or ``"name"``; ``limit``: the number of rows shown
        (None: all). The profiler's own bookkeeping is the last row, whatever the order.

        >>> import funcgrad as fg, funcgrad.numpy as fnp
        >>> with fg.profiler.profile() as prof:
        ...     _ = fnp.exp(fnp.zeros(4))
        >>> print(prof.table(limit=1))  # doctest: +ELLIPSIS
        Name ... Calls ...
        """
        if sort_by not in _SORT_KEYS:
            raise ValueError(f"fg.profiler: table(sort_by={sort_by!r}): expected one of {sorted(_SORT_KEYS)}")
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise ValueError(f"fg.profiler: table(limit={limit!r}): expected a number of rows >= 0 or None")
        rows = self.stats(group_by_input_shape)
        book = [r for r in rows if r["name"] == _BOOKKEEPING]   # shown last, whatever the order
        rows = [r for r in rows if r["name"] != _BOOKKEEPING]
        key = _SORT_KEYS[sort_by]
        rows.sort(key=(lambda r: r[key]) if key == "name" else (lambda r: -r[key]))
        by_shape = any(r["shapes"] is not None for r in rows)
        header = ["Name", "Category", "Calls", "Total", "Self", "Mean", "Self %", "Out bytes", "Alloc bytes"]
        if by_shape:
            header.append("Input shapes")
        lines = []
        for r in (rows[:limit] if limit is not None else rows) + book:
            name = _clip(r["name"], 48) if r["digest"] is None else f"{_clip(r['name'], 38)} #{r['digest'][:8]}"
            line = [name, r["category"], str(r["calls"]), _fmt_time(r["total_us"]),
                    _fmt_time(r["self_us"]), _fmt_time(r["mean_us"]), f"{100 * r['share']:.1f}%",
                    _fmt_bytes(r["out_bytes"]), _fmt_bytes(r["alloc_bytes"])]
            if by_shape:
                line.append(", ".join(r["shapes"] or []))
            lines.append(line)
        widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(header)]
        left = {0, 1, 9}

        def fmt(cells: list) -> str:
            return "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

        shown = len(lines) - len(book)
        rows += book
        self_sum = sum(r["self_us"] for r in rows)
        wall = self.wall_time * 1e6
        text = [fmt(header), "-" * len(fmt(header))] + [fmt(line) for line in lines]
        text.append(f"Wall time {_fmt_time(wall)}; self times add up to {_fmt_time(self_sum)} "
                    f"({100 * self_sum / max(wall, 1e-9):.1f}%); the rest ran between the events (your Python, "
                    f"and funcgrad's eager dispatch and autodiff around the primitives). {len(rows) - len(book)} rows"
                    + (f", {shown} shown." if shown < len(rows) - len(book) else "."))
        return "\n".join(line.rstrip() for line in text)

    def export_chrome_trace(self, path: str | os.PathLike) -> None:
        """Write the events as Chrome-trace JSON (opens in ui.perfetto.dev and chrome://tracing).

        One complete event (``"ph": "X"``) per record, ``ts``/``dur`` in microseconds from the
        profile's start, nested as they ran; ``args`` hold the output bytes, a kernel's digest and,
        with ``record_shapes=True``, the input shapes.
        """
        with open(path, "w") as f:
            json.dump(self._trace(), f)

    def _trace(self) -> dict:
        pid, tid, origin = os.getpid(), self._tid, self._origin or 0
        events: list[dict] = [
            {"name": "process_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": "funcgrad"}},
            {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": f"thread {tid}"}},
        ]
        for name, cat, start, end, nbytes, shapes, kernel, _ in sorted(self._events, key=lambda e: (e[2], -e[3])):
            args: dict[str, Any] = {"out_bytes": nbytes[0], "alloc_bytes": nbytes[1]}
            if kernel is not None:
                args["digest"] = _digest(kernel)
            if shapes is not None:
                args["shapes"] = list(shapes)
            events.append({"name": name, "cat": cat, "ph": "X", "ts": (start - origin) / 1e3,
                           "dur": (end - start) / 1e3, "pid": pid, "tid": tid, "args": args})
        return {"traceEvents": events, "displayTimeUnit": "ms"}

    def __repr__(self) -> str:
        state = "active" if self._depth else "inactive"
        return f"<funcgrad Profile, {state}, {len(self._events)} events, {self.wall_time * 1e3:.3f} ms>"


def profile(fn: Callable | None = None, *, record_shapes: bool = False) -> Profile:
    """Profile what funcgrad runs: eager primitives, jitted calls, their kernels and steps.

    ``with profile() as prof: ...`` records the work of this thread inside the
    block; ``profile(fn)`` returns a :class:`Profile` that, called like ``fn``,
    runs ``fn`` under it (each call adds to the same profile, also as a decorator).
    ``record_shapes=True`` keeps the input shapes (and dtypes) of each event, for
    ``table``/``stats`` grouped by them and for the trace's ``args``.

    Read it with ``prof.table()`` (text), ``prof.stats()`` (rows as dicts) and
    ``prof.export_chrome_trace(path)`` (ui.perfetto.dev, chrome://tracing).
    Times are host wall-clock times (``time.perf_counter_ns``).

    >>> import funcgrad as fg, funcgrad.numpy as fnp
    >>> step = fg.jit(lambda x: fnp.maximum(x * 2.0 + 1.0, 0.0))
    >>> prof = fg.profiler.profile(step)
    >>> _ = prof(fnp.ones(8)); _ = prof(fnp.ones(8))
    >>> sorted({(r["name"], r["calls"]) for r in prof.stats() if r["category"] == "jit"})
    [('jit(<lambda>)', 1), ('jit(<lambda>) [trace+compile]', 1)]
    """
    return Profile(fn, record_shapes=record_shapes)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _fmt_time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f} s"
    if us >= 1e3:
        return f"{us / 1e3:.3f} ms"
    return f"{us:.1f} us"


def _fmt_bytes(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
