"""Control flow under jit: ``fori_loop`` compile and run time, a 1,000-step RNN ``scan`` forward and
backward, and reverse mode through ``while_loop`` with and without checkpoints.

Every peer (funcgrad, JAX, PyTorch) runs in its own worker process, started
once; the parent times them in interleaved rounds (A B C A B C ...), each
worker timing its own calls, and reports medians, spreads and ratios. A
peer that is not installed in this interpreter is reported as such and
skipped.

* ``jit(fori_loop)`` of ``x = x * 0.999 + sin(x) * 0.001`` on f32[16]: the
  first call (tracing, compiling, one run) for 100 / 1,000 / 10,000
  iterations in fresh processes, funcgrad with an empty kernel cache
  (cold, ``FUNCGRAD_CACHE_DIR`` pointing at a new directory) and again with
  it filled (warm); then the time per iteration at 10,000.
* An RNN ``h = tanh(h @ W + x_t @ U + b)``, B=32, H=128, 1,000 steps,
  loss ``mean over t of sum(h_t ** 2)``: the jitted forward and
  ``value_and_grad``, against JAX's ``jit(scan)`` and PyTorch's eager
  loop. Each peer's loss and gradient are first checked against a float64
  numpy reference. funcgrad compiles a loop whole once its calls have run
  enough steps (``funcgrad.compiler.loops``): after the first calls, its
  worker calls each function until its loops run compiled (the steady state
  a training loop reaches; 25 calls), then times it.
* ``jit(grad)`` through a ``while_loop`` of n steps on a f32[1000] carry
  (funcgrad only: JAX refuses reverse mode through ``while_loop``): time
  and the peak memory (tracemalloc) against n, keeping every carry or
  ``checkpoints=100``.

    python benchmarks/control_flow.py [--quick] [--peers funcgrad,jax]
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import tracemalloc
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

from _harness import Record, arguments, chosen, fmt_time, json_path  # noqa: E402
from _peers import Peer, empty_caches, interleave, start_peers, summarize, worker  # noqa: E402

NAME = "control_flow"
SCRIPT = os.path.abspath(__file__)
FORI_SIZE = 16
RNN = {"T": int(os.environ.get("FUNCGRAD_BENCH_RNN_T", "1000")), "B": 32, "H": 128}
WHILE_SIZE = 1000
CHECKPOINTS = 100
RNN_QUICK_T = "50"

# --------------------------------------------------------------------------
# Workloads, one builder per (case, peer): each returns {name: callable}
# plus a dict of values to check, built from the same seeded numpy inputs.
# --------------------------------------------------------------------------


def fori_input() -> np.ndarray:
    return np.linspace(0.1, 1.0, FORI_SIZE, dtype=np.float32)


def fori_funcgrad(n: int) -> tuple[dict, dict]:
    import funcgrad as fg
    import funcgrad.numpy as fnp
    from funcgrad import lax
    x = fnp.array(fori_input())
    f = fg.jit(lambda x: lax.fori_loop(0, n, lambda i, v: v * 0.999 + fnp.sin(v) * 0.001, x))
    return {"fori": lambda: np.asarray(f(x))}, {}


def fori_jax(n: int) -> tuple[dict, dict]:
    import jax
    import jax.numpy as jnp
    x = jnp.asarray(fori_input())
    f = jax.jit(lambda x: jax.lax.fori_loop(0, n, lambda i, v: v * 0.999 + jnp.sin(v) * 0.001, x))
    return {"fori": lambda: np.asarray(f(x))}, {}


def check_fori(p: "Peer", n: int) -> None:
    err = float(np.max(np.abs(np.asarray(p.hello["checks"]["fori"]) - fori_reference(n))))
    if err > 1e-4:
        raise AssertionError(f"{p.name}'s fori_loop result ({n} iterations) differs from float64 numpy by {err}")


def fori_reference(n: int) -> np.ndarray:
    x = fori_input().astype(np.float64)
    for _ in range(n):
        x = x * 0.999 + np.sin(x) * 0.001
    return x


def rnn_inputs() -> dict:
    """Seeded numpy inputs: weights W, U (scaled for a stable recurrence), bias b, inputs xs f32[T, B, H]."""
    rng = np.random.default_rng(0)
    T, B, H = RNN["T"], RNN["B"], RNN["H"]
    return {"W": (rng.standard_normal((H, H)) * 0.5 / np.sqrt(H)).astype(np.float32),
            "U": (rng.standard_normal((H, H)) / np.sqrt(H)).astype(np.float32),
            "b": (rng.standard_normal(H) * 0.1).astype(np.float32),
            "xs": rng.standard_normal((T, B, H)).astype(np.float32)}


def rnn_reference() -> dict:
    """The loss and its gradients in float64 numpy (backpropagation through time by hand)."""
    p = {k: v.astype(np.float64) for k, v in rnn_inputs().items()}
    T, B, H = RNN["T"], RNN["B"], RNN["H"]
    hs = [np.zeros((B, H))]
    for t in range(T):
        hs.append(np.tanh(hs[-1] @ p["W"] + p["xs"][t] @ p["U"] + p["b"]))
    loss = sum(float(np.sum(h * h)) for h in hs[1:]) / T
    gW, gU, gb, dh = np.zeros((H, H)), np.zeros((H, H)), np.zeros(H), np.zeros((B, H))
    for t in range(T, 0, -1):
        dh = dh + 2 * hs[t] / T
        da = dh * (1 - hs[t] ** 2)
        gW += hs[t - 1].T @ da
        gU += p["xs"][t - 1].T @ da
        gb += da.sum(0)
        dh = da @ p["W"].T
    return {"loss": loss, "W": gW, "U": gU, "b": gb}


def _rnn_checks(loss: Any, grads: dict) -> dict:
    return {"loss": float(loss), **{k: np.asarray(grads[k], np.float64).tolist() for k in ("W", "U", "b")}}


def rnn_funcgrad() -> tuple[dict, dict]:
    import funcgrad as fg
    import funcgrad.numpy as fnp
    from funcgrad import lax
    inputs = rnn_inputs()
    xs = fnp.array(inputs.pop("xs"))
    params = {k: fnp.array(v) for k, v in inputs.items()}

    def loss(p, xs):
        def step(h, x):
            h = fnp.tanh(h @ p["W"] + x @ p["U"] + p["b"])
            return h, fnp.sum(h * h)
        _, ys = lax.scan(step, fnp.zeros((RNN["B"], RNN["H"])), xs)
        return fnp.sum(ys) / RNN["T"]

    forward, both = fg.jit(loss), fg.jit(fg.value_and_grad(loss))

    def steady_then_check() -> dict:
        for f in (forward, both):
            _until_loops_compile(f, params, xs)
        value, grads = both(params, xs)
        return _rnn_checks(value, grads)

    return ({"forward": lambda: np.asarray(forward(params, xs)),
             "forward+backward": lambda: fg.tree_util.tree_map(np.asarray, both(params, xs))},
            steady_then_check)


def _until_loops_compile(f: Callable, *args: Any, most: int = 60) -> int:
    """Call ``f`` until every loop in it that compiles runs compiled (at most ``most`` calls); the calls made."""
    from funcgrad.compiler import loops
    expected = sum(line.endswith("compiles into one function") for line in loops.explain(f.lower(*args)))
    for n in range(1, most + 1):
        before = loops.stats()["runs"]
        f(*args)
        if loops.stats()["runs"] - before >= expected:
            return n
    return most


def rnn_jax() -> tuple[dict, dict]:
    import jax
    import jax.numpy as jnp
    inputs = rnn_inputs()
    xs = jnp.asarray(inputs.pop("xs"))
    params = {k: jnp.asarray(v) for k, v in inputs.items()}

    def loss(p, xs):
        def step(h, x):
            h = jnp.tanh(h @ p["W"] + x @ p["U"] + p["b"])
            return h, jnp.sum(h * h)
        _, ys = jax.lax.scan(step, jnp.zeros((RNN["B"], RNN["H"]), jnp.float32), xs)
        return jnp.sum(ys) / RNN["T"]

    forward, both = jax.jit(loss), jax.jit(jax.value_and_grad(loss))
    value, grads = both(params, xs)
    return ({"forward": lambda: jax.block_until_ready(forward(params, xs)),
             "forward+backward": lambda: jax.block_until_ready(both(params, xs))},
            _rnn_checks(value, grads))


def rnn_torch() -> tuple[dict, dict]:
    import torch
    inputs = rnn_inputs()
    xs = torch.tensor(inputs.pop("xs"))
    params = {k: torch.tensor(v, requires_grad=True) for k, v in inputs.items()}

    def loss():
        h, total = torch.zeros(RNN["B"], RNN["H"]), 0.0
        for t in range(RNN["T"]):
            h = torch.tanh(h @ params["W"] + xs[t] @ params["U"] + params["b"])
            total = total + torch.sum(h * h)
        return total / RNN["T"]

    def both():
        value = loss()
        return value, dict(zip(params, torch.autograd.grad(value, list(params.values()))))

    def forward():
        with torch.no_grad():
            return loss()

    value, grads = both()
    return {"forward": forward, "forward+backward": both}, _rnn_checks(value.item(), grads)


def while_funcgrad(trip_counts: list[int]) -> tuple[dict, dict]:
    """jit(grad) through ``while_loop``, keeping every carry or CHECKPOINTS; the trip count is an argument
    (one compilation per variant). Checks: each variant's gradient, the peak memory of one call."""
    import funcgrad as fg
    import funcgrad.numpy as fnp
    from funcgrad import lax
    x = fnp.array(np.linspace(0.1, 1.0, WHILE_SIZE, dtype=np.float32))

    def gradient(checkpoints: int | None) -> Callable:
        def f(x, n):
            body = lambda c: (c[0] + 1, fnp.sin(c[1]) * 0.5 + c[1] * 0.5)   # noqa: E731
            return fnp.sum(lax.while_loop(lambda c: c[0] < n, body, (fnp.int32(0), x), checkpoints=checkpoints)[1])
        return fg.jit(fg.grad(f))

    calls, checks = {}, {}
    for label, checkpoints in (("every carry", None), (f"checkpoints={CHECKPOINTS}", CHECKPOINTS)):
        grad = gradient(checkpoints)
        for n in trip_counts:
            name = f"{n} steps, {label}"
            call = (lambda grad=grad, n=n: np.asarray(grad(x, np.int32(n))))
            value = call()                          # compiles (once per variant) before any measurement
            tracemalloc.start()
            call()
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            calls[name] = call
            checks[name] = {"grad": value.tolist(), "peak_bytes": peak, "carry_bytes": WHILE_SIZE * 4}
    return calls, checks


