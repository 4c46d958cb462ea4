"""matmul, dot, tensordot, outer, einsum."""
from __future__ import annotations

import string
from typing import Any

from funcgrad._dtypes import describe
from funcgrad.numpy._base import arr, promote
from funcgrad.numpy._elementwise import multiply
from funcgrad.numpy._shape import ravel
from funcgrad.lax import reshape
from funcgrad import lax


def matmul(x: Any, y: Any) -> Any:
    """numpy's ``x @ y``: 1-d operands are promoted and the added axis removed.

    >>> matmul(ones((2, 3)), ones((3,))).shape
    (2,)
    """
    x, y = promote(arr(x), arr(y))
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError(f"matmul: operands must be at least 1-d, got {describe(x)} and {describe(y)}")
    if x.shape[-1] != y.shape[-2 if y.ndim > 1 else 0]:
        # Checked here so the message shows the user's shapes (1-d operands are reshaped below).
        raise ValueError(f"matmul: shapes {describe(x)} and {describe(y)} do not match: the last axis of the first "
                         f"({x.shape[-1]}) must equal the {'second-to-last' if y.ndim > 1 else 'only'} axis of the "
                         f"second ({y.shape[-2 if y.ndim > 1 else 0]})")
    x2 = reshape(x, (1,) + x.shape) if x.ndim == 1 else x
    y2 = reshape(y, y.shape + (1,)) if y.ndim == 1 else y
    out = lax.matmul_p.bind(x2, y2)
    if x.ndim == 1 and y.ndim == 1:
        return reshape(out, ())
    if x.ndim == 1:
        return reshape(out, out.shape[:-2] + out.shape[-1:])
    if y.ndim == 1:
        return reshape(out, out.shape[:-1])
    return out


def einsum(spec: str, *operands: Any) -> Any:
    """Einstein summation with an explicit or implicit numpy spec (no ``...``).

    >>> einsum("bhqd,bhkd->bhqk", q, k)   # attention scores
    """
    xs = promote(*[arr(o) for o in operands])
    return lax.einsum(spec, *xs)


def tensordot(x: Any, y: Any, axes: Any = 2) -> Any:
    x, y = arr(x), arr(y)
    if isinstance(axes, int):
        ax_x = list(range(x.ndim - axes, x.ndim))
        ax_y = list(range(axes))
    else:
        ax_x, ax_y = ([a] if isinstance(a, int) else list(a) for a in axes)
    ax_x = [a % x.ndim for a in ax_x]
    ax_y = [a % y.ndim for a in ax_y]
    if len(ax_x) != len(ax_y) or any(x.shape[a] != y.shape[b] for a, b in zip(ax_x, ax_y)):
        raise ValueError(f"tensordot: contracted axes {ax_x} of {describe(x)} and {ax_y} of {describe(y)} "
                         "must have equal sizes")
    letters = iter(string.ascii_letters)
    lx = [next(letters) for _ in range(x.ndim)]
    ly = [next(letters) for _ in range(y.ndim)]
    for a, b in zip(ax_x, ax_y):
        ly[b] = lx[a]
    out = [c for i, c in enumerate(lx) if i not in ax_x] + [c for i, c in enumerate(ly) if i not in ax_y]
    return einsum("".join(lx) + "," + "".join(ly) + "->" + "".join(out), x, y)


def dot(x: Any, y: Any) -> Any:
    """numpy's ``dot``: products for scalars, matmul for 1-d/2-d, tensordot beyond."""
    x, y = arr(x), arr(y)
    if x.ndim == 0 or y.ndim == 0:
        return multiply(x, y)
    if x.ndim <= 2 and y.ndim <= 2:
        return matmul(x, y)
    return tensordot(x, y, axes=([x.ndim - 1], [max(y.ndim - 2, 0)]))


def vdot(x: Any, y: Any) -> Any:
    x = ravel(x)
    if x.dtype.kind == "c":   # numpy's vdot conjugates its first argument
        x = lax.conj(x)
    return dot(x, ravel(y))


def inner(x: Any, y: Any) -> Any:
    x, y = arr(x), arr(y)
    if x.ndim == 0 or y.ndim == 0:
        return multiply(x, y)
    return tensordot(x, y, axes=([x.ndim - 1], [y.ndim - 1]))


def outer(x: Any, y: Any) -> Any:
    x, y = ravel(arr(x)), ravel(arr(y))
    return multiply(reshape(x, (x.shape[0], 1)), reshape(y, (1, y.shape[0])))
