"""Run under ``mpiexec -n 2``: every collective across the processes against numpy, eagerly and under jit,
gradients through them, and a data-parallel training step that must equal its vmap simulation.

Each rank writes one JSON line ``{"rank": r, "checks": n, "failures": [...]}`` to ``rank<r>.jsonl`` in
the folder given as the first argument (the current folder without one); the exit status is 0 only
when every check passed on this rank.
"""
from __future__ import annotations

import json
import pathlib
import sys
import traceback

import numpy as np

import funcgrad as fg
import funcgrad.distributed as dist
import funcgrad.numpy as fnp

dist.initialize(timeout=20)
RANK, SIZE = dist.process_index(), dist.process_count()
checks: list[str] = []
failures: list[str] = []


def check(name: str, actual, expected, rtol: float = 1e-6) -> None:
    checks.append(name)
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape or (actual.dtype.kind != expected.dtype.kind and expected.dtype.kind != "O"):
        failures.append(f"{name}: got {actual.dtype}{actual.shape}, expected {expected.dtype}{expected.shape}")
    elif not np.allclose(actual, expected, rtol=rtol, atol=rtol):
        failures.append(f"{name}: got {actual.tolist()}, expected {expected.tolist()}")


def local(r: int, dtype, shape=(4, 3)) -> np.ndarray:
    """Rank ``r``'s operand: the same formula on every rank, so each can compute the others'."""
    v = np.arange(np.prod(shape)).reshape(shape) * (r + 1) + 3 * r
    if np.dtype(dtype).kind == "b":
        return (v % 3 == 0)
    if np.dtype(dtype).kind == "c":
        return (v + 1j * (v % 5 - r)).astype(dtype)
    return v.astype(dtype)


def run_checks(tag: str, wrap) -> None:
    for dtype in (np.float32, np.int32, np.complex64, np.bool_):
        xs = [local(r, dtype) for r in range(SIZE)]
        mine = fnp.asarray(xs[RANK])
        name = f"{tag}/{np.dtype(dtype).name}"
        psum_expected = np.sum(np.stack(xs), axis=0)
        check(f"{name}/psum", wrap(dist.psum)(mine), psum_expected)
        check(f"{name}/all_gather", wrap(dist.all_gather)(mine), np.stack(xs))
        check(f"{name}/all_gather_tiled_axis1", wrap(lambda x: dist.all_gather(x, axis=1, tiled=True))(mine),
              np.concatenate(xs, axis=1))
        perm = [(r, (r + 1) % SIZE) for r in range(SIZE)]
        check(f"{name}/ppermute", wrap(lambda x: dist.ppermute(x, perm))(mine), xs[(RANK - 1) % SIZE])
        check(f"{name}/broadcast", wrap(lambda x: dist.broadcast(x, root=SIZE - 1))(mine), xs[SIZE - 1])
        # chunk RANK of every rank's operand, concatenated in rank order
        rows = mine.shape[0] // SIZE
        check(f"{name}/all_to_all_tiled", wrap(lambda x: dist.all_to_all(x, 0, 1, tiled=True))(mine),
              np.concatenate([x[RANK * rows:(RANK + 1) * rows] for x in xs], axis=1))
        if dtype != np.complex64:
            check(f"{name}/pmax", wrap(dist.pmax)(mine), np.max(np.stack(xs), axis=0))
            check(f"{name}/pmin", wrap(dist.pmin)(mine), np.min(np.stack(xs), axis=0))
        if dtype != np.bool_:
            check(f"{name}/psum_scatter_tiled", wrap(lambda x: dist.psum_scatter(x, tiled=True))(mine),
                  psum_expected[RANK * rows:(RANK + 1) * rows])
            check(f"{name}/pmean", wrap(dist.pmean)(mine), np.mean(np.stack(xs), axis=0))
    square = [local(r, np.float32, (SIZE, 3)) for r in range(SIZE)]
    check(f"{tag}/psum_scatter", wrap(dist.psum_scatter)(fnp.asarray(square[RANK])), np.sum(square, axis=0)[RANK])
    check(f"{tag}/all_to_all", wrap(lambda x: dist.all_to_all(x, 0, 0))(fnp.asarray(square[RANK])),
          np.stack([s[RANK] for s in square]))
    tree = {"a": fnp.ones(2) * RANK, "b": (fnp.arange(3.0),)}
    out = wrap(dist.psum)(tree)
    check(f"{tag}/pytree_a", out["a"], np.ones(2) * sum(range(SIZE)))
    check(f"{tag}/pytree_b", out["b"][0], np.arange(3.0) * SIZE)
    check(f"{tag}/axis_index", wrap(lambda x: dist.axis_index() + 0 * x)(fnp.zeros((), np.int32)), RANK)


