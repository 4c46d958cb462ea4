"""Attention sweep: funcgrad flash vs naive vs PyTorch SDPA on the CPU (float32).

For B*H=8 (``--bh``), d in {16, 32, 64, 128} and N in {256, 1024, 4096,
8192, 16384}: forward and forward+backward time of

* ``flash``: ``nn.dot_product_attention(..., impl="flash")`` through ``fg.vjp``;
* ``naive``: the same with ``impl="naive"`` (materialised softmax);
* ``sdpa``: ``torch.nn.functional.scaled_dot_product_attention`` (when torch
  is importable),

and the peak memory of one call. Cases that cannot run are reported, not
crashed on: the naive score matrix above ``--max-naive-gb`` (default 4 GB)
or a naive peak estimated (from smaller N, memory ~ N^2) above the memory
available is "out of memory"; a call estimated (from smaller N, time ~ N^2)
above ``--max-seconds`` is "over budget".

Then the headline point, B*H=8, N=4096, d=64, causal and non-causal, with
more repeats: flash fwd+bwd / SDPA fwd+bwd (target <= 1.0x) and flash's
extra memory beyond its outputs and gradients (target <= 100 MB).

    python benchmarks/attention.py                 # the full sweep (long: ~1 h on 2 cores)
    python benchmarks/attention.py --quick         # smoke run: 2 head sizes, N <= 1024, headline at N=1024
    python benchmarks/attention.py --headline-only
    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296 \\
        python benchmarks/attention.py             # with the glibc allocator tunables set

Times are medians of interleaved repeats (the machine is shared and noisy;
ratios within one run are the numbers to quote). Memory columns: ``peak MB``
is the process' peak RSS growth during one call (VmHWM reset just before,
freed heap returned first with malloc_trim), comparable across funcgrad and
torch; the JSON also has funcgrad's numpy peak from tracemalloc. Writes
JSON to ``--json`` (default benchmarks/results/attention.json) with thread
counts and GLIBC_TUNABLES.
"""
from __future__ import annotations

import importlib.util
import os
import sys

HAVE_TORCH = importlib.util.find_spec("torch") is not None

import argparse  # noqa: E402
import ctypes  # noqa: E402
import gc  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from typing import Callable  # noqa: E402

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import funcgrad as fg  # noqa: E402
import funcgrad.nn as nn  # noqa: E402
import funcgrad.numpy as fnp  # noqa: E402
from funcgrad.testing import process_memory, reset_peak_memory  # noqa: E402
from _harness import environment, print_table, write_json  # noqa: E402

DS = (16, 32, 64, 128)
NS = (256, 1024, 4096, 8192, 16384)
TARGET = {"bh": 8, "n": 4096, "d": 64}
MB = 1e6

# --------------------------------------------------------------------------
# Memory measurement
# --------------------------------------------------------------------------


def _release_free_heap() -> None:
    # Return freed heap pages to the OS so that the next call's RSS growth
    # counts the memory it touches, not pages a previous call left resident.
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def measure_call(fn: Callable[[], object]) -> dict:
    """Run ``fn`` once: seconds, peak RSS growth and numpy (tracemalloc) peak, in bytes.

    Whatever ``fn`` returns is dropped before returning; the peaks include it.
    """
    _release_free_heap()
    have_rss = reset_peak_memory()
    rss0 = process_memory("VmRSS")
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        fn()
        seconds = time.perf_counter() - t0
        _, traced = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rss = (process_memory("VmHWM") - rss0) if have_rss and rss0 is not None else None
    return {"seconds": seconds, "rss_peak_bytes": rss, "traced_peak_bytes": traced}


def available_bytes() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return float("inf")


# --------------------------------------------------------------------------
# Candidates: (method, mode) -> a zero-argument callable
# --------------------------------------------------------------------------


def make_inputs(bh: int, n: int, d: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """q, k, v, do: float32[bh, n, d], standard normal."""
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((bh, n, d), dtype=np.float32) for _ in range(4))


def funcgrad_calls(impl: str, arrays, causal: bool) -> dict[str, Callable[[], object]]:
    """fwd and fwd+bwd of nn.dot_product_attention; inputs are made funcgrad Arrays once
    (a numpy input would be copied on every call: funcgrad never aliases user memory)."""
    q, k, v, do = (fnp.asarray(a) for a in arrays)

    def attention(q, k, v):
        return nn.dot_product_attention(q, k, v, causal=causal, impl=impl)

    def forward():
        return np.asarray(attention(q, k, v))

    def forward_backward():
        _, pullback = fg.vjp(attention, q, k, v)
        return pullback(do)

    return {"fwd": forward, "fwd+bwd": forward_backward}


