"""Batched contractions: gradients through ``vmap`` of ``dot`` against a shared weight matrix.

Two workloads, f32, batch 128, every peer (funcgrad, JAX, PyTorch) in its own worker process, timed in
interleaved rounds (medians and spread); each peer's result is first checked against float64 numpy.

* **MLP gradient through vmap** — JAX's MNIST tutorial: ``predict(params, x)`` on one example with
  ``dot(w, x) + b`` and tanh, layers 784-512-512-10, ``vmap(predict, in_axes=(None, 0))`` over the batch,
  mean squared error, ``jit(grad)``. PyTorch runs the same network batched (``x @ w.T``), which is what
  a vmap should turn into.
* **Per-example gradients of a linear layer** — ``jit(vmap(grad(loss_one), in_axes=(None, 0, 0)))`` with
  ``loss_one(w, x, y) = sum((tanh(w @ x) - y) ** 2)``, w f32[512, 784]: one 512 x 784 gradient per
  example (the output alone is 205 MB). PyTorch: ``torch.func.vmap(torch.func.grad(...))``.

    python benchmarks/batched_contractions.py [--quick] [--peers funcgrad,jax]
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

from _harness import Record, arguments, chosen, fmt_time, json_path  # noqa: E402
from _peers import interleave, start_peers, worker  # noqa: E402

NAME = "batched_contractions"
SCRIPT = os.path.abspath(__file__)
BATCH = int(os.environ.get("FUNCGRAD_BENCH_BATCH", "128"))
LAYERS = [784, 512, 512, 10]
LINEAR = (512, 784)
CHECK_ROWS = 4          # rows of each gradient sent back for the float64 check


def mlp_inputs() -> dict:
    rng = np.random.default_rng(0)
    params = [((rng.standard_normal((n, m)) / np.sqrt(m)).astype(np.float32), (0.1 * rng.standard_normal(n)).astype(np.float32))
              for m, n in zip(LAYERS[:-1], LAYERS[1:])]
    return {"params": params, "x": rng.standard_normal((BATCH, LAYERS[0])).astype(np.float32),
            "y": rng.standard_normal((BATCH, LAYERS[-1])).astype(np.float32)}


def linear_inputs() -> dict:
    rng = np.random.default_rng(1)
    m, k = LINEAR
    return {"w": (rng.standard_normal((m, k)) / np.sqrt(k)).astype(np.float32),
            "x": rng.standard_normal((BATCH, k)).astype(np.float32),
            "y": rng.standard_normal((BATCH, m)).astype(np.float32)}


def mlp_reference() -> list[np.ndarray]:
    """Gradients of the tutorial loss with respect to every weight and bias, float64 backpropagation by hand."""
    d = mlp_inputs()
    params = [(w.astype(np.float64), b.astype(np.float64)) for w, b in d["params"]]
    acts = [d["x"].astype(np.float64)]
    for i, (w, b) in enumerate(params):
        z = acts[-1] @ w.T + b
        acts.append(np.tanh(z) if i < len(params) - 1 else z)
    delta = 2 * (acts[-1] - d["y"]) / acts[-1].size
    grads = []
    for i in range(len(params) - 1, -1, -1):
        grads.append((delta.T @ acts[i], delta.sum(0)))
        if i:
            delta = (delta @ params[i][0]) * (1 - acts[i] ** 2)
    return [g for pair in reversed(grads) for g in pair]


def linear_reference() -> np.ndarray:
    """Per-example gradients' first CHECK_ROWS rows, f64[B, CHECK_ROWS, k]."""
    d = {k: v.astype(np.float64) for k, v in linear_inputs().items()}
    h = np.tanh(d["x"] @ d["w"].T)
    dz = 2 * (h - d["y"]) * (1 - h * h)                 # (B, m)
    return np.einsum("bm,bk->bmk", dz[:, :CHECK_ROWS], d["x"])


def _checks(grads) -> list:
    return [np.asarray(g, np.float64)[:CHECK_ROWS].tolist() for g in grads]


