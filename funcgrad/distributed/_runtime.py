"""The process world: who we are, how many we are, and the MPI communicator that joins us.

A plain ``python script.py`` is a one-process world and never imports MPI. Under
``mpiexec``/``mpirun``/``srun`` (detected from the launcher's environment) the world
is MPI's ``COMM_WORLD``, through mpi4py.
"""
from __future__ import annotations

import os
import threading
from typing import Any

#: The name of the axis that runs across processes: collectives name it as vmap's ``axis_name``.
PROCESS_AXIS = "processes"

# Environment variables that MPI launchers (MPICH/Hydra, Open MPI, PMIx, Slurm) set in every rank.
_LAUNCHER_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS")

_lock = threading.Lock()
_world: "_World | None" = None


class _World:
    __slots__ = ("comm", "rank", "size")

    def __init__(self, comm: Any, rank: int, size: int):
        self.comm = comm
        self.rank = rank
        self.size = size


def _launched_by_mpi() -> bool:
    for var in _LAUNCHER_SIZE_VARS:
        value = os.environ.get(var)
        if value is not None and value.strip().isdigit() and int(value) > 1:
            return True
    return False


def initialize(use_mpi: bool | None = None) -> None:
    """Join the process world (idempotent).

    ``use_mpi=None`` uses MPI when the script was started by an MPI launcher with
    more than one process; ``True`` always uses MPI (mpi4py must be installed);
    ``False`` makes a one-process world.
    """
    global _world
    with _lock:
        if _world is not None:
            return
        if use_mpi is None:
            use_mpi = _launched_by_mpi()
        if not use_mpi:
            _world = _World(None, 0, 1)
            return
        try:
            from mpi4py import MPI
        except ImportError as e:
            raise ImportError(
                "funcgrad.distributed: this script was started by an MPI launcher (mpiexec/mpirun/srun) but "
                "mpi4py is not installed. Install it with `pip install mpi4py mpich` (or mpi4py against your "
                "system's MPI), or run the script with plain `python`.") from e
        comm = MPI.COMM_WORLD
        _world = _World(comm, comm.Get_rank(), comm.Get_size())


def world() -> _World:
    """The world, joined on first use."""
    if _world is None:
        initialize()
    return _world  # type: ignore[return-value]


def comm() -> Any:
    """The MPI communicator of the world (None in a one-process world)."""
    return world().comm


def process_index() -> int:
    """This process's index in the world, 0 .. process_count() - 1."""
    return world().rank


def process_count() -> int:
    """The number of processes in the world (1 under plain ``python``)."""
    return world().size


def barrier() -> None:
    """Wait until every process reaches this call."""
    c = world().comm
    if c is not None:
        c.Barrier()
