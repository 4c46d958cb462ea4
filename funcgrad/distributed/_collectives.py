"""The collectives of ``funcgrad.lax`` with ``axis_name`` defaulting to the processes of the world.

Each runs MPI on host buffers (Allreduce, Allgather, Reduce_scatter, Alltoall, point-to-point for
ppermute, Bcast), eagerly or as a step of a jitted program; in a one-process world it is the
size-1 case. Under ``vmap(f, axis_name=PROCESS_AXIS)`` the examples stand in for the processes, so
a training step can be checked in one process.

>>> import funcgrad.distributed as dist, funcgrad.numpy as fnp
>>> dist.psum(fnp.ones(3))          # a one-process world; the sum over the processes under mpiexec
Array([1., 1., 1.], dtype=float32)
>>> fg.vmap(dist.psum, axis_name=dist.PROCESS_AXIS)(fnp.arange(3.0))   # three simulated processes
Array([3., 3., 3.], dtype=float32)
"""
from __future__ import annotations

from typing import Any, Sequence

from funcgrad import lax as _lax
from funcgrad.distributed._runtime import PROCESS_AXIS

__all__ = ["all_gather", "all_to_all", "axis_index", "axis_size", "broadcast", "pmax", "pmean", "pmin", "ppermute",
           "pshuffle", "psum", "psum_scatter"]


def psum(x: Any, axis_name: Any = PROCESS_AXIS) -> Any:
    """The sum of each leaf of ``x`` over the processes (or ``axis_name``), on every process.

    >>> import funcgrad.distributed as dist
    >>> dist.psum({"w": fnp.ones(2)})["w"]     # one process: the sum over one
    Array([1., 1.], dtype=float32)
    >>> fg.vmap(dist.psum, axis_name=dist.PROCESS_AXIS)(fnp.arange(3.0))   # three simulated: 0 + 1 + 2
    Array([3., 3., 3.], dtype=float32)
    """
    return _lax.psum(x, axis_name)


def pmean(x: Any, axis_name: Any = PROCESS_AXIS) -> Any:
    """The mean of each leaf of ``x`` over the processes (gradients of data-parallel training).

    >>> import funcgrad.distributed as dist
    >>> dist.pmean(fnp.ones(2))                # one process
    Array([1., 1.], dtype=float32)
    >>> fg.vmap(dist.pmean, axis_name=dist.PROCESS_AXIS)(fnp.arange(3.0))   # three simulated
    Array([1., 1., 1.], dtype=float32)
    """
    return _lax.pmean(x, axis_name)


def pmax(x: Any, axis_name: Any = PROCESS_AXIS) -> Any:
    """The elementwise maximum of each leaf of ``x`` over the processes.

    >>> import funcgrad.distributed as dist
    >>> fg.vmap(dist.pmax, axis_name=dist.PROCESS_AXIS)(fnp.arange(3.0))   # three simulated processes
    Array([2., 2., 2.], dtype=float32)
    """
    return _lax.pmax(x, axis_name)


def pmin(x: Any, axis_name: Any = PROCESS_AXIS) -> Any:
    """The elementwise minimum of each leaf of ``x`` over the processes.

    >>> import funcgrad.distributed as dist
    >>> fg.vmap(dist.pmin, axis_name=dist.PROCESS_AXIS)(fnp.arange(3.0))   # three simulated processes
    Array([0., 0., 0.], dtype=float32)
    """
    return _lax.pmin(x, axis_name)


def all_gather(x: Any, axis_name: Any = PROCESS_AXIS, *, axis: int = 0, tiled: bool = False) -> Any:
    """Every process's leaf stacked along a new axis ``axis`` (``tiled=True``: concatenated along it).

    >>> import funcgrad.distributed as dist
    >>> dist.all_gather(fnp.ones(2)).shape     # (process_count(), 2)
    (1, 2)
    >>> fg.vmap(dist.all_gather, axis_name=dist.PROCESS_AXIS)(fnp.arange(2.0))   # each of two: [0, 1]
    Array([[0., 1.],
           [0., 1.]], dtype=float32)
    """
    return _lax.all_gather(x, axis_name, axis=axis, tiled=tiled)


