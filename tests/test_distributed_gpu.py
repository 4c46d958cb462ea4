"""Data-parallel training on GPU parameters: gradients summed through NCCL (funcgrad.distributed._nccl).

Without a GPU: GPU arrays are backed by the numpy stand-in for CuPy (``tests/gpu_standin.py``), and
this process plays process 1 of a two-process world whose other process (process 0, the root) is a
fake peer: a fake NCCL communicator, or a fake MPI communicator for the host-copy path, that adds
process 0's share of the gradient (computed here in float64 numpy) to the buffers it is handed, by
address, and writes process 0's parameters into the broadcast buffers. The steps must then equal
plain SGD on the whole global batch. With a GPU, ``mpiexec -n 2 tests/mpi/training_gpu.py`` runs the
real thing (both processes on one GPU: the host-copy path; one GPU each: NCCL).
"""
from __future__ import annotations

import ctypes
import importlib
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.distributed as dist
import funcgrad.numpy as fnp
from funcgrad import optim
from funcgrad.backends.gpu import array as gpu_array
from funcgrad.distributed import _buckets, _nccl, _runtime
from gpu_standin import FakeDeviceArray, gpu_standin

ROOT = pathlib.Path(__file__).resolve().parents[1]
dp = importlib.import_module("funcgrad.distributed.data_parallel")   # (the package exports a function of that name)
NCCL = types.SimpleNamespace(NCCL_FLOAT16=6, NCCL_FLOAT32=7, NCCL_FLOAT64=8, NCCL_SUM=0)
CTYPES = {NCCL.NCCL_FLOAT32: ctypes.c_float, NCCL.NCCL_FLOAT64: ctypes.c_double}
BUCKET_MB = 50e-6   # 52 bytes: w (48 B) alone, then b (12 B)

rng = np.random.default_rng(0)
X = rng.normal(size=(8, 4))
Y = rng.normal(size=(8, 3))
ROOT_P = {"b": rng.normal(size=3), "w": rng.normal(size=(4, 3))}   # process 0's parameters
MY_P = {"b": rng.normal(size=3), "w": rng.normal(size=(4, 3))}     # this process's (replaced by init)


def loss_fn(p, x, y):
    return fnp.mean((x @ p["w"] + p["b"] - y) ** 2)


def reference(p, x, y):
    """Loss and gradient of the mean squared error in float64."""
    r = x @ p["w"] + p["b"] - y
    scale = 2.0 / r.size
    return float(np.mean(r ** 2)), {"b": scale * r.sum(0), "w": scale * x.T @ r}


class FakePeer:
    """Process 0, seen from process 1: its broadcast buffers and its (weighted) contributions to the sums."""

    def __init__(self):
        leaves = [ROOT_P["b"], ROOT_P["w"]]
        self.buckets = _buckets.plan_buckets([np.asarray(x, np.float32) for x in leaves], BUCKET_MB)
        loss, grads = reference(ROOT_P, X[:4], Y[:4])     # process 0 takes rows 0..4 of 8: weight 1/2
        g = [grads["b"], grads["w"]]
        self.bcasts = [np.concatenate([leaves[i].ravel() for i in b.indices]) for b in self.buckets]
        self.sums = [0.5 * np.concatenate([g[i].ravel() for i in b.indices]) for b in self.buckets]
        self.sums.append(np.array([0.5 * loss]))
        self.calls = []

    def add(self, buf):
        buf += self.sums.pop(0).astype(buf.dtype)

    def root(self, buf):
        buf[...] = self.bcasts.pop(0).astype(buf.dtype)


class FakeNcclCommunicator:
    """cupy.cuda.nccl.NcclCommunicator's allReduce and bcast, on host memory addressed by pointer."""

    def __init__(self, peer):
        self.peer = peer

    @staticmethod
    def _memory(ptr, count, dtype):
        return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(CTYPES[dtype])), (count,))

    def allReduce(self, send, recv, count, dtype, op, stream):   # noqa: N802 (NCCL's name)
        assert send == recv and op == NCCL.NCCL_SUM
        self.peer.calls.append(("allReduce", count, dtype))
        self.peer.add(self._memory(recv, count, dtype))

    def bcast(self, ptr, count, dtype, root, stream):
        assert root == 0
        self.peer.calls.append(("bcast", count, dtype))
        self.peer.root(self._memory(ptr, count, dtype))


class FakeMpiComm:
    """The MPI calls of the host-copy path."""

    def __init__(self, peer):
        self.peer = peer

    def Allreduce(self, sendbuf, recvbuf, op):   # noqa: N802 (MPI's name)
        from mpi4py import MPI
        assert sendbuf is MPI.IN_PLACE and op == MPI.SUM and type(recvbuf) is np.ndarray
        self.peer.calls.append(("allReduce", recvbuf.size, recvbuf.dtype))
        self.peer.add(recvbuf)

    def Bcast(self, buf, root):   # noqa: N802
        assert root == 0 and type(buf) is np.ndarray
        self.peer.calls.append(("bcast", buf.size, buf.dtype))
        self.peer.root(buf)