def sdpa_calls(arrays, causal: bool) -> dict[str, Callable[[], object]]:
    import torch
    import torch.nn.functional as F
    # (1, BH, N, d): SDPA's fused CPU kernel wants 4-D (B, H, L, E); 3-D inputs fall back to the
    # materialised math path (measured: ~3x slower, 1.6 GB at N=4096).
    q, k, v, do = (torch.from_numpy(a)[None] for a in arrays)
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]

    def forward():
        with torch.no_grad():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def forward_backward():
        for t in leaves:
            t.grad = None
        F.scaled_dot_product_attention(*leaves, is_causal=causal).backward(do)
        grads = [t.grad for t in leaves]
        for t in leaves:       # drop them, so that the next call allocates afresh (as funcgrad does)
            t.grad = None
        return grads

    return {"fwd": forward, "fwd+bwd": forward_backward}


def candidates(methods: list[str], arrays, causal: bool) -> dict[tuple[str, str], Callable[[], object]]:
    out = {}
    for method in methods:
        calls = sdpa_calls(arrays, causal) if method == "sdpa" else funcgrad_calls(method, arrays, causal)
        out.update({(method, mode): fn for mode, fn in calls.items()})
    return out


# --------------------------------------------------------------------------
# Budgets: skip instead of crashing
# --------------------------------------------------------------------------


class History:
    """Measured (N, seconds, peak bytes) per (method, mode, d, causal), to extrapolate ~N^2."""

    def __init__(self):
        self._last: dict[tuple, tuple[int, float, float]] = {}

    def record(self, key: tuple, n: int, seconds: float, peak: float) -> None:
        self._last[key] = (n, seconds, peak)

    def estimate(self, key: tuple, n: int) -> tuple[float, float] | None:
        if key not in self._last:
            return None
        n0, seconds, peak = self._last[key]
        growth = (n / n0) ** 2
        return seconds * growth, peak * growth


def skip_reason(method: str, mode: str, bh: int, n: int, d: int, estimate, args) -> str | None:
    scores = bh * n * n * 4
    if method == "naive" and scores > args.max_naive_gb * 1e9:
        return f"out of memory (scores {scores / 1e9:.1f} GB > {args.max_naive_gb:g} GB)"
    if estimate is None:
        return None
    seconds, peak = estimate
    if method == "naive" and peak > 0.8 * available_bytes():
        return f"out of memory (est. {peak / 1e9:.1f} GB > 80% of {available_bytes() / 1e9:.1f} GB free)"
    if seconds > args.max_seconds:
        return f"over budget (est. {seconds:.0f} s > {args.max_seconds:g} s)"
    return None


# --------------------------------------------------------------------------
# One point: memory call, then interleaved timed repeats
# --------------------------------------------------------------------------


def warm_up(methods: list[str]) -> float:
    """Compile/load every kernel once at a tiny size, so no timed or estimated call includes it."""
    t0 = time.perf_counter()
    for causal in (False, True):
        for fn in candidates(methods, make_inputs(2, 300, 32), causal).values():
            fn()
    return time.perf_counter() - t0


def run_point(bh: int, n: int, d: int, causal: bool, methods: list[str], repeats: int, args,
              history: History) -> dict:
    """Results for every (method, mode) at one (bh, n, d, causal): times, memory or a skip reason."""
    arrays = make_inputs(bh, n, d)
    calls = candidates(methods, arrays, causal)
    result: dict[str, dict] = {}
    live = {}
    for (method, mode), fn in calls.items():
        key = (method, mode, d, causal)
        reason = skip_reason(method, mode, bh, n, d, history.estimate(key, n), args)
        name = f"{method} {mode}"
        if reason:
            result[name] = {"skipped": reason}
            continue
        try:
            first = measure_call(fn)          # also the warm-up call
        except MemoryError:
            result[name] = {"skipped": "out of memory (MemoryError)"}
            continue
        result[name] = {"first_s": first["seconds"], "rss_peak_mb": _mb(first["rss_peak_bytes"]),
                        "numpy_peak_mb": _mb(first["traced_peak_bytes"]) if method != "sdpa" else None}
        peak = first["rss_peak_bytes"] or first["traced_peak_bytes"]
        history.record(key, n, first["seconds"], peak)
        if first["seconds"] <= args.max_seconds:
            live[name] = fn
        else:
            result[name]["median_s"] = first["seconds"]
            result[name]["note"] = "one call only (over budget)"
    samples = _interleaved(live, repeats, budget_s=3 * args.max_seconds)
    for name, s in samples.items():
        result[name].update(median_s=statistics.median(s), min_s=min(s), max_s=max(s), rounds=len(s))
        history.record((*name.split(" "), d, causal), n, statistics.median(s),
                       (result[name]["rss_peak_mb"] or result[name]["numpy_peak_mb"] or 0) * MB)
    return result


