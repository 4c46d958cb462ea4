"""Full MLP training step: funcgrad eager and jit against hand-written numpy, JAX, PyTorch and HIPS autograd.

Batch 128, 784-512-512-10, ReLU, softmax cross-entropy, SGD; every peer in a worker process of its own,
timed in interleaved rounds, each step first checked against float64 numpy; "numpy GEMMs only" is the step's
8 matrix products alone (the floor a step cannot go under). Also: the jitted step's first
call in fresh processes (empty kernel cache, then filled), and the step with 1 thread against all cores.

``--sweep`` measures how the cost grows: the step against the batch size (32 to 1024) with 1 thread and
with all cores, and the jitted step's compile time against the program's size (1 to 16 hidden layers).

    python benchmarks/mlp_step.py [--quick] [--sweep] [--peers funcgrad,numpy]
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

from _harness import Record, arguments, chosen, fmt_ratio, fmt_stat, fmt_time, json_path, median  # noqa: E402
from _peers import Peer, empty_caches, long_rows, run_cases, worker  # noqa: E402
from dispatch import SIZES, mlp_data, numpy_mlp_grad  # noqa: E402

NAME = "mlp_step"
SCRIPT = os.path.abspath(__file__)
LR = 0.05
PEERS = ["funcgrad", "numpy", "jax", "pytorch", "autograd"]
MODULES = {"funcgrad": "funcgrad", "numpy": "numpy", "jax": "jax", "pytorch": "torch", "autograd": "autograd"}
SWEEP_BATCHES = [32, 64, 128, 256, 512, 1024]
SWEEP_DEPTHS = [1, 2, 4, 8, 16]          # hidden layers of 256 in the compile-time sweep


def _data(arg: dict):
    sizes = arg.get("sizes", SIZES)
    return mlp_data(arg.get("batch", 128), sizes)


def numpy_step(p, x, y):
    g = numpy_mlp_grad(p, x, y)
    return {k: p[k] - LR * g[k] for k in p}


def _check(out: dict) -> dict:
    return {"w1": np.asarray(out["w1"], np.float64)[:4].tolist()}


def funcgrad_step():
    """The SGD step on params {w1, b1, ..., wL, bL} (ReLU layers, softmax cross-entropy), not jitted."""
    import funcgrad as fg
    import funcgrad.nn as nn

    def loss(p, x, y):
        n = len(p) // 2
        h = x
        for i in range(1, n):
            h = nn.relu(h @ p[f"w{i}"] + p[f"b{i}"])
        return nn.cross_entropy(h @ p[f"w{n}"] + p[f"b{n}"], y)

    def step(p, x, y):
        g = fg.grad(loss)(p, x, y)
        return fg.tree_util.tree_map(lambda w, gw: w - LR * gw, p, g)
    return step


def step_funcgrad(arg: dict):
    import funcgrad as fg
    import funcgrad.numpy as fnp
    p, x, y = _data(arg)
    p, x, y = {k: fnp.array(v) for k, v in p.items()}, fnp.array(x), fnp.array(y)
    step = funcgrad_step()
    jstep = fg.jit(step)
    calls = {"jit": lambda: fg.block_until_ready(jstep(p, x, y))}
    if not arg.get("jit_only"):
        calls["eager"] = lambda: fg.block_until_ready(step(p, x, y))

    def checks() -> dict:   # after the timed first call: lowering first would compile before it
        m = jstep.lower(p, x, y).memory_analysis()
        memory = {"arguments": m.argument_bytes + m.constant_bytes, "outputs": m.output_bytes,
                  "temporaries": m.temp_bytes}
        return {**_check(jstep(p, x, y)), "memory": memory}
    return calls, checks


def gemm_floor(p: dict, x: np.ndarray) -> callable:
    """The step's matrix products alone, into buffers allocated once: the floor a step cannot go under.

    Forward ``h_i @ w_i`` for each layer, backward ``h_{i-1}.T @ d_i`` for each layer and ``d_i @ w_i.T`` for
    all but the first (8 products for 784-512-512-10), the transposes taken as views, as BLAS takes them."""
    n = len(p) // 2
    ws = [p[f"w{i}"] for i in range(1, n + 1)]
    hs = [x] + [np.ones((len(x), w.shape[1]), np.float32) for w in ws]
    gw = [np.empty_like(w) for w in ws]
    dx = [np.empty_like(h) for h in hs[:-1]]

    def run() -> None:
        for i, w in enumerate(ws):
            np.matmul(hs[i], w, out=hs[i + 1])
        for i in range(n - 1, -1, -1):
            np.matmul(hs[i].T, hs[i + 1], out=gw[i])
            if i > 0:
                np.matmul(hs[i + 1], ws[i].T, out=dx[i])
    return run


def step_numpy(arg: dict):
    p, x, y = _data(arg)
    return {"call": lambda: numpy_step(p, x, y), "GEMMs only": gemm_floor(p, x)}, _check(numpy_step(p, x, y))


def step_jax(arg: dict):
    import jax
    import jax.numpy as jnp
    p, x, y = _data(arg)
    n = len(p) // 2
    p, x, y = jax.tree_util.tree_map(jnp.asarray, p), jnp.asarray(x), jnp.asarray(y)

    def loss(p, x, y):
        h = x
        for i in range(1, n):
            h = jax.nn.relu(h @ p[f"w{i}"] + p[f"b{i}"])
        logits = h @ p[f"w{n}"] + p[f"b{n}"]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

    @jax.jit
    def step(p, x, y):
        g = jax.grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda w, gw: w - LR * gw, p, g)

    def checks() -> dict:   # after the timed first call: compiling here first would make that call a cached one
        m = step.lower(p, x, y).compile().memory_analysis()
        memory = {"arguments": m.argument_size_in_bytes, "outputs": m.output_size_in_bytes - m.alias_size_in_bytes,
                  "temporaries": m.temp_size_in_bytes}
        return {**_check(step(p, x, y)), "memory": memory}
    return {"jit": lambda: jax.block_until_ready(step(p, x, y))}, checks


def step_torch(arg: dict):
    import torch
    p, x, y = _data(arg)
    n = len(p) // 2
    params = {k: torch.tensor(v, requires_grad=True) for k, v in p.items()}
    xt, yt = torch.tensor(x), torch.tensor(y)

    def step():
        h = xt
        for i in range(1, n):
            h = torch.relu(h @ params[f"w{i}"] + params[f"b{i}"])
        loss = torch.nn.functional.cross_entropy(h @ params[f"w{n}"] + params[f"b{n}"], yt)
        grads = torch.autograd.grad(loss, list(params.values()))
        with torch.no_grad():
            for w, g in zip(params.values(), grads):
                w -= LR * g
    return {"call": step}, lambda: _check({"w1": params["w1"].detach().numpy()})   # after its first step


def step_autograd(arg: dict):
    import autograd
    import autograd.numpy as anp
    p, x, y = _data(arg)
    n = len(p) // 2

    def loss(p, x, y):
        h = x
        for i in range(1, n):
            h = anp.maximum(h @ p[f"w{i}"] + p[f"b{i}"], 0)
        logits = h @ p[f"w{n}"] + p[f"b{n}"]
        m = anp.max(logits, axis=1, keepdims=True)
        lse = m[:, 0] + anp.log(anp.sum(anp.exp(logits - m), axis=1))
        return anp.mean(lse - logits[anp.arange(len(y)), y])
    grad = autograd.grad(loss)
    step = lambda: {k: p[k] - LR * g for k, g in grad(p, x, y).items()}   # noqa: E731
    return {"call": step}, lambda: _check(step())


def conv_funcgrad(arg: dict):
    """A conv layer forward + backward (32 -> 64 channels, 3x3, 28x28, padding 1)."""
    import funcgrad as fg
    import funcgrad.nn as nn
    import funcgrad.numpy as fnp
    rng = np.random.default_rng(1)
    x = fnp.array(rng.standard_normal((arg.get("batch", 128), 32, 28, 28)).astype(np.float32))
    w = fnp.array((rng.standard_normal((64, 32, 3, 3)) * 0.05).astype(np.float32))
    step = fg.jit(fg.grad(lambda w, x: fnp.sum(nn.relu(nn.conv2d(x, w, padding=1))), argnums=(0, 1)))
    return {"conv layer fwd+bwd (jit)": lambda: fg.block_until_ready(step(w, x))}, {}


BUILDERS = {("step", "funcgrad"): step_funcgrad, ("step", "numpy"): step_numpy, ("step", "jax"): step_jax,
            ("step", "pytorch"): step_torch, ("step", "autograd"): step_autograd, ("conv", "funcgrad"): conv_funcgrad}


# The jitted step's memory as each compiler plans it (funcgrad: ``Jitted.lower(...).memory_analysis()``,
# JAX: ``compiled.memory_analysis()``), filled in by check_step from the workers' checks.
MEMORY: dict[str, dict] = {}


def check_step(case: dict, peers: list) -> None:
    """Each peer's first updated rows of w1 (after one step) against a float64 numpy step."""
    for peer in peers:
        if "memory" in peer.hello["checks"]:
            MEMORY[peer.name] = peer.hello["checks"]["memory"]
    p, x, y = _data(case["arg"])
    ref = numpy_step({k: v.astype(np.float64) for k, v in p.items()}, x.astype(np.float64), y)["w1"][:4]
    for peer in peers:
        got = peer.hello["checks"].get("w1")
        if got is not None:
            err = float(np.max(np.abs(np.asarray(got) - ref)))
            if err > 1e-4:
                raise AssertionError(f"{peer.name}'s MLP step differs from float64 numpy by {err:.2e}")