def while_reference(n: int) -> np.ndarray:
    """d sum(x_n) / d x_0 for x_{k+1} = sin(x_k)/2 + x_k/2, in float64: the product of the step derivatives."""
    x = np.linspace(0.1, 1.0, WHILE_SIZE, dtype=np.float32).astype(np.float64)
    g = np.ones_like(x)
    for _ in range(n):
        g *= np.cos(x) * 0.5 + 0.5
        x = np.sin(x) * 0.5 + x * 0.5
    return g


BUILDERS = {("fori", "funcgrad"): fori_funcgrad, ("fori", "jax"): fori_jax,
            ("rnn", "funcgrad"): rnn_funcgrad, ("rnn", "jax"): rnn_jax, ("rnn", "pytorch"): rnn_torch,
            ("while", "funcgrad"): while_funcgrad}
MODULES = {"funcgrad": "funcgrad", "jax": "jax", "pytorch": "torch"}


# --------------------------------------------------------------------------
# The three measurements
# --------------------------------------------------------------------------


def measure_fori(trip_counts: list[int], repeats: int, rounds: int, names: list[str]) -> dict:
    """First-call times in fresh processes (funcgrad cold and warm cache, JAX), then per-iteration time."""
    first: dict[str, dict[str, list]] = {str(n): {"funcgrad cold": [], "funcgrad warm": [], "jax": []}
                                         for n in trip_counts}
    missing: dict[str, str] = {} if "jax" in names else {"jax": "not chosen"}
    for _ in range(repeats):
        for n in trip_counts:
            cache = tempfile.mkdtemp(prefix="funcgrad-kernels-")
            try:
                for label in ("funcgrad cold", "funcgrad warm"):
                    p = Peer(SCRIPT, "funcgrad", "fori", n, env=empty_caches(cache))
                    check_fori(p, n)
                    first[str(n)][label].append(p.hello["first_call_s"]["fori"])
                    p.close()
            finally:
                shutil.rmtree(cache, ignore_errors=True)
            if "jax" not in missing:
                p = Peer(SCRIPT, "jax", "fori", n)
                if p.missing:
                    missing["jax"] = p.missing
                else:
                    check_fori(p, n)
                    first[str(n)]["jax"].append(p.hello["first_call_s"]["fori"])
                p.close()
    n = max(trip_counts)
    peers, _ = start_peers(SCRIPT, [k for k in ("funcgrad", "jax") if k not in missing], "fori", n)
    try:
        run = interleave(peers, ["fori"], rounds)
    finally:
        for p in peers:
            p.close()
    per_iteration = {peer: {"per_iteration_s": s["fori"]["median_s"] / n, **s["fori"]} for peer, s in run.items()}
    return {"trip_counts": trip_counts, "first_call_s": first, "run": per_iteration, "run_trip_count": n,
            "missing": missing}