@pytest.fixture
def gpu():
    with gpu_standin(use_triton=False):
        yield


def on_gpu(tree):
    return {k: fg.device_put(fnp.asarray(np.asarray(v, np.float32)), "gpu") for k, v in tree.items()}


def on_host(tree):
    return {k: np.asarray(fg.device_put(v, "cpu")) for k, v in tree.items()}


def second_of_two(monkeypatch, transport):
    """This process as process 1 of 2, its averager's peer fake; returns the peer."""
    if transport == "mpi-host":
        pytest.importorskip("mpi4py", reason="the host-copy path needs mpi4py (pip install mpi4py)")
    peer = FakePeer()
    monkeypatch.setattr(_runtime, "process_index", lambda: 1)
    monkeypatch.setattr(_runtime, "process_count", lambda: 2)
    xp = gpu_array.binding().xp
    if transport == "nccl":
        avg = _nccl.NcclAverager.from_parts(xp=xp, comm=None, size=2, communicator=FakeNcclCommunicator(peer),
                                            nccl=NCCL)
    else:
        avg = _nccl.NcclAverager.from_parts(xp=xp, comm=FakeMpiComm(peer), size=2)
    made = []
    monkeypatch.setattr(_nccl, "averager", lambda: made.append(avg) or avg)
    peer.made = made
    return peer


@pytest.mark.parametrize("transport, jit, batch_on", [("nccl", False, "gpu"), ("nccl", True, "gpu"),
                                                      ("mpi-host", False, "gpu"), ("mpi-host", True, "cpu")])
def test_gpu_steps_sum_buckets_through_the_averager(gpu, monkeypatch, transport, jit, batch_on):
    peer = second_of_two(monkeypatch, transport)
    trainer = dist.data_parallel(loss_fn, optim.sgd(1.0), bucket_mb=BUCKET_MB, jit=jit)
    params, state = trainer.init(on_gpu(MY_P))
    assert len(peer.made) == 1 and trainer.averager.transport == transport
    assert [b.indices for b in trainer.buckets] == [(1,), (0,)]
    got = on_host(params)   # process 0's parameters, broadcast
    for k in ROOT_P:
        np.testing.assert_allclose(got[k], ROOT_P[k], rtol=1e-6)
    assert all(isinstance(v._value, FakeDeviceArray) for v in params.values())

    x, y = (on_gpu({"x": X})["x"], on_gpu({"y": Y})["y"]) if batch_on == "gpu" else (fnp.asarray(X), fnp.asarray(Y))
    new, state, loss = trainer.step(params, state, x, y)
    ref_loss, ref_grads = reference(ROOT_P, X, Y)    # the mean over all 8 rows
    moved = {k: got[k] - v for k, v in on_host(new).items()}
    for k in ROOT_P:
        np.testing.assert_allclose(moved[k], ref_grads[k], rtol=1e-4, atol=1e-5)
    assert new["w"].device == "gpu" and loss.device == "gpu"
    np.testing.assert_allclose(float(loss), ref_loss, rtol=1e-5)
    kind = NCCL.NCCL_FLOAT32 if transport == "nccl" else np.dtype(np.float32)
    assert peer.calls == [("bcast", 12, kind), ("bcast", 3, kind),
                          ("allReduce", 12, kind), ("allReduce", 3, kind), ("allReduce", 1, kind)]
    assert peer.sums == [] and peer.bcasts == []


def test_cpu_parameters_never_make_an_averager(monkeypatch):
    monkeypatch.setattr(_nccl, "averager", lambda: pytest.fail("an NCCL averager for CPU parameters"))
    trainer = dist.data_parallel(loss_fn, optim.sgd(0.1))
    params, state = trainer.init({k: fnp.asarray(v) for k, v in MY_P.items()})
    trainer.step(params, state, fnp.asarray(X), fnp.asarray(Y))
    assert trainer.averager is None


def test_placement_of_parameters(gpu):
    cpu = fnp.ones(2)
    g = fg.device_put(cpu, "gpu")
    assert dp._placement([cpu, cpu]) == "cpu" and dp._placement([g, g]) == "gpu"
    with pytest.raises(ValueError, match=r"\['cpu', 'gpu'\].*all of them on the CPU"):
        dp._placement([cpu, g])
    with pytest.raises(ValueError, match="all of them on the CPU"):
        dist.data_parallel(loss_fn, optim.sgd(0.1)).init({"b": cpu, "w": g})


def test_zero_on_gpu_parameters_is_not_implemented(gpu, monkeypatch):
    second_of_two(monkeypatch, "nccl")
    with pytest.raises(NotImplementedError, match="zero=False for parameters on the GPU"):
        dist.data_parallel(loss_fn, optim.adam(1e-3), zero=True).init(on_gpu(MY_P))


