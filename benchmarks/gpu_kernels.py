"""Single kernels on the GPU against the machine's ceilings: memory-bound rows and matrix products.

* The ceiling for memory-bound work: a device-to-device copy (CuPy), counting bytes read plus written.
* funcgrad's softmax, log_softmax and softmax cross-entropy (forward and backward) on GPU arrays, (8192, 4096)
  float32, float16 and bfloat16, as GB/s over the fewest bytes they must move, and as a fraction of the copy;
  PyTorch's same operations in a process of its own.
* Matrix products 8192 x 8192 x 8192 through ``funcgrad.numpy.matmul`` on GPU arrays against cuBLAS called
  straight through CuPy, and PyTorch, in float32, float16 and bfloat16 (a bfloat16 matrix product goes to
  CuPy's cuBLAS bfloat16 GEMM; a result in another dtype than the operands' is shown next to its speed).

Every time is the median of CUDA-event-timed calls after warm-up; inputs are random, never zeros.

    python benchmarks/gpu_kernels.py [--quick] [--peers funcgrad,pytorch]
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

from _gpu import answer, cupy_timer, device_info, run_worker, time_events, torch_timer  # noqa: E402
from _harness import Record, arguments, chosen, json_path  # noqa: E402

NAME = "gpu_kernels"
SCRIPT = os.path.abspath(__file__)
PEERS = ["funcgrad", "pytorch"]


def _sizes(quick: bool) -> dict:
    return {"rows": (1024, 1024) if quick else (8192, 4096), "mm": 1024 if quick else 8192,
            "copy_bytes": 2 ** 26 if quick else 2 ** 30}


def _guard(out: dict, key: str, fn) -> None:
    try:
        out[key] = fn()
    except Exception as e:  # noqa: BLE001 -- one failing kernel leaves the others standing
        out[key] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}


def _funcgrad(arg: dict) -> dict:
    import cupy as cp

    import funcgrad as fg
    import funcgrad.nn as nn
    import funcgrad.numpy as fnp
    timer = cupy_timer()
    out: dict = {"device": device_info(), "version": fg.__version__}
    n = arg["copy_bytes"] // 4
    a = cp.random.standard_normal(n, dtype=cp.float32)
    b = cp.empty_like(a)
    _guard(out, "copy", lambda: time_events(lambda: cp.copyto(b, a), *timer))
    rows, cols = arg["rows"]
    rng = np.random.default_rng(0)
    labels = fg.device_put(fnp.asarray(rng.integers(0, cols, rows).astype(np.int32)), "gpu")
    for dt in ROW_DTYPES:
        x = fg.device_put(fnp.asarray(rng.standard_normal((rows, cols)).astype(np.float32)).astype(dt), "gpu")
        g = fg.device_put(fnp.asarray(rng.standard_normal((rows, cols)).astype(np.float32)).astype(dt), "gpu")
        _guard(out, f"softmax {dt}", lambda: time_events(lambda: nn.softmax(x).block_until_ready(), *timer))
        _guard(out, f"log_softmax {dt}",
               lambda: time_events(lambda: nn.log_softmax(x).block_until_ready(), *timer))
        _, vjp = fg.vjp(nn.softmax, x)
        _guard(out, f"softmax bwd {dt}", lambda: time_events(lambda: fg.block_until_ready(vjp(g)), *timer))
        ce = lambda z: nn.cross_entropy(z, labels, reduction="sum")  # noqa: E731
        _guard(out, f"cross_entropy {dt}", lambda: time_events(lambda: ce(x).block_until_ready(), *timer))
        ce_grad = fg.grad(ce)
        _guard(out, f"cross_entropy fwd+bwd {dt}",
               lambda: time_events(lambda: ce_grad(x).block_until_ready(), *timer))
    m = arg["mm"]
    for dt in ("float32", "float16", "bfloat16"):
        def run_fg(dt=dt):
            p, q = (fg.device_put(fnp.asarray(rng.standard_normal((m, m)).astype(np.float32)).astype(dt), "gpu")
                    for _ in range(2))
            out[f"matmul {dt} funcgrad dtype"] = str(fnp.matmul(p, q).dtype)
            return time_events(lambda: fnp.matmul(p, q).block_until_ready(), *timer, budget_ms=200)
        _guard(out, f"matmul {dt} funcgrad", run_fg)

        def run_cupy(dt=dt):
            p, q = (cp.asarray(rng.standard_normal((m, m)).astype(np.float32).astype(dt)) for _ in range(2))
            out[f"matmul {dt} cupy dtype"] = str(cp.matmul(p, q).dtype)
            return time_events(lambda: cp.matmul(p, q), *timer, budget_ms=200)
        _guard(out, f"matmul {dt} cupy", run_cupy)
    return out


def _torch(arg: dict) -> dict:
    import torch
    import torch.nn.functional as F
    timer = torch_timer()
    out: dict = {"version": torch.__version__}
    n = arg["copy_bytes"] // 4
    a = torch.randn(n, device="cuda")
    b = torch.empty_like(a)
    _guard(out, "copy", lambda: time_events(lambda: b.copy_(a), *timer))
    rows, cols = arg["rows"]
    labels = torch.randint(0, cols, (rows,), device="cuda")
    for dt in ROW_DTYPES:
        x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dt))
        g = torch.randn_like(x)
        with torch.no_grad():
            _guard(out, f"softmax {dt}", lambda: time_events(lambda: torch.softmax(x, -1), *timer))
            _guard(out, f"log_softmax {dt}", lambda: time_events(lambda: torch.log_softmax(x, -1), *timer))
        xr = x.clone().requires_grad_(True)
        y = torch.softmax(xr, -1)
        _guard(out, f"softmax bwd {dt}",
               lambda: time_events(lambda: torch.autograd.grad(y, xr, g, retain_graph=True), *timer))
        with torch.no_grad():
            _guard(out, f"cross_entropy {dt}",
                   lambda: time_events(lambda: F.cross_entropy(x, labels, reduction="sum"), *timer))

        def fwd_bwd():
            return torch.autograd.grad(F.cross_entropy(xr, labels, reduction="sum"), xr)
        _guard(out, f"cross_entropy fwd+bwd {dt}", lambda: time_events(fwd_bwd, *timer))
    m = arg["mm"]
    for dt in ("float32", "float16", "bfloat16"):
        p, q = (torch.randn(m, m, device="cuda", dtype=getattr(torch, dt)) for _ in range(2))
        _guard(out, f"matmul {dt} pytorch", lambda: time_events(lambda: p @ q, *timer, budget_ms=200))
    out["tf32"] = torch.backends.cuda.matmul.allow_tf32
    return out


WORKERS = {"funcgrad": _funcgrad, "pytorch": _torch}

# (operation, elements read + written per element of the (rows, cols) input)
ROW_OPS = [("softmax", 2), ("log_softmax", 2), ("softmax bwd", 3), ("cross_entropy", 1),
           ("cross_entropy fwd+bwd", 2)]
ROW_DTYPES = ("float32", "float16", "bfloat16")
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}


def main(argv: list[str] | None = None) -> None:
    ap = arguments(NAME, __doc__)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds each worker may run")
    args = ap.parse_args(argv)
    if args.worker:
        answer(WORKERS[args.worker[0]](json.loads(args.worker[2])))
        return
    arg = _sizes(args.quick)
    record = Record(NAME, args)
    got = {p: run_worker(SCRIPT, p, arg, timeout_s=args.timeout) for p in chosen(PEERS, args)}
    record.payload["results"] = got
    for p, g in got.items():
        record.payload["peers"][p] = {"version": g.get("version"), "error": g.get("error")}
    record.payload["device"] = got.get("funcgrad", {}).get("device")
    fgr, ptr = got.get("funcgrad", {}), got.get("pytorch", {})
    copy = fgr.get("copy", {}).get("median_s")
    copy_bw = 2 * arg["copy_bytes"] / copy / 1e9 if copy else None
    rows_out = [{"operation": "device-to-device copy (CuPy)", "dtype": "float32",
                 "funcgrad GB/s": f"{copy_bw:.0f}" if copy_bw else str(fgr.get("copy", fgr.get("error", "")))[:80],
                 "pytorch GB/s": (f"{2 * arg['copy_bytes'] / ptr['copy']['median_s'] / 1e9:.0f}"
                                  if "median_s" in ptr.get("copy", {}) else "")}]
    rows, cols = arg["rows"]
    for op, passes in ROW_OPS:
        for dt in ROW_DTYPES:
            nbytes = passes * rows * cols * ITEMSIZE[dt]
            row = {"operation": op, "dtype": dt}
            for peer, res in (("funcgrad", fgr), ("pytorch", ptr)):
                s = res.get(f"{op} {dt}", {})
                if "median_s" in s:
                    bw = nbytes / s["median_s"] / 1e9
                    row[f"{peer} GB/s"] = f"{bw:.0f}"
                    if copy_bw:
                        row[f"{peer} / copy"] = f"{bw / copy_bw:.0%}"
                elif s:
                    row[f"{peer} GB/s"] = s.get("error", "")[:80]
            rows_out.append(row)
    record.table("rows", f"Memory-bound kernels on the GPU, ({rows}, {cols}) rows: GB/s over the fewest bytes "
                 "(read + written) and the share of a device-to-device copy", rows_out)
    m = arg["mm"]
    mm_rows = []
    for dt in ("float32", "float16", "bfloat16"):
        row = {"dtype": dt}
        for label, res, key in (("funcgrad", fgr, f"matmul {dt} funcgrad"), ("cuBLAS via CuPy", fgr, f"matmul {dt} cupy"),
                                ("pytorch", ptr, f"matmul {dt} pytorch")):
            s = res.get(key, {})
            if "median_s" in s:
                row[f"{label} TFLOP/s"] = f"{2 * m ** 3 / s['median_s'] / 1e12:.0f}"
                if res.get(f"{key} dtype", dt) != dt:   # (a result in another dtype than the operands')
                    row[f"{label} TFLOP/s"] += f" (-> {res[f'{key} dtype']})"
            elif s:
                row[f"{label} TFLOP/s"] = s.get("error", "")[:60]
        mm_rows.append(row)
    record.table("matmul", f"Matrix products {m} x {m} x {m} on the GPU (TFLOP/s; PyTorch TF32 off)", mm_rows)
    record.write(json_path(record.name, args))


if __name__ == "__main__":
    main()
