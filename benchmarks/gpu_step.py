"""The MLP training step on the GPU: funcgrad (jit and eager) against JAX (jit) and PyTorch (eager).

Batch 128, 784-512-512-10, ReLU, softmax cross-entropy, SGD, float32 everywhere (JAX's matrix products at
``highest`` precision, so that nobody computes in TF32). Per library, in a worker process of its own:

* one step, timed with a host clock around the step and a wait for its result (median of many);
* an epoch: 469 steps over batches already on the device, one wait at the end (how training runs);
* device memory in use every 100 steps over 1,000 steps (funcgrad: CuPy's memory pool; PyTorch:
  ``memory_allocated``): it must stay flat;
* the first call (trace and compile).

funcgrad runs three ways: ``jit``, ``jit`` with ``config.gpu_graphs`` (the step captured into a CUDA graph on
its second call and replayed after that), and eagerly.

Every library's updated weights after one step are checked against a float64 numpy step.

    python benchmarks/gpu_step.py [--quick] [--peers funcgrad,jax,pytorch]
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

from _gpu import answer, device_info, run_worker, time_host  # noqa: E402
from _harness import Record, arguments, chosen, fmt_ratio, fmt_time, json_path  # noqa: E402
from dispatch import mlp_data, numpy_mlp_grad  # noqa: E402

NAME = "gpu_step"
SCRIPT = os.path.abspath(__file__)
PEERS = ["funcgrad", "jax", "pytorch"]
LR = 0.05
EPOCH_STEPS = 469


def _batches(arg: dict) -> tuple[dict, list]:
    """Initial parameters and ``steps`` (x, y) batches (numpy), the first being dispatch.mlp_data's."""
    p, x, y = mlp_data(arg["batch"])
    rng = np.random.default_rng(7)
    extra = [(rng.standard_normal(x.shape).astype(np.float32), rng.integers(0, 10, len(y)))
             for _ in range(min(arg["distinct_batches"], arg["epoch_steps"]) - 1)]
    return p, [(x, y)] + extra


def _measure(step, params, batches, wait, memory, arg) -> dict:
    """First call, one step, an epoch, memory over ``memory_steps`` steps; ``step(p, x, y) -> p``."""
    out: dict = {}
    x0, y0 = batches[0]
    t0 = time.perf_counter()
    p1 = wait(step(params, x0, y0))
    out["first_call_s"] = time.perf_counter() - t0
    out["check"] = p1
    out["step"] = time_host(lambda: wait(step(params, x0, y0)), budget_s=arg["budget_s"])
    epochs = []
    for _ in range(arg["epochs"]):
        p = params
        t0 = time.perf_counter()
        for i in range(arg["epoch_steps"]):
            x, y = batches[i % len(batches)]
            p = step(p, x, y)
        wait(p)
        epochs.append(time.perf_counter() - t0)
    out["epoch_s"] = sorted(epochs)
    used, p = [], params
    for i in range(arg["memory_steps"] + 1):
        if i % 100 == 0:
            wait(p)
            used.append([i, memory()])
        x, y = batches[i % len(batches)]
        p = step(p, x, y)
    out["memory_bytes"] = used
    return out


def _funcgrad(arg: dict) -> dict:
    import cupy as cp

    import funcgrad as fg
    import funcgrad.nn as nn
    import funcgrad.numpy as fnp
    p, batches = _batches(arg)
    to_gpu = lambda a: fg.device_put(fnp.asarray(a), "gpu")  # noqa: E731
    params = {k: to_gpu(v) for k, v in p.items()}
    dev = [(to_gpu(x), to_gpu(y.astype(np.int32))) for x, y in batches]

    def loss(p, x, y):
        h = nn.relu(x @ p["w1"] + p["b1"])
        h = nn.relu(h @ p["w2"] + p["b2"])
        return nn.cross_entropy(h @ p["w3"] + p["b3"], y)

    def step(p, x, y):
        g = fg.grad(loss)(p, x, y)
        return fg.tree_util.tree_map(lambda w, gw: w - LR * gw, p, g)
    pool = cp.get_default_memory_pool()
    res = {}
    graphed = fg.jit(step)

    def with_graphs(p, x, y):
        fg.config.update("gpu_graphs", True)
        try:
            return graphed(p, x, y)
        finally:
            fg.config.update("gpu_graphs", False)
    for name, fn in (("jit", fg.jit(step)), ("jit + CUDA graph", with_graphs), ("eager", step)):
        if name == "eager" and arg.get("jit_only"):
            continue
        try:
            r = _measure(fn, params, dev, fg.block_until_ready, pool.used_bytes,
                         arg if name != "eager" else dict(arg, memory_steps=0, epochs=1))
            r["check"] = np.asarray(fg.device_put(r["check"]["w1"], "cpu"), np.float64)[:4].tolist()
            res[name] = r
        except Exception as e:  # noqa: BLE001 -- reported
            import traceback
            res[name] = {"error": f"{type(e).__name__}: {str(e)[:500]}", "trace": traceback.format_exc()[-2500:]}
    from funcgrad.backends.gpu import graphs
    res.get("jit + CUDA graph", {})["graphs"] = dict(graphs.stats)   # was the step captured, or why not
    return {"calls": res, "version": fg.__version__, "device": device_info()}


