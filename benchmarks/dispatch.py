"""Eager dispatch cost: one primitive, grad of a tiny function, grad of an MLP loss.

funcgrad, numpy (hand-written forward and backward), JAX, PyTorch and HIPS autograd each run in a worker
process of their own, timed in interleaved rounds; the table gives medians, their spread and the time
relative to numpy measured in the same run. Peers that are not installed are reported and skipped.

* ``sin`` of 10 float32 elements (2,000 calls per sample);
* ``grad(lambda v: sum(sin(v) * v))`` on 10 elements (eager and jit; 300 calls per sample);
* ``grad`` of a 784-512-512-10 ReLU MLP's cross-entropy at batch 128 (eager; JAX also under jit).

    python benchmarks/dispatch.py [--quick] [--peers funcgrad,numpy]
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

from _harness import Record, arguments, chosen, json_path  # noqa: E402
from _peers import long_rows, run_cases, worker  # noqa: E402

NAME = "dispatch"
SCRIPT = os.path.abspath(__file__)
B, SIZES = 128, (784, 512, 512, 10)
PEERS = ["funcgrad", "numpy", "jax", "pytorch", "autograd"]
MODULES = {"funcgrad": "funcgrad", "numpy": "numpy", "jax": "jax", "pytorch": "torch", "autograd": "autograd"}


def mlp_params(rng: np.random.Generator, sizes=SIZES) -> dict:
    params = {}
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:]), 1):
        params[f"w{i}"] = (rng.standard_normal((n_in, n_out)) * np.sqrt(2.0 / n_in)).astype(np.float32)
        params[f"b{i}"] = np.zeros(n_out, np.float32)
    return params


def mlp_data(batch: int = B, sizes=SIZES) -> tuple[dict, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    p = mlp_params(rng, sizes)
    return p, rng.standard_normal((batch, sizes[0])).astype(np.float32), rng.integers(0, sizes[-1], batch)


def numpy_mlp_grad(p, x, y):
    """Hand-written forward + backward of the cross-entropy of a ReLU MLP with layers w1, w2, ... wL."""
    n = len(p) // 2
    pre, acts = [], [x]
    for i in range(1, n + 1):
        a = acts[-1] @ p[f"w{i}"] + p[f"b{i}"]
        pre.append(a)
        acts.append(np.maximum(a, 0) if i < n else a)
    logits = acts[-1]
    e = np.exp(logits - logits.max(1, keepdims=True))
    d = e / e.sum(1, keepdims=True)
    d[np.arange(len(y)), y] -= 1.0
    d /= len(y)
    g = {}
    for i in range(n, 0, -1):
        g[f"w{i}"], g[f"b{i}"] = acts[i - 1].T @ d, d.sum(0)
        if i > 1:
            d = (d @ p[f"w{i}"].T) * (pre[i - 2] > 0)
    return g


def tiny_input() -> np.ndarray:
    return np.random.default_rng(0).standard_normal(10).astype(np.float32)


# --------------------------------------------------------------------------
# Builders: (case, peer) -> ({call: fn}, checks)
# --------------------------------------------------------------------------


def sin_funcgrad():
    import funcgrad.numpy as fnp
    x = fnp.array(tiny_input())
    return {"call": lambda: fnp.sin(x)}, {}


def sin_numpy():
    x = tiny_input()
    return {"call": lambda: np.sin(x)}, {}


def sin_jax():
    import jax.numpy as jnp
    x = jnp.asarray(tiny_input())
    return {"call": lambda: jnp.sin(x).block_until_ready()}, {}


def sin_torch():
    import torch
    x = torch.tensor(tiny_input())
    return {"call": lambda: torch.sin(x)}, {}


def tiny_funcgrad():
    import funcgrad as fg
    import funcgrad.numpy as fnp
    g = fg.grad(lambda v: fnp.sum(fnp.sin(v) * v))
    jg = fg.jit(g)
    x = fnp.array(tiny_input())
    return {"eager": lambda: np.asarray(g(x)), "jit": lambda: np.asarray(jg(x))}, {}


def tiny_numpy():
    x = tiny_input()
    return {"call": lambda: np.sin(x) + x * np.cos(x)}, {}


def tiny_jax():
    import jax
    import jax.numpy as jnp
    g = jax.grad(lambda v: jnp.sum(jnp.sin(v) * v))
    jg = jax.jit(g)
    x = jnp.asarray(tiny_input())
    return {"eager": lambda: np.asarray(g(x)), "jit": lambda: np.asarray(jg(x))}, {}


def tiny_torch():
    import torch
    x = torch.tensor(tiny_input(), requires_grad=True)

    def call():
        (g,) = torch.autograd.grad((torch.sin(x) * x).sum(), x)
        return g.numpy()
    return {"call": call}, {}


def tiny_autograd():
    import autograd
    import autograd.numpy as anp
    g = autograd.grad(lambda v: anp.sum(anp.sin(v) * v))
    x = tiny_input()
    return {"call": lambda: g(x)}, {}


def mlp_funcgrad(arg: dict):
    import funcgrad as fg
    import funcgrad.nn as nn
    import funcgrad.numpy as fnp
    p, x, y = mlp_data(arg["batch"])
    p, x, y = {k: fnp.array(v) for k, v in p.items()}, fnp.array(x), fnp.array(y)

    def loss(p, x, y):
        h = nn.relu(x @ p["w1"] + p["b1"])
        h = nn.relu(h @ p["w2"] + p["b2"])
        return nn.cross_entropy(h @ p["w3"] + p["b3"], y)
    g = fg.grad(loss)
    return {"eager": lambda: fg.block_until_ready(g(p, x, y))}, {"w1": _rows(g(p, x, y)["w1"])}


def mlp_numpy(arg: dict):
    p, x, y = mlp_data(arg["batch"])
    return {"call": lambda: numpy_mlp_grad(p, x, y)}, {}


def mlp_jax(arg: dict):
    import jax
    import jax.numpy as jnp
    p, x, y = mlp_data(arg["batch"])
    p, x, y = jax.tree_util.tree_map(jnp.asarray, p), jnp.asarray(x), jnp.asarray(y)

    def loss(p, x, y):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        h = jax.nn.relu(h @ p["w2"] + p["b2"])
        logits = h @ p["w3"] + p["b3"]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))
    g, jg = jax.grad(loss), jax.jit(jax.grad(loss))
    return ({"eager": lambda: jax.block_until_ready(g(p, x, y)), "jit": lambda: jax.block_until_ready(jg(p, x, y))},
            {"w1": _rows(g(p, x, y)["w1"])})


def mlp_torch(arg: dict):
    import torch
    p, x, y = mlp_data(arg["batch"])
    params = {k: torch.tensor(v, requires_grad=True) for k, v in p.items()}
    xt, yt = torch.tensor(x), torch.tensor(y)

    def call():
        h = torch.relu(xt @ params["w1"] + params["b1"])
        h = torch.relu(h @ params["w2"] + params["b2"])
        loss = torch.nn.functional.cross_entropy(h @ params["w3"] + params["b3"], yt)
        return dict(zip(params, torch.autograd.grad(loss, list(params.values()))))
    return {"call": call}, {"w1": _rows(call()["w1"].numpy())}


def _rows(a) -> list:
    return np.asarray(a, np.float64)[:4].tolist()


BUILDERS = {("sin", "funcgrad"): sin_funcgrad, ("sin", "numpy"): sin_numpy, ("sin", "jax"): sin_jax,
            ("sin", "pytorch"): sin_torch,
            ("tiny", "funcgrad"): tiny_funcgrad, ("tiny", "numpy"): tiny_numpy, ("tiny", "jax"): tiny_jax,
            ("tiny", "pytorch"): tiny_torch, ("tiny", "autograd"): tiny_autograd,
            ("mlp", "funcgrad"): mlp_funcgrad, ("mlp", "numpy"): mlp_numpy, ("mlp", "jax"): mlp_jax,
            ("mlp", "pytorch"): mlp_torch}


def check_mlp(case: dict, peers: list) -> None:
    """Every peer's gradient against the float64 numpy one."""
    if case["case"] != "mlp":
        return
    p, x, y = mlp_data(case["arg"]["batch"])
    ref = numpy_mlp_grad({k: v.astype(np.float64) for k, v in p.items()}, x.astype(np.float64), y)["w1"][:4]
    for peer in peers:
        got = peer.hello["checks"].get("w1")
        if got is not None:
            err = float(np.max(np.abs(np.asarray(got) - ref)))
            if err > 1e-4:
                raise AssertionError(f"{peer.name}'s MLP gradient differs from float64 numpy by {err:.2e}")


def main(argv: list[str] | None = None) -> None:
    args = arguments(NAME, __doc__).parse_args(argv)
    if args.worker:
        import json
        worker(BUILDERS, MODULES, args.worker[0], args.worker[1], json.loads(args.worker[2]))
        return
    record = Record(NAME, args)
    quick = args.quick
    batch = 16 if quick else B
    cases = [{"case": "sin", "label": "sin, 10 elements", "inner": 50 if quick else 2000},
             {"case": "tiny", "label": "grad sum(sin(x) * x), 10 elements", "inner": 10 if quick else 300},
             {"case": "mlp", "label": f"grad of an MLP loss, B={batch}, 784-512-512-10", "arg": {"batch": batch},
              "inner": 1 if quick else 3}]
    results = run_cases(SCRIPT, chosen(PEERS, args), cases, rounds=2 if quick else 25, record=record,
                        baseline="numpy", check=check_mlp, budget_s=5 if quick else 30)
    record.table("dispatch", "Eager dispatch (each peer in its own process; interleaved medians)",
                 long_rows(results, "numpy"))
    record.write(json_path(NAME, args))


if __name__ == "__main__":
    main()
