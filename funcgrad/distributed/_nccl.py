"""Averaging GPU arrays across processes with NCCL (``cupy.cuda.nccl``).

NCCL's communicator is bootstrapped over MPI: process 0 makes the unique id and broadcasts it.
Each process uses GPU ``local rank % GPUs on the node``. NCCL refuses two processes on one GPU,
so when processes share a GPU (2 processes, 1 GPU) the sum goes through host copies and MPI
instead, with the same result; ``NcclAverager.transport`` says which ("nccl" or "mpi-host").

Under ``mpiexec``, on a machine with GPUs and CuPy::

    avg = NcclAverager()
    grads = avg.mean(grads)                 # a pytree of funcgrad GPU arrays (or CuPy arrays)

Without CuPy, ``NcclAverager()`` raises an ImportError that says what to install.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from funcgrad.distributed import _runtime
from funcgrad.tree_util import tree_flatten, tree_unflatten

_LOCAL_RANK_VARS = ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK")


def _local_rank_and_size(comm: Any) -> tuple[int, int]:
    for var in _LOCAL_RANK_VARS:
        if os.environ.get(var, "").isdigit():
            local = int(os.environ[var])
            break
    else:
        local = comm.Get_rank() if comm is not None else 0
    hosts = comm.allgather(os.uname().nodename) if comm is not None else [os.uname().nodename]
    return local, hosts.count(os.uname().nodename)


def _as_cupy(x: Any) -> Any:
    import cupy
    return cupy.asarray(getattr(x, "_value", x))


class NcclAverager:
    """Mean of GPU arrays over the processes of the world: NCCL when each process has a GPU of its own."""

    def __init__(self) -> None:
        try:
            import cupy
            from cupy.cuda import nccl
        except ImportError as e:
            raise ImportError("NcclAverager needs CuPy with NCCL (pip install cupy-cuda12x) and a GPU") from e
        self.comm = _runtime.comm()
        self.size = _runtime.process_count()
        local, on_node = _local_rank_and_size(self.comm)
        gpus = cupy.cuda.runtime.getDeviceCount()
        if gpus < 1:
            raise RuntimeError("NcclAverager: no GPU visible to this process")
        self.device = local % gpus
        cupy.cuda.Device(self.device).use()
        self.transport = "nccl" if self.size > 1 and on_node <= gpus else "mpi-host"
        self._nccl = None
        if self.transport == "nccl":
            uid = nccl.get_unique_id() if _runtime.process_index() == 0 else None
            uid = self.comm.bcast(uid, root=0)
            self._nccl = nccl.NcclCommunicator(self.size, uid, _runtime.process_index())

    def sum_(self, buf: Any) -> Any:
        """Sum the 1-D float32/float64 CuPy array ``buf`` across processes, in place; returns it."""
        if self.size == 1:
            return buf
        if self._nccl is not None:
            import cupy
            from cupy.cuda import nccl
            kind = {np.dtype(np.float32): nccl.NCCL_FLOAT32, np.dtype(np.float64): nccl.NCCL_FLOAT64,
                    np.dtype(np.float16): nccl.NCCL_FLOAT16}[np.dtype(buf.dtype)]
            self._nccl.allReduce(buf.data.ptr, buf.data.ptr, buf.size, kind, nccl.NCCL_SUM,
                                 cupy.cuda.get_current_stream().ptr)
            return buf
        from mpi4py import MPI
        host = buf.get()
        self.comm.Allreduce(MPI.IN_PLACE, host, op=MPI.SUM)
        buf.set(host)
        return buf

    def mean(self, tree: Any) -> Any:
        """``tree`` (GPU arrays of one dtype) averaged across processes, as funcgrad GPU arrays."""
        import cupy
        from funcgrad.devices import from_dlpack
        leaves, treedef = tree_flatten(tree)
        arrays = [_as_cupy(x) for x in leaves]
        flat = cupy.concatenate([a.ravel() for a in arrays]) if arrays else cupy.zeros(0, np.float32)
        self.sum_(flat)
        flat /= self.size
        out, offset = [], 0
        for a in arrays:
            out.append(from_dlpack(flat[offset:offset + a.size].reshape(a.shape).copy()))
            offset += a.size
        return tree_unflatten(treedef, out)
