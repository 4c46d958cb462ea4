"""Run with ``mpiexec -n 2``: data-parallel steps and ZeRO-1 against single-process references.

Every process computes the reference itself on the whole global batch and compares; prints
``ALL OK`` on process 0 when every check passed on every process.
"""
import sys
import time

import numpy as np

import funcgrad as fg
import funcgrad.distributed as dist
import funcgrad.numpy as fnp
from funcgrad import optim
from funcgrad.primitives import collectives_async

dist.initialize()
RANK, SIZE = dist.process_index(), dist.process_count()
COMM = dist._runtime.comm()
assert SIZE == 2, f"run me with mpiexec -n 2, not {SIZE}"


def loss_fn(p, x, y):
    h = fnp.tanh(x @ p["w1"] + p["b1"])
    return fnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)


def loss_aux(p, x, y):
    loss = loss_fn(p, x, y)
    return loss, {"mse": loss, "mean_y": fnp.mean(y)}


def make_params(seed):
    rng = np.random.default_rng(seed)
    return {"w1": fnp.asarray(rng.normal(size=(6, 16)).astype(np.float32) * 0.5),
            "b1": fnp.asarray(rng.normal(size=(16,)).astype(np.float32) * 0.1),
            "w2": fnp.asarray(rng.normal(size=(16, 3)).astype(np.float32) * 0.5),
            "b2": fnp.zeros(3)}


data = np.random.default_rng(123)
X = data.normal(size=(9, 6)).astype(np.float32)     # 9 rows: 4 on process 0, 5 on process 1
Y = data.normal(size=(9, 3)).astype(np.float32)
P0 = make_params(0)


def same_everywhere(tree):
    mine = np.concatenate([np.asarray(x).ravel() for x in fg.tree_util.tree_leaves(tree)])
    theirs = COMM.allgather(mine)
    return all(np.array_equal(theirs[0], t) for t in theirs)


def check(name, ok, detail=""):
    if not ok:
        print(f"process {RANK}: FAILED {name} {detail}", flush=True)
        COMM.Abort(1)


def max_diff(a, b):
    return max(float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k])))) for k in a)


# 1. init broadcasts rank 0's parameters whatever each rank's seed.
trainer = dist.data_parallel(loss_fn, optim.sgd(1.0), bucket_mb=0.0005, jit=False)
params, state = trainer.init(make_params(RANK))
check("broadcast", same_everywhere(params) and max_diff(params, P0) == 0.0)
# Leaves in order b1 (64 B), b2 (12 B), w1 (384 B), w2 (192 B); filled from the last, 0.0005 MB = 524 bytes:
# w2 alone (w2 + w1 = 576 B is over), then w1 + b2 + b1 (460 B).
check("buckets", [b.indices for b in trainer.buckets] == [(3,), (2, 1, 0)], str(trainer.buckets))

# 2. One SGD step of rate 1 moves the parameters by minus the gradient: equal to the gradient
#    of the mean loss over all 9 rows, eager and jitted, overlapped and reduced after the backward pass.
ref_grads = fg.grad(loss_fn)(P0, X, Y)
ref_loss = float(loss_fn(P0, X, Y))
for jit in (False, True):
    for overlap in (True, False):
        tr = dist.data_parallel(loss_fn, optim.sgd(1.0), bucket_mb=0.0005, jit=jit, overlap=overlap)
        p, s = tr.init(make_params(RANK))
        new, s, loss = tr.step(p, s, X, Y)
        grads = {k: np.asarray(p[k]) - np.asarray(new[k]) for k in p}
        diff = max_diff(grads, ref_grads)
        check(f"gradients jit={jit} overlap={overlap}", diff < 1e-5, f"max diff {diff}")
        check(f"loss jit={jit} overlap={overlap}", abs(float(loss) - ref_loss) < 1e-5 * max(1, ref_loss),
              f"{float(loss)} vs {ref_loss}")
        check(f"equal params jit={jit} overlap={overlap}", same_everywhere(new))

# 2b. A parameter the loss does not use gets a zero gradient (its bucket starts no sum).
tr = dist.data_parallel(lambda p, x, y: loss_fn(p["used"], x, y), optim.sgd(1.0), bucket_mb=1e-6)
p, s = tr.init({"used": P0, "unused": fnp.ones(5)})
new, s, loss = tr.step(p, s, X, Y)
check("unused parameter", np.array_equal(np.asarray(new["unused"]), np.ones(5, np.float32))
      and max_diff({k: np.asarray(p["used"][k]) - np.asarray(new["used"][k]) for k in P0}, ref_grads) < 1e-5)

# 3. aux metrics are averaged over the global batch.
tr = dist.data_parallel(loss_aux, optim.sgd(0.1), has_aux=True)
p, s = tr.init(P0)
_, _, loss, aux = tr.step(p, s, X, Y)
check("aux", abs(float(aux["mean_y"]) - float(Y.mean())) < 1e-6 and abs(float(aux["mse"]) - ref_loss) < 1e-5,
      str(aux))

# 4. ZeRO-1: three Adam steps equal plain Adam on the full batch; the state (an int32 count and two
#    float32 moments) holds half of the entries (rounded up) on each process.
opt = optim.adam(1e-2)
ref_p, ref_s = P0, opt.init(P0)
for _ in range(3):
    u, ref_s = opt.update(fg.grad(loss_fn)(ref_p, X, Y), ref_s, ref_p)
    ref_p = optim.apply_updates(ref_p, u)
full_bytes = dist.optimizer_state_bytes(opt.init(P0))
for jit in (False, True):
    tr = dist.data_parallel(loss_fn, opt, zero=True, jit=jit)
    p, s = tr.init(make_params(RANK))
    for _ in range(3):
        p, s, loss = tr.step(p, s, X, Y)
    diff = max_diff(p, ref_p)
    check(f"zero jit={jit}", diff < 1e-5, f"max diff {diff}")
    check(f"zero equal params jit={jit}", same_everywhere(p))
    n = sum(int(np.size(x)) for x in fg.tree_util.tree_leaves(P0))     # 163 entries: 82 per process
    moments = 2 * 4 * ((n + 1) // 2)
    check("zero state bytes", tr.state_bytes(s) == 4 + moments and full_bytes == 4 + 2 * 4 * n,
          f"{tr.state_bytes(s)} of {full_bytes}")

check("nothing in flight", collectives_async.pending_count() == 0)

# 5. A process that skips a step (as one that raised would): the other gets a TimeoutError naming
#    the wait, within the world's timeout, instead of hanging. Last: its sum stays unmatched.
dist._runtime.world().timeout = 3.0
tr = dist.data_parallel(loss_fn, optim.sgd(0.1), jit=False)
p, s = tr.init(P0)
if RANK == 0:
    start = time.monotonic()
    try:
        tr.step(p, s, X, Y)
        check("timeout", False, "the step returned")
    except TimeoutError as e:
        check("timeout", time.monotonic() - start < 10 and "allreduce_done" in str(e), str(e))
    print("ALL OK", flush=True)
sys.stdout.flush()
