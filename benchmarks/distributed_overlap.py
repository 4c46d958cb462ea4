"""What overlapping the gradient all-reduce with the backward pass saves, per training step.

    mpiexec -n 2 python benchmarks/distributed_overlap.py            # MLP 784-1024-1024-1024-10, batch 128
    mpiexec -n 2 python benchmarks/distributed_overlap.py --hidden 512 --bucket-mb 1

Times one jitted data-parallel step (Adam) in four ways, interleaved round-robin with a barrier
before each timing so that every process runs the same candidate at the same time:

* ``overlap``: each bucket's ``Iallreduce`` starts as soon as its gradients are final, awaited
  before the update (``data_parallel(..., overlap=True)``);
* ``after``: the same buckets all-reduced after the backward pass (``overlap=False``);
* ``no-comm``: the same step on this process's rows with no communication (a lower bound);
* ``allreduce-only``: a blocking all-reduce of the gradients' bytes alone (what there is to hide).

Prints a table of medians (wall and CPU seconds per step) and writes JSON (default
``benchmarks/results/distributed_overlap.json``). Timing is noisy on shared machines: compare
the ratios measured in one run.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

if any(os.environ.get(v, "1").isdigit() and int(os.environ.get(v, "1")) > 1
       for v in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE")):
    os.environ.setdefault("OMP_NUM_THREADS", "1")   # one BLAS thread per process (before numpy loads BLAS)

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import environment  # noqa: E402

import funcgrad as fg  # noqa: E402
import funcgrad.distributed as dist  # noqa: E402
import funcgrad.nn as nn  # noqa: E402
from funcgrad import optim, random  # noqa: E402


def build(hidden: int, layers: int):
    parts = []
    for _ in range(layers):
        parts += [nn.Linear(hidden), nn.ReLU()]
    model = nn.Sequential(*parts, nn.Linear(10))
    params, _ = model.init(random.key(0), (-1, 784))

    def loss_fn(p, x, y):
        return nn.cross_entropy(model.apply(p, x), y)

    return loss_fn, params


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--batch", type=int, default=128, help="global batch")
    ap.add_argument("--bucket-mb", type=float, default=4.0)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--json", default="benchmarks/results/distributed_overlap.json")
    args = ap.parse_args(argv)

    dist.initialize()
    rank, size = dist.process_index(), dist.process_count()
    comm = dist._runtime.comm()
    loss_fn, params0 = build(args.hidden, args.layers)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.batch, 784)).astype(np.float32)
    y = rng.integers(0, 10, size=args.batch).astype(np.int32)
    opt = optim.adam(1e-3)

    states = {}
    for name, overlap in (("overlap", True), ("after", False)):
        trainer = dist.data_parallel(loss_fn, opt, bucket_mb=args.bucket_mb, overlap=overlap)
        states[name] = [trainer, *trainer.init(params0)]

    @fg.jit
    def local_step(p, s, xl, yl):
        g = fg.grad(loss_fn)(p, xl, yl)
        u, s = opt.update(g, s, p)
        return optim.apply_updates(p, u), s

    xl, yl = dist.shard_batch((x, y))
    local = [params0, opt.init(params0)]
    n_params = sum(int(np.size(a)) for a in fg.tree_util.tree_leaves(params0))
    grad_bytes = np.zeros(n_params, np.float32)

    def run(name):
        if name == "no-comm":
            local[0], local[1] = local_step(local[0], local[1], xl, yl)
            np.asarray(fg.tree_util.tree_leaves(local[0])[0])
        elif name == "allreduce-only":
            if comm is not None:
                from mpi4py import MPI
                comm.Allreduce(MPI.IN_PLACE, grad_bytes, op=MPI.SUM)
        else:
            st = states[name]
            st[1], st[2], loss = st[0].step(st[1], st[2], x, y)
            float(loss)

    names = ["overlap", "after", "no-comm", "allreduce-only"]
    for name in names:      # compile and warm up
        for _ in range(2):
            run(name)
    wall = {n: [] for n in names}
    cpu = {n: [] for n in names}
    for _ in range(args.repeats):
        for name in names:
            dist.barrier()
            t0, c0 = time.perf_counter(), time.process_time()
            run(name)
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    # Every process's medians; the step is as slow as its slowest process.
    mine = {n: (statistics.median(wall[n]), statistics.median(cpu[n])) for n in names}
    everyone = comm.gather(mine, root=0) if comm is not None else [mine]
    if rank != 0:
        return {}
    result = {n: {"wall_median_s": max(r[n][0] for r in everyone), "cpu_median_s": max(r[n][1] for r in everyone)}
              for n in names}
    base = result["after"]["wall_median_s"]
    print(f"{size} processes, MLP 784-{'-'.join([str(args.hidden)] * args.layers)}-10 ({n_params:,} parameters, "
          f"{n_params * 4 / 2 ** 20:.1f} MB of gradients), global batch {args.batch}, buckets of {args.bucket_mb:g} MB "
          f"({len(states['overlap'][0].buckets)}), {args.repeats} interleaved rounds; medians, slowest process")
    print(f"{'step':<16}{'wall ms':>10}{'cpu ms':>10}{'vs after':>10}")
    for n in names:
        r = result[n]
        print(f"{n:<16}{r['wall_median_s'] * 1e3:>10.2f}{r['cpu_median_s'] * 1e3:>10.2f}"
              f"{r['wall_median_s'] / base:>10.2f}")
    record = {"benchmark": "distributed_overlap", "processes": size, "hidden": args.hidden, "layers": args.layers,
              "batch": args.batch, "bucket_mb": args.bucket_mb, "parameters": n_params,
              "buckets": len(states["overlap"][0].buckets), "repeats": args.repeats, "results": result,
              "environment": environment()}
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2))
    print(f"wrote {path}")
    return record


if __name__ == "__main__":
    main()
