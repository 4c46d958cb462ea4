"""Shared benchmark harness: interleaved timing, medians, environment record, table + JSON.

The machines are shared and noisy, so every benchmark here times its
candidates *interleaved* (round-robin, after warm-up) and reports medians and
the spread; ratios against a baseline measured in the same run are the
numbers to quote.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import time
from typing import Callable

import numpy as np


def environment() -> dict:
    """What moves the numbers: thread counts, allocator settings, versions."""
    env = {k: os.environ.get(k) for k in ("GLIBC_TUNABLES", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                          "FUNCGRAD_NUM_THREADS", "NUMBA_NUM_THREADS", "NUMBA_THREADING_LAYER")}
    env.update(python=platform.python_version(), numpy=np.__version__, cpu_count=os.cpu_count(),
               machine=platform.machine())
    try:
        import numba
        env["numba"] = numba.__version__
        env["numba_threads"] = numba.get_num_threads()
    except Exception:  # numba missing or its thread pool not started: record what we can
        pass
    return env


def time_interleaved(candidates: dict[str, Callable[[], object]], repeats: int = 20, inner: int = 1,
                     warmup: int = 2, budget_s: float = 20.0) -> dict[str, dict]:
    """Median seconds per call of each candidate, timed round-robin.

    ``inner`` calls are timed together (for microsecond-scale work).  Stops
    early when ``budget_s`` is spent, keeping at least 3 rounds.
    """
    for f in candidates.values():
        for _ in range(warmup):
            f()
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    start = time.perf_counter()
    for r in range(repeats):
        for name, f in candidates.items():
            t0 = time.perf_counter()
            for _ in range(inner):
                f()
            samples[name].append((time.perf_counter() - t0) / inner)
        if r >= 2 and time.perf_counter() - start > budget_s:
            break
    out = {}
    for name, s in samples.items():
        med = statistics.median(s)
        out[name] = {"median_s": med, "min_s": min(s), "spread": (max(s) - min(s)) / med if med else 0.0,
                     "rounds": len(s)}
    return out


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def print_table(title: str, rows: list[dict], columns: list[str]) -> None:
    print(f"\n{title}")
    widths = [max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(r.get(c, "")).ljust(w) for c, w in zip(columns, widths)))


def write_json(path: str, payload: dict) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    payload = dict(payload, environment=environment(), timestamp=time.strftime("%Y-%m-%dT%H:%M:%S"))
    with open(path, "w") as f:
        json.dump(payload, f, indent=2, default=str)
    print(f"\nwrote {path}")
