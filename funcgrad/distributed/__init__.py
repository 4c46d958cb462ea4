"""``funcgrad.distributed``: data-parallel programs across processes, on MPI.

>>> import funcgrad.distributed as dist
>>> dist.initialize()           # a plain `python` run is a one-process world
>>> dist.process_index(), dist.process_count()
(0, 1)
"""
from funcgrad.distributed._runtime import (PROCESS_AXIS, barrier, initialize, process_count,  # noqa: F401
                                           process_index)

__all__ = ["PROCESS_AXIS", "barrier", "initialize", "process_count", "process_index"]
