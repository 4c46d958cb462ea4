"""Compile time of jitted training steps: cold (empty kernel caches) and warm (kernels on disk).

Each run is a new process with its own cache directories (``FUNCGRAD_CACHE_DIR`` and
``NUMBA_CACHE_DIR``): *cold* starts them empty, *warm* is a second process on the same
directories.  Per run: the import, the first call (tracing, passes, every compile that
happens before it returns), the time to the 20th call, and -- funcgrad compiling some
kernels on a background thread while their groups run on numpy -- the time until every
kernel is ready.  Wall and process CPU time (all threads) are reported: CPU time is the
steadier on a shared machine.  JAX runs the same steps in its own processes when it is
importable by ``--jax-python`` (default: this interpreter).

    python benchmarks/compile_time.py [--runs 3] [--cases mlp cnn] [--modes exact off] [--json PATH]

Cases: ``mlp`` (batch 128, 784-512-512-10, ReLU, softmax cross-entropy, SGD) and ``cnn``
(batch 32, conv 1->8 3x3, ReLU, 2x2 max pool, dense 1568->10, SGD).  Modes: funcgrad's
``FUNCGRAD_JIT_BACKGROUND_COMPILE`` (``exact``, the default; ``off``: every kernel before
the first run; ``all``).  A last table measures the floor under a warm first call alone:
numba's import, and the first call of one tiny cached kernel loaded as numba does (its
target context refreshed first) and as funcgrad does (only numba's runtime started).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from _harness import fmt_time, print_table, write_json  # noqa: E402

STEPS = 20
LR = 0.05


def _data(case: str):
    import numpy as np
    rng = np.random.default_rng(0)
    if case == "mlp":
        sizes = (784, 512, 512, 10)
        params = {}
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:]), 1):
            params[f"w{i}"] = (rng.standard_normal((n_in, n_out)) * np.sqrt(2.0 / n_in)).astype(np.float32)
            params[f"b{i}"] = np.zeros(n_out, np.float32)
        x = rng.standard_normal((128, 784)).astype(np.float32)
        y = rng.integers(0, 10, 128).astype(np.int32)
    else:
        params = {"wc": (rng.standard_normal((8, 1, 3, 3)) * 0.3).astype(np.float32),
                  "bc": np.zeros(8, np.float32),
                  "wd": (rng.standard_normal((8 * 14 * 14, 10)) * 0.03).astype(np.float32),
                  "bd": np.zeros(10, np.float32)}
        x = rng.standard_normal((32, 1, 28, 28)).astype(np.float32)
        y = rng.integers(0, 10, 32).astype(np.int32)
    return params, x, y


def _funcgrad_step(case: str):
    import funcgrad as fg
    import funcgrad.nn as nn

    if case == "mlp":
        def loss(p, x, y):
            h = nn.relu(x @ p["w1"] + p["b1"])
            h = nn.relu(h @ p["w2"] + p["b2"])
            return nn.cross_entropy(h @ p["w3"] + p["b3"], y)
    else:
        def loss(p, x, y):
            h = nn.relu(nn.conv2d(x, p["wc"], padding=1) + p["bc"][:, None, None])
            h = nn.max_pool2d(h, 2)
            return nn.cross_entropy(h.reshape(h.shape[0], -1) @ p["wd"] + p["bd"], y)

    def step(p, x, y):
        g = fg.grad(loss)(p, x, y)
        return fg.tree_util.tree_map(lambda w, gw: w - LR * gw, p, g)
    return fg.jit(step), lambda: __import__("funcgrad.compiler.codegen", fromlist=["x"]).wait_for_kernels()


def _jax_step(case: str):
    import jax
    import jax.numpy as jnp

    def xent(logits, y):
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

    if case == "mlp":
        def loss(p, x, y):
            h = jax.nn.relu(x @ p["w1"] + p["b1"])
            h = jax.nn.relu(h @ p["w2"] + p["b2"])
            return xent(h @ p["w3"] + p["b3"], y)
    else:
        def loss(p, x, y):
            h = jax.lax.conv_general_dilated(x, p["wc"], (1, 1), ((1, 1), (1, 1)))
            h = jax.nn.relu(h + p["bc"][:, None, None])
            h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
            return xent(h.reshape(h.shape[0], -1) @ p["wd"] + p["bd"], y)

    @jax.jit
    def step(p, x, y):
        g = jax.grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda w, gw: w - LR * gw, p, g)
    return (lambda p, x, y: jax.block_until_ready(step(p, x, y))), (lambda: True)


def child(peer: str, case: str) -> dict:
    """One process's measurements (run with fresh or warm cache directories by the parent)."""
    w0, c0 = time.perf_counter(), time.process_time()
    try:
        step, wait = (_funcgrad_step if peer == "funcgrad" else _jax_step)(case)
    except ImportError as e:
        return {"missing": str(e)}
    params, x, y = _data(case)
    out = {"import_s": time.perf_counter() - w0, "import_cpu_s": time.process_time() - c0}
    w1, c1, t1 = time.perf_counter(), time.process_time(), time.thread_time()
    p = step(params, x, y)
    out.update(first_call_s=time.perf_counter() - w1, first_call_cpu_s=time.process_time() - c1,
               first_call_thread_cpu_s=time.thread_time() - t1)
    for _ in range(STEPS - 1):
        p = step(p, x, y)
    out.update(to_step20_s=time.perf_counter() - w1, to_step20_cpu_s=time.process_time() - c1)
    wait()
    out.update(all_ready_s=time.perf_counter() - w1, all_ready_cpu_s=time.process_time() - c1)
    times = []
    for _ in range(STEPS):
        t = time.perf_counter()
        p = step(p, x, y)
        times.append(time.perf_counter() - t)
    out["step_s"] = statistics.median(times)
    return out


