"""Attention on the CPU (float32): funcgrad's flash and naive ``nn.dot_product_attention`` against PyTorch's
``scaled_dot_product_attention`` (SDPA), forward and forward+backward, time and peak memory.

funcgrad and PyTorch each run in a worker process of their own, timed in interleaved rounds; medians and
their spread, and the ratio flash / SDPA from the same run. Memory: the peak RSS growth of one call in the
peer's own process (peak reset just before, freed heap returned first), and for funcgrad also numpy's
peak (tracemalloc).

* the headline point: B*H=8, N=4096, d=64, causal and not;
* ``--sweep``: B*H=8, d=64, N from 256 to 16,384, causal and not. A naive score matrix above
  ``--max-naive-gb`` (three of them live in the backward pass) is skipped and reported as such.

    python benchmarks/attention.py [--quick] [--sweep] [--threads N]
    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296 \\
        python benchmarks/attention.py             # with the glibc allocator tunables set
"""
from __future__ import annotations

import ctypes
import gc
import json
import os
import sys
import time
import tracemalloc
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

from _harness import Record, arguments, chosen, fmt_ratio, fmt_stat, json_path  # noqa: E402
from _peers import run_cases, worker  # noqa: E402

NAME = "attention"
SCRIPT = os.path.abspath(__file__)
PEERS = ["funcgrad", "pytorch"]
MODULES = {"funcgrad": "funcgrad", "pytorch": "torch"}
NS = (256, 1024, 4096, 8192, 16384)
HEADLINE = {"bh": 8, "n": 4096, "d": 64}
MB = 1e6


# --------------------------------------------------------------------------
# Memory of one call, in the worker's own process
# --------------------------------------------------------------------------