def _jax(arg: dict) -> dict:
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_default_matmul_precision", "highest")
    p, batches = _batches(arg)
    params = jax.device_put({k: jnp.asarray(v) for k, v in p.items()})
    dev = [(jax.device_put(jnp.asarray(x)), jax.device_put(jnp.asarray(y))) for x, y in batches]

    def loss(p, x, y):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        h = jax.nn.relu(h @ p["w2"] + p["b2"])
        logits = h @ p["w3"] + p["b3"]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

    @jax.jit
    def step(p, x, y):
        g = jax.grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda w, gw: w - LR * gw, p, g)

    def memory():
        stats = jax.devices()[0].memory_stats() or {}
        return stats.get("bytes_in_use")
    r = _measure(step, params, dev, jax.block_until_ready, memory, arg)
    r["check"] = np.asarray(r["check"]["w1"], np.float64)[:4].tolist()
    return {"calls": {"jit": r}, "version": jax.__version__, "backend": jax.default_backend()}


def _torch(arg: dict) -> dict:
    import torch
    p, batches = _batches(arg)
    params = {k: torch.tensor(v, device="cuda", requires_grad=True) for k, v in p.items()}
    dev = [(torch.tensor(x, device="cuda"), torch.tensor(y, device="cuda")) for x, y in batches]

    def step(params, x, y):
        h = torch.relu(x @ params["w1"] + params["b1"])
        h = torch.relu(h @ params["w2"] + params["b2"])
        loss = torch.nn.functional.cross_entropy(h @ params["w3"] + params["b3"], y)
        grads = torch.autograd.grad(loss, list(params.values()))
        with torch.no_grad():
            for w, g in zip(params.values(), grads):
                w -= LR * g
        return params

    def wait(p):
        torch.cuda.synchronize()
        return p
    first = {k: v.detach().clone() for k, v in params.items()}
    r = _measure(step, params, dev, wait, torch.cuda.memory_allocated, arg)
    r["check"] = None   # the in-place step ran many times since: check a fresh one
    fresh = {k: v.clone().requires_grad_(True) for k, v in first.items()}
    step(fresh, *dev[0])
    r["check"] = fresh["w1"].detach().double().cpu().numpy()[:4].tolist()
    return {"calls": {"eager": r}, "version": torch.__version__}


WORKERS = {"funcgrad": _funcgrad, "jax": _jax, "pytorch": _torch}


def main(argv: list[str] | None = None) -> None:
    ap = arguments(NAME, __doc__)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds each worker may run")
    args = ap.parse_args(argv)
    if args.worker:
        answer(WORKERS[args.worker[0]](json.loads(args.worker[2])))
        return
    arg = {"batch": 128, "epoch_steps": 20 if args.quick else EPOCH_STEPS, "distinct_batches": 8,
           "epochs": 1 if args.quick else 2, "memory_steps": 100 if args.quick else 1000,
           "budget_s": 0.2 if args.quick else 1.0}
    record = Record(NAME, args)
    p, x, y = mlp_data(arg["batch"])
    g = numpy_mlp_grad({k: v.astype(np.float64) for k, v in p.items()}, x.astype(np.float64), y)
    ref = (p["w1"].astype(np.float64) - LR * g["w1"])[:4]
    rows, mem_rows = [], []
    base = None
    for peer in chosen(PEERS, args):
        got = run_worker(SCRIPT, peer, arg, timeout_s=args.timeout)
        record.payload["peers"][peer] = {k: got.get(k) for k in ("version", "backend", "error", "output")}
        if peer == "funcgrad":
            record.payload["device"] = got.get("device")
        if "error" in got:
            rows.append({"library": peer, "note": (got["error"] + " " + got.get("output", "")[-300:]).replace("\n", " ")})
            continue
        for call, r in got["calls"].items():
            name = f"{peer} {call}"
            if "error" in r:
                rows.append({"library": name, "note": r["error"]})
                record.payload["measurements"].append({"peer": peer, "call": call, **r})
                continue
            err = float(np.max(np.abs(np.asarray(r["check"]) - ref)))
            if peer == "pytorch":
                base = r
            graph = r.get("graphs")
            note = "" if graph is None else (f"captured {graph['captured']} program(s)" if graph["captured"] else
                                             "NOT captured: " + "; ".join(graph["failed"])[:120])
            rows.append({"library": name, "step": fmt_time(r["step"]["median_s"]),
                         "step IQR": f"{(r['step']['q3_s'] - r['step']['q1_s']) / r['step']['median_s']:.0%}",
                         "epoch (469 steps)": fmt_time(r["epoch_s"][len(r["epoch_s"]) // 2]),
                         "first call": fmt_time(r["first_call_s"]), "max |w1 - float64|": f"{err:.1e}",
                         "note": (note + ("" if err < 1e-4 else " WRONG: differs from the float64 step")).strip()})
            mem = r.get("memory_bytes") or []
            if len(mem) > 1 and mem[0][1] is not None:
                mem_rows.append({"library": name, **{f"step {i}": f"{b / 2 ** 20:.1f} MiB" for i, b in mem
                                                     if i in (0, 100, 500, 1000)},
                                 "growth 100 -> last": f"{(mem[-1][1] - mem[min(1, len(mem) - 1)][1]) / 2 ** 20:+.2f} MiB"})
            record.payload["measurements"].append({"peer": peer, "call": call, **r})
    if base:
        for row in rows:
            m = next((x for x in record.payload["measurements"] if f"{x['peer']} {x['call']}" == row["library"]
                      and "step" in x), None)
            if m:
                row["step / pytorch"] = fmt_ratio(m["step"]["median_s"], base["step"]["median_s"])
                row["epoch / pytorch"] = fmt_ratio(sorted(m["epoch_s"])[len(m["epoch_s"]) // 2],
                                                   sorted(base["epoch_s"])[len(base["epoch_s"]) // 2])
    dev = (record.payload.get("device") or {}).get("gpu") or "no GPU"
    record.table("step", f"MLP training step on the GPU ({dev}), B=128, 784-512-512-10, float32", rows)
    record.table("memory", "Device memory in use during 1,000 jitted steps", mem_rows)
    record.write(json_path(record.name, args))


if __name__ == "__main__":
    main()
