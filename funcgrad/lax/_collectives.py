"""Collectives over named axes, as ``jax.lax``'s: psum, pmean, pmax, pmin, all_gather, psum_scatter,
ppermute, pshuffle, all_to_all, axis_index, axis_size, pbroadcast.

A name is bound by ``vmap(f, axis_name=name)`` (the examples act as devices) or is
``funcgrad.distributed.PROCESS_AXIS`` (``"processes"``, the processes of the world, always bound).
Every function takes a pytree and ``axis_name`` as a name or a tuple of names. Derivatives follow
``shard_map``'s convention: each device differentiates its own program, so on every device
``grad(lambda x: psum(x * x, "i").sum())(x) == 2 * x``.

>>> import funcgrad as fg, funcgrad.lax as lax, funcgrad.numpy as fnp
>>> fg.vmap(lambda x: lax.psum(x, "i"), axis_name="i")(fnp.arange(4.0))      # four devices: 0 + 1 + 2 + 3
Array([6., 6., 6., 6.], dtype=float32)
>>> fg.vmap(fg.grad(lambda x: lax.psum(x * x, "i").sum()), axis_name="i")(fnp.arange(3.0))   # 2 * x
Array([0., 2., 4.], dtype=float32)
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import as_array
from funcgrad.primitives import collectives as _P
from funcgrad.primitives.elementwise import add, convert, div, mul
from funcgrad.tree_util import tree_map

__all__ = ["all_gather", "all_gather_p", "all_to_all", "all_to_all_p", "axis_index", "axis_size", "pbroadcast",
           "pbroadcast_p", "pcast", "pmax", "pmax_p", "pmean", "pmin", "pmin_p", "ppermute", "ppermute_p", "pshuffle",
           "psum", "psum_p", "psum_scatter", "psum_scatter_p", "pswapaxes", "pvary_p"]

psum_p, pmax_p, pmin_p = _P.psum_p, _P.pmax_p, _P.pmin_p
all_gather_p, psum_scatter_p, ppermute_p, all_to_all_p = (_P.all_gather_p, _P.psum_scatter_p, _P.ppermute_p,
                                                          _P.all_to_all_p)
pbroadcast_p, pvary_p = _P.pbroadcast_p, _P.pvary_p


def _no_groups(op: str, axis_index_groups: Any) -> None:
    if axis_index_groups is not None:
        raise NotImplementedError(f"{op}: axis_index_groups is not supported; leave it None (split the axis "
                                  "with nested vmaps, one name per level, instead)")


def _leaves(op: str, x: Any, axis_name: Any, fun: Any) -> Any:
    axes = _P.axes_of(axis_name)
    _P.check_bound(op, axes)
    return tree_map(lambda leaf: fun(as_array(leaf), axes), x)


def psum(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """The sum of ``x`` over the devices of ``axis_name``, on every device (bool sums as int).

    >>> fg.vmap(lambda x: lax.psum(x, "i"), axis_name="i")(fnp.arange(4.0))
    Array([6., 6., 6., 6.], dtype=float32)
    """
    _no_groups("psum", axis_index_groups)
    return _leaves("psum", x, axis_name, _P.psum)


def pmean(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """The mean of ``x`` over the devices of ``axis_name`` (integers give floats, as in JAX).

    >>> fg.vmap(lambda x: lax.pmean(x, "i"), axis_name="i")(fnp.arange(4.0))
    Array([1.5, 1.5, 1.5, 1.5], dtype=float32)
    """
    _no_groups("pmean", axis_index_groups)

    def mean(leaf: Any, axes: tuple) -> Any:
        total = _P.psum(leaf, axes)
        if _dtypes.kind(total.dtype) not in "fc":
            total = convert(total, np.result_type(float))
        return div(total, _P.total_size(axes))
    return _leaves("pmean", x, axis_name, mean)


def pmax(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """The elementwise maximum of ``x`` over the devices of ``axis_name`` (ties share the gradient).

    >>> fg.vmap(lambda x: lax.pmax(x, "i"), axis_name="i")(fnp.arange(4.0))
    Array([3., 3., 3., 3.], dtype=float32)
    """
    _no_groups("pmax", axis_index_groups)
    return _leaves("pmax", x, axis_name, _P.pmax)


def pmin(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """The elementwise minimum of ``x`` over the devices of ``axis_name`` (ties share the gradient).

    >>> fg.vmap(lambda x: lax.pmin(x, "i"), axis_name="i")(fnp.arange(4.0))
    Array([0., 0., 0., 0.], dtype=float32)
    """
    _no_groups("pmin", axis_index_groups)
    return _leaves("pmin", x, axis_name, _P.pmin)


def _one_name(op: str, axis_name: Any) -> tuple:
    axes = _P.axes_of(axis_name)
    if len(axes) != 1:
        raise NotImplementedError(f"{op}: over several axis names {axes!r} at once is not supported; apply it to "
                                  "one name at a time")
    return axes


def all_gather(x: Any, axis_name: Any, *, axis_index_groups: Any = None, axis: int = 0, tiled: bool = False,
               to: str = "varying") -> Any:
    """Every device's ``x``, stacked along a new axis ``axis`` (``tiled=True``: concatenated along ``axis``).

    Shape ``x.shape`` with the axis size inserted at ``axis`` (tiled: ``x.shape[axis]`` times the size).

    >>> fg.vmap(lambda x: lax.all_gather(x, "i"), axis_name="i")(fnp.arange(2.0))   # each device: [0, 1]
    Array([[0., 1.],
           [0., 1.]], dtype=float32)
    """
    _no_groups("all_gather", axis_index_groups)
    _one_name("all_gather", axis_name)
    return _leaves("all_gather", x, axis_name,
                   lambda leaf, axes: _P.all_gather(leaf, axes, axis=int(axis), tiled=bool(tiled)))


def psum_scatter(x: Any, axis_name: Any, *, scatter_dimension: int = 0, axis_index_groups: Any = None,
                 tiled: bool = False) -> Any:
    """The psum of ``x``, of which device ``k`` keeps the ``k``-th slice along ``scatter_dimension``.

    ``tiled=False``: that dimension must equal the axis size and is removed; ``tiled=True``: it must be
    divisible by the size, and each device keeps a block of ``x.shape[d] // size``.

    >>> x = fnp.arange(4.0).reshape(2, 2)          # device 0 holds [0, 1], device 1 holds [2, 3]
    >>> fg.vmap(lambda x: lax.psum_scatter(x, "i"), axis_name="i")(x)   # the sum [2, 4], one entry each
    Array([2., 4.], dtype=float32)
    """
    _no_groups("psum_scatter", axis_index_groups)
    _one_name("psum_scatter", axis_name)
    return _leaves("psum_scatter", x, axis_name, lambda leaf, axes: _P.psum_scatter(
        leaf, axes, scatter_dimension=int(scatter_dimension), tiled=bool(tiled)))


def ppermute(x: Any, axis_name: Any, perm: Sequence[tuple[int, int]]) -> Any:
    """Send ``x`` from device ``src`` to device ``dst`` for each pair ``(src, dst)`` of ``perm``; a device
    that receives nothing gets zeros.

    >>> shift = lambda x: lax.ppermute(x, "i", [(0, 1), (1, 2)])   # 0 -> 1 -> 2; device 0 receives nothing
    >>> fg.vmap(shift, axis_name="i")(fnp.array([1.0, 2.0, 3.0]))
    Array([0., 1., 2.], dtype=float32)
    """
    _one_name("ppermute", axis_name)
    pairs = _P.normalize_perm(perm)
    return _leaves("ppermute", x, axis_name, lambda leaf, axes: _P.ppermute(leaf, axes, pairs))


def pshuffle(x: Any, axis_name: Any, perm: Sequence[int]) -> Any:
    """Device ``i`` receives the ``x`` of device ``perm[i]`` (``perm`` a permutation of the devices).

    >>> fg.vmap(lambda x: lax.pshuffle(x, "i", [2, 0, 1]), axis_name="i")(fnp.array([10.0, 20.0, 30.0]))
    Array([30., 10., 20.], dtype=float32)
    """
    perm = [int(p) for p in perm]
    if sorted(perm) != list(range(len(perm))):
        raise ValueError(f"pshuffle: perm {perm} must be a permutation of range({len(perm)})")
    return ppermute(x, axis_name, [(src, dst) for dst, src in enumerate(perm)])


def all_to_all(x: Any, axis_name: Any, split_axis: int, concat_axis: int, *, axis_index_groups: Any = None,
               tiled: bool = False) -> Any:
    """Split ``x`` along ``split_axis`` into one chunk per device, send chunk ``k`` to device ``k``, and
    concatenate the chunks received along ``concat_axis`` (``tiled=False``: the split axis must equal
    the size and is removed, and the received chunks are stacked at ``concat_axis``).

    >>> x = fnp.arange(4.0).reshape(2, 2)          # device k holds row k
    >>> fg.vmap(lambda x: lax.all_to_all(x, "i", 0, 0), axis_name="i")(x)   # device k gets column k
    Array([[0., 2.],
           [1., 3.]], dtype=float32)
    """
    _no_groups("all_to_all", axis_index_groups)
    _one_name("all_to_all", axis_name)
    return _leaves("all_to_all", x, axis_name, lambda leaf, axes: _P.all_to_all(
        leaf, axes, split_axis=int(split_axis), concat_axis=int(concat_axis), tiled=bool(tiled)))


def pcast(x: Any, axis_name: Any, *, to: str) -> Any:
    """``x`` unchanged, cast to vary across the devices of ``axis_name`` (``to="varying"``, JAX's ``pvary``).

    funcgrad does not track which values vary; the cast matters to derivatives: its transpose
    is ``psum``, so the gradient of a replicated value cast here sums every device's contribution
    (data-parallel parameters). ``to="reduced"``/``"unreduced"`` (sharding types) are not supported.

    >>> x = fnp.arange(6.0).reshape(3, 2)          # three devices; each one's gradient of w is its x
    >>> fg.vmap(fg.grad(lambda w, x: (lax.pcast(w, "i", to="varying") * x).sum()), in_axes=(None, 0),
    ...         axis_name="i")(fnp.ones(2), x)      # their sum [0 + 2 + 4, 1 + 3 + 5] on every device
    Array([[6., 9.],
           [6., 9.],
           [6., 9.]], dtype=float32)
    """
    if to != "varying":
        raise NotImplementedError(f"pcast: to={to!r} is not supported (funcgrad has no reduced/unreduced "
                                  "sharding types); to='varying' is")
    return _leaves("pcast", x, axis_name, _P.pvary)


def pswapaxes(x: Any, axis_name: Any, axis: int, *, axis_index_groups: Any = None) -> Any:
    """Swap the named axis with positional axis ``axis`` of ``x`` (``all_to_all(x, axis_name, axis, axis)``):
    ``x.shape[axis]`` must equal the axis size.

    >>> fg.vmap(lambda x: lax.pswapaxes(x, "i", 0), axis_name="i")(fnp.arange(4.0).reshape(2, 2))
    Array([[0., 2.],
           [1., 3.]], dtype=float32)
    """
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)


def axis_size(axis_name: Any) -> int:
    """The number of devices along ``axis_name`` (a name or a tuple: the product), a Python int.

    >>> fg.vmap(lambda x: x * lax.axis_size("i"), axis_name="i")(fnp.ones(3))
    Array([3., 3., 3.], dtype=float32)
    """
    axes = _P.axes_of(axis_name)
    _P.check_bound("axis_size", axes)
    return _P.total_size(axes)


def axis_index(axis_name: Any) -> Any:
    """This device's index along ``axis_name`` (int32; a tuple of names: the row-major index over them).

    >>> fg.vmap(lambda x: lax.axis_index("i"), axis_name="i")(fnp.ones(3))
    Array([0, 1, 2], dtype=int32)
    """
    axes = _P.axes_of(axis_name)
    _P.check_bound("axis_index", axes)
    index: Any = as_array(np.int32(0))
    for name in axes:
        index = add(mul(index, np.int32(_P.axis_size(name))), _index_of(name))
    return index


def _index_of(name: Any) -> Any:
    main = _P.find_axis(name)
    if main is None:   # the process axis
        return as_array(np.int32(_P.process_world().rank()))
    # A value mapped over the vmap that binds the name: its examples are 0, 1, ..., size - 1.
    trace = main.trace_type(main)
    tracer_type = type(trace.pure(0))
    return tracer_type(trace, as_array(np.arange(main.data.size, dtype=np.int32)), 0)


def pbroadcast(x: Any, axis_name: Any, source: int) -> Any:
    """Every device receives the ``x`` of device ``source`` (the gradient goes back to ``source`` alone).

    >>> fg.vmap(lambda x: lax.pbroadcast(x, "i", 1), axis_name="i")(fnp.arange(3.0))   # device 1's x
    Array([1., 1., 1.], dtype=float32)
    """
    _one_name("pbroadcast", axis_name)
    return _leaves("pbroadcast", x, axis_name, lambda leaf, axes: _P.pbroadcast(leaf, axes, int(source)))
