"""Peers in their own processes: a benchmark script runs each library (funcgrad, JAX, PyTorch, numpy) in a
worker process of its own (their thread pools would otherwise slow each other down and flatter whoever runs
alone), and times them from the parent in interleaved rounds (A B A B ...).

A benchmark script provides ``builders`` ({(case, peer): build}, each build returning ``({name: call},
checks)``, checks a dict or a function returning one after the first calls) and re-enters itself with
``--worker PEER CASE ARG``, calling :func:`worker`. A worker can build further cases (``build CASE ARG``)
so one process per peer serves a whole script. The interpreter of a peer is ``FUNCGRAD_BENCH_PYTHON_<PEER>``
when set (JAX or PyTorch installed elsewhere), else this one.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np


def runtime(peer: str) -> dict:
    """The worker's interpreter and the thread counts of the libraries it loaded."""
    out: dict = {"python": platform.python_version(), "executable": sys.executable}
    if "numba" in sys.modules:
        import numba
        out["numba_threads"] = numba.config.NUMBA_NUM_THREADS
        out["numba"] = numba.__version__
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        out["torch_threads"] = torch.get_num_threads()
        out["torch_interop_threads"] = torch.get_num_interop_threads()
    if "jax" in sys.modules:
        out["xla_flags"] = os.environ.get("XLA_FLAGS", "")
        out["jaxlib"] = getattr(sys.modules.get("jaxlib"), "__version__", "?")
    try:
        from _harness import thread_pools
        out["thread_pools"] = thread_pools()
    except ImportError:
        pass
    if hasattr(os, "sched_getaffinity"):
        out["cpus"] = sorted(os.sched_getaffinity(0))
    out["numpy"] = np.__version__
    return out


def _build(builders: dict, peer: str, case: str, arg: Any) -> dict:
    start = time.perf_counter()
    build = builders.get((case, peer))
    if build is None:
        return {"ready": [], "setup_s": 0.0, "first_call_s": {}, "checks": {}}, {}
    calls, checks = build(arg) if arg is not None else build()
    first, results = {}, {}
    for name, call in calls.items():             # the first call of each: tracing and compiling
        t0 = time.perf_counter()
        results[name] = call()
        first[name] = time.perf_counter() - t0
    if callable(checks):                         # computed after the first calls, so that they compile
        checks = checks()
    if not checks:                               # no checks of its own: the small results that are arrays
        checks = {name: r.tolist() for name, r in results.items() if isinstance(r, np.ndarray) and r.size <= 4096}
    del results
    for call in calls.values():                  # warm-up
        call()
    codegen = sys.modules.get("funcgrad.compiler.codegen")
    if codegen is not None:                      # funcgrad's kernels compiling in the background: timed once ready
        codegen.wait_for_kernels()
    return ({"ready": list(calls), "setup_s": time.perf_counter() - start, "first_call_s": first,
             "checks": checks}, calls)


def pin_to_cpus() -> None:
    """Hold this process to the CPUs listed in ``FUNCGRAD_BENCH_CPUS`` ("0", "0,1"), before any library
    starts its threads: thread-count settings alone do not hold every library (XLA's CPU client ran a
    second thread under its single-thread flags, its CPU time 1.6-1.9x its wall time)."""
    cpus = os.environ.get("FUNCGRAD_BENCH_CPUS", "").strip()
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})


