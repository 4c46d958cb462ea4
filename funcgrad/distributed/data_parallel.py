"""Data-parallel training: every process holds the parameters, takes its share of each global
batch, and the gradients are averaged across processes before every optimizer step.

>>> import funcgrad.distributed as dist
>>> def loss_fn(params, x, y):                                  # the mean loss over a batch
...     return fnp.mean((x @ params["w"] - y) ** 2)
>>> trainer = dist.data_parallel(loss_fn, optim.sgd(0.1))
>>> params, opt_state = trainer.init({"w": fnp.zeros(3)})       # rank 0's parameters, everywhere
>>> x, y = fnp.ones((4, 3)), fnp.ones(4)                        # the *global* batch: each process takes its share
>>> params, opt_state, loss = trainer.step(params, opt_state, x, y)
>>> float(loss), params["w"]       # the gradient of the whole batch's mean, -2 each, on any number of processes
(1.0, Array([0.2, 0.2, 0.2], dtype=float32))

The gradients are all-reduced in buckets of about ``bucket_mb`` megabytes, and with
``overlap=True`` (the default) each bucket's sum starts as soon as the backward pass has finished
its gradients (a non-blocking MPI ``Iallreduce``) and is awaited just before the optimizer update,
so the communication runs while the backward pass computes the earlier layers. ``zero=True``
shards the optimizer state across processes instead (ZeRO stage 1, :mod:`.zero`).

Parameters on the GPU (``fg.device_put(params, "gpu")``; the batch on the GPU or the CPU) have their
gradient buckets summed by NCCL (:mod:`._nccl`; host copies and MPI when processes share a GPU),
after the backward pass (no overlap), and ``init`` broadcasts them the same way; ZeRO-1 takes CPU
parameters only.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

import funcgrad.lax as lax
import funcgrad.numpy as fnp
from funcgrad.api import value_and_grad
from funcgrad.core import describe
from funcgrad.devices import device_put
from funcgrad.distributed import _nccl, _runtime
from funcgrad.distributed._buckets import Bucket, plan_buckets, unflatten
from funcgrad.distributed.zero import Zero1
from funcgrad.jit import jit as _jit
from funcgrad.optim import GradientTransformation, apply_updates
from funcgrad.primitives import collectives_async as _ca
from funcgrad.tree_util import tree_flatten, tree_leaves, tree_unflatten



def _wait(request: Any, what: str) -> None:
    """Complete an MPI request, or raise TimeoutError after the world's timeout (a rank that failed)."""
    _runtime._wait([request], _runtime.world(), what)


_ca.use_communicator(_runtime.comm, _wait)

__all__ = ["DataParallel", "broadcast_params", "data_parallel", "optimizer_state_bytes", "shard_batch",
           "shard_bounds"]


# --------------------------------------------------------------------------
# Parameters and batches
# --------------------------------------------------------------------------


def broadcast_params(tree: Any, root: int = 0) -> Any:
    """``tree`` (a pytree of arrays) as process ``root`` has it, on every process.

    Call it once on the initial parameters: every process then starts from the same point
    whatever its random seed. In a one-process world it returns ``tree`` unchanged.

    >>> params = broadcast_params({"w": fnp.ones(3)})
    >>> params["w"]
    Array([1., 1., 1.], dtype=float32)
    """
    comm = _runtime.comm()
    if comm is None:
        return tree
    if not 0 <= root < comm.Get_size():
        raise ValueError(f"broadcast_params: root must be a process index in [0, {comm.Get_size()}), got {root}")
    leaves, treedef = tree_flatten(tree)
    shapes = comm.bcast([(tuple(np.shape(x)), str(np.asarray(x).dtype)) for x in leaves], root=root)
    mine = [(tuple(np.shape(x)), str(np.asarray(x).dtype)) for x in leaves]
    if shapes != mine:
        raise ValueError(f"broadcast_params: process {comm.Get_rank()} has parameters {mine}, process {root} has "
                         f"{shapes}; every process must build the same model")
    out = []
    for x in leaves:
        buf = np.array(np.asarray(x), copy=True, order="C")
        comm.Bcast(buf, root=root)
        out.append(fnp.asarray(buf))
    return tree_unflatten(treedef, out)


