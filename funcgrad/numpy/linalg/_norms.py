"""Norms, rank and condition number of ``funcgrad.numpy.linalg``: ``norm``, ``vector_norm``,
``matrix_norm``, ``matrix_rank`` and ``cond``. Shared helpers are in ``_base``; decompositions in
``_decomp``, solves in ``_solve``, products in ``_products``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._dtypes import describe
from funcgrad.numpy._base import arr, normalize_axes, promote_inexact
from funcgrad.numpy._elementwise import abs, divide, isnan, multiply, power, sqrt, where
from funcgrad.numpy._reductions import max, min, sum
from funcgrad.numpy._shape import ravel, reshape
from funcgrad import lax
from funcgrad.numpy.linalg._base import _matrix, max_
from funcgrad.numpy.linalg._decomp import svdvals
from funcgrad.numpy.linalg._solve import inv
from funcgrad.typing import Array, ArrayLike


def norm(x: ArrayLike, ord: Any = None, axis: int | Sequence[int] | None = None,  # noqa: A002
         keepdims: bool = False) -> Array:
    """Vector norms (``ord`` None/2, 1, inf, -inf, 0, any p) and matrix norms (``'fro'``, ``'nuc'``,
    1, -1, 2, -2, inf, -inf) over ``axis`` (int, 2-tuple or None: all axes of a 1-d/2-d array).

    >>> norm(fnp.array([3.0, 4.0]))
    Array(5., dtype=float32)
    """
    (x,) = promote_inexact(arr(x))
    if axis is None and ord is None:
        out = sqrt(sum(_abs2(x), None))
        return reshape(out, (1,) * x.ndim) if keepdims else out
    if axis is None and x.ndim > 2:
        raise ValueError(f"norm: with ord={ord!r}, axis must be given for an array of more than 2 dimensions "
                         f"({describe(x)})")
    axes = normalize_axes("norm", axis if axis is not None else tuple(range(x.ndim)), x.ndim, x, keep_order=True)
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
    if isinstance(ord, str):
        raise ValueError(f"norm: ord={ord!r} is a matrix norm; a vector norm takes a number")
    if ord is None or ord == 2:
        return sqrt(sum(_abs2(x), axes, keepdims=keepdims))
    if ord == np.inf:
        return max(abs(x), axes, keepdims=keepdims)
    if ord == -np.inf:
        return min(abs(x), axes, keepdims=keepdims)
    if ord == 0:
        return sum(lax.convert_element_type(lax.ne_p.bind(x, 0), x.dtype), axes, keepdims=keepdims)
    if ord == 1:
        return sum(abs(x), axes, keepdims=keepdims)
    return power(sum(power(abs(x), float(ord)), axes, keepdims=keepdims), 1.0 / float(ord))


def _matrix_norm(x, ord, axes, keepdims):
    row, col = axes
    if ord is None or ord == "fro":
        return sqrt(sum(_abs2(x), tuple(sorted(axes)), keepdims=keepdims))
    if ord in (1, -1):
        sums = sum(abs(x), row, keepdims=True)
        out = (max if ord == 1 else min)(sums, col, keepdims=True)
    elif ord in (np.inf, -np.inf):
        sums = sum(abs(x), col, keepdims=True)
        out = (max if ord == np.inf else min)(sums, row, keepdims=True)
    elif ord in (2, -2, "nuc"):
        s = svdvals(_to_end(x, row, col))
        if ord == 2:
            out = s[..., 0]
        elif ord == -2:
            out = s[..., -1]
        else:
            out = sum(s, axis=-1)
        if keepdims:
            shape = list(x.shape)
            shape[row] = shape[col] = 1
            out = reshape(out, tuple(shape))
        return out
    else:
        raise ValueError(f"norm: invalid matrix norm ord={ord!r}; use 'fro', 'nuc', 1, -1, 2, -2, inf or -inf")
    return out if keepdims else reshape(out, tuple(s for i, s in enumerate(x.shape) if i not in axes))


def _to_end(x, row, col):
    rest = [i for i in range(x.ndim) if i not in (row, col)]
    return lax.transpose(x, tuple(rest) + (row, col))


def vector_norm(x: ArrayLike, /, *, axis: int | Sequence[int] | None = None, keepdims: bool = False,
                ord: Any = 2) -> Any:
    """Vector norm over ``axis`` (None: all elements, as one flat vector).

    >>> vector_norm(fnp.ones((2, 2)))
    Array(2., dtype=float32)
    """
    (x,) = promote_inexact(arr(x))
    if axis is None:
        out = _vector_norm(ravel(x), ord, (0,), False)
        return reshape(out, (1,) * x.ndim) if keepdims else out
    axes = normalize_axes("vector_norm", axis, x.ndim, x)
    return _vector_norm(x, ord, axes, keepdims)


def matrix_norm(x: ArrayLike, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:
    """Matrix norm of the last two axes (``ord`` as :func:`norm`).

    >>> matrix_norm(fnp.eye(2))   # sqrt(2)
    Array(1.4142, dtype=float32)
    """
    x = arr(x)
    if x.ndim < 2:
        raise ValueError(f"linalg.matrix_norm: expected an array of at least 2 dimensions, got {describe(x)}")
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def matrix_rank(M: Any, rtol: Any = None, *, hermitian: bool = False, tol: Any = None) -> Array:
    """Number of singular values above ``rtol`` (default ``max(s) * max(m, n) * eps``); int32 (...).
    Its gradient is zero.

    >>> matrix_rank(fnp.array([[1.0, 0.0], [0.0, 0.0]]))
    Array(1, dtype=int32)
    """
    if tol is not None:
        if rtol is not None:
            raise ValueError("linalg.matrix_rank: only one of tol or rtol may be specified")
        rtol = tol
    (M,) = promote_inexact(arr(M))
    if M.ndim < 2:
        return lax.convert_element_type(max(lax.convert_element_type(lax.ne_p.bind(M, 0), np.int32)), np.int32)
    s = svdvals(lax.stop_gradient_p.bind(M))
    if rtol is None:
        rtol = multiply(max(s, axis=-1), float(max_(M.shape[-2:])) * float(_dtypes.finfo(s.dtype).eps))
    rtol = arr(rtol) if not isinstance(rtol, (int, float)) else float(rtol)
    if not isinstance(rtol, float):
        rtol = reshape(rtol, rtol.shape + (1,))
    return sum(lax.convert_element_type(lax.gt_p.bind(s, rtol), np.int32), axis=-1)


def cond(x: Any, p: Any = None) -> Array:
    """Condition number: ``p`` None/2 (largest over smallest singular value), -2, or any matrix-norm ``ord``
    (square matrices: ``norm(x, p) * norm(inv(x), p)``). A singular matrix gives inf.

    >>> cond(fnp.array([[1.0, 0.0], [0.0, 2.0]]))
    Array(2., dtype=float32)
    """
    x = _matrix("cond", x)
    if x.shape[-1] == 0 or x.shape[-2] == 0:
        raise ValueError(f"linalg.cond: input array must not be empty; got {describe(x)}")
    if p is None or p == 2:
        s = svdvals(x)
        return divide(s[..., 0], s[..., -1])
    if p == -2:
        s = svdvals(x)
        r = divide(s[..., -1], s[..., 0])
    else:
        if x.shape[-1] != x.shape[-2]:
            raise ValueError(f"linalg.cond: for p={p!r}, the matrix must be square; got {describe(x)}")
        r = multiply(norm(x, ord=p, axis=(-2, -1)), norm(inv(x), ord=p, axis=(-2, -1)))
    bad = max(lax.convert_element_type(isnan(x), np.int32), axis=(-2, -1))
    return where(lax.convert_element_type(isnan(r), np.int32) > bad, np.inf, r)