# The floor under a warm first call: numba's own start-up, measured with one tiny cached kernel.
_FLOOR_SOURCE = """import numba
import numpy as np


@numba.njit(cache=True)
def kernel(n, a, o):
    for i in range(n):
        o[i] = a[i] * np.float32(2)
"""


def floor_child(mode: str) -> dict:
    """``import``: numba's import alone (after numpy's).  ``numba``/``funcgrad``: in a funcgrad
    process, the first call of a kernel whose machine code is on disk, loaded as numba does (its
    target context refreshed first) or as funcgrad does (only numba's runtime started)."""
    import numpy as np
    if mode == "import":
        c0 = time.process_time()
        __import__("numba")
        return {"cpu_s": time.process_time() - c0}
    import hashlib
    from funcgrad.compiler import kernel_cache
    kernel_cache.LIGHT_LOAD = mode == "funcgrad"
    kernel = kernel_cache.load_kernel(hashlib.sha256(_FLOOR_SOURCE.encode()).hexdigest()[:24], _FLOOR_SOURCE)
    a = np.ones(8, np.float32)
    o = np.empty_like(a)
    c0 = time.process_time()
    kernel(8, a, o)
    return {"cpu_s": time.process_time() - c0}


def measure_floor(runs: int) -> dict:
    """Medians over ``runs`` of fresh processes (each pair of loads on a cache filled just before)."""
    samples: dict[str, list[float]] = {"import": [], "numba": [], "funcgrad": []}
    for _ in range(runs):
        root = tempfile.mkdtemp(prefix="compile-time-floor-")
        env = dict(os.environ, FUNCGRAD_CACHE_DIR=os.path.join(root, "funcgrad"),
                   NUMBA_CACHE_DIR=os.path.join(root, "numba"), PYTHONPATH=REPO)
        try:
            _run(sys.executable, ["--floor", "numba"], env)   # compiles the kernel: the cache is filled
            for mode in samples:
                samples[mode].append(_run(sys.executable, ["--floor", mode], env)["cpu_s"])
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return {mode: statistics.median(xs) for mode, xs in samples.items()}