def test_averager_errors_and_one_process_identity(gpu):
    xp = gpu_array.binding().xp
    peer = FakePeer()
    avg = _nccl.NcclAverager.from_parts(xp=xp, comm=None, size=2, communicator=FakeNcclCommunicator(peer),
                                        nccl=NCCL)
    ints = fg.device_put(fnp.arange(3), "gpu")
    with pytest.raises(TypeError, match="float16/float32/float64.*int32"):
        avg.sum_scaled([ints])
    with pytest.raises(TypeError, match="share a dtype"):
        avg.sum_scaled([ints, fg.device_put(fnp.ones(2), "gpu")])
    assert peer.calls == []
    alone = _nccl.NcclAverager.from_parts(xp=xp, comm=None, size=1)
    x = fg.device_put(fnp.arange(6.0).reshape(2, 3), "gpu")
    out = alone.mean({"x": x})["x"]
    assert out.device == "gpu" and out.shape == (2, 3)
    np.testing.assert_array_equal(on_host({"x": out})["x"], np.arange(6.0).reshape(2, 3))


def test_gpu_parameter_leaves_keep_their_order(gpu, monkeypatch):
    # Five leaves in three calls, the peer adding zeros: each piece lands on its own leaf, scaled.
    peer = second_of_two(monkeypatch, "nccl")
    avg = _nccl.averager()
    leaves = [fg.device_put(fnp.full((i + 1,), float(i)), "gpu") for i in range(5)]
    peer.sums = [np.zeros(n) for n in (3, 7, 5)]
    out = avg.sum_scaled(leaves[:2], 2.0) + avg.sum_scaled(leaves[2:4], 1.0) + avg.sum_scaled(leaves[4:], 1.0)
    for i, y in enumerate(out):
        scale = 2.0 if i < 2 else 1.0
        np.testing.assert_array_equal(np.asarray(fg.device_put(y, "cpu")), np.full(i + 1, scale * i))
    assert [c[1] for c in peer.calls] == [3, 7, 5]


# ------------------------------------------------------------------ two processes

MPIEXEC = shutil.which("mpiexec", path=os.pathsep.join([str(pathlib.Path(sys.executable).parent),
                                                         os.environ.get("PATH", "")]))
needs_mpi = pytest.mark.skipif(MPIEXEC is None or importlib.util.find_spec("mpi4py") is None,
                               reason="mpiexec or mpi4py missing (pip install 'funcgrad[distributed]')")


def _launch(*args, timeout=120):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}   # compiled kernels on a real GPU
    env = dict(env, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1",
               # Open MPI's mpiexec (where it is the one on PATH) refuses to start as root without these
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return subprocess.run([MPIEXEC, "-n", "2", sys.executable, str(ROOT / "tests" / "mpi" / "training_gpu.py"),
                           *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@needs_mpi
def test_two_processes_on_standin_gpu_arrays_match_the_full_batch_gradient():
    """The GPU script on the numpy stand-in: real MPI sums of host copies between two processes."""
    run = _launch("--standin")
    assert run.returncode == 0 and "ALL OK transport=mpi-host" in run.stdout, run.stdout + run.stderr


def _gpu_count() -> int:
    if "gpu" not in fg.devices():
        return 0
    import cupy
    return cupy.cuda.runtime.getDeviceCount()


@pytest.mark.gpu
@pytest.mark.skipif(_gpu_count() == 0, reason="no usable GPU detected")
@needs_mpi
def test_two_processes_on_gpus_match_the_full_batch_gradient():
    """Both processes on GPU 0 (host copies: NCCL refuses a shared GPU), or one GPU each (NCCL)."""
    run = _launch()
    expected = "nccl" if _gpu_count() >= 2 else "mpi-host"
    assert run.returncode == 0 and f"ALL OK transport={expected}" in run.stdout, run.stdout + run.stderr


def test_arrays_on_another_gpu_than_the_process_uses_are_refused(gpu):
    avg = _nccl.NcclAverager.from_parts(xp=gpu_array.binding().xp, comm=None, size=2)
    on_gpu_1 = types.SimpleNamespace(_value=types.SimpleNamespace(device=types.SimpleNamespace(id=1)))
    avg.check_device([fg.device_put(fnp.ones(2), "gpu")], "here")   # this process's GPU (0)
    with pytest.raises(ValueError, match="here: an array lives on GPU 1, but this process uses GPU 0"):
        avg.check_device([on_gpu_1], "here")


def test_step_on_parameters_elsewhere_than_init_says_so(gpu, monkeypatch):
    second_of_two(monkeypatch, "nccl")
    trainer = dist.data_parallel(loss_fn, optim.sgd(1.0), bucket_mb=BUCKET_MB)
    params, state = trainer.init(on_gpu(MY_P))
    with pytest.raises(ValueError, match="parameters are on the CPU, but init was given parameters on the GPU"):
        trainer.step(on_host(params), state, fnp.asarray(X), fnp.asarray(Y))
