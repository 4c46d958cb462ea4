"""Peers in their own processes: a benchmark script runs each library (funcgrad, JAX, PyTorch) in a worker
process of its own (their thread pools would otherwise slow each other down and flatter whoever runs alone),
and times them from the parent in interleaved rounds.

A benchmark script provides ``builders`` ({(case, peer): build}, each build returning ``({name: call},
checks)``) and re-enters itself with ``--worker PEER CASE ARG``, calling :func:`worker`.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np


def worker(builders: dict, modules: dict, peer: str, case: str, arg: Any) -> None:
    """Protocol (one JSON object per line on stdout): first ``{"ready": ..., "first_call_s": ...,
    "checks": ...}`` or ``{"missing": ...}``; then for each stdin line ``time NAME N`` a list of N call
    times, until ``quit``."""
    out = sys.stdout
    sys.stdout = sys.stderr                      # anything a library prints stays off the protocol
    try:
        module = __import__(modules[peer])
    except ImportError as e:
        print(json.dumps({"missing": "not installed", "why": str(e)}), file=out, flush=True)
        return
    start = time.perf_counter()
    calls, checks = builders[case, peer](arg) if arg is not None else builders[case, peer]()
    first = {}
    for name, call in calls.items():             # the first call of each: tracing and compiling
        t0 = time.perf_counter()
        result = call()
        first[name] = time.perf_counter() - t0
        if not checks and isinstance(result, np.ndarray):
            checks[name] = result.tolist()
    for call in calls.values():                  # warm-up
        call()
    print(json.dumps({"ready": sorted(calls), "setup_s": time.perf_counter() - start, "first_call_s": first,
                      "checks": checks, "version": getattr(module, "__version__", "?")}), file=out, flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            return
        name, count = " ".join(words[1:-1]), int(words[-1])
        times = []
        for _ in range(count):
            t0 = time.perf_counter()
            calls[name]()
            times.append(time.perf_counter() - t0)
        print(json.dumps(times), file=out, flush=True)


class Peer:
    """One worker process; ``None`` results and ``missing`` set when its library is not installed."""

    def __init__(self, script: str, peer: str, case: str, arg: Any = None, env: dict | None = None):
        self.name = peer
        cmd = [sys.executable, script, "--worker", peer, case, json.dumps(arg)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=dict(os.environ, **(env or {})))
        self.hello = self._read()
        self.missing = self.hello.get("missing")

    def _read(self) -> Any:
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            raise RuntimeError(f"the {self.name} worker exited (status {code}) without an answer; its stderr "
                               "is above")
        return json.loads(line)

    def time(self, name: str, count: int) -> list[float]:
        self.proc.stdin.write(f"time {name} {count}\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
            except BrokenPipeError:
                pass
        self.proc.wait(timeout=60)


def summarize(samples: list[float]) -> dict:
    """Median, minimum and spread ((max - min) / median) of per-call seconds, as ``time_interleaved``; and
    the samples themselves."""
    med = statistics.median(samples)
    return {"median_s": med, "min_s": min(samples), "spread": (max(samples) - min(samples)) / med if med else 0.0,
            "rounds": len(samples), "samples_s": samples}


def interleave(peers: list[Peer], names: list[str], rounds: int, inner: int = 1,
               budget_s: float = 60.0) -> dict[str, dict[str, dict]]:
    """{peer: {name: stats}}: round-robin over peers and workloads, ``inner`` calls per sample (their mean),
    at least 3 rounds, stopping early once ``budget_s`` is spent."""
    samples: dict[str, dict[str, list]] = {p.name: {n: [] for n in names} for p in peers}
    start = time.perf_counter()
    for r in range(rounds):
        for name in names:
            for p in peers:
                samples[p.name][name].append(statistics.fmean(p.time(name, inner)))
        if r >= 2 and time.perf_counter() - start > budget_s:
            break
    return {peer: {n: summarize(s) for n, s in by_name.items()} for peer, by_name in samples.items()}


def start_peers(script: str, names: list[str], case: str, arg: Any = None,
                env: dict | None = None) -> tuple[list[Peer], dict]:
    """Started workers of ``script``, and {name: "not installed (...)"} for the peers whose library is missing."""
    running, missing = [], {}
    for name in names:
        p = Peer(script, name, case, arg, env)
        if p.missing:
            p.close()
            missing[name] = p.missing
            print(f"  {name}: {p.missing} in {sys.executable} ({p.hello['why']}), skipped")
        else:
            running.append(p)
    return running, missing