def threads_env(n: int) -> dict:
    return {k: str(n) for k in ("FUNCGRAD_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TORCH_NUM_THREADS")} | \
        {"XLA_FLAGS": f"--xla_cpu_multi_thread_eigen={'false' if n == 1 else 'true'} "
                      f"intra_op_parallelism_threads={n}",
                      "FUNCGRAD_BENCH_CPUS": ",".join(str(c) for c in range(n))}   # see _peers.pin_to_cpus


def first_calls(arg: dict, repeats: int, peers: list[str]) -> dict:
    """{label: [seconds]}: the jitted step's first call (trace, compile, run) in fresh processes; funcgrad
    with an empty kernel cache (cold) and again with it filled (warm)."""
    out: dict[str, list] = {"funcgrad cold": [], "funcgrad warm": []}
    for _ in range(repeats):
        cache = tempfile.mkdtemp(prefix="funcgrad-kernels-")
        try:
            for label in ("funcgrad cold", "funcgrad warm"):
                p = Peer(SCRIPT, "funcgrad", "step", dict(arg, jit_only=True), env=empty_caches(cache))
                out[label].append(p.hello["first_call_s"]["jit"])
                p.close()
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        if "jax" in peers:
            p = Peer(SCRIPT, "jax", "step", arg)
            if not p.missing:
                out.setdefault("jax", []).append(p.hello["first_call_s"]["jit"])
            p.close()
    return out


