"""FlashAttention on the GPU: funcgrad's Triton kernels against PyTorch's ``scaled_dot_product_attention``.

The sweep: head dims d in {16, 32, 64, 128} x sequence lengths N from 256 to 16,384, causal and not, in
bfloat16 and float32. The batch times heads, B*H, shrinks as N grows (B*H*N = 2^17 tokens), so every point
fills the GPU and the longest ones still run in milliseconds. Forward and backward are timed apart with CUDA
events (median of many calls after warm-up); TFLOP/s count 4*B*H*N^2*d for the forward (half of it when
causal) and 2.5 times that for the backward (five matrix products instead of two).

funcgrad is timed twice: through its public function ``nn.dot_product_attention(impl="flash")`` on GPU arrays
(the primitive, with its Python dispatch) and straight through the Triton kernels. PyTorch runs SDPA with the
flash backend for bfloat16 and the memory-efficient backend for float32 (its flash backend takes no
float32). Each library runs in a worker process of its own, one after the other.

``--tune`` times a list of tile configurations of funcgrad's kernels at one point (bfloat16, N=4096) and
prints the fastest, to choose the defaults in ``funcgrad/backends/gpu/flash_attention.py``.

    python benchmarks/gpu_attention.py [--quick] [--headline] [--tune] [--peers funcgrad,pytorch]
"""
from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

from _gpu import answer, cupy_timer, device_info, hashed_normal, run_worker, time_events, torch_timer  # noqa: E402
from _harness import Record, arguments, chosen, json_path  # noqa: E402

NAME = "gpu_attention"
SCRIPT = os.path.abspath(__file__)
PEERS = ["funcgrad", "pytorch"]
DS = (16, 32, 64, 128)
NS = (256, 512, 1024, 2048, 4096, 8192, 16384)
TOKENS = 2 ** 17
DTYPES = ("bfloat16", "float32")


