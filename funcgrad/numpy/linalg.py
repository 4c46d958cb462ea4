"""``funcgrad.numpy.linalg``: norms.

The gradient of the 2-norm at exactly zero is NaN (``0/0``), as in JAX.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad._dtypes import describe
from funcgrad.numpy._base import arr, normalize_axes, promote_inexact
from funcgrad.numpy._elementwise import abs, power, sqrt
from funcgrad.numpy._reductions import max, min, sum
from funcgrad import lax

__all__ = ["norm"]


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A002
    """Vector norms (``ord`` in None/2, 1, inf, -inf, 0, p) and matrix norms
    (``'fro'``, 1, -1, inf, -inf) over ``axis`` (int, 2-tuple or None).

    >>> norm(fnp.array([3.0, 4.0]))   # 5.0
    """
    (x,) = promote_inexact(arr(x))
    if axis is None and ord is None:
        return sqrt(sum(_abs2(x), None, keepdims))
    axes = normalize_axes("norm", axis if axis is not None else tuple(range(x.ndim)), x.ndim, x)
    if len(axes) == 1:
        return _vector_norm(x, ord, axes, keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes, keepdims)
    raise ValueError(f"norm: axis must name 1 or 2 axes for an array {describe(x)}, got {axis}")


def _abs2(x):
    """|x|^2 elementwise (real for complex x)."""
    if x.dtype.kind == "c":
        re, im = lax.real(x), lax.imag(x)
        return lax.add_p.bind(lax.mul_p.bind(re, re), lax.mul_p.bind(im, im))
    return lax.mul_p.bind(x, x)


def _vector_norm(x, ord, axes, keepdims):
    if ord is None or ord == 2:
        return sqrt(sum(_abs2(x), axes, keepdims))
    if ord == np.inf:
        return max(abs(x), axes, keepdims)
    if ord == -np.inf:
        return min(abs(x), axes, keepdims)
    if ord == 0:
        return sum(lax.convert_element_type(lax.ne_p.bind(x, 0), x.dtype), axes, keepdims)
    if ord == 1:
        return sum(abs(x), axes, keepdims)
    return power(sum(power(abs(x), float(ord)), axes, keepdims), 1.0 / float(ord))


def _matrix_norm(x, ord, axes, keepdims):
    row, col = axes
    if ord is None or ord == "fro":
        return sqrt(sum(_abs2(x), axes, keepdims))
    if ord in (1, -1):
        sums = sum(abs(x), row, keepdims=True)
        out = (max if ord == 1 else min)(sums, col, keepdims=True)
    elif ord in (np.inf, -np.inf):
        sums = sum(abs(x), col, keepdims=True)
        out = (max if ord == np.inf else min)(sums, row, keepdims=True)
    else:
        raise NotImplementedError(f"norm: matrix norm ord={ord!r} (needs an SVD) is not supported; "
                                  "use 'fro', 1, -1, inf or -inf")
    return out if keepdims else _squeeze_axes(out, axes)


def _squeeze_axes(x, axes):
    from funcgrad.lax import reshape
    return reshape(x, tuple(s for i, s in enumerate(x.shape) if i not in axes))
