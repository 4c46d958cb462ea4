"""Products and shapes of ``funcgrad.numpy.linalg``: ``matmul``, ``tensordot``, ``vecdot``, ``cross``,
``outer``, ``matrix_transpose``, ``diagonal``, ``trace``, ``multi_dot`` and ``matrix_power``. Shared helpers
are in ``_base``; decompositions in ``_decomp``, solves in ``_solve``, norms in ``_norms``.
"""
from __future__ import annotations

import string
from typing import Any, Sequence

import numpy as np

from funcgrad._dtypes import describe
from funcgrad.numpy._base import arr
from funcgrad.numpy._reductions import sum
from funcgrad.numpy._shape import broadcast_to
from funcgrad.numpy import _linalg
from funcgrad.numpy._linalg import cross as _cross, outer as _outer, tensordot as _tensordot, vecdot as _vecdot
from funcgrad import lax
from funcgrad.numpy.linalg._base import _diag, _mT
from funcgrad.numpy.linalg._solve import inv
from funcgrad.typing import ArrayLike, DTypeLike


def matmul(x1: ArrayLike, x2: ArrayLike, /, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """Matrix product (numpy ``@``), see :func:`funcgrad.numpy.matmul`.

    >>> matmul(fnp.ones((2, 3)), fnp.ones(3)).shape
    (2,)
    """
    out = _linalg.matmul(x1, x2)
    return out if preferred_element_type is None else lax.convert_element_type(out, preferred_element_type)


def tensordot(x1: ArrayLike, x2: ArrayLike, /, *, axes: Any = 2, precision: Any = None,
              preferred_element_type: Any = None, out_sharding: Any = None) -> Any:
    """Tensor contraction over ``axes`` (an int or two sequences), see :func:`funcgrad.numpy.tensordot`.

    >>> tensordot(fnp.ones((2, 3)), fnp.ones((3, 4)), axes=1).shape
    (2, 4)
    """
    out = _tensordot(x1, x2, axes)
    return out if preferred_element_type is None else lax.convert_element_type(out, preferred_element_type)


def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1, precision: Any = None,
           preferred_element_type: Any = None) -> Any:
    """Dot product of vectors along ``axis`` (broadcasting the other axes).

    >>> vecdot(fnp.ones((2, 3)), fnp.arange(3.0))
    Array([3., 3.], dtype=float32)
    """
    return _vecdot(x1, x2, axis=axis, precision=precision, preferred_element_type=preferred_element_type)


def cross(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1) -> Any:
    """Cross product of 3-vectors along ``axis`` (other axes broadcast).

    >>> cross(fnp.array([1.0, 0.0, 0.0]), fnp.array([0.0, 1.0, 0.0]))
    Array([0., 0., 1.], dtype=float32)
    """
    x1, x2 = arr(x1), arr(x2)
    if x1.ndim == 0 or x2.ndim == 0 or x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(f"linalg.cross: both inputs must have size 3 along axis {axis}, got {describe(x1)} and "
                         f"{describe(x2)}")
    return _cross(x1, x2, axis=axis)


def outer(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    """Outer product of two 1-d arrays: (m,), (n,) -> (m, n).

    >>> outer(fnp.arange(2.0), fnp.arange(3.0)).shape
    (2, 3)
    """
    x1, x2 = arr(x1), arr(x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"linalg.outer: expected two 1-d arrays, got {describe(x1)} and {describe(x2)}")
    return _outer(x1, x2)


def matrix_transpose(x: ArrayLike, /) -> Any:
    """Swap the last two axes: (..., m, n) -> (..., n, m).

    >>> matrix_transpose(fnp.ones((2, 3, 4))).shape
    (2, 4, 3)
    """
    x = arr(x)
    if x.ndim < 2:
        raise ValueError(f"linalg.matrix_transpose: expected an array of at least 2 dimensions, got {describe(x)}")
    return _mT(x)


def diagonal(x: ArrayLike, /, *, offset: int = 0) -> Any:
    """Diagonals of a stack of matrices: (..., m, n) -> (..., k).

    >>> diagonal(fnp.eye(3))
    Array([1., 1., 1.], dtype=float32)
    """
    x = arr(x)
    if x.ndim < 2:
        raise ValueError(f"linalg.diagonal: expected an array of at least 2 dimensions, got {describe(x)}")
    return _diag(x, int(offset))


def trace(x: ArrayLike, /, *, offset: int = 0, dtype: DTypeLike | None = None) -> Any:
    """Sum of the diagonal of each matrix: (..., m, n) -> (...).

    >>> trace(fnp.eye(3))
    Array(3., dtype=float32)
    """
    x = arr(x)
    if x.ndim < 2:
        raise ValueError(f"linalg.trace: expected an array of at least 2 dimensions, got {describe(x)}")
    out = sum(_diag(x, int(offset)), axis=-1)
    return out if dtype is None else lax.convert_element_type(out, dtype)


def multi_dot(arrays: Sequence[Any], *, precision: Any = None) -> Any:
    """Product of a chain of matrices in the cheapest order (first/last may be 1-d).

    >>> multi_dot([fnp.ones((2, 3)), fnp.ones((3, 4)), fnp.ones(4)]).shape
    (2,)
    """
    arrays = [arr(a) for a in arrays]
    if len(arrays) < 2:
        raise ValueError(f"linalg.multi_dot: expected at least two arrays, got {len(arrays)}")
    for i, a in enumerate(arrays):
        allowed = (1, 2) if i in (0, len(arrays) - 1) else (2,)
        if a.ndim not in allowed:
            raise ValueError(f"linalg.multi_dot: array {i} is {describe(a)}; the first and last must be 1-d or "
                             "2-d, the others 2-d")
    letters = iter(string.ascii_letters)
    subs, prev = [], next(letters)
    first = prev
    for i, a in enumerate(arrays):
        if a.ndim == 1 and i == 0:
            nxt = prev
            subs.append(prev)
            continue
        if a.ndim == 1:
            subs.append(prev)
            nxt = None
            continue
        nxt = next(letters)
        subs.append(prev + nxt)
        prev = nxt
    out = ("" if arrays[0].ndim == 1 else first) + ("" if arrays[-1].ndim == 1 else prev)
    return _linalg.einsum(",".join(subs) + "->" + out, *arrays, optimize="optimal")


def matrix_power(a: ArrayLike, n: int) -> Any:
    """``a`` (..., m, m) to the integer power ``n`` (negative: powers of the inverse) by repeated squaring.

    >>> matrix_power(fnp.array([[1.0, 1.0], [0.0, 1.0]]), 3)
    Array([[1., 3.],
           [0., 1.]], dtype=float32)
    """
    a = arr(a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"linalg.matrix_power: expected square matrices (shape (..., n, n)), got {describe(a)}")
    try:
        n = int(n.__index__())
    except (AttributeError, TypeError):
        raise TypeError(f"linalg.matrix_power: the exponent must be an integer, got {n!r}") from None
    if n == 0:
        return broadcast_to(lax.convert_element_type(np.eye(a.shape[-1]), a.dtype), a.shape)
    if n < 0:
        a = inv(a)
        n = -n
    result, power_ = None, a
    while n:
        if n & 1:
            result = power_ if result is None else _linalg.matmul(result, power_)
        n >>= 1
        if n:
            power_ = _linalg.matmul(power_, power_)
    return result