def configs(quick: bool, headline: bool = False, ns: tuple[int, ...] = NS) -> list[dict]:
    if headline:
        return [{"d": d, "n": n, "bh": max(1, TOKENS // n), "causal": c, "dtype": t}
                for t in DTYPES for c in (False, True) for d in (64, 128) for n in (1024, 4096, 16384)]
    if quick:
        return [{"d": 64, "n": n, "bh": 8, "causal": c, "dtype": t} for n in (256, 1024) for c in (False, True)
                for t in ("bfloat16", "float32")]
    # funcgrad's public function (the primitive) is timed at the headline points only
    return [{"d": d, "n": n, "bh": max(1, TOKENS // n), "causal": c, "dtype": t,
             "primitive": d in (64, 128) and n in (1024, 4096, 16384)}
            for t in DTYPES for c in (False, True) for d in DS for n in ns]


def flops(c: dict) -> tuple[float, float]:
    fwd = 4.0 * c["bh"] * c["n"] * c["n"] * c["d"] * (0.5 if c["causal"] else 1.0)
    return fwd, 2.5 * fwd


def inputs(c: dict, arange, to_float) -> list:
    """q, k, v, dO as float32 device arrays, the same in every worker (see ``_gpu.hashed_normal``)."""
    n = c["bh"] * c["n"] * c["d"]
    return [hashed_normal(n, t * n + c["d"], arange, to_float).reshape(c["bh"], c["n"], c["d"]) for t in range(4)]


def _summary(out: np.ndarray) -> list[float]:
    """A few output values, compared between the workers."""
    return np.asarray(out, np.float64)[0, :2, :4].ravel().tolist()


# --------------------------------------------------------------------------------------------------- workers


def _funcgrad_point(c: dict, timer) -> dict:
    budget = c.get("budget_ms", 60.0)
    import cupy as cp

    import funcgrad as fg
    import funcgrad.nn as nn
    import funcgrad.numpy as fnp
    from funcgrad.backends.gpu import flash_attention as gfa
    host = inputs(c, lambda n: cp.arange(n, dtype=cp.int64), lambda h: h.astype(cp.float32))
    res: dict = {}
    dtype = np.dtype(fnp.bfloat16) if c["dtype"] == "bfloat16" else np.dtype(c["dtype"])
    q, k, v, do = (x.astype(dtype) for x in host)   # (bfloat16: CuPy 14's ml_dtypes arrays, nearest even)
    scale = c["d"] ** -0.5
    kw = dict(causal=c["causal"], scale=scale)
    fcfg, bcfg = c.get("fwd_config"), c.get("bwd_config")
    fcfg = gfa.FwdConfig(*fcfg) if fcfg else None
    bcfg = gfa.BwdConfig(*bcfg) if bcfg else None
    o, lse = gfa.flash_attention_forward(q, k, v, config=fcfg, **kw)
    if c.get("compile_only"):
        gfa.flash_attention_backward(q, k, v, o, lse, do, config=bcfg, **kw)
        cp.cuda.Device().synchronize()
        return res
    res["kernel fwd"] = time_events(lambda: gfa.flash_attention_forward(q, k, v, config=fcfg, **kw), *timer,
                                    budget_ms=budget)
    res["kernel bwd"] = time_events(lambda: gfa.flash_attention_backward(q, k, v, o, lse, do, config=bcfg, **kw),
                                    *timer, budget_ms=budget)
    res["check"] = _summary(cp.asnumpy(o.astype(cp.float32)))
    if c.get("kernel_only") or not c.get("primitive", True):
        return res
    try:
        qa, ka, va, doa = (fg.device_put(fg.from_dlpack(x), "gpu").astype(dtype) for x in host)

        def attn(q, k, v):
            return nn.dot_product_attention(q, k, v, causal=c["causal"], scale=scale, impl="flash")
        res["primitive fwd"] = time_events(lambda: attn(qa, ka, va).block_until_ready(), *timer, budget_ms=budget)
        _, vjp = fg.vjp(attn, qa, ka, va)
        res["primitive bwd"] = time_events(lambda: fg.block_until_ready(vjp(doa)), *timer, budget_ms=budget)
    except Exception as e:  # noqa: BLE001 -- reported in the table
        res["primitive error"] = f"{type(e).__name__}: {str(e)[:300]}"
    return res


def _torch_point(c: dict, timer) -> dict:
    budget = c.get("budget_ms", 60.0)
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    dtype = getattr(torch, c["dtype"])
    made = inputs(c, lambda n: torch.arange(n, dtype=torch.int64, device="cuda"), lambda h: h.to(torch.float32))
    q, k, v, do = (x.to(dtype).reshape(1, c["bh"], c["n"], c["d"]) for x in made)
    for t in (q, k, v):
        t.requires_grad_(True)
    backend = SDPBackend.FLASH_ATTENTION if c["dtype"] != "float32" else SDPBackend.EFFICIENT_ATTENTION
    scale = c["d"] ** -0.5
    res: dict = {"backend": str(backend)}
    with sdpa_kernel(backend):
        def fwd():
            return F.scaled_dot_product_attention(q, k, v, is_causal=c["causal"], scale=scale)
        with torch.no_grad():
            res["sdpa fwd"] = time_events(fwd, *timer, budget_ms=budget)
        o = fwd()
        res["sdpa bwd"] = time_events(lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True), *timer,
                                      budget_ms=budget)
    res["check"] = _summary(o.detach().float().cpu().numpy().reshape(c["bh"], c["n"], c["d"]))
    return res


def worker_main(peer: str, arg: dict) -> None:
    timer = cupy_timer() if peer == "funcgrad" else torch_timer()
    point = _funcgrad_point if peer == "funcgrad" else _torch_point
    results = []
    for c in arg["configs"]:
        t0 = time.perf_counter()
        try:
            r = point(c, timer)
        except Exception as e:  # noqa: BLE001 -- one failing point leaves the others standing
            r = {"error": f"{type(e).__name__}: {str(e)[:400]}"}
        r["wall_s"] = time.perf_counter() - t0
        results.append(r)
        print(json.dumps({"config": c, **{k: v for k, v in r.items() if k != "check"}})[:300], file=sys.stderr,
              flush=True)
    version = __import__({"funcgrad": "funcgrad", "pytorch": "torch"}[peer]).__version__
    answer({"results": results, "version": version, "device": device_info() if peer == "funcgrad" else None})


# --------------------------------------------------------------------------------------------------- parent


def _tflops(f: float, stats: dict | None) -> float | None:
    return f / stats["median_s"] / 1e12 if stats and "median_s" in stats else None


def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "" if x is None else format(x, spec)


def sweep(args, record: Record) -> None:
    ns = tuple(int(n) for n in args.ns.split(",")) if args.ns else NS
    cfgs = [dict(c, budget_ms=args.budget_ms) for c in configs(args.quick, args.headline, ns)]
    peers = chosen(PEERS, args)
    if "funcgrad" in peers and (args.jobs > 1 or args.compile_only):
        precompile(cfgs, max(1, args.jobs), args.timeout / 2)
    if args.compile_only:
        return
    got = {p: run_worker(SCRIPT, p, {"configs": cfgs}, timeout_s=args.timeout) for p in peers}
    for p, g in got.items():
        record.payload["peers"][p] = {"version": g.get("version"), "error": g.get("error"),
                                      "output": g.get("output")}
    record.payload["device"] = got.get("funcgrad", {}).get("device")
    rows, series = [], {}
    for i, c in enumerate(cfgs):
        fl_f, fl_b = flops(c)
        fg_r = (got.get("funcgrad", {}).get("results") or [{}] * len(cfgs))[i]
        pt_r = (got.get("pytorch", {}).get("results") or [{}] * len(cfgs))[i]
        row = {"dtype": c["dtype"], "causal": "yes" if c["causal"] else "no", "d": c["d"], "N": c["n"],
               "B*H": c["bh"]}
        vals = {"fg fwd": _tflops(fl_f, fg_r.get("kernel fwd")), "fg bwd": _tflops(fl_b, fg_r.get("kernel bwd")),
                "fg prim fwd": _tflops(fl_f, fg_r.get("primitive fwd")),
                "fg prim bwd": _tflops(fl_b, fg_r.get("primitive bwd")),
                "sdpa fwd": _tflops(fl_f, pt_r.get("sdpa fwd")), "sdpa bwd": _tflops(fl_b, pt_r.get("sdpa bwd"))}
        for k, v in vals.items():
            row[k + " TFLOP/s"] = _fmt(v)
        row["fwd vs sdpa"] = _fmt(vals["fg fwd"] / vals["sdpa fwd"], ".2f") if vals["fg fwd"] and vals["sdpa fwd"] \
            else ""
        row["bwd vs sdpa"] = _fmt(vals["fg bwd"] / vals["sdpa bwd"], ".2f") if vals["fg bwd"] and vals["sdpa bwd"] \
            else ""
        err = fg_r.get("error") or pt_r.get("error") or fg_r.get("primitive error")
        if fg_r.get("check") and pt_r.get("check"):
            diff = float(np.max(np.abs(np.subtract(fg_r["check"], pt_r["check"]))))
            row["max |fg - sdpa|"] = f"{diff:.1e}"
            if diff > (3e-2 if c["dtype"] == "bfloat16" else 1e-3):
                err = (err or "") + f" outputs differ by {diff:.2e}"
        row["note"] = (err or "")[:120]
        rows.append(row)
        record.payload["measurements"].append({"config": c, "funcgrad": fg_r, "pytorch": pt_r,
                                               "flops": [fl_f, fl_b]})
        if c["d"] == 128:
            tag = "causal" if c["causal"] else "full"
            for k in ("fg fwd", "sdpa fwd", "fg bwd", "sdpa bwd"):
                if vals[k] is not None:
                    series.setdefault(c["dtype"], {}).setdefault(f"{k} {tag}", []).append([c["n"], vals[k]])
    record.table("sweep", "FlashAttention on the GPU: TFLOP/s of funcgrad's Triton kernels and PyTorch SDPA "
                 "(bf16: SDPA flash; fp32: SDPA memory-efficient)", rows)
    for dtype, by_label in series.items():
        record.sweep(dtype, f"FlashAttention {dtype}, d=128: TFLOP/s against N (funcgrad's kernels and SDPA)", "N",
                     "TFLOP/s", by_label)


TUNE = {   # dtype: (forward tile configs, backward tile configs) to try
    "bfloat16": ([(128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3), (128, 32, 4, 4),
                  (128, 64, 4, 4), (64, 128, 4, 3), (128, 128, 8, 2)],
                 [(32, 64, 64, 32, 4, 3), (32, 128, 128, 32, 4, 3), (32, 128, 128, 32, 8, 3), (64, 64, 64, 64, 4, 3),
                  (64, 128, 128, 64, 8, 2), (16, 64, 64, 16, 4, 3), (32, 64, 64, 32, 8, 2), (64, 64, 64, 64, 8, 2)]),
    "float32": ([(64, 32, 4, 2), (64, 64, 4, 2), (64, 32, 8, 2), (128, 32, 8, 2), (64, 64, 8, 3), (32, 64, 4, 2),
                 (128, 64, 8, 2), (64, 32, 4, 3)],
                [(16, 32, 32, 16, 4, 2), (32, 32, 32, 32, 4, 2), (32, 64, 64, 32, 8, 2), (16, 64, 64, 16, 4, 2),
                 (32, 32, 32, 32, 8, 1), (64, 32, 32, 64, 8, 2), (16, 32, 32, 16, 8, 1), (32, 64, 64, 32, 4, 2)]),
}


def precompile(points: list[dict], jobs: int, timeout_s: float) -> None:
    """Compile every point's kernels in ``jobs`` processes at once (each at a small size with the same
    compile-time constants), so that the timing run finds them in Triton's cache on disk."""
    import subprocess
    from _peers import interpreter
    keys = {}
    for c in points:   # one point per set of compile-time constants: the rest hit the cache
        key = (c["dtype"], c["d"], c["causal"], str(c.get("fwd_config")), str(c.get("bwd_config")))
        keys.setdefault(key, dict(c, n=256, bh=1, compile_only=True))
    small = list(keys.values())
    chunks = [small[i::jobs] for i in range(jobs) if small[i::jobs]]
    procs = [subprocess.Popen([interpreter("funcgrad"), SCRIPT, "--worker", "funcgrad", "gpu",
                               json.dumps({"configs": chunk})], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for chunk in chunks]
    t0 = time.perf_counter()
    for p in procs:
        try:
            p.wait(timeout=max(1.0, timeout_s - (time.perf_counter() - t0)))
        except subprocess.TimeoutExpired:
            p.kill()
    print(f"compiled {len(points)} points' kernels in {jobs} processes in {time.perf_counter() - t0:.1f} s",
          flush=True)


def tune(args, record: Record) -> None:
    points = []
    for dtype, (fwds, bwds) in TUNE.items():
        for d in (64, 128):
            base = {"d": d, "n": 4096, "bh": 32, "causal": False, "dtype": dtype, "kernel_only": True}
            for i in range(max(len(fwds), len(bwds))):
                points.append(dict(base, fwd_config=fwds[i % len(fwds)], bwd_config=bwds[i % len(bwds)]))
            points.append(dict(base))                        # the defaults
    if args.jobs > 1 or args.compile_only:
        precompile(points, max(1, args.jobs), args.timeout / 2)
    if args.compile_only:
        return
    got = run_worker(SCRIPT, "funcgrad", {"configs": points}, timeout_s=args.timeout)
    rows = []
    for c, r in zip(points, got.get("results", [])):
        fl_f, fl_b = flops(c)
        rows.append({"dtype": c["dtype"], "d": c["d"], "fwd config": str(c.get("fwd_config", "default")),
                     "fwd TFLOP/s": _fmt(_tflops(fl_f, r.get("kernel fwd"))),
                     "bwd config": str(c.get("bwd_config", "default")),
                     "bwd TFLOP/s": _fmt(_tflops(fl_b, r.get("kernel bwd"))), "error": r.get("error", "")[:80]})
    record.payload["measurements"] = [{"config": c, "funcgrad": r} for c, r in zip(points, got.get("results", []))]
    record.payload["device"] = got.get("device")
    if "error" in got:
        record.payload["error"] = got
    record.table("tune", "Tile configurations of funcgrad's FlashAttention kernels (N=4096, B*H=32, not causal)",
                 rows)


def main(argv: list[str] | None = None) -> None:
    ap = arguments(NAME, __doc__)
    ap.add_argument("--tune", action="store_true", help="time tile configurations instead of the sweep")
    ap.add_argument("--headline", action="store_true", help="only d in {64, 128} and N in {1024, 4096, 16384}")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds each worker may run")
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1),
                    help="processes compiling the kernels before the timing run (1: compile while timing)")
    ap.add_argument("--ns", default=None, help="comma-separated sequence lengths (default 256 to 16384, powers of 2)")
    ap.add_argument("--budget-ms", type=float, default=60.0, help="milliseconds of timed calls per measurement")
    ap.add_argument("--compile-only", action="store_true", help="only fill Triton's kernel cache (see --jobs)")
    args = ap.parse_args(argv)
    if args.worker:
        worker_main(args.worker[0], json.loads(args.worker[2]))
        return
    record = Record(NAME + ("_tune" if args.tune else ""), args, script=NAME)
    (tune if args.tune else sweep)(args, record)
    if args.compile_only:
        return
    record.write(json_path(record.name, args))


if __name__ == "__main__":
    main()