def mlp_funcgrad() -> tuple[dict, dict]:
    import funcgrad as fg
    import funcgrad.numpy as fnp
    d = mlp_inputs()
    params = [(fnp.array(w), fnp.array(b)) for w, b in d["params"]]
    x, y = fnp.array(d["x"]), fnp.array(d["y"])

    def predict(params, a):
        for w, b in params[:-1]:
            a = fnp.tanh(fnp.dot(w, a) + b)
        w, b = params[-1]
        return fnp.dot(w, a) + b

    def loss(params, x, y):
        return fnp.mean((fg.vmap(predict, in_axes=(None, 0))(params, x) - y) ** 2)

    step = fg.jit(fg.grad(loss))
    grads = fg.tree_util.tree_leaves(step(params, x, y))
    return {"step": lambda: fg.block_until_ready(step(params, x, y))}, {"grads": _checks(grads)}


def mlp_jax() -> tuple[dict, dict]:
    import jax
    import jax.numpy as jnp
    d = mlp_inputs()
    params = [(jnp.asarray(w), jnp.asarray(b)) for w, b in d["params"]]
    x, y = jnp.asarray(d["x"]), jnp.asarray(d["y"])

    def predict(params, a):
        for w, b in params[:-1]:
            a = jnp.tanh(jnp.dot(w, a) + b)
        w, b = params[-1]
        return jnp.dot(w, a) + b

    def loss(params, x, y):
        return jnp.mean((jax.vmap(predict, in_axes=(None, 0))(params, x) - y) ** 2)

    step = jax.jit(jax.grad(loss))
    grads = jax.tree_util.tree_leaves(step(params, x, y))
    return {"step": lambda: jax.block_until_ready(step(params, x, y))}, {"grads": _checks(grads)}


def mlp_torch() -> tuple[dict, dict]:
    import torch
    d = mlp_inputs()
    params = [(torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)) for w, b in d["params"]]
    flat = [t for pair in params for t in pair]
    x, y = torch.tensor(d["x"]), torch.tensor(d["y"])

    def step():
        a = x
        for w, b in params[:-1]:
            a = torch.tanh(a @ w.T + b)
        w, b = params[-1]
        return torch.autograd.grad(torch.mean((a @ w.T + b - y) ** 2), flat)

    return {"step": step}, {"grads": _checks([g.detach().numpy() for g in step()])}


def linear_funcgrad() -> tuple[dict, dict]:
    import funcgrad as fg
    import funcgrad.numpy as fnp
    d = {k: fnp.array(v) for k, v in linear_inputs().items()}
    per_example = fg.jit(fg.vmap(fg.grad(lambda w, x, y: fnp.sum((fnp.tanh(w @ x) - y) ** 2)),
                                 in_axes=(None, 0, 0)))
    g = per_example(d["w"], d["x"], d["y"])
    return ({"step": lambda: fg.block_until_ready(per_example(d["w"], d["x"], d["y"]))},
            {"grads": np.asarray(g[:, :CHECK_ROWS], np.float64).tolist()})


def linear_jax() -> tuple[dict, dict]:
    import jax
    import jax.numpy as jnp
    d = {k: jnp.asarray(v) for k, v in linear_inputs().items()}
    per_example = jax.jit(jax.vmap(jax.grad(lambda w, x, y: jnp.sum((jnp.tanh(w @ x) - y) ** 2)),
                                   in_axes=(None, 0, 0)))
    g = per_example(d["w"], d["x"], d["y"])
    return ({"step": lambda: jax.block_until_ready(per_example(d["w"], d["x"], d["y"]))},
            {"grads": np.asarray(g[:, :CHECK_ROWS], np.float64).tolist()})


def linear_torch() -> tuple[dict, dict]:
    import torch
    from torch.func import grad, vmap
    d = {k: torch.tensor(v) for k, v in linear_inputs().items()}
    per_example = vmap(grad(lambda w, x, y: torch.sum((torch.tanh(w @ x) - y) ** 2)), in_dims=(None, 0, 0))
    g = per_example(d["w"], d["x"], d["y"])
    return ({"step": lambda: per_example(d["w"], d["x"], d["y"])},
            {"grads": g[:, :CHECK_ROWS].double().numpy().tolist()})


