"""funcgrad.numpy: diagonals and triangles (diagonal, trace, diag, tril/triu indices, fill_diagonal)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from funcgrad import _dtypes
from funcgrad._dtypes import describe
from funcgrad import lax
from funcgrad.numpy._base import arr, index_arg, normalize_axis
from funcgrad.numpy._shape import ravel
from funcgrad.numpy._arrays import _const, _py_max, _py_min, _take
from funcgrad.numpy._selection import nonzero
from funcgrad.typing import Array, ArrayLike, DTypeLike

__all__ = [
    "diag", "diag_indices", "diag_indices_from", "diagflat", "diagonal", "fill_diagonal", "mask_indices", "trace",
    "tril_indices", "tril_indices_from", "triu_indices", "triu_indices_from",
]


# ---------------------------------------------------------------------------------------------- diagonals


def diagonal(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Array:
    """The diagonal of ``a`` in the plane of ``axis1``/``axis2`` (``offset`` > 0: above it), as the last axis.

    >>> diagonal(fnp.arange(9).reshape(3, 3), 1)
    Array([1, 5], dtype=int32)
    """
    a = arr(a)
    if a.ndim < 2:
        raise ValueError(f"diagonal: needs an array of rank >= 2, got {describe(a)}")
    ax1, ax2 = normalize_axis("diagonal", axis1, a.ndim, a), normalize_axis("diagonal", axis2, a.ndim, a)
    if ax1 == ax2:
        raise ValueError(f"diagonal: axis1 and axis2 must differ, got both {ax1} for {describe(a)}")
    offset = index_arg("diagonal", "offset", offset)
    rest = [d for d in range(a.ndim) if d not in (ax1, ax2)]
    x = lax.transpose(a, tuple(rest) + (ax1, ax2))
    n, m = x.shape[-2:]
    length = _py_max(0, _py_min(n + _py_min(offset, 0), m - _py_max(offset, 0)))
    rows = np.arange(length, dtype=np.int32) + _py_max(-offset, 0)
    cols = np.arange(length, dtype=np.int32) + _py_max(offset, 0)
    return lax.getitem(x, (Ellipsis, _const(rows), _const(cols)))


def trace(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: DTypeLike | None = None,
          out: None = None) -> Array:
    """The sum along a diagonal (see :func:`diagonal`); bools and small ints sum as the default int.

    >>> trace(fnp.eye(3))
    Array(3., dtype=float32)
    """
    if out is not None:
        raise NotImplementedError("trace: the out argument is not supported (funcgrad arrays are immutable)")
    d = diagonal(a, offset, axis1, axis2)
    if dtype is not None:
        d = lax.convert_element_type(d, dtype)
    elif d.dtype.kind in "biu" and d.dtype.itemsize < _dtypes.int_.itemsize or d.dtype.kind == "b":
        d = lax.convert_element_type(d, _dtypes.int_)
    return lax.reduce_sum(d, (d.ndim - 1,))


def diag(v: ArrayLike, k: int = 0) -> Array:
    """A 1-d ``v`` placed on diagonal ``k`` of a square matrix, or diagonal ``k`` of a 2-d ``v``.

    >>> diag(fnp.array([1.0, 2.0]))
    Array([[1., 0.],
           [0., 2.]], dtype=float32)
    """
    v = arr(v)
    k = index_arg("diag", "k", k)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError(f"diag: v must be 1-d or 2-d, got {describe(v)}")
    n = v.shape[0] + abs(k)
    i, j = np.indices((n, n))
    src = np.where(j - i == k, np.minimum(i, j), v.shape[0])   # v's index on the diagonal, else the padding slot
    padded = lax.pad_p.bind(v, widths=((0, 1),), value=False if v.dtype.kind == "b" else 0)
    return _take(padded, _const(src.astype(np.int32)), 0)


def diagflat(v: ArrayLike, k: int = 0) -> Array:
    """The flattened ``v`` placed on diagonal ``k`` of a square matrix.

    >>> diagflat(fnp.ones((2, 1))).shape
    (2, 2)
    """
    return diag(ravel(v), k)


def diag_indices(n: int, ndim: int = 2) -> tuple:
    """The indices of the main diagonal of an ``(n,) * ndim`` array: ``ndim`` copies of ``arange(n)``.

    >>> diag_indices(3)[0]
    Array([0, 1, 2], dtype=int32)
    """
    n, ndim = index_arg("diag_indices", "n", n), index_arg("diag_indices", "ndim", ndim)
    if n < 0 or ndim < 0:
        raise ValueError(f"diag_indices: n and ndim must be >= 0, got n={n}, ndim={ndim}")
    return (_const(np.arange(n), _dtypes.int_),) * ndim


def diag_indices_from(arr: ArrayLike) -> tuple:  # noqa: F811 -- numpy's parameter name
    """:func:`diag_indices` for ``arr``, whose axes must all have the same length (rank >= 2).

    >>> len(diag_indices_from(fnp.ones((2, 2, 2))))
    3
    """
    shape = np.shape(arr) if not hasattr(arr, "shape") else tuple(arr.shape)
    if len(shape) < 2 or len(set(shape)) != 1:
        raise ValueError(f"diag_indices_from: needs an array of rank >= 2 with all axes of equal length, got shape "
                         f"{shape}")
    return diag_indices(shape[0], len(shape))


def _tri_indices(name: str, fn: Callable, n: Any, k: Any, m: Any) -> tuple:
    n = index_arg(name, "n", n)
    k = index_arg(name, "k", k)
    m = n if m is None else index_arg(name, "m", m)
    if n < 0 or m < 0:
        raise ValueError(f"{name}: n and m must be >= 0, got n={n}, m={m}")
    return tuple(_const(i, _dtypes.int_) for i in fn(n, k, m))


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple:
    """Row and column indices of the lower triangle (on and below diagonal ``k``) of an ``n x m`` matrix.

    >>> tril_indices(2)
    (Array([0, 1, 1], dtype=int32), Array([0, 0, 1], dtype=int32))
    """
    return _tri_indices("tril_indices", np.tril_indices, n, k, m)


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple:
    """Row and column indices of the upper triangle (on and above diagonal ``k``) of an ``n x m`` matrix.

    >>> triu_indices(2)
    (Array([0, 0, 1], dtype=int32), Array([0, 1, 1], dtype=int32))
    """
    return _tri_indices("triu_indices", np.triu_indices, n, k, m)


def _tri_from(name: str, fn: Callable, arr: Any, k: int) -> tuple:
    shape = np.shape(arr) if not hasattr(arr, "shape") else tuple(arr.shape)
    if len(shape) != 2:
        raise ValueError(f"{name}: needs a 2-d array, got shape {shape}")
    return fn(shape[0], k, shape[1])


def tril_indices_from(arr: ArrayLike, k: int = 0) -> tuple:  # noqa: F811
    """:func:`tril_indices` for the shape of a 2-d ``arr``.

    >>> tril_indices_from(fnp.ones((2, 3)))
    (Array([0, 1, 1], dtype=int32), Array([0, 0, 1], dtype=int32))
    """
    return _tri_from("tril_indices_from", tril_indices, arr, k)


def triu_indices_from(arr: ArrayLike, k: int = 0) -> tuple:  # noqa: F811
    """:func:`triu_indices` for the shape of a 2-d ``arr``.

    >>> triu_indices_from(fnp.ones((2, 3)))
    (Array([0, 0, 0, 1, 1], dtype=int32), Array([0, 1, 2, 1, 2], dtype=int32))
    """
    return _tri_from("triu_indices_from", triu_indices, arr, k)


def mask_indices(n: int, mask_func: Callable, k: int = 0, *, size: int | None = None) -> tuple:
    """The indices where ``mask_func(ones((n, n)), k)`` is nonzero (e.g. ``mask_indices(3, fnp.triu)``).

    >>> mask_indices(2, fnp.triu)
    (Array([0, 0, 1], dtype=int32), Array([0, 1, 1], dtype=int32))
    """
    from funcgrad.numpy._creation import ones
    n = index_arg("mask_indices", "n", n)
    return nonzero(mask_func(ones((n, n), np.int32), k), size=size)


def _no_inplace(name: str, inplace: bool) -> None:
    if inplace:
        raise ValueError(f"{name} cannot modify arrays in place, because funcgrad arrays are immutable (as JAX's): "
                         f"pass inplace=False to get the updated array back")


def fill_diagonal(a: ArrayLike, val: Any, wrap: bool = False, *, inplace: bool = True) -> Any:
    """``a`` with its main diagonal set to ``val`` (repeated as needed); needs ``inplace=False``, as JAX.

    For rank > 2 every axis must have the same length; ``wrap=True`` continues the diagonal below a tall
    matrix every ``m + 1`` rows, as numpy.

    >>> fill_diagonal(fnp.zeros((2, 2)), 5.0, inplace=False)
    Array([[5., 0.],
           [0., 5.]], dtype=float32)
    """
    _no_inplace("fill_diagonal", inplace)
    a = arr(a)
    if a.ndim < 2:
        raise ValueError(f"fill_diagonal: needs an array of rank >= 2, got {describe(a)}")
    if a.ndim > 2 and len(set(a.shape)) != 1:
        raise ValueError(f"fill_diagonal: an array of rank > 2 must have all axes of equal length, got {describe(a)}")
    if a.ndim == 2:
        step = a.shape[1] + 1
        end = a.size if wrap else _py_min(a.size, a.shape[1] * a.shape[1])
    else:
        step = 1 + int(np.cumprod(a.shape[:-1]).sum())
        end = a.size
    positions = np.arange(0, end, step, dtype=np.int32)
    vals = ravel(arr(val))
    if vals.size == 0 or positions.size == 0:
        return a
    vals = _take(vals, _const(np.arange(positions.size, dtype=np.int32) % vals.size), 0)
    out = lax.scatter(ravel(a), _const(positions), lax.convert_element_type(vals, a.dtype))
    return lax.reshape(out, a.shape)
