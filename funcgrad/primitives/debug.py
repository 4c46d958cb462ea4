"""``debug_callback``: call a Python function on runtime values, for ``fg.debug.print`` / ``callback``.

``debug_callback_p(*values, callback)`` calls ``callback.fn(*numpy values)`` when it runs and
returns a dummy int32 scalar. It has the ``effect`` trait, so the IR passes keep it although
nothing reads its result (and never evaluate it at trace time): under ``jit`` it runs on every
call with that call's values. It has no derivative rules (it is invisible to grad: the primal
values are printed); under ``vmap`` the callback runs once per batch element, as JAX's.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from funcgrad._core import Primitive, add_traits
from funcgrad._dtypes import ShapedArray
from funcgrad.primitives.indexing import concatenate_p, getitem
from funcgrad.primitives.shape import broadcast_to, moveaxis, reshape

__all__ = ["debug_callback_p", "Callback", "debug_callback", "pure_callback_p"]


class Callback:
    """A hashable (by identity) holder for the Python function, so it can be a primitive parameter."""

    __slots__ = ("fn", "name")

    def __init__(self, fn: Callable, name: str = "callback"):
        self.fn, self.name = fn, name

    def __repr__(self) -> str:
        return self.name


debug_callback_p = Primitive("debug_callback")


def _impl(*values: Any, callback: Callback) -> np.ndarray:
    callback.fn(*[np.asarray(v) for v in values])
    return np.zeros((), np.int32)


def _batch(values, dims, size, callback):
    for i in range(size):
        debug_callback_p.bind(*[v if d is None else getitem(v, (slice(None),) * d + (i,))
                                for v, d in zip(values, dims)], callback=callback)
    return np.zeros((), np.int32), None


debug_callback_p.impl = _impl
debug_callback_p.abstract_eval = lambda *values, callback: ShapedArray((), np.dtype(np.int32))
debug_callback_p.batch = _batch
add_traits(debug_callback_p, "effect")


def debug_callback(fn: Callable, values: list, name: str = "callback") -> None:
    """Run ``fn(*numpy values)`` when the program runs (now, eagerly; at each call, under jit)."""
    debug_callback_p.bind(*values, callback=Callback(fn, name))


# ------------------------------------------------------------------ pure_callback
#
# ``pure_callback_p(*values, callback, results, vmap_method)``: ``callback.fn(*numpy values)`` must
# return arrays of the shapes and dtypes in ``results`` (a tuple of ShapedArrays). Pure: unused, it
# is dropped like any primitive. No derivative (as in JAX: wrap it in custom_jvp/custom_vjp).

pure_callback_p = Primitive("pure_callback", multiple_results=True)


def _pure_impl(*values: Any, callback: Callback, results: tuple, vmap_method: Any) -> list:
    outs = callback.fn(*[np.asarray(v) for v in values])
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    if len(outs) != len(results):
        raise ValueError(f"pure_callback: {callback.name} returned {len(outs)} arrays, but result_shape_dtypes "
                         f"declares {len(results)}")
    checked = []
    for k, (o, r) in enumerate(zip(outs, results)):
        o = np.asarray(o)
        if o.shape != r.shape:
            raise ValueError(f"pure_callback: {callback.name} returned an array of shape {o.shape} for result {k}, "
                             f"but result_shape_dtypes declares {r.shape}")
        checked.append(o.astype(r.dtype, copy=False))
    return checked


def _pure_batch(values, dims, size, callback, results, vmap_method):
    if vmap_method in ("expand_dims", "broadcast_all", "legacy_vectorized"):
        moved = []
        for v, d in zip(values, dims):
            if d is None:
                shape = np.shape(v) if not hasattr(v, "shape") else v.shape
                v = reshape(v, (1,) + tuple(shape))
                if vmap_method == "broadcast_all":
                    v = broadcast_to(v, (size,) + tuple(shape))
            else:
                v = moveaxis(v, d, 0)
            moved.append(v)
        batched = tuple(ShapedArray((size,) + r.shape, r.dtype) for r in results)
        outs = pure_callback_p.bind(*moved, callback=callback, results=batched, vmap_method=vmap_method)
        return outs, [0] * len(outs)
    if vmap_method != "sequential":
        raise NotImplementedError(
            f"pure_callback under vmap needs vmap_method: 'sequential' (call {callback.name} once per element), "
            "'expand_dims' (unbatched arguments get a leading axis of size 1) or 'broadcast_all'; got "
            f"{vmap_method!r}")
    per = []
    for i in range(size):
        per.append(pure_callback_p.bind(*[v if d is None else getitem(v, (slice(None),) * d + (i,))
                                          for v, d in zip(values, dims)],
                                        callback=callback, results=results, vmap_method=vmap_method))
    outs = [concatenate_p.bind(*[reshape(p[j], (1,) + r.shape) for p in per], axis=0)
            for j, r in enumerate(results)]
    return outs, [0] * len(outs)


def _pure_no_jvp(primals, tangents, **params):
    raise ValueError("pure_callback has no derivative rule (as in JAX); to differentiate through it, wrap it in "
                     "fg.custom_jvp or fg.custom_vjp")


pure_callback_p.impl = _pure_impl
pure_callback_p.abstract_eval = lambda *values, callback, results, vmap_method: list(results)
pure_callback_p.batch = _pure_batch
pure_callback_p.jvp = _pure_no_jvp


def _pure_no_vjp(ct, primals, out, needs, **params):
    _pure_no_jvp(primals, None)


pure_callback_p.vjp = _pure_no_vjp
