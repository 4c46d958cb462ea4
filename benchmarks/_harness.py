"""Shared benchmark harness: the machine record, the command line every script shares, the JSON they write,
tables as markdown.

The machines are shared and noisy, so every benchmark times its candidates *interleaved* (round-robin, after
warm-up) and reports medians and their spread; ratios against a baseline measured in the same run are the
numbers to quote. Each script writes one JSON file with the same top-level keys (see :class:`Record`):
``benchmarks/render.py`` turns its ``tables`` into the documentation's tables and its ``sweeps`` into plots.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from typing import Callable

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
QUICK_RESULTS = os.path.join(RESULTS, "quick")
ENV_KEYS = ("GLIBC_TUNABLES", "MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
            "MALLOC_TOP_PAD_", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "FUNCGRAD_NUM_THREADS",
            "NUMBA_NUM_THREADS", "NUMBA_THREADING_LAYER", "XLA_FLAGS", "TORCH_NUM_THREADS",
            "FUNCGRAD_BENCH_CPUS")


def machine() -> dict:
    """CPU model, core count and the vector extensions that change kernel speed (from /proc/cpuinfo on Linux)."""
    out = {"machine": platform.machine(), "system": platform.system(), "cpu_count": os.cpu_count(),
           "cpu_model": platform.processor() or "?"}
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return out
    for line in info.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            out["cpu_model"] = value.strip()
        elif key.strip() in ("flags", "Features"):
            out["simd_flags"] = sorted(f for f in value.split() if f.startswith(("avx", "fma", "sse4", "neon", "sve")))
            break
    return out


def thread_pools() -> list[dict]:
    """The native thread pools loaded in this process (BLAS, OpenMP) via threadpoolctl, when installed."""
    try:
        import threadpoolctl
    except ImportError:
        return []
    return [{k: p.get(k) for k in ("user_api", "internal_api", "num_threads", "version")}
            for p in threadpoolctl.threadpool_info()]


def environment() -> dict:
    """What moves the numbers: the machine, thread counts, allocator settings, load, versions."""
    env = {"variables": {k: os.environ[k] for k in ENV_KEYS if k in os.environ},
           "python": platform.python_version(), "executable": sys.executable, "numpy": np.__version__,
           "load_average": _load(), "gemm_gflops": gemm_gflops(), **machine()}
    try:
        import numba
        env["numba"] = numba.__version__
        env["numba_threads"] = numba.config.NUMBA_NUM_THREADS
    except Exception:  # numba missing: record what we can
        pass
    env["thread_pools"] = thread_pools()
    return env


def gemm_gflops(n: int = 1024, repeats: int = 9) -> float:
    """The machine's float32 GEMM rate now (numpy's BLAS, all its threads): the median GFLOP/s of
    ``repeats`` n x n products, the ceiling that matrix-bound work (an MLP step, attention) runs against."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    out = np.empty((n, n), np.float32)
    np.matmul(a, b, out=out)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        np.matmul(a, b, out=out)
        times.append(time.perf_counter() - t)
    return round(2 * n ** 3 / sorted(times)[len(times) // 2] / 1e9, 1)


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# --------------------------------------------------------------------------
# Command line and records
# --------------------------------------------------------------------------


def arguments(name: str, doc: str, sweep: str | None = None) -> argparse.ArgumentParser:
    """The options every benchmark script takes: --quick, --sweep (where it has one), --out, --json, --peers."""
    ap = argparse.ArgumentParser(description=doc.strip().split("\n")[0],
                                 epilog="Peers run in worker processes of their own; a peer's interpreter can be "
                                        "set with FUNCGRAD_BENCH_PYTHON_<PEER> (for example "
                                        "FUNCGRAD_BENCH_PYTHON_JAX=/path/to/python).")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: tiny sizes, 1-2 rounds, results into benchmarks/results/quick/")
    if sweep:
        ap.add_argument("--sweep", action="store_true", help=sweep)
    ap.add_argument("--out", default=None, help="folder for the JSON (default benchmarks/results, or "
                                                 "benchmarks/results/quick with --quick)")
    ap.add_argument("--json", default=None, help=f"the JSON's path (default OUT/{name}.json)")
    ap.add_argument("--peers", default=None, help="comma-separated peers to run (default: all that are installed)")
    ap.add_argument("--worker", nargs=3, metavar=("PEER", "CASE", "ARG"), help=argparse.SUPPRESS)
    return ap


def json_path(name: str, args: argparse.Namespace) -> str:
    if args.json:
        return args.json
    return os.path.join(args.out or (QUICK_RESULTS if args.quick else RESULTS), f"{name}.json")


def chosen(peers: list[str], args: argparse.Namespace) -> list[str]:
    """``peers`` limited to ``--peers`` when given."""
    if not getattr(args, "peers", None):
        return list(peers)
    wanted = args.peers.split(",")
    return [p for p in peers if p in wanted]


class Record:
    """One benchmark run's JSON: ``benchmark``, ``mode`` ("quick", "full" or "sweep"), ``command``,
    ``environment`` (with the load average before and after), ``peers`` ({peer: version, interpreter,
    threads} or {"missing": why}), ``measurements`` (one dict per timed call: ``workload``, ``peer``,
    ``call``, ``median_s``, spread, ratio to the baseline), ``tables`` ({name: {title, columns, rows,
    command}}), ``sweeps`` ({name: {title, x, y, series: {label: [[x, y], ...]}}}) and ``seconds``."""

    def __init__(self, name: str, args: argparse.Namespace, script: str | None = None):
        self.name = name
        self.start = time.perf_counter()
        self.mode = "quick" if args.quick else "sweep" if getattr(args, "sweep", False) else "full"
        argv = _without_paths(sys.argv[1:])
        self.payload: dict = {"benchmark": name, "mode": self.mode,
                              "command": " ".join(["python", f"benchmarks/{script or name}.py", *argv]),
                              "environment": environment(), "peers": {}, "measurements": [], "tables": {},
                              "sweeps": {}}

    def peers_from(self, peers: list, missing: dict) -> None:
        """Note the versions, interpreters and thread counts that started workers reported, and the missing."""
        for p in peers:
            self.payload["peers"].setdefault(p.name, {k: p.hello.get(k) for k in ("version", "runtime")})
        for name, why in missing.items():
            self.payload["peers"].setdefault(name, {"missing": why})

    def measure(self, workload: str, stats: dict, baseline: str | None = None, **extra) -> None:
        """Add {peer: {call: stats}} (from :func:`_peers.interleave`) as measurements; ratios against
        ``baseline`` (a peer, or "peer/call") when it was measured."""
        base = _lookup(stats, baseline)
        for peer, calls in stats.items():
            for call, s in calls.items():
                m = {"workload": workload, "peer": peer, "call": call,
                     **{k: v for k, v in s.items() if k != "samples_s"}, **extra}
                if base:
                    m["baseline"], m["ratio"] = baseline, s["median_s"] / base
                self.payload["measurements"].append(m)

    def table(self, key: str, title: str, rows: list[dict], columns: list[str] | None = None,
              note: str = "") -> None:
        columns = columns or list(dict.fromkeys(c for r in rows for c in r))
        columns = [c for c in columns if any(r.get(c) not in (None, "") for r in rows)]
        self.payload["tables"][key] = {"title": title, "columns": columns, "note": note,
                                       "rows": [{c: str(r.get(c, "")) for c in columns} for r in rows],
                                       "command": self.payload["command"]}
        print_table(title, rows, columns)

    def sweep(self, key: str, title: str, x: str, y: str, series: dict, logx: bool = True,
              logy: bool = True) -> None:
        self.payload["sweeps"][key] = {"title": title, "x": x, "y": y, "logx": logx, "logy": logy,
                                       "series": {k: v for k, v in series.items() if v},
                                       "command": self.payload["command"]}

    def write(self, path: str) -> None:
        self.payload["environment"]["load_average_after"] = _load()
        self.payload["environment"]["gemm_gflops_after"] = gemm_gflops()
        self.payload["seconds"] = time.perf_counter() - self.start
        self.payload["timestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as f:
            json.dump(self.payload, f, indent=1, default=_plain)
        print(f"\nwrote {path}")


def _without_paths(argv: list[str]) -> list[str]:
    """The command line less ``--json``/``--out`` and their values (where a result goes is no part of it)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--json", "--out"):
            skip = True
        elif not a.startswith(("--json=", "--out=")):
            out.append(a)
    return out


def _lookup(stats: dict, baseline: str | None) -> float | None:
    if not baseline:
        return None
    peer, _, call = baseline.partition("/")
    calls = stats.get(peer, {})
    s = calls.get(call) if call else (next(iter(calls.values())) if len(calls) == 1 else None)
    return s["median_s"] if s else None


def _plain(x):
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return str(x)


# --------------------------------------------------------------------------
# Timing in one process (funcgrad-only measurements) and formatting
# --------------------------------------------------------------------------


def time_interleaved(candidates: dict[str, Callable[[], object]], repeats: int = 20, inner: int = 1,
                     warmup: int = 2, budget_s: float = 20.0) -> dict[str, dict]:
    """Median seconds per call of each candidate, timed round-robin in this process (for candidates of
    one library only; peers go through :mod:`_peers`).

    ``inner`` calls are timed together (for microsecond-scale work). Stops early when ``budget_s`` is
    spent, keeping at least ``min(3, repeats)`` rounds.
    """
    from _peers import summarize
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
    return {name: summarize(s) for name, s in samples.items()}


def fmt_time(seconds: float) -> str:
    if seconds is None or not math.isfinite(seconds):
        return ""
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def fmt_stat(s: dict | None) -> str:
    """``median ±spread`` of a stats dict, empty for none."""
    return f"{fmt_time(s['median_s'])} ±{s['spread']:.0%}" if s else ""


def fmt_ratio(a: float | None, b: float | None) -> str:
    if not (a and b):
        return ""
    return f"{a / b:.2f}x" if a / b < 10 else f"{a / b:.0f}x"


def print_table(title: str, rows: list[dict], columns: list[str]) -> None:
    print(f"\n{title}")
    widths = [max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(r.get(c, "")).ljust(w) for c, w in zip(columns, widths)))


def write_json(path: str, payload: dict) -> None:
    """Write ``payload`` with the environment record and a timestamp (for scripts without a :class:`Record`)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    payload = dict(payload, environment=environment(), timestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    with open(path, "w") as f:
        json.dump(payload, f, indent=2, default=_plain)
    print(f"\nwrote {path}")


def markdown_table(columns: list[str], rows: list[dict]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(r.get(c, "")).replace("|", "\\|") for c in columns) + " |"
                              for r in rows])


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None
