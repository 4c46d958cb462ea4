"""CUDA graphs for jitted GPU programs: the whole step launched with one call.

A jitted step on GPU arrays is many small launches (matrix products, generated Triton kernels, row
kernels), and each costs tens of microseconds of Python on the host: a small step is bound by the host,
not the GPU. With ``fg.config.update("gpu_graphs", True)`` (or ``FUNCGRAD_GPU_GRAPHS=1``) a jitted
program's second call on device arguments is *captured* into a CUDA graph (CuPy's stream capture), and
every later call copies its arguments into the graph's input buffers, replays the graph, and copies the
outputs into fresh arrays: three groups of launches instead of one per equation, all on the current
stream, with no host synchronisation.

What makes it safe:

* everything the capture allocates comes from a private memory pool kept with the graph, so no other
  array can be handed memory the graph still writes;
* a replay waits (on the GPU) for the previous replay, whatever stream either ran on, because they share
  the input and output buffers;
* outputs are copied before they are returned, so arrays from earlier calls stay unchanged;
* checks that a program defers to the next host synchronisation (out-of-range labels) are captured with
  it and re-armed, on a copy of their flag, at every replay.

A program that cannot be captured (a host read inside it, a CuPy routine that synchronises) runs as
before, uncaptured, from then on, after one ``RuntimeWarning`` saying why; ``stats`` counts the captures and
keeps the reasons of the failures. Host arguments are never captured. Graphs are off by default.
"""
from __future__ import annotations

import threading
import warnings
from typing import Any, Callable, Sequence

from funcgrad._config import config
from funcgrad.backends.gpu import _deferred

__all__ = ["run", "stats"]

_WARM_CALLS = 1   # calls run normally before capture: they compile the kernels and create the handles
# What this process's captures came to: "captured" (a count) and "failed" (the reasons, one per program).
stats: dict[str, Any] = {"captured": 0, "failed": []}


class _Captured:
    """One captured program: the graph, its input and output buffers, the pool they live in."""

    __slots__ = ("graph", "inputs", "outputs", "pool", "checks", "last", "lock")

    def __init__(self, graph: Any, inputs: list, outputs: list, pool: Any, checks: list):
        self.graph, self.inputs, self.outputs, self.pool, self.checks = graph, inputs, outputs, pool, checks
        self.last: Any = None          # the event recorded after the previous replay
        self.lock = threading.Lock()


def _graphable(xp: Any, buffers: Sequence[Any]) -> bool:
    return hasattr(xp, "cuda") and all(isinstance(b, xp.ndarray) and b.flags.c_contiguous for b in buffers)


def _capture(xp: Any, run: Callable[[list], list], inputs: list) -> Any:
    """Capture ``run(inputs)`` on a fresh stream; returns (graph, outputs). Raises if it cannot be captured
    (the capture is ended either way)."""
    stream = xp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        try:
            outputs = run(inputs)
        except BaseException:
            stream.end_capture()
            raise
        return stream.end_capture(), outputs


def run(program: Any, buffers: Sequence[Any]) -> list | None:
    """The outputs of ``program`` (a GpuProgram) for these argument buffers through its CUDA graph; None
    when graphs are off or the program cannot be graphed (the caller runs it normally)."""
    if not config.gpu_graphs:
        return None
    state = program.graph_state
    if state == "failed":
        return None
    xp = program.xp
    if not _graphable(xp, buffers):
        return None
    if isinstance(state, int):           # warm-up calls
        if state < _WARM_CALLS:
            program.graph_state = state + 1
            return None
        state = program.graph_state = _build(program, buffers)
        if state == "failed":
            return None
    return _replay(program, state, buffers)


def _build(program: Any, buffers: Sequence[Any]) -> Any:
    xp = program.xp
    pool = xp.cuda.MemoryPool()
    try:
        with xp.cuda.using_allocator(pool.malloc):
            inputs = [xp.empty_like(b) for b in buffers]
            with _deferred.collect_deferred_checks() as checks:
                graph, outputs = _capture(xp, lambda ins: [o for o in program.run_uncaptured(ins)], inputs)
    except Exception as e:   # noqa: BLE001 -- anything that breaks capture: run uncaptured from now on
        reason = f"{type(e).__name__}: {str(e)[:300]}"
        stats["failed"].append(reason)
        warnings.warn(f"gpu_graphs: a jitted program could not be captured into a CUDA graph ({reason}); it runs "
                      "uncaptured from now on", RuntimeWarning, stacklevel=4)
        return "failed"
    outs = [o._value if isinstance(getattr(o, "_value", None), xp.ndarray) else o for o in outputs]
    stats["captured"] += 1
    return _Captured(graph, inputs, outs, pool, list(checks))


def _replay(program: Any, cap: _Captured, buffers: Sequence[Any]) -> list:
    xp = program.xp
    backend = program.backend
    with cap.lock:
        stream = xp.cuda.get_current_stream()
        if cap.last is not None:
            stream.wait_event(cap.last)            # the previous replay may still run on another stream
        for dst, src in zip(cap.inputs, buffers):
            xp.copyto(dst, src)
        cap.graph.launch(stream=stream)
        results = [o.copy() if isinstance(o, xp.ndarray) else o for o in cap.outputs]
        for flag, make_error in cap.checks:
            _deferred.defer_check(flag.copy(), make_error)
        cap.last = stream.record()
    return [backend.wrap(r) if isinstance(r, xp.ndarray) else r for r in results]
