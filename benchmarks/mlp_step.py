"""Full MLP training step: funcgrad eager and jit vs hand-written numpy (and peers).

Batch 128, 784-512-512-10, ReLU, softmax cross-entropy, SGD.  Targets:
jit step <= 1.05x the numpy step; eager <= 1.3x.  Also measures
the jitted step's compile cost in fresh processes (cold and with the kernel
disk cache warm) and 1-thread vs all-thread scaling.

    python benchmarks/mlp_step.py [--json PATH] [--quick] [--no-subprocess]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

from _harness import environment, fmt_time, print_table, time_interleaved, write_json  # noqa: E402
from dispatch import B, SIZES, mlp_params, numpy_mlp_grad  # noqa: E402

LR = 0.05


def funcgrad_step():
    import funcgrad as fg
    import funcgrad.nn as nn

    def loss(p, x, y):
        h = nn.relu(x @ p["w1"] + p["b1"])
        h = nn.relu(h @ p["w2"] + p["b2"])
        return nn.cross_entropy(h @ p["w3"] + p["b3"], y)

    def step(p, x, y):
        g = fg.grad(loss)(p, x, y)
        return fg.tree_util.tree_map(lambda w, gw: w - LR * gw, p, g)

    return step


def numpy_step(p, x, y):
    g = numpy_mlp_grad(p, x, y)
    return {k: p[k] - LR * g[k] for k in p}


def torch_step_factory(p_np):
    import torch
    params = {k: torch.tensor(v, requires_grad=True) for k, v in p_np.items()}

    def step(x, y):
        h = torch.relu(x @ params["w1"] + params["b1"])
        h = torch.relu(h @ params["w2"] + params["b2"])
        loss = torch.nn.functional.cross_entropy(h @ params["w3"] + params["b3"], y)
        grads = torch.autograd.grad(loss, list(params.values()))
        with torch.no_grad():
            for w, g in zip(params.values(), grads):
                w -= LR * g
    return step


def jax_step_factory():
    import jax
    import jax.numpy as jnp

    def loss(p, x, y):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        h = jax.nn.relu(h @ p["w2"] + p["b2"])
        logits = h @ p["w3"] + p["b3"]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

    @jax.jit
    def step(p, x, y):
        g = jax.grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda w, gw: w - LR * gw, p, g)
    return step


def autograd_step_factory():
    import autograd
    import autograd.numpy as anp

    def loss(p, x, y):
        h = anp.maximum(x @ p["w1"] + p["b1"], 0)
        h = anp.maximum(h @ p["w2"] + p["b2"], 0)
        logits = h @ p["w3"] + p["b3"]
        m = anp.max(logits, axis=1, keepdims=True)
        lse = m[:, 0] + anp.log(anp.sum(anp.exp(logits - m), axis=1))
        return anp.mean(lse - logits[anp.arange(len(y)), y])
    grad = autograd.grad(loss)
    return lambda p, x, y: {k: p[k] - LR * g for k, g in grad(p, x, y).items()}


def measure_steps(repeats: int) -> dict:
    import funcgrad as fg
    import funcgrad.numpy as fnp
    rng = np.random.default_rng(0)
    p_np = mlp_params(rng)
    x_np = rng.standard_normal((B, SIZES[0])).astype(np.float32)
    y_np = rng.integers(0, 10, B)
    p_fg = {k: fnp.array(v) for k, v in p_np.items()}
    x_fg, y_fg = fnp.array(x_np), fnp.array(y_np)
    step = funcgrad_step()
    jstep = fg.jit(step)
    # Same numbers first: the benchmark is only meaningful if the steps agree.
    ref = numpy_step(p_np, x_np, y_np)
    for name, out in (("eager", step(p_fg, x_fg, y_fg)), ("jit", jstep(p_fg, x_fg, y_fg))):
        err = max(float(np.max(np.abs(np.asarray(out[k]) - ref[k]))) for k in ref)
        assert err < 1e-4, f"funcgrad {name} step differs from numpy by {err}"
    cands = {"funcgrad jit": lambda: jstep(p_fg, x_fg, y_fg), "numpy": lambda: numpy_step(p_np, x_np, y_np),
             "funcgrad eager": lambda: step(p_fg, x_fg, y_fg)}
    try:
        import torch
        tstep = torch_step_factory(p_np)
        xt, yt = torch.tensor(x_np), torch.tensor(y_np)
        cands["pytorch"] = lambda: tstep(xt, yt)
    except ImportError:
        pass
    try:
        import jax
        jaxstep = jax_step_factory()
        pj = jax.tree_util.tree_map(jax.numpy.asarray, p_np)
        xj, yj = jax.numpy.asarray(x_np), jax.numpy.asarray(y_np)
        cands["jax jit"] = lambda: jax.block_until_ready(jaxstep(pj, xj, yj))
    except ImportError:
        pass
    try:
        astep = autograd_step_factory()
        cands["hips autograd"] = lambda: astep(p_np, x_np, y_np)
    except ImportError:
        pass
    return time_interleaved(cands, repeats=repeats, inner=3, warmup=3)


def measure_conv(repeats: int) -> float:
    """Median seconds of a conv layer forward + backward (batch 128, 32->64, 3x3, 28x28, padding 1)."""
    import funcgrad as fg
    import funcgrad.nn as nn
    import funcgrad.numpy as fnp
    rng = np.random.default_rng(1)
    x = fnp.array(rng.standard_normal((128, 32, 28, 28)).astype(np.float32))
    w = fnp.array((rng.standard_normal((64, 32, 3, 3)) * 0.05).astype(np.float32))
    step = fg.jit(fg.grad(lambda w, x: fnp.sum(nn.relu(nn.conv2d(x, w, padding=1))), argnums=(0, 1)))
    return time_interleaved({"conv": lambda: step(w, x)}, repeats=repeats, warmup=2)["conv"]["median_s"]


_COMPILE_CHILD = """
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, {bench!r}); sys.path.insert(0, {repo!r})
import numpy as np
import funcgrad as fg, funcgrad.numpy as fnp
from mlp_step import funcgrad_step
from dispatch import mlp_params, B, SIZES
rng = np.random.default_rng(0)
p = {{k: fnp.array(v) for k, v in mlp_params(rng).items()}}
x = fnp.array(rng.standard_normal((B, SIZES[0])).astype(np.float32)); y = fnp.array(rng.integers(0, 10, B))
t_import = time.perf_counter() - t0
js = fg.jit(funcgrad_step())
t = time.perf_counter(); js(p, x, y); first = time.perf_counter() - t
t = time.perf_counter(); js(p, x, y); second = time.perf_counter() - t
print(t_import, first, second)
"""


def measure_compile() -> dict:
    """First call of the jitted step in fresh processes: empty kernel cache, then warm."""
    cache = tempfile.mkdtemp(prefix="funcgrad-kernels-")
    env = dict(os.environ, FUNCGRAD_CACHE_DIR=cache)
    code = _COMPILE_CHILD.format(bench=HERE, repo=os.path.dirname(HERE))
    out = {}
    for label in ("cold", "warm"):
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode:
            raise RuntimeError(proc.stderr)
        t_import, first, second = map(float, proc.stdout.split())
        out[label] = {"import_s": t_import, "first_call_s": first, "second_call_s": second}
    return out


_THREADS_CHILD = """
import sys, json
sys.path.insert(0, {bench!r}); sys.path.insert(0, {repo!r})
from mlp_step import measure_conv, measure_steps
r = measure_steps({repeats})
out = {{k: v["median_s"] for k, v in r.items() if k in ("funcgrad jit", "numpy", "funcgrad eager")}}
out["conv layer fwd+bwd (jit)"] = measure_conv({repeats})
print(json.dumps(out))
"""


def measure_threads(repeats: int) -> dict:
    out = {}
    for n in (1, os.cpu_count() or 1):
        env = dict(os.environ, FUNCGRAD_NUM_THREADS=str(n), OPENBLAS_NUM_THREADS=str(n), OMP_NUM_THREADS=str(n),
                   MKL_NUM_THREADS=str(n))
        code = _THREADS_CHILD.format(bench=HERE, repo=os.path.dirname(HERE), repeats=repeats)
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
        if proc.returncode:
            raise RuntimeError(proc.stderr)
        out[n] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", default="benchmarks/results/mlp_step.json")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-subprocess", action="store_true", help="skip compile-cost and thread-scaling runs")
    args = ap.parse_args()
    repeats = 5 if args.quick else 30
    steps = measure_steps(repeats)
    base = steps["numpy"]["median_s"]
    rows = [{"implementation": k, "median": fmt_time(v["median_s"]), "ratio vs numpy": f"{v['median_s'] / base:.2f}x",
             "spread": f"{v['spread']:.0%}",
             "target": {"funcgrad jit": "<= 1.05x", "funcgrad eager": "<= 1.3x"}.get(k, "")} for k, v in steps.items()]
    print_table("MLP training step, B=128, 784-512-512-10 (interleaved medians)", rows,
                ["implementation", "median", "ratio vs numpy", "spread", "target"])
    payload = {"benchmark": "mlp_step", "steps": steps}
    if not args.no_subprocess:
        comp = measure_compile()
        print_table("jit compile cost of the step (fresh processes)",
                    [{"kernel cache": k, "import": fmt_time(v["import_s"]), "first call": fmt_time(v["first_call_s"]),
                      "second call": fmt_time(v["second_call_s"]), "target": "<= 5 s" if k == "cold" else "<= 1 s"}
                     for k, v in comp.items()], ["kernel cache", "import", "first call", "second call", "target"])
        threads = measure_threads(max(3, repeats // 3))
        rows = []
        for name in ("funcgrad jit", "funcgrad eager", "numpy", "conv layer fwd+bwd (jit)"):
            one, many = threads[1][name], threads[max(threads)][name]
            rows.append({"implementation": name, "1 thread": fmt_time(one), f"{max(threads)} threads": fmt_time(many),
                         "speed-up": f"{one / many:.2f}x"})
        print_table("Thread scaling (numba and BLAS threads)", rows,
                    ["implementation", "1 thread", f"{max(threads)} threads", "speed-up"])
        payload.update(compile=comp, threads=threads)
    payload["environment_at_start"] = environment()
    write_json(args.json, payload)


if __name__ == "__main__":
    main()