def _interleaved(fns: dict[str, Callable[[], object]], repeats: int, budget_s: float) -> dict[str, list[float]]:
    """Round-robin timing; stops after the round that exceeds ``budget_s`` (at least one round)."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    start = time.perf_counter()
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
        if time.perf_counter() - start > budget_s:
            break
    return samples


def _mb(x: float | None) -> float | None:
    return None if x is None else round(x / MB, 1)


# --------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------


def _cell_time(r: dict) -> str:
    if "skipped" in r:
        return r["skipped"].split(" (")[0]
    return f"{r['median_s'] * 1e3:.0f}"


def _cell_mem(r: dict) -> str:
    if "skipped" in r or r.get("rss_peak_mb") is None:
        return "-"
    return f"{r['rss_peak_mb']:.0f}"


def sweep_rows(points: list[dict], methods: list[str]) -> list[dict]:
    rows = []
    for p in points:
        row = {"d": p["d"], "N": p["n"], "causal": "yes" if p["causal"] else "no"}
        for m in methods:
            for mode in ("fwd", "fwd+bwd"):
                r = p["results"][f"{m} {mode}"]
                row[f"{m} {mode} ms"] = _cell_time(r)
                row[f"{m} {mode} MB"] = _cell_mem(r)
        ratio = _ratio(p["results"], "fwd+bwd")
        row["flash/sdpa f+b"] = f"{ratio:.2f}x" if ratio else "-"
        rows.append(row)
    return rows


def _ratio(results: dict, mode: str) -> float | None:
    a, b = results.get(f"flash {mode}", {}), results.get(f"sdpa {mode}", {})
    if "median_s" in a and "median_s" in b:
        return a["median_s"] / b["median_s"]
    return None


def headline(bh: int, n: int, d: int, methods: list[str], repeats: int, args) -> list[dict]:
    """Flash (and SDPA) at the target point, causal and non-causal, plus flash's extra memory."""
    out = []
    for causal in (False, True):
        res = run_point(bh, n, d, causal, [m for m in methods if m != "naive"], repeats, args, History())
        kept = 4 * bh * n * d * 4       # o, dq, dk, dv (float32)
        flash = res["flash fwd+bwd"]
        extra = flash["numpy_peak_mb"] * MB - kept
        extra_rss = flash["rss_peak_mb"] * MB - kept if flash.get("rss_peak_mb") is not None else None
        out.append({"bh": bh, "n": n, "d": d, "causal": causal, "results": res,
                    "flash_vs_sdpa_fwd_bwd": _ratio(res, "fwd+bwd"), "flash_vs_sdpa_fwd": _ratio(res, "fwd"),
                    "flash_extra_numpy_mb": extra / MB,
                    "flash_extra_rss_mb": None if extra_rss is None else extra_rss / MB,
                    "naive_scores_gb": bh * n * n * 4 / 1e9})
    return out


def print_headline(rows: list[dict]) -> None:
    print("\n" + "=" * 78)
    r0 = rows[0]
    print(f"HEADLINE  B*H={r0['bh']}, N={r0['n']}, d={r0['d']}, float32, fwd+bwd (target: flash <= 1.0x SDPA, "
          f"<= 100 MB extra)")
    for row in rows:
        res = row["results"]
        flash = res["flash fwd+bwd"]
        sdpa = res.get("sdpa fwd+bwd", {})
        ratio = row["flash_vs_sdpa_fwd_bwd"]
        line = f"  {'causal    ' if row['causal'] else 'non-causal'}  flash {flash['median_s'] * 1e3:7.0f} ms"
        if "median_s" in sdpa:
            line += (f"   SDPA {sdpa['median_s'] * 1e3:7.0f} ms   ratio {ratio:.2f}x "
                     f"({'meets' if ratio <= 1.0 else 'misses'} <= 1.0x)")
        line += (f"   extra memory {row['flash_extra_numpy_mb']:.1f} MB numpy"
                 + (f" / {row['flash_extra_rss_mb']:.1f} MB RSS" if row["flash_extra_rss_mb"] is not None else ""))
        print(line)
    print(f"  (naive would materialise {r0['naive_scores_gb']:.2f} GB of scores alone; "
          f"spread and rounds in the JSON)")
    print("=" * 78)