def check_rnn(checks: dict, reference: dict, peer: str) -> dict:
    """Relative errors of a peer's loss and gradients against the float64 reference; raises when off."""
    errors = {"loss": abs(checks["loss"] - reference["loss"]) / abs(reference["loss"])}
    for k in ("W", "U", "b"):
        got, want = np.asarray(checks[k]), reference[k]
        errors[k] = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    bad = {k: v for k, v in errors.items() if v > 1e-3}
    if bad:
        raise AssertionError(f"{peer}'s RNN loss or gradient differs from the float64 reference: {bad}")
    return errors


def measure_rnn(rounds: int, names: list[str], record: Record) -> dict:
    peers, missing = start_peers(SCRIPT, names, "rnn")
    record.peers_from(peers, missing)
    try:
        reference = rnn_reference()
        errors = {p.name: check_rnn(p.hello["checks"], reference, p.name) for p in peers}
        stats = interleave(peers, ["forward", "forward+backward"], rounds)
        first = {p.name: p.hello["first_call_s"] for p in peers}
        versions = {p.name: p.hello["version"] for p in peers}
    finally:
        for p in peers:
            p.close()
    return {"shape": RNN, "stats": stats, "first_call_s": first, "errors_vs_float64": errors, "missing": missing,
            "versions": versions}