BUILDERS = {("mlp", "funcgrad"): mlp_funcgrad, ("mlp", "jax"): mlp_jax, ("mlp", "pytorch"): mlp_torch,
            ("linear", "funcgrad"): linear_funcgrad, ("linear", "jax"): linear_jax,
            ("linear", "pytorch"): linear_torch}
MODULES = {"funcgrad": "funcgrad", "jax": "jax", "pytorch": "torch"}
CASES = {"mlp": (f"MLP 784-512-512-10, grad through vmap(dot), B={BATCH}", mlp_reference),
         "linear": (f"per-example grads of a 512x784 linear layer, B={BATCH}", linear_reference)}


def set_batch(batch: int) -> None:
    global BATCH
    BATCH = batch
    for case, (label, ref) in CASES.items():
        CASES[case] = (label.replace("B=128", f"B={batch}"), ref)


def check(case: str, peer: str, got: list, reference) -> float:
    """The largest relative error of a peer's gradient rows against float64; raises past 1e-3."""
    ref = reference()
    pairs = zip(got, ref) if case == "mlp" else [(got, ref)]
    err = 0.0
    for g, r in pairs:
        r = np.asarray(r)[:CHECK_ROWS] if case == "mlp" else r
        err = max(err, float(np.linalg.norm(np.asarray(g) - r) / np.linalg.norm(r)))
    if err > 1e-3:
        raise AssertionError(f"{peer}'s {case} gradient differs from the float64 reference by {err:.2e} (relative)")
    return err


def measure(case: str, rounds: int, names: list[str], record: Record) -> dict:
    peers, missing = start_peers(SCRIPT, names, case)
    record.peers_from(peers, missing)
    try:
        errors = {p.name: check(case, p.name, p.hello["checks"]["grads"], CASES[case][1]) for p in peers}
        stats = interleave(peers, ["step"], rounds, budget_s=10 if rounds < 3 else 60)
        record.measure(CASES[case][0], stats, baseline="jax")
        versions = {p.name: p.hello["version"] for p in peers}
    finally:
        for p in peers:
            p.close()
    return {"stats": {k: v["step"] for k, v in stats.items()}, "errors_vs_float64": errors, "missing": missing,
            "versions": versions}


def rows(payload: dict) -> list[dict]:
    out = []
    for case, (label, _) in CASES.items():
        r = payload[case]
        s = r["stats"]
        row = {"workload": label}
        for peer, col in (("funcgrad", "funcgrad"), ("jax", "JAX"), ("pytorch", "PyTorch")):
            row[col] = (f"{fmt_time(s[peer]['median_s'])} ±{s[peer]['spread']:.0%}" if peer in s
                        else r["missing"].get(peer, ""))
        if "jax" in s:
            row["funcgrad / JAX"] = f"{s['funcgrad']['median_s'] / s['jax']['median_s']:.2f}x"
        if "pytorch" in s:
            row["funcgrad / PyTorch"] = f"{s['funcgrad']['median_s'] / s['pytorch']['median_s']:.2f}x"
        out.append(row)
    return out


COLUMNS = ["workload", "funcgrad", "JAX", "PyTorch", "funcgrad / JAX", "funcgrad / PyTorch"]


def main(argv: list[str] | None = None) -> None:
    args = arguments(NAME, __doc__).parse_args(argv)
    if args.worker:
        peer, case, arg = args.worker
        worker(BUILDERS, MODULES, peer, case, json.loads(arg))
        return
    record = Record(NAME, args)
    if args.quick:                               # tiny batches; the workers read it from the environment
        os.environ["FUNCGRAD_BENCH_BATCH"] = "8"
        set_batch(8)
    payload = record.payload
    for case in CASES:
        print(f"{case} ...", flush=True)
        payload[case] = measure(case, 2 if args.quick else 15, chosen(list(MODULES), args), record)
    record.table("main", "Batched contractions (each peer in its own process; interleaved medians ± spread)",
                 rows(payload), COLUMNS)
    record.write(json_path(NAME, args))


if __name__ == "__main__":
    main()
