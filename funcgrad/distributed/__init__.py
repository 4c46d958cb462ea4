"""``funcgrad.distributed``: data-parallel programs across processes, on MPI.

>>> import funcgrad.distributed as dist
>>> dist.initialize()           # a plain `python` run is a one-process world
>>> dist.process_index(), dist.process_count()
(0, 1)
"""
from funcgrad.distributed._runtime import (PROCESS_AXIS, barrier, initialize, process_count,  # noqa: F401
                                           process_index)

__all__ = ["PROCESS_AXIS", "barrier", "initialize", "process_count", "process_index"]

from funcgrad.distributed.data_parallel import (DataParallel, broadcast_params, data_parallel,  # noqa: E402
                                                optimizer_state_bytes, shard_batch, shard_bounds)
from funcgrad.distributed._buckets import Bucket, plan_buckets  # noqa: E402
from funcgrad.distributed.zero import check_elementwise  # noqa: E402

__all__ += ["Bucket", "DataParallel", "broadcast_params", "check_elementwise", "data_parallel",
            "optimizer_state_bytes", "plan_buckets", "shard_batch", "shard_bounds"]
