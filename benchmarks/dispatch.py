"""Eager dispatch cost: one primitive, grad of a tiny function, grad of an MLP loss.

Each funcgrad number is compared with hand-written numpy measured in the same
run (and JAX, PyTorch, HIPS autograd when installed).  Targets:
tiny grad <= 50 us per call; MLP grad <= 1.3x numpy forward+backward.

    python benchmarks/dispatch.py [--json benchmarks/results/dispatch.json] [--quick]
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from _harness import fmt_time, print_table, time_interleaved, write_json  # noqa: E402

import funcgrad as fg  # noqa: E402
import funcgrad.numpy as fnp  # noqa: E402

B, SIZES = 128, (784, 512, 512, 10)


def mlp_params(rng: np.random.Generator) -> dict:
    params = {}
    for i, (n_in, n_out) in enumerate(zip(SIZES[:-1], SIZES[1:]), 1):
        params[f"w{i}"] = (rng.standard_normal((n_in, n_out)) * np.sqrt(2.0 / n_in)).astype(np.float32)
        params[f"b{i}"] = np.zeros(n_out, np.float32)
    return params


def fg_mlp_loss(p, x, y):
    h = fnp.maximum(x @ p["w1"] + p["b1"], 0.0)
    h = fnp.maximum(h @ p["w2"] + p["b2"], 0.0)
    logits = h @ p["w3"] + p["b3"]
    try:
        from funcgrad import nn
        return nn.cross_entropy(logits, y)
    except (ImportError, AttributeError):
        lse = fnp.logsumexp(logits, axis=1)
        return fnp.mean(lse - fnp.take_along_axis(logits, y[:, None], axis=1)[:, 0])


def numpy_mlp_grad(p, x, y):
    """Hand-written forward + backward of the same loss."""
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
    return g


def peers_tiny(x_np: np.ndarray) -> dict:
    out = {}
    try:
        import torch
        xt = torch.tensor(x_np, requires_grad=True)

        def torch_grad():
            (g,) = torch.autograd.grad((torch.sin(xt) * xt).sum(), xt)
            return g
        out["pytorch"] = torch_grad
    except ImportError:
        pass
    try:
        import jax
        import jax.numpy as jnp
        jg = jax.grad(lambda v: jnp.sum(jnp.sin(v) * v))
        xj = jnp.asarray(x_np)
        out["jax eager"] = lambda: jg(xj).block_until_ready()
        jj = jax.jit(jg)
        out["jax jit"] = lambda: jj(xj).block_until_ready()
    except ImportError:
        pass
    try:
        import autograd
        import autograd.numpy as anp
        ag = autograd.grad(lambda v: anp.sum(anp.sin(v) * v))
        out["hips autograd"] = lambda: ag(x_np)
    except ImportError:
        pass
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", default="benchmarks/results/dispatch.json")
    ap.add_argument("--quick", action="store_true", help="fewer rounds (smoke test)")
    args = ap.parse_args()
    repeats = 5 if args.quick else 25
    rng = np.random.default_rng(0)
    rows, results = [], {}

    # 1. one primitive call
    x10 = rng.standard_normal(10).astype(np.float32)
    xf = fnp.array(x10)
    r = time_interleaved({"funcgrad": lambda: fnp.sin(xf), "numpy": lambda: np.sin(x10)}, repeats, inner=2000)
    results["one_primitive"] = r
    rows.append({"workload": "fnp.sin, 10 elements", "funcgrad": fmt_time(r["funcgrad"]["median_s"]),
                 "numpy": fmt_time(r["numpy"]["median_s"]),
                 "ratio vs numpy": f"{r['funcgrad']['median_s'] / r['numpy']['median_s']:.1f}x"})

    # 2. grad of a tiny function
    g = fg.grad(lambda v: fnp.sum(fnp.sin(v) * v))
    cands = {"funcgrad": lambda: g(xf), "numpy": lambda: np.sin(x10) + x10 * np.cos(x10)}
    cands.update(peers_tiny(x10))
    jg = fg.jit(g)
    cands["funcgrad jit"] = lambda: jg(xf)
    r = time_interleaved(cands, repeats, inner=300)
    results["tiny_grad"] = r
    rows.append({"workload": "grad sum(sin(x)*x), 10 el.", **{k: fmt_time(v["median_s"]) for k, v in r.items()},
                 "ratio vs numpy": f"{r['funcgrad']['median_s'] / r['numpy']['median_s']:.1f}x",
                 "target": "funcgrad <= 50 us"})

    # 3. grad of an MLP loss
    p_np = mlp_params(rng)
    x_np = rng.standard_normal((B, SIZES[0])).astype(np.float32)
    y_np = rng.integers(0, 10, B)
    p_fg = {k: fnp.array(v) for k, v in p_np.items()}
    x_fg, y_fg = fnp.array(x_np), fnp.array(y_np)
    gl = fg.grad(fg_mlp_loss)
    r = time_interleaved({"funcgrad": lambda: gl(p_fg, x_fg, y_fg), "numpy": lambda: numpy_mlp_grad(p_np, x_np, y_np)},
                         repeats, inner=3)
    results["mlp_grad"] = r
    rows.append({"workload": "grad MLP loss B=128 784-512-512-10", "funcgrad": fmt_time(r["funcgrad"]["median_s"]),
                 "numpy": fmt_time(r["numpy"]["median_s"]),
                 "ratio vs numpy": f"{r['funcgrad']['median_s'] / r['numpy']['median_s']:.2f}x",
                 "target": "<= 1.3x numpy"})

    cols = ["workload", "funcgrad", "funcgrad jit", "numpy", "pytorch", "jax eager", "jax jit", "hips autograd",
            "ratio vs numpy", "target"]
    print_table("Eager dispatch (medians, interleaved)", rows, [c for c in cols if any(c in r for r in rows)])
    write_json(args.json, {"benchmark": "dispatch", "results": results})


if __name__ == "__main__":
    main()
