"""Run every benchmark, each in fresh processes, and write their JSON into one folder.

    python benchmarks/run_all.py             # everything, full size, with the sweeps (about an hour on 2 cores)
    python benchmarks/run_all.py --quick     # a smoke run of each: tiny sizes, 2 rounds (about a minute)
    python benchmarks/run_all.py --only mlp_step,kernels --no-sweeps
    python benchmarks/run_all.py --gpu       # the GPU benchmarks (an NVIDIA GPU with CuPy; about 5 minutes)

Then ``python benchmarks/render.py`` turns the JSON in ``benchmarks/results/`` into the tables of
docs/benchmarks.md and the README, and the plots in docs/img/. A smoke run writes into
``benchmarks/results/quick/`` (or ``--out``), which render.py does not read: its numbers are no
measurements. Peers that are not installed are reported as missing; a benchmark that fails makes the
run exit with status 1 after the others ran.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _harness import QUICK_RESULTS, RESULTS, print_table  # noqa: E402

# (script, extra arguments, the JSON it writes); a sweep is its script with --sweep
BENCHMARKS = [
    ("dispatch", [], "dispatch"),
    ("mlp_step", [], "mlp_step"),
    ("batched_contractions", [], "batched_contractions"),
    ("control_flow", [], "control_flow"),
    ("kernels", [], "kernels"),
    ("mnist_epoch", [], "mnist_epoch"),
    ("conv_layers", [], "conv_layers"),
    ("attention", [], "attention"),
    ("attention_tiles", [], "attention_tiles"),
    ("mlp_step", ["--sweep"], "mlp_step_sweep"),
    ("mnist_epoch", ["--sweep"], "mnist_epoch_sweep"),
    ("attention", ["--sweep"], "attention_sweep"),
]
# Need an NVIDIA GPU (CuPy; PyTorch and JAX with CUDA for the peers): run with --gpu.
GPU_BENCHMARKS = [
    ("gpu_attention", [], "gpu_attention"),
    ("gpu_attention", ["--tune"], "gpu_attention_tune"),
    ("gpu_step", [], "gpu_step"),
    ("gpu_kernels", [], "gpu_kernels"),
    ("gpu_conv", [], "gpu_conv"),
]


def selected(only: str | None, sweeps: bool, gpu: bool = False) -> list[tuple]:
    out = [b for b in (GPU_BENCHMARKS if gpu else BENCHMARKS) if sweeps or "--sweep" not in b[1]]
    if only:
        names = only.split(",")
        out = [b for b in out if b[0] in names or b[2] in names]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run of each benchmark (tiny sizes, 2 rounds)")
    ap.add_argument("--out", default=None, help="folder for the JSON (default benchmarks/results, or "
                                                 "benchmarks/results/quick with --quick)")
    ap.add_argument("--only", default=None, help="comma-separated benchmark names")
    ap.add_argument("--no-sweeps", action="store_true", help="leave out the --sweep runs")
    ap.add_argument("--gpu", action="store_true", help="the GPU benchmarks instead (need an NVIDIA GPU and CuPy)")
    ap.add_argument("--peers", default=None, help="comma-separated peers to run (default: all installed)")
    args = ap.parse_args(argv)
    out = args.out or (QUICK_RESULTS if args.quick else RESULTS)
    rows, failed = [], []
    start = time.perf_counter()
    for script, extra, name in selected(args.only, not args.no_sweeps, args.gpu):
        cmd = [sys.executable, os.path.join(HERE, f"{script}.py"), *extra, "--out", out]
        cmd += ["--quick"] if args.quick else []
        cmd += ["--peers", args.peers] if args.peers else []
        print(f"\n=== {name}: {' '.join(cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        code = subprocess.call(cmd)
        seconds = time.perf_counter() - t0
        rows.append({"benchmark": name, "seconds": f"{seconds:.1f}", "status": "ok" if code == 0 else
                     f"failed ({code})", "json": os.path.join(out, f"{name}.json")})
        if code:
            failed.append(name)
    print_table(f"run_all{' --quick' if args.quick else ''}: {time.perf_counter() - start:.0f} s", rows,
                ["benchmark", "seconds", "status", "json"])
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