def shard_bounds(n: int, index: int | None = None, count: int | None = None) -> tuple[int, int]:
    """The rows ``[start, stop)`` of a global batch of ``n`` rows that process ``index`` of ``count`` takes.

    The rows are split in contiguous blocks whose sizes differ by at most one (a batch of 10 on 3
    processes: 3, 3 and 4 rows); ``n`` must be at least ``count``.

    >>> shard_bounds(10, 2, 3)
    (6, 10)
    """
    index = _runtime.process_index() if index is None else index
    count = _runtime.process_count() if count is None else count
    if n < count:
        raise ValueError(f"shard_batch: a global batch of {n} rows cannot be shared by {count} processes; use a "
                         f"global batch of at least {count} rows (or drop the last, smaller batch)")
    return index * n // count, (index + 1) * n // count


def shard_batch(batch: Any, index: int | None = None, count: int | None = None) -> Any:
    """This process's rows of ``batch`` (a pytree of arrays sharing a leading axis: the global batch).

    ``index``/``count`` default to this process and the world's size. Uneven batches are split
    as :func:`shard_bounds` says; :meth:`DataParallel.step` weights each process's gradient by its
    share of the rows, so the result is the gradient of the mean over the whole global batch.

    >>> x = np.arange(8).reshape(4, 2)
    >>> shard_batch(x, index=1, count=2)
    array([[4, 5],
           [6, 7]])
    """
    leaves, treedef = tree_flatten(batch)
    if not leaves:
        raise ValueError("shard_batch: the batch has no arrays")
    sizes = {np.shape(x)[0] if np.ndim(x) else None for x in leaves}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(f"shard_batch: every array of the batch needs the same leading (batch) axis, got "
                         f"{', '.join(describe(x) if hasattr(x, 'dtype') else repr(x) for x in leaves)}")
    start, stop = shard_bounds(sizes.pop(), index, count)
    return tree_unflatten(treedef, [x[start:stop] for x in leaves])


def optimizer_state_bytes(state: Any) -> int:
    """The bytes of the arrays in an optimizer state on this process (ZeRO-1 divides them by the process count).

    >>> optimizer_state_bytes(optim.adam(1e-3).init({"w": fnp.zeros(10)}))   # count + 2 moments of 10
    84
    """
    return int(sum(np.asarray(x).nbytes for x in tree_leaves(state)))


# --------------------------------------------------------------------------
# The trainer
# --------------------------------------------------------------------------


def _placement(leaves: Sequence[Any]) -> str:
    """Where the parameter ``leaves`` live: ``"cpu"`` or ``"gpu"`` (all of them); else a ValueError."""
    devices = {str(getattr(x, "device", "cpu")) for x in leaves}
    if devices <= {"cpu"}:
        return "cpu"
    if devices == {"gpu"}:
        return "gpu"
    raise ValueError(f"data_parallel.init: the parameters live on {sorted(devices)}; keep all of them on the CPU, "
                     "or all on the GPU (fg.device_put(params, 'gpu'))")


def _no_aux(loss_fn: Callable) -> Callable:
    def with_aux(params: Any, *batch: Any) -> tuple:
        return loss_fn(params, *batch), ()
    return with_aux


def _average_metrics(loss: Any, aux: Any, weight: float) -> tuple[Any, Any]:
    """``loss`` and the float leaves of ``aux`` averaged across processes (weighted by ``weight``)."""
    leaves, treedef = tree_flatten(aux)
    parts = [loss] + [fnp.asarray(x) for x in leaves]
    like = [p.astype(loss.dtype) for p in parts]
    total = _ca.allreduce_done_p.bind(_ca.allreduce_start_p.bind(*like, scale=weight))
    out = [fnp.reshape(x, np.shape(p)).astype(p.dtype) for x, p in zip(unflatten(total, like), parts)]
    return out[0], tree_unflatten(treedef, out[1:])