def torch_environment() -> dict:
    if not HAVE_TORCH:
        return {"torch": None}
    import torch
    return {"torch": torch.__version__, "torch_threads": torch.get_num_threads()}


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: d in {32, 64}, N in {256, 1024}, "
                    "headline at N=1024, 2 repeats")
    ap.add_argument("--bh", type=int, default=TARGET["bh"], help="batch x heads")
    ap.add_argument("--ds", default=",".join(map(str, DS)))
    ap.add_argument("--ns", default=",".join(map(str, NS)))
    ap.add_argument("--causal", choices=["no", "yes", "both"], default="no", help="masks in the sweep "
                    "(the headline always runs both)")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats per sweep point")
    ap.add_argument("--headline-repeats", type=int, default=7)
    ap.add_argument("--max-seconds", type=float, default=30.0,
                    help="skip a call estimated (from smaller N) to take longer than this")
    ap.add_argument("--max-naive-gb", type=float, default=4.0, help="skip naive when its score matrix is larger")
    ap.add_argument("--threads", type=int, default=None, help="threads for funcgrad's kernels and torch "
                    "(default: all cores); 1 gives ratios that suffer less from other jobs on a shared machine")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--headline-only", action="store_true")
    ap.add_argument("--no-headline", action="store_true")
    ap.add_argument("--json", default=os.path.join(HERE, "results", "attention.json"))
    args = ap.parse_args(argv)
    if args.quick:
        args.ds, args.ns, args.repeats, args.headline_repeats = "32,64", "256,1024", 2, 3
    args.ds = [int(x) for x in str(args.ds).split(",") if x]
    args.ns = [int(x) for x in str(args.ns).split(",") if x]
    return args


def write_partial(path: str, points: list[dict]) -> None:
    import json
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".partial", "w") as f:
        json.dump({"sweep": points}, f, default=str)


def set_threads(n: int | None) -> None:
    if n is None:
        return
    from funcgrad.backends.cpu import _threads
    _threads.set_num_threads(n)
    if HAVE_TORCH:
        import torch
        torch.set_num_threads(n)


def main(argv=None) -> dict:
    args = parse_args(argv)
    set_threads(args.threads)
    methods = ["naive", "flash"] + (["sdpa"] if HAVE_TORCH and not args.no_torch else [])
    env = dict(environment(), **torch_environment())
    print(f"threads: numba {env.get('numba_threads')}, torch {env.get('torch_threads')}; "
          f"GLIBC_TUNABLES={env.get('GLIBC_TUNABLES')}; NUMBA_THREADING_LAYER={env.get('NUMBA_THREADING_LAYER')}")
    points: list[dict] = []
    start = time.perf_counter()
    print(f"warm-up (kernel compile/load): {warm_up(methods):.1f} s", flush=True)
    if not args.headline_only:
        history = History()
        causals = {"no": [False], "yes": [True], "both": [False, True]}[args.causal]
        for d in args.ds:
            for causal in causals:
                for n in args.ns:
                    res = run_point(args.bh, n, d, causal, methods, args.repeats, args, history)
                    points.append({"bh": args.bh, "n": n, "d": d, "causal": causal, "results": res})
                    write_partial(args.json, points)      # a long sweep keeps what it has measured
                    print(f"  d={d:<3} N={n:<6} causal={causal!s:<5} done ({time.perf_counter() - start:.0f} s)",
                          flush=True)
        print_table(f"B*H={args.bh} float32: median ms of {args.repeats} interleaved repeats, peak RSS growth MB "
                    f"of one call", sweep_rows(points, methods),
                    ["d", "N", "causal"] + [f"{m} {mode} {u}" for m in methods for mode in ("fwd", "fwd+bwd")
                                            for u in ("ms", "MB")] + ["flash/sdpa f+b"])
        skipped = [(p["d"], p["n"], name, r["skipped"]) for p in points for name, r in p["results"].items()
                   if "skipped" in r]
        for d, n, name, why in skipped:
            print(f"  skipped d={d} N={n} {name}: {why}")
    heads = []
    if not args.no_headline:
        n = 1024 if args.quick else TARGET["n"]
        heads = headline(args.bh, n, TARGET["d"], methods, args.headline_repeats, args)
        if args.quick:
            print("\n(--quick: headline measured at N=1024, not the target N=4096)")
        print_headline(heads)
    payload = {"args": {k: v for k, v in vars(args).items()}, "torch": torch_environment(), "sweep": points,
               "headline": heads, "total_seconds": time.perf_counter() - start,
               "note": "shared machine: other jobs may take a core; ratios within this run are the numbers "
                       "to quote"}
    write_json(args.json, payload)
    return payload


if __name__ == "__main__":
    main()