def _status(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def measure_call(fn: Callable[[], object]) -> dict:
    """Run ``fn`` once: seconds, peak RSS growth (Linux) and numpy's peak (tracemalloc), in MB."""
    gc.collect()
    try:                                      # return freed heap pages, so the growth counts this call's
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")                      # VmHWM := VmRSS
        rss0 = _status("VmRSS")
    except OSError:
        rss0 = None
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        fn()
        seconds = time.perf_counter() - t0
        traced = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    hwm = _status("VmHWM")
    return {"seconds": seconds, "rss_peak_mb": (hwm - rss0) / MB if rss0 is not None and hwm else None,
            "numpy_peak_mb": traced / MB}


# --------------------------------------------------------------------------
# Builders
# --------------------------------------------------------------------------


def make_inputs(bh: int, n: int, d: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """q, k, v, do: float32[bh, n, d], standard normal."""
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((bh, n, d), dtype=np.float32) for _ in range(4))


def _threads(arg: dict, peer: str) -> None:
    n = arg.get("threads")
    if not n:
        return
    if peer == "pytorch":
        import torch
        torch.set_num_threads(n)
    else:
        from funcgrad.backends.cpu import _threads as threads
        threads.set_num_threads(n)


def _with_memory(calls: dict) -> tuple[dict, dict]:
    """The calls, and as checks each call's memory (its first call, after a warm-up at the same size)."""
    checks = {}
    for name, fn in calls.items():
        fn()                                  # compiles, and sizes the allocator's pools
        checks[name] = measure_call(fn)
    return calls, checks


def point_funcgrad(arg: dict):
    import funcgrad as fg
    import funcgrad.nn as nn
    import funcgrad.numpy as fnp
    _threads(arg, "funcgrad")
    q, k, v, do = (fnp.asarray(a) for a in make_inputs(arg["bh"], arg["n"], arg["d"]))
    calls = {}
    for impl in arg["impls"]:
        def attention(q, k, v, impl=impl):
            return nn.dot_product_attention(q, k, v, causal=arg["causal"], impl=impl)

        def forward_backward(attention=attention):
            _, pullback = fg.vjp(attention, q, k, v)
            return fg.block_until_ready(pullback(do))
        calls[f"{impl} fwd"] = lambda attention=attention: np.asarray(attention(q, k, v))
        calls[f"{impl} fwd+bwd"] = forward_backward
    return _with_memory(calls)


def point_torch(arg: dict):
    import torch
    import torch.nn.functional as F
    _threads(arg, "pytorch")
    # (1, BH, N, d): SDPA's fused CPU kernel wants 4-D (B, H, L, E); 3-D inputs take its materialised path.
    q, k, v, do = (torch.from_numpy(a)[None] for a in make_inputs(arg["bh"], arg["n"], arg["d"]))
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    causal = arg["causal"]

    def forward():
        with torch.no_grad():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def forward_backward():
        for t in leaves:
            t.grad = None
        F.scaled_dot_product_attention(*leaves, is_causal=causal).backward(do)
        grads = [t.grad for t in leaves]
        for t in leaves:       # dropped, so that the next call allocates afresh (as funcgrad does)
            t.grad = None
        return grads
    return _with_memory({"sdpa fwd": forward, "sdpa fwd+bwd": forward_backward})


BUILDERS = {("point", "funcgrad"): point_funcgrad, ("point", "pytorch"): point_torch}


# --------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------


def available_bytes() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return float("inf")


def impls_for(bh: int, n: int, causal: bool, args) -> tuple[list[str], dict]:
    """The funcgrad implementations to run at a point, and {impl: why skipped} for the others: naive when its
    score matrix is over ``--max-naive-gb`` or 80% of the free memory (and in smoke runs)."""
    scores = bh * n * n * 4
    if args.quick:
        return ["flash"], {"naive": "not in smoke runs"}
    limit = min(args.max_naive_gb * 1e9, 0.8 * available_bytes())
    if scores * 3 > limit:                    # scores, probabilities and their gradient
        return ["flash"], {"naive": f"out of memory (3 x {scores / 1e9:.1f} GB of scores > {limit / 1e9:.1f} GB)"}
    return ["flash", "naive"], {}


def measure_points(points: list[dict], args, record: Record, rounds: int) -> list[dict]:
    """Every point ({bh, n, d, causal}) through one worker per peer: the points with results, memory, skips.
    Interleaved rounds stop early once ``--max-seconds`` x 3 is spent (at least 3 rounds)."""
    cases, memory, skips = [], {}, {}
    for pt in points:
        impls, skipped = impls_for(pt["bh"], pt["n"], pt["causal"], args)
        label = f"B*H={pt['bh']}, N={pt['n']}, d={pt['d']}, {'causal' if pt['causal'] else 'non-causal'}"
        cases.append({"case": "point", "label": label, "arg": dict(pt, impls=impls, threads=args.threads)})
        skips[label] = skipped

    def keep_memory(case, active):
        memory[case["label"]] = {name: m for p in active for name, m in p.hello["checks"].items()}
    res = run_cases(SCRIPT, chosen(PEERS, args), cases, rounds=rounds, record=record,
                    baseline="pytorch/sdpa fwd+bwd", budget_s=3 * args.max_seconds, check=keep_memory)
    out = []
    for pt, case in zip(points, cases):
        label = case["label"]
        for peer, calls in res[label].items():
            for name, s in calls.items():
                s.update({k: memory[label].get(name, {}).get(k) for k in ("rss_peak_mb", "numpy_peak_mb")})
        out.append(dict(pt, label=label, results=res[label], skipped=skips[label]))
    return out


def _get(point: dict, peer: str, name: str) -> dict | None:
    return point["results"].get(peer, {}).get(name)


def flash_flops(pt: dict, mode: str) -> float:
    """The matrix-product FLOPs flash performs: per head 4 N^2 d forward (Q K^T and P V), 10 N^2 d more
    backward (Q K^T again, then dV, dP, dQ, dK); half of it under a causal mask."""
    per = (4 if mode == "fwd" else 14) * pt["n"] ** 2 * pt["d"] * pt["bh"]
    return per / 2 if pt["causal"] else per


def rows(points: list[dict]) -> list[dict]:
    out = []
    for pt in points:
        for mode in ("fwd", "fwd+bwd"):
            row = {"N": f"{pt['n']:,}", "causal": "yes" if pt["causal"] else "no", "pass": mode}
            for peer, impl in (("funcgrad", "flash"), ("funcgrad", "naive"), ("pytorch", "sdpa")):
                s = _get(pt, peer, f"{impl} {mode}")
                row[impl] = fmt_stat(s) if s else pt["skipped"].get(impl, "")
                if s and s.get("rss_peak_mb") is not None:
                    row[f"{impl} peak MB"] = f"{s['rss_peak_mb']:.0f}"
            f, t = _get(pt, "funcgrad", f"flash {mode}"), _get(pt, "pytorch", f"sdpa {mode}")
            row["flash / SDPA"] = fmt_ratio(f and f["median_s"], t and t["median_s"])
            if f:
                row["flash GFLOP/s"] = f"{flash_flops(pt, mode) / f['median_s'] / 1e9:.0f}"
            out.append(row)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = arguments(NAME, __doc__, sweep="B*H=8, d=64, N from 256 to 16,384, causal and not")
    ap.add_argument("--threads", type=int, default=None, help="threads for funcgrad's kernels and PyTorch")
    ap.add_argument("--max-seconds", type=float, default=30.0,
                    help="stop a point's interleaved rounds after 3x this (at least 3 rounds)")
    ap.add_argument("--max-naive-gb", type=float, default=4.0, help="skip naive when its score matrix is larger")
    args = ap.parse_args(argv)
    if args.worker:
        worker(BUILDERS, MODULES, args.worker[0], args.worker[1], json.loads(args.worker[2]))
        return
    record = Record(NAME + ("_sweep" if args.sweep else ""), args, script=NAME)
    bh, d = HEADLINE["bh"], HEADLINE["d"]
    if args.sweep:
        ns = (128, 256) if args.quick else NS
        points = [{"bh": bh, "n": n, "d": 32 if args.quick else d, "causal": c} for c in (False, True) for n in ns]
    else:
        points = [{"bh": 2 if args.quick else bh, "n": 256 if args.quick else HEADLINE["n"],
                   "d": 32 if args.quick else d, "causal": c} for c in ((False,) if args.quick else (False, True))]
    done = measure_points(points, args, record, rounds=2 if args.quick else 7)
    record.payload["points"] = [{k: v for k, v in p.items() if k != "results"} for p in done]
    record.table("sweep" if args.sweep else "headline",
                 "Attention, float32, forward and forward+backward (each peer in its own process; interleaved "
                 "medians; peak MB: RSS growth of one call)", rows(done))
    if args.sweep:
        for causal in (False, True):
            tag = "causal" if causal else "noncausal"
            time_series: dict[str, list] = {}
            mem_series: dict[str, list] = {}
            for pt in (p for p in done if p["causal"] == causal):
                for peer, calls in pt["results"].items():
                    for name, s in calls.items():
                        if name.endswith("fwd+bwd"):
                            time_series.setdefault(name, []).append([pt["n"], s["median_s"] * 1e3])
                            if s.get("rss_peak_mb") is not None:
                                mem_series.setdefault(name, []).append([pt["n"], max(s["rss_peak_mb"], 0.1)])
            title = f"Attention forward+backward, B*H={bh}, d={d}, {'causal' if causal else 'non-causal'}"
            record.sweep(f"time_{tag}", title, "N", "ms", time_series)
            record.sweep(f"memory_{tag}", title + ": peak memory", "N", "MB (RSS growth)", mem_series)
    record.write(json_path(record.name, args))


if __name__ == "__main__":
    main()