class DataParallel:
    """What :func:`data_parallel` returns: ``init``, ``step`` and the plan of buckets.

    ``buckets`` (a list of :class:`~funcgrad.distributed._buckets.Bucket`) is known after ``init``.

    >>> trainer = DataParallel(lambda p, x: fnp.mean((x * p["w"]) ** 2), optim.sgd(0.1))
    >>> params, opt_state = trainer.init({"w": fnp.ones(3)})
    >>> trainer.buckets
    [Bucket(indices=(0,), dtype=dtype('float32'), nbytes=12)]
    >>> params, opt_state, loss = trainer.step(params, opt_state, fnp.ones((2, 3)))
    >>> float(loss), params["w"]        # the gradient of mean(w**2) is 2 w / 3
    (1.0, Array([0.93333, 0.93333, 0.93333], dtype=float32))
    """

    def __init__(self, loss_fn: Callable, optimizer: GradientTransformation, *, has_aux: bool = False,
                 bucket_mb: float = 25.0, overlap: bool = True, zero: bool = False, jit: bool = True):
        if not (isinstance(optimizer, tuple) and len(optimizer) == 2 and callable(optimizer[0])):
            raise TypeError(f"data_parallel: optimizer must be a GradientTransformation such as optim.adam(1e-3), "
                            f"got {type(optimizer).__name__}")
        if not callable(loss_fn):
            raise TypeError(f"data_parallel: loss_fn must be callable (params, *batch) -> loss, got "
                            f"{type(loss_fn).__name__}")
        plan_buckets([], bucket_mb)   # checks bucket_mb
        self.loss_fn = loss_fn if has_aux else _no_aux(loss_fn)
        self.has_aux = has_aux
        self.optimizer = optimizer
        self.bucket_mb = bucket_mb
        self.overlap = bool(overlap)
        self.zero = Zero1(optimizer) if zero else None
        self.buckets: list[Bucket] = []
        self.averager: Any = None   # the NCCL averager, for parameters on the GPU (set by init)
        self._jit = jit
        self._step = _jit(self._local_step, static_argnums=(2,)) if jit else self._local_step

    # ---------------------------------------------------------------- public

    def init(self, params: Any) -> tuple[Any, Any]:
        """``(params, opt_state)``: the parameters of process 0 on every process, and the optimizer state
        (with ``zero=True``, this process's shard of it)."""
        if _placement(tree_leaves(params)) == "gpu":
            return self._init_gpu(params)
        params = broadcast_params(params)
        leaves = tree_leaves(params)
        if not leaves:
            raise ValueError("data_parallel.init: the parameters contain no arrays")
        self.averager = None
        self.buckets = plan_buckets(leaves, self.bucket_mb)
        if self.zero is not None:
            return params, self.zero.init(params)
        return params, self.optimizer.init(params)

    def step(self, params: Any, opt_state: Any, *batch: Any) -> tuple:
        """One training step on the global ``batch`` (arrays with a leading batch axis, the same on every
        process): ``(params, opt_state, loss)``, plus ``aux`` with ``has_aux``; ``loss`` and ``aux`` are
        the means over the whole global batch (averaged across processes)."""
        if not self.buckets:
            raise ValueError("data_parallel.step: call init(params) first (it plans the gradient buckets)")
        if not batch:
            raise ValueError("data_parallel.step: give the global batch, e.g. step(params, opt_state, x, y)")
        n_global = int(np.shape(tree_leaves(batch)[0])[0])
        where, planned = _placement(tree_leaves(params)), "cpu" if self.averager is None else "gpu"
        if where != planned:
            raise ValueError(f"data_parallel.step: the parameters are on the {where.upper()}, but init was given "
                             f"parameters on the {planned.upper()}; call init with the parameters where they train")
        if self.averager is None:
            local, step = shard_batch(batch), self._step
        else:
            local, step = _gpu_shard(batch), self._gpu_step
        params, opt_state, loss, aux = step(params, opt_state, n_global, *local)
        return (params, opt_state, loss, aux) if self.has_aux else (params, opt_state, loss)

    def state_bytes(self, opt_state: Any) -> int:
        """The bytes of ``opt_state`` on this process (see :func:`optimizer_state_bytes`)."""
        return optimizer_state_bytes(opt_state)

    # ---------------------------------------------------------------- the step

    def _local_step(self, params: Any, opt_state: Any, n_global: int, *local: Any) -> tuple:
        weight = int(np.shape(tree_leaves(local)[0])[0]) / n_global
        if self.zero is not None:
            (loss, aux), grads = value_and_grad(self.loss_fn, has_aux=True)(params, *local)
            params, opt_state = self.zero.update(grads, opt_state, params, weight)
        else:
            if self.overlap:
                loss, aux, grads = self._overlapped_grads(params, local, weight)
            else:
                loss, aux, grads = self._grads_then_reduce(params, local, weight)
            updates, opt_state = self.optimizer.update(grads, opt_state, params)
            params = apply_updates(params, updates)
        loss, aux = _average_metrics(loss, aux, weight)
        return params, opt_state, loss, aux

    def _assemble(self, params: Any, flats: Sequence[Any]) -> Any:
        """The gradient tree from the reduced 1-D buffer of each bucket."""
        leaves, treedef = tree_flatten(params)
        grads: list = [None] * len(leaves)
        for bucket, flat in zip(self.buckets, flats):
            for i, g in zip(bucket.indices, unflatten(flat, [leaves[i] for i in bucket.indices])):
                grads[i] = g
        return tree_unflatten(treedef, grads)

    def _grads_then_reduce(self, params: Any, local: tuple, weight: float) -> tuple:
        (loss, aux), grads = value_and_grad(self.loss_fn, has_aux=True)(params, *local)
        g = tree_leaves(grads)
        started = [_ca.allreduce_start_p.bind(*[g[i] for i in b.indices], scale=weight) for b in self.buckets]
        return loss, aux, self._assemble(params, [_ca.allreduce_done_p.bind(s) for s in started])

    def _overlapped_grads(self, params: Any, local: tuple, weight: float) -> tuple:
        leaves, treedef = tree_flatten(params)
        buckets, loss_fn = self.buckets, self.loss_fn

        def loss_of_slots(slots: list, *batch: Any) -> Any:
            # Each bucket of parameters passes through an identity whose backward rule starts the
            # bucket's all-reduce; the in-flight sums come back as the gradients of ``slots``.
            new = list(leaves)
            for b, slot in zip(buckets, slots):
                for i, x in zip(b.indices, _ca.bucket_p.bind(*[leaves[i] for i in b.indices], slot, scale=weight)):
                    new[i] = x
            return loss_fn(tree_unflatten(treedef, new), *batch)

        slots = [fnp.zeros(sum(int(np.prod(np.shape(leaves[i]))) for i in b.indices), b.dtype) for b in buckets]
        (loss, aux), in_flight = value_and_grad(loss_of_slots, has_aux=True)(slots, *local)
        return loss, aux, self._assemble(params, [_ca.allreduce_done_p.bind(s) for s in in_flight])

    # ---------------------------------------------------------------- parameters on the GPU

    def _init_gpu(self, params: Any) -> tuple[Any, Any]:
        if self.zero is not None:
            raise NotImplementedError("data_parallel(zero=True) shards the optimizer state of CPU parameters only; "
                                      "use zero=False for parameters on the GPU, or keep them on the CPU")
        leaves, treedef = tree_flatten(params)
        buckets = plan_buckets(leaves, self.bucket_mb)
        _check_same_shapes(leaves)
        self.averager = _nccl.averager()
        self.averager.check_device(leaves, "data_parallel.init")
        out: list = [None] * len(leaves)
        for b in buckets:
            for i, x in zip(b.indices, self.averager.broadcast([leaves[i] for i in b.indices], root=0)):
                out[i] = x
        self.buckets = buckets
        grads = value_and_grad(self.loss_fn, has_aux=True)
        self._gpu_grads = _jit(grads) if self._jit else grads
        self._gpu_update = _jit(self._apply_update) if self._jit else self._apply_update
        params = tree_unflatten(treedef, out)
        return params, self.optimizer.init(params)

    def _apply_update(self, grads: Any, opt_state: Any, params: Any) -> tuple[Any, Any]:
        updates, opt_state = self.optimizer.update(grads, opt_state, params)
        return apply_updates(params, updates), opt_state

    def _gpu_step(self, params: Any, opt_state: Any, n_global: int, *local: Any) -> tuple:
        """The step for GPU parameters: local gradients, each bucket summed through the averager, the update."""
        weight = int(np.shape(tree_leaves(local)[0])[0]) / n_global
        (loss, aux), grads = self._gpu_grads(params, *local)
        g, treedef = tree_flatten(grads)
        out: list = [None] * len(g)
        for b in self.buckets:
            for i, x in zip(b.indices, self.averager.sum_scaled([g[i] for i in b.indices], weight)):
                out[i] = x
        params, opt_state = self._gpu_update(tree_unflatten(treedef, out), opt_state, params)
        leaves, aux_def = tree_flatten(aux)
        parts = [loss] + [fnp.asarray(x) for x in leaves]
        total = self.averager.sum_scaled([device_put(p, "gpu").astype(loss.dtype) for p in parts], weight)
        out = [t.astype(p.dtype) for t, p in zip(total, parts)]
        return params, opt_state, out[0], tree_unflatten(aux_def, out[1:])


