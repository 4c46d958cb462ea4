"""What the functions of ``funcgrad.numpy.linalg`` share: their named result types (``EigResult``,
``EighResult``, ``QRResult``, ``SlogdetResult``, ``SVDResult``) and small helpers (a matrix argument check,
the batched transpose, the diagonal, a batched identity). The functions are in ``_products`` (products,
diagonals, traces, powers), ``_decomp`` (decompositions), ``_solve`` (solves, inverses, determinants,
least squares) and ``_norms`` (norms, rank, condition number).
"""
from __future__ import annotations

import builtins
import collections
from typing import Any

import numpy as np

from funcgrad._core import Tracer
from funcgrad._dtypes import describe
from funcgrad.numpy._base import arr, promote_inexact
from funcgrad.numpy._shape import broadcast_to
from funcgrad import lax


EigResult = collections.namedtuple("EigResult", ["eigenvalues", "eigenvectors"])
EighResult = collections.namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
QRResult = collections.namedtuple("QRResult", ["Q", "R"])
SlogdetResult = collections.namedtuple("SlogdetResult", ["sign", "logabsdet"])
SVDResult = collections.namedtuple("SVDResult", ["U", "S", "Vh"])
EigResult.__doc__ = """``eig``'s result: ``(eigenvalues, eigenvectors)`` (complex).

    >>> fnp.linalg.eig(fnp.diag(fnp.array([1.0, 2.0]))).eigenvalues
    Array([1.+0.j, 2.+0.j], dtype=complex64)
    """
EighResult.__doc__ = """``eigh``'s result: ``(eigenvalues, eigenvectors)``, eigenvalues ascending.

    >>> fnp.linalg.eigh(fnp.diag(fnp.array([2.0, 1.0]))).eigenvalues
    Array([1., 2.], dtype=float32)
    """
QRResult.__doc__ = """``qr``'s result: ``(Q, R)``.

    >>> fnp.linalg.qr(fnp.eye(2)).R.shape
    (2, 2)
    """
SlogdetResult.__doc__ = """``slogdet``'s result: ``(sign, logabsdet)`` with ``det = sign * exp(logabsdet)``.

    >>> fnp.linalg.slogdet(fnp.diag(fnp.array([-2.0, 3.0])))
    SlogdetResult(sign=Array(-1., dtype=float32), logabsdet=Array(1.7918, dtype=float32))
    """
SVDResult.__doc__ = """``svd``'s result: ``(U, S, Vh)`` with ``a = U @ diag(S) @ Vh``, S descending.

    >>> fnp.linalg.svd(fnp.diag(fnp.array([3.0, 2.0]))).S
    Array([3., 2.], dtype=float32)
    """


def _matrix(name: str, a: Any, square: bool = False) -> Any:
    (a,) = promote_inexact(arr(a))
    if a.ndim < 2:
        raise ValueError(f"linalg.{name}: expected a matrix or a stack of matrices (at least 2-d), got "
                         f"{describe(a)}")
    if square and a.shape[-1] != a.shape[-2]:
        raise ValueError(f"linalg.{name}: expected square matrices (shape (..., n, n)), got {describe(a)}")
    return a


def _mT(x: Any) -> Any:
    nd = x.ndim
    return lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _diag(x: Any, offset: int = 0) -> Any:
    m, n = x.shape[-2:]
    k = max_(0, min_(m + min_(offset, 0), n - max_(offset, 0)))
    rows = np.arange(k) - min_(offset, 0)
    cols = np.arange(k) + max_(offset, 0)
    return x[..., rows, cols]


max_, min_ = builtins.max, builtins.min


def _eye_like(a: Any) -> Any:
    n = a.shape[-1]
    return broadcast_to(lax.convert_element_type(np.eye(n), a.dtype), a.shape)


def _concrete(x: Any) -> bool:
    return not isinstance(x, Tracer)
