"""Rule builders shared by the neural-network primitives (softmax.py, conv.py)."""
from __future__ import annotations

from typing import Any, Callable

from funcgrad import _dtypes
from funcgrad._core import Primitive, transform
from funcgrad._dtypes import ShapedArray, describe
from funcgrad.primitives.shape import move_to_front, reduce_sum, reshape, shape_of

# --------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------


def _sum_last(v: Any) -> Any:
    """Sum over the last axis, keeping it (size 1) so it broadcasts back."""
    shape = shape_of(v)
    return reshape(reduce_sum(v, (len(shape) - 1,)), shape[:-1] + (1,))


def _expand_last(v: Any) -> Any:
    """``v`` (...) as (..., 1)."""
    return reshape(v, shape_of(v) + (1,))


def _require_float(name: str, *xs: Any) -> None:
    for x in xs:
        if _dtypes.kind(x.dtype) != "f":
            raise TypeError(f"{name}: expected a float array, got {describe(x)}")


def _composite_rules(p: Primitive, composite: Callable[..., Any]) -> None:
    """Give ``p`` jvp and vjp rules by differentiating ``composite``.

    ``composite(*args, **params)`` computes what ``p`` computes, written with
    differentiable primitives.  ``p``'s own implementation is a fused kernel
    used on the fast path; these rules are only reached when a derivative
    of ``p`` itself is needed (second order and up), where the composite's
    extra passes are the price of generality.
    """
    def jvp(primals, tangents, **params):
        outs, tangent_outs = transform("jvp")(lambda *xs: [composite(*xs, **params)], list(primals), list(tangents))
        return outs[0], tangent_outs[0]

    def vjp(ct, primals, out, needs, **params):
        _, pullback = transform("vjp")(lambda *xs: [composite(*xs, **params)], list(primals))
        cts = pullback([ct])
        return [c if need else None for c, need in zip(cts, needs)]

    p.jvp, p.vjp = jvp, vjp


def _fold_batch(p: Primitive) -> Callable:
    """vmap rule: fold the mapped axis into the leading (example) axis N.

    Every argument gets its mapped axis in front (unmapped ones are
    broadcast), ``(B, N, ...)`` becomes ``(B*N, ...)``, the primitive runs
    once, and each output is unfolded back to ``(B, N, ...)``.  Correct for
    primitives that treat the examples along axis 0 independently.
    """

    def rule(values, dims, size, **params):
        folded = []
        for v, d in zip(values, dims):
            v = move_to_front(v, d, size)
            shape = shape_of(v)
            folded.append(reshape(v, (shape[0] * shape[1],) + shape[2:]))
        out = p.bind(*folded, **params)
        outs = out if p.multiple_results else [out]
        unfolded = [reshape(o, (size, shape_of(o)[0] // size) + shape_of(o)[1:]) for o in outs]
        if p.multiple_results:
            return unfolded, [0] * len(unfolded)
        return unfolded[0], 0
    return rule


def _batch_last_axis(p: Primitive) -> Callable:
    """vmap rule for a primitive over the last axis: mapped axis to the front."""
    def rule(values, dims, size, **params):
        return p.bind(*[move_to_front(v, d, size) for v, d in zip(values, dims)], **params), 0
    return rule


def _same_aval_over_last_axis(name: str) -> Callable:
    def rule(x, *others):
        if len(x.shape) == 0:
            raise ValueError(f"{name}: needs an array with at least one axis, got {describe(x)}")
        _require_float(name, x)
        for o in others:
            if tuple(o.shape) != tuple(x.shape):
                raise ValueError(f"{name}: arrays {describe(x)} and {describe(o)} must have the same shape")
        return ShapedArray(x.shape, x.dtype)
    return rule


