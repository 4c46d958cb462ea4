"""``funcgrad.distributed``: data-parallel programs across processes, on MPI.

The process world (``initialize``, ``process_index``, ``process_count``, ``barrier``) and the
collectives of ``funcgrad.lax`` over its axis, :data:`PROCESS_AXIS` (``psum``, ``pmean``,
``all_gather``, ``psum_scatter``, ``ppermute``, ``all_to_all``, ``broadcast``, ...): eager or
inside ``jit``, differentiable with ``shard_map``'s convention, checked for matching shapes and
bounded by a timeout (see the guide "Collectives and processes").

>>> import funcgrad.distributed as dist
>>> dist.initialize()           # a plain `python` run is a one-process world
>>> dist.process_index(), dist.process_count()
(0, 1)
"""
from funcgrad.distributed._runtime import (PROCESS_AXIS, barrier, initialize, process_count,  # noqa: F401
                                           process_index, timeout)
from funcgrad.distributed._collectives import (all_gather, all_to_all, axis_index, axis_size,  # noqa: F401
                                               broadcast, pmax, pmean, pmin, ppermute, pshuffle, psum,
                                               psum_scatter)

__all__ = ["PROCESS_AXIS", "all_gather", "all_to_all", "axis_index", "axis_size", "barrier", "broadcast",
           "initialize", "pmax", "pmean", "pmin", "ppermute", "process_count", "process_index", "pshuffle", "psum",
           "psum_scatter", "timeout"]

from funcgrad.distributed.data_parallel import (DataParallel, broadcast_params, data_parallel,  # noqa: E402
                                                optimizer_state_bytes, shard_batch, shard_bounds)
from funcgrad.distributed._buckets import Bucket, plan_buckets  # noqa: E402
from funcgrad.distributed.zero import check_elementwise  # noqa: E402

__all__ += ["Bucket", "DataParallel", "broadcast_params", "check_elementwise", "data_parallel",
            "optimizer_state_bytes", "plan_buckets", "shard_batch", "shard_bounds"]