def run_step(args, record) -> None:
    quick = args.quick
    peers = chosen(PEERS, args)
    arg = {"batch": 32 if quick else 128}
    cases = [{"case": "step", "label": f"MLP step, B={arg['batch']}, 784-512-512-10", "arg": arg,
              "inner": 1 if quick else 3}]
    res = run_cases(SCRIPT, peers, cases, rounds=2 if quick else 30, record=record, baseline="numpy",
                    budget_s=5 if quick else 60, check=check_step)
    record.table("step", "MLP training step (each peer in its own process; interleaved medians)",
                 long_rows(res, "numpy"))
    if MEMORY:
        record.payload["memory"] = MEMORY
        mib = lambda n: f"{n / 2**20:.2f} MiB"   # noqa: E731
        record.table("memory", "Memory of one jitted step, as each compiler plans it", [
            {"library": name, "arguments": mib(m["arguments"]), "outputs": mib(m["outputs"]),
             "temporaries": mib(m["temporaries"]), "peak": mib(sum(m.values()))} for name, m in MEMORY.items()])
    if quick:
        return
    comp = first_calls(arg, 3, peers)
    record.payload["compile"] = comp
    record.table("compile", "First call of the jitted step in a fresh process (trace, compile, run; median of 3)",
                 [{"implementation": k, "first call": fmt_time(median(v))} for k, v in comp.items()])
    ncpu = os.cpu_count() or 1
    by_threads = {}
    for n in sorted({1, ncpu}):
        cases = [{"case": "step", "label": "MLP step", "arg": arg, "inner": 3},
                 {"case": "conv", "label": "conv layer", "arg": arg}]
        by_threads[n] = run_cases(SCRIPT, [p for p in ("funcgrad", "numpy", "pytorch") if p in peers], cases,
                                  rounds=15, env=threads_env(n), budget_s=40)
        for label, stats in by_threads[n].items():
            for peer, calls in stats.items():
                record.measure(f"{label}, {n} threads", {peer: calls})
    record.payload["threads"] = by_threads
    rows = []
    for label in ("MLP step", "conv layer"):
        for peer, calls in by_threads[1][label].items():
            for call, one in calls.items():
                many = by_threads[ncpu][label].get(peer, {}).get(call)
                rows.append({"workload": label, "contender": f"{peer} {call}".replace(" call", ""),
                             "1 thread": fmt_stat(one), f"{ncpu} threads": fmt_stat(many),
                             "speed-up": fmt_ratio(one["median_s"], many and many["median_s"])})
    record.table("threads", f"1 thread against {ncpu} (numba, BLAS, PyTorch and XLA threads)", rows)


