"""Where the time of an MLP training step goes: fg.profiler tables of the jitted and eager step.

Batch 128, 784-512-512-10, ReLU, softmax cross-entropy, SGD (the step of
``mlp_step.py``).  Each step is warmed up (compiled, kernels loaded) outside
the profile, then profiled over ``--steps`` steps; the tables show the GEMMs,
the fused kernels and everything above them (dispatch, the run loop,
eager bookkeeping).  Times are host wall-clock times.

    python benchmarks/profile_mlp_step.py [--steps 20] [--limit 25] [--trace DIR]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

import funcgrad as fg  # noqa: E402
from funcgrad.compiler import codegen  # noqa: E402
from dispatch import B, SIZES, mlp_params  # noqa: E402
from mlp_step import funcgrad_step  # noqa: E402


def profile_step(step, params, x, y, steps: int):
    """Profile ``steps`` calls of ``step`` (after two warm-up calls); also the CPU time they took."""
    for _ in range(2):
        step(params, x, y)
    codegen.wait_for_kernels()   # exact groups run on numpy until their kernels are ready
    cpu = time.process_time()
    with fg.profiler.profile() as prof:
        p = params
        for _ in range(steps):
            p = step(p, x, y)
        fg.block_until_ready(p)
    return prof, time.process_time() - cpu


def summary(name: str, prof, cpu_s: float, steps: int) -> str:
    rows = prof.stats()
    wall = prof.wall_time
    by_cat: dict[str, float] = {}
    for r in rows:
        by_cat[r["category"]] = by_cat.get(r["category"], 0.0) + r["self_us"]
    gemm = sum(r["self_us"] for r in rows if r["name"] in ("matmul", "matmul_update"))
    by_cat["between events"] = wall * 1e6 - sum(by_cat.values())
    parts = ", ".join(f"{cat} {us / steps / 1e3:.3f} ms" for cat, us in sorted(by_cat.items(), key=lambda kv: -kv[1]))
    return (f"{name}: {wall / steps * 1e3:.3f} ms/step wall ({cpu_s / steps * 1e3:.3f} ms/step CPU); "
            f"matmul {gemm / steps / 1e3:.3f} ms/step ({100 * gemm / 1e6 / wall:.0f}% of wall); "
            f"self time per step: {parts}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--limit", type=int, default=25)
    parser.add_argument("--trace", help="write jit_step.json and eager_step.json (Chrome trace) in this folder")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    params = {k: fg.numpy.asarray(v) for k, v in mlp_params(rng).items()}
    x = fg.numpy.asarray(rng.standard_normal((B, SIZES[0])).astype(np.float32))
    y = fg.numpy.asarray(rng.integers(0, SIZES[-1], B).astype(np.int32))
    step = funcgrad_step()
    print(f"MLP step B={B}, {'-'.join(map(str, SIZES))}, {args.steps} profiled steps, "
          f"{fg.get_num_threads()} BLAS/kernel threads\n")
    for name, fn in (("jit", fg.jit(step)), ("eager", step)):
        prof, cpu_s = profile_step(fn, params, x, y, args.steps)
        print(f"== {name} step ==")
        print(prof.table(sort_by="self", limit=args.limit))
        print(summary(name, prof, cpu_s, args.steps) + "\n")
        if args.trace:
            os.makedirs(args.trace, exist_ok=True)
            prof.export_chrome_trace(os.path.join(args.trace, f"{name}_step.json"))


if __name__ == "__main__":
    main()