def psum_scatter(x: Any, axis_name: Any = PROCESS_AXIS, *, scatter_dimension: int = 0, tiled: bool = False) -> Any:
    """The psum of each leaf, of which process ``k`` keeps the ``k``-th slice (block with ``tiled=True``)
    along ``scatter_dimension``.

    >>> import funcgrad.distributed as dist
    >>> dist.psum_scatter(fnp.ones((dist.process_count(), 3))).shape
    (3,)
    >>> x = fnp.arange(4.0).reshape(2, 2)        # two simulated processes hold [0, 1] and [2, 3]
    >>> fg.vmap(dist.psum_scatter, axis_name=dist.PROCESS_AXIS)(x)   # the sum [2, 4], one entry each
    Array([2., 4.], dtype=float32)
    """
    return _lax.psum_scatter(x, axis_name, scatter_dimension=scatter_dimension, tiled=tiled)


def ppermute(x: Any, perm: Sequence[tuple[int, int]], axis_name: Any = PROCESS_AXIS) -> Any:
    """Send each leaf from process ``src`` to ``dst`` for every pair of ``perm``; receivers of nothing get zeros.

    >>> import funcgrad.distributed as dist
    >>> n = 3                                    # simulated processes; dist.process_count() in a program
    >>> ring = lambda x: dist.ppermute(x, [(i, (i + 1) % n) for i in range(n)])
    >>> fg.vmap(ring, axis_name=dist.PROCESS_AXIS)(fnp.array([1.0, 2.0, 3.0]))
    Array([3., 1., 2.], dtype=float32)
    """
    return _lax.ppermute(x, axis_name, perm)


def pshuffle(x: Any, perm: Sequence[int], axis_name: Any = PROCESS_AXIS) -> Any:
    """Process ``i`` receives the leaf of process ``perm[i]``.

    >>> import funcgrad.distributed as dist
    >>> shuffle = lambda x: dist.pshuffle(x, [2, 0, 1])
    >>> fg.vmap(shuffle, axis_name=dist.PROCESS_AXIS)(fnp.array([10.0, 20.0, 30.0]))   # three simulated
    Array([30., 10., 20.], dtype=float32)
    """
    return _lax.pshuffle(x, axis_name, perm)


def all_to_all(x: Any, split_axis: int, concat_axis: int, axis_name: Any = PROCESS_AXIS, *,
               tiled: bool = False) -> Any:
    """Split each leaf along ``split_axis`` into one chunk per process, send chunk ``k`` to process ``k``,
    and join what arrives along ``concat_axis`` (as ``lax.all_to_all``).

    >>> import funcgrad.distributed as dist
    >>> dist.all_to_all(fnp.ones((dist.process_count(), 2)), 0, 0).shape   # (process_count(), 2)
    (1, 2)
    >>> x = fnp.arange(4.0).reshape(2, 2)        # simulated process k holds row k and gets column k
    >>> fg.vmap(lambda x: dist.all_to_all(x, 0, 0), axis_name=dist.PROCESS_AXIS)(x)
    Array([[0., 2.],
           [1., 3.]], dtype=float32)
    """
    return _lax.all_to_all(x, axis_name, split_axis, concat_axis, tiled=tiled)


def axis_index(axis_name: Any = PROCESS_AXIS) -> Any:
    """This process's index (int32; under ``vmap(..., axis_name=PROCESS_AXIS)`` each example's).

    >>> import funcgrad.distributed as dist
    >>> int(dist.axis_index()) == dist.process_index()
    True
    >>> fg.vmap(lambda x: dist.axis_index(), axis_name=dist.PROCESS_AXIS)(fnp.ones(3))   # three simulated
    Array([0, 1, 2], dtype=int32)
    """
    return _lax.axis_index(axis_name)


def axis_size(axis_name: Any = PROCESS_AXIS) -> int:
    """The number of processes (or the size of ``axis_name``), a Python int.

    >>> import funcgrad.distributed as dist
    >>> dist.axis_size() == dist.process_count()
    True
    """
    return _lax.axis_size(axis_name)


def broadcast(tree: Any, root: int = 0, axis_name: Any = PROCESS_AXIS) -> Any:
    """Every process receives process ``root``'s leaves of ``tree`` (initial parameters, a seed).

    The shapes and dtypes must agree on every process. The gradient goes back to ``root`` alone.

    >>> import funcgrad.distributed as dist
    >>> dist.broadcast({"w": fnp.zeros(3)}, root=0)
    {'w': Array([0., 0., 0.], dtype=float32)}
    >>> fg.vmap(lambda x: dist.broadcast(x, root=1), axis_name=dist.PROCESS_AXIS)(fnp.arange(3.0))
    Array([1., 1., 1.], dtype=float32)
    """
    return _lax.pbroadcast(tree, axis_name, root)