def _run(python: str, argv: list, env: dict) -> dict:
    proc = subprocess.run([python, os.path.abspath(__file__), *argv], env=env, capture_output=True, text=True,
                          timeout=900)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(argv)} child failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _run_child(python: str, peer: str, case: str, env: dict) -> dict:
    proc = subprocess.run([python, os.path.abspath(__file__), "--child", peer, case], env=env,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode:
        if peer != "funcgrad" and "ModuleNotFoundError" in proc.stderr:
            return {"missing": proc.stderr.strip().splitlines()[-1]}
        raise RuntimeError(f"{peer} {case} child failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(python: str, peer: str, case: str, mode: str | None, runs: int) -> dict:
    """Medians over ``runs`` pairs of processes: cold (empty caches), then warm (the same caches)."""
    samples: dict[str, list[dict]] = {"cold": [], "warm": []}
    for _ in range(runs):
        root = tempfile.mkdtemp(prefix="compile-time-")
        env = dict(os.environ, FUNCGRAD_CACHE_DIR=os.path.join(root, "funcgrad"),
                   NUMBA_CACHE_DIR=os.path.join(root, "numba"), PYTHONPATH=REPO)
        if mode is not None:
            env["FUNCGRAD_JIT_BACKGROUND_COMPILE"] = mode
        if peer == "jax":
            env["JAX_COMPILATION_CACHE_DIR"] = os.path.join(root, "jax")
            env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
            env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
        try:
            for label in ("cold", "warm"):
                result = _run_child(python, peer, case, env)
                if "missing" in result:
                    return result
                samples[label].append(result)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return {label: {key: statistics.median(r[key] for r in rs) for key in rs[0]} | {"runs": len(rs)}
            for label, rs in samples.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", nargs=2, metavar=("PEER", "CASE"), help=argparse.SUPPRESS)
    ap.add_argument("--floor", choices=["import", "numba", "funcgrad"], help=argparse.SUPPRESS)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cases", nargs="+", choices=["mlp", "cnn"], default=["mlp", "cnn"])
    ap.add_argument("--modes", nargs="+", choices=["exact", "all", "off"], default=["exact", "off"])
    ap.add_argument("--jax-python", default=sys.executable, help="interpreter with jax installed")
    ap.add_argument("--json", default=os.path.join(HERE, "results", "compile_time.json"))
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    if args.floor:
        print(json.dumps(floor_child(args.floor)))
        return
    results: dict = {}
    rows = []
    for case in args.cases:
        runs = [("funcgrad", mode, sys.executable) for mode in args.modes] + [("jax", None, args.jax_python)]
        for peer, mode, python in runs:
            name = peer if mode is None else f"{peer} ({mode})"
            r = measure(python, peer, case, mode, args.runs)
            results.setdefault(case, {})[name] = r
            if "missing" in r:
                rows.append({"case": case, "implementation": name, "cache": "-", "first call": "missing"})
                continue
            for label in ("cold", "warm"):
                m = r[label]
                rows.append({"case": case, "implementation": name, "cache": label,
                             "first call": fmt_time(m["first_call_s"]),
                             "first call CPU": fmt_time(m["first_call_cpu_s"]),
                             "its thread's CPU": fmt_time(m["first_call_thread_cpu_s"]),
                             f"to call {STEPS}": fmt_time(m["to_step20_s"]),
                             "all kernels ready": fmt_time(m["all_ready_s"]),
                             "CPU until ready": fmt_time(m["all_ready_cpu_s"]),
                             "step after": fmt_time(m["step_s"])})
    print_table(f"Compile time of jitted training steps (fresh processes, medians of {args.runs})", rows,
                ["case", "implementation", "cache", "first call", "first call CPU", "its thread's CPU",
                 f"to call {STEPS}",
                 "all kernels ready", "CPU until ready", "step after"])
    floor = measure_floor(args.runs)
    print_table(f"numba's start-up under a warm first call (fresh processes, CPU time, medians of {args.runs})",
                [{"what": "import numba (after numpy)", "CPU": fmt_time(floor["import"])},
                 {"what": "first call of one cached kernel, loaded as numba does (target context refreshed)",
                  "CPU": fmt_time(floor["numba"])},
                 {"what": "first call of one cached kernel, loaded as funcgrad does (runtime started alone)",
                  "CPU": fmt_time(floor["funcgrad"])}], ["what", "CPU"])
    write_json(args.json, {"benchmark": "compile_time", "steps": STEPS, "results": results, "numba_floor_cpu_s": floor,
                           "notes": "seconds; *_cpu_s: process CPU time of all threads (a background compile "
                                    "included); first_call_thread_cpu_s: the calling thread's; first_call: "
                                    "tracing, passes and every compile before the first call returns"})


if __name__ == "__main__":
    main()
