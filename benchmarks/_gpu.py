"""What the GPU benchmarks share: timing with CUDA events, the device's name, bfloat16 bits, peers' processes.

GPU work is asynchronous, so a host clock around a call measures the launch, not the work. Every GPU
benchmark times with device events recorded on the stream around each call (CuPy's for funcgrad and CuPy,
PyTorch's for PyTorch, JAX's calls are timed with a host clock after ``block_until_ready``), after warm-up
calls, and reports the median. Each library runs in a worker process of its own, one after another, so that
only one of them uses the GPU at a time.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

import numpy as np


def time_events(call: Callable[[], Any], record: Callable[[], Any], elapsed_ms: Callable[[Any, Any], float],
                sync: Callable[[], None], budget_ms: float = 60.0, min_reps: int = 5, max_reps: int = 200) -> dict:
    """Median and quartiles (seconds) of ``call`` timed between device events.

    ``record()`` returns an event recorded on the current stream, ``elapsed_ms(a, b)`` the milliseconds
    between two, ``sync()`` waits for the device. Three warm-up calls; then as many timed calls as fit
    ``budget_ms`` (between ``min_reps`` and ``max_reps``).
    """
    for _ in range(3):
        call()
    sync()
    a = record()
    call()
    b = record()
    sync()
    first = max(elapsed_ms(a, b), 1e-3)
    reps = int(min(max_reps, max(min_reps, budget_ms / first)))
    marks = []
    for _ in range(reps):
        a = record()
        call()
        marks.append((a, record()))
    sync()
    times = sorted(elapsed_ms(a, b) * 1e-3 for a, b in marks)
    q1, q3 = (float(q) for q in np.percentile(times, [25, 75]))
    return {"median_s": statistics.median(times), "q1_s": q1, "q3_s": q3, "min_s": times[0], "reps": reps}


def cupy_timer():
    """``time_events``' three device hooks for CuPy's current stream."""
    import cupy as cp

    def record():
        e = cp.cuda.Event()
        e.record()
        return e
    return record, lambda a, b: cp.cuda.get_elapsed_time(a, b), cp.cuda.Device().synchronize


def torch_timer():
    """``time_events``' three device hooks for PyTorch's current CUDA stream."""
    import torch

    def record():
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e
    return record, lambda a, b: a.elapsed_time(b), torch.cuda.synchronize


def time_host(call: Callable[[], Any], budget_s: float = 0.5, min_reps: int = 5, max_reps: int = 500) -> dict:
    """Like :func:`time_events` with a host clock (``call`` must wait for its result itself)."""
    for _ in range(3):
        call()
    t0 = time.perf_counter()
    call()
    first = max(time.perf_counter() - t0, 1e-6)
    reps = int(min(max_reps, max(min_reps, budget_s / first)))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    times.sort()
    q1, q3 = (float(q) for q in np.percentile(times, [25, 75]))
    return {"median_s": statistics.median(times), "q1_s": q1, "q3_s": q3, "min_s": times[0], "reps": reps}


def device_info() -> dict:
    """The GPU's name, memory, multiprocessors and the CUDA versions CuPy sees (empty without CuPy/GPU)."""
    try:
        import cupy as cp
        props = cp.cuda.runtime.getDeviceProperties(0)
        return {"gpu": props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
                "memory_gib": round(props["totalGlobalMem"] / 2 ** 30, 1),
                "multiprocessors": props["multiProcessorCount"],
                "compute_capability": f"{props['major']}.{props['minor']}",
                "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(), "cuda_driver": cp.cuda.runtime.driverGetVersion(),
                "cupy": cp.__version__}
    except Exception as e:  # noqa: BLE001 -- recorded, not raised: the caller reports "no GPU"
        return {"gpu": None, "why": f"{type(e).__name__}: {e}"}


def hashed_normal(n: int, offset: int, arange, to_float):
    """``n`` float32 values of mean 0 and variance 1 made on the device from a hash of their index (plus
    ``offset``): identical in every library, fast at any size. ``arange(n)`` gives an int64 device range in
    the worker's library, ``to_float`` converts an int64 array to float32."""
    h = ((arange(n) + offset) * 2654435761) % 4294967296
    h = ((h ^ (h >> 13)) * 1597334677) % 4294967296
    h = h ^ (h >> 16)
    return (to_float(h) / 4294967296.0 - 0.5) * 3.4641016


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), rounded to nearest even (NaN stays NaN)."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def run_worker(script: str, peer: str, arg: dict, timeout_s: float, python: str | None = None) -> dict:
    """Run ``script --worker PEER ARG`` in a process of its own; its last stdout line is a JSON answer.

    A worker that fails or runs out of time gives ``{"error": ...}`` with the end of its output, so that one
    peer's failure leaves the others' numbers standing.
    """
    from _peers import interpreter
    cmd = [python or interpreter(peer), script, "--worker", peer, "gpu", json.dumps(arg)]
    env = dict(os.environ)
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")   # JAX: take memory as needed, like the others
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired as e:
        tail = (e.stdout or b"")[-2000:] if isinstance(e.stdout, bytes) else (e.stdout or "")[-2000:]
        return {"error": f"timed out after {timeout_s:.0f} s", "output": str(tail)}
    sys.stderr.write(res.stderr[-4000:])
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if res.returncode != 0 or not lines:
        return {"error": f"exit status {res.returncode}", "output": (res.stdout + res.stderr)[-3000:]}
    return json.loads(lines[-1])


def answer(payload: dict) -> None:
    """A worker's answer: one JSON line on stdout (anything else it printed went before)."""
    sys.stdout.write("\n" + json.dumps(payload) + "\n")
    sys.stdout.flush()