def run_sweep(args, record) -> None:
    quick = args.quick
    peers = chosen(PEERS, args)
    batches = [16, 32] if quick else SWEEP_BATCHES
    ncpu = os.cpu_count() or 1
    series: dict[str, list] = {}
    for n in sorted({1, ncpu}):
        cases = [{"case": "step", "label": f"B={b}", "arg": {"batch": b, "jit_only": True}, "inner": 1}
                 for b in batches]
        res = run_cases(SCRIPT, [p for p in peers if p != "autograd"], cases, rounds=2 if quick else 9,
                        env=threads_env(n), budget_s=5 if quick else 20, record=record, measure=False)
        for b in batches:
            for peer, calls in res[f"B={b}"].items():
                for call, s in calls.items():
                    label = f"{peer} {call}".replace(" call", "") + f", {n} thread{'s' if n > 1 else ''}"
                    series.setdefault(label, []).append([b, s["median_s"] * 1e3])
                    record.measure(f"MLP step B={b}, {n} threads", {peer: {call: s}})
    record.sweep("batch", "MLP step (784-512-512-10) against the batch size", "batch size", "ms per step", series)
    depths = [1, 2] if quick else SWEEP_DEPTHS
    comp: dict[str, list] = {}
    for d in depths:
        arg = {"batch": 32, "sizes": [256] + [256] * d + [10]}
        for label, times in first_calls(arg, 1 if quick else 2, peers).items():
            comp.setdefault(label, []).append([d, median(times)])
            record.measure(f"jit step first call, {d} hidden layers", {label: {"first call": _stats(times)}})
    record.sweep("compile", "First call of the jitted MLP step against the number of layers", "hidden layers",
                 "seconds", comp, logy=False)
    rows = [{"hidden layers": d, **{k: fmt_time(v[i][1]) for k, v in comp.items()}} for i, d in enumerate(depths)]
    record.table("compile_sweep", "First call of the jitted step (trace, compile, run) against the program's size",
                 rows)


def _stats(times: list[float]) -> dict:
    from _peers import summarize
    return summarize(times)


def main(argv: list[str] | None = None) -> None:
    args = arguments(NAME, __doc__, sweep="how the cost grows with the batch size, the threads and the "
                                          "program's size").parse_args(argv)
    if args.worker:
        worker(BUILDERS, MODULES, args.worker[0], args.worker[1], json.loads(args.worker[2]))
        return
    record = Record(NAME + ("_sweep" if args.sweep else ""), args, script=NAME)
    if args.sweep:
        run_sweep(args, record)
    else:
        run_step(args, record)
    record.write(json_path(record.name, args))


if __name__ == "__main__":
    main()
