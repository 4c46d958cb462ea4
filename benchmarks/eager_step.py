"""The eager path: a tiny gradient's Python overhead, and an eager MLP training step's allocation cost.

Every peer (funcgrad, JAX, PyTorch) runs in its own worker process, timed from here in interleaved rounds
(medians and spread); each peer's result is first checked against float64 numpy.

* **tiny grad** -- ``grad(lambda x: sum(sin(x) * x))`` on 10 float32 elements: eager (funcgrad, PyTorch)
  and jitted (funcgrad, JAX). Goals: funcgrad eager <= 0.5x PyTorch eager; jitted <= 1.0x JAX.
* **MLP step** -- batch 128, 784-512-512-10, ReLU, softmax cross-entropy, ``grad`` + SGD, eager (funcgrad,
  PyTorch). funcgrad runs twice: as installed (freed host buffers kept by malloc for reuse,
  ``config.host_buffer_cache_bytes``) and with ``FUNCGRAD_HOST_BUFFER_CACHE_BYTES=0`` (glibc's
  defaults). Each worker also counts page faults per step (``ru_minflt``), alone and in blocks of 10 steps
  between blocks of 10 numpy steps (other work allocating, as a data pipeline or an evaluation does). Goal: <= 1.1x PyTorch eager.

    python benchmarks/eager_step.py [--quick] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

from _harness import fmt_time, print_table, write_json  # noqa: E402
from _peers import Peer, interleave, start_peers, worker  # noqa: E402

DEFAULT_JSON = os.path.join(HERE, "results", "eager_step.json")
SCRIPT = os.path.abspath(__file__)
B, SIZES, LR = 128, (784, 512, 512, 10), 0.05
NO_CACHE = "funcgrad (malloc defaults)"


# ---------------------------------------------------------------- inputs and float64 references

def tiny_input() -> np.ndarray:
    return np.linspace(-1.0, 1.0, 10).astype(np.float32)


def tiny_reference() -> np.ndarray:
    x = tiny_input().astype(np.float64)
    return np.cos(x) * x + np.sin(x)


def mlp_inputs() -> dict:
    rng = np.random.default_rng(0)
    p = {}
    for i, (n_in, n_out) in enumerate(zip(SIZES[:-1], SIZES[1:]), 1):
        p[f"w{i}"] = (rng.standard_normal((n_in, n_out)) * np.sqrt(2.0 / n_in)).astype(np.float32)
        p[f"b{i}"] = (0.1 * rng.standard_normal(n_out)).astype(np.float32)
    return {"p": p, "x": rng.standard_normal((B, SIZES[0])).astype(np.float32), "y": rng.integers(0, 10, B)}


def numpy_step(p: dict, x: np.ndarray, y: np.ndarray) -> dict:
    """One SGD step by hand (forward, backward, update) in the dtype of ``p``."""
    a1 = x @ p["w1"] + p["b1"]
    h1 = np.maximum(a1, 0)
    a2 = h1 @ p["w2"] + p["b2"]
    h2 = np.maximum(a2, 0)
    logits = h2 @ p["w3"] + p["b3"]
    e = np.exp(logits - logits.max(1, keepdims=True))
    d = e / e.sum(1, keepdims=True)
    d[np.arange(len(y)), y] -= 1.0
    d /= len(y)
    g = {"w3": h2.T @ d, "b3": d.sum(0)}
    d2 = (d @ p["w3"].T) * (a2 > 0)
    g.update(w2=h1.T @ d2, b2=d2.sum(0))
    d1 = (d2 @ p["w2"].T) * (a1 > 0)
    g.update(w1=x.T @ d1, b1=d1.sum(0))
    return {k: p[k] - LR * g[k] for k in p}


def mlp_reference() -> dict:
    d = mlp_inputs()
    return numpy_step({k: v.astype(np.float64) for k, v in d["p"].items()}, d["x"].astype(np.float64), d["y"])


def faults_per_step(step, steps: int = 10) -> float:
    """Minor page faults per call of ``step``."""
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(steps):
        step()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / steps


def mlp_checks(step) -> dict:
    """Page faults per step alone, and in blocks of steps between blocks of other work (numpy steps,
    allocating the same sizes), counted first, in a fresh process (what malloc keeps depends on history);
    then the updated parameters (but w1, large) for the float64 check."""
    d = mlp_inputs()
    faults_per_step(step, 3)                     # warm-up
    alone = faults_per_step(step)
    mixed = []
    for _ in range(3):
        faults_per_step(lambda: numpy_step(d["p"], d["x"], d["y"]))
        mixed.append(faults_per_step(step))
    params = {k: np.asarray(v, np.float64).tolist() for k, v in step().items() if k != "w1"}
    return {"params": params, "faults_alone": alone, "faults_with_other_work": float(np.median(mixed))}


# ---------------------------------------------------------------- peers

def tiny_funcgrad() -> tuple[dict, dict]:
    import funcgrad as fg
    import funcgrad.numpy as fnp
    x = fnp.array(tiny_input())
    g = fg.grad(lambda x: fnp.sum(fnp.sin(x) * x))
    jg = fg.jit(g)
    return {"eager": lambda: g(x), "jit": lambda: jg(x)}, {"eager": np.asarray(g(x)).tolist(),
                                                            "jit": np.asarray(jg(x)).tolist()}


def tiny_jax() -> tuple[dict, dict]:
    import jax
    import jax.numpy as jnp
    x = jnp.asarray(tiny_input())
    jg = jax.jit(jax.grad(lambda x: jnp.sum(jnp.sin(x) * x)))
    return {"jit": lambda: jg(x).block_until_ready()}, {"jit": np.asarray(jg(x)).tolist()}


def tiny_torch() -> tuple[dict, dict]:
    import torch
    x = torch.tensor(tiny_input(), requires_grad=True)

    def g():
        return torch.autograd.grad(torch.sum(torch.sin(x) * x), x)[0]
    return {"eager": g}, {"eager": g().double().numpy().tolist()}


def mlp_funcgrad() -> tuple[dict, dict]:
    import funcgrad as fg
    import funcgrad.nn as nn
    import funcgrad.numpy as fnp
    d = mlp_inputs()
    p = {k: fnp.array(v) for k, v in d["p"].items()}
    x, y = fnp.array(d["x"]), fnp.array(d["y"])

    def loss(p, x, y):
        h = nn.relu(x @ p["w1"] + p["b1"])
        h = nn.relu(h @ p["w2"] + p["b2"])
        return nn.cross_entropy(h @ p["w3"] + p["b3"], y)

    def step(p, x, y):
        g = fg.grad(loss)(p, x, y)
        return fg.tree_util.tree_map(lambda w, gw: w - LR * gw, p, g)

    call = lambda: step(p, x, y)  # noqa: E731
    return {"eager": call}, mlp_checks(call)


def mlp_torch() -> tuple[dict, dict]:
    import torch
    d = mlp_inputs()
    p = {k: torch.tensor(v, requires_grad=True) for k, v in d["p"].items()}
    x, y = torch.tensor(d["x"]), torch.tensor(d["y"])

    def step():
        h = torch.relu(x @ p["w1"] + p["b1"])
        h = torch.relu(h @ p["w2"] + p["b2"])
        loss = torch.nn.functional.cross_entropy(h @ p["w3"] + p["b3"], y)
        grads = torch.autograd.grad(loss, list(p.values()))
        with torch.no_grad():
            return {k: w - LR * g for (k, w), g in zip(p.items(), grads)}   # new tensors, as the others

    return {"eager": step}, mlp_checks(step)


BUILDERS = {("tiny", "funcgrad"): tiny_funcgrad, ("tiny", "jax"): tiny_jax, ("tiny", "pytorch"): tiny_torch,
            ("mlp", "funcgrad"): mlp_funcgrad, ("mlp", "pytorch"): mlp_torch}
MODULES = {"funcgrad": "funcgrad", "jax": "jax", "pytorch": "torch"}


# ---------------------------------------------------------------- parent

def check_tiny(peer: str, checks: dict) -> float:
    ref = tiny_reference()
    err = max(float(np.max(np.abs(np.asarray(v) - ref))) for v in checks.values())
    if err > 1e-5:
        raise AssertionError(f"{peer}'s tiny gradient differs from float64 by {err:.2e}")
    return err


def check_mlp(peer: str, checks: dict) -> float:
    ref = mlp_reference()
    err = max(float(np.max(np.abs(np.asarray(v) - ref[k]))) for k, v in checks["params"].items())
    if err > 1e-4:
        raise AssertionError(f"{peer}'s MLP step differs from float64 by {err:.2e}")
    return err


def measure_tiny(rounds: int) -> dict:
    peers, missing = start_peers(SCRIPT, ["funcgrad", "jax", "pytorch"], "tiny")
    try:
        errors = {p.name: check_tiny(p.name, p.hello["checks"]) for p in peers}
        stats = {}
        for name in ("eager", "jit"):
            having = [p for p in peers if name in p.hello["ready"]]
            for peer, s in interleave(having, [name], rounds, inner=200).items():
                stats[f"{peer} {name}"] = s[name]
    finally:
        for p in peers:
            p.close()
    return {"stats": stats, "errors_vs_float64": errors, "missing": missing}


def measure_mlp(rounds: int) -> dict:
    peers, missing = start_peers(SCRIPT, ["funcgrad", "pytorch"], "mlp")
    plain = Peer(SCRIPT, "funcgrad", "mlp", env={"FUNCGRAD_HOST_BUFFER_CACHE_BYTES": "0"})
    plain.name = NO_CACHE
    peers.insert(1, plain)
    try:
        errors = {p.name: check_mlp(p.name, p.hello["checks"]) for p in peers}
        faults = {p.name: {k: p.hello["checks"][k] for k in ("faults_alone", "faults_with_other_work")}
                  for p in peers}
        stats = {peer: s["eager"] for peer, s in interleave(peers, ["eager"], rounds, inner=5).items()}
    finally:
        for p in peers:
            p.close()
    return {"stats": stats, "faults_per_step": faults, "errors_vs_float64": errors, "missing": missing}


def _cell(stats: dict, name: str, missing: dict) -> str:
    if name in stats:
        return f"{fmt_time(stats[name]['median_s'])} ±{stats[name]['spread']:.0%}"
    return missing.get(name.split()[0], "")


def _ratio(stats: dict, a: str, b: str) -> str:
    return f"{stats[a]['median_s'] / stats[b]['median_s']:.2f}x" if a in stats and b in stats else ""


def rows(payload: dict) -> list[dict]:
    t, m = payload["tiny"], payload["mlp"]
    ts, ms = t["stats"], m["stats"]
    out = [{"workload": "tiny grad, eager", "funcgrad": _cell(ts, "funcgrad eager", t["missing"]),
            "peer": "PyTorch " + _cell(ts, "pytorch eager", t["missing"]),
            "ratio": _ratio(ts, "funcgrad eager", "pytorch eager"), "goal": "<= 0.5x PyTorch"},
           {"workload": "tiny grad, jit", "funcgrad": _cell(ts, "funcgrad jit", t["missing"]),
            "peer": "JAX " + _cell(ts, "jax jit", t["missing"]),
            "ratio": _ratio(ts, "funcgrad jit", "jax jit"), "goal": "<= 1.0x JAX"}]
    for name in ("funcgrad", NO_CACHE):
        f = m["faults_per_step"].get(name, {})
        out.append({"workload": "MLP step, eager" + (" (malloc defaults)" if name == NO_CACHE else ""),
                    "funcgrad": _cell(ms, name, m["missing"]),
                    "peer": "PyTorch " + _cell(ms, "pytorch", m["missing"]),
                    "ratio": _ratio(ms, name, "pytorch"), "goal": "<= 1.1x PyTorch",
                    "faults/step": f"{f.get('faults_alone', 0):.0f} / {f.get('faults_with_other_work', 0):.0f}"})
    return out


COLUMNS = ["workload", "funcgrad", "peer", "ratio", "goal", "faults/step"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", default=DEFAULT_JSON)
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    ap.add_argument("--worker", nargs=3, metavar=("PEER", "CASE", "ARG"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        peer, case, arg = args.worker
        worker(BUILDERS, MODULES, peer, case, json.loads(arg))
        return
    start = time.perf_counter()
    rounds = 5 if args.quick else 15
    payload = {"benchmark": "eager_step", "quick": args.quick}
    print("tiny grad ...", flush=True)
    payload["tiny"] = measure_tiny(rounds)
    print("MLP step ...", flush=True)
    payload["mlp"] = measure_mlp(rounds)
    payload["seconds"] = time.perf_counter() - start
    print_table("Eager path (each peer in its own process; interleaved medians ± spread; "
                "faults/step: alone / between blocks of numpy steps)", rows(payload), COLUMNS)
    write_json(args.json, payload)


if __name__ == "__main__":
    main()