def worker(builders: dict, modules: dict, peer: str, case: str, arg: Any) -> None:
    """Protocol (one JSON object per line on stdout): first ``{"ready": ..., "first_call_s": ...,
    "checks": ..., "version": ..., "runtime": ...}`` or ``{"missing": ...}``; then for each stdin line
    ``time NAME N`` a list of N call times, ``build CASE ARG`` a new ``ready`` answer, until ``quit``."""
    out = sys.stdout
    sys.stdout = sys.stderr                      # anything a library prints stays off the protocol
    pin_to_cpus()
    try:
        module = __import__(modules[peer])
    except ImportError as e:
        print(json.dumps({"missing": "not installed", "why": str(e)}), file=out, flush=True)
        return
    hello, calls = _build(builders, peer, case, arg)
    version = getattr(module, "__version__", "?")
    print(json.dumps(dict(hello, version=version, runtime=runtime(peer))), file=out, flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            return
        if words[0] == "build":
            calls = {}
            hello, calls = _build(builders, peer, words[1], json.loads(" ".join(words[2:])))
            print(json.dumps(dict(hello, version=version)), file=out, flush=True)
            continue
        name, count = " ".join(words[1:-1]), int(words[-1])
        times = []
        for _ in range(count):
            t0 = time.perf_counter()
            calls[name]()
            times.append(time.perf_counter() - t0)
        print(json.dumps(times), file=out, flush=True)


def interpreter(peer: str) -> str:
    """``FUNCGRAD_BENCH_PYTHON_<PEER>`` when set, else this interpreter."""
    return os.environ.get(f"FUNCGRAD_BENCH_PYTHON_{peer.upper()}") or sys.executable


class Peer:
    """One worker process; ``missing`` set when its library is not installed."""

    def __init__(self, script: str, peer: str, case: str, arg: Any = None, env: dict | None = None):
        self.name = peer
        cmd = [interpreter(peer), script, "--worker", peer, case, json.dumps(arg)]
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

    def _send(self, text: str) -> Any:
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        return self._read()

    def build(self, case: str, arg: Any = None) -> dict:
        """Build another case in the same worker (dropping the previous one's calls); its ``ready`` answer."""
        runtime_info = self.hello.get("runtime")
        self.hello = dict(self._send(f"build {case} {json.dumps(arg)}"), runtime=runtime_info)
        return self.hello

    def time(self, name: str, count: int) -> list[float]:
        return self._send(f"time {name} {count}")

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
            except BrokenPipeError:
                pass
        self.proc.wait(timeout=60)


def summarize(samples: list[float]) -> dict:
    """Median, minimum, maximum, quartiles, the spread ((max - min) / median) and the IQR over the median,
    of per-call seconds; and the samples themselves."""
    med = statistics.median(samples)
    q1, q3 = (float(q) for q in np.percentile(samples, [25, 75]))
    return {"median_s": med, "min_s": min(samples), "max_s": max(samples), "q1_s": q1, "q3_s": q3,
            "spread": (max(samples) - min(samples)) / med if med else 0.0,
            "iqr": (q3 - q1) / med if med else 0.0, "rounds": len(samples), "samples_s": samples}


def interleave(peers: list[Peer], names: list[str] | None, rounds: int, inner: int = 1,
               budget_s: float = 60.0, settle_s: float = 0.0) -> dict[str, dict[str, dict]]:
    """{peer: {name: stats}}: round-robin over workloads and peers, ``inner`` calls per sample (their mean),
    at least ``min(3, rounds)`` rounds, stopping early once ``budget_s`` is spent. ``names=None`` times
    every call each peer built. ``settle_s``: a pause before each sample, so that the previous peer's
    spinning worker threads (OpenMP, OpenBLAS) go idle before the next one runs."""
    plan = [(p, n) for n in (names or []) for p in peers] if names else \
        [(p, n) for p in peers for n in p.hello["ready"]]
    samples: dict[str, dict[str, list]] = {}
    for p, n in plan:
        samples.setdefault(p.name, {})[n] = []
    start = time.perf_counter()
    for r in range(rounds):
        for p, n in plan:
            if settle_s:
                time.sleep(settle_s)
            samples[p.name][n].append(statistics.fmean(p.time(n, inner)))
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
            print(f"  {name}: {p.missing} in {interpreter(name)} ({p.hello['why']}), skipped")
        else:
            running.append(p)
    return running, missing


def empty_caches(folder: str) -> dict:
    """Environment variables pointing funcgrad's kernel cache and numba's at ``folder`` (empty for a cold
    start; the same folder again for a warm one)."""
    return {"FUNCGRAD_CACHE_DIR": folder, "NUMBA_CACHE_DIR": os.path.join(folder, "numba")}


def close_all(peers: list[Peer]) -> None:
    for p in peers:
        p.close()


def run_cases(script: str, peer_names: list[str], cases: list[dict], rounds: int, record=None,
              baseline: str | None = None, env: dict | None = None, budget_s: float = 60.0,
              check=None, measure: bool = True) -> dict[str, dict]:
    """Time several cases with one worker per peer: ``cases`` are dicts with ``case`` (the builder key),
    ``label`` (the workload's name in tables), optional ``arg``, ``inner`` (calls per sample) and ``settle``
    (seconds of pause before each sample). Peers
    without a builder for a case sit it out. ``check(case, peers)`` can verify the workers' ``checks``
    before timing. Returns {case label: {peer: {call: stats}}} (each stats with the call's
    ``first_call_s``), and adds them to ``record`` as measurements against ``baseline`` (unless
    ``measure=False``: the caller records them) and the peers' versions and threads."""
    peers, missing = start_peers(script, peer_names, cases[0]["case"], cases[0].get("arg"), env)
    out = {}
    try:
        for i, c in enumerate(cases):
            print(f"  {c['label']} ...", flush=True)
            if i:
                for p in peers:
                    p.build(c["case"], c.get("arg"))
            active = [p for p in peers if p.hello["ready"]]
            if check:
                check(c, active)
            stats = interleave(active, None, rounds, c.get("inner", 1), budget_s, c.get("settle", 0.0))
            for p in active:
                for call, s in stats[p.name].items():
                    s["first_call_s"] = p.hello["first_call_s"].get(call)
                    s["inner"] = c.get("inner", 1)
            out[c["label"]] = stats
            if record is not None and measure:
                record.measure(c["label"], stats, c.get("baseline", baseline))
    finally:
        close_all(peers)
    if record is not None:
        record.peers_from(peers, missing)
    return out


def contender(peer: str, call: str) -> str:
    """A column/row name for one peer's call: the peer alone when the call is its only ``call``."""
    return peer if call in ("call", peer) else f"{peer} {call}"


def long_rows(results: dict, baseline: str | None = None) -> list[dict]:
    """Table rows (workload, contender, median ± spread, IQR, vs baseline) from :func:`run_cases`' result;
    ``baseline`` names a peer (its only call) or ``peer/call``."""
    from _harness import fmt_stat, fmt_ratio, fmt_time
    rows = []
    for label, stats in results.items():
        peer, _, call = (baseline or "").partition("/")
        calls = stats.get(peer, {})
        base = calls.get(call) if call else next(iter(calls.values()), None)
        for p, by_call in stats.items():
            for name, s in by_call.items():
                rows.append({"workload": label, "contender": contender(p, name), "median ± spread": fmt_stat(s),
                             "IQR": f"{s['iqr']:.0%}", "first call": fmt_time(s.get("first_call_s")),
                             f"time / {contender(peer, call or 'call')}": fmt_ratio(s["median_s"], base["median_s"])
                             if base else ""})
    return rows
