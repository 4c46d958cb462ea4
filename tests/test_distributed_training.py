"""Data-parallel training and ZeRO-1 (funcgrad.distributed.data_parallel / zero).

In-process tests run in a one-process world; two launches of ``mpiexec -n 2`` check the real
thing (tests/mpi/training_steps.py, and the distributed MNIST example's --quick run).
"""
from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.distributed as dist
import funcgrad.numpy as fnp
from funcgrad import optim
from funcgrad.primitives import collectives_async

ROOT = pathlib.Path(__file__).resolve().parents[1]


def loss_fn(p, x, y):
    h = fnp.tanh(x @ p["w1"] + p["b1"])
    return fnp.mean((h @ p["w2"] - y) ** 2)


def make_params(seed=0):
    rng = np.random.default_rng(seed)
    return {"w1": fnp.asarray(rng.normal(size=(4, 8)).astype(np.float32)),
            "b1": fnp.asarray(rng.normal(size=(8,)).astype(np.float32) * 0.1),
            "w2": fnp.asarray(rng.normal(size=(8, 2)).astype(np.float32))}


def batch(n=6, seed=1):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 4)).astype(np.float32), rng.normal(size=(n, 2)).astype(np.float32)


def plain_steps(opt, params, x, y, steps):
    state = opt.init(params)
    for _ in range(steps):
        updates, state = opt.update(fg.grad(loss_fn)(params, x, y), state, params)
        params = optim.apply_updates(params, updates)
    return params


def assert_trees_close(a, b, tol=1e-6):
    for k in a:
        np.testing.assert_allclose(np.asarray(a[k]), np.asarray(b[k]), rtol=tol, atol=tol, err_msg=k)


# ------------------------------------------------------------------ buckets


def test_buckets_fill_from_the_last_leaf_up_to_the_limit():
    leaves = [np.zeros(100, np.float32), np.zeros(50, np.float32), np.zeros(300, np.float32), np.zeros(10, np.float32)]
    # 1000 bytes: leaf 3 (40 B) + leaf 2 (1200 B) is over, so leaf 3 alone; leaf 2 (over the limit) alone;
    # then leaves 1 and 0 (200 + 400 B).
    buckets = dist.plan_buckets(leaves, bucket_mb=1000 / 2 ** 20)
    assert [b.indices for b in buckets] == [(3,), (2,), (1, 0)]
    assert [b.nbytes for b in buckets] == [40, 1200, 600]
    assert [b.indices for b in dist.plan_buckets(leaves, bucket_mb=25)] == [(3, 2, 1, 0)]


def test_buckets_split_on_dtype_and_refuse_integer_leaves():
    leaves = [np.zeros(4, np.float32), np.zeros(4, np.float16), np.zeros(4, np.float16)]
    assert [(b.indices, str(b.dtype)) for b in dist.plan_buckets(leaves)] == [((2, 1), "float16"), ((0,), "float32")]
    with pytest.raises(TypeError, match="leaf 1 is i32"):
        dist.plan_buckets([np.zeros(2, np.float32), np.zeros(2, np.int32)])
    with pytest.raises(ValueError, match="bucket_mb must be a positive"):
        dist.plan_buckets(leaves, bucket_mb=0)


# ------------------------------------------------------------------ sharding batches