def measure_while(trip_counts: list[int], rounds: int) -> dict:
    peers, missing = start_peers(SCRIPT, ["funcgrad"], "while", trip_counts)
    if not peers:
        return {"missing": missing}
    p = peers[0]
    try:
        checks = p.hello["checks"]
        for name, c in checks.items():
            n = int(name.split()[0])
            err = float(np.max(np.abs(np.asarray(c["grad"]) - while_reference(n))))
            if err > 1e-4:
                raise AssertionError(f"while_loop gradient ({name}) differs from the float64 reference by {err}")
        stats = interleave(peers, sorted(checks), rounds)["funcgrad"]
    finally:
        p.close()
    rows = []
    for n in trip_counts:
        row = {"steps": n}
        for label in ("every carry", f"checkpoints={CHECKPOINTS}"):
            name = f"{n} steps, {label}"
            row[label] = {"peak_bytes": checks[name]["peak_bytes"],
                          "peak_carries": checks[name]["peak_bytes"] / checks[name]["carry_bytes"], **stats[name]}
        rows.append(row)
    return {"carry": f"f32[{WHILE_SIZE}]", "checkpoints": CHECKPOINTS, "rows": rows}


# --------------------------------------------------------------------------
# Reports: the console tables and the README's markdown, both from the JSON payload
# --------------------------------------------------------------------------


def _time(seconds: float) -> str:
    return f"{seconds * 1e9:.0f} ns" if seconds < 1e-6 else fmt_time(seconds)


def _ratio(a: float | None, b: float | None) -> str:
    if not (a and b):
        return ""
    return f"{a / b:.2f}x" if a / b < 10 else f"{a / b:.0f}x"


def _stat(s: dict | None) -> str:
    return f"{_time(s['median_s'])} ±{s['spread']:.0%}" if s else ""


def fori_rows(r: dict) -> list[dict]:
    rows = []
    for n in r["trip_counts"]:
        f = r["first_call_s"][str(n)]
        med = {k: statistics.median(v) if v else None for k, v in f.items()}
        if med["funcgrad cold"] is None:         # not measured (smoke runs)
            continue
        rows.append({"workload": f"jit(fori_loop) first call, {n:,} iterations",
                     "funcgrad": f"cold {med['funcgrad cold']:.2f} s, warm {med['funcgrad warm']:.2f} s",
                     "JAX": f"{med['jax']:.2f} s" if med["jax"] else r["missing"].get("jax", ""),
                     "funcgrad / JAX": _ratio(med["funcgrad cold"], med["jax"]) and
                     f"{_ratio(med['funcgrad cold'], med['jax'])} cold"})
    run = r["run"]
    fg_it, jax_it = run["funcgrad"]["per_iteration_s"], run.get("jax", {}).get("per_iteration_s")
    rows.append({"workload": f"jit(fori_loop) per iteration (f32[{FORI_SIZE}], {r['run_trip_count']:,} iterations)",
                 "funcgrad": f"{_time(fg_it)} ±{run['funcgrad']['spread']:.0%}",
                 "JAX": f"{_time(jax_it)} ±{run['jax']['spread']:.0%}" if jax_it else r["missing"].get("jax", ""),
                 "funcgrad / JAX": _ratio(fg_it, jax_it)})
    return rows