def wide_dtype_checks() -> None:
    fg.config.update("enable_x64", True)
    try:
        for dtype in (np.float64, np.int64, np.complex128, np.float16):
            xs = [local(r, dtype) for r in range(SIZE)]
            mine = fnp.asarray(xs[RANK])
            name = f"x64/{np.dtype(dtype).name}"
            check(f"{name}/psum", dist.psum(mine), np.sum(np.stack(xs), axis=0).astype(dtype))
            check(f"{name}/jit psum", fg.jit(dist.psum)(mine), np.sum(np.stack(xs), axis=0).astype(dtype))
            check(f"{name}/all_gather", dist.all_gather(mine), np.stack(xs))
            check(f"{name}/ppermute", dist.ppermute(mine, [(0, 1), (1, 0)]), xs[1 - RANK])
    finally:
        fg.config.update("enable_x64", False)


def gradient_checks() -> None:
    x = fnp.asarray(local(RANK, np.float32, (3,)))
    loss = lambda x: dist.psum(x * x).sum()                                    # noqa: E731
    check("grad/psum is 2x (per-process convention)", fg.grad(loss)(x), 2 * np.asarray(x))
    check("grad/psum jit", fg.jit(fg.grad(loss))(x), 2 * np.asarray(x))
    check("grad/pmean", fg.grad(lambda x: dist.pmean(x * x).sum())(x), 2 * np.asarray(x) / SIZE)
    # all_gather's transpose is psum_scatter: every process's weights for my slot, summed
    ws = [np.arange(SIZE * 3).reshape(SIZE, 3) + r for r in range(SIZE)]
    g = fg.grad(lambda x: (dist.all_gather(x) * ws[RANK]).sum())(x)
    check("grad/all_gather", g, sum(w[RANK] for w in ws).astype(np.float32))
    g2 = fg.grad(lambda x: fg.grad(lambda y: dist.psum(y ** 3).sum())(x).sum())(x)
    check("grad/second order", g2, 6 * np.asarray(x))
    _, t = fg.jvp(lambda x: dist.psum(x * x), (x,), (fnp.ones(3),))
    check("jvp/psum", t, sum(2 * local(r, np.float32, (3,)) for r in range(SIZE)))


def training_step_equals_vmap() -> None:
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((SIZE, 8, 3)).astype(np.float32)   # every rank draws the same data
    ys = rng.standard_normal((SIZE, 8)).astype(np.float32)
    w0 = fnp.asarray(np.array([0.5, -0.2, 0.1], np.float32))

    def step(w, x, y):
        g = fg.grad(lambda w: fnp.mean((x @ w - y) ** 2))(w)
        g = dist.pmean(g)
        return w - 0.1 * g, dist.psum(fnp.mean((x @ w - y) ** 2))

    w_mpi, loss_mpi = fg.jit(step)(w0, fnp.asarray(xs[RANK]), fnp.asarray(ys[RANK]))
    w_sim, loss_sim = fg.vmap(step, in_axes=(None, 0, 0), axis_name=dist.PROCESS_AXIS)(w0, xs, ys)
    check("train/params equal vmap simulation", w_mpi, np.asarray(w_sim)[RANK], rtol=1e-5)
    check("train/loss equal vmap simulation", loss_mpi, np.asarray(loss_sim)[RANK], rtol=1e-5)
    full = fg.grad(lambda w: fnp.mean((fnp.asarray(xs.reshape(-1, 3)) @ w - ys.reshape(-1)) ** 2))(w0)
    check("train/params equal full-batch step", w_mpi, np.asarray(w0) - 0.1 * np.asarray(full), rtol=1e-5)


def main() -> int:
    try:
        dist.barrier()
        run_checks("eager", lambda f: f)
        run_checks("jit", fg.jit)
        wide_dtype_checks()
        gradient_checks()
        training_step_equals_vmap()
        fg.config.update("distributed_debug", True)
        run_checks("debug", lambda f: f)     # the handshake on every call agrees when the ranks agree
    except Exception:   # noqa: BLE001 -- reported as a failure of this rank
        failures.append(traceback.format_exc())
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".") / f"rank{RANK}.jsonl"
    out.write_text(json.dumps({"rank": RANK, "size": SIZE, "checks": len(checks), "failures": failures}) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
