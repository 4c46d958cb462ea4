"""vmap: the pytree wrapper of the flat batching driver, with its checks of in_axes, out_axes,
axis_name and axis_size.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from funcgrad._argspec import as_leaf, fun_name as _fun_name
from funcgrad._dtypes import describe
from funcgrad.interpreters.batching import vmap_flat
from funcgrad.tree_util import broadcast_prefix, flatten_fun, tree_flatten, tree_unflatten


def vmap(f: Callable, in_axes: Any = 0, out_axes: Any = 0, axis_name: Any = None, axis_size: int | None = None,
         spmd_axis_name: Any = None, sum_match: bool = False) -> Callable:
    """Vectorise ``f`` over axis ``in_axes`` of its arguments.

    ``in_axes``: an int, None (not mapped) or a tuple with one entry per
    positional argument, each an int/None or a pytree prefix of it.
    ``axis_size``: the batch size, needed when no argument is mapped (then every
    output is repeated ``axis_size`` times); when given with mapped arguments it must
    match them. ``axis_name`` names the mapped axis for collectives inside ``f``
    (``lax.psum(x, axis_name)`` sums over the examples; the examples play the part of
    devices, with ``shard_map``'s derivative convention); ``spmd_axis_name`` is not supported.

    >>> loss = lambda w, x: fnp.sum((x * w) ** 2)
    >>> vmap(grad(loss), in_axes=(None, 0))(fnp.ones(2), fnp.arange(4.0).reshape(2, 2))   # per-example
    Array([[ 0.,  2.],
           [ 8., 18.]], dtype=float32)
    >>> vmap(lambda x: x / lax.psum(x, "i"), axis_name="i")(fnp.array([1.0, 3.0]))   # named axis
    Array([0.25, 0.75], dtype=float32)
    """
    name = _fun_name(f)
    if spmd_axis_name is not None:
        raise NotImplementedError(f"vmap({name}): spmd_axis_name (sharding of the mapped axis) is not supported "
                                  "by funcgrad; leave it None (axis_name alone names the axis for collectives)")
    if axis_name is not None:
        try:
            hash(axis_name)
        except TypeError:
            raise TypeError(f"vmap({name}): axis_name must be hashable (a string, usually), got {axis_name!r}") \
                from None
        if isinstance(axis_name, tuple):
            raise TypeError(f"vmap({name}): axis_name must be a single name, got the tuple {axis_name!r}; nest "
                            "one vmap per name")
    if sum_match:
        raise NotImplementedError(f"vmap({name}): sum_match=True is not supported; leave it False")
    if axis_size is not None and (not isinstance(axis_size, (int, np.integer)) or isinstance(axis_size, bool)
                                  or axis_size < 0):
        raise TypeError(f"vmap({name}): axis_size must be a non-negative int or None, got {axis_size!r}")

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        axes_prefix = in_axes
        if isinstance(in_axes, list):
            axes_prefix = tuple(in_axes)
        if isinstance(axes_prefix, tuple) and len(axes_prefix) != len(args):
            raise ValueError(f"vmap({name}): in_axes has {len(axes_prefix)} entries but {len(args)} positional "
                             "arguments were given")
        dims = broadcast_prefix(axes_prefix if isinstance(axes_prefix, tuple) else (axes_prefix,) * len(args),
                                args, f"vmap({name}) in_axes")
        fun = f
        if kwargs:
            # As JAX: keyword arguments are mapped over their leading axis (in_axes covers positionals only).
            dims = dims + [0] * len(tree_flatten(kwargs)[0])
            args = (args, kwargs)
            fun = _with_kwargs(f)
        leaves, in_tree = tree_flatten(args)
        leaves = [as_leaf(x, f"vmap({name})") if d is not None else x for x, d in zip(leaves, dims)]
        size, dims = _axis_size(leaves, dims, name, axis_size)
        flat_fun, out_tree_of = flatten_fun(fun, in_tree)

        def resolve_out_dims() -> list:
            out_tree = out_tree_of()
            if out_axes is None or isinstance(out_axes, int):
                return [out_axes] * out_tree.num_leaves
            example = tree_unflatten(out_tree, [0] * out_tree.num_leaves)
            return broadcast_prefix(out_axes, example, f"vmap({name}) out_axes")

        outs = vmap_flat(flat_fun, leaves, dims, size, out_dims=resolve_out_dims, axis_name=axis_name)
        return tree_unflatten(out_tree_of(), outs)

    return wrapped


def _with_kwargs(f: Callable) -> Callable:
    return lambda a, kw: f(*a, **kw)


def _axis_size(leaves: list, dims: list, name: str, axis_size: int | None = None) -> tuple[int, list]:
    sizes, norm = [], []
    for x, d in zip(leaves, dims):
        if d is None:
            norm.append(None)
            continue
        if not isinstance(d, int):
            raise TypeError(f"vmap({name}): in_axes entries must be ints or None, got {d!r}")
        nd = len(x.shape)
        if not -nd <= d < nd:
            raise ValueError(f"vmap({name}): in_axes={d} is out of range for an argument {describe(x)}")
        norm.append(d % nd)
        sizes.append(x.shape[d % nd])
    if axis_size is not None:
        if any(n != axis_size for n in sizes):
            raise ValueError(f"vmap({name}): axis_size={axis_size} does not match the mapped arguments' sizes "
                             f"along their mapped axes: {sorted(set(sizes))}")
        return int(axis_size), norm
    if not sizes:
        raise ValueError(f"vmap({name}): no argument is mapped (all in_axes are None); pass axis_size= to give "
                         "the batch size")
    if len(set(sizes)) > 1:
        raise ValueError(f"vmap({name}): mapped arguments have different sizes along their mapped axes: "
                         f"{sorted(set(sizes))}")
    return sizes[0], norm