def _gpu_shard(batch: Any) -> Any:
    """This process's rows of the global ``batch`` (as :func:`shard_batch`), on the GPU."""
    leaves, treedef = tree_flatten(batch)
    if not leaves or any(getattr(x, "device", "cpu") != "gpu" for x in leaves):
        return device_put(shard_batch(device_put(batch, "cpu")), "gpu")
    sizes = {x.shape[0] if x.ndim else None for x in leaves}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(f"shard_batch: every array of the batch needs the same leading (batch) axis, got "
                         f"{', '.join(describe(x) for x in leaves)}")
    start, stop = shard_bounds(sizes.pop())
    return tree_unflatten(treedef, [lax.dynamic_slice_in_dim(x, start, stop - start, axis=0) for x in leaves])


def _check_same_shapes(leaves: Sequence[Any]) -> None:
    """Every process holds parameters of the same shapes and dtypes as process 0 (else a ValueError)."""
    comm = _runtime.comm()
    if comm is None:
        return
    mine = [(tuple(x.shape), str(x.dtype)) for x in leaves]
    first = comm.bcast(mine, root=0)
    differ = [i for i, same in enumerate(comm.allgather(first == mine)) if not same]   # every process raises
    if differ:
        raise ValueError(f"data_parallel.init: processes {differ} have other parameters than process 0 (here "
                         f"{mine}, on process 0 {first}); every process must build the same model")


