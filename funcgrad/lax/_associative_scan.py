"""``associative_scan``: an inclusive scan with an associative operation, in ``O(log n)`` rounds.

The odd-even recursion of JAX (after Blelloch, "Prefix Sums and Their
Applications", 1990), written with static strided slices, ``concatenate``
and reshapes around the user's ``fn``: it is composite, so ``grad``, ``jvp``,
``vmap`` and ``jit`` go through it like any other function of primitives.

One round combines neighbouring pairs (``fn(x[0::2], x[1::2])``, one call
on half-length arrays), scans that half-length sequence recursively (which
gives the results at odd positions), then combines each odd result with the
next even element (the results at even positions) and interleaves the two.
``fn`` runs about ``2 log2(n)`` times, each time on whole arrays.
"""
from __future__ import annotations

from typing import Any, Callable

from funcgrad import _core
from funcgrad._dtypes import describe
from funcgrad.primitives.indexing import concatenate_p, flip_p, getitem
from funcgrad.primitives.shape import reshape, shape_of
from funcgrad.tree_util import tree_flatten, tree_unflatten

__all__ = ["associative_scan"]


def associative_scan(fn: Callable[[Any, Any], Any], elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """Every prefix of ``elems`` along ``axis`` combined with ``fn``, as ``jax.lax.associative_scan``.

    ``fn(a, b)`` must be associative (``fn(a, fn(b, c)) == fn(fn(a, b), c)``) and elementwise
    over ``axis``: it gets two pytrees like ``elems`` whose arrays have some length along
    ``axis`` and returns one of the same structure and shapes. The result's ``k``-th element
    along ``axis`` is ``fn(...fn(fn(x0, x1), x2)..., xk)``; with ``reverse`` the prefixes run
    from the end. ``fn`` need not be commutative (operands keep their order).

    >>> associative_scan(fnp.add, fnp.arange(4))
    Array([0, 1, 3, 6], dtype=int32)
    >>> associative_scan(fnp.add, fnp.arange(4), reverse=True)
    Array([6, 6, 5, 3], dtype=int32)
    >>> mats = fnp.stack([fnp.eye(2) * 2.0] * 3)
    >>> associative_scan(fnp.matmul, mats)[:, 0, 0]              # running matrix products
    Array([2., 4., 8.], dtype=float32)
    """
    if not callable(fn):
        raise TypeError(f"associative_scan: fn must be callable (an associative binary operation), got "
                        f"{type(fn).__name__}")
    leaves, tree = tree_flatten(elems)
    if not leaves:
        raise ValueError("associative_scan: elems holds no arrays; pass an array or a pytree of arrays")
    leaves = [_core.as_array(x) for x in leaves]
    axis = _check_axis(leaves, axis)
    if reverse:
        leaves = [flip_p.bind(x, axes=(axis,)) for x in leaves]

    def combine(a: list, b: list) -> list:
        out, out_tree = tree_flatten(fn(tree_unflatten(tree, a), tree_unflatten(tree, b)))
        _check_combined(out_tree, tree, out, a)
        return out

    scanned = _scan(combine, leaves, axis)
    if reverse:
        scanned = [flip_p.bind(x, axes=(axis,)) for x in scanned]
    return tree_unflatten(tree, scanned)


def _check_axis(leaves: list, axis: int) -> int:
    """``axis`` made non-negative (against the first array), after checking every array has it
    with the same length."""
    rank = leaves[0].ndim
    if not -rank <= axis < rank:
        raise ValueError(f"associative_scan: axis {axis} is out of range for the array {describe(leaves[0])} "
                         f"of elems")
    axis %= rank
    length = leaves[0].shape[axis]
    if any(x.ndim <= axis or x.shape[axis] != length for x in leaves):
        raise ValueError(f"associative_scan: the arrays of elems must have the same length along axis {axis}, "
                         f"got {', '.join(describe(x) for x in leaves)}")
    return axis


def _check_combined(out_tree: Any, tree: Any, out: list, a: list) -> None:
    if out_tree != tree:
        raise TypeError(f"associative_scan: fn must return the structure of elems ({tree}), got {out_tree}")
    for k, (o, x) in enumerate(zip(out, a)):
        if tuple(shape_of(o)) != tuple(shape_of(x)):
            raise ValueError(f"associative_scan: fn must return arrays of its operands' shapes: leaf {k} of "
                             f"its result is {describe(o)} for operands {describe(x)} (fn must act elementwise "
                             "along the scanned axis)")


def _slice(x: Any, axis: int, start: int | None, stop: int | None = None, step: int | None = None) -> Any:
    return getitem(x, (slice(None),) * axis + (slice(start, stop, step),))


def _scan(combine: Callable[[list, list], list], elems: list, axis: int) -> list:
    n = shape_of(elems[0])[axis]
    if n < 2:
        return elems
    # Pairs (x0, x1), (x2, x3), ...: their scan is the result at the odd positions 1, 3, 5, ...
    odd = _scan(combine, combine([_slice(x, axis, 0, -1, 2) for x in elems],
                                 [_slice(x, axis, 1, None, 2) for x in elems]), axis)
    # The even positions 2, 4, ...: the odd result before each, combined with that element.
    before = odd if n % 2 else [_slice(x, axis, 0, -1) for x in odd]
    even = combine(before, [_slice(x, axis, 2, None, 2) for x in elems])
    even = [concatenate_p.bind(_slice(x, axis, 0, 1), e, axis=axis) for x, e in zip(elems, even)]
    return [_interleave(e, o, axis) for e, o in zip(even, odd)]


def _interleave(a: Any, b: Any, axis: int) -> Any:
    """``a0, b0, a1, b1, ...`` along ``axis`` (``a`` as long as ``b`` or one longer)."""
    n = shape_of(b)[axis]
    head = _slice(a, axis, 0, n) if shape_of(a)[axis] > n else a
    shape = tuple(shape_of(b))
    pairs = concatenate_p.bind(reshape(head, shape[:axis + 1] + (1,) + shape[axis + 1:]),
                               reshape(b, shape[:axis + 1] + (1,) + shape[axis + 1:]), axis=axis + 1)
    out = reshape(pairs, shape[:axis] + (2 * n,) + shape[axis + 1:])
    return out if head is a else concatenate_p.bind(out, _slice(a, axis, n), axis=axis)