def test_shard_bounds_cover_the_batch_with_sizes_differing_by_one():
    for n, count in [(10, 3), (9, 2), (4, 4), (7, 1)]:
        bounds = [dist.shard_bounds(n, i, count) for i in range(count)]
        assert bounds[0][0] == 0 and bounds[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
        sizes = [stop - start for start, stop in bounds]
        assert max(sizes) - min(sizes) <= 1


def test_shard_batch_takes_the_rows_of_one_process_and_checks_the_batch():
    x, y = np.arange(20).reshape(10, 2), np.arange(10)
    xs, ys = dist.shard_batch((x, y), index=1, count=3)
    np.testing.assert_array_equal(xs, x[3:6])
    np.testing.assert_array_equal(ys, y[3:6])
    with pytest.raises(ValueError, match="at least 4 rows"):
        dist.shard_batch(x[:3], index=0, count=4)
    with pytest.raises(ValueError, match="same leading"):
        dist.shard_batch((x, y[:5]))


# ------------------------------------------------------------------ one-process steps


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("mode", ["overlap", "after", "zero"])
def test_one_process_steps_equal_plain_steps(jit, mode):
    x, y = batch()
    opt = optim.adam(1e-2)
    trainer = dist.data_parallel(loss_fn, opt, bucket_mb=100 / 2 ** 20, jit=jit, overlap=mode == "overlap",
                                 zero=mode == "zero")
    params, state = trainer.init(make_params())
    for _ in range(2):
        params, state, loss = trainer.step(params, state, x, y)
    assert len(trainer.buckets) == 3    # w2 (64 B), w1 (128 B), b1 (32 B) at 100 bytes a bucket
    assert_trees_close(params, plain_steps(opt, make_params(), x, y, 2))
    np.testing.assert_allclose(float(loss), float(loss_fn(plain_steps(opt, make_params(), x, y, 1), x, y)), rtol=1e-6)
    assert collectives_async.pending_count() == 0


def test_aux_metrics_come_back_averaged():
    def with_aux(p, x, y):
        loss = loss_fn(p, x, y)
        return loss, {"loss_again": loss, "mean_x": fnp.mean(x)}

    x, y = batch()
    trainer = dist.data_parallel(with_aux, optim.sgd(0.1), has_aux=True)
    params, state = trainer.init(make_params())
    _, _, loss, aux = trainer.step(params, state, x, y)
    np.testing.assert_allclose(float(aux["mean_x"]), x.mean(), rtol=1e-6)
    np.testing.assert_allclose(float(aux["loss_again"]), float(loss), rtol=1e-6)


def test_overlap_starts_each_bucket_during_the_backward_pass():
    """In the jitted step, the last layer's bucket starts its all-reduce before the first layer's weight
    gradient is computed (the backward rule runs as soon as the bucket's cotangents are complete)."""
    x, y = batch()
    trainer = dist.data_parallel(loss_fn, optim.sgd(0.1), bucket_mb=1e-6)
    params, state = trainer.init(make_params())
    jaxpr = fg.make_jaxpr(lambda p, s, x, y: trainer._local_step(p, s, 6, x, y))(params, state, x, y)
    names = [e.prim.name for e in jaxpr.eqns]
    starts = [i for i, n in enumerate(names) if n == "allreduce_start"]
    matmuls = [i for i, n in enumerate(names) if n == "matmul"]
    dones = [i for i, n in enumerate(names) if n == "allreduce_done"]
    assert len(starts) == 4 and len(dones) == 4     # three buckets and the loss
    assert starts[0] < matmuls[-1]                  # w2's sum travels while w1's gradient is computed
    assert max(starts[:3]) < min(dones)            # every bucket is in flight before the first wait


def test_eager_overlap_starts_the_last_bucket_before_the_first_layer_is_differentiated(monkeypatch):
    from funcgrad.primitives.linalg import matmul_p
    events = []
    for prim, name in ((matmul_p, "matmul"), (collectives_async.allreduce_start_p, "start")):
        monkeypatch.setattr(prim, "impl", lambda *a, _impl=prim.impl, _name=name, **k: events.append(_name)
                            or _impl(*a, **k))
    x, y = batch()
    trainer = dist.data_parallel(loss_fn, optim.sgd(0.1), bucket_mb=1e-6, jit=False)
    params, state = trainer.init(make_params())
    trainer.step(params, state, x, y)
    # Forward: x @ w1, h @ w2. Backward: h @ w2's rule (the cotangents of h and of w2), w2's bucket
    # starts; b1's gradient and bucket; then x @ w1's rule (w1's gradient) and w1's bucket; the loss.
    assert events == ["matmul"] * 4 + ["start", "start", "matmul", "start", "start"], events


def test_early_backward_gives_the_same_gradients_as_the_creation_order():
    x, y = batch()
    p = make_params()
    trainer = dist.data_parallel(loss_fn, optim.sgd(1.0), bucket_mb=1e-6, jit=False)
    params, state = trainer.init(p)
    new, _, _ = trainer.step(params, state, x, y)
    grads = fg.grad(loss_fn)(p, x, y)
    assert_trees_close({k: np.asarray(p[k]) - np.asarray(new[k]) for k in p}, grads, tol=1e-5)


@pytest.mark.parametrize("jit", [False, True])
def test_a_parameter_the_loss_does_not_use_gets_a_zero_gradient(jit):
    x, y = batch()
    trainer = dist.data_parallel(lambda p, x, y: loss_fn(p["used"], x, y), optim.sgd(1.0), bucket_mb=1e-6, jit=jit)
    params, state = trainer.init({"used": make_params(), "unused": fnp.ones(3)})
    new, _, _ = trainer.step(params, state, x, y)
    np.testing.assert_array_equal(np.asarray(new["unused"]), np.ones(3, np.float32))
    assert collectives_async.pending_count() == 0


# ------------------------------------------------------------------ ZeRO-1


def test_zero_refuses_an_optimizer_that_is_not_elementwise():
    with pytest.raises(ValueError, match="clip_by_global_norm, for one"):
        dist.data_parallel(loss_fn, optim.chain(optim.clip_by_global_norm(1.0), optim.sgd(0.1)), zero=True)
    for opt in (optim.sgd(0.1, momentum=0.9, nesterov=True), optim.adamw(1e-3, weight_decay=0.1),
                optim.adam(optim.warmup_cosine_decay_schedule(0.0, 1e-3, 2, 10))):
        dist.check_elementwise(opt)


def test_optimizer_state_bytes_counts_every_array():
    state = optim.adam(1e-3).init(make_params())
    assert dist.optimizer_state_bytes(state) == 4 + 2 * 4 * (32 + 8 + 16)


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(TypeError, match="GradientTransformation"):
        dist.data_parallel(loss_fn, "adam")
    trainer = dist.data_parallel(loss_fn, optim.sgd(0.1))
    with pytest.raises(ValueError, match="call init"):
        trainer.step(make_params(), None, *batch())


# ------------------------------------------------------------------ two processes

MPIEXEC = shutil.which("mpiexec", path=os.pathsep.join([str(pathlib.Path(sys.executable).parent),
                                                         os.environ.get("PATH", "")]))


def _have_mpi4py() -> bool:
    return importlib.util.find_spec("mpi4py") is not None


needs_mpi = pytest.mark.skipif(MPIEXEC is None or not _have_mpi4py(),
                               reason="mpiexec or mpi4py missing (pip install 'funcgrad[distributed]')")


def _launch(args, timeout=90):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1",
               # Open MPI's mpiexec (where it is the one on PATH) refuses to start as root without these
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return subprocess.run([MPIEXEC, "-n", "2", sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


@needs_mpi
def test_two_processes_match_single_process_steps():
    """Gradients (eager and jitted, overlapped and not) equal the full-batch gradient, ZeRO-1 steps equal
    plain Adam, the optimizer state is halved, uneven batches split 4/5."""
    run = _launch([str(ROOT / "tests" / "mpi" / "training_steps.py")])
    assert run.returncode == 0 and "ALL OK" in run.stdout, run.stdout + run.stderr


@needs_mpi
def test_example_quick_run_ends_with_equal_parameters(tmp_path):
    from funcgrad import datasets
    try:
        datasets.mnist()
    except RuntimeError as e:
        pytest.skip(f"MNIST data is not available here: {str(e).splitlines()[0]}")
    run = _launch([str(ROOT / "examples" / "mnist_distributed.py"), "--quick", "--zero", "--out", str(tmp_path)])
    assert run.returncode == 0, run.stdout + run.stderr
    assert "parameters equal on all 2 processes" in run.stdout, run.stdout
    assert (tmp_path / "params.safetensors").exists() and (tmp_path / "metrics.json").exists()


# ------------------------------------------------------------------ GPU

NO_GPU = "gpu" not in fg.devices()


@pytest.mark.gpu
@pytest.mark.skipif(NO_GPU, reason="no usable GPU detected")
def test_nccl_mean_in_one_process_is_the_identity():
    from funcgrad.distributed._nccl import NcclAverager
    x = fg.device_put(fnp.arange(6.0).reshape(2, 3), "gpu")
    out = NcclAverager().mean({"x": x})
    np.testing.assert_array_equal(np.asarray(fg.device_put(out["x"], "cpu")), np.arange(6.0).reshape(2, 3))