def rnn_rows(r: dict) -> list[dict]:
    rows = []
    s = r["stats"]
    for name in ("forward", "forward+backward"):
        fg_t = s["funcgrad"][name]["median_s"]
        jax_t = s.get("jax", {}).get(name, {}).get("median_s")
        rows.append({"workload": f"RNN scan {name}, T={r['shape']['T']:,}, B={r['shape']['B']}, H={r['shape']['H']}",
                     "funcgrad": _stat(s["funcgrad"][name]),
                     "JAX": _stat(s["jax"][name]) if "jax" in s else r["missing"].get("jax", ""),
                     "PyTorch": _stat(s["pytorch"][name]) + " (eager)" if "pytorch" in s
                     else r["missing"].get("pytorch", ""),
                     "funcgrad / JAX": _ratio(fg_t, jax_t)})
    return rows


def while_rows(r: dict) -> list[dict]:
    rows = []
    ck = f"checkpoints={r['checkpoints']}"
    for row in r["rows"]:
        a, b = row["every carry"], row[ck]
        rows.append({"steps": f"{row['steps']:,}",
                     "every carry": f"{fmt_time(a['median_s'])} ±{a['spread']:.0%}, {a['peak_bytes'] / 2**20:.1f} MiB "
                                    f"({a['peak_carries']:,.0f} carries)",
                     ck: f"{fmt_time(b['median_s'])} ±{b['spread']:.0%}, {b['peak_bytes'] / 2**20:.1f} MiB "
                         f"({b['peak_carries']:,.0f} carries)",
                     "time, checkpointed / every carry": _ratio(b["median_s"], a["median_s"])})
    return rows


FLOW_COLUMNS = ["workload", "funcgrad", "JAX", "PyTorch", "funcgrad / JAX"]


def while_columns(w: dict) -> list[str]:
    return ["steps", "every carry", f"checkpoints={w['checkpoints']}", "time, checkpointed / every carry"]


def report(payload: dict, record: Record) -> None:
    """The tables, and every timed call as a measurement."""
    record.table("loops", "lax loops under jit (each peer in its own process; interleaved medians ± spread; "
                 "first calls in fresh processes)", fori_rows(payload["fori"]) + rnn_rows(payload["rnn"]),
                 FLOW_COLUMNS)
    fori, rnn, w = payload["fori"], payload["rnn"], payload["while"]
    record.measure(f"jit(fori_loop), {fori['run_trip_count']:,} iterations", {p: {"fori": s} for p, s in
                                                                             fori["run"].items()}, baseline="jax")
    for n, by_label in fori["first_call_s"].items():
        record.measure(f"jit(fori_loop) first call, {n} iterations",
                       {k: {"first call": summarize(v)} for k, v in by_label.items() if v})
    for name in ("forward", "forward+backward"):
        record.measure(f"RNN scan {name}", {p: {name: s[name]} for p, s in rnn["stats"].items()},
                       baseline=f"jax/{name}")
    if "rows" in w:
        record.table("while", f"jit(grad) through while_loop, carry {w['carry']} (funcgrad only; JAX refuses)",
                     while_rows(w), while_columns(w))
        for row in w["rows"]:
            for label, s in row.items():
                if isinstance(s, dict):
                    record.measure(f"grad through while_loop, {row['steps']} steps", {"funcgrad": {label: s}})


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    args = arguments(NAME, __doc__).parse_args(argv)
    if args.worker:
        peer, case, arg = args.worker
        worker(BUILDERS, MODULES, peer, case, json.loads(arg))
        return
    record = Record(NAME, args)
    quick = args.quick
    if quick:                                    # a short RNN; the workers read it from the environment
        os.environ["FUNCGRAD_BENCH_RNN_T"] = RNN_QUICK_T
        RNN["T"] = int(RNN_QUICK_T)
    names = chosen(list(MODULES), args)
    rounds = 2 if quick else 9
    print("fori_loop: first calls in fresh processes, then time per iteration ...", flush=True)
    fori = measure_fori([100] if quick else [100, 1000, 10000], repeats=0 if quick else 3, rounds=rounds,
                        names=names)
    print("RNN scan ...", flush=True)
    rnn = measure_rnn(rounds, names, record)
    print("reverse mode through while_loop ...", flush=True)
    loops = measure_while([100, 300] if quick else [1000, 10000], rounds=rounds)
    payload = record.payload
    payload.update({"fori": fori, "rnn": rnn, "while": loops})
    report(payload, record)
    record.write(json_path(NAME, args))


if __name__ == "__main__":
    main()