def data_parallel(loss_fn: Callable, optimizer: GradientTransformation, *, has_aux: bool = False,
                  bucket_mb: float = 25.0, overlap: bool = True, zero: bool = False, jit: bool = True
                  ) -> DataParallel:
    """Data-parallel training steps of ``loss_fn`` with ``optimizer`` across the processes of the world.

    ``loss_fn(params, *batch)`` returns the *mean* loss over the batch it is given (a float scalar),
    or ``(loss, aux)`` with ``has_aux`` (``aux``: a pytree of float arrays, e.g. the accuracy, averaged
    across processes like the loss). ``bucket_mb``: the size of a gradient bucket in megabytes;
    ``overlap``: start each bucket's all-reduce during the backward pass (else after it); ``zero``:
    shard the optimizer state (ZeRO-1; elementwise optimizers only); ``jit``: compile the step.

    >>> trainer = data_parallel(lambda p, x, y: fnp.mean((x @ p["w"] - y) ** 2), optim.sgd(0.1))
    >>> params, opt_state = trainer.init({"w": fnp.zeros(3)})
    >>> params, opt_state, loss = trainer.step(params, opt_state, fnp.ones((4, 3)), fnp.ones(4))
    >>> float(loss)
    1.0
    """
    return DataParallel(loss_fn, optimizer, has_aux=has_aux, bucket_mb=bucket_mb, overlap=overlap, zero=zero,
                        jit=jit)
