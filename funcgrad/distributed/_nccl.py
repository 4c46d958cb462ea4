"""Summing and averaging GPU arrays across processes with NCCL (``cupy.cuda.nccl``).

NCCL's communicator is bootstrapped over MPI: process 0 makes the unique id and broadcasts it.
Each process uses GPU ``local rank % GPUs on the node``. NCCL refuses two processes on one GPU,
so when processes share a GPU (2 processes, 1 GPU) the sums go through host copies and MPI
instead, with the same result; ``NcclAverager.transport`` says which ("nccl" or "mpi-host").
:func:`averager` gives the world's one averager (made on first use); data-parallel training on GPU
parameters (:mod:`.data_parallel`) reduces its gradient buckets through it. Making it selects the
process's GPU: make it (``averager()``) before putting arrays on the GPU.

Under ``mpiexec``, on a machine with GPUs and CuPy::

    avg = averager()                        # one per world; call it before moving arrays to the GPU
    grads = avg.mean(grads)                 # a pytree of funcgrad GPU arrays (or CuPy arrays)

Without CuPy, ``averager()`` raises an ImportError that says what to install.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from funcgrad.backends.gpu import array as _gpu
from funcgrad.distributed import _runtime
from funcgrad.tree_util import tree_flatten, tree_unflatten

_LOCAL_RANK_VARS = ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK")
_NCCL_TYPES = {np.dtype(np.float16): "NCCL_FLOAT16", np.dtype(np.float32): "NCCL_FLOAT32",
               np.dtype(np.float64): "NCCL_FLOAT64"}


def _local_rank_and_size(comm: Any) -> tuple[int, int]:
    for var in _LOCAL_RANK_VARS:
        if os.environ.get(var, "").isdigit():
            local = int(os.environ[var])
            break
    else:
        local = comm.Get_rank() if comm is not None else 0
    hosts = comm.allgather(os.uname().nodename) if comm is not None else [os.uname().nodename]
    return local, hosts.count(os.uname().nodename)


def _device_ptr(buf: Any) -> int:
    """The address of ``buf``'s first element (CuPy: ``buf.data.ptr``; the tests' numpy stand-in: ctypes)."""
    ptr = getattr(getattr(buf, "data", None), "ptr", None)
    return int(ptr) if ptr is not None else int(buf.ctypes.data)


class NcclAverager:
    """Sums and means of GPU arrays over the processes of the world: NCCL when each process has a
    GPU of its own, host copies and MPI when processes share one.

    ``NcclAverager()`` imports CuPy, picks this process's GPU and makes the NCCL communicator
    (collective: every process of the world must make one); :func:`averager` keeps one per world.
    """

    def __init__(self) -> None:
        try:
            import cupy
            from cupy.cuda import nccl
        except ImportError as e:
            raise ImportError("NcclAverager needs CuPy with NCCL (pip install cupy-cuda12x) and a GPU") from e
        comm, size = _runtime.comm(), _runtime.process_count()
        local, on_node = _local_rank_and_size(comm)
        gpus = cupy.cuda.runtime.getDeviceCount()
        if gpus < 1:
            raise RuntimeError("NcclAverager: no GPU visible to this process")
        self.device = local % gpus
        cupy.cuda.Device(self.device).use()
        communicator = None
        if size > 1 and on_node <= gpus:
            uid = nccl.get_unique_id() if _runtime.process_index() == 0 else None
            uid = comm.bcast(uid, root=0)
            communicator = nccl.NcclCommunicator(size, uid, _runtime.process_index())
        self._bind(cupy, comm, size, communicator, nccl)

    @classmethod
    def from_parts(cls, *, xp: Any, comm: Any, size: int, communicator: Any = None, nccl: Any = None
                   ) -> "NcclAverager":
        """An averager over given parts: the array module ``xp``, the MPI ``comm`` of ``size`` processes,
        and an NCCL ``communicator`` (with the ``nccl`` module for its constants) or None for host copies."""
        self = cls.__new__(cls)
        self.device = 0
        self._bind(xp, comm, size, communicator, nccl)
        return self

    def _bind(self, xp: Any, comm: Any, size: int, communicator: Any, nccl: Any) -> None:
        self.xp, self.comm, self.size = xp, comm, int(size)
        self._nccl, self._nccl_mod = communicator, nccl
        self.transport = "nccl" if communicator is not None else "mpi-host"

    # ---------------------------------------------------------------- raw buffers

    def _nccl_type(self, dtype: Any, what: str) -> Any:
        name = _NCCL_TYPES.get(np.dtype(dtype))
        if name is None:
            raise TypeError(f"NcclAverager.{what}: NCCL reduces float16/float32/float64 buffers, got {dtype}")
        return getattr(self._nccl_mod, name)

    def _stream(self) -> int:
        cuda = getattr(self.xp, "cuda", None)   # (the tests' numpy stand-in has no streams)
        return cuda.get_current_stream().ptr if cuda is not None else 0

    def sum_(self, buf: Any) -> Any:
        """Sum the contiguous 1-D float CuPy array ``buf`` across processes, in place; returns it."""
        if self.size == 1:
            return buf
        if self._nccl is not None:
            self._nccl.allReduce(_device_ptr(buf), _device_ptr(buf), buf.size, self._nccl_type(buf.dtype, "sum_"),
                                 self._nccl_mod.NCCL_SUM, self._stream())
            return buf
        from mpi4py import MPI
        host = np.ascontiguousarray(self.xp.asnumpy(buf))
        self.comm.Allreduce(MPI.IN_PLACE, host, op=MPI.SUM)
        buf[...] = self.xp.asarray(host)
        return buf

    def bcast_(self, buf: Any, root: int = 0) -> Any:
        """Overwrite the contiguous CuPy array ``buf`` with process ``root``'s, in place; returns it."""
        if self.size == 1:
            return buf
        if self._nccl is not None:
            self._nccl.bcast(_device_ptr(buf), buf.size, self._nccl_type(buf.dtype, "bcast_"), root,
                             self._stream())
            return buf
        host = np.ascontiguousarray(self.xp.asnumpy(buf))
        self.comm.Bcast(host, root=root)
        buf[...] = self.xp.asarray(host)
        return buf

    # ---------------------------------------------------------------- funcgrad arrays

    def check_device(self, arrays: Sequence[Any], what: str) -> None:
        """A ValueError unless the GPU ``arrays`` live on this process's GPU (``self.device``)."""
        for x in arrays:
            device = getattr(getattr(getattr(x, "_value", x), "device", None), "id", self.device)
            if device != self.device:
                raise ValueError(
                    f"{what}: an array lives on GPU {device}, but this process uses GPU {self.device} (its local "
                    "rank modulo the GPUs on the node); call funcgrad.distributed._nccl.averager() first thing "
                    "(it selects the process's GPU), then put the arrays on the GPU")

    def _flat(self, arrays: Sequence[Any], what: str) -> Any:
        values = [self.xp.asarray(getattr(x, "_value", x)) for x in arrays]
        dtypes = {np.dtype(v.dtype) for v in values}
        if len(dtypes) != 1:
            raise TypeError(f"NcclAverager.{what}: the arrays of one call must share a dtype, got "
                            f"{sorted(str(d) for d in dtypes)}")
        flat = self.xp.asarray(self.xp.concatenate([v.ravel() for v in values]))   # a fresh buffer, ours to write
        return values, flat

    def _pieces(self, flat: Any, values: Sequence[Any]) -> list:
        out, offset = [], 0
        for v in values:
            out.append(_gpu.backend.from_buffer(flat[offset:offset + v.size].reshape(v.shape), copy=False))
            offset += v.size
        return out

    def sum_scaled(self, arrays: Sequence[Any], scale: float = 1.0) -> list:
        """``sum over processes of scale * x`` for each GPU array ``x`` of ``arrays`` (one dtype), as
        funcgrad GPU arrays: one collective for all of them (a bucket)."""
        values, flat = self._flat(arrays, "sum_scaled")
        if scale != 1.0:
            flat *= scale
        return self._pieces(self.sum_(flat), values)

    def broadcast(self, arrays: Sequence[Any], root: int = 0) -> list:
        """The GPU ``arrays`` (one dtype) as process ``root`` has them, as funcgrad GPU arrays."""
        values, flat = self._flat(arrays, "broadcast")
        return self._pieces(self.bcast_(flat, root), values)

    def mean(self, tree: Any) -> Any:
        """``tree`` (GPU arrays of one dtype) averaged across processes, as funcgrad GPU arrays."""
        leaves, treedef = tree_flatten(tree)
        if not leaves:
            return tree
        return tree_unflatten(treedef, self.sum_scaled(leaves, 1.0 / self.size))


_cache: dict[str, Any] = {"world": None, "averager": None}


def averager() -> NcclAverager:
    """The world's :class:`NcclAverager`, made on first use (a collective: every process calls it)."""
    w = _runtime.world()
    if _cache["world"] is not w:
        _cache["averager"] = NcclAverager()
        _cache["world"] = w
    return _cache["averager"]


def device_averager(buf: Any) -> NcclAverager | None:
    """The world's averager if it is made already and sums ``buf``'s dtype through NCCL, else None.

    Never makes one: making it selects the process's GPU, which must come before arrays go there.
    """
    avg = _cache["averager"]
    if avg is None or _cache["world"] is not _runtime.world() or avg.transport != "nccl":
        return None
    return avg if np.dtype(buf.dtype) in _NCCL_TYPES else None


def device_sum(avg: NcclAverager, buf: Any) -> Any:
    """The sum over the processes of the GPU buffer ``buf``, a new buffer (NCCL all-reduce)."""
    out = avg.xp.array(buf, copy=True)   # contiguous, ours to write
    avg.sum_(out.reshape(-1))
    return out


_runtime.use_device_sum(device_averager, device_sum)
