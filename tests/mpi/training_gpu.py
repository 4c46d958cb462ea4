"""Run with ``mpiexec -n 2`` on a machine with a GPU: data-parallel steps on GPU parameters.

Both processes on GPU 0 (one GPU: the sums go through host copies and MPI) or one GPU each (two or
more GPUs: NCCL). Every process computes the full-batch gradient itself on the CPU and compares;
prints ``ALL OK transport=<nccl|mpi-host>`` on process 0 when every check passed on every process.

``--standin``: without a GPU, GPU arrays over the numpy stand-in for CuPy (``tests/gpu_standin.py``)
and the sums over MPI on host copies (the path of two processes sharing one GPU).
"""
import contextlib
import pathlib
import sys

import numpy as np

import funcgrad as fg
import funcgrad.distributed as dist
import funcgrad.numpy as fnp
from funcgrad import optim

dist.initialize()
RANK, SIZE = dist.process_index(), dist.process_count()
COMM = dist._runtime.comm()
assert SIZE == 2, f"run me with mpiexec -n 2, not {SIZE}"
STANDIN = contextlib.ExitStack()
if "--standin" in sys.argv:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    from gpu_standin import gpu_standin

    from funcgrad.backends.gpu import array as gpu_array
    from funcgrad.distributed import _nccl

    STANDIN.enter_context(gpu_standin(use_triton=False))
    _host_averager = _nccl.NcclAverager.from_parts(xp=gpu_array.binding().xp, comm=COMM, size=SIZE)
    _nccl.averager = lambda: _host_averager
else:
    from funcgrad.distributed import _nccl
_nccl.averager()   # selects this process's GPU: before any array goes there
if "gpu" not in fg.devices():
    print(f"process {RANK}: FAILED no usable GPU", flush=True)
    COMM.Abort(1)


def loss_fn(p, x, y):
    h = fnp.tanh(x @ p["w1"] + p["b1"])
    return fnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)


def loss_aux(p, x, y):
    loss = loss_fn(p, x, y)
    return loss, {"mean_y": fnp.mean(y)}


def make_params(seed):
    rng = np.random.default_rng(seed)
    return {"w1": fnp.asarray(rng.normal(size=(6, 16)).astype(np.float32) * 0.5),
            "b1": fnp.asarray(rng.normal(size=(16,)).astype(np.float32) * 0.1),
            "w2": fnp.asarray(rng.normal(size=(16, 3)).astype(np.float32) * 0.5),
            "b2": fnp.zeros(3)}


def host(tree):
    return {k: np.asarray(fg.device_put(v, "cpu")) for k, v in tree.items()}


def check(name, ok, detail=""):
    if not ok:
        print(f"process {RANK}: FAILED {name} {detail}", flush=True)
        COMM.Abort(1)


def same_everywhere(tree):
    mine = np.concatenate([x.ravel() for x in host(tree).values()])
    theirs = COMM.allgather(mine)
    return all(np.array_equal(theirs[0], t) for t in theirs)


def max_diff(a, b):
    return max(float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k])))) for k in a)


data = np.random.default_rng(123)
X = data.normal(size=(9, 6)).astype(np.float32)     # 9 rows: 4 on process 0, 5 on process 1
Y = data.normal(size=(9, 3)).astype(np.float32)
P0 = make_params(0)
ref_grads = host(fg.grad(loss_fn)(P0, X, Y))
ref_loss = float(loss_fn(P0, X, Y))
transport = None
for jit in (False, True):
    for batch_on in ("gpu", "cpu", "both"):
        tr = dist.data_parallel(loss_fn, optim.sgd(1.0), bucket_mb=0.0005, jit=jit)
        p, s = tr.init(fg.device_put(make_params(RANK), "gpu"))   # each process its own seed
        transport = tr.averager.transport
        check("broadcast", max_diff(host(p), host(P0)) == 0.0 and same_everywhere(p))
        check("buckets", [b.indices for b in tr.buckets] == [(3,), (2, 1, 0)], str(tr.buckets))
        x, y = {"gpu": (fg.device_put(X, "gpu"), fg.device_put(Y, "gpu")), "cpu": (X, Y),
                "both": (fg.device_put(X, "gpu"), fnp.asarray(Y))}[batch_on]
        new, s, loss = tr.step(p, s, x, y)
        check("on the GPU", all(v.device == "gpu" for v in new.values()) and loss.device == "gpu")
        grads = {k: host(p)[k] - host(new)[k] for k in p}
        diff = max_diff(grads, ref_grads)
        check(f"gradients jit={jit} batch on {batch_on}", diff < 1e-5, f"max diff {diff}")
        check(f"loss jit={jit}", abs(float(loss) - ref_loss) < 1e-5 * max(1, ref_loss), f"{float(loss)} vs {ref_loss}")
        check(f"equal params jit={jit}", same_everywhere(new))

tr = dist.data_parallel(loss_aux, optim.adam(1e-2), has_aux=True)
p, s = tr.init(fg.device_put(P0, "gpu"))
for _ in range(2):
    p, s, loss, aux = tr.step(p, s, fg.device_put(X, "gpu"), fg.device_put(Y, "gpu"))
check("aux", abs(float(aux["mean_y"]) - float(Y.mean())) < 1e-6, str(aux))
check("adam equal params", same_everywhere(p))

# Parameters of another shape on one process: init raises on every process (no hang).
bad = make_params(0)
if RANK == 1:
    bad["b2"] = fnp.zeros(4)
try:
    dist.data_parallel(loss_fn, optim.sgd(1.0)).init(fg.device_put(bad, "gpu"))
    check("other shapes raise", False)
except ValueError as e:
    check("other shapes message", "processes [1] have other parameters" in str(e), str(e))

# The collectives of funcgrad.distributed on GPU arrays, eagerly and under jit (a float psum through
# NCCL where the averager uses it; the rest, and every sum on a shared GPU, through host copies and MPI).
g = fg.device_put(fnp.arange(3.0) + RANK, "gpu")
for run in (lambda f: f, fg.jit):
    total, gathered = run(dist.psum)(g), run(dist.all_gather)(g)
    turned = run(lambda v: dist.ppermute(v, [(0, 1), (1, 0)]))(g)
    check("collectives stay on the GPU", all(o.device == "gpu" for o in (total, gathered, turned)))
    got = host({"total": total, "gathered": gathered, "turned": turned})
    check("psum of GPU arrays", np.allclose(got["total"], 2 * np.arange(3.0) + 1), str(got["total"]))
    check("all_gather of GPU arrays", np.allclose(got["gathered"], [np.arange(3.0), np.arange(3.0) + 1]))
    check("ppermute of GPU arrays", np.allclose(got["turned"], np.arange(3.0) + 1 - RANK), str(got["turned"]))

COMM.Barrier()
STANDIN.close()
if RANK == 0:
    print(f"ALL OK transport={transport}", flush=True)
sys.exit(0)
