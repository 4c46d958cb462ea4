"""vjp, jvp and linearize: the pytree wrappers of the flat reverse- and forward-mode drivers.

A tangent or cotangent must match its primal's shape and dtype (as in JAX);
``_AuxAsOutputs`` carries a function's ``aux`` through a flat driver that
knows nothing of it (jvp here; jacfwd's vmap too).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad import _core
from funcgrad._argspec import as_leaf, fun_name as _fun_name
from funcgrad._core import Array, Tracer, as_array
from funcgrad._dtypes import describe
from funcgrad.interpreters.forward import jvp_flat
from funcgrad.interpreters.reverse import vjp_flat
from funcgrad.tree_util import PyTreeDef, flatten_fun, tree_flatten, tree_unflatten


def vjp(f: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """``(f(*primals), pullback)``; ``pullback(ct)`` returns a tuple of cotangents, one per primal.

    >>> y, pullback = vjp(fnp.sin, fnp.zeros(3))
    >>> pullback(fnp.ones(3))     # (Array([1., 1., 1.]),)
    (Array([1., 1., 1.], dtype=float32),)
    """
    leaves, in_tree = tree_flatten(primals)
    leaves = [as_leaf(x, "vjp") for x in leaves]
    flat_fun, out_tree_of = flatten_fun(f, in_tree, has_aux=has_aux, where=f"vjp(has_aux=True): {_fun_name(f)}")
    result = vjp_flat(flat_fun, leaves, has_aux=has_aux)
    outs, pullback_flat = result[0], result[1]
    out_tree = out_tree_of()

    def pullback(ct: Any) -> tuple:
        ct_leaves, ct_tree = tree_flatten(ct)
        if ct_tree != out_tree:
            raise ValueError(f"vjp: the cotangent's structure {ct_tree} does not match the output's {out_tree}")
        ct_leaves = [_matching_tangent(c, o, "vjp: cotangent", "the output") for c, o in zip(ct_leaves, outs)]
        return tuple(tree_unflatten(in_tree, pullback_flat(ct_leaves)))

    out = tree_unflatten(out_tree, outs)
    return (out, pullback, result[2]) if has_aux else (out, pullback)


def _matching_tangent(t: Any, primal: Any, what: str, against: str) -> Any:
    """``t`` as an array with ``primal``'s shape and dtype, or a clear error (as in JAX).

    A tangent (or cotangent) lives in the same space as its primal: an int32
    tangent for a float32 primal is a mistake, not something to convert.
    Python scalars are weakly typed and take a float primal's dtype.
    """
    if type(t) is Array and type(primal) is Array and t._value.shape == primal._value.shape \
            and t._value.dtype is primal._value.dtype:
        return t   # the common case, decided without building avals
    aval = _core.get_aval(primal)
    if isinstance(t, (int, float)) and not isinstance(t, bool) and _dtypes.kind(aval.dtype) in "fc" or \
            isinstance(t, complex) and aval.dtype.kind == "c":
        t = as_array(np.asarray(t, dtype=aval.dtype))
    t = as_leaf(t, what.split(":")[0])
    if tuple(t.shape) != aval.shape:
        raise ValueError(f"{what} {describe(t)} does not match {against} {describe(aval)}: shapes must be equal")
    if t.dtype != aval.dtype:
        raise TypeError(f"{what} {describe(t)} does not match {against} {describe(aval)}: primal and tangent "
                        f"dtypes must be equal, got {t.dtype} for a {aval.dtype} value. Convert it with "
                        f".astype('{aval.dtype}')" + (" (integer and bool values have no derivative: leave "
                                                        "them out of the differentiated arguments)"
                                                        if _dtypes.kind(aval.dtype) != "f" else ""))
    return t


def jvp(f: Callable, primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False) -> tuple:
    """Forward mode: ``(f(*primals), J @ tangents)``.

    With ``has_aux=True``, ``f`` returns ``(output, aux)`` and the result is
    ``(output, J @ tangents, aux)``; ``aux`` is not differentiated.

    >>> jvp(fnp.sin, (fnp.zeros(2),), (fnp.ones(2),))   # (sin(0), cos(0) * 1)
    (Array([0., 0.], dtype=float32), Array([1., 1.], dtype=float32))
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp: primals and tangents must be tuples (one entry per argument of f)")
    p_leaves, p_tree = tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise ValueError(f"jvp: primals {p_tree} and tangents {t_tree} have different structures")
    p_leaves = [as_leaf(x, "jvp") for x in p_leaves]
    t_leaves = [_matching_tangent(t, p, "jvp: tangent", "its primal") for t, p in zip(t_leaves, p_leaves)]
    flat_fun, out_tree = flatten_fun(f, p_tree, has_aux=has_aux, where=f"jvp(has_aux=True): {_fun_name(f)}")
    if not has_aux:
        outs, touts = jvp_flat(flat_fun, p_leaves, t_leaves)
        return tree_unflatten(out_tree(), outs), tree_unflatten(out_tree(), touts)
    with_aux = _AuxAsOutputs(flat_fun)
    outs, touts = jvp_flat(with_aux.run, p_leaves, t_leaves)
    (outs, aux), (touts, _) = with_aux.split(outs), with_aux.split(touts)
    return tree_unflatten(out_tree(), outs), tree_unflatten(out_tree(), touts), aux


class _AuxAsOutputs:
    """A flat function returning ``(outputs, aux)`` (``flatten_fun(..., has_aux=True)``) as one
    returning the array leaves of aux after the outputs, so that a flat driver that knows nothing
    of aux (jvp_flat, vmap_flat) hands them back as it does outputs: their primal values, not
    differentiated. Other aux leaves (numbers, strings) stay as they are, aside. :meth:`split`
    takes the outputs off again and rebuilds ``aux``."""

    __slots__ = ("fun", "n_out", "aux_leaves", "aux_tree", "arrays")

    def __init__(self, fun: Callable):
        self.fun = fun
        self.n_out, self.aux_leaves, self.arrays = 0, [], []
        self.aux_tree: PyTreeDef | None = None   # set by run, which split follows

    def run(self, *xs: Any) -> list:
        outs, aux = self.fun(*xs)
        self.aux_leaves, self.aux_tree = tree_flatten(aux)
        self.arrays = [i for i, a in enumerate(self.aux_leaves) if isinstance(a, (Array, Tracer))]
        self.n_out = len(outs)
        return list(outs) + [self.aux_leaves[i] for i in self.arrays]

    def split(self, results: list) -> tuple[list, Any]:
        """``(outputs, aux)`` from what ``run`` returned (through a driver)."""
        aux_leaves = list(self.aux_leaves)
        for i, a in zip(self.arrays, results[self.n_out:]):
            aux_leaves[i] = a
        assert self.aux_tree is not None, "split before run"
        return list(results[:self.n_out]), tree_unflatten(self.aux_tree, aux_leaves)


def linearize(f: Callable, *primals: Any) -> tuple:
    """``(f(*primals), f_jvp)`` with ``f_jvp(*tangents)`` the jvp at ``primals``.

    This version re-runs the forward pass for each call of ``f_jvp``.

    >>> y, f_jvp = fg.linearize(fnp.sin, fnp.asarray(0.0))
    >>> f_jvp(fnp.asarray(2.0))          # cos(0) * 2
    Array(2., dtype=float32)
    """
    out = f(*primals)
    return out, lambda *tangents: jvp(f, primals, tangents)[1]
